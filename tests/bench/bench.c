/* SPDX-License-Identifier: MIT */
/*
 * Driver-API micro-benchmarks. The same binary runs on the local driver and
 * through lupine (tests/bench/run.sh runs both in one job); each result is
 * one JSON line on stdout.
 *
 * usage: bench KERNELS_DIR [quick]
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(call) do { \
        CUresult r_ = (call); \
        if (r_ != CUDA_SUCCESS) { \
                fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, (int)r_); \
                exit(1); \
        } \
} while (0)

static double now_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

static void report_latency(const char *name, double *t, int n)
{
        qsort(t, (size_t)n, sizeof(*t), cmp_d);
        printf("{\"case\": \"%s\", \"p50_us\": %.2f, \"p99_us\": %.2f}\n", name, t[n / 2], t[n * 99 / 100]);
        fflush(stdout);
}

static void report_bw(const char *name, size_t bytes, double us)
{
        printf("{\"case\": \"%s\", \"bytes\": %zu, \"gbps\": %.3f, \"us\": %.1f}\n", name, bytes, bytes / us / 1e3, us);
        fflush(stdout);
}

/* A captured graph of 200 small kernels launched again and again: the
 * target is at least 0.9x the local driver's rate. */
static void bench_graph(CUfunction empty, int quick)
{
        const int nodes = 200, launches = quick ? 100 : 1000;
        CUstream s;
        CUgraph g;
        CUgraphExec e;
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        for (int i = 0; i < nodes; i++)
                CK(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
        CK(cuStreamEndCapture(s, &g));
        CK(cuGraphInstantiateWithFlags(&e, g, 0));
        CK(cuGraphLaunch(e, s));
        CK(cuStreamSynchronize(s));
        double a = now_us();
        for (int i = 0; i < launches; i++)
                CK(cuGraphLaunch(e, s));
        CK(cuStreamSynchronize(s));
        double us = now_us() - a;
        printf("{\"case\": \"graph of %d kernels\", \"launches\": %d, \"per_s\": %.0f, \"kernels_per_s\": %.0f, "
               "\"us\": %.1f}\n",
               nodes, launches, launches / us * 1e6, (double)launches * nodes / us * 1e6, us);
        fflush(stdout);
        CK(cuGraphExecDestroy(e));
        CK(cuGraphDestroy(g));
        CK(cuStreamDestroy(s));
}

int main(int argc, char **argv)
{
        CUcontext ctx;
        CUmodule m;
        CUfunction empty;
        char path[4096];
        int quick = argc > 2;
        int iters = quick ? 2000 : 20000;

        if (argc < 2) {
                fprintf(stderr, "usage: %s KERNELS_DIR [quick]\n", argv[0]);
                return 2;
        }
        CK(cuInit(0));
        CK(cuDevicePrimaryCtxRetain(&ctx, 0));
        CK(cuCtxSetCurrent(ctx));
        snprintf(path, sizeof(path), "%s/kernels.ptx", argv[1]);
        CK(cuModuleLoad(&m, path));
        CK(cuModuleGetFunction(&empty, m, "empty_kernel"));
        double *t = malloc(sizeof(double) * (size_t)iters);
        CUdeviceptr d;
        CK(cuMemAlloc(&d, 1 << 20));
        uint8_t small[64] = { 1 };

        /* warm everything once */
        size_t fr, tot;
        CK(cuMemGetInfo(&fr, &tot));
        CK(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, 0, NULL, NULL));
        CK(cuCtxSynchronize());

        for (int i = 0; i < iters; i++) {
                double a = now_us();
                CK(cuMemGetInfo(&fr, &tot));
                t[i] = now_us() - a;
        }
        report_latency("cuMemGetInfo", t, iters);
        for (int i = 0; i < iters; i++) {
                double a = now_us();
                CK(cuCtxSynchronize());
                t[i] = now_us() - a;
        }
        report_latency("cuCtxSynchronize idle", t, iters);
        for (int i = 0; i < iters; i++) {
                double a = now_us();
                CK(cuMemcpyHtoD(d, small, sizeof(small)));
                t[i] = now_us() - a;
        }
        CK(cuCtxSynchronize());
        report_latency("64 B cuMemcpyHtoD", t, iters);
        for (int i = 0; i < iters; i++) {
                double a = now_us();
                CK(cuMemcpyDtoH(small, d, sizeof(small)));
                t[i] = now_us() - a;
        }
        report_latency("64 B cuMemcpyDtoH", t, iters);
        for (int i = 0; i < iters; i++) {
                double a = now_us();
                CK(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, 0, NULL, NULL));
                CK(cuStreamSynchronize(0));
                t[i] = now_us() - a;
        }
        report_latency("launch + stream sync", t, iters);

        int launches = quick ? 20000 : 200000;
        double a = now_us();
        for (int i = 0; i < launches; i++)
                CK(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, 0, NULL, NULL));
        CK(cuCtxSynchronize());
        double us = now_us() - a;
        printf("{\"case\": \"launch throughput\", \"launches\": %d, \"per_s\": %.0f, \"us\": %.1f}\n", launches,
               launches / us * 1e6, us);
        fflush(stdout);
        bench_graph(empty, quick);

        /* stream-ordered allocation: alloc/free pairs on one stream, no
         * synchronisation until the end (through lupine no round trip) */
        int pairs = quick ? 20000 : 200000;
        CUdeviceptr pa;
        a = now_us();
        for (int i = 0; i < pairs; i++) {
                CK(cuMemAllocAsync(&pa, 1 << 20, 0));
                CK(cuMemFreeAsync(pa, 0));
        }
        CK(cuCtxSynchronize());
        us = now_us() - a;
        printf("{\"case\": \"cuMemAllocAsync+cuMemFreeAsync\", \"pairs\": %d, \"per_s\": %.0f, \"us\": %.1f}\n", pairs,
               pairs / us * 1e6, us);
        fflush(stdout);

        const size_t sizes[] = { 64, 64 << 10, 1 << 20, 64 << 20, 1u << 30 };
        size_t maxn = quick ? (64u << 20) : (1u << 30);
        CUdeviceptr big;
        CK(cuMemAlloc(&big, maxn));
        uint8_t *pageable = malloc(maxn), *pinned;
        CK(cuMemAllocHost((void **)&pinned, maxn));
        memset(pageable, 1, maxn);
        memset(pinned, 1, maxn);
        for (int kind = 0; kind < 2; kind++) {
                uint8_t *h = kind ? pinned : pageable;
                const char *kn = kind ? "pinned" : "pageable";
                for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
                        size_t n = sizes[s];
                        if (n > maxn)
                                continue;
                        int reps = n <= (1 << 20) ? 200 : n <= (64u << 20) ? 10 : 3;
                        char name[64];
                        CK(cuMemcpyHtoD(big, h, n));
                        CK(cuCtxSynchronize());
                        a = now_us();
                        for (int r = 0; r < reps; r++)
                                CK(cuMemcpyHtoD(big, h, n));
                        CK(cuCtxSynchronize());
                        snprintf(name, sizeof(name), "HtoD %s", kn);
                        report_bw(name, n, (now_us() - a) / reps);
                        CK(cuMemcpyDtoH(h, big, n));
                        a = now_us();
                        for (int r = 0; r < reps; r++)
                                CK(cuMemcpyDtoH(h, big, n));
                        snprintf(name, sizeof(name), "DtoH %s", kn);
                        report_bw(name, n, (now_us() - a) / reps);
                }
        }
        CK(cuMemFree(big));
        CK(cuMemFreeHost(pinned));
        free(pageable);
        CK(cuMemFree(d));
        free(t);
        return 0;
}
