/* SPDX-License-Identifier: MIT */
/*
 * Graphs, nodes and edges: creation, cloning, destruction, the queries
 * over their structure, and the debug dot file. Node parameters are in
 * sim_graph_node.c; instantiation and launch in sim_graph_exec.c.
 *
 * A node's edges are kept twice, as its dependencies and as its
 * dependents, both in the order they were added, so that every query
 * answers in a stable order. Queries follow the driver's array contract:
 * a NULL array asks for the count; a larger count than there are entries
 * NULLs the rest and writes back the true count.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_graph.h"

static pthread_mutex_t graph_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sim_svec graphs = { .max = SIM_MAX_GRAPHS };
static struct sim_svec nodes = { .max = SIM_MAX_GRAPH_NODES };
static uint64_t next_id = 1;

void sim_graph_lock(void)
{
        pthread_mutex_lock(&graph_mu);
}

void sim_graph_unlock(void)
{
        pthread_mutex_unlock(&graph_mu);
}

static uint64_t new_id(void)
{
        uint64_t id = next_id++;

        if (next_id > SIM_ID_MASK)
                next_id = 1;
        return id;
}

CUgraph sim_graph_handle(const struct sim_graph *g)
{
        return g ? (CUgraph)(uintptr_t)(SIM_TAG_GRAPH | g->id) : NULL;
}

CUgraphNode sim_node_handle(const struct sim_gnode *n)
{
        return n ? (CUgraphNode)(uintptr_t)(SIM_TAG_NODE | n->id) : NULL;
}

struct sim_graph *sim_graph_lookup(CUgraph h)
{
        struct sim_graph *g = sim_handle_get(&graphs, (uint64_t)(uintptr_t)h, SIM_TAG_GRAPH);

        return g && !g->hidden ? g : NULL;
}

struct sim_gnode *sim_node_lookup(CUgraphNode h)
{
        struct sim_gnode *n = sim_handle_get(&nodes, (uint64_t)(uintptr_t)h, SIM_TAG_NODE);

        return n && !n->graph->hidden ? n : NULL;
}

struct sim_graph *sim_graph_new(bool hidden)
{
        struct sim_graph *g = calloc(1, sizeof(*g));

        if (!g)
                return NULL;
        g->hidden = hidden;
        g->id = new_id();
        if (sim_svec_insert(&graphs, g->id, g) < 0) {
                free(g);
                return NULL;
        }
        return g;
}

/* Appends x to the array *v of *n entries and *cap room. */
static int push(struct sim_gnode ***v, size_t *n, size_t *cap, struct sim_gnode *x)
{
        if (*n == *cap) {
                size_t ncap = *cap ? *cap * 2 : 4;
                struct sim_gnode **nv = realloc(*v, ncap * sizeof(*nv));

                if (!nv)
                        return -ENOMEM;
                *v = nv;
                *cap = ncap;
        }
        (*v)[(*n)++] = x;
        return 0;
}

static void drop(struct sim_gnode **v, size_t *n, struct sim_gnode *x)
{
        for (size_t i = 0; i < *n; i++)
                if (v[i] == x) {
                        memmove(&v[i], &v[i + 1], (*n - i - 1) * sizeof(*v));
                        (*n)--;
                        return;
                }
}

static bool has_edge(const struct sim_gnode *from, const struct sim_gnode *to)
{
        for (size_t i = 0; i < to->ndeps; i++)
                if (to->deps[i] == from)
                        return true;
        return false;
}

static int edge_add(struct sim_gnode *from, struct sim_gnode *to)
{
        if (to->ndeps >= SIM_MAX_NODE_DEPS)
                return -ENOSPC;
        if (push(&to->deps, &to->ndeps, &to->deps_cap, from) < 0)
                return -ENOMEM;
        if (push(&from->outs, &from->nouts, &from->outs_cap, to) < 0) {
                to->ndeps--;
                return -ENOMEM;
        }
        return 0;
}

static void edge_remove(struct sim_gnode *from, struct sim_gnode *to)
{
        drop(to->deps, &to->ndeps, from);
        drop(from->outs, &from->nouts, to);
}

