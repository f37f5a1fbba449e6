/* SPDX-License-Identifier: MIT */
/*
 * CUDA module images: PTX text, fatbins, fatbinC wrappers and ELF cubins.
 * cuModuleLoadData takes only a pointer, so the shim must find an image's
 * size from its own headers; the worker checks the same headers again
 * against the bytes it actually received.
 */
#ifndef LUP_IMAGE_H
#define LUP_IMAGE_H

#include <stddef.h>
#include <stdint.h>

enum lup_image_kind { LUP_IMAGE_PTX = 1, LUP_IMAGE_FATBIN = 2, LUP_IMAGE_ELF = 3 };

#define LUP_FATBIN_MAGIC   0xba55ed50u
#define LUP_FATBINC_MAGIC  0x466243b1u
#define LUP_MAX_PTX_BYTES  (256u << 20)
#define LUP_MAX_BLOB_GUESS (1ull << 30)  /* == LUP_MAX_BLOB */

/*
 * Measures the image at p, reading at most `avail` bytes (pass SIZE_MAX for
 * memory the caller owns and trusts, as the shim does with its caller's
 * image). A fatbinC wrapper is followed to the fatbin it points to, which
 * is returned in *ret_start. PTX sizes include the terminating NUL.
 * Returns 0, or -EBADMSG for something that is not a well-formed image.
 */
int lup_image_measure(const uint8_t *p, size_t avail, int *ret_kind, const uint8_t **ret_start, size_t *ret_size);

#endif
