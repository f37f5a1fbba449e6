# SPDX-License-Identifier: MIT
"""Managed memory through lupined on the simulator:

  e2e_managed        (on the simulator itself, then through lupined: the
                     outputs must be equal) a managed vector add with host access between kernels,
                     copies with managed ends, stream attachment, pointer
                     and range attributes, advice and prefetches, the device
                     attributes of the contract, bad input (the program runs
                     unchanged on the real driver); once more with every
                     mirror placed away from the client's address
                     (translated pointers);
  durable, hot, upgrade
                     e2e_managed's hold mode keeps managed memory with data
                     from both sides, and host writes no call has carried
                     yet, while the daemon restarts (SIGTERM and a new
                     daemon; SIGTERM under a fake service manager with the
                     fd store; SIGHUP twice), then checks the data at the
                     same addresses and uses it;
  wire_gaps          a raw client: the worker's pulls of a managed range
                     merge short unchanged gaps, a mapped range's do not.

usage: test_managed.py LUPINED PROGS_DIR SHIM_DIR KERNELS_DIR"""
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as W  # noqa: E402
from restart_harness import Hold, stop_daemon  # noqa: E402

check = W.Checks()


def local(progs, kernels):
    """e2e_managed on the simulator itself (what a local driver prints):
    lupine's output must be the same."""
    env = dict(os.environ)
    env.pop('LD_LIBRARY_PATH', None)
    r = subprocess.run([os.path.join(progs, 'e2e_managed_sim'), kernels], env=env, capture_output=True, text=True,
                       timeout=120)
    check('managed: e2e_managed on the simulator itself', r.returncode == 0 and 'e2e_managed: OK' in r.stdout,
          r.stdout[-2000:] + r.stderr[-2000:])
    return r.stdout


