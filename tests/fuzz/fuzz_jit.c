/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for lup_jit_decode() (common/jit_codec.c), which the worker
 * runs on every JIT request a client uploads (daemon/worker/link.c).
 *
 * Beyond "no read past the input" (ASan sees one byte too far), it checks
 * what the worker relies on:
 *   - the result is 0, -EBADMSG with a reason, or -ENOMEM;
 *   - an accepted request is within the limits, every option has a wire
 *     form, every input type is known, and every input's name and bytes
 *     lie inside the input;
 *   - the format is canonical: encoding the decoded request gives back
 *     exactly the input, and lup_jit_size() says how long that is.
 */
/* the checks are the point of a fuzz target: keep assert() in every build type */
#undef NDEBUG
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jit_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_opts(uint32_t n, const struct lup_jit_opt *o)
{
        assert(n <= LUP_JIT_MAX_OPTS);
        for (uint32_t i = 0; i < n; i++) {
                enum lup_jit_class c = lup_jit_option_class(o[i].option);
                assert(c == LUP_JIT_SCALAR || c == LUP_JIT_HOST_BUFFER);
        }
}

static int inside(const void *p, size_t n, const uint8_t *data, size_t size)
{
        const uint8_t *b = p;
        return n == 0 || (b >= data && b <= data + size && n <= (size_t)(data + size - b));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct lup_jit_req q;
        const char *why = NULL;
        int rc = lup_jit_decode(data, size, &q, &why);

        assert(rc == 0 || rc == -EBADMSG || rc == -ENOMEM);
        if (rc == -EBADMSG)
                assert(why && *why);
        if (rc < 0)
                return 0;
        check_opts(q.n_opts, q.opts);
        assert(q.n_inputs <= LUP_JIT_MAX_INPUTS && q.first <= LUP_JIT_MAX_INPUTS - q.n_inputs);
        for (uint32_t i = 0; i < q.n_inputs; i++) {
                const struct lup_jit_input *in = &q.inputs[i];
                assert(in->type < LUP_JIT_NUM_INPUT_TYPES);
                check_opts(in->n_opts, in->opts);
                assert(in->name_len <= LUP_JIT_MAX_NAME && inside(in->name, in->name_len, data, size));
                assert(!in->name_len || !memchr(in->name, 0, in->name_len));
                assert(inside(in->data, (size_t)in->size, data, size));
        }
        size_t n = lup_jit_size(&q);
        assert(n == size);
        uint8_t *again = malloc(n);
        assert(again);
        struct lup_wr w = lup_wr_init(again, n);
        lup_jit_encode(&w, &q);
        assert(!w.err && w.len == size && memcmp(again, data, size) == 0);
        free(again);
        free(q.inputs);
        return 0;
}
