/* SPDX-License-Identifier: MIT */
/*
 * Tensor maps (TMA descriptors): encoded by the server's driver. A map holds
 * the global address, which lupine keeps the same on both sides (the
 * session's arena), so the 128 bytes the worker sends back are what the
 * client's kernels take by value; after a restore the memory is at the same
 * addresses again, so a map encoded before it stays right.
 *
 * The arrays are sent at their full size (rank 5) with the unused tail
 * zeroed; the driver's own rank checks run on the server.
 */
#include <string.h>

#include "client.h"
#include "shim_gen.h"

#define EXPORT   __attribute__((visibility("default")))
#define MAX_RANK 5

/* Copies the rank-sized arrays into full-size ones; refuses what cannot be
 * sent (a rank past 5, a missing array). The address must be device memory
 * of this session. */
static CUresult common_args(CUtensorMap *map, cuuint32_t rank, void *addr, const cuuint64_t *dims,
                            const cuuint64_t *strides, cuuint64_t d[MAX_RANK], cuuint64_t st[MAX_RANK - 1])
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!map || !dims || rank == 0 || rank > MAX_RANK || (rank > 1 && !strides))
                return CUDA_ERROR_INVALID_VALUE;
        if (lupc_check_devptr((uint64_t)(uintptr_t)addr) != CUDA_SUCCESS)
                return CUDA_ERROR_INVALID_VALUE;
        memset(d, 0, MAX_RANK * sizeof(*d));
        memset(st, 0, (MAX_RANK - 1) * sizeof(*st));
        memcpy(d, dims, rank * sizeof(*d));
        if (rank > 1)
                memcpy(st, strides, (rank - 1) * sizeof(*st));
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                                               cuuint32_t tensorRank, void *globalAddress, const cuuint64_t *globalDim,
                                               const cuuint64_t *globalStrides, const cuuint32_t *boxDim,
                                               const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,
                                               CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
                                               CUtensorMapFloatOOBfill oobFill)
{
        cuuint64_t d[MAX_RANK], st[MAX_RANK - 1];
        cuuint32_t box[MAX_RANK] = { 0 }, es[MAX_RANK] = { 0 };

        CUresult r = common_args(tensorMap, tensorRank, globalAddress, globalDim, globalStrides, d, st);
        if (r != CUDA_SUCCESS)
                return r;
        if (!boxDim || !elementStrides)
                return CUDA_ERROR_INVALID_VALUE;
        memcpy(box, boxDim, tensorRank * sizeof(*box));
        memcpy(es, elementStrides, tensorRank * sizeof(*es));
        return lupc_send_lupTensorMapEncodeTiled(tensorMap, (int)tensorDataType, tensorRank,
                                                 (CUdeviceptr)(uintptr_t)globalAddress, d, st, box, es, (int)interleave,
                                                 (int)swizzle, (int)l2Promotion, (int)oobFill);
}

EXPORT CUresult CUDAAPI cuTensorMapEncodeIm2col(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                                                cuuint32_t tensorRank, void *globalAddress, const cuuint64_t *globalDim,
                                                const cuuint64_t *globalStrides, const int *pixelBoxLowerCorner,
                                                const int *pixelBoxUpperCorner, cuuint32_t channelsPerPixel,
                                                cuuint32_t pixelsPerColumn, const cuuint32_t *elementStrides,
                                                CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                                CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill)
{
        cuuint64_t d[MAX_RANK], st[MAX_RANK - 1];
        cuuint32_t es[MAX_RANK] = { 0 };
        int lower[MAX_RANK - 2] = { 0 }, upper[MAX_RANK - 2] = { 0 };

        CUresult r = common_args(tensorMap, tensorRank, globalAddress, globalDim, globalStrides, d, st);
        if (r != CUDA_SUCCESS)
                return r;
        /* im2col needs the spatial dimensions: rank 3 to 5 */
        if (tensorRank < 3 || !elementStrides || !pixelBoxLowerCorner || !pixelBoxUpperCorner)
                return CUDA_ERROR_INVALID_VALUE;
        memcpy(es, elementStrides, tensorRank * sizeof(*es));
        memcpy(lower, pixelBoxLowerCorner, (tensorRank - 2) * sizeof(*lower));
        memcpy(upper, pixelBoxUpperCorner, (tensorRank - 2) * sizeof(*upper));
        return lupc_send_lupTensorMapEncodeIm2col(
                tensorMap, (int)tensorDataType, tensorRank, (CUdeviceptr)(uintptr_t)globalAddress, d, st, lower, upper,
                channelsPerPixel, pixelsPerColumn, es, (int)interleave, (int)swizzle, (int)l2Promotion, (int)oobFill);
}

EXPORT CUresult CUDAAPI cuTensorMapReplaceAddress(CUtensorMap *tensorMap, void *globalAddress)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!tensorMap || lupc_check_devptr((uint64_t)(uintptr_t)globalAddress) != CUDA_SUCCESS)
                return CUDA_ERROR_INVALID_VALUE;
        CUtensorMap old = *tensorMap;
        return lupc_send_lupTensorMapReplaceAddress(tensorMap, &old, (CUdeviceptr)(uintptr_t)globalAddress);
}
