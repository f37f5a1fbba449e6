/* SPDX-License-Identifier: MIT */
/*
 * The worker's write side: everything that leaves the worker for its client
 * goes through here. Replies are batched in s->out.buf and written once a batch
 * of frames is done; every byte of the reply stream is also kept in the
 * reply log (worker/tx.h) so that a client that resumes gets what it missed.
 * A heartbeat thread sends ALIVE while a long call runs, so the client can
 * tell a busy worker from a dead one. Asynchronous failures are latched here
 * and answer the next synchronous call, as the driver's own deferred errors do.
 *
 * Device printf, forwarded to the client's stdout. The driver writes a
 * kernel's printf output to the process's standard output when the work is
 * synchronised. In the worker that is a memfd (set up before the driver is
 * loaded), so the driver never blocks on it; before each reply the worker
 * sends whatever arrived there as OUTPUT frames, which land on the client's
 * stdout before the call that flushed them returns, in order with the
 * program's own output.
 */
#define LUP_LOG_CAT LUP_LOGC_NET
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "ckpt_codec.h"
#include "clock.h"
#include "env.h"
#include "frame.h"
#include "log.h"
#include "net.h"
#include "provider_load.h"
#include "worker/session.h"

/* ---- the write side: the reply log, heartbeats (see worker/tx.h) */

void lupw_tx_init(struct lupw_session *s)
{
        struct lupw_tx *t = &s->tx;
        pthread_mutex_init(&t->lock, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&t->cond, &ca);
        pthread_condattr_destroy(&ca);
        t->cap = (size_t)lup_env_uint("LUPINE_REPLY_CACHE_MB", LUPW_REPLY_CACHE_MB, LUPW_MAX_REPLY_CACHE_MB) << 20;
        t->client_timeout_ms = lup_env_uint("LUPINE_CLIENT_TIMEOUT_MS", LUPW_CLIENT_TIMEOUT_MS, 24u * 3600u * 1000u);
}

