/* SPDX-License-Identifier: MIT */
/*
 * The shims' transport (common/transport.c) against a TLS server made here
 * with common/tls.c in a thread, on loopback TCP, with certificates made at
 * test time: the two handshakes of a hand-off on one socket and the ticket,
 * 64 MiB each way at once from two threads on each side (with 1 ms waits,
 * so writes are retried half-sent), the bearer token from LUPINE_TOKEN_FILE,
 * mutual TLS, a wrong host name, an untrusted certificate, a plaintext
 * server, a server without the hand-off, a refusal, a peer that resets the
 * connection (no SIGPIPE may kill us), the configuration's errors, and the
 * plain path over a socketpair.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "ctl_codec.h"
#include "frame.h"
#include "net.h"
#include "tls.h"
#include "tls_certs.h"
#include "transport.h"

#define BULK    (64u << 20)
#define REFUSED 800 /* CUDA_ERROR_NOT_PERMITTED */

static char dir[64];

static void path_of(char *out, size_t cap, const char *name)
{
        snprintf(out, cap, "%s/%s", dir, name);
}

static void set_path_env(const char *var, const char *name)
{
        char p[128];
        path_of(p, sizeof(p), name);
        setenv(var, p, 1);
}

static void clear_env(void)
{
        static const char *vars[] = { "LUPINE_TLS_CA", "LUPINE_TLS_CERT", "LUPINE_TLS_KEY", "LUPINE_TOKEN",
                                      "LUPINE_TOKEN_FILE" };
        for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
                unsetenv(vars[i]);
}

static void write_file(const char *name, const void *p, size_t n)
{
        char path[128];
        path_of(path, sizeof(path), name);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        assert_int_equal(fwrite(p, 1, n, f), n);
        assert_int_equal(fclose(f), 0);
}

/* ---- bulk data, the same code on both ends (the server's end is a
 * lupt_link around its struct lup_tls) */

static uint8_t pattern(uint32_t seed, size_t i)
{
        uint32_t x = ((uint32_t)(i >> 2) * 2654435761u) ^ seed;
        return (uint8_t)(x >> (8 * (i & 3)));
}

struct bulk {
        struct lupt_link *l;
        uint32_t seed;
        unsigned stalled; /* writes that could not move (and were retried) */
        bool ok;
        char why[160];
};

/* Writes BULK bytes in irregular pieces, alternately waiting and not; a
 * write that could not move is retried with the same pieces. */
static void *bulk_write(void *arg)
{
        struct bulk *b = arg;
        enum {
                CHUNK = (1 << 20) + 77
        };
        uint8_t *buf = malloc(CHUNK);
        size_t sent = 0;
        unsigned round = 0, stalls = 0;

        assert_non_null(buf);
        while (sent < BULK) {
                size_t n = BULK - sent < CHUNK ? BULK - sent : CHUNK;
                for (size_t i = 0; i < n; i++)
                        buf[i] = pattern(b->seed, sent + i);
                size_t cut[3] = { 7, 40 + round % 5000, 100003 };
                struct iovec iov[4], *v = iov;
                int cnt = 0;
                size_t at = 0;
                for (int i = 0; i < 3 && at + cut[i] < n; i++) {
                        iov[cnt++] = (struct iovec){ buf + at, cut[i] };
                        at += cut[i];
                }
                iov[cnt++] = (struct iovec){ buf + at, n - at };
                bool nowait = round++ % 2;
                while (cnt > 0) {
                        ssize_t k = lupt_send(b->l, v, cnt, nowait);
                        if (k == -EAGAIN) {
                                b->stalled++;
                                if (++stalls > 20000) {
                                        snprintf(b->why, sizeof(b->why), "no progress writing at %zu", sent);
                                        goto out;
                                }
                                if (nowait)
                                        poll(&(struct pollfd){ .fd = b->l->fd, .events = POLLOUT }, 1, 1);
                                continue;
                        }
                        if (k <= 0) {
                                snprintf(b->why, sizeof(b->why), "write at %zu: %s %s", sent, strerror((int)-k),
                                         lupt_why(b->l));
                                goto out;
                        }
                        stalls = 0;
                        lup_iov_advance(&v, &cnt, (size_t)k);
                }
                sent += n;
        }
        while (lupt_unsent(b->l)) { /* sealed but not yet taken by the socket */
                ssize_t k = lupt_send(b->l, NULL, 0, false);
                if (k < 0 && k != -EAGAIN) {
                        snprintf(b->why, sizeof(b->why), "flush: %s %s", strerror((int)-k), lupt_why(b->l));
                        goto out;
                }
        }
        b->ok = true;
out:
        free(buf);
        return NULL;
}

