/* SPDX-License-Identifier: MIT */
/*
 * Checkpoint and restore of one session, through the configured provider.
 *
 * A checkpoint is a set of objects: "mem/<addr>" (each arena chunk's
 * contents, unless the memory flags say the checkpoint is hot only: then
 * the chunks stay on the GPU, exported as fds), "img/<id>" (module and
 * library images), "glob/<addr>" (module globals' contents), "events"
 * (worker/handles.c), "replies" (worker/tx.c) and, written last,
 * "manifest": everything needed to rebuild the session — identity and
 * token, arena slot and layout, contexts, handles and how each was made,
 * globals, settings, the last executed sequence number — with a 64-bit
 * content hash for every 1 MiB piece of memory and for every object, and
 * one over the manifest itself. The bytes of manifest, events and replies
 * are checkpoint/ckpt_codec.c's (its header describes them): this file
 * builds the manifest struct from the session, saving the objects it
 * names on the way, and hands it to the codec. A restore (worker/restore.c)
 * trusts none of it.
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include <errno.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt_codec.h"
#include "clock.h"
#include "hash.h"
#include "log.h"
#include "provider_load.h"
#include "worker/ckpt_base.h"
#include "worker/lanes.h"
#include "worker/graphs.h"
#include "worker/piece_hash.h"
#include "worker/precopy.h"
#include "worker/arrays.h"
#include "worker/mapped.h"
#include "worker/session.h"


/* ---- the provider */

int lupw_ckpt_open(struct lupw_session *s)
{
        const struct lupd_config *cfg = s->cfg;
        char err[256];
        if (s->ckpt.inst)
                return 0;
        const char *path = cfg->checkpoint_provider[0] ? cfg->checkpoint_provider : getenv("LUPINE_CHECKPOINT_LIBRARY");
        if (path && !*path)
                path = NULL;
        const char *config = lupw_ckpt_config(s);
        if (!path && !config)
                return -ENOTSUP; /* no checkpoints configured */
        int rc = lupine_provider_load(path, &s->ckpt.ops, &s->ckpt.dl, err, sizeof(err));
        if (rc < 0) {
                lup_err("session %s: checkpoint provider: %s", s->name, err);
                return rc;
        }
        rc = s->ckpt.ops->open(config, &s->ckpt.inst);
        if (rc < 0) {
                /* The supervisor may have opened it with capabilities
                 * (root's CAP_DAC_OVERRIDE); a worker has none. */
                char hint[128] = "";
                if (rc == -EACCES || rc == -EPERM)
                        snprintf(hint, sizeof(hint),
                                 " (workers keep no capabilities: uid %d itself needs access; docs/security.md)",
                                 (int)getuid());
                lup_err("session %s: checkpoint provider %s cannot open '%s': %s%s", s->name, s->ckpt.ops->name,
                        config ? config : "(default)", strerror(-rc), hint);
                lupine_provider_unload(s->ckpt.dl);
                s->ckpt.dl = NULL;
                s->ckpt.ops = NULL;
                return rc;
        }
        return 0;
}

void lupw_ckpt_close(struct lupw_session *s)
{
        lupw_lanes_direct_release(s); /* the region is the instance's */
        lupw_precopy_cancel(s, "the session ends"); /* its save is the instance's */
        lupw_base_free(s);                          /* its epochs are the store's */
        if (s->ckpt.inst)
                s->ckpt.ops->close(s->ckpt.inst);
        s->ckpt.inst = NULL;
        lupine_provider_unload(s->ckpt.dl);
        s->ckpt.dl = NULL;
        s->ckpt.ops = NULL;
}

void lupw_forget_checkpoint(struct lupw_session *s)
{
        if (lupw_ckpt_open(s) < 0)
                return;
        /* no provider call while its thread writes (worker/precopy.h) */
        lupw_precopy_cancel(s, "the session's checkpoint is deleted");
        /* A remove cannot be fenced: look first that the session is still
         * ours, so that a host that lost it never deletes the new holder's
         * checkpoint (docs/fleet.md). */
        if (!lupw_lease_confirm(s)) {
                lup_info("session %s: another host holds it now; its checkpoint stays", s->name);
                return;
        }
        s->lease.release_at_end = true; /* ended: the name is free for any host */
        int rc = s->ckpt.ops->remove(s->ckpt.inst, s->name);
        /* no checkpoint can bring it back: its arena slot is free for
         * the fleet (worker/slot_lease.c) */
        s->lease.slot_release = rc == 0 || rc == -ENOENT;
        if (rc < 0 && rc != -ENOENT)
                lup_warn("session %s: cannot delete its checkpoint: %s", s->name,
                         s->ckpt.ops->last_error(s->ckpt.inst));
}

