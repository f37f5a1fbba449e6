/* SPDX-License-Identifier: MIT */
/*
 * The shim's connection: endpoint selection, HELLO, framed calls, and the
 * reconnect that makes a lost connection invisible to the application.
 *
 * Connection states (conn.state):
 *   UP            frames flow. Every frame read from the server carries in
 *                 its header the last sequence number the server executed;
 *                 that acknowledges (and trims) the replay buffer.
 *   RECONNECTING  a read or write failed, or the server said GOODBYE.
 *                 Exactly one thread (whoever next needs the connection and
 *                 finds the reader role free) runs reconnect(); every other
 *                 thread blocks inside its CUDA call: senders before they
 *                 send, waiters in wait_reply(). Nobody sees an error.
 *   DEAD          reconnecting is disabled (LUPINE_RECONNECT_TIMEOUT=0),
 *                 timed out, was refused for good, or the server broke the
 *                 protocol. Every call fails with CUDA_ERROR_DEVICE_UNAVAILABLE.
 *
 * Locks: send_lock orders frames on the wire and guards next_seq and the
 * replay buffer; recv_lock guards waiters, landings, the reader role and
 * state changes. The order is send_lock, then recv_lock. state moves to
 * RECONNECTING or DEAD under recv_lock and back to UP under both, so a
 * sender that sees UP under send_lock writes to the connection that is
 * current (or to one that has just failed, whose frames are resent).
 *
 * Exactly-once: every request frame (seq >= 1) is copied into the replay
 * buffer before it is written. After a reconnect the server says it executed
 * up to N; the frames after N are written again, in order, with their
 * original sequence numbers, before any new frame (the reconnecting thread
 * holds send_lock throughout), and nothing at or below N is ever resent.
 */
#include "client.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "frame.h"
#include "image.h"
#include "log.h"
#include "net.h"
#include "ops.h"
#include "replay.h"

#define LUPC_DEFAULT_SERVER "127.0.0.1:14833"
#define LUPC_MAX_ENDPOINTS 8
#define LUPC_DEFAULT_RECONNECT_S 900u
#define LUPC_MAX_RECONNECT_S (30u * 24u * 3600u)
#define LUPC_MIN_REPLAY_MB 2u                 /* above one maximal frame */
#define LUPC_MAX_REPLAY_MB (64u * 1024u)
#define LUPC_BACKOFF_FIRST_MS 100u
#define LUPC_BACKOFF_CAP_MS 10000u
#define LUPC_HANDSHAKE_TIMEOUT_MS 10000      /* a reconnect HELLO must be answered within this */
#define LUPC_RESEND_STALL_MS 60000           /* a resend that moves no byte for this long fails */
#define LUPC_ACK_INTERVAL (4u << 20)         /* ask for an acknowledgement every this many bytes sent */

/* One thread waiting for a reply. */
struct lupc_waiter {
        uint64_t seq;
        uint16_t op;
        uint8_t *rep;
        size_t cap;
        size_t len;
        CUresult status;
        bool done;
        struct lupc_waiter *next;
};

/* A destination for asynchronous device->host data (DATA frames). */
struct lupc_landing {
        uint64_t token;
        uint64_t seq;                   /* its DTOH_ASYNC frame; 0 until sent (set under send_lock) */
        uint8_t *dst;
        uint64_t size;
        uint64_t received;
        struct lupc_landing *next;
};

enum conn_state { CONN_UP = 0, CONN_RECONNECTING = 1, CONN_DEAD = 2 };

struct lupc_conn {
        int fd;                         /* written under both locks */
        uint64_t gen;                   /* bumped with every new fd; under both locks */
        pthread_mutex_t send_lock;
        _Atomic uint64_t next_seq;      /* written under send_lock */
        struct replay replay;           /* under send_lock */
        bool replay_on;                 /* set at init: reconnecting is enabled */
        pthread_mutex_t recv_lock;      /* waiters, landings, reader role, state */
        pthread_cond_t recv_cond;
        struct lupc_waiter *waiters;
        struct lupc_landing *landings;  /* async DtoH copies in flight */
        bool reader_busy;               /* the reader role (also held by reconnect()) */
        atomic_int state;               /* enum conn_state */
        _Atomic uint64_t acked;         /* the server executed everything up to here */
        uint64_t lost_at_ns;            /* under recv_lock */
        char lost_why[160];             /* under recv_lock */
        char goodbye_why[96];           /* written by the reader role only */
        uint32_t driver_version;
        int backend;
        uint8_t token[LUP_TOKEN_SIZE];  /* proves the session is ours on resume */
        char name[LUP_MAX_NAME + 1];
        uint64_t arena_base, arena_size;
        unsigned reconnect_s;           /* LUPINE_RECONNECT_TIMEOUT; 0: never reconnect */
        unsigned resumes;               /* under send_lock */
        size_t since_ack_req;           /* bytes sent since the last ack request; under send_lock */
        size_t ack_interval;            /* LUPC_ACK_INTERVAL, or less for a small bound */
        struct lupc_waiter ack_req;     /* that request's PING: a waiter nobody sleeps on */
        bool ack_req_pending;           /* under recv_lock */
};

