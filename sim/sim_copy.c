/* SPDX-License-Identifier: MIT */
/*
 * Copies and sets. Each one checks every device range against the live
 * allocations and mappings (the whole range inside one of them, with the
 * access it needs) and then runs as a plain memcpy/memset while holding
 * the registry lock shared, so nothing it touches can be unmapped under
 * it. The async variants validate their stream and run immediately.
 * A zero-length operation succeeds without looking at its pointers.
 */
#include <string.h>

#include "sim_internal.h"

/* Takes the lock shared and checks the context (and stream). On success
 * the lock is held and the caller must sim_unlock(). */
static CUresult op_begin(struct sim_driver **ret_drv, bool async, CUstream stream)
{
        struct sim_driver *drv = sim_driver_get();
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_rdlock(drv);
        r = sim_ctx_current(drv, NULL, NULL);
        if (r == CUDA_SUCCESS && async)
                r = sim_stream_check(drv, stream);
        if (r != CUDA_SUCCESS) {
                sim_unlock(drv);
                return r;
        }
        *ret_drv = drv;
        return CUDA_SUCCESS;
}

static CUresult htod(CUdeviceptr dst, const void *src, size_t n, bool async, CUstream stream)
{
        struct sim_driver *drv;
        CUresult r = op_begin(&drv, async, stream);

        if (r != CUDA_SUCCESS)
                return r;
        if (n > 0) {
                r = sim_check_device_range(drv, dst, n, SIM_NEED_WRITE);
                if (r == CUDA_SUCCESS)
                        r = sim_check_host_range(drv, src, n, SIM_NEED_READ);
                /* memmove: under UVA the "host" side may be device memory. */
                if (r == CUDA_SUCCESS)
                        memmove((void *)(uintptr_t)dst, src, n);
        }
        sim_unlock(drv);
        return r;
}

static CUresult dtoh(void *dst, CUdeviceptr src, size_t n, bool async, CUstream stream)
{
        struct sim_driver *drv;
        CUresult r = op_begin(&drv, async, stream);

        if (r != CUDA_SUCCESS)
                return r;
        if (n > 0) {
                r = sim_check_device_range(drv, src, n, SIM_NEED_READ);
                if (r == CUDA_SUCCESS)
                        r = sim_check_host_range(drv, dst, n, SIM_NEED_WRITE);
                if (r == CUDA_SUCCESS)
                        memmove(dst, (const void *)(uintptr_t)src, n);
        }
        sim_unlock(drv);
        return r;
}

static CUresult dtod(CUdeviceptr dst, CUdeviceptr src, size_t n, bool async, CUstream stream)
{
        struct sim_driver *drv;
        CUresult r = op_begin(&drv, async, stream);

        if (r != CUDA_SUCCESS)
                return r;
        if (n > 0) {
                r = sim_check_device_range(drv, dst, n, SIM_NEED_WRITE);
                if (r == CUDA_SUCCESS)
                        r = sim_check_device_range(drv, src, n, SIM_NEED_READ);
                if (r == CUDA_SUCCESS)
                        memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
        }
        sim_unlock(drv);
        return r;
}

/* Sets n elements of width bytes (1, 2 or 4) to value. */
static CUresult memset_n(CUdeviceptr dst, uint32_t value, size_t width, size_t n,
                         bool async, CUstream stream)
{
        struct sim_driver *drv;
        CUresult r = op_begin(&drv, async, stream);

        if (r != CUDA_SUCCESS)
                return r;
        if (dst % width != 0 || n > SIZE_MAX / width) {
                r = CUDA_ERROR_INVALID_VALUE;
                goto out_unlock;
        }
        if (n == 0)
                goto out_unlock;
        r = sim_check_device_range(drv, dst, n * width, SIM_NEED_WRITE);
        if (r != CUDA_SUCCESS)
                goto out_unlock;
        switch (width) {
        case 1:
                memset((void *)(uintptr_t)dst, (int)(value & 0xff), n);
                break;
        case 2: {
                uint16_t *p = (uint16_t *)(uintptr_t)dst;

                for (size_t i = 0; i < n; i++)
                        p[i] = (uint16_t)value;
                break;
        }
        default: {
                uint32_t *p = (uint32_t *)(uintptr_t)dst;

                for (size_t i = 0; i < n; i++)
                        p[i] = value;
                break;
        }
        }
out_unlock:
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
        return htod(dstDevice, srcHost, ByteCount, false, NULL);
}

SIM_API CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
        return dtoh(dstHost, srcDevice, ByteCount, false, NULL);
}

SIM_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
        return dtod(dstDevice, srcDevice, ByteCount, false, NULL);
}

SIM_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost,
                                      size_t ByteCount, CUstream hStream)
{
        return htod(dstDevice, srcHost, ByteCount, true, hStream);
}

SIM_API CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice,
                                      size_t ByteCount, CUstream hStream)
{
        return dtoh(dstHost, srcDevice, ByteCount, true, hStream);
}

SIM_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                      size_t ByteCount, CUstream hStream)
{
        return dtod(dstDevice, srcDevice, ByteCount, true, hStream);
}

SIM_API CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
        return memset_n(dstDevice, uc, 1, N, false, NULL);
}

SIM_API CUresult cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
        return memset_n(dstDevice, us, 2, N, false, NULL);
}

SIM_API CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
        return memset_n(dstDevice, ui, 4, N, false, NULL);
}

SIM_API CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
        return memset_n(dstDevice, uc, 1, N, true, hStream);
}

SIM_API CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)
{
        return memset_n(dstDevice, us, 2, N, true, hStream);
}

SIM_API CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
        return memset_n(dstDevice, ui, 4, N, true, hStream);
}
