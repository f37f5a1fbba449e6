#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""e2e: `lupinectl sessions checkpoint NAME` (a durable checkpoint while the
session runs) and the progress of `lupinectl drain`, on the simulated GPU.

usage: test_ckpt_now.py LUPINED LUPINECTL PROGS_DIR SHIM_DIR KERNELS_DIR

  live       a verified workload (e2e_restart: data checked every round, an
             exactly-once counter) is checkpointed twice while it runs: the
             epoch advances each time, STATUS and the log say so, and the
             client finishes with exactly the expected data.
  refusals   no provider, an unknown name, no name, and a second request
             while one runs are refused, saying why; nothing else changes.
  resume     the workload waits (HOLD_AT) at the moment of a checkpoint; then
             supervisor and worker are killed with SIGKILL (a host crash, no
             drain) and a new daemon restores the mid-session checkpoint: the
             client resumes and finishes with the counter exact.
  stale      the workload goes on after the checkpoint and sees later calls
             executed; then the same crash: the restored session is older
             than what the client saw, and the client gets one clear error
             (stale checkpoint, CUDA_ERROR_DEVICE_UNAVAILABLE) within seconds,
             never wrong data.
  drain-pty  `lupinectl drain` in a pseudo-terminal draws its progress line
             in place and ends with "drained: 1 session(s) checkpointed, 0
             lost"; without a terminal the same final line, no escapes.

Exit 0 on pass, 1 on failure (naming the case).
"""
import json
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as w  # noqa: E402
from restart_harness import read_line  # noqa: E402

check = w.Checks()
OP_ADMIN, ADMIN_CHECKPOINT = 4, 9
EINVAL, EALREADY = 22, 114


class Daemon:
    """A sim lupined on a UNIX socket (lupinectl) and a TCP port (clients)."""

    def __init__(self, exe, tmp, label, args, sock=None, port=None):
        self.sock = sock or os.path.join(tmp, f"{label}.sock")
        self.port = port or w.free_port()
        self.log_path = os.path.join(tmp, f"{label}.log")
        self.logf = open(self.log_path, "ab")
        env = dict(os.environ)
        for k in ("LUPINE_CHECKPOINT_LIBRARY", "NOTIFY_SOCKET", "LD_LIBRARY_PATH", "LISTEN_FDS"):
            env.pop(k, None)
        self.proc = subprocess.Popen(
            [exe, "--backend", "sim", "--listen", f"unix:{self.sock}", "--listen", f"127.0.0.1:{self.port}",
             "--session-ttl", "120", "--drain-timeout", "60"] + args,
            stdin=subprocess.DEVNULL, stdout=self.logf, stderr=self.logf, env=env)
        self.ready = w.wait_port(self.port, self.proc, 20)

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wait_log(self, pattern, timeout=15.0, count=1):
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(rx.findall(self.log())) >= count:
                return True
            time.sleep(0.05)
        return len(rx.findall(self.log())) >= count

    def crash(self):
        """SIGKILL to the supervisor and its workers, as a host that dies."""
        pids = []
        try:
            for tid in os.listdir(f"/proc/{self.proc.pid}/task"):
                with open(f"/proc/{self.proc.pid}/task/{tid}/children") as f:
                    pids += [int(x) for x in f.read().split()]
        except OSError:
            pass
        self.proc.kill()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        # the workers are not our children: wait until they are gone
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}") for p in pids):
            time.sleep(0.05)

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logf.close()


class Env:
    def __init__(self, exe, ctlexe, progs, shim, kernels, tmp):
        self.exe, self.ctlexe, self.progs, self.shim, self.kernels, self.tmp = exe, ctlexe, progs, shim, kernels, tmp

    def ctl(self, d, *args, timeout=60):
        env = dict(os.environ)
        env.pop("LUPINE_ADMIN_SOCKET", None)
        return subprocess.run([self.ctlexe, "-s", d.sock] + list(args), capture_output=True, text=True,
                              timeout=timeout, env=env)

    def client(self, d, session, rounds, ms, hold_at=None, reconnect="120"):
        env = dict(os.environ)
        env.update(LUPINE_SERVER=f"127.0.0.1:{d.port}", LUPINE_SESSION=session, LUPINE_RECONNECT_TIMEOUT=reconnect)
        env["LD_LIBRARY_PATH"] = self.shim + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        argv = [os.path.join(self.progs, "e2e_restart"), self.kernels, str(rounds), str(ms)]
        if hold_at:
            argv.append(str(hold_at))
        return subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)


def wait_line(c, prefix, timeout=60):
    """Reads the client's stdout until a line starts with prefix: it, or None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = read_line(c.stdout, max(0.1, deadline - time.monotonic()))
        if not line:
            return None
        if line.startswith(prefix):
            return line
    return None


