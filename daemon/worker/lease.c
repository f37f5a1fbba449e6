/* SPDX-License-Identifier: MIT */
/*
 * The session's lease (provider ABI v4, docs/fleet.md): a session runs on
 * at most one of the hosts that share a checkpoint store.
 *
 * The worker claims the lease under this host's name (--host-id) before it
 * starts or restores the session, and a thread of its own renews it every
 * third of --lease-ttl, through a provider instance of its own (the main
 * thread's instance is busy with saves, and providers need not be
 * thread-safe). A renewal taken at monotonic time t keeps the lease ours
 * until t + ttl - LUPINE_CKPT_LEASE_SKEW_MS: past that, another host may
 * judge it expired and claim it, so the main thread runs no call until a
 * renewal succeeds (worker/loop.c holds the input meanwhile). A renewal
 * that finds another claim (-ESTALE) means another host has the session:
 * this worker ends it without touching the store (it keeps the checkpoint,
 * which is the other host's now) and tells its client to go elsewhere.
 *
 * Every save is fenced with the lease's token, so a host that was presumed
 * dead and comes back can never commit over the new holder's checkpoints,
 * whatever the clocks say.
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "provider_load.h"
#include "worker/lease.h"
#include "worker/session.h"
#include "worker/slot_lease.h"

#define RETRY_MS 1000u /* after a failed renewal */

/* The wall clock as "2026-12-03 11:40:05 UTC", for the messages. */
static void wall_text(int64_t unix_ms, char *out, size_t cap)
{
        time_t t = (time_t)(unix_ms / 1000);
        struct tm tm;
        if (unix_ms <= 0 || !gmtime_r(&t, &tm) || !strftime(out, cap, "%Y-%m-%d %H:%M:%S UTC", &tm))
                snprintf(out, cap, "an unknown time");
}

static void note_holder(struct lupw_lease *l, const struct lupine_ckpt_lease *got)
{
        snprintf(l->holder, sizeof(l->holder), "%s", got->owner[0] ? got->owner : "another host");
        l->holder_until_ms = got->expires_unix_ms;
}

static void wake_main(struct lupw_lease *l)
{
        uint64_t one = 1;
        if (l->efd >= 0)
                (void)!write(l->efd, &one, sizeof(one));
}

/* One renewal on instance inst; updates the state. 0, -ESTALE, or another
 * -errno. Called without l->lock by the renewing thread and by the main
 * thread (lupw_lease_confirm), so the state it writes is written under
 * it. */
static int renew_once(struct lupw_session *s, struct lupine_ckpt_instance *inst)
{
        struct lupw_lease *l = &s->lease;
        struct lupine_ckpt_lease got;
        uint64_t t0 = lup_now_ns();

        memset(&got, 0, sizeof(got));
        int rc = s->ckpt.ops->lease_renew(inst, s->name, s->cfg->fleet.host_id, l->token, l->ttl_ms, &got);
        pthread_mutex_lock(&l->lock);
        if (rc == 0) {
                atomic_store(&l->valid_until_ns, t0 + ((uint64_t)l->ttl_ms - LUPINE_CKPT_LEASE_SKEW_MS) * 1000000ull);
                if (l->said_failing)
                        lup_info("session %s: its lease is renewed again", s->name);
                l->said_failing = false;
        } else if (rc == -ESTALE) {
                note_holder(l, &got);
                atomic_store(&l->lost, true);
        }
        pthread_mutex_unlock(&l->lock);
        return rc;
}

/* The session's arena slot (worker/slot_lease.c), renewed after its lease. */
static void slot_renew(struct lupw_session *s, struct lupine_ckpt_instance *inst)
{
        struct lupw_lease *l = &s->lease;
        struct lupine_ckpt_lease got;
        char key[LUPW_SLOT_KEY_MAX];

        pthread_mutex_lock(&l->lock);
        bool on = l->slot_on;
        uint32_t slot = s->slot;
        uint64_t token = l->slot_token;
        pthread_mutex_unlock(&l->lock);
        if (!on)
                return;
        lupw_slot_key(slot, key);
        memset(&got, 0, sizeof(got));
        int rc = s->ckpt.ops->lease_renew(inst, key, s->name, token, l->ttl_ms, &got);
        if (rc != -ESTALE)
                return; /* renewed, or tried again with the session's lease */
        pthread_mutex_lock(&l->lock);
        l->slot_on = false;
        pthread_mutex_unlock(&l->lock);
        if (strcmp(got.owner, s->name) == 0)
                lup_info("session %s: another host claimed its arena slot %u for it (a migration or an adoption)",
                         s->name, (unsigned)slot);
        else
                lup_warn("session %s: its arena slot %u was taken over by session %s (this host was presumed "
                         "dead); a later restore of this session elsewhere will be refused",
                         s->name, (unsigned)slot, got.owner[0] ? got.owner : "(released)");
}

