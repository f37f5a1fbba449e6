/* SPDX-License-Identifier: MIT */
/* Module image measurement (shared by shim and worker) and the u64 map. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "buf.h"
#include "image.h"
#include "rangemap.h"
#include "u64map.h"

static uint8_t *slurp(const char *name, size_t *ret)
{
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", KERNELS_DIR, name);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *b = calloc(1, (size_t)n + 1);
        assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
        fclose(f);
        *ret = (size_t)n;
        return b;
}

static void measure_real_images(void **state)
{
        const char *files[] = { "kernels.ptx", "kernels.fatbin", "kernels.cubin" };
        const int kinds[] = { LUP_IMAGE_PTX, LUP_IMAGE_FATBIN, LUP_IMAGE_ELF };
        for (int i = 0; i < 3; i++) {
                size_t n, size;
                int kind;
                const uint8_t *start;
                uint8_t *b = slurp(files[i], &n);
                /* the shim's view: its own memory, no bound */
                assert_int_equal(lup_image_measure(b, SIZE_MAX, &kind, &start, &size), 0);
                assert_int_equal(kind, kinds[i]);
                assert_ptr_equal(start, b);
                /* PTX counts its NUL; binaries are exactly their file */
                assert_int_equal(size, kinds[i] == LUP_IMAGE_PTX ? n + 1 : n);
                /* the worker's view: exactly the bytes received */
                assert_int_equal(lup_image_measure(b, size, &kind, &start, &size), 0);
                /* every truncation of a binary is refused */
                if (kinds[i] != LUP_IMAGE_PTX)
                        for (size_t k = 0; k < n; k += 1 + k / 8)
                                assert_int_equal(lup_image_measure(b, k, &kind, &start, &size), -EBADMSG);
                free(b);
        }
}

static void fatbinc_wrapper(void **state)
{
        size_t n, size;
        int kind;
        const uint8_t *start;
        uint8_t *fat = slurp("kernels.fatbin", &n);
        struct { int magic; int version; const void *data; void *filename; } w = { (int)LUP_FATBINC_MAGIC, 1, fat, NULL };
        assert_int_equal(lup_image_measure((const uint8_t *)&w, SIZE_MAX, &kind, &start, &size), 0);
        assert_ptr_equal(start, fat);
        assert_int_equal(size, n);
        /* a wrapper received over the network points nowhere: refused */
        assert_int_equal(lup_image_measure((const uint8_t *)&w, sizeof(w), &kind, &start, &size), -EBADMSG);
        free(fat);
}

static void garbage_and_lies(void **state)
{
        size_t size;
        int kind;
        const uint8_t *start;
        uint8_t junk[512];
        for (int i = 0; i < 512; i++)
                junk[i] = (uint8_t)(i * 131 + 7);
        assert_int_equal(lup_image_measure(junk, sizeof(junk), &kind, &start, &size), -EBADMSG);
        assert_int_equal(lup_image_measure(NULL, 100, &kind, &start, &size), -EBADMSG);
        /* a fatbin header claiming an enormous body */
        uint8_t fb[16] = { 0 };
        lup_put32(fb, LUP_FATBIN_MAGIC);
        lup_put16(fb + 6, 16);
        lup_put64(fb + 8, UINT64_MAX - 8);
        assert_int_equal(lup_image_measure(fb, sizeof(fb), &kind, &start, &size), -EBADMSG);
        /* an ELF whose section table lies past the buffer */
        uint8_t elf[64] = { 0x7f, 'E', 'L', 'F', 2, 1 };
        lup_put64(elf + 40, 1u << 20);
        lup_put16(elf + 58, 64);
        lup_put16(elf + 60, 3);
        assert_int_equal(lup_image_measure(elf, sizeof(elf), &kind, &start, &size), -EBADMSG);
        /* PTX without a NUL inside the bound */
        char ptx[32];
        memset(ptx, 'x', sizeof(ptx));
        memcpy(ptx, ".version 8.0\n", 13);
        assert_int_equal(lup_image_measure((const uint8_t *)ptx, sizeof(ptx), &kind, &start, &size), -EBADMSG);
}

