/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the server side of lupine's TLS (common/tls.c), as the
 * supervisor runs the first TLS session of a connection
 * (supervisor/conn.c: conn_tls_peek, conn_tls_ready), and for the worker's
 * check of the HANDOFF frame that opens the second one
 * (worker/tls_conn.c: lupw_handoff_check).
 *
 * The first byte chooses the mode, by its value modulo 3:
 *   0  the rest is what a client sent on a TLS port. It is written into one
 *      end of a socketpair (at most 64 KiB; libFuzzer's -max_len keeps it
 *      smaller), which is then shut down for writing; the other end is the
 *      server's, through lup_tls_new over the supervisor's context (flags
 *      0). The peek check (lup_tls_looks_like_hello) refuses a stream that
 *      is not a ClientHello, as the supervisor does; then
 *      lup_tls_handshake_step runs until it is done or fails, and when it
 *      is done, lup_tls_recv_nb until the end of the stream; what it
 *      received is decoded as the supervisor would (a header, a HELLO).
 *   1  the same with --tls-client-ca (mutual TLS: the server asks for a
 *      client certificate).
 *   2  u32 lane, u64 seq (the HELLO the supervisor admitted), the ticket
 *      it issued (16 bytes), then what the client sent in the second
 *      session: a 40-byte header and 16 bytes (zeros where the input is
 *      shorter). lupw_handoff_check decides on the header, then on the
 *      header and the ticket; its answer is checked against the rule
 *      (lupine/wire.h, "TLS") computed here.
 *
 * The server's key (EC P-256) and self-signed certificate are made once,
 * in memory, and written to a temporary directory for
 * lup_tls_server_ctx_new (removed at once). OpenSSL's random numbers come
 * from a generator here that starts from the same state in every run, so
 * the server's key, certificate and every handshake's randomness are the
 * same each time: a recorded client's whole stream (its Finished and its
 * encrypted HELLO included) completes the handshake again when replayed,
 * and a crash replays exactly. To record such streams as seeds:
 *
 *     LUP_FUZZ_TLS_RECORD=tests/fuzz/corpus/fuzz_tls_server \
 *         build/tests/fuzz/fuzz_tls_server -n 0 tests/fuzz/corpus/fuzz_tls_server
 *
 * runs a real lup_tls client against the server in memory and writes what
 * the client sent (modes 0 and 1, the latter with a client certificate).
 *
 * Beyond "no crash and no leak" (every object is freed each run): a step
 * that asks again wants POLLIN or POLLOUT, a failure has a reason in words,
 * recv_nb returns at most what was asked, and the recorded seeds do
 * complete (checked when they are recorded).
 */
/* the checks are the point of a fuzz target: keep assert() in every build type */
#undef NDEBUG
#define OPENSSL_SUPPRESS_DEPRECATED /* RAND_set_rand_method: the only way to make libssl deterministic */
#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

#include "frame.h"
#include "tls.h"
#include "worker/session.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_STREAM (64u << 10) /* a socketpair holds this much without blocking */

/* ---- OpenSSL's random numbers, the same in every run */

static uint64_t rng_state;

static void rng_reset(void)
{
        rng_state = 0x6c7570696e65ull; /* "lupine" */
}

static int rng_bytes(unsigned char *buf, int num)
{
        for (int i = 0; i < num; i++) {
                uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
                z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
                z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
                buf[i] = (unsigned char)(z ^ (z >> 31));
        }
        return 1;
}

static int rng_status(void)
{
        return 1;
}

static const RAND_METHOD fixed_rand = {
        .bytes = rng_bytes,
        .pseudorand = rng_bytes,
        .status = rng_status,
};

/* ---- the server's key and certificate, and the contexts */

static struct lup_tls_ctx *srv_ctx, *srv_mtls_ctx, *cli_ctx;

static void write_pem(const char *path, X509 *x, EVP_PKEY *k)
{
        FILE *f = fopen(path, "we");
        assert(f);
        assert(x ? PEM_write_X509(f, x) == 1 : PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL) == 1);
        assert(fclose(f) == 0);
}

