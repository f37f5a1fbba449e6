/* SPDX-License-Identifier: MIT */
/* LUPINE_SERVER's syntax (common/server_list.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "server_list.h"

static void positions_and_alternatives(void **state)
{
        (void)state;
        struct lup_server_list l;
        char err[160];

        assert_int_equal(lup_server_list_parse("127.0.0.1:14833", &l, err, sizeof(err)), 0);
        assert_int_equal(l.n_positions, 1);
        assert_int_equal(l.n_endpoints, 1);
        assert_string_equal(l.endpoint[0], "127.0.0.1:14833");

        assert_int_equal(
                lup_server_list_parse(" a:1 | tls://a2:1 ,b:2,unix:/run/l.sock|[::1]:3 ", &l, err, sizeof(err)), 0);
        assert_int_equal(l.n_positions, 3);
        assert_int_equal(l.n_endpoints, 5);
        const char *want[] = { "a:1", "tls://a2:1", "b:2", "unix:/run/l.sock", "[::1]:3" };
        for (unsigned i = 0; i < 5; i++)
                assert_string_equal(l.endpoint[i], want[i]);
        assert_int_equal(l.first[0], 0);
        assert_int_equal(l.first[1], 2);
        assert_int_equal(l.first[2], 3);
        assert_int_equal(l.first[3], 5);
}

static void refused(void **state)
{
        (void)state;
        struct lup_server_list l;
        char err[160], big[2048];

        const char *empty[] = { "", "a,,b", "a|", "|a", "a, ,b", "a,b," };
        for (unsigned i = 0; i < sizeof(empty) / sizeof(empty[0]); i++) {
                assert_int_equal(lup_server_list_parse(empty[i], &l, err, sizeof(err)), -EINVAL);
                assert_non_null(strstr(err, "empty entry"));
        }
        assert_int_equal(lup_server_list_parse("a,b,c,d,e,f,g,h,i", &l, err, sizeof(err)), -E2BIG);
        assert_non_null(strstr(err, "more than 8 servers"));
        assert_int_equal(lup_server_list_parse("a,b,c,d,e,f,g,h", &l, err, sizeof(err)), 0);
        assert_int_equal(lup_server_list_parse("a|b|c|d|e|f|g|h|i|j|k|l|m|n|o|p|q", &l, err, sizeof(err)), -E2BIG);
        assert_non_null(strstr(err, "more than 16 endpoints"));
        memset(big, 'a', sizeof(big) - 1);
        big[sizeof(big) - 1] = 0;
        assert_int_equal(lup_server_list_parse(big, &l, err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "longer than"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(positions_and_alternatives),
                cmocka_unit_test(refused),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
