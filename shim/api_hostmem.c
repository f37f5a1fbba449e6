/* SPDX-License-Identifier: MIT */
/*
 * Host memory and copies whose direction or shape the shim works out.
 *
 * "Pinned" memory lives in the client process: the GPU is elsewhere, so
 * page-locking it would buy nothing. It is still tracked, so pointer queries
 * and cuMemFreeHost behave as CUDA documents. Used as device memory (UVA:
 * every pinned range is mapped), a range gets a mirror on the GPU host
 * that api_mapped.c keeps in step with it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arrays.h"
#include "client.h"
#include "log.h"
#include "rangemap.h"
#include "shim_gen.h"

#define EXPORT __attribute__((visibility("default")))

/* payload a = cuMemHostAlloc flags, b = LUPC_HOST_ALLOCATED, _REGISTERED or _MANAGED */
static pthread_mutex_t hlock = PTHREAD_MUTEX_INITIALIZER;
static struct lup_rangemap host_ranges;
atomic_uint lupc_host_n;                     /* ranges: launches look for them in parameters only when there are any */
_Atomic uint64_t lupc_host_lo, lupc_host_hi; /* every range lies in [lo, hi) */

/* hlock held */
static void note_bounds(void)
{
        uint64_t lo = UINT64_MAX, hi = 0;
        for (size_t i = 0; i < host_ranges.n; i++) {
                const struct lup_range *r = &host_ranges.r[i];
                lo = r->base < lo ? r->base : lo;
                hi = r->base + r->size > hi ? r->base + r->size : hi;
        }
        atomic_store(&lupc_host_lo, lo);
        atomic_store(&lupc_host_hi, hi);
        atomic_store(&lupc_host_n, (unsigned)host_ranges.n);
}

static int host_add(uint64_t base, uint64_t size, unsigned int flags, int kind)
{
        struct lup_range r = { .base = base, .size = size, .a = flags, .b = (uint64_t)kind };
        pthread_mutex_lock(&hlock);
        int rc = lup_rangemap_add(&host_ranges, &r);
        note_bounds();
        pthread_mutex_unlock(&hlock);
        return rc;
}

static int host_remove(uint64_t base, int kind)
{
        struct lup_range r;
        int rc = -ENOENT;
        pthread_mutex_lock(&hlock);
        if (lup_rangemap_find(&host_ranges, base, &r) && r.base == base && r.b == (uint64_t)kind)
                rc = lup_rangemap_remove(&host_ranges, base, NULL);
        note_bounds();
        pthread_mutex_unlock(&hlock);
        return rc;
}

int lupc_host_track(uint64_t base, uint64_t size, unsigned int flags, int kind)
{
        return host_add(base, size, flags, kind);
}

int lupc_host_untrack(uint64_t base, int kind)
{
        return host_remove(base, kind);
}

/* the range holding p, whatever its kind */
static bool host_range(uint64_t p, struct lup_range *ret)
{
        pthread_mutex_lock(&hlock);
        bool found = lup_rangemap_find(&host_ranges, p, ret);
        pthread_mutex_unlock(&hlock);
        return found;
}

bool lupc_host_find(uint64_t p, uint64_t *ret_base, uint64_t *ret_size, unsigned int *ret_flags)
{
        struct lup_range r;
        pthread_mutex_lock(&hlock);
        bool found = lup_rangemap_find(&host_ranges, p, &r);
        pthread_mutex_unlock(&hlock);
        if (found) {
                *ret_base = r.base;
                *ret_size = r.size;
                *ret_flags = (unsigned int)r.a;
        }
        return found;
}

EXPORT CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
        if (!pp || bytesize == 0 ||
            (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED)))
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        void *p = NULL;
        if (posix_memalign(&p, 4096, bytesize) != 0)
                return CUDA_ERROR_OUT_OF_MEMORY;
        if (host_add((uint64_t)(uintptr_t)p, bytesize, Flags, LUPC_HOST_ALLOCATED) < 0) {
                free(p);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        *pp = p;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t bytesize)
{
        return cuMemHostAlloc(pp, bytesize, 0);
}

