/* SPDX-License-Identifier: MIT */
/*
 * CUDA arrays and mipmapped arrays: the shim mints the ids, this file maps
 * them to the driver's arrays and runs the copies with an array end
 * (lupArrayCopy: its other end is arena memory or another array; host ends
 * were staged through arena memory by the shim). Nothing the shim checked
 * is trusted: descriptors, ids and every box are checked again here.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "worker/arrays.h"
#include "worker_gen.h"

static void ids_ready(struct lupw_session *s)
{
        if (!s->arrays.ids.limit)
                lup_u64map_init(&s->arrays.ids, LUP_MAX_ARRAYS + LUP_MAX_ARRAYS / 2);
}

struct lupw_array *lupw_array_find(struct lupw_session *s, uint64_t id, bool mipmap)
{
        uint64_t v;
        if (!s->arrays.ids.limit || !lup_u64map_get(&s->arrays.ids, id, &v))
                return NULL;
        struct lupw_array *a = (struct lupw_array *)(uintptr_t)v;
        return (a->levels != 0) == mipmap ? a : NULL;
}

struct lupw_array *lupw_array_get(struct lupw_session *s, uint64_t id, bool mipmap)
{
        struct lupw_array *a = lupw_array_find(s, id, mipmap);
        return a && !a->dead ? a : NULL;
}

CUresult lupw_array_put(struct lupw_session *s, const struct lupw_array *a)
{
        ids_ready(s);
        struct lupw_array *n = malloc(sizeof(*n));
        if (!n)
                return CUDA_ERROR_OUT_OF_MEMORY;
        *n = *a;
        if (lup_u64map_put(&s->arrays.ids, a->id, (uint64_t)(uintptr_t)n) < 0) {
                free(n);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        return CUDA_SUCCESS;
}

static CUDA_ARRAY3D_DESCRIPTOR driver_desc(const struct lup_array_desc *d)
{
        return (CUDA_ARRAY3D_DESCRIPTOR){ .Width = d->width,
                                          .Height = d->height,
                                          .Depth = d->depth,
                                          .Format = (CUarray_format)d->format,
                                          .NumChannels = d->channels,
                                          .Flags = d->flags };
}

CUresult lupw_array_make(struct lupw_session *s, struct lupw_array *a)
{
        const struct lupw_backend *be = lupw_be(s);
        CUDA_ARRAY3D_DESCRIPTOR d = driver_desc(&a->d);
        if (a->parent) {
                struct lupw_array *m = lupw_array_find(s, a->parent, true);
                CUarray l = NULL;
                if (!m || a->level >= m->levels)
                        return CUDA_ERROR_INVALID_HANDLE;
                CUresult r = be->cuMipmappedArrayGetLevel(&l, (CUmipmappedArray)m->real, a->level);
                if (r == CUDA_SUCCESS)
                        a->real = l;
                return r;
        }
        if (a->levels) {
                CUmipmappedArray m = NULL;
                CUresult r = be->cuMipmappedArrayCreate(&m, &d, a->levels);
                if (r == CUDA_SUCCESS)
                        a->real = m;
                return r;
        }
        CUarray h = NULL;
        CUresult r = be->cuArray3DCreate_v2(&h, &d);
        if (r == CUDA_SUCCESS)
                a->real = h;
        return r;
}

static bool id_fresh(struct lupw_session *s, uint64_t id)
{
        return id >= LUP_FIRST_HANDLE_ID && (id - LUP_FIRST_HANDLE_ID) % 16 == 0 &&
               !(s->arrays.ids.limit && lup_u64map_get(&s->arrays.ids, id, NULL));
}

CUresult lupw_lupArrayCreate(struct lupw_session *s, uint64_t id, uint64_t width, uint64_t height, uint64_t depth,
                             unsigned int format, unsigned int channels, unsigned int flags, unsigned int levels)
{
        struct lupw_array a = { .id = id,
                                .ctx = s->ctx.bound_id,
                                .levels = levels,
                                .d = { .width = width,
                                       .height = height,
                                       .depth = depth,
                                       .format = format,
                                       .channels = channels,
                                       .flags = flags } };
        const char *why;
        int rc = lup_array_check(&a.d, levels, &a.shape, &why);
        if (rc < 0)
                return rc == -ENOTSUP ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
        if (!id_fresh(s, id))
                return CUDA_ERROR_INVALID_VALUE; /* a broken client: ids are minted once */
        if (s->arrays.ids.used >= LUP_MAX_ARRAYS)
                return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r = lupw_array_make(s, &a);
        if (r != CUDA_SUCCESS)
                return r;
        if ((r = lupw_array_put(s, &a)) != CUDA_SUCCESS) {
                if (levels)
                        (void)lupw_be(s)->cuMipmappedArrayDestroy((CUmipmappedArray)a.real);
                else
                        (void)lupw_be(s)->cuArrayDestroy((CUarray)a.real);
        }
        return r;
}

