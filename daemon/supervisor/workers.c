/* SPDX-License-Identifier: MIT */
/*
 * Workers, from the supervisor's side: fork + exec one per session (for a
 * new client, or to restore a checkpoint), SHUTDOWN or SIGKILL them. What
 * they say on the control channel, and reaping them when they exit (which
 * settles what they said last), is supervisor/ctl.c's business.
 */
#define LUP_LOG_CAT LUP_LOGC_SESSION
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "ctl.h"
#include "log.h"
#include "supervisor/internal.h"
#include "upload_acct.h"


/* The worker's command line (daemon/ctl.h), built before the fork: the
 * child may only make async-signal-safe calls. */
struct worker_argv {
        char backend[32];
        char level[280];
        char ttl[48];
        char grace[48];
        char cap_s[48], cap_t[48], acct[48];
        char lanes[48];
        char ckpt[sizeof(((struct lupd_config *)0)->checkpoint_provider) + 32];
        char ckpt_config[sizeof(((struct lupd_config *)0)->checkpoint_config) + 32];
        char restore[LUP_MAX_NAME + 32];
        char tls_cert[sizeof(((struct lupd_config *)0)->tls_cert) + 16];
        char tls_key[sizeof(((struct lupd_config *)0)->tls_key) + 16];
        char peer_ca[sizeof(((struct lupd_config *)0)->peer_tls_ca) + 16];
        char beat[40];
        char host_id[LUPINE_CKPT_OWNER_MAX + 16], lease_ttl[40];
        char log_file[sizeof(((struct lupd_config *)0)->log_file) + 16];
        char *argv[32];
};

static void worker_argv_build(const struct lupd_config *cfg, const char *restore, bool hot, int acct_fd,
                              struct worker_argv *a)
{
        int n = 0;

        snprintf(a->backend, sizeof(a->backend), "--backend=%s", lupd_backend_name(cfg->backend));
        snprintf(a->level, sizeof(a->level), "--log-level=%s", cfg->log_levels);
        snprintf(a->ttl, sizeof(a->ttl), "--session-ttl=%d", cfg->session_ttl_s);
        a->argv[n++] = "lupined";
        a->argv[n++] = "--worker";
        a->argv[n++] = "--ctl-fd=3";
        a->argv[n++] = a->backend;
        a->argv[n++] = a->level;
        if (cfg->log_file[0]) {
                snprintf(a->log_file, sizeof(a->log_file), "--log-file=%s", cfg->log_file);
                a->argv[n++] = a->log_file;
        }
        /* the workers' lines go where the supervisor's go */
        if (cfg->log_target == LUPD_LOG_TARGET_JOURNAL)
                a->argv[n++] = "--log-target=journal";
        else if (cfg->log_target == LUPD_LOG_TARGET_STDERR)
                a->argv[n++] = "--log-target=stderr";
        if (cfg->checkpoint_dir[0]) {
                snprintf(a->ckpt, sizeof(a->ckpt), "--checkpoint-dir=%s", cfg->checkpoint_dir);
                a->argv[n++] = a->ckpt;
        } else if (cfg->checkpoint_provider[0]) {
                snprintf(a->ckpt, sizeof(a->ckpt), "--checkpoint-provider=%s", cfg->checkpoint_provider);
                a->argv[n++] = a->ckpt;
                if (cfg->checkpoint_config[0]) {
                        snprintf(a->ckpt_config, sizeof(a->ckpt_config), "--checkpoint-config=%s",
                                 cfg->checkpoint_config);
                        a->argv[n++] = a->ckpt_config;
                }
        }
        a->argv[n++] = a->ttl;
        snprintf(a->beat, sizeof(a->beat), "--health-interval=%d", cfg->health.interval_ms);
        a->argv[n++] = a->beat;
        snprintf(a->host_id, sizeof(a->host_id), "--host-id=%s", cfg->fleet.host_id);
        a->argv[n++] = a->host_id;
        snprintf(a->lease_ttl, sizeof(a->lease_ttl), "--lease-ttl=%d", cfg->fleet.lease_ttl_s);
        a->argv[n++] = a->lease_ttl;
        snprintf(a->grace, sizeof(a->grace), "--detach-grace=%d", cfg->detach_grace_s);
        a->argv[n++] = a->grace;
        snprintf(a->cap_s, sizeof(a->cap_s), "--upload-cap-session=%d", cfg->upload_cap_session_mib);
        a->argv[n++] = a->cap_s;
        snprintf(a->cap_t, sizeof(a->cap_t), "--upload-cap-total=%d", cfg->upload_cap_total_mib);
        a->argv[n++] = a->cap_t;
        if (acct_fd >= 0) {
                snprintf(a->acct, sizeof(a->acct), "--upload-acct-fd=%d", LUPD_UPLOAD_ACCT_FD);
                a->argv[n++] = a->acct;
        }
        if (cfg->checkpoint_lanes > 0) {
                snprintf(a->lanes, sizeof(a->lanes), "--checkpoint-lanes=%d", cfg->checkpoint_lanes);
                a->argv[n++] = a->lanes;
        }
        if (cfg->checkpoint_verify)
                a->argv[n++] = "--checkpoint-verify";
        if (cfg->tls_cert[0]) { /* for the second TLS handshake (docs/tls.md) */
                snprintf(a->tls_cert, sizeof(a->tls_cert), "--tls-cert=%s", cfg->tls_cert);
                snprintf(a->tls_key, sizeof(a->tls_key), "--tls-key=%s", cfg->tls_key);
                a->argv[n++] = a->tls_cert;
                a->argv[n++] = a->tls_key;
        }
        if (cfg->peer_tls_ca[0]) { /* copies between servers to tls:// ones (worker/peer.c) */
                snprintf(a->peer_ca, sizeof(a->peer_ca), "--peer-tls-ca=%s", cfg->peer_tls_ca);
                a->argv[n++] = a->peer_ca;
        }
        if (restore) {
                snprintf(a->restore, sizeof(a->restore), "--restore=%s", restore);
                a->argv[n++] = a->restore;
                if (hot)
                        a->argv[n++] = "--hot";
        }
        a->argv[n] = NULL;
}

