/* SPDX-License-Identifier: MIT */
/*
 * Modules and functions: cuModule* and cuFunc*.
 *
 * A module is loaded from PTX, directly or found inside a fatbin (see
 * sim_image.c); the sim cannot run SASS, so a cubin loads as
 * CUDA_ERROR_NO_BINARY_FOR_GPU. Bytes that are no image at all are
 * CUDA_ERROR_INVALID_IMAGE; PTX that does not parse, or targets a newer
 * GPU, is CUDA_ERROR_INVALID_PTX (checked against an H200's driver). Each module-scope variable gets its own
 * device range, initialised from the PTX, which cuModuleGetGlobal returns
 * and kernels (their twins) read. Loading parses without the lock, then
 * creates the variables and registers everything under one exclusive
 * hold, so a module is either wholly there or not at all.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim_module.h"

/* The newest PTX ISA a CUDA 13.0 driver JITs. */
#define SIM_PTX_ISA_MAJOR 9
#define SIM_PTX_ISA_MINOR 0
#define SIM_DEVICE_SM     90

CUmodule sim_module_handle(const struct sim_module *m)
{
        return (CUmodule)(uintptr_t)(SIM_TAG_MODULE | m->id);
}

CUfunction sim_func_handle(const struct sim_func *f)
{
        return (CUfunction)(uintptr_t)(SIM_TAG_FUNC | f->id);
}

CUkernel sim_kernel_handle(const struct sim_func *f)
{
        return (CUkernel)(uintptr_t)(SIM_TAG_KERNEL | f->id);
}

struct sim_module *sim_module_lookup(struct sim_driver *drv, CUmodule h)
{
        return sim_handle_get(&drv->modules, (uint64_t)(uintptr_t)h, SIM_TAG_MODULE);
}

struct sim_func *sim_func_lookup(struct sim_driver *drv, CUfunction h)
{
        uint64_t id = sim_handle_id((uint64_t)(uintptr_t)h, SIM_TAG_FUNC);

        if (!id)
                return sim_kernel_lookup(drv, (CUkernel)h);
        return sim_svec_get(&drv->functions, id);
}

struct sim_func *sim_kernel_lookup(struct sim_driver *drv, CUkernel h)
{
        struct sim_func *f = sim_handle_get(&drv->functions, (uint64_t)(uintptr_t)h, SIM_TAG_KERNEL);

        return f && f->mod->lib ? f : NULL;
}

struct sim_range *sim_module_global(const struct sim_module *m, const char *name)
{
        for (size_t i = 0; i < m->ptx->nglobals; i++)
                if (strcmp(m->ptx->globals[i].name, name) == 0)
                        return m->globals[i];
        return NULL;
}

static CUresult parse_result(enum sim_image_result res)
{
        return res == SIM_IMAGE_NO_BINARY ? CUDA_ERROR_NO_BINARY_FOR_GPU : CUDA_ERROR_INVALID_IMAGE;
}

CUresult sim_module_parse(const void *image, size_t size, bool sized, struct sim_ptx_module **ret)
{
        enum sim_image_result res;
        struct sim_ptx_module *m;
        const char *text;
        size_t len;
        int e;

        res = sized ? sim_image_find_ptx_sized(image, size, &text, &len)
                    : sim_image_find_ptx(image, SIM_MAX_IMAGE_BYTES, &text, &len);
        if (res != SIM_IMAGE_OK)
                return parse_result(res);
        /* Text that starts like PTX but does not parse is what the
         * driver's JIT rejects: INVALID_PTX, as a real driver answers. */
        e = sim_ptx_parse(text, len, &m);
        if (e == -ENOMEM)
                return CUDA_ERROR_OUT_OF_MEMORY;
        if (e < 0)
                return CUDA_ERROR_INVALID_PTX;
        if (m->version_major > SIM_PTX_ISA_MAJOR ||
            (m->version_major == SIM_PTX_ISA_MAJOR && m->version_minor > SIM_PTX_ISA_MINOR)) {
                sim_ptx_free(m);
                return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
        }
        if (m->target_sm > SIM_DEVICE_SM) {
                sim_ptx_free(m);
                return CUDA_ERROR_INVALID_PTX;  /* for a newer GPU: ptxas refuses it */
        }
        *ret = m;
        return CUDA_SUCCESS;
}

