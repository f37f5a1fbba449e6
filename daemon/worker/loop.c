/* SPDX-License-Identifier: MIT */
/*
 * The worker's life once started (worker/main.c): serve its connection, survive losing it (detached, waiting
 * for the client to come back with the session's token), take over a new
 * connection (ATTACH), drain and checkpoint on request, checkpoint and go
 * on (CHECKPOINT, worker/ckpt_now.c), expire when nobody claims it.
 *
 * io_uring user_data: bits 0-7 the event kind (UD_*), bits 8-63 the
 * connection generation it belongs to; a completion from an older
 * generation (a connection since replaced) is ignored.
 */
#define LUP_LOG_CAT LUP_LOGC_NET
#include "worker/worker.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ckpt_codec.h"
#include "clock.h"
#include "ctl.h"
#include "frame.h"
#include "auth_tokens.h"
#include "log.h"
#include "net.h"
#include "worker/graphs.h"
#include "worker/precopy.h"
#include "worker/privs.h"
#include "worker/session.h"

enum {
        UD_RECV = 1,
        UD_CTL = 2,
        UD_TTL = 3,
        UD_STATS = 4,
        UD_CKPT = 5,
        UD_LEASE = 6
};

static uint64_t ud_make(int kind, uint64_t gen)
{
        return (uint64_t)kind | (gen << 8);
}

/* One non-blocking read of a TLS connection into the receive buffer (one
 * record, 16 KiB at most): bytes, 0 at the end of the stream, -EAGAIN, or
 * -errno. Taking many records before looking at the frames measured slower
 * on the H200 (0.30x of plaintext against 0.50x), so frames go on as each
 * record arrives, as they do with a plain recv. */
static ssize_t tls_recv(struct lupw_session *s)
{
        return lup_tls_recv_nb(s->tls, s->rx.buf + s->rx.len, s->rx.cap - s->rx.len);
}

/* Non-blocking reads for up to s->rx.spin_ns. Returns bytes read, 0 on EOF,
 * -EAGAIN when nothing came (or an error, which the ring then reports). */
static ssize_t spin_recv(struct lupw_session *s)
{
        uint64_t deadline = lup_now_ns() + s->rx.spin_ns;
        do {
                if (s->tls) {
                        ssize_t k = tls_recv(s);
                        if (k != -EAGAIN)
                                return k < 0 ? -EAGAIN : k;
                        continue;
                }
                ssize_t k = recv(s->fd, s->rx.buf + s->rx.len, s->rx.cap - s->rx.len, MSG_DONTWAIT);
                if (k >= 0)
                        return k;
                if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                        return -EAGAIN; /* let the ring report the error */
        } while (lup_now_ns() < deadline);
        return -EAGAIN;
}

/* GOODBYE, naming the host the session moves to when it migrates. */
static void send_goodbye(struct lupw_session *s)
{
        uint8_t to[2 + LUP_GOODBYE_TO_MAX];
        size_t n = strnlen(s->ckpt.migrate_to, LUP_GOODBYE_TO_MAX);
        struct lup_hdr bye = { .op = LUP_OP_GOODBYE, .ctx = s->last_seq, .len = n ? (uint32_t)(2 + n) : 0 };
        if (s->fd < 0)
                return;
        lup_put16(to, (uint16_t)n);
        memcpy(to + 2, s->ckpt.migrate_to, n);
        lupw_flush_out(s);
        (void)lupw_send_ctl(s, s->fd, s->tls, &bye, n ? to : NULL, n ? 2 + n : 0);
}

/* Forgets the current connection: whatever it had not finished sending was
 * never executed and will come again; data not yet delivered is dropped
 * (the client drops the copies it was waiting for). */
