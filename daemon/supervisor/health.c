/* SPDX-License-Identifier: MIT */
/*
 * The GPU health watch (issue 18, docs/health.md).
 *
 * Every --health-interval the supervisor looks at each GPU through the
 * NVML snapshot it serves clients anyway (supervisor/nvml.c: the host's
 * NVML, or the simulator's values and LUPINE_SIM_FAULTS), at the Xid
 * events since the last look, and at every worker's heartbeat
 * (worker/sup_beat.c). A GPU fails a check when
 *   - its temperature is at --thermal-limit or above;
 *   - it has uncorrectable ECC errors it did not have when first seen;
 *   - pages wait for retirement or rows for a remap, or a remap failed
 *     (each needs a GPU reset);
 *   - NVML says it is lost, or it is gone from NVML's list;
 *   - an Xid of --health-xids came within --health-xid-hold;
 *   - a worker using it has not beaten for --health-timeout, at
 *     --health-retries checks in a row.
 * --health-retries failed checks in a row raise an alarm; as many passed
 * ones in a row clear it. Single readings do not move anything: a
 * temperature that touches the limit once is not a drain.
 *
 * With --health-policy drain (the default), while any GPU is in alarm:
 *   - no new session is admitted (a session's GPUs are the program's
 *     choice after admission, so admission cannot be per GPU: a new
 *     session could go to the failing GPU); resumes of running sessions
 *     still are;
 *   - every session using the GPU (or none yet: it may go anywhere) is
 *     drained to a durable checkpoint, as at SIGTERM, while the daemon goes
 *     on. Its client is told to reconnect; here it hears that the session
 *     was moved, not that it is gone, so it tries its other servers, and a
 *     lupined that shares the checkpoint store and starts can restore it.
 * When every GPU passes again, sessions are admitted again.
 */
#define LUP_LOG_CAT LUP_LOGC_GPU
#include <stdio.h>
#include <string.h>

#include "admin.h"
#include "log.h"
#include "supervisor/internal.h"
#include "supervisor/nvml_values.h"

#define NVML_GPU_IS_LOST 15u

bool sup_health_enabled(const struct sup *s)
{
        return s->cfg->health.policy != LUPD_HEALTH_OFF;
}

void sup_health_on_beat(struct sup *s, int idx, uint32_t devices)
{
        struct lupd_session *se = &s->reg.s[idx];

        se->beat_ms = sup_now_ms();
        se->devices = devices & ((1u << LUP_MAX_DEVICES) - 1u);
        if (se->unresponsive) {
                lup_info("worker %d (session %s) sends its heartbeat again", (int)se->pid, se->name);
                se->unresponsive = false;
        }
        se->beats_missed = 0;
}

/* Whether the watch expects heartbeats from entry se now. */
static bool beats_expected(const struct lupd_session *se)
{
        return se->state == LUPD_SESSION_LIVE && se->pid > 0 && !se->reaped && !se->shutdown_sent && !se->drain_done &&
               se->phase != LUPD_PHASE_FAILED;
}

static void check_heartbeats(struct sup *s, uint64_t now)
{
        const struct lupd_health_cfg *h = &s->cfg->health;

        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++) {
                struct lupd_session *se = &s->reg.s[i];
                if (!beats_expected(se)) {
                        se->watched_ms = 0;
                        continue;
                }
                if (!se->watched_ms)
                        se->watched_ms = now;
                uint64_t last = se->beat_ms > se->watched_ms ? se->beat_ms : se->watched_ms;
                if (now - last <= (uint64_t)h->timeout_ms) {
                        se->beats_missed = 0;
                        continue;
                }
                if (++se->beats_missed < h->retries || se->unresponsive)
                        continue;
                se->unresponsive = true;
                s->health.hung_workers++;
                lup_err("worker %d (session %s) has sent no heartbeat for %.1f s (--health-timeout %d ms, %d "
                        "checks): it is stopped or hung",
                        (int)se->pid, se->name, (double)(now - last) / 1000.0, h->timeout_ms, h->retries);
        }
}

static const struct lup_nvml_val *value(const struct lup_nvml_snapshot *snap, unsigned d, unsigned k)
{
        const struct lup_nvml_val *v = lup_nvml_devval((struct lup_nvml_dev *)&snap->dev[d], k);
        return v && v->present ? v : NULL;
}

static bool number(const struct lup_nvml_snapshot *snap, unsigned d, unsigned k, uint64_t *ret)
{
        const struct lup_nvml_val *v = value(snap, d, k);
        if (!v || v->ret != 0)
                return false;
        *ret = v->num;
        return true;
}

