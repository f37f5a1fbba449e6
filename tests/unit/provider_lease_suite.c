/* SPDX-License-Identifier: MIT */
/*
 * The conformance suite's lease tests (ABI version 4,
 * LUPINE_CKPT_CAP_LEASES): claim, renew and release, takeover after
 * expiry, fenced commits by a stale holder, and processes racing for one
 * lease. A provider without the capability skips them.
 *
 * "Two hosts" are two instances on the same config for a provider on a
 * directory (needs_dir), and one instance for the example provider, whose
 * store is the instance (its lease table is shared with processes forked
 * after open, which is what the race uses).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "provider_suite.h"

#define RACERS 8
#define ROUNDS 200

static bool has_leases(const struct suite_env *env)
{
        const struct lupine_checkpoint_provider *p = env->p;

        return p->abi_version >= 4 && p->struct_size >= sizeof(*p) && (p->caps & LUPINE_CKPT_CAP_LEASES);
}

/* The other host's instance: its own on a directory, else the same one. */
static struct lupine_ckpt_instance *peer_open(const struct suite_env *env, struct lupine_ckpt_instance *inst)
{
        return env->needs_dir ? suite_open(env) : inst;
}

static void peer_close(const struct suite_env *env, struct lupine_ckpt_instance *peer)
{
        if (env->needs_dir)
                env->p->close(peer);
}

static int64_t now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };

        nanosleep(&ts, NULL);
}

/* Claim, -EBUSY for another owner, renew, re-claim by the holder, release
 * (twice), and the arguments refused. */
static void lease_semantics(void **state)
{
        struct suite_env *env = *state;
        if (!has_leases(env))
                skip();
        const struct lupine_checkpoint_provider *p = env->p;
        struct lupine_ckpt_instance *a = suite_open(env), *b = peer_open(env, a);
        struct lupine_ckpt_lease l, m;
        int64_t t0 = now_ms();

        assert_int_equal(p->lease_read(a, "job", &l), 0);
        assert_string_equal(l.owner, "");
        assert_int_equal(l.token, 0);
        assert_int_equal(p->lease_claim(a, "job", "host-a", 30000, &l), 0);
        assert_string_equal(l.owner, "host-a");
        assert_int_equal(l.token, 1);
        assert_true(l.expires_unix_ms >= t0 + 30000 && l.expires_unix_ms <= now_ms() + 30000);
        /* another owner: busy, and told who holds it */
        memset(&m, 0x55, sizeof(m));
        assert_int_equal(p->lease_claim(b, "job", "host-b", 30000, &m), -EBUSY);
        assert_string_equal(m.owner, "host-a");
        assert_int_equal(m.token, 1);
        assert_int_equal(m.expires_unix_ms, l.expires_unix_ms);
        assert_int_equal(p->lease_read(b, "job", &m), 0);
        assert_string_equal(m.owner, "host-a");
        /* other sessions are independent */
        assert_int_equal(p->lease_claim(b, "other", "host-b", 30000, &m), 0);
        assert_int_equal(m.token, 1);
        /* renew: only (owner, token); the token stays */
        assert_int_equal(p->lease_renew(a, "job", "host-a", 1, 60000, &l), 0);
        assert_int_equal(l.token, 1);
        assert_true(l.expires_unix_ms >= t0 + 60000);
        assert_int_equal(p->lease_renew(a, "job", "host-a", 2, 60000, &m), -ESTALE);
        assert_int_equal(p->lease_renew(b, "job", "host-b", 1, 60000, &m), -ESTALE);
        assert_string_equal(m.owner, "host-a"); /* the lease as it is */
        /* the holder claims again (a restart): a new token fences the old */
        assert_int_equal(p->lease_claim(a, "job", "host-a", 30000, &l), 0);
        assert_int_equal(l.token, 2);
        assert_int_equal(p->lease_renew(a, "job", "host-a", 1, 30000, &m), -ESTALE);
        assert_int_equal(p->lease_release(a, "job", "host-a", 1), -ESTALE);
        assert_int_equal(p->lease_release(b, "job", "host-b", 2), -ESTALE);
        /* release keeps the token; a repeated release is fine */
        assert_int_equal(p->lease_release(a, "job", "host-a", 2), 0);
        assert_int_equal(p->lease_release(a, "job", "host-a", 2), 0);
        assert_int_equal(p->lease_read(b, "job", &m), 0);
        assert_string_equal(m.owner, "");
        assert_int_equal(m.token, 2);
        assert_int_equal(p->lease_renew(a, "job", "host-a", 2, 30000, &m), -ESTALE);
        /* free: anyone takes it, with the next token, never a reused one */
        assert_int_equal(p->lease_claim(b, "job", "host-b", 30000, &m), 0);
        assert_int_equal(m.token, 3);
        assert_int_equal(p->lease_release(a, "job", "host-a", 2), -ESTALE);
        /* a lease outlives the session's checkpoints */
        save_small(p, b, "job", 1, 7);
        assert_int_equal(p->remove(b, "job"), 0);
        assert_int_equal(p->lease_read(a, "job", &m), 0);
        assert_int_equal(m.token, 3);
        /* arguments */
        assert_int_equal(p->lease_claim(a, "job", "host-a", 0, &m), -EINVAL);
        assert_int_equal(p->lease_claim(a, "job", "host-a", LUPINE_CKPT_LEASE_TTL_MAX_MS + 1, &m), -EINVAL);
        assert_int_equal(p->lease_claim(a, "job", "host a", 1000, &m), -EINVAL);
        assert_int_equal(p->lease_claim(a, "job", "", 1000, &m), -EINVAL);
        assert_int_equal(p->lease_claim(a, "bad/name", "host-a", 1000, &m), -EINVAL);
        assert_int_equal(p->lease_renew(a, "job", "host-b", 3, 0, &m), -EINVAL);
        assert_int_equal(p->lease_read(a, "", &m), -EINVAL);
        /* session names beginning with '.' are names like any other */
        assert_int_equal(p->lease_claim(a, ".tmp-x", "host-a", 1000, &m), 0);
        assert_int_equal(m.token, 1);
        peer_close(env, b);
        p->close(a);
}

