# SPDX-License-Identifier: MIT
"""Mapped (zero-copy) host memory through lupined on the simulator:

  e2e_mapped         zero-copy vector adds, memsets and copies on mapped
                     host pointers, a kernel spinning on a host-set flag, a
                     host polling a kernel-set flag, flags, attributes, bad
                     input (the program runs unchanged on the real driver);
  durable, hot, upgrade
                     e2e_mapped's hold mode keeps mapped memory with data
                     written by both sides while the daemon restarts
                     (SIGTERM and a new daemon; SIGTERM under a fake service
                     manager with the fd store; SIGHUP twice), then checks
                     the data at the same addresses and uses it.

usage: test_mapped.py LUPINED PROGS_DIR SHIM_DIR KERNELS_DIR"""
import os
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as W  # noqa: E402
from restart_harness import Hold, stop_daemon  # noqa: E402

check = W.Checks()


def plain(lupined, progs, shim, kernels, tmp, elsewhere=False):
    """elsewhere: the worker places every mirror away from the client's
    address, so every pointer to mapped memory is translated."""
    port = W.free_port()
    log = open(os.path.join(tmp, 'mapped-plain.log'), 'a')
    env = dict(os.environ)
    env.pop('LD_LIBRARY_PATH', None)
    what = ' (mirrors away from the client addresses)' if elsewhere else ''
    if elsewhere:
        env['LUPINE_TEST_MAPPED_ELSEWHERE'] = '1'
    d = subprocess.Popen([lupined, '--backend', 'sim', '--listen', f'127.0.0.1:{port}'],
                         stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        check('mapped: the daemon starts', W.wait_port(port, d))
        cenv = dict(os.environ)
        cenv['LUPINE_SERVER'] = f'127.0.0.1:{port}'
        cenv['LD_LIBRARY_PATH'] = shim
        try:
            r = subprocess.run([os.path.join(progs, 'e2e_mapped'), kernels], env=cenv, capture_output=True,
                               text=True, timeout=120)
            out, err, rc = r.stdout, r.stderr, r.returncode
        except subprocess.TimeoutExpired as e:
            out, err, rc = str(e.stdout), str(e.stderr), -1
        print(out, end='')
        print(''.join(line + '\n' for line in err.splitlines() if line.startswith('e2e_mapped: delay')), end='')
        check(f'mapped: zero-copy adds, memsets and copies, both spin flags, flags, attributes, bad input '
              f'(e2e_mapped){what}', rc == 0 and 'e2e_mapped: OK' in out, out[-2000:] + err[-3000:])
        if elsewhere:
            with open(log.name) as f:
                text = f.read()
            check('mapped: the worker said its mirrors are elsewhere, pointers translated',
                  'pointers to it are translated' in text, text[-2000:])
    finally:
        stop_daemon(d)
        log.close()


def _hold(progs, shim, kernels):
    return Hold(check, progs, kernels, shim, 'e2e_mapped', 'mapped', 'map',
                'mapped memory with data from host and GPU built',
                'mapped memory at the same addresses with both sides writes; kernels, memsets, copies and a spin '
                'flag work after', 'e2e_mapped hold: OK')


def _none_translated(what, tail):
    return lambda text: check(f'mapped ({what}): every mirror made again at the client\'s own address (none '
                              f'translated)', 'pointers to it are translated' not in text, text[-tail:])


def durable(lupined, progs, shim, kernels, tmp):
    _hold(progs, shim, kernels).durable(lupined, tmp, after=_none_translated('durable', 3000))


def hot(lupined, progs, shim, kernels, tmp):
    def drained(m, rc):
        check('mapped (hot): the drain exits 0', rc == 0, m.log()[-2000:])

    _hold(progs, shim, kernels).hot(lupined, tmp, drained, after=_none_translated('hot', 2000))


def upgrade(lupined, progs, shim, kernels, tmp):
    _hold(progs, shim, kernels).upgrade(lupined, tmp, after=_none_translated('upgrade', 2000))


def bad_input(lupined, tmp):
    """A client without the shim sends what the shim never would: the worker
    answers CUDA's errors, or closes a malformed connection, and goes on."""
    create, destroy, memgetinfo, retain = 620, 621, 256, 283
    push, pull = 36, 37
    ctx = 0x10000  # device 0's primary context
    port = W.free_port()
    logp = os.path.join(tmp, 'mapped-bad.log')
    log = open(logp, 'a')
    env = dict(os.environ)
    env.pop('LD_LIBRARY_PATH', None)
    d = subprocess.Popen([lupined, '--backend', 'sim', '--listen', f'127.0.0.1:{port}'],
                         stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        check('mapped bad input: the daemon starts', W.wait_port(port, d))
        s, _, base = W.handshake(('127.0.0.1', port), 'mapped-bad')
        seq = [0]

        def call(op, payload, sync=True):
            seq[0] += 1
            s.sendall(W.frame(op, payload, flags=W.F_SYNC if sync else 0, seq=seq[0], ctx=ctx))
            if not sync:
                return None
            return W.read_frame(s)

        mk = lambda va, size, flags=0: struct.pack('<QQI', va, size, flags)
        va = 0x7e0000000000
        st = lambda r: r[0]['status']
        check('mapped bad input: the primary context is retained', st(call(retain, struct.pack('<i', 0))) == 0)
        check('mapped bad input: a mirror at address 0 -> INVALID_VALUE', st(call(create, mk(0, 4096))) == 1)
        check('mapped bad input: a mirror of size 0 -> INVALID_VALUE', st(call(create, mk(va, 0))) == 1)
        check('mapped bad input: a mirror in the arena -> INVALID_VALUE', st(call(create, mk(base, 4096))) == 1)
        check('mapped bad input: a mirror past user space -> INVALID_VALUE',
              st(call(create, mk(1 << 47, 4096))) == 1)
        check('mapped bad input: a mirror over the session limit -> OUT_OF_MEMORY',
              st(call(create, mk(va, 1 << 40))) == 2)
        check('mapped bad input: a good mirror', st(call(create, mk(va, 8192))) == 0)
        check('mapped bad input: one overlapping it -> HOST_MEMORY_ALREADY_REGISTERED',
              st(call(create, mk(va + 4096, 8192))) == 712)
        h, p = call(pull, struct.pack('<QQ', va + 16, 0))
        check('mapped bad input: a pull of an address inside, not a mirror\'s start -> INVALID_VALUE',
              h['status'] == 1, str(h))
        h, p = call(pull, struct.pack('<QQ', va, 9000))
        check('mapped bad input: a pull from past the end -> INVALID_VALUE', h['status'] == 1, str(h))
        call(push, struct.pack('<QQI', va + 8, 0, 3) + b'abc', sync=False)
        check('mapped bad input: a pull leaves a latched error for the program\'s next call',
              st(call(pull, struct.pack('<QQ', va, 0))) == 0)
        check('mapped bad input: a push to no mirror is latched: INVALID_VALUE at the next call',
              st(call(memgetinfo, b'')) == 1)
        call(push, struct.pack('<QQI', va, 100, 3) + b'abc', sync=False)
        h, p = call(pull, struct.pack('<QQ', va, 0))
        check('mapped bad input: a good push, then a pull: nothing changed on the GPU side, the whole range',
              h['status'] == 0 and p == struct.pack('<Q', 8192), f'{h} {p!r}')
        call(destroy, struct.pack('<Q', va + 4096), sync=False)
        check('mapped bad input: destroying no mirror is latched: INVALID_VALUE',
              st(call(memgetinfo, b'')) == 1)
        call(destroy, struct.pack('<Q', va), sync=False)
        check('mapped bad input: the session goes on', st(call(memgetinfo, b'')) == 0 and d.poll() is None)
        s.close()
        bad = (('a span past the mirror', struct.pack('<QQI', va, 8190, 3) + b'abc', 0, 'malformed MAPPED_PUSH'),
               ('a span longer than the frame', struct.pack('<QQI', va, 0, 300) + b'abc', 0, 'malformed MAPPED_PUSH'),
               ('an empty span', struct.pack('<QQI', va, 0, 0), 0, 'malformed MAPPED_PUSH'),
               ('a synchronous push', struct.pack('<Q', va), W.F_SYNC, 'MAPPED_PUSH must be asynchronous'),
               ('a truncated pull', b'\x01\x02', W.F_SYNC, 'malformed MAPPED_PULL'))
        for i, (what, payload, flags, why) in enumerate(bad):
            s, _, _ = W.handshake(('127.0.0.1', port), f'mapped-bad{i}')
            s.sendall(W.frame(retain, struct.pack('<i', 0), flags=W.F_SYNC, seq=1))
            ok = W.read_frame(s)[0]['status'] == 0
            s.sendall(W.frame(create, mk(va, 8192), flags=W.F_SYNC, seq=2, ctx=ctx))
            ok = ok and W.read_frame(s)[0]['status'] == 0
            s.sendall(W.frame(push if 'push' in why.lower() else pull, payload, flags=flags, seq=3, ctx=ctx))
            closed = W.wait_closed(s)
            s.close()
            time.sleep(0.2)
            with open(logp) as f:
                text = f.read()
            check(f'mapped bad input: {what} closes the connection with "{why}" logged',
                  ok and closed and why in text and d.poll() is None, text[-1500:])
    finally:
        stop_daemon(d)
        log.close()


def main():
    if len(sys.argv) < 5:
        print(__doc__)
        return 2
    lupined, progs, shim, kernels = sys.argv[1:5]
    shim = os.path.abspath(shim)
    with tempfile.TemporaryDirectory(prefix='lupine-mapped-') as tmp:
        try:
            plain(lupined, progs, shim, kernels, tmp)
            plain(lupined, progs, shim, kernels, tmp, elsewhere=True)
            bad_input(lupined, tmp)
            durable(lupined, progs, shim, kernels, tmp)
            hot(lupined, progs, shim, kernels, tmp)
            upgrade(lupined, progs, shim, kernels, tmp)
        except Exception as e:  # a harness failure is a test failure, with the logs
            check('harness', False, repr(e))
        if check.failed:
            for f in ('mapped-plain.log', 'mapped-bad.log', 'mapped-durable.log', 'mapped-hot.log', 'mapped-upgrade.log'):
                p = os.path.join(tmp, f)
                if os.path.exists(p):
                    print(f'---- {f} (tail) ----')
                    with open(p) as fh:
                        print(fh.read()[-5000:])
    print(f'mapped: {"FAILED: " + ", ".join(check.failed) if check.failed else "all passed"}')
    return 1 if check.failed else 0


if __name__ == '__main__':
    sys.exit(main())
