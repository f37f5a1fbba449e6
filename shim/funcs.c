/* SPDX-License-Identifier: MIT */
#include "funcs.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "client.h"
#include "ctl_codec.h"
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

_Static_assert(CU_FUNC_ATTRIBUTE_MAX <= LUP_FUNC_INFO_MAX_ATTRS, "FUNC_INFO keeps every attribute the shim knows");

static int decode_info(struct func *fn, const uint8_t *p, size_t n)
{
        struct lup_func_info fi;
        const char *why;
        int rc = lup_func_info_decode(p, n, &fi, &why);
        if (rc < 0)
                return rc;
        /* A function's layout never changes, and launches on other threads
         * may be reading the first copy: keep it, refresh only attributes. */
        if (fn->params) {
                free(fi.params);
        } else {
                fn->params = fi.params;
                fn->n_params = fi.n_params;
                fn->param_bytes = fi.param_bytes;
        }
        /* attributes the worker did not send read as unsupported */
        for (uint32_t a = 0; a < CU_FUNC_ATTRIBUTE_MAX; a++) {
                fn->attr[a] = a < fi.n_attrs ? fi.attr[a] : 0;
                fn->attr_res[a] = a < fi.n_attrs ? fi.attr_res[a] : CUDA_ERROR_INVALID_VALUE;
        }
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
                uint8_t *rep = malloc(cap), a[LUP_FUNC_INFO_REQ_SIZE];
                if (!rep)
                        return CUDA_ERROR_OUT_OF_MEMORY;
                lup_func_info_req_encode(a, f);
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
