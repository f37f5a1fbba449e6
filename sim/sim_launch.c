/* SPDX-License-Identifier: MIT */
/*
 * Kernel launches and the occupancy calculator.
 *
 * A launch is checked in full before anything is queued, and every
 * configuration error is returned by the launch call itself, as the
 * driver does: dimensions, shared memory, cluster shape, parameters. The
 * parameter bytes are copied at launch time into the PTX layout, then the
 * kernel's twin runs on the stream's thread. A kernel without a twin is
 * CUDA_ERROR_NOT_SUPPORTED at launch, except one named empty*, which runs
 * as a no-op. The start of a launch is one of the points where the driver
 * writes out what earlier kernels printed (sim_printf.c).
 *
 * The occupancy answers are an H100's for a kernel of 32 registers:
 * 2048 threads, 32 blocks, 64K registers and 228 KiB of shared memory per
 * SM, 1 KiB of it reserved per block.
 */
#include <stdlib.h>
#include <string.h>

#include "sim_graph.h"
#include "sim_module.h"

#define MAX_GRID_X      2147483647u
#define MAX_GRID_YZ     65535u
#define MAX_BLOCK_XY    1024u
#define MAX_BLOCK_Z     64u
#define MAX_EXTRA       64      /* entries in an extra[] array */
#define MAX_LAUNCH_ATTRS 64
#define MAX_CLUSTER_PORTABLE 8
#define MAX_CLUSTER_NONPORTABLE 16

/* A checked launch with its parameter bytes: what a stream op runs, and
 * what a kernel node keeps. */
struct sim_launch {
        const struct sim_twin *twin;
        struct sim_func *func;
        struct sim_launch_cfg cfg;
        uint32_t nparams;
        uint32_t offsets[SIM_TWIN_MAX_PARAMS];
        struct sim_twin_args args;
        uint8_t params[];
};

static CUresult launch_exec(struct sim_driver *drv, void *arg)
{
        struct sim_launch *l = arg;

        l->args.drv = drv;
        l->args.params = l->params;
        return l->twin->run(&l->args);
}

struct launch_config {
        struct sim_launch_cfg c;
        CUstream stream;
};

static int blocks_per_sm(const struct sim_func *f, int block_size, size_t dyn_smem);

static CUresult check_config(const struct sim_func *f, const struct sim_launch_cfg *c)
{
        unsigned long long threads = (unsigned long long)c->block[0] * c->block[1] * c->block[2];

        if (c->grid[0] == 0 || c->grid[1] == 0 || c->grid[2] == 0 ||
            c->grid[0] > MAX_GRID_X || c->grid[1] > MAX_GRID_YZ || c->grid[2] > MAX_GRID_YZ)
                return CUDA_ERROR_INVALID_VALUE;
        if (c->block[0] == 0 || c->block[1] == 0 || c->block[2] == 0 ||
            c->block[0] > MAX_BLOCK_XY || c->block[1] > MAX_BLOCK_XY || c->block[2] > MAX_BLOCK_Z ||
            threads > SIM_FUNC_MAX_THREADS)
                return CUDA_ERROR_INVALID_VALUE;
        if (c->shared_bytes > (unsigned)f->max_dyn_smem)
                return CUDA_ERROR_INVALID_VALUE;
        if (c->cluster[0]) {
                unsigned most = f->non_portable_cluster ? MAX_CLUSTER_NONPORTABLE : MAX_CLUSTER_PORTABLE;

                for (int i = 0; i < 3; i++)
                        if (c->cluster[i] == 0 || c->grid[i] % c->cluster[i] != 0)
                                return CUDA_ERROR_INVALID_CLUSTER_SIZE;
                if ((unsigned long long)c->cluster[0] * c->cluster[1] * c->cluster[2] > most)
                        return CUDA_ERROR_INVALID_CLUSTER_SIZE;
        }
        if (c->cooperative) {
                /* Every block must be resident at once. */
                unsigned long long blocks = (unsigned long long)c->grid[0] * c->grid[1] * c->grid[2];
                int per_sm = blocks_per_sm(f, (int)threads, c->shared_bytes);

                if (blocks > (unsigned long long)per_sm * SIM_SM_COUNT)
                        return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
        }
        return CUDA_SUCCESS;
}

/* Finds the argument buffer in extra[]: CU_LAUNCH_PARAM_BUFFER_POINTER and
 * CU_LAUNCH_PARAM_BUFFER_SIZE, each followed by its value, up to
 * CU_LAUNCH_PARAM_END. The size must be the layout's. */