/* Frees a node that has no edges left; it is already out of g->nodes. */
static void node_free(struct sim_driver *drv, struct sim_gnode *n)
{
        sim_svec_remove(&nodes, n->id);
        sim_nparams_release(drv, &n->p);
        free(n->deps);
        free(n->outs);
        free(n);
}

void sim_graph_free(struct sim_driver *drv, struct sim_graph *g)
{
        if (!g)
                return;
        sim_svec_remove(&graphs, g->id);
        for (size_t i = 0; i < g->n; i++)
                node_free(drv, g->nodes[i]);
        free(g->nodes);
        free(g);
}

CUresult sim_graph_add(struct sim_graph *g, struct sim_gnode *const *deps, size_t ndeps, struct sim_nparams *p,
                       struct sim_gnode **ret)
{
        struct sim_gnode *n;

        if (ndeps > SIM_MAX_NODE_DEPS)
                return CUDA_ERROR_INVALID_VALUE;
        for (size_t i = 0; i < ndeps; i++) {
                if (!deps[i] || deps[i]->graph != g)
                        return CUDA_ERROR_INVALID_VALUE;
                for (size_t j = 0; j < i; j++)
                        if (deps[j] == deps[i])
                                return CUDA_ERROR_INVALID_VALUE;
        }
        n = calloc(1, sizeof(*n));
        if (!n)
                return CUDA_ERROR_OUT_OF_MEMORY;
        n->graph = g;
        n->id = new_id();
        if (sim_svec_insert(&nodes, n->id, n) < 0) {
                free(n);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (push(&g->nodes, &g->n, &g->cap, n) < 0)
                goto out_unregister;
        for (size_t i = 0; i < ndeps; i++)
                if (edge_add(deps[i], n) < 0) {
                        while (n->ndeps > 0)
                                edge_remove(n->deps[n->ndeps - 1], n);
                        g->n--;
                        goto out_unregister;
                }
        n->p = *p;
        if (p->type == CU_GRAPH_NODE_TYPE_GRAPH)
                p->u.child->owner = n;
        *ret = n;
        return CUDA_SUCCESS;

out_unregister:
        sim_svec_remove(&nodes, n->id);
        free(n->deps);
        free(n->outs);
        free(n);
        return CUDA_ERROR_OUT_OF_MEMORY;
}

bool sim_graph_has_mem_nodes(const struct sim_graph *g)
{
        for (size_t i = 0; i < g->n; i++) {
                const struct sim_nparams *p = &g->nodes[i]->p;

                if (p->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || p->type == CU_GRAPH_NODE_TYPE_MEM_FREE)
                        return true;
                if (p->type == CU_GRAPH_NODE_TYPE_GRAPH && sim_graph_has_mem_nodes(p->u.child))
                        return true;
        }
        return false;
}

CUresult sim_graph_clone(struct sim_graph *g, struct sim_graph **ret)
{
        if (sim_graph_has_mem_nodes(g))
                return CUDA_ERROR_NOT_SUPPORTED;
        return sim_graph_copy(g, false, ret);
}

CUresult sim_graph_copy(struct sim_graph *g, bool hidden, struct sim_graph **ret)
{
        struct sim_graph *c;
        CUresult r = CUDA_SUCCESS;

        c = sim_graph_new(hidden);
        if (!c)
                return CUDA_ERROR_OUT_OF_MEMORY;
        for (size_t i = 0; i < g->n && r == CUDA_SUCCESS; i++) {
                struct sim_gnode *o = g->nodes[i], *n;
                struct sim_nparams p;

                o->mark = i;
                r = sim_nparams_copy(&o->p, &p, hidden);
                if (r != CUDA_SUCCESS)
                        break;
                r = sim_graph_add(c, NULL, 0, &p, &n);
                if (r != CUDA_SUCCESS)
                        sim_nparams_release(NULL, &p);
                else
                        n->clone_of = o->id;
        }
        /* Edges, by index, now that every node has its copy. */
        for (size_t i = 0; i < g->n && r == CUDA_SUCCESS; i++) {
                struct sim_gnode *o = g->nodes[i];

                for (size_t j = 0; j < o->ndeps && r == CUDA_SUCCESS; j++)
                        if (edge_add(c->nodes[o->deps[j]->mark], c->nodes[i]) < 0)
                                r = CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (r != CUDA_SUCCESS) {
                sim_graph_free(NULL, c);
                return r;
        }
        *ret = c;
        return CUDA_SUCCESS;
}

/* ---- the API ---- */

SIM_API CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_graph *g;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!phGraph || flags != 0)
                return CUDA_ERROR_INVALID_VALUE;
        sim_graph_lock();
        g = sim_graph_new(false);
        sim_graph_unlock();
        if (!g)
                return CUDA_ERROR_OUT_OF_MEMORY;
        *phGraph = sim_graph_handle(g);
        return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphDestroy(CUgraph hGraph)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_graph *g;
        CUresult r = CUDA_SUCCESS;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_wrlock(drv); /* it may own graph memory */
        sim_graph_lock();
        g = sim_graph_lookup(hGraph);
        /* A child graph belongs to its node; a graph being captured into
         * belongs to the capture until it ends. */
        if (!g || g->owner)
                r = CUDA_ERROR_INVALID_VALUE;
        else if (g->captures)
                r = CUDA_ERROR_ILLEGAL_STATE;
        else
                sim_graph_free(drv, g);
        sim_graph_unlock();
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuGraphClone(CUgraph *phGraphClone, CUgraph originalGraph)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_graph *g, *c = NULL;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!phGraphClone)
                return CUDA_ERROR_INVALID_VALUE;
        sim_graph_lock();
        g = sim_graph_lookup(originalGraph);
        r = g ? sim_graph_clone(g, &c) : CUDA_ERROR_INVALID_VALUE;
        sim_graph_unlock();
        if (r == CUDA_SUCCESS)
                *phGraphClone = sim_graph_handle(c);
        return r;
}

