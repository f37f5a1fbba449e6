/* SPDX-License-Identifier: MIT */
/*
 * Client-side shadow state: the device snapshot, the allocation map, the
 * per-thread context stack and primary-context bookkeeping. Everything here
 * answers queries that a training loop makes hundreds of thousands of times
 * (cuCtxGetDevice, cuDevicePrimaryCtxGetState, ...), without the network.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

static struct lupc_device *devices;
static int n_devices;
static uint64_t arena_base, arena_size;

void lupc_set_devices(struct lupc_device *devs, int n)
{
        devices = devs;
        n_devices = n;
}

int lupc_device_count(void)
{
        return n_devices;
}

const struct lupc_device *lupc_device(int ordinal)
{
        if (ordinal < 0 || ordinal >= n_devices)
                return NULL;
        return &devices[ordinal];
}

void lupc_set_arena(uint64_t base, uint64_t size)
{
        arena_base = base;
        arena_size = size;
}

bool lupc_in_arena(uint64_t p)
{
        return p >= arena_base && p - arena_base < arena_size;
}

/* ---- allocations: a sorted array, looked up by binary search */

static pthread_rwlock_t alloc_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct lupc_alloc_info *allocs;
static size_t n_allocs, cap_allocs;

/* index of the last allocation with base <= p, or -1 */
static long alloc_floor(uint64_t p)
{
        size_t lo = 0, hi = n_allocs;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (allocs[mid].base <= p)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return (long)lo - 1;
}

int lupc_shadow_add(uint64_t base, uint64_t size, uint64_t ctx, int device)
{
        pthread_rwlock_wrlock(&alloc_lock);
        if (n_allocs == cap_allocs) {
                size_t ncap = cap_allocs ? cap_allocs * 2 : 64;
                struct lupc_alloc_info *n = realloc(allocs, ncap * sizeof(*n));
                if (!n) {
                        pthread_rwlock_unlock(&alloc_lock);
                        return -ENOMEM;
                }
                allocs = n;
                cap_allocs = ncap;
        }
        size_t at = (size_t)(alloc_floor(base) + 1);
        memmove(&allocs[at + 1], &allocs[at], (n_allocs - at) * sizeof(*allocs));
        allocs[at] = (struct lupc_alloc_info){ .base = base, .size = size, .ctx = ctx, .device = device };
        n_allocs++;
        pthread_rwlock_unlock(&alloc_lock);
        return 0;
}

int lupc_shadow_remove(uint64_t base, struct lupc_alloc_info *ret)
{
        int rc = -ENOENT;
        pthread_rwlock_wrlock(&alloc_lock);
        long i = alloc_floor(base);
        if (i >= 0 && allocs[i].base == base) {
                if (ret)
                        *ret = allocs[i];
                memmove(&allocs[i], &allocs[i + 1], (n_allocs - (size_t)i - 1) * sizeof(*allocs));
                n_allocs--;
                rc = 0;
        }
        pthread_rwlock_unlock(&alloc_lock);
        return rc;
}

bool lupc_shadow_find(uint64_t p, struct lupc_alloc_info *ret)
{
        bool found = false;
        pthread_rwlock_rdlock(&alloc_lock);
        long i = alloc_floor(p);
        if (i >= 0 && p - allocs[i].base < allocs[i].size) {
                *ret = allocs[i];
                found = true;
        }
        pthread_rwlock_unlock(&alloc_lock);
        return found;
}

CUresult lupc_check_devptr(uint64_t p)
{
        struct lupc_alloc_info a;
        return lupc_shadow_find(p, &a) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult lupc_check_range(uint64_t p, uint64_t count, uint64_t mul)
{
        struct lupc_alloc_info a;
        uint64_t n;

        if (__builtin_mul_overflow(count, mul, &n) || n > LUP_MAX_COPY)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_shadow_find(p, &a))
                return CUDA_ERROR_INVALID_VALUE;
        if (n > a.size - (p - a.base))
                return CUDA_ERROR_INVALID_VALUE;
        return CUDA_SUCCESS;
}

/* ---- contexts */

#define LUPC_CTX_STACK 64

static __thread uint64_t ctx_stack[LUPC_CTX_STACK];
static __thread int ctx_depth;

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static struct lupc_ctx_info ctxs[LUP_MAX_CONTEXTS];
static int n_ctxs;
static uint64_t next_ctx_id = LUPC_FIRST_CTX_ID;

struct primary_state {
        int retains;
        unsigned flags;
};
static struct primary_state primaries[LUP_MAX_DEVICES];

uint64_t lupc_ctx_current(void)
{
        return ctx_depth ? ctx_stack[ctx_depth - 1] : 0;
}

void lupc_ctx_set_current(uint64_t id)
{
        if (id == 0) {
                /* cuCtxSetCurrent(NULL) pops the current context if there is one */
                if (ctx_depth)
                        ctx_depth--;
                return;
        }
        if (ctx_depth == 0)
                ctx_depth = 1;
        ctx_stack[ctx_depth - 1] = id;
}

