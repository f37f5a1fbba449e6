/* SPDX-License-Identifier: MIT */
/*
 * The checkpoint codec (the format is described in ckpt_codec.h).
 *
 * It lives in checkpoint/, in lupckpt, rather than in the worker: it is the
 * on-disk format, it needs nothing but common/ (the bounded reader and
 * writer, the hash), and so the worker, the unit test and the fuzz target
 * all link the same code. Nothing here talks to a driver, a provider or a
 * session; nothing here logs (callers do, with the reason given).
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include "ckpt_codec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

#define MANIFEST_MAGIC 0x3154504b4350555ull /* "UPCKPT1" */
#define EVENTS_MAGIC   0x31545645505550ull  /* "PUPEVT1" */
#define REPLIES_MAGIC  0x31504c5250554cull  /* "LUPRPL1" */

const struct lup_sealed lup_ckpt_manifest_kind = {
        .name = "manifest",
        .magic = MANIFEST_MAGIC,
        .version_min = LUP_CKPT_MANIFEST_VERSION_MIN,
        .version_max = LUP_CKPT_MANIFEST_VERSION,
        .min_len = 16,
        .max_len = LUP_CKPT_MANIFEST_MAX,
        .why_damaged = "the manifest is damaged (checksum mismatch)",
        .why_magic = "not a lupine checkpoint",
        .why_version = "the checkpoint format version is not supported",
};

/* u32 count after the header */
const struct lup_sealed lup_ckpt_events_kind = {
        .name = "events",
        .magic = EVENTS_MAGIC,
        .version_min = 1,
        .version_max = 1,
        .min_len = LUP_SEALED_OVERHEAD + 4,
        .max_len = LUP_SEALED_OVERHEAD + 4 + (uint64_t)LUP_MAX_HANDLES * LUP_CKPT_EVENT_REC,
        .why_damaged = "object events is damaged",
        .why_magic = "object events is damaged",
        .why_version = "object events is damaged",
};

/* start, end and length after the header */
const struct lup_sealed lup_ckpt_replies_kind = {
        .name = "replies",
        .magic = REPLIES_MAGIC,
        .version_min = 1,
        .version_max = 1,
        .min_len = LUP_SEALED_OVERHEAD + 24,
        .max_len = LUP_SEALED_OVERHEAD + 24 + LUP_CKPT_MAX_REPLY_BYTES,
        .why_damaged = "object replies is damaged",
        .why_magic = "object replies is damaged",
        .why_version = "object replies is damaged",
};

/* ---- sealed objects */

bool lup_sealed_len_ok(const struct lup_sealed *k, uint64_t n)
{
        return n >= k->min_len && n <= k->max_len;
}

void lup_sealed_begin(struct lup_wr *w, const struct lup_sealed *k, uint32_t version)
{
        lup_wr_u64(w, k->magic);
        lup_wr_u32(w, version);
}

void lup_sealed_end(struct lup_wr *w, const struct lup_sealed *k)
{
        lup_wr_u64(w, lup_hash64(w->p, w->len, k->magic));
}

int lup_sealed_open(const struct lup_sealed *k, const uint8_t *p, size_t n, struct lup_rd *ret_body,
                    uint32_t *ret_version, const char **ret_why)
{
        uint64_t magic;
        uint32_t version;

        /* the hash first: it says whether the rest is worth reading */
        if (!lup_sealed_len_ok(k, n) || lup_hash64(p, n - 8, k->magic) != lup_le64(p + n - 8)) {
                *ret_why = k->why_damaged;
                return -EBADMSG;
        }
        struct lup_rd r = lup_rd_init(p, n - 8);
        lup_rd_u64(&r, &magic);
        lup_rd_u32(&r, &version);
        if (r.err || magic != k->magic) {
                *ret_why = k->why_magic;
                return -EBADMSG;
        }
        if (version < k->version_min || version > k->version_max) {
                *ret_why = k->why_version;
                return -EPROTO;
        }
        *ret_body = r;
        *ret_version = version;
        return 0;
}

uint32_t lup_sealed_peek_version(const uint8_t *p, size_t n)
{
        return n >= 12 ? lup_le32(p + 8) : 0;
}

