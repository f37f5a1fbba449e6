/* SPDX-License-Identifier: MIT */
/*
 * Arrays, mipmapped arrays and texture/surface objects in a checkpoint
 * (checkpoint/ckpt_arrays.h has the format). Arrays are not arena memory,
 * so neither a hot checkpoint's exported fds nor the arena's pieces carry
 * them: every checkpoint, hot or durable, copies each array's contents to
 * host memory a slice at a time and writes them as an object of their
 * own, and a restore makes the arrays again under the same ids, copies the
 * contents back, then makes the objects again under their old values
 * (worker/texobj.c), or fails.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_arrays.h"
#include "log.h"
#include "provider_load.h"
#include "worker/arrays.h"
#include "worker_gen.h"

static void object_name(char *buf, size_t n, uint64_t id)
{
        snprintf(buf, n, "array/%016" PRIx64, id);
}

struct collect {
        struct lup_ckpt_array *v;
        uint32_t n;
};

static void collect_one(uint64_t key, uint64_t val, void *ud)
{
        struct collect *c = ud;
        const struct lupw_array *a = (const struct lupw_array *)(uintptr_t)val;
        c->v[c->n++] = (struct lup_ckpt_array){
                .id = a->id, .ctx = a->ctx, .parent = a->parent, .level = a->level, .levels = a->levels, .d = a->d
        };
}

static int cmp_id(const void *x, const void *y)
{
        const struct lup_ckpt_array *a = x, *b = y;
        return a->id < b->id ? -1 : a->id > b->id;
}

/* The array behind level `level` of a (a itself for an array). */
static CUresult level_real(struct lupw_session *s, const struct lupw_array *a, uint32_t level, CUarray *ret)
{
        if (!a->levels) {
                *ret = (CUarray)a->real;
                return CUDA_SUCCESS;
        }
        return lupw_be(s)->cuMipmappedArrayGetLevel(ret, (CUmipmappedArray)a->real, level);
}

/* Copies every slice of every level between a and the object `name`:
 * to the provider (save) or from it (ld). */
static int move_contents(struct lupw_session *s, const struct lupw_array *a, struct lupine_ckpt_save *save,
                         struct lupine_ckpt_load *ld, char *why, size_t whylen)
{
        char name[40];
        uint64_t off = 0;
        int rc = 0;
        object_name(name, sizeof(name), a->id);
        CUresult r = lupw_bind_ctx(s, a->ctx);
        for (uint32_t l = 0; r == CUDA_SUCCESS && rc == 0 && l < (a->levels ? a->levels : 1); l++) {
                struct lup_array_desc d = lup_array_level_desc(&a->d, l);
                struct lup_array_shape sh = lup_array_shape_of(&d);
                size_t slice = (size_t)(sh.row_bytes * sh.rows);
                CUarray arr;
                uint8_t *buf = NULL;
                if ((r = level_real(s, a, l, &arr)) != CUDA_SUCCESS)
                        break;
                if (!(buf = malloc(slice))) {
                        rc = -ENOMEM;
                        break;
                }
                for (uint64_t z = 0; r == CUDA_SUCCESS && rc == 0 && z < sh.slices; z++, off += slice) {
                        CUDA_MEMCPY3D c = { .WidthInBytes = sh.row_bytes, .Height = sh.rows, .Depth = 1 };
                        if (save) {
                                c.srcMemoryType = CU_MEMORYTYPE_ARRAY, c.srcArray = arr, c.srcZ = z;
                                c.dstMemoryType = CU_MEMORYTYPE_HOST, c.dstHost = buf, c.dstPitch = sh.row_bytes;
                                if ((r = lupw_be(s)->cuMemcpy3D_v2(&c)) == CUDA_SUCCESS)
                                        rc = s->ckpt.ops->save_write(save, name, buf, slice);
                                continue;
                        }
                        int64_t got = lupine_provider_read_full(s->ckpt.ops, ld, name, off, buf, slice);
                        if (got != (int64_t)slice) {
                                snprintf(why, whylen, "object %s is shorter than its array", name);
                                rc = got < 0 ? (int)got : -EBADMSG;
                                break;
                        }
                        c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = buf, c.srcPitch = sh.row_bytes;
                        c.dstMemoryType = CU_MEMORYTYPE_ARRAY, c.dstArray = arr, c.dstZ = z;
                        r = lupw_be(s)->cuMemcpy3D_v2(&c);
                }
                free(buf);
        }
        if (r != CUDA_SUCCESS && rc == 0) {
                snprintf(why, whylen, "array %#" PRIx64 ": copying its contents failed (CUDA error %d)", a->id, (int)r);
                rc = -EIO;
        }
        return rc;
}

