/* SPDX-License-Identifier: MIT */
/*
 * Graphs and execs across a checkpoint (object "graphs", ckpt_graph.h).
 *
 * A save walks the driver's graphs (cuGraphGetNodes, cuGraphGetEdges,
 * cuGraphNodeGetType and the node kinds' GetParams calls) into portable
 * records: handles become client ids, kernel parameters bytes laid out as
 * cuFuncGetParamInfo says, and module globals' addresses the client's
 * (the reverse of worker/checks.c's translation). An exec is saved as the
 * worker's private clone of the graph it was instantiated from.
 *
 * A restore builds each graph again with cuGraphAdd*Node and one
 * cuGraphAddDependencies, translating module globals' addresses in
 * kernel parameters and memset/memcpy nodes to where the reloaded modules
 * put them, and instantiates each exec again from its rebuilt clone with
 * the same flags.
 *
 * Node kinds saved: kernel, memset, memcpy (device to device, 1-D), empty,
 * event record, event wait, child graph, host (its token: the client's
 * function stays in the client). A child graph node's graph that
 * the client holds (cuGraphChildGraphNodeGetGraph) is saved with its node,
 * under its id, with its nodes' ids; an exec's nodes that
 * cuGraphNodeSetEnabled turned off are listed (read from the driver
 * here). A graph holding another kind (memory alloc/free,
 * conditional, ...) fails the session's checkpoint with a log line naming
 * it: a restore must never run a graph that differs from the one the
 * client built.
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

struct saver {
        struct lupw_session *s;
        struct lup_u64map rev; /* while an exec is saved: its clone's node -> the client's node id */
        struct lup_u64map ids; /* real function/kernel/event handle -> client id */
        struct lup_ckpt_graphs g;
        uint32_t cap;
        uint8_t **bufs; /* kernel parameter copies, one per kernel node */
        size_t n_bufs, cap_bufs;
        CUgraphExec exec; /* while an exec is saved: the exec (its nodes' enable bits) */
        uint32_t cap_off;
        char why[200];
};

static int fail(struct saver *sv, int rc, const char *what)
{
        if (!sv->why[0])
                snprintf(sv->why, sizeof(sv->why), "%s", what);
        return rc;
}

static void note_ids(uint64_t key, uint64_t val, void *ud)
{
        struct saver *sv = ud;
        const struct lupw_handle_ent *e = (const struct lupw_handle_ent *)(uintptr_t)val;
        if (e->kind == LUPW_H_FUNCTION || e->kind == LUPW_H_EVENT || e->kind == LUPW_H_KERNEL)
                (void)lup_u64map_put(&sv->ids, (uint64_t)(uintptr_t)e->real, key);
        if (e->kind == LUPW_H_KERNEL) { /* a kernel launched as a function */
                CUfunction f;
                if (sv->s->be.fn.cuKernelGetFunction(&f, (CUkernel)e->real) == CUDA_SUCCESS)
                        (void)lup_u64map_put(&sv->ids, (uint64_t)(uintptr_t)f, key);
        }
}

static int new_record(struct saver *sv, uint32_t *ret)
{
        if (sv->g.n_graphs == sv->cap) {
                uint32_t ncap = sv->cap ? sv->cap * 2 : 16;
                struct lup_ckpt_graph *n =
                        ncap <= LUP_CKPT_MAX_GRAPHS ? realloc(sv->g.graphs, ncap * sizeof(*n)) : NULL;
                if (!n)
                        return fail(sv, -ENOMEM, "too many graphs");
                sv->g.graphs = n;
                sv->cap = ncap;
        }
        memset(&sv->g.graphs[sv->g.n_graphs], 0, sizeof(sv->g.graphs[0]));
        *ret = sv->g.n_graphs++;
        return 0;
}

/* The parameter buffer of an `extra` list (CU_LAUNCH_PARAM_BUFFER_POINTER
 * and _SIZE), which the driver may give instead of kernelParams. */
static bool extra_buffer(void **extra, const uint8_t **ret, size_t *ret_len)
{
        const uint8_t *buf = NULL;
        size_t len = 0;
        bool have_len = false;
        for (int i = 0; extra && i < 16 && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
                if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
                        buf = extra[i + 1];
                else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1])
                        len = *(const size_t *)extra[i + 1], have_len = true;
                else
                        return false;
        }
        *ret = buf;
        *ret_len = len;
        return buf && have_len;
}

