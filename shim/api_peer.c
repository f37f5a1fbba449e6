/* SPDX-License-Identifier: MIT */
/*
 * Peer queries between devices. Two devices of one server are the
 * server's driver's to answer (the generated lupc_send_*). Two devices on
 * different servers of LUPINE_SERVER cannot reach each other's memory with
 * loads and stores, so they are not peers: cuDeviceCanAccessPeer answers 0
 * and every P2P attribute 0. Copies between them still work:
 * cuMemcpyPeer and the device-to-device copies go daemon to daemon
 * (shim/peer_copy.c), as the driver's go through host memory between GPUs
 * without peer access.
 */
#include <cuda.h>

#include "client.h"
#include "shim_gen.h"
#include "visible.h"

#define EXPORT __attribute__((visibility("default")))

/* Both valid devices of this process, on two different servers. */
static bool on_two_servers(CUdevice a, CUdevice b)
{
        int n = lupc_device_count();
        return a >= 0 && b >= 0 && a < n && b < n && lupc_dev_position(a) != lupc_dev_position(b);
}

EXPORT CUresult CUDAAPI cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
        if (!canAccessPeer)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (on_two_servers(dev, peerDev)) {
                *canAccessPeer = 0;
                return CUDA_SUCCESS;
        }
        return lupc_send_cuDeviceCanAccessPeer(canAccessPeer, dev, peerDev);
}

EXPORT CUresult CUDAAPI cuDeviceGetP2PAttribute(int *value, CUdevice_P2PAttribute attrib, CUdevice srcDevice,
                                                CUdevice dstDevice)
{
        if (!value)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (on_two_servers(srcDevice, dstDevice)) {
                switch (attrib) {
                case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK:
                case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED:
                case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED:
                case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED:
                        *value = 0;
                        return CUDA_SUCCESS;
                default:
                        break; /* an attribute the driver judges: ask the first's server */
                }
        }
        return lupc_send_cuDeviceGetP2PAttribute(value, attrib, srcDevice, dstDevice);
}
