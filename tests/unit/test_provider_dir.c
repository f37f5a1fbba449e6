/* SPDX-License-Identifier: MIT */
/*
 * The built-in directory provider: the conformance suite, then what only a
 * directory can show: the layout on disk, crash safety at every step of a
 * commit (by fault injection and by simulated crashes), leftovers of
 * crashed saves, corrupted markers, the fd bound, the io_uring-less path,
 * and a damaged epoch refused as a base.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dir_internal.h"
#include "provider_dir.h"
#include "provider_suite.h"

#define MiB (1u << 20)

static const struct lupine_checkpoint_provider *P;

/* ---- helpers */

static struct lupine_ckpt_instance *open_faulty(const struct suite_env *env, const char *spec)
{
        struct lupine_ckpt_instance *inst = NULL;

        if (spec)
                setenv(LUPINE_DIR_PROVIDER_FAIL_ENV, spec, 1);
        int r = P->open(env->dir, &inst);
        unsetenv(LUPINE_DIR_PROVIDER_FAIL_ENV);
        if (r != 0)
                fail_msg("open with %s=%s: %d", LUPINE_DIR_PROVIDER_FAIL_ENV, spec ? spec : "", r);
        return inst;
}

static void path_of(char *out, size_t cap, const struct suite_env *env, const char *rel)
{
        int n = snprintf(out, cap, "%s/%s", env->dir, rel);
        assert_true(n > 0 && (size_t)n < cap);
}

static bool exists(const struct suite_env *env, const char *rel, mode_t type)
{
        char path[PATH_MAX];
        struct stat st;

        path_of(path, sizeof(path), env, rel);
        return lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == type;
}

/* Entries of DIR/rel whose names start with prefix. */
static int count_prefixed(const struct suite_env *env, const char *rel, const char *prefix)
{
        char path[PATH_MAX];
        struct dirent *de;
        DIR *d;
        int n = 0;

        path_of(path, sizeof(path), env, rel);
        d = opendir(path);
        if (!d)
                return errno == ENOENT ? 0 : -1;
        while ((de = readdir(d)))
                if (strncmp(de->d_name, prefix, strlen(prefix)) == 0)
                        n++;
        closedir(d);
        return n;
}

static int open_fds(void)
{
        DIR *d = opendir("/proc/self/fd");
        int n = 0;

        assert_non_null(d);
        while (readdir(d))
                n++;
        closedir(d);
        return n;
}

static int age_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        struct timespec old[2] = { { .tv_sec = time(NULL) - 3600 }, { .tv_sec = time(NULL) - 3600 } };
        return utimensat(AT_FDCWD, path, old, AT_SYMLINK_NOFOLLOW);
}

/* Makes everything under DIR/rel an hour old. */
static void age_tree(const struct suite_env *env, const char *rel)
{
        char path[PATH_MAX];

        path_of(path, sizeof(path), env, rel);
        assert_int_equal(nftw(path, age_one, 16, FTW_PHYS), 0);
}

static void write_file(const struct suite_env *env, const char *rel, const void *data, size_t len)
{
        char path[PATH_MAX];
        FILE *f;

        path_of(path, sizeof(path), env, rel);
        f = fopen(path, "we");
        assert_non_null(f);
        assert_int_equal(fwrite(data, 1, len, f), len);
        assert_int_equal(fclose(f), 0);
}

static void make_dir(const struct suite_env *env, const char *rel)
{
        char path[PATH_MAX];

        path_of(path, sizeof(path), env, rel);
        assert_int_equal(mkdir(path, 0700), 0);
}

/* DIR/rel (a file or directory) as if last changed an hour ago: old enough
 * for the quarantine at list (DIR_QUARANTINE_MIN_AGE_SEC). */
static void age(const struct suite_env *env, const char *rel)
{
        char path[PATH_MAX];
        struct timespec ts[2] = { { .tv_sec = time(NULL) - 3600 }, { .tv_sec = time(NULL) - 3600 } };

        path_of(path, sizeof(path), env, rel);
        assert_int_equal(utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW), 0);
}

/* ---- layout and names */

