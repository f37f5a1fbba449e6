/* SPDX-License-Identifier: MIT */
/*
 * The checkpoint codec (checkpoint/ckpt_codec.c): manifest, events and
 * replies round trips; every truncation, a flipped hash byte and each
 * broken field refused with a reason; version-1 manifests; and the real
 * objects of tests/fuzz/corpus/fuzz_ckpt_codec/ (written by the lupined
 * before the codec existed) decoded and encoded again byte for byte.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "buf.h"
#include "ckpt_codec.h"
#include "ckpt_graph.h"
#include "hash.h"

#define MANIFEST_MAGIC 0x3154504b4350555ull

/* ---- a manifest with something in every list */

static uint64_t piece_hashes[5] = { 11, 22, 33, 44, 55 };
static struct lup_ckpt_slab slabs[2] = { { 0x200000000000ull, 256, 0 }, { 0x200000200000ull, 4096, 1 } };
static struct lup_ckpt_alloc allocs[3] = {
        { 0x200000000000ull, 200, 0, 0, 0x10000 },
        { 0x200000200000ull, 4000, 0, 1, 0x100000 },
        { 0x200000400000ull, (3u << 20) + 5, 4u << 20, 0, 0x10000 },
};
static struct lup_ckpt_chunk chunks[3];
/* where the pieces are: this epoch's objects and bases 1 and 2 */
static uint8_t piece_bases[5] = { 0, 1, 2, 0, 1 };
static uint64_t piece_offsets[5] = { 0, 1u << 20, 1u << 20, 1u << 20, 4u << 20 };
static struct lup_ckpt_handle handles[4] = {
        { .id = 0x1000000, .kind = 2, .ctx = 0x10000, .name = "", .image_len = 23359, .image_hash = 0xabcdef },
        { .id = 0x1000001, .kind = 3, .ctx = 0x10000, .parent = 0x1000000, .name = "fill_kernel" },
        { .id = 0x1000002, .kind = 5, .ctx = 0x100000, .name = "", .flags = 1, .priority = -2 },
        { .id = 0x1000003, .kind = 6, .ctx = 0x100000, .name = "", .flags = 2 },
};
static struct lup_ckpt_global globals[1] = { { 0x7f0000001000ull, 4, 0x1000000, "counter_bias", 0x1234 } };
static struct lup_ckpt_setting settings[2] = { { 0x10000, 1, 2, 0, 4096 }, { 0x1000001, 3, 8, 0, -7 } };

static struct lup_ckpt_vmm_resv vresv[2] = { { 0x200010000000ull, 64ull << 20 }, { 0x200020000000ull, 4096 } };
static struct lup_ckpt_vmm_alloc vallocs[2] = {
        { 0x1000010, 4u << 20, 0x200030000000ull, { 1, 1, 0, 1, 0, 1, 0 }, 1 },
        { 0x1000011, 2u << 20, 0x200030400000ull, { 1, 1, 1, 0, 0, 0, 0 }, 0 },
};
static struct lup_ckpt_vmm_map vmaps[2] = {
        { 0x200010000000ull, 4u << 20, 0, 0x1000010, 1, 3 },
        { 0x200010600000ull, 2u << 20, 0, 0x1000011, 3, 0x7 },
};

static void sample(struct lup_ckpt_manifest *m, uint32_t mem)
{
        bool durable = mem & LUP_CKPT_MEM_DURABLE;
        memset(m, 0, sizeof(*m));
        m->version = LUP_CKPT_MANIFEST_VERSION;
        m->mem = mem;
        strcpy(m->name, "train.rank_0");
        for (unsigned i = 0; i < LUP_TOKEN_SIZE; i++)
                m->token[i] = (uint8_t)(i * 7 + 1);
        m->epoch = 3;
        m->slot = 5;
        m->last_seq = 41;
        m->latched = 700;
        m->n_devices = 2;
        m->primaries = 3;
        m->n_ctxs = 2;
        m->ctxs[0] = (struct lup_ckpt_ctx){ 0x100000, 1, 4 };
        m->ctxs[1] = (struct lup_ckpt_ctx){ 0x100001, 0, 0 };
        m->n_slabs = 2;
        m->slabs = slabs;
        m->n_allocs = 3;
        m->allocs = allocs;
        static const uint64_t sizes[3] = { 2u << 20, 2u << 20, 1u << 20 };
        for (unsigned i = 0, at = 0; i < 3; at += (unsigned)(sizes[i] >> 20), i++)
                chunks[i] = (struct lup_ckpt_chunk){ .addr = 0x200000000000ull + i * (2ull << 20),
                                                     .size = sizes[i],
                                                     .n_pieces = durable ? (uint32_t)(sizes[i] >> 20) : 0,
                                                     .hashes = durable ? piece_hashes + at : NULL,
                                                     .base = durable ? piece_bases + at : NULL,
                                                     .offset = durable ? piece_offsets + at : NULL };
        m->n_bases = durable ? 2 : 0;
        m->bases[0] = 1;
        m->bases[1] = 2;
        m->n_chunks = 3;
        m->chunks = chunks;
        m->n_handles = 4;
        m->handles = handles;
        m->n_globals = 1;
        m->globals = globals;
        m->n_settings = 2;
        m->settings = settings;
        m->vmm = (struct lup_ckpt_vmm){ 2, 2, 2, vresv, vallocs, vmaps };
}

static void encode(const struct lup_ckpt_manifest *m, uint8_t **ret, size_t *ret_len)
{
        assert_int_equal(lup_ckpt_manifest_encode(m, ret, ret_len), 0);
}

/* Replaces the trailer: the parser, not the hash, must judge what follows. */
static void reseal(uint8_t *p, size_t n, uint64_t magic)
{
        lup_put64(p + n - 8, lup_hash64(p, n - 8, magic));
}

