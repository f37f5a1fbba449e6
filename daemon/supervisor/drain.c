/* SPDX-License-Identifier: MIT */
/*
 * Drain: what SIGTERM and SIGINT do when a checkpoint provider is
 * configured (docs/sessions.md, "What happens on SIGTERM").
 *
 *   1. Stop admitting: accepts are no longer armed, but the listening
 *      sockets stay open, so new clients wait in the backlog (for our
 *      successor, when it inherits them, or until they time out and
 *      retry). Connections still before their HELLO are closed.
 *   2. STOPPING=1 to systemd, and LUPD_CTL_DRAIN to every worker, which
 *      finishes what it accepted, says GOODBYE to its client, checkpoints
 *      through the provider and reports LUPD_CTL_DRAINED.
 *   3. Every LUPD_EXTEND_INTERVAL_MS, EXTEND_TIMEOUT_USEC to systemd.
 *   4. A worker that has not reported within --drain-timeout is killed;
 *      its session is lost (a kernel that never finishes must not hold
 *      the other sessions, or the host, hostage).
 *   5. Exit 0 when every session was checkpointed, 1 when one was lost.
 *
 * What each worker is told depends on the checkpoint mode
 * (--checkpoint-mode, sup_drain_flags): DURABLE (the memory contents
 * through the provider), HOT (each arena chunk exported as an fd, which
 * supervisor/fdstore.c puts in the service manager's fd store), or both.
 * There is no fd store without a service manager, so a SIGTERM drain then
 * writes the durable copy whatever the mode says.
 *
 * An upgrade drains the same way and re-executes after. SIGTERM or SIGINT
 * during its drain is not dropped: the drain finishes and the daemon
 * stops instead (supervisor/upgrade.c: sup_upgrade_cancel, sup_upgrade_stop).
 *
 * Each session gets exactly one verdict line: "session NAME checkpointed",
 * "session NAME LOST: why", or one of three that lose nothing:
 *   - a session whose CUDA context has a sticky error of its own (an
 *     illegal address, say) cannot be checkpointed: "session NAME ended by
 *     its own error" (DRAINED -ENOTRECOVERABLE); its older checkpoint, if
 *     any, is kept, and the drain's exit status does not count it;
 *   - a session restored at start and never touched since whose new
 *     checkpoint failed keeps its older one (the provider never lets a
 *     failed save damage the committed checkpoint before it);
 *   - a session that ended by itself (its client said GOODBYE, or its TTL
 *     ran out) just as the drain began: its worker exits 0 without
 *     DRAINED, and there was nothing left to save.
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>

#include "buf.h"
#include "ctl.h"
#include "log.h"
#include "supervisor/internal.h"

/* ---- what each worker is told */

uint32_t sup_drain_flags_for(struct sup *s, bool upgrade)
{
        enum lupd_ckpt_mode m = s->cfg->checkpoint_mode;
        bool store = sup_have_fd_store();

        if (upgrade) {
                switch (m) {
                case LUPD_CKPT_HOT:
                        return LUPD_DRAIN_HANDBACK | LUPD_DRAIN_HOT;
                case LUPD_CKPT_DURABLE:
                        return LUPD_DRAIN_HANDBACK | LUPD_DRAIN_DURABLE;
                case LUPD_CKPT_AUTO:
                case LUPD_CKPT_BOTH:
                        break;
                }
                return LUPD_DRAIN_HANDBACK | LUPD_DRAIN_HOT | LUPD_DRAIN_DURABLE;
        }
        switch (m) {
        case LUPD_CKPT_DURABLE:
                return LUPD_DRAIN_DURABLE;
        case LUPD_CKPT_AUTO:
                return store ? LUPD_DRAIN_HOT | LUPD_DRAIN_DURABLE : LUPD_DRAIN_DURABLE;
        case LUPD_CKPT_HOT:
        case LUPD_CKPT_BOTH:
                break;
        }
        if (!store) {
                lup_warn("--checkpoint-mode %s: no service manager fd store (NOTIFY_SOCKET is not set) to keep device "
                         "memory in across a stop; writing the durable copy instead",
                         m == LUPD_CKPT_HOT ? "hot" : "both");
                return LUPD_DRAIN_DURABLE;
        }
        return m == LUPD_CKPT_HOT ? LUPD_DRAIN_HOT : LUPD_DRAIN_HOT | LUPD_DRAIN_DURABLE;
}

