/* SPDX-License-Identifier: MIT */
/*
 * The shim's connection: sending frames, and the reader role that reads
 * them. The calls built on it (lupc_call, bulk copies, uploads) are in
 * calls.c, starting the connection is in hello.c, getting it back after a
 * loss in reconnect.c; the shared state is in conn.h.
 *
 * Connection states (conn.state):
 *   UP            frames flow. Every frame read from the server carries in
 *                 its header the last sequence number the server executed;
 *                 that acknowledges (and trims) the replay buffer.
 *   RECONNECTING  a read or write failed, or the server said GOODBYE.
 *                 Exactly one thread (whoever next needs the connection and
 *                 finds the reader role free) runs lupc_reconnect(); every other
 *                 thread blocks inside its CUDA call: senders before they
 *                 send, waiters in lupc_wait_reply(). Nobody sees an error.
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
#include "conn.h"

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
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "ctl_codec.h"
#include "frame.h"
#include "image.h"
#include "log.h"
#include "net.h"
#include "ops.h"
#include "replay.h"


static atomic_uint next_lane;
static __thread uint32_t my_lane_plus1;
uint32_t lupc_my_lane(void)
{
        if (!my_lane_plus1)
                my_lane_plus1 = (atomic_fetch_add(&next_lane, 1) % LUP_MAX_LANES) + 1;
        return my_lane_plus1 - 1;
}


uint32_t lupc_driver_version(void)
{
        struct lupc_conn *c = lupc_route();
        return c->driver_version;
}

int lupc_backend_kind(void)
{
        struct lupc_conn *c = lupc_route();
        return c->backend;
}

CUresult lupc_protocol_error(const char *what)
{
        static atomic_int once;
        if (!atomic_exchange(&once, 1))
                lup_err("protocol error: malformed reply to %s (server and client versions differ?)", what);
        return CUDA_ERROR_UNKNOWN;
}

const char *lupc_op_name(unsigned op)
{
        const char *n = lup_op_name(op);
        return n ? n : "a call";
}

enum conn_state lupc_conn_state(struct lupc_conn *c)
{
        return (enum conn_state)atomic_load_explicit(&c->state, memory_order_acquire);
}

void lupc_conn_stats(struct lupc_conn_stats *ret)
{
        struct lupc_conn *c = lupc_route();
        pthread_mutex_lock(&c->send_lock);
        *ret = (struct lupc_conn_stats){
                .state = (int)lupc_conn_state(c),
                .sent = atomic_load(&c->next_seq) - 1,
                .acked = atomic_load(&c->acked),
                .replay_bytes = replay_bytes(&c->replay),
                .replay_frames = replay_count(&c->replay),
                .replay_max = c->replay_on ? c->replay.max_bytes : 0,
                .resumes = c->resumes,
        };
        pthread_mutex_unlock(&c->send_lock);
}

static struct lupc_waiter *find_waiter_locked(struct lupc_conn *c, uint64_t seq)
{
        for (struct lupc_waiter *w = c->waiters; w; w = w->next)
                if (w->seq == seq)
                        return w;
        return NULL;
}

void lupc_unlink_waiter_locked(struct lupc_conn *c, struct lupc_waiter *me)
{
        for (struct lupc_waiter **pp = &c->waiters; *pp; pp = &(*pp)->next) {
                if (*pp == me) {
                        *pp = me->next;
                        return;
                }
        }
}

struct lupc_landing *lupc_find_landing_locked(struct lupc_conn *c, uint64_t token)
{
        for (struct lupc_landing *l = c->landings; l; l = l->next)
                if (l->token == token)
                        return l;
        return NULL;
}

void lupc_drop_landing_locked(struct lupc_conn *c, struct lupc_landing *l)
{
        for (struct lupc_landing **pp = &c->landings; *pp; pp = &(*pp)->next) {
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
void lupc_conn_die_locked(struct lupc_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void lupc_conn_die_locked(struct lupc_conn *c, const char *fmt, ...)
{
        if (lupc_conn_state(c) == CONN_DEAD)
                return;
        va_list ap;
        va_start(ap, fmt);
        lup_vlogf(LUP_LOG_ERR, fmt, ap);
        va_end(ap);
        atomic_store_explicit(&c->state, CONN_DEAD, memory_order_release);
        if (c->link.fd >= 0)
                shutdown(c->link.fd, SHUT_RDWR); /* a reader or writer blocked on it returns */
        if (!c->reader_busy)
                while (c->landings)
                        lupc_drop_landing_locked(c, c->landings);
        pthread_cond_broadcast(&c->recv_cond);
}