static void assert_same(const struct lup_ckpt_manifest *a, const struct lup_ckpt_manifest *b)
{
        assert_int_equal(a->version, b->version);
        assert_int_equal(a->mem, b->mem);
        assert_string_equal(a->name, b->name);
        assert_memory_equal(a->token, b->token, LUP_TOKEN_SIZE);
        assert_int_equal(a->epoch, b->epoch);
        assert_int_equal(a->slot, b->slot);
        assert_int_equal(a->last_seq, b->last_seq);
        assert_int_equal(a->latched, b->latched);
        assert_int_equal(a->n_devices, b->n_devices);
        assert_int_equal(a->primaries, b->primaries);
        assert_int_equal(a->n_ctxs, b->n_ctxs);
        assert_memory_equal(a->ctxs, b->ctxs, a->n_ctxs * sizeof(a->ctxs[0]));
        assert_int_equal(a->n_slabs, b->n_slabs);
        assert_memory_equal(a->slabs, b->slabs, a->n_slabs * sizeof(a->slabs[0]));
        assert_int_equal(a->n_allocs, b->n_allocs);
        assert_memory_equal(a->allocs, b->allocs, a->n_allocs * sizeof(a->allocs[0]));
        assert_int_equal(a->n_chunks, b->n_chunks);
        for (uint32_t i = 0; i < a->n_chunks; i++) {
                assert_int_equal(a->chunks[i].addr, b->chunks[i].addr);
                assert_int_equal(a->chunks[i].size, b->chunks[i].size);
                assert_int_equal(a->chunks[i].n_pieces, b->chunks[i].n_pieces);
                if (a->chunks[i].n_pieces)
                        assert_memory_equal(a->chunks[i].hashes, b->chunks[i].hashes, a->chunks[i].n_pieces * 8);
                for (uint32_t p = 0; p < a->chunks[i].n_pieces && a->version >= 4; p++) {
                        const struct lup_ckpt_chunk *x = &a->chunks[i], *y = &b->chunks[i];
                        assert_int_equal(x->base ? x->base[p] : 0, y->base ? y->base[p] : 0);
                        assert_int_equal(x->offset ? x->offset[p] : p * LUP_CKPT_PIECE,
                                         y->offset ? y->offset[p] : p * LUP_CKPT_PIECE);
                }
        }
        assert_int_equal(a->version >= 4 ? a->n_bases : 0, b->n_bases);
        assert_memory_equal(a->bases, b->bases, b->n_bases * sizeof(a->bases[0]));
        assert_int_equal(a->n_handles, b->n_handles);
        for (uint32_t i = 0; i < a->n_handles; i++) {
                const struct lup_ckpt_handle *x = &a->handles[i], *y = &b->handles[i];
                assert_int_equal(x->id, y->id);
                assert_int_equal(x->kind, y->kind);
                assert_int_equal(x->ctx, y->ctx);
                assert_int_equal(x->parent, y->parent);
                assert_string_equal(x->name, y->name);
                assert_int_equal(x->flags, y->flags);
                assert_int_equal(x->priority, y->priority);
                assert_int_equal(x->image_len, y->image_len);
                assert_int_equal(x->image_hash, y->image_hash);
        }
        assert_int_equal(a->n_globals, b->n_globals);
        for (uint32_t i = 0; i < a->n_globals; i++) {
                assert_int_equal(a->globals[i].addr, b->globals[i].addr);
                assert_int_equal(a->globals[i].size, b->globals[i].size);
                assert_int_equal(a->globals[i].holder, b->globals[i].holder);
                assert_string_equal(a->globals[i].name, b->globals[i].name);
                assert_int_equal(a->globals[i].hash, b->globals[i].hash);
        }
        assert_int_equal(a->n_settings, b->n_settings);
        assert_memory_equal(a->settings, b->settings, a->n_settings * sizeof(a->settings[0]));
        assert_int_equal(a->vmm.n_resv, b->vmm.n_resv);
        assert_int_equal(a->vmm.n_allocs, b->vmm.n_allocs);
        assert_int_equal(a->vmm.n_maps, b->vmm.n_maps);
        if (a->vmm.n_resv)
                assert_memory_equal(a->vmm.resv, b->vmm.resv, a->vmm.n_resv * sizeof(a->vmm.resv[0]));
        if (a->vmm.n_allocs)
                assert_memory_equal(a->vmm.allocs, b->vmm.allocs, a->vmm.n_allocs * sizeof(a->vmm.allocs[0]));
        if (a->vmm.n_maps)
                assert_memory_equal(a->vmm.maps, b->vmm.maps, a->vmm.n_maps * sizeof(a->vmm.maps[0]));
}

static void manifest_round_trip(void **state)
{
        static const uint32_t mems[] = { LUP_CKPT_MEM_DURABLE, LUP_CKPT_MEM_HOT,
                                         LUP_CKPT_MEM_DURABLE | LUP_CKPT_MEM_HOT };
        for (size_t k = 0; k < sizeof(mems) / sizeof(mems[0]); k++) {
                struct lup_ckpt_manifest m, got;
                const char *why = "unset";
                uint8_t *buf, *again;
                size_t len, len2;
                sample(&m, mems[k]);
                encode(&m, &buf, &len);
                assert_int_equal(lup_ckpt_manifest_decode(buf, len, &got, &why), 0);
                assert_null(why);
                assert_same(&m, &got);
                encode(&got, &again, &len2);
                assert_int_equal(len2, len);
                assert_memory_equal(again, buf, len);
                lup_ckpt_manifest_free(&got);
                lup_ckpt_manifest_free(NULL);
                free(buf);
                free(again);
        }
}

static void manifest_empty_lists(void **state)
{
        struct lup_ckpt_manifest m = {
                .version = LUP_CKPT_MANIFEST_VERSION, .mem = LUP_CKPT_MEM_DURABLE, .name = "a", .n_devices = 1
        };
        struct lup_ckpt_manifest got;
        const char *why;
        uint8_t *buf;
        size_t len;
        encode(&m, &buf, &len);
        assert_int_equal(lup_ckpt_manifest_decode(buf, len, &got, &why), 0);
        assert_same(&m, &got);
        assert_null(got.slabs);
        assert_null(got.handles);
        lup_ckpt_manifest_free(&got);
        free(buf);
}

/* Every prefix is refused: as it is (the trailer does not match), and
 * resealed (the body ends early). */
static void manifest_truncations(void **state)
{
        struct lup_ckpt_manifest m, got;
        uint8_t *buf;
        size_t len;
        sample(&m, LUP_CKPT_MEM_DURABLE);
        encode(&m, &buf, &len);
        for (size_t k = 0; k < len; k++) {
                uint8_t *cut = malloc(k ? k : 1);
                const char *why = NULL;
                memcpy(cut, buf, k);
                assert_true(lup_ckpt_manifest_decode(cut, k, &got, &why) < 0);
                assert_non_null(why);
                if (k >= 20) {
                        memcpy(cut, buf, k - 8);
                        reseal(cut, k, MANIFEST_MAGIC);
                        why = NULL;
                        assert_true(lup_ckpt_manifest_decode(cut, k, &got, &why) < 0);
                        assert_non_null(why);
                }
                free(cut);
        }
        free(buf);
}

static void manifest_flipped_bytes(void **state)
{
        struct lup_ckpt_manifest m, got;
        uint8_t *buf;
        size_t len;
        sample(&m, LUP_CKPT_MEM_DURABLE);
        encode(&m, &buf, &len);
        for (size_t i = 0; i < len; i++) {
                const char *why = NULL;
                buf[i] ^= 0x40;
                assert_int_equal(lup_ckpt_manifest_decode(buf, len, &got, &why), -EBADMSG);
                assert_string_equal(why, "the manifest is damaged (checksum mismatch)");
                buf[i] ^= 0x40;
        }
        free(buf);
}

