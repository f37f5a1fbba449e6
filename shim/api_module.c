/* SPDX-License-Identifier: MIT */
/*
 * Module and library loading variants, names, globals and the cached
 * function/kernel queries. The images themselves travel as blobs
 * (lupc_upload_image); a load with JIT options goes as a JIT request
 * (load_jit; docs/jit.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.h"
#include "funcs.h"
#include "image.h"
#include "jit.h"
#include "log.h"
#include "shim_gen.h"
#include "u64map.h"

#define EXPORT __attribute__((visibility("default")))

#undef cuModuleGetGlobal
#undef cuLibraryGetGlobal

/*
 * A load with JIT options: the image and the options go to the worker in
 * one JIT request (common/jit_codec.h), whose logs, wall time and threads
 * per block come back into the caller's buffers and values (shim/jit.c).
 * The worker keeps the answer under the request's blob id until it is
 * read. library: cuLibraryLoadData's jitOptions, else cuModuleLoadDataEx.
 */
static CUresult load_jit(void *ret_handle, bool library, const void *image, unsigned n, CUjit_option *options,
                         void **values)
{
        struct lupc_jit_opts o;
        struct lup_jit_req req = { 0 };
        int kind;
        const uint8_t *start;
        size_t size;

        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        CUresult r = lupc_jit_opts(n, options, values, false, &o, req.opts, &req.n_opts);
        if (r != CUDA_SUCCESS)
                return r;
        if (lup_image_measure(image, SIZE_MAX, &kind, &start, &size) < 0 || size > LUP_MAX_BLOB)
                return CUDA_ERROR_INVALID_IMAGE;
        struct lup_jit_input in = { .type = 0, .data = start, .size = size };
        req.n_inputs = 1;
        req.inputs = &in;
        uint64_t blob = 0;
        /* NOT_FOUND: a restore came between the upload and the load */
        r = CUDA_ERROR_NOT_FOUND;
        for (int attempt = 0; attempt < 2 && r == CUDA_ERROR_NOT_FOUND; attempt++) {
                if ((r = lupc_jit_upload(&req, &blob)) != CUDA_SUCCESS)
                        return r;
                r = library ? lupc_send_lupLibraryLoadJit(ret_handle, blob)
                            : lupc_send_lupModuleLoadJit(ret_handle, blob);
        }
        /* the logs are the caller's also when the load failed */
        CUresult a = lupc_jit_answer(blob, &o);
        (void)lupc_send_lupJitDrop(blob);
        if (r == CUDA_SUCCESS && a != CUDA_SUCCESS && a != CUDA_ERROR_NOT_FOUND)
                lup_warn("lupine: the JIT logs of a module load could not be read (error %d)", (int)a);
        return r;
}

EXPORT CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                           CUjit_option *options, void **optionValues)
{
        if (numOptions && (!options || !optionValues))
                return CUDA_ERROR_INVALID_VALUE;
        if (numOptions == 0)
                return cuModuleLoadData(module, image);
        if (!module || !image)
                return CUDA_ERROR_INVALID_VALUE;
        return load_jit(module, false, image, numOptions, options, optionValues);
}

EXPORT CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
        return cuModuleLoadData(module, fatCubin);
}

