/* SPDX-License-Identifier: MIT */
/* The pool allocator's internal structures, shared by pool.c and
 * pool_attr.c; callers hold pool.c's lock (the _locked functions). */
#ifndef LUPC_POOL_IMPL_H
#define LUPC_POOL_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <cuda.h>

#include "lupine/wire.h"
#include "pool.h"

struct pool_chunk;

struct pool_block {
        struct pool_block *prev, *next; /* address order in the chunk */
        struct pool_chunk *chunk;
        uint64_t base, size;
        bool free;
        struct lupc_pool_stream st; /* free: the stream it was freed on */
        uint64_t ticket;            /* free: its place among frees; 0 once known complete */
};

struct pool_chunk {
        struct pool_chunk *next;
        struct lupc_pool *pool;
        uint64_t base, size;
        uint64_t ctx; /* the context the arena allocation was made in */
        struct pool_block *blocks;
        uint64_t n_live;
};

struct lupc_pool {
        struct lupc_pool *next;
        uint64_t id;
        int device;
        bool is_default, destroyed;
        CUmemPoolProps props;
        uint64_t threshold;
        int follow_events, opportunistic, internal_deps;
        uint64_t reserved, reserved_high, used, used_high;
        unsigned char access[LUP_MAX_DEVICES]; /* CU_MEM_ACCESS_FLAGS_PROT_* per device */
        struct pool_chunk *chunks;
};

/* An ordering to insert: `to` waits for what `from` has queued so far. */
struct pool_stream_dep {
        struct lupc_pool_stream from, to;
};

/* pool_attr.c */
CUresult pool_get_attr_locked(const struct lupc_pool *p, CUmemPool_attribute attr, void *value);
CUresult pool_set_attr_locked(struct lupc_pool *p, CUmemPool_attribute attr, const void *value);
CUresult pool_set_access_locked(struct lupc_pool *p, const CUmemAccessDesc *map, size_t count);
/* The context to make a chunk for a pool of `device` in: the allocating
 * stream's, the current one, or the device's retained primary; 0 if none. */
uint64_t lupc_pool_chunk_ctx(int device, uint64_t stream_ctx);
/* Queues the ordering (fire-and-forget: an event recorded, a stream wait). */
void lupc_pool_wait_dep(const struct pool_stream_dep *dep);
void lupc_pool_forget_ctx_events(uint64_t ctx);

#endif
