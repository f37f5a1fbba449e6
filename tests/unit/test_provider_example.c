/* SPDX-License-Identifier: MIT */
/*
 * The provider loader, and the example provider (tests/providers/) passing
 * the conformance suite through it.
 *
 * argv: EXAMPLE.so BAD-abi.so BAD-size.so BAD-null.so BAD-nullname.so
 *       BAD-nosym.so BAD-nulltable.so V1.so BAD-direct.so V3.so BAD-leases.so
 *       BAD-v4size.so V2.so   (tests/providers/meson.build)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "provider_dir.h"
#include "provider_load.h"
#include "provider_suite.h"

enum {
        ARG_EXAMPLE = 1,
        ARG_ABI,
        ARG_SIZE,
        ARG_NULL,
        ARG_NULLNAME,
        ARG_NOSYM,
        ARG_NULLTABLE,
        ARG_V1,
        ARG_DIRECT,
        ARG_V3,
        ARG_LEASES,
        ARG_V4SIZE,
        ARG_V2,
        ARG_COUNT
};
static char **args;

static void loader_builtin(void **state)
{
        const struct lupine_checkpoint_provider *p = NULL;
        void *h = (void *)1;
        char err[256] = "junk";

        assert_int_equal(lupine_provider_load(NULL, &p, &h, err, sizeof(err)), 0);
        assert_ptr_equal(p, lupine_dir_provider());
        assert_null(h);
        assert_string_equal(err, "");
        assert_string_equal(p->name, "dir");
        lupine_provider_unload(h);
        /* NULL outputs are refused, a NULL error buffer is fine */
        assert_int_equal(lupine_provider_load(NULL, NULL, &h, NULL, 0), -EINVAL);
}

static void loader_example(void **state)
{
        const struct lupine_checkpoint_provider *p = NULL;
        void *h = NULL;
        char err[256];

        assert_int_equal(lupine_provider_load(args[ARG_EXAMPLE], &p, &h, err, sizeof(err)), 0);
        assert_non_null(h);
        assert_int_equal(p->abi_version, LUPINE_CHECKPOINT_ABI_VERSION);
        assert_string_equal(p->name, "example-memory");
        lupine_provider_unload(h);
}

/* An ABI version 1 provider (a table that ends at remove) still loads,
 * and has no version-2 capabilities. */
static void loader_accepts_v1(void **state)
{
        const struct lupine_checkpoint_provider *p = NULL;
        void *h = NULL;
        char err[256];

        assert_int_equal(lupine_provider_load(args[ARG_V1], &p, &h, err, sizeof(err)), 0);
        assert_int_equal(p->abi_version, 1);
        assert_int_equal(lupine_provider_caps(p), 0);
        lupine_provider_unload(h);
}

/* An ABI version 2 provider (a table that ends at save_write_at) still
 * loads, with its version-2 capabilities only. */
static void loader_accepts_v2(void **state)
{
        const struct lupine_checkpoint_provider *p = NULL;
        void *h = NULL;
        char err[256];

        assert_int_equal(lupine_provider_load(args[ARG_V2], &p, &h, err, sizeof(err)), 0);
        assert_int_equal(p->abi_version, 2);
        assert_int_equal(lupine_provider_caps(p), LUPINE_CKPT_CAP_CONCURRENT_READ);
        lupine_provider_unload(h);
}

/* An ABI version 3 provider (a table that ends at save_direct_done) still
 * loads; a LEASES bit in its caps means nothing there (the bit is version
 * 4's), so it has no leases and the daemon runs it single-host. */
static void loader_accepts_v3(void **state)
{
        const struct lupine_checkpoint_provider *p = NULL;
        void *h = NULL;
        char err[256];

        assert_int_equal(lupine_provider_load(args[ARG_V3], &p, &h, err, sizeof(err)), 0);
        assert_int_equal(p->abi_version, 3);
        assert_int_equal(lupine_provider_caps(p), LUPINE_CKPT_CAP_CONCURRENT_WRITE);
        lupine_provider_unload(h);
}

/* The example provider claims every capability there is; the suite's
 * concurrent_lanes, lease and refer tests then exercise them. */
static void example_caps(void **state)
{
        const struct lupine_checkpoint_provider *p = NULL;
        void *h = NULL;
        char err[256];

        assert_int_equal(lupine_provider_load(args[ARG_EXAMPLE], &p, &h, err, sizeof(err)), 0);
        assert_int_equal(lupine_provider_caps(p), LUPINE_CKPT_CAP_CONCURRENT_WRITE | LUPINE_CKPT_CAP_CONCURRENT_READ |
                                                          LUPINE_CKPT_CAP_DIRECT_WRITE | LUPINE_CKPT_CAP_LEASES |
                                                          LUPINE_CKPT_CAP_REFER);
        assert_non_null(p->save_write_at);
        assert_non_null(p->save_direct_get);
        assert_non_null(p->lease_claim);
        assert_non_null(p->save_fence);
        assert_non_null(p->save_refer);
        lupine_provider_unload(h);
}

