/* SPDX-License-Identifier: MIT */
/*
 * lupined supervisor: the event loop and what hangs directly off it.
 *
 * One io_uring serves everything the supervisor waits for:
 *   - the listening sockets (supervisor/listen.c);
 *   - pending connections, until their HELLO is judged (supervisor/conn.c);
 *   - the workers' control sockets (supervisor/ctl.c, daemon/ctl.h);
 *   - signals, through a signalfd (SIGCHLD, SIGINT, SIGTERM, SIGHUP);
 *   - one tick timer, armed only while something has a deadline or the
 *     systemd watchdog is on (WATCHDOG=1 is sent from it).
 *
 * Life cycle: take the fds inherited through LISTEN_FDS (supervisor/sd_fds.c), listen
 * (adopting systemd's sockets, or binding early, so the port is ours),
 * restore the checkpointed sessions if a provider is configured
 * (supervisor/restore.c; clients wait in the backlog meanwhile), release
 * the inherited fds restore did not claim, then arm accepts and tell
 * systemd READY=1. SIGINT/SIGTERM end it: with a provider by draining
 * (supervisor/drain.c), without one by telling each worker to SHUTDOWN.
 *
 * What a hostile peer can make us hold: --max-pending connections (and as
 * many more being closed) of at most LUP_HDR_SIZE + LUPD_HELLO_MAX_PAYLOAD
 * bytes, each for at most hello_timeout_ms and only until newer ones push
 * it out (supervisor/conn_slots.c), and at most CONN_LOG_BURST log lines
 * per window.
 * Descriptors held at once: LUPD_MAX_PENDING + LUPD_MAX_LISTEN +
 * LUP_ARENA_SLOTS control sockets + a few, well under the default
 * RLIMIT_NOFILE of 1024.
 */
#include "supervisor/supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "log.h"
#include "net.h"
#include "supervisor/sd_fds.h"
#include "supervisor/internal.h"

/* The ring holds at most one op per pending connection, listener and
 * control socket plus a few singletons (about 340), so 512 SQEs never run
 * out in practice. The CQ is larger because multishot accept can post many
 * completions between two trips round the loop. */
#define RING_SQ_ENTRIES 512u
#define RING_CQ_ENTRIES 4096u

static void begin_stop(struct sup *s, const char *why);

/* ---- the systemd watchdog ----------------------------------------------- */

/* WatchdogSec= (WATCHDOG_USEC, for our pid): WATCHDOG=1 at half that
 * interval from the tick, which then runs all the time and at least twice
 * per ping period, so pings are at most 3/4 of WatchdogSec= apart. If the
 * loop stalls, the pings stop and systemd acts. */
static void watchdog_setup(struct sup *s)
{
        uint64_t usec = 0;
        int r = sd_watchdog_enabled(0, &usec);

        if (r < 0) {
                lup_warn("WATCHDOG_USEC or WATCHDOG_PID is not valid (%s); not sending watchdog pings",
                         strerror(-r));
                return;
        }
        if (r == 0 || usec == 0)
                return;
        s->watchdog_ms = usec / 2000u;
        if (s->watchdog_ms == 0)
                s->watchdog_ms = 1;
        if (s->tick_ms > s->watchdog_ms / 2)
                s->tick_ms = s->watchdog_ms / 2 ? (unsigned)(s->watchdog_ms / 2) : 1u;
        lup_info("systemd watchdog: %llu ms; sending WATCHDOG=1 every %llu ms", (unsigned long long)(usec / 1000u),
                 (unsigned long long)s->watchdog_ms);
        sd_notify(0, "WATCHDOG=1");
        s->next_watchdog = sup_now_ms() + s->watchdog_ms;
}

static void watchdog_ping(struct sup *s, uint64_t now)
{
        if (!s->watchdog_ms || now < s->next_watchdog)
                return;
        sd_notify(0, "WATCHDOG=1");
        s->next_watchdog = now + s->watchdog_ms;
}

