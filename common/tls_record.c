/* SPDX-License-Identifier: MIT */
/*
 * lupine's own TLS 1.3 record layer, for application data after an
 * OpenSSL handshake (common/tls_record.h; docs/tls.md, "Record layer").
 *
 * This is what kernel TLS does, in user space: OpenSSL negotiates and
 * authenticates, then hands over the traffic secrets, and the records are
 * sealed and opened here with the same AEAD through EVP. What it saves
 * against SSL_read/SSL_write, on the H200 where bulk copies over TLS ran at
 * 0.4x of plaintext:
 *  - a record is opened straight into the caller's buffer (OpenSSL opens
 *    it in its own buffer and copies it out), and sealed straight from the
 *    caller's bytes into the send buffer;
 *  - many records go in one send(2) and come in one recv(2), instead of a
 *    write per record;
 *  - reading and writing have separate state, so a reader never waits for
 *    a writer's lock.
 *
 * What it refuses: any record but application data and alerts (no
 * post-handshake messages: lupine's servers send no session tickets and
 * nobody asks for a key update), and a sequence number that would wrap
 * (2^64 records).
 */
#include "tls_record.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

enum {
        HDR = 5,
        TAG = 16,
        MAX_PLAIN = 16384,
        MAX_CIPHER = MAX_PLAIN + 256, /* RFC 8446 5.2: the most a peer may send */
        TYPE_ALERT = 21,
        TYPE_DATA = 23,
        RBUF = 256 * 1024,
        WBUF = 256 * 1024 + 1024,
};

struct dir {
        EVP_CIPHER_CTX *aead;
        uint8_t iv[12];
        uint64_t seq;
};

struct lup_tls_rec {
        int fd;
        struct dir rx, tx;
        uint8_t *rbuf; /* ciphertext read ahead: rbuf[roff, roff + rlen) */
        size_t roff, rlen;
        uint8_t *pbuf; /* a record opened for a caller with less room: pbuf[poff, poff + plen) */
        size_t poff, plen;
        bool eof;
        const char *failed; /* the first protocol failure: every later read reports it */
        uint8_t *wbuf; /* sealed records not yet sent: wbuf[woff, woff + wlen) */
        size_t woff, wlen;
};

/* HKDF-Expand-Label(secret, label, "", len) of RFC 8446 7.1, for len no
 * longer than the hash (one HMAC block). */
static int expand_label(const EVP_MD *md, const uint8_t *secret, size_t slen, const char *label, uint8_t *out,
                        size_t len)
{
        uint8_t info[64], t[EVP_MAX_MD_SIZE];
        size_t ll = strlen(label), n = 0;
        unsigned tl = 0;

        if (len > (size_t)EVP_MD_get_size(md) || ll + 12 > sizeof(info))
                return -1;
        info[n++] = (uint8_t)(len >> 8);
        info[n++] = (uint8_t)len;
        info[n++] = (uint8_t)(6 + ll);
        memcpy(info + n, "tls13 ", 6);
        n += 6;
        memcpy(info + n, label, ll);
        n += ll;
        info[n++] = 0; /* empty context */
        info[n++] = 1; /* T(1) */
        if (!HMAC(md, secret, (int)slen, info, n, t, &tl) || tl < len)
                return -1;
        memcpy(out, t, len);
        OPENSSL_cleanse(t, sizeof(t));
        return 0;
}

static int dir_init(struct dir *d, const struct lup_tls_secret *s, bool seal)
{
        uint8_t key[32];
        int klen = EVP_CIPHER_get_key_length(s->cipher);

        if (klen <= 0 || klen > (int)sizeof(key) || EVP_CIPHER_get_iv_length(s->cipher) != 12)
                return -1;
        if (expand_label(s->md, s->secret, s->len, "key", key, (size_t)klen) < 0 ||
            expand_label(s->md, s->secret, s->len, "iv", d->iv, sizeof(d->iv)) < 0)
                return -1;
        d->aead = EVP_CIPHER_CTX_new();
        int ok = d->aead && EVP_CipherInit_ex(d->aead, s->cipher, NULL, key, NULL, seal ? 1 : 0) == 1;
        OPENSSL_cleanse(key, sizeof(key));
        return ok ? 0 : -1;
}

int lup_tls_rec_new(int fd, const struct lup_tls_secret *rx, const struct lup_tls_secret *tx,
                    struct lup_tls_rec **ret)
{
        struct lup_tls_rec *r = calloc(1, sizeof(*r));

        *ret = NULL;
        if (!r)
                return -ENOMEM;
        r->fd = fd;
        r->rbuf = malloc(RBUF);
        r->pbuf = malloc(MAX_CIPHER);
        r->wbuf = malloc(WBUF);
        if (!r->rbuf || !r->pbuf || !r->wbuf || dir_init(&r->rx, rx, false) < 0 || dir_init(&r->tx, tx, true) < 0) {
                lup_tls_rec_free(r);
                return -EPROTO;
        }
        *ret = r;
        return 0;
}

