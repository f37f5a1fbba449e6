/* SPDX-License-Identifier: MIT */
/* The checkpoint's "arrays" object (ckpt_arrays.h says what it holds). */
#include "ckpt_arrays.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "lupine/wire.h"
#include "u64map.h"

#define ARRAYS_MAGIC 0x31595241525055ull /* "UPARRY1" */

const struct lup_sealed lup_ckpt_arrays_kind = {
        .name = "arrays",
        .magic = ARRAYS_MAGIC,
        .version_min = 1,
        .version_max = 1,
        .min_len = LUP_SEALED_OVERHEAD + 8,
        .max_len = LUP_SEALED_OVERHEAD + 8 + (uint64_t)LUP_CKPT_MAX_ARRAYS * LUP_CKPT_ARRAY_REC +
                   (uint64_t)LUP_CKPT_MAX_TEXOBJS * LUP_CKPT_TEXOBJ_REC,
        .why_damaged = "object arrays is damaged",
        .why_magic = "object arrays is damaged",
        .why_version = "object arrays has a version this lupined does not read",
};

uint64_t lup_ckpt_array_bytes(const struct lup_ckpt_array *a)
{
        if (a->parent)
                return 0;
        uint64_t total = 0;
        for (uint32_t l = 0; l < (a->levels ? a->levels : 1); l++) {
                struct lup_array_desc d = lup_array_level_desc(&a->d, l);
                total += lup_array_shape_of(&d).bytes;
        }
        return total;
}

int lup_ckpt_arrays_encode(const struct lup_ckpt_array *a, uint32_t na, const struct lup_ckpt_texobj *t, uint32_t nt,
                           uint8_t **ret_buf, size_t *ret_len)
{
        if (na > LUP_CKPT_MAX_ARRAYS || nt > LUP_CKPT_MAX_TEXOBJS)
                return -ENOBUFS;
        size_t cap = LUP_SEALED_OVERHEAD + 8 + (size_t)na * LUP_CKPT_ARRAY_REC + (size_t)nt * LUP_CKPT_TEXOBJ_REC;
        uint8_t *buf = malloc(cap);
        if (!buf)
                return -ENOMEM;
        struct lup_wr w = lup_wr_init(buf, cap);
        lup_sealed_begin(&w, &lup_ckpt_arrays_kind, 1);
        lup_wr_u32(&w, na);
        for (uint32_t i = 0; i < na; i++) {
                lup_wr_u64(&w, a[i].id);
                lup_wr_u64(&w, a[i].ctx);
                lup_wr_u64(&w, a[i].parent);
                lup_wr_u32(&w, a[i].level);
                lup_wr_u32(&w, a[i].levels);
                lup_wr_u64(&w, a[i].d.width);
                lup_wr_u64(&w, a[i].d.height);
                lup_wr_u64(&w, a[i].d.depth);
                lup_wr_u32(&w, a[i].d.format);
                lup_wr_u32(&w, a[i].d.channels);
                lup_wr_u32(&w, a[i].d.flags);
                lup_wr_u32(&w, a[i].flags);
        }
        lup_wr_u32(&w, nt);
        for (uint32_t i = 0; i < nt; i++) {
                lup_wr_u64(&w, t[i].value);
                lup_wr_u64(&w, t[i].ctx);
                lup_wr_u8(&w, t[i].surface);
                lup_wr_u8(&w, t[i].has_view);
                lup_wr_bytes(&w, t[i].res, sizeof(t[i].res));
                lup_wr_bytes(&w, t[i].tex, sizeof(t[i].tex));
                lup_wr_bytes(&w, t[i].view, sizeof(t[i].view));
        }
        lup_sealed_end(&w, &lup_ckpt_arrays_kind);
        if (w.err) {
                free(buf);
                return -ENOBUFS;
        }
        *ret_buf = buf;
        *ret_len = w.len;
        return 0;
}

static void read_array(struct lup_rd *r, struct lup_ckpt_array *a)
{
        lup_rd_u64(r, &a->id);
        lup_rd_u64(r, &a->ctx);
        lup_rd_u64(r, &a->parent);
        lup_rd_u32(r, &a->level);
        lup_rd_u32(r, &a->levels);
        lup_rd_u64(r, &a->d.width);
        lup_rd_u64(r, &a->d.height);
        lup_rd_u64(r, &a->d.depth);
        lup_rd_u32(r, &a->d.format);
        lup_rd_u32(r, &a->d.channels);
        lup_rd_u32(r, &a->d.flags);
        lup_rd_u32(r, &a->flags);
}