/* Child side of the fork: only async-signal-safe calls from here on. */
static _Noreturn void worker_exec(const char *exe, int ctl, int acct, char *const argv[])
{
        sigset_t none;

        /* The supervisor blocks the signals it reads from its signalfd;
         * the mask survives exec, and the worker must not inherit it. */
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        /* Its own process group: a Ctrl-C on lupined's terminal reaches
         * only the supervisor, which then ends or drains the workers in
         * order instead of having them killed under their clients. */
        (void)setpgid(0, 0);
        if (ctl == 3) {
                if (fcntl(3, F_SETFD, 0) < 0) /* dup2(3, 3) would keep FD_CLOEXEC */
                        _exit(127);
        } else if (dup2(ctl, 3) < 0) {
                _exit(127);
        }
        /* acct is above 9 (sup_upload_acct_open), so fd 3 never was it */
        if (acct >= 0 && dup2(acct, LUPD_UPLOAD_ACCT_FD) < 0)
                _exit(127);
#ifdef SYS_close_range
        /* Everything else is O_CLOEXEC already; this also catches any
         * descriptor some library opened without it. */
        (void)syscall(SYS_close_range, LUPD_UPLOAD_ACCT_FD + 1u, ~0u, 0u);
#endif
        execv(exe, argv);
        _exit(127);
}

