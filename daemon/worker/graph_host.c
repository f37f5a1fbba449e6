/* SPDX-License-Identifier: MIT */
/*
 * Graph host nodes in the worker.
 *
 * A host node is a real host node of the driver whose function is
 * lupw_host_noop and whose userData is a 64-bit token the shim minted (the
 * shim keeps token -> the client's function and data). Node types,
 * topology, clones and exec updates are then the driver's, unchanged.
 *
 * The client's functions must run in the client, in graph order. An exec
 * whose graph holds host nodes is split at instantiation into a plan of
 * levels 0..K: a node that is not a host node belongs to segment j, where
 * j is the largest number of host nodes on any path from a root to it
 * (the node excluded); a host node at level j runs after segment j and
 * before segment j+1. Each non-empty segment is an exec of its own (a
 * clone of the exec's clone with every other node destroyed: the edges
 * between kept nodes stay, and no path between two nodes of a segment
 * leaves it). The shim launches segment 0, waits for the stream, runs the
 * host functions of level 0, launches segment 1, and so on.
 *
 * The plan the shim reads (lupGraphHostPlan), per level: a word
 * (1 if the segment exists | the number of host nodes << 1), then per host
 * node, in increasing node id (then token), its node id (0 for one from a
 * child graph) and its token.
 *
 * Host nodes inside child graph nodes are brought up into the exec's clone
 * first (worker/graph_flatten.c).
 */
#define LUP_LOG_CAT LUP_LOGC_GPU
#include <stdlib.h>
#include <string.h>

#include "ckpt_graph.h"
#include "log.h"
#include "worker/graphs.h"
#include "worker/session.h"

void lupw_host_noop(void *token)
{
        (void)token;
}

static struct lupw_exec *exec_of(struct lupw_session *s, CUgraphExec e)
{
        uint64_t v = 0;
        lup_u64map_get(&s->graphs.exec_src, (uint64_t)(uintptr_t)e, &v);
        return (struct lupw_exec *)(uintptr_t)v;
}

void lupw_split_free(struct lupw_session *s, struct lupw_exec *x)
{
        for (uint32_t j = 0; j < x->n_segs; j++) {
                if (x->segs[j])
                        (void)s->be.fn.cuGraphExecDestroy(x->segs[j]);
                if (x->seg_graphs[j])
                        (void)s->be.fn.cuGraphDestroy(x->seg_graphs[j]);
        }
        free(x->segs);
        free(x->seg_graphs);
        free(x->plan);
        x->segs = NULL;
        x->seg_graphs = NULL;
        x->plan = NULL;
        x->n_segs = x->n_plan = 0;
}

/* What a split is computed from: the clone's nodes, edges, and per node
 * whether it is a host node and its level. */
struct split {
        size_t n, ne;
        CUgraphNode *nodes, *from, *to;
        uint8_t *host;
        uint32_t *level;
        uint32_t n_levels, n_host;
        bool children; /* it has child graph nodes */
};

static void split_done(struct split *sp)
{
        free(sp->nodes);
        free(sp->from);
        free(sp->to);
        free(sp->host);
        free(sp->level);
}

/* Levels in topological order (Kahn): a node's level is the largest of
 * its dependencies' levels, plus one after a host node. */