SIM_API CUresult cuGraphNodeFindInClone(CUgraphNode *phNode, CUgraphNode hOriginalNode, CUgraph hClonedGraph)
{
        struct sim_graph *g;
        struct sim_gnode *o;
        CUresult r = CUDA_ERROR_INVALID_VALUE;

        if (!sim_driver_get())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!phNode)
                return CUDA_ERROR_INVALID_VALUE;
        sim_graph_lock();
        g = sim_graph_lookup(hClonedGraph);
        o = sim_node_lookup(hOriginalNode);
        for (size_t i = 0; g && o && i < g->n; i++)
                if (g->nodes[i]->clone_of == o->id) {
                        *phNode = sim_node_handle(g->nodes[i]);
                        r = CUDA_SUCCESS;
                        break;
                }
        sim_graph_unlock();
        return r;
}

SIM_API CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
        struct sim_gnode *n;

        if (!sim_driver_get())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!type)
                return CUDA_ERROR_INVALID_VALUE;
        sim_graph_lock();
        n = sim_node_lookup(hNode);
        if (n)
                *type = n->p.type;
        sim_graph_unlock();
        return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The driver's array contract for the count-or-fill queries: fills up to
 * *num of the count entries with fill(i), NULLs the rest of a larger
 * array and writes the true count back then. */
static void fill_nodes(CUgraphNode *out, CUgraphEdgeData *edges, size_t *num, size_t count,
                       struct sim_gnode *(*get)(void *, size_t), void *ctx)
{
        size_t n;

        if (!out) {
                *num = count;
                return;
        }
        n = *num < count ? *num : count;
        for (size_t i = 0; i < n; i++) {
                out[i] = sim_node_handle(get(ctx, i));
                if (edges)
                        memset(&edges[i], 0, sizeof(edges[i]));
        }
        for (size_t i = n; i < *num; i++) {
                out[i] = NULL;
                if (edges)
                        memset(&edges[i], 0, sizeof(edges[i]));
        }
        if (*num > count)
                *num = count;
}

static struct sim_gnode *get_graph_node(void *ctx, size_t i)
{
        return ((struct sim_graph *)ctx)->nodes[i];
}

