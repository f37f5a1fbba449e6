/* SPDX-License-Identifier: MIT */
/*
 * The stream-ordered allocator (cuMemAllocAsync and the cuMemPool family),
 * checked against the driver's documented behaviour so that the same
 * program runs on the real driver unchanged (the lead diffs the two runs).
 *
 *   e2e_pools KERNELS_DIR           default pool, created pools, attributes,
 *                                   reuse on one stream and across streams
 *                                   (data verified), release threshold and
 *                                   trim at stream, event and context
 *                                   synchronisation, bad input
 *   e2e_pools KERNELS_DIR restart   live pool allocations with data, then
 *                                   one round per line on stdin (the test
 *                                   restarts the daemon between lines):
 *                                   data intact, attributes kept, allocations
 *                                   and frees go on
 *
 * Whether memory was reused is not the driver's promise; the program says
 * what it saw ("reuse ...: yes/no") and tests/e2e/run_e2e.py checks those
 * lines for lupine.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream);

#define KIB     1024ull
#define MIB     (1024ull * 1024ull)
#define N_WORDS (64 * 1024) /* 256 KiB buffers */

static CUfunction spin_fn, fill_fn;
static unsigned host[2 * N_WORDS]; /* the largest buffer read back */

static void spin(CUstream st, unsigned long long ns)
{
        void *p[] = { &ns };
        CK(cuLaunchKernel(spin_fn, 1, 1, 1, 1, 1, 1, 0, st, p, NULL));
}

static void fill_kernel(CUdeviceptr d, unsigned v, int n, CUstream st)
{
        void *p[] = { &d, &v, &n };
        CK(cuLaunchKernel(fill_fn, 16, 1, 1, 128, 1, 1, 0, st, p, NULL));
}

/* every word of d[0..n) is v (read back on stream st, then synchronised) */
static int holds(CUdeviceptr d, unsigned v, int n, CUstream st)
{
        memset(host, 0, sizeof(host));
        CK(cuMemcpyDtoHAsync(host, d, (size_t)n * 4, st));
        CK(cuStreamSynchronize(st));
        for (int i = 0; i < n; i++) {
                if (host[i] != v) {
                        fprintf(stderr, "word %d is %#x, expected %#x\n", i, host[i], v);
                        return 0;
                }
        }
        return 1;
}

static cuuint64_t attr64(CUmemoryPool p, CUmemPool_attribute a)
{
        cuuint64_t v = ~0ull;
        CK(cuMemPoolGetAttribute(p, a, &v));
        return v;
}

static int attr_int(CUmemoryPool p, CUmemPool_attribute a)
{
        int v = -1;
        CK(cuMemPoolGetAttribute(p, a, &v));
        return v;
}

static void set64(CUmemoryPool p, CUmemPool_attribute a, cuuint64_t v)
{
        CK(cuMemPoolSetAttribute(p, a, &v));
}

static void set_int(CUmemoryPool p, CUmemPool_attribute a, int v)
{
        CK(cuMemPoolSetAttribute(p, a, &v));
}

static CUmemoryPool new_pool(size_t max_size)
{
        CUmemPoolProps props;
        CUmemoryPool p;
        memset(&props, 0, sizeof(props));
        props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        props.location.id = 0;
        props.maxSize = max_size;
        CK(cuMemPoolCreate(&p, &props));
        return p;
}

