#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""e2e: one device list across servers (issue 17, item 1; docs/running.md,
"Several servers").

Usage: test_devlist.py LUPINED LUPINECTL PROGS_DIR SHIM_DIR KERNELS_DIR

Two lupined on the simulator (LUPINE_DEVLIST_BACKEND=cuda: on the real GPU,
the local run then on LUPINE_DEVLIST_LOCAL_LIBDIR's libcuda.so.1, as
tests/gpu/devlist.sh does), A and B, each with a checkpoint directory of
its own (they share no store), and a client with LUPINE_SERVER=A,B. The
program (tests/e2e/progs/e2e_devlist.c) first runs on the simulator
alone (the local driver: one device), then through lupine. Cases:
  1. list: the program sees A's device then B's, each name saying its
     server; it works on both (buffers, kernels, streams) with every byte
     checked; A runs session NAME and B runs NAME.p1, in different arena
     slots (the HELLO's avoid mask: the daemons share nothing);
  2. restart: B is restarted (SIGTERM, checkpoint, start again) while the
     program runs; only B's calls wait, and the counters end exact;
  3. visible: CUDA_VISIBLE_DEVICES=1 shows B's device only;
  4. nvml: libnvidia-ml.so.1 lists the same two devices, names and UUIDs
     as libcuda.so.1 has them (both sim devices have one UUID: the later
     one is made distinct the same way in both);
  5. failover: 'A|B' is one server with an alternative: one device;
  6. copies between the servers (cuMemcpyDtoD, cuMemcpyPeerAsync from a
     running kernel's output, cuMemcpy, cuMemcpyPeer): every byte checked
     and the checksum equal to the local driver's (one device there); the
     8 MiB copy's bytes go A to B daemon to daemon: the sessions' peer
     counters grow by exactly its size while what the client sent B and
     received from A grows by less than 1 MiB;
  7. retry: B restarts between the copy's ticket and its bytes (A waits
     3 s there: LUPINE_PEER_DELAY_MS); A answers "try again", the client
     asks B for a new ticket, and the copy completes with the same bytes;
  8. tls: two TLS servers with bearer tokens (tls://A,tls://B): the copies
     go over TLS daemon to daemon (a peer needs no token: its ticket admits
     it); a source whose --peer-tls-ca does not know B's certificate
     fails the copy at once with the reason, and never in the clear; a
     TLS peer with a wrong ticket gets no second handshake; servers named
     by UNIX sockets take no copies (daemons connect over TCP only);
  9. peer HELLOs: a wrong ticket, an unknown session and a peer HELLO with
     other flags are refused, and the session goes on.

Exit 0 on pass, 1 on failure (naming the case).
"""
import json
import os
import re
import socket
import ssl
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as W  # noqa: E402
import lupwire_tls as WT  # noqa: E402
import tls_certs  # noqa: E402
import test_fleet as F  # noqa: E402
from restart_harness import read_line  # noqa: E402

check = W.Checks()


class Daemon(F.Host):
    """A lupined of its own (no shared store); log() and stop() are Host's."""

    def __init__(self, exe, tmp, label, port=None, env=None, args=()):  # noqa: D107 - Host's isn't called
        self.exe, self.tmp, self.label, self.extra_env, self.args = exe, tmp, label, env or {}, list(args)
        self.port = port or W.free_port()
        self.sock = os.path.join(tmp, f'{label}.sock')
        self.ck = os.path.join(tmp, f'ck-{label}')
        self.log_path = os.path.join(tmp, f'{label}.log')
        self.start()

    def start(self):
        env = {k: v for k, v in os.environ.items() if k not in ('NOTIFY_SOCKET', 'LISTEN_FDS', 'LISTEN_PID')}
        env.update(self.extra_env)
        self.logf = open(self.log_path, 'ab')
        self.proc = subprocess.Popen(
            [self.exe, '--backend', os.environ.get('LUPINE_DEVLIST_BACKEND', 'sim'), '--listen', f'127.0.0.1:{self.port}', '--listen', f'unix:{self.sock}',
             '--checkpoint-dir', self.ck, '--session-ttl', '120', '--drain-timeout', '30', '--health-policy', 'off']
            + self.args,
            stdin=subprocess.DEVNULL, stdout=self.logf, stderr=self.logf, env=env)
        if not W.wait_port(self.port, self.proc, 20):
            raise RuntimeError(f'{self.label} did not start')
        return self

    def session(self, ctl, name):
        r = subprocess.run([ctl, '--socket', self.sock, '--json', 'status'], capture_output=True, text=True,
                           timeout=30)
        try:
            js = json.loads(r.stdout)
        except ValueError:
            return {}
        return next((s for s in js.get('sessions', []) if s.get('name') == name), {})

    def slot(self, ctl, name):
        return self.session(ctl, name).get('slot')


def run(progs, kernels, env, rounds, ms=0, timeout=120):
    return subprocess.run([os.path.join(progs, 'e2e_devlist'), kernels, str(rounds), str(ms)], env=env,
                          capture_output=True, text=True, timeout=timeout)


def client_env(shim, servers, session, **extra):
    env = F.client_env(shim, [], session)
    env['LUPINE_SERVER'] = servers
    env.update(extra)
    return env


def list_case(exe, ctl, progs, shim, kernels, tmp):
    sim, real = os.environ.get('LUPINE_SIM_LIBRARY'), os.environ.get('LUPINE_DEVLIST_LOCAL_LIBDIR')
    local_copies, local_peers = None, None
    if sim or real:  # the local driver first (the simulator itself, or the GPU's): one device
        env = dict(os.environ, LD_LIBRARY_PATH=real or os.path.dirname(sim))
        env.pop('LUPINE_SERVER', None)
        if not real:
            env['LD_PRELOAD'] = sim
        r = run(progs, kernels, env, 3)
        check('list: the program on the local driver', r.returncode == 0 and 'devices 1' in r.stdout,
              (r.stdout + r.stderr)[-1500:])
        local_copies = COPIES.search(r.stdout)
        local_peers = PEERS.findall(r.stdout)
    a = Daemon(exe, tmp, 'listA')
    b = Daemon(exe, tmp, 'listB')
    try:
        servers = f'127.0.0.1:{a.port},127.0.0.1:{b.port}'
        c = subprocess.Popen([os.path.join(progs, 'e2e_devlist'), kernels, '30', '100'],
                             env=client_env(shim, servers, 'dl-job', E2E_DEVLIST_HOLD_MS='3000'), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = read_line(c.stdout, deadline - time.monotonic())
            if not line:
                break
            lines.append(line)
            if line.startswith('round 3 ok'):
                break
        text = ''.join(lines)
        check('list: two devices, one per server', 'devices 2' in text, text + c.stderr.read() if c.poll() else text)
        check('list: each name says its server',
              re.search(rf'device 0: .* on 127\.0\.0\.1:{a.port}', text) is not None and
              re.search(rf'device 1: .* on 127\.0\.0\.1:{b.port}', text) is not None, text)
        sa, sb = a.slot(ctl, 'dl-job'), b.slot(ctl, 'dl-job.p1')
        check('list: A runs the session, B runs NAME.p1, in different arena slots',
              sa is not None and sb is not None and sa != sb, f'A {sa}, B {sb}')
        # restart B under the program: a drain with a checkpoint, then a restore
        b.stop()
        check('restart: B checkpointed its session', re.search(r'session dl-job\.p1.*checkpoint', b.log()) is not None,
              b.log()[-2000:])
        b.start()
        out, counters = hold_counters(c, ctl, a, b)
        rest, err = c.communicate(timeout=240)
        out += rest
        check('restart: the program ends exact on both servers after B restarted',
              c.returncode == 0 and 'counters exact' in out, (text + out + err)[-2500:])
        check('restart: B restored the session', 'session dl-job.p1: restored' in b.log(), b.log()[-2000:])
        copies_case(out, err, counters, local_copies, a, b)
        check('library: one library load, its kernel run on both servers\' devices (as a kernel and a function)',
              'library kernels on every device: checked' in out, out[-800:])
        check('peers: a device with itself answers as on the local driver; devices of two servers are not peers',
              'devices of two servers: not peers' in out and
              (local_peers is None or PEERS.findall(out) == local_peers), f'{PEERS.findall(out)} {local_peers}')
        peer_hello_case(a, progs, shim, kernels)
        r = run(progs, kernels, client_env(shim, servers, 'dl-vis', CUDA_VISIBLE_DEVICES='1'), 2)
        check('visible: CUDA_VISIBLE_DEVICES=1 shows B\'s device only', r.returncode == 0 and 'devices 1' in r.stdout
              and re.search(rf'device 0: .* on 127\.0\.0\.1:{b.port}', r.stdout) is not None,
              (r.stdout + r.stderr)[-1500:])
        env = client_env(shim, servers, 'dl-nvml')
        r = subprocess.run([os.path.join(progs, 'e2e_nvml'), 'cuda'], env=env, capture_output=True, text=True,
                           timeout=60)
        check('nvml: libnvidia-ml.so.1 lists the same two devices as libcuda.so.1 (names, UUIDs, order)',
              r.returncode == 0 and 'PASSED' in r.stdout and r.stdout.count('device ') == 2 and
              f'on 127.0.0.1:{b.port}' in r.stdout, (r.stdout + r.stderr)[-1500:])
        r = run(progs, kernels, client_env(shim, f'unix:{a.sock},unix:{b.sock}', 'dl-unix'), 1)
        check('unix: a copy to a server named by its UNIX socket is refused, the daemons never connect there',
              r.returncode != 0 and 'CUDA_ERROR_NOT_SUPPORTED' in r.stderr and 'a UNIX socket' in r.stderr,
              (r.stdout + r.stderr)[-1500:])
        r = run(progs, kernels, client_env(shim, f'127.0.0.1:{a.port}|127.0.0.1:{b.port}', 'dl-alt'), 2)
        check('failover: A|B is one server: one device, its name unchanged',
              r.returncode == 0 and 'devices 1' in r.stdout and ' on 127.0.0.1' not in r.stdout,
              (r.stdout + r.stderr)[-1500:])
    finally:
        a.stop()
        b.stop()


PEERS = re.compile(r'^(cuDevice\w+\(.*\): -?\d+)$', re.M)
COPIES = re.compile(r'copies between the first and the last device: (\d+) bytes checked, checksum ([0-9a-f]+)')
BIG = (8 << 20) + 12345  # e2e_devlist's DtoD from A to B


def hold_counters(c, ctl, a, b):
    """Reads the program's output up to its holds around the 8 MiB copy,
    taking A's and B's counters of the sessions at each."""
    out, counters = '', {}
    deadline = time.monotonic() + 240
    while len(counters) < 3 and time.monotonic() < deadline:
        line = read_line(c.stdout, deadline - time.monotonic())
        if not line:
            break
        out += line
        if line.startswith('hold '):
            time.sleep(1.6)  # the workers report at most once a second
            counters[line.split()[1]] = (a.session(ctl, 'dl-job'), b.session(ctl, 'dl-job.p1'))
            if line.startswith('hold after-copy'):
                counters['show'] = subprocess.run([ctl, '--socket', b.sock, 'sessions', 'show', 'dl-job.p1'],
                                                  capture_output=True, text=True, timeout=30).stdout
    return out, counters


def copies_case(out, err, counters, local_copies, a, b):
    m = COPIES.search(out)
    check('copies: every byte of the copies between the servers checked', m is not None and 'FAILED' not in out,
          (out + err)[-1500:])
    if local_copies:
        check('copies: the same bytes as on the local driver (checksum)',
              m is not None and m.groups() == local_copies.groups(), f'{m and m.groups()} {local_copies.groups()}')
    before, after = counters.get('before-copy'), counters.get('after-copy')
    if not before or not after or not before[0] or not before[1]:
        check('copies: the daemons\' counters around the 8 MiB copy', False, str(counters))
        return
    d = {k: (after[0].get(k, 0) - before[0].get(k, 0), after[1].get(k, 0) - before[1].get(k, 0))
         for k in ('peer_bytes_out', 'peer_bytes_in', 'bytes_in', 'bytes_out')}
    check('copies: A sent the 8 MiB daemon to daemon, B took them in (peer counters)',
          d['peer_bytes_out'][0] == BIG and d['peer_bytes_in'][1] == BIG, str(d))
    check('copies: the bytes did not pass through the client (< 1 MiB more from A to it, from it to B)',
          d['bytes_out'][0] < (1 << 20) and d['bytes_in'][1] < (1 << 20), str(d))
    check('copies: lupinectl sessions show says what came in from the other server',
          re.search(r'peer copies 8 MiB in, 0 B out', counters.get('show', '')) is not None,
          counters.get('show', ''))
    check('copies: each daemon logged its side of the copy',
          re.search(rf'session dl-job: peer copy of {BIG} bytes to 127\.0\.0\.1:{b.port}', a.log()) is not None and
          f'session dl-job.p1: peer copy of {BIG} bytes received' in b.log(), a.log()[-1500:] + b.log()[-1500:])


def peer_hello_payload(name, ticket, flags=0x10):
    """A HELLO with LUP_HELLO_PEER (and, for a malformed one, HEARTBEAT's
    u32 too), then the ticket."""
    nb = name.encode()
    p = struct.pack('<IIII', W.MAGIC, W.VERSION, 13000, flags) + struct.pack('<H', len(nb)) + nb + bytes(16)
    return p + struct.pack('<Q', 0) + (struct.pack('<I', 1000) if flags & 1 else b'') + ticket


def peer_hello(port, name, ticket, flags=0x10):
    p = peer_hello_payload(name, ticket, flags)
    s = W.connect(('127.0.0.1', port))
    try:
        s.sendall(W.frame(W.OP_HELLO, p, flags=W.F_SYNC))
        h, payload = W.read_frame(s)
        return h['status'], payload[2:].decode(errors='replace')
    except (OSError, ConnectionError) as e:
        return -1, str(e)
    finally:
        s.close()


def peer_hello_case(a, progs, shim, kernels):
    """A session that lives on A while peers knock with what they should not have."""
    env = client_env(shim, f'127.0.0.1:{a.port}', 'dl-peer')
    c = subprocess.Popen([os.path.join(progs, 'e2e_devlist'), kernels, '20', '200'], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        read_line(c.stdout, 60)
        st, msg = peer_hello(a.port, 'dl-peer', os.urandom(16))
        check('peer: a wrong ticket is refused', st != 0 and 'unknown or expired peer-copy ticket' in msg, f'{st} {msg}')
        st, msg = peer_hello(a.port, 'no-such-session', os.urandom(16))
        check('peer: a peer HELLO for a session not here is refused', st != 0 and 'is not served here' in msg,
              f'{st} {msg}')
        st, msg = peer_hello(a.port, 'dl-peer', os.urandom(16), flags=0x11)
        check('peer: a peer HELLO with other flags is refused', st != 0 and 'no other flag' in msg, f'{st} {msg}')
        out, err = c.communicate(timeout=120)
        check('peer: the session went on, its counters exact', c.returncode == 0 and 'counters exact' in out,
              (out + err)[-1500:])
    finally:
        if c.poll() is None:
            c.kill()


def retry_case(exe, ctl, progs, shim, kernels, tmp):
    a = Daemon(exe, tmp, 'retryA', env={'LUPINE_PEER_DELAY_MS': '3000'})
    b = Daemon(exe, tmp, 'retryB')
    try:
        servers = f'127.0.0.1:{a.port},127.0.0.1:{b.port}'
        c = subprocess.Popen([os.path.join(progs, 'e2e_devlist'), kernels, '2'],
                             env=client_env(shim, servers, 'dl-retry', E2E_DEVLIST_HOLD_MS='1000'),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out = ''
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = read_line(c.stdout, deadline - time.monotonic())
            if not line:
                break
            out += line
            if line.startswith('hold before-copy'):
                break
        # the hold (1 s), the ticket, then A waits 3 s: B restarts meanwhile
        time.sleep(2.0)
        b.stop()
        b.start()
        rest, err = c.communicate(timeout=120)
        out += rest
        m = COPIES.search(out)
        check('retry: the copy completes after B restarted between its ticket and its bytes',
              c.returncode == 0 and m is not None and 'counters exact' in out, (out + err)[-2000:])
        check('retry: A said the copy is tried again, and B restored the session',
              'the client tries again' in a.log() and 'session dl-retry.p1: restored' in b.log(),
              a.log()[-1500:] + b.log()[-1500:])
        check('retry: A\'s second attempt delivered the bytes',
              re.search(rf'session dl-retry: peer copy of {BIG} bytes to', a.log()) is not None, a.log()[-1500:])
    finally:
        a.stop()
        b.stop()


def tls_wrong_ticket(b, ctl, progs, shim, kernels, certs):
    """A TLS peer with a wrong ticket for a session running on B: the
    supervisor hands it off, the worker closes it without a handshake."""
    env = client_env(shim, f'tls://127.0.0.1:{b.port}', 'dl-tls-victim', LUPINE_TLS_CA=certs['ca'],
                     LUPINE_TOKEN='alice-devlist-token')
    c = subprocess.Popen([os.path.join(progs, 'e2e_devlist'), kernels, '15', '200'], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        read_line(c.stdout, 60)
        js = subprocess.run([ctl, '--socket', b.sock, '--json', 'status'], capture_output=True, text=True,
                            timeout=30).stdout
        key = next((x['name'] for x in json.loads(js).get('sessions', []) if x['name'].endswith('.dl-tls-victim')),
                   None)
        refused = False
        if key:
            hello = peer_hello_payload(key, os.urandom(16))
            sock = socket.create_connection(('127.0.0.1', b.port), timeout=15)
            try:
                ctx = WT.client_ctx(certs['ca'])
                t = WT.Tls(sock, ctx, 'localhost')
                t.handshake()
                t.sendall(W.frame(W.OP_HELLO, hello, flags=W.F_SYNC))
                h, _ = t.read_frame()
                t2 = WT.Tls(sock, ctx, 'localhost')
                try:
                    t2.handshake()
                    t2.sendall(W.frame(WT.OP_HANDOFF, bytes(16), flags=W.F_SYNC))
                    t2.read_frame()
                except (OSError, ConnectionError, ssl.SSLError):
                    refused = h['op'] == WT.OP_HANDOFF
            finally:
                sock.close()
        out, err = c.communicate(timeout=120)
        check('tls: a TLS peer with a wrong ticket gets no second handshake, and the session goes on',
              key is not None and refused and 'unknown or expired ticket closed' in b.log() and
              c.returncode == 0 and 'counters exact' in out, f'{key} {refused} {(out + err)[-800:]}')
    finally:
        if c.poll() is None:
            c.kill()


def tls_case(exe, ctl, progs, shim, kernels, tmp):
    certs = tls_certs.make_certs(os.path.join(tmp, 'certs'))
    tokens = os.path.join(tmp, 'tokens')
    with open(tokens, 'w') as f:
        f.write(tls_certs.token_line('alice', 'alice-devlist-token'))
    tls = ['--tls-cert', certs['server'], '--tls-key', certs['server_key'], '--auth-tokens', tokens]
    a = Daemon(exe, tmp, 'tlsA', args=tls + ['--peer-tls-ca', certs['ca']])
    b = Daemon(exe, tmp, 'tlsB', args=tls + ['--peer-tls-ca', certs['ca']])
    c = Daemon(exe, tmp, 'tlsC', args=tls + ['--peer-tls-ca', certs['other_ca']])  # trusts nobody here
    try:
        def go(first, name):
            env = client_env(shim, f'tls://127.0.0.1:{first.port},tls://127.0.0.1:{b.port}', name,
                             LUPINE_TLS_CA=certs['ca'], LUPINE_TOKEN='alice-devlist-token')
            return run(progs, kernels, env, 2)
        r = go(a, 'dl-tls')
        m = COPIES.search(r.stdout)
        check('tls: the copies between two TLS servers, every byte checked',
              r.returncode == 0 and m is not None and 'counters exact' in r.stdout, (r.stdout + r.stderr)[-2000:])
        check('tls: A sent them over TLS, B received them over TLS (the peer needed no token)',
              re.search(r'session \.t[0-9a-f]+\.dl-tls: peer copy of \d+ bytes to tls://127\.0\.0\.1:\d+ .* over TLS',
                        a.log()) is not None and
              re.search(r'session \.t[0-9a-f]+\.dl-tls\.p1: peer copy of \d+ bytes received in .* over TLS',
                        b.log()) is not None, a.log()[-1500:] + b.log()[-1500:])
        tls_wrong_ticket(b, ctl, progs, shim, kernels, certs)
        r = go(c, 'dl-tls-bad')
        check('tls: a source that does not trust B\'s certificate fails the copy with the reason',
              r.returncode != 0 and 'between servers failed' in r.stderr and 'certificate' in r.stderr,
              (r.stdout + r.stderr)[-2000:])
    finally:
        for d in (a, b, c):
            d.stop()


def main():
    F.run_cases([('list', list_case), ('retry', retry_case), ('tls', tls_case)], check, 'lupine-devlist-')


if __name__ == '__main__':
    main()
