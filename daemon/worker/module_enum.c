/* SPDX-License-Identifier: MIT */
/*
 * A module's functions for the client (shim/api_module_enum.c): how many,
 * and the name of the index-th in the driver's order, a chunk at a time.
 * The client then asks for each by name, so it gets ids the usual way.
 */
#define LUP_LOG_CAT LUP_LOGC_GPU
#include <stdlib.h>
#include <string.h>

#include "worker/session.h"

#define NAME_CHUNK 192

CUresult lupw_lupModuleFunctionCount(struct lupw_session *s, unsigned int *count, CUmodule hmod)
{
        return s->be.fn.cuModuleGetFunctionCount(count, hmod);
}

CUresult lupw_lupModuleFunctionName(struct lupw_session *s, uint32_t *len, void *chunk, CUmodule hmod,
                                    unsigned int index, unsigned int offset)
{
        unsigned int n = 0;
        CUresult r = s->be.fn.cuModuleGetFunctionCount(&n, hmod);
        if (r != CUDA_SUCCESS)
                return r;
        if (index >= n)
                return CUDA_ERROR_INVALID_VALUE;
        CUfunction *fs = calloc(n, sizeof(*fs));
        if (!fs)
                return CUDA_ERROR_OUT_OF_MEMORY;
        const char *name = NULL;
        r = s->be.fn.cuModuleEnumerateFunctions(fs, n, hmod);
        if (r == CUDA_SUCCESS)
                r = s->be.fn.cuFuncGetName(&name, fs[index]);
        free(fs);
        if (r != CUDA_SUCCESS)
                return r;
        size_t l = name ? strnlen(name, LUP_MAX_STR + 1) : 0;
        if (l == 0 || l > LUP_MAX_STR || offset > l)
                return CUDA_ERROR_INVALID_VALUE;
        size_t take = l - offset < NAME_CHUNK ? l - offset : NAME_CHUNK;
        memcpy(chunk, name + offset, take);
        *len = (uint32_t)l;
        return CUDA_SUCCESS;
}