CUresult lupw_lupMipmapLevel(struct lupw_session *s, uint64_t id, uint64_t mipmap, unsigned int level)
{
        struct lupw_array *m = lupw_array_get(s, mipmap, true);
        if (!m)
                return CUDA_ERROR_INVALID_HANDLE;
        if (level >= m->levels)
                return CUDA_ERROR_INVALID_VALUE;
        if (!id_fresh(s, id))
                return CUDA_ERROR_INVALID_VALUE;
        struct lupw_array a = {
                .id = id, .ctx = m->ctx, .parent = mipmap, .level = level, .d = lup_array_level_desc(&m->d, level)
        };
        a.shape = lup_array_shape_of(&a.d);
        CUresult r = lupw_array_make(s, &a);
        return r == CUDA_SUCCESS ? lupw_array_put(s, &a) : r;
}

static void forget(struct lupw_session *s, uint64_t id)
{
        uint64_t v;
        if (lup_u64map_del(&s->arrays.ids, id, &v))
                free((struct lupw_array *)(uintptr_t)v);
}

struct level_hunt {
        uint64_t parent;
        uint64_t ids[LUP_MAX_MIP_LEVELS];
        size_t n;
};

static void hunt_levels(uint64_t key, uint64_t val, void *ud)
{
        struct level_hunt *h = ud;
        const struct lupw_array *a = (const struct lupw_array *)(uintptr_t)val;
        if (a->parent == h->parent && h->n < LUP_MAX_MIP_LEVELS)
                h->ids[h->n++] = key;
}

/* The array or mipmapped array a resource names (its id), or 0. */
static uint64_t resource_array(const uint8_t *raw)
{
        CUDA_RESOURCE_DESC r;
        memcpy(&r, raw, sizeof(r));
        if (r.resType == CU_RESOURCE_TYPE_ARRAY)
                return (uint64_t)(uintptr_t)r.res.array.hArray;
        if (r.resType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY)
                return (uint64_t)(uintptr_t)r.res.mipmap.hMipmappedArray;
        return 0;
}

bool lupw_arrays_named(struct lupw_session *s, uint64_t id)
{
        for (size_t i = 0; i < s->arrays.n_objs; i++) {
                uint64_t h = resource_array(s->arrays.objs[i].res);
                struct lupw_array *a = h ? lupw_array_find(s, h, false) : NULL;
                if (h == id || (a && a->parent == id))
                        return true;
        }
        return false;
}

/* Destroys array or mipmapped array id (and a mipmapped array's levels) in
 * the driver and forgets it, dead or not. */
static CUresult destroy_now(struct lupw_session *s, uint64_t id)
{
        struct lupw_array *a = lupw_array_find(s, id, false), *m = lupw_array_find(s, id, true);
        CUresult r;
        if (a && !a->parent)
                r = lupw_be(s)->cuArrayDestroy((CUarray)a->real);
        else if (m)
                r = lupw_be(s)->cuMipmappedArrayDestroy((CUmipmappedArray)m->real);
        else
                return CUDA_ERROR_INVALID_HANDLE;
        if (r != CUDA_SUCCESS)
                return r;
        if (m) {
                struct level_hunt h = { .parent = id };
                lup_u64map_each(&s->arrays.ids, hunt_levels, &h);
                for (size_t i = 0; i < h.n; i++)
                        forget(s, h.ids[i]);
        }
        forget(s, id);
        return CUDA_SUCCESS;
}

