/* SPDX-License-Identifier: MIT */
/*
 * libcuda-sim: streams, events, host functions, host memory and 2D/3D
 * copies. Timing tests use spin_ns (the twin sleeps as long as the GPU
 * would spin) with generous margins: overlap must come in well under the
 * serial time, serialisation at or above it.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <cmocka.h>

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#define assert_cu(call) assert_int_equal((call), CUDA_SUCCESS)
#define MS 1000000ULL

static CUmodule mod;
static CUfunction f_spin, f_fill;

static double now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int group_setup(void **state)
{
        CUcontext ctx;

        setenv("LUPINE_SIM_MEM_MB", "1024", 1);
        if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
            cuCtxSetCurrent(ctx) != CUDA_SUCCESS || cuModuleLoad(&mod, KERNELS_PTX) != CUDA_SUCCESS ||
            cuModuleGetFunction(&f_spin, mod, "spin_ns") != CUDA_SUCCESS ||
            cuModuleGetFunction(&f_fill, mod, "fill_u32") != CUDA_SUCCESS)
                return -1;
        *state = ctx;
        return 0;
}

static int group_teardown(void **state)
{
        (void)state;
        cuModuleUnload(mod);
        cuCtxSetCurrent(NULL);
        return cuDevicePrimaryCtxRelease_v2(0) == CUDA_SUCCESS ? 0 : -1;
}

static void spin(CUstream s, unsigned long long ns)
{
        void *args[] = { &ns };

        assert_cu(cuLaunchKernel(f_spin, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
}

static void fill(CUstream s, CUdeviceptr p, unsigned v, int n)
{
        void *args[] = { &p, &v, &n };

        assert_cu(cuLaunchKernel(f_fill, 2, 1, 1, 64, 1, 1, 0, s, args, NULL));
}

static void test_stream_order(void **state)
{
        CUstream a;
        CUdeviceptr d;
        unsigned *out, pageable[256];
        double t0;

        (void)state;
        assert_cu(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
        assert_cu(cuMemAlloc_v2(&d, 256 * 4));
        assert_cu(cuMemAllocHost_v2((void **)&out, 256 * 4));
        assert_cu(cuMemsetD32_v2(d, 1, 256));
        /* Into pinned memory the copy is queued behind the kernels. */
        spin(a, 50 * MS);
        fill(a, d, 7, 256);
        memset(out, 0, 256 * 4);
        assert_cu(cuMemcpyDtoHAsync_v2(out, d, 256 * 4, a));
        assert_int_equal(cuStreamQuery(a), CUDA_ERROR_NOT_READY);
        assert_int_equal(out[0], 0);
        assert_cu(cuStreamSynchronize(a));
        assert_cu(cuStreamQuery(a));
        for (int i = 0; i < 256; i++)
                assert_int_equal(out[i], 7);
        /* Into pageable memory it is complete on return, as documented. */
        t0 = now_ms();
        spin(a, 30 * MS);
        fill(a, d, 8, 256);
        assert_cu(cuMemcpyDtoHAsync_v2(pageable, d, sizeof(pageable), a));
        assert_true(now_ms() - t0 >= 29);
        assert_int_equal(pageable[255], 8);
        assert_cu(cuStreamDestroy_v2(a));
        assert_cu(cuMemFree_v2(d));
        assert_cu(cuMemFreeHost(out));
}

