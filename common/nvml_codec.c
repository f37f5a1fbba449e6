/* SPDX-License-Identifier: MIT */
/* The NVML snapshot's codec (common/nvml_codec.h). */
#include "nvml_codec.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"

struct lup_nvml_val *lup_nvml_sys(struct lup_nvml_snapshot *s, unsigned k)
{
        if (k < LUP_NVML_K_DRIVER_VERSION || k >= LUP_NVML_K_SYS_LAST)
                return NULL;
        return &s->sys[k - LUP_NVML_K_DRIVER_VERSION];
}

struct lup_nvml_val *lup_nvml_devval(struct lup_nvml_dev *d, unsigned k)
{
        if (k < LUP_NVML_K_NAME || k >= LUP_NVML_K_DEV_LAST)
                return NULL;
        return &d->v[k - LUP_NVML_K_NAME];
}

void lup_nvml_set_num(struct lup_nvml_val *v, uint64_t num)
{
        v->present = true;
        v->ret = 0;
        v->num = num;
}

void lup_nvml_set_str(struct lup_nvml_val *v, const char *s)
{
        v->present = true;
        v->ret = 0;
        snprintf(v->str, sizeof(v->str), "%s", s);
}

void lup_nvml_set_ret(struct lup_nvml_val *v, uint32_t ret)
{
        v->present = true;
        v->ret = ret ? ret : LUP_NVML_NOT_SUPPORTED;
}

void lup_nvml_req_encode(uint8_t out[static LUP_NVML_REQ_SIZE])
{
        lup_put32(out, LUP_NVML_MAGIC);
        lup_put32(out + 4, LUP_NVML_VERSION);
        lup_put32(out + 8, LUP_NVML_SNAPSHOT);
        lup_put32(out + 12, 0);
}

size_t lup_nvml_req_encode_auth(uint8_t *out, const uint8_t *auth, size_t auth_len)
{
        lup_nvml_req_encode(out);
        if (!auth || auth_len == 0 || auth_len > LUP_MAX_AUTH)
                return LUP_NVML_REQ_SIZE;
        lup_put32(out + 12, LUP_NVML_REQ_AUTH);
        lup_put16(out + 16, (uint16_t)auth_len);
        memcpy(out + 18, auth, auth_len);
        return LUP_NVML_REQ_SIZE + 2 + auth_len;
}

int lup_nvml_req_decode_auth(const uint8_t *p, size_t n, const uint8_t **ret_auth, size_t *ret_auth_len,
                             const char **ret_why)
{
        uint32_t flags;

        *ret_auth = NULL;
        *ret_auth_len = 0;
        if (n < LUP_NVML_REQ_SIZE || n > LUP_NVML_REQ_MAX) {
                *ret_why = "NVML request has the wrong size";
                return -EBADMSG;
        }
        if (lup_le32(p) != LUP_NVML_MAGIC || lup_le32(p + 4) != LUP_NVML_VERSION) {
                *ret_why = "NVML request: bad magic or version";
                return -EBADMSG;
        }
        flags = lup_le32(p + 12);
        if (lup_le32(p + 8) != LUP_NVML_SNAPSHOT || (flags & ~LUP_NVML_REQ_AUTH)) {
                *ret_why = "NVML request: unknown request or flags";
                return -EBADMSG;
        }
        if (!(flags & LUP_NVML_REQ_AUTH)) {
                if (n != LUP_NVML_REQ_SIZE) {
                        *ret_why = "NVML request has the wrong size";
                        return -EBADMSG;
                }
                return 0;
        }
        if (n < LUP_NVML_REQ_SIZE + 3) {
                *ret_why = "NVML request: the token is missing";
                return -EBADMSG;
        }
        size_t len = lup_le16(p + 16);
        if (len == 0 || len > LUP_MAX_AUTH || n != LUP_NVML_REQ_SIZE + 2 + len) {
                *ret_why = "NVML request: the token's length is wrong";
                return -EBADMSG;
        }
        *ret_auth = p + 18;
        *ret_auth_len = len;
        return 0;
}

int lup_nvml_req_decode(const uint8_t *p, size_t n, const char **ret_why)
{
        const uint8_t *a;
        size_t al;

        return lup_nvml_req_decode_auth(p, n, &a, &al, ret_why);
}

static void put_entry(struct lup_wr *w, unsigned k, const struct lup_nvml_val *v)
{
        lup_wr_u16(w, (uint16_t)k);
        if (v->ret) {
                lup_wr_u16(w, 0);
                lup_wr_u32(w, v->ret);
        } else if (lup_nvml_key_is_str(k)) {
                size_t n = strnlen(v->str, LUP_NVML_MAX_STR);
                lup_wr_u16(w, (uint16_t)n);
                lup_wr_u32(w, 0);
                lup_wr_bytes(w, v->str, n);
        } else {
                lup_wr_u16(w, 8);
                lup_wr_u32(w, 0);
                lup_wr_u64(w, v->num);
        }
}

static void put_list(struct lup_wr *w, const struct lup_nvml_val *vals, unsigned first, unsigned n)
{
        uint32_t count = 0;

        for (unsigned i = 0; i < n; i++)
                count += vals[i].present;
        lup_wr_u32(w, count);
        for (unsigned i = 0; i < n; i++)
                if (vals[i].present)
                        put_entry(w, first + i, &vals[i]);
}

