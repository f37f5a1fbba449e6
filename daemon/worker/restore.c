/* SPDX-License-Identifier: MIT */
/*
 * Rebuilding a session from its newest committed checkpoint (the objects
 * are listed in worker/ckpt.c, their bytes in checkpoint/ckpt_codec.h).
 * The checkpoint is untrusted input. The codec decodes and validates the
 * manifest first, with no driver call and no session state; only then is
 * it applied here, and what only the session can judge (its name, its
 * GPUs, its arena's chunks, the handles a record names) is checked on the
 * way, with every object's hash. Any inconsistency refuses the session with
 * one clear line; the daemon goes on serving the others.
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_codec.h"
#include "clock.h"
#include "hash.h"
#include "log.h"
#include "provider_dir.h"
#include "provider_load.h"
#include "worker/ckpt_base.h"
#include "worker/lanes.h"
#include "worker/graphs.h"
#include "worker/arrays.h"
#include "worker/mapped.h"
#include "worker/session.h"
#include "worker/slot_lease.h"


struct restorer {
        struct lupw_session *s;
        struct lupine_ckpt_load *ld;
        struct lupw_mem_span *spans; /* the runs of pieces to copy back */
        size_t n_spans, cap_spans;
        struct lupine_ckpt_load *base_ld[LUP_CKPT_MAX_BASES]; /* the epochs an incremental checkpoint refers to */
        uint32_t n_base_ld;
        char why[256];
};

static int fail(struct restorer *r, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct restorer *r, int rc, const char *fmt, ...)
{
        va_list ap;
        if (!r->why[0]) {
                va_start(ap, fmt);
                vsnprintf(r->why, sizeof(r->why), fmt, ap);
                va_end(ap);
        }
        return rc;
}

/* Reads a whole object of exactly `want` bytes (or any size up to `max`
 * when want is 0) into a new buffer. */
static int read_object(struct restorer *r, const char *name, uint64_t want, uint64_t max, uint8_t **ret,
                       uint64_t *ret_len)
{
        /* exactly want bytes, and never more than max (want > max: none will do) */
        uint64_t hi = want && want < max ? want : max, size = 0;
        int rc = lupine_provider_read_object(r->s->ckpt.ops, r->ld, name, want, hi, ret, &size);
        if (rc == -ENOENT)
                return fail(r, rc, "object %s is missing", name);
        if (rc == -EBADMSG)
                return fail(r, rc, "object %s has %" PRIu64 " bytes, expected %" PRIu64, name, size, want);
        if (rc == -ENOMEM)
                return fail(r, rc, "out of memory reading %s", name);
        if (rc < 0)
                return fail(r, rc, "reading %s failed", name);
        *ret_len = size;
        return 0;
}

/* Piece p of chunk c: which load holds it (its offset: lup_ckpt_piece_offset). */
static struct lupine_ckpt_load *piece_load(const struct restorer *r, const struct lup_ckpt_chunk *c, uint32_t p)
{
        return c->base && c->base[p] ? r->base_ld[c->base[p] - 1] : r->ld;
}

/* Adds the runs of chunk c to r->spans: pieces next to each other in one
 * object of one epoch make one span. Each run must lie inside its object. */