static int save_kernel(struct saver *sv, CUgraphNode node, struct lup_ckpt_gnode *n)
{
        struct lupw_session *s = sv->s;
        CUDA_KERNEL_NODE_PARAMS p;
        uint64_t id;
        memset(&p, 0, sizeof(p));
        if (s->be.fn.cuGraphKernelNodeGetParams_v2(node, &p) != CUDA_SUCCESS)
                return fail(sv, -EIO, "cuGraphKernelNodeGetParams failed");
        if (!(p.kern && lup_u64map_get(&sv->ids, (uint64_t)(uintptr_t)p.kern, &id)) &&
            !lup_u64map_get(&sv->ids, (uint64_t)(uintptr_t)p.func, &id))
                return fail(sv, -ENOTSUP, "a kernel node's function is not one the client loaded");
        struct lupw_handle_ent *e = lupw_handle_ent(s, LUPW_H_FUNCTION, id);
        if (!e)
                e = lupw_handle_ent(s, LUPW_H_KERNEL, id);
        /* a function the client launched only in a capture (or a kernel
         * whose layout no launch fetched): ask the driver now, through the
         * node's function */
        if (e && !e->have_params && p.func)
                lupw_param_layout(s, e, p.func);
        if (!e || !e->have_params)
                return fail(sv, -ENOTSUP, "a kernel node's parameter layout is unknown");
        const uint8_t *packed = NULL;
        size_t packed_len = 0;
        if (e->n_params && !p.kernelParams && !extra_buffer(p.extra, &packed, &packed_len))
                return fail(sv, -ENOTSUP, "a kernel node whose parameters the driver does not show");
        if (packed && packed_len < e->param_bytes)
                return fail(sv, -ENOTSUP, "a kernel node's parameter buffer is shorter than its layout");
        uint8_t *buf = calloc(1, e->param_bytes ? e->param_bytes : 1);
        if (!buf)
                return fail(sv, -ENOMEM, "out of memory");
        if (sv->n_bufs == sv->cap_bufs) {
                size_t ncap = sv->cap_bufs ? sv->cap_bufs * 2 : 64;
                uint8_t **nb = realloc(sv->bufs, ncap * sizeof(*nb));
                if (!nb) {
                        free(buf);
                        return fail(sv, -ENOMEM, "out of memory");
                }
                sv->bufs = nb;
                sv->cap_bufs = ncap;
        }
        sv->bufs[sv->n_bufs++] = buf;
        for (uint32_t i = 0; i < e->n_params; i++) {
                uint32_t off = e->params[2 * i], size = e->params[2 * i + 1];
                memcpy(buf + off, packed ? packed + off : (const uint8_t *)p.kernelParams[i], size);
                if (size == 8 && s->obj.xlate.n) {
                        uint64_t v;
                        memcpy(&v, buf + off, 8);
                        v = lupw_unxlate(s, v);
                        memcpy(buf + off, &v, 8);
                }
        }
        n->u.kernel.func = id;
        n->u.kernel.grid[0] = p.gridDimX, n->u.kernel.grid[1] = p.gridDimY, n->u.kernel.grid[2] = p.gridDimZ;
        n->u.kernel.block[0] = p.blockDimX, n->u.kernel.block[1] = p.blockDimY, n->u.kernel.block[2] = p.blockDimZ;
        n->u.kernel.smem = p.sharedMemBytes;
        n->u.kernel.n_bytes = e->param_bytes;
        n->u.kernel.bytes = buf;
        return 0;
}

