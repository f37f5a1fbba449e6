/* SPDX-License-Identifier: MIT */
/*
 * Checkpoint and restore of one session, through the configured provider.
 *
 * A checkpoint is a set of objects: "mem/<addr>" (each arena chunk's
 * contents, unless the memory flags after the version say the checkpoint
 * is hot only: then the chunks stay on the GPU, exported as fds), "img/<id>" (module and library images), "glob/<addr>" (module
 * globals' contents) and, written last, "manifest": everything needed to
 * rebuild the session — identity and token, arena slot and layout, contexts,
 * handles and how each was made, globals, the last executed sequence number
 * — with a 64-bit content hash for every 1 MiB piece of memory and for every
 * object, and one over the manifest itself. A restore trusts none of it:
 * the manifest is decoded with the bounded reader and every hash is checked.
 */
#include <errno.h>
#include <inttypes.h>
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


/* ---- the provider */

int lupw_ckpt_open(struct lupw_session *s)
{
        const struct lupd_config *cfg = s->cfg;
        char err[256];
        if (s->prov_inst)
                return 0;
        const char *path = cfg->checkpoint_provider[0] ? cfg->checkpoint_provider : getenv("LUPINE_CHECKPOINT_LIBRARY");
        if (path && !*path)
                path = NULL;
        const char *config = cfg->checkpoint_config[0] ? cfg->checkpoint_config
                             : cfg->checkpoint_dir[0] ? cfg->checkpoint_dir : NULL;
        if (!path && !config)
                return -ENOTSUP; /* no checkpoints configured */
        int rc = lupine_provider_load(path, &s->prov_ops, &s->prov_dl, err, sizeof(err));
        if (rc < 0) {
                lup_err("session %s: checkpoint provider: %s", s->name, err);
                return rc;
        }
        rc = s->prov_ops->open(config, &s->prov_inst);
        if (rc < 0) {
                lup_err("session %s: checkpoint provider %s cannot open '%s': %s", s->name, s->prov_ops->name,
                        config ? config : "(default)", strerror(-rc));
                lupine_provider_unload(s->prov_dl);
                s->prov_dl = NULL;
                s->prov_ops = NULL;
                return rc;
        }
        return 0;
}

void lupw_ckpt_close(struct lupw_session *s)
{
        lupw_lanes_direct_release(s); /* the region is the instance's */
        if (s->prov_inst)
                s->prov_ops->close(s->prov_inst);
        s->prov_inst = NULL;
        lupine_provider_unload(s->prov_dl);
        s->prov_dl = NULL;
        s->prov_ops = NULL;
}

void lupw_forget_checkpoint(struct lupw_session *s)
{
        if (lupw_ckpt_open(s) < 0)
                return;
        int rc = s->prov_ops->remove(s->prov_inst, s->name);
        if (rc < 0 && rc != -ENOENT)
                lup_warn("session %s: cannot delete its checkpoint: %s", s->name, s->prov_ops->last_error(s->prov_inst));
}

CUresult lupw_sync_all(struct lupw_session *s)
{
        CUresult first = CUDA_SUCCESS;
        for (int d = 0; d < s->n_devices; d++) {
                if (!s->primary[d])
                        continue;
                CUresult r = s->be.fn.cuCtxSetCurrent(s->primary[d]);
                if (r == CUDA_SUCCESS)
                        r = s->be.fn.cuCtxSynchronize();
                if (first == CUDA_SUCCESS)
                        first = r;
        }
        for (int i = 0; i < s->n_ctxs; i++) {
                CUresult r = s->be.fn.cuCtxSetCurrent(s->ctxs[i].real);
                if (r == CUDA_SUCCESS)
                        r = s->be.fn.cuCtxSynchronize();
                if (first == CUDA_SUCCESS)
                        first = r;
        }
        s->bound_id = 0; /* the next call binds again */
        return first;
}

/* ---- saving */

struct saver {
        struct lupw_session *s;
        struct lupine_ckpt_save *save;
        int rc;
        struct lupw_mem_span *spans; /* the memory saved, with its hashes (for --checkpoint-verify) */
        uint64_t *hashes;
        size_t n_spans;
};

static int put(struct saver *sv, const char *name, const void *p, size_t n)
{
        if (sv->rc == 0)
                sv->rc = sv->s->prov_ops->save_write(sv->save, name, p, n);
        return sv->rc;
}

/* Every chunk's contents through the lanes (worker/lanes.c), then each
 * chunk's record: address, size, piece count and one hash per piece. */
