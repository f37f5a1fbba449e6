/* SPDX-License-Identifier: MIT */
/*
 * The zero-disconnect upgrade (SIGHUP, `lupinectl upgrade`; docs/sessions.md,
 * "Hot checkpoint and zero-disconnect upgrade", and docs/operations.md,
 * "Upgrade", for operators).
 *
 * The upgrade is a drain (supervisor/drain.c) with HANDBACK: each worker
 * checkpoints and also returns its client connection, and its memory fds
 * are kept rather than stored (supervisor/fdstore.c). The supervisor then
 * execve()s the binary now on disk (cfg->self_exe) with its original
 * command line, passing the listeners (lupine-listen) and the kept fds as
 * fds 3.. with LISTEN_PID (its own pid, which execve keeps), LISTEN_FDS
 * and LISTEN_FDNAMES: the same convention as systemd's socket activation
 * and fd store, so the new image takes them through supervisor/sd_fds.c.
 * Before draining it checks that the binary can be executed, and refuses
 * the upgrade otherwise (nothing is disturbed). If execve fails anyway,
 * the memory fds go to the fd store (under systemd, whose restart then
 * finds them) and the daemon exits 1 with a clear message: in mode both
 * (the upgrade's default) the durable copy restores every session at the
 * next start, and their clients reconnect.
 *
 * SIGTERM or SIGINT during the upgrade's drain cancels the re-exec, not
 * the drain: workers not done yet are told the flags a stop uses (GOODBYE
 * instead of the hand-back; the durable copy where there is no fd store),
 * and once every session has reported the daemon stops as a SIGTERM drain
 * would: memory fds to the fd store (under a service manager), the kept
 * connections closed (clients reconnect to the next start), exit 0 unless
 * a session was lost. Without a store, a session that had already
 * checkpointed hot only (--checkpoint-mode hot) cannot be kept: LOST.
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "clock.h"
#include "ctl.h"
#include "log.h"
#include "supervisor/sd_fds.h"
#include "supervisor/internal.h"

/* One environment string may be at most MAX_ARG_STRLEN (32 pages). */
#define FDNAMES_MAX (128u * 1024u - 64u)

extern char **environ;

int sup_upgrade_begin(struct sup *s, const char *why, char *err, size_t errcap)
{
        if (!s->checkpoints) {
                snprintf(err, errcap,
                         "cannot upgrade: no checkpoint provider is configured (--checkpoint-dir or "
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
        s->totals.upgrades++;
        s->upgrade_flags = sup_drain_flags_for(s, true);
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
        if (asprintf(&env[k++], "LISTEN_PID=%d", (int)getpid()) < 0 || asprintf(&env[k++], "LISTEN_FDS=%zu", n) < 0 ||
            asprintf(&env[k++], "LISTEN_FDNAMES=%s", names) < 0) {
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
                if (strncmp(s->held[i].name, "lupine-mem.", 11) == 0 &&
                    sup_fdstore_push(s->held[i].name, s->held[i].fd) == 0)
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
                        return upgrade_failed(s, "too many fds to pass (LISTEN_FDNAMES would exceed 128 KiB)", -E2BIG);
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
        uint32_t flags = sup_drain_flags_for(s, false);
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
                 why, left, told, sup_drain_mode_name(flags));
        sd_notifyf(0, "STOPPING=1\nSTATUS=stopping: the upgrade was cancelled by %s; %d session(s) still draining", why,
                   left);
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
        bool store = sup_have_fd_store();
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
                if (store && sup_fdstore_push(h->name, h->fd) == 0) {
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
                 "themselves, %d kept their previous checkpoint, %d ended by their own error; %zu memory fd(s) put "
                 "in the fd store, %zu client connection(s) closed (their clients reconnect to the next start); not "
                 "re-executing",
                 s->n_checkpointed, s->n_drain, s->n_lost, s->n_ended, s->n_kept, s->n_own_error, stored, conns);
        if (s->n_lost) {
                lup_err("lupined stopped; %d session(s) were lost", s->n_lost);
                return 1;
        }
        return 0;
}
