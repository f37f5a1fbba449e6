/* SPDX-License-Identifier: MIT */
#include "ctl_codec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- HELLO reply and refusal */

static int encode_dev(struct lup_wr *w, const struct lup_hello_dev *d)
{
        size_t name_len = strnlen(d->name, sizeof(d->name));

        if (name_len > LUP_MAX_DEV_NAME || d->n_attr > LUP_MAX_ATTRS)
                return -EINVAL;
        lup_wr_str16(w, d->name, name_len);
        lup_wr_bytes(w, d->uuid, sizeof(d->uuid));
        lup_wr_u64(w, d->total_mem);
        lup_wr_u32(w, d->n_attr);
        for (uint32_t a = 0; a < d->n_attr; a++) {
                lup_wr_i32(w, d->attr[a]);
                lup_wr_u32(w, d->attr_res[a]);
        }
        return 0;
}

int lup_hello_reply_encode(struct lup_wr *w, const struct lup_hello_reply *r)
{
        if (r->n_devices > LUP_MAX_DEVICES)
                return -EINVAL;
        lup_wr_u32(w, LUP_PROTO_MAGIC);
        lup_wr_u32(w, LUP_PROTO_VERSION);
        lup_wr_u32(w, r->driver_version);
        lup_wr_u32(w, r->backend);
        lup_wr_bytes(w, r->token, LUP_TOKEN_SIZE);
        lup_wr_u64(w, r->arena_base);
        lup_wr_u64(w, r->arena_size);
        lup_wr_u64(w, r->last_executed);
        lup_wr_u32(w, r->n_devices);
        for (uint32_t i = 0; i < r->n_devices; i++) {
                int rc = encode_dev(w, &r->devs[i]);
                if (rc < 0)
                        return rc;
        }
        if (r->resend) {
                lup_wr_u64(w, r->resend_from);
                lup_wr_u64(w, r->tx_end);
        }
        return w->err;
}

static int decode_dev(struct lup_rd *r, struct lup_hello_dev *d)
{
        const char *name;
        size_t name_len;

        lup_rd_str16(r, LUP_MAX_DEV_NAME, &name, &name_len);
        lup_rd_copy(r, d->uuid, sizeof(d->uuid));
        lup_rd_u64(r, &d->total_mem);
        lup_rd_u32(r, &d->n_attr);
        if (r->err || d->n_attr > LUP_MAX_ATTRS)
                return -EBADMSG;
        for (uint32_t a = 0; a < d->n_attr; a++) {
                lup_rd_i32(r, &d->attr[a]);
                lup_rd_u32(r, &d->attr_res[a]);
        }
        if (r->err)
                return -EBADMSG;
        memcpy(d->name, name, name_len);
        d->name[name_len] = 0;
        return 0;
}

static bool arena_ok(uint64_t base, uint64_t size)
{
        return size == LUP_ARENA_SIZE && lup_arena_slot_of(base) >= 0;
}

int lup_hello_reply_decode(const uint8_t *p, size_t n, bool resend, struct lup_hello_reply *ret,
                           struct lup_hello_dev devs[static LUP_MAX_DEVICES], const char **ret_why)
{
        struct lup_rd r = lup_rd_init(p, n);
        struct lup_hello_reply h = { .devs = devs, .resend = resend };
        uint32_t magic, proto;

        *ret_why = "malformed HELLO reply";
        lup_rd_u32(&r, &magic);
        lup_rd_u32(&r, &proto);
        lup_rd_u32(&r, &h.driver_version);
        lup_rd_u32(&r, &h.backend);
        lup_rd_copy(&r, h.token, sizeof(h.token));
        lup_rd_u64(&r, &h.arena_base);
        lup_rd_u64(&r, &h.arena_size);
        lup_rd_u64(&r, &h.last_executed);
        lup_rd_u32(&r, &h.n_devices);
        if (r.err || h.n_devices > LUP_MAX_DEVICES)
                return -EBADMSG;
        if (magic != LUP_PROTO_MAGIC || proto != LUP_PROTO_VERSION) {
                *ret_why = "HELLO reply of another protocol";
                return -EBADMSG;
        }
        if (!arena_ok(h.arena_base, h.arena_size)) {
                *ret_why = "HELLO reply names an arena that is not a session slot";
                return -EBADMSG;
        }
        for (uint32_t i = 0; i < h.n_devices; i++)
                if (decode_dev(&r, &devs[i]) < 0)
                        return -EBADMSG;
        if (resend) {
                lup_rd_u64(&r, &h.resend_from);
                lup_rd_u64(&r, &h.tx_end);
        }
        if (lup_rd_finish(&r) < 0 || h.resend_from > h.tx_end)
                return -EBADMSG;
        *ret = h;
        *ret_why = NULL;
        return 0;
}