/* Appends stream bytes to the log, forgetting the oldest beyond its bound. */
static void log_append(struct lupw_tx *t, const void *p, size_t n)
{
        if (!t->resend || t->cap == 0 || n == 0) {
                t->end += n;
                t->start = t->end;
                return;
        }
        if (!t->buf) {
                void *m = mmap(NULL, t->cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
                if (m == MAP_FAILED) {
                        lup_warn("no memory for the reply log; answers lost with a connection cannot be resent");
                        t->cap = 0;
                        t->end += n;
                        t->start = t->end;
                        return;
                }
                t->buf = m;
        }
        const uint8_t *b = p;
        if (n > t->cap) { /* only the newest cap bytes can be kept */
                b += n - t->cap;
                t->end += n - t->cap;
                t->start = t->end;
                n = t->cap;
        }
        if (t->end + n - t->start > t->cap)
                t->start = t->end + n - t->cap;
        size_t at = (size_t)(t->end % t->cap), first = t->cap - at < n ? t->cap - at : n;
        memcpy(t->buf + at, b, first);
        memcpy(t->buf, b + first, n - first);
        t->end += n;
}

/* Whole frames to fd, through its TLS session tls when it has one (NULL: a
 * plain socket). tx.lock held. */
static int conn_writev(int fd, struct lup_tls *tls, struct iovec *iov, int iovcnt)
{
        if (fd < 0)
                return -EBADF;
        return tls ? lup_tls_writev_full(tls, iov, iovcnt) : lup_writev_full(fd, iov, iovcnt);
}

#define LUPW_SEND_MAX_IOV 8

int lupw_send(struct lupw_session *s, struct iovec *iov, int iovcnt, bool stream)
{
        struct lupw_tx *t = &s->tx;
        /* The write advances the iovecs it is given (lup_iov_advance) as
         * partial writes come back: it gets a copy, so that what is counted
         * and logged below is the whole frame. Logging the advanced ones
         * logged only what the last partial write left, which a client
         * that read slowly found out with its next PING (and a resend would
         * have sent wrong bytes). */
        struct iovec wr[LUPW_SEND_MAX_IOV];
        if (iovcnt <= 0 || iovcnt > LUPW_SEND_MAX_IOV)
                return -EINVAL;
        memcpy(wr, iov, sizeof(wr[0]) * (size_t)iovcnt);
        pthread_mutex_lock(&t->lock);
        int rc = -EPIPE;
        if (s->fd >= 0 && !t->broken) {
                rc = conn_writev(s->fd, s->tls, wr, iovcnt);
                if (rc == 0) {
                        size_t n = 0;
                        for (int i = 0; i < iovcnt; i++)
                                n += iov[i].iov_len;
                        atomic_store_explicit(&t->last_tx_ns, lup_now_ns(), memory_order_relaxed);
                        atomic_fetch_add_explicit(&s->stats.bytes_out, n, memory_order_relaxed);
                } else
                        t->broken = true; /* a timed-out write may have left half a frame */
        }
        /* Logged after the write, so the client does not wait for the copy
         * (it overlaps with the client reading the answer), yet before this
         * returns and under the lock: only this thread reads the log (a
         * resend, a checkpoint), and the caller's buffers are still valid. */
        if (stream)
                for (int i = 0; i < iovcnt; i++)
                        log_append(t, iov[i].iov_base, iov[i].iov_len);
        bool kept = stream && t->resend && t->cap;
        pthread_mutex_unlock(&t->lock);
        if (rc < 0) {
                lupw_set_why(s, "client stopped reading");
                /* A logged frame is not lost: the caller goes on producing
                 * the call's whole answer, and lupw_process_input() notices
                 * the broken connection before the next call. */
                return kept ? 0 : -EPIPE;
        }
        return 0;
}

/* The connection broke while answers were written to the log. */
int lupw_tx_failed(struct lupw_session *s)
{
        pthread_mutex_lock(&s->tx.lock);
        bool broken = s->tx.broken;
        pthread_mutex_unlock(&s->tx.lock);
        if (!broken)
                return 0;
        lupw_set_why(s, "client stopped reading");
        return -EPIPE;
}

int lupw_send_ctl(struct lupw_session *s, int fd, struct lup_tls *tls, const struct lup_hdr *h, const void *payload,
                  size_t len)
{
        uint8_t hb[LUP_HDR_SIZE];
        lup_hdr_encode(hb, h);
        struct iovec iov[2] = { { hb, sizeof(hb) }, { (void *)payload, len } };
        pthread_mutex_lock(&s->tx.lock);
        int rc = conn_writev(fd, tls, iov, len ? 2 : 1);
        if (h->op == LUP_OP_GOODBYE && fd == s->fd)
                s->tx.goodbye = true;
        pthread_mutex_unlock(&s->tx.lock);
        return rc;
}

int lupw_tx_set_fd(struct lupw_session *s, int fd, struct lup_tls *tls, struct lup_tls **ret_old_tls)
{
        struct lupw_tx *t = &s->tx;
        if (fd >= 0) {
                /* blocking writes, each stalled one bounded: a client that
                 * stops acknowledging is detached after client_timeout_ms.
                 * A TLS socket stays non-blocking, bounded by
                 * lup_tls_set_write_timeout (worker/tls_conn.c). */
                if (!tls)
                        (void)lup_set_blocking(fd);
                if (t->client_timeout_ms) {
                        struct timeval tv = { .tv_sec = t->client_timeout_ms / 1000,
                                              .tv_usec = (t->client_timeout_ms % 1000) * 1000 };
                        if (!tls)
                                (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
                        unsigned ut = t->client_timeout_ms;
                        (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, sizeof(ut)); /* not TCP: ignored */
                }
        }
        pthread_mutex_lock(&t->lock);
        int old = s->fd;
        s->fd = fd;
        if (ret_old_tls)
                *ret_old_tls = s->tls;
        s->tls = tls;
        t->broken = false;
        t->goodbye = false;
        atomic_store_explicit(&t->last_tx_ns, lup_now_ns(), memory_order_relaxed);
        pthread_mutex_unlock(&t->lock);
        return old;
}

void lupw_tx_busy(struct lupw_session *s, bool busy)
{
        atomic_store_explicit(&s->tx.busy_since_ns, busy ? lup_now_ns() : 0, memory_order_relaxed);
}

int lupw_tx_ack(struct lupw_session *s, uint64_t rx)
{
        struct lupw_tx *t = &s->tx;
        pthread_mutex_lock(&t->lock);
        int rc = 0;
        if (rx > t->end && !t->log_unknown) {
                rc = -EBADMSG;
        } else if (rx > t->start) {
                t->start = rx;
                if (t->start == t->end && t->buf && t->cap > (8u << 20))
                        (void)madvise(t->buf, t->cap, MADV_FREE); /* idle sessions give the pages back */
        }
        uint64_t end = t->end, start = t->start;
        pthread_mutex_unlock(&t->lock);
        if (rc < 0) {
                lup_warn("session %s: PING acknowledges %llu bytes of answers; %llu were sent (log from %llu)", s->name,
                         (unsigned long long)rx, (unsigned long long)end, (unsigned long long)start);
                lupw_set_why(s, "PING acknowledges answers that were never sent");
        }
        return rc;
}

void lupw_tx_hello(struct lupw_session *s, const struct lup_hello *h, uint64_t *ret_from, uint64_t *ret_end)
{
        struct lupw_tx *t = &s->tx;
        pthread_mutex_lock(&t->lock);
        t->hb_ms = (h->flags & LUP_HELLO_HEARTBEAT) ? h->heartbeat_ms : 0;
        t->resend = (h->flags & LUP_HELLO_RESEND) != 0;
        uint64_t rx = t->resend ? h->rx_bytes : t->end;
        if (t->log_unknown) {
                /* restored from a checkpoint without a log: trust the count */
                t->start = t->end = rx;
                t->log_unknown = false;
        }
        if (rx >= t->start && rx <= t->end) {
                *ret_from = rx;
        } else {
                if (rx < t->start)
                        lup_warn("session %s: %llu bytes of answers the client did not receive are no longer held (the reply log keeps %zu MiB); those calls fail in the client",
                                 s->name, (unsigned long long)(t->start - rx), t->cap >> 20);
                *ret_from = t->end;
        }
        *ret_end = t->end;
        pthread_mutex_unlock(&t->lock);
}

int lupw_tx_resend(struct lupw_session *s, uint64_t from)
{
        struct lupw_tx *t = &s->tx;
        pthread_mutex_lock(&t->lock);
        int rc = 0;
        if (from < t->end && t->buf && from >= t->start) {
                size_t n = (size_t)(t->end - from), at = (size_t)(from % t->cap);
                size_t first = t->cap - at < n ? t->cap - at : n;
                struct iovec iov[2] = { { t->buf + at, first }, { t->buf, n - first } };
                lup_info("session %s: sending %zu bytes of answers again that the client did not receive", s->name, n);
                rc = conn_writev(s->fd, s->tls, iov, n > first ? 2 : 1);
                if (rc < 0)
                        t->broken = true;
        }
        pthread_mutex_unlock(&t->lock);
        if (rc < 0)
                lupw_set_why(s, "client stopped reading");
        return rc < 0 ? -EPIPE : 0;
}

/* The heartbeat thread: while the main thread works on one thing (a long
 * synchronisation, a drain's) and nothing was written for half the
 * client's interval, an ALIVE frame tells the client that the server is
 * busy, not gone. It never waits for the socket: with the send buffer full
 * the client has plenty to read anyway. */
static void *heartbeat_main(void *arg)
{
        struct lupw_session *s = arg;
        struct lupw_tx *t = &s->tx;
        pthread_mutex_lock(&t->lock);
        while (!t->stop) {
                uint64_t period = t->hb_ms ? (uint64_t)t->hb_ms * 500000ull : 1000000000ull;
                uint64_t wake = lup_now_ns() + period / 2;
                struct timespec ts = { .tv_sec = (time_t)(wake / 1000000000ull),
                                       .tv_nsec = (long)(wake % 1000000000ull) };
                pthread_cond_timedwait(&t->cond, &t->lock, &ts);
                if (t->stop || !t->hb_ms || s->fd < 0 || t->broken || t->goodbye)
                        continue;
                uint64_t now = lup_now_ns(), busy = atomic_load_explicit(&t->busy_since_ns, memory_order_relaxed);
                uint64_t last = atomic_load_explicit(&t->last_tx_ns, memory_order_relaxed);
                if (!busy || now - busy < period || now - last < period)
                        continue;
                uint64_t seq = atomic_load_explicit(&t->running_seq, memory_order_relaxed);
                struct lup_hdr h = { .op = LUP_OP_ALIVE, .seq = seq, .ctx = seq ? seq - 1 : 0 };
                uint8_t hb[LUP_HDR_SIZE];
                lup_hdr_encode(hb, &h);
                ssize_t k;
                if (s->tls) { /* one record; waits only as long as the write timeout */
                        k = lup_tls_write_full(s->tls, hb, sizeof(hb)) == 0 ? (ssize_t)sizeof(hb) : -1;
                        if (k < 0)
                                t->broken = true;
                } else {
                        k = send(s->fd, hb, sizeof(hb), MSG_NOSIGNAL | MSG_DONTWAIT);
                }
                if (k > 0 && (size_t)k < sizeof(hb) && lup_write_full(s->fd, hb + k, sizeof(hb) - (size_t)k) < 0)
                        t->broken = true; /* half a frame: the main thread detaches on its next write */
                if (k > 0)
                        atomic_store_explicit(&t->last_tx_ns, now, memory_order_relaxed);
        }
        pthread_mutex_unlock(&t->lock);
        return NULL;
}

int lupw_tx_start(struct lupw_session *s)
{
        struct lupw_tx *t = &s->tx;
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old); /* signals stay with the main thread */
        int rc = pthread_create(&t->thread, NULL, heartbeat_main, s);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (rc != 0) {
                lup_warn("session %s: no heartbeat thread (%s); long calls may look like a dead server to the client",
                         s->name, strerror(rc));
                return -rc;
        }
        t->thread_on = true;
        return 0;
}

void lupw_tx_free(struct lupw_session *s)
{
        struct lupw_tx *t = &s->tx;
        if (t->thread_on) {
                pthread_mutex_lock(&t->lock);
                t->stop = true;
                pthread_cond_signal(&t->cond);
                pthread_mutex_unlock(&t->lock);
                pthread_join(t->thread, NULL);
                t->thread_on = false;
        }
        if (t->buf)
                munmap(t->buf, t->cap);
        t->buf = NULL;
}

/* ---- the reply log in a checkpoint (the object's bytes are checkpoint/ckpt_codec.c's) */

_Static_assert((uint64_t)LUPW_MAX_REPLY_CACHE_MB << 20 == LUP_CKPT_MAX_REPLY_BYTES,
               "a restore must read the largest reply log a save writes");

int lupw_tx_save(struct lupw_session *s, struct lupine_ckpt_save *save)
{
        struct lupw_tx *t = &s->tx;
        size_t n = t->buf ? (size_t)(t->end - t->start) : 0;
        size_t at = 0, first = 0;
        uint8_t *obj = NULL;
        size_t len = 0;
        if (n) {
                at = (size_t)((t->end - n) % t->cap);
                first = t->cap - at < n ? t->cap - at : n;
        }
        /* the newest n bytes of the ring, oldest first: [at, at + first), then from the start */
        int rc = lup_ckpt_replies_encode(t->end - n, t->end, n ? t->buf + at : NULL, first, n ? t->buf : NULL,
                                         n - first, &obj, &len);
        if (rc == 0)
                rc = s->ckpt.ops->save_write(save, "replies", obj, len);
        free(obj);
        return rc;
}

int lupw_tx_load(struct lupw_session *s, struct lupine_ckpt_load *ld, char *why, size_t whylen)
{
        struct lupw_tx *t = &s->tx;
        const struct lup_sealed *kind = &lup_ckpt_replies_kind;
        uint8_t *obj;
        uint64_t size;
        int rd = lupine_provider_read_object(s->ckpt.ops, ld, "replies", kind->min_len, kind->max_len, &obj, &size);
        if (rd == -ENOENT) {
                t->log_unknown = true; /* an older checkpoint */
                return 0;
        }
        if (rd < 0) {
                snprintf(why, whylen,
                         rd == -EBADMSG ? "object replies has an impossible size" : "reading replies failed");
                return rd;
        }
        struct lup_ckpt_replies rp;
        const char *reason;
        int rc = lup_ckpt_replies_decode(obj, (size_t)size, &rp, &reason);
        if (rc < 0) {
                snprintf(why, whylen, "%s", reason);
        } else {
                /* resent only to a client that asks (HELLO), from where it stopped */
                t->resend = true;
                t->start = t->end = rp.start;
                log_append(t, rp.data, (size_t)(rp.end - rp.start)); /* keeps the newest cap bytes */
        }
        free(obj);
        return rc;
}

/* ---- replies */

int lupw_flush_out(struct lupw_session *s)
{
        if (s->out.len == 0)
                return 0;
        struct iovec iov = { s->out.buf, s->out.len };
        int rc = lupw_send(s, &iov, 1, true);
        s->out.len = 0;
        return rc;
}

/* Appends a reply frame; payload may be NULL when len is 0. The frame is
 * part of the reply stream even when the connection has failed (-EPIPE):
 * the call was executed, and the client gets its answer on resume. */
int lupw_reply(struct lupw_session *s, const struct lup_hdr *req, uint16_t flags, CUresult status,
               const void *payload, size_t len)
{
        /* device printf output flushed by this call goes first */
        int rc = lupw_output_forward(s);
        lupw_op_bytes_out(s, req->op, len);
        struct lup_hdr h = { .len = (uint32_t)len, .op = req->op, .flags = LUP_F_REPLY | flags,
                             .lane = req->lane, .status = (uint32_t)status, .seq = req->seq, .ctx = s->last_seq };
        if (LUP_HDR_SIZE + len > s->out.cap - s->out.len)
                rc = lupw_flush_out(s);
        if (LUP_HDR_SIZE + len > s->out.cap) {
                /* larger than the batch buffer: straight to the socket */
                uint8_t hb[LUP_HDR_SIZE];
                lup_hdr_encode(hb, &h);
                struct iovec iov[2] = { { hb, sizeof(hb) }, { (void *)payload, len } };
                int wrc = lupw_send(s, iov, 2, true);
                return rc < 0 ? rc : wrc;
        }
        lup_hdr_encode(s->out.buf + s->out.len, &h);
        if (len)
                memcpy(s->out.buf + s->out.len + LUP_HDR_SIZE, payload, len);
        s->out.len += LUP_HDR_SIZE + len;
        return rc;
}

void lupw_latch(struct lupw_session *s, CUresult r, const char *what)
{
        if (r == CUDA_SUCCESS)
                return;
        if (s->latched == CUDA_SUCCESS)
                s->latched = r;
        if (lup_log_max_level() >= LUP_LOG_DEBUG)
                lup_debug("session %s: async %s failed with %d (latched)", s->name, what, (int)r);
}

CUresult lupw_take_latched(struct lupw_session *s)
{
        CUresult r = s->latched;
        s->latched = CUDA_SUCCESS;
        return r;
}

/* ---- device printf (see the top of the file) */

#define OUTPUT_CHUNK (64u * 1024u)

static bool enabled;
static off_t read_off;

void lupw_output_init(void)
{
        int fd = memfd_create("lupine-gpu-printf", MFD_CLOEXEC);

        if (fd < 0) {
                lup_warn("device printf output stays on the server: memfd_create: %m");
                return;
        }
        fflush(stdout);
        if (dup2(fd, STDOUT_FILENO) < 0) {
                lup_warn("device printf output stays on the server: dup2: %m");
                close(fd);
                return;
        }
        close(fd);
        /* the driver may print through stdio: nothing may sit in a buffer */
        setvbuf(stdout, NULL, _IONBF, 0);
        enabled = true;
}

int lupw_output_forward(struct lupw_session *s)
{
        static uint8_t buf[OUTPUT_CHUNK];
        int rc = 0;

        if (!enabled)
                return 0;
        off_t end = lseek(STDOUT_FILENO, 0, SEEK_CUR);
        if (end <= read_off)
                return 0;
        while (read_off < end && rc == 0) {
                size_t want = (size_t)(end - read_off) < sizeof(buf) ? (size_t)(end - read_off) : sizeof(buf);
                ssize_t n = pread(STDOUT_FILENO, buf, want, read_off);
                if (n <= 0)
                        break;
                read_off += n;
                struct lup_hdr h = { .len = (uint32_t)n, .op = LUP_OP_OUTPUT, .ctx = s->last_seq };
                if (LUP_HDR_SIZE + (size_t)n > s->out.cap - s->out.len)
                        rc = lupw_flush_out(s);
                lup_hdr_encode(s->out.buf + s->out.len, &h);
                memcpy(s->out.buf + s->out.len + LUP_HDR_SIZE, buf, (size_t)n);
                s->out.len += LUP_HDR_SIZE + (size_t)n;
        }
        /* all sent: start the file over so it never grows */
        if (read_off >= end && ftruncate(STDOUT_FILENO, 0) == 0 && lseek(STDOUT_FILENO, 0, SEEK_SET) == 0)
                read_off = 0;
        return rc;
}
