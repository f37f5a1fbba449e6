/* SPDX-License-Identifier: MIT */
/*
 * Stream capture and graphs in the worker.
 *
 * Capture is the driver's: lupStreamBeginCapture begins a real capture on
 * the real stream, and what the client forwards to that stream (and to
 * streams that join through event waits) is captured by the driver with
 * the driver's errors. The worker keeps one record per capture it began:
 * the stream, the graph's client id, the driver's capture id, and whether
 * the capture is poisoned (the shim refused something on it that the
 * driver would have had to capture: cuStreamEndCapture then answers
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, as for an illegal call).
 *
 * A drain ends every open capture (a synchronisation during a global
 * capture would invalidate it anyway) and throws the partial graph away:
 * after the restore the capture is reported invalidated, and its
 * cuStreamEndCapture answers CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.
 *
 * Each graph exec keeps a private clone of the graph it was instantiated
 * from (the client may change or destroy that graph afterwards): a
 * checkpoint saves the clone's nodes, and a restore instantiates the
 * rebuilt clone again (worker/graphs_ckpt.c).
 */
#define LUP_LOG_CAT LUP_LOGC_GPU
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_graph.h"
#include "log.h"
#include "worker/graphs.h"
#include "worker/session.h"

struct lupw_capture *lupw_capture_find(struct lupw_session *s, CUstream real, uint64_t cid)
{
        for (int i = 0; i < s->graphs.n_caps; i++) {
                struct lupw_capture *c = &s->graphs.caps[i];
                if ((real && c->real == real) || (cid && c->cid == cid))
                        return c;
        }
        return NULL;
}

static void capture_drop(struct lupw_session *s, struct lupw_capture *c)
{
        *c = s->graphs.caps[--s->graphs.n_caps];
}

struct graph_hunt {
        int kind;
        void *real;
        uint64_t id;
};

static void hunt(uint64_t key, uint64_t val, void *ud)
{
        struct graph_hunt *h = ud;
        const struct lupw_handle_ent *e = (const struct lupw_handle_ent *)(uintptr_t)val;
        if (e->kind == h->kind && e->real == h->real)
                h->id = key;
}

/* The client id of the graph a capture builds (found once, then kept). */
static uint64_t capture_graph(struct lupw_session *s, struct lupw_capture *c)
{
        if (!c->graph) {
                struct graph_hunt h = { .kind = LUPW_H_GRAPH, .real = c->g };
                lup_u64map_each(&s->obj.handles, hunt, &h);
                c->graph = h.id;
        }
        return c->graph;
}

uint64_t lupw_capture_graph(struct lupw_session *s, struct lupw_capture *c)
{
        return capture_graph(s, c);
}

static uint64_t stream_id_of(struct lupw_session *s, CUstream real)
{
        uint64_t v = (uint64_t)(uintptr_t)real;
        if (v == 0 || real == CU_STREAM_LEGACY || real == CU_STREAM_PER_THREAD)
                return v;
        return s->cur.parent; /* lupw_stream named it last */
}

CUresult lupw_lupStreamBeginCapture(struct lupw_session *s, CUgraph *graph, CUstream hStream, int mode)
{
        const struct lupw_backend *be = &s->be.fn;
        uint64_t sid = stream_id_of(s, hStream);
        if (s->graphs.n_caps == LUPW_MAX_CAPTURES)
                return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r = be->cuStreamBeginCapture_v2(hStream, (CUstreamCaptureMode)mode);
        if (r != CUDA_SUCCESS)
                return r;
        CUstreamCaptureStatus st;
        cuuint64_t cid = 0;
        CUgraph g = NULL;
        r = be->cuStreamGetCaptureInfo_v3(hStream, &st, &cid, &g, NULL, NULL, NULL);
        if (r != CUDA_SUCCESS || !g) {
                CUgraph tmp = NULL;
                (void)be->cuStreamEndCapture(hStream, &tmp);
                if (tmp)
                        (void)be->cuGraphDestroy(tmp);
                return r != CUDA_SUCCESS ? r : CUDA_ERROR_UNKNOWN;
        }
        s->graphs.caps[s->graphs.n_caps++] =
                (struct lupw_capture){ .real = hStream, .stream = sid, .cid = cid, .g = g, .ctx = s->ctx.bound_id };
        s->obj.prov.flags = LUPW_GRAPH_CAPTURING;
        *graph = g;
        return CUDA_SUCCESS;
}

