/* SPDX-License-Identifier: MIT */
/*
 * The replay buffer (shim/replay.c) and the shim's reconnect (shim/client.c).
 *
 *   test_replay buffer      the buffer alone: order, boundaries, ack
 *                           trimming, chunk reuse, the bound, a model check
 *   test_replay SCENARIO    the real client against a fake lupined (a thread
 *                           here, on a UNIX socket) that cuts connections,
 *                           says GOODBYE, refuses resumes, loses replies, and
 *                           checks that every call runs exactly once, in
 *                           order. One scenario per process: the shim
 *                           connects once per process.
 *     resume      cuts, GOODBYEs, "busy" refusals and a handshake cut under
 *                 4 threads with a 2 MiB replay bound; then a lost reply
 *     gone        "session no longer exists": fail at once, one log line
 *     newsession  the server answers with a new session: fail, GOODBYE it
 *     arena       the session comes back at another address: fail
 *     timeout     nobody answers: blocked calls fail after the timeout
 *     disabled    LUPINE_RECONNECT_TIMEOUT=0: fail at once, no copies kept
 *     resume-tls  resume over tls:// (loopback TCP): every connection is
 *                 the supervisor's TLS session, the HELLO with the bearer
 *                 token, the hand-off, the worker's TLS session; cuts also
 *                 come before the hand-off
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "client.h"
#include "frame.h"
#include "log.h"
#include "net.h"
#include "replay.h"
#include "tls.h"
#include "tls_certs.h"

/* ======================================================================
 * The buffer
 * ====================================================================== */

/* A frame whose bytes are derived from (seq, len), so any mix-up shows. */
static void fill_frame(uint8_t *p, uint64_t seq, size_t len)
{
        for (size_t i = 0; i < len; i++)
                p[i] = (uint8_t)(seq * 131u + i * 7u + (i >> 8));
}

static int append_frame(struct replay *r, uint64_t seq, size_t len)
{
        uint8_t *p = malloc(len ? len : 1);
        assert_non_null(p);
        fill_frame(p, seq, len);
        /* split in three pieces, as the shim does (header, args, data) */
        size_t a = len / 3, b = len / 2;
        struct iovec iov[3] = { { p, a }, { p + a, b - a }, { p + b, len - b } };
        const uint8_t *stored = NULL;
        int rc = replay_append(r, seq, iov, 3, &stored);
        if (rc == 0) {
                assert_non_null(stored);
                assert_memory_equal(stored, p, len);
        }
        free(p);
        return rc;
}

struct visit {
        uint64_t seqs[4096];
        size_t lens[4096];
        size_t n;
        int stop_after;
};

static int visit_fn(uint64_t seq, const uint8_t *frame, size_t len, void *userdata)
{
        struct visit *v = userdata;
        uint8_t *want = malloc(len);
        assert_non_null(want);
        fill_frame(want, seq, len);
        assert_memory_equal(frame, want, len);
        free(want);
        assert_true(v->n < 4096);
        v->seqs[v->n] = seq;
        v->lens[v->n] = len;
        v->n++;
        if (v->stop_after && (int)v->n == v->stop_after)
                return -EINTR;
        return 0;
}

static void test_init_and_empty(void **state)
{
        struct replay r;
        assert_int_equal(replay_init(&r, 0, 0), -EINVAL);
        assert_int_equal(replay_init(&r, 1000, 0), 0);
        assert_int_equal(r.chunk_size, REPLAY_DEFAULT_CHUNK);
        assert_int_equal(replay_bytes(&r), 0);
        assert_int_equal(replay_count(&r), 0);
        assert_int_equal(replay_first_seq(&r), 0);
        assert_int_equal(replay_ack(&r, 100), 0);
        struct visit v = { 0 };
        assert_int_equal(replay_for_each_after(&r, 0, visit_fn, &v), 0);
        /* an empty buffer takes a frame of any size: nothing to wait for */
        assert_true(replay_fits(&r, 1));
        assert_true(replay_fits(&r, 5000));
        replay_free(&r);
        replay_free(&r);
        replay_free(NULL);
}

static void test_bad_appends(void **state)
{
        struct replay r;
        uint8_t b[8] = { 0 };
        struct iovec iov = { b, sizeof(b) }, empty = { b, 0 };
        replay_init(&r, 1 << 20, 0);
        assert_int_equal(replay_append(&r, 0, &iov, 1, NULL), -EINVAL); /* seq 0 is HELLO: never kept */
        assert_int_equal(replay_append(&r, 5, &empty, 1, NULL), -EINVAL);
        assert_int_equal(replay_append(&r, 5, &iov, 1, NULL), 0);
        assert_int_equal(replay_append(&r, 5, &iov, 1, NULL), -EINVAL); /* the same seq twice */
        assert_int_equal(replay_append(&r, 4, &iov, 1, NULL), -EINVAL); /* going back */
        assert_int_equal(replay_count(&r), 1);
        assert_int_equal(replay_bytes(&r), 8);
        /* after an ack the numbering still only goes up */
        replay_ack(&r, 5);
        assert_int_equal(replay_append(&r, 5, &iov, 1, NULL), -EINVAL);
        assert_int_equal(replay_append(&r, 6, &iov, 1, NULL), 0);
        replay_free(&r);
}

static void test_order_and_after(void **state)
{
        struct replay r;
        size_t total = 0;
        replay_init(&r, 64 << 20, 4096);
        for (uint64_t s = 1; s <= 300; s++) {
                size_t len = 1 + (s * 37) % 1500;
                assert_int_equal(append_frame(&r, s, len), 0);
                total += len;
        }
        assert_int_equal(replay_count(&r), 300);
        assert_int_equal(replay_bytes(&r), total);
        assert_int_equal(replay_first_seq(&r), 1);

        struct visit *v = calloc(1, sizeof(*v));
        assert_int_equal(replay_for_each_after(&r, 0, visit_fn, v), 300);
        for (size_t i = 0; i < 300; i++) {
                assert_int_equal(v->seqs[i], i + 1);
                assert_int_equal(v->lens[i], 1 + ((i + 1) * 37) % 1500);
        }
        /* after n: exactly the frames with seq > n, in order */
        memset(v, 0, sizeof(*v));
        assert_int_equal(replay_for_each_after(&r, 250, visit_fn, v), 50);
        assert_int_equal(v->seqs[0], 251);
        assert_int_equal(v->seqs[49], 300);
        memset(v, 0, sizeof(*v));
        assert_int_equal(replay_for_each_after(&r, 300, visit_fn, v), 0);
        assert_int_equal(replay_for_each_after(&r, 1000, visit_fn, v), 0);
        /* a negative return stops the walk and is passed on */
        memset(v, 0, sizeof(*v));
        v->stop_after = 3;
        assert_int_equal(replay_for_each_after(&r, 10, visit_fn, v), -EINTR);
        assert_int_equal(v->n, 3);
        assert_int_equal(v->seqs[2], 13);
        free(v);
        replay_free(&r);
}

