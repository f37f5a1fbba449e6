/* SPDX-License-Identifier: MIT */
/*
 * A module's functions in the driver's order: cuModuleGetFunctionCount,
 * cuModuleEnumerateFunctions, and lupc_module_function() for the export
 * table slot cuFFT uses (export_tables.c). The worker gives each one's name
 * (in chunks); the function itself is then got by name, so it has an id
 * and a cached name like any other.
 */
#include <string.h>

#include "client.h"
#include "shim_gen.h"

#define EXPORT     __attribute__((visibility("default")))
#define NAME_CHUNK 192

CUresult lupc_module_function(CUmodule mod, unsigned int index, CUfunction *ret_fn, const char **ret_name)
{
        char name[LUP_MAX_STR + 1];
        uint8_t chunk[NAME_CHUNK];
        uint32_t len = 0, off = 0;

        do {
                CUresult r = lupc_send_lupModuleFunctionName(&len, chunk, mod, index, off);
                if (r != CUDA_SUCCESS)
                        return r;
                if (len == 0 || len > LUP_MAX_STR || off >= len)
                        return lupc_protocol_error("lupModuleFunctionName");
                uint32_t take = len - off < NAME_CHUNK ? len - off : NAME_CHUNK;
                memcpy(name + off, chunk, take);
                off += take;
        } while (off < len);
        name[len] = 0;
        if (strlen(name) != len)
                return lupc_protocol_error("lupModuleFunctionName");
        CUresult r = cuModuleGetFunction(ret_fn, mod, name);
        if (r == CUDA_SUCCESS && ret_name)
                r = cuFuncGetName(ret_name, *ret_fn);
        return r;
}

EXPORT CUresult CUDAAPI cuModuleGetFunctionCount(unsigned int *count, CUmodule mod)
{
        if (!count || !mod)
                return CUDA_ERROR_INVALID_VALUE;
        return lupc_send_lupModuleFunctionCount(count, mod);
}

EXPORT CUresult CUDAAPI cuModuleEnumerateFunctions(CUfunction *functions, unsigned int numFunctions, CUmodule mod)
{
        unsigned int n = 0;

        if (!functions || !mod)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = lupc_send_lupModuleFunctionCount(&n, mod);
        if (r != CUDA_SUCCESS)
                return r;
        /* fewer slots than functions: the first ones, as driver 580 does */
        if (numFunctions < n)
                n = numFunctions;
        for (unsigned int i = 0; i < n; i++)
                if ((r = lupc_module_function(mod, i, &functions[i], NULL)) != CUDA_SUCCESS)
                        return r;
        return CUDA_SUCCESS;
}
