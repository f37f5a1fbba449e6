/* SPDX-License-Identifier: MIT */
/* The source of tests/kernels/jit_a.ptx: nvcc -arch=sm_90 -rdc=true -ptx jit_a.cu */
extern __device__ unsigned jit_bias;
extern "C" __device__ unsigned jit_twice(unsigned x);
extern "C" __global__ void jit_axpb(unsigned *out, const unsigned *in, int n)
{
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n)
                out[i] = jit_twice(in[i]) + jit_bias;
}