def finish(c, timeout=120):
    try:
        out, err = c.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        c.kill()
        out, err = c.communicate()
    return c.returncode, out, err


def status_session(env, d, name):
    r = env.ctl(d, "--json", "status")
    try:
        js = json.loads(r.stdout)
    except ValueError:
        return None
    return next((s for s in js["sessions"] if s["name"] == name), None)


def admin_frame(cmd, arg=None):
    payload = struct.pack("<H", cmd) + (struct.pack("<H", len(arg)) + arg.encode() if arg is not None else b"")
    return w.frame(OP_ADMIN, payload, flags=w.F_SYNC)


def admin_reply(s):
    try:
        h, p = w.read_frame(s)
    except (ConnectionError, OSError):
        return None, ""
    return h, p[2:2 + struct.unpack_from("<H", p)[0]].decode() if len(p) >= 2 else ""


def test_live(env):
    case = "live"
    d = Daemon(env.exe, env.tmp, "live", ["--checkpoint-dir", os.path.join(env.tmp, "ck-live")])
    c = None
    try:
        check(f"{case}: the daemon starts", d.ready, d.log())
        if not d.ready:
            return
        c = env.client(d, "live", 120, 15)
        check(f"{case}: the workload runs", wait_line(c, "round 20 ok") is not None)
        for epoch in (1, 2):
            r = env.ctl(d, "sessions", "checkpoint", "live")
            check(f"{case}: checkpoint {epoch} while it runs",
                  r.returncode == 0 and f"checkpoint of live started, last epoch {epoch - 1}" in r.stdout and
                  re.search(rf"^session live checkpointed at epoch {epoch} \([\d.]+ GiB in [\d.]+ s\)$", r.stdout,
                            re.M), r.stdout + r.stderr)
        js = status_session(env, d, "live")
        check(f"{case}: STATUS shows epoch 2, no error, the keys of old first",
              js is not None and js["checkpoint_epoch"] == 2 and js["last_checkpoint_error"] == "" and
              list(js)[:14] == ["name", "slot", "state", "pid", "tenant", "client", "calls", "calls_per_s",
                                "bytes_in", "bytes_out", "bytes_per_s", "memory", "checkpoint_epoch",
                                "checkpoint_age_s"] and list(js)[-1] == "last_checkpoint_error", str(js))
        r = env.ctl(d, "--json", "sessions", "checkpoint", "live")
        try:
            js = json.loads(r.stdout)
        except ValueError:
            js = {}
        check(f"{case}: --json prints the session's object at the end",
              r.returncode == 0 and js.get("name") == "live" and js.get("checkpoint_epoch") == 3, r.stdout + r.stderr)
        rc, out, err = finish(c)
        c = None
        check(f"{case}: the client carried on and finished with exactly the expected data",
              rc == 0 and "counter exact" in out, out[-800:] + err[-2000:])
        log = d.log()
        check(f"{case}: the worker and the supervisor log each checkpoint",
              len(re.findall(r"session live: checkpoint at the operator's request at seq \d+; the session goes on",
                             log)) == 3 and
              len(re.findall(r"session live: checkpoint epoch \d committed at seq \d+ in [\d.]+ s; serving on",
                             log)) == 3 and
              re.search(r"session live checkpointed at epoch 2: \d+ bytes in [\d.]+ s", log) is not None,
              log[-3000:])
        check(f"{case}: the client never lost its connection", "connection to lupined lost" not in err, err[-2000:])
    finally:
        if c:
            c.kill()
            c.communicate()
        d.close()