CUresult lupw_lupStreamEndCapture(struct lupw_session *s, CUstream hStream, uint64_t graph)
{
        const struct lupw_backend *be = &s->be.fn;
        struct lupw_capture *c = lupw_capture_find(s, hStream, 0);
        CUgraph g = NULL;
        CUresult r;
        if (c && graph == 0) /* an invalidated capture: the shim was told no graph */
                graph = capture_graph(s, c);
        else if (c && c->graph == 0)
                c->graph = graph;
        else if (c && c->graph != graph)
                return CUDA_ERROR_INVALID_VALUE; /* the shim names the capture's graph */
        if (c && c->lost) {                      /* ended by a drain */
                capture_drop(s, c);
                return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        }
        r = be->cuStreamEndCapture(hStream, &g);
        if (!c) /* not the origin of a capture this worker began: the driver's answer */
                return r;
        struct lupw_handle_ent *e = lupw_handle_ent(s, LUPW_H_GRAPH, graph);
        bool poisoned = c->poisoned, to_graph = c->to_graph;
        capture_drop(s, c);
        if (r == CUDA_SUCCESS && poisoned) {
                if (!to_graph)
                        (void)be->cuGraphDestroy(g);
                r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        }
        if (r == CUDA_SUCCESS && e) {
                e->real = g;
                e->prov.flags &= ~LUPW_GRAPH_CAPTURING;
        } else if (e && to_graph) { /* the client's graph stays the client's (a node's, the node's) */
                e->prov.flags &= ~LUPW_GRAPH_CAPTURING;
        } else if (e) {
                lupw_nodes_forget(s, graph);
                lupw_handle_del(s, graph);
        }
        return r;
}

/* Node ids -> the driver's nodes (n at most 8). */
static CUresult deps_of(struct lupw_session *s, uint32_t n, const uint64_t *ids, CUgraphNode *ret)
{
        if (n > 8)
                return CUDA_ERROR_INVALID_VALUE;
        for (uint32_t i = 0; i < n; i++) {
                struct lupw_handle_ent *e = lupw_handle_ent(s, LUPW_H_GRAPHNODE, ids[i]);
                if (!e)
                        return CUDA_ERROR_INVALID_VALUE;
                ret[i] = (CUgraphNode)e->real;
        }
        return CUDA_SUCCESS;
}

CUresult lupw_lupCaptureDeps(struct lupw_session *s, CUstream hStream, unsigned int flags, unsigned int n, uint64_t d0,
                             uint64_t d1, uint64_t d2, uint64_t d3, uint64_t d4, uint64_t d5, uint64_t d6, uint64_t d7)
{
        const uint64_t ids[8] = { d0, d1, d2, d3, d4, d5, d6, d7 };
        CUgraphNode deps[8];
        CUresult r = deps_of(s, n, ids, deps);
        if (r != CUDA_SUCCESS)
                return r;
        return s->be.fn.cuStreamUpdateCaptureDependencies_v2(hStream, deps, NULL, n, flags);
}

