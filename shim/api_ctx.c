/* SPDX-License-Identifier: MIT */
/*
 * Contexts. Ids are minted in the shim (creation needs no id from the
 * server); the current context is a per-thread stack kept here, and every
 * call that needs a context carries its id in the frame header.
 */
#include <errno.h>

#include "arrays.h"
#include "unsupported.h"
#include "client.h"
#include "ctx_local.h"
#include "pool.h"
#include "shim_gen.h"

#define EXPORT __attribute__((visibility("default")))

/* cuda.h maps these names to their newest ABI; the old ABIs are exported too. */
#undef cuDevicePrimaryCtxRelease
#undef cuDevicePrimaryCtxSetFlags
#undef cuDevicePrimaryCtxReset
#undef cuCtxCreate
#undef cuCtxDestroy
#undef cuCtxPushCurrent
#undef cuCtxPopCurrent


static CUresult check_dev(CUdevice dev)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        return lupc_device(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
        CUresult r;

        if (!pctx)
                return CUDA_ERROR_INVALID_VALUE;
        if ((r = check_dev(dev)) != CUDA_SUCCESS)
                return r;
        /* The worker retains the real primary context once for the session. */
        if (lupc_primary_retain(dev) == 1) {
                r = lupc_send_lupPrimaryCtxRetain(dev);
                if (r != CUDA_SUCCESS) {
                        lupc_primary_release(dev);
                        return r;
                }
                lupc_context_made();
        }
        *pctx = (CUcontext)(uintptr_t)lupc_primary_ctx_id(dev);
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
        CUresult r;

        if ((r = check_dev(dev)) != CUDA_SUCCESS)
                return r;
        int left = lupc_primary_release(dev);
        if (left < 0)
                return CUDA_ERROR_INVALID_CONTEXT;
        return left == 0 ? lupc_send_lupPrimaryCtxRelease(dev) : CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev);
EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev)
{
        return cuDevicePrimaryCtxRelease_v2(dev);
}

EXPORT CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
        CUresult r;

        if (!flags || !active)
                return CUDA_ERROR_INVALID_VALUE;
        if ((r = check_dev(dev)) != CUDA_SUCCESS)
                return r;
        lupc_primary_state(dev, flags, active);
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
        CUresult r;

        if ((r = check_dev(dev)) != CUDA_SUCCESS)
                return r;
        r = lupc_send_lupPrimaryCtxSetFlags(dev, flags);
        if (r == CUDA_SUCCESS)
                lupc_primary_set_flags(dev, flags);
        return r;
}

EXPORT CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags);
EXPORT CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
        return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

EXPORT CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
        CUresult r;

        if ((r = check_dev(dev)) != CUDA_SUCCESS)
                return r;
        r = lupc_send_lupPrimaryCtxReset(dev);
        if (r == CUDA_SUCCESS) {
                lupc_primary_reset(dev);
                lupc_shadow_drop_ctx(lupc_primary_ctx_id(dev));
                lupc_pool_drop_ctx(lupc_primary_ctx_id(dev));
                lupc_arrays_drop_ctx(lupc_primary_ctx_id(dev)); /* api_arrays.c, api_texobj.c */
                lupc_managed_drop_ctx(lupc_primary_ctx_id(dev));
                lupc_ctx_local_gone(lupc_primary_ctx_id(dev));
        }
        return r;
}

EXPORT CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev);
EXPORT CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev)
{
        return cuDevicePrimaryCtxReset_v2(dev);
}

EXPORT CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
EXPORT CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
        CUresult r;

        if (!pctx)
                return CUDA_ERROR_INVALID_VALUE;
        if ((r = check_dev(dev)) != CUDA_SUCCESS)
                return r;
        uint64_t id = lupc_ctx_mint(dev, flags);
        if (!id)
                return CUDA_ERROR_OUT_OF_MEMORY; /* LUP_MAX_CONTEXTS live contexts */
        r = lupc_send_lupCtxCreate(id, flags, dev);
        if (r != CUDA_SUCCESS) {
                lupc_ctx_forget(id);
                return r;
        }
        lupc_context_made();
        if (lupc_ctx_push(id) < 0) {
                /* the real driver has no stack limit this small; say so plainly */
                lupc_send_lupCtxDestroy(id);
                lupc_ctx_forget(id);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        *pctx = (CUcontext)(uintptr_t)id;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev)
{
        /* Execution affinity and CIG need features lupine does not forward yet. */
        if (params && (params->numExecAffinityParams > 0 || params->cigParams))
                return CUDA_ERROR_NOT_SUPPORTED;
        return cuCtxCreate_v2(pctx, flags, dev);
}

