/* SPDX-License-Identifier: MIT */
/*
 * Graph nodes in the worker: the explicit graph API's adds, edges, lists
 * and node destruction.
 *
 * Node ids are the shim's for nodes the client adds. Nodes the driver
 * makes (a capture's) get an id from the worker the first time a list
 * names them, from a range the shim never mints (LUPW_NODE_ID_BASE up).
 * Every node id is a GRAPHNODE handle (prov.parent: its graph's id), and
 * s->graphs.node_ids maps the driver's node back to it.
 */
#define LUP_LOG_CAT LUP_LOGC_GPU
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "log.h"
#include "worker/graphs.h"
#include "worker/session.h"

#define LUPW_NODE_ID_BASE ((1ull << 62) + LUP_FIRST_HANDLE_ID)

static CUresult put_node(struct lupw_session *s, uint64_t id, CUgraphNode real, uint64_t graph)
{
        lupw_prov_free(&s->obj.prov);
        s->obj.prov.parent = graph;
        CUresult r = lupw_handle_put(s, LUPW_H_GRAPHNODE, id, real);
        if (r == CUDA_SUCCESS && lup_u64map_put(&s->graphs.node_ids, (uint64_t)(uintptr_t)real, id) < 0) {
                lupw_handle_del(s, id);
                r = CUDA_ERROR_OUT_OF_MEMORY;
        }
        return r;
}

CUresult lupw_node_put(struct lupw_session *s, uint64_t id, CUgraphNode real, uint64_t graph)
{
        if (id >= LUPW_NODE_ID_BASE && id >= s->graphs.next_node_id)
                s->graphs.next_node_id = id + 16;
        return put_node(s, id, real, graph);
}

uint64_t lupw_node_id(struct lupw_session *s, CUgraphNode real, uint64_t graph)
{
        uint64_t id;
        if (!real)
                return 0;
        if (lup_u64map_get(&s->graphs.node_ids, (uint64_t)(uintptr_t)real, &id))
                return id;
        if (s->graphs.next_node_id < LUPW_NODE_ID_BASE)
                s->graphs.next_node_id = LUPW_NODE_ID_BASE;
        id = s->graphs.next_node_id;
        if (put_node(s, id, real, graph) != CUDA_SUCCESS)
                return 0;
        s->graphs.next_node_id += 16;
        return id;
}

uint64_t lupw_node_lookup(struct lupw_session *s, CUgraphNode real)
{
        uint64_t id = 0;
        lup_u64map_get(&s->graphs.node_ids, (uint64_t)(uintptr_t)real, &id);
        return id;
}

static CUresult node_of(struct lupw_session *s, uint64_t id, CUgraphNode *ret)
{
        struct lupw_handle_ent *e = lupw_handle_ent(s, LUPW_H_GRAPHNODE, id);
        if (!e)
                return CUDA_ERROR_INVALID_VALUE;
        *ret = (CUgraphNode)e->real;
        return CUDA_SUCCESS;
}

/* A device address from the client: inside the arena or a module global. */
static bool devptr_ok(struct lupw_session *s, uint64_t p)
{
        return lupw_find_global(s, p, NULL) || arena_contains(&s->mem.arena, p);
}

CUDA_MEMSET_NODE_PARAMS lupw_memset_node_params(const struct lupw_session *s, uint64_t dst, uint64_t pitch,
                                                uint32_t value, uint32_t elem, uint64_t width, uint64_t height)
{
        return (CUDA_MEMSET_NODE_PARAMS){ .dst = lupw_xlate(s, dst),
                                          .pitch = pitch,
                                          .value = value,
                                          .elementSize = elem,
                                          .width = width,
                                          .height = height };
}

CUDA_MEMCPY3D lupw_copy_node_params(const struct lupw_session *s, uint64_t dst, uint64_t src, uint64_t bytes)
{
        CUDA_MEMCPY3D p;
        memset(&p, 0, sizeof(p));
        p.srcMemoryType = p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        p.dstDevice = lupw_xlate(s, dst);
        p.srcDevice = lupw_xlate(s, src);
        p.WidthInBytes = bytes;
        p.Height = p.Depth = 1;
        return p;
}

