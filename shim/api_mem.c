/* SPDX-License-Identifier: MIT */
/*
 * Device memory: allocation (the worker places it in the session's arena),
 * the allocation shadow that answers pointer queries locally, and bulk
 * copies. Host->device copies are fire-and-forget: the bytes are in the
 * socket before the call returns, so the caller may reuse its buffer.
 */
#include <stdbool.h>
#include <string.h>

#include "client.h"
#include "gmem.h"
#include "pool.h"
#include "shim_gen.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
        struct lupc_ctx_info info;
        CUdeviceptr p = 0;

        if (!dptr || bytesize == 0)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        uint64_t ctx = lupc_ctx_current();
        if (!ctx || !lupc_ctx_lookup(ctx, &info))
                return CUDA_ERROR_INVALID_CONTEXT;
        if (bytesize > LUP_MAX_COPY)
                return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r = lupc_send_cuMemAlloc_v2(&p, bytesize);
        if (r != CUDA_SUCCESS)
                return r;
        if (!lupc_in_arena(p) || lupc_shadow_add(p, bytesize, ctx, info.device) < 0) {
                lupc_send_cuMemFree_v2(p);
                return lupc_in_arena(p) ? CUDA_ERROR_OUT_OF_MEMORY : lupc_protocol_error("cuMemAlloc");
        }
        *dptr = p;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        /* Freeing 0 does nothing: the runtime's cudaFree(0), which cuBLAS
         * uses to make sure a context exists, comes down as cuMemFree(0). */
        if (dptr == 0)
                return CUDA_SUCCESS;
        /* Stream-ordered memory may be freed here too; the caller vouches
         * that nothing uses it any more, so it is reusable at once. */
        CUresult g = lupc_gmem_free(dptr); /* graph memory a launch left allocated */
        if (g != LUPC_GMEM_NOT_MINE)
                return g;
        if (lupc_pool_free(dptr, NULL) == CUDA_SUCCESS)
                return CUDA_SUCCESS;
        CUresult m = lupc_managed_free(dptr); /* api_managed.c */
        if (m != LUPC_NOT_MANAGED)
                return m;
        /* Only the start of a live allocation can be freed; anything else is
         * refused here, before it reaches the network. */
        if (lupc_shadow_remove(dptr, NULL) < 0)
                return CUDA_ERROR_INVALID_VALUE;
        return lupc_send_cuMemFree_v2(dptr);
}

EXPORT CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
        struct lupc_alloc_info a;

        struct lupc_managed_info mi;

        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (lupc_managed_find(dptr, &mi))
                a = (struct lupc_alloc_info){ .base = mi.base, .size = mi.size };
        else if (!lupc_shadow_find(dptr, &a))
                return CUDA_ERROR_NOT_FOUND;
        if (pbase)
                *pbase = a.base;
        if (psize)
                *psize = (size_t)a.size;
        return CUDA_SUCCESS;
}

/* What every host<->device copy checks first. *ret_done: nothing to copy. */
static CUresult copy_checks(const void *host, CUdeviceptr dev, size_t n, bool *ret_done)
{
        *ret_done = true;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (n == 0)
                return CUDA_SUCCESS;
        if (!host)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = lupc_check_range(dev, n, 1);
        *ret_done = r != CUDA_SUCCESS;
        return r;
}

/* A copy whose host end is managed memory runs on the GPU host, between
 * the mirrors, in stream order (api_managed.c). sync: it waits, and the
 * wait brings the result into the program's pages. */
static CUresult managed_copy(CUdeviceptr dst, CUdeviceptr src, size_t n, uint64_t stream, bool sync)
{
        CUstream s = (CUstream)(uintptr_t)stream;
        CUresult r = cuMemcpyDtoDAsync_v2(dst, src, n, s);
        return r == CUDA_SUCCESS && sync ? cuStreamSynchronize(s) : r;
}

static bool is_managed(const void *p)
{
        return p && lupc_managed_find((uint64_t)(uintptr_t)p, NULL);
}