static void default_pool(CUstream s)
{
        CUmemoryPool dp, cur, owner = NULL;
        CUdeviceptr p, q, base = 0;
        size_t size = 0;
        int v = 0;

        CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0));
        EXPECT(v == 1);
        CK(cuDeviceGetDefaultMemPool(&dp, 0));
        CK(cuDeviceGetMemPool(&cur, 0));
        EXPECT(dp == cur);
        /* documented defaults */
        EXPECT(attr64(dp, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) == 0);
        EXPECT(attr_int(dp, CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES) == 1);
        EXPECT(attr_int(dp, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC) == 1);
        EXPECT(attr_int(dp, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES) == 1);

        CK(cuMemAllocAsync(&p, N_WORDS * 4, s));
        EXPECT(p != 0);
        fill_kernel(p, 0xa1a1u, N_WORDS, s);
        EXPECT(holds(p, 0xa1a1u, N_WORDS, s));
        CK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p + 4 * KIB));
        EXPECT(owner == dp);
        CK(cuMemGetAddressRange(&base, &size, p + 100));
        EXPECT(base == p && size >= N_WORDS * 4);
        EXPECT(attr64(dp, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) >= N_WORDS * 4);
        EXPECT(attr64(dp, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) >= attr64(dp, CU_MEMPOOL_ATTR_USED_MEM_CURRENT));

        /* the same stream: stream order makes reuse safe */
        CK(cuMemFreeAsync(p, s));
        CK(cuMemAllocAsync(&q, N_WORDS * 4, s));
        fprintf(stderr, "reuse on the same stream: %s\n", q == p ? "yes" : "no");
        CK(cuMemsetD32Async(q, 0xb2b2u, N_WORDS, s));
        EXPECT(holds(q, 0xb2b2u, N_WORDS, s));
        CK(cuMemFreeAsync(q, s));
        EXPECT_ERR(cuMemFreeAsync(q, s), CUDA_ERROR_INVALID_VALUE); /* twice */
        CK(cuStreamSynchronize(s));
}

/*
 * s1 uses A for a long time and frees it; s2 allocates as much from the
 * same pool at once. If it gets A's memory, the allocator must order s2
 * after s1's free: otherwise s2's memset lands while s1 still spins and
 * s1 copies out the wrong value.
 */
static int cross_stream(CUmemoryPool pool, CUstream s1, CUstream s2, const char *what)
{
        /* 2 MiB: the whole of what a pool reserves at a time, so that s2
         * has no untouched memory to take instead (a fresh pool) */
        const size_t n = 2 * MIB;
        CUdeviceptr a, b, out1, out2;
        CK(cuMemAlloc(&out1, N_WORDS * 4));
        CK(cuMemAlloc(&out2, N_WORDS * 4));
        CK(cuMemAllocFromPoolAsync(&a, n, pool, s1));
        CK(cuMemsetD32Async(a, 1, n / 4, s1));
        spin(s1, 150000000ull); /* 150 ms */
        CK(cuMemcpyDtoDAsync(out1, a, N_WORDS * 4, s1));
        CK(cuMemFreeAsync(a, s1));
        CK(cuMemAllocFromPoolAsync(&b, n, pool, s2));
        CK(cuMemsetD32Async(b, 2, n / 4, s2));
        CK(cuMemcpyDtoDAsync(out2, b, N_WORDS * 4, s2));
        CK(cuMemFreeAsync(b, s2));
        fprintf(stderr, "reuse across streams (%s): %s\n", what, a == b ? "yes" : "no");
        CK(cuCtxSynchronize());
        EXPECT(holds(out1, 1, N_WORDS, s1));
        EXPECT(holds(out2, 2, N_WORDS, s2));
        CK(cuMemFree(out1));
        CK(cuMemFree(out2));
        return a == b;
}

static void reuse_attrs(CUstream s1, CUstream s2)
{
        CUmemoryPool pool = new_pool(0);
        cross_stream(pool, s1, s2, "internal dependencies");
        CK(cuMemPoolDestroy(pool));
        pool = new_pool(0);

        /* no inserted dependencies, no opportunistic reuse: s2 must not get
         * memory whose free it cannot be ordered after */
        set_int(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, 0);
        set_int(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, 0);
        EXPECT(attr_int(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES) == 0);
        EXPECT(attr_int(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC) == 0);
        cross_stream(pool, s1, s2, "no dependencies allowed");

        /* a free seen complete (a synchronisation) may serve another stream */
        set_int(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, 1);
        CUdeviceptr a, b;
        CK(cuMemAllocFromPoolAsync(&a, N_WORDS * 4, pool, s1));
        CK(cuMemFreeAsync(a, s1));
        CK(cuStreamSynchronize(s1));
        CK(cuMemAllocFromPoolAsync(&b, N_WORDS * 4, pool, s2));
        fprintf(stderr, "reuse across streams (opportunistic, after a sync): %s\n", a == b ? "yes" : "no");
        CK(cuMemsetD32Async(b, 3, N_WORDS, s2));
        EXPECT(holds(b, 3, N_WORDS, s2));
        CK(cuMemFreeAsync(b, s2));
        CK(cuStreamSynchronize(s2));
        CK(cuMemPoolDestroy(pool));
}

