/* SPDX-License-Identifier: MIT */
/*
 * Kernel nodes of the explicit graph API in the shim: added, their
 * parameters set (in a graph and in an exec) and read back, and exec
 * updates. The parameters travel packed by the function's layout, as a
 * launch's do (LUP_OP_GRAPH_KERNEL, LUP_OP_GRAPH_KERNEL_GET).
 */
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "ctl_codec.h"
#include "funcs.h"
#include "graph_host.h"
#include "log.h"
#include "shim_gen.h"
#include "u64map.h"

#define EXPORT __attribute__((visibility("default")))

#undef cuGraphAddKernelNode
#undef cuGraphKernelNodeGetParams
#undef cuGraphKernelNodeSetParams
#undef cuGraphExecKernelNodeSetParams
#undef cuGraphExecUpdate

#define ID(h) ((uint64_t)(uintptr_t)(h))

/* ---- kernel nodes (LUP_OP_GRAPH_KERNEL) and exec updates */

static CUresult kernel_node(uint32_t mode, uint64_t node, uint64_t target, const CUDA_KERNEL_NODE_PARAMS *p)
{
        static __thread uint8_t frame[LUP_GRAPH_KERNEL_PREFIX + LUP_LAUNCH_MAX_SIZE];
        struct lupc_func_layout lay;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!p || !target || !node)
                return CUDA_ERROR_INVALID_VALUE;
        /* kern is used only when func is NULL (the runtime may set both) */
        uint64_t f = p->func ? ID(p->func) : ID(p->kern);
        if (!f)
                return CUDA_ERROR_INVALID_VALUE;
        if (p->ctx && ID(p->ctx) != lupc_ctx_current())
                return CUDA_ERROR_NOT_SUPPORTED; /* nodes run in the calling thread's context here */
        const unsigned g[3] = { p->gridDimX, p->gridDimY, p->gridDimZ },
                       b[3] = { p->blockDimX, p->blockDimY, p->blockDimZ };
        for (int i = 0; i < 3; i++)
                if (!g[i] || !b[i])
                        return CUDA_ERROR_INVALID_VALUE;
        CUresult r = lupc_func_layout(f, &lay);
        if (r != CUDA_SUCCESS)
                return r;
        struct lup_launch wl;
        memset(&wl, 0, sizeof(wl));
        wl.func = f;
        memcpy(wl.grid, g, sizeof(g));
        memcpy(wl.block, b, sizeof(b));
        wl.shmem = p->sharedMemBytes;
        wl.param_bytes = lay.param_bytes;
        struct lup_wr w = lup_wr_init(frame, sizeof(frame));
        uint8_t *pb;
        lup_wr_u64(&w, node);
        lup_wr_u64(&w, target);
        lup_wr_u32(&w, mode);
        if (lup_launch_encode(&w, &wl, &pb) < 0)
                return CUDA_ERROR_INVALID_VALUE;
        if ((r = lupc_pack_params(&lay, p->kernelParams, p->extra, pb)) != CUDA_SUCCESS)
                return r;
        return lupc_call(LUP_OP_GRAPH_KERNEL, LUPC_SYNC | LUPC_CTX, frame, w.len, NULL, 0, NULL);
}

EXPORT CUresult CUDAAPI cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                                const CUgraphNode *dependencies, size_t numDependencies,
                                                const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
        if (!phGraphNode || (numDependencies && !dependencies))
                return CUDA_ERROR_INVALID_VALUE;
        uint64_t id = lupc_mint_handle();
        CUresult r = kernel_node(LUP_GRAPH_KERNEL_ADD, id, ID(hGraph), nodeParams);
        for (size_t i = 0; r == CUDA_SUCCESS && i < numDependencies; i++)
                if ((r = lupc_send_lupGraphEdge(1, hGraph, ID(dependencies[i]), id)) != CUDA_SUCCESS)
                        (void)cuGraphDestroyNode((CUgraphNode)(uintptr_t)id);
        if (r == CUDA_SUCCESS)
                *phGraphNode = (CUgraphNode)(uintptr_t)id;
        return r;
}