int lup_nvml_encode(const struct lup_nvml_snapshot *s, uint8_t *out, size_t cap, size_t *ret_len)
{
        struct lup_wr w = lup_wr_init(out, cap);

        if (s->n_devices > LUP_MAX_DEVICES)
                return -EINVAL;
        lup_wr_u32(&w, LUP_NVML_MAGIC);
        lup_wr_u32(&w, LUP_NVML_VERSION);
        lup_wr_u32(&w, s->backend);
        lup_wr_u32(&w, s->n_devices);
        lup_wr_u64(&w, s->taken_ms);
        put_list(&w, s->sys, LUP_NVML_K_DRIVER_VERSION, LUP_NVML_N_SYS);
        for (uint32_t d = 0; d < s->n_devices; d++) {
                const struct lup_nvml_dev *dev = &s->dev[d];
                put_list(&w, dev->v, LUP_NVML_K_NAME, LUP_NVML_N_DEV);
                uint32_t np = dev->n_procs < LUP_NVML_MAX_PROCS ? dev->n_procs : LUP_NVML_MAX_PROCS;
                lup_wr_u32(&w, np);
                for (uint32_t i = 0; i < np; i++) {
                        lup_wr_u32(&w, dev->procs[i].pid);
                        lup_wr_u64(&w, dev->procs[i].used);
                }
        }
        if (w.err)
                return w.err;
        *ret_len = w.len;
        return 0;
}

/* One entry into the list vals (keys [first, first + n)). */
static int get_entry(struct lup_rd *r, struct lup_nvml_val *vals, unsigned first, unsigned n, const char **why)
{
        uint16_t k, len;
        uint32_t ret;
        const uint8_t *b;

        lup_rd_u16(r, &k);
        lup_rd_u16(r, &len);
        lup_rd_u32(r, &ret);
        if (r->err)
                goto short_msg;
        if (k < first || k >= first + n) {
                *why = "NVML snapshot: unknown key";
                return -EBADMSG;
        }
        struct lup_nvml_val *v = &vals[k - first];
        if (v->present) {
                *why = "NVML snapshot: a key appears twice";
                return -EBADMSG;
        }
        v->present = true;
        v->ret = ret;
        if (ret) {
                if (len) {
                        *why = "NVML snapshot: a failed value carries bytes";
                        return -EBADMSG;
                }
                return 0;
        }
        if (lup_nvml_key_is_str(k) ? len > LUP_NVML_MAX_STR : len != 8) {
                *why = "NVML snapshot: a value has the wrong length";
                return -EBADMSG;
        }
        if (lup_rd_bytes(r, len, &b) < 0)
                goto short_msg;
        if (lup_nvml_key_is_str(k)) {
                if (memchr(b, 0, len)) {
                        *why = "NVML snapshot: a string holds a NUL";
                        return -EBADMSG;
                }
                memcpy(v->str, b, len);
                v->str[len] = 0;
        } else {
                v->num = lup_le64(b);
        }
        return 0;
short_msg:
        *why = "NVML snapshot: truncated";
        return -EBADMSG;
}

static int get_list(struct lup_rd *r, struct lup_nvml_val *vals, unsigned first, unsigned n, const char **why)
{
        uint32_t count;

        if (lup_rd_u32(r, &count) < 0) {
                *why = "NVML snapshot: truncated";
                return -EBADMSG;
        }
        if (count > n) {
                *why = "NVML snapshot: too many values";
                return -EBADMSG;
        }
        for (uint32_t i = 0; i < count; i++)
                if (get_entry(r, vals, first, n, why) < 0)
                        return -EBADMSG;
        for (unsigned i = 0; i < n; i++)
                if (!vals[i].present)
                        vals[i].ret = LUP_NVML_NOT_SUPPORTED;
        return 0;
}

int lup_nvml_decode(const uint8_t *p, size_t n, struct lup_nvml_snapshot *s, const char **ret_why)
{
        struct lup_rd r = lup_rd_init(p, n);
        uint32_t magic, version;

        memset(s, 0, sizeof(*s));
        lup_rd_u32(&r, &magic);
        lup_rd_u32(&r, &version);
        lup_rd_u32(&r, &s->backend);
        lup_rd_u32(&r, &s->n_devices);
        lup_rd_u64(&r, &s->taken_ms);
        if (r.err || magic != LUP_NVML_MAGIC || version != LUP_NVML_VERSION) {
                *ret_why = "NVML snapshot: bad header";
                return -EBADMSG;
        }
        if (s->n_devices > LUP_MAX_DEVICES) {
                *ret_why = "NVML snapshot: too many devices";
                return -EBADMSG;
        }
        if (get_list(&r, s->sys, LUP_NVML_K_DRIVER_VERSION, LUP_NVML_N_SYS, ret_why) < 0)
                return -EBADMSG;
        for (uint32_t d = 0; d < s->n_devices; d++) {
                struct lup_nvml_dev *dev = &s->dev[d];
                if (get_list(&r, dev->v, LUP_NVML_K_NAME, LUP_NVML_N_DEV, ret_why) < 0)
                        return -EBADMSG;
                if (lup_rd_u32(&r, &dev->n_procs) < 0 || dev->n_procs > LUP_NVML_MAX_PROCS) {
                        *ret_why = "NVML snapshot: bad process count";
                        return -EBADMSG;
                }
                for (uint32_t i = 0; i < dev->n_procs; i++) {
                        lup_rd_u32(&r, &dev->procs[i].pid);
                        lup_rd_u64(&r, &dev->procs[i].used);
                }
        }
        if (lup_rd_finish(&r) < 0) {
                *ret_why = "NVML snapshot: truncated or trailing bytes";
                return -EBADMSG;
        }
        return 0;
}
