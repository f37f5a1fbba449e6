/* SPDX-License-Identifier: MIT */
/*
 * lupinectl's one exchange with lupined: an ADMIN frame out, its reply in
 * (abi/lupine/wire.h, docs/protocol.md), over the daemon's UNIX socket.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "admin.h"
#include "cli/lupinectl.h"
#include "frame.h"
#include "net.h"

#define REPLY_TIMEOUT_S 30

/* What went wrong, on stderr, unless the caller polls and says (quiet). */
static void say(const struct ctl_opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const struct ctl_opts *o, const char *fmt, ...)
{
        va_list ap;

        if (o->quiet)
                return;
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
}

int ctl_call(const struct ctl_opts *o, uint16_t cmd, const char *arg, uint32_t *ret_status, char **ret_text)
{
        const char *path = o->socket;
        char spec[sizeof(((struct lup_endpoint *)0)->text)];
        struct timeval tv = { .tv_sec = o->timeout_ms ? o->timeout_ms / 1000 : REPLY_TIMEOUT_S,
                              .tv_usec = (o->timeout_ms % 1000) * 1000 };
        uint8_t req[LUP_ADMIN_REQUEST_MAX], hb[LUP_HDR_SIZE];
        size_t req_len = LUP_ADMIN_REQUEST_SIZE;
        struct lup_hdr h;
        struct lup_endpoint ep;
        const char *why, *text;
        uint8_t *payload = NULL;
        size_t text_len;
        char *out;
        int fd, r;

        if ((size_t)snprintf(spec, sizeof(spec), "unix:%s", path) >= sizeof(spec) ||
            lup_endpoint_parse(spec, &ep) < 0 || ep.family != AF_UNIX) {
                say(o, "lupinectl: %s: not a usable UNIX socket path\n", path);
                return -EINVAL;
        }
        fd = lup_connect(&ep);
        if (fd < 0) {
                say(o, "lupinectl: cannot connect to %s: %s\n", path, strerror(-fd));
                return fd;
        }
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        if (arg)
                req_len = lup_admin_request_encode_arg(req, cmd, arg, strlen(arg));
        else
                lup_admin_request_encode(req, cmd);
        if (o->verbose)
                say(o, "lupinectl: ADMIN command %u%s%s to %s\n", (unsigned)cmd, arg ? ", argument " : "",
                    arg ? arg : "", path);
        r = lup_write_full(fd, req, req_len);
        if (r < 0) {
                say(o, "lupinectl: cannot send to %s: %s\n", path, strerror(-r));
                goto out_close;
        }
        r = lup_read_full(fd, hb, sizeof(hb));
        if (r == -ECONNRESET) {
                fprintf(stderr,
                        "lupinectl: %s closed the connection without an answer (not lupined, or one "
                        "without ADMIN support? its log says why)\n",
                        path);
                goto out_close;
        }
        if (r < 0) {
                say(o, "lupinectl: no answer from %s: %s\n", path, r == -EAGAIN ? "timed out" : strerror(-r));
                goto out_close;
        }
        r = lup_hdr_decode(hb, &h, &why);
        if (r < 0 || lup_admin_reply_check(&h) < 0) {
                say(o, "lupinectl: %s sent a malformed reply (%s)\n", path, r < 0 ? why : "not an ADMIN reply");
                r = -EBADMSG;
                goto out_close;
        }
        payload = malloc(h.len ? h.len : 1);
        if (!payload) {
                say(o, "lupinectl: out of memory\n");
                r = -ENOMEM;
                goto out_close;
        }
        r = lup_read_full(fd, payload, h.len);
        if (r < 0) {
                say(o, "lupinectl: reading the reply from %s: %s\n", path,
                    r == -ECONNRESET ? "connection closed" : strerror(-r));
                goto out_free;
        }
        r = lup_admin_reply_decode(payload, h.len, &text, &text_len);
        if (r < 0) {
                say(o, "lupinectl: %s sent a malformed reply (bad text)\n", path);
                goto out_free;
        }
        out = strndup(text, text_len);
        if (!out) {
                say(o, "lupinectl: out of memory\n");
                r = -ENOMEM;
                goto out_free;
        }
        if (o->verbose)
                say(o, "lupinectl: reply status %u, %zu bytes\n", (unsigned)h.status, text_len);
        *ret_status = h.status;
        *ret_text = out;
        r = 0;
out_free:
        free(payload);
out_close:
        close(fd);
        return r < 0 ? r : 0;
}


int ctl_call_ok(const struct ctl_opts *o, uint16_t cmd, const char *arg, const char *what, char **ret_text)
{
        uint32_t status;
        char *text;

        if (ctl_call(o, cmd, arg, &status, &text) < 0)
                return -1;
        if (status != 0) {
                fprintf(stderr, "lupinectl: lupined refused to %s: %s\n", what, text);
                free(text);
                return -1;
        }
        *ret_text = text;
        return 0;
}

int ctl_simple(const struct ctl_opts *o, uint16_t cmd, const char *what)
{
        char *text;

        if (o->json) {
                fprintf(stderr, "lupinectl: --json does not apply to %s\n", what);
                return 2;
        }
        if (ctl_call_ok(o, cmd, NULL, what, &text) < 0)
                return 1;
        printf("%s\n", text);
        free(text);
        return 0;
}