static void *bulk_read(void *arg)
{
        struct bulk *b = arg;
        uint8_t *buf = malloc(300000);
        size_t got = 0;
        unsigned stalls = 0;

        assert_non_null(buf);
        while (got < BULK) {
                size_t want = BULK - got < 300000 ? BULK - got : 300000;
                ssize_t k = lupt_read(b->l, buf, want);
                if (k == -EAGAIN) {
                        if (++stalls > 20000) {
                                snprintf(b->why, sizeof(b->why), "nothing to read at %zu", got);
                                goto out;
                        }
                        continue;
                }
                if (k <= 0) {
                        snprintf(b->why, sizeof(b->why), "read at %zu: %s %s", got, k ? strerror((int)-k) : "end",
                                 lupt_why(b->l));
                        goto out;
                }
                stalls = 0;
                for (ssize_t i = 0; i < k; i++) {
                        if (buf[i] != pattern(b->seed, got + (size_t)i)) {
                                snprintf(b->why, sizeof(b->why), "byte %zu is wrong", got + (size_t)i);
                                goto out;
                        }
                }
                got += (size_t)k;
        }
        b->ok = true;
out:
        free(buf);
        return NULL;
}

/* Both ways at once: a writer thread and a reader thread. A small send
 * buffer, so that writes block (and are retried) often. Returns the
 * writer's stalls. */
