#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A TCP proxy that cuts connections on purpose, and the e2e-resume test.

usage:
  fault_proxy.py proxy --listen HOST:PORT --target HOST:PORT
                       [--schedule SPEC] [--mode drain|hard|blackhole]
                       [--control FILE] [--status FILE]
  fault_proxy.py e2e LUPINED E2E_RESUME SHIM_DIR KERNELS_DIR [ROUNDS]

proxy: forwards every connection made to --listen to --target and cuts
connections on command:
  --schedule SPEC  one rule per accepted connection, in order, comma
                   separated: 'b:K' cuts it once K bytes went client->server,
                   't:S' once it is S seconds old, '-' never; 'RULE*N'
                   repeats a rule. Connections past the list are not cut.
  --mode           hard: both sockets are reset at once (in-flight bytes are
                   lost both ways, as when a cable is pulled); drain (the
                   default): client->server stops at the cut point and the
                   server sees EOF, while what the server still sends reaches
                   the client until the server closes (a one-way failure:
                   nothing the server executed goes unanswered);
                   blackhole: nothing moves either way from the cut on and
                   both connections stay open (a wedged peer, a half-open
                   connection through a NAT): only heartbeats can tell.
  --control FILE   cut every open connection as soon as FILE appears (it is
                   then removed). SIGUSR1 does the same.
  --status FILE    after each cut, rewritten with JSON {"cuts": N, ...}.
Prints "listening on HOST:PORT" once ready (PORT 0 picks a free one).