CUresult lupw_sync_all(struct lupw_session *s)
{
        CUresult first = CUDA_SUCCESS;
        lupw_captures_abort(s); /* a synchronisation would invalidate them anyway */
        for (int d = 0; d < s->n_devices; d++) {
                if (!s->ctx.primary[d])
                        continue;
                CUresult r = s->be.fn.cuCtxSetCurrent(s->ctx.primary[d]);
                if (r == CUDA_SUCCESS)
                        r = s->be.fn.cuCtxSynchronize();
                if (first == CUDA_SUCCESS)
                        first = r;
        }
        for (int i = 0; i < s->ctx.n_slots; i++) {
                CUresult r = s->be.fn.cuCtxSetCurrent(s->ctx.slots[i].real);
                if (r == CUDA_SUCCESS)
                        r = s->be.fn.cuCtxSynchronize();
                if (first == CUDA_SUCCESS)
                        first = r;
        }
        s->ctx.bound_id = 0; /* the next call binds again */
        return first;
}

/* ---- saving */

_Static_assert(LUPW_MAX_SETTINGS == LUP_CKPT_MAX_SETTINGS, "a restore must read every setting a save writes");

struct saver {
        struct lupw_session *s;
        struct lupine_ckpt_save *save;
        uint64_t epoch;
        int rc;
        struct lupw_mem_span *spans; /* every chunk, with its hashes */
        uint64_t *hashes;
        size_t n_spans;
        struct lupw_incr_plan plan;            /* an incremental save's (worker/ckpt_base.c) */
        uint64_t written;                      /* bytes of memory this save wrote (with its pre-copy's) */
        uint64_t paused_written;               /* ... of them with the session quiesced */
        const struct lupw_precopy_result *pre; /* the pre-copy this save completes (worker/precopy.c), or NULL */
};

static int put(struct saver *sv, const char *name, const void *p, size_t n)
{
        if (sv->rc == 0)
                sv->rc = sv->s->ckpt.ops->save_write(sv->save, name, p, n);
        return sv->rc;
}

/* The spans the save wrote: the changed pieces of an incremental one,
 * else every chunk. */
static const struct lupw_mem_span *written_spans(const struct saver *sv, size_t *ret_n)
{
        *ret_n = sv->plan.incremental ? sv->plan.n_write : sv->n_spans;
        return sv->plan.incremental ? sv->plan.write : sv->spans;
}

/* An incremental save, where it can be (worker/ckpt_base.h says when):
 * every chunk hashed on the GPU first, then only the pieces that changed
 * copied. Returns whether the lanes still have to hash (a full save). */
static int plan_incremental(struct saver *sv, bool *ret_hashed)
{
        struct lupw_session *s = sv->s;
        char why[256] = "";
        const char *full = "";
        *ret_hashed = false;
        if (!lupw_incr_possible(s))
                return 0;
        int rc = lupw_piece_hash_all(s, sv->spans, sv->n_spans, why, sizeof(why));
        if (rc < 0 && rc != -ENOTSUP) {
                lup_warn("session %s: checkpoint: %s; it writes everything", s->name, why);
                return 0; /* the lanes plan and hash again */
        }
        *ret_hashed = rc == 0; /* incremental or not, every hash is taken */
        rc = lupw_incr_plan(s, sv->save, sv->epoch, sv->spans, sv->n_spans, &sv->plan, &full);
        if (rc < 0)
                return rc;
        if (!sv->plan.incremental && *full)
                lup_info("session %s: checkpoint epoch %llu is full: %s", s->name, (unsigned long long)sv->epoch, full);
        return 0;
}

/* The end of a pre-copied save: every chunk hashed on the GPU now that
 * the session is quiesced, and only the pieces that changed since the
 * pre-copy copied them written again (all of them if the GPU cannot hash). */