static void layout_on_disk(void **state)
{
        struct suite_env *env = *state;
        struct lupine_ckpt_instance *inst = NULL;
        char root[PATH_MAX];
        struct stat st;

        /* the root and its missing parents are created, mode 0700 */
        path_of(root, sizeof(root), env, "deep/er/root");
        assert_int_equal(P->open(root, &inst), 0);
        assert_int_equal(stat(root, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0700);
        P->close(inst);

        inst = open_faulty(env, NULL);
        save_small(P, inst, "job", 1, 1);
        assert_true(exists(env, "job/0000000000000001/COMMITTED", S_IFREG));
        assert_true(exists(env, "job/0000000000000001/manifest", S_IFREG));
        assert_true(exists(env, "job/0000000000000001/mem", S_IFDIR));
        assert_true(exists(env, "job/0000000000000001/mem/000001", S_IFREG));
        assert_true(exists(env, "job/0000000000000001/empty", S_IFREG));
        assert_int_equal(count_prefixed(env, "job", ".tmp-"), 0);
        save_small(P, inst, "job", 0x1234abcd, 2);
        assert_true(exists(env, "job/000000001234abcd/COMMITTED", S_IFREG));
        assert_false(exists(env, "job/0000000000000001", S_IFDIR));
        assert_int_equal(count_prefixed(env, "job", ".tmp-"), 0);
        assert_int_equal(P->remove(inst, "job"), 0);
        assert_false(exists(env, "job", S_IFDIR));
        assert_int_equal(count_prefixed(env, "", ".tmp-"), 0);
        P->close(inst);
}

static int64_t file_size(const struct suite_env *env, const char *rel)
{
        char p[PATH_MAX];
        struct stat st;
        path_of(p, sizeof(p), env, rel);
        return stat(p, &st) == 0 && S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1;
}

/* save_write_at stripes an object over DIR_STRIPES files "<name>@<k>",
 * unit k, k + 16, ... in file k; pieces that cross stripe units are split;
 * a load reads it back whole from any offset. Mixing save_write and
 * save_write_at on one object is refused both ways. */
static void striped_objects(void **state)
{
        struct suite_env *env = *state;
        struct lupine_ckpt_instance *inst = open_faulty(env, NULL);
        struct lupine_ckpt_save *s = NULL;
        struct lupine_ckpt_load *l = NULL;
        const uint64_t unit = DIR_STRIPE_UNIT, size = (DIR_STRIPES + 1) * unit + 12345;
        const size_t piece = 3 * unit / 4 + 1; /* crosses unit boundaries at varying places */
        uint8_t *b = malloc(piece);
        uint64_t epoch;

        assert_non_null(b);
        assert_int_equal(P->save_begin(inst, "st", 1, &s), 0);
        /* back to front, as lanes may finish in any order */
        uint64_t n_pieces = (size + piece - 1) / piece;
        for (uint64_t i = n_pieces; i-- > 0;) {
                uint64_t off = i * piece;
                size_t len = size - off < piece ? (size_t)(size - off) : piece;
                pattern_fill(b, len, 7, off);
                assert_int_equal(P->save_write_at(s, "mem/big", off, b, len), 0);
        }
        assert_int_equal(P->save_write_at(s, "small", 10, b, 5), 0);
        assert_int_equal(P->save_write_at(s, "small", 0, b, 10), 0);
        assert_int_equal(P->save_write(s, "small", b, 1), -EINVAL);       /* written positionally already */
        assert_int_equal(P->save_write(s, "plain", b, 1), 0);
        assert_int_equal(P->save_write_at(s, "plain", 1, b, 1), -EINVAL);  /* appended to already */
        assert_int_equal(P->save_commit(s), 0);

        assert_int_equal(file_size(env, "st/0000000000000001/mem/big@0"), (int64_t)(2 * unit));
        assert_int_equal(file_size(env, "st/0000000000000001/mem/big@1"), (int64_t)(unit + 12345));
        for (unsigned k = 2; k < DIR_STRIPES; k++) {
                char rel[64];
                snprintf(rel, sizeof(rel), "st/0000000000000001/mem/big@%u", k);
                assert_int_equal(file_size(env, rel), (int64_t)unit);
        }
        assert_int_equal(file_size(env, "st/0000000000000001/mem/big"), -1);
        assert_int_equal(file_size(env, "st/0000000000000001/small@0"), 15);
        assert_int_equal(file_size(env, "st/0000000000000001/small@1"), -1);

        assert_int_equal(P->load_begin(inst, "st", 0, &l, &epoch), 0);
        check_pattern(P, l, "mem/big", 7, size);
        /* one read from stripe 14 across stripe 15 into stripe 0's second unit */
        uint8_t *want = malloc(2 * unit);
        uint8_t *got = malloc(2 * unit);
        assert_non_null(want);
        assert_non_null(got);
        uint64_t at = (DIR_STRIPES - 1) * unit - 1000;
        assert_int_equal(P->load_read(l, "mem/big", at, got, 2 * unit), (int64_t)(2 * unit));
        pattern_fill(want, 2 * unit, 7, at);
        assert_memory_equal(got, want, 2 * unit);
        uint64_t sz = 0;
        assert_int_equal(P->load_size(l, "small", &sz), 0);
        assert_int_equal(sz, 15);
        assert_int_equal(P->load_size(l, "mem/nothing", &sz), -ENOENT);
        P->load_end(l);
        free(want);
        free(got);
        free(b);
        P->close(inst);
}

static int count_cb(const struct lupine_ckpt_info *info, void *userdata)
{
        char *names = userdata;
        strcat(names, info->session);
        strcat(names, "|");
        return 0;
}

/* ".", ".." and ".tmp-x" are valid session names: they get a '%' on disk. */
static void dot_sessions(void **state)
{
        struct suite_env *env = *state;
        struct lupine_ckpt_instance *inst = open_faulty(env, NULL);
        struct lupine_ckpt_save *s = NULL;
        const char *names[] = { ".", "..", ".tmp-x", "...", "-" };
        char listed[256] = "";

        for (size_t i = 0; i < 5; i++)
                save_small(P, inst, names[i], 1, i);
        assert_true(exists(env, "%./0000000000000001/COMMITTED", S_IFREG));
        assert_true(exists(env, "%../0000000000000001/COMMITTED", S_IFREG));
        assert_true(exists(env, "%.tmp-x/0000000000000001/COMMITTED", S_IFREG));
        /* the root holds nothing but session directories */
        assert_false(exists(env, "0000000000000001", S_IFDIR));
        P->close(inst);
        inst = open_faulty(env, NULL); /* the reaper must not take them for leftovers */
        for (size_t i = 0; i < 5; i++)
                check_small(P, inst, names[i], 0, 1, i);
        assert_int_equal(P->list(inst, count_cb, listed), 0);
        for (size_t i = 0; i < 5; i++) {
                char want[16];
                snprintf(want, sizeof(want), "|%s|", names[i]);
                char hay[260];
                snprintf(hay, sizeof(hay), "|%s", listed);
                assert_non_null(strstr(hay, want));
        }
        assert_int_equal(P->remove(inst, ".."), 0);
        check_small(P, inst, ".", 0, 1, 0);
        assert_int_equal(P->save_begin(inst, "%.", 1, &s), -EINVAL);
        P->close(inst);
}

static void dir_only_bad_names(void **state)
{
        struct suite_env *env = *state;
        struct lupine_ckpt_instance *inst = open_faulty(env, NULL);
        struct lupine_ckpt_save *s = NULL;
        struct lupine_ckpt_load *l = NULL;
        const char *bad[] = { "COMMITTED", "a//b", "a/", "./a", "a/./b", ".", "a/." };
        uint8_t b = 7;
        uint64_t size;

        assert_int_equal(P->save_begin(inst, "names", 1, &s), 0);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(P->save_write(s, bad[i], &b, 1), -EINVAL);
        /* one name may not be another's directory, either way round */
        assert_int_equal(P->save_write(s, "a", &b, 1), 0);
        assert_int_equal(P->save_write(s, "a/b", &b, 1), -EINVAL);
        assert_non_null(strstr(P->last_error(inst), "collides"));
        assert_int_equal(P->save_write(s, "x/y/z", &b, 1), 0);
        assert_int_equal(P->save_write(s, "x/y", &b, 1), -EINVAL);
        assert_int_equal(P->save_write(s, "x", &b, 1), -EINVAL);
        /* "COMMITTED" is reserved at the top only */
        assert_int_equal(P->save_write(s, "sub/COMMITTED", &b, 1), 0);
        assert_int_equal(P->save_commit(s), 0);
        assert_int_equal(P->load_begin(inst, "names", 0, &l, NULL), 0);
        assert_int_equal(P->load_size(l, "a", &size), 0);
        assert_int_equal(size, 1);
        assert_int_equal(P->load_size(l, "x/y/z", &size), 0);
        assert_int_equal(P->load_size(l, "sub/COMMITTED", &size), 0);
        assert_int_equal(P->load_size(l, "COMMITTED", &size), -EINVAL);
        P->load_end(l);
        P->close(inst);
}

/* More objects than DIR_MAX_OPEN_FILES, written round-robin: fds stay
 * bounded, closed objects reopen at the right offset. */
static void many_objects_bounded_fds(void **state)
{
        struct suite_env *env = *state;
        struct lupine_ckpt_instance *inst = open_faulty(env, NULL);
        struct lupine_ckpt_save *s = NULL;
        struct lupine_ckpt_load *l = NULL;
        const int n_obj = 3 * DIR_MAX_OPEN_FILES + 5, rounds = 3;
        const size_t piece = 1000;
        uint8_t buf[1000];
        int base = open_fds(), peak = 0;

        assert_int_equal(P->save_begin(inst, "many", 1, &s), 0);
        for (int r = 0; r < rounds; r++) {
                for (int i = 0; i < n_obj; i++) {
                        char name[32];
                        snprintf(name, sizeof(name), "mem/%06d", i);
                        pattern_fill(buf, piece, (uint64_t)i, (uint64_t)r * piece);
                        assert_int_equal(P->save_write(s, name, buf, piece), 0);
                        int now = open_fds();
                        peak = now > peak ? now : peak;
                }
        }
        /* the save's own fds: session dir, temp dir, and the objects */
        assert_true(peak - base <= (int)DIR_MAX_OPEN_FILES + 4);
        assert_true(peak - base >= (int)DIR_MAX_OPEN_FILES);
        assert_int_equal(P->save_commit(s), 0);
        assert_int_equal(open_fds(), base);
        assert_int_equal(P->load_begin(inst, "many", 0, &l, NULL), 0);
        peak = 0;
        for (int i = 0; i < n_obj; i++) {
                char name[32];
                snprintf(name, sizeof(name), "mem/%06d", i);
                check_pattern(P, l, name, (uint64_t)i, (uint64_t)rounds * piece);
                int now = open_fds();
                peak = now > peak ? now : peak;
        }
        /* a load keeps its epoch dir and at most DIR_LOAD_FDS objects open */
        assert_int_equal(peak - base, (int)DIR_LOAD_FDS + 1);
        P->load_end(l);
        assert_int_equal(open_fds(), base);
        P->close(inst);
}

/* ---- faults */

/* Runs a save of epoch 2 over a committed epoch 1 with `spec` armed.
 * Returns the first error any call gave (0 if none); asserts that a failed
 * save left no temp dir behind and that epoch 1 still loads byte for byte.
 * *ret_visible2 says whether epoch 2 became visible anyway (only possible
 * after the rename). */
static int faulty_save(struct suite_env *env, const char *session, const char *spec, bool *ret_visible2)
{
        struct lupine_ckpt_instance *inst = open_faulty(env, NULL), *bad;
        struct lupine_ckpt_save *s = NULL;
        struct lupine_ckpt_load *l = NULL;
        uint64_t epoch = 0;
        char sdir[256];
        int r = 0, w;

        save_small(P, inst, session, 1, 1000);
        P->close(inst);

        bad = open_faulty(env, spec);
        assert_int_equal(P->save_begin(bad, session, 2, &s), 0);
        const char *names[] = { "manifest", "mem/000001", "mem/sub/000002", "big" };
        for (int round = 0; round < 3; round++) {
                for (int k = 0; k < 4; k++) {
                        uint64_t size = k == 3 ? 3 * MiB + 5 : 20000;
                        w = write_pattern(P, s, names[k], 77 + (uint64_t)k, size, k == 3 ? 3 * MiB + 5 : 20000);
                        if (w < 0) {
                                assert_true(P->last_error(bad)[0] != '\0');
                                /* the failure latches: later writes fail the same */
                                assert_int_equal(P->save_write(s, "manifest", "x", 1), w);
                                r = r ? r : w;
                        }
                }
                if (r)
                        break;
        }
        w = P->save_commit(s);
        if (r)
                assert_int_equal(w, r);
        r = r ? r : w;
        if (r)
                assert_true(P->last_error(bad)[0] != '\0');
        P->close(bad);

        snprintf(sdir, sizeof(sdir), "%s", session);
        inst = open_faulty(env, NULL);
        assert_int_equal(P->load_begin(inst, session, 0, &l, &epoch), 0);
        P->load_end(l);
        *ret_visible2 = epoch == 2;
        if (r == 0) {
                assert_int_equal(epoch, 2);
        } else {
                assert_int_equal(count_prefixed(env, sdir, ".tmp-"), 0);
                /* the old epoch, whole */
                check_small(P, inst, session, 1, 1, 1000);
                if (epoch == 1)
                        check_small(P, inst, session, 0, 1, 1000);
        }
        P->close(inst);
        return r;
}

static void fault_in_writes(void **state)
{
        struct suite_env *env = *state;
        const struct {
                const char *spec;
                int want;
        } cases[] = {
                { "write:1", -ENOSPC },       { "write:3", -ENOSPC }, { "write:3:EIO", -EIO },
                { "write:6:EDQUOT", -EDQUOT }, { "write", -ENOSPC },   { "create:1", -ENOSPC },
                { "create:3:EIO", -EIO },
        };
        bool visible2;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char session[32];
                snprintf(session, sizeof(session), "w%zu", i);
                int r = faulty_save(env, session, cases[i].spec, &visible2);
                if (r != cases[i].want)
                        fail_msg("%s: got %d, want %d", cases[i].spec, r, cases[i].want);
                assert_false(visible2);
        }
}