static void map_basics(void **state)
{
        struct lup_u64map m;
        uint64_t v;
        lup_u64map_init(&m, 1000);
        for (uint64_t k = 1; k <= 1000; k++)
                assert_int_equal(lup_u64map_put(&m, k * 16, k), 0);
        assert_int_equal(lup_u64map_put(&m, 99999, 1), -ENOSPC); /* the limit */
        assert_int_equal(lup_u64map_put(&m, 0, 1), -EINVAL);
        for (uint64_t k = 1; k <= 1000; k++) {
                assert_true(lup_u64map_get(&m, k * 16, &v));
                assert_int_equal(v, k);
        }
        assert_false(lup_u64map_get(&m, 17, &v));
        assert_true(lup_u64map_del(&m, 32, &v));
        assert_int_equal(v, 2);
        assert_false(lup_u64map_get(&m, 32, &v));
        assert_int_equal(lup_u64map_put(&m, 99999, 5), 0); /* room again */
        assert_int_equal(lup_u64map_put(&m, 99999, 6), 0); /* replace */
        assert_true(lup_u64map_get(&m, 99999, &v));
        assert_int_equal(v, 6);
        lup_u64map_free(&m);
}

static void map_churn_does_not_grow(void **state)
{
        struct lup_u64map m;
        lup_u64map_init(&m, 64);
        for (uint64_t k = 1; k < 200000; k++) {
                assert_int_equal(lup_u64map_put(&m, k, k), 0);
                if (k > 10)
                        assert_true(lup_u64map_del(&m, k - 10, NULL));
        }
        assert_true(m.cap <= 64);
        lup_u64map_free(&m);
}

static void rangemap_rules(void **state)
{
        struct lup_rangemap m = { 0 };
        struct lup_range r;
        assert_int_equal(lup_rangemap_add(&m, &(struct lup_range){ .base = 1000, .size = 100, .a = 1 }), 0);
        assert_int_equal(lup_rangemap_add(&m, &(struct lup_range){ .base = 2000, .size = 100, .a = 2 }), 0);
        /* overlaps on either side, zero size, wrap-around */
        assert_int_equal(lup_rangemap_add(&m, &(struct lup_range){ .base = 1099, .size = 10 }), -EEXIST);
        assert_int_equal(lup_rangemap_add(&m, &(struct lup_range){ .base = 1950, .size = 51 }), -EEXIST);
        assert_int_equal(lup_rangemap_add(&m, &(struct lup_range){ .base = 1100, .size = 0 }), -EINVAL);
        assert_int_equal(lup_rangemap_add(&m, &(struct lup_range){ .base = UINT64_MAX - 1, .size = 4 }), -EINVAL);
        assert_int_equal(lup_rangemap_add(&m, &(struct lup_range){ .base = 1100, .size = 900, .a = 3 }), 0);
        assert_true(lup_rangemap_find(&m, 1999, &r));
        assert_int_equal(r.a, 3);
        assert_true(lup_rangemap_find(&m, 2099, &r));
        assert_int_equal(r.a, 2);
        assert_false(lup_rangemap_find(&m, 2100, &r));
        assert_false(lup_rangemap_find(&m, 999, &r));
        assert_int_equal(lup_rangemap_remove(&m, 1050, NULL), -ENOENT); /* only at a range's start */
        assert_int_equal(lup_rangemap_remove(&m, 1000, &r), 0);
        assert_int_equal(r.size, 100);
        assert_false(lup_rangemap_find(&m, 1000, &r));
        lup_rangemap_free(&m);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(measure_real_images),
                cmocka_unit_test(fatbinc_wrapper),
                cmocka_unit_test(garbage_and_lies),
                cmocka_unit_test(map_basics),
                cmocka_unit_test(map_churn_does_not_grow),
                cmocka_unit_test(rangemap_rules),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
