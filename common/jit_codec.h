/* SPDX-License-Identifier: MIT */
/*
 * The JIT request: what a link step (cuLinkAddData, a rebuilt link) or a
 * module or library load with JIT options sends the worker, as one
 * uploaded blob (BLOB frames, then an op naming it: abi/cuda_api.spec,
 * ops 630-636; docs/jit.md).
 *
 *   u32 magic LUP_JIT_MAGIC
 *   u32 n_opts, then n_opts x (u32 option, u64 value)   the link's or load's
 *   u32 first                                           index of the first input
 *   u32 n_inputs, then per input:
 *       u32 type (CUjitInputType), u32 n_opts, n_opts x (u32, u64),
 *       u16 name length, name bytes, u64 size, size bytes
 *
 * Option values are the caller's void * values as integers. Values that
 * are host pointers (the log buffers) travel as 0: the worker gives the
 * driver buffers of its own, as large as the size options say (at most
 * LUP_JIT_MAX_LOG), and sends the logs back. Options whose values point
 * at host arrays (global symbol names and addresses, referenced kernel
 * and variable names) have no wire form: lup_jit_option_class() says so.
 *
 * common/ does not include cuda.h: the option numbers below are CUDA's
 * (CUjit_option, a stable ABI), written out.
 */
#ifndef LUP_JIT_CODEC_H
#define LUP_JIT_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define LUP_JIT_MAGIC      0x3154494au /* "JIT1" */
#define LUP_JIT_MAX_OPTS   64u         /* options per link, load or input */
#define LUP_JIT_MAX_INPUTS 4096u       /* inputs per link */
#define LUP_JIT_MAX_LOG    (1u << 20)  /* a log buffer the worker gives the driver */
#define LUP_JIT_MAX_NAME   4096u       /* an input's name */

/* CUjit_option numbers this file needs */
enum {
        LUP_JIT_THREADS_PER_BLOCK = 1,
        LUP_JIT_WALL_TIME = 2,
        LUP_JIT_INFO_LOG_BUFFER = 3,
        LUP_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
        LUP_JIT_ERROR_LOG_BUFFER = 5,
        LUP_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
        LUP_JIT_GLOBAL_SYMBOL_NAMES = 17,
        LUP_JIT_GLOBAL_SYMBOL_ADDRESSES = 18,
        LUP_JIT_GLOBAL_SYMBOL_COUNT = 19,
        LUP_JIT_REFERENCED_KERNEL_NAMES = 25,
        LUP_JIT_REFERENCED_KERNEL_COUNT = 26,
        LUP_JIT_REFERENCED_VARIABLE_NAMES = 27,
        LUP_JIT_REFERENCED_VARIABLE_COUNT = 28,
        LUP_JIT_NUM_OPTIONS = 35, /* CU_JIT_NUM_OPTIONS of CUDA 13.0 */
        LUP_JIT_NUM_INPUT_TYPES = 6,
};

/* What the wire does with an option's value. */
enum lup_jit_class {
        LUP_JIT_UNKNOWN = -1,    /* not a CUjit_option */
        LUP_JIT_SCALAR = 0,      /* sent as it is */
        LUP_JIT_HOST_BUFFER = 1, /* a log buffer: the worker's stands in */
        LUP_JIT_NO_WIRE = 2,     /* points at host arrays: not supported */
};
enum lup_jit_class lup_jit_option_class(uint32_t option);

/* What the worker answers about a link or load (lupJitRead, LUP_JIT_READ_INFO). */
enum {
        LUP_JIT_READ_CUBIN = 0,
        LUP_JIT_READ_INFO_LOG = 1,
        LUP_JIT_READ_ERROR_LOG = 2,
        LUP_JIT_READ_INFO = 3
};
#define LUP_JIT_CHUNK 240u /* bytes one lupJitRead returns at most */

struct lup_jit_opt {
        uint32_t option;
        uint64_t value;
};

struct lup_jit_input {
        uint32_t type;
        uint32_t n_opts;
        struct lup_jit_opt opts[LUP_JIT_MAX_OPTS];
        const char *name; /* into the blob, not NUL-terminated; name_len may be 0 */
        size_t name_len;
        const uint8_t *data; /* into the blob */
        uint64_t size;
};

struct lup_jit_req {
        uint32_t n_opts;
        struct lup_jit_opt opts[LUP_JIT_MAX_OPTS];
        uint32_t first;
        uint32_t n_inputs;
        struct lup_jit_input *inputs; /* decode: calloc'd, the caller frees */
};

/* Bytes lup_jit_encode() writes for req. */
size_t lup_jit_size(const struct lup_jit_req *req);
/* Writes req into w (w->err on overflow). */
void lup_jit_encode(struct lup_wr *w, const struct lup_jit_req *req);
/* Decodes n bytes at p into *ret, whose inputs the caller frees (data and
 * names point into p). Checks the magic, the counts against the limits,
 * every option number (known, with a wire form), every input type, and
 * that nothing trails. 0, -ENOMEM, or -EBADMSG with a static reason in
 * *ret_why. */
int lup_jit_decode(const uint8_t *p, size_t n, struct lup_jit_req *ret, const char **ret_why);

#endif
