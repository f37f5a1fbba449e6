/* SPDX-License-Identifier: MIT */
/*
 * The session's handle table (client-minted ids -> real driver handles) and
 * uploaded blobs (module images arrive in chunks before the call that uses
 * them). A malformed id or blob is a protocol violation; an id that names
 * nothing (any more) is answered with CUDA's own error.
 */
#define LUP_LOG_CAT LUP_LOGC_GPU
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_codec.h"
#include "image.h"
#include "log.h"
#include "provider_load.h"
#include "worker/session.h"
#include "worker/uploads.h"

struct blob {
        uint64_t total, received;
        uint8_t *data; /* NULL when refused */
        bool refused;  /* over an upload cap: its chunks are dropped, its call fails */
};

/* What lupw_blob_take() hands a call for a refused upload: the image check
 * (lupw_check_image) turns it into CUDA_ERROR_OUT_OF_MEMORY. */
static const uint8_t refused_image[1];

void lupw_handles_init(struct lupw_session *s)
{
        lup_u64map_init(&s->obj.handles, LUP_MAX_HANDLES);
        lup_u64map_init(&s->obj.blobs, 64);
}

void lupw_prov_free(struct lupw_prov *p)
{
        free(p->name);
        free(p->image);
        memset(p, 0, sizeof(*p));
}

static void free_handle(uint64_t key, uint64_t val, void *ud)
{
        struct lupw_handle_ent *e = (struct lupw_handle_ent *)(uintptr_t)val;
        lupw_prov_free(&e->prov);
        free(e->params);
        free(e);
}

static void free_blob(uint64_t key, uint64_t val, void *ud)
{
        struct blob *b = (struct blob *)(uintptr_t)val;
        free(b->data);
        free(b);
}

void lupw_handles_free(struct lupw_session *s)
{
        lupw_prov_free(&s->obj.prov);
        free(s->obj.settings);
        s->obj.settings = NULL;
        s->obj.n_settings = s->obj.cap_settings = 0;
        lup_u64map_each(&s->obj.handles, free_handle, NULL);
        lup_u64map_free(&s->obj.handles);
        lup_u64map_each(&s->obj.blobs, free_blob, NULL);
        lup_u64map_free(&s->obj.blobs);
}

struct lupw_handle_ent *lupw_handle_ent(struct lupw_session *s, int kind, uint64_t id)
{
        uint64_t v;
        if (!lup_u64map_get(&s->obj.handles, id, &v))
                return NULL;
        struct lupw_handle_ent *e = (struct lupw_handle_ent *)(uintptr_t)v;
        return e->kind == kind ? e : NULL;
}

CUresult lupw_function(struct lupw_session *s, uint64_t id, struct lupw_handle_ent **ret_e, CUfunction *ret_fn)
{
        struct lupw_handle_ent *e = lupw_handle_ent(s, LUPW_H_FUNCTION, id);

        if (e) {
                *ret_e = e;
                *ret_fn = (CUfunction)e->real;
                return CUDA_SUCCESS;
        }
        e = lupw_handle_ent(s, LUPW_H_KERNEL, id);
        if (!e)
                return CUDA_ERROR_INVALID_HANDLE;
        *ret_e = e;
        return s->be.fn.cuKernelGetFunction(ret_fn, (CUkernel)e->real);
}

CUresult lupw_handle(struct lupw_session *s, int kind, uint64_t id, void **ret)
{
        struct lupw_handle_ent *e = lupw_handle_ent(s, kind, id);
        if (!e && kind == LUPW_H_LIBRARY && id == 0) {
                /* cuBLASLt looks kernels up by name in the NULL library (every
                 * library of the process): the driver answers that itself,
                 * and this worker's libraries are this session's only */
                *ret = NULL;
                return CUDA_SUCCESS;
        }
        if (!e && kind == LUPW_H_FUNCTION) {
                /* a library kernel standing in for a function (occupancy,
                 * attributes) */
                struct lupw_handle_ent *k;
                CUfunction f;
                if (lupw_function(s, id, &k, &f) != CUDA_SUCCESS)
                        return CUDA_ERROR_INVALID_HANDLE;
                *ret = f;
                s->cur.parent = id;
                return CUDA_SUCCESS;
        }
        if (!e) {
                lup_debug("session %s: no handle %#llx of kind %d", s->name, (unsigned long long)id, kind);
                return CUDA_ERROR_INVALID_HANDLE;
        }
        *ret = e->real;
        s->cur.parent = id;         /* creators record what they were made from */
        if (kind == LUPW_H_EVENT) { /* the event calls' own bookkeeping */
                s->cur.event[0] = s->cur.event[1];
                s->cur.event[1] = e;
        }
        return CUDA_SUCCESS;
}

