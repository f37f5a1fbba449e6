/* SPDX-License-Identifier: MIT */
/*
 * Texture and surface objects. Kernels read an object's value as a kernel
 * argument, so the value the client holds must name the same object for
 * the session's whole life: a restore makes every live object again, per
 * context in the order of their values, each under the value it had
 * (taking the driver's values below it as fillers until it is reached,
 * then giving the fillers back; the real driver numbers each context's
 * objects from 1, lowest free first, and frees a value a little after
 * its destroy);
 * a value that cannot be had again fails the restore of that session,
 * loudly: a texture read through a wrong object is never acceptable.
 *
 * The descriptors arrive as the driver's structs with the client's array
 * ids; the real arrays go in here, and linear and pitched resources must
 * lie in the session's memory.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "worker/arrays.h"
#include "worker_gen.h"

#define MAX_FILLERS 65536u
#define MAX_WAITS   250u /* of 2 ms each, for a value the driver has not freed yet */

/* The client's resource with real arrays in, checked; remake: arrays the
 * client destroyed are found too (an object made before that). */
static CUresult resource_in(struct lupw_session *s, const uint8_t *raw, bool surface, bool remake,
                            CUDA_RESOURCE_DESC *ret)
{
        struct lupw_array *(*get)(struct lupw_session *, uint64_t, bool) = remake ? lupw_array_find : lupw_array_get;
        CUDA_RESOURCE_DESC r;
        memcpy(&r, raw, sizeof(r));
        if (r.flags)
                return CUDA_ERROR_INVALID_VALUE;
        struct lupw_array *a;
        uint32_t elem;
        switch (r.resType) {
        case CU_RESOURCE_TYPE_ARRAY:
                if (!(a = get(s, (uint64_t)(uintptr_t)r.res.array.hArray, false)))
                        return CUDA_ERROR_INVALID_HANDLE;
                r.res.array.hArray = (CUarray)a->real;
                break;
        case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
                if (surface)
                        return CUDA_ERROR_INVALID_VALUE;
                if (!(a = get(s, (uint64_t)(uintptr_t)r.res.mipmap.hMipmappedArray, true)))
                        return CUDA_ERROR_INVALID_HANDLE;
                r.res.mipmap.hMipmappedArray = (CUmipmappedArray)a->real;
                break;
        case CU_RESOURCE_TYPE_LINEAR:
                if (surface || lupw_check_range(s, r.res.linear.devPtr, r.res.linear.sizeInBytes, 1) != CUDA_SUCCESS)
                        return CUDA_ERROR_INVALID_VALUE;
                r.res.linear.devPtr = lupw_xlate(s, r.res.linear.devPtr);
                break;
        case CU_RESOURCE_TYPE_PITCH2D:
                elem = lup_array_elem_size((uint32_t)r.res.pitch2D.format, r.res.pitch2D.numChannels);
                if (surface || !elem || !r.res.pitch2D.height || r.res.pitch2D.width > (1ull << 32) ||
                    lupw_check_range2d(s, r.res.pitch2D.devPtr, r.res.pitch2D.width, elem, r.res.pitch2D.pitchInBytes,
                                       r.res.pitch2D.height) != CUDA_SUCCESS)
                        return CUDA_ERROR_INVALID_VALUE;
                r.res.pitch2D.devPtr = lupw_xlate(s, r.res.pitch2D.devPtr);
                break;
        default:
                return CUDA_ERROR_INVALID_VALUE;
        }
        *ret = r;
        return CUDA_SUCCESS;
}

