/* SPDX-License-Identifier: MIT */
/*
 * Changing an executable graph: cuGraphExecUpdate, the cuGraphExec*SetParams
 * family and cuGraphNodeSetEnabled. Each names nodes of the user's graph;
 * the executable graph's copy of a node remembers which (clone_of). A
 * change must keep the graph's shape and each node's kind of work, as the
 * driver requires; it applies to later launches only, since a launch
 * copies what it runs.
 */
#include <stdlib.h>
#include <string.h>

#include "sim_graph.h"

/* ---- changing an executable graph ---- */

/* The node of x's copy made from the user's node h, at any depth. */
static struct sim_gnode *find_in(struct sim_graph *g, uint64_t id, unsigned depth)
{
        for (size_t i = 0; g && depth <= SIM_MAX_GRAPH_DEPTH && i < g->n; i++) {
                struct sim_gnode *n = g->nodes[i], *f;

                if (n->clone_of == id)
                        return n;
                if (n->p.type == CU_GRAPH_NODE_TYPE_GRAPH && (f = find_in(n->p.u.child, id, depth + 1)))
                        return f;
        }
        return NULL;
}

static struct sim_gnode *exec_node(struct sim_exec *x, CUgraphNode h)
{
        uint64_t id = sim_handle_id((uint64_t)(uintptr_t)h, SIM_TAG_NODE);

        return id ? find_in(x->g, id, 0) : NULL;
}

/* Whether a and b have the same shape: nodes, types, edges (by index),
 * children; the first node that differs in *ret_err. */
static CUgraphExecUpdateResult same_shape(struct sim_graph *a, struct sim_graph *b, unsigned depth,
                                          struct sim_gnode **ret_err)
{
        CUgraphExecUpdateResult res;

        if (a->n != b->n || depth > SIM_MAX_GRAPH_DEPTH)
                return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        for (size_t i = 0; i < a->n; i++) {
                a->nodes[i]->mark = i;
                b->nodes[i]->mark = i;
        }
        for (size_t i = 0; i < a->n; i++) {
                struct sim_gnode *x = a->nodes[i], *y = b->nodes[i];

                *ret_err = y;
                res = sim_nparams_updatable(&x->p, &y->p);
                if (res != CU_GRAPH_EXEC_UPDATE_SUCCESS)
                        return res;
                if (x->ndeps != y->ndeps)
                        return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
                /* The same set of dependencies, in whatever order. */
                for (size_t j = 0; j < x->ndeps; j++) {
                        bool found = false;

                        for (size_t k = 0; k < y->ndeps && !found; k++)
                                found = x->deps[j]->mark == y->deps[k]->mark;
                        if (!found)
                                return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
                }
        }
        for (size_t i = 0; i < a->n; i++)
                if (a->nodes[i]->p.type == CU_GRAPH_NODE_TYPE_GRAPH) {
                        res = same_shape(a->nodes[i]->p.u.child, b->nodes[i]->p.u.child, depth + 1, ret_err);
                        if (res != CU_GRAPH_EXEC_UPDATE_SUCCESS)
                                return res;
                        for (size_t k = 0; k < a->n; k++) {
                                a->nodes[k]->mark = k;
                                b->nodes[k]->mark = k;
                        }
                }
        *ret_err = NULL;
        return CU_GRAPH_EXEC_UPDATE_SUCCESS;
}

/* Copies b's parameters (not its children: their nodes in turn) into a,
 * whose shape is b's. All copies are made before any is swapped in. */
static CUresult take_params(struct sim_driver *drv, struct sim_graph *a, struct sim_graph *b, unsigned depth)
{
        struct sim_nparams *np;
        CUresult r = CUDA_SUCCESS;
        size_t i;

        if (depth > SIM_MAX_GRAPH_DEPTH)
                return CUDA_ERROR_INVALID_VALUE;
        np = calloc(a->n ? a->n : 1, sizeof(*np));
        if (!np)
                return CUDA_ERROR_OUT_OF_MEMORY;
        for (i = 0; i < a->n && r == CUDA_SUCCESS; i++)
                if (b->nodes[i]->p.type != CU_GRAPH_NODE_TYPE_GRAPH)
                        r = sim_nparams_copy(&b->nodes[i]->p, &np[i], true);
        if (r != CUDA_SUCCESS) {
                while (i-- > 0)
                        if (b->nodes[i]->p.type != CU_GRAPH_NODE_TYPE_GRAPH)
                                sim_nparams_release(drv, &np[i]);
                free(np);
                return r;
        }
        for (i = 0; i < a->n; i++)
                if (b->nodes[i]->p.type != CU_GRAPH_NODE_TYPE_GRAPH) {
                        sim_nparams_release(drv, &a->nodes[i]->p);
                        a->nodes[i]->p = np[i];
                }
        free(np);
        for (i = 0; i < a->n && r == CUDA_SUCCESS; i++)
                if (b->nodes[i]->p.type == CU_GRAPH_NODE_TYPE_GRAPH)
                        r = take_params(drv, a->nodes[i]->p.u.child, b->nodes[i]->p.u.child, depth + 1);
        return r;
}

