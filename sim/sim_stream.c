/* SPDX-License-Identifier: MIT */
/*
 * The stream API over the queues of sim_queue.c. A stream belongs to the
 * context current when it was created and dies with it; its handle is a
 * tagged id in the stream registry, whose entry owns one reference to the
 * queue. The special handles (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD)
 * mean the legacy stream of the calling thread's current context.
 */
#include <stdlib.h>

#include "sim_graph.h"

static bool special_stream(CUstream h)
{
        return h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD;
}

static CUstream stream_handle(const struct sim_queue *q)
{
        return (CUstream)(uintptr_t)(SIM_TAG_STREAM | q->id);
}

struct sim_queue *sim_stream_lookup(struct sim_driver *drv, CUstream h)
{
        return sim_handle_get(&drv->streams, (uint64_t)(uintptr_t)h, SIM_TAG_STREAM);
}

CUresult sim_stream_enter(struct sim_driver *drv, CUstream h, CUcontext *ret_ctx, struct sim_queue **ret_q)
{
        struct sim_queue *s;
        CUcontext ctx;
        CUresult r;

        if (special_stream(h)) {
                r = sim_ctx_current(drv, NULL, &ctx);
                if (r != CUDA_SUCCESS)
                        return r;
        } else {
                s = sim_stream_lookup(drv, h);
                if (!s)
                        return CUDA_ERROR_INVALID_HANDLE;
                ctx = s->ctx;
                r = sim_ctx_status(drv, ctx, NULL);
                if (r != CUDA_SUCCESS)
                        return r;
        }
        if (ret_q) {
                r = sim_queue_get(drv, h, ctx, ret_q);
                if (r != CUDA_SUCCESS)
                        return r;
        }
        if (ret_ctx)
                *ret_ctx = ctx;
        return CUDA_SUCCESS;
}

void sim_stream_destroy_ctx_streams(struct sim_driver *drv, CUcontext ctx)
{
        for (size_t i = drv->streams.n; i-- > 0;) {
                struct sim_queue *q = drv->streams.items[i].obj;

                if (q->ctx != ctx)
                        continue;
                sim_svec_remove_at(&drv->streams, i);
                sim_queue_stop(drv, q);
        }
        sim_queue_stop_ctx_legacy(drv, ctx);
}

SIM_API CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_queue *q;
        CUcontext ctx;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!phStream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
                return CUDA_ERROR_INVALID_VALUE;
        /* Out of range priorities are clamped, as the driver does. */
        if (priority < SIM_PRIORITY_GREATEST)
                priority = SIM_PRIORITY_GREATEST;
        if (priority > SIM_PRIORITY_LEAST)
                priority = SIM_PRIORITY_LEAST;

        sim_wrlock(drv);
        r = sim_ctx_current(drv, NULL, &ctx);
        if (r != CUDA_SUCCESS)
                goto out_unlock;
        q = sim_queue_create(drv, ctx, flags, priority);
        if (!q) {
                r = CUDA_ERROR_OUT_OF_MEMORY;
                goto out_unlock;
        }
        if (sim_handle_register(drv, &drv->streams, q, &q->id) < 0) {
                sim_queue_stop(drv, q);
                r = CUDA_ERROR_OUT_OF_MEMORY;
                goto out_unlock;
        }
        *phStream = stream_handle(q);
out_unlock:
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
        return cuStreamCreateWithPriority(phStream, Flags, 0);
}

/* Pending work still completes; the handle is dead at once. */
SIM_API CUresult cuStreamDestroy_v2(CUstream hStream)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_queue *q;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_wrlock(drv);
        q = sim_handle_take(&drv->streams, (uint64_t)(uintptr_t)hStream, SIM_TAG_STREAM);
        if (!q) {
                sim_unlock(drv);
                return CUDA_ERROR_INVALID_HANDLE;
        }
        sim_queue_stop(drv, q);
        sim_unlock(drv);
        return CUDA_SUCCESS;
}

