/* SPDX-License-Identifier: MIT */
/*
 * The per-session worker: receives its client connection from the
 * supervisor, answers HELLO with the device snapshot and the arena, then
 * executes the client's frames strictly in sequence order.
 *
 * Frames are read with io_uring into one buffer that always has room for a
 * whole maximal frame; every complete frame in it is executed, replies are
 * batched and written once the batch is done (before going back to sleep).
 * Anything malformed closes the connection with a logged reason.
 */
#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "ctl.h"
#include "frame.h"
#include "log.h"
#include "net.h"
#include "ops.h"
#include "worker_session.h"

#define OUT_CAP (256u * 1024u)
#define UD_RECV 1
#define UD_CTL 2

/* ---- replies */

int lupw_flush_out(struct lupw_session *s)
{
        if (s->out_len == 0)
                return 0;
        int rc = lup_write_full(s->fd, s->out, s->out_len);
        s->out_len = 0;
        if (rc < 0)
                lupw_set_why(s, "client stopped reading");
        return rc;
}

/* Appends a reply frame; payload may be NULL when len is 0. */
int lupw_reply(struct lupw_session *s, const struct lup_hdr *req, uint16_t flags, CUresult status,
               const void *payload, size_t len)
{
        if (LUP_HDR_SIZE + len > s->out_cap - s->out_len && lupw_flush_out(s) < 0)
                return -EPIPE;
        if (LUP_HDR_SIZE + len > s->out_cap) {
                /* larger than the batch buffer: straight to the socket */
                struct lup_hdr h = { .len = (uint32_t)len, .op = req->op, .flags = LUP_F_REPLY | flags,
                                     .lane = req->lane, .status = (uint32_t)status, .seq = req->seq, .ctx = s->last_seq };
                uint8_t hb[LUP_HDR_SIZE];
                lup_hdr_encode(hb, &h);
                struct iovec iov[2] = { { hb, sizeof(hb) }, { (void *)payload, len } };
                if (lup_writev_full(s->fd, iov, 2) < 0) {
                        lupw_set_why(s, "client stopped reading");
                        return -EPIPE;
                }
                return 0;
        }
        struct lup_hdr h = { .len = (uint32_t)len, .op = req->op, .flags = LUP_F_REPLY | flags,
                             .lane = req->lane, .status = (uint32_t)status, .seq = req->seq, .ctx = s->last_seq };
        lup_hdr_encode(s->out + s->out_len, &h);
        if (len)
                memcpy(s->out + s->out_len + LUP_HDR_SIZE, payload, len);
        s->out_len += LUP_HDR_SIZE + len;
        return 0;
}

void lupw_latch(struct lupw_session *s, CUresult r, const char *what)
{
        if (r == CUDA_SUCCESS)
                return;
        if (s->latched == CUDA_SUCCESS)
                s->latched = r;
        if (lup_log_max_level() >= LUP_LOG_DEBUG)
                lup_debug("session %s: async %s failed with %d (latched)", s->name, what, (int)r);
}

CUresult lupw_take_latched(struct lupw_session *s)
{
        CUresult r = s->latched;
        s->latched = CUDA_SUCCESS;
        return r;
}

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
        default:
                if (h->op >= 256)
                        return op_generated(s, h, p);
                lupw_set_why(s, h->op == LUP_OP_HELLO ? "HELLO after the handshake" : "unknown op");
                return -EBADMSG;
        }
}

/* Executes every complete frame in the input buffer. */
static int process_input(struct lupw_session *s)
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
        return lupw_flush_out(s);
}

/* ---- HELLO */

static int refuse(struct lupw_session *s, const struct lup_hdr *req, CUresult status, const char *msg)
{
        uint8_t buf[512];
        struct lup_wr w = lup_wr_init(buf, sizeof(buf));
        lup_wr_str16(&w, msg, strnlen(msg, 400));
        lup_err("session %s refused: %s", s->name[0] ? s->name : "?", msg);
        lupw_reply(s, req, 0, status, buf, w.len);
        return lupw_flush_out(s);
}