EXPORT CUresult CUDAAPI cuMemFreeHost(void *p)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        struct lup_range r;
        if (!host_range((uint64_t)(uintptr_t)p, &r) || r.base != (uint64_t)(uintptr_t)p || r.b != LUPC_HOST_ALLOCATED)
                return CUDA_ERROR_INVALID_VALUE;
        lupc_mapped_forget(r.base);
        if (host_remove(r.base, LUPC_HOST_ALLOCATED) < 0)
                return CUDA_ERROR_INVALID_VALUE;
        free(p);
        return CUDA_SUCCESS;
}

#define REGISTER_FLAGS                                                                              \
        (CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_IOMEMORY | \
         CU_MEMHOSTREGISTER_READ_ONLY)

/* Whether [p, p + n) lies in writable mappings of this process (the GPU
 * writes mapped memory, and its writes are copied into it). */
static bool host_memory_writable(uintptr_t p, size_t n)
{
        FILE *f = fopen("/proc/self/maps", "re");
        char line[512];
        uintptr_t at = p;
        if (!f)
                return true; /* cannot tell: as before */
        while (at < p + n && fgets(line, sizeof(line), f)) {
                unsigned long lo, hi;
                char perms[8];
                if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || hi <= at)
                        continue;
                if (lo > at || perms[1] != 'w')
                        break;
                at = hi;
        }
        fclose(f);
        return at >= p + n;
}

/* Whether every page of [p, p + n) is mapped in this process (mincore
 * fails with ENOMEM on a hole), and writable unless read_only. */
static bool host_memory_mapped(const void *p, size_t n, bool read_only)
{
        uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), start = (uintptr_t)p & ~(pg - 1);
        unsigned char vec[64];
        for (uintptr_t at = start; at < (uintptr_t)p + n; at += 64 * pg) {
                size_t len = (uintptr_t)p + n - at < 64 * pg ? (uintptr_t)p + n - at : 64 * pg;
                if (mincore((void *)at, len, vec) < 0)
                        return false;
        }
        return read_only || host_memory_writable((uintptr_t)p, n);
}

