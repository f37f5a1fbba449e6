/* SPDX-License-Identifier: MIT */
/*
 * The pending-connection slots: taking a freshly accepted connection,
 * arming the recv into its buffers, and closing it, with one rate-limited
 * log line and, when its header was valid, a refusal the client can show
 * its user.
 *
 * A flood of connections that never finish HELLO must not lock anyone out
 * (issue 15, finding 2; docs/security.md). So a newcomer is never refused
 * for want of room: when its peer (address, or uid on a UNIX socket)
 * already has --max-pending-per-peer pending, that peer's oldest pending
 * connection is closed; when --max-pending are pending in total, the
 * oldest of the peer holding the most is. A legitimate client sends its
 * HELLO at once and is gone to a worker long before it would be the
 * oldest; an idle flooder's connections are always the oldest.
 * Reading and judging the first frame is supervisor/conn.c; it and
 * everything else that ends a pending connection (the tick's HELLO
 * deadline, a drain, a shutdown, admin.c) call down to here.
 */
#define LUP_LOG_CAT LUP_LOGC_NET
#include <arpa/inet.h>
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
#include "net.h"
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

/* Who a connection is from, for --max-pending-per-peer: the address (not
 * the port) of an IP peer, the uid of a UNIX-socket peer. */
static void peer_key_of(int fd, const struct lup_endpoint *ep, uint8_t key[static 17])
{
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);

        memset(key, 0, 17);
        if (ep->family == AF_UNIX) {
                struct ucred cred;
                socklen_t clen = sizeof(cred);
                key[0] = AF_UNIX;
                if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0)
                        memcpy(key + 1, &cred.uid, sizeof(cred.uid));
                return;
        }
        if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
                return;
        key[0] = (uint8_t)ss.ss_family;
        if (ss.ss_family == AF_INET)
                memcpy(key + 1, &((const struct sockaddr_in *)&ss)->sin_addr, 4);
        else if (ss.ss_family == AF_INET6)
                memcpy(key + 1, &((const struct sockaddr_in6 *)&ss)->sin6_addr, 16);
}

static bool conn_open(const struct conn *c)
{
        return c->fd >= 0 && !c->closing;
}

/* Pending connections (not closing) from peer key, or all when key is
 * NULL; *ret_oldest is the oldest of them (-1 if none). */
static int pending_count(const struct sup *s, const uint8_t *key, int *ret_oldest)
{
        int n = 0, oldest = -1;

        for (int i = 0; i < LUPD_MAX_PENDING; i++) {
                const struct conn *c = &s->conns[i];
                if (!conn_open(c) || (key && memcmp(c->peer_key, key, sizeof(c->peer_key)) != 0))
                        continue;
                n++;
                if (oldest < 0 || c->accept_no < s->conns[oldest].accept_no)
                        oldest = i;
        }
        *ret_oldest = oldest;
        return n;
}

/* The oldest pending connection of the peer with the most pending: one
 * pass, the peers counted in a small open-addressed table. */
static int pending_victim(const struct sup *s)
{
        enum {
                BUCKETS = 2 * LUPD_MAX_PENDING
        };
        struct {
                int rep; /* a connection of this peer (its key), -1: empty */
                int n, oldest;
        } tab[BUCKETS];
        int best = -1;

        for (int b = 0; b < BUCKETS; b++)
                tab[b].rep = -1;
        for (int i = 0; i < LUPD_MAX_PENDING; i++) {
                const struct conn *c = &s->conns[i];
                uint32_t h = 2166136261u;
                if (!conn_open(c))
                        continue;
                for (size_t k = 0; k < sizeof(c->peer_key); k++)
                        h = (h ^ c->peer_key[k]) * 16777619u;
                int b = (int)(h % BUCKETS);
                while (tab[b].rep >= 0 && memcmp(s->conns[tab[b].rep].peer_key, c->peer_key, sizeof(c->peer_key)))
                        b = (b + 1) % BUCKETS;
                if (tab[b].rep < 0) {
                        tab[b].rep = tab[b].oldest = i;
                        tab[b].n = 0;
                }
                tab[b].n++;
                if (c->accept_no < s->conns[tab[b].oldest].accept_no)
                        tab[b].oldest = i;
                if (best < 0 || tab[b].n > tab[best].n)
                        best = b;
        }
        return best < 0 ? -1 : tab[best].oldest;
}

/* Makes room for a newcomer from peer key under both limits (logged,
 * counted). */
static void pending_make_room(struct sup *s, const uint8_t *key, const char *peer)
{
        int oldest, victim;

        if (s->cfg->max_pending_per_peer > 0 && pending_count(s, key, &oldest) >= s->cfg->max_pending_per_peer &&
            oldest >= 0) {
                s->hits.pending_peer++;
                sup_conn_close(s, oldest, 0,
                               "limit hit: %d connections from this peer have not finished HELLO "
                               "(--max-pending-per-peer); the oldest makes room for %s",
                               s->cfg->max_pending_per_peer, peer);
        }
        while (pending_count(s, NULL, &oldest) >= s->cfg->max_pending && (victim = pending_victim(s)) >= 0) {
                s->hits.pending_total++;
                sup_conn_close(s, victim, 0,
                               "limit hit: %d connections have not finished HELLO (--max-pending); the oldest "
                               "of the peer holding the most makes room for %s",
                               s->cfg->max_pending, peer);
        }
}

