/* SPDX-License-Identifier: MIT */
/*
 * The fake driver behind fuzz_worker_ops.c (its header comment says what it
 * checks): stubs that keep just enough state to catch the worker using the
 * driver wrongly, and abort when it does.
 */
/* the checks are the point of a fuzz target: keep assert() in every build type */
#undef NDEBUG
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_worker_driver.h"

struct fake_driver drv;


/* The objects whose addresses are the fake driver's context handles. */
static char ctx_obj[FAKE_CTXS];
static char primary_obj[LUP_MAX_DEVICES];
/* ... and its streams, events, modules, ... */
static char handle_obj[FAKE_HANDLES];

static bool is_created_ctx(CUcontext c, size_t *ret_i)
{
        uintptr_t p = (uintptr_t)c, b = (uintptr_t)ctx_obj;
        if (p < b || p >= b + FAKE_CTXS)
                return false;
        *ret_i = p - b;
        return true;
}

static bool is_primary_ctx(CUcontext c, int *ret_dev)
{
        uintptr_t p = (uintptr_t)c, b = (uintptr_t)primary_obj;
        if (p < b || p >= b + LUP_MAX_DEVICES)
                return false;
        *ret_dev = (int)(p - b);
        return true;
}

bool ctx_usable(CUcontext c)
{
        size_t i;
        int dev;
        if (is_created_ctx(c, &i))
                return drv.ctx_live[i];
        if (is_primary_ctx(c, &dev))
                return drv.primary_refs[dev] > 0;
        return false;
}

static void fail(const char *what)
{
        fprintf(stderr, "fuzz_worker_ops: fake driver: %s\n", what);
        abort();
}

/* Every byte a driver call touches must lie in one live allocation, or in a
 * module global the driver handed out. */
static void check_device_range(CUdeviceptr p, size_t bytes)
{
        if (bytes == 0)
                return;
        const struct arena_alloc *a = arena_find(&drv.s->mem.arena, p);
        if (a && bytes <= a->size - (p - a->addr))
                return;
        struct lup_range g;
        if (lup_rangemap_find(&drv.s->obj.globals, p, &g) && bytes <= g.size - (p - g.base))
                return;
        fail("device access outside a live allocation");
}

static void *handle_new(enum fake_kind kind)
{
        for (size_t i = 0; i < FAKE_HANDLES; i++) {
                if (drv.handle_kind[i] == FK_NONE) {
                        drv.handle_kind[i] = kind;
                        return &handle_obj[i];
                }
        }
        return NULL;
}

/* A handle the worker passes must be a live one of the right kind. */
static void check_handle(const void *h, enum fake_kind kind, const char *what)
{
        uintptr_t p = (uintptr_t)h, b = (uintptr_t)handle_obj;
        if (p < b || p >= b + FAKE_HANDLES || drv.handle_kind[p - b] != kind)
                fail(what);
}

static void handle_destroy(const void *h, enum fake_kind kind, const char *what)
{
        check_handle(h, kind, what);
        drv.handle_kind[(uintptr_t)h - (uintptr_t)handle_obj] = FK_NONE;
}

static void check_stream(CUstream st)
{
        if (st != NULL && st != CU_STREAM_LEGACY && st != CU_STREAM_PER_THREAD)
                check_handle(st, FK_STREAM, "a stream that is not live");
}

static void check_device(CUdevice dev)
{
        if (dev < 0 || dev >= FZ_DEVICES)
                fail("device ordinal out of range");
}

/*
 * Every function pointer in struct lupw_backend starts out as this stub,
 * whatever its type, so a function added to the spec needs no change here.
 * Calling a function that takes no arguments through a pointer to one that
 * takes some is undefined in ISO C, but well defined in the x86-64 (and
 * AArch64) calling conventions: the callee ignores the argument registers
 * and returns CUDA_SUCCESS in eax. Good enough for a fuzz harness; the
 * functions whose outputs or effects matter have typed stubs below.
 */
static CUresult stub_generic(void)
{
        drv.calls++;
        return CUDA_SUCCESS;
}

