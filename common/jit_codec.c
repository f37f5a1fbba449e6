/* SPDX-License-Identifier: MIT */
/* The JIT request's codec (jit_codec.h). */
#include <errno.h>
#include <stdlib.h>

#include "jit_codec.h"

enum lup_jit_class lup_jit_option_class(uint32_t option)
{
        switch (option) {
        case LUP_JIT_INFO_LOG_BUFFER:
        case LUP_JIT_ERROR_LOG_BUFFER:
                return LUP_JIT_HOST_BUFFER;
        case LUP_JIT_GLOBAL_SYMBOL_NAMES:
        case LUP_JIT_GLOBAL_SYMBOL_ADDRESSES:
        case LUP_JIT_GLOBAL_SYMBOL_COUNT:
        case LUP_JIT_REFERENCED_KERNEL_NAMES:
        case LUP_JIT_REFERENCED_KERNEL_COUNT:
        case LUP_JIT_REFERENCED_VARIABLE_NAMES:
        case LUP_JIT_REFERENCED_VARIABLE_COUNT:
                return LUP_JIT_NO_WIRE;
        case 15: /* a hole in CUjit_option (once CU_JIT_NEW_SM3X_OPT) */
                return LUP_JIT_UNKNOWN;
        default:
                return option < LUP_JIT_NUM_OPTIONS ? LUP_JIT_SCALAR : LUP_JIT_UNKNOWN;
        }
}

static size_t opts_size(uint32_t n)
{
        return 4 + (size_t)n * 12;
}

size_t lup_jit_size(const struct lup_jit_req *req)
{
        size_t n = 4 + opts_size(req->n_opts) + 8;
        for (uint32_t i = 0; i < req->n_inputs; i++) {
                const struct lup_jit_input *in = &req->inputs[i];
                n += 4 + opts_size(in->n_opts) + 2 + in->name_len + 8 + in->size;
        }
        return n;
}

static void put_opts(struct lup_wr *w, uint32_t n, const struct lup_jit_opt *o)
{
        lup_wr_u32(w, n);
        for (uint32_t i = 0; i < n; i++) {
                lup_wr_u32(w, o[i].option);
                lup_wr_u64(w, o[i].value);
        }
}

void lup_jit_encode(struct lup_wr *w, const struct lup_jit_req *req)
{
        lup_wr_u32(w, LUP_JIT_MAGIC);
        put_opts(w, req->n_opts, req->opts);
        lup_wr_u32(w, req->first);
        lup_wr_u32(w, req->n_inputs);
        for (uint32_t i = 0; i < req->n_inputs; i++) {
                const struct lup_jit_input *in = &req->inputs[i];
                lup_wr_u32(w, in->type);
                put_opts(w, in->n_opts, in->opts);
                lup_wr_str16(w, in->name ? in->name : "", in->name_len);
                lup_wr_u64(w, in->size);
                lup_wr_bytes(w, in->data, (size_t)in->size);
        }
}

static int get_opts(struct lup_rd *r, uint32_t *ret_n, struct lup_jit_opt *o, const char **ret_why)
{
        uint32_t n;
        if (lup_rd_u32(r, &n) < 0 || n > LUP_JIT_MAX_OPTS) {
                *ret_why = "JIT request: too many options";
                return -EBADMSG;
        }
        for (uint32_t i = 0; i < n; i++) {
                if (lup_rd_u32(r, &o[i].option) < 0 || lup_rd_u64(r, &o[i].value) < 0) {
                        *ret_why = "JIT request: truncated options";
                        return -EBADMSG;
                }
                enum lup_jit_class c = lup_jit_option_class(o[i].option);
                if (c == LUP_JIT_UNKNOWN || c == LUP_JIT_NO_WIRE) {
                        *ret_why = "JIT request: an option with no wire form";
                        return -EBADMSG;
                }
        }
        *ret_n = n;
        return 0;
}

static int get_input(struct lup_rd *r, struct lup_jit_input *in, const char **ret_why)
{
        if (lup_rd_u32(r, &in->type) < 0 || in->type >= LUP_JIT_NUM_INPUT_TYPES) {
                *ret_why = "JIT request: bad input type";
                return -EBADMSG;
        }
        if (get_opts(r, &in->n_opts, in->opts, ret_why) < 0)
                return -EBADMSG;
        if (lup_rd_str16(r, LUP_JIT_MAX_NAME, &in->name, &in->name_len) < 0 || lup_rd_u64(r, &in->size) < 0 ||
            in->size > lup_rd_left(r) || lup_rd_bytes(r, (size_t)in->size, &in->data) < 0) {
                *ret_why = "JIT request: truncated input";
                return -EBADMSG;
        }
        return 0;
}

int lup_jit_decode(const uint8_t *p, size_t n, struct lup_jit_req *ret, const char **ret_why)
{
        struct lup_rd r = lup_rd_init(p, n);
        struct lup_jit_req q = { 0 };
        uint32_t magic;

        if (lup_rd_u32(&r, &magic) < 0 || magic != LUP_JIT_MAGIC) {
                *ret_why = "JIT request: bad magic";
                return -EBADMSG;
        }
        if (get_opts(&r, &q.n_opts, q.opts, ret_why) < 0)
                return -EBADMSG;
        if (lup_rd_u32(&r, &q.first) < 0 || lup_rd_u32(&r, &q.n_inputs) < 0 || q.n_inputs > LUP_JIT_MAX_INPUTS ||
            q.first > LUP_JIT_MAX_INPUTS - q.n_inputs) {
                *ret_why = "JIT request: bad input count";
                return -EBADMSG;
        }
        if (q.n_inputs && !(q.inputs = calloc(q.n_inputs, sizeof(*q.inputs))))
                return -ENOMEM;
        for (uint32_t i = 0; i < q.n_inputs; i++) {
                if (get_input(&r, &q.inputs[i], ret_why) < 0) {
                        free(q.inputs);
                        return -EBADMSG;
                }
        }
        if (lup_rd_finish(&r) < 0) {
                free(q.inputs);
                *ret_why = "JIT request: trailing bytes";
                return -EBADMSG;
        }
        *ret = q;
        return 0;
}
