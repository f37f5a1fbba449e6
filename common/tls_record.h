/* SPDX-License-Identifier: MIT */
/* lupine's TLS 1.3 record layer after an OpenSSL handshake (tls_record.c);
 * private to common/tls.c, which holds the locks: one for reading, one for
 * writing, as the two directions share nothing here. */
#ifndef LUP_TLS_RECORD_H
#define LUP_TLS_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <openssl/evp.h>

/* One direction's traffic secret (RFC 8446 7.1) and the suite's AEAD and
 * hash. */
struct lup_tls_secret {
        const EVP_CIPHER *cipher;
        const EVP_MD *md;
        uint8_t secret[EVP_MAX_MD_SIZE];
        size_t len;
};

struct lup_tls_rec;

/* Keys from the secrets, sequence numbers 0 (the first records after the
 * handshake), fd non-blocking: 0, -ENOMEM, -EPROTO. */
int lup_tls_rec_new(int fd, const struct lup_tls_secret *rx, const struct lup_tls_secret *tx, struct lup_tls_rec **ret);
void lup_tls_rec_free(struct lup_tls_rec *r);

/* As lup_tls_recv_nb: bytes (records opened straight into p while they
 * fit), 0 at the end of the stream, -EAGAIN, -EPROTO with *why, -errno. */
ssize_t lup_tls_rec_recv(struct lup_tls_rec *r, void *p, size_t n, const char **why);
bool lup_tls_rec_pending(struct lup_tls_rec *r);

/* Seals up to n bytes into the send buffer, sending it when it fills:
 * bytes taken, -EAGAIN when none fit and the socket is full, -errno. */
ssize_t lup_tls_rec_send(struct lup_tls_rec *r, const void *p, size_t n);
/* Sends the buffer: 0 once empty, -EAGAIN, -errno. */
int lup_tls_rec_flush(struct lup_tls_rec *r);
bool lup_tls_rec_unsent(const struct lup_tls_rec *r);
/* Seals a close_notify alert and tries once to send everything. */
void lup_tls_rec_close_notify(struct lup_tls_rec *r);

#endif