/* ---- signals, timer, shutdown ------------------------------------------ */

static int signals_setup(struct sup *s)
{
        sigset_t mask;

        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGHUP);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0) {
                int e = -errno;
                lup_err("cannot block signals: %s", strerror(-e));
                return e;
        }
        /* Non-blocking, and watched with a poll op rather than read through
         * the ring: on older kernels an io_uring read of a signalfd may run
         * in a kernel worker thread, which does not see our signals. */
        s->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (s->sigfd < 0) {
                int e = -errno;
                lup_err("cannot create a signalfd: %s", strerror(-e));
                return e;
        }
        return 0;
}

static void sig_arm(struct sup *s)
{
        struct io_uring_sqe *sqe;

        if (s->sig_busy)
                return;
        sqe = sup_sqe(s);
        if (!sqe)
                return; /* the next tick or completion tries again */
        io_uring_prep_poll_add(sqe, s->sigfd, POLLIN);
        io_uring_sqe_set_data64(sqe, ud_make(EV_SIGNAL, 0));
        s->sig_busy = true;
}

static void on_signal(struct sup *s, int res)
{
        struct signalfd_siginfo si;

        s->sig_busy = false;
        if (res < 0 && res != -EINTR && res != -EAGAIN && res != -ECANCELED)
                lup_warn("polling the signalfd failed: %s", strerror(-res));
        for (;;) {
                ssize_t n = read(s->sigfd, &si, sizeof(si));
                if (n != (ssize_t)sizeof(si))
                        break; /* EAGAIN: drained */
                switch (si.ssi_signo) {
                case SIGCHLD:
                        sup_reap_workers(s);
                        break;
                case SIGINT:
                        begin_stop(s, "SIGINT");
                        break;
                case SIGTERM:
                        begin_stop(s, "SIGTERM");
                        break;
                case SIGHUP: {
                        char err[512];
                        if (sup_upgrade_begin(s, "SIGHUP", err, sizeof(err)) < 0)
                                lup_err("SIGHUP: %s", err);
                        break;
                }
                default:
                        break;
                }
        }
}

static void tick_arm(struct sup *s)
{
        struct io_uring_sqe *sqe;
        bool need = s->n_conns > 0 || s->stopping || s->restoring || s->watchdog_ms || sup_metrics_enabled() ||
                    sup_health_enabled(s) || s->adopt.in_flight > 0 || s->cfg->fleet.checkpoint_interval_s > 0;

        for (int i = 0; i < s->n_listeners && !need; i++)
                need = s->listeners[i].paused;
        if (s->tick_busy || !need)
                return;
        sqe = sup_sqe(s);
        if (!sqe)
                return;
        s->tick_ts.tv_sec = s->tick_ms / 1000;
        s->tick_ts.tv_nsec = (long long)(s->tick_ms % 1000) * 1000000;
        io_uring_prep_timeout(sqe, &s->tick_ts, 0, 0);
        io_uring_sqe_set_data64(sqe, ud_make(EV_TICK, 0));
        s->tick_busy = true;
}

static void on_tick(struct sup *s)
{
        uint64_t now = sup_now_ms();

        s->tick_busy = false;
        watchdog_ping(s, now);
        sup_metrics_update(s, now, false);
        for (int i = 0; i < LUPD_MAX_PENDING; i++) {
                struct conn *c = &s->conns[i];
                if (c->fd >= 0 && !c->closing && !c->parked && now >= c->deadline)
                        sup_conn_close(s, i, 0, "no HELLO within %d ms", s->cfg->hello_timeout_ms);
        }
        for (int i = 0; i < s->n_listeners; i++)
                if (s->listeners[i].paused && !s->listeners[i].armed)
                        sup_listener_arm(s, i);
        if (!s->sig_busy)
                sig_arm(s);
        if (s->restoring)
                sup_restore_tick(s, now);
        else
                sup_health_tick(s, now);
        sup_adopt_tick(s, now);
        sup_periodic_tick(s, now);
        if (!s->stopping)
                return;

        /* Shutdown: a lost SIGCHLD must not keep us waiting forever. */
        sup_reap_workers(s);
        if (s->stop == SUP_DRAIN) {
                sup_drain_tick(s, now);
        } else if (!s->killed && now >= s->stop_deadline) {
                sup_workers_kill(s);
                s->killed = true;
                s->kill_deadline = now + LUPD_KILL_GRACE_MS;
        }
}

