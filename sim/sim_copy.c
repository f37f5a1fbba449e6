/* SPDX-License-Identifier: MIT */
/*
 * Copies and sets. Each one checks every range against the live
 * allocations, mappings and registered host memory (the whole span inside
 * one of them, with the access it needs) and then runs as memmove/stores
 * while holding the registry lock shared, so nothing it touches can be
 * unmapped under it.
 *
 * Synchronous calls first wait for the legacy stream (and so for every
 * blocking stream) of the current context, then run on the calling
 * thread. Async calls are checked at once, so a bad range is an error
 * from the call. Those that touch pageable host memory then wait for
 * their stream and run before returning, as the driver documents for
 * pageable memory; the rest (device and pinned memory, sets) are queued
 * on their stream and checked again when they run (the memory may have
 * been freed meanwhile, which makes a sticky CUDA_ERROR_ILLEGAL_ADDRESS,
 * as a DMA fault would).
 */
#include <stdlib.h>
#include <string.h>

#include "sim_graph.h"

/* Adds the distance from the first of n steps of stride to the last
 * (nothing for n <= 1) to *span; false on overflow. */
static bool add_steps(size_t *span, size_t n, size_t stride)
{
        size_t t;

        if (n <= 1)
                return true;
        if (stride && n - 1 > SIZE_MAX / stride)
                return false;
        t = (n - 1) * stride;
        if (t > SIZE_MAX - *span)
                return false;
        *span += t;
        return true;
}

/* Bytes from the first to one past the last byte of one end of a box;
 * 0 on overflow (boxes are never empty here). */
static size_t end_span(const struct sim_box_end *e, const struct sim_copy *c)
{
        size_t s = c->width;

        if (!add_steps(&s, c->height, e->pitch) || !add_steps(&s, c->depth, e->slice))
                return 0;
        return s;
}

static CUresult check_end(struct sim_driver *drv, const struct sim_box_end *e, const struct sim_copy *c,
                          enum sim_access_need need)
{
        size_t span = end_span(e, c);
        enum sim_side side = e->side;

        if (span == 0)
                return CUDA_ERROR_INVALID_VALUE;
        if (side == SIM_SIDE_ANY)
                side = sim_range_find(drv, e->base) ? SIM_SIDE_DEVICE : SIM_SIDE_HOST;
        if (side == SIM_SIDE_DEVICE)
                return sim_check_device_range(drv, e->base, span, need);
        return sim_check_host_range(drv, (const void *)e->base, span, need);
}

static CUresult copy_check(struct sim_driver *drv, const struct sim_copy *c)
{
        CUresult r = check_end(drv, &c->dst, c, SIM_NEED_WRITE);

        return r != CUDA_SUCCESS ? r : check_end(drv, &c->src, c, SIM_NEED_READ);
}

CUresult sim_copy_check(struct sim_driver *drv, const struct sim_copy *c)
{
        return copy_check(drv, c);
}

static void desc_end(const struct sim_box_end *e, CUmemorytype *type, const void **host, CUdeviceptr *dev,
                     size_t *pitch, size_t *height)
{
        *type = e->side == SIM_SIDE_HOST     ? CU_MEMORYTYPE_HOST
                : e->side == SIM_SIDE_DEVICE ? CU_MEMORYTYPE_DEVICE
                                             : CU_MEMORYTYPE_UNIFIED;
        if (e->side == SIM_SIDE_HOST)
                *host = (const void *)e->base;
        else
                *dev = (CUdeviceptr)e->base;
        *pitch = e->pitch;
        *height = e->pitch ? e->slice / e->pitch : 0;
}

void sim_copy_to_desc(const struct sim_copy *c, CUDA_MEMCPY3D *d)
{
        *d = (CUDA_MEMCPY3D){ .WidthInBytes = c->width, .Height = c->height, .Depth = c->depth };
        desc_end(&c->src, &d->srcMemoryType, &d->srcHost, &d->srcDevice, &d->srcPitch, &d->srcHeight);
        desc_end(&c->dst, &d->dstMemoryType, (const void **)&d->dstHost, &d->dstDevice, &d->dstPitch, &d->dstHeight);
        if (c->height <= 1 && c->depth <= 1 && d->srcPitch == 0)
                d->srcPitch = c->width;
        if (c->height <= 1 && c->depth <= 1 && d->dstPitch == 0)
                d->dstPitch = c->width;
}