def test_refusals(env):
    case = "refusals"
    d = Daemon(env.exe, env.tmp, "noprov", [])
    try:
        check(f"{case}: a daemon without a provider starts", d.ready, d.log())
        cs, _, _ = w.handshake(d.sock, "plain")
        r = env.ctl(d, "sessions", "checkpoint", "plain")
        check(f"{case}: no provider: refused, saying so", r.returncode == 1 and
              "no checkpoint provider is configured" in r.stderr, r.stdout + r.stderr)
        cs.close()
    finally:
        d.close()
    d = Daemon(env.exe, env.tmp, "refuse", ["--checkpoint-dir", os.path.join(env.tmp, "ck-refuse")])
    c = None
    try:
        check(f"{case}: the daemon starts", d.ready, d.log())
        r = env.ctl(d, "sessions", "checkpoint", "nobody")
        check(f"{case}: an unknown name: refused, exit 1", r.returncode == 1 and "no session nobody" in r.stderr,
              r.stderr)
        r = env.ctl(d, "sessions", "checkpoint")
        check(f"{case}: no name: bad usage", r.returncode == 2, r.stderr)
        s = w.connect(d.sock)
        s.sendall(admin_frame(ADMIN_CHECKPOINT))
        h, text = admin_reply(s)
        s.close()
        check(f"{case}: ADMIN CHECKPOINT without an argument: EINVAL", h is not None and h["status"] == EINVAL and
              "expected a session name" in text, f"{h} {text!r}")
        c = env.client(d, "busy", 200, 10)
        wait_line(c, "round 10 ok")
        # two requests at once: the second comes while the first runs
        a, b = w.connect(d.sock), w.connect(d.sock)
        a.sendall(admin_frame(ADMIN_CHECKPOINT, "busy"))
        b.sendall(admin_frame(ADMIN_CHECKPOINT, "busy"))
        (ha, ta), (hb, tb) = admin_reply(a), admin_reply(b)
        a.close()
        b.close()
        replies = sorted([(ha["status"] if ha else None, ta), (hb["status"] if hb else None, tb)])
        check(f"{case}: one already running: the second is refused (EALREADY), the first starts",
              replies[0][0] == 0 and "checkpoint of busy started" in replies[0][1] and
              replies[1][0] == EALREADY and "a checkpoint of it is already running" in replies[1][1], str(replies))
        check(f"{case}: ... and the first one is made", d.wait_log(r"session busy checkpointed at epoch 1"),
              d.log()[-2000:])
        rc, out, err = finish(c)
        c = None
        check(f"{case}: ... and its client finishes exactly", rc == 0 and "counter exact" in out, err[-2000:])
    finally:
        if c:
            c.kill()
            c.communicate()
        d.close()


def test_resume(env):
    case = "resume"
    ck = os.path.join(env.tmp, "ck-resume")
    d = Daemon(env.exe, env.tmp, "resume", ["--checkpoint-dir", ck])
    c = None
    try:
        check(f"{case}: the daemon starts", d.ready, d.log())
        c = env.client(d, "resume", 60, 10, hold_at=25)
        ready = wait_line(c, "ready:")
        check(f"{case}: the client waits after round 25", ready is not None)
        r = env.ctl(d, "sessions", "checkpoint", "resume")
        check(f"{case}: checkpointed while it waits", r.returncode == 0 and "checkpointed at epoch 1" in r.stdout,
              r.stdout + r.stderr)
        d.crash()
        d.close()
        d = Daemon(env.exe, env.tmp, "resume", ["--checkpoint-dir", ck], sock=d.sock, port=d.port)
        check(f"{case}: after SIGKILL of supervisor and worker the new daemon restores the mid-session checkpoint",
              d.ready and d.wait_log(r"session resume: restored checkpoint epoch 1"), d.log()[-2000:])
        c.stdin.write("go\n")
        c.stdin.flush()
        rc, out, err = finish(c)
        c = None
        check(f"{case}: the client resumes and finishes with the counter exact",
              rc == 0 and "counter exact" in out and "round 60 ok" in out, out[-800:] + err[-2000:])
    finally:
        if c:
            c.kill()
            c.communicate()
        d.close()


