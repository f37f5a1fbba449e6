/* SPDX-License-Identifier: MIT */
/*
 * Libraries (cuLibrary*) and their kernels (cuKernel*): the
 * context-independent way to load code, since CUDA 12. A library holds one
 * module that no context owns; its variables live on the device current
 * at load time (device 0 without one), and its kernels launch from any
 * context. A CUkernel is the same object as the module's CUfunction, with
 * its own handle tag.
 */
#include <stdlib.h>
#include <string.h>

#include "sim_module.h"

static CUlibrary library_handle(const struct sim_library *l)
{
        return (CUlibrary)(uintptr_t)(SIM_TAG_LIBRARY | l->id);
}

static struct sim_library *library_lookup(struct sim_driver *drv, CUlibrary h)
{
        return sim_handle_get(&drv->libraries, (uint64_t)(uintptr_t)h, SIM_TAG_LIBRARY);
}

/* "Binary is preserved" takes no value: like the driver (cuBLASLt relies on
 * it), the values array may be NULL when that is the only option. */
static CUresult library_options(unsigned numJit, CUjit_option *jit, void **jitValues,
                                unsigned numLib, CUlibraryOption *lib, void **libValues, bool from_file)
{
        CUresult r = sim_jit_options(numJit, jit, jitValues);

        if (r != CUDA_SUCCESS)
                return r;
        if (numLib == 0)
                return CUDA_SUCCESS;
        if (numLib > SIM_MAX_JIT_OPTIONS || !lib)
                return CUDA_ERROR_INVALID_VALUE;
        for (unsigned i = 0; i < numLib; i++)
                if ((unsigned)lib[i] >= CU_LIBRARY_NUM_OPTIONS ||
                    (from_file && lib[i] == CU_LIBRARY_BINARY_IS_PRESERVED) ||
                    (lib[i] != CU_LIBRARY_BINARY_IS_PRESERVED && !libValues))
                        return CUDA_ERROR_INVALID_VALUE;
        return CUDA_SUCCESS;
}

/* What cuLibraryLoadData and cuLibraryLoadFromFile share: the image is
 * code, or the file at path, whichever is not NULL. */
static CUresult library_load(CUlibrary *library, const void *code, const char *path,
                             unsigned numJit, CUjit_option *jit, void **jitValues,
                             unsigned numLib, CUlibraryOption *lib, void **libValues)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_ptx_module *ptx;
        struct sim_library *l;
        struct sim_module *m;
        struct sim_ctx *c;
        CUresult r;
        int dev = 0;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!library || (!code && !path))
                return CUDA_ERROR_INVALID_VALUE;
        unsigned cap = sim_jit_error_cap(numJit, jit, jitValues);
        r = library_options(numJit, jit, jitValues, numLib, lib, libValues, path != NULL);
        if (r != CUDA_SUCCESS)
                return r;
        r = path ? sim_module_parse_file(path, &ptx) : sim_module_parse(code, 0, false, &ptx);
        sim_jit_error(numJit, jit, jitValues, cap, r);
        if (r != CUDA_SUCCESS)
                return r;
        l = calloc(1, sizeof(*l));
        if (!l) {
                sim_ptx_free(ptx);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        sim_wrlock(drv);
        if (sim_ctx_current(drv, &c, NULL) == CUDA_SUCCESS)
                dev = c->dev;
        r = sim_module_create(drv, ptx, NULL, dev, l, &m);
        if (r != CUDA_SUCCESS)
                goto out_free;
        l->mod = m;
        if (sim_handle_register(drv, &drv->libraries, l, &l->id) < 0) {
                sim_module_destroy(drv, m);
                r = CUDA_ERROR_OUT_OF_MEMORY;
                goto out_free;
        }
        sim_unlock(drv);
        *library = library_handle(l);
        return CUDA_SUCCESS;

out_free:
        sim_unlock(drv);
        free(l);
        return r;
}

SIM_API CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                   void **jitOptionsValues, unsigned int numJitOptions,
                                   CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                   unsigned int numLibraryOptions)
{
        return library_load(library, code, NULL, numJitOptions, jitOptions, jitOptionsValues,
                            numLibraryOptions, libraryOptions, libraryOptionValues);
}

SIM_API CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, CUjit_option *jitOptions,
                                       void **jitOptionsValues, unsigned int numJitOptions,
                                       CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                       unsigned int numLibraryOptions)
{
        return library_load(library, NULL, fileName, numJitOptions, jitOptions, jitOptionsValues,
                            numLibraryOptions, libraryOptions, libraryOptionValues);
}

SIM_API CUresult cuLibraryUnload(CUlibrary library)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_library *l;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_wrlock(drv);
        l = sim_handle_take(&drv->libraries, (uint64_t)(uintptr_t)library, SIM_TAG_LIBRARY);
        if (l)
                sim_module_destroy(drv, l->mod);
        sim_unlock(drv);
        free(l);
        return l ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* The library behind h, with the lock held shared; NULL (and unlocked)
 * with *ret_err set otherwise. */
static struct sim_library *library_enter(CUlibrary h, struct sim_driver **ret_drv, CUresult *ret_err)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_library *l;

        if (!drv) {
                *ret_err = CUDA_ERROR_NOT_INITIALIZED;
                return NULL;
        }
        sim_rdlock(drv);
        l = library_lookup(drv, h);
        if (!l) {
                sim_unlock(drv);
                *ret_err = CUDA_ERROR_INVALID_HANDLE;
                return NULL;
        }
        *ret_drv = drv;
        return l;
}