static CUresult make(struct lupw_session *s, const struct lupw_texobj *o, bool remake, uint64_t *ret)
{
        CUDA_RESOURCE_DESC res;
        CUDA_TEXTURE_DESC tex;
        CUDA_RESOURCE_VIEW_DESC view;
        CUresult r = resource_in(s, o->res, o->surface, remake, &res);
        if (r != CUDA_SUCCESS)
                return r;
        if (o->surface) {
                CUsurfObject v = 0;
                r = lupw_be(s)->cuSurfObjectCreate(&v, &res);
                *ret = v;
                return r;
        }
        memcpy(&tex, o->tex, sizeof(tex));
        memcpy(&view, o->view, sizeof(view));
        CUtexObject v = 0;
        r = lupw_be(s)->cuTexObjectCreate(&v, &res, &tex, o->has_view ? &view : NULL);
        *ret = v;
        return r;
}

static CUresult note(struct lupw_session *s, const struct lupw_texobj *o)
{
        struct lupw_arrays *A = &s->arrays;
        if (A->n_objs >= LUPW_MAX_TEXOBJS ||
            lup_array_grow((void **)&A->objs, &A->cap_objs, A->n_objs + 1, sizeof(*A->objs)) < 0)
                return CUDA_ERROR_OUT_OF_MEMORY;
        A->objs[A->n_objs++] = *o;
        return CUDA_SUCCESS;
}

/* Gives the driver's object of value v back. */
static CUresult value_destroy(struct lupw_session *s, uint64_t v, bool surface)
{
        return surface ? lupw_be(s)->cuSurfObjectDestroy(v) : lupw_be(s)->cuTexObjectDestroy(v);
}

static CUresult create(struct lupw_session *s, struct lupw_texobj *o, uint64_t *value)
{
        uint64_t v = 0;
        if (s->arrays.n_objs >= LUPW_MAX_TEXOBJS)
                return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r = make(s, o, false, &v);
        if (r != CUDA_SUCCESS)
                return r;
        o->value = v;
        o->ctx = s->ctx.bound_id;
        if ((r = note(s, o)) != CUDA_SUCCESS) {
                (void)value_destroy(s, v, o->surface);
                return r;
        }
        *value = v;
        return CUDA_SUCCESS;
}

CUresult lupw_lupTexObjectCreate(struct lupw_session *s, uint64_t *value, const void *res, const void *tex,
                                 const void *view, unsigned int has_view)
{
        struct lupw_texobj o = { .has_view = has_view != 0 };
        if (has_view > 1)
                return CUDA_ERROR_INVALID_VALUE;
        memcpy(o.res, res, sizeof(o.res));
        memcpy(o.tex, tex, sizeof(o.tex));
        memcpy(o.view, view, sizeof(o.view));
        return create(s, &o, value);
}

CUresult lupw_lupSurfObjectCreate(struct lupw_session *s, uint64_t *value, const void *res)
{
        struct lupw_texobj o = { .surface = true };
        memcpy(o.res, res, sizeof(o.res));
        return create(s, &o, value);
}

static CUresult destroy(struct lupw_session *s, uint64_t value, bool surface)
{
        struct lupw_arrays *A = &s->arrays;
        size_t i = A->n_objs, found = (size_t)-1;
        /* the caller's context's object of that value, else any context's */
        while (i-- > 0)
                if (A->objs[i].value == value && A->objs[i].surface == surface &&
                    (found == (size_t)-1 || A->objs[i].ctx == s->ctx.bound_id))
                        found = i;
        if (found == (size_t)-1)
                return CUDA_ERROR_INVALID_VALUE;
        i = found;
        CUresult r = value_destroy(s, value, surface);
        if (r != CUDA_SUCCESS)
                return r;
        memmove(&A->objs[i], &A->objs[i + 1], (A->n_objs - i - 1) * sizeof(*A->objs));
        A->n_objs--;
        lupw_arrays_reap(s); /* an array the client destroyed may be free to go now */
        return CUDA_SUCCESS;
}

CUresult lupw_lupTexObjectDestroy(struct lupw_session *s, uint64_t value)
{
        return destroy(s, value, false);
}

CUresult lupw_lupSurfObjectDestroy(struct lupw_session *s, uint64_t value)
{
        return destroy(s, value, true);
}