static int plan_after_precopy(struct saver *sv, bool *ret_hashed)
{
        struct lupw_session *s = sv->s;
        char why[256] = "";
        bool all_new = lupw_piece_hash_all(s, sv->spans, sv->n_spans, why, sizeof(why)) < 0;
        if (all_new)
                lup_warn("session %s: checkpoint: the memory cannot be hashed on the GPU (%s); the pre-copy "
                         "is written again in full",
                         s->name, why);
        *ret_hashed = !all_new;
        return lupw_incr_plan_final(sv->pre->record, sv->spans, sv->n_spans, all_new, &sv->plan);
}

/* Every chunk's contents through the lanes (worker/lanes.c), or only its
 * changed pieces, then each chunk's record in recs: address, size, piece
 * count, one hash per piece (kept in sv->hashes) and, incrementally, where
 * each piece is. */
static int save_memory(struct saver *sv, struct lup_ckpt_chunk *recs)
{
        struct lupw_session *s = sv->s;
        char why[256] = "";
        if (lupw_chunk_spans(s, &sv->spans, &sv->hashes, &sv->n_spans) < 0)
                return sv->rc = -ENOMEM;
        struct lupw_mem_span *spans = sv->spans;
        size_t n = sv->n_spans;
        bool hashed = false;
        sv->rc = sv->pre ? plan_after_precopy(sv, &hashed) : plan_incremental(sv, &hashed);
        if (sv->rc < 0)
                return sv->rc;
        size_t nw;
        struct lupw_mem_span *w = (struct lupw_mem_span *)written_spans(sv, &nw);
        sv->rc = lupw_lanes_save(s, sv->save, w, nw, hashed, why, sizeof(why));
        if (sv->rc < 0) {
                lup_err("session %s: checkpoint: %s", s->name, why);
                return sv->rc;
        }
        for (size_t i = 0; i < nw; i++)
                sv->paused_written += w[i].size;
        sv->written = sv->paused_written + (sv->pre ? sv->pre->written : 0);
        for (size_t i = 0, at = 0; i < n; i++) {
                recs[i] = (struct lup_ckpt_chunk){ .addr = spans[i].addr,
                                                   .size = spans[i].size,
                                                   .n_pieces = (uint32_t)lup_ckpt_pieces(spans[i].size),
                                                   .hashes = spans[i].hashes };
                if (sv->plan.incremental) {
                        recs[i].base = sv->plan.base + at;
                        recs[i].offset = sv->plan.offset + at;
                }
                at += recs[i].n_pieces;
        }
        return 0;
}

static bool verify_wanted(const struct lupw_session *s)
{
        const char *e = getenv("LUPINE_CHECKPOINT_VERIFY");
        return (s->cfg && s->cfg->checkpoint_verify) || (e && strcmp(e, "1") == 0);
}

/* --checkpoint-verify: reads the memory of the epoch just committed back
 * through the provider and checks every piece against the hash the save
 * recorded (taken from device memory), so what the provider keeps is
 * known to be what the GPU held. */
