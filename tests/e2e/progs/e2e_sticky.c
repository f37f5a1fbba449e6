/* SPDX-License-Identifier: MIT */
/* Error latching: a kernel that faults is launched (the launch itself
 * succeeds, as it is asynchronous), and the next synchronising call returns
 * CUDA_ERROR_ILLEGAL_ADDRESS (the GPU may say INVALID_ADDRESS_SPACE). usage: e2e_sticky KERNELS_DIR */
#include <stdio.h>
#include <string.h>

#include "check.h"

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
        CK(cuMemAlloc(&d, 4096));
        void *p[] = { &d };
        CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, 0, p, NULL));
        /* an H200 reports this store to unmapped memory as 717 */
        CUresult r = cuCtxSynchronize();
        EXPECT(r == CUDA_ERROR_ILLEGAL_ADDRESS || r == CUDA_ERROR_INVALID_ADDRESS_SPACE);
        /* and the error is sticky: later calls in the context fail too */
        EXPECT(cuCtxSynchronize() == r);
        if (e2e_failures)
                return 1;
        printf("e2e_sticky: OK\n");
        return 0;
}
