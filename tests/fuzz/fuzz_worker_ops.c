/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the worker's generated op handlers (lupw_ops[], from
 * abi/gen/lupgen.py) and the hand-written code they call in
 * daemon/worker/ops.c, against a fake session and a fake driver.
 *
 * Input layout (little-endian):
 *   u16 sel   bits 0..13: index into lupw_ops (modulo lupw_n_ops; an index
 *             without a handler is skipped), so index = op id - 256;
 *             bit 14: the session's bound context is 0x100000, not 0x10000;
 *             bit 15: for a sync op, start with a latched async error,
 *             which the handler must report without executing the call
 *   u64 ctx   the context id from the frame header
 *   ...       the argument payload
 *
 * The session looks like one just after its HELLO (see setup_session() in
 * daemon/worker/worker.c), on two devices, after the client did this:
 *   retained the primary context of device 0 (id 0x10000) and, in it,
 *     allocated FZ_A (4 KiB, a slab block) and FZ_B (3 MiB, own chunk);
 *   created context 0x100000 on device 1 and, in it, allocated
 *     FZ_C (256 bytes) and FZ_D (1 MiB);
 *   made 0x10000 current again (or left 0x100000 current: bit 14);
 *   created stream FZ_STREAM and event FZ_EVENT (handle ids).
 * tests/fuzz/make_corpus.py writes seeds that use these addresses.
 *
 * The fake driver (the stubs below) keeps just enough state to check the
 * worker's use of it: live contexts, primary-context retains, the current
 * context, memory handles and mappings, live streams, events, modules,
 * libraries, kernels and functions, and that every device access lies in
 * one live allocation (or a module global). The checks after each input:
 *   - the handler returns 0 or -EBADMSG, and -EBADMSG comes with a reason;
 *   - async ops write no reply; a successful sync op's reply fits the 256
 *     bytes the worker gives it (daemon/worker/worker.c, op_generated());
 *   - a latched error is returned as is and the call is not executed;
 *   - the context the session believes is bound is the driver's current one
 *     (the worker skips cuCtxSetCurrent when a call names the bound context);
 *   - the session's bookkeeping matches the driver's (contexts, chunks,
 *     mapped bytes);
 *   - after lupw_release_all() nothing is left: no context, retain, handle
 *     or mapping in the driver, and (under ASan) no heap block.
 */
/* the checks are the point of a fuzz target: keep assert() in every build type */
#undef NDEBUG
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "fuzz_known_bugs.h"
#include "lupine/wire.h"
#include "worker_gen.h"
#include "worker/session.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_DEVICES 2
#define FZ_PRIMARY0 0x10000ull
#define FZ_CTX1 0x100000ull
#define FZ_A (LUP_ARENA_BASE)                      /* 4 KiB, device 0, owner 0x10000 */
#define FZ_B (LUP_ARENA_BASE + (2ull << 20))       /* 3 MiB, device 0, owner 0x10000 */
#define FZ_C (LUP_ARENA_BASE + (6ull << 20))       /* 256 B, device 1, owner 0x100000 */
#define FZ_D (LUP_ARENA_BASE + (8ull << 20))       /* 1 MiB, device 1, owner 0x100000 */
#define FZ_STREAM LUP_FIRST_HANDLE_ID
#define FZ_EVENT (LUP_FIRST_HANDLE_ID + 16)
#define FZ_LATCHED CUDA_ERROR_LAUNCH_FAILED
#define FZ_SEL_INDEX 0x3fffu
#define FZ_SEL_BIND_CTX1 0x4000u
#define FZ_SEL_LATCHED 0x8000u

/*
 * Known bugs (see fuzz_known_bugs.h):
 *   ctx-binding: lupw_lupCtxDestroy() of a context other than the bound one,
 *     and lupw_lupPrimaryCtxReset() of a device whose primary context is not
 *     the bound one, leave the driver's current context different from the
 *     one s->bound_id names.
 */

/* ---- the fake driver */

#define FAKE_CTXS (LUP_MAX_CONTEXTS + 8)
#define FAKE_HANDLES 64 /* one input creates a few at most */

enum fake_kind { FK_NONE, FK_STREAM, FK_EVENT, FK_MODULE, FK_LIBRARY, FK_KERNEL, FK_FUNCTION };