/* One field made wrong, the trailer made right again: refused for it. */
static void expect_refused(uint8_t *buf, size_t len, int rc, const char *reason)
{
        struct lup_ckpt_manifest got;
        const char *why = NULL;
        reseal(buf, len, MANIFEST_MAGIC);
        assert_int_equal(lup_ckpt_manifest_decode(buf, len, &got, &why), rc);
        assert_string_equal(why, reason);
}

static void manifest_bad_fields(void **state)
{
        struct lup_ckpt_manifest m;
        uint8_t *buf;
        size_t len;
        sample(&m, LUP_CKPT_MEM_DURABLE);
        encode(&m, &buf, &len);
        uint8_t *b = malloc(len + 1);
        /* offsets: magic 0, version 8, mem 12, name 16 (2 + 12), token 30, epoch 46, slot 54,
         * last_seq 58, latched 66, devices 70, primaries 74, contexts 78 */
        memcpy(b, buf, len);
        lup_put64(b, MANIFEST_MAGIC + 1);
        expect_refused(b, len, -EBADMSG, "not a lupine checkpoint");
        memcpy(b, buf, len);
        lup_put32(b + 8, LUP_CKPT_MANIFEST_VERSION + 1);
        expect_refused(b, len, -EPROTO, "the checkpoint format version is not supported");
        assert_int_equal(lup_sealed_peek_version(b, len), LUP_CKPT_MANIFEST_VERSION + 1);
        memcpy(b, buf, len);
        lup_put32(b + 8, 0);
        expect_refused(b, len, -EPROTO, "the checkpoint format version is not supported");
        memcpy(b, buf, len);
        lup_put32(b + 12, 0);
        expect_refused(b, len, -EBADMSG, "the manifest has impossible memory flags");
        memcpy(b, buf, len);
        lup_put32(b + 12, 4);
        expect_refused(b, len, -EBADMSG, "the manifest has impossible memory flags");
        memcpy(b, buf, len);
        lup_put32(b + 54, LUP_ARENA_SLOTS);
        expect_refused(b, len, -EBADMSG, "the manifest has impossible values");
        memcpy(b, buf, len);
        lup_put32(b + 70, LUP_MAX_DEVICES + 1);
        expect_refused(b, len, -EBADMSG, "the manifest has impossible values");
        memcpy(b, buf, len);
        lup_put32(b + 78, LUP_MAX_CONTEXTS + 1);
        expect_refused(b, len, -EBADMSG, "the manifest has impossible values");
        memcpy(b, buf, len);
        lup_put32(b + 82 + 8, 2); /* the first context on device 2 of 2 */
        expect_refused(b, len, -EBADMSG, "malformed context record");
        memcpy(b, buf, len);
        lup_put32(b + 70, 1); /* one device: the first context's device 1 is out of range */
        expect_refused(b, len, -EBADMSG, "malformed context record");
        /* slabs at 82 + 2 * 16 = 114 */
        memcpy(b, buf, len);
        lup_put32(b + 114, LUP_CKPT_MAX_SLABS + 1);
        expect_refused(b, len, -EBADMSG, "malformed slab list");
        memcpy(b, buf, len);
        lup_put32(b + 114, 1000); /* more records than bytes: refused before any allocation */
        expect_refused(b, len, -EBADMSG, "malformed slab list");
        memcpy(b, buf, len);
        lup_put32(b + 118 + 12, (uint32_t)-1);
        expect_refused(b, len, -EBADMSG, "malformed slab record");
        /* allocations at 118 + 32 = 150 */
        memcpy(b, buf, len);
        lup_put32(b + 150, LUP_MAX_ALLOCS + 1);
        expect_refused(b, len, -EBADMSG, "malformed allocation list");
        /* memory records at 154 + 3 * 36 = 262 */
        memcpy(b, buf, len);
        lup_put32(b + 262, 4);
        expect_refused(b, len, -EBADMSG, "malformed memory record");
        memcpy(b, buf, len);
        lup_put32(b + 266 + 16, 3); /* 2 MiB in 3 pieces */
        expect_refused(b, len, -EBADMSG, "malformed memory record");
        memcpy(b, buf, len);
        lup_put64(b + 266 + 8, LUP_ARENA_SIZE + 1);
        expect_refused(b, len, -EBADMSG, "malformed memory record");
        /* a byte more at the end */
        memcpy(b, buf, len - 8);
        b[len - 8] = 0;
        expect_refused(b, len + 1, -EBADMSG, "trailing bytes in the manifest");
        free(b);
        free(buf);
}

/* The vmm section (version 3) is last: its records sit just before the
 * trailer, the last mapping at len - 8 - 40. */
static void manifest_vmm_bad_records(void **state)
{
        struct lup_ckpt_manifest m;
        uint8_t *buf;
        size_t len;
        const char *bad = "malformed virtual memory record";
        sample(&m, LUP_CKPT_MEM_DURABLE);
        encode(&m, &buf, &len);
        uint8_t *b = malloc(len);
        size_t end = len - lup_ckpt_places_size(&m); /* the vmm section ends where the places begin */
        size_t map = end - 8 - 40, alloc = end - 8 - 4 - 2 * 40 - 48, maps_n = end - 8 - 2 * 40 - 4;
        memcpy(b, buf, len);
        lup_put64(b + map, 0x200010600000ull + 4096); /* not on a granule */
        expect_refused(b, len, -EBADMSG, bad);
        memcpy(b, buf, len);
        lup_put64(b + map + 16, 4096); /* the offset neither */
        expect_refused(b, len, -EBADMSG, bad);
        memcpy(b, buf, len);
        lup_put32(b + map + 32, 1u << 5); /* a device the session does not have */
        expect_refused(b, len, -EBADMSG, bad);
        memcpy(b, buf, len);
        lup_put32(b + map + 36, 0x2); /* no such access value */
        expect_refused(b, len, -EBADMSG, bad);
        memcpy(b, buf, len);
        lup_put32(b + map + 36, 0x33); /* access for a device not named */
        expect_refused(b, len, -EBADMSG, bad);
        memcpy(b, buf, len);
        lup_put32(b + alloc + 32, 2); /* location: device 2 of 2 */
        expect_refused(b, len, -EBADMSG, bad);
        memcpy(b, buf, len);
        lup_put64(b + alloc + 8, 0); /* empty */
        expect_refused(b, len, -EBADMSG, bad);
        memcpy(b, buf, len);
        lup_put64(b + alloc, 0); /* no id */
        expect_refused(b, len, -EBADMSG, bad);
        memcpy(b, buf, len);
        lup_put32(b + maps_n, LUP_CKPT_MAX_VMM_MAPS + 1); /* over the limit */
        expect_refused(b, len, -EBADMSG, bad);
        memcpy(b, buf, len);
        lup_put32(b + maps_n, 3); /* more records than there are bytes */
        expect_refused(b, len, -EBADMSG, bad);
        /* a version-2 manifest has no vmm section, and still reads */
        struct lup_ckpt_manifest got;
        const char *why = NULL;
        m.version = 2;
        free(buf);
        encode(&m, &buf, &len);
        assert_int_equal(lup_ckpt_manifest_decode(buf, len, &got, &why), 0);
        assert_int_equal(got.vmm.n_resv + got.vmm.n_allocs + got.vmm.n_maps, 0);
        lup_ckpt_manifest_free(&got);
        free(b);
        free(buf);
}

