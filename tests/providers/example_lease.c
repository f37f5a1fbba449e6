/* SPDX-License-Identifier: MIT */
/*
 * The example provider's session leases: the table (example_lease.h) and,
 * at the end, the version-4 callbacks over it (example_internal.h). A real
 * store does each of these as one conditional write (a compare-and-swap on
 * the lease object's version, a conditional PUT, a transaction); here one
 * mutex around a read-modify-write of a table plays that part.
 *
 * The table lives in a MAP_SHARED anonymous mapping made at the first open
 * in a process, so every instance of the process and the processes forked
 * after it share it, as hosts share a store: that is
 * how the tests race several processes for one lease. The mutex is
 * process-shared and robust: a process that dies holding it leaves it
 * usable (each change is one struct assignment, so the table is never
 * half-written).
 */
#include "example_internal.h"
#include "example_lease.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

struct ex_lease_slot {
        char session[129]; /* "" while unused */
        struct lupine_ckpt_lease lease;
};

struct ex_leases {
        pthread_mutex_t mu;
        struct ex_lease_slot slot[EX_LEASE_SLOTS];
};

static int64_t now_unix_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One table per process, whatever the number of instances: lupined opens
 * a second instance in each worker to renew the lease from a thread, and
 * instances of one configuration must see the same leases, as hosts on
 * one store do (docs/providers.md). */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ex_leases *table;
static unsigned table_refs;

struct ex_leases *ex_leases_new(void)
{
        pthread_mutexattr_t a;
        struct ex_leases *t;

        pthread_mutex_lock(&table_lock);
        if (table) {
                table_refs++;
                t = table;
                pthread_mutex_unlock(&table_lock);
                return t;
        }
        t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (t == MAP_FAILED) {
                pthread_mutex_unlock(&table_lock);
                return NULL;
        }
        pthread_mutexattr_init(&a);
        pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
        pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
        pthread_mutex_init(&t->mu, &a);
        pthread_mutexattr_destroy(&a);
        table = t;
        table_refs = 1;
        pthread_mutex_unlock(&table_lock);
        return t;
}

void ex_leases_free(struct ex_leases *t)
{
        if (!t)
                return;
        pthread_mutex_lock(&table_lock);
        if (t == table && --table_refs == 0) {
                munmap(t, sizeof(*t));
                table = NULL;
        }
        pthread_mutex_unlock(&table_lock);
}

static void lock(struct ex_leases *t)
{
        if (pthread_mutex_lock(&t->mu) == EOWNERDEAD)
                pthread_mutex_consistent(&t->mu);
}

void ex_leases_unlock(struct ex_leases *t)
{
        pthread_mutex_unlock(&t->mu);
}

/* The session's slot, or a free one for it (create), or NULL. Locked. */
static struct ex_lease_slot *find(struct ex_leases *t, const char *session, bool create)
{
        struct ex_lease_slot *unused = NULL;

        for (size_t i = 0; i < EX_LEASE_SLOTS; i++) {
                if (strcmp(t->slot[i].session, session) == 0)
                        return &t->slot[i];
                if (!unused && !t->slot[i].session[0])
                        unused = &t->slot[i];
        }
        if (!create || !unused)
                return NULL;
        /* records are never deleted: tokens must never restart */
        snprintf(unused->session, sizeof(unused->session), "%s", session);
        unused->lease = (struct lupine_ckpt_lease){ 0 };
        return unused;
}

static bool holds(const struct lupine_ckpt_lease *l, const char *owner, uint64_t token)
{
        return l->owner[0] && l->token == token && strcmp(l->owner, owner) == 0;
}

int ex_leases_claim(struct ex_leases *t, const char *session, const char *owner, uint32_t ttl_ms,
                    struct lupine_ckpt_lease *ret)
{
        struct ex_lease_slot *s;
        int64_t now = now_unix_ms();
        int r = 0;

        lock(t);
        s = find(t, session, true);
        if (!s) {
                r = -ENOSPC;
        } else if (s->lease.owner[0] && strcmp(s->lease.owner, owner) != 0 && s->lease.expires_unix_ms > now) {
                *ret = s->lease;
                r = -EBUSY;
        } else if (s->lease.token == UINT64_MAX) {
                r = -EOVERFLOW;
        } else {
                struct lupine_ckpt_lease l = { .token = s->lease.token + 1, .expires_unix_ms = now + ttl_ms };
                snprintf(l.owner, sizeof(l.owner), "%s", owner);
                s->lease = l;
                *ret = l;
        }
        ex_leases_unlock(t);
        return r;
}

int ex_leases_renew(struct ex_leases *t, const char *session, const char *owner, uint64_t token, uint32_t ttl_ms,
                    struct lupine_ckpt_lease *ret)
{
        struct ex_lease_slot *s;
        int r = 0;

