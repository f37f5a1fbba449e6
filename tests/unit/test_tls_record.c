/* SPDX-License-Identifier: MIT */
/*
 * lupine's TLS 1.3 record layer (common/tls_record.c) against OpenSSL's
 * own, each way, on a socketpair: the records one seals the other must
 * open (sizes around the 16 KiB record limit, and a megabyte), a
 * close_notify is a clean end of stream, and a record that was tampered
 * with, or is not application data, fails with a reason and keeps failing.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/ssl.h>

#include "tls.h"
#include "tls_certs.h"

static char dir[64];
static const size_t sizes[] = { 1, 100, 16383, 16384, 16385, 40000, 1u << 20 };

static uint8_t pattern(size_t msg, size_t i)
{
        return (uint8_t)((i * 131u) ^ (msg * 7u) ^ (i >> 9));
}

struct end {
        struct lup_tls_ctx *ctx;
        struct lup_tls *t;
        int fd;
        int handshake_rc;
};

static void *handshake(void *arg)
{
        struct end *e = arg;
        e->handshake_rc = lup_tls_handshake(e->t, 10000);
        return NULL;
}

/* A connected pair: srv with server flags sf, cli with client flags cf. */
static void pair(struct end *srv, unsigned sf, struct end *cli, unsigned cf)
{
        char cert[128], key[128], err[300];
        int sv[2];
        pthread_t th;

        snprintf(cert, sizeof(cert), "%s/server.pem", dir);
        snprintf(key, sizeof(key), "%s/server.key", dir);
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        if (lup_tls_server_ctx_new(cert, key, NULL, sf, &srv->ctx, err, sizeof(err)) < 0 ||
            lup_tls_client_ctx_new(cert, NULL, NULL, cf, &cli->ctx, err, sizeof(err)) < 0)
                fail_msg("contexts: %s", err);
        srv->fd = sv[0];
        cli->fd = sv[1];
        srv->t = lup_tls_new(srv->ctx, srv->fd, NULL);
        cli->t = lup_tls_new(cli->ctx, cli->fd, "127.0.0.1");
        assert_non_null(srv->t);
        assert_non_null(cli->t);
        assert_int_equal(pthread_create(&th, NULL, handshake, srv), 0);
        handshake(cli);
        pthread_join(th, NULL);
        if (srv->handshake_rc < 0 || cli->handshake_rc < 0)
                fail_msg("handshake: server %s, client %s", lup_tls_error(srv->t), lup_tls_error(cli->t));
        assert_string_equal(lup_tls_carrier(srv->t), sf & LUP_TLS_RECORDS ? "lupine's record layer" : "OpenSSL");
        assert_string_equal(lup_tls_carrier(cli->t), cf & LUP_TLS_RECORDS ? "lupine's record layer" : "OpenSSL");
}

static void end_free(struct end *e, bool close_notify)
{
        lup_tls_free(e->t, close_notify);
        lup_tls_ctx_free(e->ctx);
        if (e->fd >= 0)
                close(e->fd);
        e->t = NULL;
        e->ctx = NULL;
        e->fd = -1;
}

struct flow {
        struct lup_tls *t;
        bool echo; /* read each message, then send it back */
        char fail[200];
};

/* Sends every message (echo: reads it first and checks it). */
static void *flow_run(void *arg)
{
        struct flow *f = arg;
        uint8_t *buf = malloc(1u << 20);

        assert_non_null(buf);
        for (size_t m = 0; m < sizeof(sizes) / sizeof(sizes[0]) && !f->fail[0]; m++) {
                size_t n = sizes[m];
                if (f->echo) {
                        int rc = lup_tls_read_full(f->t, buf, n, 10000);
                        if (rc < 0) {
                                snprintf(f->fail, sizeof(f->fail), "read %zu: %s", n, lup_tls_error(f->t));
                                break;
                        }
                        for (size_t i = 0; i < n; i++)
                                if (buf[i] != pattern(m, i)) {
                                        snprintf(f->fail, sizeof(f->fail), "message %zu byte %zu is wrong", m, i);
                                        break;
                                }
                } else {
                        for (size_t i = 0; i < n; i++)
                                buf[i] = pattern(m, i);
                }
                if (!f->fail[0] && lup_tls_write_full(f->t, buf, n) < 0)
                        snprintf(f->fail, sizeof(f->fail), "write %zu: %s", n, lup_tls_error(f->t));
        }
        free(buf);
        return NULL;
}

