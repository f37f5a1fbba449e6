/* SPDX-License-Identifier: MIT */
/*
 * TLS 1.3 connections over OpenSSL 3, for the daemon and the shims
 * (docs/tls.md has the protocol around it: two handshakes per connection,
 * the supervisor's and then the worker's).
 *
 * A struct lup_tls wraps one SSL object on a NON-BLOCKING socket. Every
 * OpenSSL call on it is made under its own mutex, so one thread may read
 * while others write; a call that would block releases the mutex and waits
 * in poll(2), so a reader waiting for bytes never holds up a writer. Whole
 * frames stay whole only if the caller serialises its writers, as it does
 * for a plain socket.
 *
 * Functions return 0 (or a byte count) on success and -errno on failure:
 * -EAGAIN only from the *_step and lup_tls_recv_nb calls; -EPROTO for a
 * TLS failure (lup_tls_error() says which, in words); -ETIMEDOUT past a
 * deadline; -ECONNRESET at the end of the stream.
 */
#ifndef LUP_TLS_H
#define LUP_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct lup_tls_ctx;
struct lup_tls;

enum lup_tls_ctx_flags {
        /* Kernel TLS after the handshake where the kernel offers it. Not
         * for the supervisor's first handshake, whose socket goes on to a
         * second one. */
        LUP_TLS_KTLS = 0x1,
        /* Read ahead into OpenSSL's buffer (fewer syscalls). Not for the
         * supervisor: it must not read a byte past the HELLO. */
        LUP_TLS_READ_AHEAD = 0x2,
        /* After the handshake, lupine's record layer (tls_record.c) seals
         * and opens the records instead of OpenSSL, unless kernel TLS
         * does: fewer copies and syscalls for bulk data. Such connections
         * do not read ahead during the handshake. Data written may then
         * wait in a send buffer: the *_full calls flush; after
         * lup_tls_send_nb, call lup_tls_flush_nb. Not for the supervisor,
         * whose socket is handed on. */
        LUP_TLS_RECORDS = 0x4,
};

/* A server context: certificate chain and key (PEM files); with client_ca
 * (a PEM file of CAs), clients must present a certificate it signed. */
int lup_tls_server_ctx_new(const char *cert, const char *key, const char *client_ca, unsigned flags,
                           struct lup_tls_ctx **ret, char *err, size_t errcap);
/* A client context: ca is the PEM file of trusted CAs (NULL: the system's
 * trust store); cert and key (both or neither) for mutual TLS. */
int lup_tls_client_ctx_new(const char *ca, const char *cert, const char *key, unsigned flags, struct lup_tls_ctx **ret,
                           char *err, size_t errcap);
void lup_tls_ctx_free(struct lup_tls_ctx *ctx);

/* A connection on fd (made non-blocking here; the fd stays the caller's).
 * A client names the server's host (a DNS name or an IP address), which
 * its certificate must match; a server passes NULL. */
struct lup_tls *lup_tls_new(struct lup_tls_ctx *ctx, int fd, const char *host);
/* Frees it. close_notify: send the TLS closure alert first (best effort);
 * false for a hand-off of the socket to a second handshake. */
void lup_tls_free(struct lup_tls *t, bool close_notify);

/* One step of the handshake: 0 once it is done, -EAGAIN to be called again
 * when lup_tls_want() (POLLIN or POLLOUT) is ready, or an error. */
int lup_tls_handshake_step(struct lup_tls *t);
short lup_tls_want(const struct lup_tls *t);
/* The whole handshake, waiting in poll up to timeout_ms. */
int lup_tls_handshake(struct lup_tls *t, int timeout_ms);

/* Up to n bytes: as many as are there now (never blocks); -EAGAIN when
 * none are (then wait for lup_tls_want()), 0 at a clean end of stream. */
ssize_t lup_tls_recv_nb(struct lup_tls *t, void *p, size_t n);
/* Exactly n bytes, waiting as needed (timeout_ms < 0: forever). */
int lup_tls_read_full(struct lup_tls *t, void *p, size_t n, int timeout_ms);
/* Writes all of it, waiting as needed. */
int lup_tls_write_full(struct lup_tls *t, const void *p, size_t n);
int lup_tls_writev_full(struct lup_tls *t, const struct iovec *iov, int iovcnt);
/* Up to n bytes sealed without blocking: the count taken (with
 * LUP_TLS_RECORDS perhaps still in the send buffer), or -EAGAIN when none
 * could be (call again with the same bytes once lup_tls_want() is ready). */
ssize_t lup_tls_send_nb(struct lup_tls *t, const void *p, size_t n);
/* Sends what the send buffer holds without blocking: 0 when it is empty,
 * -EAGAIN when the socket is full (wait for POLLOUT), or -errno. */
int lup_tls_flush_nb(struct lup_tls *t);
/* Whether a write may raise SIGPIPE (OpenSSL's socket BIO writes with
 * write(2)); the record layer sends with MSG_NOSIGNAL. */
bool lup_tls_may_sigpipe(const struct lup_tls *t);
/* Whether the send buffer holds bytes the socket has not taken yet. */
bool lup_tls_unsent(struct lup_tls *t);
/* A write that can move no byte for timeout_ms fails with -ETIMEDOUT
 * (default: it waits for ever), like SO_SNDTIMEO on a plain socket. */
void lup_tls_set_write_timeout(struct lup_tls *t, int timeout_ms);
/* Decrypted or buffered bytes that a read would return without the socket. */
bool lup_tls_pending(struct lup_tls *t);

/* The last failure, in words (OpenSSL's reason, or the certificate
 * verification error). */
const char *lup_tls_error(const struct lup_tls *t);
/* The peer certificate's subject CN, when it sent a verified one: 0, or
 * -ENOENT (no certificate), -ENAMETOOLONG. */
int lup_tls_peer_cn(struct lup_tls *t, char *out, size_t cap);
/* Whether the kernel carries the records now (kernel TLS), each way. */
void lup_tls_ktls(struct lup_tls *t, bool *tx, bool *rx);
/* Who seals and opens the records, in words: "lupine's record layer"
 * (LUP_TLS_RECORDS after the handshake), "kernel TLS", or "OpenSSL". */
const char *lup_tls_carrier(struct lup_tls *t);

/* Whether the first bytes of a stream look like a TLS ClientHello: a
 * handshake record of TLS 1.x. For a clear error when a plaintext client
 * reaches a TLS port, or the other way round. */
bool lup_tls_looks_like_hello(const uint8_t *p, size_t n);

#endif
