/* SPDX-License-Identifier: MIT */
/* A session that has its own sticky error when the daemon drains
 * (docs/security.md, finding 8): it allocates and fills memory, prints
 * "clean" and waits for a line (the test drains and restarts the daemon
 * then: a clean checkpoint), runs a kernel that faults, sees the sticky
 * error (700 or 717), prints "sticky" and waits for a line again (the test
 * drains now) and exits.
 * usage: e2e_sticky_drain KERNELS_DIR */
#include <stdio.h>
#include <string.h>

#include "check.h"

static void wait_line(const char *prompt)
{
        char buf[64];

        printf("%s\n", prompt);
        fflush(stdout);
        if (!fgets(buf, sizeof(buf), stdin))
                exit(2);
}

int main(int argc, char **argv)
{
        char path[4096];
        CUcontext c;
        CUmodule m;
        CUfunction f;
        CUdeviceptr d;
        if (argc < 2)
                return 2;
        snprintf(path, sizeof(path), "%s/kernels.ptx", argv[1]);
        CK(cuInit(0));
        CK(cuDevicePrimaryCtxRetain(&c, 0));
        CK(cuCtxSetCurrent(c));
        CK(cuModuleLoad(&m, path));
        CK(cuModuleGetFunction(&f, m, "oob_write_u32"));
        CK(cuMemAlloc(&d, 1 << 20));
        CK(cuMemsetD32(d, 0x5a5a5a5a, (1 << 20) / 4));
        CK(cuCtxSynchronize());
        wait_line("clean");
        void *p[] = { &d };
        CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, 0, p, NULL));
        CUresult r = cuCtxSynchronize();
        EXPECT(r == CUDA_ERROR_ILLEGAL_ADDRESS || r == CUDA_ERROR_INVALID_ADDRESS_SPACE);
        wait_line("sticky");
        printf("e2e_sticky_drain: done\n");
        return e2e_failures ? 1 : 0;
}
