/* SPDX-License-Identifier: MIT */
/* The provider conformance suite (provider_suite.h). */
#include "provider_suite.h"

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB (1u << 20)

/* ---- helpers */

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

int rm_rf(const char *path)
{
        return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) < 0 ? -errno : 0;
}

int suite_setup(void **state)
{
        struct suite_env *env = *state;
        const char *tmp = getenv("TMPDIR");

        if (!env->needs_dir) {
                env->dir[0] = '\0';
                return 0;
        }
        snprintf(env->dir, sizeof(env->dir), "%s/lupine-ckpt-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        return mkdtemp(env->dir) ? 0 : -1;
}

int suite_teardown(void **state)
{
        struct suite_env *env = *state;

        if (env->needs_dir && env->dir[0])
                rm_rf(env->dir);
        env->dir[0] = '\0';
        return 0;
}

struct lupine_ckpt_instance *suite_open(const struct suite_env *env)
{
        struct lupine_ckpt_instance *inst = NULL;

        assert_int_equal(env->p->open(env->needs_dir ? env->dir : env->config, &inst), 0);
        assert_non_null(inst);
        return inst;
}

static uint64_t splitmix(uint64_t x)
{
        x += 0x9e3779b97f4a7c15ull;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        return x ^ (x >> 31);
}

void pattern_fill(uint8_t *buf, size_t len, uint64_t seed, uint64_t off)
{
        uint64_t word_idx = UINT64_MAX, word = 0;

        for (size_t i = 0; i < len; i++) {
                uint64_t o = off + i;
                if (o / 8 != word_idx) {
                        word_idx = o / 8;
                        word = splitmix(seed * 0x100000001b3ull ^ word_idx);
                }
                buf[i] = (uint8_t)(word >> ((o % 8) * 8));
        }
}

int write_pattern(const struct lupine_checkpoint_provider *p, struct lupine_ckpt_save *s, const char *name,
                  uint64_t seed, uint64_t size, size_t piece)
{
        uint8_t *buf = malloc(piece ? piece : 1);
        uint64_t off = 0;
        int r = 0;

        assert_non_null(buf);
        if (size == 0)
                r = p->save_write(s, name, NULL, 0);
        while (r == 0 && off < size) {
                size_t n = size - off < piece ? (size_t)(size - off) : piece;
                pattern_fill(buf, n, seed, off);
                r = p->save_write(s, name, buf, n);
                off += n;
        }
        free(buf);
        return r;
}

void check_pattern(const struct lupine_checkpoint_provider *p, struct lupine_ckpt_load *l, const char *name,
                   uint64_t seed, uint64_t size)
{
        const size_t chunk = 3 * MiB + 17; /* odd, so reads straddle the writes' pieces */
        uint8_t *got = malloc(chunk), *want = malloc(chunk);
        uint64_t have = UINT64_MAX, off = 0;

        assert_non_null(got);
        assert_non_null(want);
        assert_int_equal(p->load_size(l, name, &have), 0);
        assert_int_equal(have, size);
        while (off < size) {
                int64_t n = p->load_read(l, name, off, got, chunk);
                assert_true(n > 0);
                assert_true((uint64_t)n <= size - off);
                pattern_fill(want, (size_t)n, seed, off);
                assert_memory_equal(got, want, (size_t)n);
                off += (uint64_t)n;
        }
        assert_int_equal(p->load_read(l, name, size, got, chunk), 0);
        assert_int_equal(p->load_read(l, name, size + 12345, got, chunk), 0);
        assert_int_equal(p->load_read(l, name, UINT64_MAX - 5, got, chunk), 0);
        assert_int_equal(p->load_read(l, name, 0, got, 0), 0);
        free(got);
        free(want);
}

void write_small(const struct lupine_checkpoint_provider *p, struct lupine_ckpt_save *s, uint64_t seed)
{
        assert_int_equal(write_pattern(p, s, "manifest", seed, 999, 100), 0);
        assert_int_equal(write_pattern(p, s, "mem/000001", seed + 1, 70000, 4096), 0);
        assert_int_equal(write_pattern(p, s, "empty", seed + 2, 0, 1), 0);
}

void save_small(const struct lupine_checkpoint_provider *p, struct lupine_ckpt_instance *inst, const char *session,
                uint64_t epoch, uint64_t seed)
{
        struct lupine_ckpt_save *s = NULL;

        assert_int_equal(p->save_begin(inst, session, epoch, &s), 0);
        write_small(p, s, seed);
        assert_int_equal(p->save_commit(s), 0);
}

void check_small(const struct lupine_checkpoint_provider *p, struct lupine_ckpt_instance *inst, const char *session,
                 uint64_t epoch, uint64_t want_epoch, uint64_t seed)
{
        struct lupine_ckpt_load *l = NULL;
        uint64_t got_epoch = 0;

        assert_int_equal(p->load_begin(inst, session, epoch, &l, &got_epoch), 0);
        assert_int_equal(got_epoch, want_epoch);
        check_pattern(p, l, "manifest", seed, 999);
        check_pattern(p, l, "mem/000001", seed + 1, 70000);
        check_pattern(p, l, "empty", seed + 2, 0);
        p->load_end(l);
}

/* ---- the tests */

/* Several objects in interleaved pieces: a 64 MiB one in 1 MiB pieces, one
 * in odd pieces, empty ones, one byte. */
static void roundtrip(void **state)
{
        struct suite_env *env = *state;
        const struct lupine_checkpoint_provider *p = env->p;
        struct lupine_ckpt_instance *inst = suite_open(env);
        struct lupine_ckpt_save *s = NULL;
        struct lupine_ckpt_load *l = NULL;
        const uint64_t big = 64ull * MiB, odd = 3ull * MiB + 17, odd_piece = 65537;
        uint8_t *buf = malloc(MiB);
        uint64_t epoch = 0, odd_off = 0;

        assert_non_null(buf);
        assert_int_equal(p->save_begin(inst, "job-1", 7, &s), 0);
        assert_int_equal(write_pattern(p, s, "manifest", 1, 1000, 1000), 0);
        for (uint64_t off = 0; off < big; off += MiB) {
                pattern_fill(buf, MiB, 2, off);
                assert_int_equal(p->save_write(s, "mem/000001", buf, MiB), 0);
                if (odd_off < odd) {
                        size_t n = odd - odd_off < odd_piece ? (size_t)(odd - odd_off) : odd_piece;
                        pattern_fill(buf, n, 3, odd_off);
                        assert_int_equal(p->save_write(s, "mem/000002", buf, n), 0);
                        odd_off += n;
                }
                if (off == 10 * MiB) {
                        assert_int_equal(p->save_write(s, "empty", buf, 0), 0);
                        assert_int_equal(p->save_write(s, "mem/empty2", NULL, 0), 0);
                        pattern_fill(buf, 1, 4, 0);
                        assert_int_equal(p->save_write(s, "x.y_z-1", buf, 1), 0);
                }
        }
        while (odd_off < odd) {
                size_t n = odd - odd_off < odd_piece ? (size_t)(odd - odd_off) : odd_piece;
                pattern_fill(buf, n, 3, odd_off);
                assert_int_equal(p->save_write(s, "mem/000002", buf, n), 0);
                odd_off += n;
        }
        /* nothing of the save is visible before commit */
        assert_int_equal(p->load_begin(inst, "job-1", 0, &l, &epoch), -ENOENT);
        assert_int_equal(p->save_commit(s), 0);

        assert_int_equal(p->load_begin(inst, "job-1", 0, &l, &epoch), 0);
        assert_int_equal(epoch, 7);
        check_pattern(p, l, "manifest", 1, 1000);
        check_pattern(p, l, "mem/000001", 2, big);
        check_pattern(p, l, "mem/000002", 3, odd);
        check_pattern(p, l, "empty", 0, 0);
        check_pattern(p, l, "mem/empty2", 0, 0);
        check_pattern(p, l, "x.y_z-1", 4, 1);
        p->load_end(l);
        p->close(inst);
        free(buf);
}

/* Many small pieces alternating between objects keep their order. */
static void interleaved_small_pieces(void **state)
{
        struct suite_env *env = *state;
        const struct lupine_checkpoint_provider *p = env->p;
        struct lupine_ckpt_instance *inst = suite_open(env);
        struct lupine_ckpt_save *s = NULL;
        struct lupine_ckpt_load *l = NULL;
        const char *names[] = { "a", "b/c", "b/d/e" };
        uint8_t buf[257];
        uint64_t offs[3] = { 0 };

        assert_int_equal(p->save_begin(inst, "small", 1, &s), 0);
        for (int i = 0; i < 900; i++) {
                int k = i % 3;
                size_t n = 1 + (size_t)(i * 7) % sizeof(buf);
                pattern_fill(buf, n, 10 + (uint64_t)k, offs[k]);
                assert_int_equal(p->save_write(s, names[k], buf, n), 0);
                offs[k] += n;
        }
        assert_int_equal(p->save_commit(s), 0);
        assert_int_equal(p->load_begin(inst, "small", 1, &l, NULL), 0);
        for (int k = 0; k < 3; k++)
                check_pattern(p, l, names[k], 10 + (uint64_t)k, offs[k]);
        p->load_end(l);
        p->close(inst);
}

static void newest_and_exact_epoch(void **state)
{
        struct suite_env *env = *state;
        const struct lupine_checkpoint_provider *p = env->p;
        struct lupine_ckpt_instance *inst = suite_open(env);
        struct lupine_ckpt_save *s = NULL;
        struct lupine_ckpt_load *l = NULL;

        save_small(p, inst, "sess", 1, 100);
        check_small(p, inst, "sess", 0, 1, 100);
        check_small(p, inst, "sess", 1, 1, 100);
        save_small(p, inst, "sess", 2, 200);
        check_small(p, inst, "sess", 0, 2, 200);
        check_small(p, inst, "sess", 2, 2, 200);
        /* epoch 1 went once epoch 2 was committed */
        assert_int_equal(p->load_begin(inst, "sess", 1, &l, NULL), -ENOENT);
        assert_int_equal(p->load_begin(inst, "sess", 3, &l, NULL), -ENOENT);
        /* epochs only grow; 0 is "newest" and cannot be saved */
        assert_int_equal(p->save_begin(inst, "sess", 2, &s), -EEXIST);
        assert_int_equal(p->save_begin(inst, "sess", 1, &s), -EEXIST);
        assert_true(p->last_error(inst)[0] != '\0');
        assert_int_equal(p->save_begin(inst, "sess", 0, &s), -EINVAL);
        /* a large epoch is fine */
        save_small(p, inst, "sess", UINT64_MAX, 300);
        check_small(p, inst, "sess", 0, UINT64_MAX, 300);
        p->close(inst);
}

struct seen {
        int n;
        char names[8][129];
        uint64_t epochs[8];
        uint64_t bytes[8];
        int stop_after;
};

static int collect(const struct lupine_ckpt_info *info, void *userdata)
{
        struct seen *seen = userdata;

        if (seen->n < 8) {
                snprintf(seen->names[seen->n], sizeof(seen->names[0]), "%s", info->session);
                seen->epochs[seen->n] = info->epoch;
                seen->bytes[seen->n] = info->bytes;
        }
        seen->n++;
        return seen->stop_after && seen->n >= seen->stop_after ? 42 : 0;
}

static int find_seen(const struct seen *seen, const char *name)
{
        for (int i = 0; i < seen->n && i < 8; i++)
                if (strcmp(seen->names[i], name) == 0)
                        return i;
        return -1;
}

static void list_sessions(void **state)
{
        struct suite_env *env = *state;
        const struct lupine_checkpoint_provider *p = env->p;
        struct lupine_ckpt_instance *inst = suite_open(env);
        struct lupine_ckpt_save *s = NULL;
        struct seen seen = { 0 };
        int i;

        assert_int_equal(p->list(inst, collect, &seen), 0);
        assert_int_equal(seen.n, 0);
        save_small(p, inst, "alpha", 1, 1);
        save_small(p, inst, "beta", 5, 2);
        save_small(p, inst, "beta", 6, 3);
        save_small(p, inst, "gamma", 9, 4);
        /* a save in progress is not listed */
        assert_int_equal(p->save_begin(inst, "delta", 1, &s), 0);
        assert_int_equal(write_pattern(p, s, "manifest", 1, 10, 10), 0);

        assert_int_equal(p->list(inst, collect, &seen), 0);
        assert_int_equal(seen.n, 3);
        assert_true((i = find_seen(&seen, "alpha")) >= 0);
        assert_int_equal(seen.epochs[i], 1);
        assert_true((i = find_seen(&seen, "beta")) >= 0);
        assert_int_equal(seen.epochs[i], 6);
        assert_true(seen.bytes[i] == 0 || seen.bytes[i] == 999 + 70000);
        assert_true((i = find_seen(&seen, "gamma")) >= 0);
        assert_int_equal(seen.epochs[i], 9);
        assert_int_equal(find_seen(&seen, "delta"), -1);

        /* a non-zero return stops the listing and comes back */
        memset(&seen, 0, sizeof(seen));
        seen.stop_after = 2;
        assert_int_equal(p->list(inst, collect, &seen), 42);
        assert_int_equal(seen.n, 2);
        p->save_abort(s);
        p->close(inst);
}

static void remove_session(void **state)
{
        struct suite_env *env = *state;
        const struct lupine_checkpoint_provider *p = env->p;
        struct lupine_ckpt_instance *inst = suite_open(env);
        struct lupine_ckpt_load *l = NULL;
        struct seen seen = { 0 };

        save_small(p, inst, "keep", 1, 1);
        save_small(p, inst, "drop", 1, 2);
        save_small(p, inst, "drop", 2, 3);
        assert_int_equal(p->remove(inst, "drop"), 0);
        assert_int_equal(p->load_begin(inst, "drop", 0, &l, NULL), -ENOENT);
        assert_int_equal(p->load_begin(inst, "drop", 2, &l, NULL), -ENOENT);
        assert_int_equal(p->remove(inst, "drop"), -ENOENT);
        assert_int_equal(p->remove(inst, "never-was"), -ENOENT);
        assert_int_equal(p->list(inst, collect, &seen), 0);
        assert_int_equal(seen.n, 1);
        assert_string_equal(seen.names[0], "keep");
        check_small(p, inst, "keep", 0, 1, 1);
        /* the name can be used again, from any epoch */
        save_small(p, inst, "drop", 1, 4);
        check_small(p, inst, "drop", 0, 1, 4);
        p->close(inst);
}

static void abort_leaves_nothing(void **state)
{
        struct suite_env *env = *state;
        const struct lupine_checkpoint_provider *p = env->p;
        struct lupine_ckpt_instance *inst = suite_open(env);
        struct lupine_ckpt_save *s = NULL;
        struct lupine_ckpt_load *l = NULL;
        struct seen seen = { 0 };

        /* a new session, aborted: nothing */
        assert_int_equal(p->save_begin(inst, "fresh", 1, &s), 0);
        assert_int_equal(write_pattern(p, s, "manifest", 1, 5000, 333), 0);
        p->save_abort(s);
        assert_int_equal(p->load_begin(inst, "fresh", 0, &l, NULL), -ENOENT);
        assert_int_equal(p->list(inst, collect, &seen), 0);
        assert_int_equal(seen.n, 0);

        /* an existing session, aborted: the older epoch, unchanged */
        save_small(p, inst, "old", 1, 10);
        assert_int_equal(p->save_begin(inst, "old", 2, &s), 0);
        assert_int_equal(write_pattern(p, s, "manifest", 99, 5000, 333), 0);
        assert_int_equal(write_pattern(p, s, "mem/000001", 98, 5000, 333), 0);
        p->save_abort(s);
        check_small(p, inst, "old", 0, 1, 10);
        /* and the aborted epoch can be saved again */
        save_small(p, inst, "old", 2, 20);
        check_small(p, inst, "old", 0, 2, 20);
        p->close(inst);
}

static void bad_names(void **state)
{
        struct suite_env *env = *state;
        const struct lupine_checkpoint_provider *p = env->p;
        struct lupine_ckpt_instance *inst = suite_open(env);
        struct lupine_ckpt_save *s = NULL;
        struct lupine_ckpt_load *l = NULL;
        char long_obj[300], long_session[200];
        const char *bad_objects[] = { "..", "../x", "a/../b", "a/..", "/abs", "/etc/passwd", "", "a b", "a\\b",
                                      "a:b", "a\nb", "ä", long_obj };
        const char *bad_sessions[] = { "", "a/b", "..a/b", "a b", "/abs", long_session };
        uint8_t byte = 1;

        memset(long_obj, 'o', 256);
        long_obj[256] = '\0';
        memset(long_session, 's', 129);
        long_session[129] = '\0';

        for (size_t i = 0; i < sizeof(bad_sessions) / sizeof(bad_sessions[0]); i++) {
                assert_int_equal(p->save_begin(inst, bad_sessions[i], 1, &s), -EINVAL);
                assert_true(p->last_error(inst)[0] != '\0');
                assert_int_equal(p->load_begin(inst, bad_sessions[i], 0, &l, NULL), -EINVAL);
                assert_int_equal(p->remove(inst, bad_sessions[i]), -EINVAL);
        }
        assert_int_equal(p->save_begin(inst, "names", 1, &s), 0);
        for (size_t i = 0; i < sizeof(bad_objects) / sizeof(bad_objects[0]); i++) {
                assert_int_equal(p->save_write(s, bad_objects[i], &byte, 1), -EINVAL);
                assert_true(p->last_error(inst)[0] != '\0');
        }
        /* the longest names are fine, and a refused name does not spoil the save */
        long_obj[255] = '\0';
        memset(long_session, 's', 128);
        long_session[128] = '\0';
        assert_int_equal(p->save_write(s, long_obj, &byte, 1), 0);
        assert_int_equal(p->save_write(s, "ok", &byte, 1), 0);
        assert_int_equal(p->save_commit(s), 0);
        assert_int_equal(p->load_begin(inst, "names", 0, &l, NULL), 0);
        uint64_t size = 0;
        uint8_t got = 0;
        assert_int_equal(p->load_size(l, long_obj, &size), 0);
        assert_int_equal(size, 1);
        assert_int_equal(p->load_read(l, "ok", 0, &got, 1), 1);
        assert_int_equal(got, byte);
        p->load_end(l);
        save_small(p, inst, long_session, 1, 5);
        check_small(p, inst, long_session, 0, 1, 5);
        p->close(inst);
}

static void missing_things(void **state)
{
        struct suite_env *env = *state;
        const struct lupine_checkpoint_provider *p = env->p;
        struct lupine_ckpt_instance *inst = suite_open(env);
        struct lupine_ckpt_load *l = NULL;
        uint64_t size = 77;
        uint8_t buf[8];

        assert_int_equal(p->load_begin(inst, "nobody", 0, &l, NULL), -ENOENT);
        assert_true(p->last_error(inst)[0] != '\0');
        save_small(p, inst, "somebody", 3, 1);
        assert_int_equal(p->load_begin(inst, "somebody", 0, &l, NULL), 0);
        assert_int_equal(p->load_size(l, "nothing-here", &size), -ENOENT);
        assert_int_equal(size, 77); /* untouched on failure */
        assert_int_equal(p->load_read(l, "nothing-here", 0, buf, sizeof(buf)), -ENOENT);
        assert_int_equal(p->load_size(l, "mem", &size), -ENOENT); /* a directory is not an object */
        assert_int_equal(p->load_size(l, "../x", &size), -EINVAL);
        p->load_end(l);
        p->close(inst);
}

/* A save with no objects at all is a checkpoint too. */
static void empty_save(void **state)
{
        struct suite_env *env = *state;
        const struct lupine_checkpoint_provider *p = env->p;
        struct lupine_ckpt_instance *inst = suite_open(env);
        struct lupine_ckpt_save *s = NULL;
        struct lupine_ckpt_load *l = NULL;
        struct seen seen = { 0 };
        uint64_t epoch = 0, size;

        assert_int_equal(p->save_begin(inst, "nothing", 4, &s), 0);
        assert_int_equal(p->save_commit(s), 0);
        assert_int_equal(p->load_begin(inst, "nothing", 0, &l, &epoch), 0);
        assert_int_equal(epoch, 4);
        assert_int_equal(p->load_size(l, "manifest", &size), -ENOENT);
        p->load_end(l);
        assert_int_equal(p->list(inst, collect, &seen), 0);
        assert_int_equal(seen.n, 1);
        assert_int_equal(seen.epochs[0], 4);
        assert_int_equal(seen.bytes[0], 0);
        p->close(inst);
}

/* Version-2 capabilities, as the daemon's lanes use them: UNITS pieces of
 * two objects written by THREADS threads at once with save_write_at, each
 * thread taking every THREADS-th piece from the end backwards, then read
 * back by THREADS threads at once from odd offsets. A hole makes the commit
 * fail and leaves the previous epoch. Skipped for a provider without the
 * capabilities. */
#define CW_UNITS 96
#define CW_UNIT_LEN 40000
#define CW_THREADS 8

struct cw {
        const struct lupine_checkpoint_provider *p;
        struct lupine_ckpt_save *save;
        struct lupine_ckpt_load *load;
        int idx, rc;
        bool direct;    /* save_direct_get where it gives room (version 3) */
        int n_direct;   /* ranges written in place */
};

static const char *cw_object(int u)
{
        return u % 2 ? "mem/odd" : "mem/even";
}

static void *cw_write(void *arg)
{
        struct cw *c = arg;
        uint8_t *b = malloc(CW_UNIT_LEN);
        for (int u = CW_UNITS - 1 - c->idx; u >= 0 && c->rc == 0 && b; u -= CW_THREADS) {
                uint64_t off = (uint64_t)(u / 2) * CW_UNIT_LEN;
                void *at = NULL;
                if (c->direct) {
                        c->rc = c->p->save_direct_get(c->save, cw_object(u), off, CW_UNIT_LEN, &at);
                        if (c->rc == 0) {
                                pattern_fill(at, CW_UNIT_LEN, (uint64_t)(u % 2), off);
                                c->rc = c->p->save_direct_done(c->save, cw_object(u), off, CW_UNIT_LEN);
                                c->n_direct++;
                                continue;
                        }
                        if (c->rc != -ENOBUFS)
                                break;
                }
                pattern_fill(b, CW_UNIT_LEN, (uint64_t)(u % 2), off);
                c->rc = c->p->save_write_at(c->save, cw_object(u), off, b, CW_UNIT_LEN);
        }
        if (!b)
                c->rc = -ENOMEM;
        free(b);
        return NULL;
}

static void *cw_read(void *arg)
{
        struct cw *c = arg;
        const size_t size = (size_t)CW_UNITS / 2 * CW_UNIT_LEN, len = 5 * CW_UNIT_LEN / 2;
        uint8_t *b = malloc(len), *want = malloc(len);
        for (size_t off = (size_t)c->idx * 777; off < size && c->rc == 0 && b && want; off += len * CW_THREADS) {
                for (int o = 0; o < 2 && c->rc == 0; o++) {
                        int64_t n = c->p->load_read(c->load, cw_object(o), off, b, len);
                        size_t n_want = size - off < len ? size - off : len;
                        pattern_fill(want, n_want, (uint64_t)o, off);
                        if (n != (int64_t)n_want)
                                c->rc = -EIO;
                        else if (memcmp(b, want, n_want) != 0)
                                c->rc = -EBADMSG;
                }
        }
        if (!b || !want)
                c->rc = -ENOMEM;
        free(b);
        free(want);
        return NULL;
}

/* concurrent_lanes, or concurrent_direct when direct: the writes go
 * through save_direct_get/save_direct_done (version 3) where the provider
 * has room, through save_write_at where it says -ENOBUFS. */
static void lanes_common(void **state, bool direct)
{
        const struct suite_env *env = *state;
        const struct lupine_checkpoint_provider *p = env->p;
        const uint64_t both = LUPINE_CKPT_CAP_CONCURRENT_WRITE | LUPINE_CKPT_CAP_CONCURRENT_READ;
        struct lupine_ckpt_save *save;
        struct lupine_ckpt_load *load;
        struct cw c[CW_THREADS];
        pthread_t t[CW_THREADS];
        uint64_t epoch, size;
        int n_direct = 0;

        if (p->abi_version < 2 || (p->caps & both) != both)
                skip();
        if (direct && (p->abi_version < 3 || !(p->caps & LUPINE_CKPT_CAP_DIRECT_WRITE)))
                skip();
        struct lupine_ckpt_instance *inst = suite_open(env);
        if (direct) {
                void *base = NULL;
                size_t len = 0;
                int r = p->direct_region(inst, &base, &len);
                if (r == -ENOTSUP) { /* this instance has no region (its config) */
                        p->close(inst);
                        skip();
                }
                assert_int_equal(r, 0);
                assert_non_null(base);
                assert_true(len > 0);
        }
        assert_int_equal(p->save_begin(inst, "cw", 1, &save), 0);
        for (int i = 0; i < CW_THREADS; i++) {
                c[i] = (struct cw){ .p = p, .save = save, .idx = i, .direct = direct };
                assert_int_equal(pthread_create(&t[i], NULL, cw_write, &c[i]), 0);
        }
        for (int i = 0; i < CW_THREADS; i++) {
                pthread_join(t[i], NULL);
                assert_int_equal(c[i].rc, 0);
                n_direct += c[i].n_direct;
        }
        if (direct)
                assert_true(n_direct > 0); /* a region that never has room is no region */
        assert_int_equal(p->save_commit(save), 0);
        assert_int_equal(p->load_begin(inst, "cw", 0, &load, &epoch), 0);
        for (int o = 0; o < 2; o++) {
                assert_int_equal(p->load_size(load, cw_object(o), &size), 0);
                assert_int_equal(size, (uint64_t)CW_UNITS / 2 * CW_UNIT_LEN);
        }
        for (int i = 0; i < CW_THREADS; i++) {
                c[i] = (struct cw){ .p = p, .load = load, .idx = i };
                assert_int_equal(pthread_create(&t[i], NULL, cw_read, &c[i]), 0);
        }
        for (int i = 0; i < CW_THREADS; i++) {
                pthread_join(t[i], NULL);
                assert_int_equal(c[i].rc, 0);
        }
        p->load_end(load);
        /* a hole: the commit refuses, and epoch 1 stays */
        uint8_t b[16] = { 0 };
        assert_int_equal(p->save_begin(inst, "cw", 2, &save), 0);
        assert_int_equal(p->save_write_at(save, "mem/x", 32, b, sizeof(b)), 0);
        assert_int_equal(p->save_commit(save), -EINVAL);
        assert_int_equal(p->load_begin(inst, "cw", 0, &load, &epoch), 0);
        assert_int_equal(epoch, 1);
        check_pattern(p, load, "mem/odd", 1, (uint64_t)CW_UNITS / 2 * CW_UNIT_LEN);
        p->load_end(load);
        p->close(inst);
}

static void concurrent_lanes(void **state)
{
        lanes_common(state, false);
}

static void concurrent_direct(void **state)
{
        lanes_common(state, true);
}

size_t suite_add_tests(struct CMUnitTest *out, size_t cap, struct suite_env *env)
{
#define T(f) cmocka_unit_test_prestate_setup_teardown(f, suite_setup, suite_teardown, env)
        const struct CMUnitTest tests[] = {
                T(roundtrip),      T(interleaved_small_pieces), T(newest_and_exact_epoch), T(list_sessions),
                T(remove_session), T(abort_leaves_nothing),     T(bad_names),              T(missing_things),
                T(empty_save),     T(concurrent_lanes),         T(concurrent_direct),
        };
#undef T
        size_t n = sizeof(tests) / sizeof(tests[0]);

        if (n > cap)
                n = cap;
        memcpy(out, tests, n * sizeof(tests[0]));
        n += suite_add_lease_tests(out + n, cap - n, env);
        return n + suite_add_refer_tests(out + n, cap - n, env);
}
