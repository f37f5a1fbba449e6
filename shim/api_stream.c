/* SPDX-License-Identifier: MIT */
/*
 * Stream queries answered in the shim, and host callbacks.
 *
 * Stream capture state is answered in shim/api_graph.c.
 * Host functions run in the client process at their point in stream order:
 * the shim waits for the stream's earlier work, runs the function, and only
 * then returns, so everything queued afterwards also runs after it. The
 * difference from CUDA is that the enqueuing thread waits and runs the
 * function itself (docs/status.md). During a capture, cuLaunchHostFunc is
 * captured as a host node (shim/graph_host.c); cuStreamAddCallback is
 * refused, as the driver refuses it.
 */
#include "client.h"
#include "graph_host.h"
#include "shim_gen.h"

#define EXPORT __attribute__((visibility("default")))

#undef cuStreamGetCtx

static CUresult stream_ctx(CUstream s, CUcontext *pctx)
{
        uint64_t id = (uint64_t)(uintptr_t)s, ctx = 0;
        if (!pctx)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (id == 0 || id == (uint64_t)(uintptr_t)CU_STREAM_LEGACY || id == (uint64_t)(uintptr_t)CU_STREAM_PER_THREAD) {
                ctx = lupc_ctx_current();
                if (!ctx)
                        return CUDA_ERROR_INVALID_CONTEXT;
        } else if (lupc_handle_kind(id, &ctx) != LUPC_H_STREAM) {
                return CUDA_ERROR_INVALID_HANDLE;
        }
        *pctx = (CUcontext)(uintptr_t)ctx;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
        return stream_ctx(hStream, pctx);
}

EXPORT CUresult CUDAAPI cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
        if (pGreenCtx)
                *pGreenCtx = NULL;
        return stream_ctx(hStream, pCtx);
}

/* ---- host callbacks */

EXPORT CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
        bool captured = false;
        if (!fn)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        /* in a capture: a host node of the graph (shim/graph_host.c) */
        CUresult r = lupc_host_capture(lupc_stream_id(hStream, 0), fn, userData, &captured);
        if (r != CUDA_SUCCESS || captured)
                return r;
        r = cuStreamSynchronize(hStream);
        if (r != CUDA_SUCCESS)
                return r;
        fn(userData);
        return CUDA_SUCCESS;
}

/* cuStreamAddCallback and its _ptsz variant (generated): the callback is
 * handed the stream as the caller named it, 0 included. */
CUresult lupc_add_callback(CUstream s, CUstreamCallback cb, void *userData, unsigned int flags, int per_thread)
{
        if (!cb || flags != 0)
                return CUDA_ERROR_INVALID_VALUE;
        CUstream st = per_thread && !s ? CU_STREAM_PER_THREAD : s;
        CUresult r = lupc_capture_refuse(lupc_stream_id(st, 0), "cuStreamAddCallback");
        if (r != CUDA_SUCCESS)
                return r;
        r = cuStreamSynchronize(st);
        if (r == CUDA_ERROR_NOT_INITIALIZED || r == CUDA_ERROR_INVALID_HANDLE || r == CUDA_ERROR_INVALID_CONTEXT)
                return r;
        /* like CUDA, a stream error is passed to the callback */
        cb(s, r, userData);
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData,
                                            unsigned int flags)
{
        return lupc_add_callback(hStream, callback, userData, flags, 0);
}
