#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""e2e: hosts sharing one checkpoint store (issue 17, docs/fleet.md).

Usage: test_fleet.py LUPINED LUPINECTL PROGS_DIR SHIM_DIR KERNELS_DIR

Each "host" is a lupined of its own (--host-id) on the simulator, all on
one --checkpoint-dir. The workload is e2e_restart: its counter proves
that no launch was lost or run twice. Cases:
  1. adopt: a session runs on A with LUPINE_SERVER=A,B; A drains for good
     (SIGTERM) while B runs; the client resumes on B, which restores the
     session from the store on demand; the workload ends exact.
  2. split brain: while A runs a session, B refuses a new session of that
     name ("runs on host"), and refuses a resume (a HELLO with a token) for
     it, before and after A checkpoints it; A's session is unharmed.
  3. stale holder: A is stopped (SIGSTOP, "presumed dead") after a
     checkpoint; once A's lease expires B takes the session over and the
     workload ends exact on B; A, continued, finds its lease taken, ends
     its copy without touching the store, and B's session goes on.
  4. two hosts adopt one session: B and C start together on a store that
     holds a drained session; exactly one restores it, the other says
     another host holds its lease; the client ends exact.
  5. the store unavailable: the lease directory is replaced by a file;
     the worker cannot renew, and once the lease is too old no call runs;
     the store comes back, the renewal succeeds, calls run again and the
     workload ends exact.
  6. periodic checkpoints (--checkpoint-interval 1): a running session is
     checkpointed, once more after its last call, then not again while
     idle; after a SIGKILL of A, B adopts it and the client, which did
     nothing since, ends exact. A client that saw calls executed after the
     last checkpoint gets one clear error ("stale checkpoint").
  7. the example provider: a session outlives several lease renewals.
  8. lupinectl migrate: 10 moves between A and B under the workload, its
     LUPINE_SERVER naming A only (B is reached through the GOODBYE's
     endpoint); a move to a target that does not answer brings the
     session back to A; the workload ends exact.