/* Allocates and frees 8 MiB on s, then synchronises the way `how` says. */
static void churn(CUmemoryPool pool, CUstream s, int how)
{
        CUdeviceptr p;
        CUevent ev;
        CK(cuMemAllocFromPoolAsync(&p, 8 * MIB, pool, s));
        CK(cuMemsetD8Async(p, 7, 8 * MIB, s));
        CK(cuMemFreeAsync(p, s));
        switch (how) {
        case 0:
                CK(cuStreamSynchronize(s));
                break;
        case 1:
                CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
                CK(cuEventRecord(ev, s));
                CK(cuEventSynchronize(ev));
                CK(cuEventDestroy(ev));
                break;
        default:
                CK(cuCtxSynchronize());
                break;
        }
}

static void threshold_and_trim(CUstream s)
{
        static const char *const how[] = { "stream", "event", "context" };
        CUmemoryPool pool = new_pool(0);
        for (int i = 0; i < 3; i++) {
                churn(pool, s, i);
                cuuint64_t r = attr64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
                printf("threshold 0, after a %s synchronisation: %llu bytes reserved\n", how[i], (unsigned long long)r);
                EXPECT(r == 0);
        }
        EXPECT(attr64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH) >= 8 * MIB);
        EXPECT(attr64(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH) >= 8 * MIB);
        EXPECT(attr64(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0);

        /* a threshold keeps memory over a synchronisation; TrimTo gives it back */
        set64(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, 64 * MIB);
        EXPECT(attr64(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) == 64 * MIB);
        churn(pool, s, 0);
        EXPECT(attr64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) >= 8 * MIB);
        CK(cuMemPoolTrimTo(pool, 0));
        EXPECT(attr64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 0);

        /* the high watermarks reset to what is held now, and only with 0 */
        set64(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, 0);
        set64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, 0);
        EXPECT(attr64(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH) == 0);
        EXPECT(attr64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH) == 0);
        cuuint64_t one = 1;
        EXPECT_ERR(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &one), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &one), CUDA_ERROR_INVALID_VALUE);
        CK(cuMemPoolDestroy(pool));
}

static void current_pool_and_sync_free(CUstream s)
{
        CUmemoryPool dp, pool = new_pool(0), cur, owner = NULL;
        CUdeviceptr p, q;
        CK(cuDeviceGetDefaultMemPool(&dp, 0));
        CK(cuDeviceSetMemPool(0, pool));
        CK(cuDeviceGetMemPool(&cur, 0));
        EXPECT(cur == pool);
        CK(cuMemAllocAsync(&p, N_WORDS * 4, s));
        CK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p));
        EXPECT(owner == pool);
        /* destroying the current pool makes the default current again; its
         * live allocation stays usable until it is freed */
        CK(cuMemPoolDestroy(pool));
        CK(cuDeviceGetMemPool(&cur, 0));
        EXPECT(cur == dp);
        CK(cuMemsetD32Async(p, 0xc3c3u, N_WORDS, s));
        EXPECT(holds(p, 0xc3c3u, N_WORDS, s));
        CK(cuMemFreeAsync(p, s));
        CK(cuStreamSynchronize(s));

        /* cuMemFree takes stream-ordered memory once its work is done */
        CK(cuMemAllocAsync(&q, N_WORDS * 4, s));
        CK(cuMemsetD32Async(q, 5, N_WORDS, s));
        EXPECT(holds(q, 5, N_WORDS, s));
        CK(cuMemFree(q));
        EXPECT_ERR(cuMemFreeAsync(q, s), CUDA_ERROR_INVALID_VALUE);

        /* the per-thread default stream entry points */
        CK(cuMemAllocAsync_ptsz(&q, N_WORDS * 4, NULL));
        CK(cuMemsetD32Async(q, 6, N_WORDS, CU_STREAM_PER_THREAD));
        CK(cuStreamSynchronize_ptsz(NULL));
        EXPECT(holds(q, 6, N_WORDS, CU_STREAM_PER_THREAD));
        CK(cuMemFreeAsync_ptsz(q, NULL));
        CK(cuStreamSynchronize_ptsz(NULL));
}