static int verify_memory(struct saver *sv, uint64_t epoch)
{
        struct lupw_session *s = sv->s;
        const struct lupine_checkpoint_provider *p = s->ckpt.ops;
        struct lupine_ckpt_load *ld = NULL;
        double t0 = lup_now_s();
        uint64_t got = 0, bytes = 0;
        int rc = p->load_begin(s->ckpt.inst, s->name, epoch, &ld, &got);
        if (rc < 0) {
                lup_err("session %s: checkpoint epoch %llu cannot be read back to verify it: %s", s->name,
                        (unsigned long long)epoch, p->last_error(s->ckpt.inst));
                return rc;
        }
        uint8_t *buf = malloc(LUP_CKPT_PIECE);
        if (!buf)
                rc = -ENOMEM;
        size_t nw;
        const struct lupw_mem_span *w = written_spans(sv, &nw);
        for (size_t i = 0; i < nw && rc == 0; i++) {
                const struct lupw_mem_span *sp = &w[i];
                for (uint64_t off = 0; off < sp->size && rc == 0; off += LUP_CKPT_PIECE) {
                        size_t len = sp->size - off < LUP_CKPT_PIECE ? (size_t)(sp->size - off) : LUP_CKPT_PIECE;
                        int64_t k = lupine_provider_read_full(p, ld, sp->name, sp->obj_off + off, buf, len);
                        if (k != (int64_t)len) {
                                rc = k < 0 ? (int)k : -EIO;
                                lup_err("session %s: verifying checkpoint epoch %llu: reading %s at %" PRIu64
                                        " failed: %s",
                                        s->name, (unsigned long long)epoch, sp->name, sp->obj_off + off,
                                        k < 0 ? p->last_error(s->ckpt.inst) : "it ends early");
                        }
                        if (rc == 0 && lup_hash64(buf, len, 0) != sp->hashes[off / LUP_CKPT_PIECE]) {
                                rc = -EBADMSG;
                                lup_err("session %s: checkpoint epoch %llu is corrupt: %s at offset %" PRIu64
                                        " (device address 0x%" PRIx64 ") does not match its hash",
                                        s->name, (unsigned long long)epoch, sp->name, sp->obj_off + off,
                                        sp->addr + off);
                        }
                        bytes += len;
                }
        }
        free(buf);
        p->load_end(ld);
        if (rc == 0)
                lup_info("session %s: checkpoint epoch %llu verified: %.2f GiB read back through %s in %.3f s, "
                         "every piece matches", s->name, (unsigned long long)epoch, bytes / 1073741824.0, p->name,
                         lup_now_s() - t0);
        return rc;
}

struct handle_list {
        uint64_t *ids;
        size_t n, cap;
};

static void collect(uint64_t key, uint64_t val, void *ud)
{
        struct handle_list *l = ud;
        const struct lupw_handle_ent *e = (const struct lupw_handle_ent *)(uintptr_t)val;
        if (e->kind == LUPW_H_GRAPH || e->kind == LUPW_H_GRAPHEXEC || e->kind == LUPW_H_GRAPHNODE)
                /* object "graphs" (worker/graphs_ckpt.c) */
                return;
        if (l->n < l->cap)
                l->ids[l->n++] = key;
}

/* The manifest's lists, allocated before anything is saved so that a lack
 * of memory fails the checkpoint before its first write. */
static int alloc_lists(struct lupw_session *s, struct lup_ckpt_manifest *m, struct handle_list *hl)
{
        size_t ns = arena_slab_count(&s->mem.arena), nh = s->obj.handles.used;
        m->slabs = calloc(ns ? ns : 1, sizeof(*m->slabs));
        m->allocs = calloc(s->mem.arena.n_allocs ? s->mem.arena.n_allocs : 1, sizeof(*m->allocs));
        m->chunks = calloc(s->mem.n_chunks ? s->mem.n_chunks : 1, sizeof(*m->chunks));
        m->handles = calloc(nh ? nh : 1, sizeof(*m->handles));
        m->globals = calloc(s->obj.globals.n ? s->obj.globals.n : 1, sizeof(*m->globals));
        m->settings = calloc(s->obj.n_settings ? s->obj.n_settings : 1, sizeof(*m->settings));
        *hl = (struct handle_list){ .cap = nh, .ids = calloc(nh ? nh : 1, sizeof(*hl->ids)) };
        if (!m->slabs || !m->allocs || !m->chunks || !m->handles || !m->globals || !m->settings || !hl->ids)
                return -ENOMEM;
        return 0;
}

/* Identity, contexts, the arena's layout (slabs first, then every
 * allocation) and the settings: copied from the session, nothing saved. */