/* A read or write on connection generation gen failed with rc, or the
 * server said GOODBYE. Starts reconnecting (or, when that is disabled or the
 * server broke the protocol, gives up). A failure of a connection that has
 * already been replaced is ignored. recv_lock held. */
static void conn_lost_locked(struct lupc_conn *c, uint64_t gen, int rc, const char *why)
{
        if (gen != c->gen || lupc_conn_state(c) != CONN_UP)
                return;
        if (rc == -EBADMSG || c->reconnect_s == 0) {
                lupc_conn_die_locked(
                        c, "connection to lupined lost (%s); CUDA calls now fail with CUDA_ERROR_DEVICE_UNAVAILABLE",
                        why);
                return;
        }
        atomic_store_explicit(&c->state, CONN_RECONNECTING, memory_order_release);
        c->lost_at_ns = lup_now_ns();
        snprintf(c->lost_why, sizeof(c->lost_why), "%s", why);
        shutdown(c->link.fd, SHUT_RDWR); /* a reader or writer blocked on it returns */
        lup_warn("connection to lupined lost (%s); reconnecting for up to %u s", why, c->reconnect_s);
        pthread_cond_broadcast(&c->recv_cond);
}

/* Gives the reader role back. recv_lock held. */
static void release_reader_locked(struct lupc_conn *c)
{
        c->reader_busy = false;
        if (lupc_conn_state(c) == CONN_DEAD)
                while (c->landings)
                        lupc_drop_landing_locked(c, c->landings);
        pthread_cond_broadcast(&c->recv_cond);
}


/* Takes the reader role (the caller saw it free) and runs the reconnect
 * loop in this thread. recv_lock held on entry and on return. */
static void run_reconnect_locked(struct lupc_conn *c)
{
        c->reader_busy = true;
        pthread_mutex_unlock(&c->recv_lock);
        lupc_reconnect(c);
        pthread_mutex_lock(&c->recv_lock);
        release_reader_locked(c);
}

/* Blocks while the connection is being re-established, running the
 * reconnect itself when nobody else is. CUDA_SUCCESS once the connection is
 * up, CUDA_ERROR_DEVICE_UNAVAILABLE once the session is lost. */
static CUresult await_connection(struct lupc_conn *c)
{
        enum conn_state st;
        pthread_mutex_lock(&c->recv_lock);
        while ((st = lupc_conn_state(c)) == CONN_RECONNECTING) {
                if (c->reader_busy)
                        pthread_cond_wait(&c->recv_cond, &c->recv_lock);
                else
                        run_reconnect_locked(c);
        }
        pthread_mutex_unlock(&c->recv_lock);
        return st == CONN_UP ? CUDA_SUCCESS : CUDA_ERROR_DEVICE_UNAVAILABLE;
}

/* ---- reading frames (the reader role held) */

/* The server executed everything up to ack. Frees what the replay buffer no
 * longer needs unless a sender holds the send lock (it trims before its own
 * append), so a reader never waits for a writer. */
static void note_ack(struct lupc_conn *c, uint64_t ack)
{
        if (ack <= atomic_load_explicit(&c->acked, memory_order_relaxed))
                return;
        atomic_store_explicit(&c->acked, ack, memory_order_relaxed);
        if (c->replay_on && pthread_mutex_trylock(&c->send_lock) == 0) {
                replay_ack(&c->replay, ack);
                pthread_mutex_unlock(&c->send_lock);
        }
}

static int conn_read_full(struct lupc_conn *c, void *p, size_t n);
static const char *io_why(struct lupc_conn *c, int rc);

/* Asynchronous device->host data: straight into the caller's buffer. The
 * landing's destination is copied under the lock and progress is recorded
 * under it again, so a landing dropped meanwhile is never touched. */
