// SPDX-License-Identifier: MIT
// Runtime-API programs of issue 13's families, as nvcc users write them:
// stream capture and the graph API, cudaMallocAsync with a pool, and the
// driver's VMM calls. Prints one line per check with the data it computed,
// so the local run and the run through lupine can be compared.
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                                  \
        do {                                                                                   \
                cudaError_t e_ = (x);                                                          \
                if (e_ != cudaSuccess) {                                                       \
                        fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,             \
                                cudaGetErrorString(e_));                                       \
                        exit(1);                                                               \
                }                                                                              \
        } while (0)
#define CKD(x)                                                                                 \
        do {                                                                                   \
                CUresult r_ = (x);                                                             \
                if (r_ != CUDA_SUCCESS) {                                                      \
                        fprintf(stderr, "%s:%d: %s: error %d\n", __FILE__, __LINE__, #x, r_);  \
                        exit(1);                                                               \
                }                                                                              \
        } while (0)

__global__ void axpb(float *x, float a, float b, int n)
{
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n)
                x[i] = a * x[i] + b;
}

__global__ void add(float *y, const float *x, int n)
{
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n)
                y[i] += x[i];
}

static double checksum(const float *d, int n)
{
        float *h = (float *)malloc(n * sizeof(float));
        CK(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
        double s = 0;
        for (int i = 0; i < n; i++)
                s += h[i] * (1 + i % 7);
        free(h);
        return s;
}

static int host_calls;
static void CUDART_CB on_host(void *p)
{
        (void)p;
        host_calls++;
}

static void graphs(void)
{
        const int n = 1 << 16;
        float *x, *y;
        cudaStream_t s, s2;
        cudaEvent_t fork, join;
        CK(cudaMalloc(&x, n * sizeof(float)));
        CK(cudaMalloc(&y, n * sizeof(float)));
        CK(cudaMemset(x, 0, n * sizeof(float)));
        CK(cudaMemset(y, 0, n * sizeof(float)));
        CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
        CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
        CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));

        // capture: a fork onto s2 and a join back, kernels and a memset
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        cudaStreamCaptureStatus st;
        CK(cudaStreamIsCapturing(s, &st));
        printf("capturing %d\n", (int)st);
        axpb<<<n / 256, 256, 0, s>>>(x, 1.0f, 1.0f, n);
        CK(cudaEventRecord(fork, s));
        CK(cudaStreamWaitEvent(s2, fork, 0));
        axpb<<<n / 256, 256, 0, s2>>>(y, 0.5f, 2.0f, n);
        CK(cudaEventRecord(join, s2));
        CK(cudaStreamWaitEvent(s, join, 0));
        add<<<n / 256, 256, 0, s>>>(y, x, n);
        CK(cudaStreamEndCapture(s, &g));
        size_t nodes = 0;
        CK(cudaGraphGetNodes(g, NULL, &nodes));
        printf("captured nodes %zu\n", nodes);
        CK(cudaGraphInstantiate(&ge, g, 0));
        for (int i = 0; i < 100; i++)
                CK(cudaGraphLaunch(ge, s));
        CK(cudaStreamSynchronize(s));
        printf("capture x %.1f y %.1f\n", checksum(x, n), checksum(y, n));

        // the explicit API: memset -> kernel -> host node -> memcpy
        cudaGraph_t g2;
        cudaGraphExec_t ge2;
        cudaGraphNode_t ms, k, h, cp;
        CK(cudaGraphCreate(&g2, 0));
        cudaMemsetParams mp = {};
        mp.dst = x;
        mp.value = 0;
        mp.elementSize = 4;
        mp.width = n;
        mp.height = 1;
        CK(cudaGraphAddMemsetNode(&ms, g2, NULL, 0, &mp));
        float a = 3.0f, b = 1.5f;
        int nn = n;
        void *args[] = { &x, &a, &b, &nn };
        cudaKernelNodeParams kp = {};
        kp.func = (void *)axpb;
        kp.gridDim = dim3(n / 256);
        kp.blockDim = dim3(256);
        kp.kernelParams = args;
        CK(cudaGraphAddKernelNode(&k, g2, &ms, 1, &kp));
        cudaHostNodeParams hp = { on_host, NULL };
        CK(cudaGraphAddHostNode(&h, g2, &k, 1, &hp));
        CK(cudaGraphAddMemcpyNode1D(&cp, g2, &h, 1, y, x, n * sizeof(float), cudaMemcpyDeviceToDevice));
        CK(cudaGraphInstantiate(&ge2, g2, 0));
        for (int i = 0; i < 10; i++)
                CK(cudaGraphLaunch(ge2, s));
        CK(cudaStreamSynchronize(s));
        printf("explicit y %.1f host calls %d\n", checksum(y, n), host_calls);
        // change the kernel's parameters in the executable graph
        b = -2.0f;
        CK(cudaGraphExecKernelNodeSetParams(ge2, k, &kp));
        CK(cudaGraphLaunch(ge2, s));
        CK(cudaStreamSynchronize(s));
        printf("after set params y %.1f\n", checksum(y, n));
        CK(cudaGraphExecDestroy(ge2));
        CK(cudaGraphDestroy(g2));
        CK(cudaGraphExecDestroy(ge));
        CK(cudaGraphDestroy(g));
        CK(cudaFree(x));
        CK(cudaFree(y));
        CK(cudaStreamDestroy(s));
        CK(cudaStreamDestroy(s2));
}

