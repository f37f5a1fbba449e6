/* SPDX-License-Identifier: MIT */
/*
 * Modules, launches, streams, events, host callbacks, async copies and
 * errors, with every result checked exactly. Runs through lupine (sim or
 * GPU) and, on the GPU machine, straight on the real driver as a baseline.
 *
 * usage: e2e_kernels DIR   (DIR holds kernels.ptx, kernels.fatbin, kernels.cubin)
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "e2e_util.h"

static const char *dir;
static int on_sim, through_lupine;
static CUcontext ctx;

static double now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static CUfunction fn(CUmodule m, const char *name)
{
        CUfunction f;
        CK(cuModuleGetFunction(&f, m, name));
        return f;
}

static void launch1(CUfunction f, unsigned grid, unsigned block, CUstream s, void **params)
{
        CK(cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, s, params, NULL));
}

static void test_compute(CUmodule m)
{
        const int n = 100003;
        float *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
        CUdeviceptr da, db, dc;
        for (int i = 0; i < n; i++) {
                a[i] = (float)i * 0.5f;
                b[i] = 1.0f / (float)(i + 1);
        }
        CK(cuMemAlloc(&da, n * 4));
        CK(cuMemAlloc(&db, n * 4));
        CK(cuMemAlloc(&dc, n * 4));
        CK(cuMemcpyHtoD(da, a, n * 4));
        CK(cuMemcpyHtoD(db, b, n * 4));
        int nn = n;
        void *p1[] = { &da, &db, &dc, &nn };
        launch1(fn(m, "vec_add_f32"), 97, 256, 0, p1);
        CK(cuMemcpyDtoH(c, dc, n * 4));
        for (int i = 0; i < n; i++)
                EXPECT(c[i] == a[i] + b[i]);

        float alpha = 2.5f;
        void *p2[] = { &alpha, &da, &db, &nn };
        launch1(fn(m, "saxpy_f32"), 64, 128, 0, p2);
        CK(cuMemcpyDtoH(c, db, n * 4));
        for (int i = 0; i < n; i++)
                EXPECT(c[i] == fmaf(alpha, a[i], b[i]));

        unsigned *u = malloc(n * 4);
        unsigned long long want = 0, got = 0;
        for (int i = 0; i < n; i++) {
                u[i] = (unsigned)(i * 2654435761u) >> 8;
                want += u[i];
        }
        CUdeviceptr du, dsum;
        CK(cuMemAlloc(&du, n * 4));
        CK(cuMemAlloc(&dsum, 8));
        CK(cuMemcpyHtoD(du, u, n * 4));
        CK(cuMemsetD32(dsum, 0, 2));
        void *p3[] = { &du, &dsum, &nn };
        CK(cuLaunchKernel(fn(m, "reduce_sum_u32"), 40, 1, 1, 256, 1, 1, 0, 0, p3, NULL));
        CK(cuMemcpyDtoH(&got, dsum, 8));
        EXPECT(got == want);

        const int mn = 96;
        int *A = malloc(mn * mn * 4), *B = malloc(mn * mn * 4), *C = malloc(mn * mn * 4);
        for (int i = 0; i < mn * mn; i++) {
                A[i] = (i * 7) % 13 - 6;
                B[i] = (i * 5) % 11 - 5;
        }
        CUdeviceptr dA, dB, dC;
        CK(cuMemAlloc(&dA, mn * mn * 4));
        CK(cuMemAlloc(&dB, mn * mn * 4));
        CK(cuMemAlloc(&dC, mn * mn * 4));
        CK(cuMemcpyHtoD(dA, A, mn * mn * 4));
        CK(cuMemcpyHtoD(dB, B, mn * mn * 4));
        int mnn = mn;
        void *p4[] = { &dA, &dB, &dC, &mnn };
        CK(cuLaunchKernel(fn(m, "matmul_tiled_i32"), mn / 16, mn / 16, 1, 16, 16, 1, 0, 0, p4, NULL));
        CK(cuMemcpyDtoH(C, dC, mn * mn * 4));
        for (int i = 0; i < mn; i++)
                for (int j = 0; j < mn; j++) {
                        int s = 0;
                        for (int k = 0; k < mn; k++)
                                s += A[i * mn + k] * B[k * mn + j];
                        EXPECT(C[i * mn + j] == s);
                }

        /* a struct parameter, and the same launch through CU_LAUNCH_PARAM_BUFFER_POINTER */
        struct { int a; double b; int c[3]; } sp = { 3, 0.5, { 10, 20, 30 } };
        long long out = 0;
        CUdeviceptr dout;
        CK(cuMemAlloc(&dout, 8));
        void *p5[] = { &sp, &dout };
        launch1(fn(m, "struct_param"), 1, 32, 0, p5);
        CK(cuMemcpyDtoH(&out, dout, 8));
        EXPECT(out == 63);
        struct { int a; double b; int c[3]; CUdeviceptr o; } __attribute__((aligned(8))) buf;
        memset(&buf, 0, sizeof(buf));
        buf.a = 1;
        buf.b = 1.0;
        buf.c[0] = 1;
        buf.o = dout;
        size_t bsize = 40; /* sp is 32 bytes (8-aligned), then the pointer */
        void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &bsize, CU_LAUNCH_PARAM_END };
        CK(cuLaunchKernel(fn(m, "struct_param"), 1, 1, 1, 1, 1, 1, 0, 0, NULL, extra));
        CK(cuMemcpyDtoH(&out, dout, 8));
        EXPECT(out == 3);

        CK(cuMemFree(da)); CK(cuMemFree(db)); CK(cuMemFree(dc)); CK(cuMemFree(du)); CK(cuMemFree(dsum));
        CK(cuMemFree(dA)); CK(cuMemFree(dB)); CK(cuMemFree(dC)); CK(cuMemFree(dout));
        free(a); free(b); free(c); free(u); free(A); free(B); free(C);
        printf("  compute: vec_add, saxpy, reduce, matmul, struct params exact\n");
}

