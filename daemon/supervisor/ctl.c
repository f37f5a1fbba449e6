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
 *   CHECKPOINTED  once per CHECKPOINT, only while one runs; 16 bytes.
 *
 * Statuses are 0 or -errno; a positive status is malformed.
 *
 * A worker's last words can still be in its socket when SIGCHLD arrives
 * (it sends DRAINED, then exits). So a reaped worker's socket is read to
 * the end before its entry is freed, and only then is anything it did not
 * say (no READY from a restore worker, no DRAINED from a draining one)
 * counted against it. That is why reaping is here and not in workers.c.
 * The socket's I/O (arming the recv, ATTACH) is supervisor/ctl_io.c.
 */
#define LUP_LOG_CAT LUP_LOGC_SESSION
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "ctl.h"
#include "log.h"
#include "op_stats.h"
#include "supervisor/internal.h"
#include "upload_acct.h"

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
                lup_warn("worker %d could not start session %s: %s", (int)se->pid, se->name, sup_errno_text(status));
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
                snprintf(se->client, sizeof(se->client), "%s", peer);
                lup_info("session %s resumed by the client from %s", se->name, peer);
                sup_status_update(s);
        } else if (status == -EPERM) {
                lup_warn("session %s: resume by %s refused: wrong resume token", se->name, peer);
        } else if (status == -ESTALE) {
                lup_warn("session %s: resume by %s refused: stale checkpoint: the client has seen later calls "
                         "executed than the restored checkpoint holds (the worker's line says which)",
                         se->name, peer);
        } else {
                lup_warn("session %s: resume by %s failed: %s", se->name, peer, sup_errno_text(status));
        }
}

static void on_detached(struct sup *s, int idx)
{
        struct lupd_session *se = &s->reg.s[idx];

        if (se->phase == LUPD_PHASE_SERVING)
                se->phase = LUPD_PHASE_DETACHED;
        se->client[0] = 0;
        /* the worker's rule (worker/loop.c): a session never checkpointed */
        se->in_grace = !se->restore && se->stats.epoch == 0 && s->cfg->detach_grace_s > 0 &&
                       s->cfg->detach_grace_s < s->cfg->session_ttl_s;
        se->detached_ms = sup_now_ms();
        lup_info("session %s detached: its client connection was lost; the session is kept for up to %d s "
                 "for the client to resume (%d s if it was never checkpointed: --detach-grace)",
                 se->name, s->cfg->session_ttl_s, s->cfg->detach_grace_s);
        sup_status_update(s);
}

static int ctl_plain_message(struct sup *s, int idx, size_t len);

/* The fds that came with the message just received (se->ctl_msg), at most
 * LUPD_CTL_RECV_FDS; returns how many, or -EPROTO when some were lost
 * (MSG_CTRUNC: the kernel closed what did not fit). */
static int ctl_take_fds(struct lupd_session *se, int *fds)
{
        int n = 0;

        for (struct cmsghdr *c = CMSG_FIRSTHDR(&se->ctl_msg); c; c = CMSG_NXTHDR(&se->ctl_msg, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t cnt = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < cnt; i++) {
                        int fd;
                        memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                        if (n < (int)LUPD_CTL_RECV_FDS)
                                fds[n++] = fd;
                        else
                                close(fd);
                }
        }
        if (se->ctl_msg.msg_flags & MSG_CTRUNC) {
                for (int i = 0; i < n; i++)
                        close(fds[i]);
                return -EPROTO;
        }
        return n;
}

static void close_fds(int *fds, int n)
{
        for (int i = 0; i < n; i++)
                if (fds[i] >= 0)
                        close(fds[i]);
}

