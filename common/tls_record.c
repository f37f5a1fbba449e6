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
 *    a writer's lock;
 *  - the records of a batch (up to 1 MiB) are sealed or opened on several
 *    threads at once (tls_par.c), each with its own cipher context: one
 *    AES-GCM stream is about as fast as one loopback TCP copy.
 *
 * What it refuses: any record but application data and alerts (no
 * post-handshake messages: lupine's servers send no session tickets and
 * nobody asks for a key update), and a sequence number that would wrap
 * (2^64 records).
 */
#define LUP_LOG_CAT LUP_LOGC_TLS
#include "tls_record.h"
#include "tls_par.h"

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
        RBUF = 1024 * 1024,
        WBUF = 1024 * 1024 + 4096,
        BATCH = 64, /* records per batch: 1 MiB */
};

struct dir {
        EVP_CIPHER_CTX *aead[LUP_PAR_MAX_LANES]; /* one per lane, the same key */
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
        bool eof;           /* the socket's end, or close_notify */
        bool closed;        /* close_notify came: nothing after it counts */
        const char *failed; /* the first protocol failure: every later read reports it */
        uint8_t *wbuf;      /* sealed records not yet sent: wbuf[woff, woff + wlen) */
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
        int ok = 1;
        for (int i = 0; ok && i < lup_par_lanes(); i++) {
                d->aead[i] = EVP_CIPHER_CTX_new();
                ok = d->aead[i] && EVP_CipherInit_ex(d->aead[i], s->cipher, NULL, key, NULL, seal ? 1 : 0) == 1;
        }
        OPENSSL_cleanse(key, sizeof(key));
        return ok ? 0 : -1;
}

int lup_tls_rec_new(int fd, const struct lup_tls_secret *rx, const struct lup_tls_secret *tx, struct lup_tls_rec **ret)
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
        for (int i = 0; i < LUP_PAR_MAX_LANES; i++) {
                EVP_CIPHER_CTX_free(r->rx.aead[i]);
                EVP_CIPHER_CTX_free(r->tx.aead[i]);
        }
        free(r->rbuf);
        free(r->pbuf);
        free(r->wbuf);
        free(r);
}

static void nonce(const struct dir *d, uint64_t seq, uint8_t out[12])
{
        memcpy(out, d->iv, 12);
        for (int i = 0; i < 8; i++)
                out[11 - i] ^= (uint8_t)(seq >> (8 * i));
}

/* ---- reading */

/* The length of the complete record at rbuf[at] (with its header), 0 when
 * it is not all there yet, or -EPROTO for a header no TLS 1.3 peer sends. */
static ssize_t record_at(const struct lup_tls_rec *r, size_t at, const char **why)
{
        const uint8_t *h = r->rbuf + r->roff + at;
        size_t have = r->rlen - at;

        if (have < HDR)
                return 0;
        size_t len = (size_t)h[3] << 8 | h[4];
        if (h[0] != TYPE_DATA || h[1] != 3 || h[2] != 3 || len <= TAG || len > MAX_CIPHER) {
                *why = h[0] != TYPE_DATA ? "a record of a type other than application data" : "a bad record header";
                return -EPROTO;
        }
        return have >= HDR + len ? (ssize_t)(HDR + len) : 0;
}

/* One record to open: its bytes, where its content goes (room for all of
 * the inner plaintext but its last byte, which is kept in last), and its
 * sequence number. ok: it passed authentication. */
struct open_task {
        const uint8_t *rec;
        size_t n;
        uint8_t *out;
        uint64_t seq;
        uint8_t last;
        bool ok;
};

/* A batch for lup_par_run: one direction's keys and its tasks (struct
 * open_task or struct seal_task). */
struct batch {
        struct dir *d;
        void *tasks;
};

static void open_one(void *arg, int i, int slot)
{
        struct batch *b = arg;
        struct open_task *t = (struct open_task *)b->tasks + i;
        EVP_CIPHER_CTX *c = b->d->aead[slot];
        size_t body = t->n - HDR - TAG - 1;
        uint8_t iv[12];
        int outl = 0;

        nonce(b->d, t->seq, iv);
        t->ok = EVP_DecryptInit_ex(c, NULL, NULL, NULL, iv) == 1 &&
                EVP_DecryptUpdate(c, NULL, &outl, t->rec, HDR) == 1 &&
                (body == 0 || EVP_DecryptUpdate(c, t->out, &outl, t->rec + HDR, (int)body) == 1) &&
                EVP_DecryptUpdate(c, &t->last, &outl, t->rec + HDR + body, 1) == 1 &&
                EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_SET_TAG, TAG, (void *)(t->rec + HDR + body + 1)) == 1 &&
                EVP_DecryptFinal_ex(c, iv, &outl) == 1;
}

/* An opened record's content length and type, past any zero padding
 * (RFC 8446 5.4); -1 when it is all padding. */
