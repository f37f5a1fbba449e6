/* SPDX-License-Identifier: MIT */
/*
 * Pending connections: from accept until the first frame is read and
 * judged. That frame is a HELLO (the connection then leaves for a worker)
 * or, on a UNIX-socket listener from root or the daemon's own user, an
 * ADMIN request (answered by supervisor/admin.c). Anything else is closed
 * with one log line saying why (and, when its frame header was valid, a
 * refusal the client can show its user).
 *
 * Each connection is read in two steps through the ring: the 40-byte
 * header into a fixed buffer, then exactly hdr.len payload bytes into a
 * buffer allocated for them once the header has passed its checks
 * (LUPD_HELLO_MAX_PAYLOAD at most). The whole HELLO must arrive before one
 * deadline, not one per recv, so a peer trickling a byte at a time gains
 * nothing; the supervisor's tick enforces it.
 */
#include <arpa/inet.h>
#include <cuda.h> /* CUresult values for refusals only; the supervisor never loads CUDA */
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "buf.h"
#include "frame.h"
#include "log.h"
#include "supervisor/internal.h"

/* "127.0.0.1:5555", "[::1]:5555" or "unix:/run/lupine.sock (pid 12, uid 0)". */
static void describe_peer(int fd, const struct lup_endpoint *ep, char *out, size_t cap)
{
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        char host[INET6_ADDRSTRLEN];

        if (ep->family == AF_UNIX) {
                struct ucred cred;
                socklen_t clen = sizeof(cred);
                if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0)
                        snprintf(out, cap, "%s (pid %d, uid %u)", ep->text, (int)cred.pid, (unsigned)cred.uid);
                else
                        snprintf(out, cap, "%s", ep->text);
                return;
        }
        if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0) {
                snprintf(out, cap, "an unknown peer on %s", ep->text);
                return;
        }
        if (ss.ss_family == AF_INET) {
                const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
                inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
                snprintf(out, cap, "%s:%u", host, (unsigned)ntohs(in->sin_port));
        } else if (ss.ss_family == AF_INET6) {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
                inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
                snprintf(out, cap, "[%s]:%u", host, (unsigned)ntohs(in6->sin6_port));
        } else {
                snprintf(out, cap, "a peer of family %d on %s", (int)ss.ss_family, ep->text);
        }
}

/* Frees the slot, or, while a recv still targets its buffer, cancels that
 * recv and lets sup_conn_on_recv() finish the job. Logs nothing: a
 * connection handed to a worker goes this way too. */
static void conn_drop(struct sup *s, int idx)
{
        struct conn *c = &s->conns[idx];

        if (c->fd < 0)
                return;
        if (c->recv_busy) {
                if (!c->closing) {
                        c->closing = true;
                        sup_cancel_op(s, ud_make(EV_CONN_RECV, (uint32_t)idx), c->fd);
                }
                return;
        }
        c->fd = safe_close(c->fd);
        free(c->payload);
        c->payload = NULL;
        s->n_conns--;
}

/* The HELLO refusal: a reply frame with status != 0 and payload
 * u16 msg_len, msg. */
static void conn_send_refusal(const struct conn *c, uint32_t status, const char *msg)
{
        uint8_t frame[LUP_HDR_SIZE + 2 + 256];
        struct lup_wr w = lup_wr_init(frame + LUP_HDR_SIZE, sizeof(frame) - LUP_HDR_SIZE);
        struct lup_hdr h = {
                .op = c->hdr.op == LUP_OP_ADMIN ? LUP_OP_ADMIN : LUP_OP_HELLO,
                .flags = LUP_F_REPLY,
                .lane = c->hdr.lane,
                .status = status,
                .seq = c->hdr.seq,
                .ctx = 0, /* nothing of this session was executed */
        };

        lup_wr_str16(&w, msg, strnlen(msg, 256));
        if (w.err)
                return;
        h.len = (uint32_t)w.len;
        lup_hdr_encode(frame, &h);
        /* A fresh connection's send buffer is empty, so this small frame
         * goes out at once; MSG_DONTWAIT makes sure that a peer which does
         * not read can never stall the loop. Failure needs no handling: the
         * connection is closed next either way. */
        (void)send(c->fd, frame, LUP_HDR_SIZE + w.len, MSG_DONTWAIT | MSG_NOSIGNAL);
}

