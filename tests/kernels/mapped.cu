// SPDX-License-Identifier: MIT
//
// Kernels for mapped (zero-copy) host memory: flags the host and the GPU
// set for each other while a kernel runs (tests/e2e/progs/e2e_mapped.c).
// The simulator runs host twins of them (sim/sim_twins.c). Regenerate the
// committed PTX (nvcc runs without a GPU):
//   nvcc -ptx -arch=sm_90 -o tests/kernels/mapped.ptx tests/kernels/mapped.cu

__device__ static unsigned long long now_ns(void)
{
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        return t;
}

// One thread waits until the host makes *flag non-zero, or timeout_ns
// pass, then writes what it saw to *out (0xffffffff: it timed out).
extern "C" __global__ void wait_flag_u32(const volatile unsigned *flag, unsigned *out, unsigned long long timeout_ns)
{
        if (threadIdx.x != 0 || blockIdx.x != 0)
                return;
        unsigned long long start = now_ns();
        unsigned v;
        while ((v = *flag) == 0 && now_ns() - start < timeout_ns)
                ;
        *out = v ? v : 0xffffffffu;
        __threadfence_system();
}

// One thread sets *flag to 1 for the host to see, waits until the host
// makes *ack non-zero (or timeout_ns pass), then sets *flag to 2 (3: it
// timed out).
extern "C" __global__ void raise_wait_u32(volatile unsigned *flag, const volatile unsigned *ack,
                                          unsigned long long timeout_ns)
{
        if (threadIdx.x != 0 || blockIdx.x != 0)
                return;
        *flag = 1;
        __threadfence_system();
        unsigned long long start = now_ns();
        while (*ack == 0 && now_ns() - start < timeout_ns)
                ;
        *flag = *ack ? 2 : 3;
        __threadfence_system();
}