CUresult lupw_lupGraphAddNode(struct lupw_session *s, uint64_t node, CUgraph hGraph, unsigned int type, uint64_t a,
                              uint64_t b, uint64_t c, uint64_t d, uint64_t e, uint64_t f)
{
        const struct lupw_backend *be = &s->be.fn;
        uint64_t gid = s->cur.parent;
        struct lupw_handle_ent *ge = lupw_handle_ent(s, LUPW_H_GRAPH, gid);
        CUgraphNode n = NULL;
        CUcontext cur = NULL;
        void *h;
        CUresult r;
        if (node < LUP_FIRST_HANDLE_ID || (node - LUP_FIRST_HANDLE_ID) % 16 || node >= LUPW_NODE_ID_BASE ||
            lup_u64map_get(&s->obj.handles, node, NULL))
                return CUDA_ERROR_INVALID_VALUE;
        if (ge && (ge->prov.flags & LUPW_GRAPH_CAPTURING))
                return CUDA_ERROR_INVALID_VALUE;
        (void)be->cuCtxGetCurrent(&cur);
        switch (type) {
        case CU_GRAPH_NODE_TYPE_EMPTY:
                r = be->cuGraphAddEmptyNode(&n, hGraph, NULL, 0);
                break;
        case CU_GRAPH_NODE_TYPE_MEMSET: {
                if (!devptr_ok(s, a))
                        return CUDA_ERROR_INVALID_VALUE;
                CUDA_MEMSET_NODE_PARAMS p = lupw_memset_node_params(s, a, b, (uint32_t)c, (uint32_t)d, e, f);
                r = be->cuGraphAddMemsetNode(&n, hGraph, NULL, 0, &p, cur);
                break;
        }
        case CU_GRAPH_NODE_TYPE_MEMCPY: {
                if (!devptr_ok(s, a) || !devptr_ok(s, b))
                        return CUDA_ERROR_INVALID_VALUE;
                CUDA_MEMCPY3D p = lupw_copy_node_params(s, a, b, c);
                r = be->cuGraphAddMemcpyNode(&n, hGraph, NULL, 0, &p, cur);
                break;
        }
        case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
                if ((r = lupw_handle(s, LUPW_H_EVENT, a, &h)) != CUDA_SUCCESS)
                        return r;
                r = type == CU_GRAPH_NODE_TYPE_EVENT_RECORD ? be->cuGraphAddEventRecordNode(&n, hGraph, NULL, 0, h)
                                                            : be->cuGraphAddEventWaitNode(&n, hGraph, NULL, 0, h);
                break;
        case CU_GRAPH_NODE_TYPE_GRAPH:
                if ((r = lupw_handle(s, LUPW_H_GRAPH, a, &h)) != CUDA_SUCCESS)
                        return CUDA_ERROR_INVALID_VALUE;
                r = be->cuGraphAddChildGraphNode(&n, hGraph, NULL, 0, h);
                break;
        case CU_GRAPH_NODE_TYPE_HOST: { /* a: the shim's token (worker/graph_host.c) */
                CUDA_HOST_NODE_PARAMS p = { .fn = lupw_host_noop, .userData = (void *)(uintptr_t)a };
                if (!a)
                        return CUDA_ERROR_INVALID_VALUE;
                r = be->cuGraphAddHostNode(&n, hGraph, NULL, 0, &p);
                break;
        }
        default:
                return CUDA_ERROR_NOT_SUPPORTED;
        }
        if (r == CUDA_SUCCESS && (r = put_node(s, node, n, gid)) != CUDA_SUCCESS)
                (void)be->cuGraphDestroyNode(n);
        return r;
}

CUresult lupw_lupGraphEdge(struct lupw_session *s, unsigned int add, CUgraph hGraph, uint64_t from, uint64_t to)
{
        CUgraphNode f, t;
        CUresult r = node_of(s, from, &f);
        if (r == CUDA_SUCCESS)
                r = node_of(s, to, &t);
        if (r != CUDA_SUCCESS)
                return r;
        return add ? s->be.fn.cuGraphAddDependencies_v2(hGraph, &f, &t, NULL, 1)
                   : s->be.fn.cuGraphRemoveDependencies_v2(hGraph, &f, &t, NULL, 1);
}

