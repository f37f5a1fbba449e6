/* SPDX-License-Identifier: MIT */
/*
 * Virtual memory management, the client side (the worker's is
 * daemon/worker/vmm.c). cuMemAddressReserve, cuMemAddressFree and
 * cuMemRelease are generated; the functions here marshal what the spec's
 * types cannot carry (CUmemAllocationProp, access descriptor arrays) and
 * keep the allocation shadow in step with the mappings, so range checks,
 * cuPointerGetAttribute and cuMemGetAddressRange know them. Every call is
 * synchronous: each can fail in a way the caller acts on at once.
 *
 * A physical allocation's handle is an id this process mints, like the
 * other handles; the same id comes back from cuMemRetainAllocationHandle.
 */
#include <stdbool.h>
#include <string.h>

#include "client.h"
#include "log.h"
#include "shim_gen.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                                    unsigned long long flags)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!handle || !prop)
                return CUDA_ERROR_INVALID_VALUE;
        uint64_t id = lupc_mint_handle();
        CUresult r = lupc_send_lupMemCreate(id, size, (int)prop->type, (int)prop->location.type, prop->location.id,
                                            (unsigned int)prop->requestedHandleTypes, prop->allocFlags.compressionType,
                                            prop->allocFlags.gpuDirectRDMACapable, prop->allocFlags.usage, flags);
        if (r == CUDA_SUCCESS)
                *handle = id;
        return r;
}

EXPORT CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                                 unsigned long long flags)
{
        int device = 0;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        CUresult r = lupc_send_lupMemMap(&device, ptr, size, offset, handle, flags);
        if (r != CUDA_SUCCESS)
                return r;
        /* device < 0: memory of a device this process cannot see (its
         * handles are made on visible devices, so never in practice) */
        if (!lupc_in_arena(ptr) || device < 0 || lupc_shadow_add_vmm(ptr, size, device) < 0) {
                lupc_send_cuMemUnmap(ptr, size);
                return !lupc_in_arena(ptr) ? lupc_protocol_error("cuMemMap")
                       : device < 0        ? CUDA_ERROR_INVALID_DEVICE
                                           : CUDA_ERROR_OUT_OF_MEMORY;
        }
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        CUresult r = lupc_send_cuMemUnmap(ptr, size);
        if (r != CUDA_SUCCESS)
                return r;
        /* the worker unmapped whole mappings, exactly [ptr, ptr + size) */
        struct lupc_alloc_info a;
        for (uint64_t at = ptr; at - ptr < size && lupc_shadow_find(at, &a) && a.vmm; at = a.base + a.size)
                lupc_shadow_remove(a.base, NULL);
        return CUDA_SUCCESS;
}

/* The descriptors as one access value per device (the last one named wins):
 * present has bit d for device d, prot 2 bits per device; d is the server's
 * ordinal (visible.h). */
EXPORT CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
        uint32_t present = 0, prot = 0;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!desc || count == 0)
                return CUDA_ERROR_INVALID_VALUE;
        for (size_t i = 0; i < count; i++) {
                const CUmemAccessDesc *d = &desc[i];
                if (d->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
                        return CUDA_ERROR_INVALID_VALUE;
                /* driver 580 answers INVALID_VALUE for a device that does not exist */
                if (d->location.id < 0 || d->location.id >= lupc_device_count())
                        return CUDA_ERROR_INVALID_VALUE;
                if (d->flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && d->flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
                    d->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
                        return CUDA_ERROR_INVALID_VALUE;
                unsigned dev = (unsigned)lupc_dev_to_server(d->location.id);
                present |= 1u << dev;
                prot = (prot & ~(3u << (2 * dev))) | ((unsigned)d->flags << (2 * dev));
        }
        return lupc_send_lupMemSetAccess(ptr, size, present, prot);
}

EXPORT CUresult CUDAAPI cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!flags || !location)
                return CUDA_ERROR_INVALID_VALUE;
        return lupc_send_lupMemGetAccess(flags, (int)location->type, location->id, ptr);
}

EXPORT CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                                      CUmemAllocationGranularity_flags option)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!granularity || !prop)
                return CUDA_ERROR_INVALID_VALUE;
        return lupc_send_lupMemGetGranularity(granularity, (int)prop->type, (int)prop->location.type, prop->location.id,
                                              (unsigned int)prop->requestedHandleTypes,
                                              prop->allocFlags.compressionType, prop->allocFlags.gpuDirectRDMACapable,
                                              prop->allocFlags.usage, (int)option);
}

EXPORT CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                               CUmemGenericAllocationHandle handle)
{
        int type = 0, loctype = 0, locid = 0;
        unsigned int htypes = 0;
        unsigned char compression = 0, rdma = 0;
        unsigned short usage = 0;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!prop)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = lupc_send_lupMemGetProps(&type, &loctype, &locid, &htypes, &compression, &rdma, &usage, handle);
        if (r != CUDA_SUCCESS)
                return r;
        if (loctype == CU_MEM_LOCATION_TYPE_DEVICE && locid < 0)
                return CUDA_ERROR_INVALID_DEVICE; /* not one this process can see (visible.h) */
        memset(prop, 0, sizeof(*prop));
        prop->type = (CUmemAllocationType)type;
        prop->location.type = (CUmemLocationType)loctype;
        prop->location.id = locid;
        prop->requestedHandleTypes = (CUmemAllocationHandleType)htypes;
        prop->allocFlags.compressionType = compression;
        prop->allocFlags.gpuDirectRDMACapable = rdma;
        prop->allocFlags.usage = usage;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
        unsigned long long h = 0;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!handle)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = lupc_send_lupMemRetain(&h, (uint64_t)(uintptr_t)addr);
        if (r == CUDA_SUCCESS)
                *handle = h;
        return r;
}

/* Shareable handles name memory of this host's driver; the memory is on
 * another host, so no other process here could import one. */
static CUresult no_sharing(const char *name, int *once)
{
        if (!__atomic_exchange_n(once, 1, __ATOMIC_RELAXED))
                lup_warn("%s: shareable memory handles cannot cross hosts; lupine answers CUDA_ERROR_NOT_SUPPORTED",
                         name);
        return CUDA_ERROR_NOT_SUPPORTED;
}

EXPORT CUresult CUDAAPI cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                                     CUmemAllocationHandleType handleType, unsigned long long flags)
{
        static int once;
        (void)shareableHandle, (void)handle, (void)handleType, (void)flags;
        return no_sharing("cuMemExportToShareableHandle", &once);
}

EXPORT CUresult CUDAAPI cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                                       CUmemAllocationHandleType shHandleType)
{
        static int once;
        (void)handle, (void)osHandle, (void)shHandleType;
        return no_sharing("cuMemImportFromShareableHandle", &once);
}
