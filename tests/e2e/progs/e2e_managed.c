/* SPDX-License-Identifier: MIT */
/*
 * Managed memory, through the driver API: a vector add on cuMemAllocManaged
 * memory with the host reading and writing the same pointers between
 * kernels (host writes, kernel reads, kernel writes, host reads after a
 * synchronisation), copies with managed ends, CU_MEM_ATTACH_HOST and
 * cuStreamAttachMemAsync, pointer and range attributes, advice and
 * prefetches (both ABIs), the device attributes of the contract, bad input.
 * Runs unchanged on the real driver.
 *
 *   e2e_managed KERNELS_DIR          everything above
 *   e2e_managed KERNELS_DIR hold     managed memory with data from both
 *                                    sides (and host writes made just
 *                                    before), "ready", then after a line on
 *                                    stdin (the daemon was restarted
 *                                    meanwhile) checks and uses it
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#undef cuMemAdvise
#undef cuMemPrefetchAsync
CUresult CUDAAPI cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device);
CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream);

static CUmodule mod;
static CUfunction f_add, f_fill, f_inc;
static CUcontext ctx;

static void load(const char *dir)
{
        char path[4096];
        static char ptx[1 << 20];
        snprintf(path, sizeof(path), "%s/kernels.ptx", dir);
        FILE *f = fopen(path, "rb");
        EXPECT(f != NULL);
        size_t n = fread(ptx, 1, sizeof(ptx) - 1, f);
        fclose(f);
        ptx[n] = 0;
        CK(cuModuleLoadData(&mod, ptx));
        CK(cuModuleGetFunction(&f_add, mod, "vec_add_f32"));
        CK(cuModuleGetFunction(&f_fill, mod, "fill_u32"));
        CK(cuModuleGetFunction(&f_inc, mod, "add_global_u32"));
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

/* p[i] += 7 (add_global_u32: the module's g_bias) */
static void inc(CUdeviceptr p, int n, CUstream s)
{
        void *args[] = { &p, &n };
        CK(cuLaunchKernel(f_inc, (n + 255) / 256, 1, 1, 256, 1, 1, 0, s, args, NULL));
}

static void check_sum(const float *a, const float *b, const float *c, int n, const char *what)
{
        for (int i = 0; i < n; i++)
                if (c[i] != a[i] + b[i]) {
                        fprintf(stderr, "%s: c[%d] = %g, expected %g\n", what, i, c[i], a[i] + b[i]);
                        exit(1);
                }
}

static void test_device_attributes(CUdevice dev)
{
        int managed = -1, conc = -1, pageable = -1, direct = -1;
        CK(cuDeviceGetAttribute(&managed, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, dev));
        CK(cuDeviceGetAttribute(&conc, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, dev));
        CK(cuDeviceGetAttribute(&pageable, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, dev));
        CK(cuDeviceGetAttribute(&direct, CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST, dev));
        /* stderr: lupine reports 0 where a local H200 reports 1 */
        fprintf(stderr, "e2e_managed: concurrent managed access %d, pageable %d, direct from host %d\n", conc, pageable,
                direct);
        EXPECT(managed == 1);
        /* without concurrent access neither side may reach the other's memory directly */
        EXPECT(conc == 1 || (pageable == 0 && direct == 0));
        printf("managed memory: %d\n", managed);
}

/* host writes, kernel reads; the host changes part of an input and the
 * next kernel sees it; a kernel writes an input and the host reads it */