void sup_conn_close(struct sup *s, int idx, uint32_t refuse_status, const char *fmt, ...)
{
        struct conn *c = &s->conns[idx];
        char why[256];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(why, sizeof(why), fmt, ap);
        va_end(ap);
        if (sup_conn_log_allow(s))
                lup_info("closing connection from %s: %s", c->peer, why);
        /* Only with a valid header: the reply has to name its lane and seq. */
        if (refuse_status != 0 && c->have_hdr)
                conn_send_refusal(c, refuse_status, why);
        conn_drop(s, idx);
}

static int conn_arm_recv(struct sup *s, int idx)
{
        struct conn *c = &s->conns[idx];
        struct io_uring_sqe *sqe;
        uint8_t *dst;
        size_t want;

        if (!c->have_hdr) {
                dst = c->hdr_buf + c->got;
                want = LUP_HDR_SIZE - c->got;
        } else {
                dst = c->payload + c->got;
                want = c->hdr.len - c->got;
        }
        sqe = sup_sqe(s);
        if (!sqe)
                return -EBUSY;
        io_uring_prep_recv(sqe, c->fd, dst, want, 0);
        io_uring_sqe_set_data64(sqe, ud_make(EV_CONN_RECV, (uint32_t)idx));
        c->recv_busy = true;
        return 0;
}

void sup_conn_new(struct sup *s, const struct listener *l, int fd)
{
        char peer[sizeof(((struct conn *)0)->peer)];
        struct conn *c;
        int idx;

        if (s->stopping) {
                close(fd);
                return;
        }
        describe_peer(fd, l->ep, peer, sizeof(peer));
        if (s->n_conns >= LUPD_MAX_PENDING) {
                if (sup_conn_log_allow(s))
                        lup_info("closing connection from %s: too many connections waiting for HELLO (limit %d)",
                                 peer, LUPD_MAX_PENDING);
                close(fd);
                return;
        }
        for (idx = 0; idx < LUPD_MAX_PENDING - 1; idx++)
                if (s->conns[idx].fd < 0)
                        break;
        /* n_conns < LUPD_MAX_PENDING guarantees that slot idx is free */

        c = &s->conns[idx];
        memset(c, 0, sizeof(*c));
        c->fd = fd;
        c->deadline = sup_now_ms() + (uint64_t)s->cfg->hello_timeout_ms;
        memcpy(c->peer, peer, sizeof(peer));
        c->unix_listener = l->ep->family == AF_UNIX;
        s->n_conns++;
        if (l->ep->family != AF_UNIX)
                lup_tune_tcp(fd);
        lup_debug("connection from %s", c->peer);
        if (conn_arm_recv(s, idx) < 0)
                sup_conn_close(s, idx, 0, "submission queue full");
}

static bool token_is_zero(const uint8_t token[static LUP_TOKEN_SIZE])
{
        uint8_t any = 0;

        for (unsigned i = 0; i < LUP_TOKEN_SIZE; i++)
                any |= token[i];
        return any == 0;
}

/*
 * The first frame is complete: validate the HELLO, then route it.
 *
 *   name registered, token zero      refused "session NAME is busy": a zero
 *                                    token asks for a new session, and
 *                                    this name is taken;
 *   name registered, token non-zero  LUPD_CTL_ATTACH to its worker, which
 *                                    checks the token and answers the
 *                                    client itself (refused "busy" while
 *                                    the worker has not reported READY or
 *                                    has too many resumes in flight);
 *   name unknown, token non-zero     refused with CUDA_ERROR_DEVICE_UNAVAILABLE
 *                                    "session NAME no longer exists", so the
 *                                    client stops retrying;
 *   name unknown, token zero         a new session.
 */