static void drop_connection(struct lupw_session *s)
{
        lupw_htod_wait(s);
        lupw_flush_out(s);           /* answers go to the reply log, for a resend */
        lupw_flush_pending(s, true); /* likewise */
        struct lup_tls *old_tls = NULL;
        int old = lupw_tx_set_fd(s, -1, NULL, &old_tls);
        lup_tls_free(old_tls, false);
        if (old >= 0) {
                shutdown(old, SHUT_RDWR); /* completes any read still queued on it */
                close(old);
        }
        if (s->loop.recv_armed) {
                /* That recv may still copy bytes into rx.buf at its offset
                 * (the kernel does the copy when it completes), so nothing
                 * is received into the buffer until its completion is seen;
                 * the cancel makes sure there is one. */
                struct io_uring_sqe *sqe = io_uring_get_sqe(&s->loop.ring);
                if (sqe) {
                        io_uring_prep_cancel64(sqe, ud_make(UD_RECV, s->loop.conn_gen), 0);
                        io_uring_sqe_set_data64(sqe, 0);
                }
                s->loop.stale_recv = true;
        }
        s->loop.conn_gen++;
        s->loop.recv_armed = false;
        s->rx.off = s->rx.len = 0;
        s->out.len = 0;
}

/* Whether the detach grace (--detach-grace) applies rather than the TTL:
 * the session was never checkpointed (neither restored nor drained), so
 * nothing but its client's word says it is worth keeping. A HELLO-then-
 * close client would otherwise hold an arena slot and a worker for the
 * whole TTL (issue 15, finding 1; docs/security.md). */
static bool detach_grace_applies(const struct lupw_session *s)
{
        return s->cfg->detach_grace_s > 0 && s->cfg->detach_grace_s < s->cfg->session_ttl_s && !s->cfg->restore[0] &&
               !s->ckpt.drained && s->ckpt.epoch == 0;
}

static int detach_ttl_s(const struct lupw_session *s)
{
        return detach_grace_applies(s) ? s->cfg->detach_grace_s : s->cfg->session_ttl_s;
}

static void detach(struct lupw_session *s, const char *why)
{
        drop_connection(s);
        if (s->cfg->session_ttl_s <= 0) {
                lup_info("session %s: client %s; ending the session", s->name, why);
                s->loop.stop = true;
                return;
        }
        lup_info("session %s: client %s after seq %llu; keeping the session %d s for it to come back%s", s->name, why,
                 (unsigned long long)s->last_seq, detach_ttl_s(s),
                 detach_grace_applies(s) ? " (--detach-grace: never checkpointed)" : "");
        s->loop.ttl_armed = false;
        lupw_ctl_send(s, LUPD_CTL_DETACHED, 0, 0, false);
}

static bool token_equal(const uint8_t *a, const uint8_t *b)
{
        uint8_t d = 0;
        for (unsigned i = 0; i < LUP_TOKEN_SIZE; i++)
                d |= a[i] ^ b[i]; /* constant time */
        return d == 0;
}

/* Refuses a resuming connection (not the session's own) and closes it. */
static void attach_refuse(struct lupw_session *s, int fd, struct lup_tls *tls, const struct lup_hdr *req,
                          const char *msg, int status)
{
        lupw_refuse_on(s, fd, tls, req, CUDA_ERROR_DEVICE_UNAVAILABLE, msg);
        lup_tls_free(tls, true);
        close(fd);
        lupw_ctl_send(s, LUPD_CTL_ATTACHED, status, 0, false);
}