static CUresult levels(struct split *sp)
{
        struct lup_u64map index;
        uint32_t *indeg = calloc(sp->n + 1, sizeof(*indeg)), *first = calloc(sp->n + 2, sizeof(*first));
        uint32_t *pos = calloc(sp->n + 1, sizeof(*pos)), *queue = calloc(sp->n + 1, sizeof(*queue));
        uint32_t *adj = calloc(sp->ne + 1, sizeof(*adj)), *src = calloc(sp->ne + 1, sizeof(*src));
        uint32_t *dst = calloc(sp->ne + 1, sizeof(*dst));
        CUresult r = indeg && first && pos && queue && adj && src && dst ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
        lup_u64map_init(&index, LUP_CKPT_MAX_GRAPH_NODES);
        for (size_t i = 0; r == CUDA_SUCCESS && i < sp->n; i++)
                if (lup_u64map_put(&index, (uint64_t)(uintptr_t)sp->nodes[i], i) < 0)
                        r = CUDA_ERROR_OUT_OF_MEMORY;
        for (size_t e = 0; r == CUDA_SUCCESS && e < sp->ne; e++) {
                uint64_t a, b;
                if (!lup_u64map_get(&index, (uint64_t)(uintptr_t)sp->from[e], &a) ||
                    !lup_u64map_get(&index, (uint64_t)(uintptr_t)sp->to[e], &b)) {
                        r = CUDA_ERROR_UNKNOWN; /* an edge of a node the graph does not list */
                        break;
                }
                src[e] = (uint32_t)a, dst[e] = (uint32_t)b;
                first[a + 1]++;
                indeg[b]++;
        }
        for (size_t i = 0; r == CUDA_SUCCESS && i < sp->n; i++) {
                first[i + 1] += first[i];
                pos[i] = first[i];
        }
        for (size_t e = 0; r == CUDA_SUCCESS && e < sp->ne; e++)
                adj[pos[src[e]]++] = dst[e];
        size_t head = 0, tail = 0;
        for (size_t i = 0; r == CUDA_SUCCESS && i < sp->n; i++)
                if (!indeg[i])
                        queue[tail++] = (uint32_t)i;
        while (r == CUDA_SUCCESS && head < tail) {
                uint32_t u = queue[head++], next = sp->level[u] + sp->host[u];
                if (sp->level[u] + 1 > sp->n_levels)
                        sp->n_levels = sp->level[u] + 1;
                for (uint32_t k = first[u]; k < first[u + 1]; k++) {
                        uint32_t v = adj[k];
                        if (next > sp->level[v])
                                sp->level[v] = next;
                        if (--indeg[v] == 0)
                                queue[tail++] = v;
                }
        }
        if (r == CUDA_SUCCESS && tail != sp->n)
                r = CUDA_ERROR_UNKNOWN; /* not a DAG: the driver would not have it */
        lup_u64map_free(&index);
        free(indeg);
        free(first);
        free(pos);
        free(queue);
        free(adj);
        free(src);
        free(dst);
        return r;
}

/* Segment j: a clone of the exec's clone with the other nodes destroyed. */
static CUresult make_segment(struct lupw_session *s, struct lupw_exec *x, const struct split *sp, uint32_t j,
                             unsigned long long flags)
{
        const struct lupw_backend *be = &s->be.fn;
        CUgraph g = NULL;
        CUresult r = be->cuGraphClone(&g, x->src);
        for (size_t i = 0; r == CUDA_SUCCESS && i < sp->n; i++) {
                CUgraphNode cn;
                if (!sp->host[i] && sp->level[i] == j)
                        continue;
                if ((r = be->cuGraphNodeFindInClone(&cn, sp->nodes[i], g)) == CUDA_SUCCESS)
                        r = be->cuGraphDestroyNode(cn);
        }
        if (r == CUDA_SUCCESS)
                r = be->cuGraphInstantiateWithFlags(&x->segs[j], g, flags);
        if (r != CUDA_SUCCESS && g)
                (void)be->cuGraphDestroy(g);
        else
                x->seg_graphs[j] = g;
        return r;
}

struct host_ent {
        uint32_t level;
        uint64_t id, token;
};

static int host_cmp(const void *a, const void *b)
{
        const struct host_ent *x = a, *y = b;
        if (x->level != y->level)
                return x->level < y->level ? -1 : 1;
        if (x->id != y->id)
                return x->id < y->id ? -1 : 1;
        return x->token < y->token ? -1 : x->token > y->token;
}

static void reverse(uint64_t key, uint64_t val, void *ud)
{
        (void)lup_u64map_put(ud, val, key);
}

