/* SPDX-License-Identifier: MIT */
/* Stream capture and graphs in the worker (worker/graphs.c, graphs_ckpt.c). */
#ifndef LUPD_WORKER_GRAPHS_H
#define LUPD_WORKER_GRAPHS_H

#include "worker/session.h"

void lupw_graphs_init(struct lupw_session *s);
void lupw_graphs_free(struct lupw_session *s);
/* The capture whose origin is `real`, or whose driver id is cid. */
struct lupw_capture *lupw_capture_find(struct lupw_session *s, CUstream real, uint64_t cid);
/* The client id of the graph capture c builds. */
uint64_t lupw_capture_graph(struct lupw_session *s, struct lupw_capture *c);
/* A drain: ends every open capture (their partial graphs are dropped). */
void lupw_captures_abort(struct lupw_session *s);
/* An exec's record: made (NULL when out of memory), or looked up. */
struct lupw_exec *lupw_exec_new(struct lupw_session *s, CUgraphExec exec, CUgraph src);
struct lupw_exec *lupw_exec_get(struct lupw_session *s, CUgraphExec exec);

/* worker/graph_nodes.c: node ids. The id of a driver's node (given one
 * from the worker's range if it has none; 0 if that fails), the id it has
 * (0: none), and one put under a given id (restore). */
uint64_t lupw_node_id(struct lupw_session *s, CUgraphNode real, uint64_t graph);
uint64_t lupw_node_lookup(struct lupw_session *s, CUgraphNode real);
CUresult lupw_node_put(struct lupw_session *s, uint64_t id, CUgraphNode real, uint64_t graph);
/* worker/graph_child.c: forgetting every node id of a graph (destroyed),
 * with the graphs of its child graph nodes the client holds by id. */
void lupw_nodes_forget(struct lupw_session *s, uint64_t graph);
/* The driver's parameters of the memset and memcpy nodes lupine makes
 * (a memcpy node is a 1-D device-to-device copy), from the client's
 * addresses, translated to where module globals are now. */
CUDA_MEMSET_NODE_PARAMS lupw_memset_node_params(const struct lupw_session *s, uint64_t dst, uint64_t pitch,
                                                uint32_t value, uint32_t elem, uint64_t width, uint64_t height);
CUDA_MEMCPY3D lupw_copy_node_params(const struct lupw_session *s, uint64_t dst, uint64_t src, uint64_t bytes);
/* A module global's address where it is now -> the client's (the reverse
 * of lupw_xlate). */
uint64_t lupw_unxlate(const struct lupw_session *s, uint64_t v);

/* worker/graph_host.c: host nodes. The function every host node of the
 * driver runs (its userData is the shim's token); an exec's split into
 * segments around its host nodes (made again, or freed), and a node's
 * parameters carried from the exec's clone into its segment after a
 * cuGraphExec*SetParams (id: the node's id, n: the clone's node). */
void lupw_host_noop(void *token);
CUresult lupw_split_build(struct lupw_session *s, struct lupw_exec *x, unsigned long long flags);
void lupw_split_free(struct lupw_session *s, struct lupw_exec *x);
CUresult lupw_split_sync(struct lupw_session *s, struct lupw_exec *x, uint64_t id, CUgraphNode n);
CUresult lupw_split_carry_enabled(struct lupw_session *s, struct lupw_exec *x, CUgraphExec main);

/* worker/graph_flatten.c: a graph's nodes (malloc'ed); every child graph
 * node of an exec's clone that holds a host node replaced by copies of its
 * nodes (*ret_n: how many were). */
CUresult lupw_graph_nodes(const struct lupw_backend *be, CUgraph g, CUgraphNode **ret, size_t *ret_n);
CUresult lupw_graph_flatten(struct lupw_session *s, struct lupw_exec *x, int *ret_n);

/* worker/graph_child.c: a child graph node's graph handed to the client
 * (a GRAPH handle with prov.flags LUPW_GRAPH_OWNED, prov.parent the node's
 * id); forgetting the one node `node` owns, with its nodes' ids (and theirs,
 * nested); the client id of a driver graph (0: none). */
#define LUPW_GRAPH_OWNED 2u
void lupw_child_forget(struct lupw_session *s, uint64_t node);
uint64_t lupw_graph_id_of(struct lupw_session *s, CUgraph real);
/* cuGraphExecUpdate: the nodes off in exec `from` turned off in `to`. */
CUresult lupw_exec_carry_off(struct lupw_session *s, CUgraphExec from, CUgraph from_src, CUgraphExec to,
                             CUgraph to_src);

/* worker/graph_kernel.c: LUP_OP_GRAPH_KERNEL */
extern const struct lupw_ctl_op lupw_ctl_graph_kernel, lupw_ctl_graph_kernel_get;

struct lupine_ckpt_save;
struct lupine_ckpt_load;
/* worker/graphs_ckpt.c: the object "graphs" (graphs, execs, captures a
 * drain ended): 0 or -errno (logged). */
int lupw_graphs_save(struct lupw_session *s, struct lupine_ckpt_save *save);
/* worker/graphs_restore.c: after handles, globals and events are back;
 * 0, or -errno with why. */
int lupw_graphs_load(struct lupw_session *s, struct lupine_ckpt_load *ld, char *why, size_t whylen);

#endif
