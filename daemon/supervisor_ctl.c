/* SPDX-License-Identifier: MIT */
/*
 * The supervisor's end of the worker control channels (daemon/ctl.h).
 *
 * What a worker may send, by the state of its session (anything else, or a
 * message that does not parse, is a protocol violation and the worker is
 * killed: drop the peer, as OpenSSH's monitor does; a worker runs tenant
 * code paths and is trusted no further than its own session):
 *
 *   READY     once, first; 12 bytes. For a new session the slot must be
 *             the one ASSIGN gave it; a restore worker names its own.
 *   ATTACHED  after READY, only while an ATTACH is unanswered; 8 bytes.
 *   DETACHED  after READY; 4 bytes (or 8, with a zero status).
 *   DRAINED   once, only after DRAIN; 8 bytes.
 *
 * Statuses are 0 or -errno; a positive status is malformed.
 *
 * A worker's last words can still be in its socket when SIGCHLD arrives
 * (it sends DRAINED, then exits). So a reaped worker's socket is read to
 * the end before its entry is freed, and only then is anything it did not
 * say (no READY from a restore worker, no DRAINED from a draining one)
 * counted against it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "ctl.h"
#include "log.h"
#include "supervisor_int.h"

/* LUPD_CTL_ATTACH: u32 type, u32 slot, u64 seq, u32 lane, u32 len, HELLO. */
#define CTL_ATTACH_FIXED 24u
_Static_assert(CTL_ATTACH_FIXED + LUPD_HELLO_MAX_PAYLOAD <= LUPD_CTL_MAX_MSG,
               "an ATTACH message must fit one control datagram");

static const char *errno_text(int32_t status)
{
        return status < 0 && status > -4096 ? strerror(-status) : "unknown error";
}

void sup_ctl_arm(struct sup *s, int idx)
{
        struct lupd_session *se = &s->reg.s[idx];
        struct io_uring_sqe *sqe;

        if (se->ctl_busy || se->ctl_eof || se->ctl_fd < 0 || se->state != LUPD_SESSION_LIVE)
                return;
        sqe = sup_sqe(s);
        if (!sqe) {
                lup_warn("cannot watch the control socket of worker %d: submission queue full", (int)se->pid);
                return;
        }
        /* MSG_TRUNC makes the result the datagram's real length, so an
         * oversized message shows as such instead of being cut silently. */
        io_uring_prep_recv(sqe, se->ctl_fd, se->ctl_buf, sizeof(se->ctl_buf), MSG_TRUNC);
        io_uring_sqe_set_data64(sqe, ud_make(EV_CTL_RECV, (uint32_t)idx));
        se->ctl_busy = true;
}

/* A worker broke the control protocol: stop listening to it and kill it
 * (unless it is dead already); the reaper frees its entry. */
static void worker_violation(struct sup *s, int idx, const char *what)
{
        struct lupd_session *se = &s->reg.s[idx];

        if (se->reaped)
                lup_err("worker %d for session %s sent %s before it exited", (int)se->pid, se->name, what);
        else
                lup_err("worker %d for session %s sent %s; killing it", (int)se->pid, se->name, what);
        se->ctl_eof = true;
        sup_worker_kill(s, idx);
}

static void on_ready(struct sup *s, int idx, int32_t status, uint32_t slot)
{
        struct lupd_session *se = &s->reg.s[idx];

        se->ready = true;
        if (se->restore) {
                sup_restore_on_ready(s, idx, status, slot);
                return;
        }
        if (status != 0) {
                se->phase = LUPD_PHASE_FAILED;
                lup_warn("worker %d could not start session %s: %s", (int)se->pid, se->name, errno_text(status));
                return;
        }
        if (se->phase == LUPD_PHASE_STARTING)
                se->phase = LUPD_PHASE_SERVING;
        lup_info("session %s (slot %d) served by worker %d", se->name, se->slot, (int)se->pid);
        sup_status_update(s);
}