static int add_runs(struct restorer *r, const struct lup_ckpt_chunk *c, int device)
{
        struct lupw_session *s = r->s;
        /* the size of the chunk's object in each epoch, asked once: -1 not yet, -2 absent */
        int64_t sizes[LUP_CKPT_MAX_BASES + 1];
        for (unsigned k = 0; k <= LUP_CKPT_MAX_BASES; k++)
                sizes[k] = -1;
        for (uint32_t p = 0; p < c->n_pieces;) {
                struct lupine_ckpt_load *ld = piece_load(r, c, p);
                uint64_t off = lup_ckpt_piece_offset(c, p);
                uint32_t q = p + 1;
                while (q < c->n_pieces && piece_load(r, c, q) == ld &&
                       lup_ckpt_piece_offset(c, q) == off + (uint64_t)(q - p) * LUP_CKPT_PIECE)
                        q++;
                if (r->n_spans >= r->cap_spans)
                        return fail(r, -EBADMSG, "more memory runs than pieces");
                struct lupw_mem_span *sp = &r->spans[r->n_spans++];
                uint64_t at = (uint64_t)p * LUP_CKPT_PIECE, end = (uint64_t)q * LUP_CKPT_PIECE;
                *sp = (struct lupw_mem_span){ .addr = c->addr + at,
                                              .size = (end < c->size ? end : c->size) - at,
                                              .hashes = c->hashes + p,
                                              .device = device,
                                              .obj_off = off,
                                              .ld = ld == r->ld ? NULL : ld };
                snprintf(sp->name, sizeof(sp->name), "mem/%016" PRIx64, c->addr);
                unsigned k = c->base ? c->base[p] : 0;
                uint64_t total = 0;
                if (sizes[k] == -1)
                        sizes[k] = s->ckpt.ops->load_size(ld, sp->name, &total) < 0 ? -2 : (int64_t)total;
                total = sizes[k] < 0 ? 0 : (uint64_t)sizes[k];
                if (sizes[k] < 0 || total < off || total - off < sp->size)
                        return fail(r, -EBADMSG, "object %s%s is missing or shorter than its pieces", sp->name,
                                    ld == r->ld ? "" : " of a base epoch");
                p = q;
        }
        return 0;
}

/* Checks one memory record against the arena and, unless its chunk came
 * back mapped from its fd, adds its runs to r->spans (copied by
 * restore_memory; the piece hashes stay the manifest's). */
static int restore_chunk(struct restorer *r, const struct lup_ckpt_chunk *c)
{
        struct lupw_session *s = r->s;
        bool durable = (s->ckpt.mem & LUP_CKPT_MEM_DURABLE) != 0;
        bool mapped = false;
        int device = 0;
        for (size_t i = 0; i < s->mem.n_chunks; i++)
                if (s->mem.chunks[i].addr == c->addr && s->mem.chunks[i].size == c->size) {
                        mapped = true;
                        device = s->mem.chunks[i].device;
                }
        if (!mapped)
                return fail(r, -EBADMSG, "memory record at 0x%" PRIx64 " matches no chunk of the arena", c->addr);
        if (lupw_hot_imported(s, c->addr))
                return 0; /* mapped from its fd: the bytes are there, copy none */
        if (!durable)
                return fail(r, -ENOENT, "the chunk at 0x%" PRIx64 " was kept only on the GPU and has no fd", c->addr);
        return add_runs(r, c, device);
}

/* Opens the epochs an incremental checkpoint refers to. One that is gone
 * or damaged refuses the session, as a damaged checkpoint does. */
static int open_bases(struct restorer *r, const struct lup_ckpt_manifest *m)
{
        struct lupw_session *s = r->s;
        for (uint32_t k = 0; k < m->n_bases; k++) {
                uint64_t got = 0;
                int rc = s->ckpt.ops->load_begin(s->ckpt.inst, s->name, m->bases[k], &r->base_ld[k], &got);
                if (rc == 0 && got != m->bases[k]) {
                        s->ckpt.ops->load_end(r->base_ld[k]);
                        rc = -ENOENT;
                }
                if (rc < 0)
                        return fail(r, -EBADMSG,
                                    "base epoch %" PRIu64 " of this incremental checkpoint cannot be "
                                    "opened: %s",
                                    m->bases[k], rc == -ENOENT ? "it is gone" : s->ckpt.ops->last_error(s->ckpt.inst));
                r->n_base_ld = k + 1;
        }
        return 0;
}

/* The memory the records named, through the lanes (worker/lanes.c): read,
 * checked against its hashes, copied to the device, lanes in parallel. */