CUresult sim_module_parse_file(const char *path, struct sim_ptx_module **ret)
{
        struct stat st;
        size_t got = 0;
        CUresult r;
        char *buf;
        int fd;

        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_FILE_NOT_FOUND;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                close(fd);
                return CUDA_ERROR_FILE_NOT_FOUND;
        }
        if (st.st_size <= 0 || (unsigned long long)st.st_size > SIM_MAX_IMAGE_BYTES) {
                close(fd);
                return CUDA_ERROR_INVALID_IMAGE;
        }
        buf = malloc((size_t)st.st_size + 1);
        if (!buf) {
                close(fd);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        while (got < (size_t)st.st_size) {
                ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                got += (size_t)n;
        }
        close(fd);
        buf[got] = '\0';
        r = got == 0 ? CUDA_ERROR_INVALID_IMAGE : sim_module_parse(buf, got, true, ret);
        free(buf);
        return r;
}

CUresult sim_jit_options(unsigned n, CUjit_option *options, void **values)
{
        if (n == 0)
                return CUDA_SUCCESS;
        if (n > SIM_MAX_JIT_OPTIONS || !options || !values)
                return CUDA_ERROR_INVALID_VALUE;
        for (unsigned i = 0; i < n; i++)
                if ((unsigned)options[i] >= CU_JIT_NUM_OPTIONS)
                        return CUDA_ERROR_INVALID_VALUE;
        /* There is nothing to log: hand back empty logs. */
        for (unsigned i = 0; i < n; i++) {
                CUjit_option size_opt;

                if (options[i] == CU_JIT_INFO_LOG_BUFFER)
                        size_opt = CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES;
                else if (options[i] == CU_JIT_ERROR_LOG_BUFFER)
                        size_opt = CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
                else
                        continue;
                for (unsigned j = 0; j < n; j++)
                        if (options[j] == size_opt && (uintptr_t)values[j] > 0 && values[i])
                                *(char *)values[i] = '\0';
        }
        for (unsigned i = 0; i < n; i++)
                if (options[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES ||
                    options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
                        values[i] = (void *)(uintptr_t)0;
        return CUDA_SUCCESS;
}

unsigned sim_jit_error_cap(unsigned n, CUjit_option *options, void **values)
{
        for (unsigned i = 0; options && values && i < n && n <= SIM_MAX_JIT_OPTIONS; i++)
                if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
                        return (unsigned)(uintptr_t)values[i];
        return 0;
}

void sim_jit_error(unsigned n, CUjit_option *options, void **values, unsigned cap, CUresult r)
{
        char *log = NULL;
        int at = -1;

        if (r == CUDA_SUCCESS || !options || !values || cap == 0 || n > SIM_MAX_JIT_OPTIONS)
                return;
        for (unsigned i = 0; i < n; i++) {
                if (options[i] == CU_JIT_ERROR_LOG_BUFFER)
                        log = values[i];
                else if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
                        at = (int)i;
        }
        if (!log || at < 0)
                return;
        int k = snprintf(log, cap, "sim: the image does not load (error %d)", (int)r);
        size_t len = k < 0 ? 0 : (size_t)k < cap ? (size_t)k : cap - 1;
        values[at] = (void *)(uintptr_t)(len ? len + 1 : 0);
}

void sim_module_destroy(struct sim_driver *drv, struct sim_module *m)
{
        if (!m)
                return;
        for (size_t i = 0; i < m->nfuncs; i++)
                if (m->funcs[i].id)
                        (void)sim_svec_remove(&drv->functions, m->funcs[i].id);
        if (m->id)
                (void)sim_svec_remove(&drv->modules, m->id);
        for (size_t i = 0; m->globals && i < m->ptx->nglobals; i++)
                sim_range_destroy(drv, m->globals[i]);
        free(m->globals);
        free(m->funcs);
        sim_ptx_free(m->ptx);
        free(m);
}

CUresult sim_module_create(struct sim_driver *drv, struct sim_ptx_module *ptx, CUcontext ctx, int dev,
                           struct sim_library *lib, struct sim_module **ret)
{
        struct sim_module *m = calloc(1, sizeof(*m));
        CUresult r = CUDA_ERROR_OUT_OF_MEMORY;

        if (!m) {
                sim_ptx_free(ptx);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        m->ptx = ptx;
        m->ctx = ctx;
        m->lib = lib;
        m->dev = dev;
        m->funcs = calloc(ptx->nentries ? ptx->nentries : 1, sizeof(*m->funcs));
        m->globals = calloc(ptx->nglobals ? ptx->nglobals : 1, sizeof(*m->globals));
        if (!m->funcs || !m->globals)
                goto out_destroy;

        for (size_t i = 0; i < ptx->nglobals; i++) {
                const struct sim_ptx_global *g = &ptx->globals[i];

                r = sim_range_create(drv, SIM_RANGE_GLOBAL, ctx, dev, g->size, &m->globals[i]);
                if (r != CUDA_SUCCESS)
                        goto out_destroy;
                if (g->init_len)
                        memcpy((void *)m->globals[i]->start, g->init, g->init_len);
        }

        /* Ids stay 0 until registered: that tells sim_module_destroy
         * what to unregister. */
        if (sim_handle_register(drv, &drv->modules, m, &m->id) < 0) {
                r = CUDA_ERROR_OUT_OF_MEMORY;
                goto out_destroy;
        }
        for (size_t i = 0; i < ptx->nentries; i++) {
                struct sim_func *f = &m->funcs[i];

                f->mod = m;
                f->entry = &ptx->entries[i];
                f->twin = sim_twin_find(ptx, f->entry);
                f->max_dyn_smem = SIM_SMEM_PER_BLOCK - (int)f->entry->static_smem;
                if (f->max_dyn_smem < 0)
                        f->max_dyn_smem = 0;
                f->carveout = -1;
                if (sim_handle_register(drv, &drv->functions, f, &f->id) < 0) {
                        r = CUDA_ERROR_OUT_OF_MEMORY;
                        goto out_destroy;
                }
                m->nfuncs = i + 1;
        }
        *ret = m;
        return CUDA_SUCCESS;

out_destroy:
        sim_module_destroy(drv, m);
        return r;
}

void sim_module_unload_ctx(struct sim_driver *drv, CUcontext ctx)
{
        for (size_t i = drv->modules.n; i-- > 0;) {
                struct sim_module *m = drv->modules.items[i].obj;

                if (m->ctx == ctx && !m->lib) {
                        sim_module_destroy(drv, m);
                        i = drv->modules.n;     /* the table moved under us */
                }
        }
}

/* ---- cuModule* ---- */

static CUresult module_load(CUmodule *module, const void *image, size_t size, bool sized,
                            const char *path)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_ptx_module *ptx;
        struct sim_module *m;
        struct sim_ctx *c;
        CUcontext h;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!module || (!image && !path))
                return CUDA_ERROR_INVALID_VALUE;
        sim_rdlock(drv);
        r = sim_ctx_current(drv, NULL, NULL);
        sim_unlock(drv);
        if (r != CUDA_SUCCESS)
                return r;
        r = path ? sim_module_parse_file(path, &ptx) : sim_module_parse(image, size, sized, &ptx);
        if (r != CUDA_SUCCESS)
                return r;

        sim_wrlock(drv);
        r = sim_ctx_current(drv, &c, &h);       /* it may have gone meanwhile */
        if (r == CUDA_SUCCESS)
                r = sim_module_create(drv, ptx, h, c->dev, NULL, &m);
        else
                sim_ptx_free(ptx);
        sim_unlock(drv);
        if (r == CUDA_SUCCESS)
                *module = sim_module_handle(m);
        return r;
}

SIM_API CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
        return module_load(module, image, 0, false, NULL);
}