/* A new, zeroed array of n records, if the reader still holds n records
 * of at least rec bytes each (so a small input cannot ask for a large
 * allocation). NULL with *ret_rc set otherwise; NULL with 0 for n == 0. */
static void *rd_array(const struct lup_rd *r, uint32_t n, size_t rec, size_t size, int *ret_rc)
{
        if (n == 0)
                return NULL;
        if ((uint64_t)n * rec > lup_rd_left(r)) {
                *ret_rc = -EBADMSG;
                return NULL;
        }
        void *v = calloc(n, size);
        if (!v)
                *ret_rc = -ENOMEM;
        return v;
}

/* ---- the manifest: encoding */

static size_t str_len(const char *s)
{
        return s ? strlen(s) : 0;
}

static size_t manifest_size(const struct lup_ckpt_manifest *m)
{
        size_t b = LUP_SEALED_OVERHEAD + (m->version >= 2 ? 4 : 0);
        b += 2 + strlen(m->name) + LUP_TOKEN_SIZE + 8 + 4 + 8 + 4 + 4 + 4;
        b += 4 + (size_t)m->n_ctxs * 16;
        b += 4 + (size_t)m->n_slabs * 16;
        b += 4 + (size_t)m->n_allocs * 36;
        b += 4;
        for (uint32_t i = 0; i < m->n_chunks; i++)
                b += 20 + (size_t)m->chunks[i].n_pieces * 8;
        b += 4;
        for (uint32_t i = 0; i < m->n_handles; i++)
                b += 43 + str_len(m->handles[i].name) + (m->handles[i].image_len ? 8 : 0);
        b += 4;
        for (uint32_t i = 0; i < m->n_globals; i++)
                b += 34 + str_len(m->globals[i].name);
        b += 4 + (size_t)m->n_settings * 28;
        if (m->version >= 3)
                b += lup_ckpt_vmm_size(&m->vmm);
        if (m->version >= 4)
                b += lup_ckpt_places_size(m);
        return b;
}

static void wr_str(struct lup_wr *w, const char *s)
{
        lup_wr_str16(w, s ? s : "", str_len(s));
}

static void encode_arena(struct lup_wr *w, const struct lup_ckpt_manifest *m)
{
        lup_wr_u32(w, m->n_ctxs);
        for (uint32_t i = 0; i < m->n_ctxs; i++) {
                lup_wr_u64(w, m->ctxs[i].id);
                lup_wr_i32(w, m->ctxs[i].device);
                lup_wr_u32(w, m->ctxs[i].flags);
        }
        lup_wr_u32(w, m->n_slabs);
        for (uint32_t i = 0; i < m->n_slabs; i++) {
                lup_wr_u64(w, m->slabs[i].addr);
                lup_wr_u32(w, m->slabs[i].block);
                lup_wr_i32(w, m->slabs[i].device);
        }
        lup_wr_u32(w, m->n_allocs);
        for (uint32_t i = 0; i < m->n_allocs; i++) {
                const struct lup_ckpt_alloc *a = &m->allocs[i];
                lup_wr_u64(w, a->addr);
                lup_wr_u64(w, a->size);
                lup_wr_u64(w, a->chunk);
                lup_wr_i32(w, a->device);
                lup_wr_u64(w, a->owner);
        }
        lup_wr_u32(w, m->n_chunks);
        for (uint32_t i = 0; i < m->n_chunks; i++) {
                const struct lup_ckpt_chunk *c = &m->chunks[i];
                lup_wr_u64(w, c->addr);
                lup_wr_u64(w, c->size);
                lup_wr_u32(w, c->n_pieces);
                for (uint32_t p = 0; p < c->n_pieces; p++)
                        lup_wr_u64(w, c->hashes[p]);
        }
}

