/* SPDX-License-Identifier: MIT */
/*
 * Stream capture. While a stream captures, the work given to it becomes
 * nodes of the capture's graph instead of running: each new node depends
 * on the stream's current dependency set, which it then replaces. Another
 * stream joins the capture by waiting on an event recorded in it (a fork),
 * and the origin stream takes its work back the same way (a join); the
 * capture ends on the origin stream, which must by then have joined every
 * fork (else CUDA_ERROR_STREAM_CAPTURE_UNJOINED).
 *
 * The driver's rules, as its documentation gives them:
 *   - a plain record in a capturing stream makes no node; it remembers the
 *     stream's dependency set in the event, for waits. With
 *     CU_EVENT_RECORD_EXTERNAL it is an event record node; a wait on an
 *     event recorded outside the capture needs CU_EVENT_WAIT_EXTERNAL (an
 *     event wait node), else CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
 *   - the legacy stream never captures; work on it, or a wait for it,
 *     while a blocking stream of its context captures is
 *     CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
 *   - synchronising with or querying a capturing stream, or adding a
 *     callback to it, is CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
 *   - "potentially unsafe" calls (synchronous copies and sets,
 *     cuCtxSynchronize, synchronising the legacy stream, cuMemAlloc,
 *     cuMemFree...) are refused with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
 *     under the capture modes' rules (cuThreadExchangeStreamCaptureMode);
 *   - an illegal call invalidates the capture it concerns: its streams go
 *     on reporting CU_STREAM_CAPTURE_STATUS_INVALIDATED, work given to
 *     them fails with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, and
 *     cuStreamEndCapture ends it with that error and no graph.
 *
 * Everything here is guarded by the graph mutex.
 */
#include <stdlib.h>
#include <string.h>

#include "sim_capture.h"

struct sim_capture *sim_captures;
static atomic_uint ncaptures;
static uint64_t next_capture_id = 1;
static struct cap_event *events;
static size_t nevents, events_cap;
static _Thread_local CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

bool sim_capture_any(void)
{
        return atomic_load_explicit(&ncaptures, memory_order_acquire) != 0;
}

struct cap_member *sim_cap_member_of(struct sim_queue *q, struct sim_capture **ret_c)
{
        for (struct sim_capture *c = sim_captures; c; c = c->next)
                for (size_t i = 0; i < c->nm; i++)
                        if (c->m[i].q == q) {
                                *ret_c = c;
                                return &c->m[i];
                        }
        return NULL;
}

bool sim_cap_blocking(const struct sim_queue *q)
{
        return !q->legacy && !(q->flags & CU_STREAM_NON_BLOCKING);
}

/* For the legacy stream q: invalidates every capture with a blocking
 * stream of q's context; whether there was one. */
static bool legacy_conflict(struct sim_queue *q)
{
        bool found = false;

        if (!q->legacy)
                return false;
        for (struct sim_capture *c = sim_captures; c; c = c->next)
                for (size_t i = 0; i < c->nm; i++)
                        if (c->m[i].q->ctx == q->ctx && sim_cap_blocking(c->m[i].q)) {
                                c->invalid = true;
                                found = true;
                        }
        return found;
}

static CUresult deps_set(struct cap_member *m, struct sim_gnode *const *deps, size_t n)
{
        if (n > m->cap) {
                struct sim_gnode **v = realloc(m->deps, n * sizeof(*v));

                if (!v)
                        return CUDA_ERROR_OUT_OF_MEMORY;
                m->deps = v;
                m->cap = n;
        }
        if (n)
                memmove(m->deps, deps, n * sizeof(*deps));
        m->n = n;
        return CUDA_SUCCESS;
}

/* Adds to m's set the nodes of deps it does not have. */
CUresult sim_cap_deps_union(struct cap_member *m, struct sim_gnode *const *deps, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                bool have = false;

                for (size_t j = 0; j < m->n && !have; j++)
                        have = m->deps[j] == deps[i];
                if (have)
                        continue;
                if (m->n >= SIM_MAX_NODE_DEPS)
                        return CUDA_ERROR_INVALID_VALUE;
                if (m->n == m->cap) {
                        size_t ncap = m->cap ? m->cap * 2 : 4;
                        struct sim_gnode **v = realloc(m->deps, ncap * sizeof(*v));

                        if (!v)
                                return CUDA_ERROR_OUT_OF_MEMORY;
                        m->deps = v;
                        m->cap = ncap;
                }
                m->deps[m->n++] = deps[i];
        }
        return CUDA_SUCCESS;
}

