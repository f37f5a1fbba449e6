#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The real CUDA runtime through lupine on the simulated GPU: nvcc-built
programs, with the runtime linked statically (nvcc's default) and shared,
initialise (export tables, the integrity check, context-local storage),
allocate, copy and launch a kernel the simulator knows, unmodified.

usage: test_cudart.py LUPINED SHIM_DIR CUDART_LIB_DIR PROGRAM...
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_e2e as E  # noqa: E402


def main():
    if len(sys.argv) < 5:
        print(__doc__)
        return 2
    lupined, shim, cudart_dir, progs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    E.SHIM_DIR = os.path.abspath(shim)
    with tempfile.TemporaryDirectory(prefix='lupine-cudart-') as tmp:
        d = E.Daemon(lupined, tmp, 'sim')
        try:
            for p in progs:
                env = E.client_env(f'127.0.0.1:{d.port}')
                env['LD_LIBRARY_PATH'] += ':' + cudart_dir   # libcudart.so for -cudart shared
                env['LUPINE_TRACE'] = '3:' + os.path.join(tmp, os.path.basename(p) + '.trace')
                r = E.run_prog(os.path.dirname(p), os.path.basename(p), env, timeout=120)
                E.check(f'{os.path.basename(p)}: the CUDA runtime through lupine',
                        r.returncode == 0 and 'rt_init: OK' in r.stdout, r.stdout[-2000:] + r.stderr[-2000:])
                # the runtime's own integrity check passed (else: error 103 on
                # every call), and no call hit an unimplemented slot or stub
                E.check(f'{os.path.basename(p)}: no unsupported driver call or export-table slot',
                        'not supported by lupine' not in r.stderr and 'not implemented' not in r.stderr,
                        r.stderr[-2000:])
                with open(os.path.join(tmp, os.path.basename(p) + '.trace')) as f:
                    calls = [l for l in f if ' call ' in l]
                E.check(f'{os.path.basename(p)}: LUPINE_TRACE=3 saw the runtime\'s driver calls',
                        any('cuLibraryLoadData -> ok' in l for l in calls) and
                        any('cuLaunchKernel' in l for l in calls), f'{len(calls)} calls traced')
        finally:
            d.stop()
    if E.FAILED:
        print(f'test_cudart: {len(E.FAILED)} check(s) failed')
        return 1
    print('test_cudart: OK')
    return 0


if __name__ == '__main__':
    sys.exit(main())
