/* SPDX-License-Identifier: MIT */
/*
 * Codecs for the control payloads (abi/lupine/wire.h): the HELLO reply and
 * refusal, LAUNCH, FUNC_INFO, the copy headers (MEMCPY_HTOD, MEMCPY_DTOH,
 * DTOH_ASYNC, DATA) and BLOB. The shim and the worker both use them, so
 * each layout is written down once.
 *
 * Decoders validate every field and give a static reason (*ret_why) with
 * -EBADMSG; their ret_ outputs are untouched on failure. Bulk data is never
 * copied: a decoder points into the frame, an encoder writes the header and
 * leaves the data to the caller's iovec. Encoders check only what they must
 * to stay in bounds: limits are the receiver's to enforce, and a sender
 * that sent something the peer refuses keeps doing so.
 *
 * common/ must not depend on cuda.h: CUDA values travel here as plain
 * integers, and the attribute tables are sized by lupine's own limits.
 */
#ifndef LUP_CTL_CODEC_H
#define LUP_CTL_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "lupine/wire.h"

/* ---- HELLO reply (accepting) and refusal */

struct lup_hello_dev {
        char name[LUP_MAX_DEV_NAME + 1]; /* NUL-terminated, no NUL inside */
        uint8_t uuid[16];
        uint64_t total_mem;
        uint32_t n_attr;                  /* attributes 1..n_attr, at most LUP_MAX_ATTRS */
        int32_t attr[LUP_MAX_ATTRS];      /* [i] is attribute i + 1 */
        uint32_t attr_res[LUP_MAX_ATTRS]; /* the CUresult of asking for it */
};

struct lup_hello_reply {
        uint32_t driver_version;
        uint32_t backend; /* LUP_BACKEND_* */
        uint8_t token[LUP_TOKEN_SIZE];
        uint64_t arena_base, arena_size;
        uint64_t last_executed;
        uint32_t n_devices;           /* at most LUP_MAX_DEVICES */
        struct lup_hello_dev *devs;   /* n_devices of them */
        bool resend;                  /* the request set LUP_HELLO_RESEND */
        uint64_t resend_from, tx_end; /* ... then these follow */
};

/* Appends the reply; -EINVAL for a device name too long or holding a NUL,
 * or more devices or attributes than the limits; w->err on overflow. */
int lup_hello_reply_encode(struct lup_wr *w, const struct lup_hello_reply *r);
/* Decodes a reply into *ret (devs: room for LUP_MAX_DEVICES, the caller's).
 * resend: whether the request asked for a resend (the wire does not say).
 * Checks magic, version, the device and attribute counts, that the arena is
 * one of the slots, and resend_from <= tx_end. 0 or -EBADMSG. */
int lup_hello_reply_decode(const uint8_t *p, size_t n, bool resend, struct lup_hello_reply *ret,
                           struct lup_hello_dev devs[static LUP_MAX_DEVICES], const char **ret_why);

/* The refusal payload: u16 msg_len, msg. The encoder cuts msg at max_len
 * bytes (or its first NUL). */
void lup_refusal_encode(struct lup_wr *w, const char *msg, size_t max_len);
/* Shown, not acted on, so read leniently: a message longer than max_len or
 * cut short reads as "", and trailing bytes are ignored. *ret is not
 * NUL-terminated. */
void lup_refusal_decode(const uint8_t *p, size_t n, size_t max_len, const char **ret, size_t *ret_len);

/* ---- LAUNCH */

#define LUP_LAUNCH_ATTR_VALUE 64u /* bytes of a CUlaunchAttributeValue */
#define LUP_LAUNCH_FIXED_SIZE 56u /* everything but the attributes and the parameter bytes */
#define LUP_LAUNCH_MAX_SIZE \
        (LUP_LAUNCH_FIXED_SIZE + LUP_MAX_LAUNCH_ATTRS * (4u + LUP_LAUNCH_ATTR_VALUE) + LUP_MAX_PARAM_BYTES)

struct lup_launch_attr {
        uint32_t id; /* CUlaunchAttributeID */
        uint8_t value[LUP_LAUNCH_ATTR_VALUE];
};

struct lup_launch {
        uint64_t func; /* function (or kernel) id */
        uint32_t grid[3], block[3];
        uint32_t shmem;
        uint64_t stream;
        uint32_t flags;   /* LUP_LAUNCH_COOPERATIVE */
        uint32_t n_attrs; /* at most LUP_MAX_LAUNCH_ATTRS */
        struct lup_launch_attr attrs[LUP_MAX_LAUNCH_ATTRS];
        uint32_t param_bytes;  /* at most LUP_MAX_PARAM_BYTES */
        const uint8_t *params; /* decode: into the frame; ignored by encode */
};

/* Appends everything but the parameters' bytes, then reserves param_bytes
 * and sets *ret_params to where the caller packs them. -EINVAL for too many
 * attributes or parameter bytes (the caller reports that as its own
 * CUDA_ERROR_INVALID_VALUE), w->err (-ENOBUFS) when it does not fit. */
int lup_launch_encode(struct lup_wr *w, const struct lup_launch *l, uint8_t **ret_params);
/* "malformed LAUNCH frame": short, trailing bytes, unknown flags, too many
 * attributes or parameter bytes. Attribute ids are the worker's to judge. */