def test_kept(env):
    """`sessions kill NAME` (no --delete) keeps the checkpoint, and so does a
    worker whose supervisor is gone: the next daemon restores both."""
    case = "kept"
    ck = os.path.join(env.tmp, "ck-kept")
    d = Daemon(env.exe, env.tmp, "kept", ["--checkpoint-dir", ck])
    cs = []
    try:
        check(f"{case}: the daemon starts", d.ready, d.log())
        for name in ("kept-kill", "kept-orphan"):
            c = env.client(d, name, 100000, 20)
            cs.append(c)
            check(f"{case}: {name} runs", wait_line(c, "round 10 ok") is not None)
            r = env.ctl(d, "sessions", "checkpoint", name)
            check(f"{case}: {name} checkpointed", r.returncode == 0, r.stdout + r.stderr)
        r = env.ctl(d, "sessions", "kill", "kept-kill")
        check(f"{case}: kill without --delete says the checkpoint is kept", r.returncode == 0 and "kept" in r.stdout,
              r.stdout + r.stderr)
        check(f"{case}: its worker exits", d.wait_log(r"worker \d+ for session kept-kill exited"), d.log()[-1500:])
        # only the supervisor dies: the orphaned worker ends its session
        d.proc.kill()
        d.proc.wait()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and "the supervisor is gone" not in d.log():
            time.sleep(0.1)
        time.sleep(0.5)
        check(f"{case}: the orphaned worker keeps the checkpoint", "keeping its checkpoint" in d.log(), d.log()[-1500:])
        for c in cs:
            c.kill()
            c.communicate()
        cs = []
        d.close()
        d = Daemon(env.exe, env.tmp, "kept", ["--checkpoint-dir", ck], sock=d.sock, port=d.port)
        check(f"{case}: the next daemon restores both",
              d.ready and d.wait_log(r"session kept-kill: restored checkpoint epoch 1") and
              d.wait_log(r"session kept-orphan: restored checkpoint epoch 1"), d.log()[-2000:])
    finally:
        for c in cs:
            c.kill()
            c.communicate()
        d.close()


def test_stale(env):
    case = "stale"
    ck = os.path.join(env.tmp, "ck-stale")
    d = Daemon(env.exe, env.tmp, "stale", ["--checkpoint-dir", ck])
    c = None
    try:
        check(f"{case}: the daemon starts", d.ready, d.log())
        c = env.client(d, "stale", 400, 10)
        wait_line(c, "round 10 ok")
        r = env.ctl(d, "sessions", "checkpoint", "stale")
        check(f"{case}: checkpointed while it runs", r.returncode == 0 and "checkpointed at epoch 1" in r.stdout,
              r.stdout + r.stderr)
        check(f"{case}: the client goes on past the checkpoint", wait_line(c, "round 40 ok") is not None)
        d.crash()
        d.close()
        t0 = time.monotonic()
        d = Daemon(env.exe, env.tmp, "stale", ["--checkpoint-dir", ck], sock=d.sock, port=d.port)
        check(f"{case}: the new daemon restores the older checkpoint",
              d.ready and d.wait_log(r"session stale: restored checkpoint epoch 1"), d.log()[-2000:])
        rc, out, err = finish(c, timeout=60)
        c = None
        took = time.monotonic() - t0
        check(f"{case}: the client gets one clear error (stale checkpoint, CUDA_ERROR_DEVICE_UNAVAILABLE) within "
              f"30 s, not its 120 s reconnect timeout, and no wrong data",
              rc != 0 and took < 30 and "stale checkpoint" in err and "CUDA_ERROR_DEVICE_UNAVAILABLE" in err and
              "a call was lost or ran twice" not in err and "counter exact" not in out,
              f"rc {rc} after {took:.1f} s\n" + err[-2000:])
        check(f"{case}: the worker refused the resume once", len(re.findall(r"session stale refused: stale checkpoint",
                                                                             d.log())) == 1, d.log()[-2000:])
    finally:
        if c:
            c.kill()
            c.communicate()
        d.close()


