/* SPDX-License-Identifier: MIT */
/*
 * Every function of the first API set, through the shim, with data checked
 * byte for byte and the driver's error codes checked for bad calls.
 */
#include <stdint.h>
#include <string.h>

#include "check.h"

/* The same program runs against the real driver on the GPU machine, as the
 * baseline for lupine's answers; only lupine-specific checks depend on this. */
static int through_lupine;

static void test_devices(void)
{
        int count = 0, ver = 0;
        CK(cuDriverGetVersion(&ver));
        EXPECT(ver >= 12000);
        CK(cuDeviceGetCount(&count));
        EXPECT(count >= 1);
        for (int i = 0; i < count; i++) {
                CUdevice d;
                char name[256];
                CUuuid u;
                size_t total = 0;
                int major = 0, sms = 0, warp = 0;
                CK(cuDeviceGet(&d, i));
                EXPECT(d == i);
                CK(cuDeviceGetName(name, sizeof(name), d));
                EXPECT(strlen(name) > 0);
                CK(cuDeviceGetUuid(&u, d));
                CK(cuDeviceGetUuid_v2(&u, d));
                CK(cuDeviceTotalMem(&total, d));
                EXPECT(total >= (64ull << 20));
                CK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d));
                CK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d));
                CK(cuDeviceGetAttribute(&warp, CU_DEVICE_ATTRIBUTE_WARP_SIZE, d));
                EXPECT(major >= 3 && sms > 0 && warp == 32);
                printf("device %d: %s, %zu MiB, cc %d, %d SMs\n", i, name, total >> 20, major, sms);
                if (strstr(name, "(lupine)") || strstr(name, "(sim)"))
                        through_lupine = 1;
                /* a truncated name is still NUL-terminated */
                char tiny[4];
                CK(cuDeviceGetName(tiny, sizeof(tiny), d));
                EXPECT(tiny[3] == 0 && strncmp(tiny, name, 3) == 0);
        }
        CUdevice d;
        EXPECT_ERR(cuDeviceGet(&d, count), CUDA_ERROR_INVALID_DEVICE);
        int v;
        EXPECT_ERR(cuDeviceGetAttribute(&v, (CUdevice_attribute)100000, 0), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuDeviceGetAttribute(NULL, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0), CUDA_ERROR_INVALID_VALUE);
}

static void test_primary_and_contexts(void)
{
        CUcontext p1, p2, cur, c;
        unsigned flags;
        int active;
        CUdevice dev;

        CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
        EXPECT(active == 0);
        CK(cuDevicePrimaryCtxRetain(&p1, 0));
        CK(cuDevicePrimaryCtxRetain(&p2, 0));
        EXPECT(p1 == p2 && p1 != NULL);
        CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
        EXPECT(active == 1);
        CK(cuDevicePrimaryCtxSetFlags(0, CU_CTX_SCHED_BLOCKING_SYNC));
        CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
        EXPECT(flags == CU_CTX_SCHED_BLOCKING_SYNC);

        CK(cuCtxGetCurrent(&cur));
        EXPECT(cur == NULL);
        EXPECT_ERR(cuCtxGetDevice(&dev), CUDA_ERROR_INVALID_CONTEXT);
        CK(cuCtxSetCurrent(p1));
        CK(cuCtxGetCurrent(&cur));
        EXPECT(cur == p1);
        CK(cuCtxGetDevice(&dev));
        EXPECT(dev == 0);
        CK(cuCtxSynchronize());

        /* a created context is pushed, and popping it restores the primary */
        CK(cuCtxCreate_v2(&c, 0, 0));
        CK(cuCtxGetCurrent(&cur));
        EXPECT(cur == c && c != p1);
        CUdeviceptr in_c;
        CK(cuMemAlloc(&in_c, 4096));
        CK(cuMemsetD8(in_c, 0x5a, 4096));
        unsigned char back[16];
        CK(cuMemcpyDtoH(back, in_c + 100, sizeof(back)));
        EXPECT(back[0] == 0x5a && back[15] == 0x5a);
        CUcontext owner = NULL;
        CK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, in_c));
        EXPECT(owner == c);
        CUcontext popped;
        CK(cuCtxPopCurrent(&popped));
        EXPECT(popped == c);
        CK(cuCtxGetCurrent(&cur));
        EXPECT(cur == p1);
        CK(cuCtxPushCurrent(c));
        CK(cuCtxSynchronize());
        CK(cuCtxPopCurrent(NULL));
        CK(cuCtxDestroy(c));
        /* the destroyed context's memory is gone with it */
        EXPECT_ERR(cuMemFree(in_c), CUDA_ERROR_INVALID_VALUE);
        /* the driver answers CONTEXT_IS_DESTROYED or INVALID_CONTEXT
         * (seen both on driver 580); lupine always says the former */
        CUresult again = cuCtxDestroy(c);
        EXPECT(again == CUDA_ERROR_CONTEXT_IS_DESTROYED || (!through_lupine && again == CUDA_ERROR_INVALID_CONTEXT));
        if (through_lupine) /* the real driver dereferences a made-up handle and crashes */
                EXPECT_ERR(cuCtxSetCurrent((CUcontext)(uintptr_t)0xdead000), CUDA_ERROR_INVALID_CONTEXT);
        unsigned api;
        CK(cuCtxGetApiVersion(p1, &api));
        EXPECT(api >= 3020);

        CK(cuDevicePrimaryCtxRelease(0));
        CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
        EXPECT(active == 1);
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
        uint32_t x = seed * 2654435761u + 1;
        for (size_t i = 0; i < n; i++) {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                p[i] = (uint8_t)x;
        }
}