int lupw_arrays_save(struct lupw_session *s, struct lupine_ckpt_save *save)
{
        uint32_t n = s->arrays.ids.limit ? (uint32_t)s->arrays.ids.used : 0, nt = (uint32_t)s->arrays.n_objs;
        struct collect c = { .v = calloc(n ? n : 1, sizeof(*c.v)) };
        struct lup_ckpt_texobj *t = calloc(nt ? nt : 1, sizeof(*t));
        uint8_t *obj = NULL;
        size_t len = 0;
        char why[200] = "";
        int rc = c.v && t ? 0 : -ENOMEM;
        if (rc == 0 && n)
                lup_u64map_each(&s->arrays.ids, collect_one, &c);
        if (rc == 0 && n > 1)
                qsort(c.v, n, sizeof(*c.v), cmp_id);
        for (uint32_t i = 0; rc == 0 && i < n; i++)
                if (!c.v[i].parent)
                        rc = move_contents(s, lupw_array_find(s, c.v[i].id, c.v[i].levels != 0), save, NULL, why,
                                           sizeof(why));
        for (uint32_t i = 0; rc == 0 && i < nt; i++) {
                const struct lupw_texobj *o = &s->arrays.objs[i];
                t[i] = (struct lup_ckpt_texobj){
                        .value = o->value, .ctx = o->ctx, .surface = o->surface, .has_view = o->has_view
                };
                memcpy(t[i].res, o->res, sizeof(t[i].res));
                memcpy(t[i].tex, o->tex, sizeof(t[i].tex));
                memcpy(t[i].view, o->view, sizeof(t[i].view));
        }
        if (rc == 0 && (n || nt))
                rc = lup_ckpt_arrays_encode(c.v, n, t, nt, &obj, &len);
        if (rc == 0 && (n || nt))
                rc = s->ckpt.ops->save_write(save, "arrays", obj, len);
        if (rc == 0 && (n || nt)) {
                uint64_t bytes = 0;
                for (uint32_t i = 0; i < n; i++)
                        bytes += lup_ckpt_array_bytes(&c.v[i]);
                lup_info("session %s: checkpoint: %u array(s) and level(s), %" PRIu64
                         " bytes of contents copied, %u texture and surface object(s)",
                         s->name, n, bytes, nt);
        }
        if (rc < 0 && why[0])
                lup_err("session %s: checkpoint: %s", s->name, why);
        free(obj);
        free(c.v);
        free(t);
        return rc;
}

/* The arrays, empty (load_contents fills them). */
static int load_arrays(struct lupw_session *s, const struct lup_ckpt_array *v, uint32_t n, char *why, size_t whylen)
{
        for (uint32_t i = 0; i < n; i++) {
                struct lupw_array a = { .id = v[i].id,
                                        .ctx = v[i].ctx,
                                        .parent = v[i].parent,
                                        .level = v[i].level,
                                        .levels = v[i].levels,
                                        .d = v[i].d };
                a.shape = lup_array_shape_of(&a.d);
                CUresult r = lupw_bind_ctx(s, a.ctx);
                if (r == CUDA_SUCCESS)
                        r = lupw_array_make(s, &a);
                if (r == CUDA_SUCCESS)
                        r = lupw_array_put(s, &a);
                if (r != CUDA_SUCCESS) {
                        snprintf(why, whylen, "array %#" PRIx64 " cannot be made again (CUDA error %d)", a.id, (int)r);
                        return -EIO;
                }
        }
        return 0;
}

/* The arrays' contents, after their objects: the real driver's array
 * copies take texture object values of their own for a while (learned on
 * the H200), which would push the objects' values up. */
static int load_contents(struct lupw_session *s, struct lupine_ckpt_load *ld, const struct lup_ckpt_array *v,
                         uint32_t n, char *why, size_t whylen)
{
        for (uint32_t i = 0; i < n; i++) {
                if (v[i].parent)
                        continue;
                const struct lupw_array *a = lupw_array_find(s, v[i].id, v[i].levels != 0);
                if (!a) {
                        snprintf(why, whylen, "array %#" PRIx64 " is gone before its contents", v[i].id);
                        return -EIO;
                }
                int rc = move_contents(s, a, NULL, ld, why, whylen);
                if (rc < 0)
                        return rc;
        }
        return 0;
}

int lupw_arrays_load(struct lupw_session *s, struct lupine_ckpt_load *ld, char *why, size_t whylen)
{
        const struct lup_sealed *kind = &lup_ckpt_arrays_kind;
        struct lup_ckpt_array *v = NULL;
        struct lup_ckpt_texobj *t = NULL;
        struct lupw_texobj *objs = NULL;
        uint32_t n = 0, nt = 0;
        const char *w;
        uint8_t *obj;
        uint64_t size;
        int rc = lupine_provider_read_object(s->ckpt.ops, ld, "arrays", kind->min_len, kind->max_len, &obj, &size);
        if (rc == -ENOENT)
                return 0; /* no arrays, or an older checkpoint */
        if (rc < 0) {
                snprintf(why, whylen, "reading object arrays failed: %s", strerror(-rc));
                return rc;
        }
        rc = lup_ckpt_arrays_decode(obj, (size_t)size, &v, &n, &t, &nt, &w);
        free(obj);
        if (rc < 0) {
                snprintf(why, whylen, "%s", w);
                return rc;
        }
        rc = load_arrays(s, v, n, why, whylen);
        if (rc == 0 && nt && !(objs = calloc(nt, sizeof(*objs))))
                rc = -ENOMEM;
        for (uint32_t i = 0; rc == 0 && i < nt; i++) {
                objs[i] = (struct lupw_texobj){
                        .value = t[i].value, .ctx = t[i].ctx, .surface = t[i].surface, .has_view = t[i].has_view
                };
                memcpy(objs[i].res, t[i].res, sizeof(objs[i].res));
                memcpy(objs[i].tex, t[i].tex, sizeof(objs[i].tex));
                memcpy(objs[i].view, t[i].view, sizeof(objs[i].view));
        }
        if (rc == 0 && nt)
                rc = lupw_texobjs_remake(s, objs, nt, why, whylen);
        if (rc == 0)
                rc = load_contents(s, ld, v, n, why, whylen);
        if (rc == 0)
                lup_info("session %s: restored %u array(s) and level(s) with their contents, %u texture and "
                         "surface object(s) under their values",
                         s->name, n, nt);
        s->ctx.bound_id = 0; /* the next call binds again */
        free(objs);
        free(v);
        free(t);
        return rc;
}