static int save_copy(struct saver *sv, CUgraphNode node, struct lup_ckpt_gnode *n)
{
        CUDA_MEMCPY3D p;
        memset(&p, 0, sizeof(p));
        if (sv->s->be.fn.cuGraphMemcpyNodeGetParams(node, &p) != CUDA_SUCCESS)
                return fail(sv, -EIO, "cuGraphMemcpyNodeGetParams failed");
        bool dev_src = p.srcMemoryType == CU_MEMORYTYPE_DEVICE || p.srcMemoryType == CU_MEMORYTYPE_UNIFIED;
        bool dev_dst = p.dstMemoryType == CU_MEMORYTYPE_DEVICE || p.dstMemoryType == CU_MEMORYTYPE_UNIFIED;
        if (!dev_src || !dev_dst || p.Height > 1 || p.Depth > 1 || p.srcY || p.srcZ || p.dstY || p.dstZ)
                return fail(sv, -ENOTSUP, "a memcpy node that is not a 1-D device to device copy");
        n->u.memcpy.src = lupw_unxlate(sv->s, p.srcDevice + p.srcXInBytes);
        n->u.memcpy.dst = lupw_unxlate(sv->s, p.dstDevice + p.dstXInBytes);
        n->u.memcpy.bytes = p.WidthInBytes;
        return 0;
}

static int walk(struct saver *sv, CUgraph g, uint32_t idx);

/* The client's id of a node: a graph's own, an exec clone's counterpart's. */
static uint64_t node_id(struct saver *sv, uint8_t role, CUgraphNode n)
{
        uint64_t id = 0;
        if (role != LUP_GRAPH_ROLE_EXEC) /* a graph's, or a child graph's the client named */
                return lupw_node_lookup(sv->s, n);
        if (role == LUP_GRAPH_ROLE_EXEC)
                lup_u64map_get(&sv->rev, (uint64_t)(uintptr_t)n, &id);
        return id;
}

static void reverse(uint64_t key, uint64_t val, void *ud)
{
        (void)lup_u64map_put(ud, val, key);
}

static int save_node(struct saver *sv, CUgraphNode node, struct lup_ckpt_gnode *n)
{
        const struct lupw_backend *be = &sv->s->be.fn;
        CUgraphNodeType t;
        CUevent ev;
        CUgraph child;
        uint64_t id;
        if (be->cuGraphNodeGetType(node, &t) != CUDA_SUCCESS)
                return fail(sv, -EIO, "cuGraphNodeGetType failed");
        n->type = (uint8_t)t;
        switch ((int)t) {
        case LUP_GNODE_KERNEL:
                return save_kernel(sv, node, n);
        case LUP_GNODE_MEMCPY:
                return save_copy(sv, node, n);
        case LUP_GNODE_MEMSET: {
                CUDA_MEMSET_NODE_PARAMS p;
                if (be->cuGraphMemsetNodeGetParams(node, &p) != CUDA_SUCCESS)
                        return fail(sv, -EIO, "cuGraphMemsetNodeGetParams failed");
                n->u.memset.dst = lupw_unxlate(sv->s, p.dst);
                n->u.memset.pitch = p.pitch;
                n->u.memset.value = p.value;
                n->u.memset.elem = p.elementSize;
                n->u.memset.width = p.width;
                n->u.memset.height = p.height;
                return 0;
        }
        case LUP_GNODE_EMPTY:
                return 0;
        case LUP_GNODE_EVENT_RECORD:
        case LUP_GNODE_WAIT_EVENT:
                if ((t == CU_GRAPH_NODE_TYPE_EVENT_RECORD
                             ? be->cuGraphEventRecordNodeGetEvent(node, &ev)
                             : be->cuGraphEventWaitNodeGetEvent(node, &ev)) != CUDA_SUCCESS)
                        return fail(sv, -EIO, "cuGraphEvent*NodeGetEvent failed");
                if (!lup_u64map_get(&sv->ids, (uint64_t)(uintptr_t)ev, &id))
                        return fail(sv, -ENOTSUP, "an event node's event is not the client's");
                n->u.event = id;
                return 0;
        case LUP_GNODE_HOST: { /* the token; the client keeps the function */
                CUDA_HOST_NODE_PARAMS p;
                if (be->cuGraphHostNodeGetParams(node, &p) != CUDA_SUCCESS)
                        return fail(sv, -EIO, "cuGraphHostNodeGetParams failed");
                if (p.fn != lupw_host_noop || !p.userData)
                        return fail(sv, -ENOTSUP, "a host node lupine did not make");
                n->u.token = (uint64_t)(uintptr_t)p.userData;
                return 0;
        }
        case LUP_GNODE_GRAPH: {
                uint32_t ci;
                int rc;
                if (be->cuGraphChildGraphNodeGetGraph(node, &child) != CUDA_SUCCESS)
                        return fail(sv, -EIO, "cuGraphChildGraphNodeGetGraph failed");
                if ((rc = new_record(sv, &ci)) < 0)
                        return rc;
                sv->g.graphs[ci].role = LUP_GRAPH_ROLE_CHILD;
                sv->g.graphs[ci].id = lupw_graph_id_of(sv->s, child); /* cuGraphChildGraphNodeGetGraph's */
                n->u.child = ci;
                return walk(sv, child, ci);
        }
        default:
                snprintf(sv->why, sizeof(sv->why), "a graph node of type %d, which lupine cannot checkpoint yet",
                         (int)t);
                return -ENOTSUP;
        }
}