def plain(lupined, progs, shim, kernels, tmp, elsewhere=False, want=None):
    port = W.free_port()
    log = open(os.path.join(tmp, 'managed-plain.log'), 'a')
    env = dict(os.environ)
    env.pop('LD_LIBRARY_PATH', None)
    what = ' (mirrors away from the client addresses)' if elsewhere else ''
    if elsewhere:
        env['LUPINE_TEST_MAPPED_ELSEWHERE'] = '1'
    d = subprocess.Popen([lupined, '--backend', 'sim', '--listen', f'127.0.0.1:{port}'],
                         stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        check('managed: the daemon starts', W.wait_port(port, d))
        cenv = dict(os.environ)
        cenv['LUPINE_SERVER'] = f'127.0.0.1:{port}'
        cenv['LD_LIBRARY_PATH'] = shim
        try:
            r = subprocess.run([os.path.join(progs, 'e2e_managed'), kernels], env=cenv, capture_output=True,
                               text=True, timeout=120)
            out, err, rc = r.stdout, r.stderr, r.returncode
        except subprocess.TimeoutExpired as e:
            out, err, rc = str(e.stdout), str(e.stderr), -1
        print(out, end='')
        check(f'managed: vector add with host access between kernels, copies, attachment, attributes, advice, '
              f'prefetch, bad input (e2e_managed){what}', rc == 0 and 'e2e_managed: OK' in out,
              out[-2000:] + err[-3000:])
        if want is not None:
            check(f'managed: the same output as on the simulator itself{what}', out == want,
                  f'local:\n{want}\nlupine:\n{out}')
        check(f'managed: the device reports no concurrent managed access{what}',
              'concurrent managed access 0, pageable 0, direct from host 0' in err, err[-2000:])
        if elsewhere:
            with open(log.name) as f:
                text = f.read()
            check('managed: the worker said its mirrors are elsewhere, pointers translated',
                  'pointers to it are translated' in text, text[-2000:])
    finally:
        stop_daemon(d)
        log.close()


def wire_gaps(lupined, tmp):
    """A client without the shim: the worker's pulls of a managed range
    (LUP_HOSTMAP_MANAGED) send a run of changed bytes across short unchanged
    gaps, in replies of at most 1 MiB that carry on where the last stopped;
    a mapped range (no flag) gets one span per changed byte."""
    create, memset32, sync, retain, pull = 620, 262, 280, 283, 37
    ctx = 0x10000  # device 0's primary context
    managed_flag = 1 << 31
    port = W.free_port()
    log = open(os.path.join(tmp, 'managed-wire.log'), 'a')
    env = dict(os.environ)
    env.pop('LD_LIBRARY_PATH', None)
    d = subprocess.Popen([lupined, '--backend', 'sim', '--listen', f'127.0.0.1:{port}'],
                         stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        check('managed wire: the daemon starts', W.wait_port(port, d))
        s, _, _ = W.handshake(('127.0.0.1', port), 'managed-wire')
        seq = [0]

        def call(op, payload, is_sync=True):
            seq[0] += 1
            s.sendall(W.frame(op, payload, flags=W.F_SYNC if is_sync else 0, seq=seq[0], ctx=ctx))
            return W.read_frame(s) if is_sync else None

        def pull_all(va, size):
            """every span of the GPU's changes: (spans, bytes rebuilt, replies)"""
            buf, spans, at, replies = bytearray(size), 0, 0, 0
            while at < size and replies < 64:
                h, p = call(pull, struct.pack('<QQ', va, at))
                replies += 1
                if h['status'] != 0 or len(p) < 8:
                    return -1, b'', replies
                nxt, off = struct.unpack_from('<Q', p)[0], 8
                while off < len(p):
                    o, n = struct.unpack_from('<QI', p, off)
                    buf[o:o + n] = p[off + 12:off + 12 + n]
                    spans, off = spans + 1, off + 12 + n
                at = nxt
            return spans, bytes(buf), replies

        st = lambda r: r[0]['status']
        va, size = 0x7e0000000000, (3 << 20) + 100
        va2, size2 = va + (64 << 20), 1 << 16
        ok = st(call(retain, struct.pack('<i', 0))) == 0
        ok = ok and st(call(create, struct.pack('<QQI', va, size, managed_flag))) == 0
        ok = ok and st(call(create, struct.pack('<QQI', va2, size2, 0))) == 0
        check('managed wire: a managed mirror and a mapped one', ok)
        # one byte in four changes: gaps of three unchanged bytes
        call(memset32, struct.pack('<QIQ', va, 1, size // 4), is_sync=False)
        call(memset32, struct.pack('<QIQ', va2, 1, size2 // 4), is_sync=False)
        check('managed wire: the memsets ran', st(call(sync, b'')) == 0)
        want = (b'\x01\x00\x00\x00' * (size // 4)).ljust(size, b'\x00')
        spans, got, replies = pull_all(va, size)
        check(f'managed wire: a managed range comes back in a few long spans ({spans} spans, {replies} replies)',
              got == want and 0 < spans <= 4 and replies == 4, f'{spans} spans, {replies} replies')
        spans, got, _ = pull_all(va, size)
        check('managed wire: pulled once only', spans == 0 and got == bytes(size), f'{spans} spans')
        spans, got, _ = pull_all(va2, size2)
        check(f'managed wire: a mapped range gets one span per changed byte ({spans})',
              got == b'\x01\x00\x00\x00' * (size2 // 4) and spans == size2 // 4, f'{spans} spans')
        s.close()
        check('managed wire: the daemon goes on', d.poll() is None)
    finally:
        stop_daemon(d)
        log.close()


def _hold(progs, shim, kernels):
    return Hold(check, progs, kernels, shim, 'e2e_managed', 'managed', 'mng',
                'managed memory with data from host and GPU built',
                'managed memory at the same addresses with both sides\' writes and the late host writes; kernels, '
                'copies, attributes and advice work after', 'e2e_managed hold: OK')


def _none_translated(what, tail):
    return lambda text: check(f'managed ({what}): every mirror made again at the client\'s own address (none '
                              f'translated)', 'pointers to it are translated' not in text, text[-tail:])


def durable(lupined, progs, shim, kernels, tmp):
    _hold(progs, shim, kernels).durable(lupined, tmp, after=_none_translated('durable', 3000))


def hot(lupined, progs, shim, kernels, tmp):
    def drained(m, rc):
        check('managed (hot): the drain exits 0', rc == 0, m.log()[-2000:])

    _hold(progs, shim, kernels).hot(lupined, tmp, drained, after=_none_translated('hot', 2000))


def upgrade(lupined, progs, shim, kernels, tmp):
    _hold(progs, shim, kernels).upgrade(lupined, tmp, after=_none_translated('upgrade', 2000))


def main():
    if len(sys.argv) < 5:
        print(__doc__)
        return 2
    lupined, progs, shim, kernels = sys.argv[1:5]
    shim = os.path.abspath(shim)
    with tempfile.TemporaryDirectory(prefix='lupine-managed-') as tmp:
        try:
            want = local(progs, kernels)
            plain(lupined, progs, shim, kernels, tmp, want=want)
            plain(lupined, progs, shim, kernels, tmp, elsewhere=True, want=want)
            wire_gaps(lupined, tmp)
            durable(lupined, progs, shim, kernels, tmp)
            hot(lupined, progs, shim, kernels, tmp)
            upgrade(lupined, progs, shim, kernels, tmp)
        except Exception as e:  # a harness failure is a test failure, with the logs
            check('harness', False, repr(e))
        if check.failed:
            for f in ('managed-plain.log', 'managed-wire.log', 'managed-durable.log', 'managed-hot.log', 'managed-upgrade.log'):
                p = os.path.join(tmp, f)
                if os.path.exists(p):
                    print(f'---- {f} (tail) ----')
                    with open(p) as fh:
                        print(fh.read()[-5000:])
    print(f'managed: {"FAILED: " + ", ".join(check.failed) if check.failed else "all passed"}')
    return 1 if check.failed else 0


if __name__ == '__main__':
    sys.exit(main())