EXPORT CUresult CUDAAPI cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
        if (!p || bytesize == 0 || bytesize > UINT64_MAX - (uintptr_t)p || (Flags & ~(unsigned)REGISTER_FLAGS))
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (Flags & CU_MEMHOSTREGISTER_IOMEMORY)
                return CUDA_ERROR_NOT_SUPPORTED; /* no PCI BAR of this machine can reach the GPU */
        if (!host_memory_mapped(p, bytesize, (Flags & CU_MEMHOSTREGISTER_READ_ONLY) != 0))
                return CUDA_ERROR_INVALID_VALUE;
        struct lup_range m;
        pthread_mutex_lock(&hlock);
        bool managed = lup_rangemap_find(&host_ranges, (uint64_t)(uintptr_t)p, &m) && m.b == LUPC_HOST_MANAGED;
        pthread_mutex_unlock(&hlock);
        if (managed)
                return CUDA_ERROR_INVALID_VALUE; /* as the H200's driver */
        int rc = host_add((uint64_t)(uintptr_t)p, bytesize, Flags, LUPC_HOST_REGISTERED);
        if (rc == -EEXIST)
                return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        return rc < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemHostUnregister(void *p)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        uint64_t base, size;
        unsigned int flags;
        struct lup_range r;
        pthread_mutex_lock(&hlock);
        bool found = lup_rangemap_find(&host_ranges, (uint64_t)(uintptr_t)p, &r);
        pthread_mutex_unlock(&hlock);
        /* the driver: memory it does not know is "not registered", an
         * interior pointer or cuMemHostAlloc memory an invalid value */
        if (!found)
                return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
        if (r.b == LUPC_HOST_MANAGED)
                return CUDA_ERROR_INVALID_VALUE; /* as the H200's driver */
        if (r.b || r.base != (uint64_t)(uintptr_t)p || !lupc_host_find(r.base, &base, &size, &flags))
                return CUDA_ERROR_INVALID_VALUE;
        lupc_mapped_forget(base);
        return host_remove(base, LUPC_HOST_REGISTERED) < 0 ? CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED : CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
        if (!pFlags)
                return CUDA_ERROR_INVALID_VALUE;
        struct lup_range r;
        pthread_mutex_lock(&hlock);
        bool found = lup_rangemap_find(&host_ranges, (uint64_t)(uintptr_t)p, &r);
        pthread_mutex_unlock(&hlock);
        /* cuMemHostAlloc and registered memory (driver 580 answers for
         * both); under UVA it is always mapped. Managed memory: the H200's
         * driver answers success (with flags lupine does not know: 0). */
        if (!found)
                return CUDA_ERROR_INVALID_VALUE;
        *pFlags = r.b == LUPC_HOST_MANAGED ? 0 : (unsigned int)r.a | CU_MEMHOSTALLOC_DEVICEMAP;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
        if (!pdptr || !p || Flags != 0)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!lupc_ctx_current())
                return CUDA_ERROR_INVALID_CONTEXT;
        /* managed memory is not pinned host memory (api_managed.c) */
        if (lupc_managed_find((uint64_t)(uintptr_t)p, NULL))
                return CUDA_ERROR_INVALID_VALUE;
        /* the device address is the host address (api_mapped.c) */
        CUresult r = lupc_mapped_use((uint64_t)(uintptr_t)p, 1);
        if (r == CUDA_SUCCESS)
                *pdptr = (CUdeviceptr)(uintptr_t)p;
        return r;
}

EXPORT CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                           unsigned int ElementSizeBytes)
{
        if (!dptr || !pPitch || !WidthInBytes || !Height ||
            (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
                return CUDA_ERROR_INVALID_VALUE;
        const size_t align = 512; /* CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT on current GPUs */
        size_t pitch = (WidthInBytes + align - 1) / align * align, bytes;
        if (__builtin_mul_overflow(pitch, Height, &bytes))
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = cuMemAlloc_v2(dptr, bytes);
        if (r == CUDA_SUCCESS)
                *pPitch = pitch;
        return r;
}

/* ---- copies whose direction comes from the pointers */

static bool is_device(uint64_t p)
{
        struct lupc_alloc_info a;
        /* managed memory: copies run on the GPU host's mirror, in stream order */
        return lupc_shadow_find(p, &a) || lupc_managed_find(p, NULL);
}

/* One contiguous copy in the direction the pointers say. sync: return only
 * when the data is in place (device->host) or handed over (host->device). */
static CUresult copy_1d(uint64_t dst, uint64_t src, size_t n, CUstream s, bool sync)
{
        if (n == 0)
                return CUDA_SUCCESS;
        bool dd = is_device(dst), sd = is_device(src);
        if (dd && sd)
                return sync ? cuMemcpyDtoD_v2(dst, src, n) : cuMemcpyDtoDAsync_v2(dst, src, n, s);
        if (dd)
                return sync ? cuMemcpyHtoD_v2(dst, (const void *)(uintptr_t)src, n)
                            : cuMemcpyHtoDAsync_v2(dst, (const void *)(uintptr_t)src, n, s);
        if (sd)
                return sync ? cuMemcpyDtoH_v2((void *)(uintptr_t)dst, src, n)
                            : cuMemcpyDtoHAsync_v2((void *)(uintptr_t)dst, src, n, s);
        if (!dst || !src)
                return CUDA_ERROR_INVALID_VALUE;
        memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
        return CUDA_SUCCESS;
}

/* cuMemcpy and its _ptds variant (generated). A synchronous copy_1d does
 * not use the stream it is given. */
CUresult lupc_memcpy_sync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, int per_thread)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        return copy_1d(dst, src, ByteCount, per_thread ? CU_STREAM_PER_THREAD : NULL, true);
}