SIM_API CUresult cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphExecUpdateResultInfo *resultInfo)
{
        struct sim_driver *drv = sim_driver_get();
        CUgraphExecUpdateResult res = CU_GRAPH_EXEC_UPDATE_ERROR;
        struct sim_gnode *err = NULL;
        struct sim_exec *x;
        struct sim_graph *g;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!resultInfo)
                return CUDA_ERROR_INVALID_VALUE;
        sim_wrlock(drv);
        sim_graph_lock();
        x = sim_exec_lookup(hGraphExec);
        g = sim_graph_lookup(hGraph);
        r = x && g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
        if (r == CUDA_SUCCESS) {
                res = same_shape(x->g, g, 0, &err);
                if (res != CU_GRAPH_EXEC_UPDATE_SUCCESS)
                        r = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
        }
        if (r == CUDA_SUCCESS) {
                r = take_params(drv, x->g, g, 0);
                res = r == CUDA_SUCCESS ? CU_GRAPH_EXEC_UPDATE_SUCCESS : CU_GRAPH_EXEC_UPDATE_ERROR;
        }
        resultInfo->result = res;
        resultInfo->errorNode = sim_node_handle(err);
        resultInfo->errorFromNode = NULL;
        sim_graph_unlock();
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphNode *hErrorNode_out,
                                   CUgraphExecUpdateResult *updateResult_out)
{
        CUgraphExecUpdateResultInfo info = { 0 };
        CUresult r;

        if (!hErrorNode_out || !updateResult_out)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = cuGraphExecUpdate_v2(hGraphExec, hGraph, &info);
        *hErrorNode_out = info.errorNode;
        *updateResult_out = info.result;
        return r;
}

/* Sets the parameters of the copy of node h in x to np, if the driver
 * would: same type, an updatable change. */
SIM_API CUresult cuGraphExecNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode, CUgraphNodeParams *nodeParams)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_nparams p;
        struct sim_gnode *n;
        struct sim_exec *x;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!nodeParams)
                return CUDA_ERROR_INVALID_VALUE;
        /* A child graph: its nodes' parameters, as
         * cuGraphExecChildGraphNodeSetParams (the driver's table of what
         * an exec takes: topology must match, recursively). */
        if (nodeParams->type == CU_GRAPH_NODE_TYPE_GRAPH) {
                if (nodeParams->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE)
                        return CUDA_ERROR_INVALID_VALUE;
                return cuGraphExecChildGraphNodeSetParams(hGraphExec, hNode, nodeParams->graph.graph);
        }
        sim_wrlock(drv);
        sim_graph_lock();
        x = sim_exec_lookup(hGraphExec);
        n = x ? exec_node(x, hNode) : NULL;
        if (!n || n->p.type != nodeParams->type || n->p.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC ||
            n->p.type == CU_GRAPH_NODE_TYPE_MEM_FREE)
                r = CUDA_ERROR_INVALID_VALUE;
        else
                r = sim_nparams_from_generic(drv, n->graph, nodeParams, &p);
        if (r == CUDA_SUCCESS && sim_nparams_updatable(&n->p, &p) != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
                sim_nparams_release(drv, &p);
                r = CUDA_ERROR_INVALID_VALUE;
        }
        if (r == CUDA_SUCCESS) {
                sim_nparams_release(drv, &n->p);
                n->p = p;
        }
        sim_graph_unlock();
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                   const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams)
{
        CUgraphNodeParams np = { .type = CU_GRAPH_NODE_TYPE_KERNEL };

        if (!nodeParams)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        memcpy(&np.kernel, nodeParams, sizeof(*nodeParams));
        return cuGraphExecNodeSetParams(hGraphExec, hNode, &np);
}

SIM_API CUresult cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
        CUDA_KERNEL_NODE_PARAMS_v2 k = { 0 };

        if (!nodeParams)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        memcpy(&k, nodeParams, sizeof(*nodeParams));
        return cuGraphExecKernelNodeSetParams_v2(hGraphExec, hNode, &k);
}

