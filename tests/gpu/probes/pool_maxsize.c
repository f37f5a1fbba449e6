/* SPDX-License-Identifier: MIT */
/*
 * How the real driver applies CUmemPoolProps.maxSize: for pools capped at
 * 4 MiB, 64 MiB and 1 GiB, the largest single allocation it grants and
 * how much it grants in 1 MiB allocations before it refuses. Run on the GPU
 * host against the real driver (driver 580 granted 8 MiB from a 4 MiB pool).
 */
#include <cuda.h>
#include <stdio.h>
#include <string.h>

#define MIB (1ull << 20)

int main(void)
{
        CUcontext ctx;
        CUstream s;
        if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx) || cuStreamCreate(&s, 1))
                return 1;
        size_t caps[] = { 4 * MIB, 64 * MIB, 1024 * MIB };
        for (int c = 0; c < 3; c++) {
                CUmemPoolProps props;
                CUmemoryPool pool;
                memset(&props, 0, sizeof(props));
                props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
                props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
                props.maxSize = caps[c];
                if (cuMemPoolCreate(&pool, &props))
                        return 1;
                size_t big = 0;
                for (size_t sz = MIB; sz <= 64 * caps[c]; sz *= 2) {
                        CUdeviceptr p;
                        CUresult r = cuMemAllocFromPoolAsync(&p, sz, pool, s);
                        if (r != CUDA_SUCCESS)
                                break;
                        big = sz;
                        cuMemFreeAsync(p, s);
                        cuStreamSynchronize(s);
                        cuMemPoolTrimTo(pool, 0);
                }
                CUdeviceptr ps[4096];
                int n = 0;
                CUresult r = CUDA_SUCCESS;
                while (n < 4096 && (r = cuMemAllocFromPoolAsync(&ps[n], MIB, pool, s)) == CUDA_SUCCESS)
                        n++;
                cuuint64_t reserved = 0;
                cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved);
                printf("maxSize %zu MiB: largest single allocation %zu MiB; %d allocations of 1 MiB, then error %d; "
                       "reserved %llu MiB\n",
                       (size_t)(caps[c] / MIB), (size_t)(big / MIB), n, (int)r, (unsigned long long)(reserved / MIB));
                for (int i = 0; i < n; i++)
                        cuMemFreeAsync(ps[i], s);
                cuStreamSynchronize(s);
                cuMemPoolDestroy(pool);
        }
        return 0;
}
