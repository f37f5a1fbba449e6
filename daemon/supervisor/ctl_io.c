/* SPDX-License-Identifier: MIT */
/*
 * The control sockets' I/O (daemon/ctl.h), below what supervisor/ctl.c
 * makes of the messages: arming the recvmsg that the ring completes into
 * the session's own buffers, and handing a resuming client's connection
 * to its worker (LUPD_CTL_ATTACH). workers.c arms the socket of every
 * worker it starts; conn.c sends the ATTACH; neither needs the message
 * handling above.
 */
#define LUP_LOG_CAT LUP_LOGC_NET
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "buf.h"
#include "ctl.h"
#include "log.h"
#include "supervisor/internal.h"

_Static_assert(SUP_CTL_HELLO_MSG_MAX <= LUPD_CTL_MAX_MSG, "an ASSIGN or ATTACH message must fit one control datagram");

/* The receive buffers of a session's control socket, ready for one
 * datagram and its fds. */
void sup_ctl_msg_reset(struct lupd_session *se)
{
        se->ctl_iov.iov_base = se->ctl_buf;
        se->ctl_iov.iov_len = sizeof(se->ctl_buf);
        memset(&se->ctl_msg, 0, sizeof(se->ctl_msg));
        se->ctl_msg.msg_iov = &se->ctl_iov;
        se->ctl_msg.msg_iovlen = 1;
        se->ctl_msg.msg_control = se->ctl_cmsg.buf;
        se->ctl_msg.msg_controllen = sizeof(se->ctl_cmsg.buf);
}

void sup_ctl_arm(struct sup *s, int idx)
{
        struct lupd_session *se = &s->reg.s[idx];
        struct io_uring_sqe *sqe;

        if (se->ctl_busy || se->ctl_eof || se->ctl_fd < 0 || se->state != LUPD_SESSION_LIVE)
                return;
        sqe = sup_sqe(s);
        if (!sqe) {
                lup_warn("cannot watch the control socket of worker %d: submission queue full", (int)se->pid);
                return;
        }
        /* MSG_TRUNC makes the result the datagram's real length, so an
         * oversized message shows as such instead of being cut silently.
         * recvmsg, because HOT_MEM and HANDBACK carry fds. */
        sup_ctl_msg_reset(se);
        io_uring_prep_recvmsg(sqe, se->ctl_fd, &se->ctl_msg, MSG_TRUNC | MSG_CMSG_CLOEXEC);
        io_uring_sqe_set_data64(sqe, ud_make(EV_CTL_RECV, (uint32_t)idx));
        se->ctl_busy = true;
}

/* sendmsg with one fd attached, never blocking: a worker that does not
 * read its control socket must not stall the supervisor. */
static int send_with_fd(int sock, const void *p, size_t n, int fd)
{
        union {
                char buf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } u;
        struct iovec iov = { .iov_base = (void *)p, .iov_len = n };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
        struct cmsghdr *c;
        ssize_t k;

        memset(&u, 0, sizeof(u));
        c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
        do
                k = sendmsg(sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
        while (k < 0 && errno == EINTR);
        if (k < 0)
                return -errno;
        return (size_t)k == n ? 0 : -EMSGSIZE;
}

int sup_ctl_hello_msg(uint8_t *out, uint32_t type, uint32_t slot, const struct lup_hdr *hdr, const uint8_t *payload,
                      const uint8_t *ticket, size_t *ret_len)
{
        struct lup_wr w = lup_wr_init(out, SUP_CTL_HELLO_MSG_MAX);

        lup_wr_u32(&w, type);
        lup_wr_u32(&w, slot);
        lup_wr_u64(&w, hdr->seq);
        lup_wr_u32(&w, hdr->lane);
        lup_wr_u32(&w, hdr->len);
        lup_wr_bytes(&w, payload, hdr->len);
        if (ticket) {
                lup_wr_u32(&w, LUPD_CTL_TLS);
                lup_wr_bytes(&w, ticket, LUP_TICKET_SIZE);
        }
        *ret_len = w.len;
        return w.err;
}

/* A HELLO-shaped control message of type with fd for session se's
 * worker: 0, -EPIPE (its control socket is gone), -EBUSY (full) or -errno. */
static int hand_to_worker(struct lupd_session *se, uint32_t type, uint32_t slot, int fd, const struct lup_hdr *hdr,
                          const uint8_t *payload, const uint8_t *ticket)
{
        uint8_t msg[SUP_CTL_HELLO_MSG_MAX];
        size_t len;

        if (se->ctl_fd < 0 || se->ctl_eof)
                return -EPIPE;
        int r = sup_ctl_hello_msg(msg, type, slot, hdr, payload, ticket, &len);
        if (r < 0)
                return r;
        r = send_with_fd(se->ctl_fd, msg, len, fd);
        return r == -EAGAIN ? -EBUSY : r;
}

int sup_session_attach(struct sup *s, int idx, int client_fd, const struct lup_hdr *hdr, const uint8_t *payload,
                       const uint8_t *ticket, const char *peer)
{
        struct lupd_session *se = &s->reg.s[idx];

        if (se->attach_pending >= LUPD_MAX_ATTACH_PENDING)
                return -EBUSY;
        /* the slot is ignored by the worker */
        int r = hand_to_worker(se, LUPD_CTL_ATTACH, (uint32_t)(se->slot < 0 ? 0 : se->slot), client_fd, hdr, payload,
                               ticket);
        if (r < 0)
                return r;
        snprintf(se->attach_peer[se->attach_pending], sizeof(se->attach_peer[0]), "%s", peer);
        se->attach_pending++;
        lup_info("session %s: resume request from %s handed to worker %d", se->name, peer, (int)se->pid);
        return 0;
}

int sup_session_peer(struct sup *s, int idx, int peer_fd, const struct lup_hdr *hdr, const uint8_t *payload,
                     const uint8_t *ticket, const char *peer)
{
        struct lupd_session *se = &s->reg.s[idx];
        int r = hand_to_worker(se, LUPD_CTL_PEER, 0, peer_fd, hdr, payload, ticket);
        if (r == 0)
                lup_debug("session %s: a peer copy from %s handed to worker %d", se->name, peer, (int)se->pid);
        return r;
}