static void test_vector_add(void)
{
        const int n = 100000;
        float *a, *b, *c;
        CK(cuMemAllocManaged((CUdeviceptr *)&a, n * 4, CU_MEM_ATTACH_GLOBAL));
        CK(cuMemAllocManaged((CUdeviceptr *)&b, n * 4, CU_MEM_ATTACH_GLOBAL));
        CK(cuMemAllocManaged((CUdeviceptr *)&c, n * 4, CU_MEM_ATTACH_GLOBAL));
        for (int i = 0; i < n; i++)
                a[i] = (float)i, b[i] = (float)(2 * i), c[i] = -1.0f;
        vec_add((CUdeviceptr)a, (CUdeviceptr)b, (CUdeviceptr)c, n, NULL);
        CK(cuCtxSynchronize());
        check_sum(a, b, c, n, "managed add 1");
        for (int i = 0; i < n; i += 7)
                a[i] = 0.5f * (float)i;
        b[n - 1] = 1e6f;
        CUstream s;
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        vec_add((CUdeviceptr)a, (CUdeviceptr)b, (CUdeviceptr)c, n, s);
        CK(cuStreamSynchronize(s));
        check_sum(a, b, c, n, "managed add 2 (host changed the inputs)");
        /* the GPU writes an input, the host reads it, the next kernel adds it */
        fill((CUdeviceptr)a, 0x3f800000u, n / 2, s); /* 1.0f */
        CK(cuStreamSynchronize(s));
        EXPECT(a[0] == 1.0f && a[n / 2 - 1] == 1.0f && a[n / 2] == (float)(n / 2)); /* n / 2 % 7 != 0 */
        vec_add((CUdeviceptr)a, (CUdeviceptr)b, (CUdeviceptr)c, n, s);
        CK(cuStreamSynchronize(s));
        check_sum(a, b, c, n, "managed add 3 (the GPU changed an input)");
        double sum = 0;
        for (int i = 0; i < n; i++)
                sum += c[i];
        printf("managed vector add: checksum %.1f\n", sum);
        CK(cuStreamDestroy(s));
        CK(cuMemFree((CUdeviceptr)a));
        CK(cuMemFree((CUdeviceptr)b));
        CK(cuMemFree((CUdeviceptr)c));
}

/* copies with a managed end run in stream order with the kernels */
static void test_copies(void)
{
        const int n = 4096;
        unsigned *m, *m2, host[4096];
        CUdeviceptr d;
        CK(cuMemAllocManaged((CUdeviceptr *)&m, n * 4, CU_MEM_ATTACH_GLOBAL));
        CK(cuMemAllocManaged((CUdeviceptr *)&m2, n * 4, CU_MEM_ATTACH_GLOBAL));
        CK(cuMemAlloc(&d, n * 4));
        for (int i = 0; i < n; i++)
                m[i] = (unsigned)i * 3u;
        CK(cuMemcpyHtoD(d, m, n * 4)); /* a managed source */
        inc(d, n, NULL);
        CK(cuMemcpyDtoH(m2, d, n * 4)); /* a managed destination */
        for (int i = 0; i < n; i++)
                EXPECT(m2[i] == (unsigned)i * 3u + 7u);
        fill((CUdeviceptr)m, 9u, n, NULL);
        CK(cuMemcpyAsync((CUdeviceptr)m2, (CUdeviceptr)m, n * 4, NULL)); /* after the kernel, in order */
        CK(cuMemsetD32Async((CUdeviceptr)m + 4 * 16, 5u, 16, NULL));
        CK(cuStreamSynchronize(NULL));
        EXPECT(m2[0] == 9u && m2[n - 1] == 9u && m[16] == 5u && m[31] == 5u && m[32] == 9u);
        CK(cuMemcpy((CUdeviceptr)host, (CUdeviceptr)m, n * 4));
        EXPECT(host[15] == 9u && host[16] == 5u);
        printf("managed copies: %u %u %u\n", m2[0], m[16], host[n - 1]);
        CK(cuMemFree(d));
        CK(cuMemFree((CUdeviceptr)m));
        CK(cuMemFree((CUdeviceptr)m2));
}

