/* SPDX-License-Identifier: MIT */
/*
 * CUDA arrays, mipmapped arrays, texture and surface objects through the
 * shim (plain driver API; it runs unchanged on the real driver):
 *   e2e_arrays          1D/2D/3D/layered/cubemap arrays of several
 *                       formats, every copy form with the data checked,
 *                       descriptors read back, mipmapped levels, texture
 *                       and surface objects and their descriptors, and bad
 *                       input (absurd sizes, formats, channels, flags,
 *                       copies past the bounds, a texture on a destroyed
 *                       array);
 *   e2e_arrays hold     arrays with data and objects alive, "ready", then
 *                       after a line on stdin (the daemon restarted
 *                       meanwhile) the same contents, the same object values
 *                       (destroying each works: the driver knows it), and
 *                       new copies and objects work.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static uint32_t pat(uint32_t i, uint32_t seed)
{
        return (i * 2654435761u) ^ seed;
}

static void fill_bytes(uint8_t *p, size_t n, uint32_t seed)
{
        for (size_t i = 0; i < n; i++)
                p[i] = (uint8_t)(pat((uint32_t)i, seed) >> 7);
}

static CUarray make3d(size_t w, size_t h, size_t d, CUarray_format f, unsigned ch, unsigned flags)
{
        CUDA_ARRAY3D_DESCRIPTOR a = {
                .Width = w, .Height = h, .Depth = d, .Format = f, .NumChannels = ch, .Flags = flags
        };
        CUarray arr;
        CK(cuArray3DCreate(&arr, &a));
        return arr;
}

/* host -> array -> host for the whole array, with cuMemcpy3D */
static void roundtrip3d(CUarray a, size_t row, size_t rows, size_t slices, uint32_t seed)
{
        size_t n = row * rows * slices;
        uint8_t *in = malloc(n), *out = calloc(1, n);
        fill_bytes(in, n, seed);
        CUDA_MEMCPY3D c = { .srcMemoryType = CU_MEMORYTYPE_HOST,
                            .srcHost = in,
                            .srcPitch = row,
                            .srcHeight = rows,
                            .dstMemoryType = CU_MEMORYTYPE_ARRAY,
                            .dstArray = a,
                            .WidthInBytes = row,
                            .Height = rows,
                            .Depth = slices };
        CK(cuMemcpy3D(&c));
        CUDA_MEMCPY3D b = { .srcMemoryType = CU_MEMORYTYPE_ARRAY,
                            .srcArray = a,
                            .dstMemoryType = CU_MEMORYTYPE_HOST,
                            .dstHost = out,
                            .dstPitch = row,
                            .dstHeight = rows,
                            .WidthInBytes = row,
                            .Height = rows,
                            .Depth = slices };
        CK(cuMemcpy3D(&b));
        EXPECT(memcmp(in, out, n) == 0);
        free(in);
        free(out);
}