static unsigned bulk_both(struct lupt_link *l, uint32_t out_seed, uint32_t in_seed, bool *ok, char *why, size_t cap)
{
        int small = 16384;
        setsockopt(l->fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
        struct bulk w = { .l = l, .seed = out_seed }, r = { .l = l, .seed = in_seed };
        pthread_t tw, tr;
        assert_int_equal(pthread_create(&tw, NULL, bulk_write, &w), 0);
        assert_int_equal(pthread_create(&tr, NULL, bulk_read, &r), 0);
        pthread_join(tw, NULL);
        pthread_join(tr, NULL);
        *ok = w.ok && r.ok;
        snprintf(why, cap, "%s%s%s", w.why, w.why[0] && r.why[0] ? "; " : "", r.why);
        return w.stalled;
}

/* ---- the server: lupined's supervisor, then its worker */

enum srv_mode {
        SRV_HANDOFF,
        SRV_REFUSE,
        SRV_NO_HANDOFF,
        SRV_PLAIN,
        SRV_HANDSHAKE,
        SRV_RESET
};

struct srv {
        enum srv_mode mode;
        bool mtls, bulk;
        bool records; /* the worker's end uses lupine's record layer too */
        int lfd, port;
        pthread_t th;
        /* what it saw */
        struct lup_hello hello;
        struct lup_hdr hello_hdr;
        bool hello_ok, handoff_ok, bulk_ok;
        int handshake_rc;
        char peer_cn[64];
        char fail[300];
};

static void srv_fail(struct srv *s, const char *fmt, ...)
{
        va_list ap;
        if (s->fail[0])
                return;
        va_start(ap, fmt);
        vsnprintf(s->fail, sizeof(s->fail), fmt, ap);
        va_end(ap);
}

static struct lup_tls_ctx *srv_ctx(struct srv *s, unsigned flags)
{
        char cert[128], key[128], cca[128], err[300];
        struct lup_tls_ctx *c = NULL;
        path_of(cert, sizeof(cert), "server.pem");
        path_of(key, sizeof(key), "server.key");
        path_of(cca, sizeof(cca), "client.pem");
        if (lup_tls_server_ctx_new(cert, key, s->mtls ? cca : NULL, flags, &c, err, sizeof(err)) < 0)
                srv_fail(s, "server context: %s", err);
        return c;
}

static int srv_send(struct lup_tls *t, uint16_t op, uint32_t status, const struct lup_hdr *req, const void *p, size_t n)
{
        uint8_t f[LUP_HDR_SIZE + 512];
        struct lup_hdr h = {
                .len = (uint32_t)n, .op = op, .flags = LUP_F_REPLY, .lane = req->lane, .seq = req->seq, .status = status
        };
        lup_hdr_encode(f, &h);
        memcpy(f + LUP_HDR_SIZE, p, n);
        return lup_tls_write_full(t, f, LUP_HDR_SIZE + n);
}

static int srv_read(struct lup_tls *t, struct lup_hdr *h, uint8_t *p, size_t cap)
{
        uint8_t hb[LUP_HDR_SIZE];
        const char *why;
        if (lup_tls_read_full(t, hb, sizeof(hb), 10000) < 0 || lup_hdr_decode(hb, h, &why) < 0 || h->len > cap)
                return -1;
        return lup_tls_read_full(t, p, h->len, 10000);
}

/* The worker's half: a second handshake on the same socket, the ticket. */
static struct lup_tls *srv_worker(struct srv *s, int fd, const uint8_t *ticket, struct lup_tls_ctx **ctx)
{
        uint8_t p[64];
        struct lup_hdr h;
        *ctx = srv_ctx(s, LUP_TLS_KTLS | (s->records ? LUP_TLS_RECORDS : LUP_TLS_READ_AHEAD));
        struct lup_tls *t = *ctx ? lup_tls_new(*ctx, fd, NULL) : NULL;
        if (!t || lup_tls_handshake(t, 10000) < 0) {
                srv_fail(s, "the worker's handshake: %s", t ? lup_tls_error(t) : "no TLS");
                return t;
        }
        if (srv_read(t, &h, p, sizeof(p)) < 0) {
                srv_fail(s, "no HANDOFF frame: %s", lup_tls_error(t));
                return t;
        }
        s->handoff_ok = h.op == LUP_OP_HANDOFF && h.flags == LUP_F_SYNC && h.lane == s->hello_hdr.lane &&
                        h.seq == s->hello_hdr.seq && h.len == LUP_TICKET_SIZE &&
                        memcmp(p, ticket, LUP_TICKET_SIZE) == 0;
        if (!s->handoff_ok)
                srv_fail(s, "bad HANDOFF frame (op %u flags %u len %u)", h.op, h.flags, h.len);
        else if (srv_send(t, LUP_OP_HELLO, 0, &s->hello_hdr, "ok!!", 4) < 0)
                srv_fail(s, "HELLO reply: %s", lup_tls_error(t));
        return t;
}

static void srv_bulk(struct srv *s, int fd, struct lup_tls *t)
{
        struct lupt_link l = { .fd = fd, .tls = t, .io_ms = 5, .stage = malloc(LUPT_RECORD) };
        char why[400];
        (void)bulk_both(&l, 0x5e7e5u, 0xc11e7u, &s->bulk_ok, why, sizeof(why));
        if (!s->bulk_ok)
                srv_fail(s, "bulk: %s", why);
        free(l.stage);
}

static void srv_plain(struct srv *s, int fd)
{
        uint8_t b[512], f[LUP_HDR_SIZE + 64];
        struct lup_hdr h = { .len = 20, .op = LUP_OP_HELLO, .flags = LUP_F_REPLY, .status = 1 };
        if (recv(fd, b, sizeof(b), 0) <= 0)
                srv_fail(s, "the plain server read nothing");
        lup_hdr_encode(f, &h);
        memset(f + LUP_HDR_SIZE, 'x', 20);
        (void)send(fd, f, LUP_HDR_SIZE + 20, MSG_NOSIGNAL);
}

static void srv_conn(struct srv *s, int fd)
{
        uint8_t p[1024], ticket[LUP_TICKET_SIZE];
        struct lup_tls_ctx *sup = srv_ctx(s, 0), *wrk = NULL; /* the supervisor reads nothing ahead */
        struct lup_tls *t = sup ? lup_tls_new(sup, fd, NULL) : NULL;
        const char *why;

        s->handshake_rc = t ? lup_tls_handshake(t, 10000) : -ENOMEM;
        if (s->handshake_rc < 0 || s->mode == SRV_HANDSHAKE)
                goto out;
        if (s->mtls && lup_tls_peer_cn(t, s->peer_cn, sizeof(s->peer_cn)) < 0)
                srv_fail(s, "no client certificate");
        if (srv_read(t, &s->hello_hdr, p, sizeof(p)) < 0 || s->hello_hdr.op != LUP_OP_HELLO ||
            lup_hello_decode(p, s->hello_hdr.len, &s->hello, &why) < 0) {
                srv_fail(s, "no good HELLO");
                goto out;
        }
        s->hello_ok = true;
        if (s->mode == SRV_REFUSE) {
                struct lup_wr w = lup_wr_init(p, sizeof(p));
                lup_refusal_encode(&w, "token refused", 100);
                srv_send(t, LUP_OP_HELLO, REFUSED, &s->hello_hdr, p, w.len);
                goto out;
        }
        if (s->mode == SRV_NO_HANDOFF) {
                srv_send(t, LUP_OP_HELLO, 0, &s->hello_hdr, "ok!!", 4);
                goto out;
        }
        for (unsigned i = 0; i < sizeof(ticket); i++)
                ticket[i] = (uint8_t)(rand() ^ (int)i);
        if (srv_send(t, LUP_OP_HANDOFF, 0, &s->hello_hdr, ticket, sizeof(ticket)) < 0) {
                srv_fail(s, "HANDOFF: %s", lup_tls_error(t));
                goto out;
        }
        lup_tls_free(t, false); /* the socket goes to the worker, no closure alert */
        t = srv_worker(s, fd, ticket, &wrk);
        if (s->fail[0])
                goto out;
        if (s->mode == SRV_RESET) {
                struct linger lg = { .l_onoff = 1, .l_linger = 0 };
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
                goto out;
        }
        if (s->bulk) {
                srv_bulk(s, fd, t);
        } else {
                uint8_t b;
                while (lup_tls_read_full(t, &b, 1, 10000) == 0)
                        ; /* until the client closes */
        }
out:
        lup_tls_free(t, false);
        lup_tls_ctx_free(sup);
        lup_tls_ctx_free(wrk);
}

static void *srv_main(void *arg)
{
        struct srv *s = arg;
        struct pollfd pfd = { .fd = s->lfd, .events = POLLIN };
        int fd = poll(&pfd, 1, 20000) == 1 ? accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC) : -1;

        if (fd < 0) {
                srv_fail(s, "no connection");
                return NULL;
        }
        if (s->mode == SRV_PLAIN)
                srv_plain(s, fd);
        else
                srv_conn(s, fd);
        close(fd);
        return NULL;
}

