/* SPDX-License-Identifier: MIT */
/*
 * The shims' transport: plain sockets as before, TLS 1.3 through
 * common/tls.c (see transport.h for the semantics). Waiting is done here
 * with poll(2), POLLIN for reads and POLLOUT for writes, rather than in
 * tls.c, whose wait follows the connection's last "want" and can be set by
 * the other thread's call; a reader and a writer each wait for their own.
 */
#include "transport.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "frame.h"
#include "tls.h"

/* ---- SIGPIPE: blocked around every TLS call (transport.h) */

struct pipe_guard {
        sigset_t old;
};

static void guard_on(struct pipe_guard *g)
{
        sigset_t s;

        sigemptyset(&s);
        sigaddset(&s, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &s, &g->old);
}

/* failed: the call failed, so a write inside it may have raised SIGPIPE;
 * that one is discarded unless the thread had SIGPIPE blocked already (it
 * may then be pending for reasons of its own). */
static void guard_off(struct pipe_guard *g, bool failed)
{
        int saved = errno;
        sigset_t s, pend;

        sigemptyset(&s);
        sigaddset(&s, SIGPIPE);
        if (failed && !sigismember(&g->old, SIGPIPE) && sigpending(&pend) == 0 && sigismember(&pend, SIGPIPE)) {
                struct timespec zero = { 0 };
                while (sigtimedwait(&s, NULL, &zero) < 0 && errno == EINTR)
                        ;
        }
        pthread_sigmask(SIG_SETMASK, &g->old, NULL);
        errno = saved;
}

/* ---- configuration */

static int set_path(char **dst, const char *name, char *err, size_t errcap)
{
        const char *v = getenv(name);

        *dst = NULL;
        if (!v || !*v)
                return 0;
        *dst = strdup(v);
        if (!*dst) {
                snprintf(err, errcap, "%s: out of memory", name);
                return -ENOMEM;
        }
        return 0;
}

/* The token: bytes 1..LUP_MAX_AUTH, no NUL. */
static int set_token(struct lupt_config *c, const char *p, size_t n, const char *what, char *err, size_t errcap)
{
        if (n == 0) {
                snprintf(err, errcap, "%s holds no token (its first line is empty)", what);
                return -EINVAL;
        }
        if (n > LUP_MAX_AUTH) {
                snprintf(err, errcap, "the token of %s is longer than %u bytes", what, LUP_MAX_AUTH);
                return -EINVAL;
        }
        if (memchr(p, 0, n)) {
                snprintf(err, errcap, "the token of %s holds a NUL byte", what);
                return -EINVAL;
        }
        memcpy(c->token, p, n);
        c->token_len = (uint16_t)n;
        return 0;
}

/* LUPINE_TOKEN_FILE: its first line, trailing whitespace removed. */
static int read_token_file(struct lupt_config *c, const char *path, char *err, size_t errcap)
{
        char buf[4096], what[300];
        size_t n = 0;
        int rc, fd = open(path, O_RDONLY | O_CLOEXEC);

        snprintf(what, sizeof(what), "LUPINE_TOKEN_FILE=%s", path);
        if (fd < 0) {
                snprintf(err, errcap, "cannot read %s: %s", what, strerror(errno));
                return -errno;
        }
        while (n < sizeof(buf)) {
                ssize_t k = read(fd, buf + n, sizeof(buf) - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0) {
                        rc = -errno;
                        snprintf(err, errcap, "cannot read %s: %s", what, strerror(errno));
                        goto out;
                }
                if (k == 0)
                        break;
                n += (size_t)k;
                if (memchr(buf, '\n', n))
                        break;
        }
        char *nl = memchr(buf, '\n', n);
        if (!nl && n == sizeof(buf)) {
                snprintf(err, errcap, "the token of %s is longer than %u bytes", what, LUP_MAX_AUTH);
                rc = -EINVAL;
                goto out;
        }
        size_t len = nl ? (size_t)(nl - buf) : n;
        while (len > 0 && strchr(" \t\r\v\f", buf[len - 1]) && buf[len - 1])
                len--;
        rc = set_token(c, buf, len, what, err, errcap);
out:
        explicit_bzero(buf, sizeof(buf));
        close(fd);
        return rc;
}

