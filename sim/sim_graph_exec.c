/* SPDX-License-Identifier: MIT */
/*
 * Executable graphs. Instantiation checks the graph (no cycle, at most one
 * executable graph of a graph with memory nodes), takes a hidden deep copy
 * of it, and fixes the order its work runs in: a topological order, ties
 * broken by creation order, child graphs run in place. A launch turns that
 * order into ordinary ops of the stream (sim_queue.c), each with its own
 * copy of what it needs, so the work runs on the stream's thread after
 * what the stream was given before and ahead of what comes after, and a
 * graph may be changed, updated or destroyed while a launch of it runs.
 *
 * Nodes of the copy remember the node of the user's graph they came from
 * (clone_of): cuGraphExec*SetParams, cuGraphNodeSetEnabled and
 * cuGraphExecUpdate name nodes of the user's graph.
 */
#include <stdlib.h>
#include <string.h>

#include "sim_graph.h"

static struct sim_svec execs = { .max = SIM_MAX_EXECS };
static uint64_t next_exec_id = 1;

static CUgraphExec exec_handle(const struct sim_exec *x)
{
        return (CUgraphExec)(uintptr_t)(SIM_TAG_EXEC | x->id);
}

struct sim_exec *sim_exec_lookup(CUgraphExec h)
{
        return sim_handle_get(&execs, (uint64_t)(uintptr_t)h, SIM_TAG_EXEC);
}

/* A min-heap of node indices: the ready nodes, first created first. */
struct ready_heap {
        size_t *v;
        size_t n;
};

static void heap_push(struct ready_heap *h, size_t x)
{
        size_t i = h->n++;

        while (i > 0 && h->v[(i - 1) / 2] > x) {
                h->v[i] = h->v[(i - 1) / 2];
                i = (i - 1) / 2;
        }
        h->v[i] = x;
}

static size_t heap_pop(struct ready_heap *h)
{
        size_t top = h->v[0], x = h->v[--h->n], i = 0;

        for (;;) {
                size_t c = 2 * i + 1;

                if (c >= h->n)
                        break;
                if (c + 1 < h->n && h->v[c + 1] < h->v[c])
                        c++;
                if (h->v[c] >= x)
                        break;
                h->v[i] = h->v[c];
                i = c;
        }
        if (h->n)
                h->v[i] = x;
        return top;
}

static CUresult order_push(struct sim_exec *x, struct sim_gnode *n)
{
        if (x->n == x->cap) {
                size_t ncap = x->cap ? x->cap * 2 : 16;
                struct sim_gnode **v = realloc(x->order, ncap * sizeof(*v));

                if (!v)
                        return CUDA_ERROR_OUT_OF_MEMORY;
                x->order = v;
                x->cap = ncap;
        }
        x->order[x->n++] = n;
        return CUDA_SUCCESS;
}

/* Appends g's nodes in a topological order to x->order (child graphs
 * expanded in place), ties broken by creation order (Kahn's walk over a
 * heap of ready nodes). A cycle: CUDA_ERROR_INVALID_VALUE, and a node on
 * it in *ret_err. mark: the node's index while walking, then the count of
 * its dependencies not yet emitted. */
