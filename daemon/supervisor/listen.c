/* SPDX-License-Identifier: MIT */
/*
 * The supervisor's listening sockets: opening them (or adopting the ones
 * systemd's socket activation or a re-exec handed us), arming accepts
 * (multishot where the kernel has it, one-shot otherwise), pausing accepts
 * while the daemon drains (the sockets stay open, so new clients wait in
 * the backlog) and closing them at exit; and the moment the daemon begins
 * to serve (accepts armed, READY=1), which restores may hold back.
 */
#define LUP_LOG_CAT LUP_LOGC_NET
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "log.h"
#include "net.h"
#include "supervisor/sd_fds.h"
#include "supervisor/internal.h"

static bool endpoint_is_local(const struct lup_endpoint *ep)
{
        return ep->family == AF_UNIX || sup_addr_is_loopback(&ep->addr);
}

void sup_listener_arm(struct sup *s, int li)
{
        struct listener *l = &s->listeners[li];
        struct io_uring_sqe *sqe;

        /* While sessions are restored, the UNIX sockets already accept, so
         * that lupinectl gets answers; a HELLO there waits (supervisor/conn.c).
         * So do those of a drain whose backlog dies with this process. */
        if (l->fd < 0 || l->armed || (s->stopping && !sup_listener_drain_admin(s, l)) ||
            (!s->serving && !s->stopping && !(s->restoring && l->ep->family == AF_UNIX)))
                return;
        sqe = sup_sqe(s);
        if (!sqe) {
                l->paused = true; /* the tick tries again */
                return;
        }
        /* No peer address buffer: one multishot op would share it between
         * all its completions. getpeername() gives it per connection. */
        if (s->multishot)
                io_uring_prep_multishot_accept(sqe, l->fd, NULL, NULL, SOCK_CLOEXEC);
        else
                io_uring_prep_accept(sqe, l->fd, NULL, NULL, SOCK_CLOEXEC);
        io_uring_sqe_set_data64(sqe, ud_make(EV_ACCEPT, (uint32_t)li));
        l->armed = true;
        l->armed_multishot = s->multishot;
        l->paused = false;
}

void sup_on_accept(struct sup *s, int li, int res, uint32_t cqe_flags)
{
        struct listener *l = &s->listeners[li];

        if (!(cqe_flags & IORING_CQE_F_MORE))
                l->armed = false;
        if (res >= 0) {
                if (l->fd < 0)
                        close(res); /* raced with shutdown */
                else
                        sup_conn_new(s, l, res);
        } else if (l->fd < 0 || res == -ECANCELED) {
                return;
        } else if (res == -EINVAL && l->armed_multishot) {
                /* Kernels before 5.19 reject the multishot flag. */
                if (s->multishot)
                        lup_info("multishot accept is not available; using one-shot accept");
                s->multishot = false;
        } else if (res == -EMFILE || res == -ENFILE || res == -ENOBUFS || res == -ENOMEM) {
                if (sup_conn_log_allow(s))
                        lup_warn("cannot accept on %s: %s; trying again shortly", l->ep->text, strerror(-res));
                l->paused = !l->armed;
                return;
        } else if (res == -ECONNABORTED || res == -EAGAIN || res == -EINTR || res == -EPROTO ||
                   res == -EPERM || res == -ENETDOWN || res == -EHOSTUNREACH || res == -ENETUNREACH) {
                lup_debug("accept on %s: %s", l->ep->text, strerror(-res));
        } else {
                lup_err("accept on %s failed: %s; trying again shortly", l->ep->text, strerror(-res));
                l->paused = !l->armed;
                return;
        }
        if (!l->armed)
                sup_listener_arm(s, li);
}

/*
 * The listener policy (issue 15, docs/security.md): every TCP listener
 * speaks TLS when --tls-cert is given. One reachable from the network
 * must have TLS and a way to authenticate (--auth-tokens or
 * --tls-client-ca), unless --insecure says otherwise. 0, or -EACCES
 * (logged): lupined refuses to start.
 */
static int listener_policy(struct sup *s, struct listener *l)
{
        const struct lup_endpoint *ep = l->ep;
        bool auth = s->cfg->auth_tokens[0] || s->cfg->tls_client_ca[0];

        l->tls = s->tls_ctx && ep->family != AF_UNIX;
        if (endpoint_is_local(ep))
                return 0;
        if (s->cfg->insecure) {
                if (!l->tls || !auth)
                        lup_warn("INSECURE (--insecure): %s is reachable from the network and serves clients "
                                 "without %s",
                                 ep->text, l->tls ? "authentication" : "TLS or authentication");
                return 0;
        }
        if (!l->tls || !auth) {
                lup_err("refusing to listen on %s: it is reachable from the network, and lupined has no %s. "
                        "Give --tls-cert and --tls-key%s, listen on a loopback address or the UNIX socket, "
                        "or pass --insecure to serve anyone who reaches it",
                        ep->text, l->tls ? "authentication" : "TLS",
                        auth ? "" : " with --auth-tokens or --tls-client-ca");
                return -EACCES;
        }
        return 0;
}

