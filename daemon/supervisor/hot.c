/* SPDX-License-Identifier: MIT */
/*
 * The hot checkpoint and the zero-disconnect upgrade, supervisor side
 * (DESIGN.md, "Sessions, drain, checkpoint, restore" and "systemd"; the
 * control messages are in daemon/ctl.h; docs/sessions.md for operators).
 *
 * Drain. The checkpoint mode (--checkpoint-mode, sup_hot_drain_flags)
 * decides what each worker is told: DURABLE (the memory contents through
 * the provider), HOT (each arena chunk exported as an fd, which comes
 * back here with LUPD_CTL_HOT_MEM), or both. Memory fds are named
 *
 *     lupine-mem.<session>.<epoch>.<chunk address, hex>
 *
 * (fd names may not hold ':'; session names cannot). On SIGTERM under a
 * service manager each goes to its fd store at once, one fd per message
 * because FDNAME= names every fd of a message; FDPOLL=0, since a device
 * memory fd need not be pollable. There is no fd store without one, so a
 * SIGTERM drain then writes the durable copy whatever the mode says.
 *
 * Upgrade (SIGHUP, `lupinectl upgrade`). The same drain with HANDBACK:
 * each worker also returns its client connection (LUPD_CTL_HANDBACK),
 * named lupine-conn.<session>.<epoch>, with the part of a frame it had
 * read in a memfd, lupine-input.<session>.<epoch>. The supervisor keeps
 * all of them, then execve()s the binary now on disk (cfg->self_exe) with
 * its original command line, passing the listeners (lupine-listen) and
 * the kept fds as fds 3.. with LISTEN_PID (its own pid, which execve
 * keeps), LISTEN_FDS and LISTEN_FDNAMES: the same convention as systemd's
 * socket activation and fd store, so the new image takes them through
 * supervisor/sd_fds.c. Before draining it checks that the binary can be executed,
 * and refuses the upgrade otherwise (nothing is disturbed). If execve
 * fails anyway, the memory fds go to the fd store (under systemd, whose
 * restart then finds them) and the daemon exits 1 with a clear message:
 * in mode both (the upgrade's default) the durable copy restores every
 * session at the next start, and their clients reconnect.
 *
 * SIGTERM or SIGINT during the upgrade's drain cancels the re-exec, not
 * the drain: workers not done yet are told the flags a stop uses (GOODBYE
 * instead of the hand-back; the durable copy where there is no fd store),
 * and once every session has reported the daemon stops as a SIGTERM drain
 * would: memory fds to the fd store (under a service manager), the kept
 * connections closed (clients reconnect to the next start), exit 0 unless
 * a session was lost. Without a store, a session that had already
 * checkpointed hot only (--checkpoint-mode hot) cannot be kept: LOST.
 *
 * Restore. For each committed session, the fds named for its newest epoch
 * are taken from the inherited list and sent to its restore worker, which
 * was started with --hot (LUPD_CTL_HOT_MAP, CONN, HOT_END). They are then
 * removed from the fd store (FDSTOREREMOVE=1): the worker's imported
 * handles hold the memory now, and when its session ends the memory is
 * freed. Fds nobody claims (older epochs, sessions whose checkpoint is
 * gone) are closed and removed by lupd_sd_fds_release_unclaimed().
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "ctl.h"
#include "log.h"
#include "net.h"
#include "supervisor/sd_fds.h"
#include "supervisor/internal.h"

/* One environment string may be at most MAX_ARG_STRLEN (32 pages). */
#define FDNAMES_MAX (128u * 1024u - 64u)
/* How long a restore worker gets to take its fds off the control socket. */
#define HOT_SEND_TIMEOUT_S 30

extern char **environ;

static bool have_fd_store(void)
{
        const char *e = getenv("NOTIFY_SOCKET");

        return e && e[0];
}

void sup_raise_nofile(void)
{
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void)setrlimit(RLIMIT_NOFILE, &rl);
        }
}

/* ---- drain */

