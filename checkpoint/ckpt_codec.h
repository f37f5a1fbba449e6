/* SPDX-License-Identifier: MIT */
/*
 * The checkpoint codec: the bytes of the three objects of a checkpoint that
 * are not raw contents ("manifest", "events", "replies"), encoded and
 * decoded in one place. The worker (daemon/worker/ckpt.c, restore.c,
 * handles.c, tx.c) builds or applies the structs below; the codec itself
 * makes no driver call and sees no session, so the unit test and the fuzz
 * target link it alone (it is part of lupckpt, which depends on common/
 * only).
 *
 * Every one of the three is a sealed object:
 *
 *      u64 magic, u32 version, body..., u64 lup_hash64(all bytes before, seed magic)
 *
 * all little-endian. The manifest's body (version 2; version 1 has no
 * memory flags, and means DURABLE):
 *
 *      u32 memory flags (LUP_CKPT_MEM_*)
 *      str16 session name, 16 bytes token, u64 epoch, u32 arena slot,
 *      u64 last executed seq, u32 latched CUresult, u32 devices,
 *      u32 primaries (bit d: the client holds device d's primary context)
 *      u32 n, n x { u64 context id, i32 device, u32 flags }
 *      u32 n, n x slab  { u64 addr, u32 block, i32 device }
 *      u32 n, n x alloc { u64 addr, u64 size, u64 chunk, i32 device, u64 owner }
 *      u32 n, n x chunk { u64 addr, u64 size, u32 pieces, pieces x u64 hash }
 *              pieces: (size + PIECE - 1) / PIECE when DURABLE, else 0;
 *              hash: lup_hash64 of that PIECE of mem/<addr>, seed 0
 *      u32 n, n x handle { u64 id, u8 kind, u64 ctx, u64 parent, str16 name,
 *                          u32 flags, i32 priority, u64 image_len,
 *                          u64 image hash (of img/<id>) if image_len }
 *      u32 n, n x global { u64 addr, u64 size, u64 holder, str16 name,
 *                          u64 hash (of glob/<addr>) }
 *      u32 n, n x setting { u64 holder, u32 kind, u32 key, i32 device, u64 value }
 *      (version 3 and later) the client's virtual memory: see "vmm" below
 *      (version 4 and later) where each piece's bytes are: see "places" below
 *
 * "events" (version 1): u32 n, n x { u64 id, u8 have_when, u64 when_ms as
 * the bits of a double }. "replies" (version 1): u64 start, u64 end, u64 n,
 * n bytes of the reply stream [start, end).
 *
 * Decoders treat their input as hostile: they read through the bounded
 * reader (common/buf.h), check every count and length against the limits
 * below before allocating, and give a static reason on failure. What only
 * the session can judge (the name, the device count, whether a chunk or a
 * handle exists) is left to the worker's apply step.
 */
#ifndef LUP_CKPT_CODEC_H
#define LUP_CKPT_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "lupine/wire.h"

#define LUP_CKPT_PIECE LUP_BULK_CHUNK /* memory is hashed and copied in pieces of this size */

/* How many pieces (and piece hashes) a chunk of size bytes has. */
static inline uint64_t lup_ckpt_pieces(uint64_t size)
{
        return (size + LUP_CKPT_PIECE - 1) / LUP_CKPT_PIECE;
}

/* The length of piece p of a chunk of size bytes (the last may be short). */
static inline uint64_t lup_ckpt_piece_len(uint64_t size, uint64_t p)
{
        uint64_t left = size - p * LUP_CKPT_PIECE;
        return left < LUP_CKPT_PIECE ? left : LUP_CKPT_PIECE;
}

/* The manifest's memory flags: where the memory contents are.
 *   DURABLE  objects mem/<addr> through the provider, hashed per piece;
 *   HOT      exported as fds (fd store or an upgrade's re-exec). */
#define LUP_CKPT_MEM_DURABLE 1u
#define LUP_CKPT_MEM_HOT     2u

#define LUP_CKPT_MANIFEST_VERSION     4u           /* 2: memory flags after the version; 3: vmm; 4: places */
#define LUP_CKPT_MANIFEST_VERSION_MIN 1u           /* the oldest this lupined reads */
#define LUP_CKPT_MANIFEST_MAX         (256u << 20) /* the largest manifest a restore reads */

/* Limits of a manifest's lists. Chunks and slabs are granule-aligned
 * pieces of one arena slot, so no slot holds more than this many. */