Exit 0 on pass, 1 on failure (naming the case).
"""
import glob
import json
import os
import re
import secrets
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as W  # noqa: E402
from restart_harness import read_line  # noqa: E402

check = W.Checks()
TTL = '7'  # the shortest lease: the stale-holder case waits for it to expire


class Host:
    """One lupined acting as one host of the fleet."""

    def __init__(self, exe, tmp, label, ckdir, port=None, args=()):  # noqa: D107
        self.label = label
        self.port = port or W.free_port()
        self.sock = os.path.join(tmp, f'{label}.sock')
        self.log_path = os.path.join(tmp, f'{label}.log')
        env = dict(os.environ)
        for k in ('LD_LIBRARY_PATH', 'NOTIFY_SOCKET', 'LISTEN_FDS', 'LISTEN_PID', 'LUPINE_CHECKPOINT_LIBRARY'):
            env.pop(k, None)
        self.logf = open(self.log_path, 'ab')
        self.proc = subprocess.Popen(
            [exe, '--backend', 'sim', '--listen', f'127.0.0.1:{self.port}', '--listen', f'unix:{self.sock}',
             '--checkpoint-dir', ckdir, '--host-id', label, '--lease-ttl', TTL, '--session-ttl', '120',
             '--drain-timeout', '30', '--health-policy', 'off'] + list(args),
            stdin=subprocess.DEVNULL, stdout=self.logf, stderr=self.logf, env=env)

    def wait_up(self):
        if not W.wait_port(self.port, self.proc, 20):
            raise RuntimeError(f'{self.label} did not start:\n' + self.log()[-3000:])
        return self

    def log(self):
        with open(self.log_path, 'rb') as f:
            return f.read().decode('utf-8', 'replace')

    def wait_log(self, pattern, timeout=20.0):
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if rx.search(self.log()):
                return True
            time.sleep(0.05)
        return rx.search(self.log()) is not None

    def ctl(self, lupinectl, *args):
        return subprocess.run([lupinectl, '--socket', self.sock] + list(args), capture_output=True, text=True,
                              timeout=60)

    def worker_pid(self, session):
        m = re.findall(r'lupined-worker\[(\d+)\]: info: session ' + re.escape(session) + r': (?:serving|restored)',
                       self.log())
        return int(m[-1]) if m else None

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logf.close()


def client_env(shim, hosts, session):
    env = dict(os.environ)
    env['LUPINE_SERVER'] = '|'.join(f'127.0.0.1:{h.port}' if isinstance(h, Host) else h for h in hosts)  # failover (docs/running.md)
    env['LUPINE_SESSION'] = session
    env['LUPINE_RECONNECT_TIMEOUT'] = '150'
    env['LUPINE_HEARTBEAT_MS'] = '2000'
    env['LD_LIBRARY_PATH'] = shim + (':' + env['LD_LIBRARY_PATH'] if env.get('LD_LIBRARY_PATH') else '')
    return env


def workload(progs, kernels, shim, hosts, session, rounds, hold=None):
    argv = [os.path.join(progs, 'e2e_restart'), kernels, str(rounds), '20'] + ([str(hold)] if hold else [])
    return subprocess.Popen(argv, env=client_env(shim, hosts, session), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_line(client, pattern, timeout=60):
    rx = re.compile(pattern)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = read_line(client.stdout, deadline - time.monotonic())
        if not line:
            return False
        m = rx.match(line)
        if m:
            return m
    return False


def finish(client, timeout=240):
    out, err = client.communicate(timeout=timeout)
    return client.returncode == 0 and 'counter exact' in out, (out + err)[-2500:]


def kill(client):
    if client and client.poll() is None:
        client.kill()
        client.communicate()


def raw_resume(host, name):
    """A HELLO that resumes `name` with a made-up token: (status, message)."""
    nb = name.encode()
    payload = (struct.pack('<IIII', W.MAGIC, W.VERSION, 13000, 0) + struct.pack('<H', len(nb)) + nb +
               secrets.token_bytes(16) + struct.pack('<Q', 0))
    s = W.connect(('127.0.0.1', host.port))
    try:
        s.sendall(W.frame(W.OP_HELLO, payload, flags=W.F_SYNC))
        h, p = W.read_frame(s)
        return h['status'], p.decode('utf-8', 'replace')
    finally:
        s.close()


def adopt_case(exe, ctl, progs, shim, kernels, tmp):
    ck = os.path.join(tmp, 'ck-adopt')
    a = Host(exe, tmp, 'hostA', ck).wait_up()
    b = Host(exe, tmp, 'hostB', ck).wait_up()
    client = None
    try:
        client = workload(progs, kernels, shim, [a, b], 'fleet-job', 300)
        check('adopt: the workload runs on A', bool(wait_line(client, r'round 10 ok')), a.log()[-2000:])
        check('adopt: A holds its lease', a.wait_log(r'session fleet-job: lease claimed by host hostA'),
              a.log()[-2000:])
        a.stop()
        check('adopt: A drained it and released the lease',
              re.search(r'session fleet-job: lease released', a.log()) is not None, a.log()[-3000:])
        ok, text = finish(client)
        check('adopt: the workload ends exact on B', ok, text + b.log()[-3000:])
        check('adopt: B restored it on demand for its client',
              re.search(r'session fleet-job: adopted from the checkpoint store', b.log()) is not None and
              re.search(r'session fleet-job: lease claimed by host hostB', b.log()) is not None, b.log()[-3000:])
        check('adopt: B\'s session ended with its client, its lease released',
              b.wait_log(r'session fleet-job: lease released'), b.log()[-2000:])
    finally:
        kill(client)
        a.stop()
        b.stop()


def split_brain_case(exe, ctl, progs, shim, kernels, tmp):
    ck = os.path.join(tmp, 'ck-split')
    a = Host(exe, tmp, 'splitA', ck).wait_up()
    b = Host(exe, tmp, 'splitB', ck).wait_up()
    client = None
    try:
        client = workload(progs, kernels, shim, [a], 'twin', 200, hold=5)
        check('split: the session holds on A', bool(wait_line(client, r'ready: round 5')), a.log()[-2000:])
        r = subprocess.run([os.path.join(progs, 'e2e_basic')], env=client_env(shim, [b], 'twin'),
                           capture_output=True, text=True, timeout=60)
        check('split: B refuses a new session of that name, naming A',
              r.returncode != 0 and 'session twin runs on host splitA' in (r.stdout + r.stderr),
              (r.stdout + r.stderr)[-1500:])
        status, msg = raw_resume(b, 'twin')
        check('split: B refuses to adopt it while A holds it (no checkpoint yet)',
              status != 0 and 'runs on another host' in msg, f'{status} {msg}')
        r = a.ctl(ctl, 'sessions', 'checkpoint', 'twin')
        check('split: A checkpoints it', r.returncode == 0, r.stdout + r.stderr)
        time.sleep(2.2)  # B's verdict is remembered for 2 s
        status, msg = raw_resume(b, 'twin')
        check('split: B refuses to adopt it with its checkpoint in the store',
              status != 0 and 'runs on another host' in msg, f'{status} {msg}')
        check('split: B\'s worker said who holds it',
              b.wait_log(r'session twin: host splitA holds its lease'), b.log()[-2000:])
        client.stdin.write('go\n')
        client.stdin.flush()
        ok, text = finish(client)
        check('split: A\'s session is unharmed and ends exact', ok, text)
    finally:
        kill(client)
        a.stop()
        b.stop()


def stale_holder_case(exe, ctl, progs, shim, kernels, tmp):
    ck = os.path.join(tmp, 'ck-stale')
    a = Host(exe, tmp, 'staleA', ck).wait_up()
    b = Host(exe, tmp, 'staleB', ck).wait_up()
    client = None
    stopped = []
    try:
        client = workload(progs, kernels, shim, [a, b], 'stale', 200, hold=5)
        check('stale: the session holds on A', bool(wait_line(client, r'ready: round 5')), a.log()[-2000:])
        r = a.ctl(ctl, 'sessions', 'checkpoint', 'stale')
        check('stale: A checkpoints it', r.returncode == 0, r.stdout + r.stderr)
        wpid = a.worker_pid('stale')
        check('stale: A\'s worker is known', wpid is not None, a.log()[-2000:])
        for pid in (a.proc.pid, wpid):
            if pid:
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
        t0 = time.monotonic()
        client.stdin.write('go\n')
        client.stdin.flush()
        ok, text = finish(client)
        check('stale: the workload ends exact on B', ok, text + b.log()[-3000:])
        check('stale: B took it over only after A\'s lease expired',
              re.search(r'session stale: adopted from the checkpoint store', b.log()) is not None and
              time.monotonic() - t0 >= int(TTL) - 2, b.log()[-3000:])
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
        stopped.clear()
        check('stale: A, continued, finds its lease taken and ends its copy',
              a.wait_log(r'session stale: host staleB claimed its lease; ending it here', timeout=30),
              a.log()[-3000:])
        check('stale: A left the store alone',
              re.search(r'session stale: .*(cannot delete its checkpoint|checkpoint epoch \d+ committed)',
                        a.log().split('claimed its lease')[-1]) is None, a.log()[-2000:])
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
        kill(client)
        a.stop()
        b.stop()


def race_case(exe, ctl, progs, shim, kernels, tmp):
    ck = os.path.join(tmp, 'ck-race')
    a = Host(exe, tmp, 'raceA', ck).wait_up()
    client = None
    b = c = None
    try:
        pb, pc = W.free_port(), W.free_port()
        client = workload(progs, kernels, shim, [a, f'127.0.0.1:{pb}', f'127.0.0.1:{pc}'], 'race', 300)
        check('race: the workload runs on A', bool(wait_line(client, r'round 10 ok')), a.log()[-2000:])
        a.stop()
        check('race: A drained it', re.search(r'session race: lease released', a.log()) is not None,
              a.log()[-2000:])
        b = Host(exe, tmp, 'raceB', ck, port=pb)
        c = Host(exe, tmp, 'raceC', ck, port=pc)
        b.wait_up()
        c.wait_up()
        ok, text = finish(client)
        logs = b.log() + c.log()
        won = len(re.findall(r'session race: lease claimed by host race[BC]', logs))
        lost = len(re.findall(r'session race: host race[BC] holds its lease', logs))
        check('race: exactly one of B and C restored it, the other was refused', won == 1 and lost >= 1,
              f'won {won} lost {lost}\n' + logs[-3000:])
        check('race: the workload ends exact', ok, text)
    finally:
        kill(client)
        a.stop()
        for h in (b, c):
            if h:
                h.stop()


def store_down_case(exe, ctl, progs, shim, kernels, tmp):
    ck = os.path.join(tmp, 'ck-down')
    a = Host(exe, tmp, 'downA', ck).wait_up()
    client = None
    leases = os.path.join(ck, '.leases')
    try:
        client = workload(progs, kernels, shim, [a], 'down', 100000)
        check('store down: the workload runs', bool(wait_line(client, r'round 10 ok')), a.log()[-2000:])
        os.rename(leases, leases + '-away')
        with open(leases, 'w') as f:
            f.write('not a directory\n')
        r = a.ctl(ctl, '--json', 'diag')
        rows = json.loads(r.stdout).get('checks', []) if r.stdout.strip().startswith('{') else []
        bad_rows = [x for x in rows if x.get('check') == 'session leases' and x.get('result') == 'fail']
        check('store down: lupinectl diag fails "session leases", with a fix', bool(bad_rows) and
              bool(bad_rows[0].get('fix')), r.stdout[-1500:])
        check('store down: the renewal fails, logged',
              a.wait_log(r'session down: cannot renew its lease', timeout=10), a.log()[-2000:])
        check('store down: once the lease is too old, calls wait',
              a.wait_log(r'session down: its lease was not renewed in time; calls wait', timeout=15),
              a.log()[-2000:])
        while read_line(client.stdout, 1.0):  # what was on its way before the calls stopped
            pass
        line = read_line(client.stdout, 3.0)
        check('store down: no round ends while the lease is not renewed', line is None, repr(line))
        os.unlink(leases)
        os.rename(leases + '-away', leases)
        check('store down: renewed once the store is back, calls run again',
              a.wait_log(r'session down: its lease is renewed; running calls again', timeout=10), a.log()[-2000:])
        check('store down: the workload goes on', bool(wait_line(client, r'round \d+ ok', timeout=20)))
        client.send_signal(signal.SIGTERM)
        client.wait(timeout=30)
        r = subprocess.run([os.path.join(progs, 'e2e_restart'), kernels, '30', '0'],
                           env=client_env(shim, [a], 'down2'), capture_output=True, text=True, timeout=120)
        check('store down: a new session afterwards ends exact', r.returncode == 0 and 'counter exact' in r.stdout,
              (r.stdout + r.stderr)[-1500:])
    finally:
        if os.path.isfile(leases):
            os.unlink(leases)
            os.rename(leases + '-away', leases)
        kill(client)
        a.stop()


def kill_host(h, session):
    """SIGKILL of a whole host: its supervisor and the session's worker."""
    wpid = h.worker_pid(session)
    for pid in (h.proc.pid, wpid):
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    h.proc.wait(timeout=30)


