/* SPDX-License-Identifier: MIT */
/*
 * peer_bench [MIB]: copies of MIB MiB (default 1024) from the first device
 * to the last. With LUPINE_SERVER naming two servers these are copies
 * between servers (daemon to daemon, issue 17 item 2); with one device,
 * on the local driver, a device-to-device copy on that device.
 * Prints one line per way, each the best of three:
 *   peer direct  GB/s  cuMemcpyDtoD (or cuMemcpyPeer) of the whole buffer
 *   peer client  GB/s  the same bytes through this process: cuMemcpyDtoH
 *                      into pinned memory, then cuMemcpyHtoD
 * and checks the bytes that arrived. tests/gpu/devlist.sh prints the ratios.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(x)                                                                                  \
        do {                                                                                   \
                CUresult r_ = (x);                                                             \
                if (r_ != CUDA_SUCCESS) {                                                      \
                        fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #x, r_); \
                        exit(1);                                                               \
                }                                                                              \
        } while (0)

static double now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
        size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 1024, n = mib << 20;
        int count = 0;
        CUcontext c0, c1;
        CUdevice d0, d1;
        CUdeviceptr a, b;
        unsigned char *host, *check;

        CK(cuInit(0));
        CK(cuDeviceGetCount(&count));
        CK(cuDeviceGet(&d0, 0));
        CK(cuDeviceGet(&d1, count - 1));
        CK(cuDevicePrimaryCtxRetain(&c0, d0));
        CK(cuDevicePrimaryCtxRetain(&c1, d1));
        CK(cuCtxSetCurrent(c0));
        CK(cuMemAlloc(&a, n));
        CK(cuMemAllocHost((void **)&host, n));
        check = malloc(1 << 20);
        if (!check)
                return 1;
        for (size_t i = 0; i < n; i++)
                host[i] = (unsigned char)(i * 7 + (i >> 20));
        CK(cuMemcpyHtoD(a, host, n));
        CK(cuCtxSetCurrent(c1));
        CK(cuMemAlloc(&b, n));
        double best_direct = 1e9, best_client = 1e9;
        for (int k = 0; k < 3; k++) {
                CK(cuCtxSetCurrent(c0));
                CK(cuMemsetD8(b, 0, 1 << 20));
                CK(cuCtxSynchronize());
                double t = now();
                CK(cuMemcpyPeer(b, c1, a, c0, n));
                CK(cuCtxSetCurrent(c1));
                CK(cuCtxSynchronize());
                t = now() - t;
                best_direct = t < best_direct ? t : best_direct;
                CK(cuMemcpyDtoH(check, b + n - (1 << 20), 1 << 20));
                if (memcmp(check, host + n - (1 << 20), 1 << 20) != 0) {
                        fprintf(stderr, "peer_bench: the direct copy's bytes differ\n");
                        return 1;
                }
                CK(cuCtxSetCurrent(c0));
                t = now();
                CK(cuMemcpyDtoH(host, a, n));
                CK(cuCtxSetCurrent(c1));
                CK(cuMemcpyHtoD(b, host, n));
                CK(cuCtxSynchronize());
                t = now() - t;
                best_client = t < best_client ? t : best_client;
        }
        printf("peer direct %.3f GB/s (%zu MiB)\n", (double)n / best_direct / 1e9, mib);
        printf("peer client %.3f GB/s (%zu MiB)\n", (double)n / best_client / 1e9, mib);
        return 0;
}
