/* SPDX-License-Identifier: MIT */
/*
 * Workers, from the supervisor's side: fork + exec one per session, hand it
 * the client over the control channel (daemon/ctl.h), listen for its READY,
 * and reap it when it exits.
 *
 * The supervisor side of the control protocol permits exactly this:
 *   supervisor -> worker: one ASSIGN (with the client fd), at most one
 *                         SHUTDOWN;
 *   worker -> supervisor: one READY.
 * Anything else from a worker, or a message that does not parse, is a
 * protocol violation and the worker is killed (drop the peer, as OpenSSH's
 * monitor does): a worker runs tenant code paths and is trusted no further
 * than its own session.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "ctl.h"
#include "log.h"
#include "supervisor_int.h"

/* LUPD_CTL_ASSIGN: u32 type, u32 slot, u64 seq, u32 lane, u32 len, HELLO. */
#define CTL_ASSIGN_FIXED 24u
_Static_assert(CTL_ASSIGN_FIXED + LUPD_HELLO_MAX_PAYLOAD <= LUPD_CTL_MAX_MSG,
               "an ASSIGN message must fit one control datagram");

/* Child side of the fork: only async-signal-safe calls from here on. */
static _Noreturn void worker_exec(const char *exe, int ctl, char *const argv[])
{
        sigset_t none;

        /* The supervisor blocks the signals it reads from its signalfd;
         * the mask survives exec, and the worker must not inherit it. */
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        /* Its own process group: a Ctrl-C on lupined's terminal reaches
         * only the supervisor, which then shuts the workers down in order
         * (LUPD_CTL_SHUTDOWN, GOODBYE to the clients) instead of having
         * them killed under their clients. */
        (void)setpgid(0, 0);
        if (ctl == 3) {
                if (fcntl(3, F_SETFD, 0) < 0) /* dup2(3, 3) would keep FD_CLOEXEC */
                        _exit(127);
        } else if (dup2(ctl, 3) < 0) {
                _exit(127);
        }
#ifdef SYS_close_range
        /* Everything else is O_CLOEXEC already; this also catches any
         * descriptor some library opened without it. */
        (void)syscall(SYS_close_range, 4u, ~0u, 0u);
#endif
        execv(exe, argv);
        _exit(127);
}

/* Closes the slot's control socket and frees the slot. */
static void session_free(struct sup *s, int slot)
{
        struct lupd_session *se = &s->reg.s[slot];

        se->ctl_fd = safe_close(se->ctl_fd);
        lupd_registry_release(&s->reg, slot);
}

static void ctl_arm_recv(struct sup *s, int slot)
{
        struct lupd_session *se = &s->reg.s[slot];
        struct io_uring_sqe *sqe;

        if (se->ctl_busy || se->ctl_eof || se->ctl_fd < 0)
                return;
        sqe = sup_sqe(s);
        if (!sqe) {
                lup_warn("cannot watch the control socket of worker %d: submission queue full", (int)se->pid);
                return;
        }
        /* MSG_TRUNC makes the result the datagram's real length, so an
         * oversized message shows as such instead of being cut silently. */
        io_uring_prep_recv(sqe, se->ctl_fd, se->ctl_buf, sizeof(se->ctl_buf), MSG_TRUNC);
        io_uring_sqe_set_data64(sqe, ud_make(EV_CTL_RECV, (uint32_t)slot));
        se->ctl_busy = true;
}

/*
 * socketpair, LUPD_CTL_ASSIGN with the client fd attached, then fork and
 * exec `lupined --worker --ctl-fd=3 ...`. The caller keeps (and later
 * closes) its own copy of client_fd.
 *
 * Returns 0 with the slot LIVE (the reaper frees it when the worker ends),
 * or -errno with the slot released and no worker started.
 */
int sup_session_start(struct sup *s, int slot, int client_fd, const struct lup_hdr *hdr, const uint8_t *payload,
                      const char *peer)
{
        struct lupd_session *se = &s->reg.s[slot];
        uint8_t msg[CTL_ASSIGN_FIXED + LUPD_HELLO_MAX_PAYLOAD];
        struct lup_wr w = lup_wr_init(msg, sizeof(msg));
        char backend_arg[32], level_arg[32];
        char *argv[] = { "lupined", "--worker", "--ctl-fd=3", backend_arg, level_arg, NULL };
        int sv[2], r;
        pid_t pid;

        lup_wr_u32(&w, LUPD_CTL_ASSIGN);
        lup_wr_u32(&w, (uint32_t)slot);
        lup_wr_u64(&w, hdr->seq);
        lup_wr_u32(&w, hdr->lane);
        lup_wr_u32(&w, hdr->len);
        lup_wr_bytes(&w, payload, hdr->len);
        if (w.err) {
                r = w.err;
                goto out_release;
        }
        snprintf(backend_arg, sizeof(backend_arg), "--backend=%s", lupd_backend_name(s->cfg->backend));
        snprintf(level_arg, sizeof(level_arg), "--log-level=%s", lupd_log_level_name(s->cfg->log_level));

        /* Both ends stay blocking: the worker expects that of its end, and
         * the supervisor only ever sends into a fresh, empty pair (ASSIGN)
         * or with MSG_DONTWAIT (SHUTDOWN). */
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
                r = -errno;
                goto out_release;
        }
        /* ASSIGN goes into the pair before the fork: it waits in the
         * worker's queue, and a worker that dies early cannot make the
         * hand-off fail half-way. */
        r = lup_send_fds(sv[0], msg, w.len, &client_fd, 1);
        if (r < 0)
                goto out_close_pair;
        pid = fork();
        if (pid < 0) {
                r = -errno;
                goto out_close_pair;
        }
        if (pid == 0)
                worker_exec(s->cfg->self_exe, sv[1], argv);

        close(sv[1]);
        se->pid = pid;
        se->ctl_fd = sv[0];
        ctl_arm_recv(s, slot);
        lup_debug("session %s (slot %d): connection from %s handed to worker %d", se->name, slot, peer, (int)pid);
        return 0;

