/* SPDX-License-Identifier: MIT */
/*
 * Host nodes inside child graph nodes: before an exec is split around its
 * host nodes (worker/graph_host.c), every child graph node whose graph
 * holds a host node (at any depth) is replaced, in the exec's clone, by
 * copies of the child's nodes between two empty nodes: one after the
 * child node's dependencies, before every copy, and one after every copy,
 * before the child node's dependents. The copies keep the child's own
 * edges. A copied child graph node is looked at again, so nested ones are
 * flattened too.
 *
 * The exec itself was instantiated from the clone before this, so it is
 * unchanged; the clone's node map loses the child node (its id names no
 * node of the clone any more). A checkpoint saves the flattened clone,
 * whose copies have no client ids.
 */
#define LUP_LOG_CAT LUP_LOGC_GPU
#include <stdlib.h>
#include <string.h>

#include "ckpt_graph.h"
#include "log.h"
#include "worker/graphs.h"
#include "worker/session.h"

#define MAX_PASSES 4096 /* child graph nodes flattened per exec */

CUresult lupw_graph_nodes(const struct lupw_backend *be, CUgraph g, CUgraphNode **ret, size_t *ret_n)
{
        size_t n = 0;
        CUresult r = be->cuGraphGetNodes(g, NULL, &n);
        CUgraphNode *v = r == CUDA_SUCCESS ? calloc(n + 1, sizeof(*v)) : NULL;
        if (r == CUDA_SUCCESS && !v)
                r = CUDA_ERROR_OUT_OF_MEMORY;
        if (r == CUDA_SUCCESS && n)
                r = be->cuGraphGetNodes(g, v, &n);
        if (r != CUDA_SUCCESS) {
                free(v);
                return r;
        }
        *ret = v;
        *ret_n = n;
        return CUDA_SUCCESS;
}

/* Whether g holds a host node, itself or in a child graph node (any depth). */
static CUresult has_hosts(const struct lupw_backend *be, CUgraph g, int depth, bool *ret)
{
        CUgraphNode *v;
        size_t n;
        if (depth > 64)
                return CUDA_ERROR_NOT_SUPPORTED;
        CUresult r = lupw_graph_nodes(be, g, &v, &n);
        if (r != CUDA_SUCCESS)
                return r;
        for (size_t i = 0; r == CUDA_SUCCESS && !*ret && i < n; i++) {
                CUgraphNodeType t;
                CUgraph child;
                if ((r = be->cuGraphNodeGetType(v[i], &t)) != CUDA_SUCCESS)
                        break;
                if (t == CU_GRAPH_NODE_TYPE_HOST)
                        *ret = true;
                else if (t == CU_GRAPH_NODE_TYPE_GRAPH && (r = be->cuGraphChildGraphNodeGetGraph(v[i], &child)) == 0)
                        r = has_hosts(be, child, depth + 1, ret);
        }
        free(v);
        return r;
}