static void on_attached(struct sup *s, int idx, int32_t status)
{
        struct lupd_session *se = &s->reg.s[idx];
        char peer[sizeof(se->attach_peer[0])];

        memcpy(peer, se->attach_peer[0], sizeof(peer));
        se->attach_pending--;
        memmove(se->attach_peer[0], se->attach_peer[1], sizeof(se->attach_peer[0]) * (size_t)se->attach_pending);
        if (status == 0) {
                if (se->phase != LUPD_PHASE_FAILED)
                        se->phase = LUPD_PHASE_SERVING;
                lup_info("session %s resumed by the client from %s", se->name, peer);
                sup_status_update(s);
        } else if (status == -EPERM) {
                lup_warn("session %s: resume by %s refused: wrong resume token", se->name, peer);
        } else {
                lup_warn("session %s: resume by %s failed: %s", se->name, peer, errno_text(status));
        }
}

static void on_detached(struct sup *s, int idx)
{
        struct lupd_session *se = &s->reg.s[idx];

        if (se->phase == LUPD_PHASE_SERVING)
                se->phase = LUPD_PHASE_DETACHED;
        lup_info("session %s detached: its client connection was lost; the session is kept for up to %d s "
                 "for the client to resume",
                 se->name, s->cfg->session_ttl_s);
        sup_status_update(s);
}

/* One control message of len bytes in se->ctl_buf. Returns 0, or -EPROTO
 * after a violation (listen no further). */
static int ctl_message(struct sup *s, int idx, size_t len)
{
        struct lupd_session *se = &s->reg.s[idx];
        struct lup_rd r = lup_rd_init(se->ctl_buf, len);
        uint32_t type = 0, slot = 0;
        int32_t status = 0;
        char what[96];
        size_t want;
        bool ok;

        if (len > sizeof(se->ctl_buf)) {
                worker_violation(s, idx, "an oversized control message");
                return -EPROTO;
        }
        lup_rd_u32(&r, &type);
        switch (type) {
        case LUPD_CTL_READY:
                ok = !se->ready;
                want = 12;
                break;
        case LUPD_CTL_ATTACHED:
                ok = se->ready && se->attach_pending > 0;
                want = 8;
                break;
        case LUPD_CTL_DETACHED:
                ok = se->ready;
                /* ctl.h says u32 type; a zero i32 after it is tolerated,
                 * as the worker's generic sender writes one. */
                want = len == 8 ? 8 : 4;
                break;
        case LUPD_CTL_DRAINED:
                ok = se->drain_sent && !se->drain_done;
                want = 8;
                break;
        default:
                ok = false;
                want = 0;
                break;
        }
        if (!ok) {
                snprintf(what, sizeof(what), "an unexpected control message (type %u)", (unsigned)type);
                worker_violation(s, idx, what);
                return -EPROTO;
        }
        if (want >= 8)
                lup_rd_i32(&r, &status);
        if (want >= 12)
                lup_rd_u32(&r, &slot);
        if (len != want || lup_rd_finish(&r) < 0 || status > 0 || (type == LUPD_CTL_DETACHED && status != 0)) {
                snprintf(what, sizeof(what), "a malformed control message (type %u, %zu bytes)", (unsigned)type,
                         len);
                worker_violation(s, idx, what);
                return -EPROTO;
        }

        switch (type) {
        case LUPD_CTL_READY:
                if (!se->restore && status == 0 && slot != (uint32_t)se->slot) {
                        snprintf(what, sizeof(what), "READY for arena slot %u, but was given slot %d",
                                 (unsigned)slot, se->slot);
                        worker_violation(s, idx, what);
                        return -EPROTO;
                }
                on_ready(s, idx, status, slot);
                break;
        case LUPD_CTL_ATTACHED:
                on_attached(s, idx, status);
                break;
        case LUPD_CTL_DETACHED:
                on_detached(s, idx);
                break;
        case LUPD_CTL_DRAINED:
                sup_drain_on_drained(s, idx, status);
                break;
        }
        return 0;
}