static void srv_start(struct srv *s, enum srv_mode mode)
{
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t alen = sizeof(a);

        s->mode = mode;
        s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(s->lfd >= 0);
        assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
        assert_int_equal(listen(s->lfd, 4), 0);
        assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&a, &alen), 0);
        s->port = ntohs(a.sin_port);
        assert_int_equal(pthread_create(&s->th, NULL, srv_main, s), 0);
}

static void srv_join(struct srv *s)
{
        pthread_join(s->th, NULL);
        close(s->lfd);
}

/* ---- the client */

struct client {
        struct lupt_config cfg;
        struct lup_endpoint ep;
        struct lupt_link l;
        struct lup_hdr rh;
        uint8_t *rp;
        char err[600];
};

static void client_config(struct client *c, struct srv *s)
{
        char url[64];
        snprintf(url, sizeof(url), "tls://127.0.0.1:%d", s->port);
        assert_int_equal(lup_endpoint_parse(url, &c->ep), 0);
        assert_true(c->ep.tls);
        int rc = lupt_config_load(&c->cfg, url, LUPT_CFG_TOKEN | LUPT_CFG_HANDOFF, c->err, sizeof(c->err));
        if (rc < 0)
                fail_msg("config: %s", c->err);
        assert_non_null(c->cfg.first);
        assert_non_null(c->cfg.second);
}