int lup_launch_decode(const uint8_t *p, size_t n, struct lup_launch *ret, const char **ret_why);

/* ---- FUNC_INFO: request u64 function id; the reply below */

#define LUP_FUNC_INFO_REQ_SIZE  8u
#define LUP_FUNC_INFO_MAX_ATTRS 64u /* attributes a reader keeps; more are read and dropped */

struct lup_func_info {
        uint32_t n_params;    /* below LUP_MAX_PARAMS */
        uint32_t *params;     /* n_params x (offset, size); decode: allocated, the caller frees */
        uint32_t param_bytes; /* decode: where the last parameter ends */
        uint32_t n_attrs;     /* CUfunction_attribute 0..n_attrs-1 */
        int32_t attr[LUP_FUNC_INFO_MAX_ATTRS];
        uint32_t attr_res[LUP_FUNC_INFO_MAX_ATTRS];
};

void lup_func_info_req_encode(uint8_t out[static LUP_FUNC_INFO_REQ_SIZE], uint64_t func);
int lup_func_info_req_decode(const uint8_t *p, size_t n, uint64_t *ret_func, const char **ret_why);
/* Bytes the reply takes. */
size_t lup_func_info_size(uint32_t n_params, uint32_t n_attrs);
/* -EINVAL for more than LUP_FUNC_INFO_MAX_ATTRS attributes; w->err on overflow. */
int lup_func_info_encode(struct lup_wr *w, const struct lup_func_info *fi);
/* Checks the counts and that every parameter ends within
 * LUP_MAX_PARAM_BYTES; keeps the first LUP_FUNC_INFO_MAX_ATTRS attributes.
 * 0, -EBADMSG or -ENOMEM. */
int lup_func_info_decode(const uint8_t *p, size_t n, struct lup_func_info *ret, const char **ret_why);

/* ---- bulk copies: headers only, the data follows in the same frame */

#define LUP_HTOD_HDR_SIZE   16u
#define LUP_DTOH_SIZE       24u
#define LUP_DTOH_ASYNC_SIZE 32u
#define LUP_DATA_HDR_SIZE   16u
#define LUP_BLOB_HDR_SIZE   24u

/* MEMCPY_HTOD: u64 dst, u64 stream, 1..LUP_BULK_CHUNK bytes */
struct lup_htod {
        uint64_t dst, stream;
        const uint8_t *data; /* decode: into the frame */
        size_t n;
};
void lup_htod_encode(uint8_t out[static LUP_HTOD_HDR_SIZE], uint64_t dst, uint64_t stream);
int lup_htod_decode(const uint8_t *p, size_t n, struct lup_htod *ret, const char **ret_why);

/* MEMCPY_DTOH: u64 src, u64 size, u64 stream; DTOH_ASYNC adds u64 token */
struct lup_dtoh {
        uint64_t src, size, stream;
        uint64_t token; /* DTOH_ASYNC only, not 0 */
};
void lup_dtoh_encode(uint8_t out[static LUP_DTOH_SIZE], const struct lup_dtoh *d);
void lup_dtoh_async_encode(uint8_t out[static LUP_DTOH_ASYNC_SIZE], const struct lup_dtoh *d);
/* "malformed MEMCPY_DTOH frame" (length), "absurd MEMCPY_DTOH size" (0 or
 * above LUP_MAX_COPY) */
int lup_dtoh_decode(const uint8_t *p, size_t n, struct lup_dtoh *ret, const char **ret_why);
/* "malformed DTOH_ASYNC frame": length, token 0, size 0 or above LUP_MAX_COPY */
int lup_dtoh_async_decode(const uint8_t *p, size_t n, struct lup_dtoh *ret, const char **ret_why);

/* DATA (server -> client): u64 token, u64 offset, bytes */
struct lup_data {
        uint64_t token, offset;
        uint64_t n; /* decode: the bytes that follow */
};
void lup_data_encode(uint8_t out[static LUP_DATA_HDR_SIZE], uint64_t token, uint64_t offset);
/* hdr: the payload's first LUP_DATA_HDR_SIZE bytes; payload_len: the
 * frame's length ("short DATA frame" below LUP_DATA_HDR_SIZE: check that
 * with lup_data_short() before reading hdr). */
int lup_data_decode(const uint8_t hdr[static LUP_DATA_HDR_SIZE], uint32_t payload_len, struct lup_data *ret,
                    const char **ret_why);
static inline bool lup_data_short(uint32_t payload_len)
{
        return payload_len < LUP_DATA_HDR_SIZE;
}

/* BLOB: u64 blob id, u64 total, u64 offset, 1.. bytes */
struct lup_blob {
        uint64_t id, total, offset;
        const uint8_t *data; /* decode: into the frame */
        size_t n;
};
void lup_blob_encode(uint8_t out[static LUP_BLOB_HDR_SIZE], uint64_t id, uint64_t total, uint64_t offset);
/* "malformed BLOB frame": short, id 0, no data, total 0 or above
 * LUP_MAX_BLOB. Offsets are checked against the upload in progress. */
int lup_blob_decode(const uint8_t *p, size_t n, struct lup_blob *ret, const char **ret_why);

#endif