EXPORT CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
        return lupc_memcpy_sync(dst, src, ByteCount, 0);
}

EXPORT CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        return copy_1d(dst, src, ByteCount, hStream, false);
}

/* ---- 2D and 3D copies: one 1D copy per row, or one for the whole block
 * when both sides are contiguous. Device->host rows go asynchronously and a
 * synchronous copy waits for them all at the end. */

struct side {
        uint64_t base;          /* host or device address of (0, 0, 0) */
        size_t pitch, height;   /* bytes per row, rows per slice */
        size_t x, y, z;
};

static CUresult side_base(CUmemorytype type, const void *host, CUdeviceptr dev, CUarray array, uint64_t *ret)
{
        switch (type) {
        case CU_MEMORYTYPE_HOST:
                *ret = (uint64_t)(uintptr_t)host;
                return CUDA_SUCCESS;
        case CU_MEMORYTYPE_DEVICE:
        case CU_MEMORYTYPE_UNIFIED:
                *ret = dev;
                return CUDA_SUCCESS;
        case CU_MEMORYTYPE_ARRAY:
                (void)array;
                return CUDA_ERROR_INVALID_VALUE; /* not reached: array copies go to api_arrays_copy.c */
        default:
                return CUDA_ERROR_INVALID_VALUE;
        }
}

/* Where one side's (0, 0, 0) is; a pitch of 0 means rows of width bytes. */
static CUresult side_init(struct side *sd, CUmemorytype type, const void *host, CUdeviceptr dev, CUarray array,
                          size_t width)
{
        CUresult r = side_base(type, host, dev, array, &sd->base);
        if (r == CUDA_SUCCESS && !sd->pitch)
                sd->pitch = width;
        return r;
}

static CUresult copy_3d(const struct side *s, const struct side *d, size_t width, size_t height, size_t depth,
                        CUstream st, bool sync)
{
        CUresult r = CUDA_SUCCESS;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!width || !height || !depth)
                return CUDA_SUCCESS;
        if ((height > 1 && (s->pitch < width || d->pitch < width)) ||
            (depth > 1 && (s->height < height || d->height < height)))
                return CUDA_ERROR_INVALID_VALUE;
        bool dev_to_host = is_device(s->base + s->x) && !is_device(d->base + d->x);
        bool rows_async = dev_to_host || !sync;
        for (size_t z = 0; z < depth && r == CUDA_SUCCESS; z++) {
                uint64_t so = s->base + ((s->z + z) * s->height + s->y) * s->pitch + s->x;
                uint64_t dof = d->base + ((d->z + z) * d->height + d->y) * d->pitch + d->x;
                if (s->pitch == width && d->pitch == width) {
                        r = copy_1d(dof, so, width * height, st, !rows_async);
                        continue;
                }
                for (size_t y = 0; y < height && r == CUDA_SUCCESS; y++)
                        r = copy_1d(dof + y * d->pitch, so + y * s->pitch, width, st, !rows_async);
        }
        if (r == CUDA_SUCCESS && sync && rows_async)
                r = cuStreamSynchronize(st);
        return r;
}

