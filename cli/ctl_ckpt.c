/* SPDX-License-Identifier: MIT */
/*
 * lupinectl sessions checkpoint NAME, and lupinectl drain: one request,
 * then STATUS every POLL_MS until the work is done, with its progress on
 * one line redrawn in place when stdout is a terminal.
 *
 * A checkpoint is done when the session's checkpoint_epoch passes the one
 * the daemon's answer named ("checkpoint of NAME started, last epoch N"),
 * and has failed when its last_checkpoint_error says why (docs/protocol.md,
 * "ADMIN"). A drain is done when the daemon stops answering: its socket
 * goes away (or, when a service manager keeps the socket, a daemon that is
 * not draining answers on it). A daemon that does not answer during its
 * drain at all (systemd's socket, an upgrade) is not followed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "cli/lupinectl.h"

#define POLL_MS        200
#define POLL_WAIT_MS   2000 /* one STATUS may take this long */
#define POLL_FAILURES  15   /* STATUS that fail in a row before a checkpoint is given up on */
#define DRAIN_TIMEOUTS 5    /* ... before a drain is no longer followed */
#define GIB            1073741824.0

static double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nap(int ms)
{
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

        nanosleep(&ts, NULL);
}

/* The options of a poll: short waits, and failures are expected, not said. */
static struct ctl_opts poll_opts(const struct ctl_opts *o)
{
        struct ctl_opts p = *o;

        p.quiet = true;
        p.timeout_ms = POLL_WAIT_MS;
        return p;
}

/* A connect that failed because nothing listens there (any more). */
static bool daemon_gone(int r)
{
        return r == -ENOENT || r == -ECONNREFUSED || r == -ENOTSOCK;
}

/* "[#######.............]" for done of total, into out[cap]. */
static void bar(double done, double total, char *out, size_t cap)
{
        enum {
                W = 20
        };
        int n = total > 0 ? (int)(done * W / total) : 0;

        if (cap < W + 3)
                return;
        n = n < 0 ? 0 : n > W ? W : n;
        out[0] = '[';
        for (int i = 0; i < W; i++)
                out[1 + i] = i < n ? '#' : '.';
        out[W + 1] = ']';
        out[W + 2] = 0;
}

static const struct lup_admin_session *find(const struct lup_admin_status *st, const char *name)
{
        for (int i = 0; i < st->n; i++)
                if (strcmp(st->s[i].name, name) == 0)
                        return &st->s[i];
        return NULL;
}

/* ---- sessions checkpoint NAME */

/* The session's object as STATUS has it (--json). */
static void print_json(const struct lup_admin_session *se)
{
        char *t;
        size_t len;

        if (lup_admin_session_encode(se, &t, &len) == 0) {
                printf("%s\n", t);
                free(t);
        }
}

