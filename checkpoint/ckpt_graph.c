/* SPDX-License-Identifier: MIT */
/* The checkpoint's "graphs" object (ckpt_graph.h says what it holds). */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include "ckpt_graph.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lupine/wire.h"

#define GRAPHS_MAGIC 0x3148504752505550ull /* "PUPRGPH1" */

const struct lup_sealed lup_ckpt_graphs_kind = {
        .name = "graphs",
        .magic = GRAPHS_MAGIC,
        .version_min = 1,
        .version_max = 2,
        .min_len = LUP_SEALED_OVERHEAD + 8,
        .max_len = LUP_CKPT_GRAPHS_MAX,
        .why_damaged = "object graphs is damaged",
        .why_magic = "object graphs is damaged",
        .why_version = "object graphs has a version this lupined does not read",
};

/* ---- encoding */

static size_t node_size(const struct lup_ckpt_gnode *n)
{
        switch (n->type) {
        case LUP_GNODE_KERNEL:
                return 9 + 8 + 7 * 4 + 4 + n->u.kernel.n_bytes;
        case LUP_GNODE_MEMSET:
                return 9 + 8 * 4 + 8;
        case LUP_GNODE_MEMCPY:
                return 9 + 24;
        case LUP_GNODE_EVENT_RECORD:
        case LUP_GNODE_WAIT_EVENT:
        case LUP_GNODE_HOST:
                return 9 + 8;
        case LUP_GNODE_GRAPH:
                return 9 + 4;
        default:
                return 9;
        }
}

static void put_node(struct lup_wr *w, const struct lup_ckpt_gnode *n)
{
        lup_wr_u8(w, n->type);
        lup_wr_u64(w, n->id);
        switch (n->type) {
        case LUP_GNODE_KERNEL:
                lup_wr_u64(w, n->u.kernel.func);
                for (int i = 0; i < 3; i++)
                        lup_wr_u32(w, n->u.kernel.grid[i]);
                for (int i = 0; i < 3; i++)
                        lup_wr_u32(w, n->u.kernel.block[i]);
                lup_wr_u32(w, n->u.kernel.smem);
                lup_wr_u32(w, n->u.kernel.n_bytes);
                lup_wr_bytes(w, n->u.kernel.bytes, n->u.kernel.n_bytes);
                break;
        case LUP_GNODE_MEMSET:
                lup_wr_u64(w, n->u.memset.dst);
                lup_wr_u64(w, n->u.memset.pitch);
                lup_wr_u32(w, n->u.memset.value);
                lup_wr_u32(w, n->u.memset.elem);
                lup_wr_u64(w, n->u.memset.width);
                lup_wr_u64(w, n->u.memset.height);
                break;
        case LUP_GNODE_MEMCPY:
                lup_wr_u64(w, n->u.memcpy.dst);
                lup_wr_u64(w, n->u.memcpy.src);
                lup_wr_u64(w, n->u.memcpy.bytes);
                break;
        case LUP_GNODE_EVENT_RECORD:
        case LUP_GNODE_WAIT_EVENT:
                lup_wr_u64(w, n->u.event);
                break;
        case LUP_GNODE_GRAPH:
                lup_wr_u32(w, n->u.child);
                break;
        case LUP_GNODE_HOST:
                lup_wr_u64(w, n->u.token);
                break;
        default: /* EMPTY */
                break;
        }
}

int lup_ckpt_graphs_encode(const struct lup_ckpt_graphs *g, uint8_t **ret_buf, size_t *ret_len)
{
        size_t cap = LUP_SEALED_OVERHEAD + 12 + (size_t)g->n_caps * 24 + (size_t)g->n_off * 8;
        for (uint32_t i = 0; i < g->n_graphs; i++) {
                const struct lup_ckpt_graph *x = &g->graphs[i];
                cap += 8 + 1 + 24 + 8 + (size_t)x->n_edges * 8;
                for (uint32_t j = 0; j < x->n_nodes; j++)
                        cap += node_size(&x->nodes[j]);
        }
        uint32_t version = g->version ? g->version : 2;
        if (version > 2 || (version == 1 && g->n_off))
                return -EINVAL;
        if (cap > LUP_CKPT_GRAPHS_MAX)
                return -E2BIG;
        uint8_t *buf = malloc(cap);
        if (!buf)
                return -ENOMEM;
        struct lup_wr w = lup_wr_init(buf, cap);
        lup_sealed_begin(&w, &lup_ckpt_graphs_kind, version);
        lup_wr_u32(&w, g->n_graphs);
        for (uint32_t i = 0; i < g->n_graphs; i++) {
                const struct lup_ckpt_graph *x = &g->graphs[i];
                lup_wr_u64(&w, x->id);
                lup_wr_u8(&w, x->role);
                lup_wr_u64(&w, x->ctx);
                lup_wr_u64(&w, x->parent);
                lup_wr_u64(&w, x->flags);
                lup_wr_u32(&w, x->n_nodes);
                for (uint32_t j = 0; j < x->n_nodes; j++)
                        put_node(&w, &x->nodes[j]);
                lup_wr_u32(&w, x->n_edges);
                for (uint32_t j = 0; j < x->n_edges; j++) {
                        lup_wr_u32(&w, x->edges[j].from);
                        lup_wr_u32(&w, x->edges[j].to);
                }
        }
        lup_wr_u32(&w, g->n_caps);
        for (uint32_t i = 0; i < g->n_caps; i++) {
                lup_wr_u64(&w, g->caps[i].stream);
                lup_wr_u64(&w, g->caps[i].graph);
                lup_wr_u64(&w, g->caps[i].cid);
        }
        if (version >= 2)
                lup_wr_u32(&w, g->n_off);
        for (uint32_t i = 0; i < g->n_off; i++) {
                lup_wr_u32(&w, g->off[i].graph);
                lup_wr_u32(&w, g->off[i].node);
        }
        lup_sealed_end(&w, &lup_ckpt_graphs_kind);
        if (w.err) {
                free(buf);
                return -ENOBUFS;
        }
        *ret_buf = buf;
        *ret_len = w.len;
        return 0;
}