static void bad_input(CUstream s)
{
        CUmemoryPool dp, pool;
        CUmemPoolProps props;
        CUdeviceptr p;

        CK(cuDeviceGetDefaultMemPool(&dp, 0));
        EXPECT_ERR(cuMemAllocAsync(NULL, 16, s), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemAllocAsync(&p, 1ull << 50, s), CUDA_ERROR_OUT_OF_MEMORY);
        EXPECT_ERR(cuMemFreeAsync((CUdeviceptr)0x1000, s), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemPoolDestroy(dp), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemPoolCreate(&pool, NULL), CUDA_ERROR_INVALID_VALUE);
        memset(&props, 0, sizeof(props));
        props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        props.location.id = 99;
        EXPECT_ERR(cuMemPoolCreate(&pool, &props), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuDeviceGetDefaultMemPool(&pool, 99), CUDA_ERROR_INVALID_DEVICE);

        /* a pool capped at 4 MiB */
        pool = new_pool(4 * MIB);
        /* driver 580 rounds the cap up to 32 MiB (tests/gpu/probes/pool_maxsize.c) */
        CK(cuMemAllocFromPoolAsync(&p, 8 * MIB, pool, s));
        CK(cuMemFreeAsync(p, s));
        EXPECT_ERR(cuMemAllocFromPoolAsync(&p, 64 * MIB, pool, s), CUDA_ERROR_OUT_OF_MEMORY);
        CK(cuMemAllocFromPoolAsync(&p, 1 * MIB, pool, s));
        CK(cuMemsetD32Async(p, 9, N_WORDS, s));
        EXPECT(holds(p, 9, N_WORDS, s));
        CK(cuMemFreeAsync(p, s));

        /* access: the owner reads and writes; a device that does not exist is refused */
        CUmemAccessDesc d = { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
                              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
        CK(cuMemPoolSetAccess(pool, &d, 1));
        CUmemAccess_flags fl = CU_MEM_ACCESS_FLAGS_PROT_NONE;
        CUmemLocation loc = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 };
        CK(cuMemPoolGetAccess(&fl, pool, &loc));
        EXPECT(fl == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
        d.location.id = 99;
        EXPECT_ERR(cuMemPoolSetAccess(pool, &d, 1), CUDA_ERROR_INVALID_DEVICE); /* driver 580's answer */
        /* sharing a pool made without handle types: INVALID_VALUE (driver
         * 580's answer, and lupine's) */
        int fd = -1;
        CUresult r = cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
        printf("export of a pool: error %d\n", (int)r);
        EXPECT(r == CUDA_ERROR_INVALID_VALUE);
        /* one made to be shared: through lupine NOT_SUPPORTED (the processes
         * may be on other hosts), with a log line; on stderr, since the
         * local driver exports it */
        char name[256] = "";
        CK(cuDeviceGetName(name, sizeof(name), 0));
        if (strstr(name, "(sim)") || strstr(name, "(lupine)")) {
                CUmemPoolProps sp;
                CUmemoryPool shared;
                memset(&sp, 0, sizeof(sp));
                sp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
                sp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
                sp.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
                CK(cuMemPoolCreate(&shared, &sp));
                r = cuMemPoolExportToShareableHandle(&fd, shared, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
                fprintf(stderr, "export of a shareable pool: error %d\n", (int)r);
                EXPECT(r == CUDA_ERROR_NOT_SUPPORTED);
                CK(cuMemPoolDestroy(shared));
        }
        CK(cuStreamSynchronize(s));
        CK(cuMemPoolDestroy(pool));

        /* an absurd maximum size: an error or a usable pool, never a crash */
        memset(&props, 0, sizeof(props));
        props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        props.maxSize = ~(size_t)0;
        r = cuMemPoolCreate(&pool, &props);
        printf("a pool of maxSize SIZE_MAX: error %d\n", (int)r);
        if (r == CUDA_SUCCESS) {
                CK(cuMemAllocFromPoolAsync(&p, N_WORDS * 4, pool, s));
                CK(cuMemsetD32Async(p, 4, N_WORDS, s));
                EXPECT(holds(p, 4, N_WORDS, s));
                CK(cuMemFreeAsync(p, s));
                CK(cuStreamSynchronize(s));
                CK(cuMemPoolDestroy(pool));
        }
}

/* Threads allocating and freeing in one pool at once, each on its own
 * stream, each checking its data; allocations of mixed sizes stay live
 * across iterations so the pool's blocks interleave. */
#define N_THREADS    4
#define THREAD_ITERS 300

struct thread_arg {
        CUcontext ctx;
        CUmemoryPool pool;
        unsigned id;
        int ok;
};

static void *pool_thread(void *p)
{
        struct thread_arg *t = p;
        CUstream s;
        CUdeviceptr keep[4] = { 0 };
        static __thread unsigned mine[4096];
        t->ok = 0;
        if (cuCtxSetCurrent(t->ctx) != CUDA_SUCCESS || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
                return NULL;
        for (unsigned i = 0; i < THREAD_ITERS; i++) {
                size_t words = 256u << (i % 4);
                unsigned v = t->id << 24 | i;
                CUdeviceptr d;
                unsigned k = i % 4;
                if (keep[k] && cuMemFreeAsync(keep[k], s) != CUDA_SUCCESS)
                        return NULL;
                if (cuMemAllocFromPoolAsync(&d, words * 4, t->pool, s) != CUDA_SUCCESS ||
                    cuMemsetD32Async(d, v, words, s) != CUDA_SUCCESS)
                        return NULL;
                keep[k] = d;
                if (i % 50 == 49) {
                        if (cuMemcpyDtoHAsync(mine, d, words * 4, s) != CUDA_SUCCESS ||
                            cuStreamSynchronize(s) != CUDA_SUCCESS)
                                return NULL;
                        for (size_t w = 0; w < words; w++)
                                if (mine[w] != v)
                                        return NULL;
                }
        }
        for (unsigned k = 0; k < 4; k++)
                if (keep[k] && cuMemFreeAsync(keep[k], s) != CUDA_SUCCESS)
                        return NULL;
        t->ok = cuStreamSynchronize(s) == CUDA_SUCCESS && cuStreamDestroy(s) == CUDA_SUCCESS;
        return NULL;
}

static void threads(CUcontext ctx)
{
        pthread_t th[N_THREADS];
        struct thread_arg args[N_THREADS];
        CUmemoryPool pool = new_pool(0);
        for (unsigned i = 0; i < N_THREADS; i++) {
                args[i] = (struct thread_arg){ .ctx = ctx, .pool = pool, .id = i + 1 };
                EXPECT(pthread_create(&th[i], NULL, pool_thread, &args[i]) == 0);
        }
        for (unsigned i = 0; i < N_THREADS; i++) {
                pthread_join(th[i], NULL);
                EXPECT(args[i].ok);
        }
        CK(cuCtxSynchronize());
        EXPECT(attr64(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0);
        EXPECT(attr64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 0); /* threshold 0 */
        CK(cuMemPoolDestroy(pool));
}

/* ---- restart mode */

static void verify_round(CUmemoryPool pool, CUdeviceptr a, CUdeviceptr b, unsigned va, unsigned vb, CUstream s)
{
        CUmemoryPool owner = NULL;
        EXPECT(holds(a, va, N_WORDS, s));
        EXPECT(holds(b, vb, N_WORDS, s));
        CK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a));
        EXPECT(owner == pool);
        EXPECT(attr64(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) == 256 * MIB);
        EXPECT(attr_int(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC) == 0);
        EXPECT(attr64(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) >= N_WORDS * 4);
        EXPECT(attr64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) >= 2 * MIB);
}

static int restart_mode(CUstream s)
{
        char line[64];
        CUmemoryPool pool = new_pool(0), dp;
        CUdeviceptr a, b, c;
        set64(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, 256 * MIB);
        set_int(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, 0);
        CK(cuDeviceGetDefaultMemPool(&dp, 0));
        CK(cuMemAllocFromPoolAsync(&a, N_WORDS * 4, pool, s));
        CK(cuMemAllocAsync(&b, N_WORDS * 4, s));
        CK(cuMemAllocFromPoolAsync(&c, N_WORDS * 4, pool, s));
        fill_kernel(a, 0x1000u, N_WORDS, s);
        CK(cuMemsetD32Async(b, 0x2000u, N_WORDS, s));
        CK(cuMemFreeAsync(c, s)); /* a free pending across the restart */
        CK(cuStreamSynchronize(s));
        verify_round(pool, a, b, 0x1000u, 0x2000u, s);
        printf("ready\n");
        fflush(stdout);
        unsigned round = 0;
        while (fgets(line, sizeof(line), stdin)) {
                verify_round(pool, a, b, 0x1000u + round, 0x2000u + round, s);
                /* allocations and frees go on, in both pools */
                CUdeviceptr d, e;
                CK(cuMemAllocFromPoolAsync(&d, N_WORDS * 4, pool, s));
                CK(cuMemAllocAsync(&e, 2 * N_WORDS * 4, s));
                fill_kernel(d, 0x3000u + round, N_WORDS, s);
                CK(cuMemsetD32Async(e, 0x4000u + round, 2 * N_WORDS, s));
                EXPECT(holds(d, 0x3000u + round, N_WORDS, s));
                EXPECT(holds(e, 0x4000u + round, 2 * N_WORDS, s));
                CK(cuMemFreeAsync(d, s));
                CK(cuMemFreeAsync(e, s));
                round++;
                fill_kernel(a, 0x1000u + round, N_WORDS, s);
                CK(cuMemsetD32Async(b, 0x2000u + round, N_WORDS, s));
                CK(cuStreamSynchronize(s));
                printf("round %u ok\n", round);
                fflush(stdout);
        }
        verify_round(pool, a, b, 0x1000u + round, 0x2000u + round, s);
        CK(cuMemFreeAsync(a, s));
        CK(cuMemFreeAsync(b, s));
        CK(cuStreamSynchronize(s));
        CK(cuMemPoolTrimTo(pool, 0));
        EXPECT(attr64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 0);
        EXPECT(attr64(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0);
        CK(cuMemPoolDestroy(pool));
        if (e2e_failures)
                return 1;
        printf("e2e_pools restart: OK (%u rounds)\n", round);
        return 0;
}

int main(int argc, char **argv)
{
        char path[4096];
        CUcontext ctx;
        CUmodule m;
        CUstream s, s1, s2;

        if (argc < 2)
                return 2;
        snprintf(path, sizeof(path), "%s/kernels.ptx", argv[1]);
        CK(cuInit(0));
        CK(cuDevicePrimaryCtxRetain(&ctx, 0));
        CK(cuCtxSetCurrent(ctx));
        CK(cuModuleLoad(&m, path));
        CK(cuModuleGetFunction(&spin_fn, m, "spin_ns"));
        CK(cuModuleGetFunction(&fill_fn, m, "fill_u32"));
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        if (argc > 2 && strcmp(argv[2], "restart") == 0)
                return restart_mode(s);
        CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
        CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
        default_pool(s);
        reuse_attrs(s1, s2);
        threshold_and_trim(s);
        current_pool_and_sync_free(s);
        bad_input(s);
        threads(ctx);
        if (e2e_failures) {
                fprintf(stderr, "e2e_pools: %d expectation(s) failed\n", e2e_failures);
                return 1;
        }
        printf("e2e_pools: OK\n");
        return 0;
}