void lup_refusal_encode(struct lup_wr *w, const char *msg, size_t max_len)
{
        lup_wr_str16(w, msg, strnlen(msg, max_len));
}

void lup_refusal_decode(const uint8_t *p, size_t n, size_t max_len, const char **ret, size_t *ret_len)
{
        struct lup_rd r = lup_rd_init(p, n);
        const char *msg;
        size_t len;

        lup_rd_str16(&r, max_len, &msg, &len);
        *ret = msg ? msg : "";
        *ret_len = msg ? len : 0;
}

/* ---- LAUNCH */

#define ATTR_WIRE (4u + LUP_LAUNCH_ATTR_VALUE)

int lup_launch_encode(struct lup_wr *w, const struct lup_launch *l, uint8_t **ret_params)
{
        if (l->n_attrs > LUP_MAX_LAUNCH_ATTRS || l->param_bytes > LUP_MAX_PARAM_BYTES)
                return -EINVAL;
        lup_wr_u64(w, l->func);
        for (int i = 0; i < 3; i++)
                lup_wr_u32(w, l->grid[i]);
        for (int i = 0; i < 3; i++)
                lup_wr_u32(w, l->block[i]);
        lup_wr_u32(w, l->shmem);
        lup_wr_u64(w, l->stream);
        lup_wr_u32(w, l->flags);
        lup_wr_u32(w, l->n_attrs);
        for (uint32_t i = 0; i < l->n_attrs; i++) {
                lup_wr_u32(w, l->attrs[i].id);
                lup_wr_bytes(w, l->attrs[i].value, LUP_LAUNCH_ATTR_VALUE);
        }
        lup_wr_u32(w, l->param_bytes);
        uint8_t *params = lup_wr_reserve(w, l->param_bytes);
        if (w->err)
                return w->err;
        *ret_params = params;
        return 0;
}

/* The fixed part goes into locals and the attributes are copied only once
 * the whole frame has checked out: *ret stays untouched on failure without
 * a second copy of the attribute table on the launch path. */
int lup_launch_decode(const uint8_t *p, size_t n, struct lup_launch *ret, const char **ret_why)
{
        struct lup_rd r = lup_rd_init(p, n);
        uint64_t func, stream;
        uint32_t dims[6], shmem, flags, n_attrs, pbytes;
        const uint8_t *attrs, *params;

        lup_rd_u64(&r, &func);
        for (int i = 0; i < 6; i++)
                lup_rd_u32(&r, &dims[i]);
        lup_rd_u32(&r, &shmem);
        lup_rd_u64(&r, &stream);
        lup_rd_u32(&r, &flags);
        lup_rd_u32(&r, &n_attrs);
        *ret_why = "malformed LAUNCH frame";
        if (r.err || n_attrs > LUP_MAX_LAUNCH_ATTRS || (flags & ~LUP_LAUNCH_COOPERATIVE))
                return -EBADMSG;
        lup_rd_bytes(&r, (size_t)n_attrs * ATTR_WIRE, &attrs);
        lup_rd_u32(&r, &pbytes);
        lup_rd_bytes(&r, pbytes, &params);
        if (lup_rd_finish(&r) < 0 || pbytes > LUP_MAX_PARAM_BYTES)
                return -EBADMSG;
        ret->func = func;
        memcpy(ret->grid, dims, sizeof(ret->grid));
        memcpy(ret->block, dims + 3, sizeof(ret->block));
        ret->shmem = shmem;
        ret->stream = stream;
        ret->flags = flags;
        ret->n_attrs = n_attrs;
        for (uint32_t i = 0; i < n_attrs; i++) {
                ret->attrs[i].id = lup_le32(attrs + i * ATTR_WIRE);
                memcpy(ret->attrs[i].value, attrs + i * ATTR_WIRE + 4, LUP_LAUNCH_ATTR_VALUE);
        }
        ret->param_bytes = pbytes;
        ret->params = params;
        *ret_why = NULL;
        return 0;
}