/* The sticky error of ctx, after its work has been waited for. */
static CUresult ctx_status(struct sim_driver *drv, CUcontext ctx)
{
        CUresult r;

        sim_rdlock(drv);
        r = sim_ctx_status(drv, ctx, NULL);
        sim_unlock(drv);
        return r;
}

static CUresult stream_get(CUstream h, struct sim_driver **ret_drv, struct sim_queue **ret_q,
                           CUcontext *ret_ctx)
{
        struct sim_driver *drv = sim_driver_get();
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_rdlock(drv);
        r = sim_stream_enter(drv, h, ret_ctx, ret_q);
        sim_unlock(drv);
        *ret_drv = drv;
        return r;
}

/* A synchronisation with q: illegal while q captures (or, for the legacy
 * stream, while a blocking stream of its context does, or while the
 * capture modes forbid unsafe calls). SIM_CAPTURE_RUN when allowed. */
static CUresult sync_allowed(struct sim_driver *drv, struct sim_queue *q)
{
        CUresult r;

        if (!sim_capture_any())
                return SIM_CAPTURE_RUN;
        if (q->legacy && (r = sim_capture_unsafe_call()) != CUDA_SUCCESS)
                return r;
        return sim_capture_forbid(drv, q);
}

SIM_API CUresult cuStreamSynchronize(CUstream hStream)
{
        struct sim_driver *drv;
        struct sim_queue *q;
        CUcontext ctx;
        CUresult r = stream_get(hStream, &drv, &q, &ctx);

        if (r != CUDA_SUCCESS)
                return r;
        r = sync_allowed(drv, q);
        if (r != SIM_CAPTURE_RUN) {
                sim_queue_put(drv, q);
                return r;
        }
        sim_queue_wait_idle(drv, q);
        sim_queue_put(drv, q);
        sim_printf_flush(drv, ctx);
        return ctx_status(drv, ctx);
}

SIM_API CUresult cuStreamQuery(CUstream hStream)
{
        struct sim_driver *drv;
        struct sim_queue *q;
        CUcontext ctx;
        CUresult r = stream_get(hStream, &drv, &q, &ctx);
        bool busy;

        if (r != CUDA_SUCCESS)
                return r;
        r = sync_allowed(drv, q);
        if (r != SIM_CAPTURE_RUN) {
                sim_queue_put(drv, q);
                return r;
        }
        busy = sim_queue_busy(drv, q);
        sim_queue_put(drv, q);
        r = ctx_status(drv, ctx);
        return r == CUDA_SUCCESS && busy ? CUDA_ERROR_NOT_READY : r;
}

/* Submits a prepared op (host functions and callbacks) to stream h; while
 * h captures, a host function becomes a host node and a callback is
 * refused. */
static CUresult submit(CUstream h, struct sim_op *op)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_nparams np = { .type = CU_GRAPH_NODE_TYPE_HOST,
                                  .u.host = { .fn = op->host_fn, .userData = op->user_data } };
        struct sim_queue *q = NULL;
        CUresult r;

        if (!drv) {
                sim_op_free(op);
                return CUDA_ERROR_NOT_INITIALIZED;
        }
        sim_rdlock(drv);
        r = sim_stream_enter(drv, h, &np.ctx, &q);
        if (r == CUDA_SUCCESS)
                r = op->host_fn ? sim_capture_work(drv, q, &np) : sim_capture_forbid(drv, q);
        sim_unlock(drv);
        if (r != SIM_CAPTURE_RUN) {
                sim_queue_put(drv, q);
                sim_op_free(op);
                return r;
        }
        return sim_queue_submit(drv, q, op);
}

