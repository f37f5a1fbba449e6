/* SPDX-License-Identifier: MIT */
/*
 * The stream-ordered allocator's entry points (cuMemAllocAsync, the
 * cuMemPool* family, the device's pools). They check their arguments as
 * the driver does and call the client-side pools in shim/pool.c; none of
 * them needs a round trip except when a pool grows by a chunk.
 *
 * Pools cannot be shared with another process through lupine (the
 * exporter and the importer would be on different hosts): the export and
 * import calls answer CUDA_ERROR_NOT_SUPPORTED with one log line.
 */
#include <errno.h>
#include <stdatomic.h>

#include "client.h"
#include "gmem.h"
#include "log.h"
#include "pool.h"
#include "shim_gen.h"

#define EXPORT __attribute__((visibility("default")))

static __thread uint64_t thread_token;
static atomic_uint_fast64_t next_token = 1;

CUresult lupc_pool_stream_of(CUstream s, struct lupc_pool_stream *ret)
{
        uint64_t id = (uint64_t)(uintptr_t)s, ctx = 0;
        if (id == (uint64_t)(uintptr_t)CU_STREAM_LEGACY)
                id = 0;
        if (id == 0 || id == (uint64_t)(uintptr_t)CU_STREAM_PER_THREAD) {
                ctx = lupc_ctx_current();
                if (!ctx)
                        return CUDA_ERROR_INVALID_CONTEXT;
        } else if (lupc_handle_kind(id, &ctx) != LUPC_H_STREAM) {
                return CUDA_ERROR_INVALID_HANDLE;
        }
        uint64_t thread = 0;
        if (id == (uint64_t)(uintptr_t)CU_STREAM_PER_THREAD) {
                if (!thread_token)
                        thread_token = atomic_fetch_add(&next_token, 1);
                thread = thread_token;
        }
        *ret = (struct lupc_pool_stream){ .id = id, .ctx = ctx, .thread = thread };
        return CUDA_SUCCESS;
}

/*
 * Stream capture: an allocation on a capturing stream becomes a memory
 * alloc node of the capture's graph, and a free of such memory a free node
 * (shim/api_graph_mem.c); the pools are never touched by them.
 */
static bool capturing(CUstream s)
{
        CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
        return cuStreamIsCapturing(s, &cs) == CUDA_SUCCESS && cs != CU_STREAM_CAPTURE_STATUS_NONE;
}

static CUresult alloc_checks(CUdeviceptr *dptr, size_t bytes, CUstream s, struct lupc_pool_stream *st)
{
        CUresult r;
        if (!dptr)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if ((r = lupc_pool_stream_of(s, st)) != CUDA_SUCCESS)
                return r;
        if (bytes == 0)
                return CUDA_ERROR_INVALID_VALUE;
        if (bytes > LUP_MAX_COPY)
                return CUDA_ERROR_OUT_OF_MEMORY;
        return CUDA_SUCCESS;
}

/* The pool's properties go with the alloc node. */
static CUresult captured_alloc(CUdeviceptr *dptr, size_t bytes, uint64_t pool, CUstream s)
{
        CUmemPoolProps props;
        if (lupc_pool_props(pool, &props) < 0)
                return CUDA_ERROR_INVALID_VALUE;
        return lupc_gmem_capture_alloc(dptr, bytes, &props, s);
}

EXPORT CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
        struct lupc_pool_stream st;
        CUresult r = alloc_checks(dptr, bytesize, hStream, &st);
        if (r != CUDA_SUCCESS)
                return r;
        int dev = lupc_pool_ctx_device(st.ctx);
        uint64_t pool = lupc_pool_current(dev);
        if (!pool)
                return CUDA_ERROR_INVALID_CONTEXT;
        uint64_t p;
        if (capturing(hStream))
                return captured_alloc(dptr, bytesize, pool, hStream);
        if ((r = lupc_pool_alloc(pool, bytesize, &st, &p)) == CUDA_SUCCESS)
                *dptr = p;
        return r;
}

EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
        struct lupc_pool_stream st;
        CUresult r = alloc_checks(dptr, bytesize, hStream, &st);
        if (r != CUDA_SUCCESS)
                return r;
        uint64_t p;
        if (capturing(hStream))
                return captured_alloc(dptr, bytesize, (uint64_t)(uintptr_t)pool, hStream);
        if ((r = lupc_pool_alloc((uint64_t)(uintptr_t)pool, bytesize, &st, &p)) == CUDA_SUCCESS)
                *dptr = p;
        return r;
}