static CUresult stub_cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
        drv.calls++;
        check_device(dev);
        for (size_t i = 0; i < FAKE_CTXS; i++) {
                if (!drv.ctx_live[i]) {
                        drv.ctx_live[i] = true;
                        drv.n_ctx_live++;
                        *pctx = (CUcontext)(void *)&ctx_obj[i];
                        drv.current = *pctx; /* the driver makes a new context current */
                        return CUDA_SUCCESS;
                }
        }
        return CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult stub_cuCtxDestroy_v2(CUcontext ctx)
{
        size_t i;
        drv.calls++;
        if (!is_created_ctx(ctx, &i) || !drv.ctx_live[i])
                fail("cuCtxDestroy of a context that is not live (or of a primary context)");
        drv.ctx_live[i] = false;
        drv.n_ctx_live--;
        /* destroying the current context pops it: nothing is current after */
        if (drv.current == ctx)
                drv.current = NULL;
        return CUDA_SUCCESS;
}

static CUresult stub_cuCtxSetCurrent(CUcontext ctx)
{
        drv.calls++;
        if (ctx && !ctx_usable(ctx))
                fail("cuCtxSetCurrent of a destroyed or released context");
        drv.current = ctx;
        return CUDA_SUCCESS;
}

static CUresult stub_cuCtxGetCurrent(CUcontext *pctx)
{
        drv.calls++;
        *pctx = drv.current;
        return CUDA_SUCCESS;
}

static CUresult stub_cuCtxSynchronize(void)
{
        drv.calls++;
        return drv.current ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

static CUresult stub_cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
        drv.calls++;
        check_device(dev);
        drv.primary_refs[dev]++;
        *pctx = (CUcontext)(void *)&primary_obj[dev];
        return CUDA_SUCCESS;
}

static CUresult stub_cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
        drv.calls++;
        check_device(dev);
        if (drv.primary_refs[dev] == 0)
                fail("cuDevicePrimaryCtxRelease without a retain");
        drv.primary_refs[dev]--;
        return CUDA_SUCCESS;
}

static CUresult stub_cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
        drv.calls++;
        check_device(dev);
        return CUDA_SUCCESS;
}

static CUresult stub_cuMemGetInfo_v2(size_t *free_b, size_t *total)
{
        drv.calls++;
        if (!drv.current)
                return CUDA_ERROR_INVALID_CONTEXT;
        *free_b = 0;
        *total = 0;
        return CUDA_SUCCESS;
}

static CUresult stub_cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                                 unsigned long long flags)
{
        drv.calls++;
        if (size == 0 || size % LUP_ARENA_GRANULE)
                fail("cuMemCreate of a size that is not a multiple of the granule");
        check_device(prop->location.id);
        *handle = ++drv.next_handle;
        drv.handles_live++;
        return CUDA_SUCCESS;
}

static CUresult stub_cuMemRelease(CUmemGenericAllocationHandle handle)
{
        drv.calls++;
        if (handle == 0 || handle > drv.next_handle || drv.handles_live == 0)
                fail("cuMemRelease of an unknown handle");
        drv.handles_live--;
        return CUDA_SUCCESS;
}

static CUresult stub_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                              unsigned long long flags)
{
        drv.calls++;
        if (ptr < LUP_ARENA_BASE || ptr % LUP_ARENA_GRANULE || size > LUP_ARENA_SIZE ||
            ptr - LUP_ARENA_BASE > LUP_ARENA_SIZE - size)
                fail("cuMemMap outside the session's reserved range");
        drv.maps_live++;
        drv.mapped_bytes += size;
        return CUDA_SUCCESS;
}

static CUresult stub_cuMemUnmap(CUdeviceptr ptr, size_t size)
{
        drv.calls++;
        if (drv.maps_live == 0 || drv.mapped_bytes < size)
                fail("cuMemUnmap of something not mapped");
        drv.maps_live--;
        drv.mapped_bytes -= size;
        return CUDA_SUCCESS;
}

static CUresult memset_common(CUdeviceptr dst, size_t n, size_t width, CUstream st)
{
        drv.calls++;
        if (!drv.current)
                return CUDA_ERROR_INVALID_CONTEXT;
        check_stream(st);
        if (n > SIZE_MAX / width)
                fail("memset size overflows");
        check_device_range(dst, n * width);
        return CUDA_SUCCESS;
}