CUresult lupw_stream(struct lupw_session *s, uint64_t id, CUstream *ret)
{
        /* the default streams travel as themselves */
        if (id == 0 || id == (uint64_t)(uintptr_t)CU_STREAM_LEGACY || id == (uint64_t)(uintptr_t)CU_STREAM_PER_THREAD) {
                *ret = (CUstream)(uintptr_t)id;
                return CUDA_SUCCESS;
        }
        void *real;
        CUresult r = lupw_handle(s, LUPW_H_STREAM, id, &real);
        if (r == CUDA_SUCCESS)
                *ret = real;
        return r;
}

int lupw_handle_fresh(struct lupw_session *s, uint64_t id)
{
        if (id < LUP_FIRST_HANDLE_ID || (id - LUP_FIRST_HANDLE_ID) % 16 || lup_u64map_get(&s->obj.handles, id, NULL)) {
                lupw_set_why(s, "malformed or reused handle id");
                return -EBADMSG;
        }
        return 0;
}

CUresult lupw_handle_put(struct lupw_session *s, int kind, uint64_t id, void *real)
{
        struct lupw_handle_ent *e = calloc(1, sizeof(*e));
        if (!e)
                return CUDA_ERROR_OUT_OF_MEMORY;
        e->kind = kind;
        e->real = real;
        e->ctx = s->ctx.bound_id;
        if (lup_u64map_put(&s->obj.handles, id, (uint64_t)(uintptr_t)e) < 0) {
                free(e);
                lupw_prov_free(&s->obj.prov);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        /* the creating handler left how it made the handle in s->obj.prov */
        e->prov = s->obj.prov;
        memset(&s->obj.prov, 0, sizeof(s->obj.prov));
        return CUDA_SUCCESS;
}

struct children {
        uint64_t parent;
        uint64_t *ids;
        size_t n, cap;
        bool oom;
};

static void find_child(uint64_t key, uint64_t val, void *ud)
{
        struct children *c = ud;
        const struct lupw_handle_ent *e = (const struct lupw_handle_ent *)(uintptr_t)val;
        if (e->prov.parent != c->parent || c->oom)
                return;
        if (c->n == c->cap) {
                size_t cap = c->cap ? 2 * c->cap : 16;
                uint64_t *ids = realloc(c->ids, cap * sizeof(*ids));
                if (!ids) {
                        c->oom = true;
                        return;
                }
                c->ids = ids;
                c->cap = cap;
        }
        c->ids[c->n++] = key;
}

/* A module's functions, a library's kernels and modules, a kernel's
 * functions die with it, as the driver's handles do: a checkpoint must not
 * keep a handle whose parent is gone (its restore could not make it). */
void lupw_handle_del(struct lupw_session *s, uint64_t id)
{
        uint64_t v;
        if (!lup_u64map_del(&s->obj.handles, id, &v))
                return;
        int kind = ((struct lupw_handle_ent *)(uintptr_t)v)->kind;
        free_handle(id, v, NULL);
        if (kind != LUPW_H_MODULE && kind != LUPW_H_LIBRARY && kind != LUPW_H_KERNEL)
                return;
        struct children c = { .parent = id };
        lup_u64map_each(&s->obj.handles, find_child, &c);
        if (c.oom)
                lup_warn("session %s: out of memory finding the handles made from %#llx", s->name,
                         (unsigned long long)id);
        for (size_t i = 0; i < c.n; i++)
                lupw_handle_del(s, c.ids[i]);
        free(c.ids);
}

/* ---- blobs */

static int blob_check(struct lupw_session *s, const struct lup_hdr *h, const uint8_t *p, union lupw_ctl_args *ret,
                      CUresult *ret_early)
{
        const char *why;
        if (lup_blob_decode(p, h->len, &ret->blob, &why) < 0) {
                lupw_set_why(s, why);
                return -EBADMSG;
        }
        return 0;
}

/* Everything wrong with an upload is the client's protocol error: nothing
 * is latched, no context is needed. */
static int blob_run(struct lupw_session *s, const struct lup_hdr *h, const union lupw_ctl_args *a, struct lup_wr *out,
                    CUresult *status)
{
        const struct lup_blob *c = &a->blob;
        uint64_t v;
        struct blob *b;
        if (!lup_u64map_get(&s->obj.blobs, c->id, &v)) {
                char why[256];
                if (c->offset != 0) {
                        lupw_set_why(s, "BLOB chunk for an unknown blob");
                        return -EBADMSG;
                }
                b = calloc(1, sizeof(*b));
                if (b && lupw_upload_reserve(s, c->total, why, sizeof(why)) < 0) {
                        /* Refused, not a protocol error: the call that
                         * names it fails with CUDA_ERROR_OUT_OF_MEMORY. */
                        lup_warn("session %s: limit hit: %s; the call using it gets CUDA_ERROR_OUT_OF_MEMORY", s->name,
                                 why);
                        b->refused = true;
                } else if (b) {
                        b->data = malloc(c->total);
                        if (!b->data)
                                lupw_upload_unreserve(s, c->total);
                }
                if (!b || (!b->data && !b->refused) ||
                    lup_u64map_put(&s->obj.blobs, c->id, (uint64_t)(uintptr_t)b) < 0) {
                        if (b && b->data)
                                lupw_upload_unreserve(s, c->total);
                        if (b)
                                free(b->data);
                        free(b);
                        lupw_set_why(s, "cannot hold the uploaded blob (memory or blob count limit)");
                        return -EBADMSG;
                }
                b->total = c->total;
        } else {
                b = (struct blob *)(uintptr_t)v;
        }
        if (c->offset != b->received || c->total != b->total || c->n > b->total - b->received) {
                lupw_set_why(s, "BLOB chunk out of order or past the end");
                return -EBADMSG;
        }
        if (b->data)
                memcpy(b->data + c->offset, c->data, c->n);
        b->received += c->n;
        return 0;
}

const struct lupw_ctl_op lupw_ctl_blob = {
        .name = "BLOB",
        .sync = LUPW_ASYNC_ONLY,
        .why_flag = "malformed BLOB frame",
        .check = blob_check,
        .run = blob_run,
};

int lupw_blob_take(struct lupw_session *s, uint64_t id, const void **ret, size_t *ret_len)
{
        uint64_t v;
        if (!lup_u64map_get(&s->obj.blobs, id, &v)) {
                lupw_set_why(s, "call names a blob that was never uploaded");
                return -EBADMSG;
        }
        struct blob *b = (struct blob *)(uintptr_t)v;
        if (b->received != b->total) {
                lupw_set_why(s, "call names an incomplete blob");
                return -EBADMSG;
        }
        if (b->refused) {
                *ret = refused_image;
                *ret_len = 0;
                s->cur.blob_len = 0;
                return 0;
        }
        *ret = b->data;
        *ret_len = (size_t)b->total;
        s->cur.blob_len = (size_t)b->total;
        return 0;
}

void lupw_blob_release(struct lupw_session *s, uint64_t id)
{
        uint64_t v;
        if (lup_u64map_del(&s->obj.blobs, id, &v)) {
                struct blob *b = (struct blob *)(uintptr_t)v;
                if (!b->refused)
                        lupw_upload_unreserve(s, b->total);
                free_blob(id, v, NULL);
        }
}

CUresult lupw_check_image(const void *p, size_t n)
{
        int kind;
        const uint8_t *start;
        size_t size;
        if (p == refused_image)
                return CUDA_ERROR_OUT_OF_MEMORY; /* an upload over its cap (lupw_blob_take) */
        if (lup_image_measure(p, n, &kind, &start, &size) < 0 || size != n || start != p)
                return CUDA_ERROR_INVALID_IMAGE;
        return CUDA_SUCCESS;
}

/* ---- events: recorded state across a checkpoint
 *
 * A checkpoint is taken after every stream was synchronised, so an event
 * that was ever recorded is complete then. It is saved as recorded (object
 * "events"), and the restore records it again on its context's NULL stream
 * and waits for it: it queries and synchronises as complete, and a stream
 * can wait on it; an event never recorded stays unrecorded.
 *
 * Elapsed times: for timing events, the time of each record is saved
 * relative to one reference event of the same context (cuEventElapsedTime
 * measured before the checkpoint). Between two events restored that way,
 * cuEventElapsedTime answers the saved difference (exact to float
 * precision). Between a restored event and one recorded after the restore
 * the driver's answer counts from the restore: the time the session was
 * down is not included.
 */

CUresult lupw_cuEventRecord(struct lupw_session *s, CUevent hEvent, CUstream hStream)
{
        struct lupw_handle_ent *e = s->cur.event[1];
        CUresult r = s->be.fn.cuEventRecord(hEvent, hStream);
        if (r == CUDA_SUCCESS && e && e->real == (void *)hEvent) {
                e->recorded = true;
                e->have_when = false;
        }
        return r;
}

CUresult lupw_cuEventRecordWithFlags(struct lupw_session *s, CUevent hEvent, CUstream hStream, unsigned int flags)
{
        struct lupw_handle_ent *e = s->cur.event[1];
        CUresult r = s->be.fn.cuEventRecordWithFlags(hEvent, hStream, flags);
        if (r == CUDA_SUCCESS && e && e->real == (void *)hEvent) {
                e->recorded = true;
                e->have_when = false;
        }
        return r;
}

CUresult lupw_cuEventElapsedTime_v2(struct lupw_session *s, float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
        const struct lupw_handle_ent *a = s->cur.event[0], *b = s->cur.event[1];
        if (a && b && a->real == (void *)hStart && b->real == (void *)hEnd && a->have_when && b->have_when &&
            a->ctx == b->ctx) {
                *pMilliseconds = (float)(b->when_ms - a->when_ms);
                return CUDA_SUCCESS;
        }
        return s->be.fn.cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
}

struct ev_list {
        struct lupw_handle_ent **e;
        uint64_t *id;
        size_t n, cap;
};

static void collect_recorded(uint64_t key, uint64_t val, void *ud)
{
        struct ev_list *l = ud;
        struct lupw_handle_ent *e = (struct lupw_handle_ent *)(uintptr_t)val;
        if (e->kind == LUPW_H_EVENT && e->recorded && l->n < l->cap) {
                l->e[l->n] = e;
                l->id[l->n++] = key;
        }
}

/* The time of every recorded timing event of context ctx, relative to
 * the first one's. Events still carrying a restored time keep it when
 * every recorded event of the context does. */
static void measure_ctx(struct lupw_session *s, struct ev_list *l, uint64_t ctx, bool *done)
{
        bool all_restored = true;
        for (size_t i = 0; i < l->n; i++)
                if (l->e[i]->ctx == ctx && !l->e[i]->have_when && !(l->e[i]->prov.flags & CU_EVENT_DISABLE_TIMING))
                        all_restored = false;
        struct lupw_handle_ent *ref = NULL;
        for (size_t i = 0; i < l->n; i++) {
                struct lupw_handle_ent *e = l->e[i];
                if (e->ctx != ctx)
                        continue;
                done[i] = true;
                if (all_restored || (e->prov.flags & CU_EVENT_DISABLE_TIMING))
                        continue;
                float ms = 0;
                if (!ref) {
                        ref = e;
                        e->when_ms = 0;
                        e->have_when = true;
                } else if (lupw_bind_ctx(s, ctx) == CUDA_SUCCESS &&
                           s->be.fn.cuEventElapsedTime_v2(&ms, ref->real, e->real) == CUDA_SUCCESS) {
                        e->when_ms = ms;
                        e->have_when = true;
                } else {
                        e->have_when = false;
                }
        }
        if (ref && lupw_bind_ctx(s, ctx) != CUDA_SUCCESS)
                ref->have_when = false;
}

/* The object's bytes are checkpoint/ckpt_codec.c's. */
int lupw_events_save(struct lupw_session *s, struct lupine_ckpt_save *save)
{
        struct ev_list l = { .cap = s->obj.handles.used };
        l.e = calloc(l.cap ? l.cap : 1, sizeof(*l.e));
        l.id = calloc(l.cap ? l.cap : 1, sizeof(*l.id));
        bool *done = calloc(l.cap ? l.cap : 1, sizeof(*done));
        struct lup_ckpt_event *rec = calloc(l.cap ? l.cap : 1, sizeof(*rec));
        uint8_t *obj = NULL;
        size_t len = 0;
        int rc = -ENOMEM;
        if (!l.e || !l.id || !done || !rec)
                goto out;
        lup_u64map_each(&s->obj.handles, collect_recorded, &l);
        /* measure_ctx() writes the times into the events; they go back as
         * they were after, so a session that goes on after its checkpoint
         * (worker/ckpt_now.c) answers cuEventElapsedTime from the driver
         * as before, not from the float-rounded times measured here */
        for (size_t i = 0; i < l.n; i++)
                rec[i] = (struct lup_ckpt_event){ .have_when = l.e[i]->have_when, .when_ms = l.e[i]->when_ms };
        for (size_t i = 0; i < l.n; i++)
                if (!done[i])
                        measure_ctx(s, &l, l.e[i]->ctx, done);
        for (size_t i = 0; i < l.n; i++) {
                bool had = rec[i].have_when;
                double was = rec[i].when_ms;
                rec[i] = (struct lup_ckpt_event){ .id = l.id[i],
                                                  .have_when = l.e[i]->have_when,
                                                  .when_ms = l.e[i]->when_ms };
                l.e[i]->have_when = had;
                l.e[i]->when_ms = was;
        }
        rc = lup_ckpt_events_encode(rec, (uint32_t)l.n, &obj, &len);
        if (rc == 0)
                rc = s->ckpt.ops->save_write(save, "events", obj, len);
out:
        free(l.e);
        free(l.id);
        free(done);
        free(rec);
        free(obj);
        return rc;
}

int lupw_events_load(struct lupw_session *s, struct lupine_ckpt_load *ld, char *why, size_t whylen)
{
        const struct lup_sealed *kind = &lup_ckpt_events_kind;
        uint8_t *obj;
        uint64_t size;
        int rd = lupine_provider_read_object(s->ckpt.ops, ld, "events", kind->min_len, kind->max_len, &obj, &size);
        if (rd == -ENOENT)
                return 0; /* an older checkpoint: events restore unrecorded */
        if (rd < 0) {
                snprintf(why, whylen,
                         rd == -EBADMSG ? "object events has an impossible size" : "reading events failed");
                return rd;
        }
        struct lup_ckpt_event *v = NULL;
        uint32_t n = 0;
        const char *reason;
        int rc = lup_ckpt_events_decode(obj, (size_t)size, &v, &n, &reason);
        free(obj);
        if (rc < 0)
                snprintf(why, whylen, "%s", reason);
        for (uint32_t i = 0; i < n && rc == 0; i++) {
                struct lupw_handle_ent *e = lupw_handle_ent(s, LUPW_H_EVENT, v[i].id);
                if (!e) {
                        snprintf(why, whylen, "events names %" PRIx64 ", which is no restored event", v[i].id);
                        rc = -EBADMSG;
                        break;
                }
                e->recorded = true;
                e->have_when = v[i].have_when;
                e->when_ms = v[i].when_ms;
                /* recorded and complete, as before the checkpoint */
                CUresult cr = lupw_bind_ctx(s, e->ctx);
                if (cr == CUDA_SUCCESS)
                        cr = s->be.fn.cuEventRecord(e->real, NULL);
                if (cr == CUDA_SUCCESS)
                        cr = s->be.fn.cuEventSynchronize(e->real);
                if (cr != CUDA_SUCCESS) {
                        snprintf(why, whylen, "recording event %" PRIx64 " again failed (CUresult %d)", v[i].id,
                                 (int)cr);
                        rc = -EIO;
                }
        }
        free(v);
        s->be.fn.cuCtxSetCurrent(NULL);
        s->ctx.bound_id = 0;
        return rc;
}