static uint32_t drain_flags_for(struct sup *s, bool upgrade)
{
        enum lupd_ckpt_mode m = s->cfg->checkpoint_mode;
        bool store = have_fd_store();

        if (upgrade) {
                switch (m) {
                case LUPD_CKPT_HOT:
                        return LUPD_DRAIN_HANDBACK | LUPD_DRAIN_HOT;
                case LUPD_CKPT_DURABLE:
                        return LUPD_DRAIN_HANDBACK | LUPD_DRAIN_DURABLE;
                case LUPD_CKPT_AUTO:
                case LUPD_CKPT_BOTH:
                        break;
                }
                return LUPD_DRAIN_HANDBACK | LUPD_DRAIN_HOT | LUPD_DRAIN_DURABLE;
        }
        switch (m) {
        case LUPD_CKPT_DURABLE:
                return LUPD_DRAIN_DURABLE;
        case LUPD_CKPT_AUTO:
                return store ? LUPD_DRAIN_HOT | LUPD_DRAIN_DURABLE : LUPD_DRAIN_DURABLE;
        case LUPD_CKPT_HOT:
        case LUPD_CKPT_BOTH:
                break;
        }
        if (!store) {
                lup_warn("--checkpoint-mode %s: no service manager fd store (NOTIFY_SOCKET is not set) to keep device "
                         "memory in across a stop; writing the durable copy instead",
                         m == LUPD_CKPT_HOT ? "hot" : "both");
                return LUPD_DRAIN_DURABLE;
        }
        return m == LUPD_CKPT_HOT ? LUPD_DRAIN_HOT : LUPD_DRAIN_HOT | LUPD_DRAIN_DURABLE;
}

uint32_t sup_hot_drain_flags(struct sup *s)
{
        return drain_flags_for(s, s->upgrade);
}

const char *sup_hot_mode_name(uint32_t flags)
{
        switch (flags & (LUPD_DRAIN_HOT | LUPD_DRAIN_DURABLE)) {
        case LUPD_DRAIN_HOT:
                return "hot";
        case LUPD_DRAIN_DURABLE:
                return "durable";
        default:
                return "hot and durable";
        }
}