static int load_token(struct lupt_config *c, char *err, size_t errcap)
{
        const char *tok = getenv("LUPINE_TOKEN"), *file = getenv("LUPINE_TOKEN_FILE");

        if (tok && *tok && file && *file) {
                snprintf(err, errcap, "LUPINE_TOKEN and LUPINE_TOKEN_FILE are both set; set only one");
                return -EINVAL;
        }
        if (tok && *tok)
                return set_token(c, tok, strlen(tok), "LUPINE_TOKEN", err, errcap);
        if (file && *file)
                return read_token_file(c, file, err, errcap);
        return 0;
}

static bool any_tls(const char *servers)
{
        for (const char *p = servers; p && *p;) {
                while (*p == ' ' || *p == ',' || *p == '|') /* common/server_list.h */
                        p++;
                if (strncmp(p, "tls://", 6) == 0)
                        return true;
                p = strpbrk(p, ",|");
        }
        return false;
}

static int make_ctx(const struct lupt_config *c, unsigned flags, struct lup_tls_ctx **ret, char *err, size_t errcap)
{
        char why[400];
        int rc = lup_tls_client_ctx_new(c->ca, c->cert, c->key, flags, ret, why, sizeof(why));

        if (rc < 0)
                snprintf(err, errcap, "TLS client setup (LUPINE_TLS_CA / _CERT / _KEY): %s", why);
        return rc;
}

int lupt_config_load(struct lupt_config *c, const char *servers, unsigned flags, char *err, size_t errcap)
{
        int rc;

        memset(c, 0, sizeof(*c));
        err[0] = 0;
        if ((rc = set_path(&c->ca, "LUPINE_TLS_CA", err, errcap)) < 0 ||
            (rc = set_path(&c->cert, "LUPINE_TLS_CERT", err, errcap)) < 0 ||
            (rc = set_path(&c->key, "LUPINE_TLS_KEY", err, errcap)) < 0)
                goto fail;
        if (!c->cert != !c->key) {
                snprintf(err, errcap, "%s is set without %s: a client certificate needs both",
                         c->cert ? "LUPINE_TLS_CERT" : "LUPINE_TLS_KEY",
                         c->cert ? "LUPINE_TLS_KEY" : "LUPINE_TLS_CERT");
                rc = -EINVAL;
                goto fail;
        }
        if ((flags & LUPT_CFG_TOKEN) && (rc = load_token(c, err, errcap)) < 0)
                goto fail;
        if (!any_tls(servers))
                return 0;
        /* No OPENSSL_cleanup at exit where we are the first to start
         * OpenSSL: threads of the program may still be inside a TLS call. */
        (void)OPENSSL_init_ssl(OPENSSL_INIT_NO_ATEXIT, NULL);
        if (flags & LUPT_CFG_HANDOFF) {
                /* no kernel TLS on the supervisor's session: the socket goes on to a second one */
                rc = make_ctx(c, LUP_TLS_READ_AHEAD, &c->first, err, errcap);
                if (rc == 0)
                        rc = make_ctx(c, LUP_TLS_READ_AHEAD | LUP_TLS_KTLS | LUP_TLS_RECORDS, &c->second, err, errcap);
        } else {
                rc = make_ctx(c, LUP_TLS_READ_AHEAD, &c->first, err, errcap);
        }
        if (rc < 0)
                goto fail;
        return 0;
fail:
        lupt_config_free(c);
        return rc < 0 ? rc : -EINVAL;
}

void lupt_config_free(struct lupt_config *c)
{
        free(c->ca);
        free(c->cert);
        free(c->key);
        lup_tls_ctx_free(c->first);
        lup_tls_ctx_free(c->second);
        explicit_bzero(c, sizeof(*c));
}

/* ---- connections */

