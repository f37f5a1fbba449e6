# SPDX-License-Identifier: MIT
"""CUDA arrays, mipmapped arrays, texture and surface objects through
lupined on the simulator:

  e2e_arrays         every array shape and copy form with the data checked,
                     descriptors, mipmapped levels, texture and surface
                     objects, bad input (the program runs unchanged on the
                     real driver);
  bad input          a client without the shim sends what the shim never
                     would: the worker answers the driver's errors and goes
                     on;
  refused            a restore where the driver gives the objects other
                     values fails loudly; the client does not go on;
  durable, hot, upgrade
                     e2e_arrays's hold mode keeps arrays with data, a
                     mipmapped array and texture and surface objects alive
                     while the daemon restarts, then checks the contents,
                     that the objects' values are the driver's objects again,
                     and uses them.

  cudart             (with CUDART_LIB_DIR RT_ARRAYS) tests/rt/rt_arrays.cu, the
                     CUDA runtime's arrays, copies and objects, without
                     kernels, and no call lupine does not support.

usage: test_arrays.py LUPINED PROGS_DIR SHIM_DIR KERNELS_DIR [CUDART_LIB_DIR RT_ARRAYS]"""
import os
import re
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as W  # noqa: E402
from restart_harness import Hold, stop_daemon  # noqa: E402

check = W.Checks()