static CUresult copy_2d(const CUDA_MEMCPY2D *p, CUstream st, bool sync)
{
        struct side s = { .pitch = p->srcPitch, .height = p->Height, .x = p->srcXInBytes, .y = p->srcY };
        struct side d = { .pitch = p->dstPitch, .height = p->Height, .x = p->dstXInBytes, .y = p->dstY };
        CUresult r;
        if (p->srcMemoryType == CU_MEMORYTYPE_ARRAY || p->dstMemoryType == CU_MEMORYTYPE_ARRAY) {
                CUDA_MEMCPY3D c = {
                        .srcXInBytes = p->srcXInBytes,
                        .srcY = p->srcY,
                        .srcMemoryType = p->srcMemoryType,
                        .srcHost = p->srcHost,
                        .srcDevice = p->srcDevice,
                        .srcArray = p->srcArray,
                        .srcPitch = p->srcPitch,
                        .srcHeight = p->Height,
                        .dstXInBytes = p->dstXInBytes,
                        .dstY = p->dstY,
                        .dstMemoryType = p->dstMemoryType,
                        .dstHost = p->dstHost,
                        .dstDevice = p->dstDevice,
                        .dstArray = p->dstArray,
                        .dstPitch = p->dstPitch,
                        .dstHeight = p->Height,
                        .WidthInBytes = p->WidthInBytes,
                        .Height = p->Height,
                        .Depth = 1,
                };
                return lupc_initialized() ? lupc_array_memcpy3d(&c, st, sync) : CUDA_ERROR_NOT_INITIALIZED;
        }
        if ((r = side_init(&s, p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, p->WidthInBytes)) ||
            (r = side_init(&d, p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray, p->WidthInBytes)))
                return r;
        return copy_3d(&s, &d, p->WidthInBytes, p->Height, 1, st, sync);
}

static CUresult copy_3d_desc(const CUDA_MEMCPY3D *p, CUstream st, bool sync)
{
        struct side s = { .pitch = p->srcPitch, .height = p->srcHeight, .x = p->srcXInBytes, .y = p->srcY, .z = p->srcZ };
        struct side d = { .pitch = p->dstPitch, .height = p->dstHeight, .x = p->dstXInBytes, .y = p->dstY, .z = p->dstZ };
        CUresult r;
        /* p is never NULL here: the entry points check it */
        if (p->srcMemoryType == CU_MEMORYTYPE_ARRAY || p->dstMemoryType == CU_MEMORYTYPE_ARRAY)
                return lupc_initialized() ? lupc_array_memcpy3d(p, st, sync) : CUDA_ERROR_NOT_INITIALIZED;
        if (p->srcLOD || p->dstLOD)
                return CUDA_ERROR_INVALID_VALUE;
        if ((r = side_init(&s, p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, p->WidthInBytes)) ||
            (r = side_init(&d, p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray, p->WidthInBytes)))
                return r;
        if (!s.height)
                s.height = p->Height;
        if (!d.height)
                d.height = p->Height;
        return copy_3d(&s, &d, p->WidthInBytes, p->Height, p->Depth, st, sync);
}

/* The synchronous 2D and 3D copies and their _ptds variants (generated). */
CUresult lupc_memcpy2d_sync(const CUDA_MEMCPY2D *pCopy, int per_thread)
{
        return pCopy ? copy_2d(pCopy, per_thread ? CU_STREAM_PER_THREAD : NULL, true) : CUDA_ERROR_INVALID_VALUE;
}

CUresult lupc_memcpy3d_sync(const CUDA_MEMCPY3D *pCopy, int per_thread)
{
        return pCopy ? copy_3d_desc(pCopy, per_thread ? CU_STREAM_PER_THREAD : NULL, true) : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult CUDAAPI cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy)
{
        return lupc_memcpy2d_sync(pCopy, 0);
}

EXPORT CUresult CUDAAPI cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy)
{
        return lupc_memcpy2d_sync(pCopy, 0);
}

EXPORT CUresult CUDAAPI cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
        return pCopy ? copy_2d(pCopy, hStream, false) : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult CUDAAPI cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy)
{
        return lupc_memcpy3d_sync(pCopy, 0);
}

EXPORT CUresult CUDAAPI cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
        return pCopy ? copy_3d_desc(pCopy, hStream, false) : CUDA_ERROR_INVALID_VALUE;
}