int sup_worker_send_drain(struct sup *s, int idx, uint32_t flags)
{
        struct lupd_session *se = &s->reg.s[idx];
        uint8_t msg[8];

        if (se->ctl_fd < 0)
                return -EBADF;
        se->drain_flags = flags;
        lup_put32(msg, LUPD_CTL_DRAIN);
        lup_put32(msg + 4, flags);
        if (send(se->ctl_fd, msg, sizeof(msg), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
                return -errno;
        return 0;
}

static int held_add(struct sup *s, const char *name, int fd)
{
        if (s->n_held == s->cap_held) {
                size_t cap = s->cap_held ? s->cap_held * 2 : 64;
                struct sup_held *v = realloc(s->held, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                s->held = v;
                s->cap_held = cap;
        }
        s->held[s->n_held].fd = fd;
        snprintf(s->held[s->n_held].name, sizeof(s->held[0].name), "%s", name);
        s->n_held++;
        return 0;
}

/* One fd into the service manager's fd store, under its own name. */
static int fdstore_push(const char *name, int fd)
{
        char msg[LUPD_SD_FD_NAME_MAX + 64];
        int r;

        snprintf(msg, sizeof(msg), "FDSTORE=1\nFDNAME=%s\nFDPOLL=0", name);
        r = sd_pid_notify_with_fds(0, 0, msg, &fd, 1);
        if (r == 0)
                return -ENOENT; /* no NOTIFY_SOCKET */
        return r < 0 ? r : 0;
}

void sup_hot_on_mem(struct sup *s, int idx, uint64_t epoch, const uint8_t *recs, int *fds, int n)
{
        struct lupd_session *se = &s->reg.s[idx];
        int stored = 0, failed = 0, first_err = 0;

        for (int i = 0; i < n; i++) {
                uint64_t addr = lup_le64(recs + (size_t)i * LUPD_CTL_HOT_MEM_REC);
                uint64_t size = lup_le64(recs + (size_t)i * LUPD_CTL_HOT_MEM_REC + 8);
                char name[LUPD_SD_FD_NAME_MAX + 1];
                int r;

                snprintf(name, sizeof(name), "lupine-mem.%s.%" PRIu64 ".%" PRIx64, se->name, epoch, addr);
                if (s->upgrade) {
                        r = held_add(s, name, fds[i]);
                        if (r == 0)
                                fds[i] = -1;
                } else {
                        r = fdstore_push(name, fds[i]);
                }
                if (r < 0) {
                        failed++;
                        if (!first_err)
                                first_err = r;
                } else {
                        stored++;
                        se->hot_bytes += size;
                }
                if (fds[i] >= 0)
                        close(fds[i]);
        }
        se->hot_fds += (uint64_t)stored;
        if (failed)
                lup_err("session %s: %d memory fd(s) could not be %s (%s); that memory survives only in the durable "
                        "copy, if the checkpoint mode wrote one",
                        se->name, failed, s->upgrade ? "kept" : "stored in the fd store", strerror(-first_err));
}

void sup_hot_on_handback(struct sup *s, int idx, uint64_t epoch, uint64_t seq, uint32_t input_len, int conn_fd,
                         int input_fd)
{
        struct lupd_session *se = &s->reg.s[idx];
        char name[LUPD_SD_FD_NAME_MAX + 1];

        snprintf(name, sizeof(name), "lupine-conn.%s.%" PRIu64, se->name, epoch);
        if (held_add(s, name, conn_fd) < 0) {
                lup_err("session %s: out of memory keeping its connection; the client will reconnect", se->name);
                close(conn_fd);
                if (input_fd >= 0)
                        close(input_fd);
                return;
        }
        if (input_fd >= 0) {
                snprintf(name, sizeof(name), "lupine-input.%s.%" PRIu64, se->name, epoch);
                if (held_add(s, name, input_fd) < 0) {
                        /* without the bytes it had read the stream is broken */
                        s->n_held--;
                        close(conn_fd);
                        close(input_fd);
                        lup_err("session %s: out of memory keeping its connection; the client will reconnect",
                                se->name);
                        return;
                }
        }
        lup_info("session %s: connection kept for the upgrade at seq %" PRIu64 " (%u bytes of a frame in part)",
                 se->name, seq, input_len);
}

/* ---- upgrade */

int sup_upgrade_begin(struct sup *s, const char *why, char *err, size_t errcap)
{
        if (!s->checkpoints) {
                snprintf(err, errcap, "cannot upgrade: no checkpoint provider is configured (--checkpoint-dir or "
                                      "--checkpoint-provider); sessions could not be carried over");
                return -ENOTSUP;
        }
        if (s->stopping) {
                snprintf(err, errcap, "cannot upgrade: the daemon is already %s",
                         s->upgrade ? "upgrading" : "stopping");
                return -EALREADY;
        }
        if (s->restoring) {
                snprintf(err, errcap, "cannot upgrade: sessions are still being restored; try again shortly");
                return -EBUSY;
        }
        if (access(s->cfg->self_exe, X_OK) < 0) {
                int e = errno;
                snprintf(err, errcap, "cannot upgrade: %s cannot be executed: %s; the daemon keeps running as it is",
                         s->cfg->self_exe, strerror(e));
                return -e;
        }
        sup_raise_nofile();
        s->upgrade = true;
        s->upgrade_flags = drain_flags_for(s, true);
        sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=upgrading: draining sessions",
                   (unsigned long long)(lup_now_ns() / 1000u));
        lup_info("%s: upgrade: draining every session (keeping memory and connections), then re-executing %s", why,
                 s->cfg->self_exe);
        sup_drain_begin(s, why);
        return 0;
}

/* Moves fds[0..n) to 3..n+2 without FD_CLOEXEC. */
static int fds_to_listen_range(int *fds, size_t n)
{
        int *tmp = malloc((n ? n : 1) * sizeof(*tmp));

        if (!tmp)
                return -ENOMEM;
        /* first above the target range, so no move overwrites a source */
        for (size_t i = 0; i < n; i++) {
                tmp[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, (int)(3 + n));
                if (tmp[i] < 0) {
                        int e = -errno;
                        for (size_t j = 0; j < i; j++)
                                close(tmp[j]);
                        free(tmp);
                        return e;
                }
        }
        for (size_t i = 0; i < n; i++) {
                /* dup2 clears FD_CLOEXEC on the new number */
                if (dup2(tmp[i], (int)(3 + i)) < 0) {
                        int e = -errno;
                        free(tmp);
                        return e;
                }
                close(tmp[i]);
                fds[i] = (int)(3 + i);
        }
        free(tmp);
        return 0;
}

static char **build_env(size_t n, const char *names)
{
        size_t ne = 0, k = 0;
        char **env;

        while (environ && environ[ne])
                ne++;
        env = calloc(ne + 4, sizeof(*env));
        if (!env)
                return NULL;
        for (size_t i = 0; i < ne; i++) {
                if (strncmp(environ[i], "LISTEN_PID=", 11) == 0 || strncmp(environ[i], "LISTEN_FDS=", 11) == 0 ||
                    strncmp(environ[i], "LISTEN_FDNAMES=", 15) == 0)
                        continue;
                env[k++] = environ[i];
        }
        if (asprintf(&env[k++], "LISTEN_PID=%d", (int)getpid()) < 0 ||
            asprintf(&env[k++], "LISTEN_FDS=%zu", n) < 0 || asprintf(&env[k++], "LISTEN_FDNAMES=%s", names) < 0) {
                free(env);
                return NULL;
        }
        env[k] = NULL;
        return env;
}

/* execve failed: keep what can be kept, and say what happens now. */
static int upgrade_failed(struct sup *s, const char *what, int err)
{
        size_t stored = 0;

        for (size_t i = 0; i < s->n_held; i++) {
                if (strncmp(s->held[i].name, "lupine-mem.", 11) == 0 && fdstore_push(s->held[i].name, s->held[i].fd) == 0)
                        stored++;
        }
        lup_err("upgrade FAILED: %s: %s. Exiting with status 1: the client connections close and clients reconnect "
                "to the next start, which restores every session from its durable copy (written in checkpoint mode "
                "both, the upgrade's default)%s",
                what, strerror(-err),
                stored ? "; the memory fds were put in the service manager's fd store for a hot restore" : "");
        sd_notifyf(0, "STATUS=upgrade failed: %s: %s", what, strerror(-err));
        return 1;
}

int sup_upgrade_exec(struct sup *s)
{
        size_t n = 0, cap = (size_t)s->n_listeners + s->n_held, len = 0;
        int *fds = malloc((cap ? cap : 1) * sizeof(*fds));
        char *names = malloc(FDNAMES_MAX + LUPD_SD_FD_NAME_MAX + 2);
        char **env;
        int r;

        if (!fds || !names) {
                free(fds);
                free(names);
                return upgrade_failed(s, "preparing the re-exec", -ENOMEM);
        }
        for (int i = 0; i < s->n_listeners; i++) {
                if (s->listeners[i].fd < 0)
                        continue;
                fds[n++] = s->listeners[i].fd;
                len += (size_t)snprintf(names + len, FDNAMES_MAX - len, "%slupine-listen", len ? ":" : "");
        }
        for (size_t i = 0; i < s->n_held; i++) {
                if (len + strlen(s->held[i].name) + 1 >= FDNAMES_MAX) {
                        free(fds);
                        free(names);
                        return upgrade_failed(s, "too many fds to pass (LISTEN_FDNAMES would exceed 128 KiB)",
                                              -E2BIG);
                }
                fds[n++] = s->held[i].fd;
                len += (size_t)snprintf(names + len, FDNAMES_MAX - len, "%s%s", len ? ":" : "", s->held[i].name);
        }
        env = build_env(n, names);
        if (!env) {
                free(fds);
                free(names);
                return upgrade_failed(s, "preparing the re-exec", -ENOMEM);
        }
        lup_info("upgrade: re-executing %s with %d listener(s), %zu kept fd(s)", s->cfg->self_exe, s->n_listeners,
                 s->n_held);
        sd_notifyf(0, "STATUS=upgrading: re-executing %s", s->cfg->self_exe);
        /* The ring and the signalfd are close-on-exec; the blocked signal
         * mask carries over, so a signal arriving now waits for the new
         * image's signalfd. */
        r = fds_to_listen_range(fds, n);
        if (r == 0) {
                size_t k = 0;
                for (int i = 0; i < s->n_listeners; i++)
                        if (s->listeners[i].fd >= 0)
                                s->listeners[i].fd = fds[k++];
                for (size_t i = 0; i < s->n_held; i++)
                        s->held[i].fd = fds[k++];
                execve(s->cfg->self_exe, s->cfg->argv, env);
                r = -errno;
        }
        free(fds);
        free(names);
        return upgrade_failed(s, s->cfg->self_exe, r);
}

void sup_upgrade_cancel(struct sup *s, const char *why)
{
        uint32_t flags = drain_flags_for(s, false);
        int left = 0, told = 0;

        s->upgrade_stop = true;
        s->drain_flags = flags;
        /* A worker that has not begun its drain takes the newer flags; one
         * that has finishes with the upgrade's (sup_upgrade_stop sorts
         * out what that leaves). Either may come back, so what the
         * worker may send (HOT_MEM, HANDBACK) is what either allows. */
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++) {
                struct lupd_session *se = &s->reg.s[i];
                uint32_t before = se->drain_flags;

                if (se->state != LUPD_SESSION_LIVE || !se->drain_sent || se->drain_done)
                        continue;
                left++;
                if (sup_worker_send_drain(s, i, flags) == 0)
                        told++;
                se->drain_flags = before | flags;
        }
        lup_info("%s during the upgrade: the drain finishes (%d session(s) still checkpointing), then lupined stops "
                 "instead of re-executing; %d worker(s) not done yet were told to checkpoint as for a stop (%s)",
                 why, left, told, sup_hot_mode_name(flags));
        sd_notifyf(0, "STOPPING=1\nSTATUS=stopping: the upgrade was cancelled by %s; %d session(s) still draining",
                   why, left);
}

/* "lupine-mem.<session>.<epoch>.<address>" -> the length of "lupine-mem.<session>". */
static size_t mem_session_prefix(const char *name)
{
        const char *a = strrchr(name, '.');
        const char *e = a;

        while (e && e > name && *--e != '.')
                ;
        return e && e > name ? (size_t)(e - name) : strlen(name);
}

int sup_upgrade_stop(struct sup *s)
{
        bool store = have_fd_store();
        bool durable = (s->upgrade_flags & LUPD_DRAIN_DURABLE) != 0;
        size_t stored = 0, dropped = 0, conns = 0;
        int lost = 0;

        for (size_t i = 0; i < s->n_held; i++) {
                struct sup_held *h = &s->held[i];
                size_t plen;
                bool seen = false;

                if (strncmp(h->name, "lupine-mem.", 11) != 0) {
                        conns += strncmp(h->name, "lupine-conn.", 12) == 0;
                        h->fd = safe_close(h->fd);
                        continue;
                }
                if (store && fdstore_push(h->name, h->fd) == 0) {
                        stored++;
                        h->fd = safe_close(h->fd);
                        continue;
                }
                dropped++;
                h->fd = safe_close(h->fd);
                /* Without a store, only a worker that drained with the
                 * upgrade's flags sent fds (a stop's have no HOT there): its
                 * memory survives only if those flags wrote a durable copy.
                 * Every memory fd is dropped then: one verdict per session,
                 * at its first. */
                if (store || durable)
                        continue;
                plen = mem_session_prefix(h->name);
                for (size_t j = 0; j < i && !seen; j++)
                        seen = strncmp(s->held[j].name, h->name, plen) == 0 && s->held[j].name[plen] == '.';
                if (!seen) {
                        lost++;
                        lup_err("session %.*s LOST: its device memory was kept only for the re-exec (--checkpoint-mode "
                                "hot), and without a service manager's fd store nothing can keep it across a stop",
                                (int)(plen - 11), h->name + 11);
                }
        }
        s->n_held = 0;
        s->n_lost += lost;
        s->n_checkpointed -= lost;
        if (dropped && (store || durable))
                lup_err("%zu memory fd(s) could not be stored in the fd store; that memory survives only in the "
                        "durable copy, if the checkpoint mode wrote one",
                        dropped);
        lup_info("drain finished (upgrade cancelled): %d of %d session(s) checkpointed, %d lost, %d ended by "
                 "themselves, %d kept their previous checkpoint; %zu memory fd(s) put in the fd store, %zu client "
                 "connection(s) closed (their clients reconnect to the next start); not re-executing",
                 s->n_checkpointed, s->n_drain, s->n_lost, s->n_ended, s->n_kept, stored, conns);
        if (s->n_lost) {
                lup_err("lupined stopped; %d session(s) were lost", s->n_lost);
                return 1;
        }
        return 0;
}

void sup_hot_free(struct sup *s)
{
        for (size_t i = 0; i < s->n_held; i++)
                if (s->held[i].fd >= 0)
                        close(s->held[i].fd);
        free(s->held);
        s->held = NULL;
        s->n_held = s->cap_held = 0;
}

/* ---- restore */

static void mem_prefix(char *buf, size_t cap, const char *name, uint64_t epoch)
{
        snprintf(buf, cap, "lupine-mem.%s.%" PRIu64 ".", name, epoch);
}

bool sup_hot_restore_wanted(const char *name, uint64_t epoch)
{
        char p[LUPD_SD_FD_NAME_MAX + 1];

        mem_prefix(p, sizeof(p), name, epoch);
        if (lupd_sd_fds_find(p, NULL, 0) > 0)
                return true;
        snprintf(p, sizeof(p), "lupine-conn.%s.%" PRIu64, name, epoch);
        return lupd_sd_fds_find(p, NULL, 0) > 0;
}

/* The chunk address at the end of a memory fd's name: 1 to 16 hex digits. */
static int parse_addr(const char *s, uint64_t *ret)
{
        uint64_t v = 0;
        size_t n = 0;

        for (; s[n]; n++) {
                char c = s[n];
                int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
                if (d < 0 || n >= 16)
                        return -EINVAL;
                v = v << 4 | (uint64_t)d;
        }
        if (n == 0)
                return -EINVAL;
        *ret = v;
        return 0;
}

static void forget_stored(const char *name)
{
        if (have_fd_store())
                sd_notifyf(0, "FDSTOREREMOVE=1\nFDNAME=%s", name);
}

static int send_msg(int sock, const uint8_t *msg, size_t len, const int *fds, int nfds)
{
        return lup_send_fds(sock, msg, len, fds, nfds);
}

int sup_hot_restore_send(struct sup *s, int idx, uint64_t epoch)
{
        struct lupd_session *se = &s->reg.s[idx];
        char prefix[LUPD_SD_FD_NAME_MAX + 1], name[LUPD_SD_FD_NAME_MAX + 1];
        const struct lupd_fd_entry **ents = NULL;
        uint8_t msg[LUPD_CTL_HOT_MAP_FIXED + LUPD_CTL_MAX_FDS * 8];
        int fds[LUPD_CTL_MAX_FDS];
        struct timeval tv = { .tv_sec = HOT_SEND_TIMEOUT_S };
        size_t n, sent = 0, bad = 0;
        int nb = 0, r = 0, conn, input;

        mem_prefix(prefix, sizeof(prefix), se->name, epoch);
        (void)setsockopt(se->ctl_fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        n = lupd_sd_fds_find(prefix, NULL, 0);
        if (n) {
                ents = calloc(n, sizeof(*ents));
                if (!ents)
                        return -ENOMEM;
                n = lupd_sd_fds_find(prefix, ents, n);
        }
        for (size_t i = 0; i < n && r == 0; i++) {
                uint64_t addr;
                int fd;

                snprintf(name, sizeof(name), "%s", ents[i]->name);
                if (parse_addr(name + strlen(prefix), &addr) < 0) {
                        bad++;
                        continue; /* not ours to judge: released with the unclaimed */
                }
                fd = lupd_sd_fd_take(name);
                if (fd < 0)
                        continue;
                forget_stored(name);
                if (nb == 0) {
                        lup_put32(msg, LUPD_CTL_HOT_MAP);
                        lup_put64(msg + 8, epoch);
                }
                lup_put64(msg + LUPD_CTL_HOT_MAP_FIXED + (size_t)nb * 8, addr);
                fds[nb++] = fd;
                if (nb == (int)LUPD_CTL_MAX_FDS || i + 1 == n) {
                        lup_put32(msg + 4, (uint32_t)nb);
                        r = send_msg(se->ctl_fd, msg, LUPD_CTL_HOT_MAP_FIXED + (size_t)nb * 8, fds, nb);
                        for (int j = 0; j < nb; j++)
                                close(fds[j]);
                        if (r == 0)
                                sent += (size_t)nb;
                        nb = 0;
                }
        }
        if (nb > 0) { /* the last names did not parse: what was gathered still goes */
                lup_put32(msg + 4, (uint32_t)nb);
                if (r == 0)
                        r = send_msg(se->ctl_fd, msg, LUPD_CTL_HOT_MAP_FIXED + (size_t)nb * 8, fds, nb);
                for (int j = 0; j < nb; j++)
                        close(fds[j]);
                if (r == 0)
                        sent += (size_t)nb;
        }
        free(ents);
        if (bad)
                lup_warn("session %s: %zu inherited fd(s) named %s... have no chunk address; not used", se->name, bad,
                         prefix);

        snprintf(name, sizeof(name), "lupine-conn.%s.%" PRIu64, se->name, epoch);
        conn = lupd_sd_fd_take(name);
        snprintf(name, sizeof(name), "lupine-input.%s.%" PRIu64, se->name, epoch);
        input = lupd_sd_fd_take(name);
        if (conn >= 0 && r == 0) {
                struct stat st;
                int cf[2] = { conn, input };
                uint32_t in_len = 0;

                if (input >= 0 && fstat(input, &st) == 0 && st.st_size > 0 && st.st_size <= LUP_MAX_PAYLOAD + LUP_HDR_SIZE)
                        in_len = (uint32_t)st.st_size;
                lup_put32(msg, LUPD_CTL_CONN);
                lup_put32(msg + 4, in_len);
                lup_put64(msg + 8, epoch);
                r = send_msg(se->ctl_fd, msg, LUPD_CTL_CONN_LEN, cf, in_len ? 2 : 1);
                if (r == 0)
                        se->hot_conn = true;
        }
        if (conn >= 0)
                close(conn);
        if (input >= 0)
                close(input);
        if (r == 0) {
                lup_put32(msg, LUPD_CTL_HOT_END);
                lup_put32(msg + 4, (uint32_t)sent);
                lup_put64(msg + 8, epoch);
                r = send_msg(se->ctl_fd, msg, LUPD_CTL_HOT_END_LEN, NULL, 0);
        }
        if (r < 0) {
                lup_err("session %s: cannot hand its memory fds to restore worker %d: %s", se->name, (int)se->pid,
                        strerror(-r));
                return r;
        }
        lup_info("session %s: hot restore: %zu memory fd(s)%s handed to worker %d", se->name, sent,
                 se->hot_conn ? " and the client connection" : "", (int)se->pid);
        return 0;
}