CUresult lupw_lupStreamBeginCaptureToGraph(struct lupw_session *s, CUgraph hGraph, CUstream hStream, int mode,
                                           unsigned int n, uint64_t d0, uint64_t d1, uint64_t d2, uint64_t d3,
                                           uint64_t d4, uint64_t d5, uint64_t d6, uint64_t d7)
{
        const struct lupw_backend *be = &s->be.fn;
        const uint64_t ids[8] = { d0, d1, d2, d3, d4, d5, d6, d7 };
        uint64_t sid = stream_id_of(s, hStream);
        struct graph_hunt h = { .kind = LUPW_H_GRAPH, .real = hGraph };
        CUgraphNode deps[8];
        lup_u64map_each(&s->obj.handles, hunt, &h);
        struct lupw_handle_ent *ge = lupw_handle_ent(s, LUPW_H_GRAPH, h.id);
        if (!ge || (ge->prov.flags & LUPW_GRAPH_CAPTURING))
                return CUDA_ERROR_INVALID_VALUE;
        if (s->graphs.n_caps == LUPW_MAX_CAPTURES)
                return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r = deps_of(s, n, ids, deps);
        if (r == CUDA_SUCCESS)
                r = be->cuStreamBeginCaptureToGraph(hStream, hGraph, n ? deps : NULL, NULL, n,
                                                    (CUstreamCaptureMode)mode);
        if (r != CUDA_SUCCESS)
                return r;
        CUstreamCaptureStatus st;
        cuuint64_t cid = 0;
        (void)be->cuStreamGetCaptureInfo_v3(hStream, &st, &cid, NULL, NULL, NULL, NULL);
        s->graphs.caps[s->graphs.n_caps++] = (struct lupw_capture){ .real = hStream,
                                                                    .stream = sid,
                                                                    .graph = h.id,
                                                                    .g = hGraph,
                                                                    .cid = cid,
                                                                    .ctx = s->ctx.bound_id,
                                                                    .to_graph = true };
        ge->prov.flags |= LUPW_GRAPH_CAPTURING;
        return CUDA_SUCCESS;
}

CUresult lupw_lupStreamCaptureQuery(struct lupw_session *s, CUstream hStream, int *status, uint64_t *id,
                                    uint64_t *graph, uint64_t *ndeps)
{
        struct lupw_capture *c = lupw_capture_find(s, hStream, 0);
        if (c && (c->poisoned || c->lost)) {
                *status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
                *id = c->cid;
                *graph = capture_graph(s, c);
                *ndeps = 0;
                return CUDA_SUCCESS;
        }
        CUstreamCaptureStatus st;
        cuuint64_t cid = 0;
        size_t n = 0;
        const CUgraphNode *deps = NULL;
        CUresult r = s->be.fn.cuStreamGetCaptureInfo_v3(hStream, &st, &cid, NULL, &deps, NULL, &n);
        if (r != CUDA_SUCCESS)
                return r;
        *status = (int)st;
        *id = st == CU_STREAM_CAPTURE_STATUS_NONE ? 0 : cid;
        *ndeps = st == CU_STREAM_CAPTURE_STATUS_ACTIVE ? n : 0;
        /* the origin's record first: the capture id the driver reports for
         * an invalidated capture need not be the one it began with */
        if (st == CU_STREAM_CAPTURE_STATUS_NONE)
                c = NULL;
        else if (!c)
                c = lupw_capture_find(s, NULL, cid);
        if (c && c->poisoned)
                *status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
        *graph = c ? capture_graph(s, c) : 0;
        return CUDA_SUCCESS;
}

CUresult lupw_lupCaptureMode(struct lupw_session *s, int mode)
{
        CUstreamCaptureMode m = (CUstreamCaptureMode)mode;
        return s->be.fn.cuThreadExchangeStreamCaptureMode(&m);
}

CUresult lupw_lupStreamCaptureInvalidate(struct lupw_session *s, CUstream hStream)
{
        struct lupw_capture *c = lupw_capture_find(s, hStream, 0);
        if (!c) {
                CUstreamCaptureStatus st;
                cuuint64_t cid = 0;
                if (s->be.fn.cuStreamGetCaptureInfo_v3(hStream, &st, &cid, NULL, NULL, NULL, NULL) == CUDA_SUCCESS &&
                    st != CU_STREAM_CAPTURE_STATUS_NONE)
                        c = lupw_capture_find(s, NULL, cid);
        }
        if (c)
                c->poisoned = true;
        return CUDA_SUCCESS;
}