/* An exec's node that cuGraphNodeSetEnabled turned off: recorded. */
static int note_off(struct saver *sv, uint32_t idx, uint32_t i, CUgraphNode n, uint8_t type)
{
        unsigned on = 1;
        if (type != LUP_GNODE_KERNEL && type != LUP_GNODE_MEMSET && type != LUP_GNODE_MEMCPY)
                return 0; /* the only kinds that can be turned off */
        if (sv->s->be.fn.cuGraphNodeGetEnabled(sv->exec, n, &on) != CUDA_SUCCESS) {
                uint64_t id;
                /* a node brought up from a child graph (worker/graph_flatten.c)
                 * is not the exec's own: never turned off */
                if (!lup_u64map_get(&sv->rev, (uint64_t)(uintptr_t)n, &id))
                        return 0;
                return fail(sv, -EIO, "cuGraphNodeGetEnabled failed");
        }
        if (on)
                return 0;
        if (sv->g.n_off == sv->cap_off) {
                uint32_t ncap = sv->cap_off ? sv->cap_off * 2 : 16;
                struct lup_ckpt_goff *o = ncap <= LUP_CKPT_MAX_GRAPH_OFF ? realloc(sv->g.off, ncap * sizeof(*o)) : NULL;
                if (!o)
                        return fail(sv, -ENOMEM, "too many disabled graph nodes");
                sv->g.off = o;
                sv->cap_off = ncap;
        }
        sv->g.off[sv->g.n_off++] = (struct lup_ckpt_goff){ .graph = idx, .node = i };
        return 0;
}

static int node_index(const struct lup_u64map *m, CUgraphNode n, uint32_t *ret)
{
        uint64_t v;
        if (!lup_u64map_get(m, (uint64_t)(uintptr_t)n, &v))
                return -EIO;
        *ret = (uint32_t)v;
        return 0;
}

static int walk_edges(struct saver *sv, CUgraph g, struct lup_ckpt_graph *x, const struct lup_u64map *index)
{
        size_t ne = 0;
        if (sv->s->be.fn.cuGraphGetEdges_v2(g, NULL, NULL, NULL, &ne) != CUDA_SUCCESS)
                return fail(sv, -EIO, "cuGraphGetEdges failed");
        if (ne > LUP_CKPT_MAX_GRAPH_EDGES)
                return fail(sv, -E2BIG, "a graph with too many edges");
        CUgraphNode *from = calloc(ne ? ne : 1, sizeof(*from)), *to = calloc(ne ? ne : 1, sizeof(*to));
        x->edges = calloc(ne ? ne : 1, sizeof(*x->edges));
        int rc = 0;
        if (!from || !to || !x->edges)
                rc = fail(sv, -ENOMEM, "out of memory");
        else if (ne && sv->s->be.fn.cuGraphGetEdges_v2(g, from, to, NULL, &ne) != CUDA_SUCCESS)
                rc = fail(sv, -EIO, "cuGraphGetEdges failed");
        for (size_t i = 0; rc == 0 && i < ne; i++)
                if (node_index(index, from[i], &x->edges[i].from) < 0 || node_index(index, to[i], &x->edges[i].to) < 0)
                        rc = fail(sv, -EIO, "an edge names a node the graph does not list");
        x->n_edges = (uint32_t)ne;
        free(from);
        free(to);
        return rc;
}