static void test_memory(void)
{
        size_t free0, total;
        CK(cuMemGetInfo(&free0, &total));
        EXPECT(total > 0 && free0 <= total);

        /* sizes around the slab/chunk boundary and the 1 MiB bulk chunk */
        const size_t sizes[] = { 1, 255, 256, 4097, 65536, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 3 << 20, 37u << 20 };
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
                size_t n = sizes[k];
                uint8_t *src = malloc(n), *dst = malloc(n);
                EXPECT(src && dst);
                fill(src, n, (unsigned)k);
                memset(dst, 0, n);
                CUdeviceptr d, d2;
                CK(cuMemAlloc(&d, n));
                CK(cuMemAlloc(&d2, n));
                EXPECT(d % 256 == 0);
                CK(cuMemcpyHtoD(d, src, n));
                CK(cuMemcpyDtoD(d2, d, n));
                CK(cuMemcpyDtoH(dst, d2, n));
                EXPECT(memcmp(src, dst, n) == 0);
                /* async forms on the default streams */
                memset(dst, 0, n);
                CK(cuMemcpyHtoDAsync(d, src, n, 0));
                CK(cuMemcpyDtoDAsync(d2, d, n, CU_STREAM_LEGACY));
                CK(cuMemcpyDtoHAsync(dst, d2, n, CU_STREAM_PER_THREAD));
                EXPECT(memcmp(src, dst, n) == 0);

                CUdeviceptr base;
                size_t size;
                CK(cuMemGetAddressRange(&base, &size, d + n / 2));
                EXPECT(base == d && size == n);
                unsigned int mt;
                CK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d));
                EXPECT(mt == CU_MEMORYTYPE_DEVICE);
                int ord = -1;
                CK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d));
                EXPECT(ord == 0);
                CUdeviceptr start;
                CK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d + n - 1));
                EXPECT(start == d);
                CK(cuMemFree(d));
                CK(cuMemFree(d2));
                free(src);
                free(dst);
        }

        /* memsets, byte exact */
        CUdeviceptr m;
        uint8_t buf[4096];
        CK(cuMemAlloc(&m, sizeof(buf)));
        CK(cuMemsetD8(m, 0xab, sizeof(buf)));
        CK(cuMemcpyDtoH(buf, m, sizeof(buf)));
        for (size_t i = 0; i < sizeof(buf); i++)
                EXPECT(buf[i] == 0xab);
        CK(cuMemsetD16(m + 2, 0x1234, 100));
        CK(cuMemcpyDtoH(buf, m, sizeof(buf)));
        EXPECT(buf[0] == 0xab && buf[1] == 0xab && buf[2] == 0x34 && buf[3] == 0x12 && buf[201] == 0x12 && buf[202] == 0xab);
        CK(cuMemsetD32(m, 0xdeadbeef, 1024));
        CK(cuMemcpyDtoH(buf, m, sizeof(buf)));
        for (size_t i = 0; i < sizeof(buf); i += 4)
                EXPECT(buf[i] == 0xef && buf[i + 1] == 0xbe && buf[i + 2] == 0xad && buf[i + 3] == 0xde);
        CK(cuMemsetD8Async(m, 1, 16, 0));
        CK(cuMemsetD16Async(m + 16, 0x0202, 8, 0));
        CK(cuMemsetD32Async(m + 32, 0x03030303, 4, 0));
        CK(cuMemcpyDtoH(buf, m, 48));
        for (int i = 0; i < 48; i++)
                EXPECT(buf[i] == (i < 16 ? 1 : i < 32 ? 2 : 3));
        /* 2D: rows of 40 bytes, 64 apart; the bytes between rows stay */
        CK(cuMemsetD8(m, 0, sizeof(buf)));
        CK(cuMemsetD2D8(m, 64, 0x11, 40, 4));
        CK(cuMemsetD2D16(m + 256, 64, 0x2222, 20, 4));
        CK(cuMemsetD2D32Async(m + 512, 64, 0x33333333, 10, 4, 0));
        CK(cuMemcpyDtoH(buf, m, 768));
        for (int i = 0; i < 768; i++)
                EXPECT(buf[i] == (i % 64 >= 40 ? 0 : i < 256 ? 0x11 : i < 512 ? 0x22 : 0x33));
        EXPECT_ERR(cuMemsetD2D8(m, 64, 0, 64, sizeof(buf) / 64 + 1), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemsetD2D8Async(m + 4000, 64, 0, 40, 2, 0), CUDA_ERROR_INVALID_VALUE);

        /* errors the real driver gives, with the same CUresult */
        EXPECT_ERR(cuMemsetD8(m, 0, sizeof(buf) + 1), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemcpyHtoD(m + 4000, buf, 200), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemcpyDtoH(buf, m + sizeof(buf), 1), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemFree(m + 8), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemFree(0x1234), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemAlloc(&m, 0), CUDA_ERROR_INVALID_VALUE);
        CUdeviceptr huge;
        EXPECT_ERR(cuMemAlloc(&huge, total + (1ull << 30)), CUDA_ERROR_OUT_OF_MEMORY);
        CUdeviceptr base;
        EXPECT_ERR(cuMemGetAddressRange(&base, NULL, 0x42), CUDA_ERROR_NOT_FOUND);
        int host_var;
        unsigned int mt;
        EXPECT_ERR(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)&host_var),
                   CUDA_ERROR_INVALID_VALUE);
        CK(cuMemFree(m));
        /* driver 580 accepts a double free silently; lupine refuses it */
        if (through_lupine)
                EXPECT_ERR(cuMemFree(m), CUDA_ERROR_INVALID_VALUE);
        size_t free1;
        CK(cuMemGetInfo(&free1, &total));
        CK(cuCtxSynchronize());
}

