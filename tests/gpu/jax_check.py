#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""JAX on whatever libcuda.so.1 the process loads: the device list, jit and
grad. Prints one line per check, to compare the local run with lupine's."""
import hashlib
import os
import sys

os.environ.setdefault('XLA_PYTHON_CLIENT_PREALLOCATE', 'false')
# XLA's autotuner picks GEMM kernels by timing them. Through lupine the
# timings differ (a socket in between), so the two runs can pick different
# kernels, whose rounding differs (seen on the H200: jit equal, grad not).
# Autotune level 0 takes XLA's default kernels in both runs.
os.environ['XLA_FLAGS'] = (os.environ.get('XLA_FLAGS', '') + ' --xla_gpu_autotune_level=0').strip()
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


def digest(x):
    return hashlib.sha256(np.asarray(x).tobytes()).hexdigest()[:16]


def main():
    devs = jax.devices()
    print('platform', devs[0].platform, 'count', len(devs))
    assert devs[0].platform == 'gpu', devs
    key = jax.random.PRNGKey(0)
    w = jax.random.normal(key, (256, 256), dtype=jnp.float32)
    x = jax.random.normal(jax.random.PRNGKey(1), (64, 256), dtype=jnp.float32)

    @jax.jit
    def loss(w, x):
        return jnp.mean(jnp.tanh(x @ w) ** 2)

    print('jit', digest(loss(w, x)))
    g = jax.jit(jax.grad(loss))(w, x)
    print('grad', digest(g))
    for _ in range(10):
        w = w - 0.1 * jax.jit(jax.grad(loss))(w, x)
    print('descent', digest(w))
    print('jax_check: OK')


if __name__ == '__main__':
    main()
