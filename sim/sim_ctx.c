/* SPDX-License-Identifier: MIT */
/*
 * Contexts: created ones, one primary context per device, and the
 * per-thread stack of current contexts.
 *
 * As in the real driver, the stack is thread-local and holds handles, not
 * references: destroying a context on one thread leaves it on the stacks
 * of others, where it is detected on use (CUDA_ERROR_CONTEXT_IS_DESTROYED).
 * Handles are checked against the registry before anything is read through
 * them, so a destroyed or made-up handle yields an error, never a crash.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"
#include "sim_graph.h"

/* What cuCtxGetApiVersion reports for contexts of the v2 API. */
#define SIM_CTX_API_VERSION 3020

/* cuCtxGetLimit before any cuCtxSetLimit: an H100's defaults. */
static const size_t limit_defaults[CU_LIMIT_MAX] = {
        [CU_LIMIT_STACK_SIZE] = 1024,
        [CU_LIMIT_PRINTF_FIFO_SIZE] = 1 << 20,
        [CU_LIMIT_MALLOC_HEAP_SIZE] = 8 << 20,
        [CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2,
        [CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048,
        [CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 32,
        [CU_LIMIT_PERSISTING_L2_CACHE_SIZE] = 0,
        [CU_LIMIT_SHMEM_SIZE] = 0,
        [CU_LIMIT_CIG_ENABLED] = 0,
        [CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED] = 0,
};

static _Thread_local struct {
        CUcontext h[SIM_MAX_CTX_STACK];
        unsigned depth;
} ctx_stack;

static CUcontext stack_top(void)
{
        return ctx_stack.depth ? ctx_stack.h[ctx_stack.depth - 1] : NULL;
}

static int stack_push(CUcontext h)
{
        if (ctx_stack.depth >= SIM_MAX_CTX_STACK)
                return -ENOSPC;
        ctx_stack.h[ctx_stack.depth++] = h;
        return 0;
}

CUcontext sim_ctx_handle(const struct sim_ctx *c)
{
        return (CUcontext)(uintptr_t)(SIM_TAG_CTX | c->id);
}

struct sim_ctx *sim_ctx_lookup(struct sim_driver *drv, CUcontext h)
{
        uint64_t id = sim_handle_id((uint64_t)(uintptr_t)h, SIM_TAG_CTX);

        if (id == 0)
                return NULL;
        for (int i = 0; i < drv->device_count; i++) {
                struct sim_ctx *p = &drv->devices[i].primary;

                if (p->id == id)
                        return p->active ? p : NULL;
        }
        return sim_svec_get(&drv->contexts, id);
}

CUresult sim_ctx_status(struct sim_driver *drv, CUcontext h, struct sim_ctx **ret_ctx)
{
        struct sim_ctx *c = sim_ctx_lookup(drv, h);
        CUresult sticky;

        if (!c)
                return CUDA_ERROR_CONTEXT_IS_DESTROYED;
        sticky = (CUresult)atomic_load(&c->sticky);
        if (sticky != CUDA_SUCCESS)
                return sticky;
        if (ret_ctx)
                *ret_ctx = c;
        return CUDA_SUCCESS;
}

CUresult sim_ctx_current(struct sim_driver *drv, struct sim_ctx **ret_ctx, CUcontext *ret_handle)
{
        CUcontext h = stack_top();
        CUresult r;

        if (!h)
                return CUDA_ERROR_INVALID_CONTEXT;
        r = sim_ctx_status(drv, h, ret_ctx);
        if (r == CUDA_SUCCESS && ret_handle)
                *ret_handle = h;
        return r;
}

static bool ctx_flags_valid(unsigned flags)
{
        unsigned sched = flags & CU_CTX_SCHED_MASK;

        if (flags & ~(unsigned)CU_CTX_FLAGS_MASK)
                return false;
        return sched == CU_CTX_SCHED_AUTO || sched == CU_CTX_SCHED_SPIN ||
               sched == CU_CTX_SCHED_YIELD || sched == CU_CTX_SCHED_BLOCKING_SYNC;
}

void sim_ctx_set_sticky(struct sim_driver *drv, CUcontext h, CUresult err)
{
        struct sim_ctx *c = sim_ctx_lookup(drv, h);
        int expected = CUDA_SUCCESS;

        /* The first fault is the one reported. */
        if (c)
                atomic_compare_exchange_strong(&c->sticky, &expected, (int)err);
}

size_t sim_ctx_limit(const struct sim_ctx *c, CUlimit limit)
{
        return c->limits_set ? c->limits[limit] : limit_defaults[limit];
}

/* The work finishes, and what it printed is written out: context
 * destruction is one of the driver's printf flush points. */
void sim_ctx_quiesce(struct sim_driver *drv, CUcontext ctx)
{
        sim_ctx_wait_all(drv, ctx);
        sim_printf_flush(drv, ctx);
}

/* Frees what a context owns; it stays registered. Lock held exclusive.
 * The caller has let its queues drain first (sim_ctx_quiesce), without
 * the lock: their threads need it to finish. */
static void ctx_release_resources(struct sim_driver *drv, CUcontext h)
{
        struct sim_ctx *c = sim_ctx_lookup(drv, h);

        if (c)
                sim_printf_release(drv, c);
        sim_stream_destroy_ctx_streams(drv, h);
        sim_event_destroy_ctx_events(drv, h);
        sim_module_unload_ctx(drv, h);
        sim_mem_free_ctx_allocs(drv, h);
}

SIM_API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_ctx *c;
        CUcontext h;
        int r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pctx)
                return CUDA_ERROR_INVALID_VALUE;
        if (!sim_device_at(drv, dev))
                return CUDA_ERROR_INVALID_DEVICE;
        if (!ctx_flags_valid(flags))
                return CUDA_ERROR_INVALID_VALUE;
        if (ctx_stack.depth >= SIM_MAX_CTX_STACK)
                return CUDA_ERROR_OUT_OF_MEMORY;

        c = calloc(1, sizeof(*c));
        if (!c)
                return CUDA_ERROR_OUT_OF_MEMORY;
        c->dev = dev;
        c->flags = flags;

        sim_wrlock(drv);
        r = sim_handle_register(drv, &drv->contexts, c, &c->id);
        sim_unlock(drv);
        if (r < 0) {
                free(c);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        h = sim_ctx_handle(c);
        (void)stack_push(h);    /* room was checked above */
        *pctx = h;
        return CUDA_SUCCESS;
}

/* The CUDA 12.5+ entry point that cuCtxCreate maps to. Execution affinity
 * and CIG have no meaning here. */
SIM_API CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                                unsigned int flags, CUdevice dev)
{
        if (ctxCreateParams && (ctxCreateParams->execAffinityParams ||
                                ctxCreateParams->numExecAffinityParams ||
                                ctxCreateParams->cigParams)) {
                if (!sim_driver_get())
                        return CUDA_ERROR_NOT_INITIALIZED;
                return CUDA_ERROR_NOT_SUPPORTED;
        }
        return cuCtxCreate_v2(pctx, flags, dev);
}

SIM_API CUresult cuCtxDestroy_v2(CUcontext ctx)
{
        struct sim_driver *drv = sim_driver_get();
        uint64_t id;
        struct sim_ctx *c;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        id = sim_handle_id((uint64_t)(uintptr_t)ctx, SIM_TAG_CTX);
        if (id)
                sim_ctx_quiesce(drv, ctx);

        sim_wrlock(drv);
        /* Primary contexts are not in this table: they are released, not
         * destroyed. */
        c = id ? sim_svec_get(&drv->contexts, id) : NULL;
        if (!c) {
                sim_unlock(drv);
                return CUDA_ERROR_INVALID_CONTEXT;
        }
        ctx_release_resources(drv, ctx);
        (void)sim_svec_remove(&drv->contexts, id);
        sim_unlock(drv);
        free(c);

        if (stack_top() == ctx)
                ctx_stack.depth--;
        return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
        struct sim_driver *drv = sim_driver_get();
        bool live;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_rdlock(drv);
        live = sim_ctx_lookup(drv, ctx) != NULL;
        sim_unlock(drv);
        if (!live)
                return CUDA_ERROR_INVALID_CONTEXT;
        if (stack_push(ctx) < 0)
                return CUDA_ERROR_OUT_OF_MEMORY;
        return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
        if (!sim_driver_get())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (ctx_stack.depth == 0)
                return CUDA_ERROR_INVALID_CONTEXT;
        ctx_stack.depth--;
        if (pctx)
                *pctx = ctx_stack.h[ctx_stack.depth];
        return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxSetCurrent(CUcontext ctx)
{
        struct sim_driver *drv = sim_driver_get();
        bool live;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!ctx) {
                /* NULL pops the top, and is a no-op on an empty stack. */
                if (ctx_stack.depth)
                        ctx_stack.depth--;
                return CUDA_SUCCESS;
        }
        sim_rdlock(drv);
        live = sim_ctx_lookup(drv, ctx) != NULL;
        sim_unlock(drv);
        if (!live)
                return CUDA_ERROR_INVALID_CONTEXT;
        if (ctx_stack.depth)
                ctx_stack.h[ctx_stack.depth - 1] = ctx;
        else
                (void)stack_push(ctx);
        return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetCurrent(CUcontext *pctx)
{
        if (!sim_driver_get())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pctx)
                return CUDA_ERROR_INVALID_VALUE;
        *pctx = stack_top();
        return CUDA_SUCCESS;
}

/* What the cuCtxGet* calls report of the current context. */
struct ctx_settings {
        CUdevice dev;
        unsigned flags;
        int cache_config;
        size_t limits[CU_LIMIT_MAX];
};

/* A copy of the current context's settings (untouched on failure), read
 * under the lock shared so that the getters need not take it. */
static CUresult current_settings(struct ctx_settings *ret)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_ctx *c;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_rdlock(drv);
        r = sim_ctx_current(drv, &c, NULL);
        if (r == CUDA_SUCCESS) {
                ret->dev = c->dev;
                ret->flags = c->flags;
                ret->cache_config = c->cache_config;
                memcpy(ret->limits, c->limits_set ? c->limits : limit_defaults, sizeof(ret->limits));
        }
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuCtxGetDevice(CUdevice *device)
{
        struct ctx_settings s;
        CUresult r;

        if (!device)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = current_settings(&s);
        if (r == CUDA_SUCCESS)
                *device = s.dev;
        return r;
}

/* Waits for every stream of the current context and writes out what its
 * kernels printed; a fault in any of that work is then the answer. */
SIM_API CUresult cuCtxSynchronize(void)
{
        struct sim_driver *drv = sim_driver_get();
        CUcontext h = stack_top();
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_rdlock(drv);
        r = sim_ctx_current(drv, NULL, NULL);
        sim_unlock(drv);
        if (r == CUDA_SUCCESS)
                r = sim_capture_unsafe_call();
        if (r != CUDA_SUCCESS)
                return r;
        sim_ctx_wait_all(drv, h);
        sim_printf_flush(drv, h);
        sim_rdlock(drv);
        r = sim_ctx_current(drv, NULL, NULL);
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuCtxGetFlags(unsigned int *flags)
{
        struct ctx_settings s;
        CUresult r;

        if (!flags)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = current_settings(&s);
        if (r == CUDA_SUCCESS)
                *flags = s.flags;
        return r;
}

SIM_API CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
        struct sim_driver *drv = sim_driver_get();
        CUresult r = CUDA_SUCCESS;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!version)
                return CUDA_ERROR_INVALID_VALUE;
        sim_rdlock(drv);
        if (!ctx)
                r = sim_ctx_current(drv, NULL, NULL);
        else if (!sim_ctx_lookup(drv, ctx))
                r = CUDA_ERROR_INVALID_CONTEXT;
        sim_unlock(drv);
        if (r == CUDA_SUCCESS)
                *version = SIM_CTX_API_VERSION;
        return r;
}

