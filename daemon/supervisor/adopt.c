/* SPDX-License-Identifier: MIT */
/*
 * Adoption on demand (issue 17, docs/fleet.md): a client resumes (its HELLO
 * carries a session token) on a host that does not run its session. With
 * a checkpoint store shared by several hosts, the session may be there:
 * drained for good by another host, or left by one that died. This host
 * then starts a --restore worker for it, as at start, and parks the HELLO
 * until the worker reports:
 *
 *   READY 0        the HELLO is judged again and attaches to the restored
 *                  session (the worker checks the token);
 *   READY -EBUSY   another host holds the session's lease: it runs there
 *                  (the client goes on to its other servers);
 *   READY -ENOENT  no committed checkpoint: "session NAME no longer
 *                  exists", so the client stops trying;
 *   anything else  not restored here (slot taken, damaged checkpoint...).
 *
 * The worker, not the supervisor, reads the store: the supervisor keeps
 * provider code out of its process except for the listing at start.
 * A verdict is remembered for SUP_ADOPT_REMEMBER_MS, so a client that
 * keeps trying does not start a worker per try, and at most
 * SUP_ADOPT_MAX adoptions run at once (a flood of made-up tokens costs
 * one worker start each, within the connection limits of
 * docs/security.md).
 */
#define LUP_LOG_CAT LUP_LOGC_SESSION
#include <cuda.h> /* CUresult values for refusals only */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "frame.h"
#include "log.h"
#include "supervisor/internal.h"

static struct sup_adopt_verdict *verdict_find(struct sup *s, const char *key)
{
        uint64_t now = sup_now_ms();
        for (unsigned i = 0; i < SUP_ADOPT_VERDICTS; i++) {
                struct sup_adopt_verdict *v = &s->adopt.verdict[i];
                if (v->key[0] && now < v->until_ms && strcmp(v->key, key) == 0)
                        return v;
        }
        return NULL;
}

static void verdict_keep(struct sup *s, const char *key, int32_t status, const char *why)
{
        struct sup_adopt_verdict *v = verdict_find(s, key);
        if (!v)
                v = &s->adopt.verdict[s->adopt.next++ % SUP_ADOPT_VERDICTS];
        snprintf(v->key, sizeof(v->key), "%s", key);
        snprintf(v->why, sizeof(v->why), "%s", why);
        v->status = status;
        v->until_ms = sup_now_ms() + (status == -ENOENT ? SUP_ADOPT_GONE_MS : SUP_ADOPT_REMEMBER_MS);
}

/* What the client hears for a verdict; the name is the client's own (no
 * tenant prefix). "no longer exists" makes it stop trying; the others
 * send it on to its other servers. */
static void verdict_text(const struct sup_adopt_verdict *v, const char *name, char *out, size_t cap)
{
        if (v->status == -ENOENT)
                snprintf(out, cap, "session %s no longer exists (no checkpoint of it in the store either)", name);
        else if (v->status == -EBUSY)
                snprintf(out, cap,
                         "session %s runs on another host sharing the checkpoint store (it holds the session's "
                         "lease)",
                         name);
        else
                snprintf(out, cap, "session %s could not be restored on this host: %s", name, v->why);
}

void sup_adopt_forget(struct sup *s, const char *key)
{
        for (unsigned i = 0; i < SUP_ADOPT_VERDICTS; i++)
                if (strcmp(s->adopt.verdict[i].key, key) == 0)
                        s->adopt.verdict[i].key[0] = 0;
}