/* fsync:N for every N up to the first commit that succeeds: each fsync of
 * the commit fails in turn. */
static void fault_in_each_fsync(void **state)
{
        struct suite_env *env = *state;
        bool visible2;
        int n;

        for (n = 1; n < 64; n++) {
                char spec[32], session[32];
                snprintf(spec, sizeof(spec), "fsync:%d", n);
                snprintf(session, sizeof(session), "f%d", n);
                int r = faulty_save(env, session, spec, &visible2);
                if (r == 0)
                        break;
                assert_int_equal(r, -EIO);
        }
        /* 4 objects + 2 subdirectories + temp dir + marker + temp dir again
         * + session dir = 10 fsyncs; the 11th rule never fires */
        assert_int_equal(n, 11);
        /* only the last one (the session dir, after the rename) leaves the
         * new epoch visible; the older one is kept then too */
        assert_int_equal(faulty_save(env, "f10b", "fsync:10", &visible2), -EIO);
        assert_true(visible2);
        assert_int_equal(faulty_save(env, "f9b", "fsync:9", &visible2), -EIO);
        assert_false(visible2);
}

static void fault_in_marker_and_rename(void **state)
{
        struct suite_env *env = *state;
        bool visible2;

        assert_int_equal(faulty_save(env, "m1", "marker", &visible2), -ENOSPC);
        assert_false(visible2);
        assert_int_equal(faulty_save(env, "m2", "marker:1:EIO", &visible2), -EIO);
        assert_false(visible2);
        assert_int_equal(faulty_save(env, "r1", "commit-rename", &visible2), -EIO);
        assert_false(visible2);
        assert_int_equal(faulty_save(env, "r2", "commit-rename:1:EROFS", &visible2), -EROFS);
        assert_false(visible2);
}