static void test_1d(void)
{
        CUDA_ARRAY_DESCRIPTOR d = {
                .Width = 1000, .Height = 0, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 1
        };
        CUarray a, b;
        CK(cuArrayCreate(&a, &d));
        CK(cuArrayCreate(&b, &d));
        uint8_t in[1000], out[1000] = { 0 };
        fill_bytes(in, sizeof(in), 1);
        CK(cuMemcpyHtoA(a, 0, in, sizeof(in)));
        CK(cuMemcpyAtoH(out, a, 0, sizeof(out)));
        EXPECT(memcmp(in, out, sizeof(in)) == 0);
        /* a part, at an offset */
        memset(out, 0, sizeof(out));
        CK(cuMemcpyAtoH(out, a, 100, 50));
        EXPECT(memcmp(in + 100, out, 50) == 0);
        /* array -> array, array -> device -> array */
        CK(cuMemcpyAtoA(b, 10, a, 0, 900));
        CUdeviceptr dev;
        CK(cuMemAlloc(&dev, 1000));
        CK(cuMemcpyAtoD(dev, b, 10, 900));
        memset(out, 0, sizeof(out));
        CK(cuMemcpyDtoH(out, dev, 900));
        EXPECT(memcmp(in, out, 900) == 0);
        CK(cuMemcpyHtoD(dev, in + 500, 500));
        CK(cuMemcpyDtoA(a, 0, dev, 500));
        CK(cuMemcpyAtoH(out, a, 0, 500));
        EXPECT(memcmp(in + 500, out, 500) == 0);
        /* the async forms on a stream */
        CUstream s;
        CK(cuStreamCreate(&s, 0));
        CK(cuMemcpyHtoAAsync(b, 0, in, 1000, s));
        memset(out, 0, sizeof(out));
        CK(cuMemcpyAtoHAsync(out, b, 0, 1000, s));
        CK(cuStreamSynchronize(s));
        EXPECT(memcmp(in, out, 1000) == 0);
        /* pinned host memory, and unified addressing naming a host pointer */
        uint8_t *pin;
        CK(cuMemAllocHost((void **)&pin, 1000));
        memset(pin, 0, 1000);
        CK(cuMemcpyAtoHAsync(pin, b, 0, 1000, s));
        CK(cuStreamSynchronize(s));
        EXPECT(memcmp(in, pin, 1000) == 0);
        CUDA_MEMCPY2D u = { .srcMemoryType = CU_MEMORYTYPE_UNIFIED,
                            .srcDevice = (CUdeviceptr)(uintptr_t)pin,
                            .dstMemoryType = CU_MEMORYTYPE_ARRAY,
                            .dstArray = a,
                            .dstXInBytes = 3,
                            .WidthInBytes = 997,
                            .Height = 1 };
        CK(cuMemcpy2D(&u));
        CK(cuMemcpyAtoH(out, a, 3, 997));
        EXPECT(memcmp(in, out, 997) == 0);
        CK(cuMemFreeHost(pin));
        /* past the end */
        EXPECT_ERR(cuMemcpyAtoH(out, a, 999, 2), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemcpyHtoA(a, 1001, in, 1), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuMemcpyAtoA(b, 500, a, 0, 501), CUDA_ERROR_INVALID_VALUE);
        CUDA_ARRAY_DESCRIPTOR got;
        CK(cuArrayGetDescriptor(&got, a));
        EXPECT(got.Width == 1000 && got.Height == 0 && got.Format == CU_AD_FORMAT_UNSIGNED_INT8 &&
               got.NumChannels == 1);
        CK(cuStreamDestroy(s));
        CK(cuMemFree(dev));
        CK(cuArrayDestroy(a));
        CK(cuArrayDestroy(b));
        if (ub_probes()) /* the H200's driver answered 709 once, and crashed here once */
                EXPECT_ERR(cuArrayDestroy(a), CUDA_ERROR_CONTEXT_IS_DESTROYED);
}