static CUresult stub_cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n)
{
        return memset_common(dst, n, 1, NULL);
}

static CUresult stub_cuMemsetD16_v2(CUdeviceptr dst, unsigned short v, size_t n)
{
        return memset_common(dst, n, 2, NULL);
}

static CUresult stub_cuMemsetD32_v2(CUdeviceptr dst, unsigned int v, size_t n)
{
        return memset_common(dst, n, 4, NULL);
}

static CUresult stub_cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream st)
{
        return memset_common(dst, n, 1, st);
}

static CUresult stub_cuMemsetD16Async(CUdeviceptr dst, unsigned short v, size_t n, CUstream st)
{
        return memset_common(dst, n, 2, st);
}

static CUresult stub_cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n, CUstream st)
{
        return memset_common(dst, n, 4, st);
}

static CUresult copy_common(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream st)
{
        drv.calls++;
        if (!drv.current)
                return CUDA_ERROR_INVALID_CONTEXT;
        check_stream(st);
        check_device_range(dst, n);
        check_device_range(src, n);
        return CUDA_SUCCESS;
}

static CUresult stub_cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
        return copy_common(dst, src, n, NULL);
}

static CUresult stub_cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream st)
{
        return copy_common(dst, src, n, st);
}

static CUresult stub_cuMemcpyPeer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t n)
{
        if (!ctx_usable(dst_ctx) || !ctx_usable(src_ctx))
                fail("cuMemcpyPeer with a context that is not live");
        return copy_common(dst, src, n, NULL);
}

static CUresult stub_cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t n,
                                       CUstream st)
{
        if (!ctx_usable(dst_ctx) || !ctx_usable(src_ctx))
                fail("cuMemcpyPeerAsync with a context that is not live");
        return copy_common(dst, src, n, st);
}

/* Host<->device copies (the control ops): the device side must lie in one
 * allocation; the host side is the worker's own buffer, written in full so
 * that ASan sees a bounce buffer too small for the copy. */
static CUresult stub_cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
        if (!src)
                fail("cuMemcpyHtoD from NULL");
        return copy_common(dst, dst, n, NULL);
}

static CUresult stub_cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream st)
{
        if (!src)
                fail("cuMemcpyHtoDAsync from NULL");
        return copy_common(dst, dst, n, st);
}

static CUresult stub_cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
        CUresult r = copy_common(src, src, n, NULL);
        memset(dst, 0x5a, n);
        return r;
}

static CUresult stub_cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream st)
{
        CUresult r = copy_common(src, src, n, st);
        memset(dst, 0x5a, n);
        return r;
}

/* Every function takes three 8-byte parameters. */
static CUresult stub_cuFuncGetParamInfo(CUfunction f, size_t index, size_t *off, size_t *size)
{
        drv.calls++;
        check_handle(f, FK_FUNCTION, "cuFuncGetParamInfo of a function that is not live");
        if (index >= 3)
                return CUDA_ERROR_INVALID_VALUE;
        *off = index * 8;
        *size = 8;
        return CUDA_SUCCESS;
}

/* Handle makers return a fresh non-NULL handle; destroyers and users check
 * theirs is live. */

static CUresult stub_cuStreamCreate(CUstream *ph, unsigned int flags)
{
        drv.calls++;
        if (!drv.current)
                return CUDA_ERROR_INVALID_CONTEXT;
        void *h = handle_new(FK_STREAM);
        if (!h)
                return CUDA_ERROR_OUT_OF_MEMORY;
        *ph = h;
        return CUDA_SUCCESS;
}

static CUresult stub_cuStreamCreateWithPriority(CUstream *ph, unsigned int flags, int priority)
{
        return stub_cuStreamCreate(ph, flags);
}

static CUresult stub_cuStreamDestroy_v2(CUstream st)
{
        drv.calls++;
        /* The generated decoder passes the default streams (ids 0, 1, 2)
         * through; the drivers refuse to destroy them. */
        if (st == NULL || st == CU_STREAM_LEGACY || st == CU_STREAM_PER_THREAD)
                return CUDA_ERROR_INVALID_HANDLE;
        handle_destroy(st, FK_STREAM, "cuStreamDestroy of a stream that is not live");
        return CUDA_SUCCESS;
}

