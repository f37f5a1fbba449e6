/* SPDX-License-Identifier: MIT */
/*
 * CUDA arrays, mipmapped arrays and texture and surface objects in the
 * sim. An array is plain host memory holding its slices in order (layers
 * and cubemap faces are more slices), rows of width x element bytes with
 * no padding; copies reach it through sim_array_end (sim_copy2d.c). Texture
 * and surface objects are values only, numbered per context from 1,
 * lowest free first, like the driver's: the PTX interpreter does not
 * sample them. A test can
 * start the numbering elsewhere with LUPINE_SIM_TEXOBJ_FIRST (a driver
 * that gives other values after a restore).
 *
 * Locking: the registries are guarded by the driver's rwlock (exclusive to
 * add or remove, shared to look up), like every other registry.
 */
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

#define SIM_TAG_ARRAY  SIM_TAG(0x5d1)
#define SIM_TAG_MIPMAP SIM_TAG(0x5d2)
#define MAX_ARRAYS     65536
#define MAX_OBJECTS    65536
#define MAX_BYTES      (4ULL << 30) /* one array, all levels */
#define MAX_LEVELS     32

struct sim_array {
        CUDA_ARRAY3D_DESCRIPTOR d;
        size_t row, rows, slices;
        uint8_t *data;
        struct sim_mipmap *parent; /* a level: not destroyed on its own */
};

struct sim_mipmap {
        CUDA_ARRAY3D_DESCRIPTOR d;
        unsigned levels;
        struct sim_array *lv[MAX_LEVELS];
        uint64_t lv_handle[MAX_LEVELS];
};

struct sim_texobj {
        bool surface, has_view;
        CUDA_RESOURCE_DESC res;
        CUDA_TEXTURE_DESC tex;
        CUDA_RESOURCE_VIEW_DESC view;
};

static struct sim_svec arrays = { .max = MAX_ARRAYS };
static struct sim_svec mipmaps = { .max = MAX_ARRAYS };
static struct sim_svec objects = { .max = MAX_OBJECTS };
static uint64_t first_object; /* 0: not read yet */

/* Objects are keyed by context and value: each context numbers its own
 * from 1 (LUPINE_SIM_TEXOBJ_FIRST), lowest free first, as the H200's
 * driver does. */
static uint64_t object_key(const struct sim_ctx *c, uint64_t v)
{
        return (c->id << 32) | v;
}

/* Lock held exclusive. */
static uint64_t take_value(const struct sim_ctx *c)
{
        if (!first_object) {
                const char *e = getenv("LUPINE_SIM_TEXOBJ_FIRST");
                unsigned long long v = e ? strtoull(e, NULL, 0) : 0;
                first_object = v && v < (1ull << 31) ? v : 1;
        }
        uint64_t v = first_object;
        while (sim_svec_get(&objects, object_key(c, v)))
                v++;
        return v;
}

static size_t elem_size(CUarray_format f, unsigned ch)
{
        size_t per;
        switch (f) {
        case CU_AD_FORMAT_UNSIGNED_INT8:
        case CU_AD_FORMAT_SIGNED_INT8:
                per = 1;
                break;
        case CU_AD_FORMAT_UNSIGNED_INT16:
        case CU_AD_FORMAT_SIGNED_INT16:
        case CU_AD_FORMAT_HALF:
                per = 2;
                break;
        case CU_AD_FORMAT_UNSIGNED_INT32:
        case CU_AD_FORMAT_SIGNED_INT32:
        case CU_AD_FORMAT_FLOAT:
                per = 4;
                break;
        default:
                return 0;
        }
        return ch == 1 || ch == 2 || ch == 4 ? per * ch : 0;
}