SIM_API CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                    CUjit_option *options, void **optionValues)
{
        CUresult r;

        if (!sim_driver_get())
                return CUDA_ERROR_NOT_INITIALIZED;
        unsigned cap = sim_jit_error_cap(numOptions, options, optionValues);
        r = sim_jit_options(numOptions, options, optionValues);
        if (r != CUDA_SUCCESS)
                return r;
        r = module_load(module, image, 0, false, NULL);
        sim_jit_error(numOptions, options, optionValues, cap, r);
        return r;
}

SIM_API CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
        return module_load(module, fatCubin, 0, false, NULL);
}

SIM_API CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
        if (!fname)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        return module_load(module, NULL, 0, true, fname);
}

SIM_API CUresult cuModuleUnload(CUmodule hmod)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_module *m;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_wrlock(drv);
        m = sim_module_lookup(drv, hmod);
        /* A library's module goes with cuLibraryUnload. */
        if (!m || m->lib) {
                sim_unlock(drv);
                return CUDA_ERROR_INVALID_HANDLE;
        }
        sim_module_destroy(drv, m);
        sim_unlock(drv);
        return CUDA_SUCCESS;
}

SIM_API CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_module *m;
        CUresult r = CUDA_ERROR_NOT_FOUND;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!hfunc || !name)
                return CUDA_ERROR_INVALID_VALUE;
        sim_rdlock(drv);
        m = sim_module_lookup(drv, hmod);
        if (!m)
                r = CUDA_ERROR_INVALID_HANDLE;
        for (size_t i = 0; m && i < m->nfuncs; i++)
                if (strcmp(m->funcs[i].entry->name, name) == 0) {
                        *hfunc = sim_func_handle(&m->funcs[i]);
                        r = CUDA_SUCCESS;
                        break;
                }
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_module *m;
        struct sim_range *g = NULL;
        CUresult r = CUDA_SUCCESS;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!name)
                return CUDA_ERROR_INVALID_VALUE;
        sim_rdlock(drv);
        m = sim_module_lookup(drv, hmod);
        if (!m)
                r = CUDA_ERROR_INVALID_HANDLE;
        else if (!(g = sim_module_global(m, name)))
                r = CUDA_ERROR_NOT_FOUND;
        /* Both outputs are optional. */
        if (g && dptr)
                *dptr = (CUdeviceptr)g->start;
        if (g && bytes)
                *bytes = g->size;
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
        const char *env = getenv("CUDA_MODULE_LOADING");

        if (!sim_driver_get())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!mode)
                return CUDA_ERROR_INVALID_VALUE;
        /* Lazy is the default since CUDA 12.2; loading is eager here
         * either way, which no caller can tell apart. */
        *mode = env && strcmp(env, "EAGER") == 0 ? CU_MODULE_EAGER_LOADING : CU_MODULE_LAZY_LOADING;
        return CUDA_SUCCESS;
}

