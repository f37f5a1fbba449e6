/* SPDX-License-Identifier: MIT */
/*
 * The explicit graph API in the shim: node adds (empty, memset, 1-D
 * device memcpy, event record and wait, child graph), dependencies, and
 * the lists (nodes, roots, edges, a node's dependencies and dependents).
 *
 * Node ids are minted here for nodes the client adds; a node is made
 * without dependencies and its edges added one by one, all answered at
 * once (a bad dependency is the driver's answer, and the node is removed
 * again). Lists come from the worker a page at a time (lupGraphList); a
 * node the driver made (a capture's) gets its id there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "gmem.h"
#include "log.h"
#include "shim_gen.h"

#define EXPORT __attribute__((visibility("default")))

#undef cuGraphAddDependencies
#undef cuGraphAddNode
#undef cuGraphRemoveDependencies
#undef cuGraphGetEdges
#undef cuGraphNodeGetDependencies
#undef cuGraphNodeGetDependentNodes

#define ID(h) ((uint64_t)(uintptr_t)(h))

static CUresult add_node(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t n, unsigned type,
                         const uint64_t v[6])
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!ph || !g || (n && !deps))
                return CUDA_ERROR_INVALID_VALUE;
        uint64_t id = lupc_mint_handle();
        CUresult r = lupc_send_lupGraphAddNode(id, g, type, v[0], v[1], v[2], v[3], v[4], v[5]);
        for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++)
                if ((r = lupc_send_lupGraphEdge(1, g, ID(deps[i]), id)) != CUDA_SUCCESS)
                        (void)cuGraphDestroyNode((CUgraphNode)(uintptr_t)id);
        if (r == CUDA_SUCCESS)
                *ph = (CUgraphNode)(uintptr_t)id;
        return r;
}

EXPORT CUresult CUDAAPI cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                            size_t numDependencies)
{
        const uint64_t v[6] = { 0 };
        return add_node(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_EMPTY, v);
}

EXPORT CUresult CUDAAPI cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                             size_t numDependencies, const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx)
{
        if (!p || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4) || !p->width || !p->height ||
            (p->height > 1 && p->pitch < p->width * p->elementSize))
                return CUDA_ERROR_INVALID_VALUE;
        if (ctx && ID(ctx) != lupc_ctx_current())
                return CUDA_ERROR_NOT_SUPPORTED; /* nodes run in the calling thread's context here */
        uint64_t span = (p->height - 1) * (uint64_t)p->pitch + p->width * (uint64_t)p->elementSize;
        CUresult r = lupc_initialized() ? lupc_check_range(p->dst, span, 1) : CUDA_ERROR_NOT_INITIALIZED;
        if (r != CUDA_SUCCESS)
                return r;
        const uint64_t v[6] = { p->dst, p->pitch, p->value, p->elementSize, p->width, p->height };
        return add_node(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_MEMSET, v);
}

static bool device_side(CUmemorytype t, uint64_t p)
{
        return (t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_UNIFIED) && lupc_in_arena(p);
}

EXPORT CUresult CUDAAPI cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                             size_t numDependencies, const CUDA_MEMCPY3D *p, CUcontext ctx)
{
        if (!p)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        uint64_t src = p->srcDevice + p->srcXInBytes, dst = p->dstDevice + p->dstXInBytes;
        if (!device_side(p->srcMemoryType, src) || !device_side(p->dstMemoryType, dst) || p->Height > 1 ||
            p->Depth > 1 || p->srcY || p->srcZ || p->dstY || p->dstZ || (ctx && ID(ctx) != lupc_ctx_current())) {
                static int once;
                if (!__atomic_exchange_n(&once, 1, __ATOMIC_RELAXED))
                        lup_warn("cuGraphAddMemcpyNode: lupine takes 1-D device to device copies only "
                                 "(returning CUDA_ERROR_NOT_SUPPORTED)");
                return CUDA_ERROR_NOT_SUPPORTED;
        }
        CUresult r = lupc_check_range(src, p->WidthInBytes, 1);
        if (r == CUDA_SUCCESS)
                r = lupc_check_range(dst, p->WidthInBytes, 1);
        if (r != CUDA_SUCCESS)
                return r;
        const uint64_t v[6] = { dst, src, p->WidthInBytes };
        return add_node(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_MEMCPY, v);
}

