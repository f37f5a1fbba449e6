/* SPDX-License-Identifier: MIT */
/*
 * Linear device memory (cuMemAlloc) and the address checks that every
 * copy and set goes through.
 *
 * A cuMemAlloc block is an anonymous private mapping, page aligned (so at
 * least the driver's 256 B), charged to its device by the mapped size.
 * Accesses are checked against the size the caller asked for, so an
 * off-by-one past the end is an error here even where real hardware would
 * silently touch padding.
 */
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim_internal.h"
#include "sim_graph.h"

static size_t page_size(void)
{
        long p = sysconf(_SC_PAGESIZE);

        return p > 0 ? (size_t)p : 4096;
}

struct sim_range *sim_range_find(struct sim_driver *drv, CUdeviceptr addr)
{
        struct sim_range *r;
        long i;

        if (addr > UINTPTR_MAX)
                return NULL;
        i = sim_svec_find_le(&drv->ranges, (uintptr_t)addr);
        if (i < 0)
                return NULL;
        r = drv->ranges.items[i].obj;
        return (uintptr_t)addr - r->start < r->size ? r : NULL;
}

bool sim_range_overlaps(struct sim_driver *drv, uintptr_t start, size_t size)
{
        /* The last range that starts before the span ends is the only one
         * that can reach into it: ranges do not overlap each other. */
        long i = sim_svec_find_le(&drv->ranges, start + size - 1);
        const struct sim_range *r;

        if (i < 0)
                return false;
        r = drv->ranges.items[i].obj;
        return r->start + r->size > start;
}

CUresult sim_check_device_range(struct sim_driver *drv, CUdeviceptr ptr, size_t size,
                                enum sim_access_need need)
{
        struct sim_range *r = sim_range_find(drv, ptr);

        for (;;) {
                if (!r)
                        return CUDA_ERROR_INVALID_VALUE;
                if ((need & SIM_NEED_READ) && !(r->access & CU_MEM_ACCESS_FLAGS_PROT_READ))
                        return CUDA_ERROR_INVALID_VALUE;
                if ((need & SIM_NEED_WRITE) && r->access != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
                        return CUDA_ERROR_INVALID_VALUE;
                uintptr_t left = r->size - ((uintptr_t)ptr - r->start);
                if (size <= left)
                        return CUDA_SUCCESS;
                /* VMM mappings one after the other are one range to the
                 * device (PyTorch's expandable segments grow that way) */
                if (r->kind != SIM_RANGE_MAPPING)
                        return CUDA_ERROR_INVALID_VALUE;
                ptr += left;
                size -= left;
                r = sim_range_find(drv, ptr);
                if (r && r->kind != SIM_RANGE_MAPPING)
                        return CUDA_ERROR_INVALID_VALUE;
        }
}

CUresult sim_check_host_range(struct sim_driver *drv, const void *p, size_t size,
                              enum sim_access_need need)
{
        uintptr_t start = (uintptr_t)p;
        struct sim_reservation *res;
        long i;

