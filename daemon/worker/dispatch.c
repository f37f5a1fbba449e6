/* SPDX-License-Identifier: MIT */
/*
 * Frame dispatch: every complete frame in the input buffer is executed
 * strictly in sequence order. The connection's own ops (GOODBYE, PING) are
 * answered here; every other op, control (copies, launches, uploads: their
 * files describe them as struct lupw_ctl_op) or generated (256 and up:
 * worker_gen.c decodes their arguments), runs through lupw_run_op(), the
 * one place that takes latched errors, binds contexts and replies or
 * latches. Anything malformed closes the connection with a logged reason
 * (s->why).
 */
#define LUP_LOG_CAT LUP_LOGC_GPU
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "buf.h"
#include "clock.h"
#include "frame.h"
#include "log.h"
#include "ops.h"
#include "worker/graphs.h"
#include "worker/mapped.h"
#include "worker/session.h"

/* ---- one sequence for every op (the steps: worker/session.h) */

/* Replies are built here, not on the stack: FUNC_INFO's, the largest, can
 * take 32 KiB. A worker process serves one session on one thread, so
 * nobody shares it. */
static uint8_t reply_buf[LUPW_FUNC_INFO_REPLY_MAX];

/* clang-format off */
static const struct lupw_ctl_op *const ctl_ops[] = {
        [LUP_OP_MEMCPY_HTOD]    = &lupw_ctl_htod,
        [LUP_OP_MEMCPY_DTOH]    = &lupw_ctl_dtoh,
        [LUP_OP_LAUNCH]         = &lupw_ctl_launch,
        [LUP_OP_FUNC_INFO]      = &lupw_ctl_func_info,
        [LUP_OP_BLOB]           = &lupw_ctl_blob,
        [LUP_OP_DTOH_ASYNC]     = &lupw_ctl_dtoh_async,
        [LUP_OP_GRAPH_KERNEL]   = &lupw_ctl_graph_kernel,
        [LUP_OP_GRAPH_KERNEL_GET] = &lupw_ctl_graph_kernel_get,
        [LUP_OP_MAPPED_PUSH]    = &lupw_ctl_mapped_push,
        [LUP_OP_MAPPED_PULL]    = &lupw_ctl_mapped_pull,
        [LUP_OP_PEER_EXPECT]    = &lupw_ctl_peer_expect,
        [LUP_OP_PEER_PUSH]      = &lupw_ctl_peer_push,
};
/* clang-format on */

const struct lupw_ctl_op *lupw_ctl_op(uint16_t op)
{
        return op < sizeof(ctl_ops) / sizeof(ctl_ops[0]) ? ctl_ops[op] : NULL;
}

/* A generated op is a control op whose run() decodes as well: the handler
 * validates its arguments after the latched error is taken, and binds the
 * context itself, between the checks that need none and those that do. */
static int run_generated(struct lupw_session *s, const struct lup_hdr *h, const union lupw_ctl_args *a,
                         struct lup_wr *out, CUresult *status)
{
        const struct lupw_op *op = &lupw_ops[h->op - 256];
        struct lup_rd rd = lup_rd_init(a->payload, h->len);
        return op->fn(s, h->ctx, &rd, out, status);
}

/* The description of generated op h->op (*ret_op), or -EBADMSG. */
static int generated_op(struct lupw_session *s, const struct lup_hdr *h, struct lupw_ctl_op *ret_op)
{
        size_t idx = (size_t)h->op - 256;
        if (idx >= lupw_n_ops || !lupw_ops[idx].fn) {
                lupw_set_why(s, "unknown op");
                return -EBADMSG;
        }
        const struct lupw_op *op = &lupw_ops[idx];
        *ret_op = (struct lupw_ctl_op){
                .name = op->name,
                .sync = op->sync ? LUPW_SYNC_ONLY : LUPW_ASYNC_ONLY,
                .why_flag = op->sync ? "synchronous op sent without a reply lane"
                                     : "reply requested for an asynchronous op",
                .reply_cap = 256,
                .run = run_generated,
        };
        return 0;
}

