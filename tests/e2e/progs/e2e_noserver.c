/* SPDX-License-Identifier: MIT */
/* With no reachable server, cuInit fails with CUDA_ERROR_NO_DEVICE (the
 * runner checks that exactly one clear line reached stderr) and nothing
 * crashes afterwards. */
#include "check.h"

int main(void)
{
        int n = -1;
        EXPECT_ERR(cuInit(0), CUDA_ERROR_NO_DEVICE);
        EXPECT_ERR(cuInit(0), CUDA_ERROR_NO_DEVICE);
        EXPECT_ERR(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
        CUdeviceptr p;
        EXPECT_ERR(cuMemAlloc(&p, 16), CUDA_ERROR_NOT_INITIALIZED);
        return e2e_failures ? 1 : 0;
}
