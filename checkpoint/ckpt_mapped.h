/* SPDX-License-Identifier: MIT */
/*
 * The checkpoint's "mapped" object: the session's mapped host memory, one
 * record per mirror (the client's address, size and flags). Each mirror's
 * bytes are the object "mapmem/<va as 16 hex digits>": size bytes of the
 * mirror, then size bytes of what the client was last known to hold.
 */
#ifndef LUP_CKPT_MAPPED_H
#define LUP_CKPT_MAPPED_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt_codec.h"

#define LUP_CKPT_MAX_MAPPED       4096u         /* the worker's LUPW_MAX_MIRRORS */
#define LUP_CKPT_MAX_MAPPED_BYTES (16ull << 30) /* the worker's LUPW_MAX_MAPPED_BYTES */
#define LUP_CKPT_MAPPED_REC       20u           /* bytes of one record */

struct lup_ckpt_mapped {
        uint64_t va, size;
        uint32_t flags;
};

extern const struct lup_sealed lup_ckpt_mapped_kind;

/* The sealed object in a new buffer (free() it). 0, -ENOMEM or -ENOBUFS. */
int lup_ckpt_mapped_encode(const struct lup_ckpt_mapped *v, uint32_t n, uint8_t **ret_buf, size_t *ret_len);
/* *ret_v: a new array of *ret_n records (free() it; NULL when 0), each of a
 * size above 0, inside user space, not overlapping another, sizes within
 * LUP_CKPT_MAX_MAPPED_BYTES in all. 0, -EBADMSG or -ENOMEM, with *ret_why. */
int lup_ckpt_mapped_decode(const uint8_t *p, size_t n, struct lup_ckpt_mapped **ret_v, uint32_t *ret_n,
                           const char **ret_why);

#endif
