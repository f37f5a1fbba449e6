/* SPDX-License-Identifier: MIT */
/*
 * Mapped (zero-copy) host memory, through the driver API: a vector add on
 * cuMemHostAlloc(DEVICEMAP) and cuMemHostRegister(DEVICEMAP) memory, with
 * the device pointers from cuMemHostGetDevicePointer and with the host
 * pointers themselves (UVA); memsets and copies on mapped host pointers
 * (XLA's autotuner memsets PORTABLE pinned memory); a kernel that spins on
 * a flag the host sets and a host that polls a flag a running kernel sets
 * (both with timeouts, and the delays printed); flags and pointer
 * attributes; bad input. Runs unchanged on the real driver.
 *
 *   e2e_mapped KERNELS_DIR          everything above
 *   e2e_mapped KERNELS_DIR hold     mapped memory with data, "ready", then
 *                                   after a line on stdin (the daemon was
 *                                   restarted meanwhile) checks and uses it
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static CUmodule mod, mmod;
static CUfunction f_add, f_fill, f_wait, f_raise;

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void load(CUmodule *m, const char *dir, const char *file)
{
        char path[4096];
        static char ptx[1 << 20];
        snprintf(path, sizeof(path), "%s/%s", dir, file);
        FILE *f = fopen(path, "rb");
        EXPECT(f != NULL);
        size_t n = fread(ptx, 1, sizeof(ptx) - 1, f);
        fclose(f);
        ptx[n] = 0;
        CK(cuModuleLoadData(m, ptx));
}

static void vec_add(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, int n, CUstream s)
{
        void *args[] = { &a, &b, &c, &n };
        CK(cuLaunchKernel(f_add, (n + 255) / 256, 1, 1, 256, 1, 1, 0, s, args, NULL));
}

static void fill(CUdeviceptr p, unsigned v, int n, CUstream s)
{
        void *args[] = { &p, &v, &n };
        CK(cuLaunchKernel(f_fill, (n + 255) / 256, 1, 1, 256, 1, 1, 0, s, args, NULL));
}

static void check_sum(const float *a, const float *b, const float *c, int n, const char *what)
{
        for (int i = 0; i < n; i++)
                if (c[i] != a[i] + b[i]) {
                        fprintf(stderr, "%s: c[%d] = %g, expected %g\n", what, i, c[i], a[i] + b[i]);
                        exit(1);
                }
}

/* cuMemHostAlloc(DEVICEMAP): through cuMemHostGetDevicePointer, twice (the
 * host's new inputs reach the GPU, the GPU's new outputs come back). */
