/* SPDX-License-Identifier: MIT */
/*
 * The generic node parameters (cuGraphNodeSetParams, cuGraphExecNodeSetParams),
 * child graph nodes' graphs, and exec nodes' enable bits in the shim.
 *
 * The generic forms check what the driver checks of a CUgraphNodeParams
 * (reserved bytes zero, the type the node's), then take the per-kind path
 * of that kind, so each kind has one path: kernel, memset, memcpy, event
 * record and wait, child graph, and host (cuGraphHostNodeSetParams and
 * cuGraphExecHostNodeSetParams, whatever this build does with them). An
 * empty node has nothing to set. Memory alloc and free nodes' parameters
 * cannot be changed (the driver's rule).
 *
 * cuGraphChildGraphNodeGetGraph: the graph the node owns gets a client id
 * in the worker (minted here the first time; the same id after that), and
 * it cannot be destroyed as a graph of its own (worker/graph_child.c).
 */
#include <pthread.h>
#include <string.h>

#include "client.h"
#include "gmem.h"
#include "log.h"
#include "shim_gen.h"
#include "u64map.h"

#define EXPORT __attribute__((visibility("default")))

#undef cuGraphKernelNodeSetParams
#undef cuGraphExecKernelNodeSetParams

#define ID(h) ((uint64_t)(uintptr_t)(h))

static bool zero(const void *p, size_t n)
{
        const unsigned char *b = p;
        for (size_t i = 0; i < n; i++)
                if (b[i])
                        return false;
        return true;
}

/* The bytes of the union past the member of type t must be zero. */
static bool tail_zero(const CUgraphNodeParams *p, size_t used)
{
        return zero((const char *)p->reserved1 + used, sizeof(p->reserved1) - used);
}

/* What every generic set checks first: the parameters and the node's type. */
static CUresult check_generic(CUgraphNode n, const CUgraphNodeParams *p)
{
        CUgraphNodeType t;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!n || !p || !zero(p->reserved0, sizeof(p->reserved0)) || p->reserved2)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = cuGraphNodeGetType(n, &t);
        if (r != CUDA_SUCCESS)
                return r;
        return t == p->type ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUDA_KERNEL_NODE_PARAMS kernel_of(const CUgraphNodeParams *p)
{
        CUDA_KERNEL_NODE_PARAMS k;
        memset(&k, 0, sizeof(k));
        memcpy(&k, &p->kernel, sizeof(k) < sizeof(p->kernel) ? sizeof(k) : sizeof(p->kernel));
        return k;
}

static CUDA_MEMSET_NODE_PARAMS memset_of(const CUgraphNodeParams *p)
{
        return (CUDA_MEMSET_NODE_PARAMS){ .dst = p->memset.dst,
                                          .pitch = p->memset.pitch,
                                          .value = p->memset.value,
                                          .elementSize = p->memset.elementSize,
                                          .width = p->memset.width,
                                          .height = p->memset.height };
}

static bool ctx_ok(CUcontext c)
{
        return !c || ID(c) == lupc_ctx_current(); /* nodes run in the calling thread's context here */
}

/* exec 0: the graph's node; else that exec's copy of it */
static CUresult set_generic(CUgraphExec exec, CUgraphNode n, CUgraphNodeParams *p)
{
        CUresult r = check_generic(n, p);
        if (r != CUDA_SUCCESS)
                return r;
        switch (p->type) {
        case CU_GRAPH_NODE_TYPE_KERNEL: {
                CUDA_KERNEL_NODE_PARAMS k = kernel_of(p);
                return exec ? cuGraphExecKernelNodeSetParams_v2(exec, n, &k) : cuGraphKernelNodeSetParams_v2(n, &k);
        }
        case CU_GRAPH_NODE_TYPE_MEMSET: {
                CUDA_MEMSET_NODE_PARAMS m = memset_of(p);
                if (!tail_zero(p, sizeof(p->memset)))
                        return CUDA_ERROR_INVALID_VALUE;
                if (exec)
                        return cuGraphExecMemsetNodeSetParams(exec, n, &m, p->memset.ctx);
                return ctx_ok(p->memset.ctx) ? cuGraphMemsetNodeSetParams(n, &m) : CUDA_ERROR_NOT_SUPPORTED;
        }
        case CU_GRAPH_NODE_TYPE_MEMCPY:
                if (p->memcpy.flags || p->memcpy.reserved || !tail_zero(p, sizeof(p->memcpy)))
                        return CUDA_ERROR_INVALID_VALUE;
                if (exec)
                        return cuGraphExecMemcpyNodeSetParams(exec, n, &p->memcpy.copyParams, p->memcpy.copyCtx);
                return ctx_ok(p->memcpy.copyCtx) ? cuGraphMemcpyNodeSetParams(n, &p->memcpy.copyParams)
                                                 : CUDA_ERROR_NOT_SUPPORTED;
        case CU_GRAPH_NODE_TYPE_HOST: {
                CUDA_HOST_NODE_PARAMS h = { .fn = p->host.fn, .userData = p->host.userData };
                if (!tail_zero(p, sizeof(p->host)))
                        return CUDA_ERROR_INVALID_VALUE;
                return exec ? cuGraphExecHostNodeSetParams(exec, n, &h) : cuGraphHostNodeSetParams(n, &h);
        }
        case CU_GRAPH_NODE_TYPE_GRAPH:
                if (!tail_zero(p, sizeof(p->graph)) || !p->graph.graph)
                        return CUDA_ERROR_INVALID_VALUE;
                if (p->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE)
                        return CUDA_ERROR_NOT_SUPPORTED; /* moving a graph into the node is not forwarded */
                return exec ? cuGraphExecChildGraphNodeSetParams(exec, n, p->graph.graph)
                            : lupc_send_lupGraphChildSet(ID(n), p->graph.graph);
        case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
                if (!tail_zero(p, sizeof(p->eventRecord)))
                        return CUDA_ERROR_INVALID_VALUE;
                return exec ? cuGraphExecEventRecordNodeSetEvent(exec, n, p->eventRecord.event)
                            : cuGraphEventRecordNodeSetEvent(n, p->eventRecord.event);
        case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
                if (!tail_zero(p, sizeof(p->eventWait)))
                        return CUDA_ERROR_INVALID_VALUE;
                return exec ? cuGraphExecEventWaitNodeSetEvent(exec, n, p->eventWait.event)
                            : cuGraphEventWaitNodeSetEvent(n, p->eventWait.event);
        case CU_GRAPH_NODE_TYPE_EMPTY: {
                unsigned got;
                if (!tail_zero(p, 0))
                        return CUDA_ERROR_INVALID_VALUE;
                /* nothing to set; in an exec, the node must be one of its graph's */
                return exec ? lupc_send_lupGraphNodeEnabled(exec, ID(n), 2, 0, &got) : CUDA_SUCCESS;
        }
        case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
        case CU_GRAPH_NODE_TYPE_MEM_FREE:
                return CUDA_ERROR_INVALID_VALUE; /* their parameters cannot be changed */
        default: {
                static int once;
                if (!__atomic_exchange_n(&once, 1, __ATOMIC_RELAXED))
                        lup_warn("cuGraph(Exec)NodeSetParams: node type %d is not supported by lupine "
                                 "(returning CUDA_ERROR_NOT_SUPPORTED)",
                                 (int)p->type);
                return CUDA_ERROR_NOT_SUPPORTED;
        }
        }
}