/* A copy of node n (of another graph) in g, without dependencies. */
static CUresult copy_node(const struct lupw_backend *be, CUgraph g, CUgraphNode n, CUgraphNode *ret)
{
        CUgraphNodeType t;
        CUcontext cur = NULL;
        CUevent ev;
        CUresult r = be->cuGraphNodeGetType(n, &t);
        if (r != CUDA_SUCCESS)
                return r;
        (void)be->cuCtxGetCurrent(&cur);
        switch (t) {
        case CU_GRAPH_NODE_TYPE_KERNEL: {
                CUDA_KERNEL_NODE_PARAMS p;
                memset(&p, 0, sizeof(p));
                r = be->cuGraphKernelNodeGetParams_v2(n, &p);
                return r == CUDA_SUCCESS ? be->cuGraphAddKernelNode_v2(ret, g, NULL, 0, &p) : r;
        }
        case CU_GRAPH_NODE_TYPE_MEMSET: {
                CUDA_MEMSET_NODE_PARAMS p;
                r = be->cuGraphMemsetNodeGetParams(n, &p);
                return r == CUDA_SUCCESS ? be->cuGraphAddMemsetNode(ret, g, NULL, 0, &p, cur) : r;
        }
        case CU_GRAPH_NODE_TYPE_MEMCPY: {
                CUDA_MEMCPY3D p;
                memset(&p, 0, sizeof(p));
                r = be->cuGraphMemcpyNodeGetParams(n, &p);
                return r == CUDA_SUCCESS ? be->cuGraphAddMemcpyNode(ret, g, NULL, 0, &p, cur) : r;
        }
        case CU_GRAPH_NODE_TYPE_EMPTY:
                return be->cuGraphAddEmptyNode(ret, g, NULL, 0);
        case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
                r = be->cuGraphEventRecordNodeGetEvent(n, &ev);
                return r == CUDA_SUCCESS ? be->cuGraphAddEventRecordNode(ret, g, NULL, 0, ev) : r;
        case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
                r = be->cuGraphEventWaitNodeGetEvent(n, &ev);
                return r == CUDA_SUCCESS ? be->cuGraphAddEventWaitNode(ret, g, NULL, 0, ev) : r;
        case CU_GRAPH_NODE_TYPE_HOST: {
                CUDA_HOST_NODE_PARAMS p;
                r = be->cuGraphHostNodeGetParams(n, &p);
                return r == CUDA_SUCCESS ? be->cuGraphAddHostNode(ret, g, NULL, 0, &p) : r;
        }
        case CU_GRAPH_NODE_TYPE_GRAPH: { /* a node's own graph cannot be another's child: a clone of it */
                CUgraph child, c2 = NULL;
                r = be->cuGraphChildGraphNodeGetGraph(n, &child);
                if (r == CUDA_SUCCESS)
                        r = be->cuGraphClone(&c2, child);
                if (r == CUDA_SUCCESS)
                        r = be->cuGraphAddChildGraphNode(ret, g, NULL, 0, c2);
                if (c2)
                        (void)be->cuGraphDestroy(c2);
                return r;
        }
        default:
                return CUDA_ERROR_NOT_SUPPORTED;
        }
}

/* The dependencies (out 0) or dependents (out 1) of n (malloc'ed). */
static CUresult neighbours(const struct lupw_backend *be, CUgraphNode n, int out, CUgraphNode **ret, size_t *ret_n)
{
        size_t k = 0;
        CUresult r = out ? be->cuGraphNodeGetDependentNodes_v2(n, NULL, NULL, &k)
                         : be->cuGraphNodeGetDependencies_v2(n, NULL, NULL, &k);
        CUgraphNode *v = r == CUDA_SUCCESS ? calloc(k + 1, sizeof(*v)) : NULL;
        if (r == CUDA_SUCCESS && !v)
                r = CUDA_ERROR_OUT_OF_MEMORY;
        if (r == CUDA_SUCCESS && k)
                r = out ? be->cuGraphNodeGetDependentNodes_v2(n, v, NULL, &k)
                        : be->cuGraphNodeGetDependencies_v2(n, v, NULL, &k);
        if (r != CUDA_SUCCESS) {
                free(v);
                return r;
        }
        *ret = v;
        *ret_n = k;
        return CUDA_SUCCESS;
}

struct drop {
        CUgraphNode n;
        uint64_t ids[64];
        int k;
};

static void drop_of(uint64_t key, uint64_t val, void *ud)
{
        struct drop *d = ud;
        if ((CUgraphNode)(uintptr_t)val == d->n && d->k < 64)
                d->ids[d->k++] = key;
}