static int restore_memory(struct restorer *r, const struct lup_ckpt_manifest *m)
{
        struct lupw_session *s = r->s;
        char why[256] = "";
        if (m->n_chunks != s->mem.n_chunks)
                return fail(r, -EBADMSG, "the memory records do not match the arena");
        int rc = open_bases(r, m);
        if (rc < 0)
                return rc;
        size_t pieces = 0;
        for (uint32_t i = 0; i < m->n_chunks; i++)
                pieces += m->chunks[i].n_pieces;
        r->cap_spans = pieces;
        r->spans = calloc(pieces ? pieces : 1, sizeof(*r->spans));
        if (!r->spans)
                return fail(r, -ENOMEM, "out of memory");
        for (uint32_t i = 0; i < m->n_chunks; i++) {
                rc = restore_chunk(r, &m->chunks[i]);
                if (rc < 0)
                        return rc;
        }
        rc = lupw_lanes_restore(s, r->ld, r->spans, r->n_spans, why, sizeof(why));
        return rc < 0 ? fail(r, rc, "%s", why) : 0;
}

static void free_spans(struct restorer *r)
{
        free(r->spans); /* the hashes are the manifest's */
        r->spans = NULL;
        r->n_spans = 0;
        for (uint32_t k = 0; k < r->n_base_ld; k++)
                r->s->ckpt.ops->load_end(r->base_ld[k]);
        r->n_base_ld = 0;
}

/* modules and libraries first, then what is made from them, then the rest */
static int rank(const struct lup_ckpt_handle *h)
{
        switch (h->kind) {
        case LUPW_H_LIBRARY:
                return 0;
        case LUPW_H_MODULE:
                return h->image_len ? 0 : 2;
        case LUPW_H_KERNEL:
                return 1;
        case LUPW_H_FUNCTION:
                return 3;
        default:
                return 4;
        }
}

/* By rank, and within a rank in the manifest's order (the pointers point
 * into one array). */
static int cmp_rank(const void *a, const void *b)
{
        const struct lup_ckpt_handle *ha = *(const struct lup_ckpt_handle *const *)a;
        const struct lup_ckpt_handle *hb = *(const struct lup_ckpt_handle *const *)b;
        int ra = rank(ha), rb = rank(hb);
        if (ra != rb)
                return ra - rb;
        return ha < hb ? -1 : ha > hb;
}

/* A module's or library's image, read and checked against its hash; it
 * becomes the provenance of the handle made next (s->obj.prov). */
static int load_image(struct restorer *r, const struct lup_ckpt_handle *h, uint8_t **ret)
{
        struct lupw_session *s = r->s;
        char name[64];
        uint8_t *img;
        uint64_t n;
        snprintf(name, sizeof(name), "img/%016" PRIx64, h->id);
        int rc = read_object(r, name, h->image_len, LUP_MAX_BLOB, &img, &n);
        if (rc < 0)
                return rc;
        if (lup_hash64(img, n, 0) != h->image_hash) {
                free(img);
                return fail(r, -EBADMSG, "image %s does not match its checksum", name);
        }
        s->obj.prov.image = img;
        s->obj.prov.image_len = n;
        *ret = img;
        return 0;
}

