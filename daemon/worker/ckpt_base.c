/* SPDX-License-Identifier: MIT */
/* Incremental checkpoints: the base and a save's plan (worker/ckpt_base.h has the model). */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include "worker/ckpt_base.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "provider_load.h"
#include "worker/lanes.h"
#include "worker/session.h"

_Static_assert(LUP_CKPT_MAX_BASES == LUPINE_CKPT_MAX_REFS, "a manifest names every epoch a save refers to");

struct base_chunk {
        uint64_t addr, size;
        uint32_t n;
        const uint64_t *hashes, *epochs, *offs; /* n each, in the base's store */
        uint64_t end; /* the bytes of its object in the base's own epoch (a pre-copy's: new pieces go after) */
};

/* An epoch the base refers to, and the bytes of memory it wrote itself. */
struct kept_epoch {
        uint64_t epoch, written;
};

struct lupw_ckpt_base {
        uint64_t epoch;
        size_t n_chunks;
        struct base_chunk *chunks; /* by address */
        uint64_t *store;
        size_t n_kept;
        struct kept_epoch kept[LUP_CKPT_MAX_BASES + 1];
};

int lupw_chunk_spans(const struct lupw_session *s, struct lupw_mem_span **ret_spans, uint64_t **ret_hashes,
                     size_t *ret_n)
{
        size_t n = s->mem.n_chunks, total = 0;
        for (size_t i = 0; i < n; i++)
                total += lup_ckpt_pieces(s->mem.chunks[i].size);
        struct lupw_mem_span *spans = calloc(n ? n : 1, sizeof(*spans));
        uint64_t *hashes = calloc(total ? total : 1, sizeof(*hashes));
        if (!spans || !hashes) {
                free(spans);
                free(hashes);
                return -ENOMEM;
        }
        for (size_t i = 0, at = 0; i < n; i++) {
                const struct lupw_chunk *c = &s->mem.chunks[i];
                spans[i] = (struct lupw_mem_span){
                        .addr = c->addr, .size = c->size, .hashes = hashes + at, .device = c->device
                };
                snprintf(spans[i].name, sizeof(spans[i].name), "mem/%016" PRIx64, c->addr);
                at += lup_ckpt_pieces(c->size);
        }
        *ret_spans = spans;
        *ret_hashes = hashes;
        *ret_n = n;
        return 0;
}

static bool incremental_allowed(void)
{
        const char *e = getenv("LUPINE_CHECKPOINT_INCREMENTAL");
        return !(e && strcmp(e, "0") == 0);
}

bool lupw_incr_possible(const struct lupw_session *s)
{
        return s->ckpt.base && s->ckpt.base->epoch && s->ckpt.ops &&
               (lupine_provider_caps(s->ckpt.ops) & LUPINE_CKPT_CAP_REFER) && incremental_allowed();
}

void lupw_base_destroy(struct lupw_ckpt_base *b)
{
        if (!b)
                return;
        free(b->chunks);
        free(b->store);
        free(b);
}

void lupw_base_free(struct lupw_session *s)
{
        lupw_base_destroy(s->ckpt.base);
        s->ckpt.base = NULL;
}

