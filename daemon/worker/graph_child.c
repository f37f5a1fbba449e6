/* SPDX-License-Identifier: MIT */
/*
 * Child graph nodes' graphs, a child graph node's graph replaced, and exec
 * nodes' enable bits, in the worker.
 *
 * cuGraphChildGraphNodeGetGraph hands out the graph a child graph node
 * owns (not a copy: what the client adds to it or changes in it changes
 * the node). It becomes a GRAPH handle under an id the shim minted, marked
 * LUPW_GRAPH_OWNED, with prov.parent the node's id. The client cannot
 * destroy it (cuGraphDestroy: CUDA_ERROR_INVALID_VALUE), and its id and its
 * nodes' ids are forgotten with the node: the node or its graph destroyed,
 * or its child graph replaced (cuGraphNodeSetParams). A checkpoint saves
 * the id with the child's record (worker/graphs_ckpt.c).
 *
 * An exec's clone (worker/graphs.c) carries a change into a checkpoint:
 * cuGraphExecChildGraphNodeSetParams copies the new child graph's
 * parameters node by node into the clone's child graph (the driver has
 * checked that the two have the same shape), and the enable bits are read
 * from the driver when the checkpoint is written.
 *
 * This file calls nothing of the other graph files (graph_nodes.c and
 * graphs.c call lupw_child_forget and lupw_nodes_forget here).
 */
#define LUP_LOG_CAT LUP_LOGC_GPU
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "worker/graphs.h"
#include "worker/session.h"

#define CHILD_MAX_DEPTH 32 /* nested child graphs followed */

struct owned_hunt {
        void *real;    /* a graph handle by its driver graph, or */
        uint64_t node; /* the graph owned by this node */
        uint64_t id;
};

static void find_graph(uint64_t key, uint64_t val, void *ud)
{
        struct owned_hunt *h = ud;
        const struct lupw_handle_ent *e = (const struct lupw_handle_ent *)(uintptr_t)val;
        if (h->id || e->kind != LUPW_H_GRAPH)
                return;
        if (h->real ? e->real == h->real : (e->prov.flags & LUPW_GRAPH_OWNED) && e->prov.parent == h->node)
                h->id = key;
}

uint64_t lupw_graph_id_of(struct lupw_session *s, CUgraph real)
{
        struct owned_hunt h = { .real = real };
        if (real)
                lup_u64map_each(&s->obj.handles, find_graph, &h);
        return h.id;
}

struct of_graph {
        uint64_t graph;
        uint64_t *ids;
        size_t n, cap;
};

static void nodes_of(uint64_t key, uint64_t val, void *ud)
{
        struct of_graph *o = ud;
        const struct lupw_handle_ent *e = (const struct lupw_handle_ent *)(uintptr_t)val;
        if (e->kind == LUPW_H_GRAPHNODE && e->prov.parent == o->graph && o->n < o->cap)
                o->ids[o->n++] = key;
}

static void child_forget(struct lupw_session *s, uint64_t node, unsigned depth);

/* Forgets the ids of graph's nodes and, through its child graph nodes, the
 * graphs of theirs the client holds by id (CHILD_MAX_DEPTH deep). */
static void nodes_forget(struct lupw_session *s, uint64_t graph, unsigned depth)
{
        struct of_graph o = { .graph = graph, .cap = s->obj.handles.used };
        if (!o.cap || !(o.ids = calloc(o.cap, sizeof(*o.ids))))
                return;
        lup_u64map_each(&s->obj.handles, nodes_of, &o);
        for (size_t i = 0; i < o.n; i++) {
                struct lupw_handle_ent *e = lupw_handle_ent(s, LUPW_H_GRAPHNODE, o.ids[i]);
                child_forget(s, o.ids[i], depth);
                if (e)
                        lup_u64map_del(&s->graphs.node_ids, (uint64_t)(uintptr_t)e->real, NULL);
                lupw_handle_del(s, o.ids[i]);
        }
        free(o.ids);
}

