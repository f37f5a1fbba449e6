/* SPDX-License-Identifier: MIT */
/*
 * Bounded readers and writers for every untrusted byte (wire frames,
 * checkpoint manifests, module images).
 *
 * Reader: each getter checks the remaining length, zeroes its output on
 * failure, and latches r->err = -EBADMSG; after the first failure every
 * further getter fails too. Decoders read all fields and check once with
 * lup_rd_finish(), which also rejects trailing bytes.
 *
 * Writer: appends into a caller-owned buffer of fixed capacity; overflow
 * latches w->err = -ENOBUFS and writes nothing further.
 */
#ifndef LUP_BUF_H
#define LUP_BUF_H

#include <stddef.h>
#include <stdint.h>

struct lup_rd {
        const uint8_t *p;
        size_t len;
        size_t off;
        int err;
};

struct lup_wr {
        uint8_t *p;
        size_t cap;
        size_t len;
        int err;
};

static inline struct lup_rd lup_rd_init(const void *p, size_t len)
{
        return (struct lup_rd){ .p = p, .len = len };
}

static inline struct lup_wr lup_wr_init(void *p, size_t cap)
{
        return (struct lup_wr){ .p = p, .cap = cap };
}

static inline size_t lup_rd_left(const struct lup_rd *r)
{
        return r->err ? 0 : r->len - r->off;
}

int lup_rd_u8(struct lup_rd *r, uint8_t *ret);
int lup_rd_u16(struct lup_rd *r, uint16_t *ret);
int lup_rd_u32(struct lup_rd *r, uint32_t *ret);
int lup_rd_u64(struct lup_rd *r, uint64_t *ret);
int lup_rd_i32(struct lup_rd *r, int32_t *ret);
int lup_rd_f32(struct lup_rd *r, float *ret);
/* Points *ret into the reader's buffer; n is checked against what is left. */
int lup_rd_bytes(struct lup_rd *r, size_t n, const uint8_t **ret);
/* Copies exactly n bytes into out. */
int lup_rd_copy(struct lup_rd *r, void *out, size_t n);
/* A u16 length-prefixed string of at most max bytes, without NUL bytes.
 * *ret points into the buffer and is NOT NUL-terminated. */
int lup_rd_str16(struct lup_rd *r, size_t max, const char **ret, size_t *ret_len);
/* 0 if every read succeeded and nothing is left over, else -EBADMSG. */
int lup_rd_finish(const struct lup_rd *r);

void lup_wr_u8(struct lup_wr *w, uint8_t v);
void lup_wr_u16(struct lup_wr *w, uint16_t v);
void lup_wr_u32(struct lup_wr *w, uint32_t v);
void lup_wr_u64(struct lup_wr *w, uint64_t v);
void lup_wr_i32(struct lup_wr *w, int32_t v);
void lup_wr_f32(struct lup_wr *w, float v);
void lup_wr_bytes(struct lup_wr *w, const void *p, size_t n);
/* Reserves n bytes and returns where to fill them, or NULL on overflow. */
uint8_t *lup_wr_reserve(struct lup_wr *w, size_t n);
void lup_wr_str16(struct lup_wr *w, const char *s, size_t n);

/* little-endian load/store helpers */
static inline uint16_t lup_le16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t lup_le32(const uint8_t *p)
{
        return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t lup_le64(const uint8_t *p)
{
        return (uint64_t)lup_le32(p) | ((uint64_t)lup_le32(p + 4) << 32);
}
static inline void lup_put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void lup_put32(uint8_t *p, uint32_t v)
{
        p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
static inline void lup_put64(uint8_t *p, uint64_t v) { lup_put32(p, (uint32_t)v); lup_put32(p + 4, (uint32_t)(v >> 32)); }

/* A growable array *p of *cap elements of elem bytes: makes room for need
 * (doubling, at least 16); 0, or -ENOMEM with the array as it was. */
int lup_array_grow(void **p, size_t *cap, size_t need, size_t elem);

#endif
