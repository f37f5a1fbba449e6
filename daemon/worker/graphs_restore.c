/* SPDX-License-Identifier: MIT */
/*
 * Graphs and execs made again from a checkpoint's "graphs" object (see
 * worker/graphs_ckpt.c for what is saved, and ckpt_graph.h for the
 * format). Runs after the handles, module globals and events are back.
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_graph.h"
#include "log.h"
#include "provider_load.h"
#include "worker/graphs.h"
#include "worker/session.h"

struct builder {
        struct lupw_session *s;
        const struct lup_ckpt_graphs *g;
        CUgraph *built; /* per record: the rebuilt graph (children only, until used) */
        uint8_t *state; /* per record: 0 not built, 1 building, 2 built */
        char *why;
        size_t whylen;
        CUgraphNode *exec_nodes; /* an exec record's nodes, for its node map */
};

static int fail(struct builder *b, int rc, const char *what, uint32_t idx)
{
        snprintf(b->why, b->whylen, "graph record %u: %s", idx, what);
        return rc;
}

static CUresult add_kernel(struct builder *b, CUgraphNode *ret, CUgraph g, const struct lup_ckpt_gnode *n)
{
        struct lupw_session *s = b->s;
        static _Alignas(16) uint8_t pbuf[LUP_MAX_PARAM_BYTES + 16];
        static void *kparams[LUP_MAX_PARAMS];
        struct lupw_handle_ent *e;
        CUfunction fn;
        CUresult r = lupw_function(s, n->u.kernel.func, &e, &fn);
        if (r == CUDA_SUCCESS)
                r = lupw_param_layout(s, e, fn);
        if (r != CUDA_SUCCESS)
                return r;
        if (e->param_bytes != n->u.kernel.n_bytes)
                return CUDA_ERROR_INVALID_VALUE;
        memcpy(pbuf, n->u.kernel.bytes, n->u.kernel.n_bytes);
        for (uint32_t i = 0; i < e->n_params; i++) {
                kparams[i] = pbuf + e->params[2 * i];
                if (e->params[2 * i + 1] == 8 && s->obj.xlate.n) {
                        uint64_t v;
                        memcpy(&v, kparams[i], 8);
                        v = lupw_xlate(s, v);
                        memcpy(kparams[i], &v, 8);
                }
        }
        CUDA_KERNEL_NODE_PARAMS p;
        memset(&p, 0, sizeof(p));
        p.func = fn;
        p.gridDimX = n->u.kernel.grid[0], p.gridDimY = n->u.kernel.grid[1], p.gridDimZ = n->u.kernel.grid[2];
        p.blockDimX = n->u.kernel.block[0], p.blockDimY = n->u.kernel.block[1], p.blockDimZ = n->u.kernel.block[2];
        p.sharedMemBytes = n->u.kernel.smem;
        p.kernelParams = e->n_params ? kparams : NULL;
        return s->be.fn.cuGraphAddKernelNode_v2(ret, g, NULL, 0, &p);
}

static int build(struct builder *b, uint32_t idx, CUgraph *ret);

/* A child graph the client holds by id (cuGraphChildGraphNodeGetGraph):
 * moved into its node, so that the graph under that id and the nodes in
 * it are the node's own again. */
static CUresult add_owned_child(struct builder *b, CUgraphNode *ret, CUgraph g, const struct lup_ckpt_gnode *n,
                                CUgraph child, int *rc)
{
        struct lupw_session *s = b->s;
        uint64_t id = b->g->graphs[n->u.child].id;
        CUgraphNodeParams p;
        if (!n->id || lupw_handle_fresh(s, id) < 0) {
                *rc = fail(b, -EBADMSG, "a child graph's id is malformed, repeated, or of a node without one",
                           n->u.child);
                return CUDA_ERROR_INVALID_VALUE;
        }
        memset(&p, 0, sizeof(p));
        p.type = CU_GRAPH_NODE_TYPE_GRAPH;
        p.graph.graph = child;
        p.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
        CUresult r = s->be.fn.cuGraphAddNode_v2(ret, g, NULL, NULL, 0, &p);
        if (r != CUDA_SUCCESS)
                return r;
        b->built[n->u.child] = NULL; /* the node's from here */
        lupw_prov_free(&s->obj.prov);
        s->obj.prov.parent = n->id;
        s->obj.prov.flags = LUPW_GRAPH_OWNED;
        return lupw_handle_put(s, LUPW_H_GRAPH, id, child);
}