static CUresult stub_cuEventCreate(CUevent *ph, unsigned int flags)
{
        drv.calls++;
        if (!drv.current)
                return CUDA_ERROR_INVALID_CONTEXT;
        void *h = handle_new(FK_EVENT);
        if (!h)
                return CUDA_ERROR_OUT_OF_MEMORY;
        *ph = h;
        return CUDA_SUCCESS;
}

static CUresult stub_cuEventDestroy_v2(CUevent ev)
{
        drv.calls++;
        handle_destroy(ev, FK_EVENT, "cuEventDestroy of an event that is not live");
        return CUDA_SUCCESS;
}

static CUresult stub_cuModuleLoadData(CUmodule *pm, const void *image)
{
        drv.calls++;
        if (!image)
                fail("cuModuleLoadData without an image");
        void *h = handle_new(FK_MODULE);
        if (!h)
                return CUDA_ERROR_OUT_OF_MEMORY;
        *pm = h;
        return CUDA_SUCCESS;
}

static CUresult stub_cuModuleUnload(CUmodule m)
{
        drv.calls++;
        handle_destroy(m, FK_MODULE, "cuModuleUnload of a module that is not live");
        return CUDA_SUCCESS;
}

static CUresult stub_cuModuleGetFunction(CUfunction *pf, CUmodule m, const char *name)
{
        drv.calls++;
        check_handle(m, FK_MODULE, "cuModuleGetFunction on a module that is not live");
        if (!name)
                fail("cuModuleGetFunction without a name");
        void *h = handle_new(FK_FUNCTION);
        if (!h)
                return CUDA_ERROR_OUT_OF_MEMORY;
        *pf = h;
        return CUDA_SUCCESS;
}

static CUresult stub_cuLibraryLoadData(CUlibrary *pl, const void *code, CUjit_option *jit_opts, void **jit_vals,
                                       unsigned int n_jit, CUlibraryOption *lib_opts, void **lib_vals,
                                       unsigned int n_lib)
{
        drv.calls++;
        if (!code)
                fail("cuLibraryLoadData without an image");
        void *h = handle_new(FK_LIBRARY);
        if (!h)
                return CUDA_ERROR_OUT_OF_MEMORY;
        *pl = h;
        return CUDA_SUCCESS;
}

/* The worker hands the NULL library (id 0) to the driver, which looks a
 * kernel up in every library of the process for it: this fake has none to
 * search, and refuses NULL elsewhere, as the driver does. */
static CUresult stub_cuLibraryUnload(CUlibrary l)
{
        drv.calls++;
        if (!l)
                return CUDA_ERROR_INVALID_HANDLE;
        handle_destroy(l, FK_LIBRARY, "cuLibraryUnload of a library that is not live");
        return CUDA_SUCCESS;
}

static CUresult stub_cuLibraryGetKernel(CUkernel *pk, CUlibrary l, const char *name)
{
        drv.calls++;
        if (!l)
                return CUDA_ERROR_NOT_FOUND;
        check_handle(l, FK_LIBRARY, "cuLibraryGetKernel on a library that is not live");
        void *h = handle_new(FK_KERNEL);
        if (!h)
                return CUDA_ERROR_OUT_OF_MEMORY;
        *pk = h;
        return CUDA_SUCCESS;
}

static CUresult stub_cuLibraryGetModule(CUmodule *pm, CUlibrary l)
{
        drv.calls++;
        if (!l)
                return CUDA_ERROR_INVALID_HANDLE;
        check_handle(l, FK_LIBRARY, "cuLibraryGetModule on a library that is not live");
        void *h = handle_new(FK_MODULE);
        if (!h)
                return CUDA_ERROR_OUT_OF_MEMORY;
        *pm = h;
        return CUDA_SUCCESS;
}

static CUresult stub_cuKernelGetFunction(CUfunction *pf, CUkernel k)
{
        drv.calls++;
        check_handle(k, FK_KERNEL, "cuKernelGetFunction on a kernel that is not live");
        void *h = handle_new(FK_FUNCTION);
        if (!h)
                return CUDA_ERROR_OUT_OF_MEMORY;
        *pf = h;
        return CUDA_SUCCESS;
}

