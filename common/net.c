/* SPDX-License-Identifier: MIT */
#define LUP_LOG_CAT LUP_LOGC_NET
#include "net.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int lup_endpoint_parse(const char *s, struct lup_endpoint *ret)
{
        struct lup_endpoint ep = { 0 };
        char host[256];
        const char *port;

        if (!s || strlen(s) >= sizeof(ep.text))
                return -EINVAL;
        snprintf(ep.text, sizeof(ep.text), "%s", s);

        if (strncmp(s, "unix:", 5) == 0) {
                struct sockaddr_un *un = (struct sockaddr_un *)&ep.addr;
                const char *path = s + 5;
                if (!*path || strlen(path) >= sizeof(un->sun_path))
                        return -EINVAL;
                un->sun_family = AF_UNIX;
                memcpy(un->sun_path, path, strlen(path) + 1);
                ep.family = AF_UNIX;
                ep.addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path) + 1);
                *ret = ep;
                return 0;
        }
        if (strncmp(s, "tcp://", 6) == 0) {
                s += 6;
        } else if (strncmp(s, "tls://", 6) == 0) {
                s += 6;
                ep.tls = true;
        }
        if (s[0] == '[') {
                const char *end = strchr(s, ']');
                if (!end || end[1] != ':' || (size_t)(end - s - 1) >= sizeof(host))
                        return -EINVAL;
                memcpy(host, s + 1, (size_t)(end - s - 1));
                host[end - s - 1] = 0;
                port = end + 2;
        } else {
                const char *colon = strrchr(s, ':');
                if (!colon || (size_t)(colon - s) >= sizeof(host))
                        return -EINVAL;
                memcpy(host, s, (size_t)(colon - s));
                host[colon - s] = 0;
                port = colon + 1;
        }
        char *endp;
        long pn = strtol(port, &endp, 10);
        if (!*port || *endp || pn <= 0 || pn > 65535)
                return -EINVAL;

        struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV }, *ai = NULL;
        int rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai);
        if (rc != 0 || !ai)
                return -EHOSTUNREACH;
        memcpy(&ep.addr, ai->ai_addr, ai->ai_addrlen);
        ep.addrlen = ai->ai_addrlen;
        snprintf(ep.host, sizeof(ep.host), "%s", host);
        ep.family = ai->ai_family;
        freeaddrinfo(ai);
        *ret = ep;
        return 0;
}

