#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""e2e: the GPU health watch (issue 18, docs/health.md) on the simulator.

Usage: test_health.py LUPINED LUPINECTL PROGS_DIR SHIM_DIR KERNELS_DIR

Faults come from the simulator's fault file (LUPINE_SIM_FAULTS) and, for
a hung worker, from SIGSTOP. Cases:
  1. thermal limit: a verified workload (e2e_restart, exactly-once
     counter) runs on host A with LUPINE_SERVER=A,B; the GPU gets hot; A
     raises the alarm, stops admitting (a new session is refused with the
     reason; lupinectl status, --json and the metrics say so), drains the
     session to a durable checkpoint, and tells its client "moved"; host B,
     started on the same checkpoint store, restores it and the workload
     ends exact. The GPU cools: A admits again.
  2. each other fault (ECC, retired pages, row remaps, lost GPU, a listed
     Xid) drains a running session with its checkpoint; an Xid not listed
     raises nothing.
  3. a worker stopped with SIGSTOP is found not answering (status shows
     it), its GPU goes into alarm, and once it runs again it is drained
     with its checkpoint.
  4. --health-policy report: an alarm, no drain, sessions still admitted.
  5. under a service manager (tests/e2e/sdharness.py), STATUS= says when
     the host stops admitting and why, and when it admits again.

Exit 0 on pass, 1 on failure (naming the case).
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as W  # noqa: E402
from restart_harness import read_line  # noqa: E402
from sdharness import ServiceManager  # noqa: E402

check = W.Checks()
FAST = ['--health-interval', '200', '--health-retries', '2', '--health-timeout', '600']


class Daemon:
    def __init__(self, exe, tmp, label, ckdir, faults, args=(), port=None):  # noqa: D107
        """port: one chosen before (a client's list names it), or a free one."""
        self.port = port or W.free_port()
        self.sock = os.path.join(tmp, f'{label}.sock')
        self.log_path = os.path.join(tmp, f'{label}.log')
        self.mport = W.free_port()
        env = dict(os.environ)
        for k in ('LD_LIBRARY_PATH', 'NOTIFY_SOCKET', 'LISTEN_FDS', 'LISTEN_PID', 'LUPINE_CHECKPOINT_LIBRARY'):
            env.pop(k, None)
        env['LUPINE_SIM_FAULTS'] = faults
        self.logf = open(self.log_path, 'ab')
        self.proc = subprocess.Popen(
            [exe, '--backend', 'sim', '--listen', f'127.0.0.1:{self.port}', '--listen', f'unix:{self.sock}',
             '--checkpoint-dir', ckdir, '--session-ttl', '120', '--drain-timeout', '30',
             '--metrics', f'127.0.0.1:{self.mport}'] + FAST + list(args),
            stdin=subprocess.DEVNULL, stdout=self.logf, stderr=self.logf, env=env)
        if not W.wait_port(self.port, self.proc, 20):
            raise RuntimeError(f'{label} did not start:\n' + self.log()[-3000:])

    def log(self):
        with open(self.log_path, 'rb') as f:
            return f.read().decode('utf-8', 'replace')

    def wait_log(self, pattern, timeout=20.0, count=1):
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(rx.findall(self.log())) >= count:
                return True
            time.sleep(0.05)
        return len(rx.findall(self.log())) >= count

    def ctl(self, lupinectl, *args):
        return subprocess.run([lupinectl, '--socket', self.sock] + list(args), capture_output=True, text=True,
                              timeout=30)

    def status(self, lupinectl):
        r = self.ctl(lupinectl, '--json', 'status')
        return json.loads(r.stdout) if r.returncode == 0 else None

    def metrics(self):
        with urllib.request.urlopen(f'http://127.0.0.1:{self.mport}/metrics', timeout=10) as r:
            return r.read().decode()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def client_env(shim, servers, session):
    env = dict(os.environ)
    env['LUPINE_SERVER'] = servers
    env['LUPINE_SESSION'] = session
    env['LUPINE_RECONNECT_TIMEOUT'] = '120'
    env['LD_LIBRARY_PATH'] = shim + (':' + env['LD_LIBRARY_PATH'] if env.get('LD_LIBRARY_PATH') else '')
    return env