def periodic_case(exe, ctl, progs, shim, kernels, tmp):
    ck = os.path.join(tmp, 'ck-periodic')
    pb = W.free_port()
    a = Host(exe, tmp, 'perA', ck, args=['--checkpoint-interval', '1']).wait_up()
    b = None
    client = None
    try:
        client = workload(progs, kernels, shim, [a, f'127.0.0.1:{pb}'], 'per', 200, hold=8)
        check('periodic: the session holds on A', bool(wait_line(client, r'ready: round 8')), a.log()[-2000:])
        n0 = a.log().count('session per checkpointed (periodic)')
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline and a.log().count('session per checkpointed (periodic)') == n0:
            time.sleep(0.1)
        n1 = a.log().count('session per checkpointed (periodic)')
        check('periodic: A checkpoints it after its last call', n1 == n0 + 1, a.log()[-2000:])
        time.sleep(2.5)
        check('periodic: an idle session is not checkpointed again',
              a.log().count('session per checkpointed (periodic)') == n1, a.log()[-2000:])
        kill_host(a, 'per')
        b = Host(exe, tmp, 'perB', ck, port=pb).wait_up()
        client.stdin.write('go\n')
        client.stdin.flush()
        ok, text = finish(client)
        check('periodic: after a SIGKILL of A, B adopts the last periodic checkpoint; the client had done '
              'nothing since, and ends exact', ok, text + b.log()[-3000:])
    finally:
        kill(client)
        a.stop()
        if b:
            b.stop()