/* ---- primary contexts ---- */

SIM_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_device *d;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pctx)
                return CUDA_ERROR_INVALID_VALUE;
        d = sim_device_at(drv, dev);
        if (!d)
                return CUDA_ERROR_INVALID_DEVICE;
        sim_wrlock(drv);
        d->primary.active = true;
        d->primary.refcount++;
        *pctx = sim_ctx_handle(&d->primary);
        sim_unlock(drv);
        return CUDA_SUCCESS;
}

/* Lock held exclusive. The handle stays the same for the next retain. */
static void primary_deactivate(struct sim_driver *drv, struct sim_device *d)
{
        ctx_release_resources(drv, sim_ctx_handle(&d->primary));
        d->primary.active = false;
        d->primary.refcount = 0;
        atomic_store(&d->primary.sticky, CUDA_SUCCESS);
}

SIM_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_device *d;
        CUresult r = CUDA_SUCCESS;
        bool last;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        d = sim_device_at(drv, dev);
        if (!d)
                return CUDA_ERROR_INVALID_DEVICE;
        /* The last release tears the context down: let its work finish
         * first (without the lock, which the work needs). */
        sim_rdlock(drv);
        last = d->primary.refcount == 1;
        sim_unlock(drv);
        if (last)
                sim_ctx_quiesce(drv, sim_ctx_handle(&d->primary));
        sim_wrlock(drv);
        if (d->primary.refcount == 0)
                r = CUDA_ERROR_INVALID_CONTEXT;
        else if (--d->primary.refcount == 0)
                primary_deactivate(drv, d);
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_device *d;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        d = sim_device_at(drv, dev);
        if (!d)
                return CUDA_ERROR_INVALID_DEVICE;
        if (!ctx_flags_valid(flags))
                return CUDA_ERROR_INVALID_VALUE;
        sim_wrlock(drv);
        d->primary.flags = flags;
        sim_unlock(drv);
        return CUDA_SUCCESS;
}

