/* SPDX-License-Identifier: MIT */
/*
 * Starting a session in the worker: the driver, the worker's own context,
 * pinned buffers, the arena; and the HELLO reply (device snapshot, arena,
 * resume token, last executed sequence number), sent for a new session and
 * again for every resume.
 */
#define LUP_LOG_CAT LUP_LOGC_SESSION
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "ctl.h"
#include "ctl_codec.h"
#include "frame.h"
#include "log.h"
#include "net.h"
#include "worker/lanes.h"
#include "worker/session.h"
#include "worker/slot_lease.h"

int lupw_refuse_on(struct lupw_session *s, int fd, struct lup_tls *tls, const struct lup_hdr *req, CUresult status,
                   const char *msg)
{
        uint8_t buf[512];
        struct lup_wr w = lup_wr_init(buf, sizeof(buf));
        lup_refusal_encode(&w, msg, 400);
        lup_err("session %s refused: %s", s->name[0] ? s->name : "?", msg);
        struct lup_hdr h = { .len = (uint32_t)w.len, .op = req->op, .flags = LUP_F_REPLY, .lane = req->lane,
                             .status = (uint32_t)status, .seq = req->seq, .ctx = s->last_seq };
        return lupw_send_ctl(s, fd, tls, &h, buf, w.len);
}

int lupw_refuse(struct lupw_session *s, const struct lup_hdr *req, CUresult status, const char *msg)
{
        return lupw_refuse_on(s, s->fd, s->tls, req, status, msg);
}

/* One device of the HELLO reply's snapshot, as the driver describes it. */
static void snap_device(struct lupw_session *s, struct lup_hello_dev *d, int dev)
{
        const struct lupw_backend *be = &s->be.fn;
        char name[LUP_MAX_DEV_NAME] = "";
        CUuuid uuid = { { 0 } };
        size_t total = 0;

        be->cuDeviceGetName(name, sizeof(name), dev);
        be->cuDeviceGetUuid_v2(&uuid, dev);
        be->cuDeviceTotalMem_v2(&total, dev);
        size_t name_len = strnlen(name, sizeof(name) - 1);
        memcpy(d->name, name, name_len);
        d->name[name_len] = 0;
        memcpy(d->uuid, uuid.bytes, sizeof(d->uuid));
        d->total_mem = total;
        d->n_attr = CU_DEVICE_ATTRIBUTE_MAX - 1 < LUP_MAX_ATTRS ? CU_DEVICE_ATTRIBUTE_MAX - 1 : LUP_MAX_ATTRS;
        for (uint32_t a = 1; a <= d->n_attr; a++) {
                int v = 0;
                CUresult r = be->cuDeviceGetAttribute(&v, (CUdevice_attribute)a, dev);
                d->attr[a - 1] = r == CUDA_SUCCESS ? v : 0;
                d->attr_res[a - 1] = (uint32_t)r;
        }
}

const char *lupw_open_device(struct lupw_session *s, CUresult *ret_status)
{
        const struct lupw_backend *be = &s->be.fn;
        *ret_status = CUDA_ERROR_NO_DEVICE;
        lupw_output_init();
        if (backend_open(s->cfg, &s->be) < 0)
                return "the server has no usable CUDA driver";
        if (be->cuDeviceGetCount(&s->n_devices) != CUDA_SUCCESS || s->n_devices <= 0)
                return "the server has no CUDA device";
        if (s->n_devices > (int)LUP_MAX_DEVICES)
                s->n_devices = LUP_MAX_DEVICES;
        /* The worker holds device 0's primary context for the session's
         * lifetime: VMM calls need a context, and the arena lives in it. */
        CUresult r = be->cuDevicePrimaryCtxRetain(&s->ctx.primary[0], 0);
        if (r == CUDA_SUCCESS)
                r = be->cuCtxSetCurrent(s->ctx.primary[0]);
        if (r != CUDA_SUCCESS) {
                *ret_status = r;
                return "cannot create a context on device 0";
        }
        /* Pinned receive and bounce buffers: host<->device copies from them
         * run at PCIe speed, so a copy costs little next to the network. */
        void *pin = NULL;
        if (be->cuMemAllocHost_v2(&pin, s->rx.cap) == CUDA_SUCCESS) {
                free(s->rx.buf);
                s->rx.buf = pin;
                s->rx.pinned = true;
        }
        if (be->cuMemAllocHost_v2(&pin, LUP_BULK_CHUNK) == CUDA_SUCCESS) {
                free(s->copy.staging);
                s->copy.staging = pin;
                s->copy.staging_pinned = true;
                if (be->cuMemAllocHost_v2(&pin, LUP_BULK_CHUNK) == CUDA_SUCCESS)
                        s->copy.staging2 = pin;
        }
        *ret_status = CUDA_SUCCESS;
        return NULL;
}