def periodic_stale_case(exe, ctl, progs, shim, kernels, tmp):
    ck = os.path.join(tmp, 'ck-periodic2')
    pb = W.free_port()
    a = Host(exe, tmp, 'per2A', ck).wait_up()
    b = None
    client = None
    try:
        r = a.ctl(ctl, 'config', 'set', 'checkpoint_interval_s', '1')
        check('periodic stale: config set checkpoint_interval_s 1 (periodic checkpoints turned on at run time)',
              r.returncode == 0, r.stdout + r.stderr)
        r = a.ctl(ctl, '--json', 'config', 'show')
        cfg = json.loads(r.stdout) if r.returncode == 0 else {}
        check('periodic stale: config show has the interval, the host id and the lease TTL',
              cfg.get('checkpoint_interval_s') == 1 and cfg.get('host_id') == 'per2A' and
              cfg.get('lease_ttl_s') == int(TTL), r.stdout)
        client = workload(progs, kernels, shim, [a, f'127.0.0.1:{pb}'], 'per2', 100000)
        check('periodic stale: the workload runs on A', bool(wait_line(client, r'round 10 ok')), a.log()[-2000:])
        check('periodic stale: A checkpoints it while it runs',
              a.wait_log(r'session per2 checkpointed \(periodic\)', timeout=10), a.log()[-2000:])
        kill_host(a, 'per2')
        b = Host(exe, tmp, 'per2B', ck, port=pb).wait_up()
        out, err = client.communicate(timeout=120)
        check('periodic stale: the client, which saw calls executed after that checkpoint, gets one clear '
              'error', client.returncode != 0 and 'stale checkpoint' in err, (out + err)[-2000:] + b.log()[-2000:])
    finally:
        kill(client)
        a.stop()
        if b:
            b.stop()