/* An endpoint describing the inherited listening socket fd, for messages
 * and for the checks that depend on the family and the address. */
static int endpoint_from_fd(int fd, struct lup_endpoint *ret)
{
        struct lup_endpoint ep = { .addrlen = sizeof(ep.addr) };
        char host[INET6_ADDRSTRLEN];

        if (getsockname(fd, (struct sockaddr *)&ep.addr, &ep.addrlen) < 0)
                return -errno;
        ep.family = ep.addr.ss_family;
        if (ep.family == AF_INET) {
                const struct sockaddr_in *in = (const struct sockaddr_in *)&ep.addr;
                inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
                snprintf(ep.text, sizeof(ep.text), "%s:%u", host, (unsigned)ntohs(in->sin_port));
        } else if (ep.family == AF_INET6) {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ep.addr;
                inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
                snprintf(ep.text, sizeof(ep.text), "[%s]:%u", host, (unsigned)ntohs(in6->sin6_port));
        } else if (ep.family == AF_UNIX) {
                const struct sockaddr_un *un = (const struct sockaddr_un *)&ep.addr;
                size_t plen = ep.addrlen > offsetof(struct sockaddr_un, sun_path)
                                      ? ep.addrlen - offsetof(struct sockaddr_un, sun_path)
                                      : 0;
                if (plen == 0)
                        snprintf(ep.text, sizeof(ep.text), "unix:(unnamed)");
                else if (un->sun_path[0] == 0) /* abstract: not NUL-terminated */
                        snprintf(ep.text, sizeof(ep.text), "unix:@%.*s", (int)(plen - 1), un->sun_path + 1);
                else
                        snprintf(ep.text, sizeof(ep.text), "unix:%.*s", (int)plen, un->sun_path);
        } else {
                return -EAFNOSUPPORT;
        }
        *ret = ep;
        return 0;
}

/* Is the inherited socket at ep one of our --listen endpoints? Then a
 * re-exec of ours passed it on, and it is ours to remove at exit. */
static bool endpoint_is_configured(const struct lupd_config *cfg, const struct lup_endpoint *ep)
{
        for (int i = 0; i < cfg->n_listen; i++) {
                const struct lup_endpoint *c = &cfg->listen[i];

                if (c->family != ep->family)
                        continue;
                if (ep->family == AF_UNIX) {
                        const struct sockaddr_un *a = (const struct sockaddr_un *)&c->addr;
                        const struct sockaddr_un *b = (const struct sockaddr_un *)&ep->addr;
                        if (a->sun_path[0] && strncmp(a->sun_path, b->sun_path, sizeof(a->sun_path)) == 0)
                                return true;
                } else if (c->addrlen == ep->addrlen && memcmp(&c->addr, &ep->addr, c->addrlen) == 0) {
                        return true;
                }
        }
        return false;
}

static int listeners_adopt(struct sup *s)
{
        size_t n = lupd_sd_listen_count();

        if (s->cfg->listen_explicit)
                lup_info("using the %zu listening socket(s) lupined was handed (LISTEN_FDS); --listen is "
                         "ignored",
                         n);
        for (size_t i = 0; i < n && i < LUPD_MAX_LISTEN; i++) {
                struct listener *l = &s->listeners[i];
                int fd = lupd_sd_listen_fd(i);
                int r = endpoint_from_fd(fd, &l->inh_ep);

                /* Blocking on purpose: older kernels complete an io_uring
                 * accept on an O_NONBLOCK socket with -EAGAIN at once
                 * instead of waiting, which would spin the loop. Nothing
                 * else in this process accepts on it, so nothing can block
                 * on it (a socket systemd also holds is only polled there). */
                if (r == 0)
                        r = lup_set_blocking(fd);
                if (r < 0) {
                        lup_err("cannot use the inherited listening socket %d (%s): %s", fd, lupd_sd_listen_name(i),
                                strerror(-r));
                        return r;
                }
                l->fd = fd;
                l->ep = &l->inh_ep;
                l->inherited = true;
                l->owned = endpoint_is_configured(s->cfg, l->ep);
                s->n_listeners = (int)i + 1;
                if (listener_policy(s, l) < 0)
                        return -EACCES;
                lup_info("listening on %s (inherited fd %d, name %s)%s", l->ep->text, fd, lupd_sd_listen_name(i),
                         l->tls ? ", TLS" : "");
        }
        return 0;
}