/* ---- FUNC_INFO */

void lup_func_info_req_encode(uint8_t out[static LUP_FUNC_INFO_REQ_SIZE], uint64_t func)
{
        lup_put64(out, func);
}

int lup_func_info_req_decode(const uint8_t *p, size_t n, uint64_t *ret_func, const char **ret_why)
{
        if (n != LUP_FUNC_INFO_REQ_SIZE) {
                *ret_why = "malformed FUNC_INFO frame";
                return -EBADMSG;
        }
        *ret_func = lup_le64(p);
        *ret_why = NULL;
        return 0;
}

size_t lup_func_info_size(uint32_t n_params, uint32_t n_attrs)
{
        return 4 + (size_t)n_params * 8 + 4 + (size_t)n_attrs * 8;
}

int lup_func_info_encode(struct lup_wr *w, const struct lup_func_info *fi)
{
        if (fi->n_attrs > LUP_FUNC_INFO_MAX_ATTRS)
                return -EINVAL;
        lup_wr_u32(w, fi->n_params);
        for (uint32_t i = 0; i < fi->n_params; i++) {
                lup_wr_u32(w, fi->params[2 * i]);
                lup_wr_u32(w, fi->params[2 * i + 1]);
        }
        lup_wr_u32(w, fi->n_attrs);
        for (uint32_t a = 0; a < fi->n_attrs; a++) {
                lup_wr_i32(w, fi->attr[a]);
                lup_wr_u32(w, fi->attr_res[a]);
        }
        return w->err;
}

int lup_func_info_decode(const uint8_t *p, size_t n, struct lup_func_info *ret, const char **ret_why)
{
        struct lup_rd r = lup_rd_init(p, n);
        struct lup_func_info fi = { 0 };
        uint32_t na;
        bool too_long = false;

        *ret_why = "malformed FUNC_INFO reply";
        lup_rd_u32(&r, &fi.n_params);
        if (r.err || fi.n_params > LUP_MAX_PARAMS)
                return -EBADMSG;
        fi.params = calloc(fi.n_params ? fi.n_params * 2 : 1, sizeof(*fi.params));
        if (!fi.params) {
                *ret_why = "out of memory";
                return -ENOMEM;
        }
        for (uint32_t i = 0; i < fi.n_params && !r.err; i++) {
                lup_rd_u32(&r, &fi.params[2 * i]);
                lup_rd_u32(&r, &fi.params[2 * i + 1]);
                uint64_t end = (uint64_t)fi.params[2 * i] + fi.params[2 * i + 1];
                if (end > LUP_MAX_PARAM_BYTES)
                        too_long = true;
                else if (end > fi.param_bytes)
                        fi.param_bytes = (uint32_t)end;
        }
        lup_rd_u32(&r, &na);
        /* a newer worker may know more attributes: read them all, keep ours */
        for (uint32_t a = 0; a < na && !r.err; a++) {
                int32_t v;
                uint32_t res;
                lup_rd_i32(&r, &v);
                lup_rd_u32(&r, &res);
                if (a < LUP_FUNC_INFO_MAX_ATTRS) {
                        fi.attr[a] = v;
                        fi.attr_res[a] = res;
                }
        }
        if (lup_rd_finish(&r) < 0 || too_long) {
                free(fi.params);
                return -EBADMSG;
        }
        fi.n_attrs = na < LUP_FUNC_INFO_MAX_ATTRS ? na : LUP_FUNC_INFO_MAX_ATTRS;
        *ret = fi;
        *ret_why = NULL;
        return 0;
}

/* ---- bulk copies */

void lup_htod_encode(uint8_t out[static LUP_HTOD_HDR_SIZE], uint64_t dst, uint64_t stream)
{
        lup_put64(out, dst);
        lup_put64(out + 8, stream);
}