/* Frees the slot, or, while a recv still targets its buffer, cancels that
 * recv and lets sup_conn_on_recv() finish the job. Logs nothing: a
 * connection handed to a worker goes this way too. */
void sup_conn_drop(struct sup *s, int idx)
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
        lup_tls_free(c->tls, false);
        c->tls = NULL;
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
                .op = c->hdr.op == LUP_OP_ADMIN || c->hdr.op == LUP_OP_NVML ? c->hdr.op : LUP_OP_HELLO,
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
         * goes out at once; MSG_DONTWAIT (a TLS write times out after
         * 200 ms) makes sure that a peer which does not read can never
         * stall the loop. Failure needs no handling: the connection is
         * closed next either way. A client still in (or refused at) the
         * TLS handshake gets nothing. */
        if (c->tls && c->tls_done)
                (void)lup_tls_write_full(c->tls, frame, LUP_HDR_SIZE + w.len);
        else if (!c->tls)
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
        sup_conn_drop(s, idx);
}

void sup_conn_done(struct sup *s, int idx, const char *fmt, ...)
{
        if (lup_log_enabled(LUP_LOG_CAT, LUP_LOG_DEBUG)) {
                char what[256];
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(what, sizeof(what), fmt, ap);
                va_end(ap);
                lup_debug("closing connection from %s: %s", s->conns[idx].peer, what);
        }
        sup_conn_drop(s, idx);
}

void sup_conn_dst(struct conn *c, uint8_t **ret_dst, size_t *ret_want)
{
        if (!c->have_hdr) {
                *ret_dst = c->hdr_buf + c->got;
                *ret_want = LUP_HDR_SIZE - c->got;
        } else {
                *ret_dst = c->payload + c->got;
                *ret_want = c->hdr.len - c->got;
        }
}

int sup_conn_arm_recv(struct sup *s, int idx)
{
        struct conn *c = &s->conns[idx];
        struct io_uring_sqe *sqe;
        uint8_t *dst;
        size_t want;

        sup_conn_dst(c, &dst, &want);
        sqe = sup_sqe(s);
        if (!sqe)
                return -EBUSY;
        if (c->tls) /* OpenSSL reads: the ring only says when (supervisor/conn.c) */
                io_uring_prep_poll_add(sqe, c->fd, (unsigned)lup_tls_want(c->tls));
        else
                io_uring_prep_recv(sqe, c->fd, dst, want, 0);
        io_uring_sqe_set_data64(sqe, ud_make(EV_CONN_RECV, (uint32_t)idx));
        c->recv_busy = true;
        return 0;
}

void sup_conn_new(struct sup *s, const struct listener *l, int fd)
{
        char peer[sizeof(((struct conn *)0)->peer)];
        uint8_t key[sizeof(((struct conn *)0)->peer_key)];
        struct conn *c;
        int idx;

        if (s->stopping && !sup_listener_drain_admin(s, l)) {
                close(fd);
                return;
        }
        describe_peer(fd, l->ep, peer, sizeof(peer));
        peer_key_of(fd, l->ep, key);
        pending_make_room(s, key, peer);
        /* Evicted connections whose recv is still being cancelled hold
         * their slots a little longer: only then is there none. */
        if (s->n_conns >= LUPD_MAX_PENDING) {
                if (sup_conn_log_allow(s))
                        lup_info("closing connection from %s: all %d connection slots are closing", peer,
                                 LUPD_MAX_PENDING);
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
        c->adopt_entry = -1;
        c->deadline = sup_now_ms() + (uint64_t)s->cfg->hello_timeout_ms;
        c->accept_no = ++s->accept_no;
        memcpy(c->peer_key, key, sizeof(key));
        memcpy(c->peer, peer, sizeof(peer));
        c->unix_listener = l->ep->family == AF_UNIX;
        memcpy(&c->peer_uid, key + 1, sizeof(c->peer_uid));
        if (!c->unix_listener) {
                struct sockaddr_storage ss;
                socklen_t len = sizeof(ss);
                c->loopback = getpeername(fd, (struct sockaddr *)&ss, &len) == 0 && sup_addr_is_loopback(&ss);
        }
        s->n_conns++;
        if (l->ep->family != AF_UNIX)
                lup_tune_tcp(fd);
        if (l->tls) {
                c->tls = lup_tls_new(s->tls_ctx, fd, NULL);
                if (!c->tls) {
                        sup_conn_close(s, idx, 0, "cannot set up TLS for it (out of memory)");
                        return;
                }
                lup_tls_set_write_timeout(c->tls, 200);
        }
        lup_debug("connection from %s", c->peer);
        if (sup_conn_arm_recv(s, idx) < 0)
                sup_conn_close(s, idx, 0, "submission queue full");
}
