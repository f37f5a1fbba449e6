/* SPDX-License-Identifier: MIT */
/*
 * ADMIN: an operator's request (lupinectl), sent as the first frame of a
 * connection instead of HELLO (abi/lupine/wire.h, docs/protocol.md).
 *
 * Who may ask: only a peer on a UNIX-socket listener whose SO_PEERCRED uid
 * is 0 or ours. That is judged on the header alone, before a payload byte
 * is read or allocated. Anyone else is refused like any other bad first
 * frame: one log line and a refusal.
 *
 * What it may ask (the payload is one u16):
 *   STATUS  a JSON object describing the daemon and its sessions;
 *   DRAIN   what SIGTERM does with a checkpoint provider: checkpoint every
 *           session, then exit. Without a provider it is refused and
 *           nothing happens (SIGTERM would end the sessions; an operator
 *           asking to drain wants them kept).
 * Every connection gets one reply and is closed.
 */
#define LUP_LOG_CAT LUP_LOGC_ADMIN
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "auth_tokens.h"
#include "ctl.h"
#include "log.h"
#include "supervisor/internal.h"
#include "upload_acct.h"

int sup_admin_check_header(struct sup *s, int idx)
{
        struct conn *c = &s->conns[idx];
        struct ucred cred;
        socklen_t clen = sizeof(cred);
        char why[LUP_ADMIN_WHY_SIZE];

        if (!c->unix_listener) {
                sup_conn_close(s, idx, EPERM, "ADMIN is accepted only on UNIX-socket listeners");
                return -EPERM;
        }
        if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0 || clen != sizeof(cred)) {
                sup_conn_close(s, idx, EPERM, "ADMIN refused: cannot learn the peer's credentials");
                return -EPERM;
        }
        if (cred.uid != 0 && cred.uid != geteuid()) {
                sup_conn_close(s, idx, EPERM, "ADMIN refused: uid %u is neither root nor the daemon's uid %u",
                               (unsigned)cred.uid, (unsigned)geteuid());
                return -EPERM;
        }
        if (lup_admin_request_check(&c->hdr, why) < 0) {
                sup_conn_close(s, idx, EINVAL, "%s", why);
                return -EBADMSG;
        }
        return 0;
}


/* The words lupinectl shows; docs/protocol.md lists them. */

static void admin_limit(struct lup_admin_status *st, const char *name, int64_t value, uint64_t hits)
{
        struct lup_admin_limit *l;

        if (st->n_limits >= (int)LUP_ADMIN_MAX_LIMITS)
                return;
        l = &st->limits[st->n_limits++];
        snprintf(l->name, sizeof(l->name), "%s", name);
        l->value = value;
        l->hits = (int64_t)hits;
}

/* The limits of docs/security.md, under the names it uses. */
static void admin_limits(const struct sup *s, struct lup_admin_status *st)
{
        admin_limit(st, "detach_grace_s", s->cfg->detach_grace_s, s->hits.detach_grace);
        admin_limit(st, "max_pending", s->cfg->max_pending, s->hits.pending_total);
        admin_limit(st, "max_pending_per_peer", s->cfg->max_pending_per_peer, s->hits.pending_peer);
        admin_limit(st, "upload_cap_session_mib", s->cfg->upload_cap_session_mib,
                    s->upload_acct ? atomic_load(&s->upload_acct->refused_session) : 0);
        admin_limit(st, "max_sessions_per_tenant", s->cfg->max_sessions_per_tenant, s->hits.tenant_sessions);
        admin_limit(st, "max_detached_per_tenant", s->cfg->max_detached_per_tenant, s->hits.tenant_detached);
        admin_limit(st, "arena_slots_usable", (int64_t)LUP_ARENA_SLOTS - __builtin_popcountll(s->reg.unusable), 0);
        admin_limit(st, "upload_cap_total_mib", s->cfg->upload_cap_total_mib,
                    s->upload_acct ? atomic_load(&s->upload_acct->refused_total) : 0);
}

_Static_assert(LUP_ADMIN_MAX_WORD >= LUPD_TENANT_PREFIX_MAX, "a tenant id fits STATUS's word");

