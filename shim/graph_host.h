/* SPDX-License-Identifier: MIT */
/* Graph host nodes in the shim (shim/graph_host.c). */
#ifndef LUPC_GRAPH_HOST_H
#define LUPC_GRAPH_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cuda.h>

/* shim/api_graph_nodes.c: a node of `type` with the worker's values v
 * added to g after deps (its id minted here). */
CUresult lupc_graph_add(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t n, unsigned type,
                        const uint64_t v[6]);
/* shim/api_graph.c: whether stream (wire id) is in an active capture. */
CUresult lupc_capture_active(uint64_t stream, bool *ret);

/* shim/graph_host.c */
/* The worker's calls behind cuGraphInstantiateWithFlags, cuGraphLaunch
 * (stream: the wire id) and cuGraphExecDestroy (shim/api_graph_mem.c),
 * with the exec's host node plan fetched, followed and dropped. */
CUresult lupc_host_instantiate(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags);
CUresult lupc_host_launch(CUgraphExec e, CUstream stream);
CUresult lupc_host_exec_destroy(CUgraphExec e);
/* The exec's host node plan read again (after cuGraphExecUpdate). */
CUresult lupc_host_plan_refresh(uint64_t exec);
/* cuLaunchHostFunc on a stream in an active capture: captured as a host
 * node (*done), else left to the caller (*done false). */
CUresult lupc_host_capture(uint64_t stream, CUhostFn fn, void *userData, bool *done);

#endif
