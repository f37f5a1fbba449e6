#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""CuPy on whatever libcuda.so.1 the process loads: to/from device,
elementwise ops, reductions, matmul and random numbers, each checked
against numpy."""
import sys

import cupy as cp
import numpy as np


def close(name, got, want, tol=1e-5):
    got = cp.asnumpy(got) if isinstance(got, cp.ndarray) else got
    if not np.allclose(got, want, rtol=tol, atol=tol):
        print(f'cupy_check: {name} differs from numpy: got {np.ravel(got)[:4]}, want {np.ravel(want)[:4]}',
              file=sys.stderr)
        sys.exit(1)
    print(name, 'ok')


def main():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((512, 512)).astype(np.float32)
    b = rng.standard_normal((512, 512)).astype(np.float32)
    da, db = cp.asarray(a), cp.asarray(b)
    close('roundtrip', da, a, 0)
    close('add', da + db, a + b)
    close('multiply', da * db, a * b)
    close('scalar', da * 2.5 + 1, a * 2.5 + 1)
    close('sum', float(da.sum()), float(a.sum(dtype=np.float64)), 1e-2)
    close('mean', float(da.mean()), float(a.mean(dtype=np.float64)), 1e-4)
    close('max', float(da.max()), float(a.max()), 0)
    close('min', float(da.min()), float(a.min()), 0)
    close('matmul', da @ db, a @ b, 1e-3)
    cp.random.seed(3)
    r = cp.random.random(100000)
    rr = cp.asnumpy(r)
    if not (0 <= rr.min() and rr.max() < 1 and abs(rr.mean() - 0.5) < 0.01):
        print('cupy_check: random numbers look wrong', file=sys.stderr)
        sys.exit(1)
    print('random ok')
    k = cp.ElementwiseKernel('float32 x, float32 y', 'float32 z', 'z = x * y + 1', 'lupine_fma')
    close('elementwise_kernel', k(da, db), a * b + 1)
    print('cupy_check: OK')


if __name__ == '__main__':
    main()
