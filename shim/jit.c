/* SPDX-License-Identifier: MIT */
/* JIT options to the wire and the worker's answers back (shim/jit.h). */
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "jit.h"
#include "log.h"
#include "shim_gen.h"

CUresult lupc_jit_opts(unsigned n, CUjit_option *options, void **values, bool for_input, struct lupc_jit_opts *ret,
                       struct lup_jit_opt *out, uint32_t *ret_n)
{
        struct lupc_jit_opts o = { .n = n, .values = values };

        if (n && (!options || !values))
                return CUDA_ERROR_INVALID_VALUE;
        if (n > LUP_JIT_MAX_OPTS) {
                lup_warn("lupine: %u JIT options; at most %u are supported", n, LUP_JIT_MAX_OPTS);
                return CUDA_ERROR_INVALID_VALUE;
        }
        for (unsigned i = 0; i < n; i++) {
                uint32_t opt = (uint32_t)options[i];
                uint64_t v = (uint64_t)(uintptr_t)values[i];
                switch (lup_jit_option_class(opt)) {
                case LUP_JIT_UNKNOWN:
                        return CUDA_ERROR_INVALID_VALUE;
                case LUP_JIT_NO_WIRE:
                        lup_warn("lupine: JIT option %u (global or referenced symbol lists) is not supported", opt);
                        return CUDA_ERROR_NOT_SUPPORTED;
                case LUP_JIT_HOST_BUFFER:
                        if (opt == LUP_JIT_INFO_LOG_BUFFER)
                                o.info = values[i];
                        else
                                o.error = values[i];
                        v = 0;
                        break;
                case LUP_JIT_SCALAR:
                        if (opt == LUP_JIT_INFO_LOG_BUFFER_SIZE_BYTES)
                                o.info_cap = (unsigned)v;
                        else if (opt == LUP_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
                                o.error_cap = (unsigned)v;
                        else if (opt == LUP_JIT_WALL_TIME)
                                v = 0; /* an output */
                        break;
                }
                out[i] = (struct lup_jit_opt){ opt, v };
                o.ids[i] = opt;
                if (opt == LUP_JIT_INFO_LOG_BUFFER_SIZE_BYTES || opt == LUP_JIT_ERROR_LOG_BUFFER_SIZE_BYTES ||
                    opt == LUP_JIT_WALL_TIME || opt == LUP_JIT_THREADS_PER_BLOCK)
                        o.answers = true;
        }
        if (for_input)
                o.info = o.error = NULL;
        if (!o.info)
                o.info_cap = 0;
        if (!o.error)
                o.error_cap = 0;
        *ret = o;
        *ret_n = n;
        return CUDA_SUCCESS;
}

CUresult lupc_jit_upload(const struct lup_jit_req *req, uint64_t *ret_blob)
{
        size_t n = lup_jit_size(req);
        if (n > LUP_MAX_BLOB)
                return CUDA_ERROR_INVALID_VALUE;
        uint8_t *buf = malloc(n);
        if (!buf)
                return CUDA_ERROR_OUT_OF_MEMORY;
        struct lup_wr w = lup_wr_init(buf, n);
        lup_jit_encode(&w, req);
        CUresult r = w.err || w.len != n ? lupc_protocol_error("JIT request") : lupc_upload_blob(buf, n, ret_blob);
        free(buf);
        return r;
}

CUresult lupc_jit_read(uint64_t id, unsigned what, void *dst, uint64_t n)
{
        uint8_t chunk[LUP_JIT_CHUNK];
        uint64_t off = 0;

        while (off < n) {
                unsigned len = 0;
                CUresult r = lupc_send_lupJitRead(&len, chunk, id, what, off);
                if (r != CUDA_SUCCESS)
                        return r;
                if (len == 0 || len > LUP_JIT_CHUNK)
                        return lupc_protocol_error("lupJitRead");
                uint64_t k = len < n - off ? len : n - off;
                memcpy((uint8_t *)dst + off, chunk, (size_t)k);
                off += k;
        }
        return CUDA_SUCCESS;
}

/* Copies the first `filled` bytes of log `what` into buf (cap bytes),
 * NUL-terminated within cap. */
static CUresult read_log(uint64_t id, unsigned what, char *buf, unsigned cap, uint32_t filled)
{
        if (!buf || cap == 0)
                return CUDA_SUCCESS;
        uint32_t n = filled < cap ? filled : cap;
        if (n > LUP_JIT_MAX_LOG)
                n = LUP_JIT_MAX_LOG; /* what the worker's buffer holds at most */
        CUresult r = lupc_jit_read(id, what, buf, n);
        if (r != CUDA_SUCCESS)
                return r;
        buf[n < cap ? n : cap - 1] = 0;
        return CUDA_SUCCESS;
}

CUresult lupc_jit_answer(uint64_t id, const struct lupc_jit_opts *o)
{
        uint8_t info[16];
        if (!o->answers && !o->info && !o->error)
                return CUDA_SUCCESS; /* nothing to write back: no round trip */
        CUresult r = lupc_jit_read(id, LUP_JIT_READ_INFO, info, sizeof(info));
        if (r != CUDA_SUCCESS)
                return r;
        float wall;
        memcpy(&wall, info, sizeof(wall));
        uint32_t info_filled = lup_le32(info + 4), error_filled = lup_le32(info + 8), threads = lup_le32(info + 12);
        if ((r = read_log(id, LUP_JIT_READ_INFO_LOG, o->info, o->info_cap, info_filled)) != CUDA_SUCCESS ||
            (r = read_log(id, LUP_JIT_READ_ERROR_LOG, o->error, o->error_cap, error_filled)) != CUDA_SUCCESS)
                return r;
        for (unsigned i = 0; i < o->n && o->answers; i++) {
                switch (o->ids[i]) {
                case LUP_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
                        o->values[i] = (void *)(uintptr_t)info_filled; /* what the driver wrote there */
                        break;
                case LUP_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
                        o->values[i] = (void *)(uintptr_t)error_filled;
                        break;
                case LUP_JIT_WALL_TIME:
                        o->values[i] = NULL;
                        memcpy(&o->values[i], &wall, sizeof(wall)); /* the driver writes a float there */
                        break;
                case LUP_JIT_THREADS_PER_BLOCK:
                        if (threads)
                                o->values[i] = (void *)(uintptr_t)threads;
                        break;
                default:
                        break;
                }
        }
        return CUDA_SUCCESS;
}
