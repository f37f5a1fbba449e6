#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""e2e: lupinectl and the supervisor's ADMIN requests.

Usage: test_lupinectl.py PATH/TO/lupined PATH/TO/lupinectl

Checks: --help and usage errors (exit 2); a clear error for a missing
socket (exit 1); `status` with zero sessions and with one, as text and as
JSON (the keys, their order and types as lupined has always sent them); `drain` refused without a checkpoint provider (nothing happens);
`drain` with --checkpoint-dir: the daemon checkpoints the session and exits
0, and lupinectl follows it to the end ("drained: 1 session(s)
checkpointed, 0 lost"; the progress bar on a terminal and `sessions
checkpoint` are test_ckpt_now.py's); ADMIN over TCP refused; malformed ADMIN frames refused without hurting
the daemon.

Standard library only. Exit 0 on pass, 1 on failure (naming the case).
"""
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as w  # noqa: E402

OP_ADMIN = 4
EPERM, EINVAL = 1, 22

check = w.Checks()


class Daemon:
    def __init__(self, exe, tmp, label, args):
        self.sock = os.path.join(tmp, f"{label}.sock")
        self.port = w.free_port()
        self.log_path = os.path.join(tmp, f"{label}.log")
        self.logf = open(self.log_path, "wb")
        env = dict(os.environ)
        env.pop("LUPINE_CHECKPOINT_LIBRARY", None)
        env.pop("NOTIFY_SOCKET", None)
        self.proc = subprocess.Popen(
            [exe, "--backend", "sim", "--listen", f"unix:{self.sock}", "--listen", f"127.0.0.1:{self.port}"] + args,
            stdin=subprocess.DEVNULL, stdout=self.logf, stderr=self.logf, env=env)

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wait_log(self, pattern, timeout=15.0):
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            if rx.search(self.log()):
                return True
            time.sleep(0.05)
        return rx.search(self.log()) is not None

    def alive(self):
        return self.proc.poll() is None

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logf.close()


def ctl(exe, *args, env_socket=None):
    env = dict(os.environ)
    env.pop("LUPINE_ADMIN_SOCKET", None)
    if env_socket is not None:
        env["LUPINE_ADMIN_SOCKET"] = env_socket
    return subprocess.run([exe] + list(args), capture_output=True, text=True, timeout=60, env=env)


def raw_admin(addr, data):
    """Sends raw bytes as the first frame; returns (reply header or None, text)."""
    s = w.connect(addr)
    try:
        s.sendall(data)
        try:
            h, p = w.read_frame(s)
        except (ConnectionError, OSError):
            return None, ""
        text = p[2:2 + struct.unpack_from("<H", p)[0]].decode() if len(p) >= 2 else ""
        return h, text
    finally:
        s.close()


def test_usage(ctlexe, tmp):
    r = ctl(ctlexe, "--help")
    check("--help exits 0", r.returncode == 0 and "Usage: lupinectl" in r.stdout, r.stdout + r.stderr)
    r = ctl(ctlexe)
    check("no command is exit 2", r.returncode == 2 and "no command" in r.stderr, r.stderr)
    r = ctl(ctlexe, "frobnicate")
    check("unknown command is exit 2", r.returncode == 2 and "unknown command" in r.stderr, r.stderr)
    r = ctl(ctlexe, "--bogus", "status")
    check("unknown option is exit 2", r.returncode == 2, r.stderr)
    missing = os.path.join(tmp, "nothing.sock")
    r = ctl(ctlexe, "--socket", missing, "status")
    check("missing socket is exit 1 with a clear error", r.returncode == 1 and
          f"cannot connect to {missing}: No such file or directory" in r.stderr, r.stderr)
    r = ctl(ctlexe, "status", env_socket=missing)
    check("LUPINE_ADMIN_SOCKET is used", r.returncode == 1 and missing in r.stderr, r.stderr)


def test_status_and_refusals(exe, ctlexe, tmp):
    d = Daemon(exe, tmp, "plain", [])
    try:
        ready = d.wait_log(r"lupined \S+ ready")
        check("daemon starts", ready, d.log())
        if not ready:
            return
        r = ctl(ctlexe, "--socket", d.sock, "status")
        check("status with no sessions", r.returncode == 0 and "backend sim, not draining, 0 session(s)" in r.stdout,
              r.stdout + r.stderr)

        cs, _, _ = w.handshake(d.sock, "job1")
        # The worker answers HELLO before its READY reaches the supervisor:
        # the session shows "starting" for a moment.
        deadline = time.monotonic() + 10
        while True:
            r = ctl(ctlexe, "status", env_socket=d.sock)
            if " serving " in r.stdout or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        check("status with one session", r.returncode == 0 and "1 session(s)" in r.stdout and
              re.search(r"^job1 +slot 0 +serving +pid \d+  tenant -  client unix:.+?  memory \d+ (B|KiB|MiB|GiB)  "
                        r"\d+ calls/s  \d+ (B|KiB|MiB|GiB)/s  never checkpointed$", r.stdout, re.M) is not None,
              r.stdout + r.stderr)
        r = ctl(ctlexe, "--socket", d.sock, "--json", "status")
        try:
            js = json.loads(r.stdout)
        except ValueError:
            js = None
        check("status --json parses", r.returncode == 0 and js is not None, r.stdout + r.stderr)
        if js:
            check("status --json content", js["backend"] == "sim" and js["draining"] is False and
                  js["count"] == 1 and js["sessions"][0]["name"] == "job1" and
                  js["sessions"][0]["state"] == "serving" and js["sessions"][0]["pid"] > 0, r.stdout)
            # the keys, their order and the types lupined has always sent,
            # then the limits (docs/security.md)
            check("status --json keys", list(js) == ["version", "backend", "draining", "stopping", "checkpoints",
                                                     "max_sessions", "sessions", "count", "limits",
                                                     "limit_hits", "health"] and
                  js["limits"]["max_pending"] == 256 and js["limit_hits"]["max_pending"] == 0 and
                  list(js["sessions"][0]) == ["name", "slot", "state", "pid", "tenant", "client", "calls",
                                              "calls_per_s", "bytes_in", "bytes_out", "bytes_per_s", "memory",
                                              "checkpoint_epoch", "checkpoint_age_s"] and
                  js["sessions"][0]["tenant"] == "" and js["sessions"][0]["checkpoint_age_s"] == -1 and
                  isinstance(js["version"], str) and js["checkpoints"] is False and js["stopping"] is False and
                  js["max_sessions"] == 64 and js["sessions"][0]["slot"] == 0, r.stdout)
            check("status --json is compact", r.stdout.startswith('{"version":"') and
                  json.dumps(js, separators=(",", ":"), ensure_ascii=False) == r.stdout.strip() and
                  '"sessions":[{"name":"job1","slot":0,"state":"serving","pid":' in r.stdout, r.stdout)

        r = ctl(ctlexe, "--socket", d.sock, "drain")
        check("drain without a provider is refused", r.returncode == 1 and
              "no checkpoint provider" in r.stderr, r.stdout + r.stderr)
        time.sleep(0.2)
        check("... and the daemon keeps serving", d.alive() and
              ctl(ctlexe, "--socket", d.sock, "status").returncode == 0)

        req = w.frame(OP_ADMIN, struct.pack("<H", 1), flags=w.F_SYNC)
        h, text = raw_admin(("127.0.0.1", d.port), req)
        check("ADMIN over TCP is refused", h is not None and h["op"] == OP_ADMIN and h["status"] == EPERM and
              "UNIX" in text, f"{h} {text!r}")
        check("... with a logged reason", d.wait_log(r"closing connection from 127\.0\.0\.1:\d+: ADMIN is accepted only"
                                                     r" on UNIX-socket listeners", 5), d.log())

        bad = {
            "empty payload": w.frame(OP_ADMIN, b"", flags=w.F_SYNC),
            "short payload": w.frame(OP_ADMIN, b"\x01", flags=w.F_SYNC),
            "long payload": w.frame(OP_ADMIN, b"\x01\x00\x00", flags=w.F_SYNC),
            "unknown command": w.frame(OP_ADMIN, b"\x7f\x00", flags=w.F_SYNC),
            "checkpoint without a name": w.frame(OP_ADMIN, b"\x09\x00", flags=w.F_SYNC),
            "command zero": w.frame(OP_ADMIN, b"\x00\x00", flags=w.F_SYNC),
            "not sync": w.frame(OP_ADMIN, b"\x01\x00", flags=0),
            "reply flag": w.frame(OP_ADMIN, b"\x01\x00", flags=w.F_SYNC | w.F_REPLY),
            "huge length": w.frame(OP_ADMIN, b"", flags=w.F_SYNC, length=1 << 20),
        }
        for name, data in bad.items():
            h, text = raw_admin(d.sock, data)
            check(f"garbage ADMIN ({name}) is refused", h is not None and h["op"] == OP_ADMIN and
                  h["status"] == EINVAL and text, f"{h} {text!r}")
        # a truncated frame, then the peer goes away
        s = w.connect(d.sock)
        s.sendall(w.frame(OP_ADMIN, b"\x01\x00", flags=w.F_SYNC)[:41])
        s.close()
        time.sleep(0.2)
        r = ctl(ctlexe, "--socket", d.sock, "status")
        check("the daemon survives garbage ADMIN frames", d.alive() and r.returncode == 0 and
              "1 session(s)" in r.stdout, r.stdout + r.stderr)

        cs.sendall(w.frame(w.OP_GOODBYE, seq=1))
        w.wait_closed(cs, 10)
        cs.close()
    finally:
        d.close()


def test_drain(exe, ctlexe, tmp):
    ck = os.path.join(tmp, "ck")
    os.mkdir(ck)
    d = Daemon(exe, tmp, "ckpt", ["--checkpoint-dir", ck])
    try:
        ready = d.wait_log(r"lupined \S+ ready")
        check("daemon with --checkpoint-dir starts", ready, d.log())
        if not ready:
            return
        cs, _, _ = w.handshake(d.sock, "job2")
        r = ctl(ctlexe, "--socket", d.sock, "drain")
        check("drain is accepted and followed to its end", r.returncode == 0 and
              "draining: checkpointing 1 session(s)" in r.stdout and
              re.search(r"^drained: 1 session\(s\) checkpointed, 0 lost", r.stdout, re.M), r.stdout + r.stderr)
        try:
            rc = d.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            rc = None
        check("the daemon exits 0 after the drain", rc == 0, f"rc {rc}\n{d.log()}")
        check("the log says the session was checkpointed", "session job2 checkpointed" in d.log(), d.log())
        check("the log names the ADMIN request", "ADMIN DRAIN from" in d.log(), d.log())
        cs.close()
    finally:
        d.close()


def check_monitor(ctlexe, sock):
    """monitor in a pseudo-terminal: two redraws with the GPU and the session, then q ends it."""
    import pty
    import select
    master, slave = pty.openpty()
    p = subprocess.Popen([ctlexe, "-s", sock, "monitor", "-i", "300"], stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    out, deadline = b"", time.monotonic() + 15
    while out.count(b"\033[H\033[2J") < 2 and time.monotonic() < deadline:
        if select.select([master], [], [], 0.5)[0]:
            try:
                out += os.read(master, 65536)
            except OSError:
                break
    os.write(master, b"q")
    try:
        rc = p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = "hung"
    os.close(master)
    text = out.decode(errors="replace")
    check("monitor (pty): redrawn in place twice, GPU and session shown, q quits", rc == 0 and
          out.count(b"\033[H\033[2J") >= 2 and "(q quits)" in text and re.search(r"\n0 +\d+ +[\d.]+ +\d+ ", text)
          and re.search(r"job2 +serving", text), f"rc {rc}: {text[-800:]!r}")
    r = subprocess.run([ctlexe, "-s", sock, "monitor", "-n", "2", "-i", "100"], capture_output=True, text=True,
                       timeout=30)
    check("monitor -n 2 without a terminal: two refreshes, one after the other",
          r.returncode == 0 and r.stdout.count("lupined at") == 2 and "\033[" not in r.stdout, r.stdout + r.stderr)
    r = subprocess.run([ctlexe, "-s", sock, "monitor", "-i", "5"], capture_output=True, text=True, timeout=30)
    check("monitor -i 5: bad usage", r.returncode == 2, r.stderr)


def test_more_commands(exe, ctlexe, tmp):
    """info, config show/set, sessions show/kill, --version, -d, ADMIN arguments."""
    ck = os.path.join(tmp, "more-ck")
    d = Daemon(exe, tmp, "more", ["--checkpoint-dir", ck])
    try:
        if not d.wait_log(r"lupined \S+ ready"):
            check("daemon starts (more commands)", False, d.log())
            return
        r = ctl(ctlexe, "--version")
        check("--version", r.returncode == 0 and re.match(r"^lupinectl \d+\.\d+\.\d+$", r.stdout.strip()), r.stdout)
        r = ctl(ctlexe, "-s", d.sock, "info")
        check("info: the simulated GPU, its UUID and memory", r.returncode == 0 and
              "GPU 0: lupine simulated GPU #0 (sim)" in r.stdout and re.search(r"uuid +GPU-[0-9a-f-]{36}", r.stdout)
              and "used of 16.00 GiB" in r.stdout and "ECC           on" in r.stdout, r.stdout + r.stderr)
        r = ctl(ctlexe, "-s", d.sock, "--json", "info")
        js = json.loads(r.stdout) if r.returncode == 0 else {}
        check("info --json: driver, CUDA version, one GPU with its fields",
              js.get("backend") == "sim" and js.get("cuda_version") == 13000 and len(js.get("gpus", [])) == 1 and
              js["gpus"][0]["memory_total"] == 16 << 30 and js["gpus"][0]["temperature_c"] > 0, r.stdout)
        r = ctl(ctlexe, "-s", d.sock, "-d", "0", "--json", "info")
        check("info -d 0: that GPU's object", r.returncode == 0 and json.loads(r.stdout)["index"] == 0, r.stdout)
        r = ctl(ctlexe, "-s", d.sock, "-d", "3", "info")
        check("info -d 3 on a one-GPU host: exit 1, said", r.returncode == 1 and "no GPU 3" in r.stderr, r.stderr)
        r = ctl(ctlexe, "-s", d.sock, "-d", "x", "info")
        check("-d x: bad usage", r.returncode == 2, r.stderr)
        r = ctl(ctlexe, "-s", d.sock, "--json", "config", "show")
        js = json.loads(r.stdout) if r.returncode == 0 else {}
        check("config show --json: the settings", js.get("log_level") == "info" and js.get("max_pending") == 256 and
              js.get("drain_timeout_s") == 60, r.stdout)
        r = ctl(ctlexe, "-s", d.sock, "config", "set", "drain_timeout_s", "90")
        check("config set drain_timeout_s 90", r.returncode == 0 and "drain_timeout_s is 90" in r.stdout, r.stderr)
        js = json.loads(ctl(ctlexe, "-s", d.sock, "--json", "config", "show").stdout)
        check("... config show says 90", js["drain_timeout_s"] == 90, str(js))
        for key, val, why in (("drain_timeout_s", "0", "expected a number from 1"),
                              ("drain_timeout_s", "12x", "expected a number"),
                              ("no_such_key", "1", "cannot be set"),
                              ("log_level", "net=loud", "'loud' is not a level")):
            r = ctl(ctlexe, "-s", d.sock, "config", "set", key, val)
            check(f"config set {key} {val}: refused, saying why", r.returncode == 1 and why in r.stderr, r.stderr)
        cs, _, _ = w.handshake(d.sock, "job2")
        deadline = time.monotonic() + 10
        while "serving" not in ctl(ctlexe, "-s", d.sock, "status").stdout and time.monotonic() < deadline:
            time.sleep(0.05)
        r = ctl(ctlexe, "-s", d.sock, "config", "set", "log_level", "debug")
        check("config set log_level debug reaches the worker", r.returncode == 0 and "and 1 worker(s)" in r.stdout,
              r.stdout + r.stderr)
        ctl(ctlexe, "-s", d.sock, "status")
        check("... and a status poll is now logged (at debug)", d.wait_log(r"debug: closing connection from .*ADMIN "
                                                                             r"STATUS answered", 5), d.log()[-1500:])
        r = ctl(ctlexe, "-s", d.sock, "sessions", "show", "job2")
        check("sessions show job2", r.returncode == 0 and re.search(r"^session +job2$", r.stdout, re.M) and
              re.search(r"^state +serving", r.stdout, re.M) and "checkpoint  none yet" in r.stdout, r.stdout)
        r = ctl(ctlexe, "-s", d.sock, "--json", "sessions", "show", "job2")
        check("sessions show --json: the session's object",
              r.returncode == 0 and json.loads(r.stdout)["name"] == "job2", r.stdout)
        check_monitor(ctlexe, d.sock)
        r = ctl(ctlexe, "-s", d.sock, "sessions", "kill", "job2", "--delete")
        check("sessions kill job2 --delete", r.returncode == 0 and "checkpoint is deleted" in r.stdout, r.stderr)
        check("... the worker ends it", d.wait_log(r"session job2: shutting down at the supervisor's request", 10),
              d.log()[-1500:])
        deadline = time.monotonic() + 10
        while "job2" in ctl(ctlexe, "-s", d.sock, "status").stdout and time.monotonic() < deadline:
            time.sleep(0.1)
        check("... and it is gone from status", "job2" not in ctl(ctlexe, "-s", d.sock, "status").stdout)
        cs.close()
        r = ctl(ctlexe, "-s", d.sock, "sessions", "kill", "nobody")
        check("sessions kill of no such session: exit 1, said", r.returncode == 1 and "no session nobody" in r.stderr,
              r.stderr)
        r = ctl(ctlexe, "-s", d.sock, "sessions", "frob")
        check("sessions frob: bad usage", r.returncode == 2, r.stderr)
        # an ADMIN argument whose length does not match its prefix
        bad = w.frame(OP_ADMIN, struct.pack("<HH", 5, 10) + b"keep:x", flags=w.F_SYNC)
        h, text = raw_admin(d.sock, bad)
        check("ADMIN argument of the wrong length: refused", h is not None and h["status"] == EINVAL, f"{h} {text!r}")
        bad = w.frame(OP_ADMIN, struct.pack("<HH", 7, 3) + b"a\x00b", flags=w.F_SYNC)
        h, text = raw_admin(d.sock, bad)
        check("ADMIN argument with a NUL: refused", h is not None and h["status"] == EINVAL, f"{h} {text!r}")
    finally:
        d.close()


def test_diag(exe, ctlexe, tmp):
    """diag on a healthy daemon, on a broken one (its checkpoint store gone, a
    certificate that expires in 3 days), and with no daemon at all."""
    ck = os.path.join(tmp, "diag-ck")
    cert, key = os.path.join(tmp, "diag.pem"), os.path.join(tmp, "diag.key")
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-days", "3", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                        "-keyout", key, "-out", cert], capture_output=True, text=True)
    check("diag: a 3-day certificate made", r.returncode == 0, r.stderr)
    d = Daemon(exe, tmp, "diag", ["--checkpoint-dir", ck, "--tls-cert", cert, "--tls-key", key])
    try:
        if not d.wait_log(r"lupined \S+ ready"):
            check("daemon starts (diag)", False, d.log())
            return
        r = ctl(ctlexe, "-s", d.sock, "--json", "diag")
        js = json.loads(r.stdout) if r.stdout.strip() else {}
        results = {c["check"]: c["result"] for c in js.get("checks", [])}
        check("diag --json: every check has a result, failures and warnings a fix",
              js and all(c["result"] in ("pass", "warn", "fail") and (c["result"] == "pass" or c.get("fix"))
                         for c in js["checks"]), r.stdout)
        check("diag (healthy): the GPU, the store, io_uring and the arena pass",
              r.returncode == 0 and results.get("GPU 0") == "pass" and results.get("checkpoint store space") == "pass"
              and results.get("io_uring") == "pass" and results.get("arena slots") == "pass", r.stdout)
        check("diag: a certificate that expires in 3 days is a warning",
              results.get("TLS certificate") == "warn", r.stdout)
        shutil.rmtree(ck)
        r = ctl(ctlexe, "-s", d.sock, "--no-color", "diag")
        check("diag (broken): the store that is gone fails, with a fix, exit 1", r.returncode == 1 and
              re.search(r"^FAIL  checkpoint store writable: .*No such file or directory$\n +fix: ", r.stdout, re.M),
              r.stdout)
    finally:
        d.close()
    r = ctl(ctlexe, "-s", os.path.join(tmp, "none.sock"), "diag")
    check("diag without a daemon: that fails, with a fix, and the local checks run", r.returncode == 1 and
          "FAIL  the daemon answers" in r.stdout and "io_uring" in r.stdout, r.stdout + r.stderr)


def main():
    if len(sys.argv) != 3:
        print("usage: test_lupinectl.py LUPINED LUPINECTL", file=sys.stderr)
        return 2
    exe, ctlexe = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    tmp = tempfile.mkdtemp(prefix="lupinectl-")
    try:
        test_usage(ctlexe, tmp)
        test_status_and_refusals(exe, ctlexe, tmp)
        test_more_commands(exe, ctlexe, tmp)
        test_diag(exe, ctlexe, tmp)
        test_drain(exe, ctlexe, tmp)
    finally:
        if check.failed:
            print(f"logs kept in {tmp}", flush=True)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if check.failed:
        print("FAILED: " + ", ".join(check.failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