/* a sends every message, b echoes it, a reads the echo and checks it;
 * then a ends the stream with close_notify and b sees a clean end. */
static void exchange(struct end *a, struct end *b)
{
        struct flow fa = { .t = a->t }, fb = { .t = b->t, .echo = true };
        pthread_t th;
        uint8_t *buf = malloc(1u << 20), byte;

        assert_non_null(buf);
        assert_int_equal(pthread_create(&th, NULL, flow_run, &fb), 0);
        flow_run(&fa);
        for (size_t m = 0; m < sizeof(sizes) / sizeof(sizes[0]) && !fa.fail[0]; m++) {
                if (lup_tls_read_full(a->t, buf, sizes[m], 10000) < 0)
                        fail_msg("echo %zu: %s", sizes[m], lup_tls_error(a->t));
                for (size_t i = 0; i < sizes[m]; i++)
                        if (buf[i] != pattern(m, i))
                                fail_msg("echo of message %zu: byte %zu is wrong", m, i);
        }
        pthread_join(th, NULL);
        if (fa.fail[0] || fb.fail[0])
                fail_msg("%s %s", fa.fail, fb.fail);
        lup_tls_free(a->t, true); /* close_notify */
        a->t = NULL;
        assert_int_equal(lup_tls_read_full(b->t, &byte, 1, 10000), -ECONNRESET);
        free(buf);
}

/* A pair with these flags; the client (or, server_first, the server)
 * sends and ends the stream. */
static void round_trip(unsigned sf, unsigned cf, bool server_first)
{
        struct end s, c;

        pair(&s, sf, &c, cf);
        if (server_first)
                exchange(&s, &c);
        else
                exchange(&c, &s);
        end_free(&s, false);
        end_free(&c, false);
}

static void test_records_server_openssl_client(void **state)
{
        (void)state;
        round_trip(LUP_TLS_RECORDS, LUP_TLS_READ_AHEAD, false);
}

static void test_records_client_openssl_server(void **state)
{
        (void)state;
        round_trip(LUP_TLS_READ_AHEAD, LUP_TLS_RECORDS, false);
}

static void test_records_both(void **state)
{
        (void)state;
        round_trip(LUP_TLS_RECORDS, LUP_TLS_RECORDS, true);
}

/* Raw bytes where a record belongs: the reason, then the same failure on
 * every later read. */
static void bad_record(const uint8_t *rec, size_t n, const char *reason)
{
        struct end s, c;
        uint8_t b[64];

        pair(&s, LUP_TLS_RECORDS, &c, 0);
        assert_int_equal(send(c.fd, rec, n, MSG_NOSIGNAL), (ssize_t)n);
        assert_int_equal(lup_tls_read_full(s.t, b, 1, 10000), -EPROTO);
        if (!strstr(lup_tls_error(s.t), reason))
                fail_msg("error \"%s\" does not say \"%s\"", lup_tls_error(s.t), reason);
        assert_int_equal(lup_tls_recv_nb(s.t, b, sizeof(b)), -EPROTO);
        end_free(&s, false);
        end_free(&c, false);
}

static void test_tampered_record(void **state)
{
        uint8_t rec[5 + 40] = { 23, 3, 3, 0, 40 };

        (void)state;
        for (size_t i = 5; i < sizeof(rec); i++)
                rec[i] = (uint8_t)(i * 37);
        bad_record(rec, sizeof(rec), "bad record MAC");
}

static void test_not_application_data(void **state)
{
        const uint8_t rec[5 + 20] = { 22, 3, 3, 0, 20 };

        (void)state;
        bad_record(rec, sizeof(rec), "other than application data");
}

static void test_oversized_record(void **state)
{
        const uint8_t hdr[5] = { 23, 3, 3, 0x50, 0x00 }; /* 20480 > 16384 + 256 */

        (void)state;
        bad_record(hdr, sizeof(hdr), "bad record header");
}

