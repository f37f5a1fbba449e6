/* SPDX-License-Identifier: MIT */
/*
 * The typed node calls (cuGraphAdd*Node, cuGraph*NodeGetParams and
 * SetParams), each a translation onto the generic cuGraphAddNode and
 * cuGraphNodeSetParams of sim_graph_node.c, where the checks are.
 */
#include <string.h>

#include "sim_graph.h"

static CUresult add_typed(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t n, CUgraphNodeParams *np)
{
        return cuGraphAddNode_v2(ph, g, deps, NULL, n, np);
}

/* ---- kernel ---- */

static void kernel_v1_to_v3(const CUDA_KERNEL_NODE_PARAMS_v1 *a, CUDA_KERNEL_NODE_PARAMS_v3 *b)
{
        *b = (CUDA_KERNEL_NODE_PARAMS_v3){
                .func = a->func,
                .gridDimX = a->gridDimX,
                .gridDimY = a->gridDimY,
                .gridDimZ = a->gridDimZ,
                .blockDimX = a->blockDimX,
                .blockDimY = a->blockDimY,
                .blockDimZ = a->blockDimZ,
                .sharedMemBytes = a->sharedMemBytes,
                .kernelParams = a->kernelParams,
                .extra = a->extra,
        };
}

static void kernel_out(const struct sim_nparams *p, CUDA_KERNEL_NODE_PARAMS_v2 *k)
{
        struct sim_launch_cfg c;

        sim_launch_get_cfg(p->u.kernel.l, &c);
        *k = (CUDA_KERNEL_NODE_PARAMS_v2){
                .func = p->u.kernel.func ? p->u.kernel.func : (CUfunction)p->u.kernel.kern,
                .gridDimX = c.grid[0],
                .gridDimY = c.grid[1],
                .gridDimZ = c.grid[2],
                .blockDimX = c.block[0],
                .blockDimY = c.block[1],
                .blockDimZ = c.block[2],
                .sharedMemBytes = c.shared_bytes,
                .kernelParams = p->u.kernel.kp,
                .kern = p->u.kernel.kern,
                .ctx = p->ctx,
        };
}

SIM_API CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                         size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams)
{
        CUgraphNodeParams np = { .type = CU_GRAPH_NODE_TYPE_KERNEL };

        if (!nodeParams)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        memcpy(&np.kernel, nodeParams, sizeof(*nodeParams));
        return add_typed(phGraphNode, hGraph, dependencies, numDependencies, &np);
}

SIM_API CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                      size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
        CUgraphNodeParams np = { .type = CU_GRAPH_NODE_TYPE_KERNEL };

        if (!nodeParams)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        kernel_v1_to_v3(nodeParams, &np.kernel);
        return add_typed(phGraphNode, hGraph, dependencies, numDependencies, &np);
}

SIM_API CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams)
{
        struct sim_nparams p;
        CUresult r;

        if (!nodeParams)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = sim_node_get(hNode, CU_GRAPH_NODE_TYPE_KERNEL, &p);
        if (r == CUDA_SUCCESS)
                kernel_out(&p, nodeParams);
        return r;
}

SIM_API CUresult cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
        CUDA_KERNEL_NODE_PARAMS_v2 k;
        CUresult r;

        if (!nodeParams)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = cuGraphKernelNodeGetParams_v2(hNode, &k);
        if (r == CUDA_SUCCESS)
                memcpy(nodeParams, &k, sizeof(*nodeParams)); /* v1 is v2's prefix */
        return r;
}

SIM_API CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams)
{
        CUgraphNodeParams np = { .type = CU_GRAPH_NODE_TYPE_KERNEL };

        if (!nodeParams)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        memcpy(&np.kernel, nodeParams, sizeof(*nodeParams));
        return cuGraphNodeSetParams(hNode, &np);
}

SIM_API CUresult cuGraphKernelNodeSetParams(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
        CUgraphNodeParams np = { .type = CU_GRAPH_NODE_TYPE_KERNEL };

        if (!nodeParams)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        kernel_v1_to_v3(nodeParams, &np.kernel);
        return cuGraphNodeSetParams(hNode, &np);
}

/* ---- memcpy, memset ---- */

SIM_API CUresult cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                      size_t numDependencies, const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
        CUgraphNodeParams np = { .type = CU_GRAPH_NODE_TYPE_MEMCPY };

        if (!copyParams)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        np.memcpy.copyCtx = ctx;
        np.memcpy.copyParams = *copyParams;
        return add_typed(phGraphNode, hGraph, dependencies, numDependencies, &np);
}