static void test_overlap_and_legacy(void **state)
{
        CUstream a, b, nb;
        double t0, dt;

        (void)state;
        assert_cu(cuStreamCreate(&a, 0));
        assert_cu(cuStreamCreate(&b, 0));
        assert_cu(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));

        /* Two streams run side by side, blocking or not. */
        t0 = now_ms();
        spin(a, 50 * MS);
        spin(b, 50 * MS);
        assert_cu(cuStreamSynchronize(a));
        assert_cu(cuStreamSynchronize(b));
        dt = now_ms() - t0;
        assert_true(dt >= 49 && dt < 90);

        /* The legacy stream waits for blocking streams, and they for it. */
        t0 = now_ms();
        spin(a, 50 * MS);
        spin(NULL, 50 * MS);
        spin(b, 50 * MS);
        assert_cu(cuStreamSynchronize(b));
        dt = now_ms() - t0;
        assert_true(dt >= 149);

        /* A non-blocking stream ignores the legacy stream. */
        t0 = now_ms();
        spin(CU_STREAM_LEGACY, 50 * MS);
        spin(nb, 50 * MS);
        assert_cu(cuStreamSynchronize(nb));
        assert_cu(cuStreamSynchronize(NULL));
        dt = now_ms() - t0;
        assert_true(dt >= 49 && dt < 90);

        /* A synchronous copy runs after the legacy stream's work. */
        {
                CUdeviceptr d;
                unsigned v[64];

                assert_cu(cuMemAlloc_v2(&d, sizeof(v)));
                spin(a, 30 * MS);
                fill(a, d, 9, 64);
                spin(NULL, 1);  /* orders after stream a */
                assert_cu(cuMemcpyDtoH_v2(v, d, sizeof(v)));
                assert_int_equal(v[0], 9);
                assert_int_equal(v[63], 9);
                assert_cu(cuMemFree_v2(d));
        }
        assert_cu(cuStreamDestroy_v2(a));
        assert_cu(cuStreamDestroy_v2(b));
        assert_cu(cuStreamDestroy_v2(nb));
}

static void test_events(void **state)
{
        CUevent start, end, notime, never;
        CUstream s;
        float ms;

        (void)state;
        assert_cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        assert_cu(cuEventCreate(&start, CU_EVENT_DEFAULT));
        assert_cu(cuEventCreate(&end, CU_EVENT_BLOCKING_SYNC));
        assert_cu(cuEventCreate(&notime, CU_EVENT_DISABLE_TIMING));
        assert_cu(cuEventCreate(&never, 0));
        assert_int_equal(cuEventCreate(&never, 0x100), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuEventCreate(&never, CU_EVENT_INTERPROCESS), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuEventQuery(never));         /* never recorded: complete */
        assert_cu(cuEventSynchronize(never));

        assert_cu(cuEventRecord(start, s));
        spin(s, 40 * MS);
        assert_cu(cuEventRecordWithFlags(end, s, CU_EVENT_RECORD_DEFAULT));
        assert_cu(cuEventRecord(notime, s));
        assert_int_equal(cuEventQuery(end), CUDA_ERROR_NOT_READY);
        assert_int_equal(cuEventElapsedTime_v2(&ms, start, end), CUDA_ERROR_NOT_READY);
        assert_cu(cuEventSynchronize(end));
        assert_cu(cuEventQuery(end));
        assert_cu(cuEventElapsedTime_v2(&ms, start, end));
        assert_true(ms >= 39.5f && ms < 1000.0f);
        assert_cu(cuEventElapsedTime(&ms, start, start));
        assert_true(ms == 0.0f);
        assert_int_equal(cuEventElapsedTime_v2(&ms, start, notime), CUDA_ERROR_INVALID_HANDLE);
        assert_int_equal(cuEventElapsedTime_v2(&ms, start, never), CUDA_ERROR_INVALID_HANDLE);
        assert_int_equal(cuEventRecordWithFlags(end, s, 0x10), CUDA_ERROR_INVALID_VALUE);

        /* A stream waits for an event recorded on another. */
        {
                CUstream w;
                CUdeviceptr d;
                unsigned v = 0;
                double t0 = now_ms();

                assert_cu(cuStreamCreate(&w, CU_STREAM_NON_BLOCKING));
                assert_cu(cuMemAlloc_v2(&d, 4));
                assert_cu(cuMemsetD32_v2(d, 0, 1));
                spin(s, 40 * MS);
                assert_cu(cuEventRecord(end, s));
                assert_cu(cuStreamWaitEvent(w, end, 0));
                fill(w, d, 5, 1);
                assert_cu(cuMemcpyDtoHAsync_v2(&v, d, 4, w));
                assert_cu(cuStreamSynchronize(w));
                assert_true(now_ms() - t0 >= 39);
                assert_int_equal(v, 5);
                assert_int_equal(cuStreamWaitEvent(w, end, 0x8), CUDA_ERROR_INVALID_VALUE);
                assert_cu(cuStreamWaitEvent(w, never, 0));      /* waits for nothing */
                assert_cu(cuStreamSynchronize(w));
                assert_cu(cuStreamDestroy_v2(w));
                assert_cu(cuMemFree_v2(d));
        }
        /* Destroying an event with a record in flight is fine. */
        spin(s, 10 * MS);
        assert_cu(cuEventRecord(never, s));
        assert_cu(cuEventDestroy_v2(never));
        assert_int_equal(cuEventQuery(never), CUDA_ERROR_INVALID_HANDLE);
        assert_int_equal(cuEventDestroy_v2(never), CUDA_ERROR_INVALID_HANDLE);
        assert_cu(cuStreamSynchronize(s));
        assert_cu(cuEventDestroy_v2(start));
        assert_cu(cuEventDestroy_v2(end));
        assert_cu(cuEventDestroy_v2(notime));
        assert_cu(cuStreamDestroy_v2(s));
}

