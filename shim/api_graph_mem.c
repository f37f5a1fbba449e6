/* SPDX-License-Identifier: MIT */
/*
 * Graph memory: memory alloc and free nodes (explicit, and captured from
 * cuMemAllocAsync / cuMemFreeAsync on a capturing stream), and the
 * device's graph memory attributes.
 *
 * lupine's graph-owned memory is arena memory, reserved here (an ordinary
 * allocation, so in the shadow and in every checkpoint) when the alloc
 * node is made; its address is the node's for the graph's life, as on the
 * driver. The driver maps the memory at a launch and may reuse it between
 * launches; lupine keeps it reserved from the node's creation until the
 * graph, its exec and any allocation a launch left unfreed are all gone.
 * In the worker both node kinds are empty nodes (worker/graph_mem.c): they
 * order the graph and do no work; what they are lives here, in the client,
 * which survives the server's restarts.
 *
 * The driver's rules for graphs holding memory nodes are kept here: no
 * clone, no node destruction, one exec at a time, and a launch while an
 * allocation of the last launch is unfreed (no free node in the graph, no
 * cuMemFree/cuMemFreeAsync since) fails with CUDA_ERROR_INVALID_VALUE
 * unless the exec has CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "gmem.h"
#include "log.h"
#include "pool.h"
#include "shim_gen.h"

#define EXPORT __attribute__((visibility("default")))

#define GM_MAX_ACCESS 8

struct gm_alloc {
        uint64_t dptr, size, graph;
        uint64_t alloc_node, free_node; /* 0: none (or its graph is gone) */
        int dev;
        bool live;          /* a launch allocated it, nothing freed it since */
        bool has_free;      /* its graph frees it (kept when the graph is gone) */
        bool captured;      /* its alloc node is a capture's */
        bool free_captured; /* its free node is a capture's */
        CUmemPoolProps props;
        CUmemAccessDesc access[GM_MAX_ACCESS];
        size_t n_access;
};

