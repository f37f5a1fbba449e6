/* SPDX-License-Identifier: MIT */
/*
 * lupinectl migrate NAME --to TARGET (ADMIN MIGRATE, docs/fleet.md): the
 * session moves to the lupined at TARGET through the checkpoint store the
 * two hosts share.
 *
 * The worker is told where the session goes (LUPD_CTL_MIGRATE_TO), then
 * drained to a durable checkpoint as the health watch drains a session
 * (sup_drain_session: the daemon goes on serving the others). Its GOODBYE
 * names TARGET; the client reconnects there first, and TARGET, which does
 * not run the session, restores it from the store on demand
 * (supervisor/adopt.c) under the session's lease, released by this host's
 * worker as it exits. If TARGET cannot be reached or cannot take it, the
 * client goes on through its LUPINE_SERVER list, and this host takes the
 * session back the same way.
 *
 * Pre-copy is the worker's (worker/precopy.c): told MIGRATE_TO, it writes
 * the memory into the next epoch's save while the session runs, and the
 * drain that follows waits for that and then writes only what changed
 * meanwhile. DRAINED says how much went each way and how long the pause
 * was; ADMIN MIGRATION reports it.
 *
 * ADMIN MIGRATION NAME tells how the last migration of NAME went; the
 * verdict is written by the drain (supervisor/drain.c) into s->migrate.
 */
#define LUP_LOG_CAT LUP_LOGC_SESSION
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "ctl.h"
#include "log.h"
#include "net.h"
#include "supervisor/internal.h"

static struct sup_migration *record_of(struct sup *s, const char *name)
{
        for (unsigned i = 0; i < SUP_MIGRATIONS; i++)
                if (s->migrate.rec[i].name[0] && strcmp(s->migrate.rec[i].name, name) == 0)
                        return &s->migrate.rec[i];
        return NULL;
}

/* arg: "NAME TARGET" */
void sup_admin_migrate(struct sup *s, int idx, const char *arg)
{
        char name[LUP_MAX_NAME + 1], target[LUP_GOODBYE_TO_MAX + 1], msg[600];
        struct lup_endpoint ep;
        const char *sp = strchr(arg, ' ');
        size_t nl = sp ? (size_t)(sp - arg) : 0, tl = sp ? strlen(sp + 1) : 0;

        if (!sp || nl == 0 || nl > LUP_MAX_NAME || tl == 0 || tl > LUP_GOODBYE_TO_MAX || strchr(sp + 1, ',')) {
                sup_conn_close(s, idx, EINVAL, "ADMIN MIGRATE: expected \"NAME TARGET\" (TARGET: one endpoint)");
                return;
        }
        memcpy(name, arg, nl);
        name[nl] = 0;
        memcpy(target, sp + 1, tl + 1);
        if (lup_endpoint_parse(target, &ep) < 0) {
                sup_conn_close(s, idx, EINVAL,
                               "cannot migrate: %.200s is not an endpoint (HOST:PORT, tls://HOST:PORT, unix:PATH)",
                               target);
                return;
        }
        if (!s->checkpoints) {
                sup_conn_close(s, idx, EOPNOTSUPP,
                               "cannot migrate: no checkpoint store is configured, and a session moves through the "
                               "store this host shares with the target");
                return;
        }
        int e = lupd_registry_find_name(&s->reg, name);
        if (e < 0 || s->reg.s[e].state != LUPD_SESSION_LIVE) {
                sup_conn_close(s, idx, ENOENT, "cannot migrate: no session %.200s", name);
                return;
        }
        struct lupd_session *se = &s->reg.s[e];
        if (s->stopping || se->drain_sent || se->shutdown_sent || !se->ready ||
            (se->phase != LUPD_PHASE_SERVING && se->phase != LUPD_PHASE_DETACHED && se->phase != LUPD_PHASE_WAITING)) {
                sup_conn_close(s, idx, EAGAIN, "cannot migrate session %.200s now: it is %s", name,
                               s->stopping ? "draining with the daemon" : "starting, restoring, ending or draining");
                return;
        }
        /* A periodic checkpoint does not hold a migration up: the worker
         * drains once it is done (or cancels it while it waits). One an
         * operator asked for is theirs to wait for. */
        if (se->ckpt_running && !se->ckpt_periodic) {
                sup_conn_close(s, idx, EALREADY,
                               "cannot migrate session %.200s while the checkpoint asked for runs; try again", name);
                return;
        }
        uint8_t m[4 + LUP_GOODBYE_TO_MAX];
        lup_put32(m, LUPD_CTL_MIGRATE_TO);
        memcpy(m + 4, target, tl);
        int r = sup_worker_send_msg(s, e, m, 4 + tl);
        if (r < 0) {
                sup_conn_close(s, idx, (uint32_t)-r, "ADMIN MIGRATE: cannot tell its worker: %s", strerror(-r));
                return;
        }
        struct sup_migration *rec = record_of(s, name);
        if (!rec)
                rec = &s->migrate.rec[s->migrate.next++ % SUP_MIGRATIONS];
        memset(rec, 0, sizeof(*rec));
        snprintf(rec->name, sizeof(rec->name), "%s", name);
        snprintf(rec->target, sizeof(rec->target), "%s", target);
        rec->state = SUP_MIGRATION_RUNNING;
        rec->started_ms = sup_now_ms();
        se->migrating = true;
        snprintf(msg, sizeof(msg), "migrating to %s (by %s)", target, s->conns[idx].peer);
        s->migrate.started++;
        (void)sup_drain_session(s, e, msg);
        snprintf(msg, sizeof(msg), "migration of %s to %s started: %llu bytes to checkpoint", name, target,
                 (unsigned long long)se->stats.mem);
        if (sup_admin_reply(&s->conns[idx], msg, strlen(msg)) < 0)
                sup_conn_close(s, idx, 0, "ADMIN MIGRATE: cannot send the reply");
        else
                sup_conn_done(s, idx, "ADMIN MIGRATE %s %s", name, target);
}

void sup_admin_migration(struct sup *s, int idx, const char *name)
{
        const struct sup_migration *rec = record_of(s, name);
        char msg[400];

        if (!rec) {
                sup_conn_close(s, idx, ENOENT, "no migration of %.200s is known here", name);
                return;
        }
        if (rec->state == SUP_MIGRATION_RUNNING) {
                int e = lupd_registry_find_name(&s->reg, name);
                const struct lupd_session_stats *st = e >= 0 ? &s->reg.s[e].stats : NULL;
                snprintf(msg, sizeof(msg), "running %llu %llu", st ? (unsigned long long)st->done : 0ull,
                         st ? (unsigned long long)st->total : 0ull);
        } else if (rec->state == SUP_MIGRATION_DONE) {
                snprintf(msg, sizeof(msg), "done %llu %llu %s %llu %llu %llu", (unsigned long long)rec->bytes,
                         (unsigned long long)rec->ms, rec->target, (unsigned long long)rec->precopied,
                         (unsigned long long)rec->paused_bytes, (unsigned long long)rec->paused_us);
        } else {
                snprintf(msg, sizeof(msg), "failed %s", rec->why);
        }
        if (sup_admin_reply(&s->conns[idx], msg, strlen(msg)) < 0)
                sup_conn_close(s, idx, 0, "ADMIN MIGRATION: cannot send the reply");
        else
                sup_conn_done(s, idx, "ADMIN MIGRATION %s", name);
}
