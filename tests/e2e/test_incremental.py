#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""e2e: incremental checkpoints (issue 17, item 5; docs/fleet.md), on
the simulated GPU with the directory provider.

usage: test_incremental.py LUPINED LUPINECTL PROGS_DIR SHIM_DIR KERNELS_DIR

The client (e2e_incremental) holds 200 MiB of device memory in 1 MiB
pieces, each of a pattern it can check, and changes a known share of them
on command. Cases, in one sequence:
  size      a first checkpoint writes all the memory; after 1% of the pieces
            change, the next one writes about 1% (the epoch's files on disk
            are measured), and the log says "incremental"; after 1% other
            pieces change, the third refers to both epochs before it, which
            the store keeps.
  collect   epoch 2's pieces change again: the fourth refers to 1 and 3,
            and epoch 2 is gone; later all pieces change: that checkpoint
            is full, and every epoch before it is gone.
  restore   SIGKILL of the host, a new daemon: the session is assembled
            from epochs 1, 3 and 4 and every piece reads back exact.
  damaged   a byte of a base epoch's memory file is flipped; after another
            crash the session is refused (the client gets an error, not
            wrong data) and the newest epoch goes to the quarantine.
  off       LUPINE_CHECKPOINT_INCREMENTAL=0 writes every checkpoint in full.
  migrate   lupinectl migrate to a second daemon on the same store: the
            pre-copy writes the memory while the client runs and changes
            10% of it; the pause writes only pieces changed after their
            copy, the report says both, and the target reads back exact;
            back again with nothing changed, pre-copy and pause write
            nothing; a client that frees memory during a pre-copy has it
            given up, and the move still ends exact.
  source dies  the source is SIGKILLed during a pre-copy: the store keeps
            the last committed epoch, and the target adopts it once the
            lease expires; the client reads back exact.

Exit 0 on pass, 1 on failure (naming the case).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as w  # noqa: E402
from restart_harness import read_line  # noqa: E402
from test_ckpt_now import Daemon  # noqa: E402

check = w.Checks()
MIB = 200


def epoch_dirs(ck, session):
    d = os.path.join(ck, session)
    return sorted(int(e, 16) for e in os.listdir(d) if re.fullmatch(r'[0-9a-f]{16}', e)) if os.path.isdir(d) else []


def epoch_mem_bytes(ck, session, epoch):
    """Bytes of the memory objects (mem/*) of one epoch on disk."""
    top = os.path.join(ck, session, f'{epoch:016x}', 'mem')
    total = 0
    for root, _, files in os.walk(top):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