static CUresult parse_extra(void **extra, size_t want, const void **ret_buf)
{
        const void *buf = NULL;
        const size_t *size = NULL;
        unsigned i = 0;

        for (;;) {
                if (i >= MAX_EXTRA)
                        return CUDA_ERROR_INVALID_VALUE;
                if (extra[i] == CU_LAUNCH_PARAM_END)
                        break;
                if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
                        buf = extra[i + 1];
                else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
                        size = extra[i + 1];
                else
                        return CUDA_ERROR_INVALID_VALUE;
                i += 2;
        }
        if (!buf && !size && want == 0) {
                *ret_buf = NULL;
                return CUDA_SUCCESS;
        }
        if (!buf || !size || *size != want)
                return CUDA_ERROR_INVALID_VALUE;
        *ret_buf = buf;
        return CUDA_SUCCESS;
}

/* Copies the parameters into the layout of f's entry. */
static CUresult gather_params(const struct sim_func *f, void **kernelParams, void **extra, uint8_t *dst)
{
        const struct sim_ptx_entry *e = f->entry;
        const void *buf;
        CUresult r;

        if (kernelParams && extra)
                return CUDA_ERROR_INVALID_VALUE;
        if (extra) {
                r = parse_extra(extra, e->param_bytes, &buf);
                if (r == CUDA_SUCCESS && e->param_bytes)
                        memcpy(dst, buf, e->param_bytes);
                return r;
        }
        if (e->nparams == 0)
                return CUDA_SUCCESS;
        if (!kernelParams)
                return CUDA_ERROR_INVALID_VALUE;
        for (uint32_t i = 0; i < e->nparams; i++) {
                if (!kernelParams[i])
                        return CUDA_ERROR_INVALID_VALUE;
                memcpy(dst + e->params[i].offset, kernelParams[i], e->params[i].size);
        }
        return CUDA_SUCCESS;
}

CUresult sim_launch_build(struct sim_driver *drv, CUfunction hfunc, CUcontext h, const struct sim_launch_cfg *cfg,
                          void **kernelParams, void **extra, struct sim_launch **ret)
{
        struct sim_launch *l;
        struct sim_func *f;
        CUresult r;

        f = sim_func_lookup(drv, hfunc);
        /* A module's functions run in its context; a library's anywhere. */
        if (!f || (f->mod->ctx && f->mod->ctx != h))
                return CUDA_ERROR_INVALID_HANDLE;
        r = check_config(f, cfg);
        if (r != CUDA_SUCCESS)
                return r;
        l = calloc(1, sizeof(*l) + f->entry->param_bytes);
        if (!l)
                return CUDA_ERROR_OUT_OF_MEMORY;
        r = gather_params(f, kernelParams, extra, l->params);
        if (r == CUDA_SUCCESS && !f->twin)
                r = CUDA_ERROR_NOT_SUPPORTED;   /* the sim cannot run this kernel */
        if (r != CUDA_SUCCESS) {
                free(l);
                return r;
        }
        l->twin = f->twin;
        l->func = f;
        l->cfg = *cfg;
        memcpy(l->args.grid, cfg->grid, sizeof(cfg->grid));
        memcpy(l->args.block, cfg->block, sizeof(cfg->block));
        l->args.shared_bytes = cfg->shared_bytes;
        l->args.param_bytes = f->entry->param_bytes;
        l->nparams = f->entry->nparams;
        for (uint32_t i = 0; i < f->entry->nparams && i < SIM_TWIN_MAX_PARAMS; i++)
                l->args.offsets[i] = l->offsets[i] = f->entry->params[i].offset;
        if (f->twin->global) {
                struct sim_range *g = sim_module_global(f->mod, f->twin->global);

                l->args.global = g ? (CUdeviceptr)g->start : 0;
                l->args.global_size = g ? g->size : 0;
        }
        *ret = l;
        return CUDA_SUCCESS;
}

struct sim_launch *sim_launch_dup(const struct sim_launch *l)
{
        size_t size = sizeof(*l) + l->args.param_bytes;
        struct sim_launch *d = malloc(size);

        if (d)
                memcpy(d, l, size);
        return d;
}

size_t sim_launch_nparams(const struct sim_launch *l)
{
        return l->nparams;
}

size_t sim_launch_param_ptrs(struct sim_launch *l, void **kp, size_t max)
{
        size_t n = l->nparams < max ? l->nparams : max;

        for (size_t i = 0; i < n; i++)
                kp[i] = l->params + l->offsets[i];
        return n;
}

void sim_launch_get_cfg(const struct sim_launch *l, struct sim_launch_cfg *ret)
{
        *ret = l->cfg;
}

struct sim_op *sim_launch_op(struct sim_launch *l, CUcontext ctx)
{
        bool lock = l->twin->touches_memory;

        l->args.ctx = ctx;
        return sim_op_new(launch_exec, l, lock);
}

CUresult sim_launch_submit(struct sim_driver *drv, struct sim_queue *q, struct sim_launch *l, CUcontext ctx)
{
        bool lock = l->twin->touches_memory;

        l->args.ctx = ctx;
        sim_printf_flush(drv, ctx);
        return sim_queue_submit_exec(drv, q, launch_exec, l, lock);
}

