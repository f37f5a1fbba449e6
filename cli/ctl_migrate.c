/* SPDX-License-Identifier: MIT */
/*
 * lupinectl migrate NAME --to TARGET: ADMIN MIGRATE, then ADMIN MIGRATION
 * every POLL_MS until the source has checkpointed the session for TARGET
 * (a progress bar on a terminal), then what it moved and the pause. The
 * session moves through the checkpoint store both hosts share: the client
 * reconnects to TARGET, which restores it (docs/fleet.md).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "cli/lupinectl.h"

#define POLL_MS       200
#define POLL_FAILURES 25
#define GIB           1073741824.0

static void nap(int ms)
{
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

        nanosleep(&ts, NULL);
}

/* What ADMIN MIGRATION said of a finished migration. */
struct outcome {
        unsigned long long bytes, ms, precopied, paused_bytes, paused_us;
};

static void json_out(const char *name, const char *target, const char *state, const struct outcome *oc, const char *why)
{
        printf("{\"session\":\"%s\",\"target\":\"%s\",\"state\":\"%s\",\"bytes\":%llu,\"seconds\":%.3f,"
               "\"precopy_bytes\":%llu,\"paused_bytes\":%llu,\"pause_s\":%.6f",
               name, target, state, oc->bytes, oc->ms / 1000.0, oc->precopied, oc->paused_bytes, oc->paused_us / 1e6);
        if (why) {
                printf(",\"error\":\"");
                for (const char *p = why; *p; p++)
                        printf(*p == '"' || *p == '\\' ? "\\%c" : (unsigned char)*p < 0x20 ? " " : "%c", *p);
                printf("\"");
        }
        printf("}\n");
}

int ctl_migrate(const struct ctl_opts *o, int argc, char **argv)
{
        const char *name = NULL, *target = NULL;
        char arg[LUP_ADMIN_MAX_ARG + 1], *text = NULL;
        bool tty = !o->json && isatty(STDOUT_FILENO), drawn = false;
        int failures = 0;

        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--to") == 0 && i + 1 < argc)
                        target = argv[++i];
                else if (!name && argv[i][0] != '-')
                        name = argv[i];
                else
                        name = NULL, i = argc;
        }
        if (!name || !target) {
                fprintf(stderr, "lupinectl: usage: lupinectl migrate NAME --to HOST:PORT\n");
                return 2;
        }
        if (snprintf(arg, sizeof(arg), "%s %s", name, target) >= (int)sizeof(arg)) {
                fprintf(stderr, "lupinectl: session name or target too long\n");
                return 2;
        }
        if (ctl_call_ok(o, LUP_ADMIN_MIGRATE, arg, "migrate the session", &text) < 0)
                return 1;
        if (!o->json)
                printf("%s\n", text);
        fflush(stdout);
        free(text);
        struct ctl_opts p = *o;
        p.quiet = true;
        p.timeout_ms = 2000;
        for (;;) {
                uint32_t status = 0;
                int r = ctl_call(&p, LUP_ADMIN_MIGRATION, name, &status, &text);
                if (r < 0 || status != 0) {
                        free(text);
                        text = NULL;
                        if (++failures >= POLL_FAILURES) {
                                if (drawn)
                                        printf("\r\033[K");
                                fprintf(stderr, "lupinectl: lupined stopped answering about the migration of %s\n",
                                        name);
                                return 1;
                        }
                        nap(POLL_MS);
                        continue;
                }
                failures = 0;
                unsigned long long a = 0, b = 0;
                char where[300] = "";
                if (sscanf(text, "running %llu %llu", &a, &b) == 2) {
                        if (tty && b > 0) {
                                char bar[24];
                                int n = (int)(a * 20 / b);
                                for (int i = 0; i < 20; i++)
                                        bar[i] = i < n ? '#' : '.';
                                bar[20] = 0;
                                printf("\r\033[K[%s] %llu%%, %.2f of %.2f GiB", bar, a * 100 / b, a / GIB, b / GIB);
                                fflush(stdout);
                                drawn = true;
                        }
                        free(text);
                        nap(POLL_MS);
                        continue;
                }
                if (drawn)
                        printf("\r\033[K");
                struct outcome oc = { 0 };
                if (sscanf(text, "done %llu %llu %299s %llu %llu %llu", &oc.bytes, &oc.ms, where, &oc.precopied,
                           &oc.paused_bytes, &oc.paused_us) >= 3) {
                        if (o->json)
                                json_out(name, target, "done", &oc, NULL);
                        else if (oc.precopied)
                                printf("session %s: %.2f GiB moved in %.2f s: %.2f GiB pre-copied while it ran, "
                                       "%.2f GiB in a pause of %.3f s; its client resumes on %s, which restores it "
                                       "from the shared store\n",
                                       name, oc.bytes / GIB, oc.ms / 1000.0, oc.precopied / GIB, oc.paused_bytes / GIB,
                                       oc.paused_us / 1e6, where);
                        else
                                printf("session %s: %.2f GiB checkpointed (%.2f GiB written) in a pause of %.3f s; "
                                       "its client resumes on %s, which restores it from the shared store\n",
                                       name, oc.bytes / GIB, oc.paused_bytes / GIB, oc.paused_us / 1e6, where);
                        free(text);
                        return 0;
                }
                const char *why = strncmp(text, "failed ", 7) == 0 ? text + 7 : text;
                if (o->json)
                        json_out(name, target, "failed", &oc, why);
                else
                        fprintf(stderr, "lupinectl: the migration of %s failed: %s\n", name, why);
                free(text);
                return 1;
        }
}