/* Connects and says HELLO (lane 7, seq 0) as the shim does: 0 or -errno. */
static int client_hello(struct client *c)
{
        uint8_t f[LUP_HDR_SIZE + 512];
        struct lup_hello h = { .proto_version = LUP_PROTO_VERSION, .cuda_version = 13000 };
        size_t n;

        snprintf(h.name, sizeof(h.name), "transport-test");
        if (c->cfg.token_len) {
                h.flags |= LUP_HELLO_AUTH;
                h.auth_len = c->cfg.token_len;
                memcpy(h.auth, c->cfg.token, c->cfg.token_len);
        }
        assert_int_equal(lup_hello_encode(f + LUP_HDR_SIZE, sizeof(f) - LUP_HDR_SIZE, &h, &n), 0);
        struct lup_hdr hh = { .len = (uint32_t)n, .op = LUP_OP_HELLO, .flags = LUP_F_SYNC, .lane = 7 };
        lup_hdr_encode(f, &hh);
        int fd = lupt_connect(&c->cfg, &c->ep, 10000, &c->l, c->err, sizeof(c->err));
        if (fd < 0)
                return fd;
        lupt_set_timeout(&c->l, 10000);
        return lupt_hello(&c->cfg, &c->ep, &c->l, f, LUP_HDR_SIZE + n, 10000, &c->rh, &c->rp, c->err, sizeof(c->err));
}

static void client_end(struct client *c)
{
        free(c->rp);
        lupt_close(&c->l, true);
        lupt_config_free(&c->cfg);
}

static void expect_accepted(struct client *c, int rc)
{
        if (rc < 0)
                fail_msg("HELLO: %d %s", rc, c->err);
        assert_int_equal(c->rh.op, LUP_OP_HELLO);
        assert_int_equal(c->rh.status, 0);
        assert_int_equal(c->rh.len, 4);
        assert_memory_equal(c->rp, "ok!!", 4);
}

/* ---- the tests */

/* The shim's end seals and opens records with lupine's record layer
 * (common/tls_record.c); the server's end is OpenSSL's own, or (records)
 * the record layer as well. */
static void handoff_bulk(bool records)
{
        static const char file[] = "  tok en\t \r\nsecond line\n";
        struct srv s = { .bulk = true, .records = records };
        struct client c = { 0 };
        char why[400];
        bool ok;

        clear_env();
        set_path_env("LUPINE_TLS_CA", "server.pem");
        write_file("token", file, sizeof(file) - 1);
        set_path_env("LUPINE_TOKEN_FILE", "token");
        srv_start(&s, SRV_HANDOFF);
        client_config(&c, &s);
        assert_int_equal(c.cfg.token_len, 8);
        assert_memory_equal(c.cfg.token, "  tok en", 8);
        expect_accepted(&c, client_hello(&c));
        lupt_set_timeout(&c.l, 1); /* writes and reads give up often: retried */
        unsigned stalled = bulk_both(&c.l, 0xc11e7u, 0x5e7e5u, &ok, why, sizeof(why));
        if (!ok)
                fail_msg("client bulk: %s", why);
        assert_true(stalled > 0); /* half-sent records were retried */
        srv_join(&s);
        if (s.fail[0])
                fail_msg("server: %s", s.fail);
        assert_true(s.hello_ok && s.handoff_ok && s.bulk_ok);
        assert_true(s.hello.flags & LUP_HELLO_AUTH);
        assert_int_equal(s.hello.auth_len, 8);
        assert_memory_equal(s.hello.auth, "  tok en", 8);
        client_end(&c);
}