#define LUP_CKPT_MAX_CHUNKS      (LUP_ARENA_SIZE / LUP_ARENA_GRANULE)
#define LUP_CKPT_MAX_SLABS       (LUP_ARENA_SIZE / LUP_ARENA_GRANULE)
#define LUP_CKPT_MAX_SETTINGS    65536u          /* the worker's LUPW_MAX_SETTINGS */
#define LUP_CKPT_MAX_REPLY_BYTES (4096ull << 20) /* the worker's LUPW_MAX_REPLY_CACHE_MB */

/* ---- sealed objects */

struct lup_sealed {
        const char *name; /* the object's name, for messages */
        uint64_t magic;   /* also the hash's seed */
        uint32_t version_min, version_max;
        uint64_t min_len, max_len; /* of the whole object, trailer included */
        /* the reasons open gives: trailer (or length) wrong, magic wrong, version unknown */
        const char *why_damaged, *why_magic, *why_version;
};

extern const struct lup_sealed lup_ckpt_manifest_kind;
extern const struct lup_sealed lup_ckpt_events_kind;
extern const struct lup_sealed lup_ckpt_replies_kind;

/* Bytes a sealed object adds to its body: magic, version, hash. */
#define LUP_SEALED_OVERHEAD 20u

/* Whether an object of n bytes may be one of this kind (check it before
 * reading the object). */
bool lup_sealed_len_ok(const struct lup_sealed *k, uint64_t n);
/* Starts a sealed object in an empty writer: magic and version. */
void lup_sealed_begin(struct lup_wr *w, const struct lup_sealed *k, uint32_t version);
/* Ends it: appends the hash of everything written so far. */
void lup_sealed_end(struct lup_wr *w, const struct lup_sealed *k);
/*
 * Checks length, trailer, magic and version of p[0, n), in that order, and
 * gives a reader over the body (positioned after the version; the trailer
 * is not part of it) and the version. 0, -EBADMSG (length, trailer or
 * magic) or -EPROTO (version), with *ret_why one of k's reasons; the
 * outputs are untouched on failure.
 */
int lup_sealed_open(const struct lup_sealed *k, const uint8_t *p, size_t n, struct lup_rd *ret_body,
                    uint32_t *ret_version, const char **ret_why);
/* The version field of a would-be sealed object, for messages; 0 if it is
 * too short to have one. */
uint32_t lup_sealed_peek_version(const uint8_t *p, size_t n);

/* ---- the manifest */

struct lup_ckpt_ctx {
        uint64_t id;
        int32_t device;
        uint32_t flags;
};

struct lup_ckpt_slab {
        uint64_t addr;
        uint32_t block;
        int32_t device;
};

struct lup_ckpt_alloc {
        uint64_t addr, size, chunk;
        int32_t device;
        uint64_t owner;
};

struct lup_ckpt_chunk {
        uint64_t addr, size;
        uint32_t n_pieces;
        uint64_t *hashes; /* n_pieces of them (NULL when none) */
        /* where each piece is (version 4, see "places"); NULL for both
         * means every piece is in this epoch's object at its own offset */
        uint8_t *base;    /* 0: this epoch; k: the manifest's bases[k - 1] */
        uint64_t *offset; /* in object mem/<addr> of that epoch */
};

struct lup_ckpt_handle {
        uint64_t id;
        uint8_t kind; /* the worker's LUPW_H_*: the codec does not judge it */
        uint64_t ctx, parent;
        const char *name; /* NUL-terminated, at most LUP_MAX_STR bytes, "" for none */
        uint32_t flags;
        int32_t priority;
        uint64_t image_len;  /* of img/<id>, 0 for none; at most LUP_MAX_BLOB */
        uint64_t image_hash; /* when image_len */
};

struct lup_ckpt_global {
        uint64_t addr, size; /* the client's address; 1..LUP_MAX_BLOB bytes */
        uint64_t holder;     /* the module or library it is in */
        const char *name;
        uint64_t hash; /* of glob/<addr> */
};

struct lup_ckpt_setting {
        uint64_t holder;
        uint32_t kind, key;
        int32_t device;
        int64_t value;
};