EXPORT CUresult CUDAAPI cuGraphNodeSetParams(CUgraphNode hNode, CUgraphNodeParams *nodeParams)
{
        return set_generic(NULL, hNode, nodeParams);
}

EXPORT CUresult CUDAAPI cuGraphExecNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                 CUgraphNodeParams *nodeParams)
{
        if (!hGraphExec)
                return lupc_initialized() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        return set_generic(hGraphExec, hNode, nodeParams);
}

/* ---- child graph nodes */

/* the ids of graphs that child graph nodes own (ids are never reused, so
 * one whose node is gone can stay) */
static struct lup_u64map owned = { .limit = LUP_MAX_HANDLES };
static pthread_mutex_t owned_lock = PTHREAD_MUTEX_INITIALIZER;

EXPORT CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        pthread_mutex_lock(&owned_lock);
        bool is_owned = lup_u64map_get(&owned, ID(hGraph), NULL);
        pthread_mutex_unlock(&owned_lock);
        if (is_owned)
                return CUDA_ERROR_INVALID_VALUE;       /* the node's: only the node's end destroys it */
        CUresult r = lupc_send_cuGraphDestroy(hGraph); /* fire-and-forget; it forgets the handle */
        if (r == CUDA_SUCCESS)
                lupc_gmem_graph_gone(ID(hGraph)); /* its graph memory (shim/api_graph_mem.c) */
        return r;
}

EXPORT CUresult CUDAAPI cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph *phGraph)
{
        uint64_t id = 0;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!hNode || !phGraph)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = lupc_send_lupGraphChildGet(hNode, lupc_mint_handle(), &id);
        if (r != CUDA_SUCCESS)
                return r;
        lupc_note_handle(id, LUPC_H_GRAPH);
        pthread_mutex_lock(&owned_lock);
        (void)lup_u64map_put(&owned, id, 1); /* full: only the worker refuses a destroy (latched) */
        pthread_mutex_unlock(&owned_lock);
        *phGraph = (CUgraph)(uintptr_t)id;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuGraphExecChildGraphNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                           CUgraph childGraph)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!hGraphExec || !hNode || !childGraph)
                return CUDA_ERROR_INVALID_VALUE;
        return lupc_send_lupGraphExecChild(hGraphExec, ID(hNode), childGraph);
}

/* ---- exec nodes' enable bits */

EXPORT CUresult CUDAAPI cuGraphNodeSetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode, unsigned int isEnabled)
{
        unsigned got;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!hGraphExec || !hNode)
                return CUDA_ERROR_INVALID_VALUE;
        return lupc_send_lupGraphNodeEnabled(hGraphExec, ID(hNode), 1, isEnabled ? 1 : 0, &got);
}

EXPORT CUresult CUDAAPI cuGraphNodeGetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode, unsigned int *isEnabled)
{
        unsigned got = 0;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!hGraphExec || !hNode || !isEnabled)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = lupc_send_lupGraphNodeEnabled(hGraphExec, ID(hNode), 0, 0, &got);
        if (r == CUDA_SUCCESS)
                *isEnabled = got;
        return r;
}