/* The driver's shape rules, the sim's size limit. */
static CUresult desc_check(const CUDA_ARRAY3D_DESCRIPTOR *d)
{
        unsigned known =
                CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_CUBEMAP | CUDA_ARRAY3D_TEXTURE_GATHER;
        bool layered = d->Flags & CUDA_ARRAY3D_LAYERED, cube = d->Flags & CUDA_ARRAY3D_CUBEMAP;
        if (d->Flags & ~known)
                return CUDA_ERROR_INVALID_VALUE;
        size_t e = elem_size(d->Format, d->NumChannels);
        if (!e || d->Width == 0)
                return CUDA_ERROR_INVALID_VALUE;
        if (cube && (d->Width != d->Height || d->Depth == 0 || d->Depth % 6 || (!layered && d->Depth != 6)))
                return CUDA_ERROR_INVALID_VALUE;
        if (layered && d->Depth == 0)
                return CUDA_ERROR_INVALID_VALUE;
        if (!layered && !cube && d->Depth && !d->Height)
                return CUDA_ERROR_INVALID_VALUE;
        if (d->Width > 131072 || d->Height > 65536 || d->Depth > 32768)
                return CUDA_ERROR_INVALID_VALUE;
        size_t rows = d->Height ? d->Height : 1, slices = d->Depth ? d->Depth : 1;
        if ((unsigned __int128)d->Width * e * rows * slices > MAX_BYTES)
                return CUDA_ERROR_OUT_OF_MEMORY;
        return CUDA_SUCCESS;
}

static struct sim_array *array_new(const CUDA_ARRAY3D_DESCRIPTOR *d)
{
        struct sim_array *a = calloc(1, sizeof(*a));
        if (!a)
                return NULL;
        a->d = *d;
        a->row = d->Width * elem_size(d->Format, d->NumChannels);
        a->rows = d->Height ? d->Height : 1;
        a->slices = d->Depth ? d->Depth : 1;
        a->data = calloc(a->slices, a->row * a->rows);
        if (!a->data) {
                free(a);
                return NULL;
        }
        return a;
}

static void array_free(struct sim_array *a)
{
        if (a) {
                free(a->data);
                free(a);
        }
}

static CUresult enter(struct sim_driver *drv, struct sim_svec *t, void *obj, uint64_t tag, uint64_t *ret)
{
        uint64_t id;
        if (sim_handle_register(drv, t, obj, &id) < 0)
                return CUDA_ERROR_OUT_OF_MEMORY;
        *ret = tag | id;
        return CUDA_SUCCESS;
}

SIM_API CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *p)
{
        struct sim_driver *drv = sim_driver_get();
        uint64_t h;
        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pHandle || !p)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = desc_check(p);
        if (r != CUDA_SUCCESS)
                return r;
        struct sim_array *a = array_new(p);
        if (!a)
                return CUDA_ERROR_OUT_OF_MEMORY;
        sim_wrlock(drv);
        r = sim_ctx_current(drv, NULL, NULL);
        if (r == CUDA_SUCCESS)
                r = enter(drv, &arrays, a, SIM_TAG_ARRAY, &h);
        sim_unlock(drv);
        if (r != CUDA_SUCCESS) {
                array_free(a);
                return r;
        }
        *pHandle = (CUarray)(uintptr_t)h;
        return CUDA_SUCCESS;
}

SIM_API CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *p)
{
        if (!p)
                return CUDA_ERROR_INVALID_VALUE;
        CUDA_ARRAY3D_DESCRIPTOR d = {
                .Width = p->Width, .Height = p->Height, .Format = p->Format, .NumChannels = p->NumChannels
        };
        return cuArray3DCreate_v2(pHandle, &d);
}

SIM_API CUresult cuArrayDestroy(CUarray hArray)
{
        struct sim_driver *drv = sim_driver_get();
        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_wrlock(drv);
        struct sim_array *a = sim_handle_get(&arrays, (uint64_t)(uintptr_t)hArray, SIM_TAG_ARRAY);
        if (a && !a->parent)
                (void)sim_handle_take(&arrays, (uint64_t)(uintptr_t)hArray, SIM_TAG_ARRAY);
        sim_unlock(drv);
        if (!a || a->parent)
                return CUDA_ERROR_INVALID_HANDLE;
        array_free(a);
        return CUDA_SUCCESS;
}

SIM_API CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *pDesc, CUarray hArray)
{
        struct sim_driver *drv = sim_driver_get();
        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pDesc)
                return CUDA_ERROR_INVALID_VALUE;
        sim_rdlock(drv);
        struct sim_array *a = sim_handle_get(&arrays, (uint64_t)(uintptr_t)hArray, SIM_TAG_ARRAY);
        if (a)
                *pDesc = a->d;
        sim_unlock(drv);
        return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