def drain_in_pty(env, d):
    import pty
    master, slave = pty.openpty()
    p = subprocess.Popen([env.ctlexe, "-s", d.sock, "drain"], stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    out, deadline = b"", time.monotonic() + 60
    while time.monotonic() < deadline:
        if select.select([master], [], [], 0.5)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        elif p.poll() is not None:
            break
    try:
        rc = p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = "hung"
    os.close(master)
    return rc, out.decode(errors="replace")


def test_drain(env):
    case = "drain-pty"
    d = Daemon(env.exe, env.tmp, "drain", ["--checkpoint-dir", os.path.join(env.tmp, "ck-drain")])
    c = None
    try:
        check(f"{case}: the daemon starts", d.ready, d.log())
        c = env.client(d, "drainme", 1000, 10)
        wait_line(c, "round 10 ok")
        rc, text = drain_in_pty(env, d)
        check(f"{case}: the answer, a progress line redrawn in place, the final line",
              rc == 0 and "draining: checkpointing 1 session(s)" in text and
              re.search(r"\r\x1b\[K\[[#.]{20}\] \d/1 session\(s\) checkpointed, [\d.]+ \w+ of [\d.]+ \w+, [\d.]+ GB/s",
                        text) is not None and
              re.search(r"drained: 1 session\(s\) checkpointed, 0 lost \([\d.]+ s\)\r?\n$", text) is not None,
              f"rc {rc}: {text[-1500:]!r}")
        check(f"{case}: the daemon exited 0 after the drain", d.proc.wait(timeout=30) == 0)
        c.kill()
        c.communicate()
        c = None
    finally:
        if c:
            c.kill()
            c.communicate()
        d.close()
    d = Daemon(env.exe, env.tmp, "drain2", ["--checkpoint-dir", os.path.join(env.tmp, "ck-drain2")])
    try:
        cs, _, _ = w.handshake(d.sock, "plain")
        r = env.ctl(d, "drain")
        check("drain without a terminal: the answer and one final line, no escapes",
              r.returncode == 0 and r.stdout.startswith("draining: checkpointing 1 session(s)") and
              len(r.stdout.strip().splitlines()) == 2 and "\x1b" not in r.stdout and
              re.search(r"^drained: 1 session\(s\) checkpointed, 0 lost \([\d.]+ s\)$", r.stdout, re.M),
              r.stdout + r.stderr)
        cs.close()
    finally:
        d.close()


def main():
    if len(sys.argv) != 6:
        print(__doc__, file=sys.stderr)
        return 2
    exe, ctlexe, progs, shim, kernels = (os.path.abspath(a) for a in sys.argv[1:6])
    tmp = tempfile.mkdtemp(prefix="ckpt-now-")
    env = Env(exe, ctlexe, progs, shim, kernels, tmp)
    try:
        for t in (test_live, test_refusals, test_resume, test_kept, test_stale, test_drain):
            t(env)
    finally:
        if check.failed:
            print(f"logs kept in {tmp}", flush=True)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if check.failed:
        print("FAILED: " + ", ".join(check.failed))
        return 1
    print("ok: sessions checkpoint, restore after a crash, drain progress")
    return 0


if __name__ == "__main__":
    sys.exit(main())