CUresult lupw_cuGraphDestroyNode(struct lupw_session *s, CUgraphNode hNode)
{
        uint64_t id = s->cur.parent; /* hNode's */
        CUresult r = s->be.fn.cuGraphDestroyNode(hNode);
        if (r == CUDA_SUCCESS)
                lup_u64map_del(&s->graphs.node_ids, (uint64_t)(uintptr_t)hNode, NULL);
        if (r == CUDA_SUCCESS)
                lupw_child_forget(s, id);
        return r;
}

/* ---- lists */

/* Fills *ret (malloc'ed, *ret_n entries; edges: from, to pairs) with what
 * list `what` names (LUP_GRAPH_LIST_*) in driver handles. */
static CUresult fetch(struct lupw_session *s, unsigned what, uint64_t handle, CUgraphNode **ret, size_t *ret_n,
                      uint64_t *ret_graph)
{
        const struct lupw_backend *be = &s->be.fn;
        size_t n = 0;
        void *h = NULL;
        CUresult r = CUDA_SUCCESS;
        struct lupw_handle_ent *ne = NULL;
        if (what <= LUP_GRAPH_LIST_EDGES) {
                r = lupw_handle(s, LUPW_H_GRAPH, handle, &h);
                *ret_graph = handle;
        } else if (what <= LUP_GRAPH_LIST_DEPENDENTS) {
                if (!(ne = lupw_handle_ent(s, LUPW_H_GRAPHNODE, handle)))
                        return CUDA_ERROR_INVALID_VALUE;
                h = ne->real;
                *ret_graph = ne->prov.parent;
        } else if (what == LUP_GRAPH_LIST_CAPTURE) {
                r = lupw_stream(s, handle, (CUstream *)&h);
        } else {
                return CUDA_ERROR_INVALID_VALUE;
        }
        if (r != CUDA_SUCCESS)
                return CUDA_ERROR_INVALID_VALUE;
        const CUgraphNode *cdeps = NULL;
        CUstreamCaptureStatus st;
        cuuint64_t cid = 0;
        switch (what) {
        case LUP_GRAPH_LIST_NODES:
                r = be->cuGraphGetNodes(h, NULL, &n);
                break;
        case LUP_GRAPH_LIST_ROOTS:
                r = be->cuGraphGetRootNodes(h, NULL, &n);
                break;
        case LUP_GRAPH_LIST_EDGES:
                r = be->cuGraphGetEdges_v2(h, NULL, NULL, NULL, &n);
                break;
        case LUP_GRAPH_LIST_DEPS:
                r = be->cuGraphNodeGetDependencies_v2(h, NULL, NULL, &n);
                break;
        case LUP_GRAPH_LIST_DEPENDENTS:
                r = be->cuGraphNodeGetDependentNodes_v2(h, NULL, NULL, &n);
                break;
        default:
                r = be->cuStreamGetCaptureInfo_v3(h, &st, &cid, NULL, &cdeps, NULL, &n);
                if (r == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_ACTIVE)
                        n = 0;
                for (int i = 0; n && i < s->graphs.n_caps; i++) /* the graph it builds */
                        if (s->graphs.caps[i].cid == cid)
                                *ret_graph = s->graphs.caps[i].graph;
                break;
        }
        if (r != CUDA_SUCCESS)
                return r;
        size_t per = what == LUP_GRAPH_LIST_EDGES ? 2 : 1;
        CUgraphNode *v = calloc(n * per + 1, sizeof(*v));
        if (!v)
                return CUDA_ERROR_OUT_OF_MEMORY;
        switch (what) {
        case LUP_GRAPH_LIST_NODES:
                r = n ? be->cuGraphGetNodes(h, v, &n) : r;
                break;
        case LUP_GRAPH_LIST_ROOTS:
                r = n ? be->cuGraphGetRootNodes(h, v, &n) : r;
                break;
        case LUP_GRAPH_LIST_EDGES:
                r = n ? be->cuGraphGetEdges_v2(h, v, v + n, NULL, &n) : r;
                break;
        case LUP_GRAPH_LIST_DEPS:
                r = n ? be->cuGraphNodeGetDependencies_v2(h, v, NULL, &n) : r;
                break;
        case LUP_GRAPH_LIST_DEPENDENTS:
                r = n ? be->cuGraphNodeGetDependentNodes_v2(h, v, NULL, &n) : r;
                break;
        default:
                if (n)
                        memcpy(v, cdeps, n * sizeof(*v));
                break;
        }
        if (r != CUDA_SUCCESS) {
                free(v);
                return r;
        }
        if (what == LUP_GRAPH_LIST_EDGES) { /* from[], to[] -> pairs */
                CUgraphNode *pairs = calloc(2 * n + 1, sizeof(*pairs));
                if (!pairs) {
                        free(v);
                        return CUDA_ERROR_OUT_OF_MEMORY;
                }
                for (size_t i = 0; i < n; i++)
                        pairs[2 * i] = v[i], pairs[2 * i + 1] = v[n + i];
                free(v);
                v = pairs;
        }
        *ret = v;
        *ret_n = n * per;
        return CUDA_SUCCESS;
}