uint32_t sup_drain_flags(struct sup *s)
{
        return sup_drain_flags_for(s, s->upgrade);
}

const char *sup_drain_mode_name(uint32_t flags)
{
        switch (flags & (LUPD_DRAIN_HOT | LUPD_DRAIN_DURABLE)) {
        case LUPD_DRAIN_HOT:
                return "hot";
        case LUPD_DRAIN_DURABLE:
                return "durable";
        default:
                return "hot and durable";
        }
}

int sup_worker_send_drain(struct sup *s, int idx, uint32_t flags)
{
        struct lupd_session *se = &s->reg.s[idx];
        uint8_t msg[8];

        if (se->ctl_fd < 0)
                return -EBADF;
        se->drain_flags = flags;
        se->work_started_ms = sup_now_ms();
        lup_put32(msg, LUPD_CTL_DRAIN);
        lup_put32(msg + 4, flags);
        if (send(se->ctl_fd, msg, sizeof(msg), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
                return -errno;
        return 0;
}

/* ---- the drain */

static int drain_left(const struct sup *s)
{
        int n = 0;

        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++) {
                const struct lupd_session *se = &s->reg.s[i];
                n += se->state != LUPD_SESSION_FREE && se->drain_sent && !se->drain_done;
        }
        return n;
}

enum verdict {
        CHECKPOINTED,
        FAILED,
        ENDED,
        OWN_ERROR
};

/* A migration's verdict, for ADMIN MIGRATION and the metrics. */
static void migration_end(struct sup *s, const struct lupd_session *se, bool ok, const char *why,
                          const struct sup_drained *fig)
{
        for (unsigned i = 0; i < SUP_MIGRATIONS; i++) {
                struct sup_migration *m = &s->migrate.rec[i];
                if (m->state != SUP_MIGRATION_RUNNING || strcmp(m->name, se->name) != 0)
                        continue;
                m->ms = sup_now_ms() - m->started_ms;
                m->bytes = se->stats.mem;
                m->precopied = fig ? fig->precopied : 0;
                m->paused_bytes = fig ? fig->paused_written : 0;
                m->paused_us = fig ? fig->paused_us : 0;
                m->state = ok ? SUP_MIGRATION_DONE : SUP_MIGRATION_FAILED;
                snprintf(m->why, sizeof(m->why), "%s", why ? why : "");
                if (ok) {
                        s->migrate.done++;
                        s->migrate.bytes += m->bytes;
                        s->migrate.ms += m->ms;
                        s->migrate.precopied += m->precopied;
                        s->migrate.paused_bytes += m->paused_bytes;
                        s->migrate.paused_us += m->paused_us;
                        lup_info("session %s: migration to %s: %.2f GiB checkpointed in %.2f s (%.2f GiB pre-copied "
                                 "while it ran, %.2f GiB in a pause of %.3f s); its client goes there",
                                 se->name, m->target, m->bytes / 1073741824.0, m->ms / 1000.0,
                                 m->precopied / 1073741824.0, m->paused_bytes / 1073741824.0, m->paused_us / 1e6);
                } else {
                        lup_warn("session %s: migration to %s failed: %s", se->name, m->target, m->why);
                }
        }
}

static void drain_verdict(struct sup *s, int idx, enum verdict v, const char *why, const struct sup_drained *fig)
{
        struct lupd_session *se = &s->reg.s[idx];

        se->drain_done = true;
        if (se->migrating)
                migration_end(s, se, v == CHECKPOINTED, why ? why : "the session ended first", fig);
        if (v == CHECKPOINTED) {
                s->n_checkpointed++;
                sup_count_work(s, se, false);
                if (se->hot_fds)
                        lup_info("session %s checkpointed (%s): %llu memory fd(s), %.2f GiB, %s", se->name,
                                 sup_drain_mode_name(se->drain_flags), (unsigned long long)se->hot_fds,
                                 se->hot_bytes / 1073741824.0,
                                 !s->upgrade       ? "in the service manager's fd store"
                                 : s->upgrade_stop ? "kept until the drain ends (the upgrade was cancelled)"
                                                   : "kept for the re-exec");
                else
                        lup_info("session %s checkpointed", se->name);
        } else if (v == OWN_ERROR) {
                /* The tenant's bug, not lupine's failure (issue 15,
                 * finding 8): it does not fail the drain. */
                s->n_own_error++;
                lup_warn("session %s ended by its own error: %s; it was not checkpointed again, and its previous "
                         "checkpoint (if it has one) is kept",
                         se->name, why);
        } else if (v == ENDED) {
                s->n_ended++;
                lup_info("session %s ended before it could be checkpointed (%s)", se->name, why);
        } else if (se->was_pristine) {
                s->n_kept++;
                lup_warn("session %s was not checkpointed again: %s; it was not used since it was restored, so "
                         "its previous checkpoint is kept",
                         se->name, why);
        } else {
                s->n_lost++;
                lup_err("session %s LOST: %s", se->name, why);
        }
        sup_status_update(s);
}

void sup_drain_on_drained(struct sup *s, int idx, int32_t status, const struct sup_drained *fig)
{
        char why[128];

        if (status == 0) {
                drain_verdict(s, idx, CHECKPOINTED, NULL, fig);
                return;
        }
        if (status == -ENOTRECOVERABLE) {
                drain_verdict(s, idx, OWN_ERROR,
                              "its CUDA context has a sticky error of its own making (the worker's log names it)",
                              NULL);
                return;
        }
        snprintf(why, sizeof(why), "the checkpoint failed: %s (the worker's log says more)", sup_errno_text(status));
        drain_verdict(s, idx, FAILED, why, NULL);
}

void sup_drain_on_gone(struct sup *s, int idx, int wait_status)
{
        struct lupd_session *se = &s->reg.s[idx];
        char how[64], why[160];

        /* A worker exits 0 without DRAINED only when its session had
         * ended by itself (GOODBYE, TTL) before it read DRAIN: nothing
         * was there to save. Everything else is a failed checkpoint. */
        if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) {
                snprintf(why, sizeof(why), "its worker %d exited without a checkpoint", (int)se->pid);
                drain_verdict(s, idx, ENDED, why, NULL);
                return;
        }
        sup_describe_wait(wait_status, how, sizeof(how));
        snprintf(why, sizeof(why), "its worker %d %s before reporting a checkpoint", (int)se->pid, how);
        drain_verdict(s, idx, FAILED, why, NULL);
}