/* An expired lease passes to a claimer with a bumped token; the old
 * holder's renew and release are -ESTALE then. */
static void lease_takeover(void **state)
{
        struct suite_env *env = *state;
        if (!has_leases(env))
                skip();
        const struct lupine_checkpoint_provider *p = env->p;
        struct lupine_ckpt_instance *a = suite_open(env), *b = peer_open(env, a);
        struct lupine_ckpt_lease l, m;

        assert_int_equal(p->lease_claim(a, "job", "host-a", 60, &l), 0);
        assert_int_equal(p->lease_claim(b, "job", "host-b", 5000, &m), -EBUSY);
        sleep_ms(150);
        assert_int_equal(p->lease_claim(b, "job", "host-b", 5000, &m), 0);
        assert_int_equal(m.token, l.token + 1);
        assert_string_equal(m.owner, "host-b");
        assert_int_equal(p->lease_renew(a, "job", "host-a", l.token, 5000, &l), -ESTALE);
        assert_string_equal(l.owner, "host-b");
        assert_int_equal(p->lease_release(a, "job", "host-a", 1), -ESTALE);
        assert_int_equal(p->lease_claim(a, "job", "host-a", 5000, &l), -EBUSY);
        /* expired but not taken over: the holder may still renew */
        assert_int_equal(p->lease_renew(b, "job", "host-b", m.token, 40, &m), 0);
        sleep_ms(100);
        assert_int_equal(p->lease_renew(b, "job", "host-b", m.token, 5000, &m), 0);
        assert_int_equal(m.token, 2);
        peer_close(env, b);
        p->close(a);
}

