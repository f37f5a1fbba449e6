#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""e2e: `lupinectl log` on lupined's --log-file (issue 18).

Usage: test_lupinectl_log.py PATH/TO/lupined PATH/TO/lupinectl

A sim daemon with --log-file: its lines (supervisor and worker) land in
the file with the time and the fields; CONFIG_SHOW names the file and the
target; `lupinectl log` finds the file by asking the daemon and prints the
last N entries; --level, --session and --json; -f prints a line written
afterwards, and goes on after the file is truncated (logrotate's
copytruncate); --file reads a file directly (an error line of a daemon
that could not start); a daemon without --log-file (stderr only) and no
daemon at all are exit 1 with what to do. The journal is not read here:
that needs real journal files (test_journal.py plays journald's socket
only); tests/unit/test_ctl_log.c covers what is printed for an entry.

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
from test_lupinectl import Daemon, ctl  # noqa: E402

check = w.Checks()
LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} (error|warning|info|debug) +(\w+) +(.*)$")


def lines(out):
    return [ln for ln in out.splitlines() if ln]


def wait_for(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def make_some_log(d):
    """A session that sends garbage (a worker's warning, with its session),
    and ADMIN over TCP (refused: the supervisor's info line)."""
    cs, _, _ = w.handshake(d.sock, "job1")
    wait_for(lambda: "serving in arena slot" in open(d.logfile).read())
    cs.sendall(b"\xff" * 64)
    w.wait_closed(cs, 10)
    cs.close()
    s = w.connect(("127.0.0.1", d.port))
    s.sendall(w.frame(4, struct.pack("<H", 1), flags=w.F_SYNC))
    try:
        w.read_frame(s)
    except (ConnectionError, OSError):
        pass
    s.close()
    wait_for(lambda: "ADMIN is accepted only" in open(d.logfile).read())


def test_file(exe, ctlexe, tmp):
    logfile = os.path.join(tmp, "lupined.log")
    d = Daemon(exe, tmp, "logd", ["--log-file", logfile])
    d.logfile = logfile
    try:
        if not d.wait_log(r"lupined \S+ ready"):
            check("daemon with --log-file starts", False, d.log())
            return
        make_some_log(d)
        text = open(logfile).read()
        check("the file has the supervisor's and the worker's lines, with the time and fields",
              re.search(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z lupined\[\d+\]: info: lupined \S+ ready: .* \| "
                        r"category=core$", text, re.M) and
              re.search(r"^\S+Z lupined-worker\[\d+\]: warning: session job1: closing connection: .* \| "
                        r"category=net session=job1$", text, re.M), text)
        r = ctl(ctlexe, "-s", d.sock, "--json", "config", "show")
        js = json.loads(r.stdout) if r.returncode == 0 else {}
        check("config show: log_target stderr, log_file the path", js.get("log_target") == "stderr" and
              js.get("log_file") == logfile, r.stdout + r.stderr)

        r = ctl(ctlexe, "-s", d.sock, "log")
        out = lines(r.stdout)
        check("log: the entries, one a line (time, level, category, message, fields)",
              r.returncode == 0 and len(out) >= 6 and all(LINE.match(ln) for ln in out) and
              any(re.search(r" warning +net +session job1: closing connection: .*  session=job1$", ln) for ln in out)
              and any(re.search(r" info +net +closing connection from 127\.0\.0\.1:\d+: ADMIN", ln) for ln in out),
              r.stdout + r.stderr)
        r = ctl(ctlexe, "-s", d.sock, "log", "-n", "2")
        check("log -n 2: the last two", r.returncode == 0 and len(lines(r.stdout)) == 2 and
              lines(r.stdout)[-1] == out[-1], r.stdout + r.stderr)
        r = ctl(ctlexe, "-s", d.sock, "log", "--level", "warning")
        check("log --level warning: only the warning", r.returncode == 0 and len(lines(r.stdout)) >= 1 and
              all(" warning " in ln for ln in lines(r.stdout)), r.stdout + r.stderr)
        r = ctl(ctlexe, "-s", d.sock, "log", "--level", "err")
        check("log --level err: none (there is no error)", r.returncode == 0 and r.stdout == "", r.stdout)
        r = ctl(ctlexe, "-s", d.sock, "log", "--level", "4")
        check("log --level 4 is warning", r.returncode == 0 and len(lines(r.stdout)) >= 1, r.stdout + r.stderr)
        r = ctl(ctlexe, "-s", d.sock, "log", "--session", "job1")
        check("log --session job1: only the worker's lines", r.returncode == 0 and len(lines(r.stdout)) >= 2 and
              all(ln.endswith("session=job1") for ln in lines(r.stdout)), r.stdout + r.stderr)
        r = ctl(ctlexe, "-s", d.sock, "log", "--session", "nobody")
        check("log --session nobody: none", r.returncode == 0 and r.stdout == "", r.stdout)
        r = ctl(ctlexe, "-s", d.sock, "--json", "log", "-n", "3", "--session", "job1")
        try:
            objs = [json.loads(ln) for ln in lines(r.stdout)]
        except ValueError:
            objs = []
        check("--json log: one object a line, with the fields", r.returncode == 0 and len(objs) == 3 and
              all(o["session"] == "job1" and o["identifier"] == "lupined-worker" and o["pid"] > 0 and
                  o["level"] in ("info", "warning") and isinstance(o["timestamp_us"], int) and
                  o["time"].endswith("Z") and o["category"] and o["message"] for o in objs), r.stdout + r.stderr)
        for bad in (["-n", "x"], ["--level", "loud"], ["--session", "a b"], ["extra"], ["--file", "a",
                                                                                       "--journal-dir", "b"]):
            r = ctl(ctlexe, "-s", d.sock, "log", *bad)
            check(f"log {' '.join(bad)}: bad usage", r.returncode == 2, r.stderr)
        test_follow(ctlexe, d, logfile)
    finally:
        d.close()


def test_follow(ctlexe, d, logfile):
    p = subprocess.Popen([ctlexe, "-s", d.sock, "log", "-f", "-n", "1"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        time.sleep(0.5)
        cs, _, _ = w.handshake(d.sock, "job3")
        got = []
        os.set_blocking(p.stdout.fileno(), False)

        def seen(what):
            try:
                chunk = os.read(p.stdout.fileno(), 65536)
            except BlockingIOError:
                chunk = b""
            if chunk:
                got.append(chunk.decode(errors="replace"))
            return what in "".join(got)
        check("log -f: a line written afterwards is printed", wait_for(lambda: seen("session job3: serving"), 10),
              "".join(got))
        cs.sendall(w.frame(w.OP_GOODBYE, seq=1))
        w.wait_closed(cs, 10)
        cs.close()
        wait_for(lambda: seen("worker") and "job3 exited" in "".join(got), 5)
        with open(logfile, "r+") as f:  # what logrotate's copytruncate does
            f.truncate(0)
        time.sleep(0.6)
        cs, _, _ = w.handshake(d.sock, "job4")
        check("log -f: after the file is truncated, the new lines", wait_for(lambda: seen("session job4: serving"),
                                                                             10), "".join(got))
        cs.close()
        check("log -f: runs until stopped", p.poll() is None)
    finally:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    err = p.stderr.read().decode(errors="replace")
    check("log -f: the truncation is said on stderr", "was truncated; reading it from the start" in err, err)


def test_errors(exe, ctlexe, tmp):
    d = Daemon(exe, tmp, "plain", [])
    try:
        if not d.wait_log(r"lupined \S+ ready"):
            check("daemon without --log-file starts", False, d.log())
            return
        r = ctl(ctlexe, "-s", d.sock, "--json", "config", "show")
        js = json.loads(r.stdout) if r.returncode == 0 else {}
        check("config show without --log-file: log_file null", "log_file" in js and js["log_file"] is None and
              js.get("log_target") == "stderr", r.stdout)
        r = ctl(ctlexe, "-s", d.sock, "config", "show")
        check("config show (text): log_file -", re.search(r"^log_file +-$", r.stdout, re.M), r.stdout)
        r = ctl(ctlexe, "-s", d.sock, "log")
        check("log of a daemon that logs to stderr only: exit 1, saying what to do", r.returncode == 1 and
              "--log-file PATH" in r.stderr and "systemd" in r.stderr, r.stderr)
        # a daemon that cannot start (the port is taken) logs an error to its file
        bad_log = os.path.join(tmp, "bad.log")
        p = subprocess.run([exe, "--backend", "sim", "--listen", f"127.0.0.1:{d.port}", "--log-file", bad_log],
                           capture_output=True, text=True, timeout=30)
        r = ctl(ctlexe, "log", "--file", bad_log, "--level", "err")
        check("log --file PATH --level err: the error of a daemon that could not listen",
              p.returncode != 0 and r.returncode == 0 and len(lines(r.stdout)) >= 1 and
              all(" error " in ln for ln in lines(r.stdout)) and "cannot listen on" in r.stdout,
              r.stdout + r.stderr + p.stderr)
    finally:
        d.close()
    r = ctl(ctlexe, "-s", os.path.join(tmp, "none.sock"), "log")
    check("log without a daemon (and no journal entries): exit 1, saying what to do", r.returncode == 1 and
          "--file PATH" in r.stderr, r.stderr)
    r = ctl(ctlexe, "log", "--file", os.path.join(tmp, "none.log"))
    check("log --file of a missing file: exit 1", r.returncode == 1 and "No such file" in r.stderr, r.stderr)
    r = subprocess.run([exe, "--log-file", os.path.join(tmp, "no", "such", "dir.log"), "--backend", "sim"],
                       capture_output=True, text=True, timeout=30)
    check("lupined --log-file in a missing directory: exit 1, said", r.returncode == 1 and
          "--log-file" in r.stderr and "cannot open" in r.stderr, r.stderr)


def main():
    if len(sys.argv) != 3:
        print("usage: test_lupinectl_log.py LUPINED LUPINECTL", file=sys.stderr)
        return 2
    exe, ctlexe = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    tmp = tempfile.mkdtemp(prefix="lupinectl-log-")
    try:
        test_file(exe, ctlexe, tmp)
        test_errors(exe, ctlexe, tmp)
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