SIM_API CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
        struct sim_op *op;

        if (!sim_driver_get())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!fn)
                return CUDA_ERROR_INVALID_VALUE;
        op = sim_op_new(NULL, NULL, false);
        if (!op)
                return CUDA_ERROR_OUT_OF_MEMORY;
        op->host_fn = fn;
        op->user_data = userData;
        return submit(hStream, op);
}

SIM_API CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData,
                                     unsigned int flags)
{
        struct sim_op *op;

        if (!sim_driver_get())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!callback || flags != 0)
                return CUDA_ERROR_INVALID_VALUE;
        op = sim_op_new(NULL, NULL, false);
        if (!op)
                return CUDA_ERROR_OUT_OF_MEMORY;
        op->callback = callback;
        op->user_data = userData;
        op->stream_handle = hStream;
        return submit(hStream, op);
}

/* Property getters: special handles answer for the legacy stream. */
static CUresult stream_props(CUstream h, struct sim_queue *ret)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_queue *q;
        CUresult r = CUDA_SUCCESS;
        CUcontext ctx;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_rdlock(drv);
        if (special_stream(h)) {
                r = sim_ctx_current(drv, NULL, &ctx);
                *ret = (struct sim_queue){ .ctx = ctx, .legacy = true,
                                           .id = h == CU_STREAM_PER_THREAD ? 1 : 0 };
        } else if ((q = sim_stream_lookup(drv, h)) != NULL) {
                *ret = (struct sim_queue){ .ctx = q->ctx, .flags = q->flags, .priority = q->priority,
                                           .id = q->id };
        } else {
                r = CUDA_ERROR_INVALID_HANDLE;
        }
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuStreamGetPriority(CUstream hStream, int *priority)
{
        struct sim_queue p;
        CUresult r;

        if (!priority)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = stream_props(hStream, &p);
        if (r == CUDA_SUCCESS)
                *priority = p.priority;
        return r;
}

SIM_API CUresult cuStreamGetFlags(CUstream hStream, unsigned int *flags)
{
        struct sim_queue p;
        CUresult r;

        if (!flags)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = stream_props(hStream, &p);
        if (r == CUDA_SUCCESS)
                *flags = p.flags;
        return r;
}

SIM_API CUresult cuStreamGetId(CUstream hStream, unsigned long long *streamId)
{
        struct sim_queue p;
        CUresult r;

        if (!streamId)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = stream_props(hStream, &p);
        if (r == CUDA_SUCCESS)
                *streamId = p.id;
        return r;
}

SIM_API CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
        struct sim_queue p;
        CUresult r;

        if (!pctx)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = stream_props(hStream, &p);
        if (r == CUDA_SUCCESS)
                *pctx = p.ctx;
        return r;
}

SIM_API CUresult cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
        CUresult r;

        if (!pCtx || !pGreenCtx)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = cuStreamGetCtx(hStream, pCtx);
        if (r == CUDA_SUCCESS)
                *pGreenCtx = NULL;      /* the sim has no green contexts */
        return r;
}

SIM_API CUresult cuStreamGetDevice(CUstream hStream, CUdevice *device)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_queue p;
        struct sim_ctx *c;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!device)
                return CUDA_ERROR_INVALID_VALUE;
        r = stream_props(hStream, &p);
        if (r != CUDA_SUCCESS)
                return r;
        sim_rdlock(drv);
        c = sim_ctx_lookup(drv, p.ctx);
        if (c)
                *device = c->dev;
        sim_unlock(drv);
        return c ? CUDA_SUCCESS : CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

SIM_API CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
        struct sim_driver *drv = sim_driver_get();
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_rdlock(drv);
        r = sim_ctx_current(drv, NULL, NULL);
        sim_unlock(drv);
        if (r != CUDA_SUCCESS)
                return r;
        /* Either may be NULL. */
        if (leastPriority)
                *leastPriority = SIM_PRIORITY_LEAST;
        if (greatestPriority)
                *greatestPriority = SIM_PRIORITY_GREATEST;
        return CUDA_SUCCESS;
}