EXPORT CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
        struct lupc_pool_stream st;
        CUresult r;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if ((r = lupc_pool_stream_of(hStream, &st)) != CUDA_SUCCESS)
                return r;
        if (capturing(hStream)) {
                r = lupc_gmem_capture_free(dptr, hStream);
                /* other memory than the capture's: the driver's free nodes
                 * take graph memory only here */
                return r == LUPC_GMEM_NOT_MINE ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : r;
        }
        if ((r = lupc_gmem_free(dptr)) != LUPC_GMEM_NOT_MINE)
                return r;
        return lupc_pool_free(dptr, &st);
}

/* ---- pools */

static CUresult check_props(const CUmemPoolProps *props)
{
        switch (props->allocType) {
        case CU_MEM_ALLOCATION_TYPE_PINNED:
                break;
        case CU_MEM_ALLOCATION_TYPE_MANAGED:
                return CUDA_ERROR_NOT_SUPPORTED;
        default:
                return CUDA_ERROR_INVALID_VALUE;
        }
        switch (props->location.type) {
        case CU_MEM_LOCATION_TYPE_DEVICE:
                break;
        case CU_MEM_LOCATION_TYPE_HOST:
        case CU_MEM_LOCATION_TYPE_HOST_NUMA:
                return CUDA_ERROR_NOT_SUPPORTED; /* host-memory pools are not forwarded */
        default:
                return CUDA_ERROR_INVALID_VALUE;
        }
        if (props->location.id < 0 || props->location.id >= lupc_device_count())
                return CUDA_ERROR_INVALID_VALUE;
        if (props->handleTypes & ~(unsigned)(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_WIN32 |
                                             CU_MEM_HANDLE_TYPE_WIN32_KMT | CU_MEM_HANDLE_TYPE_FABRIC))
                return CUDA_ERROR_INVALID_VALUE;
        if (props->handleTypes & (CU_MEM_HANDLE_TYPE_WIN32 | CU_MEM_HANDLE_TYPE_WIN32_KMT))
                return CUDA_ERROR_NOT_SUPPORTED;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
        if (!pool || !poolProps)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        CUresult r = check_props(poolProps);
        if (r != CUDA_SUCCESS)
                return r;
        /* a cap beyond the device's memory: OUT_OF_MEMORY at once, as
         * driver 580 answers for SIZE_MAX */
        const struct lupc_device *dev = lupc_device(poolProps->location.id);
        if (dev && poolProps->maxSize > dev->total_mem)
                return CUDA_ERROR_OUT_OF_MEMORY;
        uint64_t id;
        /* handleTypes are kept, but the export calls below refuse */
        if (lupc_pool_create(poolProps, &id) < 0)
                return CUDA_ERROR_OUT_OF_MEMORY;
        *pool = (CUmemoryPool)(uintptr_t)id;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        return lupc_pool_destroy((uint64_t)(uintptr_t)pool) < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!value)
                return CUDA_ERROR_INVALID_VALUE;
        return lupc_pool_set_attr((uint64_t)(uintptr_t)pool, attr, value);
}

EXPORT CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!value)
                return CUDA_ERROR_INVALID_VALUE;
        return lupc_pool_get_attr((uint64_t)(uintptr_t)pool, attr, value);
}

EXPORT CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        return lupc_pool_trim((uint64_t)(uintptr_t)pool, minBytesToKeep);
}

#define MAX_ACCESS_DESCS 1024u /* far more than devices x flags; a larger count is a bad argument */

EXPORT CUresult CUDAAPI cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if ((count && !map) || count > MAX_ACCESS_DESCS)
                return CUDA_ERROR_INVALID_VALUE;
        return lupc_pool_set_access((uint64_t)(uintptr_t)pool, map, count);
}

EXPORT CUresult CUDAAPI cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool memPool, CUmemLocation *location)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE || location->id < 0 ||
            location->id >= lupc_device_count())
                return CUDA_ERROR_INVALID_VALUE;
        return lupc_pool_get_access((uint64_t)(uintptr_t)memPool, location->id, flags);
}

/* ---- a device's pools */

