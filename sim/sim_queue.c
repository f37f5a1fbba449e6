/* SPDX-License-Identifier: MIT */
/*
 * The stream engine: one FIFO and one thread per stream, and the ordering
 * rules between them.
 *
 * Each context has a legacy stream (the NULL stream, CU_STREAM_LEGACY and,
 * here, CU_STREAM_PER_THREAD), itself a queue. CUDA's implicit
 * synchronisation is kept without ever blocking the submitting thread:
 *   - an op for the legacy stream waits, on the legacy thread, until every
 *     blocking stream of the context has finished what it had been given;
 *   - an op for a blocking stream waits, on that stream's thread, until
 *     the legacy stream has finished what it had been given.
 * Each such wait is a (queue, count) pair taken at submission. Streams
 * made with CU_STREAM_NON_BLOCKING take part in neither rule.
 *
 * A thread runs an op without q_mu held. Memory work runs under the
 * registry lock shared, after checking that the context is alive and has
 * no sticky error; a failure becomes the context's sticky error, which is
 * how a kernel's illegal address reaches every later call.
 *
 * Threads are detached and hold a reference to their queue; a destroyed
 * stream's thread finishes the queue's work and exits. The library is
 * linked -z nodelete so that dlclose() cannot unmap code a thread runs.
 */
#include <errno.h>
#include <stdlib.h>

#include "sim_internal.h"

struct sim_op *sim_op_new(CUresult (*exec)(struct sim_driver *, void *), void *arg, bool needs_lock)
{
        struct sim_op *op = calloc(1, sizeof(*op));

        if (!op) {
                free(arg);
                return NULL;
        }
        op->exec = exec;
        op->arg = arg;
        op->needs_lock = needs_lock;
        return op;
}

void sim_op_free(struct sim_op *op)
{
        if (!op)
                return;
        free(op->arg);
        free(op->deps);
        free(op);
}

CUcontext sim_queue_ctx(const struct sim_queue *q)
{
        return q->ctx;
}

/* q_mu held. */
static void queue_put_locked(struct sim_driver *drv, struct sim_queue *q)
{
        if (--q->refs > 0)
                return;
        for (struct sim_queue **pp = &drv->queues; *pp; pp = &(*pp)->next_all)
                if (*pp == q) {
                        *pp = q->next_all;
                        break;
                }
        pthread_cond_destroy(&q->work);
        free(q);
}

void sim_queue_put(struct sim_driver *drv, struct sim_queue *q)
{
        if (!q)
                return;
        pthread_mutex_lock(&drv->q_mu);
        queue_put_locked(drv, q);
        pthread_mutex_unlock(&drv->q_mu);
}

static bool queue_blocking(const struct sim_queue *q)
{
        return !q->legacy && !(q->flags & CU_STREAM_NON_BLOCKING);
}

static void now(struct timespec *ts)
{
        clock_gettime(CLOCK_MONOTONIC, ts);
}

/* Runs an exec op: the context must be alive and healthy, and its
 * failure becomes the context's sticky error. */
static void run_exec(struct sim_driver *drv, struct sim_queue *q, struct sim_op *op)
{
        CUresult r;

        sim_rdlock(drv);
        if (sim_ctx_status(drv, q->ctx, NULL) != CUDA_SUCCESS) {
                sim_unlock(drv);
                return;
        }
        if (op->needs_lock) {
                r = op->exec(drv, op->arg);
                if (r != CUDA_SUCCESS)
                        sim_ctx_set_sticky(drv, q->ctx, r);
                sim_unlock(drv);
                return;
        }
        sim_unlock(drv);
        r = op->exec(drv, op->arg);
        if (r != CUDA_SUCCESS) {
                sim_rdlock(drv);
                sim_ctx_set_sticky(drv, q->ctx, r);
                sim_unlock(drv);
        }
}

static void run_callback(struct sim_driver *drv, struct sim_queue *q, struct sim_op *op)
{
        CUresult status;

        sim_rdlock(drv);
        status = sim_ctx_status(drv, q->ctx, NULL);
        sim_unlock(drv);
        op->callback(op->stream_handle, status, op->user_data);
}

