/* SPDX-License-Identifier: MIT */
/*
 * The checkpoint's "arrays" object: the session's CUDA arrays, mipmapped
 * arrays and the levels of them the client holds (ids, descriptors, the
 * contexts they were made in), in id order, then its texture and surface
 * objects in creation order (value, context, descriptors as the client
 * gave them). An array the client destroyed while a live object names it
 * is kept, flagged dead. Each array's and each mipmapped array's contents are the
 * object "array/<id as 16 hex digits>": its slices in order (every level
 * in turn for a mipmapped array), rows of width x element bytes, no
 * padding. Levels have no contents of their own.
 */
#ifndef LUP_CKPT_ARRAYS_H
#define LUP_CKPT_ARRAYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt_codec.h"
#include "cuarray.h"

#define LUP_CKPT_MAX_ARRAYS  65536u /* LUP_MAX_ARRAYS, levels included */
#define LUP_CKPT_MAX_TEXOBJS 65536u
#define LUP_CKPT_ARRAY_REC   72u
#define LUP_CKPT_ARRAY_DEAD  1u /* destroyed by the client, kept for a live object naming it */
#define LUP_CKPT_TEXOBJ_REC  378u
#define LUP_CKPT_RES_BYTES   144u
#define LUP_CKPT_TEX_BYTES   104u
#define LUP_CKPT_VIEW_BYTES  112u

struct lup_ckpt_array {
        uint64_t id, ctx, parent;
        uint32_t level, levels;
        struct lup_array_desc d;
        uint32_t flags; /* LUP_CKPT_ARRAY_* */
};
struct lup_ckpt_texobj {
        uint64_t value, ctx;
        bool surface, has_view;
        uint8_t res[LUP_CKPT_RES_BYTES], tex[LUP_CKPT_TEX_BYTES], view[LUP_CKPT_VIEW_BYTES];
};

extern const struct lup_sealed lup_ckpt_arrays_kind;

/* The sealed object in a new buffer (free() it). 0, -ENOMEM or -ENOBUFS. */
int lup_ckpt_arrays_encode(const struct lup_ckpt_array *a, uint32_t na, const struct lup_ckpt_texobj *t, uint32_t nt,
                           uint8_t **ret_buf, size_t *ret_len);
/* New arrays *ret_a (*ret_na records) and *ret_t (*ret_nt); free() both
 * (NULL when empty). Every id well formed, unique and ascending; every
 * array's descriptor one lup_array_check takes; every level after its
 * mipmapped array, below its level count, with that level's descriptor;
 * array flags only LUP_CKPT_ARRAY_DEAD; object flags 0 or 1. 0, -EBADMSG or -ENOMEM, with *ret_why. */
int lup_ckpt_arrays_decode(const uint8_t *p, size_t n, struct lup_ckpt_array **ret_a, uint32_t *ret_na,
                           struct lup_ckpt_texobj **ret_t, uint32_t *ret_nt, const char **ret_why);
/* Bytes of the contents object of a record (0 for a level). */
uint64_t lup_ckpt_array_bytes(const struct lup_ckpt_array *a);

#endif