static void write_device(struct lupw_session *s, struct lup_wr *w, int dev)
{
        const struct lupw_backend *be = &s->be.fn;
        char name[LUP_MAX_DEV_NAME] = "";
        CUuuid uuid = { { 0 } };
        size_t total = 0;

        be->cuDeviceGetName(name, sizeof(name), dev);
        be->cuDeviceGetUuid_v2(&uuid, dev);
        be->cuDeviceTotalMem_v2(&total, dev);
        lup_wr_str16(w, name, strnlen(name, sizeof(name) - 1));
        lup_wr_bytes(w, uuid.bytes, 16);
        lup_wr_u64(w, total);
        uint32_t n_attr = CU_DEVICE_ATTRIBUTE_MAX - 1 < LUP_MAX_ATTRS ? CU_DEVICE_ATTRIBUTE_MAX - 1 : LUP_MAX_ATTRS;
        lup_wr_u32(w, n_attr);
        for (uint32_t a = 1; a <= n_attr; a++) {
                int v = 0;
                CUresult r = be->cuDeviceGetAttribute(&v, (CUdevice_attribute)a, dev);
                lup_wr_i32(w, r == CUDA_SUCCESS ? v : 0);
                lup_wr_u32(w, (uint32_t)r);
        }
}

static int setup_session(struct lupw_session *s, const struct lup_hdr *req)
{
        const struct lupw_backend *be = &s->be.fn;
        int rc = backend_open(s->cfg, &s->be);
        if (rc < 0)
                return refuse(s, req, CUDA_ERROR_NO_DEVICE, "the server has no usable CUDA driver");
        if (be->cuDeviceGetCount(&s->n_devices) != CUDA_SUCCESS || s->n_devices <= 0)
                return refuse(s, req, CUDA_ERROR_NO_DEVICE, "the server has no CUDA device");
        if (s->n_devices > (int)LUP_MAX_DEVICES)
                s->n_devices = LUP_MAX_DEVICES;

        /* The worker holds device 0's primary context for the session's
         * lifetime: VMM calls need a context, and the arena lives in it. */
        CUresult r = be->cuDevicePrimaryCtxRetain(&s->primary[0], 0);
        if (r == CUDA_SUCCESS)
                r = be->cuCtxSetCurrent(s->primary[0]);
        if (r != CUDA_SUCCESS)
                return refuse(s, req, r, "cannot create a context on device 0");

        /* Pinned receive and bounce buffers: host<->device copies from them
         * run at PCIe speed, so a copy costs little next to the network. */
        void *pin = NULL;
        if (be->cuMemAllocHost_v2(&pin, s->in_cap) == CUDA_SUCCESS) {
                free(s->in);
                s->in = pin;
                s->in_pinned = true;
        }
        if (be->cuMemAllocHost_v2(&pin, LUP_BULK_CHUNK) == CUDA_SUCCESS) {
                free(s->staging);
                s->staging = pin;
                s->staging_pinned = true;
                if (be->cuMemAllocHost_v2(&pin, LUP_BULK_CHUNK) == CUDA_SUCCESS)
                        s->staging2 = pin;
        }

        uint64_t want = LUP_ARENA_BASE + (uint64_t)s->slot * LUP_ARENA_SIZE;
        CUdeviceptr got = 0;
        r = be->cuMemAddressReserve(&got, LUP_ARENA_SIZE, LUP_ARENA_GRANULE, want, 0);
        if (r != CUDA_SUCCESS || got != want) {
                if (r == CUDA_SUCCESS)
                        be->cuMemAddressFree(got, LUP_ARENA_SIZE);
                char msg[160];
                snprintf(msg, sizeof(msg), "cannot reserve the session's device address range at 0x%llx (CUresult %d)",
                         (unsigned long long)want, (int)r);
                return refuse(s, req, CUDA_ERROR_OUT_OF_MEMORY, msg);
        }
        if (arena_init(&s->arena, want, LUP_ARENA_SIZE, LUP_ARENA_GRANULE, &lupw_arena_ops, s) < 0) {
                be->cuMemAddressFree(want, LUP_ARENA_SIZE);
                return refuse(s, req, CUDA_ERROR_OUT_OF_MEMORY, "out of memory in the worker");
        }
        s->arena_reserved = true;

        int drv = 0;
        be->cuDriverGetVersion(&drv);
        size_t cap = 1024 + (size_t)s->n_devices * (LUP_MAX_DEV_NAME + 64 + LUP_MAX_ATTRS * 8);
        uint8_t *buf = malloc(cap);
        if (!buf)
                return refuse(s, req, CUDA_ERROR_OUT_OF_MEMORY, "out of memory in the worker");
        struct lup_wr w = lup_wr_init(buf, cap);
        /* The resume token: only its holder may take the session over later
         * (reconnect and restore are built on it). */
        if (getrandom(s->token, sizeof(s->token), 0) != (ssize_t)sizeof(s->token)) {
                free(buf);
                return refuse(s, req, CUDA_ERROR_OPERATING_SYSTEM, "no randomness for the session token");
        }
        const uint8_t *token = s->token;
        lup_wr_u32(&w, LUP_PROTO_MAGIC);
        lup_wr_u32(&w, LUP_PROTO_VERSION);
        lup_wr_u32(&w, (uint32_t)drv);
        lup_wr_u32(&w, (uint32_t)s->be.kind);
        lup_wr_bytes(&w, token, LUP_TOKEN_SIZE);
        lup_wr_u64(&w, want);
        lup_wr_u64(&w, LUP_ARENA_SIZE);
        lup_wr_u64(&w, s->last_seq);
        lup_wr_u32(&w, (uint32_t)s->n_devices);
        for (int d = 0; d < s->n_devices; d++)
                write_device(s, &w, d);
        if (w.err) {
                free(buf);
                return refuse(s, req, CUDA_ERROR_UNKNOWN, "device snapshot too large");
        }
        rc = lupw_reply(s, req, 0, CUDA_SUCCESS, buf, w.len);
        free(buf);
        return rc < 0 ? rc : lupw_flush_out(s);
}