static CUresult launch(CUfunction hfunc, const struct launch_config *cfg, void **kernelParams, void **extra)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_queue *q = NULL;
        struct sim_launch *l = NULL;
        struct sim_nparams np;
        CUcontext h, run_ctx = NULL;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_rdlock(drv);
        r = sim_ctx_current(drv, NULL, &h);
        if (r == CUDA_SUCCESS)
                r = sim_launch_build(drv, hfunc, h, &cfg->c, kernelParams, extra, &l);
        if (r == CUDA_SUCCESS)
                r = sim_stream_enter(drv, cfg->stream, &run_ctx, &q);
        if (r != CUDA_SUCCESS)
                goto out_unlock;
        /* While the stream captures, the launch becomes a kernel node. */
        np = (struct sim_nparams){ .type = CU_GRAPH_NODE_TYPE_KERNEL,
                                   .ctx = run_ctx,
                                   .u.kernel = { .l = l, .func = hfunc } };
        r = sim_capture_work(drv, q, &np);
        if (r != SIM_CAPTURE_RUN) {
                l = NULL;
                sim_unlock(drv);
                sim_queue_put(drv, q);
                return r;
        }
        r = CUDA_SUCCESS;
out_unlock:
        sim_unlock(drv);
        if (r != CUDA_SUCCESS) {
                free(l);
                sim_queue_put(drv, q);
                return r;
        }
        return sim_launch_submit(drv, q, l, run_ctx);
}

SIM_API CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                void **kernelParams, void **extra)
{
        struct launch_config c = {
                .c.grid = { gridDimX, gridDimY, gridDimZ },
                .c.block = { blockDimX, blockDimY, blockDimZ },
                .c.shared_bytes = sharedMemBytes,
                .stream = hStream,
        };

        return launch(f, &c, kernelParams, extra);
}

SIM_API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                           unsigned int gridDimZ, unsigned int blockDimX,
                                           unsigned int blockDimY, unsigned int blockDimZ,
                                           unsigned int sharedMemBytes, CUstream hStream,
                                           void **kernelParams)
{
        struct launch_config c = {
                .c.grid = { gridDimX, gridDimY, gridDimZ },
                .c.block = { blockDimX, blockDimY, blockDimZ },
                .c.shared_bytes = sharedMemBytes,
                .c.cooperative = true,
                .stream = hStream,
        };

        return launch(f, &c, kernelParams, NULL);
}

SIM_API CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
        struct launch_config c;

        if (!sim_driver_get())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!config || (config->numAttrs && !config->attrs) || config->numAttrs > MAX_LAUNCH_ATTRS)
                return CUDA_ERROR_INVALID_VALUE;
        c = (struct launch_config){
                .c.grid = { config->gridDimX, config->gridDimY, config->gridDimZ },
                .c.block = { config->blockDimX, config->blockDimY, config->blockDimZ },
                .c.shared_bytes = config->sharedMemBytes,
                .stream = config->hStream,
        };
        for (unsigned i = 0; i < config->numAttrs; i++) {
                const CUlaunchAttribute *a = &config->attrs[i];

                switch (a->id) {
                case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
                        c.c.cooperative = a->value.cooperative != 0;
                        break;
                case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
                        c.c.cluster[0] = a->value.clusterDim.x;
                        c.c.cluster[1] = a->value.clusterDim.y;
                        c.c.cluster[2] = a->value.clusterDim.z;
                        if (!c.c.cluster[0] || !c.c.cluster[1] || !c.c.cluster[2])
                                return CUDA_ERROR_INVALID_CLUSTER_SIZE;
                        break;
                case CU_LAUNCH_ATTRIBUTE_PRIORITY:
                        break;  /* one priority is as good as another here */
                default:
                        if ((unsigned)a->id >= CU_LAUNCH_ATTRIBUTE_MAX)
                                return CUDA_ERROR_INVALID_VALUE;
                        break;  /* scheduling hints: nothing to simulate */
                }
        }
        return launch(f, &c, kernelParams, extra);
}

/* ---- occupancy ---- */

static int blocks_per_sm(const struct sim_func *f, int block_size, size_t dyn_smem)
{
        size_t smem = f->entry->static_smem + dyn_smem;
        int warps, n, by;

        if (block_size <= 0 || block_size > SIM_FUNC_MAX_THREADS || smem > SIM_SMEM_PER_BLOCK_OPTIN)
                return 0;
        warps = (block_size + 31) / 32;
        n = SIM_BLOCKS_PER_SM;
        by = SIM_THREADS_PER_SM / (warps * 32);
        n = by < n ? by : n;
        by = SIM_REGS_PER_SM / (SIM_FUNC_NUM_REGS * 32 * warps);
        n = by < n ? by : n;
        by = (int)(SIM_SMEM_PER_SM / (smem + SIM_SMEM_RESERVED));
        return by < n ? by : n;
}