CUresult lupw_lupGraphList(struct lupw_session *s, unsigned int what, uint64_t handle, unsigned int offset,
                           uint64_t *total, uint64_t *v0, uint64_t *v1, uint64_t *v2, uint64_t *v3, uint64_t *v4,
                           uint64_t *v5, uint64_t *v6, uint64_t *v7, uint64_t *v8, uint64_t *v9, uint64_t *v10,
                           uint64_t *v11, uint64_t *v12, uint64_t *v13, uint64_t *v14, uint64_t *v15)
{
        uint64_t *out[LUP_GRAPH_LIST_PAGE] = { v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15 };
        CUgraphNode *v = NULL;
        size_t n = 0;
        uint64_t graph = 0;
        CUresult r = fetch(s, what, handle, &v, &n, &graph);
        if (r != CUDA_SUCCESS)
                return r;
        *total = n;
        for (size_t i = 0; i < LUP_GRAPH_LIST_PAGE; i++)
                *out[i] = offset + i < n ? lupw_node_id(s, v[offset + i], graph) : 0;
        free(v);
        return CUDA_SUCCESS;
}

/* ---- memset and memcpy nodes' parameters */

uint64_t lupw_unxlate(const struct lupw_session *s, uint64_t v)
{
        for (size_t i = 0; i < s->obj.xlate.n; i++) {
                const struct lup_range *r = &s->obj.xlate.r[i];
                if (v >= r->a && v - r->a < r->size)
                        return r->base + (v - r->a);
        }
        return v;
}

/* type, then MEMSET: dst, pitch, value, element size, width, height;
 * MEMCPY: dst, src, bytes (1-D device to device; others NOT_SUPPORTED) */
CUresult lupw_lupGraphNodeGet(struct lupw_session *s, CUgraphNode hNode, unsigned int *type, uint64_t *a, uint64_t *b,
                              uint64_t *c, uint64_t *d, uint64_t *e, uint64_t *f)
{
        const struct lupw_backend *be = &s->be.fn;
        CUgraphNodeType t;
        CUresult r = be->cuGraphNodeGetType(hNode, &t);
        *a = *b = *c = *d = *e = *f = 0;
        if (r != CUDA_SUCCESS)
                return r;
        *type = (unsigned)t;
        if (t == CU_GRAPH_NODE_TYPE_HOST) { /* a: its token */
                CUDA_HOST_NODE_PARAMS p;
                if ((r = be->cuGraphHostNodeGetParams(hNode, &p)) == CUDA_SUCCESS && p.fn != lupw_host_noop)
                        r = CUDA_ERROR_NOT_SUPPORTED; /* not a node lupine made */
                *a = r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)p.userData : 0;
                return r;
        }
        if (t == CU_GRAPH_NODE_TYPE_MEMSET) {
                CUDA_MEMSET_NODE_PARAMS p;
                if ((r = be->cuGraphMemsetNodeGetParams(hNode, &p)) == CUDA_SUCCESS)
                        *a = lupw_unxlate(s, p.dst), *b = p.pitch, *c = p.value, *d = p.elementSize, *e = p.width,
                        *f = p.height;
                return r;
        }
        if (t != CU_GRAPH_NODE_TYPE_MEMCPY)
                return CUDA_ERROR_INVALID_VALUE;
        CUDA_MEMCPY3D p;
        memset(&p, 0, sizeof(p));
        if ((r = be->cuGraphMemcpyNodeGetParams(hNode, &p)) != CUDA_SUCCESS)
                return r;
        if (p.Height > 1 || p.Depth > 1 || p.srcMemoryType == CU_MEMORYTYPE_HOST ||
            p.dstMemoryType == CU_MEMORYTYPE_HOST || p.srcMemoryType == CU_MEMORYTYPE_ARRAY ||
            p.dstMemoryType == CU_MEMORYTYPE_ARRAY)
                return CUDA_ERROR_NOT_SUPPORTED;
        *a = lupw_unxlate(s, p.dstDevice + p.dstXInBytes);
        *b = lupw_unxlate(s, p.srcDevice + p.srcXInBytes);
        *c = p.WidthInBytes;
        return CUDA_SUCCESS;
}

