/* SPDX-License-Identifier: MIT */
/*
 * lupinectl: asks a running lupined, over its UNIX socket, what it is doing
 * (status), to drain (checkpoint every session, then exit) or to upgrade
 * (re-execute the binary now on disk, keeping sessions and connections). One ADMIN
 * frame out, one reply in (abi/lupine/wire.h, docs/protocol.md).
 *
 * Exit status: 0 done, 1 failure (cannot connect, refused, bad reply),
 * 2 bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "admin.h"
#include "frame.h"
#include "lupine/wire.h"
#include "net.h"

#define DEFAULT_SOCKET "/run/lupine/lupined.sock"
#define REPLY_TIMEOUT_S 30

static void usage(FILE *f)
{
        fprintf(f,
                "Usage: lupinectl [--socket PATH] [--json] COMMAND\n"
                "\n"
                "Talks to a running lupined over its UNIX socket.\n"
                "\n"
                "Commands:\n"
                "  status   the daemon's backend and state, and one line per session\n"
                "           (name, arena slot, state, worker pid)\n"
                "  drain    checkpoint every session, then the daemon exits (as on SIGTERM);\n"
                "           refused when lupined has no checkpoint provider\n"
                "  upgrade  zero-disconnect upgrade (as systemctl reload / SIGHUP): every\n"
                "           session is drained and checkpointed with its memory kept on\n"
                "           the GPU and its client connection open, then lupined\n"
                "           re-executes the binary now on disk, which restores them;\n"
                "           clients see a pause. Refused (nothing changes) without a\n"
                "           checkpoint provider or when the binary cannot be executed\n"
                "\n"
                "Options:\n"
                "  -s, --socket PATH  lupined's UNIX socket (default: $LUPINE_ADMIN_SOCKET, or\n"
                "                     " DEFAULT_SOCKET ")\n"
                "  -j, --json         status: print the daemon's JSON as it came\n"
                "  -h, --help         show this help\n"
                "\n"
                "Only root or the daemon's own user may ask. Exit status: 0 done, 1 failed,\n"
                "2 bad usage.\n");
}

/* ---- the exchange ---------------------------------------------------- */

/* Connects to `path`, sends ADMIN `cmd` and reads the reply: *ret_status
 * and the text, NUL-terminated, into a malloc'd *ret_text. Returns 0, or
 * -1 after printing why. */
static int admin_call(const char *path, uint16_t cmd, uint32_t *ret_status, char **ret_text)
{
        char spec[sizeof(((struct lup_endpoint *)0)->text)];
        struct timeval tv = { .tv_sec = REPLY_TIMEOUT_S };
        uint8_t req[LUP_ADMIN_REQUEST_SIZE], hb[LUP_HDR_SIZE];
        struct lup_hdr h;
        struct lup_endpoint ep;
        const char *why, *text;
        uint8_t *payload = NULL;
        size_t text_len;
        char *out;
        int fd, r;

        if ((size_t)snprintf(spec, sizeof(spec), "unix:%s", path) >= sizeof(spec) ||
            lup_endpoint_parse(spec, &ep) < 0 || ep.family != AF_UNIX) {
                fprintf(stderr, "lupinectl: %s: not a usable UNIX socket path\n", path);
                return -1;
        }
        fd = lup_connect(&ep);
        if (fd < 0) {
                fprintf(stderr, "lupinectl: cannot connect to %s: %s\n", path, strerror(-fd));
                return -1;
        }
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        lup_admin_request_encode(req, cmd);
        r = lup_write_full(fd, req, sizeof(req));
        if (r < 0) {
                fprintf(stderr, "lupinectl: cannot send to %s: %s\n", path, strerror(-r));
                goto out_close;
        }
        r = lup_read_full(fd, hb, sizeof(hb));
        if (r == -ECONNRESET) {
                fprintf(stderr, "lupinectl: %s closed the connection without an answer (not lupined, or one "
                                "without ADMIN support? its log says why)\n", path);
                goto out_close;
        }
        if (r < 0) {
                fprintf(stderr, "lupinectl: no answer from %s: %s\n", path,
                        r == -EAGAIN ? "timed out" : strerror(-r));
                goto out_close;
        }
        r = lup_hdr_decode(hb, &h, &why);
        if (r < 0 || lup_admin_reply_check(&h) < 0) {
                fprintf(stderr, "lupinectl: %s sent a malformed reply (%s)\n", path,
                        r < 0 ? why : "not an ADMIN reply");
                r = -EBADMSG;
                goto out_close;
        }
        payload = malloc(h.len ? h.len : 1);
        if (!payload) {
                fprintf(stderr, "lupinectl: out of memory\n");
                r = -ENOMEM;
                goto out_close;
        }
        r = lup_read_full(fd, payload, h.len);
        if (r < 0) {
                fprintf(stderr, "lupinectl: reading the reply from %s: %s\n", path,
                        r == -ECONNRESET ? "connection closed" : strerror(-r));
                goto out_free;
        }
        r = lup_admin_reply_decode(payload, h.len, &text, &text_len);
        if (r < 0) {
                fprintf(stderr, "lupinectl: %s sent a malformed reply (bad text)\n", path);
                goto out_free;
        }
        out = strndup(text, text_len);
        if (!out) {
                fprintf(stderr, "lupinectl: out of memory\n");
                r = -ENOMEM;
                goto out_free;
        }
        *ret_status = h.status;
        *ret_text = out;
        r = 0;
out_free:
        free(payload);
out_close:
        close(fd);
        return r < 0 ? -1 : 0;
}

