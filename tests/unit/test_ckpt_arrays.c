/* SPDX-License-Identifier: MIT */
/* The checkpoint's "arrays" object (checkpoint/ckpt_arrays.c): round trip,
 * every truncation and flipped byte refused, unsound records refused, and
 * the descriptor rules of common/cuarray.c. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ckpt_arrays.h"

#define ID(n) (0x1000000ull + 16ull * (n))

static const struct lup_ckpt_array good[3] = {
        { .id = ID(1),
          .ctx = 0x10000,
          .d = { .width = 64, .height = 32, .format = 0x20, .channels = 4 },
          .flags = LUP_CKPT_ARRAY_DEAD },
        { .id = ID(2), .ctx = 0x10000, .levels = 3, .d = { .width = 16, .height = 16, .format = 0x01, .channels = 1 } },
        { .id = ID(5),
          .ctx = 0x10000,
          .parent = ID(2),
          .level = 2,
          .d = { .width = 4, .height = 4, .format = 0x01, .channels = 1 } },
};

static void round_trip(void **state)
{
        (void)state;
        struct lup_ckpt_texobj t[2] = { { .value = 1, .ctx = 0x10000 }, { .value = 7, .surface = true } };
        memset(t[0].res, 0xab, sizeof(t[0].res));
        t[0].has_view = true;
        t[0].view[3] = 9;
        uint8_t *buf;
        size_t len;
        assert_int_equal(lup_ckpt_arrays_encode(good, 3, t, 2, &buf, &len), 0);
        struct lup_ckpt_array *a;
        struct lup_ckpt_texobj *got;
        uint32_t na, nt;
        const char *why;
        assert_int_equal(lup_ckpt_arrays_decode(buf, len, &a, &na, &got, &nt, &why), 0);
        assert_int_equal(na, 3);
        assert_int_equal(nt, 2);
        assert_memory_equal(a, good, sizeof(good));
        assert_int_equal(got[0].value, 1);
        assert_true(got[0].has_view && !got[0].surface && got[1].surface);
        assert_int_equal(got[0].res[100], 0xab);
        assert_int_equal(got[0].view[3], 9);
        assert_int_equal(lup_ckpt_array_bytes(&a[0]), 64 * 32 * 16);
        assert_int_equal(lup_ckpt_array_bytes(&a[1]), 256 + 64 + 16);
        assert_int_equal(lup_ckpt_array_bytes(&a[2]), 0);
        free(a);
        free(got);
        for (size_t k = 0; k < len; k++) {
                assert_int_not_equal(lup_ckpt_arrays_decode(buf, k, &a, &na, &got, &nt, &why), 0);
                buf[k] ^= 0x40;
                assert_int_not_equal(lup_ckpt_arrays_decode(buf, len, &a, &na, &got, &nt, &why), 0);
                buf[k] ^= 0x40;
        }
        free(buf);
}

static void bad_records(void **state)
{
        (void)state;
        struct lup_ckpt_array v[3];
        uint8_t *buf;
        size_t len;
        struct lup_ckpt_array *a;
        struct lup_ckpt_texobj *got;
        uint32_t na, nt;
        const char *why;
        for (int k = 0; k < 9; k++) {
                memcpy(v, good, sizeof(v));
                switch (k) {
                case 0:
                        v[0].id = ID(1) + 3;
                        break; /* malformed id */
                case 1:
                        v[1].id = ID(1);
                        break; /* not ascending */
                case 2:
                        v[0].d.channels = 3;
                        break; /* bad descriptor */
                case 3:
                        v[0].d.width = 1ull << 40;
                        break; /* absurd size */
                case 4:
                        v[2].parent = ID(1);
                        break; /* level of a plain array */
                case 5:
                        v[2].level = 3;
                        break; /* past the levels */
                case 6:
                        v[2].d.width = 8;
                        break; /* not that level's descriptor */
                case 7:
                        v[2].parent = ID(9);
                        break; /* no such parent */
                case 8:
                        v[0].flags = 2;
                        break; /* an unknown array flag */
                }
                assert_int_equal(lup_ckpt_arrays_encode(v, 3, NULL, 0, &buf, &len), 0);
                assert_int_equal(lup_ckpt_arrays_decode(buf, len, &a, &na, &got, &nt, &why), -EBADMSG);
                free(buf);
        }
}

static void descriptors(void **state)
{
        (void)state;
        struct lup_array_shape s;
        const char *why;
        struct lup_array_desc d = {
                .width = 8, .height = 8, .depth = 6, .format = 0x20, .channels = 1, .flags = LUP_ARRAY_CUBEMAP
        };
        assert_int_equal(lup_array_check(&d, 0, &s, &why), 0);
        assert_int_equal(s.bytes, 8 * 8 * 6 * 4);
        d.height = 4;
        assert_int_equal(lup_array_check(&d, 0, &s, &why), -EINVAL);
        d = (struct lup_array_desc){ .width = 8, .format = 0xb0, .channels = 1 }; /* NV12 */
        assert_int_equal(lup_array_check(&d, 0, &s, &why), -ENOTSUP);
        d = (struct lup_array_desc){ .width = 8, .format = 0x20, .channels = 1, .flags = LUP_ARRAY_SPARSE };
        assert_int_equal(lup_array_check(&d, 0, &s, &why), -ENOTSUP);
        d = (struct lup_array_desc){ .width = 8, .depth = 3, .format = 0x20, .channels = 1 };
        assert_int_equal(lup_array_check(&d, 0, &s, &why), -EINVAL); /* a depth without a height */
        d.flags = LUP_ARRAY_LAYERED;
        assert_int_equal(lup_array_check(&d, 0, &s, &why), 0); /* 1D layered */
        struct lup_array_shape s3;
        struct lup_array_desc d3 = { .width = 16, .height = 16, .depth = 20000, .format = 0x01, .channels = 1 };
        assert_int_equal(lup_array_check(&d3, 0, &s3, &why), 0); /* the alternate 3D limits */
        d3.width = 9000;
        assert_int_equal(lup_array_check(&d3, 0, &s3, &why), -EINVAL);
        struct lup_copy_end e = { .x = 28, .y = 0, .z = 2 };
        assert_true(lup_array_box_fits(&s, &e, 4, 1, 1));
        assert_false(lup_array_box_fits(&s, &e, 5, 1, 1));
        assert_false(lup_array_box_fits(&s, &e, 4, 1, 2));
        e.x = UINT64_MAX;
        assert_false(lup_array_box_fits(&s, &e, 4, 1, 1));
        struct lup_copy_end dev = { .kind = LUP_END_DEVICE, .handle = 0x1000, .pitch = 64, .height = 4, .y = 1 };
        uint64_t first, span;
        assert_true(lup_device_end_span(&dev, 32, 3, 2, &first, &span));
        assert_int_equal(first, 0x1000 + 64);
        assert_int_equal(span, (4 + 2) * 64 + 32);
        dev.height = 3; /* cannot hold y + rows */
        assert_false(lup_device_end_span(&dev, 32, 3, 2, &first, &span));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(round_trip),
                cmocka_unit_test(bad_records),
                cmocka_unit_test(descriptors),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