/* The graph a child graph node owns, if the client holds it by id. */
static void child_forget(struct lupw_session *s, uint64_t node, unsigned depth)
{
        struct owned_hunt h = { .node = node };
        if (!node || depth > CHILD_MAX_DEPTH)
                return;
        lup_u64map_each(&s->obj.handles, find_graph, &h);
        if (!h.id)
                return;
        nodes_forget(s, h.id, depth + 1);
        lupw_handle_del(s, h.id);
}

void lupw_child_forget(struct lupw_session *s, uint64_t node)
{
        child_forget(s, node, 0);
}

void lupw_nodes_forget(struct lupw_session *s, uint64_t graph)
{
        nodes_forget(s, graph, 0);
}

CUresult lupw_lupGraphChildGet(struct lupw_session *s, CUgraphNode hNode, uint64_t id, uint64_t *graph)
{
        uint64_t node = s->cur.parent; /* hNode's id */
        CUgraph child = NULL;
        CUresult r = s->be.fn.cuGraphChildGraphNodeGetGraph(hNode, &child);
        if (r != CUDA_SUCCESS)
                return r;
        uint64_t have = lupw_graph_id_of(s, child);
        if (have) { /* asked before: the same graph, the same id */
                *graph = have;
                return CUDA_SUCCESS;
        }
        if (id < LUP_FIRST_HANDLE_ID || (id - LUP_FIRST_HANDLE_ID) % 16 || lup_u64map_get(&s->obj.handles, id, NULL))
                return CUDA_ERROR_INVALID_VALUE;
        lupw_prov_free(&s->obj.prov);
        s->obj.prov.parent = node;
        s->obj.prov.flags = LUPW_GRAPH_OWNED;
        if ((r = lupw_handle_put(s, LUPW_H_GRAPH, id, child)) == CUDA_SUCCESS)
                *graph = id;
        return r;
}

CUresult lupw_lupGraphChildSet(struct lupw_session *s, uint64_t node, CUgraph child)
{
        struct lupw_handle_ent *ne = lupw_handle_ent(s, LUPW_H_GRAPHNODE, node);
        struct lupw_handle_ent *ce = lupw_handle_ent(s, LUPW_H_GRAPH, s->cur.parent);
        CUgraphNodeParams p;
        if (!ne || !ce || (ce->prov.flags & LUPW_GRAPH_CAPTURING))
                return CUDA_ERROR_INVALID_VALUE;
        memset(&p, 0, sizeof(p));
        p.type = CU_GRAPH_NODE_TYPE_GRAPH;
        p.graph.graph = child;
        p.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE;
        CUresult r = s->be.fn.cuGraphNodeSetParams((CUgraphNode)ne->real, &p);
        if (r == CUDA_SUCCESS) /* the node's old graph is gone, and the ids in it */
                lupw_child_forget(s, node);
        return r;
}

/* The clone's node of an exec's node id (NULL: none). */
static CUgraphNode exec_node(struct lupw_session *s, CUgraphExec x, uint64_t node)
{
        uint64_t xv = 0, v = 0;
        lup_u64map_get(&s->graphs.exec_src, (uint64_t)(uintptr_t)x, &xv);
        struct lupw_exec *xr = (struct lupw_exec *)(uintptr_t)xv;
        if (!xr || !lup_u64map_get(&xr->nodes, node, &v))
                return NULL;
        return (CUgraphNode)(uintptr_t)v;
}

static CUresult copy_params(const struct lupw_backend *be, CUgraph dst, CUgraph src, unsigned depth);

