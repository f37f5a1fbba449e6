/* SPDX-License-Identifier: MIT */
/*
 * Events. A record is an op on its stream; when it runs, the event's
 * completed generation and time (CLOCK_MONOTONIC) are set. A wait is an op
 * that holds its stream until the generation current at submission has
 * completed, so waiting on an event never recorded waits for nothing, as
 * in CUDA. Registry entries and ops each hold a reference, so a destroyed
 * event with a record in flight lives until that record has run.
 */
#include <stdlib.h>

#include "sim_graph.h"

#define EVENT_FLAGS (CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)

static CUevent event_handle(const struct sim_event *e)
{
        return (CUevent)(uintptr_t)(SIM_TAG_EVENT | e->id);
}

static struct sim_event *event_lookup(struct sim_driver *drv, CUevent h)
{
        return sim_handle_get(&drv->events, (uint64_t)(uintptr_t)h, SIM_TAG_EVENT);
}

void sim_event_put_locked(struct sim_event *e)
{
        if (--e->refs == 0)
                free(e);
}

/* Takes a reference under both locks; the caller holds the rwlock. */
static void event_get(struct sim_driver *drv, struct sim_event *e)
{
        pthread_mutex_lock(&drv->q_mu);
        e->refs++;
        pthread_mutex_unlock(&drv->q_mu);
}

static void event_put(struct sim_driver *drv, struct sim_event *e)
{
        pthread_mutex_lock(&drv->q_mu);
        sim_event_put_locked(e);
        pthread_mutex_unlock(&drv->q_mu);
}

struct sim_event *sim_event_get_ref(struct sim_driver *drv, CUevent h)
{
        struct sim_event *e = event_lookup(drv, h);

        if (e)
                event_get(drv, e);
        return e;
}

bool sim_event_valid(struct sim_driver *drv, CUevent h)
{
        return event_lookup(drv, h) != NULL;
}

void sim_event_destroy_ctx_events(struct sim_driver *drv, CUcontext ctx)
{
        for (size_t i = drv->events.n; i-- > 0;) {
                struct sim_event *e = drv->events.items[i].obj;

                if (e->ctx != ctx)
                        continue;
                sim_svec_remove_at(&drv->events, i);
                event_put(drv, e);
        }
}

SIM_API CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_event *e;
        CUcontext ctx;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!phEvent || (Flags & ~(unsigned)EVENT_FLAGS))
                return CUDA_ERROR_INVALID_VALUE;
        /* An interprocess event must not time. */
        if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))
                return CUDA_ERROR_INVALID_VALUE;
        e = calloc(1, sizeof(*e));
        if (!e)
                return CUDA_ERROR_OUT_OF_MEMORY;
        e->flags = Flags;
        e->refs = 1;

        sim_wrlock(drv);
        r = sim_ctx_current(drv, NULL, &ctx);
        if (r != CUDA_SUCCESS)
                goto out_free;
        e->ctx = ctx;
        if (sim_handle_register(drv, &drv->events, e, &e->id) < 0) {
                r = CUDA_ERROR_OUT_OF_MEMORY;
                goto out_free;
        }
        sim_unlock(drv);
        *phEvent = event_handle(e);
        return CUDA_SUCCESS;

out_free:
        sim_unlock(drv);
        free(e);
        return r;
}

SIM_API CUresult cuEventDestroy_v2(CUevent hEvent)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_event *e;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_wrlock(drv);
        e = sim_handle_take(&drv->events, (uint64_t)(uintptr_t)hEvent, SIM_TAG_EVENT);
        if (e)
                event_put(drv, e);
        sim_unlock(drv);
        return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* Submits an op naming event h (a record, or a wait) to stream s; while
 * s captures, or for a wait on an event recorded in a capture, the capture
 * takes it instead (flags: CU_EVENT_RECORD_EXTERNAL/WAIT_EXTERNAL). */