static void test_ack_trims(void **state)
{
        struct replay r;
        replay_init(&r, 64 << 20, 1024);
        for (uint64_t s = 1; s <= 100; s++)
                assert_int_equal(append_frame(&r, s, 100), 0);
        assert_int_equal(replay_ack(&r, 0), 0);
        assert_int_equal(replay_count(&r), 100);
        assert_int_equal(replay_ack(&r, 10), 10);
        assert_int_equal(replay_first_seq(&r), 11);
        assert_int_equal(replay_bytes(&r), 90 * 100);
        assert_int_equal(replay_ack(&r, 5), 0); /* an older ack changes nothing */
        assert_int_equal(replay_ack(&r, 10), 0);
        assert_int_equal(replay_ack(&r, 11), 1);
        assert_int_equal(replay_first_seq(&r), 12);

        struct visit *v = calloc(1, sizeof(*v));
        assert_int_equal(replay_for_each_after(&r, 0, visit_fn, v), 89);
        assert_int_equal(v->seqs[0], 12);
        free(v);

        /* acking past the newest empties it; it goes on from there */
        assert_int_equal(replay_ack(&r, 1000), 89);
        assert_int_equal(replay_count(&r), 0);
        assert_int_equal(replay_bytes(&r), 0);
        assert_int_equal(replay_first_seq(&r), 0);
        assert_int_equal(append_frame(&r, 101, 50), 0);
        assert_int_equal(replay_first_seq(&r), 101);
        assert_int_equal(replay_bytes(&r), 50);
        replay_free(&r);
}

/* Records are 16 bytes of header plus the frame padded to 8; a chunk of 256
 * holds exactly one 240-byte frame. */
static void test_chunk_boundaries(void **state)
{
        struct replay r;
        replay_init(&r, 1 << 20, 256);
        assert_int_equal(append_frame(&r, 1, 240), 0); /* fills the chunk exactly */
        assert_ptr_equal(r.head, r.tail);
        assert_int_equal(append_frame(&r, 2, 1), 0); /* the next chunk */
        assert_ptr_not_equal(r.head, r.tail);
        assert_int_equal(append_frame(&r, 3, 232), 0); /* 24 + 240 > 256: a third */
        assert_int_equal(append_frame(&r, 4, 1000), 0); /* bigger than a chunk: its own */
        assert_int_equal(append_frame(&r, 5, 8), 0);
        assert_int_equal(replay_count(&r), 5);
        assert_int_equal(replay_bytes(&r), 240 + 1 + 232 + 1000 + 8);

        struct visit *v = calloc(1, sizeof(*v));
        assert_int_equal(replay_for_each_after(&r, 0, visit_fn, v), 5);
        for (int i = 0; i < 5; i++)
                assert_int_equal(v->seqs[i], i + 1);

        /* acking across chunk boundaries releases whole chunks: ordinary
         * ones become spares, the oversized one is unmapped */
        assert_int_equal(replay_ack(&r, 2), 2);
        assert_int_equal(replay_first_seq(&r), 3);
        assert_int_equal(r.n_spare, 2);
        assert_int_equal(replay_ack(&r, 4), 2);
        assert_int_equal(replay_first_seq(&r), 5);
        assert_int_equal(r.n_spare, 3);
        assert_int_equal(replay_ack(&r, 5), 1);
        assert_int_equal(replay_count(&r), 0);
        assert_int_equal(r.n_spare, 3);

        /* an emptied chunk then an oversized frame: no empty chunk is left in
         * front of it */
        assert_int_equal(append_frame(&r, 6, 4000), 0);
        assert_int_equal(replay_first_seq(&r), 6);
        assert_int_equal(append_frame(&r, 7, 16), 0);
        memset(v, 0, sizeof(*v));
        assert_int_equal(replay_for_each_after(&r, 0, visit_fn, v), 2);
        assert_int_equal(v->seqs[0], 6);
        assert_int_equal(v->seqs[1], 7);
        assert_int_equal(replay_ack(&r, 6), 1);
        assert_int_equal(replay_first_seq(&r), 7);
        free(v);
        replay_free(&r);
}

/* Spare chunks are reused: a steady stream maps nothing new, and spares
 * beyond the hot ones (MADV_FREE'd) still work when filled again. */
static void test_spare_reuse(void **state)
{
        struct replay r;
        replay_init(&r, 1 << 20, 1024);
        uint64_t s = 1;
        unsigned chunks = 0;
        for (int round = 0; round < 50; round++) {
                for (int i = 0; i < 20; i++, s++)
                        assert_int_equal(append_frame(&r, s, 200), 0);
                if (round == 0)
                        chunks = replay_chunks(&r);
                assert_int_equal(replay_chunks(&r), chunks);
                struct visit *v = calloc(1, sizeof(*v));
                assert_int_equal(replay_for_each_after(&r, s - 21, visit_fn, v), 20);
                free(v);
                replay_ack(&r, s - 1);
                assert_int_equal(replay_chunks(&r), chunks);
        }
        assert_true(chunks >= 5);
        assert_true(r.n_spare > REPLAY_HOT_SPARE);
        assert_int_equal(replay_count(&r), 0);
        assert_int_equal(replay_bytes(&r), 0);
        replay_free(&r);
}

/* The bound: frame bytes, checked by replay_fits(), inclusive. */
static void test_bound(void **state)
{
        struct replay r;
        replay_init(&r, 1000, 256);
        assert_true(replay_fits(&r, 1000));
        assert_true(replay_fits(&r, 1001)); /* empty: anything */
        assert_int_equal(append_frame(&r, 1, 600), 0);
        assert_true(replay_fits(&r, 400));
        assert_false(replay_fits(&r, 401));
        assert_false(replay_fits(&r, SIZE_MAX));
        assert_int_equal(append_frame(&r, 2, 400), 0);
        assert_int_equal(replay_bytes(&r), 1000);
        assert_false(replay_fits(&r, 1));
        assert_true(replay_fits(&r, 0));
        replay_ack(&r, 1);
        assert_true(replay_fits(&r, 600));
        assert_false(replay_fits(&r, 601));
        replay_ack(&r, 2);
        assert_true(replay_fits(&r, 5000));
        /* a frame larger than the bound goes into an empty buffer */
        assert_int_equal(append_frame(&r, 3, 5000), 0);
        assert_false(replay_fits(&r, 1));
        replay_free(&r);
}