EXPORT CUresult CUDAAPI cuGraphAddEventRecordNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                                  const CUgraphNode *dependencies, size_t numDependencies,
                                                  CUevent event)
{
        const uint64_t v[6] = { ID(event) };
        if (!event)
                return CUDA_ERROR_INVALID_VALUE;
        return add_node(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_EVENT_RECORD, v);
}

EXPORT CUresult CUDAAPI cuGraphAddEventWaitNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                                const CUgraphNode *dependencies, size_t numDependencies, CUevent event)
{
        const uint64_t v[6] = { ID(event) };
        if (!event)
                return CUDA_ERROR_INVALID_VALUE;
        return add_node(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_WAIT_EVENT, v);
}

EXPORT CUresult CUDAAPI cuGraphAddChildGraphNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                                 const CUgraphNode *dependencies, size_t numDependencies,
                                                 CUgraph childGraph)
{
        const uint64_t v[6] = { ID(childGraph) };
        if (!childGraph || lupc_gmem_has_mem_nodes(ID(childGraph))) /* such a graph cannot be cloned */
                return CUDA_ERROR_INVALID_VALUE;
        return add_node(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_GRAPH, v);
}

/* ---- dependencies */

static bool default_edges(const CUgraphEdgeData *d, size_t n)
{
        static const CUgraphEdgeData zero;
        for (size_t i = 0; d && i < n; i++)
                if (memcmp(&d[i], &zero, sizeof(zero)))
                        return false;
        return true;
}

static CUresult edges(unsigned add, CUgraph g, const CUgraphNode *from, const CUgraphNode *to,
                      const CUgraphEdgeData *data, size_t n)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!g || (n && (!from || !to)))
                return CUDA_ERROR_INVALID_VALUE;
        if (!add && lupc_gmem_has_mem_nodes(ID(g)))
                return CUDA_ERROR_NOT_SUPPORTED; /* a graph with memory nodes loses no edge */
        if (!default_edges(data, n))
                return CUDA_ERROR_NOT_SUPPORTED; /* programmatic edges are not forwarded yet */
        CUresult r = CUDA_SUCCESS;
        for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++)
                r = lupc_send_lupGraphEdge(add, g, ID(from[i]), ID(to[i]));
        return r;
}

EXPORT CUresult CUDAAPI cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                               size_t numDependencies);
EXPORT CUresult CUDAAPI cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                               size_t numDependencies)
{
        return edges(1, hGraph, from, to, NULL, numDependencies);
}

EXPORT CUresult CUDAAPI cuGraphAddDependencies_v2(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                                  const CUgraphEdgeData *edgeData, size_t numDependencies)
{
        return edges(1, hGraph, from, to, edgeData, numDependencies);
}

EXPORT CUresult CUDAAPI cuGraphRemoveDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                                  size_t numDependencies);
EXPORT CUresult CUDAAPI cuGraphRemoveDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                                  size_t numDependencies)
{
        return edges(0, hGraph, from, to, NULL, numDependencies);
}

EXPORT CUresult CUDAAPI cuGraphRemoveDependencies_v2(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                                     const CUgraphEdgeData *edgeData, size_t numDependencies)
{
        return edges(0, hGraph, from, to, edgeData, numDependencies);
}

/* ---- lists */

/* Up to cap values of list `what` into out (may be NULL when cap is 0);
 * *ret_total: how many there are. */
