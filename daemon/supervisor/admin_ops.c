/* SPDX-License-Identifier: MIT */
/*
 * The ADMIN commands beyond status, drain and upgrade (issue 18): INFO (the
 * host's GPUs from the NVML snapshot, as JSON), KILL (end one session,
 * keeping or deleting its checkpoint), CHECKPOINT (a durable checkpoint of
 * one session while it goes on), CONFIG_SHOW and CONFIG_SET (what can
 * change while lupined runs). docs/protocol.md, "ADMIN".
 */
#define LUP_LOG_CAT LUP_LOGC_ADMIN
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <json-c/json.h>

#include "admin.h"
#include "ctl.h"
#include "journal.h"
#include "log.h"
#include "nvml_codec.h"
#include "supervisor/internal.h"
#include "supervisor/supervisor.h"

/* The JSON text of obj as the reply, then obj is released. */
static void reply_json(struct sup *s, int idx, struct json_object *obj, const char *what)
{
        size_t len = 0;
        const char *t = obj ? json_object_to_json_string_length(
                                      obj, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len)
                            : NULL;
        int r = t ? sup_admin_reply(&s->conns[idx], t, len) : -ENOMEM;

        if (r < 0)
                sup_conn_close(s, idx, 0, "ADMIN %s: cannot send the reply: %s", what, strerror(-r));
        else
                sup_conn_done(s, idx, "ADMIN %s answered", what);
        json_object_put(obj);
}

static void admin_info(struct sup *s, int idx)
{
        struct lup_nvml_snapshot *snap = sup_nvml_view(s);
        struct json_object *top;

        if (!snap) {
                sup_conn_close(s, idx, EIO, "NVML on this host cannot list its GPUs");
                return;
        }
        top = lup_admin_info_json(snap, LUPINE_VERSION);
        reply_json(s, idx, top, "INFO");
}

/* "keep:NAME" or "delete:NAME": SHUTDOWN to its worker, which deletes
 * the checkpoint first when told (LUPD_SHUTDOWN_FORGET). */
static void admin_kill(struct sup *s, int idx, const char *arg)
{
        bool forget = strncmp(arg, "delete:", 7) == 0;
        const char *name = forget ? arg + 7 : strncmp(arg, "keep:", 5) == 0 ? arg + 5 : NULL;
        char msg[300];
        int e;

        if (!name || !*name) {
                sup_conn_close(s, idx, EINVAL, "ADMIN KILL: expected keep:NAME or delete:NAME");
                return;
        }
        e = lupd_registry_find_name(&s->reg, name);
        if (e < 0 || s->reg.s[e].state != LUPD_SESSION_LIVE) {
                sup_conn_close(s, idx, ENOENT, "ADMIN KILL: no session %.200s", name);
                return;
        }
        int r = sup_worker_send_arg(s, e, LUPD_CTL_SHUTDOWN, forget ? LUPD_SHUTDOWN_FORGET : 0);
        if (r < 0) {
                sup_conn_close(s, idx, (uint32_t)-r, "ADMIN KILL: cannot tell its worker: %s", strerror(-r));
                return;
        }
        s->reg.s[e].shutdown_sent = true;
        lup_warn("session %s: ended by the operator (%s), checkpoint %s", name, s->conns[idx].peer,
                 forget ? "deleted" : "kept");
        snprintf(msg, sizeof(msg), "session %.200s: ending; its checkpoint is %s", name, forget ? "deleted" : "kept");
        if (sup_admin_reply(&s->conns[idx], msg, strlen(msg)) < 0)
                sup_conn_close(s, idx, 0, "ADMIN KILL: cannot send the reply");
        else
                sup_conn_done(s, idx, "ADMIN KILL %s", name);
}

/* NAME: a durable checkpoint of that session now, while it goes on
 * (LUPD_CTL_CHECKPOINT; worker/ckpt_now.c). The answer goes at once; the
 * verdict comes with LUPD_CTL_CHECKPOINTED (supervisor/ctl.c), and STATUS
 * shows it: the session's checkpoint_epoch advances, or its
 * last_checkpoint_error says why not. */
