/* SPDX-License-Identifier: MIT */
/*
 * Kernel launches and function information. The parameter layout of each
 * function comes from the driver (cuFuncGetParamInfo), once; a launch frame
 * carries the parameters packed at those offsets, and must be exactly as
 * long as the layout says.
 */
#define LUP_LOG_CAT LUP_LOGC_GPU
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "worker/session.h"

/* Fetches and caches the parameter layout of a function. */
CUresult lupw_param_layout(struct lupw_session *s, struct lupw_handle_ent *e, CUfunction fn)
{
        uint32_t cap = 16, n = 0, bytes = 0;
        uint32_t *params;

        if (e->have_params)
                return CUDA_SUCCESS;
        params = malloc(cap * 2 * sizeof(*params));
        if (!params)
                return CUDA_ERROR_OUT_OF_MEMORY;
        for (;;) {
                size_t off = 0, size = 0;
                if (s->be.fn.cuFuncGetParamInfo(fn, n, &off, &size) != CUDA_SUCCESS)
                        break; /* past the last parameter */
                if (n == LUP_MAX_PARAMS || off + size > LUP_MAX_PARAM_BYTES) {
                        free(params);
                        return CUDA_ERROR_NOT_SUPPORTED;
                }
                if (n == cap) {
                        uint32_t *np = realloc(params, cap * 4 * sizeof(*params));
                        if (!np) {
                                free(params);
                                return CUDA_ERROR_OUT_OF_MEMORY;
                        }
                        params = np;
                        cap *= 2;
                }
                params[2 * n] = (uint32_t)off;
                params[2 * n + 1] = (uint32_t)size;
                if (off + size > bytes)
                        bytes = (uint32_t)(off + size);
                n++;
        }
        e->params = params;
        e->n_params = n;
        e->param_bytes = bytes;
        e->have_params = true;
        return CUDA_SUCCESS;
}

static int func_info_check(struct lupw_session *s, const struct lup_hdr *h, const uint8_t *p, union lupw_ctl_args *ret,
                           CUresult *ret_early)
{
        const char *why;
        if (lup_func_info_req_decode(p, h->len, &ret->func, &why) < 0) {
                lupw_set_why(s, why);
                return -EBADMSG;
        }
        return 0;
}

static int func_info_run(struct lupw_session *s, const struct lup_hdr *h, const union lupw_ctl_args *a,
                         struct lup_wr *out, CUresult *status)
{
        struct lupw_handle_ent *e = NULL;
        CUfunction fn = NULL;
        if (*status == CUDA_SUCCESS)
                *status = lupw_function(s, a->func, &e, &fn);
        if (*status == CUDA_SUCCESS)
                *status = lupw_param_layout(s, e, fn);
        if (*status != CUDA_SUCCESS)
                return 0;
        struct lup_func_info fi = { .n_params = e->n_params, .params = e->params, .n_attrs = CU_FUNC_ATTRIBUTE_MAX };
        for (int i = 0; i < CU_FUNC_ATTRIBUTE_MAX; i++) {
                int v = 0;
                CUresult r2 = s->be.fn.cuFuncGetAttribute(&v, (CUfunction_attribute)i, fn);
                fi.attr[i] = r2 == CUDA_SUCCESS ? v : 0;
                fi.attr_res[i] = (uint32_t)r2;
        }
        lup_func_info_encode(out, &fi); /* out->err, if any, drops the session */
        return 0;
}

_Static_assert(CU_FUNC_ATTRIBUTE_MAX <= LUP_FUNC_INFO_MAX_ATTRS, "FUNC_INFO sends every attribute");

/* the reply: the parameter layout (below LUP_MAX_PARAMS entries, see
 * param_layout()) and every attribute */
const struct lupw_ctl_op lupw_ctl_func_info = {
        .name = "FUNC_INFO",
        .sync = LUPW_SYNC_ONLY,
        .why_flag = "malformed FUNC_INFO frame",
        .need_ctx = true,
        .reply_cap = LUPW_FUNC_INFO_REPLY_MAX,
        .check = func_info_check,
        .run = func_info_run,
};

/* Launch attributes lupine passes through: none of them holds a handle or
 * a host pointer that would need translating. */
static bool attr_allowed(uint32_t id)
{
        switch (id) {
        case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
        case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
        case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
        case CU_LAUNCH_ATTRIBUTE_PRIORITY:
        case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
        case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
        case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
                return true;
        default:
                return false;
        }
}

/* An attribute lupine does not pass through is found before the context
 * is needed, and reported after a latched error (*ret_early). */
static int launch_check(struct lupw_session *s, const struct lup_hdr *h, const uint8_t *p, union lupw_ctl_args *ret,
                        CUresult *ret_early)
{
        const char *why;
        if (lup_launch_decode(p, h->len, &ret->launch, &why) < 0) {
                lupw_set_why(s, why);
                return -EBADMSG;
        }
        for (uint32_t i = 0; i < ret->launch.n_attrs; i++)
                if (!attr_allowed(ret->launch.attrs[i].id))
                        *ret_early = CUDA_ERROR_NOT_SUPPORTED;
        return 0;
}

/* The parameters as the driver takes them: copied (aligned: parameters
 * hold doubles and 16-byte vectors), pointers to module globals a restore
 * moved translated. Scratch for the hot path, no allocation per launch. A
 * worker process serves one session on one thread, so file-scope buffers
 * are not shared with anyone. */