/* The places section (version 4): bases and each piece's base and offset. */
static void manifest_places_bad_records(void **state)
{
        struct lup_ckpt_manifest m;
        uint8_t *buf;
        size_t len;
        sample(&m, LUP_CKPT_MEM_DURABLE);
        encode(&m, &buf, &len);
        uint8_t *b = malloc(len);
        size_t bases = len - 8 - lup_ckpt_places_size(&m) + 4, piece0 = bases + 2 * 8;
        const char *order = "the base epochs are not increasing epochs before this one";
        memcpy(b, buf, len);
        lup_put64(b + bases, 2); /* 2, 2: not increasing */
        expect_refused(b, len, -EBADMSG, order);
        memcpy(b, buf, len);
        lup_put64(b + bases + 8, 3); /* the manifest's own epoch */
        expect_refused(b, len, -EBADMSG, order);
        memcpy(b, buf, len);
        lup_put64(b + bases, 0);
        expect_refused(b, len, -EBADMSG, order);
        memcpy(b, buf, len);
        lup_put32(b + bases - 4, LUP_CKPT_MAX_BASES + 1);
        expect_refused(b, len, -EBADMSG, "malformed list of base epochs");
        memcpy(b, buf, len);
        b[piece0 + 9] = 3; /* piece 1 refers to base 3 of 2 */
        expect_refused(b, len, -EBADMSG, "malformed piece place");
        memcpy(b, buf, len);
        lup_put64(b + piece0 + 1, 4096); /* an offset within a piece */
        expect_refused(b, len, -EBADMSG, "malformed piece place");
        memcpy(b, buf, len);
        lup_put64(b + piece0 + 1, LUP_ARENA_SIZE); /* past any object */
        expect_refused(b, len, -EBADMSG, "malformed piece place");
        free(b);
        free(buf);
        /* a version-3 manifest has no places: every piece in its own epoch */
        struct lup_ckpt_manifest got;
        const char *why = NULL;
        m.version = 3;
        encode(&m, &buf, &len);
        assert_int_equal(lup_ckpt_manifest_decode(buf, len, &got, &why), 0);
        assert_int_equal(got.n_bases, 0);
        assert_null(got.chunks[0].base);
        assert_null(got.chunks[0].offset);
        lup_ckpt_manifest_free(&got);
        free(buf);
        /* nor has a hot-only one */
        sample(&m, LUP_CKPT_MEM_HOT);
        encode(&m, &buf, &len);
        assert_int_equal(lup_ckpt_manifest_decode(buf, len, &got, &why), 0);
        assert_int_equal(got.n_bases, 0);
        lup_ckpt_manifest_free(&got);
        free(buf);
}

static void manifest_hot_records_no_pieces(void **state)
{
        struct lup_ckpt_manifest m;
        uint8_t *buf;
        size_t len;
        sample(&m, LUP_CKPT_MEM_HOT);
        encode(&m, &buf, &len);
        /* a hot-only checkpoint whose memory record claims pieces */
        lup_put32(buf + 266 + 16, 2);
        expect_refused(buf, len, -EBADMSG, "malformed memory record");
        free(buf);
}

static void manifest_long_names(void **state)
{
        struct lup_ckpt_manifest m, got;
        struct lup_ckpt_handle h[1] = { { .id = 1, .name = NULL } };
        uint8_t *buf;
        size_t len;
        const char *why;
        char *name = malloc(LUP_MAX_STR + 2);
        memset(name, 'k', LUP_MAX_STR + 1);
        name[LUP_MAX_STR] = 0;
        sample(&m, LUP_CKPT_MEM_DURABLE);
        m.handles = h;
        m.n_handles = 1;
        h[0].name = name; /* the longest a restore takes */
        encode(&m, &buf, &len);
        assert_int_equal(lup_ckpt_manifest_decode(buf, len, &got, &why), 0);
        assert_int_equal(strlen(got.handles[0].name), LUP_MAX_STR);
        lup_ckpt_manifest_free(&got);
        free(buf);
        name[LUP_MAX_STR] = 'k';
        name[LUP_MAX_STR + 1] = 0;
        encode(&m, &buf, &len);
        assert_int_equal(lup_ckpt_manifest_decode(buf, len, &got, &why), -EBADMSG);
        assert_string_equal(why, "malformed handle record");
        free(buf);
        /* one the format cannot hold */
        char *huge = malloc(70000);
        memset(huge, 'x', 69999);
        huge[69999] = 0;
        h[0].name = huge;
        assert_int_equal(lup_ckpt_manifest_encode(&m, &buf, &len), -ENOBUFS);
        free(huge);
        free(name);
}

/* A version-1 manifest written field by field, as lupined wrote them
 * before the memory flags: DURABLE, and encoded again the same. */