static CUresult order_graph(struct sim_exec *x, struct sim_graph *g, unsigned depth, struct sim_gnode **ret_err)
{
        struct ready_heap h = { .v = malloc((g->n ? g->n : 1) * sizeof(size_t)) };
        size_t *left = malloc((g->n ? g->n : 1) * sizeof(size_t)), done = 0;
        CUresult r = CUDA_SUCCESS;

        if (!h.v || !left) {
                free(h.v);
                free(left);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (depth > SIM_MAX_GRAPH_DEPTH)
                r = CUDA_ERROR_INVALID_VALUE;
        for (size_t i = 0; i < g->n; i++) {
                g->nodes[i]->mark = i;
                left[i] = g->nodes[i]->ndeps;
                if (!left[i])
                        heap_push(&h, i);
        }
        while (r == CUDA_SUCCESS && h.n) {
                struct sim_gnode *n = g->nodes[heap_pop(&h)];

                done++;
                for (size_t j = 0; j < n->nouts; j++)
                        if (--left[n->outs[j]->mark] == 0)
                                heap_push(&h, n->outs[j]->mark);
                if (n->p.type != CU_GRAPH_NODE_TYPE_GRAPH) {
                        r = order_push(x, n);
                        continue;
                }
                r = order_graph(x, n->p.u.child, depth + 1, ret_err);
                /* An error inside a child is the child node's, for the
                 * caller. */
                if (r != CUDA_SUCCESS && *ret_err && (*ret_err)->graph != g)
                        *ret_err = n;
        }
        if (r == CUDA_SUCCESS && done < g->n) {
                /* What never became ready is on a cycle or behind one. */
                for (size_t i = 0; i < g->n && !*ret_err; i++)
                        if (left[i])
                                *ret_err = g->nodes[i];
                r = CUDA_ERROR_INVALID_VALUE;
        }
        free(h.v);
        free(left);
        return r;
}

static void exec_free(struct sim_driver *drv, struct sim_exec *x)
{
        struct sim_graph *src;

        if (!x)
                return;
        src = sim_graph_lookup((CUgraph)(uintptr_t)(SIM_TAG_GRAPH | x->graph_id));
        if (src && src->execs)
                src->execs--;
        sim_graph_free(drv, x->g);
        free(x->order);
        free(x);
}

#define INSTANTIATE_FLAGS                                                                       \
        (CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD | \
         CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)

static CUresult instantiate(CUgraphExec *ph, CUgraph hGraph, unsigned long long flags, CUgraphNode *ret_err,
                            CUgraphInstantiateResult *ret_result)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_gnode *err = NULL;
        struct sim_exec *x = NULL;
        struct sim_graph *g;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        *ret_result = CUDA_GRAPH_INSTANTIATE_ERROR;
        if (!ph || (flags & ~(unsigned long long)INSTANTIATE_FLAGS))
                return CUDA_ERROR_INVALID_VALUE;
        if (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH)
                return CUDA_ERROR_NOT_SUPPORTED; /* no device-side launch here */
        sim_wrlock(drv);
        sim_graph_lock();
        g = sim_graph_lookup(hGraph);
        r = g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
        /* One executable graph at a time for a graph with memory nodes. */
        if (r == CUDA_SUCCESS && g->execs && sim_graph_has_mem_nodes(g))
                r = CUDA_ERROR_INVALID_VALUE;
        if (r == CUDA_SUCCESS && !(x = calloc(1, sizeof(*x))))
                r = CUDA_ERROR_OUT_OF_MEMORY;
        if (r == CUDA_SUCCESS) {
                struct sim_exec probe = { 0 };

                /* The order of the user's graph first, for the node a
                 * cycle goes through. */
                r = order_graph(&probe, g, 0, &err);
                free(probe.order);
                if (r == CUDA_ERROR_INVALID_VALUE && err)
                        *ret_result = CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE;
        }
        if (r == CUDA_SUCCESS)
                r = sim_graph_copy(g, true, &x->g);
        if (r == CUDA_SUCCESS)
                r = order_graph(x, x->g, 0, &err);
        if (r == CUDA_SUCCESS) {
                x->id = next_exec_id++;
                x->graph_id = g->id;
                x->flags = flags;
                if (sim_svec_insert(&execs, x->id, x) < 0)
                        r = CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (r == CUDA_SUCCESS) {
                g->execs++;
                *ph = exec_handle(x);
                *ret_result = CUDA_GRAPH_INSTANTIATE_SUCCESS;
        } else if (x) {
                sim_graph_free(drv, x->g);
                free(x->order);
                free(x);
        }
        if (ret_err)
                *ret_err = r == CUDA_SUCCESS ? NULL : sim_node_handle(err && !err->graph->hidden ? err : NULL);
        sim_graph_unlock();
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
        CUgraphInstantiateResult res;

        return instantiate(phGraphExec, hGraph, flags, NULL, &res);
}

SIM_API CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                              CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
        CUresult r;

        if (!instantiateParams)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = instantiate(phGraphExec, hGraph, instantiateParams->flags, &instantiateParams->hErrNode_out,
                        &instantiateParams->result_out);
        if (r == CUDA_SUCCESS && (instantiateParams->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD))
                r = cuGraphUpload(*phGraphExec, instantiateParams->hUploadStream);
        return r;
}