SIM_API CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *out, size_t *numNodes)
{
        struct sim_graph *g;

        if (!sim_driver_get())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!numNodes)
                return CUDA_ERROR_INVALID_VALUE;
        sim_graph_lock();
        g = sim_graph_lookup(hGraph);
        if (g)
                fill_nodes(out, NULL, numNodes, g->n, get_graph_node, g);
        sim_graph_unlock();
        return g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

struct root_walk {
        struct sim_graph *g;
        size_t next; /* index in g->nodes past the last root returned */
};

static struct sim_gnode *get_root(void *ctx, size_t i)
{
        struct root_walk *w = ctx;

        (void)i;
        while (w->g->nodes[w->next]->ndeps)
                w->next++;
        return w->g->nodes[w->next++];
}

SIM_API CUresult cuGraphGetRootNodes(CUgraph hGraph, CUgraphNode *rootNodes, size_t *numRootNodes)
{
        struct root_walk w = { 0 };
        size_t count = 0;

        if (!sim_driver_get())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!numRootNodes)
                return CUDA_ERROR_INVALID_VALUE;
        sim_graph_lock();
        w.g = sim_graph_lookup(hGraph);
        for (size_t i = 0; w.g && i < w.g->n; i++)
                count += w.g->nodes[i]->ndeps == 0;
        if (w.g)
                fill_nodes(rootNodes, NULL, numRootNodes, count, get_root, &w);
        sim_graph_unlock();
        return w.g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuGraphGetEdges_v2(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to, CUgraphEdgeData *edgeData,
                                    size_t *numEdges)
{
        struct sim_graph *g;
        size_t count = 0, k = 0;

        if (!sim_driver_get())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!numEdges || (!from) != (!to) || (edgeData && !from))
                return CUDA_ERROR_INVALID_VALUE;
        sim_graph_lock();
        g = sim_graph_lookup(hGraph);
        if (!g) {
                sim_graph_unlock();
                return CUDA_ERROR_INVALID_VALUE;
        }
        for (size_t i = 0; i < g->n; i++)
                count += g->nodes[i]->ndeps;
        if (!from) {
                *numEdges = count;
                sim_graph_unlock();
                return CUDA_SUCCESS;
        }
        for (size_t i = 0; i < g->n; i++)
                for (size_t j = 0; j < g->nodes[i]->ndeps && k < *numEdges; j++, k++) {
                        from[k] = sim_node_handle(g->nodes[i]->deps[j]);
                        to[k] = sim_node_handle(g->nodes[i]);
                }
        for (size_t i = 0; edgeData && i < *numEdges; i++)
                memset(&edgeData[i], 0, sizeof(edgeData[i]));
        for (; k < *numEdges; k++)
                from[k] = to[k] = NULL;
        if (*numEdges > count)
                *numEdges = count;
        sim_graph_unlock();
        return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphGetEdges(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to, size_t *numEdges)
{
        return cuGraphGetEdges_v2(hGraph, from, to, NULL, numEdges);
}

static struct sim_gnode *get_dep(void *ctx, size_t i)
{
        return ((struct sim_gnode *)ctx)->deps[i];
}

static struct sim_gnode *get_out(void *ctx, size_t i)
{
        return ((struct sim_gnode *)ctx)->outs[i];
}

static CUresult node_edges(CUgraphNode h, CUgraphNode *out, CUgraphEdgeData *edgeData, size_t *num, bool deps)
{
        struct sim_gnode *n;

        if (!sim_driver_get())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!num || (edgeData && !out))
                return CUDA_ERROR_INVALID_VALUE;
        sim_graph_lock();
        n = sim_node_lookup(h);
        if (n)
                fill_nodes(out, edgeData, num, deps ? n->ndeps : n->nouts, deps ? get_dep : get_out, n);
        sim_graph_unlock();
        return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuGraphNodeGetDependencies_v2(CUgraphNode hNode, CUgraphNode *dependencies, CUgraphEdgeData *edgeData,
                                               size_t *numDependencies)
{
        return node_edges(hNode, dependencies, edgeData, numDependencies, true);
}