/* A failed call, in the journal with its op and CUDA error: at warning for
 * the errors that end the context (the client will see every later call
 * fail), at debug for the rest, which are the program's to handle. */
static void log_failure(const struct lupw_session *s, const char *op, CUresult r, bool sync)
{
        bool sticky = r == CUDA_ERROR_ILLEGAL_ADDRESS || r == CUDA_ERROR_LAUNCH_FAILED ||
                      r == CUDA_ERROR_HARDWARE_STACK_ERROR || r == CUDA_ERROR_ILLEGAL_INSTRUCTION ||
                      r == CUDA_ERROR_MISALIGNED_ADDRESS || r == CUDA_ERROR_INVALID_ADDRESS_SPACE ||
                      r == CUDA_ERROR_INVALID_PC || r == CUDA_ERROR_ECC_UNCORRECTABLE || r == CUDA_ERROR_ASSERT ||
                      r == CUDA_ERROR_LAUNCH_TIMEOUT;
        int level = sticky ? LUP_LOG_WARNING : LUP_LOG_DEBUG;

        if (!lup_log_enabled(LUP_LOGC_GPU, level))
                return;
        const char *name = NULL;
        if (s->be.fn.cuGetErrorName)
                s->be.fn.cuGetErrorName(r, &name);
        struct lup_log_fields f = { .op = op, .cuda_error = (long)r };
        lup_flogf(LUP_LOGC_GPU, level, &f, "session %s: %s%s failed: %s (%d)%s", s->name, sync ? "" : "async ", op,
                  name ? name : "unknown error", (int)r, sticky ? "; the context is lost" : "");
}

static int run_op(struct lupw_session *s, const struct lup_hdr *h, const uint8_t *p)
{
        struct lupw_ctl_op gen;
        const struct lupw_ctl_op *op = &gen;
        union lupw_ctl_args a;
        int rc;

        if (h->op >= 256) {
                if ((rc = generated_op(s, h, &gen)) < 0)
                        return rc;
                a.payload = p;
        } else if (!(op = lupw_ctl_op(h->op))) {
                lupw_set_why(s, "unknown op");
                return -EBADMSG;
        }
        bool sync = (h->flags & LUP_F_SYNC) != 0;
        if (op->sync != LUPW_SYNC_EITHER && sync != (op->sync == LUPW_SYNC_ONLY)) {
                lupw_set_why(s, op->why_flag);
                return -EBADMSG;
        }
        /* control ops trace what they did themselves (LAUNCH its result) */
        if (op == &gen && lup_trace_level() >= 1)
                lup_tracef("session %s seq %llu %s", s->name, (unsigned long long)h->seq, op->name);
        CUresult early = CUDA_SUCCESS;
        if (op->check && (rc = op->check(s, h, p, &a, &early)) < 0)
                return rc;
        /* A latched async failure is the answer to the next sync call, which
         * is then not executed (its arguments are still validated). */
        CUresult res = sync && !op->keeps_latched ? lupw_take_latched(s) : CUDA_SUCCESS;
        if (res == CUDA_SUCCESS)
                res = early;
        if (res == CUDA_SUCCESS && op->need_ctx)
                res = lupw_bind_ctx(s, h->ctx);
        struct lup_wr out =
                lup_wr_init(reply_buf, op->reply_cap < sizeof(reply_buf) ? op->reply_cap : sizeof(reply_buf));
        CUresult before = res;
        rc = op->run(s, h, &a, &out, &res);
        if (before == CUDA_SUCCESS && res != CUDA_SUCCESS)
                log_failure(s, op->name, res, sync);
        if (!sync) {
                lupw_latch(s, res, op->name);
                return rc < 0 ? rc : 0;
        }
        if (rc < 0)
                return rc;
        if (rc == LUPW_ANSWERED)
                return 0;
        if (out.err) {
                lupw_set_why(s, "reply overflow");
                return -EBADMSG;
        }
        return lupw_reply(s, h, 0, res, res == CUDA_SUCCESS ? reply_buf : NULL, res == CUDA_SUCCESS ? out.len : 0);
}

