/* SPDX-License-Identifier: MIT */
/*
 * Texture and surface objects. Kernels take the object's value by value,
 * so the value the program sees is the driver's own (the worker's): a
 * restore re-creates every live object under the same value or refuses
 * the session (worker/texobj.c). The descriptors stay here for the
 * Get*Desc calls. Resources name arrays and mipmapped arrays by the ids
 * this process minted (the worker puts the real ones in) and linear or
 * pitched memory by arena addresses (the same on both sides).
 *
 * The legacy texture and surface references (cuTexRef*, cuSurfRef*,
 * cuModuleGetTexRef/SurfRef) stay CUDA_ERROR_NOT_SUPPORTED: every CUDA
 * release since 12.0 builds programs without them.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "arrays.h"
#include "client.h"
#include "shim_gen.h"
#include "u64map.h"

#define EXPORT __attribute__((visibility("default")))

_Static_assert(sizeof(CUDA_RESOURCE_DESC) == 144, "the wire's resource descriptor is 144 bytes");
_Static_assert(sizeof(CUDA_TEXTURE_DESC) == 104, "the wire's texture descriptor is 104 bytes");
_Static_assert(sizeof(CUDA_RESOURCE_VIEW_DESC) == 112, "the wire's resource view descriptor is 112 bytes");

#define MAX_OBJECTS (1u << 20)

struct texobj {
        uint64_t ctx; /* the context it was made in */
        bool surface;
        bool has_view;
        CUDA_RESOURCE_DESC res;
        CUDA_TEXTURE_DESC tex;
        CUDA_RESOURCE_VIEW_DESC view;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct lup_u64map objects = { .limit = MAX_OBJECTS };

/* What the shim can tell about a resource before the worker does. */
static CUresult check_resource(const CUDA_RESOURCE_DESC *r, bool surface)
{
        if (r->flags)
                return CUDA_ERROR_INVALID_VALUE;
        switch (r->resType) {
        case CU_RESOURCE_TYPE_ARRAY:
                return lupc_array_find((uint64_t)(uintptr_t)r->res.array.hArray, LUPC_ARRAY, NULL, NULL)
                               ? CUDA_SUCCESS
                               : CUDA_ERROR_INVALID_HANDLE;
        case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
                if (surface)
                        return CUDA_ERROR_INVALID_VALUE;
                return lupc_array_find((uint64_t)(uintptr_t)r->res.mipmap.hMipmappedArray, LUPC_MIPMAP, NULL, NULL)
                               ? CUDA_SUCCESS
                               : CUDA_ERROR_INVALID_HANDLE;
        case CU_RESOURCE_TYPE_LINEAR:
                if (surface)
                        return CUDA_ERROR_INVALID_VALUE;
                /* the worker checks the range (cuMemAlloc, pools, VMM mappings) */
                return lupc_in_arena(r->res.linear.devPtr) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
        case CU_RESOURCE_TYPE_PITCH2D:
                if (surface)
                        return CUDA_ERROR_INVALID_VALUE;
                return lupc_in_arena(r->res.pitch2D.devPtr) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
        default:
                return CUDA_ERROR_INVALID_VALUE;
        }
}

static CUresult remember(uint64_t value, const struct texobj *o)
{
        struct texobj *n = malloc(sizeof(*n));
        if (!n)
                return CUDA_ERROR_OUT_OF_MEMORY;
        *n = *o;
        n->ctx = lupc_ctx_current();
        pthread_mutex_lock(&lock);
        uint64_t old;
        if (lup_u64map_del(&objects, value, &old))
                free((struct texobj *)(uintptr_t)old); /* a value the driver reused */
        int rc = lup_u64map_put(&objects, value, (uint64_t)(uintptr_t)n);
        pthread_mutex_unlock(&lock);
        if (rc < 0) {
                free(n);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuTexObjectCreate(CUtexObject *pTexObject, const CUDA_RESOURCE_DESC *pResDesc,
                                          const CUDA_TEXTURE_DESC *pTexDesc,
                                          const CUDA_RESOURCE_VIEW_DESC *pResViewDesc)
{
        struct texobj o = { .has_view = pResViewDesc != NULL };
        uint64_t value;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pTexObject || !pResDesc || !pTexDesc)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = check_resource(pResDesc, false);
        if (r != CUDA_SUCCESS)
                return r;
        o.res = *pResDesc;
        o.tex = *pTexDesc;
        if (pResViewDesc)
                o.view = *pResViewDesc;
        r = lupc_send_lupTexObjectCreate(&value, &o.res, &o.tex, &o.view, o.has_view);
        if (r == CUDA_SUCCESS && (r = remember(value, &o)) != CUDA_SUCCESS)
                (void)lupc_send_lupTexObjectDestroy(value);
        if (r == CUDA_SUCCESS)
                *pTexObject = value;
        return r;
}

EXPORT CUresult CUDAAPI cuSurfObjectCreate(CUsurfObject *pSurfObject, const CUDA_RESOURCE_DESC *pResDesc)
{
        struct texobj o = { .surface = true };
        uint64_t value;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pSurfObject || !pResDesc)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = check_resource(pResDesc, true);
        if (r != CUDA_SUCCESS)
                return r;
        o.res = *pResDesc;
        r = lupc_send_lupSurfObjectCreate(&value, &o.res);
        if (r == CUDA_SUCCESS && (r = remember(value, &o)) != CUDA_SUCCESS)
                (void)lupc_send_lupSurfObjectDestroy(value);
        if (r == CUDA_SUCCESS)
                *pSurfObject = value;
        return r;
}