/* Child graph node c of g replaced by copies of its graph's nodes. */
static CUresult inline_child(struct lupw_session *s, struct lupw_exec *x, CUgraph g, CUgraphNode c)
{
        const struct lupw_backend *be = &s->be.fn;
        CUgraph child;
        CUgraphNode *cn = NULL, *copy = NULL, *deps = NULL, *outs = NULL, *from = NULL, *to = NULL, entry, exit_;
        size_t n = 0, nd = 0, no = 0, ne = 0;
        struct lup_u64map index;
        lup_u64map_init(&index, LUP_CKPT_MAX_GRAPH_NODES);
        CUresult r = be->cuGraphChildGraphNodeGetGraph(c, &child);
        if (r == CUDA_SUCCESS)
                r = lupw_graph_nodes(be, child, &cn, &n);
        if (r == CUDA_SUCCESS)
                r = be->cuGraphGetEdges_v2(child, NULL, NULL, NULL, &ne);
        if (r == CUDA_SUCCESS && !((from = calloc(ne + 1, sizeof(*from))) && (to = calloc(ne + 1, sizeof(*to))) &&
                                   (copy = calloc(n + 1, sizeof(*copy)))))
                r = CUDA_ERROR_OUT_OF_MEMORY;
        if (r == CUDA_SUCCESS && ne)
                r = be->cuGraphGetEdges_v2(child, from, to, NULL, &ne);
        if (r == CUDA_SUCCESS)
                r = neighbours(be, c, 0, &deps, &nd);
        if (r == CUDA_SUCCESS)
                r = neighbours(be, c, 1, &outs, &no);
        if (r == CUDA_SUCCESS)
                r = be->cuGraphAddEmptyNode(&entry, g, deps, nd);
        for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++) {
                if ((r = copy_node(be, g, cn[i], &copy[i])) == CUDA_SUCCESS)
                        r = be->cuGraphAddDependencies_v2(g, &entry, &copy[i], NULL, 1);
                if (r == CUDA_SUCCESS && lup_u64map_put(&index, (uint64_t)(uintptr_t)cn[i], i) < 0)
                        r = CUDA_ERROR_OUT_OF_MEMORY;
        }
        for (size_t e = 0; r == CUDA_SUCCESS && e < ne; e++) {
                uint64_t a, b;
                if (!lup_u64map_get(&index, (uint64_t)(uintptr_t)from[e], &a) ||
                    !lup_u64map_get(&index, (uint64_t)(uintptr_t)to[e], &b))
                        r = CUDA_ERROR_UNKNOWN;
                else
                        r = be->cuGraphAddDependencies_v2(g, &copy[a], &copy[b], NULL, 1);
        }
        if (r == CUDA_SUCCESS)
                r = be->cuGraphAddEmptyNode(&exit_, g, n ? copy : &entry, n ? n : 1);
        for (size_t i = 0; r == CUDA_SUCCESS && i < no; i++)
                r = be->cuGraphAddDependencies_v2(g, &exit_, &outs[i], NULL, 1);
        if (r == CUDA_SUCCESS) {
                struct drop d = { .n = c };
                lup_u64map_each(&x->nodes, drop_of, &d);
                for (int i = 0; i < d.k; i++)
                        lup_u64map_del(&x->nodes, d.ids[i], NULL);
                r = be->cuGraphDestroyNode(c);
        }
        lup_u64map_free(&index);
        free(cn);
        free(copy);
        free(deps);
        free(outs);
        free(from);
        free(to);
        return r;
}

/* One child graph node of g holding a host node (*ret NULL: none). */
static CUresult find_nested(const struct lupw_backend *be, CUgraph g, CUgraphNode *ret)
{
        CUgraphNode *v;
        size_t n;
        *ret = NULL;
        CUresult r = lupw_graph_nodes(be, g, &v, &n);
        if (r != CUDA_SUCCESS)
                return r;
        for (size_t i = 0; r == CUDA_SUCCESS && !*ret && i < n; i++) {
                CUgraphNodeType t;
                CUgraph child;
                bool hosts = false;
                if ((r = be->cuGraphNodeGetType(v[i], &t)) != CUDA_SUCCESS || t != CU_GRAPH_NODE_TYPE_GRAPH)
                        continue;
                if ((r = be->cuGraphChildGraphNodeGetGraph(v[i], &child)) == CUDA_SUCCESS &&
                    (r = has_hosts(be, child, 1, &hosts)) == CUDA_SUCCESS && hosts)
                        *ret = v[i];
        }
        free(v);
        return r;
}

CUresult lupw_graph_flatten(struct lupw_session *s, struct lupw_exec *x, int *ret_n)
{
        *ret_n = 0;
        for (int pass = 0; pass < MAX_PASSES; pass++) {
                CUgraphNode c;
                CUresult r = find_nested(&s->be.fn, x->src, &c);
                if (r != CUDA_SUCCESS || !c)
                        return r;
                if ((r = inline_child(s, x, x->src, c)) != CUDA_SUCCESS)
                        return r;
                ++*ret_n;
        }
        lup_warn("session %s: a graph with more than %d child graph nodes holding host nodes: refused", s->name,
                 MAX_PASSES);
        return CUDA_ERROR_NOT_SUPPORTED;
}