static void attach(struct lupw_session *s, const uint8_t *msg, size_t n, int fd)
{
        struct lup_hdr req;
        struct lup_hello hello;
        struct lup_tls *tls = NULL;
        uint8_t ticket[LUP_TICKET_SIZE];
        bool via_tls = false;
        uint32_t slot;
        const char *why;

        if (fd < 0 || lupw_parse_assign(msg, n, LUPD_CTL_ATTACH, &slot, &req, &hello, &via_tls, ticket, &why) < 0) {
                lup_err("session %s: bad ATTACH from the supervisor: %s", s->name, why);
                if (fd >= 0)
                        close(fd);
                lupw_ctl_send(s, LUPD_CTL_ATTACHED, -EBADMSG, 0, false);
                return;
        }
        if (via_tls) {
                tls = lupw_tls_accept(s, fd, &req, ticket);
                if (!tls) {
                        close(fd);
                        lupw_ctl_send(s, LUPD_CTL_ATTACHED, -EPROTO, 0, false);
                        return;
                }
        } else {
                (void)lup_set_blocking(fd);
        }
        if (strcmp(hello.name, s->name) != 0 || !token_equal(hello.token, s->token)) {
                /* answer that client alone; the session stays as it was */
                attach_refuse(s, fd, tls, &req, "wrong resume token for this session", -EPERM);
                return;
        }
        if (hello.last_seq_seen > s->last_seq) {
                /* The client saw calls executed that this session never
                 * did: after a hard crash an older checkpoint was restored.
                 * Going on would run its later calls on the wrong state
                 * (issue 15, finding 7). The session stays as it was. */
                char stale[512];
                snprintf(stale, sizeof(stale),
                         "stale checkpoint: session %s was restored at seq %llu, but this client has seen calls up "
                         "to seq %llu executed (an older checkpoint was restored after a crash); the resume is "
                         "refused",
                         s->name, (unsigned long long)s->last_seq, (unsigned long long)hello.last_seq_seen);
                attach_refuse(s, fd, tls, &req, stale, -ESTALE);
                return;
        }
        bool was_connected = s->fd >= 0;
        drop_connection(s);
        lupw_tx_set_fd(s, fd, tls, NULL);
        s->loop.detached_since = 0;
        lup_info("session %s: client %s at seq %llu (it had seen up to %llu)%s", s->name,
                 was_connected ? "took over the session" : "resumed", (unsigned long long)s->last_seq,
                 (unsigned long long)hello.last_seq_seen, tls ? " over TLS" : "");
        if (lupw_send_hello_reply(s, &req, &hello) < 0) {
                detach(s, "vanished during the resume");
                lupw_ctl_send(s, LUPD_CTL_ATTACHED, -EPIPE, 0, false);
                return;
        }
        lupw_ctl_send(s, LUPD_CTL_ATTACHED, 0, 0, false);
}

/* An upgrade hands the connection on: a recv the ring still holds on it
 * would take bytes nobody then executes. Cancel it and keep whatever it
 * got (unexecuted: it goes on with the connection). Returns false if the
 * client is gone meanwhile. */
static bool recv_quiesce(struct lupw_session *s)
{
        struct io_uring_sqe *sqe;
        struct io_uring_cqe *cqe;
        bool alive = true;

        if (!s->loop.recv_armed)
                return true;
        sqe = io_uring_get_sqe(&s->loop.ring);
        if (!sqe) {
                io_uring_submit(&s->loop.ring);
                sqe = io_uring_get_sqe(&s->loop.ring);
        }
        if (sqe) {
                io_uring_prep_cancel64(sqe, ud_make(UD_RECV, s->loop.conn_gen), 0);
                io_uring_sqe_set_data64(sqe, 0);
        }
        io_uring_submit(&s->loop.ring);
        while (s->loop.recv_armed && io_uring_wait_cqe(&s->loop.ring, &cqe) == 0) {
                uint64_t ud = io_uring_cqe_get_data64(cqe);
                int res = cqe->res;
                if ((int)(ud & 0xff) == UD_RECV && ud >> 8 == s->loop.conn_gen) {
                        s->loop.recv_armed = false;
                        if (res > 0)
                                s->rx.len += (size_t)res;
                        else if (res != -ECANCELED)
                                alive = false;
                } else if ((int)(ud & 0xff) == UD_CTL) {
                        s->loop.ctl_armed = false;
                }
                io_uring_cqe_seen(&s->loop.ring, cqe);
        }
        return alive;
}


/* DRAINED, with what the checkpoint wrote while the session ran
 * (pre-copy) and while it was paused (ctl.h). */
