/* SPDX-License-Identifier: MIT */
/*
 * Kernel nodes of the explicit graph API (LUP_OP_GRAPH_KERNEL): a node
 * added, its parameters set, or set in an exec. The payload is a prefix
 * (node id, graph or exec id, mode) and then a LAUNCH payload, parameters
 * packed by the function's layout as for a launch; module globals' addresses
 * are translated as in a launch.
 */
#define LUP_LOG_CAT LUP_LOGC_GPU
#include <errno.h>
#include <string.h>

#include "ctl_codec.h"
#include "log.h"
#include "worker/graphs.h"
#include "worker/session.h"

/* the prefix of the frame being executed (one session per worker, one thread) */
static struct {
        uint64_t node, target;
        uint32_t mode;
} gk;

static int gk_check(struct lupw_session *s, const struct lup_hdr *h, const uint8_t *p, union lupw_ctl_args *ret,
                    CUresult *ret_early)
{
        const char *why;
        struct lup_rd r = lup_rd_init(p, h->len);
        lup_rd_u64(&r, &gk.node);
        lup_rd_u64(&r, &gk.target);
        lup_rd_u32(&r, &gk.mode);
        if (r.err || gk.mode > LUP_GRAPH_KERNEL_EXEC_SET) {
                lupw_set_why(s, "malformed GRAPH_KERNEL frame");
                return -EBADMSG;
        }
        if (lup_launch_decode(p + LUP_GRAPH_KERNEL_PREFIX, h->len - LUP_GRAPH_KERNEL_PREFIX, &ret->launch, &why) < 0) {
                lupw_set_why(s, why);
                return -EBADMSG;
        }
        if (ret->launch.n_attrs || ret->launch.flags || ret->launch.stream)
                *ret_early = CUDA_ERROR_NOT_SUPPORTED; /* kernel nodes take no launch attributes here */
        return 0;
}

static CUresult params_of(struct lupw_session *s, const struct lup_launch *l, CUDA_KERNEL_NODE_PARAMS *p)
{
        static _Alignas(16) uint8_t pbuf[LUP_MAX_PARAM_BYTES + 16];
        static void *kparams[LUP_MAX_PARAMS];
        struct lupw_handle_ent *e;
        CUfunction fn;
        CUresult r = lupw_function(s, l->func, &e, &fn);
        if (r == CUDA_SUCCESS)
                r = lupw_param_layout(s, e, fn);
        if (r != CUDA_SUCCESS)
                return r;
        if (l->param_bytes != e->param_bytes)
                return CUDA_ERROR_INVALID_VALUE;
        memcpy(pbuf, l->params, l->param_bytes);
        for (uint32_t i = 0; i < e->n_params; i++) {
                kparams[i] = pbuf + e->params[2 * i];
                if (e->params[2 * i + 1] == 8 && s->obj.xlate.n) {
                        uint64_t v;
                        memcpy(&v, kparams[i], 8);
                        v = lupw_xlate(s, v);
                        memcpy(kparams[i], &v, 8);
                }
        }
        memset(p, 0, sizeof(*p));
        p->func = fn;
        p->gridDimX = l->grid[0], p->gridDimY = l->grid[1], p->gridDimZ = l->grid[2];
        p->blockDimX = l->block[0], p->blockDimY = l->block[1], p->blockDimZ = l->block[2];
        p->sharedMemBytes = l->shmem;
        p->kernelParams = e->n_params ? kparams : NULL;
        return CUDA_SUCCESS;
}