/* ---- decoding */

static int get_node(struct lup_rd *r, struct lup_ckpt_gnode *n, uint32_t n_graphs)
{
        lup_rd_u8(r, &n->type);
        lup_rd_u64(r, &n->id);
        switch (n->type) {
        case LUP_GNODE_KERNEL:
                lup_rd_u64(r, &n->u.kernel.func);
                for (int i = 0; i < 3; i++)
                        lup_rd_u32(r, &n->u.kernel.grid[i]);
                for (int i = 0; i < 3; i++)
                        lup_rd_u32(r, &n->u.kernel.block[i]);
                lup_rd_u32(r, &n->u.kernel.smem);
                lup_rd_u32(r, &n->u.kernel.n_bytes);
                if (r->err || n->u.kernel.n_bytes > LUP_MAX_PARAM_BYTES)
                        return -EBADMSG;
                return lup_rd_bytes(r, n->u.kernel.n_bytes, &n->u.kernel.bytes) < 0 ? -EBADMSG : 0;
        case LUP_GNODE_MEMSET:
                lup_rd_u64(r, &n->u.memset.dst);
                lup_rd_u64(r, &n->u.memset.pitch);
                lup_rd_u32(r, &n->u.memset.value);
                lup_rd_u32(r, &n->u.memset.elem);
                lup_rd_u64(r, &n->u.memset.width);
                lup_rd_u64(r, &n->u.memset.height);
                if (n->u.memset.elem != 1 && n->u.memset.elem != 2 && n->u.memset.elem != 4)
                        return -EBADMSG;
                break;
        case LUP_GNODE_MEMCPY:
                lup_rd_u64(r, &n->u.memcpy.dst);
                lup_rd_u64(r, &n->u.memcpy.src);
                lup_rd_u64(r, &n->u.memcpy.bytes);
                break;
        case LUP_GNODE_EVENT_RECORD:
        case LUP_GNODE_WAIT_EVENT:
                lup_rd_u64(r, &n->u.event);
                break;
        case LUP_GNODE_GRAPH:
                lup_rd_u32(r, &n->u.child);
                if (!r->err && n->u.child >= n_graphs)
                        return -EBADMSG;
                break;
        case LUP_GNODE_HOST:
                lup_rd_u64(r, &n->u.token);
                if (!r->err && !n->u.token)
                        return -EBADMSG;
                break;
        case LUP_GNODE_EMPTY:
                break;
        default:
                return -EBADMSG;
        }
        return r->err ? -EBADMSG : 0;
}

static int get_graph(struct lup_rd *r, struct lup_ckpt_graph *x, uint32_t n_graphs)
{
        lup_rd_u64(r, &x->id);
        lup_rd_u8(r, &x->role);
        lup_rd_u64(r, &x->ctx);
        lup_rd_u64(r, &x->parent);
        lup_rd_u64(r, &x->flags);
        lup_rd_u32(r, &x->n_nodes);
        if (r->err || x->role > LUP_GRAPH_ROLE_CHILD || x->n_nodes > LUP_CKPT_MAX_GRAPH_NODES ||
            (uint64_t)x->n_nodes * 9 > lup_rd_left(r))
                return -EBADMSG;
        if (x->n_nodes && !(x->nodes = calloc(x->n_nodes, sizeof(*x->nodes))))
                return -ENOMEM;
        for (uint32_t j = 0; j < x->n_nodes; j++)
                if (get_node(r, &x->nodes[j], n_graphs) < 0)
                        return -EBADMSG;
        lup_rd_u32(r, &x->n_edges);
        if (r->err || x->n_edges > LUP_CKPT_MAX_GRAPH_EDGES || (uint64_t)x->n_edges * 8 > lup_rd_left(r))
                return -EBADMSG;
        if (x->n_edges && !(x->edges = calloc(x->n_edges, sizeof(*x->edges))))
                return -ENOMEM;
        for (uint32_t j = 0; j < x->n_edges; j++) {
                lup_rd_u32(r, &x->edges[j].from);
                lup_rd_u32(r, &x->edges[j].to);
                if (x->edges[j].from >= x->n_nodes || x->edges[j].to >= x->n_nodes)
                        return -EBADMSG;
        }
        return r->err ? -EBADMSG : 0;
}