static void send_drained(struct lupw_session *s, int32_t status)
{
        uint8_t b[LUPD_CTL_DRAINED_LEN];
        lup_put32(b, LUPD_CTL_DRAINED);
        lup_put32(b + 4, (uint32_t)status);
        lup_put64(b + 8, status == 0 ? s->ckpt.last.precopied : 0);
        lup_put64(b + 16, status == 0 ? s->ckpt.last.paused_written : 0);
        lup_put64(b + 24, status == 0 ? s->ckpt.last.paused_us : 0);
        if (lup_send_fds(s->ctl_fd, b, sizeof(b), NULL, 0) < 0)
                lup_warn("session %s: cannot report to the supervisor", s->name);
}

/* Stops taking calls, finishes what was received, synchronises, says
 * GOODBYE (executed up to N) -- or, for an upgrade (HANDBACK), keeps the
 * connection for the next daemon --, checkpoints (the memory contents
 * through the provider, or exported as fds for a hot restore, or both),
 * reports. */
static void drain(struct lupw_session *s, uint32_t flags)
{
        /* A TLS session lives in this process only: its client reconnects
         * to the next daemon instead (GOODBYE, then a resume). */
        bool handback = (flags & LUPD_DRAIN_HANDBACK) && s->fd >= 0 && !s->tls;
        uint32_t mem = 0;
        int *fds = NULL;

        lup_info("session %s: draining at seq %llu", s->name, (unsigned long long)s->last_seq);
        s->ckpt.draining = true; /* whatever happens now, older checkpoints stay */
        if (handback && !recv_quiesce(s)) {
                drop_connection(s);
                handback = false;
        }
        /* this process's stdout ends with what synchronisation flushed */
        CUresult r;
        int rc = lupw_quiesce(s, &r);
        bool own_error = lupw_sticky_error(r);
        /* A migration's GOODBYE waits for the checkpoint and the lease's
         * release: the client goes straight to the target, which must
         * find both in the store. */
        bool bye_later = s->ckpt.migrate_to[0] != 0;
        if (rc == 0 && !handback && !bye_later)
                send_goodbye(s);
        if (flags & LUPD_DRAIN_DURABLE)
                mem |= LUP_CKPT_MEM_DURABLE;
        if ((flags & LUPD_DRAIN_HOT) && lupw_hot_export(s, &fds) >= 0)
                mem |= LUP_CKPT_MEM_HOT;
        int status;
        if (own_error) {
                /* Its memory cannot be read back, and a checkpoint of a
                 * broken context would only bring the breakage back. */
                const char *en = NULL;
                if (s->be.fn.cuGetErrorName)
                        (void)s->be.fn.cuGetErrorName(r, &en);
                if (s->ckpt.epoch)
                        lup_warn("session %s: ended by its own error: its CUDA context has the sticky error %d (%s); "
                                 "not checkpointed; its previous checkpoint, epoch %llu, is kept",
                                 s->name, (int)r, en ? en : "?", (unsigned long long)s->ckpt.epoch);
                else
                        lup_warn("session %s: ended by its own error: its CUDA context has the sticky error %d (%s); "
                                 "not checkpointed (it has no earlier checkpoint)",
                                 s->name, (int)r, en ? en : "?");
                status = -ENOTRECOVERABLE;
                mem = 0;
        } else if (mem == 0) {
                lup_err("session %s: hot checkpoint impossible and no durable copy was asked for; the previous "
                        "checkpoint (if any) stays",
                        s->name);
                status = -EIO;
        } else {
                if ((flags & LUPD_DRAIN_HOT) && !(mem & LUP_CKPT_MEM_HOT))
                        lup_warn("session %s: memory could not be exported; the checkpoint is durable only", s->name);
                status = lupw_checkpoint(s, mem);
        }
        if (fds && status == 0) {
                int sr = lupw_hot_send(s, fds, s->ckpt.epoch);
                /* Committed as hot only, its memory is in those fds alone. */
                if (sr < 0 && !(mem & LUP_CKPT_MEM_DURABLE))
                        status = sr;
        } else if (fds) {
                for (size_t i = 0; i < s->mem.n_chunks; i++)
                        close(fds[i]);
        }
        free(fds);
        if (status == 0)
                lup_info("session %s: checkpoint epoch %llu committed", s->name, (unsigned long long)s->ckpt.epoch);
        if (handback) {
                int hr = status == 0 ? lupw_handback(s, s->ckpt.epoch) : -ECANCELED;
                if (hr < 0) {
                        if (hr != -ECANCELED)
                                lup_warn("session %s: cannot hand the connection back (%s); the client will "
                                         "reconnect",
                                         s->name, strerror(-hr));
                        send_goodbye(s);
                }
        }
        /* Checkpointed for good: any host sharing the store may take it
         * over at once (released now, not at the exit). An upgrade's new
         * worker here claims it again. */
        if (status == 0 && (mem & LUP_CKPT_MEM_DURABLE) && !(flags & LUPD_DRAIN_HANDBACK)) {
                s->lease.release_at_end = true;
                lupw_lease_end(s);
        }
        if (bye_later)
                send_goodbye(s); /* names the target; without a checkpoint the client comes back here */
        lupw_op_stats_flush(s);
        send_drained(s, status);
        s->loop.exit_status = status == 0 || status == -ENOTRECOVERABLE ? 0 : 1;
        s->loop.stop = true;
}

