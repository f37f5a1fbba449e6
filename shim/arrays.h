/* SPDX-License-Identifier: MIT */
/* The CUDA arrays this process made (shim/api_arrays.c), for the copies
 * (shim/api_arrays_copy.c) and the texture and surface objects
 * (shim/api_texobj.c). */
#ifndef LUPC_ARRAYS_H
#define LUPC_ARRAYS_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda.h>

#include "cuarray.h"

/* What an id names: an array (a level of a mipmapped array too) or a
 * mipmapped array. */
enum lupc_array_kind {
        LUPC_ARRAY = 1,
        LUPC_MIPMAP = 2
};

/* Whether id is a live handle of kind; its descriptor and shape (of level
 * 0 for a mipmapped array) in *ret_d and *ret_s (either may be NULL). */
bool lupc_array_find(uint64_t id, enum lupc_array_kind kind, struct lup_array_desc *ret_d,
                     struct lup_array_shape *ret_s);
/* The worker destroyed the arrays and objects of context ctx with it
 * (cuCtxDestroy, a primary context's reset): forget them here too. */
void lupc_arrays_drop_ctx(uint64_t ctx);
void lupc_texobjs_drop_ctx(uint64_t ctx);
/* A CUDA_MEMCPY3D with at least one array end (api_hostmem.c hands them
 * over): bounds checked here, host ends staged through device memory. */
CUresult lupc_array_memcpy3d(const CUDA_MEMCPY3D *p, CUstream st, bool sync);

#endif
