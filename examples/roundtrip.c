/* SPDX-License-Identifier: MIT */
/*
 * A plain CUDA driver-API program, unaware of lupine: it lists the GPUs it
 * sees, moves 256 MiB to the device and back, transforms it on the device
 * with memsets and device-to-device copies, and checks every byte.
 * Run it with lupine's libcuda.so.1 first on LD_LIBRARY_PATH.
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call) do { \
        CUresult r_ = (call); \
        if (r_ != CUDA_SUCCESS) { \
                const char *s_ = "?"; \
                cuGetErrorString(r_, &s_); \
                fprintf(stderr, "%s failed: %s (%d)\n", #call, s_, (int)r_); \
                return 1; \
        } \
} while (0)

static double now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(void)
{
        const size_t n = 256u << 20;
        int count, ver;
        CUcontext ctx;
        CUdeviceptr a, b;

        CHECK(cuInit(0));
        CHECK(cuDriverGetVersion(&ver));
        CHECK(cuDeviceGetCount(&count));
        printf("driver %d.%d, %d device(s)\n", ver / 1000, (ver % 1000) / 10, count);
        for (int i = 0; i < count; i++) {
                char name[256];
                size_t mem;
                int sms;
                CHECK(cuDeviceGetName(name, sizeof(name), i));
                CHECK(cuDeviceTotalMem(&mem, i));
                CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, i));
                printf("  #%d %s: %zu MiB, %d multiprocessors\n", i, name, mem >> 20, sms);
        }
        CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
        CHECK(cuCtxSetCurrent(ctx));

        uint8_t *host = malloc(n), *back = malloc(n);
        if (!host || !back)
                return 1;
        for (size_t i = 0; i < n; i++)
                host[i] = (uint8_t)(i * 7 + (i >> 12));
        CHECK(cuMemAlloc(&a, n));
        CHECK(cuMemAlloc(&b, n));

        double t0 = now();
        CHECK(cuMemcpyHtoD(a, host, n));
        CHECK(cuCtxSynchronize());
        double t1 = now();
        CHECK(cuMemcpyDtoD(b, a, n));
        CHECK(cuMemsetD32(b, 0x01020304, 1024));
        CHECK(cuMemcpyDtoH(back, b, n));
        double t2 = now();

        for (size_t i = 0; i < 4096; i += 4)
                memcpy(host + i, "\x04\x03\x02\x01", 4);
        if (memcmp(host, back, n) != 0) {
                fprintf(stderr, "data mismatch\n");
                return 1;
        }
        printf("256 MiB host->device %.2f GB/s, device->host (with a device copy) %.2f GB/s; every byte checked\n",
               n / (t1 - t0) / 1e9, n / (t2 - t1) / 1e9);
        CHECK(cuMemFree(a));
        CHECK(cuMemFree(b));
        CHECK(cuDevicePrimaryCtxRelease(0));
        free(host);
        free(back);
        printf("roundtrip: OK\n");
        return 0;
}