static void test_2d(void)
{
        /* 64 x 32 float4: rows of 1024 bytes */
        CUDA_ARRAY_DESCRIPTOR d = { .Width = 64, .Height = 32, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4 };
        CUarray a;
        CK(cuArrayCreate(&a, &d));
        size_t row = 64 * 16, pitch = row + 64;
        uint8_t *in = malloc(pitch * 32), *out = calloc(1, pitch * 32);
        fill_bytes(in, pitch * 32, 2);
        CUDA_MEMCPY2D c = { .srcMemoryType = CU_MEMORYTYPE_HOST,
                            .srcHost = in,
                            .srcPitch = pitch,
                            .dstMemoryType = CU_MEMORYTYPE_ARRAY,
                            .dstArray = a,
                            .WidthInBytes = row,
                            .Height = 32 };
        CK(cuMemcpy2D(&c));
        /* a box back: rows 4..11, bytes 32..287 of each */
        CUDA_MEMCPY2D b = { .srcMemoryType = CU_MEMORYTYPE_ARRAY,
                            .srcArray = a,
                            .srcXInBytes = 32,
                            .srcY = 4,
                            .dstMemoryType = CU_MEMORYTYPE_HOST,
                            .dstHost = out,
                            .dstPitch = 256,
                            .WidthInBytes = 256,
                            .Height = 8 };
        CK(cuMemcpy2DUnaligned(&b));
        for (int y = 0; y < 8; y++)
                EXPECT(memcmp(out + y * 256, in + (4 + y) * pitch + 32, 256) == 0);
        /* array -> pitched device memory -> a second array -> host, async */
        CUdeviceptr dev;
        size_t dpitch;
        CK(cuMemAllocPitch(&dev, &dpitch, row, 32, 16));
        CUarray a2;
        CK(cuArrayCreate(&a2, &d));
        CUstream s;
        CK(cuStreamCreate(&s, 0));
        CUDA_MEMCPY2D ad = { .srcMemoryType = CU_MEMORYTYPE_ARRAY,
                             .srcArray = a,
                             .dstMemoryType = CU_MEMORYTYPE_DEVICE,
                             .dstDevice = dev,
                             .dstPitch = dpitch,
                             .WidthInBytes = row,
                             .Height = 32 };
        CK(cuMemcpy2DAsync(&ad, s));
        CUDA_MEMCPY2D da = { .srcMemoryType = CU_MEMORYTYPE_DEVICE,
                             .srcDevice = dev,
                             .srcPitch = dpitch,
                             .dstMemoryType = CU_MEMORYTYPE_ARRAY,
                             .dstArray = a2,
                             .WidthInBytes = row,
                             .Height = 32 };
        CK(cuMemcpy2DAsync(&da, s));
        memset(out, 0, pitch * 32);
        CUDA_MEMCPY2D ah = { .srcMemoryType = CU_MEMORYTYPE_ARRAY,
                             .srcArray = a2,
                             .dstMemoryType = CU_MEMORYTYPE_HOST,
                             .dstHost = out,
                             .dstPitch = row,
                             .WidthInBytes = row,
                             .Height = 32 };
        CK(cuMemcpy2DAsync(&ah, s));
        CK(cuStreamSynchronize(s));
        for (int y = 0; y < 32; y++)
                EXPECT(memcmp(out + y * row, in + y * pitch, row) == 0);
        /* past the bounds: one row too many, one byte too wide */
        b.srcY = 25;
        EXPECT_ERR(cuMemcpy2D(&b), CUDA_ERROR_INVALID_VALUE);
        b.srcY = 0;
        b.srcXInBytes = row - 255;
        EXPECT_ERR(cuMemcpy2D(&b), CUDA_ERROR_INVALID_VALUE);
        CK(cuStreamDestroy(s));
        CK(cuMemFree(dev));
        CK(cuArrayDestroy(a));
        CK(cuArrayDestroy(a2));
        free(in);
        free(out);
}