static void conn_hello(struct sup *s, int idx)
{
        struct conn *c = &s->conns[idx];
        struct lup_hello hello;
        const char *why = NULL;
        int r, entry;

        r = lup_hello_decode(c->payload, c->hdr.len, &hello, &why);
        if (r < 0) {
                sup_conn_close(s, idx, CUDA_ERROR_INVALID_VALUE, "%s", why ? why : "malformed HELLO");
                return;
        }
        entry = lupd_registry_find_name(&s->reg, hello.name);
        if (entry >= 0) {
                const struct lupd_session *se = &s->reg.s[entry];
                if (token_is_zero(hello.token) || !se->ready) {
                        sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE, "session %s is busy", hello.name);
                        return;
                }
                r = sup_session_attach(s, entry, c->fd, &c->hdr, c->payload, c->peer);
                if (r == -EBUSY) {
                        sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE,
                                       "session %s is busy (resumes already in progress)", hello.name);
                        return;
                }
                if (r < 0) {
                        sup_conn_close(s, idx, CUDA_ERROR_OPERATING_SYSTEM,
                                       "cannot hand the connection to session %s: %s", hello.name, strerror(-r));
                        return;
                }
                conn_drop(s, idx); /* the worker holds the connection now */
                return;
        }
        if (!token_is_zero(hello.token)) {
                sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE, "session %s no longer exists", hello.name);
                return;
        }
        entry = lupd_registry_claim(&s->reg, hello.name);
        if (entry == -EBUSY) {
                sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE, "session %s is busy", hello.name);
                return;
        }
        if (entry == -ENOSPC) {
                sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE, "server full");
                return;
        }
        if (entry < 0) {
                sup_conn_close(s, idx, CUDA_ERROR_INVALID_VALUE, "invalid session name");
                return;
        }
        r = sup_session_start(s, entry, c->fd, &c->hdr, c->payload, c->peer);
        if (r < 0) {
                sup_conn_close(s, idx, CUDA_ERROR_OPERATING_SYSTEM, "cannot start a worker for session %s: %s",
                               hello.name, strerror(-r));
                return;
        }
        /* The worker holds the connection now; drop our copy quietly. */
        conn_drop(s, idx);
}

/* The header is complete: judge it. Returns 0 to read the payload, or
 * -EBADMSG after closing the connection. */
static int conn_check_header(struct sup *s, int idx)
{
        struct conn *c = &s->conns[idx];
        const char *why;

        if (lup_hdr_decode(c->hdr_buf, &c->hdr, &why) < 0) {
                sup_conn_close(s, idx, 0, "%s", why);
                return -EBADMSG;
        }
        c->have_hdr = true;
        if (c->hdr.op == LUP_OP_ADMIN && sup_admin_check_header(s, idx) < 0)
                return -EBADMSG;
        if (c->hdr.op != LUP_OP_HELLO && c->hdr.op != LUP_OP_ADMIN) {
                sup_conn_close(s, idx, CUDA_ERROR_INVALID_VALUE, "first frame is not HELLO (op %u)",
                               (unsigned)c->hdr.op);
                return -EBADMSG;
        }
        if ((c->hdr.flags & LUP_F_SYNC) == 0 || (c->hdr.flags & (LUP_F_REPLY | LUP_F_MORE)) != 0) {
                sup_conn_close(s, idx, CUDA_ERROR_INVALID_VALUE, "HELLO must be a synchronous request (flags 0x%x)",
                               (unsigned)c->hdr.flags);
                return -EBADMSG;
        }
        if (c->hdr.len > LUPD_HELLO_MAX_PAYLOAD) {
                sup_conn_close(s, idx, CUDA_ERROR_INVALID_VALUE, "HELLO payload exceeds the limit (%u > %u bytes)",
                               (unsigned)c->hdr.len, LUPD_HELLO_MAX_PAYLOAD);
                return -EBADMSG;
        }
        c->payload = malloc(c->hdr.len ? c->hdr.len : 1);
        if (!c->payload) {
                sup_conn_close(s, idx, CUDA_ERROR_OUT_OF_MEMORY, "out of memory");
                return -EBADMSG;
        }
        c->got = 0;
        return 0;
}

void sup_conn_on_recv(struct sup *s, int idx, int res)
{
        struct conn *c = &s->conns[idx];

        if (c->fd < 0)
                return;
        c->recv_busy = false;
        if (c->closing) {
                conn_drop(s, idx);
                return;
        }
        if (res == -EINTR || res == -EAGAIN)
                goto rearm;
        if (res < 0) {
                sup_conn_close(s, idx, 0, "receive failed: %s", strerror(-res));
                return;
        }
        if (res == 0) {
                if (!c->have_hdr && c->got == 0)
                        sup_conn_close(s, idx, 0, "connection closed before HELLO");
                else
                        sup_conn_close(s, idx, 0, "connection closed in the middle of a frame");
                return;
        }
        c->got += (size_t)res;

        if (!c->have_hdr) {
                if (c->got < LUP_HDR_SIZE)
                        goto rearm;
                if (conn_check_header(s, idx) < 0)
                        return;
        }
        if (c->got < c->hdr.len)
                goto rearm;
        if (c->hdr.op == LUP_OP_ADMIN)
                sup_admin_run(s, idx);
        else
                conn_hello(s, idx);
        return;

rearm:
        if (conn_arm_recv(s, idx) < 0)
                sup_conn_close(s, idx, 0, "submission queue full");
}