/* Reads LUPD_CTL_ASSIGN: the session, the HELLO, and the client's fd. */
static int receive_assignment(struct lupw_session *s, struct lup_hdr *ret_req, struct lup_hello *ret_hello)
{
        uint8_t msg[LUPD_CTL_MAX_MSG];
        int fds[1], nfds = 0;
        int n = lup_recv_fds(s->ctl_fd, msg, sizeof(msg), fds, 1, &nfds);
        if (n <= 0) {
                lup_err("worker: no assignment from the supervisor (%s)", n < 0 ? strerror(-n) : "channel closed");
                return -EIO;
        }
        struct lup_rd r = lup_rd_init(msg, (size_t)n);
        uint32_t type, slot, lane, hlen;
        uint64_t seq;
        const uint8_t *hp;
        lup_rd_u32(&r, &type);
        lup_rd_u32(&r, &slot);
        lup_rd_u64(&r, &seq);
        lup_rd_u32(&r, &lane);
        lup_rd_u32(&r, &hlen);
        lup_rd_bytes(&r, hlen, &hp);
        const char *why = "malformed assignment";
        if (lup_rd_finish(&r) < 0 || type != LUPD_CTL_ASSIGN || nfds != 1 || slot >= LUP_ARENA_SLOTS ||
            lane >= LUP_MAX_LANES || lup_hello_decode(hp, hlen, ret_hello, &why) < 0) {
                lup_err("worker: bad assignment from the supervisor: %s", why);
                for (int i = 0; i < nfds; i++)
                        close(fds[i]);
                return -EBADMSG;
        }
        s->fd = fds[0];
        s->slot = slot;
        snprintf(s->name, sizeof(s->name), "%s", ret_hello->name);
        *ret_req = (struct lup_hdr){ .op = LUP_OP_HELLO, .flags = LUP_F_SYNC, .lane = lane, .seq = seq };
        /* blocking writes: replies are written whole before the next read */
        int fl = fcntl(s->fd, F_GETFL);
        if (fl >= 0)
                fcntl(s->fd, F_SETFL, fl & ~O_NONBLOCK);
        return 0;
}

