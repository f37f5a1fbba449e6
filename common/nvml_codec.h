/* SPDX-License-Identifier: MIT */
/*
 * The NVML snapshot (abi/lupine/nvml_wire.h) in memory, and its codec: the
 * supervisor encodes it, libnvidia-ml.so.1's shim decodes it. The decoder
 * checks every byte: key range, duplicates, lengths, counts, trailing bytes.
 */
#ifndef LUP_NVML_CODEC_H
#define LUP_NVML_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lupine/nvml_wire.h"
#include "lupine/wire.h"

#define LUP_NVML_NOT_SUPPORTED 3u /* NVML_ERROR_NOT_SUPPORTED: an absent value */

struct lup_nvml_val {
        bool present;
        uint32_t ret; /* the host's nvmlReturn_t for it */
        uint64_t num;
        char str[LUP_NVML_MAX_STR + 1]; /* NUL-terminated */
};

struct lup_nvml_proc {
        uint32_t pid;
        uint64_t used;
};

struct lup_nvml_dev {
        struct lup_nvml_val v[LUP_NVML_N_DEV];
        uint32_t n_procs;
        struct lup_nvml_proc procs[LUP_NVML_MAX_PROCS];
};

struct lup_nvml_snapshot {
        uint32_t backend; /* LUP_BACKEND_* */
        uint32_t n_devices;
        uint64_t taken_ms;
        struct lup_nvml_val sys[LUP_NVML_N_SYS];
        struct lup_nvml_dev dev[LUP_MAX_DEVICES];
};

/* The largest encoded snapshot. */
#define LUP_NVML_MAX_REPLY                                \
        (28u + LUP_NVML_N_SYS * (8u + LUP_NVML_MAX_STR) + \
         LUP_MAX_DEVICES * (8u + LUP_NVML_N_DEV * (8u + LUP_NVML_MAX_STR) + LUP_NVML_MAX_PROCS * 12u))

/* The slot of key k, or NULL if k is not a system (resp. device) key. */
struct lup_nvml_val *lup_nvml_sys(struct lup_nvml_snapshot *s, unsigned k);
struct lup_nvml_val *lup_nvml_devval(struct lup_nvml_dev *d, unsigned k);

/* Setters for the producers: a number, a string (truncated to
 * LUP_NVML_MAX_STR), or a failure the host's NVML gave. */
void lup_nvml_set_num(struct lup_nvml_val *v, uint64_t num);
void lup_nvml_set_str(struct lup_nvml_val *v, const char *s);
void lup_nvml_set_ret(struct lup_nvml_val *v, uint32_t ret);

/* The request: always LUP_NVML_REQ_SIZE bytes. */
void lup_nvml_req_encode(uint8_t out[static LUP_NVML_REQ_SIZE]);
int lup_nvml_req_decode(const uint8_t *p, size_t n, const char **ret_why);
/* With a bearer token (auth_len 1..LUP_MAX_AUTH), into out (at least
 * LUP_NVML_REQ_MAX bytes); returns the request's length. */
size_t lup_nvml_req_encode_auth(uint8_t *out, const uint8_t *auth, size_t auth_len);
/* Like lup_nvml_req_decode, and the token, if the request has one
 * (*ret_auth NULL, *ret_auth_len 0 if not). */
int lup_nvml_req_decode_auth(const uint8_t *p, size_t n, const uint8_t **ret_auth, size_t *ret_auth_len,
                             const char **ret_why);

/* Encodes s into out (cap bytes): 0 and *ret_len, or -ENOBUFS. */
int lup_nvml_encode(const struct lup_nvml_snapshot *s, uint8_t *out, size_t cap, size_t *ret_len);
/* Decodes into *s (fully overwritten): 0, or -EBADMSG with *ret_why. */
int lup_nvml_decode(const uint8_t *p, size_t n, struct lup_nvml_snapshot *s, const char **ret_why);

#endif