/* Record idx (allocated, its id and role set by the caller) from graph g. */
static int walk(struct saver *sv, CUgraph g, uint32_t idx)
{
        const struct lupw_backend *be = &sv->s->be.fn;
        size_t nn = 0;
        if (be->cuGraphGetNodes(g, NULL, &nn) != CUDA_SUCCESS)
                return fail(sv, -EIO, "cuGraphGetNodes failed");
        if (nn > LUP_CKPT_MAX_GRAPH_NODES)
                return fail(sv, -E2BIG, "a graph with too many nodes");
        CUgraphNode *nodes = calloc(nn ? nn : 1, sizeof(*nodes));
        struct lup_ckpt_gnode *recs = calloc(nn ? nn : 1, sizeof(*recs));
        struct lup_u64map index;
        lup_u64map_init(&index, LUP_CKPT_MAX_GRAPH_NODES);
        int rc = 0;
        if (!nodes || !recs)
                rc = fail(sv, -ENOMEM, "out of memory");
        else if (nn && be->cuGraphGetNodes(g, nodes, &nn) != CUDA_SUCCESS)
                rc = fail(sv, -EIO, "cuGraphGetNodes failed");
        /* the record may move while children are appended: set it last */
        sv->g.graphs[idx].nodes = recs;
        sv->g.graphs[idx].n_nodes = rc == 0 ? (uint32_t)nn : 0;
        for (size_t i = 0; rc == 0 && i < nn; i++) {
                if (lup_u64map_put(&index, (uint64_t)(uintptr_t)nodes[i], i) < 0)
                        rc = fail(sv, -ENOMEM, "out of memory");
                else if ((rc = save_node(sv, nodes[i], &sv->g.graphs[idx].nodes[i])) == 0)
                        sv->g.graphs[idx].nodes[i].id = node_id(sv, sv->g.graphs[idx].role, nodes[i]);
                if (rc == 0 && sv->g.graphs[idx].role == LUP_GRAPH_ROLE_EXEC)
                        rc = note_off(sv, idx, (uint32_t)i, nodes[i], sv->g.graphs[idx].nodes[i].type);
        }
        if (rc == 0)
                rc = walk_edges(sv, g, &sv->g.graphs[idx], &index);
        lup_u64map_free(&index);
        free(nodes);
        return rc;
}

struct ent_list {
        uint64_t *ids;
        size_t n, cap;
};

static void collect_graphs(uint64_t key, uint64_t val, void *ud)
{
        struct ent_list *l = ud;
        const struct lupw_handle_ent *e = (const struct lupw_handle_ent *)(uintptr_t)val;
        if ((e->kind == LUPW_H_GRAPH || e->kind == LUPW_H_GRAPHEXEC) && l->n < l->cap)
                l->ids[l->n++] = key;
}

static int save_one(struct saver *sv, uint64_t id)
{
        struct lupw_session *s = sv->s;
        struct lupw_handle_ent *e = lupw_handle_ent(s, LUPW_H_GRAPH, id);
        bool exec = !e;
        CUgraph g;
        uint32_t idx;
        if (exec)
                e = lupw_handle_ent(s, LUPW_H_GRAPHEXEC, id);
        if (!e || (!exec && (e->prov.flags & LUPW_GRAPH_CAPTURING)))
                return 0; /* a capture's graph: captures do not outlive a drain */
        if (!exec && (e->prov.flags & LUPW_GRAPH_OWNED))
                return 0; /* a child graph node's graph: saved with its node */
        struct lupw_exec *xr = exec ? lupw_exec_get(s, (CUgraphExec)e->real) : NULL;
        if (exec && !xr)
                return fail(sv, -EIO, "a graph exec without its graph");
        g = exec ? xr->src : (CUgraph)e->real;
        lup_u64map_free(&sv->rev);
        lup_u64map_init(&sv->rev, LUP_CKPT_MAX_GRAPH_NODES);
        if (exec)
                lup_u64map_each(&xr->nodes, reverse, &sv->rev);
        int rc = new_record(sv, &idx);
        if (rc < 0)
                return rc;
        struct lup_ckpt_graph *x = &sv->g.graphs[idx];
        x->id = id;
        x->role = exec ? LUP_GRAPH_ROLE_EXEC : LUP_GRAPH_ROLE_GRAPH;
        x->ctx = e->ctx;
        x->parent = e->prov.parent;
        x->flags = exec ? e->prov.flags : 0;
        sv->exec = exec ? (CUgraphExec)e->real : NULL;
        return walk(sv, g, idx);
}