/* CU_MEM_ATTACH_HOST memory becomes the GPU's through cuStreamAttachMemAsync */
static void test_attach(void)
{
        const int n = 1024;
        unsigned *m;
        CUstream s;
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CK(cuMemAllocManaged((CUdeviceptr *)&m, n * 4, CU_MEM_ATTACH_HOST));
        for (int i = 0; i < n; i++)
                m[i] = 100u;
        CK(cuStreamAttachMemAsync(s, (CUdeviceptr)m, 0, CU_MEM_ATTACH_SINGLE));
        inc((CUdeviceptr)m, n, s);
        CK(cuStreamSynchronize(s));
        CK(cuStreamAttachMemAsync(s, (CUdeviceptr)m, n * 4, CU_MEM_ATTACH_GLOBAL));
        CK(cuStreamSynchronize(s));
        EXPECT(m[0] == 107u && m[n - 1] == 107u);
        /* memory attached to an idle stream: the host writes it while a
         * kernel on another stream runs, and the idle stream's kernel sees it */
        CUstream s2;
        unsigned *g;
        CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
        CK(cuMemAllocManaged((CUdeviceptr *)&g, n * 4, CU_MEM_ATTACH_GLOBAL));
        CK(cuStreamAttachMemAsync(s2, (CUdeviceptr)m, 0, CU_MEM_ATTACH_SINGLE));
        CK(cuStreamSynchronize(s2));
        fill((CUdeviceptr)g, 3u, n, s);
        for (int i = 0; i < n; i++)
                m[i] = 200u;
        inc((CUdeviceptr)m, n, s2);
        CK(cuStreamSynchronize(s2));
        EXPECT(m[0] == 207u && m[n - 1] == 207u);
        CK(cuStreamSynchronize(s));
        EXPECT(g[0] == 3u && g[n - 1] == 3u);
        printf("managed attach: %u %u\n", m[n - 1], g[0]);
        CK(cuMemFree((CUdeviceptr)g));
        CK(cuMemFree((CUdeviceptr)m));
        CK(cuStreamDestroy(s2));
        CK(cuStreamDestroy(s));
}

static void test_pointer_attributes(void)
{
        const size_t n = 3 * 4096 + 100;
        CUdeviceptr p;
        CK(cuMemAllocManaged(&p, n, CU_MEM_ATTACH_GLOBAL));
        CUdeviceptr in = p + 5000, dp = 0, base = 0;
        unsigned int managed = 0, mtype = 0, mapped = 0;
        void *hp = NULL;
        size_t size = 0;
        int ord = -9;
        CUcontext c = NULL;
        CK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, in));
        CK(cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, in));
        CK(cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, in));
        CK(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, in));
        CK(cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, in));
        CK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, in));
        CK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, in));
        CK(cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, in));
        CK(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, in));
        EXPECT(managed == 1 && mtype == CU_MEMORYTYPE_DEVICE && dp == in && hp == (void *)(uintptr_t)in);
        EXPECT(base == p && size == n && ord == 0 && mapped == 1 && c == ctx);
        /* the batch form, as the runtime's cudaPointerGetAttributes asks */
        CUpointer_attribute at[4] = { CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                      CU_POINTER_ATTRIBUTE_DEVICE_POINTER, CU_POINTER_ATTRIBUTE_HOST_POINTER };
        unsigned int m2 = 0, t2 = 0;
        CUdeviceptr d2 = 0;
        void *h2 = NULL;
        void *data[4] = { &m2, &t2, &d2, &h2 };
        CK(cuPointerGetAttributes(4, at, data, in));
        EXPECT(m2 == 1 && t2 == CU_MEMORYTYPE_DEVICE && d2 == in && h2 == (void *)(uintptr_t)in);
        CUdeviceptr rb = 0;
        size_t rs = 0;
        CK(cuMemGetAddressRange(&rb, &rs, in));
        EXPECT(rb == p && rs == n);
        /* device memory is not managed */
        CUdeviceptr d;
        CK(cuMemAlloc(&d, 256));
        managed = 7;
        CK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, d));
        EXPECT(managed == 0);
        printf("managed pointer: managed %u type %u offset %llu size %zu ordinal %d mapped %u\n", m2, t2,
               (unsigned long long)(in - base), size, ord, mapped);
        CK(cuMemFree(d));
        CK(cuMemFree(p));
}

