/* SPDX-License-Identifier: MIT */
/*
 * CUDA graphs and stream capture: what sim_graph.c (graphs, nodes,
 * edges), sim_graph_node.c (typed node parameters), sim_graph_exec.c
 * (instantiate, launch, update) and sim_capture.c (stream capture) share,
 * and the hooks the stream-work paths (launch, copies, sets, events, host
 * functions) call.
 *
 * A graph, a node and an executable graph are tagged ids, like every sim
 * handle. Every graph object is guarded by one mutex, the graph mutex.
 * Order: the registry rwlock, then the graph mutex, then q_mu. Stream
 * threads never take the graph mutex: a launch turns an executable graph
 * into ordinary queue ops (sim_queue.c), each holding copies of what it
 * needs, so a graph may be changed or destroyed while its launches run.
 */
#ifndef LUPINE_SIM_GRAPH_H
#define LUPINE_SIM_GRAPH_H

#include "sim_copy.h"

#define SIM_TAG_GRAPH SIM_TAG(0x5c9)
#define SIM_TAG_NODE  SIM_TAG(0x5ca)
#define SIM_TAG_EXEC  SIM_TAG(0x5cb)

#define SIM_MAX_GRAPHS      65536
#define SIM_MAX_GRAPH_NODES (1u << 20) /* all graphs together */
#define SIM_MAX_NODE_DEPS   65536      /* edges into one node */
#define SIM_MAX_GRAPH_DEPTH 64         /* child graphs nested */
#define SIM_MAX_EXECS       65536
#define SIM_MAX_CAPTURES    4096

struct sim_launch;

/* One block of graph memory (a memory alloc node's). Its range is of kind
 * SIM_RANGE_GLOBAL, so cuMemFree cannot pull it from under the graph; it
 * lives while its node or an executable graph holds it. */
struct sim_gmem {
        unsigned refs; /* graph mutex */
        struct sim_range *range;
        CUcontext ctx;
        int dev;
        size_t size;
};

/* What a node does, deep-copied between a graph, its clones and its
 * executable graphs. */
struct sim_nparams {
        CUgraphNodeType type;
        CUcontext ctx; /* the context the work runs in */
        union {
                struct {
                        struct sim_launch *l;
                        CUfunction func;
                        CUkernel kern;
                        void **kp; /* pointers into l's parameter bytes */
                } kernel;
                struct {
                        CUDA_MEMCPY3D desc;
                        struct sim_copy box;
                } memcpy;
                CUDA_MEMSET_NODE_PARAMS memset;
                CUDA_HOST_NODE_PARAMS host;
                struct sim_graph *child; /* owned by the node */
                CUevent event;
                struct {
                        CUDA_MEM_ALLOC_NODE_PARAMS p; /* accessDescs not kept */
                        struct sim_gmem *mem;
                } alloc;
                CUdeviceptr free_ptr;
        } u;
};

struct sim_gnode {
        uint64_t id;
        struct sim_graph *graph;
        struct sim_nparams p;
        struct sim_gnode **deps; /* edges in */
        size_t ndeps, deps_cap;
        struct sim_gnode **outs; /* edges out */
        size_t nouts, outs_cap;
        uint64_t clone_of; /* the node it was cloned from, or 0 */
        bool disabled;     /* in an executable graph's copy */
        size_t mark;       /* scratch for walks */
};

struct sim_graph {
        uint64_t id;
        struct sim_gnode **nodes; /* in creation order */
        size_t n, cap;
        unsigned execs;          /* live executable graphs of it */
        unsigned captures;       /* captures adding to it */
        struct sim_gnode *owner; /* the child graph node holding it */
        bool hidden;             /* an executable graph's own copy: no handle */
};

/* ---- sim_graph.c ---- */
void sim_graph_lock(void);
void sim_graph_unlock(void);
/* Graph mutex held. NULL for a stale or foreign handle. */
struct sim_graph *sim_graph_lookup(CUgraph h);
struct sim_gnode *sim_node_lookup(CUgraphNode h);
CUgraph sim_graph_handle(const struct sim_graph *g);
CUgraphNode sim_node_handle(const struct sim_gnode *n);
/* A new empty graph, registered. Graph mutex held. */
struct sim_graph *sim_graph_new(bool hidden);
/* Unregisters and frees g, its nodes and their children. Graph mutex
 * held, and the rwlock exclusive when it may own graph memory. */
void sim_graph_free(struct sim_driver *drv, struct sim_graph *g);
/* Adds a node doing p (taken on success) after deps[0..n) (nodes of g,
 * no duplicates). CUDA_ERROR_INVALID_VALUE otherwise. Graph mutex held. */
CUresult sim_graph_add(struct sim_graph *g, struct sim_gnode *const *deps, size_t n, struct sim_nparams *p,
                       struct sim_gnode **ret);
/* A deep copy of g, registered (each node knows its original).
 * CUDA_ERROR_NOT_SUPPORTED for a graph with memory nodes. Graph mutex
 * held. */
CUresult sim_graph_clone(struct sim_graph *g, struct sim_graph **ret);
/* The same without the check, hidden (an executable graph's copy) or not. */
CUresult sim_graph_copy(struct sim_graph *g, bool hidden, struct sim_graph **ret);
/* Whether g or a child of it has a memory alloc or free node. */
bool sim_graph_has_mem_nodes(const struct sim_graph *g);

/* ---- sim_graph_node.c ---- */
/* Deep copy and release of node parameters. Graph mutex held. */
CUresult sim_nparams_copy(const struct sim_nparams *src, struct sim_nparams *dst, bool hidden);
void sim_nparams_release(struct sim_driver *drv, struct sim_nparams *p);
void sim_gmem_put(struct sim_driver *drv, struct sim_gmem *m);
/* Counts size bytes of graph memory more (or, negative, fewer) on dev,
 * for cuDeviceGetGraphMemAttribute (sim_graph_mem.c). Graph mutex held. */