static int remake_handle(struct restorer *r, const struct lup_ckpt_handle *h)
{
        struct lupw_session *s = r->s;
        const struct lupw_backend *be = &s->be.fn;
        void *real = NULL, *parent = NULL;
        /* made with no context bound (libraries, kernels): device 0's will do */
        CUresult cr = h->ctx ? lupw_bind_ctx(s, h->ctx) : s->be.fn.cuCtxSetCurrent(s->ctx.primary[0]);
        if (cr != CUDA_SUCCESS)
                return fail(r, -EBADMSG, "handle %" PRIx64 " names an unknown context", h->id);
        if (!h->ctx)
                s->ctx.bound_id = 0;
        if (lupw_handle_fresh(s, h->id) < 0)
                return fail(r, -EBADMSG, "handle id %" PRIx64 " is malformed or repeated", h->id);
        lupw_prov_free(&s->obj.prov);
        s->obj.prov.parent = h->parent;
        s->obj.prov.flags = h->flags;
        s->obj.prov.priority = h->priority;
        if (h->name[0] && !(s->obj.prov.name = strdup(h->name)))
                return fail(r, -ENOMEM, "out of memory");
        uint8_t *img = NULL;
        if (h->image_len) {
                int rc = load_image(r, h, &img);
                if (rc < 0)
                        return rc;
        }
        switch (h->kind) {
        case LUPW_H_LIBRARY:
                cr = img ? be->cuLibraryLoadData((CUlibrary *)&real, img, NULL, NULL, 0, NULL, NULL, 0)
                         : CUDA_ERROR_INVALID_IMAGE;
                break;
        case LUPW_H_MODULE:
                if (img)
                        cr = be->cuModuleLoadData((CUmodule *)&real, img);
                else if ((cr = lupw_handle(s, LUPW_H_LIBRARY, h->parent, &parent)) == CUDA_SUCCESS)
                        cr = be->cuLibraryGetModule((CUmodule *)&real, parent);
                break;
        case LUPW_H_KERNEL:
                if ((cr = lupw_handle(s, LUPW_H_LIBRARY, h->parent, &parent)) == CUDA_SUCCESS)
                        cr = be->cuLibraryGetKernel((CUkernel *)&real, parent, h->name);
                break;
        case LUPW_H_FUNCTION:
                if (lupw_handle(s, LUPW_H_MODULE, h->parent, &parent) == CUDA_SUCCESS)
                        cr = be->cuModuleGetFunction((CUfunction *)&real, parent, h->name);
                else if ((cr = lupw_handle(s, LUPW_H_KERNEL, h->parent, &parent)) == CUDA_SUCCESS)
                        cr = be->cuKernelGetFunction((CUfunction *)&real, parent);
                break;
        case LUPW_H_STREAM:
                cr = be->cuStreamCreateWithPriority((CUstream *)&real, h->flags, h->priority);
                break;
        case LUPW_H_EVENT:
                cr = be->cuEventCreate((CUevent *)&real, h->flags);
                break;
        default:
                return fail(r, -EBADMSG, "handle %" PRIx64 " has an unknown kind %u", h->id, h->kind);
        }
        if (cr == CUDA_SUCCESS)
                cr = lupw_handle_put(s, h->kind, h->id, real);
        if (cr != CUDA_SUCCESS)
                return fail(r, -EIO, "re-creating handle %" PRIx64 " (kind %u) failed with CUresult %d", h->id, h->kind,
                            (int)cr);
        return 0;
}

/* Every handle, made again in an order that has each one's parent first. */
static int restore_handles(struct restorer *r, const struct lup_ckpt_manifest *m)
{
        const struct lup_ckpt_handle **order = malloc((m->n_handles ? m->n_handles : 1) * sizeof(*order));
        int rc = 0;
        if (!order)
                return fail(r, -ENOMEM, "out of memory");
        for (uint32_t i = 0; i < m->n_handles; i++)
                order[i] = &m->handles[i];
        qsort(order, m->n_handles, sizeof(*order), cmp_rank);
        for (uint32_t i = 0; i < m->n_handles && rc == 0; i++)
                rc = remake_handle(r, order[i]);
        free(order);
        return rc;
}

static int restore_global(struct restorer *r, const struct lup_ckpt_global *g)
{
        struct lupw_session *s = r->s;
        const char *name = g->name;
        void *h;
        CUdeviceptr now = 0;
        size_t now_size = 0;
        CUresult cr;
        if (lupw_handle(s, LUPW_H_MODULE, g->holder, &h) == CUDA_SUCCESS)
                cr = s->be.fn.cuModuleGetGlobal_v2(&now, &now_size, h, name);
        else if (lupw_handle(s, LUPW_H_LIBRARY, g->holder, &h) == CUDA_SUCCESS)
                cr = s->be.fn.cuLibraryGetGlobal(&now, &now_size, h, name);
        else
                return fail(r, -EBADMSG, "global %s belongs to no restored module", name);
        if (cr != CUDA_SUCCESS || now_size != g->size)
                return fail(r, -EIO, "global %s is not in the reloaded module as before", name);
        char obj[64];
        uint8_t *data;
        uint64_t n;
        snprintf(obj, sizeof(obj), "glob/%016" PRIx64, g->addr);
        int rc = read_object(r, obj, g->size, g->size, &data, &n);
        if (rc < 0)
                return rc;
        if (lup_hash64(data, n, 0) != g->hash) {
                free(data);
                return fail(r, -EBADMSG, "global %s does not match its checksum", name);
        }
        cr = s->be.fn.cuMemcpyHtoD_v2(now, data, n);
        free(data);
        if (cr != CUDA_SUCCESS)
                return fail(r, -EIO, "writing global %s failed", name);
        /* the client keeps using the old address; the worker translates */
        char *keep = strdup(name);
        struct lup_range gr = { .base = g->addr, .size = g->size, .a = g->holder, .b = (uint64_t)(uintptr_t)keep };
        if (!keep || lup_rangemap_add(&s->obj.globals, &gr) < 0) {
                free(keep);
                return fail(r, -EBADMSG, "global %s overlaps another", name);
        }
        if (now != g->addr) {
                struct lup_range x = { .base = g->addr, .size = g->size, .a = now };
                if (lup_rangemap_add(&s->obj.xlate, &x) < 0)
                        return fail(r, -ENOMEM, "out of memory");
        }
        return 0;
}

