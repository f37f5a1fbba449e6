#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""e2e: one device list across servers (issue 17, item 1; docs/running.md,
"Several servers").

Usage: test_devlist.py LUPINED LUPINECTL PROGS_DIR SHIM_DIR KERNELS_DIR

Two lupined on the simulator, A and B, each with a checkpoint directory of
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
  5. failover: 'A|B' is one server with an alternative: one device.

Exit 0 on pass, 1 on failure (naming the case).
"""
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as W  # noqa: E402
import test_fleet as F  # noqa: E402
from restart_harness import read_line  # noqa: E402

check = W.Checks()


class Daemon(F.Host):
    """A lupined of its own (no shared store); log() and stop() are Host's."""

    def __init__(self, exe, tmp, label, port=None):  # noqa: D107 - Host's __init__ is not called
        self.exe, self.tmp, self.label = exe, tmp, label
        self.port = port or W.free_port()
        self.sock = os.path.join(tmp, f'{label}.sock')
        self.ck = os.path.join(tmp, f'ck-{label}')
        self.log_path = os.path.join(tmp, f'{label}.log')
        self.start()

    def start(self):
        env = {k: v for k, v in os.environ.items() if k not in ('NOTIFY_SOCKET', 'LISTEN_FDS', 'LISTEN_PID')}
        self.logf = open(self.log_path, 'ab')
        self.proc = subprocess.Popen(
            [self.exe, '--backend', 'sim', '--listen', f'127.0.0.1:{self.port}', '--listen', f'unix:{self.sock}',
             '--checkpoint-dir', self.ck, '--session-ttl', '120', '--drain-timeout', '30', '--health-policy', 'off'],
            stdin=subprocess.DEVNULL, stdout=self.logf, stderr=self.logf, env=env)
        if not W.wait_port(self.port, self.proc, 20):
            raise RuntimeError(f'{self.label} did not start')
        return self

    def slot(self, ctl, name):
        r = subprocess.run([ctl, '--socket', self.sock, '--json', 'status'], capture_output=True, text=True,
                           timeout=30)
        try:
            js = json.loads(r.stdout)
        except ValueError:
            return None
        return next((s.get('slot') for s in js.get('sessions', []) if s.get('name') == name), None)


def run(progs, kernels, env, rounds, ms=0, timeout=120):
    return subprocess.run([os.path.join(progs, 'e2e_devlist'), kernels, str(rounds), str(ms)], env=env,
                          capture_output=True, text=True, timeout=timeout)


def client_env(shim, servers, session, **extra):
    env = F.client_env(shim, [], session)
    env['LUPINE_SERVER'] = servers
    env.update(extra)
    return env


def list_case(exe, ctl, progs, shim, kernels, tmp):
    sim = os.environ.get('LUPINE_SIM_LIBRARY')
    if sim:  # the local driver first: the simulator itself, one device
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(sim))
        env.pop('LUPINE_SERVER', None)
        r = run(progs, kernels, dict(env, LD_PRELOAD=sim), 3)
        check('list: the program on the local (simulated) driver', r.returncode == 0 and 'devices 1' in r.stdout,
              (r.stdout + r.stderr)[-1500:])
    a = Daemon(exe, tmp, 'listA')
    b = Daemon(exe, tmp, 'listB')
    try:
        servers = f'127.0.0.1:{a.port},127.0.0.1:{b.port}'
        c = subprocess.Popen([os.path.join(progs, 'e2e_devlist'), kernels, '30', '100'],
                             env=client_env(shim, servers, 'dl-job'), stdout=subprocess.PIPE,
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
        out, err = c.communicate(timeout=240)
        check('restart: the program ends exact on both servers after B restarted',
              c.returncode == 0 and 'counters exact' in out, (text + out + err)[-2500:])
        check('restart: B restored the session', 'session dl-job.p1: restored' in b.log(), b.log()[-2000:])
        check('copies between the servers\' memory are refused, not run through the client (not yet: item 2)',
              'copies between servers: CUDA_ERROR_NOT_SUPPORTED' in out and 'not supported yet' in err,
              (out + err)[-1500:])
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
        r = run(progs, kernels, client_env(shim, f'127.0.0.1:{a.port}|127.0.0.1:{b.port}', 'dl-alt'), 2)
        check('failover: A|B is one server: one device, its name unchanged',
              r.returncode == 0 and 'devices 1' in r.stdout and ' on 127.0.0.1' not in r.stdout,
              (r.stdout + r.stderr)[-1500:])
    finally:
        a.stop()
        b.stop()


def main():
    F.run_cases([('list', list_case)], check, 'lupine-devlist-')


if __name__ == '__main__':
    main()