static int read_data_frame(struct lupc_conn *c, const struct lup_hdr *h, const char **why)
{
        uint8_t b[LUP_DATA_HDR_SIZE];
        struct lup_data d;
        if (lup_data_short(h->len)) {
                *why = "short DATA frame";
                return -EBADMSG;
        }
        int rc = conn_read_full(c, b, sizeof(b));
        if (rc < 0) {
                *why = io_why(c, rc);
                return rc;
        }
        if (lup_data_decode(b, h->len, &d, why) < 0)
                return -EBADMSG;
        uint64_t token = d.token, off = d.offset, n = d.n;
        pthread_mutex_lock(&c->recv_lock);
        struct lupc_landing *l = lupc_find_landing_locked(c, token);
        bool ok = l && off == l->received && n <= l->size - l->received;
        uint8_t *dst = ok ? l->dst : NULL;
        pthread_mutex_unlock(&c->recv_lock);
        if (!ok) {
                *why = "DATA frame for an unknown copy or past its end";
                return -EBADMSG;
        }
        rc = conn_read_full(c, dst + off, n);
        if (rc < 0) {
                *why = io_why(c, rc);
                return rc;
        }
        pthread_mutex_lock(&c->recv_lock);
        l = lupc_find_landing_locked(c, token);
        if (l) {
                l->received += n;
                /* a failed copy is reported by the next synchronous call (the
                 * worker latched it), as CUDA reports asynchronous errors */
                if (h->status != 0 || l->received == l->size)
                        lupc_drop_landing_locked(c, l);
        }
        pthread_mutex_unlock(&c->recv_lock);
        return 0;
}

/* Device printf output from the server: onto this process's stdout, where
 * the program's own output goes, before the call that flushed it returns. */
static int read_output_frame(struct lupc_conn *c, const struct lup_hdr *h, const char **why)
{
        uint8_t buf[16384];
        uint32_t left = h->len;

        if (h->flags != 0 || h->status != 0) {
                *why = "malformed OUTPUT frame";
                return -EBADMSG;
        }
        while (left > 0) {
                uint32_t n = left < sizeof(buf) ? left : (uint32_t)sizeof(buf);
                int rc = conn_read_full(c, buf, n);
                if (rc < 0) {
                        *why = io_why(c, rc);
                        return rc;
                }
                fwrite(buf, 1, n, stdout);
                left -= n;
        }
        fflush(stdout);
        return 0;
}

uint64_t lupc_spin_ns = 50000; /* LUPINE_SPIN_US, read at init */

static void heartbeat_ping(struct lupc_conn *c);

/* Silence on the connection while this thread needs it (reading an answer,
 * or blocked sending): after hb_ms a PING asks the server for a sign of
 * life (it answers, or sends ALIVE while a call keeps it busy); after
 * hb_timeout_ms the connection counts as lost. -ETIMEDOUT then. */
static int heartbeat_check(struct lupc_conn *c, bool may_ping)
{
        if (!c->hb_ms)
                return 0;
        uint64_t now = lup_now_ns(), quiet = now - atomic_load_explicit(&c->last_rx_ns, memory_order_relaxed);
        if (quiet >= (uint64_t)c->hb_timeout_ms * 1000000ull)
                return -ETIMEDOUT;
        if (may_ping && quiet >= (uint64_t)c->hb_ms * 1000000ull)
                heartbeat_ping(c);
        return 0;
}

/* Reads exactly n bytes (a read waits at most hb_ms, so a silent server
 * is noticed). 0 or -errno. */
static int conn_read_full(struct lupc_conn *c, void *p, size_t n)
{
        uint8_t *b = p;
        while (n) {
                ssize_t k = lupt_read(&c->link, b, n);
                if (k > 0) {
                        atomic_store_explicit(&c->last_rx_ns, lup_now_ns(), memory_order_relaxed);
                        b += k;
                        n -= (size_t)k;
                        continue;
                }
                if (k == 0)
                        return -ECONNRESET;
                if (k != -EAGAIN)
                        return (int)k;
                int rc = heartbeat_check(c, true);
                if (rc < 0)
                        return rc;
        }
        return 0;
}

/* Reads the rest of a frame header (got bytes of it are there), polling
 * for a short while first: a reply usually comes within tens of
 * microseconds, and sleeping costs a wake-up. */
