/* SPDX-License-Identifier: MIT */
/*
 * Device queries. Every device looks like an H100/H200 SXM (compute
 * capability 9.0, 132 SMs), except for features whose APIs the sim does
 * not implement (memory pools, multicast, fabric and dma-buf handles,
 * compression, host-located VMM): those answer 0, so that a caller that
 * checks before it uses a feature takes its fallback path instead of
 * failing on a missing symbol.
 */
#include <stdio.h>
#include <string.h>

#include "sim_internal.h"
#include "sim_uuid.h"

struct attr_value {
        bool known;
        int value;
};

#define A(id, v) [CU_DEVICE_ATTRIBUTE_##id] = { true, (v) }

static const struct attr_value attr_table[CU_DEVICE_ATTRIBUTE_MAX] = {
        A(MAX_THREADS_PER_BLOCK, 1024),
        A(MAX_BLOCK_DIM_X, 1024),
        A(MAX_BLOCK_DIM_Y, 1024),
        A(MAX_BLOCK_DIM_Z, 64),
        A(MAX_GRID_DIM_X, 2147483647),
        A(MAX_GRID_DIM_Y, 65535),
        A(MAX_GRID_DIM_Z, 65535),
        A(MAX_SHARED_MEMORY_PER_BLOCK, 48 * 1024),
        A(TOTAL_CONSTANT_MEMORY, 64 * 1024),
        A(WARP_SIZE, 32),
        A(MAX_PITCH, 2147483647),
        A(MAX_REGISTERS_PER_BLOCK, 65536),
        A(CLOCK_RATE, 1980000),
        A(TEXTURE_ALIGNMENT, 512),
        A(GPU_OVERLAP, 1),
        A(MULTIPROCESSOR_COUNT, 132),
        A(KERNEL_EXEC_TIMEOUT, 0),
        A(INTEGRATED, 0),
        A(CAN_MAP_HOST_MEMORY, 1),
        A(COMPUTE_MODE, CU_COMPUTEMODE_DEFAULT),
        A(MAXIMUM_TEXTURE1D_WIDTH, 131072),
        A(MAXIMUM_TEXTURE2D_WIDTH, 131072),
        A(MAXIMUM_TEXTURE2D_HEIGHT, 65536),
        A(MAXIMUM_TEXTURE3D_WIDTH, 16384),
        A(MAXIMUM_TEXTURE3D_HEIGHT, 16384),
        A(MAXIMUM_TEXTURE3D_DEPTH, 16384),
        A(MAXIMUM_TEXTURE2D_LAYERED_WIDTH, 32768),
        A(MAXIMUM_TEXTURE2D_LAYERED_HEIGHT, 32768),
        A(MAXIMUM_TEXTURE2D_LAYERED_LAYERS, 2048),
        A(SURFACE_ALIGNMENT, 512),
        A(CONCURRENT_KERNELS, 1),
        A(ECC_ENABLED, 1),
        A(PCI_BUS_ID, 0),       /* per device, see device_attr() */
        A(PCI_DEVICE_ID, 0),
        A(TCC_DRIVER, 0),
        A(MEMORY_CLOCK_RATE, 2619000),
        A(GLOBAL_MEMORY_BUS_WIDTH, 5120),
        A(L2_CACHE_SIZE, 50 * 1024 * 1024),
        A(MAX_THREADS_PER_MULTIPROCESSOR, 2048),
        A(ASYNC_ENGINE_COUNT, 3),
        A(UNIFIED_ADDRESSING, 1),
        A(MAXIMUM_TEXTURE1D_LAYERED_WIDTH, 32768),
        A(MAXIMUM_TEXTURE1D_LAYERED_LAYERS, 2048),
        A(CAN_TEX2D_GATHER, 1),
        A(MAXIMUM_TEXTURE2D_GATHER_WIDTH, 32768),
        A(MAXIMUM_TEXTURE2D_GATHER_HEIGHT, 32768),
        A(MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE, 8192),
        A(MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE, 8192),
        A(MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE, 32768),
        A(PCI_DOMAIN_ID, 0),
        A(TEXTURE_PITCH_ALIGNMENT, 32),
        A(MAXIMUM_TEXTURECUBEMAP_WIDTH, 32768),
        A(MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH, 32768),
        A(MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS, 2046),
        A(MAXIMUM_SURFACE1D_WIDTH, 32768),
        A(MAXIMUM_SURFACE2D_WIDTH, 131072),
        A(MAXIMUM_SURFACE2D_HEIGHT, 65536),
        A(MAXIMUM_SURFACE3D_WIDTH, 16384),
        A(MAXIMUM_SURFACE3D_HEIGHT, 16384),
        A(MAXIMUM_SURFACE3D_DEPTH, 16384),
        A(MAXIMUM_SURFACE1D_LAYERED_WIDTH, 32768),
        A(MAXIMUM_SURFACE1D_LAYERED_LAYERS, 2048),
        A(MAXIMUM_SURFACE2D_LAYERED_WIDTH, 32768),
        A(MAXIMUM_SURFACE2D_LAYERED_HEIGHT, 32768),
        A(MAXIMUM_SURFACE2D_LAYERED_LAYERS, 2048),
        A(MAXIMUM_SURFACECUBEMAP_WIDTH, 32768),
        A(MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH, 32768),
        A(MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS, 2046),
        A(MAXIMUM_TEXTURE1D_LINEAR_WIDTH, 268435456),
        A(MAXIMUM_TEXTURE2D_LINEAR_WIDTH, 131072),
        A(MAXIMUM_TEXTURE2D_LINEAR_HEIGHT, 65000),
        A(MAXIMUM_TEXTURE2D_LINEAR_PITCH, 2097120),
        A(MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH, 32768),
        A(MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT, 32768),
        A(COMPUTE_CAPABILITY_MAJOR, 9),
        A(COMPUTE_CAPABILITY_MINOR, 0),
        A(MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH, 32768),
        A(STREAM_PRIORITIES_SUPPORTED, 1),
        A(GLOBAL_L1_CACHE_SUPPORTED, 1),
        A(LOCAL_L1_CACHE_SUPPORTED, 1),
        A(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 228 * 1024),
        A(MAX_REGISTERS_PER_MULTIPROCESSOR, 65536),
        A(MANAGED_MEMORY, 1),
        A(MULTI_GPU_BOARD, 0),
        A(MULTI_GPU_BOARD_GROUP_ID, 0), /* per device, see device_attr() */
        A(HOST_NATIVE_ATOMIC_SUPPORTED, 0),
        A(SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO, 2),
        A(PAGEABLE_MEMORY_ACCESS, 0),
        A(CONCURRENT_MANAGED_ACCESS, 1),
        A(COMPUTE_PREEMPTION_SUPPORTED, 1),
        A(CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 0),
        A(CAN_USE_STREAM_MEM_OPS_V1, 1),
        A(CAN_USE_64_BIT_STREAM_MEM_OPS_V1, 1),
        A(CAN_USE_STREAM_WAIT_VALUE_NOR_V1, 1),
        A(COOPERATIVE_LAUNCH, 1),
        A(COOPERATIVE_MULTI_DEVICE_LAUNCH, 1),
        A(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 227 * 1024),
        A(CAN_FLUSH_REMOTE_WRITES, 0),
        A(HOST_REGISTER_SUPPORTED, 1),
        A(PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, 0),
        A(DIRECT_MANAGED_MEM_ACCESS_FROM_HOST, 0),
        A(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1),
        A(HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 1),
        A(HANDLE_TYPE_WIN32_HANDLE_SUPPORTED, 0),
        A(HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED, 0),
        A(MAX_BLOCKS_PER_MULTIPROCESSOR, 32),
        A(GENERIC_COMPRESSION_SUPPORTED, 0),
        A(MAX_PERSISTING_L2_CACHE_SIZE, 34603008),
        A(MAX_ACCESS_POLICY_WINDOW_SIZE, 134213632),
        A(GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, 1),
        A(RESERVED_SHARED_MEMORY_PER_BLOCK, 1024),
        A(SPARSE_CUDA_ARRAY_SUPPORTED, 1),
        A(READ_ONLY_HOST_REGISTER_SUPPORTED, 1),
        A(TIMELINE_SEMAPHORE_INTEROP_SUPPORTED, 1),
        A(MEMORY_POOLS_SUPPORTED, 0),
        A(GPU_DIRECT_RDMA_SUPPORTED, 1),
        A(GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS, CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_HOST),
        A(GPU_DIRECT_RDMA_WRITES_ORDERING, CU_GPU_DIRECT_RDMA_WRITES_ORDERING_NONE),
        A(MEMPOOL_SUPPORTED_HANDLE_TYPES, 0),
        A(CLUSTER_LAUNCH, 1),
        A(DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED, 1),
        A(CAN_USE_64_BIT_STREAM_MEM_OPS, 1),
        A(CAN_USE_STREAM_WAIT_VALUE_NOR, 1),
        A(DMA_BUF_SUPPORTED, 0),
        A(IPC_EVENT_SUPPORTED, 1),
        A(MEM_SYNC_DOMAIN_COUNT, 4),
        A(TENSOR_MAP_ACCESS_SUPPORTED, 1),
        A(HANDLE_TYPE_FABRIC_SUPPORTED, 0),
        A(UNIFIED_FUNCTION_POINTERS, 1),
        A(NUMA_CONFIG, CU_DEVICE_NUMA_CONFIG_NONE),
        A(NUMA_ID, -1),
        A(MULTICAST_SUPPORTED, 0),
        A(MPS_ENABLED, 0),
        A(HOST_NUMA_ID, 0),
        A(D3D12_CIG_SUPPORTED, 0),
        A(MEM_DECOMPRESS_ALGORITHM_MASK, 0),
        A(MEM_DECOMPRESS_MAXIMUM_LENGTH, 0),
        A(VULKAN_CIG_SUPPORTED, 0),
        A(GPU_PCI_DEVICE_ID, 0x233010de),       /* H100 SXM5 (0x2330), NVIDIA (0x10de) */
        A(GPU_PCI_SUBSYSTEM_ID, 0x16c110de),
        A(HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0),
        A(HOST_NUMA_MEMORY_POOLS_SUPPORTED, 0),
        A(HOST_NUMA_MULTINODE_IPC_SUPPORTED, 0),
        A(HOST_MEMORY_POOLS_SUPPORTED, 0),
        A(HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0),
        A(HOST_ALLOC_DMA_BUF_SUPPORTED, 0),
        A(ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED, 0),
};

