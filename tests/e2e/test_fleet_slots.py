#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""e2e: arena slots agreed across hosts that share a checkpoint store
(issue 17, item 6; docs/fleet.md, "Device addresses across hosts").

Usage: test_fleet_slots.py LUPINED LUPINECTL PROGS_DIR SHIM_DIR KERNELS_DIR

A session's device addresses are its arena slot's; a session adopted by
another host must find its slot free there. Hosts are lupined processes on
the simulator (tests/e2e/test_fleet.py's Host), all on one
--checkpoint-dir. Cases:
  1. distinct: sessions started on A and on B get different slots, while
     both run.
  2. kept: A drains for good; after its session's slot lease has expired,
     a new session on B still does not get that slot (the checkpoint holds
     it); the drained session's client resumes on B, which adopts it in
     its old slot, and the workload (device pointers kept across the move)
     ends exact.
  3. released: a session that ends for good gives its slot back to the
     fleet (logged), and the next new session on the other host takes it.
  4. refused: a session whose slot record vanished (as for a session of
     a lupine that predates slot records) has its slot taken by a new
     session on B, and notices; once drained, it is not restored on B at
     other addresses: the resume is refused with the reason, B's log
     names the holder, the client never hears that session's name, and
     the holder runs on.
  5. full: with every slot claimed by another host (tests/e2e/progs/
     store_claim.c), a new session is refused with "server full" and the
     reason; with one left, it gets that one; once the other host's claims
     have expired (and their sessions cannot come back), they are taken
     over.
  6. avoid: a HELLO naming the slots its client holds for other servers
     (LUP_HELLO_AVOID_SLOTS) gets another slot, with a store and without;
     one that leaves no slot is refused with the reason. LUPINE_SERVER's
     '|' alternatives fail over; an empty entry is refused.

Exit 0 on pass, 1 on failure (naming the case).
"""
import glob
import json
import os
import re
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as W  # noqa: E402
import test_fleet as F  # noqa: E402

check = W.Checks()
TTL_WAIT = float(F.TTL) + 2.5  # a slot lease no longer renewed has expired by then


def slot_of(host, ctl, name, timeout=20.0):
    """The arena slot lupinectl status shows for session name on host, once known."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = host.ctl(ctl, '--json', 'status')
        try:
            js = json.loads(r.stdout)
        except ValueError:
            js = {}
        for se in js.get('sessions', []):
            if se.get('name') == name and se.get('slot', -1) >= 0:
                return se['slot']
        time.sleep(0.1)
    return None


def distinct_and_kept_case(exe, ctl, progs, shim, kernels, tmp):
    ck = os.path.join(tmp, 'ck-slots')
    a = F.Host(exe, tmp, 'slotA', ck).wait_up()
    b = F.Host(exe, tmp, 'slotB', ck).wait_up()
    job = other = late = None
    try:
        check('slots: A agrees on slots through the store',
              a.wait_log(r'arena slots: agreed with the other hosts'), a.log()[-2000:])
        r = a.ctl(ctl, '--json', 'diag')
        rows = json.loads(r.stdout).get('checks', []) if r.stdout.strip().startswith('{') else []
        check('slots: lupinectl diag says so', any(x.get('check') == 'session leases' and
                                                   'arena slots agreed with the other hosts' in x.get('detail', '')
                                                   for x in rows), r.stdout[-1500:])
        job = F.workload(progs, kernels, shim, [a, b], 'slot-job', 400)
        check('distinct: the workload runs on A', bool(F.wait_line(job, r'round 10 ok')), a.log()[-2000:])
        slot_a = slot_of(a, ctl, 'slot-job')
        other = F.workload(progs, kernels, shim, [b], 'slot-other', 4000)
        check('distinct: a second session runs on B', bool(F.wait_line(other, r'round 10 ok')), b.log()[-2000:])
        slot_b = slot_of(b, ctl, 'slot-other')
        check('distinct: A and B gave their sessions different slots', slot_a is not None and slot_b is not None and
              slot_a != slot_b, f'A: {slot_a}, B: {slot_b}')
        check('distinct: B logged its slot as its own across the fleet',
              re.search(rf'session slot-other: arena slot {slot_b} .* is its own across the fleet', b.log())
              is not None, b.log()[-2000:])

        job.send_signal(signal.SIGSTOP)  # the client pauses while A drains for good
        a.stop()
        check('kept: A checkpointed the session', re.search(r'session slot-job: .*checkpoint', a.log()) is not None,
              a.log()[-2000:])
        time.sleep(TTL_WAIT)
        late = F.workload(progs, kernels, shim, [b], 'slot-late', 4000)
        check('kept: a new session runs on B after the slot lease expired', bool(F.wait_line(late, r'round 10 ok')),
              b.log()[-2000:])
        slot_late = slot_of(b, ctl, 'slot-late')
        check('kept: ... and did not get the drained session\'s slot (its checkpoint holds it)',
              slot_late is not None and slot_late not in (slot_a, slot_b), f'late {slot_late}, A {slot_a}, B {slot_b}')
        job.send_signal(signal.SIGCONT)
        ok, text = F.finish(job)
        check('kept: the drained session\'s client resumes on B, which adopts it; the workload ends exact', ok,
              text + b.log()[-3000:])
        check('kept: B restored it in its old slot', re.search(
            rf'session slot-job restored into arena slot {slot_a} ', b.log()) is not None, b.log()[-3000:])
        F.kill(other)
        F.kill(late)
        other = late = None
        check('released: a session that ended gives its slot back to the fleet',
              b.wait_log(r'session slot-job: arena slot \d+ released in the fleet'), b.log()[-2000:])
        a2 = F.Host(exe, tmp, 'slotA2', ck).wait_up()
        try:
            nxt = F.workload(progs, kernels, shim, [a2], 'slot-next', 30)
            ok, text = F.finish(nxt)
            check('released: a new session on another host runs', ok, text + a2.log()[-2000:])
            check('released: ... in the slot given back', re.search(
                rf'session slot-next: arena slot {slot_a} .* is its own across the fleet', a2.log()) is not None,
                a2.log()[-2000:])
        finally:
            a2.stop()
    finally:
        for c in (job, other, late):
            if c and c.poll() is None:
                c.send_signal(signal.SIGCONT)
            F.kill(c)
        a.stop()
        b.stop()


def refused_case(exe, ctl, progs, shim, kernels, tmp):
    ck = os.path.join(tmp, 'ck-refused')
    a = F.Host(exe, tmp, 'refA', ck).wait_up()
    b = F.Host(exe, tmp, 'refB', ck).wait_up()
    job = holder = None
    try:
        job = F.workload(progs, kernels, shim, [a], 'ref-old', 400)
        check('refused: the workload runs on A', bool(F.wait_line(job, r'round 10 ok')), a.log()[-2000:])
        slot = slot_of(a, ctl, 'ref-old')
        records = [p for p in glob.glob(os.path.join(ck, '.leases', f'*arena-slot-{slot:02d}*'))
                   if not p.endswith('@lock')]
        check('refused: the store holds the slot record', len(records) == 1, repr(os.listdir(
            os.path.join(ck, '.leases')) if os.path.isdir(os.path.join(ck, '.leases')) else 'no .leases'))
        for p in records:
            os.unlink(p)  # as if A's session predated slot records, or A did not share the store
        holder = F.workload(progs, kernels, shim, [b], 'ref-holder', 4000)
        check('refused: a new session runs on B', bool(F.wait_line(holder, r'round 10 ok')), b.log()[-2000:])
        check('refused: ... in the slot of A\'s session', slot_of(b, ctl, 'ref-holder') == slot, b.log()[-2000:])
        check('refused: A notices that its slot was taken over',
              a.wait_log(r'session ref-old: its arena slot \d+ was taken over by session ref-holder'),
              a.log()[-2000:])
        F.kill(job)  # the client goes; A keeps the session for --session-ttl
        job = None
        a.stop()  # ... and checkpoints it, naming the slot ref-holder has
        status, msg = F.raw_resume(b, 'ref-old')
        check('refused: resuming A\'s session on B is refused with the reason',
              status != 0 and 'arena slot' in msg and 'held by another session' in msg, f'{status} {msg!r}')
        check('refused: ... without naming the other session', 'ref-holder' not in msg, msg)
        check('refused: B\'s log names the holder', re.search(
            rf'session ref-old: .*arena slot {slot} .*which session ref-holder holds', b.log()) is not None,
            b.log()[-3000:])
        check('refused: the checkpoint is kept', glob.glob(os.path.join(ck, 'ref-old*')) != [], repr(os.listdir(ck)))
        check('refused: the holder runs on', holder.poll() is None and bool(F.wait_line(holder, r'round \d+ ok')),
              b.log()[-2000:])
    finally:
        F.kill(job)
        F.kill(holder)
        a.stop()
        b.stop()


def claim(progs, ck, first, count, owner, ttl_s):
    r = subprocess.run([os.path.join(progs, 'store_claim'), ck, str(first), str(count), owner, str(ttl_s)],
                       capture_output=True, text=True, timeout=60)
    return r.returncode == 0, r.stdout + r.stderr


def full_case(exe, ctl, progs, shim, kernels, tmp):
    ck = os.path.join(tmp, 'ck-full')
    os.makedirs(ck)
    ok, out = claim(progs, ck, 0, 63, 'other-host-session', 600)
    check('full: another host holds 63 slots', ok, out)
    a = F.Host(exe, tmp, 'fullA', ck).wait_up()
    try:
        c = F.workload(progs, kernels, shim, [a], 'full-one', 20)
        ok, text = F.finish(c)
        check('full: a new session runs in the one slot left', ok, text + a.log()[-2000:])
        check('full: ... slot 63', re.search(r'session full-one: arena slot 63 .* is its own across the fleet',
                                             a.log()) is not None, a.log()[-2000:])
        check('full: its slot is given back when it ends', a.wait_log(r'session full-one: arena slot 63 released'),
              a.log()[-2000:])
        ok, out = claim(progs, ck, 63, 1, 'other-host-session', 600)
        check('full: the other host takes the last slot once it is given back', ok, out + a.log()[-2000:])
        c = F.workload(progs, kernels, shim, [a], 'full-two', 20)
        ok, text = F.finish(c, timeout=60)
        check('full: a new session is refused with the reason', not ok and 'server full: all 64 device address '
              'ranges (arena slots) are held by sessions of the fleet' in text, text + a.log()[-2000:])
    finally:
        a.stop()
    ck2 = os.path.join(tmp, 'ck-expired')
    os.makedirs(ck2)
    ok, out = claim(progs, ck2, 0, 64, 'gone-session', 1)
    check('full: a host that died held every slot for 1 s', ok, out)
    time.sleep(1.5)
    b = F.Host(exe, tmp, 'fullB', ck2).wait_up()
    try:
        c = F.workload(progs, kernels, shim, [b], 'full-after', 20)
        ok, text = F.finish(c)
        check('full: its slots are taken over once expired (no lease, no checkpoint of their sessions)', ok and
              re.search(r'session full-after: arena slot 0 .* is its own across the fleet', b.log()) is not None,
              text + b.log()[-2000:])
    finally:
        b.stop()


ARENA_BASE, ARENA_SIZE = 0x200000000000, 1 << 40


def hello_avoid(port, name, avoid):
    """A new session's HELLO with an avoid mask: (status, slot or message)."""
    nb = name.encode()
    payload = (struct.pack('<IIII', W.MAGIC, W.VERSION, 13000, 0x8) + struct.pack('<H', len(nb)) + nb + bytes(16) +
               struct.pack('<QQ', 0, avoid))
    s = W.connect(('127.0.0.1', port))
    try:
        s.sendall(W.frame(W.OP_HELLO, payload, flags=W.F_SYNC))
        h, p = W.read_frame(s)
        if h['status'] != 0:
            return h['status'], p[2:].decode('utf-8', 'replace')
        return 0, (struct.unpack_from('<Q', p, 32)[0] - ARENA_BASE) // ARENA_SIZE
    finally:
        s.close()


def avoid_case(exe, ctl, progs, shim, kernels, tmp):
    ck = os.path.join(tmp, 'ck-avoid')
    a = F.Host(exe, tmp, 'avoidA', ck).wait_up()
    port = W.free_port()
    logf = open(os.path.join(tmp, 'avoid-nostore.log'), 'ab')
    env = {k: v for k, v in os.environ.items() if k not in ('NOTIFY_SOCKET', 'LISTEN_FDS', 'LISTEN_PID')}
    plain = subprocess.Popen([exe, '--backend', 'sim', '--listen', f'127.0.0.1:{port}', '--session-ttl', '30'],
                             stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, env=env)
    try:
        check('avoid: a lupined without a store starts', W.wait_port(port, plain, 20))
        every = (1 << 64) - 1
        for label, p in (('with a store', a.port), ('without a store', port)):
            st, msg = hello_avoid(p, 'avoid-all', every)
            check(f'avoid: {label}: a mask of every slot is refused with the reason',
                  st != 0 and 'server full' in str(msg) and 'outside the 64' in str(msg), f'{st} {msg!r}')
            st, slot = hello_avoid(p, 'avoid-but5', every & ~(1 << 5))
            check(f'avoid: {label}: all but slot 5 avoided: slot 5', st == 0 and slot == 5, f'{st} {slot!r}')
            st, slot = hello_avoid(p, 'avoid-0', 1)
            check(f'avoid: {label}: slot 0 avoided: slot 1', st == 0 and slot == 1, f'{st} {slot!r}')
        # LUPINE_SERVER's failover alternatives with '|' (common/server_list.h)
        env = F.client_env(shim, [f'127.0.0.1:{W.free_port()}|127.0.0.1:{port}'], 'avoid-alt')
        r = subprocess.run([os.path.join(progs, 'e2e_basic')], env=env, capture_output=True, text=True, timeout=60)
        check('avoid: LUPINE_SERVER="DEAD|LIVE" fails over to the live one', r.returncode == 0,
              (r.stdout + r.stderr)[-1500:])
        env = F.client_env(shim, [f'127.0.0.1:{port}||127.0.0.1:{port}'], 'avoid-bad')
        r = subprocess.run([os.path.join(progs, 'e2e_basic')], env=env, capture_output=True, text=True, timeout=60)
        check('avoid: an empty entry in LUPINE_SERVER is refused with the reason', r.returncode != 0 and
              'LUPINE_SERVER: an empty entry' in r.stderr, (r.stdout + r.stderr)[-1500:])
    finally:
        plain.terminate()
        plain.wait(timeout=30)
        logf.close()
        a.stop()


def main():
    F.run_cases([('distinct-kept-released', distinct_and_kept_case), ('refused', refused_case), ('full', full_case),
                 ('avoid', avoid_case)], check, 'lupine-slots-')


if __name__ == '__main__':
    main()
