/* SPDX-License-Identifier: MIT */
/*
 * Pool attributes and access (the values cuMemPoolGet/SetAttribute and
 * cuMemPoolGet/SetAccess read and write), the context a pool's chunk is
 * made in, and the stream orderings the allocator inserts.
 */
#include <string.h>

#include "client.h"
#include "pool_impl.h"
#include "shim_gen.h"

CUresult pool_get_attr_locked(const struct lupc_pool *p, CUmemPool_attribute attr, void *value)
{
        switch (attr) {
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
                *(int *)value = p->follow_events;
                return CUDA_SUCCESS;
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
                *(int *)value = p->opportunistic;
                return CUDA_SUCCESS;
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
                *(int *)value = p->internal_deps;
                return CUDA_SUCCESS;
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
                *(cuuint64_t *)value = p->threshold;
                return CUDA_SUCCESS;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
                *(cuuint64_t *)value = p->reserved;
                return CUDA_SUCCESS;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
                *(cuuint64_t *)value = p->reserved_high;
                return CUDA_SUCCESS;
        case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
                *(cuuint64_t *)value = p->used;
                return CUDA_SUCCESS;
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
                *(cuuint64_t *)value = p->used_high;
                return CUDA_SUCCESS;
        default:
                return CUDA_ERROR_INVALID_VALUE;
        }
}

CUresult pool_set_attr_locked(struct lupc_pool *p, CUmemPool_attribute attr, const void *value)
{
        switch (attr) {
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
                p->follow_events = *(const int *)value != 0;
                return CUDA_SUCCESS;
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
                p->opportunistic = *(const int *)value != 0;
                return CUDA_SUCCESS;
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
                p->internal_deps = *(const int *)value != 0;
                return CUDA_SUCCESS;
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
                p->threshold = *(const cuuint64_t *)value;
                return CUDA_SUCCESS;
        /* the high watermarks can only be reset, to what is held now */
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
                if (*(const cuuint64_t *)value != 0)
                        return CUDA_ERROR_INVALID_VALUE;
                p->reserved_high = p->reserved;
                return CUDA_SUCCESS;
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
                if (*(const cuuint64_t *)value != 0)
                        return CUDA_ERROR_INVALID_VALUE;
                p->used_high = p->used;
                return CUDA_SUCCESS;
        default:
                return CUDA_ERROR_INVALID_VALUE; /* the current amounts are read-only */
        }
}

/* Validates every descriptor before applying any. Peer access is kept and
 * reported; the arena's mapping on other devices is the worker's (one
 * device per session in practice). */
CUresult pool_set_access_locked(struct lupc_pool *p, const CUmemAccessDesc *map, size_t count)
{
        for (size_t i = 0; i < count; i++) {
                const CUmemAccessDesc *d = &map[i];
                if (d->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
                        return CUDA_ERROR_INVALID_VALUE;
                /* a device that does not exist: driver 580 says INVALID_DEVICE */
                if (d->location.id < 0 || d->location.id >= lupc_device_count())
                        return CUDA_ERROR_INVALID_DEVICE;
                if (d->flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && d->flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
                    d->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
                        return CUDA_ERROR_INVALID_VALUE;
                /* the owning device always has read-write access */
                if (d->location.id == p->device && d->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
                        return CUDA_ERROR_INVALID_VALUE;
        }
        for (size_t i = 0; i < count; i++)
                p->access[map[i].location.id] = (unsigned char)map[i].flags;
        return CUDA_SUCCESS;
}

int lupc_pool_ctx_device(uint64_t ctx)
{
        struct lupc_ctx_info info;
        if (ctx && lupc_ctx_lookup(ctx, &info))
                return info.device;
        return lupc_primary_ctx_dev(ctx);
}

uint64_t lupc_pool_chunk_ctx(int device, uint64_t stream_ctx)
{
        struct lupc_ctx_info info;
        if (lupc_pool_ctx_device(stream_ctx) == device)
                return stream_ctx;
        uint64_t cur = lupc_ctx_current();
        if (cur && lupc_pool_ctx_device(cur) == device)
                return cur;
        if (lupc_ctx_lookup(lupc_primary_ctx_id(device), &info))
                return lupc_primary_ctx_id(device);
        return 0;
}

/* One event per context serves every ordering: each use records it anew,
 * and a stream wait takes the record made just before it. */
static struct {
        uint64_t ctx, ev;
} scratch[LUP_MAX_CONTEXTS + LUP_MAX_DEVICES];

static uint64_t scratch_event(uint64_t ctx)
{
        size_t free_slot = sizeof(scratch) / sizeof(scratch[0]);
        for (size_t i = 0; i < sizeof(scratch) / sizeof(scratch[0]); i++) {
                if (scratch[i].ctx == ctx)
                        return scratch[i].ev;
                if (!scratch[i].ctx && free_slot == sizeof(scratch) / sizeof(scratch[0]))
                        free_slot = i;
        }
        CUevent ev = NULL;
        if (cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
                return 0;
        if (free_slot < sizeof(scratch) / sizeof(scratch[0]))
                scratch[free_slot] = (typeof(scratch[0])){ .ctx = ctx, .ev = (uint64_t)(uintptr_t)ev };
        return (uint64_t)(uintptr_t)ev;
}

void lupc_pool_forget_ctx_events(uint64_t ctx)
{
        for (size_t i = 0; i < sizeof(scratch) / sizeof(scratch[0]); i++)
                if (scratch[i].ctx == ctx)
                        scratch[i].ctx = scratch[i].ev = 0;
}

static bool push_ctx(uint64_t ctx)
{
        return lupc_ctx_current() != ctx && lupc_ctx_push(ctx) == 0;
}

void lupc_pool_wait_dep(const struct pool_stream_dep *dep)
{
        bool pushed = push_ctx(dep->from.ctx);
        uint64_t ev = scratch_event(dep->from.ctx);
        if (ev)
                (void)lupc_send_cuEventRecord((CUevent)(uintptr_t)ev, (CUstream)(uintptr_t)dep->from.id);
        else /* no event to order with: wait here instead (rare: a full handle table) */
                (void)lupc_send_cuStreamSynchronize((CUstream)(uintptr_t)dep->from.id);
        if (pushed)
                lupc_ctx_pop();
        if (!ev)
                return;
        pushed = push_ctx(dep->to.ctx);
        (void)cuStreamWaitEvent((CUstream)(uintptr_t)dep->to.id, (CUevent)(uintptr_t)ev, 0);
        if (pushed)
                lupc_ctx_pop();
}