static void manifest_version1(void **state)
{
        uint8_t buf[512];
        struct lup_wr w = lup_wr_init(buf, sizeof(buf));
        struct lup_ckpt_manifest got;
        const char *why;
        lup_wr_u64(&w, MANIFEST_MAGIC);
        lup_wr_u32(&w, 1);
        lup_wr_str16(&w, "job-1", 5);
        lup_wr_bytes(&w, "0123456789abcdef", 16);
        lup_wr_u64(&w, 7);  /* epoch */
        lup_wr_u32(&w, 2);  /* slot */
        lup_wr_u64(&w, 99); /* last seq */
        lup_wr_u32(&w, 0);  /* latched */
        lup_wr_u32(&w, 1);  /* devices */
        lup_wr_u32(&w, 1);  /* primaries */
        lup_wr_u32(&w, 0);  /* contexts */
        lup_wr_u32(&w, 0);  /* slabs */
        lup_wr_u32(&w, 1);  /* allocations */
        lup_wr_u64(&w, 0x200080000000ull);
        lup_wr_u64(&w, 1000);
        lup_wr_u64(&w, 2u << 20);
        lup_wr_i32(&w, 0);
        lup_wr_u64(&w, 0x10000);
        lup_wr_u32(&w, 1); /* memory records */
        lup_wr_u64(&w, 0x200080000000ull);
        lup_wr_u64(&w, 2u << 20);
        lup_wr_u32(&w, 2);
        lup_wr_u64(&w, 0x1111);
        lup_wr_u64(&w, 0x2222);
        lup_wr_u32(&w, 1); /* handles */
        lup_wr_u64(&w, 0x1000000);
        lup_wr_u8(&w, 5);
        lup_wr_u64(&w, 0x10000);
        lup_wr_u64(&w, 0);
        lup_wr_str16(&w, "", 0);
        lup_wr_u32(&w, 0);
        lup_wr_i32(&w, 0);
        lup_wr_u64(&w, 0);
        lup_wr_u32(&w, 0); /* globals */
        lup_wr_u32(&w, 0); /* settings */
        lup_wr_u64(&w, lup_hash64(buf, w.len, MANIFEST_MAGIC));
        assert_int_equal(w.err, 0);
        assert_int_equal(lup_ckpt_manifest_decode(buf, w.len, &got, &why), 0);
        assert_int_equal(got.version, 1);
        assert_int_equal(got.mem, LUP_CKPT_MEM_DURABLE);
        assert_string_equal(got.name, "job-1");
        assert_int_equal(got.epoch, 7);
        assert_int_equal(got.slot, 2);
        assert_int_equal(got.last_seq, 99);
        assert_int_equal(got.n_allocs, 1);
        assert_int_equal(got.allocs[0].chunk, 2u << 20);
        assert_int_equal(got.n_chunks, 1);
        assert_int_equal(got.chunks[0].hashes[1], 0x2222);
        assert_int_equal(got.n_handles, 1);
        assert_int_equal(got.handles[0].kind, 5);
        uint8_t *again;
        size_t len;
        encode(&got, &again, &len);
        assert_int_equal(len, w.len);
        assert_memory_equal(again, buf, len);
        free(again);
        lup_ckpt_manifest_free(&got);
}

/* ---- events and replies */

static void events_round_trip(void **state)
{
        struct lup_ckpt_event v[3] = { { 0x1000010, true, 0.0 }, { 0x1000011, true, 12.5 }, { 0x1000012, false, 0.0 } };
        struct lup_ckpt_event *got = NULL;
        uint32_t n = 9;
        uint8_t *buf;
        size_t len;
        const char *why;
        assert_int_equal(lup_ckpt_events_encode(v, 3, &buf, &len), 0);
        assert_int_equal(len, LUP_SEALED_OVERHEAD + 4 + 3 * LUP_CKPT_EVENT_REC);
        assert_int_equal(lup_ckpt_events_decode(buf, len, &got, &n, &why), 0);
        assert_int_equal(n, 3);
        for (int i = 0; i < 3; i++) {
                assert_int_equal(got[i].id, v[i].id);
                assert_int_equal(got[i].have_when, v[i].have_when);
                assert_memory_equal(&got[i].when_ms, &v[i].when_ms, sizeof(double));
        }
        free(got);
        for (size_t k = 0; k < len; k++) {
                why = NULL;
                assert_int_equal(lup_ckpt_events_decode(buf, k, &got, &n, &why), -EBADMSG);
                assert_string_equal(why, "object events is damaged");
        }
        buf[len - 3] ^= 1;
        assert_int_equal(lup_ckpt_events_decode(buf, len, &got, &n, &why), -EBADMSG);
        buf[len - 3] ^= 1;
        /* count at 12, the first record at 16: its have_when at 24 */
        buf[24] = 2; /* have_when must be 0 or 1 */
        reseal(buf, len, lup_ckpt_events_kind.magic);
        assert_int_equal(lup_ckpt_events_decode(buf, len, &got, &n, &why), -EBADMSG);
        buf[24] = 1;
        lup_put32(buf + 12, 4); /* a count the records do not fill */
        reseal(buf, len, lup_ckpt_events_kind.magic);
        assert_int_equal(lup_ckpt_events_decode(buf, len, &got, &n, &why), -EBADMSG);
        free(buf);
        assert_int_equal(lup_ckpt_events_encode(NULL, 0, &buf, &len), 0);
        assert_int_equal(lup_ckpt_events_decode(buf, len, &got, &n, &why), 0);
        assert_int_equal(n, 0);
        free(got);
        free(buf);
}

static void replies_round_trip(void **state)
{
        struct lup_ckpt_replies r;
        uint8_t *buf;
        size_t len;
        const char *why;
        assert_int_equal(lup_ckpt_replies_encode(1000, 1010, "01234", 5, "56789", 5, &buf, &len), 0);
        assert_int_equal(len, LUP_SEALED_OVERHEAD + 24 + 10);
        assert_int_equal(lup_ckpt_replies_decode(buf, len, &r, &why), 0);
        assert_int_equal(r.start, 1000);
        assert_int_equal(r.end, 1010);
        assert_memory_equal(r.data, "0123456789", 10);
        for (size_t k = 0; k < len; k++) {
                why = NULL;
                assert_int_equal(lup_ckpt_replies_decode(buf, k, &r, &why), -EBADMSG);
                assert_string_equal(why, "object replies is damaged");
                if (k >= 20) {
                        uint8_t *cut = malloc(k);
                        memcpy(cut, buf, k - 8);
                        reseal(cut, k, lup_ckpt_replies_kind.magic);
                        assert_int_equal(lup_ckpt_replies_decode(cut, k, &r, &why), -EBADMSG);
                        free(cut);
                }
        }
        buf[len - 1] ^= 0x80;
        assert_int_equal(lup_ckpt_replies_decode(buf, len, &r, &why), -EBADMSG);
        buf[len - 1] ^= 0x80;
        lup_put64(buf + 12, 1011); /* start after end */
        reseal(buf, len, lup_ckpt_replies_kind.magic);
        assert_int_equal(lup_ckpt_replies_decode(buf, len, &r, &why), -EBADMSG);
        free(buf);
        /* a length past the end, with start and end agreeing, and nothing after it */
        uint8_t small[LUP_SEALED_OVERHEAD + 24];
        struct lup_wr w = lup_wr_init(small, sizeof(small));
        lup_sealed_begin(&w, &lup_ckpt_replies_kind, 1);
        lup_wr_u64(&w, 0);
        lup_wr_u64(&w, 1u << 20);
        lup_wr_u64(&w, 1u << 20);
        lup_sealed_end(&w, &lup_ckpt_replies_kind);
        assert_int_equal(w.len, sizeof(small));
        assert_int_equal(lup_ckpt_replies_decode(small, sizeof(small), &r, &why), -EBADMSG);
}