static void encode_handles(struct lup_wr *w, const struct lup_ckpt_manifest *m)
{
        lup_wr_u32(w, m->n_handles);
        for (uint32_t i = 0; i < m->n_handles; i++) {
                const struct lup_ckpt_handle *h = &m->handles[i];
                lup_wr_u64(w, h->id);
                lup_wr_u8(w, h->kind);
                lup_wr_u64(w, h->ctx);
                lup_wr_u64(w, h->parent);
                wr_str(w, h->name);
                lup_wr_u32(w, h->flags);
                lup_wr_i32(w, h->priority);
                lup_wr_u64(w, h->image_len);
                if (h->image_len)
                        lup_wr_u64(w, h->image_hash);
        }
        lup_wr_u32(w, m->n_globals);
        for (uint32_t i = 0; i < m->n_globals; i++) {
                const struct lup_ckpt_global *g = &m->globals[i];
                lup_wr_u64(w, g->addr);
                lup_wr_u64(w, g->size);
                lup_wr_u64(w, g->holder);
                wr_str(w, g->name);
                lup_wr_u64(w, g->hash);
        }
        lup_wr_u32(w, m->n_settings);
        for (uint32_t i = 0; i < m->n_settings; i++) {
                const struct lup_ckpt_setting *t = &m->settings[i];
                lup_wr_u64(w, t->holder);
                lup_wr_u32(w, t->kind);
                lup_wr_u32(w, t->key);
                lup_wr_i32(w, t->device);
                lup_wr_u64(w, (uint64_t)t->value);
        }
}

int lup_ckpt_manifest_encode(const struct lup_ckpt_manifest *m, uint8_t **ret_buf, size_t *ret_len)
{
        size_t cap = manifest_size(m);
        uint8_t *buf = malloc(cap);
        if (!buf)
                return -ENOMEM;
        struct lup_wr w = lup_wr_init(buf, cap);
        lup_sealed_begin(&w, &lup_ckpt_manifest_kind, m->version);
        if (m->version >= 2)
                lup_wr_u32(&w, m->mem);
        lup_wr_str16(&w, m->name, strlen(m->name));
        lup_wr_bytes(&w, m->token, LUP_TOKEN_SIZE);
        lup_wr_u64(&w, m->epoch);
        lup_wr_u32(&w, m->slot);
        lup_wr_u64(&w, m->last_seq);
        lup_wr_u32(&w, m->latched);
        lup_wr_u32(&w, m->n_devices);
        lup_wr_u32(&w, m->primaries);
        encode_arena(&w, m);
        encode_handles(&w, m);
        if (m->version >= 3)
                lup_ckpt_vmm_encode(&w, &m->vmm);
        if (m->version >= 4)
                lup_ckpt_places_encode(&w, m);
        lup_sealed_end(&w, &lup_ckpt_manifest_kind);
        if (w.err || w.len != cap) {
                free(buf);
                return -ENOBUFS;
        }
        *ret_buf = buf;
        *ret_len = w.len;
        return 0;
}

void lup_ckpt_manifest_free(struct lup_ckpt_manifest *m)
{
        if (!m)
                return;
        free(m->slabs);
        free(m->allocs);
        free(m->chunks);
        free(m->handles);
        free(m->globals);
        free(m->settings);
        lup_ckpt_vmm_free(&m->vmm);
        free(m->strings);
        free(m->hashes);
        free(m->places);
        m->places = NULL;
        m->slabs = NULL;
        m->allocs = NULL;
        m->chunks = NULL;
        m->handles = NULL;
        m->globals = NULL;
        m->settings = NULL;
        m->strings = NULL;
        m->hashes = NULL;
}

/* ---- the manifest: decoding */

struct dec {
        struct lup_rd r;
        struct lup_ckpt_manifest *m;
        size_t str_used, str_cap;   /* in m->strings */
        size_t hash_used, hash_cap; /* in m->hashes */
        const char *why;
};

static int bad(struct dec *d, int rc, const char *why)
{
        d->why = why;
        return rc;
}

/* A str16 of at most max bytes, copied NUL-terminated into m->strings
 * (which has room for every string of the input: each takes two bytes of
 * length there and needs one for its NUL here). */
static const char *rd_string(struct dec *d, size_t max)
{
        const char *s;
        size_t n;
        if (lup_rd_str16(&d->r, max, &s, &n) < 0 || n + 1 > d->str_cap - d->str_used)
                return NULL;
        char *out = d->m->strings + d->str_used;
        memcpy(out, s, n);
        out[n] = 0;
        d->str_used += n + 1;
        return out;
}

