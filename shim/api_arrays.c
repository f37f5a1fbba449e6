/* SPDX-License-Identifier: MIT */
/*
 * CUDA arrays and mipmapped arrays. A handle is an id this process mints
 * (CUarray and CUmipmappedArray values are those ids); the worker maps it
 * to the driver's array (worker/arrays.c). Each descriptor stays here, so
 * the Get*Descriptor calls and the copies' bounds checks need no round
 * trip. A mipmapped array's levels get ids the first time a level is
 * asked for, and the same id after that, as the driver gives the same
 * array. Creation is synchronous: it fails in ways the caller acts on
 * (out of memory, a descriptor the driver refuses).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "arrays.h"
#include "client.h"
#include "log.h"
#include "shim_gen.h"
#include "u64map.h"

#define EXPORT __attribute__((visibility("default")))

struct arr {
        enum lupc_array_kind kind;
        struct lup_array_desc d;
        struct lup_array_shape shape;
        uint32_t levels;                        /* mipmapped arrays: how many */
        uint64_t parent;                        /* a level: its mipmapped array */
        uint64_t ctx;                           /* the context it was made in */
        uint64_t level_ids[LUP_MAX_MIP_LEVELS]; /* mipmapped arrays: 0 until asked */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct lup_u64map arrays = { .limit = LUP_MAX_ARRAYS + LUP_MAX_ARRAYS / 2 };

static struct arr *find_locked(uint64_t id, enum lupc_array_kind kind)
{
        uint64_t v;
        if (!id || !lup_u64map_get(&arrays, id, &v))
                return NULL;
        struct arr *a = (struct arr *)(uintptr_t)v;
        return a->kind == kind ? a : NULL;
}

bool lupc_array_find(uint64_t id, enum lupc_array_kind kind, struct lup_array_desc *ret_d,
                     struct lup_array_shape *ret_s)
{
        pthread_mutex_lock(&lock);
        struct arr *a = find_locked(id, kind);
        if (a && ret_d)
                *ret_d = a->d;
        if (a && ret_s)
                *ret_s = a->shape;
        pthread_mutex_unlock(&lock);
        return a != NULL;
}

static CUresult check_error(int rc, const char *why, const char *fn)
{
        if (rc == -ENOTSUP) {
                lup_warn("%s: %s", fn, why);
                return CUDA_ERROR_NOT_SUPPORTED;
        }
        return CUDA_ERROR_INVALID_VALUE;
}

static CUresult create(uint64_t *ret_id, const struct lup_array_desc *d, uint32_t levels, const char *fn)
{
        struct lup_array_shape s;
        const char *why;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        int rc = lup_array_check(d, levels, &s, &why);
        if (rc < 0)
                return check_error(rc, why, fn);
        struct arr *a = calloc(1, sizeof(*a));
        if (!a)
                return CUDA_ERROR_OUT_OF_MEMORY;
        *a = (struct arr){ .kind = levels ? LUPC_MIPMAP : LUPC_ARRAY,
                           .d = *d,
                           .shape = s,
                           .levels = levels,
                           .ctx = lupc_ctx_current() };
        uint64_t id = lupc_mint_handle();
        CUresult r =
                lupc_send_lupArrayCreate(id, d->width, d->height, d->depth, d->format, d->channels, d->flags, levels);
        if (r == CUDA_SUCCESS) {
                pthread_mutex_lock(&lock);
                if (lup_u64map_put(&arrays, id, (uint64_t)(uintptr_t)a) < 0)
                        r = CUDA_ERROR_OUT_OF_MEMORY;
                pthread_mutex_unlock(&lock);
                if (r != CUDA_SUCCESS)
                        (void)lupc_send_lupArrayDestroy(id);
        }
        if (r != CUDA_SUCCESS) {
                free(a);
                return r;
        }
        *ret_id = id;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *p)
{
        if (!pHandle || !p)
                return CUDA_ERROR_INVALID_VALUE;
        struct lup_array_desc d = { .width = p->Width,
                                    .height = p->Height,
                                    .depth = p->Depth,
                                    .format = (uint32_t)p->Format,
                                    .channels = p->NumChannels,
                                    .flags = p->Flags };
        uint64_t id;
        CUresult r = create(&id, &d, 0, "cuArray3DCreate");
        if (r == CUDA_SUCCESS)
                *pHandle = (CUarray)(uintptr_t)id;
        return r;
}

EXPORT CUresult CUDAAPI cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *p)
{
        if (!pHandle || !p)
                return CUDA_ERROR_INVALID_VALUE;
        CUDA_ARRAY3D_DESCRIPTOR d = {
                .Width = p->Width, .Height = p->Height, .Format = p->Format, .NumChannels = p->NumChannels
        };
        return cuArray3DCreate_v2(pHandle, &d);
}

