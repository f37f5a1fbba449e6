/* SPDX-License-Identifier: MIT */
/*
 * Which calls move the values the real driver gives texture and surface
 * objects (lupine's restore must get every live object back under its old
 * value). Prints the value of a fresh object after each step. Build:
 *   gcc -I/usr/local/cuda/include texobj_values.c -o texobj_values -lcuda
 * and run with the path of a cubin (tests/kernels/kernels.cubin).
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

static CUdeviceptr lin;

static CUtexObject tex(void)
{
        CUDA_RESOURCE_DESC r = {
                .resType = CU_RESOURCE_TYPE_LINEAR,
                .res.linear = { .devPtr = lin, .format = CU_AD_FORMAT_FLOAT, .numChannels = 1, .sizeInBytes = 4096 }
        };
        CUDA_TEXTURE_DESC t = { .filterMode = CU_TR_FILTER_MODE_POINT };
        CUtexObject o = 0;
        CUresult rc = cuTexObjectCreate(&o, &r, &t, NULL);
        if (rc)
                printf("  cuTexObjectCreate: %d\n", rc);
        return o;
}

static void show(const char *step)
{
        CUtexObject o = tex();
        printf("%-44s next %#llx\n", step, (unsigned long long)o);
        cuTexObjectDestroy(o);
}

static CUarray array2d(unsigned flags)
{
        CUDA_ARRAY3D_DESCRIPTOR d = {
                .Width = 16, .Height = 16, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1, .Flags = flags
        };
        CUarray a = NULL;
        if (cuArray3DCreate(&a, &d))
                printf("  cuArray3DCreate failed\n");
        return a;
}

int main(int argc, char **argv)
{
        CUcontext ctx, c2;
        CUdevice dev;
        if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx) ||
            cuMemAlloc(&lin, 4096))
                return 1;
        show("fresh primary context");
        show("again (after a destroy)");
        CUtexObject a = tex(), b = tex(), c = tex();
        printf("three live: %#llx %#llx %#llx\n", (unsigned long long)a, (unsigned long long)b, (unsigned long long)c);
        cuTexObjectDestroy(b);
        show("middle one destroyed");
        cuTexObjectDestroy(a);
        show("first one destroyed too");
        cuTexObjectDestroy(c);
        show("all destroyed");
        CUarray arr = array2d(0);
        show("after cuArray3DCreate");
        CUarray sarr = array2d(CUDA_ARRAY3D_SURFACE_LDST);
        show("after a surface-capable array");
        CUDA_RESOURCE_DESC rs = { .resType = CU_RESOURCE_TYPE_ARRAY, .res.array.hArray = sarr };
        CUsurfObject so = 0;
        printf("surface object: rc %d value %#llx\n", cuSurfObjectCreate(&so, &rs), (unsigned long long)so);
        show("with a live surface object");
        cuSurfObjectDestroy(so);
        CUDA_ARRAY3D_DESCRIPTOR md = {
                .Width = 32, .Height = 32, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 4
        };
        CUmipmappedArray m;
        if (cuMipmappedArrayCreate(&m, &md, 3) == 0)
                show("after cuMipmappedArrayCreate");
        CUmodule mod;
        if (argc > 1 && cuModuleLoad(&mod, argv[1]) == 0)
                show("after cuModuleLoad");
        if (argc > 2) {
                FILE *f = fopen(argv[2], "rb");
                static char ptx[1 << 20];
                size_t n = f ? fread(ptx, 1, sizeof(ptx) - 1, f) : 0;
                if (f)
                        fclose(f);
                ptx[n] = 0;
                CUmodule pm;
                if (n && cuModuleLoadData(&pm, ptx) == 0)
                        show("after cuModuleLoadData of PTX");
        }
        CUdeviceptr man;
        if (cuMemAllocManaged(&man, 1 << 20, CU_MEM_ATTACH_GLOBAL) == 0)
                show("after cuMemAllocManaged");
        static char host[1 << 16] __attribute__((aligned(4096)));
        if (cuMemHostRegister(host, sizeof(host), CU_MEMHOSTREGISTER_DEVICEMAP) == 0)
                show("after cuMemHostRegister");
        CUmemoryPool pool;
        CUmemPoolProps pp = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                              .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
        if (cuMemPoolCreate(&pool, &pp) == 0)
                show("after cuMemPoolCreate");
        CUstream st;
        CUevent ev;
        cuStreamCreate(&st, 0);
        cuEventCreate(&ev, 0);
        show("after a stream and an event");
        CUtexObject in_c2 = 0;
        if (cuCtxCreate(&c2, NULL, 0, dev) == 0) {
                cuCtxSetCurrent(c2);
                CUdeviceptr l2;
                cuMemAlloc(&l2, 4096);
                CUdeviceptr keep = lin;
                lin = l2;
                in_c2 = tex();
                printf("in a second context: %#llx\n", (unsigned long long)in_c2);
                show("in the second context, next");
                lin = keep;
                cuCtxSetCurrent(ctx);
                show("back in the primary, c2 alive");
                cuCtxDestroy(c2);
                show("second context destroyed");
        }
        CUtexObject many[8];
        for (int i = 0; i < 8; i++)
                many[i] = tex();
        printf("eight in a row: %#llx .. %#llx\n", (unsigned long long)many[0], (unsigned long long)many[7]);
        for (int i = 0; i < 8; i++)
                cuTexObjectDestroy(many[i]);
        show("eight destroyed");
        cuArrayDestroy(arr);
        cuArrayDestroy(sarr);
        return 0;
}