static int decode_header(struct dec *d, uint32_t version)
{
        struct lup_ckpt_manifest *m = d->m;
        const char *nm;
        size_t nlen;

        m->version = version;
        m->mem = LUP_CKPT_MEM_DURABLE;
        if (version >= 2)
                lup_rd_u32(&d->r, &m->mem);
        if (d->r.err || m->mem == 0 || (m->mem & ~(LUP_CKPT_MEM_DURABLE | LUP_CKPT_MEM_HOT)))
                return bad(d, -EBADMSG, "the manifest has impossible memory flags");
        lup_rd_str16(&d->r, LUP_MAX_NAME, &nm, &nlen);
        if (!d->r.err) {
                memcpy(m->name, nm, nlen);
                m->name[nlen] = 0;
        }
        lup_rd_copy(&d->r, m->token, LUP_TOKEN_SIZE);
        lup_rd_u64(&d->r, &m->epoch);
        lup_rd_u32(&d->r, &m->slot);
        lup_rd_u64(&d->r, &m->last_seq);
        lup_rd_u32(&d->r, &m->latched);
        lup_rd_u32(&d->r, &m->n_devices);
        lup_rd_u32(&d->r, &m->primaries);
        lup_rd_u32(&d->r, &m->n_ctxs);
        if (d->r.err)
                return bad(d, -EBADMSG, "malformed manifest header");
        if (m->slot >= LUP_ARENA_SLOTS || m->n_devices > LUP_MAX_DEVICES || m->n_ctxs > LUP_MAX_CONTEXTS)
                return bad(d, -EBADMSG, "the manifest has impossible values");
        for (uint32_t i = 0; i < m->n_ctxs; i++) {
                struct lup_ckpt_ctx *c = &m->ctxs[i];
                lup_rd_u64(&d->r, &c->id);
                lup_rd_i32(&d->r, &c->device);
                lup_rd_u32(&d->r, &c->flags);
                if (d->r.err || c->device < 0 || c->device >= (int32_t)m->n_devices)
                        return bad(d, -EBADMSG, "malformed context record");
        }
        return 0;
}

/* A list's count, checked against its limit. */
static int rd_count(struct dec *d, uint32_t max, uint32_t *ret, const char *why)
{
        uint32_t n;
        if (lup_rd_u32(&d->r, &n) < 0 || n > max)
                return bad(d, -EBADMSG, why);
        *ret = n;
        return 0;
}

static bool device_ok(const struct lup_ckpt_manifest *m, int32_t dev)
{
        return dev >= 0 && dev < (int32_t)m->n_devices;
}

static int decode_arena(struct dec *d)
{
        struct lup_ckpt_manifest *m = d->m;
        int rc = 0;

        if (rd_count(d, LUP_CKPT_MAX_SLABS, &m->n_slabs, "malformed slab list") < 0)
                return -EBADMSG;
        m->slabs = rd_array(&d->r, m->n_slabs, 16, sizeof(*m->slabs), &rc);
        if (rc < 0)
                return bad(d, rc, rc == -ENOMEM ? "out of memory" : "malformed slab list");
        for (uint32_t i = 0; i < m->n_slabs; i++) {
                struct lup_ckpt_slab *s = &m->slabs[i];
                lup_rd_u64(&d->r, &s->addr);
                lup_rd_u32(&d->r, &s->block);
                lup_rd_i32(&d->r, &s->device);
                if (d->r.err || !device_ok(m, s->device))
                        return bad(d, -EBADMSG, "malformed slab record");
        }
        if (rd_count(d, LUP_MAX_ALLOCS, &m->n_allocs, "malformed allocation list") < 0)
                return -EBADMSG;
        m->allocs = rd_array(&d->r, m->n_allocs, 36, sizeof(*m->allocs), &rc);
        if (rc < 0)
                return bad(d, rc, rc == -ENOMEM ? "out of memory" : "malformed allocation list");
        for (uint32_t i = 0; i < m->n_allocs; i++) {
                struct lup_ckpt_alloc *a = &m->allocs[i];
                lup_rd_u64(&d->r, &a->addr);
                lup_rd_u64(&d->r, &a->size);
                lup_rd_u64(&d->r, &a->chunk);
                lup_rd_i32(&d->r, &a->device);
                lup_rd_u64(&d->r, &a->owner);
                if (d->r.err || !device_ok(m, a->device))
                        return bad(d, -EBADMSG, "malformed allocation record");
        }
        return 0;
}

