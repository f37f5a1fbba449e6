/* SPDX-License-Identifier: MIT */
/*
 * Copies between servers (lupine/wire.h, "Copies between servers"): a
 * client with several servers copies device memory of one to another, and
 * the bytes go daemon to daemon.
 *
 *   PEER_EXPECT (this session is the destination): a ticket for one copy
 *     into dst..dst+size, kept LUP_PEER_TICKET_S seconds; at most
 *     LUPW_PEER_TICKETS at a time (the oldest gives way);
 *   PEER_PUSH (this session is the source): this worker connects to the
 *     destination's lupined and sends the bytes, then answers its client;
 *   LUPD_CTL_PEER (from the supervisor): a peer connection for this
 *     session; the worker takes the bytes into its memory (lupw_peer_serve).
 *
 * Both ends run the copy on the loop's thread, between two calls: it is
 * one call of the source's client, which waits for its answer, and the
 * shim has at most one copy between servers in flight (shim/peer_copy.c),
 * so two workers never wait for each other. Each side first finishes the
 * work its context has in flight (cuCtxSynchronize), which orders the copy
 * after everything the client asked of either server before it. Every
 * read and write on a peer connection is bounded by LUP_PEER_IO_MS.
 *
 * Tickets are not checkpointed: after a restart the destination knows
 * none, the source answers LUP_PEER_RETRY, and the client asks again.
 */
#define LUP_LOG_CAT LUP_LOGC_NET
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "buf.h"
#include "clock.h"
#include "ctl.h"
#include "frame.h"
#include "log.h"
#include "net.h"
#include "transport.h"
#include "worker/session.h"


/* ---- PEER_EXPECT */

static int expect_check(struct lupw_session *s, const struct lup_hdr *h, const uint8_t *p, union lupw_ctl_args *ret,
                        CUresult *ret_early)
{
        const char *why;
        (void)ret_early;
        if (lup_peer_expect_decode(p, h->len, &ret->peer_expect, &why) < 0) {
                lupw_set_why(s, why);
                return -EBADMSG;
        }
        return lupw_check_devptr(s, ret->peer_expect.dst) < 0 ? -EBADMSG : 0;
}

static int expect_run(struct lupw_session *s, const struct lup_hdr *h, const union lupw_ctl_args *a, struct lup_wr *out,
                      CUresult *status)
{
        const struct lup_peer_expect *e = &a->peer_expect;
        if (*status == CUDA_SUCCESS)
                *status = lupw_check_range(s, e->dst, e->size, 1);
        if (*status != CUDA_SUCCESS)
                return 0;
        uint64_t now = lup_now_ns();
        struct lupw_peer_expect *slot = &s->peer.exp[0];
        for (unsigned i = 0; i < LUPW_PEER_TICKETS; i++) { /* a free or expired entry, else the oldest */
                struct lupw_peer_expect *x = &s->peer.exp[i];
                if (x->deadline_ns <= now) {
                        slot = x;
                        break;
                }
                if (x->deadline_ns < slot->deadline_ns)
                        slot = x;
        }
        struct lup_peer_ticket t = { 0 };
        if (getrandom(t.ticket, LUP_TICKET_SIZE, 0) != (ssize_t)LUP_TICKET_SIZE) {
                *status = CUDA_ERROR_OPERATING_SYSTEM;
                return 0;
        }
        snprintf(t.key, sizeof(t.key), "%s", s->name);
        *slot = (struct lupw_peer_expect){ .dst = e->dst,
                                           .size = e->size,
                                           .ctx = h->ctx,
                                           .deadline_ns = now + (uint64_t)LUP_PEER_TICKET_S * 1000000000ull };
        memcpy(slot->ticket, t.ticket, LUP_TICKET_SIZE);
        size_t n = lup_peer_ticket_encode(out->p + out->len, out->cap - out->len, &t);
        explicit_bzero(&t, sizeof(t));
        if (!n)
                out->err = -ENOBUFS;
        out->len += n;
        return 0;
}