EXPORT CUresult CUDAAPI cuGraphKernelNodeSetParams_v2(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
        return kernel_node(LUP_GRAPH_KERNEL_SET, ID(hNode), 1, nodeParams);
}

EXPORT CUresult CUDAAPI cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                          const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
        return kernel_node(LUP_GRAPH_KERNEL_EXEC_SET, ID(hNode), ID(hGraphExec), nodeParams);
}

EXPORT CUresult CUDAAPI cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
                                             CUgraphExecUpdateResultInfo *resultInfo)
{
        int result = 0, status = 0;
        uint64_t err = 0, from = 0;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!hGraphExec || !hGraph || !resultInfo)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = lupc_send_lupGraphExecUpdate(hGraphExec, hGraph, &status, &result, &err, &from);
        if (r != CUDA_SUCCESS)
                return r;
        r = (CUresult)status;
        if (r == CUDA_SUCCESS) /* the exec's host node plan, made again by the worker */
                r = lupc_host_plan_refresh((uint64_t)(uintptr_t)hGraphExec);
        resultInfo->result = (CUgraphExecUpdateResult)result;
        resultInfo->errorNode = (CUgraphNode)(uintptr_t)err;
        resultInfo->errorFromNode = (CUgraphNode)(uintptr_t)from;
        return r;
}

/* The CUDA 10 forms: the parameters without kern and ctx, and the update's
 * result without the node it came from. */
static CUDA_KERNEL_NODE_PARAMS from_v1(const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
        CUDA_KERNEL_NODE_PARAMS k;
        memset(&k, 0, sizeof(k));
        memcpy(&k, p, sizeof(*p)); /* v1 is v2's prefix */
        return k;
}

EXPORT CUresult CUDAAPI cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                             size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams);
EXPORT CUresult CUDAAPI cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                             size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
        if (!nodeParams)
                return CUDA_ERROR_INVALID_VALUE;
        CUDA_KERNEL_NODE_PARAMS k = from_v1(nodeParams);
        return cuGraphAddKernelNode_v2(phGraphNode, hGraph, dependencies, numDependencies, &k);
}

EXPORT CUresult CUDAAPI cuGraphKernelNodeSetParams(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams);
EXPORT CUresult CUDAAPI cuGraphKernelNodeSetParams(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
        if (!nodeParams)
                return CUDA_ERROR_INVALID_VALUE;
        CUDA_KERNEL_NODE_PARAMS k = from_v1(nodeParams);
        return cuGraphKernelNodeSetParams_v2(hNode, &k);
}

EXPORT CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                       const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams);
EXPORT CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                       const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
        if (!nodeParams)
                return CUDA_ERROR_INVALID_VALUE;
        CUDA_KERNEL_NODE_PARAMS k = from_v1(nodeParams);
        return cuGraphExecKernelNodeSetParams_v2(hGraphExec, hNode, &k);
}

EXPORT CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphNode *hErrorNode_out,
                                          CUgraphExecUpdateResult *updateResult_out);
EXPORT CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphNode *hErrorNode_out,
                                          CUgraphExecUpdateResult *updateResult_out)
{
        CUgraphExecUpdateResultInfo info;
        if (!hErrorNode_out || !updateResult_out)
                return CUDA_ERROR_INVALID_VALUE;
        memset(&info, 0, sizeof(info));
        CUresult r = cuGraphExecUpdate_v2(hGraphExec, hGraph, &info);
        *hErrorNode_out = info.errorNode;
        *updateResult_out = info.result;
        return r;
}

/* ---- kernel nodes' parameters read (LUP_OP_GRAPH_KERNEL_GET)
 *
 * The parameter values live in a block per node kept here, so that the
 * pointers handed out stay valid as the driver's do (the same block is
 * filled again by the next read of that node; a node's blocks are not
 * freed). */

struct param_block {
        uint32_t bytes, n;
        void **ptrs;
        _Alignas(16) uint8_t data[];
};

