/* SPDX-License-Identifier: MIT */
/*
 * lupinectl status and sessions (list, show, kill; checkpoint is ctl_ckpt.c):
 * lupined's STATUS JSON (common/admin.c reads it) as a table, one session
 * in detail, or ending one session.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "cli/lupinectl.h"

void ctl_human_bytes(double b, char *out, size_t cap)
{
        if (b >= 1073741824.0)
                snprintf(out, cap, "%.2f GiB", b / 1073741824.0);
        else if (b >= 1048576.0)
                snprintf(out, cap, "%.0f MiB", b / 1048576.0);
        else if (b >= 1024.0)
                snprintf(out, cap, "%.0f KiB", b / 1024.0);
        else
                snprintf(out, cap, "%.0f B", b);
}

/* The state word, in color on a terminal: serving green, detached and
 * waiting yellow, failed red. */
static void print_state(const struct ctl_opts *o, const char *state)
{
        const char *c = !o->color                                                                  ? NULL
                        : strcmp(state, "serving") == 0                                            ? "\033[32m"
                        : strcmp(state, "failed") == 0                                             ? "\033[31m"
                        : strcmp(state, "detached") == 0 || strcmp(state, "restored-waiting") == 0 ? "\033[33m"
                                                                                                   : NULL;
        printf("%s%-17s%s", c ? c : "", state, c ? "\033[0m" : "");
}

/* One line per session, and one more for a checkpoint or restore in progress. */
static void print_session(const struct ctl_opts *o, const struct lup_admin_session *se)
{
        char mem[32], rate[32], done[32], total[32];

        printf("%-24s slot %-3d ", se->name, se->slot);
        print_state(o, se->state);
        printf(" pid %d", se->pid);
        if (se->unresponsive)
                printf("%s  NOT ANSWERING ITS HEARTBEAT%s", o->color ? "\033[31m" : "", o->color ? "\033[0m" : "");
        if (!se->has_stats) {
                printf("\n");
                return;
        }
        ctl_human_bytes((double)se->memory, mem, sizeof(mem));
        ctl_human_bytes(se->bytes_per_s, rate, sizeof(rate));
        printf("  tenant %s  client %s  memory %s  %.0f calls/s  %s/s", se->tenant[0] ? se->tenant : "-",
               se->client[0] ? se->client : "-", mem, se->calls_per_s, rate);
        if (se->checkpoint_epoch && se->checkpoint_age_s >= 0)
                printf("  checkpoint %lld, %lld s ago", (long long)se->checkpoint_epoch,
                       (long long)se->checkpoint_age_s);
        else if (se->checkpoint_epoch)
                printf("  checkpoint %lld", (long long)se->checkpoint_epoch);
        else
                printf("  never checkpointed");
        printf("\n");
        if (se->progress[0] && se->progress_total > 0) {
                ctl_human_bytes((double)se->progress_done, done, sizeof(done));
                ctl_human_bytes((double)se->progress_total, total, sizeof(total));
                printf("%-24s %s: %lld%%, %s of %s\n", "", se->progress,
                       (long long)(se->progress_done * 100 / se->progress_total), done, total);
        }
}

/* "health: ok ..." and a line per GPU that is not ok (docs/health.md). */
static void print_health(const struct ctl_opts *o, const struct lup_admin_health *h)
{
        bool ok = true;

        if (!h->present)
                return;
        for (int i = 0; i < h->n_gpus; i++)
                ok &= strcmp(h->gpu[i].state, "ok") == 0;
        printf("health: %s%s%s (policy %s), %s", o->color && !ok ? "\033[31m" : "", ok ? "ok" : "NOT OK",
               o->color && !ok ? "\033[0m" : "", h->policy, h->admitting ? "admitting sessions" : "NOT ADMITTING");
        if (h->drained)
                printf(", %lld session(s) drained by it", (long long)h->drained);
        printf("\n");
        for (int i = 0; i < h->n_gpus; i++) {
                const struct lup_admin_gpu_health *g = &h->gpu[i];
                if (strcmp(g->state, "ok") != 0)
                        printf("  GPU %d %s: %s\n", g->index, g->state, g->why[0] ? g->why : "-");
        }
}

/* STATUS, read: *ret_text (the JSON) and *ret_st, both the caller's to free. */
int ctl_fetch_status(const struct ctl_opts *o, char **ret_text, struct lup_admin_status **ret_st)
{
        struct lup_admin_status *st;
        const char *why;
        uint32_t status;
        char *text;
        int r;

        if (o->quiet) {
                r = ctl_call(o, LUP_ADMIN_STATUS, NULL, &status, &text);
                if (r < 0)
                        return r;
                if (status != 0) {
                        free(text);
                        return -EPROTO;
                }
        } else if (ctl_call_ok(o, LUP_ADMIN_STATUS, NULL, "report its status", &text) < 0) {
                return -EPROTO;
        }
        st = calloc(1, sizeof(*st));
        if (!st) {
                fprintf(stderr, "lupinectl: out of memory\n");
                free(text);
                return -ENOMEM;
        }
        if (lup_admin_status_decode(text, strlen(text), st, &why) < 0) {
                if (!o->quiet)
                        fprintf(stderr, "lupinectl: cannot read lupined's status reply: %s (try --json)\n", why);
                free(text);
                free(st);
                return -EBADMSG;
        }
        *ret_text = text;
        *ret_st = st;
        return 0;
}

