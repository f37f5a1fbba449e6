// SPDX-License-Identifier: MIT
// CUDA arrays, mipmapped arrays, texture and surface objects through the
// CUDA runtime (what cudart asks of the driver for them), without kernels:
// the simulator does not sample. Runs unchanged on the real driver.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x)                                                                                   \
        do {                                                                                    \
                cudaError_t e_ = (x);                                                           \
                if (e_ != cudaSuccess) {                                                        \
                        printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
                        exit(1);                                                                \
                }                                                                               \
        } while (0)
#define EXPECT(c)                                                                               \
        do {                                                                                    \
                if (!(c)) {                                                                     \
                        printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);                    \
                        exit(1);                                                                \
                }                                                                               \
        } while (0)

static void pattern(float *v, size_t n, unsigned seed)
{
        for (size_t i = 0; i < n; i++)
                v[i] = (float)((i * 2654435761u + seed) % 1000);
}

int main()
{
        enum { W = 64, H = 32, D = 4 };
        static float in[W * H * D], out[W * H * D];
        cudaChannelFormatDesc f = cudaCreateChannelDesc<float>();
        CK(cudaSetDevice(0));
        // 2D: cudaMemcpy2DToArray / FromArray, pitched host rows
        cudaArray_t a;
        CK(cudaMallocArray(&a, &f, W, H, cudaArraySurfaceLoadStore));
        pattern(in, W * H, 1);
        CK(cudaMemcpy2DToArray(a, 0, 0, in, W * sizeof(float), W * sizeof(float), H, cudaMemcpyHostToDevice));
        CK(cudaMemcpy2DFromArray(out, W * sizeof(float), a, 0, 0, W * sizeof(float), H, cudaMemcpyDeviceToHost));
        EXPECT(memcmp(in, out, W * H * sizeof(float)) == 0);
        cudaChannelFormatDesc got;
        cudaExtent ext;
        unsigned int flags;
        CK(cudaArrayGetInfo(&got, &ext, &flags, a));
        EXPECT(got.x == 32 && got.f == cudaChannelFormatKindFloat && ext.width == W && ext.height == H &&
               ext.depth == 0 && (flags & cudaArraySurfaceLoadStore));
        // device <-> array, array -> array, asynchronously
        float *dev;
        cudaStream_t s;
        CK(cudaStreamCreate(&s));
        CK(cudaMalloc(&dev, sizeof(in)));
        cudaArray_t b;
        CK(cudaMallocArray(&b, &f, W, H));
        CK(cudaMemcpy2DArrayToArray(b, 0, 0, a, 0, 0, W * sizeof(float), H));
        CK(cudaMemcpy2DFromArrayAsync(dev, W * sizeof(float), b, 0, 0, W * sizeof(float), H,
                                      cudaMemcpyDeviceToDevice, s));
        memset(out, 0, sizeof(out));
        CK(cudaMemcpyAsync(out, dev, W * H * sizeof(float), cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        EXPECT(memcmp(in, out, W * H * sizeof(float)) == 0);
        // 3D and layered with cudaMemcpy3D
        cudaArray_t c3, cl, cc;
        CK(cudaMalloc3DArray(&c3, &f, make_cudaExtent(W, H, D)));
        CK(cudaMalloc3DArray(&cl, &f, make_cudaExtent(16, 16, 3), cudaArrayLayered));
        CK(cudaMalloc3DArray(&cc, &f, make_cudaExtent(8, 8, 6), cudaArrayCubemap));
        pattern(in, W * H * D, 2);
        cudaMemcpy3DParms p = {};
        p.srcPtr = make_cudaPitchedPtr(in, W * sizeof(float), W, H);
        p.dstArray = c3;
        p.extent = make_cudaExtent(W, H, D);
        p.kind = cudaMemcpyHostToDevice;
        CK(cudaMemcpy3D(&p));
        cudaMemcpy3DParms q = {};
        q.srcArray = c3;
        q.dstPtr = make_cudaPitchedPtr(out, W * sizeof(float), W, H);
        q.extent = make_cudaExtent(W, H, D);
        q.kind = cudaMemcpyDeviceToHost;
        memset(out, 0, sizeof(out));
        CK(cudaMemcpy3DAsync(&q, s));
        CK(cudaStreamSynchronize(s));
        EXPECT(memcmp(in, out, W * H * D * sizeof(float)) == 0);
        p.dstArray = cl;
        p.srcPtr = make_cudaPitchedPtr(in, 16 * sizeof(float), 16, 16);
        p.extent = make_cudaExtent(16, 16, 3);
        CK(cudaMemcpy3D(&p));
        p.dstArray = cc;
        p.srcPtr = make_cudaPitchedPtr(in, 8 * sizeof(float), 8, 8);
        p.extent = make_cudaExtent(8, 8, 6);
        CK(cudaMemcpy3D(&p));
        // 1D layered: height 0, layers as the depth, copied layer by layer as z
        cudaArray_t l1;
        CK(cudaMalloc3DArray(&l1, &f, make_cudaExtent(W, 0, D), cudaArrayLayered));
        pattern(in, W * D, 3);
        p.dstArray = l1;
        p.srcPtr = make_cudaPitchedPtr(in, W * sizeof(float), W, 1);
        p.extent = make_cudaExtent(W, 1, D);
        CK(cudaMemcpy3D(&p));
        q.srcArray = l1;
        q.dstPtr = make_cudaPitchedPtr(out, W * sizeof(float), W, 1);
        q.extent = make_cudaExtent(W, 1, D);
        memset(out, 0, sizeof(out));
        CK(cudaMemcpy3D(&q));
        EXPECT(memcmp(in, out, W * D * sizeof(float)) == 0);
        CK(cudaArrayGetInfo(&got, &ext, &flags, l1));
        EXPECT(ext.width == W && ext.height == 0 && ext.depth == D && (flags & cudaArrayLayered));
        CK(cudaFreeArray(l1));
        // mipmapped array levels
        cudaMipmappedArray_t m;
        CK(cudaMallocMipmappedArray(&m, &f, make_cudaExtent(32, 32, 0), 3));
        cudaArray_t lv;
        CK(cudaGetMipmappedArrayLevel(&lv, m, 2));
        CK(cudaArrayGetInfo(&got, &ext, &flags, lv));
        EXPECT(ext.width == 8 && ext.height == 8);
        // texture and surface objects
        cudaResourceDesc r = {};
        r.resType = cudaResourceTypeArray;
        r.res.array.array = a;
        cudaTextureDesc t = {};
        t.filterMode = cudaFilterModeLinear;
        t.normalizedCoords = 1;
        t.addressMode[0] = t.addressMode[1] = cudaAddressModeClamp;
        cudaTextureObject_t to, tm;
        CK(cudaCreateTextureObject(&to, &r, &t, NULL));
        cudaResourceDesc rg;
        CK(cudaGetTextureObjectResourceDesc(&rg, to));
        EXPECT(rg.resType == cudaResourceTypeArray && rg.res.array.array == a);
        cudaTextureDesc tg;
        CK(cudaGetTextureObjectTextureDesc(&tg, to));
        EXPECT(tg.filterMode == cudaFilterModeLinear && tg.normalizedCoords == 1);
        cudaResourceDesc rm = {};
        rm.resType = cudaResourceTypeMipmappedArray;
        rm.res.mipmap.mipmap = m;
        t.mipmapFilterMode = cudaFilterModeLinear;
        t.maxMipmapLevelClamp = 2;
        CK(cudaCreateTextureObject(&tm, &rm, &t, NULL));
        cudaSurfaceObject_t so;
        CK(cudaCreateSurfaceObject(&so, &r));
        CK(cudaGetSurfaceObjectResourceDesc(&rg, so));
        EXPECT(rg.res.array.array == a);
        EXPECT(to != tm && tm != so);
        CK(cudaDestroySurfaceObject(so));
        CK(cudaDestroyTextureObject(tm));
        CK(cudaDestroyTextureObject(to));
        // past the bounds
        EXPECT(cudaMemcpy2DToArray(a, 4, 0, in, W * sizeof(float), W * sizeof(float), H, cudaMemcpyHostToDevice) !=
               cudaSuccess);
        (void)cudaGetLastError();
        CK(cudaFreeMipmappedArray(m));
        CK(cudaFreeArray(a));
        CK(cudaFreeArray(b));
        CK(cudaFreeArray(c3));
        CK(cudaFreeArray(cl));
        CK(cudaFreeArray(cc));
        CK(cudaFree(dev));
        CK(cudaStreamDestroy(s));
        printf("rt_arrays: OK\n");
        return 0;
}