static void pools(void)
{
        cudaStream_t s;
        cudaMemPool_t pool;
        CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        CK(cudaDeviceGetDefaultMemPool(&pool, 0));
        unsigned long long thr = 64ull << 20;
        CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr));
        double total = 0;
        for (int round = 0; round < 50; round++) {
                int n = 1024 * (1 + round % 9);
                float *p;
                CK(cudaMallocAsync(&p, n * sizeof(float), s));
                CK(cudaMemsetAsync(p, 0, n * sizeof(float), s));
                axpb<<<(n + 255) / 256, 256, 0, s>>>(p, 1.0f, (float)round, n);
                /* checksum's cudaMemcpy is on the legacy stream, which does
                 * not wait for a non-blocking one */
                CK(cudaStreamSynchronize(s));
                total += checksum(p, n);
                CK(cudaFreeAsync(p, s));
        }
        CK(cudaStreamSynchronize(s));
        unsigned long long used = 1;
        CK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
        printf("pool total %.1f used after frees %llu\n", total, used);
        CK(cudaMemPoolTrimTo(pool, 0));
        CK(cudaStreamDestroy(s));
}

static void vmm(void)
{
        CUdevice dev;
        CKD(cuDeviceGet(&dev, 0));
        CUmemAllocationProp prop = {};
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = dev;
        size_t gran = 0;
        CKD(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
        printf("granularity %zu\n", gran);
        const size_t chunks = 4, size = chunks * gran;
        CUdeviceptr va;
        CKD(cuMemAddressReserve(&va, 16 * gran, 0, 0, 0));
        CUmemGenericAllocationHandle h[chunks];
        CUmemAccessDesc acc = {};
        acc.location = prop.location;
        acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        for (size_t i = 0; i < chunks; i++) { // grown chunk by chunk, as expandable segments do
                CKD(cuMemCreate(&h[i], gran, &prop, 0));
                CKD(cuMemMap(va + i * gran, gran, 0, h[i], 0));
                CKD(cuMemSetAccess(va + i * gran, gran, &acc, 1));
        }
        const int n = (int)(size / sizeof(float));
        float *x = (float *)va;
        CK(cudaMemset(x, 0, size));
        axpb<<<(n + 255) / 256, 256>>>(x, 1.0f, 4.0f, n);
        CK(cudaDeviceSynchronize());
        printf("vmm sum %.1f\n", checksum(x, n));
        for (size_t i = 0; i < chunks; i++) {
                CKD(cuMemUnmap(va + i * gran, gran));
                CKD(cuMemRelease(h[i]));
        }
        CKD(cuMemAddressFree(va, 16 * gran));
}

int main(void)
{
        CK(cudaSetDevice(0));
        graphs();
        pools();
        vmm();
        printf("rt_families: OK\n");
        return 0;
}
