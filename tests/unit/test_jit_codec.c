/* SPDX-License-Identifier: MIT */
/* The JIT request's codec (common/jit_codec.c): round trip, every limit at
 * its boundary, option classes. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "jit_codec.h"

/* req encoded into a fresh buffer (*ret_n bytes). */
static uint8_t *encode(const struct lup_jit_req *req, size_t *ret_n)
{
        size_t n = lup_jit_size(req);
        uint8_t *b = malloc(n);
        assert_non_null(b);
        struct lup_wr w = lup_wr_init(b, n);
        lup_jit_encode(&w, req);
        assert_int_equal(w.err, 0);
        assert_int_equal(w.len, n);
        *ret_n = n;
        return b;
}

static int decode(const uint8_t *b, size_t n, struct lup_jit_req *q)
{
        const char *why = NULL;
        int rc = lup_jit_decode(b, n, q, &why);
        if (rc < 0)
                assert_non_null(why);
        return rc;
}

static void roundtrip(void **state)
{
        static const char ptx[] = ".version 9.0\n.target sm_90\n";
        struct lup_jit_input in[2] = {
                { .type = 1,
                  .n_opts = 1,
                  .opts = { { 7, 2 } },
                  .name = "a.ptx",
                  .name_len = 5,
                  .data = (const uint8_t *)ptx,
                  .size = sizeof(ptx) },
                { .type = 0,
                  .data = (const uint8_t *)"\x7f"
                                           "ELF",
                  .size = 4 },
        };
        struct lup_jit_req req = {
                .n_opts = 3, .opts = { { 3, 0 }, { 4, 4096 }, { 2, 0 } }, .first = 2, .n_inputs = 2, .inputs = in
        };
        struct lup_jit_req q;
        size_t n;
        uint8_t *b = encode(&req, &n);
        (void)state;

        assert_int_equal(decode(b, n, &q), 0);
        assert_int_equal(q.n_opts, 3);
        assert_int_equal(q.opts[1].option, 4);
        assert_int_equal(q.opts[1].value, 4096);
        assert_int_equal(q.first, 2);
        assert_int_equal(q.n_inputs, 2);
        assert_int_equal(q.inputs[0].type, 1);
        assert_int_equal(q.inputs[0].n_opts, 1);
        assert_int_equal(q.inputs[0].opts[0].value, 2);
        assert_int_equal(q.inputs[0].name_len, 5);
        assert_memory_equal(q.inputs[0].name, "a.ptx", 5);
        assert_int_equal(q.inputs[0].size, sizeof(ptx));
        assert_memory_equal(q.inputs[0].data, ptx, sizeof(ptx));
        assert_int_equal(q.inputs[1].name_len, 0);
        assert_int_equal(q.inputs[1].size, 4);
        free(q.inputs);
        /* every shorter prefix and any trailing byte is refused */
        for (size_t k = 0; k < n; k++)
                assert_int_equal(decode(b, k, &q), -EBADMSG);
        uint8_t *longer = malloc(n + 1);
        memcpy(longer, b, n);
        longer[n] = 0;
        assert_int_equal(decode(longer, n + 1, &q), -EBADMSG);
        free(longer);
        b[0] ^= 1; /* the magic */
        assert_int_equal(decode(b, n, &q), -EBADMSG);
        free(b);
}