static int cmp_chunk(const void *a, const void *b)
{
        const struct base_chunk *x = a, *y = b;
        return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static const struct base_chunk *find_chunk(const struct lupw_ckpt_base *b, uint64_t addr)
{
        struct base_chunk key = { .addr = addr };
        return bsearch(&key, b->chunks, b->n_chunks, sizeof(key), cmp_chunk);
}

static uint64_t kept_written(const struct lupw_ckpt_base *b, uint64_t epoch)
{
        for (size_t i = 0; b && i < b->n_kept; i++)
                if (b->kept[i].epoch == epoch)
                        return b->kept[i].written;
        return 0;
}

/* The bytes of the pieces of m that epoch e holds: what is known of an
 * epoch's size after a restore (the pieces nobody refers to are not). */
static uint64_t referenced_bytes(const struct lup_ckpt_manifest *m, uint64_t e)
{
        uint64_t bytes = 0;
        for (uint32_t i = 0; i < m->n_chunks; i++) {
                const struct lup_ckpt_chunk *c = &m->chunks[i];
                for (uint32_t p = 0; p < c->n_pieces; p++)
                        if (lup_ckpt_piece_epoch(m, c, p) == e)
                                bytes += lup_ckpt_piece_len(c->size, p);
        }
        return bytes;
}

static void set_kept(struct lupw_ckpt_base *nb, const struct lupw_ckpt_base *old, const struct lup_ckpt_manifest *m,
                     uint64_t written)
{
        for (uint32_t k = 0; k <= m->n_bases; k++) {
                uint64_t e = k < m->n_bases ? m->bases[k] : m->epoch;
                uint64_t w = k < m->n_bases ? kept_written(old, e) : written;
                nb->kept[nb->n_kept++] = (struct kept_epoch){ e, w ? w : referenced_bytes(m, e) };
        }
}

/* The record of a durable manifest's pieces (NULL: out of memory). */
static struct lupw_ckpt_base *base_build(const struct lup_ckpt_manifest *m)
{
        uint64_t total = 0;
        for (uint32_t i = 0; i < m->n_chunks; i++)
                total += m->chunks[i].n_pieces;
        struct lupw_ckpt_base *nb = calloc(1, sizeof(*nb));
        if (!nb || !(nb->chunks = calloc(m->n_chunks ? m->n_chunks : 1, sizeof(*nb->chunks))) ||
            !(nb->store = malloc((total ? total : 1) * 3 * sizeof(uint64_t)))) {
                lupw_base_destroy(nb);
                return NULL;
        }
        uint64_t *h = nb->store, *ep = nb->store + total, *off = nb->store + 2 * total;
        for (uint32_t i = 0; i < m->n_chunks; i++) {
                const struct lup_ckpt_chunk *c = &m->chunks[i];
                struct base_chunk *bc = &nb->chunks[i];
                *bc = (struct base_chunk){
                        .addr = c->addr, .size = c->size, .n = c->n_pieces, .hashes = h, .epochs = ep, .offs = off
                };
                for (uint32_t p = 0; p < c->n_pieces; p++) {
                        h[p] = c->hashes[p];
                        ep[p] = lup_ckpt_piece_epoch(m, c, p);
                        off[p] = lup_ckpt_piece_offset(c, p);
                        uint64_t end = off[p] + lup_ckpt_piece_len(c->size, p);
                        if (ep[p] == m->epoch && end > bc->end)
                                bc->end = end;
                }
                h += c->n_pieces;
                ep += c->n_pieces;
                off += c->n_pieces;
        }
        nb->n_chunks = m->n_chunks;
        qsort(nb->chunks, nb->n_chunks, sizeof(*nb->chunks), cmp_chunk);
        nb->epoch = m->epoch;
        return nb;
}

void lupw_base_set(struct lupw_session *s, const struct lup_ckpt_manifest *m, uint64_t written)
{
        struct lupw_ckpt_base *old = s->ckpt.base, *nb = NULL;
        s->ckpt.base = NULL;
        if (m->mem & LUP_CKPT_MEM_DURABLE) { /* else the pieces are nowhere in the store */
                nb = base_build(m);
                if (nb)
                        set_kept(nb, old, m, written);
                else
                        lup_warn("session %s: out of memory remembering checkpoint epoch %" PRIu64
                                 "; the next one is full",
                                 s->name, m->epoch);
        }
        s->ckpt.base = nb;
        lupw_base_destroy(old);
}

void lupw_incr_plan_free(struct lupw_incr_plan *plan)
{
        free(plan->base);
        free(plan->offset);
        free(plan->write);
        *plan = (struct lupw_incr_plan){ 0 };
}

/* The index of epoch e among the plan's bases (sorted at the end), adding
 * it; -1 when there is no room. */
static int add_base(struct lupw_incr_plan *plan, uint64_t e)
{
        for (uint32_t k = 0; k < plan->n_bases; k++)
                if (plan->bases[k] == e)
                        return (int)k;
        if (plan->n_bases == LUP_CKPT_MAX_BASES)
                return -1;
        plan->bases[plan->n_bases] = e;
        return (int)plan->n_bases++;
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

/* Piece p of chunk sp is new: appended to the chunk's run of new pieces
 * (a new write span where the run breaks). */
static void add_new_piece(struct lupw_incr_plan *plan, const struct lupw_mem_span *sp, uint32_t p, uint64_t packed,
                          bool extends)
{
        uint64_t off = (uint64_t)p * LUP_CKPT_PIECE, len = lup_ckpt_piece_len(sp->size, p);
        if (extends) {
                plan->write[plan->n_write - 1].size += len;
        } else {
                struct lupw_mem_span *w = &plan->write[plan->n_write++];
                *w = *sp;
                w->addr = sp->addr + off;
                w->size = len;
                w->hashes = sp->hashes + p;
                w->obj_off = packed;
        }
        plan->write_bytes += len;
}

/* Compares every piece with the base b (NULL, or all_new: every piece is
 * new); a piece b has in epoch `self` stays in this save's own object. 0,
 * or 1 when the pieces would refer to too many epochs. plan->base holds
 * epoch indexes + 1 in the order met until sort_bases. */
static int compare_pieces(const struct lupw_ckpt_base *b, uint64_t self, const struct lupw_mem_span *spans, size_t n,
                          bool all_new, struct lupw_incr_plan *plan)
{
        uint64_t at = 0;
        for (size_t i = 0; i < n; i++) {
                const struct lupw_mem_span *sp = &spans[i];
                const struct base_chunk *bc = b ? find_chunk(b, sp->addr) : NULL;
                uint32_t pieces = (uint32_t)lup_ckpt_pieces(sp->size);
                /* new pieces of a chunk the save wrote already go after what it wrote */
                uint64_t packed = bc && b->epoch == self ? bc->end : 0;
                if (bc && (bc->size != sp->size || bc->n != pieces))
                        bc = NULL; /* the chunk was made again with another size */
                bool in_run = false;
                for (uint32_t p = 0; p < pieces; p++, at++) {
                        plan->total_bytes += lup_ckpt_piece_len(sp->size, p);
                        if (!all_new && bc && bc->hashes[p] == sp->hashes[p]) {
                                uint8_t idx = 0; /* self: this save's own object */
                                if (bc->epochs[p] != self) {
                                        int k = add_base(plan, bc->epochs[p]);
                                        if (k < 0)
                                                return 1;
                                        idx = (uint8_t)(k + 1);
                                }
                                plan->base[at] = idx;
                                plan->offset[at] = bc->offs[p];
                                in_run = false;
                                continue;
                        }
                        plan->base[at] = 0;
                        plan->offset[at] = packed;
                        add_new_piece(plan, sp, p, packed, in_run);
                        packed += LUP_CKPT_PIECE;
                        in_run = true;
                }
        }
        return 0;
}

/* Sorts the bases by epoch and renumbers the pieces' references. */
static void sort_bases(struct lupw_incr_plan *plan, uint64_t total)
{
        uint64_t met[LUP_CKPT_MAX_BASES];
        uint8_t remap[LUP_CKPT_MAX_BASES + 1] = { 0 };
        memcpy(met, plan->bases, plan->n_bases * sizeof(met[0]));
        qsort(plan->bases, plan->n_bases, sizeof(plan->bases[0]), cmp_u64);
        for (uint32_t k = 0; k < plan->n_bases; k++)
                for (uint32_t j = 0; j < plan->n_bases; j++)
                        if (plan->bases[j] == met[k])
                                remap[k + 1] = (uint8_t)(j + 1);
        for (uint64_t i = 0; i < total; i++)
                plan->base[i] = remap[plan->base[i]];
}

/* Whether the epochs the plan keeps alive stay within the bound. */
static bool keep_bound_ok(const struct lupw_ckpt_base *b, const struct lupw_incr_plan *plan)
{
        uint64_t kept = plan->write_bytes;
        for (uint32_t k = 0; k < plan->n_bases; k++)
                kept += kept_written(b, plan->bases[k]);
        return kept <= (uint64_t)LUPW_INCR_KEEP_FACTOR * plan->total_bytes;
}

static int refer_all(struct lupw_session *s, struct lupine_ckpt_save *save, const struct lupw_incr_plan *plan)
{
        for (uint32_t k = 0; k < plan->n_bases; k++) {
                int rc = s->ckpt.ops->save_refer(save, plan->bases[k]);
                if (rc < 0) {
                        lup_warn("session %s: checkpoint: the provider cannot keep epoch %" PRIu64
                                 " for an incremental checkpoint (%s: %s); this one writes everything",
                                 s->name, plan->bases[k], strerror(-rc), s->ckpt.ops->last_error(s->ckpt.inst));
                        return rc;
                }
        }
        return 0;
}

static uint64_t pieces_of(const struct lupw_mem_span *spans, size_t n)
{
        uint64_t total = 0;
        for (size_t i = 0; i < n; i++)
                total += lup_ckpt_pieces(spans[i].size);
        return total;
}

static int plan_alloc(struct lupw_incr_plan *plan, uint64_t total)
{
        plan->base = malloc(total ? total : 1);
        plan->offset = malloc((total ? total : 1) * sizeof(*plan->offset));
        plan->write = calloc(total ? total : 1, sizeof(*plan->write));
        if (!plan->base || !plan->offset || !plan->write) {
                lupw_incr_plan_free(plan);
                return -ENOMEM;
        }
        return 0;
}

int lupw_incr_plan_full(const struct lupw_mem_span *spans, size_t n, struct lupw_incr_plan *plan)
{
        *plan = (struct lupw_incr_plan){ 0 };
        if (plan_alloc(plan, pieces_of(spans, n)) < 0)
                return -ENOMEM;
        (void)compare_pieces(NULL, 0, spans, n, true, plan);
        plan->incremental = true;
        return 0;
}

int lupw_incr_plan_final(const struct lupw_ckpt_base *pre, const struct lupw_mem_span *spans, size_t n, bool all_new,
                         struct lupw_incr_plan *plan)
{
        *plan = (struct lupw_incr_plan){ 0 };
        uint64_t total = pieces_of(spans, n);
        if (plan_alloc(plan, total) < 0)
                return -ENOMEM;
        if (compare_pieces(pre, pre->epoch, spans, n, all_new, plan) != 0) {
                lupw_incr_plan_free(plan); /* cannot be: the pre-copy's own bases fit */
                return -E2BIG;
        }
        sort_bases(plan, total);
        plan->incremental = true;
        return 0;
}

struct lupw_ckpt_base *lupw_base_of_plan(uint64_t epoch, const struct lupw_mem_span *spans, size_t n,
                                         const struct lupw_incr_plan *plan)
{
        struct lup_ckpt_manifest m = { .mem = LUP_CKPT_MEM_DURABLE, .epoch = epoch, .n_bases = plan->n_bases };
        memcpy(m.bases, plan->bases, sizeof(m.bases));
        m.chunks = calloc(n ? n : 1, sizeof(*m.chunks));
        if (!m.chunks)
                return NULL;
        for (size_t i = 0, at = 0; i < n; i++) {
                uint32_t pieces = (uint32_t)lup_ckpt_pieces(spans[i].size);
                m.chunks[i] = (struct lup_ckpt_chunk){ .addr = spans[i].addr,
                                                       .size = spans[i].size,
                                                       .n_pieces = pieces,
                                                       .hashes = spans[i].hashes,
                                                       .base = plan->base + at,
                                                       .offset = plan->offset + at };
                at += pieces;
        }
        m.n_chunks = (uint32_t)n;
        struct lupw_ckpt_base *b = base_build(&m);
        free(m.chunks);
        return b;
}

int lupw_incr_plan(struct lupw_session *s, struct lupine_ckpt_save *save, uint64_t epoch,
                   const struct lupw_mem_span *spans, size_t n, struct lupw_incr_plan *plan, const char **why_full)
{
        *plan = (struct lupw_incr_plan){ 0 };
        *why_full = "";
        if (!lupw_incr_possible(s))
                return 0;
        const struct lupw_ckpt_base *b = s->ckpt.base;
        uint64_t total = pieces_of(spans, n);
        for (size_t i = 0; i < n; i++)
                if (!spans[i].on_gpu) {
                        *why_full = "the memory cannot be hashed on the GPU";
                        return 0;
                }
        if (b->epoch >= epoch) {
                *why_full = "the base is not older";
                return 0;
        }
        if (plan_alloc(plan, total) < 0)
                return -ENOMEM;
        int rc = compare_pieces(b, 0, spans, n, false, plan);
        if (rc == 1)
                *why_full = "the pieces would refer to too many epochs";
        else if (plan->write_bytes == plan->total_bytes)
                *why_full = "every piece changed";
        else if (!keep_bound_ok(b, plan))
                *why_full = "the epochs kept would hold too much";
        if (rc == 0 && !**why_full) {
                sort_bases(plan, total);
                if (refer_all(s, save, plan) < 0)
                        *why_full = "a base epoch is gone";
        }
        if (**why_full) {
                lupw_incr_plan_free(plan);
                return 0;
        }
        plan->incremental = true;
        return 0;
}
