/* SPDX-License-Identifier: MIT */
/*
 * Getting the session back after the connection is lost: backoff with full
 * jitter, a resuming HELLO with the session's token, and the resend of every
 * frame the server did not execute (see client.c's header comment).
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "conn.h"
#include "log.h"

/* ---- reconnecting */

enum { RESUMED = 0, SESSION_LOST = 1 };

struct resume_attempt {
        struct lupc_conn *c; /* the connection being resumed */
        uint64_t deadline_ns;
        uint64_t executed;              /* N, once resumed */
        size_t resent;
        bool moved_to; /* trying the endpoint a GOODBYE named: "gone" there is not final */
        char last_error[400];
};

uint64_t rng_state; /* touched only by the thread running lupc_reconnect() */

static uint64_t random_below(uint64_t n)
{
        if (!rng_state) {
                if (getrandom(&rng_state, sizeof(rng_state), GRND_NONBLOCK) != (ssize_t)sizeof(rng_state))
                        rng_state = lup_now_ns() ^ ((uint64_t)getpid() << 32);
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
 * resent calls, and would stop reading if nobody read its answers). A
 * write that could not move is retried with the same bytes (transport.h). */
static int resend_one(uint64_t seq, const uint8_t *p, size_t n, void *userdata)
{
        struct resume_attempt *ra = userdata;
        struct lupc_conn *c = ra->c;
        while (n || lupt_unsent(&c->link)) {
                struct iovec iov = { (void *)p, n };
                ssize_t k = lupt_send(&c->link, &iov, 1, true);
                if (k > 0) {
                        p += k;
                        n -= (size_t)k;
                        continue;
                }
                if (k != -EAGAIN) {
                        snprintf(ra->last_error, sizeof(ra->last_error), "resending call seq %llu: %s",
                                 (unsigned long long)seq, k == -EPROTO ? lupt_why(&c->link) : strerror((int)-k));
                        return (int)k;
                }
                struct pollfd pfd = { .fd = c->link.fd, .events = POLLIN | POLLOUT };
                int pr = 1;
                if (lupt_readable(&c->link)) /* TLS may hold bytes the socket no longer shows */
                        pfd.revents = POLLIN;
                else
                        pr = poll(&pfd, 1, LUPC_RESEND_STALL_MS);
                if (pr < 0 && errno == EINTR)
                        continue;
                if (pr <= 0) {
                        snprintf(ra->last_error, sizeof(ra->last_error), "resending call seq %llu: %s",
                                 (unsigned long long)seq, pr == 0 ? "the server stopped reading" : strerror(errno));
                        return pr == 0 ? -ETIMEDOUT : -errno;
                }
                if (pfd.revents & POLLIN) {
                        const char *why = NULL;
                        int rc = lupc_read_frame_if_any(c, &why);
                        if (rc < 0 && rc != -EAGAIN) {
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
static void drain_lost_connection(struct lupc_conn *c)
{
        const char *why;
        int n = 0;
        while (c->link.fd >= 0 && lupc_read_one_frame(c, &why) == 0)
                n++;
        if (n)
                lup_debug("read %d frames that were still queued on the lost connection", n);
}

/* The server resumed the session on link nl, having executed up to n.
 * Installs it, settles the calls whose answers died with the old connection, and
 * resends every frame after n, holding the send lock so that no new frame
 * can come between them. Returns 0 with the connection up, or -errno (the
 * connection stays down; the next attempt replaces fd). */
static int resume_on(struct lupc_conn *c, const struct lupt_link *nl, uint64_t n, bool resent, uint64_t tx_end,
                     struct resume_attempt *ra)
{
        pthread_mutex_lock(&c->send_lock);
        pthread_mutex_lock(&c->recv_lock);
        struct lupt_link old = c->link;
        int fd = nl->fd;
        c->link = *nl;
        c->gen++;
        if (n > atomic_load_explicit(&c->acked, memory_order_relaxed))
                atomic_store_explicit(&c->acked, n, memory_order_relaxed);
        atomic_store_explicit(&c->last_rx_ns, lup_now_ns(), memory_order_relaxed);
        /* With resent = true the server sends every answer this connection
         * lost (its reply log) before anything else: every waiter gets its
         * real answer, every landing its data. Otherwise those answers are
         * gone, and the reply stream goes on from tx_end. */
        if (!resent)
                atomic_store_explicit(&c->rx_bytes, tx_end, memory_order_relaxed);
        if (resent) {
                /* nothing to settle */
        } else if (c->ack_req_pending && c->ack_req.seq <= n) {
                lupc_unlink_waiter_locked(c, &c->ack_req); /* executed; what it asked for is known now */
                c->ack_req_pending = false;
        }
        for (struct lupc_waiter *w = resent ? NULL : c->waiters; w; w = w->next) {
                if (!w->done && w->seq <= n && w->op == LUP_OP_PING) {
                        /* a PING has no result: being executed was its answer */
                        w->status = CUDA_SUCCESS;
                        w->done = true;
                } else if (!w->done && w->seq <= n) {
                        lup_err("the answer to %s (call seq %llu) was lost with the connection; the call fails with CUDA_ERROR_DEVICE_UNAVAILABLE",
                                lupc_op_name(w->op), (unsigned long long)w->seq);
                        w->status = CUDA_ERROR_DEVICE_UNAVAILABLE;
                        w->done = true;
                }
        }
        for (struct lupc_landing *l = resent ? NULL : c->landings, *next; l; l = next) {
                next = l->next;
                if (l->seq && l->seq <= n) {
                        lup_err("the data of an asynchronous device-to-host copy (call seq %llu, %llu of %llu bytes arrived) was lost with the connection",
                                (unsigned long long)l->seq, (unsigned long long)l->received, (unsigned long long)l->size);
                        lupc_drop_landing_locked(c, l);
                }
        }
        pthread_cond_broadcast(&c->recv_cond);
        pthread_mutex_unlock(&c->recv_lock);
        if (old.fd >= 0 && old.fd != fd)
                lupt_close(&old, false);

        replay_ack(&c->replay, n);
        int rc = replay_for_each_after(&c->replay, n, resend_one, ra);
        if (rc >= 0) {
                c->resumes++;
                pthread_mutex_lock(&c->recv_lock);
                atomic_store_explicit(&c->state, CONN_UP, memory_order_release);
                pthread_cond_broadcast(&c->recv_cond);
                pthread_mutex_unlock(&c->recv_lock);
        }
        pthread_mutex_unlock(&c->send_lock);
        if (rc < 0) {
                /* answers to resent calls may have come before it failed */
                shutdown(fd, SHUT_RDWR);
                drain_lost_connection(c);
        }
        return rc < 0 ? rc : 0;
}

static void session_lost(struct lupc_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void session_lost(struct lupc_conn *c, const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        pthread_mutex_lock(&c->recv_lock);
        lupc_conn_die_locked(c, "lost the session %s: %s", c->name, msg);
        pthread_mutex_unlock(&c->recv_lock);
        /* nothing is ever resent now */
        pthread_mutex_lock(&c->send_lock);
        replay_free(&c->replay);
        pthread_mutex_unlock(&c->send_lock);
}

/* One endpoint, one try: connect, HELLO with the session's token, check that
 * this is our session as we left it, resume. RESUMED, SESSION_LOST (said so
 * in the log), or -errno to go on trying. */
static int try_resume(const struct lup_endpoint *ep, void *userdata)
{
        struct resume_attempt *ra = userdata;
        struct lupc_conn *c = ra->c;
        struct hello_reply rep = { 0 };
        struct lupt_link l;
        int fd = lupt_connect(&lupc_tcfg, ep, LUPC_HANDSHAKE_TIMEOUT_MS, &l, ra->last_error, sizeof(ra->last_error));
        if (fd < 0)
                return fd;
        lupt_set_timeout(&l, LUPC_HANDSHAKE_TIMEOUT_MS);
        int rc = lupc_hello_exchange(c, &l, ep, atomic_load_explicit(&c->acked, memory_order_relaxed), &rep);
        if (rc < 0 && rep.why[0]) {
                snprintf(ra->last_error, sizeof(ra->last_error), "%s", rep.why);
        } else if (rc < 0) {
                snprintf(ra->last_error, sizeof(ra->last_error), "%s: %s", ep->text,
                         rc == -EAGAIN ? "no answer to HELLO" :
                         rc == -EPROTO ? "malformed HELLO reply" : "connection closed during the handshake");
        }
        if (rc < 0) {
                lupt_close(&l, false);
                return rc;
        }
        if (rep.status != 0) {
                snprintf(ra->last_error, sizeof(ra->last_error), "%s refused: %.200s", ep->text, rep.msg);
                lupt_close(&l, true);
                /* Gone, or restored from a checkpoint older than what this
                 * client saw executed (the frames in between were dropped
                 * from the replay buffer once acknowledged): no later try
                 * can make it whole, so the calls fail now, not after
                 * LUPINE_RECONNECT_TIMEOUT (docs/sessions.md). */
                if (rep.status == CUDA_ERROR_DEVICE_UNAVAILABLE && !ra->moved_to &&
                    (strstr(rep.msg, "no longer exists") || strstr(rep.msg, "stale checkpoint"))) {
                        session_lost(c, "lupined at %s says: %s", ep->text, rep.msg);
                        return SESSION_LOST;
                }
                return -ECONNREFUSED;
        }
        free(rep.devs); /* the device snapshot stays the one taken at init */

        uint64_t n = rep.last_executed, acked = atomic_load_explicit(&c->acked, memory_order_relaxed);
        uint64_t sent = atomic_load_explicit(&c->next_seq, memory_order_relaxed) - 1;
        uint64_t rx = atomic_load_explicit(&c->rx_bytes, memory_order_relaxed);
        char bad[256] = "";
        if (memcmp(rep.token, c->token, sizeof(c->token)) != 0)
                snprintf(bad, sizeof(bad), "session %s no longer exists there (the server started a new one)", c->name);
        else if (rep.arena_base != c->arena_base || rep.arena_size != c->arena_size)
                snprintf(
                        bad, sizeof(bad),
                        "the server restored the session at another address (0x%llx instead of 0x%llx); refusing to continue with moved pointers",
                        (unsigned long long)rep.arena_base, (unsigned long long)c->arena_base);
        else if (n < acked || n > sent)
                snprintf(bad, sizeof(bad), "the server says it executed up to seq %llu, but it had confirmed %llu and %llu were sent",
                         (unsigned long long)n, (unsigned long long)acked, (unsigned long long)sent);
        else if (c->replay_on && (rep.tx_end < rx || (rep.resend_from != rx && rep.resend_from != rep.tx_end)))
                snprintf(bad, sizeof(bad), "the server's answers (%llu bytes sent, resending from %llu) do not match the %llu this client received",
                         (unsigned long long)rep.tx_end, (unsigned long long)rep.resend_from, (unsigned long long)rx);
        if (bad[0]) {
                /* that server-side session is of no use: end it at once */
                lupt_send_goodbye(&l, n + 1);
                lupt_close(&l, true);
                session_lost(c, "lupined at %s: %s", ep->text, bad);
                return SESSION_LOST;
        }
        lupt_set_timeout(&l, (int)c->hb_ms); /* 0: no bound */
        ra->resent = 0;
        bool resent = c->replay_on && rep.resend_from == rx;
        if (c->replay_on && !resent)
                lup_warn("lupined no longer holds %llu bytes of answers this client did not receive; the calls they answered fail",
                         (unsigned long long)(rep.tx_end - rx));
        rc = resume_on(c, &l, n, resent, rep.tx_end, ra);
        if (rc >= 0)
                lupc_conn_set_endpoint(c, ep->text);
        if (rc == -EBADMSG) {
                session_lost(c, "lupined at %s broke the protocol while resuming (%s)", ep->text, ra->last_error);
                return SESSION_LOST;
        }
        if (rc < 0)
                return rc;
        ra->executed = n;
        return RESUMED;
}

void lupc_goodbye_read(struct lupc_conn *c, const struct lup_hdr *h)
{
        /* a migrating session's GOODBYE names where it went */
        uint8_t to[2 + LUP_GOODBYE_TO_MAX];
        uint16_t n = 0;
        if (h->len >= 2 && h->len <= sizeof(to) && lupt_read_full(&c->link, to, h->len) == 0)
                n = lup_le16(to);
        if (n && 2u + n == h->len && !memchr(to + 2, 0, n) && !memchr(to + 2, ',', n)) {
                pthread_mutex_lock(&c->recv_lock);
                memcpy(c->moved_to, to + 2, n);
                c->moved_to[n] = 0;
                pthread_mutex_unlock(&c->recv_lock);
                snprintf(c->goodbye_why, sizeof(c->goodbye_why), "the session moves to %.120s", c->moved_to);
        } else {
                snprintf(c->goodbye_why, sizeof(c->goodbye_why), "server is going away, executed up to %llu",
                         (unsigned long long)h->ctx);
        }
}

/* The endpoint the server's last GOODBYE named (lupinectl migrate), before
 * the LUPINE_SERVER list. Only with the transport the list uses: a client
 * of tls:// servers never sends its session token in the clear. A refusal
 * there is never final (the target may not share the store): the list
 * comes next, and the source can take the session back. */
static int try_moved_to(struct lupc_conn *c, struct resume_attempt *ra)
{
        char to[LUP_GOODBYE_TO_MAX + 1];
        struct lup_endpoint ep;
        static bool warned;

        pthread_mutex_lock(&c->recv_lock);
        snprintf(to, sizeof(to), "%s", c->moved_to);
        pthread_mutex_unlock(&c->recv_lock);
        if (!to[0] || lup_endpoint_parse(to, &ep) < 0)
                return -ENOENT;
        if (lupc_tcfg.first && !ep.tls) {
                if (!warned)
                        lup_warn("the server moved session %s to %s, which is not tls://; not following it", c->name,
                                 to);
                warned = true;
                return -ENOENT;
        }
        ra->moved_to = true;
        int rc = try_resume(&ep, ra);
        ra->moved_to = false;
        return rc;
}

/* The reconnect loop, run by exactly one thread (it holds the reader role,
 * no lock): attempt i waits uniform(0, min(10 s, 100 ms x 2^i)) (full
 * jitter), then tries every endpoint in order, until the session is resumed,
 * refused for good, or LUPINE_RECONNECT_TIMEOUT has passed since the
 * connection was lost. */
void lupc_reconnect(struct lupc_conn *c)
{
        struct resume_attempt ra = { .c = c };
        char tried[1100];

        pthread_mutex_lock(&c->recv_lock);
        uint64_t t0 = c->lost_at_ns;
        snprintf(ra.last_error, sizeof(ra.last_error), "%s", c->lost_why);
        pthread_mutex_unlock(&c->recv_lock);
        if (lupc_conn_state(c) != CONN_RECONNECTING)
                return;
        drain_lost_connection(c);
        ra.deadline_ns = t0 + (uint64_t)c->reconnect_s * 1000000000ull;
        for (unsigned attempt = 0;; attempt++) {
                uint64_t cap_ms = attempt >= 7 ? LUPC_BACKOFF_CAP_MS : (uint64_t)LUPC_BACKOFF_FIRST_MS << attempt;
                if (cap_ms > LUPC_BACKOFF_CAP_MS)
                        cap_ms = LUPC_BACKOFF_CAP_MS;
                uint64_t wait = random_below(cap_ms * 1000000ull + 1), now = lup_now_ns();
                if (now >= ra.deadline_ns)
                        break;
                sleep_ns(wait < ra.deadline_ns - now ? wait : ra.deadline_ns - now);
                if (lup_now_ns() >= ra.deadline_ns)
                        break;
                int rc = try_moved_to(c, &ra);
                if (rc != RESUMED && rc != SESSION_LOST)
                        rc = lupc_for_each_endpoint(c, try_resume, &ra, tried, sizeof(tried));
                if (rc == SESSION_LOST)
                        return;
                if (rc == RESUMED) {
                        lup_info("resumed session %s at seq %llu after %.1f s, resent %zu calls", c->name,
                                 (unsigned long long)ra.executed, (double)(lup_now_ns() - t0) / 1e9, ra.resent);
                        return;
                }
                lup_debug("reconnect attempt %u failed: %s", attempt + 1, ra.last_error);
        }
        session_lost(c, "could not reconnect to lupined within %u s (last error: %s)", c->reconnect_s, ra.last_error);
}

/* An orderly goodbye when the process exits, so the worker ends the session
 * at once instead of treating the closed socket as a network failure. Never
 * blocks: if another thread holds the send lock, or the connection is being
 * re-established, the socket simply closes. Sent once: from the destructor
 * on a plain connection, from an atexit handler under TLS (hello.c). */
void lupc_say_goodbye(void)
{
        static atomic_bool said[LUPC_MAX_SERVERS];
        for (unsigned i = 0; i < LUPC_MAX_SERVERS; i++) {
                struct lupc_conn *c = &lupc_conns[i];
                if (lupc_conn_state(c) != CONN_UP || pthread_mutex_trylock(&c->send_lock) != 0)
                        continue;
                if (c->link.fd >= 0 && lupc_conn_state(c) == CONN_UP && !atomic_exchange(&said[i], true))
                        lupt_send_goodbye(&c->link, atomic_fetch_add_explicit(&c->next_seq, 1, memory_order_relaxed));
                pthread_mutex_unlock(&c->send_lock);
        }
}

__attribute__((destructor)) static void say_goodbye(void)
{
        /* OpenSSL may be cleaned up by now: TLS said goodbye at exit */
        if (!lupc_conns[0].link.tls)
                lupc_say_goodbye();
}