        if (size == 0)
                return CUDA_SUCCESS;
        if (!p || size > UINTPTR_MAX - start)
                return CUDA_ERROR_INVALID_VALUE;
        i = sim_svec_find_le(&drv->reservations, start + size - 1);
        if (i < 0)
                return CUDA_SUCCESS;
        res = drv->reservations.items[i].obj;
        if (res->start + res->size <= start)
                return CUDA_SUCCESS;
        /* It touches a reservation: only mapped, accessible parts would
         * not fault, and those are device memory (UVA). */
        return sim_check_device_range(drv, start, size, need);
}

static bool kind_is_device(enum sim_range_kind kind)
{
        return kind == SIM_RANGE_ALLOC || kind == SIM_RANGE_GLOBAL;
}

/* Lock held exclusive; r is already out of the table. */
static void range_free(struct sim_driver *drv, struct sim_range *r)
{
        struct sim_device *d = sim_device_at(drv, r->dev);

        if (kind_is_device(r->kind) && d)
                sim_mem_refund(d, r->map_size);
        /* Registered memory is the caller's: only forget it. */
        if (r->kind != SIM_RANGE_HOST_REGISTERED)
                munmap((void *)r->start, r->map_size);
        free(r->adv);
        free(r);
}

void sim_range_destroy(struct sim_driver *drv, struct sim_range *r)
{
        if (!r)
                return;
        (void)sim_svec_remove(&drv->ranges, r->start);
        range_free(drv, r);
}

void sim_mem_free_ctx_allocs(struct sim_driver *drv, CUcontext ctx)
{
        for (size_t i = drv->ranges.n; i-- > 0;) {
                struct sim_range *r = drv->ranges.items[i].obj;

                /* Globals go with their module (sim_module_unload_ctx). */
                if (r->ctx != ctx || (r->kind != SIM_RANGE_ALLOC && r->kind != SIM_RANGE_HOST_ALLOC &&
                                      r->kind != SIM_RANGE_HOST_REGISTERED && r->kind != SIM_RANGE_MANAGED))
                        continue;
                sim_svec_remove_at(&drv->ranges, i);
                range_free(drv, r);
        }
}

CUresult sim_range_create(struct sim_driver *drv, enum sim_range_kind kind, CUcontext ctx, int dev,
                          size_t size, struct sim_range **ret)
{
        size_t page = page_size(), map_size;
        struct sim_range *r;
        CUresult res;
        void *p;

        if (size == 0)
                return CUDA_ERROR_INVALID_VALUE;
        if (size > SIZE_MAX - page)
                return CUDA_ERROR_OUT_OF_MEMORY;
        map_size = (size + page - 1) & ~(page - 1);
        r = calloc(1, sizeof(*r));
        if (!r)
                return CUDA_ERROR_OUT_OF_MEMORY;
        /* NORESERVE: a simulated 80 GB device must not need 80 GB of swap. */
        p = mmap(NULL, map_size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
                free(r);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (kind_is_device(kind)) {
                res = sim_mem_charge(&drv->devices[dev], map_size);
                if (res != CUDA_SUCCESS)
                        goto out_unmap;
        }
        *r = (struct sim_range){
                .kind = kind,
                .start = (uintptr_t)p,
                .size = size,
                .map_size = map_size,
                .dev = dev,
                .buffer_id = drv->next_buffer_id++,
                .access = CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
                .ctx = ctx,
        };
        if (sim_svec_insert(&drv->ranges, r->start, r) < 0) {
                if (kind_is_device(kind))
                        sim_mem_refund(&drv->devices[dev], map_size);
                res = CUDA_ERROR_OUT_OF_MEMORY;
                goto out_unmap;
        }
        *ret = r;
        return CUDA_SUCCESS;

out_unmap:
        munmap(p, map_size);
        free(r);
        return res;
}

CUresult sim_mem_alloc_current(struct sim_driver *drv, enum sim_range_kind kind, size_t size,
                               unsigned host_flags, uintptr_t *ret_start)
{
        struct sim_range *r;
        struct sim_ctx *c;
        CUcontext h;
        CUresult res;

        /* Not stream-ordered: a capture's mode may forbid it. */
        res = sim_capture_unsafe_call();
        if (res != CUDA_SUCCESS)
                return res;
        sim_wrlock(drv);
        res = sim_ctx_current(drv, &c, &h);
        if (res == CUDA_SUCCESS)
                res = sim_range_create(drv, kind, h, c->dev, size, &r);
        if (res == CUDA_SUCCESS) {
                r->host_flags = host_flags;
                *ret_start = r->start;
        }
        sim_unlock(drv);
        return res;
}

CUresult sim_mem_free_current(struct sim_driver *drv, CUdeviceptr addr, enum sim_range_kind kind,
                              CUresult not_found)
{
        struct sim_range *r;
        CUresult res;

        res = sim_capture_unsafe_call();
        if (res != CUDA_SUCCESS)
                return res;
        sim_wrlock(drv);
        res = sim_ctx_current(drv, NULL, NULL);
        if (res == CUDA_SUCCESS) {
                r = addr <= UINTPTR_MAX ? sim_svec_get(&drv->ranges, addr) : NULL;
                if (r && r->kind == kind)
                        sim_range_destroy(drv, r);
                else
                        res = not_found;
        }
        sim_unlock(drv);
        return res;
}

SIM_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
        struct sim_driver *drv = sim_driver_get();
        uintptr_t start;
        CUresult res;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!dptr || bytesize == 0)
                return CUDA_ERROR_INVALID_VALUE;
        res = sim_mem_alloc_current(drv, SIM_RANGE_ALLOC, bytesize, 0, &start);
        if (res == CUDA_SUCCESS)
                *dptr = (CUdeviceptr)start;
        return res;
}

/* Rows of WidthInBytes at a pitch that keeps each row 512-byte aligned
 * (the device's texture alignment). */
