/* SPDX-License-Identifier: MIT */
/* Graph memory in the shim (shim/api_graph_mem.c). */
#ifndef LUPC_GMEM_H
#define LUPC_GMEM_H

#include <stdbool.h>
#include <stdint.h>
#include <cuda.h>

#define LUPC_GMEM_DEVICES  64
/* what the calls below answer for memory that is not graph memory */
#define LUPC_GMEM_NOT_MINE ((CUresult)-1)

/* cuMemAllocAsync / cuMemAllocFromPoolAsync on capturing stream s (as the
 * caller named it): memory reserved for the capture's graph, an alloc
 * node in the capture. */
CUresult lupc_gmem_capture_alloc(CUdeviceptr *dptr, size_t bytes, const CUmemPoolProps *props, CUstream s);
/* cuMemFreeAsync of graph memory on capturing stream s: a free node;
 * LUPC_GMEM_NOT_MINE for memory that is not graph memory. */
CUresult lupc_gmem_capture_free(CUdeviceptr dptr, CUstream s);
/* cuMemFree / cuMemFreeAsync outside a capture: graph memory a launch
 * left allocated is freed (the reservation stays with its graph);
 * LUPC_GMEM_NOT_MINE for other memory. */
CUresult lupc_gmem_free(CUdeviceptr dptr);
/* A graph is destroyed. */
void lupc_gmem_graph_gone(uint64_t graph);
/* A capture into graph ended without one: what it allocated goes. */
void lupc_gmem_capture_failed(uint64_t graph);
/* A capture ended; still_open: how many this process has open. Graph
 * memory is given back only while none is (the worker's free synchronises
 * the context, which would invalidate a capture). */
void lupc_gmem_capture_ended(int still_open);
/* api_graph.c: how many stream captures this process has open. */
int lupc_captures_open(void);
/* Whether graph has memory alloc or free nodes. */
bool lupc_gmem_has_mem_nodes(uint64_t graph);
/* cuGraphAddNode of a MEM_ALLOC or MEM_FREE node (p->alloc.dptr set). */
CUresult lupc_gmem_add_node(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t n, CUgraphNodeParams *p);
/* A memory node's parameters, generic form (for cuGraphNodeGetParams):
 * false if node is not a memory node. accessDescs: the shim's copy. */
bool lupc_gmem_node_params(uint64_t node, CUgraphNodeParams *ret);

#endif