/* HOT_MEM and HANDBACK: the messages with fds. Returns 0 or -EPROTO. */
static int ctl_fd_message(struct sup *s, int idx, uint32_t type, size_t len, int *fds, int nfds)
{
        struct lupd_session *se = &s->reg.s[idx];
        struct lup_rd r = lup_rd_init(se->ctl_buf, len);
        uint32_t t, n = 0;
        uint64_t epoch = 0, seq = 0;
        char what[112];

        lup_rd_u32(&r, &t);
        lup_rd_u32(&r, &n);
        lup_rd_u64(&r, &epoch);
        if (type == LUPD_CTL_HOT_MEM) {
                if (!se->drain_sent || se->drain_done || !(se->drain_flags & LUPD_DRAIN_HOT)) {
                        snprintf(what, sizeof(what), "HOT_MEM it was not asked for");
                        goto out_violation;
                }
                if (r.err || n == 0 || n > LUPD_CTL_MAX_FDS || (int)n != nfds ||
                    len != LUPD_CTL_HOT_MEM_FIXED + (size_t)n * LUPD_CTL_HOT_MEM_REC) {
                        snprintf(what, sizeof(what), "a malformed HOT_MEM (%zu bytes, %d fds)", len, nfds);
                        goto out_violation;
                }
                sup_hot_on_mem(s, idx, epoch, se->ctl_buf + LUPD_CTL_HOT_MEM_FIXED, fds, (int)n);
                return 0;
        }
        lup_rd_u64(&r, &seq);
        if (!se->drain_sent || se->drain_done || !(se->drain_flags & LUPD_DRAIN_HANDBACK) || se->handback_got) {
                snprintf(what, sizeof(what), "HANDBACK it was not asked for");
                goto out_violation;
        }
        if (r.err || len != LUPD_CTL_HANDBACK_LEN || nfds != (n ? 2 : 1) || n > LUP_MAX_PAYLOAD + LUP_HDR_SIZE) {
                snprintf(what, sizeof(what), "a malformed HANDBACK (%zu bytes, %d fds)", len, nfds);
                goto out_violation;
        }
        se->handback_got = true;
        sup_hot_on_handback(s, idx, epoch, seq, n, fds[0], n ? fds[1] : -1);
        return 0;

out_violation:
        close_fds(fds, nfds);
        worker_violation(s, idx, what);
        return -EPROTO;
}

/* One control message of len bytes in se->ctl_buf, with the fds the
 * ring's recvmsg got (with_fds; a plain recv after the worker is gone
 * got none). Returns 0, or -EPROTO after a violation (listen no further). */
static int ctl_message(struct sup *s, int idx, size_t len, bool with_fds)
{
        struct lupd_session *se = &s->reg.s[idx];
        int fds[LUPD_CTL_RECV_FDS], nfds = 0;

        if (with_fds) {
                nfds = ctl_take_fds(se, fds);
                if (nfds < 0) {
                        worker_violation(s, idx, "more fds than a control message may carry");
                        return -EPROTO;
                }
        }
        if (len >= 4 && len <= sizeof(se->ctl_buf)) {
                uint32_t type = lup_le32(se->ctl_buf);
                if (type == LUPD_CTL_HOT_MEM || type == LUPD_CTL_HANDBACK)
                        return ctl_fd_message(s, idx, type, len, fds, nfds);
        }
        if (nfds > 0) {
                close_fds(fds, nfds);
                worker_violation(s, idx, "fds with a message that carries none");
                return -EPROTO;
        }
        return ctl_plain_message(s, idx, len);
}

/* A worker's report: kept for status and metrics, rates from the one before. */
static int on_stats(struct sup *s, int idx, size_t len)
{
        struct lupd_session *se = &s->reg.s[idx];
        struct lupd_session_stats *st = &se->stats, n = { .have = true };
        struct lup_rd r = lup_rd_init(se->ctl_buf, len);
        uint32_t type, zero = 1;

        lup_rd_u32(&r, &type);
        lup_rd_u32(&r, &n.phase);
        lup_rd_u32(&r, &n.backend);
        lup_rd_u32(&r, &zero);
        lup_rd_u64(&r, &n.calls);
        lup_rd_u64(&r, &n.bytes_in);
        lup_rd_u64(&r, &n.bytes_out);
        lup_rd_u64(&r, &n.mem);
        lup_rd_u64(&r, &n.epoch);
        lup_rd_u64(&r, &n.ckpt_unix_ms);
        lup_rd_u64(&r, &n.done);
        lup_rd_u64(&r, &n.total);
        if (len == LUPD_CTL_STATS_LEN) {
                lup_rd_u64(&r, &n.peer_in);
                lup_rd_u64(&r, &n.peer_out);
        }
        if ((len != LUPD_CTL_STATS_LEN && len != LUPD_CTL_STATS_LEN_V1) || lup_rd_finish(&r) < 0 ||
            n.phase > LUPD_WORK_RESTORE || n.done > n.total ||
            (n.backend != LUP_BACKEND_CUDA && n.backend != LUP_BACKEND_SIM) || zero != 0) {
                worker_violation(s, idx, "a malformed STATS report");
                return -EPROTO;
        }
        n.at_ms = sup_now_ms();
        if (st->have && n.at_ms > st->at_ms && n.calls >= st->calls) {
                double dt = (double)(n.at_ms - st->at_ms) / 1000.0;
                n.calls_per_s = (double)(n.calls - st->calls) / dt;
                n.bytes_per_s = (double)(n.bytes_in - st->bytes_in + n.bytes_out - st->bytes_out) / dt;
        }
        bool phase_changed = n.phase != st->phase;
        *st = n;
        s->backend_seen = n.backend;
        if (phase_changed || n.phase != LUPD_WORK_NONE)
                sup_status_update(s); /* sd_notify's STATUS shows the progress */
        return 0;
}