static int save_fenced(const struct lupine_checkpoint_provider *p, struct lupine_ckpt_instance *inst, const char *owner,
                       uint64_t token, uint64_t epoch, uint64_t seed, struct lupine_ckpt_save **ret)
{
        struct lupine_ckpt_save *s = NULL;
        int r;

        assert_int_equal(p->save_begin(inst, "job", epoch, &s), 0);
        r = p->save_fence(s, owner, token);
        if (r < 0) {
                p->save_abort(s);
                return r;
        }
        assert_int_equal(write_pattern(p, s, "manifest", seed, 999, 100), 0);
        assert_int_equal(write_pattern(p, s, "mem/000001", seed + 1, 70000, 4096), 0);
        assert_int_equal(write_pattern(p, s, "empty", seed + 2, 0, 1), 0);
        *ret = s;
        return 0;
}

/* A save fenced by a token commits while that token holds the lease; once
 * another claim came, its commit is -ESTALE and the newer checkpoint stays. */
static void lease_fenced_commit(void **state)
{
        struct suite_env *env = *state;
        if (!has_leases(env))
                skip();
        const struct lupine_checkpoint_provider *p = env->p;
        struct lupine_ckpt_instance *a = suite_open(env), *b = peer_open(env, a);
        struct lupine_ckpt_save *sa = NULL, *sb = NULL, *late = NULL;
        struct lupine_ckpt_lease la, lb;

        assert_int_equal(p->lease_claim(a, "job", "host-a", 60, &la), 0);
        assert_int_equal(save_fenced(p, a, "host-a", la.token, 1, 10, &sa), 0);
        assert_int_equal(p->save_commit(sa), 0);
        check_small(p, b, "job", 0, 1, 10);
        /* a fence on a token that does not hold the lease fails at once */
        assert_int_equal(save_fenced(p, a, "host-a", la.token + 1, 2, 20, &sa), -ESTALE);
        assert_int_equal(save_fenced(p, a, "host-b", la.token, 2, 20, &sa), -ESTALE);
        /* A starts epoch 2 (and 9) under its token, then is presumed dead */
        assert_int_equal(save_fenced(p, a, "host-a", la.token, 2, 20, &sa), 0);
        assert_int_equal(save_fenced(p, a, "host-a", la.token, 9, 90, &late), 0);
        sleep_ms(150);
        assert_int_equal(p->lease_claim(b, "job", "host-b", 30000, &lb), 0);
        assert_int_equal(save_fenced(p, b, "host-b", lb.token, 3, 30, &sb), 0);
        assert_int_equal(p->save_commit(sb), 0);
        /* A comes back: both of its commits are fenced off */
        assert_int_equal(p->save_commit(sa), -ESTALE);
        assert_int_equal(p->save_commit(late), -ESTALE);
        check_small(p, a, "job", 0, 3, 30);
        check_small(p, b, "job", 3, 3, 30);
        /* fenced also before B commits anything: B's claim alone fences A */
        assert_int_equal(p->lease_release(b, "job", "host-b", lb.token), 0);
        assert_int_equal(p->lease_claim(a, "job", "host-a", 30000, &la), 0);
        assert_int_equal(save_fenced(p, a, "host-a", la.token, 4, 40, &sa), 0);
        assert_int_equal(p->lease_claim(a, "job", "host-a", 30000, &la), 0); /* A restarted */
        assert_int_equal(p->save_commit(sa), -ESTALE);
        check_small(p, b, "job", 0, 3, 30);
        /* an unfenced save still commits as before */
        save_small(p, b, "job", 5, 50);
        check_small(p, a, "job", 0, 5, 50);
        peer_close(env, b);
        p->close(a);
}

/* Shared by the racers (MAP_SHARED). */
struct race {
        pthread_barrier_t bar;
        int holders;                    /* processes believing they hold the lease now */
        int violations;                 /* times holders was seen above 1 */
        int errors;                     /* results other than 0 and -EBUSY */
        uint64_t token[ROUNDS][RACERS]; /* the token a racer won in a round, else 0 */
};

