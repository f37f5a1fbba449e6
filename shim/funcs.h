/* SPDX-License-Identifier: MIT */
/*
 * The shim's cache of functions and kernels: parameter layouts and
 * attributes (fetched once per function from the worker), names, occupancy
 * answers, and kernel -> function per context. A training loop asks these
 * questions tens of thousands of times; only the first crosses the network.
 */
#ifndef LUPC_FUNCS_H
#define LUPC_FUNCS_H

#include <stdint.h>
#include <cuda.h>

struct lupc_func_layout {
        uint32_t n_params;
        uint32_t param_bytes;
        const uint32_t *params;         /* n_params x (offset, size) */
        int max_threads;                /* CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK */
};

/* The layout of function id f (fetched on first use). */
CUresult lupc_func_layout(uint64_t f, struct lupc_func_layout *ret);
CUresult lupc_func_attr(uint64_t f, int attrib, int *ret);
/* api_launch.c: packs kernelParams (or an extra buffer) by lay into out
 * (lay->param_bytes bytes); CUDA_ERROR_INVALID_VALUE for a bad list. */
CUresult lupc_pack_params(const struct lupc_func_layout *lay, void **params, void **extra, uint8_t *out);
void lupc_func_invalidate(uint64_t f);
void lupc_func_set_name(uint64_t f, const char *name);
const char *lupc_func_name(uint64_t f);

#endif
