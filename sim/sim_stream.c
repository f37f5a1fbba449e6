/* SPDX-License-Identifier: MIT */
/*
 * Streams. All work runs synchronously at submission, so a stream is only
 * a registered handle that async calls validate; synchronize and query
 * always find it idle. A stream belongs to the context current when it
 * was created and dies with it.
 */
#include <stdlib.h>

#include "sim_internal.h"

static CUstream stream_handle(const struct sim_stream *s)
{
        return (CUstream)(uintptr_t)(SIM_TAG_STREAM | s->id);
}

static struct sim_stream *stream_lookup(struct sim_driver *drv, CUstream h)
{
        uint64_t id = sim_handle_id((uint64_t)(uintptr_t)h, SIM_TAG_STREAM);

        return id ? sim_svec_get(&drv->streams, id) : NULL;
}

CUresult sim_stream_check(struct sim_driver *drv, CUstream s)
{
        if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
                return CUDA_SUCCESS;
        return stream_lookup(drv, s) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

void sim_stream_destroy_ctx_streams(struct sim_driver *drv, CUcontext ctx)
{
        for (size_t i = drv->streams.n; i-- > 0;) {
                struct sim_stream *s = drv->streams.items[i].obj;

                if (s->ctx != ctx)
                        continue;
                sim_svec_remove_at(&drv->streams, i);
                free(s);
        }
}

SIM_API CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_stream *s;
        CUcontext ctx;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!phStream)
                return CUDA_ERROR_INVALID_VALUE;
        if (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING)
                return CUDA_ERROR_INVALID_VALUE;
        s = calloc(1, sizeof(*s));
        if (!s)
                return CUDA_ERROR_OUT_OF_MEMORY;

        sim_wrlock(drv);
        r = sim_ctx_current(drv, NULL, &ctx);
        if (r != CUDA_SUCCESS)
                goto out_free;
        s->id = sim_next_id(drv);
        s->ctx = ctx;
        s->flags = Flags;
        if (sim_svec_insert(&drv->streams, s->id, s) < 0) {
                r = CUDA_ERROR_OUT_OF_MEMORY;
                goto out_free;
        }
        sim_unlock(drv);
        *phStream = stream_handle(s);
        return CUDA_SUCCESS;

out_free:
        sim_unlock(drv);
        free(s);
        return r;
}

SIM_API CUresult cuStreamDestroy_v2(CUstream hStream)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_stream *s;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_wrlock(drv);
        s = stream_lookup(drv, hStream);
        if (!s) {
                sim_unlock(drv);
                return CUDA_ERROR_INVALID_HANDLE;
        }
        (void)sim_svec_remove(&drv->streams, s->id);
        sim_unlock(drv);
        free(s);
        return CUDA_SUCCESS;
}

/* The null stream needs a current context; a created stream carries its own. */
static CUresult stream_idle(CUstream hStream)
{
        struct sim_driver *drv = sim_driver_get();
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_rdlock(drv);
        r = sim_stream_check(drv, hStream);
        if (r == CUDA_SUCCESS && !stream_lookup(drv, hStream))
                r = sim_ctx_current(drv, NULL, NULL);
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuStreamSynchronize(CUstream hStream)
{
        return stream_idle(hStream);
}

SIM_API CUresult cuStreamQuery(CUstream hStream)
{
        return stream_idle(hStream);
}
