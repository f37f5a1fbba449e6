/* SPDX-License-Identifier: MIT */
/*
 * Copies with an array end: cuMemcpy2D/3D (and their Async and Peer forms)
 * naming CU_MEMORYTYPE_ARRAY, and cuMemcpyAtoH/HtoA/AtoD/DtoA/AtoA.
 *
 * The array's box is checked here against the descriptor the shim keeps
 * (CUDA_ERROR_INVALID_VALUE past its bounds, as the driver). Array and
 * device ends go to the worker as one lupArrayCopy, which runs the real
 * cuMemcpy3D (a device address is the same on both sides). A host end is
 * staged through a scratch allocation (cuMemAlloc): host rows go to it with
 * the ordinary host->device path and then to the array, or from the array
 * to it and back with the device->host path, all in stream order, and the
 * scratch is freed after (the worker's cuMemFree finishes the work before
 * it frees). So no new bulk path exists for arrays, and an asynchronous
 * copy stays asynchronous for the caller (its device->host bytes arrive by
 * the next synchronisation point, as every async copy's). Not the
 * stream-ordered allocator: its state belongs to the context that first
 * used it, which the program may destroy, and a capture would record it.
 */
#include <string.h>

#include "arrays.h"
#include "client.h"
#include "shim_gen.h"

#define EXPORT __attribute__((visibility("default")))

/* one end as the caller described it */
struct xend {
        CUmemorytype type; /* HOST, DEVICE or ARRAY (UNIFIED resolved) */
        struct lup_copy_end e;
        const void *host;
};

static CUresult end_of(CUmemorytype type, const void *host, CUdeviceptr dev, CUarray array, size_t x, size_t y,
                       size_t z, size_t pitch, size_t height, struct xend *ret)
{
        *ret = (struct xend){ .type = type, .e = { .x = x, .y = y, .z = z, .pitch = pitch, .height = height } };
        switch (type) {
        case CU_MEMORYTYPE_ARRAY:
                ret->e.kind = LUP_END_ARRAY;
                ret->e.handle = (uint64_t)(uintptr_t)array;
                return CUDA_SUCCESS;
        case CU_MEMORYTYPE_UNIFIED:
                if (!lupc_in_arena(dev)) { /* device memory is arena memory, whoever made it */
                        ret->type = CU_MEMORYTYPE_HOST;
                        ret->host = (const void *)(uintptr_t)dev;
                        return CUDA_SUCCESS;
                }
                ret->type = CU_MEMORYTYPE_DEVICE;
                /* fall through */
        case CU_MEMORYTYPE_DEVICE:
                ret->e.kind = LUP_END_DEVICE;
                ret->e.handle = dev;
                return CUDA_SUCCESS;
        case CU_MEMORYTYPE_HOST:
                ret->host = host;
                return CUDA_SUCCESS;
        default:
                return CUDA_ERROR_INVALID_VALUE;
        }
}

/* An array end's box inside the array, and its pitch and height set to
 * the array's rows (what a staging copy needs). */
static CUresult array_end_check(struct xend *x, size_t w, size_t h, size_t d)
{
        struct lup_array_shape s;
        if (!lupc_array_find(x->e.handle, LUPC_ARRAY, NULL, &s))
                return CUDA_ERROR_INVALID_HANDLE;
        if (!lup_array_box_fits(&s, &x->e, w, h, d))
                return CUDA_ERROR_INVALID_VALUE;
        return CUDA_SUCCESS;
}

static CUresult send_copy(const struct lup_copy_end *src, const struct lup_copy_end *dst, size_t w, size_t h, size_t d,
                          CUstream st)
{
        struct lup_array_copy c = { .src = *src, .dst = *dst, .width = w, .height = h, .depth = d };
        uint8_t box[LUP_ARRAY_COPY_WIRE];
        lup_array_copy_encode(&c, box);
        return lupc_send_lupArrayCopy(box, st);
}

/* host <-> scratch with the ordinary 3D path: rows of w bytes, h rows */
static CUresult host_leg(const struct xend *hostend, CUdeviceptr scratch, bool to_scratch, size_t w, size_t h, size_t d,
                         CUstream st)
{
        CUDA_MEMCPY3D c = { .WidthInBytes = w, .Height = h, .Depth = d };
        size_t pitch = hostend->e.pitch ? hostend->e.pitch : w;
        size_t height = hostend->e.height ? hostend->e.height : h;
        if (to_scratch) {
                c.srcMemoryType = CU_MEMORYTYPE_HOST;
                c.srcHost = hostend->host;
                c.srcXInBytes = hostend->e.x, c.srcY = hostend->e.y, c.srcZ = hostend->e.z;
                c.srcPitch = pitch, c.srcHeight = height;
                c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
                c.dstDevice = scratch, c.dstPitch = w, c.dstHeight = h;
        } else {
                c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
                c.srcDevice = scratch, c.srcPitch = w, c.srcHeight = h;
                c.dstMemoryType = CU_MEMORYTYPE_HOST;
                c.dstHost = (void *)(uintptr_t)hostend->host;
                c.dstXInBytes = hostend->e.x, c.dstY = hostend->e.y, c.dstZ = hostend->e.z;
                c.dstPitch = pitch, c.dstHeight = height;
        }
        return cuMemcpy3DAsync_v2(&c, st);
}