void lupw_captures_abort(struct lupw_session *s)
{
        for (int i = 0; i < s->graphs.n_caps; i++) {
                struct lupw_capture *c = &s->graphs.caps[i];
                CUgraph g = NULL;
                if (c->lost)
                        continue;
                (void)lupw_bind_ctx(s, c->ctx);
                (void)capture_graph(s, c);
                (void)s->be.fn.cuStreamEndCapture(c->real, &g);
                struct lupw_handle_ent *ge = lupw_handle_ent(s, LUPW_H_GRAPH, c->graph);
                if (c->to_graph) { /* the client's graph stays, with what was captured so far */
                        if (ge)
                                ge->prov.flags &= ~LUPW_GRAPH_CAPTURING;
                        c->lost = true;
                        continue;
                }
                if (g)
                        (void)s->be.fn.cuGraphDestroy(g);
                lup_warn("session %s: a stream capture was open at the drain; it is reported invalidated "
                         "after the restore",
                         s->name);
                lupw_nodes_forget(s, c->graph);
                lupw_handle_del(s, c->graph);
                c->lost = true;
        }
}

/* ---- graphs and execs */

CUresult lupw_cuGraphCreate(struct lupw_session *s, CUgraph *phGraph, unsigned int flags)
{
        return s->be.fn.cuGraphCreate(phGraph, flags);
}

CUresult lupw_cuGraphDestroy(struct lupw_session *s, CUgraph hGraph)
{
        struct lupw_handle_ent *e = lupw_handle_ent(s, LUPW_H_GRAPH, s->cur.parent);
        uint64_t gid = s->cur.parent;
        if (e && (e->prov.flags & LUPW_GRAPH_CAPTURING))
                return CUDA_ERROR_INVALID_VALUE; /* still being captured: only cuStreamEndCapture ends it */
        if (e && (e->prov.flags & LUPW_GRAPH_OWNED))
                return CUDA_ERROR_INVALID_VALUE; /* a child graph node's graph is the node's */
        CUresult r = s->be.fn.cuGraphDestroy(hGraph);
        if (r == CUDA_SUCCESS)
                lupw_nodes_forget(s, gid);
        return r;
}

CUresult lupw_cuGraphClone(struct lupw_session *s, CUgraph *phGraphClone, CUgraph originalGraph)
{
        return s->be.fn.cuGraphClone(phGraphClone, originalGraph);
}

struct lupw_exec *lupw_exec_new(struct lupw_session *s, CUgraphExec exec, CUgraph src)
{
        struct lupw_exec *x = calloc(1, sizeof(*x));
        if (!x)
                return NULL;
        x->src = src;
        lup_u64map_init(&x->nodes, LUP_CKPT_MAX_GRAPH_NODES);
        if (lup_u64map_put(&s->graphs.exec_src, (uint64_t)(uintptr_t)exec, (uint64_t)(uintptr_t)x) < 0) {
                lup_u64map_free(&x->nodes);
                free(x);
                return NULL;
        }
        return x;
}

struct lupw_exec *lupw_exec_get(struct lupw_session *s, CUgraphExec exec)
{
        uint64_t v = 0;
        lup_u64map_get(&s->graphs.exec_src, (uint64_t)(uintptr_t)exec, &v);
        return (struct lupw_exec *)(uintptr_t)v;
}

/* Forgets an exec's record and destroys its clone (0: keep the clone). */
static void exec_free(struct lupw_session *s, CUgraphExec exec, bool destroy_src)
{
        uint64_t v;
        if (!lup_u64map_del(&s->graphs.exec_src, (uint64_t)(uintptr_t)exec, &v))
                return;
        struct lupw_exec *x = (struct lupw_exec *)(uintptr_t)v;
        lupw_split_free(s, x);
        if (destroy_src)
                (void)s->be.fn.cuGraphDestroy(x->src);
        lup_u64map_free(&x->nodes);
        free(x);
}