const struct lupw_ctl_op lupw_ctl_peer_expect = {
        .name = "PEER_EXPECT",
        .sync = LUPW_SYNC_ONLY,
        .why_flag = "PEER_EXPECT sent without a reply lane",
        .need_ctx = true,
        .reply_cap = LUP_PEER_EXPECT_REPLY_MAX,
        .check = expect_check,
        .run = expect_run,
};

/* ---- PEER_PUSH: the source's side */

/* k bytes at offset off as PEER_DATA frames: header and offset, then at
 * most LUP_BULK_CHUNK bytes each. */
static int send_data(struct lupt_link *l, uint64_t off, const uint8_t *p, size_t k)
{
        for (size_t done = 0; done < k;) {
                size_t n = k - done < LUP_BULK_CHUNK ? k - done : LUP_BULK_CHUNK;
                uint8_t hb[LUP_HDR_SIZE + 8];
                lup_hdr_encode(hb, &(struct lup_hdr){ .len = (uint32_t)(8 + n), .op = LUP_OP_PEER_DATA });
                lup_put64(hb + LUP_HDR_SIZE, off + done);
                int r = lupt_write_full(l, hb, sizeof(hb));
                if (r == 0)
                        r = lupt_write_full(l, p + done, n);
                if (r < 0)
                        return r;
                done += n;
        }
        return 0;
}

/* The destination's answer after the bytes: a PEER_DATA reply frame
 * without payload. 0 with *h, -errno, or -EBADMSG with *why. */
static int read_answer(struct lupt_link *l, struct lup_hdr *h, const char **why)
{
        uint8_t hb[LUP_HDR_SIZE];
        int r = lupt_read_full(l, hb, sizeof(hb));
        if (r < 0)
                return r;
        if (lup_hdr_decode(hb, h, why) < 0)
                return -EBADMSG;
        if (h->op != LUP_OP_PEER_DATA || !(h->flags & LUP_F_REPLY) || h->len) {
                *why = "unexpected frame";
                return -EBADMSG;
        }
        return 0;
}

/* The copy's outcome (LUP_PEER_RETRY: try again; LUP_PEER_DONE with a
 * status: for good), with a message cut to what the answer carries. */
__attribute__((format(printf, 4, 5))) static void outcome(struct lup_peer_result *res, uint32_t o, CUresult status,
                                                          const char *fmt, ...)
{
        va_list ap;
        res->outcome = o;
        res->status = (uint32_t)status;
        va_start(ap, fmt);
        vsnprintf(res->msg, sizeof(res->msg), fmt, ap);
        va_end(ap);
}

/* The TLS settings of this worker's copies to tls:// servers, made at
 * first use: --peer-tls-ca (else the system's CAs) checks the other
 * lupined, and this one's --tls-cert, if it has one, is its client
 * certificate there. */
static const struct lupt_config *peer_tls(struct lupw_session *s, char *err, size_t errcap)
{
        struct lupt_config *c = s->peer.tls;
        const struct lupd_config *cfg = s->cfg;
        if (c)
                return c;
        c = calloc(1, sizeof(*c));
        if (!c) {
                snprintf(err, errcap, "out of memory");
                return NULL;
        }
        const char *ca = cfg->peer_tls_ca[0] ? cfg->peer_tls_ca : NULL;
        const char *cert = cfg->tls_cert[0] ? cfg->tls_cert : NULL, *key = cert ? cfg->tls_key : NULL;
        char why[400];
        if (lup_tls_client_ctx_new(ca, cert, key, LUP_TLS_READ_AHEAD, &c->first, why, sizeof(why)) < 0 ||
            lup_tls_client_ctx_new(ca, cert, key, LUP_TLS_READ_AHEAD | LUP_TLS_RECORDS, &c->second, why, sizeof(why)) <
                    0) {
                snprintf(err, errcap, "TLS client setup (--peer-tls-ca, --tls-cert): %.150s", why);
                lup_tls_ctx_free(c->first);
                free(c);
                return NULL;
        }
        s->peer.tls = c;
        return c;
}