static void test_3d_layered_cube(void)
{
        struct {
                size_t w, h, d;
                CUarray_format f;
                unsigned ch, flags, elem;
        } k[] = {
                { 16, 8, 4, CU_AD_FORMAT_UNSIGNED_INT16, 2, 0, 4 },
                { 8, 8, 3, CU_AD_FORMAT_SIGNED_INT8, 4, CUDA_ARRAY3D_LAYERED, 4 },
                { 32, 0, 5, CU_AD_FORMAT_HALF, 1, CUDA_ARRAY3D_LAYERED, 2 },
                { 8, 8, 6, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_CUBEMAP, 4 },
                { 4, 4, 12, CU_AD_FORMAT_UNSIGNED_INT32, 2, CUDA_ARRAY3D_CUBEMAP | CUDA_ARRAY3D_LAYERED, 8 },
                { 16, 16, 0, CU_AD_FORMAT_SIGNED_INT32, 1, CUDA_ARRAY3D_SURFACE_LDST, 4 },
        };
        for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
                CUarray a = make3d(k[i].w, k[i].h, k[i].d, k[i].f, k[i].ch, k[i].flags);
                CUDA_ARRAY3D_DESCRIPTOR got;
                CK(cuArray3DGetDescriptor(&got, a));
                EXPECT(got.Width == k[i].w && got.Height == k[i].h && got.Depth == k[i].d && got.Format == k[i].f &&
                       got.NumChannels == k[i].ch && got.Flags == k[i].flags);
                roundtrip3d(a, k[i].w * k[i].elem, k[i].h ? k[i].h : 1, k[i].d ? k[i].d : 1, (uint32_t)(10 + i));
                CK(cuArrayDestroy(a));
        }
        /* a 3D box in the middle: device -> array -> device, cuMemcpy3DAsync and cuMemcpy3DPeer */
        CUarray a = make3d(16, 8, 4, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0);
        CUdeviceptr d1, d2;
        size_t n = 64 * 8 * 4;
        uint8_t *in = malloc(n), *out = calloc(1, n);
        fill_bytes(in, n, 77);
        CK(cuMemAlloc(&d1, n));
        CK(cuMemAlloc(&d2, n));
        CK(cuMemcpyHtoD(d1, in, n));
        CK(cuMemsetD8(d2, 0, n));
        CUDA_MEMCPY3D c = { .srcMemoryType = CU_MEMORYTYPE_DEVICE,
                            .srcDevice = d1,
                            .srcPitch = 64,
                            .srcHeight = 8,
                            .dstMemoryType = CU_MEMORYTYPE_ARRAY,
                            .dstArray = a,
                            .WidthInBytes = 64,
                            .Height = 8,
                            .Depth = 4 };
        CK(cuMemcpy3DAsync(&c, NULL));
        CUcontext ctx;
        CK(cuCtxGetCurrent(&ctx));
        CUDA_MEMCPY3D_PEER p = { .srcMemoryType = CU_MEMORYTYPE_ARRAY,
                                 .srcArray = a,
                                 .srcXInBytes = 8,
                                 .srcY = 2,
                                 .srcZ = 1,
                                 .srcContext = ctx,
                                 .dstMemoryType = CU_MEMORYTYPE_DEVICE,
                                 .dstDevice = d2,
                                 .dstPitch = 64,
                                 .dstHeight = 8,
                                 .dstContext = ctx,
                                 .WidthInBytes = 16,
                                 .Height = 3,
                                 .Depth = 2 };
        CK(cuMemcpy3DPeer(&p));
        CK(cuMemcpyDtoH(out, d2, n));
        for (int z = 0; z < 2; z++)
                for (int y = 0; y < 3; y++)
                        EXPECT(memcmp(out + (z * 8 + y) * 64, in + ((1 + z) * 8 + 2 + y) * 64 + 8, 16) == 0);
        /* a slice too many */
        p.srcZ = 3;
        EXPECT_ERR(cuMemcpy3DPeer(&p), CUDA_ERROR_INVALID_VALUE);
        c.Depth = 5;
        EXPECT_ERR(cuMemcpy3D(&c), CUDA_ERROR_INVALID_VALUE);
        CK(cuMemFree(d1));
        CK(cuMemFree(d2));
        CK(cuArrayDestroy(a));
        free(in);
        free(out);
}

static void test_mipmap(void)
{
        CUDA_ARRAY3D_DESCRIPTOR d = {
                .Width = 64, .Height = 32, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 4
        };
        CUmipmappedArray m;
        CK(cuMipmappedArrayCreate(&m, &d, 4));
        for (unsigned l = 0; l < 4; l++) {
                CUarray lv, again;
                CK(cuMipmappedArrayGetLevel(&lv, m, l));
                CK(cuMipmappedArrayGetLevel(&again, m, l));
                EXPECT(lv == again);
                CUDA_ARRAY3D_DESCRIPTOR got;
                CK(cuArray3DGetDescriptor(&got, lv));
                EXPECT(got.Width == 64u >> l && got.Height == 32u >> l && got.Depth == 0);
                roundtrip3d(lv, (64u >> l) * 4, 32u >> l, 1, 40 + l);
                /* the H200's driver answers success for a level (it stays its mipmapped array's) */
                CK(cuArrayDestroy(lv));
        }
        CUarray lv;
        EXPECT_ERR(cuMipmappedArrayGetLevel(&lv, m, 4), CUDA_ERROR_INVALID_VALUE);
        CK(cuMipmappedArrayDestroy(m));
        if (ub_probes())
                EXPECT_ERR(cuMipmappedArrayDestroy(m), CUDA_ERROR_CONTEXT_IS_DESTROYED);
}

static CUDA_TEXTURE_DESC tex_desc(void)
{
        CUDA_TEXTURE_DESC t = { .addressMode = { CU_TR_ADDRESS_MODE_CLAMP, CU_TR_ADDRESS_MODE_CLAMP },
                                .filterMode = CU_TR_FILTER_MODE_LINEAR,
                                .flags = CU_TRSF_NORMALIZED_COORDINATES };
        return t;
}

