/* SPDX-License-Identifier: MIT */
/*
 * Rebuilding a session from its newest committed checkpoint (the format is
 * described in worker/ckpt.c). The checkpoint is untrusted input: every
 * count is bounded, every name checked, every hash verified, and any
 * inconsistency refuses the session with one clear line; the daemon goes on
 * serving the others.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_format.h"
#include "clock.h"
#include "hash.h"
#include "log.h"
#include "provider_load.h"
#include "worker/lanes.h"
#include "worker/session.h"


struct restorer {
        struct lupw_session *s;
        struct lupine_ckpt_load *ld;
        struct lupw_mem_span *spans; /* the chunks to copy back, n_chunks at most */
        size_t n_spans;
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
        const struct lupine_checkpoint_provider *p = r->s->prov_ops;
        uint64_t size;
        int rc = p->load_size(r->ld, name, &size);
        if (rc < 0)
                return fail(r, rc, "object %s is missing", name);
        if ((want && size != want) || size > max)
                return fail(r, -EBADMSG, "object %s has %" PRIu64 " bytes, expected %" PRIu64, name, size, want);
        uint8_t *buf = malloc(size ? size : 1);
        if (!buf)
                return fail(r, -ENOMEM, "out of memory reading %s", name);
        int64_t k = lupine_provider_read_full(p, r->ld, name, 0, buf, (size_t)size);
        if (k != (int64_t)size) {
                free(buf);
                return fail(r, k < 0 ? (int)k : -EIO, "reading %s failed", name);
        }
        *ret = buf;
        *ret_len = size;
        return 0;
}

/* Checks one memory record and, unless its chunk came back mapped from
 * its fd, adds it to r->spans with its piece hashes (copied by
 * restore_memory). */
static int restore_chunk(struct restorer *r, struct lup_rd *rd)
{
        struct lupw_session *s = r->s;
        uint64_t addr, size;
        uint32_t pieces;
        lup_rd_u64(rd, &addr);
        lup_rd_u64(rd, &size);
        lup_rd_u32(rd, &pieces);
        bool durable = (s->ckpt_mem & CKPT_MEM_DURABLE) != 0;
        if (rd->err || pieces != (durable ? (size + PIECE - 1) / PIECE : 0))
                return fail(r, -EBADMSG, "malformed memory record");
        bool mapped = false;
        int device = 0;
        for (size_t i = 0; i < s->n_chunks; i++)
                if (s->chunks[i].addr == addr && s->chunks[i].size == size) {
                        mapped = true;
                        device = s->chunks[i].device;
                }
        if (!mapped)
                return fail(r, -EBADMSG, "memory record at 0x%" PRIx64 " matches no chunk of the arena", addr);
        if (lupw_hot_imported(s, addr)) {
                /* mapped from its fd: the bytes are there, copy none */
                for (uint32_t i = 0; i < pieces; i++) {
                        uint64_t skip;
                        lup_rd_u64(rd, &skip);
                }
                return rd->err ? fail(r, -EBADMSG, "malformed memory record") : 0;
        }
        if (!durable)
                return fail(r, -ENOENT, "the chunk at 0x%" PRIx64 " was kept only on the GPU and has no fd", addr);
        if (r->n_spans >= s->n_chunks)
                return fail(r, -EBADMSG, "more memory records than chunks");
        struct lupw_mem_span *sp = &r->spans[r->n_spans];
        *sp = (struct lupw_mem_span){ .addr = addr, .size = size, .device = device };
        snprintf(sp->name, sizeof(sp->name), "mem/%016" PRIx64, addr);
        uint64_t total;
        if (s->prov_ops->load_size(r->ld, sp->name, &total) < 0 || total != size)
                return fail(r, -EBADMSG, "object %s is missing or has the wrong size", sp->name);
        sp->hashes = malloc((pieces ? pieces : 1) * sizeof(*sp->hashes));
        if (!sp->hashes)
                return fail(r, -ENOMEM, "out of memory");
        r->n_spans++;
        for (uint32_t i = 0; i < pieces; i++)
                lup_rd_u64(rd, &sp->hashes[i]);
        return rd->err ? fail(r, -EBADMSG, "malformed memory record") : 0;
}

/* The memory the records named, through the lanes (worker/lanes.c): read,
 * checked against its hashes, copied to the device, lanes in parallel. */
static int restore_memory(struct restorer *r)
{
        char why[256] = "";
        int rc = lupw_lanes_restore(r->s, r->ld, r->spans, r->n_spans, why, sizeof(why));
        return rc < 0 ? fail(r, rc, "%s", why) : 0;
}