/* A texture or surface object made on an array the client then destroys
 * stays a valid value to the client (reading it is the program's bug, as on
 * the driver); the worker keeps such an array until the last object naming
 * it goes, so that a restore can make every live object again. */
CUresult lupw_lupArrayDestroy(struct lupw_session *s, uint64_t id)
{
        struct lupw_array *a = lupw_array_get(s, id, false), *m = lupw_array_get(s, id, true);
        if ((!a || a->parent) && !m)
                return CUDA_ERROR_INVALID_HANDLE; /* unknown, destroyed, or a level */
        if (!lupw_arrays_named(s, id))
                return destroy_now(s, id);
        (a ? a : m)->dead = true;
        if (m) {
                struct level_hunt h = { .parent = id };
                lup_u64map_each(&s->arrays.ids, hunt_levels, &h);
                for (size_t i = 0; i < h.n; i++)
                        lupw_array_find(s, h.ids[i], false)->dead = true;
        }
        return CUDA_SUCCESS;
}

struct dead_hunt {
        uint64_t ids[64];
        size_t n;
};

static void hunt_dead(uint64_t key, uint64_t val, void *ud)
{
        struct dead_hunt *h = ud;
        const struct lupw_array *a = (const struct lupw_array *)(uintptr_t)val;
        if (a->dead && !a->parent && h->n < 64)
                h->ids[h->n++] = key;
}

void lupw_arrays_reap(struct lupw_session *s)
{
        struct dead_hunt h = { .n = 0 };
        if (!s->arrays.ids.limit)
                return;
        lup_u64map_each(&s->arrays.ids, hunt_dead, &h);
        for (size_t i = 0; i < h.n; i++)
                if (!lupw_arrays_named(s, h.ids[i]))
                        (void)destroy_now(s, h.ids[i]);
}

/* One end of a copy as the driver's descriptor wants it, checked. */
static CUresult end_resolve(struct lupw_session *s, const struct lup_copy_end *e, const struct lup_array_copy *c,
                            CUmemorytype *type, CUdeviceptr *dev, CUarray *arr, size_t *pitch, size_t *height)
{
        if (e->kind == LUP_END_ARRAY) {
                struct lupw_array *a = lupw_array_get(s, e->handle, false);
                if (!a)
                        return CUDA_ERROR_INVALID_HANDLE;
                if (!lup_array_box_fits(&a->shape, e, c->width, c->height, c->depth))
                        return CUDA_ERROR_INVALID_VALUE;
                *type = CU_MEMORYTYPE_ARRAY;
                *arr = (CUarray)a->real;
                return CUDA_SUCCESS;
        }
        uint64_t first, span;
        if (!lup_device_end_span(e, c->width, c->height, c->depth, &first, &span))
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = lupw_check_range(s, first, span, 1);
        if (r != CUDA_SUCCESS)
                return r;
        *type = CU_MEMORYTYPE_DEVICE;
        *dev = lupw_xlate(s, e->handle);
        *pitch = e->pitch ? e->pitch : c->width;
        *height = e->height ? e->height : c->height;
        return CUDA_SUCCESS;
}

CUresult lupw_lupArrayCopy(struct lupw_session *s, const void *box, CUstream hStream)
{
        struct lup_array_copy c;
        if (lup_array_copy_decode(box, &c) < 0)
                return CUDA_ERROR_INVALID_VALUE;
        if (c.src.kind != LUP_END_ARRAY && c.dst.kind != LUP_END_ARRAY)
                return CUDA_ERROR_INVALID_VALUE; /* device to device has its own ops */
        CUDA_MEMCPY3D d = { .srcXInBytes = c.src.x,
                            .srcY = c.src.y,
                            .srcZ = c.src.z,
                            .dstXInBytes = c.dst.x,
                            .dstY = c.dst.y,
                            .dstZ = c.dst.z,
                            .WidthInBytes = c.width,
                            .Height = c.height,
                            .Depth = c.depth };
        CUresult r = end_resolve(s, &c.src, &c, &d.srcMemoryType, &d.srcDevice, &d.srcArray, &d.srcPitch, &d.srcHeight);
        if (r == CUDA_SUCCESS)
                r = end_resolve(s, &c.dst, &c, &d.dstMemoryType, &d.dstDevice, &d.dstArray, &d.dstPitch, &d.dstHeight);
        if (r != CUDA_SUCCESS)
                return r;
        return lupw_be(s)->cuMemcpy3DAsync_v2(&d, hStream);
}