int ctl_checkpoint(const struct ctl_opts *o, const char *name)
{
        struct ctl_opts p = poll_opts(o);
        bool tty = !o->json && isatty(STDOUT_FILENO), drawn = false;
        struct lup_admin_session last;
        long long from = 0;
        double t0 = now_s();
        int failures = 0, rc = 1;
        char *text;

        if (strlen(name) > LUP_ADMIN_MAX_ARG) {
                fprintf(stderr, "lupinectl: session name too long\n");
                return 2;
        }
        if (ctl_call_ok(o, LUP_ADMIN_CHECKPOINT, name, "checkpoint the session", &text) < 0)
                return 1;
        const char *e = strstr(text, "last epoch ");
        if (e)
                from = strtoll(e + strlen("last epoch "), NULL, 10);
        if (!o->json)
                printf("%s\n", text);
        fflush(stdout);
        free(text);
        memset(&last, 0, sizeof(last));
        for (;;) {
                struct lup_admin_status *st;
                char *json;
                int r = ctl_fetch_status(&p, &json, &st);

                if (r < 0) {
                        if (daemon_gone(r) || ++failures >= POLL_FAILURES) {
                                if (drawn)
                                        printf("\r\033[K");
                                fprintf(stderr,
                                        "lupinectl: lupined stopped answering (%s) before the checkpoint of "
                                        "%s was reported\n",
                                        strerror(-r), name);
                                return 1;
                        }
                        nap(POLL_MS);
                        continue;
                }
                failures = 0;
                const struct lup_admin_session *se = find(st, name);
                bool done = se && se->checkpoint_epoch > from;
                bool failed = se && !done && se->has_ckpt_result && se->last_checkpoint_error[0];
                if (se)
                        last = *se;
                if (tty && se && !done && !failed && strcmp(se->progress, "checkpoint") == 0 &&
                    se->progress_total > 0) {
                        char b[32];
                        double secs = now_s() - t0;
                        bar((double)se->progress_done, (double)se->progress_total, b, sizeof(b));
                        printf("\r\033[K%s %lld%%, %.2f of %.2f GiB, %.2f GB/s", b,
                               (long long)(se->progress_done * 100 / se->progress_total), se->progress_done / GIB,
                               se->progress_total / GIB, secs > 0 ? se->progress_done / secs / 1e9 : 0.0);
                        fflush(stdout);
                        drawn = true;
                }
                free(json);
                free(st);
                if (drawn && (!se || done || failed))
                        printf("\r\033[K");
                if (!se) {
                        fprintf(stderr, "lupinectl: session %s is gone: it ended before its checkpoint was reported\n",
                                name);
                        return 1;
                }
                if (done || failed) {
                        rc = done ? 0 : 1;
                        break;
                }
                nap(POLL_MS);
        }
        if (o->json)
                print_json(&last);
        if (rc == 0 && !o->json)
                printf("session %s checkpointed at epoch %lld (%.2f GiB in %.1f s)\n", name,
                       (long long)last.checkpoint_epoch, last.memory / GIB, now_s() - t0);
        else if (rc != 0)
                fprintf(stderr, "lupinectl: the checkpoint of %s failed: %s\n", name, last.last_checkpoint_error);
        return rc;
}

/* ---- drain */

/* What a drain's poll knows of one session. */
struct seen {
        char name[LUP_MAX_NAME + 1];
        int64_t epoch;      /* when first seen */
        double total, done; /* bytes */
};

struct drain_view {
        struct seen s[LUP_ARENA_SLOTS];
        int n;
        bool have_counts;
        struct lup_admin_drain counts;
};

static struct seen *seen_of(struct drain_view *v, const struct lup_admin_session *se)
{
        for (int i = 0; i < v->n; i++)
                if (strcmp(v->s[i].name, se->name) == 0)
                        return &v->s[i];
        if (v->n >= (int)LUP_ARENA_SLOTS)
                return NULL;
        struct seen *x = &v->s[v->n++];
        snprintf(x->name, sizeof(x->name), "%s", se->name);
        x->epoch = se->checkpoint_epoch;
        x->total = (double)se->memory;
        return x;
}

/* One STATUS taken in: each session's bytes, done or not; a session that
 * is gone, or whose epoch moved, is done. */
static void drain_take(struct drain_view *v, const struct lup_admin_status *st)
{
        bool present[LUP_ARENA_SLOTS] = { false };

        for (int i = 0; i < st->n; i++) {
                const struct lup_admin_session *se = &st->s[i];
                struct seen *x = seen_of(v, se);
                if (!x)
                        continue;
                present[x - v->s] = true;
                if (strcmp(se->progress, "checkpoint") == 0 && se->progress_total > 0) {
                        x->total = (double)se->progress_total;
                        x->done = (double)se->progress_done;
                } else if (se->checkpoint_epoch > x->epoch) {
                        x->done = x->total;
                }
        }
        for (int i = 0; i < v->n; i++)
                if (!present[i])
                        v->s[i].done = v->s[i].total;
        if (st->has_drain) {
                v->have_counts = true;
                v->counts = st->drain;
        }
}

