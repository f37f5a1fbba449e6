/* SPDX-License-Identifier: MIT */
/*
 * e2e_devlist KERNELS_DIR ROUNDS [MS]: work on every device of the list,
 * for LUPINE_SERVER naming several servers (tests/e2e/test_devlist.py).
 * Prints the devices, then per round, on each device: a buffer written,
 * a kernel counting on the device, a fill kernel on the device's stream,
 * everything read back and checked; at the end each device's counter
 * must equal the rounds ("counters exact"). The devices' allocations must
 * lie in distinct arena slots (1 TiB apart at least).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

#define MAXDEV 8

int main(int argc, char **argv)
{
        if (argc < 3) {
                fprintf(stderr, "usage: %s KERNELS_DIR ROUNDS [MS]\n", argv[0]);
                return 2;
        }
        int rounds = atoi(argv[2]), pause_ms = argc > 3 ? atoi(argv[3]) : 0, n = 0;
        char path[4096], name[300];
        CUcontext ctx[MAXDEV];
        CUmodule mod[MAXDEV];
        CUfunction add[MAXDEV], fill[MAXDEV];
        CUstream st[MAXDEV];
        CUdeviceptr counter[MAXDEV];

        snprintf(path, sizeof(path), "%s/kernels.ptx", argv[1]);
        CK(cuInit(0));
        CK(cuDeviceGetCount(&n));
        EXPECT(n >= 1 && n <= MAXDEV);
        printf("devices %d\n", n);
        for (int d = 0; d < n; d++) {
                CUdevice dev;
                CK(cuDeviceGet(&dev, d));
                CK(cuDeviceGetName(name, sizeof(name), dev));
                printf("device %d: %s\n", d, name);
                CK(cuDevicePrimaryCtxRetain(&ctx[d], dev));
                CK(cuCtxSetCurrent(ctx[d]));
                CUdevice back = -1;
                CK(cuCtxGetDevice(&back));
                EXPECT(back == dev);
                CK(cuModuleLoad(&mod[d], path));
                CK(cuModuleGetFunction(&add[d], mod[d], "add_global_u32"));
                CK(cuModuleGetFunction(&fill[d], mod[d], "fill_u32"));
                CUdeviceptr g;
                size_t gs;
                unsigned one_bias = 1; /* add_global_u32 adds g_bias: one per round */
                CK(cuModuleGetGlobal(&g, &gs, mod[d], "g_bias"));
                EXPECT(gs == sizeof(one_bias));
                CK(cuMemcpyHtoD(g, &one_bias, sizeof(one_bias)));
                CK(cuStreamCreate(&st[d], CU_STREAM_NON_BLOCKING));
                CK(cuMemAlloc(&counter[d], 4));
                CK(cuMemsetD32(counter[d], 0, 1));
                for (int e = 0; e < d; e++)
                        EXPECT((counter[d] >> 40) != (counter[e] >> 40)); /* arena slots of their own */
        }
        fflush(stdout);
        const int m = 1 << 14;
        unsigned *host = malloc((size_t)m * 4), *got = malloc((size_t)m * 4);
        EXPECT(host && got);
        for (int r = 1; r <= rounds; r++) {
                for (int d = 0; d < n; d++) {
                        CK(cuCtxSetCurrent(ctx[d]));
                        CUdeviceptr buf, fb;
                        CK(cuMemAlloc(&buf, (size_t)m * 4));
                        CK(cuMemAlloc(&fb, (size_t)m * 4));
                        for (int i = 0; i < m; i++)
                                host[i] = (unsigned)(r * 7919 + d * 104729 + i);
                        CK(cuMemcpyHtoD(buf, host, (size_t)m * 4));
                        int one = 1;
                        void *pa[] = { &counter[d], &one };
                        CK(cuLaunchKernel(add[d], 1, 1, 1, 32, 1, 1, 0, 0, pa, NULL));
                        unsigned v = (unsigned)(r + 1000 * d);
                        int mm = m;
                        void *pf[] = { &fb, &v, &mm };
                        CK(cuLaunchKernel(fill[d], 16, 1, 1, 256, 1, 1, 0, st[d], pf, NULL));
                        CK(cuStreamSynchronize(st[d]));
                        CK(cuMemcpyDtoH(got, fb, (size_t)m * 4));
                        for (int i = 0; i < m; i++)
                                EXPECT(got[i] == v);
                        CK(cuMemcpyDtoH(got, buf, (size_t)m * 4));
                        EXPECT(memcmp(got, host, (size_t)m * 4) == 0);
                        CK(cuMemFree(buf));
                        CK(cuMemFree(fb));
                }
                printf("round %d ok\n", r);
                fflush(stdout);
                if (pause_ms) {
                        struct timespec ts = { pause_ms / 1000, (long)(pause_ms % 1000) * 1000000L };
                        nanosleep(&ts, NULL);
                }
        }
        if (n >= 2) { /* copies between two servers' memory: not yet (issue 17, item 2) */
                CUdeviceptr a, b;
                CK(cuCtxSetCurrent(ctx[0]));
                CK(cuMemAlloc(&a, 4096));
                CK(cuCtxSetCurrent(ctx[n - 1]));
                CK(cuMemAlloc(&b, 4096));
                EXPECT_ERR(cuMemcpyDtoD(b, a, 4096), CUDA_ERROR_NOT_SUPPORTED);
                EXPECT_ERR(cuMemcpyPeer(b, ctx[n - 1], a, ctx[0], 4096), CUDA_ERROR_NOT_SUPPORTED);
                EXPECT_ERR(cuMemcpy(b, a, 4096), CUDA_ERROR_NOT_SUPPORTED);
                CK(cuMemFree(b));
                CK(cuCtxSetCurrent(ctx[0]));
                CK(cuMemFree(a));
                printf("copies between servers: CUDA_ERROR_NOT_SUPPORTED\n");
        }
        /* a handle goes to its own server whatever the current context:
         * device n-1's stream while device 0's context is current */
        CK(cuCtxSetCurrent(ctx[0]));
        CK(cuStreamSynchronize(st[n - 1]));
        CK(cuStreamQuery(st[n - 1]));
        for (int d = 0; d < n; d++) {
                unsigned c = 0;
                CK(cuCtxSetCurrent(ctx[d]));
                CK(cuMemcpyDtoH(&c, counter[d], 4));
                if (c != (unsigned)rounds) {
                        fprintf(stderr, "device %d: counter %u, expected %d: a call was lost or ran twice\n", d, c,
                                rounds);
                        return 1;
                }
                CK(cuDevicePrimaryCtxRelease(d));
        }
        printf("e2e_devlist: OK, %d devices, %d rounds, counters exact\n", n, rounds);
        return e2e_failures ? 1 : 0;
}
