/* SPDX-License-Identifier: MIT */
/* lupinectl log's entries: the --log-file line codec both ends use
 * (common/log_line.c: format, parse, escapes, what is refused) and what
 * lupinectl prints for an entry, as text and as JSON (cli/ctl_log_fmt.c),
 * with the filters --level and --session. Journal entries are printed by
 * the same ctl_log_print once read into a struct lup_log_line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "cli/ctl_log.h"
#include "log_line.h"

#define T0 1772366400123456ull /* 2026-03-01T12:00:00.123456Z */

static void format_parse(void **state)
{
        struct lup_log_fields f = { .session = "job1", .tenant = "team a\\b", .op = "cuMemAlloc", .cuda_error = 2 };
        struct lup_log_line e;
        char line[LUP_LOG_LINE_MAX];

        (void)state;
        size_t n = lup_log_line_format(line, sizeof(line), T0, "lupined-worker", 42, "warning", "gpu", &f,
                                       "out of memory\nreally");
        assert_string_equal(line, "2026-03-01T12:00:00.123456Z lupined-worker[42]: warning: out of memory really | "
                                  "category=gpu session=job1 tenant=team\\x20a\\x5cb op=cuMemAlloc cuda_error=2\n");
        assert_int_equal(n, strlen(line));
        assert_int_equal(lup_log_line_parse(line, n - 1, &e), 0);
        assert_true(e.usec == T0);
        assert_string_equal(e.ident, "lupined-worker");
        assert_int_equal(e.pid, 42);
        assert_int_equal(e.level, 4);
        assert_string_equal(e.category, "gpu");
        assert_string_equal(e.session, "job1");
        assert_string_equal(e.tenant, "team a\\b");
        assert_string_equal(e.op, "cuMemAlloc");
        assert_int_equal(e.cuda_error, 2);
        assert_string_equal(e.msg, "out of memory really");

        /* no fields but the category; a message holding the separator */
        struct lup_log_fields none = { .cuda_error = -1 };
        n = lup_log_line_format(line, sizeof(line), T0, "lupined", 7, "error", "core", &none,
                                "a | category=net session=x b");
        assert_int_equal(lup_log_line_parse(line, n - 1, &e), 0);
        assert_int_equal(e.level, 3);
        assert_string_equal(e.msg, "a | category=net session=x b");
        assert_string_equal(e.category, "core");
        assert_string_equal(e.session, "");
        assert_int_equal(e.cuda_error, -1);

        /* a message too long for one line is cut, still one line */
        char big[3000];
        memset(big, 'x', sizeof(big) - 1);
        big[sizeof(big) - 1] = 0;
        char small[200];
        n = lup_log_line_format(small, sizeof(small), T0, "lupined", 7, "info", "core", &f, big);
        assert_int_equal(n, sizeof(small) - 1);
        assert_int_equal(small[n - 1], '\n');
        assert_null(memchr(small, '\n', n - 1));
}

static void parse_refuses(void **state)
{
        static const char *const bad[] = {
                "",
                "lupined[1]: info: a stderr line, no time",
                "2026-03-01T12:00:00.123456 lupined[1]: info: no Z | category=core",
                "2026-03-01T12:00:00.123456Z lupined: info: no pid | category=core",
                "2026-03-01T12:00:00.123456Z lupined[1]: loud: a bad level | category=core",
                "2026-03-01T12:00:00.123456Z lupined[1]: info: bad escape | category=core session=a\\x2",
                "2026-03-01T12:00:00.123456Z lupined[1]: info: NUL escape | category=core session=a\\x00",
                "2026-03-01T12:00:00.123456Z lupined[1]: info: no = | category=core session",
                "2026-03-01T12:00:00.123456Z lupined[1]: info: bad number | category=core cuda_error=12x",
                "2026-13-01T12:00:00.123456Z lupined[1]: info: month 13 | category=core",
        };
        struct lup_log_line e;

        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(lup_log_line_parse(bad[i], strlen(bad[i]), &e), -22);
        /* a field a later lupined adds is skipped */
        const char *later = "2026-03-01T12:00:00.123456Z lupined[1]: info: hi | category=net lane=3 session=s";
        assert_int_equal(lup_log_line_parse(later, strlen(later), &e), 0);
        assert_string_equal(e.session, "s");
        assert_int_equal(lup_log_level_parse("warn", 4), 4);
        assert_int_equal(lup_log_level_parse("err", 3), 3);
        assert_int_equal(lup_log_level_parse("5", 1), 5);
        assert_int_equal(lup_log_level_parse("8", 1), -1);
        assert_int_equal(lup_log_level_parse("infos", 5), -1);
}

/* What ctl_log_print writes for e, into a string. */
static char *printed(const struct ctl_log_args *a, const struct lup_log_line *e)
{
        static char out[4096];
        FILE *f = fmemopen(out, sizeof(out), "w");
        assert_non_null(f);
        ctl_log_print(f, a, e);
        fclose(f);
        return out;
}

static void print_and_filter(void **state)
{
        struct ctl_log_args a = { .max_level = 7 };
        struct lup_log_line e = { .usec = T0, .level = 3, .pid = 9, .cuda_error = 700 };

        (void)state;
        setenv("TZ", "UTC", 1);
        tzset();
        strcpy(e.ident, "lupined-worker");
        strcpy(e.category, "gpu");
        strcpy(e.session, "job1");
        strcpy(e.op, "cuLaunchKernel");
        strcpy(e.msg, "illegal address");
        assert_string_equal(printed(&a, &e), "2026-03-01 12:00:00.123 error   gpu        illegal address  "
                                             "session=job1 op=cuLaunchKernel cuda_error=700\n");
        a.json = true;
        assert_string_equal(printed(&a, &e),
                            "{\"time\":\"2026-03-01T12:00:00.123456Z\",\"timestamp_us\":1772366400123456,"
                            "\"level\":\"error\",\"priority\":3,\"identifier\":\"lupined-worker\",\"pid\":9,"
                            "\"category\":\"gpu\",\"message\":\"illegal address\",\"session\":\"job1\","
                            "\"op\":\"cuLaunchKernel\",\"cuda_error\":700}\n");
        a.json = false;
        a.color = true;
        assert_non_null(strstr(printed(&a, &e), "\033[31merror  \033[0m gpu"));

        /* filters */
        a.color = false;
        assert_true(ctl_log_match(&a, &e));
        a.max_level = 2;
        assert_false(ctl_log_match(&a, &e));
        a.max_level = 3;
        a.session = "job1";
        assert_true(ctl_log_match(&a, &e));
        a.session = "job2";
        assert_false(ctl_log_match(&a, &e));
        /* a line not in lupined's format: shown as it is, and only unfiltered */
        struct lup_log_line raw = { .level = -1, .cuda_error = -1 };
        strcpy(raw.msg, "something else");
        assert_false(ctl_log_match(&a, &raw));
        a.session = NULL;
        a.max_level = 7;
        assert_true(ctl_log_match(&a, &raw));
        assert_string_equal(printed(&a, &raw), "something else\n");
        a.json = true;
        assert_string_equal(printed(&a, &raw), "{\"message\":\"something else\"}\n");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(format_parse),
                cmocka_unit_test(parse_refuses),
                cmocka_unit_test(print_and_filter),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
