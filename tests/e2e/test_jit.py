# SPDX-License-Identifier: MIT
"""JIT linking and JIT options through lupined on the simulator:

  e2e_jit            two PTX inputs linked (from memory and from a file),
                     the cubin loaded and run, logs, wall time, options,
                     bad input, cuModuleLoadDataEx and cuLibraryLoadData
                     with options (the program runs unchanged on the real
                     driver);
  bad input          a client without the shim sends the JIT ops what the
                     shim never would: the worker answers CUDA errors and
                     goes on;
  durable, hot, upgrade
                     e2e_jit's hold mode keeps a linked module whose
                     variable it changed, a module and a library loaded
                     with JIT options and a link state with one of its two inputs added
                     while the daemon restarts (SIGTERM and a new daemon;
                     SIGTERM under a fake service manager with the fd
                     store; SIGHUP twice), then runs the kernels, checks
                     their data, and completes the half-done link.

usage: test_jit.py LUPINED PROGS_DIR SHIM_DIR KERNELS_DIR"""
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as W  # noqa: E402
from restart_harness import Hold, stop_daemon  # noqa: E402

check = W.Checks()

OP_BLOB, RETAIN, MEMGETINFO = 20, 283, 256
JIT_ADD, JIT_COMPLETE, JIT_READ, JIT_DROP, MODULE_LOAD_JIT = 630, 631, 632, 633, 634
JIT_MAGIC = 0x3154494a
CTX = 0x10000  # device 0's primary context
INVALID_VALUE, INVALID_IMAGE, NOT_FOUND = 1, 200, 500


