/* SPDX-License-Identifier: MIT */
/*
 * lupinectl monitor [-i MS] [-n COUNT]: a live view, redrawn in place on a
 * terminal: per GPU its temperature, power, utilization and memory (INFO),
 * per session its state, memory, calls/s and bytes/s (STATUS). Ends on q,
 * Ctrl-C or after COUNT refreshes. Without a terminal each refresh is
 * printed below the last, as nvidia-smi dmon does.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
#include <json-c/json.h>

#include "admin.h"
#include "cli/lupinectl.h"

static volatile sig_atomic_t stop;
static struct termios saved;
static bool raw;

static void on_signal(int sig)
{
        (void)sig;
        stop = 1;
}

static void raw_mode(bool on)
{
        if (on && isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0) {
                struct termios t = saved;
                t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
                t.c_cc[VMIN] = 0;
                t.c_cc[VTIME] = 0;
                raw = tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0;
        } else if (!on && raw) {
                tcsetattr(STDIN_FILENO, TCSANOW, &saved);
                raw = false;
        }
}

static void gpus(const struct ctl_opts *o)
{
        struct json_object *top, *arr;
        char *text, used[32], total[32];

        if (ctl_call_ok(o, LUP_ADMIN_INFO, NULL, "describe its GPUs", &text) < 0)
                return;
        top = json_tokener_parse(text);
        free(text);
        printf("%-4s %6s %7s %5s %22s\n", "gpu", "temp C", "power W", "util%", "memory");
        if (top && json_object_object_get_ex(top, "gpus", &arr) && json_object_is_type(arr, json_type_array)) {
                for (size_t i = 0; i < json_object_array_length(arr); i++) {
                        struct json_object *g = json_object_array_get_idx(arr, i);
                        if (o->device >= 0 && (size_t)o->device != i)
                                continue;
                        ctl_human_bytes((double)ctl_json_int(g, "memory_used", NULL), used, sizeof(used));
                        ctl_human_bytes((double)ctl_json_int(g, "memory_total", NULL), total, sizeof(total));
                        printf("%-4zu %6lld %7.1f %5lld %10s / %-10s\n", i, ctl_json_int(g, "temperature_c", NULL),
                               (double)ctl_json_int(g, "power_mw", NULL) / 1000.0,
                               ctl_json_int(g, "utilization_gpu", NULL), used, total);
                }
        }
        json_object_put(top);
}

static void sessions(const struct ctl_opts *o)
{
        struct lup_admin_status *st = calloc(1, sizeof(*st));
        const char *why;
        char *text, mem[32], rate[32];

        if (!st || ctl_call_ok(o, LUP_ADMIN_STATUS, NULL, "report its status", &text) < 0) {
                free(st);
                return;
        }
        if (lup_admin_status_decode(text, strlen(text), st, &why) == 0) {
                printf("\n%-24s %-17s %12s %10s %12s  %s\n", "session", "state", "memory", "calls/s", "bytes/s",
                       "progress");
                for (int i = 0; i < st->n; i++) {
                        const struct lup_admin_session *se = &st->s[i];
                        ctl_human_bytes((double)se->memory, mem, sizeof(mem));
                        ctl_human_bytes(se->bytes_per_s, rate, sizeof(rate));
                        printf("%-24s %-17s %12s %10.0f %12s", se->name, se->state, mem, se->calls_per_s, rate);
                        if (se->progress[0] && se->progress_total > 0)
                                printf("  %s %lld%%", se->progress,
                                       (long long)(se->progress_done * 100 / se->progress_total));
                        printf("\n");
                }
                if (st->n == 0)
                        printf("(no sessions)\n");
        }
        free(text);
        free(st);
}

/* Waits up to ms for q on the terminal: true to stop. */
static bool wait_key(int ms)
{
        struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
        char c;

        if (!raw) {
                poll(NULL, 0, ms);
                return stop;
        }
        if (poll(&p, 1, ms) > 0 && read(STDIN_FILENO, &c, 1) == 1 && (c == 'q' || c == 'Q'))
                return true;
        return stop;
}

int ctl_monitor(const struct ctl_opts *o, int argc, char **argv)
{
        int interval = 1000, count = 0;
        bool tty = isatty(STDOUT_FILENO);

        for (int i = 0; i < argc; i++) {
                char *end;
                long v = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
                bool ok = i + 1 < argc && *argv[i + 1] && !*end;
                if (strcmp(argv[i], "-i") == 0 && ok && v >= 100 && v <= 3600000)
                        interval = (int)v;
                else if (strcmp(argv[i], "-n") == 0 && ok && v >= 1 && v <= 1000000)
                        count = (int)v;
                else {
                        fprintf(stderr, "lupinectl: monitor: expected [-i MS (100..3600000)] [-n COUNT]\n");
                        return 2;
                }
                i++;
        }
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        raw_mode(true);
        for (int n = 0; !stop && (count == 0 || n < count); n++) {
                if (tty)
                        printf("\033[H\033[2J"); /* home, clear: redrawn in place */
                printf("lupined at %s, every %d ms%s\n\n", o->socket, interval, raw ? " (q quits)" : "");
                gpus(o);
                sessions(o);
                fflush(stdout);
                if ((count == 0 || n + 1 < count) && wait_key(interval))
                        break;
        }
        raw_mode(false);
        return 0;
}