/* The session's arena: the slot the supervisor gave, or, in a fleet that
 * agrees on slots through the store, the first one free there. */
static int take_arena(struct lupw_session *s, const struct lup_hello *hello, char *err, size_t cap)
{
        uint64_t avoid = (hello->flags & LUP_HELLO_AVOID_SLOTS) ? hello->avoid_slots : 0;
        if (!s->slot_any && (avoid >> s->slot & 1)) { /* the supervisor judged the same HELLO */
                snprintf(err, cap, "arena slot %u was given, which the client holds for another server", s->slot);
                return -EADDRINUSE;
        }
        if (!s->slot_any)
                return lupw_reserve_arena(s, s->slot, err, cap);
        if (lupw_slot_fleet(s))
                return lupw_slot_take_new(s, s->slot, avoid, err, cap);
        snprintf(err, cap,
                 "this server cannot agree on a device address range with the other hosts of its checkpoint store "
                 "(the store %s); try again",
                 s->ckpt.ops ? "has no leases now" : "cannot be opened");
        return -EADDRINUSE;
}

int lupw_send_hello_reply(struct lupw_session *s, const struct lup_hdr *req, const struct lup_hello *hello)
{
        int drv = 0;
        s->be.fn.cuDriverGetVersion(&drv);
        size_t cap = 1024 + (size_t)s->n_devices * (LUP_MAX_DEV_NAME + 64 + LUP_MAX_ATTRS * 8);
        uint8_t *buf = malloc(cap);
        struct lup_hello_dev *devs = calloc(s->n_devices ? (size_t)s->n_devices : 1, sizeof(*devs));
        if (!buf || !devs) {
                free(buf);
                free(devs);
                return lupw_refuse(s, req, CUDA_ERROR_OUT_OF_MEMORY, "out of memory in the worker");
        }
        /* answers written before this connection go first: the HELLO
         * reply says where the reply stream stands */
        lupw_flush_out(s);
        struct lup_hello_reply rep = {
                .driver_version = (uint32_t)drv,
                .backend = (uint32_t)s->be.kind,
                .arena_base = s->mem.arena.base,
                .arena_size = LUP_ARENA_SIZE,
                .last_executed = s->last_seq,
                .n_devices = (uint32_t)s->n_devices,
                .devs = devs,
                .resend = (hello->flags & LUP_HELLO_RESEND) != 0,
        };
        lupw_tx_hello(s, hello, &rep.resend_from, &rep.tx_end);
        memcpy(rep.token, s->token, LUP_TOKEN_SIZE);
        for (int d = 0; d < s->n_devices; d++)
                snap_device(s, &devs[d], d);
        struct lup_wr w = lup_wr_init(buf, cap);
        int rc = lup_hello_reply_encode(&w, &rep);
        if (rc < 0) {
                rc = lupw_refuse(s, req, CUDA_ERROR_UNKNOWN, "device snapshot too large");
        } else {
                struct lup_hdr h = { .len = (uint32_t)w.len, .op = req->op, .flags = LUP_F_REPLY, .lane = req->lane,
                                     .seq = req->seq, .ctx = s->last_seq };
                rc = lupw_send_ctl(s, s->fd, s->tls, &h, buf, w.len);
                /* then what the client missed, before anything new */
                if (rc == 0 && rep.resend_from < rep.tx_end)
                        rc = lupw_tx_resend(s, rep.resend_from);
                if (rc == 0 && rep.resend)
                        rc = lupw_tx_ack(s, rep.resend_from);
        }
        free(devs);
        free(buf);
        return rc;
}

