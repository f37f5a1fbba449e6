/* SPDX-License-Identifier: MIT */
/*
 * What the JIT calls share (shim/jit.c): a caller's CUjit_option list
 * turned into the wire's (common/jit_codec.h), and the worker's answers
 * (logs, wall time, threads per block) written back into the caller's
 * buffers and option values the way the driver writes them.
 */
#ifndef LUPC_JIT_H
#define LUPC_JIT_H

#include <cuda.h>
#include <stdbool.h>
#include <stdint.h>

#include "jit_codec.h"

/* A caller's option list: a copy of its option numbers, its values array
 * (the answers go there: the driver's contract is that it stays valid
 * while output options are in use, and it is touched only then), the log
 * buffers and their sizes as it gave them. */
struct lupc_jit_opts {
        unsigned n;
        uint32_t ids[LUP_JIT_MAX_OPTS];
        void **values;
        bool answers;                 /* some option is an output: the worker's answers are read */
        unsigned info_cap, error_cap; /* 0: no such buffer */
        char *info, *error;
};

/* Checks n options (CUDA_ERROR_INVALID_VALUE for a NULL array or an
 * unknown option, CUDA_ERROR_NOT_SUPPORTED for one with no wire form,
 * logged) and fills *ret: out[] (room for LUP_JIT_MAX_OPTS) gets the wire
 * form, *ret_n how many. for_input: an input's options, where the log
 * buffers are not the caller's to receive (they are left out). */
CUresult lupc_jit_opts(unsigned n, CUjit_option *options, void **values, bool for_input, struct lupc_jit_opts *ret,
                       struct lup_jit_opt *out, uint32_t *ret_n);

/* Encodes req and uploads it as a blob: *ret_blob. */
CUresult lupc_jit_upload(const struct lup_jit_req *req, uint64_t *ret_blob);

/* Reads the worker's answer about `id` (lupJitRead) into o's buffers and
 * values: the logs (cut to the caller's sizes, NUL-terminated), their
 * sizes, the wall time and threads per block. CUDA_ERROR_NOT_FOUND when
 * the worker no longer knows id (a restore came between). */
CUresult lupc_jit_answer(uint64_t id, const struct lupc_jit_opts *o);

/* Reads what `what` (LUP_JIT_READ_CUBIN, ...) of id holds, n bytes, into dst. */
CUresult lupc_jit_read(uint64_t id, unsigned what, void *dst, uint64_t n);

#endif