/* Runs fn on f with the lock shared and a current context. */
static CUresult occupancy_enter(CUfunction h, struct sim_driver **ret_drv, struct sim_func **ret)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_func *f;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_rdlock(drv);
        r = sim_ctx_current(drv, NULL, NULL);
        f = r == CUDA_SUCCESS ? sim_func_lookup(drv, h) : NULL;
        if (r == CUDA_SUCCESS && !f)
                r = CUDA_ERROR_INVALID_HANDLE;
        if (r != CUDA_SUCCESS) {
                sim_unlock(drv);
                return r;
        }
        *ret_drv = drv;
        *ret = f;
        return CUDA_SUCCESS;
}

SIM_API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, CUfunction func,
                                                                      int blockSize, size_t dynamicSMemSize,
                                                                      unsigned int flags)
{
        struct sim_driver *drv;
        struct sim_func *f;
        CUresult r;

        if (!numBlocks || blockSize <= 0 || (flags & ~(unsigned)CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE))
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = occupancy_enter(func, &drv, &f);
        if (r != CUDA_SUCCESS)
                return r;
        *numBlocks = blocks_per_sm(f, blockSize, dynamicSMemSize);
        sim_unlock(drv);
        return CUDA_SUCCESS;
}

SIM_API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func, int blockSize,
                                                             size_t dynamicSMemSize)
{
        return cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, func, blockSize,
                                                                    dynamicSMemSize, CU_OCCUPANCY_DEFAULT);
}

SIM_API CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int *minGridSize, int *blockSize, CUfunction func,
                                                           CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                           size_t dynamicSMemSize, int blockSizeLimit,
                                                           unsigned int flags)
{
        struct sim_driver *drv;
        struct sim_func *f;
        int limit, best_size = 0, best_blocks = 0, best = 0;
        CUresult r;

        if (!minGridSize || !blockSize || blockSizeLimit < 0 ||
            (flags & ~(unsigned)CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE))
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        limit = blockSizeLimit == 0 || blockSizeLimit > SIM_FUNC_MAX_THREADS ? SIM_FUNC_MAX_THREADS
                                                                             : blockSizeLimit;
        r = occupancy_enter(func, &drv, &f);
        if (r != CUDA_SUCCESS)
                return r;
        /* From the largest size down a warp at a time; the first to reach
         * the best occupancy wins, so ties go to larger blocks. The
         * callback is the caller's and must not call the driver. */
        for (int bs = limit; bs > 0; bs -= bs % 32 ? bs % 32 : 32) {
                size_t smem = blockSizeToDynamicSMemSize ? blockSizeToDynamicSMemSize(bs) : dynamicSMemSize;
                int nb = blocks_per_sm(f, bs, smem);

                if (nb * bs > best) {
                        best = nb * bs;
                        best_size = bs;
                        best_blocks = nb;
                }
                if (best == SIM_THREADS_PER_SM)
                        break;
        }
        sim_unlock(drv);
        *blockSize = best_size;
        *minGridSize = best_blocks * SIM_SM_COUNT;
        return CUDA_SUCCESS;
}

SIM_API CUresult cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, CUfunction func,
                                                  CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                  size_t dynamicSMemSize, int blockSizeLimit)
{
        return cuOccupancyMaxPotentialBlockSizeWithFlags(minGridSize, blockSize, func,
                                                         blockSizeToDynamicSMemSize, dynamicSMemSize,
                                                         blockSizeLimit, CU_OCCUPANCY_DEFAULT);
}

/* What is left of the SM's shared memory for each of numBlocks blocks,
 * capped at the function's current dynamic limit; more blocks than can
 * be resident is an error (as measured on an H200). */
SIM_API CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize, CUfunction func,
                                                         int numBlocks, int blockSize)
{
        struct sim_driver *drv;
        struct sim_func *f;
        long avail;
        CUresult r;

        if (!dynamicSmemSize || numBlocks <= 0 || blockSize <= 0)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = occupancy_enter(func, &drv, &f);
        if (r != CUDA_SUCCESS)
                return r;
        if (blocks_per_sm(f, blockSize, 0) < numBlocks) {
                sim_unlock(drv);
                return CUDA_ERROR_INVALID_VALUE;
        }
        avail = SIM_SMEM_PER_SM / numBlocks - (long)f->entry->static_smem;
        avail = avail < f->max_dyn_smem ? avail : f->max_dyn_smem;
        sim_unlock(drv);
        *dynamicSmemSize = (size_t)(avail < 0 ? 0 : avail);
        return CUDA_SUCCESS;
}