static void test_globals(CUmodule m)
{
        CUdeviceptr g;
        size_t gs;
        unsigned v = 0, w = 11;
        CK(cuModuleGetGlobal(&g, &gs, m, "g_bias"));
        EXPECT(gs == 4);
        CK(cuMemcpyDtoH(&v, g, 4));
        EXPECT(v == 7);
        CK(cuMemcpyHtoD(g, &w, 4));
        CUdeviceptr d;
        unsigned h[64];
        CK(cuMemAlloc(&d, sizeof(h)));
        CK(cuMemsetD32(d, 100, 64));
        int n = 64;
        void *p[] = { &d, &n };
        launch1(fn(m, "add_global_u32"), 1, 64, 0, p);
        CK(cuMemcpyDtoH(h, d, sizeof(h)));
        for (int i = 0; i < 64; i++)
                EXPECT(h[i] == 111);
        CK(cuMemFree(d));
        EXPECT_ERR(cuModuleGetGlobal(&g, &gs, m, "no_such_global"), CUDA_ERROR_NOT_FOUND);
        CUfunction f;
        EXPECT_ERR(cuModuleGetFunction(&f, m, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
        printf("  module globals: read, write, used by a kernel\n");
}

static void test_streams_events(CUmodule m)
{
        CUstream s1, s2;
        CUevent e0, e1, e2;
        CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
        CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
        CK(cuEventCreate(&e0, 0));
        CK(cuEventCreate(&e1, 0));
        CK(cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
        CUfunction spin = fn(m, "spin_ns");
        unsigned long long ns = 100000000ull; /* 100 ms */
        void *p[] = { &ns };

        /* event timing */
        CK(cuEventRecord(e0, s1));
        launch1(spin, 1, 1, s1, p);
        CK(cuEventRecord(e1, s1));
        EXPECT_ERR(cuEventQuery(e1), CUDA_ERROR_NOT_READY);
        EXPECT_ERR(cuStreamQuery(s1), CUDA_ERROR_NOT_READY);
        CK(cuEventSynchronize(e1));
        CK(cuEventQuery(e1));
        float ms = 0;
        CK(cuEventElapsedTime(&ms, e0, e1));
        EXPECT(ms >= 90.0f && ms < 2000.0f);
        EXPECT_ERR(cuEventElapsedTime(&ms, e0, e2), CUDA_ERROR_INVALID_HANDLE);

        /* two streams overlap */
        double t0 = now_ms();
        launch1(spin, 1, 1, s1, p);
        launch1(spin, 1, 1, s2, p);
        CK(cuStreamSynchronize(s1));
        CK(cuStreamSynchronize(s2));
        double both = now_ms() - t0;
        EXPECT(both < 180.0);

        /* ordering within a stream and across streams through an event; the
         * result comes back asynchronously into page-locked memory */
        CUdeviceptr d;
        unsigned *h;
        CK(cuMemAllocHost((void **)&h, 256 * sizeof(*h)));
        CK(cuMemAlloc(&d, 256 * sizeof(*h)));
        int n = 256;
        unsigned v1 = 5, v2 = 9;
        void *f1[] = { &d, &v1, &n }, *f2[] = { &d, &v2, &n };
        launch1(spin, 1, 1, s1, p);
        launch1(fn(m, "fill_u32"), 1, 256, s1, f1);
        CK(cuEventRecord(e2, s1));
        CK(cuStreamWaitEvent(s2, e2, 0));
        launch1(fn(m, "fill_u32"), 1, 256, s2, f2);
        memset(h, 0, 256 * sizeof(*h));
        CK(cuMemcpyDtoHAsync(h, d, 256 * sizeof(*h), s2));
        CK(cuStreamSynchronize(s2));
        for (int i = 0; i < 256; i++)
                EXPECT(h[i] == 9);
        /* many async copies in flight at once, landing before the sync */
        unsigned *many;
        CK(cuMemAllocHost((void **)&many, 64 * 256 * sizeof(*many)));
        memset(many, 0, 64 * 256 * sizeof(*many));
        for (int k = 0; k < 64; k++)
                CK(cuMemcpyDtoHAsync(many + k * 256, d, 256 * sizeof(*h), s1));
        CK(cuStreamSynchronize(s1));
        for (int i = 0; i < 64 * 256; i++)
                EXPECT(many[i] == 9);
        CK(cuMemFreeHost(many));
        CK(cuMemFreeHost(h));

        int prio = -1;
        unsigned flags = 0;
        CK(cuStreamGetFlags(s1, &flags));
        EXPECT(flags == CU_STREAM_NON_BLOCKING);
        CK(cuStreamGetPriority(s1, &prio));
        CUcontext sc;
        CK(cuStreamGetCtx(s1, &sc));
        EXPECT(sc == ctx);
        CUstreamCaptureStatus cs;
        CK(cuStreamIsCapturing(s1, &cs));
        EXPECT(cs == CU_STREAM_CAPTURE_STATUS_NONE);
        CK(cuMemFree(d));
        CK(cuEventDestroy(e0)); CK(cuEventDestroy(e1)); CK(cuEventDestroy(e2));
        CK(cuStreamDestroy(s1)); CK(cuStreamDestroy(s2));
        printf("  streams and events: timing %.1f ms, two 100 ms spins on two streams in %.1f ms\n", ms, both);
}

static int cb_order[4], cb_n;
static void CUDA_CB host_fn(void *arg)
{
        cb_order[cb_n++] = (int)(intptr_t)arg;
}

static void test_callbacks(CUmodule m)
{
        CUstream s;
        CK(cuStreamCreate(&s, 0));
        unsigned long long ns = 20000000ull;
        void *p[] = { &ns };
        launch1(fn(m, "spin_ns"), 1, 1, s, p);
        CK(cuLaunchHostFunc(s, host_fn, (void *)1));
        launch1(fn(m, "spin_ns"), 1, 1, s, p);
        CK(cuLaunchHostFunc(s, host_fn, (void *)2));
        CK(cuStreamSynchronize(s));
        EXPECT(cb_n == 2 && cb_order[0] == 1 && cb_order[1] == 2);
        CK(cuStreamDestroy(s));
        printf("  host functions ran in stream order\n");
}

/* Causal order across threads: an async op issued by one thread before a
 * sync op issued by another (after a handshake) is executed first. */
static CUdeviceptr shared_buf;
static pthread_mutex_t mx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int produced;

static void *producer(void *arg)
{
        CK(cuCtxSetCurrent(ctx));
        for (int round = 1; round <= 50; round++) {
                CK(cuMemsetD32Async(shared_buf, (unsigned)round, 1024, 0));
                pthread_mutex_lock(&mx);
                produced = round;
                pthread_cond_broadcast(&cv);
                while (produced != -round)
                        pthread_cond_wait(&cv, &mx);
                pthread_mutex_unlock(&mx);
        }
        return NULL;
}

static void test_causal_order(void)
{
        pthread_t t;
        CK(cuMemAlloc(&shared_buf, 4096));
        EXPECT(pthread_create(&t, NULL, producer, NULL) == 0);
        for (int round = 1; round <= 50; round++) {
                pthread_mutex_lock(&mx);
                while (produced != round)
                        pthread_cond_wait(&cv, &mx);
                pthread_mutex_unlock(&mx);
                unsigned h[1024];
                CK(cuMemcpyDtoH(h, shared_buf, sizeof(h)));
                for (int i = 0; i < 1024; i++)
                        EXPECT(h[i] == (unsigned)round);
                pthread_mutex_lock(&mx);
                produced = -round;
                pthread_cond_broadcast(&cv);
                pthread_mutex_unlock(&mx);
        }
        pthread_join(t, NULL);
        CK(cuMemFree(shared_buf));
        printf("  causal order across threads held 50/50 times\n");
}

struct launcher_arg {
        CUmodule m;
        int id;
};

static void *launcher(void *p)
{
        struct launcher_arg *a = p;
        CUstream s;
        CUdeviceptr d;
        unsigned h[1000];
        int n = 1000;
        CK(cuCtxSetCurrent(ctx));
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CK(cuMemAlloc(&d, sizeof(h)));
        CUfunction f = fn(a->m, "fill_u32");
        for (int i = 0; i < 200; i++) {
                unsigned v = (unsigned)(a->id * 1000 + i);
                void *pp[] = { &d, &v, &n };
                launch1(f, 4, 256, s, pp);
        }
        CK(cuMemcpyDtoHAsync(h, d, sizeof(h), s));
        CK(cuStreamSynchronize(s));
        for (int i = 0; i < 1000; i++)
                EXPECT(h[i] == (unsigned)(a->id * 1000 + 199));
        CK(cuMemFree(d));
        CK(cuStreamDestroy(s));
        return NULL;
}

static void test_multithreaded_launches(CUmodule m)
{
        pthread_t t[4];
        struct launcher_arg a[4];
        for (int i = 0; i < 4; i++) {
                a[i] = (struct launcher_arg){ m, i + 1 };
                EXPECT(pthread_create(&t[i], NULL, launcher, &a[i]) == 0);
        }
        for (int i = 0; i < 4; i++)
                pthread_join(t[i], NULL);
        printf("  4 threads x 200 launches on their own streams\n");
}

static void test_bad_launches(CUmodule m)
{
        CUfunction f = fn(m, "fill_u32");
        CUdeviceptr d;
        CK(cuMemAlloc(&d, 64));
        int n = 16;
        unsigned v = 1;
        void *p[] = { &d, &v, &n };
        EXPECT_ERR(cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, 0, p, NULL), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuLaunchKernel(f, 0, 1, 1, 32, 1, 1, 0, 0, p, NULL), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuLaunchKernel(f, 1, 1, 1, 32, 1, 128, 0, 0, p, NULL), CUDA_ERROR_INVALID_VALUE);
        size_t wrong = 4;
        char buf[64] = { 0 };
        void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &wrong, CU_LAUNCH_PARAM_END };
        if (through_lupine) /* driver 580 accepts a short buffer and then faults the context */
                EXPECT_ERR(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, NULL, extra), CUDA_ERROR_INVALID_VALUE);
        if (through_lupine) /* the real driver reads the missing array and crashes */
                EXPECT_ERR(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
        CK(cuCtxSynchronize()); /* none of those left an error behind */
        CK(cuMemFree(d));

        /* images that are not images */
        CUmodule bad;
        uint8_t junk[256];
        for (int i = 0; i < 256; i++)
                junk[i] = (uint8_t)(i * 37 + 11);
        EXPECT_ERR(cuModuleLoadData(&bad, junk), CUDA_ERROR_INVALID_IMAGE);
        size_t fn_;
        uint8_t *fat = e2e_read_file(dir, "kernels.fatbin", &fn_);
        /* a fatbin whose header cuts its first entry short */
        memset(fat + 8, 0, 8);
        fat[8] = 64;
        if (through_lupine) {
                /* lupine sends exactly the bytes the header claims, so the
                 * driver sees a cut entry (INVALID_PTX when it holds PTX);
                 * the local driver reads past the header's end instead */
                CUresult lr = cuModuleLoadData(&bad, fat);
                EXPECT(lr == CUDA_ERROR_INVALID_IMAGE || lr == CUDA_ERROR_INVALID_PTX);
        }
        free(fat);
        printf("  bad launch configurations and images refused\n");
}

static void test_library(void)
{
        size_t n;
        uint8_t *img = e2e_read_file(dir, "kernels.fatbin", &n);
        CUlibrary lib;
        CUkernel k;
        CUfunction f;
        CK(cuLibraryLoadData(&lib, img, NULL, NULL, 0, NULL, NULL, 0));
        CK(cuLibraryGetKernel(&k, lib, "fill_u32"));
        CK(cuKernelGetFunction(&f, k));
        CUfunction f2;
        CK(cuKernelGetFunction(&f2, k));
        EXPECT(f == f2);
        const char *name = NULL;
        CK(cuKernelGetName(&name, k));
        EXPECT(name && strcmp(name, "fill_u32") == 0);
        int maxt = 0;
        CK(cuKernelGetAttribute(&maxt, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k, 0));
        EXPECT(maxt > 0 && maxt <= 1024);
        CK(cuFuncGetAttribute(&maxt, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
        int nb = 0, mg = 0, bs = 0;
        CK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&nb, f, 256, 0));
        EXPECT(nb > 0);
        CK(cuOccupancyMaxPotentialBlockSize(&mg, &bs, f, NULL, 0, 0));
        EXPECT(bs > 0 && mg > 0);
        size_t off = 99, sz = 0;
        CK(cuFuncGetParamInfo(f, 1, &off, &sz));
        EXPECT(off == 8 && sz == 4);
        EXPECT_ERR(cuFuncGetParamInfo(f, 3, &off, &sz), CUDA_ERROR_INVALID_VALUE);
        CUdeviceptr d;
        unsigned h[512];
        int cnt = 512;
        unsigned v = 42;
        CK(cuMemAlloc(&d, sizeof(h)));
        void *p[] = { &d, &v, &cnt };
        CK(cuLaunchKernel(f, 2, 1, 1, 256, 1, 1, 0, 0, p, NULL));
        CK(cuMemcpyDtoH(h, d, sizeof(h)));
        for (int i = 0; i < 512; i++)
                EXPECT(h[i] == 42);
        CK(cuMemFree(d));
        CK(cuLibraryUnload(lib));
        free(img);
        printf("  library API: load, kernel, function, attributes, occupancy\n");
}

static void test_copies(void)
{
        /* pitched 2D copies and pinned host memory */
        const size_t w = 100, hgt = 37;
        CUdeviceptr d;
        size_t pitch;
        CK(cuMemAllocPitch(&d, &pitch, w, hgt, 4));
        EXPECT(pitch >= w && pitch % 256 == 0);
        uint8_t *src, *dst;
        CK(cuMemAllocHost((void **)&src, w * hgt));
        CK(cuMemHostAlloc((void **)&dst, w * hgt, 0));
        for (size_t i = 0; i < w * hgt; i++)
                src[i] = (uint8_t)(i * 13);
        memset(dst, 0, w * hgt);
        CUDA_MEMCPY2D up = { .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = src, .srcPitch = w,
                             .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = d, .dstPitch = pitch,
                             .WidthInBytes = w, .Height = hgt };
        CK(cuMemcpy2D(&up));
        CUDA_MEMCPY2D down = { .srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = d, .srcPitch = pitch,
                               .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = dst, .dstPitch = w,
                               .WidthInBytes = w, .Height = hgt };
        CK(cuMemcpy2D(&down));
        EXPECT(memcmp(src, dst, w * hgt) == 0);
        unsigned mt = 0;
        CK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)src));
        EXPECT(mt == CU_MEMORYTYPE_HOST);
        /* unified cuMemcpy picks the direction from the pointers */
        memset(dst, 0, w);
        CK(cuMemcpy(d, (CUdeviceptr)(uintptr_t)src, w));
        CK(cuMemcpy((CUdeviceptr)(uintptr_t)dst, d, w));
        EXPECT(memcmp(src, dst, w) == 0);
        CK(cuMemFreeHost(src));
        CK(cuMemFreeHost(dst));
        CK(cuMemFree(d));
        printf("  pitched 2D copies, pinned host memory, unified cuMemcpy\n");
}