def plain(lupined, progs, shim, kernels, tmp):
    port = W.free_port()
    log = open(os.path.join(tmp, 'arrays-plain.log'), 'a')
    env = dict(os.environ)
    env.pop('LD_LIBRARY_PATH', None)
    d = subprocess.Popen([lupined, '--backend', 'sim', '--listen', f'127.0.0.1:{port}'],
                         stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        check('arrays: the daemon starts', W.wait_port(port, d))
        cenv = dict(os.environ)
        cenv['LUPINE_SERVER'] = f'127.0.0.1:{port}'
        cenv['LD_LIBRARY_PATH'] = shim
        try:
            r = subprocess.run([os.path.join(progs, 'e2e_arrays'), kernels], env=cenv, capture_output=True,
                               text=True, timeout=120)
            out, err, rc = r.stdout, r.stderr, r.returncode
        except subprocess.TimeoutExpired as e:
            out, err, rc = str(e.stdout), str(e.stderr), -1
        print(out, end='')
        check('arrays: 1D/2D/3D/layered/cubemap arrays, every copy form, descriptors, mipmapped levels, texture '
              'and surface objects, bad input (e2e_arrays)', rc == 0 and 'e2e_arrays: OK' in out,
              out[-2000:] + err[-3000:])
    finally:
        stop_daemon(d)
        log.close()


def bad_input(lupined, tmp):
    """Ops 640-649 with what the shim never sends."""
    create, destroy, level, copy, memgetinfo, retain = 640, 641, 642, 643, 256, 283
    tex = 646
    ctx = 0x10000  # device 0's primary context
    first = 0x1000000
    port = W.free_port()
    logp = os.path.join(tmp, 'arrays-bad.log')
    log = open(logp, 'a')
    env = dict(os.environ)
    env.pop('LD_LIBRARY_PATH', None)
    d = subprocess.Popen([lupined, '--backend', 'sim', '--listen', f'127.0.0.1:{port}'],
                         stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        check('arrays bad input: the daemon starts', W.wait_port(port, d))
        s, _, base = W.handshake(('127.0.0.1', port), 'arrays-bad')
        seq = [0]

        def call(op, payload, sync=True):
            seq[0] += 1
            s.sendall(W.frame(op, payload, flags=W.F_SYNC if sync else 0, seq=seq[0], ctx=ctx))
            return W.read_frame(s) if sync else None

        mk = lambda i, w, h=0, dp=0, fmt=0x20, ch=1, flags=0, levels=0: struct.pack(
            '<QQQQIIII', i, w, h, dp, fmt, ch, flags, levels)
        st = lambda r: r[0]['status']
        check('arrays bad input: the primary context is retained', st(call(retain, struct.pack('<i', 0))) == 0)
        check('arrays bad input: width 0 -> INVALID_VALUE', st(call(create, mk(first, 0))) == 1)
        check('arrays bad input: an absurd width -> INVALID_VALUE', st(call(create, mk(first, 1 << 40, 4))) == 1)
        check('arrays bad input: an unknown format -> INVALID_VALUE', st(call(create, mk(first, 8, fmt=0x77))) == 1)
        check('arrays bad input: 3 channels -> INVALID_VALUE', st(call(create, mk(first, 8, ch=3))) == 1)
        check('arrays bad input: unknown flags -> INVALID_VALUE', st(call(create, mk(first, 8, flags=0x100))) == 1)
        check('arrays bad input: a sparse array -> NOT_SUPPORTED', st(call(create, mk(first, 8, flags=0x40))) == 801)
        check('arrays bad input: a malformed id -> INVALID_VALUE', st(call(create, mk(first + 3, 8))) == 1)
        check('arrays bad input: a good 16x16 float array', st(call(create, mk(first, 16, 16))) == 0)
        check('arrays bad input: its id again -> INVALID_VALUE', st(call(create, mk(first, 16, 16))) == 1)
        check('arrays bad input: a level of an array that is not mipmapped -> INVALID_HANDLE',
              st(call(level, struct.pack('<QQI', first + 16, first, 0))) == 400)
        check('arrays bad input: a mipmapped array with too many levels -> INVALID_VALUE',
              st(call(create, mk(first + 32, 16, 16, levels=6))) == 1)

        def box(src, dst, w, h, dp):
            return b''.join(struct.pack('<IIQQQQQQ', *e) for e in (src, dst)) + struct.pack('<QQQ', w, h, dp)

        arr = lambda i, x=0, y=0, z=0: (2, 0, i, x, y, z, 0, 0)
        dev = lambda p, pitch=0, height=0: (1, 0, p, 0, 0, 0, pitch, height)
        hdr, p = call(257, struct.pack('<Q', 4096))  # cuMemAlloc
        check('arrays bad input: device memory', hdr['status'] == 0, str(hdr))
        dptr = struct.unpack('<Q', p[:8])[0] if hdr['status'] == 0 else base
        call(copy, box(dev(dptr, 64), arr(first), 64, 16, 1) + struct.pack('<Q', 0), sync=False)
        check('arrays bad input: a good device -> array copy', st(call(memgetinfo, b'')) == 0)
        call(copy, box(arr(first, y=1), dev(dptr, 64), 64, 16, 1) + struct.pack('<Q', 0), sync=False)
        check('arrays bad input: a copy past the array\'s rows is latched: INVALID_VALUE',
              st(call(memgetinfo, b'')) == 1)
        call(copy, box(arr(first), dev(dptr, 64), 64, 16 * 5, 1) + struct.pack('<Q', 0), sync=False)
        check('arrays bad input: a copy past the device allocation is latched: INVALID_VALUE',
              st(call(memgetinfo, b'')) == 1)
        call(copy, box(arr(first + 48), dev(dptr), 64, 1, 1) + struct.pack('<Q', 0), sync=False)
        check('arrays bad input: a copy from no array is latched: INVALID_HANDLE', st(call(memgetinfo, b'')) == 400)
        call(copy, box(dev(dptr), dev(dptr + 64), 64, 1, 1) + struct.pack('<Q', 0), sync=False)
        check('arrays bad input: a device -> device lupArrayCopy is latched: INVALID_VALUE',
              st(call(memgetinfo, b'')) == 1)
        res = struct.pack('<II', 0, 0) + struct.pack('<Q', first + 48) + bytes(144 - 16)
        check('arrays bad input: a texture on no array -> INVALID_HANDLE',
              st(call(tex, res + bytes(104) + bytes(112) + struct.pack('<I', 0))) == 400)
        res = struct.pack('<II', 2, 0) + struct.pack('<QIIQ', base + (1 << 30), 0x20, 1, 4096) + bytes(144 - 32)
        check('arrays bad input: a linear texture outside the session\'s memory -> INVALID_VALUE',
              st(call(tex, res + bytes(104) + bytes(112) + struct.pack('<I', 0))) == 1)
        check('arrays bad input: destroying it', st(call(destroy, struct.pack('<Q', first))) == 0)
        check('arrays bad input: destroying it again -> INVALID_HANDLE',
              st(call(destroy, struct.pack('<Q', first))) == 400)
        check('arrays bad input: the session goes on', st(call(memgetinfo, b'')) == 0 and d.poll() is None)
        s.close()
        s, _, _ = W.handshake(('127.0.0.1', port), 'arrays-bad2')
        s.sendall(W.frame(retain, struct.pack('<i', 0), flags=W.F_SYNC, seq=1))
        ok = W.read_frame(s)[0]['status'] == 0
        s.sendall(W.frame(copy, b'\x01' * 20, flags=0, seq=2, ctx=ctx))
        closed = W.wait_closed(s)
        s.close()
        check('arrays bad input: a truncated copy closes the connection, the daemon goes on',
              ok and closed and d.poll() is None)
    finally:
        stop_daemon(d)
        log.close()


def _hold(progs, shim, kernels):
    return Hold(check, progs, kernels, shim, 'e2e_arrays', 'arrays', 'arr',
                'arrays with data, a mipmapped array, texture and surface objects built',
                'the arrays\' contents, the same level handle, the objects under the same values (each destroyed '
                'works), new copies and objects after', 'e2e_arrays hold: OK')


def _arrays_saved(what, tail):
    return lambda text: check(f'arrays ({what}): no restore refused a texture value',
                              re.search(r'came back as', text) is None, text[-tail:])


def durable(lupined, progs, shim, kernels, tmp):
    _hold(progs, shim, kernels).durable(lupined, tmp, after=_arrays_saved('durable', 3000))


def hot(lupined, progs, shim, kernels, tmp):
    def drained(m, rc):
        check('arrays (hot): the drain exits 0', rc == 0, m.log()[-2000:])

    _hold(progs, shim, kernels).hot(lupined, tmp, drained, after=_arrays_saved('hot', 2000))


def upgrade(lupined, progs, shim, kernels, tmp):
    _hold(progs, shim, kernels).upgrade(lupined, tmp, after=_arrays_saved('upgrade', 2000))


def refused(lupined, progs, shim, kernels, tmp):
    """A durable restore where the driver gives every texture object a value
    above the old one (LUPINE_SIM_TEXOBJ_FIRST): the restore of that session
    fails loudly, and its client gets errors, never a wrong texture."""
    from restart_harness import daemon_argv, daemon_env, read_text, start_client
    import signal
    port = W.free_port()
    logp = os.path.join(tmp, 'arrays-refused.log')
    log = open(logp, 'a')
    argv = daemon_argv(lupined, port, os.path.join(tmp, 'arrays-refused'), 'durable')
    d = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=daemon_env())
    c = None
    try:
        check('arrays (refused): the daemon starts', W.wait_port(port, d))
        c = start_client([os.path.join(progs, 'e2e_arrays'), kernels, 'hold'], shim, port, 'arrref', '20')
        h = _hold(progs, shim, kernels)
        if h.ready(c, 'refused'):
            d.send_signal(signal.SIGTERM)
            check('arrays (refused): the drain exits 0', d.wait(timeout=60) == 0)
            env = daemon_env()
            env['LUPINE_SIM_TEXOBJ_FIRST'] = '4096'
            d = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
            check('arrays (refused): the new daemon starts', W.wait_port(port, d))
            try:
                c.stdin.write('go\n')
                c.stdin.flush()
                out, err = c.communicate(timeout=120)
            except (subprocess.TimeoutExpired, BrokenPipeError):
                c.kill()
                out, err = c.communicate()
            check('arrays (refused): the client does not go on as if nothing happened',
                  c.returncode != 0 and 'e2e_arrays hold: OK' not in out, out[-1000:] + err[-2000:])
        text = read_text(logp)
        check('arrays (refused): the restore says which object came back under another value',
              re.search(r'texture object 0x[0-9a-f]+ came back as 0x[0-9a-f]+', text) is not None and
              re.search(r'session arrref cannot be restored', text) is not None, text[-3000:])
    finally:
        if c is not None and c.poll() is None:
            c.kill()
            c.communicate()
        stop_daemon(d)
        log.close()


def cudart(lupined, shim, cudart_dir, prog, tmp):
    port = W.free_port()
    log = open(os.path.join(tmp, 'arrays-cudart.log'), 'a')
    env = dict(os.environ)
    env.pop('LD_LIBRARY_PATH', None)
    d = subprocess.Popen([lupined, '--backend', 'sim', '--listen', f'127.0.0.1:{port}'],
                         stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        check('arrays (cudart): the daemon starts', W.wait_port(port, d))
        cenv = dict(os.environ)
        cenv['LUPINE_SERVER'] = f'127.0.0.1:{port}'
        cenv['LD_LIBRARY_PATH'] = shim + ':' + cudart_dir
        try:
            r = subprocess.run([prog], env=cenv, capture_output=True, text=True, timeout=120)
            out, err, rc = r.stdout, r.stderr, r.returncode
        except subprocess.TimeoutExpired as e:
            out, err, rc = str(e.stdout), str(e.stderr), -1
        check('arrays (cudart): the runtime\'s arrays, 2D/3D/array copies, mipmapped levels, texture and surface '
              'objects (rt_arrays)', rc == 0 and 'rt_arrays: OK' in out, out[-2000:] + err[-2000:])
        check('arrays (cudart): no driver call lupine does not support', 'not supported by lupine' not in err,
              err[-2000:])
    finally:
        stop_daemon(d)
        log.close()


def main():
    if len(sys.argv) < 5:
        print(__doc__)
        return 2
    lupined, progs, shim, kernels = sys.argv[1:5]
    rt = sys.argv[5:7] if len(sys.argv) >= 7 else None
    shim = os.path.abspath(shim)
    only = os.environ.get('ARRAYS_ONLY', '')
    with tempfile.TemporaryDirectory(prefix='lupine-arrays-') as tmp:
        try:
            for name, fn in (('plain', lambda: plain(lupined, progs, shim, kernels, tmp)),
                             ('bad', lambda: bad_input(lupined, tmp)),
                             ('durable', lambda: durable(lupined, progs, shim, kernels, tmp)),
                             ('hot', lambda: hot(lupined, progs, shim, kernels, tmp)),
                             ('upgrade', lambda: upgrade(lupined, progs, shim, kernels, tmp)),
                             ('refused', lambda: refused(lupined, progs, shim, kernels, tmp)),
                             ('cudart', lambda: rt and cudart(lupined, shim, rt[0], rt[1], tmp))):
                if (not only and name != 'cudart') or name in only.split(','):
                    fn()
        except Exception as e:  # a harness failure is a test failure, with the logs
            check('harness', False, repr(e))
        if check.failed:
            for f in ('arrays-plain.log', 'arrays-bad.log', 'arrays-durable.log', 'arrays-hot.log',
                      'arrays-upgrade.log', 'arrays-refused.log', 'arrays-cudart.log'):
                p = os.path.join(tmp, f)
                if os.path.exists(p):
                    print(f'---- {f} (tail) ----')
                    with open(p) as fh:
                        print(fh.read()[-5000:])
    print(f'arrays: {"FAILED: " + ", ".join(check.failed) if check.failed else "all passed"}')
    return 1 if check.failed else 0


if __name__ == '__main__':
    sys.exit(main())
