/* SPDX-License-Identifier: MIT */
/*
 * Node parameters: building them from the driver's structures (checked as
 * the driver checks them when a node is added or set), copying and
 * releasing them, and the typed cuGraph*Node* calls over the generic
 * cuGraphAddNode/cuGraphNodeSetParams.
 *
 * A kernel node keeps a copy of its parameter values, laid out as the
 * function's PTX says, taken when the node is added or set, as the driver
 * does. A memory alloc node gets its memory when it is added: the address
 * is fixed for the graph's life, as the driver documents, and the memory
 * is real, so later nodes (and work after a launch) may use it.
 */
#include <stdlib.h>
#include <string.h>

#include "sim_graph.h"

void sim_gmem_put(struct sim_driver *drv, struct sim_gmem *m)
{
        if (!m || --m->refs > 0)
                return;
        if (m->range && drv) {
                sim_range_destroy(drv, m->range);
                sim_gmem_account(m->dev, -(long long)m->size);
        }
        free(m);
}

void sim_nparams_release(struct sim_driver *drv, struct sim_nparams *p)
{
        switch (p->type) {
        case CU_GRAPH_NODE_TYPE_KERNEL:
                free(p->u.kernel.l);
                free(p->u.kernel.kp);
                break;
        case CU_GRAPH_NODE_TYPE_GRAPH:
                sim_graph_free(drv, p->u.child);
                break;
        case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
                sim_gmem_put(drv, p->u.alloc.mem);
                break;
        default:
                break;
        }
        memset(p, 0, sizeof(*p));
        p->type = CU_GRAPH_NODE_TYPE_EMPTY;
}

/* The kernel parameter pointers GetParams hands out, into l. */
CUresult sim_nparams_kernel_ptrs(struct sim_nparams *p)
{
        size_t n = sim_launch_nparams(p->u.kernel.l);

        p->u.kernel.kp = calloc(n ? n : 1, sizeof(void *));
        if (!p->u.kernel.kp)
                return CUDA_ERROR_OUT_OF_MEMORY;
        sim_launch_param_ptrs(p->u.kernel.l, p->u.kernel.kp, n);
        return CUDA_SUCCESS;
}

CUresult sim_nparams_copy(const struct sim_nparams *src, struct sim_nparams *dst, bool hidden)
{
        CUresult r;

        *dst = *src;
        switch (src->type) {
        case CU_GRAPH_NODE_TYPE_KERNEL:
                dst->u.kernel.l = sim_launch_dup(src->u.kernel.l);
                if (!dst->u.kernel.l)
                        return CUDA_ERROR_OUT_OF_MEMORY;
                r = sim_nparams_kernel_ptrs(dst);
                if (r != CUDA_SUCCESS) {
                        free(dst->u.kernel.l);
                        return r;
                }
                break;
        case CU_GRAPH_NODE_TYPE_GRAPH:
                r = sim_graph_copy(src->u.child, hidden, &dst->u.child);
                if (r != CUDA_SUCCESS)
                        return r;
                break;
        case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
                dst->u.alloc.mem->refs++;
                break;
        default:
                break;
        }
        return CUDA_SUCCESS;
}

/* The context work of a node runs in: ctx, or the current one. */
static CUresult node_ctx(struct sim_driver *drv, CUcontext ctx, CUcontext *ret)
{
        if (!ctx)
                return sim_ctx_current(drv, NULL, ret);
        if (!sim_ctx_lookup(drv, ctx))
                return CUDA_ERROR_INVALID_CONTEXT;
        *ret = ctx;
        return CUDA_SUCCESS;
}