SIM_API CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
        struct sim_driver *drv;
        struct sim_library *l;
        CUresult r = CUDA_ERROR_NOT_FOUND;

        if (!pKernel || !name)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        l = library_enter(library, &drv, &r);
        if (!l)
                return r;
        for (size_t i = 0; i < l->mod->nfuncs; i++)
                if (strcmp(l->mod->funcs[i].entry->name, name) == 0) {
                        *pKernel = sim_kernel_handle(&l->mod->funcs[i]);
                        r = CUDA_SUCCESS;
                        break;
                }
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuLibraryGetKernelCount(unsigned int *count, CUlibrary lib)
{
        struct sim_driver *drv;
        struct sim_library *l;
        CUresult r = CUDA_SUCCESS;

        if (!count)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        l = library_enter(lib, &drv, &r);
        if (!l)
                return r;
        *count = (unsigned)l->mod->nfuncs;
        sim_unlock(drv);
        return CUDA_SUCCESS;
}

SIM_API CUresult cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int numKernels, CUlibrary lib)
{
        struct sim_driver *drv;
        struct sim_library *l;
        CUresult r = CUDA_SUCCESS;

        if (!kernels && numKernels)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        l = library_enter(lib, &drv, &r);
        if (!l)
                return r;
        for (size_t i = 0; i < l->mod->nfuncs && i < numKernels; i++)
                kernels[i] = sim_kernel_handle(&l->mod->funcs[i]);
        sim_unlock(drv);
        return CUDA_SUCCESS;
}

/* The module for the current context: there is one, shared by all. */
SIM_API CUresult cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
        struct sim_driver *drv;
        struct sim_library *l;
        CUresult r = CUDA_SUCCESS;

        if (!pMod)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        l = library_enter(library, &drv, &r);
        if (!l)
                return r;
        r = sim_ctx_current(drv, NULL, NULL);
        if (r == CUDA_SUCCESS)
                *pMod = sim_module_handle(l->mod);
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name)
{
        struct sim_driver *drv;
        struct sim_library *l;
        struct sim_range *g;
        CUresult r = CUDA_SUCCESS;

        if (!name)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        l = library_enter(library, &drv, &r);
        if (!l)
                return r;
        g = sim_module_global(l->mod, name);
        if (g && dptr)
                *dptr = (CUdeviceptr)g->start;
        if (g && bytes)
                *bytes = g->size;
        sim_unlock(drv);
        return g ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* ---- kernels ---- */

static struct sim_func *kernel_enter(CUkernel h, bool exclusive, struct sim_driver **ret_drv,
                                     CUresult *ret_err)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_func *f;

        if (!drv) {
                *ret_err = CUDA_ERROR_NOT_INITIALIZED;
                return NULL;
        }
        if (exclusive)
                sim_wrlock(drv);
        else
                sim_rdlock(drv);
        f = sim_kernel_lookup(drv, h);
        if (!f) {
                sim_unlock(drv);
                *ret_err = CUDA_ERROR_INVALID_HANDLE;
                return NULL;
        }
        *ret_drv = drv;
        return f;
}

SIM_API CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
        struct sim_driver *drv;
        struct sim_func *f;
        CUresult r = CUDA_SUCCESS;

        if (!pFunc)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        f = kernel_enter(kernel, false, &drv, &r);
        if (!f)
                return r;
        r = sim_ctx_current(drv, NULL, NULL);
        if (r == CUDA_SUCCESS)
                *pFunc = sim_func_handle(f);
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuKernelGetLibrary(CUlibrary *pLib, CUkernel kernel)
{
        struct sim_driver *drv;
        struct sim_func *f;
        CUresult r = CUDA_SUCCESS;

        if (!pLib)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        f = kernel_enter(kernel, false, &drv, &r);
        if (!f)
                return r;
        *pLib = library_handle(f->mod->lib);
        sim_unlock(drv);
        return CUDA_SUCCESS;
}

/* Every device is the same, so the attributes are per kernel. */
SIM_API CUresult cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel, CUdevice dev)
{
        struct sim_driver *drv;
        struct sim_func *f;
        CUresult r = CUDA_SUCCESS;

        if (!pi)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        f = kernel_enter(kernel, false, &drv, &r);
        if (!f)
                return r;
        r = sim_device_at(drv, dev) ? sim_func_get_attr(f, attrib, pi) : CUDA_ERROR_INVALID_DEVICE;
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel, CUdevice dev)
{
        struct sim_driver *drv;
        struct sim_func *f;
        CUresult r = CUDA_SUCCESS;

        f = kernel_enter(kernel, true, &drv, &r);
        if (!f)
                return r;
        r = sim_device_at(drv, dev) ? sim_func_set_attr(f, attrib, val) : CUDA_ERROR_INVALID_DEVICE;
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuKernelGetName(const char **name, CUkernel hfunc)
{
        struct sim_driver *drv;
        struct sim_func *f;
        CUresult r = CUDA_SUCCESS;

        if (!name)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        f = kernel_enter(hfunc, false, &drv, &r);
        if (!f)
                return r;
        *name = f->entry->name;
        sim_unlock(drv);
        return CUDA_SUCCESS;
}

SIM_API CUresult cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset,
                                      size_t *paramSize)
{
        struct sim_driver *drv;
        struct sim_func *f;
        CUresult r = CUDA_SUCCESS;

        f = kernel_enter(kernel, false, &drv, &r);
        if (!f)
                return r;
        r = sim_func_param_info(f, paramIndex, paramOffset, paramSize);
        sim_unlock(drv);
        return r;
}
