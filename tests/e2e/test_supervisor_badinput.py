#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""e2e: the lupined supervisor against hostile first frames.

Usage: test_supervisor_badinput.py PATH/TO/lupined

Starts `lupined --backend sim` on a free 127.0.0.1 port and a UNIX socket,
then throws a bad first frame at it over a fresh connection per case. For
each case it checks:
  - the daemon logs one "closing connection from PEER: REASON" line with the
    expected reason, and closes the connection;
  - when the frame header itself was valid, the client got a HELLO refusal
    frame (LUP_F_REPLY, status != 0, payload u16 len + message) first;
  - the daemon is still alive, and a well-formed HELLO on a new connection
    is taken (handed to a worker, not refused).

The probe asks only that the supervisor hands the HELLO on: whatever the
worker then does (serve it, refuse it for want of a driver, or, with a stub
worker, just close the connection), the log must name the session's worker.
When a worker does serve sessions, the test also checks that a second client
of a live session is refused as busy, and that SIGTERM shuts a live session's
worker down cleanly.

Standard library only. Exit 0 on pass, 1 on failure (naming the case).
"""
import os
import re
import resource
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

HDR = struct.Struct("<IHHIIQQQ")  # len, op, flags, lane, status, seq, ctx, reserved
HDR_SIZE = 40
MAGIC = 0x4C555031
PROTO_VERSION = 1
OP_HELLO, OP_GOODBYE, OP_PING = 1, 2, 3
OP_ALIVE, OP_OUTPUT = 5, 23  # server -> client only
F_SYNC, F_REPLY, F_MORE = 0x1, 0x2, 0x4
MAX_PAYLOAD = (1 << 20) + 4096
PENDING_PER_PEER = 32  # LUPD_PENDING_PER_PEER_DEFAULT (--max-pending-per-peer)
EVICTED = r"limit hit: \d+ connections (from this peer )?have not finished HELLO"
HELLO_TIMEOUT_MS = 400
CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_DEVICE_UNAVAILABLE = 46

failures = []


def fail(case, msg):
    failures.append(f"{case}: {msg}")
    print(f"FAIL {case}: {msg}", flush=True)


def hdr(length, op=OP_HELLO, flags=F_SYNC, lane=0, status=0, seq=1, ctx=0, reserved=0):
    return HDR.pack(length, op, flags, lane, status, seq, ctx, reserved)


def hello_payload(name=b"sess", magic=MAGIC, version=PROTO_VERSION, extra=b""):
    return (struct.pack("<IIII", magic, version, 12080, 0) + struct.pack("<H", len(name)) + name +
            bytes(16) + struct.pack("<Q", 0) + extra)


def hello_frame(name=b"sess", **kw):
    p = hello_payload(name, **kw)
    return hdr(len(p)) + p


def recv_exact(s, n, timeout=5.0):
    """n bytes, or None on EOF/reset/timeout."""
    s.settimeout(timeout)
    buf = b""
    try:
        while len(buf) < n:
            k = s.recv(n - len(buf))
            if not k:
                return None
            buf += k
    except (ConnectionResetError, socket.timeout, OSError):
        return None
    return buf


def wait_closed(s, timeout=5.0):
    """True once the server has closed the connection (EOF or reset)."""
    deadline = time.monotonic() + timeout
    s.settimeout(0.2)
    while time.monotonic() < deadline:
        try:
            if not s.recv(65536):
                return True
        except socket.timeout:
            continue
        except (ConnectionResetError, OSError):
            return True
    return False


def read_frame(s, timeout=5.0):
    h = recv_exact(s, HDR_SIZE, timeout)
    if h is None:
        return None
    length, op, flags, lane, status, seq, ctx, _ = HDR.unpack(h)
    payload = recv_exact(s, length, timeout) if length else b""
    if payload is None:
        return None
    return {"op": op, "flags": flags, "lane": lane, "status": status, "seq": seq, "payload": payload}


def refusal_message(frame):
    p = frame["payload"]
    if len(p) < 2:
        return None
    (n,) = struct.unpack_from("<H", p)
    if len(p) != 2 + n:
        return None
    return p[2:].decode("utf-8", "replace")


class Daemon:
    def __init__(self, exe, tmpdir, extra_args):
        self.exe = exe
        self.tmpdir = tmpdir
        self.port = free_port()
        self.unix_path = os.path.join(tmpdir, "s")
        self.log_path = os.path.join(tmpdir, "lupined.log")
        self.logf = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [exe, "--backend", "sim", "--listen", f"127.0.0.1:{self.port}", "--listen", f"unix:{self.unix_path}",
             f"--hello-timeout-ms={HELLO_TIMEOUT_MS}"] + extra_args,
            stdin=subprocess.DEVNULL, stdout=self.logf, stderr=self.logf)
        self.probes = 0
        self.real_worker = False
        self.worker_refusal_noted = False

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wait_log(self, pattern, timeout=5.0, count=1):
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            n = len(rx.findall(self.log()))
            if n >= count:
                return True
            if time.monotonic() >= deadline or not self.alive():
                return False
            time.sleep(0.02)

    def count_log(self, pattern):
        return len(re.findall(pattern, self.log()))

    def alive(self):
        return self.proc.poll() is None

    def connect(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        return s, f"127.0.0.1:{s.getsockname()[1]}"

    def connect_unix(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect(self.unix_path)
        return s

    def probe(self, case, unix=False):
        """A well-formed HELLO must be taken: not refused by the supervisor, and
        a worker gets it (and may answer it either way)."""
        if not self.alive():
            fail(case, f"daemon died (exit status {self.proc.returncode})")
            return False
        self.probes += 1
        name = f"probe-{self.probes}"
        try:
            if unix:
                s, peer = self.connect_unix(), "unix:"
            else:
                s, peer = self.connect()
        except OSError as e:
            fail(case, f"daemon no longer accepts connections: {e}")
            return False
        with s:
            s.sendall(hello_frame(name.encode()))
            frame = read_frame(s, timeout=10)
            if frame is not None and frame["status"] == 0 and frame["flags"] & F_REPLY:
                self.real_worker = True  # a worker answered HELLO itself
                # End the session in order: a connection that just closes
                # leaves a detached session behind for --session-ttl, and
                # enough probes would fill the server.
                try:
                    s.sendall(hdr(0, op=OP_GOODBYE, flags=0, seq=1))
                except OSError:
                    pass
            elif frame is not None and not self.worker_refusal_noted:
                # Some reply is all this test asks for; whether the worker
                # can serve (a driver, the simulator) is other tests' job.
                # A refusal by the supervisor itself shows up below as a
                # "closing connection" line for this peer.
                self.worker_refusal_noted = True
                print(f"note {case}: HELLO answered with status {frame['status']} "
                      f"{refusal_message(frame)!r}", flush=True)
        # The supervisor logs every session's worker: "served by worker" on
        # READY, "worker N for session NAME exited ..." when it ends.
        if not self.wait_log(rf"session {re.escape(name)}\b", timeout=10):
            fail(case, f"no log line about session {name}: the probe HELLO went nowhere")
            return False
        if not unix and self.count_log(rf"closing connection from {re.escape(peer)}:"):
            fail(case, f"the supervisor closed the probe connection {peer}")
            return False
        return True


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bad_case(d, case, send, reason, refusal_status=None, unix=False):
    """Runs one bad first frame over a fresh connection and checks the outcome."""
    if unix:
        s, peer_rx = d.connect_unix(), re.escape(f"unix:{d.unix_path}") + r" \(pid \d+, uid \d+\)"
    else:
        s, peer = d.connect()
        peer_rx = re.escape(peer)
    with s:
        try:
            send(s)
        except OSError as e:
            fail(case, f"sending failed: {e}")
        if refusal_status is not None:
            frame = read_frame(s)
            if frame is None:
                fail(case, "expected a HELLO refusal frame, got none")
            else:
                msg = refusal_message(frame)
                if frame["op"] != OP_HELLO or not frame["flags"] & F_REPLY or frame["status"] != refusal_status:
                    fail(case, f"bad refusal frame {frame}")
                elif msg is None or not re.search(reason, msg):
                    fail(case, f"refusal message {msg!r} does not match {reason!r}")
        if not wait_closed(s, timeout=HELLO_TIMEOUT_MS / 1000 * 4 + 2):
            fail(case, "the daemon did not close the connection")
    if not d.wait_log(rf"closing connection from {peer_rx}: {reason}"):
        fail(case, f"no log line 'closing connection from <peer>: {reason}'")
    d.probe(case, unix=unix)
    print(f"ok   {case}", flush=True)


def test_cli(exe):
    r = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=10)
    if r.returncode != 0 or "--listen" not in r.stdout or "--backend" not in r.stdout:
        fail("cli --help", f"exit {r.returncode}, stdout lacks --listen/--backend")
    for args, what in ((["--no-such-option"], "no-such-option"), (["--max-sessions", "0"], "--max-sessions"),
                       (["--max-sessions", "65"], "--max-sessions"), (["--backend", "gpu"], "--backend"),
                       (["--listen", "nonsense"], "--listen"), (["--log-level", "loud"], "--log-level"),
                       (["stray"], "stray"), (["--worker"], "--ctl-fd")):
        r = subprocess.run([exe] + args, capture_output=True, text=True, timeout=10)
        if r.returncode != 2 or what not in r.stderr:
            fail(f"cli {' '.join(args)}", f"exit {r.returncode} (want 2), stderr {r.stderr.strip()!r}")
    r = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10)
    if r.returncode != 0 or not r.stdout.startswith("lupined "):
        fail("cli --version", f"exit {r.returncode}, stdout {r.stdout!r}")
    # A port that is taken: fatal, exit 1, naming the endpoint.
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        ep = f"127.0.0.1:{busy.getsockname()[1]}"
        r = subprocess.run([exe, "--listen", ep], capture_output=True, text=True, timeout=10)
        if r.returncode != 1 or f"cannot listen on {ep}" not in r.stderr:
            fail("cli bind failure", f"exit {r.returncode} (want 1), stderr {r.stderr.strip()!r}")
    print("ok   command line", flush=True)


def test_flood(d, label):
    """More idle connections from one peer than its pending limit: the
    oldest are closed as newer ones come (docs/security.md, finding 2), the
    rest at the HELLO deadline, and the daemon serves afterwards."""
    case = label + "300 idle connections"
    over = d.count_log(EVICTED)
    timeouts = d.count_log(r"no HELLO within")
    socks = []
    try:
        for _ in range(300):
            socks.append(socket.create_connection(("127.0.0.1", d.port), timeout=5))
        if not d.wait_log(EVICTED, count=over + 300 - PENDING_PER_PEER):
            fail(case, f"expected {300 - PENDING_PER_PEER} 'limit hit' lines, got {d.count_log(EVICTED) - over}")
        if not d.alive():
            fail(case, "daemon died")
            return
        if not d.wait_log(r"no HELLO within", timeout=10, count=timeouts + PENDING_PER_PEER):
            fail(case, f"expected {PENDING_PER_PEER} timeouts, got {d.count_log(r'no HELLO within') - timeouts}")
        closed = sum(1 for s in socks if wait_closed(s, timeout=0.5))
        if closed != len(socks):
            fail(case, f"only {closed} of {len(socks)} idle connections were closed")
    finally:
        for s in socks:
            s.close()
    d.probe(case)
    print(f"ok   {case}", flush=True)


def test_busy(d, label):
    """Needs a real worker: a second client for a live session is refused."""
    case = label + "busy session"
    a, _ = d.connect()
    with a:
        a.sendall(hello_frame(b"busy-one"))
        f = read_frame(a, timeout=10)
        if f is None or f["status"] != 0:
            fail(case, f"first HELLO not accepted: {f}")
            return
        bad_case(d, case, lambda s: s.sendall(hello_frame(b"busy-one")), r"session busy-one is busy",
                 refusal_status=CUDA_ERROR_DEVICE_UNAVAILABLE)


def run_cases(d, label):
    def send_then_half_close(data):
        def f(s):
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        return f

    def drip(data, interval):
        def f(s):
            # One byte at a time, well within the deadline each, but not all
            # of it within the deadline.
            for b in data:
                try:
                    s.send(bytes([b]))
                except OSError:
                    return
                time.sleep(interval)
        return f

    good = hello_payload(b"x")
    cases = [
        ("garbage (an HTTP request)",
         lambda s: s.sendall(b"GET / HTTP/1.1\r\nHost: lupine\r\nUser-Agent: curl\r\n\r\n"),
         r"frame length exceeds the limit", None),
        ("truncated header then close", send_then_half_close(hdr(len(good))[:17]),
         r"connection closed in the middle of a frame", None),
        ("truncated payload then close", send_then_half_close(hdr(len(good)) + good[:10]),
         r"connection closed in the middle of a frame", None),
        ("close before any byte", lambda s: s.shutdown(socket.SHUT_WR),
         r"connection closed before HELLO", None),
        ("oversized length field", lambda s: s.sendall(hdr(MAX_PAYLOAD + 1)),
         r"frame length exceeds the limit", None),
        ("length 0xffffffff", lambda s: s.sendall(hdr(0xFFFFFFFF)),
         r"frame length exceeds the limit", None),
        ("HELLO larger than the supervisor reads", lambda s: s.sendall(hdr(64 * 1024)),
         r"HELLO payload exceeds the limit", CUDA_ERROR_INVALID_VALUE),
        ("unknown flags", lambda s: s.sendall(hdr(len(good), flags=F_SYNC | 0x80) + good),
         r"unknown frame flags", None),
        ("lane out of range", lambda s: s.sendall(hdr(len(good), lane=1 << 20) + good),
         r"lane id out of range", None),
        ("reserved header field set", lambda s: s.sendall(hdr(len(good), reserved=7) + good),
         r"reserved header field is not zero", None),
        ("op 0", lambda s: s.sendall(hdr(0, op=0)),
         r"op 0 is invalid", None),
        ("first frame is not HELLO", lambda s: s.sendall(hdr(0, op=OP_PING)),
         r"first frame is not HELLO \(op 3\)", CUDA_ERROR_INVALID_VALUE),
        ("first frame is a driver call", lambda s: s.sendall(hdr(0, op=300)),
         r"first frame is not HELLO \(op 300\)", CUDA_ERROR_INVALID_VALUE),
        # frames only a server sends
        ("first frame is ALIVE", lambda s: s.sendall(hdr(0, op=OP_ALIVE, flags=0)),
         r"first frame is not HELLO \(op 5\)", CUDA_ERROR_INVALID_VALUE),
        ("first frame is OUTPUT", lambda s: s.sendall(hdr(6, op=OP_OUTPUT, flags=0) + b"hello\n"),
         r"first frame is not HELLO \(op 23\)", CUDA_ERROR_INVALID_VALUE),
        ("first frame is OUTPUT, sync, before a HELLO", lambda s: s.sendall(hdr(2, op=OP_OUTPUT) + b"x\n" + hello_frame(b"o")),
         r"first frame is not HELLO \(op 23\)", CUDA_ERROR_INVALID_VALUE),
        ("HELLO without LUP_F_SYNC", lambda s: s.sendall(hdr(len(good), flags=0) + good),
         r"HELLO must be a synchronous request", CUDA_ERROR_INVALID_VALUE),
        ("HELLO flagged as a reply", lambda s: s.sendall(hdr(len(good), flags=F_SYNC | F_REPLY) + good),
         r"HELLO must be a synchronous request", CUDA_ERROR_INVALID_VALUE),
        ("HELLO with wrong magic", lambda s: s.sendall(hello_frame(b"m", magic=0xDEADBEEF)),
         r"bad protocol magic", CUDA_ERROR_INVALID_VALUE),
        ("HELLO with wrong protocol version", lambda s: s.sendall(hello_frame(b"v", version=PROTO_VERSION + 1)),
         r"unsupported protocol version", CUDA_ERROR_INVALID_VALUE),
        ("HELLO with an invalid session name", lambda s: s.sendall(hello_frame(b"bad name/../x")),
         r"invalid session name", CUDA_ERROR_INVALID_VALUE),
        ("HELLO with an empty session name", lambda s: s.sendall(hello_frame(b"")),
         r"invalid session name", CUDA_ERROR_INVALID_VALUE),
        ("HELLO with a name over the limit", lambda s: s.sendall(hello_frame(b"n" * 129)),
         r"malformed HELLO", CUDA_ERROR_INVALID_VALUE),
        ("HELLO with trailing bytes", lambda s: s.sendall(hello_frame(b"t", extra=b"junk")),
         r"malformed HELLO", CUDA_ERROR_INVALID_VALUE),
        ("HELLO with an empty payload", lambda s: s.sendall(hdr(0)),
         r"malformed HELLO", CUDA_ERROR_INVALID_VALUE),
        ("HELLO cut short inside its payload", lambda s: s.sendall(hdr(8) + good[:8]),
         r"malformed HELLO", CUDA_ERROR_INVALID_VALUE),
        ("silence past the timeout", lambda s: None,
         rf"no HELLO within {HELLO_TIMEOUT_MS} ms", None),
        ("HELLO dripped slower than the deadline", drip(hello_frame(b"slow"), HELLO_TIMEOUT_MS / 1000 / 8),
         rf"no HELLO within {HELLO_TIMEOUT_MS} ms", None),
    ]
    for name, send, reason, status in cases:
        bad_case(d, label + name, send, reason, status)
        if not d.alive():
            return
    bad_case(d, label + "garbage over the UNIX socket", lambda s: s.sendall(b"\xff" * 64),
             r"frame length exceeds the limit", None, unix=True)
    bad_case(d, label + "wrong magic over the UNIX socket", lambda s: s.sendall(hello_frame(b"u", magic=1)),
             r"bad protocol magic", CUDA_ERROR_INVALID_VALUE, unix=True)
    test_flood(d, label)
    if d.real_worker:
        test_busy(d, label)
    else:
        print("skip busy session: no worker served a session here", flush=True)


def test_sigterm(d, label):
    """SIGTERM with a connection still waiting for HELLO: exit 0, the
    connection closed, the UNIX socket removed, and the port free for a
    successor at once."""
    live = None
    if d.real_worker:
        # A live session too: its worker is told to shut down and says
        # GOODBYE to its client (or at least closes the connection).
        live, _ = d.connect()
        live.sendall(hello_frame(b"live-at-shutdown"))
        f = read_frame(live, timeout=10)
        if f is None or f["status"] != 0:
            fail(f"{label}SIGTERM", f"could not open a live session: {f}")
            live.close()
            live = None
    idle, _ = d.connect()
    with idle:
        idle.sendall(hdr(100)[:10])
        time.sleep(0.3)  # accepted and being read, not still in the backlog
        d.proc.send_signal(signal.SIGTERM)
        try:
            rc = d.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            rc = None
        if rc != 0:
            fail(f"{label}SIGTERM", f"exit status {rc}, want 0")
            return
        if "lupined stopped" not in d.log():
            fail(f"{label}SIGTERM", "no 'lupined stopped' line")
        if not d.wait_log(r"closing connection from .*: server shutting down", timeout=1):
            fail(f"{label}SIGTERM", "the pending connection was not closed with a reason")
        if not wait_closed(idle, timeout=2):
            fail(f"{label}SIGTERM", "the pending connection is still open")
    if live is not None:
        with live:
            if not wait_closed(live, timeout=2):
                fail(f"{label}SIGTERM", "the live session's connection is still open")
        if not re.search(r"worker \d+ for session live-at-shutdown exited", d.log()):
            fail(f"{label}SIGTERM", "the live session's worker did not exit cleanly")
    if os.path.exists(d.unix_path):
        fail(f"{label}SIGTERM", f"{d.unix_path} was not removed")
    # A successor binds the same port right away (systemd restarts do this).
    with open(os.path.join(d.tmpdir, "successor.log"), "wb") as logf:
        succ = subprocess.Popen([d.exe, "--listen", f"127.0.0.1:{d.port}"], stdin=subprocess.DEVNULL,
                                stdout=logf, stderr=logf)
        try:
            deadline = time.monotonic() + 5
            ok = False
            while time.monotonic() < deadline and succ.poll() is None:
                with open(logf.name, "rb") as f:
                    if b"ready" in f.read():
                        ok = True
                        break
                time.sleep(0.02)
            if not ok:
                with open(logf.name, "rb") as f:
                    fail(f"{label}restart", f"a successor could not listen on the same port: "
                                            f"{f.read().decode(errors='replace').strip()!r}")
        finally:
            succ.send_signal(signal.SIGTERM)
            try:
                succ.wait(timeout=10)
            except subprocess.TimeoutExpired:
                succ.kill()
                succ.wait()
    print(f"ok   {label}SIGTERM and restart", flush=True)


def run_daemon(exe, extra_args, label):
    with tempfile.TemporaryDirectory(prefix="lupined-badinput-") as tmp:
        d = Daemon(exe, tmp, extra_args)
        n_failures = len(failures)
        try:
            if not d.wait_log(rf"listening on 127\.0\.0\.1:{d.port}") or \
               not d.wait_log(rf"listening on unix:{re.escape(d.unix_path)}"):
                fail(f"{label}startup", "daemon did not report its listeners")
                return
            if not d.probe(f"{label}startup"):
                return
            print(f"ok   {label}startup", flush=True)
            run_cases(d, label)
            if not d.alive():
                fail(f"{label}daemon", f"died with exit status {d.proc.returncode}")
                return
            # SIGHUP is the upgrade; without a checkpoint provider it is
            # refused, says why, and changes nothing.
            d.proc.send_signal(signal.SIGHUP)
            if not d.wait_log(r"SIGHUP: cannot upgrade: no checkpoint provider is configured") or not d.alive():
                fail(f"{label}SIGHUP", "no 'SIGHUP: cannot upgrade: no checkpoint provider' line, or the daemon died")
            elif "upgrade: draining" in d.log() or "re-executing" in d.log():
                fail(f"{label}SIGHUP", "a refused upgrade began draining or re-executed")
            elif d.probe(f"{label}SIGHUP"):
                print(f"ok   {label}SIGHUP refused without a provider; still serving", flush=True)
            test_sigterm(d, label)
        finally:
            if d.proc.poll() is None:
                d.proc.kill()
                d.proc.wait()
            d.logf.close()
            if len(failures) > n_failures:
                print(f"---- lupined log ({label or 'default'}) ----")
                print(d.log()[-20000:])


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 1
    exe = os.path.abspath(sys.argv[1])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2048:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(2048, hard), hard))

    test_cli(exe)
    run_daemon(exe, [], "")
    # Again with the one-shot accept of kernels before 5.19.
    run_daemon(exe, ["--no-multishot-accept"], "[one-shot accept] ")

    if failures:
        print(f"{len(failures)} case(s) failed:")
        for f in failures:
            print("  " + f)
        return 1
    print("all cases passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
