// SPDX-License-Identifier: MIT
// CUDA_VISIBLE_DEVICES as the CUDA runtime sees it (tests/e2e/test_visible.py):
// the devices it lists ("rt dev I UUID PCI-BUS-ID"), and on each one
// cudaSetDevice, cudaGetDevice, a cudaMalloc and its pointer attributes'
// device. The runtime goes through the driver API, so this is the shim's
// list. The last line: "rt_visible: OK", or "rt_visible: no device (100)"
// when cudaGetDeviceCount finds none.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
        std::fprintf(stderr, "%s:%d: %s: %d %s\n", __FILE__, __LINE__, #call, (int)e_, cudaGetErrorString(e_)); \
        std::exit(1); } } while (0)
#define EXPECT(c) do { if (!(c)) { std::fprintf(stderr, "%s:%d: expectation failed: %s\n", __FILE__, __LINE__, #c); \
        std::exit(1); } } while (0)

int main()
{
        int n = 0;
        cudaError_t e = cudaGetDeviceCount(&n);
        if (e != cudaSuccess || n == 0) {
                std::printf("rt_visible: no device (%d)\n", (int)e);
                return e == cudaErrorNoDevice && n == 0 ? 0 : 1;
        }
        for (int i = 0; i < n; i++) {
                cudaDeviceProp p;
                CK(cudaGetDeviceProperties(&p, i));
                const unsigned char *u = (const unsigned char *)p.uuid.bytes;
                std::printf("rt dev %d GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x "
                            "%04x:%02x:%02x.0\n", i, u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9],
                            u[10], u[11], u[12], u[13], u[14], u[15], p.pciDomainID, p.pciBusID, p.pciDeviceID);
                CK(cudaSetDevice(i));
                int cur = -1;
                CK(cudaGetDevice(&cur));
                EXPECT(cur == i);
                void *d = nullptr;
                CK(cudaMalloc(&d, 1 << 20));
                CK(cudaMemset(d, 1, 1 << 20));
                cudaPointerAttributes a;
                CK(cudaPointerGetAttributes(&a, d));
                if (a.type != cudaMemoryTypeDevice || a.device != i)
                        std::fprintf(stderr, "pointer attributes: type %d device %d\n", (int)a.type, a.device);
                EXPECT(a.type == cudaMemoryTypeDevice && a.device == i);
                CK(cudaFree(d));
        }
        EXPECT(cudaSetDevice(n) == cudaErrorInvalidDevice);
        std::printf("rt_visible: OK\n");
        return 0;
}