static CUresult list(unsigned what, uint64_t handle, uint64_t *out, size_t cap, size_t *ret_total)
{
        uint64_t total = 0, v[LUP_GRAPH_LIST_PAGE];
        size_t off = 0;
        do {
                CUresult r = lupc_send_lupGraphList(what, handle, (unsigned)off, &total, &v[0], &v[1], &v[2], &v[3],
                                                    &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11], &v[12],
                                                    &v[13], &v[14], &v[15]);
                if (r != CUDA_SUCCESS)
                        return r;
                for (size_t i = 0; i < LUP_GRAPH_LIST_PAGE && off + i < cap && off + i < total; i++)
                        out[off + i] = v[i];
                off += LUP_GRAPH_LIST_PAGE;
        } while (off < cap && off < total && off < UINT32_MAX);
        *ret_total = (size_t)total;
        return CUDA_SUCCESS;
}

/* The Get*Nodes form: with nodes NULL, *num is the count; else up to *num
 * entries, the rest NULL, and *num the number filled. */
static CUresult node_list(unsigned what, uint64_t handle, CUgraphNode *nodes, CUgraphEdgeData *data, size_t *num)
{
        size_t total;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!handle || !num || (data && !nodes))
                return CUDA_ERROR_INVALID_VALUE;
        size_t cap = nodes ? *num : 0;
        CUresult r = list(what, handle, (uint64_t *)nodes, cap, &total);
        if (r != CUDA_SUCCESS)
                return r;
        for (size_t i = total; nodes && i < cap; i++)
                nodes[i] = NULL;
        if (data)
                memset(data, 0, cap * sizeof(*data));
        *num = nodes ? (total < cap ? total : cap) : total;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
        return node_list(LUP_GRAPH_LIST_NODES, ID(hGraph), nodes, NULL, numNodes);
}

EXPORT CUresult CUDAAPI cuGraphGetRootNodes(CUgraph hGraph, CUgraphNode *rootNodes, size_t *numRootNodes)
{
        return node_list(LUP_GRAPH_LIST_ROOTS, ID(hGraph), rootNodes, NULL, numRootNodes);
}

EXPORT CUresult CUDAAPI cuGraphNodeGetDependencies(CUgraphNode hNode, CUgraphNode *dependencies,
                                                   size_t *numDependencies);
EXPORT CUresult CUDAAPI cuGraphNodeGetDependencies(CUgraphNode hNode, CUgraphNode *dependencies,
                                                   size_t *numDependencies)
{
        return node_list(LUP_GRAPH_LIST_DEPS, ID(hNode), dependencies, NULL, numDependencies);
}

EXPORT CUresult CUDAAPI cuGraphNodeGetDependencies_v2(CUgraphNode hNode, CUgraphNode *dependencies,
                                                      CUgraphEdgeData *edgeData, size_t *numDependencies)
{
        return node_list(LUP_GRAPH_LIST_DEPS, ID(hNode), dependencies, edgeData, numDependencies);
}

EXPORT CUresult CUDAAPI cuGraphNodeGetDependentNodes(CUgraphNode hNode, CUgraphNode *dependentNodes,
                                                     size_t *numDependentNodes);
EXPORT CUresult CUDAAPI cuGraphNodeGetDependentNodes(CUgraphNode hNode, CUgraphNode *dependentNodes,
                                                     size_t *numDependentNodes)
{
        return node_list(LUP_GRAPH_LIST_DEPENDENTS, ID(hNode), dependentNodes, NULL, numDependentNodes);
}

EXPORT CUresult CUDAAPI cuGraphNodeGetDependentNodes_v2(CUgraphNode hNode, CUgraphNode *dependentNodes,
                                                        CUgraphEdgeData *edgeData, size_t *numDependentNodes)
{
        return node_list(LUP_GRAPH_LIST_DEPENDENTS, ID(hNode), dependentNodes, edgeData, numDependentNodes);
}