#define NFUNCS 200

struct order {
        pthread_mutex_t mu;
        int log[NFUNCS + 8];
        int n;
};

struct order_item {
        struct order *o;
        int id;
};

static void record_id(void *p)
{
        struct order_item *it = p;

        pthread_mutex_lock(&it->o->mu);
        it->o->log[it->o->n++] = it->id;
        pthread_mutex_unlock(&it->o->mu);
}

/* No cmocka asserts here: this runs on the stream's thread. */
static void record_cb(CUstream s, CUresult status, void *p)
{
        struct order_item *it = p, bad = { .o = it->o, .id = -1 };

        (void)s;
        record_id(status == CUDA_SUCCESS ? it : &bad);
}

static void test_host_funcs(void **state)
{
        static struct order o = { .mu = PTHREAD_MUTEX_INITIALIZER };
        static struct order_item items[NFUNCS];
        CUstream s;

        (void)state;
        assert_cu(cuStreamCreate(&s, 0));
        spin(s, 20 * MS);
        for (int i = 0; i < NFUNCS; i++) {
                items[i] = (struct order_item){ .o = &o, .id = i };
                if (i % 3 == 0)
                        assert_cu(cuStreamAddCallback(s, record_cb, &items[i], 0));
                else
                        assert_cu(cuLaunchHostFunc(i % 2 ? s : NULL, record_id, &items[i]));
        }
        assert_int_equal(o.n, 0);       /* all behind the spin */
        assert_cu(cuCtxSynchronize());
        assert_int_equal(o.n, NFUNCS);
        for (int i = 0; i < NFUNCS; i++)
                assert_int_equal(o.log[i], i);
        assert_int_equal(cuLaunchHostFunc(s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuStreamAddCallback(s, record_cb, NULL, 1), CUDA_ERROR_INVALID_VALUE);

        /* Destroying a stream lets its work finish. */
        o.n = 0;
        spin(s, 20 * MS);
        assert_cu(cuLaunchHostFunc(s, record_id, &items[7]));
        assert_cu(cuStreamDestroy_v2(s));
        assert_int_equal(cuLaunchHostFunc(s, record_id, &items[7]), CUDA_ERROR_INVALID_HANDLE);
        assert_cu(cuCtxSynchronize());
        assert_int_equal(o.n, 1);
        assert_int_equal(o.log[0], 7);
}

static void test_stream_properties(void **state)
{
        CUcontext ctx = *state, got;
        CUgreenCtx green;
        CUstream s;
        CUstreamCaptureStatus cs;
        cuuint64_t cid;
        size_t ndeps;
        unsigned flags;
        unsigned long long id, id2;
        int prio, least, greatest;
        CUdevice dev;

        assert_cu(cuCtxGetStreamPriorityRange(&least, &greatest));
        assert_int_equal(least, 0);
        assert_int_equal(greatest, -5);
        assert_cu(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, -100));
        assert_cu(cuStreamGetPriority(s, &prio));
        assert_int_equal(prio, -5);
        assert_cu(cuStreamGetFlags(s, &flags));
        assert_int_equal(flags, CU_STREAM_NON_BLOCKING);
        assert_cu(cuStreamGetCtx(s, &got));
        assert_ptr_equal(got, ctx);
        assert_cu(cuStreamGetCtx_v2(s, &got, &green));
        assert_null(green);
        assert_cu(cuStreamGetDevice(s, &dev));
        assert_int_equal(dev, 0);
        assert_cu(cuStreamGetId(s, &id));
        assert_cu(cuStreamGetId(NULL, &id2));
        assert_true(id != id2);
        assert_cu(cuStreamGetCtx(NULL, &got));
        assert_ptr_equal(got, ctx);
        assert_cu(cuStreamIsCapturing(s, &cs));
        assert_int_equal(cs, CU_STREAM_CAPTURE_STATUS_NONE);
        assert_cu(cuStreamGetCaptureInfo_v3(NULL, &cs, &cid, NULL, NULL, NULL, &ndeps));
        assert_int_equal(cs, CU_STREAM_CAPTURE_STATUS_NONE);
        assert_int_equal(ndeps, 0);
        assert_int_equal(cuStreamGetPriority(s, NULL), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuStreamDestroy_v2(s));
        assert_int_equal(cuStreamGetFlags(s, &flags), CUDA_ERROR_INVALID_HANDLE);
        assert_cu(cuStreamCreateWithPriority(&s, 0, 100));
        assert_cu(cuStreamGetPriority(s, &prio));
        assert_int_equal(prio, 0);
        assert_cu(cuStreamDestroy_v2(s));
}

