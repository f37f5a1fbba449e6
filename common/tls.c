/* SPDX-License-Identifier: MIT */
/*
 * TLS 1.3 over OpenSSL 3 (common/tls.h). The socket is non-blocking; each
 * OpenSSL call holds t->lock, and waiting for the socket happens in poll(2)
 * with the lock released, so that a reader blocked on an idle connection
 * never stops a writer (the shim reads in one thread and writes in others).
 */
#define LUP_LOG_CAT LUP_LOGC_TLS
#include "tls.h"
#include "tls_record.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

struct lup_tls_ctx {
        SSL_CTX *ctx;
        unsigned flags;
        bool server;
};

struct lup_tls {
        SSL *ssl;
        int fd;
        short want;           /* POLLIN/POLLOUT after -EAGAIN */
        bool records;         /* LUP_TLS_RECORDS: rec takes over after the handshake */
        int write_timeout_ms; /* a write that moves nothing for this long fails; < 0: none */
        pthread_mutex_t lock; /* OpenSSL calls; with rec, reading */
        /* After the handshake with LUP_TLS_RECORDS: lupine's record layer
         * (tls_record.c), whose writing side has its own lock and error. */
        struct lup_tls_rec *rec;
        pthread_mutex_t wlock;
        struct lup_tls_secret secret[2]; /* the client's, the server's (from the key log) */
        char err[256], werr[256];
};

/* OpenSSL's queued errors, oldest first, joined into err. */
static void take_errors(char *err, size_t cap, const char *what)
{
        unsigned long e;
        size_t len;

        snprintf(err, cap, "%s", what);
        while ((e = ERR_get_error()) != 0) {
                len = strlen(err);
                if (len + 3 >= cap)
                        continue;
                snprintf(err + len, cap - len, ": ");
                ERR_error_string_n(e, err + len + 2, cap - len - 2);
        }
}

/* OpenSSL's key log line of a traffic secret, "LABEL <client random hex>
 * <secret hex>": the application traffic secrets go to the record layer. */
static void keylog(const SSL *ssl, const char *line)
{
        static const char *const labels[2] = { "CLIENT_TRAFFIC_SECRET_0 ", "SERVER_TRAFFIC_SECRET_0 " };
        struct lup_tls *t = SSL_get_app_data(ssl);

        for (int i = 0; t && i < 2; i++) {
                size_t ll = strlen(labels[i]);
                if (strncmp(line, labels[i], ll) != 0)
                        continue;
                const char *hex = strchr(line + ll, ' ');
                struct lup_tls_secret *sec = &t->secret[i];
                sec->len = 0;
                for (hex = hex ? hex + 1 : ""; isxdigit((unsigned char)hex[0]) && isxdigit((unsigned char)hex[1]) &&
                                               sec->len < sizeof(sec->secret);
                     hex += 2) {
                        char b[3] = { hex[0], hex[1], 0 };
                        sec->secret[sec->len++] = (uint8_t)strtoul(b, NULL, 16);
                }
        }
}

