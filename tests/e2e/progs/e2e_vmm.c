/* SPDX-License-Identifier: MIT */
/*
 * Virtual memory management through the driver API, with every byte checked
 * by kernels and copies: reservations (hints, alignment), physical
 * allocations, mappings (two of one allocation, one at an offset, remaps),
 * access, growth the way PyTorch's expandable segments grow, the driver's
 * errors for bad input, PCI bus ids and the profiler calls. It asserts the
 * documented driver behaviour, so it runs unchanged on the real driver.
 *
 * usage: e2e_vmm DIR          (DIR holds kernels.ptx)
 *        e2e_vmm DIR hold     builds a session's VMM state (one allocation
 *                             held only by its two mappings, one unmapped
 *                             with data), prints "ready",
 *                             waits for a line on stdin (the daemon restarts
 *                             meanwhile) and checks everything came back
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <cudaProfiler.h>

/* A documented behaviour this program is less sure the driver shows: a
 * difference is listed and counted, and the run goes on. */
#define SOFT(cond)                                                                          \
        do {                                                                                \
                if (!(cond)) {                                                              \
                        fprintf(stderr, "%s:%d: differs: %s\n", __FILE__, __LINE__, #cond); \
                        e2e_failures++;                                                     \
                }                                                                           \
        } while (0)

static CUmodule mod;
static size_t G; /* the allocation granularity */
static int n_devices, through_lupine;

static CUmemAllocationProp prop_dev(int dev)
{
        CUmemAllocationProp p;
        memset(&p, 0, sizeof(p));
        p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        p.location.id = dev;
        return p;
}

static CUmemGenericAllocationHandle create(size_t size)
{
        CUmemAllocationProp p = prop_dev(0);
        CUmemGenericAllocationHandle h;
        CK(cuMemCreate(&h, size, &p, 0));
        return h;
}

static void access_rw(CUdeviceptr p, size_t size)
{
        CUmemAccessDesc d;
        memset(&d, 0, sizeof(d));
        d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        d.location.id = 0;
        d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        CK(cuMemSetAccess(p, size, &d, 1));
}

static void map_rw(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h)
{
        CK(cuMemMap(p, size, offset, h, 0));
        access_rw(p, size);
}

/* a kernel fills [p, p + bytes) with v */
static void fill(CUdeviceptr p, size_t bytes, unsigned v)
{
        CUfunction f;
        int n = (int)(bytes / 4);
        void *args[] = { &p, &v, &n };
        CK(cuModuleGetFunction(&f, mod, "fill_u32"));
        CK(cuLaunchKernel(f, 64, 1, 1, 256, 1, 1, 0, 0, args, NULL));
        CK(cuCtxSynchronize());
}

/* every word of [p, p + bytes) is v (copied back in one piece) */
static int holds(CUdeviceptr p, size_t bytes, unsigned v)
{
        unsigned *b = malloc(bytes);
        EXPECT(b != NULL);
        CK(cuMemcpyDtoH(b, p, bytes));
        int ok = 1;
        for (size_t i = 0; i < bytes / 4 && ok; i++)
                ok = b[i] == v;
        free(b);
        return ok;
}

/* a host pattern through [p, p + bytes) and back */
static void roundtrip(CUdeviceptr p, size_t bytes, unsigned seed)
{
        unsigned *a = malloc(bytes), *b = malloc(bytes);
        EXPECT(a && b);
        for (size_t i = 0; i < bytes / 4; i++)
                a[i] = (unsigned)(i * 2654435761u) ^ seed;
        CK(cuMemcpyHtoD(p, a, bytes));
        CK(cuMemcpyDtoH(b, p, bytes));
        EXPECT(memcmp(a, b, bytes) == 0);
        free(a);
        free(b);
}

static void test_granularity(void)
{
        CUmemAllocationProp p = prop_dev(0);
        size_t rec = 0;
        CK(cuMemGetAllocationGranularity(&G, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
        CK(cuMemGetAllocationGranularity(&rec, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
        EXPECT(G > 0 && (G & (G - 1)) == 0 && rec >= G && rec % G == 0);
        printf("granularity: minimum %zu, recommended %zu\n", G, rec);
        p.location.id = n_devices;
        /* driver 580 answers for a device that does not exist */
        EXPECT_ERR(cuMemGetAllocationGranularity(&rec, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
        EXPECT_ERR(cuMemGetAllocationGranularity(NULL, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_ERROR_INVALID_VALUE);
}

/* reserve, create, map, access, data; two mappings of one allocation; a
 * mapping at an offset; retain; remap elsewhere */
static void test_basics(void)
{
        CUdeviceptr va;
        CK(cuMemAddressReserve(&va, 64 * G, 0, 0, 0));
        EXPECT(va % G == 0);
        CUmemGenericAllocationHandle h1 = create(4 * G), h2 = create(2 * G), got;
        map_rw(va, 4 * G, 0, h1);
        unsigned long long flags = 99;
        CUmemLocation loc = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 };
        CK(cuMemGetAccess(&flags, &loc, va + G));
        EXPECT(flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
        fill(va, 4 * G, 0x11111111u);
        EXPECT(holds(va, 4 * G, 0x11111111u));
        roundtrip(va + G, G, 1);
        fill(va, 4 * G, 0x22222222u);

        /* the same allocation mapped twice shows the same bytes */
        map_rw(va + 8 * G, 4 * G, 0, h1);
        EXPECT(holds(va + 8 * G, 4 * G, 0x22222222u));
        CK(cuMemsetD32(va + 8 * G + 3 * G, 0x33333333u, G / 4));
        EXPECT(holds(va + 3 * G, G, 0x33333333u));
        EXPECT(holds(va, 3 * G, 0x22222222u));

        /* at an offset into the allocation: its bytes from there */
        CUresult r = cuMemMap(va + 16 * G, G, 3 * G, h1, 0);
        printf("map at an offset: %d\n", (int)r);
        if (r == CUDA_SUCCESS) {
                access_rw(va + 16 * G, G);
                EXPECT(holds(va + 16 * G, G, 0x33333333u));
                CK(cuMemUnmap(va + 16 * G, G));
        }
        /* at an offset past its end: still NOT_SUPPORTED on driver 580 */
        EXPECT_ERR(cuMemMap(va + 16 * G, 2 * G, 3 * G, h1, 0), CUDA_ERROR_NOT_SUPPORTED);
        /* part of an allocation: driver 580 maps whole ones only */
        EXPECT_ERR(cuMemMap(va + 16 * G, 2 * G, 0, h1, 0), CUDA_ERROR_NOT_SUPPORTED);

        /* retain: the handle mapped there, the same value */
        CK(cuMemRetainAllocationHandle(&got, (void *)(uintptr_t)(va + 9 * G + 123)));
        EXPECT(got == h1);
        CK(cuMemRelease(got));
        CUmemAllocationProp p;
        CK(cuMemGetAllocationPropertiesFromHandle(&p, h2));
        EXPECT(p.type == CU_MEM_ALLOCATION_TYPE_PINNED && p.location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
               p.location.id == 0);

        /* pointer queries know the mapping */
        unsigned mt = 0;
        int ord = -1;
        CK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va + 2 * G));
        CK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, va + 2 * G));
        EXPECT(mt == CU_MEMORYTYPE_DEVICE && ord == 0);
        void *mbase = NULL;
        size_t msize = 0;
        EXPECT_ERR(cuPointerGetAttribute(&mbase, CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, va + 2 * G + 5), CUDA_SUCCESS);
        EXPECT_ERR(cuPointerGetAttribute(&msize, CU_POINTER_ATTRIBUTE_MAPPING_SIZE, va + 2 * G + 5), CUDA_SUCCESS);
        SOFT((CUdeviceptr)(uintptr_t)mbase == va && msize == 4 * G);

        /* remap elsewhere: h2 where the second view of h1 was */
        CK(cuMemUnmap(va + 8 * G, 4 * G));
        map_rw(va + 8 * G, 2 * G, 0, h2);
        fill(va + 8 * G, 2 * G, 0x44444444u);
        EXPECT(holds(va + 8 * G, 2 * G, 0x44444444u));
        EXPECT(holds(va, 3 * G, 0x22222222u));

        /* the handle may go while mapped: the memory stays until the unmap */
        CK(cuMemRelease(h1));
        EXPECT(holds(va + 3 * G, G, 0x33333333u));
        CK(cuMemUnmap(va, 4 * G));
        CK(cuMemUnmap(va + 8 * G, 2 * G));
        CK(cuMemRelease(h2));
        CK(cuMemAddressFree(va, 64 * G));
        printf("basics: OK\n");
}

/* the errors the driver gives */
static void test_bad_input(void)
{
        CUdeviceptr va, other;
        CK(cuMemAddressReserve(&va, 8 * G, 0, 0, 0));
        CUmemGenericAllocationHandle h = create(2 * G), hb;
        CUmemAllocationProp p = prop_dev(0);
        EXPECT_ERR(cuMemCreate(&hb, G + G / 2, &p, 0), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemCreate(&hb, 0, &p, 0), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemCreate(NULL, G, &p, 0), CUDA_ERROR_INVALID_VALUE);
        p.location.id = n_devices;
        EXPECT_ERR(cuMemCreate(&hb, G, &p, 0), CUDA_ERROR_INVALID_DEVICE);
        p = prop_dev(0);
        p.type = CU_MEM_ALLOCATION_TYPE_INVALID;
        EXPECT_ERR(cuMemCreate(&hb, G, &p, 0), CUDA_ERROR_INVALID_VALUE);
        /* more than the device has: seen at once, as the driver says it */
        size_t total = 0;
        CK(cuDeviceTotalMem(&total, 0));
        p = prop_dev(0);
        EXPECT_ERR(cuMemCreate(&hb, (total / G + 1) * G, &p, 0), CUDA_ERROR_OUT_OF_MEMORY);

        /* a map that runs out of the reservation: driver 580 maps it (the VA
         * after it is free); lupine cannot let a client map arena VA it
         * did not reserve, and refuses */
        if (through_lupine)
                EXPECT_ERR(cuMemMap(va + 7 * G, 2 * G, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
        /* larger than the allocation, or a part of it: NOT_SUPPORTED on driver 580 */
        EXPECT_ERR(cuMemMap(va, 4 * G, 0, h, 0), CUDA_ERROR_NOT_SUPPORTED);
        map_rw(va, 2 * G, 0, h);
        EXPECT_ERR(cuMemMap(va + G, G, 0, h, 0), CUDA_ERROR_NOT_SUPPORTED); /* part, over a mapping */
        EXPECT_ERR(cuMemUnmap(va, G), CUDA_ERROR_INVALID_VALUE);            /* part of a mapping */

        CUmemAccessDesc d;
        memset(&d, 0, sizeof(d));
        d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        d.location.id = n_devices;
        d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        EXPECT_ERR(cuMemSetAccess(va, 2 * G, &d, 1), CUDA_ERROR_INVALID_VALUE); /* driver 580's answer */
        d.location.id = 0;
        EXPECT_ERR(cuMemSetAccess(va + 4 * G, G, &d, 1), CUDA_ERROR_INVALID_VALUE); /* not mapped */
        EXPECT_ERR(cuMemSetAccess(va, 2 * G, &d, 0), CUDA_ERROR_INVALID_VALUE);
        unsigned long long flags;
        CUmemLocation loc = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 };
        EXPECT_ERR(cuMemGetAccess(&flags, &loc, va + 4 * G), CUDA_ERROR_INVALID_VALUE);
        loc.id = n_devices;
        EXPECT_ERR(cuMemGetAccess(&flags, &loc, va), CUDA_ERROR_INVALID_DEVICE);
        CUmemGenericAllocationHandle r;
        EXPECT_ERR(cuMemRetainAllocationHandle(&r, (void *)(uintptr_t)(va + 4 * G)), CUDA_ERROR_INVALID_VALUE);

        EXPECT_ERR(cuMemAddressReserve(&other, G + 4096 * 3 + 1, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemAddressReserve(&other, G, 3 * G, 0, 0), CUDA_ERROR_INVALID_VALUE); /* alignment */
        EXPECT_ERR(cuMemAddressFree(va, 4 * G), CUDA_ERROR_INVALID_VALUE);                 /* not its size */
        if (through_lupine) {
                /* shareable handles name memory of the server's driver */
                int fd = -1;
                EXPECT_ERR(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                           CUDA_ERROR_NOT_SUPPORTED);
        }
        CK(cuMemUnmap(va, 2 * G));
        CK(cuMemRelease(h));
        CK(cuMemAddressFree(va, 8 * G));
        /* an unmap where nothing is mapped: driver 580 says CUDA_SUCCESS (in a
         * reservation of its own: what the driver does to it afterwards is
         * not asserted) */
        CK(cuMemAddressReserve(&va, 4 * G, 0, 0, 0));
        EXPECT_ERR(cuMemUnmap(va + G, G), CUDA_SUCCESS);
        (void)cuMemAddressFree(va, 4 * G);
        printf("bad input: done\n");
}

/* hints and alignment */
static void test_placement(void)
{
        CUdeviceptr a, b, c;
        CK(cuMemAddressReserve(&a, 4 * G, 0, 0, 0));
        CK(cuMemAddressFree(a, 4 * G));
        /* a hint that is free is used */
        CK(cuMemAddressReserve(&b, 2 * G, 0, a + 2 * G, 0));
        SOFT(b == a + 2 * G);
        /* a hint that is taken gives another address */
        CK(cuMemAddressReserve(&c, 2 * G, 0, b, 0));
        EXPECT(c != b && (c + 2 * G <= b || c >= b + 2 * G));
        CK(cuMemAddressFree(c, 2 * G));
        CK(cuMemAddressReserve(&c, 2 * G, 64 * G, 0, 0));
        EXPECT(c % (64 * G) == 0);
        CK(cuMemAddressFree(c, 2 * G));
        CK(cuMemAddressFree(b, 2 * G));
        /* cuMemAlloc never lands in a reservation */
        CK(cuMemAddressReserve(&a, 32 * G, 0, 0, 0));
        for (int i = 0; i < 8; i++) {
                CUdeviceptr m;
                CK(cuMemAlloc(&m, G));
                EXPECT(m + G <= a || m >= a + 32 * G);
        }
        CK(cuMemAddressFree(a, 32 * G));
        printf("placement: OK\n");
}

/* PyTorch's expandable segments: reserve big, map chunks in order, use the
 * mapped prefix as one range (kernels and copies across chunk borders) */
static void test_growth(void)
{
        enum {
                CHUNKS = 12
        };
        const size_t chunk = 2 * G, reserve = 64 * chunk;
        CUdeviceptr va;
        CUmemGenericAllocationHandle h[CHUNKS];
        CK(cuMemAddressReserve(&va, reserve, 0, 0, 0));
        for (int i = 0; i < CHUNKS; i++) {
                h[i] = create(chunk);
                CK(cuMemMap(va + i * chunk, chunk, 0, h[i], 0));
                access_rw(va + i * chunk, chunk);
                size_t used = (size_t)(i + 1) * chunk;
                fill(va, used, 0x5000u + (unsigned)i);
                EXPECT(holds(va, used, 0x5000u + (unsigned)i));
                if (i > 0)
                        roundtrip(va + i * chunk - G / 2, G, (unsigned)i); /* across the border */
        }
        /* one access call over several mappings, one copy across all of them */
        access_rw(va, CHUNKS * chunk);
        CK(cuMemsetD32(va + G, 0x77u, (CHUNKS * chunk - 2 * G) / 4));
        EXPECT(holds(va + G, CHUNKS * chunk - 2 * G, 0x77u));
        /* shrink from the end, as the allocator gives memory back */
        for (int i = CHUNKS - 1; i >= CHUNKS / 2; i--) {
                CK(cuMemUnmap(va + i * chunk, chunk));
                CK(cuMemRelease(h[i]));
        }
        EXPECT(holds(va + G, CHUNKS / 2 * chunk - G, 0x77u));
        CK(cuMemUnmap(va, CHUNKS / 2 * chunk)); /* several whole mappings at once */
        for (int i = 0; i < CHUNKS / 2; i++)
                CK(cuMemRelease(h[i]));
        CK(cuMemAddressFree(va, reserve));
        printf("growth: OK\n");
}

static void test_pci(void)
{
        char id[64], short_id[64];
        int dom = -1, bus = -1, slot = -1;
        CUdevice d = -1;
        CK(cuDeviceGetPCIBusId(id, sizeof(id), 0));
        CK(cuDeviceGetAttribute(&dom, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, 0));
        CK(cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0));
        CK(cuDeviceGetAttribute(&slot, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, 0));
        char want[64];
        snprintf(want, sizeof(want), "%04x:%02x:%02x.0", dom, bus, slot);
        printf("pci bus id: %s\n", id);
        EXPECT(strcasecmp(id, want) == 0);
        CK(cuDeviceGetByPCIBusId(&d, id));
        EXPECT(d == 0);
        snprintf(short_id, sizeof(short_id), "%02x:%02x.0", bus, slot);
        d = -1;
        CK(cuDeviceGetByPCIBusId(&d, short_id));
        EXPECT(d == 0);
        snprintf(short_id, sizeof(short_id), "%04x:%02x:%02x", dom, bus, slot);
        d = -1;
        CK(cuDeviceGetByPCIBusId(&d, short_id));
        EXPECT(d == 0);
        EXPECT_ERR(cuDeviceGetByPCIBusId(&d, "not a bus id"), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuDeviceGetPCIBusId(id, sizeof(id), n_devices), CUDA_ERROR_INVALID_DEVICE);
        /* a short buffer: whatever the answer, never an unterminated string */
        char tiny[6];
        memset(tiny, 'x', sizeof(tiny));
        CUresult r = cuDeviceGetPCIBusId(tiny, sizeof(tiny), 0);
        printf("pci bus id in 6 bytes: %d\n", (int)r);
        EXPECT(r == CUDA_ERROR_INVALID_VALUE); /* driver 580 */
}

static void test_profiler(void)
{
        CK(cuProfilerStart());
        CK(cuProfilerStop());
        EXPECT_ERR(cuProfilerInitialize("none", "none", CU_OUT_CSV), CUDA_ERROR_NOT_SUPPORTED);
}

/* ---- hold: state that must survive a restart */

struct held {
        CUdeviceptr va;
        CUmemGenericAllocationHandle a, b, c;
};

static void hold_build(struct held *s)
{
        CUdeviceptr tmp;
        CK(cuMemAddressReserve(&s->va, 32 * G, 0, 0, 0));
        s->a = create(4 * G);
        s->b = create(2 * G);
        s->c = create(2 * G);
        map_rw(s->va, 4 * G, 0, s->a);
        fill(s->va, 4 * G, 0xa0a0a0a0u);
        map_rw(s->va + 8 * G, 2 * G, 0, s->b);
        map_rw(s->va + 12 * G, 2 * G, 0, s->b); /* b twice */
        fill(s->va + 8 * G, 2 * G, 0xb0b0b0b0u);
        CK(cuMemRelease(s->b)); /* now only its mappings hold it */
        /* c holds data while unmapped */
        CK(cuMemAddressReserve(&tmp, 2 * G, 0, 0, 0));
        map_rw(tmp, 2 * G, 0, s->c);
        fill(tmp, 2 * G, 0xc0c0c0c0u);
        CK(cuMemUnmap(tmp, 2 * G));
        CK(cuMemAddressFree(tmp, 2 * G));
}

static void hold_check(const struct held *s)
{
        CUmemGenericAllocationHandle got;
        unsigned long long flags = 0;
        CUmemLocation loc = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 };
        EXPECT(holds(s->va, 4 * G, 0xa0a0a0a0u));
        EXPECT(holds(s->va + 8 * G, 2 * G, 0xb0b0b0b0u));
        EXPECT(holds(s->va + 12 * G, 2 * G, 0xb0b0b0b0u));
        CK(cuMemGetAccess(&flags, &loc, s->va + 12 * G));
        EXPECT(flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
        CK(cuMemRetainAllocationHandle(&got, (void *)(uintptr_t)(s->va + G)));
        EXPECT(got == s->a);
        CK(cuMemRelease(got));
        CK(cuMemRetainAllocationHandle(&got, (void *)(uintptr_t)(s->va + 12 * G)));
        EXPECT(got == s->b); /* held by its mappings only, and still the same id */
        /* the unmapped one, mapped now: its bytes */
        map_rw(s->va + 20 * G, 2 * G, 0, s->c);
        EXPECT(holds(s->va + 20 * G, 2 * G, 0xc0c0c0c0u));
        /* writes through one view of b show in the other */
        CK(cuMemsetD32(s->va + 12 * G, 0xb1b1b1b1u, G / 4));
        EXPECT(holds(s->va + 8 * G, G, 0xb1b1b1b1u));
        /* unmap and map elsewhere */
        CK(cuMemUnmap(s->va, 4 * G));
        map_rw(s->va + 24 * G, 4 * G, 0, s->a);
        EXPECT(holds(s->va + 24 * G, 4 * G, 0xa0a0a0a0u));
        /* a new allocation does not collide with the restored ones */
        CUmemGenericAllocationHandle n = create(2 * G);
        EXPECT(n != s->a && n != s->b && n != s->c);
        map_rw(s->va, 2 * G, 0, n);
        fill(s->va, 2 * G, 0xd0d0d0d0u);
        EXPECT(holds(s->va + 24 * G, 4 * G, 0xa0a0a0a0u));
        EXPECT(holds(s->va + 20 * G, 2 * G, 0xc0c0c0c0u));
        CK(cuMemUnmap(s->va, 2 * G));
        CK(cuMemUnmap(s->va + 8 * G, 2 * G));
        CK(cuMemUnmap(s->va + 12 * G, 2 * G));
        CK(cuMemUnmap(s->va + 20 * G, 2 * G));
        CK(cuMemUnmap(s->va + 24 * G, 4 * G));
        CK(cuMemRelease(n));
        CK(cuMemRelease(s->a));
        CK(cuMemRelease(s->b)); /* the reference the retain gave */
        CK(cuMemRelease(s->c));
        CK(cuMemAddressFree(s->va, 32 * G));
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                fprintf(stderr, "usage: e2e_vmm DIR [hold]\n");
                return 2;
        }
        char path[4096], name[256] = "";
        CUdevice dev;
        CUcontext ctx;
        CK(cuInit(0));
        CK(cuDeviceGetCount(&n_devices));
        CK(cuDeviceGet(&dev, 0));
        CK(cuDeviceGetName(name, sizeof(name), dev));
        through_lupine = strstr(name, "(sim)") != NULL || strstr(name, "(lupine)") != NULL;
        CK(cuDevicePrimaryCtxRetain(&ctx, dev));
        CK(cuCtxSetCurrent(ctx));
        snprintf(path, sizeof(path), "%s/kernels.ptx", argv[1]);
        FILE *f = fopen(path, "rb");
        EXPECT(f != NULL);
        static char ptx[1 << 20];
        size_t n = fread(ptx, 1, sizeof(ptx) - 1, f);
        fclose(f);
        ptx[n] = 0;
        CK(cuModuleLoadData(&mod, ptx));
        test_granularity();

        if (argc > 2 && strcmp(argv[2], "hold") == 0) {
                struct held s;
                char line[64];
                hold_build(&s);
                printf("ready: reservation 0x%llx, handles %llx %llx %llx\n", (unsigned long long)s.va,
                       (unsigned long long)s.a, (unsigned long long)s.b, (unsigned long long)s.c);
                fflush(stdout);
                if (!fgets(line, sizeof(line), stdin))
                        return 1;
                hold_check(&s);
                printf("e2e_vmm hold: %s\n", e2e_failures ? "FAILED" : "OK");
                return e2e_failures ? 1 : 0;
        }
        test_basics();
        test_bad_input();
        test_placement();
        test_growth();
        test_pci();
        test_profiler();
        printf("e2e_vmm: %s\n", e2e_failures ? "FAILED" : "OK");
        return e2e_failures ? 1 : 0;
}