static void handle_ctl(struct lupw_session *s)
{
        uint8_t msg[LUPD_CTL_MAX_MSG];
        int fds[1] = { -1 }, nfds = 0;
        int n = lup_recv_fds(s->ctl_fd, msg, sizeof(msg), fds, 1, &nfds);
        if (n <= 0) {
                /* its checkpoint, if any, stays: the next lupined restores it */
                lup_info("session %s: the supervisor is gone; ending the session, keeping its checkpoint", s->name);
                s->ckpt.keep = true;
                send_goodbye(s);
                s->loop.stop = true;
                return;
        }
        uint32_t type = n >= 4 ? lup_le32(msg) : 0;
        switch (type) {
        case LUPD_CTL_SHUTDOWN:
                lup_info("session %s: shutting down at the supervisor's request", s->name);
                if (n >= 8 && (lup_le32(msg + 4) & LUPD_SHUTDOWN_FORGET))
                        lupw_forget_checkpoint(s);
                else {
                        s->ckpt.keep = true;            /* lupinectl sessions kill NAME: a restart restores it */
                        s->lease.release_at_end = true; /* ... or any host sharing the store */
                }
                send_goodbye(s);
                s->loop.stop = true;
                break;
        case LUPD_CTL_LOG_LEVELS: {
                char spec[300], why[160];
                if (n - 4 < (int)sizeof(spec)) {
                        memcpy(spec, msg + 4, (size_t)n - 4);
                        spec[n - 4] = 0;
                        if (lup_log_set_levels(spec, why, sizeof(why)) < 0)
                                lup_warn("session %s: log levels '%s' from the supervisor: %s", s->name, spec, why);
                }
                break;
        }
        case LUPD_CTL_DRAIN:
                /* carried out by the loop, once this batch of completions
                 * is consumed (an upgrade's drain waits on the ring) */
                s->ckpt.drain_flags = n >= 8 ? lup_le32(msg + 4) : LUPD_DRAIN_DURABLE;
                s->ckpt.drain_wanted = true;
                break;
        case LUPD_CTL_ATTACH:
                attach(s, msg, (size_t)n, nfds ? fds[0] : -1);
                return;
        case LUPD_CTL_PEER:
                lupw_peer_serve(s, msg, (size_t)n, nfds ? fds[0] : -1);
                return;
        case LUPD_CTL_MIGRATE_TO:
                if (n > 4 && (size_t)(n - 4) <= LUP_GOODBYE_TO_MAX && !memchr(msg + 4, 0, (size_t)n - 4)) {
                        memcpy(s->ckpt.migrate_to, msg + 4, (size_t)n - 4);
                        s->ckpt.migrate_to[n - 4] = 0;
                        lup_info("session %s: migrating to %s (a durable checkpoint, then its client goes there)",
                                 s->name, s->ckpt.migrate_to);
                        (void)lupw_precopy_start(s); /* the drain that follows waits for it (worker/precopy.c) */
                } else {
                        lup_err("session %s: malformed MIGRATE_TO from the supervisor", s->name);
                }
                break;
        case LUPD_CTL_CHECKPOINT:
                /* carried out by the loop between two batches of frames
                 * (worker/ckpt_now.c) */
                lupw_ckpt_now_request(s);
                break;
        default:
                lup_err("session %s: unknown control message %u", s->name, type);
                break;
        }
        for (int i = 0; i < nfds; i++)
                close(fds[i]);
}