/* memmove: under UVA either side may overlap the other. Lock held. */
static void copy_run(const struct sim_copy *c)
{
        for (size_t z = 0; z < c->depth; z++)
                for (size_t y = 0; y < c->height; y++)
                        memmove((void *)(c->dst.base + z * c->dst.slice + y * c->dst.pitch),
                                (const void *)(c->src.base + z * c->src.slice + y * c->src.pitch),
                                c->width);
}

static CUresult copy_exec(struct sim_driver *drv, void *arg)
{
        const struct sim_copy *c = arg;

        if (c->width == 0 || c->height == 0 || c->depth == 0)
                return CUDA_SUCCESS;
        if (copy_check(drv, c) != CUDA_SUCCESS)
                return CUDA_ERROR_ILLEGAL_ADDRESS;
        copy_run(c);
        return CUDA_SUCCESS;
}

CUresult sim_copy_exec(struct sim_driver *drv, void *arg)
{
        return copy_exec(drv, arg);
}

/* The current context, after its legacy stream has drained (and, for a
 * blocking copy, what its kernels printed was written out: one of the
 * driver's printf flush points); on success the lock is held shared and
 * the caller must sim_unlock(). */
static CUresult sync_begin(struct sim_driver **ret_drv, CUcontext *ret_ctx, bool is_copy)
{
        struct sim_driver *drv = sim_driver_get();
        CUcontext h;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_rdlock(drv);
        r = sim_ctx_current(drv, NULL, &h);
        sim_unlock(drv);
        if (r == CUDA_SUCCESS)
                r = sim_capture_unsafe_call(); /* it syncs the legacy stream */
        if (r != CUDA_SUCCESS)
                return r;
        sim_ctx_wait_legacy(drv, h);
        if (is_copy)
                sim_printf_flush(drv, h);
        sim_rdlock(drv);
        r = sim_ctx_current(drv, NULL, ret_ctx);        /* the work may have faulted */
        if (r != CUDA_SUCCESS) {
                sim_unlock(drv);
                return r;
        }
        *ret_drv = drv;
        return CUDA_SUCCESS;
}

/* Checks the context and stream, then check(arg); queues exec(arg) on
 * success (arg is taken either way). Empty work only checks. */
static CUresult async_submit(CUstream stream, void *arg, bool empty,
                             CUresult (*check)(struct sim_driver *, const void *),
                             CUresult (*exec)(struct sim_driver *, void *), struct sim_nparams *np)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_queue *q = NULL;
        CUcontext ctx;
        CUresult r;

        if (!drv) {
                free(arg);
                return CUDA_ERROR_NOT_INITIALIZED;
        }
        sim_rdlock(drv);
        r = sim_ctx_current(drv, NULL, NULL);
        if (r == CUDA_SUCCESS)
                r = sim_stream_enter(drv, stream, &ctx, &q);
        if (r == CUDA_SUCCESS && !empty)
                r = check(drv, arg);
        if (r == CUDA_SUCCESS) {
                /* While the stream captures, the work becomes a node. */
                np->ctx = ctx;
                r = sim_capture_work(drv, q, np);
                if (r != SIM_CAPTURE_RUN)
                        empty = true;
                else
                        r = CUDA_SUCCESS;
        }
        sim_unlock(drv);
        if (r != CUDA_SUCCESS || empty) {
                sim_queue_put(drv, q);
                free(arg);
                return r;
        }
        return sim_queue_submit_exec(drv, q, exec, arg, true);
}

/* Whether one end is pageable host memory: host memory that is neither
 * cuMemAllocHost'ed nor registered. Lock held. */
static bool end_pageable(struct sim_driver *drv, const struct sim_box_end *e)
{
        struct sim_range *r;

        if (e->side == SIM_SIDE_DEVICE)
                return false;
        r = sim_range_find(drv, e->base);
        if (e->side == SIM_SIDE_ANY)
                return !r;
        return !r || (r->kind != SIM_RANGE_HOST_ALLOC && r->kind != SIM_RANGE_HOST_REGISTERED);
}

/* An async copy touching pageable host memory behaves as the driver
 * documents: it waits for the stream, then copies before returning (a
 * DtoH must be complete on return; an HtoD must have taken the bytes).
 * Only copies between device and pinned memory are queued. */