/*
 * ---- vmm: the client's virtual memory management (daemon/worker/vmm.c),
 * at the end of a version-3 manifest's body:
 *
 *      u32 n, n x reservation { u64 addr, u64 size }
 *      u32 n, n x allocation  { u64 id, u64 size, u64 home, i32 type,
 *                               i32 location type, i32 location id,
 *                               u32 requested handle types, u8 compression,
 *                               u8 gpuDirectRDMA, u16 usage, u32 refs }
 *      u32 n, n x mapping     { u64 addr, u64 size, u64 offset, u64 allocation id,
 *                               u32 present, u32 prot }
 *
 * An allocation's contents are the chunk at its home (mem/<home>), saved
 * and exported like every chunk. A mapping's present has bit d set for
 * each device d it gave access to, prot holds 2 bits per device (the
 * CU_MEM_ACCESS_FLAGS_PROT_* value). The codec checks counts, sizes,
 * alignment (LUP_ARENA_GRANULE; a reservation's size is only a page
 * multiple), overflow and devices; the worker judges the rest (inside the
 * arena, no overlaps, ids that exist).
 */
#define LUP_CKPT_MAX_VMM_RESV   4096u
#define LUP_CKPT_MAX_VMM_ALLOCS 65536u
#define LUP_CKPT_MAX_VMM_MAPS   65536u

struct lup_ckpt_vmm_resv {
        uint64_t addr, size;
};

struct lup_ckpt_vmm_prop {
        int32_t type, loctype, locid;
        uint32_t htypes;
        uint8_t compression, rdma;
        uint16_t usage;
};

struct lup_ckpt_vmm_alloc {
        uint64_t id, size, home;
        struct lup_ckpt_vmm_prop prop;
        uint32_t refs;
};

struct lup_ckpt_vmm_map {
        uint64_t addr, size, offset, alloc;
        uint32_t present, prot;
};

struct lup_ckpt_vmm {
        uint32_t n_resv, n_allocs, n_maps;
        struct lup_ckpt_vmm_resv *resv;
        struct lup_ckpt_vmm_alloc *allocs;
        struct lup_ckpt_vmm_map *maps;
};

/* checkpoint/ckpt_vmm.c: the bytes the section takes, and writing it */
size_t lup_ckpt_vmm_size(const struct lup_ckpt_vmm *v);
void lup_ckpt_vmm_encode(struct lup_wr *w, const struct lup_ckpt_vmm *v);
/* Reads the section into *v (arrays allocated; lup_ckpt_vmm_free frees
 * them, also after a failure). 0, -EBADMSG or -ENOMEM with *ret_why. */
int lup_ckpt_vmm_decode(struct lup_rd *r, uint32_t n_devices, struct lup_ckpt_vmm *v, const char **ret_why);
void lup_ckpt_vmm_free(struct lup_ckpt_vmm *v);

/*
 * ---- places: where every piece of memory is (version 4), at the end of
 * the body, after the vmm section:
 *
 *      u32 n, n x u64 base epoch  (strictly increasing, each below the
 *                                  manifest's own epoch; at most
 *                                  LUP_CKPT_MAX_BASES)
 *      for each chunk, for each of its pieces: u8 base, u64 offset
 *
 * A piece with base 0 is in this epoch's object mem/<addr> at `offset`;
 * base k is in object mem/<addr> of epoch bases[k - 1], which the
 * provider kept for this epoch (ABI version 5, save_refer). An
 * incremental checkpoint writes only the pieces that changed since the
 * epoch before, packed, and refers to the rest; a full one has no bases
 * and every piece at its own offset. Offsets are multiples of
 * LUP_CKPT_PIECE; the worker checks them against the objects' sizes, and
 * every piece against its hash wherever it is read from. A hot-only
 * manifest has no pieces and no bases.
 */
#define LUP_CKPT_MAX_BASES 16u /* the provider ABI's LUPINE_CKPT_MAX_REFS */

/* checkpoint/ckpt_places.c: the bytes the section takes, and writing it */
struct lup_ckpt_manifest;
size_t lup_ckpt_places_size(const struct lup_ckpt_manifest *m);
void lup_ckpt_places_encode(struct lup_wr *w, const struct lup_ckpt_manifest *m);
/* Reads the section of a manifest whose chunks are decoded already,
 * into m->bases and each chunk's base and offset (storage in m->places,
 * freed by lup_ckpt_manifest_free). 0, -EBADMSG or -ENOMEM with *ret_why. */
int lup_ckpt_places_decode(struct lup_rd *r, struct lup_ckpt_manifest *m, const char **ret_why);

/*
 * Everything a restore needs to rebuild a session. Before an encode the
 * builder owns what the pointers point to; a decode allocates the arrays,
 * and keeps names and piece hashes in `strings` and `hashes`, all freed
 * by lup_ckpt_manifest_free().
 */