SIM_API CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *pDesc, CUarray hArray)
{
        CUDA_ARRAY3D_DESCRIPTOR d;
        if (!pDesc)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = cuArray3DGetDescriptor_v2(&d, hArray);
        if (r == CUDA_SUCCESS)
                *pDesc = (CUDA_ARRAY_DESCRIPTOR){
                        .Width = d.Width, .Height = d.Height, .Format = d.Format, .NumChannels = d.NumChannels
                };
        return r;
}

/* The sim's arrays are linear: their memory needs as a deferred array's. */
static CUresult requirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *m, size_t bytes)
{
        *m = (CUDA_ARRAY_MEMORY_REQUIREMENTS){ .size = (bytes + 65535) & ~(size_t)65535, .alignment = 65536 };
        return CUDA_SUCCESS;
}

SIM_API CUresult cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *m, CUarray array, CUdevice dev)
{
        struct sim_driver *drv = sim_driver_get();
        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!m || !sim_device_at(drv, dev))
                return CUDA_ERROR_INVALID_VALUE;
        sim_rdlock(drv);
        struct sim_array *a = sim_handle_get(&arrays, (uint64_t)(uintptr_t)array, SIM_TAG_ARRAY);
        size_t bytes = a ? a->row * a->rows * a->slices : 0;
        sim_unlock(drv);
        return a ? requirements(m, bytes) : CUDA_ERROR_INVALID_HANDLE;
}

/* Not sparse: the driver's answer for an array made without the flag. */
SIM_API CUresult cuArrayGetSparseProperties(CUDA_ARRAY_SPARSE_PROPERTIES *p, CUarray array)
{
        (void)p, (void)array;
        return CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuMipmappedArrayGetSparseProperties(CUDA_ARRAY_SPARSE_PROPERTIES *p, CUmipmappedArray m)
{
        (void)p, (void)m;
        return CUDA_ERROR_INVALID_VALUE;
}

static CUDA_ARRAY3D_DESCRIPTOR level_desc(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned l)
{
        CUDA_ARRAY3D_DESCRIPTOR x = *d;
        bool keep = d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP);
        x.Width = d->Width >> l ? d->Width >> l : 1;
        if (d->Height)
                x.Height = d->Height >> l ? d->Height >> l : 1;
        if (d->Depth && !keep)
                x.Depth = d->Depth >> l ? d->Depth >> l : 1;
        return x;
}

static void mipmap_free(struct sim_mipmap *m)
{
        for (unsigned l = 0; m && l < m->levels; l++)
                array_free(m->lv[l]);
        free(m);
}

static struct sim_mipmap *mipmap_new(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels)
{
        struct sim_mipmap *m = calloc(1, sizeof(*m));
        if (!m)
                return NULL;
        m->d = *d;
        m->levels = levels;
        for (unsigned l = 0; l < levels; l++) {
                CUDA_ARRAY3D_DESCRIPTOR ld = level_desc(d, l);
                if (!(m->lv[l] = array_new(&ld))) {
                        mipmap_free(m);
                        return NULL;
                }
                m->lv[l]->parent = m;
        }
        return m;
}

SIM_API CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *p,
                                        unsigned int numMipmapLevels)
{
        struct sim_driver *drv = sim_driver_get();
        uint64_t h = 0;
        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pHandle || !p || numMipmapLevels > MAX_LEVELS)
                return CUDA_ERROR_INVALID_VALUE;
        if (numMipmapLevels == 0) /* as the H200's driver: one level */
                numMipmapLevels = 1;
        CUresult r = desc_check(p);
        if (r != CUDA_SUCCESS)
                return r;
        struct sim_mipmap *m = mipmap_new(p, numMipmapLevels);
        if (!m)
                return CUDA_ERROR_OUT_OF_MEMORY;
        sim_wrlock(drv);
        r = sim_ctx_current(drv, NULL, NULL);
        if (r == CUDA_SUCCESS)
                r = enter(drv, &mipmaps, m, SIM_TAG_MIPMAP, &h);
        for (unsigned l = 0; r == CUDA_SUCCESS && l < m->levels; l++)
                r = enter(drv, &arrays, m->lv[l], SIM_TAG_ARRAY, &m->lv_handle[l]);
        if (r != CUDA_SUCCESS) {
                for (unsigned l = 0; l < m->levels; l++)
                        if (m->lv_handle[l])
                                (void)sim_handle_take(&arrays, m->lv_handle[l], SIM_TAG_ARRAY);
                (void)sim_handle_take(&mipmaps, h, SIM_TAG_MIPMAP);
        }
        sim_unlock(drv);
        if (r != CUDA_SUCCESS) {
                mipmap_free(m);
                return r;
        }
        *pHandle = (CUmipmappedArray)(uintptr_t)h;
        return CUDA_SUCCESS;
}

