/* SPDX-License-Identifier: MIT */
/*
 * Synchronisations and event records, hand-written (client=custom in the
 * spec) so that the stream-ordered allocator sees them: a synchronisation
 * completes the frees it covers and lets pools give memory back above
 * their release thresholds (shim/pool.c). With no pool in use each hook
 * is one atomic load.
 */
#include "client.h"
#include "pool.h"
#include "shim_gen.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT CUresult CUDAAPI cuCtxSynchronize(void)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        uint64_t t = lupc_pool_ticket();
        CUresult r = lupc_send_cuCtxSynchronize();
        if (r == CUDA_SUCCESS)
                lupc_pool_synced_ctx(lupc_ctx_current(), t);
        return r;
}

/* stream: as the caller named it; per_thread: the _ptsz entry point */
static CUresult stream_sync(CUstream s, int per_thread, bool query)
{
        struct lupc_pool_stream st;

        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        CUstream w = (CUstream)(uintptr_t)lupc_stream_id(s, per_thread);
        bool known = lupc_pool_stream_of(w, &st) == CUDA_SUCCESS;
        uint64_t t = lupc_pool_ticket();
        CUresult r = query ? lupc_send_cuStreamQuery(w) : lupc_send_cuStreamSynchronize(w);
        if (r == CUDA_SUCCESS && known)
                lupc_pool_synced_stream(&st, t);
        return r;
}

EXPORT CUresult CUDAAPI cuStreamSynchronize(CUstream hStream)
{
        return stream_sync(hStream, 0, false);
}

EXPORT CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream);
EXPORT CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream)
{
        return stream_sync(hStream, 1, false);
}

EXPORT CUresult CUDAAPI cuStreamQuery(CUstream hStream)
{
        return stream_sync(hStream, 0, true);
}

EXPORT CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream);
EXPORT CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream)
{
        return stream_sync(hStream, 1, true);
}

EXPORT CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        CUresult r = lupc_send_cuEventSynchronize(hEvent);
        if (r == CUDA_SUCCESS)
                lupc_pool_synced_event((uint64_t)(uintptr_t)hEvent);
        return r;
}

static CUresult event_record(CUevent e, CUstream s, unsigned int flags, bool with_flags, int per_thread)
{
        struct lupc_pool_stream st;

        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        CUstream w = (CUstream)(uintptr_t)lupc_stream_id(s, per_thread);
        CUresult r = with_flags ? lupc_send_cuEventRecordWithFlags(e, w, flags) : lupc_send_cuEventRecord(e, w);
        if (r == CUDA_SUCCESS && lupc_pool_stream_of(w, &st) == CUDA_SUCCESS)
                lupc_pool_event_recorded((uint64_t)(uintptr_t)e, &st);
        return r;
}

EXPORT CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream)
{
        return event_record(hEvent, hStream, 0, false, 0);
}

EXPORT CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream);
EXPORT CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
        return event_record(hEvent, hStream, 0, false, 1);
}

EXPORT CUresult CUDAAPI cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
        return event_record(hEvent, hStream, flags, true, 0);
}

EXPORT CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags);
EXPORT CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
{
        return event_record(hEvent, hStream, flags, true, 1);
}