void fill_backend(struct lupw_backend *be)
{
        typedef CUresult (*generic_fn)(void);
        generic_fn g = stub_generic;

        memset(be, 0, sizeof(*be));
        for (size_t i = 0; i < lupw_n_backend_syms; i++)
                memcpy((char *)be + lupw_backend_syms[i].offset, &g, sizeof(g));
        /* The table holds nothing but function pointers, and every one of
         * them must be listed in lupw_backend_syms (backend.c loads only
         * those): a NULL left here is a generator bug. */
        for (size_t off = 0; off + sizeof(g) <= sizeof(*be); off += sizeof(g)) {
                generic_fn f;
                memcpy(&f, (char *)be + off, sizeof(f));
                if (!f)
                        fail("a struct lupw_backend member is missing from lupw_backend_syms");
        }

        be->cuCtxCreate_v2 = stub_cuCtxCreate_v2;
        be->cuCtxDestroy_v2 = stub_cuCtxDestroy_v2;
        be->cuCtxSetCurrent = stub_cuCtxSetCurrent;
        be->cuCtxGetCurrent = stub_cuCtxGetCurrent;
        be->cuCtxSynchronize = stub_cuCtxSynchronize;
        be->cuDevicePrimaryCtxRetain = stub_cuDevicePrimaryCtxRetain;
        be->cuDevicePrimaryCtxRelease_v2 = stub_cuDevicePrimaryCtxRelease_v2;
        be->cuDevicePrimaryCtxSetFlags_v2 = stub_cuDevicePrimaryCtxSetFlags_v2;
        be->cuMemGetInfo_v2 = stub_cuMemGetInfo_v2;
        be->cuMemCreate = stub_cuMemCreate;
        be->cuMemRelease = stub_cuMemRelease;
        be->cuMemMap = stub_cuMemMap;
        be->cuMemUnmap = stub_cuMemUnmap;
        be->cuMemsetD8_v2 = stub_cuMemsetD8_v2;
        be->cuMemsetD16_v2 = stub_cuMemsetD16_v2;
        be->cuMemsetD32_v2 = stub_cuMemsetD32_v2;
        be->cuMemsetD8Async = stub_cuMemsetD8Async;
        be->cuMemsetD16Async = stub_cuMemsetD16Async;
        be->cuMemsetD32Async = stub_cuMemsetD32Async;
        be->cuMemcpyDtoD_v2 = stub_cuMemcpyDtoD_v2;
        be->cuMemcpyDtoDAsync_v2 = stub_cuMemcpyDtoDAsync_v2;
        be->cuMemcpyPeer = stub_cuMemcpyPeer;
        be->cuMemcpyPeerAsync = stub_cuMemcpyPeerAsync;
        be->cuStreamCreate = stub_cuStreamCreate;
        be->cuStreamCreateWithPriority = stub_cuStreamCreateWithPriority;
        be->cuStreamDestroy_v2 = stub_cuStreamDestroy_v2;
        be->cuEventCreate = stub_cuEventCreate;
        be->cuEventDestroy_v2 = stub_cuEventDestroy_v2;
        be->cuModuleLoadData = stub_cuModuleLoadData;
        be->cuModuleUnload = stub_cuModuleUnload;
        be->cuModuleGetFunction = stub_cuModuleGetFunction;
        be->cuLibraryLoadData = stub_cuLibraryLoadData;
        be->cuLibraryUnload = stub_cuLibraryUnload;
        be->cuLibraryGetKernel = stub_cuLibraryGetKernel;
        be->cuLibraryGetModule = stub_cuLibraryGetModule;
        be->cuKernelGetFunction = stub_cuKernelGetFunction;
        be->cuMemcpyHtoD_v2 = stub_cuMemcpyHtoD_v2;
        be->cuMemcpyHtoDAsync_v2 = stub_cuMemcpyHtoDAsync_v2;
        be->cuMemcpyDtoH_v2 = stub_cuMemcpyDtoH_v2;
        be->cuMemcpyDtoHAsync_v2 = stub_cuMemcpyDtoHAsync_v2;
        be->cuFuncGetParamInfo = stub_cuFuncGetParamInfo;
}
