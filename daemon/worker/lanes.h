/* SPDX-License-Identifier: MIT */
/*
 * Lanes: the checkpoint and restore data path, spread over threads.
 *
 * A session's memory moves in units of up to LUPW_LANE_UNIT bytes (whole
 * PIECEs of one chunk). Unit u belongs to lane u % K; each lane is a
 * thread with its own stream, two events and two pinned buffers, so while
 * it hashes and hands over one unit the next one of its units crosses PCIe.
 * K threads hash at once; the provider's copying runs in parallel too when
 * the provider says it may be called concurrently (ABI version 2 caps).
 *
 * Saving to a provider without LUPINE_CKPT_CAP_CONCURRENT_WRITE: the lanes
 * take turns in unit order (a ticket), so save_write sees exactly the
 * calls, in exactly the order, a single thread would make, one at a time.
 * Restoring from one without LUPINE_CKPT_CAP_CONCURRENT_READ: load_read
 * runs under a lock, one call at a time; hashes are still checked in
 * parallel.
 *
 * The lanes' streams and buffers live as long as the session
 * (lupw_lanes_free); the threads live for one save or restore.
 */
#ifndef LUPD_WORKER_LANES_H
#define LUPD_WORKER_LANES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt_codec.h"

#define LUPW_LANE_UNIT         (4u * LUP_CKPT_PIECE) /* bytes one lane step moves; a multiple of LUP_CKPT_PIECE */
#define LUPW_LANES_DEFAULT_MAX 16u  /* automatic: min(this, online CPUs) */
#define LUPW_LANES_DIRECT_MAX 4u    /* automatic, for a save with direct writes hashed on the GPU */

struct lupw_session;
struct lupine_ckpt_save;
struct lupine_ckpt_load;

/* One chunk of device memory to save or restore. */
struct lupw_mem_span {
        uint64_t addr, size;
        uint64_t *hashes;            /* lup_ckpt_pieces(size): filled by a save, checked by a restore */
        char name[32];               /* its object, "mem/<chunk addr>" */
        uint64_t obj_off;            /* where in that object the span's first byte goes (incremental
                           * checkpoints write only some pieces of a chunk, packed) */
        struct lupine_ckpt_load *ld; /* restore: the epoch it is read from; NULL: the job's */
        int device;       /* the GPU that holds it */
        bool on_gpu;      /* its hashes are computed (save) or checked (restore) on the GPU,
                           * not by the lanes (worker/piece_hash.c) */
};

/* The lane count this session uses: --checkpoint-lanes, else
 * LUPINE_CHECKPOINT_LANES, else min(LUPW_LANES_DEFAULT_MAX, online CPUs),
 * at least 1. */
unsigned lupw_lanes_wanted(const struct lupw_session *s);

/*
 * Copies every span device -> host and writes it to object span->name of
 * `save` at span->obj_off, filling span->hashes with each LUP_CKPT_PIECE's
 * lup_hash64 (with `hashed`, the caller hashed every span on the GPU
 * already, and they are left as they are). Returns 0, or
 * -errno after every lane has stopped and no copy is in flight; `why`
 * (whylen bytes) then says what failed, in words.
 */
int lupw_lanes_save(struct lupw_session *s, struct lupine_ckpt_save *save, struct lupw_mem_span *spans, size_t n,
                    bool hashed, char *why, size_t whylen);

/*
 * Reads every span's object from span->ld (or `ld`) at span->obj_off, checks each LUP_CKPT_PIECE against
 * span->hashes and copies it host -> device. The objects' sizes must have
 * been checked. Returns 0 with every copy complete, or -errno (-EBADMSG for
 * a checksum mismatch) with nothing in flight and `why` set.
 */
int lupw_lanes_restore(struct lupw_session *s, struct lupine_ckpt_load *ld, struct lupw_mem_span *spans, size_t n,
                       char *why, size_t whylen);

/* The lanes the last save or restore ran with (0 before any). */
unsigned lupw_lanes_used(const struct lupw_session *s);

/* Gets a new session's checkpoints ready ahead of the first one: loads
 * the GPU hash kernel and, for a provider with direct writes (ABI version
 * 3), pins its region. Either may take a moment, and neither is fatal. */
void lupw_lanes_prepare(struct lupw_session *s);

/* Unpins the provider's direct-write region; call before the provider
 * instance closes. A no-op when nothing is pinned. */
void lupw_lanes_direct_release(struct lupw_session *s);

/* Frees the lanes' streams, events and buffers; a no-op without any. */
void lupw_lanes_free(struct lupw_session *s);

#endif