static struct lup_u64map blocks = { .limit = LUP_MAX_HANDLES };
static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;

static struct param_block *block_for(uint64_t node, const struct lupc_func_layout *lay)
{
        uint64_t v;
        struct param_block *b = NULL;
        pthread_mutex_lock(&blocks_lock);
        if (lup_u64map_get(&blocks, node, &v))
                b = (struct param_block *)(uintptr_t)v;
        if (!b || b->bytes != lay->param_bytes || b->n != lay->n_params) {
                b = calloc(1, sizeof(*b) + lay->param_bytes + 16);
                void **p = b ? calloc(lay->n_params + 1, sizeof(*p)) : NULL;
                if (!p || lup_u64map_put(&blocks, node, (uint64_t)(uintptr_t)b) < 0) {
                        free(p);
                        free(b);
                        b = NULL;
                } else {
                        b->bytes = lay->param_bytes, b->n = lay->n_params, b->ptrs = p;
                }
        }
        pthread_mutex_unlock(&blocks_lock);
        return b;
}

EXPORT CUresult CUDAAPI cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
        uint8_t req[8], *rep;
        size_t n = 0, cap = 8 + 7 * 4 + 4 + LUP_MAX_PARAM_BYTES;
        struct lupc_func_layout lay;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!hNode || !nodeParams)
                return CUDA_ERROR_INVALID_VALUE;
        if (!(rep = malloc(cap)))
                return CUDA_ERROR_OUT_OF_MEMORY;
        lup_put64(req, ID(hNode));
        CUresult r = lupc_call(LUP_OP_GRAPH_KERNEL_GET, LUPC_SYNC | LUPC_CTX, req, sizeof(req), rep, cap, &n);
        struct lup_rd rd = lup_rd_init(rep, n);
        uint64_t f = 0;
        uint32_t dim[7] = { 0 }, bytes = 0;
        const uint8_t *pb = NULL;
        if (r == CUDA_SUCCESS) {
                lup_rd_u64(&rd, &f);
                for (int i = 0; i < 7; i++)
                        lup_rd_u32(&rd, &dim[i]);
                lup_rd_u32(&rd, &bytes);
                lup_rd_bytes(&rd, bytes, &pb);
                if (lup_rd_finish(&rd) < 0)
                        r = lupc_protocol_error("GRAPH_KERNEL_GET");
        }
        if (r == CUDA_SUCCESS && (r = lupc_func_layout(f, &lay)) == CUDA_SUCCESS && lay.param_bytes != bytes)
                r = lupc_protocol_error("GRAPH_KERNEL_GET");
        struct param_block *b = r == CUDA_SUCCESS ? block_for(ID(hNode), &lay) : NULL;
        if (r == CUDA_SUCCESS && !b)
                r = CUDA_ERROR_OUT_OF_MEMORY;
        if (r == CUDA_SUCCESS) {
                memcpy(b->data, pb, bytes);
                for (uint32_t i = 0; i < lay.n_params; i++)
                        b->ptrs[i] = b->data + lay.params[2 * i];
                memset(nodeParams, 0, sizeof(*nodeParams));
                nodeParams->func = (CUfunction)(uintptr_t)f;
                nodeParams->gridDimX = dim[0], nodeParams->gridDimY = dim[1], nodeParams->gridDimZ = dim[2];
                nodeParams->blockDimX = dim[3], nodeParams->blockDimY = dim[4], nodeParams->blockDimZ = dim[5];
                nodeParams->sharedMemBytes = dim[6];
                nodeParams->kernelParams = lay.n_params ? b->ptrs : NULL;
        }
        free(rep);
        return r;
}

EXPORT CUresult CUDAAPI cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams);
EXPORT CUresult CUDAAPI cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
        CUDA_KERNEL_NODE_PARAMS k;
        if (!nodeParams)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = cuGraphKernelNodeGetParams_v2(hNode, &k);
        if (r == CUDA_SUCCESS)
                memcpy(nodeParams, &k, sizeof(*nodeParams)); /* v1 is v2's prefix */
        return r;
}