/* A FAILED worker is on its way out with nothing to save. */
static bool drainable(const struct lupd_session *se)
{
        return se->state == LUPD_SESSION_LIVE && se->phase != LUPD_PHASE_FAILED;
}

/* ---- one session, the daemon going on (the health watch) */

int sup_drain_session(struct sup *s, int idx, const char *why)
{
        struct lupd_session *se = &s->reg.s[idx];
        int r;

        if (!drainable(se) || se->drain_sent)
                return -EALREADY;
        se->drain_sent = true;
        se->health_drain = true;
        se->was_pristine = se->restore && (se->phase == LUPD_PHASE_RESTORING || se->phase == LUPD_PHASE_WAITING);
        se->drain_deadline = sup_now_ms() + (uint64_t)s->cfg->drain_timeout_s * 1000u;
        r = sup_worker_send_drain(s, idx, LUPD_DRAIN_DURABLE);
        if (r < 0) {
                lup_warn("cannot tell worker %d (session %s) to drain: %s", (int)se->pid, se->name, strerror(-r));
                return 0; /* it is dying; the reaper gives the verdict */
        }
        lup_warn("session %s: draining to a durable checkpoint (%s); its client is told to reconnect, to another "
                 "host if this one does not admit it",
                 se->name, why);
        return 0;
}