/* The plan's words (see the top of this file). */
static CUresult make_plan(struct lupw_session *s, struct lupw_exec *x, const struct split *sp)
{
        struct lup_u64map rev;
        struct host_ent *h = calloc(sp->n_host + 1, sizeof(*h));
        size_t words = sp->n_levels + 2 * (size_t)sp->n_host, k = 0;
        x->plan = calloc(words + 1, sizeof(*x->plan));
        CUresult r = h && x->plan ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
        lup_u64map_init(&rev, LUP_CKPT_MAX_GRAPH_NODES);
        lup_u64map_each(&x->nodes, reverse, &rev);
        for (size_t i = 0; r == CUDA_SUCCESS && i < sp->n; i++) {
                CUDA_HOST_NODE_PARAMS p;
                if (!sp->host[i])
                        continue;
                if ((r = s->be.fn.cuGraphHostNodeGetParams(sp->nodes[i], &p)) != CUDA_SUCCESS)
                        break;
                if (p.fn != lupw_host_noop)
                        r = CUDA_ERROR_NOT_SUPPORTED; /* not a node lupine made */
                /* id 0: one brought up from a child graph, no client id */
                if (!lup_u64map_get(&rev, (uint64_t)(uintptr_t)sp->nodes[i], &h[k].id))
                        h[k].id = 0;
                h[k].level = sp->level[i];
                h[k++].token = (uint64_t)(uintptr_t)p.userData;
        }
        if (r == CUDA_SUCCESS)
                qsort(h, k, sizeof(*h), host_cmp);
        size_t at = 0, hi = 0;
        for (uint32_t j = 0; r == CUDA_SUCCESS && j < sp->n_levels; j++) {
                size_t hdr = at++, cnt = 0;
                for (; hi < k && h[hi].level == j; hi++, cnt++) {
                        x->plan[at++] = h[hi].id;
                        x->plan[at++] = h[hi].token;
                }
                x->plan[hdr] = (x->segs[j] ? 1u : 0u) | (uint64_t)cnt << 1;
        }
        x->n_plan = r == CUDA_SUCCESS ? (uint32_t)at : 0;
        lup_u64map_free(&rev);
        free(h);
        return r;
}

static CUresult classify(struct lupw_session *s, struct lupw_exec *x, struct split *sp)
{
        const struct lupw_backend *be = &s->be.fn;
        CUresult r = lupw_graph_nodes(be, x->src, &sp->nodes, &sp->n);
        if (r != CUDA_SUCCESS)
                return r;
        sp->host = calloc(sp->n + 1, 1);
        sp->level = calloc(sp->n + 1, sizeof(*sp->level));
        if (!sp->host || !sp->level)
                return CUDA_ERROR_OUT_OF_MEMORY;
        for (size_t i = 0; r == CUDA_SUCCESS && i < sp->n; i++) {
                CUgraphNodeType t;
                if ((r = be->cuGraphNodeGetType(sp->nodes[i], &t)) == CUDA_SUCCESS && t == CU_GRAPH_NODE_TYPE_HOST)
                        sp->host[i] = 1, sp->n_host++;
                sp->children |= r == CUDA_SUCCESS && t == CU_GRAPH_NODE_TYPE_GRAPH;
        }
        if (r != CUDA_SUCCESS || !sp->n_host)
                return r;
        if ((r = be->cuGraphGetEdges_v2(x->src, NULL, NULL, NULL, &sp->ne)) != CUDA_SUCCESS)
                return r;
        sp->from = calloc(sp->ne + 1, sizeof(*sp->from));
        sp->to = calloc(sp->ne + 1, sizeof(*sp->to));
        if (!sp->from || !sp->to)
                return CUDA_ERROR_OUT_OF_MEMORY;
        return sp->ne ? be->cuGraphGetEdges_v2(x->src, sp->from, sp->to, NULL, &sp->ne) : CUDA_SUCCESS;
}

CUresult lupw_split_build(struct lupw_session *s, struct lupw_exec *x, unsigned long long flags)
{
        struct split sp;
        int inlined = 0;
        memset(&sp, 0, sizeof(sp));
        lupw_split_free(s, x);
        CUresult r = classify(s, x, &sp);
        if (r == CUDA_SUCCESS && sp.children) /* host nodes in child graphs: brought up (graph_flatten.c) */
                r = lupw_graph_flatten(s, x, &inlined);
        if (r == CUDA_SUCCESS && inlined) {
                split_done(&sp);
                memset(&sp, 0, sizeof(sp));
                r = classify(s, x, &sp);
        }
        if (r != CUDA_SUCCESS || !sp.n_host) {
                split_done(&sp);
                return r;
        }
        r = levels(&sp);
        x->segs = calloc(sp.n_levels + 1, sizeof(*x->segs));
        x->seg_graphs = calloc(sp.n_levels + 1, sizeof(*x->seg_graphs));
        if (r == CUDA_SUCCESS && (!x->segs || !x->seg_graphs))
                r = CUDA_ERROR_OUT_OF_MEMORY;
        if (r == CUDA_SUCCESS)
                x->n_segs = sp.n_levels;
        for (uint32_t j = 0; r == CUDA_SUCCESS && j < sp.n_levels; j++) {
                bool any = false;
                for (size_t i = 0; !any && i < sp.n; i++)
                        any = !sp.host[i] && sp.level[i] == j;
                if (any)
                        r = make_segment(s, x, &sp, j, flags);
        }
        if (r == CUDA_SUCCESS)
                r = make_plan(s, x, &sp);
        if (r != CUDA_SUCCESS)
                lupw_split_free(s, x);
        split_done(&sp);
        return r;
}