void sim_gmem_account(int dev, long long size);
/* Points p->u.kernel.kp at the parameters of p->u.kernel.l. */
CUresult sim_nparams_kernel_ptrs(struct sim_nparams *p);
/* Parameters from a CUgraphNodeParams (cuGraphAddNode and its kin), checked
 * as the driver does. g is the graph the node goes to (alloc and free
 * nodes check it). Lock held (exclusive for an alloc node), graph mutex
 * held. */
CUresult sim_nparams_from_generic(struct sim_driver *drv, struct sim_graph *g, const CUgraphNodeParams *np,
                                  struct sim_nparams *ret);
/* Copies out (shallow) the parameters of node h if it has type t, else
 * CUDA_ERROR_INVALID_VALUE. Takes the graph mutex. */
CUresult sim_node_get(CUgraphNode h, CUgraphNodeType t, struct sim_nparams *ret);
/* Whether a and b may be swapped by cuGraphExecUpdate (same type, same
 * function's context...); a CU_GRAPH_EXEC_UPDATE_* reason otherwise. */
CUgraphExecUpdateResult sim_nparams_updatable(const struct sim_nparams *a, const struct sim_nparams *b);

/* ---- sim_graph_exec.c ---- */
struct sim_exec {
        uint64_t id;
        uint64_t graph_id; /* the graph it came from */
        unsigned long long flags;
        struct sim_graph *g;      /* hidden copy */
        struct sim_gnode **order; /* leaves of g and its children, in run order */
        size_t n, cap;
};

/* Graph mutex held. NULL for a stale handle. */
struct sim_exec *sim_exec_lookup(CUgraphExec h);

/* ---- sim_launch.c ---- */
struct sim_launch_cfg {
        unsigned grid[3], block[3];
        unsigned shared_bytes;
        bool cooperative;
        unsigned cluster[3]; /* 0: none */
};
/* Checks a launch of hfunc as cuLaunchKernel does (in the current
 * context h), and copies its parameters. Lock held (shared). */
CUresult sim_launch_build(struct sim_driver *drv, CUfunction hfunc, CUcontext h, const struct sim_launch_cfg *cfg,
                          void **kernelParams, void **extra, struct sim_launch **ret);
struct sim_launch *sim_launch_dup(const struct sim_launch *l);
/* Fills kp[0..nparams) with pointers to l's parameters; their number. */
size_t sim_launch_param_ptrs(struct sim_launch *l, void **kp, size_t max);
size_t sim_launch_nparams(const struct sim_launch *l);
void sim_launch_get_cfg(const struct sim_launch *l, struct sim_launch_cfg *ret);
/* Queues l (taken) on q (its reference taken) to run in context ctx. */
CUresult sim_launch_submit(struct sim_driver *drv, struct sim_queue *q, struct sim_launch *l, CUcontext ctx);
/* The same as an op, for a graph launch to submit; NULL on no memory. */
struct sim_op *sim_launch_op(struct sim_launch *l, CUcontext ctx);

/* ---- sim_copy.c / sim_copy2d.c ---- */
CUresult sim_copy_check(struct sim_driver *drv, const struct sim_copy *c);
CUresult sim_copy_exec(struct sim_driver *drv, void *arg);
/* The box of a CUDA_MEMCPY3D, checked as cuMemcpy3D does. */
CUresult sim_copy3d_box(const CUDA_MEMCPY3D *p, struct sim_copy *ret);
/* The descriptor of a box, for a captured copy's node. */
void sim_copy_to_desc(const struct sim_copy *c, CUDA_MEMCPY3D *ret);

/* ---- sim_capture.c: the hooks ----
 * Each is called with the rwlock held shared, by a call that is about to
 * submit work to q. SIM_CAPTURE_RUN: q is not capturing, submit as usual;
 * anything else is the call's result (the node made, or the error). */
#define SIM_CAPTURE_RUN ((CUresult)-1)
/* Work p (taken either way unless SIM_CAPTURE_RUN is returned). */
CUresult sim_capture_work(struct sim_driver *drv, struct sim_queue *q, struct sim_nparams *p);
CUresult sim_capture_record(struct sim_driver *drv, struct sim_queue *q, CUevent e, unsigned flags);
CUresult sim_capture_wait(struct sim_driver *drv, struct sim_queue *q, CUevent e, unsigned flags);
/* Work that cannot be captured (callbacks, synchronous queries): the
 * capture of q is invalidated and CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
 * returned; SIM_CAPTURE_RUN when q is not capturing. For the legacy queue,
 * CUDA_ERROR_STREAM_CAPTURE_IMPLICIT when a blocking stream of its
 * context captures. */
CUresult sim_capture_forbid(struct sim_driver *drv, struct sim_queue *q);
/* A potentially unsafe call (synchronous copy, cuCtxSynchronize,
 * cuMemAlloc...) by this thread: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
 * invalidating the captures that forbid it, under the capture modes'
 * rules; CUDA_SUCCESS when allowed. No lock needed. */
CUresult sim_capture_unsafe_call(void);
/* Whether event h was last recorded in a capture still going. */
bool sim_capture_event_captured(CUevent h);
/* Whether any capture is going (cheap, no lock). */
bool sim_capture_any(void);

/* ---- sim_event.c ---- */
/* The event behind h, with a reference (put with sim_event_put_locked
 * under q_mu), or NULL. Lock held (shared). */
struct sim_event *sim_event_get_ref(struct sim_driver *drv, CUevent h);
bool sim_event_valid(struct sim_driver *drv, CUevent h);

#endif
