/* SPDX-License-Identifier: MIT */
/*
 * The manifest's places section (version 4; its layout is in ckpt_codec.h):
 * for every piece of memory, the epoch whose object holds it and the
 * offset there. Decoding treats the input as hostile, like the rest of
 * the manifest; what only the store can tell (whether an object is long
 * enough, whether a base is still there) is the worker's to check.
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_codec.h"

#define PLACE_REC 9u /* u8 base, u64 offset */

static uint64_t total_pieces(const struct lup_ckpt_manifest *m)
{
        uint64_t n = 0;
        for (uint32_t i = 0; i < m->n_chunks; i++)
                n += m->chunks[i].n_pieces;
        return n;
}

size_t lup_ckpt_places_size(const struct lup_ckpt_manifest *m)
{
        return 4 + (size_t)m->n_bases * 8 + (size_t)total_pieces(m) * PLACE_REC;
}

void lup_ckpt_places_encode(struct lup_wr *w, const struct lup_ckpt_manifest *m)
{
        lup_wr_u32(w, m->n_bases);
        for (uint32_t i = 0; i < m->n_bases; i++)
                lup_wr_u64(w, m->bases[i]);
        for (uint32_t i = 0; i < m->n_chunks; i++) {
                const struct lup_ckpt_chunk *c = &m->chunks[i];
                for (uint32_t p = 0; p < c->n_pieces; p++) {
                        /* no places given: a full save, every piece where it belongs */
                        lup_wr_u8(w, c->base ? c->base[p] : 0);
                        lup_wr_u64(w, lup_ckpt_piece_offset(c, p));
                }
        }
}

static int bad(const char **ret_why, int rc, const char *why)
{
        *ret_why = why;
        return rc;
}

static int decode_bases(struct lup_rd *r, struct lup_ckpt_manifest *m, const char **ret_why)
{
        if (lup_rd_u32(r, &m->n_bases) < 0 || m->n_bases > LUP_CKPT_MAX_BASES)
                return bad(ret_why, -EBADMSG, "malformed list of base epochs");
        for (uint32_t i = 0; i < m->n_bases; i++) {
                uint64_t e;
                if (lup_rd_u64(r, &e) < 0 || e == 0 || e >= m->epoch || (i > 0 && e <= m->bases[i - 1]))
                        return bad(ret_why, -EBADMSG, "the base epochs are not increasing epochs before this one");
                m->bases[i] = e;
        }
        if (m->n_bases && !(m->mem & LUP_CKPT_MEM_DURABLE))
                return bad(ret_why, -EBADMSG, "a checkpoint without memory names base epochs");
        return 0;
}

int lup_ckpt_places_decode(struct lup_rd *r, struct lup_ckpt_manifest *m, const char **ret_why)
{
        int rc = decode_bases(r, m, ret_why);
        if (rc < 0)
                return rc;
        uint64_t n = total_pieces(m);
        if (n == 0)
                return 0;
        if (n * PLACE_REC > lup_rd_left(r))
                return bad(ret_why, -EBADMSG, "the piece places are cut short");
        /* one block: n offsets, then n bases */
        uint8_t *store = malloc(n * (sizeof(uint64_t) + 1));
        if (!store)
                return bad(ret_why, -ENOMEM, "out of memory");
        m->places = store;
        uint64_t *offs = (uint64_t *)(void *)store;
        uint8_t *bases = store + n * sizeof(uint64_t);
        for (uint32_t i = 0; i < m->n_chunks; i++) {
                struct lup_ckpt_chunk *c = &m->chunks[i];
                if (!c->n_pieces)
                        continue;
                c->offset = offs;
                c->base = bases;
                for (uint32_t p = 0; p < c->n_pieces; p++) {
                        lup_rd_u8(r, &c->base[p]);
                        lup_rd_u64(r, &c->offset[p]);
                        if (r->err || c->base[p] > m->n_bases || c->offset[p] % LUP_CKPT_PIECE ||
                            c->offset[p] >= LUP_ARENA_SIZE)
                                return bad(ret_why, -EBADMSG, "malformed piece place");
                }
                offs += c->n_pieces;
                bases += c->n_pieces;
        }
        return 0;
}
