/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for lup_image_measure() (common/image.c), which the worker
 * runs on module images uploaded by the client (lupw_check_image()).
 *
 * Beyond "no read past the input" (the input is exactly its size on the
 * heap: ASan sees one byte too far), it checks what the worker relies on:
 *   - the result is 0 or -EBADMSG;
 *   - an accepted image is one of the three kinds, starts at the input (a
 *     fatbinC wrapper holds a pointer, and is refused unless the caller
 *     trusts the memory: avail == SIZE_MAX) and lies inside it;
 *   - PTX ends at its first NUL;
 *   - measuring again with exactly the measured bytes gives the same answer,
 *     so the shim (which measures its caller's image without a bound) and
 *     the worker (which measures the bytes it received) agree.
 *
 * Known bugs (see fuzz_known_bugs.h):
 *   image-short-ptx: PTX shorter than 4 bytes with its NUL (".a\0") is
 *     measured when more bytes follow, but refused when given exactly
 *     (the avail < 4 check runs before the kind is known).
 */
/* the checks are the point of a fuzz target: keep assert() in every build type */
#undef NDEBUG
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "buf.h"
#include "fuzz_known_bugs.h"
#include "image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        int kind = 0;
        const uint8_t *start = NULL;
        size_t n = 0;

        int rc = lup_image_measure(data, size, &kind, &start, &n);
        assert(rc == 0 || rc == -EBADMSG);
        if (rc < 0)
                return 0;
        assert(kind == LUP_IMAGE_PTX || kind == LUP_IMAGE_FATBIN || kind == LUP_IMAGE_ELF);
        assert(start == data);
        assert(n >= 1 && n <= size);
        if (kind == LUP_IMAGE_PTX)
                assert(data[n - 1] == 0 && strlen((const char *)data) == n - 1);
        if (kind == LUP_IMAGE_FATBIN)
                assert(n >= 16 && lup_le32(data) == LUP_FATBIN_MAGIC);

        static int skip_short = -1;
        if (skip_short < 0)
                skip_short = fuzz_known_bug("image-short-ptx");
        if (n < 4 && skip_short)
                return 0;
        int kind2 = 0;
        const uint8_t *start2 = NULL;
        size_t n2 = 0;
        assert(lup_image_measure(data, n, &kind2, &start2, &n2) == 0);
        assert(kind2 == kind && start2 == start && n2 == n);
        return 0;
}