static int save_captures(struct saver *sv)
{
        struct lupw_session *s = sv->s;
        sv->g.caps = calloc(LUPW_MAX_CAPTURES, sizeof(*sv->g.caps));
        if (!sv->g.caps)
                return fail(sv, -ENOMEM, "out of memory");
        for (int i = 0; i < s->graphs.n_caps; i++) {
                const struct lupw_capture *c = &s->graphs.caps[i];
                if (c->lost) /* every open one is, after a drain */
                        sv->g.caps[sv->g.n_caps++] =
                                (struct lup_ckpt_capture){ .stream = c->stream, .graph = c->graph, .cid = c->cid };
        }
        return 0;
}

int lupw_graphs_save(struct lupw_session *s, struct lupine_ckpt_save *save)
{
        struct saver sv = { .s = s };
        struct ent_list l = { .cap = s->obj.handles.used };
        uint8_t *obj = NULL;
        size_t len = 0;
        int rc = 0;
        lup_u64map_init(&sv.ids, 2 * (size_t)LUP_MAX_HANDLES);
        lup_u64map_init(&sv.rev, LUP_CKPT_MAX_GRAPH_NODES);
        l.ids = calloc(l.cap ? l.cap : 1, sizeof(*l.ids));
        if (!l.ids)
                rc = fail(&sv, -ENOMEM, "out of memory");
        if (rc == 0 && s->ctx.primary[0])
                (void)s->be.fn.cuCtxSetCurrent(s->ctx.primary[0]);
        if (rc == 0) {
                s->ctx.bound_id = 0;
                lup_u64map_each(&s->obj.handles, note_ids, &sv);
                lup_u64map_each(&s->obj.handles, collect_graphs, &l);
        }
        for (size_t i = 0; rc == 0 && i < l.n; i++) {
                uint32_t mark = sv.g.n_graphs, mark_off = sv.g.n_off;
                rc = save_one(&sv, l.ids[i]);
                if (rc != -ENOTSUP)
                        continue;
                /* A graph with a node lupine cannot save yet: the session is
                 * kept without it (its memory, every other object), and the
                 * graph or exec is gone after the restore: a launch of it
                 * then fails with CUDA_ERROR_INVALID_HANDLE. Losing the
                 * whole session for one graph would be worse. */
                lup_err("session %s: checkpoint: graph %#llx is left out (%s); after the restore, using it fails "
                        "with CUDA_ERROR_INVALID_HANDLE",
                        s->name, (unsigned long long)l.ids[i], sv.why);
                for (uint32_t j = mark; j < sv.g.n_graphs; j++) {
                        free(sv.g.graphs[j].nodes);
                        free(sv.g.graphs[j].edges);
                }
                sv.g.n_graphs = mark;
                sv.g.n_off = mark_off;
                sv.why[0] = 0;
                rc = 0;
        }
        if (rc == 0)
                rc = save_captures(&sv);
        if (rc == 0 && (rc = lup_ckpt_graphs_encode(&sv.g, &obj, &len)) < 0)
                fail(&sv, rc, "the graphs do not fit in a checkpoint");
        if (rc == 0)
                rc = s->ckpt.ops->save_write(save, "graphs", obj, len);
        else
                lup_err("session %s: checkpoint: graphs: %s", s->name, sv.why);
        free(obj);
        free(l.ids);
        for (size_t i = 0; i < sv.n_bufs; i++)
                free(sv.bufs[i]);
        free(sv.bufs);
        for (uint32_t i = 0; i < sv.g.n_graphs; i++) {
                free(sv.g.graphs[i].nodes);
                free(sv.g.graphs[i].edges);
        }
        free(sv.g.graphs);
        free(sv.g.caps);
        free(sv.g.off);
        lup_u64map_free(&sv.ids);
        lup_u64map_free(&sv.rev);
        return rc;
}