/* Random appends and acks against a plain model. */
static void test_model(void **state)
{
        struct replay r;
        enum { N = 3000 };
        static uint64_t mseq[N];
        static size_t mlen[N];
        size_t lo = 0, hi = 0, bytes = 0;
        uint64_t seq = 0, acked = 0;
        uint32_t x = 12345;

        replay_init(&r, 1u << 30, 3000);
        for (int step = 0; step < 20000 && hi < N; step++) {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                if (x % 3) {
                        seq += 1 + x % 3; /* gaps are allowed: frames need not be consecutive */
                        size_t len = 1 + (x >> 8) % (x % 17 == 0 ? 9000 : 700);
                        assert_int_equal(append_frame(&r, seq, len), 0);
                        mseq[hi] = seq;
                        mlen[hi] = len;
                        hi++;
                        bytes += len;
                } else if (lo < hi) {
                        acked = mseq[lo] + (x >> 4) % (mseq[hi - 1] - mseq[lo] + 2);
                        size_t want = 0;
                        while (lo < hi && mseq[lo] <= acked) {
                                bytes -= mlen[lo++];
                                want++;
                        }
                        assert_int_equal(replay_ack(&r, acked), want);
                }
                assert_int_equal(replay_count(&r), hi - lo);
                assert_int_equal(replay_bytes(&r), bytes);
                assert_int_equal(replay_first_seq(&r), lo < hi ? mseq[lo] : 0);
        }
        struct visit *v = calloc(1, sizeof(*v));
        size_t from = hi > 4000 ? hi - 4000 : lo;
        uint64_t after = from > lo ? mseq[from - 1] : 0;
        int n = replay_for_each_after(&r, after, visit_fn, v);
        assert_int_equal((size_t)n, hi - from);
        for (size_t i = 0; i < v->n; i++) {
                assert_int_equal(v->seqs[i], mseq[from + i]);
                assert_int_equal(v->lens[i], mlen[from + i]);
        }
        free(v);
        replay_free(&r);
}

static const struct CMUnitTest buffer_tests[] = {
        cmocka_unit_test(test_init_and_empty),
        cmocka_unit_test(test_bad_appends),
        cmocka_unit_test(test_order_and_after),
        cmocka_unit_test(test_ack_trims),
        cmocka_unit_test(test_chunk_boundaries),
        cmocka_unit_test(test_spare_reuse),
        cmocka_unit_test(test_bound),
        cmocka_unit_test(test_model),
};

/* ======================================================================
 * A fake lupined, enough of it to resume sessions
 * ====================================================================== */

#define OP_ASYNC 0x7f00 /* payload: u32 thread, u32 index, filler; no reply */
#define OP_ECHO  0x7f01 /* same payload, sync; replies with a u64 hash of it */
#define THREADS 4
#define SESSION "test-replay"
#define CUDA_ERROR_DEVICE_UNAVAILABLE_ 46

enum fake_mode { FAKE_RESUME, FAKE_GONE, FAKE_NEWSESSION, FAKE_ARENA, FAKE_VANISH };

static struct fake {
        enum fake_mode mode;
        char path[108];
        int lfd;
        pthread_t thread;
        atomic_bool stop;
        atomic_int cur_fd;
        uint8_t token[LUP_TOKEN_SIZE];
        bool have_session;
        uint64_t last_seq;      /* executed */
        uint32_t next_index[THREADS];
        uint64_t executed;
        uint32_t x;             /* random state */
        unsigned cut_every;     /* mean frames between cuts (0: never) */
        unsigned frames_to_cut;
        bool lose_next_reply;   /* the next echo call is executed and unanswered */
        uint64_t lost_seq;
        /* counts */
        unsigned cuts, goodbyes, refusals, handshake_cuts, resumes, client_goodbyes, pings;
        unsigned errors;
        char first_error[256];
        uint64_t tx;            /* reply-stream bytes written (it keeps no log: nothing is resent) */
        bool resend;            /* the client's HELLO asked for the stream count */
        /* device printf output sent ahead of the next echo reply, as an
         * OUTPUT frame with these flags and status (0 and 0 when well-formed) */
        const char *output;
        uint16_t output_flags;
        uint32_t output_status;
        /* tls:// (resume-tls): the current connection's TLS session, and
         * the HELLO the "supervisor" read before handing the socket on */
        bool tls;
        char dir[64];
        struct lup_tls_ctx *sup, *wrk;
        struct lup_tls *t;
        struct lup_hdr stash_h;
        uint8_t *stash_p;
        unsigned handoffs, bad_auth, sup_cuts;
} fk;

static void fake_error(const char *fmt, ...)
{
        va_list ap;
        if (fk.errors++ == 0) {
                va_start(ap, fmt);
                vsnprintf(fk.first_error, sizeof(fk.first_error), fmt, ap);
                va_end(ap);
                fprintf(stderr, "fake lupined: %s\n", fk.first_error);
        }
}

static uint32_t fake_rand(void)
{
        fk.x ^= fk.x << 13;
        fk.x ^= fk.x >> 17;
        fk.x ^= fk.x << 5;
        return fk.x;
}

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
        uint64_t h = 1469598103934665603ull;
        for (size_t i = 0; i < n; i++)
                h = (h ^ p[i]) * 1099511628211ull;
        return h;
}

static int send_all(int fd, const void *p, size_t n)
{
        const uint8_t *b = p;
        if (fk.t)
                return lup_tls_write_full(fk.t, p, n) < 0 ? -1 : 0;
        while (n) {
                ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return -1;
                b += k;
                n -= (size_t)k;
        }
        return 0;
}

static int fake_reply(int fd, const struct lup_hdr *req, uint16_t op, uint32_t status, const void *p, size_t n)
{
        uint8_t hb[LUP_HDR_SIZE];
        struct lup_hdr h = { .len = (uint32_t)n, .op = op, .flags = LUP_F_REPLY, .lane = req ? req->lane : 0,
                             .status = status, .seq = req ? req->seq : 0, .ctx = fk.last_seq };
        lup_hdr_encode(hb, &h);
        if (op != LUP_OP_HELLO)
                fk.tx += sizeof(hb) + n;
        if (send_all(fd, hb, sizeof(hb)) < 0)
                return -1;
        return n ? send_all(fd, p, n) : 0;
}

static int fake_output(int fd)
{
        uint8_t hb[LUP_HDR_SIZE];
        size_t n = strlen(fk.output);
        struct lup_hdr h = { .len = (uint32_t)n, .op = LUP_OP_OUTPUT, .flags = fk.output_flags,
                             .status = fk.output_status, .ctx = fk.last_seq };
        lup_hdr_encode(hb, &h);
        fk.tx += sizeof(hb) + n;
        int rc = send_all(fd, hb, sizeof(hb)) < 0 || send_all(fd, fk.output, n) < 0 ? -1 : 0;
        fk.output = NULL;
        return rc;
}

