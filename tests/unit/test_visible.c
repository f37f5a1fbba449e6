/* SPDX-License-Identifier: MIT */
/* CUDA_VISIBLE_DEVICES in the shim (shim/visible.c): the parser against the
 * rules measured on driver 580, and the two numberings' tables. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include <cuda.h>

#include "visible.h"

/* four devices; 0 and 1 share their first 8 hex digits (ab12cd34) */
static const uint8_t uuids[4][16] = {
        { 0xab, 0x12, 0xcd, 0x34, 0x00, 0x01, 0x40, 0x02, 0x80, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00 },
        { 0xab, 0x12, 0xcd, 0x34, 0x99, 0x01, 0x40, 0x02, 0x80, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01 },
        { 0x5c, 0xa8, 0x09, 0xca, 0xbe, 0xfd, 0x54, 0x5c, 0x48, 0x37, 0xb5, 0xa7, 0x98, 0x82, 0x24, 0xb1 },
        { 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0x4c, 0xde, 0x8f, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd },
};

#define DEV2 "GPU-5ca809ca-befd-545c-4837-b5a7988224b1"

/* spec -> "s0 s1 ..." (server ordinals) or "EINVAL" */
static const char *parse(const char *spec)
{
        static char out[64];
        int map[LUP_MAX_DEVICES];
        int n = lupc_visible_parse(spec, uuids, 4, map);
        if (n < 0)
                return n == -EINVAL ? "EINVAL" : "error";
        out[0] = 0;
        for (int i = 0; i < n; i++)
                snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%d", i ? " " : "", map[i]);
        return out;
}

static void unset_is_all_in_order(void **state)
{
        (void)state;
        assert_string_equal(parse(NULL), "0 1 2 3");
}

static void indices(void **state)
{
        (void)state;
        assert_string_equal(parse("2"), "2");
        assert_string_equal(parse("3,1"), "3 1");
        assert_string_equal(parse("3,0,2,1"), "3 0 2 1");
        assert_string_equal(parse(""), "");
        assert_string_equal(parse("4"), "");
        assert_string_equal(parse("-1"), "");
        /* the list ends at the first entry that names no device */
        assert_string_equal(parse("1,bogus,2"), "1");
        assert_string_equal(parse("0,2,-1,1"), "0 2");
        assert_string_equal(parse("2,7,1"), "2");
        assert_string_equal(parse(",1"), "");
        assert_string_equal(parse("1,,2"), "1");
        assert_string_equal(parse("1,"), "1");
        /* read as strtol reads them: blanks, a sign, digits, the rest ignored */
        assert_string_equal(parse(" 2"), "2");
        assert_string_equal(parse("2 ,1"), "2 1");
        assert_string_equal(parse("+2"), "2");
        assert_string_equal(parse("\t2"), "2");
        assert_string_equal(parse("-0"), "0");
        assert_string_equal(parse("02"), "2");
        assert_string_equal(parse("0x3"), "0");
        assert_string_equal(parse("1abc,2"), "1 2");
        assert_string_equal(parse("99999999999999999999"), "");
}

static void duplicates(void **state)
{
        (void)state;
        /* the same index twice: cuInit fails (driver 580: "0,0", "0, 0") */
        assert_string_equal(parse("1,1"), "EINVAL");
        assert_string_equal(parse("2,0, 2"), "EINVAL");
        assert_string_equal(parse("0,1,2,3,0"), "EINVAL");
        /* after the list has ended, nothing more is read */
        assert_string_equal(parse("1,bogus,1"), "1");
        /* the same UUID twice, or two prefixes of one device's: refused too */
        assert_string_equal(parse(DEV2 "," DEV2), "EINVAL");
        assert_string_equal(parse("GPU-5c,GPU-5ca8,1"), "EINVAL");
        /* named again the other way: the list ends there */
        assert_string_equal(parse(DEV2 ",2,1"), "2");
        assert_string_equal(parse("2," DEV2 ",1"), "2");
        assert_string_equal(parse("2," DEV2 ",2"), "2");
}

static void uuids_and_prefixes(void **state)
{
        (void)state;
        assert_string_equal(parse(DEV2), "2");
        assert_string_equal(parse("GPU-5ca809ca"), "2");
        assert_string_equal(parse("GPU-5"), "2");
        assert_string_equal(parse("GPU-0123,GPU-5c"), "3 2");
        assert_string_equal(parse("GPU-5CA809CA-BEFD"), "2");                    /* digits of either case */
        assert_string_equal(parse("GPU-5ca809cabefd545c4837b5a7988224b1"), "2"); /* dashes anywhere, or none */
        assert_string_equal(parse("GPU-5ca809ca-"), "2");
        assert_string_equal(parse(DEV2 "0"), "2"); /* past 32 digits nothing is read */
        assert_string_equal(parse(DEV2 ",1"), "2 1");
        assert_string_equal(parse("MIG-5ca809ca"), "2"); /* the GPU itself, MIG off */
        assert_string_equal(parse(" " DEV2), "");        /* a blank first: no UUID */
        assert_string_equal(parse(DEV2 " ,1"), "2 1");
        /* not a prefix of exactly one device */
        assert_string_equal(parse("GPU-ab12cd34"), ""); /* two devices */
        assert_string_equal(parse("GPU-ab12cd3499"), "1");
        assert_string_equal(parse("GPU-ffff"), "");
        assert_string_equal(parse("GPU-"), "");
        assert_string_equal(parse("GPU"), "");
        assert_string_equal(parse("gpu-5ca809ca"), "");                         /* the prefix is upper case */
        assert_string_equal(parse("5ca809ca-befd-545c-4837-b5a7988224b1"), ""); /* read as index 5 */
        assert_string_equal(parse("GPU-5ca8x"), "");
        assert_string_equal(parse("2,GPU-5ca8x,1"), "2");
}