/* A limit, cache configuration or attribute, made again on the restored
 * context or handle (and remembered again for the next checkpoint). */
static int restore_setting(struct restorer *r, const struct lup_ckpt_setting *t)
{
        struct lupw_session *s = r->s;
        const struct lupw_backend *be = &s->be.fn;
        int64_t value = t->value;
        void *h;
        CUresult cr = CUDA_ERROR_INVALID_VALUE;
        switch (t->kind) {
        case LUPW_SET_CTX_LIMIT:
        case LUPW_SET_CTX_CACHE:
                if ((cr = lupw_bind_ctx(s, t->holder)) != CUDA_SUCCESS)
                        break;
                cr = t->kind == LUPW_SET_CTX_LIMIT ? be->cuCtxSetLimit((CUlimit)t->key, (size_t)value)
                                                   : be->cuCtxSetCacheConfig((CUfunc_cache)value);
                break;
        case LUPW_SET_FUNC_ATTR:
        case LUPW_SET_FUNC_CACHE:
                if ((cr = lupw_handle(s, LUPW_H_FUNCTION, t->holder, &h)) != CUDA_SUCCESS)
                        break;
                cr = t->kind == LUPW_SET_FUNC_ATTR ? be->cuFuncSetAttribute(h, (CUfunction_attribute)t->key, (int)value)
                                                   : be->cuFuncSetCacheConfig(h, (CUfunc_cache)value);
                break;
        case LUPW_SET_KERNEL_ATTR:
                if (t->device < 0 || t->device >= s->n_devices)
                        break;
                if ((cr = lupw_handle(s, LUPW_H_KERNEL, t->holder, &h)) != CUDA_SUCCESS)
                        break;
                cr = be->cuKernelSetAttribute((CUfunction_attribute)t->key, (int)value, h, t->device);
                break;
        default:
                break;
        }
        if (cr != CUDA_SUCCESS)
                return fail(r, -EIO, "re-applying setting %u/%u of %" PRIx64 " failed (CUresult %d)", t->kind, t->key,
                            t->holder, (int)cr);
        lupw_remember(s, t->holder, t->kind, t->key, t->device, value);
        return 0;
}

/* The session's identity, its arena slot, the primary contexts the client
 * held and the contexts it made. */
static int restore_contexts(struct restorer *r, const struct lup_ckpt_manifest *m)
{
        struct lupw_session *s = r->s;
        char err[200];
        if (strcmp(m->name, s->name) != 0)
                return fail(r, -EBADMSG, "the manifest belongs to another session");
        if ((int)m->n_devices > s->n_devices)
                return fail(r, -ENODEV, "the session used %u GPUs; this host has %d", m->n_devices, s->n_devices);
        memcpy(s->token, m->token, LUP_TOKEN_SIZE);
        lupw_hot_check_epoch(s, m->epoch);
        if (lupw_reserve_arena(s, m->slot, err, sizeof(err)) < 0)
                return fail(r, -EADDRINUSE, "%s", err);
        if (lupw_slot_fleet(s)) { /* the same addresses on any host of the fleet (worker/slot_lease.c) */
                int rc = lupw_slot_take(s, m->slot, err, sizeof(err));
                if (rc < 0)
                        return fail(r, rc, "%s", err);
        }
        for (uint32_t d = 0; d < m->n_devices; d++)
                if ((m->primaries & (1u << d)) && lupw_lupPrimaryCtxRetain(s, (CUdevice)d) != CUDA_SUCCESS)
                        return fail(r, -EIO, "cannot retain the primary context of device %u", d);
        for (uint32_t i = 0; i < m->n_ctxs; i++)
                if (lupw_lupCtxCreate(s, m->ctxs[i].id, m->ctxs[i].flags, m->ctxs[i].device) != CUDA_SUCCESS)
                        return fail(r, -EIO, "cannot re-create context %" PRIx64, m->ctxs[i].id);
        return 0;
}

