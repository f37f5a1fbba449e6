/* SPDX-License-Identifier: MIT */
/* Log categories and levels (common/log.c): the --log-level spec, what each
 * category lets through, the spec handed to workers, the fields a sink
 * gets with the process context merged in. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "log.h"

static void specs(void **state)
{
        char why[160], spec[256];

        (void)state;
        lup_log_setup("test", LUP_LOG_INFO);
        assert_int_equal(lup_log_set_levels("warning,net=debug,checkpoint=err", why, sizeof(why)), 0);
        assert_int_equal(lup_log_cat_level(LUP_LOGC_CORE), LUP_LOG_WARNING);
        assert_int_equal(lup_log_cat_level(LUP_LOGC_NET), LUP_LOG_DEBUG);
        assert_int_equal(lup_log_cat_level(LUP_LOGC_CHECKPOINT), LUP_LOG_ERR);
        assert_int_equal(lup_log_cat_level(LUP_LOGC_GPU), LUP_LOG_WARNING);
        assert_int_equal(lup_log_max_level(), LUP_LOG_DEBUG);
        assert_true(lup_log_enabled(LUP_LOGC_NET, LUP_LOG_DEBUG));
        assert_false(lup_log_enabled(LUP_LOGC_GPU, LUP_LOG_INFO));
        lup_log_levels_spec(spec, sizeof(spec));
        assert_string_equal(spec, "warning,net=debug,checkpoint=error");
        /* the spec a worker gets gives the same levels */
        lup_log_setup("test", LUP_LOG_INFO);
        assert_int_equal(lup_log_set_levels(spec, why, sizeof(why)), 0);
        assert_int_equal(lup_log_cat_level(LUP_LOGC_NET), LUP_LOG_DEBUG);
        assert_int_equal(lup_log_cat_level(LUP_LOGC_CHECKPOINT), LUP_LOG_ERR);
        /* a category alone changes only that one; a later bare level all */
        assert_int_equal(lup_log_set_levels("tls=debug", why, sizeof(why)), 0);
        assert_int_equal(lup_log_cat_level(LUP_LOGC_TLS), LUP_LOG_DEBUG);
        assert_int_equal(lup_log_cat_level(LUP_LOGC_CORE), LUP_LOG_WARNING);
        assert_int_equal(lup_log_set_levels("nvml=err,info", why, sizeof(why)), 0);
        assert_int_equal(lup_log_cat_level(LUP_LOGC_NVML), LUP_LOG_INFO);
}

static void bad_specs(void **state)
{
        static const char *const bad[] = { "",      "loud",  "net=",        "=debug",          "foo=debug",
                                           "info,", ",info", "net=debug=x", "info,,net=debug", "INFO" };
        char why[160];

        (void)state;
        lup_log_setup("test", LUP_LOG_INFO);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                why[0] = 0;
                assert_int_equal(lup_log_set_levels(bad[i], why, sizeof(why)), -EINVAL);
                assert_true(why[0] != 0);
        }
        /* nothing changed on an error */
        for (int c = 0; c < LUP_LOGC_COUNT; c++)
                assert_int_equal(lup_log_cat_level(c), LUP_LOG_INFO);
}

static int got_cat, got_level;
static char got_msg[256], got_session[64], got_tenant[64], got_op[64];
static long got_err;

static void sink(int cat, int level, const struct lup_log_fields *f, const char *msg, void *userdata)
{
        (void)userdata;
        got_cat = cat;
        got_level = level;
        snprintf(got_msg, sizeof(got_msg), "%s", msg);
        snprintf(got_session, sizeof(got_session), "%s", f->session ? f->session : "(none)");
        snprintf(got_tenant, sizeof(got_tenant), "%s", f->tenant ? f->tenant : "(none)");
        snprintf(got_op, sizeof(got_op), "%s", f->op ? f->op : "(none)");
        got_err = f->cuda_error;
}

static void fields(void **state)
{
        char why[160];

        (void)state;
        lup_log_setup("test", LUP_LOG_INFO);
        assert_int_equal(lup_log_set_levels("info,gpu=debug", why, sizeof(why)), 0);
        lup_log_set_sink(sink, NULL);
        lup_log_set_context(NULL, NULL);
        lup_clogf(LUP_LOGC_NET, LUP_LOG_INFO, "hello %d", 7);
        assert_int_equal(got_cat, LUP_LOGC_NET);
        assert_string_equal(got_msg, "hello 7");
        assert_string_equal(got_session, "(none)");
        assert_int_equal(got_err, -1);
        got_msg[0] = 0;
        lup_clogf(LUP_LOGC_NET, LUP_LOG_DEBUG, "filtered");
        assert_string_equal(got_msg, "");
        lup_log_set_context("train", "t0123456789abcdef");
        struct lup_log_fields f = { .op = "cuLaunchKernel", .cuda_error = 700 };
        lup_flogf(LUP_LOGC_GPU, LUP_LOG_DEBUG, &f, "failed");
        assert_int_equal(got_level, LUP_LOG_DEBUG);
        assert_string_equal(got_session, "train");
        assert_string_equal(got_tenant, "t0123456789abcdef");
        assert_string_equal(got_op, "cuLaunchKernel");
        assert_int_equal(got_err, 700);
        /* a message's own session wins over the context */
        struct lup_log_fields g = { .session = "other", .cuda_error = -1 };
        lup_flogf(LUP_LOGC_SESSION, LUP_LOG_WARNING, &g, "x");
        assert_string_equal(got_session, "other");
        assert_string_equal(got_op, "(none)");
        lup_log_set_sink(NULL, NULL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(specs),
                cmocka_unit_test(bad_specs),
                cmocka_unit_test(fields),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
