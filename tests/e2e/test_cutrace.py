#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""lupine-cutrace (tools/cutrace, an LD_AUDIT module) on programs running
through lupine on the simulated GPU: every call into libcuda.so.1 is logged
with its arguments and result, the program's behaviour does not change, and
export-table slots and functions from cuGetProcAddress are logged too.

usage: test_cutrace.py LUPINED SHIM_DIR CUTRACE_SO TESTS_DIR KERNELS_DIR [CUDART_LIB_DIR RT_PROGRAM...]
"""
import collections
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_e2e as E  # noqa: E402

LINE = re.compile(r'^[\d.]+ (\d+) ([<>]) (\S+?)[( ]')


def traced(tmp, d, cutrace, progs, prog, args=(), extra_lib=None, unix=False):
    path = os.path.join(tmp, prog + '.trace')
    env = E.client_env(f'unix:{d.unix}' if unix else f'127.0.0.1:{d.port}')
    if extra_lib:
        env['LD_LIBRARY_PATH'] += ':' + extra_lib
    env['LD_AUDIT'] = cutrace
    env['CUTRACE_FILE'] = path
    r = E.run_prog(progs, prog, env, args=args, timeout=120)
    with open(path) as f:
        return r, f.read()


def balanced(text):
    """Every entry has its exit, per thread, in order."""
    stacks = collections.defaultdict(list)
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        tid, kind, name = m.groups()
        if kind == '>':
            stacks[tid].append(name)
        elif not stacks[tid] or stacks[tid].pop() != name:
            return False
    return all(not s for s in stacks.values())


def main():
    if len(sys.argv) < 6:
        print(__doc__)
        return 2
    lupined, shim, cutrace, tests, kernels = sys.argv[1:6]
    cudart_dir, rt_progs = (sys.argv[6], sys.argv[7:]) if len(sys.argv) > 7 else (None, [])
    E.SHIM_DIR = os.path.abspath(shim)
    cutrace = os.path.abspath(cutrace)
    with tempfile.TemporaryDirectory(prefix='lupine-cutrace-') as tmp:
        d = E.Daemon(lupined, tmp, 'sim')
        try:
            # (not e2e_basic: it compares &cuMemAlloc_v2, which the loader
            # resolves without asking the audit module, with cuGetProcAddress's
            # answer, which is wrapped: a documented limit of the tool)
            r, t = traced(tmp, d, cutrace, tests, 'e2e_kernels', args=[kernels])
            E.check('e2e_kernels under lupine-cutrace behaves as without it',
                    r.returncode == 0 and 'e2e_kernels: OK' in r.stdout, r.stdout[-1000:] + r.stderr[-1000:])
            E.check('the trace names the libcuda in use (lupine\'s shim)',
                    f'libcuda is {E.SHIM_DIR}/libcuda.so.1' in t, t[:500])
            E.check('a direct call is logged with its arguments and result',
                    re.search(r'> cuInit\(0, ', t) is not None and '< cuInit = 0' in t, t[:1500])
            m = re.search(r'< cuMemAlloc_v2 = 0, out (0x[0-9a-f]+)', t)
            E.check('a getter shows what it wrote (cuMemAlloc: a device address)',
                    m is not None and int(m.group(1), 16) >= 0x100000, t[:3000])
            E.check('every call logged has its result, per thread', balanced(t))

            roundtrip = os.environ.get('LUPINE_TEST_ROUNDTRIP')
            if roundtrip:
                bad = []
                for i in range(10):
                    r, t = traced(tmp, d, cutrace, os.path.dirname(roundtrip), os.path.basename(roundtrip),
                                  unix=True)
                    if r.returncode != 0:
                        bad.append(f'run {i}: ' + r.stderr[-600:])
                with open(d.log_path) as f:
                    log = f.read()
                E.check('the example (256 MiB each way) under lupine-cutrace over the UNIX socket, 10 runs: all pass, every PING '
                        'acknowledges only answers that were sent', not bad and 'PING acknowledges' not in log,
                        '\n'.join(bad)[-2000:] + '\n'.join(x for x in log.splitlines() if 'PING' in x)[-1000:])
            r, t = traced(tmp, d, cutrace, tests, 'e2e_export_tables', args=[kernels])
            E.check('e2e_export_tables under lupine-cutrace passes', r.returncode == 0,
                    r.stdout[-1000:] + r.stderr[-1000:])
            E.check('export-table lookups are logged', 'cuGetExportTable(' in t, t[:1500])
            E.check('calls through export-table slots are logged with their results',
                    re.search(r'> ET[0-9a-f]{8}\[\d+\]\(', t) is not None and
                    re.search(r'< ET[0-9a-f]{8}\[\d+\] = ', t) is not None and balanced(t), t[-1500:])

            for p in rt_progs:
                name = os.path.basename(p)
                r, t = traced(tmp, d, cutrace, os.path.dirname(p), name, extra_lib=cudart_dir)
                E.check(f'{name} (nvcc\'s runtime) under lupine-cutrace: the integrity check still passes',
                        r.returncode == 0 and 'rt_init: OK' in r.stdout, r.stdout[-1000:] + r.stderr[-1000:])
                E.check(f'{name}: functions from cuGetProcAddress are logged when called',
                        'cuGetProcAddress_v2(cuLaunchKernel' in t and '> cuLaunchKernel(' in t and
                        '< cuLaunchKernel = 0' in t and balanced(t), t[-1500:])
        finally:
            d.stop()
    if E.FAILED:
        print(f'test_cutrace: {len(E.FAILED)} check(s) failed')
        return 1
    print('test_cutrace: OK')
    return 0


if __name__ == '__main__':
    sys.exit(main())