static void **kernel_params(struct lupw_session *s, const struct lupw_handle_ent *e, const struct lup_launch *l)
{
        static _Alignas(16) uint8_t pbuf[LUP_MAX_PARAM_BYTES + 16];
        static void *kparams[LUP_MAX_PARAMS];
        memcpy(pbuf, l->params, l->param_bytes);
        for (uint32_t i = 0; i < e->n_params; i++) {
                kparams[i] = pbuf + e->params[2 * i];
                if (s->obj.xlate.n && e->params[2 * i + 1] == 8) {
                        uint64_t v;
                        memcpy(&v, kparams[i], 8);
                        v = lupw_xlate(s, v);
                        memcpy(kparams[i], &v, 8);
                }
        }
        return kparams;
}

static CUresult launch_ex(struct lupw_session *s, CUfunction fn, const struct lup_launch *l, CUstream cs,
                          void **kparams)
{
        CUlaunchAttribute attrs[LUP_MAX_LAUNCH_ATTRS + 1]; /* + the cooperative flag */
        uint32_t n = l->n_attrs;
        memset(attrs, 0, sizeof(attrs));
        for (uint32_t i = 0; i < n; i++) {
                attrs[i].id = (CUlaunchAttributeID)l->attrs[i].id;
                memcpy(&attrs[i].value, l->attrs[i].value, LUP_LAUNCH_ATTR_VALUE);
        }
        if (l->flags & LUP_LAUNCH_COOPERATIVE) {
                attrs[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
                attrs[n].value.cooperative = 1;
                n++;
        }
        CUlaunchConfig cfg = {
                .gridDimX = l->grid[0],
                .gridDimY = l->grid[1],
                .gridDimZ = l->grid[2],
                .blockDimX = l->block[0],
                .blockDimY = l->block[1],
                .blockDimZ = l->block[2],
                .sharedMemBytes = l->shmem,
                .hStream = cs,
                .attrs = attrs,
                .numAttrs = n,
        };
        return s->be.fn.cuLaunchKernelEx(&cfg, fn, kparams, NULL);
}

static int launch_run(struct lupw_session *s, const struct lup_hdr *h, const union lupw_ctl_args *a, struct lup_wr *out,
                      CUresult *status)
{
        const struct lup_launch *l = &a->launch;
        CUresult st = *status;
        struct lupw_handle_ent *e = NULL;
        CUfunction fn = NULL;
        CUstream cs = NULL;

        if (st == CUDA_SUCCESS)
                st = lupw_function(s, l->func, &e, &fn);
        if (st == CUDA_SUCCESS)
                st = lupw_param_layout(s, e, fn);
        if (st == CUDA_SUCCESS)
                st = lupw_stream(s, l->stream, &cs);
        if (st == CUDA_SUCCESS && l->param_bytes != e->param_bytes)
                st = CUDA_ERROR_INVALID_VALUE; /* the shim packs by the same layout */
        if (st == CUDA_SUCCESS) {
                void **kparams = kernel_params(s, e, l);
                if (l->n_attrs || (l->flags & LUP_LAUNCH_COOPERATIVE))
                        st = launch_ex(s, fn, l, cs, kparams);
                else
                        st = s->be.fn.cuLaunchKernel(fn, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1],
                                                     l->block[2], l->shmem, cs, kparams, NULL);
        }
        if (lup_trace_level() >= 1)
                lup_tracef("session %s seq %llu launch -> %d", s->name, (unsigned long long)h->seq, (int)st);
        *status = st;
        return 0;
}

/* the shim sends launches async; a sync one is answered like any call */
const struct lupw_ctl_op lupw_ctl_launch = {
        .name = "cuLaunchKernel",
        .sync = LUPW_SYNC_EITHER,
        .need_ctx = true,
        .check = launch_check,
        .run = launch_run,
};

/*
 * cuOccupancyMaxActiveClusters, with the launch configuration sent flat:
 * the dimensions, the dynamic shared memory, and the two attributes that
 * bear on the answer (cluster dimensions, cluster scheduling policy).
 */
CUresult lupw_lupOccupancyMaxActiveClusters(struct lupw_session *s, int *numClusters, CUfunction func,
                                            unsigned int gridX, unsigned int gridY, unsigned int gridZ,
                                            unsigned int blockX, unsigned int blockY, unsigned int blockZ,
                                            unsigned int smem, unsigned int clusterX, unsigned int clusterY,
                                            unsigned int clusterZ, unsigned int policy, CUstream hStream)
{
        CUlaunchAttribute attrs[2];
        unsigned n = 0;

        if (clusterX) {
                attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
                attrs[n].value.clusterDim.x = clusterX;
                attrs[n].value.clusterDim.y = clusterY;
                attrs[n].value.clusterDim.z = clusterZ;
                n++;
        }
        if (policy) {
                attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
                attrs[n].value.clusterSchedulingPolicyPreference = (CUclusterSchedulingPolicy)policy;
                n++;
        }
        CUlaunchConfig cfg = {
                .gridDimX = gridX, .gridDimY = gridY, .gridDimZ = gridZ,
                .blockDimX = blockX, .blockDimY = blockY, .blockDimZ = blockZ,
                .sharedMemBytes = smem, .hStream = hStream, .attrs = n ? attrs : NULL, .numAttrs = n,
        };
        return s->be.fn.cuOccupancyMaxActiveClusters(numClusters, func, &cfg);
}