CUresult lupw_lupArrayMemReq(struct lupw_session *s, uint64_t *size, uint64_t *alignment, uint64_t id, CUdevice dev)
{
        CUDA_ARRAY_MEMORY_REQUIREMENTS m = { 0 };
        struct lupw_array *a = lupw_array_get(s, id, false), *mm = lupw_array_get(s, id, true);
        CUresult r;
        if (a)
                r = lupw_be(s)->cuArrayGetMemoryRequirements(&m, (CUarray)a->real, dev);
        else if (mm)
                r = lupw_be(s)->cuMipmappedArrayGetMemoryRequirements(&m, (CUmipmappedArray)mm->real, dev);
        else
                return CUDA_ERROR_INVALID_HANDLE;
        *size = m.size;
        *alignment = m.alignment;
        return r;
}

CUresult lupw_lupArraySparse(struct lupw_session *s, void *props, uint64_t id)
{
        CUDA_ARRAY_SPARSE_PROPERTIES p = { 0 };
        struct lupw_array *a = lupw_array_get(s, id, false), *m = lupw_array_get(s, id, true);
        CUresult r;
        if (a)
                r = lupw_be(s)->cuArrayGetSparseProperties(&p, (CUarray)a->real);
        else if (m)
                r = lupw_be(s)->cuMipmappedArrayGetSparseProperties(&p, (CUmipmappedArray)m->real);
        else
                return CUDA_ERROR_INVALID_HANDLE;
        memcpy(props, &p, sizeof(p));
        return r;
}

struct ctx_hunt {
        uint64_t ctx;
        uint64_t *ids;
        size_t n;
};

static void hunt_ctx(uint64_t key, uint64_t val, void *ud)
{
        struct ctx_hunt *h = ud;
        const struct lupw_array *a = (const struct lupw_array *)(uintptr_t)val;
        if (a->ctx == h->ctx && !a->parent)
                h->ids[h->n++] = key;
}

void lupw_arrays_drop_ctx(struct lupw_session *s, uint64_t ctx)
{
        struct lupw_arrays *A = &s->arrays;
        size_t keep = 0;
        for (size_t i = 0; i < A->n_objs; i++) {
                if (A->objs[i].ctx != ctx) {
                        A->objs[keep++] = A->objs[i];
                        continue;
                }
                (void)(A->objs[i].surface ? lupw_be(s)->cuSurfObjectDestroy(A->objs[i].value)
                                          : lupw_be(s)->cuTexObjectDestroy(A->objs[i].value));
        }
        A->n_objs = keep;
        if (!A->ids.limit || !A->ids.used)
                return;
        struct ctx_hunt h = { .ctx = ctx, .ids = calloc(A->ids.used, sizeof(uint64_t)) };
        if (!h.ids)
                return; /* the driver frees them with the context; their entries stay */
        lup_u64map_each(&A->ids, hunt_ctx, &h);
        for (size_t i = 0; i < h.n; i++)
                (void)destroy_now(s, h.ids[i]);
        free(h.ids);
}

static void free_one(uint64_t key, uint64_t val, void *ud)
{
        (void)key, (void)ud;
        free((struct lupw_array *)(uintptr_t)val);
}

void lupw_arrays_release(struct lupw_session *s)
{
        if (s->arrays.ids.limit) {
                lup_u64map_each(&s->arrays.ids, free_one, NULL);
                lup_u64map_free(&s->arrays.ids);
        }
        free(s->arrays.objs);
        memset(&s->arrays, 0, sizeof(s->arrays));
}