static void test_handoff_bulk(void **state)
{
        (void)state;
        handoff_bulk(false);
}

static void test_handoff_bulk_records(void **state)
{
        (void)state;
        handoff_bulk(true);
}

/* Mutual TLS, and a DNS name (SNI) instead of the address. */
static void test_mtls(void **state)
{
        struct srv s = { .mtls = true };
        struct client c = { 0 };

        clear_env();
        set_path_env("LUPINE_TLS_CA", "server.pem");
        set_path_env("LUPINE_TLS_CERT", "client.pem");
        set_path_env("LUPINE_TLS_KEY", "client.key");
        setenv("LUPINE_TOKEN", "plain-token", 1);
        srv_start(&s, SRV_HANDOFF);
        client_config(&c, &s);
        snprintf(c.ep.host, sizeof(c.ep.host), "lupine.test");
        expect_accepted(&c, client_hello(&c));
        client_end(&c);
        srv_join(&s);
        if (s.fail[0])
                fail_msg("server: %s", s.fail);
        assert_true(s.handoff_ok);
        assert_string_equal(s.peer_cn, "lupine-client");
        assert_int_equal(s.hello.auth_len, 11);
        assert_memory_equal(s.hello.auth, "plain-token", 11);
}

/* A failure before any HELLO: rc < 0 and the reason, naming the endpoint. */
static void expect_refused_handshake(enum srv_mode mode, const char *ca, const char *host, const char *want,
                                     bool port_hint)
{
        struct srv s = { 0 };
        struct client c = { 0 };
        char ep[64];

        clear_env();
        set_path_env("LUPINE_TLS_CA", ca);
        srv_start(&s, mode);
        client_config(&c, &s);
        if (host)
                snprintf(c.ep.host, sizeof(c.ep.host), "%s", host);
        assert_true(client_hello(&c) < 0);
        snprintf(ep, sizeof(ep), "tls://127.0.0.1:%d: ", s.port);
        if (!strstr(c.err, ep) || !strstr(c.err, want) || (strstr(c.err, "is it a TLS port?") != NULL) != port_hint)
                fail_msg("unexpected error: %s", c.err);
        assert_int_equal(c.l.fd, -1);
        client_end(&c);
        srv_join(&s);
        assert_true(mode == SRV_PLAIN || s.handshake_rc < 0);
}

static void test_wrong_host(void **state)
{
        expect_refused_handshake(SRV_HANDSHAKE, "server.pem", "wrong.test", "hostname mismatch", false);
        expect_refused_handshake(SRV_HANDSHAKE, "server.pem", "127.0.0.2", "IP address mismatch", false);
}

static void test_untrusted(void **state)
{
        expect_refused_handshake(SRV_HANDSHAKE, "other.pem", NULL, "certificate verification failed", false);
}

static void test_plain_server(void **state)
{
        expect_refused_handshake(SRV_PLAIN, "server.pem", NULL, "TLS handshake: ", true);
}

static void test_refusal(void **state)
{
        struct srv s = { 0 };
        struct client c = { 0 };
        const char *msg;
        size_t n;

        clear_env();
        set_path_env("LUPINE_TLS_CA", "server.pem");
        srv_start(&s, SRV_REFUSE);
        client_config(&c, &s);
        assert_int_equal(client_hello(&c), 0);
        assert_int_equal(c.rh.op, LUP_OP_HELLO);
        assert_int_equal(c.rh.status, REFUSED);
        lup_refusal_decode(c.rp, c.rh.len, 100, &msg, &n);
        assert_int_equal(n, 13);
        assert_memory_equal(msg, "token refused", 13);
        client_end(&c);
        srv_join(&s);
        assert_false(s.hello.flags & LUP_HELLO_AUTH);
}