int ctl_status(const struct ctl_opts *o)
{
        struct lup_admin_status *st;
        char *text;

        if (ctl_fetch_status(o, &text, &st) < 0)
                return 1;
        if (o->json) {
                printf("%s\n", text);
        } else {
                printf("backend %s, %s, %d session(s)\n", st->backend[0] ? st->backend : "unknown",
                       st->draining   ? "draining"
                       : st->stopping ? "stopping"
                                      : "not draining",
                       st->n);
                print_health(o, &st->health);
                for (int i = 0; i < st->n; i++)
                        print_session(o, &st->s[i]);
                if (st->n_limits > 0)
                        printf("limits (0: off; docs/security.md):\n");
                for (int i = 0; i < st->n_limits; i++)
                        printf("  %-24s %-14lld hit %lld time(s)\n", st->limits[i].name, (long long)st->limits[i].value,
                               (long long)st->limits[i].hits);
        }
        free(text);
        free(st);
        return 0;
}

/* sessions show NAME: every field, one a line (or the session's JSON object). */
static int show(const struct ctl_opts *o, const char *name)
{
        struct lup_admin_status *st;
        char *text, mem[32], in[32], out[32];
        int rc = 1;

        if (ctl_fetch_status(o, &text, &st) < 0)
                return 1;
        for (int i = 0; i < st->n; i++) {
                const struct lup_admin_session *se = &st->s[i];
                if (strcmp(se->name, name) != 0)
                        continue;
                rc = 0;
                if (o->json) { /* the session's object, as STATUS has it */
                        char *t;
                        size_t len;
                        if (lup_admin_session_encode(se, &t, &len) == 0) {
                                printf("%s\n", t);
                                free(t);
                        }
                        break;
                }
                ctl_human_bytes((double)se->memory, mem, sizeof(mem));
                ctl_human_bytes((double)se->bytes_in, in, sizeof(in));
                ctl_human_bytes((double)se->bytes_out, out, sizeof(out));
                printf("session     %s\nstate       ", se->name);
                print_state(o, se->state);
                printf("\nslot        %d\nworker pid  %d\n", se->slot, se->pid);
                if (se->has_stats) {
                        printf("tenant      %s\nclient      %s\nmemory      %s\ncalls       %lld (%.0f/s)\n"
                               "received    %s\nsent        %s\n",
                               se->tenant[0] ? se->tenant : "- (anonymous)", se->client[0] ? se->client : "-", mem,
                               (long long)se->calls, se->calls_per_s, in, out);
                        if (se->checkpoint_epoch)
                                printf("checkpoint  epoch %lld%s", (long long)se->checkpoint_epoch,
                                       se->checkpoint_age_s >= 0 ? ", " : "\n");
                        else
                                printf("checkpoint  none yet\n");
                        if (se->checkpoint_epoch && se->checkpoint_age_s >= 0)
                                printf("%lld s ago\n", (long long)se->checkpoint_age_s);
                        if (se->progress[0] && se->progress_total > 0)
                                printf("progress    %s %lld%%\n", se->progress,
                                       (long long)(se->progress_done * 100 / se->progress_total));
                        if (se->peer_bytes_in || se->peer_bytes_out) { /* copies between servers */
                                ctl_human_bytes((double)se->peer_bytes_in, in, sizeof(in));
                                ctl_human_bytes((double)se->peer_bytes_out, out, sizeof(out));
                                printf("peer copies %s in, %s out (daemon to daemon)\n", in, out);
                        }
                }
                break;
        }
        if (rc)
                fprintf(stderr, "lupinectl: no session %s (lupinectl sessions list shows them)\n", name);
        free(text);
        free(st);
        return rc;
}

static int kill_session(const struct ctl_opts *o, const char *name, bool delete)
{
        char arg[LUP_ADMIN_MAX_ARG + 1], *text;

        if ((size_t)snprintf(arg, sizeof(arg), "%s:%s", delete ? "delete" : "keep", name) >= sizeof(arg)) {
                fprintf(stderr, "lupinectl: session name too long\n");
                return 2;
        }
        if (ctl_call_ok(o, LUP_ADMIN_KILL, arg, "end the session", &text) < 0)
                return 1;
        printf("%s\n", text);
        free(text);
        return 0;
}

int ctl_sessions(const struct ctl_opts *o, int argc, char **argv)
{
        const char *sub = argc > 0 ? argv[0] : "list";

        if (strcmp(sub, "list") == 0 && argc <= 1)
                return ctl_status(o);
        if (strcmp(sub, "show") == 0 && argc == 2)
                return show(o, argv[1]);
        if (strcmp(sub, "kill") == 0 && (argc == 2 || (argc == 3 && strcmp(argv[2], "--delete") == 0)))
                return kill_session(o, argv[1], argc == 3);
        if (strcmp(sub, "checkpoint") == 0 && argc == 2)
                return ctl_checkpoint(o, argv[1]);
        fprintf(stderr, "lupinectl: sessions: expected 'list', 'show NAME', 'kill NAME [--delete]' or "
                        "'checkpoint NAME'\n"
                        "Try 'lupinectl --help'.\n");
        return 2;
}