def workload(progs, kernels, shim, servers, session, rounds):
    return subprocess.Popen([os.path.join(progs, 'e2e_restart'), kernels, str(rounds), '20'],
                            env=client_env(shim, servers, session), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def wait_round(client, n=10, timeout=60):
    """Waits for the workload's 'round N ok' line (at least the n-th)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = read_line(client.stdout, deadline - time.monotonic())
        if not line:
            return False
        m = re.match(r'round (\d+) ok', line)
        if m and int(m.group(1)) >= n:
            return True
    return False


def wait_watched(d, ctl, timeout=10):
    """Waits until the watch has looked at GPU 0 (its first look is the
    baseline: ECC errors it finds then are old ones)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        h, g = gpu0(d.status(ctl))
        if g.get('state') == 'ok':
            return True
        time.sleep(0.1)
    return False


def fault(path, text):
    with open(path, 'w') as f:
        f.write(text)


def gpu0(st):
    h = (st or {}).get('health') or {}
    gpus = h.get('gpus') or [{}]
    return h, gpus[0]


def thermal_case(a_exe, ctl, progs, shim, kernels, tmp):
    ck = os.path.join(tmp, 'ck-thermal')
    fa, fb = os.path.join(tmp, 'faults-a'), os.path.join(tmp, 'faults-b')
    fault(fa, '')
    fault(fb, '')
    a = Daemon(a_exe, tmp, 'thermal-a', ck, fa)
    b = None
    port_b = W.free_port()
    client = None
    try:
        deadline = time.monotonic() + 5  # the first check comes with the first tick
        while time.monotonic() < deadline:
            st = a.status(ctl)
            h, g = gpu0(st)
            if g:
                break
            time.sleep(0.1)
        check('thermal: status has health, ok and admitting',
              h.get('policy') == 'drain' and h.get('admitting') is True and g.get('state') == 'ok', str(h))
        client = workload(progs, kernels, shim, f'127.0.0.1:{a.port}|127.0.0.1:{port_b}', 'hot-job', 400)
        check('thermal: workload runs on A', wait_round(client, 10), a.log()[-2000:])
        fault(fa, '0 temperature=95\n')
        check('thermal: alarm raised', a.wait_log(r'GPU 0: health alarm: temperature 95 C reached --thermal-limit 90 C'),
              a.log()[-2000:])
        check('thermal: session drained with its checkpoint', a.wait_log(r'session hot-job checkpointed'),
              a.log()[-3000:])
        st = a.status(ctl)
        h, g = gpu0(st)
        check('thermal: status json: alarm, not admitting, one drained',
              g.get('state') == 'alarm' and 'temperature 95 C' in g.get('why', '') and h.get('admitting') is False
              and h.get('drained') == 1, str(h))
        r = a.ctl(ctl, 'status')
        check('thermal: status text says so', 'NOT ADMITTING' in r.stdout and 'GPU 0 alarm: temperature 95 C' in r.stdout,
              r.stdout)
        time.sleep(1.2)  # the metrics are rebuilt every second
        m = a.metrics()
        check('thermal: metrics', 'lupine_gpu_healthy{gpu="0"} 0' in m and 'lupine_admitting 0' in m
              and 'lupine_health_drained_sessions_total 1' in m and 'lupine_gpu_health_alarms_total{gpu="0"} 1' in m
              and 'lupine_checkpoints_total 1' in m and 'lupine_drains_total 0' in m
              and re.search(r'^lupine_checkpoint_bytes_total [1-9]', m, re.M) is not None
              and re.search(r'^lupine_checkpoint_seconds_total (?!0\.000$)[0-9.]+$', m, re.M) is not None,
              '\n'.join(x for x in m.splitlines() if 'health' in x or 'admitting' in x or 'checkpoint' in x))
        r = subprocess.run([os.path.join(progs, 'e2e_basic')], env=client_env(shim, f'127.0.0.1:{a.port}', 'newcomer'),
                           capture_output=True, text=True, timeout=60)
        check('thermal: a new session is refused with the reason',
              r.returncode != 0 and 'not admitting new sessions: GPU 0 is unhealthy' in (r.stderr + r.stdout),
              (r.stderr + r.stdout)[-1500:])
        check('thermal: its client was told moved, not gone', a.wait_log(r'moved off this host by its GPU health watch'),
              a.log()[-2000:])
        # host B shares the store and restores the session at its start
        b = Daemon(a_exe, tmp, 'thermal-b', ck, fb, port=port_b)
        out, err = client.communicate(timeout=240)
        check('thermal: the workload ends exact on B', client.returncode == 0 and 'counter exact' in out,
              (out + err)[-2000:] + b.log()[-2000:])
        check('thermal: B restored it', re.search(r'session hot-job restored', b.log()) is not None, b.log()[-2000:])
        fault(fa, '')
        check('thermal: A admits again once the GPU cools',
              a.wait_log(r'GPU 0 passes its health checks again .*admitting sessions again'), a.log()[-2000:])
        st = a.status(ctl)
        h, g = gpu0(st)
        check('thermal: status ok again', g.get('state') == 'ok' and h.get('admitting') is True, str(h))
        r = subprocess.run([os.path.join(progs, 'e2e_basic')], env=client_env(shim, f'127.0.0.1:{a.port}', 'later'),
                           capture_output=True, text=True, timeout=60)
        check('thermal: a new session is admitted again', r.returncode == 0, (r.stderr + r.stdout)[-1500:])
    finally:
        if client and client.poll() is None:
            client.kill()
            client.communicate()
        a.stop()
        if b:
            b.stop()


def each_fault_case(exe, ctl, progs, shim, kernels, tmp):
    ck = os.path.join(tmp, 'ck-faults')
    f = os.path.join(tmp, 'faults-each')
    fault(f, '')
    d = Daemon(exe, tmp, 'faults', ck, f)
    try:
        cases = [('ecc', '0 ecc_uncorrected=2\n', r'2 new uncorrectable ECC error'),
                 ('retired', '0 retired_pending=1\n', r'retired pages are pending'),
                 ('remap', '0 remapped_pending=1\n', r'row remapping is pending'),
                 ('lost', '0 lost\n', r'NVML says GPU 0 is lost'),
                 ('xid', '0 xid=79\n', r'Xid 79')]
        for i, (label, text, why) in enumerate(cases):
            name = f'fault-{label}'
            c = workload(progs, kernels, shim, f'127.0.0.1:{d.port}', name, 100000)
            ok = wait_round(c, 10) and wait_watched(d, ctl)
            check(f'{label}: workload runs', ok, d.log()[-1500:])
            fault(f, text)
            check(f'{label}: alarm', d.wait_log(r'GPU 0: health alarm: ' + why, count=1), d.log()[-2000:])
            check(f'{label}: session drained with its checkpoint', d.wait_log(rf'session {name} checkpointed'),
                  d.log()[-2000:])
            c.kill()
            c.communicate()
            fault(f, '')
            if label == 'xid':  # held --health-xid-hold; not waited for here
                continue
            check(f'{label}: cleared', d.wait_log(r'GPU 0 passes its health checks again', count=i + 1),
                  d.log()[-2000:])
        check('xid: lines counted once', len(re.findall(r'GPU 0: Xid 79$', d.log(), re.M)) == 1, d.log()[-1500:])
    finally:
        d.stop()
    # an Xid that is not in --health-xids: logged, no alarm
    f2 = os.path.join(tmp, 'faults-xid13')
    fault(f2, '')
    d = Daemon(exe, tmp, 'xid13', os.path.join(tmp, 'ck-xid13'), f2)
    try:
        fault(f2, '0 xid=13\n')
        check('xid 13: logged, not listed', d.wait_log(r'Xid 13 \(not in --health-xids: no alarm\)'), d.log()[-1500:])
        time.sleep(1.0)
        check('xid 13: no alarm', 'health alarm' not in d.log(), d.log()[-1500:])
    finally:
        d.stop()


def hung_worker_case(exe, ctl, progs, shim, kernels, tmp):
    f = os.path.join(tmp, 'faults-hung')
    fault(f, '')
    d = Daemon(exe, tmp, 'hung', os.path.join(tmp, 'ck-hung'), f)
    c = None
    try:
        c = workload(progs, kernels, shim, f'127.0.0.1:{d.port}', 'hung-job', 100000)
        check('hung: workload runs', wait_round(c, 10), d.log()[-1500:])
        st = d.status(ctl)
        pid = next((x['pid'] for x in (st or {}).get('sessions', []) if x['name'] == 'hung-job'), 0)
        check('hung: its worker is listed', pid > 0, str(st))
        os.kill(pid, signal.SIGSTOP)
        try:
            check('hung: found not answering', d.wait_log(rf'worker {pid} \(session hung-job\) has sent no heartbeat'),
                  d.log()[-1500:])
            st = d.status(ctl)
            se = next((x for x in (st or {}).get('sessions', []) if x['name'] == 'hung-job'), {})
            check('hung: status says unresponsive', se.get('unresponsive') is True, str(se))
            check('hung: its GPU in alarm',
                  d.wait_log(rf'GPU 0: health alarm: worker {pid} \(session hung-job\) on it does not answer'),
                  d.log()[-1500:])
        finally:
            os.kill(pid, signal.SIGCONT)
        check('hung: drained with its checkpoint once it runs', d.wait_log(r'session hung-job checkpointed'),
              d.log()[-2000:])
    finally:
        if c and c.poll() is None:
            c.kill()
            c.communicate()
        d.stop()


def report_case(exe, ctl, progs, shim, kernels, tmp):
    f = os.path.join(tmp, 'faults-report')
    fault(f, '')
    d = Daemon(exe, tmp, 'report', os.path.join(tmp, 'ck-report'), f, ['--health-policy', 'report'])
    c = None
    try:
        c = workload(progs, kernels, shim, f'127.0.0.1:{d.port}', 'report-job', 60)
        check('report: workload runs', wait_round(c, 10), d.log()[-1500:])
        fault(f, '0 temperature=99\n')
        check('report: alarm logged', d.wait_log(r'GPU 0: health alarm: temperature 99 C.*--health-policy report'),
              d.log()[-1500:])
        st = d.status(ctl)
        h, g = gpu0(st)
        check('report: alarm, still admitting', g.get('state') == 'alarm' and h.get('admitting') is True, str(h))
        out, err = c.communicate(timeout=120)
        check('report: the workload ends undisturbed', c.returncode == 0 and 'counter exact' in out
              and 'checkpointed' not in d.log(), (out + err)[-1500:])
    finally:
        if c and c.poll() is None:
            c.kill()
            c.communicate()
        d.stop()


def notify_case(exe, ctl, progs, shim, kernels, tmp):
    """sd_notify's STATUS= says when the host stops admitting, and when it
    admits again."""
    f = os.path.join(tmp, 'faults-notify')
    fault(f, '')
    env = dict(os.environ, LUPINE_SIM_FAULTS=f)
    env.pop('LD_LIBRARY_PATH', None)
    port = W.free_port()
    with ServiceManager([exe, '--backend', 'sim', '--listen', f'127.0.0.1:{port}', '--checkpoint-dir',
                         os.path.join(tmp, 'ck-notify')] + FAST, tmp, env=env,
                        log_path=os.path.join(tmp, 'notify.log')) as sm:
        sm.start()
        check('notify: READY=1', sm.wait_for('READY', '1', timeout=20) is not None, sm.log()[-1500:])

        def status_has(text, timeout=20):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                st = [m.get('STATUS', '') for m in sm.notifications('STATUS')]
                if st and text(st[-1]):
                    return st[-1]
                time.sleep(0.1)
            return None

        fault(f, '0 lost\n')
        got = status_has(lambda t: 'NOT ADMITTING: GPU 0 is unhealthy: NVML says GPU 0 is lost' in t)
        check('notify: STATUS= says it does not admit, and why', got is not None,
              str([m.get('STATUS') for m in sm.notifications('STATUS')][-3:]))
        fault(f, '')
        got = status_has(lambda t: t.startswith('serving') and 'NOT ADMITTING' not in t)
        check('notify: STATUS= back to serving once the GPU passes', got is not None,
              str([m.get('STATUS') for m in sm.notifications('STATUS')][-3:]))
        sm.stop()


def main():
    if len(sys.argv) != 6:
        print(__doc__)
        return 2
    exe, ctl, progs, shim, kernels = sys.argv[1:6]
    with tempfile.TemporaryDirectory(prefix='lupine-health-') as tmp:
        for case in (thermal_case, each_fault_case, hung_worker_case, report_case, notify_case):
            try:
                case(exe, ctl, progs, shim, kernels, tmp)
            except Exception as e:  # a case that breaks must not hide the others
                check(f'{case.__name__} ran', False, repr(e))
    if check.failed:
        print(f'health: FAIL {len(check.failed)}: ' + ', '.join(check.failed))
        return 1
    print('health: all passed')
    return 0


if __name__ == '__main__':
    sys.exit(main())