SIM_API CUresult cuGraphNodeGetDependencies(CUgraphNode hNode, CUgraphNode *dependencies, size_t *numDependencies)
{
        return node_edges(hNode, dependencies, NULL, numDependencies, true);
}

SIM_API CUresult cuGraphNodeGetDependentNodes_v2(CUgraphNode hNode, CUgraphNode *dependentNodes,
                                                 CUgraphEdgeData *edgeData, size_t *numDependentNodes)
{
        return node_edges(hNode, dependentNodes, edgeData, numDependentNodes, false);
}

SIM_API CUresult cuGraphNodeGetDependentNodes(CUgraphNode hNode, CUgraphNode *dependentNodes, size_t *numDependentNodes)
{
        return node_edges(hNode, dependentNodes, NULL, numDependentNodes, false);
}

/* Edge data the sim supports: all zero (full completion, default type). */
static bool edge_data_default(const CUgraphEdgeData *e, size_t n)
{
        static const CUgraphEdgeData zero;

        for (size_t i = 0; e && i < n; i++)
                if (memcmp(&e[i], &zero, sizeof(zero)) != 0)
                        return false;
        return true;
}

/* Checks every pair first, so that a failure changes nothing. */
static CUresult edges_change(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                             const CUgraphEdgeData *edgeData, size_t n, bool add)
{
        struct sim_graph *g;
        CUresult r = CUDA_SUCCESS;
        size_t i;

        if (!sim_driver_get())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (n && (!from || !to))
                return CUDA_ERROR_INVALID_VALUE;
        if (!edge_data_default(edgeData, n))
                return CUDA_ERROR_INVALID_VALUE;
        sim_graph_lock();
        g = sim_graph_lookup(hGraph);
        if (!g || (!add && sim_graph_has_mem_nodes(g)))
                r = g ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
        for (i = 0; r == CUDA_SUCCESS && i < n; i++) {
                struct sim_gnode *a = sim_node_lookup(from[i]), *b = sim_node_lookup(to[i]);

                if (!a || !b || a->graph != g || b->graph != g || a == b || has_edge(a, b) != !add)
                        r = CUDA_ERROR_INVALID_VALUE;
                for (size_t j = 0; r == CUDA_SUCCESS && j < i; j++)
                        if (from[j] == from[i] && to[j] == to[i])
                                r = CUDA_ERROR_INVALID_VALUE;
        }
        for (i = 0; r == CUDA_SUCCESS && i < n; i++) {
                struct sim_gnode *a = sim_node_lookup(from[i]), *b = sim_node_lookup(to[i]);

                if (!add)
                        edge_remove(a, b);
                else if (edge_add(a, b) < 0)
                        r = CUDA_ERROR_OUT_OF_MEMORY;
        }
        /* Out of memory half way: take back what was added. */
        while (r != CUDA_SUCCESS && add && i-- > 1)
                edge_remove(sim_node_lookup(from[i - 1]), sim_node_lookup(to[i - 1]));
        sim_graph_unlock();
        return r;
}

SIM_API CUresult cuGraphAddDependencies_v2(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                           const CUgraphEdgeData *edgeData, size_t numDependencies)
{
        return edges_change(hGraph, from, to, edgeData, numDependencies, true);
}

SIM_API CUresult cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                        size_t numDependencies)
{
        return edges_change(hGraph, from, to, NULL, numDependencies, true);
}

SIM_API CUresult cuGraphRemoveDependencies_v2(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                              const CUgraphEdgeData *edgeData, size_t numDependencies)
{
        return edges_change(hGraph, from, to, edgeData, numDependencies, false);
}

SIM_API CUresult cuGraphRemoveDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                           size_t numDependencies)
{
        return edges_change(hGraph, from, to, NULL, numDependencies, false);
}