static void expect_refused(int arg, int want, const char *words)
{
        const struct lupine_checkpoint_provider *p = (void *)1;
        void *h = (void *)2;
        char err[512] = "";

        assert_int_equal(lupine_provider_load(args[arg], &p, &h, err, sizeof(err)), want);
        if (!strstr(err, words))
                fail_msg("refusal of %s says \"%s\", expected \"%s\" in it", args[arg], err, words);
        assert_ptr_equal(p, (void *)1); /* outputs untouched */
        assert_ptr_equal(h, (void *)2);
}

static void loader_refuses_bad_tables(void **state)
{
        expect_refused(ARG_ABI, -ELIBBAD, "ABI version 99");
        expect_refused(ARG_SIZE, -ELIBBAD, "struct_size 16");
        expect_refused(ARG_NULL, -ELIBBAD, "callback remove is NULL");
        expect_refused(ARG_NULLNAME, -ELIBBAD, "name is NULL");
        expect_refused(ARG_NOSYM, -ELIBBAD, "does not export " LUPINE_CHECKPOINT_SYMBOL);
        expect_refused(ARG_NULLTABLE, -ELIBBAD, "returned NULL");
        expect_refused(ARG_DIRECT, -ELIBBAD, "claims direct writes");
        expect_refused(ARG_LEASES, -ELIBBAD, "claims leases but lacks a lease callback");
        expect_refused(ARG_V4SIZE, -ELIBBAD, "smaller than version 4's");
}

static void loader_refuses_missing_library(void **state)
{
        const struct lupine_checkpoint_provider *p = NULL;
        void *h = NULL;
        char err[512] = "";
        char tiny[8];

        assert_int_equal(lupine_provider_load("/nonexistent/libnothing.so", &p, &h, err, sizeof(err)), -ELIBACC);
        assert_non_null(strstr(err, "cannot load"));
        assert_null(p);
        /* a short error buffer is truncated, not overrun */
        assert_int_equal(lupine_provider_load("/nonexistent/libnothing.so", &p, &h, tiny, sizeof(tiny)), -ELIBACC);
        assert_int_equal(strlen(tiny), sizeof(tiny) - 1);
        /* not a shared library at all */
        assert_int_equal(lupine_provider_load("/etc/hostname", &p, &h, err, sizeof(err)), -ELIBACC);
}

/* Config "MIB,reserve": large writes are copied into blocks reserved at
 * open. Three epochs of 12 MiB in a 12 MiB pool: the first fills it, the
 * second (while the first is still committed) falls back to malloc, the
 * third reuses the blocks the second's commit gave back. Every epoch reads
 * back exactly. Then direct writes (ABI version 3): the region is the
 * pool, save_direct_get hands out blocks inside it until they run out
 * (-ENOBUFS: save_write_at takes the rest), a commit with a block not yet
 * reported done is refused, and what was written in place reads back. */
