/* SPDX-License-Identifier: MIT */
/*
 * The checkpoint's "graphs" object: a portable record of every graph and
 * graph exec of a session (worker/graphs_ckpt.c walks the driver's graphs
 * into it, and rebuilds them from it), and the stream captures a drain
 * ended. A sealed object (ckpt_codec.h), version 1:
 *
 *      u32 n, n x graph {
 *              u64 id, u8 role (LUP_GRAPH_ROLE_*), u64 ctx, u64 parent,
 *              u64 flags,
 *              u32 n, n x node { u8 type (CUgraphNodeType), u64 id (the node's
 *                               client id, 0: none), body by type },
 *              u32 n, n x edge { u32 from, u32 to }  (indices of nodes)
 *      }
 *      u32 n, n x capture { u64 stream, u64 graph, u64 capture id }
 *      version 2: u32 n, n x disabled { u32 graph, u32 node }  (an exec
 *              record's node that cuGraphNodeSetEnabled turned off: indices
 *              of a record of role EXEC and of one of its kernel, memset or
 *              memcpy nodes)
 *
 *   node bodies: KERNEL  u64 function id, u32 grid[3], u32 block[3],
 *                        u32 shared bytes, u32 n, n param bytes
 *                        (laid out as cuFuncGetParamInfo says)
 *                MEMSET  u64 dst, u64 pitch, u32 value, u32 element size,
 *                        u64 width, u64 height
 *                MEMCPY  u64 dst, u64 src, u64 bytes (device to device)
 *                EMPTY   nothing
 *                EVENT_RECORD, WAIT_EVENT  u64 event id
 *                GRAPH   u32 index of the child's record (role CHILD; its
 *                        id: the client's id of the node's graph, which
 *                        cuGraphChildGraphNodeGetGraph gave, or 0)
 *
 * Device addresses are the client's (module globals before any
 * translation); ids are client ids. The decoder checks every count
 * against the limits below and every index against its list; what only
 * the session can judge (whether an id names something) is left to the
 * worker.
 */
#ifndef LUP_CKPT_GRAPH_H
#define LUP_CKPT_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt_codec.h"

#define LUP_GRAPH_ROLE_GRAPH 0 /* a graph the client holds (id: the graph's) */
#define LUP_GRAPH_ROLE_EXEC  1 /* an exec's own copy of its graph (id: the exec's; flags: instantiate flags) */
#define LUP_GRAPH_ROLE_CHILD 2 /* the graph of a child graph node (id: the client's, or 0) */

#define LUP_CKPT_MAX_GRAPHS      65536u
#define LUP_CKPT_MAX_GRAPH_NODES (1u << 20) /* per graph */
#define LUP_CKPT_MAX_GRAPH_EDGES (1u << 22) /* per graph */
#define LUP_CKPT_MAX_CAPTURES    64u        /* the worker's LUPW_MAX_CAPTURES */
#define LUP_CKPT_GRAPHS_MAX      (1024ull << 20)
#define LUP_CKPT_MAX_GRAPH_OFF   (1u << 22) /* disabled exec nodes, in all */

/* node types (the values of CUgraphNodeType) */
#define LUP_GNODE_KERNEL       0
#define LUP_GNODE_MEMCPY       1
#define LUP_GNODE_MEMSET       2
#define LUP_GNODE_GRAPH        4
#define LUP_GNODE_EMPTY        5
#define LUP_GNODE_WAIT_EVENT   6
#define LUP_GNODE_EVENT_RECORD 7

struct lup_ckpt_gnode {
        uint8_t type;
        uint64_t id; /* the client's id of the node (graphs only), 0 for none */
        union {
                struct {
                        uint64_t func;
                        uint32_t grid[3], block[3], smem;
                        uint32_t n_bytes; /* at most LUP_MAX_PARAM_BYTES */
                        const uint8_t *bytes;
                } kernel;
                struct {
                        uint64_t dst, pitch;
                        uint32_t value, elem; /* elem: 1, 2 or 4 */
                        uint64_t width, height;
                } memset;
                struct {
                        uint64_t dst, src, bytes;
                } memcpy;
                uint64_t event;
                uint32_t child;
        } u;
};

struct lup_ckpt_gedge {
        uint32_t from, to;
};

struct lup_ckpt_graph {
        uint64_t id;
        uint8_t role;
        uint64_t ctx, parent, flags;
        uint32_t n_nodes, n_edges;
        struct lup_ckpt_gnode *nodes;
        struct lup_ckpt_gedge *edges;
};

struct lup_ckpt_capture {
        uint64_t stream, graph, cid;
};

/* an exec's node turned off (cuGraphNodeSetEnabled): record and node indices */
struct lup_ckpt_goff {
        uint32_t graph, node;
};

/* A decode allocates the arrays (the kernel bytes point into `raw`, a copy
 * of the object); lup_ckpt_graphs_free() frees them. */
struct lup_ckpt_graphs {
        uint32_t n_graphs, n_caps;
        struct lup_ckpt_graph *graphs;
        struct lup_ckpt_capture *caps;
        uint32_t n_off;
        struct lup_ckpt_goff *off;
        uint32_t version; /* a decode's: the object's; an encode writes 0 (and 2) as 2, 1 as 1 (no n_off) */
        uint8_t *raw;
};

extern const struct lup_sealed lup_ckpt_graphs_kind;

int lup_ckpt_graphs_encode(const struct lup_ckpt_graphs *g, uint8_t **ret_buf, size_t *ret_len);
/* 0, -EBADMSG / -EPROTO (with *ret_why), or -ENOMEM. */
int lup_ckpt_graphs_decode(const uint8_t *p, size_t n, struct lup_ckpt_graphs *ret, const char **ret_why);
/* Frees a decode's storage; NULL-tolerant. */
void lup_ckpt_graphs_free(struct lup_ckpt_graphs *g);

#endif