static CUresult edge_list(CUgraph g, CUgraphNode *from, CUgraphNode *to, CUgraphEdgeData *data, size_t *num)
{
        size_t total;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!g || !num || (!from != !to) || (data && !from))
                return CUDA_ERROR_INVALID_VALUE;
        size_t cap = from ? *num : 0;
        uint64_t *pairs = cap ? calloc(2 * cap, sizeof(*pairs)) : NULL;
        if (cap && !pairs)
                return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r = list(LUP_GRAPH_LIST_EDGES, ID(g), pairs, 2 * cap, &total);
        total /= 2;
        for (size_t i = 0; r == CUDA_SUCCESS && i < cap; i++) {
                from[i] = i < total ? (CUgraphNode)(uintptr_t)pairs[2 * i] : NULL;
                to[i] = i < total ? (CUgraphNode)(uintptr_t)pairs[2 * i + 1] : NULL;
        }
        free(pairs);
        if (r != CUDA_SUCCESS)
                return r;
        if (data)
                memset(data, 0, cap * sizeof(*data));
        *num = from ? (total < cap ? total : cap) : total;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuGraphGetEdges(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to, size_t *numEdges);
EXPORT CUresult CUDAAPI cuGraphGetEdges(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to, size_t *numEdges)
{
        return edge_list(hGraph, from, to, NULL, numEdges);
}

EXPORT CUresult CUDAAPI cuGraphGetEdges_v2(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to,
                                           CUgraphEdgeData *edgeData, size_t *numEdges)
{
        return edge_list(hGraph, from, to, edgeData, numEdges);
}

CUresult lupc_capture_deps(uint64_t stream, const CUgraphNode **ret_deps, const CUgraphEdgeData **ret_edges,
                           size_t *ret_n)
{
        static __thread uint64_t *ids;
        static __thread CUgraphEdgeData *edata;
        static __thread size_t cap;
        size_t total = 0;
        CUresult r = list(LUP_GRAPH_LIST_CAPTURE, stream, NULL, 0, &total);
        if (r == CUDA_SUCCESS && total > cap) {
                uint64_t *n = realloc(ids, total * sizeof(*n));
                CUgraphEdgeData *e = n ? realloc(edata, total * sizeof(*e)) : NULL;
                if (n)
                        ids = n;
                if (e)
                        edata = e;
                if (!n || !e)
                        return CUDA_ERROR_OUT_OF_MEMORY;
                cap = total;
        }
        if (r == CUDA_SUCCESS && total)
                r = list(LUP_GRAPH_LIST_CAPTURE, stream, ids, total, &total);
        if (r != CUDA_SUCCESS)
                return r;
        if (total)
                memset(edata, 0, total * sizeof(*edata));
        if (ret_deps)
                *ret_deps = total ? (const CUgraphNode *)ids : NULL;
        if (ret_edges)
                *ret_edges = total ? edata : NULL;
        if (ret_n)
                *ret_n = total;
        return CUDA_SUCCESS;
}

/* A DOT file of the graph's nodes (by id and type) and edges, written on
 * the client's side. Its layout is lupine's, not the driver's; flags
 * (the amount of detail) are not looked at. */
static const char *type_name(CUgraphNodeType t)
{
        static const char *const n[] = { "KERNEL",         "MEMCPY",       "MEMSET",
                                         "HOST",           "GRAPH",        "EMPTY",
                                         "WAIT_EVENT",     "EVENT_RECORD", "EXT_SEMAS_SIGNAL",
                                         "EXT_SEMAS_WAIT", "MEM_ALLOC",    "MEM_FREE",
                                         "BATCH_MEM_OP",   "CONDITIONAL" };
        return (unsigned)t < sizeof(n) / sizeof(n[0]) ? n[t] : "UNKNOWN";
}

