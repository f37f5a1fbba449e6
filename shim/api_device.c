/* SPDX-License-Identifier: MIT */
/* cuInit, the driver version and device queries: answered from the device
 * snapshot the worker sends with its HELLO reply. */
#include <string.h>

#include "client.h"

#define EXPORT __attribute__((visibility("default")))

/* cuda.h maps these names to their newest ABI; the old ABIs are exported too. */
#undef cuDeviceGetUuid
#undef cuDeviceTotalMem


EXPORT CUresult CUDAAPI cuInit(unsigned int Flags)
{
        if (Flags != 0)
                return CUDA_ERROR_INVALID_VALUE;
        return lupc_init();
}

EXPORT CUresult CUDAAPI cuDriverGetVersion(int *driverVersion)
{
        if (!driverVersion)
                return CUDA_ERROR_INVALID_VALUE;
        /* Before cuInit the server is unknown: report the API this shim was built for. */
        *driverVersion = lupc_initialized() ? (int)lupc_driver_version() : CUDA_VERSION;
        return CUDA_SUCCESS;
}

static CUresult get_device(CUdevice dev, const struct lupc_device **ret)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        *ret = lupc_device(dev);
        return *ret ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

EXPORT CUresult CUDAAPI cuDeviceGetCount(int *count)
{
        if (!count)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        *count = lupc_device_count();
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
        if (!device)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!lupc_device(ordinal))
                return CUDA_ERROR_INVALID_DEVICE;
        *device = ordinal;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
        const struct lupc_device *d;
        CUresult r;

        if (!name || len <= 0)
                return CUDA_ERROR_INVALID_VALUE;
        if ((r = get_device(dev, &d)) != CUDA_SUCCESS)
                return r;
        size_t n = strlen(d->name);
        if (n >= (size_t)len)
                n = (size_t)len - 1;
        memcpy(name, d->name, n);
        name[n] = 0;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
        const struct lupc_device *d;
        CUresult r;

        if (!uuid)
                return CUDA_ERROR_INVALID_VALUE;
        if ((r = get_device(dev, &d)) != CUDA_SUCCESS)
                return r;
        *uuid = d->uuid;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev);
EXPORT CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
        return cuDeviceGetUuid_v2(uuid, dev);
}

EXPORT CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
        const struct lupc_device *d;
        CUresult r;

        if (!bytes)
                return CUDA_ERROR_INVALID_VALUE;
        if ((r = get_device(dev, &d)) != CUDA_SUCCESS)
                return r;
        *bytes = (size_t)d->total_mem;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
        const struct lupc_device *d;
        CUresult r;

        if (!pi)
                return CUDA_ERROR_INVALID_VALUE;
        if ((r = get_device(dev, &d)) != CUDA_SUCCESS)
                return r;
        /* snapshot slot i holds attribute id i + 1 */
        if ((int)attrib < 1 || (uint32_t)attrib > d->n_attr)
                return CUDA_ERROR_INVALID_VALUE;
        /* the stream-ordered allocator is the shim's (shim/pool.c), whatever
         * the server's driver says; its pools cannot be exported */
        if (attrib == CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED ||
            attrib == CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES) {
                *pi = attrib == CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED;
                return CUDA_SUCCESS;
        }
        if (d->attr_res[attrib - 1] != CUDA_SUCCESS)
                return (CUresult)d->attr_res[attrib - 1];
        *pi = d->attr[attrib - 1];
        return CUDA_SUCCESS;
}