void lup_tls_rec_free(struct lup_tls_rec *r)
{
        if (!r)
                return;
        EVP_CIPHER_CTX_free(r->rx.aead);
        EVP_CIPHER_CTX_free(r->tx.aead);
        free(r->rbuf);
        free(r->pbuf);
        free(r->wbuf);
        free(r);
}

static void nonce(const struct dir *d, uint8_t out[12])
{
        memcpy(out, d->iv, 12);
        for (int i = 0; i < 8; i++)
                out[11 - i] ^= (uint8_t)(d->seq >> (8 * i));
}

/* ---- reading */

/* The length of the complete record at the front of rbuf, 0 when it is
 * not all there yet, or -EPROTO for a header no TLS 1.3 peer sends. */
static ssize_t front_record(struct lup_tls_rec *r, const char **why)
{
        const uint8_t *h = r->rbuf + r->roff;

        if (r->rlen < HDR)
                return 0;
        size_t len = (size_t)h[3] << 8 | h[4];
        if (h[0] != TYPE_DATA || h[1] != 3 || h[2] != 3 || len <= TAG || len > MAX_CIPHER) {
                *why = h[0] != TYPE_DATA ? "a record of a type other than application data" : "a bad record header";
                return -EPROTO;
        }
        return r->rlen >= HDR + len ? (ssize_t)(HDR + len) : 0;
}

/* Opens the front record (n bytes with its header) into out, which has
 * room for its inner plaintext: the content length, 0 for a record of no
 * content, or -EPROTO / -ECONNRESET (close_notify; r->eof). */
static ssize_t open_record(struct lup_tls_rec *r, size_t n, uint8_t *out, const char **why)
{
        const uint8_t *h = r->rbuf + r->roff;
        size_t clen = n - HDR - TAG;
        uint8_t iv[12];
        int outl = 0;

        if (r->rx.seq == UINT64_MAX) {
                *why = "the record sequence number would wrap";
                return -EPROTO;
        }
        nonce(&r->rx, iv);
        if (EVP_DecryptInit_ex(r->rx.aead, NULL, NULL, NULL, iv) != 1 ||
            EVP_DecryptUpdate(r->rx.aead, NULL, &outl, h, HDR) != 1 ||
            EVP_DecryptUpdate(r->rx.aead, out, &outl, h + HDR, (int)clen) != 1 ||
            EVP_CIPHER_CTX_ctrl(r->rx.aead, EVP_CTRL_AEAD_SET_TAG, TAG, (void *)(h + HDR + clen)) != 1 ||
            EVP_DecryptFinal_ex(r->rx.aead, out + outl, &outl) != 1) {
                *why = "a record failed authentication (bad record MAC)";
                return -EPROTO;
        }
        r->rx.seq++;
        r->roff += n;
        r->rlen -= n;
        while (clen > 0 && out[clen - 1] == 0) /* padding */
                clen--;
        if (clen == 0) {
                *why = "a record without a content type";
                return -EPROTO;
        }
        uint8_t type = out[--clen];
        if (type == TYPE_DATA)
                return (ssize_t)clen;
        if (type == TYPE_ALERT && clen == 2 && out[1] == 0) { /* close_notify */
                r->eof = true;
                return -ECONNRESET;
        }
        *why = type == TYPE_ALERT ? "the peer sent a TLS alert" : "a post-handshake message, which lupine does not take";
        return -EPROTO;
}

/* More ciphertext from the socket: 1, 0 at its end, -EAGAIN, -errno. */
static int fill(struct lup_tls_rec *r)
{
        if (r->roff && (r->rlen == 0 || r->roff + r->rlen > RBUF - MAX_CIPHER - HDR)) {
                memmove(r->rbuf, r->rbuf + r->roff, r->rlen);
                r->roff = 0;
        }
        for (;;) {
                ssize_t k = recv(r->fd, r->rbuf + r->roff + r->rlen, RBUF - r->roff - r->rlen, MSG_DONTWAIT);
                if (k > 0) {
                        r->rlen += (size_t)k;
                        return 1;
                }
                if (k == 0)
                        return 0;
                if (errno != EINTR)
                        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
        }
}

