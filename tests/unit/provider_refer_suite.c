/* SPDX-License-Identifier: MIT */
/*
 * The conformance suite's reference tests (ABI version 5,
 * LUPINE_CKPT_CAP_REFER): a commit keeps exactly the older epochs its save
 * referred to, kept epochs load by their exact number with their bytes
 * intact, the next commit that does not name one drops it, and save_refer
 * refuses what it must without spoiling the save. A provider without the
 * capability skips them.
 *
 * Every checkpoint here is save_small's three objects, seeded by its epoch
 * times 10, so check_small can tell each epoch's bytes from the others'.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "provider_load.h"
#include "provider_suite.h"

/* The seed of epoch e's objects. */
static uint64_t seed_of(uint64_t e)
{
        return e * 10;
}

static bool has_refer(const struct suite_env *env)
{
        return (lupine_provider_caps(env->p) & LUPINE_CKPT_CAP_REFER) && env->p->save_refer;
}

/* Commits epoch `epoch` of `session`, referring to the n epochs in refs
 * (each save_refer must succeed), with save_small's objects. */
static void save_referring(const struct suite_env *env, struct lupine_ckpt_instance *inst, const char *session,
                           uint64_t epoch, const uint64_t *refs, size_t n)
{
        const struct lupine_checkpoint_provider *p = env->p;
        struct lupine_ckpt_save *s = NULL;

        assert_int_equal(p->save_begin(inst, session, epoch, &s), 0);
        for (size_t i = 0; i < n; i++)
                if (p->save_refer(s, refs[i]) != 0)
                        fail_msg("epoch %llu: save_refer(%llu): %s", (unsigned long long)epoch,
                                 (unsigned long long)refs[i], p->last_error(inst));
        write_small(p, s, seed_of(epoch));
        assert_int_equal(p->save_commit(s), 0);
}

/* Asserts that epoch `epoch` of `session` loads (and holds its bytes). */
static void expect_kept(const struct suite_env *env, struct lupine_ckpt_instance *inst, const char *session,
                        uint64_t epoch)
{
        check_small(env->p, inst, session, epoch, epoch, seed_of(epoch));
}

/* Asserts that load_begin of exactly `epoch` is -ENOENT. */
static void expect_gone(const struct suite_env *env, struct lupine_ckpt_instance *inst, const char *session,
                        uint64_t epoch)
{
        struct lupine_ckpt_load *l = NULL;
        int r = env->p->load_begin(inst, session, epoch, &l, NULL);

        if (r != -ENOENT)
                fail_msg("session %s epoch %llu: load_begin %d, expected -ENOENT", session, (unsigned long long)epoch,
                         r);
}

/* Epoch 2 refers to 1: both load, 0 is 2. Epoch 3 refers to nothing: 1
 * and 2 go with its commit. */
static void refer_keeps_base(void **state)
{
        struct suite_env *env = *state;
        if (!has_refer(env))
                skip();
        struct lupine_ckpt_instance *inst = suite_open(env);
        const uint64_t one[] = { 1 };

        save_small(env->p, inst, "r", 1, seed_of(1));
        save_referring(env, inst, "r", 2, one, 1);
        check_small(env->p, inst, "r", 0, 2, seed_of(2));
        expect_kept(env, inst, "r", 1);
        expect_kept(env, inst, "r", 2);
        save_referring(env, inst, "r", 3, NULL, 0);
        check_small(env->p, inst, "r", 0, 3, seed_of(3));
        expect_gone(env, inst, "r", 1);
        expect_gone(env, inst, "r", 2);
        env->p->close(inst);
}

/* References are not chained: 2 refers to 1, 3 to 1 and 2, 4 only to 2.
 * After 4's commit, 1 (which only 2 and 3 named) and 3 are gone. */
static void refer_chain(void **state)
{
        struct suite_env *env = *state;
        if (!has_refer(env))
                skip();
        struct lupine_ckpt_instance *inst = suite_open(env);
        const uint64_t to2[] = { 1 }, to3[] = { 1, 2 }, to4[] = { 2 };

        save_small(env->p, inst, "c", 1, seed_of(1));
        save_referring(env, inst, "c", 2, to2, 1);
        save_referring(env, inst, "c", 3, to3, 2);
        for (uint64_t e = 1; e <= 3; e++)
                expect_kept(env, inst, "c", e);
        save_referring(env, inst, "c", 4, to4, 1);
        expect_gone(env, inst, "c", 1);
        expect_kept(env, inst, "c", 2);
        expect_gone(env, inst, "c", 3);
        expect_kept(env, inst, "c", 4);
        check_small(env->p, inst, "c", 0, 4, seed_of(4));
        env->p->close(inst);
}

/* What save_refer refuses, and that a refusal leaves the save usable: 0
 * and not-older epochs (-EINVAL), an epoch never committed and one an
 * earlier commit deleted (-ENOENT); a base named twice is 0. */