static int read_header(struct lupc_conn *c, uint8_t *hb, size_t got)
{
        if (lupc_spin_ns) {
                uint64_t deadline = lup_now_ns() + lupc_spin_ns;
                while (got < LUP_HDR_SIZE) {
                        ssize_t k = lupt_recv_nb(&c->link, hb + got, LUP_HDR_SIZE - got);
                        if (k > 0) {
                                atomic_store_explicit(&c->last_rx_ns, lup_now_ns(), memory_order_relaxed);
                                got += (size_t)k;
                                continue;
                        }
                        if (k == 0)
                                return -ECONNRESET;
                        if (k != -EAGAIN)
                                return (int)k;
                        if (lup_now_ns() >= deadline)
                                break;
                }
        }
        return got == LUP_HDR_SIZE ? 0 : conn_read_full(c, hb + got, LUP_HDR_SIZE - got);
}

static const char *io_why(struct lupc_conn *c, int rc)
{
        static char quiet[96];
        static __thread char tls_why[256];
        if (rc == -ETIMEDOUT && c->hb_ms) {
                snprintf(quiet, sizeof(quiet), "no sign of life from lupined for %u ms (heartbeat)", c->hb_timeout_ms);
                return quiet;
        }
        if (rc == -EPROTO && c->link.tls) {
                snprintf(tls_why, sizeof(tls_why), "%s", lupt_why(&c->link));
                return tls_why;
        }
        return rc == -ECONNRESET || rc == -EPIPE ? "server closed the connection" : strerror(-rc);
}

static int read_frame(struct lupc_conn *c, uint8_t *hb, size_t got, const char **why);

/* Reads one frame with the reader role held (recv_lock NOT held).
 * Returns 0 or -errno (-EBADMSG: the server broke the protocol) and sets
 * *why. A GOODBYE acknowledges like any frame, then reads as -ECONNRESET. */
int lupc_read_one_frame(struct lupc_conn *c, const char **why)
{
        uint8_t hb[LUP_HDR_SIZE];
        return read_frame(c, hb, 0, why);
}

/* A frame has begun to arrive when a read that does not wait returns a
 * byte of it (under TLS, bytes on the socket may be no whole record yet). */
int lupc_read_frame_if_any(struct lupc_conn *c, const char **why)
{
        uint8_t hb[LUP_HDR_SIZE];
        ssize_t k = lupt_recv_nb(&c->link, hb, sizeof(hb));
        if (k == -EAGAIN)
                return -EAGAIN;
        if (k <= 0) {
                *why = io_why(c, k == 0 ? -ECONNRESET : (int)k);
                return k == 0 ? -ECONNRESET : (int)k;
        }
        atomic_store_explicit(&c->last_rx_ns, lup_now_ns(), memory_order_relaxed);
        return read_frame(c, hb, (size_t)k, why);
}

/* A frame whose first got header bytes are in hb. */
static int read_frame(struct lupc_conn *c, uint8_t *hb, size_t got, const char **why)
{
        struct lup_hdr h;
        int rc = read_header(c, hb, got);
        if (rc < 0) {
                *why = io_why(c, rc);
                return rc;
        }
        if (lup_hdr_decode(hb, &h, why) < 0)
                return -EBADMSG;
        /* Every server frame says how far the server has executed. */
        if (h.ctx >= atomic_load_explicit(&c->next_seq, memory_order_relaxed)) {
                *why = "server acknowledged a call that was never sent";
                return -EBADMSG;
        }
        note_ack(c, h.ctx);
        if (h.op == LUP_OP_GOODBYE) {
                lupc_goodbye_read(c, &h);
                *why = c->goodbye_why;
                return -ECONNRESET;
        }
        if (h.op == LUP_OP_ALIVE) {
                /* the server is busy with a long call: a sign of life only */
                if (h.len != 0 || h.flags != 0) {
                        *why = "malformed ALIVE frame";
                        return -EBADMSG;
                }
                return 0;
        }
        if (h.op == LUP_OP_OUTPUT) {
                rc = read_output_frame(c, &h, why);
                if (rc == 0)
                        atomic_fetch_add_explicit(&c->rx_bytes, LUP_HDR_SIZE + h.len, memory_order_relaxed);
                return rc;
        }
        if (h.op == LUP_OP_DATA) {
                rc = read_data_frame(c, &h, why);
                if (rc == 0)
                        atomic_fetch_add_explicit(&c->rx_bytes, LUP_HDR_SIZE + h.len, memory_order_relaxed);
                return rc;
        }
        if (!(h.flags & LUP_F_REPLY)) {
                *why = "unexpected request frame from server";
                return -EBADMSG;
        }
        pthread_mutex_lock(&c->recv_lock);
        struct lupc_waiter *w = find_waiter_locked(c, h.seq);
        pthread_mutex_unlock(&c->recv_lock);
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
        rc = conn_read_full(c, w->rep + w->len, h.len);
        if (rc < 0) {
                *why = io_why(c, rc);
                return rc;
        }
        atomic_fetch_add_explicit(&c->rx_bytes, LUP_HDR_SIZE + h.len, memory_order_relaxed);
        pthread_mutex_lock(&c->recv_lock);
        w->len += h.len;
        if (!(h.flags & LUP_F_MORE) || h.status != 0) {
                w->status = (CUresult)h.status;
                w->done = true;
                if (w == &c->ack_req) {
                        /* an ack request: it did its work in note_ack() */
                        lupc_unlink_waiter_locked(c, w);
                        c->ack_req_pending = false;
                }
                pthread_cond_broadcast(&c->recv_cond);
        }
        pthread_mutex_unlock(&c->recv_lock);
        return 0;
}