/* What the worker last reported, as lupinectl shows it. */
static void admin_session_stats(const struct lupd_session *se, struct lup_admin_session *out)
{
        const struct lupd_session_stats *st = &se->stats;
        out->has_stats = true;
        lupd_key_tenant_id(se->name, out->tenant);
        snprintf(out->client, sizeof(out->client), "%s", se->client);
        out->calls = (int64_t)st->calls;
        out->bytes_in = (int64_t)st->bytes_in;
        out->bytes_out = (int64_t)st->bytes_out;
        out->peer_bytes_in = (int64_t)st->peer_in;
        out->peer_bytes_out = (int64_t)st->peer_out;
        out->memory = (int64_t)st->mem;
        /* a rate is as old as its report: none for 3 s means idle */
        bool fresh = st->have && sup_now_ms() - st->at_ms < 3000;
        out->calls_per_s = fresh ? st->calls_per_s : 0;
        out->bytes_per_s = fresh ? st->bytes_per_s : 0;
        out->checkpoint_epoch = (int64_t)st->epoch;
        out->checkpoint_age_s = -1;
        if (st->ckpt_unix_ms) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                uint64_t now = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
                out->checkpoint_age_s = now > st->ckpt_unix_ms ? (int64_t)((now - st->ckpt_unix_ms) / 1000u) : 0;
        }
        if (st->phase != LUPD_WORK_NONE) {
                snprintf(out->progress, sizeof(out->progress), "%s",
                         st->phase == LUPD_WORK_RESTORE ? "restore" : "checkpoint");
                out->progress_done = (int64_t)st->done;
                out->progress_total = (int64_t)st->total;
        }
}

static void admin_status(struct sup *s, int idx)
{
        struct lup_admin_status *st = calloc(1, sizeof(*st));
        size_t len;
        char *text;
        int r;

        if (!st) {
                sup_conn_close(s, idx, ENOMEM, "ADMIN STATUS: out of memory");
                return;
        }
        snprintf(st->version, sizeof(st->version), "%s", LUPINE_VERSION);
        /* auto says what the workers chose, once one has told */
        snprintf(st->backend, sizeof(st->backend), "%s",
                 s->cfg->backend == LUPD_BACKEND_AUTO && s->backend_seen
                         ? (s->backend_seen == LUP_BACKEND_CUDA ? "auto (cuda)" : "auto (sim)")
                         : lupd_backend_name(s->cfg->backend));
        st->draining = s->stop == SUP_DRAIN;
        st->stopping = s->stopping;
        st->checkpoints = s->checkpoints;
        st->max_sessions = s->reg.max_sessions;
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++) {
                const struct lupd_session *se = &s->reg.s[i];
                struct lup_admin_session *out = &st->s[st->n];

                if (se->state != LUPD_SESSION_LIVE)
                        continue;
                snprintf(out->name, sizeof(out->name), "%s", se->name);
                snprintf(out->state, sizeof(out->state), "%s", sup_admin_state_name(se->phase));
                out->slot = se->slot;
                out->pid = (int)se->pid;
                admin_session_stats(se, out);
                out->unresponsive = se->unresponsive;
                out->has_ckpt_result = se->ckpt_asked;
                snprintf(out->last_checkpoint_error, sizeof(out->last_checkpoint_error), "%s", se->ckpt_error);
                st->n++;
        }
        admin_limits(s, st);
        sup_health_report(s, &st->health);
        if (s->stop == SUP_DRAIN) { /* lupinectl drain's progress */
                s->drain_status_ms = sup_now_ms();
                st->has_drain = true;
                st->drain = (struct lup_admin_drain){ .sessions = s->n_drain,
                                                      .checkpointed = s->n_checkpointed,
                                                      .lost = s->n_lost,
                                                      .kept = s->n_kept,
                                                      .ended = s->n_ended,
                                                      .own_error = s->n_own_error };
        }
        r = lup_admin_status_encode(st, &text, &len);
        if (r < 0) {
                sup_conn_close(s, idx, (uint32_t)-r, "ADMIN STATUS: cannot write the reply: %s", strerror(-r));
                free(st);
                return;
        }
        if (len > LUP_ADMIN_MAX_TEXT) {
                free(text);
                free(st);
                sup_conn_close(s, idx, EMSGSIZE, "ADMIN STATUS: the reply does not fit in %u bytes",
                               LUP_ADMIN_MAX_TEXT);
                return;
        }
        r = sup_admin_reply(&s->conns[idx], text, len);
        free(text);
        if (r < 0)
                sup_conn_close(s, idx, 0, "ADMIN STATUS: cannot send the reply: %s", strerror(-r));
        else
                sup_conn_done(s, idx, "ADMIN STATUS answered (%d session(s))", st->n);
        free(st);
}

