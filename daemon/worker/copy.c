/* SPDX-License-Identifier: MIT */
/*
 * Bulk copies between the client's memory and the device.
 *
 * Host->device data arrives inline in 1 MiB chunks. Device->host data goes
 * back as reply frames (synchronous copies) or as DATA frames (asynchronous
 * copies). An asynchronous copy lands in a pinned staging ring first; the
 * worker sends it once the copy's event completes, and always before it
 * answers any synchronous call, so the data reaches the client's buffer
 * before the synchronisation point that makes it visible.
 */
#define LUP_LOG_CAT LUP_LOGC_GPU
#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include "ctl_codec.h"
#include "frame.h"
#include "log.h"
#include "net.h"
#include "worker/lanes.h"
#include "worker/piece_hash.h"
#include "worker/session.h"

#define RING_SIZE (64u << 20)

/* The latched error and the context: worker/dispatch.c, lupw_run_op(). */

static int htod_check(struct lupw_session *s, const struct lup_hdr *h, const uint8_t *p, union lupw_ctl_args *ret,
                      CUresult *ret_early)
{
        const char *why;
        if (lup_htod_decode(p, h->len, &ret->htod, &why) < 0) {
                lupw_set_why(s, why);
                return -EBADMSG;
        }
        return lupw_check_devptr(s, ret->htod.dst) < 0 ? -EBADMSG : 0;
}