static CUresult gk_add(struct lupw_session *s, const CUDA_KERNEL_NODE_PARAMS *p)
{
        const struct lupw_backend *be = &s->be.fn;
        void *g;
        CUgraphNode n;
        struct lupw_handle_ent *ge = lupw_handle_ent(s, LUPW_H_GRAPH, gk.target);
        if (!ge || (ge->prov.flags & LUPW_GRAPH_CAPTURING) || lupw_handle(s, LUPW_H_GRAPH, gk.target, &g))
                return CUDA_ERROR_INVALID_VALUE;
        if (gk.node < LUP_FIRST_HANDLE_ID || (gk.node - LUP_FIRST_HANDLE_ID) % 16 ||
            lup_u64map_get(&s->obj.handles, gk.node, NULL))
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = be->cuGraphAddKernelNode_v2(&n, g, NULL, 0, p);
        if (r == CUDA_SUCCESS && (r = lupw_node_put(s, gk.node, n, gk.target)) != CUDA_SUCCESS)
                (void)be->cuGraphDestroyNode(n);
        return r;
}

static CUresult gk_exec_set(struct lupw_session *s, const CUDA_KERNEL_NODE_PARAMS *p)
{
        struct lupw_handle_ent *xe = lupw_handle_ent(s, LUPW_H_GRAPHEXEC, gk.target);
        struct lupw_exec *x = xe ? lupw_exec_get(s, (CUgraphExec)xe->real) : NULL;
        uint64_t v;
        if (!x || !lup_u64map_get(&x->nodes, gk.node, &v))
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = s->be.fn.cuGraphExecKernelNodeSetParams_v2((CUgraphExec)xe->real, (CUgraphNode)(uintptr_t)v, p);
        /* the exec's clone carries the change into a checkpoint */
        if (r == CUDA_SUCCESS)
                r = s->be.fn.cuGraphKernelNodeSetParams_v2((CUgraphNode)(uintptr_t)v, p);
        return r == CUDA_SUCCESS ? lupw_split_sync(s, x, gk.node, (CUgraphNode)(uintptr_t)v) : r;
}

static int gk_run(struct lupw_session *s, const struct lup_hdr *h, const union lupw_ctl_args *a, struct lup_wr *out,
                  CUresult *status)
{
        CUDA_KERNEL_NODE_PARAMS p;
        struct lupw_handle_ent *ne;
        if (*status != CUDA_SUCCESS) /* latched, or check() refused it: not executed */
                return 0;
        CUresult r = params_of(s, &a->launch, &p);
        if (r == CUDA_SUCCESS) {
                switch (gk.mode) {
                case LUP_GRAPH_KERNEL_ADD:
                        r = gk_add(s, &p);
                        break;
                case LUP_GRAPH_KERNEL_SET:
                        ne = lupw_handle_ent(s, LUPW_H_GRAPHNODE, gk.node);
                        r = ne ? s->be.fn.cuGraphKernelNodeSetParams_v2((CUgraphNode)ne->real, &p)
                               : CUDA_ERROR_INVALID_VALUE;
                        break;
                default:
                        r = gk_exec_set(s, &p);
                        break;
                }
        }
        *status = r;
        return 0;
}

const struct lupw_ctl_op lupw_ctl_graph_kernel = {
        .name = "cuGraphAddKernelNode",
        .sync = LUPW_SYNC_ONLY,
        .why_flag = "GRAPH_KERNEL must be synchronous",
        .need_ctx = true,
        .check = gk_check,
        .run = gk_run,
};

/* ---- LUP_OP_GRAPH_KERNEL_GET: a kernel node's parameters, as the client
 * named them (function id, module globals' client addresses) */

static uint64_t get_node_id;

static int gkg_check(struct lupw_session *s, const struct lup_hdr *h, const uint8_t *p, union lupw_ctl_args *ret,
                     CUresult *ret_early)
{
        struct lup_rd r = lup_rd_init(p, h->len);
        lup_rd_u64(&r, &get_node_id);
        if (lup_rd_finish(&r) < 0) {
                lupw_set_why(s, "malformed GRAPH_KERNEL_GET frame");
                return -EBADMSG;
        }
        return 0;
}

struct fn_hunt {
        struct lupw_session *s;
        CUfunction func;
        CUkernel kern;
        uint64_t id;
};

