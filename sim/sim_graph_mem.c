/* SPDX-License-Identifier: MIT */
/*
 * Graph memory accounting: cuDeviceGetGraphMemAttribute and kin. The sim
 * maps a memory alloc node's memory when the node is made and unmaps it
 * with the last holder (sim_graph_node.c), so memory "used" and memory
 * "reserved" by graphs are the same amount, and trimming frees nothing.
 */
#include "sim_graph.h"

static unsigned long long used[SIM_MAX_DEVICES], high[SIM_MAX_DEVICES];

void sim_gmem_account(int dev, long long size)
{
        if (dev < 0 || dev >= SIM_MAX_DEVICES)
                return;
        used[dev] += (unsigned long long)size;
        if (used[dev] > high[dev])
                high[dev] = used[dev];
}

static CUresult device_ok(CUdevice dev)
{
        struct sim_driver *drv = sim_driver_get();
        bool ok;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_rdlock(drv);
        ok = sim_device_at(drv, dev) != NULL;
        sim_unlock(drv);
        return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

SIM_API CUresult cuDeviceGraphMemTrim(CUdevice device)
{
        return device_ok(device);
}

SIM_API CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
        CUresult r = device_ok(device);

        if (r != CUDA_SUCCESS)
                return r;
        if (!value)
                return CUDA_ERROR_INVALID_VALUE;
        sim_graph_lock();
        switch (attr) {
        case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
        case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
                *(cuuint64_t *)value = used[device];
                break;
        case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
        case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
                *(cuuint64_t *)value = high[device];
                break;
        default:
                r = CUDA_ERROR_INVALID_VALUE;
                break;
        }
        sim_graph_unlock();
        return r;
}

/* Only the high watermarks may be set, and only to zero. */
SIM_API CUresult cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
        CUresult r = device_ok(device);

        if (r != CUDA_SUCCESS)
                return r;
        if (!value || *(cuuint64_t *)value != 0 ||
            (attr != CU_GRAPH_MEM_ATTR_USED_MEM_HIGH && attr != CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH))
                return CUDA_ERROR_INVALID_VALUE;
        sim_graph_lock();
        high[device] = 0;
        sim_graph_unlock();
        return CUDA_SUCCESS;
}