static int htod_run(struct lupw_session *s, const struct lup_hdr *h, const union lupw_ctl_args *a, struct lup_wr *out,
                    CUresult *status)
{
        const struct lup_htod *c = &a->htod;
        CUresult res = *status;
        CUstream st;

        if (res == CUDA_SUCCESS)
                res = lupw_check_range(s, c->dst, c->n, 1);
        if (res == CUDA_SUCCESS)
                res = lupw_stream(s, c->stream, &st);
        if (res == CUDA_SUCCESS && s->rx.pinned && !(h->flags & LUP_F_SYNC) &&
            (s->copy.htod_done ||
             s->be.fn.cuEventCreate(&s->copy.htod_done, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS)) {
                /* From the pinned receive buffer the copy runs while the next
                 * chunk arrives. The worker waits for it before it executes
                 * anything but another chunk, and before that part of the
                 * buffer is reused (lupw_htod_wait), so every later call sees
                 * the data, as after a synchronous copy. */
                if (s->copy.htod_pending && st != s->copy.htod_stream)
                        lupw_htod_wait(s);
                res = s->be.fn.cuMemcpyHtoDAsync_v2(lupw_xlate(s, c->dst), c->data, c->n, st);
                if (res == CUDA_SUCCESS)
                        res = s->be.fn.cuEventRecord(s->copy.htod_done, st);
                if (res == CUDA_SUCCESS) {
                        s->copy.htod_pending = true;
                        s->copy.htod_stream = st;
                }
        } else if (res == CUDA_SUCCESS) {
                /* the bytes sit in the receive buffer, which the next read reuses */
                res = s->be.fn.cuMemcpyHtoD_v2(lupw_xlate(s, c->dst), c->data, c->n);
        }
        *status = res;
        return 0;
}

/* sync or not: a sync copy is answered once the data is on the device */
const struct lupw_ctl_op lupw_ctl_htod = {
        .name = "cuMemcpyHtoD",
        .sync = LUPW_SYNC_EITHER,
        .need_ctx = true,
        .check = htod_check,
        .run = htod_run,
};

/* Writes one reply chunk straight to the socket. A blocking copy is one of
 * the points where the driver writes out device printf output: it goes
 * ahead of the copy's answer, as lupw_reply() sends it ahead of others. */
static int send_chunk(struct lupw_session *s, const struct lup_hdr *rh, const void *data, size_t n)
{
        uint8_t hb[LUP_HDR_SIZE];
        int rc = lupw_output_forward(s);
        if (rc == 0)
                rc = lupw_flush_out(s);
        if (rc < 0)
                return rc;
        lup_hdr_encode(hb, rh);
        struct iovec iov[2] = { { hb, sizeof(hb) }, { (void *)data, n } };
        return lupw_send(s, iov, n ? 2 : 1, true); /* logged for a resend even if it fails */
}

static int send_data(struct lupw_session *s, uint64_t token, uint64_t off, const void *data, size_t n, CUresult status)
{
        uint8_t buf[LUP_DATA_HDR_SIZE];
        lup_data_encode(buf, token, off);
        struct lup_hdr rh = { .len = (uint32_t)(LUP_DATA_HDR_SIZE + n),
                              .op = LUP_OP_DATA,
                              .status = (uint32_t)status,
                              .ctx = s->last_seq };
        uint8_t hb[LUP_HDR_SIZE];
        int rc = lupw_flush_out(s);
        lup_hdr_encode(hb, &rh);
        struct iovec iov[3] = { { hb, sizeof(hb) }, { buf, sizeof(buf) }, { (void *)data, n } };
        lupw_op_bytes_out(s, LUP_OP_DTOH_ASYNC, n);
        int wrc = lupw_send(s, iov, n ? 3 : 2, true); /* logged for a resend even if it fails */
        return rc < 0 ? rc : wrc;
}

void lupw_htod_wait(struct lupw_session *s)
{
        if (!s->copy.htod_pending)
                return;
        s->copy.htod_pending = false;
        lupw_latch(s, s->be.fn.cuEventSynchronize(s->copy.htod_done), "cuMemcpyHtoD");
}

static int send_out(struct lupw_session *s, const struct lup_hdr *h, uint64_t token, uint64_t off, uint64_t n,
                    const uint8_t *data, size_t k)
{
        if (token)
                return send_data(s, token, off, data, k, CUDA_SUCCESS);
        struct lup_hdr rh = { .len = (uint32_t)k, .op = h->op, .flags = LUP_F_REPLY | (off + k < n ? LUP_F_MORE : 0),
                              .lane = h->lane, .seq = h->seq, .ctx = s->last_seq };
        lupw_op_bytes_out(s, h->op, k);
        return send_chunk(s, &rh, data, k);
}

static int fail_out(struct lupw_session *s, const struct lup_hdr *h, uint64_t token, uint64_t off, CUresult res)
{
        if (token) {
                lupw_latch(s, res, "cuMemcpyDtoHAsync");
                return send_data(s, token, off, NULL, 0, res);
        }
        return lupw_reply(s, h, 0, res, NULL, 0);
}

/* Copies device memory to the client, as reply chunks of request h
 * (token == 0) or as DATA frames for token. With two pinned bounce buffers
 * the next chunk crosses PCIe while the current one crosses the network. */
static int copy_out_sync(struct lupw_session *s, const struct lup_hdr *h, uint64_t token, uint64_t src, uint64_t n,
                         CUstream st)
{
        const struct lupw_backend *be = &s->be.fn;
        bool pipelined = s->copy.staging2 && n > LUP_BULK_CHUNK;
        for (int i = 0; pipelined && i < 2; i++)
                if (!s->copy.chunk_done[i] &&
                    be->cuEventCreate(&s->copy.chunk_done[i], CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
                        pipelined = false;
        if (!pipelined) {
                /* a synchronous copy orders only with the legacy stream: wait
                 * for the request's own stream first */
                CUresult res = st ? be->cuStreamSynchronize(st) : CUDA_SUCCESS;
                if (res != CUDA_SUCCESS)
                        return fail_out(s, h, token, 0, res);
                for (uint64_t off = 0; off < n;) {
                        size_t k = n - off < LUP_BULK_CHUNK ? (size_t)(n - off) : LUP_BULK_CHUNK;
                        res = be->cuMemcpyDtoH_v2(s->copy.staging, src + off, k);
                        if (res != CUDA_SUCCESS)
                                return fail_out(s, h, token, off, res);
                        int rc = send_out(s, h, token, off, n, s->copy.staging, k);
                        if (rc < 0)
                                return rc;
                        off += k;
                }
                return 0;
        }
        uint8_t *buf[2] = { s->copy.staging, s->copy.staging2 };
        uint64_t chunks = (n + LUP_BULK_CHUNK - 1) / LUP_BULK_CHUNK;
        CUresult res = CUDA_SUCCESS;
        for (uint64_t i = 0; i <= chunks && res == CUDA_SUCCESS; i++) {
                /* queue chunk i, then send chunk i - 1 while it copies */
                if (i < chunks) {
                        uint64_t off = i * LUP_BULK_CHUNK;
                        size_t k = n - off < LUP_BULK_CHUNK ? (size_t)(n - off) : LUP_BULK_CHUNK;
                        res = be->cuMemcpyDtoHAsync_v2(buf[i % 2], src + off, k, st);
                        if (res == CUDA_SUCCESS)
                                res = be->cuEventRecord(s->copy.chunk_done[i % 2], st);
                        if (res != CUDA_SUCCESS)
                                break;
                }
                if (i > 0) {
                        uint64_t off = (i - 1) * LUP_BULK_CHUNK;
                        size_t k = n - off < LUP_BULK_CHUNK ? (size_t)(n - off) : LUP_BULK_CHUNK;
                        res = be->cuEventSynchronize(s->copy.chunk_done[(i - 1) % 2]);
                        if (res != CUDA_SUCCESS)
                                break;
                        int rc = send_out(s, h, token, off, n, buf[(i - 1) % 2], k);
                        if (rc < 0)
                                return rc;
                }
        }
        if (res != CUDA_SUCCESS) {
                be->cuStreamSynchronize(st); /* nothing may still write into the bounce buffers */
                return fail_out(s, h, token, 0, res);
        }
        return 0;
}

static int dtoh_check(struct lupw_session *s, const struct lup_hdr *h, const uint8_t *p, union lupw_ctl_args *ret,
                      CUresult *ret_early)
{
        const char *why;
        if (lup_dtoh_decode(p, h->len, &ret->dtoh, &why) < 0) {
                lupw_set_why(s, why);
                return -EBADMSG;
        }
        return lupw_check_devptr(s, ret->dtoh.src) < 0 ? -EBADMSG : 0;
}

static int dtoh_run(struct lupw_session *s, const struct lup_hdr *h, const union lupw_ctl_args *a, struct lup_wr *out,
                    CUresult *status)
{
        const struct lup_dtoh *c = &a->dtoh;
        CUstream st;

        if (*status == CUDA_SUCCESS)
                *status = lupw_check_range(s, c->src, c->size, 1);
        if (*status == CUDA_SUCCESS)
                *status = lupw_stream(s, c->stream, &st);
        if (*status != CUDA_SUCCESS)
                return 0;
        /* the chunks are queued on the request's stream, after its earlier
         * work, and are the answer */
        int rc = copy_out_sync(s, h, 0, lupw_xlate(s, c->src), c->size, st);
        return rc < 0 ? rc : LUPW_ANSWERED;
}

const struct lupw_ctl_op lupw_ctl_dtoh = {
        .name = "cuMemcpyDtoH",
        .sync = LUPW_SYNC_ONLY,
        .why_flag = "malformed MEMCPY_DTOH frame",
        .need_ctx = true,
        .check = dtoh_check,
        .run = dtoh_run,
};

static struct lupw_pending_dtoh *pending_at(struct lupw_session *s, unsigned i)
{
        return &s->dtoh.pending[(s->dtoh.first + i) % LUPW_MAX_PENDING];
}

int lupw_flush_pending(struct lupw_session *s, bool wait)
{
        while (s->dtoh.n_pending) {
                struct lupw_pending_dtoh *pd = pending_at(s, 0);
                CUresult q = wait ? s->be.fn.cuEventSynchronize(pd->done) : s->be.fn.cuEventQuery(pd->done);
                if (q == CUDA_ERROR_NOT_READY)
                        return 0;
                int rc;
                if (q != CUDA_SUCCESS) {
                        lupw_latch(s, q, "cuMemcpyDtoHAsync");
                        rc = send_data(s, pd->token, 0, NULL, 0, q);
                } else {
                        rc = 0;
                        for (uint64_t off = 0; off < pd->size && rc == 0;) {
                                size_t k = pd->size - off < LUP_BULK_CHUNK ? (size_t)(pd->size - off) : LUP_BULK_CHUNK;
                                rc = send_data(s, pd->token, off, s->dtoh.ring + pd->ring_off + off, k, CUDA_SUCCESS);
                                off += k;
                        }
                }
                s->dtoh.tail = pd->ring_off + pd->size;
                s->dtoh.first = (s->dtoh.first + 1) % LUPW_MAX_PENDING;
                if (--s->dtoh.n_pending == 0)
                        s->dtoh.head = s->dtoh.tail = 0;
                if (rc < 0)
                        return rc;
        }
        return 0;
}

/* Room for n bytes in the ring, waiting for older copies when it is full. */
static int ring_take(struct lupw_session *s, size_t n, size_t *ret_off)
{
        if (s->dtoh.n_pending == LUPW_MAX_PENDING || s->dtoh.head + n > s->dtoh.ring_size) {
                int rc = lupw_flush_pending(s, true);
                if (rc < 0)
                        return rc;
        }
        *ret_off = s->dtoh.head;
        s->dtoh.head += n;
        return 0;
}

static int dtoh_async_check(struct lupw_session *s, const struct lup_hdr *h, const uint8_t *p, union lupw_ctl_args *ret,
                            CUresult *ret_early)
{
        const char *why;
        if (lup_dtoh_async_decode(p, h->len, &ret->dtoh, &why) < 0) {
                lupw_set_why(s, why);
                return -EBADMSG;
        }
        return lupw_check_devptr(s, ret->dtoh.src) < 0 ? -EBADMSG : 0;
}

/* A failure ends the token with a DATA frame carrying it; lupw_run_op()
 * latches it too, for the next synchronous call. */
static int dtoh_async_run(struct lupw_session *s, const struct lup_hdr *h, const union lupw_ctl_args *a,
                          struct lup_wr *out, CUresult *status)
{
        const struct lup_dtoh *c = &a->dtoh;
        uint64_t n = c->size, token = c->token;
        CUresult res = *status;
        CUstream st = NULL;

        if (res == CUDA_SUCCESS)
                res = lupw_check_range(s, c->src, n, 1);
        if (res == CUDA_SUCCESS)
                res = lupw_stream(s, c->stream, &st);
        if (res == CUDA_SUCCESS && !s->dtoh.ring && n <= LUP_MAX_ASYNC_DTOH) {
                void *ring = NULL;
                if (s->be.fn.cuMemAllocHost_v2(&ring, RING_SIZE) == CUDA_SUCCESS) {
                        s->dtoh.ring = ring;
                        s->dtoh.ring_size = RING_SIZE;
                }
        }
        if (res == CUDA_SUCCESS && (n > LUP_MAX_ASYNC_DTOH || !s->dtoh.ring)) {
                /* too big for the ring: copy now, after the stream's earlier work */
                res = s->be.fn.cuStreamSynchronize(st);
                if (res == CUDA_SUCCESS) {
                        int rc = lupw_flush_pending(s, true);
                        return rc < 0 ? rc : copy_out_sync(s, NULL, token, lupw_xlate(s, c->src), n, st);
                }
        }
        if (res != CUDA_SUCCESS) {
                *status = res;
                return send_data(s, token, 0, NULL, 0, res);
        }
        size_t off;
        int rc = ring_take(s, (size_t)n, &off);
        if (rc < 0)
                return rc;
        struct lupw_pending_dtoh *pd = pending_at(s, s->dtoh.n_pending);
        if (!pd->done && s->be.fn.cuEventCreate(&pd->done, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
                pd->done = NULL;
        res = pd->done ? s->be.fn.cuMemcpyDtoHAsync_v2(s->dtoh.ring + off, lupw_xlate(s, c->src), n, st)
                       : CUDA_ERROR_OUT_OF_MEMORY;
        if (res == CUDA_SUCCESS)
                res = s->be.fn.cuEventRecord(pd->done, st);
        if (res != CUDA_SUCCESS) {
                s->dtoh.head = off;
                *status = res;
                return send_data(s, token, 0, NULL, 0, res);
        }
        pd->token = token;
        pd->size = n;
        pd->ring_off = off;
        s->dtoh.n_pending++;
        return 0;
}

/* the data follows as DATA frames, before the answer to any later sync call */
const struct lupw_ctl_op lupw_ctl_dtoh_async = {
        .name = "cuMemcpyDtoHAsync",
        .sync = LUPW_ASYNC_ONLY,
        .why_flag = "malformed DTOH_ASYNC frame",
        .need_ctx = true,
        .check = dtoh_async_check,
        .run = dtoh_async_run,
};

void lupw_copy_drop_events(struct lupw_session *s)
{
        (void)lupw_flush_pending(s, true);
        lupw_htod_wait(s);
        if (s->copy.htod_done)
                s->be.fn.cuEventDestroy_v2(s->copy.htod_done);
        s->copy.htod_done = NULL;
        for (int i = 0; i < 2; i++) {
                if (s->copy.chunk_done[i])
                        s->be.fn.cuEventDestroy_v2(s->copy.chunk_done[i]);
                s->copy.chunk_done[i] = NULL;
        }
        for (unsigned i = 0; i < LUPW_MAX_PENDING; i++) {
                if (s->dtoh.pending[i].done)
                        s->be.fn.cuEventDestroy_v2(s->dtoh.pending[i].done);
                s->dtoh.pending[i].done = NULL;
        }
}

void lupw_copy_free(struct lupw_session *s)
{
        lupw_lanes_free(s);
        lupw_piece_hash_free(s);
        lupw_htod_wait(s);
        if (s->copy.htod_done)
                s->be.fn.cuEventDestroy_v2(s->copy.htod_done);
        for (int i = 0; i < 2; i++)
                if (s->copy.chunk_done[i])
                        s->be.fn.cuEventDestroy_v2(s->copy.chunk_done[i]);
        for (unsigned i = 0; i < LUPW_MAX_PENDING; i++)
                if (s->dtoh.pending[i].done)
                        s->be.fn.cuEventDestroy_v2(s->dtoh.pending[i].done);
        if (s->dtoh.ring)
                s->be.fn.cuMemFreeHost(s->dtoh.ring);
        s->dtoh.ring = NULL;
}