static void slot_end(struct lupw_session *s)
{
        struct lupw_lease *l = &s->lease;
        char key[LUPW_SLOT_KEY_MAX];

        if (!l->slot_on || !l->slot_release)
                return; /* kept: it expires, and the checkpoint keeps it held */
        lupw_slot_key(s->slot, key);
        int rc = s->ckpt.ops->lease_release(s->ckpt.inst, key, s->name, l->slot_token);
        if (rc == 0)
                lup_info("session %s: arena slot %u released in the fleet", s->name, (unsigned)s->slot);
        else if (rc != -ESTALE)
                lup_warn("session %s: cannot release arena slot %u: %s (it is free once its lease expires)", s->name,
                         (unsigned)s->slot, strerror(-rc));
        l->slot_on = false;
}

static void *renew_main(void *arg)
{
        struct lupw_session *s = arg;
        struct lupw_lease *l = &s->lease;
        struct timespec ts;

        pthread_mutex_lock(&l->lock);
        while (!l->stop && !atomic_load(&l->lost)) {
                unsigned wait_ms = l->ttl_ms / 3u;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                ts.tv_sec += (time_t)(wait_ms / 1000u);
                ts.tv_nsec += (long)(wait_ms % 1000u) * 1000000L;
                if (ts.tv_nsec >= 1000000000L) {
                        ts.tv_sec++;
                        ts.tv_nsec -= 1000000000L;
                }
                while (!l->stop && pthread_cond_timedwait(&l->cond, &l->lock, &ts) != ETIMEDOUT)
                        ;
                while (!l->stop) {
                        pthread_mutex_unlock(&l->lock);
                        int rc = renew_once(s, l->inst);
                        if (rc == 0)
                                slot_renew(s, l->inst);
                        pthread_mutex_lock(&l->lock);
                        wake_main(l);
                        if (rc == 0 || rc == -ESTALE)
                                break;
                        if (!l->said_failing) {
                                lup_warn("session %s: cannot renew its lease: %s (%s); retrying every %u ms, and "
                                         "no call runs once it is %u ms old",
                                         s->name, strerror(-rc), s->ckpt.ops->last_error(l->inst), RETRY_MS,
                                         l->ttl_ms - LUPINE_CKPT_LEASE_SKEW_MS);
                                l->said_failing = true;
                        }
                        clock_gettime(CLOCK_MONOTONIC, &ts);
                        ts.tv_sec += RETRY_MS / 1000u;
                        while (!l->stop && pthread_cond_timedwait(&l->cond, &l->lock, &ts) != ETIMEDOUT)
                                ;
                }
        }
        pthread_mutex_unlock(&l->lock);
        return NULL;
}

static int start_renewing(struct lupw_session *s)
{
        struct lupw_lease *l = &s->lease;
        pthread_condattr_t ca;
        sigset_t all, old;

        int rc = s->ckpt.ops->open(lupw_ckpt_config(s), &l->inst);
        if (rc < 0 || !l->inst) {
                lup_err("session %s: cannot open the checkpoint provider a second time, to renew the lease: %s",
                        s->name, strerror(rc < 0 ? -rc : EIO));
                return rc < 0 ? rc : -EIO;
        }
        l->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        pthread_mutex_init(&l->lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&l->cond, &ca);
        pthread_condattr_destroy(&ca);
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old); /* signals stay with the main thread */
        rc = pthread_create(&l->thread, NULL, renew_main, s);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (rc != 0) {
                lup_err("session %s: no thread to renew its lease: %s", s->name, strerror(rc));
                return -rc;
        }
        l->thread_on = true;
        return 0;
}