/* The arena, in the same layout, bound to device 0's context for the VMM
 * calls. Mapping a chunk may import it from a hot checkpoint's fd. */
static int restore_arena(struct restorer *r, const struct lup_ckpt_manifest *m)
{
        struct lupw_session *s = r->s;
        s->be.fn.cuCtxSetCurrent(s->ctx.primary[0]);
        s->ctx.bound_id = 0;
        for (uint32_t i = 0; i < m->n_slabs; i++) {
                const struct lup_ckpt_slab *sl = &m->slabs[i];
                if (arena_import_slab(&s->mem.arena, sl->addr, sl->block, sl->device) != 0)
                        return fail(r, -EBADMSG, "cannot rebuild a slab at 0x%" PRIx64, sl->addr);
        }
        for (uint32_t i = 0; i < m->n_allocs; i++) {
                const struct lup_ckpt_alloc *a = &m->allocs[i];
                if (arena_import_alloc(&s->mem.arena, a->addr, a->size, a->chunk, a->device, a->owner) != 0)
                        return fail(r, -EBADMSG, "cannot rebuild the allocation at 0x%" PRIx64, a->addr);
        }
        return 0;
}

/* A decoded manifest, applied in the order each step needs the last. */
static int apply_manifest(struct restorer *r, const struct lup_ckpt_manifest *m)
{
        struct lupw_session *s = r->s;
        s->ckpt.mem = m->mem; /* before the arena: arena_map asks lupw_hot_import */
        int rc = restore_contexts(r, m);
        if (rc == 0)
                rc = restore_arena(r, m);
        if (rc == 0 && (rc = lupw_vmm_restore(s, &m->vmm, r->why, sizeof(r->why))) < 0)
                rc = fail(r, rc, "%s", r->why); /* the client's VMM (worker/vmm.c): homes before memory */
        if (rc == 0)
                rc = restore_memory(r, m);
        free_spans(r);
        if (rc == 0)
                rc = restore_handles(r, m);
        for (uint32_t i = 0; i < m->n_globals && rc == 0; i++)
                rc = restore_global(r, &m->globals[i]);
        for (uint32_t i = 0; i < m->n_settings && rc == 0; i++)
                rc = restore_setting(r, &m->settings[i]);
        if (rc < 0)
                return rc;
        s->ckpt.epoch = m->epoch;
        lupw_base_set(s, m, 0); /* the next save may refer to what this one holds (worker/ckpt_base.c) */
        s->last_seq = m->last_seq;
        s->latched = (CUresult)m->latched;
        s->be.fn.cuCtxSetCurrent(NULL);
        s->ctx.bound_id = 0;
        return 0;
}

/* Decode (checkpoint/ckpt_codec.c), then apply. */
static int restore_manifest(struct restorer *r, const uint8_t *man, size_t len)
{
        struct lup_ckpt_manifest m;
        const char *why;
        int rc = lup_ckpt_manifest_decode(man, len, &m, &why);
        if (rc == -EPROTO)
                return fail(r, rc, "checkpoint format version %u is not supported (this lupined reads %u to %u)",
                            lup_sealed_peek_version(man, len), LUP_CKPT_MANIFEST_VERSION_MIN,
                            LUP_CKPT_MANIFEST_VERSION);
        if (rc < 0)
                return fail(r, rc, "%s", why);
        rc = apply_manifest(r, &m);
        lup_ckpt_manifest_free(&m);
        return rc;
}

