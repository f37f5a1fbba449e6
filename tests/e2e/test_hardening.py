#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""e2e: the daemon's limits and fixes of issue 15 (docs/security.md).

Usage: test_hardening.py LUPINED LUPINECTL PROGS_DIR SHIM_DIR KERNELS_DIR [CASE...]

One case per finding, each against its own `lupined --backend sim`, driven
with raw wire frames (tests/e2e/lupwire.py):
  detach-grace   slots filled by HELLO-then-close clients free up after
                 --detach-grace, not the TTL; shown by lupinectl, logged;
  idle-flood     500 connections that send one byte and nothing more, from
                 the client's own address and then from 25 others: a new client
                 and a resume still get in within 1 s (--max-pending,
                 --max-pending-per-peer);
  upload-caps    an upload past --upload-cap-session, then past
                 --upload-cap-total (other sessions hold unused uploads), is
                 refused with CUDA_ERROR_OUT_OF_MEMORY to that client alone
                 (tests/e2e/progs/e2e_upload_cap.c), logged, counted;
  quarantine     checkpoints with a truncated manifest, a truncated memory
                 object and a flipped COMMITTED byte are logged and moved to
                 DIR/.quarantine at start, one whose manifest the worker
                 finds garbled when restoring too; new sessions of those
                 names then drain (exit 0);
  stale-resume   after a hard crash (SIGKILL of supervisor and worker) an
                 older checkpoint is restored; a resume from a client that
                 saw later calls executed is refused, saying why;
  arena-slots    under ASLR, all 64 arena slots are usable at 40 starts of
                 lupined (--check-arena), and no slot overlaps a mapping of
                 a running supervisor or worker (but the worker's own);
  sticky         a session with a sticky error of its own (700) at a drain
                 is "ended by its own error", not LOST; its previous
                 checkpoint stays; the drain exits 0, checkpointing a
                 healthy session beside it;

Standard library only. Exit 0 on pass, 1 on failure (naming the case).
"""
import os
import re
import resource
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as w  # noqa: E402
import test_supervisor_sessions as sv  # noqa: E402

CUDA_ERROR_DEVICE_UNAVAILABLE = 46
OP_BLOB = 20
fail = sv.fail
PROGS = SHIM = KERNELS = None  # from the command line


class Daemon(sv.Daemon):
    """sv.Daemon with a UNIX listener too, for lupinectl, and a port of the
    caller's choosing (a restart on the same port) if asked."""

    def __init__(self, exe, tmp, label, args, port=None):
        self.sock = os.path.join(tmp, f"{label}.sock")
        if port is not None:
            args = args + ["--listen", f"127.0.0.1:{port}"]
        super().__init__(exe, tmp, label, ["--listen", f"unix:{self.sock}"] + args)
        if port is not None:  # sv.Daemon's own port is listened on too, unused
            self.port, self.addr = port, ("127.0.0.1", port)


def ctl_status(ctlexe, d):
    r = subprocess.run([ctlexe, "--socket", d.sock, "status"], capture_output=True, text=True, timeout=10)
    return r.returncode, r.stdout + r.stderr


def client_env(port, name):
    env = dict(os.environ)
    env["LUPINE_SERVER"] = f"127.0.0.1:{port}"
    env["LUPINE_SESSION"] = name
    env["LUPINE_RECONNECT_TIMEOUT"] = "30"
    env["LD_LIBRARY_PATH"] = SHIM + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return env


def start_prog(d, name, *args):
    return subprocess.Popen([os.path.join(PROGS, name)] + list(args), env=client_env(d.port, name),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def expect_line(proc, want, case, timeout=30):
    """Reads proc's stdout until the line `want`; False (and fail) if it
    ends first. A thread-free read: the programs print little."""
    import select
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([proc.stdout], [], [], 0.2)
        if r:
            line = proc.stdout.readline()
            if not line:
                break
            if line.strip() == want:
                return True
    fail(case, f"{os.path.basename(proc.args[0])} did not print {want!r} (exit {proc.poll()}): "
               f"{proc.stderr.read() if proc.poll() is not None else ''}")
    return False


def sync_ping(s, seq):
    """A synchronous PING: the worker has executed everything before it."""
    s.sendall(w.frame(w.OP_PING, flags=w.F_SYNC, seq=seq))
    while True:
        h, _ = w.read_frame(s)
        if h["op"] == w.OP_PING and h["seq"] == seq:
            return h


def limit_line(text, name):
    """(value, hits) from lupinectl status's limits, or None."""
    m = re.search(rf"^\s+{re.escape(name)}\s+(-?\d+)\s+hit (\d+) time", text, re.M)
    return (int(m.group(1)), int(m.group(2))) if m else None


# ---- finding 1: slot exhaustion by HELLO-then-close ------------------------

def test_detach_grace(exe, ctlexe, tmp):
    case = "detach-grace"
    ck = os.path.join(tmp, "ck-grace")
    d = Daemon(exe, tmp, "grace", ["--checkpoint-dir", ck, "--max-sessions", "3", "--session-ttl", "3600",
                                   "--detach-grace", "2"])
    try:
        if not d.wait_ready():
            fail(case, "daemon did not become ready")
            return
        for i in range(3):  # the attacker: HELLO, then close without GOODBYE
            s, tok = sv.new_session(d, case, f"squat{i}")
            if not s:
                return
            s.close()
        for i in range(3):
            if not d.wait_log(rf"session squat{i} detached", 5):
                fail(case, f"squat{i} was not reported detached")
        t0 = time.monotonic()
        s, h, p = sv.hello(d.addr, "legit")
        with s:
            if h is None or h["status"] == 0:
                fail(case, f"a 4th session got in while 3 slots were held: {h}")
        rc, text = ctl_status(ctlexe, d)
        if rc != 0 or limit_line(text, "detach_grace_s") != (2, 0):
            fail(case, f"lupinectl status (exit {rc}) does not show detach_grace_s 2, hit 0: {text!r}")
        # After the grace (2 s), not the TTL (3600 s), a new client gets in.
        got = None
        while time.monotonic() - t0 < 8:
            s, h, p = sv.hello(d.addr, "legit")
            if h is not None and h["status"] == 0:
                got = s
                break
            s.close()
            time.sleep(0.2)
        if got is None:
            fail(case, "no new client got in within 8 s of the squatters leaving")
            return
        took = time.monotonic() - t0
        sv.goodbye(got)
        got.close()
        if took < 1.0:
            fail(case, f"a slot came free after {took:.1f} s, before the grace")
        for i in range(3):
            if not d.wait_log(rf"limit hit: session squat{i} ended by the detach grace \(2 s", 3):
                fail(case, f"no 'limit hit' line for squat{i}")
        rc, text = ctl_status(ctlexe, d)
        if limit_line(text, "detach_grace_s") != (2, 3):
            fail(case, f"lupinectl status does not count 3 hits of detach_grace_s: {text!r}")
        rc, _ = d.stop()
        if rc != 0:
            fail(case, f"exit {rc} (want 0)")
    finally:
        d.close()
    print(f"ok   {case}", flush=True)


# ---- finding 2: idle connections ------------------------------------------

def flood(port, n, sources):
    """n connections that send one byte and nothing more, round-robin from
    the source addresses; returns the sockets (the daemon may close them)."""
    socks = []
    for i in range(n):
        s = socket.socket()
        try:
            s.bind((sources[i % len(sources)], 0))
            s.settimeout(2)
            s.connect(("127.0.0.1", port))
            s.send(b"\x01")
        except OSError:
            pass
        socks.append(s)
    return socks


def timed_hello(d, name, token=bytes(16)):
    t0 = time.monotonic()
    s, h, p = sv.hello(d.addr, name, token)
    return s, h, p, time.monotonic() - t0


def test_idle_flood(exe, ctlexe, tmp):
    case = "idle-flood"
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2048:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    ck = os.path.join(tmp, "ck-flood")
    # A HELLO deadline of 30 s: what lets the client in must be the limits.
    d = Daemon(exe, tmp, "flood", ["--checkpoint-dir", ck, "--max-pending", "128", "--max-pending-per-peer", "16",
                                   "--hello-timeout-ms=30000"])
    socks = []
    try:
        if not d.wait_ready():
            fail(case, "daemon did not become ready")
            return
        s, tok = sv.new_session(d, case, "keeper")
        if not s:
            return
        s.close()  # detached, to be resumed under the flood
        if not d.wait_log(r"session keeper detached", 5):
            fail(case, "keeper was not reported detached")
        # The client's own address first: with room left in total, the
        # per-peer limit is the one that bites.
        for label, sources in (("the client's own address", ["127.0.0.1"]),
                               ("25 addresses", [f"127.0.0.{i}" for i in range(2, 27)])):
            socks += flood(d.port, 500, sources)
            time.sleep(0.3)  # let the daemon take them all in
            s, h, p, took = timed_hello(d, f"newcomer{len(socks)}")
            with s:
                if h is None or h["status"] != 0 or took > 1.0:
                    fail(case, f"flood from {label}: a new client: {h} {sv.refusal(p)!r} after {took:.2f} s")
                else:
                    sv.goodbye(s)
            s, h, p, took = timed_hello(d, "keeper", tok)
            with s:
                if h is None or h["status"] != 0 or took > 1.0:
                    fail(case, f"flood from {label}: the resume: {h} {sv.refusal(p)!r} after {took:.2f} s")
            time.sleep(0.3)  # the resumed connection is closed again: detached
        rc, text = ctl_status(ctlexe, d)
        tot, per = limit_line(text, "max_pending"), limit_line(text, "max_pending_per_peer")
        if rc != 0 or not tot or not per or tot[0] != 128 or per[0] != 16 or tot[1] == 0 or per[1] == 0:
            fail(case, f"lupinectl status (exit {rc}) lacks max_pending 128 / max_pending_per_peer 16 with hits: "
                       f"{text!r}")
        if not d.wait_log(r"limit hit: \d+ connections have not finished HELLO \(--max-pending\)", 1):
            fail(case, "no 'limit hit' line for --max-pending")
        if not d.wait_log(r"limit hit: 16 connections from this peer have not finished HELLO", 1):
            fail(case, "no 'limit hit' line for --max-pending-per-peer")
        rc, _ = d.stop()
        if rc != 0:
            fail(case, f"exit {rc} (want 0)")
    finally:
        for s in socks:
            s.close()
        d.close()
    print(f"ok   {case}", flush=True)


# ---- finding 3: uploads ----------------------------------------------------

def hold_upload(d, case, name, nbytes):
    """A session that uploads nbytes of an image (BLOB frames) no call uses;
    returns (socket, next seq) or (None, 0)."""
    s, tok = sv.new_session(d, case, name)
    if not s:
        return None, 0
    seq, chunk, blob = 1, 256 << 10, 0x7000
    for off in range(0, nbytes, chunk):
        n = min(chunk, nbytes - off)
        s.sendall(w.frame(OP_BLOB, struct.pack("<QQQ", blob, nbytes, off) + b"\xab" * n, seq=seq))
        seq += 1
    sync_ping(s, seq)
    return s, seq + 1


def test_upload_caps(exe, ctlexe, tmp):
    case = "upload-caps"
    ck = os.path.join(tmp, "ck-upload")
    d = Daemon(exe, tmp, "upload", ["--checkpoint-dir", ck, "--upload-cap-session", "1", "--upload-cap-total", "2"])
    holders, prog = [], None
    try:
        if not d.wait_ready():
            fail(case, "daemon did not become ready")
            return
        prog = start_prog(d, "e2e_upload_cap")
        if not expect_line(prog, "holders?", case):
            return
        if not d.wait_log(r"session e2e_upload_cap: limit hit: an upload of \d+ bytes would hold \d+ "
                          r"uploaded-but-unused bytes in this session, over the cap of 1048576 \(--upload-cap-session\)",
                          3):
            fail(case, "no 'limit hit' line for --upload-cap-session")
        for i in range(2):  # together they hold the whole total cap, unused
            s, seq = hold_upload(d, case, f"holder{i}", 1 << 20)
            if not s:
                return
            holders.append((s, seq))
        prog.stdin.write("go\n")
        prog.stdin.flush()
        if not expect_line(prog, "released?", case):
            return
        if not d.wait_log(r"session e2e_upload_cap: limit hit: .* in all sessions, over the cap of 2097152 "
                          r"\(--upload-cap-total\)", 3):
            fail(case, "no 'limit hit' line for --upload-cap-total")
        # the holders were not affected: they still answer
        for i, (s, seq) in enumerate(holders):
            try:
                sync_ping(s, seq)
                sv.goodbye(s, seq + 1)
            except (OSError, ConnectionError) as e:
                fail(case, f"holder{i} was affected by another session's refusal: {e}")
            if not d.wait_log(rf"worker \d+ for session holder{i} exited", 5):
                fail(case, f"holder{i} did not end on GOODBYE")
        prog.stdin.write("go\n")
        prog.stdin.flush()
        out, err = prog.communicate(timeout=30)
        if prog.returncode != 0 or "e2e_upload_cap: OK" not in out:
            fail(case, f"e2e_upload_cap exit {prog.returncode}: {out.strip()!r} {err.strip()[-1000:]!r}")
        rc, text = ctl_status(ctlexe, d)
        cs, ct = limit_line(text, "upload_cap_session_mib"), limit_line(text, "upload_cap_total_mib")
        if rc != 0 or not cs or not ct or cs[0] != 1 or ct[0] != 2 or cs[1] < 1 or ct[1] < 2:
            fail(case, f"lupinectl status (exit {rc}) lacks the upload caps with their hits: {text!r}")
        rc, _ = d.stop()
        if rc != 0:
            fail(case, f"exit {rc} (want 0)")
    finally:
        for s, _ in holders:
            s.close()
        if prog and prog.poll() is None:
            prog.kill()
            prog.wait()
        d.close()
    print(f"ok   {case}", flush=True)


# ---- finding 6: damaged checkpoints -----------------------------------------

def epoch_dir(ck, name):
    sdir = os.path.join(ck, name)
    eps = sorted(e for e in os.listdir(sdir) if re.fullmatch(r"[0-9a-f]{16}", e))
    return os.path.join(sdir, eps[-1]) if eps else None


def truncate_by_one(path):
    n = os.path.getsize(path)
    os.truncate(path, n - 1)


def damage(ck, case):
    """Damages the three checkpoints; False if one cannot be."""
    ok = True
    for name, how in (("dmg-manifest", "manifest"), ("dmg-mem", "mem"), ("dmg-marker", "marker"),
                      ("dmg-content", "content")):
        ed = epoch_dir(ck, name)
        if ed is None:
            fail(case, f"{name} has no checkpoint to damage")
            ok = False
            continue
        if how == "manifest":
            truncate_by_one(os.path.join(ed, "manifest"))
        elif how == "content":  # the same size: only the worker can tell
            with open(os.path.join(ed, "manifest"), "r+b") as f:
                f.seek(40)
                b = f.read(1)
                f.seek(40)
                f.write(bytes([b[0] ^ 0xFF]))
        elif how == "marker":
            with open(os.path.join(ed, "COMMITTED"), "r+b") as f:
                f.seek(20)
                b = f.read(1)
                f.seek(20)
                f.write(bytes([b[0] ^ 0x10]))
        else:
            mem = [os.path.join(r, f) for r, _, fs in os.walk(ed) for f in fs
                   if os.path.relpath(os.path.join(r, f), ed).startswith("mem") and
                   os.path.getsize(os.path.join(r, f)) > 0]
            if not mem:
                fail(case, f"{name}: no memory object to truncate in {sorted(os.listdir(ed))}")
                ok = False
                continue
            truncate_by_one(sorted(mem)[0])
        # as if damaged a while ago: a listing leaves an epoch that changed
        # in the last minute alone (it may be arriving on a shared filesystem)
        then = time.time() - 120
        for r, dirs, fs in os.walk(ed, topdown=False):
            for x in fs + dirs:
                os.utime(os.path.join(r, x), (then, then))
        os.utime(ed, (then, then))
    return ok


def test_quarantine(exe, ctlexe, tmp):
    case = "quarantine"
    ck = os.path.join(tmp, "ck-quarantine")
    names = ("dmg-manifest", "dmg-mem", "dmg-marker", "dmg-content")
    d = Daemon(exe, tmp, "quarantine-1", ["--checkpoint-dir", ck])
    procs = []
    try:
        if not d.wait_ready():
            fail(case, "daemon did not become ready")
            return
        for n in names:
            p = subprocess.Popen([os.path.join(PROGS, "e2e_restart"), KERNELS, "100000", "20"],
                                 env=client_env(d.port, n), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(p)
        for n in names:
            if not d.wait_log(rf"session {n}: serving", 10):
                fail(case, f"{n} was not served")
        time.sleep(1.0)  # some rounds: memory to checkpoint
        rc, _ = d.stop(60)
        if rc != 0:
            fail(case, f"the first drain: exit {rc} (want 0)")
            return
    finally:
        for p in procs:
            p.kill()
            p.wait()
        d.close()
    if not damage(ck, case):
        return
    d = Daemon(exe, tmp, "quarantine-2", ["--checkpoint-dir", ck])
    try:
        if not d.wait_ready():
            fail(case, "the second daemon did not become ready")
            return
        why = {"dmg-manifest": "on disk where the marker says", "dmg-mem": "on disk where the marker says",
               "dmg-marker": "marker is damaged", "dmg-content": ""}
        for n in names:
            if not d.wait_log(rf"checkpoint of session {n} epoch [0-9a-f]{{16}} is damaged: [^\n]*{why[n]}[^\n]*; "
                              rf"moved to {re.escape(ck)}/\.quarantine/{n}\.", 1):
                fail(case, f"no quarantine line naming {n} and why")
        if not d.wait_log(r"1 session\(s\) to restore", 1) or \
                not d.wait_log(r"session dmg-content cannot be restored from checkpoint epoch", 1):
            fail(case, "want only dmg-content listed for restore, and refused by its worker")
        q = os.path.join(ck, ".quarantine")
        got = sorted(os.listdir(q)) if os.path.isdir(q) else []
        if len(got) != 4 or any(epoch_dir(ck, n) for n in names):
            fail(case, f"quarantine holds {got}; the session directories still hold epochs: "
                       f"{[n for n in names if epoch_dir(ck, n)]}")
        socks = []
        for n in names:  # the names are usable again, and so is their next drain
            s, tok = sv.new_session(d, case, n)
            if s:
                socks.append(s)
        rc, _ = d.stop(60)
        if rc != 0:
            fail(case, f"the drain of the new sessions: exit {rc} (want 0)")
        for n in names:
            if not re.search(rf"session {n} checkpointed", d.log()):
                fail(case, f"the new session {n} was not checkpointed")
        for s in socks:
            s.close()
    finally:
        d.close()
    print(f"ok   {case}", flush=True)


# ---- finding 5: arena slots clear of every mapping --------------------------

ARENA_BASE, ARENA_SIZE, HOLE_FIRST, HOLE_SLOTS = 0x200000000000, 1 << 40, 53, 3  # abi/lupine/wire.h


def slot_base(n):
    return ARENA_BASE + (n + (HOLE_SLOTS if n >= HOLE_FIRST else 0)) * ARENA_SIZE


def maps_of(pid):
    out = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            a, b = (int(x, 16) for x in line.split()[0].split("-"))
            out.append((a, b, line.strip()))
    return out


def test_arena_slots(exe, ctlexe, tmp):
    case = "arena-slots"
    try:
        with open("/proc/sys/kernel/randomize_va_space") as f:
            aslr = f.read().strip()
    except OSError:
        aslr = "?"
    if aslr == "0":
        sv.note(case, "ASLR is off on this machine: the layouts below do not vary")
    for i in range(40):
        r = subprocess.run([exe, "--check-arena"], capture_output=True, text=True, timeout=10)
        if r.returncode != 0 or "arena: 64 of 64 slots usable" not in r.stdout:
            fail(case, f"start {i}: exit {r.returncode}: {r.stdout.strip()} {r.stderr.strip()[-800:]}")
            break
    d = Daemon(exe, tmp, "arena", [])
    try:
        if not d.wait_ready():
            fail(case, "daemon did not become ready")
            return
        if not d.wait_log(r"arena: 64 of 64 slots usable", 1):
            fail(case, "no 'arena: 64 of 64 slots usable' line at start")
        s, _ = sv.new_session(d, case, "mapped")
        if not s:
            return
        with s:
            pids = sv.worker_pids(d.proc.pid)
            for pid, own in [(d.proc.pid, None)] + [(p, 0) for p in pids]:
                for a, b, line in maps_of(pid):
                    for n in range(64):
                        lo = slot_base(n)
                        if n != own and a < lo + ARENA_SIZE and b > lo:
                            fail(case, f"slot {n} overlaps a mapping of {pid}: {line}")
            rc, text = ctl_status(ctlexe, d)
            if limit_line(text, "arena_slots_usable") != (64, 0):
                fail(case, f"lupinectl status does not show arena_slots_usable 64: {text!r}")
            sv.goodbye(s)
        d.stop()
    finally:
        d.close()
    print(f"ok   {case}", flush=True)


# ---- finding 7: a stale resume ----------------------------------------------

def pings(s, first, n):
    for seq in range(first, first + n):
        sync_ping(s, seq)
    return first + n - 1


def test_stale_resume(exe, ctlexe, tmp):
    case = "stale-resume"
    ck = os.path.join(tmp, "ck-stale")
    d = Daemon(exe, tmp, "stale-1", ["--checkpoint-dir", ck])
    try:
        if not d.wait_ready():
            fail(case, "daemon did not become ready")
            return
        s, tok = sv.new_session(d, case, "stale")
        if not s:
            return
        with s:
            last = pings(s, 1, 3)  # executed up to 3
            rc, _ = d.stop(60)  # checkpointed at seq 3
        if rc != 0:
            fail(case, f"the first drain: exit {rc}")
            return
    finally:
        d.close()
    d = Daemon(exe, tmp, "stale-2", ["--checkpoint-dir", ck])
    try:
        if not d.wait_ready():
            fail(case, "the second daemon did not become ready")
            return
        s, h, p = sv.hello(d.addr, "stale", tok)
        if h is None or h["status"] != 0:
            fail(case, f"the resume on the second daemon: {h} {sv.refusal(p)!r}")
            return
        last = pings(s, last + 1, 3)  # executed up to 6, never checkpointed
        pids = sv.worker_pids(d.proc.pid)
        d.proc.kill()  # a hard crash: the supervisor and its worker
        for pid in pids:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        d.proc.wait()
        s.close()
    finally:
        d.close()
    d = Daemon(exe, tmp, "stale-3", ["--checkpoint-dir", ck])
    try:
        if not d.wait_ready() or not d.wait_log(r"session stale restored into arena slot", 1):
            fail(case, "the third daemon did not restore the older checkpoint")
            return
        s = w.connect(d.addr)
        with s:
            s.sendall(w.frame(w.OP_HELLO, sv.hello_payload("stale", tok, last), flags=w.F_SYNC, seq=last + 1))
            try:
                h, p = w.read_frame(s)
            except (ConnectionError, OSError):
                h, p = None, b""
        why = sv.refusal(p) or ""
        if h is None or h["status"] != CUDA_ERROR_DEVICE_UNAVAILABLE or "stale checkpoint" not in why or \
                "restored at seq 3" not in why or "seq 6 executed" not in why:
            fail(case, f"a resume from a client that saw seq 6 after a restore at seq 3: {h} {why!r}")
        if not d.wait_log(r"session stale: resume by \S+ refused: stale checkpoint", 3):
            fail(case, "no supervisor line for the stale resume")
        # one that saw no more than the checkpoint still resumes
        s, h, p = sv.hello(d.addr, "stale", tok)
        with s:
            if h is None or h["status"] != 0:
                fail(case, f"a resume that saw nothing past the checkpoint was refused: {h} {sv.refusal(p)!r}")
        rc, _ = d.stop(60)
        if rc != 0:
            fail(case, f"exit {rc} (want 0)")
    finally:
        d.close()
    print(f"ok   {case}", flush=True)


# ---- finding 8: a tenant's sticky error -------------------------------------

def send_line(proc):
    proc.stdin.write("go\n")
    proc.stdin.flush()


def test_sticky(exe, ctlexe, tmp):
    case = "sticky"
    ck = os.path.join(tmp, "ck-sticky")
    port = sv.free_port()
    d = Daemon(exe, tmp, "sticky-1", ["--checkpoint-dir", ck], port=port)
    prog, healthy = None, None
    try:
        if not d.wait_ready():
            fail(case, "daemon did not become ready")
            return
        prog = subprocess.Popen([os.path.join(PROGS, "e2e_sticky_drain"), KERNELS], env=client_env(port, "sticky-job"),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if not expect_line(prog, "clean", case):
            return
        rc, _ = d.stop(60)  # a clean checkpoint: epoch 1
        if rc != 0 or not re.search(r"session sticky-job checkpointed", d.log()):
            fail(case, f"the clean drain: exit {rc}, or no 'checkpointed' line")
            return
        d.close()
        # the same port: the client reconnects and resumes there
        d = Daemon(exe, tmp, "sticky-2", ["--checkpoint-dir", ck], port=port)
        if not d.wait_ready():
            fail(case, "the second daemon did not become ready")
            return
        healthy, _ = sv.new_session(d, case, "healthy")
        send_line(prog)  # the client resumes, then runs the kernel that faults
        if not expect_line(prog, "sticky", case):
            return
        if not d.wait_log(r"session sticky-job resumed by the client", 1):
            fail(case, "sticky-job did not resume its restored session")
        rc, _ = d.stop(60)
        log = d.log()
        if rc != 0:
            fail(case, f"the drain with a sticky session: exit {rc} (want 0: not lupine's failure)")
        if not re.search(r"session sticky-job: ended by its own error: its CUDA context has the sticky error "
                         r"(700|717) \(CUDA_ERROR_\w+\); not checkpointed; its previous checkpoint, epoch 1, is kept",
                         log):
            fail(case, "no worker line naming the sticky error and the kept epoch")
        if not re.search(r"session sticky-job ended by its own error: ", log) or \
                re.search(r"session sticky-job LOST", log):
            fail(case, "the supervisor did not report sticky-job as ended by its own error (or said LOST)")
        if not re.search(r"session healthy checkpointed", log):
            fail(case, "the healthy session beside it was not checkpointed")
        if not re.search(r"drain finished: 1 of 2 session\(s\) checkpointed, 0 lost, .*1 ended by their own error",
                         log):
            fail(case, "the drain summary does not count 1 session ended by its own error")
        ed = epoch_dir(ck, "sticky-job")
        if not ed or not ed.endswith("0000000000000001") or not os.path.exists(os.path.join(ed, "COMMITTED")):
            fail(case, f"the previous checkpoint (epoch 1) is not kept: {ed}")
    finally:
        if healthy:
            healthy.close()
        if prog and prog.poll() is None:
            prog.kill()
            prog.communicate()
        d.close()
    print(f"ok   {case}", flush=True)


CASES = {
    "detach-grace": test_detach_grace,
    "idle-flood": test_idle_flood,
    "upload-caps": test_upload_caps,
    "quarantine": test_quarantine,
    "arena-slots": test_arena_slots,
    "stale-resume": test_stale_resume,
    "sticky": test_sticky,
}


def main():
    global PROGS, SHIM, KERNELS
    if len(sys.argv) < 6:
        print(__doc__, file=sys.stderr)
        return 1
    exe, ctlexe = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    PROGS, SHIM, KERNELS = (os.path.abspath(a) for a in sys.argv[3:6])
    names = sys.argv[6:] or list(CASES)
    return sv.run_cases(names, "lupined-hardening-", lambda name, tmp: CASES[name](exe, ctlexe, tmp))


if __name__ == "__main__":
    sys.exit(main())