struct gm_graph {
        uint64_t graph, exec; /* exec: its one exec, 0: none */
        unsigned long long flags;
        bool alive;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct gm_alloc *allocs;
static size_t n_allocs, cap_allocs;
static struct gm_graph *graphs;
static size_t n_graphs, cap_graphs;
static uint64_t used[LUPC_GMEM_DEVICES], high[LUPC_GMEM_DEVICES];

static void account(int dev, int64_t delta)
{
        if (dev < 0 || dev >= LUPC_GMEM_DEVICES)
                return;
        used[dev] += (uint64_t)delta;
        if (used[dev] > high[dev])
                high[dev] = used[dev];
}

static struct gm_graph *graph_find(uint64_t g)
{
        for (size_t i = 0; i < n_graphs; i++)
                if (graphs[i].graph == g)
                        return &graphs[i];
        return NULL;
}

static struct gm_graph *graph_get(uint64_t g)
{
        struct gm_graph *x = graph_find(g);
        if (x)
                return x;
        if (n_graphs == cap_graphs) {
                size_t cap = cap_graphs ? 2 * cap_graphs : 16;
                struct gm_graph *v = realloc(graphs, cap * sizeof(*v));
                if (!v)
                        return NULL;
                graphs = v, cap_graphs = cap;
        }
        graphs[n_graphs] = (struct gm_graph){ .graph = g, .alive = true };
        return &graphs[n_graphs++];
}

static struct gm_alloc *alloc_new(void)
{
        if (n_allocs == cap_allocs) {
                size_t cap = cap_allocs ? 2 * cap_allocs : 16;
                struct gm_alloc *v = realloc(allocs, cap * sizeof(*v));
                if (!v)
                        return NULL;
                allocs = v, cap_allocs = cap;
        }
        memset(&allocs[n_allocs], 0, sizeof(allocs[0]));
        return &allocs[n_allocs++];
}

static struct gm_alloc *alloc_of_node(uint64_t node, bool free_node)
{
        for (size_t i = 0; node && i < n_allocs; i++)
                if ((free_node ? allocs[i].free_node : allocs[i].alloc_node) == node)
                        return &allocs[i];
        return NULL;
}

static struct gm_alloc *alloc_at(uint64_t dptr)
{
        for (size_t i = 0; i < n_allocs; i++)
                if (allocs[i].dptr == dptr)
                        return &allocs[i];
        return NULL;
}

static bool deferred; /* a release waits for the open captures to end */

/* Gives back the memory nothing holds any more (lock held). */
static void release(void)
{
        if ((deferred = lupc_captures_open() > 0))
                return;
        for (size_t i = 0; i < n_allocs;) {
                struct gm_alloc *a = &allocs[i];
                const struct gm_graph *x = graph_find(a->graph);
                if (a->live || (x && (x->alive || x->exec))) {
                        i++;
                        continue;
                }
                account(a->dev, -(int64_t)a->size);
                if (lupc_shadow_remove(a->dptr, NULL) == 0)
                        (void)lupc_send_cuMemFree_v2(a->dptr); /* async: a failure is latched */
                *a = allocs[--n_allocs];
        }
        for (size_t i = 0; i < n_graphs;) {
                bool held = graphs[i].alive || graphs[i].exec;
                for (size_t j = 0; !held && j < n_allocs; j++)
                        held = allocs[j].graph == graphs[i].graph;
                if (held)
                        i++;
                else
                        graphs[i] = graphs[--n_graphs];
        }
}

static bool has_mem_nodes(uint64_t g)
{
        for (size_t i = 0; i < n_allocs; i++)
                if (allocs[i].graph == g && allocs[i].alloc_node)
                        return true;
        return false;
}

/* ---- reservations */

/* Arena memory for an allocation node of the calling thread's context. */
static CUresult reserve(uint64_t bytes, int dev, uint64_t *ret)
{
        struct lupc_ctx_info info;
        uint64_t ctx = lupc_ctx_current();
        if (!ctx || !lupc_ctx_lookup(ctx, &info))
                return CUDA_ERROR_INVALID_CONTEXT;
        if (dev != info.device)
                return CUDA_ERROR_NOT_SUPPORTED; /* lupine: a context's own device only */
        CUdeviceptr p = 0;
        CUresult r = cuMemAlloc_v2(&p, bytes);
        *ret = p;
        return r;
}

/* A reservation no node got: a record of no graph, which release() frees
 * (once no capture is open). */
static void unreserve(uint64_t p)
{
        pthread_mutex_lock(&mu);
        struct gm_alloc *a = alloc_new();
        if (a)
                *a = (struct gm_alloc){ .dptr = p, .dev = -1 };
        else if (lupc_shadow_remove(p, NULL) == 0)
                (void)lupc_send_cuMemFree_v2(p);
        release();
        pthread_mutex_unlock(&mu);
}

static CUresult record(uint64_t graph, uint64_t node, uint64_t p, uint64_t bytes, const CUmemPoolProps *props,
                       const CUmemAccessDesc *access, size_t n_access)
{
        pthread_mutex_lock(&mu);
        struct gm_graph *x = graph_get(graph);
        struct gm_alloc *a = x ? alloc_new() : NULL;
        if (a) {
                *a = (struct gm_alloc){ .dptr = p,
                                        .size = bytes,
                                        .graph = graph,
                                        .alloc_node = node,
                                        .dev = props->location.id,
                                        .props = *props,
                                        .n_access = n_access };
                if (n_access)
                        memcpy(a->access, access, n_access * sizeof(*access));
                account(a->dev, (int64_t)bytes);
        }
        pthread_mutex_unlock(&mu);
        return a ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* ---- explicit nodes */

/* An empty node of the worker's, with its dependencies (the placeholder). */
static CUresult add_empty(uint64_t *ret, CUgraph g, const CUgraphNode *deps, size_t n)
{
        uint64_t id = lupc_mint_handle();
        CUresult r = lupc_send_lupGraphAddNode(id, g, CU_GRAPH_NODE_TYPE_EMPTY, 0, 0, 0, 0, 0, 0);
        for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++)
                if ((r = lupc_send_lupGraphEdge(1, g, (uint64_t)(uintptr_t)deps[i], id)) != CUDA_SUCCESS)
                        (void)lupc_send_cuGraphDestroyNode((CUgraphNode)(uintptr_t)id);
        *ret = id;
        return r;
}

static CUresult check_props(const CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
        const CUmemPoolProps *pp = &p->poolProps;
        if (pp->allocType != CU_MEM_ALLOCATION_TYPE_PINNED || pp->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
            pp->handleTypes != CU_MEM_HANDLE_TYPE_NONE || p->bytesize == 0 || (p->accessDescCount && !p->accessDescs) ||
            p->accessDescCount > GM_MAX_ACCESS || !lupc_device(pp->location.id))
                return CUDA_ERROR_INVALID_VALUE;
        for (size_t i = 0; i < p->accessDescCount; i++)
                if (p->accessDescs[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
                    !lupc_device(p->accessDescs[i].location.id) ||
                    p->accessDescs[i].flags > CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
                        return CUDA_ERROR_INVALID_VALUE;
        if (p->bytesize > LUP_MAX_COPY)
                return CUDA_ERROR_OUT_OF_MEMORY;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                               const CUgraphNode *dependencies, size_t numDependencies,
                                               CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!phGraphNode || !hGraph || !nodeParams || (numDependencies && !dependencies))
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = check_props(nodeParams);
        uint64_t p = 0, node = 0;
        if (r == CUDA_SUCCESS)
                r = reserve(nodeParams->bytesize, nodeParams->poolProps.location.id, &p);
        if (r != CUDA_SUCCESS)
                return r;
        if ((r = add_empty(&node, hGraph, dependencies, numDependencies)) == CUDA_SUCCESS)
                r = record((uint64_t)(uintptr_t)hGraph, node, p, nodeParams->bytesize, &nodeParams->poolProps,
                           nodeParams->accessDescs, nodeParams->accessDescCount);
        if (r != CUDA_SUCCESS) {
                unreserve(p);
                return r;
        }
        nodeParams->dptr = p;
        *phGraphNode = (CUgraphNode)(uintptr_t)node;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                              size_t numDependencies, CUdeviceptr dptr)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!phGraphNode || !hGraph || (numDependencies && !dependencies))
                return CUDA_ERROR_INVALID_VALUE;
        uint64_t g = (uint64_t)(uintptr_t)hGraph, node = 0;
        pthread_mutex_lock(&mu);
        struct gm_alloc *a = alloc_at(dptr);
        bool ok = a && a->graph == g && a->alloc_node && !a->has_free;
        pthread_mutex_unlock(&mu);
        /* only memory of this graph's alloc nodes, freed once */
        if (!ok)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = add_empty(&node, hGraph, dependencies, numDependencies);
        if (r != CUDA_SUCCESS)
                return r;
        pthread_mutex_lock(&mu);
        if ((a = alloc_at(dptr)) && a->graph == g)
                a->free_node = node, a->has_free = true;
        pthread_mutex_unlock(&mu);
        *phGraphNode = (CUgraphNode)(uintptr_t)node;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!params_out)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&mu);
        const struct gm_alloc *a = alloc_of_node((uint64_t)(uintptr_t)hNode, false);
        if (a) { /* accessDescs: the node's own copy, valid while the node is */
                params_out->poolProps = a->props;
                params_out->accessDescs = a->n_access ? a->access : NULL;
                params_out->accessDescCount = a->n_access;
                params_out->bytesize = a->size;
                params_out->dptr = a->dptr;
        }
        pthread_mutex_unlock(&mu);
        return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult CUDAAPI cuGraphMemFreeNodeGetParams(CUgraphNode hNode, CUdeviceptr *dptr_out)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!dptr_out)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&mu);
        const struct gm_alloc *a = alloc_of_node((uint64_t)(uintptr_t)hNode, true);
        if (a)
                *dptr_out = a->dptr;
        pthread_mutex_unlock(&mu);
        return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