/* Every write reported short: the rest is written again where it belongs. */
static void short_writes(void **state)
{
        struct suite_env *env = *state;
        bool visible2;

        assert_int_equal(faulty_save(env, "s1", "short", &visible2), 0);
        assert_int_equal(faulty_save(env, "s2", "short:2", &visible2), 0);
        assert_int_equal(faulty_save(env, "s3", "short:3,no-uring", &visible2), 0);
}

/* Without io_uring (old kernel, seccomp): pwrite and fsync, same rules. */
static void without_io_uring(void **state)
{
        struct suite_env *env = *state;
        struct lupine_ckpt_instance *inst = open_faulty(env, "no-uring");
        bool visible2;

        assert_false(inst->have_ring);
        save_small(P, inst, "plain", 1, 5);
        check_small(P, inst, "plain", 0, 1, 5);
        P->close(inst);
        assert_int_equal(faulty_save(env, "p1", "no-uring,write:2", &visible2), -ENOSPC);
        assert_int_equal(faulty_save(env, "p2", "no-uring,fsync:3", &visible2), -EIO);
        assert_int_equal(faulty_save(env, "p3", "no-uring,marker", &visible2), -ENOSPC);
        assert_int_equal(faulty_save(env, "p4", "no-uring", &visible2), 0);
}

/* "flip:N": the Nth read of a load that returns bytes has one bit flipped
 * (the daemon's --checkpoint-verify and restore checks are tested with it);
 * other reads, and other loads, are exact. */