SIM_API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                   size_t Height, unsigned int ElementSizeBytes)
{
        const size_t align = 512;
        size_t pitch;

        if (!sim_driver_get())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0 ||
            (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
                return CUDA_ERROR_INVALID_VALUE;
        if (WidthInBytes > SIZE_MAX - align)
                return CUDA_ERROR_OUT_OF_MEMORY;
        pitch = (WidthInBytes + align - 1) / align * align;
        if (Height > SIZE_MAX / pitch)
                return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r = cuMemAlloc_v2(dptr, pitch * Height);
        if (r == CUDA_SUCCESS)
                *pPitch = pitch;
        return r;
}

SIM_API CUresult cuMemFree_v2(CUdeviceptr dptr)
{
        struct sim_driver *drv = sim_driver_get();

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        /* Freeing 0 does nothing, as cudaFree(0) relies on (the runtime
         * passes it down). Otherwise only the exact base of a live
         * cuMemAlloc block; a VMM mapping is unmapped with cuMemUnmap. */
        if (dptr == 0)
                return CUDA_SUCCESS;
        CUresult r = sim_mem_free_current(drv, dptr, SIM_RANGE_ALLOC, CUDA_ERROR_INVALID_VALUE);
        return r == CUDA_ERROR_INVALID_VALUE ? sim_mem_free_current(drv, dptr, SIM_RANGE_MANAGED, r) : r;
}

SIM_API CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_device *d;
        struct sim_ctx *ctx;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!free_bytes || !total)
                return CUDA_ERROR_INVALID_VALUE;
        sim_rdlock(drv);
        r = sim_ctx_current(drv, &ctx, NULL);
        if (r == CUDA_SUCCESS) {
                d = &drv->devices[ctx->dev];
                *free_bytes = d->mem_total - d->mem_used;
                *total = d->mem_total;
        }
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_range *r;
        CUresult res = CUDA_SUCCESS;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_rdlock(drv);
        r = sim_range_find(drv, dptr);
        if (!r) {
                res = CUDA_ERROR_NOT_FOUND;
        } else {
                /* Both outputs are optional, as in the driver. */
                if (pbase)
                        *pbase = (CUdeviceptr)r->start;
                if (psize)
                        *psize = r->size;
        }
        sim_unlock(drv);
        return res;
}

/* Boolean attributes are written as unsigned int, as the driver does. */
static void put_uint(void *data, unsigned v)
{
        *(unsigned *)data = v;
}

SIM_API CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_range *r;
        CUresult res = CUDA_SUCCESS;
        bool host;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!data)
                return CUDA_ERROR_INVALID_VALUE;
        sim_rdlock(drv);
        r = sim_range_find(drv, ptr);
        if (!r) {
                res = CUDA_ERROR_INVALID_VALUE;
                goto out_unlock;
        }
        host = r->kind == SIM_RANGE_HOST_ALLOC || r->kind == SIM_RANGE_HOST_REGISTERED;
        bool managed = r->kind == SIM_RANGE_MANAGED; /* a device pointer with a host pointer */
        switch (attribute) {
        case CU_POINTER_ATTRIBUTE_CONTEXT:
                /* VMM memory belongs to the device, not to a context. */
                *(CUcontext *)data = r->kind != SIM_RANGE_MAPPING ? r->ctx : NULL;
                break;
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
                put_uint(data, host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE);
                break;
        case CU_POINTER_ATTRIBUTE_HOST_POINTER:
                /* Only host memory has one; mapped, it equals the device's. */
                if (!host && !managed) {
                        res = CUDA_ERROR_INVALID_VALUE;
                        break;
                }
                *(void **)data = (void *)(uintptr_t)ptr;
                break;
        case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
                *(CUdeviceptr *)data = ptr;
                break;
        case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
                put_uint(data, 1);      /* every operation is synchronous */
                break;
        case CU_POINTER_ATTRIBUTE_BUFFER_ID:
                *(unsigned long long *)data = r->buffer_id;
                break;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED:
                put_uint(data, managed);
                break;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
                *(int *)data = r->dev;
                break;
        case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
                put_uint(data, r->kind == SIM_RANGE_ALLOC);
                break;
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
                *(CUdeviceptr *)data = (CUdeviceptr)r->start;
                break;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
                *(size_t *)data = r->size;
                break;
        case CU_POINTER_ATTRIBUTE_MAPPED:
                put_uint(data, 1);
                break;
        case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
                put_uint(data, r->access);
                break;
        default:
                /* P2P tokens, mempools and the rest: not something the sim
                 * can answer. */
                res = CUDA_ERROR_INVALID_VALUE;
        }
out_unlock:
        sim_unlock(drv);
        return res;
}

/* Every attribute at once; unlike the single query it succeeds for any
 * pointer: what does not apply reads as zero (the device ordinal of memory
 * the sim does not know as -2, as the driver reports for host memory). */
SIM_API CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
                                        CUdeviceptr ptr)
{
        struct sim_driver *drv = sim_driver_get();

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!numAttributes || !attributes || !data)
                return CUDA_ERROR_INVALID_VALUE;
        for (unsigned int i = 0; i < numAttributes; i++) {
                if (!data[i])
                        return CUDA_ERROR_INVALID_VALUE;
                if (cuPointerGetAttribute(data[i], attributes[i], ptr) == CUDA_SUCCESS)
                        continue;
                bool four = attributes[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE ||
                            attributes[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL ||
                            attributes[i] == CU_POINTER_ATTRIBUTE_SYNC_MEMOPS ||
                            attributes[i] == CU_POINTER_ATTRIBUTE_IS_MANAGED ||
                            attributes[i] == CU_POINTER_ATTRIBUTE_MAPPED ||
                            attributes[i] == CU_POINTER_ATTRIBUTE_ACCESS_FLAGS ||
                            attributes[i] == CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE;
                memset(data[i], 0, four ? 4 : 8);
                if (attributes[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) {
                        sim_rdlock(drv);
                        if (!sim_range_find(drv, ptr))
                                *(int *)data[i] = -2;
                        sim_unlock(drv);
                }
        }
        return CUDA_SUCCESS;
}
