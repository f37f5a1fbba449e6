/* SPDX-License-Identifier: MIT */
/* The checkpoint's "mapped" object (checkpoint/ckpt_mapped.c): round trip,
 * every truncation and flipped byte refused, unsound records refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ckpt_mapped.h"

static void round_trip(void **state)
{
        (void)state;
        struct lup_ckpt_mapped v[3] = {
                { .va = 0x7f0000001000ull, .size = 4096, .flags = 2 },
                { .va = 0x7f0000000010ull, .size = 100, .flags = 0 }, /* before the first: sorted on decode */
                { .va = 0x7f0000010000ull, .size = 1 << 20, .flags = 7 },
        };
        uint8_t *buf;
        size_t len;
        assert_int_equal(lup_ckpt_mapped_encode(v, 3, &buf, &len), 0);
        struct lup_ckpt_mapped *got;
        uint32_t n;
        const char *why;
        assert_int_equal(lup_ckpt_mapped_decode(buf, len, &got, &n, &why), 0);
        assert_int_equal(n, 3);
        assert_int_equal(got[0].va, v[1].va);
        assert_int_equal(got[0].size, 100);
        assert_int_equal(got[1].va, v[0].va);
        assert_int_equal(got[1].flags, 2);
        assert_int_equal(got[2].size, 1 << 20);
        assert_int_equal(got[2].flags, 7);
        free(got);
        /* every truncation and every flipped byte is refused */
        for (size_t k = 0; k < len; k++) {
                got = NULL;
                assert_int_not_equal(lup_ckpt_mapped_decode(buf, k, &got, &n, &why), 0);
                buf[k] ^= 0x40;
                assert_int_not_equal(lup_ckpt_mapped_decode(buf, len, &got, &n, &why), 0);
                buf[k] ^= 0x40;
        }
        free(buf);
        assert_int_equal(lup_ckpt_mapped_encode(NULL, 0, &buf, &len), 0);
        assert_int_equal(lup_ckpt_mapped_decode(buf, len, &got, &n, &why), 0);
        assert_int_equal(n, 0);
        free(got);
        free(buf);
}

/* One record of each unsound kind, sealed properly, is refused. */
static void bad_records(void **state)
{
        (void)state;
        const struct lup_ckpt_mapped bad[][2] = {
                { { .va = 0x1000, .size = 0 }, { .va = 0x9000, .size = 1 } },                  /* empty */
                { { .va = 0, .size = 16 }, { .va = 0x9000, .size = 1 } },                      /* at 0 */
                { { .va = 0x1000, .size = 0x2000 }, { .va = 0x2000, .size = 16 } },            /* overlap */
                { { .va = 1ull << 60, .size = 16 }, { .va = 0x9000, .size = 1 } },             /* not user space */
                { { .va = 0x1000, .size = UINT64_MAX - 0x800 }, { .va = 0x9000, .size = 1 } }, /* wraps */
                { { .va = 0x1000, .size = LUP_CKPT_MAX_MAPPED_BYTES }, { .va = 1ull << 40, .size = 1 } }, /* total */
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                uint8_t *buf;
                size_t len;
                struct lup_ckpt_mapped *got = NULL;
                uint32_t n;
                const char *why = NULL;
                assert_int_equal(lup_ckpt_mapped_encode(bad[i], 2, &buf, &len), 0);
                assert_int_equal(lup_ckpt_mapped_decode(buf, len, &got, &n, &why), -EBADMSG);
                assert_non_null(why);
                assert_null(got);
                free(buf);
        }
        uint8_t *buf;
        size_t len;
        assert_int_equal(lup_ckpt_mapped_encode(NULL, LUP_CKPT_MAX_MAPPED + 1, &buf, &len), -ENOBUFS);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(round_trip),
                cmocka_unit_test(bad_records),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