static CUresult build_kernel(struct sim_driver *drv, const CUDA_KERNEL_NODE_PARAMS_v3 *k, struct sim_nparams *p)
{
        struct sim_launch_cfg cfg = {
                .grid = { k->gridDimX, k->gridDimY, k->gridDimZ },
                .block = { k->blockDimX, k->blockDimY, k->blockDimZ },
                .shared_bytes = k->sharedMemBytes,
        };
        CUfunction f = k->func ? k->func : (CUfunction)k->kern;
        CUresult r;

        if (!f)
                return CUDA_ERROR_INVALID_VALUE;
        r = node_ctx(drv, k->func ? NULL : k->ctx, &p->ctx);
        if (r == CUDA_SUCCESS)
                r = sim_launch_build(drv, f, p->ctx, &cfg, k->kernelParams, k->extra, &p->u.kernel.l);
        if (r != CUDA_SUCCESS)
                return r;
        p->u.kernel.func = k->func;
        p->u.kernel.kern = k->func ? NULL : k->kern;
        r = sim_nparams_kernel_ptrs(p);
        if (r != CUDA_SUCCESS)
                free(p->u.kernel.l);
        return r;
}

static CUresult build_memcpy(struct sim_driver *drv, const CUDA_MEMCPY_NODE_PARAMS *m, struct sim_nparams *p)
{
        CUresult r;

        if (m->flags || m->reserved)
                return CUDA_ERROR_INVALID_VALUE;
        r = node_ctx(drv, m->copyCtx, &p->ctx);
        if (r == CUDA_SUCCESS)
                r = sim_copy3d_box(&m->copyParams, &p->u.memcpy.box);
        if (r != CUDA_SUCCESS)
                return r;
        if (p->u.memcpy.box.width == 0 || p->u.memcpy.box.height == 0 || p->u.memcpy.box.depth == 0)
                return CUDA_ERROR_INVALID_VALUE;
        r = sim_copy_check(drv, &p->u.memcpy.box);
        if (r != CUDA_SUCCESS)
                return r;
        p->u.memcpy.desc = m->copyParams;
        return CUDA_SUCCESS;
}

static CUresult build_memset(struct sim_driver *drv, const CUDA_MEMSET_NODE_PARAMS_v2 *m, struct sim_nparams *p)
{
        size_t row, span;
        CUresult r;

        r = node_ctx(drv, m->ctx, &p->ctx);
        if (r != CUDA_SUCCESS)
                return r;
        if ((m->elementSize != 1 && m->elementSize != 2 && m->elementSize != 4) || m->width == 0 || m->height == 0 ||
            m->dst % m->elementSize != 0 || m->width > SIZE_MAX / m->elementSize)
                return CUDA_ERROR_INVALID_VALUE;
        row = m->width * m->elementSize;
        span = row;
        if (m->height > 1) {
                if (m->pitch < row || m->pitch % m->elementSize != 0 || m->height - 1 > (SIZE_MAX - row) / m->pitch)
                        return CUDA_ERROR_INVALID_VALUE;
                span = (m->height - 1) * m->pitch + row;
        }
        r = sim_check_device_range(drv, m->dst, span, SIM_NEED_WRITE);
        if (r != CUDA_SUCCESS)
                return r;
        p->u.memset = (CUDA_MEMSET_NODE_PARAMS){ .dst = m->dst,
                                                 .pitch = m->height > 1 ? m->pitch : row,
                                                 .value = m->value,
                                                 .elementSize = m->elementSize,
                                                 .width = m->width,
                                                 .height = m->height };
        return CUDA_SUCCESS;
}

/* Whether g is h or h's parent, grandparent... */
static bool graph_within(const struct sim_graph *h, const struct sim_graph *g)
{
        for (unsigned depth = 0; h && depth <= SIM_MAX_GRAPH_DEPTH; depth++) {
                if (h == g)
                        return true;
                h = h->owner ? h->owner->graph : NULL;
        }
        return false;
}

static unsigned graph_depth(const struct sim_graph *g)
{
        unsigned d = 0;

        for (const struct sim_graph *h = g; h->owner && d <= SIM_MAX_GRAPH_DEPTH; h = h->owner->graph)
                d++;
        return d;
}

static unsigned graph_height(const struct sim_graph *g)
{
        unsigned most = 0;

        for (size_t i = 0; i < g->n; i++)
                if (g->nodes[i]->p.type == CU_GRAPH_NODE_TYPE_GRAPH) {
                        unsigned h = 1 + graph_height(g->nodes[i]->p.u.child);

                        most = h > most ? h : most;
                }
        return most;
}