static void test_objects(void)
{
        CUarray a = make3d(32, 16, 0, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_SURFACE_LDST);
        CUDA_RESOURCE_DESC r = { .resType = CU_RESOURCE_TYPE_ARRAY, .res.array.hArray = a };
        CUDA_TEXTURE_DESC t = tex_desc();
        CUtexObject to, tl, tp;
        CK(cuTexObjectCreate(&to, &r, &t, NULL));
        CUDA_RESOURCE_DESC rg;
        CUDA_TEXTURE_DESC tg;
        CK(cuTexObjectGetResourceDesc(&rg, to));
        EXPECT(rg.resType == CU_RESOURCE_TYPE_ARRAY && rg.res.array.hArray == a);
        CK(cuTexObjectGetTextureDesc(&tg, to));
        EXPECT(tg.filterMode == CU_TR_FILTER_MODE_LINEAR && tg.flags == CU_TRSF_NORMALIZED_COORDINATES &&
               tg.addressMode[0] == CU_TR_ADDRESS_MODE_CLAMP);
        /* linear and pitched memory */
        CUdeviceptr dev;
        CK(cuMemAlloc(&dev, 1 << 16));
        CUDA_RESOURCE_DESC rl = {
                .resType = CU_RESOURCE_TYPE_LINEAR,
                .res.linear = { .devPtr = dev, .format = CU_AD_FORMAT_FLOAT, .numChannels = 1, .sizeInBytes = 4096 }
        };
        CUDA_TEXTURE_DESC pt = { .filterMode = CU_TR_FILTER_MODE_POINT, .flags = CU_TRSF_READ_AS_INTEGER };
        CK(cuTexObjectCreate(&tl, &rl, &pt, NULL));
        CUDA_RESOURCE_DESC rp = { .resType = CU_RESOURCE_TYPE_PITCH2D,
                                  .res.pitch2D = { .devPtr = dev,
                                                   .format = CU_AD_FORMAT_UNSIGNED_INT8,
                                                   .numChannels = 4,
                                                   .width = 16,
                                                   .height = 16,
                                                   .pitchInBytes = 256 } };
        CK(cuTexObjectCreate(&tp, &rp, &pt, NULL));
        EXPECT(to != tl && tl != tp && to != tp);
        CK(cuTexObjectGetResourceDesc(&rg, tp));
        EXPECT(rg.resType == CU_RESOURCE_TYPE_PITCH2D && rg.res.pitch2D.devPtr == dev &&
               rg.res.pitch2D.pitchInBytes == 256);
        /* a mipmapped array with a view */
        CUDA_ARRAY3D_DESCRIPTOR md = { .Width = 16, .Height = 16, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1 };
        CUmipmappedArray m;
        CK(cuMipmappedArrayCreate(&m, &md, 3));
        CUDA_RESOURCE_DESC rm = { .resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY, .res.mipmap.hMipmappedArray = m };
        CUDA_TEXTURE_DESC tm = tex_desc();
        tm.mipmapFilterMode = CU_TR_FILTER_MODE_LINEAR;
        tm.maxMipmapLevelClamp = 2.0f;
        CUDA_RESOURCE_VIEW_DESC v = { .format = CU_RES_VIEW_FORMAT_FLOAT_1X32,
                                      .width = 16,
                                      .height = 16,
                                      .firstMipmapLevel = 0,
                                      .lastMipmapLevel = 2 };
        CUtexObject tmo;
        CK(cuTexObjectCreate(&tmo, &rm, &tm, &v));
        CUDA_RESOURCE_VIEW_DESC vg;
        CK(cuTexObjectGetResourceViewDesc(&vg, tmo));
        EXPECT(vg.format == CU_RES_VIEW_FORMAT_FLOAT_1X32 && vg.lastMipmapLevel == 2 && vg.width == 16);
        /* a surface */
        CUsurfObject so;
        CK(cuSurfObjectCreate(&so, &r));
        CK(cuSurfObjectGetResourceDesc(&rg, so));
        EXPECT(rg.resType == CU_RESOURCE_TYPE_ARRAY && rg.res.array.hArray == a);
        CK(cuSurfObjectDestroy(so));
        CK(cuTexObjectDestroy(tmo));
        CK(cuTexObjectDestroy(tl));
        CK(cuTexObjectDestroy(tp));
        CK(cuTexObjectDestroy(to));
        /* a texture on a destroyed array, a surface on a mipmapped array */
        CK(cuArrayDestroy(a));
        if (ub_probes())
                EXPECT_ERR(cuTexObjectCreate(&to, &r, &t, NULL), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_ERR(cuSurfObjectCreate(&so, &rm), CUDA_ERROR_INVALID_VALUE);
        CK(cuMipmappedArrayDestroy(m));
        if (ub_probes())
                EXPECT_ERR(cuTexObjectCreate(&to, &rm, &tm, NULL), CUDA_ERROR_INVALID_HANDLE);
        CK(cuMemFree(dev));
}

static void test_bad_descriptors(void)
{
        CUarray a;
        CUDA_ARRAY3D_DESCRIPTOR ok = { .Width = 16, .Height = 16, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1 };
        CUDA_ARRAY3D_DESCRIPTOR d;
        EXPECT_ERR(cuArray3DCreate(NULL, &ok), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuArray3DCreate(&a, NULL), CUDA_ERROR_INVALID_VALUE);
        d = ok, d.Width = 0;
        EXPECT_ERR(cuArray3DCreate(&a, &d), CUDA_ERROR_INVALID_VALUE);
        d = ok, d.Width = 1ull << 40;
        EXPECT_ERR(cuArray3DCreate(&a, &d), CUDA_ERROR_INVALID_VALUE);
        d = ok, d.Width = 1 << 20, d.Height = 1 << 20;
        EXPECT_ERR(cuArray3DCreate(&a, &d), CUDA_ERROR_INVALID_VALUE);
        d = ok, d.Depth = 1 << 20;
        EXPECT_ERR(cuArray3DCreate(&a, &d), CUDA_ERROR_INVALID_VALUE);
        d = ok, d.Format = (CUarray_format)0x77;
        EXPECT_ERR(cuArray3DCreate(&a, &d), CUDA_ERROR_INVALID_VALUE);
        d = ok, d.NumChannels = 3;
        EXPECT_ERR(cuArray3DCreate(&a, &d), CUDA_ERROR_INVALID_VALUE);
        d = ok, d.NumChannels = 0;
        EXPECT_ERR(cuArray3DCreate(&a, &d), CUDA_ERROR_INVALID_VALUE);
        d = ok, d.Flags = 0x10000;
        EXPECT_ERR(cuArray3DCreate(&a, &d), CUDA_ERROR_INVALID_VALUE);
        d = ok, d.Flags = CUDA_ARRAY3D_CUBEMAP, d.Depth = 6, d.Height = 8;
        EXPECT_ERR(cuArray3DCreate(&a, &d), CUDA_ERROR_INVALID_VALUE);
        d = ok, d.Flags = CUDA_ARRAY3D_CUBEMAP, d.Depth = 5;
        EXPECT_ERR(cuArray3DCreate(&a, &d), CUDA_ERROR_INVALID_VALUE);
        CUmipmappedArray m;
        CK(cuMipmappedArrayCreate(&m, &ok, 0)); /* the H200's driver takes 0 levels */
        CK(cuMipmappedArrayDestroy(m));
        CUDA_ARRAY3D_DESCRIPTOR got;
        if (ub_probes()) {
                EXPECT_ERR(cuArrayDestroy((CUarray)(uintptr_t)0x1234560), CUDA_ERROR_INVALID_HANDLE);
                EXPECT_ERR(cuArray3DGetDescriptor(&got, (CUarray)(uintptr_t)0x1234560), CUDA_ERROR_INVALID_HANDLE);
        }
}

/* ---- hold mode */

#define H_ARRAYS 5

struct held {
        CUarray arr[H_ARRAYS];
        size_t row[H_ARRAYS], rows[H_ARRAYS], slices[H_ARRAYS];
        CUmipmappedArray mip;
        CUarray lv1;
        CUtexObject tex[3];
        CUsurfObject surf;
        CUdeviceptr lin;
        CUarray gone;       /* destroyed while ... */
        CUtexObject orphan; /* ... this object on it lives */
};

static void held_check_array(CUarray a, size_t row, size_t rows, size_t slices, uint32_t seed)
{
        size_t n = row * rows * slices;
        uint8_t *want = malloc(n), *got = calloc(1, n);
        fill_bytes(want, n, seed);
        CUDA_MEMCPY3D b = { .srcMemoryType = CU_MEMORYTYPE_ARRAY,
                            .srcArray = a,
                            .dstMemoryType = CU_MEMORYTYPE_HOST,
                            .dstHost = got,
                            .dstPitch = row,
                            .dstHeight = rows,
                            .WidthInBytes = row,
                            .Height = rows,
                            .Depth = slices };
        CK(cuMemcpy3D(&b));
        if (memcmp(want, got, n) != 0) {
                fprintf(stderr, "array of seed %u lost its contents\n", seed);
                exit(1);
        }
        free(want);
        free(got);
}

/* An array and an object in a context the program destroys: they go
 * with it, and a checkpoint after must not need them. */
static void ctx_gone(CUcontext primary)
{
        CUdevice dev;
        CUcontext c;
        CK(cuCtxGetDevice(&dev));
        CK(cuCtxCreate_v2(&c, 0, dev));
        CK(cuCtxSetCurrent(c));
        CUarray a = make3d(8, 8, 0, CU_AD_FORMAT_FLOAT, 1, 0);
        roundtrip3d(a, 32, 8, 1, 9);
        CUDA_RESOURCE_DESC r = { .resType = CU_RESOURCE_TYPE_ARRAY, .res.array.hArray = a };
        CUDA_TEXTURE_DESC t = tex_desc();
        CUtexObject o;
        CK(cuTexObjectCreate(&o, &r, &t, NULL));
        CK(cuCtxDestroy(c));
        CK(cuCtxSetCurrent(primary));
}

static void hold_build(struct held *h)
{
        struct {
                size_t w, hh, d;
                CUarray_format f;
                unsigned ch, flags, elem;
        } k[H_ARRAYS] = {
                { 1000, 0, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0, 1 },
                { 64, 32, 0, CU_AD_FORMAT_FLOAT, 4, CUDA_ARRAY3D_SURFACE_LDST, 16 },
                { 16, 8, 4, CU_AD_FORMAT_UNSIGNED_INT16, 2, 0, 4 },
                { 8, 8, 3, CU_AD_FORMAT_SIGNED_INT8, 4, CUDA_ARRAY3D_LAYERED, 4 },
                { 8, 8, 6, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_CUBEMAP, 4 },
        };
        for (int i = 0; i < H_ARRAYS; i++) {
                h->arr[i] = make3d(k[i].w, k[i].hh, k[i].d, k[i].f, k[i].ch, k[i].flags);
                h->row[i] = k[i].w * k[i].elem;
                h->rows[i] = k[i].hh ? k[i].hh : 1;
                h->slices[i] = k[i].d ? k[i].d : 1;
                roundtrip3d(h->arr[i], h->row[i], h->rows[i], h->slices[i], 100 + (uint32_t)i);
        }
        CUDA_ARRAY3D_DESCRIPTOR md = {
                .Width = 32, .Height = 32, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 4
        };
        CK(cuMipmappedArrayCreate(&h->mip, &md, 3));
        CK(cuMipmappedArrayGetLevel(&h->lv1, h->mip, 1));
        roundtrip3d(h->lv1, 16 * 4, 16, 1, 200);
        CUDA_RESOURCE_DESC r = { .resType = CU_RESOURCE_TYPE_ARRAY, .res.array.hArray = h->arr[1] };
        CUDA_TEXTURE_DESC t = tex_desc();
        CK(cuTexObjectCreate(&h->tex[0], &r, &t, NULL));
        /* a destroyed object between live ones: the restore must skip its value */
        CUtexObject gap;
        CK(cuTexObjectCreate(&gap, &r, &t, NULL));
        CUDA_RESOURCE_DESC rm = { .resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY, .res.mipmap.hMipmappedArray = h->mip };
        CK(cuTexObjectCreate(&h->tex[1], &rm, &t, NULL));
        CK(cuTexObjectDestroy(gap));
        CK(cuMemAlloc(&h->lin, 4096));
        CUDA_RESOURCE_DESC rl = {
                .resType = CU_RESOURCE_TYPE_LINEAR,
                .res.linear = { .devPtr = h->lin, .format = CU_AD_FORMAT_FLOAT, .numChannels = 1, .sizeInBytes = 4096 }
        };
        CUDA_TEXTURE_DESC pt = { .filterMode = CU_TR_FILTER_MODE_POINT };
        CK(cuTexObjectCreate(&h->tex[2], &rl, &pt, NULL));
        CK(cuSurfObjectCreate(&h->surf, &r));
        /* an object that outlives its array: still a value the restore must keep */
        h->gone = make3d(16, 16, 0, CU_AD_FORMAT_FLOAT, 1, 0);
        CUDA_RESOURCE_DESC rg = { .resType = CU_RESOURCE_TYPE_ARRAY, .res.array.hArray = h->gone };
        CK(cuTexObjectCreate(&h->orphan, &rg, &t, NULL));
        CK(cuArrayDestroy(h->gone));
        if (ub_probes())
                EXPECT_ERR(cuArrayDestroy(h->gone), CUDA_ERROR_CONTEXT_IS_DESTROYED);
}

static void hold_check(struct held *h)
{
        for (int i = 0; i < H_ARRAYS; i++)
                held_check_array(h->arr[i], h->row[i], h->rows[i], h->slices[i], 100 + (uint32_t)i);
        held_check_array(h->lv1, 16 * 4, 16, 1, 200);
        CUarray lv;
        CK(cuMipmappedArrayGetLevel(&lv, h->mip, 1));
        EXPECT(lv == h->lv1);
        CUDA_RESOURCE_DESC rg;
        CK(cuTexObjectGetResourceDesc(&rg, h->tex[1]));
        EXPECT(rg.resType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY && rg.res.mipmap.hMipmappedArray == h->mip);
        /* new work on the restored arrays */
        roundtrip3d(h->arr[2], h->row[2], h->rows[2], h->slices[2], 300);
        CUDA_RESOURCE_DESC r = { .resType = CU_RESOURCE_TYPE_ARRAY, .res.array.hArray = h->arr[2] };
        CUDA_TEXTURE_DESC t = tex_desc();
        CUtexObject fresh;
        CK(cuTexObjectCreate(&fresh, &r, &t, NULL));
        for (int i = 0; i < 3; i++)
                EXPECT(fresh != h->tex[i]);
        CK(cuTexObjectDestroy(fresh));
        /* the old values are the driver's objects again: destroying each works */
        for (int i = 0; i < 3; i++)
                CK(cuTexObjectDestroy(h->tex[i]));
        CK(cuSurfObjectDestroy(h->surf));
        if (ub_probes())
                EXPECT_ERR(cuArrayDestroy(h->gone), CUDA_ERROR_CONTEXT_IS_DESTROYED);
        CUDA_RESOURCE_DESC rgone = { .resType = CU_RESOURCE_TYPE_ARRAY, .res.array.hArray = h->gone };
        if (ub_probes())
                EXPECT_ERR(cuTexObjectCreate(&fresh, &rgone, &t, NULL), CUDA_ERROR_INVALID_HANDLE);
        CK(cuTexObjectDestroy(h->orphan));
        for (int i = 0; i < H_ARRAYS; i++)
                CK(cuArrayDestroy(h->arr[i]));
        CK(cuMipmappedArrayDestroy(h->mip));
        CK(cuMemFree(h->lin));
}

int main(int argc, char **argv)
{
        CUdevice dev;
        CUcontext ctx;
        CK(cuInit(0));
        CK(cuDeviceGet(&dev, 0));
        CK(cuDevicePrimaryCtxRetain(&ctx, dev));
        CK(cuCtxSetCurrent(ctx));
        if (argc > 2 && strcmp(argv[2], "hold") == 0) {
                struct held h;
                char line[64];
                ctx_gone(ctx);
                hold_build(&h);
                printf("ready: arrays, textures %llx %llx %llx, surface %llx\n", (unsigned long long)h.tex[0],
                       (unsigned long long)h.tex[1], (unsigned long long)h.tex[2], (unsigned long long)h.surf);
                fflush(stdout);
                if (!fgets(line, sizeof(line), stdin))
                        return 1;
                hold_check(&h);
                printf("e2e_arrays hold: %s\n", e2e_failures ? "FAILED" : "OK");
                return e2e_failures ? 1 : 0;
        }
        test_1d();
        test_2d();
        test_3d_layered_cube();
        test_mipmap();
        test_objects();
        test_bad_descriptors();
        CK(cuDevicePrimaryCtxRelease(dev));
        printf("e2e_arrays: %s\n", e2e_failures ? "FAILED" : "OK");
        return e2e_failures ? 1 : 0;
}