static void input_arrived(struct lupw_session *s, size_t n)
{
        s->rx.len += n;
        s->stats.bytes_in += n;
        int rc = lupw_process_input(s);
        if (rc < 0) {
                /* -EPIPE: the client stopped reading, and what it missed is
                 * in the reply log; it may resume. Anything else is a
                 * protocol violation. */
                if (rc == -EPIPE) {
                        detach(s, "stopped reading");
                        return;
                }
                lup_warn("session %s: closing connection: %s (op at seq %llu)", s->name,
                         s->why ? s->why : "write failed", (unsigned long long)s->last_seq);
                s->loop.stop = true; /* a hostile or broken client gets no resume */
        }
}

/* A TLS connection is readable (or OpenSSL holds bytes): take them. */
static void tls_input(struct lupw_session *s)
{
        ssize_t k = tls_recv(s);

        if (k > 0)
                input_arrived(s, (size_t)k);
        else if (k == 0 || k == -ECONNRESET || k == -EPIPE)
                detach(s, "disconnected");
        else if (k != -EAGAIN)
                detach(s, lup_tls_error(s->tls));
}

/* The detached session's TTL, and the wake-up for a report the worker
 * owes its supervisor (worker/stats.c) before it sleeps. */
static void arm_timers(struct lupw_session *s)
{
        struct io_uring_sqe *sqe;

        if (s->fd < 0 && !s->loop.ttl_armed) {
                s->loop.ttl.tv_sec = detach_ttl_s(s);
                s->loop.ttl.tv_nsec = 0;
                sqe = io_uring_get_sqe(&s->loop.ring);
                io_uring_prep_timeout(sqe, &s->loop.ttl, 0, 0);
                io_uring_sqe_set_data64(sqe, ud_make(UD_TTL, s->loop.conn_gen));
                s->loop.ttl_armed = true;
        }
        lupw_beat_devices(s);
        uint64_t stats_due = lupw_stats_tick(s);
        if (stats_due && !s->loop.stats_armed) {
                s->loop.stats_ts.tv_sec = (long long)(stats_due / 1000000000u);
                s->loop.stats_ts.tv_nsec = (long long)(stats_due % 1000000000u);
                sqe = io_uring_get_sqe(&s->loop.ring);
                io_uring_prep_timeout(sqe, &s->loop.stats_ts, 0, 0);
                io_uring_sqe_set_data64(sqe, ud_make(UD_STATS, 0));
                s->loop.stats_armed = true;
        }
        bool precopy = lupw_precopy_running(s);
        if ((s->ckpt.now_wanted || (s->ckpt.drain_wanted && precopy)) && !s->loop.ckpt_armed) {
                /* a checkpoint waiting for a capture or an upload to end,
                 * or a drain for its pre-copy, looks again even if no
                 * frame comes */
                s->loop.ckpt_ts.tv_sec = 0;
                s->loop.ckpt_ts.tv_nsec = (long long)(precopy ? LUPW_PRECOPY_POLL_MS : LUPW_CKPT_NOW_POLL_MS) * 1000000;
                sqe = io_uring_get_sqe(&s->loop.ring);
                io_uring_prep_timeout(sqe, &s->loop.ckpt_ts, 0, 0);
                io_uring_sqe_set_data64(sqe, ud_make(UD_CKPT, 0));
                s->loop.ckpt_armed = true;
        }
}