/* The pre-11.4 form: a node and a log for the error. */
SIM_API CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                       char *logBuffer, size_t bufferSize)
{
        CUgraphInstantiateResult res;
        CUresult r = instantiate(phGraphExec, hGraph, 0, phErrorNode, &res);

        if (logBuffer && bufferSize) {
                const char *msg = r == CUDA_SUCCESS                                 ? ""
                                  : res == CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE ? "graph has a cycle"
                                                                                    : "instantiation failed";

                strncpy(logBuffer, msg, bufferSize - 1);
                logBuffer[bufferSize - 1] = '\0';
        }
        return r;
}

SIM_API CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
                                    size_t bufferSize)
{
        return cuGraphInstantiate_v2(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

SIM_API CUresult cuGraphExecGetFlags(CUgraphExec hGraphExec, cuuint64_t *flags)
{
        struct sim_exec *x;

        if (!sim_driver_get())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!flags)
                return CUDA_ERROR_INVALID_VALUE;
        sim_graph_lock();
        x = sim_exec_lookup(hGraphExec);
        if (x)
                *flags = x->flags;
        sim_graph_unlock();
        return x ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_exec *x;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_wrlock(drv);
        sim_graph_lock();
        x = sim_handle_take(&execs, (uint64_t)(uintptr_t)hGraphExec, SIM_TAG_EXEC);
        exec_free(drv, x);
        sim_graph_unlock();
        sim_unlock(drv);
        return x ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- launch ---- */

struct memset_op {
        CUDA_MEMSET_NODE_PARAMS m;
};

static CUresult memset_exec(struct sim_driver *drv, void *arg)
{
        const CUDA_MEMSET_NODE_PARAMS *m = &((struct memset_op *)arg)->m;
        size_t row = m->width * m->elementSize;

        if (sim_check_device_range(drv, m->dst, (m->height - 1) * m->pitch + row, SIM_NEED_WRITE) != CUDA_SUCCESS)
                return CUDA_ERROR_ILLEGAL_ADDRESS;
        for (size_t y = 0; y < m->height; y++) {
                uint8_t *p = (uint8_t *)(uintptr_t)(m->dst + y * m->pitch);

                for (size_t i = 0; i < m->width; i++)
                        switch (m->elementSize) {
                        case 1:
                                p[i] = (uint8_t)m->value;
                                break;
                        case 2:
                                ((uint16_t *)p)[i] = (uint16_t)m->value;
                                break;
                        default:
                                ((uint32_t *)p)[i] = m->value;
                                break;
                        }
        }
        return CUDA_SUCCESS;
}

/* The op that runs node n on a stream of context ctx; *ret NULL for a
 * node with no work. Lock held (shared). */
static CUresult node_op(struct sim_driver *drv, const struct sim_gnode *n, CUcontext ctx, struct sim_op **ret)
{
        const struct sim_nparams *p = &n->p;
        struct sim_op *op = NULL;
        void *arg;

        *ret = NULL;
        switch (p->type) {
        case CU_GRAPH_NODE_TYPE_KERNEL:
                arg = sim_launch_dup(p->u.kernel.l);
                op = arg ? sim_launch_op(arg, ctx) : NULL;
                break;
        case CU_GRAPH_NODE_TYPE_MEMCPY:
                arg = malloc(sizeof(struct sim_copy));
                if (arg)
                        memcpy(arg, &p->u.memcpy.box, sizeof(struct sim_copy));
                op = arg ? sim_op_new(sim_copy_exec, arg, true) : NULL;
                break;
        case CU_GRAPH_NODE_TYPE_MEMSET:
                arg = malloc(sizeof(struct memset_op));
                if (arg)
                        ((struct memset_op *)arg)->m = p->u.memset;
                op = arg ? sim_op_new(memset_exec, arg, true) : NULL;
                break;
        case CU_GRAPH_NODE_TYPE_HOST:
                op = sim_op_new(NULL, NULL, false);
                if (op) {
                        op->host_fn = p->u.host.fn;
                        op->user_data = p->u.host.userData;
                }
                break;
        case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        case CU_GRAPH_NODE_TYPE_WAIT_EVENT: {
                struct sim_event *e = sim_event_get_ref(drv, p->u.event);

                if (!e)
                        return CUDA_ERROR_INVALID_HANDLE; /* destroyed since */
                op = sim_op_new(NULL, NULL, false);
                if (!op) {
                        pthread_mutex_lock(&drv->q_mu);
                        sim_event_put_locked(e);
                        pthread_mutex_unlock(&drv->q_mu);
                        break;
                }
                if (p->type == CU_GRAPH_NODE_TYPE_EVENT_RECORD)
                        op->record = e;
                else
                        op->wait = e;
                break;
        }
        default:
                /* Empty nodes order only; graph memory is mapped from the
                 * node's creation on, so alloc and free nodes have no work. */
                return CUDA_SUCCESS;
        }
        if (!op)
                return CUDA_ERROR_OUT_OF_MEMORY;
        *ret = op;
        return CUDA_SUCCESS;
}

/* The graph memory a launch uses, held until its work has run, so that
 * destroying the executable graph and its graph meanwhile frees nothing
 * under it. Runs on the stream's thread, without the rwlock. */
struct gmem_hold {
        size_t n;
        struct sim_gmem *mem[];
};

static CUresult gmem_release_exec(struct sim_driver *drv, void *arg)
{
        struct gmem_hold *h = arg;

        sim_wrlock(drv);
        sim_graph_lock();
        for (size_t i = 0; i < h->n; i++)
                sim_gmem_put(drv, h->mem[i]);
        sim_graph_unlock();
        sim_unlock(drv);
        return CUDA_SUCCESS;
}

/* The op holding x's graph memory, appended to ops (room for one more),
 * or nothing when x has none. Graph mutex held. */
static CUresult hold_gmem(struct sim_exec *x, struct sim_op **ops, size_t *nops)
{
        struct gmem_hold *h;
        size_t n = 0;

        for (size_t i = 0; i < x->n; i++)
                n += x->order[i]->p.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC;
        if (!n)
                return CUDA_SUCCESS;
        h = malloc(sizeof(*h) + n * sizeof(h->mem[0]));
        if (!h)
                return CUDA_ERROR_OUT_OF_MEMORY;
        h->n = 0;
        for (size_t i = 0; i < x->n; i++)
                if (x->order[i]->p.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
                        h->mem[h->n++] = x->order[i]->p.u.alloc.mem;
        ops[*nops] = sim_op_new(gmem_release_exec, h, false);
        if (!ops[*nops])
                return CUDA_ERROR_OUT_OF_MEMORY;
        for (size_t i = 0; i < h->n; i++)
                h->mem[i]->refs++;
        (*nops)++;
        return CUDA_SUCCESS;
}

/* Frees ops[0..n) that were never submitted (not ops itself). */
static void ops_drop(struct sim_driver *drv, struct sim_op **ops, size_t n)
{
        pthread_mutex_lock(&drv->q_mu);
        for (size_t i = 0; i < n; i++) {
                if (ops[i]->record)
                        sim_event_put_locked(ops[i]->record);
                if (ops[i]->wait)
                        sim_event_put_locked(ops[i]->wait);
        }
        pthread_mutex_unlock(&drv->q_mu);
        for (size_t i = 0; i < n; i++)
                sim_op_free(ops[i]);
}

static void ops_free(struct sim_driver *drv, struct sim_op **ops, size_t n)
{
        ops_drop(drv, ops, n);
        free(ops);
}

/* While the stream captures, a launch adds a copy of the graph as a child
 * graph node. Lock held (shared), not the graph mutex. */
static CUresult capture_launch(struct sim_driver *drv, struct sim_queue *q, CUgraphExec h, CUcontext ctx)
{
        struct sim_nparams p = { .type = CU_GRAPH_NODE_TYPE_GRAPH, .ctx = ctx };
        struct sim_exec *x;
        CUresult r;

        if (!sim_capture_any())
                return SIM_CAPTURE_RUN;
        sim_graph_lock();
        x = sim_exec_lookup(h);
        r = x ? sim_graph_copy(x->g, false, &p.u.child) : CUDA_ERROR_INVALID_VALUE;
        sim_graph_unlock();
        if (r != CUDA_SUCCESS)
                return r;
        r = sim_capture_work(drv, q, &p);
        if (r == SIM_CAPTURE_RUN) {
                sim_graph_lock();
                sim_graph_free(NULL, p.u.child);
                sim_graph_unlock();
        }
        return r;
}

SIM_API CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_queue *q = NULL;
        struct sim_op **ops = NULL;
        struct sim_exec *x = NULL;
        size_t nops = 0;
        CUcontext ctx;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_rdlock(drv);
        r = sim_stream_enter(drv, hStream, &ctx, &q);
        if (r == CUDA_SUCCESS) {
                r = capture_launch(drv, q, hGraphExec, ctx);
                r = r == SIM_CAPTURE_RUN ? CUDA_SUCCESS : r == CUDA_SUCCESS ? SIM_CAPTURE_RUN : r;
        }
        sim_graph_lock();
        if (r == CUDA_SUCCESS && !(x = sim_exec_lookup(hGraphExec)))
                r = CUDA_ERROR_INVALID_VALUE;
        if (r == CUDA_SUCCESS && !(ops = calloc(x->n + 1, sizeof(*ops))))
                r = CUDA_ERROR_OUT_OF_MEMORY;
        for (size_t i = 0; r == CUDA_SUCCESS && i < x->n; i++) {
                struct sim_op *op;

                if (x->order[i]->disabled)
                        continue;
                r = node_op(drv, x->order[i], ctx, &op);
                if (r == CUDA_SUCCESS && op)
                        ops[nops++] = op;
        }
        if (r == CUDA_SUCCESS)
                r = hold_gmem(x, ops, &nops);
        sim_graph_unlock();
        sim_unlock(drv);
        if (r != CUDA_SUCCESS) {
                if (ops)
                        ops_free(drv, ops, nops);
                sim_queue_put(drv, q);
                return r == SIM_CAPTURE_RUN ? CUDA_SUCCESS : r; /* captured: done */
        }
        sim_printf_flush(drv, ctx);
        for (size_t i = 0; i < nops && r == CUDA_SUCCESS; i++) {
                pthread_mutex_lock(&drv->q_mu);
                q->refs++; /* each submission takes one */
                pthread_mutex_unlock(&drv->q_mu);
                r = sim_queue_submit(drv, q, ops[i]);
                ops[i] = NULL;
                if (r != CUDA_SUCCESS) {
                        /* The stream died under us: drop what is left. */
                        ops_drop(drv, ops + i + 1, nops - i - 1);
                }
        }
        free(ops);
        sim_queue_put(drv, q);
        return r;
}

/* Uploading prepares nothing here: the work is copied at each launch. */
SIM_API CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_exec *x;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_rdlock(drv);
        sim_graph_lock();
        x = sim_exec_lookup(hGraphExec);
        r = x ? sim_stream_enter(drv, hStream, NULL, NULL) : CUDA_ERROR_INVALID_VALUE;
        sim_graph_unlock();
        sim_unlock(drv);
        return r;
}
