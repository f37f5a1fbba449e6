/* SPDX-License-Identifier: MIT */
/*
 * The supervisor's listening sockets: opening them, arming accepts
 * (multishot where the kernel has it, one-shot otherwise), pausing accepts
 * while the daemon drains (the sockets stay open, so new clients wait in
 * the backlog) and closing them at exit.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "net.h"
#include "supervisor_int.h"

static bool endpoint_is_local(const struct lup_endpoint *ep)
{
        if (ep->family == AF_UNIX)
                return true;
        if (ep->family == AF_INET) {
                const struct sockaddr_in *in = (const struct sockaddr_in *)&ep->addr;
                return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
        }
        if (ep->family == AF_INET6) {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ep->addr;
                return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) ||
                       (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127);
        }
        return false;
}

void sup_listener_arm(struct sup *s, int li)
{
        struct listener *l = &s->listeners[li];
        struct io_uring_sqe *sqe;

        if (l->fd < 0 || l->armed || s->stopping || !s->serving)
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

int sup_listeners_open(struct sup *s)
{
        const struct lupd_config *cfg = s->cfg;

        for (int i = 0; i < cfg->n_listen; i++) {
                const struct lup_endpoint *ep = &cfg->listen[i];
                struct listener *l = &s->listeners[i];
                int fd = lup_listen(ep, SOMAXCONN);

                if (fd < 0) {
                        lup_err("cannot listen on %s: %s", ep->text, strerror(-fd));
                        return fd;
                }
                /* Blocking on purpose: older kernels complete an io_uring
                 * accept on an O_NONBLOCK socket with -EAGAIN at once
                 * instead of waiting, which would spin the loop. Nothing
                 * else ever accepts on it, so nothing can block on it. */
                int fl = fcntl(fd, F_GETFL);
                if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
                        int e = -errno;
                        lup_err("cannot listen on %s: fcntl: %s", ep->text, strerror(-e));
                        close(fd);
                        return e;
                }
                l->fd = fd;
                l->ep = ep;
                s->n_listeners = i + 1;
                lup_info("listening on %s", ep->text);
                if (!endpoint_is_local(ep)) {
                        if (cfg->insecure)
                                lup_warn("INSECURE: clients on %s are not authenticated (--insecure)", ep->text);
                        else
                                lup_warn("%s is reachable from the network and authentication is not "
                                         "implemented yet: anyone who reaches it can use this host's GPUs",
                                         ep->text);
                }
        }
        return 0;
}

/* Stops accepting and removes UNIX socket paths. shutdown() takes a TCP
 * socket out of LISTEN at once, so a restarted daemon can bind the port
 * again even while the ring still holds a reference to the socket; the
 * accept in flight then completes and sup_done() waits for that. */
void sup_listeners_close(struct sup *s)
{
        for (int i = 0; i < s->n_listeners; i++) {
                struct listener *l = &s->listeners[i];

                if (l->fd < 0)
                        continue;
                if (l->armed) {
                        (void)shutdown(l->fd, SHUT_RDWR);
                        sup_cancel_op(s, ud_make(EV_ACCEPT, (uint32_t)i), l->fd);
                }
                l->fd = safe_close(l->fd);
                if (l->ep->family == AF_UNIX) {
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
                if (l->fd < 0 || !l->armed)
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