static CUresult staged(const struct xend *s, const struct xend *d, size_t w, size_t h, size_t dp, CUstream st)
{
        CUdeviceptr scratch;
        CUresult r = cuMemAlloc_v2(&scratch, w * h * dp);
        if (r != CUDA_SUCCESS)
                return r;
        struct lup_copy_end mid = { .kind = LUP_END_DEVICE, .handle = scratch, .pitch = w, .height = h };
        if (s->type == CU_MEMORYTYPE_HOST) {
                r = host_leg(s, scratch, true, w, h, dp, st);
                if (r == CUDA_SUCCESS)
                        r = send_copy(&mid, &d->e, w, h, dp, st);
        } else {
                r = send_copy(&s->e, &mid, w, h, dp, st);
                if (r == CUDA_SUCCESS)
                        r = host_leg(d, scratch, false, w, h, dp, st);
        }
        CUresult f = cuMemFree_v2(scratch);
        return r != CUDA_SUCCESS ? r : f;
}

static CUresult copy_ends(struct xend *s, struct xend *d, size_t w, size_t h, size_t dp, CUstream st, bool sync)
{
        CUresult r = CUDA_SUCCESS;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (s->type == CU_MEMORYTYPE_ARRAY && (r = array_end_check(s, w, h, dp)) != CUDA_SUCCESS)
                return r;
        if (d->type == CU_MEMORYTYPE_ARRAY && (r = array_end_check(d, w, h, dp)) != CUDA_SUCCESS)
                return r;
        if (!w || !h || !dp)
                return CUDA_SUCCESS;
        if (s->type == CU_MEMORYTYPE_HOST && d->type == CU_MEMORYTYPE_HOST)
                return CUDA_ERROR_INVALID_VALUE; /* not reached: one end is an array */
        if (s->type == CU_MEMORYTYPE_HOST || d->type == CU_MEMORYTYPE_HOST)
                r = staged(s, d, w, h, dp, st);
        else
                r = send_copy(&s->e, &d->e, w, h, dp, st);
        if (r == CUDA_SUCCESS && sync)
                r = cuStreamSynchronize(st);
        return r;
}

CUresult lupc_array_memcpy3d(const CUDA_MEMCPY3D *p, CUstream st, bool sync)
{
        struct xend s, d;
        CUresult r;
        if (p->srcLOD || p->dstLOD || p->reserved0 || p->reserved1)
                return CUDA_ERROR_INVALID_VALUE;
        if ((r = end_of(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, p->srcXInBytes, p->srcY, p->srcZ,
                        p->srcPitch, p->srcHeight, &s)) != CUDA_SUCCESS ||
            (r = end_of(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray, p->dstXInBytes, p->dstY, p->dstZ,
                        p->dstPitch, p->dstHeight, &d)) != CUDA_SUCCESS)
                return r;
        return copy_ends(&s, &d, p->WidthInBytes, p->Height, p->Depth, st, sync);
}

/* ---- the 1D forms: a byte range of an array's first row */

static CUresult linear(CUmemorytype dt, void *dh, CUdeviceptr dd, CUarray da, size_t doff, CUmemorytype sty,
                       const void *sh, CUdeviceptr sd, CUarray sa, size_t soff, size_t n, CUstream st, bool sync)
{
        CUDA_MEMCPY3D c = { .srcMemoryType = sty,
                            .srcHost = sh,
                            .srcDevice = sd,
                            .srcArray = sa,
                            .srcXInBytes = sty == CU_MEMORYTYPE_ARRAY ? soff : 0,
                            .dstMemoryType = dt,
                            .dstHost = dh,
                            .dstDevice = dd,
                            .dstArray = da,
                            .dstXInBytes = dt == CU_MEMORYTYPE_ARRAY ? doff : 0,
                            .WidthInBytes = n,
                            .Height = 1,
                            .Depth = 1 };
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        return lupc_array_memcpy3d(&c, st, sync);
}

static CUstream sync_stream(int per_thread)
{
        return per_thread ? CU_STREAM_PER_THREAD : NULL;
}

CUresult lupc_atoh(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount, int per_thread)
{
        return linear(CU_MEMORYTYPE_HOST, dstHost, 0, NULL, 0, CU_MEMORYTYPE_ARRAY, NULL, 0, srcArray, srcOffset,
                      ByteCount, sync_stream(per_thread), true);
}

CUresult lupc_htoa(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount, int per_thread)
{
        return linear(CU_MEMORYTYPE_ARRAY, NULL, 0, dstArray, dstOffset, CU_MEMORYTYPE_HOST, srcHost, 0, NULL, 0,
                      ByteCount, sync_stream(per_thread), true);
}