bool sup_adopt_begin(struct sup *s, int idx, const char *key, const char *name)
{
        struct conn *c = &s->conns[idx];
        const struct sup_adopt_verdict *v = verdict_find(s, key);
        char msg[400];

        if (v) {
                verdict_text(v, name, msg, sizeof(msg));
                sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE, "%s", msg);
                return true;
        }
        if (s->adopt.in_flight >= SUP_ADOPT_MAX) {
                sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE,
                               "session %s is not on this host, and %d restores from the store are under way; try "
                               "again",
                               name, SUP_ADOPT_MAX);
                return true;
        }
        int entry = lupd_registry_claim_restore(&s->reg, key);
        if (entry < 0) {
                sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE, "%s",
                               entry == -ENOSPC ? "server full" : "session is busy");
                return true;
        }
        struct lupd_session *se = &s->reg.s[entry];
        se->adopt = true;
        se->restore_epoch = 0;
        int r = sup_session_restore(s, entry);
        if (r < 0) {
                sup_conn_close(s, idx, CUDA_ERROR_OPERATING_SYSTEM, "cannot start a worker to restore session %s: %s",
                               name, sup_errno_text(r));
                return true;
        }
        s->adopt.in_flight++;
        s->adopt.started++;
        c->parked = true;
        c->adopt_entry = entry;
        lup_info("session %s: not running here; its client %s resumes, so worker %d looks for it in the checkpoint "
                 "store",
                 key, c->peer, (int)se->pid);
        sup_status_update(s);
        return true;
}

/* The parked HELLOs of adoption `entry`: judged again (ok), or refused. */
static void settle(struct sup *s, int entry, bool ok, const struct sup_adopt_verdict *v)
{
        char msg[400];

        for (int i = 0; i < LUPD_MAX_PENDING; i++) {
                struct conn *c = &s->conns[i];
                if (c->fd < 0 || c->closing || c->adopt_entry != entry)
                        continue;
                c->adopt_entry = -1;
                if (ok) {
                        c->rejudge = true; /* sup_conn_rejudge, from the caller */
                } else {
                        c->parked = false;
                        struct lup_hello hello;
                        const char *why;
                        /* the client's own name for the message */
                        if (lup_hello_decode(c->payload, c->hdr.len, &hello, &why) < 0)
                                snprintf(hello.name, sizeof(hello.name), "?");
                        verdict_text(v, hello.name, msg, sizeof(msg));
                        sup_conn_close(s, i, CUDA_ERROR_DEVICE_UNAVAILABLE, "%s", msg);
                }
        }
}

void sup_adopt_done(struct sup *s, int idx, int32_t status, const char *why)
{
        struct lupd_session *se = &s->reg.s[idx];

        if (!se->adopt)
                return;
        se->adopt = false;
        if (s->adopt.in_flight > 0)
                s->adopt.in_flight--;
        if (status == 0) {
                s->adopt.adopted++;
                lup_info("session %s: adopted from the checkpoint store", se->name);
                sup_adopt_forget(s, se->name);
                settle(s, idx, true, NULL);
                return;
        }
        if (status == -EBUSY)
                lup_info("session %s: another host holds its lease; not adopted here", se->name);
        else if (status == -ENOENT)
                lup_info("session %s: no checkpoint of it in the store; its client hears it no longer exists",
                         se->name);
        else
                lup_warn("session %s: could not be adopted from the checkpoint store: %s", se->name, why);
        verdict_keep(s, se->name, status, why);
        struct sup_adopt_verdict v = { .status = status };
        snprintf(v.why, sizeof(v.why), "%s", why);
        settle(s, idx, false, &v);
}

void sup_adopt_tick(struct sup *s, uint64_t now)
{
        if (s->adopt.in_flight == 0)
                return;
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++) {
                struct lupd_session *se = &s->reg.s[i];
                if (se->state != LUPD_SESSION_LIVE || !se->adopt || se->ready || se->ctl_eof ||
                    now < se->work_started_ms + (uint64_t)s->cfg->drain_timeout_s * 1000u)
                        continue;
                lup_err("session %s: its adoption worker %d did not report within %d s (--drain-timeout); killing it",
                        se->name, (int)se->pid, s->cfg->drain_timeout_s);
                se->ctl_eof = true;
                sup_worker_kill(s, i);
        }
}