/* ---- 2D / 3D copies ---- */

static void fill_pattern(unsigned char *p, size_t n, unsigned seed)
{
        for (size_t i = 0; i < n; i++)
                p[i] = (unsigned char)(i * 131 + seed * 7 + (i >> 9));
}

static void test_copy_2d(void **state)
{
        const size_t w = 100, h = 37, hpitch = 131;
        unsigned char *src = malloc(hpitch * h), *dst = malloc(hpitch * h), *want = malloc(hpitch * h);
        CUdeviceptr d, d2;
        size_t pitch;
        CUDA_MEMCPY2D c;

        (void)state;
        fill_pattern(src, hpitch * h, 3);
        assert_cu(cuMemAllocPitch_v2(&d, &pitch, w + 8, h, 4));
        assert_int_equal(pitch, 512);
        assert_int_equal(cuMemAllocPitch_v2(&d2, &pitch, w, h, 3), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemAllocPitch_v2(&d2, &pitch, w + 8, h, 4));
        /* host (offset 5, 2) -> device (offset 3, 1) */
        c = (CUDA_MEMCPY2D){ .srcXInBytes = 5, .srcY = 2, .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = src,
                             .srcPitch = hpitch, .dstXInBytes = 3, .dstY = 1,
                             .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = d, .dstPitch = pitch,
                             .WidthInBytes = w - 5, .Height = h - 2 };
        assert_cu(cuMemcpy2D_v2(&c));
        /* device -> device, whole rows */
        c = (CUDA_MEMCPY2D){ .srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = d, .srcPitch = pitch,
                             .dstMemoryType = CU_MEMORYTYPE_UNIFIED, .dstDevice = d2, .dstPitch = pitch,
                             .WidthInBytes = w + 8, .Height = h };
        assert_cu(cuMemcpy2DUnaligned_v2(&c));
        /* device -> host, async */
        memset(dst, 0xee, hpitch * h);
        c = (CUDA_MEMCPY2D){ .srcXInBytes = 3, .srcY = 1, .srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = d2,
                             .srcPitch = pitch, .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = dst,
                             .dstPitch = hpitch, .WidthInBytes = w - 5, .Height = h - 2 };
        assert_cu(cuMemcpy2DAsync_v2(&c, NULL));
        assert_cu(cuStreamSynchronize(NULL));
        memset(want, 0xee, hpitch * h);
        for (size_t y = 0; y < h - 2; y++)
                memcpy(want + y * hpitch, src + (y + 2) * hpitch + 5, w - 5);
        assert_memory_equal(dst, want, hpitch * h);

        /* rules */
        c.dstPitch = w - 6;     /* narrower than a row */
        assert_int_equal(cuMemcpy2D_v2(&c), CUDA_ERROR_INVALID_VALUE);
        c.dstPitch = hpitch;
        c.srcMemoryType = CU_MEMORYTYPE_ARRAY; /* a NULL array (sim/sim_array.c) */
        assert_int_equal(cuMemcpy2D_v2(&c), CUDA_ERROR_INVALID_HANDLE);
        c.srcMemoryType = (CUmemorytype)99;
        assert_int_equal(cuMemcpy2D_v2(&c), CUDA_ERROR_INVALID_VALUE);
        c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
        c.Height = h + 10;      /* runs past the allocation */
        assert_int_equal(cuMemcpy2D_v2(&c), CUDA_ERROR_INVALID_VALUE);
        c.Height = 0;
        assert_cu(cuMemcpy2D_v2(&c));
        assert_int_equal(cuMemcpy2D_v2(NULL), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemFree_v2(d));
        assert_cu(cuMemFree_v2(d2));
        free(src);
        free(dst);
        free(want);
}