static void admin_drain(struct sup *s, int idx)
{
        char msg[256], why[256];
        int n = 0, r;

        if (!s->checkpoints) {
                sup_conn_close(s, idx, EOPNOTSUPP,
                               "cannot drain: no checkpoint provider is configured (--checkpoint-dir or "
                               "--checkpoint-provider); nothing was done");
                return;
        }
        if (s->stopping) {
                sup_conn_close(s, idx, EALREADY, "cannot drain: the daemon is already stopping");
                return;
        }
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++)
                n += s->reg.s[i].state == LUPD_SESSION_LIVE && s->reg.s[i].phase != LUPD_PHASE_FAILED;
        snprintf(msg, sizeof(msg),
                 "draining: checkpointing %d session(s) (at most %d s, --drain-timeout); lupined exits when done",
                 n, s->cfg->drain_timeout_s);
        snprintf(why, sizeof(why), "ADMIN DRAIN from %s", s->conns[idx].peer);
        r = sup_admin_reply(&s->conns[idx], msg, strlen(msg));
        if (r < 0) {
                /* The operator cannot learn that the drain began: do not begin it. */
                sup_conn_close(s, idx, 0, "ADMIN DRAIN: cannot send the reply: %s; not draining", strerror(-r));
                return;
        }
        /* The connection goes first: the drain closes pending connections,
         * and this one has had its answer. */
        sup_conn_close(s, idx, 0, "ADMIN DRAIN accepted");
        sup_drain_begin(s, why);
}

/* The zero-disconnect upgrade (supervisor/upgrade.c). The checks come first,
 * so a refusal changes nothing; the reply goes before the drain begins. */
static void admin_upgrade(struct sup *s, int idx)
{
        char msg[512], why[256];
        int r;

        if (!s->checkpoints || s->stopping || s->restoring || access(s->cfg->self_exe, X_OK) < 0) {
                r = sup_upgrade_begin(s, "ADMIN UPGRADE", msg, sizeof(msg)); /* fails: says why */
                sup_conn_close(s, idx, (uint32_t)(r < 0 ? -r : EINVAL), "%s", msg);
                return;
        }
        snprintf(msg, sizeof(msg),
                 "upgrading: draining every session (connections and device memory kept), then re-executing %.300s",
                 s->cfg->self_exe);
        snprintf(why, sizeof(why), "ADMIN UPGRADE from %s", s->conns[idx].peer);
        r = sup_admin_reply(&s->conns[idx], msg, strlen(msg));
        if (r < 0) {
                sup_conn_close(s, idx, 0, "ADMIN UPGRADE: cannot send the reply: %s; not upgrading", strerror(-r));
                return;
        }
        sup_conn_close(s, idx, 0, "ADMIN UPGRADE accepted");
        r = sup_upgrade_begin(s, why, msg, sizeof(msg));
        if (r < 0)
                lup_err("%s", msg);
}

void sup_admin_run(struct sup *s, int idx)
{
        struct conn *c = &s->conns[idx];
        uint16_t cmd;
        char arg[LUP_ADMIN_MAX_ARG + 1];

        if (lup_admin_request_decode_arg(c->payload, c->hdr.len, &cmd, arg, sizeof(arg)) < 0) {
                sup_conn_close(s, idx, EINVAL, "malformed ADMIN request");
                return;
        }
        switch (cmd) {
        case LUP_ADMIN_STATUS:
                admin_status(s, idx);
                return;
        case LUP_ADMIN_DRAIN:
                admin_drain(s, idx);
                return;
        case LUP_ADMIN_UPGRADE:
                admin_upgrade(s, idx);
                return;
        default:
                if (!sup_admin_ops_run(s, idx, cmd, arg))
                        sup_conn_close(s, idx, EINVAL, "unknown ADMIN command %u", (unsigned)cmd);
                return;
        }
}