EXPORT CUresult CUDAAPI cuGraphDebugDotPrint(CUgraph hGraph, const char *path, unsigned int flags)
{
        size_t nn = 0, ne = 0;
        if (!hGraph || !path)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = cuGraphGetNodes(hGraph, NULL, &nn);
        if (r == CUDA_SUCCESS)
                r = cuGraphGetEdges_v2(hGraph, NULL, NULL, NULL, &ne);
        if (r != CUDA_SUCCESS)
                return r;
        CUgraphNode *nodes = calloc(nn + 1, sizeof(*nodes)), *from = calloc(ne + 1, sizeof(*from)),
                    *to = calloc(ne + 1, sizeof(*to));
        FILE *f = NULL;
        if (!nodes || !from || !to)
                r = CUDA_ERROR_OUT_OF_MEMORY;
        if (r == CUDA_SUCCESS)
                r = cuGraphGetNodes(hGraph, nodes, &nn);
        if (r == CUDA_SUCCESS)
                r = cuGraphGetEdges_v2(hGraph, from, to, NULL, &ne);
        if (r == CUDA_SUCCESS && !(f = fopen(path, "w")))
                r = CUDA_ERROR_OPERATING_SYSTEM;
        if (f) {
                fprintf(f, "digraph lupine_graph_%llx {\n", (unsigned long long)ID(hGraph));
                for (size_t i = 0; r == CUDA_SUCCESS && i < nn; i++) {
                        CUgraphNodeType t;
                        if ((r = cuGraphNodeGetType(nodes[i], &t)) == CUDA_SUCCESS)
                                fprintf(f, "\t\"node_%llx\" [label=\"%s\"];\n", (unsigned long long)ID(nodes[i]),
                                        type_name(t));
                }
                for (size_t i = 0; i < ne; i++)
                        fprintf(f, "\t\"node_%llx\" -> \"node_%llx\";\n", (unsigned long long)ID(from[i]),
                                (unsigned long long)ID(to[i]));
                fprintf(f, "}\n");
                if (fclose(f) != 0 && r == CUDA_SUCCESS)
                        r = CUDA_ERROR_OPERATING_SYSTEM;
        }
        free(nodes);
        free(from);
        free(to);
        (void)flags;
        return r;
}

/* ---- the generic form: by type, to the typed adds above */

static CUresult add_generic(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *edges, size_t n,
                            CUgraphNodeParams *p)
{
        static const long long zero[29];
        if (!p || p->reserved0[0] || p->reserved0[1] || p->reserved0[2] || p->reserved2)
                return CUDA_ERROR_INVALID_VALUE;
        if (!default_edges(edges, n))
                return CUDA_ERROR_NOT_SUPPORTED;
        switch (p->type) {
        case CU_GRAPH_NODE_TYPE_KERNEL: {
                CUDA_KERNEL_NODE_PARAMS k;
                memset(&k, 0, sizeof(k));
                memcpy(&k, &p->kernel, sizeof(k) < sizeof(p->kernel) ? sizeof(k) : sizeof(p->kernel));
                return cuGraphAddKernelNode_v2(ph, g, deps, n, &k);
        }
        case CU_GRAPH_NODE_TYPE_MEMSET: {
                CUDA_MEMSET_NODE_PARAMS m = { .dst = p->memset.dst,
                                              .pitch = p->memset.pitch,
                                              .value = p->memset.value,
                                              .elementSize = p->memset.elementSize,
                                              .width = p->memset.width,
                                              .height = p->memset.height };
                return cuGraphAddMemsetNode(ph, g, deps, n, &m, p->memset.ctx);
        }
        case CU_GRAPH_NODE_TYPE_MEMCPY:
                if (p->memcpy.flags || p->memcpy.reserved)
                        return CUDA_ERROR_INVALID_VALUE;
                return cuGraphAddMemcpyNode(ph, g, deps, n, &p->memcpy.copyParams, p->memcpy.copyCtx);
        case CU_GRAPH_NODE_TYPE_EMPTY:
                return memcmp(p->reserved1, zero, sizeof(zero)) ? CUDA_ERROR_INVALID_VALUE
                                                                : cuGraphAddEmptyNode(ph, g, deps, n);
        case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
                return cuGraphAddEventRecordNode(ph, g, deps, n, p->eventRecord.event);
        case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
                return cuGraphAddEventWaitNode(ph, g, deps, n, p->eventWait.event);
        case CU_GRAPH_NODE_TYPE_GRAPH:
                if (p->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE)
                        return CUDA_ERROR_NOT_SUPPORTED; /* moving a graph into the node is not forwarded */
                return cuGraphAddChildGraphNode(ph, g, deps, n, p->graph.graph);
        case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
        case CU_GRAPH_NODE_TYPE_MEM_FREE:
                return lupc_gmem_add_node(ph, g, deps, n, p);
        default: {
                static int once;
                if (!__atomic_exchange_n(&once, 1, __ATOMIC_RELAXED))
                        lup_warn("cuGraphAddNode: node type %d is not supported by lupine yet "
                                 "(returning CUDA_ERROR_NOT_SUPPORTED)",
                                 (int)p->type);
                return CUDA_ERROR_NOT_SUPPORTED;
        }
        }
}

