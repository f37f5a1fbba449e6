/* SPDX-License-Identifier: MIT */
/* cuInit, the driver version and device queries: answered from the device
 * snapshot the worker sends with its HELLO reply. */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
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
        /* managed memory's contract (api_managed.c, docs/managed.md) */
        if (lupc_managed_device_attr(attrib, pi))
                return CUDA_SUCCESS;
        if (d->attr_res[attrib - 1] != CUDA_SUCCESS)
                return (CUresult)d->attr_res[attrib - 1];
        *pi = d->attr[attrib - 1];
        return CUDA_SUCCESS;
}

/* ---- PCI bus ids, from the snapshot's PCI attributes */

static bool pci_of(const struct lupc_device *d, unsigned *ret_domain, unsigned *ret_bus, unsigned *ret_dev)
{
        const int ids[3] = { CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID,
                             CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID };
        unsigned *out[3] = { ret_domain, ret_bus, ret_dev };
        for (int i = 0; i < 3; i++) {
                if ((uint32_t)ids[i] > d->n_attr || d->attr_res[ids[i] - 1] != CUDA_SUCCESS)
                        return false;
                *out[i] = (unsigned)d->attr[ids[i] - 1];
        }
        return true;
}

/* "dddd:bb:dd.0", cut to len - 1 characters as the driver does */
EXPORT CUresult CUDAAPI cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
        const struct lupc_device *d;
        unsigned domain, bus, slot;
        CUresult r;

        if (!pciBusId || len <= 0)
                return CUDA_ERROR_INVALID_VALUE;
        if ((r = get_device(dev, &d)) != CUDA_SUCCESS)
                return r;
        if (!pci_of(d, &domain, &bus, &slot))
                return CUDA_ERROR_NOT_SUPPORTED;
        char id[32];
        int n = snprintf(id, sizeof(id), "%04x:%02x:%02x.0", domain, bus, slot);
        /* a buffer that cannot hold it: INVALID_VALUE, as driver 580 said for
         * 6 bytes on the H200 (not a truncated id) */
        if (n < 0 || n >= len)
                return CUDA_ERROR_INVALID_VALUE;
        memcpy(pciBusId, id, (size_t)n + 1);
        return CUDA_SUCCESS;
}

/* One hexadecimal number of at most max: where it stopped, or NULL. */
static const char *hex_field(const char *p, unsigned long max, unsigned *ret)
{
        char *end;
        if (!isxdigit((unsigned char)*p))
                return NULL;
        unsigned long v = strtoul(p, &end, 16);
        if (v > max)
                return NULL;
        *ret = (unsigned)v;
        return end;
}

/* The forms the driver takes: domain:bus:device.function, domain:bus:device
 * and bus:device.function, all hexadecimal. */
static bool parse_bus_id(const char *s, unsigned *ret_domain, unsigned *ret_bus, unsigned *ret_dev, unsigned *ret_fn)
{
        unsigned f[4] = { 0, 0, 0, 0 };
        int colons = 0;
        for (const char *c = s; *c; c++)
                colons += *c == ':';
        if (colons < 1 || colons > 2)
                return false;
        const char *p = s;
        int first = colons == 2 ? 0 : 1;
        for (int i = first; i < 3; i++) {
                p = hex_field(p, i == 0 ? 0xffffffffu : 0xffu, &f[i]);
                if (!p || (i < 2 && *p++ != ':'))
                        return false;
        }
        if (*p == '.') {
                p = hex_field(p + 1, 0xffu, &f[3]);
                if (!p)
                        return false;
        } else if (colons == 1) {
                return false; /* bus:device needs its function */
        }
        if (*p)
                return false;
        *ret_domain = f[0];
        *ret_bus = f[1];
        *ret_dev = f[2];
        *ret_fn = f[3];
        return true;
}

EXPORT CUresult CUDAAPI cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId)
{
        unsigned domain, bus, slot, fn;

        if (!dev || !pciBusId)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!parse_bus_id(pciBusId, &domain, &bus, &slot, &fn))
                return CUDA_ERROR_INVALID_VALUE;
        for (int i = 0; i < lupc_device_count(); i++) {
                unsigned d0, b0, s0;
                if (pci_of(lupc_device(i), &d0, &b0, &s0) && d0 == domain && b0 == bus && s0 == slot && fn == 0) {
                        *dev = i;
                        return CUDA_SUCCESS;
                }
        }
        return CUDA_ERROR_INVALID_DEVICE;
}
