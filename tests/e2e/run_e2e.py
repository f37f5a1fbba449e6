#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""End-to-end tests: a real lupined on the simulated driver (or the real one
with --backend cuda), real client programs through the real shim.
usage: run_e2e.py LUPINED PROGS_DIR SHIM_DIR [--backend sim|cuda]"""
import os
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as W  # noqa: E402

FAILED = []


free_port = W.free_port


class Daemon:
    def __init__(self, lupined, tmp, backend, env_extra=None, tag='main'):
        self.backend = backend
        self.port = free_port()
        self.unix = os.path.join(tmp, f'{tag}.sock')
        self.log_path = os.path.join(tmp, f'lupined-{tag}.log')
        env = dict(os.environ)
        env.pop('LD_LIBRARY_PATH', None)   # the daemon must use the real (or sim) driver
        env.update(env_extra or {})
        self.log = open(self.log_path, 'w+')
        self.proc = subprocess.Popen([lupined, '--backend', backend, '--listen', f'127.0.0.1:{self.port}',
                                      '--listen', f'unix:{self.unix}', '--log-level', 'debug'],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env)
        if not W.wait_port(self.port, self.proc, 15):
            raise RuntimeError('lupined did not start:\n' + self.text())

    def text(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        self.proc.terminate()
        try:
            rc = self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = 'killed'
        return rc


def check(name, cond, detail=''):
    print(f'{"ok  " if cond else "FAIL"} {name}' + (f': {detail}' if detail and not cond else ''))
    if not cond:
        FAILED.append(name)


def run_prog(progs, prog, env, timeout=300, args=()):
    return subprocess.run([os.path.join(progs, prog)] + list(args), env=env, capture_output=True, text=True,
                          timeout=timeout)


SHIM_DIR = None


def client_env(server):
    """Environment of a client: the shim first on the library path, so an
    LD_LIBRARY_PATH that names the real driver cannot win."""
    env = dict(os.environ)
    env['LUPINE_SERVER'] = server
    env['LD_LIBRARY_PATH'] = SHIM_DIR + (':' + env['LD_LIBRARY_PATH'] if env.get('LD_LIBRARY_PATH') else '')
    return env


def test_programs(d, progs):
    for server in (f'127.0.0.1:{d.port}', f'unix:{d.unix}'):
        r = run_prog(progs, 'e2e_basic', client_env(server))
        check(f'e2e_basic via {server.split(":")[0]}', r.returncode == 0 and 'e2e_basic: OK' in r.stdout,
              r.stdout[-2000:] + r.stderr[-2000:])
    # several endpoints: the first one is down, the shim moves on to the next
    r = run_prog(progs, 'e2e_basic', client_env(f'127.0.0.1:1|127.0.0.1:{d.port}'))
    check('endpoint list falls through to a live server', r.returncode == 0, r.stderr[-2000:])


KERNELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'kernels')


def test_kernels(d, progs, launches):
    r = run_prog(progs, 'e2e_kernels', client_env(f'127.0.0.1:{d.port}'), args=[KERNELS, str(launches)])
    check('kernels, streams, events, callbacks, copies (e2e_kernels)',
          r.returncode == 0 and 'e2e_kernels: OK' in r.stdout, r.stdout[-3000:] + r.stderr[-3000:])
    print(r.stdout.strip())
    r = run_prog(progs, 'e2e_vmm', client_env(f'127.0.0.1:{d.port}'), args=[KERNELS])
    check('virtual memory management, PCI bus ids, profiler (e2e_vmm)',
          r.returncode == 0 and 'e2e_vmm: OK' in r.stdout, r.stdout[-3000:] + r.stderr[-3000:])
    r = run_prog(progs, 'e2e_graphs', client_env(f'127.0.0.1:{d.port}'), args=[KERNELS])
    check('stream capture and graphs (e2e_graphs)', r.returncode == 0 and 'e2e_graphs: OK' in r.stdout,
          r.stdout[-3000:] + r.stderr[-3000:])
    print(r.stdout.strip())
    r = run_prog(progs, 'e2e_graph_mem', client_env(f'127.0.0.1:{d.port}'), args=[KERNELS])
    check('graph memory: alloc and free nodes, captured cuMemAllocAsync (e2e_graph_mem)',
          r.returncode == 0 and 'e2e_graph_mem: OK' in r.stdout, r.stdout[-3000:] + r.stderr[-3000:])
    r = run_prog(progs, 'e2e_graph_generic', client_env(f'127.0.0.1:{d.port}'), args=[KERNELS])
    check('generic node parameters, child graphs, enable bits (e2e_graph_generic)',
          r.returncode == 0 and 'e2e_graph_generic: OK' in r.stdout, r.stdout[-3000:] + r.stderr[-3000:])
    print(r.stdout.strip())
    r = run_prog(progs, 'e2e_sticky', client_env(f'127.0.0.1:{d.port}'), args=[KERNELS])
    check('a faulting kernel: the next sync returns ILLEGAL_ADDRESS', r.returncode == 0, r.stdout + r.stderr[-2000:])
    r = run_prog(progs, 'e2e_answers', client_env(f'127.0.0.1:{d.port}'), args=[KERNELS])
    check('driver answers probe (e2e_answers; diffed against the real driver on the GPU)',
          r.returncode == 0 and 'e2e_answers: OK' in r.stdout, r.stdout[-1500:] + r.stderr[-1500:])
    tmap = [line for line in r.stdout.splitlines() if line.startswith('tensor map:')]
    # on a GPU, tests/gpu/runtime.sh diffs these lines against the local driver's
    check('tensor maps encoded by the server: equal inputs give equal maps, a new address changes it, bad input refused',
          tmap == ['tensor map: encode = 0', 'tensor map: same inputs, same map = 1',
                   'tensor map: replaced address differs = 1', 'tensor map: address not 16-byte aligned = error 1',
                   'tensor map: rank 6 = error 1', 'tensor map: box of 300 = error 1',
                   'tensor map: stride not a multiple of 16 = error 1'] or d.backend != 'sim', '\n'.join(tmap))
    # cuBLASLt loads its kernels with "binary is preserved" and no values
    # array; refusing that left its GEMMs without kernels (issue 6)
    check('a library option without a values array loads, like on the driver',
          'library option binary-is-preserved, no values = 0' in r.stdout and
          'library option out of range = error 1' in r.stdout, r.stdout[-1500:])
    r = run_prog(progs, 'e2e_export_tables', client_env(f'127.0.0.1:{d.port}'), args=[KERNELS])
    check('private export tables: integrity answer, context storage, checks (e2e_export_tables)',
          r.returncode == 0 and 'e2e_export_tables: OK' in r.stdout, r.stdout[-3000:] + r.stderr[-3000:])


def printf_order_problems(out, rounds=4, grid=2, block=4, exact=False):
    """What is wrong with e2e_printf's stdout: each round's host line
    before, the device lines of that round (all of them; in the sim's order
    when exact, any order on a GPU), the host line after."""
    lines = out.splitlines()
    at = 0
    for r in range(1, rounds + 1):
        want_dev = [f'device says hello from block {b} thread {t} round {r}' for b in range(grid) for t in range(block)]
        seq = lines[at:at + 2 + len(want_dev)]
        if len(seq) < 2 + len(want_dev):
            return f'round {r}: output ends early'
        if seq[0] != f'host: round {r} before':
            return f'round {r}: expected the host line "before", got {seq[0]!r}'
        dev = seq[1:-1]
        if (dev != want_dev) if exact else (sorted(dev) != sorted(want_dev)):
            return f'round {r}: device lines {dev!r}'
        if seq[-1] != f'host: round {r} after':
            return f'round {r}: expected the host line "after", got {seq[-1]!r}'
        at += len(seq)
    if lines[at:] != ['e2e_printf: OK']:
        return f'after the rounds: {lines[at:]!r}'
    return None


def test_printf(d, progs, backend):
    """Device printf, flushed by a context, stream and event synchronisation
    and by a blocking copy, lands on the client's stdout between the host
    lines around it, and not in the daemon's log."""
    for server in (f'127.0.0.1:{d.port}', f'unix:{d.unix}'):
        r = run_prog(progs, 'e2e_printf', client_env(server), args=[KERNELS])
        problem = printf_order_problems(r.stdout, exact=backend == 'sim') if r.returncode == 0 else 'exit status'
        check(f'device printf on the client\'s stdout, in order (e2e_printf via {server.split(":")[0]})',
              problem is None, f'{problem}\n{r.stdout[-3000:]}{r.stderr[-2000:]}')
    check('device printf does not reach the daemon\'s log', 'device says hello' not in d.text())