/* Connects to the destination and has its HELLO answered: 0 with *l, or
 * -1 with res saying why to try again (or res->status, a refusal for good:
 * the destination could not set up TLS). */
static int push_connect(struct lupw_session *s, const struct lup_peer_push *pp, struct lupt_link *l,
                        struct lup_peer_result *res)
{
        static const struct lupt_config plain;
        struct lup_endpoint ep;
        char err[LUP_PEER_MSG_MAX];
        if (lup_endpoint_parse(pp->endpoint, &ep) < 0) {
                outcome(res, LUP_PEER_RETRY, CUDA_SUCCESS, "%s: not an endpoint", pp->endpoint);
                return -1;
        }
        const struct lupt_config *c = ep.tls ? peer_tls(s, err, sizeof(err)) : &plain;
        if (!c) {
                outcome(res, LUP_PEER_RETRY, CUDA_SUCCESS, "%s: %s", pp->endpoint, err);
                return -1;
        }
        int r = lupt_connect(c, &ep, LUP_PEER_IO_MS, l, err, sizeof(err));
        if (r == -EPROTO) { /* TLS (its certificate): trying again cannot mend it */
                outcome(res, LUP_PEER_DONE, CUDA_ERROR_NOT_PERMITTED, "%s", err);
                return -1;
        }
        if (r < 0) {
                outcome(res, LUP_PEER_RETRY, CUDA_SUCCESS, "cannot connect: %s", err);
                return -1;
        }
        struct lup_hello hello = { .proto_version = LUP_PROTO_VERSION, .flags = LUP_HELLO_PEER };
        snprintf(hello.name, sizeof(hello.name), "%s", pp->t.key);
        memcpy(hello.peer_ticket, pp->t.ticket, LUP_TICKET_SIZE);
        uint8_t frame[LUP_HDR_SIZE + 256];
        size_t len;
        r = lup_hello_encode(frame + LUP_HDR_SIZE, sizeof(frame) - LUP_HDR_SIZE, &hello, &len);
        explicit_bzero(&hello, sizeof(hello));
        struct lup_hdr h = { .len = (uint32_t)len, .op = LUP_OP_HELLO, .flags = LUP_F_SYNC, .seq = s->last_seq };
        uint8_t *payload = NULL;
        err[0] = 0;
        if (r == 0) {
                lup_hdr_encode(frame, &h);
                r = lupt_hello(c, &ep, l, frame, LUP_HDR_SIZE + len, LUP_PEER_IO_MS, &h, &payload, err, sizeof(err));
        }
        explicit_bzero(frame, sizeof(frame));
        if (r == 0 && h.status != 0) {
                struct lup_rd rd = lup_rd_init(payload, h.len);
                const char *m = "";
                size_t mlen = 0;
                (void)lup_rd_str16(&rd, 400, &m, &mlen);
                outcome(res, LUP_PEER_RETRY, CUDA_SUCCESS, "%s refused the copy: %.*s", pp->endpoint, (int)mlen, m);
        } else if (r < 0) { /* B's certificate passed the first handshake: the second's failure is not for good */
                outcome(res, LUP_PEER_RETRY, CUDA_SUCCESS, "%s did not answer the copy: %s", pp->endpoint,
                        err[0] ? err : strerror(-r));
        }
        free(payload);
        if (r < 0 || h.status != 0) {
                lupt_close(l, true);
                return -1;
        }
        lupt_set_timeout(l, LUP_PEER_IO_MS);
        return 0;
}

/* Staging buffer i (of 2) of LUP_PEER_CHUNK bytes, made at first use and
 * kept for the session: registered with the driver (portable, so for every
 * context) when it lets us, so that the copies to and from it run while
 * the network moves the other. NULL if out of memory. */
