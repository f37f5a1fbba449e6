/* SPDX-License-Identifier: MIT */
/* Run against a daemon whose simulated GPU has little memory
 * (LUPINE_SIM_MEM_MB=64): allocating past it fails with OUT_OF_MEMORY,
 * and memory freed is usable again. */
#include "check.h"

int main(void)
{
        CUcontext c;
        CUdeviceptr p[64];
        int n = 0;
        CK(cuInit(0));
        CK(cuDevicePrimaryCtxRetain(&c, 0));
        CK(cuCtxSetCurrent(c));
        CUresult r = CUDA_SUCCESS;
        while (n < 64 && (r = cuMemAlloc(&p[n], 8 << 20)) == CUDA_SUCCESS)
                n++;
        EXPECT(r == CUDA_ERROR_OUT_OF_MEMORY);
        EXPECT(n >= 4 && n < 64);
        CK(cuMemFree(p[0]));
        CK(cuMemAlloc(&p[0], 8 << 20));
        for (int i = 0; i < n; i++)
                CK(cuMemFree(p[i]));
        printf("e2e_oom: OK after %d allocations of 8 MiB\n", n);
        return e2e_failures ? 1 : 0;
}
