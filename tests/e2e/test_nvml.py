#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""e2e: lupine's libnvidia-ml.so.1 against lupined on the simulator.

usage: test_nvml.py LUPINED PROGS_DIR SHIM_DIR SPEC

- every function of abi/nvml_api.spec is exported, and nothing else;
- the C program e2e_nvml: every answered family on 4 simulated devices, over
  TCP and UNIX sockets; the same device list (names, UUIDs) as libcuda.so.1;
- NVML clients take no session slot (--max-sessions 1, the one slot held);
- the sessions' workers are the running processes;
- pynvml through the shim (when pynvml is installed: nvidia-ml-py);
- a malformed NVML request is closed with a logged reason;
- an NVML client across a daemon restart reconnects, or, with no daemon
  back in time, fails cleanly with NVML_ERROR_GPU_IS_LOST.
"""
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as W  # noqa: E402
from run_e2e import Daemon as _Daemon  # noqa: E402

check = W.Checks()
OP_NVML = 6
NVML_MAGIC = 0x4C4E5631
NVML_VERSION = 2  # abi/lupine/nvml_wire.h


class Daemon(_Daemon):
    """run_e2e's daemon, with extra command-line arguments."""

    def __init__(self, lupined, tmp, env_extra, tag, args=(), backend='sim'):
        self.backend = backend
        self.port = W.free_port()
        self.unix = os.path.join(tmp, f'{tag}.sock')
        self.log_path = os.path.join(tmp, f'lupined-{tag}.log')
        env = dict(os.environ)
        env.pop('LD_LIBRARY_PATH', None)
        env.update(env_extra)
        self.log = open(self.log_path, 'a+')
        self.proc = subprocess.Popen([lupined, '--backend', backend, '--listen', f'127.0.0.1:{self.port}',
                                      '--listen', f'unix:{self.unix}', '--log-level', 'debug'] + list(args),
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env)
        if not W.wait_port(self.port, self.proc, 15):
            raise RuntimeError('lupined did not start:\n' + self.text())


def nvml_env(shim, server, extra=None):
    env = dict(os.environ)
    env['LUPINE_SERVER'] = server
    env['LD_LIBRARY_PATH'] = shim + (':' + env['LD_LIBRARY_PATH'] if env.get('LD_LIBRARY_PATH') else '')
    env.update(extra or {})
    return env


def test_symbols(shim, spec):
    names, internal = [], []
    with open(spec) as f:
        for line in f:
            line = line.split('#', 1)[0].split()
            if line:
                (internal if line[1:] == ['internal'] else names).append(line[0])
    out = subprocess.run(['nm', '-D', '--defined-only', os.path.join(shim, 'libnvidia-ml.so.1')],
                         capture_output=True, text=True).stdout
    exported = sorted(ln.split()[-1] for ln in out.splitlines() if ln.strip())
    check('the shim is marked as lupine\'s', 'lupine_nvml_shim_version' in exported)
    exported = [n for n in exported if n != 'lupine_nvml_shim_version']
    check('the spec lists nvml.h 580 (398 functions)', len(names) == 398, str(len(names)))
    check('the spec adds nvidia-smi\'s private entry point', internal == ['nvmlInternalGetExportTable'], str(internal))
    names += internal
    check('libnvidia-ml.so.1 exports exactly the spec\'s functions (and its marker)', exported == sorted(names),
          str(set(exported) ^ set(names))[:300])
    for n in ('nvmlInit', 'nvmlInit_v2', 'nvmlDeviceGetCount', 'nvmlDeviceGetCount_v2',
              'nvmlDeviceGetHandleByIndex_v2', 'nvmlDeviceGetPciInfo_v3', 'nvmlDeviceGetComputeRunningProcesses_v3'):
        check(f'{n} exported', n in exported)