int lupc_ctx_push(uint64_t id)
{
        if (ctx_depth == LUPC_CTX_STACK)
                return -ENOSPC;
        ctx_stack[ctx_depth++] = id;
        return 0;
}

uint64_t lupc_ctx_pop(void)
{
        return ctx_depth ? ctx_stack[--ctx_depth] : 0;
}

bool lupc_ctx_lookup(uint64_t id, struct lupc_ctx_info *ret)
{
        if (id >= LUPC_PRIMARY_CTX_ID(0) && id < LUPC_PRIMARY_CTX_ID(LUP_MAX_DEVICES) &&
            (id - LUPC_PRIMARY_CTX_ID(0)) % 0x100 == 0) {
                int dev = (int)((id - LUPC_PRIMARY_CTX_ID(0)) / 0x100);
                if (dev >= n_devices)
                        return false;
                pthread_mutex_lock(&ctx_lock);
                bool live = primaries[dev].retains > 0;
                unsigned flags = primaries[dev].flags;
                pthread_mutex_unlock(&ctx_lock);
                if (!live)
                        return false;
                *ret = (struct lupc_ctx_info){ .id = id, .device = dev, .flags = flags, .primary = true };
                return true;
        }
        bool found = false;
        pthread_mutex_lock(&ctx_lock);
        for (int i = 0; i < n_ctxs; i++) {
                if (ctxs[i].id == id) {
                        *ret = ctxs[i];
                        found = true;
                        break;
                }
        }
        pthread_mutex_unlock(&ctx_lock);
        return found;
}

uint64_t lupc_ctx_mint(int device, unsigned flags)
{
        uint64_t id = 0;
        pthread_mutex_lock(&ctx_lock);
        if (n_ctxs < (int)LUP_MAX_CONTEXTS) {
                id = next_ctx_id;
                next_ctx_id += 0x100;
                ctxs[n_ctxs++] = (struct lupc_ctx_info){ .id = id, .device = device, .flags = flags };
        }
        pthread_mutex_unlock(&ctx_lock);
        return id;
}

bool lupc_ctx_was_minted(uint64_t id)
{
        pthread_mutex_lock(&ctx_lock);
        bool minted = id >= LUPC_FIRST_CTX_ID && id < next_ctx_id && (id - LUPC_FIRST_CTX_ID) % 0x100 == 0;
        pthread_mutex_unlock(&ctx_lock);
        return minted;
}

void lupc_ctx_forget(uint64_t id)
{
        pthread_mutex_lock(&ctx_lock);
        for (int i = 0; i < n_ctxs; i++) {
                if (ctxs[i].id == id) {
                        ctxs[i] = ctxs[--n_ctxs];
                        break;
                }
        }
        pthread_mutex_unlock(&ctx_lock);
        /* a destroyed context stops being current in this thread */
        for (int i = 0; i < ctx_depth; i++)
                if (ctx_stack[i] == id)
                        ctx_stack[i] = 0;
}

int lupc_primary_retain(int dev)
{
        pthread_mutex_lock(&ctx_lock);
        int n = ++primaries[dev].retains;
        pthread_mutex_unlock(&ctx_lock);
        return n;
}

int lupc_primary_release(int dev)
{
        int n;
        pthread_mutex_lock(&ctx_lock);
        if (primaries[dev].retains == 0)
                n = -EINVAL;
        else
                n = --primaries[dev].retains;
        pthread_mutex_unlock(&ctx_lock);
        return n;
}

void lupc_primary_state(int dev, unsigned *flags, int *active)
{
        pthread_mutex_lock(&ctx_lock);
        *flags = primaries[dev].flags;
        *active = primaries[dev].retains > 0;
        pthread_mutex_unlock(&ctx_lock);
}

void lupc_primary_set_flags(int dev, unsigned flags)
{
        pthread_mutex_lock(&ctx_lock);
        primaries[dev].flags = flags;
        pthread_mutex_unlock(&ctx_lock);
}

void lupc_primary_reset(int dev)
{
        pthread_mutex_lock(&ctx_lock);
        primaries[dev].retains = 0;
        primaries[dev].flags = 0;
        pthread_mutex_unlock(&ctx_lock);
}

uint64_t lupc_stream_id(CUstream s, int per_thread_variant)
{
        if (s == NULL && per_thread_variant)
                return (uint64_t)(uintptr_t)CU_STREAM_PER_THREAD;
        return (uint64_t)(uintptr_t)s;
}

void lupc_shadow_drop_ctx(uint64_t ctx)
{
        pthread_rwlock_wrlock(&alloc_lock);
        size_t j = 0;
        for (size_t i = 0; i < n_allocs; i++)
                if (allocs[i].ctx != ctx)
                        allocs[j++] = allocs[i];
        n_allocs = j;
        pthread_rwlock_unlock(&alloc_lock);
}