static CUresult member_add(struct sim_driver *drv, struct sim_capture *c, struct sim_queue *q,
                           struct sim_gnode *const *deps, size_t n, struct cap_member **ret)
{
        struct cap_member *m;

        if (c->nm == c->mcap) {
                size_t ncap = c->mcap ? c->mcap * 2 : 4;
                struct cap_member *v = realloc(c->m, ncap * sizeof(*v));

                if (!v)
                        return CUDA_ERROR_OUT_OF_MEMORY;
                c->m = v;
                c->mcap = ncap;
        }
        m = &c->m[c->nm];
        *m = (struct cap_member){ .q = q };
        if (deps_set(m, deps, n) != CUDA_SUCCESS)
                return CUDA_ERROR_OUT_OF_MEMORY;
        c->nm++;
        pthread_mutex_lock(&drv->q_mu);
        q->refs++; /* the capture holds the stream while it is a member */
        pthread_mutex_unlock(&drv->q_mu);
        *ret = m;
        return CUDA_SUCCESS;
}

static struct cap_event *event_find(CUevent h)
{
        for (size_t i = 0; i < nevents; i++)
                if (events[i].h == h)
                        return &events[i];
        return NULL;
}

static void event_forget(struct cap_event *e)
{
        free(e->deps);
        *e = events[--nevents];
}

static CUresult event_remember(CUevent h, struct sim_capture *c, struct sim_gnode *const *deps, size_t n)
{
        struct cap_event *e = event_find(h);
        struct sim_gnode **v = malloc((n ? n : 1) * sizeof(*v));

        if (!v)
                return CUDA_ERROR_OUT_OF_MEMORY;
        if (n)
                memcpy(v, deps, n * sizeof(*v));
        if (!e) {
                if (nevents == events_cap) {
                        size_t ncap = events_cap ? events_cap * 2 : 16;
                        struct cap_event *ev = realloc(events, ncap * sizeof(*ev));

                        if (!ev) {
                                free(v);
                                return CUDA_ERROR_OUT_OF_MEMORY;
                        }
                        events = ev;
                        events_cap = ncap;
                }
                e = &events[nevents++];
        } else {
                free(e->deps);
        }
        *e = (struct cap_event){ .h = h, .c = c, .deps = v, .n = n };
        return CUDA_SUCCESS;
}

/* A new node doing p after m's set, which becomes just that node. */
static CUresult capture_node(struct sim_capture *c, struct cap_member *m, struct sim_nparams *p)
{
        struct sim_gnode *n;
        CUresult r = CUDA_SUCCESS;

        if (p->type == CU_GRAPH_NODE_TYPE_KERNEL && !p->u.kernel.kp)
                r = sim_nparams_kernel_ptrs(p);
        if (r == CUDA_SUCCESS)
                r = sim_graph_add(c->g, m->deps, m->n, p, &n);

        if (r != CUDA_SUCCESS)
                return r;
        r = deps_set(m, &n, 1);
        if (r != CUDA_SUCCESS)
                c->invalid = true; /* the node is in, the stream lost track */
        return r;
}

CUresult sim_capture_work(struct sim_driver *drv, struct sim_queue *q, struct sim_nparams *p)
{
        struct sim_capture *c;
        struct cap_member *m;
        CUresult r;

        (void)drv;
        if (!sim_capture_any())
                return SIM_CAPTURE_RUN;
        sim_graph_lock();
        m = sim_cap_member_of(q, &c);
        if (!m)
                r = legacy_conflict(q) ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : SIM_CAPTURE_RUN;
        else if (c->invalid)
                r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        else
                r = capture_node(c, m, p);
        /* Refused work is dropped (a node made keeps p, even when the
         * stream lost track of it). */
        if (r != CUDA_SUCCESS && r != SIM_CAPTURE_RUN && !(m && c->invalid && r == CUDA_ERROR_OUT_OF_MEMORY))
                sim_nparams_release(NULL, p);
        sim_graph_unlock();
        return r;
}

