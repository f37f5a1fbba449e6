#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""e2e: CUDA_VISIBLE_DEVICES in lupine's libcuda.so.1, on 4 simulated devices.

usage: test_visible.py LUPINED PROGS_DIR SHIM_DIR [CUDART_LIB_DIR RT_VISIBLE]

For each list, e2e_visible (tests/e2e/progs/e2e_visible.c) prints the
devices it sees and checks, on each, that contexts, pointer attributes, the
stream-ordered allocator and VMM answer that device's client ordinal. This
test computes the expected list from the run without CUDA_VISIBLE_DEVICES
and checks:
- cuInit's answer, the count, and each device's UUID, PCI bus id and name;
- that the worker created its contexts on the server ordinals the list
  names (its debug log), so the translation really crossed the wire;
- a list that names no device answers without asking the server;
- with the CUDA runtime (when nvcc built RT_VISIBLE): the same list;
- lupine's NVML still lists all 4 devices, as the real NVML does.
"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_e2e as E  # noqa: E402

NO_DEVICE, INVALID_DEVICE, NOT_INITIALIZED = 100, 101, 3


def run(progs, prog, env, args=()):
    return subprocess.run([os.path.join(progs, prog)] + list(args), env=env, capture_output=True, text=True,
                          timeout=120)


def visible_env(server, value, session=None):
    env = E.client_env(server)
    env.pop('CUDA_VISIBLE_DEVICES', None)
    if value is not None:
        env['CUDA_VISIBLE_DEVICES'] = value
    if session:
        env['LUPINE_SESSION'] = session
    return env


def parse(out):
    """(init rc, count rc, count, [(uuid, pci, name)...]) from e2e_visible's stdout."""
    init = count_rc = count = None
    devs = []
    for ln in out.splitlines():
        w = ln.split()
        if w[:1] == ['init']:
            init = int(w[1])
        elif w[:1] == ['count']:
            count_rc, count = int(w[1]), int(w[2])
        elif w[:1] == ['dev']:
            devs.append((w[2], w[3], ' '.join(w[4:])))
    return init, count_rc, count, devs


def unique_prefix(uuid, others):
    for n in range(5, len(uuid) + 1):
        if not any(o.startswith(uuid[:n]) for o in others):
            return uuid[:n]
    return uuid


def cases(all_devs):
    """(name, CUDA_VISIBLE_DEVICES, server ordinals or the cuInit error)"""
    uuids = [d[0] for d in all_devs]
    pre3 = unique_prefix(uuids[3], uuids[:3])
    return [
        ('one index', '2', [2]),
        ('a reordered pair', '3,1', [3, 1]),
        ('all, reversed', '3,2,1,0', [3, 2, 1, 0]),
        ('a full UUID', uuids[2], [2]),
        ('a unique UUID prefix', pre3, [3]),
        ('a UUID in upper case, dashes left out', 'GPU-' + uuids[1][4:].replace('-', '').upper(), [1]),
        ('MIG- and the GPU\'s UUID (MIG off)', 'MIG-' + uuids[0][4:], [0]),
        ('a UUID and an index', f'{uuids[3]},0', [3, 0]),
        ('blanks, a sign, leading zeros', ' 3 ,+01', [3, 1]),
        ('ends at an invalid entry', '1,bogus,2', [1]),
        ('ends at a negative index', '0,2,-1,1', [0, 2]),
        ('ends at an index past the server\'s', '2,4,1', [2]),
        ('ends at an empty entry', '1,,2', [1]),
        ('ends at a device named again', f'2,{uuids[2]},1', [2]),
        ('the same index twice', '1,1', INVALID_DEVICE),
        ('the same UUID twice', f'{uuids[2]},{uuids[2]}', INVALID_DEVICE),
        ('a blank before a UUID', ' ' + uuids[2], NO_DEVICE),
        ('empty', '', NO_DEVICE),
        ('-1', '-1', NO_DEVICE),
        ('no device of the server\'s', '4', NO_DEVICE),
        ('a UUID of no device', 'GPU-ffffffff', NO_DEVICE),
    ]


def worker_devices(log, session):
    """The server ordinals of the contexts the worker created for session."""
    rx = re.compile(rf'session {re.escape(session)}: context 0x[0-9a-f]+ on device (\d+)')
    return [int(m.group(1)) for m in rx.finditer(log)]


