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

#include "buf.h"
#include "frame.h"
#include "lupine/wire.h"
#include "net.h"

#define DEFAULT_SOCKET "/run/lupine/lupined.sock"
#define REPLY_TIMEOUT_S 30
#define MAX_SESSIONS ((int)LUP_ARENA_SLOTS)

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
        uint8_t req[LUP_HDR_SIZE + 2], hb[LUP_HDR_SIZE];
        struct lup_hdr h = { .op = LUP_OP_ADMIN, .flags = LUP_F_SYNC, .len = 2 };
        struct lup_endpoint ep;
        const char *why, *text;
        uint8_t *payload = NULL;
        size_t text_len;
        struct lup_rd rd;
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
        lup_hdr_encode(req, &h);
        lup_put16(req + LUP_HDR_SIZE, cmd);
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
        if (r < 0 || h.op != LUP_OP_ADMIN || (h.flags & LUP_F_REPLY) == 0 || h.len > 2 + LUP_ADMIN_MAX_TEXT) {
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
        rd = lup_rd_init(payload, h.len);
        lup_rd_str16(&rd, LUP_ADMIN_MAX_TEXT, &text, &text_len);
        r = lup_rd_finish(&rd);
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

/* ---- a reader for the STATUS JSON: the fields we show; others skipped - */

struct session_info {
        char name[LUP_MAX_NAME + 1];
        long slot, pid;
        char state[32];
};

struct status_info {
        char backend[32];
        bool draining, stopping;
        long count;
        int n;
        struct session_info s[LUP_ARENA_SLOTS];
};

struct js {
        const char *p;
        int depth;
};

static void js_ws(struct js *j)
{
        while (*j->p == ' ' || *j->p == '\n' || *j->p == '\t' || *j->p == '\r')
                j->p++;
}

static bool js_eat(struct js *j, char ch)
{
        js_ws(j);
        if (*j->p != ch)
                return false;
        j->p++;
        return true;
}

/* A string without escapes (the daemon sends none) into out[cap], or
 * skipped when out is NULL. */
static bool js_str(struct js *j, char *out, size_t cap)
{
        size_t n = 0;

        if (!js_eat(j, '"'))
                return false;
        while (*j->p && *j->p != '"') {
                if (*j->p == '\\' || (unsigned char)*j->p < 0x20)
                        return false;
                if (out) {
                        if (n + 1 >= cap)
                                return false;
                        out[n++] = *j->p;
                }
                j->p++;
        }
        if (out)
                out[n] = 0;
        return js_eat(j, '"');
}

static bool js_long(struct js *j, long *ret)
{
        char *end;

        js_ws(j);
        errno = 0;
        *ret = strtol(j->p, &end, 10);
        if (end == j->p || errno)
                return false;
        j->p = end;
        return true;
}

static bool js_bool(struct js *j, bool *ret)
{
        js_ws(j);
        if (strncmp(j->p, "true", 4) == 0) {
                *ret = true;
                j->p += 4;
                return true;
        }
        if (strncmp(j->p, "false", 5) == 0) {
                *ret = false;
                j->p += 5;
                return true;
        }
        return false;
}

/* Skips any value we do not show (numbers, strings, literals, nesting). */
static bool js_skip(struct js *j)
{
        long l;
        bool b;

        js_ws(j);
        if (*j->p == '"')
                return js_str(j, NULL, 0);
        if (*j->p == '{' || *j->p == '[') {
                char close = *j->p == '{' ? '}' : ']';
                bool obj = close == '}';
                if (++j->depth > 8)
                        return false;
                j->p++;
                if (js_eat(j, close))
                        return j->depth--, true;
                do {
                        if (obj && (!js_str(j, NULL, 0) || !js_eat(j, ':')))
                                return false;
                        if (!js_skip(j))
                                return false;
                } while (js_eat(j, ','));
                j->depth--;
                return js_eat(j, close);
        }
        if (*j->p == 'n' && strncmp(j->p, "null", 4) == 0) {
                j->p += 4;
                return true;
        }
        return js_bool(j, &b) || js_long(j, &l);
}

static bool js_session(struct js *j, struct session_info *si)
{
        char key[64];

        if (!js_eat(j, '{'))
                return false;
        if (js_eat(j, '}'))
                return true;
        do {
                bool ok;
                if (!js_str(j, key, sizeof(key)) || !js_eat(j, ':'))
                        return false;
                if (strcmp(key, "name") == 0)
                        ok = js_str(j, si->name, sizeof(si->name));
                else if (strcmp(key, "slot") == 0)
                        ok = js_long(j, &si->slot);
                else if (strcmp(key, "pid") == 0)
                        ok = js_long(j, &si->pid);
                else if (strcmp(key, "state") == 0)
                        ok = js_str(j, si->state, sizeof(si->state));
                else
                        ok = js_skip(j);
                if (!ok)
                        return false;
        } while (js_eat(j, ','));
        return js_eat(j, '}');
}

static bool js_status(const char *text, struct status_info *st)
{
        struct js j = { .p = text };
        char key[64];

        if (!js_eat(&j, '{'))
                return false;
        do {
                bool ok = true;
                if (!js_str(&j, key, sizeof(key)) || !js_eat(&j, ':'))
                        return false;
                if (strcmp(key, "backend") == 0) {
                        ok = js_str(&j, st->backend, sizeof(st->backend));
                } else if (strcmp(key, "draining") == 0) {
                        ok = js_bool(&j, &st->draining);
                } else if (strcmp(key, "stopping") == 0) {
                        ok = js_bool(&j, &st->stopping);
                } else if (strcmp(key, "count") == 0) {
                        ok = js_long(&j, &st->count);
                } else if (strcmp(key, "sessions") == 0) {
                        if (!js_eat(&j, '['))
                                return false;
                        if (!js_eat(&j, ']')) {
                                do {
                                        if (st->n >= MAX_SESSIONS || !js_session(&j, &st->s[st->n]))
                                                return false;
                                        st->n++;
                                } while (js_eat(&j, ','));
                                ok = js_eat(&j, ']');
                        }
                } else {
                        ok = js_skip(&j);
                }
                if (!ok)
                        return false;
        } while (js_eat(&j, ','));
        if (!js_eat(&j, '}'))
                return false;
        js_ws(&j);
        return *j.p == 0;
}

/* ---- commands -------------------------------------------------------- */

static int cmd_status(const char *path, bool json)
{
        struct status_info *st;
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
        st->count = -1;
        if (!js_status(text, st)) {
                fprintf(stderr, "lupinectl: cannot read lupined's status reply (try --json)\n");
                free(text);
                free(st);
                return 1;
        }
        printf("backend %s, %s, %d session(s)\n", st->backend[0] ? st->backend : "unknown",
               st->draining ? "draining" : st->stopping ? "stopping" : "not draining", st->n);
        for (int i = 0; i < st->n; i++)
                printf("%-24s slot %-3ld %-17s pid %ld\n", st->s[i].name, st->s[i].slot, st->s[i].state,
                       st->s[i].pid);
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