bool lupc_gmem_has_mem_nodes(uint64_t graph)
{
        pthread_mutex_lock(&mu);
        bool mem = n_allocs && has_mem_nodes(graph);
        pthread_mutex_unlock(&mu);
        return mem;
}

CUresult lupc_gmem_add_node(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t n, CUgraphNodeParams *p)
{
        if (p->type == CU_GRAPH_NODE_TYPE_MEM_FREE)
                return cuGraphAddMemFreeNode(ph, g, deps, n, p->free.dptr);
        CUDA_MEM_ALLOC_NODE_PARAMS a = { .poolProps = p->alloc.poolProps,
                                         .accessDescs = p->alloc.accessDescs,
                                         .accessDescCount = p->alloc.accessDescCount,
                                         .bytesize = p->alloc.bytesize };
        CUresult r = cuGraphAddMemAllocNode(ph, g, deps, n, &a);
        if (r == CUDA_SUCCESS)
                p->alloc.dptr = a.dptr;
        return r;
}

bool lupc_gmem_node_params(uint64_t node, CUgraphNodeParams *ret)
{
        pthread_mutex_lock(&mu);
        const struct gm_alloc *a = alloc_of_node(node, false), *f = a ? NULL : alloc_of_node(node, true);
        if (a) {
                memset(ret, 0, sizeof(*ret));
                ret->type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
                ret->alloc.poolProps = a->props;
                ret->alloc.accessDescs = a->n_access ? a->access : NULL;
                ret->alloc.accessDescCount = a->n_access;
                ret->alloc.bytesize = a->size;
                ret->alloc.dptr = a->dptr;
        } else if (f) {
                memset(ret, 0, sizeof(*ret));
                ret->type = CU_GRAPH_NODE_TYPE_MEM_FREE;
                ret->free.dptr = f->dptr;
        }
        pthread_mutex_unlock(&mu);
        return a || f;
}

