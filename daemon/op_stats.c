/* SPDX-License-Identifier: MIT */
/* The codec of LUPD_CTL_OP_STATS (daemon/op_stats.h), for both ends. */
#include <errno.h>
#include <string.h>

#include "buf.h"
#include "ctl.h"
#include "op_stats.h"

/* 5 us .. 1 s: a call answered from the worker's tables takes a few
 * microseconds, a launch tens, a synchronise or a large copy milliseconds
 * and more. */
const uint64_t lupd_op_bucket_ns[LUPD_OP_BUCKETS - 1] = {
        5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 10000000, 100000000, 1000000000,
};

static void put_rec(uint8_t *p, unsigned op, const struct lupd_op_count *c)
{
        lup_put32(p, op);
        lup_put32(p + 4, 0);
        lup_put64(p + 8, c->calls);
        lup_put64(p + 16, c->bytes_in);
        lup_put64(p + 24, c->bytes_out);
        lup_put64(p + 32, c->ns);
        for (unsigned b = 0; b < LUPD_OP_BUCKETS; b++)
                lup_put64(p + 40 + 8 * b, c->bucket[b]);
}

size_t lupd_op_stats_encode(uint8_t *buf, size_t cap, const struct lupd_op_count *table, unsigned *from)
{
        size_t len = LUPD_OP_STATS_FIXED;
        uint32_t n = 0;
        unsigned op = *from;

        for (; op < LUPD_OP_IDS && n < LUPD_OP_STATS_MAX_RECS && len + LUPD_OP_STATS_REC <= cap; op++) {
                if (!table[op].calls && !table[op].bytes_out) /* DATA may come after its call was counted */
                        continue;
                put_rec(buf + len, op, &table[op]);
                len += LUPD_OP_STATS_REC;
                n++;
        }
        *from = op;
        if (!n)
                return 0;
        lup_put32(buf, LUPD_CTL_OP_STATS);
        lup_put32(buf + 4, n);
        return len;
}

static int read_rec(struct lup_rd *r, uint32_t *op, struct lupd_op_count *c, const char **why)
{
        uint32_t zero = 1;
        uint64_t sum = 0;

        lup_rd_u32(r, op);
        lup_rd_u32(r, &zero);
        lup_rd_u64(r, &c->calls);
        lup_rd_u64(r, &c->bytes_in);
        lup_rd_u64(r, &c->bytes_out);
        lup_rd_u64(r, &c->ns);
        for (unsigned b = 0; b < LUPD_OP_BUCKETS; b++) {
                lup_rd_u64(r, &c->bucket[b]);
                sum += c->bucket[b];
        }
        if (r->err)
                *why = "a short record";
        else if (*op >= LUPD_OP_IDS)
                *why = "an op id out of range";
        else if (zero != 0)
                *why = "a reserved field set";
        else if (sum != c->calls)
                *why = "buckets that do not add up to the calls";
        else if (!c->calls && !c->bytes_out)
                *why = "an empty record";
        else
                return 0;
        return -EBADMSG;
}

int lupd_op_stats_decode(const uint8_t *buf, size_t len,
                         void (*fn)(void *arg, unsigned op, const struct lupd_op_count *c), void *arg, const char **why)
{
        uint8_t seen[LUPD_OP_IDS / 8];
        struct lup_rd r = lup_rd_init(buf, len);
        uint32_t type, n = 0, op;
        struct lupd_op_count c;

        *why = "a malformed header";
        lup_rd_u32(&r, &type);
        lup_rd_u32(&r, &n);
        if (r.err || type != LUPD_CTL_OP_STATS || n == 0 || n > LUPD_OP_STATS_MAX_RECS ||
            len != LUPD_OP_STATS_FIXED + (size_t)n * LUPD_OP_STATS_REC)
                return -EBADMSG;
        /* all records are checked before any is taken */
        memset(seen, 0, sizeof(seen));
        for (uint32_t i = 0; i < n; i++) {
                if (read_rec(&r, &op, &c, why) < 0)
                        return -EBADMSG;
                if (seen[op / 8] & (1u << (op % 8))) {
                        *why = "an op twice";
                        return -EBADMSG;
                }
                seen[op / 8] |= (uint8_t)(1u << (op % 8));
        }
        if (lup_rd_finish(&r) < 0)
                return -EBADMSG;
        r = lup_rd_init(buf + LUPD_OP_STATS_FIXED, len - LUPD_OP_STATS_FIXED);
        for (uint32_t i = 0; i < n; i++) {
                (void)read_rec(&r, &op, &c, why);
                fn(arg, op, &c);
        }
        *why = NULL;
        return 0;
}
