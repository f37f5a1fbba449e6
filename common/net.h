/* SPDX-License-Identifier: MIT */
/*
 * Sockets: endpoint parsing, blocking full reads/writes, fd passing.
 * All fds are created O_CLOEXEC. Functions return -errno on failure.
 */
#ifndef LUP_NET_H
#define LUP_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

struct lup_endpoint {
        int family;            /* AF_INET, AF_INET6 or AF_UNIX */
        struct sockaddr_storage addr;
        socklen_t addrlen;
        char text[128];        /* as given, for messages */
        bool tls;              /* "tls://HOST:PORT" */
        char host[256];        /* HOST as given (TCP): what a server certificate must name */
};

/* "HOST:PORT", "[V6]:PORT", "tcp://HOST:PORT", "tls://HOST:PORT",
 * "unix:/path". Numeric hosts or names (getaddrinfo). */
int lup_endpoint_parse(const char *s, struct lup_endpoint *ret);

#define LUP_CONNECT_TIMEOUT_MS 5000
/* A blocking socket connected to ep, within LUP_CONNECT_TIMEOUT_MS. */
int lup_connect(const struct lup_endpoint *ep);
int lup_listen(const struct lup_endpoint *ep, int backlog);
/* TCP_NODELAY plus keepalive (60 s idle, 15 s interval, 3 probes). */
void lup_tune_tcp(int fd);
/* Clears O_NONBLOCK: 0 or -errno. */
int lup_set_blocking(int fd);

/* Loop until all bytes are moved; EINTR is retried. -EPIPE / -ECONNRESET on
 * close, 0 on success. lup_read_full returns -ECONNRESET on a clean EOF. */
int lup_read_full(int fd, void *p, size_t n);
int lup_write_full(int fd, const void *p, size_t n);
int lup_writev_full(int fd, struct iovec *iov, int iovcnt);
/* Moves the iovec array and its count past `done` bytes just written. */
void lup_iov_advance(struct iovec **iov, int *iovcnt, size_t done);

/* Sends data with up to 'nfds' descriptors attached (SCM_RIGHTS). */
int lup_send_fds(int sock, const void *p, size_t n, const int *fds, int nfds);
/* Receives into p (at most n bytes) and up to max_fds descriptors; returns
 * the byte count and sets *ret_nfds. Extra descriptors are closed. */
int lup_recv_fds(int sock, void *p, size_t n, int *fds, int max_fds, int *ret_nfds);

#endif