static X509 *self_signed(EVP_PKEY *k)
{
        X509 *x = X509_new();
        X509_NAME *n = X509_NAME_new();

        assert(x && n);
        assert(X509_set_version(x, 2) == 1);
        assert(ASN1_INTEGER_set(X509_get_serialNumber(x), 1) == 1);
        /* fixed dates: the certificate is the same bytes in every run */
        assert(ASN1_TIME_set_string_X509(X509_getm_notBefore(x), "20200101000000Z") == 1);
        assert(ASN1_TIME_set_string_X509(X509_getm_notAfter(x), "20991231235959Z") == 1);
        assert(X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"lupine-fuzz", -1, -1, 0) == 1);
        assert(X509_set_subject_name(x, n) == 1 && X509_set_issuer_name(x, n) == 1);
        assert(X509_set_pubkey(x, k) == 1);
        assert(X509_sign(x, k, EVP_sha256()) > 0);
        X509_NAME_free(n);
        return x;
}

static void setup(bool with_client)
{
        char dir[] = "/tmp/lup-fuzz-tls-XXXXXX", cert[64], key[64], err[512];

        signal(SIGPIPE, SIG_IGN); /* as lupined: a write to a closed peer is an error, not a signal */
        assert(RAND_set_rand_method(&fixed_rand) == 1);
        rng_reset();
        EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
        assert(k);
        X509 *x = self_signed(k);
        assert(mkdtemp(dir));
        snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
        snprintf(key, sizeof(key), "%s/key.pem", dir);
        write_pem(cert, x, NULL);
        write_pem(key, NULL, k);
        if (lup_tls_server_ctx_new(cert, key, NULL, 0, &srv_ctx, err, sizeof(err)) < 0 ||
            lup_tls_server_ctx_new(cert, key, cert, 0, &srv_mtls_ctx, err, sizeof(err)) < 0 ||
            (with_client && lup_tls_client_ctx_new(cert, cert, key, 0, &cli_ctx, err, sizeof(err)) < 0)) {
                fprintf(stderr, "fuzz_tls_server: %s\n", err);
                abort();
        }
        unlink(cert);
        unlink(key);
        rmdir(dir);
        X509_free(x);
        EVP_PKEY_free(k);
}

/* ---- mode 0 and 1: the supervisor's first TLS session */

struct tls_result {
        bool refused; /* by the peek check */
        bool done;    /* the handshake */
        size_t got;   /* application bytes received */
        bool hello;   /* they began with a HELLO frame that decodes */
};

static void write_all(int fd, const uint8_t *p, size_t n)
{
        while (n > 0) {
                ssize_t k = write(fd, p, n);
                assert(k > 0);
                p += k;
                n -= (size_t)k;
        }
}

/* What the supervisor does with the first bytes after the handshake. */
static bool decode_like_supervisor(const uint8_t *p, size_t n)
{
        struct lup_hdr h;
        struct lup_hello hello;
        const char *why = NULL;

        if (n < LUP_HDR_SIZE)
                return false;
        if (lup_hdr_decode(p, &h, &why) < 0) {
                assert(why != NULL);
                return false;
        }
        if (h.op != LUP_OP_HELLO || h.len > n - LUP_HDR_SIZE)
                return false;
        return lup_hello_decode(p + LUP_HDR_SIZE, h.len, &hello, &why) == 0;
}

static void recv_all(struct lup_tls *t, struct tls_result *r)
{
        static uint8_t buf[MAX_STREAM];

        /* the end of the stream ends it; a bound for an -EAGAIN that never ends */
        for (int i = 0; i < 4096 && r->got < sizeof(buf); i++) {
                size_t want = i & 1 ? sizeof(buf) - r->got : 1 + (size_t)i % 97;
                if (want > sizeof(buf) - r->got)
                        want = sizeof(buf) - r->got;
                ssize_t k = lup_tls_recv_nb(t, buf + r->got, want);
                assert(k <= (ssize_t)want);
                if (k > 0) {
                        r->got += (size_t)k;
                        continue;
                }
                if (k < 0 && k != -EAGAIN)
                        assert(lup_tls_error(t)[0] != 0);
                break;
        }
        r->hello = decode_like_supervisor(buf, r->got);
}

