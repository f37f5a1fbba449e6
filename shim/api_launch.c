/* SPDX-License-Identifier: MIT */
/*
 * Kernel launches: fire-and-forget frames carrying the parameters packed at
 * the offsets the driver reported for the function. Launch configurations
 * the driver would reject are rejected here, synchronously, with the same
 * error; failures inside the kernel surface at the next synchronous call.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "client.h"
#include "ctl_codec.h"
#include "funcs.h"
#include "shim_gen.h"

#define EXPORT __attribute__((visibility("default")))

struct launch {
        uint64_t f;
        unsigned int grid[3], block[3], shmem;
        uint64_t stream;
        unsigned int flags;
        const CUlaunchAttribute *attrs;
        unsigned int n_attrs;
        void **params;
        void **extra;
};

_Static_assert(sizeof(((CUlaunchAttribute *)0)->value) == LUP_LAUNCH_ATTR_VALUE,
               "LAUNCH attribute values are 64 bytes");
_Static_assert(sizeof(unsigned int) == sizeof(uint32_t), "launch dimensions travel as u32");

/* The launch frame. A launch builds one every time (about 4 us a launch),
 * up to LUP_LAUNCH_MAX_SIZE bytes: too big for the caller's stack, too
 * frequent for a malloc each. So each launching thread allocates one at its
 * first launch and keeps it; the key frees it when the thread exits. */
static pthread_key_t frame_key;
static bool frame_key_ok;
static pthread_once_t frame_key_once = PTHREAD_ONCE_INIT;
static __thread uint8_t *frame_buf;

static void frame_key_make(void)
{
        frame_key_ok = pthread_key_create(&frame_key, free) == 0;
}

static uint8_t *launch_frame(void)
{
        if (frame_buf)
                return frame_buf;
        pthread_once(&frame_key_once, frame_key_make);
        frame_buf = malloc(LUP_LAUNCH_MAX_SIZE);
        /* without the key the buffer outlives its thread: a leak, not a failure */
        if (frame_buf && frame_key_ok)
                (void)pthread_setspecific(frame_key, frame_buf);
        return frame_buf;
}

static CUresult pack_params(const struct lupc_func_layout *lay, void **params, void **extra, uint8_t *out)
{
        if (extra) {
                const void *buf = NULL;
                size_t size = (size_t)-1;
                for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
                        if (i > 64)
                                return CUDA_ERROR_INVALID_VALUE;
                        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
                                buf = extra[i + 1];
                        else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
                                size = extra[i + 1] ? *(size_t *)extra[i + 1] : (size_t)-1;
                        else
                                return CUDA_ERROR_INVALID_VALUE;
                }
                if (params || (lay->param_bytes && !buf) || size != lay->param_bytes)
                        return CUDA_ERROR_INVALID_VALUE;
                if (lay->param_bytes)
                        memcpy(out, buf, lay->param_bytes);
                return CUDA_SUCCESS;
        }
        if (lay->n_params && !params)
                return CUDA_ERROR_INVALID_VALUE;
        memset(out, 0, lay->param_bytes); /* padding between parameters */
        for (uint32_t i = 0; i < lay->n_params; i++) {
                if (!params[i])
                        return CUDA_ERROR_INVALID_VALUE;
                memcpy(out + lay->params[2 * i], params[i], lay->params[2 * i + 1]);
        }
        return CUDA_SUCCESS;
}

/* Launches and graph kernel nodes: pinned memory a parameter points into
 * gets its mirror on the GPU host (api_mapped.c). */
CUresult lupc_pack_params(const struct lupc_func_layout *lay, void **params, void **extra, uint8_t *out)
{
        CUresult r = pack_params(lay, params, extra, out);
        if (r == CUDA_SUCCESS && atomic_load_explicit(&lupc_host_n, memory_order_relaxed))
                lupc_mapped_scan(out, lay->param_bytes);
        return r;
}