static CUresult async_copy(const struct sim_copy *c, CUstream stream, bool empty)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_queue *q = NULL;
        struct sim_nparams np = { .type = CU_GRAPH_NODE_TYPE_MEMCPY, .u.memcpy.box = *c };
        struct sim_copy *arg;
        bool pageable;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_rdlock(drv);
        r = sim_ctx_current(drv, NULL, NULL);
        if (r == CUDA_SUCCESS)
                r = sim_stream_enter(drv, stream, &np.ctx, &q);
        if (r == CUDA_SUCCESS && !empty)
                r = copy_check(drv, c);
        if (r == CUDA_SUCCESS) {
                /* While the stream captures, the copy becomes a node. */
                sim_copy_to_desc(c, &np.u.memcpy.desc);
                r = sim_capture_work(drv, q, &np);
                if (r != SIM_CAPTURE_RUN)
                        empty = true;
                else
                        r = CUDA_SUCCESS;
        }
        pageable = r == CUDA_SUCCESS && !empty && (end_pageable(drv, &c->dst) || end_pageable(drv, &c->src));
        sim_unlock(drv);
        if (r != CUDA_SUCCESS || empty) {
                sim_queue_put(drv, q);
                return r;
        }
        if (pageable) {
                sim_queue_wait_idle(drv, q);
                sim_queue_put(drv, q);
                sim_rdlock(drv);
                r = sim_ctx_current(drv, NULL, NULL);
                if (r == CUDA_SUCCESS)
                        r = copy_check(drv, c);
                if (r == CUDA_SUCCESS)
                        copy_run(c);
                sim_unlock(drv);
                return r;
        }
        arg = malloc(sizeof(*arg));
        if (!arg) {
                sim_queue_put(drv, q);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        *arg = *c;
        return sim_queue_submit_exec(drv, q, copy_exec, arg, true);
}

CUresult sim_copy_submit(const struct sim_copy *c, bool async, CUstream stream)
{
        bool empty = c->width == 0 || c->height == 0 || c->depth == 0;
        struct sim_driver *drv;
        CUresult r;

        if (async)
                return async_copy(c, stream, empty);
        r = sync_begin(&drv, NULL, true);
        if (r != CUDA_SUCCESS)
                return r;
        if (!empty) {
                r = copy_check(drv, c);
                if (r == CUDA_SUCCESS)
                        copy_run(c);
        }
        sim_unlock(drv);
        return r;
}

static CUresult linear(uintptr_t dst, enum sim_side dside, uintptr_t src, enum sim_side sside,
                       size_t n, bool async, CUstream stream)
{
        struct sim_copy c = {
                .dst = { .base = dst, .side = dside },
                .src = { .base = src, .side = sside },
                .width = n, .height = 1, .depth = 1,
        };

        return sim_copy_submit(&c, async, stream);
}

SIM_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
        return linear(dstDevice, SIM_SIDE_DEVICE, (uintptr_t)srcHost, SIM_SIDE_HOST, ByteCount, false, NULL);
}

SIM_API CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
        return linear((uintptr_t)dstHost, SIM_SIDE_HOST, srcDevice, SIM_SIDE_DEVICE, ByteCount, false, NULL);
}

SIM_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
        return linear(dstDevice, SIM_SIDE_DEVICE, srcDevice, SIM_SIDE_DEVICE, ByteCount, false, NULL);
}

SIM_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost,
                                      size_t ByteCount, CUstream hStream)
{
        return linear(dstDevice, SIM_SIDE_DEVICE, (uintptr_t)srcHost, SIM_SIDE_HOST, ByteCount, true, hStream);
}

SIM_API CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice,
                                      size_t ByteCount, CUstream hStream)
{
        return linear((uintptr_t)dstHost, SIM_SIDE_HOST, srcDevice, SIM_SIDE_DEVICE, ByteCount, true, hStream);
}

SIM_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                      size_t ByteCount, CUstream hStream)
{
        return linear(dstDevice, SIM_SIDE_DEVICE, srcDevice, SIM_SIDE_DEVICE, ByteCount, true, hStream);
}

/* Unified addressing: each side is device memory if it lies in a device
 * range, host memory otherwise. */
SIM_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
        return linear(dst, SIM_SIDE_ANY, src, SIM_SIDE_ANY, ByteCount, false, NULL);
}

SIM_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
        return linear(dst, SIM_SIDE_ANY, src, SIM_SIDE_ANY, ByteCount, true, hStream);
}