e2e: starts `lupined --backend sim`, runs e2e_resume straight against it for
the expected checksum, then again through this proxy while it cuts the
connection many times: drain cuts, then hard cuts (answers in flight die
with the connection; the server's reply log sends them again on resume),
then black holes (only heartbeats notice them). Every time the program must
finish with exactly the same result, no answer lost. Then a call that runs
longer than the heartbeat deadline must not be taken for a dead server.
Exits 77 (skip) if the daemon refuses to resume sessions at all.
"""
import argparse
import json
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as W  # noqa: E402


# ---------------------------------------------------------------------------
# the proxy

def parse_schedule(spec):
    rules = []
    for item in filter(None, (spec or '').split(',')):
        rule, _, times = item.partition('*')
        n = int(times) if times else 1
        if rule == '-':
            r = None
        elif rule.startswith('b:'):
            r = ('bytes', int(rule[2:]))
        elif rule.startswith('t:'):
            r = ('time', float(rule[2:]))
        else:
            raise ValueError(f'bad schedule rule {item!r}')
        rules += [r] * n
    return rules


def parse_hostport(s):
    host, _, port = s.rpartition(':')
    return host or '127.0.0.1', int(port)


class Link:
    """One proxied connection: client socket c, upstream socket u. Each
    direction has a pump thread; a direction that ends (EOF) is passed on as
    a half-close (FIN after every byte already forwarded), and the sockets
    close when both directions have ended, so no byte in flight is dropped
    except by a hard cut."""

    def __init__(self, proxy, idx, c, u, rule):
        self.proxy, self.idx, self.c, self.u, self.rule = proxy, idx, c, u, rule
        self.c2s = 0
        self.lock = threading.Lock()
        self.cut_done = False
        self.closed = False
        self.discard = False          # drain mode, after the cut: client bytes go nowhere
        self.ended = 0                # directions that have ended

    def start(self):
        threading.Thread(target=self.pump_c2s, daemon=True).start()
        threading.Thread(target=self.pump_s2c, daemon=True).start()
        if self.rule and self.rule[0] == 'time':
            t = threading.Timer(self.rule[1], self.cut, args=(f'after {self.rule[1]} s',))
            t.daemon = True
            t.start()

    def pump_c2s(self):
        limit = self.rule[1] if self.rule and self.rule[0] == 'bytes' else None
        try:
            while True:
                data = self.c.recv(65536)
                if not data:
                    break
                if self.discard:
                    continue
                if limit is not None and self.c2s + len(data) >= limit:
                    keep = limit - self.c2s
                    self.u.sendall(data[:keep])
                    self.c2s += keep
                    self.cut(f'after {self.c2s} bytes client->server')
                    continue
                self.u.sendall(data)
                self.c2s += len(data)
        except OSError:
            pass
        self.half_close(self.u)

    def pump_s2c(self):
        try:
            while True:
                data = self.u.recv(65536)
                if not data:
                    break
                if self.discard and self.proxy.mode == 'blackhole':
                    continue
                self.c.sendall(data)
        except OSError:
            pass
        self.half_close(self.c)

    def half_close(self, s):
        try:
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        with self.lock:
            self.ended += 1
            both = self.ended == 2
        if both:
            self.close_all(hard=False)

    def cut(self, why):
        with self.lock:
            if self.cut_done or self.closed:
                return
            self.cut_done = True
        self.proxy.note_cut(self, why)
        if self.proxy.mode == 'hard':
            self.close_all(hard=True)
            return
        if self.proxy.mode == 'blackhole':
            # nothing moves any more, and nobody is told: the pumps drop
            # what they read; closed only when the peers give up, or late
            self.discard = True
            t = threading.Timer(120, self.close_all, args=(True,))
            t.daemon = True
            t.start()
            return
        # drain: the server sees EOF here and nothing the client sends from
        # now on; what the server still sends reaches the client
        self.discard = True
        try:
            self.u.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        t = threading.Timer(15, self.close_all, args=(True,))  # a peer that never closes
        t.daemon = True
        t.start()

    def close_all(self, hard):
        with self.lock:
            if self.closed:
                return
            self.closed = True
        for s in (self.c, self.u):
            try:
                if hard:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass
        self.proxy.forget(self)


class Proxy:
    def __init__(self, listen, target, schedule=None, mode='drain', control=None, status=None, log=None):
        self.target, self.mode, self.control, self.status = target, mode, control, status
        self.rules = list(schedule or [])
        self.log = log or (lambda msg: print(f'fault_proxy: {msg}', file=sys.stderr, flush=True))
        self.lock = threading.Lock()
        self.links = set()
        self.accepted = 0
        self.cuts = 0
        self.cut_log = []
        self.stopping = False
        self.ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(listen)
        self.ls.listen(64)
        self.addr = self.ls.getsockname()

    def start(self):
        threading.Thread(target=self.accept_loop, daemon=True).start()
        if self.control:
            threading.Thread(target=self.control_loop, daemon=True).start()
        return self

    def accept_loop(self):
        while not self.stopping:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(self.target, timeout=5)
                u.settimeout(None)
            except OSError as e:
                self.log(f'connection {self.accepted}: cannot reach {self.target}: {e}')
                c.close()
                self.accepted += 1
                continue
            for s in (c, u):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                idx = self.accepted
                self.accepted += 1
                rule = self.rules[idx] if idx < len(self.rules) else None
                link = Link(self, idx, c, u, rule)
                self.links.add(link)
            link.start()

    def control_loop(self):
        while not self.stopping:
            if os.path.exists(self.control):
                try:
                    os.unlink(self.control)
                except OSError:
                    pass
                self.cut_all('control file')
            time.sleep(0.05)

    def cut_all(self, why):
        with self.lock:
            links = list(self.links)
        for link in links:
            link.cut(why)

    def note_cut(self, link, why):
        with self.lock:
            self.cuts += 1
            self.cut_log.append((link.idx, why))
            n = self.cuts
        self.log(f'cut connection {link.idx} ({self.mode}) {why}')
        if self.status:
            tmp = self.status + '.tmp'
            with open(tmp, 'w') as f:
                json.dump({'cuts': n, 'accepted': self.accepted, 'log': self.cut_log}, f)
            os.replace(tmp, self.status)

    def forget(self, link):
        with self.lock:
            self.links.discard(link)

    def stop(self):
        self.stopping = True
        try:
            self.ls.close()
        except OSError:
            pass
        with self.lock:
            links = list(self.links)
        for link in links:
            link.close_all(hard=True)


def proxy_main(argv):
    ap = argparse.ArgumentParser(prog='fault_proxy.py proxy')
    ap.add_argument('--listen', required=True)
    ap.add_argument('--target', required=True)
    ap.add_argument('--schedule', default='')
    ap.add_argument('--mode', choices=('drain', 'hard', 'blackhole'), default='drain')
    ap.add_argument('--control')
    ap.add_argument('--status')
    a = ap.parse_args(argv)
    p = Proxy(parse_hostport(a.listen), parse_hostport(a.target), parse_schedule(a.schedule), a.mode,
              a.control, a.status).start()
    signal.signal(signal.SIGUSR1, lambda *_: p.cut_all('SIGUSR1'))
    print(f'listening on {p.addr[0]}:{p.addr[1]}', flush=True)
    try:
        while True:
            signal.pause()
    except KeyboardInterrupt:
        pass
    p.stop()
    return 0


# ---------------------------------------------------------------------------
# the e2e-resume test

check = W.Checks()
FAILED = check.failed
free_port = W.free_port


def start_daemon(lupined, tmp, port, extra_env=None):
    env = dict(os.environ)
    env.pop('LD_LIBRARY_PATH', None)
    env.update(extra_env or {})
    log_path = os.path.join(tmp, 'lupined.log')
    log = open(log_path, 'w+')
    backend = os.environ.get('LUPINE_TEST_BACKEND', 'sim')
    proc = subprocess.Popen([lupined, '--backend', backend, '--listen', f'127.0.0.1:{port}',
                             '--session-ttl', '120', '--log-level', 'debug'],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    if W.wait_port(port, proc, 20):
        return proc, log_path
    with open(log_path) as f:
        raise RuntimeError('lupined did not start:\n' + f.read()[-3000:])


def client_env(shim, port, session, timeout_s=60, extra=None):
    env = dict(os.environ)
    env.update(extra or {})
    env['LUPINE_SERVER'] = f'127.0.0.1:{port}'
    env['LUPINE_SESSION'] = session
    env['LUPINE_RECONNECT_TIMEOUT'] = str(timeout_s)
    env['LD_LIBRARY_PATH'] = shim + (':' + env['LD_LIBRARY_PATH'] if env.get('LD_LIBRARY_PATH') else '')
    return env


RESULT = re.compile(r'e2e_resume: OK threads=(\d+) rounds=(\d+) launches=(\d+) bytes=(\d+) checksum=([0-9a-f]+)')
NOT_SUPPORTED = ('wrong resume token', 'no longer exists', 'is busy')


def run_client(prog, kernels, rounds, threads, env, timeout=400):
    r = subprocess.run([prog, kernels, str(rounds), str(threads)], env=env, capture_output=True, text=True,
                       timeout=timeout)
    m = RESULT.search(r.stdout)
    return r, (m.groups() if m else None)


LONGCALL = r'''
import ctypes, sys
cu = ctypes.CDLL('libcuda.so.1')
def ck(r, what):
    if r != 0:
        print(f'{what} failed: {r}'); sys.exit(1)
ck(cu.cuInit(0), 'cuInit')
ctx, mod, fn = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
ck(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0), 'retain')
ck(cu.cuCtxSetCurrent(ctx), 'set current')
ck(cu.cuModuleLoad(ctypes.byref(mod), (sys.argv[1] + '/kernels.ptx').encode()), 'cuModuleLoad')
ck(cu.cuModuleGetFunction(ctypes.byref(fn), mod, b'spin_ns'), 'get function')
ns = ctypes.c_ulonglong(int(float(sys.argv[2]) * 1e9))
params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.pointer(ns), ctypes.c_void_p))
ck(cu.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, None, params, None), 'launch')
ck(cu.cuCtxSynchronize(), 'cuCtxSynchronize')
print('LONGCALL OK')
'''


def long_call(shim, port, kernels, hb, seconds=3):
    """One kernel that runs `seconds` under a heartbeat deadline of a third
    of that: the worker's ALIVE frames must keep the client waiting."""
    env = client_env(shim, port, 'longcall', extra=dict(hb, LUPINE_HEARTBEAT_MS='200',
                                                         LUPINE_HEARTBEAT_TIMEOUT_MS='1000'))
    return subprocess.run([sys.executable, '-c', LONGCALL, kernels, str(seconds)], env=env, capture_output=True,
                          text=True, timeout=120)


def resume_unsupported(r):
    """The daemon refused to resume at all: the server side is missing."""
    lost = [l for l in r.stderr.splitlines() if 'lost the session' in l]
    return r.returncode != 0 and 'resumed session' not in r.stderr and \
        any(any(p in l for p in NOT_SUPPORTED) for l in lost), lost


def e2e_main(argv):
    if len(argv) < 4:
        print(__doc__)
        return 2
    lupined, prog, shim, kernels = argv[:4]
    rounds = int(argv[4]) if len(argv) > 4 else 200
    threads = 3
    shim = os.path.abspath(shim)
    rng = random.Random(20260301)
    with tempfile.TemporaryDirectory(prefix='lupine-resume-') as tmp:
        port = free_port()
        daemon, log_path = start_daemon(lupined, tmp, port)
        # a second daemon detaches a client whose writes stall for 2 s (a
        # black-holed connection), so the resume is not held up for a minute
        hb_port = free_port()
        os.makedirs(os.path.join(tmp, 'hb'))
        hb_daemon, _ = start_daemon(lupined, os.path.join(tmp, 'hb'), hb_port, {'LUPINE_CLIENT_TIMEOUT_MS': '2000'})
        proxies = []
        try:
            # the expected result: no proxy, no cuts
            t0 = time.time()
            base, want = run_client(prog, kernels, rounds, threads, client_env(shim, port, 'resume-base'))
            check('baseline run without cuts', base.returncode == 0 and want is not None,
                  base.stdout[-1000:] + base.stderr[-2000:])
            if not want:
                return 1
            print(f'  baseline: {base.stdout.strip()} ({time.time() - t0:.1f} s)')

            # drain cuts: a byte count or a time for each of the first 12
            # connections (the resume HELLOs are connections too)
            sched = []
            for i in range(12):
                sched.append(('bytes', rng.randint(40_000, 8_000_000)) if i % 3 != 2 else
                             ('time', rng.uniform(0.05, 0.4)))
            p = Proxy(('127.0.0.1', 0), ('127.0.0.1', port), sched, 'drain').start()
            proxies.append(p)
            t0 = time.time()
            r, got = run_client(prog, kernels, rounds, threads, client_env(shim, p.addr[1], 'resume-drain'))
            unsupported, lost = resume_unsupported(r)
            if unsupported:
                print(f'SKIP: lupined does not resume sessions yet ({lost[0] if lost else "?"}); '
                      'the client reconnected and was refused', flush=True)
                return 77
            resumed = r.stderr.count('resumed session resume-drain')
            print(f'  through {p.cuts} drain cuts: {r.stdout.strip()} ({time.time() - t0:.1f} s, {resumed} resumes, '
                  f'{p.accepted} connections)')
            check('drain cuts: the program finished without an error', r.returncode == 0 and got is not None,
                  r.stdout[-1000:] + r.stderr[-3000:])
            check('drain cuts: exactly the baseline result (counts and checksum)', got == want, f'{got} != {want}')
            check('drain cuts: the connection was cut at least 8 times', p.cuts >= 8, f'{p.cuts} cuts')
            # a cut during a resume belongs to the loss being resumed
            check('drain cuts: one "reconnecting" and one "resumed" line per loss',
                  8 <= resumed <= p.cuts and r.stderr.count('reconnecting for up to 60 s') == resumed,
                  f'{resumed} resumes for {p.cuts} cuts:\n' + r.stderr[-3000:])
            check('drain cuts: no answer was lost', 'was lost with the connection' not in r.stderr, r.stderr[-3000:])

            # hard cuts: answers in flight die with the connection; the
            # worker's reply log sends them again, so nothing may fail
            sched = [('bytes', rng.randint(100_000, 8_000_000)) for _ in range(8)]
            p = Proxy(('127.0.0.1', 0), ('127.0.0.1', port), sched, 'hard').start()
            proxies.append(p)
            r, got = run_client(prog, kernels, rounds, threads, client_env(shim, p.addr[1], 'resume-hard'))
            print(f'  through {p.cuts} hard cuts: rc={r.returncode} {r.stdout.strip()}')
            check('hard cuts: exactly the baseline result', r.returncode == 0 and got == want,
                  r.stdout[-1000:] + r.stderr[-3000:])
            check('hard cuts: no answer was lost (the reply log resent them)',
                  'was lost with the connection' not in r.stderr and 'no longer holds' not in r.stderr,
                  r.stderr[-3000:])
            check('hard cuts: the session was never lost', 'lost the session' not in r.stderr, r.stderr[-2000:])
            check('hard cuts: the connection was cut at least 4 times', p.cuts >= 4, f'{p.cuts} cuts')

            # black holes: the connection stays open and silent; heartbeats
            # must find it, then the resume goes on exactly once
            hb = {'LUPINE_HEARTBEAT_MS': os.environ.get('LUPINE_TEST_HEARTBEAT_MS', '300'),
                  'LUPINE_HEARTBEAT_TIMEOUT_MS': os.environ.get('LUPINE_TEST_HEARTBEAT_TIMEOUT_MS', '2000')}
            sched = [('time', rng.uniform(0.2, 0.8)) for _ in range(3)]
            p = Proxy(('127.0.0.1', 0), ('127.0.0.1', hb_port), sched, 'blackhole').start()
            proxies.append(p)
            t0 = time.time()
            r, got = run_client(prog, kernels, rounds, threads,
                                client_env(shim, p.addr[1], 'resume-blackhole', extra=hb))
            noticed = r.stderr.count('no sign of life from lupined')
            print(f'  through {p.cuts} black holes: rc={r.returncode} {r.stdout.strip()} '
                  f'({time.time() - t0:.1f} s, {noticed} noticed by heartbeat)')
            check('black holes: exactly the baseline result', r.returncode == 0 and got == want,
                  r.stdout[-1000:] + r.stderr[-3000:])
            check('black holes: each one noticed by the heartbeat', p.cuts >= 2 and noticed >= p.cuts,
                  f'{p.cuts} cuts, {noticed} noticed:\n' + r.stderr[-3000:])
            check('black holes: no answer was lost', 'was lost with the connection' not in r.stderr, r.stderr[-3000:])

            # a call longer than the heartbeat deadline is not a dead server
            r = long_call(shim, hb_port, kernels, hb)
            check('a 3 s kernel with a 1 s heartbeat deadline: no reconnect',
                  r.returncode == 0 and 'LONGCALL OK' in r.stdout and 'reconnecting' not in r.stderr,
                  r.stdout[-500:] + r.stderr[-2000:])
            check('the daemon is still running', daemon.poll() is None)
        finally:
            for p in proxies:
                p.stop()
            hb_daemon.terminate()
            try:
                hb_daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                hb_daemon.kill()
            daemon.terminate()
            try:
                daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                daemon.kill()
            if FAILED:
                with open(log_path) as f:
                    print('---- lupined log (tail) ----\n' + f.read()[-6000:])
    print(f'e2e-resume: {"FAILED: " + ", ".join(FAILED) if FAILED else "all passed"}')
    return 1 if FAILED else 0


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ('proxy', 'e2e'):
        print(__doc__)
        return 2
    return proxy_main(sys.argv[2:]) if sys.argv[1] == 'proxy' else e2e_main(sys.argv[2:])


if __name__ == '__main__':
    sys.exit(main())