static void refer_errors(void **state)
{
        struct suite_env *env = *state;
        if (!has_refer(env))
                skip();
        const struct lupine_checkpoint_provider *p = env->p;
        struct lupine_ckpt_instance *inst = suite_open(env);
        struct lupine_ckpt_save *s = NULL;

        save_small(p, inst, "e", 1, seed_of(1));
        save_small(p, inst, "e", 2, seed_of(2)); /* 1 goes */
        assert_int_equal(p->save_begin(inst, "e", 5, &s), 0);
        assert_int_equal(p->save_refer(s, 0), -EINVAL);
        assert_int_equal(p->save_refer(s, 5), -EINVAL);
        assert_int_equal(p->save_refer(s, 6), -EINVAL);
        assert_int_equal(p->save_refer(s, UINT64_MAX), -EINVAL);
        assert_int_equal(p->save_refer(s, 3), -ENOENT); /* never committed */
        assert_int_equal(p->save_refer(s, 1), -ENOENT); /* deleted by 2's commit */
        assert_true(strlen(p->last_error(inst)) > 0);
        assert_int_equal(p->save_refer(s, 2), 0);
        assert_int_equal(p->save_refer(s, 2), 0);
        assert_int_equal(p->save_refer(s, 4), -ENOENT);
        write_small(p, s, seed_of(5));
        assert_int_equal(p->save_commit(s), 0);
        check_small(p, inst, "e", 0, 5, seed_of(5));
        expect_kept(env, inst, "e", 2);
        expect_gone(env, inst, "e", 1);
        expect_gone(env, inst, "e", 3);
        /* a save whose only reference was refused commits as a plain one */
        assert_int_equal(p->save_begin(inst, "e", 6, &s), 0);
        assert_int_equal(p->save_refer(s, 4), -ENOENT);
        write_small(p, s, seed_of(6));
        assert_int_equal(p->save_commit(s), 0);
        expect_kept(env, inst, "e", 6);
        expect_gone(env, inst, "e", 2);
        expect_gone(env, inst, "e", 5);
        /* another session's epoch is no base */
        save_small(p, inst, "other", 3, seed_of(3));
        assert_int_equal(p->save_begin(inst, "e", 7, &s), 0);
        assert_int_equal(p->save_refer(s, 3), -ENOENT);
        p->save_abort(s);
        p->close(inst);
}

/* LUPINE_CKPT_MAX_REFS distinct bases, not one more: epochs 1..17 each
 * refer to every earlier one (16 at most, so 1..16 stay with 17), then 18
 * names 1..17 and the 17th name is -E2BIG; naming one again is still 0. */
static void refer_too_many(void **state)
{
        struct suite_env *env = *state;
        if (!has_refer(env))
                skip();
        const struct lupine_checkpoint_provider *p = env->p;
        struct lupine_ckpt_instance *inst = suite_open(env);
        const uint64_t max = LUPINE_CKPT_MAX_REFS;
        uint64_t refs[LUPINE_CKPT_MAX_REFS];
        struct lupine_ckpt_save *s = NULL;

        for (uint64_t e = 1; e <= max + 1; e++) {
                for (uint64_t i = 0; i + 1 < e; i++)
                        refs[i] = i + 1;
                save_referring(env, inst, "m", e, refs, (size_t)(e - 1));
        }
        for (uint64_t e = 1; e <= max + 1; e++)
                expect_kept(env, inst, "m", e);
        assert_int_equal(p->save_begin(inst, "m", max + 2, &s), 0);
        for (uint64_t e = 1; e <= max; e++)
                assert_int_equal(p->save_refer(s, e), 0);
        assert_int_equal(p->save_refer(s, max + 1), -E2BIG);
        assert_int_equal(p->save_refer(s, 5), 0);
        write_small(p, s, seed_of(max + 2));
        assert_int_equal(p->save_commit(s), 0);
        for (uint64_t e = 1; e <= max; e++)
                expect_kept(env, inst, "m", e);
        expect_gone(env, inst, "m", max + 1);
        check_small(p, inst, "m", 0, max + 2, seed_of(max + 2));
        p->close(inst);
}

/* An aborted save that referred to a kept epoch changes nothing: the
 * newest and its base still load, and the next plain commit still drops
 * the base. */
static void refer_abort(void **state)
{
        struct suite_env *env = *state;
        if (!has_refer(env))
                skip();
        const struct lupine_checkpoint_provider *p = env->p;
        struct lupine_ckpt_instance *inst = suite_open(env);
        struct lupine_ckpt_save *s = NULL;
        const uint64_t one[] = { 1 };

        save_small(p, inst, "a", 1, seed_of(1));
        save_referring(env, inst, "a", 2, one, 1);
        assert_int_equal(p->save_begin(inst, "a", 3, &s), 0);
        assert_int_equal(p->save_refer(s, 1), 0);
        assert_int_equal(p->save_refer(s, 2), 0);
        write_small(p, s, seed_of(3));
        p->save_abort(s);
        check_small(p, inst, "a", 0, 2, seed_of(2));
        expect_kept(env, inst, "a", 1);
        expect_gone(env, inst, "a", 3);
        save_referring(env, inst, "a", 4, NULL, 0);
        expect_gone(env, inst, "a", 1);
        expect_gone(env, inst, "a", 2);
        expect_kept(env, inst, "a", 4);
        p->close(inst);
}