static void admin_checkpoint(struct sup *s, int idx, const char *name)
{
        struct lupd_session *se;
        char msg[300];
        int e, r;

        if (!*name) {
                sup_conn_close(s, idx, EINVAL, "ADMIN CHECKPOINT: expected a session name");
                return;
        }
        if (!s->checkpoints) {
                sup_conn_close(s, idx, EOPNOTSUPP,
                               "cannot checkpoint: no checkpoint provider is configured (--checkpoint-dir or "
                               "--checkpoint-provider); nothing was done");
                return;
        }
        e = lupd_registry_find_name(&s->reg, name);
        if (e < 0 || s->reg.s[e].state != LUPD_SESSION_LIVE) {
                sup_conn_close(s, idx, ENOENT, "cannot checkpoint: no session %.200s", name);
                return;
        }
        se = &s->reg.s[e];
        if (s->stopping || se->drain_sent) {
                sup_conn_close(s, idx, EALREADY,
                               "cannot checkpoint session %.200s: the daemon is %s, which "
                               "checkpoints it anyway",
                               name, s->upgrade ? "upgrading" : "draining");
                return;
        }
        if (se->shutdown_sent) {
                sup_conn_close(s, idx, ESHUTDOWN, "cannot checkpoint session %.200s: it is ending", name);
                return;
        }
        if (se->phase == LUPD_PHASE_STARTING || se->phase == LUPD_PHASE_RESTORING) {
                sup_conn_close(s, idx, EAGAIN, "cannot checkpoint session %.200s yet: it is still %s; try again", name,
                               se->phase == LUPD_PHASE_RESTORING ? "being restored" : "starting");
                return;
        }
        if (se->ckpt_running) {
                sup_conn_close(s, idx, EALREADY,
                               "cannot checkpoint session %.200s: a checkpoint of it is already running (asked "
                               "for %llu s ago)",
                               name, (unsigned long long)((sup_now_ms() - se->ckpt_started_ms) / 1000u));
                return;
        }
        r = sup_worker_send(s, e, LUPD_CTL_CHECKPOINT);
        if (r < 0) {
                sup_conn_close(s, idx, (uint32_t)-r, "ADMIN CHECKPOINT: cannot tell its worker: %s", strerror(-r));
                return;
        }
        se->ckpt_asked = true;
        se->ckpt_running = true;
        se->ckpt_periodic = false;
        se->ckpt_started_ms = sup_now_ms();
        se->ckpt_error[0] = 0;
        lup_info("session %s: checkpoint asked for by %s (last epoch %llu); the session goes on", name,
                 s->conns[idx].peer, (unsigned long long)se->stats.epoch);
        snprintf(msg, sizeof(msg), "checkpoint of %.200s started, last epoch %llu", name,
                 (unsigned long long)se->stats.epoch);
        if (sup_admin_reply(&s->conns[idx], msg, strlen(msg)) < 0)
                sup_conn_close(s, idx, 0, "ADMIN CHECKPOINT: cannot send the reply");
        else
                sup_conn_done(s, idx, "ADMIN CHECKPOINT %s", name);
}

/* The settings CONFIG_SET may change; "new" ones apply to sessions that
 * start afterwards (their workers read them at start). */
struct setting {
        const char *key;
        int *field;
        int min, max;
        const char *applies;
};

#define SETTINGS_MAX 16

static int settings(struct sup *s, struct setting *out)
{
        struct lupd_config *c = s->cfg;
        int n = 0;

        out[n++] = (struct setting){ "drain_timeout_s", &c->drain_timeout_s, 1, LUPD_DRAIN_TIMEOUT_MAX_S, "at once" };
        out[n++] = (struct setting){ "session_ttl_s", &c->session_ttl_s, 1, LUPD_SESSION_TTL_MAX_S,
                                     "sessions started from now on" };
        out[n++] = (struct setting){ "detach_grace_s", &c->detach_grace_s, 0, LUPD_SESSION_TTL_MAX_S,
                                     "sessions started from now on" };
        out[n++] = (struct setting){ "max_pending", &c->max_pending, 1, LUPD_PENDING_LIMIT_MAX, "at once" };
        out[n++] = (struct setting){ "max_pending_per_peer", &c->max_pending_per_peer, 0, LUPD_PENDING_LIMIT_MAX,
                                     "at once" };
        out[n++] = (struct setting){ "max_sessions_per_tenant", &c->max_sessions_per_tenant, 0, LUPD_MAX_SESSIONS,
                                     "at once" };
        out[n++] = (struct setting){ "max_detached_per_tenant", &c->max_detached_per_tenant, 0, LUPD_MAX_SESSIONS,
                                     "at once" };
        out[n++] = (struct setting){ "thermal_limit_c", &c->health.thermal_limit_c, 0, 200, "at once" };
        out[n++] = (struct setting){ "health_retries", &c->health.retries, 1, 100, "at once" };
        out[n++] = (struct setting){ "checkpoint_interval_s", &c->fleet.checkpoint_interval_s, 0,
                                     LUPD_CKPT_INTERVAL_MAX_S, "at once" };
        return n;
}