static void *queue_thread(void *arg)
{
        struct sim_queue *q = arg;
        struct sim_driver *drv = q->drv;

        pthread_mutex_lock(&drv->q_mu);
        for (;;) {
                struct sim_op *op;

                while (!q->head && !q->stop)
                        pthread_cond_wait(&q->work, &drv->q_mu);
                op = q->head;
                if (!op)
                        break;  /* stopped and drained */
                q->head = op->next;
                if (!q->head)
                        q->tail = NULL;

                for (unsigned i = 0; i < op->ndeps; i++)
                        while (op->deps[i].q->completed < op->deps[i].seq)
                                pthread_cond_wait(&drv->q_progress, &drv->q_mu);
                if (op->wait)
                        while (op->wait->done_gen < op->gen)
                                pthread_cond_wait(&drv->q_progress, &drv->q_mu);

                if (!op->record && !op->wait) {
                        pthread_mutex_unlock(&drv->q_mu);
                        if (op->host_fn)
                                op->host_fn(op->user_data);
                        else if (op->callback)
                                run_callback(drv, q, op);
                        else if (op->exec)
                                run_exec(drv, q, op);
                        pthread_mutex_lock(&drv->q_mu);
                }

                if (op->record) {
                        if (op->gen > op->record->done_gen) {
                                op->record->done_gen = op->gen;
                                now(&op->record->done_at);
                        }
                        sim_event_put_locked(op->record);
                }
                if (op->wait)
                        sim_event_put_locked(op->wait);
                for (unsigned i = 0; i < op->ndeps; i++)
                        queue_put_locked(drv, op->deps[i].q);
                q->completed++;
                q->queued--;
                pthread_cond_broadcast(&drv->q_progress);
                pthread_mutex_unlock(&drv->q_mu);
                sim_op_free(op);
                pthread_mutex_lock(&drv->q_mu);
        }
        q->thread_running = false;
        queue_put_locked(drv, q);
        pthread_mutex_unlock(&drv->q_mu);
        return NULL;
}

/* Starts q's thread if it has work and none (first use, or after a
 * fork). q_mu held. */
static int queue_kick_locked(struct sim_driver *drv, struct sim_queue *q)
{
        pthread_attr_t attr;
        pthread_t th;
        int e;

        if (q->thread_running || !q->head)
                return 0;
        if (pthread_attr_init(&attr) != 0)
                return -ENOMEM;
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        q->refs++;
        e = pthread_create(&th, &attr, queue_thread, q);
        pthread_attr_destroy(&attr);
        if (e != 0) {
                q->refs--;
                return -e;
        }
        q->thread_running = true;
        return 0;
}

static struct sim_queue *queue_new_locked(struct sim_driver *drv, CUcontext ctx, unsigned flags,
                                          int priority, bool legacy)
{
        struct sim_queue *q = calloc(1, sizeof(*q));

        if (!q)
                return NULL;
        if (pthread_cond_init(&q->work, NULL) != 0) {
                free(q);
                return NULL;
        }
        q->drv = drv;
        q->ctx = ctx;
        q->flags = flags;
        q->priority = priority;
        q->legacy = legacy;
        q->refs = 1;
        q->next_all = drv->queues;
        drv->queues = q;
        return q;
}

struct sim_queue *sim_queue_create(struct sim_driver *drv, CUcontext ctx, unsigned flags, int priority)
{
        struct sim_queue *q;

        pthread_mutex_lock(&drv->q_mu);
        q = queue_new_locked(drv, ctx, flags, priority, false);
        pthread_mutex_unlock(&drv->q_mu);
        return q;
}

/* The live legacy queue of ctx, or NULL. q_mu held. */
static struct sim_queue *legacy_of_locked(struct sim_driver *drv, CUcontext ctx)
{
        for (struct sim_queue *o = drv->queues; o; o = o->next_all)
                if (o->legacy && o->ctx == ctx && !o->stop)
                        return o;
        return NULL;
}

CUresult sim_queue_get(struct sim_driver *drv, CUstream h, CUcontext ctx, struct sim_queue **ret)
{
        struct sim_queue *q;

        if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
                pthread_mutex_lock(&drv->q_mu);
                q = legacy_of_locked(drv, ctx);
                if (!q)
                        q = queue_new_locked(drv, ctx, 0, 0, true);
                if (q)
                        q->refs++;
                pthread_mutex_unlock(&drv->q_mu);
                if (!q)
                        return CUDA_ERROR_OUT_OF_MEMORY;
                *ret = q;
                return CUDA_SUCCESS;
        }
        q = sim_stream_lookup(drv, h);
        if (!q)
                return CUDA_ERROR_INVALID_HANDLE;
        pthread_mutex_lock(&drv->q_mu);
        q->refs++;
        pthread_mutex_unlock(&drv->q_mu);
        *ret = q;
        return CUDA_SUCCESS;
}

