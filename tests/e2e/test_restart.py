#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Sessions that survive restarts, on the simulated GPU.

usage: test_restart.py LUPINED PROGS_DIR SHIM_DIR KERNELS_DIR [RESTARTS]

A client runs a long verified workload (e2e_restart) while the daemon is
stopped with SIGTERM at random moments and started again with the same
checkpoint directory. The client must finish with exactly the expected data
(its counter proves no call was lost or ran twice). Then events across a
restart (e2e_events_restore: recorded events complete, a never-recorded one
as before, elapsed times as measured before), and the fault cases: a
corrupt checkpoint is refused while the daemon serves others, a worker
killed with SIGKILL makes its client fail fast and cleanly, a wrong resume
token is refused. The restarts change the lane count each time
(LUPINE_CHECKPOINT_LANES); a 1 GiB session is saved with 3 lanes and
restored with 4 and with 2, its every byte verified, and a provider write
that fails in the middle of a many-lane save fails it loudly while the
previous checkpoint stays restorable. Memory hashes made on the CPU are
checked on the GPU and the other way round, and a flipped bit in saved
memory is refused by either check. --checkpoint-verify reads saved memory
back through the directory provider and through the example provider
with direct writes, every piece matching the GPU's hash, and fails a save
whose read-back has one bit flipped. Stream-ordered pools keep their
allocations, data and attributes across a durable restart, an upgrade and
a hot restart (test_pools_restart.py).
"""
import os
import random
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as W  # noqa: E402
import test_vmm_restart  # noqa: E402
from restart_harness import read_line  # noqa: E402

check = W.Checks()
FAILED = check.failed
free_port = W.free_port


class Daemon:
    def __init__(self, lupined, ckdir, port, log_path, extra_env=None, args=None):  # noqa: D107
        """ckdir: the --checkpoint-dir, or None when args name another provider."""
        env = dict(os.environ)
        env.pop('LD_LIBRARY_PATH', None)
        env.update(extra_env or {})
        self.log_path = log_path
        self.log = open(log_path, 'a')
        backend = os.environ.get('LUPINE_TEST_BACKEND', 'sim')
        cmd = [lupined, '--backend', backend, '--listen', f'127.0.0.1:{port}', '--session-ttl', '120',
               '--drain-timeout', '30'] + (['--checkpoint-dir', ckdir] if ckdir else []) + (args or [])
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        if not W.wait_port(port, self.proc, 20):
            raise RuntimeError('lupined did not start:\n' + self.text()[-3000:])

    def text(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM, timeout=60):
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return 'killed'


def client_env(shim, port, name):
    env = dict(os.environ)
    env['LUPINE_SERVER'] = f'127.0.0.1:{port}'
    env['LUPINE_SESSION'] = name
    env['LUPINE_RECONNECT_TIMEOUT'] = '120'
    env['LD_LIBRARY_PATH'] = shim + (':' + env['LD_LIBRARY_PATH'] if env.get('LD_LIBRARY_PATH') else '')
    return env


def restart_loop(lupined, progs, shim, kernels, tmp, restarts):
    ckdir = os.path.join(tmp, 'ckpt')
    port = free_port()
    log = os.path.join(tmp, 'lupined.log')
    d = Daemon(lupined, ckdir, port, log, {'LUPINE_CHECKPOINT_LANES': '1'})
    client = subprocess.Popen([os.path.join(progs, 'e2e_restart'), kernels, str(40 * restarts + 60), '15'],
                              env=client_env(shim, port, 'restart-job'), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    rng = random.Random(20261129)
    clean = 0
    for i in range(restarts):
        time.sleep(rng.uniform(0.3, 1.2))
        if client.poll() is not None:
            break
        rc = d.stop()
        clean += rc == 0
        # saved with one lane count, restored (and saved next) with another
        d = Daemon(lupined, ckdir, port, log, {'LUPINE_CHECKPOINT_LANES': str(1 + (i + 1) % 4)})
    out, err = client.communicate(timeout=600)
    d.stop()
    text = d.text()
    check(f'{restarts} SIGTERM restarts: every drain exited 0', clean == restarts, f'{clean}/{restarts}')
    check('every restart checkpointed and restored the session',
          text.count('restored checkpoint epoch') >= restarts, text[-3000:])
    check('the client finished with exactly the expected data',
          client.returncode == 0 and 'counter exact' in out, out[-1500:] + err[-3000:])
    return ckdir, port


def events_across_restore(lupined, progs, shim, kernels, tmp):
    """A session records events, sits idle while the daemon is restarted
    with the same checkpoint directory, then checks them (the checks are in
    e2e_events_restore.c; its output is kept for the log)."""
    ckdir = os.path.join(tmp, 'ckpt4')
    port = free_port()
    log = os.path.join(tmp, 'lupined4.log')
    d = Daemon(lupined, ckdir, port, log)
    c = subprocess.Popen([os.path.join(progs, 'e2e_events_restore'), kernels], env=client_env(shim, port, 'events'),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = read_line(c.stdout, 60)
        check('events: recorded and timed before the restart', line is not None and line.startswith('recorded:'),
              repr(line))
        print(f'  {line.strip() if line else line}')
        check('events: the drain exits 0', d.stop() == 0)
        d = Daemon(lupined, ckdir, port, log)
        c.stdin.write('go\n')
        c.stdin.flush()
        out, err = c.communicate(timeout=120)
    finally:
        if c.poll() is None:
            c.kill()
            c.communicate()
        d.stop()
    text = d.text()
    check('events: the session was checkpointed and restored', 'events: restored checkpoint epoch' in text,
          text[-2000:])
    print('  ' + '\n  '.join(out.strip().splitlines()))
    check('events: recorded ones complete, the never-recorded one as before, elapsed times as measured before',
          c.returncode == 0 and 'e2e_events_restore: OK' in out, out[-1500:] + err[-3000:])
    lines = out.splitlines()
    flushed = lines[:next((i for i, l in enumerate(lines) if l.startswith('restored:')), len(lines))]
    want = [f'device says hello from block 0 thread {t} round 9' for t in range(2)]
    check('device printf flushed by the drain reaches the client before its next call returns',
          sorted(flushed) == want, repr(lines[:6]))


def fault_cases(lupined, progs, shim, kernels, tmp):
    ckdir = os.path.join(tmp, 'ckpt2')
    port = free_port()
    log = os.path.join(tmp, 'lupined2.log')
    d = Daemon(lupined, ckdir, port, log)
    # two sessions, checkpointed by a drain
    procs = [subprocess.Popen([os.path.join(progs, 'e2e_restart'), kernels, '100000', '20'],
                              env=client_env(shim, port, name), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for name in ('victim', 'bystander')]
    time.sleep(1.5)
    check('drain with two sessions exits 0', d.stop() == 0)
    # damage one session's manifest
    damaged = False
    for root, _, files in os.walk(os.path.join(ckdir, 'victim')):
        for f in files:
            if f == 'manifest':
                p = os.path.join(root, f)
                with open(p, 'r+b') as fh:
                    fh.seek(40)
                    b = fh.read(1)
                    fh.seek(40)
                    fh.write(bytes([b[0] ^ 0xff]))
                damaged = True
    check('found the manifest to damage', damaged)
    d = Daemon(lupined, ckdir, port, log)
    time.sleep(2)
    text = d.text()
    check('a corrupt checkpoint is refused with a clear message', 'victim cannot be restored' in text, text[-2000:])
    check('the other session is restored', 'session bystander: restored' in text or 'bystander: restored' in text)
    # a wrong resume token is refused
    s = W.connect(('127.0.0.1', port))
    pl = W.hello_payload('bystander')
    pl = pl[:-24] + bytes([0x5a] * 16) + pl[-8:]
    s.sendall(W.frame(W.OP_HELLO, pl, flags=W.F_SYNC))
    h, p = W.read_frame(s)
    s.close()
    check('a wrong resume token is refused', h['status'] != 0, str(h))
    # kill -9 the bystander's worker: its client fails fast with one clear line
    victim = procs[0]
    byst = procs[1]
    out, err = victim.communicate(timeout=120)
    check('the client of the corrupt session fails cleanly', victim.returncode != 0 and 'lost the session' in err,
          err[-1500:])
    workers = subprocess.run(['pgrep', '-P', str(d.proc.pid)], capture_output=True, text=True).stdout.split()
    t0 = time.time()
    for w in workers:
        os.kill(int(w), signal.SIGKILL)
    out, err = byst.communicate(timeout=60)
    check('SIGKILL of a worker: its client fails within 5 s', byst.returncode != 0 and time.time() - t0 < 5,
          f'{time.time() - t0:.1f} s; ' + err[-1500:])
    check('the daemon survives its worker being killed', d.proc.poll() is None)
    d.stop()


def disk_full(lupined, progs, shim, kernels, tmp):
    """A checkpoint that fails (the disk is full) is reported, and the
    previous committed checkpoint stays intact and restorable; the client,
    whose calls the lost checkpoint had, is told its session is lost."""
    ckdir = os.path.join(tmp, 'ckpt3')
    port = free_port()
    log = os.path.join(tmp, 'lupined3.log')
    d = Daemon(lupined, ckdir, port, log)
    c = subprocess.Popen([os.path.join(progs, 'e2e_restart'), kernels, '100000', '20'],
                         env=client_env(shim, port, 'diskfull'), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    time.sleep(1.0)
    check('first drain (epoch 1) succeeds', d.stop() == 0)
    d = Daemon(lupined, ckdir, port, log, {'LUPINE_DIR_PROVIDER_FAIL': 'write:2:ENOSPC', 'LUPINE_CHECKPOINT_LANES': '4'})
    time.sleep(1.5)  # the client resumes and runs more calls
    rc = d.stop()
    text = d.text()
    check('a checkpoint that hits a full disk fails loudly', rc == 1 and 'LOST' in text and 'No space left' in text,
          f'rc={rc} ' + text[-1500:])
    d = Daemon(lupined, ckdir, port, log)
    time.sleep(1.5)
    text = d.text()
    check('the previous checkpoint is intact and restores', text.count('diskfull: restored checkpoint epoch 1') >= 2,
          text[-1500:])
    out, err = c.communicate(timeout=120)
    check('the client learns that its newer state is lost', c.returncode != 0 and 'lost the session' in err,
          err[-1500:])
    d.stop()


def bigsession(progs, shim, port, name, go, label):
    """A client holding 1 GiB (e2e_bigsession) that has filled it and waits
    for the file `go` before it reads back and checks every byte."""
    c = subprocess.Popen([os.path.join(progs, 'e2e_bigsession'), '1', go], env=client_env(shim, port, name),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = read_line(c.stdout, 120)
    check(f'{label}: the client filled 1 GiB', line is not None and 'filled' in line, repr(line))
    return c


def lanes_and_write_fault(lupined, progs, shim, tmp):
    """1 GiB saved by 3 lanes, restored by 4; that daemon's save fails at
    a provider write in the middle (the 100th of 256 writes of 4 MiB): the
    drain reports the session lost and epoch 1 stays; restored again by 2
    lanes, the client reads back and checks every byte."""
    ckdir = os.path.join(tmp, 'ckpt5')
    port = free_port()
    log = os.path.join(tmp, 'lupined5.log')
    go = os.path.join(tmp, 'go5')
    d = Daemon(lupined, ckdir, port, log, {'LUPINE_CHECKPOINT_LANES': '3'})
    c = bigsession(progs, shim, port, 'lanes', go, 'lanes')
    try:
        check('lanes: the drain with 3 lanes exits 0', d.stop(timeout=120) == 0)
        text = d.text()
        check('lanes: epoch 1 was saved by 3 lanes', 'checkpoint epoch 1 (durable)' in text and '3 lane(s)' in text,
              text[-1500:])
        # hashed on the GPU by the save, checked on the CPU by the restores:
        # the kernel's hashes are lup_hash64's (on the H200 this compares
        # the real kernel with the CPU; on the sim, the twin)
        check('lanes: the save hashed on the GPU', 'GPU 0 is hashed on the GPU' in text, text[-1500:])
        d = Daemon(lupined, ckdir, port, log, {'LUPINE_CHECKPOINT_LANES': '4', 'LUPINE_CHECKPOINT_GPU_HASH': '0',
                                                'LUPINE_DIR_PROVIDER_FAIL': 'write:100:EIO'})
        deadline = time.time() + 60
        while 'lanes: restored checkpoint epoch 1' not in d.text() and time.time() < deadline:
            time.sleep(0.1)
        check('lanes: 4 lanes restore what 3 saved', 'lanes: restored checkpoint epoch 1' in d.text())
        rc = d.stop(timeout=120)
        text = d.text()
        # the session was not used since its restore, so the drain keeps
        # epoch 1 for it (disk_full covers a used session: LOST)
        check('lanes: a provider write failing mid-save fails the save loudly',
              rc == 0 and 'lanes: checkpoint failed: Input/output error' in text and 'writing mem/' in text
              and 'lanes was not checkpointed again: the checkpoint failed' in text, f'rc={rc} ' + text[-2000:])
        check('lanes: the failed save left no epoch 2 and no temp dir',
              sorted(os.listdir(os.path.join(ckdir, 'lanes'))) == ['0000000000000001'],
              repr(os.listdir(os.path.join(ckdir, 'lanes'))))
        d = Daemon(lupined, ckdir, port, log, {'LUPINE_CHECKPOINT_LANES': '2', 'LUPINE_CHECKPOINT_GPU_HASH': '0'})
        open(go, 'w').close()
        out, err = c.communicate(timeout=300)
        text = d.text()
        check('lanes: epoch 1 restores again, with 2 lanes', text.count('lanes: restored checkpoint epoch 1') >= 2,
              text[-1500:])
        check('lanes: every byte of the 1 GiB is back', c.returncode == 0 and 'verified 1 GiB' in out,
              out[-800:] + err[-1500:])
    finally:
        if c.poll() is None:
            c.kill()
            c.communicate()
        d.stop()


def flip_memory_byte(ckdir, session):
    """Flips one byte in the middle of a saved memory object; its path."""
    for root, _, files in sorted(os.walk(os.path.join(ckdir, session))):
        for f in sorted(files):
            p = os.path.join(root, f)
            if '/mem/' in p and os.path.getsize(p) > (3 << 20):
                with open(p, 'r+b') as fh:
                    fh.seek(3 << 20)
                    b = fh.read(1)
                    fh.seek(3 << 20)
                    fh.write(bytes([b[0] ^ 0x01]))
                return p
    return None


def memory_checksums(lupined, progs, shim, tmp):
    """Saved with CPU hashes, restored with the GPU's check: the two agree.
    Then one flipped bit in the memory of the checkpoint is refused by the
    GPU's check and by the CPU's, each with a clear message, and the
    daemon keeps serving."""
    ckdir = os.path.join(tmp, 'ckpt6')
    port = free_port()
    log = os.path.join(tmp, 'lupined6.log')
    go = os.path.join(tmp, 'go6')
    d = Daemon(lupined, ckdir, port, log, {'LUPINE_CHECKPOINT_GPU_HASH': '0'})
    c = bigsession(progs, shim, port, 'sums', go, 'checksums')
    try:
        check('checksums: the drain exits 0', d.stop(timeout=120) == 0)
        text = d.text()
        check('checksums: the save hashed on the CPU, as asked',
              'checkpoint epoch 1 (durable)' in text and 'hashed on the CPU (LUPINE_CHECKPOINT_GPU_HASH=0)' in text,
              text[-1500:])
        d = Daemon(lupined, ckdir, port, log)
        deadline = time.time() + 60
        while 'sums: restored checkpoint epoch 1' not in d.text() and time.time() < deadline:
            time.sleep(0.1)
        text = d.text()
        check('checksums: the GPU checks what the CPU hashed', 'sums: restored checkpoint epoch 1' in text
              and 'GPU 0 is hashed on the GPU' in text, text[-1500:])
        check('checksums: an unused restored session keeps its checkpoint', d.stop(timeout=120) == 0)
        bad = flip_memory_byte(ckdir, 'sums')
        check('checksums: found a memory object to damage', bad is not None)
        spare = os.path.join(tmp, 'ckpt6-copy')
        subprocess.run(['cp', '-a', ckdir, spare], check=True)
        for where, ck, env in (('GPU', ckdir, {}), ('CPU', spare, {'LUPINE_CHECKPOINT_GPU_HASH': '0'})):
            start = len(d.text())
            d = Daemon(lupined, ck, port, log, env)
            deadline = time.time() + 60
            while 'sums cannot be restored' not in d.text()[start:] and time.time() < deadline:
                time.sleep(0.1)
            text = d.text()[start:]
            check(f'checksums: a flipped bit is refused by the {where} check, with the address',
                  'sums cannot be restored' in text and 'does not match its checksum' in text, text[-1500:])
            s = W.connect(('127.0.0.1', port))
            s.close()
            check(f'checksums: the daemon serves on after the {where} refusal', d.proc.poll() is None)
            d.stop()
    finally:
        if c.poll() is None:
            c.kill()
            c.communicate()
        d.stop()


def direct_and_verify(lupined, progs, shim, tmp):
    """--checkpoint-verify reads a saved 1 GiB back through the provider and
    checks every piece against the hash taken on the GPU: once through the
    directory provider, once through the example provider with its memory
    reserved, where the GPU copies straight into the provider's memory
    (ABI version 3 direct writes) and no CPU copies the bytes."""
    example = os.path.join(progs, 'providers', 'liblupine-example-provider.so')
    cases = (('directory', os.path.join(tmp, 'ckpt7'), [], {}),
             ('direct', None, ['--checkpoint-provider', example, '--checkpoint-config', '1280,reserve'], {}),
             # the directory provider flips a bit in the first read back
             ('flipped', os.path.join(tmp, 'ckpt8'), [], {'LUPINE_DIR_PROVIDER_FAIL': 'flip:1'}))
    for name, ckdir, args, env in cases:
        port = free_port()
        log = os.path.join(tmp, 'lupined7.log')
        go = os.path.join(tmp, 'go7')
        d = Daemon(lupined, ckdir, port, log, env, args=args + ['--checkpoint-verify'])
        start = len(d.text())
        c = bigsession(progs, shim, port, name, go, f'verify ({name})')
        try:
            rc = d.stop(timeout=120)
            text = d.text()[start:]
            if name == 'flipped':
                check('verify: a bit flipped on the way back fails the checkpoint loudly, and the drain says so',
                      rc == 1 and 'flipped: checkpoint epoch 1 is corrupt: mem/' in text
                      and 'does not match its hash' in text and 'LOST' in text, f'rc={rc} ' + text[-1500:])
                continue
            check(f'verify ({name}): the drain exits 0', rc == 0, f'rc={rc} ' + text[-1500:])
            check(f'verify ({name}): the checkpoint read back matches the GPU\'s hashes piece by piece',
                  f'{name}: checkpoint epoch 1 verified: 1.00 GiB' in text and 'every piece matches' in text,
                  text[-1500:])
            if ckdir is None:
                check('verify (direct): the GPU copied straight into the provider\'s pinned region',
                      'region pinned for direct writes' in text and 'through example-memory' in text, text[-1500:])
        finally:
            if c.poll() is None:
                c.kill()
                c.communicate()
            d.stop()


def main():
    if len(sys.argv) < 5:
        print(__doc__)
        return 2
    lupined, progs, shim, kernels = sys.argv[1:5]
    restarts = int(sys.argv[5]) if len(sys.argv) > 5 else 10
    shim = os.path.abspath(shim)
    with tempfile.TemporaryDirectory(prefix='lupine-restart-') as tmp:
        try:
            restart_loop(lupined, progs, shim, kernels, tmp, restarts)
            events_across_restore(lupined, progs, shim, kernels, tmp)
            fault_cases(lupined, progs, shim, kernels, tmp)
            disk_full(lupined, progs, shim, kernels, tmp)
            lanes_and_write_fault(lupined, progs, shim, tmp)
            memory_checksums(lupined, progs, shim, tmp)
            direct_and_verify(lupined, progs, shim, tmp)
            test_vmm_restart.run(lupined, progs, shim, kernels, tmp, check)  # the client's VMM, three restarts
            # stream-ordered pools across a durable restart, an upgrade and a hot restart
            import test_pools_restart
            test_pools_restart.pools_across_restarts(lupined, progs, shim, kernels, tmp)
            FAILED.extend(test_pools_restart.FAILED)
        except Exception as e:  # a harness failure is a test failure, with the logs
            check('harness', False, repr(e))
        if FAILED:
            for f in ('lupined.log', 'lupined4.log', 'lupined2.log', 'lupined3.log', 'lupined5.log',
                      'lupined6.log', 'lupined7.log', 'vmm-durable.log', 'vmm-hot.log', 'vmm-upgrade.log'):
                p = os.path.join(tmp, f)
                if os.path.exists(p):
                    print(f'---- {f} (tail) ----')
                    with open(p) as fh:
                        print(fh.read()[-5000:])
    print(f'restart: {"FAILED: " + ", ".join(FAILED) if FAILED else "all passed"}')
    return 1 if FAILED else 0


if __name__ == '__main__':
    sys.exit(main())
