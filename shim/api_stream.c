/* SPDX-License-Identifier: MIT */
/*
 * Stream queries answered in the shim, and host callbacks.
 *
 * Stream capture is not forwarded yet, so no stream is ever capturing.
 * Host functions run in the client process at their point in stream order:
 * the shim waits for the stream's earlier work, runs the function, and only
 * then returns, so everything queued afterwards also runs after it. The
 * difference from CUDA is that the enqueuing thread waits and runs the
 * function itself (docs/status.md).
 */
#include "client.h"
#include "shim_gen.h"

#define EXPORT __attribute__((visibility("default")))

#undef cuStreamGetCtx

static CUresult capture_status(CUstream s, CUstreamCaptureStatus *status)
{
        if (!status)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        *status = CU_STREAM_CAPTURE_STATUS_NONE;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
        return capture_status(hStream, captureStatus);
}

static CUresult capture_info(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id, CUgraph *graph,
                             const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *n)
{
        CUresult r = capture_status(s, status);
        if (r != CUDA_SUCCESS)
                return r;
        /* the other outputs are only defined while capturing */
        (void)id, (void)graph, (void)deps, (void)edges, (void)n;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                  cuuint64_t *id_out, CUgraph *graph_out,
                                                  const CUgraphNode **dependencies_out,
                                                  const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
        return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                            numDependencies_out);
}

/* The CUDA 11.3 and 10.1 forms, which cuBLAS and older runtimes still ask for. */
EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                  cuuint64_t *id_out, CUgraph *graph_out,
                                                  const CUgraphNode **dependencies_out, size_t *numDependencies_out);
EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                  cuuint64_t *id_out, CUgraph *graph_out,
                                                  const CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
        return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
                            numDependencies_out);
}

#undef cuStreamGetCaptureInfo
EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                               cuuint64_t *id_out);
EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                               cuuint64_t *id_out)
{
        return capture_info(hStream, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

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
        if (!fn)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = cuStreamSynchronize(hStream);
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
        CUresult r = cuStreamSynchronize(st);
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
