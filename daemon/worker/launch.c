/* SPDX-License-Identifier: MIT */
/*
 * Kernel launches and function information. The parameter layout of each
 * function comes from the driver (cuFuncGetParamInfo), once; a launch frame
 * carries the parameters packed at those offsets, and must be exactly as
 * long as the layout says.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "worker/session.h"

/* Fetches and caches the parameter layout of a function. */
static CUresult param_layout(struct lupw_session *s, struct lupw_handle_ent *e, CUfunction fn)
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

int lupw_op_func_info(struct lupw_session *s, const struct lup_hdr *h, const uint8_t *p)
{
        struct lup_rd r = lup_rd_init(p, h->len);
        uint64_t id;
        lup_rd_u64(&r, &id);
        if (lup_rd_finish(&r) < 0 || !(h->flags & LUP_F_SYNC)) {
                lupw_set_why(s, "malformed FUNC_INFO frame");
                return -EBADMSG;
        }
        CUresult st = lupw_take_latched(s);
        if (st == CUDA_SUCCESS)
                st = lupw_bind_ctx(s, h->ctx);
        struct lupw_handle_ent *e = NULL;
        CUfunction fn = NULL;
        if (st == CUDA_SUCCESS)
                st = lupw_function(s, id, &e, &fn);
        if (st == CUDA_SUCCESS)
                st = param_layout(s, e, fn);
        if (st != CUDA_SUCCESS)
                return lupw_reply(s, h, 0, st, NULL, 0);

        size_t cap = 16 + (size_t)e->n_params * 8 + CU_FUNC_ATTRIBUTE_MAX * 8;
        uint8_t *buf = malloc(cap);
        if (!buf)
                return lupw_reply(s, h, 0, CUDA_ERROR_OUT_OF_MEMORY, NULL, 0);
        struct lup_wr w = lup_wr_init(buf, cap);
        lup_wr_u32(&w, e->n_params);
        for (uint32_t i = 0; i < e->n_params; i++) {
                lup_wr_u32(&w, e->params[2 * i]);
                lup_wr_u32(&w, e->params[2 * i + 1]);
        }
        lup_wr_u32(&w, CU_FUNC_ATTRIBUTE_MAX);
        for (int a = 0; a < CU_FUNC_ATTRIBUTE_MAX; a++) {
                int v = 0;
                CUresult r2 = s->be.fn.cuFuncGetAttribute(&v, (CUfunction_attribute)a, fn);
                lup_wr_i32(&w, r2 == CUDA_SUCCESS ? v : 0);
                lup_wr_u32(&w, (uint32_t)r2);
        }
        int rc = lupw_reply(s, h, 0, CUDA_SUCCESS, buf, w.len);
        free(buf);
        return rc;
}

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

int lupw_op_launch(struct lupw_session *s, const struct lup_hdr *h, const uint8_t *p)
{
        struct lup_rd r = lup_rd_init(p, h->len);
        uint64_t fid, stream;
        uint32_t dims[6], shmem, flags, n_attrs, pbytes;
        CUlaunchAttribute attrs[LUP_MAX_LAUNCH_ATTRS + 1]; /* + the cooperative flag */
        const uint8_t *params;

        lup_rd_u64(&r, &fid);
        for (int i = 0; i < 6; i++)
                lup_rd_u32(&r, &dims[i]);
        lup_rd_u32(&r, &shmem);
        lup_rd_u64(&r, &stream);
        lup_rd_u32(&r, &flags);
        lup_rd_u32(&r, &n_attrs);
        if (r.err || n_attrs > LUP_MAX_LAUNCH_ATTRS || (flags & ~LUP_LAUNCH_COOPERATIVE)) {
                lupw_set_why(s, "malformed LAUNCH frame");
                return -EBADMSG;
        }
        memset(attrs, 0, sizeof(attrs));
        for (uint32_t i = 0; i < n_attrs; i++) {
                uint32_t id;
                lup_rd_u32(&r, &id);
                attrs[i].id = (CUlaunchAttributeID)id;
                lup_rd_copy(&r, &attrs[i].value, 64);
        }
        lup_rd_u32(&r, &pbytes);
        lup_rd_bytes(&r, pbytes, &params);
        if (lup_rd_finish(&r) < 0 || pbytes > LUP_MAX_PARAM_BYTES) {
                lupw_set_why(s, "malformed LAUNCH frame");
                return -EBADMSG;
        }
        bool sync = h->flags & LUP_F_SYNC;
        CUresult st = sync ? lupw_take_latched(s) : CUDA_SUCCESS;
        for (uint32_t i = 0; i < n_attrs && st == CUDA_SUCCESS; i++)
                if (!attr_allowed(attrs[i].id))
                        st = CUDA_ERROR_NOT_SUPPORTED;
        if (st == CUDA_SUCCESS)
                st = lupw_bind_ctx(s, h->ctx);
        struct lupw_handle_ent *e = NULL;
        CUfunction fn = NULL;
        if (st == CUDA_SUCCESS)
                st = lupw_function(s, fid, &e, &fn);
        if (st == CUDA_SUCCESS)
                st = param_layout(s, e, fn);
        CUstream cs = NULL;
        if (st == CUDA_SUCCESS)
                st = lupw_stream(s, stream, &cs);
        if (st == CUDA_SUCCESS && pbytes != e->param_bytes)
                st = CUDA_ERROR_INVALID_VALUE; /* the shim packs by the same layout */
        if (st == CUDA_SUCCESS) {
                /* Scratch for the hot path, no allocation per launch. A worker
                 * process serves one session on one thread, so file-scope
                 * buffers are not shared with anyone. The copy is aligned:
                 * parameters hold doubles and 16-byte vectors. */
                static _Alignas(16) uint8_t pbuf[LUP_MAX_PARAM_BYTES + 16];
                static void *kparams[LUP_MAX_PARAMS];
                memcpy(pbuf, params, pbytes);
                for (uint32_t i = 0; i < e->n_params; i++) {
                        kparams[i] = pbuf + e->params[2 * i];
                        /* a pointer to a module global moved by a restore */
                        if (s->xlate.n && e->params[2 * i + 1] == 8) {
                                uint64_t v;
                                memcpy(&v, kparams[i], 8);
                                v = lupw_xlate(s, v);
                                memcpy(kparams[i], &v, 8);
                        }
                }
                if (n_attrs || (flags & LUP_LAUNCH_COOPERATIVE)) {
                        CUlaunchConfig cfg = {
                                .gridDimX = dims[0], .gridDimY = dims[1], .gridDimZ = dims[2],
                                .blockDimX = dims[3], .blockDimY = dims[4], .blockDimZ = dims[5],
                                .sharedMemBytes = shmem, .hStream = cs, .attrs = attrs, .numAttrs = n_attrs,
                        };
                        if (flags & LUP_LAUNCH_COOPERATIVE) {
                                attrs[n_attrs].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
                                attrs[n_attrs].value.cooperative = 1;
                                cfg.numAttrs++;
                        }
                        st = s->be.fn.cuLaunchKernelEx(&cfg, fn, kparams, NULL);
                } else {
                        st = s->be.fn.cuLaunchKernel(fn, dims[0], dims[1], dims[2], dims[3], dims[4],
                                                     dims[5], shmem, cs, kparams, NULL);
                }
        }
        if (lup_trace_level() >= 1)
                lup_tracef("session %s seq %llu launch -> %d", s->name, (unsigned long long)h->seq, (int)st);
        if (sync)
                return lupw_reply(s, h, 0, st, NULL, 0);
        lupw_latch(s, st, "cuLaunchKernel");
        return 0;
}

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
