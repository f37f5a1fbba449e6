/* SPDX-License-Identifier: MIT */
/*
 * Tensor maps, encoded by the driver for the client (shim/api_tensormap.c).
 * The arrays arrive as raw bytes at their full rank-5 size; they are copied
 * into aligned arrays here, and the driver checks the values itself. The
 * address was checked and translated by the generated decoder (the
 * session's arena or a module global, which a restore may have moved).
 */
#define LUP_LOG_CAT LUP_LOGC_GPU
#include <string.h>

#include "worker/session.h"

#define MAX_RANK 5

CUresult lupw_lupTensorMapEncodeTiled(struct lupw_session *s, void *map, int dtype, unsigned int rank, CUdeviceptr addr,
                                      const void *globalDim, const void *globalStrides, const void *boxDim,
                                      const void *elementStrides, int interleave, int swizzle, int l2, int oob)
{
        cuuint64_t dims[MAX_RANK], strides[MAX_RANK - 1];
        cuuint32_t box[MAX_RANK], es[MAX_RANK];
        CUtensorMap m;

        if (rank == 0 || rank > MAX_RANK)
                return CUDA_ERROR_INVALID_VALUE;
        memcpy(dims, globalDim, sizeof(dims));
        memcpy(strides, globalStrides, sizeof(strides));
        memcpy(box, boxDim, sizeof(box));
        memcpy(es, elementStrides, sizeof(es));
        CUresult r = s->be.fn.cuTensorMapEncodeTiled(&m, (CUtensorMapDataType)dtype, rank, (void *)(uintptr_t)addr,
                                                     dims, strides, box, es, (CUtensorMapInterleave)interleave,
                                                     (CUtensorMapSwizzle)swizzle, (CUtensorMapL2promotion)l2,
                                                     (CUtensorMapFloatOOBfill)oob);
        if (r == CUDA_SUCCESS)
                memcpy(map, &m, sizeof(m));
        return r;
}

CUresult lupw_lupTensorMapEncodeIm2col(struct lupw_session *s, void *map, int dtype, unsigned int rank,
                                       CUdeviceptr addr, const void *globalDim, const void *globalStrides,
                                       const void *lower, const void *upper, unsigned int channels, unsigned int pixels,
                                       const void *elementStrides, int interleave, int swizzle, int l2, int oob)
{
        cuuint64_t dims[MAX_RANK], strides[MAX_RANK - 1];
        cuuint32_t es[MAX_RANK];
        int lo[MAX_RANK - 2], hi[MAX_RANK - 2];
        CUtensorMap m;

        if (rank < 3 || rank > MAX_RANK)
                return CUDA_ERROR_INVALID_VALUE;
        memcpy(dims, globalDim, sizeof(dims));
        memcpy(strides, globalStrides, sizeof(strides));
        memcpy(lo, lower, sizeof(lo));
        memcpy(hi, upper, sizeof(hi));
        memcpy(es, elementStrides, sizeof(es));
        CUresult r = s->be.fn.cuTensorMapEncodeIm2col(&m, (CUtensorMapDataType)dtype, rank, (void *)(uintptr_t)addr,
                                                      dims, strides, lo, hi, channels, pixels, es,
                                                      (CUtensorMapInterleave)interleave, (CUtensorMapSwizzle)swizzle,
                                                      (CUtensorMapL2promotion)l2, (CUtensorMapFloatOOBfill)oob);
        if (r == CUDA_SUCCESS)
                memcpy(map, &m, sizeof(m));
        return r;
}

CUresult lupw_lupTensorMapReplaceAddress(struct lupw_session *s, void *map, const void *old, CUdeviceptr addr)
{
        CUtensorMap m;

        memcpy(&m, old, sizeof(m));
        CUresult r = s->be.fn.cuTensorMapReplaceAddress(&m, (void *)(uintptr_t)addr);
        if (r == CUDA_SUCCESS)
                memcpy(map, &m, sizeof(m));
        return r;
}