#undef A

/* Distinct buses, spread like an HGX board's; 16 devices fit below 0x100. */
static int pci_bus_of(int ordinal)
{
        return lup_sim_pci_bus(ordinal);
}

static CUresult device_attr(int ordinal, int attrib, int *ret)
{
        if (attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX || !attr_table[attrib].known)
                return CUDA_ERROR_INVALID_VALUE;
        switch (attrib) {
        case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
                *ret = pci_bus_of(ordinal);
                break;
        case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID:
                *ret = ordinal;
                break;
        default:
                *ret = attr_table[attrib].value;
        }
        return CUDA_SUCCESS;
}

static void device_uuid(int ordinal, CUuuid *ret)
{
        lup_sim_uuid(ordinal, (unsigned char *)ret->bytes);
}

/* Common prologue: initialised, output present, ordinal valid. */
static CUresult enter_device(CUdevice dev, const void *out, struct sim_device **ret)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_device *d;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!out)
                return CUDA_ERROR_INVALID_VALUE;
        d = sim_device_at(drv, dev);
        if (!d)
                return CUDA_ERROR_INVALID_DEVICE;
        *ret = d;
        return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetCount(int *count)
{
        struct sim_driver *drv = sim_driver_get();

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!count)
                return CUDA_ERROR_INVALID_VALUE;
        *count = drv->device_count;
        return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
        struct sim_device *d;
        CUresult r = enter_device(ordinal, device, &d);

        if (r != CUDA_SUCCESS)
                return r;
        *device = d->ordinal;
        return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
        struct sim_device *d;
        CUresult r = enter_device(dev, name, &d);

        if (r != CUDA_SUCCESS)
                return r;
        if (len <= 0)
                return CUDA_ERROR_INVALID_VALUE;
        /* The name must say it is simulated: nobody should mistake a run on
         * the sim for a run on hardware. Truncated to len like the driver. */
        snprintf(name, (size_t)len, "lupine simulated GPU #%d (sim)", d->ordinal);
        return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
        struct sim_device *d;
        CUresult r = enter_device(dev, uuid, &d);

        if (r != CUDA_SUCCESS)
                return r;
        device_uuid(d->ordinal, uuid);
        return CUDA_SUCCESS;
}