static void test_misc(void)
{
        const char *s;
        CK(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
        EXPECT(strcmp(s, "CUDA_ERROR_OUT_OF_MEMORY") == 0);
        CK(cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s));
        EXPECT(strcmp(s, "invalid argument") == 0);
        EXPECT_ERR(cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);

        void *fn = NULL;
        CUdriverProcAddressQueryResult st;
        CK(cuGetProcAddress("cuMemAlloc", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
        EXPECT(st == CU_GET_PROC_ADDRESS_SUCCESS && fn == (void *)cuMemAlloc_v2);
        CK(cuGetProcAddress("cuMemcpyHtoD", &fn, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
        EXPECT(fn != NULL && fn != (void *)cuMemcpyHtoD_v2);
        CK(cuGetProcAddress("cuCtxCreate", &fn, 3020, 0, &st));
        EXPECT(fn == (void *)cuCtxCreate_v2);
        /* a miss is a successful query with a status, as in the driver */
        CK(cuGetProcAddress("cuNoSuchFunction", &fn, 13000, 0, &st));
        EXPECT(st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND && fn == NULL);
        CK(cuGetProcAddress("cuGraphAddBatchMemOpNode", &fn, 13000, 0, &st));
        EXPECT(fn != NULL);
        if (through_lupine) {
                /* an unimplemented function resolves to a stub that says
                 * NOT_SUPPORTED instead of crashing */
                CUresult (*batch_node)(void *, unsigned) = (CUresult(*)(void *, unsigned))fn;
                EXPECT(batch_node(NULL, 0) == CUDA_ERROR_NOT_SUPPORTED);
                /* arrays are forwarded now (e2e_arrays): a NULL descriptor is the driver's error */
                EXPECT(cuArrayCreate(NULL, NULL) == CUDA_ERROR_INVALID_VALUE);
        }
}

int main(void)
{
        int v;
        EXPECT_ERR(cuDeviceGetCount(&v), CUDA_ERROR_NOT_INITIALIZED);
        EXPECT_ERR(cuInit(1), CUDA_ERROR_INVALID_VALUE);
        CK(cuInit(0));
        test_devices();
        test_primary_and_contexts();
        test_memory();
        test_misc();
        if (!e2e_failures)
                printf("e2e_basic: OK\n");
        return e2e_failures ? 1 : 0;
}