SIM_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_device *d;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!flags || !active)
                return CUDA_ERROR_INVALID_VALUE;
        d = sim_device_at(drv, dev);
        if (!d)
                return CUDA_ERROR_INVALID_DEVICE;
        sim_rdlock(drv);
        *flags = d->primary.flags;
        *active = d->primary.active;
        sim_unlock(drv);
        return CUDA_SUCCESS;
}

SIM_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_device *d;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        d = sim_device_at(drv, dev);
        if (!d)
                return CUDA_ERROR_INVALID_DEVICE;
        sim_ctx_quiesce(drv, sim_ctx_handle(&d->primary));
        sim_wrlock(drv);
        if (d->primary.active)
                primary_deactivate(drv, d);
        sim_unlock(drv);
        return CUDA_SUCCESS;
}

/* Legacy names with identical signatures, for programs built against
 * headers older than CUDA 11. */
SIM_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
        return cuDevicePrimaryCtxRelease_v2(dev);
}

SIM_API CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
        return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

SIM_API CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
        return cuDevicePrimaryCtxReset_v2(dev);
}

/* ---- limits and cache configuration ---- */

#define SIM_MAX_PERSISTING_L2 34603008  /* the device attribute */

SIM_API CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_ctx *c;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if ((unsigned)limit >= CU_LIMIT_MAX)
                return CUDA_ERROR_INVALID_VALUE;
        switch (limit) {
        case CU_LIMIT_SHMEM_SIZE:
        case CU_LIMIT_CIG_ENABLED:
                return CUDA_ERROR_INVALID_VALUE;        /* query only */
        case CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED:
                return CUDA_ERROR_UNSUPPORTED_LIMIT;    /* no CIG contexts here */
        case CU_LIMIT_MAX_L2_FETCH_GRANULARITY:
                if (value > 128)
                        return CUDA_ERROR_INVALID_VALUE;
                break;
        case CU_LIMIT_PERSISTING_L2_CACHE_SIZE:
                if (value > SIM_MAX_PERSISTING_L2)
                        return CUDA_ERROR_INVALID_VALUE;
                break;
        default:
                break;
        }
        sim_wrlock(drv);
        r = sim_ctx_current(drv, &c, NULL);
        if (r == CUDA_SUCCESS) {
                if (!c->limits_set) {
                        memcpy(c->limits, limit_defaults, sizeof(c->limits));
                        c->limits_set = true;
                }
                c->limits[limit] = value;
        }
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
        struct ctx_settings s;
        CUresult r;

        if (!pvalue || (unsigned)limit >= CU_LIMIT_MAX)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = current_settings(&s);
        if (r == CUDA_SUCCESS)
                *pvalue = s.limits[limit];
        return r;
}

SIM_API CUresult cuCtxSetCacheConfig(CUfunc_cache config)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_ctx *c;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if ((int)config < CU_FUNC_CACHE_PREFER_NONE || (int)config > CU_FUNC_CACHE_PREFER_EQUAL)
                return CUDA_ERROR_INVALID_VALUE;
        sim_wrlock(drv);
        r = sim_ctx_current(drv, &c, NULL);
        if (r == CUDA_SUCCESS)
                c->cache_config = (int)config;
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuCtxGetCacheConfig(CUfunc_cache *pconfig)
{
        struct ctx_settings s;
        CUresult r;

        if (!pconfig)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = current_settings(&s);
        if (r == CUDA_SUCCESS)
                *pconfig = (CUfunc_cache)s.cache_config;
        return r;
}