static void test_many_launches(CUmodule m, int count)
{
        CUfunction e = fn(m, "empty_kernel");
        double t0 = now_ms();
        for (int i = 0; i < count; i++)
                CK(cuLaunchKernel(e, 1, 1, 1, 32, 1, 1, 0, 0, NULL, NULL));
        CK(cuCtxSynchronize());
        double t = now_ms() - t0;
        printf("  %d empty launches + sync: %.1f ms (%.0f launches/s)\n", count, t, count / t * 1e3);
}

static void test_module_variants(void)
{
        const char *files[] = { "kernels.ptx", "kernels.fatbin", "kernels.cubin" };
        for (int i = 0; i < 3; i++) {
                size_t n;
                uint8_t *img = e2e_read_file(dir, files[i], &n);
                CUmodule m;
                CUresult r = cuModuleLoadData(&m, img);
                if (on_sim && i == 2) {
                        EXPECT(r == CUDA_ERROR_NO_BINARY_FOR_GPU); /* the simulator cannot run SASS */
                        free(img);
                        continue;
                }
                CK(r);
                CUdeviceptr d;
                unsigned h[64];
                int cnt = 64;
                unsigned v = 1000u + (unsigned)i;
                CK(cuMemAlloc(&d, sizeof(h)));
                void *p[] = { &d, &v, &cnt };
                launch1(fn(m, "fill_u32"), 1, 64, 0, p);
                CK(cuMemcpyDtoH(h, d, sizeof(h)));
                for (int j = 0; j < 64; j++)
                        EXPECT(h[j] == v);
                CK(cuMemFree(d));
                CK(cuModuleUnload(m));
                free(img);
        }
        char path[4096];
        snprintf(path, sizeof(path), "%s/kernels.ptx", dir);
        CUmodule m;
        CK(cuModuleLoad(&m, path));
        CK(cuModuleUnload(m));
        EXPECT_ERR(cuModuleLoad(&m, "/nonexistent/kernels.ptx"), CUDA_ERROR_FILE_NOT_FOUND);
        printf("  modules from PTX, fatbin%s and files\n", on_sim ? "" : ", cubin");
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                fprintf(stderr, "usage: %s KERNELS_DIR\n", argv[0]);
                return 2;
        }
        dir = argv[1];
        CUmodule m;
        char name[256];
        e2e_setup("e2e_kernels", name, &ctx, dir, &m);
        on_sim = e2e_on_sim(name);
        through_lupine = e2e_through_lupine(name);

        test_module_variants();
        test_compute(m);
        test_globals(m);
        test_streams_events(m);
        test_callbacks(m);
        test_causal_order();
        test_multithreaded_launches(m);
        test_bad_launches(m);
        test_library();
        test_copies();
        test_many_launches(m, argc > 2 ? atoi(argv[2]) : 10000);
        CK(cuModuleUnload(m));
        if (e2e_failures)
                return 1;
        printf("e2e_kernels: OK\n");
        return 0;
}