void lup_tune_tcp(int fd)
{
        int one = 1, idle = 60, intvl = 15, cnt = 3;
        /* best effort: these fail harmlessly on UNIX sockets */
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
        (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
        (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
        (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

int lup_set_blocking(int fd)
{
        int fl = fcntl(fd, F_GETFL);

        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
                return -errno;
        return 0;
}

int lup_connect(const struct lup_endpoint *ep)
{
        /* non-blocking, so an address that swallows SYNs costs at most
         * LUP_CONNECT_TIMEOUT_MS instead of the kernel's two minutes */
        int fd = socket(ep->family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (const struct sockaddr *)&ep->addr, ep->addrlen) < 0) {
                int e = -errno;
                if (e == -EINPROGRESS) {
                        struct pollfd pfd = { .fd = fd, .events = POLLOUT };
                        int err = 0;
                        socklen_t len = sizeof(err);
                        int n;
                        do
                                n = poll(&pfd, 1, LUP_CONNECT_TIMEOUT_MS);
                        while (n < 0 && errno == EINTR);
                        if (n == 0)
                                e = -ETIMEDOUT;
                        else if (n < 0)
                                e = -errno;
                        else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                                e = -errno;
                        else
                                e = -err;
                }
                if (e < 0) {
                        close(fd);
                        return e;
                }
        }
        (void)lup_set_blocking(fd);
        if (ep->family != AF_UNIX)
                lup_tune_tcp(fd);
        return fd;
}

/* A socket file left by an earlier run is removed; one that still answers
 * (another live daemon) or anything that is not a socket is left alone and
 * reported (-EADDRINUSE / -EEXIST). */
static int remove_stale_socket(const struct lup_endpoint *ep)
{
        const struct sockaddr_un *un = (const struct sockaddr_un *)&ep->addr;
        struct stat st;
        if (lstat(un->sun_path, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISSOCK(st.st_mode))
                return -EEXIST;
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (probe < 0)
                return -errno;
        int live = connect(probe, (const struct sockaddr *)&ep->addr, ep->addrlen) == 0;
        close(probe);
        if (live)
                return -EADDRINUSE;
        return unlink(un->sun_path) < 0 && errno != ENOENT ? -errno : 0;
}

int lup_listen(const struct lup_endpoint *ep, int backlog)
{
        int one = 1;
        int fd = socket(ep->family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        if (ep->family == AF_UNIX) {
                int rc = remove_stale_socket(ep);
                if (rc < 0) {
                        close(fd);
                        return rc;
                }
        } else {
                (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        }
        if (bind(fd, (const struct sockaddr *)&ep->addr, ep->addrlen) < 0 || listen(fd, backlog) < 0) {
                int e = -errno;
                close(fd);
                return e;
        }
        return fd;
}

int lup_read_full(int fd, void *p, size_t n)
{
        uint8_t *b = p;
        while (n) {
                ssize_t k = read(fd, b, n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        return -ECONNRESET;
                b += k;
                n -= (size_t)k;
        }
        return 0;
}

int lup_write_full(int fd, const void *p, size_t n)
{
        struct iovec iov = { .iov_base = (void *)p, .iov_len = n };
        return lup_writev_full(fd, &iov, 1);
}

void lup_iov_advance(struct iovec **iov, int *iovcnt, size_t done)
{
        while (*iovcnt > 0 && done >= (*iov)->iov_len) {
                done -= (*iov)->iov_len;
                (*iov)++;
                (*iovcnt)--;
        }
        if (*iovcnt > 0) {
                (*iov)->iov_base = (uint8_t *)(*iov)->iov_base + done;
                (*iov)->iov_len -= done;
        }
}

int lup_writev_full(int fd, struct iovec *iov, int iovcnt)
{
        while (iovcnt > 0) {
                struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)iovcnt };
                ssize_t k = sendmsg(fd, &mh, MSG_NOSIGNAL);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == ENOTSOCK) {
                                k = writev(fd, iov, iovcnt);
                                if (k < 0 && errno == EINTR)
                                        continue;
                        }
                        if (k < 0)
                                return -errno;
                }
                lup_iov_advance(&iov, &iovcnt, (size_t)k);
        }
        return 0;
}

#define LUP_MAX_PASS_FDS 253 /* SCM_MAX_FD: the hot checkpoint sends memory fds in batches */

int lup_send_fds(int sock, const void *p, size_t n, const int *fds, int nfds)
{
        union {
                char buf[CMSG_SPACE(sizeof(int) * LUP_MAX_PASS_FDS)];
                struct cmsghdr align;
        } u;
        struct iovec iov = { .iov_base = (void *)p, .iov_len = n };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        if (nfds < 0 || nfds > LUP_MAX_PASS_FDS || n == 0)
                return -EINVAL;
        if (nfds > 0) {
                memset(&u, 0, sizeof(u));
                mh.msg_control = u.buf;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
                struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
        }
        for (;;) {
                ssize_t k = sendmsg(sock, &mh, MSG_NOSIGNAL);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if ((size_t)k != n)
                        return -EMSGSIZE; /* datagram/seqpacket sockets send it whole */
                return 0;
        }
}

int lup_recv_fds(int sock, void *p, size_t n, int *fds, int max_fds, int *ret_nfds)
{
        union {
                char buf[CMSG_SPACE(sizeof(int) * LUP_MAX_PASS_FDS)];
                struct cmsghdr align;
        } u;
        struct iovec iov = { .iov_base = p, .iov_len = n };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
        ssize_t k;
        int got = 0;

        *ret_nfds = 0;
        do
                k = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
        while (k < 0 && errno == EINTR);
        if (k < 0)
                return -errno;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                int cnt = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                int tmp[LUP_MAX_PASS_FDS];
                memcpy(tmp, CMSG_DATA(c), sizeof(int) * (size_t)cnt);
                for (int i = 0; i < cnt; i++) {
                        if (got < max_fds)
                                fds[got++] = tmp[i];
                        else
                                close(tmp[i]);
                }
        }
        *ret_nfds = got;
        return (int)k;
}