static CUresult check_device(CUdevice dev)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        return dev < 0 || dev >= lupc_device_count() ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
        CUresult r;
        if (!pool_out)
                return CUDA_ERROR_INVALID_VALUE;
        if ((r = check_device(dev)) != CUDA_SUCCESS)
                return r;
        uint64_t id = lupc_pool_default(dev);
        if (!id)
                return CUDA_ERROR_OUT_OF_MEMORY;
        *pool_out = (CUmemoryPool)(uintptr_t)id;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
        CUresult r;
        if (!pool)
                return CUDA_ERROR_INVALID_VALUE;
        if ((r = check_device(dev)) != CUDA_SUCCESS)
                return r;
        uint64_t id = lupc_pool_current(dev);
        if (!id)
                return CUDA_ERROR_OUT_OF_MEMORY;
        *pool = (CUmemoryPool)(uintptr_t)id;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
        CUresult r;
        if ((r = check_device(dev)) != CUDA_SUCCESS)
                return r;
        return lupc_pool_set_current(dev, (uint64_t)(uintptr_t)pool) < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* The CUDA 13 forms by location and allocation type: device memory only. */
static CUresult check_location(const CUmemLocation *loc, CUmemAllocationType type)
{
        if (!loc)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (type == CU_MEM_ALLOCATION_TYPE_MANAGED)
                return CUDA_ERROR_NOT_SUPPORTED;
        if (type != CU_MEM_ALLOCATION_TYPE_PINNED)
                return CUDA_ERROR_INVALID_VALUE;
        if (loc->type == CU_MEM_LOCATION_TYPE_HOST || loc->type == CU_MEM_LOCATION_TYPE_HOST_NUMA)
                return CUDA_ERROR_NOT_SUPPORTED;
        if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE)
                return CUDA_ERROR_INVALID_VALUE;
        return loc->id < 0 || loc->id >= lupc_device_count() ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemGetDefaultMemPool(CUmemoryPool *pool_out, CUmemLocation *location,
                                               CUmemAllocationType type)
{
        CUresult r = pool_out ? check_location(location, type) : CUDA_ERROR_INVALID_VALUE;
        return r == CUDA_SUCCESS ? cuDeviceGetDefaultMemPool(pool_out, location->id) : r;
}

EXPORT CUresult CUDAAPI cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *location, CUmemAllocationType type)
{
        CUresult r = pool ? check_location(location, type) : CUDA_ERROR_INVALID_VALUE;
        return r == CUDA_SUCCESS ? cuDeviceGetMemPool(pool, location->id) : r;
}

EXPORT CUresult CUDAAPI cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type, CUmemoryPool pool)
{
        CUresult r = check_location(location, type);
        return r == CUDA_SUCCESS ? cuDeviceSetMemPool(location->id, pool) : r;
}

/* ---- sharing pools between processes: not across hosts */

static CUresult no_sharing(const char *name)
{
        static atomic_int once;
        if (!atomic_exchange(&once, 1))
                lup_warn("%s: memory pools cannot be shared between processes through lupine (the processes may be "
                         "on different hosts); returning CUDA_ERROR_NOT_SUPPORTED",
                         name);
        return lupc_initialized() ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_NOT_INITIALIZED;
}

EXPORT CUresult CUDAAPI cuMemPoolExportToShareableHandle(void *handle_out, CUmemoryPool pool,
                                                         CUmemAllocationHandleType handleType, unsigned long long flags)
{
        CUmemPoolProps props;
        (void)flags;
        /* a pool made without that handle type cannot be exported on any
         * driver: INVALID_VALUE, as driver 580 answers */
        if (!handle_out || lupc_pool_props((uint64_t)(uintptr_t)pool, &props) < 0 || !(props.handleTypes & handleType))
                return lupc_initialized() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        return no_sharing("cuMemPoolExportToShareableHandle");
}

EXPORT CUresult CUDAAPI cuMemPoolImportFromShareableHandle(CUmemoryPool *pool_out, void *handle,
                                                           CUmemAllocationHandleType handleType,
                                                           unsigned long long flags)
{
        (void)pool_out, (void)handle, (void)handleType, (void)flags;
        return no_sharing("cuMemPoolImportFromShareableHandle");
}

EXPORT CUresult CUDAAPI cuMemPoolExportPointer(CUmemPoolPtrExportData *shareData_out, CUdeviceptr ptr)
{
        (void)shareData_out, (void)ptr;
        return no_sharing("cuMemPoolExportPointer");
}

EXPORT CUresult CUDAAPI cuMemPoolImportPointer(CUdeviceptr *ptr_out, CUmemoryPool pool,
                                               CUmemPoolPtrExportData *shareData)
{
        (void)ptr_out, (void)pool, (void)shareData;
        return no_sharing("cuMemPoolImportPointer");
}
