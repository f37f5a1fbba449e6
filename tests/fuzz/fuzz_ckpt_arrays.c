/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the checkpoint's "arrays" object decoder
 * (checkpoint/ckpt_arrays.c), which a restore runs on bytes a provider
 * hands back: hostile input. Beyond "no read past the input", it checks
 * what the restore relies on:
 *   - the result is 0, -EBADMSG or -ENOMEM, and outputs are set only on 0;
 *   - every accepted array passes lup_array_check (levels: their parent
 *     is an earlier mipmapped array and they hold that level's shape);
 *   - ids ascend; object flags are booleans;
 *   - encoding what was decoded gives the input back byte for byte.
 */
/* the checks are the point of a fuzz target: keep assert() in every build type */
#undef NDEBUG
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_arrays.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct lup_ckpt_array *a = (void *)1;
        struct lup_ckpt_texobj *t = (void *)1;
        uint32_t na = 7, nt = 7;
        const char *why = NULL;
        int rc = lup_ckpt_arrays_decode(data, size, &a, &na, &t, &nt, &why);
        if (rc != 0) {
                assert(rc == -EBADMSG || rc == -ENOMEM);
                assert(why != NULL);
                assert(a == (void *)1 && t == (void *)1 && na == 7 && nt == 7);
                return 0;
        }
        for (uint32_t i = 0; i < na; i++) {
                struct lup_array_shape s;
                assert(i == 0 || a[i].id > a[i - 1].id);
                if (!a[i].parent)
                        assert(lup_array_check(&a[i].d, a[i].levels, &s, &why) == 0);
                else
                        assert(a[i].levels == 0);
        }
        for (uint32_t i = 0; i < nt; i++)
                assert(t[i].surface == 0 || t[i].surface == 1);
        uint8_t *buf;
        size_t len;
        assert(lup_ckpt_arrays_encode(a, na, t, nt, &buf, &len) == 0);
        assert(len == size && memcmp(buf, data, len) == 0);
        free(buf);
        free(a);
        free(t);
        return 0;
}