static void admin_config_show(struct sup *s, int idx)
{
        struct setting set[SETTINGS_MAX];
        int n = settings(s, set);
        struct json_object *top = json_object_new_object();

        json_object_object_add(top, "log_level", json_object_new_string(s->cfg->log_levels));
        for (int i = 0; i < n; i++)
                json_object_object_add(top, set[i].key, json_object_new_int(*set[i].field));
        /* read-only: the fleet's names (docs/fleet.md) */
        json_object_object_add(top, "host_id", json_object_new_string(s->cfg->fleet.host_id));
        json_object_object_add(top, "lease_ttl_s", json_object_new_int(s->cfg->fleet.lease_ttl_s));
        /* read-only: where the log goes, for `lupinectl log` */
        json_object_object_add(top, "log_target", json_object_new_string(lupd_journal_active() ? "journal" : "stderr"));
        json_object_object_add(top, "log_file", s->cfg->log_file[0] ? json_object_new_string(s->cfg->log_file) : NULL);
        reply_json(s, idx, top, "CONFIG_SHOW");
}

static void admin_config_set(struct sup *s, int idx, const char *arg)
{
        struct setting set[SETTINGS_MAX];
        int n = settings(s, set);
        const char *eq = strchr(arg, '=');
        char key[64], why[200], msg[400];

        if (!eq || eq == arg || (size_t)(eq - arg) >= sizeof(key)) {
                sup_conn_close(s, idx, EINVAL, "ADMIN CONFIG_SET: expected KEY=VALUE");
                return;
        }
        snprintf(key, sizeof(key), "%.*s", (int)(eq - arg), arg);
        const char *v = eq + 1;
        if (strcmp(key, "log_level") == 0) {
                if (strlen(v) >= sizeof(s->cfg->log_levels) || lup_log_set_levels(v, why, sizeof(why)) < 0) {
                        sup_conn_close(s, idx, EINVAL, "ADMIN CONFIG_SET: log_level %.100s: %s", v,
                                       strlen(v) >= sizeof(s->cfg->log_levels) ? "too long" : why);
                        return;
                }
                snprintf(s->cfg->log_levels, sizeof(s->cfg->log_levels), "%s", v);
                int told = sup_workers_log_levels(s);
                snprintf(msg, sizeof(msg), "log_level is %s (the supervisor and %d worker(s))", v, told);
        } else {
                int i = 0;
                while (i < n && strcmp(set[i].key, key) != 0)
                        i++;
                char *end;
                long x = i < n ? strtol(v, &end, 10) : 0;
                if (i == n) {
                        sup_conn_close(s, idx, ENOENT,
                                       "ADMIN CONFIG_SET: %s cannot be set (lupinectl config show "
                                       "lists what can)",
                                       key);
                        return;
                }
                if (!*v || *end || x < set[i].min || x > set[i].max) {
                        sup_conn_close(s, idx, EINVAL, "ADMIN CONFIG_SET: %s: expected a number from %d to %d", key,
                                       set[i].min, set[i].max);
                        return;
                }
                *set[i].field = (int)x;
                snprintf(msg, sizeof(msg), "%s is %ld (%s%s)", key, x, strcmp(set[i].applies, "at once") ? "for " : "",
                         set[i].applies);
        }
        lup_info("config: %s, set by %s", msg, s->conns[idx].peer);
        if (sup_admin_reply(&s->conns[idx], msg, strlen(msg)) < 0)
                sup_conn_close(s, idx, 0, "ADMIN CONFIG_SET: cannot send the reply");
        else
                sup_conn_done(s, idx, "ADMIN CONFIG_SET %s", key);
}

bool sup_admin_ops_run(struct sup *s, int idx, uint16_t cmd, const char *arg)
{
        switch (cmd) {
        case LUP_ADMIN_INFO:
                admin_info(s, idx);
                return true;
        case LUP_ADMIN_KILL:
                admin_kill(s, idx, arg);
                return true;
        case LUP_ADMIN_CONFIG_SHOW:
                admin_config_show(s, idx);
                return true;
        case LUP_ADMIN_CONFIG_SET:
                admin_config_set(s, idx, arg);
                return true;
        case LUP_ADMIN_DIAG:
                sup_admin_diag(s, idx);
                return true;
        case LUP_ADMIN_CHECKPOINT:
                admin_checkpoint(s, idx, arg);
                return true;
        case LUP_ADMIN_MIGRATE:
                sup_admin_migrate(s, idx, arg);
                return true;
        case LUP_ADMIN_MIGRATION:
                sup_admin_migration(s, idx, arg);
                return true;
        default:
                return false;
        }
}