static void test_copy_3d(void **state)
{
        const size_t w = 24, h = 9, depth = 5, hp = 32, hh = 12;
        size_t bytes = hp * hh * (depth + 2);
        unsigned char *src = malloc(bytes), *dst = malloc(bytes), *want = malloc(bytes);
        const size_t dp = 64, dh = 10;
        CUdeviceptr d;
        CUDA_MEMCPY3D c;

        (void)state;
        fill_pattern(src, bytes, 5);
        assert_cu(cuMemAlloc_v2(&d, dp * dh * depth));
        c = (CUDA_MEMCPY3D){ .srcXInBytes = 4, .srcY = 2, .srcZ = 1, .srcMemoryType = CU_MEMORYTYPE_HOST,
                             .srcHost = src, .srcPitch = hp, .srcHeight = hh,
                             .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = d, .dstPitch = dp,
                             .dstHeight = dh, .WidthInBytes = w, .Height = h, .Depth = depth };
        assert_cu(cuMemcpy3D_v2(&c));
        memset(dst, 0, bytes);
        c = (CUDA_MEMCPY3D){ .srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = d, .srcPitch = dp,
                             .srcHeight = dh, .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = dst,
                             .dstPitch = hp, .dstHeight = hh, .WidthInBytes = w, .Height = h, .Depth = depth };
        assert_cu(cuMemcpy3DAsync_v2(&c, CU_STREAM_PER_THREAD));
        assert_cu(cuCtxSynchronize());
        memset(want, 0, bytes);
        for (size_t z = 0; z < depth; z++)
                for (size_t y = 0; y < h; y++)
                        memcpy(want + (z * hh + y) * hp, src + ((z + 1) * hh + y + 2) * hp + 4, w);
        assert_memory_equal(dst, want, bytes);
        c.reserved0 = (void *)1;
        assert_int_equal(cuMemcpy3D_v2(&c), CUDA_ERROR_INVALID_VALUE);
        c.reserved0 = NULL;
        c.srcHeight = h - 1;    /* a slice shorter than the rows copied */
        assert_int_equal(cuMemcpy3D_v2(&c), CUDA_ERROR_INVALID_VALUE);
        c.srcHeight = dh;
        c.Depth = depth + 1;    /* one slice too many */
        assert_int_equal(cuMemcpy3D_v2(&c), CUDA_ERROR_INVALID_VALUE);
        c.Depth = depth;
        c.dstMemoryType = CU_MEMORYTYPE_ARRAY; /* a NULL array */
        assert_int_equal(cuMemcpy3D_v2(&c), CUDA_ERROR_INVALID_HANDLE);
        assert_cu(cuMemFree_v2(d));
        free(src);
        free(dst);
        free(want);
}