/* Without a checkpoint provider: every worker says GOODBYE and exits. */
static void begin_shutdown(struct sup *s, const char *why)
{
        int n;

        s->stopping = true;
        s->stop = SUP_SHUTDOWN;
        lup_info("%s: shutting down", why);
        sd_notify(0, "STOPPING=1\nSTATUS=Shutting down");

        sup_listeners_close(s);
        for (int i = 0; i < LUPD_MAX_PENDING; i++)
                if (s->conns[i].fd >= 0 && !s->conns[i].closing)
                        sup_conn_close(s, i, 0, "server shutting down");
        sup_workers_shutdown(s);
        n = lupd_registry_live(&s->reg);
        if (n)
                lup_info("waiting up to %d s for %d worker(s) to finish", LUPD_SHUTDOWN_GRACE_MS / 1000, n);
        s->stop_deadline = sup_now_ms() + LUPD_SHUTDOWN_GRACE_MS;
}

static void begin_stop(struct sup *s, const char *why)
{
        if (s->stop == SUP_DRAIN && s->upgrade && !s->upgrade_stop) {
                sup_upgrade_cancel(s, why);
                return;
        }
        if (s->stop == SUP_DRAIN) {
                int left = 0;
                for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++)
                        left += s->reg.s[i].state != LUPD_SESSION_FREE && s->reg.s[i].drain_sent &&
                                !s->reg.s[i].drain_done;
                /* Abandoning checkpoints half-way would lose sessions for
                 * an impatient keystroke; the drain deadline bounds this. */
                lup_info("%s: already draining (%d session(s) still checkpointing); carrying on%s", why, left,
                         s->upgrade ? ", then stopping" : "");
                return;
        }
        if (s->stopping) {
                lup_info("%s: already shutting down", why);
                return;
        }
        if (s->checkpoints)
                sup_drain_begin(s, why);
        else
                begin_shutdown(s, why);
}

/* ---- the loop ----------------------------------------------------------- */

static int ring_setup(struct sup *s)
{
        static const struct {
                int op;
                const char *name;
        } need[] = {
                { IORING_OP_ACCEPT, "IORING_OP_ACCEPT" },
                { IORING_OP_RECV, "IORING_OP_RECV" },
                { IORING_OP_RECVMSG, "IORING_OP_RECVMSG" },
                { IORING_OP_POLL_ADD, "IORING_OP_POLL_ADD" },
                { IORING_OP_TIMEOUT, "IORING_OP_TIMEOUT" },
                { IORING_OP_ASYNC_CANCEL, "IORING_OP_ASYNC_CANCEL" },
        };
        struct io_uring_params p = { .flags = IORING_SETUP_CQSIZE, .cq_entries = RING_CQ_ENTRIES };
        struct io_uring_probe *probe;
        int r;

        r = io_uring_queue_init_params(RING_SQ_ENTRIES, &s->ring, &p);
        if (r == -EINVAL)
                r = io_uring_queue_init(RING_SQ_ENTRIES, &s->ring, 0);
        if (r < 0) {
                lup_err("cannot set up io_uring: %s. lupined needs io_uring (Linux 5.6 or later); it may be "
                        "disabled (sysctl kernel.io_uring_disabled) or blocked by a seccomp filter, as "
                        "container runtimes often do",
                        strerror(-r));
                return r;
        }
        probe = io_uring_get_probe_ring(&s->ring);
        if (!probe) {
                lup_err("io_uring cannot report its features here (IORING_REGISTER_PROBE); lupined needs "
                        "Linux 5.6 or later");
                r = -EOPNOTSUPP;
                goto out_exit;
        }
        for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
                if (!io_uring_opcode_supported(probe, need[i].op)) {
                        lup_err("io_uring here lacks %s, which lupined needs (Linux 5.6 or later)", need[i].name);
                        r = -EOPNOTSUPP;
                }
        }
        /* The probe has no entry for IORING_ACCEPT_MULTISHOT. It came in
         * 5.19 together with IORING_OP_SOCKET, so take that as the hint;
         * sup_on_accept() still falls back if the kernel says -EINVAL. */
        s->multishot = !s->cfg->no_multishot_accept && io_uring_opcode_supported(probe, IORING_OP_SOCKET);
        io_uring_free_probe(probe);
        if (r < 0)
                goto out_exit;
        lup_debug("io_uring ready, %s accept", s->multishot ? "multishot" : "one-shot");
        return 0;