EXPORT CUresult CUDAAPI cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                          const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                          CUgraphNodeParams *nodeParams)
{
        return add_generic(phGraphNode, hGraph, dependencies, dependencyData, numDependencies, nodeParams);
}

EXPORT CUresult CUDAAPI cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                       size_t numDependencies, CUgraphNodeParams *nodeParams);
EXPORT CUresult CUDAAPI cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                       size_t numDependencies, CUgraphNodeParams *nodeParams)
{
        return add_generic(phGraphNode, hGraph, dependencies, NULL, numDependencies, nodeParams);
}

/* ---- memset and memcpy nodes' parameters (lupGraphNodeGet/Set) */

EXPORT CUresult CUDAAPI cuGraphMemsetNodeGetParams(CUgraphNode hNode, CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
        unsigned t = 0;
        uint64_t v[6];
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!hNode || !nodeParams)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = lupc_send_lupGraphNodeGet(hNode, &t, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]);
        if (r == CUDA_SUCCESS && t != CU_GRAPH_NODE_TYPE_MEMSET)
                r = CUDA_ERROR_INVALID_VALUE;
        if (r == CUDA_SUCCESS)
                *nodeParams = (CUDA_MEMSET_NODE_PARAMS){ .dst = v[0],
                                                         .pitch = v[1],
                                                         .value = (unsigned)v[2],
                                                         .elementSize = (unsigned)v[3],
                                                         .width = v[4],
                                                         .height = v[5] };
        return r;
}

EXPORT CUresult CUDAAPI cuGraphMemcpyNodeGetParams(CUgraphNode hNode, CUDA_MEMCPY3D *nodeParams)
{
        unsigned t = 0;
        uint64_t v[6];
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!hNode || !nodeParams)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = lupc_send_lupGraphNodeGet(hNode, &t, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]);
        if (r == CUDA_SUCCESS && t != CU_GRAPH_NODE_TYPE_MEMCPY)
                r = CUDA_ERROR_INVALID_VALUE;
        if (r != CUDA_SUCCESS)
                return r;
        memset(nodeParams, 0, sizeof(*nodeParams));
        nodeParams->srcMemoryType = nodeParams->dstMemoryType = CU_MEMORYTYPE_DEVICE;
        nodeParams->dstDevice = v[0];
        nodeParams->srcDevice = v[1];
        nodeParams->WidthInBytes = v[2];
        nodeParams->Height = nodeParams->Depth = 1;
        return CUDA_SUCCESS;
}

static CUresult set_memset(uint64_t exec, CUgraphNode n, const CUDA_MEMSET_NODE_PARAMS *p)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!n || !p || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4) || !p->width ||
            !p->height || (p->height > 1 && p->pitch < p->width * p->elementSize))
                return CUDA_ERROR_INVALID_VALUE;
        uint64_t span = (p->height - 1) * (uint64_t)p->pitch + p->width * (uint64_t)p->elementSize;
        CUresult r = lupc_check_range(p->dst, span, 1);
        if (r != CUDA_SUCCESS)
                return r;
        return lupc_send_lupGraphNodeSet(exec, ID(n), CU_GRAPH_NODE_TYPE_MEMSET, p->dst, p->pitch, p->value,
                                         p->elementSize, p->width, p->height);
}

