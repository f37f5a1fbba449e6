/* SPDX-License-Identifier: MIT */
/*
 * The stream-ordered allocator's sub-allocator and bookkeeping (pool.h has
 * the contract). Each chunk is an arena allocation holding a list of blocks
 * in address order; a block is live (handed out) or free. A free block
 * remembers the stream it was freed on and a ticket (the free's place in
 * this process's order of frees); ticket 0 means its free is known to be
 * complete. Neighbouring free blocks merge when they are in the same state
 * (both complete, or both pending on the same stream).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "log.h"
#include "pool.h"
#include "pool_impl.h"
#include "shim_gen.h"
#include "u64map.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct lupc_pool *pools; /* live and destroyed-but-not-empty pools */
static unsigned n_created;      /* live created pools */
static uint64_t defaults[LUP_MAX_DEVICES], currents[LUP_MAX_DEVICES];
static uint64_t tickets;                                      /* frees so far */
static struct lup_u64map live = { .limit = LUP_MAX_HANDLES }; /* base -> struct pool_block * */
static atomic_bool in_use;                                    /* a pool was ever made: the sync hooks have work */

static struct lupc_pool *pool_find_locked(uint64_t id)
{
        for (struct lupc_pool *p = pools; p; p = p->next)
                if (p->id == id && !p->destroyed)
                        return p;
        return NULL;
}

static struct lupc_pool *pool_new_locked(int device, const CUmemPoolProps *props, bool is_default)
{
        struct lupc_pool *p = calloc(1, sizeof(*p));
        if (!p)
                return NULL;
        p->id = lupc_mint_handle();
        p->device = device;
        p->is_default = is_default;
        if (props)
                p->props = *props;
        p->props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        p->props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        p->props.location.id = device;
        p->follow_events = p->opportunistic = p->internal_deps = 1;
        p->access[device] = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        p->next = pools;
        pools = p;
        atomic_store(&in_use, true);
        return p;
}

uint64_t lupc_pool_default(int device)
{
        if (device < 0 || device >= (int)LUP_MAX_DEVICES)
                return 0;
        pthread_mutex_lock(&lock);
        if (!defaults[device]) {
                struct lupc_pool *p = pool_new_locked(device, NULL, true);
                defaults[device] = p ? p->id : 0;
        }
        uint64_t id = defaults[device];
        pthread_mutex_unlock(&lock);
        return id;
}

uint64_t lupc_pool_current(int device)
{
        if (device < 0 || device >= (int)LUP_MAX_DEVICES)
                return 0;
        pthread_mutex_lock(&lock);
        uint64_t id = currents[device];
        pthread_mutex_unlock(&lock);
        return id ? id : lupc_pool_default(device);
}

int lupc_pool_set_current(int device, uint64_t pool)
{
        pthread_mutex_lock(&lock);
        struct lupc_pool *p = pool_find_locked(pool);
        int rc = -EINVAL;
        if (p && p->device == device) {
                currents[device] = pool;
                rc = 0;
        }
        pthread_mutex_unlock(&lock);
        return rc;
}

int lupc_pool_create(const CUmemPoolProps *props, uint64_t *ret_id)
{
        int rc = -ENOSPC;
        pthread_mutex_lock(&lock);
        if (n_created < LUPC_MAX_POOLS) {
                struct lupc_pool *p = pool_new_locked(props->location.id, props, false);
                rc = -ENOMEM;
                if (p) {
                        n_created++;
                        *ret_id = p->id;
                        rc = 0;
                }
        }
        pthread_mutex_unlock(&lock);
        return rc;
}

bool lupc_pool_lookup(uint64_t pool, int *ret_device)
{
        pthread_mutex_lock(&lock);
        struct lupc_pool *p = pool_find_locked(pool);
        if (p && ret_device)
                *ret_device = p->device;
        pthread_mutex_unlock(&lock);
        return p != NULL;
}

/* ---- chunks */

#define POOL_CAP_ROUND (32ull << 20)