CUresult lupc_atod(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, size_t ByteCount, int per_thread)
{
        return linear(CU_MEMORYTYPE_DEVICE, NULL, dstDevice, NULL, 0, CU_MEMORYTYPE_ARRAY, NULL, 0, srcArray, srcOffset,
                      ByteCount, sync_stream(per_thread), true);
}

CUresult lupc_dtoa(CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount, int per_thread)
{
        return linear(CU_MEMORYTYPE_ARRAY, NULL, 0, dstArray, dstOffset, CU_MEMORYTYPE_DEVICE, NULL, srcDevice, NULL, 0,
                      ByteCount, sync_stream(per_thread), true);
}

CUresult lupc_atoa(CUarray dstArray, size_t dstOffset, CUarray srcArray, size_t srcOffset, size_t ByteCount,
                   int per_thread)
{
        return linear(CU_MEMORYTYPE_ARRAY, NULL, 0, dstArray, dstOffset, CU_MEMORYTYPE_ARRAY, NULL, 0, srcArray,
                      srcOffset, ByteCount, sync_stream(per_thread), true);
}

EXPORT CUresult CUDAAPI cuMemcpyAtoH_v2(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{
        return lupc_atoh(dstHost, srcArray, srcOffset, ByteCount, 0);
}

EXPORT CUresult CUDAAPI cuMemcpyHtoA_v2(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount)
{
        return lupc_htoa(dstArray, dstOffset, srcHost, ByteCount, 0);
}

EXPORT CUresult CUDAAPI cuMemcpyAtoD_v2(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{
        return lupc_atod(dstDevice, srcArray, srcOffset, ByteCount, 0);
}

EXPORT CUresult CUDAAPI cuMemcpyDtoA_v2(CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount)
{
        return lupc_dtoa(dstArray, dstOffset, srcDevice, ByteCount, 0);
}

EXPORT CUresult CUDAAPI cuMemcpyAtoA_v2(CUarray dstArray, size_t dstOffset, CUarray srcArray, size_t srcOffset,
                                        size_t ByteCount)
{
        return lupc_atoa(dstArray, dstOffset, srcArray, srcOffset, ByteCount, 0);
}

EXPORT CUresult CUDAAPI cuMemcpyAtoHAsync_v2(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount,
                                             CUstream hStream)
{
        return linear(CU_MEMORYTYPE_HOST, dstHost, 0, NULL, 0, CU_MEMORYTYPE_ARRAY, NULL, 0, srcArray, srcOffset,
                      ByteCount, hStream, false);
}

EXPORT CUresult CUDAAPI cuMemcpyHtoAAsync_v2(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount,
                                             CUstream hStream)
{
        return linear(CU_MEMORYTYPE_ARRAY, NULL, 0, dstArray, dstOffset, CU_MEMORYTYPE_HOST, srcHost, 0, NULL, 0,
                      ByteCount, hStream, false);
}

/* ---- peer copies: one device per session server, so a peer copy is a
 * copy in the caller's context (the contexts name the same device or
 * devices of one server, whose driver copies between them) */
static CUDA_MEMCPY3D from_peer(const CUDA_MEMCPY3D_PEER *p)
{
        return (CUDA_MEMCPY3D){
                .srcXInBytes = p->srcXInBytes,
                .srcY = p->srcY,
                .srcZ = p->srcZ,
                .srcLOD = p->srcLOD,
                .srcMemoryType = p->srcMemoryType,
                .srcHost = p->srcHost,
                .srcDevice = p->srcDevice,
                .srcArray = p->srcArray,
                .srcPitch = p->srcPitch,
                .srcHeight = p->srcHeight,
                .dstXInBytes = p->dstXInBytes,
                .dstY = p->dstY,
                .dstZ = p->dstZ,
                .dstLOD = p->dstLOD,
                .dstMemoryType = p->dstMemoryType,
                .dstHost = p->dstHost,
                .dstDevice = p->dstDevice,
                .dstArray = p->dstArray,
                .dstPitch = p->dstPitch,
                .dstHeight = p->dstHeight,
                .WidthInBytes = p->WidthInBytes,
                .Height = p->Height,
                .Depth = p->Depth,
        };
}

CUresult lupc_memcpy3d_peer_sync(const CUDA_MEMCPY3D_PEER *pCopy, int per_thread)
{
        if (!pCopy)
                return CUDA_ERROR_INVALID_VALUE;
        CUDA_MEMCPY3D c = from_peer(pCopy);
        return lupc_memcpy3d_sync(&c, per_thread);
}

EXPORT CUresult CUDAAPI cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *pCopy)
{
        return lupc_memcpy3d_peer_sync(pCopy, 0);
}

EXPORT CUresult CUDAAPI cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream)
{
        if (!pCopy)
                return CUDA_ERROR_INVALID_VALUE;
        CUDA_MEMCPY3D c = from_peer(pCopy);
        return cuMemcpy3DAsync_v2(&c, hStream);
}