SIM_API CUresult cuGraphMemcpyNodeGetParams(CUgraphNode hNode, CUDA_MEMCPY3D *nodeParams)
{
        struct sim_nparams p;
        CUresult r;

        if (!nodeParams)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = sim_node_get(hNode, CU_GRAPH_NODE_TYPE_MEMCPY, &p);
        if (r == CUDA_SUCCESS)
                *nodeParams = p.u.memcpy.desc;
        return r;
}

SIM_API CUresult cuGraphMemcpyNodeSetParams(CUgraphNode hNode, const CUDA_MEMCPY3D *nodeParams)
{
        CUgraphNodeParams np = { .type = CU_GRAPH_NODE_TYPE_MEMCPY };
        struct sim_nparams p;
        CUresult r;

        if (!nodeParams)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = sim_node_get(hNode, CU_GRAPH_NODE_TYPE_MEMCPY, &p);
        if (r != CUDA_SUCCESS)
                return r;
        np.memcpy.copyCtx = p.ctx;
        np.memcpy.copyParams = *nodeParams;
        return cuGraphNodeSetParams(hNode, &np);
}

static void memset_v2(const CUDA_MEMSET_NODE_PARAMS *a, CUcontext ctx, CUDA_MEMSET_NODE_PARAMS_v2 *b)
{
        *b = (CUDA_MEMSET_NODE_PARAMS_v2){ .dst = a->dst,
                                           .pitch = a->pitch,
                                           .value = a->value,
                                           .elementSize = a->elementSize,
                                           .width = a->width,
                                           .height = a->height,
                                           .ctx = ctx };
}

SIM_API CUresult cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                      size_t numDependencies, const CUDA_MEMSET_NODE_PARAMS *memsetParams,
                                      CUcontext ctx)
{
        CUgraphNodeParams np = { .type = CU_GRAPH_NODE_TYPE_MEMSET };

        if (!memsetParams)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        memset_v2(memsetParams, ctx, &np.memset);
        return add_typed(phGraphNode, hGraph, dependencies, numDependencies, &np);
}

SIM_API CUresult cuGraphMemsetNodeGetParams(CUgraphNode hNode, CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
        struct sim_nparams p;
        CUresult r;

        if (!nodeParams)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = sim_node_get(hNode, CU_GRAPH_NODE_TYPE_MEMSET, &p);
        if (r == CUDA_SUCCESS)
                *nodeParams = p.u.memset;
        return r;
}

SIM_API CUresult cuGraphMemsetNodeSetParams(CUgraphNode hNode, const CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
        CUgraphNodeParams np = { .type = CU_GRAPH_NODE_TYPE_MEMSET };
        struct sim_nparams p;
        CUresult r;

        if (!nodeParams)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = sim_node_get(hNode, CU_GRAPH_NODE_TYPE_MEMSET, &p);
        if (r != CUDA_SUCCESS)
                return r;
        memset_v2(nodeParams, p.ctx, &np.memset);
        return cuGraphNodeSetParams(hNode, &np);
}

/* ---- host, child graph, events, memory ---- */

SIM_API CUresult cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                    size_t numDependencies, const CUDA_HOST_NODE_PARAMS *nodeParams)
{
        CUgraphNodeParams np = { .type = CU_GRAPH_NODE_TYPE_HOST };

        if (!nodeParams)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        np.host = (CUDA_HOST_NODE_PARAMS_v2){ .fn = nodeParams->fn, .userData = nodeParams->userData };
        return add_typed(phGraphNode, hGraph, dependencies, numDependencies, &np);
}

SIM_API CUresult cuGraphHostNodeGetParams(CUgraphNode hNode, CUDA_HOST_NODE_PARAMS *nodeParams)
{
        struct sim_nparams p;
        CUresult r;

        if (!nodeParams)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = sim_node_get(hNode, CU_GRAPH_NODE_TYPE_HOST, &p);
        if (r == CUDA_SUCCESS)
                *nodeParams = p.u.host;
        return r;
}

SIM_API CUresult cuGraphHostNodeSetParams(CUgraphNode hNode, const CUDA_HOST_NODE_PARAMS *nodeParams)
{
        CUgraphNodeParams np = { .type = CU_GRAPH_NODE_TYPE_HOST };

        if (!nodeParams)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        np.host = (CUDA_HOST_NODE_PARAMS_v2){ .fn = nodeParams->fn, .userData = nodeParams->userData };
        return cuGraphNodeSetParams(hNode, &np);
}