/* ---- the graph calls that must know of memory nodes */

EXPORT CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!type)
                return CUDA_ERROR_INVALID_VALUE;
        uint64_t n = (uint64_t)(uintptr_t)hNode;
        pthread_mutex_lock(&mu);
        bool is_alloc = alloc_of_node(n, false) != NULL, is_free = !is_alloc && alloc_of_node(n, true);
        pthread_mutex_unlock(&mu);
        if (is_alloc || is_free) {
                *type = is_alloc ? CU_GRAPH_NODE_TYPE_MEM_ALLOC : CU_GRAPH_NODE_TYPE_MEM_FREE;
                return CUDA_SUCCESS;
        }
        return lupc_send_cuGraphNodeGetType(hNode, type);
}

/* Whether node is one of the graphs' (the graphs with memory nodes, at
 * most 64 of them asked). */
static bool in_mem_graph(uint64_t node)
{
        uint64_t g[64];
        size_t ng = 0;
        pthread_mutex_lock(&mu);
        for (size_t i = 0; i < n_graphs && ng < 64; i++)
                if (graphs[i].alive && has_mem_nodes(graphs[i].graph))
                        g[ng++] = graphs[i].graph;
        pthread_mutex_unlock(&mu);
        for (size_t i = 0; i < ng; i++) {
                size_t n = 0;
                if (cuGraphGetNodes((CUgraph)(uintptr_t)g[i], NULL, &n) != CUDA_SUCCESS || !n)
                        continue;
                CUgraphNode *v = calloc(n, sizeof(*v));
                bool found = false;
                if (v && cuGraphGetNodes((CUgraph)(uintptr_t)g[i], v, &n) == CUDA_SUCCESS)
                        for (size_t j = 0; j < n && !found; j++)
                                found = (uint64_t)(uintptr_t)v[j] == node;
                free(v);
                if (found)
                        return true;
        }
        return false;
}

EXPORT CUresult CUDAAPI cuGraphDestroyNode(CUgraphNode hNode)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        uint64_t n = (uint64_t)(uintptr_t)hNode;
        pthread_mutex_lock(&mu);
        bool mem = alloc_of_node(n, false) || alloc_of_node(n, true), any = n_allocs > 0;
        pthread_mutex_unlock(&mu);
        /* a graph with memory nodes loses no node */
        if (mem || (any && in_mem_graph(n)))
                return CUDA_ERROR_NOT_SUPPORTED;
        return lupc_send_cuGraphDestroyNode(hNode);
}

EXPORT CUresult CUDAAPI cuGraphClone(CUgraph *phGraphClone, CUgraph originalGraph)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        pthread_mutex_lock(&mu);
        bool mem = has_mem_nodes((uint64_t)(uintptr_t)originalGraph);
        pthread_mutex_unlock(&mu);
        return mem ? CUDA_ERROR_NOT_SUPPORTED : lupc_send_cuGraphClone(phGraphClone, originalGraph);
}

void lupc_gmem_graph_gone(uint64_t g)
{
        pthread_mutex_lock(&mu);
        struct gm_graph *x = graph_find(g);
        if (x) {
                x->alive = false;
                for (size_t i = 0; i < n_allocs; i++)
                        if (allocs[i].graph == g)
                                allocs[i].alloc_node = allocs[i].free_node = 0;
                release();
        }
        pthread_mutex_unlock(&mu);
}