        lock(t);
        s = find(t, session, false);
        if (!s || !holds(&s->lease, owner, token)) {
                *ret = s ? s->lease : (struct lupine_ckpt_lease){ 0 };
                r = -ESTALE;
        } else {
                s->lease.expires_unix_ms = now_unix_ms() + ttl_ms;
                *ret = s->lease;
        }
        ex_leases_unlock(t);
        return r;
}

int ex_leases_release(struct ex_leases *t, const char *session, const char *owner, uint64_t token)
{
        struct ex_lease_slot *s;
        int r = 0;

        lock(t);
        s = find(t, session, false);
        if (s && !s->lease.owner[0] && s->lease.token == token && token != 0) {
                r = 0; /* released already, and nobody claimed since */
        } else if (!s || !holds(&s->lease, owner, token)) {
                r = -ESTALE;
        } else {
                s->lease.owner[0] = '\0';
                s->lease.expires_unix_ms = 0;
        }
        ex_leases_unlock(t);
        return r;
}

void ex_leases_read(struct ex_leases *t, const char *session, struct lupine_ckpt_lease *ret)
{
        struct ex_lease_slot *s;

        lock(t);
        s = find(t, session, false);
        *ret = s ? s->lease : (struct lupine_ckpt_lease){ 0 };
        ex_leases_unlock(t);
}

int ex_leases_hold(struct ex_leases *t, const char *session, const char *owner, uint64_t token)
{
        struct ex_lease_slot *s;

        lock(t);
        s = find(t, session, false);
        if (!s || !holds(&s->lease, owner, token)) {
                ex_leases_unlock(t);
                return -ESTALE;
        }
        return 0;
}

/* ---- the callbacks (abi/lupine/checkpoint_provider.h, version 4) */

static int lease_args(struct lupine_ckpt_instance *inst, const char *session, const char *owner, uint32_t ttl_ms,
                      bool want_ttl)
{
        inst->err[0] = '\0';
        if (!ex_valid_session(session) || (owner && !ex_valid_session(owner)))
                return ex_fail(inst, -EINVAL, "invalid session name or lease owner");
        if (want_ttl && (ttl_ms == 0 || ttl_ms > LUPINE_CKPT_LEASE_TTL_MAX_MS))
                return ex_fail(inst, -EINVAL, "lease ttl %u ms is outside 1..%u", ttl_ms, LUPINE_CKPT_LEASE_TTL_MAX_MS);
        return 0;
}

static int lease_result(struct lupine_ckpt_instance *inst, const char *session, int r)
{
        if (r == -EBUSY)
                return ex_fail(inst, r, "session %s is leased to another owner", session);
        if (r == -ESTALE)
                return ex_fail(inst, r, "the lease of session %s is not (owner, token)'s any more", session);
        if (r < 0)
                return ex_fail(inst, r, "lease of session %s: %s", session, strerror(-r));
        return 0;
}

int ex_lease_claim(struct lupine_ckpt_instance *inst, const char *session, const char *owner, uint32_t ttl_ms,
                   struct lupine_ckpt_lease *ret)
{
        int r = lease_args(inst, session, owner ? owner : "", ttl_ms, true);

        return r < 0 ? r : lease_result(inst, session, ex_leases_claim(inst->leases, session, owner, ttl_ms, ret));
}

int ex_lease_renew(struct lupine_ckpt_instance *inst, const char *session, const char *owner, uint64_t token,
                   uint32_t ttl_ms, struct lupine_ckpt_lease *ret)
{
        int r = lease_args(inst, session, owner ? owner : "", ttl_ms, true);

        return r < 0 ? r
                     : lease_result(inst, session, ex_leases_renew(inst->leases, session, owner, token, ttl_ms, ret));
}

int ex_lease_release(struct lupine_ckpt_instance *inst, const char *session, const char *owner, uint64_t token)
{
        int r = lease_args(inst, session, owner ? owner : "", 0, false);

        return r < 0 ? r : lease_result(inst, session, ex_leases_release(inst->leases, session, owner, token));
}

int ex_lease_read(struct lupine_ckpt_instance *inst, const char *session, struct lupine_ckpt_lease *ret)
{
        int r = lease_args(inst, session, NULL, 0, false);

        if (r == 0)
                ex_leases_read(inst->leases, session, ret);
        return r;
}

int ex_save_fence(struct lupine_ckpt_save *save, const char *owner, uint64_t token)
{
        struct lupine_ckpt_instance *inst = save->inst;
        int r = lease_args(inst, save->ckpt->session, owner ? owner : "", 0, false);

        if (r < 0 || token == 0 || save->fenced)
                return ex_fail(inst, -EINVAL, "save_fence: invalid owner, token 0, or fenced already");
        r = ex_leases_hold(inst->leases, save->ckpt->session, owner, token);
        if (r < 0)
                return lease_result(inst, save->ckpt->session, r);
        ex_leases_unlock(inst->leases);
        save->fenced = true;
        snprintf(save->fence_owner, sizeof(save->fence_owner), "%s", owner);
        save->fence_token = token;
        return 0;
}