static uint8_t *peer_stage(struct lupw_session *s, int i)
{
        struct lupw_peer *p = &s->peer;
        if (!p->stage[i]) {
                p->stage[i] = aligned_alloc(4096, LUP_PEER_CHUNK);
                if (p->stage[i] && s->be.fn.cuMemHostRegister_v2 &&
                    s->be.fn.cuMemHostRegister_v2(p->stage[i], LUP_PEER_CHUNK, CU_MEMHOSTREGISTER_PORTABLE) !=
                            CUDA_SUCCESS)
                        lup_debug("session %s: peer staging not pinned; copies wait on the CPU", s->name);
        }
        return p->stage[i];
}

/* Starts the device->host copy of the chunk at *next into buf. */
static CUresult fetch(struct lupw_session *s, CUstream st, uint8_t *buf, uint64_t src, uint64_t size, uint64_t *next,
                      size_t *ret_len)
{
        size_t k = size - *next < LUP_PEER_CHUNK ? (size_t)(size - *next) : LUP_PEER_CHUNK;
        CUresult r = s->be.fn.cuMemcpyDtoHAsync_v2(buf, src + *next, k, st);
        *ret_len = k;
        *next += k;
        return r;
}

/* The bytes, chunk by chunk: the next chunk comes off the device while the
 * network takes this one. 0 when all went; -1 with *status (the source's
 * own failure: the client's answer) or res (try again). */
static int push_bytes(struct lupw_session *s, const struct lup_peer_push *pp, struct lupt_link *l,
                      struct lup_peer_result *res, CUresult *status)
{
        const struct lupw_backend *be = &s->be.fn;
        uint8_t *buf[2] = { s->peer.stage[0], s->peer.stage[1] };
        uint64_t src = lupw_xlate(s, pp->src), off = 0, next = 0;
        size_t len[2] = { 0, 0 };
        CUstream st = NULL;
        CUresult r = be->cuStreamCreate(&st, CU_STREAM_NON_BLOCKING);
        bool sent = true;
        if (r == CUDA_SUCCESS)
                r = fetch(s, st, buf[0], src, pp->size, &next, &len[0]);
        for (int i = 0; r == CUDA_SUCCESS && sent && off < pp->size; i ^= 1) {
                r = be->cuStreamSynchronize(st); /* buf[i] is filled */
                if (r == CUDA_SUCCESS && next < pp->size)
                        r = fetch(s, st, buf[i ^ 1], src, pp->size, &next, &len[i ^ 1]);
                if (r != CUDA_SUCCESS)
                        break;
                sent = send_data(l, off, buf[i], len[i]) == 0;
                off += len[i];
        }
        if (st) {
                (void)be->cuStreamSynchronize(st); /* nothing may still write into the staging */
                (void)be->cuStreamDestroy_v2(st);
        }
        if (r != CUDA_SUCCESS) {
                *status = r;
                return -1;
        }
        if (!sent) {
                outcome(res, LUP_PEER_RETRY, CUDA_SUCCESS, "%s went away during the copy", pp->endpoint);
                return -1;
        }
        return 0;
}

/* LUPINE_PEER_DELAY_MS, a test facility: a pause between the ticket and
 * the connection (at most 10 s), so that a test can restart the
 * destination in between and see the copy tried again. */
static void test_delay(void)
{
        const char *e = getenv("LUPINE_PEER_DELAY_MS");
        long v = e ? strtol(e, NULL, 10) : 0;
        if (v > 0 && v <= 10000) {
                struct timespec ts = { v / 1000, (v % 1000) * 1000000L };
                nanosleep(&ts, NULL);
        }
}