/* The first failing check of GPU d into why (empty when it passes). */
static void check_gpu(struct sup *s, const struct lup_nvml_snapshot *snap, unsigned d, uint64_t now, char *why,
                      size_t cap)
{
        const struct lupd_health_cfg *h = &s->cfg->health;
        struct sup_gpu_health *g = &s->health.gpu[d];
        const struct lup_nvml_val *name = snap && d < snap->n_devices ? value(snap, d, LUP_NVML_K_NAME) : NULL;
        uint64_t v;

        why[0] = 0;
        if (!snap || d >= snap->n_devices) {
                snprintf(why, cap, "GPU %u is gone from NVML's list of the host's GPUs", d);
                return;
        }
        if (name && name->ret == NVML_GPU_IS_LOST) {
                snprintf(why, cap, "NVML says GPU %u is lost (it fell off the bus or stopped answering)", d);
                return;
        }
        if (h->thermal_limit_c > 0 && number(snap, d, LUP_NVML_K_TEMP_GPU, &v) && v >= (uint64_t)h->thermal_limit_c) {
                snprintf(why, cap, "temperature %llu C reached --thermal-limit %d C", (unsigned long long)v,
                         h->thermal_limit_c);
                return;
        }
        if (number(snap, d, LUP_NVML_K_ECC_UNCORR_VOLATILE, &v)) {
                if (!g->ecc_seen || v < g->ecc_base) { /* first look, or counters reset with the GPU */
                        g->ecc_seen = true;
                        g->ecc_base = v;
                        lup_debug("GPU %u: %llu uncorrectable ECC error(s) when first seen", d, (unsigned long long)v);
                }
                if (v > g->ecc_base) {
                        snprintf(why, cap, "%llu new uncorrectable ECC error(s)",
                                 (unsigned long long)(v - g->ecc_base));
                        return;
                }
        }
        if (number(snap, d, LUP_NVML_K_RETIRED_PENDING, &v) && v) {
                snprintf(why, cap, "retired pages are pending (a GPU reset is needed)");
                return;
        }
        if (number(snap, d, LUP_NVML_K_REMAP_PENDING, &v) && v) {
                snprintf(why, cap, "row remapping is pending (a GPU reset is needed)");
                return;
        }
        if (number(snap, d, LUP_NVML_K_REMAP_FAILURE, &v) && v) {
                snprintf(why, cap, "a row remapping failed");
                return;
        }
        if (g->xid && now < g->xid_until_ms) {
                snprintf(why, cap, "Xid %u (held %d s after the last one)", (unsigned)g->xid, h->xid_hold_s);
                return;
        }
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++) {
                const struct lupd_session *se = &s->reg.s[i];
                if (se->state == LUPD_SESSION_LIVE && se->unresponsive && (se->devices & (1u << d))) {
                        snprintf(why, cap, "worker %d (session %s) on it does not answer its heartbeat", (int)se->pid,
                                 se->name);
                        return;
                }
        }
}

static void take_xids(struct sup *s, const struct lup_nvml_snapshot *snap, uint64_t now)
{
        const struct lupd_health_cfg *h = &s->cfg->health;
        struct lupd_xid x[16];
        int n = snap->backend == LUP_BACKEND_SIM ? lupd_nvml_sim_xids(x, 16) : lupd_nvml_host_xids(x, 16);

        for (int i = 0; i < n; i++) {
                bool listed = false;
                for (int j = 0; j < h->n_xids; j++)
                        listed |= h->xids[j] == x[i].xid;
                if (!listed) {
                        lup_info("GPU %d: Xid %u (not in --health-xids: no alarm)", x[i].device, (unsigned)x[i].xid);
                        continue;
                }
                lup_warn("GPU %d: Xid %u", x[i].device, (unsigned)x[i].xid);
                for (unsigned d = 0; d < LUP_MAX_DEVICES; d++) {
                        if (x[i].device >= 0 && (unsigned)x[i].device != d)
                                continue; /* a GPU NVML could not name: every GPU */
                        s->health.gpu[d].xid = x[i].xid;
                        s->health.gpu[d].xid_until_ms = now + (uint64_t)h->xid_hold_s * 1000u;
                }
        }
}

static void remember_moved(struct sup *s, const char *name)
{
        struct sup_health *hs = &s->health;

        for (unsigned i = 0; i < hs->n_moved; i++)
                if (strcmp(hs->moved[i], name) == 0)
                        return;
        unsigned at = hs->n_moved < SUP_HEALTH_MOVED_MAX ? hs->n_moved++ : hs->moved_next++ % SUP_HEALTH_MOVED_MAX;
        snprintf(hs->moved[at], sizeof(hs->moved[at]), "%s", name);
}

/* Drains the sessions that use GPU d (or no GPU yet). */
static void drain_gpu(struct sup *s, unsigned d)
{
        struct sup_gpu_health *g = &s->health.gpu[d];

        if (!s->checkpoints) {
                if (!g->said_no_store)
                        lup_warn("GPU %u: no checkpoint provider: its sessions keep running (there is nowhere to "
                                 "drain them to)",
                                 d);
                g->said_no_store = true;
                return;
        }
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++) {
                struct lupd_session *se = &s->reg.s[i];
                if (se->state != LUPD_SESSION_LIVE || se->phase == LUPD_PHASE_FAILED || !se->ready || se->drain_sent ||
                    se->shutdown_sent)
                        continue;
                if (se->devices && !(se->devices & (1u << d)))
                        continue;
                char why[200];
                snprintf(why, sizeof(why), "GPU %u: %s", d, g->why);
                if (sup_drain_session(s, i, why) == 0) {
                        s->health.drained++;
                        remember_moved(s, se->name);
                }
        }
}