static void sealed_helper(void **state)
{
        uint8_t b[64];
        struct lup_wr w = lup_wr_init(b, sizeof(b));
        struct lup_rd body;
        uint32_t version = 0, x = 0;
        const char *why = NULL;
        lup_sealed_begin(&w, &lup_ckpt_events_kind, 1);
        lup_wr_u32(&w, 0);
        lup_sealed_end(&w, &lup_ckpt_events_kind);
        assert_int_equal(w.len, 24);
        assert_true(lup_sealed_len_ok(&lup_ckpt_events_kind, 24));
        assert_false(lup_sealed_len_ok(&lup_ckpt_events_kind, 23));
        assert_int_equal(lup_sealed_open(&lup_ckpt_events_kind, b, w.len, &body, &version, &why), 0);
        assert_int_equal(version, 1);
        assert_int_equal(lup_rd_u32(&body, &x), 0);
        assert_int_equal(lup_rd_finish(&body), 0);
        /* another kind's object: its magic is its hash seed, so the trailer fails first */
        assert_int_equal(lup_sealed_open(&lup_ckpt_replies_kind, b, w.len, &body, &version, &why), -EBADMSG);
        assert_int_equal(lup_sealed_open(&lup_ckpt_manifest_kind, b, w.len, &body, &version, &why), -EBADMSG);
        assert_string_equal(why, "the manifest is damaged (checksum mismatch)");
        assert_int_equal(lup_sealed_peek_version(b, 11), 0);
}

/* ---- the real objects in the fuzz corpus */

static uint8_t *slurp(const char *path, size_t *ret_len)
{
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *p = malloc(n ? (size_t)n : 1);
        assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
        fclose(f);
        *ret_len = (size_t)n;
        return p;
}

/* ---- graphs (ckpt_graph.c) */

static const uint8_t gparams[12] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 };

static void graphs_sample(struct lup_ckpt_graphs *g, struct lup_ckpt_graph *x, struct lup_ckpt_gnode *nodes,
                          struct lup_ckpt_gedge *edges, struct lup_ckpt_capture *cap)
{
        memset(nodes, 0, 7 * sizeof(*nodes));
        nodes[0].type = LUP_GNODE_KERNEL;
        nodes[0].id = 0x1080;
        nodes[0].u.kernel.func = 0x1010;
        nodes[0].u.kernel.grid[0] = 8, nodes[0].u.kernel.block[0] = 128, nodes[0].u.kernel.smem = 64;
        nodes[0].u.kernel.n_bytes = sizeof(gparams), nodes[0].u.kernel.bytes = gparams;
        nodes[1].type = LUP_GNODE_MEMSET;
        nodes[1].u.memset.dst = 0x7f0000001000ull, nodes[1].u.memset.value = 0x40000000u;
        nodes[1].u.memset.elem = 4, nodes[1].u.memset.width = 4099, nodes[1].u.memset.height = 1;
        nodes[2].type = LUP_GNODE_MEMCPY;
        nodes[2].u.memcpy.dst = 0x7f0000002000ull, nodes[2].u.memcpy.src = 0x7f0000003000ull;
        nodes[2].u.memcpy.bytes = 16396;
        nodes[3].type = LUP_GNODE_EMPTY;
        nodes[4].type = LUP_GNODE_EVENT_RECORD, nodes[4].u.event = 0x1020;
        nodes[5].type = LUP_GNODE_WAIT_EVENT, nodes[5].u.event = 0x1030;
        nodes[6].type = LUP_GNODE_GRAPH, nodes[6].u.child = 2;
        edges[0] = (struct lup_ckpt_gedge){ 1, 0 };
        edges[1] = (struct lup_ckpt_gedge){ 0, 2 };
        edges[2] = (struct lup_ckpt_gedge){ 2, 6 };
        memset(x, 0, 3 * sizeof(*x));
        x[0] = (struct lup_ckpt_graph){ .id = 0x1040,
                                        .role = LUP_GRAPH_ROLE_GRAPH,
                                        .ctx = 0x10,
                                        .n_nodes = 7,
                                        .nodes = nodes,
                                        .n_edges = 3,
                                        .edges = edges };
        x[1] = (struct lup_ckpt_graph){ .id = 0x1050,
                                        .role = LUP_GRAPH_ROLE_EXEC,
                                        .ctx = 0x10,
                                        .parent = 0x1040,
                                        .flags = 1,
                                        .n_nodes = 6,
                                        .nodes = nodes,
                                        .n_edges = 2,
                                        .edges = edges };
        x[2] = (struct lup_ckpt_graph){ .role = LUP_GRAPH_ROLE_CHILD, .n_nodes = 1, .nodes = &nodes[3] };
        *cap = (struct lup_ckpt_capture){ .stream = 0x1060, .graph = 0x1070, .cid = 42 };
        *g = (struct lup_ckpt_graphs){ .n_graphs = 3, .graphs = x, .n_caps = 1, .caps = cap };
}

static void graphs_round_trip(void **state)
{
        struct lup_ckpt_graphs g, d;
        struct lup_ckpt_graph x[3];
        struct lup_ckpt_gnode nodes[7];
        struct lup_ckpt_gedge edges[3];
        struct lup_ckpt_capture cap;
        uint8_t *buf, *again;
        size_t len, len2;
        const char *why;
        graphs_sample(&g, x, nodes, edges, &cap);
        assert_int_equal(lup_ckpt_graphs_encode(&g, &buf, &len), 0);
        assert_int_equal(lup_ckpt_graphs_decode(buf, len, &d, &why), 0);
        assert_int_equal(d.n_graphs, 3);
        assert_int_equal(d.n_caps, 1);
        assert_int_equal(d.caps[0].cid, 42);
        assert_int_equal(d.graphs[1].parent, 0x1040);
        assert_int_equal(d.graphs[1].flags, 1);
        assert_int_equal(d.graphs[0].n_nodes, 7);
        assert_int_equal(d.graphs[0].nodes[0].u.kernel.func, 0x1010);
        assert_int_equal(d.graphs[0].nodes[0].id, 0x1080);
        assert_int_equal(d.graphs[0].nodes[1].id, 0);
        assert_int_equal(d.graphs[0].nodes[0].u.kernel.block[0], 128);
        assert_memory_equal(d.graphs[0].nodes[0].u.kernel.bytes, gparams, sizeof(gparams));
        assert_int_equal(d.graphs[0].nodes[1].u.memset.width, 4099);
        assert_int_equal(d.graphs[0].nodes[2].u.memcpy.bytes, 16396);
        assert_int_equal(d.graphs[0].nodes[5].u.event, 0x1030);
        assert_int_equal(d.graphs[0].nodes[6].u.child, 2);
        assert_int_equal(d.graphs[0].edges[2].to, 6);
        assert_int_equal(d.graphs[2].role, LUP_GRAPH_ROLE_CHILD);
        /* encoded again: the same bytes */
        assert_int_equal(lup_ckpt_graphs_encode(&d, &again, &len2), 0);
        assert_int_equal(len2, len);
        assert_memory_equal(again, buf, len);
        free(again);
        lup_ckpt_graphs_free(&d);
        /* every truncation and every flipped byte is refused, never read past */
        for (size_t n = 0; n < len; n++)
                assert_int_not_equal(lup_ckpt_graphs_decode(buf, n, &d, &why), 0);
        for (size_t i = 0; i < len; i++) {
                buf[i] ^= 0x5a;
                assert_int_not_equal(lup_ckpt_graphs_decode(buf, len, &d, &why), 0);
                buf[i] ^= 0x5a;
        }
        free(buf);
}