static void none_without_asking(void **state)
{
        (void)state;
        assert_false(lupc_visible_none(NULL));
        assert_true(lupc_visible_none(""));
        assert_true(lupc_visible_none("-1"));
        assert_true(lupc_visible_none("-1,0"));
        assert_true(lupc_visible_none(",0"));
        assert_true(lupc_visible_none("bogus"));
        assert_true(lupc_visible_none("GPU-"));
        assert_true(lupc_visible_none("GPU-x"));
        assert_true(lupc_visible_none("gpu-0"));
        assert_false(lupc_visible_none("0"));
        assert_false(lupc_visible_none(" 7"));
        assert_false(lupc_visible_none("GPU-5"));
        assert_false(lupc_visible_none("MIG-5"));
        assert_false(lupc_visible_none("GPU-5,bogus"));
        assert_true(lupc_visible_none(" GPU-5"));
        assert_false(lupc_visible_none("\t0"));
        assert_false(lupc_visible_none("-0"));
}

static void tables(void **state)
{
        (void)state;
        int map[LUP_MAX_DEVICES] = { 3, 1 };
        lupc_visible_install(map, 2, 4);
        assert_int_equal(lupc_dev_to_server(0), 3);
        assert_int_equal(lupc_dev_to_server(1), 1);
        /* outside the list: still no device of the server's */
        assert_int_equal(lupc_dev_to_server(2), 4);
        assert_int_equal(lupc_dev_to_server(5), 7);
        assert_int_equal(lupc_dev_to_server(-1), -1);
        assert_int_equal(lupc_dev_to_server(INT32_MAX), INT32_MAX);
        assert_int_equal(lupc_dev_from_server(3), 0);
        assert_int_equal(lupc_dev_from_server(1), 1);
        assert_int_equal(lupc_dev_from_server(0), -1);
        assert_int_equal(lupc_dev_from_server(2), -1);
        assert_int_equal(lupc_dev_from_server(4), -1);
        assert_int_equal(lupc_dev_from_server(-1), -1);
        /* location ids: devices only */
        assert_int_equal(lupc_loc_to_server(CU_MEM_LOCATION_TYPE_DEVICE, 0), 3);
        assert_int_equal(lupc_loc_to_server(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0), 0);
        assert_int_equal(lupc_loc_from_server(CU_MEM_LOCATION_TYPE_DEVICE, 1), 1);
        assert_int_equal(lupc_loc_from_server(CU_MEM_LOCATION_TYPE_DEVICE, 2), -1);
        assert_int_equal(lupc_loc_from_server(CU_MEM_LOCATION_TYPE_HOST_NUMA, 2), 2);
        /* primary contexts: the id is the server's */
        assert_int_equal(lupc_primary_ctx_id(0), LUP_PRIMARY_CTX_ID(3));
        assert_int_equal(lupc_primary_ctx_id(1), LUP_PRIMARY_CTX_ID(1));
        assert_int_equal(lupc_primary_ctx_dev(LUP_PRIMARY_CTX_ID(3)), 0);
        assert_int_equal(lupc_primary_ctx_dev(LUP_PRIMARY_CTX_ID(1)), 1);
        assert_int_equal(lupc_primary_ctx_dev(LUP_PRIMARY_CTX_ID(0)), -1);
        assert_int_equal(lupc_primary_ctx_dev(LUP_PRIMARY_CTX_ID(0) + 1), -1);
        assert_int_equal(lupc_primary_ctx_dev(LUP_FIRST_CTX_ID), -1);
        /* unset: the identity */
        assert_int_equal(lupc_visible_parse(NULL, uuids, 4, map), 4);
        lupc_visible_install(map, 4, 4);
        for (int i = 0; i < 4; i++) {
                assert_int_equal(lupc_dev_to_server(i), i);
                assert_int_equal(lupc_dev_from_server(i), i);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(unset_is_all_in_order),
                cmocka_unit_test(indices),
                cmocka_unit_test(duplicates),
                cmocka_unit_test(uuids_and_prefixes),
                cmocka_unit_test(none_without_asking),
                cmocka_unit_test(tables),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