EXPORT CUresult CUDAAPI cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *p,
                                               unsigned int numMipmapLevels)
{
        if (!pHandle || !p)
                return CUDA_ERROR_INVALID_VALUE;
        if (numMipmapLevels == 0) /* the H200's driver takes 0 as 1 */
                numMipmapLevels = 1;
        struct lup_array_desc d = { .width = p->Width,
                                    .height = p->Height,
                                    .depth = p->Depth,
                                    .format = (uint32_t)p->Format,
                                    .channels = p->NumChannels,
                                    .flags = p->Flags };
        uint64_t id;
        CUresult r = create(&id, &d, numMipmapLevels, "cuMipmappedArrayCreate");
        if (r == CUDA_SUCCESS)
                *pHandle = (CUmipmappedArray)(uintptr_t)id;
        return r;
}

static void forget_locked(uint64_t id)
{
        uint64_t v;
        if (lup_u64map_del(&arrays, id, &v))
                free((struct arr *)(uintptr_t)v);
}

static CUresult destroy(uint64_t id, enum lupc_array_kind kind)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        pthread_mutex_lock(&lock);
        struct arr *a = find_locked(id, kind);
        bool level = a && a->parent;
        pthread_mutex_unlock(&lock);
        if (!a && lupc_handle_was_minted(id))
                return CUDA_ERROR_CONTEXT_IS_DESTROYED; /* destroyed already: the H200's driver answers so */
        if (!a)
                return CUDA_ERROR_INVALID_HANDLE;
        if (level) /* the H200's driver answers success; the level goes with its mipmapped array */
                return CUDA_SUCCESS;
        CUresult r = lupc_send_lupArrayDestroy(id);
        if (r != CUDA_SUCCESS)
                return r;
        pthread_mutex_lock(&lock);
        if ((a = find_locked(id, kind))) {
                for (uint32_t l = 0; kind == LUPC_MIPMAP && l < a->levels; l++)
                        if (a->level_ids[l])
                                forget_locked(a->level_ids[l]);
                forget_locked(id);
        }
        pthread_mutex_unlock(&lock);
        return CUDA_SUCCESS;
}

struct ctx_hunt {
        uint64_t ctx;
        uint64_t *ids;
        size_t n, cap;
};

static void hunt_ctx(uint64_t key, uint64_t val, void *ud)
{
        struct ctx_hunt *h = ud;
        if (((struct arr *)(uintptr_t)val)->ctx == h->ctx && h->n < h->cap)
                h->ids[h->n++] = key;
}

void lupc_arrays_drop_ctx(uint64_t ctx)
{
        lupc_texobjs_drop_ctx(ctx);
        pthread_mutex_lock(&lock);
        struct ctx_hunt h = { .ctx = ctx, .cap = arrays.used };
        h.ids = h.cap ? calloc(h.cap, sizeof(*h.ids)) : NULL;
        if (h.ids)
                lup_u64map_each(&arrays, hunt_ctx, &h);
        for (size_t i = 0; i < h.n; i++)
                forget_locked(h.ids[i]);
        pthread_mutex_unlock(&lock);
        free(h.ids);
}

EXPORT CUresult CUDAAPI cuArrayDestroy(CUarray hArray)
{
        return destroy((uint64_t)(uintptr_t)hArray, LUPC_ARRAY);
}

EXPORT CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
        return destroy((uint64_t)(uintptr_t)hMipmappedArray, LUPC_MIPMAP);
}

EXPORT CUresult CUDAAPI cuMipmappedArrayGetLevel(CUarray *pLevelArray, CUmipmappedArray hMipmappedArray,
                                                 unsigned int level)
{
        uint64_t mid = (uint64_t)(uintptr_t)hMipmappedArray;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pLevelArray)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&lock);
        struct arr *m = find_locked(mid, LUPC_MIPMAP);
        uint64_t have = m && level < m->levels ? m->level_ids[level] : 0;
        struct lup_array_desc ld = m ? lup_array_level_desc(&m->d, level) : (struct lup_array_desc){ 0 };
        uint32_t levels = m ? m->levels : 0;
        pthread_mutex_unlock(&lock);
        if (!m)
                return CUDA_ERROR_INVALID_HANDLE;
        if (level >= levels)
                return CUDA_ERROR_INVALID_VALUE;
        if (have) {
                *pLevelArray = (CUarray)(uintptr_t)have;
                return CUDA_SUCCESS;
        }
        struct arr *a = calloc(1, sizeof(*a));
        if (!a)
                return CUDA_ERROR_OUT_OF_MEMORY;
        *a = (struct arr){
                .kind = LUPC_ARRAY, .d = ld, .shape = lup_array_shape_of(&ld), .parent = mid, .ctx = m->ctx
        };
        uint64_t id = lupc_mint_handle();
        CUresult r = lupc_send_lupMipmapLevel(id, mid, level);
        pthread_mutex_lock(&lock);
        if (r == CUDA_SUCCESS && !(m = find_locked(mid, LUPC_MIPMAP)))
                r = CUDA_ERROR_INVALID_HANDLE; /* destroyed meanwhile */
        else if (r == CUDA_SUCCESS && m->level_ids[level])
                id = m->level_ids[level]; /* another thread asked first: the worker knows both ids */
        else if (r == CUDA_SUCCESS && lup_u64map_put(&arrays, id, (uint64_t)(uintptr_t)a) == 0) {
                m->level_ids[level] = id;
                a = NULL;
        } else if (r == CUDA_SUCCESS)
                r = CUDA_ERROR_OUT_OF_MEMORY;
        pthread_mutex_unlock(&lock);
        free(a);
        if (r == CUDA_SUCCESS)
                *pLevelArray = (CUarray)(uintptr_t)id;
        return r;
}