CUresult sim_capture_record(struct sim_driver *drv, struct sim_queue *q, CUevent h, unsigned flags)
{
        struct sim_nparams p = { .type = CU_GRAPH_NODE_TYPE_EVENT_RECORD, .ctx = q->ctx, .u.event = h };
        struct sim_capture *c;
        struct cap_member *m;
        struct cap_event *e;
        CUresult r = CUDA_SUCCESS;

        (void)drv;
        if (!sim_capture_any())
                return SIM_CAPTURE_RUN;
        sim_graph_lock();
        m = sim_cap_member_of(q, &c);
        if (!m) {
                /* Recorded outside: no longer a captured event. */
                if ((e = event_find(h)) != NULL)
                        event_forget(e);
                r = legacy_conflict(q) ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : SIM_CAPTURE_RUN;
        } else if (c->invalid) {
                r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        } else {
                if (flags & CU_EVENT_RECORD_EXTERNAL)
                        r = capture_node(c, m, &p);
                if (r == CUDA_SUCCESS)
                        r = event_remember(h, c, m->deps, m->n);
        }
        sim_graph_unlock();
        return r;
}

static void invalidate(struct sim_capture *c)
{
        if (c)
                c->invalid = true;
}

CUresult sim_capture_wait(struct sim_driver *drv, struct sim_queue *q, CUevent h, unsigned flags)
{
        struct sim_nparams p = { .type = CU_GRAPH_NODE_TYPE_WAIT_EVENT, .ctx = q->ctx, .u.event = h };
        struct sim_capture *c = NULL;
        struct cap_member *m;
        struct cap_event *e;
        CUresult r;

        if (!sim_capture_any())
                return SIM_CAPTURE_RUN;
        sim_graph_lock();
        m = sim_cap_member_of(q, &c);
        e = event_find(h);
        if (m && (flags & CU_EVENT_WAIT_EXTERNAL))
                e = NULL; /* an external wait is a node, whatever the event */
        if (e && !m && q->legacy) {
                /* The legacy stream cannot join a capture. */
                invalidate(e->c);
                r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
        } else if (e && !m) {
                /* A fork: q joins the capture after the event's set. */
                r = e->c->invalid ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : member_add(drv, e->c, q, e->deps, e->n, &m);
        } else if (e && c != e->c) {
                /* Two captures would merge. */
                invalidate(c);
                invalidate(e->c);
                r = CUDA_ERROR_STREAM_CAPTURE_MERGE;
        } else if (e) {
                /* A join within the capture. */
                r = c->invalid ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : sim_cap_deps_union(m, e->deps, e->n);
        } else if (!m) {
                r = legacy_conflict(q) ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : SIM_CAPTURE_RUN;
        } else if (c->invalid) {
                r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        } else if (flags & CU_EVENT_WAIT_EXTERNAL) {
                r = capture_node(c, m, &p);
        } else {
                /* An event from outside the capture: only an external
                 * wait may cross its boundary. */
                invalidate(c);
                r = CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
        }
        sim_graph_unlock();
        return r;
}

CUresult sim_capture_forbid(struct sim_driver *drv, struct sim_queue *q)
{
        struct sim_capture *c;
        CUresult r;

        (void)drv;
        if (!sim_capture_any())
                return SIM_CAPTURE_RUN;
        sim_graph_lock();
        if (sim_cap_member_of(q, &c)) {
                invalidate(c);
                r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        } else {
                r = legacy_conflict(q) ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : SIM_CAPTURE_RUN;
        }
        sim_graph_unlock();
        return r;
}