void lupc_gmem_capture_failed(uint64_t g)
{
        pthread_mutex_lock(&mu);
        for (size_t i = 0; i < n_allocs; i++) {
                struct gm_alloc *a = &allocs[i];
                if (a->graph == g && a->captured && !a->live) /* no graph holds it: release() frees it */
                        a->graph = 0, a->alloc_node = a->free_node = 0, a->has_free = false;
                else if (a->graph == g && a->free_captured) /* a capture's free of memory the graph had */
                        a->free_node = 0, a->has_free = a->free_captured = false;
        }
        struct gm_graph *x = graph_find(g);
        if (x && !x->exec && !has_mem_nodes(g))
                *x = graphs[--n_graphs];
        release();
        pthread_mutex_unlock(&mu);
}

void lupc_gmem_capture_ended(int still_open)
{
        if (still_open)
                return;
        pthread_mutex_lock(&mu);
        if (deferred)
                release();
        pthread_mutex_unlock(&mu);
}

EXPORT CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        uint64_t g = (uint64_t)(uintptr_t)hGraph;
        pthread_mutex_lock(&mu);
        struct gm_graph *x = has_mem_nodes(g) ? graph_find(g) : NULL;
        bool busy = x && x->exec;
        pthread_mutex_unlock(&mu);
        if (busy) /* one exec at a time of a graph with memory nodes */
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = lupc_send_cuGraphInstantiateWithFlags(phGraphExec, hGraph, flags);
        if (r != CUDA_SUCCESS || !x)
                return r;
        pthread_mutex_lock(&mu);
        if ((x = graph_find(g))) {
                x->exec = (uint64_t)(uintptr_t)*phGraphExec;
                x->flags = flags;
        }
        pthread_mutex_unlock(&mu);
        return r;
}

EXPORT CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        CUresult r = lupc_send_cuGraphExecDestroy(hGraphExec);
        if (r != CUDA_SUCCESS)
                return r;
        pthread_mutex_lock(&mu);
        for (size_t i = 0; i < n_graphs; i++)
                if (graphs[i].exec == (uint64_t)(uintptr_t)hGraphExec)
                        graphs[i].exec = 0;
        release();
        pthread_mutex_unlock(&mu);
        return r;
}

static CUresult launch(CUgraphExec hGraphExec, CUstream hStream, int per_thread)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        uint64_t x = (uint64_t)(uintptr_t)hGraphExec, g = 0;
        CUstream w = (CUstream)(uintptr_t)lupc_stream_id(hStream, per_thread);
        bool auto_free = false, unfreed = false;
        pthread_mutex_lock(&mu);
        for (size_t i = 0; x && i < n_graphs && !g; i++)
                if (graphs[i].exec == x)
                        g = graphs[i].graph,
                        auto_free = graphs[i].flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
        for (size_t i = 0; g && i < n_allocs; i++)
                unfreed |= allocs[i].graph == g && allocs[i].live;
        pthread_mutex_unlock(&mu);
        if (unfreed && !auto_free) /* the last launch's allocations are not freed yet */
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = lupc_send_cuGraphLaunch(hGraphExec, w);
        CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
        if (r != CUDA_SUCCESS || !g || (cuStreamIsCapturing(w, &cs) == CUDA_SUCCESS && cs))
                return r; /* captured, not run: it allocates nothing yet */
        pthread_mutex_lock(&mu);
        for (size_t i = 0; i < n_allocs; i++)
                if (allocs[i].graph == g && !allocs[i].has_free)
                        allocs[i].live = true;
        pthread_mutex_unlock(&mu);
        return r;
}

EXPORT CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
        return launch(hGraphExec, hStream, 0);
}

EXPORT CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream);
EXPORT CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
        return launch(hGraphExec, hStream, 1);
}

/* ---- stream-ordered calls: captured ones, and frees of graph memory */

