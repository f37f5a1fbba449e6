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
#include "rangemap.h"

static struct lupc_device *devices;
static int n_devices;
static uint64_t arena_base, arena_size;

int lupc_set_devices(struct lupc_device *devs, int n, const char *visible)
{
        uint8_t uuids[LUP_MAX_DEVICES][16];
        int map[LUP_MAX_DEVICES];

        if (n > (int)LUP_MAX_DEVICES)
                n = (int)LUP_MAX_DEVICES;
        for (int i = 0; i < n; i++)
                memcpy(uuids[i], devs[i].uuid.bytes, 16);
        int nv = lupc_visible_parse(visible, (const uint8_t(*)[16])uuids, n, map);
        if (nv < 0) {
                free(devs);
                return nv;
        }
        struct lupc_device *sel = calloc(nv ? (size_t)nv : 1, sizeof(*sel));
        if (!sel) {
                free(devs);
                return -ENOMEM;
        }
        for (int k = 0; k < nv; k++)
                sel[k] = devs[map[k]];
        free(devs);
        lupc_visible_install(map, nv, n);
        devices = sel;
        n_devices = nv;
        return nv;
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

/* the arenas of the other servers (several in LUPINE_SERVER) */
static struct {
        uint64_t base, size;
} more_arenas[7];
static unsigned n_more_arenas;

void lupc_set_arena(uint64_t base, uint64_t size)
{
        arena_base = base;
        arena_size = size;
}

void lupc_add_arena(uint64_t base, uint64_t size)
{
        if (n_more_arenas < sizeof(more_arenas) / sizeof(more_arenas[0])) {
                more_arenas[n_more_arenas].base = base;
                more_arenas[n_more_arenas++].size = size;
        }
}

bool lupc_in_arena(uint64_t p)
{
        if (p >= arena_base && p - arena_base < arena_size)
                return true;
        for (unsigned i = 0; i < n_more_arenas; i++)
                if (p >= more_arenas[i].base && p - more_arenas[i].base < more_arenas[i].size)
                        return true;
        return false;
}

/* ---- allocations: payload a = owning context, b = device, and bit 32 of
 * b for a VMM mapping */

#define SHADOW_VMM (1ull << 32)

static pthread_rwlock_t alloc_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct lup_rangemap allocs;

static struct lupc_alloc_info info_of(const struct lup_range *r)
{
        return (struct lupc_alloc_info){ .base = r->base,
                                         .size = r->size,
                                         .ctx = r->a,
                                         .device = (int)(uint32_t)r->b,
                                         .vmm = (r->b & SHADOW_VMM) != 0 };
}

int lupc_shadow_add(uint64_t base, uint64_t size, uint64_t ctx, int device)
{
        struct lup_range r = { .base = base, .size = size, .a = ctx, .b = (uint64_t)device };
        pthread_rwlock_wrlock(&alloc_lock);
        int rc = lup_rangemap_add(&allocs, &r);
        pthread_rwlock_unlock(&alloc_lock);
        return rc;
}

int lupc_shadow_add_vmm(uint64_t base, uint64_t size, int device)
{
        struct lup_range r = { .base = base, .size = size, .b = (uint32_t)device | SHADOW_VMM };
        pthread_rwlock_wrlock(&alloc_lock);
        int rc = lup_rangemap_add(&allocs, &r);
        pthread_rwlock_unlock(&alloc_lock);
        return rc;
}

int lupc_shadow_remove(uint64_t base, struct lupc_alloc_info *ret)
{
        struct lup_range r;
        pthread_rwlock_wrlock(&alloc_lock);
        int rc = lup_rangemap_remove(&allocs, base, &r);
        pthread_rwlock_unlock(&alloc_lock);
        if (rc == 0 && ret)
                *ret = info_of(&r);
        return rc;
}

bool lupc_shadow_find(uint64_t p, struct lupc_alloc_info *ret)
{
        struct lup_range r;
        pthread_rwlock_rdlock(&alloc_lock);
        bool found = lup_rangemap_find(&allocs, p, &r);
        pthread_rwlock_unlock(&alloc_lock);
        if (found)
                *ret = info_of(&r);
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
                return lupc_mapped_use(p, n); /* pinned host memory, as device memory (api_mapped.c) */
        /* VMM mappings one after the other are one range to the driver
         * (PyTorch's expandable segments grow that way) */
        while (n > a.size - (p - a.base)) {
                uint64_t end = a.base + a.size;
                if (!a.vmm || !lupc_shadow_find(end, &a) || !a.vmm)
                        return CUDA_ERROR_INVALID_VALUE;
                n -= end - p;
                p = end;
        }
        return CUDA_SUCCESS;
}

/* rows of count*mul bytes, pitch bytes apart (lup_span2d; the worker checks
 * the same span again) */
CUresult lupc_check_range2d(uint64_t p, uint64_t count, uint64_t mul, uint64_t pitch, uint64_t rows)
{
        uint64_t span;

        if (lup_span2d(count, mul, pitch, rows, &span) < 0)
                return CUDA_ERROR_INVALID_VALUE;
        return span ? lupc_check_range(p, span, 1) : CUDA_SUCCESS;
}

/* ---- contexts */

#define LUPC_CTX_STACK 64

static __thread uint64_t ctx_stack[LUPC_CTX_STACK];
static __thread int ctx_depth;

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static struct lupc_ctx_info ctxs[LUP_MAX_CONTEXTS];
static int n_ctxs;
static uint64_t next_ctx_id = LUP_FIRST_CTX_ID;

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
        if (lup_primary_ctx_device(id) >= 0) {
                int dev = lupc_primary_ctx_dev(id);
                if (dev < 0)
                        return false; /* a device this process cannot see */
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

bool lupc_ctx_known(uint64_t id)
{
        struct lupc_ctx_info info;

        if (lup_primary_ctx_device(id) >= 0)
                return lupc_primary_ctx_dev(id) >= 0;
        return lupc_ctx_lookup(id, &info);
}

uint64_t lupc_ctx_mint(int device, unsigned flags)
{
        uint64_t id = 0;
        pthread_mutex_lock(&ctx_lock);
        if (n_ctxs < (int)LUP_MAX_CONTEXTS) {
                id = next_ctx_id;
                next_ctx_id += LUP_CTX_ID_STEP;
                ctxs[n_ctxs++] = (struct lupc_ctx_info){ .id = id, .device = device, .flags = flags };
        }
        pthread_mutex_unlock(&ctx_lock);
        return id;
}

bool lupc_ctx_was_minted(uint64_t id)
{
        pthread_mutex_lock(&ctx_lock);
        bool minted = id >= LUP_FIRST_CTX_ID && id < next_ctx_id && (id - LUP_FIRST_CTX_ID) % LUP_CTX_ID_STEP == 0;
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

static bool not_of_ctx(const struct lup_range *r, void *ud)
{
        return r->a != *(const uint64_t *)ud;
}

void lupc_shadow_drop_ctx(uint64_t ctx)
{
        pthread_rwlock_wrlock(&alloc_lock);
        lup_rangemap_filter(&allocs, not_of_ctx, &ctx);
        pthread_rwlock_unlock(&alloc_lock);
}