struct filler {
        uint64_t value;
        bool surface;
};

static void fillers_free(struct lupw_session *s, struct filler *f, size_t n)
{
        for (size_t i = 0; i < n; i++)
                (void)value_destroy(s, f[i].value, f[i].surface);
        free(f);
}

/* One object under its old value; values the driver gives below it are
 * kept as fillers (freed by the caller, after every object is made). */
static int remake_one(struct lupw_session *s, const struct lupw_texobj *o, struct filler **f, size_t *nf, size_t *capf,
                      char *why, size_t whylen)
{
        unsigned waits = 0;
        for (;;) {
                uint64_t v = 0;
                CUresult r = make(s, o, true, &v);
                if (r != CUDA_SUCCESS) {
                        snprintf(why, whylen, "%s object %#" PRIx64 " cannot be made again (CUDA error %d)",
                                 o->surface ? "surface" : "texture", o->value, (int)r);
                        return -EIO;
                }
                if (v == o->value)
                        return note(s, o) == CUDA_SUCCESS ? 0 : -ENOMEM;
                if (v > o->value && waits < MAX_WAITS) {
                        /* the driver frees a value some time after its
                         * destroy (its own array copies take some): wait */
                        (void)value_destroy(s, v, o->surface);
                        (void)lupw_be(s)->cuCtxSynchronize();
                        nanosleep(&(struct timespec){ .tv_nsec = 2000000 }, NULL);
                        waits++;
                        continue;
                }
                if (v > o->value || *nf >= MAX_FILLERS || lup_array_grow((void **)f, capf, *nf + 1, sizeof(**f)) < 0) {
                        (void)value_destroy(s, v, o->surface);
                        snprintf(why, whylen,
                                 "%s object %#" PRIx64 " came back as %#" PRIx64
                                 ": kernels holding the old value would read the wrong %s",
                                 o->surface ? "surface" : "texture", o->value, v, o->surface ? "surface" : "texture");
                        return -EIO;
                }
                (*f)[(*nf)++] = (struct filler){ .value = v, .surface = o->surface };
        }
}

/* Contexts, then values, ascending: an object's fillers take only values
 * below it, never one a later object needs. */
static int by_ctx_value(const void *a, const void *b)
{
        const struct lupw_texobj *x = *(const struct lupw_texobj *const *)a, *y = *(const struct lupw_texobj *const *)b;
        if (x->ctx != y->ctx)
                return x->ctx < y->ctx ? -1 : 1;
        return x->value < y->value ? -1 : x->value > y->value;
}

int lupw_texobjs_remake(struct lupw_session *s, const struct lupw_texobj *objs, size_t n, char *why, size_t whylen)
{
        struct filler *f = NULL;
        size_t nf = 0, capf = 0;
        const struct lupw_texobj **sorted = calloc(n ? n : 1, sizeof(*sorted));
        if (!sorted) {
                snprintf(why, whylen, "out of memory for %zu texture and surface objects", n);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
                sorted[i] = &objs[i];
        qsort(sorted, n, sizeof(*sorted), by_ctx_value);
        int rc = 0;
        for (size_t i = 0; rc == 0 && i < n; i++) {
                const struct lupw_texobj *t = sorted[i];
                if (i > 0 && t->ctx != sorted[i - 1]->ctx) {
                        fillers_free(s, f, nf); /* another context: its own values */
                        f = NULL, nf = capf = 0;
                }
                if (lupw_bind_ctx(s, t->ctx) != CUDA_SUCCESS) {
                        snprintf(why, whylen, "texture object %#" PRIx64 ": its context is gone", t->value);
                        rc = -EIO;
                        break;
                }
                rc = remake_one(s, t, &f, &nf, &capf, why, whylen);
        }
        fillers_free(s, f, nf);
        free(sorted);
        if (rc < 0)
                lup_err("session %s: %s", s->name, why);
        return rc;
}