int sup_listeners_open(struct sup *s)
{
        const struct lupd_config *cfg = s->cfg;

        if (lupd_sd_listen_count() > 0)
                return listeners_adopt(s);
        for (int i = 0; i < cfg->n_listen; i++) {
                const struct lup_endpoint *ep = &cfg->listen[i];
                struct listener *l = &s->listeners[i];
                int fd = lup_listen(ep, SOMAXCONN);
                int r;

                if (fd < 0) {
                        lup_err("cannot listen on %s: %s", ep->text, strerror(-fd));
                        return fd;
                }
                r = lup_set_blocking(fd);
                if (r < 0) {
                        lup_err("cannot listen on %s: fcntl: %s", ep->text, strerror(-r));
                        close(fd);
                        return r;
                }
                l->fd = fd;
                l->ep = ep;
                l->owned = true;
                s->n_listeners = i + 1;
                if (listener_policy(s, l) < 0)
                        return -EACCES;
                lup_info("listening on %s%s", ep->text, l->tls ? " (TLS)" : "");
        }
        return 0;
}

/* Stops accepting and removes UNIX socket paths. shutdown() takes a TCP
 * socket out of LISTEN at once, so a restarted daemon can bind the port
 * again even while the ring still holds a reference to the socket; the
 * accept in flight then completes and sup_done() waits for that.
 * A socket that is not ours (systemd's) is neither shut down, which would
 * stop it listening for systemd too, nor unlinked: clients keep queueing
 * in its backlog for our successor. Its accept is only cancelled. */
void sup_listeners_close(struct sup *s)
{
        for (int i = 0; i < s->n_listeners; i++) {
                struct listener *l = &s->listeners[i];

                if (l->fd < 0)
                        continue;
                if (l->armed && l->owned) {
                        (void)shutdown(l->fd, SHUT_RDWR);
                        sup_cancel_op(s, ud_make(EV_ACCEPT, (uint32_t)i), l->fd);
                } else if (l->armed) {
                        struct io_uring_sqe *sqe = sup_sqe(s);
                        if (sqe) {
                                io_uring_prep_cancel64(sqe, ud_make(EV_ACCEPT, (uint32_t)i), 0);
                                io_uring_sqe_set_data64(sqe, ud_make(EV_IGNORE, 0));
                        } /* else sup_done() gives up on it at the stop deadline */
                }
                l->fd = safe_close(l->fd);
                if (l->owned && l->ep->family == AF_UNIX) {
                        const struct sockaddr_un *un = (const struct sockaddr_un *)&l->ep->addr;
                        if (unlink(un->sun_path) < 0 && errno != ENOENT)
                                lup_warn("cannot remove %s: %m", un->sun_path);
                }
        }
}

void sup_listeners_pause(struct sup *s)
{
        for (int i = 0; i < s->n_listeners; i++) {
                struct listener *l = &s->listeners[i];
                struct io_uring_sqe *sqe;

                l->paused = false;
                if (l->fd < 0 || !l->armed || sup_listener_drain_admin(s, l))
                        continue;
                /* Not sup_cancel_op(): its fallback, shutdown(), would take
                 * the socket out of LISTEN and drop the backlog. */
                sqe = sup_sqe(s);
                if (!sqe) {
                        lup_warn("cannot stop accepting on %s: submission queue full", l->ep->text);
                        continue;
                }
                io_uring_prep_cancel64(sqe, ud_make(EV_ACCEPT, (uint32_t)i), 0);
                io_uring_sqe_set_data64(sqe, ud_make(EV_IGNORE, 0));
        }
}

/* ---- serving */

void sup_serving_begin(struct sup *s)
{
        const struct lupd_config *cfg = s->cfg;

        if (s->serving || s->restoring || s->stopping)
                return;
        s->serving = true;
        for (int i = 0; i < s->n_listeners; i++)
                sup_listener_arm(s, i);
        if (s->checkpoints)
                lup_clogf(LUP_LOGC_CORE, LUP_LOG_INFO,
                          "lupined %s ready: backend %s, at most %d sessions, checkpoints via %s%s, drain "
                          "timeout %d s, session TTL %d s",
                          LUPINE_VERSION, lupd_backend_name(cfg->backend), s->reg.max_sessions,
                          cfg->checkpoint_dir[0] ? "directory " : "provider ",
                          cfg->checkpoint_dir[0] ? cfg->checkpoint_dir : cfg->checkpoint_provider, cfg->drain_timeout_s,
                          cfg->session_ttl_s);
        else
                lup_clogf(LUP_LOGC_CORE, LUP_LOG_INFO, "lupined %s ready: backend %s, at most %d sessions",
                          LUPINE_VERSION, lupd_backend_name(cfg->backend), s->reg.max_sessions);
        sd_notify(0, "READY=1");
        sup_status_update(s);
}