def migrate_case(exe, ctl, progs, shim, kernels, tmp):
    """lupinectl migrate, 10 times between A and B under a verified
    workload whose LUPINE_SERVER names A only (B is reached through the
    GOODBYE's endpoint); then a migration to a target that does not
    answer: the session comes back to A."""
    ck = os.path.join(tmp, 'ck-migrate')
    a = Host(exe, tmp, 'migA', ck).wait_up()
    b = Host(exe, tmp, 'migB', ck).wait_up()
    client = None
    try:
        for h in (a, b):  # periodic checkpoints all along: they must not hold a migration up
            r = h.ctl(ctl, 'config', 'set', 'checkpoint_interval_s', '1')
            check(f'migrate: periodic checkpoints on {h.label}', r.returncode == 0, r.stdout + r.stderr)
        client = workload(progs, kernels, shim, [a], 'mover', 1200)
        check('migrate: the workload runs on A', bool(wait_line(client, r'round 10 ok')), a.log()[-2000:])
        hosts = [a, b]
        moves_ok = True
        for i in range(10):
            src, dst = hosts[i % 2], hosts[(i + 1) % 2]
            before = dst.log().count('session mover: adopted from the checkpoint store')
            r = src.ctl(ctl, '--json', 'migrate', 'mover', '--to', f'127.0.0.1:{dst.port}')
            rep = json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else {}
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and \
                    dst.log().count('session mover: adopted from the checkpoint store') == before:
                time.sleep(0.05)
            adopted = dst.log().count('session mover: adopted from the checkpoint store') > before
            if not (rep.get('state') == 'done' and rep.get('bytes', 0) > 0 and adopted):
                moves_ok = False
                check(f'migrate: move {i + 1} {src.label} -> {dst.label}', False,
                      r.stdout + r.stderr + src.log()[-1500:] + dst.log()[-1500:])
                break
        check('migrate: 10 moves back and forth, each checkpointed by the source and adopted by the target',
              moves_ok)
        for argv, want in ((['migrate', 'nobody', '--to', f'127.0.0.1:{b.port}'], 'no session nobody'),
                           (['migrate', 'mover', '--to', 'not an endpoint'], 'is not an endpoint'),
                           (['migrate', 'mover', '--to', f'127.0.0.1:{b.port},127.0.0.1:{a.port}'],
                            'expected "NAME TARGET"'),
                           (['migrate', 'mover'], 'usage: lupinectl migrate')):
            r = a.ctl(ctl, *argv)
            check(f'migrate: refused with the reason: {" ".join(argv[1:])}', r.returncode != 0 and want in r.stderr,
                  r.stdout + r.stderr)
        r = a.ctl(ctl, 'migrate', 'mover', '--to', f'127.0.0.1:{W.free_port()}')
        check('migrate: to a target that does not answer: the source checkpoints it anyway', r.returncode == 0,
              r.stdout + r.stderr)
        check('migrate: ... and takes the session back when its client returns',
              a.wait_log(r'session mover: adopted from the checkpoint store', timeout=60), a.log()[-2000:])
        ok, text = finish(client, timeout=300)
        check('migrate: the workload ends exact', ok, text)
        check('migrate: the client was sent to B, which its LUPINE_SERVER does not name, by the GOODBYE',
              f'the session moves to 127.0.0.1:{b.port}' in text, text[-1500:])
        m = subprocess.run([ctl, '--socket', a.sock, 'status'], capture_output=True, text=True, timeout=30)
        check('migrate: lupinectl status still answers on A', m.returncode == 0, m.stderr)
    finally:
        kill(client)
        a.stop()
        b.stop()