def check_case(d, progs, all_devs, k, name, value, want):
    session = f'visible-{k}'
    r = run(progs, 'e2e_visible', visible_env(f'unix:{d.unix}', value, session))
    init, count_rc, count, devs = parse(r.stdout)
    what = f'CUDA_VISIBLE_DEVICES={value!r} ({name})'
    ok = r.returncode == 0 and 'e2e_visible: OK' in r.stdout
    if isinstance(want, int):
        E.check(f'{what}: cuInit {want}, cuDeviceGetCount NOT_INITIALIZED (driver 580)',
                ok and init == want and count_rc == NOT_INITIALIZED and not devs, r.stdout[-600:] + r.stderr[-600:])
        return
    expect = [all_devs[s] for s in want]
    E.check(f'{what}: devices {want} of the server\'s, in that order, each checked', ok and init == 0 and
            count_rc == 0 and count == len(want) and devs == expect, r.stdout[-1500:] + r.stderr[-1500:])
    got = worker_devices(d.text(), session)
    E.check(f'{what}: the worker made its contexts on server devices {want}', got == want, str(got))


def check_no_server(progs):
    """A list that can name no device: cuInit answers without connecting."""
    for value in ('', '-1', 'bogus'):
        r = run(progs, 'e2e_visible', visible_env('127.0.0.1:1', value))
        init, count_rc, _, _ = parse(r.stdout)
        E.check(f'CUDA_VISIBLE_DEVICES={value!r}: CUDA_ERROR_NO_DEVICE without asking any server',
                init == NO_DEVICE and count_rc == NOT_INITIALIZED and 'lupined' not in r.stderr,
                r.stdout[-300:] + r.stderr[-300:])


def check_runtime(d, rt, cudart_dir, all_devs):
    for value, want in ((None, [0, 1, 2, 3]), ('3,1', [3, 1]), (all_devs[2][0], [2]), ('', [])):
        env = visible_env(f'unix:{d.unix}', value)
        env['LD_LIBRARY_PATH'] += ':' + cudart_dir
        r = subprocess.run([rt], env=env, capture_output=True, text=True, timeout=120)
        got = [(w[3], w[4]) for w in (ln.split() for ln in r.stdout.splitlines()) if w[:2] == ['rt', 'dev']]
        expect = [(all_devs[s][0], all_devs[s][1]) for s in want]
        tail = 'rt_visible: OK' if want else 'rt_visible: no device (100)'
        E.check(f'CUDA runtime, CUDA_VISIBLE_DEVICES={value!r}: devices {want}, cudaSetDevice and pointer '
                'attributes agree', r.returncode == 0 and tail in r.stdout and got == expect,
                r.stdout[-800:] + r.stderr[-800:])


def check_nvml(d, progs, all_devs):
    lists = {}
    for value in (None, '2'):
        r = run(progs, 'e2e_nvml', visible_env(f'unix:{d.unix}', value), ['list'])
        lists[value] = [ln.split()[2] for ln in r.stdout.splitlines() if ln.startswith('nvml ')]
        E.check(f'NVML with CUDA_VISIBLE_DEVICES={value!r}: runs', r.returncode == 0 and 'PASSED' in r.stdout,
                r.stdout[-500:] + r.stderr[-500:])
    uuids = [dv[0] for dv in all_devs]
    E.check('NVML ignores CUDA_VISIBLE_DEVICES=2: all 4 devices, the same UUIDs as CUDA without it',
            lists['2'] == uuids and lists[None] == uuids, str(lists))


def main():
    if len(sys.argv) not in (4, 6):
        print(__doc__)
        return 2
    lupined, progs, shim = sys.argv[1], sys.argv[2], sys.argv[3]
    rt = sys.argv[5] if len(sys.argv) == 6 else None
    E.SHIM_DIR = os.path.abspath(shim)
    with tempfile.TemporaryDirectory(prefix='lupine-visible-') as tmp:
        d = E.Daemon(lupined, tmp, 'sim', {'LUPINE_SIM_DEVICES': '4'})
        try:
            r = run(progs, 'e2e_visible', visible_env(f'unix:{d.unix}', None, 'visible-all'))
            init, _, count, all_devs = parse(r.stdout)
            E.check('unset: all 4 devices, each checked', r.returncode == 0 and init == 0 and count == 4 and
                    len(set(dv[0] for dv in all_devs)) == 4 and len(set(dv[1] for dv in all_devs)) == 4,
                    r.stdout[-1500:] + r.stderr[-1500:])
            E.check('unset: the worker made its contexts on devices 0-3',
                    worker_devices(d.text(), 'visible-all') == [0, 1, 2, 3], d.text()[-600:])
            if len(all_devs) == 4:
                for k, (name, value, want) in enumerate(cases(all_devs)):
                    check_case(d, progs, all_devs, k, name, value, want)
                check_nvml(d, progs, all_devs)
                if rt:
                    check_runtime(d, rt, sys.argv[4], all_devs)
                else:
                    print('SKIP the CUDA runtime: nvcc did not build rt_visible')
            check_no_server(progs)
            E.check('lupined is still running', d.alive())
        finally:
            d.stop()
    if E.FAILED:
        print(f'test_visible: {len(E.FAILED)} check(s) failed')
        return 1
    print('test_visible: OK')
    return 0


if __name__ == '__main__':
    sys.exit(main())
