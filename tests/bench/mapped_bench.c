/* SPDX-License-Identifier: MIT */
/*
 * The two delays of mapped (zero-copy) host memory (docs/mapped.md), on
 * the local driver or through lupine, as JSON lines for report.py:
 *   host -> kernel: the host sets a flag a running kernel spins on; the
 *                   time until the host sees the kernel's answer (a round
 *                   trip: host write to GPU, GPU write to host);
 *   kernel -> host: a launched kernel sets a flag; the time from the launch
 *                   until the host sees it (includes the launch).
 *
 *   mapped_bench KERNELS_DIR [quick]
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CK(call)                                                                                  \
        do {                                                                                      \
                CUresult r_ = (call);                                                             \
                if (r_ != CUDA_SUCCESS) {                                                         \
                        fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, r_); \
                        exit(1);                                                                  \
                }                                                                                 \
        } while (0)

static double now_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int cmp(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

static void report(const char *name, double *t, int n)
{
        qsort(t, n, sizeof(*t), cmp);
        printf("{\"case\": \"%s\", \"iters\": %d, \"p50_us\": %.1f, \"p99_us\": %.1f}\n", name, n, t[n / 2],
               t[(int)(n * 0.99)]);
}

/* Spins until *p == want (at most 10 s); the microseconds waited, or -1. */
static double wait_for(volatile uint32_t *p, uint32_t want, double t0)
{
        while (__atomic_load_n(p, __ATOMIC_ACQUIRE) != want)
                if (now_us() - t0 > 10e6)
                        return -1;
        return now_us() - t0;
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                fprintf(stderr, "usage: mapped_bench KERNELS_DIR [quick]\n");
                return 2;
        }
        int iters = argc > 2 && strcmp(argv[2], "quick") == 0 ? 30 : 300;
        char path[4096];
        static char ptx[1 << 20];
        snprintf(path, sizeof(path), "%s/mapped.ptx", argv[1]);
        FILE *f = fopen(path, "rb");
        if (!f)
                return 1;
        ptx[fread(ptx, 1, sizeof(ptx) - 1, f)] = 0;
        fclose(f);
        CUdevice dev;
        CUcontext ctx;
        CUmodule mod;
        CUfunction fw, fr;
        CK(cuInit(0));
        CK(cuDeviceGet(&dev, 0));
        CK(cuDevicePrimaryCtxRetain(&ctx, dev));
        CK(cuCtxSetCurrent(ctx));
        CK(cuModuleLoadData(&mod, ptx));
        CK(cuModuleGetFunction(&fw, mod, "wait_flag_u32"));
        CK(cuModuleGetFunction(&fr, mod, "raise_wait_u32"));
        volatile uint32_t *m;
        CK(cuMemHostAlloc((void **)&m, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
        CUdeviceptr d0 = (CUdeviceptr)(uintptr_t)m, d1 = d0 + 4;
        unsigned long long timeout = 10000000000ull;
        double *t = calloc(iters, sizeof(*t));
        for (int i = 0; i < iters; i++) {
                m[0] = 0, m[1] = 0;
                void *args[] = { &d0, &d1, &timeout };
                CK(cuLaunchKernel(fw, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
                usleep(2000); /* spinning by now */
                double t0 = now_us();
                __atomic_store_n(&m[0], (uint32_t)i + 1, __ATOMIC_RELEASE);
                t[i] = wait_for(&m[1], (uint32_t)i + 1, t0);
                CK(cuCtxSynchronize());
                if (t[i] < 0)
                        return 1;
        }
        report("mapped: host flag -> spinning kernel -> host sees its answer", t, iters);
        for (int i = 0; i < iters; i++) {
                m[0] = 0, m[1] = 0;
                void *args[] = { &d0, &d1, &timeout };
                double t0 = now_us();
                CK(cuLaunchKernel(fr, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
                t[i] = wait_for(&m[0], 1, t0);
                __atomic_store_n(&m[1], 1u, __ATOMIC_RELEASE);
                CK(cuCtxSynchronize());
                if (t[i] < 0)
                        return 1;
        }
        report("mapped: launch -> kernel sets a flag -> host sees it", t, iters);
        CK(cuMemFreeHost((void *)m));
        return 0;
}