SIM_API CUresult cuGraphAddChildGraphNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                          size_t numDependencies, CUgraph childGraph)
{
        CUgraphNodeParams np = { .type = CU_GRAPH_NODE_TYPE_GRAPH, .graph.graph = childGraph };

        return add_typed(phGraphNode, hGraph, dependencies, numDependencies, &np);
}

SIM_API CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph *phGraph)
{
        struct sim_nparams p;
        CUresult r;

        if (!phGraph)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = sim_node_get(hNode, CU_GRAPH_NODE_TYPE_GRAPH, &p);
        if (r == CUDA_SUCCESS)
                *phGraph = sim_graph_handle(p.u.child);
        return r;
}

static CUresult add_event(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t n, CUevent e, CUgraphNodeType t)
{
        CUgraphNodeParams np = { .type = t };

        if (t == CU_GRAPH_NODE_TYPE_EVENT_RECORD)
                np.eventRecord.event = e;
        else
                np.eventWait.event = e;
        return add_typed(ph, g, deps, n, &np);
}

SIM_API CUresult cuGraphAddEventRecordNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                           size_t numDependencies, CUevent event)
{
        return add_event(phGraphNode, hGraph, dependencies, numDependencies, event, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}

SIM_API CUresult cuGraphAddEventWaitNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                         size_t numDependencies, CUevent event)
{
        return add_event(phGraphNode, hGraph, dependencies, numDependencies, event, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

static CUresult event_get(CUgraphNode h, CUevent *out, CUgraphNodeType t)
{
        struct sim_nparams p;
        CUresult r;

        if (!out)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = sim_node_get(h, t, &p);
        if (r == CUDA_SUCCESS)
                *out = p.u.event;
        return r;
}

static CUresult event_set(CUgraphNode h, CUevent e, CUgraphNodeType t)
{
        CUgraphNodeParams np = { .type = t };

        if (t == CU_GRAPH_NODE_TYPE_EVENT_RECORD)
                np.eventRecord.event = e;
        else
                np.eventWait.event = e;
        return cuGraphNodeSetParams(h, &np);
}

SIM_API CUresult cuGraphEventRecordNodeGetEvent(CUgraphNode hNode, CUevent *event_out)
{
        return event_get(hNode, event_out, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}

SIM_API CUresult cuGraphEventRecordNodeSetEvent(CUgraphNode hNode, CUevent event)
{
        return event_set(hNode, event, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}

SIM_API CUresult cuGraphEventWaitNodeGetEvent(CUgraphNode hNode, CUevent *event_out)
{
        return event_get(hNode, event_out, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

SIM_API CUresult cuGraphEventWaitNodeSetEvent(CUgraphNode hNode, CUevent event)
{
        return event_set(hNode, event, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

SIM_API CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                        size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
        CUgraphNodeParams np = { .type = CU_GRAPH_NODE_TYPE_MEM_ALLOC };
        CUresult r;

        if (!nodeParams)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        memcpy(&np.alloc, nodeParams, sizeof(*nodeParams));
        r = add_typed(phGraphNode, hGraph, dependencies, numDependencies, &np);
        if (r == CUDA_SUCCESS)
                nodeParams->dptr = np.alloc.dptr;
        return r;
}

SIM_API CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out)
{
        struct sim_nparams p;
        CUresult r;

        if (!params_out)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = sim_node_get(hNode, CU_GRAPH_NODE_TYPE_MEM_ALLOC, &p);
        if (r == CUDA_SUCCESS)
                *params_out = p.u.alloc.p;
        return r;
}

SIM_API CUresult cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                       size_t numDependencies, CUdeviceptr dptr)
{
        CUgraphNodeParams np = { .type = CU_GRAPH_NODE_TYPE_MEM_FREE, .free.dptr = dptr };

        return add_typed(phGraphNode, hGraph, dependencies, numDependencies, &np);
}

SIM_API CUresult cuGraphMemFreeNodeGetParams(CUgraphNode hNode, CUdeviceptr *dptr_out)
{
        struct sim_nparams p;
        CUresult r;

        if (!dptr_out)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = sim_node_get(hNode, CU_GRAPH_NODE_TYPE_MEM_FREE, &p);
        if (r == CUDA_SUCCESS)
                *dptr_out = p.u.free_ptr;
        return r;
}