/* Reads a whole file (a cubin, PTX or fatbin) for the load-from-file calls. */
static CUresult read_file(const char *path, uint8_t **ret)
{
        struct stat st;
        if (!path)
                return CUDA_ERROR_INVALID_VALUE;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return CUDA_ERROR_FILE_NOT_FOUND;
        if (fstat(fd, &st) < 0 || st.st_size <= 0 || (uint64_t)st.st_size > LUP_MAX_BLOB) {
                close(fd);
                return CUDA_ERROR_INVALID_IMAGE;
        }
        /* one extra NUL so PTX text is terminated */
        uint8_t *buf = calloc(1, (size_t)st.st_size + 1);
        if (!buf) {
                close(fd);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        size_t got = 0;
        while (got < (size_t)st.st_size) {
                ssize_t k = read(fd, buf + got, (size_t)st.st_size - got);
                if (k <= 0) {
                        if (k < 0 && errno == EINTR)
                                continue;
                        break;
                }
                got += (size_t)k;
        }
        close(fd);
        if (got != (size_t)st.st_size) {
                free(buf);
                return CUDA_ERROR_FILE_NOT_FOUND;
        }
        *ret = buf;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuModuleLoad(CUmodule *module, const char *fname)
{
        uint8_t *img;
        if (!module)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = read_file(fname, &img);
        if (r != CUDA_SUCCESS)
                return r;
        r = cuModuleLoadData(module, img);
        free(img);
        return r;
}

/*
 * Library options are hints the worker's driver does not need (the image is
 * copied to the server anyway), but they are checked like the driver does:
 * a known option, and no "binary is preserved" for a file. The values array
 * may be NULL when every option is "binary is preserved", which takes no
 * value: cuBLASLt loads its kernels that way, and the driver accepts it.
 */
static bool library_options_invalid(unsigned int n, const CUlibraryOption *opts, void *const *values, bool from_file)
{
        if (n && !opts)
                return true;
        for (unsigned int i = 0; i < n; i++) {
                if ((unsigned)opts[i] >= CU_LIBRARY_NUM_OPTIONS ||
                    (from_file && opts[i] == CU_LIBRARY_BINARY_IS_PRESERVED))
                        return true;
                if (opts[i] != CU_LIBRARY_BINARY_IS_PRESERVED && !values)
                        return true;
        }
        return false;
}

/* Libraries belong to no context: with several servers each has the
 * library (and its kernels, cuLibraryGetKernel) under the same handle, so
 * a kernel runs wherever the current context is. (Should a restore come
 * between one server's JIT upload and its load, that server's load takes
 * more ids than the others': its handle then differs, and its kernels are
 * refused there, never run wrong.) */
struct library_load {
        CUlibrary *library;
        const void *code;
        unsigned int n_jit;
        CUjit_option *jit_options;
        void **jit_values;
};

static CUresult library_load_one(void *arg)
{
        const struct library_load *a = arg;
        if (a->n_jit)
                return load_jit(a->library, true, a->code, a->n_jit, a->jit_options, a->jit_values);
        return lupc_send_lupLibraryLoad(a->library, a->code);
}

struct library_kernel {
        CUkernel *kernel;
        CUlibrary library;
        const char *name;
};

static CUresult library_kernel_one(void *arg)
{
        const struct library_kernel *a = arg;
        return lupc_send_cuLibraryGetKernel(a->kernel, a->library, a->name);
}

static CUresult library_unload_one(void *arg)
{
        return lupc_send_cuLibraryUnload(*(CUlibrary *)arg);
}

EXPORT CUresult CUDAAPI cuLibraryUnload(CUlibrary library)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        return lupc_each_server(library_unload_one, &library);
}

EXPORT CUresult CUDAAPI cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                          void **jitOptionsValues, unsigned int numJitOptions,
                                          CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                          unsigned int numLibraryOptions)
{
        if (!library || !code || (numJitOptions && (!jitOptions || !jitOptionsValues)) ||
            library_options_invalid(numLibraryOptions, libraryOptions, libraryOptionValues, false))
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (lupc_ctx_current() == 0) {
                /* libraries are context-independent; the worker loads into the
                 * primary context of device 0 when none is current */
                CUcontext c;
                CUresult r = cuDevicePrimaryCtxRetain(&c, 0);
                if (r != CUDA_SUCCESS)
                        return r;
                lupc_ctx_set_current((uint64_t)(uintptr_t)c);
        }
        struct library_load a = { library, code, numJitOptions, jitOptions, jitOptionsValues };
        return lupc_each_server(library_load_one, &a);
}

EXPORT CUresult CUDAAPI cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, CUjit_option *jitOptions,
                                              void **jitOptionsValues, unsigned int numJitOptions,
                                              CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                              unsigned int numLibraryOptions)
{
        uint8_t *img;
        if (!library || library_options_invalid(numLibraryOptions, libraryOptions, libraryOptionValues, true))
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = read_file(fileName, &img);
        if (r != CUDA_SUCCESS)
                return r;
        r = cuLibraryLoadData(library, img, jitOptions, jitOptionsValues, numJitOptions, libraryOptions,
                              libraryOptionValues, numLibraryOptions);
        free(img);
        return r;
}