/* Both contexts must be live; the copy itself is device to device, ordered
 * on the current context's streams. */
static CUresult peer(CUdeviceptr dst, CUcontext dstCtx, CUdeviceptr src, CUcontext srcCtx, size_t n,
                     bool async, CUstream stream)
{
        struct sim_driver *drv = sim_driver_get();
        bool live;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_rdlock(drv);
        live = sim_ctx_lookup(drv, dstCtx) && sim_ctx_lookup(drv, srcCtx);
        sim_unlock(drv);
        if (!live)
                return CUDA_ERROR_INVALID_CONTEXT;
        return linear(dst, SIM_SIDE_DEVICE, src, SIM_SIDE_DEVICE, n, async, stream);
}

SIM_API CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                              CUcontext srcContext, size_t ByteCount)
{
        return peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, false, NULL);
}

SIM_API CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                   CUcontext srcContext, size_t ByteCount, CUstream hStream)
{
        return peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, true, hStream);
}

/* ---- sets ---- */

struct memset_arg {
        CUdeviceptr dst;
        uint32_t value;
        size_t width;           /* 1, 2 or 4 bytes per element */
        size_t n;
};

static CUresult memset_check(struct sim_driver *drv, const void *arg)
{
        const struct memset_arg *m = arg;

        return sim_check_device_range(drv, m->dst, m->n * m->width, SIM_NEED_WRITE);
}

static void memset_run(const struct memset_arg *m)
{
        switch (m->width) {
        case 1:
                memset((void *)(uintptr_t)m->dst, (int)(m->value & 0xff), m->n);
                break;
        case 2: {
                uint16_t *p = (uint16_t *)(uintptr_t)m->dst;

                for (size_t i = 0; i < m->n; i++)
                        p[i] = (uint16_t)m->value;
                break;
        }
        default: {
                uint32_t *p = (uint32_t *)(uintptr_t)m->dst;

                for (size_t i = 0; i < m->n; i++)
                        p[i] = m->value;
                break;
        }
        }
}

static CUresult memset_exec(struct sim_driver *drv, void *arg)
{
        if (memset_check(drv, arg) != CUDA_SUCCESS)
                return CUDA_ERROR_ILLEGAL_ADDRESS;
        memset_run(arg);
        return CUDA_SUCCESS;
}

/* Sets n elements of width bytes (1, 2 or 4) to value. */
static CUresult memset_n(CUdeviceptr dst, uint32_t value, size_t width, size_t n, bool async, CUstream stream)
{
        struct memset_arg m = { .dst = dst, .value = value, .width = width, .n = n }, *arg;
        struct sim_driver *drv;
        CUresult r;

        if (async) {
                if (!sim_driver_get())
                        return CUDA_ERROR_NOT_INITIALIZED;
                if (dst % width != 0 || n > SIZE_MAX / width)
                        return CUDA_ERROR_INVALID_VALUE;
                struct sim_nparams np = {
                        .type = CU_GRAPH_NODE_TYPE_MEMSET,
                        .u.memset = { .dst = dst,
                                      .value = value,
                                      .elementSize = (unsigned)width,
                                      .width = n,
                                      .height = 1,
                                      .pitch = n * width },
                };

                arg = malloc(sizeof(*arg));
                if (!arg)
                        return CUDA_ERROR_OUT_OF_MEMORY;
                *arg = m;
                return async_submit(stream, arg, n == 0, memset_check, memset_exec, &np);
        }
        r = sync_begin(&drv, NULL, false);
        if (r != CUDA_SUCCESS)
                return r;
        if (dst % width != 0 || n > SIZE_MAX / width)
                r = CUDA_ERROR_INVALID_VALUE;
        else if (n > 0)
                r = memset_check(drv, &m);
        if (r == CUDA_SUCCESS && n > 0)
                memset_run(&m);
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
        return memset_n(dstDevice, uc, 1, N, false, NULL);
}

SIM_API CUresult cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
        return memset_n(dstDevice, us, 2, N, false, NULL);
}

SIM_API CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
        return memset_n(dstDevice, ui, 4, N, false, NULL);
}

SIM_API CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
        return memset_n(dstDevice, uc, 1, N, true, hStream);
}

SIM_API CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)
{
        return memset_n(dstDevice, us, 2, N, true, hStream);
}

SIM_API CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
        return memset_n(dstDevice, ui, 4, N, true, hStream);
}