static void fake_refuse(int fd, const struct lup_hdr *req, const char *msg)
{
        uint8_t b[300];
        struct lup_wr w = lup_wr_init(b, sizeof(b));
        lup_wr_str16(&w, msg, strlen(msg));
        fake_reply(fd, req, LUP_OP_HELLO, CUDA_ERROR_DEVICE_UNAVAILABLE_, b, w.len);
}

static void fake_hello_reply(int fd, const struct lup_hdr *req, const uint8_t *token, uint64_t base, uint64_t last)
{
        uint8_t b[128];
        struct lup_wr w = lup_wr_init(b, sizeof(b));
        lup_wr_u32(&w, LUP_PROTO_MAGIC);
        lup_wr_u32(&w, LUP_PROTO_VERSION);
        lup_wr_u32(&w, 13000);
        lup_wr_u32(&w, LUP_BACKEND_SIM);
        lup_wr_bytes(&w, token, LUP_TOKEN_SIZE);
        lup_wr_u64(&w, base);
        lup_wr_u64(&w, LUP_ARENA_SIZE);
        lup_wr_u64(&w, last);
        lup_wr_u32(&w, 0); /* no devices */
        if (fk.resend) { /* resends nothing: whatever the client missed is lost */
                lup_wr_u64(&w, fk.tx);
                lup_wr_u64(&w, fk.tx);
        }
        uint64_t keep = fk.last_seq;
        fk.last_seq = last;
        fake_reply(fd, req, LUP_OP_HELLO, 0, b, w.len);
        fk.last_seq = keep;
}

static int fake_read(int fd, void *p, size_t n)
{
        return fk.t ? lup_tls_read_full(fk.t, p, n, 30000) : lup_read_full(fd, p, n);
}

static int read_frame(int fd, struct lup_hdr *h, uint8_t **payload)
{
        uint8_t hb[LUP_HDR_SIZE];
        const char *why;
        if (fk.stash_p) { /* the HELLO, read before the hand-off */
                *h = fk.stash_h;
                *payload = fk.stash_p;
                fk.stash_p = NULL;
                return 0;
        }
        if (fake_read(fd, hb, sizeof(hb)) < 0)
                return -1;
        if (lup_hdr_decode(hb, h, &why) < 0) {
                fake_error("bad header from the client: %s", why);
                return -1;
        }
        *payload = malloc(h->len ? h->len : 1);
        if (fake_read(fd, *payload, h->len) < 0) {
                free(*payload);
                return -1;
        }
        return 0;
}

static void cut(int fd, bool hard)
{
        if (hard && !fk.tls) { /* (over TCP, see drain_close) */
                struct linger lg = { .l_onoff = 1, .l_linger = 0 };
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        }
        fk.cuts++;
}

static uint32_t rd32(const uint8_t *p)
{
        return lup_le32(p);
}

/* Executes one call frame; returns 1 to end the connection. */
static int fake_execute(int fd, const struct lup_hdr *h, const uint8_t *p)
{
        if (h->seq != fk.last_seq + 1) {
                fake_error("seq %llu after %llu: %s", (unsigned long long)h->seq, (unsigned long long)fk.last_seq,
                           h->seq <= fk.last_seq ? "executed twice" : "a gap");
                return 1;
        }
        fk.last_seq = h->seq;
        fk.executed++;
        switch (h->op) {
        case LUP_OP_GOODBYE:
                fk.client_goodbyes++;
                return 1;
        case LUP_OP_PING:
                fk.pings++;
                return fake_reply(fd, h, LUP_OP_PING, 0, NULL, 0) < 0;
        case OP_ASYNC:
        case OP_ECHO: {
                if (h->len < 8) {
                        fake_error("short call payload");
                        return 1;
                }
                uint32_t t = rd32(p), i = rd32(p + 4);
                if (t >= THREADS || i != fk.next_index[t]) {
                        fake_error("thread %u call %u arrived, expected call %u (lost or run twice)", t, i,
                                   t < THREADS ? fk.next_index[t] : 0);
                        return 1;
                }
                for (size_t k = 8; k < h->len; k++) {
                        if (p[k] != (uint8_t)(t * 31 + i + k)) {
                                fake_error("thread %u call %u: payload corrupted at byte %zu", t, i, k);
                                return 1;
                        }
                }
                fk.next_index[t]++;
                if (h->op == OP_ASYNC)
                        return 0;
                if (fk.lose_next_reply) {
                        fk.lose_next_reply = false;
                        fk.lost_seq = h->seq;
                        fk.tx += LUP_HDR_SIZE + 8; /* "sent", as far as it knows: it cannot resend it */
                        cut(fd, false);
                        return 1;
                }
                if (fk.output && fake_output(fd) < 0)
                        return 1;
                uint8_t hb[8];
                lup_put64(hb, hash_bytes(p, h->len));
                return fake_reply(fd, h, OP_ECHO, 0, hb, 8) < 0;
        }
        default:
                fake_error("unknown op %u", h->op);
                return 1;
        }
}

