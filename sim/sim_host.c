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
#include <sys/mman.h>
#include <unistd.h>

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
        uintptr_t start;
        CUresult res;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pp || bytesize == 0 || (Flags & ~(unsigned)HOSTALLOC_FLAGS))
                return CUDA_ERROR_INVALID_VALUE;
        res = sim_mem_alloc_current(drv, SIM_RANGE_HOST_ALLOC, bytesize, Flags, &start);
        if (res == CUDA_SUCCESS)
                *pp = (void *)start;
        return res;
}

SIM_API CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
        return cuMemHostAlloc(pp, bytesize, 0);
}

SIM_API CUresult cuMemFreeHost(void *p)
{
        struct sim_driver *drv = sim_driver_get();

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        return sim_mem_free_current(drv, (uintptr_t)p, SIM_RANGE_HOST_ALLOC, CUDA_ERROR_INVALID_VALUE);
}

/* Whether every page of [p, p + n) is mapped (mincore: ENOMEM on a hole). */
static bool pages_mapped(uintptr_t p, size_t n)
{
        uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
        unsigned char vec[64];
        for (uintptr_t at = p & ~(pg - 1); at < p + n; at += 64 * pg) {
                size_t len = p + n - at < 64 * pg ? p + n - at : 64 * pg;
                if (mincore((void *)at, len, vec) < 0)
                        return false;
        }
        return true;
}

SIM_API CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
        struct sim_driver *drv = sim_driver_get();
        uintptr_t start = (uintptr_t)p;
        struct sim_range *r;
        struct sim_ctx *c;
        CUcontext h;
        CUresult res;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!p || bytesize == 0 || bytesize > UINTPTR_MAX - start || (Flags & ~(unsigned)HOSTREGISTER_FLAGS))
                return CUDA_ERROR_INVALID_VALUE;
        if (Flags & CU_MEMHOSTREGISTER_IOMEMORY)
                return CUDA_ERROR_NOT_SUPPORTED;        /* no PCI BARs here */
        if (!pages_mapped(start, bytesize))
                return CUDA_ERROR_INVALID_VALUE; /* memory the process does not have */
        r = calloc(1, sizeof(*r));
        if (!r)
                return CUDA_ERROR_OUT_OF_MEMORY;

        sim_wrlock(drv);
        res = sim_ctx_current(drv, &c, &h);
        if (res != CUDA_SUCCESS)
                goto out_free;
        /* Not memory the sim already knows: device memory, pinned memory,
         * or part of a registered range. */
        if (sim_range_overlaps(drv, start, bytesize)) {
                struct sim_range *m = sim_range_find(drv, start);
                /* managed memory: the H200's driver says invalid value */
                res = m && m->kind == SIM_RANGE_MANAGED ? CUDA_ERROR_INVALID_VALUE
                                                        : CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
                goto out_free;
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

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!p)
                return CUDA_ERROR_INVALID_VALUE;
        sim_rdlock(drv);
        struct sim_range *m = sim_range_find(drv, (uintptr_t)p);
        bool managed = m && m->kind == SIM_RANGE_MANAGED;
        sim_unlock(drv);
        if (managed)
                return CUDA_ERROR_INVALID_VALUE; /* as the H200's driver */
        return sim_mem_free_current(drv, (uintptr_t)p, SIM_RANGE_HOST_REGISTERED,
                                    CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
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
                /* cuMemHostAlloc and registered memory (driver 580 answers
                 * for both); under UVA it is always mapped */
                if (r && (r->kind == SIM_RANGE_HOST_ALLOC || r->kind == SIM_RANGE_HOST_REGISTERED))
                        *pFlags = r->host_flags | CU_MEMHOSTALLOC_DEVICEMAP;
                else if (r && r->kind == SIM_RANGE_MANAGED)
                        *pFlags = 0; /* the H200's driver answers success for managed memory */
                else
                        res = CUDA_ERROR_INVALID_VALUE;
        }
        sim_unlock(drv);
        return res;
}