CUresult sim_capture_unsafe_call(void)
{
        pthread_t self = pthread_self();
        CUresult r = CUDA_SUCCESS;

        if (!sim_capture_any() || thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
                return CUDA_SUCCESS;
        sim_graph_lock();
        for (struct sim_capture *c = sim_captures; c; c = c->next) {
                bool mine = pthread_equal(c->thread, self);
                bool forbids =
                        mine ? c->mode != CU_STREAM_CAPTURE_MODE_RELAXED
                             : thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL && c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL;

                if (forbids) {
                        c->invalid = true;
                        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
                }
        }
        sim_graph_unlock();
        return r;
}

bool sim_capture_event_captured(CUevent h)
{
        bool found;

        if (!sim_capture_any())
                return false;
        sim_graph_lock();
        found = event_find(h) != NULL;
        sim_graph_unlock();
        return found;
}

/* ---- the API ---- */

static bool mode_valid(CUstreamCaptureMode mode)
{
        return mode == CU_STREAM_CAPTURE_MODE_GLOBAL || mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL ||
               mode == CU_STREAM_CAPTURE_MODE_RELAXED;
}

SIM_API CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
        CUstreamCaptureMode old = thread_mode;

        if (!sim_driver_get())
                return CUDA_ERROR_NOT_INITIALIZED;
        /* any value is taken, as driver 580 takes it */
        if (!mode)
                return CUDA_ERROR_INVALID_VALUE;
        thread_mode = *mode;
        *mode = old;
        return CUDA_SUCCESS;
}

/* The queue of stream h with a reference, the lock not held. */
CUresult sim_cap_stream_queue(CUstream h, struct sim_driver **ret_drv, struct sim_queue **ret_q)
{
        struct sim_driver *drv = sim_driver_get();
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_rdlock(drv);
        r = sim_stream_enter(drv, h, NULL, ret_q);
        sim_unlock(drv);
        *ret_drv = drv;
        return r;
}

static CUresult begin(CUstream h, CUgraph hGraph, const CUgraphNode *deps, const CUgraphEdgeData *edges, size_t n,
                      CUstreamCaptureMode mode)
{
        struct sim_driver *drv;
        struct sim_queue *q;
        struct sim_capture *c, *other;
        struct cap_member *m;
        CUresult r;

        if (!mode_valid(mode) || (n && !deps))
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        for (size_t i = 0; edges && i < n; i++)
                if (edges[i].from_port || edges[i].to_port || edges[i].type)
                        return CUDA_ERROR_INVALID_VALUE;
        r = sim_cap_stream_queue(h, &drv, &q);
        if (r != CUDA_SUCCESS)
                return r;
        if (q->legacy) {
                sim_queue_put(drv, q);
                return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* the legacy stream cannot capture */
        }
        c = calloc(1, sizeof(*c));
        if (!c) {
                sim_queue_put(drv, q);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        c->to_graph = hGraph != NULL; /* the caller's graph is never freed here */
        sim_graph_lock();
        if (sim_cap_member_of(q, &other))
                r = CUDA_ERROR_ILLEGAL_STATE;
        else if (atomic_load(&ncaptures) >= SIM_MAX_CAPTURES)
                r = CUDA_ERROR_OUT_OF_MEMORY;
        else if (hGraph && (!(c->g = sim_graph_lookup(hGraph)) || c->g->owner))
                r = CUDA_ERROR_INVALID_VALUE; /* not into a child graph */
        else if (!hGraph && !(c->g = sim_graph_new(false)))
                r = CUDA_ERROR_OUT_OF_MEMORY;
        if (r == CUDA_SUCCESS) {
                r = member_add(drv, c, q, NULL, 0, &m);
        }
        for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++) {
                struct sim_gnode *d = sim_node_lookup(deps[i]);

                r = d && d->graph == c->g ? sim_cap_deps_union(m, &d, 1) : CUDA_ERROR_INVALID_VALUE;
        }
        if (r == CUDA_SUCCESS) {
                c->g->captures++;
                c->id = next_capture_id++;
                c->mode = mode;
                c->thread = pthread_self();
                c->origin = q;
                c->next = sim_captures;
                sim_captures = c;
                atomic_fetch_add(&ncaptures, 1);
        } else {
                if (c->nm) {
                        free(c->m[0].deps);
                        pthread_mutex_lock(&drv->q_mu);
                        q->refs--; /* the member's; ours is dropped below */
                        pthread_mutex_unlock(&drv->q_mu);
                }
                if (c->g && !c->to_graph)
                        sim_graph_free(NULL, c->g);
                free(c->m);
                free(c);
        }
        sim_graph_unlock();
        sim_queue_put(drv, q);
        return r;
}