/* A node's memset/memcpy parameters set, in its graph (exec 0) or in an
 * exec (and then in the exec's clone too, which a checkpoint saves). */
CUresult lupw_lupGraphNodeSet(struct lupw_session *s, uint64_t exec, uint64_t node, unsigned int type, uint64_t a,
                              uint64_t b, uint64_t c, uint64_t d, uint64_t e, uint64_t f)
{
        const struct lupw_backend *be = &s->be.fn;
        CUgraphExec x = NULL;
        CUgraphNode n;
        CUcontext cur = NULL;
        struct lupw_exec *xr = NULL;
        uint64_t v;
        (void)be->cuCtxGetCurrent(&cur);
        if (exec) {
                struct lupw_handle_ent *xe = lupw_handle_ent(s, LUPW_H_GRAPHEXEC, exec);
                uint64_t xv = 0; /* its struct lupw_exec (worker/graphs.c) */
                if (xe)
                        lup_u64map_get(&s->graphs.exec_src, (uint64_t)(uintptr_t)xe->real, &xv);
                xr = (struct lupw_exec *)(uintptr_t)xv;
                if (!xr || !lup_u64map_get(&xr->nodes, node, &v))
                        return CUDA_ERROR_INVALID_VALUE;
                x = (CUgraphExec)xe->real;
                n = (CUgraphNode)(uintptr_t)v;
        } else if (node_of(s, node, &n) != CUDA_SUCCESS) {
                return CUDA_ERROR_INVALID_VALUE;
        }
        CUresult r;
        if (type == CU_GRAPH_NODE_TYPE_HOST) { /* a: the new token */
                CUDA_HOST_NODE_PARAMS p = { .fn = lupw_host_noop, .userData = (void *)(uintptr_t)a };
                if (!a)
                        return CUDA_ERROR_INVALID_VALUE;
                r = x ? be->cuGraphExecHostNodeSetParams(x, n, &p) : be->cuGraphHostNodeSetParams(n, &p);
                if (r == CUDA_SUCCESS && x)
                        r = be->cuGraphHostNodeSetParams(n, &p);
        } else if (type == CU_GRAPH_NODE_TYPE_MEMSET) {
                if (!devptr_ok(s, a))
                        return CUDA_ERROR_INVALID_VALUE;
                CUDA_MEMSET_NODE_PARAMS p = lupw_memset_node_params(s, a, b, (uint32_t)c, (uint32_t)d, e, f);
                r = x ? be->cuGraphExecMemsetNodeSetParams(x, n, &p, cur) : be->cuGraphMemsetNodeSetParams(n, &p);
                if (r == CUDA_SUCCESS && x)
                        r = be->cuGraphMemsetNodeSetParams(n, &p);
        } else {
                if (type != CU_GRAPH_NODE_TYPE_MEMCPY || !devptr_ok(s, a) || !devptr_ok(s, b))
                        return CUDA_ERROR_INVALID_VALUE;
                CUDA_MEMCPY3D p = lupw_copy_node_params(s, a, b, c);
                r = x ? be->cuGraphExecMemcpyNodeSetParams(x, n, &p, cur) : be->cuGraphMemcpyNodeSetParams(n, &p);
                if (r == CUDA_SUCCESS && x)
                        r = be->cuGraphMemcpyNodeSetParams(n, &p);
        }
        /* a split exec's segment (or plan) gets it too */
        return r == CUDA_SUCCESS && xr ? lupw_split_sync(s, xr, node, n) : r;
}

