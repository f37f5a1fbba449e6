#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""CuPy features behind issue 13, on whatever libcuda.so.1 the process
loads: the stream-ordered MemoryAsyncPool, cupy.fft (cuFFT), cupy.linalg
(cuSOLVER), cupyx.scipy.sparse (cuSPARSE) and cupy.random (cuRAND). One line
per check with a digest, to compare the local run with lupine's; each is
also checked against numpy."""
import hashlib
import sys

import cupy as cp
import numpy as np


def digest(x):
    return hashlib.sha256(cp.asnumpy(x).tobytes()).hexdigest()[:16]


def near(name, got, want, tol):
    g = cp.asnumpy(got)
    if not np.allclose(g, want, rtol=tol, atol=tol):
        print(f'cupy_more: {name} differs from numpy', file=sys.stderr)
        sys.exit(1)
    print(name, digest(got))


def part(name):
    return len(sys.argv) < 2 or name in sys.argv[1:]


def main():
    rng = np.random.default_rng(11)
    a = rng.standard_normal((256, 256)).astype(np.float64)
    if part('async_pool'):
        cp.cuda.set_allocator(cp.cuda.MemoryAsyncPool().malloc)
        xs = [cp.arange(1 << (8 + i % 10), dtype=cp.float32) * i for i in range(30)]
        print('async_pool', digest(cp.stack([x.sum() for x in xs])))
        del xs
        cp.cuda.set_allocator(cp.cuda.MemoryPool().malloc)
    if part('fft'):
        s = rng.standard_normal(4096) + 1j * rng.standard_normal(4096)
        near('fft', cp.fft.fft(cp.asarray(s)), np.fft.fft(s), 1e-8)
        near('rfft2', cp.fft.rfft2(cp.asarray(a)), np.fft.rfft2(a), 1e-8)
    if part('linalg'):
        da = cp.asarray(a)
        spd = a @ a.T + 256 * np.eye(256)
        near('solve', cp.linalg.solve(da, cp.ones(256)), np.linalg.solve(a, np.ones(256)), 1e-6)
        near('cholesky', cp.linalg.cholesky(cp.asarray(spd)), np.linalg.cholesky(spd), 1e-6)
        near('eigvalsh', cp.linalg.eigvalsh(cp.asarray(spd)), np.linalg.eigvalsh(spd), 1e-6)
        near('svdvals', cp.linalg.svd(da, compute_uv=False), np.linalg.svd(a, compute_uv=False), 1e-6)
    if part('sparse'):
        import cupyx.scipy.sparse as csp
        m = a * (np.abs(a) > 1.5)
        sm = csp.csr_matrix(cp.asarray(m))
        v = rng.standard_normal(256)
        near('spmv', sm @ cp.asarray(v), m @ v, 1e-8)
        near('spmm', (sm @ sm).toarray(), m @ m, 1e-8)
    if part('random'):
        g = cp.random.default_rng(5)
        r = g.standard_normal(1 << 16)
        print('random', digest(r), 'mean_ok', abs(float(r.mean())) < 0.02)
        cp.random.seed(9)
        print('legacy_random', digest(cp.random.random(1000)))
    print('cupy_more: OK')


if __name__ == '__main__':
    main()