/* A peer that pads its records (OpenSSL's block padding, which lupine's
 * peers do not use): every byte still arrives in order, in batches of
 * records whose contents are shorter than their room. */
struct padded {
        int fd;
        bool ok;
        char why[200];
};

static void *padded_client(void *arg)
{
        struct padded *p = arg;
        char ca[128];
        SSL_CTX *c = SSL_CTX_new(TLS_client_method());
        SSL *ssl = NULL;
        uint8_t *buf = malloc(1u << 20);

        snprintf(ca, sizeof(ca), "%s/server.pem", dir);
        if (!c || !buf || !SSL_CTX_set_min_proto_version(c, TLS1_3_VERSION) ||
            SSL_CTX_load_verify_locations(c, ca, NULL) != 1 || !SSL_CTX_set_block_padding(c, 1000) ||
            !(ssl = SSL_new(c)) || SSL_set_fd(ssl, p->fd) != 1 || SSL_connect(ssl) != 1) {
                snprintf(p->why, sizeof(p->why), "the padding client could not connect");
                goto out;
        }
        for (size_t m = 0; m < sizeof(sizes) / sizeof(sizes[0]); m++) {
                for (size_t i = 0; i < sizes[m]; i++)
                        buf[i] = pattern(m, i);
                size_t done = 0;
                if (SSL_write_ex(ssl, buf, sizes[m], &done) != 1 || done != sizes[m]) {
                        snprintf(p->why, sizeof(p->why), "the padding client could not write %zu", sizes[m]);
                        goto out;
                }
        }
        p->ok = true;
out:
        SSL_free(ssl);
        SSL_CTX_free(c);
        free(buf);
        return NULL;
}

static void test_padded_records(void **state)
{
        struct end s = { .fd = -1 };
        struct padded p = { 0 };
        char cert[128], key[128], err[300];
        uint8_t *buf = malloc(1u << 20);
        pthread_t th;
        int sv[2];

        (void)state;
        assert_non_null(buf);
        snprintf(cert, sizeof(cert), "%s/server.pem", dir);
        snprintf(key, sizeof(key), "%s/server.key", dir);
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        if (lup_tls_server_ctx_new(cert, key, NULL, LUP_TLS_RECORDS, &s.ctx, err, sizeof(err)) < 0)
                fail_msg("context: %s", err);
        s.fd = sv[0];
        p.fd = sv[1];
        s.t = lup_tls_new(s.ctx, s.fd, NULL);
        assert_non_null(s.t);
        assert_int_equal(pthread_create(&th, NULL, padded_client, &p), 0);
        if (lup_tls_handshake(s.t, 10000) < 0)
                fail_msg("handshake: %s", lup_tls_error(s.t));
        for (size_t m = 0; m < sizeof(sizes) / sizeof(sizes[0]); m++) {
                if (lup_tls_read_full(s.t, buf, sizes[m], 10000) < 0)
                        fail_msg("message %zu: %s", m, lup_tls_error(s.t));
                for (size_t i = 0; i < sizes[m]; i++)
                        if (buf[i] != pattern(m, i))
                                fail_msg("padded message %zu: byte %zu is wrong", m, i);
        }
        pthread_join(th, NULL);
        if (!p.ok)
                fail_msg("%s", p.why);
        close(p.fd);
        end_free(&s, false);
        free(buf);
}

static int setup(void **state)
{
        (void)state;
        snprintf(dir, sizeof(dir), "/tmp/lupine-tlsrec-XXXXXX");
        if (!mkdtemp(dir) || test_make_cert(dir, "server", "lupine test", "IP:127.0.0.1") < 0)
                return -1;
        return 0;
}

static int teardown(void **state)
{
        char cmd[128];
        (void)state;
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_records_server_openssl_client),
                cmocka_unit_test(test_records_client_openssl_server),
                cmocka_unit_test(test_records_both),
                cmocka_unit_test(test_padded_records),
                cmocka_unit_test(test_tampered_record),
                cmocka_unit_test(test_not_application_data),
                cmocka_unit_test(test_oversized_record),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