static CUresult set_memcpy(uint64_t exec, CUgraphNode n, const CUDA_MEMCPY3D *p)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!n || !p)
                return CUDA_ERROR_INVALID_VALUE;
        uint64_t src = p->srcDevice + p->srcXInBytes, dst = p->dstDevice + p->dstXInBytes;
        if (!device_side(p->srcMemoryType, src) || !device_side(p->dstMemoryType, dst) || p->Height > 1 ||
            p->Depth > 1 || p->srcY || p->srcZ || p->dstY || p->dstZ)
                return CUDA_ERROR_NOT_SUPPORTED; /* 1-D device to device copies only */
        CUresult r = lupc_check_range(src, p->WidthInBytes, 1);
        if (r == CUDA_SUCCESS)
                r = lupc_check_range(dst, p->WidthInBytes, 1);
        if (r != CUDA_SUCCESS)
                return r;
        return lupc_send_lupGraphNodeSet(exec, ID(n), CU_GRAPH_NODE_TYPE_MEMCPY, dst, src, p->WidthInBytes, 0, 0, 0);
}

EXPORT CUresult CUDAAPI cuGraphMemsetNodeSetParams(CUgraphNode hNode, const CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
        return set_memset(0, hNode, nodeParams);
}

EXPORT CUresult CUDAAPI cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                       const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
        if (!hGraphExec)
                return CUDA_ERROR_INVALID_VALUE;
        if (ctx && ID(ctx) != lupc_ctx_current())
                return CUDA_ERROR_NOT_SUPPORTED;
        return set_memset(ID(hGraphExec), hNode, memsetParams);
}

EXPORT CUresult CUDAAPI cuGraphMemcpyNodeSetParams(CUgraphNode hNode, const CUDA_MEMCPY3D *nodeParams)
{
        return set_memcpy(0, hNode, nodeParams);
}

EXPORT CUresult CUDAAPI cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                       const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
        if (!hGraphExec)
                return CUDA_ERROR_INVALID_VALUE;
        if (ctx && ID(ctx) != lupc_ctx_current())
                return CUDA_ERROR_NOT_SUPPORTED;
        return set_memcpy(ID(hGraphExec), hNode, copyParams);
}

/* ---- event nodes */

/* kind: 4 an event record node, 8 an event wait node (lupGraphEventNode) */
static CUresult get_event(CUgraphNode n, CUevent *ret, unsigned kind)
{
        uint64_t id = 0;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!n || !ret)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = lupc_send_lupGraphEventNode(0, ID(n), kind, 0, &id);
        if (r == CUDA_SUCCESS)
                *ret = (CUevent)(uintptr_t)id;
        return r;
}

static CUresult set_event(uint64_t exec, CUgraphNode n, CUevent ev, unsigned kind)
{
        uint64_t id;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!n || !ev)
                return CUDA_ERROR_INVALID_VALUE;
        return lupc_send_lupGraphEventNode(exec, ID(n), (exec ? 2 : 1) | kind, ID(ev), &id);
}

EXPORT CUresult CUDAAPI cuGraphEventRecordNodeGetEvent(CUgraphNode hNode, CUevent *event_out)
{
        return get_event(hNode, event_out, 4);
}

EXPORT CUresult CUDAAPI cuGraphEventWaitNodeGetEvent(CUgraphNode hNode, CUevent *event_out)
{
        return get_event(hNode, event_out, 8);
}

EXPORT CUresult CUDAAPI cuGraphEventRecordNodeSetEvent(CUgraphNode hNode, CUevent event)
{
        return set_event(0, hNode, event, 4);
}

EXPORT CUresult CUDAAPI cuGraphEventWaitNodeSetEvent(CUgraphNode hNode, CUevent event)
{
        return set_event(0, hNode, event, 8);
}

EXPORT CUresult CUDAAPI cuGraphExecEventRecordNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode, CUevent event)
{
        return hGraphExec ? set_event(ID(hGraphExec), hNode, event, 4) : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult CUDAAPI cuGraphExecEventWaitNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode, CUevent event)
{
        return hGraphExec ? set_event(ID(hGraphExec), hNode, event, 8) : CUDA_ERROR_INVALID_VALUE;
}
