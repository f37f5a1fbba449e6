/* SPDX-License-Identifier: MIT */
/*
 * Page-locked host memory: cuMemAllocHost/cuMemHostAlloc (the sim's own
 * mappings) and cuMemHostRegister (the caller's memory). Both become
 * ranges in the address map, so that, as under UVA on a real device, the
 * host pointer is also the device pointer: kernels and device-side copies
 * may use it, and cuPointerGetAttribute reports it as host memory. Both
 * belong to the context current when they were made and go with it.
 */
#include <stdlib.h>

#include "sim_internal.h"

#define HOSTALLOC_FLAGS (CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED)
#define HOSTREGISTER_FLAGS (CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP | \
                            CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY)

static bool is_host_range(const struct sim_range *r)
{
        return r && (r->kind == SIM_RANGE_HOST_ALLOC || r->kind == SIM_RANGE_HOST_REGISTERED);
}

SIM_API CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_range *r;
        struct sim_ctx *c;
        CUcontext h;
        CUresult res;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pp || bytesize == 0 || (Flags & ~(unsigned)HOSTALLOC_FLAGS))
                return CUDA_ERROR_INVALID_VALUE;
        sim_wrlock(drv);
        res = sim_ctx_current(drv, &c, &h);
        if (res == CUDA_SUCCESS)
                res = sim_range_create(drv, SIM_RANGE_HOST_ALLOC, h, c->dev, bytesize, &r);
        if (res == CUDA_SUCCESS) {
                r->host_flags = Flags;
                *pp = (void *)r->start;
        }
        sim_unlock(drv);
        return res;
}

SIM_API CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
        return cuMemHostAlloc(pp, bytesize, 0);
}

SIM_API CUresult cuMemFreeHost(void *p)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_range *r;
        CUresult res;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_wrlock(drv);
        res = sim_ctx_current(drv, NULL, NULL);
        if (res == CUDA_SUCCESS) {
                r = sim_svec_get(&drv->ranges, (uintptr_t)p);
                if (r && r->kind == SIM_RANGE_HOST_ALLOC)
                        sim_range_destroy(drv, r);
                else
                        res = CUDA_ERROR_INVALID_VALUE;
        }
        sim_unlock(drv);
        return res;
}

SIM_API CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
        struct sim_driver *drv = sim_driver_get();
        uintptr_t start = (uintptr_t)p;
        struct sim_range *r;
        struct sim_ctx *c;
        CUcontext h;
        CUresult res;
        long i;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!p || bytesize == 0 || bytesize > UINTPTR_MAX - start || (Flags & ~(unsigned)HOSTREGISTER_FLAGS))
                return CUDA_ERROR_INVALID_VALUE;
        if (Flags & CU_MEMHOSTREGISTER_IOMEMORY)
                return CUDA_ERROR_NOT_SUPPORTED;        /* no PCI BARs here */
        r = calloc(1, sizeof(*r));
        if (!r)
                return CUDA_ERROR_OUT_OF_MEMORY;

        sim_wrlock(drv);
        res = sim_ctx_current(drv, &c, &h);
        if (res != CUDA_SUCCESS)
                goto out_free;
        /* Not memory the sim already knows: device memory, pinned memory,
         * or part of a registered range. */
        i = sim_svec_find_le(&drv->ranges, start + bytesize - 1);
        if (i >= 0) {
                struct sim_range *o = drv->ranges.items[i].obj;

                if (o->start + o->size > start) {
                        res = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
                        goto out_free;
                }
        }
        res = sim_check_host_range(drv, p, bytesize, SIM_NEED_READ);
        if (res != CUDA_SUCCESS)
                goto out_free;
        *r = (struct sim_range){
                .kind = SIM_RANGE_HOST_REGISTERED,
                .start = start,
                .size = bytesize,
                .map_size = bytesize,
                .dev = c->dev,
                .buffer_id = drv->next_buffer_id++,
                .access = Flags & CU_MEMHOSTREGISTER_READ_ONLY ? CU_MEM_ACCESS_FLAGS_PROT_READ
                                                               : CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
                .host_flags = Flags,
                .ctx = h,
        };
        if (sim_svec_insert(&drv->ranges, start, r) < 0) {
                res = CUDA_ERROR_OUT_OF_MEMORY;
                goto out_free;
        }
        sim_unlock(drv);
        return CUDA_SUCCESS;

out_free:
        sim_unlock(drv);
        free(r);
        return res;
}

/* The legacy name, same signature. */
SIM_API CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
        return cuMemHostRegister_v2(p, bytesize, Flags);
}

SIM_API CUresult cuMemHostUnregister(void *p)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_range *r;
        CUresult res;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!p)
                return CUDA_ERROR_INVALID_VALUE;
        sim_wrlock(drv);
        res = sim_ctx_current(drv, NULL, NULL);
        if (res == CUDA_SUCCESS) {
                r = sim_svec_get(&drv->ranges, (uintptr_t)p);
                if (r && r->kind == SIM_RANGE_HOST_REGISTERED)
                        sim_range_destroy(drv, r);
                else
                        res = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
        }
        sim_unlock(drv);
        return res;
}

/* Mapped host memory has one address on both sides. */
SIM_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_range *r;
        CUresult res;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pdptr || !p || Flags != 0)
                return CUDA_ERROR_INVALID_VALUE;
        sim_rdlock(drv);
        res = sim_ctx_current(drv, NULL, NULL);
        if (res == CUDA_SUCCESS) {
                r = sim_range_find(drv, (uintptr_t)p);
                if (is_host_range(r))
                        *pdptr = (CUdeviceptr)(uintptr_t)p;
                else
                        res = CUDA_ERROR_INVALID_VALUE;
        }
        sim_unlock(drv);
        return res;
}

SIM_API CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_range *r;
        CUresult res;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pFlags || !p)
                return CUDA_ERROR_INVALID_VALUE;
        sim_rdlock(drv);
        res = sim_ctx_current(drv, NULL, NULL);
        if (res == CUDA_SUCCESS) {
                r = sim_range_find(drv, (uintptr_t)p);
                /* Only cuMemHostAlloc memory has flags to report; under
                 * UVA it is always mapped. */
                if (r && r->kind == SIM_RANGE_HOST_ALLOC)
                        *pFlags = r->host_flags | CU_MEMHOSTALLOC_DEVICEMAP;
                else
                        res = CUDA_ERROR_INVALID_VALUE;
        }
        sim_unlock(drv);
        return res;
}