/* After a cuGraphExec*SetParams of node `id` (clone node n) of a split
 * exec: the segment holding it gets the clone's parameters, or the plan
 * the host node's new token. */
CUresult lupw_split_sync(struct lupw_session *s, struct lupw_exec *x, uint64_t id, CUgraphNode n)
{
        const struct lupw_backend *be = &s->be.fn;
        CUgraphNodeType t;
        CUgraphNode cn = NULL;
        CUgraphExec seg = NULL;
        CUcontext cur = NULL;
        if (!x->n_segs)
                return CUDA_SUCCESS;
        CUresult r = be->cuGraphNodeGetType(n, &t);
        if (r != CUDA_SUCCESS)
                return r;
        if (t == CU_GRAPH_NODE_TYPE_HOST) {
                CUDA_HOST_NODE_PARAMS p;
                if ((r = be->cuGraphHostNodeGetParams(n, &p)) != CUDA_SUCCESS)
                        return r;
                for (uint32_t at = 0; at < x->n_plan; at += 1 + 2 * (uint32_t)(x->plan[at] >> 1))
                        for (uint32_t k = 0; k < x->plan[at] >> 1; k++)
                                if (x->plan[at + 1 + 2 * k] == id)
                                        x->plan[at + 2 + 2 * k] = (uint64_t)(uintptr_t)p.userData;
                return CUDA_SUCCESS;
        }
        for (uint32_t j = 0; !seg && j < x->n_segs; j++)
                if (x->segs[j] && be->cuGraphNodeFindInClone(&cn, n, x->seg_graphs[j]) == CUDA_SUCCESS)
                        seg = x->segs[j];
        if (!seg)
                return CUDA_SUCCESS; /* an empty node's, say: nothing to carry */
        (void)be->cuCtxGetCurrent(&cur);
        switch (t) {
        case CU_GRAPH_NODE_TYPE_KERNEL: {
                CUDA_KERNEL_NODE_PARAMS p;
                memset(&p, 0, sizeof(p));
                r = be->cuGraphKernelNodeGetParams_v2(n, &p);
                return r == CUDA_SUCCESS ? be->cuGraphExecKernelNodeSetParams_v2(seg, cn, &p) : r;
        }
        case CU_GRAPH_NODE_TYPE_MEMSET: {
                CUDA_MEMSET_NODE_PARAMS p;
                r = be->cuGraphMemsetNodeGetParams(n, &p);
                return r == CUDA_SUCCESS ? be->cuGraphExecMemsetNodeSetParams(seg, cn, &p, cur) : r;
        }
        case CU_GRAPH_NODE_TYPE_MEMCPY: {
                CUDA_MEMCPY3D p;
                memset(&p, 0, sizeof(p));
                r = be->cuGraphMemcpyNodeGetParams(n, &p);
                return r == CUDA_SUCCESS ? be->cuGraphExecMemcpyNodeSetParams(seg, cn, &p, cur) : r;
        }
        case CU_GRAPH_NODE_TYPE_EVENT_RECORD: {
                CUevent e;
                r = be->cuGraphEventRecordNodeGetEvent(n, &e);
                return r == CUDA_SUCCESS ? be->cuGraphExecEventRecordNodeSetEvent(seg, cn, e) : r;
        }
        case CU_GRAPH_NODE_TYPE_WAIT_EVENT: {
                CUevent e;
                r = be->cuGraphEventWaitNodeGetEvent(n, &e);
                return r == CUDA_SUCCESS ? be->cuGraphExecEventWaitNodeSetEvent(seg, cn, e) : r;
        }
        case CU_GRAPH_NODE_TYPE_GRAPH: {
                CUgraph child;
                r = be->cuGraphChildGraphNodeGetGraph(n, &child);
                return r == CUDA_SUCCESS ? be->cuGraphExecChildGraphNodeSetParams(seg, cn, child) : r;
        }
        default:
                return CUDA_SUCCESS;
        }
}

/* The enable bits of exec `main`'s nodes (cuGraphNodeSetEnabled) carried
 * into the segments of its split. */