/* ---- commands -------------------------------------------------------- */

/* "1.25 GiB", "512 MiB", "0 B" */
static void human_bytes(double b, char *out, size_t cap)
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

/* One line per session, and one more for a checkpoint or restore in progress. */
static void print_session(const struct lup_admin_session *se)
{
        char mem[32], rate[32], done[32], total[32];

        printf("%-24s slot %-3d %-17s pid %d", se->name, se->slot, se->state, se->pid);
        if (!se->has_stats) {
                printf("\n");
                return;
        }
        human_bytes((double)se->memory, mem, sizeof(mem));
        human_bytes(se->bytes_per_s, rate, sizeof(rate));
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
                human_bytes((double)se->progress_done, done, sizeof(done));
                human_bytes((double)se->progress_total, total, sizeof(total));
                printf("%-24s %s: %lld%%, %s of %s\n", "", se->progress,
                       (long long)(se->progress_done * 100 / se->progress_total), done, total);
        }
}

static int cmd_status(const char *path, bool json)
{
        struct lup_admin_status *st;
        const char *why;
        uint32_t status;
        char *text;

        if (admin_call(path, LUP_ADMIN_STATUS, &status, &text) < 0)
                return 1;
        if (status != 0) {
                fprintf(stderr, "lupinectl: lupined refused status: %s\n", text);
                free(text);
                return 1;
        }
        if (json) {
                printf("%s\n", text);
                free(text);
                return 0;
        }
        st = calloc(1, sizeof(*st));
        if (!st) {
                fprintf(stderr, "lupinectl: out of memory\n");
                free(text);
                return 1;
        }
        if (lup_admin_status_decode(text, strlen(text), st, &why) < 0) {
                fprintf(stderr, "lupinectl: cannot read lupined's status reply: %s (try --json)\n", why);
                free(text);
                free(st);
                return 1;
        }
        printf("backend %s, %s, %d session(s)\n", st->backend[0] ? st->backend : "unknown",
               st->draining ? "draining" : st->stopping ? "stopping" : "not draining", st->n);
        for (int i = 0; i < st->n; i++)
                print_session(&st->s[i]);
        if (st->n_limits > 0)
                printf("limits (0: off; docs/security.md):\n");
        for (int i = 0; i < st->n_limits; i++)
                printf("  %-24s %-14lld hit %lld time(s)\n", st->limits[i].name, (long long)st->limits[i].value,
                       (long long)st->limits[i].hits);
        free(text);
        free(st);
        return 0;
}

static int cmd_simple(const char *path, uint16_t cmd, const char *what)
{
        uint32_t status;
        char *text;

        if (admin_call(path, cmd, &status, &text) < 0)
                return 1;
        if (status != 0) {
                fprintf(stderr, "lupinectl: lupined refused to %s: %s\n", what, text);
                free(text);
                return 1;
        }
        printf("%s\n", text);
        free(text);
        return 0;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "socket", required_argument, NULL, 's' },
                { "json", no_argument, NULL, 'j' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *path = getenv("LUPINE_ADMIN_SOCKET");
        bool json = false;
        int c;

        if (!path || !*path)
                path = DEFAULT_SOCKET;
        while ((c = getopt_long(argc, argv, "s:jh", opts, NULL)) != -1) {
                switch (c) {
                case 's':
                        path = optarg;
                        break;
                case 'j':
                        json = true;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        fprintf(stderr, "Try 'lupinectl --help'.\n");
                        return 2;
                }
        }
        if (optind != argc - 1) {
                fprintf(stderr, "lupinectl: %s\nTry 'lupinectl --help'.\n",
                        optind == argc ? "no command given (status, drain or upgrade)" : "one command at a time");
                return 2;
        }
        if (!*path) {
                fprintf(stderr, "lupinectl: --socket: empty path\n");
                return 2;
        }
        if (strcmp(argv[optind], "status") == 0)
                return cmd_status(path, json);
        if (strcmp(argv[optind], "drain") == 0) {
                if (json) {
                        fprintf(stderr, "lupinectl: --json applies to status only\n");
                        return 2;
                }
                return cmd_simple(path, LUP_ADMIN_DRAIN, "drain");
        }
        if (strcmp(argv[optind], "upgrade") == 0) {
                if (json) {
                        fprintf(stderr, "lupinectl: --json applies to status only\n");
                        return 2;
                }
                return cmd_simple(path, LUP_ADMIN_UPGRADE, "upgrade");
        }
        fprintf(stderr, "lupinectl: unknown command '%s' (status, drain or upgrade)\nTry 'lupinectl --help'.\n",
                argv[optind]);
        return 2;
}