/* Counted for the metrics by op (daemon/op_stats.h): a call that ran,
 * whatever its CUDA result; not a frame that ends the connection. */
int lupw_run_op(struct lupw_session *s, const struct lup_hdr *h, const uint8_t *p)
{
        uint64_t t0 = lup_now_ns();
        int rc = run_op(s, h, p);
        if (rc >= 0)
                lupw_op_count(s, h->op, h->len, lup_now_ns() - t0);
        return rc;
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
        if (s->copy.htod_pending && h->op != LUP_OP_MEMCPY_HTOD)
                lupw_htod_wait(s);
        /* Asynchronous device->host data always reaches the client before
         * the answer to any synchronous call that follows it. */
        if ((h->flags & LUP_F_SYNC) && s->dtoh.n_pending) {
                int rc = lupw_flush_pending(s, true);
                if (rc < 0)
                        return rc;
        }
        switch (h->op) {
        case LUP_OP_GOODBYE:
                lup_info("session %s: client said goodbye after %llu calls", s->name, (unsigned long long)s->last_seq);
                s->loop.stop = true;
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
        case LUP_OP_ALIVE:
        case LUP_OP_DATA:
        case LUP_OP_OUTPUT:
                lupw_set_why(s, h->op == LUP_OP_ALIVE  ? "client sent ALIVE, a server-only frame" :
                                h->op == LUP_OP_DATA   ? "client sent DATA, a server-only frame" :
                                                         "client sent OUTPUT, a server-only frame");
                return -EBADMSG;
        case LUP_OP_HELLO:
                lupw_set_why(s, "HELLO after the handshake");
                return -EBADMSG;
        default:
                /* copies, launches, uploads (lupw_ctl_op()) and the generated ops */
                return lupw_run_op(s, h, p);
        }
}

/* Executes every complete frame in the input buffer. */
int lupw_process_input(struct lupw_session *s)
{
        size_t off = s->rx.off;
        int rc = 0;

        while (s->rx.len - off >= LUP_HDR_SIZE && !s->loop.stop) {
                struct lup_hdr h;
                const char *why;
                if (lup_hdr_decode(s->rx.buf + off, &h, &why) < 0) {
                        lupw_set_why(s, why);
                        return -EBADMSG;
                }
                if (s->rx.len - off - LUP_HDR_SIZE < h.len)
                        break;
                /* no call runs without the session's lease (worker/lease.c);
                 * the frame waits, unconsumed, for a renewal */
                if (s->lease.on && lupw_lease_check(s) != 0) {
                        if (!s->lease.held)
                                lup_warn("session %s: its lease was not renewed in time; calls wait", s->name);
                        s->lease.held = true;
                        break;
                }
                rc = handle_frame(s, &h, s->rx.buf + off + LUP_HDR_SIZE);
                if (rc == 0)
                        rc = lupw_tx_failed(s);
                if (rc < 0)
                        return rc;
                off += LUP_HDR_SIZE + h.len;
        }
        /* Compact only when the tail cannot take a whole frame: moving a
         * partial 1 MiB frame after every read would cost as much as the
         * copy to the device. */
        if (off == s->rx.len && !s->copy.htod_pending) {
                s->rx.off = s->rx.len = 0;
        } else if (s->rx.cap - s->rx.len < LUP_HDR_SIZE + LUP_MAX_PAYLOAD) {
                lupw_htod_wait(s); /* copies may still read what is moved over */
                memmove(s->rx.buf, s->rx.buf + off, s->rx.len - off);
                s->rx.len -= off;
                s->rx.off = 0;
        } else {
                s->rx.off = off;
        }
        /* send what finished meanwhile, without waiting for the rest */
        if (s->dtoh.n_pending && (rc = lupw_flush_pending(s, false)) < 0)
                return rc;
        rc = lupw_flush_out(s);
        return rc < 0 ? rc : lupw_tx_failed(s);
}