static struct fake_driver {
        const struct lupw_session *s;   /* for the device-range checks */
        unsigned long calls;            /* driver calls of any kind */
        bool ctx_live[FAKE_CTXS];
        unsigned n_ctx_live;
        unsigned primary_refs[LUP_MAX_DEVICES];
        CUcontext current;
        uint64_t next_handle;
        uint64_t handles_live;
        uint64_t maps_live;
        uint64_t mapped_bytes;
        enum fake_kind handle_kind[FAKE_HANDLES];       /* FK_NONE: free or destroyed */
} drv;

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

static bool ctx_usable(CUcontext c)
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
        const struct arena_alloc *a = arena_find(&drv.s->arena, p);
        if (a && bytes <= a->size - (p - a->addr))
                return;
        struct lup_range g;
        if (lup_rangemap_find(&drv.s->globals, p, &g) && bytes <= g.size - (p - g.base))
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

static CUresult stub_cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                 const CUmemAllocationProp *prop, unsigned long long flags)
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

static CUresult stub_cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx,
                                       size_t n, CUstream st)
{
        if (!ctx_usable(dst_ctx) || !ctx_usable(src_ctx))
                fail("cuMemcpyPeerAsync with a context that is not live");
        return copy_common(dst, src, n, st);
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

static void fill_backend(struct lupw_backend *be)
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
}

/* ---- the fake session */

static void must(bool ok, const char *what)
{
        if (!ok) {
                fprintf(stderr, "fuzz_worker_ops: setup: %s failed\n", what);
                abort();
        }
}

static void alloc_at(struct lupw_session *s, size_t size, uint64_t want)
{
        CUdeviceptr p = 0;
        must(lupw_cuMemAlloc_v2(s, &p, size) == CUDA_SUCCESS, "cuMemAlloc");
        /* the seeds in the corpus use these addresses */
        must(p == want, "placing an allocation where the corpus expects it");
}

static void handle_at(struct lupw_session *s, int kind, uint64_t id, void *real)
{
        must(real != NULL, "creating a handle");
        must(lupw_handle_fresh(s, id) == 0 && lupw_handle_put(s, kind, id, real) == CUDA_SUCCESS, "lupw_handle_put");
}

/* As worker_main() and setup_session() in daemon/worker/worker.c, without a
 * connection. */
static void session_setup(struct lupw_session *s, bool bind_ctx1)
{
        memset(&drv, 0, sizeof(drv));
        drv.s = s;
        memset(s, 0, sizeof(*s));
        s->ctl_fd = -1;
        s->fd = -1;
        strcpy(s->name, "fuzz");
        lupw_handles_init(s);
        s->n_devices = FZ_DEVICES;
        fill_backend(&s->be.fn);
        s->be.dl = s; /* any non-NULL value: lupw_release_all() tears down only a loaded backend */
        s->be.kind = LUP_BACKEND_SIM;

        /* what setup_session() in daemon/worker/worker.c does after HELLO */
        must(s->be.fn.cuDevicePrimaryCtxRetain(&s->primary[0], 0) == CUDA_SUCCESS, "primary retain");
        must(s->be.fn.cuCtxSetCurrent(s->primary[0]) == CUDA_SUCCESS, "set current");
        must(arena_init(&s->arena, LUP_ARENA_BASE, LUP_ARENA_SIZE, LUP_ARENA_GRANULE, &lupw_arena_ops, s) == 0,
             "arena_init");
        s->arena_reserved = true;

        /* what a client did before the fuzzed call */
        must(lupw_lupPrimaryCtxRetain(s, 0) == CUDA_SUCCESS, "lupPrimaryCtxRetain");
        must(lupw_bind_ctx(s, FZ_PRIMARY0) == CUDA_SUCCESS, "bind primary");
        alloc_at(s, 4096, FZ_A);
        alloc_at(s, 3u << 20, FZ_B);
        must(lupw_lupCtxCreate(s, FZ_CTX1, 0, 1) == CUDA_SUCCESS, "lupCtxCreate");
        must(lupw_bind_ctx(s, FZ_CTX1) == CUDA_SUCCESS, "bind ctx");
        alloc_at(s, 256, FZ_C);
        alloc_at(s, 1u << 20, FZ_D);
        if (!bind_ctx1)
                must(lupw_bind_ctx(s, FZ_PRIMARY0) == CUDA_SUCCESS, "bind primary again");
        CUstream st = NULL;
        CUevent ev = NULL;
        s->be.fn.cuStreamCreate(&st, 0);
        s->be.fn.cuEventCreate(&ev, 0);
        handle_at(s, LUPW_H_STREAM, FZ_STREAM, st);
        handle_at(s, LUPW_H_EVENT, FZ_EVENT, ev);
}

