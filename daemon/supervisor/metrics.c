/* SPDX-License-Identifier: MIT */
/*
 * --metrics HOST:PORT: the Prometheus text format (version 0.0.4) at
 * /metrics, served by libmicrohttpd (issue 18).
 *
 * libmicrohttpd is loaded with dlopen when --metrics is given, so lupined
 * still runs on a GPU host that does not have it (the error then says what
 * to install). Its own thread answers the scrapes; it never touches the
 * supervisor's state. The supervisor's loop writes the whole text on its
 * tick, at most once a second, and the thread hands out a copy of the
 * latest under a mutex: a scrape costs the loop nothing, and what it sees
 * is at most a second old (GPU values come from the NVML snapshot, which
 * is cached for a second anyway).
 *
 * The endpoint has no authentication, as is usual for Prometheus targets:
 * it shows session names and tenants' ids, so bind it to loopback or a
 * management network (docs/operations.md, "Metrics").
 */
#define LUP_LOG_CAT LUP_LOGC_ADMIN
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "auth_tokens.h"
#include "ctl.h"
#include "log.h"
#include "net.h"
#include "nvml_codec.h"
#include "ops.h"
#include "op_stats.h"
#include "supervisor/internal.h"

#define METRICS_MAX (1u << 20)

struct mhd_api {
        void *dl;
        struct MHD_Daemon *(*start)(unsigned int flags, unsigned short port, MHD_AcceptPolicyCallback apc,
                                    void *apc_cls, MHD_AccessHandlerCallback dh, void *dh_cls, ...);
        void (*stop)(struct MHD_Daemon *d);
        struct MHD_Response *(*from_buffer)(size_t size, void *buffer, enum MHD_ResponseMemoryMode mode);
        enum MHD_Result (*queue)(struct MHD_Connection *c, unsigned int status, struct MHD_Response *r);
        void (*destroy)(struct MHD_Response *r);
        enum MHD_Result (*header)(struct MHD_Response *r, const char *name, const char *value);
};

static struct mhd_api mhd;
static struct MHD_Daemon *daemon_h;
static pthread_mutex_t text_lock = PTHREAD_MUTEX_INITIALIZER;
static char *text; /* the latest exposition, under text_lock */
static size_t text_len;
static uint64_t built_ms;
static uint64_t scrapes; /* under text_lock */