/* Reads the frames that have already arrived, without waiting for more, if
 * no other thread holds the reader role. */
static void harvest_replies(struct lupc_conn *c)
{
        pthread_mutex_lock(&c->recv_lock);
        if (c->reader_busy || lupc_conn_state(c) != CONN_UP) {
                pthread_mutex_unlock(&c->recv_lock);
                return;
        }
        c->reader_busy = true;
        uint64_t gen = c->gen;
        pthread_mutex_unlock(&c->recv_lock);
        const char *why = NULL;
        int rc;
        while ((rc = lupc_read_frame_if_any(c, &why)) == 0)
                ;
        pthread_mutex_lock(&c->recv_lock);
        if (rc < 0 && rc != -EAGAIN)
                conn_lost_locked(c, gen, rc, why ? why : "read error");
        release_reader_locked(c);
        pthread_mutex_unlock(&c->recv_lock);
}

/* Waits until w is done, taking the reader role whenever it is free (and
 * running the reconnect when the connection is down). */
void lupc_wait_reply(struct lupc_conn *c, struct lupc_waiter *w)
{
        pthread_mutex_lock(&c->recv_lock);
        while (!w->done) {
                if (c->reader_busy) {
                        pthread_cond_wait(&c->recv_cond, &c->recv_lock);
                        continue;
                }
                enum conn_state st = lupc_conn_state(c);
                if (st == CONN_DEAD) {
                        w->done = true;
                        w->status = CUDA_ERROR_DEVICE_UNAVAILABLE;
                        break;
                }
                if (st == CONN_RECONNECTING) {
                        run_reconnect_locked(c);
                        continue;
                }
                c->reader_busy = true;
                uint64_t gen = c->gen;
                pthread_mutex_unlock(&c->recv_lock);
                const char *why = NULL;
                int rc = lupc_read_one_frame(c, &why);
                pthread_mutex_lock(&c->recv_lock);
                if (rc < 0)
                        conn_lost_locked(c, gen, rc, why ? why : "read error");
                release_reader_locked(c);
        }
        lupc_unlink_waiter_locked(c, w);
        pthread_mutex_unlock(&c->recv_lock);
}

/* ---- sending frames */


/* Flow control, the only one: the replay buffer is full, so get an
 * acknowledgement. A synchronous PING is answered only after the server
 * executed every frame sent before it, and its reply's header says so, which
 * empties the buffer of all of them. It cannot deadlock: the PING itself is
 * exempt from the bound, its reply needs nothing from the client but to be
 * read, and this thread reads it (it becomes the reader when nobody else
 * is). While the connection is down it waits like any call. */
static CUresult await_ack(struct lupc_conn *c)
{
        struct lupc_waiter w = { 0 };
        uint8_t rx[8];
        lup_put64(rx, atomic_load_explicit(&c->rx_bytes, memory_order_relaxed));
        CUresult r = lupc_send_frame(c, LUP_OP_PING, LUP_F_SYNC, 0, rx, sizeof(rx), NULL, 0, &w, 0);
        if (r != CUDA_SUCCESS)
                return r;
        lupc_wait_reply(c, &w);
        /* a PING whose reply was lost in a reconnect was still executed */
        return lupc_conn_state(c) == CONN_DEAD ? CUDA_ERROR_DEVICE_UNAVAILABLE : CUDA_SUCCESS;
}