/* Memory records: a durable checkpoint hashes every piece, a hot-only one
 * records none. */
static int decode_chunks(struct dec *d)
{
        struct lup_ckpt_manifest *m = d->m;
        bool durable = (m->mem & LUP_CKPT_MEM_DURABLE) != 0;
        int rc = 0;

        if (rd_count(d, LUP_CKPT_MAX_CHUNKS, &m->n_chunks, "malformed memory record list") < 0)
                return -EBADMSG;
        m->chunks = rd_array(&d->r, m->n_chunks, 20, sizeof(*m->chunks), &rc);
        if (rc < 0)
                return bad(d, rc, rc == -ENOMEM ? "out of memory" : "malformed memory record list");
        for (uint32_t i = 0; i < m->n_chunks; i++) {
                struct lup_ckpt_chunk *c = &m->chunks[i];
                lup_rd_u64(&d->r, &c->addr);
                lup_rd_u64(&d->r, &c->size);
                lup_rd_u32(&d->r, &c->n_pieces);
                if (d->r.err || c->size > LUP_ARENA_SIZE || c->n_pieces != (durable ? lup_ckpt_pieces(c->size) : 0) ||
                    (uint64_t)c->n_pieces * 8 > lup_rd_left(&d->r) || c->n_pieces > d->hash_cap - d->hash_used)
                        return bad(d, -EBADMSG, "malformed memory record");
                if (c->n_pieces)
                        c->hashes = m->hashes + d->hash_used;
                d->hash_used += c->n_pieces;
                for (uint32_t p = 0; p < c->n_pieces; p++)
                        lup_rd_u64(&d->r, &c->hashes[p]);
        }
        return d->r.err ? bad(d, -EBADMSG, "malformed memory record") : 0;
}

static int decode_handles(struct dec *d)
{
        struct lup_ckpt_manifest *m = d->m;
        int rc = 0;

        if (rd_count(d, LUP_MAX_HANDLES, &m->n_handles, "malformed handle list") < 0)
                return -EBADMSG;
        m->handles = rd_array(&d->r, m->n_handles, 43, sizeof(*m->handles), &rc);
        if (rc < 0)
                return bad(d, rc, rc == -ENOMEM ? "out of memory" : "malformed handle list");
        for (uint32_t i = 0; i < m->n_handles; i++) {
                struct lup_ckpt_handle *h = &m->handles[i];
                lup_rd_u64(&d->r, &h->id);
                lup_rd_u8(&d->r, &h->kind);
                lup_rd_u64(&d->r, &h->ctx);
                lup_rd_u64(&d->r, &h->parent);
                h->name = rd_string(d, LUP_MAX_STR);
                lup_rd_u32(&d->r, &h->flags);
                lup_rd_i32(&d->r, &h->priority);
                lup_rd_u64(&d->r, &h->image_len);
                if (h->image_len)
                        lup_rd_u64(&d->r, &h->image_hash);
                if (d->r.err || !h->name || h->image_len > LUP_MAX_BLOB)
                        return bad(d, -EBADMSG, "malformed handle record");
        }
        if (rd_count(d, LUP_MAX_HANDLES, &m->n_globals, "malformed global list") < 0)
                return -EBADMSG;
        m->globals = rd_array(&d->r, m->n_globals, 34, sizeof(*m->globals), &rc);
        if (rc < 0)
                return bad(d, rc, rc == -ENOMEM ? "out of memory" : "malformed global list");
        for (uint32_t i = 0; i < m->n_globals; i++) {
                struct lup_ckpt_global *g = &m->globals[i];
                lup_rd_u64(&d->r, &g->addr);
                lup_rd_u64(&d->r, &g->size);
                lup_rd_u64(&d->r, &g->holder);
                g->name = rd_string(d, LUP_MAX_STR);
                lup_rd_u64(&d->r, &g->hash);
                if (d->r.err || !g->name || g->size == 0 || g->size > LUP_MAX_BLOB)
                        return bad(d, -EBADMSG, "malformed global record");
        }
        return 0;
}