SIM_API CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
        return begin(hStream, NULL, NULL, NULL, 0, mode);
}

/* The CUDA 10.0 form, before modes: a global capture. */
SIM_API CUresult cuStreamBeginCapture(CUstream hStream)
{
        return begin(hStream, NULL, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

SIM_API CUresult cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
                                             const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                             CUstreamCaptureMode mode)
{
        if (!hGraph)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        return begin(hStream, hGraph, dependencies, dependencyData, numDependencies, mode);
}

/* Whether every member's set lies behind the origin's: the forks joined. */
static bool all_joined(struct sim_capture *c)
{
        struct sim_graph *g = c->g;
        struct sim_gnode **stack;
        struct cap_member *o = NULL;
        size_t top = 0;
        bool ok = true;

        for (size_t i = 0; i < c->nm; i++)
                if (c->m[i].q == c->origin)
                        o = &c->m[i];
        stack = malloc((g->n ? g->n : 1) * sizeof(*stack));
        if (!stack || !o) {
                free(stack);
                return false;
        }
        for (size_t i = 0; i < g->n; i++)
                g->nodes[i]->mark = 0;
        for (size_t i = 0; i < o->n; i++)
                if (!o->deps[i]->mark) {
                        o->deps[i]->mark = 1;
                        stack[top++] = o->deps[i];
                }
        while (top) {
                struct sim_gnode *n = stack[--top];

                for (size_t j = 0; j < n->ndeps; j++)
                        if (!n->deps[j]->mark) {
                                n->deps[j]->mark = 1;
                                stack[top++] = n->deps[j];
                        }
        }
        for (size_t i = 0; i < c->nm && ok; i++)
                for (size_t j = 0; j < c->m[i].n && ok; j++)
                        ok = c->m[i].deps[j]->mark == 1;
        free(stack);
        return ok;
}

/* Ends c: its streams stop capturing, its events are forgotten. Graph
 * mutex held. */
static void capture_end(struct sim_driver *drv, struct sim_capture *c)
{
        for (struct sim_capture **pp = &sim_captures; *pp; pp = &(*pp)->next)
                if (*pp == c) {
                        *pp = c->next;
                        break;
                }
        atomic_fetch_sub(&ncaptures, 1);
        c->g->captures--;
        for (size_t i = nevents; i-- > 0;)
                if (events[i].c == c)
                        event_forget(&events[i]);
        for (size_t i = 0; i < c->nm; i++) {
                free(c->m[i].deps);
                free(c->m[i].hdeps);
                free(c->m[i].edges);
                sim_queue_put(drv, c->m[i].q);
        }
        free(c->m);
        free(c);
}

SIM_API CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
        struct sim_driver *drv;
        struct sim_capture *c;
        struct sim_queue *q;
        CUresult r;

        if (!phGraph)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = sim_cap_stream_queue(hStream, &drv, &q);
        if (r != CUDA_SUCCESS)
                return r;
        sim_graph_lock();
        if (!sim_cap_member_of(q, &c))
                r = CUDA_ERROR_ILLEGAL_STATE;
        else if (c->origin != q)
                r = CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
        else if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(c->thread, pthread_self()))
                r = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
        else if (c->invalid)
                r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        else if (!all_joined(c))
                r = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
        if (r == CUDA_SUCCESS) {
                *phGraph = sim_graph_handle(c->g);
                capture_end(drv, c);
        } else if (r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED || r == CUDA_ERROR_STREAM_CAPTURE_UNJOINED) {
                /* The capture ends, and its graph with it. */
                struct sim_graph *g = c->to_graph ? NULL : c->g;

                *phGraph = NULL;
                capture_end(drv, c);
                sim_graph_free(NULL, g);
        }
        sim_graph_unlock();
        sim_queue_put(drv, q);
        return r;
}