EXPORT CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
        CUresult r = lupc_send_cuModuleGetFunction(hfunc, hmod, name);
        if (r == CUDA_SUCCESS)
                lupc_func_set_name((uint64_t)(uintptr_t)*hfunc, name);
        return r;
}

EXPORT CUresult CUDAAPI cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
        CUresult r = lupc_each_server(library_kernel_one, &(struct library_kernel){ pKernel, library, name });
        if (r == CUDA_SUCCESS) {
                lupc_func_set_name((uint64_t)(uintptr_t)*pKernel, name);
        } else if (lup_trace_level() >= 1) {
                lup_tracef("cuLibraryGetKernel(library %p, \"%.80s\") -> error %d", (void *)library, name ? name : "(null)",
                           (int)r);
        }
        return r;
}

EXPORT CUresult CUDAAPI cuFuncGetName(const char **name, CUfunction hfunc)
{
        if (!name || !hfunc)
                return CUDA_ERROR_INVALID_VALUE;
        *name = lupc_func_name((uint64_t)(uintptr_t)hfunc);
        return *name ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

EXPORT CUresult CUDAAPI cuKernelGetName(const char **name, CUkernel hfunc)
{
        return cuFuncGetName(name, (CUfunction)hfunc);
}

/* Module globals live where the driver put them, outside the arena: the
 * shadow learns them so copies to and from them are checked like any other. */
static CUresult note_global(CUresult r, CUdeviceptr *dptr, size_t *bytes)
{
        if (r == CUDA_SUCCESS) {
                struct lupc_alloc_info a;
                struct lupc_ctx_info ci;
                uint64_t ctx = lupc_ctx_current();
                if (!lupc_shadow_find(*dptr, &a))
                        lupc_shadow_add(*dptr, *bytes, ctx, ctx && lupc_ctx_lookup(ctx, &ci) ? ci.device : 0);
        }
        return r;
}

EXPORT CUresult CUDAAPI cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
        CUdeviceptr p = 0;
        size_t n = 0;
        CUresult r = note_global(lupc_send_cuModuleGetGlobal_v2(&p, &n, hmod, name), &p, &n);
        if (r == CUDA_SUCCESS) {
                if (dptr)
                        *dptr = p;
                if (bytes)
                        *bytes = n;
        }
        return r;
}

EXPORT CUresult CUDAAPI cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name)
{
        CUdeviceptr p = 0;
        size_t n = 0;
        CUresult r = note_global(lupc_send_cuLibraryGetGlobal(&p, &n, library, name), &p, &n);
        if (r == CUDA_SUCCESS) {
                if (dptr)
                        *dptr = p;
                if (bytes)
                        *bytes = n;
        }
        return r;
}

/* lupc_send_cuLibraryGetKernel notes every kernel handle it hands out */
static bool is_kernel(uint64_t h)
{
        return lupc_handle_kind(h, NULL) == LUPC_H_KERNEL;
}

/* A library kernel passed as a function: launches and occupancy take it,
 * but the driver (580) answers CUDA_ERROR_INVALID_HANDLE to the function
 * attribute calls, and so does lupine. */
EXPORT CUresult CUDAAPI cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
        if (!pi || !hfunc)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (is_kernel((uint64_t)(uintptr_t)hfunc))
                return CUDA_ERROR_INVALID_HANDLE;
        return lupc_func_attr((uint64_t)(uintptr_t)hfunc, (int)attrib, pi);
}

EXPORT CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
        if (hfunc && is_kernel((uint64_t)(uintptr_t)hfunc))
                return CUDA_ERROR_INVALID_HANDLE;
        CUresult r = lupc_send_cuFuncSetAttribute(hfunc, attrib, value);
        if (r == CUDA_SUCCESS)
                lupc_func_invalidate((uint64_t)(uintptr_t)hfunc);
        return r;
}

/* ---- kernels: function per context, attributes per device */