static int push_run(struct lupw_session *s, const struct lup_hdr *h, const union lupw_ctl_args *a, struct lup_wr *out,
                    CUresult *status)
{
        const struct lup_peer_push *pp = &a->peer_push;
        struct lup_peer_result res = { .outcome = LUP_PEER_DONE };
        (void)h;
        if (*status == CUDA_SUCCESS)
                *status = lupw_check_range(s, pp->src, pp->size, 1);
        if (*status == CUDA_SUCCESS)
                *status = s->be.fn.cuCtxSynchronize();
        if (*status != CUDA_SUCCESS)
                return 0;
        if (!peer_stage(s, 0) || !peer_stage(s, 1)) {
                *status = CUDA_ERROR_OUT_OF_MEMORY;
                return 0;
        }
        test_delay();
        uint64_t t0 = lup_now_ns();
        struct lupt_link l = { .fd = -1 };
        int up = push_connect(s, pp, &l, &res);
        if (up == 0 && push_bytes(s, pp, &l, &res, status) < 0)
                up = 1; /* connected, not all sent */
        if (up == 0) {
                struct lup_hdr d;
                const char *why = "malformed answer";
                int r = read_answer(&l, &d, &why);
                if (r < 0)
                        outcome(&res, LUP_PEER_RETRY, CUDA_SUCCESS, "%s did not confirm the copy: %s", pp->endpoint,
                                r == -EBADMSG ? why : strerror(-r));
                else
                        res.status = d.status;
        }
        if (up >= 0)
                lupt_close(&l, true);
        if (*status != CUDA_SUCCESS)
                return 0;
        if (res.outcome == LUP_PEER_DONE && res.status != CUDA_SUCCESS && res.msg[0]) {
                lup_warn("session %s: peer copy to %s failed: %s", s->name, pp->endpoint, res.msg);
        } else if (res.outcome == LUP_PEER_DONE) {
                s->peer.bytes_out += pp->size;
                double sec = (double)(lup_now_ns() - t0) / 1e9;
                lup_info("session %s: peer copy of %llu bytes to %s in %.3f s (%.2f GB/s)%s", s->name,
                         (unsigned long long)pp->size, pp->endpoint, sec, sec > 0 ? (double)pp->size / sec / 1e9 : 0,
                         strncmp(pp->endpoint, "tls://", 6) == 0 ? " over TLS" : "");
        } else {
                lup_warn("session %s: peer copy to %s: %s (the client tries again)", s->name, pp->endpoint, res.msg);
        }
        size_t n = lup_peer_result_encode(out->p + out->len, out->cap - out->len, &res);
        if (!n)
                out->err = -ENOBUFS;
        out->len += n;
        return 0;
}

static int push_check(struct lupw_session *s, const struct lup_hdr *h, const uint8_t *p, union lupw_ctl_args *ret,
                      CUresult *ret_early)
{
        const char *why;
        struct lup_endpoint ep;
        if (lup_peer_push_decode(p, h->len, &ret->peer_push, &why) < 0) {
                lupw_set_why(s, why);
                return -EBADMSG;
        }
        if (lupw_check_devptr(s, ret->peer_push.src) < 0)
                return -EBADMSG;
        /* TCP only: a client must not make its daemon write to the local
         * UNIX sockets of other programs (docs/security.md) */
        if (lup_endpoint_parse(ret->peer_push.endpoint, &ep) < 0)
                *ret_early = CUDA_ERROR_INVALID_VALUE;
        else if (ep.family == AF_UNIX)
                *ret_early = CUDA_ERROR_NOT_SUPPORTED;
        return 0;
}

const struct lupw_ctl_op lupw_ctl_peer_push = {
        .name = "PEER_PUSH",
        .sync = LUPW_SYNC_ONLY,
        .why_flag = "PEER_PUSH sent without a reply lane",
        .need_ctx = true,
        .reply_cap = LUP_PEER_PUSH_REPLY_MAX,
        .check = push_check,
        .run = push_run,
};

/* ---- LUPD_CTL_PEER: the destination's side */

/* The ticket's entry, taken (one use), or NULL. */
static bool take_ticket(struct lupw_session *s, const uint8_t *ticket, struct lupw_peer_expect *ret)
{
        uint64_t now = lup_now_ns();
        bool found = false;
        for (unsigned i = 0; i < LUPW_PEER_TICKETS; i++) { /* every entry, found or not: constant time */
                struct lupw_peer_expect *x = &s->peer.exp[i];
                bool hit = CRYPTO_memcmp(x->ticket, ticket, LUP_TICKET_SIZE) == 0 && x->deadline_ns > now;
                if (hit && !found) {
                        *ret = *x;
                        explicit_bzero(x, sizeof(*x));
                        found = true;
                }
        }
        return found;
}

