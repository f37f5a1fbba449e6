/* SPDX-License-Identifier: MIT */
/*
 * CUDA_VISIBLE_DEVICES as the program sees it (tests/e2e/test_visible.py
 * runs it under several lists; tests/gpu/visible.sh runs it on the real
 * driver and through lupine). It prints what the driver says:
 *
 *   init RC
 *   count RC N
 *   dev I UUID PCI-BUS-ID NAME      one line per device, in order
 *
 * then, on each device I, checks that everything naming a device answers
 * I: contexts (created and primary), cuCtxGetDevice, the pointer attribute
 * DEVICE_ORDINAL of memory from cuMemAlloc, the stream-ordered allocator
 * and VMM (location ids, access, allocation properties), PCI bus id
 * lookups; and that device N (one past the list) is refused. The last line
 * is "e2e_visible: OK" (exit 0) or the failures.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "e2e_util.h"

static void uuid_text(const CUuuid *u, char out[64])
{
        const unsigned char *b = (const unsigned char *)u->bytes;
        snprintf(out, 64, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
                 b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

static int ptr_device(CUdeviceptr p)
{
        int ord = -1;
        CK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
        return ord;
}

/* the memory works: a memset read back */
static void touch(CUdeviceptr p, size_t n)
{
        unsigned char b[64];
        CK(cuMemsetD8(p, 0x5a, n));
        CK(cuMemcpyDtoH(b, p + n - sizeof(b), sizeof(b)));
        for (size_t i = 0; i < sizeof(b); i++)
                EXPECT(b[i] == 0x5a);
}

static void created_context(int i)
{
        CUcontext c, cur;
        CUdevice d = -1;
        CUdeviceptr p;
        CK(cuCtxCreate_v2(&c, 0, i));
        CK(cuCtxGetDevice(&d));
        EXPECT(d == i);
        d = -1;
        CK(cuCtxGetDevice_v2(&d, c));
        EXPECT(d == i);
        CK(cuMemAlloc(&p, 1 << 20));
        EXPECT(ptr_device(p) == i);
        CK(cuPointerGetAttribute(&cur, CU_POINTER_ATTRIBUTE_CONTEXT, p));
        EXPECT(cur == c);
        touch(p, 1 << 20);
        size_t free_b = 0, total = 0;
        CK(cuMemGetInfo(&free_b, &total));
        EXPECT(total > 0 && free_b <= total);
        CK(cuMemFree(p));
        CK(cuCtxDestroy(c));
}

static void primary_context(int i)
{
        CUcontext c;
        CUdevice d = -1;
        CUdeviceptr p, q;
        CUmemoryPool pool;
        unsigned flags;
        int active = 0;
        CK(cuDevicePrimaryCtxRetain(&c, i));
        CK(cuCtxSetCurrent(c));
        CK(cuCtxGetDevice(&d));
        EXPECT(d == i);
        CK(cuDevicePrimaryCtxGetState(i, &flags, &active));
        EXPECT(active == 1);
        CK(cuMemAlloc(&p, 1 << 20));
        EXPECT(ptr_device(p) == i);
        /* the stream-ordered allocator: the current pool and the default one */
        CK(cuMemAllocAsync(&q, 1 << 20, NULL));
        CK(cuStreamSynchronize(NULL));
        EXPECT(ptr_device(q) == i);
        touch(q, 1 << 20);
        CK(cuMemFreeAsync(q, NULL));
        CK(cuDeviceGetDefaultMemPool(&pool, i));
        CK(cuMemAllocFromPoolAsync(&q, 1 << 20, pool, NULL));
        CK(cuStreamSynchronize(NULL));
        EXPECT(ptr_device(q) == i);
        CK(cuMemFreeAsync(q, NULL));
        CK(cuStreamSynchronize(NULL));
        CK(cuMemFree(p));
        CK(cuCtxSetCurrent(NULL));
        CK(cuDevicePrimaryCtxRelease(i));
}