SIM_API CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
        CUgraphNodeParams np = { .type = CU_GRAPH_NODE_TYPE_MEMCPY };

        if (!copyParams)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        np.memcpy.copyCtx = ctx;
        np.memcpy.copyParams = *copyParams;
        return cuGraphExecNodeSetParams(hGraphExec, hNode, &np);
}

SIM_API CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
        CUgraphNodeParams np = { .type = CU_GRAPH_NODE_TYPE_MEMSET };

        if (!memsetParams)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        np.memset = (CUDA_MEMSET_NODE_PARAMS_v2){
                .dst = memsetParams->dst,
                .pitch = memsetParams->pitch,
                .value = memsetParams->value,
                .elementSize = memsetParams->elementSize,
                .width = memsetParams->width,
                .height = memsetParams->height,
                .ctx = ctx,
        };
        return cuGraphExecNodeSetParams(hGraphExec, hNode, &np);
}

SIM_API CUresult cuGraphExecHostNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                              const CUDA_HOST_NODE_PARAMS *nodeParams)
{
        CUgraphNodeParams np = { .type = CU_GRAPH_NODE_TYPE_HOST };

        if (!nodeParams)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        np.host = (CUDA_HOST_NODE_PARAMS_v2){ .fn = nodeParams->fn, .userData = nodeParams->userData };
        return cuGraphExecNodeSetParams(hGraphExec, hNode, &np);
}

static CUresult exec_event(CUgraphExec hGraphExec, CUgraphNode hNode, CUevent event, CUgraphNodeType t)
{
        CUgraphNodeParams np = { .type = t };

        if (t == CU_GRAPH_NODE_TYPE_EVENT_RECORD)
                np.eventRecord.event = event;
        else
                np.eventWait.event = event;
        return cuGraphExecNodeSetParams(hGraphExec, hNode, &np);
}

SIM_API CUresult cuGraphExecEventRecordNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode, CUevent event)
{
        return exec_event(hGraphExec, hNode, event, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}

SIM_API CUresult cuGraphExecEventWaitNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode, CUevent event)
{
        return exec_event(hGraphExec, hNode, event, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

/* The child graph must have the shape of the one instantiated. */
SIM_API CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode, CUgraph childGraph)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_gnode *n, *err = NULL;
        struct sim_exec *x;
        struct sim_graph *c;
        CUresult r = CUDA_SUCCESS;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_wrlock(drv);
        sim_graph_lock();
        x = sim_exec_lookup(hGraphExec);
        n = x ? exec_node(x, hNode) : NULL;
        c = sim_graph_lookup(childGraph);
        if (!n || !c || n->p.type != CU_GRAPH_NODE_TYPE_GRAPH || sim_graph_has_mem_nodes(c))
                r = CUDA_ERROR_INVALID_VALUE;
        else if (same_shape(n->p.u.child, c, 0, &err) != CU_GRAPH_EXEC_UPDATE_SUCCESS)
                r = CUDA_ERROR_INVALID_VALUE;
        if (r == CUDA_SUCCESS)
                r = take_params(drv, n->p.u.child, c, 0);
        sim_graph_unlock();
        sim_unlock(drv);
        return r;
}

/* Kernel, memcpy and memset nodes may be disabled: they then do nothing. */
static CUresult enabled(CUgraphExec hGraphExec, CUgraphNode hNode, unsigned *get, unsigned set)
{
        struct sim_gnode *n;
        struct sim_exec *x;
        CUresult r = CUDA_SUCCESS;

        if (!sim_driver_get())
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_graph_lock();
        x = sim_exec_lookup(hGraphExec);
        n = x ? exec_node(x, hNode) : NULL;
        if (!n || (n->p.type != CU_GRAPH_NODE_TYPE_KERNEL && n->p.type != CU_GRAPH_NODE_TYPE_MEMCPY &&
                   n->p.type != CU_GRAPH_NODE_TYPE_MEMSET))
                r = CUDA_ERROR_INVALID_VALUE;
        else if (get)
                *get = !n->disabled;
        else
                n->disabled = !set;
        sim_graph_unlock();
        return r;
}

SIM_API CUresult cuGraphNodeSetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode, unsigned int isEnabled)
{
        return enabled(hGraphExec, hNode, NULL, isEnabled);
}

SIM_API CUresult cuGraphNodeGetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode, unsigned int *isEnabled)
{
        if (!isEnabled)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        return enabled(hGraphExec, hNode, isEnabled, 0);
}