static CUresult event_op(CUevent h, CUstream s, bool record, unsigned flags)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_queue *q = NULL;
        struct sim_event *e;
        struct sim_op *op;
        CUcontext ctx;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        op = sim_op_new(NULL, NULL, false);
        if (!op)
                return CUDA_ERROR_OUT_OF_MEMORY;
        sim_rdlock(drv);
        e = event_lookup(drv, h);
        r = e ? sim_stream_enter(drv, s, &ctx, &q) : CUDA_ERROR_INVALID_HANDLE;
        /* A record must be in the event's context; a wait may cross. */
        if (r == CUDA_SUCCESS && record && e->ctx != ctx)
                r = CUDA_ERROR_INVALID_HANDLE;
        if (r == CUDA_SUCCESS) {
                r = record ? sim_capture_record(drv, q, h, flags) : sim_capture_wait(drv, q, h, flags);
                r = r == SIM_CAPTURE_RUN ? CUDA_SUCCESS : r == CUDA_SUCCESS ? SIM_CAPTURE_RUN : r;
        }
        if (r != CUDA_SUCCESS) {
                sim_unlock(drv);
                sim_queue_put(drv, q);
                sim_op_free(op);
                return r == SIM_CAPTURE_RUN ? CUDA_SUCCESS : r;
        }
        event_get(drv, e);
        if (record)
                op->record = e;
        else
                op->wait = e;
        sim_unlock(drv);
        return sim_queue_submit(drv, q, op);
}

SIM_API CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
        /* CU_EVENT_RECORD_EXTERNAL matters only while capturing. */
        if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        return event_op(hEvent, hStream, true, flags);
}

SIM_API CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
        return cuEventRecordWithFlags(hEvent, hStream, 0);
}

SIM_API CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
        if (Flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        return event_op(hEvent, hStream, false, Flags);
}

/* Looks e up with a reference; the caller drops it with event_put. */
static CUresult event_enter(CUevent h, struct sim_driver **ret_drv, struct sim_event **ret)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_event *e;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_rdlock(drv);
        e = event_lookup(drv, h);
        if (e)
                event_get(drv, e);
        sim_unlock(drv);
        if (!e)
                return CUDA_ERROR_INVALID_HANDLE;
        if (sim_capture_event_captured(h)) {
                event_put(drv, e);
                return CUDA_ERROR_CAPTURED_EVENT;
        }
        *ret_drv = drv;
        *ret = e;
        return CUDA_SUCCESS;
}

SIM_API CUresult cuEventQuery(CUevent hEvent)
{
        struct sim_driver *drv;
        struct sim_event *e;
        CUresult r = event_enter(hEvent, &drv, &e);

        if (r != CUDA_SUCCESS)
                return r;
        pthread_mutex_lock(&drv->q_mu);
        r = e->done_gen >= e->record_gen ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
        sim_event_put_locked(e);
        pthread_mutex_unlock(&drv->q_mu);
        return r;
}

SIM_API CUresult cuEventSynchronize(CUevent hEvent)
{
        struct sim_driver *drv;
        struct sim_event *e;
        CUresult r = event_enter(hEvent, &drv, &e);
        struct sim_ctx *c;
        CUcontext ctx;
        uint64_t gen;

        if (r != CUDA_SUCCESS)
                return r;
        ctx = e->ctx;
        pthread_mutex_lock(&drv->q_mu);
        gen = e->record_gen;
        while (e->done_gen < gen)
                pthread_cond_wait(&drv->q_progress, &drv->q_mu);
        sim_event_put_locked(e);
        pthread_mutex_unlock(&drv->q_mu);
        sim_printf_flush(drv, ctx);

        /* The work before it may have faulted. */
        sim_rdlock(drv);
        c = sim_ctx_lookup(drv, ctx);
        r = c ? (CUresult)atomic_load(&c->sticky) : CUDA_SUCCESS;
        sim_unlock(drv);
        return r;
}

static double ts_ms(const struct timespec *t)
{
        return (double)t->tv_sec * 1e3 + (double)t->tv_nsec / 1e6;
}

SIM_API CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_event *a, *b;
        CUresult r = CUDA_SUCCESS;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pMilliseconds)
                return CUDA_ERROR_INVALID_VALUE;
        sim_rdlock(drv);
        a = event_lookup(drv, hStart);
        b = event_lookup(drv, hEnd);
        if (!a || !b) {
                sim_unlock(drv);
                return CUDA_ERROR_INVALID_HANDLE;
        }
        pthread_mutex_lock(&drv->q_mu);
        if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING)
                r = CUDA_ERROR_INVALID_HANDLE;
        else if (a->record_gen == 0 || b->record_gen == 0)
                r = CUDA_ERROR_INVALID_HANDLE;  /* never recorded */
        else if (a->done_gen < a->record_gen || b->done_gen < b->record_gen)
                r = CUDA_ERROR_NOT_READY;
        else
                *pMilliseconds = (float)(ts_ms(&b->done_at) - ts_ms(&a->done_at));
        pthread_mutex_unlock(&drv->q_mu);
        sim_unlock(drv);
        return r;
}

/* The pre-12.8 name; same contract. */
SIM_API CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
        return cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
}