static struct lupc_conn conn = {
        .fd = -1,
        .send_lock = PTHREAD_MUTEX_INITIALIZER,
        .recv_lock = PTHREAD_MUTEX_INITIALIZER,
        .recv_cond = PTHREAD_COND_INITIALIZER,
        .next_seq = 1,
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static CUresult init_result = CUDA_ERROR_NOT_INITIALIZED;
static atomic_bool init_done;
static atomic_uint next_lane;
static __thread uint32_t my_lane_plus1;
static atomic_uint_fast64_t next_handle = LUP_FIRST_HANDLE_ID;

uint64_t lupc_mint_handle(void)
{
        return atomic_fetch_add(&next_handle, 16);
}

static uint32_t my_lane(void)
{
        if (!my_lane_plus1)
                my_lane_plus1 = (atomic_fetch_add(&next_lane, 1) % LUP_MAX_LANES) + 1;
        return my_lane_plus1 - 1;
}

bool lupc_initialized(void)
{
        return atomic_load_explicit(&init_done, memory_order_acquire) && init_result == CUDA_SUCCESS;
}

uint32_t lupc_driver_version(void)
{
        return conn.driver_version;
}

int lupc_backend_kind(void)
{
        return conn.backend;
}

CUresult lupc_protocol_error(const char *what)
{
        static atomic_int once;
        if (!atomic_exchange(&once, 1))
                lup_err("protocol error: malformed reply to %s (server and client versions differ?)", what);
        return CUDA_ERROR_UNKNOWN;
}

static const char *op_name(unsigned op)
{
        const char *n = lup_op_name(op);
        return n ? n : "a call";
}

static uint64_t mono_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static enum conn_state conn_state(void)
{
        return (enum conn_state)atomic_load_explicit(&conn.state, memory_order_acquire);
}

void lupc_conn_stats(struct lupc_conn_stats *ret)
{
        pthread_mutex_lock(&conn.send_lock);
        *ret = (struct lupc_conn_stats){
                .state = (int)conn_state(),
                .sent = atomic_load(&conn.next_seq) - 1,
                .acked = atomic_load(&conn.acked),
                .replay_bytes = replay_bytes(&conn.replay),
                .replay_frames = replay_count(&conn.replay),
                .replay_max = conn.replay_on ? conn.replay.max_bytes : 0,
                .resumes = conn.resumes,
        };
        pthread_mutex_unlock(&conn.send_lock);
}

static struct lupc_waiter *find_waiter_locked(uint64_t seq)
{
        for (struct lupc_waiter *w = conn.waiters; w; w = w->next)
                if (w->seq == seq)
                        return w;
        return NULL;
}

static void unlink_waiter_locked(struct lupc_waiter *me)
{
        for (struct lupc_waiter **pp = &conn.waiters; *pp; pp = &(*pp)->next) {
                if (*pp == me) {
                        *pp = me->next;
                        return;
                }
        }
}

static struct lupc_landing *find_landing_locked(uint64_t token)
{
        for (struct lupc_landing *l = conn.landings; l; l = l->next)
                if (l->token == token)
                        return l;
        return NULL;
}

static void drop_landing_locked(struct lupc_landing *l)
{
        for (struct lupc_landing **pp = &conn.landings; *pp; pp = &(*pp)->next) {
                if (*pp == l) {
                        *pp = l->next;
                        free(l);
                        return;
                }
        }
}

/* ---- losing the connection, and losing the session */

/* The session is lost for good: logs msg (the one line that says so) and
 * wakes everyone. Waiters complete themselves (wait_reply) and landings are
 * dropped once no reader is inside a frame, so nothing a reader is writing
 * into goes away under it. recv_lock held. */
static void conn_die_locked(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void conn_die_locked(const char *fmt, ...)
{
        if (conn_state() == CONN_DEAD)
                return;
        va_list ap;
        va_start(ap, fmt);
        lup_vlogf(LUP_LOG_ERR, fmt, ap);
        va_end(ap);
        atomic_store_explicit(&conn.state, CONN_DEAD, memory_order_release);
        if (conn.fd >= 0)
                shutdown(conn.fd, SHUT_RDWR); /* a reader or writer blocked on it returns */
        if (!conn.reader_busy)
                while (conn.landings)
                        drop_landing_locked(conn.landings);
        pthread_cond_broadcast(&conn.recv_cond);
}

/* A read or write on connection generation gen failed with rc, or the
 * server said GOODBYE. Starts reconnecting (or, when that is disabled or the
 * server broke the protocol, gives up). A failure of a connection that has
 * already been replaced is ignored. recv_lock held. */
static void conn_lost_locked(uint64_t gen, int rc, const char *why)
{
        if (gen != conn.gen || conn_state() != CONN_UP)
                return;
        if (rc == -EBADMSG || conn.reconnect_s == 0) {
                conn_die_locked("connection to lupined lost (%s); CUDA calls now fail with CUDA_ERROR_DEVICE_UNAVAILABLE",
                                why);
                return;
        }
        atomic_store_explicit(&conn.state, CONN_RECONNECTING, memory_order_release);
        conn.lost_at_ns = mono_ns();
        snprintf(conn.lost_why, sizeof(conn.lost_why), "%s", why);
        shutdown(conn.fd, SHUT_RDWR); /* a reader or writer blocked on it returns */
        lup_warn("connection to lupined lost (%s); reconnecting for up to %u s", why, conn.reconnect_s);
        pthread_cond_broadcast(&conn.recv_cond);
}

/* Gives the reader role back. recv_lock held. */
static void release_reader_locked(void)
{
        conn.reader_busy = false;
        if (conn_state() == CONN_DEAD)
                while (conn.landings)
                        drop_landing_locked(conn.landings);
        pthread_cond_broadcast(&conn.recv_cond);
}

static void reconnect(void);

/* Takes the reader role (the caller saw it free) and runs the reconnect
 * loop in this thread. recv_lock held on entry and on return. */
static void run_reconnect_locked(void)
{
        conn.reader_busy = true;
        pthread_mutex_unlock(&conn.recv_lock);
        reconnect();
        pthread_mutex_lock(&conn.recv_lock);
        release_reader_locked();
}

/* Blocks while the connection is being re-established, running the
 * reconnect itself when nobody else is. CUDA_SUCCESS once the connection is
 * up, CUDA_ERROR_DEVICE_UNAVAILABLE once the session is lost. */
static CUresult await_connection(void)
{
        enum conn_state st;
        pthread_mutex_lock(&conn.recv_lock);
        while ((st = conn_state()) == CONN_RECONNECTING) {
                if (conn.reader_busy)
                        pthread_cond_wait(&conn.recv_cond, &conn.recv_lock);
                else
                        run_reconnect_locked();
        }
        pthread_mutex_unlock(&conn.recv_lock);
        return st == CONN_UP ? CUDA_SUCCESS : CUDA_ERROR_DEVICE_UNAVAILABLE;
}

/* ---- reading frames (the reader role held) */

/* The server executed everything up to ack. Frees what the replay buffer no
 * longer needs unless a sender holds the send lock (it trims before its own
 * append), so a reader never waits for a writer. */
static void note_ack(uint64_t ack)
{
        if (ack <= atomic_load_explicit(&conn.acked, memory_order_relaxed))
                return;
        atomic_store_explicit(&conn.acked, ack, memory_order_relaxed);
        if (conn.replay_on && pthread_mutex_trylock(&conn.send_lock) == 0) {
                replay_ack(&conn.replay, ack);
                pthread_mutex_unlock(&conn.send_lock);
        }
}

/* Asynchronous device->host data: straight into the caller's buffer. The
 * landing's destination is copied under the lock and progress is recorded
 * under it again, so a landing dropped meanwhile is never touched. */
static int read_data_frame(const struct lup_hdr *h, const char **why)
{
        uint8_t b[16];
        if (h->len < sizeof(b)) {
                *why = "short DATA frame";
                return -EBADMSG;
        }
        int rc = lup_read_full(conn.fd, b, sizeof(b));
        if (rc < 0) {
                *why = "server closed the connection";
                return rc;
        }
        uint64_t token = lup_le64(b), off = lup_le64(b + 8), n = h->len - sizeof(b);
        pthread_mutex_lock(&conn.recv_lock);
        struct lupc_landing *l = find_landing_locked(token);
        bool ok = l && off == l->received && n <= l->size - l->received;
        uint8_t *dst = ok ? l->dst : NULL;
        pthread_mutex_unlock(&conn.recv_lock);
        if (!ok) {
                *why = "DATA frame for an unknown copy or past its end";
                return -EBADMSG;
        }
        rc = lup_read_full(conn.fd, dst + off, n);
        if (rc < 0) {
                *why = "server closed the connection";
                return rc;
        }
        pthread_mutex_lock(&conn.recv_lock);
        l = find_landing_locked(token);
        if (l) {
                l->received += n;
                /* a failed copy is reported by the next synchronous call (the
                 * worker latched it), as CUDA reports asynchronous errors */
                if (h->status != 0 || l->received == l->size)
                        drop_landing_locked(l);
        }
        pthread_mutex_unlock(&conn.recv_lock);
        return 0;
}

static uint64_t spin_ns = 50000; /* LUPINE_SPIN_US, read at init */

/* Reads a frame header, polling for a short while first: a reply usually
 * comes within tens of microseconds, and sleeping costs a wake-up. */
static int read_header(uint8_t *hb)
{
        size_t got = 0;
        if (spin_ns) {
                uint64_t deadline = mono_ns() + spin_ns;
                while (got < LUP_HDR_SIZE) {
                        ssize_t k = recv(conn.fd, hb + got, LUP_HDR_SIZE - got, MSG_DONTWAIT);
                        if (k > 0) {
                                got += (size_t)k;
                                continue;
                        }
                        if (k == 0)
                                return -ECONNRESET;
                        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                                return -errno;
                        if (mono_ns() >= deadline)
                                break;
                }
        }
        return got == LUP_HDR_SIZE ? 0 : lup_read_full(conn.fd, hb + got, LUP_HDR_SIZE - got);
}

static const char *io_why(int rc)
{
        return rc == -ECONNRESET || rc == -EPIPE ? "server closed the connection" : strerror(-rc);
}

/* Reads one frame with the reader role held (recv_lock NOT held).
 * Returns 0 or -errno (-EBADMSG: the server broke the protocol) and sets
 * *why. A GOODBYE acknowledges like any frame, then reads as -ECONNRESET. */
static int read_one_frame(const char **why)
{
        uint8_t hb[LUP_HDR_SIZE];
        struct lup_hdr h;
        int rc = read_header(hb);
        if (rc < 0) {
                *why = io_why(rc);
                return rc;
        }
        if (lup_hdr_decode(hb, &h, why) < 0)
                return -EBADMSG;
        /* Every server frame says how far the server has executed. */
        if (h.ctx >= atomic_load_explicit(&conn.next_seq, memory_order_relaxed)) {
                *why = "server acknowledged a call that was never sent";
                return -EBADMSG;
        }
        note_ack(h.ctx);
        if (h.op == LUP_OP_GOODBYE) {
                snprintf(conn.goodbye_why, sizeof(conn.goodbye_why), "server is going away, executed up to %llu",
                         (unsigned long long)h.ctx);
                *why = conn.goodbye_why;
                return -ECONNRESET;
        }
        if (h.op == LUP_OP_DATA)
                return read_data_frame(&h, why);
        if (!(h.flags & LUP_F_REPLY)) {
                *why = "unexpected request frame from server";
                return -EBADMSG;
        }
        pthread_mutex_lock(&conn.recv_lock);
        struct lupc_waiter *w = find_waiter_locked(h.seq);
        pthread_mutex_unlock(&conn.recv_lock);
        if (!w || w->done) {
                *why = "reply for a call nobody waits for";
                return -EBADMSG;
        }
        /* The waiter cannot go away: it only leaves once done, and only the
         * reader (us) completes waiters while the reader role is held. */
        if (h.len > w->cap - w->len) {
                *why = "reply larger than the caller's buffer";
                return -EBADMSG;
        }
        rc = lup_read_full(conn.fd, w->rep + w->len, h.len);
        if (rc < 0) {
                *why = io_why(rc);
                return rc;
        }
        pthread_mutex_lock(&conn.recv_lock);
        w->len += h.len;
        if (!(h.flags & LUP_F_MORE) || h.status != 0) {
                w->status = (CUresult)h.status;
                w->done = true;
                if (w == &conn.ack_req) {
                        /* an ack request: it did its work in note_ack() */
                        unlink_waiter_locked(w);
                        conn.ack_req_pending = false;
                }
                pthread_cond_broadcast(&conn.recv_cond);
        }
        pthread_mutex_unlock(&conn.recv_lock);
        return 0;
}

/* Reads the frames that have already arrived, without waiting for more, if
 * no other thread holds the reader role. */
static void harvest_replies(void)
{
        pthread_mutex_lock(&conn.recv_lock);
        if (conn.reader_busy || conn_state() != CONN_UP) {
                pthread_mutex_unlock(&conn.recv_lock);
                return;
        }
        conn.reader_busy = true;
        uint64_t gen = conn.gen;
        pthread_mutex_unlock(&conn.recv_lock);
        const char *why = NULL;
        uint8_t b;
        int rc = 0;
        while (recv(conn.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 1 && (rc = read_one_frame(&why)) == 0)
                ;
        pthread_mutex_lock(&conn.recv_lock);
        if (rc < 0)
                conn_lost_locked(gen, rc, why ? why : "read error");
        release_reader_locked();
        pthread_mutex_unlock(&conn.recv_lock);
}

/* Waits until w is done, taking the reader role whenever it is free (and
 * running the reconnect when the connection is down). */
static void wait_reply(struct lupc_waiter *w)
{
        pthread_mutex_lock(&conn.recv_lock);
        while (!w->done) {
                if (conn.reader_busy) {
                        pthread_cond_wait(&conn.recv_cond, &conn.recv_lock);
                        continue;
                }
                enum conn_state st = conn_state();
                if (st == CONN_DEAD) {
                        w->done = true;
                        w->status = CUDA_ERROR_DEVICE_UNAVAILABLE;
                        break;
                }
                if (st == CONN_RECONNECTING) {
                        run_reconnect_locked();
                        continue;
                }
                conn.reader_busy = true;
                uint64_t gen = conn.gen;
                pthread_mutex_unlock(&conn.recv_lock);
                const char *why = NULL;
                int rc = read_one_frame(&why);
                pthread_mutex_lock(&conn.recv_lock);
                if (rc < 0)
                        conn_lost_locked(gen, rc, why ? why : "read error");
                release_reader_locked();
        }
        unlink_waiter_locked(w);
        pthread_mutex_unlock(&conn.recv_lock);
}

/* ---- sending frames */

static CUresult send_frame(uint16_t op, uint16_t flags, uint64_t ctx, const void *a, size_t alen,
                           const void *b, size_t blen, struct lupc_waiter *w, uint64_t landing);

/* Flow control, the only one: the replay buffer is full, so get an
 * acknowledgement. A synchronous PING is answered only after the server
 * executed every frame sent before it, and its reply's header says so, which
 * empties the buffer of all of them. It cannot deadlock: the PING itself is
 * exempt from the bound, its reply needs nothing from the client but to be
 * read, and this thread reads it (it becomes the reader when nobody else
 * is). While the connection is down it waits like any call. */
static CUresult await_ack(void)
{
        struct lupc_waiter w = { 0 };
        CUresult r = send_frame(LUP_OP_PING, LUP_F_SYNC, 0, NULL, 0, NULL, 0, &w, 0);
        if (r != CUDA_SUCCESS)
                return r;
        wait_reply(&w);
        /* a PING whose reply was lost in a reconnect was still executed */
        return conn_state() == CONN_DEAD ? CUDA_ERROR_DEVICE_UNAVAILABLE : CUDA_SUCCESS;
}

/* Keeps the replay buffer small without ever waiting. Every ack_interval
 * bytes (LUPC_ACK_INTERVAL, or a quarter of the bound if that is less) a
 * synchronous PING goes out that nobody sleeps on; its reply acknowledges
 * everything sent before it. Server frames are only read when some thread
 * reads, so at the next interval, if that PING is still unanswered here, the
 * sender reads whatever has arrived (harvest_replies()). A stream of
 * asynchronous copies, which would otherwise fill the buffer to its bound,
 * keeps it at a few intervals, and the copy into it stays in the cache.
 * Costs a 40-byte frame and one recv() per interval. send_lock held, the
 * connection up. Returns true when the caller should harvest. */
static bool request_ack_locked(uint64_t gen)
{
        pthread_mutex_lock(&conn.recv_lock);
        bool pending = conn.ack_req_pending;
        pthread_mutex_unlock(&conn.recv_lock);
        if (pending)
                return true;
        uint8_t hb[LUP_HDR_SIZE];
        struct iovec iov = { hb, sizeof(hb) };
        struct lup_hdr h = { .op = LUP_OP_PING, .flags = LUP_F_SYNC, .lane = my_lane(),
                             .seq = atomic_load_explicit(&conn.next_seq, memory_order_relaxed) };
        lup_hdr_encode(hb, &h);
        if (replay_append(&conn.replay, h.seq, &iov, 1, NULL) < 0)
                return false;
        atomic_store_explicit(&conn.next_seq, h.seq + 1, memory_order_relaxed);
        pthread_mutex_lock(&conn.recv_lock);
        conn.ack_req = (struct lupc_waiter){ .seq = h.seq, .op = LUP_OP_PING, .next = conn.waiters };
        conn.waiters = &conn.ack_req;
        conn.ack_req_pending = true;
        pthread_mutex_unlock(&conn.recv_lock);
        int rc = lup_writev_full(conn.fd, &iov, 1);
        if (rc < 0) {
                pthread_mutex_lock(&conn.recv_lock);
                conn_lost_locked(gen, rc, io_why(rc));
                pthread_mutex_unlock(&conn.recv_lock);
        }
        return false;
}

/* Writes one frame (header + up to two payload pieces) under the send lock,
 * after copying it into the replay buffer. A registered waiter (and the
 * landing of an async copy with token `landing`, if not 0) gets the frame's
 * seq before the frame leaves. While the connection is down it waits; a
 * write that fails starts the reconnect, and the frame goes again from the
 * replay buffer. Returns CUDA_SUCCESS, or CUDA_ERROR_DEVICE_UNAVAILABLE /
 * _OUT_OF_MEMORY before anything was sent; once a waiter is registered the
 * result is CUDA_SUCCESS and the call's outcome is the waiter's. */
static CUresult send_frame(uint16_t op, uint16_t flags, uint64_t ctx, const void *a, size_t alen,
                           const void *b, size_t blen, struct lupc_waiter *w, uint64_t landing)
{
        uint8_t hb[LUP_HDR_SIZE];
        struct iovec iov[3] = {
                { hb, sizeof(hb) }, { (void *)a, alen }, { (void *)b, blen },
        };
        int iovcnt = blen ? 3 : (alen ? 2 : 1);
        struct lup_hdr h = { .len = (uint32_t)(alen + blen), .op = op, .flags = flags,
                             .lane = my_lane(), .ctx = ctx };
        int rc;

        for (;;) {
                pthread_mutex_lock(&conn.send_lock);
                enum conn_state st = conn_state();
                if (st == CONN_UP) {
                        if (!conn.replay_on)
                                break;
                        replay_ack(&conn.replay, atomic_load_explicit(&conn.acked, memory_order_relaxed));
                        if (op == LUP_OP_PING || replay_fits(&conn.replay, LUP_HDR_SIZE + alen + blen))
                                break;
                        pthread_mutex_unlock(&conn.send_lock);
                        CUresult r = await_ack();
                        if (r != CUDA_SUCCESS)
                                return r;
                        continue;
                }
                pthread_mutex_unlock(&conn.send_lock);
                if (st == CONN_DEAD || await_connection() != CUDA_SUCCESS)
                        return CUDA_ERROR_DEVICE_UNAVAILABLE;
        }
        /* send_lock held, the connection up */
        h.seq = atomic_load_explicit(&conn.next_seq, memory_order_relaxed);
        lup_hdr_encode(hb, &h);
        if (conn.replay_on) {
                const uint8_t *copy;
                if (replay_append(&conn.replay, h.seq, iov, iovcnt, &copy) < 0) {
                        pthread_mutex_unlock(&conn.send_lock);
                        lup_err("out of memory for the replay buffer (%zu bytes held)", replay_bytes(&conn.replay));
                        return CUDA_ERROR_OUT_OF_MEMORY;
                }
                /* write the copy, still in the cache, not the caller's
                 * buffers: the copy is then the only extra pass over them */
                iov[0] = (struct iovec){ (void *)copy, LUP_HDR_SIZE + alen + blen };
                iovcnt = 1;
        }
        atomic_store_explicit(&conn.next_seq, h.seq + 1, memory_order_relaxed);
        uint64_t gen = conn.gen;
        if (w || landing) {
                pthread_mutex_lock(&conn.recv_lock);
                if (w) {
                        w->seq = h.seq;
                        w->op = op;
                        w->next = conn.waiters;
                        conn.waiters = w;
                }
                struct lupc_landing *l = landing ? find_landing_locked(landing) : NULL;
                if (l)
                        l->seq = h.seq;
                pthread_mutex_unlock(&conn.recv_lock);
        }
        rc = lup_writev_full(conn.fd, iov, iovcnt);
        bool harvest = false;
        if (rc == 0 && conn.replay_on) {
                conn.since_ack_req += LUP_HDR_SIZE + alen + blen;
                if (conn.since_ack_req >= conn.ack_interval) {
                        conn.since_ack_req = 0;
                        harvest = request_ack_locked(gen);
                }
        }
        pthread_mutex_unlock(&conn.send_lock);
        if (harvest)
                harvest_replies();
        if (lup_trace_level() >= 2)
                lup_tracef("send %s seq=%llu lane=%u len=%u%s", op_name(op), (unsigned long long)h.seq, h.lane, h.len,
                           rc < 0 ? " (write failed)" : "");
        if (rc < 0) {
                pthread_mutex_lock(&conn.recv_lock);
                conn_lost_locked(gen, rc, io_why(rc));
                pthread_mutex_unlock(&conn.recv_lock);
                /* The frame is in the replay buffer and goes again once
                 * reconnected; a waiter learns the outcome in wait_reply(). */
                if (!w)
                        return await_connection();
        }
        return CUDA_SUCCESS;
}

static CUresult call_prologue(unsigned flags, uint64_t *ret_ctx)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        *ret_ctx = lupc_ctx_current();
        if ((flags & LUPC_CTX) && *ret_ctx == 0)
                return CUDA_ERROR_INVALID_CONTEXT;
        return CUDA_SUCCESS;
}

CUresult lupc_call(uint16_t op, unsigned flags, const void *args, size_t argslen,
                   void *rep, size_t repcap, size_t *ret_replen)
{
        uint64_t ctx;
        CUresult r = call_prologue(flags, &ctx);
        if (r != CUDA_SUCCESS)
                return r;
        if (lup_trace_level() >= 1)
                lup_tracef("%s %s", lup_op_name(op) ? lup_op_name(op) : "?", (flags & LUPC_SYNC) ? "sync" : "async");
        if (!(flags & LUPC_SYNC))
                return send_frame(op, 0, ctx, args, argslen, NULL, 0, NULL, 0);

        struct lupc_waiter w = { .rep = rep, .cap = rep ? repcap : 0 };
        r = send_frame(op, LUP_F_SYNC, ctx, args, argslen, NULL, 0, &w, 0);
        if (r != CUDA_SUCCESS)
                return r;
        wait_reply(&w);
        if (ret_replen)
                *ret_replen = w.len;
        return w.status;
}

CUresult lupc_copy_htod(uint64_t dst, const void *src, size_t n, uint64_t stream)
{
        uint64_t ctx;
        CUresult r = call_prologue(LUPC_CTX, &ctx);
        if (r != CUDA_SUCCESS)
                return r;
        if (lup_trace_level() >= 1)
                lup_tracef("cuMemcpyHtoD %zu bytes", n);
        /* One frame per chunk, each taking the send lock on its own, so other
         * threads' small calls are never stuck behind a large copy. */
        for (size_t off = 0; off < n;) {
                size_t k = n - off < LUP_BULK_CHUNK ? n - off : LUP_BULK_CHUNK;
                uint8_t a[16];
                lup_put64(a, dst + off);
                lup_put64(a + 8, stream);
                r = send_frame(LUP_OP_MEMCPY_HTOD, 0, ctx, a, sizeof(a), (const uint8_t *)src + off, k, NULL, 0);
                if (r != CUDA_SUCCESS)
                        return r;
                off += k;
        }
        return CUDA_SUCCESS;
}

CUresult lupc_copy_dtoh(void *dst, uint64_t src, size_t n, uint64_t stream)
{
        uint64_t ctx;
        CUresult r = call_prologue(LUPC_CTX, &ctx);
        if (r != CUDA_SUCCESS)
                return r;
        if (lup_trace_level() >= 1)
                lup_tracef("cuMemcpyDtoH %zu bytes", n);
        uint8_t a[24];
        lup_put64(a, src);
        lup_put64(a + 8, n);
        lup_put64(a + 16, stream);
        struct lupc_waiter w = { .rep = dst, .cap = n };
        r = send_frame(LUP_OP_MEMCPY_DTOH, LUP_F_SYNC, ctx, a, sizeof(a), NULL, 0, &w, 0);
        if (r != CUDA_SUCCESS)
                return r;
        wait_reply(&w);
        if (w.status == CUDA_SUCCESS && w.len != n)
                return lupc_protocol_error("cuMemcpyDtoH");
        return w.status;
}

CUresult lupc_copy_dtoh_async(void *dst, uint64_t src, size_t n, uint64_t stream)
{
        uint64_t ctx;
        CUresult r = call_prologue(LUPC_CTX, &ctx);
        if (r != CUDA_SUCCESS)
                return r;
        struct lupc_landing *l = calloc(1, sizeof(*l));
        if (!l)
                return CUDA_ERROR_OUT_OF_MEMORY;
        uint64_t token = lupc_mint_handle();
        l->token = token;
        l->dst = dst;
        l->size = n;
        pthread_mutex_lock(&conn.recv_lock);
        l->next = conn.landings;
        conn.landings = l; /* from here on l belongs to the list: only token names it */
        pthread_mutex_unlock(&conn.recv_lock);
        uint8_t a[32];
        lup_put64(a, src);
        lup_put64(a + 8, n);
        lup_put64(a + 16, stream);
        lup_put64(a + 24, token);
        if (lup_trace_level() >= 1)
                lup_tracef("cuMemcpyDtoHAsync %zu bytes", n);
        r = send_frame(LUP_OP_DTOH_ASYNC, 0, ctx, a, sizeof(a), NULL, 0, NULL, token);
        if (r != CUDA_SUCCESS) {
                pthread_mutex_lock(&conn.recv_lock);
                l = find_landing_locked(token);
                if (l)
                        drop_landing_locked(l);
                pthread_mutex_unlock(&conn.recv_lock);
        }
        return r;
}

CUresult lupc_upload_image(const void *image, uint64_t *ret_blob)
{
        int kind;
        const uint8_t *start;
        size_t n;

        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        /* the caller's own memory: its headers say how long it is */
        if (lup_image_measure(image, SIZE_MAX, &kind, &start, &n) < 0 || n > LUP_MAX_BLOB)
                return CUDA_ERROR_INVALID_IMAGE;
        uint64_t blob = lupc_mint_handle();
        for (size_t off = 0; off < n;) {
                size_t k = n - off < LUP_BULK_CHUNK ? n - off : LUP_BULK_CHUNK;
                uint8_t a[24];
                lup_put64(a, blob);
                lup_put64(a + 8, n);
                lup_put64(a + 16, off);
                CUresult r = send_frame(LUP_OP_BLOB, 0, lupc_ctx_current(), a, sizeof(a), start + off, k, NULL, 0);
                if (r != CUDA_SUCCESS)
                        return r;
                off += k;
        }
        *ret_blob = blob;
        return CUDA_SUCCESS;
}

/* ---- HELLO and the device snapshot */

/* What a HELLO got back. */
struct hello_reply {
        uint32_t status;                /* 0: accepted; else refused with msg */
        char msg[256];
        uint32_t driver_version;
        uint32_t backend;
        uint8_t token[LUP_TOKEN_SIZE];
        uint64_t arena_base, arena_size;
        uint64_t last_executed;
        struct lupc_device *devs;       /* ndev of them; the caller installs or frees them */
        uint32_t ndev;
};

/* Decodes an accepting HELLO reply (the same at init and on resume). */
static int decode_hello_reply(const uint8_t *p, size_t n, struct hello_reply *ret)
{
        struct lup_rd r = lup_rd_init(p, n);
        uint32_t magic, proto, drv, backend, ndev;
        uint8_t token[LUP_TOKEN_SIZE];
        uint64_t base, size, last;

        lup_rd_u32(&r, &magic);
        lup_rd_u32(&r, &proto);
        lup_rd_u32(&r, &drv);
        lup_rd_u32(&r, &backend);
        lup_rd_copy(&r, token, sizeof(token));
        lup_rd_u64(&r, &base);
        lup_rd_u64(&r, &size);
        lup_rd_u64(&r, &last);
        lup_rd_u32(&r, &ndev);
        if (r.err || magic != LUP_PROTO_MAGIC || proto != LUP_PROTO_VERSION || ndev > LUP_MAX_DEVICES)
                return -EBADMSG;
        if (base < LUP_ARENA_BASE || size != LUP_ARENA_SIZE || (base - LUP_ARENA_BASE) % LUP_ARENA_SIZE ||
            (base - LUP_ARENA_BASE) / LUP_ARENA_SIZE >= LUP_ARENA_SLOTS)
                return -EBADMSG;

        struct lupc_device *devs = calloc(ndev ? ndev : 1, sizeof(*devs));
        if (!devs)
                return -ENOMEM;
        for (uint32_t i = 0; i < ndev; i++) {
                const char *name;
                size_t name_len;
                lup_rd_str16(&r, LUP_MAX_DEV_NAME, &name, &name_len);
                lup_rd_copy(&r, devs[i].uuid.bytes, 16);
                lup_rd_u64(&r, &devs[i].total_mem);
                lup_rd_u32(&r, &devs[i].n_attr);
                if (r.err || devs[i].n_attr > LUP_MAX_ATTRS) {
                        free(devs);
                        return -EBADMSG;
                }
                for (uint32_t a = 0; a < devs[i].n_attr; a++) {
                        lup_rd_i32(&r, &devs[i].attr[a]);
                        lup_rd_u32(&r, &devs[i].attr_res[a]);
                }
                if (r.err) {
                        free(devs);
                        return -EBADMSG;
                }
                /* A real remote GPU is marked as such; the simulated one already says "(sim)". */
                snprintf(devs[i].name, sizeof(devs[i].name), "%.*s%s", (int)name_len, name,
                         backend == LUP_BACKEND_CUDA ? " (lupine)" : "");
        }
        if (lup_rd_finish(&r) < 0) {
                free(devs);
                return -EBADMSG;
        }
        ret->driver_version = drv;
        ret->backend = backend;
        memcpy(ret->token, token, sizeof(token));
        ret->arena_base = base;
        ret->arena_size = size;
        ret->last_executed = last;
        ret->devs = devs;
        ret->ndev = ndev;
        return 0;
}

/* Bounds every blocking read and write on fd (0: no bound). */
static void set_io_timeout(int fd, int ms)
{
        struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* Says HELLO (seq 0, never replayed: it is not a call) as session conn.name
 * with conn.token and reads the answer. Returns 0 when an answer came
 * (ret->status says whether it accepted), -EPROTO for a malformed one, or
 * another -errno when the connection failed first (-EAGAIN: timed out). */
static int hello_exchange(int fd, uint64_t last_seen, struct hello_reply *ret)
{
        uint8_t buf[LUP_HDR_SIZE + 512];
        struct lup_hello hello = { .proto_version = LUP_PROTO_VERSION, .cuda_version = CUDA_VERSION,
                                   .last_seq_seen = last_seen };
        size_t hlen;

        memcpy(hello.name, conn.name, sizeof(hello.name));
        memcpy(hello.token, conn.token, sizeof(hello.token));
        if (lup_hello_encode(buf + LUP_HDR_SIZE, sizeof(buf) - LUP_HDR_SIZE, &hello, &hlen) < 0)
                return -EINVAL;
        struct lup_hdr h = { .len = (uint32_t)hlen, .op = LUP_OP_HELLO, .flags = LUP_F_SYNC, .lane = my_lane() };
        lup_hdr_encode(buf, &h);
        int rc = lup_write_full(fd, buf, LUP_HDR_SIZE + hlen);
        if (rc < 0)
                return rc;

        uint8_t hb[LUP_HDR_SIZE];
        struct lup_hdr rh;
        const char *why;
        rc = lup_read_full(fd, hb, sizeof(hb));
        if (rc < 0)
                return rc;
        if (lup_hdr_decode(hb, &rh, &why) < 0 || rh.op != LUP_OP_HELLO || !(rh.flags & LUP_F_REPLY))
                return -ECONNRESET;
        uint8_t *rep = malloc(rh.len ? rh.len : 1);
        if (!rep)
                return -ENOMEM;
        rc = lup_read_full(fd, rep, rh.len);
        if (rc == 0 && rh.status != 0) {
                struct lup_rd r = lup_rd_init(rep, rh.len);
                const char *msg = "";
                size_t ml = 0;
                lup_rd_str16(&r, 1024, &msg, &ml);
                ret->status = rh.status;
                snprintf(ret->msg, sizeof(ret->msg), "%.*s", (int)ml, msg ? msg : "");
        } else if (rc == 0) {
                ret->status = 0;
                rc = decode_hello_reply(rep, rh.len, ret) < 0 ? -EPROTO : 0;
        }
        free(rep);
        return rc;
}

static void make_session_name(char *out, size_t cap)
{
        const char *env = getenv("LUPINE_SESSION");
        if (env && *env) {
                if (lup_session_name_valid(env, strlen(env))) {
                        snprintf(out, cap, "%s", env);
                        return;
                }
                lup_warn("LUPINE_SESSION=%s is not a valid session name ([A-Za-z0-9._-], at most %u bytes); using a random one",
                         env, LUP_MAX_NAME);
        }
        uint8_t rnd[8] = { 0 };
        FILE *f = fopen("/dev/urandom", "re");
        if (f) {
                if (fread(rnd, 1, sizeof(rnd), f) != sizeof(rnd))
                        memset(rnd, 0, sizeof(rnd));
                fclose(f);
        }
        snprintf(out, cap, "anon-%d-%02x%02x%02x%02x%02x%02x%02x%02x", (int)getpid(), rnd[0], rnd[1], rnd[2],
                 rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
}

/* Calls fn for each endpoint of LUPINE_SERVER, in order, until one returns
 * >= 0, and returns that; otherwise the last failure. *tried lists what was
 * tried, for messages. */
typedef int (*endpoint_fn)(const struct lup_endpoint *ep, void *userdata);
static int for_each_endpoint(endpoint_fn fn, void *userdata, char *tried, size_t tried_cap)
{
        const char *env = getenv("LUPINE_SERVER");
        char list[1024];
        int rc = -ENOENT;

        snprintf(list, sizeof(list), "%s", env && *env ? env : LUPC_DEFAULT_SERVER);
        tried[0] = 0;
        char *save = NULL;
        int n = 0;
        for (char *tok = strtok_r(list, ",", &save); tok && n < LUPC_MAX_ENDPOINTS; tok = strtok_r(NULL, ",", &save), n++) {
                struct lup_endpoint ep;
                size_t used = strlen(tried);
                snprintf(tried + used, tried_cap - used, "%s%s", used ? ", " : "", tok);
                int prc = lup_endpoint_parse(tok, &ep);
                if (prc < 0) {
                        lup_warn("LUPINE_SERVER: cannot parse endpoint '%s'", tok);
                        continue;
                }
                rc = fn(&ep, userdata);
                if (rc >= 0)
                        return rc;
        }
        return rc;
}

static int connect_endpoint(const struct lup_endpoint *ep, void *userdata)
{
        return lup_connect(ep);
}

/* A whole number from the environment, def when unset or invalid. */
static unsigned env_uint(const char *name, unsigned def, unsigned max)
{
        const char *v = getenv(name);
        if (!v || !*v)
                return def;
        char *end;
        errno = 0;
        unsigned long x = strtoul(v, &end, 10);
        if (errno || *end || v[0] == '-' || x > max) {
                lup_warn("%s=%s is not a whole number from 0 to %u; using %u", name, v, max, def);
                return def;
        }
        return (unsigned)x;
}

static void read_config(void)
{
        const char *spin = getenv("LUPINE_SPIN_US");
        if (spin && *spin) {
                long us = strtol(spin, NULL, 10);
                spin_ns = us > 0 && us < 100000 ? (uint64_t)us * 1000 : 0;
        }
        conn.reconnect_s = env_uint("LUPINE_RECONNECT_TIMEOUT", LUPC_DEFAULT_RECONNECT_S, LUPC_MAX_RECONNECT_S);
        unsigned mb = env_uint("LUPINE_REPLAY_MAX_MB", REPLAY_DEFAULT_MAX_MB, LUPC_MAX_REPLAY_MB);
        if (mb < LUPC_MIN_REPLAY_MB) {
                lup_warn("LUPINE_REPLAY_MAX_MB=%u is below the smallest useful bound; using %u", mb, LUPC_MIN_REPLAY_MB);
                mb = LUPC_MIN_REPLAY_MB;
        }
        /* Without reconnecting nothing is ever resent: keep no copies. */
        if (conn.reconnect_s)
                conn.replay_on = replay_init(&conn.replay, (size_t)mb << 20, 0) == 0;
        conn.ack_interval = ((size_t)mb << 20) / 4 < LUPC_ACK_INTERVAL ? ((size_t)mb << 20) / 4 : LUPC_ACK_INTERVAL;
}

static void do_init(void)
{
        char tried[1100];
        struct hello_reply rep = { 0 };

        lup_log_setup("lupine", LUP_LOG_INFO);
        lup_trace_setup_from_env();
        read_config();

        int fd = for_each_endpoint(connect_endpoint, NULL, tried, sizeof(tried));
        if (fd < 0) {
                lup_err("cannot reach lupined at %s: %s", tried, strerror(-fd));
                init_result = CUDA_ERROR_NO_DEVICE;
                return;
        }
        make_session_name(conn.name, sizeof(conn.name));
        int rc = hello_exchange(fd, 0, &rep);
        if (rc == -EPROTO) {
                lup_err("lupined at %s sent a malformed HELLO reply (protocol version mismatch?)", tried);
                goto out_close;
        }
        if (rc < 0) {
                lup_err("lupined at %s closed the connection during the handshake", tried);
                goto out_close;
        }
        if (rep.status != 0) {
                lup_err("lupined at %s refused the session: %s", tried, rep.msg);
                close(fd);
                init_result = rep.status == CUDA_ERROR_DEVICE_UNAVAILABLE ? CUDA_ERROR_NO_DEVICE : (CUresult)rep.status;
                return;
        }

        /* Reserve the session's arena here too, so no host pointer can alias a
         * device pointer. The address is fixed; anything else is refused. */
        uint64_t base = rep.arena_base, size = rep.arena_size;
        void *p = mmap((void *)(uintptr_t)base, size, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == MAP_FAILED || p != (void *)(uintptr_t)base) {
                if (p != MAP_FAILED)
                        munmap(p, size);
                lup_err("cannot reserve the device address range 0x%llx-0x%llx in this process (%s); refusing to run with moved pointers",
                        (unsigned long long)base, (unsigned long long)(base + size), strerror(errno));
                free(rep.devs);
                close(fd);
                init_result = CUDA_ERROR_OPERATING_SYSTEM;
                return;
        }
        memcpy(conn.token, rep.token, sizeof(conn.token));
        conn.driver_version = rep.driver_version;
        conn.backend = (int)rep.backend;
        conn.arena_base = base;
        conn.arena_size = size;
        lupc_set_devices(rep.devs, (int)rep.ndev);
        lupc_set_arena(base, size);
        conn.fd = fd;
        init_result = CUDA_SUCCESS;
        lup_debug("connected to %s as session %s", tried, conn.name);
        return;

out_close:
        close(fd);
        init_result = CUDA_ERROR_NO_DEVICE;
}

CUresult lupc_init(void)
{
        pthread_once(&init_once, do_init);
        atomic_store_explicit(&init_done, true, memory_order_release);
        return init_result;
}

/* ---- reconnecting */

enum { RESUMED = 0, SESSION_LOST = 1 };

struct resume_attempt {
        uint64_t deadline_ns;
        uint64_t executed;              /* N, once resumed */
        size_t resent;
        char last_error[400];
};

static uint64_t rng_state; /* touched only by the thread running reconnect() */

static uint64_t random_below(uint64_t n)
{
        if (!rng_state) {
                if (getrandom(&rng_state, sizeof(rng_state), GRND_NONBLOCK) != (ssize_t)sizeof(rng_state))
                        rng_state = mono_ns() ^ ((uint64_t)getpid() << 32);
                rng_state |= 1;
        }
        rng_state ^= rng_state >> 12;
        rng_state ^= rng_state << 25;
        rng_state ^= rng_state >> 27;
        return n ? (rng_state * 0x2545F4914F6CDD1Dull) % n : 0;
}

static void sleep_ns(uint64_t ns)
{
        struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull), .tv_nsec = (long)(ns % 1000000000ull) };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/* Writes one replay frame again. The socket is written without blocking:
 * while it is full, frames from the server are read (it may be answering
 * resent calls, and would stop reading if nobody read its answers). */
static int resend_one(uint64_t seq, const uint8_t *p, size_t n, void *userdata)
{
        struct resume_attempt *ra = userdata;
        while (n) {
                ssize_t k = send(conn.fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (k > 0) {
                        p += k;
                        n -= (size_t)k;
                        continue;
                }
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
                        int e = errno;
                        snprintf(ra->last_error, sizeof(ra->last_error), "resending call seq %llu: %s",
                                 (unsigned long long)seq, strerror(e));
                        return -e;
                }
                struct pollfd pfd = { .fd = conn.fd, .events = POLLIN | POLLOUT };
                int pr = poll(&pfd, 1, LUPC_RESEND_STALL_MS);
                if (pr < 0 && errno == EINTR)
                        continue;
                if (pr <= 0) {
                        snprintf(ra->last_error, sizeof(ra->last_error), "resending call seq %llu: %s",
                                 (unsigned long long)seq, pr == 0 ? "the server stopped reading" : strerror(errno));
                        return pr == 0 ? -ETIMEDOUT : -errno;
                }
                if (pfd.revents & POLLIN) {
                        const char *why = NULL;
                        int rc = read_one_frame(&why);
                        if (rc < 0) {
                                snprintf(ra->last_error, sizeof(ra->last_error), "while resending: %s",
                                         why ? why : "read error");
                                return rc;
                        }
                }
        }
        ra->resent++;
        return 0;
}

/* Answers the server sent before the connection failed may still be queued
 * on it: a write can fail, or the server say GOODBYE, before the reader has
 * seen everything. Reads them, so that no answer that arrived is lost. The
 * socket was shut down when it was declared lost, so this stops at the end of
 * what is queued. */
static void drain_lost_connection(void)
{
        const char *why;
        int n = 0;
        while (conn.fd >= 0 && read_one_frame(&why) == 0)
                n++;
        if (n)
                lup_debug("read %d frames that were still queued on the lost connection", n);
}

/* The server resumed the session on fd, having executed up to n. Installs
 * fd, settles the calls whose answers died with the old connection, and
 * resends every frame after n, holding the send lock so that no new frame
 * can come between them. Returns 0 with the connection up, or -errno (the
 * connection stays down; the next attempt replaces fd). */
static int resume_on(int fd, uint64_t n, struct resume_attempt *ra)
{
        pthread_mutex_lock(&conn.send_lock);
        pthread_mutex_lock(&conn.recv_lock);
        int old = conn.fd;
        conn.fd = fd;
        conn.gen++;
        if (n > atomic_load_explicit(&conn.acked, memory_order_relaxed))
                atomic_store_explicit(&conn.acked, n, memory_order_relaxed);
        /* Executed, but the answer was lost with the connection (never after
         * a GOODBYE: the server sends every answer before it). */
        if (conn.ack_req_pending && conn.ack_req.seq <= n) {
                unlink_waiter_locked(&conn.ack_req); /* executed; what it asked for is known now */
                conn.ack_req_pending = false;
        }
        for (struct lupc_waiter *w = conn.waiters; w; w = w->next) {
                if (!w->done && w->seq <= n && w->op == LUP_OP_PING) {
                        /* a PING has no result: being executed was its answer */
                        w->status = CUDA_SUCCESS;
                        w->done = true;
                } else if (!w->done && w->seq <= n) {
                        lup_err("the answer to %s (call seq %llu) was lost with the connection; the call fails with CUDA_ERROR_DEVICE_UNAVAILABLE",
                                op_name(w->op), (unsigned long long)w->seq);
                        w->status = CUDA_ERROR_DEVICE_UNAVAILABLE;
                        w->done = true;
                }
        }
        for (struct lupc_landing *l = conn.landings, *next; l; l = next) {
                next = l->next;
                if (l->seq && l->seq <= n) {
                        lup_err("the data of an asynchronous device-to-host copy (call seq %llu, %llu of %llu bytes arrived) was lost with the connection",
                                (unsigned long long)l->seq, (unsigned long long)l->received, (unsigned long long)l->size);
                        drop_landing_locked(l);
                }
        }
        pthread_cond_broadcast(&conn.recv_cond);
        pthread_mutex_unlock(&conn.recv_lock);
        if (old >= 0 && old != fd)
                close(old);

        replay_ack(&conn.replay, n);
        int rc = replay_for_each_after(&conn.replay, n, resend_one, ra);
        if (rc >= 0) {
                conn.resumes++;
                pthread_mutex_lock(&conn.recv_lock);
                atomic_store_explicit(&conn.state, CONN_UP, memory_order_release);
                pthread_cond_broadcast(&conn.recv_cond);
                pthread_mutex_unlock(&conn.recv_lock);
        }
        pthread_mutex_unlock(&conn.send_lock);
        if (rc < 0) {
                /* answers to resent calls may have come before it failed */
                shutdown(fd, SHUT_RDWR);
                drain_lost_connection();
        }
        return rc < 0 ? rc : 0;
}

static void session_lost(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void session_lost(const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        pthread_mutex_lock(&conn.recv_lock);
        conn_die_locked("lost the session %s: %s", conn.name, msg);
        pthread_mutex_unlock(&conn.recv_lock);
        /* nothing is ever resent now */
        pthread_mutex_lock(&conn.send_lock);
        replay_free(&conn.replay);
        pthread_mutex_unlock(&conn.send_lock);
}

/* One endpoint, one try: connect, HELLO with the session's token, check that
 * this is our session as we left it, resume. RESUMED, SESSION_LOST (said so
 * in the log), or -errno to go on trying. */
static int try_resume(const struct lup_endpoint *ep, void *userdata)
{
        struct resume_attempt *ra = userdata;
        struct hello_reply rep = { 0 };
        int fd = lup_connect(ep);
        if (fd < 0) {
                snprintf(ra->last_error, sizeof(ra->last_error), "%s: %s", ep->text, strerror(-fd));
                return fd;
        }
        set_io_timeout(fd, LUPC_HANDSHAKE_TIMEOUT_MS);
        int rc = hello_exchange(fd, atomic_load_explicit(&conn.acked, memory_order_relaxed), &rep);
        if (rc < 0) {
                snprintf(ra->last_error, sizeof(ra->last_error), "%s: %s", ep->text,
                         rc == -EAGAIN ? "no answer to HELLO" :
                         rc == -EPROTO ? "malformed HELLO reply" : "connection closed during the handshake");
                close(fd);
                return rc;
        }
        if (rep.status != 0) {
                snprintf(ra->last_error, sizeof(ra->last_error), "%s refused: %.200s", ep->text, rep.msg);
                close(fd);
                if (rep.status == CUDA_ERROR_DEVICE_UNAVAILABLE && strstr(rep.msg, "no longer exists")) {
                        session_lost("lupined at %s says: %s", ep->text, rep.msg);
                        return SESSION_LOST;
                }
                return -ECONNREFUSED;
        }
        free(rep.devs); /* the device snapshot stays the one taken at init */

        uint64_t n = rep.last_executed, acked = atomic_load_explicit(&conn.acked, memory_order_relaxed);
        uint64_t sent = atomic_load_explicit(&conn.next_seq, memory_order_relaxed) - 1;
        char bad[256] = "";
        if (memcmp(rep.token, conn.token, sizeof(conn.token)) != 0)
                snprintf(bad, sizeof(bad), "session %s no longer exists there (the server started a new one)", conn.name);
        else if (rep.arena_base != conn.arena_base || rep.arena_size != conn.arena_size)
                snprintf(bad, sizeof(bad),
                         "the server restored the session at another address (0x%llx instead of 0x%llx); refusing to continue with moved pointers",
                         (unsigned long long)rep.arena_base, (unsigned long long)conn.arena_base);
        else if (n < acked || n > sent)
                snprintf(bad, sizeof(bad), "the server says it executed up to seq %llu, but it had confirmed %llu and %llu were sent",
                         (unsigned long long)n, (unsigned long long)acked, (unsigned long long)sent);
        if (bad[0]) {
                /* that server-side session is of no use: end it at once */
                uint8_t hb[LUP_HDR_SIZE];
                struct lup_hdr bye = { .op = LUP_OP_GOODBYE, .seq = n + 1 };
                lup_hdr_encode(hb, &bye);
                (void)send(fd, hb, sizeof(hb), MSG_NOSIGNAL | MSG_DONTWAIT);
                close(fd);
                session_lost("lupined at %s: %s", ep->text, bad);
                return SESSION_LOST;
        }
        set_io_timeout(fd, 0);
        ra->resent = 0;
        rc = resume_on(fd, n, ra);
        if (rc == -EBADMSG) {
                session_lost("lupined at %s broke the protocol while resuming (%s)", ep->text, ra->last_error);
                return SESSION_LOST;
        }
        if (rc < 0)
                return rc;
        ra->executed = n;
        return RESUMED;
}

/* The reconnect loop, run by exactly one thread (it holds the reader role,
 * no lock): attempt i waits uniform(0, min(10 s, 100 ms x 2^i)) (full
 * jitter), then tries every endpoint in order, until the session is resumed,
 * refused for good, or LUPINE_RECONNECT_TIMEOUT has passed since the
 * connection was lost. */
static void reconnect(void)
{
        struct resume_attempt ra = { 0 };
        char tried[1100];

        pthread_mutex_lock(&conn.recv_lock);
        uint64_t t0 = conn.lost_at_ns;
        snprintf(ra.last_error, sizeof(ra.last_error), "%s", conn.lost_why);
        pthread_mutex_unlock(&conn.recv_lock);
        if (conn_state() != CONN_RECONNECTING)
                return;
        drain_lost_connection();
        ra.deadline_ns = t0 + (uint64_t)conn.reconnect_s * 1000000000ull;
        for (unsigned attempt = 0;; attempt++) {
                uint64_t cap_ms = attempt >= 7 ? LUPC_BACKOFF_CAP_MS : (uint64_t)LUPC_BACKOFF_FIRST_MS << attempt;
                if (cap_ms > LUPC_BACKOFF_CAP_MS)
                        cap_ms = LUPC_BACKOFF_CAP_MS;
                uint64_t wait = random_below(cap_ms * 1000000ull + 1), now = mono_ns();
                if (now >= ra.deadline_ns)
                        break;
                sleep_ns(wait < ra.deadline_ns - now ? wait : ra.deadline_ns - now);
                if (mono_ns() >= ra.deadline_ns)
                        break;
                int rc = for_each_endpoint(try_resume, &ra, tried, sizeof(tried));
                if (rc == SESSION_LOST)
                        return;
                if (rc == RESUMED) {
                        lup_info("resumed session %s at seq %llu after %.1f s, resent %zu calls", conn.name,
                                 (unsigned long long)ra.executed, (double)(mono_ns() - t0) / 1e9, ra.resent);
                        return;
                }
                lup_debug("reconnect attempt %u failed: %s", attempt + 1, ra.last_error);
        }
        session_lost("could not reconnect to lupined within %u s (last error: %s)", conn.reconnect_s, ra.last_error);
}

/* An orderly goodbye when the process exits, so the worker ends the session
 * at once instead of treating the closed socket as a network failure. Never
 * blocks: if another thread holds the send lock, or the connection is being
 * re-established, the socket simply closes. */
__attribute__((destructor)) static void say_goodbye(void)
{
        if (conn_state() != CONN_UP || pthread_mutex_trylock(&conn.send_lock) != 0)
                return;
        if (conn.fd >= 0 && conn_state() == CONN_UP) {
                uint8_t hb[LUP_HDR_SIZE];
                struct lup_hdr h = { .op = LUP_OP_GOODBYE,
                                     .seq = atomic_fetch_add_explicit(&conn.next_seq, 1, memory_order_relaxed) };
                lup_hdr_encode(hb, &h);
                (void)send(conn.fd, hb, sizeof(hb), MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        pthread_mutex_unlock(&conn.send_lock);
}