static int range_int(CUmem_range_attribute a, CUdeviceptr p, size_t n)
{
        int v = 12345;
        CK(cuMemRangeGetAttribute(&v, 4, a, p, n));
        return v;
}

static void test_advice_prefetch(void)
{
        const size_t pg = 4096, n = 8 * pg;
        CUdeviceptr p;
        CK(cuMemAllocManaged(&p, n, CU_MEM_ATTACH_GLOBAL));
        /* nothing said yet */
        EXPECT(range_int(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p, n) == 0);
        EXPECT(range_int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p, n) == CU_DEVICE_INVALID);
        EXPECT(range_int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p, n) == CU_DEVICE_INVALID);
        /* read mostly on the first two pages (rounded out to whole pages) */
        CK(cuMemAdvise(p + 10, 2 * pg - 20, CU_MEM_ADVISE_SET_READ_MOSTLY, 0));
        EXPECT(range_int(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p, 2 * pg) == 1);
        EXPECT(range_int(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p, 3 * pg) == 0);
        CK(cuMemAdvise(p, pg, CU_MEM_ADVISE_UNSET_READ_MOSTLY, 0));
        EXPECT(range_int(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p + pg, pg) == 1);
        EXPECT(range_int(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p, pg) == 0);
        /* preferred location: the GPU for the lower half, the host for the upper */
        CK(cuMemAdvise(p, n / 2, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, 0));
        CK(cuMemAdvise(p + n / 2, n / 2, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, CU_DEVICE_CPU));
        int lo = range_int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p, n / 2);
        int hi = range_int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p + n / 2, n / 2);
        int all = range_int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p, n);
        EXPECT(lo == 0 && hi == CU_DEVICE_CPU && all == CU_DEVICE_INVALID);
        int lt = range_int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, p, n / 2);
        int li = range_int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID, p, n / 2);
        int ht = range_int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, p + n / 2, n / 2);
        EXPECT(lt == CU_MEM_LOCATION_TYPE_DEVICE && li == 0 && ht == CU_MEM_LOCATION_TYPE_HOST);
        CK(cuMemAdvise(p + n / 2, n / 2, CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, 0));
        EXPECT(range_int(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p + n / 2, pg) == CU_DEVICE_INVALID);
        /* accessed by the GPU: the list ends in CU_DEVICE_INVALID */
        CUmemLocation dev0 = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 };
        CK(cuMemAdvise_v2(p, n, CU_MEM_ADVISE_SET_ACCESSED_BY, dev0));
        int by[3] = { 7, 7, 7 };
        CK(cuMemRangeGetAttribute(by, sizeof(by), CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, p, n));
        EXPECT(by[0] == 0 && by[1] == CU_DEVICE_INVALID && by[2] == CU_DEVICE_INVALID);
        CK(cuMemAdvise_v2(p, pg, CU_MEM_ADVISE_UNSET_ACCESSED_BY, dev0));
        CK(cuMemRangeGetAttribute(by, sizeof(by), CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, p, n));
        EXPECT(by[0] == CU_DEVICE_INVALID);
        /* prefetches: to the GPU, then half back to the host */
        CK(cuMemPrefetchAsync(p, n, 0, NULL));
        EXPECT(range_int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p, n) == 0);
        CUmemLocation host = { .type = CU_MEM_LOCATION_TYPE_HOST };
        CK(cuMemPrefetchAsync_v2(p + n / 2, n / 2, host, 0, NULL));
        CK(cuStreamSynchronize(NULL));
        int pl = range_int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p, n / 2);
        int ph = range_int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p + n / 2, n / 2);
        int pa = range_int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p, n);
        int pt = range_int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE, p + n / 2, n / 2);
        EXPECT(pl == 0 && ph == CU_DEVICE_CPU && pa == CU_DEVICE_INVALID && pt == CU_MEM_LOCATION_TYPE_HOST);
        /* several at once */
        int rm = 9, pref = 9;
        void *data[2] = { &rm, &pref };
        size_t sizes[2] = { 4, 4 };
        CUmem_range_attribute ats[2] = { CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY,
                                         CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION };
        CK(cuMemRangeGetAttributes(data, sizes, ats, 2, p + pg, pg));
        EXPECT(rm == 1 && pref == 0);
        /* the data is untouched by all that */
        fill(p, 42u, (int)(n / 4), NULL);
        CK(cuCtxSynchronize());
        EXPECT(((unsigned *)(uintptr_t)p)[0] == 42u && ((unsigned *)(uintptr_t)p)[n / 4 - 1] == 42u);
        printf("managed advice: read mostly %d, preferred %d/%d/%d, prefetched %d/%d/%d\n", rm, lo, hi, all, pl, ph,
               pa);
        CK(cuMemFree(p));
}