SIM_API CUresult cuModuleGetFunctionCount(unsigned int *count, CUmodule mod)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_module *m;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!count)
                return CUDA_ERROR_INVALID_VALUE;
        sim_rdlock(drv);
        m = sim_module_lookup(drv, mod);
        if (m)
                *count = (unsigned)m->nfuncs;
        sim_unlock(drv);
        return m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

SIM_API CUresult cuModuleEnumerateFunctions(CUfunction *functions, unsigned int numFunctions, CUmodule mod)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_module *m;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!functions && numFunctions)
                return CUDA_ERROR_INVALID_VALUE;
        sim_rdlock(drv);
        m = sim_module_lookup(drv, mod);
        for (size_t i = 0; m && i < m->nfuncs && i < numFunctions; i++)
                functions[i] = sim_func_handle(&m->funcs[i]);
        sim_unlock(drv);
        return m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* ---- function attributes ---- */

CUresult sim_func_get_attr(const struct sim_func *f, CUfunction_attribute attrib, int *ret)
{
        switch (attrib) {
        case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
                *ret = SIM_FUNC_MAX_THREADS;
                break;
        case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
                *ret = (int)f->entry->static_smem;
                break;
        case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
        case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
        case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA:
        case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET:
                *ret = 0;
                break;
        case CU_FUNC_ATTRIBUTE_NUM_REGS:
                *ret = SIM_FUNC_NUM_REGS;
                break;
        case CU_FUNC_ATTRIBUTE_PTX_VERSION:
                *ret = (int)f->mod->ptx->target_sm;
                break;
        case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
                *ret = SIM_DEVICE_SM;
                break;
        case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
                *ret = f->max_dyn_smem;
                break;
        case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
                *ret = f->carveout;
                break;
        case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
        case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
        case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
                *ret = f->cluster_dim[attrib - CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH];
                break;
        case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
                *ret = f->non_portable_cluster;
                break;
        case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
                *ret = f->cluster_policy;
                break;
        default:
                return CUDA_ERROR_INVALID_VALUE;
        }
        return CUDA_SUCCESS;
}