/* A handshake on l->tls: 0, or -errno with err set. */
static int handshake(struct lupt_link *l, const struct lup_endpoint *ep, int ms, bool second, char *err, size_t errcap)
{
        struct pipe_guard g;
        int rc;

        guard_on(&g);
        rc = lup_tls_handshake(l->tls, ms);
        guard_off(&g, rc < 0);
        if (rc == 0)
                return 0;
        const char *why = lup_tls_error(l->tls);
        if (second)
                snprintf(err, errcap, "%s: the session's worker (second TLS session): %s", ep->text, why);
        else
                snprintf(err, errcap, "%s: %s%s", ep->text, why,
                         strstr(why, "certificate") ? "" : " (is it a TLS port?)");
        return rc;
}

int lupt_connect(const struct lupt_config *c, const struct lup_endpoint *ep, int handshake_ms, struct lupt_link *ret,
                 char *err, size_t errcap)
{
        int fd = lup_connect(ep);

        *ret = (struct lupt_link){ .fd = -1 };
        if (fd < 0) {
                snprintf(err, errcap, "%s: %s", ep->text, strerror(-fd));
                return fd;
        }
        ret->fd = fd;
        if (!ep->tls)
                return fd;
        if (!c->first) {
                snprintf(err, errcap, "%s: TLS was not set up for this endpoint", ep->text);
                lupt_close(ret, false);
                return -EINVAL;
        }
        ret->stage = malloc(LUPT_RECORD);
        ret->tls = ret->stage ? lup_tls_new(c->first, fd, ep->host) : NULL;
        if (!ret->tls) {
                snprintf(err, errcap, "%s: cannot start a TLS session (host name '%s')", ep->text, ep->host);
                lupt_close(ret, false);
                return -ENOMEM;
        }
        int rc = handshake(ret, ep, handshake_ms, false, err, errcap);
        if (rc < 0) {
                lupt_close(ret, false);
                return rc;
        }
        return fd;
}

void lupt_close(struct lupt_link *l, bool close_notify)
{
        if (l->tls) {
                struct pipe_guard g;
                guard_on(&g);
                lup_tls_free(l->tls, close_notify);
                guard_off(&g, true);
        }
        free(l->stage);
        if (l->fd >= 0)
                close(l->fd);
        *l = (struct lupt_link){ .fd = -1 };
}

