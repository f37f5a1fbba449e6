/* SPDX-License-Identifier: MIT */
/* The checkpoint's "mapped" object (ckpt_mapped.h says what it holds). */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include "ckpt_mapped.h"

#include <errno.h>
#include <stdlib.h>

#include "buf.h"

#define MAPPED_MAGIC 0x3150414d50554cull /* "LUPMAP1" */
#define USER_TOP     (1ull << 57)        /* above any user-space address on x86-64 and arm64 */

const struct lup_sealed lup_ckpt_mapped_kind = {
        .name = "mapped",
        .magic = MAPPED_MAGIC,
        .version_min = 1,
        .version_max = 1,
        .min_len = LUP_SEALED_OVERHEAD + 4,
        .max_len = LUP_SEALED_OVERHEAD + 4 + (uint64_t)LUP_CKPT_MAX_MAPPED * LUP_CKPT_MAPPED_REC,
        .why_damaged = "object mapped is damaged",
        .why_magic = "object mapped is damaged",
        .why_version = "object mapped has a version this lupined does not read",
};

int lup_ckpt_mapped_encode(const struct lup_ckpt_mapped *v, uint32_t n, uint8_t **ret_buf, size_t *ret_len)
{
        if (n > LUP_CKPT_MAX_MAPPED)
                return -ENOBUFS;
        size_t cap = LUP_SEALED_OVERHEAD + 4 + (size_t)n * LUP_CKPT_MAPPED_REC;
        uint8_t *buf = malloc(cap);
        if (!buf)
                return -ENOMEM;
        struct lup_wr w = lup_wr_init(buf, cap);
        lup_sealed_begin(&w, &lup_ckpt_mapped_kind, 1);
        lup_wr_u32(&w, n);
        for (uint32_t i = 0; i < n; i++) {
                lup_wr_u64(&w, v[i].va);
                lup_wr_u64(&w, v[i].size);
                lup_wr_u32(&w, v[i].flags);
        }
        lup_sealed_end(&w, &lup_ckpt_mapped_kind);
        if (w.err) {
                free(buf);
                return -ENOBUFS;
        }
        *ret_buf = buf;
        *ret_len = w.len;
        return 0;
}

static int cmp_va(const void *a, const void *b)
{
        const struct lup_ckpt_mapped *x = a, *y = b;
        return x->va < y->va ? -1 : x->va > y->va;
}

/* Sizes, bounds, the total and overlaps (v is sorted by address after it). */
static bool records_sound(struct lup_ckpt_mapped *v, uint32_t n)
{
        uint64_t total = 0;
        for (uint32_t i = 0; i < n; i++) {
                if (v[i].size == 0 || v[i].va == 0 || v[i].va >= USER_TOP || v[i].size > USER_TOP - v[i].va ||
                    v[i].size > LUP_CKPT_MAX_MAPPED_BYTES - total)
                        return false;
                total += v[i].size;
        }
        if (n > 1)
                qsort(v, n, sizeof(*v), cmp_va);
        for (uint32_t i = 1; i < n; i++)
                if (v[i - 1].va + v[i - 1].size > v[i].va)
                        return false;
        return true;
}

int lup_ckpt_mapped_decode(const uint8_t *p, size_t n, struct lup_ckpt_mapped **ret_v, uint32_t *ret_n,
                           const char **ret_why)
{
        const char *why = lup_ckpt_mapped_kind.why_damaged;
        struct lup_rd r;
        uint32_t version, count;

        if (lup_sealed_open(&lup_ckpt_mapped_kind, p, n, &r, &version, ret_why) < 0)
                return -EBADMSG;
        lup_rd_u32(&r, &count);
        if (r.err || count > LUP_CKPT_MAX_MAPPED || (uint64_t)count * LUP_CKPT_MAPPED_REC != lup_rd_left(&r)) {
                *ret_why = why;
                return -EBADMSG;
        }
        struct lup_ckpt_mapped *v = NULL;
        if (count && !(v = calloc(count, sizeof(*v)))) {
                *ret_why = "out of memory";
                return -ENOMEM;
        }
        for (uint32_t i = 0; i < count; i++) {
                lup_rd_u64(&r, &v[i].va);
                lup_rd_u64(&r, &v[i].size);
                lup_rd_u32(&r, &v[i].flags);
        }
        if (lup_rd_finish(&r) < 0 || !records_sound(v, count)) {
                free(v);
                *ret_why = why;
                return -EBADMSG;
        }
        *ret_v = v;
        *ret_n = count;
        return 0;
}