/* The PEER_DATA frame at off: its header and offset checked; *ret_len
 * bytes follow. 0, -errno, or -EBADMSG with *why. */
static int data_header(struct lupt_link *in, const struct lupw_peer_expect *e, uint64_t off, size_t *ret_len,
                       const char **why)
{
        uint8_t hb[LUP_HDR_SIZE + 8];
        struct lup_hdr h;
        int r = lupt_read_full(in, hb, sizeof(hb));
        if (r < 0)
                return r;
        if (lup_hdr_decode(hb, &h, why) < 0)
                return -EBADMSG;
        uint64_t k = h.len - 8u;
        if (h.op != LUP_OP_PEER_DATA || h.flags != 0 || h.len <= 8 || k > LUP_BULK_CHUNK ||
            lup_le64(hb + LUP_HDR_SIZE) != off || k > e->size - off) {
                *why = "PEER_DATA out of order, too long or beyond the copy";
                return -EBADMSG;
        }
        *ret_len = (size_t)k;
        return 0;
}

/* Takes the PEER_DATA frames of e's copy, each written to the device while
 * the next arrives: its status (the first failed write's CUresult), or
 * -errno / -EBADMSG with *why when the peer broke the protocol (the
 * connection is closed then, unanswered). */
static int serve_data(struct lupw_session *s, struct lupt_link *in, const struct lupw_peer_expect *e, CUresult *res,
                      const char **why)
{
        const struct lupw_backend *be = &s->be.fn;
        uint8_t *buf[2] = { peer_stage(s, 0), peer_stage(s, 1) };
        CUevent ev[2] = { NULL, NULL };
        bool pending[2] = { false, false };
        CUstream st = NULL;
        int r = 0;
        if (!buf[0] || !buf[1])
                return -ENOMEM;
        if (*res == CUDA_SUCCESS)
                *res = be->cuStreamCreate(&st, CU_STREAM_NON_BLOCKING);
        for (int i = 0; i < 2 && *res == CUDA_SUCCESS; i++)
                *res = be->cuEventCreate(&ev[i], CU_EVENT_DISABLE_TIMING);
        uint64_t dst = lupw_xlate(s, e->dst);
        uint64_t off = 0;
        for (int i = 0; r == 0 && off < e->size; i ^= 1) {
                if (pending[i] && *res == CUDA_SUCCESS) /* buf[i]'s last write is done */
                        *res = be->cuEventSynchronize(ev[i]);
                pending[i] = false;
                size_t got = 0, k; /* fill buf[i] with frames, then write it in one go */
                while (got < LUP_PEER_CHUNK && off + got < e->size) {
                        if ((r = data_header(in, e, off + got, &k, why)) < 0 ||
                            (k > LUP_PEER_CHUNK - got && (r = -EBADMSG, *why = "PEER_DATA across a staging buffer")) ||
                            (r = lupt_read_full(in, buf[i] + got, k)) < 0)
                                break;
                        got += k;
                }
                if (r < 0)
                        break;
                if (*res == CUDA_SUCCESS)
                        *res = be->cuMemcpyHtoDAsync_v2(dst + off, buf[i], got, st);
                if (*res == CUDA_SUCCESS)
                        *res = be->cuEventRecord(ev[i], st);
                pending[i] = *res == CUDA_SUCCESS;
                off += got;
        }
        if (st) {
                CUresult w = be->cuStreamSynchronize(st); /* the staging is free, the bytes are in place */
                if (*res == CUDA_SUCCESS)
                        *res = w;
                (void)be->cuStreamDestroy_v2(st);
        }
        for (int i = 0; i < 2; i++)
                if (ev[i])
                        (void)be->cuEventDestroy_v2(ev[i]);
        return r;
}

/* Refuses the peer on in and closes it. */
static void peer_refuse(struct lupw_session *s, struct lupt_link *in, const struct lup_hdr *req, CUresult status,
                        const char *msg)
{
        (void)lupw_refuse_on(s, in->fd, in->tls, req, status, msg);
        lup_tls_free(in->tls, true);
        close(in->fd);
}