SIM_API CUresult cuGraphDestroyNode(CUgraphNode hNode)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_gnode *n;
        CUresult r = CUDA_SUCCESS;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_wrlock(drv);
        sim_graph_lock();
        n = sim_node_lookup(hNode);
        if (!n)
                r = CUDA_ERROR_INVALID_VALUE;
        else if (sim_graph_has_mem_nodes(n->graph))
                r = CUDA_ERROR_NOT_SUPPORTED; /* such graphs lose no node */
        else if (n->graph->captures)
                r = CUDA_ERROR_ILLEGAL_STATE; /* the driver permits no node removal meanwhile */
        if (r == CUDA_SUCCESS) {
                while (n->ndeps)
                        edge_remove(n->deps[n->ndeps - 1], n);
                while (n->nouts)
                        edge_remove(n, n->outs[n->nouts - 1]);
                drop(n->graph->nodes, &n->graph->n, n);
                node_free(drv, n);
        }
        sim_graph_unlock();
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                     size_t numDependencies)
{
        CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_EMPTY };

        return cuGraphAddNode_v2(phGraphNode, hGraph, dependencies, NULL, numDependencies, &p);
}

static const char *type_name(CUgraphNodeType t)
{
        static const char *const names[] = {
                [CU_GRAPH_NODE_TYPE_KERNEL] = "kernel",         [CU_GRAPH_NODE_TYPE_MEMCPY] = "memcpy",
                [CU_GRAPH_NODE_TYPE_MEMSET] = "memset",         [CU_GRAPH_NODE_TYPE_HOST] = "host",
                [CU_GRAPH_NODE_TYPE_GRAPH] = "graph",           [CU_GRAPH_NODE_TYPE_EMPTY] = "empty",
                [CU_GRAPH_NODE_TYPE_WAIT_EVENT] = "wait_event", [CU_GRAPH_NODE_TYPE_EVENT_RECORD] = "event_record",
                [CU_GRAPH_NODE_TYPE_MEM_ALLOC] = "mem_alloc",   [CU_GRAPH_NODE_TYPE_MEM_FREE] = "mem_free",
        };

        return (unsigned)t < sizeof(names) / sizeof(names[0]) && names[t] ? names[t] : "other";
}

static void dot_graph(FILE *f, const struct sim_graph *g, unsigned depth)
{
        for (size_t i = 0; i < g->n; i++) {
                const struct sim_gnode *n = g->nodes[i];

                fprintf(f, "%*sn%llu [label=\"%s %llu\"];\n", (int)depth * 2 + 2, "", (unsigned long long)n->id,
                        type_name(n->p.type), (unsigned long long)n->id);
                if (n->p.type == CU_GRAPH_NODE_TYPE_GRAPH && depth < SIM_MAX_GRAPH_DEPTH) {
                        fprintf(f, "%*ssubgraph cluster_%llu {\n", (int)depth * 2 + 2, "", (unsigned long long)n->id);
                        dot_graph(f, n->p.u.child, depth + 1);
                        fprintf(f, "%*s}\n", (int)depth * 2 + 2, "");
                }
                for (size_t j = 0; j < n->ndeps; j++)
                        fprintf(f, "%*sn%llu -> n%llu;\n", (int)depth * 2 + 2, "", (unsigned long long)n->deps[j]->id,
                                (unsigned long long)n->id);
        }
}

SIM_API CUresult cuGraphDebugDotPrint(CUgraph hGraph, const char *path, unsigned int flags)
{
        struct sim_graph *g;
        FILE *f;
        int e;

        (void)flags; /* every flag only adds detail */
        if (!sim_driver_get())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!path)
                return CUDA_ERROR_INVALID_VALUE;
        sim_graph_lock();
        g = sim_graph_lookup(hGraph);
        if (!g) {
                sim_graph_unlock();
                return CUDA_ERROR_INVALID_VALUE;
        }
        f = fopen(path, "we");
        if (!f) {
                sim_graph_unlock();
                return CUDA_ERROR_OPERATING_SYSTEM;
        }
        fprintf(f, "digraph graph_%llu {\n", (unsigned long long)g->id);
        dot_graph(f, g, 0);
        fprintf(f, "}\n");
        sim_graph_unlock();
        e = fclose(f);
        return e == 0 ? CUDA_SUCCESS : CUDA_ERROR_OPERATING_SYSTEM;
}