/* a kernel runs while managed memory exists, the last managed allocation
 * goes, a synchronisation with no managed memory at all; then new managed
 * memory written by the host reaches the next kernel */
static void test_after_all_freed(void)
{
        const int n = 4096;
        CUdeviceptr p, q, d;
        CK(cuMemAlloc(&d, n * 4));
        CK(cuMemAllocManaged(&p, n * 4, CU_MEM_ATTACH_GLOBAL));
        fill(d, 1u, n, NULL); /* a kernel on device memory only */
        CK(cuMemFree(p));
        CK(cuCtxSynchronize());
        CK(cuMemFree(d));
        CK(cuMemAllocManaged(&q, n * 4, CU_MEM_ATTACH_GLOBAL));
        unsigned *u = (unsigned *)(uintptr_t)q;
        for (int i = 0; i < n; i++)
                u[i] = 5u;
        inc(q, n, NULL);
        CK(cuCtxSynchronize());
        EXPECT(u[0] == 12u && u[n - 1] == 12u);
        printf("managed after all was freed: %u\n", u[0]);
        CK(cuMemFree(q));
}

/* managed memory goes with the context it was made in */
static void test_context_gone(CUdevice dev)
{
        CUcontext c;
        CUdeviceptr p, q;
        CK(cuCtxCreate_v2(&c, 0, dev));
        CK(cuMemAllocManaged(&p, 1 << 16, CU_MEM_ATTACH_GLOBAL));
        CK(cuMemAllocManaged(&q, 4096, CU_MEM_ATTACH_HOST));
        ((unsigned *)(uintptr_t)p)[0] = 1u;
        CK(cuMemsetD32(p, 6u, 16)); /* the module's kernels belong to the primary context */
        CK(cuCtxSynchronize());
        EXPECT(((unsigned *)(uintptr_t)p)[0] == 6u);
        CK(cuCtxDestroy(c));
        CK(cuCtxSetCurrent(ctx));
        unsigned int managed = 9;
        EXPECT_ERR(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemFree(q), CUDA_ERROR_INVALID_VALUE);
        printf("managed memory of a destroyed context: gone\n");
}

