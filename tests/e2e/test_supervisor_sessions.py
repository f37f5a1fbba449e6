#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""e2e: the lupined supervisor's side of sessions that survive restarts.

Usage: test_supervisor_sessions.py PATH/TO/lupined

Runs `lupined --backend sim --checkpoint-dir TMP/...` and drives it with raw
wire frames (tests/e2e/lupwire.py). It checks what the supervisor owns:
  - the command line: the new options, their limits and exclusions (exit 2),
    a provider that cannot be loaded or opened (exit 1), --help;
  - drain on SIGTERM: STOPPING=1, EXTEND_TIMEOUT_USEC and STATUS= to a fake
    NOTIFY_SOCKET, DRAIN to every worker, one verdict line per session
    ("session NAME checkpointed" / "session NAME LOST: ..."), exit 0 when all
    were checkpointed and 1 when one was lost; a second SIGTERM does not cut
    the drain short; a worker that ignores DRAIN (SIGSTOPped) is killed after
    --drain-timeout and its session reported LOST;
  - restore at start: a restore worker per committed session, READY=1 only
    after it has reported, a restore that fails does not stop the daemon;
  - HELLO routing: an unknown name with a non-zero token is refused with
    CUDA_ERROR_DEVICE_UNAVAILABLE "session NAME no longer exists"; a zero
    token for a registered name is "busy"; a token for a registered name goes
    to its worker, and the supervisor logs the worker's verdict;
  - DETACHED from a worker is logged.

The worker half (checkpoint, restore, token check) is tested as far as it
exists: where the worker does not (yet) do its part, the test prints a
"note" line and checks only the supervisor's part.

Standard library only. Exit 0 on pass, 1 on failure (naming the case).
"""
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as w  # noqa: E402

CUDA_ERROR_DEVICE_UNAVAILABLE = 46
HELLO_TIMEOUT_MS = 2000

failures = []


def fail(case, msg):
    failures.append(f"{case}: {msg}")
    print(f"FAIL {case}: {msg}", flush=True)


def note(case, msg):
    print(f"note {case}: {msg}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Notify:
    """A fake systemd NOTIFY_SOCKET collecting sd_notify() messages."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.2)
        self.msgs = []
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop:
            try:
                d = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            self.msgs.append(d.decode("utf-8", "replace"))

    def lines(self):
        return [ln for m in list(self.msgs) for ln in m.split("\n") if ln]

    def index(self, prefix):
        for i, ln in enumerate(self.lines()):
            if ln.startswith(prefix):
                return i
        return -1

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close()


class Daemon:
    def __init__(self, exe, tmp, label, args, notify=None):
        self.exe = exe
        self.port = free_port()
        self.addr = ("127.0.0.1", self.port)
        self.log_path = os.path.join(tmp, f"{label}.log")
        self.logf = open(self.log_path, "wb")
        env = dict(os.environ)
        env.pop("LUPINE_CHECKPOINT_LIBRARY", None)
        env.pop("NOTIFY_SOCKET", None)
        if notify is not None:
            env["NOTIFY_SOCKET"] = notify.path
        self.proc = subprocess.Popen(
            [exe, "--backend", "sim", "--listen", f"127.0.0.1:{self.port}",
             f"--hello-timeout-ms={HELLO_TIMEOUT_MS}"] + args,
            stdin=subprocess.DEVNULL, stdout=self.logf, stderr=self.logf, env=env)

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wait_log(self, pattern, timeout=10.0):
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.log())
            if m:
                return m
            if time.monotonic() >= deadline or self.proc.poll() is not None:
                return rx.search(self.log())
            time.sleep(0.02)

    def wait_ready(self, timeout=15.0):
        return self.wait_log(r"lupined \S+ ready", timeout) is not None

    def stop(self, timeout=15.0):
        """SIGTERM; returns (exit status or None, seconds taken)."""
        t0 = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
        return rc, time.monotonic() - t0

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.logf.close()