static void send_ready(struct lupw_session *s, int status)
{
        uint8_t b[8];
        lup_put32(b, LUPD_CTL_READY);
        lup_put32(b + 4, (uint32_t)status);
        if (lup_send_fds(s->ctl_fd, b, sizeof(b), NULL, 0) < 0)
                lup_warn("session %s: cannot report to the supervisor", s->name);
}

/* ---- the loop */

static uint64_t mono_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Non-blocking reads for up to s->spin_ns. Returns bytes read, 0 on EOF,
 * -EAGAIN when nothing came. */
static ssize_t spin_recv(struct lupw_session *s)
{
        uint64_t deadline = mono_ns() + s->spin_ns;
        do {
                ssize_t k = recv(s->fd, s->in + s->in_len, s->in_cap - s->in_len, MSG_DONTWAIT);
                if (k >= 0)
                        return k;
                if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                        return -EAGAIN; /* let the ring report the error */
        } while (mono_ns() < deadline);
        return -EAGAIN;
}

static int serve(struct lupw_session *s)
{
        bool recv_armed = false, ctl_armed = false;

        int spins_in_a_row = 0;

        while (!s->stop) {
                struct io_uring_sqe *sqe;
                /* A client in a call/return loop sends again within
                 * microseconds: poll briefly before sleeping in the ring,
                 * which saves a wake-up per call. Every so often go through
                 * the ring anyway, so control messages are seen. */
                if (!recv_armed && s->spin_ns && spins_in_a_row < 64) {
                        ssize_t k = spin_recv(s);
                        if (k > 0) {
                                spins_in_a_row++;
                                s->in_len += (size_t)k;
                                if (process_input(s) < 0) {
                                        lup_warn("session %s: closing connection: %s (op at seq %llu)", s->name,
                                                 s->why ? s->why : "write failed", (unsigned long long)s->last_seq);
                                        s->stop = true;
                                }
                                continue;
                        }
                        if (k == 0) {
                                lup_info("session %s: client disconnected", s->name);
                                break;
                        }
                }
                spins_in_a_row = 0;
                if (!recv_armed) {
                        sqe = io_uring_get_sqe(&s->ring);
                        io_uring_prep_recv(sqe, s->fd, s->in + s->in_len, s->in_cap - s->in_len, 0);
                        io_uring_sqe_set_data64(sqe, UD_RECV);
                        recv_armed = true;
                }
                if (!ctl_armed) {
                        sqe = io_uring_get_sqe(&s->ring);
                        io_uring_prep_poll_add(sqe, s->ctl_fd, POLLIN);
                        io_uring_sqe_set_data64(sqe, UD_CTL);
                        ctl_armed = true;
                }
                struct io_uring_cqe *cqe;
                int rc = io_uring_submit_and_wait(&s->ring, 1);
                if (rc < 0 && rc != -EINTR) {
                        lup_err("session %s: io_uring wait failed: %s", s->name, strerror(-rc));
                        return rc;
                }
                unsigned head, seen = 0;
                io_uring_for_each_cqe(&s->ring, head, cqe) {
                        seen++;
                        uint64_t ud = io_uring_cqe_get_data64(cqe);
                        int res = cqe->res;
                        if (ud == UD_RECV) {
                                recv_armed = false;
                                if (res == 0 || res == -ECONNRESET) {
                                        lup_info("session %s: client disconnected", s->name);
                                        s->stop = true;
                                } else if (res < 0) {
                                        lup_warn("session %s: receive failed: %s", s->name, strerror(-res));
                                        s->stop = true;
                                } else {
                                        s->in_len += (size_t)res;
                                        if (process_input(s) < 0) {
                                                lup_warn("session %s: closing connection: %s (op at seq %llu)", s->name,
                                                         s->why ? s->why : "write failed", (unsigned long long)s->last_seq);
                                                s->stop = true;
                                        }
                                }
                        } else if (ud == UD_CTL) {
                                ctl_armed = false;
                                uint8_t b[64];
                                ssize_t k = recv(s->ctl_fd, b, sizeof(b), MSG_DONTWAIT);
                                if (k <= 0 || (k >= 4 && lup_le32(b) == LUPD_CTL_SHUTDOWN)) {
                                        lup_info("session %s: shutting down at the supervisor's request", s->name);
                                        struct lup_hdr bye = { .op = LUP_OP_GOODBYE, .ctx = s->last_seq };
                                        uint8_t hb[LUP_HDR_SIZE];
                                        lup_hdr_encode(hb, &bye);
                                        (void)lup_write_full(s->fd, hb, sizeof(hb));
                                        s->stop = true;
                                }
                        }
                }
                io_uring_cq_advance(&s->ring, seen);
        }
        return 0;
}