static bool read_texobj(struct lup_rd *r, struct lup_ckpt_texobj *t)
{
        uint8_t surface = 2, has_view = 2;
        const uint8_t *p;
        lup_rd_u64(r, &t->value);
        lup_rd_u64(r, &t->ctx);
        lup_rd_u8(r, &surface);
        lup_rd_u8(r, &has_view);
        if (lup_rd_bytes(r, sizeof(t->res), &p) == 0)
                memcpy(t->res, p, sizeof(t->res));
        if (lup_rd_bytes(r, sizeof(t->tex), &p) == 0)
                memcpy(t->tex, p, sizeof(t->tex));
        if (lup_rd_bytes(r, sizeof(t->view), &p) == 0)
                memcpy(t->view, p, sizeof(t->view));
        t->surface = surface == 1;
        t->has_view = has_view == 1;
        return !r->err && surface <= 1 && has_view <= 1;
}

static bool desc_equal(const struct lup_array_desc *x, const struct lup_array_desc *y)
{
        return x->width == y->width && x->height == y->height && x->depth == y->depth && x->format == y->format &&
               x->channels == y->channels && x->flags == y->flags;
}

/* Ids, order, descriptors and levels (ckpt_arrays.h). */
static bool arrays_sound(const struct lup_ckpt_array *a, uint32_t n)
{
        struct lup_u64map at;
        bool ok = true;
        lup_u64map_init(&at, n + 1);
        for (uint32_t i = 0; ok && i < n; i++) {
                struct lup_array_shape s;
                const char *why;
                uint64_t pi;
                ok = a[i].id >= LUP_FIRST_HANDLE_ID && (a[i].id - LUP_FIRST_HANDLE_ID) % 16 == 0 &&
                     (i == 0 || a[i].id > a[i - 1].id) && !(a[i].flags & ~LUP_CKPT_ARRAY_DEAD);
                if (ok && !a[i].parent)
                        ok = lup_array_check(&a[i].d, a[i].levels, &s, &why) == 0;
                else if (ok) {
                        ok = a[i].levels == 0 && lup_u64map_get(&at, a[i].parent, &pi) && a[pi].levels &&
                             !a[pi].parent && a[i].level < a[pi].levels;
                        if (ok) {
                                struct lup_array_desc ld = lup_array_level_desc(&a[pi].d, a[i].level);
                                ok = desc_equal(&ld, &a[i].d);
                        }
                }
                if (ok)
                        ok = lup_u64map_put(&at, a[i].id, i) == 0;
        }
        lup_u64map_free(&at);
        return ok;
}

int lup_ckpt_arrays_decode(const uint8_t *p, size_t n, struct lup_ckpt_array **ret_a, uint32_t *ret_na,
                           struct lup_ckpt_texobj **ret_t, uint32_t *ret_nt, const char **ret_why)
{
        const char *why = lup_ckpt_arrays_kind.why_damaged;
        struct lup_ckpt_array *a = NULL;
        struct lup_ckpt_texobj *t = NULL;
        struct lup_rd r;
        uint32_t version, na = 0, nt = 0;
        if (lup_sealed_open(&lup_ckpt_arrays_kind, p, n, &r, &version, ret_why) < 0)
                return -EBADMSG;
        lup_rd_u32(&r, &na);
        if (r.err || na > LUP_CKPT_MAX_ARRAYS || (uint64_t)na * LUP_CKPT_ARRAY_REC + 4 > lup_rd_left(&r))
                goto bad;
        if (na && !(a = calloc(na, sizeof(*a))))
                goto oom;
        for (uint32_t i = 0; i < na; i++)
                read_array(&r, &a[i]);
        lup_rd_u32(&r, &nt);
        if (r.err || nt > LUP_CKPT_MAX_TEXOBJS || (uint64_t)nt * LUP_CKPT_TEXOBJ_REC != lup_rd_left(&r))
                goto bad;
        if (nt && !(t = calloc(nt, sizeof(*t))))
                goto oom;
        for (uint32_t i = 0; i < nt; i++)
                if (!read_texobj(&r, &t[i]))
                        goto bad;
        if (lup_rd_finish(&r) < 0 || !arrays_sound(a, na))
                goto bad;
        *ret_a = a;
        *ret_na = na;
        *ret_t = t;
        *ret_nt = nt;
        return 0;
oom:
        free(a);
        *ret_why = "out of memory";
        return -ENOMEM;
bad:
        free(a);
        free(t);
        *ret_why = why;
        return -EBADMSG;
}
