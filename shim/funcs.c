/* SPDX-License-Identifier: MIT */
#include "funcs.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "client.h"
#include "u64map.h"

struct func {
        bool have_info;
        uint32_t n_params, param_bytes;
        uint32_t *params;
        int32_t attr[CU_FUNC_ATTRIBUTE_MAX];
        uint32_t attr_res[CU_FUNC_ATTRIBUTE_MAX];
        char *name;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct lup_u64map funcs = { .limit = LUP_MAX_HANDLES };

static struct func *get_locked(uint64_t f, bool create)
{
        uint64_t v;
        if (lup_u64map_get(&funcs, f, &v))
                return (struct func *)(uintptr_t)v;
        if (!create)
                return NULL;
        struct func *fn = calloc(1, sizeof(*fn));
        if (!fn || lup_u64map_put(&funcs, f, (uint64_t)(uintptr_t)fn) < 0) {
                free(fn);
                return NULL;
        }
        return fn;
}

static int decode_info(struct func *fn, const uint8_t *p, size_t n)
{
        struct lup_rd r = lup_rd_init(p, n);
        uint32_t np, na;
        lup_rd_u32(&r, &np);
        if (r.err || np > LUP_MAX_PARAMS)
                return -EBADMSG;
        uint32_t *params = calloc(np ? np * 2 : 1, sizeof(*params));
        if (!params)
                return -ENOMEM;
        uint32_t bytes = 0;
        for (uint32_t i = 0; i < np; i++) {
                lup_rd_u32(&r, &params[2 * i]);
                lup_rd_u32(&r, &params[2 * i + 1]);
                uint64_t end = (uint64_t)params[2 * i] + params[2 * i + 1];
                if (end > LUP_MAX_PARAM_BYTES)
                        r.err = -EBADMSG;
                if (end > bytes)
                        bytes = (uint32_t)end;
        }
        lup_rd_u32(&r, &na);
        int32_t attr[CU_FUNC_ATTRIBUTE_MAX] = { 0 };
        uint32_t res[CU_FUNC_ATTRIBUTE_MAX];
        for (int a = 0; a < CU_FUNC_ATTRIBUTE_MAX; a++)
                res[a] = CUDA_ERROR_INVALID_VALUE;
        for (uint32_t a = 0; a < na && !r.err; a++) {
                int32_t v;
                uint32_t rr;
                lup_rd_i32(&r, &v);
                lup_rd_u32(&r, &rr);
                if (a < CU_FUNC_ATTRIBUTE_MAX) {
                        attr[a] = v;
                        res[a] = rr;
                }
        }
        if (lup_rd_finish(&r) < 0) {
                free(params);
                return -EBADMSG;
        }
        /* A function's layout never changes, and launches on other threads
         * may be reading the first copy: keep it, refresh only attributes. */
        if (fn->params) {
                free(params);
        } else {
                fn->params = params;
                fn->n_params = np;
                fn->param_bytes = bytes;
        }
        memcpy(fn->attr, attr, sizeof(attr));
        memcpy(fn->attr_res, res, sizeof(res));
        fn->have_info = true;
        return 0;
}

/* Fetches the layout and attributes outside the lock (it is a round trip). */
static CUresult fetch(uint64_t f, struct func **ret)
{
        pthread_mutex_lock(&lock);
        struct func *fn = get_locked(f, true);
        bool have = fn && fn->have_info;
        pthread_mutex_unlock(&lock);
        if (!fn)
                return CUDA_ERROR_OUT_OF_MEMORY;
        if (!have) {
                size_t cap = 16 + LUP_MAX_PARAMS * 8 + CU_FUNC_ATTRIBUTE_MAX * 8, n = 0;
                uint8_t *rep = malloc(cap), a[8];
                if (!rep)
                        return CUDA_ERROR_OUT_OF_MEMORY;
                lup_put64(a, f);
                CUresult r = lupc_call(LUP_OP_FUNC_INFO, LUPC_SYNC | LUPC_CTX, a, sizeof(a), rep, cap, &n);
                if (r == CUDA_SUCCESS) {
                        pthread_mutex_lock(&lock);
                        int rc = fn->have_info ? 0 : decode_info(fn, rep, n);
                        pthread_mutex_unlock(&lock);
                        if (rc < 0)
                                r = rc == -ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY : lupc_protocol_error("FUNC_INFO");
                }
                free(rep);
                if (r != CUDA_SUCCESS)
                        return r;
        }
        *ret = fn;
        return CUDA_SUCCESS;
}

CUresult lupc_func_layout(uint64_t f, struct lupc_func_layout *ret)
{
        struct func *fn;
        CUresult r = fetch(f, &fn);
        if (r != CUDA_SUCCESS)
                return r;
        pthread_mutex_lock(&lock);
        *ret = (struct lupc_func_layout){ .n_params = fn->n_params, .param_bytes = fn->param_bytes,
                                          .params = fn->params,
                                          .max_threads = fn->attr[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK] };
        pthread_mutex_unlock(&lock);
        return CUDA_SUCCESS;
}

CUresult lupc_func_attr(uint64_t f, int attrib, int *ret)
{
        struct func *fn;
        if (attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = fetch(f, &fn);
        if (r != CUDA_SUCCESS)
                return r;
        pthread_mutex_lock(&lock);
        r = (CUresult)fn->attr_res[attrib];
        if (r == CUDA_SUCCESS)
                *ret = fn->attr[attrib];
        pthread_mutex_unlock(&lock);
        return r;
}

void lupc_func_invalidate(uint64_t f)
{
        pthread_mutex_lock(&lock);
        struct func *fn = get_locked(f, false);
        if (fn)
                fn->have_info = false; /* the old layout array stays valid for racing readers until refetched */
        pthread_mutex_unlock(&lock);
}

void lupc_func_set_name(uint64_t f, const char *name)
{
        pthread_mutex_lock(&lock);
        struct func *fn = get_locked(f, true);
        if (fn && !fn->name)
                fn->name = strdup(name);
        pthread_mutex_unlock(&lock);
}

const char *lupc_func_name(uint64_t f)
{
        pthread_mutex_lock(&lock);
        struct func *fn = get_locked(f, false);
        const char *n = fn ? fn->name : NULL;
        pthread_mutex_unlock(&lock);
        return n;
}
