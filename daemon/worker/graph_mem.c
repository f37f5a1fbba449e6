/* SPDX-License-Identifier: MIT */
/*
 * Graph memory in the worker. lupine's graph-owned memory is arena memory
 * the shim reserves (shim/api_graph_mem.c), so memory alloc and free
 * nodes do no work here: they are empty nodes of the driver that order
 * the graph, and the shim keeps what they are. An explicit one is an
 * empty node added with lupGraphAddNode; this file puts one into a
 * stream's capture, where cuMemAllocAsync or cuMemFreeAsync was called.
 */
#define LUP_LOG_CAT LUP_LOGC_GPU
#include <string.h>

#include "worker/graphs.h"
#include "worker/session.h"

#define MAX_CAPTURE_DEPS 4096

/* An empty node at the capture's current dependencies, which it then
 * replaces: what the driver does for a captured allocation or free. */
CUresult lupw_lupGraphMemCapture(struct lupw_session *s, CUstream hStream, uint64_t *node, uint64_t *graph)
{
        static CUgraphNode deps[MAX_CAPTURE_DEPS];
        const struct lupw_backend *be = &s->be.fn;
        CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
        const CUgraphNode *cdeps = NULL;
        cuuint64_t cid = 0;
        CUgraph g = NULL;
        size_t n = 0;
        CUgraphNode e;
        *node = *graph = 0;
        CUresult r = be->cuStreamGetCaptureInfo_v3(hStream, &st, &cid, &g, &cdeps, NULL, &n);
        if (r != CUDA_SUCCESS)
                return r;
        if (st == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
                return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        if (st != CU_STREAM_CAPTURE_STATUS_ACTIVE || !g)
                return CUDA_ERROR_ILLEGAL_STATE;
        struct lupw_capture *c = lupw_capture_find(s, NULL, cid);
        if (!c)
                return CUDA_ERROR_ILLEGAL_STATE; /* not a capture this worker began */
        if (c->poisoned || c->lost)
                return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        if (n > MAX_CAPTURE_DEPS)
                return CUDA_ERROR_OUT_OF_MEMORY;
        if (n) /* the driver's array may not outlive the graph's next change */
                memcpy(deps, cdeps, n * sizeof(*deps));
        uint64_t gid = lupw_capture_graph(s, c);
        if ((r = be->cuGraphAddEmptyNode(&e, g, deps, n)) != CUDA_SUCCESS)
                return r;
        r = be->cuStreamUpdateCaptureDependencies_v2(hStream, &e, NULL, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES);
        if (r != CUDA_SUCCESS) {
                (void)be->cuGraphDestroyNode(e);
                return r;
        }
        *node = lupw_node_id(s, e, gid);
        *graph = gid;
        return *node ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