int lupw_setup_session(struct lupw_session *s, const struct lup_hdr *req, const struct lup_hello *hello)
{
        CUresult st;
        char err[400];
        const char *why = lupw_open_device(s, &st);
        if (why)
                return lupw_refuse(s, req, st, why);
        /* One host at a time runs a session of this name: the lease first,
         * before the client hears of the session (worker/lease.c), then
         * the arena slot, which the lease's holder agrees on with the
         * fleet (worker/slot_lease.c). */
        if (lupw_ckpt_open(s) == 0) {
                int lr = lupw_lease_claim(s);
                if (lr == -EBUSY) {
                        snprintf(err, sizeof(err),
                                 "session %s runs on host %s, which shares this host's checkpoint store (it holds "
                                 "the session's lease)",
                                 hello->name, s->lease.holder);
                        (void)lupw_refuse(s, req, CUDA_ERROR_DEVICE_UNAVAILABLE, err);
                        return -EBUSY; /* refused: the session is not started */
                }
                if (lr < 0) {
                        (void)lupw_refuse(s, req, CUDA_ERROR_DEVICE_UNAVAILABLE,
                                          "the checkpoint store cannot say whether another host runs this session "
                                          "(its lease); try again");
                        return lr;
                }
        }
        if (take_arena(s, hello, err, sizeof(err)) < 0) {
                (void)lupw_refuse(s, req, CUDA_ERROR_OUT_OF_MEMORY, err);
                return -EADDRINUSE;
        }
        /* The resume token: only its holder may take the session over later. */
        if (getrandom(s->token, sizeof(s->token), 0) != (ssize_t)sizeof(s->token)) {
                (void)lupw_refuse(s, req, CUDA_ERROR_OPERATING_SYSTEM, "no randomness for the session token");
                return -EIO;
        }
        int rc = lupw_send_hello_reply(s, req, hello);
        /* The checkpoint provider opens now, not at the first checkpoint: a
         * provider that cannot open is logged while the session can still
         * be looked after, and one that reserves its storage up front (the
         * example's ",reserve") does it before any drain waits on it; so
         * does the GPU hash kernel. A failure is not the session's: the
         * checkpoint tries again. */
        if (rc == 0 && s->ckpt.inst)
                lupw_lanes_prepare(s);
        return rc;
}

int lupw_parse_assign(const uint8_t *msg, size_t n, uint32_t want_type, uint32_t *ret_slot, struct lup_hdr *ret_req,
                      struct lup_hello *ret_hello, bool *ret_tls, uint8_t ret_ticket[LUP_TICKET_SIZE],
                      const char **ret_why)
{
        struct lup_rd r = lup_rd_init(msg, n);
        uint32_t type, slot, lane, hlen, tls = 0;
        uint64_t seq;
        const uint8_t *hp;
        lup_rd_u32(&r, &type);
        lup_rd_u32(&r, &slot);
        lup_rd_u64(&r, &seq);
        lup_rd_u32(&r, &lane);
        lup_rd_u32(&r, &hlen);
        lup_rd_bytes(&r, hlen, &hp);
        if (!r.err && r.off < r.len) { /* the TLS trailer (daemon/ctl.h) */
                lup_rd_u32(&r, &tls);
                lup_rd_copy(&r, ret_ticket, LUP_TICKET_SIZE);
        }
        *ret_why = "malformed control message";
        if (lup_rd_finish(&r) < 0 || type != want_type || (slot & ~LUPD_ASSIGN_ANY_SLOT) >= LUP_ARENA_SLOTS ||
            lane >= LUP_MAX_LANES || (tls != 0 && tls != LUPD_CTL_TLS) ||
            lup_hello_decode(hp, hlen, ret_hello, ret_why) < 0)
                return -EBADMSG;
        *ret_slot = slot;
        *ret_tls = tls == LUPD_CTL_TLS;
        *ret_req = (struct lup_hdr){ .op = LUP_OP_HELLO, .flags = LUP_F_SYNC, .lane = lane, .seq = seq };
        return 0;
}

void lupw_ctl_send(struct lupw_session *s, uint32_t type, int32_t status, uint32_t slot, bool with_slot)
{
        uint8_t b[12];
        lup_put32(b, type);
        lup_put32(b + 4, (uint32_t)status);
        lup_put32(b + 8, slot);
        if (lup_send_fds(s->ctl_fd, b, with_slot ? 12 : 8, NULL, 0) < 0)
                lup_warn("session %s: cannot report to the supervisor", s->name);
}