void sup_drain_session_expire(struct sup *s, int idx)
{
        struct lupd_session *se = &s->reg.s[idx];
        char why[192];

        snprintf(why, sizeof(why),
                 "its worker %d did not finish the checkpoint within %d s (--drain-timeout); killed it", (int)se->pid,
                 s->cfg->drain_timeout_s);
        drain_verdict(s, idx, FAILED, why, NULL);
        sup_worker_kill(s, idx);
}

void sup_drain_begin(struct sup *s, const char *why)
{
        uint64_t now = sup_now_ms();
        int n = 0;

        s->stopping = true;
        s->stop = SUP_DRAIN;
        if (!s->upgrade)
                s->totals.drains++;
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++)
                n += drainable(&s->reg.s[i]);
        if (n)
                lup_info("%s: draining: checkpointing %d session(s), at most %d s (--drain-timeout); new clients "
                         "wait in the listen backlog",
                         why, n, s->cfg->drain_timeout_s);
        else
                lup_info("%s: draining: no sessions to checkpoint", why);
        s->drain_flags = sup_drain_flags(s);
        if (s->drain_flags & LUPD_DRAIN_HOT)
                sup_raise_nofile();
        if (n)
                lup_info("checkpoint mode for this drain: %s%s", sup_drain_mode_name(s->drain_flags),
                         s->upgrade ? ", connections kept" : "");
        /* An upgrade re-executes under the same pid: systemd hears
         * RELOADING=1 (sup_upgrade_begin) and READY=1 after, not STOPPING. */
        if (s->upgrade)
                sd_notifyf(0, "STATUS=upgrading: draining %d sessions", n);
        else
                sd_notifyf(0, "STOPPING=1\nSTATUS=draining %d sessions", n);

        sup_listeners_pause(s);
        for (int i = 0; i < LUPD_MAX_PENDING; i++)
                if (s->conns[i].fd >= 0 && !s->conns[i].closing)
                        sup_conn_close(s, i, 0, "server draining");
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++) {
                struct lupd_session *se = &s->reg.s[i];
                int r;

                if (!drainable(se) || se->drain_sent) /* the health watch drains it already */
                        continue;
                se->drain_sent = true;
                se->was_pristine = se->restore &&
                                   (se->phase == LUPD_PHASE_RESTORING || se->phase == LUPD_PHASE_WAITING);
                r = sup_worker_send_drain(s, i, s->drain_flags);
                /* A worker that cannot be told is dying; the reaper gives
                 * its verdict. */
                if (r < 0)
                        lup_warn("cannot tell worker %d (session %s) to drain: %s", (int)se->pid, se->name,
                                 strerror(-r));
        }
        s->n_drain = n;
        s->stop_deadline = now + (uint64_t)s->cfg->drain_timeout_s * 1000u;
        s->next_extend = 0;
        if (n)
                sup_notify_extend(s, now);
}

void sup_drain_tick(struct sup *s, uint64_t now)
{
        if (drain_left(s) > 0)
                sup_notify_extend(s, now);
        if (s->killed || now < s->stop_deadline)
                return;
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++) {
                struct lupd_session *se = &s->reg.s[i];

                if (se->state != LUPD_SESSION_LIVE)
                        continue;
                if (se->drain_sent && !se->drain_done) {
                        sup_drain_session_expire(s, i); /* the verdict, and SIGKILL */
                        continue;
                }
                lup_warn("worker %d for session %s is still running at the drain deadline; killing it", (int)se->pid,
                         se->name);
                sup_worker_kill(s, i);
        }
        s->killed = true;
        s->kill_deadline = now + LUPD_KILL_GRACE_MS;
}