/* ---- event nodes: op 0 reads the event (*got, its id), 1 sets it in the
 * graph, 2 in an exec (and in the exec's clone); plus 4: the node must be
 * an event record node, 8: an event wait node */

struct ev_hunt {
        void *real;
        uint64_t id;
};

static void ev_of(uint64_t key, uint64_t val, void *ud)
{
        struct ev_hunt *h = ud;
        const struct lupw_handle_ent *e = (const struct lupw_handle_ent *)(uintptr_t)val;
        if (e->kind == LUPW_H_EVENT && e->real == h->real)
                h->id = key;
}

CUresult lupw_lupGraphEventNode(struct lupw_session *s, uint64_t exec, uint64_t node, unsigned int op, uint64_t event,
                                uint64_t *got)
{
        const struct lupw_backend *be = &s->be.fn;
        CUgraphNode n;
        CUgraphNodeType t;
        CUgraphExec x = NULL;
        struct lupw_exec *xr = NULL;
        void *ev = NULL;
        uint64_t v;
        unsigned want = op >> 2;
        *got = 0;
        op &= 3;
        if (want > 2)
                return CUDA_ERROR_INVALID_VALUE;
        if (op == 2) {
                struct lupw_handle_ent *xe = lupw_handle_ent(s, LUPW_H_GRAPHEXEC, exec);
                uint64_t xv = 0;
                if (xe)
                        lup_u64map_get(&s->graphs.exec_src, (uint64_t)(uintptr_t)xe->real, &xv);
                xr = (struct lupw_exec *)(uintptr_t)xv;
                if (!xr || !lup_u64map_get(&xr->nodes, node, &v))
                        return CUDA_ERROR_INVALID_VALUE;
                x = (CUgraphExec)xe->real;
                n = (CUgraphNode)(uintptr_t)v;
        } else if (op > 2 || node_of(s, node, &n) != CUDA_SUCCESS) {
                return CUDA_ERROR_INVALID_VALUE;
        }
        CUresult r = be->cuGraphNodeGetType(n, &t);
        if (r != CUDA_SUCCESS)
                return r;
        bool rec = t == CU_GRAPH_NODE_TYPE_EVENT_RECORD;
        if ((!rec && t != CU_GRAPH_NODE_TYPE_WAIT_EVENT) || (want == 1 && !rec) || (want == 2 && rec))
                return CUDA_ERROR_INVALID_VALUE;
        if (op == 0) {
                CUevent e;
                r = rec ? be->cuGraphEventRecordNodeGetEvent(n, &e) : be->cuGraphEventWaitNodeGetEvent(n, &e);
                struct ev_hunt h = { .real = e };
                if (r == CUDA_SUCCESS)
                        lup_u64map_each(&s->obj.handles, ev_of, &h);
                *got = h.id;
                return r;
        }
        if (lupw_handle(s, LUPW_H_EVENT, event, &ev) != CUDA_SUCCESS)
                return CUDA_ERROR_INVALID_VALUE;
        if (x)
                r = rec ? be->cuGraphExecEventRecordNodeSetEvent(x, n, ev)
                        : be->cuGraphExecEventWaitNodeSetEvent(x, n, ev);
        if (r == CUDA_SUCCESS) /* the graph's node, or the exec's clone's */
                r = rec ? be->cuGraphEventRecordNodeSetEvent(n, ev) : be->cuGraphEventWaitNodeSetEvent(n, ev);
        return r == CUDA_SUCCESS && xr ? lupw_split_sync(s, xr, node, n) : r;
}