/* Writes whole frames, send_lock held. A write waits at most hb_ms: while
 * the socket stays full, whatever the server sent meanwhile is read (if no
 * other thread reads), and with neither progress nor a sign of life for
 * hb_timeout_ms the connection counts as lost (-ETIMEDOUT). The same iov
 * is written again after -EAGAIN, as TLS needs (transport.h). */
static int conn_writev(struct lupc_conn *c, struct iovec *iov, int iovcnt)
{
        uint64_t progress = lup_now_ns();
        while (iovcnt > 0 || lupt_unsent(&c->link)) {
                ssize_t k = lupt_send(&c->link, iov, iovcnt, false);
                if (k == -EAGAIN) {
                        harvest_replies(c);
                        uint64_t limit = (uint64_t)c->hb_timeout_ms * 1000000ull;
                        if (c->hb_ms && lup_now_ns() - progress >= limit && heartbeat_check(c, false) < 0)
                                return -ETIMEDOUT;
                        continue;
                }
                if (k < 0)
                        return (int)k;
                progress = lup_now_ns();
                lup_iov_advance(&iov, &iovcnt, (size_t)k);
        }
        return 0;
}

static bool request_ack_locked(struct lupc_conn *c, uint64_t gen);

/* A heartbeat: the ack request PING (one at a time), unless a sender holds
 * the connection, which then watches it itself. Called by the reader. */
