/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for lupine's TLS record layer (common/tls_record.c): what a
 * peer's bytes can do to lup_tls_rec_recv().
 *
 * Input: a byte that picks the reader's buffer sizes, then operations, each
 * a kind byte, a 16-bit length and that many bytes:
 *   kind % 4 == 0  a record sealed properly by the peer, holding the bytes;
 *   kind % 4 == 1  the bytes themselves, raw, where a record belongs;
 *   kind % 4 == 2  a sealed record with one bit flipped (first byte: where);
 *   kind % 4 == 3  a close_notify alert.
 * The stream then ends (the peer closes). Checks:
 *   - what the reader gets is exactly the contents of the proper records
 *     before the first operation that is not one (never a byte of a
 *     tampered or raw record);
 *   - it ends there: at the end of the stream, at close_notify, or with
 *     -EPROTO, which every later read repeats.
 */
/* the checks are the point of a fuzz target: keep assert() in every build type */
#undef NDEBUG
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "tls_record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum {
        MAX_STREAM = 1 << 20,
};

static void secret(struct lup_tls_secret *s, uint8_t fill)
{
        s->cipher = EVP_aes_128_gcm();
        s->md = EVP_sha256();
        s->len = 32;
        memset(s->secret, fill, s->len);
}

/* Everything the peer's record layer sends for p[0, n) (or a close_notify). */
static size_t seal(struct lup_tls_rec *peer, int peer_out, const uint8_t *p, size_t n, bool alert, uint8_t *out,
                   size_t cap)
{
        size_t got = 0;

        if (alert)
                lup_tls_rec_close_notify(peer);
        else
                assert(lup_tls_rec_send(peer, p, n) == (ssize_t)n && lup_tls_rec_flush(peer) == 0);
        for (;;) {
                ssize_t k = recv(peer_out, out + got, cap - got, MSG_DONTWAIT);
                if (k <= 0)
                        break;
                got += (size_t)k;
        }
        return got;
}

static void set_buffers(int fd)
{
        int big = 4 << 20;
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const size_t bufs[4] = { 1, 100, 16383, 70000 };
        struct lup_tls_secret a, b;
        struct lup_tls_rec *reader, *peer;
        int wire[2], loop[2];
        uint8_t *stream, *want, *got;
        size_t slen = 0, wlen = 0, glen = 0, at = 1;
        bool valid = true;

        if (size < 1)
                return 0;
        setenv("LUPINE_TLS_THREADS", "1", 0); /* one lane: a deterministic run */
        assert(socketpair(AF_UNIX, SOCK_STREAM, 0, wire) == 0 && socketpair(AF_UNIX, SOCK_STREAM, 0, loop) == 0);
        set_buffers(wire[0]);
        set_buffers(wire[1]);
        set_buffers(loop[0]);
        set_buffers(loop[1]);
        secret(&a, 0x11);
        secret(&b, 0x22);
        assert(lup_tls_rec_new(wire[1], &a, &b, &reader) == 0); /* reads a, writes b */
        assert(lup_tls_rec_new(loop[0], &b, &a, &peer) == 0);   /* the peer: writes a */
        stream = malloc(MAX_STREAM);
        want = malloc(MAX_STREAM);
        got = malloc(MAX_STREAM);
        assert(stream && want && got);

        while (at + 3 <= size) {
                uint8_t kind = data[at] % 4;
                size_t n = (size_t)data[at + 1] | (size_t)data[at + 2] << 8;
                at += 3;
                if (n > size - at)
                        n = size - at;
                const uint8_t *p = data + at;
                at += n;
                size_t room = MAX_STREAM - slen, k = 0;
                if (room < 2 * n + 1024)
                        break;
                if (kind == 1) {
                        memcpy(stream + slen, p, n);
                        k = n;
                } else {
                        k = seal(peer, loop[1], kind == 2 && n ? p + 1 : p, kind == 2 && n ? n - 1 : n, kind == 3,
                                 stream + slen, room);
                        if (kind == 2 && k)
                                stream[slen + (n ? p[0] : 0) % k] ^= (uint8_t)(1u << (n > 1 ? p[1] % 8 : 0));
                }
                if (kind == 0 && valid) {
                        memcpy(want + wlen, p, n);
                        wlen += n;
                } else if (k) {
                        valid = false; /* nothing after this may reach the reader */
                }
                slen += k;
        }
        for (size_t off = 0; off < slen;) {
                ssize_t k = send(wire[0], stream + off, slen - off, 0);
                assert(k > 0);
                off += (size_t)k;
        }
        shutdown(wire[0], SHUT_WR);

        ssize_t r = 0;
        const char *why;
        for (int i = 0;; i++) {
                size_t cap = bufs[(data[0] + i) % 4];
                r = lup_tls_rec_recv(reader, got + glen, cap, &why);
                if (r <= 0)
                        break;
                assert((size_t)r <= cap && glen + (size_t)r <= MAX_STREAM);
                glen += (size_t)r;
        }
        assert(r == 0 || r == -EPROTO); /* never -EAGAIN: the stream was closed */
        assert(glen <= wlen && memcmp(got, want, glen) == 0);
        if (r == 0 && valid)
                assert(glen == wlen); /* a clean end: everything came */
        if (r == -EPROTO)
                assert(lup_tls_rec_recv(reader, got, 16, &why) == -EPROTO && why);
        lup_tls_rec_free(reader);
        lup_tls_rec_free(peer);
        close(wire[0]);
        close(wire[1]);
        close(loop[0]);
        close(loop[1]);
        free(stream);
        free(want);
        free(got);
        return 0;
}