static void fn_of(uint64_t key, uint64_t val, void *ud)
{
        struct fn_hunt *h = ud;
        const struct lupw_handle_ent *e = (const struct lupw_handle_ent *)(uintptr_t)val;
        CUfunction f;
        if (h->id)
                return;
        if (e->kind == LUPW_H_FUNCTION && e->real == (void *)h->func)
                h->id = key;
        else if (e->kind == LUPW_H_KERNEL &&
                 (e->real == (void *)h->kern ||
                  (h->s->be.fn.cuKernelGetFunction(&f, (CUkernel)e->real) == CUDA_SUCCESS && f == h->func)))
                h->id = key;
}

static int gkg_run(struct lupw_session *s, const struct lup_hdr *h, const union lupw_ctl_args *a, struct lup_wr *out,
                   CUresult *status)
{
        if (*status != CUDA_SUCCESS) /* latched: not executed */
                return 0;
        struct lupw_handle_ent *ne = lupw_handle_ent(s, LUPW_H_GRAPHNODE, get_node_id), *fe;
        CUDA_KERNEL_NODE_PARAMS p;
        CUfunction fn;
        memset(&p, 0, sizeof(p));
        CUresult r = ne ? s->be.fn.cuGraphKernelNodeGetParams_v2((CUgraphNode)ne->real, &p) : CUDA_ERROR_INVALID_VALUE;
        struct fn_hunt fh = { .s = s, .func = p.func, .kern = p.kern };
        if (r == CUDA_SUCCESS) {
                lup_u64map_each(&s->obj.handles, fn_of, &fh);
                r = fh.id ? lupw_function(s, fh.id, &fe, &fn) : CUDA_ERROR_NOT_SUPPORTED;
        }
        if (r == CUDA_SUCCESS)
                r = lupw_param_layout(s, fe, fn);
        if (r == CUDA_SUCCESS && fe->n_params && !p.kernelParams)
                r = CUDA_ERROR_NOT_SUPPORTED;
        if (r != CUDA_SUCCESS) {
                *status = r;
                return 0;
        }
        lup_wr_u64(out, fh.id);
        lup_wr_u32(out, p.gridDimX), lup_wr_u32(out, p.gridDimY), lup_wr_u32(out, p.gridDimZ);
        lup_wr_u32(out, p.blockDimX), lup_wr_u32(out, p.blockDimY), lup_wr_u32(out, p.blockDimZ);
        lup_wr_u32(out, p.sharedMemBytes);
        lup_wr_u32(out, fe->param_bytes);
        uint8_t *b = lup_wr_reserve(out, fe->param_bytes);
        if (!b)
                return 0; /* out->err drops the session */
        memset(b, 0, fe->param_bytes);
        for (uint32_t i = 0; i < fe->n_params; i++) {
                uint32_t off = fe->params[2 * i], size = fe->params[2 * i + 1];
                memcpy(b + off, p.kernelParams[i], size);
                if (size == 8 && s->obj.xlate.n) {
                        uint64_t v;
                        memcpy(&v, b + off, 8);
                        v = lupw_unxlate(s, v);
                        memcpy(b + off, &v, 8);
                }
        }
        return 0;
}

_Static_assert(8 + 7 * 4 + 4 + LUP_MAX_PARAM_BYTES <= LUPW_FUNC_INFO_REPLY_MAX, "the reply fits dispatch's buffer");

const struct lupw_ctl_op lupw_ctl_graph_kernel_get = {
        .name = "cuGraphKernelNodeGetParams",
        .sync = LUPW_SYNC_ONLY,
        .why_flag = "GRAPH_KERNEL_GET must be synchronous",
        .need_ctx = true,
        .reply_cap = 8 + 7 * 4 + 4 + LUP_MAX_PARAM_BYTES,
        .check = gkg_check,
        .run = gkg_run,
};
