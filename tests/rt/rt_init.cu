// SPDX-License-Identifier: MIT
// The CUDA runtime (as nvcc links it: static, or shared with -cudart shared)
// initialising through lupine and doing plain memory work plus one launch of
// a kernel the simulator knows (vec_add_f32 of tests/kernels/kernels.cu),
// and stream-ordered allocations (cudaMallocAsync, cudaFreeAsync).
// Exit 0 and "rt_init: OK" when every result is right.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
        std::fprintf(stderr, "%s:%d: %s: %d %s\n", __FILE__, __LINE__, #call, (int)e_, cudaGetErrorString(e_)); \
        std::exit(1); } } while (0)

extern "C" __global__ void vec_add_f32(const float *a, const float *b, float *c, int n)
{
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n)
                c[i] = a[i] + b[i];
}

int main()
{
        int n = 0, drv = 0, rt = 0;
        CK(cudaGetDeviceCount(&n));
        if (n < 1) { std::fprintf(stderr, "no device\n"); return 1; }
        CK(cudaDriverGetVersion(&drv));
        CK(cudaRuntimeGetVersion(&rt));
        cudaDeviceProp prop;
        CK(cudaGetDeviceProperties(&prop, 0));
        std::printf("rt_init: %d device(s), %s, driver %d, runtime %d\n", n, prop.name, drv, rt);
        CK(cudaSetDevice(0));

        const int N = 1 << 16;
        float *a, *b, *c, *h;
        CK(cudaMalloc(&a, N * sizeof(float)));
        CK(cudaMalloc(&b, N * sizeof(float)));
        CK(cudaMalloc(&c, N * sizeof(float)));
        CK(cudaMallocHost(&h, N * sizeof(float)));
        for (int i = 0; i < N; i++) h[i] = (float)i;
        CK(cudaMemcpy(a, h, N * sizeof(float), cudaMemcpyHostToDevice));
        for (int i = 0; i < N; i++) h[i] = 2.0f * i;
        cudaStream_t s;
        CK(cudaStreamCreate(&s));
        CK(cudaMemcpyAsync(b, h, N * sizeof(float), cudaMemcpyHostToDevice, s));
        CK(cudaStreamSynchronize(s));
        CK(cudaMemset(c, 0, N * sizeof(float)));
        vec_add_f32<<<(N + 255) / 256, 256, 0, s>>>(a, b, c, N);
        CK(cudaGetLastError());
        cudaEvent_t ev;
        CK(cudaEventCreate(&ev));
        CK(cudaEventRecord(ev, s));
        CK(cudaEventSynchronize(ev));
        std::memset(h, 0, N * sizeof(float));
        CK(cudaMemcpyAsync(h, c, N * sizeof(float), cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        for (int i = 0; i < N; i++)
                if (h[i] != 3.0f * i) { std::fprintf(stderr, "c[%d] = %f\n", i, h[i]); return 1; }
        CK(cudaEventDestroy(ev));
        // the stream-ordered allocator as the runtime drives it
        // (cudaMallocAsync: lupine's pools are in the shim, shim/pool.c)
        int pools = 0;
        CK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, 0));
        if (!pools) { std::fprintf(stderr, "no memory pools\n"); return 1; }
        float *pa;
        CK(cudaMallocAsync((void **)&pa, N * sizeof(float), s));
        CK(cudaMemcpyAsync(pa, c, N * sizeof(float), cudaMemcpyDeviceToDevice, s));
        CK(cudaFreeAsync(pa, s));
        CK(cudaMallocAsync((void **)&pa, N * sizeof(float), s)); // stream order: the same memory may serve again
        std::memset(h, 0, N * sizeof(float));
        CK(cudaMemcpyAsync(h, pa, N * sizeof(float), cudaMemcpyDeviceToHost, s));
        CK(cudaFreeAsync(pa, s));
        CK(cudaStreamSynchronize(s));
        for (int i = 0; i < N; i++)
                if (h[i] != 3.0f * i) { std::fprintf(stderr, "async c[%d] = %f\n", i, h[i]); return 1; }
        cudaMemPool_t mp;
        unsigned long long used = 1;
        CK(cudaDeviceGetDefaultMemPool(&mp, 0));
        CK(cudaMemPoolGetAttribute(mp, cudaMemPoolAttrUsedMemCurrent, &used));
        if (used != 0) { std::fprintf(stderr, "pool still uses %llu bytes\n", used); return 1; }
        CK(cudaStreamDestroy(s));
        CK(cudaFree(a)); CK(cudaFree(b)); CK(cudaFree(c)); CK(cudaFreeHost(h));
        CK(cudaDeviceReset());
        std::printf("rt_init: OK\n");
        return 0;
}