static CUresult launch(const struct launch *l)
{
        struct lupc_func_layout lay;
        CUresult r;

        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        uint64_t ctx = lupc_ctx_current();
        struct lupc_ctx_info ci;
        if (!ctx || !lupc_ctx_lookup(ctx, &ci))
                return CUDA_ERROR_INVALID_CONTEXT;
        if (!l->f)
                return CUDA_ERROR_INVALID_HANDLE;
        if ((r = lupc_func_layout(l->f, &lay)) != CUDA_SUCCESS)
                return r;

        /* the checks the driver makes before it queues a launch */
        const struct lupc_device *d = lupc_device(ci.device);
        uint64_t threads = (uint64_t)l->block[0] * l->block[1] * l->block[2];
        for (int i = 0; i < 3; i++) {
                if (l->grid[i] == 0 || l->block[i] == 0)
                        return CUDA_ERROR_INVALID_VALUE;
                int gmax = d ? d->attr[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X - 1 + i] : 0;
                int bmax = d ? d->attr[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X - 1 + i] : 0;
                if ((gmax > 0 && l->grid[i] > (unsigned)gmax) || (bmax > 0 && l->block[i] > (unsigned)bmax))
                        return CUDA_ERROR_INVALID_VALUE;
        }
        if (lay.max_threads > 0 && threads > (uint64_t)lay.max_threads)
                return CUDA_ERROR_INVALID_VALUE;
        if (l->n_attrs > LUP_MAX_LAUNCH_ATTRS || (l->n_attrs && !l->attrs))
                return CUDA_ERROR_INVALID_VALUE;

        uint8_t *frame = launch_frame();
        if (!frame)
                return CUDA_ERROR_OUT_OF_MEMORY;
        /* field by field: a designated initialiser would clear the whole
         * attribute table on every launch */
        struct lup_launch wl;
        wl.func = l->f;
        memcpy(wl.grid, l->grid, sizeof(wl.grid));
        memcpy(wl.block, l->block, sizeof(wl.block));
        wl.shmem = l->shmem;
        wl.stream = l->stream;
        wl.flags = l->flags;
        wl.n_attrs = l->n_attrs;
        for (unsigned int i = 0; i < l->n_attrs; i++) {
                wl.attrs[i].id = (uint32_t)l->attrs[i].id;
                memcpy(wl.attrs[i].value, &l->attrs[i].value, LUP_LAUNCH_ATTR_VALUE);
        }
        wl.param_bytes = lay.param_bytes;
        wl.params = NULL;
        struct lup_wr w = lup_wr_init(frame, LUP_LAUNCH_MAX_SIZE);
        uint8_t *pb;
        if (lup_launch_encode(&w, &wl, &pb) < 0)
                return CUDA_ERROR_INVALID_VALUE;
        if ((r = lupc_pack_params(&lay, l->params, l->extra, pb)) != CUDA_SUCCESS)
                return r;
        lupc_route_handle(l->f); /* the function's server (several in LUPINE_SERVER) */
        return lupc_call(LUP_OP_LAUNCH, LUPC_ASYNC | LUPC_CTX, frame, w.len, NULL, 0, NULL);
}

static CUresult launch_kernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                              unsigned int by, unsigned int bz, unsigned int shmem, CUstream s, void **params,
                              void **extra, unsigned int flags, int per_thread)
{
        struct launch l = {
                .f = (uint64_t)(uintptr_t)f, .grid = { gx, gy, gz }, .block = { bx, by, bz }, .shmem = shmem,
                .stream = lupc_stream_id(s, per_thread), .flags = flags, .params = params, .extra = extra,
        };
        return launch(&l);
}

EXPORT CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                       unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                       unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
{
        return launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
                             kernelParams, extra, 0, 0);
}

EXPORT CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                                  unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                                  unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                                  void **kernelParams)
{
        return launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
                             kernelParams, NULL, LUP_LAUNCH_COOPERATIVE, 0);
}

CUresult lupc_launch_ex(const CUlaunchConfig *c, CUfunction f, void **params, void **extra, int per_thread)
{
        if (!c)
                return CUDA_ERROR_INVALID_VALUE;
        struct launch l = {
                .f = (uint64_t)(uintptr_t)f, .grid = { c->gridDimX, c->gridDimY, c->gridDimZ },
                .block = { c->blockDimX, c->blockDimY, c->blockDimZ }, .shmem = c->sharedMemBytes,
                .stream = lupc_stream_id(c->hStream, per_thread), .attrs = c->attrs, .n_attrs = c->numAttrs,
                .params = params, .extra = extra,
        };
        return launch(&l);
}

EXPORT CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
        return lupc_launch_ex(config, f, kernelParams, extra, 0);
}

/* ---- occupancy: answers depend only on the function and the arguments,
 * so each distinct question crosses the network once */

struct occ_entry {
        uint64_t f;
        int block;
        size_t smem;
        unsigned int flags;
        int answer;
};
#define OCC_CACHE 256
static struct occ_entry occ_cache[OCC_CACHE];
static pthread_mutex_t occ_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t occ_slot(uint64_t f, int block, size_t smem, unsigned int flags)
{
        uint64_t h = f * 0x9e3779b97f4a7c15ull ^ (uint64_t)block * 0xff51afd7ed558ccdull ^ smem * 31 ^ flags;
        return (size_t)(h ^ (h >> 29)) % OCC_CACHE;
}