out_close_pair:
        close(sv[0]);
        close(sv[1]);
out_release:
        lupd_registry_release(&s->reg, slot);
        return r;
}

/* A worker broke the control protocol: it is killed, and the reaper frees
 * its session. */
static void worker_violation(struct sup *s, int slot, const char *what)
{
        struct lupd_session *se = &s->reg.s[slot];

        lup_err("worker %d for session %s sent %s; killing it", (int)se->pid, se->name, what);
        se->ctl_eof = true; /* listen no further */
        (void)kill(se->pid, SIGKILL);
}

void sup_ctl_on_recv(struct sup *s, int slot, int res)
{
        struct lupd_session *se = &s->reg.s[slot];
        struct lup_rd r;
        uint32_t type;
        int32_t status;

        se->ctl_busy = false;
        if (se->state == LUPD_SESSION_DRAINING) {
                session_free(s, slot); /* the reaper was waiting for this */
                return;
        }
        if (se->state != LUPD_SESSION_LIVE)
                return;
        if (res == -EINTR || res == -EAGAIN)
                goto rearm;
        if (res <= 0) {
                /* EOF or reset: the worker is on its way out, and SIGCHLD
                 * tells the rest. */
                if (res < 0 && res != -ECANCELED)
                        lup_debug("control socket of worker %d: %s", (int)se->pid, strerror(-res));
                se->ctl_eof = true;
                return;
        }
        if ((size_t)res > sizeof(se->ctl_buf)) {
                worker_violation(s, slot, "an oversized control message");
                return;
        }

        r = lup_rd_init(se->ctl_buf, (size_t)res);
        lup_rd_u32(&r, &type);
        if (type != LUPD_CTL_READY || se->ready) {
                char what[64];
                snprintf(what, sizeof(what), "an unexpected control message (type %u)", (unsigned)type);
                worker_violation(s, slot, what);
                return;
        }
        lup_rd_i32(&r, &status);
        if (lup_rd_finish(&r) < 0) {
                worker_violation(s, slot, "a malformed READY message");
                return;
        }
        se->ready = true;
        if (status == 0)
                lup_info("session %s (slot %d) served by worker %d", se->name, slot, (int)se->pid);
        else
                lup_warn("worker %d could not start session %s: %s", (int)se->pid, se->name,
                         status < 0 && status > -4096 ? strerror(-status) : "unknown error");
rearm:
        ctl_arm_recv(s, slot);
}

static void log_worker_exit(const struct sup *s, const struct lupd_session *se, int st)
{
        int pid = (int)se->pid;

        if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
                lup_info("worker %d for session %s exited", pid, se->name);
        else if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
                lup_warn("worker %d for session %s exited with status 127 (could it execute %s?)", pid, se->name,
                         s->cfg->self_exe);
        else if (WIFEXITED(st))
                lup_warn("worker %d for session %s exited with status %d", pid, se->name, WEXITSTATUS(st));
        else if (WIFSIGNALED(st))
                lup_warn("worker %d for session %s killed by signal %d%s", pid, se->name, WTERMSIG(st),
                         WCOREDUMP(st) ? " (core dumped)" : "");
        else
                lup_warn("worker %d for session %s ended with wait status 0x%x", pid, se->name, (unsigned)st);
}

void sup_reap_workers(struct sup *s)
{
        for (;;) {
                int st, slot;
                pid_t pid = waitpid(-1, &st, WNOHANG);

                if (pid < 0 && errno == EINTR)
                        continue;
                if (pid <= 0)
                        return; /* 0: none has exited; ECHILD: no children left */
                slot = lupd_registry_find_pid(&s->reg, pid);
                if (slot < 0) {
                        lup_debug("reaped process %d, which is no worker", (int)pid);
                        continue;
                }
                log_worker_exit(s, &s->reg.s[slot], st);
                /* The name is free from now on; the slot once the ring no
                 * longer reads into it. */
                lupd_registry_retire(&s->reg, slot);
                if (s->reg.s[slot].ctl_busy)
                        sup_cancel_op(s, ud_make(EV_CTL_RECV, (uint32_t)slot), s->reg.s[slot].ctl_fd);
                else
                        session_free(s, slot);
        }
}

int sup_workers_shutdown(struct sup *s)
{
        int n = 0;

        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++) {
                struct lupd_session *se = &s->reg.s[i];
                uint8_t msg[4];

                if (se->state != LUPD_SESSION_LIVE || se->ctl_fd < 0 || se->shutdown_sent)
                        continue;
                se->shutdown_sent = true;
                n++;
                lup_put32(msg, LUPD_CTL_SHUTDOWN);
                /* A worker that does not read gets SIGKILL after the grace
                 * period, so a full socket is not worth waiting for. */
                if (send(se->ctl_fd, msg, sizeof(msg), MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EPIPE &&
                    errno != ECONNRESET)
                        lup_warn("cannot tell worker %d to shut down: %s", (int)se->pid, strerror(errno));
        }
        return n;
}

void sup_workers_kill(struct sup *s)
{
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++) {
                struct lupd_session *se = &s->reg.s[i];

                if (se->state != LUPD_SESSION_LIVE || se->pid <= 0)
                        continue;
                lup_warn("worker %d for session %s did not exit within %d s; killing it", (int)se->pid, se->name,
                         LUPD_SHUTDOWN_GRACE_MS / 1000);
                (void)kill(se->pid, SIGKILL);
        }
}
