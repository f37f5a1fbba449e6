/* SPDX-License-Identifier: MIT */
/* Context-local storage and context ids; see ctx_local.h. */
#include <pthread.h>
#include <stdlib.h>

#include "client.h"
#include "ctx_local.h"
#include "log.h"
#include "u64map.h"

/* The runtime keeps a handful of keys per context (one per runtime copy in
 * the process: libcudart, and the copies inside cuBLAS, cuBLASLt, cuDNN),
 * read hundreds of times: a short array scanned under a mutex is enough. */
struct cls_entry {
        uint64_t ctx;
        void *key;
        void *value;
        lupc_cls_dtor dtor;
};

#define CLS_MAX 1024

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct cls_entry entries[CLS_MAX];
static size_t n_entries;
static struct lup_u64map uids = { .limit = LUP_MAX_HANDLES }; /* ctx handle -> unique id */
static uint64_t next_uid = 1;

/* NULL and (CUcontext)-1 both name the calling thread's current context. */
static CUresult resolve(CUcontext ctx, uint64_t *ret)
{
        uint64_t id = (uint64_t)(uintptr_t)ctx;

        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (id == 0 || id == UINT64_MAX)
                id = lupc_ctx_current();
        if (!id || !lupc_ctx_known(id))
                return CUDA_ERROR_INVALID_CONTEXT;
        *ret = id;
        return CUDA_SUCCESS;
}

static struct cls_entry *find(uint64_t ctx, void *key)
{
        for (size_t i = 0; i < n_entries; i++)
                if (entries[i].ctx == ctx && entries[i].key == key)
                        return &entries[i];
        return NULL;
}

CUresult lupc_cls_put(CUcontext ctx, void *key, void *value, lupc_cls_dtor dtor)
{
        uint64_t id;
        CUresult r = resolve(ctx, &id);

        if (r != CUDA_SUCCESS)
                return r;
        pthread_mutex_lock(&lock);
        /* driver 580 refuses a key the context already holds */
        if (find(id, key)) {
                r = CUDA_ERROR_INVALID_HANDLE;
        } else if (n_entries == CLS_MAX) {
                r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
                entries[n_entries++] = (struct cls_entry){ .ctx = id, .key = key, .value = value, .dtor = dtor };
        }
        pthread_mutex_unlock(&lock);
        return r;
}

CUresult lupc_cls_delete(CUcontext ctx, void *key)
{
        uint64_t id;
        CUresult r = resolve(ctx, &id);

        if (r != CUDA_SUCCESS)
                return r;
        pthread_mutex_lock(&lock);
        struct cls_entry *e = find(id, key);
        if (e)
                *e = entries[--n_entries];
        pthread_mutex_unlock(&lock);
        /* the driver answers INVALID_HANDLE for a key it does not hold, and
         * does not run the destructor on delete */
        return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult lupc_cls_get(void **value, CUcontext ctx, void *key)
{
        uint64_t id;
        CUresult r;

        if (!value)
                return CUDA_ERROR_INVALID_VALUE;
        if ((r = resolve(ctx, &id)) != CUDA_SUCCESS)
                return r;
        pthread_mutex_lock(&lock);
        struct cls_entry *e = find(id, key);
        if (e)
                *value = e->value;
        pthread_mutex_unlock(&lock);
        if (lup_trace_level() >= 3)
                lup_tracef("export table CLS get ctx %p key %p -> %s", (void *)ctx, key, e ? "found" : "missing");
        return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; /* *value untouched */
}

void lupc_ctx_local_gone(uint64_t ctx)
{
        struct cls_entry gone[CLS_MAX];
        size_t n = 0;

        pthread_mutex_lock(&lock);
        for (size_t i = 0; i < n_entries;) {
                if (entries[i].ctx == ctx) {
                        gone[n++] = entries[i];
                        entries[i] = entries[--n_entries];
                } else {
                        i++;
                }
        }
        lup_u64map_del(&uids, ctx, NULL);
        pthread_mutex_unlock(&lock);
        /* outside the lock: a destructor may call back into the driver API */
        for (size_t i = 0; i < n; i++)
                if (gone[i].dtor)
                        gone[i].dtor((CUcontext)(uintptr_t)ctx, gone[i].key, gone[i].value);
}

CUresult lupc_ctx_uid(uint64_t ctx, uint64_t *ret)
{
        uint64_t id, uid;
        CUresult r = resolve((CUcontext)(uintptr_t)ctx, &id);

        if (r != CUDA_SUCCESS)
                return r;
        pthread_mutex_lock(&lock);
        if (!lup_u64map_get(&uids, id, &uid)) {
                uid = next_uid++;
                if (lup_u64map_put(&uids, id, uid) < 0)
                        r = CUDA_ERROR_OUT_OF_MEMORY;
        }
        pthread_mutex_unlock(&lock);
        if (r == CUDA_SUCCESS)
                *ret = uid;
        return r;
}