static void racer(const struct suite_env *env, struct lupine_ckpt_instance *parent, struct race *rc, int me)
{
        const struct lupine_checkpoint_provider *p = env->p;
        struct lupine_ckpt_instance *inst = parent;
        char owner[32];

        if (env->needs_dir && p->open(env->dir, &inst) != 0)
                _exit(3);
        snprintf(owner, sizeof(owner), "host-%d", me);
        for (int round = 0; round < ROUNDS; round++) {
                struct lupine_ckpt_lease l;
                pthread_barrier_wait(&rc->bar);
                int r = p->lease_claim(inst, "race", owner, 60000, &l);
                if (r == 0) {
                        if (__atomic_add_fetch(&rc->holders, 1, __ATOMIC_SEQ_CST) != 1)
                                __atomic_add_fetch(&rc->violations, 1, __ATOMIC_SEQ_CST);
                        rc->token[round][me] = l.token;
                } else if (r != -EBUSY) {
                        __atomic_add_fetch(&rc->errors, 1, __ATOMIC_SEQ_CST);
                }
                pthread_barrier_wait(&rc->bar); /* every claim of the round is done */
                if (r == 0) {
                        __atomic_sub_fetch(&rc->holders, 1, __ATOMIC_SEQ_CST);
                        /* even rounds: released (free); odd: left to expire */
                        if (round % 2 == 0 ? p->lease_release(inst, "race", owner, l.token) != 0
                                           : p->lease_renew(inst, "race", owner, l.token, 1, &l) != 0)
                                __atomic_add_fetch(&rc->errors, 1, __ATOMIC_SEQ_CST);
                        if (round % 2)
                                sleep_ms(3);
                }
                pthread_barrier_wait(&rc->bar);
        }
        if (env->needs_dir)
                p->close(inst);
        _exit(0);
}

/* RACERS processes claim the same free (or expired) lease ROUNDS times:
 * exactly one wins each round, the tokens grow by one per round, and no
 * two ever hold it at once. */
static void lease_race(void **state)
{
        struct suite_env *env = *state;
        if (!has_leases(env))
                skip();
        struct lupine_ckpt_instance *inst = suite_open(env);
        pthread_barrierattr_t ba;
        struct race *rc;
        pid_t pid[RACERS];

        rc = mmap(NULL, sizeof(*rc), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        assert_true(rc != MAP_FAILED);
        pthread_barrierattr_init(&ba);
        pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
        pthread_barrier_init(&rc->bar, &ba, RACERS);
        pthread_barrierattr_destroy(&ba);
        for (int i = 0; i < RACERS; i++) {
                pid[i] = fork();
                assert_true(pid[i] >= 0);
                if (pid[i] == 0)
                        racer(env, inst, rc, i);
        }
        for (int i = 0; i < RACERS; i++) {
                int st = 0;
                assert_int_equal(waitpid(pid[i], &st, 0), pid[i]);
                assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        }
        assert_int_equal(rc->violations, 0);
        assert_int_equal(rc->errors, 0);
        uint64_t last = 0;
        for (int round = 0; round < ROUNDS; round++) {
                int winners = 0;
                for (int i = 0; i < RACERS; i++) {
                        if (!rc->token[round][i])
                                continue;
                        winners++;
                        if (rc->token[round][i] != last + 1)
                                fail_msg("round %d: token %llu after %llu", round,
                                         (unsigned long long)rc->token[round][i], (unsigned long long)last);
                        last = rc->token[round][i];
                }
                if (winners != 1)
                        fail_msg("round %d: %d winners", round, winners);
        }
        pthread_barrier_destroy(&rc->bar);
        munmap(rc, sizeof(*rc));
        env->p->close(inst);
}

size_t suite_add_lease_tests(struct CMUnitTest *out, size_t cap, struct suite_env *env)
{
#define T(f) cmocka_unit_test_prestate_setup_teardown(f, suite_setup, suite_teardown, env)
        const struct CMUnitTest tests[] = {
                T(lease_semantics),
                T(lease_takeover),
                T(lease_fenced_commit),
                T(lease_race),
        };
#undef T
        size_t n = sizeof(tests) / sizeof(tests[0]);

        if (n > cap)
                n = cap;
        memcpy(out, tests, n * sizeof(tests[0]));
        return n;
}