static void describe_session(struct lupw_session *s, struct lup_ckpt_manifest *m)
{
        memcpy(m->name, s->name, strlen(s->name) + 1);
        memcpy(m->token, s->token, LUP_TOKEN_SIZE);
        m->slot = s->slot;
        m->last_seq = s->last_seq;
        m->latched = (uint32_t)s->latched;
        m->n_devices = (uint32_t)s->n_devices;
        for (int d = 0; d < s->n_devices; d++)
                if (s->ctx.client_primary[d])
                        m->primaries |= 1u << d;
        m->n_ctxs = (uint32_t)s->ctx.n_slots;
        for (int i = 0; i < s->ctx.n_slots; i++)
                m->ctxs[i] = (struct lup_ckpt_ctx){ .id = s->ctx.slots[i].id,
                                                    .device = s->ctx.slots[i].device,
                                                    .flags = s->ctx.slots[i].flags };
        m->n_slabs = (uint32_t)arena_slab_count(&s->mem.arena);
        for (size_t i = 0; i < m->n_slabs; i++) {
                struct lup_ckpt_slab *sl = &m->slabs[i];
                int dev;
                arena_slab_info(&s->mem.arena, i, &sl->addr, &sl->block, &dev);
                sl->device = dev;
        }
        m->n_allocs = (uint32_t)s->mem.arena.n_allocs;
        for (size_t i = 0; i < s->mem.arena.n_allocs; i++) {
                const struct arena_alloc *a = &s->mem.arena.allocs[i];
                m->allocs[i] = (struct lup_ckpt_alloc){
                        .addr = a->addr, .size = a->size, .chunk = a->chunk, .device = a->device, .owner = a->owner
                };
        }
        m->n_settings = (uint32_t)s->obj.n_settings;
        for (size_t i = 0; i < s->obj.n_settings; i++) {
                const struct lupw_setting *t = &s->obj.settings[i];
                m->settings[i] = (struct lup_ckpt_setting){
                        .holder = t->holder, .kind = t->kind, .key = t->key, .device = t->device, .value = t->value
                };
        }
}

/* Handles and how each was made; a module's or library's image is saved
 * as img/<id>. Stops at the first failed write (sv->rc). */
static void save_handles(struct saver *sv, struct lup_ckpt_manifest *m, struct handle_list *hl)
{
        struct lupw_session *s = sv->s;
        lup_u64map_each(&s->obj.handles, collect, hl);
        m->n_handles = (uint32_t)hl->n;
        for (size_t i = 0; i < hl->n && sv->rc == 0; i++) {
                uint64_t v;
                lup_u64map_get(&s->obj.handles, hl->ids[i], &v);
                const struct lupw_handle_ent *e = (const struct lupw_handle_ent *)(uintptr_t)v;
                struct lup_ckpt_handle *h = &m->handles[i];
                *h = (struct lup_ckpt_handle){ .id = hl->ids[i],
                                               .kind = (uint8_t)e->kind,
                                               .ctx = e->ctx,
                                               .parent = e->prov.parent,
                                               .name = e->prov.name ? e->prov.name : "",
                                               .flags = e->prov.flags,
                                               .priority = e->prov.priority,
                                               .image_len = e->prov.image_len };
                if (e->prov.image_len) {
                        char name[64];
                        snprintf(name, sizeof(name), "img/%016" PRIx64, hl->ids[i]);
                        h->image_hash = lup_hash64(e->prov.image, e->prov.image_len, 0);
                        put(sv, name, e->prov.image, e->prov.image_len);
                }
        }
}

/* Module globals the client knows, their contents read from the device
 * and saved as glob/<addr>. Stops at the first failure (sv->rc). */
static void save_globals(struct saver *sv, struct lup_ckpt_manifest *m)
{
        struct lupw_session *s = sv->s;
        m->n_globals = (uint32_t)s->obj.globals.n;
        for (size_t i = 0; i < s->obj.globals.n && sv->rc == 0; i++) {
                const struct lup_range *g = &s->obj.globals.r[i];
                struct lup_ckpt_global *rec = &m->globals[i];
                *rec = (struct lup_ckpt_global){
                        .addr = g->base, .size = g->size, .holder = g->a, .name = (const char *)(uintptr_t)g->b
                };
                uint8_t *tmp = malloc(g->size ? g->size : 1);
                CUresult r =
                        tmp ? s->be.fn.cuMemcpyDtoH_v2(tmp, lupw_xlate(s, g->base), g->size) : CUDA_ERROR_OUT_OF_MEMORY;
                if (r != CUDA_SUCCESS) {
                        free(tmp);
                        sv->rc = -EIO;
                        break;
                }
                char name[64];
                snprintf(name, sizeof(name), "glob/%016" PRIx64, g->base);
                rec->hash = lup_hash64(tmp, g->size, 0);
                put(sv, name, tmp, g->size);
                free(tmp);
        }
}