def hello_payload(name, token=bytes(16), last_seq=0):
    nb = name.encode()
    return (struct.pack("<IIII", w.MAGIC, w.VERSION, 13000, 0) + struct.pack("<H", len(nb)) + nb + token +
            struct.pack("<Q", last_seq))


def hello(addr, name, token=bytes(16)):
    """Sends HELLO; returns (socket, reply header or None, payload)."""
    s = w.connect(addr)
    s.sendall(w.frame(w.OP_HELLO, hello_payload(name, token), flags=w.F_SYNC, seq=1))
    try:
        h, p = w.read_frame(s)
    except (ConnectionError, OSError):
        return s, None, b""
    return s, h, p


def reply_token(payload):
    return payload[16:32]


def refusal(payload):
    if len(payload) < 2:
        return None
    (n,) = struct.unpack_from("<H", payload)
    return payload[2:2 + n].decode("utf-8", "replace")


def goodbye(s, seq=1):
    try:
        s.sendall(w.frame(w.OP_GOODBYE, seq=seq))
    except OSError:
        pass


def worker_pids(pid):
    pids = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                pids += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return pids


def new_session(d, case, name):
    """A session served by a worker: (socket, token), or (None, None)."""
    s, h, p = hello(d.addr, name)
    if h is None or h["status"] != 0:
        fail(case, f"HELLO for a new session {name} not accepted: {h} {refusal(p)!r}")
        s.close()
        return None, None
    return s, reply_token(p)


# ---- cases ------------------------------------------------------------------