/* A drain, or a checkpoint asked for, between two batches of frames:
 * true when one ran or gave up (the loop looks at the session again). */
static bool checkpoint_work(struct lupw_session *s)
{
        if (lupw_precopy_running(s)) {
                lupw_precopy_progress(s);
                return false; /* the session goes on; the checkpoint waits for its pre-copy */
        }
        if (s->ckpt.drain_wanted) {
                s->ckpt.drain_wanted = false;
                lupw_ckpt_now_cancel(s, "the session drains, and the drain checkpoints it");
                drain(s, s->ckpt.drain_flags);
                return true;
        }
        return s->ckpt.now_wanted && lupw_ckpt_now_step(s);
}

/* Another host claimed the session's lease (worker/lease.c): it is that
 * host's now. This one ends it without touching the store, and its client
 * goes on to its other servers (the GOODBYE makes it reconnect; this
 * host's supervisor then answers that another host holds the session). */
static void lease_lost(struct lupw_session *s)
{
        lup_err("session %s: host %s claimed its lease; ending it here (seq %llu) and keeping the checkpoint, "
                "which is that host's now",
                s->name, s->lease.holder[0] ? s->lease.holder : "another", (unsigned long long)s->last_seq);
        s->ckpt.keep = true;
        s->lease.release_at_end = false;
        s->loop.exit_status = 0;
        send_goodbye(s);
        s->loop.stop = true;
}

/* The renewing thread tried: input held back for want of a renewal runs
 * now if the lease is good again. */
static void lease_wake(struct lupw_session *s)
{
        uint64_t n;

        while (read(s->lease.efd, &n, sizeof(n)) > 0)
                ;
        int st = lupw_lease_check(s);
        if (st == -ESTALE) {
                lease_lost(s);
        } else if (st == 0 && s->lease.held) {
                s->lease.held = false;
                lup_info("session %s: its lease is renewed; running calls again", s->name);
                input_arrived(s, 0);
        }
}

/* One completion of the ring. */
static void on_completion(struct lupw_session *s, int kind, int res, uint64_t gen)
{
        if (kind == UD_RECV) {
                if (gen != s->loop.conn_gen) {
                        /* a connection since replaced: its bytes are not ours */
                        s->loop.stale_recv = false;
                        return;
                }
                s->loop.recv_armed = false;
                if (s->tls && res >= 0)
                        tls_input(s);
                else if (res == 0 || res == -ECONNRESET || res == -EPIPE)
                        detach(s, "disconnected");
                else if (res < 0)
                        detach(s, strerror(-res));
                else
                        input_arrived(s, (size_t)res);
        } else if (kind == UD_CTL) {
                s->loop.ctl_armed = false;
                handle_ctl(s);
        } else if (kind == UD_STATS) {
                s->loop.stats_armed = false; /* the report goes before the next sleep */
        } else if (kind == UD_LEASE) {
                s->loop.lease_armed = false;
                lease_wake(s);
        } else if (kind == UD_CKPT) {
                s->loop.ckpt_armed = false; /* the loop looks at the checkpoint again */
        } else if (kind == UD_TTL) {
                if (gen != s->loop.conn_gen || s->fd >= 0)
                        return;
                s->loop.ttl_armed = false;
                if (res == -ETIME && detach_grace_applies(s)) {
                        lup_warn("session %s: limit hit: detach grace: never checkpointed and its "
                                 "client left without GOODBYE; ended after %d s (--detach-grace), "
                                 "not the %d s TTL",
                                 s->name, s->cfg->detach_grace_s, s->cfg->session_ttl_s);
                        lupw_forget_checkpoint(s);
                        s->loop.stop = true;
                } else if (res == -ETIME) {
                        lup_info("session %s: expired unclaimed after %d s", s->name, s->cfg->session_ttl_s);
                        lupw_forget_checkpoint(s);
                        s->loop.stop = true;
                }
        }
}