static void flipped_read(void **state)
{
        struct suite_env *env = *state;
        struct lupine_ckpt_instance *inst = open_faulty(env, NULL);
        struct lupine_ckpt_load *l = NULL;
        uint8_t want[4096], got[4096];

        save_small(P, inst, "flip", 1, 7);
        P->close(inst);
        inst = open_faulty(env, "flip:2");
        for (int round = 0; round < 2; round++) {
                assert_int_equal(P->load_begin(inst, "flip", 0, &l, NULL), 0);
                for (int read = 1; read <= 3; read++) {
                        uint64_t size = 0;
                        assert_int_equal(P->load_size(l, "manifest", &size), 0);
                        assert_true(size > 0 && size <= sizeof(got));
                        assert_int_equal(P->load_read(l, "manifest", 0, got, size), (int64_t)size);
                        if (read == 1 && round == 0)
                                memcpy(want, got, size); /* the first read is exact */
                        size_t diff = 0;
                        for (size_t i = 0; i < size; i++)
                                diff += got[i] != want[i];
                        assert_int_equal(diff, read == 2 ? 1 : 0); /* in every load, the 2nd read only */
                }
                P->load_end(l);
        }
        P->close(inst);
}

static void bad_fault_spec(void **state)
{
        struct suite_env *env = *state;
        const char *bad[] = { "bogus", "write:0", "write:x", "write:1:EWHAT", "short:1:EIO", "write:1:EIO:3", ":",
                              "write::EIO", "flip:1:EIO" };
        struct lupine_ckpt_instance *inst = NULL;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                setenv(LUPINE_DIR_PROVIDER_FAIL_ENV, bad[i], 1);
                int r = P->open(env->dir, &inst);
                unsetenv(LUPINE_DIR_PROVIDER_FAIL_ENV);
                if (r != -EINVAL)
                        fail_msg("fault spec \"%s\" gave %d", bad[i], r);
        }
        setenv(LUPINE_DIR_PROVIDER_FAIL_ENV, "", 1);
        assert_int_equal(P->open(env->dir, &inst), 0);
        unsetenv(LUPINE_DIR_PROVIDER_FAIL_ENV);
        P->close(inst);
}

/* ---- crashes and leftovers */

/* A "crash" before the marker, before the rename, or before the old epoch
 * goes: the process stops and leaves the disk as it is. */
static void simulated_crashes(void **state)
{
        struct suite_env *env = *state;
        struct lupine_ckpt_instance *inst = open_faulty(env, NULL), *bad;
        struct lupine_ckpt_save *s = NULL;
        const char *steps[] = { "crash-before-marker", "crash-before-rename" };

        for (int i = 0; i < 2; i++) {
                char session[16];
                snprintf(session, sizeof(session), "c%d", i);
                save_small(P, inst, session, 1, 10);
                bad = open_faulty(env, steps[i]);
                assert_int_equal(P->save_begin(bad, session, 2, &s), 0);
                assert_int_equal(write_pattern(P, s, "manifest", 11, 999, 100), 0);
                assert_int_equal(P->save_commit(s), -ECANCELED);
                P->close(bad);
                /* the temp dir is there, fresh: kept by open, ignored by load */
                assert_int_equal(count_prefixed(env, session, ".tmp-"), 1);
                P->close(inst);
                inst = open_faulty(env, NULL);
                assert_int_equal(count_prefixed(env, session, ".tmp-"), 1);
                check_small(P, inst, session, 0, 1, 10);
                /* once it is old, the next open reaps it */
                age_tree(env, session);
                P->close(inst);
                inst = open_faulty(env, NULL);
                assert_int_equal(count_prefixed(env, session, ".tmp-"), 0);
                check_small(P, inst, session, 0, 1, 10);
                /* and the session goes on */
                save_small(P, inst, session, 2, 12);
                check_small(P, inst, session, 0, 2, 12);
        }

        /* after the rename: both epochs are complete; newest wins */
        save_small(P, inst, "c2", 1, 20);
        bad = open_faulty(env, "crash-before-cleanup");
        assert_int_equal(P->save_begin(bad, "c2", 2, &s), 0);
        assert_int_equal(write_pattern(P, s, "manifest", 21, 999, 100), 0);
        assert_int_equal(write_pattern(P, s, "mem/000001", 22, 70000, 4096), 0);
        assert_int_equal(write_pattern(P, s, "empty", 23, 0, 1), 0);
        assert_int_equal(P->save_commit(s), -ECANCELED);
        P->close(bad);
        check_small(P, inst, "c2", 0, 2, 21);
        check_small(P, inst, "c2", 1, 1, 20);
        /* the next commit clears both older ones */
        save_small(P, inst, "c2", 3, 30);
        assert_false(exists(env, "c2/0000000000000001", S_IFDIR));
        assert_false(exists(env, "c2/0000000000000002", S_IFDIR));
        check_small(P, inst, "c2", 0, 3, 30);
        P->close(inst);
}

/* Debris made by hand: a temp dir with a (copied) valid marker, an epoch
 * directory without a marker, one with a garbage marker, stray files. */