static void fake_serve(int fd)
{
        struct lup_hdr h;
        uint8_t *p;
        struct lup_hello hello;
        const char *why;

        if (read_frame(fd, &h, &p) < 0)
                return;
        if (h.op != LUP_OP_HELLO || lup_hello_decode(p, h.len, &hello, &why) < 0) {
                fake_error("first frame is not a good HELLO");
                free(p);
                return;
        }
        fk.resend = (hello.flags & LUP_HELLO_RESEND) != 0;
        free(p);
        static const uint8_t zero[LUP_TOKEN_SIZE];
        if (!fk.have_session) {
                if (memcmp(hello.token, zero, sizeof(zero)) != 0)
                        fake_error("a new session came with a token");
                for (unsigned i = 0; i < LUP_TOKEN_SIZE; i++)
                        fk.token[i] = (uint8_t)fake_rand();
                fk.have_session = true;
                fake_hello_reply(fd, &h, fk.token, LUP_ARENA_BASE + 3 * LUP_ARENA_SIZE, 0);
        } else {
                if (memcmp(hello.token, fk.token, sizeof(fk.token)) != 0 || strcmp(hello.name, SESSION) != 0) {
                        fake_error("resume with the wrong name or token");
                        fake_refuse(fd, &h, "wrong resume token for this session");
                        return;
                }
                if (hello.last_seq_seen > fk.last_seq)
                        fake_error("the client saw seq %llu executed, but only %llu were",
                                   (unsigned long long)hello.last_seq_seen, (unsigned long long)fk.last_seq);
                switch (fk.mode) {
                case FAKE_GONE:
                        fake_refuse(fd, &h, "session " SESSION " no longer exists");
                        return;
                case FAKE_NEWSESSION: {
                        uint8_t other[LUP_TOKEN_SIZE];
                        memset(other, 0x5a, sizeof(other));
                        fk.last_seq = 0; /* what a fresh session would have */
                        fake_hello_reply(fd, &h, other, LUP_ARENA_BASE + 3 * LUP_ARENA_SIZE, 0);
                        break; /* then expect the client's GOODBYE (seq 1) */
                }
                case FAKE_ARENA:
                        fake_hello_reply(fd, &h, fk.token, LUP_ARENA_BASE + 4 * LUP_ARENA_SIZE, fk.last_seq);
                        break;
                default:
                        if (fk.cut_every && fake_rand() % 4 == 0) {
                                fk.refusals++;
                                fake_refuse(fd, &h, "session " SESSION " is busy");
                                return;
                        }
                        if (fk.cut_every && fake_rand() % 6 == 0) {
                                fk.handshake_cuts++;
                                return; /* closed without an answer */
                        }
                        fk.resumes++;
                        fake_hello_reply(fd, &h, fk.token, LUP_ARENA_BASE + 3 * LUP_ARENA_SIZE, fk.last_seq);
                        break;
                }
        }
        fk.frames_to_cut = fk.cut_every ? 1 + fake_rand() % (2 * fk.cut_every) : 0;
        for (;;) {
                if (read_frame(fd, &h, &p) < 0)
                        return;
                int end = fake_execute(fd, &h, p);
                free(p);
                if (end)
                        return;
                if (fk.frames_to_cut && --fk.frames_to_cut == 0) {
                        /* Whatever the client sent after this frame was never
                         * executed: it must come again. */
                        if (fake_rand() % 2) {
                                uint8_t hb[LUP_HDR_SIZE];
                                struct lup_hdr bye = { .op = LUP_OP_GOODBYE, .ctx = fk.last_seq };
                                lup_hdr_encode(hb, &bye);
                                send_all(fd, hb, sizeof(hb));
                                fk.goodbyes++;
                        }
                        cut(fd, fake_rand() % 2);
                        return;
                }
        }
}

#define TLS_TOKEN "resume-tls token"

/* lupined's supervisor and worker on a tls:// connection: handshake, the
 * HELLO (its bearer token checked), sometimes a cut before the hand-off,
 * the hand-off, the worker's handshake and the ticket. Leaves fk.t set to
 * the worker's session and the HELLO in the stash; -1 to close. */
static int fake_tls_accept(int fd)
{
        struct lup_hdr h;
        struct lup_hello hello;
        const char *why;
        uint8_t ticket[LUP_TICKET_SIZE], *p, f[LUP_HDR_SIZE + LUP_TICKET_SIZE];

        fk.t = lup_tls_new(fk.sup, fd, NULL);
        if (!fk.t || lup_tls_handshake(fk.t, 10000) < 0 || read_frame(fd, &h, &p) < 0)
                return -1;
        if (h.op != LUP_OP_HELLO || lup_hello_decode(p, h.len, &hello, &why) < 0) {
                fake_error("first TLS frame is not a good HELLO");
                free(p);
                return -1;
        }
        if (!(hello.flags & LUP_HELLO_AUTH) || hello.auth_len != strlen(TLS_TOKEN) ||
            memcmp(hello.auth, TLS_TOKEN, hello.auth_len) != 0)
                fk.bad_auth++;
        if (fk.cut_every && fk.have_session && fake_rand() % 8 == 0) {
                fk.sup_cuts++; /* the supervisor goes before it answers */
                free(p);
                return -1;
        }
        for (unsigned i = 0; i < sizeof(ticket); i++)
                ticket[i] = (uint8_t)fake_rand();
        struct lup_hdr ho = {
                .len = LUP_TICKET_SIZE, .op = LUP_OP_HANDOFF, .flags = LUP_F_REPLY, .lane = h.lane, .seq = h.seq
        };
        lup_hdr_encode(f, &ho);
        memcpy(f + LUP_HDR_SIZE, ticket, sizeof(ticket));
        if (lup_tls_write_full(fk.t, f, sizeof(f)) < 0) {
                free(p);
                return -1;
        }
        lup_tls_free(fk.t, false);
        fk.t = lup_tls_new(fk.wrk, fd, NULL);
        if (!fk.t || lup_tls_handshake(fk.t, 10000) < 0 || lup_tls_read_full(fk.t, f, sizeof(f), 10000) < 0) {
                free(p);
                return -1;
        }
        if (lup_hdr_decode(f, &ho, &why) < 0 || ho.op != LUP_OP_HANDOFF || ho.flags != LUP_F_SYNC ||
            ho.len != LUP_TICKET_SIZE || ho.lane != h.lane || ho.seq != h.seq ||
            memcmp(f + LUP_HDR_SIZE, ticket, sizeof(ticket)) != 0) {
                fake_error("bad HANDOFF frame from the client");
                free(p);
                return -1;
        }
        fk.handoffs++;
        fk.stash_h = h;
        fk.stash_p = p;
        return 0;
}

/* Over TCP a close with unread bytes (the client's next frames) sends a
 * reset, and a reset makes the client's kernel drop answers it has not
 * read yet; the real lupined sends those again from its reply log, this
 * fake keeps none. So a tls:// connection ends with a FIN, and the socket
 * is read and closed by a thread of its own once the client closes it. */
static void *drainer(void *arg)
{
        int fd = (int)(intptr_t)arg;
        uint8_t b[65536];
        for (int i = 0; i < 3000; i++) {
                struct pollfd pfd = { .fd = fd, .events = POLLIN };
                if (poll(&pfd, 1, 10) == 1 && recv(fd, b, sizeof(b), MSG_DONTWAIT) == 0)
                        break;
        }
        close(fd);
        return NULL;
}

static void drain_close(int fd)
{
        pthread_t th;
        pthread_attr_t a;
        shutdown(fd, SHUT_WR);
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &a, drainer, (void *)(intptr_t)fd) != 0)
                close(fd);
        pthread_attr_destroy(&a);
}

static void *fake_main(void *arg)
{
        /* lupined ignores SIGPIPE; OpenSSL's writes here (an alert after
         * fake_stop's shutdown) would raise it. This thread only. */
        sigset_t pipe;
        sigemptyset(&pipe);
        sigaddset(&pipe, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe, NULL);
        while (!atomic_load(&fk.stop)) {
                struct pollfd pfd = { .fd = fk.lfd, .events = POLLIN };
                if (poll(&pfd, 1, 50) <= 0)
                        continue;
                int fd = accept4(fk.lfd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0)
                        continue;
                struct timeval tv = { .tv_sec = 30 };
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
                atomic_store(&fk.cur_fd, fd);
                if (!fk.tls || fake_tls_accept(fd) == 0)
                        fake_serve(fd);
                atomic_store(&fk.cur_fd, -1);
                free(fk.stash_p);
                fk.stash_p = NULL;
                lup_tls_free(fk.t, false);
                fk.t = NULL;
                if (fk.tls)
                        drain_close(fd);
                else
                        close(fd);
                if (fk.mode == FAKE_VANISH && fk.have_session) {
                        /* the server is gone for good: nothing listens any more */
                        close(fk.lfd);
                        fk.lfd = -1;
                        break;
                }
        }
        return NULL;
}