void lupt_set_timeout(struct lupt_link *l, int ms)
{
        if (l->tls) {
                l->io_ms = ms;
                return;
        }
        struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
        (void)setsockopt(l->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        (void)setsockopt(l->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

const char *lupt_why(const struct lupt_link *l)
{
        return l->tls ? lup_tls_error(l->tls) : "";
}

/* ---- reading */

/* 1: ready; 0: ms passed; -errno. */
static int wait_fd(int fd, short events, int ms)
{
        struct pollfd p = { .fd = fd, .events = events };
        int n = poll(&p, 1, ms > 0 ? ms : -1);

        if (n < 0)
                return errno == EINTR ? 1 : -errno;
        return n > 0;
}

static ssize_t tls_recv(struct lupt_link *l, void *p, size_t n, bool wait)
{
        struct pipe_guard g;
        bool guard = lup_tls_may_sigpipe(l->tls);
        ssize_t k;

        if (guard)
                guard_on(&g);
        for (;;) {
                k = lup_tls_recv_nb(l->tls, p, n);
                if (k != -EAGAIN || !wait)
                        break;
                int w = wait_fd(l->fd, POLLIN, l->io_ms);
                if (w <= 0) {
                        k = w < 0 ? w : -EAGAIN;
                        break;
                }
        }
        if (guard)
                guard_off(&g, k < 0 && k != -EAGAIN);
        return k;
}

static ssize_t plain_recv(int fd, void *p, size_t n, int flags)
{
        for (;;) {
                ssize_t k = recv(fd, p, n, flags);
                if (k >= 0)
                        return k;
                if (errno == EINTR)
                        continue;
                return errno == EWOULDBLOCK ? -EAGAIN : -errno;
        }
}

ssize_t lupt_read(struct lupt_link *l, void *p, size_t n)
{
        return l->tls ? tls_recv(l, p, n, true) : plain_recv(l->fd, p, n, 0);
}

ssize_t lupt_recv_nb(struct lupt_link *l, void *p, size_t n)
{
        return l->tls ? tls_recv(l, p, n, false) : plain_recv(l->fd, p, n, MSG_DONTWAIT);
}

int lupt_read_full(struct lupt_link *l, void *p, size_t n)
{
        uint8_t *b = p;

        while (n) {
                ssize_t k = lupt_read(l, b, n);
                if (k == 0)
                        return -ECONNRESET;
                if (k < 0)
                        return (int)k;
                b += k;
                n -= (size_t)k;
        }
        return 0;
}

bool lupt_readable(struct lupt_link *l)
{
        struct pollfd p = { .fd = l->fd, .events = POLLIN };

        if (l->tls && lup_tls_pending(l->tls))
                return true;
        return poll(&p, 1, 0) > 0;
}

/* ---- writing */

/* Steps (*i, *off) past n bytes of iov, and past empty pieces. */
static void cursor_advance(const struct iovec *iov, int iovcnt, int *i, size_t *off, size_t n)
{
        while (*i < iovcnt) {
                size_t left = iov[*i].iov_len - *off;
                if (n < left) {
                        *off += n;
                        return;
                }
                n -= left;
                (*i)++;
                *off = 0;
        }
}

/* The next records from (i, off): a slice of a large piece where it is one
 * (whole records, up to LUPT_BATCH), else the small pieces that follow
 * gathered into l->stage. The same
 * position always gives the same bytes, which a write that has to be
 * retried needs. */
static const uint8_t *record_at(struct lupt_link *l, const struct iovec *iov, int iovcnt, int i, size_t off,
                                size_t *ret_n)
{
        size_t n = 0;

        if (iov[i].iov_len - off >= LUPT_RECORD) { /* up to a batch of records, sealed side by side */
                size_t left = iov[i].iov_len - off;
                *ret_n = left < LUPT_BATCH ? left - left % LUPT_RECORD : LUPT_BATCH;
                return (const uint8_t *)iov[i].iov_base + off;
        }
        for (; i < iovcnt && n < LUPT_RECORD; i++, off = 0) {
                size_t k = iov[i].iov_len - off;
                if (k > LUPT_RECORD - n)
                        k = LUPT_RECORD - n;
                memcpy(l->stage + n, (const uint8_t *)iov[i].iov_base + off, k);
                n += k;
        }
        *ret_n = n;
        return l->stage;
}

/* Sends what an earlier call sealed but the socket did not take, waiting
 * for it up to io_ms unless nowait: 0, -EAGAIN, or -errno. */
static int tls_flush(struct lupt_link *l, bool nowait)
{
        int rc;

        while ((rc = lup_tls_flush_nb(l->tls)) == -EAGAIN && !nowait) {
                int w = wait_fd(l->fd, POLLOUT, l->io_ms);
                if (w <= 0)
                        return w < 0 ? w : -EAGAIN;
                nowait = true; /* one more try after the wait */
        }
        return rc;
}

/* Batch by batch of records (record_at), each sealed whole or not at all,
 * into the send buffer (common/tls_record.c), which goes out in a few
 * large writes; bytes an earlier call left there go first. */
static ssize_t tls_send(struct lupt_link *l, const struct iovec *iov, int iovcnt, bool nowait)
{
        struct pipe_guard g;
        bool guard = lup_tls_may_sigpipe(l->tls);
        size_t done = 0, off = 0;
        ssize_t rc;
        int i = 0;

        if (guard)
                guard_on(&g);
        rc = tls_flush(l, nowait);
        cursor_advance(iov, iovcnt, &i, &off, 0);
        while (rc == 0 && i < iovcnt) {
                size_t n;
                const uint8_t *p = record_at(l, iov, iovcnt, i, off, &n);
                ssize_t k = lup_tls_send_nb(l->tls, p, n);
                if (k > 0) {
                        done += (size_t)k;
                        cursor_advance(iov, iovcnt, &i, &off, (size_t)k);
                        continue;
                }
                if (k != -EAGAIN || done || nowait) {
                        rc = k;
                        break;
                }
                int w = wait_fd(l->fd, POLLOUT, l->io_ms);
                if (w <= 0)
                        rc = w < 0 ? w : -EAGAIN;
        }
        if (done && (rc == 0 || rc == -EAGAIN)) { /* a full socket keeps the rest for the next call */
                int f = lup_tls_flush_nb(l->tls);
                rc = f == -EAGAIN ? 0 : f;
        }
        if (guard)
                guard_off(&g, rc < 0 && rc != -EAGAIN);
        return done ? (ssize_t)done : rc; /* an error after some bytes: the next call reports it */
}

bool lupt_unsent(struct lupt_link *l)
{
        return l->tls && lup_tls_unsent(l->tls);
}

void lupt_send_goodbye(struct lupt_link *l, uint64_t seq)
{
        uint8_t hb[LUP_HDR_SIZE];
        struct lup_hdr h = { .op = LUP_OP_GOODBYE, .seq = seq };

        lup_hdr_encode(hb, &h);
        struct iovec iov = { hb, sizeof(hb) };
        if (lupt_send(l, &iov, 1, true) > 0 && lupt_unsent(l))
                (void)lupt_send(l, NULL, 0, true);
}

ssize_t lupt_send(struct lupt_link *l, const struct iovec *iov, int iovcnt, bool nowait)
{
        if (l->tls)
                return tls_send(l, iov, iovcnt, nowait);
        struct msghdr mh = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt };
        for (;;) {
                ssize_t k = sendmsg(l->fd, &mh, MSG_NOSIGNAL | (nowait ? MSG_DONTWAIT : 0));
                if (k >= 0)
                        return k;
                if (errno == EINTR)
                        continue;
                return errno == EWOULDBLOCK ? -EAGAIN : -errno;
        }
}

int lupt_write_full(struct lupt_link *l, const void *p, size_t n)
{
        struct iovec iov = { (void *)p, n };

        while (iov.iov_len || lupt_unsent(l)) {
                ssize_t k = lupt_send(l, &iov, 1, false);
                if (k < 0)
                        return (int)k;
                iov.iov_base = (uint8_t *)iov.iov_base + k;
                iov.iov_len -= (size_t)k;
        }
        return 0;
}

/* ---- the HELLO exchange and the hand-off (wire.h, "TLS") */

/* An answer to HELLO or the hand-off, header and payload (malloc'ed): 0,
 * -EBADMSG for a header that does not decode or is neither a HELLO nor a
 * HANDOFF reply (its payload is not read), or -errno. */
static int read_answer(struct lupt_link *l, struct lup_hdr *h, uint8_t **ret_p)
{
        uint8_t hb[LUP_HDR_SIZE];
        const char *why;
        int rc = lupt_read_full(l, hb, sizeof(hb));

        *ret_p = NULL;
        if (rc < 0)
                return rc;
        if (lup_hdr_decode(hb, h, &why) < 0 || !(h->flags & LUP_F_REPLY) ||
            (h->op != LUP_OP_HELLO && (h->op != LUP_OP_HANDOFF || h->len != LUP_TICKET_SIZE)))
                return -EBADMSG;
        *ret_p = malloc(h->len ? h->len : 1);
        if (!*ret_p)
                return -ENOMEM;
        rc = lupt_read_full(l, *ret_p, h->len);
        if (rc < 0) {
                free(*ret_p);
                *ret_p = NULL;
        }
        return rc;
}

/* The supervisor admitted the HELLO and handed the socket to the worker:
 * drop the first TLS session without a closure alert (nothing may be sent
 * between the two), handshake again, and prove with the ticket that this
 * is the client the supervisor admitted. */
static int handoff(const struct lupt_config *c, const struct lup_endpoint *ep, struct lupt_link *l,
                   const struct lup_hdr *hello, const uint8_t *ticket, int handshake_ms, char *err, size_t errcap)
{
        uint8_t f[LUP_HDR_SIZE + LUP_TICKET_SIZE];
        struct lup_hdr h = { .len = LUP_TICKET_SIZE,
                             .op = LUP_OP_HANDOFF,
                             .flags = LUP_F_SYNC,
                             .lane = hello->lane,
                             .seq = hello->seq };
        struct pipe_guard g;

        guard_on(&g);
        lup_tls_free(l->tls, false);
        guard_off(&g, false);
        l->tls = lup_tls_new(c->second, l->fd, ep->host);
        if (!l->tls) {
                snprintf(err, errcap, "%s: cannot start the second TLS session", ep->text);
                return -ENOMEM;
        }
        int rc = handshake(l, ep, handshake_ms, true, err, errcap);
        if (rc < 0)
                return rc;
        lup_hdr_encode(f, &h);
        memcpy(f + LUP_HDR_SIZE, ticket, LUP_TICKET_SIZE);
        rc = lupt_write_full(l, f, sizeof(f));
        explicit_bzero(f, sizeof(f));
        if (rc == -EPROTO)
                snprintf(err, errcap, "%s: sending the hand-off ticket: %s", ep->text, lupt_why(l));
        return rc;
}

static bool is_handoff(const struct lup_hdr *h)
{
        return h->op == LUP_OP_HANDOFF && (h->flags & LUP_F_REPLY) && h->status == 0 && h->len == LUP_TICKET_SIZE;
}

static bool is_refusal(const struct lup_hdr *h)
{
        return h->op == LUP_OP_HELLO && (h->flags & LUP_F_REPLY) && h->status != 0;
}

int lupt_hello(const struct lupt_config *c, const struct lup_endpoint *ep, struct lupt_link *l, const uint8_t *frame,
               size_t n, int handshake_ms, struct lup_hdr *ret_h, uint8_t **ret_p, char *err, size_t errcap)
{
        int rc = lupt_write_full(l, frame, n);

        err[0] = 0;
        *ret_p = NULL;
        if (rc == 0)
                rc = read_answer(l, ret_h, ret_p);
        /* a TLS connection to libcuda's server goes on to the worker */
        if (rc >= 0 && l->tls && c->second && is_handoff(ret_h)) {
                struct lup_hdr hello;
                const char *why;
                uint8_t ticket[LUP_TICKET_SIZE];
                memcpy(ticket, *ret_p, sizeof(ticket));
                free(*ret_p);
                *ret_p = NULL;
                if (lup_hdr_decode(frame, &hello, &why) < 0)
                        return -EINVAL;
                rc = handoff(c, ep, l, &hello, ticket, handshake_ms, err, errcap);
                explicit_bzero(ticket, sizeof(ticket));
                if (rc < 0)
                        return rc;
                rc = read_answer(l, ret_h, ret_p);
        } else if (l->tls && c->second && (rc == -EBADMSG || (rc == 0 && !is_refusal(ret_h)))) {
                snprintf(err, errcap, "the server at %s does not speak lupine's TLS protocol (%s)", ep->text,
                         rc == -EBADMSG ? "it answered HELLO with a malformed frame"
                                        : "it answered HELLO without a hand-off to the session");
                free(*ret_p);
                *ret_p = NULL;
                return -EPROTO;
        }
        if (rc == 0 && (ret_h->op != LUP_OP_HELLO || !(ret_h->flags & LUP_F_REPLY)))
                rc = -EBADMSG;
        if (rc < 0) {
                free(*ret_p);
                *ret_p = NULL;
        }
        if (rc == -EBADMSG)
                return -ECONNRESET; /* as before TLS: not an answer to HELLO */
        if (rc == -EPROTO && l->tls && !err[0])
                snprintf(err, errcap, "%s: %s", ep->text, lupt_why(l));
        return rc;
}