/* The clone's counterpart of every node of graph g (gid), by node id. */
static CUresult map_clone(struct lupw_session *s, struct lupw_exec *x, CUgraph g, uint64_t gid)
{
        const struct lupw_backend *be = &s->be.fn;
        CUgraphNode *v;
        size_t n;
        CUresult r = lupw_graph_nodes(be, g, &v, &n);
        if (r != CUDA_SUCCESS)
                return r;
        for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++) {
                CUgraphNode cn;
                uint64_t id = lupw_node_id(s, v[i], gid);
                if (!id || (r = be->cuGraphNodeFindInClone(&cn, v[i], x->src)) != CUDA_SUCCESS)
                        r = r != CUDA_SUCCESS ? r : CUDA_ERROR_OUT_OF_MEMORY;
                else if (lup_u64map_put(&x->nodes, id, (uint64_t)(uintptr_t)cn) < 0)
                        r = CUDA_ERROR_OUT_OF_MEMORY;
        }
        free(v);
        return r;
}

/* An exec of a clone of g: the exec's nodes are the clone's, which a
 * checkpoint saves and a restore makes again. */
static CUresult instantiate(struct lupw_session *s, CUgraphExec *ret, CUgraph g, uint64_t gid, unsigned long long flags)
{
        const struct lupw_backend *be = &s->be.fn;
        CUgraph src = NULL;
        struct lupw_exec *x = NULL;
        CUresult r = be->cuGraphClone(&src, g);
        if (r != CUDA_SUCCESS)
                return r;
        if ((r = be->cuGraphInstantiateWithFlags(ret, src, flags)) != CUDA_SUCCESS) {
                (void)be->cuGraphDestroy(src);
                return r;
        }
        if (!(x = lupw_exec_new(s, *ret, src)))
                r = CUDA_ERROR_OUT_OF_MEMORY;
        else
                r = map_clone(s, x, g, gid);
        if (r == CUDA_SUCCESS) /* host nodes: segments launched one by one */
                r = lupw_split_build(s, x, flags);
        if (r != CUDA_SUCCESS) {
                if (x)
                        exec_free(s, *ret, false);
                (void)be->cuGraphExecDestroy(*ret);
                (void)be->cuGraphDestroy(src);
        }
        return r;
}

CUresult lupw_cuGraphInstantiateWithFlags(struct lupw_session *s, CUgraphExec *phGraphExec, CUgraph hGraph,
                                          unsigned long long flags)
{
        uint64_t gid = s->cur.parent;
        struct lupw_handle_ent *e = lupw_handle_ent(s, LUPW_H_GRAPH, gid);
        if (e && (e->prov.flags & LUPW_GRAPH_CAPTURING))
                return CUDA_ERROR_INVALID_VALUE;
        if (flags >> 32)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = instantiate(s, phGraphExec, hGraph, gid, flags);
        if (r != CUDA_SUCCESS)
                return r;
        s->obj.prov.parent = gid;
        s->obj.prov.flags = (uint32_t)flags;
        return CUDA_SUCCESS;
}

/* The same, and how many words the exec's host node plan has (0: none). */
CUresult lupw_lupGraphInstantiate(struct lupw_session *s, CUgraphExec *phGraphExec, CUgraph hGraph,
                                  unsigned long long flags, unsigned int *plan)
{
        CUresult r = lupw_cuGraphInstantiateWithFlags(s, phGraphExec, hGraph, flags);
        struct lupw_exec *x = r == CUDA_SUCCESS ? lupw_exec_get(s, *phGraphExec) : NULL;
        *plan = x ? x->n_plan : 0;
        return r;
}

/* cuGraphExecUpdate: the driver judges whether hGraph fits the exec; if it
 * does, the exec behind the client's id becomes one of a clone of hGraph
 * (an exec still running is freed when its work is done). */
