/* SPDX-License-Identifier: MIT */
/* The source of tests/kernels/jit_b.ptx: nvcc -arch=sm_90 -rdc=true -ptx jit_b.cu */
__device__ unsigned jit_bias = 7;
extern "C" __device__ __noinline__ unsigned jit_twice(unsigned x) { return 2u * x; }