CUresult sim_func_set_attr(struct sim_func *f, CUfunction_attribute attrib, int value)
{
        switch (attrib) {
        case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
                if (value < 0 || value > SIM_SMEM_PER_BLOCK_OPTIN - (int)f->entry->static_smem)
                        return CUDA_ERROR_INVALID_VALUE;
                f->max_dyn_smem = value;
                break;
        case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
                if (value < -1 || value > 100)
                        return CUDA_ERROR_INVALID_VALUE;
                f->carveout = value;
                break;
        case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
        case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
        case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
                if (value < 0 || value > (f->non_portable_cluster ? 16 : 8))
                        return CUDA_ERROR_INVALID_VALUE;
                f->cluster_dim[attrib - CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH] = value;
                break;
        case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
                if (value != 0 && value != 1)
                        return CUDA_ERROR_INVALID_VALUE;
                f->non_portable_cluster = value;
                break;
        case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
                if (value < CU_CLUSTER_SCHEDULING_POLICY_DEFAULT ||
                    value > CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING)
                        return CUDA_ERROR_INVALID_VALUE;
                f->cluster_policy = value;
                break;
        default:
                /* The rest are read-only. */
                return CUDA_ERROR_INVALID_VALUE;
        }
        return CUDA_SUCCESS;
}

CUresult sim_func_param_info(const struct sim_func *f, size_t index, size_t *ret_offset, size_t *ret_size)
{
        if (!ret_offset || index >= f->entry->nparams)
                return CUDA_ERROR_INVALID_VALUE;
        *ret_offset = f->entry->params[index].offset;
        if (ret_size)   /* optional */
                *ret_size = f->entry->params[index].size;
        return CUDA_SUCCESS;
}

/* Runs fn on the function behind h with the lock taken as asked. */
static CUresult with_func(CUfunction h, bool exclusive,
                          CUresult (*fn)(struct sim_func *f, void *arg), void *arg)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_func *f;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (exclusive)
                sim_wrlock(drv);
        else
                sim_rdlock(drv);
        f = sim_func_lookup(drv, h);
        r = f ? fn(f, arg) : CUDA_ERROR_INVALID_HANDLE;
        sim_unlock(drv);
        return r;
}

struct attr_arg {
        CUfunction_attribute attrib;
        int value;
        int *ret;
};

static CUresult get_attr_cb(struct sim_func *f, void *arg)
{
        struct attr_arg *a = arg;

        return sim_func_get_attr(f, a->attrib, a->ret);
}

static CUresult set_attr_cb(struct sim_func *f, void *arg)
{
        struct attr_arg *a = arg;

        return sim_func_set_attr(f, a->attrib, a->value);
}

SIM_API CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
        struct attr_arg a = { .attrib = attrib, .ret = pi };

        if (!pi)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        return with_func(hfunc, false, get_attr_cb, &a);
}

SIM_API CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
        struct attr_arg a = { .attrib = attrib, .value = value };

        return with_func(hfunc, true, set_attr_cb, &a);
}

static CUresult cache_cb(struct sim_func *f, void *arg)
{
        f->cache_config = *(int *)arg;
        return CUDA_SUCCESS;
}

SIM_API CUresult cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
        int c = (int)config;

        if (c < CU_FUNC_CACHE_PREFER_NONE || c > CU_FUNC_CACHE_PREFER_EQUAL)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        return with_func(hfunc, true, cache_cb, &c);
}

struct param_arg {
        size_t index;
        size_t *offset, *size;
};

static CUresult param_cb(struct sim_func *f, void *arg)
{
        struct param_arg *p = arg;

        return sim_func_param_info(f, p->index, p->offset, p->size);
}

SIM_API CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
                                    size_t *paramSize)
{
        struct param_arg p = { .index = paramIndex, .offset = paramOffset, .size = paramSize };

        return with_func(func, false, param_cb, &p);
}

static CUresult name_cb(struct sim_func *f, void *arg)
{
        *(const char **)arg = f->entry->name;
        return CUDA_SUCCESS;
}

SIM_API CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
        if (!name)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        return with_func(hfunc, false, name_cb, (void *)name);
}

static CUresult module_cb(struct sim_func *f, void *arg)
{
        *(CUmodule *)arg = sim_module_handle(f->mod);
        return CUDA_SUCCESS;
}

SIM_API CUresult cuFuncGetModule(CUmodule *hmod, CUfunction hfunc)
{
        if (!hmod)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        return with_func(hfunc, false, module_cb, hmod);
}