static CUresult exec_update(struct lupw_session *s, CUgraphExec hGraphExec, CUgraph hGraph, int *result,
                            uint64_t *errorNode, uint64_t *errorFromNode)
{
        const struct lupw_backend *be = &s->be.fn;
        uint64_t gid = s->cur.parent;
        struct graph_hunt h = { .kind = LUPW_H_GRAPHEXEC, .real = hGraphExec };
        CUgraphExecUpdateResultInfo info;
        memset(&info, 0, sizeof(info));
        struct lupw_exec *x = lupw_exec_get(s, hGraphExec);
        if (!x)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = be->cuGraphExecUpdate_v2(hGraphExec, hGraph, &info);
        *result = (int)info.result;
        *errorNode = lupw_node_lookup(s, info.errorNode);
        *errorFromNode = lupw_node_lookup(s, info.errorFromNode);
        if (r != CUDA_SUCCESS)
                return r;
        lup_u64map_each(&s->obj.handles, hunt, &h); /* the exec's id */
        struct lupw_handle_ent *xe = lupw_handle_ent(s, LUPW_H_GRAPHEXEC, h.id);
        if (!xe)
                return CUDA_ERROR_INVALID_VALUE;
        CUgraphExec ne;
        r = instantiate(s, &ne, hGraph, gid, xe->prov.flags);
        if (r != CUDA_SUCCESS)
                return r;
        struct lupw_exec *nx = lupw_exec_get(s, ne);
        if (nx && (r = lupw_exec_carry_off(s, hGraphExec, x->src, ne, nx->src)) == CUDA_SUCCESS)
                r = lupw_split_carry_enabled(s, nx, ne); /* and into its segments */
        if (nx && r != CUDA_SUCCESS) {
                exec_free(s, ne, true);
                (void)be->cuGraphExecDestroy(ne);
                return r; /* the old exec stays the one in use */
        }
        exec_free(s, hGraphExec, true);
        (void)be->cuGraphExecDestroy(hGraphExec);
        xe->real = ne;
        xe->prov.parent = gid;
        return CUDA_SUCCESS;
}

/* The driver's answer travels in *status, so that the result info comes
 * back with a failure too. */
CUresult lupw_lupGraphExecUpdate(struct lupw_session *s, CUgraphExec hGraphExec, CUgraph hGraph, int *status,
                                 int *result, uint64_t *errorNode, uint64_t *errorFromNode)
{
        *status = (int)exec_update(s, hGraphExec, hGraph, result, errorNode, errorFromNode);
        return CUDA_SUCCESS;
}

CUresult lupw_cuGraphExecGetFlags(struct lupw_session *s, CUgraphExec hGraphExec, uint64_t *flags)
{
        struct graph_hunt h = { .kind = LUPW_H_GRAPHEXEC, .real = hGraphExec };
        lup_u64map_each(&s->obj.handles, hunt, &h);
        struct lupw_handle_ent *xe = lupw_handle_ent(s, LUPW_H_GRAPHEXEC, h.id);
        if (!xe)
                return CUDA_ERROR_INVALID_VALUE;
        *flags = xe->prov.flags & ~(uint64_t)CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
        return CUDA_SUCCESS;
}

CUresult lupw_cuGraphExecDestroy(struct lupw_session *s, CUgraphExec hGraphExec)
{
        CUresult r = s->be.fn.cuGraphExecDestroy(hGraphExec);
        if (r == CUDA_SUCCESS)
                exec_free(s, hGraphExec, true);
        return r;
}

void lupw_graphs_init(struct lupw_session *s)
{
        lup_u64map_init(&s->graphs.exec_src, LUP_MAX_HANDLES);
        lup_u64map_init(&s->graphs.node_ids, LUP_MAX_HANDLES);
}

void lupw_graphs_free(struct lupw_session *s)
{
        lup_u64map_free(&s->graphs.exec_src);
        lup_u64map_free(&s->graphs.node_ids);
        s->graphs.n_caps = 0;
}