static int decode_settings(struct dec *d)
{
        struct lup_ckpt_manifest *m = d->m;
        int rc = 0;

        if (rd_count(d, LUP_CKPT_MAX_SETTINGS, &m->n_settings, "malformed settings list") < 0)
                return -EBADMSG;
        m->settings = rd_array(&d->r, m->n_settings, 28, sizeof(*m->settings), &rc);
        if (rc < 0)
                return bad(d, rc, rc == -ENOMEM ? "out of memory" : "malformed settings list");
        for (uint32_t i = 0; i < m->n_settings; i++) {
                struct lup_ckpt_setting *t = &m->settings[i];
                uint64_t v;
                lup_rd_u64(&d->r, &t->holder);
                lup_rd_u32(&d->r, &t->kind);
                lup_rd_u32(&d->r, &t->key);
                lup_rd_i32(&d->r, &t->device);
                lup_rd_u64(&d->r, &v);
                t->value = (int64_t)v;
                if (d->r.err)
                        return bad(d, -EBADMSG, "malformed setting record");
        }
        return 0;
}

int lup_ckpt_manifest_decode(const uint8_t *p, size_t n, struct lup_ckpt_manifest *ret, const char **ret_why)
{
        struct lup_ckpt_manifest *m = calloc(1, sizeof(*m));
        struct dec d = { .m = m };
        uint32_t version = 0;
        int rc;

        if (!m) {
                *ret_why = "out of memory";
                return -ENOMEM;
        }
        rc = lup_sealed_open(&lup_ckpt_manifest_kind, p, n, &d.r, &version, &d.why);
        if (rc < 0)
                goto out;
        /* every name and every piece hash fits in storage the size of the input */
        d.str_cap = lup_rd_left(&d.r);
        d.hash_cap = lup_rd_left(&d.r) / 8;
        m->strings = malloc(d.str_cap ? d.str_cap : 1);
        m->hashes = malloc((d.hash_cap ? d.hash_cap : 1) * sizeof(*m->hashes));
        if (!m->strings || !m->hashes) {
                rc = bad(&d, -ENOMEM, "out of memory");
                goto out;
        }
        rc = decode_header(&d, version);
        if (rc == 0)
                rc = decode_arena(&d);
        if (rc == 0)
                rc = decode_chunks(&d);
        if (rc == 0)
                rc = decode_handles(&d);
        if (rc == 0)
                rc = decode_settings(&d);
        if (rc == 0 && version >= 3)
                rc = lup_ckpt_vmm_decode(&d.r, m->n_devices, &m->vmm, &d.why);
        if (rc == 0 && version >= 4)
                rc = lup_ckpt_places_decode(&d.r, m, &d.why);
        if (rc == 0 && lup_rd_finish(&d.r) < 0)
                rc = bad(&d, -EBADMSG, "trailing bytes in the manifest");
out:
        if (rc < 0) {
                lup_ckpt_manifest_free(m);
                free(m);
                *ret_why = d.why;
                return rc;
        }
        *ret = *m;
        free(m);
        *ret_why = NULL;
        return 0;
}

/* ---- events */

int lup_ckpt_events_encode(const struct lup_ckpt_event *v, uint32_t n, uint8_t **ret_buf, size_t *ret_len)
{
        size_t cap = LUP_SEALED_OVERHEAD + 4 + (size_t)n * LUP_CKPT_EVENT_REC;
        uint8_t *buf = malloc(cap);
        if (!buf)
                return -ENOMEM;
        struct lup_wr w = lup_wr_init(buf, cap);
        lup_sealed_begin(&w, &lup_ckpt_events_kind, 1);
        lup_wr_u32(&w, n);
        for (uint32_t i = 0; i < n; i++) {
                uint64_t bits;
                memcpy(&bits, &v[i].when_ms, sizeof(bits));
                lup_wr_u64(&w, v[i].id);
                lup_wr_u8(&w, v[i].have_when);
                lup_wr_u64(&w, bits);
        }
        lup_sealed_end(&w, &lup_ckpt_events_kind);
        if (w.err) {
                free(buf);
                return -ENOBUFS;
        }
        *ret_buf = buf;
        *ret_len = w.len;
        return 0;
}