static ssize_t content_of(const struct open_task *t, uint8_t *type)
{
        size_t len = t->n - HDR - TAG - 1;

        if (t->last) {
                *type = t->last;
                return (ssize_t)len;
        }
        while (len > 0 && t->out[len - 1] == 0)
                len--;
        if (len == 0)
                return -1;
        *type = t->out[len - 1];
        return (ssize_t)len - 1;
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

/* The complete records at the front of rbuf whose content fits in room
 * bytes (pbuf: the first one alone, into pbuf), as a batch: its size, or
 * -EPROTO. */
static int gather(struct lup_tls_rec *r, uint8_t *out, size_t room, struct open_task *t, const char **why)
{
        size_t at = 0, pos = 0;
        int n = 0;

        while (n < BATCH) {
                ssize_t len = record_at(r, at, why);
                if (len < 0) {
                        if (n == 0)
                                return -EPROTO;
                        break; /* first the good records before it */
                }
                size_t body = (size_t)len - HDR - TAG - 1;
                if (len == 0 || (n > 0 && body > room - pos))
                        break;
                if (r->rx.seq + (uint64_t)n == UINT64_MAX) {
                        *why = "the record sequence number would wrap";
                        return n ? n : -EPROTO;
                }
                bool fits = body <= room - pos;
                t[n] = (struct open_task){ .rec = r->rbuf + r->roff + at,
                                           .n = (size_t)len,
                                           .out = fits ? out + pos : r->pbuf,
                                           .seq = r->rx.seq + (uint64_t)n };
                n++;
                if (!fits)
                        break; /* a caller with less room than a record: the record goes to pbuf */
                at += (size_t)len;
                pos += body;
        }
        return n;
}

/* Opens a batch and moves its contents together at out + got: the bytes
 * now at out, or -EPROTO / -ECONNRESET (close_notify) when nothing came
 * before the record that ended it. The records up to the one that ended it
 * are consumed. */
static ssize_t open_batch(struct lup_tls_rec *r, struct open_task *t, int n, uint8_t *out, const char **why)
{
        struct batch b = { .d = &r->rx, .tasks = t };
        size_t w = 0;

        lup_par_run(n, open_one, &b);
        for (int i = 0; i < n; i++) {
                uint8_t type = 0;
                ssize_t c = t[i].ok ? content_of(&t[i], &type) : -1;
                if (!t[i].ok) {
                        r->failed = *why = "a record failed authentication (bad record MAC)";
                        return w ? (ssize_t)w : -EPROTO;
                }
                r->roff += t[i].n;
                r->rlen -= t[i].n;
                r->rx.seq++;
                if (c < 0) {
                        r->failed = *why = "a record without a content type";
                        return w ? (ssize_t)w : -EPROTO;
                }
                if (type == TYPE_ALERT) {
                        if (c == 2 && t[i].out[1] == 0) { /* close_notify */
                                r->eof = r->closed = true;
                                return w ? (ssize_t)w : -ECONNRESET;
                        }
                        r->failed = *why = "the peer sent a TLS alert";
                        return w ? (ssize_t)w : -EPROTO;
                }
                if (type != TYPE_DATA) {
                        r->failed = *why = "a post-handshake message, which lupine does not take";
                        return w ? (ssize_t)w : -EPROTO;
                }
                if (t[i].out == r->pbuf) {
                        r->poff = 0;
                        r->plen = (size_t)c;
                } else {
                        if (t[i].out != out + w) /* padding or an empty record before it */
                                memmove(out + w, t[i].out, (size_t)c);
                        w += (size_t)c;
                }
        }
        return (ssize_t)w;
}

static size_t take_pending(struct lup_tls_rec *r, uint8_t *out, size_t n)
{
        size_t k = n < r->plen ? n : r->plen;

        memcpy(out, r->pbuf + r->poff, k);
        r->poff += k;
        r->plen -= k;
        return k;
}

ssize_t lup_tls_rec_recv(struct lup_tls_rec *r, void *p, size_t n, const char **why)
{
        struct open_task t[BATCH];
        uint8_t *out = p;
        size_t got = 0;

        *why = NULL;
        if (r->failed) {
                *why = r->failed;
                return -EPROTO;
        }
        if (r->plen)
                return (ssize_t)take_pending(r, out, n);
        if (r->closed)
                return 0; /* records after close_notify are not data */
        while (got < n && !r->plen) {
                int k = gather(r, out + got, n - got, t, why);
                if (k < 0) {
                        r->failed = *why;
                        return got ? (ssize_t)got : k;
                }
                if (k == 0) {
                        if (got || r->eof)
                                break; /* what came so far, before waiting for the socket */
                        int f = fill(r);
                        if (f == 0)
                                r->eof = true;
                        else if (f < 0)
                                return f;
                        continue;
                }
                ssize_t c = open_batch(r, t, k, out + got, why);
                if (c < 0)
                        return got ? (ssize_t)got : (c == -ECONNRESET ? 0 : c);
                got += (size_t)c;
                if (r->plen)
                        got += take_pending(r, out + got, n - got);
                if (r->eof || r->failed)
                        break;
        }
        if (got == 0 && r->eof)
                return 0;
        return (ssize_t)got;
}

bool lup_tls_rec_pending(struct lup_tls_rec *r)
{
        const char *why;
        return r->plen > 0 || record_at(r, 0, &why) != 0;
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

/* One record to seal: its content, where the record goes, its sequence
 * number and inner content type. */
struct seal_task {
        const uint8_t *in;
        size_t n;
        uint8_t *rec;
        uint64_t seq;
        uint8_t type;
        bool ok;
};

static void seal_one(void *arg, int i, int slot)
{
        struct batch *b = arg;
        struct seal_task *t = (struct seal_task *)b->tasks + i;
        EVP_CIPHER_CTX *c = b->d->aead[slot];
        uint8_t *h = t->rec, iv[12];
        size_t len = t->n + 1 + TAG;
        int outl = 0;

        h[0] = TYPE_DATA; /* the outer type of every TLS 1.3 record */
        h[1] = 3;
        h[2] = 3;
        h[3] = (uint8_t)(len >> 8);
        h[4] = (uint8_t)len;
        nonce(b->d, t->seq, iv);
        t->ok = EVP_EncryptInit_ex(c, NULL, NULL, NULL, iv) == 1 && EVP_EncryptUpdate(c, NULL, &outl, h, HDR) == 1 &&
                (t->n == 0 || EVP_EncryptUpdate(c, h + HDR, &outl, t->in, (int)t->n) == 1) &&
                EVP_EncryptUpdate(c, h + HDR + t->n, &outl, &t->type, 1) == 1 &&
                EVP_EncryptFinal_ex(c, h + HDR + t->n + 1, &outl) == 1 &&
                EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, TAG, h + HDR + t->n + 1) == 1;
}

static size_t room(const struct lup_tls_rec *r)
{
        return WBUF - r->woff - r->wlen;
}

static size_t sealed_size(size_t n)
{
        return HDR + n + 1 + TAG;
}

/* Makes room for one record of n bytes: 0, -EAGAIN, -errno. */
static int make_room(struct lup_tls_rec *r, size_t n)
{
        if (room(r) >= sealed_size(n))
                return 0;
        int f = lup_tls_rec_flush(r);
        if (f == -EAGAIN && r->woff) { /* part went: keep the rest at the front */
                memmove(r->wbuf, r->wbuf + r->woff, r->wlen);
                r->woff = 0;
        }
        if (f < 0 && f != -EAGAIN)
                return f;
        return room(r) >= sealed_size(n) ? 0 : -EAGAIN;
}

/* Seals p[0, n) of type into as many records as fit in the send buffer
 * now, at most a batch: the bytes taken, or -EPROTO. */
static ssize_t seal_batch(struct lup_tls_rec *r, uint8_t type, const uint8_t *p, size_t n)
{
        struct seal_task t[BATCH];
        struct batch b = { .d = &r->tx, .tasks = t };
        size_t taken = 0, at = r->woff + r->wlen;
        int k = 0;

        while (k < BATCH && (taken < n || (n == 0 && k == 0))) {
                size_t c = n - taken < MAX_PLAIN ? n - taken : MAX_PLAIN;
                if (WBUF - at < sealed_size(c) || r->tx.seq + (uint64_t)k == UINT64_MAX)
                        break;
                t[k] = (struct seal_task){
                        .in = p + taken, .n = c, .rec = r->wbuf + at, .seq = r->tx.seq + (uint64_t)k, .type = type
                };
                k++;
                taken += c;
                at += sealed_size(c);
        }
        if (k == 0)
                return -EPROTO; /* make_room made room for one: only the sequence number can stop it */
        lup_par_run(k, seal_one, &b);
        for (int i = 0; i < k; i++)
                if (!t[i].ok)
                        return -EPROTO;
        r->tx.seq += (uint64_t)k;
        r->wlen = at - r->woff;
        return (ssize_t)taken;
}

ssize_t lup_tls_rec_send(struct lup_tls_rec *r, const void *p, size_t n)
{
        const uint8_t *b = p;
        size_t done = 0;

        while (done < n) {
                size_t first = n - done < MAX_PLAIN ? n - done : MAX_PLAIN;
                int rc = make_room(r, first);
                ssize_t k = rc == 0 ? seal_batch(r, TYPE_DATA, b + done, n - done) : rc;
                if (k < 0)
                        return done ? (ssize_t)done : k;
                done += (size_t)k;
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

        if (make_room(r, sizeof(alert)) == 0 && seal_batch(r, TYPE_ALERT, alert, sizeof(alert)) == 2)
                (void)lup_tls_rec_flush(r); /* one attempt: the socket is non-blocking */
}