CUresult lupc_htod(CUdeviceptr dst, const void *src, size_t n, uint64_t stream)
{
        bool done;
        if (is_managed(src))
                return managed_copy(dst, (CUdeviceptr)(uintptr_t)src, n, stream, false);
        CUresult r = copy_checks(src, dst, n, &done);
        if (!done && (r = lupc_capture_refuse(stream, "cuMemcpyHtoD")) != CUDA_SUCCESS)
                return r;
        return done ? r : lupc_copy_htod(dst, src, n, stream);
}

CUresult lupc_dtoh(void *dst, CUdeviceptr src, size_t n, uint64_t stream)
{
        bool done;
        if (is_managed(dst))
                return managed_copy((CUdeviceptr)(uintptr_t)dst, src, n, stream, true);
        CUresult r = copy_checks(dst, src, n, &done);
        if (!done && (r = lupc_capture_refuse(stream, "cuMemcpyDtoH")) != CUDA_SUCCESS)
                return r;
        return done ? r : lupc_copy_dtoh(dst, src, n, stream);
}

EXPORT CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
        return lupc_htod(dstDevice, srcHost, ByteCount, 0);
}

EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream)
{
        return lupc_htod(dstDevice, srcHost, ByteCount, lupc_stream_id(hStream, 0));
}

EXPORT CUresult CUDAAPI cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
        return lupc_dtoh(dstHost, srcDevice, ByteCount, 0);
}

static CUresult dtoh_async(void *dst, CUdeviceptr src, size_t n, uint64_t stream);

EXPORT CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{
        return dtoh_async(dstHost, srcDevice, ByteCount, lupc_stream_id(hStream, 0));
}

static CUresult dtoh_async(void *dst, CUdeviceptr src, size_t n, uint64_t stream)
{
        bool done;
        if (is_managed(dst))
                return managed_copy((CUdeviceptr)(uintptr_t)dst, src, n, stream, false);
        CUresult r = copy_checks(dst, src, n, &done);
        if (done)
                return r;
        if ((r = lupc_capture_refuse(stream, "cuMemcpyDtoHAsync")) != CUDA_SUCCESS)
                return r;
        /* CUDA returns from an async copy into pageable memory only once the
         * copy is done; only page-locked destinations are truly asynchronous */
        uint64_t hb, hs;
        unsigned int hf;
        if (!lupc_host_find((uint64_t)(uintptr_t)dst, &hb, &hs, &hf) || (uint64_t)(uintptr_t)dst - hb + n > hs)
                return lupc_copy_dtoh(dst, src, n, stream);
        return lupc_copy_dtoh_async(dst, src, n, stream);
}

/* The driver's booleans are 4 bytes wide (driver 580 on the H200 writes 4
 * bytes for SYNC_MEMOPS, IS_MANAGED, MAPPED, ...; the CUDA runtime reads
 * IS_MANAGED as an unsigned int it does not clear first). */
static void put_bool(void *data, bool v)
{
        *(unsigned int *)data = v;
}