struct lup_ckpt_manifest {
        uint32_t version;
        uint32_t mem; /* LUP_CKPT_MEM_*, never 0 */
        char name[LUP_MAX_NAME + 1];
        uint8_t token[LUP_TOKEN_SIZE];
        uint64_t epoch;
        uint32_t slot; /* below LUP_ARENA_SLOTS */
        uint64_t last_seq;
        uint32_t latched;
        uint32_t n_devices; /* at most LUP_MAX_DEVICES */
        uint32_t primaries;
        uint32_t n_ctxs; /* at most LUP_MAX_CONTEXTS */
        struct lup_ckpt_ctx ctxs[LUP_MAX_CONTEXTS];
        uint32_t n_slabs, n_allocs, n_chunks, n_handles, n_globals, n_settings;
        struct lup_ckpt_slab *slabs;
        struct lup_ckpt_alloc *allocs;
        struct lup_ckpt_chunk *chunks;
        struct lup_ckpt_handle *handles;
        struct lup_ckpt_global *globals;
        struct lup_ckpt_setting *settings;
        struct lup_ckpt_vmm vmm; /* version 3 */
        uint32_t n_bases;        /* version 4: the epochs pieces refer to */
        uint64_t bases[LUP_CKPT_MAX_BASES];
        char *strings;    /* a decode's names */
        uint64_t *hashes; /* a decode's piece hashes */
        void *places;     /* a decode's piece bases and offsets */
};

/* Where piece p of chunk c of manifest m is ("places"): the epoch whose
 * object mem/<c->addr> holds it, and the offset there. Without places
 * (before version 4, or a full save's builder) every piece is in m's own
 * epoch at its own offset. */
static inline uint64_t lup_ckpt_piece_epoch(const struct lup_ckpt_manifest *m, const struct lup_ckpt_chunk *c,
                                            uint32_t p)
{
        return c->base && c->base[p] ? m->bases[c->base[p] - 1] : m->epoch;
}

static inline uint64_t lup_ckpt_piece_offset(const struct lup_ckpt_chunk *c, uint32_t p)
{
        return c->offset ? c->offset[p] : (uint64_t)p * LUP_CKPT_PIECE;
}

/* Frees a decoded manifest's storage (or a builder's arrays) and zeroes
 * the pointers; NULL-tolerant. */
void lup_ckpt_manifest_free(struct lup_ckpt_manifest *m);
/*
 * The sealed manifest in a new buffer (*ret_buf, *ret_len; free() it).
 * m->version says which format (1 writes no memory flags). 0, -ENOMEM, or
 * -ENOBUFS when a name is too long to encode.
 */
int lup_ckpt_manifest_encode(const struct lup_ckpt_manifest *m, uint8_t **ret_buf, size_t *ret_len);
/*
 * Decodes and validates a manifest of n bytes into *ret (free it with
 * lup_ckpt_manifest_free). 0, -EBADMSG (damaged or malformed), -EPROTO
 * (a version this codec does not read: lup_sealed_peek_version says
 * which) or -ENOMEM, with *ret_why a static reason; *ret is untouched on
 * failure.
 */
int lup_ckpt_manifest_decode(const uint8_t *p, size_t n, struct lup_ckpt_manifest *ret, const char **ret_why);

/* ---- events: which events were recorded, and when */

#define LUP_CKPT_EVENT_REC 17u /* bytes of one record */

struct lup_ckpt_event {
        uint64_t id;
        bool have_when;
        double when_ms; /* relative to a reference event of the same context */
};

int lup_ckpt_events_encode(const struct lup_ckpt_event *v, uint32_t n, uint8_t **ret_buf, size_t *ret_len);
/* *ret_v: a new array of *ret_n records (free() it; may be NULL when 0).
 * 0, -EBADMSG or -ENOMEM, with *ret_why. */
int lup_ckpt_events_decode(const uint8_t *p, size_t n, struct lup_ckpt_event **ret_v, uint32_t *ret_n,
                           const char **ret_why);

/* ---- replies: the reply log's bytes a resuming client may still ask for */

struct lup_ckpt_replies {
        uint64_t start, end; /* stream offsets of the bytes */
        const uint8_t *data; /* end - start bytes (points into the object after a decode) */
};

/* The log's bytes may wrap around its ring: data then data2, of n and n2
 * bytes, with n + n2 == end - start. */
int lup_ckpt_replies_encode(uint64_t start, uint64_t end, const void *data, size_t n, const void *data2, size_t n2,
                            uint8_t **ret_buf, size_t *ret_len);
/* 0 or -EBADMSG, with *ret_why. */
int lup_ckpt_replies_decode(const uint8_t *p, size_t n, struct lup_ckpt_replies *ret, const char **ret_why);

#endif