int lup_ckpt_events_decode(const uint8_t *p, size_t n, struct lup_ckpt_event **ret_v, uint32_t *ret_n,
                           const char **ret_why)
{
        const char *why = lup_ckpt_events_kind.why_damaged;
        struct lup_rd r;
        uint32_t version, count;
        int rc = 0;

        if (lup_sealed_open(&lup_ckpt_events_kind, p, n, &r, &version, ret_why) < 0) {
                *ret_why = why;
                return -EBADMSG;
        }
        lup_rd_u32(&r, &count);
        if (r.err || (uint64_t)count * LUP_CKPT_EVENT_REC != lup_rd_left(&r)) {
                *ret_why = why;
                return -EBADMSG;
        }
        struct lup_ckpt_event *v = rd_array(&r, count, LUP_CKPT_EVENT_REC, sizeof(*v), &rc);
        if (rc < 0) {
                *ret_why = rc == -ENOMEM ? "out of memory" : why;
                return rc;
        }
        for (uint32_t i = 0; i < count; i++) {
                uint64_t bits;
                uint8_t have;
                lup_rd_u64(&r, &v[i].id);
                lup_rd_u8(&r, &have);
                lup_rd_u64(&r, &bits);
                v[i].have_when = have;
                memcpy(&v[i].when_ms, &bits, sizeof(bits));
                if (have > 1)
                        r.err = -EBADMSG;
        }
        if (lup_rd_finish(&r) < 0) {
                free(v);
                *ret_why = why;
                return -EBADMSG;
        }
        *ret_v = v;
        *ret_n = count;
        *ret_why = NULL;
        return 0;
}

/* ---- replies */

int lup_ckpt_replies_encode(uint64_t start, uint64_t end, const void *data, size_t n, const void *data2, size_t n2,
                            uint8_t **ret_buf, size_t *ret_len)
{
        size_t cap = LUP_SEALED_OVERHEAD + 24 + n + n2;
        uint8_t *buf = malloc(cap);
        if (!buf)
                return -ENOMEM;
        struct lup_wr w = lup_wr_init(buf, cap);
        lup_sealed_begin(&w, &lup_ckpt_replies_kind, 1);
        lup_wr_u64(&w, start);
        lup_wr_u64(&w, end);
        lup_wr_u64(&w, (uint64_t)(n + n2));
        lup_wr_bytes(&w, data, n);
        lup_wr_bytes(&w, data2, n2);
        lup_sealed_end(&w, &lup_ckpt_replies_kind);
        if (w.err) {
                free(buf);
                return -ENOBUFS;
        }
        *ret_buf = buf;
        *ret_len = w.len;
        return 0;
}

int lup_ckpt_replies_decode(const uint8_t *p, size_t n, struct lup_ckpt_replies *ret, const char **ret_why)
{
        struct lup_rd r;
        uint32_t version;
        uint64_t start, end, len;
        const uint8_t *data = NULL;

        if (lup_sealed_open(&lup_ckpt_replies_kind, p, n, &r, &version, ret_why) < 0) {
                *ret_why = lup_ckpt_replies_kind.why_damaged;
                return -EBADMSG;
        }
        lup_rd_u64(&r, &start);
        lup_rd_u64(&r, &end);
        lup_rd_u64(&r, &len);
        /* a length past the end is an error, not a skipped read */
        if (len > lup_rd_left(&r))
                r.err = -EBADMSG;
        else
                lup_rd_bytes(&r, (size_t)len, &data);
        if (lup_rd_finish(&r) < 0 || end < start || end - start != len) {
                *ret_why = lup_ckpt_replies_kind.why_damaged;
                return -EBADMSG;
        }
        *ret = (struct lup_ckpt_replies){ .start = start, .end = end, .data = data };
        *ret_why = NULL;
        return 0;
}