/* remove deletes the kept epochs with the newest. */
static void refer_remove(void **state)
{
        struct suite_env *env = *state;
        if (!has_refer(env))
                skip();
        const struct lupine_checkpoint_provider *p = env->p;
        struct lupine_ckpt_instance *inst = suite_open(env);
        const uint64_t one[] = { 1 };

        save_small(p, inst, "x", 1, seed_of(1));
        save_referring(env, inst, "x", 2, one, 1);
        assert_int_equal(p->remove(inst, "x"), 0);
        expect_gone(env, inst, "x", 0);
        expect_gone(env, inst, "x", 1);
        expect_gone(env, inst, "x", 2);
        assert_int_equal(p->remove(inst, "x"), -ENOENT);
        /* the session starts afresh: nothing of the old one to refer to */
        struct lupine_ckpt_save *s = NULL;
        assert_int_equal(p->save_begin(inst, "x", 3, &s), 0);
        assert_int_equal(p->save_refer(s, 1), -ENOENT);
        p->save_abort(s);
        p->close(inst);
}

struct listed {
        int n, n_r;
        uint64_t r_epoch;
};

static int count_listed(const struct lupine_ckpt_info *info, void *userdata)
{
        struct listed *l = userdata;

        l->n++;
        if (strcmp(info->session, "r") == 0) {
                l->n_r++;
                l->r_epoch = info->epoch;
        }
        return 0;
}

/* list reports the newest epoch of a session once, never a kept one. */
static void refer_list(void **state)
{
        struct suite_env *env = *state;
        if (!has_refer(env))
                skip();
        const struct lupine_checkpoint_provider *p = env->p;
        struct lupine_ckpt_instance *inst = suite_open(env);
        const uint64_t bases[] = { 1, 2 };
        struct listed l = { 0 };

        save_small(p, inst, "r", 1, seed_of(1));
        save_referring(env, inst, "r", 2, bases, 1);
        save_referring(env, inst, "r", 3, bases, 2);
        save_small(p, inst, "s", 9, seed_of(9));
        assert_int_equal(p->list(inst, count_listed, &l), 0);
        assert_int_equal(l.n, 2);
        assert_int_equal(l.n_r, 1);
        assert_int_equal(l.r_epoch, 3);
        p->close(inst);
}

/* save_sync (version 5, may be NULL) flushes midway: nothing shows before
 * the commit, and an object goes on where it stopped. */
static void sync_midway(void **state)
{
        struct suite_env *env = *state;
        const struct lupine_checkpoint_provider *p = env->p;
        if (p->abi_version < 5 || !p->save_sync)
                skip();
        struct lupine_ckpt_instance *inst = suite_open(env);
        struct lupine_ckpt_save *s = NULL;
        struct lupine_ckpt_load *l = NULL;
        uint64_t got = 0, seed = seed_of(2);
        static uint8_t buf[70000];

        save_small(p, inst, "a", 1, seed_of(1));
        assert_int_equal(p->save_begin(inst, "a", 2, &s), 0);
        pattern_fill(buf, sizeof(buf), seed + 1, 0); /* save_small's mem/000001 of seed */
        assert_int_equal(p->save_write(s, "mem/000001", buf, 30000), 0);
        assert_int_equal(p->save_sync(s), 0);
        assert_int_equal(p->load_begin(inst, "a", 0, &l, &got), 0);
        assert_int_equal(got, 1); /* nothing of epoch 2 is visible yet */
        p->load_end(l);
        assert_int_equal(p->save_write(s, "mem/000001", buf + 30000, sizeof(buf) - 30000), 0);
        assert_int_equal(write_pattern(p, s, "manifest", seed, 999, 100), 0);
        assert_int_equal(write_pattern(p, s, "empty", seed + 2, 0, 1), 0);
        assert_int_equal(p->save_sync(s), 0);
        assert_int_equal(p->save_commit(s), 0);
        check_small(p, inst, "a", 0, 2, seed);
        p->close(inst);
}

size_t suite_add_refer_tests(struct CMUnitTest *out, size_t cap, struct suite_env *env)
{
#define T(f) cmocka_unit_test_prestate_setup_teardown(f, suite_setup, suite_teardown, env)
        const struct CMUnitTest tests[] = {
                T(refer_keeps_base), T(refer_chain),  T(refer_errors), T(refer_too_many),
                T(refer_abort),      T(refer_remove), T(refer_list),   T(sync_midway),
        };
#undef T
        size_t n = sizeof(tests) / sizeof(tests[0]);

        if (n > cap)
                n = cap;
        memcpy(out, tests, n * sizeof(tests[0]));
        return n;
}
