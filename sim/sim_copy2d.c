/* SPDX-License-Identifier: MIT */
/*
 * 2D and 3D copies: CUDA_MEMCPY2D / CUDA_MEMCPY3D descriptors turned into
 * the boxes of sim_copy.c. An array side is the array's host memory
 * (sim_array.c), its box checked against the array's extent.
 *
 * Rules, as the driver's: each pitch must hold the row (X offset plus
 * width) when there is more than one row; in 3D each height must hold
 * Y offset plus Height when there is more than one slice; LOD and the
 * reserved pointers must be zero.
 */
#include "sim_graph.h"

struct end_desc {
        CUmemorytype type;
        const void *host;
        CUdeviceptr device;
        CUarray array;
        size_t x, y, z;
        size_t pitch, height;   /* height: rows per slice (3D) */
};

/* arrays_ok: the caller does not hold the lock (sim_array_end takes it);
 * graph nodes, built under it, get CUDA_ERROR_NOT_SUPPORTED for arrays. */
static CUresult make_end(const struct end_desc *d, size_t width, size_t height, size_t depth, bool arrays_ok,
                         struct sim_box_end *ret)
{
        uintptr_t base;
        size_t off, rows;

        switch (d->type) {
        case CU_MEMORYTYPE_HOST:
                base = (uintptr_t)d->host;
                ret->side = SIM_SIDE_HOST;
                break;
        case CU_MEMORYTYPE_DEVICE:
                base = (uintptr_t)d->device;
                ret->side = SIM_SIDE_DEVICE;
                break;
        case CU_MEMORYTYPE_UNIFIED:
                base = (uintptr_t)d->device;
                ret->side = SIM_SIDE_ANY;
                break;
        case CU_MEMORYTYPE_ARRAY:
                if (!arrays_ok)
                        return CUDA_ERROR_NOT_SUPPORTED;
                ret->side = SIM_SIDE_HOST;
                return sim_array_end(d->array, d->x, d->y, d->z, width, height, depth, &ret->base, &ret->pitch,
                                     &ret->slice);
        default:
                return CUDA_ERROR_INVALID_VALUE;
        }
        if (d->x > SIZE_MAX - width)
                return CUDA_ERROR_INVALID_VALUE;
        if ((height > 1 || depth > 1) && d->pitch < d->x + width)
                return CUDA_ERROR_INVALID_VALUE;
        if (depth > 1 && (d->y > SIZE_MAX - height || d->height < d->y + height))
                return CUDA_ERROR_INVALID_VALUE;
        /* The first byte: ((z * height + y) * pitch + x), overflow-checked. */
        if (d->z && d->height && d->z > SIZE_MAX / d->height)
                return CUDA_ERROR_INVALID_VALUE;
        rows = d->z * d->height;
        if (rows > SIZE_MAX - d->y)
                return CUDA_ERROR_INVALID_VALUE;
        rows += d->y;
        if (d->pitch && rows > SIZE_MAX / d->pitch)
                return CUDA_ERROR_INVALID_VALUE;
        off = rows * d->pitch;
        if (off > SIZE_MAX - d->x || off + d->x > UINTPTR_MAX - base)
                return CUDA_ERROR_INVALID_VALUE;
        ret->base = base + off + d->x;
        ret->pitch = d->pitch;
        if (d->height && d->pitch > SIZE_MAX / d->height)
                return CUDA_ERROR_INVALID_VALUE;
        ret->slice = d->pitch * d->height;
        return CUDA_SUCCESS;
}

static CUresult copy2d(const CUDA_MEMCPY2D *p, bool async, CUstream stream)
{
        struct sim_copy c = { .width = p ? p->WidthInBytes : 0, .height = p ? p->Height : 0, .depth = 1 };
        struct end_desc s, d;
        CUresult r;

        if (!sim_driver_get())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!p)
                return CUDA_ERROR_INVALID_VALUE;
        s = (struct end_desc){ .type = p->srcMemoryType,
                               .host = p->srcHost,
                               .device = p->srcDevice,
                               .array = p->srcArray,
                               .x = p->srcXInBytes,
                               .y = p->srcY,
                               .pitch = p->srcPitch };
        d = (struct end_desc){ .type = p->dstMemoryType,
                               .host = p->dstHost,
                               .device = p->dstDevice,
                               .array = p->dstArray,
                               .x = p->dstXInBytes,
                               .y = p->dstY,
                               .pitch = p->dstPitch };
        if ((r = make_end(&s, c.width, c.height, 1, true, &c.src)) != CUDA_SUCCESS ||
            (r = make_end(&d, c.width, c.height, 1, true, &c.dst)) != CUDA_SUCCESS)
                return r;
        return sim_copy_submit(&c, async, stream);
}

static CUresult copy3d_box(const CUDA_MEMCPY3D *p, bool arrays_ok, struct sim_copy *ret)
{
        struct sim_copy c;
        struct end_desc s, d;
        CUresult r;

        if (!p || p->reserved0 || p->reserved1 || p->srcLOD || p->dstLOD)
                return CUDA_ERROR_INVALID_VALUE;
        c = (struct sim_copy){ .width = p->WidthInBytes, .height = p->Height, .depth = p->Depth };
        s = (struct end_desc){ .type = p->srcMemoryType,
                               .host = p->srcHost,
                               .device = p->srcDevice,
                               .array = p->srcArray,
                               .x = p->srcXInBytes,
                               .y = p->srcY,
                               .z = p->srcZ,
                               .pitch = p->srcPitch,
                               .height = p->srcHeight };
        d = (struct end_desc){ .type = p->dstMemoryType,
                               .host = p->dstHost,
                               .device = p->dstDevice,
                               .array = p->dstArray,
                               .x = p->dstXInBytes,
                               .y = p->dstY,
                               .z = p->dstZ,
                               .pitch = p->dstPitch,
                               .height = p->dstHeight };
        if ((r = make_end(&s, c.width, c.height, c.depth, arrays_ok, &c.src)) != CUDA_SUCCESS ||
            (r = make_end(&d, c.width, c.height, c.depth, arrays_ok, &c.dst)) != CUDA_SUCCESS)
                return r;
        *ret = c;
        return CUDA_SUCCESS;
}

CUresult sim_copy3d_box(const CUDA_MEMCPY3D *p, struct sim_copy *ret)
{
        return copy3d_box(p, false, ret);
}

static CUresult copy3d(const CUDA_MEMCPY3D *p, bool async, CUstream stream)
{
        struct sim_copy c;
        CUresult r;

        if (!sim_driver_get())
                return CUDA_ERROR_NOT_INITIALIZED;
        r = copy3d_box(p, true, &c);
        if (r != CUDA_SUCCESS)
                return r;
        return sim_copy_submit(&c, async, stream);
}

SIM_API CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy)
{
        return copy2d(pCopy, false, NULL);
}

/* The sim has no alignment rules to relax. */
SIM_API CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy)
{
        return copy2d(pCopy, false, NULL);
}

SIM_API CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
        return copy2d(pCopy, true, hStream);
}

SIM_API CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy)
{
        return copy3d(pCopy, false, NULL);
}

SIM_API CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
        return copy3d(pCopy, true, hStream);
}