/* Resealed after a change: the parser must refuse what the hash accepts. */
static void graphs_bad_fields(void **state)
{
        struct lup_ckpt_graphs g, d;
        struct lup_ckpt_graph x[3];
        struct lup_ckpt_gnode nodes[7];
        struct lup_ckpt_gedge edges[3];
        struct lup_ckpt_capture cap;
        uint8_t *buf;
        size_t len;
        const char *why;
        graphs_sample(&g, x, nodes, edges, &cap);
        /* an edge to a node past the list */
        edges[0].to = 7;
        assert_int_equal(lup_ckpt_graphs_encode(&g, &buf, &len), 0);
        assert_int_equal(lup_ckpt_graphs_decode(buf, len, &d, &why), -EBADMSG);
        assert_string_equal(why, "object graphs is damaged");
        free(buf);
        edges[0].to = 0;
        /* a child index past the list of graphs */
        nodes[6].u.child = 3;
        assert_int_equal(lup_ckpt_graphs_encode(&g, &buf, &len), 0);
        assert_int_equal(lup_ckpt_graphs_decode(buf, len, &d, &why), -EBADMSG);
        free(buf);
        nodes[6].u.child = 2;
        /* a memset element size that is not 1, 2 or 4 */
        nodes[1].u.memset.elem = 3;
        assert_int_equal(lup_ckpt_graphs_encode(&g, &buf, &len), 0);
        assert_int_equal(lup_ckpt_graphs_decode(buf, len, &d, &why), -EBADMSG);
        free(buf);
        nodes[1].u.memset.elem = 4;
        /* an unknown node type, and an unknown role */
        nodes[3].type = 12; /* a batch memory op node */
        assert_int_equal(lup_ckpt_graphs_encode(&g, &buf, &len), 0);
        assert_int_equal(lup_ckpt_graphs_decode(buf, len, &d, &why), -EBADMSG);
        free(buf);
        nodes[3].type = LUP_GNODE_EMPTY;
        x[1].role = 3;
        assert_int_equal(lup_ckpt_graphs_encode(&g, &buf, &len), 0);
        assert_int_equal(lup_ckpt_graphs_decode(buf, len, &d, &why), -EBADMSG);
        free(buf);
        x[1].role = LUP_GRAPH_ROLE_EXEC;
        /* a node count past the limit, resealed */
        assert_int_equal(lup_ckpt_graphs_encode(&g, &buf, &len), 0);
        size_t off = LUP_SEALED_OVERHEAD - 8 + 4 + 8 + 1 + 24; /* magic, version, n, graph 0's id...flags */
        lup_put32(buf + off, LUP_CKPT_MAX_GRAPH_NODES + 1);
        reseal(buf, len, lup_ckpt_graphs_kind.magic);
        assert_int_equal(lup_ckpt_graphs_decode(buf, len, &d, &why), -EBADMSG);
        /* and an empty object decodes to nothing */
        free(buf);
        struct lup_ckpt_graphs none = { 0 };
        assert_int_equal(lup_ckpt_graphs_encode(&none, &buf, &len), 0);
        assert_int_equal(lup_ckpt_graphs_decode(buf, len, &d, &why), 0);
        assert_int_equal(d.n_graphs + d.n_caps, 0);
        lup_ckpt_graphs_free(&d);
        free(buf);
}

/* Version 2's exec nodes turned off (cuGraphNodeSetEnabled), and the old
 * version 1 form still written and read. */
static void graphs_disabled_nodes(void **state)
{
        struct lup_ckpt_graphs g, d;
        struct lup_ckpt_graph x[3];
        struct lup_ckpt_gnode nodes[7];
        struct lup_ckpt_gedge edges[3];
        struct lup_ckpt_capture cap;
        struct lup_ckpt_goff off[2] = { { 1, 0 }, { 1, 2 } }; /* the exec's kernel and memcpy nodes */
        uint8_t *buf, *again;
        size_t len, len2;
        const char *why;
        graphs_sample(&g, x, nodes, edges, &cap);
        g.n_off = 2, g.off = off;
        assert_int_equal(lup_ckpt_graphs_encode(&g, &buf, &len), 0);
        assert_int_equal(lup_ckpt_graphs_decode(buf, len, &d, &why), 0);
        assert_int_equal(d.version, 2);
        assert_int_equal(d.n_off, 2);
        assert_int_equal(d.off[0].graph, 1);
        assert_int_equal(d.off[0].node, 0);
        assert_int_equal(d.off[1].node, 2);
        assert_int_equal(lup_ckpt_graphs_encode(&d, &again, &len2), 0);
        assert_int_equal(len2, len);
        assert_memory_equal(again, buf, len);
        free(again);
        lup_ckpt_graphs_free(&d);
        for (size_t n = 0; n < len; n++)
                assert_int_not_equal(lup_ckpt_graphs_decode(buf, n, &d, &why), 0);
        free(buf);
        /* what a record names must be a disableable node of an exec's record */
        const struct lup_ckpt_goff bad[] = {
                { 0, 0 }, /* record 0 is a graph, not an exec */
                { 3, 0 }, /* no record 3 */
                { 1, 6 }, /* the exec's record has 6 nodes */
                { 1, 3 }, /* an empty node cannot be disabled */
                { 1, 4 }, /* nor an event record node */
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                g.n_off = 1, g.off = (struct lup_ckpt_goff *)&bad[i];
                assert_int_equal(lup_ckpt_graphs_encode(&g, &buf, &len), 0);
                assert_int_equal(lup_ckpt_graphs_decode(buf, len, &d, &why), -EBADMSG);
                free(buf);
        }
        /* a count past the limit, resealed */
        g.n_off = 1, g.off = off;
        assert_int_equal(lup_ckpt_graphs_encode(&g, &buf, &len), 0);
        lup_put32(buf + len - 8 - 8 - 4, LUP_CKPT_MAX_GRAPH_OFF + 1); /* before the one record and the seal */
        reseal(buf, len, lup_ckpt_graphs_kind.magic);
        assert_int_equal(lup_ckpt_graphs_decode(buf, len, &d, &why), -EBADMSG);
        free(buf);
        /* version 1: no such records, and none can be written in it */
        g.version = 1;
        assert_int_equal(lup_ckpt_graphs_encode(&g, &buf, &len), -EINVAL);
        g.n_off = 0;
        assert_int_equal(lup_ckpt_graphs_encode(&g, &buf, &len), 0);
        assert_int_equal(lup_ckpt_graphs_decode(buf, len, &d, &why), 0);
        assert_int_equal(d.version, 1);
        assert_int_equal(d.n_off, 0);
        assert_int_equal(d.n_graphs, 3);
        assert_int_equal(lup_ckpt_graphs_encode(&d, &again, &len2), 0);
        assert_int_equal(len2, len);
        assert_memory_equal(again, buf, len);
        free(again);
        lup_ckpt_graphs_free(&d);
        free(buf);
}