EXPORT CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
        struct lupc_alloc_info a;

        if (!data)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        uint64_t hbase, hsize;
        unsigned int hflags;
        struct lupc_managed_info mi;
        if (!lupc_shadow_find(ptr, &a) && lupc_managed_find(ptr, &mi))
                return lupc_managed_pointer_attr(data, attribute, ptr, &mi);
        if (!lupc_shadow_find(ptr, &a)) {
                /* unregistered host memory: INVALID_VALUE, like the driver */
                if (!lupc_host_find(ptr, &hbase, &hsize, &hflags))
                        return CUDA_ERROR_INVALID_VALUE;
                switch (attribute) {
                case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
                        *(unsigned int *)data = CU_MEMORYTYPE_HOST;
                        return CUDA_SUCCESS;
                case CU_POINTER_ATTRIBUTE_HOST_POINTER:
                        *(void **)data = (void *)(uintptr_t)ptr;
                        return CUDA_SUCCESS;
                case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
                        *(void **)data = (void *)(uintptr_t)hbase;
                        return CUDA_SUCCESS;
                case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
                        *(size_t *)data = (size_t)hsize;
                        return CUDA_SUCCESS;
                case CU_POINTER_ATTRIBUTE_IS_MANAGED:
                case CU_POINTER_ATTRIBUTE_MAPPED:
                        put_bool(data, attribute == CU_POINTER_ATTRIBUTE_MAPPED);
                        return CUDA_SUCCESS;
                case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: {
                        /* UVA: the host address (api_mapped.c mirrors it) */
                        CUresult r = lupc_mapped_use(ptr, 1);
                        if (r == CUDA_SUCCESS)
                                *(CUdeviceptr *)data = ptr;
                        return r;
                }
                default:
                        return CUDA_ERROR_INVALID_VALUE;
                }
        }
        switch (attribute) {
        case CU_POINTER_ATTRIBUTE_CONTEXT:
                *(CUcontext *)data = (CUcontext)(uintptr_t)a.ctx;
                break;
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
                *(unsigned int *)data = CU_MEMORYTYPE_DEVICE;
                break;
        case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
                *(CUdeviceptr *)data = ptr;
                break;
        case CU_POINTER_ATTRIBUTE_HOST_POINTER:
                return CUDA_ERROR_INVALID_VALUE;
        case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
                put_bool(data, false);
                break;
        case CU_POINTER_ATTRIBUTE_BUFFER_ID:
                *(unsigned long long *)data = a.base;
                break;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED:
                put_bool(data, false);
                break;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
                *(int *)data = a.device;
                break;
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
                *(CUdeviceptr *)data = a.base;
                break;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
                *(size_t *)data = (size_t)a.size;
                break;
        case CU_POINTER_ATTRIBUTE_MAPPED:
                put_bool(data, true);
                break;
        case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
                *(CUmemoryPool *)data = (CUmemoryPool)(uintptr_t)lupc_pool_of(a.base);
                break;
        case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR: /* a cuMemMap mapping's (api_vmm.c) */
                if (!a.vmm)
                        return CUDA_ERROR_NOT_SUPPORTED;
                *(void **)data = (void *)(uintptr_t)a.base;
                break;
        case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
                if (!a.vmm)
                        return CUDA_ERROR_NOT_SUPPORTED;
                *(size_t *)data = (size_t)a.size;
                break;
        default:
                return CUDA_ERROR_NOT_SUPPORTED;
        }
        return CUDA_SUCCESS;
}

/* Bytes each attribute's value takes, for the defaults below. */
static size_t attr_size(CUpointer_attribute a)
{
        switch (a) {
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: /* the booleans too (put_bool) */
        case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        case CU_POINTER_ATTRIBUTE_MAPPED:
        case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
        case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
                return sizeof(unsigned int);
        case CU_POINTER_ATTRIBUTE_P2P_TOKENS:
                return sizeof(CUDA_POINTER_ATTRIBUTE_P2P_TOKENS);
        default:
                return 8; /* pointers, handles, sizes, 64-bit ids */
        }
}

/*
 * Unlike the single query, this one succeeds for any pointer: what does not
 * apply (a host pointer's context, a device pointer's host address) reads
 * as zero, and the device ordinal of a pointer lupine does not know is -2,
 * as the driver reports for plain host memory.
 */
EXPORT CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
                                               CUdeviceptr ptr)
{
        struct lupc_alloc_info a;
        uint64_t hbase, hsize;
        unsigned int hflags;

        if (!numAttributes || !attributes || !data)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        bool known = lupc_shadow_find(ptr, &a) || lupc_host_find(ptr, &hbase, &hsize, &hflags) ||
                     lupc_managed_find(ptr, NULL);
        for (unsigned int i = 0; i < numAttributes; i++) {
                if (!data[i])
                        return CUDA_ERROR_INVALID_VALUE;
                if (cuPointerGetAttribute(data[i], attributes[i], ptr) == CUDA_SUCCESS)
                        continue;
                memset(data[i], 0, attr_size(attributes[i]));
                if (attributes[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL && !known)
                        *(int *)data[i] = -2;
        }
        return CUDA_SUCCESS;
}
