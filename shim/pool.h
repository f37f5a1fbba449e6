/* SPDX-License-Identifier: MIT */
/*
 * The stream-ordered allocator, kept in the client (shim/pool.c).
 *
 * A pool is a client-side object named by a client-minted id. It gets its
 * memory as ordinary arena allocations (chunks, one cuMemAlloc round trip
 * each) and sub-allocates inside them, so an allocation or a free costs no
 * round trip, and the chunks are checkpointed like any allocation while the
 * bookkeeping lives here, in the process that survives the server's
 * restart. Each pool allocation is its own entry in the allocation shadow.
 *
 * Stream order: a block freed on stream S is handed out again at once to an
 * allocation on S. For another stream S2 it is handed out only with an
 * ordering: under REUSE_ALLOW_INTERNAL_DEPENDENCIES S2 waits on an event
 * recorded on S at the time of the reuse (later than the free, so the wait
 * covers it); otherwise only once the shim has seen the free complete (a
 * stream, context or event synchronisation that covers it) and
 * REUSE_ALLOW_OPPORTUNISTIC is on. Streams are named by their wire ids
 * (lupc_stream_id); `sctx` is the context the stream belongs to.
 *
 * Threading: one lock for every pool; it is held across the round trip of a
 * chunk allocation. Every function here may be called from any thread.
 */
#ifndef LUPC_POOL_H
#define LUPC_POOL_H

#include <stdbool.h>
#include <stdint.h>
#include <cuda.h>

#define LUPC_MAX_POOLS  4096u        /* created pools alive at once, per process */
#define LUPC_POOL_CHUNK (2ull << 20) /* chunks are multiples of this */
#define LUPC_POOL_ALIGN 512ull       /* every pool allocation starts at a multiple of this */

/* The stream an allocation or free is ordered on. */
struct lupc_pool_stream {
        uint64_t id;     /* wire id; CU_STREAM_LEGACY travels as 0 */
        uint64_t ctx;    /* its context */
        uint64_t thread; /* for CU_STREAM_PER_THREAD: the thread's own token, else 0 */
};

/* The stream a caller named (a wire id: lupc_stream_id already applied):
 * CUDA_ERROR_INVALID_CONTEXT for a default stream with no current context,
 * CUDA_ERROR_INVALID_HANDLE for something that is not a stream. */
CUresult lupc_pool_stream_of(CUstream s, struct lupc_pool_stream *ret);

/* The device a context belongs to, or -1. */
int lupc_pool_ctx_device(uint64_t ctx);

/* The default pool of a device (made on first use); 0 past the limit. */
uint64_t lupc_pool_default(int device);
/* The current pool of a device (cuDeviceSetMemPool), or its default. */
uint64_t lupc_pool_current(int device);
int lupc_pool_set_current(int device, uint64_t pool); /* -EINVAL: not a pool of that device */

/* A new pool; -ENOSPC past LUPC_MAX_POOLS. */
int lupc_pool_create(const CUmemPoolProps *props, uint64_t *ret_id);
/* -EINVAL for an unknown pool or a default one. Live allocations stay
 * valid; the memory goes once they are freed. */
int lupc_pool_destroy(uint64_t pool);
/* true, with the device, for a live pool */
bool lupc_pool_lookup(uint64_t pool, int *ret_device);

/* Allocates bytes from a pool, ordered on st. A CUresult. */
CUresult lupc_pool_alloc(uint64_t pool, size_t bytes, const struct lupc_pool_stream *st, uint64_t *ret_ptr);
/* Frees a pool allocation in stream order; CUDA_ERROR_INVALID_VALUE when
 * p is not the start of a live pool allocation. st NULL: at once (cuMemFree). */
CUresult lupc_pool_free(uint64_t p, const struct lupc_pool_stream *st);
/* The pool of a live pool allocation starting at base, or 0. */
uint64_t lupc_pool_of(uint64_t base);

/* Synchronisation points. lupc_pool_ticket() is read before the call; when
 * the call succeeds, every free made on the stream (or in the context)
 * up to that ticket has completed, and pools release memory above their
 * thresholds. */
uint64_t lupc_pool_ticket(void);
void lupc_pool_synced_stream(const struct lupc_pool_stream *st, uint64_t ticket);
void lupc_pool_synced_ctx(uint64_t ctx, uint64_t ticket);
/* An event recorded on a stream: what a later sync of that event completes. */
void lupc_pool_event_recorded(uint64_t event, const struct lupc_pool_stream *st);
void lupc_pool_synced_event(uint64_t event);
/* Forgets the chunks and allocations of a destroyed or reset context. */
void lupc_pool_drop_ctx(uint64_t ctx);

CUresult lupc_pool_trim(uint64_t pool, size_t keep);
CUresult lupc_pool_get_attr(uint64_t pool, CUmemPool_attribute attr, void *value);
CUresult lupc_pool_set_attr(uint64_t pool, CUmemPool_attribute attr, const void *value);
/* Access of one device to the pool: CU_MEM_ACCESS_FLAGS_PROT_*. */
CUresult lupc_pool_get_access(uint64_t pool, int device, CUmemAccess_flags *ret_flags);
CUresult lupc_pool_set_access(uint64_t pool, const CUmemAccessDesc *map, size_t count);
/* The properties a pool was made with; -1 for no such pool. */
int lupc_pool_props(uint64_t pool, CUmemPoolProps *ret);

#endif
