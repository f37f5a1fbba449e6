/* SPDX-License-Identifier: MIT */
/* Device printf reaches this program's stdout in order with its own
 * output: each round prints a host line, launches printf_hello (2 blocks
 * of 4 threads, 8 device lines), synchronises in one of the ways that
 * flush the device's printf buffer, and prints another host line. The
 * caller (tests/e2e/run_e2e.py) checks the order of the lines.
 * usage: e2e_printf KERNELS_DIR */
#include <stdio.h>
#include <string.h>

#include "check.h"

enum { GRID = 2, BLOCK = 4 };

int main(int argc, char **argv)
{
        char path[4096];
        CUcontext c;
        CUmodule m;
        CUfunction f;
        CUstream s;
        CUevent ev;
        CUdeviceptr d;
        unsigned h;

        if (argc < 2)
                return 2;
        snprintf(path, sizeof(path), "%s/kernels.ptx", argv[1]);
        CK(cuInit(0));
        CK(cuDevicePrimaryCtxRetain(&c, 0));
        CK(cuCtxSetCurrent(c));
        CK(cuModuleLoad(&m, path));
        CK(cuModuleGetFunction(&f, m, "printf_hello"));
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
        CK(cuMemAlloc(&d, sizeof(h)));

        for (int round = 1; round <= 4; round++) {
                void *args[] = { &round };
                CUstream st = round == 2 ? s : NULL;

                /* flushed, so that the order is the same straight on the
                 * driver, whichever way it writes to fd 1 */
                printf("host: round %d before\n", round);
                fflush(stdout);
                CK(cuLaunchKernel(f, GRID, 1, 1, BLOCK, 1, 1, 0, st, args, NULL));
                switch (round) {
                case 1:
                        CK(cuCtxSynchronize());
                        break;
                case 2:
                        CK(cuStreamSynchronize(s));
                        break;
                case 3:
                        CK(cuEventRecord(ev, NULL));
                        CK(cuEventSynchronize(ev));
                        break;
                default:
                        CK(cuMemcpyDtoH(&h, d, sizeof(h)));     /* a blocking copy */
                        break;
                }
                printf("host: round %d after\n", round);
                fflush(stdout);
        }
        CK(cuEventDestroy(ev));
        CK(cuStreamDestroy(s));
        CK(cuMemFree(d));
        CK(cuModuleUnload(m));
        if (e2e_failures)
                return 1;
        printf("e2e_printf: OK\n");
        return 0;
}