EXPORT CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx)
{
        struct lupc_ctx_info info;
        uint64_t id = (uint64_t)(uintptr_t)ctx;

        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!lupc_ctx_lookup(id, &info) || info.primary)
                /* the driver remembers contexts it destroyed */
                return lupc_ctx_was_minted(id) ? CUDA_ERROR_CONTEXT_IS_DESTROYED : CUDA_ERROR_INVALID_CONTEXT;
        CUresult r = lupc_send_lupCtxDestroy(id);
        if (r == CUDA_SUCCESS) {
                lupc_ctx_forget(id);
                lupc_shadow_drop_ctx(id);
                lupc_pool_drop_ctx(id);
                lupc_arrays_drop_ctx(id); /* api_arrays.c, api_texobj.c */
                lupc_managed_drop_ctx(id);
                lupc_ctx_local_gone(id);
        }
        return r;
}

EXPORT CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
        uint64_t id = (uint64_t)(uintptr_t)ctx;

        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (id && !lupc_ctx_known(id))
                return CUDA_ERROR_INVALID_CONTEXT;
        lupc_ctx_set_current(id);
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
        if (!pctx)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        *pctx = (CUcontext)(uintptr_t)lupc_ctx_current();
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx)
{
        struct lupc_ctx_info info;
        uint64_t id = (uint64_t)(uintptr_t)ctx;

        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!id || !lupc_ctx_lookup(id, &info))
                return CUDA_ERROR_INVALID_CONTEXT;
        return lupc_ctx_push(id) < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext *pctx)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (lupc_ctx_current() == 0)
                return CUDA_ERROR_INVALID_CONTEXT;
        uint64_t id = lupc_ctx_pop();
        if (pctx)
                *pctx = (CUcontext)(uintptr_t)id;
        return CUDA_SUCCESS;
}

static CUresult current_info(struct lupc_ctx_info *info)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        uint64_t id = lupc_ctx_current();
        if (!id || !lupc_ctx_lookup(id, info))
                return CUDA_ERROR_INVALID_CONTEXT;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuCtxGetDevice(CUdevice *device)
{
        struct lupc_ctx_info info;
        CUresult r;

        if (!device)
                return CUDA_ERROR_INVALID_VALUE;
        if ((r = current_info(&info)) != CUDA_SUCCESS)
                return r;
        *device = info.device;
        return CUDA_SUCCESS;
}

/* CUDA 13: the device of any context; NULL means the current one */
EXPORT CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
        struct lupc_ctx_info info;
        uint64_t id = (uint64_t)(uintptr_t)ctx;

        if (!device)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!id)
                return cuCtxGetDevice(device);
        /* a primary context of a device this process cannot see is no context of its own */
        int dev = lupc_primary_ctx_dev(id);
        if (dev >= 0) {
                *device = dev;
                return CUDA_SUCCESS;
        }
        if (!lupc_ctx_lookup(id, &info))
                return CUDA_ERROR_INVALID_CONTEXT;
        *device = info.device;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuCtxGetFlags(unsigned int *flags)
{
        struct lupc_ctx_info info;
        CUresult r;

        if (!flags)
                return CUDA_ERROR_INVALID_VALUE;
        if ((r = current_info(&info)) != CUDA_SUCCESS)
                return r;
        /* mapped pinned memory is always on: driver 580 reports MAP_HOST
         * whatever the context was created with */
        *flags = info.flags | CU_CTX_MAP_HOST;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
        struct lupc_ctx_info info;
        uint64_t id = ctx ? (uint64_t)(uintptr_t)ctx : lupc_ctx_current();

        if (!version)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!id || !lupc_ctx_lookup(id, &info))
                return CUDA_ERROR_INVALID_CONTEXT;
        *version = 3020; /* what the driver reports for every context since CUDA 3.2 */
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
        uint64_t uid;

        if (!ctxId)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        CUresult r = lupc_ctx_uid((uint64_t)(uintptr_t)ctx, &uid);
        if (r == CUDA_SUCCESS)
                *ctxId = uid;
        return r;
}

/* CUDA 13: synchronise a given context (NULL: the current one). */
EXPORT CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx)
{
        uint64_t id = (uint64_t)(uintptr_t)ctx;

        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!id || id == lupc_ctx_current())
                return cuCtxSynchronize();
        if (!lupc_ctx_known(id))
                return CUDA_ERROR_INVALID_CONTEXT;
        CUresult r = cuCtxPushCurrent_v2(ctx);
        if (r != CUDA_SUCCESS)
                return r;
        r = cuCtxSynchronize();
        cuCtxPopCurrent_v2(NULL);
        return r;
}