/* version 2's disabled exec nodes: each names a node that can be disabled
 * (kernel, memset, memcpy) of an exec's record */
static int decode_off(struct lup_rd *r, struct lup_ckpt_graphs *g)
{
        lup_rd_u32(r, &g->n_off);
        if (r->err || g->n_off > LUP_CKPT_MAX_GRAPH_OFF || (uint64_t)g->n_off * 8 != lup_rd_left(r))
                return -EBADMSG;
        if (g->n_off && !(g->off = calloc(g->n_off, sizeof(*g->off))))
                return -ENOMEM;
        for (uint32_t i = 0; i < g->n_off; i++) {
                struct lup_ckpt_goff *o = &g->off[i];
                lup_rd_u32(r, &o->graph);
                lup_rd_u32(r, &o->node);
                if (r->err || o->graph >= g->n_graphs || g->graphs[o->graph].role != LUP_GRAPH_ROLE_EXEC ||
                    o->node >= g->graphs[o->graph].n_nodes)
                        return -EBADMSG;
                uint8_t t = g->graphs[o->graph].nodes[o->node].type;
                if (t != LUP_GNODE_KERNEL && t != LUP_GNODE_MEMSET && t != LUP_GNODE_MEMCPY)
                        return -EBADMSG;
        }
        return 0;
}

static int decode_body(struct lup_rd *r, struct lup_ckpt_graphs *g, uint32_t version)
{
        lup_rd_u32(r, &g->n_graphs);
        if (r->err || g->n_graphs > LUP_CKPT_MAX_GRAPHS || (uint64_t)g->n_graphs * 41 > lup_rd_left(r))
                return -EBADMSG;
        if (g->n_graphs && !(g->graphs = calloc(g->n_graphs, sizeof(*g->graphs))))
                return -ENOMEM;
        for (uint32_t i = 0; i < g->n_graphs; i++) {
                int rc = get_graph(r, &g->graphs[i], g->n_graphs);
                if (rc < 0)
                        return rc;
        }
        lup_rd_u32(r, &g->n_caps);
        uint64_t rest = version >= 2 ? 4 : 0; /* the disabled nodes' count after the captures */
        if (r->err || g->n_caps > LUP_CKPT_MAX_CAPTURES || (uint64_t)g->n_caps * 24 + rest > lup_rd_left(r) ||
            (version < 2 && (uint64_t)g->n_caps * 24 != lup_rd_left(r)))
                return -EBADMSG;
        if (g->n_caps && !(g->caps = calloc(g->n_caps, sizeof(*g->caps))))
                return -ENOMEM;
        for (uint32_t i = 0; i < g->n_caps; i++) {
                lup_rd_u64(r, &g->caps[i].stream);
                lup_rd_u64(r, &g->caps[i].graph);
                lup_rd_u64(r, &g->caps[i].cid);
        }
        if (version >= 2) {
                int rc = decode_off(r, g);
                if (rc < 0)
                        return rc;
        }
        return lup_rd_finish(r) < 0 ? -EBADMSG : 0;
}

int lup_ckpt_graphs_decode(const uint8_t *p, size_t n, struct lup_ckpt_graphs *ret, const char **ret_why)
{
        struct lup_ckpt_graphs g = { 0 };
        struct lup_rd r;
        uint32_t version;
        int rc = lup_sealed_open(&lup_ckpt_graphs_kind, p, n, &r, &version, ret_why);
        if (rc < 0)
                return rc;
        /* the kernel parameter bytes point into a copy of the object */
        if (!(g.raw = malloc(n ? n : 1))) {
                *ret_why = "out of memory";
                return -ENOMEM;
        }
        memcpy(g.raw, p, n);
        r = lup_rd_init(g.raw + (r.p - p) + r.off, lup_rd_left(&r));
        g.version = version;
        rc = decode_body(&r, &g, version);
        if (rc < 0) {
                lup_ckpt_graphs_free(&g);
                *ret_why = rc == -ENOMEM ? "out of memory" : lup_ckpt_graphs_kind.why_damaged;
                return rc;
        }
        *ret = g;
        *ret_why = NULL;
        return 0;
}

void lup_ckpt_graphs_free(struct lup_ckpt_graphs *g)
{
        if (!g)
                return;
        for (uint32_t i = 0; g->graphs && i < g->n_graphs; i++) {
                free(g->graphs[i].nodes);
                free(g->graphs[i].edges);
        }
        free(g->graphs);
        free(g->caps);
        free(g->off);
        free(g->raw);
        memset(g, 0, sizeof(*g));
}