SIM_API CUresult cuMipmappedArrayGetLevel(CUarray *pLevelArray, CUmipmappedArray hMipmappedArray, unsigned int level)
{
        struct sim_driver *drv = sim_driver_get();
        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pLevelArray)
                return CUDA_ERROR_INVALID_VALUE;
        sim_rdlock(drv);
        struct sim_mipmap *m = sim_handle_get(&mipmaps, (uint64_t)(uintptr_t)hMipmappedArray, SIM_TAG_MIPMAP);
        CUresult r = !m ? CUDA_ERROR_INVALID_HANDLE : level >= m->levels ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
        if (r == CUDA_SUCCESS)
                *pLevelArray = (CUarray)(uintptr_t)m->lv_handle[level];
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
        struct sim_driver *drv = sim_driver_get();
        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_wrlock(drv);
        struct sim_mipmap *m = sim_handle_take(&mipmaps, (uint64_t)(uintptr_t)hMipmappedArray, SIM_TAG_MIPMAP);
        for (unsigned l = 0; m && l < m->levels; l++)
                (void)sim_handle_take(&arrays, m->lv_handle[l], SIM_TAG_ARRAY);
        sim_unlock(drv);
        if (!m)
                return CUDA_ERROR_INVALID_HANDLE;
        mipmap_free(m);
        return CUDA_SUCCESS;
}

SIM_API CUresult cuMipmappedArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *mr, CUmipmappedArray mm,
                                                       CUdevice dev)
{
        struct sim_driver *drv = sim_driver_get();
        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!mr || !sim_device_at(drv, dev))
                return CUDA_ERROR_INVALID_VALUE;
        sim_rdlock(drv);
        struct sim_mipmap *m = sim_handle_get(&mipmaps, (uint64_t)(uintptr_t)mm, SIM_TAG_MIPMAP);
        size_t bytes = 0;
        for (unsigned l = 0; m && l < m->levels; l++)
                bytes += m->lv[l]->row * m->lv[l]->rows * m->lv[l]->slices;
        sim_unlock(drv);
        return m ? requirements(mr, bytes) : CUDA_ERROR_INVALID_HANDLE;
}

CUresult sim_array_end(CUarray h, size_t x, size_t y, size_t z, size_t width, size_t height, size_t depth,
                       uintptr_t *ret_base, size_t *ret_pitch, size_t *ret_slice)
{
        struct sim_driver *drv = sim_driver_get();
        CUresult r = CUDA_SUCCESS;
        sim_rdlock(drv);
        struct sim_array *a = sim_handle_get(&arrays, (uint64_t)(uintptr_t)h, SIM_TAG_ARRAY);
        if (!a)
                r = CUDA_ERROR_INVALID_HANDLE;
        else if (x > a->row || width > a->row - x || y > a->rows || height > a->rows - y || z > a->slices ||
                 depth > a->slices - z)
                r = CUDA_ERROR_INVALID_VALUE;
        else {
                *ret_base = (uintptr_t)a->data + (z * a->rows + y) * a->row + x;
                *ret_pitch = a->row;
                *ret_slice = a->row * a->rows;
        }
        sim_unlock(drv);
        return r;
}

/* ---- texture and surface objects */

