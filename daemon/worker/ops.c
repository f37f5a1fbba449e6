/* SPDX-License-Identifier: MIT */
/*
 * Hand-written worker handlers (worker=custom in abi/cuda_api.spec): memory
 * in the arena, contexts, module globals, and the creators that remember how
 * they created an object so that a restore can create it again.
 */
#define LUP_LOG_CAT LUP_LOGC_GPU
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "worker/arrays.h"
#include "worker/session.h"

static CUresult retain_primary(struct lupw_session *s, int dev)
{
        if (s->ctx.primary[dev])
                return CUDA_SUCCESS;
        return s->be.fn.cuDevicePrimaryCtxRetain(&s->ctx.primary[dev], dev);
}

/* Payload: a = the module or library it belongs to, b = its name (owned). */
static CUresult add_global(struct lupw_session *s, uint64_t addr, uint64_t size, const char *name)
{
        if (lupw_find_global(s, addr, NULL))
                return CUDA_SUCCESS;
        if (s->obj.globals.n >= LUP_MAX_HANDLES)
                return CUDA_ERROR_OUT_OF_MEMORY;
        char *n = strdup(name);
        struct lup_range r = { .base = addr, .size = size, .a = s->cur.parent, .b = (uint64_t)(uintptr_t)n };
        int rc = n ? lup_rangemap_add(&s->obj.globals, &r) : -ENOMEM;
        if (rc < 0)
                free(n);
        return rc == 0 || rc == -EEXIST ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* ---- custom handlers */

CUresult lupw_cuMemAlloc_v2(struct lupw_session *s, CUdeviceptr *dptr, size_t bytesize)
{
        uint64_t addr;
        if (bytesize == 0)
                return CUDA_ERROR_INVALID_VALUE;
        int rc = arena_alloc(&s->mem.arena, bytesize, s->ctx.bound_device, s->ctx.bound_id, &addr);
        if (rc < 0)
                return rc == -EINVAL ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_OUT_OF_MEMORY;
        if (rc > 0)
                return (CUresult)rc;
        *dptr = addr;
        return CUDA_SUCCESS;
}

CUresult lupw_cuMemFree_v2(struct lupw_session *s, CUdeviceptr dptr)
{
        /* The driver finishes work touching the memory before freeing it;
         * execution here is in order, so a context sync gives the same. */
        s->be.fn.cuCtxSynchronize();
        return arena_free(&s->mem.arena, dptr) < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult lupw_cuMemsetD8_v2(struct lupw_session *s, CUdeviceptr dst, unsigned char uc, size_t n)
{
        return s->be.fn.cuMemsetD8_v2(dst, uc, n);
}

CUresult lupw_cuMemsetD16_v2(struct lupw_session *s, CUdeviceptr dst, unsigned short us, size_t n)
{
        return s->be.fn.cuMemsetD16_v2(dst, us, n);
}

CUresult lupw_cuMemsetD32_v2(struct lupw_session *s, CUdeviceptr dst, unsigned int ui, size_t n)
{
        return s->be.fn.cuMemsetD32_v2(dst, ui, n);
}

CUresult lupw_cuMemsetD8Async(struct lupw_session *s, CUdeviceptr dst, unsigned char uc, size_t n, CUstream st)
{
        return s->be.fn.cuMemsetD8Async(dst, uc, n, st);
}

CUresult lupw_cuMemsetD16Async(struct lupw_session *s, CUdeviceptr dst, unsigned short us, size_t n, CUstream st)
{
        return s->be.fn.cuMemsetD16Async(dst, us, n, st);
}

CUresult lupw_cuMemsetD32Async(struct lupw_session *s, CUdeviceptr dst, unsigned int ui, size_t n, CUstream st)
{
        return s->be.fn.cuMemsetD32Async(dst, ui, n, st);
}

CUresult lupw_cuMemcpyDtoD_v2(struct lupw_session *s, CUdeviceptr dst, CUdeviceptr src, size_t n)
{
        return s->be.fn.cuMemcpyDtoD_v2(dst, src, n);
}

CUresult lupw_cuMemcpyDtoDAsync_v2(struct lupw_session *s, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream st)
{
        return s->be.fn.cuMemcpyDtoDAsync_v2(dst, src, n, st);
}

CUresult lupw_lupCtxCreate(struct lupw_session *s, uint64_t id, unsigned int flags, CUdevice dev)
{
        CUcontext real, prev = NULL;

        if (id < LUP_FIRST_CTX_ID || lupw_find_ctx(s, id))
                return CUDA_ERROR_INVALID_VALUE;
        if (s->ctx.n_slots >= (int)LUP_MAX_CONTEXTS)
                return CUDA_ERROR_OUT_OF_MEMORY;
        s->be.fn.cuCtxGetCurrent(&prev);
        CUresult r = s->be.fn.cuCtxCreate_v2(&real, flags, dev);
        if (r != CUDA_SUCCESS)
                return r;
        /* cuCtxCreate makes the new context current; keep binding explicit */
        s->be.fn.cuCtxSetCurrent(prev);
        s->ctx.slots[s->ctx.n_slots++] =
                (struct lupw_ctx_slot){ .id = id, .real = real, .device = dev, .flags = flags };
        lup_debug("session %s: context %#llx on device %d", s->name, (unsigned long long)id, (int)dev);
        return CUDA_SUCCESS;
}

CUresult lupw_lupCtxDestroy(struct lupw_session *s, uint64_t id)
{
        struct lupw_ctx_slot *c = lupw_find_ctx(s, id);
        if (!c)
                return CUDA_ERROR_INVALID_CONTEXT;
        /* memory belongs to the context that allocated it, as in CUDA */
        s->be.fn.cuCtxSetCurrent(c->real);
        s->be.fn.cuCtxSynchronize();
        arena_free_owner(&s->mem.arena, id);
        lupw_arrays_drop_ctx(s, id); /* worker/arrays.c */
        lupw_copy_drop_events(s);    /* they may be this context's (worker/copy.c) */
        CUresult r = s->be.fn.cuCtxDestroy_v2(c->real);
        *c = s->ctx.slots[--s->ctx.n_slots];
        /* the driver's current context changed under the binding: the next
         * call binds again (found by fuzz_worker_ops) */
        s->be.fn.cuCtxSetCurrent(NULL);
        s->ctx.bound_id = 0;
        return r;
}

CUresult lupw_lupPrimaryCtxRetain(struct lupw_session *s, CUdevice dev)
{
        CUresult r = retain_primary(s, dev);
        if (r == CUDA_SUCCESS && !s->ctx.client_primary[dev])
                lup_debug("session %s: primary context of device %d", s->name, (int)dev);
        if (r == CUDA_SUCCESS)
                s->ctx.client_primary[dev] = true;
        return r;
}

CUresult lupw_lupPrimaryCtxRelease(struct lupw_session *s, CUdevice dev)
{
        if (!s->ctx.client_primary[dev])
                return CUDA_ERROR_INVALID_CONTEXT;
        /* The worker keeps its own retain for the session's lifetime (the
         * arena's mappings live in it); the client's release only ends the
         * client's right to use the context. */
        s->ctx.client_primary[dev] = false;
        if (s->ctx.bound_id == LUP_PRIMARY_CTX_ID(dev))
                s->ctx.bound_id = 0;
        return CUDA_SUCCESS;
}

CUresult lupw_lupPrimaryCtxSetFlags(struct lupw_session *s, CUdevice dev, unsigned int flags)
{
        return s->be.fn.cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

CUresult lupw_lupPrimaryCtxReset(struct lupw_session *s, CUdevice dev)
{
        uint64_t id = LUP_PRIMARY_CTX_ID(dev);
        /* A real reset would also tear down the worker's own state; instead
         * free what the client allocated in it and reset the flags. */
        if (s->ctx.primary[dev]) {
                s->be.fn.cuCtxSetCurrent(s->ctx.primary[dev]);
                s->be.fn.cuCtxSynchronize();
                lupw_arrays_drop_ctx(s, id); /* worker/arrays.c */
        }
        arena_free_owner(&s->mem.arena, id);
        s->ctx.client_primary[dev] = false;
        /* the primary context was made current above: force a rebind */
        s->ctx.bound_id = 0;
        return s->be.fn.cuDevicePrimaryCtxSetFlags_v2(dev, 0);
}

CUresult lupw_cuModuleGetGlobal_v2(struct lupw_session *s, CUdeviceptr *dptr, size_t *bytes, CUmodule hmod,
                                   const char *name)
{
        CUresult r = s->be.fn.cuModuleGetGlobal_v2(dptr, bytes, hmod, name);
        /* the client may now copy to and from it: accept it as a device range */
        return r == CUDA_SUCCESS ? add_global(s, *dptr, *bytes, name) : r;
}

CUresult lupw_cuLibraryGetGlobal(struct lupw_session *s, CUdeviceptr *dptr, size_t *bytes, CUlibrary library,
                                 const char *name)
{
        CUresult r = s->be.fn.cuLibraryGetGlobal(dptr, bytes, library, name);
        return r == CUDA_SUCCESS ? add_global(s, *dptr, *bytes, name) : r;
}


/* ---- creators that remember how they created, for checkpoints */

static CUresult prov_image(struct lupw_session *s, CUresult r, const void *image, size_t n)
{
        lupw_prov_free(&s->obj.prov);
        if (r != CUDA_SUCCESS)
                return r;
        s->obj.prov.image = malloc(n ? n : 1);
        if (!s->obj.prov.image)
                return CUDA_ERROR_OUT_OF_MEMORY;
        memcpy(s->obj.prov.image, image, n);
        s->obj.prov.image_len = n;
        return CUDA_SUCCESS;
}

static CUresult prov_named(struct lupw_session *s, CUresult r, uint64_t parent, const char *name)
{
        lupw_prov_free(&s->obj.prov);
        if (r != CUDA_SUCCESS)
                return r;
        s->obj.prov.parent = parent;
        if (name && !(s->obj.prov.name = strdup(name)))
                return CUDA_ERROR_OUT_OF_MEMORY;
        return CUDA_SUCCESS;
}

CUresult lupw_cuModuleLoadData(struct lupw_session *s, CUmodule *module, const void *image)
{
        return prov_image(s, s->be.fn.cuModuleLoadData(module, image), image, s->cur.blob_len);
}

CUresult lupw_lupLibraryLoad(struct lupw_session *s, CUlibrary *library, const void *code)
{
        return prov_image(s, s->be.fn.cuLibraryLoadData(library, code, NULL, NULL, 0, NULL, NULL, 0), code,
                          s->cur.blob_len);
}

CUresult lupw_cuModuleGetFunction(struct lupw_session *s, CUfunction *hfunc, CUmodule hmod, const char *name)
{
        return prov_named(s, s->be.fn.cuModuleGetFunction(hfunc, hmod, name), s->cur.parent, name);
}

CUresult lupw_cuLibraryGetKernel(struct lupw_session *s, CUkernel *pKernel, CUlibrary library, const char *name)
{
        return prov_named(s, s->be.fn.cuLibraryGetKernel(pKernel, library, name), s->cur.parent, name);
}

CUresult lupw_cuLibraryGetModule(struct lupw_session *s, CUmodule *pMod, CUlibrary library)
{
        return prov_named(s, s->be.fn.cuLibraryGetModule(pMod, library), s->cur.parent, NULL);
}

CUresult lupw_cuKernelGetFunction(struct lupw_session *s, CUfunction *pFunc, CUkernel kernel)
{
        return prov_named(s, s->be.fn.cuKernelGetFunction(pFunc, kernel), s->cur.parent, NULL);
}

CUresult lupw_cuStreamCreate(struct lupw_session *s, CUstream *phStream, unsigned int Flags)
{
        CUresult r = prov_named(s, s->be.fn.cuStreamCreate(phStream, Flags), 0, NULL);
        s->obj.prov.flags = Flags;
        return r;
}

CUresult lupw_cuStreamCreateWithPriority(struct lupw_session *s, CUstream *phStream, unsigned int flags, int priority)
{
        CUresult r = prov_named(s, s->be.fn.cuStreamCreateWithPriority(phStream, flags, priority), 0, NULL);
        s->obj.prov.flags = flags;
        s->obj.prov.priority = priority;
        return r;
}

CUresult lupw_cuEventCreate(struct lupw_session *s, CUevent *phEvent, unsigned int Flags)
{
        CUresult r = prov_named(s, s->be.fn.cuEventCreate(phEvent, Flags), 0, NULL);
        s->obj.prov.flags = Flags;
        return r;
}

/* ---- settings a restore must make again */

void lupw_remember(struct lupw_session *s, uint64_t holder, uint32_t kind, uint32_t key, int32_t device, int64_t value)
{
        for (size_t i = 0; i < s->obj.n_settings; i++) {
                struct lupw_setting *t = &s->obj.settings[i];
                if (t->holder == holder && t->kind == kind && t->key == key && t->device == device) {
                        t->value = value;
                        return;
                }
        }
        if (s->obj.n_settings == s->obj.cap_settings) {
                size_t ncap = s->obj.cap_settings ? s->obj.cap_settings * 2 : 16;
                struct lupw_setting *n = ncap <= LUPW_MAX_SETTINGS ? realloc(s->obj.settings, ncap * sizeof(*n)) : NULL;
                if (!n) {
                        lup_warn("session %s: too many settings to remember; a restore will not repeat this one",
                                 s->name);
                        return;
                }
                s->obj.settings = n;
                s->obj.cap_settings = ncap;
        }
        s->obj.settings[s->obj.n_settings++] = (struct lupw_setting){ holder, kind, key, device, value };
}

CUresult lupw_cuCtxSetLimit(struct lupw_session *s, CUlimit limit, size_t value)
{
        CUresult r = s->be.fn.cuCtxSetLimit(limit, value);
        if (r == CUDA_SUCCESS)
                lupw_remember(s, s->ctx.bound_id, LUPW_SET_CTX_LIMIT, (uint32_t)limit, 0, (int64_t)value);
        return r;
}

CUresult lupw_cuCtxSetCacheConfig(struct lupw_session *s, CUfunc_cache config)
{
        CUresult r = s->be.fn.cuCtxSetCacheConfig(config);
        if (r == CUDA_SUCCESS)
                lupw_remember(s, s->ctx.bound_id, LUPW_SET_CTX_CACHE, 0, 0, (int64_t)config);
        return r;
}

CUresult lupw_cuFuncSetAttribute(struct lupw_session *s, CUfunction hfunc, CUfunction_attribute attrib, int value)
{
        CUresult r = s->be.fn.cuFuncSetAttribute(hfunc, attrib, value);
        if (r == CUDA_SUCCESS)
                lupw_remember(s, s->cur.parent, LUPW_SET_FUNC_ATTR, (uint32_t)attrib, 0, value);
        return r;
}

CUresult lupw_cuFuncSetCacheConfig(struct lupw_session *s, CUfunction hfunc, CUfunc_cache config)
{
        CUresult r = s->be.fn.cuFuncSetCacheConfig(hfunc, config);
        if (r == CUDA_SUCCESS)
                lupw_remember(s, s->cur.parent, LUPW_SET_FUNC_CACHE, 0, 0, (int64_t)config);
        return r;
}

CUresult lupw_cuKernelSetAttribute(struct lupw_session *s, CUfunction_attribute attrib, int val, CUkernel kernel,
                                   CUdevice dev)
{
        CUresult r = s->be.fn.cuKernelSetAttribute(attrib, val, kernel, dev);
        if (r == CUDA_SUCCESS)
                lupw_remember(s, s->cur.parent, LUPW_SET_KERNEL_ATTR, (uint32_t)attrib, dev, val);
        return r;
}
