/* SPDX-License-Identifier: MIT */
#include "buf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t *rd_take(struct lup_rd *r, size_t n)
{
        if (r->err)
                return NULL;
        if (n > r->len - r->off) {
                r->err = -EBADMSG;
                return NULL;
        }
        const uint8_t *p = r->p + r->off;
        r->off += n;
        return p;
}

int lup_rd_u8(struct lup_rd *r, uint8_t *ret)
{
        const uint8_t *p = rd_take(r, 1);
        *ret = p ? p[0] : 0;
        return p ? 0 : r->err;
}

int lup_rd_u16(struct lup_rd *r, uint16_t *ret)
{
        const uint8_t *p = rd_take(r, 2);
        *ret = p ? lup_le16(p) : 0;
        return p ? 0 : r->err;
}

int lup_rd_u32(struct lup_rd *r, uint32_t *ret)
{
        const uint8_t *p = rd_take(r, 4);
        *ret = p ? lup_le32(p) : 0;
        return p ? 0 : r->err;
}

int lup_rd_i32(struct lup_rd *r, int32_t *ret)
{
        uint32_t v;
        int rc = lup_rd_u32(r, &v);
        *ret = (int32_t)v;
        return rc;
}

int lup_rd_f32(struct lup_rd *r, float *ret)
{
        uint32_t v;
        int rc = lup_rd_u32(r, &v);
        memcpy(ret, &v, sizeof(v));
        return rc;
}

int lup_rd_u64(struct lup_rd *r, uint64_t *ret)
{
        const uint8_t *p = rd_take(r, 8);
        *ret = p ? lup_le64(p) : 0;
        return p ? 0 : r->err;
}

int lup_rd_bytes(struct lup_rd *r, size_t n, const uint8_t **ret)
{
        const uint8_t *p = rd_take(r, n);
        *ret = p;
        return p ? 0 : r->err;
}

int lup_rd_copy(struct lup_rd *r, void *out, size_t n)
{
        const uint8_t *p = rd_take(r, n);
        if (!p) {
                memset(out, 0, n);
                return r->err;
        }
        memcpy(out, p, n);
        return 0;
}

int lup_rd_str16(struct lup_rd *r, size_t max, const char **ret, size_t *ret_len)
{
        uint16_t n;
        const uint8_t *p;

        *ret = NULL;
        *ret_len = 0;
        if (lup_rd_u16(r, &n) < 0)
                return r->err;
        if (n > max) {
                r->err = -EBADMSG;
                return r->err;
        }
        if (lup_rd_bytes(r, n, &p) < 0)
                return r->err;
        if (memchr(p, 0, n)) {
                r->err = -EBADMSG;
                return r->err;
        }
        *ret = (const char *)p;
        *ret_len = n;
        return 0;
}

int lup_rd_finish(const struct lup_rd *r)
{
        if (r->err)
                return r->err;
        return r->off == r->len ? 0 : -EBADMSG;
}

uint8_t *lup_wr_reserve(struct lup_wr *w, size_t n)
{
        if (w->err)
                return NULL;
        if (n > w->cap - w->len) {
                w->err = -ENOBUFS;
                return NULL;
        }
        uint8_t *p = w->p + w->len;
        w->len += n;
        return p;
}

void lup_wr_u8(struct lup_wr *w, uint8_t v)
{
        uint8_t *p = lup_wr_reserve(w, 1);
        if (p)
                p[0] = v;
}

void lup_wr_u16(struct lup_wr *w, uint16_t v)
{
        uint8_t *p = lup_wr_reserve(w, 2);
        if (p)
                lup_put16(p, v);
}

void lup_wr_u32(struct lup_wr *w, uint32_t v)
{
        uint8_t *p = lup_wr_reserve(w, 4);
        if (p)
                lup_put32(p, v);
}

void lup_wr_i32(struct lup_wr *w, int32_t v)
{
        lup_wr_u32(w, (uint32_t)v);
}

void lup_wr_f32(struct lup_wr *w, float v)
{
        uint32_t u;
        memcpy(&u, &v, sizeof(u));
        lup_wr_u32(w, u);
}

void lup_wr_u64(struct lup_wr *w, uint64_t v)
{
        uint8_t *p = lup_wr_reserve(w, 8);
        if (p)
                lup_put64(p, v);
}

void lup_wr_bytes(struct lup_wr *w, const void *src, size_t n)
{
        uint8_t *p = lup_wr_reserve(w, n);
        if (p && n)
                memcpy(p, src, n);
}

void lup_wr_str16(struct lup_wr *w, const char *s, size_t n)
{
        if (n > UINT16_MAX) {
                w->err = -ENOBUFS;
                return;
        }
        lup_wr_u16(w, (uint16_t)n);
        lup_wr_bytes(w, s, n);
}

int lup_array_grow(void **p, size_t *cap, size_t need, size_t elem)
{
        if (need <= *cap)
                return 0;
        size_t ncap = *cap ? *cap * 2 : 16;
        while (ncap < need)
                ncap *= 2;
        void *n = realloc(*p, ncap * elem);
        if (!n)
                return -ENOMEM;
        *p = n;
        *cap = ncap;
        return 0;
}