class Client:
    def __init__(self, progs, shim, d, session, mib=MIB, also=None):
        env = dict(os.environ)
        servers = f'127.0.0.1:{d.port}' + (f'|127.0.0.1:{also.port}' if also else '')
        env.update(LUPINE_SERVER=servers, LUPINE_SESSION=session, LUPINE_RECONNECT_TIMEOUT='60')
        env['LD_LIBRARY_PATH'] = shim + (':' + env['LD_LIBRARY_PATH'] if env.get('LD_LIBRARY_PATH') else '')
        self.p = subprocess.Popen([os.path.join(progs, 'e2e_incremental'), str(mib)], env=env, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def line(self, timeout=60):
        return (read_line(self.p.stdout, timeout) or '').rstrip('\n')

    def say(self, cmd, timeout=120):
        self.p.stdin.write(cmd + '\n')
        self.p.stdin.flush()
        return self.line(timeout)

    def close(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.write('quit\n')
                self.p.stdin.flush()
                self.p.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.p.kill()
        out, err = self.p.communicate()
        return out, err


def ctl(ctlexe, d, *args):
    return subprocess.run([ctlexe, '-s', d.sock] + list(args), capture_output=True, text=True, timeout=120)


def checkpoint(ctlexe, d, session, epoch):
    r = ctl(ctlexe, d, 'sessions', 'checkpoint', session)
    ok = r.returncode == 0 and f'checkpointed at epoch {epoch}' in r.stdout
    return ok, r.stdout + r.stderr


def run(exe, ctlexe, progs, shim, tmp):
    ck = os.path.join(tmp, 'ck')
    d = Daemon(exe, tmp, 'inc', ['--checkpoint-dir', ck])
    c = None
    try:
        check('the daemon starts', d.ready, d.log())
        c = Client(progs, shim, d, 'inc')
        check('the client fills its memory', c.line().startswith(f'ready {MIB} MiB'), d.log()[-2000:])
        ok, text = checkpoint(ctlexe, d, 'inc', 1)
        full = epoch_mem_bytes(ck, 'inc', 1)
        check('size: the first checkpoint is full', ok and full == MIB << 20, f'{full} bytes; {text}')
        check('size: 1% of the pieces change', c.say('dirty 10 1') == 'dirtied 2 pieces')
        ok, text = checkpoint(ctlexe, d, 'inc', 2)
        inc = epoch_mem_bytes(ck, 'inc', 2)
        check('size: the second writes 1% of the memory (2 of 200 MiB)', ok and inc == 2 << 20,
              f'{inc} bytes; {text}')
        check('size: the log says so',
              d.wait_log(r'checkpoint epoch 2 \(durable\): 0\.20 GiB .* 2097152 bytes copied.*incremental: 1\.0% '
                         r'written, the rest in 1 older epoch'), d.log()[-2000:])
        check('size: 1% other pieces change', c.say('dirty 10 2 50') == 'dirtied 2 pieces')
        ok, text = checkpoint(ctlexe, d, 'inc', 3)
        check('size: the third writes 1% too, and refers to the two before it, which the store keeps',
              ok and epoch_mem_bytes(ck, 'inc', 3) == 2 << 20 and epoch_dirs(ck, 'inc') == [1, 2, 3] and
              d.wait_log(r'checkpoint epoch 3 .*incremental: 1\.0% written, the rest in 2 older epoch'),
              f'{epoch_dirs(ck, "inc")}; {text}')
        check('size: the pieces of epoch 2 change again', c.say('dirty 10 3') == 'dirtied 2 pieces')
        ok, text = checkpoint(ctlexe, d, 'inc', 4)
        check('collect: epoch 4 refers to 1 and 3; epoch 2, which nothing refers to now, is gone',
              ok and epoch_dirs(ck, 'inc') == [1, 3, 4] and
              d.wait_log(r'checkpoint epoch 4 .*incremental: 1\.0% written, the rest in 2 older epoch'),
              f'{epoch_dirs(ck, "inc")}; {text}')
        d.crash()
        d.close()
        d = Daemon(exe, tmp, 'inc', ['--checkpoint-dir', ck], sock=d.sock, port=d.port)
        check('restore: after SIGKILL the new daemon restores epoch 4, from epochs 1, 3 and 4',
              d.ready and d.wait_log(r'session inc: restored checkpoint epoch 4'), d.log()[-2000:])
        check('restore: every piece reads back exact', c.say('check', timeout=120) == 'check ok', d.log()[-2000:])

        check('collect: all pieces change', c.say('dirty 1000 5') == 'dirtied 200 pieces')
        ok, text = checkpoint(ctlexe, d, 'inc', 5)
        check('collect: the checkpoint is full and says why',
              ok and epoch_mem_bytes(ck, 'inc', 5) == MIB << 20 and
              d.wait_log(r'checkpoint epoch 5 is full: every piece changed'), text + d.log()[-1500:])
        check('collect: the epochs it does not refer to are gone', epoch_dirs(ck, 'inc') == [5],
              str(epoch_dirs(ck, 'inc')))

        check('damaged: 1% changes', c.say('dirty 10 4 25') == 'dirtied 2 pieces')
        ok, text = checkpoint(ctlexe, d, 'inc', 6)
        check('damaged: epoch 6 refers to epoch 5', ok and epoch_dirs(ck, 'inc') == [5, 6], text)
        flip_one(os.path.join(ck, 'inc', f'{5:016x}', 'mem'))
        d.crash()
        d.close()
        d = Daemon(exe, tmp, 'inc', ['--checkpoint-dir', ck], sock=d.sock, port=d.port)
        check('damaged: the new daemon refuses the session, naming the damage',
              d.ready and d.wait_log(r'session inc cannot be restored from checkpoint epoch 6: .*does not match its '
                                     r'checksum', timeout=30), d.log()[-2500:])
        check('damaged: epoch 6 is moved to the quarantine',
              os.path.isdir(os.path.join(ck, '.quarantine')) and 6 not in epoch_dirs(ck, 'inc'),
              str(epoch_dirs(ck, 'inc')))
        got = c.say('check', timeout=90)
        check('damaged: the client gets an error, never wrong data', got != 'check ok', got)
    finally:
        if c:
            c.close()
        d.close()


def flip_one(memdir):
    """Flips a byte in the middle of the first memory file found."""
    for root, _, files in sorted(os.walk(memdir)):
        for f in sorted(files):
            p = os.path.join(root, f)
            if os.path.getsize(p) > 4096:
                with open(p, 'r+b') as fh:
                    fh.seek(os.path.getsize(p) // 2)
                    b = fh.read(1)
                    fh.seek(-1, 1)
                    fh.write(bytes([b[0] ^ 0x5a]))
                return p
    raise RuntimeError('no memory file to damage in ' + memdir)


def run_off(exe, ctlexe, progs, shim, tmp):
    ck = os.path.join(tmp, 'ck-off')
    os.environ['LUPINE_CHECKPOINT_INCREMENTAL'] = '0'
    try:
        d = Daemon(exe, tmp, 'off', ['--checkpoint-dir', ck])
    finally:
        del os.environ['LUPINE_CHECKPOINT_INCREMENTAL']
    c = None
    try:
        c = Client(progs, shim, d, 'off', mib=32)
        check('off: the client fills its memory', c.line().startswith('ready 32 MiB'), d.log()[-2000:])
        ok1, _ = checkpoint(ctlexe, d, 'off', 1)
        c.say('dirty 100 1')
        ok2, text = checkpoint(ctlexe, d, 'off', 2)
        check('off: LUPINE_CHECKPOINT_INCREMENTAL=0 writes every checkpoint in full',
              ok1 and ok2 and epoch_mem_bytes(ck, 'off', 2) == 32 << 20 and epoch_dirs(ck, 'off') == [2], text)
    finally:
        if c:
            c.close()
        d.close()


def migrate(ctlexe, src, dst, session):
    r = subprocess.run([ctlexe, '-s', src.sock, '--json', 'migrate', session, '--to', f'127.0.0.1:{dst.port}'],
                       capture_output=True, text=True, timeout=120)
    try:
        return json.loads(r.stdout.strip().splitlines()[-1]), r.stdout + r.stderr
    except (ValueError, IndexError):
        return {}, r.stdout + r.stderr


def run_migrate(exe, ctlexe, progs, shim, tmp):
    """lupinectl migrate with a pre-copy: the memory is written while the
    session runs (slowed by LUPINE_PRECOPY_DELAY_MS so that the client can
    change memory meanwhile), and the pause writes only what changed."""
    ck = os.path.join(tmp, 'ck-mig')
    os.environ['LUPINE_PRECOPY_DELAY_MS'] = '25'
    try:
        a = Daemon(exe, tmp, 'migA', ['--checkpoint-dir', ck, '--host-id', 'migA'])
        b = Daemon(exe, tmp, 'migB', ['--checkpoint-dir', ck, '--host-id', 'migB'])
    finally:
        del os.environ['LUPINE_PRECOPY_DELAY_MS']
    c = None
    try:
        c = Client(progs, shim, a, 'mig')
        check('migrate: the client fills its memory on A', c.line().startswith(f'ready {MIB} MiB'), a.log()[-2000:])
        result = {}

        def go():
            result['js'], result['text'] = migrate(ctlexe, a, b, 'mig')
        t = threading.Thread(target=go)
        t.start()
        began = a.wait_log(r'session mig: pre-copy of epoch 1 begun: 0\.20 of 0\.20 GiB to write while the '
                           r'session runs', timeout=20)
        time.sleep(0.7)  # 50 units of 4 MiB, 25 ms each: more than half copied now
        dirtied = c.say('dirty 100 7')  # 20 pieces spread over all memory, some copied already
        t.join(timeout=120)
        js = result.get('js', {})
        check('migrate: the pre-copy begins while the session runs, and the client changes memory meanwhile',
              began and dirtied == 'dirtied 20 pieces', dirtied + a.log()[-2000:])
        print(f"migrate: pre-copied {js.get('precopy_bytes')} bytes; the pause wrote {js.get('paused_bytes')} "
              f"in {js.get('pause_s')} s", flush=True)
        check('migrate: the report has the pre-copy (all 200 MiB) and a pause that wrote only changed pieces',
              js.get('state') == 'done' and js.get('precopy_bytes') == MIB << 20 and
              0 < js.get('paused_bytes', 0) <= 20 << 20 and js.get('pause_s', 0) > 0, result.get('text', ''))
        check('migrate: the pre-copy logs its progress and its end',
              re.search(r'session mig: pre-copy: \d+%, [\d.]+ of 0\.20 GiB, [\d.]+ GB/s, about \d+ s left', a.log())
              is not None and re.search(r'session mig: pre-copy: 0\.20 GiB in [\d.]+ s', a.log()) is not None,
              a.log()[-2000:])
        check('migrate: the target restores it and every piece reads back exact', c.say('check') == 'check ok',
              b.log()[-2000:])
        js, text = migrate(ctlexe, b, a, 'mig')
        check('migrate: back to A, nothing changed: the pre-copy refers to the store and writes nothing, nor does '
              'the pause', js.get('state') == 'done' and js.get('precopy_bytes') == 0 and
              js.get('paused_bytes') == 0, text + b.log()[-1500:])
        check('migrate: on A every piece reads back exact', c.say('check') == 'check ok', a.log()[-2000:])
        check('migrate: all memory changes', c.say('dirty 1000 9') == 'dirtied 200 pieces')
        result.clear()
        mark = len(a.log())
        t = threading.Thread(target=go)
        t.start()
        began = a.wait_log(r'session mig: pre-copy of epoch \d+ begun: 0\.20 of 0\.20 GiB', timeout=20, count=2)
        realloc = c.say('realloc')  # frees the memory the pre-copy reads
        t.join(timeout=120)
        js = result.get('js', {})
        check('migrate: the client frees memory during the pre-copy: it is given up, the drain writes an ordinary '
              'checkpoint', began and realloc == 'reallocated' and js.get('state') == 'done' and
              js.get('precopy_bytes') == 0 and js.get('paused_bytes') == MIB << 20 and
              re.search(r'session mig: pre-copy of epoch \d+ given up while it ran: the client freed device memory',
                        a.log()[mark:]) is not None, result.get('text', '') + a.log()[-2000:])
        check('migrate: ... and on B every piece reads back exact', c.say('check') == 'check ok', b.log()[-2000:])
        js, text = migrate(ctlexe, b, a, 'mig')
        check('migrate: back to A once more', js.get('state') == 'done' and c.say('sync') == 'synced', text)
        r = subprocess.run([ctlexe, '-s', a.sock, 'sessions', 'checkpoint', 'mig'], capture_output=True, text=True,
                           timeout=60)
        check('migrate: a checkpoint on A afterwards is incremental (the restored epoch is its base)',
              r.returncode == 0 and a.wait_log(r'session mig: checkpoint epoch \d+ \(durable\).*incremental: 0\.0% '
                                               r'written'), r.stdout + r.stderr + a.log()[-1500:])
    finally:
        if c:
            c.close()
        a.close()
        b.close()


def run_source_dies(exe, ctlexe, progs, shim, tmp):
    """The source is SIGKILLed during a migration's pre-copy: the pre-copied
    save never becomes visible, and the target adopts the session from its
    last committed checkpoint once the lease expires; the client, idle
    since that checkpoint, reads back exact."""
    ck = os.path.join(tmp, 'ck-die')
    os.environ['LUPINE_PRECOPY_DELAY_MS'] = '50'
    try:
        a = Daemon(exe, tmp, 'dieA', ['--checkpoint-dir', ck, '--host-id', 'dieA', '--lease-ttl', '7'])
        b = Daemon(exe, tmp, 'dieB', ['--checkpoint-dir', ck, '--host-id', 'dieB', '--lease-ttl', '7'])
    finally:
        del os.environ['LUPINE_PRECOPY_DELAY_MS']
    c = None
    try:
        c = Client(progs, shim, a, 'die', also=b)  # the client lists A, then B
        check('source dies: the client fills its memory on A', c.line().startswith(f'ready {MIB} MiB'))
        check('source dies: a checkpoint on A (epoch 1)', checkpoint(ctlexe, a, 'die', 1)[0])
        check('source dies: all memory changes after it', c.say('dirty 1000 3') == 'dirtied 200 pieces')
        check('source dies: ... and a second checkpoint (epoch 2) has it', checkpoint(ctlexe, a, 'die', 2)[0])
        t = threading.Thread(target=migrate, args=(ctlexe, a, b, 'die'))
        t.start()
        began = a.wait_log(r'session die: pre-copy of epoch 3 begun', timeout=20)
        a.crash()
        t.join(timeout=60)
        check('source dies: A is SIGKILLed during the pre-copy, before its commit', began and
              epoch_dirs(ck, 'die') == [2], str(epoch_dirs(ck, 'die')))
        got = c.say('check', timeout=120)
        check('source dies: B adopts the session from epoch 2 once the lease expires; every piece exact',
              got == 'check ok' and b.wait_log(r'session die: restored checkpoint epoch 2', timeout=5),
              got + b.log()[-2000:])
    finally:
        if c:
            c.close()
        a.close()
        b.close()


def main():
    if len(sys.argv) != 6:
        print(__doc__, file=sys.stderr)
        return 2
    exe, ctlexe, progs, shim, _ = (os.path.abspath(a) for a in sys.argv[1:6])
    tmp = tempfile.mkdtemp(prefix='incr-')
    try:
        run(exe, ctlexe, progs, shim, tmp)
        run_off(exe, ctlexe, progs, shim, tmp)
        run_migrate(exe, ctlexe, progs, shim, tmp)
        run_source_dies(exe, ctlexe, progs, shim, tmp)
    finally:
        if check.failed:
            print(f'logs kept in {tmp}', flush=True)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if check.failed:
        print('FAILED: ' + ', '.join(check.failed))
        return 1
    print('ok: incremental checkpoints')
    return 0


if __name__ == '__main__':
    sys.exit(main())
