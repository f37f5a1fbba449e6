/* SPDX-License-Identifier: MIT */
/* The codec of LUPD_CTL_OP_STATS (daemon/op_stats.c): a table goes out in
 * messages that fit the supervisor's buffer and comes back equal; each
 * malformed message is refused whole (nothing of it is taken). */
#include <setjmp.h>
#include <stdarg.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "buf.h"
#include "ctl.h"
#include "lupine/wire.h"
#include "op_stats.h"

static void sum_into(void *arg, unsigned op, const struct lupd_op_count *c)
{
        lupd_op_count_add(&((struct lupd_op_count *)arg)[op], c);
}

static void count(struct lupd_op_count *t, unsigned op, uint64_t ns, uint64_t in)
{
        t[op].calls++;
        t[op].bytes_in += in;
        t[op].ns += ns;
        t[op].bucket[lupd_op_bucket(ns)]++;
}

static void buckets(void **state)
{
        (void)state;
        assert_int_equal(lupd_op_bucket(0), 0);
        assert_int_equal(lupd_op_bucket(5000), 0);
        assert_int_equal(lupd_op_bucket(5001), 1);
        assert_int_equal(lupd_op_bucket(1000000000ull), LUPD_OP_BUCKETS - 2);
        assert_int_equal(lupd_op_bucket(1000000001ull), LUPD_OP_BUCKETS - 1);
        assert_true(LUPD_OP_STATS_FIXED + LUPD_OP_STATS_MAX_RECS * LUPD_OP_STATS_REC <= 4096);
}

static void round_trip(void **state)
{
        struct lupd_op_count *t = calloc(LUPD_OP_IDS, sizeof(*t)), *back = calloc(LUPD_OP_IDS, sizeof(*back));
        uint8_t msg[4096];
        unsigned from = 0, msgs = 0;
        const char *why;
        size_t len;

        (void)state;
        /* more ops than one message takes, a record with bytes out only */
        for (unsigned op = 256; op < 256 + 100; op++)
                for (unsigned k = 0; k <= op % 5; k++)
                        count(t, op, 1000ull << k * 3, op);
        t[LUP_OP_DTOH_ASYNC].bytes_out = 12345;
        while ((len = lupd_op_stats_encode(msg, sizeof(msg), t, &from)) > 0) {
                assert_true(len <= sizeof(msg));
                assert_int_equal(lupd_op_stats_decode(msg, len, sum_into, back, &why), 0);
                msgs++;
        }
        assert_int_equal(from, LUPD_OP_IDS);
        assert_true(msgs == (101 + LUPD_OP_STATS_MAX_RECS - 1) / LUPD_OP_STATS_MAX_RECS);
        assert_memory_equal(t, back, LUPD_OP_IDS * sizeof(*t));
        from = 0;
        memset(t, 0, LUPD_OP_IDS * sizeof(*t));
        assert_int_equal(lupd_op_stats_encode(msg, sizeof(msg), t, &from), 0); /* nothing to say */
        free(t);
        free(back);
}

static void refused(void **state)
{
        struct lupd_op_count *t = calloc(LUPD_OP_IDS, sizeof(*t)), *back = calloc(LUPD_OP_IDS, sizeof(*back)),
                             *zero = calloc(LUPD_OP_IDS, sizeof(*zero));
        uint8_t msg[4096], bad[4096];
        unsigned from = 0;
        const char *why;

        (void)state;
        count(t, 300, 7000, 10);
        count(t, 301, 7000, 10);
        size_t len = lupd_op_stats_encode(msg, sizeof(msg), t, &from);
        assert_int_equal(len, LUPD_OP_STATS_FIXED + 2 * LUPD_OP_STATS_REC);


        struct {
                size_t at;    /* byte to change */
                uint32_t val; /* u32 written there */
                size_t cut;   /* or bytes to cut off the end */
                const char *why;
        } cases[] = {
                { 4, 3, 0, "a count that does not match the length" },
                { 4, 0, 0, "no records" },
                { 0, LUPD_CTL_STATS, 0, "another type" },
                { 0, 0, 1, "one byte short" },
                { LUPD_OP_STATS_FIXED + LUPD_OP_STATS_REC, LUPD_OP_IDS, 0, "the second op out of range" },
                { LUPD_OP_STATS_FIXED + LUPD_OP_STATS_REC, 300, 0, "an op twice" },
                { LUPD_OP_STATS_FIXED + LUPD_OP_STATS_REC + 4, 1, 0, "a reserved field" },
                { LUPD_OP_STATS_FIXED + LUPD_OP_STATS_REC + 8, 5, 0, "buckets that do not add up" },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                memcpy(bad, msg, len);
                size_t n = len - cases[i].cut;
                if (!cases[i].cut)
                        lup_put32(bad + cases[i].at, cases[i].val);
                print_message("%s\n", cases[i].why);
                assert_int_equal(lupd_op_stats_decode(bad, n, sum_into, back, &why), -EBADMSG);
                assert_non_null(why);
                assert_memory_equal(back, zero, LUPD_OP_IDS * sizeof(*back)); /* nothing taken */
        }
        /* an empty record */
        memcpy(bad, msg, len);
        memset(bad + LUPD_OP_STATS_FIXED + 8, 0, LUPD_OP_STATS_REC - 8);
        assert_int_equal(lupd_op_stats_decode(bad, len, sum_into, back, &why), -EBADMSG);
        free(t);
        free(back);
        free(zero);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(buckets),
                cmocka_unit_test(round_trip),
                cmocka_unit_test(refused),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