/* The session's view and the driver's agree. */
static void check_consistent(struct lupw_session *s)
{
        assert(s->n_ctxs >= 0 && s->n_ctxs <= (int)LUP_MAX_CONTEXTS);
        assert(drv.n_ctx_live == (unsigned)s->n_ctxs);
        for (int i = 0; i < s->n_ctxs; i++)
                assert(ctx_usable(s->ctxs[i].real));
        for (int d = 0; d < FZ_DEVICES; d++)
                assert(drv.primary_refs[d] == (s->primary[d] ? 1u : 0u));

        assert(drv.handles_live == s->n_chunks);
        assert(drv.maps_live == s->n_chunks);
        assert(drv.mapped_bytes == s->arena.mapped_bytes);

        /* The worker skips cuCtxSetCurrent when the requested context is the
         * bound one, so the bound one must really be current. */
        static int skip_binding = -1;
        if (skip_binding < 0)
                skip_binding = fuzz_known_bug("ctx-binding");
        if (s->bound_id != 0 && !skip_binding) {
                CUcontext real = NULL;
                assert(lupw_ctx(s, s->bound_id, &real) == CUDA_SUCCESS);
                if (drv.current != real) {
                        fprintf(stderr, "fuzz_worker_ops: the session's bound context 0x%llx is not the "
                                "driver's current context\n", (unsigned long long)s->bound_id);
                        abort();
                }
        }
}

static void session_teardown(struct lupw_session *s)
{
        lupw_copy_free(s);
        lupw_release_all(s);
        lupw_handles_free(s);
        lup_rangemap_free(&s->globals);
        assert(drv.n_ctx_live == 0);
        for (int d = 0; d < FZ_DEVICES; d++)
                assert(drv.primary_refs[d] == 0);
        assert(drv.handles_live == 0);
        assert(drv.maps_live == 0 && drv.mapped_bytes == 0);
        assert(s->chunks == NULL);
}

/* static: struct lupw_session is large (256 context slots, io_uring state) */
static struct lupw_session sess;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 10)
                return 0;
        uint16_t sel = lup_le16(data);
        uint64_t ctx = lup_le64(data + 2);
        const struct lupw_op *op = &lupw_ops[(sel & FZ_SEL_INDEX) % lupw_n_ops];
        if (!op->fn)
                return 0;

        struct lupw_session *s = &sess;
        session_setup(s, sel & FZ_SEL_BIND_CTX1);

        /* As op_generated() in daemon/worker/worker.c: a sync op may carry a latched
         * async failure; an async op always starts from CUDA_SUCCESS. */
        const CUresult start = (op->sync && (sel & FZ_SEL_LATCHED)) ? FZ_LATCHED : CUDA_SUCCESS;
        CUresult status = start;
        uint8_t outbuf[256];
        struct lup_wr out = lup_wr_init(outbuf, sizeof(outbuf));
        struct lup_rd rd = lup_rd_init(data + 10, size - 10);
        const unsigned long calls_before = drv.calls;
        const size_t allocs_before = s->arena.n_allocs;

        int rc = op->fn(s, ctx, &rd, &out, &status);

        assert(rc == 0 || rc == -EBADMSG);
        assert(out.len <= out.cap);
        if (rc < 0) {
                assert(s->why != NULL); /* the worker closes the connection with this reason */
        } else if (!op->sync) {
                assert(out.len == 0); /* async ops have no reply */
        } else if (status == CUDA_SUCCESS) {
                assert(out.err == 0); /* else the worker drops the session: "reply overflow" */
        }
        if (start != CUDA_SUCCESS) {
                /* validated, but not executed */
                if (rc == 0)
                        assert(status == start);
                assert(out.len == 0);
                assert(drv.calls == calls_before);
                assert(s->arena.n_allocs == allocs_before);
        }
        check_consistent(s);
        session_teardown(s);
        return 0;
}