int worker_main(const struct lupd_config *cfg)
{
        struct lupw_session *s = calloc(1, sizeof(*s));
        struct lup_hdr req;
        struct lup_hello hello;
        int rc, status = 1;

        if (!s)
                return 1;
        s->cfg = cfg;
        s->ctl_fd = cfg->ctl_fd;
        s->fd = -1;
        s->in_cap = 8u << 20; /* several frames: see process_input's compaction */
        s->out_cap = OUT_CAP;
        s->in = malloc(s->in_cap);
        /* LUPINE_SPIN_US: how long a worker polls for the next frame before
         * sleeping (default 50; 0 turns polling off) */
        const char *spin = getenv("LUPINE_SPIN_US");
        long spin_us = spin && *spin ? strtol(spin, NULL, 10) : 50;
        s->spin_ns = spin_us > 0 && spin_us < 100000 ? (uint64_t)spin_us * 1000 : 0;
        s->out = malloc(s->out_cap);
        s->staging = malloc(LUP_BULK_CHUNK);
        if (!s->in || !s->out || !s->staging)
                goto out_free;
        lupw_handles_init(s);

        if (receive_assignment(s, &req, &hello) < 0)
                goto out_free;
        rc = io_uring_queue_init(8, &s->ring, 0);
        if (rc < 0) {
                lup_err("session %s: io_uring_queue_init failed: %s (io_uring is required)", s->name, strerror(-rc));
                send_ready(s, rc);
                goto out_free;
        }
        s->ring_ok = true;
        if (setup_session(s, &req) < 0 || !s->arena_reserved) {
                send_ready(s, -EIO);
                goto out_release;
        }
        send_ready(s, 0);
        lup_info("session %s: serving in arena slot %u", s->name, s->slot);
        rc = serve(s);
        status = rc < 0 ? 1 : 0;

out_release:
        lupw_copy_free(s);
        if (s->in_pinned)
                s->be.fn.cuMemFreeHost(s->in);
        if (s->staging_pinned)
                s->be.fn.cuMemFreeHost(s->staging);
        if (s->staging2)
                s->be.fn.cuMemFreeHost(s->staging2);
        if (s->in_pinned)
                s->in = NULL;
        if (s->staging_pinned)
                s->staging = NULL;
        lupw_release_all(s);
        backend_close(&s->be);
out_free:
        if (s->ring_ok)
                io_uring_queue_exit(&s->ring);
        if (s->fd >= 0)
                close(s->fd);
        free(s->in);
        free(s->out);
        free(s->staging);
        lupw_handles_free(s);
        lup_rangemap_free(&s->globals);
        free(s);
        return status;
}
