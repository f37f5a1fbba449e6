/* SPDX-License-Identifier: MIT */
/*
 * Tensor maps. The simulator's kernels never read one (it has no TMA), so
 * the 128 bytes are the sim's own: the inputs packed in order, enough for a
 * test to see that the same inputs give the same map and a replaced address
 * changes it. The checks are the driver's documented rules.
 */
#include <string.h>

#include "sim_internal.h"

#define MAX_RANK 5

struct sim_tmap {
        uint64_t addr;
        uint64_t dims[MAX_RANK];
        uint64_t strides[MAX_RANK - 1];
        uint32_t box[MAX_RANK];
        uint8_t es[MAX_RANK];
        uint8_t rank, dtype, interleave, swizzle, l2, oob, kind;
};
_Static_assert(sizeof(struct sim_tmap) <= sizeof(CUtensorMap), "a sim tensor map fits the driver's 128 bytes");

static CUresult check_common(CUtensorMap *map, CUtensorMapDataType dtype, cuuint32_t rank, void *addr,
                             const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *es,
                             CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                             CUtensorMapFloatOOBfill oob)
{
        if (!sim_driver_get())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!map || !dims || !es || rank == 0 || rank > MAX_RANK || (rank > 1 && !strides))
                return CUDA_ERROR_INVALID_VALUE;
        if ((unsigned)dtype > CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B ||
            (unsigned)interleave > CU_TENSOR_MAP_INTERLEAVE_32B ||
            (unsigned)swizzle > CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B ||
            (unsigned)l2 > CU_TENSOR_MAP_L2_PROMOTION_L2_256B ||
            (unsigned)oob > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
                return CUDA_ERROR_INVALID_VALUE;
        /* the address 16-byte aligned (32 with 32-byte interleave) */
        if ((uintptr_t)addr % (interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16) != 0)
                return CUDA_ERROR_INVALID_VALUE;
        for (cuuint32_t i = 0; i < rank; i++) {
                if (dims[i] == 0 || dims[i] > (1ull << 32) || es[i] == 0 || es[i] > 8)
                        return CUDA_ERROR_INVALID_VALUE;
                if (i + 1 < rank && (strides[i] % 16 != 0 || strides[i] >= (1ull << 40)))
                        return CUDA_ERROR_INVALID_VALUE;
        }
        return CUDA_SUCCESS;
}

static void pack(CUtensorMap *map, const struct sim_tmap *t)
{
        memset(map, 0, sizeof(*map));
        memcpy(map, t, sizeof(*t));
}

static struct sim_tmap fill(uint8_t kind, CUtensorMapDataType dtype, cuuint32_t rank, void *addr,
                            const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *es,
                            CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                            CUtensorMapFloatOOBfill oob)
{
        struct sim_tmap t;
        memset(&t, 0, sizeof(t));
        t.addr = (uintptr_t)addr;
        t.kind = kind;
        t.rank = (uint8_t)rank;
        t.dtype = (uint8_t)dtype;
        t.interleave = (uint8_t)interleave;
        t.swizzle = (uint8_t)swizzle;
        t.l2 = (uint8_t)l2;
        t.oob = (uint8_t)oob;
        for (cuuint32_t i = 0; i < rank; i++) {
                t.dims[i] = dims[i];
                t.es[i] = (uint8_t)es[i];
                if (i + 1 < rank)
                        t.strides[i] = strides[i];
        }
        return t;
}

SIM_API CUresult cuTensorMapEncodeTiled(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                                        cuuint32_t tensorRank, void *globalAddress, const cuuint64_t *globalDim,
                                        const cuuint64_t *globalStrides, const cuuint32_t *boxDim,
                                        const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,
                                        CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
                                        CUtensorMapFloatOOBfill oobFill)
{
        CUresult r = check_common(tensorMap, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides,
                                  elementStrides, interleave, swizzle, l2Promotion, oobFill);
        if (r != CUDA_SUCCESS)
                return r;
        if (!boxDim)
                return CUDA_ERROR_INVALID_VALUE;
        for (cuuint32_t i = 0; i < tensorRank; i++)
                if (boxDim[i] == 0 || boxDim[i] > 256)
                        return CUDA_ERROR_INVALID_VALUE;
        struct sim_tmap t = fill(1, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides, elementStrides,
                                 interleave, swizzle, l2Promotion, oobFill);
        for (cuuint32_t i = 0; i < tensorRank; i++)
                t.box[i] = boxDim[i];
        pack(tensorMap, &t);
        return CUDA_SUCCESS;
}

SIM_API CUresult cuTensorMapEncodeIm2col(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                                         cuuint32_t tensorRank, void *globalAddress, const cuuint64_t *globalDim,
                                         const cuuint64_t *globalStrides, const int *pixelBoxLowerCorner,
                                         const int *pixelBoxUpperCorner, cuuint32_t channelsPerPixel,
                                         cuuint32_t pixelsPerColumn, const cuuint32_t *elementStrides,
                                         CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                         CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill)
{
        CUresult r = check_common(tensorMap, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides,
                                  elementStrides, interleave, swizzle, l2Promotion, oobFill);
        if (r != CUDA_SUCCESS)
                return r;
        if (tensorRank < 3 || !pixelBoxLowerCorner || !pixelBoxUpperCorner || channelsPerPixel == 0 ||
            channelsPerPixel > 256 || pixelsPerColumn == 0 || pixelsPerColumn > 1024)
                return CUDA_ERROR_INVALID_VALUE;
        struct sim_tmap t = fill(2, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides, elementStrides,
                                 interleave, swizzle, l2Promotion, oobFill);
        t.box[0] = channelsPerPixel;
        t.box[1] = pixelsPerColumn;
        for (cuuint32_t i = 0; i + 2 < tensorRank && i < 3; i++)
                t.box[2 + i] = (uint32_t)(pixelBoxLowerCorner[i] & 0xffff) |
                               ((uint32_t)(pixelBoxUpperCorner[i] & 0xffff) << 16);
        pack(tensorMap, &t);
        return CUDA_SUCCESS;
}

SIM_API CUresult cuTensorMapReplaceAddress(CUtensorMap *tensorMap, void *globalAddress)
{
        struct sim_tmap t;

        if (!sim_driver_get())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!tensorMap)
                return CUDA_ERROR_INVALID_VALUE;
        memcpy(&t, tensorMap, sizeof(t));
        if (t.kind == 0 || (uintptr_t)globalAddress % (t.interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16) != 0)
                return CUDA_ERROR_INVALID_VALUE;
        t.addr = (uintptr_t)globalAddress;
        pack(tensorMap, &t);
        return CUDA_SUCCESS;
}
