/* SPDX-License-Identifier: MIT */
/*
 * Calls, bytes and call latency by op: what each worker counts (worker/
 * stats.c) and ships to its supervisor in LUPD_CTL_OP_STATS, and the
 * supervisor sums for the metrics (supervisor/op_stats.c, metrics.c).
 *
 * LUPD_CTL_OP_STATS (worker -> supervisor), with a STATS report and before
 * DRAINED and the worker's end: u32 type, u32 n (1..LUPD_OP_STATS_MAX_RECS),
 * then n records of LUPD_OP_STATS_REC bytes:
 *   u32 op, u32 0, u64 calls, u64 bytes received, u64 bytes sent,
 *   u64 nanoseconds in all, LUPD_OP_BUCKETS x u64 calls per latency bucket
 * Each record holds what happened since the last message that got through
 * (a full control socket drops a message; its counts go with the next).
 * The buckets add up to the calls, and an op appears once per message. A
 * record may have bytes sent and no calls: the DATA of an asynchronous
 * copy counted before.
 *
 * The latency is the worker's: from the moment it takes up the call to the
 * moment its answer is queued (for an asynchronous call, the moment it is
 * queued on the GPU). The network is not in it: `lupinectl bench` measures
 * what a client sees.
 */
#ifndef LUPD_OP_STATS_H
#define LUPD_OP_STATS_H

#include <stddef.h>
#include <stdint.h>

#define LUPD_OP_IDS            1024u /* op ids counted: 0..255 control, 256.. generated */
#define LUPD_OP_BUCKETS        13u   /* LUPD_OP_BUCKETS - 1 upper bounds, then +Inf */
#define LUPD_OP_STATS_FIXED    8u
#define LUPD_OP_STATS_REC      (8u + 8u * (4u + LUPD_OP_BUCKETS))
/* a message fits the supervisor's 4096-byte receive buffer (LUPD_CTL_RECV_BUF) */
#define LUPD_OP_STATS_MAX_RECS ((4096u - LUPD_OP_STATS_FIXED) / LUPD_OP_STATS_REC)

struct lupd_op_count {
        uint64_t calls, bytes_in, bytes_out, ns;
        uint64_t bucket[LUPD_OP_BUCKETS];
};

/* The buckets' upper bounds in nanoseconds (the last bucket is +Inf). */
extern const uint64_t lupd_op_bucket_ns[LUPD_OP_BUCKETS - 1];

static inline unsigned lupd_op_bucket(uint64_t ns)
{
        unsigned b = 0;
        while (b < LUPD_OP_BUCKETS - 1 && ns > lupd_op_bucket_ns[b])
                b++;
        return b;
}

static inline void lupd_op_count_add(struct lupd_op_count *to, const struct lupd_op_count *c)
{
        to->calls += c->calls;
        to->bytes_in += c->bytes_in;
        to->bytes_out += c->bytes_out;
        to->ns += c->ns;
        for (unsigned b = 0; b < LUPD_OP_BUCKETS; b++)
                to->bucket[b] += c->bucket[b];
}

/* Encodes the records of table[0..LUPD_OP_IDS) that are not empty, from op
 * *from on, into buf (cap bytes, at least LUPD_OP_STATS_FIXED +
 * LUPD_OP_STATS_REC); sets *from to the op after the last one taken.
 * Returns the message's length, or 0 when all from *from on are empty. */
size_t lupd_op_stats_encode(uint8_t *buf, size_t cap, const struct lupd_op_count *table, unsigned *from);

/* Decodes a message of len bytes (its type already read) and calls fn for
 * each record. -EBADMSG, with *why, for a malformed one; then fn was not
 * called at all. */
int lupd_op_stats_decode(const uint8_t *buf, size_t len,
                         void (*fn)(void *arg, unsigned op, const struct lupd_op_count *c), void *arg,
                         const char **why);

#endif