static void leftovers_by_hand(void **state)
{
        struct suite_env *env = *state;
        struct lupine_ckpt_instance *inst = open_faulty(env, NULL);
        struct lupine_ckpt_load *l = NULL;
        struct dir_marker m = { .epoch = 9, .objects = 0, .bytes = 0, .session = "job" };
        uint8_t marker[DIR_MARKER_MAX];
        int len;
        char listed[256] = "";

        save_small(P, inst, "job", 1, 40);
        len = dir_marker_encode(&m, marker, sizeof(marker));
        assert_true(len > 0);
        make_dir(env, "job/.tmp-0000000000000009-1-abc");
        write_file(env, "job/.tmp-0000000000000009-1-abc/COMMITTED", marker, (size_t)len);
        make_dir(env, "job/0000000000000009");
        write_file(env, "job/0000000000000009/manifest", "half", 4);
        make_dir(env, "job/0000000000000008");
        write_file(env, "job/0000000000000008/COMMITTED", "garbage", 7);
        age(env, "job/0000000000000009/manifest");
        age(env, "job/0000000000000009");
        age(env, "job/0000000000000008/COMMITTED");
        make_dir(env, "job/000000000000000A"); /* not lowercase: not an epoch */
        write_file(env, "job/stray", "x", 1);
        write_file(env, "stray-file", "x", 1);
        make_dir(env, ".tmp-rm-1-abc");
        P->close(inst);

        inst = open_faulty(env, NULL);
        check_small(P, inst, "job", 0, 1, 40);
        assert_int_equal(P->load_begin(inst, "job", 9, &l, NULL), -ENOENT);
        assert_int_equal(P->load_begin(inst, "job", 8, &l, NULL), -EBADMSG);
        assert_int_equal(P->list(inst, count_cb, listed), 0);
        assert_string_equal(listed, "job|");
        /* epoch 8 changed just now (its directory, when COMMITTED was
         * written): left in place; the next listing, an hour on, moves it */
        assert_false(exists(env, "job/0000000000000009", S_IFDIR));
        assert_true(exists(env, "job/0000000000000008", S_IFDIR));
        age(env, "job/0000000000000008");
        assert_int_equal(P->list(inst, count_cb, listed), 0);
        /* listing moved the damaged epochs 8 and 9 into the quarantine
         * (issue 15, finding 6): a save of 9 is possible again */
        assert_false(exists(env, "job/0000000000000009", S_IFDIR));
        assert_false(exists(env, "job/0000000000000008", S_IFDIR));
        assert_true(exists(env, ".quarantine", S_IFDIR));
        assert_int_equal(P->load_begin(inst, "job", 8, &l, NULL), -ENOENT);
        make_dir(env, "job/0000000000000009"); /* damaged again, after the listing */
        write_file(env, "job/0000000000000009/manifest", "half", 4);
        save_small(P, inst, "job", 9, 42); /* save_begin moves it aside itself */
        check_small(P, inst, "job", 0, 9, 42);
        /* a plain file by the epoch's name goes too */
        write_file(env, "job/000000000000000a", "x", 1);
        save_small(P, inst, "job", 10, 41);
        check_small(P, inst, "job", 0, 10, 41);
        assert_false(exists(env, "job/0000000000000001", S_IFDIR));
        assert_false(exists(env, "job/0000000000000008", S_IFDIR));
        assert_false(exists(env, "job/0000000000000009", S_IFDIR));
        P->close(inst);
}