struct kernel_cache {
        uint64_t fn_ctx[8], fn_id[8];
        int n_fn;
        int32_t attr[LUP_MAX_DEVICES][CU_FUNC_ATTRIBUTE_MAX];
        uint8_t have[LUP_MAX_DEVICES][CU_FUNC_ATTRIBUTE_MAX];
};

static pthread_mutex_t klock = PTHREAD_MUTEX_INITIALIZER;
static struct lup_u64map kernels = { .limit = LUP_MAX_HANDLES };

static struct kernel_cache *kernel_locked(uint64_t k)
{
        uint64_t v;
        if (lup_u64map_get(&kernels, k, &v))
                return (struct kernel_cache *)(uintptr_t)v;
        struct kernel_cache *kc = calloc(1, sizeof(*kc));
        if (kc && lup_u64map_put(&kernels, k, (uint64_t)(uintptr_t)kc) < 0) {
                free(kc);
                kc = NULL;
        }
        return kc;
}

EXPORT CUresult CUDAAPI cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
        uint64_t k = (uint64_t)(uintptr_t)kernel, ctx = lupc_ctx_current();
        if (!pFunc || !kernel)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&klock);
        struct kernel_cache *kc = kernel_locked(k);
        for (int i = 0; kc && i < kc->n_fn; i++) {
                if (kc->fn_ctx[i] == ctx) {
                        *pFunc = (CUfunction)(uintptr_t)kc->fn_id[i];
                        pthread_mutex_unlock(&klock);
                        return CUDA_SUCCESS;
                }
        }
        pthread_mutex_unlock(&klock);
        CUresult r = lupc_send_cuKernelGetFunction(pFunc, kernel);
        if (r != CUDA_SUCCESS)
                return r;
        const char *name = lupc_func_name(k);
        if (name)
                lupc_func_set_name((uint64_t)(uintptr_t)*pFunc, name);
        pthread_mutex_lock(&klock);
        if (kc && kc->n_fn < 8) {
                kc->fn_ctx[kc->n_fn] = ctx;
                kc->fn_id[kc->n_fn++] = (uint64_t)(uintptr_t)*pFunc;
        }
        pthread_mutex_unlock(&klock);
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel, CUdevice dev)
{
        if (!pi || !kernel || (int)attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX || dev < 0 || dev >= (int)LUP_MAX_DEVICES)
                return CUDA_ERROR_INVALID_VALUE;
        uint64_t k = (uint64_t)(uintptr_t)kernel;
        pthread_mutex_lock(&klock);
        struct kernel_cache *kc = kernel_locked(k);
        if (kc && kc->have[dev][attrib]) {
                *pi = kc->attr[dev][attrib];
                pthread_mutex_unlock(&klock);
                return CUDA_SUCCESS;
        }
        pthread_mutex_unlock(&klock);
        int v = 0;
        CUresult r = lupc_send_cuKernelGetAttribute(&v, attrib, kernel, dev);
        if (r != CUDA_SUCCESS)
                return r;
        pthread_mutex_lock(&klock);
        if (kc) {
                kc->attr[dev][attrib] = v;
                kc->have[dev][attrib] = 1;
        }
        pthread_mutex_unlock(&klock);
        *pi = v;
        return CUDA_SUCCESS;
}

/* One attribute can move others (shared memory vs. threads): forget every
 * cached answer about kernel k, its functions, and k used as a function. */
static void kernel_invalidate(uint64_t k)
{
        uint64_t v;

        pthread_mutex_lock(&klock);
        struct kernel_cache *kc = lup_u64map_get(&kernels, k, &v) ? (struct kernel_cache *)(uintptr_t)v : NULL;
        if (kc)
                memset(kc->have, 0, sizeof(kc->have));
        for (int i = 0; kc && i < kc->n_fn; i++)
                lupc_func_invalidate(kc->fn_id[i]);
        pthread_mutex_unlock(&klock);
        lupc_func_invalidate(k);
}

EXPORT CUresult CUDAAPI cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel, CUdevice dev)
{
        CUresult r = lupc_send_cuKernelSetAttribute(attrib, val, kernel, dev);
        if (r == CUDA_SUCCESS)
                kernel_invalidate((uint64_t)(uintptr_t)kernel);
        return r;
}