static void limits(void **state)
{
        struct lup_jit_req req = { .n_opts = LUP_JIT_MAX_OPTS };
        struct lup_jit_req q;
        size_t n;
        (void)state;

        for (uint32_t i = 0; i < LUP_JIT_MAX_OPTS; i++)
                req.opts[i] = (struct lup_jit_opt){ 7, i };
        uint8_t *b = encode(&req, &n);
        assert_int_equal(decode(b, n, &q), 0); /* exactly the most options */
        free(q.inputs);
        lup_put32(b + 4, LUP_JIT_MAX_OPTS + 1);
        assert_int_equal(decode(b, n, &q), -EBADMSG);
        free(b);

        /* input counts: first + n at most LUP_JIT_MAX_INPUTS */
        req.n_opts = 0;
        req.first = LUP_JIT_MAX_INPUTS;
        b = encode(&req, &n);
        assert_int_equal(decode(b, n, &q), 0);
        free(q.inputs);
        lup_put32(b + 8, LUP_JIT_MAX_INPUTS + 1);
        assert_int_equal(decode(b, n, &q), -EBADMSG);
        lup_put32(b + 8, 0);
        lup_put32(b + 12, LUP_JIT_MAX_INPUTS + 1); /* more inputs than allowed (and than sent) */
        assert_int_equal(decode(b, n, &q), -EBADMSG);
        free(b);

        /* an input's name: LUP_JIT_MAX_NAME bytes, not one more */
        char *name = malloc(LUP_JIT_MAX_NAME + 1);
        memset(name, 'n', LUP_JIT_MAX_NAME + 1);
        struct lup_jit_input in = {
                .type = 1, .name = name, .name_len = LUP_JIT_MAX_NAME, .data = (const uint8_t *)"x", .size = 1
        };
        req = (struct lup_jit_req){ .n_inputs = 1, .inputs = &in };
        b = encode(&req, &n);
        assert_int_equal(decode(b, n, &q), 0);
        free(q.inputs);
        free(b);
        in.name_len = LUP_JIT_MAX_NAME + 1;
        b = encode(&req, &n);
        assert_int_equal(decode(b, n, &q), -EBADMSG);
        free(b);
        free(name);

        /* input types 0..5 */
        in = (struct lup_jit_input){ .type = LUP_JIT_NUM_INPUT_TYPES - 1, .data = (const uint8_t *)"x", .size = 1 };
        b = encode(&req, &n);
        assert_int_equal(decode(b, n, &q), 0);
        free(q.inputs);
        free(b);
        in.type = LUP_JIT_NUM_INPUT_TYPES;
        b = encode(&req, &n);
        assert_int_equal(decode(b, n, &q), -EBADMSG);
        free(b);

        /* a size past the request */
        in = (struct lup_jit_input){ .type = 1, .data = (const uint8_t *)"xy", .size = 2 };
        b = encode(&req, &n);
        lup_put64(b + n - 10, UINT64_MAX);
        assert_int_equal(decode(b, n, &q), -EBADMSG);
        free(b);
}

static void option_classes(void **state)
{
        (void)state;
        assert_int_equal(lup_jit_option_class(0), LUP_JIT_SCALAR); /* max registers */
        assert_int_equal(lup_jit_option_class(2), LUP_JIT_SCALAR); /* wall time: an output */
        assert_int_equal(lup_jit_option_class(3), LUP_JIT_HOST_BUFFER);
        assert_int_equal(lup_jit_option_class(5), LUP_JIT_HOST_BUFFER);
        assert_int_equal(lup_jit_option_class(15), LUP_JIT_UNKNOWN);
        for (uint32_t o = 17; o <= 19; o++)
                assert_int_equal(lup_jit_option_class(o), LUP_JIT_NO_WIRE);
        for (uint32_t o = 25; o <= 28; o++)
                assert_int_equal(lup_jit_option_class(o), LUP_JIT_NO_WIRE);
        assert_int_equal(lup_jit_option_class(34), LUP_JIT_SCALAR); /* split compile */
        assert_int_equal(lup_jit_option_class(LUP_JIT_NUM_OPTIONS), LUP_JIT_UNKNOWN);
        assert_int_equal(lup_jit_option_class(UINT32_MAX), LUP_JIT_UNKNOWN);
        /* a request naming an option without a wire form is refused */
        struct lup_jit_req req = { .n_opts = 1, .opts = { { 17, 0 } } }, q;
        size_t n;
        uint8_t *b = encode(&req, &n);
        assert_int_equal(decode(b, n, &q), -EBADMSG);
        free(b);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(roundtrip),
                cmocka_unit_test(limits),
                cmocka_unit_test(option_classes),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