int lupw_restore(struct lupw_session *s, const char *name)
{
        struct restorer r = { .s = s };
        uint64_t epoch = 0, len = 0;
        uint8_t *man = NULL;
        CUresult st;
        int rc;

        double t0 = lup_now_s();
        const char *why = lupw_open_device(s, &st);
        double t1 = lup_now_s();
        if (why) {
                lup_err("session %s cannot be restored: %s", name, why);
                return -ENODEV;
        }
        rc = lupw_ckpt_open(s);
        if (rc < 0) {
                lup_err("session %s cannot be restored: no usable checkpoint provider", name);
                return rc;
        }
        rc = lupw_lease_claim(s); /* -EBUSY: another host runs it (logged) */
        if (rc < 0)
                return rc;
        rc = s->ckpt.ops->load_begin(s->ckpt.inst, name, 0, &r.ld, &epoch);
        if (rc == -ENOENT) { /* a client resumed a session no host checkpointed (supervisor/adopt.c) */
                lup_info("session %s: no committed checkpoint of it in the store", name);
                return rc;
        }
        if (rc < 0) {
                lup_err("session %s cannot be restored: %s", name, s->ckpt.ops->last_error(s->ckpt.inst));
                return rc;
        }
        rc = read_object(&r, "manifest", 0, LUP_CKPT_MANIFEST_MAX, &man, &len);
        if (rc == 0)
                rc = restore_manifest(&r, man, (size_t)len);
        if (rc == 0)
                rc = lupw_events_load(s, r.ld, r.why, sizeof(r.why));
        if (rc == 0)
                rc = lupw_graphs_load(s, r.ld, r.why, sizeof(r.why));
        if (rc == 0)
                rc = lupw_mapped_load(s, r.ld, r.why, sizeof(r.why));
        if (rc == 0)
                rc = lupw_arrays_load(s, r.ld, r.why, sizeof(r.why)); /* worker/arrays_ckpt.c */
        if (rc == 0)
                rc = lupw_tx_load(s, r.ld, r.why, sizeof(r.why));
        free(man);
        free_spans(&r);
        s->ckpt.mem = 0; /* arena_map creates memory again from now on */
        lupw_hot_done(s);
        s->ckpt.ops->load_end(r.ld);
        if (rc < 0) {
                lup_err("session %s cannot be restored from checkpoint epoch %" PRIu64 ": %s", name, epoch, r.why);
                /* Damaged contents (issue 15, finding 6): out of the way, so
                 * that the name's next drain can save. */
                if (rc == -EBADMSG && s->ckpt.ops == lupine_dir_provider())
                        (void)lupine_dir_quarantine(s->ckpt.inst, name, epoch, r.why);
                else if (rc == -EBADMSG)
                        lup_warn("session %s: the provider cannot move the damaged checkpoint aside; remove epoch "
                                 "%" PRIu64 " by hand, or the next drain of a session called %s fails",
                                 name, epoch, name);
                return rc;
        }
        double t2 = lup_now_s();
        uint64_t bytes = 0;
        for (size_t i = 0; i < s->mem.n_chunks; i++)
                bytes += s->mem.chunks[i].size;
        double init = t1 - t0, load = t2 - t1;
        size_t hot_chunks;
        uint64_t hot_bytes;
        lupw_hot_stats(s, &hot_chunks, &hot_bytes);
        lup_info("session %s: restored checkpoint epoch %" PRIu64
                 " (%zu allocations, %zu handles): driver start %.3f s, "
                 "%.2f GiB in %.3f s (%.2f GB/s)",
                 name, epoch, s->mem.arena.n_allocs, s->obj.handles.used, init, bytes / 1073741824.0, load,
                 load > 0 ? (bytes - hot_bytes) / load / 1e9 : 0.0);
        if (s->ckpt.hot)
                lup_info("session %s: hot restore: %zu of %zu chunk(s) (%.2f GiB) mapped from their fds, %" PRIu64
                         " bytes copied, modules and state in %.3f s",
                         name, hot_chunks, s->mem.n_chunks, hot_bytes / 1073741824.0, bytes - hot_bytes, load);
        return 0;
}