out_exit:
        io_uring_queue_exit(&s->ring);
        return r;
}

static void dispatch(struct sup *s, uint64_t ud, int res, uint32_t flags)
{
        uint32_t idx = ud_index(ud);

        switch (ud_kind(ud)) {
        case EV_ACCEPT:
                if (idx < (uint32_t)s->n_listeners)
                        sup_on_accept(s, (int)idx, res, flags);
                return;
        case EV_CONN_RECV:
                if (idx < LUPD_MAX_PENDING)
                        sup_conn_on_recv(s, (int)idx, res);
                return;
        case EV_CTL_RECV:
                if (idx < LUP_ARENA_SLOTS)
                        sup_ctl_on_recv(s, (int)idx, res);
                return;
        case EV_SIGNAL:
                on_signal(s, res);
                sig_arm(s);
                return;
        case EV_TICK:
                on_tick(s);
                return;
        case EV_IGNORE:
                return;
        }
}

static bool sup_done(struct sup *s)
{
        uint64_t now;
        bool busy = s->n_conns > 0;

        if (!s->stopping)
                return false;
        now = sup_now_ms();
        /* A reaped worker's entry stays RETIRED until its control socket
         * is read to the end (supervisor/ctl.c): its last words, a
         * HANDBACK and DRAINED, may still wait behind a cancelled recv.
         * Leaving before that lost an upgrade's connection (seen in CI). */
        int retired = lupd_registry_retired(&s->reg);
        if (lupd_registry_live(&s->reg) > 0 || retired > 0) {
                if (!s->killed || now < s->kill_deadline)
                        return false;
                lup_err("%d worker(s) did not go away even after SIGKILL (%d reaped, their messages unread); exiting "
                        "without them",
                        lupd_registry_live(&s->reg), retired);
                return true;
        }
        /* The workers are gone: the UNIX sockets that answered lupinectl
         * during the drain stop accepting, and what they accepted closes.
         * When someone follows the drain (a STATUS in the last
         * LUPD_DRAIN_WATCH_MS), its next poll gets the final verdicts
         * first, so lupinectl drain can say how it ended; bounded. */
        if (s->stop == SUP_DRAIN && !s->upgrade && !s->drain_admin_over) {
                if (!s->drain_over_ms)
                        s->drain_over_ms = now;
                if (s->drain_status_ms && now - s->drain_status_ms < LUPD_DRAIN_WATCH_MS &&
                    s->drain_status_ms < s->drain_over_ms && now - s->drain_over_ms < LUPD_DRAIN_WATCH_MS)
                        return false;
                s->drain_admin_over = true;
                sup_listeners_pause(s);
                for (int i = 0; i < LUPD_MAX_PENDING; i++)
                        if (s->conns[i].fd >= 0 && !s->conns[i].closing)
                                sup_conn_close(s, i, 0, "server stopped");
        }
        /* The workers are gone. Let the ring hand back the listening
         * sockets and connections before exiting: ring teardown is
         * asynchronous, and a socket it still holds after we exit would
         * keep its port busy for our successor. Bounded, just in case. */
        for (int i = 0; i < s->n_listeners; i++)
                busy = busy || s->listeners[i].armed;
        return !busy || now >= s->stop_deadline;
}

