/* SPDX-License-Identifier: MIT */
/*
 * Managed memory's throughput (docs/managed.md), on the local driver or
 * through lupine, as JSON lines for report.py:
 *   streaming:   back-to-back kernels (saxpy: y = 2x + y) over two managed
 *                buffers, one synchronisation at the end; the bytes the
 *                kernels read and write per second. The same over
 *                cuMemAlloc memory, for the baseline on the same side;
 *   host touch:  the host rewrites all of x, a kernel reads it, the host
 *                reads one value of y after a synchronisation; each
 *                round's time (what a program that alternates pays);
 *   launches:    empty kernels while the managed buffers exist, with a
 *                synchronisation after each or after every 100 (what every
 *                call pays for managed memory it does not use).
 *
 *   managed_bench KERNELS_DIR [quick]
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(call)                                                                                  \
        do {                                                                                      \
                CUresult r_ = (call);                                                             \
                if (r_ != CUDA_SUCCESS) {                                                         \
                        fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, r_); \
                        exit(1);                                                                  \
                }                                                                                 \
        } while (0)

static CUfunction saxpy, empty;

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

static void launch(CUdeviceptr x, CUdeviceptr y, int n)
{
        float a = 2.0f;
        void *args[] = { &a, &x, &y, &n };
        CK(cuLaunchKernel(saxpy, 1024, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
}

/* kernels back to back over x and y, one synchronisation */
static void streaming(const char *what, CUdeviceptr x, CUdeviceptr y, size_t bytes, int rounds)
{
        int n = (int)(bytes / 4);
        launch(x, y, n); /* warm: first touch, migrations, mirrors */
        CK(cuCtxSynchronize());
        double t0 = now_s();
        for (int i = 0; i < rounds; i++)
                launch(x, y, n);
        CK(cuCtxSynchronize());
        double t = now_s() - t0;
        printf("{\"case\": \"%s: kernels streaming\", \"bytes\": %zu, \"gbps\": %.3f}\n", what, bytes,
               3.0 * (double)bytes * rounds / t / 1e9);
}

/* small launches while managed memory is allocated: what each call pays
 * for it (one synchronisation per `batch` launches) */
static void small_launches(size_t bytes, int batch, int total)
{
        double t0 = now_s();
        for (int i = 0; i < total; i++) {
                CK(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
                if ((i + 1) % batch == 0)
                        CK(cuCtxSynchronize());
        }
        CK(cuCtxSynchronize());
        printf("{\"case\": \"managed allocated: empty launches, a sync every %d\", \"bytes\": %zu, \"per_s\": %.1f}\n",
               batch, bytes, total / (now_s() - t0));
}

/* the host rewrites x, a kernel reads it, the host reads y */
static void host_touch(float *x, float *y, size_t bytes, int rounds)
{
        int n = (int)(bytes / 4);
        double *t = calloc((size_t)rounds, sizeof(*t));
        volatile float sink = 0;
        for (int i = 0; i < rounds; i++) {
                double t0 = now_s();
                for (int k = 0; k < n; k++)
                        x[k] = (float)(i + k % 13);
                launch((CUdeviceptr)(uintptr_t)x, (CUdeviceptr)(uintptr_t)y, n);
                CK(cuCtxSynchronize());
                sink += y[n / 2];
                t[i] = (now_s() - t0) * 1e6;
        }
        (void)sink;
        qsort(t, (size_t)rounds, sizeof(*t), cmp);
        printf("{\"case\": \"managed: host writes x, kernel, host reads y\", \"bytes\": %zu, \"p50_us\": %.1f, "
               "\"p99_us\": %.1f}\n",
               bytes, t[rounds / 2], t[(int)(rounds * 0.99)]);
        free(t);
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                fprintf(stderr, "usage: managed_bench KERNELS_DIR [quick]\n");
                return 2;
        }
        int quick = argc > 2 && strcmp(argv[2], "quick") == 0;
        char path[4096];
        static char ptx[1 << 20];
        snprintf(path, sizeof(path), "%s/kernels.ptx", argv[1]);
        FILE *f = fopen(path, "rb");
        if (!f)
                return 1;
        ptx[fread(ptx, 1, sizeof(ptx) - 1, f)] = 0;
        fclose(f);
        CUdevice dev;
        CUcontext ctx;
        CUmodule mod;
        CK(cuInit(0));
        CK(cuDeviceGet(&dev, 0));
        CK(cuDevicePrimaryCtxRetain(&ctx, dev));
        CK(cuCtxSetCurrent(ctx));
        CK(cuModuleLoadData(&mod, ptx));
        CK(cuModuleGetFunction(&saxpy, mod, "saxpy_f32"));
        CK(cuModuleGetFunction(&empty, mod, "empty_kernel"));
        const size_t sizes[] = { 4u << 20, 64u << 20 };
        for (size_t s = 0; s < (quick ? 1u : 2u); s++) {
                size_t bytes = sizes[s];
                int rounds = quick ? 5 : 20;
                CUdeviceptr mx, my, dx, dy;
                CK(cuMemAllocManaged(&mx, bytes, CU_MEM_ATTACH_GLOBAL));
                CK(cuMemAllocManaged(&my, bytes, CU_MEM_ATTACH_GLOBAL));
                CK(cuMemAlloc(&dx, bytes));
                CK(cuMemAlloc(&dy, bytes));
                memset((void *)(uintptr_t)mx, 0, bytes);
                memset((void *)(uintptr_t)my, 0, bytes);
                CK(cuMemsetD32(dx, 0, bytes / 4));
                CK(cuMemsetD32(dy, 0, bytes / 4));
                streaming("device memory", dx, dy, bytes, rounds);
                streaming("managed", mx, my, bytes, rounds);
                host_touch((float *)(uintptr_t)mx, (float *)(uintptr_t)my, bytes, quick ? 5 : 20);
                small_launches(bytes, 1, quick ? 20 : 100);
                small_launches(bytes, 100, quick ? 100 : 1000);
                CK(cuMemFree(mx));
                CK(cuMemFree(my));
                CK(cuMemFree(dx));
                CK(cuMemFree(dy));
        }
        return 0;
}