static void drain_draw(const struct drain_view *v, double secs)
{
        double done = 0, total = 0;
        char b[32], d[32], t[32];

        for (int i = 0; i < v->n; i++) {
                done += v->s[i].done;
                total += v->s[i].total;
        }
        int n_total = v->have_counts ? v->counts.sessions : v->n;
        int n_done = v->have_counts ? v->counts.checkpointed : 0;
        if (total > 0)
                bar(done, total, b, sizeof(b));
        else
                bar(n_done, n_total, b, sizeof(b));
        ctl_human_bytes(done, d, sizeof(d));
        ctl_human_bytes(total, t, sizeof(t));
        printf("\r\033[K%s %d/%d session(s) checkpointed, %s of %s, %.2f GB/s", b, n_done, n_total, d, t,
               secs > 0 ? done / secs / 1e9 : 0.0);
        fflush(stdout);
}

int ctl_drain(const struct ctl_opts *o)
{
        struct ctl_opts p = poll_opts(o);
        bool tty = isatty(STDOUT_FILENO), drawn = false, successor = false, answered = false, mute = false;
        int timeouts = 0;
        struct drain_view *v;
        double t0 = now_s();
        char *text;

        if (o->json) {
                fprintf(stderr, "lupinectl: --json does not apply to drain\n");
                return 2;
        }
        if (ctl_call_ok(o, LUP_ADMIN_DRAIN, NULL, "drain", &text) < 0)
                return 1;
        printf("%s\n", text);
        fflush(stdout);
        free(text);
        v = calloc(1, sizeof(*v));
        if (!v) {
                fprintf(stderr, "lupinectl: out of memory\n");
                return 1;
        }
        for (;;) {
                struct lup_admin_status *st;
                char *json;
                int r = ctl_fetch_status(&p, &json, &st);

                if (r < 0) {
                        if (daemon_gone(r))
                                break;
                        /* A daemon that never answers while it drains
                         * (systemd's socket: its backlog is the next
                         * daemon's) is not polled on: that could even
                         * start a new one once this one is gone. */
                        if (!answered || ++timeouts >= DRAIN_TIMEOUTS) {
                                mute = true;
                                break;
                        }
                        nap(POLL_MS);
                        continue;
                }
                answered = true;
                timeouts = 0;
                bool draining = st->draining;
                if (draining)
                        drain_take(v, st);
                free(json);
                free(st);
                if (!draining) { /* a service manager kept the socket, and a new lupined answers on it */
                        successor = true;
                        break;
                }
                if (tty) {
                        drain_draw(v, now_s() - t0);
                        drawn = true;
                }
                nap(POLL_MS);
        }
        if (drawn)
                printf("\r\033[K");
        const struct lup_admin_drain *c = &v->counts;
        int verdicts = c->checkpointed + c->lost + c->kept + c->ended + c->own_error;
        if (mute) {
                printf("lupined drains without answering meanwhile (its socket is systemd's, or an upgrade's); "
                       "journalctl -u lupined has the verdicts\n");
        } else if (v->have_counts && verdicts == c->sessions) {
                printf("drained: %d session(s) checkpointed, %d lost", c->checkpointed, c->lost);
                if (c->kept)
                        printf(", %d kept their older checkpoint", c->kept);
                if (c->ended)
                        printf(", %d ended by themselves", c->ended);
                if (c->own_error)
                        printf(", %d ended by their own CUDA error", c->own_error);
                printf(" (%.1f s)%s\n", now_s() - t0, successor ? "; a new lupined answers now" : "");
        } else if (v->have_counts) {
                printf("lupined has exited (%.1f s); when last seen, %d of %d session(s) were checkpointed and %d "
                       "lost%s\n",
                       now_s() - t0, c->checkpointed, c->sessions, c->lost,
                       successor ? "; a new lupined answers now" : "");
        } else {
                printf("lupined has exited (%.1f s)%s\n", now_s() - t0, successor ? "; a new lupined answers now" : "");
        }
        int rc = v->have_counts && c->lost > 0 ? 1 : 0;
        free(v);
        return rc;
}