static void flip_byte(const struct suite_env *env, const char *rel, off_t at)
{
        char path[PATH_MAX];
        uint8_t b;
        int fd;

        path_of(path, sizeof(path), env, rel);
        fd = open(path, O_RDWR | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(pread(fd, &b, 1, at), 1);
        b ^= 0x10;
        assert_int_equal(pwrite(fd, &b, 1, at), 1);
        close(fd);
}

static void corrupted_epochs(void **state)
{
        struct suite_env *env = *state;
        struct lupine_ckpt_instance *inst = open_faulty(env, NULL);
        struct lupine_ckpt_load *l = NULL;
        char path[PATH_MAX];

        save_small(P, inst, "bits", 1, 50);
        flip_byte(env, "bits/0000000000000001/COMMITTED", 20);
        assert_int_equal(P->load_begin(inst, "bits", 1, &l, NULL), -EBADMSG);
        assert_int_equal(P->load_begin(inst, "bits", 0, &l, NULL), -ENOENT);
        assert_true(P->last_error(inst)[0] != '\0');
        flip_byte(env, "bits/0000000000000001/COMMITTED", 20);
        check_small(P, inst, "bits", 1, 1, 50);

        /* a truncated object, an extra one, a missing one */
        path_of(path, sizeof(path), env, "bits/0000000000000001/manifest");
        int fd = open(path, O_RDWR | O_CLOEXEC);
        uint8_t last;
        assert_true(fd >= 0);
        assert_int_equal(pread(fd, &last, 1, 998), 1);
        assert_int_equal(ftruncate(fd, 998), 0);
        assert_int_equal(P->load_begin(inst, "bits", 1, &l, NULL), -EBADMSG);
        assert_int_equal(pwrite(fd, &last, 1, 998), 1);
        close(fd);
        check_small(P, inst, "bits", 1, 1, 50);
        write_file(env, "bits/0000000000000001/extra", "", 0);
        assert_int_equal(P->load_begin(inst, "bits", 1, &l, NULL), -EBADMSG);
        path_of(path, sizeof(path), env, "bits/0000000000000001/extra");
        assert_int_equal(unlink(path), 0);
        path_of(path, sizeof(path), env, "bits/0000000000000001/empty");
        assert_int_equal(unlink(path), 0);
        assert_int_equal(P->load_begin(inst, "bits", 1, &l, NULL), -EBADMSG);
        /* a marker naming another session (a directory copied by hand) */
        save_small(P, inst, "other", 1, 51);
        path_of(path, sizeof(path), env, "other/0000000000000001/COMMITTED");
        char to[PATH_MAX];
        save_small(P, inst, "third", 1, 51);
        path_of(to, sizeof(to), env, "third/0000000000000001/COMMITTED");
        assert_int_equal(rename(path, to), 0);
        assert_int_equal(P->load_begin(inst, "third", 1, &l, NULL), -EBADMSG);
        P->close(inst);
}

static void marker_codec(void **state)
{
        struct dir_marker m = { .epoch = 0x1122334455667788ull, .objects = 3, .bytes = 70999,
                                .committed_unix = 1700000000, .session = "sess.1" }, out;
        uint8_t buf[DIR_MARKER_MAX + 1];
        int len = dir_marker_encode(&m, buf, sizeof(buf));

        assert_true(len > 0);
        assert_int_equal(dir_marker_decode(buf, (size_t)len, &out), 0);
        assert_int_equal(out.epoch, m.epoch);
        assert_int_equal(out.objects, 3);
        assert_int_equal(out.bytes, 70999);
        assert_int_equal(out.committed_unix, 1700000000);
        assert_string_equal(out.session, "sess.1");
        for (int n = 0; n < len; n++)
                assert_int_equal(dir_marker_decode(buf, (size_t)n, &out), -EBADMSG);
        for (int i = 0; i < len * 8; i++) {
                buf[i / 8] ^= (uint8_t)(1u << (i % 8));
                assert_int_equal(dir_marker_decode(buf, (size_t)len, &out), -EBADMSG);
                buf[i / 8] ^= (uint8_t)(1u << (i % 8));
        }
        buf[len] = 0;
        assert_int_equal(dir_marker_decode(buf, (size_t)len + 1, &out), -EBADMSG);
        /* CRC-32C check value */
        assert_int_equal(dir_crc32c(0, "123456789", 9), 0xE3069283u);
        /* no room */
        assert_int_equal(dir_marker_encode(&m, buf, 20), -ENOBUFS);
}

static void epoch_names(void **state)
{
        uint64_t e = 0;
        char name[DIR_EPOCH_HEX + 1];

        dir_epoch_name(0xabcdefull, name);
        assert_string_equal(name, "0000000000abcdef");
        assert_true(dir_epoch_parse(name, &e));
        assert_int_equal(e, 0xabcdef);
        assert_true(dir_epoch_parse("ffffffffffffffff", &e));
        assert_int_equal(e, UINT64_MAX);
        assert_false(dir_epoch_parse("0000000000000000", &e));
        assert_false(dir_epoch_parse("0000000000ABCDEF", &e));
        assert_false(dir_epoch_parse("000000000abcdef", &e));
        assert_false(dir_epoch_parse("00000000000abcdef", &e));
        assert_false(dir_epoch_parse(".tmp-00000000000", &e));
}

static void config_from_environment(void **state)
{
        struct suite_env *env = *state;
        struct lupine_ckpt_instance *inst = NULL;
        char root[PATH_MAX];

        path_of(root, sizeof(root), env, "from-env");
        setenv("LUPINE_CHECKPOINT_CONFIG", root, 1);
        assert_int_equal(P->open(NULL, &inst), 0);
        unsetenv("LUPINE_CHECKPOINT_CONFIG");
        save_small(P, inst, "e", 1, 1);
        assert_true(exists(env, "from-env/e/0000000000000001/COMMITTED", S_IFREG));
        P->close(inst);
        /* a root that is a file */
        write_file(env, "a-file", "x", 1);
        path_of(root, sizeof(root), env, "a-file");
        assert_true(P->open(root, &inst) < 0);
}

/* The lease record's codec, and what the directory holds: records and lock
 * files under .leases that listing never shows, a damaged record refused
 * (never a guessed token), a stale temp file reaped at open. */
static void leases_on_disk(void **state)
{
        struct suite_env *env = *state;
        struct lupine_ckpt_lease l = { .owner = "host-a",
                                       .token = 0x0102030405060708ull,
                                       .expires_unix_ms = 1700000000123 },
                                 out;
        struct lupine_ckpt_instance *inst;
        uint8_t buf[DIR_LEASE_MAX + 1];
        char listed[256] = "";
        int len = dir_lease_encode(&l, buf, sizeof(buf));

        assert_true(len > 0);
        assert_int_equal(dir_lease_decode(buf, (size_t)len, &out), 0);
        assert_string_equal(out.owner, "host-a");
        assert_int_equal(out.token, l.token);
        assert_int_equal(out.expires_unix_ms, l.expires_unix_ms);
        for (int n = 0; n < len; n++)
                assert_int_equal(dir_lease_decode(buf, (size_t)n, &out), -EBADMSG);
        for (int i = 0; i < len * 8; i++) {
                buf[i / 8] ^= (uint8_t)(1u << (i % 8));
                assert_int_equal(dir_lease_decode(buf, (size_t)len, &out), -EBADMSG);
                buf[i / 8] ^= (uint8_t)(1u << (i % 8));
        }
        assert_int_equal(dir_lease_encode(&l, buf, 20), -ENOBUFS);
        /* a held lease without a token is not a record we write */
        l.token = 0;
        len = dir_lease_encode(&l, buf, sizeof(buf));
        assert_int_equal(dir_lease_decode(buf, (size_t)len, &out), -EBADMSG);

        inst = open_faulty(env, NULL);
        assert_int_equal(P->lease_claim(inst, "job", "host-a", 30000, &out), 0);
        assert_int_equal(P->lease_claim(inst, ".x", "host-a", 30000, &out), 0);
        assert_true(exists(env, ".leases/job", S_IFREG));
        assert_true(exists(env, ".leases/job@lock", S_IFREG));
        assert_true(exists(env, ".leases/%.x", S_IFREG));
        assert_int_equal(count_prefixed(env, ".leases", ".tmp-"), 0);
        save_small(P, inst, "job", 1, 3);
        assert_int_equal(P->list(inst, count_cb, listed), 0);
        assert_string_equal(listed, "job|");
        /* damaged: refused by every operation, not reset to token 0 */
        write_file(env, ".leases/job", "garbage", 7);
        assert_int_equal(P->lease_claim(inst, "job", "host-b", 30000, &out), -EBADMSG);
        assert_non_null(strstr(P->last_error(inst), "damaged"));
        assert_int_equal(P->lease_read(inst, "job", &out), -EBADMSG);
        assert_int_equal(P->lease_renew(inst, "job", "host-a", 1, 30000, &out), -EBADMSG);
        /* a record being written when its writer died: reaped once stale */
        write_file(env, ".leases/.tmp-lease-1-dead", "x", 1);
        age(env, ".leases/.tmp-lease-1-dead");
        write_file(env, ".leases/.tmp-lease-2-young", "x", 1);
        P->close(inst);
        inst = open_faulty(env, NULL);
        assert_false(exists(env, ".leases/.tmp-lease-1-dead", S_IFREG));
        assert_true(exists(env, ".leases/.tmp-lease-2-young", S_IFREG));
        P->close(inst);

        /* the second record write fails: the renew's error comes back, the
         * record is the claim's, no temp is left, the next write works */
        struct lupine_ckpt_lease got;
        inst = open_faulty(env, "lease:2");
        assert_int_equal(P->lease_claim(inst, "f", "host-a", 30000, &l), 0);
        assert_int_equal(P->lease_renew(inst, "f", "host-a", l.token, 60000, &out), -EIO);
        assert_non_null(strstr(P->last_error(inst), "writing the lease record"));
        assert_int_equal(P->lease_read(inst, "f", &got), 0);
        assert_int_equal(got.token, l.token);
        assert_int_equal(got.expires_unix_ms, l.expires_unix_ms);
        assert_int_equal(count_prefixed(env, ".leases", ".tmp-"), 1); /* the young one from above */
        assert_int_equal(P->lease_renew(inst, "f", "host-a", l.token, 60000, &out), 0);
        P->close(inst);
        /* every write fails: a claim leaves the session never claimed */
        inst = open_faulty(env, "lease");
        assert_int_equal(P->lease_claim(inst, "g", "host-a", 30000, &out), -EIO);
        assert_int_equal(P->lease_read(inst, "g", &got), 0);
        assert_int_equal(got.token, 0);
        assert_int_equal(P->lease_release(inst, "f", "host-a", l.token), -EIO);
        P->close(inst);
}

/* ABI version 5: a kept epoch damaged on disk (an object file truncated)
 * is no base: save_refer is -ENOENT, naming session and epoch, while the
 * sound one beside it is 0, and the save commits; the damaged epoch goes
 * with that commit like any epoch it does not name. */
static void refer_damaged_base(void **state)
{
        struct suite_env *env = *state;
        struct lupine_ckpt_instance *inst = open_faulty(env, NULL);
        struct lupine_ckpt_save *s = NULL;
        struct lupine_ckpt_load *l = NULL;
        char path[PATH_MAX];

        save_small(P, inst, "inc", 1, 10);
        assert_int_equal(P->save_begin(inst, "inc", 2, &s), 0);
        assert_int_equal(P->save_refer(s, 1), 0);
        write_small(P, s, 20);
        assert_int_equal(P->save_commit(s), 0);
        /* both on disk, side by side, nothing else in the session */
        assert_true(exists(env, "inc/0000000000000001/COMMITTED", S_IFREG));
        assert_true(exists(env, "inc/0000000000000002/COMMITTED", S_IFREG));
        assert_int_equal(count_prefixed(env, "inc", ""), 4); /* ., .., two epochs */
        check_small(P, inst, "inc", 1, 1, 10);

        path_of(path, sizeof(path), env, "inc/0000000000000001/mem/000001");
        assert_int_equal(truncate(path, 4096), 0);
        assert_int_equal(P->save_begin(inst, "inc", 3, &s), 0);
        assert_int_equal(P->save_refer(s, 1), -ENOENT);
        assert_non_null(strstr(P->last_error(inst), "session inc epoch 1"));
        assert_int_equal(P->save_refer(s, 2), 0);
        write_small(P, s, 30);
        assert_int_equal(P->save_commit(s), 0);
        assert_false(exists(env, "inc/0000000000000001", S_IFDIR));
        assert_int_equal(P->load_begin(inst, "inc", 1, &l, NULL), -ENOENT);
        check_small(P, inst, "inc", 2, 2, 20);
        check_small(P, inst, "inc", 0, 3, 30);
        P->close(inst);
}

int main(void)
{
        static struct suite_env env = { .needs_dir = true };
#define T(f) cmocka_unit_test_prestate_setup_teardown(f, suite_setup, suite_teardown, &env)
        struct CMUnitTest tests[64] = {
                cmocka_unit_test(marker_codec),
                cmocka_unit_test(epoch_names),
                T(layout_on_disk),
                T(dot_sessions),
                T(dir_only_bad_names),
                T(many_objects_bounded_fds),
                T(fault_in_writes),
                T(fault_in_each_fsync),
                T(fault_in_marker_and_rename),
                T(short_writes),
                T(without_io_uring),
                T(bad_fault_spec),
                T(simulated_crashes),
                T(leftovers_by_hand),
                T(corrupted_epochs),
                T(config_from_environment),
                T(striped_objects),
                T(flipped_read),
                T(leases_on_disk),
                T(refer_damaged_base),
        };
#undef T
        size_t n = 20;

        P = lupine_dir_provider();
        env.p = P;
        unsetenv(LUPINE_DIR_PROVIDER_FAIL_ENV);
        n += suite_add_tests(tests + n, sizeof(tests) / sizeof(tests[0]) - n, &env);
        return _cmocka_run_group_tests("provider-dir", tests, n, NULL, NULL);
}