static CUresult add_node(struct builder *b, CUgraphNode *ret, CUgraph g, const struct lup_ckpt_gnode *n, int *rc)
{
        struct lupw_session *s = b->s;
        const struct lupw_backend *be = &s->be.fn;
        CUcontext cur = NULL;
        void *ev;
        CUresult r;
        (void)be->cuCtxGetCurrent(&cur);
        switch (n->type) {
        case LUP_GNODE_KERNEL:
                return add_kernel(b, ret, g, n);
        case LUP_GNODE_MEMSET: {
                CUDA_MEMSET_NODE_PARAMS p =
                        lupw_memset_node_params(s, n->u.memset.dst, n->u.memset.pitch, n->u.memset.value,
                                                n->u.memset.elem, n->u.memset.width, n->u.memset.height);
                return be->cuGraphAddMemsetNode(ret, g, NULL, 0, &p, cur);
        }
        case LUP_GNODE_MEMCPY: {
                CUDA_MEMCPY3D p = lupw_copy_node_params(s, n->u.memcpy.dst, n->u.memcpy.src, n->u.memcpy.bytes);
                return be->cuGraphAddMemcpyNode(ret, g, NULL, 0, &p, cur);
        }
        case LUP_GNODE_EMPTY:
                return be->cuGraphAddEmptyNode(ret, g, NULL, 0);
        case LUP_GNODE_EVENT_RECORD:
        case LUP_GNODE_WAIT_EVENT:
                if ((r = lupw_handle(s, LUPW_H_EVENT, n->u.event, &ev)) != CUDA_SUCCESS)
                        return r;
                return n->type == LUP_GNODE_EVENT_RECORD ? be->cuGraphAddEventRecordNode(ret, g, NULL, 0, ev)
                                                         : be->cuGraphAddEventWaitNode(ret, g, NULL, 0, ev);
        case LUP_GNODE_HOST: {
                CUDA_HOST_NODE_PARAMS p = { .fn = lupw_host_noop, .userData = (void *)(uintptr_t)n->u.token };
                return be->cuGraphAddHostNode(ret, g, NULL, 0, &p);
        }
        case LUP_GNODE_GRAPH: {
                CUgraph child;
                if (b->g->graphs[n->u.child].role != LUP_GRAPH_ROLE_CHILD)
                        return CUDA_ERROR_INVALID_VALUE;
                if ((*rc = build(b, n->u.child, &child)) < 0)
                        return CUDA_ERROR_INVALID_VALUE;
                if (b->g->graphs[n->u.child].id)
                        return add_owned_child(b, ret, g, n, child, rc);
                return be->cuGraphAddChildGraphNode(ret, g, NULL, 0, child); /* the node holds a copy */
        }
        default:
                return CUDA_ERROR_INVALID_VALUE;
        }
}