/* The legacy entry point; there is no MIG here, so both agree. */
SIM_API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
        return cuDeviceGetUuid_v2(uuid, dev);
}

SIM_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
        struct sim_device *d;
        CUresult r = enter_device(dev, bytes, &d);

        if (r != CUDA_SUCCESS)
                return r;
        *bytes = d->mem_total;
        return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
        struct sim_device *d;
        CUresult r = enter_device(dev, pi, &d);

        if (r != CUDA_SUCCESS)
                return r;
        return device_attr(d->ordinal, (int)attrib, pi);
}

SIM_API CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
        struct sim_device *d;
        CUresult r = enter_device(dev, pciBusId, &d);

        if (r != CUDA_SUCCESS)
                return r;
        if (len <= 0)
                return CUDA_ERROR_INVALID_VALUE;
        snprintf(pciBusId, (size_t)len, "%04x:%02x:00.0", 0, pci_bus_of(d->ordinal));
        return CUDA_SUCCESS;
}

/* Peers: the simulated devices do not map each other's memory (the driver
 * answers a device with itself CUDA_ERROR_INVALID_DEVICE). */
SIM_API CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
        struct sim_device *d, *p;
        CUresult r = enter_device(dev, canAccessPeer, &d);

        if (r == CUDA_SUCCESS)
                r = enter_device(peerDev, canAccessPeer, &p);
        if (r != CUDA_SUCCESS)
                return r;
        if (d == p)
                return CUDA_ERROR_INVALID_DEVICE;
        *canAccessPeer = 0;
        return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetP2PAttribute(int *value, CUdevice_P2PAttribute attrib, CUdevice srcDevice,
                                         CUdevice dstDevice)
{
        struct sim_device *d, *p;
        CUresult r = enter_device(srcDevice, value, &d);

        if (r == CUDA_SUCCESS)
                r = enter_device(dstDevice, value, &p);
        if (r != CUDA_SUCCESS)
                return r;
        if (attrib < CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK ||
            attrib > CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED)
                return CUDA_ERROR_INVALID_VALUE;
        if (d == p)
                return CUDA_ERROR_INVALID_DEVICE;
        *value = 0;
        return CUDA_SUCCESS;
}