int sup_upload_acct_open(struct sup *s)
{
        int fd = memfd_create("lupined-uploads", MFD_CLOEXEC), r;
        void *p;

        s->upload_acct_fd = -1;
        if (fd < 0)
                goto fail;
        if (ftruncate(fd, sizeof(struct lupd_upload_acct)) < 0)
                goto fail_close;
        p = mmap(NULL, sizeof(struct lupd_upload_acct), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
                goto fail_close;
        /* above the fds worker_exec() moves into place */
        s->upload_acct_fd = fcntl(fd, F_DUPFD_CLOEXEC, 10);
        if (s->upload_acct_fd < 0) {
                munmap(p, sizeof(struct lupd_upload_acct));
                goto fail_close;
        }
        close(fd);
        s->upload_acct = p;
        return 0;
fail_close:
        r = -errno;
        close(fd);
        errno = -r;
fail:
        r = -errno;
        lup_warn("cannot create the upload accounting memfd: %s; --upload-cap-total is not enforced", strerror(-r));
        return r;
}

/*
 * socketpair, the first message (with client_fd attached) if there is one,
 * then fork and exec the worker. Returns 0 with se->pid and se->ctl_fd set,
 * or -errno with nothing started (the caller releases the entry).
 */
static int worker_spawn(struct sup *s, int idx, const char *restore, bool hot, const uint8_t *msg, size_t len,
                        int client_fd)
{
        struct lupd_session *se = &s->reg.s[idx];
        struct worker_argv a;
        int sv[2], r;
        pid_t pid;

        worker_argv_build(s->cfg, restore, hot, s->upload_acct_fd, &a);
        /* Both ends stay blocking: the worker expects that of its end, and
         * the supervisor only ever sends into a fresh, empty pair (ASSIGN)
         * or with MSG_DONTWAIT (everything else). */
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        /* ASSIGN goes into the pair before the fork: it waits in the
         * worker's queue, and a worker that dies early cannot make the
         * hand-off fail half-way. */
        if (msg) {
                r = lup_send_fds(sv[0], msg, len, &client_fd, 1);
                if (r < 0)
                        goto out_close_pair;
        }
        pid = fork();
        if (pid < 0) {
                r = -errno;
                goto out_close_pair;
        }
        if (pid == 0)
                worker_exec(s->cfg->self_exe, sv[1], s->upload_acct_fd, a.argv);

        close(sv[1]);
        se->pid = pid;
        se->ctl_fd = sv[0];
        sup_ctl_arm(s, idx);
        return 0;

out_close_pair:
        close(sv[0]);
        close(sv[1]);
        return r;
}

int sup_session_start(struct sup *s, int idx, int client_fd, const struct lup_hdr *hdr, const uint8_t *payload,
                      const uint8_t *ticket, const char *peer)
{
        struct lupd_session *se = &s->reg.s[idx];
        uint8_t msg[SUP_CTL_HELLO_MSG_MAX];
        size_t len;
        int r;

        uint32_t slot = se->slot >= 0 ? (uint32_t)se->slot : (uint32_t)se->slot_hint | LUPD_ASSIGN_ANY_SLOT;
        r = sup_ctl_hello_msg(msg, LUPD_CTL_ASSIGN, slot, hdr, payload, ticket, &len);
        if (r == 0)
                r = worker_spawn(s, idx, NULL, false, msg, len, client_fd);
        if (r < 0) {
                lupd_registry_release(&s->reg, idx);
                return r;
        }
        snprintf(se->client, sizeof(se->client), "%s", peer);
        lup_debug("session %s (slot %d): connection from %s handed to worker %d", se->name, se->slot, peer,
                  (int)se->pid);
        return 0;
}

int sup_session_restore(struct sup *s, int idx)
{
        struct lupd_session *se = &s->reg.s[idx];
        bool hot = sup_hot_restore_wanted(se->name, se->restore_epoch);
        se->work_started_ms = sup_now_ms();
        int r = worker_spawn(s, idx, se->name, hot, NULL, 0, -1);

        if (r < 0) {
                lupd_registry_release(&s->reg, idx);
                return r;
        }
        /* The worker reads its fds before anything else. If they cannot
         * be handed over it is killed; its READY never comes, and the
         * checkpoint stays for the next start. */
        if (hot && sup_hot_restore_send(s, idx, se->restore_epoch) < 0) {
                se->ctl_eof = true;
                sup_worker_kill(s, idx);
        }
        return 0;
}

void sup_describe_wait(int st, char *out, size_t cap)
{
        if (WIFEXITED(st))
                snprintf(out, cap, "exited with status %d", WEXITSTATUS(st));
        else if (WIFSIGNALED(st))
                snprintf(out, cap, "killed by signal %d%s", WTERMSIG(st), WCOREDUMP(st) ? " (core dumped)" : "");
        else
                snprintf(out, cap, "ended with wait status 0x%x", (unsigned)st);
}

int sup_worker_send_msg(struct sup *s, int idx, const void *msg, size_t len)
{
        struct lupd_session *se = &s->reg.s[idx];

        if (se->ctl_fd < 0)
                return -EBADF;
        /* A worker that does not read gets SIGKILL at a deadline, so a full
         * socket is not worth waiting for. */
        if (send(se->ctl_fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
                return -errno;
        return 0;
}

int sup_worker_send(struct sup *s, int idx, uint32_t type)
{
        uint8_t msg[4];

        lup_put32(msg, type);
        return sup_worker_send_msg(s, idx, msg, sizeof(msg));
}

int sup_worker_send_arg(struct sup *s, int idx, uint32_t type, uint32_t arg)
{
        uint8_t msg[8];

        lup_put32(msg, type);
        lup_put32(msg + 4, arg);
        return sup_worker_send_msg(s, idx, msg, sizeof(msg));
}

int sup_workers_log_levels(struct sup *s)
{
        uint8_t msg[4 + sizeof(s->cfg->log_levels)];
        size_t n = strlen(s->cfg->log_levels);
        int told = 0;

        lup_put32(msg, LUPD_CTL_LOG_LEVELS);
        memcpy(msg + 4, s->cfg->log_levels, n);
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++) {
                struct lupd_session *se = &s->reg.s[i];
                if (se->state != LUPD_SESSION_LIVE || se->ctl_fd < 0 || se->ctl_eof)
                        continue;
                if (send(se->ctl_fd, msg, 4 + n, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)(4 + n))
                        told++;
        }
        return told;
}

int sup_workers_shutdown(struct sup *s)
{
        int n = 0;

        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++) {
                struct lupd_session *se = &s->reg.s[i];
                int r;

                if (se->state != LUPD_SESSION_LIVE || se->ctl_fd < 0 || se->shutdown_sent)
                        continue;
                se->shutdown_sent = true;
                n++;
                r = sup_worker_send(s, i, LUPD_CTL_SHUTDOWN);
                if (r < 0 && r != -EPIPE && r != -ECONNRESET)
                        lup_warn("cannot tell worker %d to shut down: %s", (int)se->pid, strerror(-r));
        }
        return n;
}

void sup_worker_kill(struct sup *s, int idx)
{
        struct lupd_session *se = &s->reg.s[idx];

        if (se->state == LUPD_SESSION_LIVE && !se->reaped && se->pid > 0)
                (void)kill(se->pid, SIGKILL);
}

void sup_workers_kill(struct sup *s)
{
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++) {
                struct lupd_session *se = &s->reg.s[i];

                if (se->state != LUPD_SESSION_LIVE || se->pid <= 0)
                        continue;
                lup_warn("worker %d for session %s did not exit within %d s; killing it", (int)se->pid, se->name,
                         LUPD_SHUTDOWN_GRACE_MS / 1000);
                sup_worker_kill(s, i);
        }
}