int lupw_lease_claim(struct lupw_session *s)
{
        struct lupw_lease *l = &s->lease;
        struct lupine_ckpt_lease got;
        char until[64];
        int rc = -EAGAIN;

        l->efd = -1;
        if (!lupine_provider_has_leases(s->ckpt.ops))
                return 0;
        l->ttl_ms = (uint32_t)s->cfg->fleet.lease_ttl_s * 1000u;
        for (int i = 0; i < 5 && rc == -EAGAIN; i++) {
                uint64_t t0 = lup_now_ns();
                memset(&got, 0, sizeof(got));
                rc = s->ckpt.ops->lease_claim(s->ckpt.inst, s->name, s->cfg->fleet.host_id, l->ttl_ms, &got);
                if (rc == 0)
                        atomic_store(&l->valid_until_ns,
                                     t0 + ((uint64_t)l->ttl_ms - LUPINE_CKPT_LEASE_SKEW_MS) * 1000000ull);
        }
        if (rc == -EBUSY) {
                note_holder(l, &got);
                wall_text(got.expires_unix_ms, until, sizeof(until));
                lup_warn("session %s: host %s holds its lease (until %s, unless renewed); it does not run here",
                         s->name, l->holder, until);
                return -EBUSY;
        }
        if (rc < 0) {
                lup_err("session %s: cannot claim its lease in the checkpoint store: %s (%s); not running it, so "
                        "that it never runs on two hosts",
                        s->name, strerror(-rc), s->ckpt.ops->last_error(s->ckpt.inst));
                return rc;
        }
        l->token = got.token;
        l->on = true;
        lup_info("session %s: lease claimed by host %s (token %" PRIu64 ", %u s)", s->name, s->cfg->fleet.host_id,
                 l->token, l->ttl_ms / 1000u);
        rc = start_renewing(s);
        if (rc < 0) {
                (void)s->ckpt.ops->lease_release(s->ckpt.inst, s->name, s->cfg->fleet.host_id, l->token);
                l->on = false;
                return rc;
        }
        return 0;
}

int lupw_lease_check(struct lupw_session *s)
{
        const struct lupw_lease *l = &s->lease;

        if (!l->on)
                return 0;
        if (atomic_load_explicit(&l->lost, memory_order_relaxed))
                return -ESTALE;
        return lup_now_ns() < atomic_load_explicit(&l->valid_until_ns, memory_order_relaxed) ? 0 : -ETIME;
}

int lupw_lease_fence(struct lupw_session *s, struct lupine_ckpt_save *save)
{
        /* A store with leases takes no save from a worker without one:
         * another host may run the session (worker/hello.c refuses such a
         * session; this is the net under it). */
        if (!s->lease.on)
                return lupine_provider_has_leases(s->ckpt.ops) ? -ENOLCK : 0;
        int rc = s->ckpt.ops->save_fence(save, s->cfg->fleet.host_id, s->lease.token);
        if (rc == -ESTALE)
                atomic_store(&s->lease.lost, true);
        return rc;
}

bool lupw_lease_confirm(struct lupw_session *s)
{
        if (!s->lease.on)
                return true;
        if (atomic_load(&s->lease.lost))
                return false;
        return renew_once(s, s->ckpt.inst) == 0;
}

void lupw_lease_end(struct lupw_session *s)
{
        struct lupw_lease *l = &s->lease;

        if (!l->on)
                return;
        if (l->thread_on) {
                pthread_mutex_lock(&l->lock);
                l->stop = true;
                pthread_cond_signal(&l->cond);
                pthread_mutex_unlock(&l->lock);
                pthread_join(l->thread, NULL);
                l->thread_on = false;
        }
        if (!atomic_load(&l->lost))
                slot_end(s); /* before the session's own lease */
        if (l->release_at_end && !atomic_load(&l->lost)) {
                int rc = s->ckpt.ops->lease_release(s->ckpt.inst, s->name, s->cfg->fleet.host_id, l->token);
                if (rc == 0)
                        lup_info("session %s: lease released", s->name);
                else if (rc != -ESTALE)
                        lup_warn("session %s: cannot release its lease: %s (it expires in %u s)", s->name,
                                 strerror(-rc), l->ttl_ms / 1000u);
        }
        if (l->inst)
                s->ckpt.ops->close(l->inst);
        l->inst = NULL;
        if (l->efd >= 0)
                close(l->efd);
        l->efd = -1;
        l->on = false;
}