static CUresult build_child(struct sim_graph *g, const CUDA_CHILD_GRAPH_NODE_PARAMS *c, struct sim_nparams *p)
{
        struct sim_graph *child = sim_graph_lookup(c->graph);
        CUresult r;

        if (!child || child->owner || child->captures || (g && graph_within(g, child)))
                return CUDA_ERROR_INVALID_VALUE;
        if (g && graph_depth(g) + 1 + graph_height(child) > SIM_MAX_GRAPH_DEPTH)
                return CUDA_ERROR_INVALID_VALUE;
        switch (c->ownership) {
        case CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE:
                /* A graph with memory nodes can only be moved in. */
                r = sim_graph_clone(child, &p->u.child);
                return r == CUDA_ERROR_NOT_SUPPORTED ? CUDA_ERROR_INVALID_VALUE : r;
        case CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE:
                p->u.child = child;
                return CUDA_SUCCESS;
        default:
                return CUDA_ERROR_INVALID_VALUE;
        }
}

static CUresult build_alloc(struct sim_driver *drv, const CUDA_MEM_ALLOC_NODE_PARAMS_v2 *a, struct sim_nparams *p)
{
        const CUmemPoolProps *pp = &a->poolProps;
        struct sim_ctx *c;
        struct sim_gmem *m;
        CUresult r;

        if (pp->allocType != CU_MEM_ALLOCATION_TYPE_PINNED || pp->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
            pp->handleTypes != CU_MEM_HANDLE_TYPE_NONE || a->bytesize == 0 || (a->accessDescCount && !a->accessDescs) ||
            a->accessDescCount > SIM_MAX_DEVICES)
                return CUDA_ERROR_INVALID_VALUE;
        r = sim_ctx_current(drv, &c, &p->ctx);
        if (r != CUDA_SUCCESS)
                return r;
        if (!sim_device_at(drv, pp->location.id))
                return CUDA_ERROR_INVALID_VALUE;
        if (pp->location.id != c->dev)
                return CUDA_ERROR_NOT_SUPPORTED; /* one device's memory per context here */
        m = calloc(1, sizeof(*m));
        if (!m)
                return CUDA_ERROR_OUT_OF_MEMORY;
        r = sim_range_create(drv, SIM_RANGE_GLOBAL, p->ctx, c->dev, a->bytesize, &m->range);
        if (r != CUDA_SUCCESS) {
                free(m);
                return r;
        }
        m->refs = 1;
        m->ctx = p->ctx;
        m->dev = c->dev;
        m->size = a->bytesize;
        sim_gmem_account(m->dev, (long long)m->size);
        p->u.alloc.mem = m;
        p->u.alloc.p = (CUDA_MEM_ALLOC_NODE_PARAMS){ .poolProps = *pp,
                                                     .bytesize = a->bytesize,
                                                     .dptr = (CUdeviceptr)m->range->start };
        return CUDA_SUCCESS;
}

/* The alloc node of dptr in g or a graph above it, and whether a free
 * node of it is already there. */
static const struct sim_gnode *find_alloc(const struct sim_graph *g, CUdeviceptr dptr, bool *freed)
{
        const struct sim_gnode *found = NULL;

        for (unsigned depth = 0; g && depth <= SIM_MAX_GRAPH_DEPTH; depth++) {
                for (size_t i = 0; i < g->n; i++) {
                        const struct sim_nparams *p = &g->nodes[i]->p;

                        if (p->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && p->u.alloc.p.dptr == dptr)
                                found = g->nodes[i];
                        if (p->type == CU_GRAPH_NODE_TYPE_MEM_FREE && p->u.free_ptr == dptr)
                                *freed = true;
                }
                g = g->owner ? g->owner->graph : NULL;
        }
        return found;
}

static CUresult build_free(struct sim_driver *drv, struct sim_graph *g, CUdeviceptr dptr, struct sim_nparams *p)
{
        bool freed = false;
        CUresult r = sim_ctx_current(drv, NULL, &p->ctx);

        if (r != CUDA_SUCCESS)
                return r;
        /* Only memory of this graph's alloc nodes, freed once. */
        if (!g || !find_alloc(g, dptr, &freed) || freed)
                return CUDA_ERROR_INVALID_VALUE;
        p->u.free_ptr = dptr;
        return CUDA_SUCCESS;
}

