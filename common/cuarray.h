/* SPDX-License-Identifier: MIT */
/*
 * CUDA array descriptors as lupine checks them, in the shim and again in
 * the worker (which trusts nothing the shim sends): the formats, channel
 * counts, flags and sizes lupine forwards, each array's shape in bytes, and
 * the wire form of one copy with an array end (op lupArrayCopy).
 *
 * Errors are -EINVAL (the driver's CUDA_ERROR_INVALID_VALUE) for a
 * descriptor the driver refuses and -ENOTSUP (CUDA_ERROR_NOT_SUPPORTED)
 * for one the driver takes but lupine does not forward (planar video and
 * block-compressed formats, sparse and deferred-mapping arrays).
 */
#ifndef LUP_CUARRAY_H
#define LUP_CUARRAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* CUDA_ARRAY3D_* flags lupine forwards */
#define LUP_ARRAY_LAYERED      0x01u
#define LUP_ARRAY_SURFACE_LDST 0x02u
#define LUP_ARRAY_CUBEMAP      0x04u
#define LUP_ARRAY_GATHER       0x08u
#define LUP_ARRAY_DEPTH        0x10u
#define LUP_ARRAY_COLOR_ATTACH 0x20u
#define LUP_ARRAY_SPARSE       0x40u
#define LUP_ARRAY_DEFERRED     0x80u
#define LUP_ARRAY_KNOWN_FLAGS  0xffu

#define LUP_MAX_ARRAYS      65536u        /* live arrays and mipmapped arrays per session */
#define LUP_MAX_ARRAY_BYTES (64ull << 30) /* one array's bytes, all levels */
#define LUP_MAX_MIP_LEVELS  32u

/* A descriptor as CUDA_ARRAY3D_DESCRIPTOR holds it. */
struct lup_array_desc {
        uint64_t width, height, depth;
        uint32_t format, channels, flags;
};

/* Its shape: bytes per element and per row, rows per slice, slices. */
struct lup_array_shape {
        uint32_t elem;
        uint64_t row_bytes, rows, slices;
        uint64_t bytes; /* row_bytes * rows * slices */
};

/* Bytes of one element of format with channels channels, 0 when lupine
 * does not know the format or the count does not fit it. */
uint32_t lup_array_elem_size(uint32_t format, uint32_t channels);
/* Checks d (the driver's rules and lupine's limits); on success the shape
 * of the array (levels 0) or of level 0 of a mipmapped array of levels
 * levels. 0, -EINVAL or -ENOTSUP; *ret_why names what is wrong. */
int lup_array_check(const struct lup_array_desc *d, uint32_t levels, struct lup_array_shape *ret, const char **ret_why);
/* The descriptor of level `level` of a mipmapped array described by d:
 * each nonzero extent halved per level, at least 1; layers and faces stay. */
struct lup_array_desc lup_array_level_desc(const struct lup_array_desc *d, uint32_t level);
/* The shape of a descriptor already checked. */
struct lup_array_shape lup_array_shape_of(const struct lup_array_desc *d);

/* One copy whose ends are device memory (an arena address) or an array. */
enum {
        LUP_END_DEVICE = 1,
        LUP_END_ARRAY = 2
};
struct lup_copy_end {
        uint32_t kind;
        uint64_t handle;        /* device address of (0, 0, 0), or the array's id */
        uint64_t x, y, z;       /* x in bytes */
        uint64_t pitch, height; /* device ends: bytes per row, rows per slice */
};
struct lup_array_copy {
        struct lup_copy_end src, dst;
        uint64_t width, height, depth; /* width in bytes */
};
#define LUP_ARRAY_COPY_WIRE 136u
void lup_array_copy_encode(const struct lup_array_copy *c, uint8_t out[static LUP_ARRAY_COPY_WIRE]);
/* -EBADMSG for a kind that is neither end kind, or an empty box. */
int lup_array_copy_decode(const uint8_t in[static LUP_ARRAY_COPY_WIRE], struct lup_array_copy *ret);
/* Whether the box [x, x + width) x [y, y + height) x [z, z + depth) lies
 * inside an array of shape s (overflow-safe). */
bool lup_array_box_fits(const struct lup_array_shape *s, const struct lup_copy_end *e, uint64_t width, uint64_t height,
                        uint64_t depth);
/* A device end's first byte and span; false on overflow or when pitch or
 * height cannot hold the box. */
bool lup_device_end_span(const struct lup_copy_end *e, uint64_t width, uint64_t height, uint64_t depth,
                         uint64_t *ret_first, uint64_t *ret_span);

#endif