/* ---- host memory ---- */

static void test_host_memory(void **state)
{
        CUcontext ctx = *state, got;
        unsigned *pinned, *p2, flags, type, v[64];
        unsigned char *reg = aligned_alloc(4096, 8192);
        CUdeviceptr dp, d;
        void *hp;

        assert_cu(cuMemAllocHost_v2((void **)&pinned, 256));
        assert_cu(cuMemHostAlloc((void **)&p2, 100, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_WRITECOMBINED));
        assert_int_equal(cuMemHostAlloc((void **)&p2, 100, 0x80), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemHostGetFlags(&flags, p2));
        assert_int_equal(flags, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_WRITECOMBINED | CU_MEMHOSTALLOC_DEVICEMAP);
        assert_cu(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)pinned));
        assert_int_equal(type, CU_MEMORYTYPE_HOST);
        assert_cu(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, (CUdeviceptr)(pinned + 3)));
        assert_ptr_equal(hp, pinned + 3);
        assert_cu(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)pinned));
        assert_ptr_equal(got, ctx);
        assert_cu(cuMemHostGetDevicePointer_v2(&dp, pinned, 0));
        assert_int_equal(dp, (CUdeviceptr)pinned);
        assert_int_equal(cuMemHostGetDevicePointer_v2(&dp, pinned, 1), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemHostGetDevicePointer_v2(&dp, v, 0), CUDA_ERROR_INVALID_VALUE);

        /* A kernel writes mapped host memory directly. */
        fill(NULL, dp, 77, 64);
        assert_cu(cuCtxSynchronize());
        assert_int_equal(pinned[0], 77);
        assert_int_equal(pinned[63], 77);
        assert_int_equal(pinned[64], 0);

        /* Registered memory: the caller's pages, known as host memory. */
        assert_cu(cuMemHostRegister_v2(reg, 8192, CU_MEMHOSTREGISTER_DEVICEMAP));
        assert_int_equal(cuMemHostRegister_v2(reg + 100, 10, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
        assert_int_equal(cuMemHostRegister_v2(reg, 10, CU_MEMHOSTREGISTER_IOMEMORY), CUDA_ERROR_NOT_SUPPORTED);
        assert_cu(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(reg + 8000)));
        assert_int_equal(type, CU_MEMORYTYPE_HOST);
        assert_cu(cuMemAlloc_v2(&d, 8192));
        memset(reg, 0x5a, 8192);
        assert_cu(cuMemcpy(d, (CUdeviceptr)reg, 8192));       /* unified: host -> device */
        memset(reg, 0, 8192);
        assert_cu(cuMemcpyAsync((CUdeviceptr)reg, d, 4096, NULL));
        assert_cu(cuStreamSynchronize(NULL));
        assert_int_equal(reg[0], 0x5a);
        assert_int_equal(reg[4095], 0x5a);
        assert_int_equal(reg[4096], 0);
        assert_cu(cuMemcpyPeer(d, ctx, (CUdeviceptr)pinned, ctx, 256));
        assert_cu(cuMemcpyDtoH_v2(v, d, sizeof(v)));
        assert_int_equal(v[0], 77);
        assert_int_equal(cuMemcpyPeer(d, (CUcontext)(uintptr_t)8, d, ctx, 4), CUDA_ERROR_INVALID_CONTEXT);
        assert_cu(cuMemHostUnregister(reg));
        assert_int_equal(cuMemHostUnregister(reg), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
        assert_int_equal(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)reg),
                         CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemHostRegister_v2(reg, 4096, CU_MEMHOSTREGISTER_READ_ONLY));
        assert_int_equal(cuMemcpyHtoD_v2((CUdeviceptr)reg, v, 4), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemHostUnregister(reg));
        /* memory the process does not have: the driver's INVALID_VALUE */
        void *hole = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        assert_true(hole != MAP_FAILED);
        munmap((char *)hole + 4096, 4096);
        assert_int_equal(cuMemHostRegister_v2(hole, 3 * 4096, CU_MEMHOSTREGISTER_DEVICEMAP), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemHostRegister_v2(hole, 4096, CU_MEMHOSTREGISTER_DEVICEMAP));
        assert_cu(cuMemHostUnregister(hole));
        munmap(hole, 4096);
        munmap((char *)hole + 8192, 4096);

        assert_int_equal(cuMemFree_v2((CUdeviceptr)pinned), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemFreeHost(pinned));
        assert_int_equal(cuMemFreeHost(pinned), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemFreeHost(p2));
        assert_cu(cuMemFree_v2(d));
        free(reg);
}

