/* SPDX-License-Identifier: MIT */
/*
 * Frame dispatch: every complete frame in the input buffer is executed
 * strictly in sequence order. Control ops (copies, launches, uploads) have
 * hand-written handlers; ops numbered 256 and up are the generated ones
 * (worker_gen.c decodes their arguments). Anything malformed closes the
 * connection with a logged reason (s->why).
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "buf.h"
#include "frame.h"
#include "log.h"
#include "ops.h"
#include "worker/session.h"

/* ---- generated ops */

static int op_generated(struct lupw_session *s, const struct lup_hdr *h, const uint8_t *p)
{
        size_t idx = (size_t)h->op - 256;
        if (idx >= lupw_n_ops || !lupw_ops[idx].fn) {
                lupw_set_why(s, "unknown op");
                return -EBADMSG;
        }
        const struct lupw_op *op = &lupw_ops[idx];
        bool sync = (h->flags & LUP_F_SYNC) != 0;
        if (sync != op->sync) {
                lupw_set_why(s, sync ? "reply requested for an asynchronous op" : "synchronous op sent without a reply lane");
                return -EBADMSG;
        }
        if (lup_trace_level() >= 1)
                lup_tracef("session %s seq %llu %s", s->name, (unsigned long long)h->seq, op->name);

        uint8_t outbuf[256];
        struct lup_wr out = lup_wr_init(outbuf, sizeof(outbuf));
        struct lup_rd rd = lup_rd_init(p, h->len);
        /* A latched async failure is the answer to the next sync call, which
         * is then not executed (its arguments are still validated). */
        CUresult res = sync ? lupw_take_latched(s) : CUDA_SUCCESS;
        int rc = op->fn(s, h->ctx, &rd, &out, &res);
        if (rc < 0)
                return rc;
        if (!sync) {
                lupw_latch(s, res, op->name);
                return 0;
        }
        if (out.err) {
                lupw_set_why(s, "reply overflow");
                return -EBADMSG;
        }
        return lupw_reply(s, h, 0, res, res == CUDA_SUCCESS ? outbuf : NULL, res == CUDA_SUCCESS ? out.len : 0);
}

static int handle_frame(struct lupw_session *s, const struct lup_hdr *h, const uint8_t *p)
{
        if (h->flags & (LUP_F_REPLY | LUP_F_MORE)) {
                lupw_set_why(s, "client sent a reply frame");
                return -EBADMSG;
        }
        if (h->seq != s->last_seq + 1) {
                lupw_set_why(s, "sequence number out of order");
                return -EBADMSG;
        }
        s->last_seq = h->seq;
        atomic_store_explicit(&s->tx.running_seq, h->seq, memory_order_relaxed);
        if (s->htod_pending && h->op != LUP_OP_MEMCPY_HTOD)
                lupw_htod_wait(s);
        /* Asynchronous device->host data always reaches the client before
         * the answer to any synchronous call that follows it. */
        if ((h->flags & LUP_F_SYNC) && s->n_pending) {
                int rc = lupw_flush_pending(s, true);
                if (rc < 0)
                        return rc;
        }
        switch (h->op) {
        case LUP_OP_GOODBYE:
                lup_info("session %s: client said goodbye after %llu calls", s->name, (unsigned long long)s->last_seq);
                s->stop = true;
                return 0;
        case LUP_OP_PING:
                /* payload: nothing, or how much of the reply stream the client has */
                if (h->len != 0 && h->len != 8) {
                        lupw_set_why(s, "malformed PING");
                        return -EBADMSG;
                }
                if (h->len == 8 && lupw_tx_ack(s, lup_le64(p)) < 0)
                        return -EBADMSG;
                return (h->flags & LUP_F_SYNC) ? lupw_reply(s, h, 0, CUDA_SUCCESS, NULL, 0) : 0;
        case LUP_OP_MEMCPY_HTOD:
                return lupw_op_htod(s, h, p);
        case LUP_OP_MEMCPY_DTOH:
                return lupw_op_dtoh(s, h, p);
        case LUP_OP_LAUNCH:
                return lupw_op_launch(s, h, p);
        case LUP_OP_FUNC_INFO:
                return lupw_op_func_info(s, h, p);
        case LUP_OP_BLOB:
                return lupw_op_blob(s, h, p);
        case LUP_OP_DTOH_ASYNC:
                return lupw_op_dtoh_async(s, h, p);
        case LUP_OP_ALIVE:
        case LUP_OP_DATA:
        case LUP_OP_OUTPUT:
                lupw_set_why(s, h->op == LUP_OP_ALIVE  ? "client sent ALIVE, a server-only frame" :
                                h->op == LUP_OP_DATA   ? "client sent DATA, a server-only frame" :
                                                         "client sent OUTPUT, a server-only frame");
                return -EBADMSG;
        default:
                if (h->op >= 256)
                        return op_generated(s, h, p);
                lupw_set_why(s, h->op == LUP_OP_HELLO ? "HELLO after the handshake" : "unknown op");
                return -EBADMSG;
        }
}

/* Executes every complete frame in the input buffer. */
int lupw_process_input(struct lupw_session *s)
{
        size_t off = s->in_off;
        int rc = 0;

        while (s->in_len - off >= LUP_HDR_SIZE && !s->stop) {
                struct lup_hdr h;
                const char *why;
                if (lup_hdr_decode(s->in + off, &h, &why) < 0) {
                        lupw_set_why(s, why);
                        return -EBADMSG;
                }
                if (s->in_len - off - LUP_HDR_SIZE < h.len)
                        break;
                rc = handle_frame(s, &h, s->in + off + LUP_HDR_SIZE);
                if (rc == 0)
                        rc = lupw_tx_failed(s);
                if (rc < 0)
                        return rc;
                off += LUP_HDR_SIZE + h.len;
        }
        /* Compact only when the tail cannot take a whole frame: moving a
         * partial 1 MiB frame after every read would cost as much as the
         * copy to the device. */
        if (off == s->in_len && !s->htod_pending) {
                s->in_off = s->in_len = 0;
        } else if (s->in_cap - s->in_len < LUP_HDR_SIZE + LUP_MAX_PAYLOAD) {
                lupw_htod_wait(s); /* copies may still read what is moved over */
                memmove(s->in, s->in + off, s->in_len - off);
                s->in_len -= off;
                s->in_off = 0;
        } else {
                s->in_off = off;
        }
        /* send what finished meanwhile, without waiting for the rest */
        if (s->n_pending && (rc = lupw_flush_pending(s, false)) < 0)
                return rc;
        rc = lupw_flush_out(s);
        return rc < 0 ? rc : lupw_tx_failed(s);
}