int lupw_serve(struct lupw_session *s)
{
        int spins_in_a_row = 0;

        lupw_tx_busy(s, true);
        lupw_tx_start(s);
        /* Frames an upgrade handed over with the connection may be whole
         * already (a recv the drain cancelled had got them): the client
         * waits for their replies and sends nothing more, so run them now,
         * not on the next input (seen on the H200: a hang after an
         * upgrade with 160 bytes handed over). */
        if (s->fd >= 0 && s->rx.len > s->rx.off)
                input_arrived(s, 0);

        while (!s->loop.stop) {
                struct io_uring_sqe *sqe;
                if (s->lease.on && atomic_load_explicit(&s->lease.lost, memory_order_relaxed)) {
                        lease_lost(s);
                        continue;
                }
                if (checkpoint_work(s))
                        continue;
                /* A client in a call/return loop sends again within
                 * microseconds: poll briefly before sleeping in the ring,
                 * which saves a wake-up per call. Every so often go through
                 * the ring anyway, so control messages are seen. */
                bool reading = s->fd >= 0 && !s->lease.held; /* held: the input waits (lease_wake) */
                if (reading && !s->loop.recv_armed && !s->loop.stale_recv && s->rx.spin_ns && spins_in_a_row < 64) {
                        ssize_t k = spin_recv(s);
                        if (k > 0) {
                                spins_in_a_row++;
                                input_arrived(s, (size_t)k);
                                continue;
                        }
                        if (k == 0) {
                                detach(s, "disconnected");
                                continue;
                        }
                }
                spins_in_a_row = 0;
                if (reading && s->tls && !s->loop.recv_armed && lup_tls_pending(s->tls)) {
                        tls_input(s); /* OpenSSL holds bytes already: no poll would say so */
                        continue;
                }
                if (reading && !s->loop.recv_armed && !s->loop.stale_recv) {
                        sqe = io_uring_get_sqe(&s->loop.ring);
                        if (s->tls) /* OpenSSL reads; the ring says when */
                                io_uring_prep_poll_add(sqe, s->fd, (unsigned)lup_tls_want(s->tls));
                        else
                                io_uring_prep_recv(sqe, s->fd, s->rx.buf + s->rx.len, s->rx.cap - s->rx.len, 0);
                        io_uring_sqe_set_data64(sqe, ud_make(UD_RECV, s->loop.conn_gen));
                        s->loop.recv_armed = true;
                }
                if (!s->loop.ctl_armed) {
                        sqe = io_uring_get_sqe(&s->loop.ring);
                        io_uring_prep_poll_add(sqe, s->ctl_fd, POLLIN);
                        io_uring_sqe_set_data64(sqe, ud_make(UD_CTL, 0));
                        s->loop.ctl_armed = true;
                }
                if (s->lease.on && s->lease.efd >= 0 && !s->loop.lease_armed) {
                        sqe = io_uring_get_sqe(&s->loop.ring);
                        io_uring_prep_poll_add(sqe, s->lease.efd, POLLIN);
                        io_uring_sqe_set_data64(sqe, ud_make(UD_LEASE, 0));
                        s->loop.lease_armed = true;
                }
                arm_timers(s);
                struct io_uring_cqe *cqe;
                lupw_tx_busy(s, false); /* idle: no heartbeats needed */
                int rc = io_uring_submit_and_wait(&s->loop.ring, 1);
                lupw_tx_busy(s, true);
                if (rc < 0 && rc != -EINTR) {
                        lup_err("session %s: io_uring wait failed: %s", s->name, strerror(-rc));
                        return rc;
                }
                unsigned head, seen = 0;
                io_uring_for_each_cqe(&s->loop.ring, head, cqe)
                {
                        seen++;
                        uint64_t ud = io_uring_cqe_get_data64(cqe);
                        if (!s->loop.stop)
                                on_completion(s, (int)(ud & 0xff), cqe->res, ud >> 8);
                }
                io_uring_cq_advance(&s->loop.ring, seen);
        }
        lupw_ckpt_now_cancel(s, "the session ended first");
        return 0;
}