static CUresult chunk_new_locked(struct lupc_pool *p, uint64_t need, uint64_t ctx, struct pool_chunk **ret)
{
        uint64_t size = (need + LUPC_POOL_CHUNK - 1) / LUPC_POOL_CHUNK * LUPC_POOL_CHUNK;
        /* driver 580 rounds the cap up to 32 MiB: 4 MiB held 32 MiB, 64 MiB
         * and 1 GiB held just that (tests/gpu/probes/pool_maxsize.c) */
        uint64_t cap = p->props.maxSize ? (p->props.maxSize + POOL_CAP_ROUND - 1) / POOL_CAP_ROUND * POOL_CAP_ROUND : 0;
        if (cap && (size > cap || p->reserved > cap - size))
                return CUDA_ERROR_OUT_OF_MEMORY;
        struct pool_chunk *c = calloc(1, sizeof(*c));
        struct pool_block *b = calloc(1, sizeof(*b));
        if (!c || !b) {
                free(c);
                free(b);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        CUdeviceptr base = 0;
        bool pushed = lupc_ctx_current() != ctx && lupc_ctx_push(ctx) == 0;
        CUresult r = lupc_send_cuMemAlloc_v2(&base, size);
        if (pushed)
                lupc_ctx_pop();
        if (r == CUDA_SUCCESS && !lupc_in_arena(base))
                r = lupc_protocol_error("pool chunk");
        if (r != CUDA_SUCCESS) {
                free(c);
                free(b);
                return r;
        }
        *c = (struct pool_chunk){ .next = p->chunks, .pool = p, .base = base, .size = size, .ctx = ctx, .blocks = b };
        *b = (struct pool_block){ .chunk = c, .base = base, .size = size, .free = true };
        p->chunks = c;
        p->reserved += size;
        if (p->reserved > p->reserved_high)
                p->reserved_high = p->reserved;
        *ret = c;
        return CUDA_SUCCESS;
}

/* A chunk whose memory is all free and known to be complete. */
static bool chunk_idle(const struct pool_chunk *c)
{
        return c->n_live == 0 && c->blocks && !c->blocks->next && c->blocks->free && c->blocks->ticket == 0;
}

static void chunk_release_locked(struct lupc_pool *p, struct pool_chunk *c, bool send)
{
        for (struct pool_chunk **pp = &p->chunks; *pp; pp = &(*pp)->next) {
                if (*pp == c) {
                        *pp = c->next;
                        break;
                }
        }
        p->reserved -= c->size;
        if (send) {
                bool pushed = lupc_ctx_current() != c->ctx && lupc_ctx_push(c->ctx) == 0;
                (void)lupc_send_cuMemFree_v2(c->base); /* async: a failure is latched */
                if (pushed)
                        lupc_ctx_pop();
        }
        for (struct pool_block *b = c->blocks, *nb; b; b = nb) {
                nb = b->next;
                if (!b->free) {
                        lup_u64map_del(&live, b->base, NULL);
                        lupc_shadow_remove(b->base, NULL);
                }
                free(b);
        }
        free(c);
}

static void pool_unlink_locked(struct lupc_pool *p)
{
        for (struct lupc_pool **pp = &pools; *pp; pp = &(*pp)->next) {
                if (*pp == p) {
                        *pp = p->next;
                        break;
                }
        }
        free(p);
}

/* Releases idle chunks while the pool holds more than keep (the release
 * threshold at a synchronisation, minBytesToKeep for TrimTo: a chunk goes
 * only if what stays is at least keep). A destroyed pool keeps nothing. */
static void trim_locked(struct lupc_pool *p, uint64_t keep, bool strict_keep)
{
        if (p->destroyed)
                keep = 0;
        for (struct pool_chunk *c = p->chunks, *nc; c && p->reserved > keep; c = nc) {
                nc = c->next;
                if (!chunk_idle(c))
                        continue;
                if (strict_keep && p->reserved - c->size < keep)
                        continue;
                chunk_release_locked(p, c, true);
        }
        if (p->destroyed && !p->chunks)
                pool_unlink_locked(p);
}

static void trim_all_locked(void)
{
        for (struct lupc_pool *p = pools, *np; p; p = np) {
                np = p->next;
                trim_locked(p, p->threshold, false);
        }
}

int lupc_pool_destroy(uint64_t pool)
{
        pthread_mutex_lock(&lock);
        struct lupc_pool *p = pool_find_locked(pool);
        int rc = -EINVAL;
        if (p && !p->is_default) {
                if (currents[p->device] == p->id)
                        currents[p->device] = 0;
                p->destroyed = true;
                n_created--;
                trim_locked(p, 0, false);
                rc = 0;
        }
        pthread_mutex_unlock(&lock);
        return rc;
}

/* ---- blocks */

static bool same_stream(const struct lupc_pool_stream *a, const struct lupc_pool_stream *b)
{
        return a->id == b->id && a->ctx == b->ctx && a->thread == b->thread;
}

/* Two free blocks that may become one. */
static bool mergeable(const struct pool_block *a, const struct pool_block *b)
{
        if (!a->free || !b->free)
                return false;
        if (a->ticket == 0 || b->ticket == 0)
                return a->ticket == 0 && b->ticket == 0;
        return same_stream(&a->st, &b->st);
}

static void merge_next(struct pool_block *b)
{
        struct pool_block *n = b->next;
        b->size += n->size;
        if (n->ticket > b->ticket)
                b->ticket = n->ticket;
        b->next = n->next;
        if (n->next)
                n->next->prev = b;
        free(n);
}

static void coalesce(struct pool_block *b)
{
        if (b->next && mergeable(b, b->next))
                merge_next(b);
        if (b->prev && mergeable(b->prev, b))
                merge_next(b->prev);
}

/* How a free block may serve an allocation on st: 0 not at all, 1 with no
 * dependency, 2 after making st wait for the free's stream. */
static int reuse_class(const struct lupc_pool *p, const struct pool_block *b, const struct lupc_pool_stream *st)
{
        if (b->ticket != 0 && same_stream(&b->st, st))
                return 1;
        if (b->ticket == 0 && p->opportunistic)
                return 1;
        if (!p->internal_deps)
                return 0;
        if (b->ticket == 0)
                return 1; /* the ordering the driver would insert is already met */
        /* another thread's per-thread stream cannot be named from here, and
         * a destroyed stream cannot be waited on: such a free waits for a
         * synchronisation */
        if (b->st.thread != 0)
                return 0;
        if (b->st.id != 0 && lupc_handle_kind(b->st.id, NULL) != LUPC_H_STREAM)
                return 0;
        return 2;
}

static struct pool_block *find_block_locked(struct lupc_pool *p, uint64_t n, const struct lupc_pool_stream *st,
                                            int *ret_class)
{
        struct pool_block *dep = NULL;
        for (struct pool_chunk *c = p->chunks; c; c = c->next) {
                for (struct pool_block *b = c->blocks; b; b = b->next) {
                        if (!b->free || b->size < n)
                                continue;
                        int k = reuse_class(p, b, st);
                        if (k == 1) {
                                *ret_class = 1;
                                return b;
                        }
                        if (k == 2 && !dep)
                                dep = b;
                }
        }
        *ret_class = 2;
        return dep;
}

/* Splits n bytes off the front of free block b and makes them live. */
static struct pool_block *take_locked(struct pool_block *b, uint64_t n)
{
        if (b->size > n) {
                struct pool_block *rest = calloc(1, sizeof(*rest));
                if (!rest)
                        return NULL;
                *rest = *b;
                rest->base = b->base + n;
                rest->size = b->size - n;
                rest->prev = b;
                if (b->next)
                        b->next->prev = rest;
                b->next = rest;
                b->size = n;
        }
        b->free = false;
        b->ticket = 0;
        b->chunk->n_live++;
        return b;
}

/* Gives a block just taken back, in the state it was taken in. */
static void block_untake_locked(struct pool_block *b, uint64_t ticket)
{
        b->free = true;
        b->ticket = ticket;
        b->chunk->n_live--;
        coalesce(b);
}

CUresult lupc_pool_alloc(uint64_t pool, size_t bytes, const struct lupc_pool_stream *st, uint64_t *ret_ptr)
{
        uint64_t n = ((uint64_t)bytes + LUPC_POOL_ALIGN - 1) / LUPC_POOL_ALIGN * LUPC_POOL_ALIGN;
        int klass = 1;
        CUresult r = CUDA_SUCCESS;

        pthread_mutex_lock(&lock);
        struct lupc_pool *p = pool_find_locked(pool);
        if (!p) {
                pthread_mutex_unlock(&lock);
                return CUDA_ERROR_INVALID_VALUE;
        }
        struct pool_block *b = find_block_locked(p, n, st, &klass);
        if (!b) {
                struct pool_chunk *c;
                uint64_t ctx = lupc_pool_chunk_ctx(p->device, st->ctx);
                r = ctx ? chunk_new_locked(p, n, ctx, &c) : CUDA_ERROR_INVALID_CONTEXT;
                if (r == CUDA_SUCCESS) {
                        b = c->blocks;
                        klass = 1;
                }
        }
        uint64_t was_ticket = b ? b->ticket : 0;
        struct pool_block *got = b ? take_locked(b, n) : NULL;
        if (b && !got)
                r = CUDA_ERROR_OUT_OF_MEMORY;
        if (got) {
                struct pool_stream_dep dep = { .from = got->st, .to = *st };
                if (lup_u64map_put(&live, got->base, (uint64_t)(uintptr_t)got) < 0 ||
                    lupc_shadow_add(got->base, bytes, got->chunk->ctx, p->device) < 0) {
                        lup_u64map_del(&live, got->base, NULL);
                        block_untake_locked(got, was_ticket);
                        r = CUDA_ERROR_OUT_OF_MEMORY;
                } else {
                        if (klass == 2)
                                lupc_pool_wait_dep(&dep);
                        p->used += n;
                        if (p->used > p->used_high)
                                p->used_high = p->used;
                        *ret_ptr = got->base;
                }
        }
        pthread_mutex_unlock(&lock);
        return r;
}

CUresult lupc_pool_free(uint64_t ptr, const struct lupc_pool_stream *st)
{
        uint64_t v;
        pthread_mutex_lock(&lock);
        if (!lup_u64map_del(&live, ptr, &v)) {
                pthread_mutex_unlock(&lock);
                return CUDA_ERROR_INVALID_VALUE;
        }
        struct pool_block *b = (struct pool_block *)(uintptr_t)v;
        struct lupc_pool *p = b->chunk->pool;
        lupc_shadow_remove(ptr, NULL);
        p->used -= b->size;
        b->free = true;
        b->chunk->n_live--;
        if (st) {
                b->st = *st;
                b->ticket = ++tickets;
        } else {
                b->ticket = 0;
        }
        coalesce(b);
        if (p->destroyed)
                trim_locked(p, 0, false);
        pthread_mutex_unlock(&lock);
        return CUDA_SUCCESS;
}

uint64_t lupc_pool_of(uint64_t base)
{
        uint64_t v, id = 0;
        if (!atomic_load(&in_use))
                return 0;
        pthread_mutex_lock(&lock);
        if (lup_u64map_get(&live, base, &v))
                id = ((struct pool_block *)(uintptr_t)v)->chunk->pool->id;
        pthread_mutex_unlock(&lock);
        return id;
}

/* ---- synchronisation points */

uint64_t lupc_pool_ticket(void)
{
        if (!atomic_load(&in_use))
                return 0;
        pthread_mutex_lock(&lock);
        uint64_t t = tickets;
        pthread_mutex_unlock(&lock);
        return t;
}

/* Marks complete every pending free that done() says the sync covered. */
static void complete_locked(bool (*done)(const struct pool_block *b, const void *ud), const void *ud)
{
        for (struct lupc_pool *p = pools; p; p = p->next)
                for (struct pool_chunk *c = p->chunks; c; c = c->next)
                        for (struct pool_block *b = c->blocks; b; b = b->next)
                                if (b->free && b->ticket != 0 && done(b, ud))
                                        b->ticket = 0;
        /* merge what became alike, then give back what the thresholds allow */
        for (struct lupc_pool *p = pools; p; p = p->next)
                for (struct pool_chunk *c = p->chunks; c; c = c->next)
                        for (struct pool_block *b = c->blocks; b; b = b->next)
                                while (b->next && mergeable(b, b->next))
                                        merge_next(b);
        trim_all_locked();
}

struct sync_scope {
        struct lupc_pool_stream st;
        uint64_t ctx;
        uint64_t ticket;
};

static bool stream_done(const struct pool_block *b, const void *ud)
{
        const struct sync_scope *s = ud;
        return b->ticket <= s->ticket && same_stream(&b->st, &s->st);
}

static bool ctx_done(const struct pool_block *b, const void *ud)
{
        const struct sync_scope *s = ud;
        return b->ticket <= s->ticket && b->st.ctx == s->ctx;
}

void lupc_pool_synced_stream(const struct lupc_pool_stream *st, uint64_t ticket)
{
        if (!atomic_load(&in_use))
                return;
        struct sync_scope s = { .st = *st, .ticket = ticket };
        pthread_mutex_lock(&lock);
        complete_locked(stream_done, &s);
        pthread_mutex_unlock(&lock);
}

void lupc_pool_synced_ctx(uint64_t ctx, uint64_t ticket)
{
        if (!atomic_load(&in_use))
                return;
        struct sync_scope s = { .ctx = ctx, .ticket = ticket };
        pthread_mutex_lock(&lock);
        complete_locked(ctx_done, &s);
        pthread_mutex_unlock(&lock);
}

/* Recorded events: a small direct-mapped table; an entry that another
 * event displaced only means that event's sync completes nothing. */
#define EVENT_SLOTS 4096u
static struct {
        uint64_t event;
        struct sync_scope scope;
} events[EVENT_SLOTS];

static unsigned event_slot(uint64_t ev)
{
        return (unsigned)((ev * 0x9e3779b97f4a7c15ull) >> 52) % EVENT_SLOTS;
}

void lupc_pool_event_recorded(uint64_t event, const struct lupc_pool_stream *st)
{
        if (!atomic_load(&in_use))
                return;
        pthread_mutex_lock(&lock);
        unsigned i = event_slot(event);
        events[i].event = event;
        events[i].scope = (struct sync_scope){ .st = *st, .ticket = tickets };
        pthread_mutex_unlock(&lock);
}

void lupc_pool_synced_event(uint64_t event)
{
        if (!atomic_load(&in_use))
                return;
        pthread_mutex_lock(&lock);
        unsigned i = event_slot(event);
        if (events[i].event == event) {
                struct sync_scope s = events[i].scope;
                complete_locked(stream_done, &s);
        } else {
                trim_all_locked();
        }
        pthread_mutex_unlock(&lock);
}

void lupc_pool_drop_ctx(uint64_t ctx)
{
        if (!atomic_load(&in_use))
                return;
        pthread_mutex_lock(&lock);
        for (struct lupc_pool *p = pools, *np; p; p = np) {
                np = p->next;
                for (struct pool_chunk *c = p->chunks, *nc; c; c = nc) {
                        nc = c->next;
                        if (c->ctx == ctx) {
                                for (struct pool_block *b = c->blocks; b; b = b->next)
                                        if (!b->free)
                                                p->used -= b->size;
                                chunk_release_locked(p, c, false); /* the context took the memory */
                        }
                }
                if (p->destroyed && !p->chunks)
                        pool_unlink_locked(p);
        }
        lupc_pool_forget_ctx_events(ctx);
        pthread_mutex_unlock(&lock);
}

/* ---- trimming and attributes */

CUresult lupc_pool_trim(uint64_t pool, size_t keep)
{
        pthread_mutex_lock(&lock);
        struct lupc_pool *p = pool_find_locked(pool);
        if (p)
                trim_locked(p, keep, true);
        pthread_mutex_unlock(&lock);
        return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult lupc_pool_get_attr(uint64_t pool, CUmemPool_attribute attr, void *value)
{
        pthread_mutex_lock(&lock);
        struct lupc_pool *p = pool_find_locked(pool);
        CUresult r = p ? pool_get_attr_locked(p, attr, value) : CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_unlock(&lock);
        return r;
}

CUresult lupc_pool_set_attr(uint64_t pool, CUmemPool_attribute attr, const void *value)
{
        pthread_mutex_lock(&lock);
        struct lupc_pool *p = pool_find_locked(pool);
        CUresult r = p ? pool_set_attr_locked(p, attr, value) : CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_unlock(&lock);
        return r;
}

CUresult lupc_pool_get_access(uint64_t pool, int device, CUmemAccess_flags *ret_flags)
{
        pthread_mutex_lock(&lock);
        struct lupc_pool *p = pool_find_locked(pool);
        if (p)
                *ret_flags = (CUmemAccess_flags)p->access[device];
        pthread_mutex_unlock(&lock);
        return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

int lupc_pool_props(uint64_t pool, CUmemPoolProps *ret)
{
        pthread_mutex_lock(&lock);
        struct lupc_pool *p = pool_find_locked(pool);
        if (p)
                *ret = p->props;
        pthread_mutex_unlock(&lock);
        return p ? 0 : -1;
}

CUresult lupc_pool_set_access(uint64_t pool, const CUmemAccessDesc *map, size_t count)
{
        pthread_mutex_lock(&lock);
        struct lupc_pool *p = pool_find_locked(pool);
        CUresult r = p ? pool_set_access_locked(p, map, count) : CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_unlock(&lock);
        return r;
}