static int sup_run(struct sup *s)
{
        while (!sup_done(s)) {
                struct io_uring_cqe *cqe;
                int r;

                tick_arm(s);
                r = io_uring_submit_and_wait(&s->ring, 1);
                if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
                        lup_err("io_uring_submit_and_wait failed: %s", strerror(-r));
                        return 1;
                }
                while (io_uring_peek_cqe(&s->ring, &cqe) == 0) {
                        uint64_t ud = cqe->user_data;
                        int res = cqe->res;
                        uint32_t flags = cqe->flags;

                        /* Seen before dispatch: handlers may submit, and
                         * that must find the CQ slot free. */
                        io_uring_cqe_seen(&s->ring, cqe);
                        dispatch(s, ud, res, flags);
                }
        }
        return 0;
}

static void sup_teardown(struct sup *s)
{
        sup_listeners_close(s);
        for (int i = 0; i < LUPD_MAX_PENDING; i++) {
                s->conns[i].fd = safe_close(s->conns[i].fd);
                free(s->conns[i].payload);
                s->conns[i].payload = NULL;
        }
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++)
                s->reg.s[i].ctl_fd = safe_close(s->reg.s[i].ctl_fd);
}

/* --tls-cert, --tls-key, --tls-client-ca and --auth-tokens, read at every
 * start (so an upgrade's re-exec picks up new certificates and tokens):
 * 0, or -errno (logged; lupined does not start). */
static int security_setup(struct sup *s)
{
        const struct lupd_config *cfg = s->cfg;
        char err[512];

        if (sup_auth_load(s) < 0)
                return -EINVAL;
        if (!cfg->tls_cert[0])
                return 0;
        /* No kTLS and no read-ahead here: after the HELLO the socket goes
         * on to the worker's own TLS session (docs/tls.md). */
        if (lup_tls_server_ctx_new(cfg->tls_cert, cfg->tls_key, cfg->tls_client_ca, 0, &s->tls_ctx, err, sizeof(err)) <
            0) {
                lup_err("TLS: %s", err);
                return -EINVAL;
        }
        lup_info("TLS 1.3 on TCP listeners with %s%s%s", cfg->tls_cert,
                 cfg->tls_client_ca[0] ? "; client certificates required, signed by " : "", cfg->tls_client_ca);
        return 0;
}