static int save_memory(struct saver *sv, struct lup_wr *w)
{
        struct lupw_session *s = sv->s;
        size_t n = s->n_chunks, total = 0;
        char why[256] = "";
        for (size_t i = 0; i < n; i++)
                total += (s->chunks[i].size + PIECE - 1) / PIECE;
        struct lupw_mem_span *spans = calloc(n ? n : 1, sizeof(*spans));
        uint64_t *hashes = calloc(total ? total : 1, sizeof(*hashes));
        if (!spans || !hashes) {
                sv->rc = -ENOMEM;
                goto out;
        }
        for (size_t i = 0, at = 0; i < n; i++) {
                const struct lupw_chunk *c = &s->chunks[i];
                spans[i] = (struct lupw_mem_span){
                        .addr = c->addr, .size = c->size, .hashes = hashes + at, .device = c->device
                };
                snprintf(spans[i].name, sizeof(spans[i].name), "mem/%016" PRIx64, c->addr);
                at += (c->size + PIECE - 1) / PIECE;
        }
        sv->rc = lupw_lanes_save(s, sv->save, spans, n, why, sizeof(why));
        if (sv->rc < 0) {
                lup_err("session %s: checkpoint: %s", s->name, why);
                goto out;
        }
        sv->spans = spans;
        sv->hashes = hashes;
        sv->n_spans = n;
        for (size_t i = 0; i < n; i++) {
                uint64_t pieces = (spans[i].size + PIECE - 1) / PIECE;
                lup_wr_u64(w, spans[i].addr);
                lup_wr_u64(w, spans[i].size);
                lup_wr_u32(w, (uint32_t)pieces);
                for (uint64_t p = 0; p < pieces; p++)
                        lup_wr_u64(w, spans[i].hashes[p]);
        }
        return 0;
out:
        free(spans);
        free(hashes);
        return sv->rc;
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
        const struct lupine_checkpoint_provider *p = s->prov_ops;
        struct lupine_ckpt_load *ld = NULL;
        double t0 = lup_now_s();
        uint64_t got = 0, bytes = 0;
        int rc = p->load_begin(s->prov_inst, s->name, epoch, &ld, &got);
        if (rc < 0) {
                lup_err("session %s: checkpoint epoch %llu cannot be read back to verify it: %s", s->name,
                        (unsigned long long)epoch, p->last_error(s->prov_inst));
                return rc;
        }
        uint8_t *buf = malloc(PIECE);
        if (!buf)
                rc = -ENOMEM;
        for (size_t i = 0; i < sv->n_spans && rc == 0; i++) {
                const struct lupw_mem_span *sp = &sv->spans[i];
                for (uint64_t off = 0; off < sp->size && rc == 0; off += PIECE) {
                        size_t len = sp->size - off < PIECE ? (size_t)(sp->size - off) : PIECE;
                        int64_t k = lupine_provider_read_full(p, ld, sp->name, off, buf, len);
                        if (k != (int64_t)len) {
                                rc = k < 0 ? (int)k : -EIO;
                                lup_err("session %s: verifying checkpoint epoch %llu: reading %s at %" PRIu64
                                        " failed: %s", s->name, (unsigned long long)epoch, sp->name, off,
                                        k < 0 ? p->last_error(s->prov_inst) : "it ends early");
                        }
                        if (rc == 0 && lup_hash64(buf, len, 0) != sp->hashes[off / PIECE]) {
                                rc = -EBADMSG;
                                lup_err("session %s: checkpoint epoch %llu is corrupt: %s at offset %" PRIu64
                                        " (device address 0x%" PRIx64 ") does not match its hash", s->name,
                                        (unsigned long long)epoch, sp->name, off, sp->addr + off);
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
        if (l->n < l->cap)
                l->ids[l->n++] = key;
}

static size_t manifest_bound(struct lupw_session *s)
{
        size_t b = 4096 + (size_t)s->n_ctxs * 32 + arena_slab_count(&s->arena) * 24 + s->arena.n_allocs * 48;
        for (size_t i = 0; i < s->n_chunks; i++)
                b += 32 + (s->chunks[i].size / PIECE + 1) * 8;
        b += s->handles.used * (64 + LUP_MAX_STR);
        b += s->globals.n * (64 + LUP_MAX_STR);
        b += s->n_settings * 32;
        return b;
}

int lupw_checkpoint(struct lupw_session *s, uint32_t mem)
{
        double t0 = lup_now_s();
        int rc = lupw_ckpt_open(s);
        if (rc < 0)
                return rc;
        uint64_t epoch = s->epoch + 1;
        struct saver sv = { .s = s };
        rc = s->prov_ops->save_begin(s->prov_inst, s->name, epoch, &sv.save);
        if (rc < 0) {
                lup_err("session %s: checkpoint: %s", s->name, s->prov_ops->last_error(s->prov_inst));
                return rc;
        }
        size_t cap = manifest_bound(s);
        uint8_t *man = malloc(cap);
        struct handle_list hl = { .cap = s->handles.used };
        hl.ids = calloc(hl.cap ? hl.cap : 1, sizeof(*hl.ids));
        if (!man || !hl.ids) {
                sv.rc = -ENOMEM;
                goto out;
        }
        struct lup_wr w = lup_wr_init(man, cap);
        lup_wr_u64(&w, MANIFEST_MAGIC);
        lup_wr_u32(&w, MANIFEST_VERSION);
        lup_wr_u32(&w, mem);
        lup_wr_str16(&w, s->name, strlen(s->name));
        lup_wr_bytes(&w, s->token, LUP_TOKEN_SIZE);
        lup_wr_u64(&w, epoch);
        lup_wr_u32(&w, s->slot);
        lup_wr_u64(&w, s->last_seq);
        lup_wr_u32(&w, (uint32_t)s->latched);
        lup_wr_u32(&w, (uint32_t)s->n_devices);
        uint32_t primaries = 0;
        for (int d = 0; d < s->n_devices; d++)
                if (s->client_primary[d])
                        primaries |= 1u << d;
        lup_wr_u32(&w, primaries);
        lup_wr_u32(&w, (uint32_t)s->n_ctxs);
        for (int i = 0; i < s->n_ctxs; i++) {
                lup_wr_u64(&w, s->ctxs[i].id);
                lup_wr_i32(&w, s->ctxs[i].device);
                lup_wr_u32(&w, s->ctxs[i].flags);
        }
        /* the arena's layout: slabs first, then every allocation */
        size_t ns = arena_slab_count(&s->arena);
        lup_wr_u32(&w, (uint32_t)ns);
        for (size_t i = 0; i < ns; i++) {
                uint64_t addr;
                uint32_t block;
                int dev;
                arena_slab_info(&s->arena, i, &addr, &block, &dev);
                lup_wr_u64(&w, addr);
                lup_wr_u32(&w, block);
                lup_wr_i32(&w, dev);
        }
        lup_wr_u32(&w, (uint32_t)s->arena.n_allocs);
        for (size_t i = 0; i < s->arena.n_allocs; i++) {
                const struct arena_alloc *a = &s->arena.allocs[i];
                lup_wr_u64(&w, a->addr);
                lup_wr_u64(&w, a->size);
                lup_wr_u64(&w, a->chunk);
                lup_wr_i32(&w, a->device);
                lup_wr_u64(&w, a->owner);
        }
        /* memory contents */
        lup_wr_u32(&w, (uint32_t)s->n_chunks);
        if (mem & CKPT_MEM_DURABLE)
                save_memory(&sv, &w);
        else
                for (size_t i = 0; i < s->n_chunks; i++) {
                        /* hot only: where and how big; the contents stay on the GPU */
                        lup_wr_u64(&w, s->chunks[i].addr);
                        lup_wr_u64(&w, s->chunks[i].size);
                        lup_wr_u32(&w, 0);
                }
        /* handles and how each was made */
        lup_u64map_each(&s->handles, collect, &hl);
        lup_wr_u32(&w, (uint32_t)hl.n);
        for (size_t i = 0; i < hl.n && sv.rc == 0; i++) {
                uint64_t v;
                lup_u64map_get(&s->handles, hl.ids[i], &v);
                const struct lupw_handle_ent *e = (const struct lupw_handle_ent *)(uintptr_t)v;
                lup_wr_u64(&w, hl.ids[i]);
                lup_wr_u8(&w, (uint8_t)e->kind);
                lup_wr_u64(&w, e->ctx);
                lup_wr_u64(&w, e->prov.parent);
                const char *nm = e->prov.name ? e->prov.name : "";
                lup_wr_str16(&w, nm, strlen(nm));
                lup_wr_u32(&w, e->prov.flags);
                lup_wr_i32(&w, e->prov.priority);
                lup_wr_u64(&w, e->prov.image_len);
                if (e->prov.image_len) {
                        char name[64];
                        snprintf(name, sizeof(name), "img/%016" PRIx64, hl.ids[i]);
                        lup_wr_u64(&w, lup_hash64(e->prov.image, e->prov.image_len, 0));
                        put(&sv, name, e->prov.image, e->prov.image_len);
                }
        }
        /* module globals the client knows, with their contents */
        lup_wr_u32(&w, (uint32_t)s->globals.n);
        for (size_t i = 0; i < s->globals.n && sv.rc == 0; i++) {
                const struct lup_range *g = &s->globals.r[i];
                const char *nm = (const char *)(uintptr_t)g->b;
                lup_wr_u64(&w, g->base);
                lup_wr_u64(&w, g->size);
                lup_wr_u64(&w, g->a);
                lup_wr_str16(&w, nm, strlen(nm));
                uint8_t *tmp = malloc(g->size ? g->size : 1);
                CUresult r = tmp ? s->be.fn.cuMemcpyDtoH_v2(tmp, lupw_xlate(s, g->base), g->size) : CUDA_ERROR_OUT_OF_MEMORY;
                if (r != CUDA_SUCCESS) {
                        free(tmp);
                        sv.rc = -EIO;
                        break;
                }
                char name[64];
                snprintf(name, sizeof(name), "glob/%016" PRIx64, g->base);
                lup_wr_u64(&w, lup_hash64(tmp, g->size, 0));
                put(&sv, name, tmp, g->size);
                free(tmp);
        }
        /* settings the client made (limits, cache configs, attributes) */
        lup_wr_u32(&w, (uint32_t)s->n_settings);
        for (size_t i = 0; i < s->n_settings; i++) {
                const struct lupw_setting *t = &s->settings[i];
                lup_wr_u64(&w, t->holder);
                lup_wr_u32(&w, t->kind);
                lup_wr_u32(&w, t->key);
                lup_wr_i32(&w, t->device);
                lup_wr_u64(&w, (uint64_t)t->value);
        }
        if (w.err && sv.rc == 0)
                sv.rc = -ENOBUFS;
        /* events' recorded state and the unacknowledged answers (worker/handles.c, worker/worker.c) */
        if (sv.rc == 0)
                sv.rc = lupw_events_save(s, sv.save);
        if (sv.rc == 0)
                sv.rc = lupw_tx_save(s, sv.save);
        if (sv.rc == 0) {
                uint64_t h = lup_hash64(man, w.len, MANIFEST_MAGIC);
                lup_wr_u64(&w, h);
                put(&sv, "manifest", man, w.len);
        }
out:
        free(man);
        free(hl.ids);
        if (sv.rc == 0) {
                rc = s->prov_ops->save_commit(sv.save);
                if (rc == 0) {
                        double dt = lup_now_s() - t0;
                        uint64_t bytes = 0;
                        for (size_t i = 0; i < s->n_chunks; i++)
                                bytes += s->chunks[i].size;
                        uint64_t copied = (mem & CKPT_MEM_DURABLE) ? bytes : 0;
                        lup_info("session %s: checkpoint epoch %llu (%s): %.2f GiB of device memory in %zu chunk(s), "
                                 "%llu bytes copied, in %.3f s (%.2f GB/s) through %s, %u lane(s)",
                                 s->name, (unsigned long long)epoch,
                                 mem == (CKPT_MEM_DURABLE | CKPT_MEM_HOT) ? "hot and durable"
                                 : mem == CKPT_MEM_HOT                     ? "hot"
                                                                           : "durable",
                                 bytes / 1073741824.0, s->n_chunks, (unsigned long long)copied, dt,
                                 dt > 0 ? copied / dt / 1e9 : 0.0, s->prov_ops->name,
                                 (mem & CKPT_MEM_DURABLE) ? lupw_lanes_used(s) : 0);
                        s->epoch = epoch;
                        /* a corrupt checkpoint is no checkpoint: the drain must not count on it */
                        if (verify_wanted(s) && (mem & CKPT_MEM_DURABLE))
                                rc = verify_memory(&sv, epoch);
                        s->drained = rc == 0;
                } else {
                        lup_err("session %s: checkpoint commit failed: %s", s->name,
                                s->prov_ops->last_error(s->prov_inst));
                }
        } else {
                lup_err("session %s: checkpoint failed: %s (%s)", s->name, strerror(-sv.rc),
                        s->prov_ops->last_error(s->prov_inst));
                s->prov_ops->save_abort(sv.save);
                rc = sv.rc;
        }
        free(sv.spans);
        free(sv.hashes);
        return rc;
}
