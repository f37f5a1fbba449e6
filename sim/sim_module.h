/* SPDX-License-Identifier: MIT */
/*
 * Modules, libraries, functions and kernel twins: what sim_module.c,
 * sim_library.c, sim_launch.c and sim_twins.c share.
 *
 * A module is one parsed PTX image plus a device range per module-scope
 * variable, owned by a context (cuModuleLoad*) or by a library
 * (cuLibraryLoad*, context-independent). Each entry becomes a function;
 * its CUfunction handle is SIM_TAG_FUNC|id and, for a library, its
 * CUkernel handle SIM_TAG_KERNEL|id, the same object.
 */
#ifndef LUPINE_SIM_MODULE_H
#define LUPINE_SIM_MODULE_H

#include "sim_internal.h"
#include "sim_ptx.h"

#define SIM_TWIN_MAX_PARAMS 8

/* What a twin sees of a launch. The parameter bytes are a copy taken at
 * launch time, laid out as the PTX says. */
struct sim_twin_args {
        struct sim_driver *drv;
        unsigned grid[3], block[3];
        unsigned shared_bytes;
        const uint8_t *params;
        size_t param_bytes;
        uint32_t offsets[SIM_TWIN_MAX_PARAMS];
        CUdeviceptr global;     /* the module variable the twin reads, if any */
        size_t global_size;
        CUcontext ctx;          /* the context it runs in (its printf FIFO) */
};

/* A host implementation of a kernel, found by entry name. It computes the
 * whole grid's result, checks every device range it touches first, and
 * returns CUDA_ERROR_ILLEGAL_ADDRESS for one that is not mapped. With
 * touches_memory it runs under the registry lock, shared. */
struct sim_twin {
        const char *name;
        unsigned nparams;
        uint8_t param_sizes[SIM_TWIN_MAX_PARAMS];
        const char *global;             /* a variable it needs, or NULL */
        bool touches_memory;
        CUresult (*run)(const struct sim_twin_args *a);
};

/* The twin for entry e of module m, if the sim has one whose signature
 * matches; the no-op twin for names starting "empty"; else NULL. */
const struct sim_twin *sim_twin_find(const struct sim_ptx_module *m, const struct sim_ptx_entry *e);

struct sim_module;

struct sim_func {
        uint64_t id;
        struct sim_module *mod;
        const struct sim_ptx_entry *entry;      /* in mod->ptx */
        const struct sim_twin *twin;
        /* settable attributes; set with the lock exclusive */
        int max_dyn_smem;
        int carveout;
        int cluster_dim[3];
        int non_portable_cluster;
        int cluster_policy;
        int cache_config;
};

struct sim_library;

struct sim_module {
        uint64_t id;
        CUcontext ctx;                  /* NULL when a library owns it */
        struct sim_library *lib;
        int dev;
        struct sim_ptx_module *ptx;
        size_t nfuncs;
        struct sim_func *funcs;         /* one per entry */
        struct sim_range **globals;     /* one per ptx global */
};

struct sim_library {
        uint64_t id;
        struct sim_module *mod;
};

/* Finds the PTX in image (known by address only, or of size bytes when
 * sized) and parses it: CUDA_ERROR_INVALID_IMAGE, NO_BINARY_FOR_GPU,
 * UNSUPPORTED_PTX_VERSION or OUT_OF_MEMORY on failure. */
CUresult sim_module_parse(const void *image, size_t size, bool sized, struct sim_ptx_module **ret);
/* Reads a whole file (at most SIM_MAX_IMAGE_BYTES) and parses it. */
CUresult sim_module_parse_file(const char *path, struct sim_ptx_module **ret);
/* Validates cuModuleLoadDataEx/cuLibraryLoadData JIT options, and fills
 * the log buffers they name with empty logs. */
CUresult sim_jit_options(unsigned n, CUjit_option *options, void **values);
/* The error log's size as the caller gave it (0: none), read before
 * sim_jit_options() answers it; after a load with those options failed
 * with r, sim_jit_error() writes a one-line error log in that much room
 * and answers the size option. */
unsigned sim_jit_error_cap(unsigned n, CUjit_option *options, void **values);
void sim_jit_error(unsigned n, CUjit_option *options, void **values, unsigned cap, CUresult r);
/* Builds and registers a module from ptx (taken, freed on failure):
 * allocates and initialises its variables on dev, makes its functions.
 * Lock held exclusive. */
CUresult sim_module_create(struct sim_driver *drv, struct sim_ptx_module *ptx, CUcontext ctx, int dev,
                           struct sim_library *lib, struct sim_module **ret);
/* Unregisters and frees a module, its functions and variables. Lock held
 * exclusive. */
void sim_module_destroy(struct sim_driver *drv, struct sim_module *m);

CUmodule sim_module_handle(const struct sim_module *m);
CUfunction sim_func_handle(const struct sim_func *f);
CUkernel sim_kernel_handle(const struct sim_func *f);
struct sim_module *sim_module_lookup(struct sim_driver *drv, CUmodule h);
/* A CUfunction, or a CUkernel passed where a CUfunction goes. Lock held. */
struct sim_func *sim_func_lookup(struct sim_driver *drv, CUfunction h);
/* A CUkernel (of a library). Lock held. */
struct sim_func *sim_kernel_lookup(struct sim_driver *drv, CUkernel h);
/* The variable name of m, or NULL. */
struct sim_range *sim_module_global(const struct sim_module *m, const char *name);

/* Attribute get/set shared by cuFunc* and cuKernel*. Lock held (set:
 * exclusive). */
CUresult sim_func_get_attr(const struct sim_func *f, CUfunction_attribute attrib, int *ret);
CUresult sim_func_set_attr(struct sim_func *f, CUfunction_attribute attrib, int value);
CUresult sim_func_param_info(const struct sim_func *f, size_t index, size_t *ret_offset, size_t *ret_size);

#endif