static void heartbeat_ping(struct lupc_conn *c)
{
        if (pthread_mutex_trylock(&c->send_lock) != 0)
                return;
        if (lupc_conn_state(c) == CONN_UP && c->replay_on)
                (void)request_ack_locked(c, c->gen);
        pthread_mutex_unlock(&c->send_lock);
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
static bool request_ack_locked(struct lupc_conn *c, uint64_t gen)
{
        pthread_mutex_lock(&c->recv_lock);
        bool pending = c->ack_req_pending;
        pthread_mutex_unlock(&c->recv_lock);
        if (pending)
                return true;
        uint8_t hb[LUP_HDR_SIZE + 8];
        struct iovec iov = { hb, sizeof(hb) };
        struct lup_hdr h = { .len = 8,
                             .op = LUP_OP_PING,
                             .flags = LUP_F_SYNC,
                             .lane = lupc_my_lane(),
                             .seq = atomic_load_explicit(&c->next_seq, memory_order_relaxed) };
        lup_hdr_encode(hb, &h);
        /* what of the reply stream arrived: the server may forget it */
        c->rx_reported = atomic_load_explicit(&c->rx_bytes, memory_order_relaxed);
        lup_put64(hb + LUP_HDR_SIZE, c->rx_reported);
        if (replay_append(&c->replay, h.seq, &iov, 1, NULL) < 0)
                return false;
        atomic_store_explicit(&c->next_seq, h.seq + 1, memory_order_relaxed);
        pthread_mutex_lock(&c->recv_lock);
        c->ack_req = (struct lupc_waiter){ .seq = h.seq, .op = LUP_OP_PING, .next = c->waiters };
        c->waiters = &c->ack_req;
        c->ack_req_pending = true;
        pthread_mutex_unlock(&c->recv_lock);
        int rc = conn_writev(c, &iov, 1);
        if (rc < 0) {
                pthread_mutex_lock(&c->recv_lock);
                conn_lost_locked(c, gen, rc, io_why(c, rc));
                pthread_mutex_unlock(&c->recv_lock);
        }
        return false;
}

/* Writes one frame (header + up to two payload pieces) under the send lock,
 * after copying it into the replay buffer. A registered waiter (and the
 * landing of an async copy with token `landing`, if not 0) gets the frame's
 * seq before the frame leaves. While the connection is down it waits; a
 * write that fails starts the lupc_reconnect, and the frame goes again from the
 * replay buffer. Returns CUDA_SUCCESS, or CUDA_ERROR_DEVICE_UNAVAILABLE /
 * _OUT_OF_MEMORY before anything was sent; once a waiter is registered the
 * result is CUDA_SUCCESS and the call's outcome is the waiter's. */
CUresult lupc_send_frame(struct lupc_conn *c, uint16_t op, uint16_t flags, uint64_t ctx, const void *a, size_t alen,
                         const void *b, size_t blen, struct lupc_waiter *w, uint64_t landing)
{
        uint8_t hb[LUP_HDR_SIZE];
        struct iovec iov[3] = {
                { hb, sizeof(hb) }, { (void *)a, alen }, { (void *)b, blen },
        };
        int iovcnt = blen ? 3 : (alen ? 2 : 1);
        struct lup_hdr h = { .len = (uint32_t)(alen + blen),
                             .op = op,
                             .flags = flags,
                             .lane = lupc_my_lane(),
                             .ctx = lupc_ctx_to_wire(ctx) };
        int rc;

        for (;;) {
                pthread_mutex_lock(&c->send_lock);
                enum conn_state st = lupc_conn_state(c);
                if (st == CONN_UP) {
                        if (!c->replay_on)
                                break;
                        replay_ack(&c->replay, atomic_load_explicit(&c->acked, memory_order_relaxed));
                        if (op == LUP_OP_PING || replay_fits(&c->replay, LUP_HDR_SIZE + alen + blen))
                                break;
                        pthread_mutex_unlock(&c->send_lock);
                        CUresult r = await_ack(c);
                        if (r != CUDA_SUCCESS)
                                return r;
                        continue;
                }
                pthread_mutex_unlock(&c->send_lock);
                if (st == CONN_DEAD || await_connection(c) != CUDA_SUCCESS)
                        return CUDA_ERROR_DEVICE_UNAVAILABLE;
        }
        /* send_lock held, the connection up */
        h.seq = atomic_load_explicit(&c->next_seq, memory_order_relaxed);
        lup_hdr_encode(hb, &h);
        if (c->replay_on) {
                const uint8_t *copy;
                if (replay_append(&c->replay, h.seq, iov, iovcnt, &copy) < 0) {
                        pthread_mutex_unlock(&c->send_lock);
                        lup_err("out of memory for the replay buffer (%zu bytes held)", replay_bytes(&c->replay));
                        return CUDA_ERROR_OUT_OF_MEMORY;
                }
                /* write the copy, still in the cache, not the caller's
                 * buffers: the copy is then the only extra pass over them */
                iov[0] = (struct iovec){ (void *)copy, LUP_HDR_SIZE + alen + blen };
                iovcnt = 1;
        }
        atomic_store_explicit(&c->next_seq, h.seq + 1, memory_order_relaxed);
        uint64_t gen = c->gen;
        if (w || landing) {
                pthread_mutex_lock(&c->recv_lock);
                if (w) {
                        w->seq = h.seq;
                        w->op = op;
                        w->next = c->waiters;
                        c->waiters = w;
                }
                struct lupc_landing *l = landing ? lupc_find_landing_locked(c, landing) : NULL;
                if (l)
                        l->seq = h.seq;
                pthread_mutex_unlock(&c->recv_lock);
        }
        rc = conn_writev(c, iov, iovcnt);
        bool harvest = false;
        if (rc == 0 && c->replay_on) {
                c->since_ack_req += LUP_HDR_SIZE + alen + blen;
                if (c->since_ack_req >= c->ack_interval ||
                    atomic_load_explicit(&c->rx_bytes, memory_order_relaxed) - c->rx_reported >= c->ack_interval) {
                        c->since_ack_req = 0;
                        harvest = request_ack_locked(c, gen);
                }
        }
        pthread_mutex_unlock(&c->send_lock);
        if (harvest)
                harvest_replies(c);
        if (lup_trace_level() >= 2)
                lup_tracef("send %s seq=%llu lane=%u len=%u%s", lupc_op_name(op), (unsigned long long)h.seq, h.lane, h.len,
                           rc < 0 ? " (write failed)" : "");
        if (rc < 0) {
                pthread_mutex_lock(&c->recv_lock);
                conn_lost_locked(c, gen, rc, io_why(c, rc));
                pthread_mutex_unlock(&c->recv_lock);
                /* The frame is in the replay buffer and goes again once
                 * reconnected; a waiter learns the outcome in lupc_wait_reply(). */
                if (!w)
                        return await_connection(c);
        }
        return CUDA_SUCCESS;
}