static CUresult resource_check(struct sim_driver *drv, const CUDA_RESOURCE_DESC *r, bool surface)
{
        if (r->flags)
                return CUDA_ERROR_INVALID_VALUE;
        switch (r->resType) {
        case CU_RESOURCE_TYPE_ARRAY:
                return sim_handle_get(&arrays, (uint64_t)(uintptr_t)r->res.array.hArray, SIM_TAG_ARRAY)
                               ? CUDA_SUCCESS
                               : CUDA_ERROR_INVALID_HANDLE;
        case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
                if (surface)
                        return CUDA_ERROR_INVALID_VALUE;
                return sim_handle_get(&mipmaps, (uint64_t)(uintptr_t)r->res.mipmap.hMipmappedArray, SIM_TAG_MIPMAP)
                               ? CUDA_SUCCESS
                               : CUDA_ERROR_INVALID_HANDLE;
        case CU_RESOURCE_TYPE_LINEAR:
                if (surface || !r->res.linear.sizeInBytes)
                        return CUDA_ERROR_INVALID_VALUE;
                return sim_check_device_range(drv, r->res.linear.devPtr, r->res.linear.sizeInBytes, SIM_NEED_READ);
        case CU_RESOURCE_TYPE_PITCH2D: {
                size_t e = elem_size(r->res.pitch2D.format, r->res.pitch2D.numChannels);
                size_t w = r->res.pitch2D.width * e, p = r->res.pitch2D.pitchInBytes, h = r->res.pitch2D.height;
                if (surface || !e || !h || p < w)
                        return CUDA_ERROR_INVALID_VALUE;
                return sim_check_device_range(drv, r->res.pitch2D.devPtr, (h - 1) * p + w, SIM_NEED_READ);
        }
        default:
                return CUDA_ERROR_INVALID_VALUE;
        }
}

static CUresult object_create(uint64_t *ret, const struct sim_texobj *o)
{
        struct sim_driver *drv = sim_driver_get();
        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        struct sim_texobj *n = malloc(sizeof(*n));
        if (!n)
                return CUDA_ERROR_OUT_OF_MEMORY;
        *n = *o;
        struct sim_ctx *c = NULL;
        uint64_t v = 0;
        sim_wrlock(drv);
        CUresult r = sim_ctx_current(drv, &c, NULL);
        if (r == CUDA_SUCCESS)
                r = resource_check(drv, &o->res, o->surface);
        if (r == CUDA_SUCCESS) {
                v = take_value(c);
                if (sim_svec_insert(&objects, object_key(c, v), n) < 0)
                        r = CUDA_ERROR_OUT_OF_MEMORY;
        }
        sim_unlock(drv);
        if (r != CUDA_SUCCESS) {
                free(n);
                return r;
        }
        *ret = v;
        return CUDA_SUCCESS;
}

SIM_API CUresult cuTexObjectCreate(CUtexObject *pTexObject, const CUDA_RESOURCE_DESC *pResDesc,
                                   const CUDA_TEXTURE_DESC *pTexDesc, const CUDA_RESOURCE_VIEW_DESC *pResViewDesc)
{
        struct sim_texobj o = { .has_view = pResViewDesc != NULL };
        uint64_t v;
        if (!pTexObject || !pResDesc || !pTexDesc)
                return CUDA_ERROR_INVALID_VALUE;
        o.res = *pResDesc;
        o.tex = *pTexDesc;
        if (pResViewDesc)
                o.view = *pResViewDesc;
        CUresult r = object_create(&v, &o);
        if (r == CUDA_SUCCESS)
                *pTexObject = v;
        return r;
}

SIM_API CUresult cuSurfObjectCreate(CUsurfObject *pSurfObject, const CUDA_RESOURCE_DESC *pResDesc)
{
        struct sim_texobj o = { .surface = true };
        uint64_t v;
        if (!pSurfObject || !pResDesc)
                return CUDA_ERROR_INVALID_VALUE;
        o.res = *pResDesc;
        CUresult r = object_create(&v, &o);
        if (r == CUDA_SUCCESS)
                *pSurfObject = v;
        return r;
}

static CUresult object_destroy(uint64_t v, bool surface)
{
        struct sim_driver *drv = sim_driver_get();
        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        struct sim_ctx *c = NULL;
        struct sim_texobj *o = NULL;
        sim_wrlock(drv);
        if (sim_ctx_current(drv, &c, NULL) == CUDA_SUCCESS && v < (1ull << 32))
                o = sim_svec_get(&objects, object_key(c, v));
        if (o && o->surface == surface)
                (void)sim_svec_remove(&objects, object_key(c, v));
        else
                o = NULL;
        sim_unlock(drv);
        free(o);
        return o ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuTexObjectDestroy(CUtexObject texObject)
{
        return object_destroy(texObject, false);
}

SIM_API CUresult cuSurfObjectDestroy(CUsurfObject surfObject)
{
        return object_destroy(surfObject, true);
}