static void test_no_handoff(void **state)
{
        struct srv s = { 0 };
        struct client c = { 0 };

        clear_env();
        set_path_env("LUPINE_TLS_CA", "server.pem");
        srv_start(&s, SRV_NO_HANDOFF);
        client_config(&c, &s);
        assert_int_equal(client_hello(&c), -EPROTO);
        if (!strstr(c.err, "does not speak lupine's TLS protocol"))
                fail_msg("unexpected error: %s", c.err);
        client_end(&c);
        srv_join(&s);
}

/* The server resets the connection: writes fail, and SIGPIPE (default
 * action: death) is neither delivered nor left pending. */
static void test_reset_no_sigpipe(void **state)
{
        struct srv s = { 0 };
        struct client c = { 0 };
        struct sigaction sa;
        sigset_t pend;
        int rc = 0;

        assert_int_equal(sigaction(SIGPIPE, NULL, &sa), 0);
        assert_true(sa.sa_handler == SIG_DFL);
        clear_env();
        set_path_env("LUPINE_TLS_CA", "server.pem");
        srv_start(&s, SRV_RESET);
        client_config(&c, &s);
        expect_accepted(&c, client_hello(&c));
        srv_join(&s);
        uint8_t *buf = calloc(1, 1 << 20);
        for (int i = 0; i < 200 && rc == 0; i++)
                rc = lupt_write_full(&c.l, buf, 1 << 20);
        assert_true(rc < 0);
        /* the first failure is ECONNRESET; the writes after it get EPIPE */
        for (int i = 0; i < 3; i++)
                assert_true(lupt_write_full(&c.l, buf, 1 << 20) < 0);
        free(buf);
        assert_int_equal(sigpending(&pend), 0);
        assert_false(sigismember(&pend, SIGPIPE));
        client_end(&c);
}

static void expect_config_error(const char *want)
{
        struct lupt_config cfg;
        char err[600];
        assert_true(lupt_config_load(&cfg, "tls://127.0.0.1:1", LUPT_CFG_TOKEN | LUPT_CFG_HANDOFF, err, sizeof(err)) <
                    0);
        if (!strstr(err, want) || strstr(err, "sekrit"))
                fail_msg("unexpected error: %s", err);
        assert_null(cfg.first);
}

static void test_config(void **state)
{
        struct lupt_config cfg;
        char err[600], big[300];

        clear_env();
        setenv("LUPINE_TLS_CERT", "/x.pem", 1);
        expect_config_error("LUPINE_TLS_CERT is set without LUPINE_TLS_KEY");
        clear_env();
        setenv("LUPINE_TLS_KEY", "/x.key", 1);
        expect_config_error("LUPINE_TLS_KEY is set without LUPINE_TLS_CERT");
        clear_env();
        setenv("LUPINE_TOKEN", "sekrit", 1);
        set_path_env("LUPINE_TOKEN_FILE", "token");
        expect_config_error("LUPINE_TOKEN and LUPINE_TOKEN_FILE are both set");
        clear_env();
        write_file("empty", "\nsekrit\n", 8);
        set_path_env("LUPINE_TOKEN_FILE", "empty");
        expect_config_error("its first line is empty");
        memset(big, 's', sizeof(big));
        memcpy(big, "sekrit", 6);
        write_file("big", big, LUP_MAX_AUTH + 1);
        set_path_env("LUPINE_TOKEN_FILE", "big");
        expect_config_error("longer than 256 bytes");
        write_file("max", big, LUP_MAX_AUTH);
        set_path_env("LUPINE_TOKEN_FILE", "max");
        assert_int_equal(lupt_config_load(&cfg, "127.0.0.1:1", LUPT_CFG_TOKEN, err, sizeof(err)), 0);
        assert_int_equal(cfg.token_len, LUP_MAX_AUTH);
        assert_null(cfg.first); /* no tls:// endpoint: no TLS set up */
        lupt_config_free(&cfg);
        setenv("LUPINE_TOKEN_FILE", "/nonexistent/token", 1);
        expect_config_error("cannot read LUPINE_TOKEN_FILE=/nonexistent/token");
        clear_env();
        setenv("LUPINE_TLS_CA", "/nonexistent/ca.pem", 1);
        expect_config_error("cannot load the CA file /nonexistent/ca.pem");
        /* NVML reads no token */
        clear_env();
        setenv("LUPINE_TOKEN", "sekrit", 1);
        set_path_env("LUPINE_TLS_CA", "server.pem");
        assert_int_equal(lupt_config_load(&cfg, "a:1,tls://127.0.0.1:1", 0, err, sizeof(err)), 0);
        assert_int_equal(cfg.token_len, 0);
        assert_non_null(cfg.first);
        assert_null(cfg.second);
        lupt_config_free(&cfg);
}