CUresult lupw_split_carry_enabled(struct lupw_session *s, struct lupw_exec *x, CUgraphExec main)
{
        const struct lupw_backend *be = &s->be.fn;
        CUgraphNode *v;
        size_t n;
        if (!x->n_segs)
                return CUDA_SUCCESS;
        CUresult r = lupw_graph_nodes(be, x->src, &v, &n);
        if (r != CUDA_SUCCESS)
                return r;
        for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++) {
                CUgraphNodeType t;
                unsigned on = 1;
                CUgraphNode cn;
                if (be->cuGraphNodeGetType(v[i], &t) != CUDA_SUCCESS ||
                    (t != CU_GRAPH_NODE_TYPE_KERNEL && t != CU_GRAPH_NODE_TYPE_MEMSET &&
                     t != CU_GRAPH_NODE_TYPE_MEMCPY) ||
                    be->cuGraphNodeGetEnabled(main, v[i], &on) != CUDA_SUCCESS)
                        continue; /* a node brought up from a child graph is not the exec's own */
                for (uint32_t j = 0; j < x->n_segs; j++)
                        if (x->segs[j] && be->cuGraphNodeFindInClone(&cn, v[i], x->seg_graphs[j]) == CUDA_SUCCESS) {
                                r = be->cuGraphNodeSetEnabled(x->segs[j], cn, on);
                                break;
                        }
        }
        free(v);
        return r;
}

/* ---- ops */

CUresult lupw_lupGraphHostPlan(struct lupw_session *s, CUgraphExec hGraphExec, unsigned int offset, uint64_t *total,
                               uint64_t *v0, uint64_t *v1, uint64_t *v2, uint64_t *v3, uint64_t *v4, uint64_t *v5,
                               uint64_t *v6, uint64_t *v7, uint64_t *v8, uint64_t *v9, uint64_t *v10, uint64_t *v11,
                               uint64_t *v12, uint64_t *v13, uint64_t *v14, uint64_t *v15)
{
        uint64_t *out[LUP_GRAPH_LIST_PAGE] = { v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15 };
        struct lupw_exec *x = exec_of(s, hGraphExec);
        if (!x)
                return CUDA_ERROR_INVALID_VALUE;
        *total = x->n_plan;
        for (size_t i = 0; i < LUP_GRAPH_LIST_PAGE; i++)
                *out[i] = (uint64_t)offset + i < x->n_plan ? x->plan[offset + i] : 0;
        return CUDA_SUCCESS;
}

CUresult lupw_lupGraphLaunchSeg(struct lupw_session *s, CUgraphExec hGraphExec, unsigned int seg, CUstream hStream)
{
        struct lupw_exec *x = exec_of(s, hGraphExec);
        if (!x || seg >= x->n_segs || !x->segs[seg])
                return CUDA_ERROR_INVALID_VALUE;
        return s->be.fn.cuGraphLaunch(x->segs[seg], hStream);
}

/* An exec with host nodes is launched a segment at a time by the shim: a
 * launch of the whole would run the worker's no-ops instead of the
 * client's functions. */
CUresult lupw_cuGraphLaunch(struct lupw_session *s, CUgraphExec hGraphExec, CUstream hStream)
{
        static bool told;
        struct lupw_exec *x = exec_of(s, hGraphExec);
        if (x && x->n_segs) {
                if (!told)
                        lup_warn("session %s: cuGraphLaunch of a graph exec with host nodes as a whole (its "
                                 "segments must be launched one by one): refused",
                                 s->name);
                told = true;
                return CUDA_ERROR_INVALID_VALUE;
        }
        return s->be.fn.cuGraphLaunch(hGraphExec, hStream);
}

/* cuLaunchHostFunc on a capturing stream: the driver captures a host node
 * running the no-op with the token. ILLEGAL_STATE: the stream is not
 * capturing (the shim then runs the function as outside a capture). */
CUresult lupw_lupLaunchHostFuncCapture(struct lupw_session *s, CUstream hStream, uint64_t token)
{
        CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
        cuuint64_t cid = 0;
        if (!token)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = s->be.fn.cuStreamGetCaptureInfo_v3(hStream, &st, &cid, NULL, NULL, NULL, NULL);
        if (r != CUDA_SUCCESS)
                return r;
        if (st != CU_STREAM_CAPTURE_STATUS_ACTIVE)
                return CUDA_ERROR_ILLEGAL_STATE;
        return s->be.fn.cuLaunchHostFunc(hStream, lupw_host_noop, (void *)(uintptr_t)token);
}