/*
 * The session as a manifest (*m, which lup_ckpt_manifest_free() frees in
 * any case; names and hashes point into the session and sv). Saves, in
 * this order, the memory (durable checkpoints), the images and the
 * globals' contents. 0 or -errno, also in sv->rc.
 */
static int build_manifest(struct saver *sv, uint32_t mem, uint64_t epoch, struct lup_ckpt_manifest *m)
{
        struct lupw_session *s = sv->s;
        struct handle_list hl;

        memset(m, 0, sizeof(*m));
        m->version = LUP_CKPT_MANIFEST_VERSION;
        m->mem = mem;
        m->epoch = epoch;
        sv->rc = alloc_lists(s, m, &hl);
        if (sv->rc == 0) {
                describe_session(s, m);
                m->n_chunks = (uint32_t)s->mem.n_chunks;
                if (mem & LUP_CKPT_MEM_DURABLE && save_memory(sv, m->chunks) == 0 && sv->plan.incremental) {
                        m->n_bases = sv->plan.n_bases;
                        memcpy(m->bases, sv->plan.bases, sizeof(m->bases));
                } else if (!(mem & LUP_CKPT_MEM_DURABLE))
                        for (size_t i = 0; i < s->mem.n_chunks; i++) /* hot only: the contents stay on the GPU */
                                m->chunks[i] = (struct lup_ckpt_chunk){ .addr = s->mem.chunks[i].addr,
                                                                        .size = s->mem.chunks[i].size };
        }
        if (sv->rc == 0)
                save_handles(sv, m, &hl);
        if (sv->rc == 0)
                save_globals(sv, m);
        if (sv->rc == 0)
                sv->rc = lupw_vmm_describe(s, &m->vmm); /* the client's VMM (worker/vmm.c) */
        free(hl.ids);
        return sv->rc;
}

/* Commits a save that went well (then logs it, and with --checkpoint-verify
 * reads its memory back), or aborts one that did not. */
static int finish_save(struct saver *sv, uint32_t mem, uint64_t epoch, double t0)
{
        struct lupw_session *s = sv->s;
        int rc;

        if (sv->rc != 0) {
                lup_err("session %s: checkpoint failed: %s (%s)", s->name, strerror(-sv->rc),
                        s->ckpt.ops->last_error(s->ckpt.inst));
                s->ckpt.ops->save_abort(sv->save);
                return sv->rc;
        }
        rc = s->ckpt.ops->save_commit(sv->save);
        if (rc == -ESTALE) {
                atomic_store(&s->lease.lost, true);
                lup_err("session %s: checkpoint not committed: another host claimed the session's lease since (%s); "
                        "this host stops running it",
                        s->name, s->ckpt.ops->last_error(s->ckpt.inst));
                return rc;
        }
        if (rc != 0) {
                lup_err("session %s: checkpoint commit failed: %s", s->name, s->ckpt.ops->last_error(s->ckpt.inst));
                return rc;
        }
        double dt = lup_now_s() - t0;
        uint64_t bytes = 0;
        for (size_t i = 0; i < s->mem.n_chunks; i++)
                bytes += s->mem.chunks[i].size;
        uint64_t copied = (mem & LUP_CKPT_MEM_DURABLE) ? sv->paused_written : 0;
        char incr[160] = "";
        if (sv->pre)
                snprintf(incr, sizeof(incr), ", after a pre-copy of %.2f GiB in %.2f s while it ran%s",
                         sv->pre->written / 1073741824.0, sv->pre->seconds,
                         sv->plan.n_bases ? " and references to older epochs" : "");
        else if (sv->plan.incremental)
                snprintf(incr, sizeof(incr), ", incremental: %.1f%% written, the rest in %u older epoch(s)",
                         bytes ? 100.0 * (double)copied / (double)bytes : 0.0, sv->plan.n_bases);
        lup_info("session %s: checkpoint epoch %llu (%s): %.2f GiB of device memory in %zu chunk(s), "
                 "%llu bytes copied, in %.3f s (%.2f GB/s effective) through %s, %u lane(s)%s",
                 s->name, (unsigned long long)epoch,
                 mem == (LUP_CKPT_MEM_DURABLE | LUP_CKPT_MEM_HOT) ? "hot and durable"
                 : mem == LUP_CKPT_MEM_HOT                        ? "hot"
                                                                  : "durable",
                 bytes / 1073741824.0, s->mem.n_chunks, (unsigned long long)copied, dt,
                 dt > 0 && (mem & LUP_CKPT_MEM_DURABLE) ? bytes / dt / 1e9 : 0.0, s->ckpt.ops->name,
                 (mem & LUP_CKPT_MEM_DURABLE) ? lupw_lanes_used(s) : 0, incr);
        s->ckpt.epoch = epoch;
        s->ckpt.last = (struct lupw_ckpt_last){ .precopied = sv->pre ? sv->pre->written : 0,
                                                .paused_written = copied,
                                                .paused_us = (uint64_t)(dt * 1e6) };
        lupw_stats_committed(s);
        /* a corrupt checkpoint is no checkpoint: the drain must not count on it */
        if (verify_wanted(s) && (mem & LUP_CKPT_MEM_DURABLE))
                rc = verify_memory(sv, epoch);
        s->ckpt.drained = rc == 0;
        return rc;
}