static void free_spans(struct restorer *r)
{
        for (size_t i = 0; i < r->n_spans; i++)
                free(r->spans[i].hashes);
        free(r->spans);
        r->spans = NULL;
        r->n_spans = 0;
}

struct saved_handle {
        uint64_t id, ctx, parent, image_len, image_hash;
        uint8_t kind;
        char name[LUP_MAX_STR + 1];
        uint32_t flags;
        int32_t priority;
};

/* modules and libraries first, then what is made from them, then the rest */
static int rank(const struct saved_handle *h)
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

static int cmp_rank(const void *a, const void *b)
{
        int ra = rank(a), rb = rank(b);
        return ra - rb;
}

static int remake_handle(struct restorer *r, const struct saved_handle *h)
{
        struct lupw_session *s = r->s;
        const struct lupw_backend *be = &s->be.fn;
        void *real = NULL, *parent = NULL;
        /* made with no context bound (libraries, kernels): device 0's will do */
        CUresult cr = h->ctx ? lupw_bind_ctx(s, h->ctx) : s->be.fn.cuCtxSetCurrent(s->primary[0]);
        if (cr != CUDA_SUCCESS)
                return fail(r, -EBADMSG, "handle %" PRIx64 " names an unknown context", h->id);
        if (!h->ctx)
                s->bound_id = 0;
        if (lupw_handle_fresh(s, h->id) < 0)
                return fail(r, -EBADMSG, "handle id %" PRIx64 " is malformed or repeated", h->id);
        lupw_prov_free(&s->prov);
        s->prov.parent = h->parent;
        s->prov.flags = h->flags;
        s->prov.priority = h->priority;
        if (h->name[0] && !(s->prov.name = strdup(h->name)))
                return fail(r, -ENOMEM, "out of memory");
        uint8_t *img = NULL;
        if (h->image_len) {
                char name[64];
                uint64_t n;
                snprintf(name, sizeof(name), "img/%016" PRIx64, h->id);
                int rc = read_object(r, name, h->image_len, LUP_MAX_BLOB, &img, &n);
                if (rc < 0)
                        return rc;
                if (lup_hash64(img, n, 0) != h->image_hash) {
                        free(img);
                        return fail(r, -EBADMSG, "image %s does not match its checksum", name);
                }
                s->prov.image = img;
                s->prov.image_len = n;
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

static int restore_global(struct restorer *r, struct lup_rd *rd)
{
        struct lupw_session *s = r->s;
        uint64_t old, size, holder, hash;
        const char *nm;
        size_t nlen;
        lup_rd_u64(rd, &old);
        lup_rd_u64(rd, &size);
        lup_rd_u64(rd, &holder);
        lup_rd_str16(rd, LUP_MAX_STR, &nm, &nlen);
        lup_rd_u64(rd, &hash);
        if (rd->err || size == 0 || size > LUP_MAX_BLOB)
                return fail(r, -EBADMSG, "malformed global record");
        char name[LUP_MAX_STR + 1];
        memcpy(name, nm, nlen);
        name[nlen] = 0;
        void *h;
        CUdeviceptr now = 0;
        size_t now_size = 0;
        CUresult cr;
        if (lupw_handle(s, LUPW_H_MODULE, holder, &h) == CUDA_SUCCESS)
                cr = s->be.fn.cuModuleGetGlobal_v2(&now, &now_size, h, name);
        else if (lupw_handle(s, LUPW_H_LIBRARY, holder, &h) == CUDA_SUCCESS)
                cr = s->be.fn.cuLibraryGetGlobal(&now, &now_size, h, name);
        else
                return fail(r, -EBADMSG, "global %s belongs to no restored module", name);
        if (cr != CUDA_SUCCESS || now_size != size)
                return fail(r, -EIO, "global %s is not in the reloaded module as before", name);
        char obj[64];
        uint8_t *data;
        uint64_t n;
        snprintf(obj, sizeof(obj), "glob/%016" PRIx64, old);
        int rc = read_object(r, obj, size, size, &data, &n);
        if (rc < 0)
                return rc;
        if (lup_hash64(data, n, 0) != hash) {
                free(data);
                return fail(r, -EBADMSG, "global %s does not match its checksum", name);
        }
        cr = s->be.fn.cuMemcpyHtoD_v2(now, data, n);
        free(data);
        if (cr != CUDA_SUCCESS)
                return fail(r, -EIO, "writing global %s failed", name);
        /* the client keeps using the old address; the worker translates */
        char *keep = strdup(name);
        struct lup_range g = { .base = old, .size = size, .a = holder, .b = (uint64_t)(uintptr_t)keep };
        if (!keep || lup_rangemap_add(&s->globals, &g) < 0) {
                free(keep);
                return fail(r, -EBADMSG, "global %s overlaps another", name);
        }
        if (now != old) {
                struct lup_range x = { .base = old, .size = size, .a = now };
                if (lup_rangemap_add(&s->xlate, &x) < 0)
                        return fail(r, -ENOMEM, "out of memory");
        }
        return 0;
}

/* A limit, cache configuration or attribute, made again on the restored
 * context or handle (and remembered again for the next checkpoint). */
static int restore_setting(struct restorer *r, struct lup_rd *rd)
{
        struct lupw_session *s = r->s;
        const struct lupw_backend *be = &s->be.fn;
        uint64_t holder, v;
        uint32_t kind, key;
        int32_t dev;
        void *h;
        CUresult cr = CUDA_ERROR_INVALID_VALUE;
        lup_rd_u64(rd, &holder);
        lup_rd_u32(rd, &kind);
        lup_rd_u32(rd, &key);
        lup_rd_i32(rd, &dev);
        lup_rd_u64(rd, &v);
        if (rd->err)
                return fail(r, -EBADMSG, "malformed setting record");
        int64_t value = (int64_t)v;
        switch (kind) {
        case LUPW_SET_CTX_LIMIT:
        case LUPW_SET_CTX_CACHE:
                if ((cr = lupw_bind_ctx(s, holder)) != CUDA_SUCCESS)
                        break;
                cr = kind == LUPW_SET_CTX_LIMIT ? be->cuCtxSetLimit((CUlimit)key, (size_t)value)
                                                : be->cuCtxSetCacheConfig((CUfunc_cache)value);
                break;
        case LUPW_SET_FUNC_ATTR:
        case LUPW_SET_FUNC_CACHE:
                if ((cr = lupw_handle(s, LUPW_H_FUNCTION, holder, &h)) != CUDA_SUCCESS)
                        break;
                cr = kind == LUPW_SET_FUNC_ATTR ? be->cuFuncSetAttribute(h, (CUfunction_attribute)key, (int)value)
                                                : be->cuFuncSetCacheConfig(h, (CUfunc_cache)value);
                break;
        case LUPW_SET_KERNEL_ATTR:
                if (dev < 0 || dev >= s->n_devices)
                        break;
                if ((cr = lupw_handle(s, LUPW_H_KERNEL, holder, &h)) != CUDA_SUCCESS)
                        break;
                cr = be->cuKernelSetAttribute((CUfunction_attribute)key, (int)value, h, dev);
                break;
        default:
                break;
        }
        if (cr != CUDA_SUCCESS)
                return fail(r, -EIO, "re-applying setting %u/%u of %" PRIx64 " failed (CUresult %d)", kind, key, holder,
                            (int)cr);
        lupw_remember(s, holder, kind, key, dev, value);
        return 0;
}

static int restore_manifest(struct restorer *r, const uint8_t *man, size_t len)
{
        struct lupw_session *s = r->s;
        if (len < 16 || lup_hash64(man, len - 8, MANIFEST_MAGIC) != lup_le64(man + len - 8))
                return fail(r, -EBADMSG, "the manifest is damaged (checksum mismatch)");
        struct lup_rd rd = lup_rd_init(man, len - 8);
        uint64_t magic, epoch, last_seq;
        uint32_t version, slot, latched, ndev, primaries, nctx;
        const char *nm;
        size_t nlen;
        lup_rd_u64(&rd, &magic);
        lup_rd_u32(&rd, &version);
        if (rd.err || magic != MANIFEST_MAGIC)
                return fail(r, -EBADMSG, "not a lupine checkpoint");
        if (version < MANIFEST_VERSION_MIN || version > MANIFEST_VERSION)
                return fail(r, -EPROTO, "checkpoint format version %u is not supported (this lupined reads %u to %u)",
                            version, MANIFEST_VERSION_MIN, MANIFEST_VERSION);
        s->ckpt_mem = CKPT_MEM_DURABLE;
        if (version >= 2)
                lup_rd_u32(&rd, &s->ckpt_mem);
        if (rd.err || s->ckpt_mem == 0 || (s->ckpt_mem & ~(CKPT_MEM_DURABLE | CKPT_MEM_HOT)))
                return fail(r, -EBADMSG, "the manifest has impossible memory flags");
        lup_rd_str16(&rd, LUP_MAX_NAME, &nm, &nlen);
        lup_rd_copy(&rd, s->token, LUP_TOKEN_SIZE);
        lup_rd_u64(&rd, &epoch);
        lup_rd_u32(&rd, &slot);
        lup_rd_u64(&rd, &last_seq);
        lup_rd_u32(&rd, &latched);
        lup_rd_u32(&rd, &ndev);
        lup_rd_u32(&rd, &primaries);
        lup_rd_u32(&rd, &nctx);
        if (rd.err || nlen != strlen(s->name) || memcmp(nm, s->name, nlen) != 0)
                return fail(r, -EBADMSG, "the manifest belongs to another session");
        if (slot >= LUP_ARENA_SLOTS || ndev > LUP_MAX_DEVICES || nctx > LUP_MAX_CONTEXTS)
                return fail(r, -EBADMSG, "the manifest has impossible values");
        if ((int)ndev > s->n_devices)
                return fail(r, -ENODEV, "the session used %u GPUs; this host has %d", ndev, s->n_devices);
        lupw_hot_check_epoch(s, epoch);
        char err[200];
        if (lupw_reserve_arena(s, slot, err, sizeof(err)) < 0)
                return fail(r, -EADDRINUSE, "%s", err);
        for (uint32_t d = 0; d < ndev; d++)
                if ((primaries & (1u << d)) && lupw_lupPrimaryCtxRetain(s, (CUdevice)d) != CUDA_SUCCESS)
                        return fail(r, -EIO, "cannot retain the primary context of device %u", d);
        for (uint32_t i = 0; i < nctx; i++) {
                uint64_t id;
                int32_t dev;
                uint32_t flags;
                lup_rd_u64(&rd, &id);
                lup_rd_i32(&rd, &dev);
                lup_rd_u32(&rd, &flags);
                if (rd.err || dev < 0 || dev >= (int)ndev)
                        return fail(r, -EBADMSG, "malformed context record");
                if (lupw_lupCtxCreate(s, id, flags, dev) != CUDA_SUCCESS)
                        return fail(r, -EIO, "cannot re-create context %" PRIx64, id);
        }
        /* the arena, in the same layout, bound to device 0's context for the VMM calls */
        s->be.fn.cuCtxSetCurrent(s->primary[0]);
        s->bound_id = 0;
        uint32_t nslab, nalloc, nchunk, nhandle, nglob;
        lup_rd_u32(&rd, &nslab);
        for (uint32_t i = 0; i < nslab && !rd.err; i++) {
                uint64_t addr;
                uint32_t block;
                int32_t dev;
                lup_rd_u64(&rd, &addr);
                lup_rd_u32(&rd, &block);
                lup_rd_i32(&rd, &dev);
                if (rd.err || dev < 0 || dev >= (int)ndev || arena_import_slab(&s->arena, addr, block, dev) != 0)
                        return fail(r, -EBADMSG, "cannot rebuild a slab at 0x%" PRIx64, addr);
        }
        lup_rd_u32(&rd, &nalloc);
        if (rd.err || nalloc > LUP_MAX_ALLOCS)
                return fail(r, -EBADMSG, "malformed allocation list");
        for (uint32_t i = 0; i < nalloc; i++) {
                uint64_t addr, size, chunk, owner;
                int32_t dev;
                lup_rd_u64(&rd, &addr);
                lup_rd_u64(&rd, &size);
                lup_rd_u64(&rd, &chunk);
                lup_rd_i32(&rd, &dev);
                lup_rd_u64(&rd, &owner);
                if (rd.err || dev < 0 || dev >= (int)ndev ||
                    arena_import_alloc(&s->arena, addr, size, chunk, dev, owner) != 0)
                        return fail(r, -EBADMSG, "cannot rebuild the allocation at 0x%" PRIx64, addr);
        }
        lup_rd_u32(&rd, &nchunk);
        if (rd.err || nchunk != s->n_chunks)
                return fail(r, -EBADMSG, "the memory records do not match the arena");
        r->spans = calloc(nchunk ? nchunk : 1, sizeof(*r->spans));
        if (!r->spans)
                return fail(r, -ENOMEM, "out of memory");
        for (uint32_t i = 0; i < nchunk; i++) {
                int rc = restore_chunk(r, &rd);
                if (rc < 0)
                        return rc;
        }
        int mrc = restore_memory(r);
        free_spans(r);
        if (mrc < 0)
                return mrc;
        lup_rd_u32(&rd, &nhandle);
        if (rd.err || nhandle > LUP_MAX_HANDLES)
                return fail(r, -EBADMSG, "malformed handle list");
        struct saved_handle *hs = calloc(nhandle ? nhandle : 1, sizeof(*hs));
        if (!hs)
                return fail(r, -ENOMEM, "out of memory");
        for (uint32_t i = 0; i < nhandle && !rd.err; i++) {
                struct saved_handle *h = &hs[i];
                lup_rd_u64(&rd, &h->id);
                lup_rd_u8(&rd, &h->kind);
                lup_rd_u64(&rd, &h->ctx);
                lup_rd_u64(&rd, &h->parent);
                lup_rd_str16(&rd, LUP_MAX_STR, &nm, &nlen);
                if (!rd.err) {
                        memcpy(h->name, nm, nlen);
                        h->name[nlen] = 0;
                }
                lup_rd_u32(&rd, &h->flags);
                lup_rd_i32(&rd, &h->priority);
                lup_rd_u64(&rd, &h->image_len);
                if (h->image_len)
                        lup_rd_u64(&rd, &h->image_hash);
                if (h->image_len > LUP_MAX_BLOB)
                        rd.err = -EBADMSG;
        }
        if (rd.err) {
                free(hs);
                return fail(r, -EBADMSG, "malformed handle record");
        }
        qsort(hs, nhandle, sizeof(*hs), cmp_rank);
        for (uint32_t i = 0; i < nhandle; i++) {
                int rc = remake_handle(r, &hs[i]);
                if (rc < 0) {
                        free(hs);
                        return rc;
                }
        }
        free(hs);
        lup_rd_u32(&rd, &nglob);
        if (rd.err || nglob > LUP_MAX_HANDLES)
                return fail(r, -EBADMSG, "malformed global list");
        for (uint32_t i = 0; i < nglob; i++) {
                int rc = restore_global(r, &rd);
                if (rc < 0)
                        return rc;
        }
        uint32_t nset;
        lup_rd_u32(&rd, &nset);
        if (rd.err || nset > LUPW_MAX_SETTINGS)
                return fail(r, -EBADMSG, "malformed settings list");
        for (uint32_t i = 0; i < nset; i++) {
                int rc = restore_setting(r, &rd);
                if (rc < 0)
                        return rc;
        }
        if (lup_rd_finish(&rd) < 0)
                return fail(r, -EBADMSG, "trailing bytes in the manifest");
        s->epoch = epoch;
        s->last_seq = last_seq;
        s->latched = (CUresult)latched;
        s->be.fn.cuCtxSetCurrent(NULL);
        s->bound_id = 0;
        return 0;
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
        rc = s->prov_ops->load_begin(s->prov_inst, name, 0, &r.ld, &epoch);
        if (rc < 0) {
                lup_err("session %s cannot be restored: %s", name,
                        rc == -ENOENT ? "no committed checkpoint" : s->prov_ops->last_error(s->prov_inst));
                return rc;
        }
        rc = read_object(&r, "manifest", 0, MANIFEST_MAX, &man, &len);
        if (rc == 0)
                rc = restore_manifest(&r, man, (size_t)len);
        if (rc == 0)
                rc = lupw_events_load(s, r.ld, r.why, sizeof(r.why));
        if (rc == 0)
                rc = lupw_tx_load(s, r.ld, r.why, sizeof(r.why));
        free(man);
        free_spans(&r);
        s->ckpt_mem = 0; /* arena_map creates memory again from now on */
        lupw_hot_done(s);
        s->prov_ops->load_end(r.ld);
        if (rc < 0) {
                lup_err("session %s cannot be restored from checkpoint epoch %" PRIu64 ": %s", name, epoch, r.why);
                return rc;
        }
        double t2 = lup_now_s();
        uint64_t bytes = 0;
        for (size_t i = 0; i < s->n_chunks; i++)
                bytes += s->chunks[i].size;
        double init = t1 - t0, load = t2 - t1;
        size_t hot_chunks;
        uint64_t hot_bytes;
        lupw_hot_stats(s, &hot_chunks, &hot_bytes);
        lup_info("session %s: restored checkpoint epoch %" PRIu64 " (%zu allocations, %zu handles): driver start %.3f s, "
                 "%.2f GiB in %.3f s (%.2f GB/s)", name, epoch, s->arena.n_allocs, s->handles.used, init,
                 bytes / 1073741824.0, load, load > 0 ? (bytes - hot_bytes) / load / 1e9 : 0.0);
        if (s->hot)
                lup_info("session %s: hot restore: %zu of %zu chunk(s) (%.2f GiB) mapped from their fds, %" PRIu64
                         " bytes copied, modules and state in %.3f s",
                         name, hot_chunks, s->n_chunks, hot_bytes / 1073741824.0, bytes - hot_bytes, load);
        return 0;
}