/* Adds a dependency on o's work so far, if it has any pending. */
static int add_dep_locked(struct sim_op *op, struct sim_queue *o, unsigned *cap)
{
        if (o->completed >= o->submitted)
                return 0;
        if (op->ndeps == *cap) {
                unsigned ncap = *cap ? *cap * 2 : 4;
                struct sim_dep *d = realloc(op->deps, ncap * sizeof(*d));

                if (!d)
                        return -ENOMEM;
                op->deps = d;
                *cap = ncap;
        }
        op->deps[op->ndeps++] = (struct sim_dep){ .q = o, .seq = o->submitted };
        o->refs++;
        return 0;
}

static int implicit_deps_locked(struct sim_driver *drv, struct sim_queue *q, struct sim_op *op)
{
        unsigned cap = 0;

        for (struct sim_queue *o = drv->queues; o; o = o->next_all) {
                bool wanted = q->legacy ? queue_blocking(o) : queue_blocking(q) && o->legacy;

                if (o != q && o->ctx == q->ctx && wanted && add_dep_locked(op, o, &cap) < 0)
                        return -ENOMEM;
        }
        return 0;
}

CUresult sim_queue_submit(struct sim_driver *drv, struct sim_queue *q, struct sim_op *op)
{
        CUresult r = CUDA_SUCCESS;

        pthread_mutex_lock(&drv->q_mu);
        while (!q->stop && q->queued >= SIM_MAX_QUEUE_OPS) {
                (void)queue_kick_locked(drv, q);
                pthread_cond_wait(&drv->q_progress, &drv->q_mu);
        }
        if (q->stop) {
                r = CUDA_ERROR_INVALID_HANDLE;  /* destroyed meanwhile */
                goto out_drop;
        }
        if (implicit_deps_locked(drv, q, op) < 0) {
                r = CUDA_ERROR_OUT_OF_MEMORY;
                goto out_drop;
        }
        op->next = NULL;
        if (q->tail)
                q->tail->next = op;
        else
                q->head = op;
        q->tail = op;
        if (queue_kick_locked(drv, q) < 0) {
                /* No thread to be had. None runs, so op is still the
                 * tail: take it back out. */
                struct sim_op *prev = NULL;

                for (struct sim_op *o = q->head; o != op; o = o->next)
                        prev = o;
                if (prev)
                        prev->next = NULL;
                else
                        q->head = NULL;
                q->tail = prev;
                r = CUDA_ERROR_OUT_OF_MEMORY;
                goto out_drop;
        }
        /* Generations are taken here, once nothing can fail. */
        if (op->record)
                op->gen = ++op->record->record_gen;
        if (op->wait)
                op->gen = op->wait->record_gen;
        q->submitted++;
        q->queued++;
        pthread_cond_signal(&q->work);
        queue_put_locked(drv, q);
        pthread_mutex_unlock(&drv->q_mu);
        return CUDA_SUCCESS;

out_drop:
        for (unsigned i = 0; i < op->ndeps; i++)
                queue_put_locked(drv, op->deps[i].q);
        op->ndeps = 0;
        if (op->record)
                sim_event_put_locked(op->record);
        if (op->wait)
                sim_event_put_locked(op->wait);
        queue_put_locked(drv, q);
        pthread_mutex_unlock(&drv->q_mu);
        sim_op_free(op);
        return r;
}