static void add_op_count(void *arg, unsigned op, const struct lupd_op_count *c)
{
        lupd_op_count_add(&((struct sup *)arg)->ops[op], c);
}

/* Calls, bytes and latency by op since the worker's last report, summed
 * for the metrics (daemon/op_stats.h). */
static int on_op_stats(struct sup *s, int idx, size_t len)
{
        char what[96];
        const char *why;

        if (!s->ops && !(s->ops = calloc(LUPD_OP_IDS, sizeof(*s->ops))))
                return 0; /* no memory for the table: the counts are dropped, the session goes on */
        if (lupd_op_stats_decode(s->reg.s[idx].ctl_buf, len, add_op_count, s, &why) < 0) {
                snprintf(what, sizeof(what), "a malformed OP_STATS report (%s)", why);
                worker_violation(s, idx, what);
                return -EPROTO;
        }
        return 0;
}

/* Why a checkpoint the operator asked for was not made, for STATUS. */
static void checkpoint_failure(int32_t status, char *out, size_t cap)
{
        switch (status) {
        case -EBUSY:
                snprintf(out, cap,
                         "a stream capture or a module upload of the client stayed open for %u s; try "
                         "again",
                         LUPD_CKPT_NOW_WAIT_MS / 1000u);
                break;
        case -ENOTRECOVERABLE:
                snprintf(out, cap,
                         "its CUDA context has a sticky error of its own making (the worker's log "
                         "names it)");
                break;
        case -ECANCELED:
                snprintf(out, cap, "cancelled: the session drained or ended first");
                break;
        default:
                snprintf(out, cap, "the checkpoint failed: %s (the worker's log says more)", sup_errno_text(status));
                break;
        }
}

/* The verdict of a checkpoint the operator asked for (ADMIN CHECKPOINT):
 * logged, and kept for STATUS. */
static int on_checkpointed(struct sup *s, int idx, size_t len)
{
        struct lupd_session *se = &s->reg.s[idx];
        struct lup_rd r = lup_rd_init(se->ctl_buf, len);
        uint32_t type;
        int32_t status = 0;
        uint64_t epoch = 0;

        lup_rd_u32(&r, &type);
        lup_rd_i32(&r, &status);
        lup_rd_u64(&r, &epoch);
        if (!se->ckpt_running || len != LUPD_CTL_CHECKPOINTED_LEN || lup_rd_finish(&r) < 0 || status > 0 ||
            (status == 0 && epoch == 0)) {
                worker_violation(s, idx, se->ckpt_running ? "a malformed CHECKPOINTED" : "CHECKPOINTED unasked");
                return -EPROTO;
        }
        se->ckpt_running = false;
        bool periodic = se->ckpt_periodic;
        sup_periodic_done(s, idx, status);
        double secs = (double)(sup_now_ms() - se->ckpt_started_ms) / 1000.0;
        if (status == 0) {
                se->work_started_ms = se->ckpt_started_ms;
                sup_count_work(s, se, false);
                se->ckpt_error[0] = 0;
                se->stats.epoch = epoch; /* STATUS shows it now; the worker's next report says the same */
                lup_info("session %s checkpointed%s at epoch %llu: %llu bytes in %.1f s", se->name,
                         periodic ? " (periodic)" : "", (unsigned long long)epoch, (unsigned long long)se->stats.mem,
                         secs);
        } else {
                checkpoint_failure(status, se->ckpt_error, sizeof(se->ckpt_error));
                lup_warn("session %s: %s checkpoint not made after %.1f s: %s; its last checkpoint (epoch "
                         "%llu) stays",
                         se->name, periodic ? "periodic" : "asked-for", secs, se->ckpt_error,
                         (unsigned long long)epoch);
        }
        sup_status_update(s);
        return 0;
}