def test_cli(exe, tmp):
    case = "command line"
    r = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=10)
    for opt in ("--checkpoint-dir", "--checkpoint-provider", "--checkpoint-config", "--drain-timeout",
                "--session-ttl", "--restore", "LUPINE_CHECKPOINT_LIBRARY", "LOST"):
        if r.returncode != 0 or opt not in r.stdout:
            fail(case, f"--help (exit {r.returncode}) does not mention {opt}")
    afile = os.path.join(tmp, "a-file")
    with open(afile, "w") as f:
        f.write("not a library\n")
    bad = [
        (["--drain-timeout", "0"], "--drain-timeout"),
        (["--drain-timeout", "86401"], "--drain-timeout"),
        (["--drain-timeout", "ten"], "--drain-timeout"),
        (["--session-ttl", "0"], "--session-ttl"),
        (["--session-ttl", str(30 * 86400 + 1)], "--session-ttl"),
        (["--checkpoint-dir", ""], "--checkpoint-dir"),
        (["--checkpoint-dir", "x" * 5000], "too long"),
        (["--checkpoint-dir", tmp, "--checkpoint-provider", afile], "exclude each other"),
        (["--checkpoint-dir", tmp, "--checkpoint-config", tmp], "exclude each other"),
        (["--checkpoint-provider", os.path.join(tmp, "no-such.so")], "--checkpoint-provider"),
        (["--restore=s1"], "--restore"),
        (["--worker", "--ctl-fd=0", "--restore=s1"], "needs a checkpoint provider"),
        (["--worker", "--ctl-fd=0", "--checkpoint-dir", tmp, "--restore=bad/name"], "not a session name"),
    ]
    for args, what in bad:
        r = subprocess.run([exe] + args, capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
        if r.returncode != 2 or what not in r.stderr:
            fail(f"{case} {' '.join(a[:40] for a in args)}",
                 f"exit {r.returncode} (want 2), stderr {r.stderr.strip()[:300]!r}")
    env = dict(os.environ, LUPINE_CHECKPOINT_LIBRARY=os.path.join(tmp, "no-such.so"))
    r = subprocess.run([exe], capture_output=True, text=True, timeout=10, env=env)
    if r.returncode != 2 or "LUPINE_CHECKPOINT_LIBRARY" not in r.stderr:
        fail(f"{case} LUPINE_CHECKPOINT_LIBRARY", f"exit {r.returncode} (want 2), stderr {r.stderr.strip()!r}")
    # Loadable at parse time but not a provider, or a directory that
    # cannot be made: the daemon cannot start (exit 1) and says why.
    for args, what in ((["--checkpoint-provider", afile], "cannot load the checkpoint provider"),
                       (["--checkpoint-dir", os.path.join(afile, "sub")], "cannot open the checkpoint provider")):
        port = free_port()
        r = subprocess.run([exe, "--backend", "sim", "--listen", f"127.0.0.1:{port}"] + args,
                           capture_output=True, text=True, timeout=20)
        if r.returncode != 1 or what not in r.stderr:
            fail(f"{case} {' '.join(args)}", f"exit {r.returncode} (want 1), stderr {r.stderr.strip()[-300:]!r}")
    print(f"ok   {case}", flush=True)


def test_empty(exe, tmp):
    """No sessions: SIGTERM exits 0 at once; a restart on the same directory
    serves; unknown sessions with a token are told they no longer exist."""
    case = "empty checkpoint directory"
    ck = os.path.join(tmp, "ck-empty", "not-yet-there")
    notify = Notify(os.path.join(tmp, "notify-empty"))
    d = Daemon(exe, tmp, "empty-1", ["--checkpoint-dir", ck], notify)
    before = len(failures)
    try:
        if not d.wait_ready():
            fail(case, "daemon did not become ready")
            return
        if not os.path.isdir(ck):
            fail(case, f"{ck} was not created")
        rc, took = d.stop()
        if rc != 0 or took > 5:
            fail(case, f"SIGTERM with no sessions: exit {rc} after {took:.1f} s (want 0, quickly)")
        if not re.search(r"draining: no sessions to checkpoint", d.log()):
            fail(case, "no 'no sessions to checkpoint' line")
        time.sleep(0.1)
        if notify.index("READY=1") < 0 or notify.index("STOPPING=1") < notify.index("READY=1"):
            fail(case, f"notify messages {notify.lines()} lack READY=1 then STOPPING=1")
    finally:
        d.close()
        notify.close()
    if len(failures) > before:
        return

    d = Daemon(exe, tmp, "empty-2", ["--checkpoint-dir", ck])
    try:
        if not d.wait_ready() or not d.wait_log(r"0 session\(s\) to restore", 1):
            fail(case, "restart on the same directory did not become ready")
            return
        s, tok = new_session(d, case, "fresh")
        if s:
            goodbye(s)
            s.close()
        # An unknown name with a resume token: the client must stop retrying.
        s, h, p = hello(d.addr, "ghost", b"\x5a" * 16)
        with s:
            if h is None or h["status"] != CUDA_ERROR_DEVICE_UNAVAILABLE or \
               not refusal(p).startswith("session ghost no longer exists"):
                fail(case, f"HELLO for an unknown session with a token: {h} {refusal(p)!r}")
        if not d.wait_log(r"closing connection from 127\.0\.0\.1:\d+: session ghost no longer exists", 3):
            fail(case, "no log line for the refused ghost session")
        if not d.wait_log(r"worker \d+ for session fresh exited", 5):
            fail(case, "the worker of a session that said GOODBYE did not exit")
        rc, _ = d.stop()
        if rc != 0:
            fail(case, f"second daemon: exit {rc} (want 0)")
    finally:
        d.close()
    print(f"ok   {case}", flush=True)


def test_drain_and_restore(exe, tmp):
    case = "drain one session"
    ck = os.path.join(tmp, "ck-drain")
    notify = Notify(os.path.join(tmp, "notify-drain"))
    d = Daemon(exe, tmp, "drain-1", ["--checkpoint-dir", ck, "--drain-timeout", "5"], notify)
    checkpointed = False
    try:
        if not d.wait_ready():
            fail(case, "daemon did not become ready")
            return
        s, tok = new_session(d, case, "drain-me")
        if not s:
            return
        with s:
            d.wait_log(r"session drain-me \(slot \d+\) served by worker", 5)
            rc, took = d.stop(timeout=5 + 10)
            s.settimeout(5)
            try:
                h, _ = w.read_frame(s)
                if h["op"] != w.OP_GOODBYE:
                    fail(case, f"the client got op {h['op']} instead of GOODBYE")
            except (ConnectionError, OSError):
                note(case, "the client connection closed without a GOODBYE")
        log = d.log()
        if rc is None or took > 5 + 6:
            fail(case, f"the daemon did not exit within the drain timeout (exit {rc} after {took:.1f} s)")
        m = re.search(r"session drain-me (checkpointed|LOST: .*)", log)
        if not m:
            fail(case, "no 'session drain-me checkpointed' or 'LOST' line")
        elif m.group(1) == "checkpointed":
            checkpointed = True
            if rc != 0:
                fail(case, f"every session checkpointed, but exit {rc} (want 0)")
        else:
            note(case, f"the worker did not checkpoint: {m.group(0)}")
            if rc != 1:
                fail(case, f"a session was lost, but exit {rc} (want 1)")
        time.sleep(0.1)
        lines = notify.lines()
        for want in ("STOPPING=1", "STATUS=draining 1 sessions", "EXTEND_TIMEOUT_USEC=10000000"):
            if want not in lines:
                fail(case, f"systemd did not hear {want!r}: {lines}")
    finally:
        d.close()
        notify.close()
    print(f"ok   {case}", flush=True)
    if not checkpointed:
        print("skip restore: the session was not checkpointed", flush=True)
        return

    # A damaged copy, for the failure case below.
    bad = os.path.join(tmp, "ck-damaged")
    shutil.copytree(ck, bad)
    for root, _, files in os.walk(bad):
        for fn in files:
            if fn == "manifest":
                path = os.path.join(root, fn)
                n = os.path.getsize(path)
                with open(path, "r+b") as f:
                    f.write(b"\xab" * n)

    case = "restore one session"
    notify = Notify(os.path.join(tmp, "notify-restore"))
    d = Daemon(exe, tmp, "restore-1", ["--checkpoint-dir", ck, "--drain-timeout", "10"], notify)
    try:
        if not d.wait_log(r"session drain-me: restoring checkpoint epoch \d+ in worker \d+"):
            fail(case, "no restore worker was started for drain-me")
            return
        if not d.wait_ready():
            fail(case, "daemon did not become ready after restoring")
            return
        log = d.log()
        restored = re.search(r"session drain-me restored into arena slot \d+ by worker \d+", log)
        if not restored and not re.search(r"session drain-me could not be restored: ", log):
            fail(case, "neither 'restored' nor 'could not be restored' for drain-me")
        time.sleep(0.1)
        ri, si = notify.index("READY=1"), notify.index("STATUS=restoring 1 sessions")
        if ri < 0 or si < 0 or si > ri:
            fail(case, f"want STATUS=restoring 1 sessions before READY=1: {notify.lines()}")
        if log.index("restore finished") > log.index(" ready: "):
            fail(case, "the daemon said it was ready before the restore finished")
        if not restored:
            note(case, "the worker could not restore the session; resume not tried")
        else:
            # A zero token asks for a new session: the name is taken.
            s, h, p = hello(d.addr, "drain-me")
            with s:
                if h is None or h["status"] != CUDA_ERROR_DEVICE_UNAVAILABLE or "is busy" not in (refusal(p) or ""):
                    fail(case, f"zero-token HELLO for a restored session: {h} {refusal(p)!r}")
            # A wrong token goes to the worker, which refuses that client.
            s, h, p = hello(d.addr, "drain-me", bytes(x ^ 0xFF for x in tok))
            with s:
                if h is not None and h["status"] == 0:
                    fail(case, "a wrong resume token was accepted")
            if not d.wait_log(r"session drain-me: resume request from 127\.0\.0\.1:\d+ handed to worker", 3):
                fail(case, "the resume request was not handed to the worker")
            if not d.wait_log(r"session drain-me: resume by \S+ (refused: wrong resume token|failed)", 5):
                fail(case, "no log line with the worker's verdict on a wrong token")
            # The right token resumes it.
            s, h, p = hello(d.addr, "drain-me", tok)
            with s:
                if h is None or h["status"] != 0:
                    note(case, f"resume with the right token not accepted: {h} {refusal(p)!r}")
                    if not d.wait_log(r"session drain-me: resume by \S+ (refused|failed)", 5):
                        fail(case, "no log line with the worker's verdict")
                else:
                    if not d.wait_log(r"session drain-me resumed by the client from 127\.0\.0\.1:\d+", 5):
                        fail(case, "no 'resumed by' line")
                    goodbye(s, h["ctx"] + 1)
                    if not d.wait_log(r"worker \d+ for session drain-me exited", 5):
                        fail(case, "the resumed session did not end on GOODBYE")
        # Whatever became of it, nothing is left to lose: a session that
        # ended by itself as the drain began is not "lost" either.
        rc, _ = d.stop()
        if rc != 0:
            fail(case, f"exit {rc} (want 0)")
    finally:
        d.close()
        notify.close()
    print(f"ok   {case}", flush=True)

    case = "restore a damaged checkpoint"
    d = Daemon(exe, tmp, "restore-bad", ["--checkpoint-dir", bad, "--drain-timeout", "10"])
    try:
        if not d.wait_ready():
            fail(case, "daemon did not become ready")
            return
        log = d.log()
        if re.search(r"session drain-me could not be restored: ", log):
            pass
        elif re.search(r"0 session\(s\) to restore", log):
            note(case, "the provider did not list the damaged checkpoint")
        elif re.search(r"session drain-me restored into", log):
            note(case, "the worker restored a checkpoint with a garbage manifest")
        else:
            fail(case, "no verdict on the damaged checkpoint")
        s, _ = new_session(d, case, "after-damage")
        if s:
            goodbye(s)
            s.close()
        rc, _ = d.stop()  # possibly while after-damage is still ending
        if rc != 0:
            fail(case, f"exit {rc} (want 0)")
        if re.search(r"session after-damage LOST", d.log()):
            fail(case, "a session that said GOODBYE was reported LOST")
    finally:
        d.close()
    print(f"ok   {case}", flush=True)


def test_stuck_worker(exe, tmp):
    """A worker that never answers DRAIN is killed at --drain-timeout; its
    session is LOST and the daemon exits 1. A second SIGTERM changes nothing."""
    case = "worker ignoring DRAIN"
    ck = os.path.join(tmp, "ck-stuck")
    d = Daemon(exe, tmp, "stuck", ["--checkpoint-dir", ck, "--drain-timeout", "2"])
    stopped = []
    try:
        if not d.wait_ready():
            fail(case, "daemon did not become ready")
            return
        s, _ = new_session(d, case, "stuck")
        if not s:
            return
        with s:
            if not d.wait_log(r"session stuck \(slot \d+\) served by worker (\d+)", 5):
                fail(case, "no 'served by worker' line")
                return
            pids = worker_pids(d.proc.pid)
            if len(pids) != 1:
                fail(case, f"expected one worker, found {pids}")
                return
            os.kill(pids[0], signal.SIGSTOP)
            stopped = pids
            # A connection still before its HELLO is closed when the drain
            # starts, with a reason.
            idle = socket.create_connection(d.addr, timeout=5)
            idle_peer = f"127.0.0.1:{idle.getsockname()[1]}"
            time.sleep(0.3)  # accepted and waiting for HELLO
            t0 = time.monotonic()
            d.proc.send_signal(signal.SIGTERM)
            time.sleep(0.3)
            d.proc.send_signal(signal.SIGTERM)
            with idle:
                if not w.wait_closed(idle, 3):
                    fail(case, "a connection waiting for HELLO stayed open during the drain")
            if not d.wait_log(rf"closing connection from {re.escape(idle_peer)}: server draining", 1):
                fail(case, "no 'closing connection ...: server draining' line")
            # The listening socket stays open while draining: a new client
            # gets into the backlog, but nobody answers it.
            try:
                late = socket.create_connection(d.addr, timeout=1)
            except OSError as e:
                fail(case, f"the listening socket was closed during the drain: {e}")
                late = None
            if late is not None:
                with late:
                    late.sendall(w.frame(w.OP_HELLO, hello_payload("late"), flags=w.F_SYNC, seq=1))
                    late.settimeout(0.5)
                    try:
                        if late.recv(1):
                            fail(case, "a HELLO was answered during the drain")
                    except socket.timeout:
                        pass
                    except OSError:
                        fail(case, "a client in the backlog was dropped during the drain")
            try:
                rc = d.proc.wait(timeout=2 + 10)
            except subprocess.TimeoutExpired:
                rc = None
            took = time.monotonic() - t0
            if rc != 1:
                fail(case, f"exit {rc} (want 1: a session was lost)")
            if took < 1.8 or took > 2 + 8:
                fail(case, f"exited after {took:.1f} s; want about the 2 s drain timeout")
            log = d.log()
            if not re.search(r"session stuck LOST: .*--drain-timeout.*killed", log):
                fail(case, "no 'session stuck LOST: ... --drain-timeout ... killed' line")
            if not re.search(r"SIGTERM: already draining", log):
                fail(case, "the second SIGTERM was not logged as 'already draining'")
            if not w.wait_closed(s, 5):
                fail(case, "the client connection stayed open")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and os.path.exists(f"/proc/{stopped[0]}"):
            with open(f"/proc/{stopped[0]}/stat") as f:
                if f.read().split(")")[-1].split()[0] == "Z":
                    break
            time.sleep(0.05)
        else:
            if os.path.exists(f"/proc/{stopped[0]}"):
                fail(case, f"worker {stopped[0]} is still there")
    finally:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        d.close()
    print(f"ok   {case}", flush=True)


def test_detach(exe, tmp):
    """A client that vanishes leaves a detached session it can resume."""
    case = "detach and resume"
    ck = os.path.join(tmp, "ck-detach")
    d = Daemon(exe, tmp, "detach", ["--checkpoint-dir", ck, "--session-ttl", "60"])
    try:
        if not d.wait_ready():
            fail(case, "daemon did not become ready")
            return
        s, tok = new_session(d, case, "wanderer")
        if not s:
            return
        s.close()  # no GOODBYE: a lost connection
        if not d.wait_log(r"session wanderer detached: .*up to 60 s", 5):
            note(case, "the worker did not report DETACHED; resume not tried")
        else:
            s, h, p = hello(d.addr, "wanderer", tok)
            with s:
                if h is None or h["status"] != 0:
                    note(case, f"resume not accepted by the worker: {h} {refusal(p)!r}")
                elif not d.wait_log(r"session wanderer resumed by the client from", 5):
                    fail(case, "no 'resumed by' line")
                else:
                    goodbye(s, h["ctx"] + 1)
                    if not d.wait_log(r"worker \d+ for session wanderer exited", 5):
                        fail(case, "the resumed session did not end on GOODBYE")
        rc, _ = d.stop()
        if rc != 0:
            fail(case, f"exit {rc} (want 0)")
    finally:
        d.close()
    print(f"ok   {case}", flush=True)


def report():
    """The summary of failures (the exit status: 0 if none)."""
    if failures:
        print(f"{len(failures)} case(s) failed:")
        for f in failures:
            print("  " + f)
        return 1
    print("all cases passed")
    return 0


def run_cases(cases, prefix, call):
    """Runs call(case, tmp) for each case in one temporary folder, printing
    the daemons' logs (*.log there) after a case that failed, and returns
    report()."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        for case in cases:
            before = len(failures)
            call(case, tmp)
            for fn in sorted(os.listdir(tmp)):
                if not fn.endswith(".log"):
                    continue
                if len(failures) > before:
                    with open(os.path.join(tmp, fn), "rb") as f:
                        print(f"---- {fn} ----\n" + f.read().decode("utf-8", "replace")[-6000:])
                os.remove(os.path.join(tmp, fn))
    return report()


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 1
    exe = os.path.abspath(sys.argv[1])
    return run_cases((test_cli, test_empty, test_drain_and_restore, test_stuck_worker, test_detach),
                     "lupined-sessions-", lambda t, tmp: t(exe, tmp))


if __name__ == "__main__":
    sys.exit(main())