static int build(struct builder *b, uint32_t idx, CUgraph *ret)
{
        const struct lupw_backend *be = &b->s->be.fn;
        const struct lup_ckpt_graph *x = &b->g->graphs[idx];
        if (b->state[idx] == 2) {
                *ret = b->built[idx];
                return 0;
        }
        if (b->state[idx] == 1)
                return fail(b, -EBADMSG, "a child graph contains itself", idx);
        b->state[idx] = 1;
        CUgraph g;
        CUgraphNode *nodes = calloc(x->n_nodes ? x->n_nodes : 1, sizeof(*nodes));
        CUgraphNode *from = calloc(x->n_edges ? x->n_edges : 1, sizeof(*from));
        CUgraphNode *to = calloc(x->n_edges ? x->n_edges : 1, sizeof(*to));
        CUresult r = nodes && from && to ? be->cuGraphCreate(&g, 0) : CUDA_ERROR_OUT_OF_MEMORY;
        int rc = 0;
        uint32_t at = 0;
        for (; r == CUDA_SUCCESS && at < x->n_nodes; at++)
                if ((r = add_node(b, &nodes[at], g, &x->nodes[at], &rc)) != CUDA_SUCCESS)
                        break;
        for (uint32_t i = 0; r == CUDA_SUCCESS && i < x->n_edges; i++) {
                from[i] = nodes[x->edges[i].from];
                to[i] = nodes[x->edges[i].to];
        }
        if (r == CUDA_SUCCESS && x->n_edges)
                r = be->cuGraphAddDependencies_v2(g, from, to, NULL, x->n_edges);
        /* a graph's nodes the client named keep their ids (a child
         * graph's too, when the client holds that graph by id) */
        for (uint32_t i = 0; r == CUDA_SUCCESS && rc == 0 && x->role != LUP_GRAPH_ROLE_EXEC && i < x->n_nodes; i++) {
                if (!x->nodes[i].id)
                        continue;
                if (!x->id || lupw_handle_fresh(b->s, x->nodes[i].id) < 0)
                        rc = fail(b, -EBADMSG, "a node id is malformed or repeated", idx);
                else
                        r = lupw_node_put(b->s, x->nodes[i].id, nodes[i], x->id);
        }
        if (x->role == LUP_GRAPH_ROLE_EXEC) { /* install() maps them */
                free(b->exec_nodes);
                b->exec_nodes = nodes;
                nodes = NULL;
        }
        free(nodes);
        free(from);
        free(to);
        if (rc < 0)
                return rc;
        if (r != CUDA_SUCCESS) {
                char what[96];
                if (at < x->n_nodes)
                        snprintf(what, sizeof(what), "node %u (type %u) could not be made again: CUresult %d", at,
                                 x->nodes[at].type, (int)r);
                else
                        snprintf(what, sizeof(what), "its edges could not be made again: CUresult %d", (int)r);
                return fail(b, -EIO, what, idx);
        }
        b->state[idx] = 2;
        b->built[idx] = g;
        *ret = g;
        return 0;
}

/* A graph or an exec under its client id. */
static int install(struct builder *b, uint32_t idx)
{
        struct lupw_session *s = b->s;
        const struct lupw_backend *be = &s->be.fn;
        const struct lup_ckpt_graph *x = &b->g->graphs[idx];
        CUgraph g;
        CUresult r = x->ctx ? lupw_bind_ctx(s, x->ctx) : be->cuCtxSetCurrent(s->ctx.primary[0]);
        if (r != CUDA_SUCCESS)
                return fail(b, -EBADMSG, "names an unknown context", idx);
        if (!x->ctx)
                s->ctx.bound_id = 0;
        if (lupw_handle_fresh(s, x->id) < 0)
                return fail(b, -EBADMSG, "its id is malformed or repeated", idx);
        int rc = build(b, idx, &g);
        if (rc < 0)
                return rc;
        b->built[idx] = NULL; /* owned by the handle or the exec from here */
        lupw_prov_free(&s->obj.prov);
        s->obj.prov.parent = x->parent;
        if (x->role == LUP_GRAPH_ROLE_GRAPH) {
                r = lupw_handle_put(s, LUPW_H_GRAPH, x->id, g);
        } else {
                CUgraphExec e;
                struct lupw_exec *xr = NULL;
                s->obj.prov.flags = (uint32_t)x->flags;
                r = x->flags >> 32 ? CUDA_ERROR_INVALID_VALUE : be->cuGraphInstantiateWithFlags(&e, g, x->flags);
                if (r == CUDA_SUCCESS && !(xr = lupw_exec_new(s, e, g)))
                        r = CUDA_ERROR_OUT_OF_MEMORY;
                for (uint32_t i = 0; r == CUDA_SUCCESS && b->exec_nodes && i < x->n_nodes; i++)
                        if (x->nodes[i].id &&
                            lup_u64map_put(&xr->nodes, x->nodes[i].id, (uint64_t)(uintptr_t)b->exec_nodes[i]) < 0)
                                r = CUDA_ERROR_OUT_OF_MEMORY;
                /* the nodes cuGraphNodeSetEnabled had turned off */
                for (uint32_t i = 0; r == CUDA_SUCCESS && b->exec_nodes && i < b->g->n_off; i++)
                        if (b->g->off[i].graph == idx)
                                r = be->cuGraphNodeSetEnabled(e, b->exec_nodes[b->g->off[i].node], 0);
                if (r == CUDA_SUCCESS) /* host nodes: its segments again, with those bits */
                        r = lupw_split_build(s, xr, x->flags);
                if (r == CUDA_SUCCESS)
                        r = lupw_split_carry_enabled(s, xr, e);
                if (r == CUDA_SUCCESS && (r = lupw_handle_put(s, LUPW_H_GRAPHEXEC, x->id, e)) != CUDA_SUCCESS)
                        (void)be->cuGraphExecDestroy(e);
        }
        if (r != CUDA_SUCCESS) {
                (void)be->cuGraphDestroy(g);
                char what[96];
                snprintf(what, sizeof(what), "making it again failed with CUresult %d", (int)r);
                return fail(b, -EIO, what, idx);
        }
        return 0;
}