int lupw_checkpoint(struct lupw_session *s, uint32_t mem)
{
        double t0 = lup_now_s();
        int rc = lupw_ckpt_open(s);
        if (rc < 0)
                return rc;
        struct saver sv = { .s = s };
        if (s->ckpt.precopy && !(mem & LUP_CKPT_MEM_DURABLE))
                lupw_precopy_cancel(s, "this checkpoint keeps the memory on the GPU");
        else if (s->ckpt.precopy)
                sv.pre = lupw_precopy_result(s); /* NULL: it failed (logged) */
        uint64_t epoch = sv.pre ? sv.pre->epoch : s->ckpt.epoch + 1;
        if (sv.pre)
                sv.save = sv.pre->save; /* begun and fenced already */
        else
                rc = s->ckpt.ops->save_begin(s->ckpt.inst, s->name, epoch, &sv.save);
        if (rc < 0) {
                lup_err("session %s: checkpoint: %s", s->name, s->ckpt.ops->last_error(s->ckpt.inst));
                return rc;
        }
        rc = sv.pre ? 0 : lupw_lease_fence(s, sv.save); /* a host that lost the lease never commits (worker/lease.c) */
        if (rc < 0) {
                lup_err("session %s: checkpoint not begun: %s", s->name,
                        rc == -ESTALE   ? "another host claimed the session's lease"
                        : rc == -ENOLCK ? "this worker holds no lease for the session"
                                        : s->ckpt.ops->last_error(s->ckpt.inst));
                s->ckpt.ops->save_abort(sv.save);
                return rc;
        }
        struct lup_ckpt_manifest m;
        uint8_t *man = NULL;
        size_t len = 0;
        sv.epoch = epoch;
        if (build_manifest(&sv, mem, epoch, &m) == 0)
                sv.rc = lup_ckpt_manifest_encode(&m, &man, &len);
        /* events' recorded state and the unacknowledged answers (worker/handles.c, worker/tx.c) */
        if (sv.rc == 0)
                sv.rc = lupw_events_save(s, sv.save);
        if (sv.rc == 0)
                sv.rc = lupw_graphs_save(s, sv.save);
        if (sv.rc == 0)
                sv.rc = lupw_mapped_save(s, sv.save);
        if (sv.rc == 0)
                sv.rc = lupw_arrays_save(s, sv.save); /* worker/arrays_ckpt.c */
        if (sv.rc == 0)
                sv.rc = lupw_tx_save(s, sv.save);
        if (sv.rc == 0)
                put(&sv, "manifest", man, len);
        free(man);
        rc = finish_save(&sv, mem, epoch, t0);
        if (sv.pre)
                lupw_precopy_done(s);             /* its save is committed or aborted now */
        if (rc == 0 || s->ckpt.epoch == epoch)    /* committed (a failed verify still committed) */
                lupw_base_set(s, &m, sv.written); /* the next save's base (worker/ckpt_base.c) */
        lup_ckpt_manifest_free(&m);
        lupw_incr_plan_free(&sv.plan);
        free(sv.spans);
        free(sv.hashes);
        return rc;
}