void sup_ctl_on_recv(struct sup *s, int idx, int res)
{
        struct lupd_session *se = &s->reg.s[idx];

        se->ctl_busy = false;
        if (se->state == LUPD_SESSION_RETIRED) {
                /* Reaped meanwhile: this was its last word, or the cancel. */
                if (res > 0 && !se->ctl_eof && ctl_message(s, idx, (size_t)res) < 0)
                        se->ctl_eof = true;
                if (res == 0)
                        se->ctl_eof = true;
                sup_ctl_finish(s, idx);
                return;
        }
        if (se->state != LUPD_SESSION_LIVE || se->ctl_eof)
                return; /* not listening to it any more */
        if (res == -EINTR || res == -EAGAIN) {
                sup_ctl_arm(s, idx);
                return;
        }
        if (res <= 0) {
                /* EOF or reset: the worker is on its way out, and SIGCHLD
                 * tells the rest. */
                if (res < 0 && res != -ECANCELED)
                        lup_debug("control socket of worker %d: %s", (int)se->pid, strerror(-res));
                se->ctl_eof = true;
                return;
        }
        if (ctl_message(s, idx, (size_t)res) < 0)
                return;
        sup_ctl_arm(s, idx);
}

void sup_ctl_finish(struct sup *s, int idx)
{
        struct lupd_session *se = &s->reg.s[idx];
        bool restore = se->restore;
        char why[64];

        if (se->state != LUPD_SESSION_RETIRED || se->ctl_busy)
                return;
        /* The worker is gone, so everything it sent is queued already;
         * the queue is bounded by the socket buffer. */
        while (!se->ctl_eof && se->ctl_fd >= 0) {
                ssize_t n = recv(se->ctl_fd, se->ctl_buf, sizeof(se->ctl_buf), MSG_DONTWAIT | MSG_TRUNC);
                if (n <= 0 || ctl_message(s, idx, (size_t)n) < 0)
                        break;
        }
        sup_describe_wait(se->wait_status, why, sizeof(why));
        if (se->restore && !se->ready)
                sup_restore_on_gone(s, idx, why);
        if (se->drain_sent && !se->drain_done)
                sup_drain_on_gone(s, idx, se->wait_status);
        se->ctl_fd = safe_close(se->ctl_fd);
        lupd_registry_release(&s->reg, idx);
        if (restore)
                sup_restore_progress(s);
        sup_status_update(s);
}

/* sendmsg with one fd attached, never blocking: a worker that does not
 * read its control socket must not stall the supervisor. */
static int send_with_fd(int sock, const void *p, size_t n, int fd)
{
        union {
                char buf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } u;
        struct iovec iov = { .iov_base = (void *)p, .iov_len = n };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                             .msg_controllen = sizeof(u.buf) };
        struct cmsghdr *c;
        ssize_t k;

        memset(&u, 0, sizeof(u));
        c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
        do
                k = sendmsg(sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
        while (k < 0 && errno == EINTR);
        if (k < 0)
                return -errno;
        return (size_t)k == n ? 0 : -EMSGSIZE;
}

int sup_session_attach(struct sup *s, int idx, int client_fd, const struct lup_hdr *hdr, const uint8_t *payload,
                       const char *peer)
{
        struct lupd_session *se = &s->reg.s[idx];
        uint8_t msg[CTL_ATTACH_FIXED + LUPD_HELLO_MAX_PAYLOAD];
        struct lup_wr w = lup_wr_init(msg, sizeof(msg));
        int r;

        if (se->attach_pending >= LUPD_MAX_ATTACH_PENDING)
                return -EBUSY;
        if (se->ctl_fd < 0 || se->ctl_eof)
                return -EPIPE;
        lup_wr_u32(&w, LUPD_CTL_ATTACH);
        lup_wr_u32(&w, (uint32_t)(se->slot < 0 ? 0 : se->slot)); /* ignored by the worker */
        lup_wr_u64(&w, hdr->seq);
        lup_wr_u32(&w, hdr->lane);
        lup_wr_u32(&w, hdr->len);
        lup_wr_bytes(&w, payload, hdr->len);
        if (w.err)
                return w.err;
        r = send_with_fd(se->ctl_fd, msg, w.len, client_fd);
        if (r < 0)
                return r == -EAGAIN ? -EBUSY : r;
        snprintf(se->attach_peer[se->attach_pending], sizeof(se->attach_peer[0]), "%s", peer);
        se->attach_pending++;
        lup_info("session %s: resume request from %s handed to worker %d", se->name, peer, (int)se->pid);
        return 0;
}
