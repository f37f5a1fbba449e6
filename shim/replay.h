/* SPDX-License-Identifier: MIT */
/*
 * The replay buffer: a copy of every request frame the shim sent (header and
 * payload, byte for byte as written, sequence numbers >= 1) until the server
 * says it executed it. After a reconnect the server reports the last
 * sequence number N it executed; the frames after N are written again, in
 * order, with their original sequence numbers, and nothing at or below N is
 * ever sent twice. That is the client half of exactly-once.
 *
 * Storage: records (seq, length, bytes) packed back to back in chunks of a
 * fixed size, mapped as the buffer grows and kept until replay_free(): the
 * oldest chunk goes to a spare list once every record in it is acknowledged
 * and is filled again later, so a frame costs one memcpy and, once the
 * buffer has reached its working size, no allocation and no page fault.
 * Spares beyond a few are marked MADV_FREE (the kernel may reclaim them
 * under memory pressure). A record never spans chunks; a frame larger than
 * the chunk size gets a chunk of its own, unmapped once acknowledged.
 *
 * Bound: replay_bytes() counts frame bytes held. The buffer itself never
 * refuses a frame for size; its owner asks replay_fits() first and, when
 * the answer is no, gets an acknowledgement before appending (client.c:
 * a synchronous PING). An empty buffer always "fits", so a frame larger
 * than the bound can never wait forever.
 *
 * Not thread-safe: the owner serialises every call (the shim holds its send
 * lock). Functions return 0 or -errno and leave the buffer unchanged on
 * failure.
 */
#ifndef LUPC_REPLAY_H
#define LUPC_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define REPLAY_DEFAULT_MAX_MB 256u
#define REPLAY_DEFAULT_CHUNK (8u << 20)
#define REPLAY_HOT_SPARE 2u /* spare chunks kept as they are; more are MADV_FREE'd */

struct replay_chunk;

struct replay {
        size_t max_bytes;           /* the bound on frame bytes held */
        size_t chunk_size;          /* capacity of an ordinary chunk */
        size_t bytes;               /* frame bytes held */
        size_t count;               /* frames held */
        uint64_t last_seq;          /* newest seq ever appended (0: none) */
        struct replay_chunk *head;  /* oldest records */
        struct replay_chunk *tail;  /* newest records; appends go here */
        struct replay_chunk *spare; /* emptied ordinary chunks, for reuse */
        unsigned n_spare;
};

/* Sets up an empty buffer bounded at max_bytes frame bytes, storing records
 * in chunks of chunk_size bytes (0: REPLAY_DEFAULT_CHUNK). Allocates nothing
 * until the first append. -EINVAL if max_bytes is 0. */
int replay_init(struct replay *r, size_t max_bytes, size_t chunk_size);
/* Frees every chunk. NULL-tolerant; the buffer may be initialised again. */
void replay_free(struct replay *r);

/* True if a frame of n bytes can be appended without exceeding the bound,
 * or if the buffer is empty. */
bool replay_fits(const struct replay *r, size_t n);

/* Copies the frame gathered from iov[0..iovcnt) and remembers it under seq.
 * seq must be greater than every seq appended before (-EINVAL otherwise, and
 * for an empty frame or one of 4 GiB or more); -ENOMEM if no chunk could be
 * allocated. Does not look at the bound (see replay_fits()). If ret_frame is
 * not NULL it gets the stored copy (contiguous), valid until the frame is
 * acknowledged: the shim writes the frame from there, where it is still in
 * the cache, rather than from the caller's buffers. */
int replay_append(struct replay *r, uint64_t seq, const struct iovec *iov, int iovcnt, const uint8_t **ret_frame);

/* The server executed everything up to n: drops every frame with seq <= n.
 * Returns how many frames were dropped. */
size_t replay_ack(struct replay *r, uint64_t n);

/* Calls fn for every held frame with seq > n, oldest first, with the frame
 * bytes exactly as appended. Stops at the first negative return and returns
 * it; otherwise returns the number of frames visited. fn must not modify the
 * buffer. */
typedef int (*replay_fn)(uint64_t seq, const uint8_t *frame, size_t len, void *userdata);
int replay_for_each_after(const struct replay *r, uint64_t n, replay_fn fn, void *userdata);

/* Frame bytes held, frames held, the oldest held seq (0 when empty). */
static inline size_t replay_bytes(const struct replay *r) { return r->bytes; }
static inline size_t replay_count(const struct replay *r) { return r->count; }
uint64_t replay_first_seq(const struct replay *r);
/* Chunks mapped, in use or spare (memory held: about this x chunk_size). */
unsigned replay_chunks(const struct replay *r);

#endif
