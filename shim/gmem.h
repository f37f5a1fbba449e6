/* SPDX-License-Identifier: MIT */
/* Graph memory in the shim (shim/api_graph_mem.c). */
#ifndef LUPC_GMEM_H
#define LUPC_GMEM_H

#include <stdint.h>
#include <cuda.h>

#define LUPC_GMEM_DEVICES 64
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
/* A graph is gone (destroyed, or a capture that made none). */
void lupc_gmem_graph_gone(uint64_t graph);

#endif