CUresult lupc_gmem_capture_alloc(CUdeviceptr *dptr, size_t bytes, const CUmemPoolProps *props, CUstream s)
{
        uint64_t p = 0, node = 0, graph = 0;
        CUresult r = reserve(bytes, props->location.id, &p);
        if (r != CUDA_SUCCESS)
                return r;
        r = lupc_send_lupGraphMemCapture((CUstream)(uintptr_t)lupc_stream_id(s, 0), &node, &graph);
        if (r == CUDA_SUCCESS && !graph)
                r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* not a capture of this process */
        if (r == CUDA_SUCCESS)
                r = record(graph, node, p, bytes, props, NULL, 0);
        if (r == CUDA_SUCCESS) {
                pthread_mutex_lock(&mu);
                struct gm_alloc *a = alloc_at(p);
                if (a)
                        a->captured = true;
                pthread_mutex_unlock(&mu);
        }
        if (r != CUDA_SUCCESS) {
                unreserve(p);
                return r;
        }
        *dptr = p;
        return CUDA_SUCCESS;
}

CUresult lupc_gmem_capture_free(CUdeviceptr dptr, CUstream s)
{
        CUstreamCaptureStatus st;
        cuuint64_t id = 0;
        CUgraph cg = NULL;
        CUresult r = cuStreamGetCaptureInfo_v3(s, &st, &id, &cg, NULL, NULL, NULL);
        if (r != CUDA_SUCCESS)
                return r;
        uint64_t g = (uint64_t)(uintptr_t)cg, node = 0, graph = 0;
        pthread_mutex_lock(&mu);
        struct gm_alloc *a = alloc_at(dptr);
        bool ok = a && a->graph == g && a->alloc_node && !a->has_free;
        pthread_mutex_unlock(&mu);
        if (!a || st != CU_STREAM_CAPTURE_STATUS_ACTIVE)
                return LUPC_GMEM_NOT_MINE;
        if (!ok) /* graph memory of another graph, or freed already */
                return CUDA_ERROR_INVALID_VALUE;
        if ((r = lupc_send_lupGraphMemCapture((CUstream)(uintptr_t)lupc_stream_id(s, 0), &node, &graph)) !=
            CUDA_SUCCESS)
                return r;
        pthread_mutex_lock(&mu);
        if ((a = alloc_at(dptr)) && a->graph == graph)
                a->free_node = node, a->has_free = a->free_captured = true;
        pthread_mutex_unlock(&mu);
        return CUDA_SUCCESS;
}

CUresult lupc_gmem_free(CUdeviceptr dptr)
{
        CUresult r = LUPC_GMEM_NOT_MINE;
        pthread_mutex_lock(&mu);
        struct gm_alloc *a = n_allocs ? alloc_at(dptr) : NULL;
        if (a && a->live) { /* what a launch left allocated: freed, for the driver */
                a->live = false;
                release();
                r = CUDA_SUCCESS;
        } else if (a) { /* not allocated now (no launch since its last free) */
                r = CUDA_ERROR_INVALID_VALUE;
        }
        pthread_mutex_unlock(&mu);
        return r;
}

/* ---- the device's graph memory: lupine's reservations */

static CUresult device_ok(CUdevice device)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        return lupc_device(device) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

EXPORT CUresult CUDAAPI cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
        CUresult r = device_ok(device);
        if (r != CUDA_SUCCESS)
                return r;
        if (!value || device >= LUPC_GMEM_DEVICES)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&mu);
        switch (attr) {
        case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
        case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
                *(cuuint64_t *)value = used[device];
                break;
        case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
        case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
                *(cuuint64_t *)value = high[device];
                break;
        default:
                r = CUDA_ERROR_INVALID_VALUE;
                break;
        }
        pthread_mutex_unlock(&mu);
        return r;
}

/* Only the high watermarks may be set, and only to zero: they restart
 * from what is reserved now. */
EXPORT CUresult CUDAAPI cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
        CUresult r = device_ok(device);
        if (r != CUDA_SUCCESS)
                return r;
        if (!value || *(cuuint64_t *)value != 0 || device >= LUPC_GMEM_DEVICES ||
            (attr != CU_GRAPH_MEM_ATTR_USED_MEM_HIGH && attr != CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH))
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&mu);
        high[device] = used[device];
        pthread_mutex_unlock(&mu);
        return CUDA_SUCCESS;
}

/* lupine caches no graph memory beyond what graphs hold: nothing to trim. */
EXPORT CUresult CUDAAPI cuDeviceGraphMemTrim(CUdevice device)
{
        return device_ok(device);
}