static bool all_zero(const void *p, size_t n)
{
        const unsigned char *b = p;

        for (size_t i = 0; i < n; i++)
                if (b[i])
                        return false;
        return true;
}

CUresult sim_nparams_from_generic(struct sim_driver *drv, struct sim_graph *g, const CUgraphNodeParams *np,
                                  struct sim_nparams *ret)
{
        struct sim_nparams p = { .type = np->type };
        CUresult r = CUDA_SUCCESS;

        if (!all_zero(np->reserved0, sizeof(np->reserved0)) || np->reserved2)
                return CUDA_ERROR_INVALID_VALUE;
        switch (np->type) {
        case CU_GRAPH_NODE_TYPE_KERNEL:
                r = build_kernel(drv, &np->kernel, &p);
                break;
        case CU_GRAPH_NODE_TYPE_MEMCPY:
                r = build_memcpy(drv, &np->memcpy, &p);
                break;
        case CU_GRAPH_NODE_TYPE_MEMSET:
                r = build_memset(drv, &np->memset, &p);
                break;
        case CU_GRAPH_NODE_TYPE_HOST:
                if (!np->host.fn)
                        return CUDA_ERROR_INVALID_VALUE;
                p.u.host = (CUDA_HOST_NODE_PARAMS){ .fn = np->host.fn, .userData = np->host.userData };
                break;
        case CU_GRAPH_NODE_TYPE_GRAPH:
                r = build_child(g, &np->graph, &p);
                break;
        case CU_GRAPH_NODE_TYPE_EMPTY:
                break;
        case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
                p.u.event = np->type == CU_GRAPH_NODE_TYPE_WAIT_EVENT ? np->eventWait.event : np->eventRecord.event;
                if (!sim_event_valid(drv, p.u.event))
                        return CUDA_ERROR_INVALID_VALUE;
                break;
        case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
                r = build_alloc(drv, &np->alloc, &p);
                break;
        case CU_GRAPH_NODE_TYPE_MEM_FREE:
                r = build_free(drv, g, np->free.dptr, &p);
                break;
        case CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL:
        case CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT:
        case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
        case CU_GRAPH_NODE_TYPE_CONDITIONAL:
                return CUDA_ERROR_NOT_SUPPORTED; /* the sim has none of these */
        default:
                return CUDA_ERROR_INVALID_VALUE;
        }
        if (r == CUDA_SUCCESS)
                *ret = p;
        return r;
}

CUgraphExecUpdateResult sim_nparams_updatable(const struct sim_nparams *a, const struct sim_nparams *b)
{
        if (a->type != b->type)
                return CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
        if (a->ctx != b->ctx)
                return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
        switch (a->type) {
        case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
        case CU_GRAPH_NODE_TYPE_MEM_FREE:
                /* Memory nodes cannot change. */
                if (a->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC ? a->u.alloc.mem != b->u.alloc.mem
                                                            : a->u.free_ptr != b->u.free_ptr)
                        return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
                return CU_GRAPH_EXEC_UPDATE_SUCCESS;
        case CU_GRAPH_NODE_TYPE_MEMCPY:
        case CU_GRAPH_NODE_TYPE_MEMSET:
                /* The driver keeps the direction of a copy and the rank of
                 * a set fixed in an executable graph. */
                if (a->type == CU_GRAPH_NODE_TYPE_MEMSET ? (a->u.memset.height > 1) != (b->u.memset.height > 1)
                                                         : a->u.memcpy.box.src.side != b->u.memcpy.box.src.side ||
                                                                   a->u.memcpy.box.dst.side != b->u.memcpy.box.dst.side)
                        return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
                return CU_GRAPH_EXEC_UPDATE_SUCCESS;
        default:
                return CU_GRAPH_EXEC_UPDATE_SUCCESS;
        }
}

/* ---- add and set: every typed call goes through these two ---- */