static CUresult copy_node(const struct lupw_backend *be, CUgraphNode d, CUgraphNode n, unsigned depth)
{
        CUgraphNodeType td, tn;
        CUresult r = be->cuGraphNodeGetType(d, &td);
        if (r == CUDA_SUCCESS)
                r = be->cuGraphNodeGetType(n, &tn);
        if (r != CUDA_SUCCESS || td != tn)
                return r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_VALUE;
        switch (tn) {
        case CU_GRAPH_NODE_TYPE_KERNEL: {
                CUDA_KERNEL_NODE_PARAMS k;
                memset(&k, 0, sizeof(k));
                r = be->cuGraphKernelNodeGetParams_v2(n, &k);
                return r == CUDA_SUCCESS ? be->cuGraphKernelNodeSetParams_v2(d, &k) : r;
        }
        case CU_GRAPH_NODE_TYPE_MEMSET: {
                CUDA_MEMSET_NODE_PARAMS m;
                r = be->cuGraphMemsetNodeGetParams(n, &m);
                return r == CUDA_SUCCESS ? be->cuGraphMemsetNodeSetParams(d, &m) : r;
        }
        case CU_GRAPH_NODE_TYPE_MEMCPY: {
                CUDA_MEMCPY3D c;
                memset(&c, 0, sizeof(c));
                r = be->cuGraphMemcpyNodeGetParams(n, &c);
                return r == CUDA_SUCCESS ? be->cuGraphMemcpyNodeSetParams(d, &c) : r;
        }
        case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        case CU_GRAPH_NODE_TYPE_WAIT_EVENT: {
                CUevent e;
                bool rec = tn == CU_GRAPH_NODE_TYPE_EVENT_RECORD;
                r = rec ? be->cuGraphEventRecordNodeGetEvent(n, &e) : be->cuGraphEventWaitNodeGetEvent(n, &e);
                if (r == CUDA_SUCCESS)
                        r = rec ? be->cuGraphEventRecordNodeSetEvent(d, e) : be->cuGraphEventWaitNodeSetEvent(d, e);
                return r;
        }
        case CU_GRAPH_NODE_TYPE_GRAPH: {
                CUgraph gd, gn;
                r = be->cuGraphChildGraphNodeGetGraph(d, &gd);
                if (r == CUDA_SUCCESS)
                        r = be->cuGraphChildGraphNodeGetGraph(n, &gn);
                return r == CUDA_SUCCESS ? copy_params(be, gd, gn, depth + 1) : r;
        }
        case CU_GRAPH_NODE_TYPE_EMPTY:
                return CUDA_SUCCESS;
        default:
                return CUDA_ERROR_NOT_SUPPORTED;
        }
}

/* src's node parameters into dst, node by node in the driver's order (the
 * order of insertion, which the driver requires to match). */
static CUresult copy_params(const struct lupw_backend *be, CUgraph dst, CUgraph src, unsigned depth)
{
        size_t nd = 0, ns = 0;
        if (depth > CHILD_MAX_DEPTH)
                return CUDA_ERROR_NOT_SUPPORTED;
        CUresult r = be->cuGraphGetNodes(dst, NULL, &nd);
        if (r == CUDA_SUCCESS)
                r = be->cuGraphGetNodes(src, NULL, &ns);
        if (r != CUDA_SUCCESS || nd != ns)
                return r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_VALUE;
        CUgraphNode *vd = calloc(nd + 1, sizeof(*vd)), *vs = calloc(ns + 1, sizeof(*vs));
        if (!vd || !vs)
                r = CUDA_ERROR_OUT_OF_MEMORY;
        if (r == CUDA_SUCCESS && nd)
                r = be->cuGraphGetNodes(dst, vd, &nd);
        if (r == CUDA_SUCCESS && ns)
                r = be->cuGraphGetNodes(src, vs, &ns);
        for (size_t i = 0; r == CUDA_SUCCESS && i < nd; i++)
                r = copy_node(be, vd[i], vs[i], depth);
        free(vd);
        free(vs);
        return r;
}