static void raise_alarm(struct sup *s, unsigned d, uint64_t now)
{
        struct sup_gpu_health *g = &s->health.gpu[d];
        bool drain = s->cfg->health.policy == LUPD_HEALTH_DRAIN;

        g->alarm = true;
        g->since_ms = now;
        g->alarms++;
        lup_err("GPU %u: health alarm: %s; %s", d, g->why,
                drain ? "not admitting new sessions, draining its sessions to durable checkpoints"
                      : "--health-policy report: nothing else is done");
}

static void clear_alarm(struct sup *s, unsigned d, uint64_t now)
{
        struct sup_gpu_health *g = &s->health.gpu[d];

        g->alarm = false;
        g->said_no_store = false;
        lup_info("GPU %u passes its health checks again after %.0f s (the alarm was: %s)%s", d,
                 (double)(now - g->since_ms) / 1000.0, g->why,
                 sup_health_admitting(s, NULL, 0) ? "; admitting sessions again" : "");
}

void sup_health_tick(struct sup *s, uint64_t now)
{
        const struct lupd_health_cfg *h = &s->cfg->health;
        struct sup_health *hs = &s->health;
        bool changed = false;

        if (!sup_health_enabled(s) || now < hs->next_check_ms || s->stopping)
                return;
        hs->next_check_ms = now + (uint64_t)h->interval_ms;
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++) {
                struct lupd_session *se = &s->reg.s[i];
                if (se->state == LUPD_SESSION_LIVE && se->health_drain && se->drain_sent && !se->drain_done &&
                    now >= se->drain_deadline)
                        sup_drain_session_expire(s, i);
        }
        check_heartbeats(s, now);
        struct lup_nvml_snapshot *snap = sup_nvml_view(s);
        if (snap) {
                take_xids(s, snap, now);
                if (snap->n_devices > hs->n_gpus)
                        hs->n_gpus = snap->n_devices < LUP_MAX_DEVICES ? snap->n_devices : LUP_MAX_DEVICES;
        }
        for (unsigned d = 0; d < hs->n_gpus; d++) {
                struct sup_gpu_health *g = &hs->gpu[d];
                char why[sizeof(g->why)];
                check_gpu(s, snap, d, now, why, sizeof(why));
                if (why[0]) {
                        if (!g->bad)
                                lup_debug("GPU %u fails a check: %s", d, why);
                        g->good = 0;
                        g->bad++;
                        if (!g->alarm)
                                snprintf(g->why, sizeof(g->why), "%s", why);
                        if (!g->alarm && g->bad >= h->retries) {
                                raise_alarm(s, d, now);
                                changed = true;
                        }
                } else {
                        g->bad = 0;
                        g->good++;
                        if (g->alarm && g->good >= h->retries) {
                                clear_alarm(s, d, now);
                                changed = true;
                        }
                }
                if (g->alarm && h->policy == LUPD_HEALTH_DRAIN)
                        drain_gpu(s, d);
        }
        if (changed)
                sup_status_update(s);
}

bool sup_health_moved(const struct sup *s, const char *name)
{
        for (unsigned i = 0; i < s->health.n_moved; i++)
                if (strcmp(s->health.moved[i], name) == 0)
                        return true;
        return false;
}

void sup_health_forget(struct sup *s, const char *name)
{
        struct sup_health *hs = &s->health;

        for (unsigned i = 0; i < hs->n_moved; i++)
                if (strcmp(hs->moved[i], name) == 0)
                        hs->moved[i][0] = 0; /* the slot stays; an empty name matches no session */
}

void sup_health_report(const struct sup *s, struct lup_admin_health *out)
{
        const struct sup_health *hs = &s->health;

        memset(out, 0, sizeof(*out));
        out->present = true;
        snprintf(out->policy, sizeof(out->policy), "%s", lupd_health_policy_name(s->cfg->health.policy));
        out->admitting = !s->stopping && sup_health_admitting(s, NULL, 0);
        out->drained = (int64_t)hs->drained;
        out->n_gpus = (int)hs->n_gpus;
        for (unsigned d = 0; d < hs->n_gpus; d++) {
                const struct sup_gpu_health *g = &hs->gpu[d];
                struct lup_admin_gpu_health *o = &out->gpu[d];
                o->index = (int)d;
                snprintf(o->state, sizeof(o->state), "%s",
                         !sup_health_enabled(s) ? "unwatched"
                         : g->alarm             ? "alarm"
                         : g->bad               ? "failing"
                                                : "ok");
                snprintf(o->why, sizeof(o->why), "%s", g->alarm || g->bad ? g->why : "");
                o->alarms = (int64_t)g->alarms;
        }
}