static int restore_captures(struct lupw_session *s, const struct lup_ckpt_graphs *g, char *why, size_t whylen)
{
        for (uint32_t i = 0; i < g->n_caps; i++) {
                CUstream real;
                if (lupw_stream(s, g->caps[i].stream, &real) != CUDA_SUCCESS) {
                        snprintf(why, whylen, "a capture names an unknown stream %" PRIx64, g->caps[i].stream);
                        return -EBADMSG;
                }
                s->graphs.caps[s->graphs.n_caps++] = (struct lupw_capture){ .real = real,
                                                                            .stream = g->caps[i].stream,
                                                                            .graph = g->caps[i].graph,
                                                                            .cid = g->caps[i].cid,
                                                                            .lost = true };
        }
        return 0;
}

static int apply(struct lupw_session *s, const struct lup_ckpt_graphs *g, char *why, size_t whylen)
{
        struct builder b = { .s = s, .g = g, .why = why, .whylen = whylen };
        b.built = calloc(g->n_graphs ? g->n_graphs : 1, sizeof(*b.built));
        b.state = calloc(g->n_graphs ? g->n_graphs : 1, 1);
        int rc = b.built && b.state ? 0 : -ENOMEM;
        if (rc < 0)
                snprintf(why, whylen, "out of memory");
        for (uint32_t i = 0; rc == 0 && i < g->n_graphs; i++)
                if (g->graphs[i].role != LUP_GRAPH_ROLE_CHILD)
                        rc = install(&b, i);
        for (uint32_t i = 0; b.built && i < g->n_graphs; i++) /* children: the nodes hold copies */
                if (b.built[i])
                        (void)s->be.fn.cuGraphDestroy(b.built[i]);
        free(b.built);
        free(b.state);
        free(b.exec_nodes);
        if (rc == 0)
                rc = restore_captures(s, g, why, whylen);
        return rc;
}

int lupw_graphs_load(struct lupw_session *s, struct lupine_ckpt_load *ld, char *why, size_t whylen)
{
        const struct lup_sealed *kind = &lup_ckpt_graphs_kind;
        struct lup_ckpt_graphs g;
        const char *w;
        uint8_t *obj;
        uint64_t size;
        int rc = lupine_provider_read_object(s->ckpt.ops, ld, "graphs", kind->min_len, kind->max_len, &obj, &size);
        if (rc == -ENOENT)
                return 0; /* an older checkpoint: no graphs */
        if (rc < 0) {
                snprintf(why, whylen, "reading object graphs failed: %s", strerror(-rc));
                return rc;
        }
        rc = lup_ckpt_graphs_decode(obj, (size_t)size, &g, &w);
        free(obj);
        if (rc < 0) {
                snprintf(why, whylen, "%s", w);
                return rc;
        }
        if (g.n_caps > LUPW_MAX_CAPTURES - (uint32_t)s->graphs.n_caps) {
                lup_ckpt_graphs_free(&g);
                snprintf(why, whylen, "object graphs lists too many captures");
                return -EBADMSG;
        }
        rc = apply(s, &g, why, whylen);
        lup_ckpt_graphs_free(&g);
        return rc;
}