static int ctx_common(SSL_CTX *c, unsigned flags)
{
        if (!SSL_CTX_set_min_proto_version(c, TLS1_3_VERSION) || !SSL_CTX_set_max_proto_version(c, TLS1_3_VERSION))
                return -1;
        /* AES-128-GCM first: as safe as AES-256 for this use and a third
         * cheaper per byte, which bulk copies feel (the server's order wins). */
        if (SSL_CTX_set_ciphersuites(c, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256") !=
            1)
                return -1;
        /* A peer gone without close_notify (every restart) is an end of
         * stream, not a protocol error: frames carry their length, so a
         * cut frame is still seen as one. */
        SSL_CTX_set_options(c, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_IGNORE_UNEXPECTED_EOF);
        /* No session tickets: nothing is resumed, and a ticket sent after
         * the supervisor's handshake would be read by the worker's. */
        (void)SSL_CTX_set_num_tickets(c, 0);
        SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
        SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        SSL_CTX_clear_mode(c, SSL_MODE_AUTO_RETRY);
        if (flags & LUP_TLS_KTLS)
                SSL_CTX_set_options(c, SSL_OP_ENABLE_KTLS);
        /* With the record layer, no read ahead: it must find every byte
         * after the handshake on the socket, none in OpenSSL's buffer. */
        if (flags & LUP_TLS_RECORDS)
                SSL_CTX_set_keylog_callback(c, keylog);
        else if (flags & LUP_TLS_READ_AHEAD) {
                SSL_CTX_set_read_ahead(c, 1);
                SSL_CTX_set_default_read_buffer_len(c, 64 * 1024);
        }
        return 0;
}

int lup_tls_server_ctx_new(const char *cert, const char *key, const char *client_ca, unsigned flags,
                           struct lup_tls_ctx **ret, char *err, size_t errcap)
{
        struct lup_tls_ctx *t = calloc(1, sizeof(*t));
        char what[512];

        if (!t)
                return -ENOMEM;
        t->server = true;
        t->flags = flags;
        t->ctx = SSL_CTX_new(TLS_server_method());
        if (!t->ctx || ctx_common(t->ctx, flags) < 0) {
                take_errors(err, errcap, "cannot set up TLS 1.3");
                goto fail;
        }
        if (SSL_CTX_use_certificate_chain_file(t->ctx, cert) != 1) {
                snprintf(what, sizeof(what), "cannot load the certificate %s", cert);
                take_errors(err, errcap, what);
                goto fail;
        }
        if (SSL_CTX_use_PrivateKey_file(t->ctx, key, SSL_FILETYPE_PEM) != 1) {
                snprintf(what, sizeof(what), "cannot load the private key %s", key);
                take_errors(err, errcap, what);
                goto fail;
        }
        if (SSL_CTX_check_private_key(t->ctx) != 1) {
                snprintf(what, sizeof(what), "the key %s does not match the certificate %s", key, cert);
                take_errors(err, errcap, what);
                goto fail;
        }
        if (client_ca && client_ca[0]) {
                STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(client_ca);
                if (SSL_CTX_load_verify_locations(t->ctx, client_ca, NULL) != 1 || !names) {
                        snprintf(what, sizeof(what), "cannot load the client CA file %s", client_ca);
                        take_errors(err, errcap, what);
                        sk_X509_NAME_pop_free(names, X509_NAME_free);
                        goto fail;
                }
                SSL_CTX_set_client_CA_list(t->ctx, names);
                SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
        }
        *ret = t;
        return 0;
fail:
        lup_tls_ctx_free(t);
        return -EINVAL;
}

int lup_tls_client_ctx_new(const char *ca, const char *cert, const char *key, unsigned flags, struct lup_tls_ctx **ret,
                           char *err, size_t errcap)
{
        struct lup_tls_ctx *t = calloc(1, sizeof(*t));
        char what[512];

        if (!t)
                return -ENOMEM;
        t->flags = flags;
        t->ctx = SSL_CTX_new(TLS_client_method());
        if (!t->ctx || ctx_common(t->ctx, flags) < 0) {
                take_errors(err, errcap, "cannot set up TLS 1.3");
                goto fail;
        }
        if (ca && ca[0]) {
                if (SSL_CTX_load_verify_locations(t->ctx, ca, NULL) != 1) {
                        snprintf(what, sizeof(what), "cannot load the CA file %s", ca);
                        take_errors(err, errcap, what);
                        goto fail;
                }
        } else if (SSL_CTX_set_default_verify_paths(t->ctx) != 1) {
                take_errors(err, errcap, "cannot load the system's trusted certificates");
                goto fail;
        }
        if ((cert && cert[0]) != (key && key[0])) {
                snprintf(err, errcap, "a client certificate needs both its certificate and its key");
                goto fail;
        }
        if (cert && cert[0]) {
                if (SSL_CTX_use_certificate_chain_file(t->ctx, cert) != 1) {
                        snprintf(what, sizeof(what), "cannot load the client certificate %s", cert);
                        take_errors(err, errcap, what);
                        goto fail;
                }
                if (SSL_CTX_use_PrivateKey_file(t->ctx, key, SSL_FILETYPE_PEM) != 1 ||
                    SSL_CTX_check_private_key(t->ctx) != 1) {
                        snprintf(what, sizeof(what), "cannot use the client key %s", key);
                        take_errors(err, errcap, what);
                        goto fail;
                }
        }
        SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
        *ret = t;
        return 0;
fail:
        lup_tls_ctx_free(t);
        return -EINVAL;
}

void lup_tls_ctx_free(struct lup_tls_ctx *ctx)
{
        if (!ctx)
                return;
        SSL_CTX_free(ctx->ctx);
        free(ctx);
}

/* A numeric host is checked against the certificate's IP addresses, a name
 * against its DNS names (and sent as SNI). */
static int set_peer_host(SSL *ssl, const char *host)
{
        X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
        unsigned char buf[16];

        X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        if (inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1)
                return X509_VERIFY_PARAM_set1_ip_asc(vp, host) == 1 ? 0 : -1;
        if (SSL_set_tlsext_host_name(ssl, host) != 1)
                return -1;
        return SSL_set1_host(ssl, host) == 1 ? 0 : -1;
}

struct lup_tls *lup_tls_new(struct lup_tls_ctx *ctx, int fd, const char *host)
{
        struct lup_tls *t = calloc(1, sizeof(*t));
        int fl = fcntl(fd, F_GETFL);

        if (!t)
                return NULL;
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
                goto fail;
        t->fd = fd;
        t->write_timeout_ms = -1;
        pthread_mutex_init(&t->lock, NULL);
        pthread_mutex_init(&t->wlock, NULL);
        t->ssl = SSL_new(ctx->ctx);
        if (!t->ssl || SSL_set_fd(t->ssl, fd) != 1)
                goto fail_ssl;
        SSL_set_app_data(t->ssl, t);
        t->records = (ctx->flags & LUP_TLS_RECORDS) != 0;
        if (ctx->server) {
                SSL_set_accept_state(t->ssl);
        } else {
                SSL_set_connect_state(t->ssl);
                if (host && set_peer_host(t->ssl, host) < 0)
                        goto fail_ssl;
        }
        return t;
fail_ssl:
        SSL_free(t->ssl);
        pthread_mutex_destroy(&t->lock);
        pthread_mutex_destroy(&t->wlock);
fail:
        free(t);
        ERR_clear_error();
        return NULL;
}

void lup_tls_free(struct lup_tls *t, bool close_notify)
{
        if (!t)
                return;
        if (t->rec && close_notify)
                lup_tls_rec_close_notify(t->rec);
        if (close_notify && !t->rec)
                (void)SSL_shutdown(t->ssl); /* one attempt; the socket is non-blocking */
        else                                /* no alert, or rec sent it: OpenSSL's keys are stale once rec took over */
                SSL_set_quiet_shutdown(t->ssl, 1);
        lup_tls_rec_free(t->rec);
        SSL_free(t->ssl);
        ERR_clear_error();
        OPENSSL_cleanse(t->secret, sizeof(t->secret));
        pthread_mutex_destroy(&t->lock);
        pthread_mutex_destroy(&t->wlock);
        free(t);
}

/* Turns an OpenSSL result r of a call that failed into -errno, with
 * t->want or t->err set. Called with t->lock held. */
static int ssl_fail(struct lup_tls *t, int r, const char *what)
{
        int e = SSL_get_error(t->ssl, r);
        long vr;

        switch (e) {
        case SSL_ERROR_WANT_READ:
                t->want = POLLIN;
                return -EAGAIN;
        case SSL_ERROR_WANT_WRITE:
                t->want = POLLOUT;
                return -EAGAIN;
        case SSL_ERROR_ZERO_RETURN:
                snprintf(t->err, sizeof(t->err), "the peer closed the TLS stream");
                return -ECONNRESET;
        case SSL_ERROR_SYSCALL:
                if (errno == EAGAIN || errno == EINTR) {
                        t->want = POLLIN;
                        return -EAGAIN;
                }
                if (ERR_peek_error() == 0) {
                        int saved = errno;
                        snprintf(t->err, sizeof(t->err), "%s: %s", what,
                                 saved ? strerror(saved) : "the connection was closed");
                        ERR_clear_error();
                        return saved ? -saved : -ECONNRESET;
                }
                /* OpenSSL queued the reason */
                __attribute__((fallthrough));
        default:
                vr = SSL_get_verify_result(t->ssl);
                if (vr != X509_V_OK) {
                        snprintf(t->err, sizeof(t->err), "%s: certificate verification failed: %s", what,
                                 X509_verify_cert_error_string(vr));
                        ERR_clear_error();
                } else {
                        take_errors(t->err, sizeof(t->err), what);
                }
                return -EPROTO;
        }
}

static const EVP_CIPHER *suite_aead(const SSL_CIPHER *c)
{
        switch (c ? SSL_CIPHER_get_id(c) & 0xffff : 0) {
        case 0x1301:
                return EVP_aes_128_gcm();
        case 0x1302:
                return EVP_aes_256_gcm();
        case 0x1303:
                return EVP_chacha20_poly1305();
        default:
                return NULL;
        }
}

/* The handshake is done: lupine's record layer takes the connection over
 * (LUP_TLS_RECORDS), unless the kernel carries the records. Both sides'
 * first application records are still to come, so both sequence numbers
 * start at 0; no byte after the handshake may sit in OpenSSL's buffer,
 * which is why such connections do not read ahead. t->lock held. */
static int take_over(struct lup_tls *t)
{
        const SSL_CIPHER *c = SSL_get_current_cipher(t->ssl);
        const EVP_CIPHER *aead = suite_aead(c);
        const EVP_MD *md = c ? SSL_CIPHER_get_handshake_digest(c) : NULL;
        const char *why = NULL;
        bool server = SSL_is_server(t->ssl);
        int rc = 0;

        if (BIO_get_ktls_send(SSL_get_wbio(t->ssl)) > 0 || BIO_get_ktls_recv(SSL_get_rbio(t->ssl)) > 0)
                return 0;
        if (!aead || !md)
                why = "an unknown cipher suite";
        else if (SSL_has_pending(t->ssl))
                why = "bytes after the handshake were read already";
        for (int i = 0; !why && i < 2; i++) {
                t->secret[i].cipher = aead;
                t->secret[i].md = md;
                if (t->secret[i].len != (size_t)EVP_MD_get_size(md))
                        why = "no traffic secret from OpenSSL";
        }
        if (!why && (rc = lup_tls_rec_new(t->fd, &t->secret[server ? 0 : 1], &t->secret[server ? 1 : 0], &t->rec)) < 0)
                why = rc == -ENOMEM ? "out of memory" : "the keys could not be set up";
        OPENSSL_cleanse(t->secret, sizeof(t->secret));
        if (!why)
                return 0;
        snprintf(t->err, sizeof(t->err), "TLS handshake: cannot take the records over: %s", why);
        return rc == -ENOMEM ? rc : -EPROTO;
}

int lup_tls_handshake_step(struct lup_tls *t)
{
        int r, rc = 0;

        pthread_mutex_lock(&t->lock);
        ERR_clear_error();
        r = SSL_do_handshake(t->ssl);
        if (r != 1)
                rc = ssl_fail(t, r, "TLS handshake");
        else if (t->records && !t->rec)
                rc = take_over(t);
        pthread_mutex_unlock(&t->lock);
        return rc;
}

short lup_tls_want(const struct lup_tls *t)
{
        return t->want ? t->want : POLLIN;
}

static int64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for events (what this thread's last call wanted: a reader and a
 * writer may want different ones) until the deadline (-1: none): 0,
 * -ETIMEDOUT, -errno. */
static int wait_want(struct lup_tls *t, short events, int64_t deadline)
{
        for (;;) {
                struct pollfd p = { .fd = t->fd, .events = events ? events : POLLIN };
                int left = -1;
                if (deadline >= 0) {
                        int64_t d = deadline - now_ms();
                        if (d <= 0)
                                return -ETIMEDOUT;
                        left = d > 1000000 ? 1000000 : (int)d;
                }
                int n = poll(&p, 1, left);
                if (n > 0)
                        return 0; /* POLLHUP/POLLERR: the next call reports it */
                if (n < 0 && errno != EINTR)
                        return -errno;
        }
}

int lup_tls_handshake(struct lup_tls *t, int timeout_ms)
{
        int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
        int rc;

        while ((rc = lup_tls_handshake_step(t)) == -EAGAIN) {
                int w = wait_want(t, lup_tls_want(t), deadline); /* one thread during a handshake */
                if (w < 0) {
                        snprintf(t->err, sizeof(t->err), "TLS handshake: %s",
                                 w == -ETIMEDOUT ? "timed out" : strerror(-w));
                        return w;
                }
        }
        return rc;
}

static ssize_t recv_nb(struct lup_tls *t, void *p, size_t n, short *ret_want)
{
        size_t got = 0;
        ssize_t rc;
        int r;

        pthread_mutex_lock(&t->lock);
        if (t->rec) {
                const char *why;
                rc = lup_tls_rec_recv(t->rec, p, n, &why);
                if (rc == -EAGAIN)
                        t->want = POLLIN;
                else if (rc < 0)
                        snprintf(t->err, sizeof(t->err), "TLS receive: %s", why ? why : strerror((int)-rc));
                *ret_want = POLLIN;
                pthread_mutex_unlock(&t->lock);
                return rc;
        }
        ERR_clear_error();
        r = SSL_read_ex(t->ssl, p, n, &got);
        if (r == 1)
                rc = (ssize_t)got;
        else if (SSL_get_error(t->ssl, 0) == SSL_ERROR_ZERO_RETURN)
                rc = 0; /* close_notify */
        else
                rc = ssl_fail(t, 0, "TLS receive");
        *ret_want = t->want;
        pthread_mutex_unlock(&t->lock);
        return rc;
}

ssize_t lup_tls_recv_nb(struct lup_tls *t, void *p, size_t n)
{
        short want;
        return recv_nb(t, p, n, &want);
}

int lup_tls_read_full(struct lup_tls *t, void *p, size_t n, int timeout_ms)
{
        int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
        uint8_t *b = p;

        while (n > 0) {
                short want = POLLIN;
                ssize_t k = recv_nb(t, b, n, &want);
                if (k > 0) {
                        b += k;
                        n -= (size_t)k;
                        continue;
                }
                if (k == 0)
                        return -ECONNRESET;
                if (k != -EAGAIN)
                        return (int)k;
                int w = wait_want(t, want, deadline);
                if (w < 0)
                        return w;
        }
        return 0;
}

bool lup_tls_pending(struct lup_tls *t)
{
        bool any;

        pthread_mutex_lock(&t->lock);
        any = t->rec ? lup_tls_rec_pending(t->rec) : SSL_pending(t->ssl) > 0 || SSL_has_pending(t->ssl);
        pthread_mutex_unlock(&t->lock);
        return any;
}

/* One SSL_write under the lock: bytes taken (records sealed and handed to
 * the BIO, with PARTIAL_WRITE at most a record short of n), or -errno with
 * *want set after -EAGAIN. */
static ssize_t send_once(struct lup_tls *t, const void *p, size_t n, short *want)
{
        size_t done = 0;
        ssize_t rc;
        int r;

        if (t->rec) {
                pthread_mutex_lock(&t->wlock);
                rc = lup_tls_rec_send(t->rec, p, n);
                if (rc < 0 && rc != -EAGAIN)
                        snprintf(t->werr, sizeof(t->werr), "TLS send: %s", strerror((int)-rc));
                pthread_mutex_unlock(&t->wlock);
                *want = POLLOUT;
                return rc;
        }
        pthread_mutex_lock(&t->lock);
        ERR_clear_error();
        r = SSL_write_ex(t->ssl, p, n, &done);
        rc = r == 1 ? (ssize_t)done : ssl_fail(t, 0, "TLS send");
        *want = t->want;
        pthread_mutex_unlock(&t->lock);
        return rc;
}

ssize_t lup_tls_send_nb(struct lup_tls *t, const void *p, size_t n)
{
        short want;
        return send_once(t, p, n, &want);
}

int lup_tls_flush_nb(struct lup_tls *t)
{
        int rc;

        if (!t->rec)
                return 0; /* OpenSSL's socket BIO keeps nothing back */
        pthread_mutex_lock(&t->wlock);
        rc = lup_tls_rec_flush(t->rec);
        if (rc < 0 && rc != -EAGAIN)
                snprintf(t->werr, sizeof(t->werr), "TLS send: %s", strerror(-rc));
        pthread_mutex_unlock(&t->wlock);
        return rc;
}

bool lup_tls_unsent(struct lup_tls *t)
{
        bool any;

        if (!t->rec)
                return false;
        pthread_mutex_lock(&t->wlock);
        any = lup_tls_rec_unsent(t->rec);
        pthread_mutex_unlock(&t->wlock);
        return any;
}

bool lup_tls_may_sigpipe(const struct lup_tls *t)
{
        return !t->rec; /* the record layer sends with MSG_NOSIGNAL */
}

static int wait_writable(struct lup_tls *t, short want)
{
        return wait_want(t, want, t->write_timeout_ms < 0 ? -1 : now_ms() + t->write_timeout_ms);
}

/* All of it handed to the BIO (not yet flushed), waiting as needed. */
static int send_all(struct lup_tls *t, const uint8_t *b, size_t n)
{
        while (n > 0) {
                short want = POLLOUT;
                ssize_t k = send_once(t, b, n, &want);
                if (k >= 0) {
                        b += k;
                        n -= (size_t)k;
                        continue;
                }
                if (k != -EAGAIN)
                        return k == -ECONNRESET ? -EPIPE : (int)k;
                int rc = wait_writable(t, want);
                if (rc < 0)
                        return rc;
        }
        return 0;
}

static int flush_all(struct lup_tls *t)
{
        int rc;

        while ((rc = lup_tls_flush_nb(t)) == -EAGAIN)
                if ((rc = wait_writable(t, POLLOUT)) < 0)
                        return rc;
        return rc;
}

int lup_tls_write_full(struct lup_tls *t, const void *p, size_t n)
{
        int rc = send_all(t, p, n);
        return rc < 0 ? rc : flush_all(t);
}

/* Small pieces are gathered into one record, large ones go as they are;
 * a large piece after small ones first tops up their record, so that a
 * frame's header never travels in a record (and a write) of its own. */
int lup_tls_writev_full(struct lup_tls *t, const struct iovec *iov, int iovcnt)
{
        enum {
                GATHER = 16384
        };
        uint8_t buf[GATHER];
        size_t have = 0;
        int rc;

        for (int i = 0; i < iovcnt; i++) {
                const uint8_t *p = iov[i].iov_base;
                size_t n = iov[i].iov_len;
                if (n <= GATHER - have) {
                        memcpy(buf + have, p, n);
                        have += n;
                        continue;
                }
                if (have) {
                        size_t k = GATHER - have;
                        memcpy(buf + have, p, k);
                        rc = send_all(t, buf, GATHER);
                        if (rc < 0)
                                return rc;
                        p += k;
                        n -= k;
                        have = 0;
                }
                if (n < GATHER) {
                        memcpy(buf, p, n);
                        have = n;
                        continue;
                }
                rc = send_all(t, p, n);
                if (rc < 0)
                        return rc;
        }
        rc = have ? send_all(t, buf, have) : 0;
        return rc < 0 ? rc : flush_all(t);
}

void lup_tls_set_write_timeout(struct lup_tls *t, int timeout_ms)
{
        t->write_timeout_ms = timeout_ms;
}

const char *lup_tls_error(const struct lup_tls *t)
{
        if (t->err[0])
                return t->err;
        return t->werr[0] ? t->werr : "unknown TLS failure";
}

int lup_tls_peer_cn(struct lup_tls *t, char *out, size_t cap)
{
        X509 *peer;
        int n, rc = 0;

        pthread_mutex_lock(&t->lock);
        peer = SSL_get1_peer_certificate(t->ssl);
        if (!peer || SSL_get_verify_result(t->ssl) != X509_V_OK) {
                rc = -ENOENT;
                goto out;
        }
        n = X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, out, (int)cap);
        if (n < 0)
                rc = -ENOENT;
        else if ((size_t)n >= cap - 1 || strlen(out) != (size_t)n) /* too long, or a NUL inside */
                rc = -ENAMETOOLONG;
out:
        X509_free(peer);
        pthread_mutex_unlock(&t->lock);
        return rc;
}

void lup_tls_ktls(struct lup_tls *t, bool *tx, bool *rx)
{
        pthread_mutex_lock(&t->lock);
        *tx = BIO_get_ktls_send(SSL_get_wbio(t->ssl)) > 0;
        *rx = BIO_get_ktls_recv(SSL_get_rbio(t->ssl)) > 0;
        pthread_mutex_unlock(&t->lock);
}

const char *lup_tls_carrier(struct lup_tls *t)
{
        bool tx, rx;

        if (t->rec)
                return "lupine's record layer";
        lup_tls_ktls(t, &tx, &rx);
        return tx && rx ? "kernel TLS" : tx || rx ? "kernel TLS one way, OpenSSL the other" : "OpenSSL";
}

bool lup_tls_looks_like_hello(const uint8_t *p, size_t n)
{
        /* record type 22 (handshake), version 3.x, then a ClientHello (1) */
        return n >= 6 && p[0] == 22 && p[1] == 3 && p[2] <= 4 && p[5] == 1;
}