def example_renew_case(exe, ctl, progs, shim, kernels, tmp):
    """The example provider (leases in memory): a session that outlives
    several renewals keeps its lease (the renewing thread's own instance
    sees the main instance's leases)."""
    prov = sorted(glob.glob(os.path.join(progs, 'providers', 'liblupine-example-provider.so*')))
    check('example provider: built', bool(prov))
    if not prov:
        return
    port = W.free_port()
    logp = os.path.join(tmp, 'example.log')
    env = {k: v for k, v in os.environ.items() if k not in ('LD_LIBRARY_PATH', 'NOTIFY_SOCKET', 'LISTEN_FDS')}
    with open(logp, 'ab') as log:
        d = subprocess.Popen([exe, '--backend', 'sim', '--listen', f'127.0.0.1:{port}', '--checkpoint-provider',
                              prov[0], '--checkpoint-config', '256,reserve', '--lease-ttl', TTL], stdout=log,
                             stderr=log, env=env)
    try:
        check('example provider: lupined starts', W.wait_port(port, d, 20))
        r = subprocess.run([os.path.join(progs, 'e2e_restart'), kernels, '300', '20'],
                           env=client_env(shim, [f'127.0.0.1:{port}'], 'ex-renew'), capture_output=True, text=True,
                           timeout=120)
        deadline = time.monotonic() + 15  # the worker releases the lease as it ends, after its client
        while True:
            with open(logp) as f:
                text = f.read()
            if 'lease released' in text or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        check('example provider: a session through several renewals ends exact, its lease kept',
              r.returncode == 0 and 'counter exact' in r.stdout and 'claimed its lease' not in text and
              'lease released' in text, (r.stdout + r.stderr)[-1500:] + text[-1500:])
    finally:
        d.terminate()
        d.wait(timeout=60)


def run_cases(cases, checks, prefix):
    """The driver of a fleet test: argv is LUPINED LUPINECTL PROGS_DIR
    SHIM_DIR KERNELS_DIR [CASE...]; runs the cases named (all by default),
    each in a fresh temporary directory's scope, and exits 0 or 1."""
    exe, ctl, progs, shim, kernels = sys.argv[1:6]
    only = sys.argv[6:]
    tmp = tempfile.mkdtemp(prefix=prefix)
    try:
        for name, fn in cases:
            if only and name not in only:
                continue
            print(f'== {name}', flush=True)
            try:
                fn(exe, ctl, progs, shim, kernels, tmp)
            except Exception as e:  # noqa: BLE001 - a case that raised has failed
                checks(f'{name}: ran without an exception', False, repr(e))
    finally:
        if checks.failed:
            print(f'logs kept in {tmp}')
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(1 if checks.failed else 0)


def main():
    run_cases([('adopt', adopt_case), ('split', split_brain_case), ('stale', stale_holder_case),
               ('race', race_case), ('store-down', store_down_case), ('periodic', periodic_case),
               ('periodic-stale', periodic_stale_case), ('example-renew', example_renew_case),
               ('migrate', migrate_case)], check, 'lupine-fleet-')


if __name__ == '__main__':
    main()