static CUresult occupancy(int *numBlocks, CUfunction func, int blockSize, size_t smem, unsigned int flags)
{
        uint64_t f = (uint64_t)(uintptr_t)func;
        if (!numBlocks || !func)
                return CUDA_ERROR_INVALID_VALUE;
        size_t i = occ_slot(f, blockSize, smem, flags);
        pthread_mutex_lock(&occ_lock);
        struct occ_entry e = occ_cache[i];
        pthread_mutex_unlock(&occ_lock);
        if (e.f == f && e.block == blockSize && e.smem == smem && e.flags == flags) {
                *numBlocks = e.answer;
                return CUDA_SUCCESS;
        }
        int n = 0;
        CUresult r = lupc_send_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&n, func, blockSize, smem, flags);
        if (r != CUDA_SUCCESS)
                return r;
        pthread_mutex_lock(&occ_lock);
        occ_cache[i] = (struct occ_entry){ f, blockSize, smem, flags, n };
        pthread_mutex_unlock(&occ_lock);
        *numBlocks = n;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func, int blockSize,
                                                                    size_t dynamicSMemSize)
{
        return occupancy(numBlocks, func, blockSize, dynamicSMemSize, 0);
}

EXPORT CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, CUfunction func,
                                                                             int blockSize, size_t dynamicSMemSize,
                                                                             unsigned int flags)
{
        return occupancy(numBlocks, func, blockSize, dynamicSMemSize, flags);
}

/* The block size with the best occupancy, searched in the shim because the
 * shared-memory callback is the caller's code: one question per candidate. */
static CUresult max_potential(int *minGridSize, int *blockSize, CUfunction func, CUoccupancyB2DSize b2d,
                              size_t smem, int limit, unsigned int flags)
{
        if (!minGridSize || !blockSize || !func)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        struct lupc_ctx_info ci;
        uint64_t ctx = lupc_ctx_current();
        if (!ctx || !lupc_ctx_lookup(ctx, &ci))
                return CUDA_ERROR_INVALID_CONTEXT;
        int fmax = 0;
        CUresult r = lupc_func_attr((uint64_t)(uintptr_t)func, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &fmax);
        if (r != CUDA_SUCCESS)
                return r;
        const struct lupc_device *d = lupc_device(ci.device);
        int sms = d ? d->attr[CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT - 1] : 1;
        int warp = d && d->attr[CU_DEVICE_ATTRIBUTE_WARP_SIZE - 1] > 0 ? d->attr[CU_DEVICE_ATTRIBUTE_WARP_SIZE - 1] : 32;
        int top = fmax;
        if (limit > 0 && limit < top)
                top = limit;
        int best_block = 0, best_threads = -1, best_blocks = 0;
        for (int b = top - top % warp; b >= warp; b -= warp) {
                size_t s = b2d ? b2d(b) : smem;
                int n = 0;
                if ((r = occupancy(&n, func, b, s, flags)) != CUDA_SUCCESS)
                        return r;
                if (n * b > best_threads) {
                        best_threads = n * b;
                        best_block = b;
                        best_blocks = n;
                }
        }
        *blockSize = best_block;
        *minGridSize = best_blocks * sms;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, CUfunction func,
                                                         CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                         size_t dynamicSMemSize, int blockSizeLimit)
{
        return max_potential(minGridSize, blockSize, func, blockSizeToDynamicSMemSize, dynamicSMemSize, blockSizeLimit, 0);
}

EXPORT CUresult CUDAAPI cuOccupancyMaxPotentialBlockSizeWithFlags(int *minGridSize, int *blockSize, CUfunction func,
                                                                  CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                                  size_t dynamicSMemSize, int blockSizeLimit,
                                                                  unsigned int flags)
{
        return max_potential(minGridSize, blockSize, func, blockSizeToDynamicSMemSize, dynamicSMemSize, blockSizeLimit,
                             flags);
}

/* Only the cluster shape and scheduling policy change the answer; other
 * attributes (priority, memory sync domains...) are ignored, as they would
 * be by the occupancy calculation. */
EXPORT CUresult CUDAAPI cuOccupancyMaxActiveClusters(int *numClusters, CUfunction func, const CUlaunchConfig *config)
{
        unsigned int cx = 0, cy = 0, cz = 0, policy = 0;

        if (!numClusters || !func || !config)
                return CUDA_ERROR_INVALID_VALUE;
        if (config->numAttrs && !config->attrs)
                return CUDA_ERROR_INVALID_VALUE;
        for (unsigned int i = 0; i < config->numAttrs; i++) {
                const CUlaunchAttribute *a = &config->attrs[i];
                if (a->id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
                        cx = a->value.clusterDim.x;
                        cy = a->value.clusterDim.y;
                        cz = a->value.clusterDim.z;
                } else if (a->id == CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE) {
                        policy = (unsigned int)a->value.clusterSchedulingPolicyPreference;
                }
        }
        return lupc_send_lupOccupancyMaxActiveClusters(numClusters, func, config->gridDimX, config->gridDimY,
                                                       config->gridDimZ, config->blockDimX, config->blockDimY,
                                                       config->blockDimZ, config->sharedMemBytes, cx, cy, cz, policy,
                                                       config->hStream);
}