def test_pools(d, progs):
    """The stream-ordered allocator (e2e_pools.c checks what the driver
    documents); here also what lupine's pools do that the driver may but
    need not: reuse on one stream, and across streams only with an ordering."""
    r = run_prog(progs, 'e2e_pools', client_env(f'127.0.0.1:{d.port}'), args=[KERNELS])
    out = r.stdout
    check('stream-ordered allocator: pools, attributes, ordering, threshold, bad input (e2e_pools)',
          r.returncode == 0 and 'e2e_pools: OK' in out, out[-3000:] + r.stderr[-3000:])
    for line in ('reuse on the same stream: yes', 'reuse across streams (internal dependencies): yes',
                 'reuse across streams (no dependencies allowed): no',
                 'reuse across streams (opportunistic, after a sync): yes'):
        check(f'pools: "{line}"', line in r.stderr, r.stderr[-3000:])
    check('pools: "export of a pool: error 1"', 'export of a pool: error 1' in out, out[-3000:])
    check('pools: a shareable pool is not exported (801)', 'export of a shareable pool: error 801' in r.stderr,
          r.stderr[-2000:])
    check('pools: one log line for the refused export',
          r.stderr.count('memory pools cannot be shared') == 1, r.stderr[-2000:])


def test_many_clients(d, progs):
    env = client_env(f'127.0.0.1:{d.port}')
    procs = [subprocess.Popen([os.path.join(progs, 'e2e_threads')], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(8)]
    ok = True
    detail = ''
    for p in procs:
        out, err = p.communicate(timeout=300)
        if p.returncode != 0 or 'e2e_threads: OK' not in out:
            ok = False
            detail = err[-2000:]
    check('8 client processes x 4 threads', ok, detail)


def test_noserver(progs):
    r = run_prog(progs, 'e2e_noserver', client_env('127.0.0.1:1'))
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    check('unreachable server: CUDA_ERROR_NO_DEVICE', r.returncode == 0, r.stderr)
    check('unreachable server: exactly one stderr line', len(lines) == 1 and 'cannot reach lupined' in lines[0], repr(lines))
    r = run_prog(progs, 'e2e_noserver', client_env('garbage'))
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    check('LUPINE_SERVER=garbage: CUDA_ERROR_NO_DEVICE', r.returncode == 0, r.stderr)
    check('LUPINE_SERVER=garbage: one line, which says what an endpoint looks like',
          len(lines) == 1 and "'garbage' is not an endpoint (HOST:PORT" in lines[0], repr(lines))


def expect_closed(d, name, frames_after_hello, reason, want_reply=False):
    s, _, base = W.handshake(('127.0.0.1', d.port), 'bad-' + name.replace(' ', '-'))
    data = frames_after_hello(base) if callable(frames_after_hello) else frames_after_hello
    try:
        s.sendall(data)
    except OSError:
        pass
    closed = W.wait_closed(s)
    s.close()
    time.sleep(0.2)
    check(f'bad input "{name}": connection closed', closed)
    check(f'bad input "{name}": reason logged', reason in d.text(), f'no "{reason}" in the log')
    # the daemon still serves other clients
    s2, _, _ = W.handshake(('127.0.0.1', d.port), 'after-' + name.replace(' ', '-'))
    s2.sendall(W.frame(W.OP_PING, flags=W.F_SYNC, seq=1))
    h, _ = W.read_frame(s2)
    s2.close()
    check(f'bad input "{name}": daemon still serves', h['status'] == 0 and d.alive())


def test_bad_input(d):
    memset_op = 260  # cuMemsetD8_v2: u64 dst, u8 value, u64 count
    dtoh = lambda base, n: W.frame(W.OP_DTOH, struct.pack('<QQQ', base, n, 0), flags=W.F_SYNC, seq=1, ctx=0x10000)
    expect_closed(d, 'unknown op', W.frame(9999, b'', seq=1), 'unknown op')
    expect_closed(d, 'unknown control op', W.frame(77, b'', seq=1), 'unknown op')
    expect_closed(d, 'truncated arguments', W.frame(memset_op, b'\x00\x01\x02', seq=1, ctx=0x10000),
                  'malformed arguments for cuMemsetD8_v2')
    expect_closed(d, 'pointer outside the arena',
                  W.frame(memset_op, struct.pack('<QBQ', 0x1000, 0, 16), seq=1, ctx=0x10000),
                  "device pointer outside the session's arena")
    expect_closed(d, 'absurd size', lambda base: dtoh(base, 1 << 60), 'absurd MEMCPY_DTOH size')
    expect_closed(d, 'oversized length', W.frame(W.OP_PING, b'', seq=1, length=64 << 20), 'frame length exceeds the limit')
    expect_closed(d, 'sequence gap', W.frame(W.OP_PING, b'', flags=W.F_SYNC, seq=5), 'sequence number out of order')
    expect_closed(d, 'reply frame from client', W.frame(W.OP_PING, b'', flags=W.F_REPLY, seq=1), 'client sent a reply frame')
    expect_closed(d, 'second HELLO', W.frame(W.OP_HELLO, W.hello_payload('x'), flags=W.F_SYNC, seq=1), 'HELLO after the handshake')
    expect_closed(d, 'sync op without reply lane', W.frame(256, b'', seq=1, ctx=0x10000), 'synchronous op sent without a reply lane')
    # frames only a server sends: heartbeat, async copy data, device printf output
    expect_closed(d, 'ALIVE from client', W.frame(5, b'', seq=1), 'client sent ALIVE, a server-only frame')
    expect_closed(d, 'synchronous ALIVE from client', W.frame(5, b'', flags=W.F_SYNC, seq=1),
                  'client sent ALIVE, a server-only frame')
    expect_closed(d, 'DATA from client', W.frame(22, struct.pack('<QQ', 1, 0) + b'xyz', seq=1),
                  'client sent DATA, a server-only frame')
    expect_closed(d, 'OUTPUT from client', W.frame(23, b'device says hello\n', seq=1),
                  'client sent OUTPUT, a server-only frame')
    expect_closed(d, 'OUTPUT from client after a call',
                  W.frame(W.OP_PING, flags=W.F_SYNC, seq=1) + W.frame(23, b'x' * 5000, flags=W.F_SYNC, seq=2),
                  'client sent OUTPUT, a server-only frame')

    # a handle that names nothing is answered with CUDA's own error, and the session goes on
    s, _, base = W.handshake(('127.0.0.1', d.port), 'bad-handle')
    s.sendall(W.frame(256, b'', flags=W.F_SYNC, seq=1, ctx=0xabc000))  # cuMemGetInfo in an unknown context
    h, _ = W.read_frame(s)
    check('bad context handle -> CUDA_ERROR_INVALID_CONTEXT', h['status'] == 201, str(h))
    s.sendall(W.frame(282, struct.pack('<Q', 0x777777), flags=W.F_SYNC, seq=2))  # lupCtxDestroy of nothing
    h, _ = W.read_frame(s)
    check('destroying an unknown context -> CUDA_ERROR_INVALID_CONTEXT', h['status'] == 201, str(h))
    s.sendall(W.frame(W.OP_PING, flags=W.F_SYNC, seq=3))
    h, _ = W.read_frame(s)
    check('session continues after bad handles', h['status'] == 0)
    s.close()
    test_bad_vmm(d)


def test_bad_vmm(d):
    """A client without the shim names VMM ranges the worker must refuse: the
    driver would map or unmap anything in the arena, which is all one
    reservation to it (worker/vmm.c checks)."""
    create, release, mmap, unmap, access = 442, 443, 444, 445, 446
    gran = 2 << 20
    s, _, base = W.handshake(('127.0.0.1', d.port), 'bad-vmm')
    seq = [0]

    def call(op, payload):
        seq[0] += 1
        s.sendall(W.frame(op, payload, flags=W.F_SYNC, seq=seq[0]))
        return W.read_frame(s)[0]['status']

    mk = lambda hid: struct.pack('<QQiiiIBBHQ', hid, gran, 1, 1, 0, 0, 0, 0, 0, 0)
    check('vmm bad input: a physical allocation is made', call(create, mk(0x5001)) == 0)
    check('vmm bad input: its id again -> INVALID_VALUE', call(create, mk(0x5001)) == 1)
    for where, ptr in (('in the arena outside any reservation', base), ('outside the arena', 0x10000000)):
        st = call(mmap, struct.pack('<QQQQQ', ptr, gran, 0, 0x5001, 0))
        check(f'vmm bad input: a map {where} -> INVALID_VALUE', st == 1, str(st))
    for k in range(4):  # the worker's own chunks (the allocation's home among them) stay mapped
        st = call(unmap, struct.pack('<QQ', base + k * gran, gran))
        check(f'vmm bad input: unmapping the worker\'s arena at +{k * 2} MiB -> INVALID_VALUE', st == 1, str(st))
    st = call(access, struct.pack('<QQII', base, gran, 1 << 20, 0))
    check('vmm bad input: access for device 20 -> INVALID_VALUE (driver 580)', st == 1, str(st))
    check('vmm bad input: releasing a handle that names nothing -> INVALID_VALUE',
          call(release, struct.pack('<Q', 0x9999)) == 1)
    check('vmm bad input: release of the real one', call(release, struct.pack('<Q', 0x5001)) == 0)
    seq[0] += 1
    s.sendall(W.frame(W.OP_PING, flags=W.F_SYNC, seq=seq[0]))
    check('vmm bad input: the session goes on', W.read_frame(s)[0]['status'] == 0 and d.alive())
    s.close()


def main():
    global SHIM_DIR
    if len(sys.argv) < 4:
        print(__doc__)
        return 2
    lupined, progs, SHIM_DIR = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    backend = 'sim'
    if '--backend' in sys.argv:
        backend = sys.argv[sys.argv.index('--backend') + 1]
    with tempfile.TemporaryDirectory(prefix='lupine-e2e-') as tmp:
        d = Daemon(lupined, tmp, backend)
        try:
            test_programs(d, progs)
            test_kernels(d, progs, 100000 if backend == 'cuda' else 10000)
            test_printf(d, progs, backend)
            test_pools(d, progs)
            test_many_clients(d, progs)
            test_bad_input(d)
            test_noserver(progs)
            check('daemon alive after everything', d.alive())
        finally:
            rc = d.stop()
            check('daemon exits 0 on SIGTERM', rc == 0, f'rc={rc}')
            if FAILED:
                print('---- daemon log (tail) ----\n' + d.text()[-6000:])
        if backend == 'sim':
            small = Daemon(lupined, tmp, backend, {'LUPINE_SIM_MEM_MB': '64'}, tag='small')
            try:
                r = run_prog(progs, 'e2e_oom', client_env(f'127.0.0.1:{small.port}'))
                check('out of device memory -> CUDA_ERROR_OUT_OF_MEMORY', r.returncode == 0, r.stderr[-2000:])
            finally:
                small.stop()
    print(f'e2e: {"FAILED: " + ", ".join(FAILED) if FAILED else "all passed"}')
    return 1 if FAILED else 0


if __name__ == '__main__':
    sys.exit(main())