static struct tls_result run_tls(struct lup_tls_ctx *ctx, const uint8_t *p, size_t n)
{
        struct tls_result r = { 0 };
        uint8_t peek[LUP_HDR_SIZE];
        int sv[2], rc = -EAGAIN;

        assert(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        write_all(sv[1], p, n < MAX_STREAM ? n : MAX_STREAM);
        assert(shutdown(sv[1], SHUT_WR) == 0);
        rng_reset();
        struct lup_tls *t = lup_tls_new(ctx, sv[0], NULL);
        assert(t);

        /* conn_tls_peek: six bytes tell whether it is a ClientHello */
        ssize_t k = recv(sv[0], peek, sizeof(peek), MSG_PEEK | MSG_DONTWAIT);
        if (k >= 6 && !lup_tls_looks_like_hello(peek, (size_t)k)) {
                r.refused = true;
                lup_tls_free(t, false);
                goto out;
        }
        for (int i = 0; i < 64 && rc == -EAGAIN; i++) {
                rc = lup_tls_handshake_step(t);
                if (rc == -EAGAIN) {
                        short w = lup_tls_want(t);
                        assert(w == POLLIN || w == POLLOUT);
                }
        }
        if (rc == 0) {
                char cn[65];
                r.done = true;
                recv_all(t, &r);
                if (lup_tls_peer_cn(t, cn, sizeof(cn)) == 0)
                        assert(strlen(cn) < sizeof(cn) - 1);
        } else if (rc != -EAGAIN) {
                assert(lup_tls_error(t)[0] != 0);
        }
        /* a done session goes on to the worker: no closure alert */
        lup_tls_free(t, !r.done);
out:
        close(sv[0]);
        close(sv[1]);
        return r;
}

/* ---- mode 2: the worker's HANDOFF check */

static void run_handoff(const uint8_t *p, size_t n)
{
        uint8_t in[4 + 8 + LUP_TICKET_SIZE + LUP_HDR_SIZE + LUP_TICKET_SIZE] = { 0 };
        const uint8_t *ticket = in + 12, *hb = ticket + LUP_TICKET_SIZE, *got = hb + LUP_HDR_SIZE;
        struct lup_hdr req = { 0 }, h;
        const char *why = "unset", *why2 = "unset";

        memcpy(in, p, n < sizeof(in) ? n : sizeof(in));
        memcpy(&req.lane, in, 4);
        memcpy(&req.seq, in + 4, 8);

        int rc_hdr = lupw_handoff_check(hb, NULL, ticket, &req, &why);
        int rc = lupw_handoff_check(hb, got, ticket, &req, &why2);

        bool hdr_ok = lup_hdr_decode(hb, &h, &(const char *){ NULL }) == 0 && h.op == LUP_OP_HANDOFF &&
                      h.len == LUP_TICKET_SIZE && h.lane == req.lane && h.seq == req.seq;
        bool ticket_ok = memcmp(got, ticket, LUP_TICKET_SIZE) == 0;
        assert(rc_hdr == (hdr_ok ? 0 : -EBADMSG));
        assert((rc_hdr == 0) == (why == NULL));
        assert(rc == (!hdr_ok ? -EBADMSG : ticket_ok ? 0 : -EACCES));
        assert((rc == 0) == (why2 == NULL));
}

/* ---- recording seeds: a real client against the server, in memory */

/* Moves what is there from one socket to the other, appending it to rec. */
static void relay(int from, int to, uint8_t *rec, size_t *at, size_t cap)
{
        uint8_t buf[16384];

        for (;;) {
                ssize_t k = recv(from, buf, sizeof(buf), MSG_DONTWAIT);
                if (k <= 0)
                        return;
                if (rec) {
                        assert(*at + (size_t)k <= cap);
                        memcpy(rec + *at, buf, (size_t)k);
                        *at += (size_t)k;
                }
                write_all(to, buf, (size_t)k);
        }
}

static size_t hello_frame(uint8_t *out, size_t cap)
{
        struct lup_hello h = { .proto_version = LUP_PROTO_VERSION, .cuda_version = 13000, .flags = LUP_HELLO_AUTH };
        struct lup_hdr hdr = { .op = LUP_OP_HELLO, .flags = LUP_F_SYNC, .lane = 1, .seq = 1 };
        size_t n;

        snprintf(h.name, sizeof(h.name), "job-1");
        h.auth_len = 10;
        memcpy(h.auth, "fuzz-token", 10);
        assert(lup_hello_encode(out + LUP_HDR_SIZE, cap - LUP_HDR_SIZE, &h, &n) == 0);
        hdr.len = (uint32_t)n;
        lup_hdr_encode(out, &hdr);
        return LUP_HDR_SIZE + n;
}

/* The client's side of a whole session: its handshake, then (with_hello)
 * a HELLO frame and its closure alert, else nothing more. */
static void record(const char *dir, const char *name, uint8_t mode, bool with_hello)
{
        static uint8_t rec[MAX_STREAM];
        struct lup_tls_ctx *ctx = mode == 1 ? srv_mtls_ctx : srv_ctx;
        struct lup_tls *cl, *sv = NULL;
        bool cdone = false, sdone = false;
        size_t at = 1;
        int c[2], s[2];

        rec[0] = mode;
        assert(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, c) == 0);
        assert(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s) == 0);
        cl = lup_tls_new(cli_ctx, c[0], NULL);
        assert(cl);
        for (int i = 0; i < 64 && !(cdone && sdone); i++) {
                int rc;
                if (!cdone) {
                        rc = lup_tls_handshake_step(cl);
                        assert(rc == 0 || rc == -EAGAIN);
                        cdone = rc == 0;
                }
                relay(c[1], s[1], rec, &at, sizeof(rec));
                if (!sv) {
                        /* from here on, the server draws what it draws in run_tls */
                        rng_reset();
                        sv = lup_tls_new(ctx, s[0], NULL);
                        assert(sv);
                }
                if (!sdone) {
                        rc = lup_tls_handshake_step(sv);
                        assert(rc == 0 || rc == -EAGAIN);
                        sdone = rc == 0;
                }
                relay(s[1], c[1], NULL, NULL, 0);
        }
        assert(cdone && sdone);
        if (with_hello) {
                uint8_t f[512];
                assert(lup_tls_write_full(cl, f, hello_frame(f, sizeof(f))) == 0);
        }
        lup_tls_free(cl, with_hello);
        relay(c[1], s[1], rec, &at, sizeof(rec));
        lup_tls_free(sv, false);
        for (int i = 0; i < 2; i++) {
                close(c[i]);
                close(s[i]);
        }

        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        FILE *f = fopen(path, "we");
        assert(f && fwrite(rec, 1, at, f) == at && fclose(f) == 0);
        /* replayed, the stream completes the handshake again */
        struct tls_result r = run_tls(ctx, rec + 1, at - 1);
        assert(r.done && r.hello == with_hello);
        fprintf(stderr, "fuzz_tls_server: wrote %s (%zu bytes; replayed: handshake done, %zu bytes received)\n", path,
                at, r.got);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static bool ready;

        if (!ready) {
                const char *dir = getenv("LUP_FUZZ_TLS_RECORD");
                setup(dir != NULL);
                ready = true;
                if (dir) {
                        record(dir, "rec-handshake-hello.bin", 0, true);
                        record(dir, "rec-handshake-only.bin", 0, false);
                        record(dir, "rec-mtls-hello.bin", 1, true);
                }
        }
        if (size < 1)
                return 0;
        switch (data[0] % 3) {
        case 0:
                run_tls(srv_ctx, data + 1, size - 1);
                break;
        case 1:
                run_tls(srv_mtls_ctx, data + 1, size - 1);
                break;
        default:
                run_handoff(data + 1, size - 1);
                break;
        }
        return 0;
}