ssize_t lup_tls_rec_recv(struct lup_tls_rec *r, void *p, size_t n, const char **why)
{
        uint8_t *out = p;
        size_t got = 0;

        *why = NULL;
        if (r->failed) {
                *why = r->failed;
                return -EPROTO;
        }
        if (r->plen) {
                size_t k = n < r->plen ? n : r->plen;
                memcpy(out, r->pbuf + r->poff, k);
                r->poff += k;
                r->plen -= k;
                return (ssize_t)k;
        }
        while (got < n) {
                ssize_t len = front_record(r, why);
                if (len < 0) {
                        r->failed = *why;
                        return got ? (ssize_t)got : len;
                }
                if (len == 0) {
                        if (got || r->eof)
                                break; /* what came so far, before waiting for the socket */
                        int f = fill(r);
                        if (f == 0) {
                                r->eof = true;
                                break;
                        }
                        if (f < 0)
                                return f;
                        continue;
                }
                size_t room = n - got, inner = (size_t)len - HDR - TAG;
                bool direct = room >= inner;
                ssize_t k = open_record(r, (size_t)len, direct ? out + got : r->pbuf, why);
                if (k == -EPROTO)
                        r->failed = *why;
                if (k < 0) /* close_notify is the end of the stream */
                        return got ? (ssize_t)got : (k == -ECONNRESET ? 0 : k);
                if (!direct) {
                        size_t c = (size_t)k < room ? (size_t)k : room;
                        memcpy(out + got, r->pbuf, c);
                        r->poff = c;
                        r->plen = (size_t)k - c;
                        got += c;
                        break;
                }
                got += (size_t)k;
        }
        if (got == 0 && r->eof)
                return 0;
        return (ssize_t)got;
}

bool lup_tls_rec_pending(struct lup_tls_rec *r)
{
        const char *why;
        return r->plen > 0 || front_record(r, &why) != 0;
}

/* ---- writing */

int lup_tls_rec_flush(struct lup_tls_rec *r)
{
        while (r->wlen) {
                ssize_t k = send(r->fd, r->wbuf + r->woff, r->wlen, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
                }
                r->woff += (size_t)k;
                r->wlen -= (size_t)k;
        }
        r->woff = 0;
        return 0;
}

/* Seals one record of type into the send buffer, which has room. */
static int seal(struct lup_tls_rec *r, uint8_t type, const uint8_t *p, size_t n)
{
        uint8_t *h = r->wbuf + r->woff + r->wlen, iv[12];
        size_t len = n + 1 + TAG;
        int outl = 0;

        if (r->tx.seq == UINT64_MAX)
                return -EPROTO;
        h[0] = TYPE_DATA;
        h[1] = 3;
        h[2] = 3;
        h[3] = (uint8_t)(len >> 8);
        h[4] = (uint8_t)len;
        nonce(&r->tx, iv);
        if (EVP_EncryptInit_ex(r->tx.aead, NULL, NULL, NULL, iv) != 1 ||
            EVP_EncryptUpdate(r->tx.aead, NULL, &outl, h, HDR) != 1 ||
            (n && EVP_EncryptUpdate(r->tx.aead, h + HDR, &outl, p, (int)n) != 1) ||
            EVP_EncryptUpdate(r->tx.aead, h + HDR + n, &outl, &type, 1) != 1 ||
            EVP_EncryptFinal_ex(r->tx.aead, h + HDR + n + 1, &outl) != 1 ||
            EVP_CIPHER_CTX_ctrl(r->tx.aead, EVP_CTRL_AEAD_GET_TAG, TAG, h + HDR + n + 1) != 1)
                return -EPROTO;
        r->tx.seq++;
        r->wlen += HDR + len;
        return 0;
}

static size_t room(const struct lup_tls_rec *r)
{
        return WBUF - r->woff - r->wlen;
}

/* Makes room for one record of n bytes: 0, -EAGAIN, -errno. */
static int make_room(struct lup_tls_rec *r, size_t n)
{
        if (room(r) >= HDR + n + 1 + TAG)
                return 0;
        int f = lup_tls_rec_flush(r);
        if (f == -EAGAIN && r->woff) { /* part went: keep the rest at the front */
                memmove(r->wbuf, r->wbuf + r->woff, r->wlen);
                r->woff = 0;
        }
        if (f < 0 && f != -EAGAIN)
                return f;
        return room(r) >= HDR + n + 1 + TAG ? 0 : -EAGAIN;
}

ssize_t lup_tls_rec_send(struct lup_tls_rec *r, const void *p, size_t n)
{
        const uint8_t *b = p;
        size_t done = 0;

        while (done < n) {
                size_t k = n - done < MAX_PLAIN ? n - done : MAX_PLAIN;
                int rc = make_room(r, k);
                if (rc == 0)
                        rc = seal(r, TYPE_DATA, b + done, k);
                if (rc < 0)
                        return done ? (ssize_t)done : rc;
                done += k;
        }
        return (ssize_t)done;
}

bool lup_tls_rec_unsent(const struct lup_tls_rec *r)
{
        return r->wlen > 0;
}

void lup_tls_rec_close_notify(struct lup_tls_rec *r)
{
        static const uint8_t alert[2] = { 1, 0 }; /* warning, close_notify */

        if (make_room(r, sizeof(alert)) == 0 && seal(r, TYPE_ALERT, alert, sizeof(alert)) == 0)
                (void)lup_tls_rec_flush(r); /* one attempt: the socket is non-blocking */
}