/* VMM: location ids of devices, both ways (the primary context is current) */
static void vmm(int i)
{
        CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                     .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = i } };
        CUmemAccessDesc acc = { .location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
        CUmemAllocationProp got;
        CUmemGenericAllocationHandle h;
        CUdeviceptr va;
        CUcontext c;
        size_t gran = 0;
        unsigned long long fl = 0;
        CK(cuDevicePrimaryCtxRetain(&c, i));
        CK(cuCtxSetCurrent(c));
        CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
        EXPECT(gran > 0);
        CK(cuMemCreate(&h, gran, &prop, 0));
        CK(cuMemGetAllocationPropertiesFromHandle(&got, h));
        EXPECT(got.location.type == CU_MEM_LOCATION_TYPE_DEVICE && got.location.id == i);
        CK(cuMemAddressReserve(&va, gran, 0, 0, 0));
        CK(cuMemMap(va, gran, 0, h, 0));
        CK(cuMemSetAccess(va, gran, &acc, 1));
        CK(cuMemGetAccess(&fl, &prop.location, va));
        EXPECT(fl == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
        EXPECT(ptr_device(va) == i);
        touch(va, gran);
        CK(cuMemUnmap(va, gran));
        CK(cuMemRelease(h));
        CK(cuMemAddressFree(va, gran));
        CK(cuCtxSetCurrent(NULL));
        CK(cuDevicePrimaryCtxRelease(i));
}

static void refused(int n)
{
        CUdevice d;
        CUcontext c;
        char name[64];
        int v;
        EXPECT_ERR(cuDeviceGet(&d, n), CUDA_ERROR_INVALID_DEVICE);
        EXPECT_ERR(cuDeviceGetName(name, sizeof(name), n), CUDA_ERROR_INVALID_DEVICE);
        EXPECT_ERR(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, n), CUDA_ERROR_INVALID_DEVICE);
        EXPECT_ERR(cuCtxCreate_v2(&c, 0, n), CUDA_ERROR_INVALID_DEVICE);
        EXPECT_ERR(cuDevicePrimaryCtxRetain(&c, n), CUDA_ERROR_INVALID_DEVICE);
        /* a location one past the list names no device of the server's either */
        CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                     .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = n } };
        CUmemGenericAllocationHandle h;
        CK(cuDevicePrimaryCtxRetain(&c, 0));
        CK(cuCtxSetCurrent(c));
        EXPECT(cuMemCreate(&h, 2 << 20, &prop, 0) != CUDA_SUCCESS);
        CK(cuCtxSetCurrent(NULL));
        CK(cuDevicePrimaryCtxRelease(0));
}

int main(void)
{
        int n = -1;
        CUresult r = cuInit(0);
        printf("init %d\n", (int)r);
        CUresult rc = cuDeviceGetCount(&n);
        printf("count %d %d\n", (int)rc, n);
        if (r != CUDA_SUCCESS)
                return e2e_verdict("e2e_visible");
        char pci[n > 0 ? n : 1][32];
        for (int i = 0; i < n; i++) {
                CUuuid u;
                char name[256], text[64];
                CK(cuDeviceGetUuid_v2(&u, i));
                CK(cuDeviceGetName(name, sizeof(name), i));
                CK(cuDeviceGetPCIBusId(pci[i], sizeof(pci[i]), i));
                uuid_text(&u, text);
                printf("dev %d %s %s %s\n", i, text, pci[i], name);
        }
        fflush(stdout);
        for (int i = 0; i < n; i++) {
                CUdevice d = -1;
                CK(cuDeviceGet(&d, i));
                EXPECT(d == i);
                CK(cuDeviceGetByPCIBusId(&d, pci[i]));
                EXPECT(d == i);
                created_context(i);
                primary_context(i);
                vmm(i);
        }
        if (n > 0)
                refused(n);
        return e2e_verdict("e2e_visible");
}