/* A host node: its token round-trips; a token of 0 is refused. */
static void graphs_host_node(void **state)
{
        struct lup_ckpt_gnode nodes[2];
        struct lup_ckpt_gedge edge = { 0, 1 };
        struct lup_ckpt_graph x = {
                .id = 0x1040, .role = LUP_GRAPH_ROLE_EXEC, .n_nodes = 2, .nodes = nodes, .n_edges = 1, .edges = &edge
        };
        struct lup_ckpt_graphs g = { .n_graphs = 1, .graphs = &x }, d;
        uint8_t *buf;
        size_t len;
        const char *why;
        memset(nodes, 0, sizeof(nodes));
        nodes[0].type = LUP_GNODE_HOST, nodes[0].id = 0x1080, nodes[0].u.token = 0x123456789abcull;
        nodes[1].type = LUP_GNODE_EMPTY, nodes[1].id = 0x1090;
        assert_int_equal(lup_ckpt_graphs_encode(&g, &buf, &len), 0);
        assert_int_equal(lup_ckpt_graphs_decode(buf, len, &d, &why), 0);
        assert_int_equal(d.graphs[0].n_nodes, 2);
        assert_int_equal(d.graphs[0].nodes[0].type, LUP_GNODE_HOST);
        assert_int_equal(d.graphs[0].nodes[0].id, 0x1080);
        assert_int_equal(d.graphs[0].nodes[0].u.token, 0x123456789abcull);
        assert_int_equal(d.graphs[0].nodes[1].id, 0x1090);
        lup_ckpt_graphs_free(&d);
        for (size_t n = 0; n < len; n++)
                assert_int_not_equal(lup_ckpt_graphs_decode(buf, n, &d, &why), 0);
        free(buf);
        nodes[0].u.token = 0;
        assert_int_equal(lup_ckpt_graphs_encode(&g, &buf, &len), 0);
        assert_int_equal(lup_ckpt_graphs_decode(buf, len, &d, &why), -EBADMSG);
        free(buf);
}

static void real_objects(void **state)
{
        DIR *dir = opendir(CORPUS_DIR);
        struct dirent *e;
        int manifests = 0, v1 = 0, events = 0, replies = 0, graphs = 0;
        assert_non_null(dir);
        while ((e = readdir(dir))) {
                char path[4096];
                size_t len;
                const char *why = NULL;
                if (e->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof(path), "%s/%s", CORPUS_DIR, e->d_name);
                uint8_t *p = slurp(path, &len), *again = NULL;
                size_t len2 = 0;
                if (strncmp(e->d_name, "manifest-", 9) == 0) {
                        struct lup_ckpt_manifest m;
                        if (lup_ckpt_manifest_decode(p, len, &m, &why) != 0)
                                fail_msg("%s: %s", e->d_name, why);
                        v1 += m.version == 1;
                        assert_int_equal(lup_ckpt_manifest_encode(&m, &again, &len2), 0);
                        lup_ckpt_manifest_free(&m);
                        manifests++;
                } else if (strncmp(e->d_name, "events-", 7) == 0) {
                        struct lup_ckpt_event *v = NULL;
                        uint32_t n;
                        if (lup_ckpt_events_decode(p, len, &v, &n, &why) != 0)
                                fail_msg("%s: %s", e->d_name, why);
                        assert_int_equal(lup_ckpt_events_encode(v, n, &again, &len2), 0);
                        free(v);
                        events++;
                } else if (strncmp(e->d_name, "graphs-", 7) == 0) {
                        struct lup_ckpt_graphs g;
                        if (lup_ckpt_graphs_decode(p, len, &g, &why) != 0)
                                fail_msg("%s: %s", e->d_name, why);
                        assert_true(g.n_graphs > 0);
                        assert_int_equal(lup_ckpt_graphs_encode(&g, &again, &len2), 0);
                        lup_ckpt_graphs_free(&g);
                        graphs++;
                } else if (strncmp(e->d_name, "replies-", 8) == 0) {
                        struct lup_ckpt_replies r;
                        if (lup_ckpt_replies_decode(p, len, &r, &why) != 0)
                                fail_msg("%s: %s", e->d_name, why);
                        size_t half = (size_t)(r.end - r.start) / 2;
                        assert_int_equal(lup_ckpt_replies_encode(r.start, r.end, r.data, half, r.data + half,
                                                                 (size_t)(r.end - r.start) - half, &again, &len2),
                                         0);
                        replies++;
                } else {
                        free(p);
                        continue;
                }
                /* what the old writer wrote, the codec writes again, byte for byte */
                assert_int_equal(len2, len);
                assert_memory_equal(again, p, len);
                free(again);
                free(p);
        }
        closedir(dir);
        assert_true(manifests >= 6 && v1 >= 1 && events >= 1 && replies >= 1 && graphs >= 1);
}

int main(void)
{
        /* one test a line */
        /* clang-format off */
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(manifest_round_trip),
                cmocka_unit_test(manifest_empty_lists),
                cmocka_unit_test(manifest_truncations),
                cmocka_unit_test(manifest_flipped_bytes),
                cmocka_unit_test(manifest_bad_fields),
                cmocka_unit_test(manifest_vmm_bad_records),
                cmocka_unit_test(manifest_places_bad_records),
                cmocka_unit_test(manifest_hot_records_no_pieces),
                cmocka_unit_test(manifest_long_names),
                cmocka_unit_test(manifest_version1),
                cmocka_unit_test(events_round_trip),
                cmocka_unit_test(replies_round_trip),
                cmocka_unit_test(sealed_helper),
                cmocka_unit_test(graphs_round_trip),
                cmocka_unit_test(graphs_bad_fields),
                cmocka_unit_test(graphs_disabled_nodes),
                cmocka_unit_test(graphs_host_node),
                cmocka_unit_test(real_objects),
        };
        /* clang-format on */
        return cmocka_run_group_tests(tests, NULL, NULL);
}