/* A control message without fds. */
static int ctl_plain_message(struct sup *s, int idx, size_t len)
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
                want = len == LUPD_CTL_DRAINED_LEN ? LUPD_CTL_DRAINED_LEN : 8;
                break;
        case LUPD_CTL_STATS:
                return on_stats(s, idx, len);
        case LUPD_CTL_OP_STATS:
                return on_op_stats(s, idx, len);
        case LUPD_CTL_HEARTBEAT:
                if (len != LUPD_CTL_HEARTBEAT_LEN) {
                        worker_violation(s, idx, "a malformed heartbeat");
                        return -EPROTO;
                }
                sup_health_on_beat(s, idx, lup_le32(se->ctl_buf + 4));
                return 0;
        case LUPD_CTL_CHECKPOINTED:
                return on_checkpointed(s, idx, len);
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
        struct sup_drained fig = { 0 };
        if (want >= 8)
                lup_rd_i32(&r, &status);
        if (type == LUPD_CTL_READY)
                lup_rd_u32(&r, &slot);
        if (type == LUPD_CTL_DRAINED && want == LUPD_CTL_DRAINED_LEN) {
                lup_rd_u64(&r, &fig.precopied);
                lup_rd_u64(&r, &fig.paused_written);
                lup_rd_u64(&r, &fig.paused_us);
        }
        if (len != want || lup_rd_finish(&r) < 0 || status > 0 || (type == LUPD_CTL_DETACHED && status != 0)) {
                snprintf(what, sizeof(what), "a malformed control message (type %u, %zu bytes)", (unsigned)type,
                         len);
                worker_violation(s, idx, what);
                return -EPROTO;
        }

        switch (type) {
        case LUPD_CTL_READY:
                if (!se->restore && status == 0 && se->slot < 0) {
                        /* fleet_slots: the worker chose in the store */
                        int holder = -1;
                        if (lupd_registry_set_slot(&s->reg, idx, slot < LUP_ARENA_SLOTS ? (int)slot : -1, &holder) <
                            0) {
                                snprintf(what, sizeof(what), "READY for arena slot %u, which %s", (unsigned)slot,
                                         holder >= 0 ? "another session here holds" : "does not exist");
                                worker_violation(s, idx, what);
                                return -EPROTO;
                        }
                } else if (!se->restore && status == 0 && slot != (uint32_t)se->slot) {
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
                sup_drain_on_drained(s, idx, status, &fig);
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
                if (res > 0 && !se->ctl_eof && ctl_message(s, idx, (size_t)res, true) < 0)
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
        if (ctl_message(s, idx, (size_t)res, true) < 0)
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
                ssize_t n;
                sup_ctl_msg_reset(se);
                n = recvmsg(se->ctl_fd, &se->ctl_msg, MSG_DONTWAIT | MSG_TRUNC | MSG_CMSG_CLOEXEC);
                if (n <= 0 || ctl_message(s, idx, (size_t)n, true) < 0)
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

/* ---- reaping */

static void log_worker_exit(const struct sup *s, const struct lupd_session *se, int st)
{
        int pid = (int)se->pid;
        char how[64];

        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
                lup_info("worker %d for session %s exited", pid, se->name);
        } else if (WIFEXITED(st) && WEXITSTATUS(st) == 127) {
                lup_warn("worker %d for session %s exited with status 127 (could it execute %s?)", pid, se->name,
                         s->cfg->self_exe);
        } else {
                sup_describe_wait(st, how, sizeof(how));
                lup_warn("worker %d for session %s %s", pid, se->name, how);
        }
}

void sup_reap_workers(struct sup *s)
{
        for (;;) {
                int st, idx;
                pid_t pid = waitpid(-1, &st, WNOHANG);

                if (pid < 0 && errno == EINTR)
                        continue;
                if (pid <= 0)
                        return; /* 0: none has exited; ECHILD: no children left */
                idx = lupd_registry_find_pid(&s->reg, pid);
                if (idx < 0) {
                        lup_debug("reaped process %d, which is no worker", (int)pid);
                        continue;
                }
                struct lupd_session *se = &s->reg.s[idx];
                log_worker_exit(s, se, st);
                /* what it still held in uploads is no one's now */
                if (s->upload_acct && se->slot >= 0 && se->slot < (int)LUP_ARENA_SLOTS)
                        atomic_store(&s->upload_acct->slot[se->slot], 0);
                if (se->phase == LUPD_PHASE_DETACHED && se->in_grace &&
                    sup_now_ms() - se->detached_ms + 500 >= (uint64_t)s->cfg->detach_grace_s * 1000) {
                        s->hits.detach_grace++;
                        lup_warn("limit hit: session %s ended by the detach grace (%d s, --detach-grace): never "
                                 "checkpointed and its client left without GOODBYE; its slot is free",
                                 se->name, s->cfg->detach_grace_s);
                }
                se->reaped = true;
                se->wait_status = st;
                /* The name and slot are free from now on; the entry once
                 * the control socket is read to the end. The worker is
                 * gone, so whatever it sent is in the socket already. */
                lupd_registry_retire(&s->reg, idx);
                if (se->ctl_busy)
                        sup_cancel_op(s, ud_make(EV_CTL_RECV, (uint32_t)idx), se->ctl_fd);
                else
                        sup_ctl_finish(s, idx);
        }
}