EXPORT CUresult CUDAAPI cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *pArrayDescriptor, CUarray hArray)
{
        struct lup_array_desc d;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pArrayDescriptor)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_array_find((uint64_t)(uintptr_t)hArray, LUPC_ARRAY, &d, NULL))
                return CUDA_ERROR_INVALID_HANDLE;
        *pArrayDescriptor = (CUDA_ARRAY3D_DESCRIPTOR){ .Width = d.width,
                                                       .Height = d.height,
                                                       .Depth = d.depth,
                                                       .Format = (CUarray_format)d.format,
                                                       .NumChannels = d.channels,
                                                       .Flags = d.flags };
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *pArrayDescriptor, CUarray hArray)
{
        struct lup_array_desc d;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pArrayDescriptor)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_array_find((uint64_t)(uintptr_t)hArray, LUPC_ARRAY, &d, NULL))
                return CUDA_ERROR_INVALID_HANDLE;
        *pArrayDescriptor = (CUDA_ARRAY_DESCRIPTOR){
                .Width = d.width, .Height = d.height, .Format = (CUarray_format)d.format, .NumChannels = d.channels
        };
        return CUDA_SUCCESS;
}

/* Planes exist only for the planar formats, which lupine refuses at
 * creation: every array lupine holds has none. */
EXPORT CUresult CUDAAPI cuArrayGetPlane(CUarray *pPlaneArray, CUarray hArray, unsigned int planeIdx)
{
        (void)planeIdx;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pPlaneArray)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_array_find((uint64_t)(uintptr_t)hArray, LUPC_ARRAY, NULL, NULL))
                return CUDA_ERROR_INVALID_HANDLE;
        return CUDA_ERROR_INVALID_VALUE;
}

static CUresult mem_req(CUDA_ARRAY_MEMORY_REQUIREMENTS *m, uint64_t id, enum lupc_array_kind kind, CUdevice dev)
{
        uint64_t size, align;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!m)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_array_find(id, kind, NULL, NULL))
                return CUDA_ERROR_INVALID_HANDLE;
        CUresult r = lupc_send_lupArrayMemReq(&size, &align, id, dev);
        if (r == CUDA_SUCCESS)
                *m = (CUDA_ARRAY_MEMORY_REQUIREMENTS){ .size = size, .alignment = align };
        return r;
}

EXPORT CUresult CUDAAPI cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *memoryRequirements, CUarray array,
                                                     CUdevice device)
{
        return mem_req(memoryRequirements, (uint64_t)(uintptr_t)array, LUPC_ARRAY, device);
}

EXPORT CUresult CUDAAPI cuMipmappedArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *memoryRequirements,
                                                              CUmipmappedArray mipmap, CUdevice device)
{
        return mem_req(memoryRequirements, (uint64_t)(uintptr_t)mipmap, LUPC_MIPMAP, device);
}

_Static_assert(sizeof(CUDA_ARRAY_SPARSE_PROPERTIES) == 48, "the wire's sparse properties are 48 bytes");

static CUresult sparse(CUDA_ARRAY_SPARSE_PROPERTIES *p, uint64_t id, enum lupc_array_kind kind)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!p)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_array_find(id, kind, NULL, NULL))
                return CUDA_ERROR_INVALID_HANDLE;
        return lupc_send_lupArraySparse(p, id);
}

EXPORT CUresult CUDAAPI cuArrayGetSparseProperties(CUDA_ARRAY_SPARSE_PROPERTIES *sparseProperties, CUarray array)
{
        return sparse(sparseProperties, (uint64_t)(uintptr_t)array, LUPC_ARRAY);
}

EXPORT CUresult CUDAAPI cuMipmappedArrayGetSparseProperties(CUDA_ARRAY_SPARSE_PROPERTIES *sparseProperties,
                                                            CUmipmappedArray mipmap)
{
        return sparse(sparseProperties, (uint64_t)(uintptr_t)mipmap, LUPC_MIPMAP);
}