/* A loopback TCP listener for tls://, certificates, the token file. */
static void fake_listen_tls(void)
{
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t alen = sizeof(a);
        char p[128], k[128], url[64];
        fk.tls = true;
        snprintf(fk.dir, sizeof(fk.dir), "/tmp/lupine-test-replay-tls-XXXXXX");
        assert_non_null(mkdtemp(fk.dir));
        assert_int_equal(test_make_cert(fk.dir, "server", "lupine-server", "IP:127.0.0.1"), 0);
        snprintf(p, sizeof(p), "%s/server.pem", fk.dir);
        snprintf(k, sizeof(k), "%s/server.key", fk.dir);
        assert_int_equal(lup_tls_server_ctx_new(p, k, NULL, 0, &fk.sup, url, sizeof(url)), 0);
        assert_int_equal(
                lup_tls_server_ctx_new(p, k, NULL, LUP_TLS_READ_AHEAD | LUP_TLS_KTLS, &fk.wrk, url, sizeof(url)), 0);
        setenv("LUPINE_TLS_CA", p, 1);
        snprintf(p, sizeof(p), "%s/token", fk.dir);
        FILE *f = fopen(p, "w");
        assert_non_null(f);
        fputs(TLS_TOKEN "\n", f);
        assert_int_equal(fclose(f), 0);
        setenv("LUPINE_TOKEN_FILE", p, 1);
        fk.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        assert_true(fk.lfd >= 0);
        assert_int_equal(bind(fk.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
        assert_int_equal(listen(fk.lfd, 16), 0);
        assert_int_equal(getsockname(fk.lfd, (struct sockaddr *)&a, &alen), 0);
        snprintf(url, sizeof(url), "tls://127.0.0.1:%d", ntohs(a.sin_port));
        setenv("LUPINE_SERVER", url, 1);
}

static void fake_start_as(enum fake_mode mode, unsigned cut_every, bool tls);

static void fake_start(enum fake_mode mode, unsigned cut_every)
{
        fake_start_as(mode, cut_every, false);
}

static void fake_start_as(enum fake_mode mode, unsigned cut_every, bool tls)
{
        memset(&fk, 0, sizeof(fk));
        fk.mode = mode;
        fk.cut_every = cut_every;
        fk.x = 0x9e3779b9u ^ (uint32_t)getpid();
        atomic_store(&fk.cur_fd, -1);
        if (tls) {
                fake_listen_tls();
        } else {
                snprintf(fk.path, sizeof(fk.path), "/tmp/lupine-test-replay-%d.sock", (int)getpid());
                unlink(fk.path);
                char ep[160];
                snprintf(ep, sizeof(ep), "unix:%s", fk.path);
                struct lup_endpoint e;
                assert_int_equal(lup_endpoint_parse(ep, &e), 0);
                fk.lfd = lup_listen(&e, 16);
                assert_true(fk.lfd >= 0);
                setenv("LUPINE_SERVER", ep, 1);
        }
        setenv("LUPINE_SESSION", SESSION, 1);
        assert_int_equal(pthread_create(&fk.thread, NULL, fake_main, NULL), 0);
}

static void fake_stop(void)
{
        atomic_store(&fk.stop, true);
        int fd = atomic_load(&fk.cur_fd);
        if (fd >= 0)
                shutdown(fd, SHUT_RDWR);
        pthread_join(fk.thread, NULL);
        if (fk.lfd >= 0)
                close(fk.lfd);
        if (fk.path[0])
                unlink(fk.path);
        if (fk.tls) {
                static const char *files[] = { "server.pem", "server.key", "token" };
                char p[128];
                for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
                        snprintf(p, sizeof(p), "%s/%s", fk.dir, files[i]);
                        unlink(p);
                }
                rmdir(fk.dir);
                lup_tls_ctx_free(fk.sup);
                lup_tls_ctx_free(fk.wrk);
        }
}

/* ---- the client's log, captured */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_text[1 << 16];
static size_t log_len;

static void log_sink(int cat, int level, const struct lup_log_fields *f, const char *msg, void *userdata)
{
        pthread_mutex_lock(&log_lock);
        int n = snprintf(log_text + log_len, sizeof(log_text) - log_len, "%s\n", msg);
        if (n > 0 && (size_t)n < sizeof(log_text) - log_len)
                log_len += (size_t)n;
        pthread_mutex_unlock(&log_lock);
        if (getenv("TEST_REPLAY_VERBOSE"))
                fprintf(stderr, "client log: %s\n", msg);
}

static unsigned log_count(const char *needle)
{
        unsigned n = 0;
        pthread_mutex_lock(&log_lock);
        for (const char *p = log_text; (p = strstr(p, needle)); p++)
                n++;
        pthread_mutex_unlock(&log_lock);
        return n;
}

static void client_start(void)
{
        lup_log_set_sink(log_sink, NULL);
        assert_int_equal(lupc_init(), CUDA_SUCCESS);
        if (getenv("TEST_REPLAY_VERBOSE"))
                lup_log_setup("lupine", LUP_LOG_DEBUG);
}

/* ---- the client's calls */

static CUresult call(unsigned t, uint32_t i, size_t len, bool sync)
{
        uint8_t *p = malloc(len);
        assert_non_null(p);
        lup_put32(p, t);
        lup_put32(p + 4, i);
        for (size_t k = 8; k < len; k++)
                p[k] = (uint8_t)(t * 31 + i + k);
        CUresult r;
        if (sync) {
                uint8_t rep[8];
                size_t n = 0;
                r = lupc_call(OP_ECHO, LUPC_SYNC, p, len, rep, sizeof(rep), &n);
                if (r == CUDA_SUCCESS && (n != 8 || lup_le64(rep) != hash_bytes(p, len))) {
                        fprintf(stderr, "thread %u call %u: wrong echo\n", t, i);
                        r = CUDA_ERROR_UNKNOWN;
                }
        } else {
                r = lupc_call(OP_ASYNC, LUPC_ASYNC, p, len, NULL, 0, NULL);
        }
        free(p);
        return r;
}

#define CALLS_PER_THREAD 500

static atomic_uint client_errors;
static atomic_size_t replay_peak;

static void *client_thread(void *arg)
{
        unsigned t = (unsigned)(uintptr_t)arg;
        uint32_t x = 777 + t;
        struct lupc_conn_stats st;
        for (uint32_t i = 0; i < CALLS_PER_THREAD; i++) {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                size_t len = x % 41 == 0 ? (1u << 20) : 8 + x % 6000;
                CUresult r = call(t, i, len, i % 5 == 4);
                if (r != CUDA_SUCCESS) {
                        fprintf(stderr, "thread %u call %u failed with %d\n", t, i, (int)r);
                        atomic_fetch_add(&client_errors, 1);
                        return NULL;
                }
                lupc_conn_stats(&st);
                size_t peak = atomic_load(&replay_peak);
                while (st.replay_bytes > peak && !atomic_compare_exchange_weak(&replay_peak, &peak, st.replay_bytes))
                        ;
        }
        return NULL;
}

static void run_threads(void)
{
        pthread_t th[THREADS];
        for (unsigned t = 0; t < THREADS; t++)
                assert_int_equal(pthread_create(&th[t], NULL, client_thread, (void *)(uintptr_t)t), 0);
        for (unsigned t = 0; t < THREADS; t++)
                pthread_join(th[t], NULL);
}

static uint64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- scenarios */

static void resume_scenario(bool tls)
{
        setenv("LUPINE_REPLAY_MAX_MB", "2", 1);
        setenv("LUPINE_RECONNECT_TIMEOUT", "60", 1);
        fake_start_as(FAKE_RESUME, 60, tls);
        client_start();
        struct lupc_conn_stats st;
        lupc_conn_stats(&st);
        assert_int_equal(st.replay_max, 2u << 20);

        run_threads();
        assert_int_equal(atomic_load(&client_errors), 0);
        /* a final synchronous call: everything before it ran */
        assert_int_equal(lupc_call(LUP_OP_PING, LUPC_SYNC, NULL, 0, NULL, 0, NULL), CUDA_SUCCESS);
        fk.cut_every = 0;

        fprintf(stderr, "resume: %llu calls executed, %u cuts (%u after a GOODBYE), %u busy refusals, %u handshake cuts, %u resumes, replay peak %zu bytes\n",
                (unsigned long long)fk.executed, fk.cuts, fk.goodbyes, fk.refusals, fk.handshake_cuts, fk.resumes,
                atomic_load(&replay_peak));
        assert_int_equal(fk.errors, 0);
        for (unsigned t = 0; t < THREADS; t++)
                assert_int_equal(fk.next_index[t], CALLS_PER_THREAD);
        assert_true(fk.cuts >= 10);
        assert_true(fk.goodbyes >= 1);
        /* the bound held: at most one flow-control PING per thread beyond it */
        assert_true(atomic_load(&replay_peak) <= (2u << 20) + THREADS * LUP_HDR_SIZE);
        lupc_conn_stats(&st);
        assert_int_equal(st.state, 0);
        assert_int_equal(st.acked, st.sent);
        assert_int_equal(st.replay_bytes, 0); /* trimmed by the last ack */
        /* one loss, one resume (a cut during a resend is part of the same loss) */
        assert_true(fk.cuts >= st.resumes && fk.resumes >= st.resumes && st.resumes >= 10);
        assert_int_equal(log_count("reconnecting for up to 60 s"), st.resumes);
        assert_int_equal(log_count("resumed session " SESSION " at seq"), st.resumes);
        assert_int_equal(log_count("lost the session"), 0);

        /* Flow control: asynchronous 1 MiB calls and nothing else would grow
         * the buffer without end; PINGs keep it within the bound. */
        unsigned pings = fk.pings;
        atomic_store(&replay_peak, 0);
        for (uint32_t i = 0; i < 24; i++) {
                assert_int_equal(call(1, CALLS_PER_THREAD + i, 1u << 20, false), CUDA_SUCCESS);
                lupc_conn_stats(&st);
                assert_true(st.replay_bytes <= (2u << 20) + LUP_HDR_SIZE);
                if (st.replay_bytes > atomic_load(&replay_peak))
                        atomic_store(&replay_peak, st.replay_bytes);
        }
        assert_true(atomic_load(&replay_peak) > (1u << 20));
        assert_true(fk.pings - pings >= 10);

        /* A reply lost with the connection: that one call fails, and says
         * which; the session carries on. */
        fk.lose_next_reply = true;
        assert_int_equal(call(0, CALLS_PER_THREAD, 100, true), CUDA_ERROR_DEVICE_UNAVAILABLE);
        char want[96];
        snprintf(want, sizeof(want), "(call seq %llu) was lost with the connection", (unsigned long long)fk.lost_seq);
        assert_int_equal(log_count(want), 1);
        assert_int_equal(call(0, CALLS_PER_THREAD + 1, 100, true), CUDA_SUCCESS);
        assert_int_equal(fk.errors, 0);
        if (tls) {
                fprintf(stderr, "resume-tls: %u hand-offs, %u cuts before one\n", fk.handoffs, fk.sup_cuts);
                assert_int_equal(fk.bad_auth, 0);
                assert_true(fk.handoffs >= st.resumes + 1);
                assert_true(fk.sup_cuts >= 1);
        }
        fake_stop();
}

static void test_resume(void **state)
{
        resume_scenario(false);
}

static void test_resume_tls(void **state)
{
        resume_scenario(true);
}

/* The session is lost for good: every later call fails at once. */
static void expect_lost(const char *needle)
{
        assert_int_equal(call(0, 1, 64, false), CUDA_ERROR_DEVICE_UNAVAILABLE);
        assert_int_equal(call(0, 1, 64, true), CUDA_ERROR_DEVICE_UNAVAILABLE);
        assert_int_equal(lupc_call(LUP_OP_PING, LUPC_SYNC, NULL, 0, NULL, 0, NULL), CUDA_ERROR_DEVICE_UNAVAILABLE);
        struct lupc_conn_stats st;
        lupc_conn_stats(&st);
        assert_int_equal(st.state, 2);
        assert_int_equal(st.replay_bytes, 0);
        assert_int_equal(log_count("lost the session"), 1);
        assert_int_equal(log_count(needle), 1);
}

/* Several threads blocked in calls when the server goes; all of them get
 * the error, and only one line is logged. */
struct blocked {
        pthread_t th;
        unsigned t;
        CUresult r;
};

static void *blocked_thread(void *arg)
{
        struct blocked *b = arg;
        CUresult r = CUDA_SUCCESS;
        for (uint32_t i = 0; r == CUDA_SUCCESS && i < 1000000; i++)
                r = call(b->t, i, 64, i % 3 == 2);
        b->r = r;
        return NULL;
}

static void lose_with_threads(void)
{
        struct blocked b[THREADS];
        for (unsigned t = 0; t < THREADS; t++) {
                b[t].t = t;
                assert_int_equal(pthread_create(&b[t].th, NULL, blocked_thread, &b[t]), 0);
        }
        for (unsigned t = 0; t < THREADS; t++) {
                pthread_join(b[t].th, NULL);
                assert_int_equal(b[t].r, CUDA_ERROR_DEVICE_UNAVAILABLE);
        }
}

static void test_gone(void **state)
{
        fake_start(FAKE_GONE, 200);
        client_start();
        uint64_t t0 = mono_ms();
        lose_with_threads();
        assert_true(mono_ms() - t0 < 20000);
        expect_lost("says: session " SESSION " no longer exists");
        assert_int_equal(log_count("reconnecting for up to 900 s"), 1);
        assert_int_equal(fk.errors, 0);
        fake_stop();
}

static void test_newsession(void **state)
{
        fake_start(FAKE_NEWSESSION, 100);
        client_start();
        lose_with_threads();
        expect_lost("no longer exists there (the server started a new one)");
        /* the client ended the server's accidental new session */
        for (int i = 0; i < 100 && fk.client_goodbyes == 0; i++)
                usleep(10000);
        assert_int_equal(fk.client_goodbyes, 1);
        fake_stop();
}

static void test_arena(void **state)
{
        fake_start(FAKE_ARENA, 100);
        client_start();
        lose_with_threads();
        expect_lost("the server restored the session at another address");
        fake_stop();
}

static void test_timeout(void **state)
{
        setenv("LUPINE_RECONNECT_TIMEOUT", "2", 1);
        fake_start(FAKE_VANISH, 100);
        client_start();
        uint64_t t0 = mono_ms();
        lose_with_threads();
        uint64_t took = mono_ms() - t0;
        assert_true(took >= 1900 && took < 15000);
        expect_lost("could not reconnect to lupined within 2 s (last error: ");
        assert_int_equal(log_count("reconnecting for up to 2 s"), 1);
        fake_stop();
}

static void test_disabled(void **state)
{
        setenv("LUPINE_RECONNECT_TIMEOUT", "0", 1);
        fake_start(FAKE_RESUME, 100);
        client_start();
        struct lupc_conn_stats st;
        lupc_conn_stats(&st);
        assert_int_equal(st.replay_max, 0);
        lose_with_threads();
        lupc_conn_stats(&st);
        assert_int_equal(st.replay_frames, 0);
        assert_int_equal(log_count("reconnecting"), 0);
        assert_int_equal(log_count("CUDA calls now fail with CUDA_ERROR_DEVICE_UNAVAILABLE"), 1);
        assert_int_equal(call(0, 1, 64, true), CUDA_ERROR_DEVICE_UNAVAILABLE);
        fake_stop();
}

/* ---- device printf: OUTPUT frames from the server */

static int saved_stdout = -1;

static void capture_begin(void)
{
        int fd = memfd_create("replay-stdout", MFD_CLOEXEC);
        assert_true(fd >= 0);
        fflush(stdout);
        saved_stdout = dup(STDOUT_FILENO);
        assert_true(saved_stdout >= 0 && dup2(fd, STDOUT_FILENO) == STDOUT_FILENO);
        close(fd);
}

/* What reached fd 1 since the last call, NUL-terminated. */
static void capture_take(char *buf, size_t cap)
{
        off_t end = lseek(STDOUT_FILENO, 0, SEEK_CUR);
        ssize_t n = pread(STDOUT_FILENO, buf, end < (off_t)cap - 1 ? (size_t)end : cap - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
        if (ftruncate(STDOUT_FILENO, 0) != 0 || lseek(STDOUT_FILENO, 0, SEEK_SET) != 0)
                buf[0] = '\0';
}

static void capture_end(void)
{
        dup2(saved_stdout, STDOUT_FILENO);
        close(saved_stdout);
}

/* A well-formed OUTPUT frame ahead of a reply is on the client's stdout
 * when the call returns; one with flags or a status set is a protocol
 * error: nothing of it is printed, the call fails and the session is given
 * up (a server that breaks the protocol is not resumed). */
static void output_scenario(uint16_t flags, uint32_t status)
{
        char good[128], bad[128];
        setenv("LUPINE_RECONNECT_TIMEOUT", "60", 1);
        fake_start(FAKE_RESUME, 0);
        client_start();
        capture_begin();
        fk.output = "device says hello from block 0 thread 0 round 1\n";
        CUresult r1 = call(0, 0, 64, true);
        capture_take(good, sizeof(good));
        fk.output = "forged output\n";
        fk.output_flags = flags;
        fk.output_status = status;
        CUresult r2 = call(0, 1, 64, true);
        capture_take(bad, sizeof(bad));
        capture_end();

        assert_int_equal(r1, CUDA_SUCCESS);
        assert_string_equal(good, "device says hello from block 0 thread 0 round 1\n");
        assert_int_equal(r2, CUDA_ERROR_DEVICE_UNAVAILABLE);
        assert_string_equal(bad, "");
        assert_int_equal(log_count("connection to lupined lost (malformed OUTPUT frame)"), 1);
        assert_int_equal(log_count("reconnecting"), 0);
        struct lupc_conn_stats st;
        lupc_conn_stats(&st);
        assert_int_equal(st.state, 2);
        assert_int_equal(call(0, 2, 64, true), CUDA_ERROR_DEVICE_UNAVAILABLE);
        assert_int_equal(fk.errors, 0);
        fake_stop();
}

static void test_output_flags(void **state)
{
        output_scenario(LUP_F_REPLY, 0);
}

static void test_output_status(void **state)
{
        output_scenario(0, CUDA_ERROR_LAUNCH_FAILED);
}

int main(int argc, char **argv)
{
        const char *which = argc > 1 ? argv[1] : "buffer";
        static const struct {
                const char *name;
                void (*fn)(void **);
        } scenarios[] = {
                { "resume", test_resume },
                { "gone", test_gone },
                { "newsession", test_newsession },
                { "arena", test_arena },
                { "timeout", test_timeout },
                { "disabled", test_disabled },
                { "output-flags", test_output_flags },
                { "output-status", test_output_status },
                { "resume-tls", test_resume_tls },
        };

        if (strcmp(which, "buffer") == 0)
                return cmocka_run_group_tests_name("replay buffer", buffer_tests, NULL, NULL);
        for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
                if (strcmp(which, scenarios[i].name) == 0) {
                        const struct CMUnitTest t[] = { { scenarios[i].name, scenarios[i].fn, NULL, NULL, NULL } };
                        return _cmocka_run_group_tests(scenarios[i].name, t, 1, NULL, NULL);
                }
        }
        fprintf(stderr, "usage: test_replay [buffer|resume|gone|newsession|arena|timeout|disabled|output-flags|output-status]\n");
        return 2;
}