void lupw_peer_serve(struct lupw_session *s, const uint8_t *msg, size_t n, int fd)
{
        struct lup_hdr req;
        struct lup_hello hello;
        struct lupw_peer_expect e = { 0 };
        uint8_t ticket[LUP_TICKET_SIZE];
        bool via_tls = false;
        uint32_t slot;
        const char *why = "malformed control message";

        if (fd < 0 || lupw_parse_assign(msg, n, LUPD_CTL_PEER, &slot, &req, &hello, &via_tls, ticket, &why) < 0 ||
            !(hello.flags & LUP_HELLO_PEER)) {
                lup_err("session %s: bad PEER from the supervisor: %s", s->name, why);
                if (fd >= 0)
                        close(fd);
                return;
        }
        struct lupt_link in = { .fd = fd };
        /* The ticket first: without one, a peer gets no TLS handshake (it
         * would hold this session's loop) and no answer beyond a refusal
         * (plain) or the closed connection (TLS; its source tries again). */
        bool known = strcmp(hello.name, s->name) == 0 && take_ticket(s, hello.peer_ticket, &e);
        explicit_bzero(&hello, sizeof(hello));
        if (!known && via_tls) {
                lup_warn("session %s: a peer connection with an unknown or expired ticket closed", s->name);
                explicit_bzero(ticket, sizeof(ticket));
                close(fd);
                return;
        }
        if (via_tls) { /* the second TLS session, as a client's (worker/tls_conn.c) */
                in.tls = lupw_tls_accept(s, fd, &req, ticket);
                explicit_bzero(ticket, sizeof(ticket));
                if (!in.tls) {
                        close(fd);
                        return;
                }
                lup_tls_set_write_timeout(in.tls, LUP_PEER_IO_MS);
        } else {
                (void)lup_set_blocking(fd);
        }
        lupt_set_timeout(&in, LUP_PEER_IO_MS); /* reads (and plain writes) that move no byte this long fail */
        if (!known) {
                peer_refuse(s, &in, &req, CUDA_ERROR_DEVICE_UNAVAILABLE, "unknown or expired peer-copy ticket");
                return;
        }
        /* the range again: calls since PEER_EXPECT may have freed it */
        CUresult res = lupw_check_range(s, e.dst, e.size, 1);
        if (res == CUDA_SUCCESS)
                res = lupw_bind_ctx(s, e.ctx);
        if (res == CUDA_SUCCESS)
                res = s->be.fn.cuCtxSynchronize();
        if (res != CUDA_SUCCESS) {
                peer_refuse(s, &in, &req, res, "the destination's memory or context is no longer usable");
                return;
        }
        struct lup_hdr ok = { .op = LUP_OP_HELLO, .flags = LUP_F_REPLY, .lane = req.lane, .seq = req.seq };
        int r = lupw_send_ctl(s, fd, in.tls, &ok, NULL, 0);
        uint64_t t0 = lup_now_ns();
        why = NULL;
        if (r == 0)
                r = serve_data(s, &in, &e, &res, &why);
        if (r == 0) {
                struct lup_hdr done = { .op = LUP_OP_PEER_DATA, .flags = LUP_F_REPLY, .status = (uint32_t)res };
                r = lupw_send_ctl(s, fd, in.tls, &done, NULL, 0);
        }
        lup_tls_free(in.tls, r == 0);
        close(fd);
        if (r < 0) {
                lup_warn("session %s: peer copy of %llu bytes broken off: %s", s->name, (unsigned long long)e.size,
                         r == -EBADMSG && why ? why : strerror(-r));
                return;
        }
        s->peer.bytes_in += e.size;
        double sec = (double)(lup_now_ns() - t0) / 1e9;
        lup_info("session %s: peer copy of %llu bytes received in %.3f s%s%s", s->name, (unsigned long long)e.size, sec,
                 via_tls ? " over TLS" : "", res == CUDA_SUCCESS ? "" : " (its writes failed)");
}