int supervisor_main(struct lupd_config *cfg)
{
        struct sup *s;
        int r, status = 1;

        s = calloc(1, sizeof(*s));
        if (!s) {
                lup_err("out of memory");
                return 1;
        }
        s->cfg = cfg;
        s->sigfd = -1;
        s->upload_acct_fd = -1;
        s->checkpoints = lupd_have_checkpoints(cfg);
        for (int i = 0; i < LUPD_MAX_PENDING; i++)
                s->conns[i].fd = -1;
        for (int i = 0; i < LUPD_MAX_LISTEN; i++)
                s->listeners[i].fd = -1;
        lupd_registry_init(&s->reg, cfg->max_sessions);
        if (cfg->check_arena) {
                int usable = sup_arena_check(s);
                printf("arena: %d of %u slots usable\n", usable, LUP_ARENA_SLOTS);
                free(s);
                return usable == (int)LUP_ARENA_SLOTS ? 0 : 1;
        }
        if (cfg->hello_timeout_ms <= 0)
                cfg->hello_timeout_ms = LUPD_HELLO_TIMEOUT_MS;
        /* Deadlines are checked on a tick a quarter of the timeout long,
         * so a connection overstays by at most that much. */
        s->tick_ms = (unsigned)cfg->hello_timeout_ms / 4;
        if (s->tick_ms < 10)
                s->tick_ms = 10;
        if (s->tick_ms > 500)
                s->tick_ms = 500;
        /* the health watch checks every --health-interval, on the tick */
        if (cfg->health.policy != LUPD_HEALTH_OFF && s->tick_ms > (unsigned)cfg->health.interval_ms)
                s->tick_ms = (unsigned)cfg->health.interval_ms;

        /* First, before anything else can take an fd number. */
        r = lupd_sd_fds_collect();
        if (r < 0)
                goto out_free;
        r = security_setup(s);
        if (r < 0)
                goto out_free;
        (void)sup_arena_check(s); /* logged; unusable slots are never handed out */
        watchdog_setup(s);
        (void)sup_upload_acct_open(s); /* logged; the daemon serves without it */
        r = signals_setup(s);
        if (r < 0)
                goto out_free;
        r = ring_setup(s);
        if (r < 0)
                goto out_close_sigfd;
        r = sup_listeners_open(s);
        if (r < 0)
                goto out_close_ring;
        r = sup_metrics_start(s);
        if (r < 0)
                goto out_close_ring;

        sig_arm(s);
        if (s->checkpoints) {
                r = sup_restore_start(s);
                if (r < 0)
                        goto out_kill_workers;
                for (int i = 0; i < s->n_listeners && s->restoring; i++)
                        sup_listener_arm(s, i); /* the UNIX ones: lupinectl during the restore */
        }
        /* Nothing is restoring (no provider, or nothing to restore): no
         * inherited fd will be claimed. Otherwise supervisor/restore.c
         * releases them once the restore workers have all reported. */
        if (!s->restoring)
                lupd_sd_fds_release_unclaimed();
        sup_serving_begin(s); /* at once, unless restore workers are still to report */
        r = io_uring_submit(&s->ring);
        if (r < 0) {
                lup_err("io_uring_submit failed: %s", strerror(-r));
                goto out_kill_workers;
        }

        status = sup_run(s);
        if (status == 0 && s->upgrade && s->upgrade_stop) {
                status = sup_upgrade_stop(s);
        } else if (status == 0 && s->upgrade) {
                lup_info("upgrade: drain finished: %d of %d session(s) checkpointed, %d lost, %d ended by "
                         "themselves, %d kept their previous checkpoint, %d ended by their own error",
                         s->n_checkpointed, s->n_drain, s->n_lost, s->n_ended, s->n_kept, s->n_own_error);
                status = sup_upgrade_exec(s); /* returns only if it failed */
        } else if (status == 0 && s->stop == SUP_DRAIN) {
                lup_info("drain finished: %d of %d session(s) checkpointed, %d lost, %d ended by themselves, "
                         "%d kept their previous checkpoint, %d ended by their own error",
                         s->n_checkpointed, s->n_drain, s->n_lost, s->n_ended, s->n_kept, s->n_own_error);
                status = s->n_lost ? 1 : 0;
                if (status)
                        lup_err("lupined stopped; %d session(s) were lost", s->n_lost);
        }
        if (status == 0)
                lup_info("lupined stopped");
        goto out_close_ring;

out_kill_workers:
        /* Restore workers started before the failure must not outlive us. */
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++)
                sup_worker_kill(s, i);
out_close_ring:
        sup_metrics_stop();
        sup_teardown(s);
        sup_hot_free(s);
        io_uring_queue_exit(&s->ring);
out_close_sigfd:
        s->sigfd = safe_close(s->sigfd);
out_free:
        lup_tls_ctx_free(s->tls_ctx);
        sup_auth_free(s);
        free(s->ops);
        s->ops = NULL;
        free(s);
        return status;
}
