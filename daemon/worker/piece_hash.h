/* SPDX-License-Identifier: MIT */
/*
 * Piece hashes on the GPU, for the checkpoint lanes.
 *
 * Every LUP_CKPT_PIECE of saved memory carries its lup_hash64 in the manifest. The
 * lanes computed them on the CPU, on the same threads that copy, at about
 * 12 GB/s per core. The kernel lupine_piece_hash (daemon/worker/gpu/piece_hash.cu,
 * committed as PTX) computes the same values on the GPU in a few
 * milliseconds per GiB: a save hashes each chunk before the lanes copy it
 * out, and a restore checks each chunk after the lanes have copied it in,
 * which also covers the copy itself.
 *
 * The kernel is loaded once per device, into the worker's own retained
 * primary context, the first time a checkpoint needs it. Where it cannot
 * be (the driver cannot JIT the PTX, the device has no context here, or
 * LUPINE_CHECKPOINT_GPU_HASH=0), the lanes hash on the CPU as before. The
 * checkpoint format is the same either way.
 */
#ifndef LUPD_WORKER_PIECE_HASH_H
#define LUPD_WORKER_PIECE_HASH_H

#include <stdbool.h>
#include <stddef.h>

struct lupw_session;
struct lupw_mem_span;

/* Sets span->on_gpu for every span the GPU can hash, loading the kernel on
 * its device the first time. Never fails: a span the GPU cannot take is
 * left to the lanes (on_gpu false). */
void lupw_piece_hash_plan(struct lupw_session *s, struct lupw_mem_span *spans, size_t n);

/* Runs the kernel over every span with on_gpu set and waits for it. With
 * check false it stores the hashes in span->hashes; with check true it
 * compares them with span->hashes. Returns 0; -EBADMSG for a piece that
 * does not match; -EIO or -ENOMEM when the kernel could not run. `why`
 * (whylen bytes) then says what failed, in words. */
int lupw_piece_hash_run(struct lupw_session *s, struct lupw_mem_span *spans, size_t n, bool check, char *why,
                        size_t whylen);

/* Plans and runs the kernel over every span (check false): 0 when every
 * span was hashed on the GPU; -ENOTSUP when one cannot be (the others are,
 * on_gpu says which); else what lupw_piece_hash_run returned. `why` says
 * what failed. */
int lupw_piece_hash_all(struct lupw_session *s, struct lupw_mem_span *spans, size_t n, char *why, size_t whylen);

/* Loads the kernel on device 0 ahead of the first checkpoint (a session
 * with checkpoints calls it when it starts): the load, which may compile
 * the PTX, then costs no checkpoint any time. */
void lupw_piece_hash_prepare(struct lupw_session *s);

/* Whether the kernel is loaded on `device`. */
bool lupw_piece_hash_ready(const struct lupw_session *s, int device);

/* Unloads the kernel; a no-op when it was never loaded. */
void lupw_piece_hash_free(struct lupw_session *s);

#endif
