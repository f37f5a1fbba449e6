/* SPDX-License-Identifier: MIT */
/*
 * A conformance suite for checkpoint providers: what
 * abi/lupine/checkpoint_provider.h promises, checked through the table
 * alone. test_provider_dir.c runs it against the built-in directory
 * provider, test_provider_example.c against the example library loaded
 * through lupine_provider_load(); both add their own tests on top.
 */
#ifndef LUP_TEST_PROVIDER_SUITE_H
#define LUP_TEST_PROVIDER_SUITE_H

#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "lupine/checkpoint_provider.h"

struct suite_env {
        const struct lupine_checkpoint_provider *p;
        bool needs_dir;         /* config is a fresh directory per test */
        const char *config;     /* else this config (NULL: the provider's default) */
        char dir[PATH_MAX];     /* that directory while a test runs */
};

/* cmocka setup/teardown: make and delete env->dir when needs_dir. */
int suite_setup(void **state);
int suite_teardown(void **state);

/* Appends the suite's tests (prestate = env) to out; returns how many. */
size_t suite_add_tests(struct CMUnitTest *out, size_t cap, struct suite_env *env);

/* The lease tests (provider_lease_suite.c; skipped without
 * LUPINE_CKPT_CAP_LEASES), which suite_add_tests appends too. */
size_t suite_add_lease_tests(struct CMUnitTest *out, size_t cap, struct suite_env *env);

/* The reference tests (provider_refer_suite.c; skipped without
 * LUPINE_CKPT_CAP_REFER), which suite_add_tests appends too. */
size_t suite_add_refer_tests(struct CMUnitTest *out, size_t cap, struct suite_env *env);

/* An instance on env->dir (or the provider's default config). */
struct lupine_ckpt_instance *suite_open(const struct suite_env *env);

/* Deterministic bytes: the content of an object seeded `seed` at `off`. */
void pattern_fill(uint8_t *buf, size_t len, uint64_t seed, uint64_t off);
/* Writes `size` bytes of pattern `seed` to `name` in pieces of `piece`;
 * returns the first error. */
int write_pattern(const struct lupine_checkpoint_provider *p, struct lupine_ckpt_save *s, const char *name,
                  uint64_t seed, uint64_t size, size_t piece);
/* Asserts that `name` holds exactly `size` bytes of pattern `seed`. */
void check_pattern(const struct lupine_checkpoint_provider *p, struct lupine_ckpt_load *l, const char *name,
                   uint64_t seed, uint64_t size);
/* Writes the three small objects of save_small(seed) into s, asserting
 * each write succeeded. */
void write_small(const struct lupine_checkpoint_provider *p, struct lupine_ckpt_save *s, uint64_t seed);
/* Saves epoch `epoch` of `session` with three small objects seeded by
 * `seed`, and asserts it committed. */
void save_small(const struct lupine_checkpoint_provider *p, struct lupine_ckpt_instance *inst, const char *session,
                uint64_t epoch, uint64_t seed);
/* Asserts that the newest epoch of `session` (epoch 0) or `want_epoch`
 * exactly is what save_small(seed) wrote. */
void check_small(const struct lupine_checkpoint_provider *p, struct lupine_ckpt_instance *inst, const char *session,
                 uint64_t epoch, uint64_t want_epoch, uint64_t seed);

/* rm -rf; 0 or -errno. */
int rm_rf(const char *path);

#endif