/* The plain path: a socketpair, both ways at once, 1 ms socket timeouts. */
static void test_plain_bulk(void **state)
{
        int sv[2];
        bool ok1, ok2;
        char why1[400], why2[400];

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        struct lupt_link a = { .fd = sv[0] }, b = { .fd = sv[1] };
        lupt_set_timeout(&a, 1);
        lupt_set_timeout(&b, 1);
        struct bulk aw = { .l = &a, .seed = 1 }, ar = { .l = &a, .seed = 2 };
        struct bulk bw = { .l = &b, .seed = 2 }, br = { .l = &b, .seed = 1 };
        pthread_t t[4];
        assert_int_equal(pthread_create(&t[0], NULL, bulk_write, &aw), 0);
        assert_int_equal(pthread_create(&t[1], NULL, bulk_read, &ar), 0);
        assert_int_equal(pthread_create(&t[2], NULL, bulk_write, &bw), 0);
        assert_int_equal(pthread_create(&t[3], NULL, bulk_read, &br), 0);
        for (int i = 0; i < 4; i++)
                pthread_join(t[i], NULL);
        ok1 = aw.ok && br.ok;
        ok2 = bw.ok && ar.ok;
        snprintf(why1, sizeof(why1), "%s %s", aw.why, br.why);
        snprintf(why2, sizeof(why2), "%s %s", bw.why, ar.why);
        if (!ok1 || !ok2)
                fail_msg("plain bulk: %s / %s", why1, why2);
        assert_false(lupt_readable(&a));
        lupt_close(&a, true);
        assert_true(lupt_readable(&b)); /* the end of the stream */
        uint8_t x;
        assert_int_equal(lupt_recv_nb(&b, &x, 1), 0);
        lupt_close(&b, true);
}

static int setup(void **state)
{
        snprintf(dir, sizeof(dir), "/tmp/lupine-test-transport-XXXXXX");
        if (!mkdtemp(dir))
                return -1;
        if (test_make_cert(dir, "server", "lupine-server", "IP:127.0.0.1,DNS:lupine.test") < 0 ||
            test_make_cert(dir, "other", "lupine-server", "IP:127.0.0.1,DNS:lupine.test") < 0 ||
            test_make_cert(dir, "client", "lupine-client", NULL) < 0)
                return -1;
        return 0;
}

static int teardown(void **state)
{
        static const char *files[] = { "server.pem", "server.key", "other.pem", "other.key", "client.pem",
                                       "client.key", "token",      "empty",     "big",       "max" };
        char p[128];
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
                path_of(p, sizeof(p), files[i]);
                unlink(p);
        }
        rmdir(dir);
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_handoff_bulk),
                cmocka_unit_test(test_handoff_bulk_records),
                cmocka_unit_test(test_mtls),
                cmocka_unit_test(test_wrong_host),
                cmocka_unit_test(test_untrusted),
                cmocka_unit_test(test_plain_server),
                cmocka_unit_test(test_refusal),
                cmocka_unit_test(test_no_handoff),
                cmocka_unit_test(test_reset_no_sigpipe),
                cmocka_unit_test(test_config),
                cmocka_unit_test(test_plain_bulk),
        };
        return cmocka_run_group_tests_name("transport", tests, setup, teardown);
}