static void test_alloc_add(void)
{
        const int n = 100000;
        float *a, *b, *c;
        CUdeviceptr da, db, dc;
        CK(cuMemHostAlloc((void **)&a, n * 4, CU_MEMHOSTALLOC_DEVICEMAP));
        CK(cuMemHostAlloc((void **)&b, n * 4, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
        CK(cuMemHostAlloc((void **)&c, n * 4, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED));
        for (int i = 0; i < n; i++)
                a[i] = (float)i, b[i] = 0.5f * (float)(i % 977), c[i] = -1;
        CK(cuMemHostGetDevicePointer(&da, a, 0));
        CK(cuMemHostGetDevicePointer(&db, b, 0));
        CK(cuMemHostGetDevicePointer(&dc, c, 0));
        EXPECT(da == (CUdeviceptr)(uintptr_t)a); /* UVA: one address */
        vec_add(da, db, dc, n, NULL);
        CK(cuCtxSynchronize());
        check_sum(a, b, c, n, "zero-copy add (alloc)");
        for (int i = 0; i < n; i += 3)
                a[i] = -2.0f * (float)i;
        vec_add(da, db, dc, n, NULL);
        CK(cuStreamSynchronize(NULL));
        check_sum(a, b, c, n, "zero-copy add (alloc, second round)");
        CK(cuMemFreeHost(a));
        CK(cuMemFreeHost(b));
        CK(cuMemFreeHost(c));
        printf("zero-copy vector add on cuMemHostAlloc(DEVICEMAP): ok\n");
}

/* cuMemHostRegister(DEVICEMAP) of the program's own memory, page-aligned
 * and not, used through the host pointers themselves. */
static void test_register_add(void)
{
        const int n = 50000;
        float *a, *b, *craw;
        EXPECT(posix_memalign((void **)&a, 4096, n * 4) == 0);
        EXPECT(posix_memalign((void **)&b, 4096, n * 4) == 0);
        craw = malloc(n * 4 + 64);
        EXPECT(craw != NULL);
        float *c = craw + 3; /* not page-aligned */
        for (int i = 0; i < n; i++)
                a[i] = (float)(i % 1000), b[i] = (float)(3 * i), c[i] = 0;
        CK(cuMemHostRegister(a, n * 4, CU_MEMHOSTREGISTER_DEVICEMAP));
        CK(cuMemHostRegister(b, n * 4, CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE));
        CK(cuMemHostRegister(c, n * 4, CU_MEMHOSTREGISTER_DEVICEMAP));
        CUdeviceptr dc;
        CK(cuMemHostGetDevicePointer(&dc, c, 0));
        EXPECT(dc == (CUdeviceptr)(uintptr_t)c);
        CUstream s;
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        vec_add((CUdeviceptr)(uintptr_t)a, (CUdeviceptr)(uintptr_t)b, (CUdeviceptr)(uintptr_t)c, n, s);
        CK(cuStreamSynchronize(s));
        check_sum(a, b, c, n, "zero-copy add (registered)");
        CK(cuStreamDestroy(s));
        CK(cuMemHostUnregister(a));
        CK(cuMemHostUnregister(b));
        CK(cuMemHostUnregister(c));
        free(a);
        free(b);
        free(craw);
        printf("zero-copy vector add on cuMemHostRegister(DEVICEMAP): ok\n");
}

/* Memsets and copies that name a mapped host pointer write the program's
 * buffer in stream order. */
static void test_memset_copy(void)
{
        const size_t n = 1 << 16;
        uint32_t *p, *q;
        CUdeviceptr d;
        CUstream s;
        CK(cuStreamCreate(&s, 0));
        CK(cuMemHostAlloc((void **)&p, n * 4, CU_MEMHOSTALLOC_PORTABLE)); /* XLA's flags */
        for (size_t i = 0; i < n; i++)
                p[i] = (uint32_t)i;
        CK(cuMemsetD32Async((CUdeviceptr)(uintptr_t)p, 0xdeadbeefu, n / 2, s));
        CK(cuStreamSynchronize(s));
        for (size_t i = 0; i < n; i++)
                EXPECT(p[i] == (i < n / 2 ? 0xdeadbeefu : (uint32_t)i));
        CK(cuMemsetD8((CUdeviceptr)(uintptr_t)p + 4 * n - 16, 0x11, 16));
        CK(cuCtxSynchronize());
        EXPECT(p[n - 1] == 0x11111111u && p[n - 4] == 0x11111111u && p[n - 5] == (uint32_t)(n - 5));
        /* device memory -> mapped, then mapped -> device memory */
        CK(cuMemAlloc(&d, n * 4));
        fill(d, 42u, (int)n, s);
        CK(cuMemcpyDtoDAsync((CUdeviceptr)(uintptr_t)p, d, n * 4, s));
        CK(cuStreamSynchronize(s));
        for (size_t i = 0; i < n; i++)
                EXPECT(p[i] == 42u);
        for (size_t i = 0; i < n; i++)
                p[i] = (uint32_t)(7 * i);
        CK(cuMemcpyDtoD(d, (CUdeviceptr)(uintptr_t)p, n * 4));
        EXPECT(posix_memalign((void **)&q, 64, n * 4) == 0);
        CK(cuMemcpyDtoH(q, d, n * 4));
        for (size_t i = 0; i < n; i++)
                EXPECT(q[i] == (uint32_t)(7 * i));
        /* a kernel writes the mapped buffer: host sees it after the sync */
        fill((CUdeviceptr)(uintptr_t)p, 9u, 1000, s);
        CK(cuStreamSynchronize(s));
        EXPECT(p[0] == 9u && p[999] == 9u && p[1000] == 7000u);
        free(q);
        CK(cuMemFree(d));
        CK(cuMemFreeHost(p));
        CK(cuStreamDestroy(s));
        printf("memset and copies on mapped host pointers: ok\n");
}

static uint32_t poll_u32(volatile uint32_t *p, uint32_t want, double timeout_s, double *ret_waited)
{
        double t0 = now_s();
        uint32_t v;
        while ((v = __atomic_load_n(p, __ATOMIC_ACQUIRE)) != want && now_s() - t0 < timeout_s)
                usleep(20);
        *ret_waited = now_s() - t0;
        return v;
}

/* A kernel that spins on a flag the host sets, with no CUDA call between
 * the host's write and the kernel seeing it. */
static void test_kernel_waits_for_host(void)
{
        volatile uint32_t *m;
        unsigned long long timeout = 10000000000ull;
        CK(cuMemHostAlloc((void **)&m, 8, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
        m[0] = 0, m[1] = 0;
        CUdeviceptr flag, out;
        CK(cuMemHostGetDevicePointer(&flag, (void *)m, 0));
        out = flag + 4;
        void *args[] = { &flag, &out, &timeout };
        CK(cuLaunchKernel(f_wait, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
        usleep(50000); /* the kernel is spinning by now */
        __atomic_store_n(&m[0], 7u, __ATOMIC_RELEASE);
        double waited;
        uint32_t v = poll_u32(&m[1], 7u, 15.0, &waited);
        EXPECT(v == 7u);
        CK(cuCtxSynchronize());
        EXPECT(m[1] == 7u);
        printf("kernel spinning on a host-set flag: ok\n");
        /* timings on stderr: stdout is compared with the local driver's */
        fprintf(stderr, "e2e_mapped: delay: the host saw the kernel's answer %.3f ms after setting the flag\n",
                waited * 1e3);
        CK(cuMemFreeHost((void *)m));
}

/* A host that polls a flag a running kernel sets, then answers it. */
static void test_host_polls_kernel(void)
{
        volatile uint32_t *m;
        unsigned long long timeout = 10000000000ull;
        CK(cuMemHostAlloc((void **)&m, 8, CU_MEMHOSTALLOC_DEVICEMAP));
        m[0] = 0, m[1] = 0;
        CUdeviceptr flag = (CUdeviceptr)(uintptr_t)m, ack = flag + 4;
        void *args[] = { &flag, &ack, &timeout };
        double t0 = now_s(), w1, w2;
        CK(cuLaunchKernel(f_raise, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
        EXPECT(poll_u32(&m[0], 1u, 15.0, &w1) == 1u);
        double seen = now_s() - t0;
        __atomic_store_n(&m[1], 1u, __ATOMIC_RELEASE);
        EXPECT(poll_u32(&m[0], 2u, 15.0, &w2) == 2u);
        CK(cuCtxSynchronize());
        EXPECT(m[0] == 2u);
        printf("host polling a kernel-set flag: ok\n");
        fprintf(stderr,
                "e2e_mapped: delay: the kernel's flag seen %.3f ms after the launch; the answer's round "
                "trip %.3f ms\n",
                seen * 1e3, w2 * 1e3);
        CK(cuMemFreeHost((void *)m));
}

/* Another thread answers the kernel's flag while this one polls the
 * stream with cuStreamQuery (each query a synchronous call). */
static volatile uint32_t *qm;
static void *answerer(void *arg)
{
        double w;
        (void)arg;
        if (poll_u32(&qm[0], 1u, 15.0, &w) == 1u)
                __atomic_store_n(&qm[1], 1u, __ATOMIC_RELEASE);
        return NULL;
}

static void test_thread_answers_while_querying(void)
{
        unsigned long long timeout = 10000000000ull;
        CUstream s;
        pthread_t t;
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CK(cuMemHostAlloc((void **)&qm, 8, CU_MEMHOSTALLOC_DEVICEMAP));
        qm[0] = 0, qm[1] = 0;
        CUdeviceptr flag = (CUdeviceptr)(uintptr_t)qm, ack = flag + 4;
        void *args[] = { &flag, &ack, &timeout };
        EXPECT(pthread_create(&t, NULL, answerer, NULL) == 0);
        CK(cuLaunchKernel(f_raise, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
        double t0 = now_s();
        CUresult q;
        while ((q = cuStreamQuery(s)) == CUDA_ERROR_NOT_READY && now_s() - t0 < 20)
                usleep(100);
        EXPECT(q == CUDA_SUCCESS);
        pthread_join(t, NULL);
        EXPECT(qm[0] == 2u); /* the kernel saw the other thread's answer */
        printf("another thread answers a kernel's flag while this one queries the stream: ok\n");
        fprintf(stderr, "e2e_mapped: delay: the kernel finished %.3f ms after the first query\n", (now_s() - t0) * 1e3);
        CK(cuMemFreeHost((void *)qm));
        CK(cuStreamDestroy(s));
}

static void test_attributes(void)
{
        void *p;
        unsigned int flags = 0;
        CK(cuMemHostAlloc(&p, 4096, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_WRITECOMBINED));
        CK(cuMemHostGetFlags(&flags, p));
        EXPECT(flags == (CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_WRITECOMBINED | CU_MEMHOSTALLOC_DEVICEMAP));
        CK(cuMemHostGetFlags(&flags, (char *)p + 100));
        unsigned int type = 0;
        CUdeviceptr dp = 0;
        void *hp = NULL;
        CK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p));
        EXPECT(type == CU_MEMORYTYPE_HOST);
        CK(cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, (CUdeviceptr)(uintptr_t)p + 8));
        EXPECT(dp == (CUdeviceptr)(uintptr_t)p + 8);
        CK(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, (CUdeviceptr)(uintptr_t)p));
        EXPECT(hp == p);
        CUpointer_attribute at[] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_POINTER };
        unsigned int t2 = 0;
        CUdeviceptr d2 = 0;
        void *data[] = { &t2, &d2 };
        CK(cuPointerGetAttributes(2, at, data, (CUdeviceptr)(uintptr_t)p));
        EXPECT(t2 == CU_MEMORYTYPE_HOST && d2 == (CUdeviceptr)(uintptr_t)p);
        CK(cuMemFreeHost(p));
        printf("flags and pointer attributes: ok\n");
}

static void test_bad_input(void)
{
        long pg = sysconf(_SC_PAGESIZE);
        void *hole = mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        EXPECT(hole != MAP_FAILED);
        munmap(hole, 4 * pg);
        /* mapped registration of memory that is not mapped in the process */
        EXPECT_ERR(cuMemHostRegister(hole, 4 * pg, CU_MEMHOSTREGISTER_DEVICEMAP), CUDA_ERROR_INVALID_VALUE);
        char *buf = malloc(2 * pg);
        CUdeviceptr d;
        EXPECT_ERR(cuMemHostGetDevicePointer(&d, buf, 0), CUDA_ERROR_INVALID_VALUE); /* not pinned */
        CK(cuMemHostRegister(buf, pg, CU_MEMHOSTREGISTER_DEVICEMAP));
        EXPECT_ERR(cuMemHostGetDevicePointer(&d, buf, 1), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemHostRegister(buf + 16, 64, CU_MEMHOSTREGISTER_DEVICEMAP),
                   CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
        unsigned int flags;
        CK(cuMemHostGetFlags(&flags, buf)); /* registered: driver 580 answers too */
        printf("  flags of registered memory: %#x\n", flags);
        EXPECT_ERR(cuMemHostUnregister(buf + 16), CUDA_ERROR_INVALID_VALUE);
        CK(cuMemHostUnregister(buf));
        EXPECT_ERR(cuMemHostUnregister(buf), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
        void *p;
        CK(cuMemHostAlloc(&p, 64, CU_MEMHOSTALLOC_DEVICEMAP));
        EXPECT_ERR(cuMemHostUnregister(p), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemHostAlloc(&p, 64, 0x80), CUDA_ERROR_INVALID_VALUE);
        /* a memset on memory no longer registered */
        EXPECT_ERR(cuMemsetD8((CUdeviceptr)(uintptr_t)buf, 0, 16), CUDA_ERROR_INVALID_VALUE);
        /* read-only memory: only with CU_MEMHOSTREGISTER_READ_ONLY, and the GPU reads it */
        uint32_t *ro = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        EXPECT(ro != MAP_FAILED);
        ro[5] = 0x12345678u;
        EXPECT(mprotect(ro, pg, PROT_READ) == 0);
        EXPECT_ERR(cuMemHostRegister(ro, pg, CU_MEMHOSTREGISTER_DEVICEMAP), CUDA_ERROR_INVALID_VALUE);
        CUresult rr = cuMemHostRegister(ro, pg, CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_READ_ONLY);
        if (rr == CUDA_SUCCESS) {
                uint32_t got[8];
                CK(cuMemAlloc(&d, 32));
                CK(cuMemcpyDtoD(d, (CUdeviceptr)(uintptr_t)ro, 32));
                CK(cuMemcpyDtoH(got, d, 32));
                EXPECT(got[5] == 0x12345678u && got[0] == 0);
                CK(cuCtxSynchronize());
                CK(cuMemFree(d));
                CK(cuMemHostUnregister(ro));
        } else {
                EXPECT_ERR(rr, CUDA_ERROR_NOT_SUPPORTED); /* a device without read-only registration */
        }
        munmap(ro, pg);
        free(buf);
        printf("bad input: %s\n", e2e_failures ? "differs" : "ok");
}

/* ---- hold mode: mapped memory live across a restart of the daemon */

#define HN (1 << 15)

struct held {
        uint32_t *a;   /* cuMemHostAlloc(DEVICEMAP) */
        uint32_t *r;   /* registered */
        uint32_t *c;   /* the GPU's results */
        CUdeviceptr d; /* device memory beside them */
};

static void hold_build(struct held *h)
{
        CK(cuMemHostAlloc((void **)&h->a, HN * 4, CU_MEMHOSTALLOC_DEVICEMAP));
        CK(cuMemHostAlloc((void **)&h->c, HN * 4, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
        EXPECT(posix_memalign((void **)&h->r, 4096, HN * 4) == 0);
        CK(cuMemHostRegister(h->r, HN * 4, CU_MEMHOSTREGISTER_DEVICEMAP));
        for (int i = 0; i < HN; i++)
                h->a[i] = (uint32_t)(i * 3), h->r[i] = (uint32_t)(i ^ 0x5a5a), h->c[i] = 0;
        /* the GPU writes a part of c and the mirrors get the host's data */
        CK(cuMemAlloc(&h->d, HN * 4));
        fill(h->d, 31u, HN, NULL);
        fill((CUdeviceptr)(uintptr_t)h->c, 0xc0ffeeu, HN / 2, NULL);
        fill((CUdeviceptr)(uintptr_t)h->a + 4 * (HN - 8), 77u, 8, NULL);
        CK(cuCtxSynchronize());
        EXPECT(h->c[0] == 0xc0ffeeu && h->c[HN / 2] == 0 && h->a[HN - 1] == 77u);
        for (int i = 0; i < 16; i++)
                h->r[i] = 1000u + (uint32_t)i; /* host writes not sent yet */
}

static void hold_check(struct held *h)
{
        /* the GPU still sees the mirrors at the same addresses */
        fill((CUdeviceptr)(uintptr_t)h->c + 4 * (HN / 2), 0xbeefu, HN / 4, NULL);
        CK(cuCtxSynchronize());
        for (int i = 0; i < HN; i++) {
                uint32_t want = i < HN / 2 ? 0xc0ffeeu : i < 3 * HN / 4 ? 0xbeefu : 0;
                if (h->c[i] != want) {
                        fprintf(stderr, "c[%d] = %#x, expected %#x\n", i, h->c[i], want);
                        exit(1);
                }
        }
        /* the device reads what both sides wrote: a + r through a DtoD copy */
        CUdeviceptr d;
        uint32_t *q = malloc(HN * 4);
        CK(cuMemAlloc(&d, HN * 4));
        CK(cuMemcpyDtoD(d, (CUdeviceptr)(uintptr_t)h->a, HN * 4));
        CK(cuMemcpyDtoH(q, d, HN * 4));
        for (int i = 0; i < HN; i++)
                EXPECT(q[i] == (i >= HN - 8 ? 77u : (uint32_t)(i * 3)));
        CK(cuMemcpyDtoD(d, (CUdeviceptr)(uintptr_t)h->r, HN * 4));
        CK(cuMemcpyDtoH(q, d, HN * 4));
        for (int i = 0; i < HN; i++)
                EXPECT(q[i] == (i < 16 ? 1000u + (uint32_t)i : (uint32_t)(i ^ 0x5a5a)));
        CK(cuMemcpyDtoH(q, h->d, HN * 4));
        EXPECT(q[0] == 31u && q[HN - 1] == 31u);
        CK(cuMemsetD32((CUdeviceptr)(uintptr_t)h->r, 5u, 4));
        CK(cuCtxSynchronize());
        EXPECT(h->r[0] == 5u && h->r[3] == 5u && h->r[4] == 1004u);
        CK(cuMemFree(d));
        free(q);
        CK(cuMemHostUnregister(h->r));
        CK(cuMemFreeHost(h->a));
        CK(cuMemFreeHost(h->c));
        free(h->r);
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                fprintf(stderr, "usage: e2e_mapped KERNELS_DIR [hold]\n");
                return 2;
        }
        CUdevice dev;
        CUcontext ctx;
        CK(cuInit(0));
        CK(cuDeviceGet(&dev, 0));
        CK(cuDevicePrimaryCtxRetain(&ctx, dev));
        CK(cuCtxSetCurrent(ctx));
        load(&mod, argv[1], "kernels.ptx");
        load(&mmod, argv[1], "mapped.ptx");
        CK(cuModuleGetFunction(&f_add, mod, "vec_add_f32"));
        CK(cuModuleGetFunction(&f_fill, mod, "fill_u32"));
        CK(cuModuleGetFunction(&f_wait, mmod, "wait_flag_u32"));
        CK(cuModuleGetFunction(&f_raise, mmod, "raise_wait_u32"));
        if (argc > 2 && strcmp(argv[2], "hold") == 0) {
                struct held h;
                char line[64];
                hold_build(&h);
                printf("ready: mapped %p %p %p\n", (void *)h.a, (void *)h.r, (void *)h.c);
                fflush(stdout);
                if (!fgets(line, sizeof(line), stdin))
                        return 1;
                hold_check(&h);
                test_kernel_waits_for_host();
                printf("e2e_mapped hold: %s\n", e2e_failures ? "FAILED" : "OK");
                return e2e_failures ? 1 : 0;
        }
        test_alloc_add();
        test_register_add();
        test_memset_copy();
        test_kernel_waits_for_host();
        test_host_polls_kernel();
        test_thread_answers_while_querying();
        test_attributes();
        test_bad_input();
        CK(cuDevicePrimaryCtxRelease(dev));
        printf("e2e_mapped: %s\n", e2e_failures ? "FAILED" : "OK");
        return e2e_failures ? 1 : 0;
}