def plain(lupined, progs, shim, kernels, tmp):
    port = W.free_port()
    log = open(os.path.join(tmp, 'jit-plain.log'), 'a')
    env = dict(os.environ)
    env.pop('LD_LIBRARY_PATH', None)
    d = subprocess.Popen([lupined, '--backend', 'sim', '--listen', f'127.0.0.1:{port}'],
                         stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        check('jit: the daemon starts', W.wait_port(port, d))
        cenv = dict(os.environ)
        cenv['LUPINE_SERVER'] = f'127.0.0.1:{port}'
        cenv['LD_LIBRARY_PATH'] = shim
        try:
            r = subprocess.run([os.path.join(progs, 'e2e_jit'), kernels], env=cenv, capture_output=True,
                               text=True, timeout=120)
            out, err, rc = r.stdout, r.stderr, r.returncode
        except subprocess.TimeoutExpired as e:
            out, err, rc = str(e.stdout), str(e.stderr), -1
        print(out, end='')
        check('jit: two PTX inputs linked and run, logs, options, bad input, loads with JIT options (e2e_jit)',
              rc == 0 and 'e2e_jit: OK' in out, out[-2000:] + err[-3000:])
    finally:
        stop_daemon(d)
        log.close()


def request(opts=(), inputs=(), first=0):
    """A JIT request (common/jit_codec.h): opts (option, value), inputs
    (type, opts, name, data)."""
    def put_opts(o):
        return struct.pack('<I', len(o)) + b''.join(struct.pack('<IQ', k, v) for k, v in o)
    b = struct.pack('<I', JIT_MAGIC) + put_opts(opts) + struct.pack('<II', first, len(inputs))
    for t, o, name, data in inputs:
        b += struct.pack('<I', t) + put_opts(o) + struct.pack('<H', len(name)) + name
        b += struct.pack('<Q', len(data)) + data
    return b


def bad_input(lupined, kernels, tmp):
    """The worker checks every JIT request itself."""
    port = W.free_port()
    logp = os.path.join(tmp, 'jit-bad.log')
    log = open(logp, 'a')
    env = dict(os.environ)
    env.pop('LD_LIBRARY_PATH', None)
    d = subprocess.Popen([lupined, '--backend', 'sim', '--listen', f'127.0.0.1:{port}'],
                         stdout=log, stderr=subprocess.STDOUT, env=env)
    with open(os.path.join(kernels, 'jit_b.ptx'), 'rb') as f:
        jit_b = f.read() + b'\0'
    try:
        check('jit bad input: the daemon starts', W.wait_port(port, d))
        s, _, _ = W.handshake(('127.0.0.1', port), 'jit-bad')
        seq = [0]
        ids = [0x1000000]

        def mint():
            ids[0] += 16
            return ids[0]

        def call(op, payload, sync=True):
            seq[0] += 1
            s.sendall(W.frame(op, payload, flags=W.F_SYNC if sync else 0, seq=seq[0], ctx=CTX))
            return W.read_frame(s) if sync else None

        def blob(data):
            b = mint()
            call(OP_BLOB, struct.pack('<QQQ', b, len(data), 0) + data, sync=False)
            return b

        st = lambda r: r[0]['status']
        add = lambda link, data: st(call(JIT_ADD, struct.pack('<QQ', link, blob(data))))
        check('jit bad input: the primary context is retained', st(call(RETAIN, struct.pack('<i', 0))) == 0)
        link = mint()
        check('jit bad input: a request with a bad magic -> INVALID_VALUE',
              add(link, b'\x01\x02\x03\x04' + request()[4:]) == INVALID_VALUE)
        check('jit bad input: a truncated request -> INVALID_VALUE', add(link, request()[:6]) == INVALID_VALUE)
        check('jit bad input: trailing bytes -> INVALID_VALUE', add(link, request() + b'x') == INVALID_VALUE)
        check('jit bad input: an option with no wire form (a host array) -> INVALID_VALUE',
              add(link, request(opts=[(17, 0x1234)])) == INVALID_VALUE)
        check('jit bad input: an unknown option -> INVALID_VALUE',
              add(link, request(opts=[(999, 0)])) == INVALID_VALUE)
        check('jit bad input: an input of type 9 -> INVALID_VALUE',
              add(link, request(inputs=[(9, [], b'x', b'data')])) == INVALID_VALUE)
        check('jit bad input: an input longer than the request -> INVALID_VALUE',
              add(link, request(inputs=[(1, [], b'x', b'data')])[:-2]) == INVALID_VALUE)
        check('jit bad input: a call naming a blob never uploaded -> NOT_FOUND (the shim uploads it again)',
              st(call(JIT_ADD, struct.pack('<QQ', link, 0x7777770))) == NOT_FOUND)
        check('jit bad input: a module load naming a blob never uploaded -> NOT_FOUND',
              st(call(MODULE_LOAD_JIT, struct.pack('<QQ', mint(), 0x7777780))) == NOT_FOUND)
        check('jit bad input: a later input of a state the worker does not hold -> NOT_FOUND',
              add(mint(), request(inputs=[(1, [], b'b', jit_b)], first=3)) == NOT_FOUND)
        # log sizes far past the cap, log buffer pointers the worker never uses
        huge = [(4, 1 << 40), (3, 0xdeadbeef), (6, 1 << 40), (5, 0xdeadbeef), (2, 0)]
        check('jit bad input: an absurd log size is capped, the bogus pointer ignored; the input is added',
              add(link, request(opts=huge, inputs=[(1, [], b'jit_b.ptx', jit_b)])) == 0)
        h, p = call(JIT_READ, struct.pack('<QIQ', link, 3, 0))
        info = p[4:4 + 16] if h['status'] == 0 else b''
        check('jit bad input: its answers read back (wall time, log sizes)', h['status'] == 0 and len(info) == 16,
              str(h))
        check('jit bad input: a read of an unknown kind -> INVALID_VALUE',
              st(call(JIT_READ, struct.pack('<QIQ', link, 7, 0))) == INVALID_VALUE)
        check('jit bad input: a read past the end -> INVALID_VALUE',
              st(call(JIT_READ, struct.pack('<QIQ', link, 3, 16))) == INVALID_VALUE)
        check('jit bad input: the cubin of a link not completed -> NOT_FOUND',
              st(call(JIT_READ, struct.pack('<QIQ', link, 0, 0))) == NOT_FOUND)
        check('jit bad input: completing with the wrong input count -> NOT_FOUND',
              st(call(JIT_COMPLETE, struct.pack('<QI', link, 5))) == NOT_FOUND)
        check('jit bad input: completing an unknown state -> NOT_FOUND',
              st(call(JIT_COMPLETE, struct.pack('<QI', mint(), 1))) == NOT_FOUND)
        h, p = call(JIT_COMPLETE, struct.pack('<QI', link, 1))
        check('jit bad input: the good state completes', h['status'] == 0 and struct.unpack('<Q', p)[0] > 0, str(h))
        call(JIT_DROP, struct.pack('<Q', link), sync=False)
        call(JIT_DROP, struct.pack('<Q', mint()), sync=False)
        check('jit bad input: dropped, and dropping an unknown id is no error',
              st(call(JIT_READ, struct.pack('<QIQ', link, 3, 0))) == NOT_FOUND)
        load = lambda data: st(call(MODULE_LOAD_JIT, struct.pack('<QQ', mint(), blob(data))))
        check('jit bad input: a module load of two inputs -> INVALID_VALUE',
              load(request(inputs=[(0, [], b'', jit_b), (0, [], b'', jit_b)])) == INVALID_VALUE)
        check('jit bad input: a module load of garbage -> INVALID_IMAGE',
              load(request(inputs=[(0, [], b'', b'\x7fELF garbage')])) == INVALID_IMAGE)
        check('jit bad input: the session goes on', st(call(MEMGETINFO, b'')) == 0 and d.poll() is None)
        s.close()
    finally:
        stop_daemon(d)
        log.close()


def _hold(progs, shim, kernels):
    return Hold(check, progs, kernels, shim, 'e2e_jit', 'jit', 'jit',
                'a linked module, a module and a library loaded with JIT options, a link state half done',
                'the linked kernel with its changed variable, the module and library loaded with options, and the '
                'half-done link completed, all run and checked', 'e2e_jit hold: OK')


def _traced(what, tmp, run):
    """run() with the client's calls traced; then a check that the shim
    rebuilt the half-done link in the new worker."""
    path = os.path.join(tmp, f'jit-{what}.trace')
    os.environ['LUPINE_TRACE'] = path
    try:
        run()
    finally:
        del os.environ['LUPINE_TRACE']
    text = open(path).read() if os.path.exists(path) else ''
    check(f'jit ({what}): the new worker did not hold the half-done link; the shim sent its input again',
          'sending its 2 inputs again' in text, text[-1500:])


def durable(lupined, progs, shim, kernels, tmp):
    _traced('durable', tmp, lambda: _hold(progs, shim, kernels).durable(lupined, tmp))


def hot(lupined, progs, shim, kernels, tmp):
    def drained(m, rc):
        check('jit (hot): the drain exits 0', rc == 0, m.log()[-2000:])

    _traced('hot', tmp, lambda: _hold(progs, shim, kernels).hot(lupined, tmp, drained))


def upgrade(lupined, progs, shim, kernels, tmp):
    _traced('upgrade', tmp, lambda: _hold(progs, shim, kernels).upgrade(lupined, tmp))


def main():
    if len(sys.argv) < 5:
        print(__doc__)
        return 2
    lupined, progs, shim, kernels = sys.argv[1:5]
    shim = os.path.abspath(shim)
    with tempfile.TemporaryDirectory(prefix='lupine-jit-') as tmp:
        try:
            plain(lupined, progs, shim, kernels, tmp)
            bad_input(lupined, kernels, tmp)
            durable(lupined, progs, shim, kernels, tmp)
            hot(lupined, progs, shim, kernels, tmp)
            upgrade(lupined, progs, shim, kernels, tmp)
        except Exception as e:  # a harness failure is a test failure, with the logs
            check('harness', False, repr(e))
        if check.failed:
            for f in ('jit-plain.log', 'jit-bad.log', 'jit-durable.log', 'jit-hot.log', 'jit-upgrade.log'):
                p = os.path.join(tmp, f)
                if os.path.exists(p):
                    print(f'---- {f} (tail) ----')
                    with open(p) as fh:
                        print(fh.read()[-5000:])
    print(f'jit: {"FAILED: " + ", ".join(check.failed) if check.failed else "all passed"}')
    return 1 if check.failed else 0


if __name__ == '__main__':
    sys.exit(main())