CUresult lupw_lupGraphExecChild(struct lupw_session *s, CUgraphExec hGraphExec, uint64_t node, CUgraph child)
{
        const struct lupw_backend *be = &s->be.fn;
        CUgraphNode cn = exec_node(s, hGraphExec, node);
        CUgraph mine;
        if (!cn)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = be->cuGraphExecChildGraphNodeSetParams(hGraphExec, cn, child);
        if (r != CUDA_SUCCESS)
                return r;
        /* the exec's clone carries the change into a checkpoint */
        r = be->cuGraphChildGraphNodeGetGraph(cn, &mine);
        if (r == CUDA_SUCCESS)
                r = copy_params(be, mine, child, 0);
        if (r != CUDA_SUCCESS)
                lup_err("session %s: cuGraphExecChildGraphNodeSetParams: the exec changed, but its copy kept for a "
                        "checkpoint could not follow (CUresult %d): a restore brings back the parameters before",
                        s->name, (int)r);
        uint64_t xv = 0; /* a split exec: the segment holding the node (worker/graph_host.c) */
        lup_u64map_get(&s->graphs.exec_src, (uint64_t)(uintptr_t)hGraphExec, &xv);
        return xv ? lupw_split_sync(s, (struct lupw_exec *)(uintptr_t)xv, node, cn) : CUDA_SUCCESS;
}

/* op 0: read the bit into *got; 1: set it to `on` */
CUresult lupw_lupGraphNodeEnabled(struct lupw_session *s, CUgraphExec hGraphExec, uint64_t node, unsigned int op,
                                  unsigned int on, unsigned int *got)
{
        CUgraphNode cn = exec_node(s, hGraphExec, node);
        unsigned v = 0;
        *got = 0;
        if (!cn || op > 1)
                return CUDA_ERROR_INVALID_VALUE;
        if (op == 1) { /* a split exec's segments too (worker/graph_host.c) */
                uint64_t xv = 0;
                CUresult r = s->be.fn.cuGraphNodeSetEnabled(hGraphExec, cn, on);
                lup_u64map_get(&s->graphs.exec_src, (uint64_t)(uintptr_t)hGraphExec, &xv);
                if (r == CUDA_SUCCESS && xv)
                        r = lupw_split_carry_enabled(s, (struct lupw_exec *)(uintptr_t)xv, hGraphExec);
                return r;
        }
        CUresult r = s->be.fn.cuGraphNodeGetEnabled(hGraphExec, cn, &v);
        *got = v;
        return r;
}

/* After cuGraphExecUpdate made exec `to` (of clone to_src) out of `from`
 * (of from_src), the nodes turned off in `from` are turned off in `to`:
 * the driver's update keeps them. The graphs have the same shape, so
 * their nodes pair in the driver's order. */
CUresult lupw_exec_carry_off(struct lupw_session *s, CUgraphExec from, CUgraph from_src, CUgraphExec to, CUgraph to_src)
{
        const struct lupw_backend *be = &s->be.fn;
        size_t nf = 0, nt = 0;
        CUresult r = be->cuGraphGetNodes(from_src, NULL, &nf);
        if (r == CUDA_SUCCESS)
                r = be->cuGraphGetNodes(to_src, NULL, &nt);
        if (r != CUDA_SUCCESS || nf != nt)
                return r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_VALUE;
        CUgraphNode *vf = calloc(nf + 1, sizeof(*vf)), *vt = calloc(nt + 1, sizeof(*vt));
        if (!vf || !vt)
                r = CUDA_ERROR_OUT_OF_MEMORY;
        if (r == CUDA_SUCCESS && nf)
                r = be->cuGraphGetNodes(from_src, vf, &nf);
        if (r == CUDA_SUCCESS && nt)
                r = be->cuGraphGetNodes(to_src, vt, &nt);
        for (size_t i = 0; r == CUDA_SUCCESS && i < nf; i++) {
                CUgraphNodeType t;
                unsigned on = 1;
                if (be->cuGraphNodeGetType(vf[i], &t) != CUDA_SUCCESS ||
                    (t != CU_GRAPH_NODE_TYPE_KERNEL && t != CU_GRAPH_NODE_TYPE_MEMSET &&
                     t != CU_GRAPH_NODE_TYPE_MEMCPY))
                        continue;
                if (be->cuGraphNodeGetEnabled(from, vf[i], &on) == CUDA_SUCCESS && !on)
                        r = be->cuGraphNodeSetEnabled(to, vt[i], 0);
        }
        free(vf);
        free(vt);
        return r;
}