static void test_bad_input(void)
{
        CUdeviceptr p, d;
        EXPECT_ERR(cuMemAllocManaged(&p, 0, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemAllocManaged(&p, 4096, 0), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemAllocManaged(&p, 4096, CU_MEM_ATTACH_SINGLE), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemAllocManaged(&p, 4096, CU_MEM_ATTACH_GLOBAL | CU_MEM_ATTACH_HOST), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemAllocManaged(NULL, 4096, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
        CK(cuMemAllocManaged(&p, 8192, CU_MEM_ATTACH_GLOBAL));
        CK(cuMemAlloc(&d, 8192));
        /* advice, prefetches and range attributes on memory that is not managed */
        EXPECT_ERR(cuMemAdvise(d, 4096, CU_MEM_ADVISE_SET_READ_MOSTLY, 0), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemPrefetchAsync(d, 4096, 0, NULL), CUDA_ERROR_INVALID_VALUE);
        int v;
        EXPECT_ERR(cuMemRangeGetAttribute(&v, 4, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, d, 4096),
                   CUDA_ERROR_INVALID_VALUE);
        /* bad advice, locations, sizes */
        EXPECT_ERR(cuMemAdvise(p, 4096, (CUmem_advise)99, 0), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemAdvise(p, 4096, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, 99), CUDA_ERROR_INVALID_DEVICE);
        EXPECT_ERR(cuMemPrefetchAsync(p, 4096, 99, NULL), CUDA_ERROR_INVALID_DEVICE);
        CUmemLocation host = { .type = CU_MEM_LOCATION_TYPE_HOST };
        EXPECT_ERR(cuMemPrefetchAsync_v2(p, 4096, host, 1, NULL), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemRangeGetAttribute(&v, 8, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p, 4096),
                   CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemRangeGetAttribute(&v, 4, (CUmem_range_attribute)99, p, 4096), CUDA_ERROR_INVALID_VALUE);
        /* stream attachment */
        CUstream s;
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        if (ub_probes()) { /* the H200's driver crashes on these */
                EXPECT_ERR(cuStreamAttachMemAsync(s, p, 0, 0), CUDA_ERROR_INVALID_VALUE);
                EXPECT_ERR(cuStreamAttachMemAsync(s, p, 0, 8), CUDA_ERROR_INVALID_VALUE);
        }
        EXPECT_ERR(cuStreamAttachMemAsync(s, p, 4096, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuStreamAttachMemAsync(NULL, p, 0, CU_MEM_ATTACH_SINGLE), CUDA_ERROR_INVALID_VALUE);
        CK(cuStreamDestroy(s));
        /* managed memory is not pinned host memory; the H200's driver's answers */
        unsigned int flags;
        CK(cuMemHostGetFlags(&flags, (void *)(uintptr_t)p));
        EXPECT_ERR(cuMemFreeHost((void *)(uintptr_t)p), CUDA_ERROR_INVALID_VALUE);
        CUdeviceptr hp;
        EXPECT_ERR(cuMemHostGetDevicePointer(&hp, (void *)(uintptr_t)p, 0), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemHostUnregister((void *)(uintptr_t)p), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemHostRegister((void *)(uintptr_t)p, 4096, 0), CUDA_ERROR_INVALID_VALUE);
        /* freed from the start, once */
        EXPECT_ERR(cuMemFree(p + 4096), CUDA_ERROR_INVALID_VALUE);
        CK(cuMemFree(p));
        EXPECT_ERR(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
        CK(cuMemFree(d));
        printf("managed bad input: %d differences\n", e2e_failures);
}

/* ---- hold mode: managed memory live across a restart of the daemon */

#define HN (1 << 15)

struct held {
        unsigned *h;   /* written by the host */
        unsigned *g;   /* written by the GPU */
        unsigned *b;   /* both, and host writes not yet sent at the drain */
        CUdeviceptr p; /* with advice */
        CUdeviceptr d; /* device memory beside them */
};

static void hold_build(struct held *h)
{
        CK(cuMemAllocManaged((CUdeviceptr *)&h->h, HN * 4, CU_MEM_ATTACH_GLOBAL));
        CK(cuMemAllocManaged((CUdeviceptr *)&h->g, HN * 4, CU_MEM_ATTACH_GLOBAL));
        CK(cuMemAllocManaged((CUdeviceptr *)&h->b, HN * 4, CU_MEM_ATTACH_HOST));
        CK(cuMemAllocManaged(&h->p, 4 * 4096, CU_MEM_ATTACH_GLOBAL));
        for (int i = 0; i < HN; i++)
                h->h[i] = (unsigned)i * 5u, h->b[i] = 1u;
        CK(cuStreamAttachMemAsync(NULL, (CUdeviceptr)h->b, 0, CU_MEM_ATTACH_GLOBAL));
        fill((CUdeviceptr)h->g, 0xfeedu, HN, NULL);
        CK(cuMemAlloc(&h->d, HN * 4));
        CK(cuMemcpyHtoD(h->d, h->h, HN * 4)); /* from managed memory */
        inc((CUdeviceptr)h->b, HN / 2, NULL); /* b[i] = 8 below HN/2 */
        CK(cuCtxSynchronize());
        EXPECT(h->g[HN - 1] == 0xfeedu && h->b[10] == 8u && h->b[HN / 2] == 1u);
        CK(cuMemAdvise(h->p, 4096, CU_MEM_ADVISE_SET_READ_MOSTLY, 0));
        CK(cuMemPrefetchAsync(h->p, 4 * 4096, 0, NULL));
        /* host writes that no call has carried to the GPU yet */
        for (int i = HN - 16; i < HN; i++)
                h->b[i] = 7000u + (unsigned)i;
}

static void hold_check(struct held *h)
{
        for (int i = 0; i < HN; i++) {
                unsigned wb = i >= HN - 16 ? 7000u + (unsigned)i : i < HN / 2 ? 8u : 1u;
                if (h->h[i] != (unsigned)i * 5u || h->g[i] != 0xfeedu || h->b[i] != wb) {
                        fprintf(stderr, "held[%d] = %#x %#x %#x\n", i, h->h[i], h->g[i], h->b[i]);
                        exit(1);
                }
        }
        /* the GPU sees the same data at the same addresses, the host's late writes included */
        inc((CUdeviceptr)h->h, HN, NULL);
        inc((CUdeviceptr)h->b, HN, NULL);
        CK(cuCtxSynchronize());
        for (int i = 0; i < HN; i++) {
                unsigned wb = (i >= HN - 16 ? 7000u + (unsigned)i : i < HN / 2 ? 8u : 1u) + 7u;
                if (h->h[i] != (unsigned)i * 5u + 7u || h->b[i] != wb) {
                        fprintf(stderr, "after: [%d] = %#x %#x\n", i, h->h[i], h->b[i]);
                        exit(1);
                }
        }
        /* device memory into managed memory */
        CK(cuMemcpyDtoH(h->g, h->d, HN * 4));
        EXPECT(h->g[0] == 0u && h->g[HN - 1] == (unsigned)(HN - 1) * 5u);
        unsigned int managed = 0;
        CK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, (CUdeviceptr)h->g));
        EXPECT(managed == 1);
        EXPECT(range_int(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, h->p, 4096) == 1);
        EXPECT(range_int(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, h->p, 4 * 4096) == 0);
        CK(cuMemFree((CUdeviceptr)h->h));
        CK(cuMemFree((CUdeviceptr)h->g));
        CK(cuMemFree((CUdeviceptr)h->b));
        CK(cuMemFree(h->p));
        CK(cuMemFree(h->d));
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                fprintf(stderr, "usage: e2e_managed KERNELS_DIR [hold]\n");
                return 2;
        }
        CUdevice dev;
        CK(cuInit(0));
        CK(cuDeviceGet(&dev, 0));
        CK(cuDevicePrimaryCtxRetain(&ctx, dev));
        CK(cuCtxSetCurrent(ctx));
        load(argv[1]);
        if (argc > 2 && strcmp(argv[2], "hold") == 0) {
                struct held h;
                char line[64];
                hold_build(&h);
                printf("ready: managed %p %p %p\n", (void *)h.h, (void *)h.g, (void *)h.b);
                fflush(stdout);
                if (!fgets(line, sizeof(line), stdin))
                        return 1;
                hold_check(&h);
                test_vector_add();
                printf("e2e_managed hold: %s\n", e2e_failures ? "FAILED" : "OK");
                return e2e_failures ? 1 : 0;
        }
        test_device_attributes(dev);
        test_vector_add();
        test_copies();
        test_attach();
        test_pointer_attributes();
        test_advice_prefetch();
        test_context_gone(dev);
        test_after_all_freed();
        test_bad_input();
        CK(cuDevicePrimaryCtxRelease(dev));
        printf("e2e_managed: %s\n", e2e_failures ? "FAILED" : "OK");
        return e2e_failures ? 1 : 0;
}