static int load_mhd(char *why, size_t cap)
{
        static const char *const names[] = { "libmicrohttpd.so.12", "libmicrohttpd.so" };

        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !mhd.dl; i++)
                mhd.dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!mhd.dl) {
                snprintf(why, cap, "cannot load libmicrohttpd (apt-get install libmicrohttpd12): %s", dlerror());
                return -ENOENT;
        }
        *(void **)&mhd.start = dlsym(mhd.dl, "MHD_start_daemon");
        *(void **)&mhd.stop = dlsym(mhd.dl, "MHD_stop_daemon");
        *(void **)&mhd.from_buffer = dlsym(mhd.dl, "MHD_create_response_from_buffer");
        *(void **)&mhd.queue = dlsym(mhd.dl, "MHD_queue_response");
        *(void **)&mhd.destroy = dlsym(mhd.dl, "MHD_destroy_response");
        *(void **)&mhd.header = dlsym(mhd.dl, "MHD_add_response_header");
        if (!mhd.start || !mhd.stop || !mhd.from_buffer || !mhd.queue || !mhd.destroy || !mhd.header) {
                snprintf(why, cap, "libmicrohttpd lacks a function lupined needs");
                return -ENOSYS;
        }
        return 0;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_len, void **con_cls)
{
        static char not_found[] = "lupined serves only /metrics\n";
        struct MHD_Response *r;
        enum MHD_Result ret;
        unsigned code = MHD_HTTP_OK;
        char *body = NULL;
        size_t len = 0;

        (void)cls, (void)version, (void)upload, (void)upload_len, (void)con_cls;
        if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
                code = MHD_HTTP_METHOD_NOT_ALLOWED;
        } else if (strcmp(url, "/metrics") != 0) {
                code = MHD_HTTP_NOT_FOUND;
        } else {
                pthread_mutex_lock(&text_lock);
                body = text ? malloc(text_len) : NULL;
                if (body) {
                        memcpy(body, text, text_len);
                        len = text_len;
                }
                scrapes++;
                pthread_mutex_unlock(&text_lock);
        }
        if (code == MHD_HTTP_OK)
                r = mhd.from_buffer(len, body ? body : (void *)"",
                                    body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
        else
                r = mhd.from_buffer(strlen(not_found), not_found, MHD_RESPMEM_PERSISTENT);
        if (!r) {
                free(body);
                return MHD_NO;
        }
        mhd.header(r, "Content-Type", code == MHD_HTTP_OK ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain");
        ret = mhd.queue(c, code, r);
        mhd.destroy(r);
        return ret;
}

int sup_metrics_start(struct sup *s)
{
        const char *spec = s->cfg->metrics;
        struct lup_endpoint ep;
        char why[256];

        if (!spec[0])
                return 0;
        if (lup_endpoint_parse(spec, &ep) < 0 || (ep.family != AF_INET && ep.family != AF_INET6) || ep.tls) {
                lup_err("--metrics %s: expected HOST:PORT or [IPv6]:PORT", spec);
                return -EINVAL;
        }
        if (load_mhd(why, sizeof(why)) < 0) {
                lup_err("--metrics %s: %s", spec, why);
                return -ENOENT;
        }
        unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
        if (ep.family == AF_INET6)
                flags |= MHD_USE_IPv6;
        daemon_h = mhd.start(flags, 0, NULL, NULL, answer, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ep.addr,
                             MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
        if (!daemon_h) {
                lup_err("--metrics %s: cannot listen there (in use, or not an address of this host?)", spec);
                return -EADDRINUSE;
        }
        sup_metrics_update(s, sup_now_ms(), true);
        lup_info("metrics: Prometheus text format at http://%s/metrics", spec);
        return 0;
}

void sup_metrics_stop(void)
{
        if (daemon_h)
                mhd.stop(daemon_h);
        daemon_h = NULL;
        pthread_mutex_lock(&text_lock);
        free(text);
        text = NULL;
        pthread_mutex_unlock(&text_lock);
}

bool sup_metrics_enabled(void)
{
        return daemon_h != NULL;
}

/* ---- the exposition */

struct out {
        char *p;
        size_t len, cap;
        bool full;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
        va_list ap;
        int n;

        if (o->full)
                return;
        va_start(ap, fmt);
        n = vsnprintf(o->p + o->len, o->cap - o->len, fmt, ap);
        va_end(ap);
        if (n < 0 || (size_t)n >= o->cap - o->len)
                o->full = true;
        else
                o->len += (size_t)n;
}

/* A label value with \, " and newlines escaped, as the format asks. */
static const char *label(const char *v, char *buf, size_t cap)
{
        size_t j = 0;
        for (size_t i = 0; v[i] && j + 3 < cap; i++) {
                if (v[i] == '\\' || v[i] == '"' || v[i] == '\n') {
                        buf[j++] = '\\';
                        buf[j++] = v[i] == '\n' ? 'n' : v[i];
                } else {
                        buf[j++] = v[i];
                }
        }
        buf[j] = 0;
        return buf;
}

static void family(struct out *o, const char *name, const char *type, const char *help)
{
        put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void daemon_metrics(struct out *o, struct sup *s)
{
        int n[LUPD_PHASE_FAILED + 1] = { 0 };

        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++) {
                const struct lupd_session *se = &s->reg.s[i];
                if (se->state == LUPD_SESSION_LIVE && se->phase <= LUPD_PHASE_FAILED)
                        n[se->phase]++;
        }
        family(o, "lupine_up", "gauge", "1 while lupined serves");
        put(o, "lupine_up 1\n");
        family(o, "lupine_info", "gauge", "the daemon's version and backend");
        put(o, "lupine_info{version=\"%s\",backend=\"%s\"} 1\n", LUPINE_VERSION, lupd_backend_name(s->cfg->backend));
        family(o, "lupine_sessions", "gauge", "sessions by state");
        for (int p = 0; p <= LUPD_PHASE_FAILED; p++)
                put(o, "lupine_sessions{state=\"%s\"} %d\n", sup_admin_state_name((enum lupd_session_phase)p), n[p]);
        family(o, "lupine_sessions_max", "gauge", "--max-sessions");
        put(o, "lupine_sessions_max %d\n", s->reg.max_sessions);
        family(o, "lupine_draining", "gauge", "1 while the daemon drains or upgrades");
        put(o, "lupine_draining %d\n", s->stopping ? 1 : 0);
        family(o, "lupine_limit_hits_total", "counter", "times a limit of docs/security.md refused or ended something");
        put(o, "lupine_limit_hits_total{limit=\"detach_grace_s\"} %llu\n", (unsigned long long)s->hits.detach_grace);
        put(o, "lupine_limit_hits_total{limit=\"max_pending\"} %llu\n", (unsigned long long)s->hits.pending_total);
        put(o, "lupine_limit_hits_total{limit=\"max_pending_per_peer\"} %llu\n",
            (unsigned long long)s->hits.pending_peer);
        put(o, "lupine_limit_hits_total{limit=\"max_sessions_per_tenant\"} %llu\n",
            (unsigned long long)s->hits.tenant_sessions);
        put(o, "lupine_limit_hits_total{limit=\"max_detached_per_tenant\"} %llu\n",
            (unsigned long long)s->hits.tenant_detached);
}

/* One family: a value per session that has reported. */
static void per_session(struct out *o, struct sup *s, const char *name, const char *type, const char *help, int which)
{
        char lname[2 * LUP_MAX_NAME + 8], ltenant[64];

        family(o, name, type, help);
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++) {
                const struct lupd_session *se = &s->reg.s[i];
                const struct lupd_session_stats *st = &se->stats;
                if (se->state != LUPD_SESSION_LIVE || !st->have)
                        continue;
                char tenant[LUPD_TENANT_PREFIX_MAX];
                size_t tl = lupd_key_tenant_id(se->name, tenant);
                uint64_t v = which == 0   ? st->calls
                             : which == 1 ? st->bytes_in
                             : which == 2 ? st->bytes_out
                             : which == 3 ? st->mem
                             : which == 5 ? st->peer_in
                             : which == 6 ? st->peer_out
                                          : st->epoch;
                put(o, "%s{session=\"%s\",tenant=\"%s\"} %llu\n", name, label(se->name + tl, lname, sizeof(lname)),
                    label(tenant, ltenant, sizeof(ltenant)), (unsigned long long)v);
        }
}

static void gpu_metrics(struct out *o, struct sup *s)
{
        static const struct {
                unsigned key;
                const char *name, *help;
                double scale;
        } g[] = {
                { LUP_NVML_K_TEMP_GPU, "lupine_gpu_temperature_celsius", "GPU temperature", 1 },
                { LUP_NVML_K_POWER, "lupine_gpu_power_watts", "GPU power draw", 0.001 },
                { LUP_NVML_K_UTIL_GPU, "lupine_gpu_utilization_ratio", "GPU utilization (0..1)", 0.01 },
                { LUP_NVML_K_MEM_USED, "lupine_gpu_memory_used_bytes", "GPU memory used", 1 },
                { LUP_NVML_K_MEM_TOTAL, "lupine_gpu_memory_total_bytes", "GPU memory in all", 1 },
        };
        struct lup_nvml_snapshot *snap = sup_nvml_view(s);
        char uuid[160];

        if (!snap)
                return;
        for (size_t k = 0; k < sizeof(g) / sizeof(g[0]); k++) {
                family(o, g[k].name, "gauge", g[k].help);
                for (uint32_t d = 0; d < snap->n_devices && d < LUP_MAX_DEVICES; d++) {
                        const struct lup_nvml_val *u = lup_nvml_devval(&snap->dev[d], LUP_NVML_K_UUID);
                        const struct lup_nvml_val *v = lup_nvml_devval(&snap->dev[d], g[k].key);
                        if (!v || !u || !v->present || v->ret != 0)
                                continue;
                        put(o, "%s{gpu=\"%u\",uuid=\"%s\"} ", g[k].name, (unsigned)d,
                            label(u->present ? u->str : "", uuid, sizeof(uuid)));
                        if (g[k].scale == 1) /* exact: byte counts do not fit a %g */
                                put(o, "%llu\n", (unsigned long long)v->num);
                        else
                                put(o, "%g\n", (double)v->num * g[k].scale);
                }
        }
}

/* A counter family of one sample without labels. */
static void counter(struct out *o, const char *name, const char *help, uint64_t v)
{
        family(o, name, "counter", help);
        put(o, "%s %llu\n", name, (unsigned long long)v);
}

/* Drains, upgrades, checkpoints and restores since the start. */
static void work_metrics(struct out *o, struct sup *s)
{
        static const char *const what[] = { "checkpoint", "restore" };
        const uint64_t n[] = { s->totals.checkpoints, s->totals.restores },
                       bytes[] = { s->totals.checkpoint_bytes, s->totals.restore_bytes },
                       ms[] = { s->totals.checkpoint_ms, s->totals.restore_ms };
        char name[64], help[128];

        counter(o, "lupine_drains_total", "drains (SIGTERM, lupinectl drain) begun", s->totals.drains);
        counter(o, "lupine_upgrades_total", "upgrades (SIGHUP, lupinectl upgrade) begun", s->totals.upgrades);
        counter(o, "lupine_periodic_checkpoints_total", "--checkpoint-interval's checkpoints committed",
                s->totals.periodic);
        counter(o, "lupine_migrations_total", "lupinectl migrate: migrations begun", s->migrate.started);
        counter(o, "lupine_migrations_done_total", "... whose checkpoint was committed for the target",
                s->migrate.done);
        counter(o, "lupine_migration_bytes_total", "device memory that completed migrations moved", s->migrate.bytes);
        family(o, "lupine_migration_seconds_total", "counter",
               "completed migrations, from their start to the commit (pre-copy and pause)");
        put(o, "lupine_migration_seconds_total %.3f\n", (double)s->migrate.ms / 1000.0);
        family(o, "lupine_migration_pause_seconds_total", "counter",
               "... of it with the session paused (the final checkpoint)");
        put(o, "lupine_migration_pause_seconds_total %.6f\n", (double)s->migrate.paused_us / 1e6);
        counter(o, "lupine_migration_precopy_bytes_total", "memory the pre-copies wrote while their sessions ran",
                s->migrate.precopied);
        counter(o, "lupine_migration_paused_bytes_total", "memory written while the sessions were paused",
                s->migrate.paused_bytes);
        counter(o, "lupine_adoptions_total",
                "restores from the shared store begun for a resuming client (docs/fleet.md)", s->adopt.started);
        counter(o, "lupine_adopted_sessions_total", "... that brought the session here", s->adopt.adopted);
        for (int i = 0; i < 2; i++) {
                snprintf(name, sizeof(name), "lupine_%ss_total", what[i]);
                snprintf(help, sizeof(help), "sessions whose %s completed", what[i]);
                counter(o, name, help, n[i]);
                snprintf(name, sizeof(name), "lupine_%s_bytes_total", what[i]);
                snprintf(help, sizeof(help), "device memory moved by completed %ss", what[i]);
                counter(o, name, help, bytes[i]);
                snprintf(name, sizeof(name), "lupine_%s_seconds_total", what[i]);
                snprintf(help, sizeof(help), "time completed %ss took", what[i]);
                family(o, name, "counter", help);
                put(o, "%s %.3f\n", name, (double)ms[i] / 1000.0);
        }
}

static const char *op_label(unsigned op, char *buf, size_t cap)
{
        const char *n = lup_op_name(op);
        if (n)
                return n;
        snprintf(buf, cap, "op_%u", op); /* a worker newer than this supervisor (an upgrade) */
        return buf;
}

/* Calls, bytes and the workers' latency by op (daemon/op_stats.h), summed
 * over every session since the start; only ops that were called. One pass
 * per family: the format wants a family's samples together. */
static void op_metrics(struct out *o, struct sup *s)
{
        static const char *const dir[] = { "in", "out" };
        char nb[16];

        family(o, "lupine_calls_total", "counter", "calls executed, by op");
        for (unsigned op = 0; s->ops && op < LUPD_OP_IDS; op++)
                if (s->ops[op].calls)
                        put(o, "lupine_calls_total{op=\"%s\"} %llu\n", op_label(op, nb, sizeof(nb)),
                            (unsigned long long)s->ops[op].calls);
        family(o, "lupine_call_bytes_total", "counter", "bytes of calls' requests (in) and answers (out), by op");
        for (unsigned op = 0; s->ops && op < LUPD_OP_IDS; op++) {
                const struct lupd_op_count *c = &s->ops[op];
                const uint64_t v[] = { c->bytes_in, c->bytes_out };
                for (int d = 0; d < 2 && (c->calls || c->bytes_out); d++)
                        put(o, "lupine_call_bytes_total{op=\"%s\",direction=\"%s\"} %llu\n",
                            op_label(op, nb, sizeof(nb)), dir[d], (unsigned long long)v[d]);
        }
        family(o, "lupine_call_duration_seconds", "histogram",
               "time the worker took for a call, from taking it up to queueing its answer (asynchronous calls: to "
               "queueing them on the GPU), by op; the network is not in it");
        for (unsigned op = 0; s->ops && op < LUPD_OP_IDS; op++) {
                const struct lupd_op_count *c = &s->ops[op];
                if (!c->calls)
                        continue;
                const char *n = op_label(op, nb, sizeof(nb));
                uint64_t cum = 0;
                for (unsigned b = 0; b + 1 < LUPD_OP_BUCKETS; b++) {
                        cum += c->bucket[b];
                        put(o, "lupine_call_duration_seconds_bucket{op=\"%s\",le=\"%g\"} %llu\n", n,
                            (double)lupd_op_bucket_ns[b] / 1e9, (unsigned long long)cum);
                }
                put(o, "lupine_call_duration_seconds_bucket{op=\"%s\",le=\"+Inf\"} %llu\n", n,
                    (unsigned long long)c->calls);
                put(o, "lupine_call_duration_seconds_sum{op=\"%s\"} %.9f\n", n, (double)c->ns / 1e9);
                put(o, "lupine_call_duration_seconds_count{op=\"%s\"} %llu\n", n, (unsigned long long)c->calls);
        }
}

/* The health watch (docs/health.md): per GPU, and the daemon's admission. */
static void health_metrics(struct out *o, struct sup *s)
{
        const struct sup_health *h = &s->health;

        family(o, "lupine_admitting", "gauge", "1 while new sessions are admitted (0: a GPU health alarm, or a stop)");
        put(o, "lupine_admitting %d\n", !s->stopping && sup_health_admitting(s, NULL, 0) ? 1 : 0);
        family(o, "lupine_gpu_healthy", "gauge", "0 while the GPU is in a health alarm");
        for (unsigned d = 0; d < h->n_gpus; d++)
                put(o, "lupine_gpu_healthy{gpu=\"%u\"} %d\n", d, h->gpu[d].alarm ? 0 : 1);
        family(o, "lupine_gpu_health_alarms_total", "counter", "health alarms raised for the GPU");
        for (unsigned d = 0; d < h->n_gpus; d++)
                put(o, "lupine_gpu_health_alarms_total{gpu=\"%u\"} %llu\n", d, (unsigned long long)h->gpu[d].alarms);
        family(o, "lupine_health_drained_sessions_total", "counter", "sessions drained by the health watch");
        put(o, "lupine_health_drained_sessions_total %llu\n", (unsigned long long)h->drained);
        family(o, "lupine_health_hung_workers_total", "counter", "workers found not answering their heartbeat");
        put(o, "lupine_health_hung_workers_total %llu\n", (unsigned long long)h->hung_workers);
}

void sup_metrics_update(struct sup *s, uint64_t now, bool force)
{
        struct out o = { 0 };
        uint64_t n_scrapes;

        if (!daemon_h || (!force && now - built_ms < 1000))
                return;
        built_ms = now;
        o.cap = 64u * 1024u;
        while (o.cap <= METRICS_MAX) {
                o.p = malloc(o.cap);
                if (!o.p)
                        return;
                o.len = 0;
                o.full = false;
                pthread_mutex_lock(&text_lock);
                n_scrapes = scrapes;
                pthread_mutex_unlock(&text_lock);
                daemon_metrics(&o, s);
                family(&o, "lupine_metrics_scrapes_total", "counter", "scrapes of this endpoint");
                put(&o, "lupine_metrics_scrapes_total %llu\n", (unsigned long long)n_scrapes);
                per_session(&o, s, "lupine_session_calls_total", "counter", "calls the session's worker executed", 0);
                per_session(&o, s, "lupine_session_received_bytes_total", "counter", "bytes from the client", 1);
                per_session(&o, s, "lupine_session_sent_bytes_total", "counter", "bytes to the client", 2);
                per_session(&o, s, "lupine_session_memory_bytes", "gauge", "device memory the session holds", 3);
                per_session(&o, s, "lupine_session_checkpoint_epoch", "gauge", "its last committed checkpoint", 4);
                per_session(&o, s, "lupine_session_peer_received_bytes_total", "counter",
                            "bytes copies from another server brought into the session, daemon to daemon", 5);
                per_session(&o, s, "lupine_session_peer_sent_bytes_total", "counter",
                            "bytes the session's copies to another server sent, daemon to daemon", 6);
                gpu_metrics(&o, s);
                health_metrics(&o, s);
                work_metrics(&o, s);
                op_metrics(&o, s);
                if (!o.full)
                        break;
                free(o.p);
                o.p = NULL;
                o.cap *= 2;
        }
        if (!o.p) {
                lup_warn("metrics: the exposition exceeds %u bytes; keeping the previous one", METRICS_MAX);
                return;
        }
        pthread_mutex_lock(&text_lock);
        free(text);
        text = o.p;
        text_len = o.len;
        pthread_mutex_unlock(&text_lock);
}