int lup_htod_decode(const uint8_t *p, size_t n, struct lup_htod *ret, const char **ret_why)
{
        if (n <= LUP_HTOD_HDR_SIZE || n - LUP_HTOD_HDR_SIZE > LUP_BULK_CHUNK) {
                *ret_why = "malformed MEMCPY_HTOD frame";
                return -EBADMSG;
        }
        *ret = (struct lup_htod){
                .dst = lup_le64(p), .stream = lup_le64(p + 8), .data = p + LUP_HTOD_HDR_SIZE, .n = n - LUP_HTOD_HDR_SIZE
        };
        *ret_why = NULL;
        return 0;
}

void lup_dtoh_encode(uint8_t out[static LUP_DTOH_SIZE], const struct lup_dtoh *d)
{
        lup_put64(out, d->src);
        lup_put64(out + 8, d->size);
        lup_put64(out + 16, d->stream);
}

void lup_dtoh_async_encode(uint8_t out[static LUP_DTOH_ASYNC_SIZE], const struct lup_dtoh *d)
{
        lup_dtoh_encode(out, d);
        lup_put64(out + 24, d->token);
}

int lup_dtoh_decode(const uint8_t *p, size_t n, struct lup_dtoh *ret, const char **ret_why)
{
        if (n != LUP_DTOH_SIZE) {
                *ret_why = "malformed MEMCPY_DTOH frame";
                return -EBADMSG;
        }
        struct lup_dtoh d = { .src = lup_le64(p), .size = lup_le64(p + 8), .stream = lup_le64(p + 16) };
        if (d.size == 0 || d.size > LUP_MAX_COPY) {
                *ret_why = "absurd MEMCPY_DTOH size";
                return -EBADMSG;
        }
        *ret = d;
        *ret_why = NULL;
        return 0;
}

int lup_dtoh_async_decode(const uint8_t *p, size_t n, struct lup_dtoh *ret, const char **ret_why)
{
        struct lup_dtoh d = { 0 };
        if (n == LUP_DTOH_ASYNC_SIZE)
                d = (struct lup_dtoh){ .src = lup_le64(p),
                                       .size = lup_le64(p + 8),
                                       .stream = lup_le64(p + 16),
                                       .token = lup_le64(p + 24) };
        if (n != LUP_DTOH_ASYNC_SIZE || d.token == 0 || d.size == 0 || d.size > LUP_MAX_COPY) {
                *ret_why = "malformed DTOH_ASYNC frame";
                return -EBADMSG;
        }
        *ret = d;
        *ret_why = NULL;
        return 0;
}

void lup_data_encode(uint8_t out[static LUP_DATA_HDR_SIZE], uint64_t token, uint64_t offset)
{
        lup_put64(out, token);
        lup_put64(out + 8, offset);
}

int lup_data_decode(const uint8_t hdr[static LUP_DATA_HDR_SIZE], uint32_t payload_len, struct lup_data *ret,
                    const char **ret_why)
{
        if (lup_data_short(payload_len)) {
                *ret_why = "short DATA frame";
                return -EBADMSG;
        }
        *ret = (struct lup_data){ .token = lup_le64(hdr),
                                  .offset = lup_le64(hdr + 8),
                                  .n = payload_len - LUP_DATA_HDR_SIZE };
        *ret_why = NULL;
        return 0;
}

void lup_blob_encode(uint8_t out[static LUP_BLOB_HDR_SIZE], uint64_t id, uint64_t total, uint64_t offset)
{
        lup_put64(out, id);
        lup_put64(out + 8, total);
        lup_put64(out + 16, offset);
}

int lup_blob_decode(const uint8_t *p, size_t n, struct lup_blob *ret, const char **ret_why)
{
        struct lup_blob b = { 0 };
        if (n > LUP_BLOB_HDR_SIZE)
                b = (struct lup_blob){ .id = lup_le64(p),
                                       .total = lup_le64(p + 8),
                                       .offset = lup_le64(p + 16),
                                       .data = p + LUP_BLOB_HDR_SIZE,
                                       .n = n - LUP_BLOB_HDR_SIZE };
        if (n <= LUP_BLOB_HDR_SIZE || b.id == 0 || b.total == 0 || b.total > LUP_MAX_BLOB) {
                *ret_why = "malformed BLOB frame";
                return -EBADMSG;
        }
        *ret = b;
        *ret_why = NULL;
        return 0;
}