def run(progs, args, env, timeout=60):
    return subprocess.run([os.path.join(progs, 'e2e_nvml')] + args, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_queries(d, progs, shim):
    for server in (f'127.0.0.1:{d.port}', f'unix:{d.unix}'):
        r = run(progs, ['query', '4'], nvml_env(shim, server))
        check(f'e2e_nvml query 4 via {server.split(":")[0]}', r.returncode == 0 and 'PASSED' in r.stdout,
              r.stdout[-800:] + r.stderr[-1500:])
    r = run(progs, ['query', '4'], nvml_env(shim, f'unix:{d.unix}'))
    check('stubs log their name once', r.stderr.count('nvmlDeviceGetSupportedMemoryClocks is not supported') == 4 or
          r.stderr.count('nvmlDeviceGetSupportedMemoryClocks is not supported') == 1, r.stderr[-600:])
    r = run(progs, ['internal'], nvml_env(shim, f'unix:{d.unix}'))
    check('nvidia-smi\'s internal table: handles, processes, PCIe generation, zeroed counts',
          r.returncode == 0 and 'PASSED' in r.stdout and r.stdout.count('internal slots ok') == 4,
          r.stdout[-800:] + r.stderr[-800:])
    r = run(progs, ['cuda'], nvml_env(shim, f'unix:{d.unix}'))
    check('NVML and CUDA list the same devices (names, UUIDs, order)',
          r.returncode == 0 and 'PASSED' in r.stdout and r.stdout.count('device ') == 4,
          r.stdout[-800:] + r.stderr[-800:])
    # the last run's worker must be gone first: its process would be counted
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and \
            len(re.findall(r'worker \d+ for session \S+ exited', d.text())) < d.text().count(' served by worker '):
        time.sleep(0.05)
    r = run(progs, ['fresh'], nvml_env(shim, f'unix:{d.unix}'))
    check('a context made right after an NVML snapshot is in the next process list (PyTorch\'s order)',
          r.returncode == 0 and 'PASSED' in r.stdout and 'before the context 0, after 1' in r.stdout,
          r.stdout[-800:] + r.stderr[-800:])


def test_no_slot(d, progs, shim):
    deadline = time.time() + 10
    while True:   # the only session slot, once the `cuda` run's session has ended
        try:
            s, _, _ = W.handshake(d.unix, 'nvml-holder')
            break
        except RuntimeError:
            if time.time() > deadline:
                raise
            time.sleep(0.2)
    try:
        s2 = W.connect(d.unix)
        s2.sendall(W.frame(W.OP_HELLO, W.hello_payload('nvml-second'), flags=W.F_SYNC))
        h, _ = W.read_frame(s2)
        s2.close()
        check('the one session slot is taken', h['status'] != 0)
        r = run(progs, ['query', '4'], nvml_env(shim, f'unix:{d.unix}'))
        check('an NVML client needs no session slot', r.returncode == 0 and 'PASSED' in r.stdout,
              r.stdout[-500:] + r.stderr[-800:])
        time.sleep(1.1)  # past the supervisor's 1 s cache
        procs = pynvml_run(shim, d, 'h=N.nvmlDeviceGetHandleByIndex(0)\n'
                           'print("PROCS", len(N.nvmlDeviceGetComputeRunningProcesses(h)))')
        if procs is not None:
            check('the session\'s worker is a running process of device 0', 'PROCS 1' in procs, procs[-500:])
    finally:
        s.sendall(W.frame(W.OP_GOODBYE))
        s.close()


PYNVML_HEAD = 'import pynvml as N\nN.nvmlInit()\n'


def have_pynvml():
    return subprocess.run([sys.executable, '-c', 'import pynvml'], capture_output=True).returncode == 0


def pynvml_run(shim, d, body, extra=None):
    if not have_pynvml():
        return None
    r = subprocess.run([sys.executable, '-c', PYNVML_HEAD + body], env=nvml_env(shim, f'unix:{d.unix}', extra),
                       capture_output=True, text=True, timeout=60)
    return r.stdout + r.stderr


def test_pynvml(d, shim):
    if not have_pynvml():
        print('SKIP pynvml: not installed (pip install nvidia-ml-py)')
        return
    out = pynvml_run(shim, d, '''
n = N.nvmlDeviceGetCount()
print("COUNT", n)
for i in range(n):
    h = N.nvmlDeviceGetHandleByIndex(i)
    m = N.nvmlDeviceGetMemoryInfo(h)
    u = N.nvmlDeviceGetUtilizationRates(h)
    print("DEV", i, N.nvmlDeviceGetName(h), N.nvmlDeviceGetUUID(h), N.nvmlDeviceGetPciInfo(h).busId, m.total,
          m.used + m.free == m.total, u.gpu, N.nvmlDeviceGetTemperature(h, N.NVML_TEMPERATURE_GPU),
          N.nvmlDeviceGetPowerUsage(h), N.nvmlDeviceGetClockInfo(h, N.NVML_CLOCK_SM))
print("DRIVER", N.nvmlSystemGetDriverVersion(), N.nvmlSystemGetCudaDriverVersion())
fv = N.nvmlDeviceGetFieldValues(N.nvmlDeviceGetHandleByIndex(0), [N.NVML_FI_DEV_POWER_INSTANT, N.NVML_FI_DEV_ECC_CURRENT])
print("FIELDS", fv[0].nvmlReturn, fv[0].value.uiVal, fv[1].nvmlReturn, fv[1].value.uiVal)
try:
    N.nvmlDeviceGetSupportedMemoryClocks(N.nvmlDeviceGetHandleByIndex(0))
except N.NVMLError as e:
    print("STUB", e.value == N.NVML_ERROR_NOT_SUPPORTED)
N.nvmlShutdown()
''')
    check('pynvml: 4 devices', 'COUNT 4' in out, out[-800:])
    devs = [ln for ln in out.splitlines() if ln.startswith('DEV ')]
    check('pynvml: every device answers', len(devs) == 4 and all(' True ' in ln for ln in devs), out[-800:])
    check('pynvml: the simulated names', all('lupine simulated GPU #' in ln for ln in devs), out[-500:])
    check('pynvml: versions', 'DRIVER 580' in out and '13000' in out, out[-300:])
    fields = [ln.split() for ln in out.splitlines() if ln.startswith('FIELDS ')]
    check('pynvml: field values (power instant, ECC mode) in NVIDIA\'s own struct layout',
          fields and fields[0][1] == '0' and int(fields[0][2]) >= 70000 and fields[0][3:] == ['0', '1'], out[-300:])
    check('pynvml: a stub raises NVML_ERROR_NOT_SUPPORTED', 'STUB True' in out, out[-300:])


POLL = '''
import sys, time
h = N.nvmlDeviceGetHandleByIndex(0)
for i in range(int(sys.argv[1])):
    time.sleep(1.05)
    print("UTIL", N.nvmlDeviceGetUtilizationRates(h).gpu, N.nvmlDeviceGetPowerUsage(h),
          len(N.nvmlDeviceGetComputeRunningProcesses(h)), flush=True)
'''


def test_utilization(d, progs, shim):
    """The simulated GPU's utilization follows the simulator's own work."""
    if not have_pynvml():
        return
    def poll(n):
        r = subprocess.run([sys.executable, '-c', PYNVML_HEAD + POLL, str(n)],
                           env=nvml_env(shim, f'unix:{d.unix}'), capture_output=True, text=True, timeout=120)
        return [tuple(map(int, ln.split()[1:])) for ln in r.stdout.splitlines() if ln.startswith('UTIL ')]  # util, power, sessions
    idle = poll(3)
    check('utilization: 0 while no session works', idle and idle[-1][0] == 0, str(idle))
    kernels = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'kernels')
    # 400000 launches take about a second on an idle machine: five times
    # as many keep the session (the daemon's only slot) busy while every
    # sample is taken; it then ends the session itself
    k = subprocess.Popen([os.path.join(progs, 'e2e_kernels'), kernels, '2000000'],
                         env=nvml_env(shim, f'unix:{d.unix}'), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    busy = poll(6)
    kout = k.communicate(timeout=300)[0]
    check('utilization and power rise while the simulator runs kernels',
          any(u > 0 and p > idle[-1][1] for u, p, _ in busy),
          f'(util, power, sessions) {busy}; e2e_kernels ended with {k.returncode}; ' + kout[-600:])


def test_malformed(d):
    cases = [
        ('bad magic', W.frame(OP_NVML, struct.pack('<IIII', 0x1234, 1, 1, 0), flags=W.F_SYNC), 'bad magic'),
        ('unknown request', W.frame(OP_NVML, struct.pack('<IIII', NVML_MAGIC, NVML_VERSION, 9, 0), flags=W.F_SYNC),
         'unknown request'),
        ('wrong size', W.frame(OP_NVML, bytes(16 + 2 + 256 + 1), flags=W.F_SYNC), 'payload bytes'),
        ('not sync', W.frame(OP_NVML, struct.pack('<IIII', NVML_MAGIC, 1, 1, 0)), 'synchronous'),
    ]
    for name, data, why in cases:
        s = W.connect(d.unix)
        s.sendall(data)
        h, _ = W.read_frame(s)
        closed = W.wait_closed(s, 5)
        s.close()
        check(f'malformed NVML request ({name}): refused and closed', h['op'] == OP_NVML and h['status'] != 0 and
              closed, str(h))
        time.sleep(0.1)
        check(f'malformed NVML request ({name}): the reason is logged', why in d.text(), d.text()[-400:])
    check('lupined survives malformed NVML requests', d.alive())


def wait_ready(p):
    seen = ''
    while True:
        ln = p.stdout.readline()
        seen += ln
        if not ln or ln.strip() == 'ready':
            return seen


def test_restart(lupined, progs, shim, tmp):
    d = Daemon(lupined, tmp, {'LUPINE_SIM_DEVICES': '2'}, 'nvml-restart')
    env = nvml_env(shim, f'unix:{d.unix}', {'LUPINE_NVML_WAIT_MS': '30000'})
    p = subprocess.Popen([os.path.join(progs, 'e2e_nvml'), 'wait'], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ready = wait_ready(p)
    check('restart: the client is ready', ready.endswith('ready\n'), ready)
    d.stop()
    time.sleep(1.2)                 # the client's snapshot is stale now
    p.stdin.write('go\n')
    p.stdin.flush()                 # it retries while no daemon listens
    time.sleep(0.5)
    d2 = Daemon(lupined, tmp, {'LUPINE_SIM_DEVICES': '2'}, 'nvml-restart')
    out, err = p.communicate(timeout=60)
    check('restart: the NVML client reconnects to the new daemon', p.returncode == 0 and 'PASSED' in out and
          'after: 0' in out, out[-500:] + err[-800:])
    # no daemon comes back: a clean failure
    env = nvml_env(shim, f'unix:{d2.unix}', {'LUPINE_NVML_WAIT_MS': '500'})
    p = subprocess.Popen([os.path.join(progs, 'e2e_nvml'), 'lost'], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ready = wait_ready(p)
    check('daemon gone: the client is ready', ready.endswith('ready\n'), ready)
    d2.stop()
    time.sleep(1.2)
    t0 = time.time()
    p.stdin.write('go\n')
    p.stdin.flush()
    out, err = p.communicate(timeout=60)
    check('daemon gone: NVML_ERROR_GPU_IS_LOST, in time', p.returncode == 0 and 'after: 15' in out and
          time.time() - t0 < 10, out[-500:] + err[-800:])


HOST_PROBE = '''
h = N.nvmlDeviceGetHandleByIndex(0)
print("HOST", N.nvmlDeviceGetName(h), N.nvmlDeviceGetUUID(h), N.nvmlDeviceGetTemperature(h, 0),
      N.nvmlDeviceGetPowerUsage(h), N.nvmlDeviceGetMinorNumber(h), N.nvmlDeviceGetClockInfo(h, 1),
      N.nvmlDeviceGetFanSpeed(h), N.nvmlDeviceGetPersistenceMode(h), N.nvmlDeviceGetCurrPcieLinkGeneration(h),
      N.nvmlDeviceGetTotalEnergyConsumption(h), N.nvmlDeviceGetEncoderUtilization(h))
try:
    N.nvmlDeviceGetBoardId(h)
except N.NVMLError as e:
    print("MISSING", e)
'''


def test_host_path(lupined, progs, shim, tmp):
    """The GPU host's path (supervisor/nvml_host.c) against a stand-in for
    the host's NVML with known values: what a client reads is the host's."""
    if not have_pynvml():
        return
    fake = os.path.join(progs, 'fakenvml')
    d = Daemon(lupined, tmp, {'LD_LIBRARY_PATH': fake}, 'host-nvml', backend='auto')
    try:
        r = subprocess.run([sys.executable, '-c', PYNVML_HEAD + HOST_PROBE], env=nvml_env(shim, f'unix:{d.unix}'),
                           capture_output=True, text=True, timeout=60)
        want = ("HOST Fake Host GPU (lupine) GPU-0badcafe-1111-2222-3333-444455556666 42 123456 7 1001 33 1 5 "
                "9876543210 [12, 167000]")
        check('the host\'s NVML values reach the client (a stand-in host NVML)', want in r.stdout,
              r.stdout[-600:] + r.stderr[-600:] + d.text()[-600:])
        check('a function the host\'s NVML lacks is an error, not a zero', 'MISSING' in r.stdout, r.stdout[-300:])
    finally:
        d.stop()


def main():
    lupined, progs, shim, spec = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3]), sys.argv[4]
    tmp = tempfile.mkdtemp(prefix='lupine-nvml-')
    test_symbols(shim, spec)
    d = Daemon(lupined, tmp, {'LUPINE_SIM_DEVICES': '4'}, 'one-slot', ['--max-sessions', '1'])
    try:
        test_queries(d, progs, shim)
        test_utilization(d, progs, shim)
        test_no_slot(d, progs, shim)
        test_pynvml(d, shim)
        test_malformed(d)
    finally:
        d.stop()
    test_restart(lupined, progs, shim, tmp)
    test_host_path(lupined, progs, shim, tmp)
    if check.failed:
        print('FAILED:', ', '.join(check.failed))
        return 1
    print('all NVML checks passed')
    return 0


if __name__ == '__main__':
    sys.exit(main())
