/* SPDX-License-Identifier: MIT */
/*
 * Incremental checkpoints: what the last committed durable checkpoint of
 * a session holds, piece by piece, and the plan of a save that writes only
 * the pieces that changed since.
 *
 * After every committed durable checkpoint (and every restore from one)
 * the worker remembers, for each piece of each chunk, its hash and where
 * its bytes are in the store: an epoch and an offset in that epoch's
 * object mem/<chunk>. The next durable save hashes the memory on the GPU
 * first; a piece whose chunk is the same (address and size) and whose hash
 * is unchanged is not copied at all, and the new manifest refers to where
 * it already is (checkpoint/ckpt_codec.h, "places"). The provider keeps
 * the epochs referred to (ABI version 5, save_refer).
 *
 * A save writes everything again (a full checkpoint) when:
 *   - the provider has no references (ABI version 4 or older), or
 *     LUPINE_CHECKPOINT_INCREMENTAL=0;
 *   - the last commit was not durable (a hot-only one replaced the epochs
 *     before it), or none was made;
 *   - a chunk's hashes cannot be taken on the GPU (the CPU hashes only
 *     what it copies anyway);
 *   - the pieces would refer to more than LUP_CKPT_MAX_BASES epochs, or the
 *     epochs kept alive would hold more than LUPW_INCR_KEEP_FACTOR times
 *     the session's memory (an epoch is kept whole while any of its pieces
 *     is referred to: a full save then collects them);
 *   - the provider refuses a reference (the base was removed or damaged).
 * Two pieces with equal 64-bit hashes are taken as equal: a collision can
 * only make a session restore its own older bytes of that piece.
 */
#ifndef LUPD_WORKER_CKPT_BASE_H
#define LUPD_WORKER_CKPT_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt_codec.h"

#define LUPW_INCR_KEEP_FACTOR 2u

struct lupw_session;
struct lupw_mem_span;
struct lupw_ckpt_base;
struct lupine_ckpt_save;

/* What a save writes when it is incremental. */
struct lupw_incr_plan {
        bool incremental; /* false: a full save, the rest is unused */
        uint8_t *base;    /* per piece of all chunks in order: 0 new, k: bases[k - 1] */
        uint64_t *offset; /* per piece: its offset in that epoch's object */
        uint32_t n_bases;
        uint64_t bases[LUP_CKPT_MAX_BASES];
        struct lupw_mem_span *write; /* the runs of new pieces, packed in their objects */
        size_t n_write;
        uint64_t write_bytes, total_bytes;
};

/* The spans of every chunk of the session now, each named "mem/<addr>",
 * their hashes in one new array (*ret_spans and *ret_hashes are the
 * caller's to free). 0 or -ENOMEM. */
int lupw_chunk_spans(const struct lupw_session *s, struct lupw_mem_span **ret_spans, uint64_t **ret_hashes,
                     size_t *ret_n);

/*
 * Plans the save of the n chunks in spans (hashes already taken on the
 * GPU, span->on_gpu set for all): compares every piece with the base,
 * names the bases to the provider (save_refer) and fills *plan. Leaves
 * plan->incremental false, with nothing allocated, whenever a full save
 * is the thing to do (see above; `why_full` then says why in a few words,
 * or "" for "no base yet"). 0, or -ENOMEM.
 */
int lupw_incr_plan(struct lupw_session *s, struct lupine_ckpt_save *save, uint64_t epoch,
                   const struct lupw_mem_span *spans, size_t n, struct lupw_incr_plan *plan, const char **why_full);
void lupw_incr_plan_free(struct lupw_incr_plan *plan);

/* A plan that writes every piece, each at its own offset (a pre-copy
 * without a base). 0 or -ENOMEM. */
int lupw_incr_plan_full(const struct lupw_mem_span *spans, size_t n, struct lupw_incr_plan *plan);

/*
 * The final pass of a pre-copied save (worker/precopy.c): compares every
 * piece of spans (hashed on the GPU with the session quiesced) with what
 * the pre-copy recorded (`pre`, from lupw_base_of_plan); pieces that are
 * the same stay where the pre-copy put them or referred to, the others
 * are written again after what the pre-copy wrote in their object. With
 * all_new every piece is written again. Never a full save: the save holds
 * the pre-copy's objects. 0 or -ENOMEM.
 */
int lupw_incr_plan_final(const struct lupw_ckpt_base *pre, const struct lupw_mem_span *spans, size_t n, bool all_new,
                         struct lupw_incr_plan *plan);

/* What a pre-copy of epoch `epoch` wrote and referred to, as a base for
 * lupw_incr_plan_final (NULL: out of memory); free with lupw_base_destroy. */
struct lupw_ckpt_base *lupw_base_of_plan(uint64_t epoch, const struct lupw_mem_span *spans, size_t n,
                                         const struct lupw_incr_plan *plan);
void lupw_base_destroy(struct lupw_ckpt_base *b);

/* Whether the next durable save may be incremental at all: the provider
 * refers, it is allowed, and there is a durable base. */
bool lupw_incr_possible(const struct lupw_session *s);

/*
 * Remembers the committed (saved or restored) manifest m as the base of
 * the next save; `written` is the bytes of memory epoch m->epoch wrote
 * itself (for the keep-alive bound), 0 if unknown. A manifest without
 * durable memory forgets the base. Out of memory forgets it too (the
 * next save is then full): never fails.
 */
void lupw_base_set(struct lupw_session *s, const struct lup_ckpt_manifest *m, uint64_t written);
void lupw_base_free(struct lupw_session *s);

#endif
