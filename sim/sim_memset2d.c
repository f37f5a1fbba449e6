/* SPDX-License-Identifier: MIT */
/*
 * 2D memsets (cuMemsetD2D8/16/32 and their Async forms): Height rows of
 * Width elements, dstPitch bytes apart, each row set with the 1D memset of
 * sim_copy.c. The whole span is checked before a row is set, so a bad
 * range changes nothing, as with the driver.
 */
#include "sim_internal.h"

static CUresult memset2d(CUdeviceptr dst, size_t pitch, uint32_t value, size_t elem, size_t width, size_t height,
                         bool async, CUstream stream)
{
        size_t w, span;
        CUresult r;

        if (__builtin_mul_overflow(width, elem, &w))
                return CUDA_ERROR_INVALID_VALUE;
        if (w == 0 || height == 0)
                return async ? cuMemsetD8Async(dst, 0, 0, stream) : cuMemsetD8_v2(dst, 0, 0);
        if ((height > 1 && pitch < w) || pitch % elem != 0 || __builtin_mul_overflow(pitch, height - 1, &span) ||
            __builtin_add_overflow(span, w, &span))
                return CUDA_ERROR_INVALID_VALUE;
        /* the whole span first, in one allocation */
        struct sim_driver *drv = sim_driver_get();
        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_rdlock(drv);
        r = sim_check_device_range(drv, dst, span, SIM_NEED_WRITE);
        sim_unlock(drv);
        if (r != CUDA_SUCCESS)
                return r;
        for (size_t row = 0; row < height; row++) {
                CUdeviceptr p = dst + row * pitch;
                switch (elem) {
                case 1:
                        r = async ? cuMemsetD8Async(p, (unsigned char)value, width, stream)
                                  : cuMemsetD8_v2(p, (unsigned char)value, width);
                        break;
                case 2:
                        r = async ? cuMemsetD16Async(p, (unsigned short)value, width, stream)
                                  : cuMemsetD16_v2(p, (unsigned short)value, width);
                        break;
                default:
                        r = async ? cuMemsetD32Async(p, value, width, stream) : cuMemsetD32_v2(p, value, width);
                        break;
                }
                if (r != CUDA_SUCCESS)
                        return r;
        }
        return CUDA_SUCCESS;
}

SIM_API CUresult cuMemsetD2D8_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height)
{
        return memset2d(dstDevice, dstPitch, uc, 1, Width, Height, false, NULL);
}

SIM_API CUresult cuMemsetD2D16_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width,
                                  size_t Height)
{
        return memset2d(dstDevice, dstPitch, us, 2, Width, Height, false, NULL);
}

SIM_API CUresult cuMemsetD2D32_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width, size_t Height)
{
        return memset2d(dstDevice, dstPitch, ui, 4, Width, Height, false, NULL);
}

SIM_API CUresult cuMemsetD2D8Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width,
                                   size_t Height, CUstream hStream)
{
        return memset2d(dstDevice, dstPitch, uc, 1, Width, Height, true, hStream);
}

SIM_API CUresult cuMemsetD2D16Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width,
                                    size_t Height, CUstream hStream)
{
        return memset2d(dstDevice, dstPitch, us, 2, Width, Height, true, hStream);
}

SIM_API CUresult cuMemsetD2D32Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width,
                                    size_t Height, CUstream hStream)
{
        return memset2d(dstDevice, dstPitch, ui, 4, Width, Height, true, hStream);
}