/* Context teardown with work in flight: the work finishes first. */
static void test_ctx_destroy_pending(void **state)
{
        CUcontext primary = *state, ctx;
        CUmodule m;
        CUfunction f;
        CUstream s;
        unsigned long long ns = 30 * MS;
        void *args[] = { &ns };
        double t0;

        assert_cu(cuCtxCreate_v2(&ctx, 0, 0));
        assert_cu(cuModuleLoad(&m, KERNELS_PTX));
        assert_cu(cuModuleGetFunction(&f, m, "spin_ns"));
        assert_cu(cuStreamCreate(&s, 0));
        t0 = now_ms();
        assert_cu(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
        assert_cu(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        assert_cu(cuCtxDestroy_v2(ctx));
        assert_true(now_ms() - t0 >= 59);
        assert_int_equal(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
        assert_cu(cuCtxSetCurrent(primary));
}

/* Many threads, each with its own stream, all at once. */
static void *worker(void *p)
{
        CUcontext ctx = p;
        CUstream s;
        CUdeviceptr d;
        unsigned v[128];
        uintptr_t bad = 0;

        if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS || cuStreamCreate(&s, 0) != CUDA_SUCCESS ||
            cuMemAlloc_v2(&d, sizeof(v)) != CUDA_SUCCESS)
                return (void *)1;
        for (unsigned i = 0; i < 50; i++) {
                unsigned n = 128;
                void *args[] = { &d, &i, &n };

                if (cuLaunchKernel(f_fill, 1, 1, 1, 32, 1, 1, 0, s, args, NULL) != CUDA_SUCCESS ||
                    cuMemcpyDtoHAsync_v2(v, d, sizeof(v), s) != CUDA_SUCCESS ||
                    cuStreamSynchronize(s) != CUDA_SUCCESS || v[127] != i)
                        bad++;
        }
        if (cuStreamDestroy_v2(s) != CUDA_SUCCESS || cuMemFree_v2(d) != CUDA_SUCCESS)
                bad++;
        return (void *)bad;
}

static void test_threads(void **state)
{
        pthread_t th[8];

        for (int i = 0; i < 8; i++)
                assert_int_equal(pthread_create(&th[i], NULL, worker, *state), 0);
        for (int i = 0; i < 8; i++) {
                void *ret;

                pthread_join(th[i], &ret);
                assert_ptr_equal(ret, NULL);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_stream_order),
                cmocka_unit_test(test_overlap_and_legacy),
                cmocka_unit_test(test_events),
                cmocka_unit_test(test_host_funcs),
                cmocka_unit_test(test_stream_properties),
                cmocka_unit_test(test_copy_2d),
                cmocka_unit_test(test_copy_3d),
                cmocka_unit_test(test_host_memory),
                cmocka_unit_test(test_ctx_destroy_pending),
                cmocka_unit_test(test_threads),
        };

        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