static void example_reserved_pool(void **state)
{
        const struct lupine_checkpoint_provider *p = NULL;
        struct lupine_ckpt_instance *inst = NULL;
        void *h = NULL;
        char err[256];
        const size_t unit = 4u << 20, last = (3u << 20) + 8; /* the last unit is short, still pooled */
        const uint64_t size = 2 * (uint64_t)unit + last;
        uint8_t *buf = malloc(unit);

        (void)state;
        assert_non_null(buf);
        assert_int_equal(lupine_provider_load(args[ARG_EXAMPLE], &p, &h, err, sizeof(err)), 0);
        assert_int_equal(p->open("12,bogus", &inst), -EINVAL);
        assert_int_equal(p->open("3,reserve", &inst), -EINVAL); /* less than one block */
        assert_int_equal(p->open("12,reserve", &inst), 0);
        for (uint64_t epoch = 1; epoch <= 3; epoch++) {
                struct lupine_ckpt_save *s = NULL;
                struct lupine_ckpt_load *l = NULL;
                uint64_t got_epoch = 0;
                assert_int_equal(p->save_begin(inst, "pool", epoch, &s), 0);
                /* written back to front, as lanes may finish */
                for (int u = 2; u >= 0; u--) {
                        size_t len = u == 2 ? last : unit;
                        pattern_fill(buf, len, epoch, (uint64_t)u * unit);
                        assert_int_equal(p->save_write_at(s, "mem/0", (uint64_t)u * unit, buf, len), 0);
                }
                assert_int_equal(write_pattern(p, s, "manifest", 100 + epoch, 5000, 999), 0);
                assert_int_equal(p->save_commit(s), 0);
                assert_int_equal(p->load_begin(inst, "pool", 0, &l, &got_epoch), 0);
                assert_int_equal(got_epoch, epoch);
                check_pattern(p, l, "mem/0", epoch, size);
                check_pattern(p, l, "manifest", 100 + epoch, 5000);
                p->load_end(l);
        }
        /* no region without a pool */
        struct lupine_ckpt_instance *plain = NULL;
        void *base = NULL;
        size_t region = 0;
        assert_int_equal(p->open("16", &plain), 0);
        assert_int_equal(p->direct_region(plain, &base, &region), -ENOTSUP);
        p->close(plain);
        assert_int_equal(p->direct_region(inst, &base, &region), 0);
        assert_int_equal(region, 12u << 20);
        for (uint64_t epoch = 4; epoch <= 5; epoch++) {
                struct lupine_ckpt_save *s = NULL;
                struct lupine_ckpt_load *l = NULL;
                void *at[3] = { NULL };
                assert_int_equal(p->save_begin(inst, "pool", epoch, &s), 0);
                /* epoch 3 holds all three blocks until epoch 4 commits:
                 * epoch 4 gets none, epoch 5 gets them back */
                for (int u = 0; u < 3; u++) {
                        size_t len = u == 2 ? last : unit;
                        int r = p->save_direct_get(s, "mem/0", (uint64_t)u * unit, len, &at[u]);
                        if (epoch == 4) {
                                assert_int_equal(r, -ENOBUFS);
                                pattern_fill(buf, len, epoch, (uint64_t)u * unit);
                                assert_int_equal(p->save_write_at(s, "mem/0", (uint64_t)u * unit, buf, len), 0);
                                continue;
                        }
                        assert_int_equal(r, 0);
                        assert_true((uint8_t *)at[u] >= (uint8_t *)base &&
                                    (uint8_t *)at[u] + len <= (uint8_t *)base + region);
                        pattern_fill(at[u], len, epoch, (uint64_t)u * unit);
                }
                if (epoch == 5) {
                        assert_int_equal(p->save_direct_done(s, "mem/0", 0, unit), 0);
                        assert_int_equal(p->save_direct_done(s, "mem/0", unit, unit), 0);
                        /* one still out: a commit now would lose bytes */
                        struct lupine_ckpt_save *early = s;
                        assert_int_equal(p->save_commit(early), -EINVAL);
                        assert_non_null(strstr(p->last_error(inst), "not reported done"));
                        /* the refused commit aborted the save; epoch 4 stays */
                        assert_int_equal(p->load_begin(inst, "pool", 0, &l, NULL), 0);
                        check_pattern(p, l, "mem/0", 4, size);
                        p->load_end(l);
                        /* again, this time in full */
                        assert_int_equal(p->save_begin(inst, "pool", epoch, &s), 0);
                        for (int u = 0; u < 3; u++) {
                                size_t len = u == 2 ? last : unit;
                                assert_int_equal(p->save_direct_get(s, "mem/0", (uint64_t)u * unit, len, &at[u]), 0);
                                pattern_fill(at[u], len, epoch, (uint64_t)u * unit);
                                assert_int_equal(p->save_direct_done(s, "mem/0", (uint64_t)u * unit, len), 0);
                        }
                }
                assert_int_equal(p->save_commit(s), 0);
                assert_int_equal(p->load_begin(inst, "pool", 0, &l, NULL), 0);
                check_pattern(p, l, "mem/0", epoch, size);
                p->load_end(l);
        }
        p->close(inst);
        lupine_provider_unload(h);
        free(buf);
}

int main(int argc, char **argv)
{
        static struct suite_env env, reserved;
        struct CMUnitTest tests[64] = {
                cmocka_unit_test(loader_builtin),
                cmocka_unit_test(loader_example),
                cmocka_unit_test(loader_refuses_bad_tables),
                cmocka_unit_test(loader_refuses_missing_library),
                cmocka_unit_test(loader_accepts_v1),
                cmocka_unit_test(loader_accepts_v2),
                cmocka_unit_test(loader_accepts_v3),
                cmocka_unit_test(example_caps),
                cmocka_unit_test(example_reserved_pool),
        };
        size_t n = 9;
        void *h = NULL;
        char err[512];
        int r;

        if (argc != ARG_COUNT) {
                fprintf(stderr,
                        "usage: %s EXAMPLE.so BAD-abi BAD-size BAD-null BAD-nullname BAD-nosym BAD-nulltable V1 BAD-direct V3 BAD-leases BAD-v4size V2\n",
                        argv[0]);
                return 2;
        }
        args = argv;
        if (lupine_provider_load(args[ARG_EXAMPLE], &env.p, &h, err, sizeof(err)) < 0) {
                fprintf(stderr, "%s\n", err);
                return 1;
        }
        env.needs_dir = false;
        n += suite_add_tests(tests + n, sizeof(tests) / sizeof(tests[0]) - n, &env);
        /* again with memory reserved up front: pool blocks, and direct writes */
        reserved = (struct suite_env){ .p = env.p, .config = "256,reserve" };
        n += suite_add_tests(tests + n, sizeof(tests) / sizeof(tests[0]) - n, &reserved);
        r = _cmocka_run_group_tests("provider-example", tests, n, NULL, NULL);
        lupine_provider_unload(h);
        return r;
}