static CUresult deps_lookup(struct sim_graph *g, const CUgraphNode *deps, size_t n, struct sim_gnode ***ret)
{
        struct sim_gnode **v;

        if (n > SIM_MAX_NODE_DEPS || (n && !deps))
                return CUDA_ERROR_INVALID_VALUE;
        v = calloc(n ? n : 1, sizeof(*v));
        if (!v)
                return CUDA_ERROR_OUT_OF_MEMORY;
        for (size_t i = 0; i < n; i++) {
                v[i] = sim_node_lookup(deps[i]);
                if (!v[i] || v[i]->graph != g) {
                        free(v);
                        return CUDA_ERROR_INVALID_VALUE;
                }
        }
        *ret = v;
        return CUDA_SUCCESS;
}

static bool edge_data_default(const CUgraphEdgeData *e, size_t n)
{
        for (size_t i = 0; e && i < n; i++)
                if (!all_zero(&e[i], sizeof(e[i])))
                        return false;
        return true;
}

SIM_API CUresult cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                   const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                   CUgraphNodeParams *nodeParams)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_gnode **deps = NULL, *n;
        struct sim_nparams p;
        struct sim_graph *g;
        bool excl;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!phGraphNode || !nodeParams || !edge_data_default(dependencyData, numDependencies))
                return CUDA_ERROR_INVALID_VALUE;
        excl = nodeParams->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC;
        if (excl)
                sim_wrlock(drv);
        else
                sim_rdlock(drv);
        sim_graph_lock();
        g = sim_graph_lookup(hGraph);
        r = g ? deps_lookup(g, dependencies, numDependencies, &deps) : CUDA_ERROR_INVALID_VALUE;
        if (r == CUDA_SUCCESS)
                r = sim_nparams_from_generic(drv, g, nodeParams, &p);
        if (r == CUDA_SUCCESS) {
                r = sim_graph_add(g, deps, numDependencies, &p, &n);
                if (r != CUDA_SUCCESS && p.type != CU_GRAPH_NODE_TYPE_GRAPH)
                        sim_nparams_release(drv, &p);
                else if (r != CUDA_SUCCESS && nodeParams->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE)
                        sim_nparams_release(drv, &p);
        }
        if (r == CUDA_SUCCESS) {
                *phGraphNode = sim_node_handle(n);
                if (p.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
                        nodeParams->alloc.dptr = p.u.alloc.p.dptr;
        }
        sim_graph_unlock();
        sim_unlock(drv);
        free(deps);
        return r;
}

SIM_API CUresult cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                size_t numDependencies, CUgraphNodeParams *nodeParams)
{
        return cuGraphAddNode_v2(phGraphNode, hGraph, dependencies, NULL, numDependencies, nodeParams);
}

/* Replaces the parameters of node h with np, of the node's own type.
 * Memory nodes cannot be set. */
SIM_API CUresult cuGraphNodeSetParams(CUgraphNode hNode, CUgraphNodeParams *nodeParams)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_nparams p;
        struct sim_gnode *n;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!nodeParams)
                return CUDA_ERROR_INVALID_VALUE;
        sim_wrlock(drv); /* a child graph replaced may own graph memory */
        sim_graph_lock();
        n = sim_node_lookup(hNode);
        if (!n || n->p.type != nodeParams->type)
                r = CUDA_ERROR_INVALID_VALUE;
        else if (n->p.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || n->p.type == CU_GRAPH_NODE_TYPE_MEM_FREE)
                r = CUDA_ERROR_INVALID_VALUE;
        else
                r = sim_nparams_from_generic(drv, n->graph, nodeParams, &p);
        if (r == CUDA_SUCCESS) {
                sim_nparams_release(drv, &n->p);
                n->p = p;
                if (p.type == CU_GRAPH_NODE_TYPE_GRAPH)
                        p.u.child->owner = n;
        }
        sim_graph_unlock();
        sim_unlock(drv);
        return r;
}

CUresult sim_node_get(CUgraphNode h, CUgraphNodeType t, struct sim_nparams *ret)
{
        struct sim_gnode *n;

        if (!sim_driver_get())
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_graph_lock();
        n = sim_node_lookup(h);
        if (n && n->p.type == t)
                *ret = n->p; /* shallow: pointers stay the node's */
        sim_graph_unlock();
        return n && n->p.type == t ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