CUresult sim_queue_submit_exec(struct sim_driver *drv, struct sim_queue *q,
                               CUresult (*exec)(struct sim_driver *, void *), void *arg, bool needs_lock)
{
        struct sim_op *op = sim_op_new(exec, arg, needs_lock);

        if (!op) {
                sim_queue_put(drv, q);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        return sim_queue_submit(drv, q, op);
}

/* Whether q has pending work, starting its thread if it has none. */
static bool busy_kick_locked(struct sim_driver *drv, struct sim_queue *q)
{
        if (q->completed >= q->submitted)
                return false;
        (void)queue_kick_locked(drv, q);
        return true;
}

/* q's own work, and for a legacy queue that of its blocking streams. */
static bool queue_busy_locked(struct sim_driver *drv, struct sim_queue *q)
{
        if (busy_kick_locked(drv, q))
                return true;
        if (!q->legacy)
                return false;
        for (struct sim_queue *o = drv->queues; o; o = o->next_all)
                if (o->ctx == q->ctx && queue_blocking(o) && busy_kick_locked(drv, o))
                        return true;
        return false;
}

void sim_queue_wait_idle(struct sim_driver *drv, struct sim_queue *q)
{
        pthread_mutex_lock(&drv->q_mu);
        while (queue_busy_locked(drv, q))
                pthread_cond_wait(&drv->q_progress, &drv->q_mu);
        pthread_mutex_unlock(&drv->q_mu);
}

bool sim_queue_busy(struct sim_driver *drv, struct sim_queue *q)
{
        bool busy;

        pthread_mutex_lock(&drv->q_mu);
        busy = queue_busy_locked(drv, q);
        pthread_mutex_unlock(&drv->q_mu);
        return busy;
}

/* Any queue of ctx matching (legacy or blocking when only_legacy) busy. */
static bool ctx_busy_locked(struct sim_driver *drv, CUcontext ctx, bool only_legacy)
{
        for (struct sim_queue *o = drv->queues; o; o = o->next_all)
                if (o->ctx == ctx && (!only_legacy || o->legacy || queue_blocking(o)) &&
                    busy_kick_locked(drv, o))
                        return true;
        return false;
}

void sim_ctx_wait_legacy(struct sim_driver *drv, CUcontext ctx)
{
        pthread_mutex_lock(&drv->q_mu);
        while (ctx_busy_locked(drv, ctx, true))
                pthread_cond_wait(&drv->q_progress, &drv->q_mu);
        pthread_mutex_unlock(&drv->q_mu);
}

void sim_ctx_wait_all(struct sim_driver *drv, CUcontext ctx)
{
        pthread_mutex_lock(&drv->q_mu);
        while (ctx_busy_locked(drv, ctx, false))
                pthread_cond_wait(&drv->q_progress, &drv->q_mu);
        pthread_mutex_unlock(&drv->q_mu);
}

/* q_mu held. */
static void queue_stop_locked(struct sim_driver *drv, struct sim_queue *q)
{
        q->stop = true;
        pthread_cond_signal(&q->work);
        queue_put_locked(drv, q);       /* the owner's reference */
}

void sim_queue_stop(struct sim_driver *drv, struct sim_queue *q)
{
        pthread_mutex_lock(&drv->q_mu);
        queue_stop_locked(drv, q);
        pthread_mutex_unlock(&drv->q_mu);
}

void sim_queue_stop_ctx_legacy(struct sim_driver *drv, CUcontext ctx)
{
        struct sim_queue *q;

        pthread_mutex_lock(&drv->q_mu);
        while ((q = legacy_of_locked(drv, ctx)) != NULL)
                queue_stop_locked(drv, q);
        pthread_mutex_unlock(&drv->q_mu);
}

/* ---- fork ---- */

static struct sim_driver *fork_drv;

static void fork_prepare(void)
{
        /* No stream thread may be inside either lock when the process is
         * copied: the child would inherit them held. */
        sim_wrlock(fork_drv);
        pthread_mutex_lock(&fork_drv->printf_mu);
        pthread_mutex_lock(&fork_drv->q_mu);
}

static void fork_parent(void)
{
        pthread_mutex_unlock(&fork_drv->q_mu);
        pthread_mutex_unlock(&fork_drv->printf_mu);
        sim_unlock(fork_drv);
}

static void fork_child(void)
{
        struct sim_driver *drv = fork_drv;
        struct sim_queue *q, *next;

        /* The threads did not come along: forget them, and let the next
         * submit or wait start new ones for whatever work is queued. */
        pthread_mutex_init(&drv->q_mu, NULL);
        pthread_cond_init(&drv->q_progress, NULL);
        pthread_mutex_init(&drv->printf_mu, NULL);
        sim_lock_reinit_after_fork(drv);
        for (q = drv->queues; q; q = next) {
                next = q->next_all;
                pthread_cond_init(&q->work, NULL);
                if (q->thread_running) {
                        q->thread_running = false;
                        queue_put_locked(drv, q);
                }
        }
}

void sim_queue_atfork(struct sim_driver *drv)
{
        fork_drv = drv;
        pthread_atfork(fork_prepare, fork_parent, fork_child);
}