/* A copy of the live object of that value and kind, or false. */
static bool find(uint64_t value, bool surface, struct texobj *ret)
{
        uint64_t v;
        pthread_mutex_lock(&lock);
        bool ok = lup_u64map_get(&objects, value, &v) && ((struct texobj *)(uintptr_t)v)->surface == surface;
        if (ok)
                *ret = *(struct texobj *)(uintptr_t)v;
        pthread_mutex_unlock(&lock);
        return ok;
}

static CUresult destroy(uint64_t value, bool surface)
{
        struct texobj o;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!find(value, surface, &o))
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = surface ? lupc_send_lupSurfObjectDestroy(value) : lupc_send_lupTexObjectDestroy(value);
        if (r != CUDA_SUCCESS)
                return r;
        uint64_t v;
        pthread_mutex_lock(&lock);
        if (lup_u64map_del(&objects, value, &v))
                free((struct texobj *)(uintptr_t)v);
        pthread_mutex_unlock(&lock);
        return CUDA_SUCCESS;
}

struct ctx_hunt {
        uint64_t ctx;
        uint64_t *keys;
        size_t n, cap;
};

static void hunt_ctx(uint64_t key, uint64_t val, void *ud)
{
        struct ctx_hunt *h = ud;
        if (((struct texobj *)(uintptr_t)val)->ctx == h->ctx && h->n < h->cap)
                h->keys[h->n++] = key;
}

void lupc_texobjs_drop_ctx(uint64_t ctx)
{
        pthread_mutex_lock(&lock);
        struct ctx_hunt h = { .ctx = ctx, .cap = objects.used };
        h.keys = h.cap ? calloc(h.cap, sizeof(*h.keys)) : NULL;
        if (h.keys)
                lup_u64map_each(&objects, hunt_ctx, &h);
        for (size_t i = 0; i < h.n; i++) {
                uint64_t v;
                if (lup_u64map_del(&objects, h.keys[i], &v))
                        free((struct texobj *)(uintptr_t)v);
        }
        pthread_mutex_unlock(&lock);
        free(h.keys);
}

EXPORT CUresult CUDAAPI cuTexObjectDestroy(CUtexObject texObject)
{
        return destroy(texObject, false);
}

EXPORT CUresult CUDAAPI cuSurfObjectDestroy(CUsurfObject surfObject)
{
        return destroy(surfObject, true);
}

EXPORT CUresult CUDAAPI cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc, CUtexObject texObject)
{
        struct texobj o;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pResDesc || !find(texObject, false, &o))
                return CUDA_ERROR_INVALID_VALUE;
        *pResDesc = o.res;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC *pTexDesc, CUtexObject texObject)
{
        struct texobj o;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pTexDesc || !find(texObject, false, &o))
                return CUDA_ERROR_INVALID_VALUE;
        *pTexDesc = o.tex;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuTexObjectGetResourceViewDesc(CUDA_RESOURCE_VIEW_DESC *pResViewDesc, CUtexObject texObject)
{
        struct texobj o;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pResViewDesc || !find(texObject, false, &o))
                return CUDA_ERROR_INVALID_VALUE;
        /* made without a view: the H200's driver answers success; lupine
         * gives an all-zero view (the driver's contents are not known) */
        if (o.has_view)
                *pResViewDesc = o.view;
        else
                memset(pResViewDesc, 0, sizeof(*pResViewDesc));
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc, CUsurfObject surfObject)
{
        struct texobj o;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pResDesc || !find(surfObject, true, &o))
                return CUDA_ERROR_INVALID_VALUE;
        *pResDesc = o.res;
        return CUDA_SUCCESS;
}
