/* SPDX-License-Identifier: MIT */
/*
 * The manifest's vmm section (its layout is in ckpt_codec.h): the client's
 * reservations, physical allocations and mappings. Decoding treats the
 * input as hostile, like the rest of the manifest.
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_codec.h"

#define RESV_REC  16u
#define ALLOC_REC 48u
#define MAP_REC   40u

size_t lup_ckpt_vmm_size(const struct lup_ckpt_vmm *v)
{
        return 12 + (size_t)v->n_resv * RESV_REC + (size_t)v->n_allocs * ALLOC_REC + (size_t)v->n_maps * MAP_REC;
}

void lup_ckpt_vmm_encode(struct lup_wr *w, const struct lup_ckpt_vmm *v)
{
        lup_wr_u32(w, v->n_resv);
        for (uint32_t i = 0; i < v->n_resv; i++) {
                lup_wr_u64(w, v->resv[i].addr);
                lup_wr_u64(w, v->resv[i].size);
        }
        lup_wr_u32(w, v->n_allocs);
        for (uint32_t i = 0; i < v->n_allocs; i++) {
                const struct lup_ckpt_vmm_alloc *a = &v->allocs[i];
                lup_wr_u64(w, a->id);
                lup_wr_u64(w, a->size);
                lup_wr_u64(w, a->home);
                lup_wr_i32(w, a->prop.type);
                lup_wr_i32(w, a->prop.loctype);
                lup_wr_i32(w, a->prop.locid);
                lup_wr_u32(w, a->prop.htypes);
                lup_wr_u8(w, a->prop.compression);
                lup_wr_u8(w, a->prop.rdma);
                lup_wr_u16(w, a->prop.usage);
                lup_wr_u32(w, a->refs);
        }
        lup_wr_u32(w, v->n_maps);
        for (uint32_t i = 0; i < v->n_maps; i++) {
                const struct lup_ckpt_vmm_map *m = &v->maps[i];
                lup_wr_u64(w, m->addr);
                lup_wr_u64(w, m->size);
                lup_wr_u64(w, m->offset);
                lup_wr_u64(w, m->alloc);
                lup_wr_u32(w, m->present);
                lup_wr_u32(w, m->prot);
        }
}

void lup_ckpt_vmm_free(struct lup_ckpt_vmm *v)
{
        if (!v)
                return;
        free(v->resv);
        free(v->allocs);
        free(v->maps);
        memset(v, 0, sizeof(*v));
}

/* n records of rec bytes, if the reader still holds them (so a small input
 * cannot ask for a large allocation): a zeroed array, or NULL with *rc. */
static void *records(struct lup_rd *r, uint32_t max, size_t rec, size_t size, uint32_t *ret_n, int *rc)
{
        uint32_t n;
        if (lup_rd_u32(r, &n) < 0 || n > max || (uint64_t)n * rec > lup_rd_left(r)) {
                *rc = -EBADMSG;
                return NULL;
        }
        *ret_n = n;
        void *v = calloc(n ? n : 1, size);
        if (!v)
                *rc = -ENOMEM;
        return v;
}

/* [addr, addr + size) is not empty, does not wrap, and starts at a granule */
static bool range_ok(uint64_t addr, uint64_t size)
{
        return size && addr % LUP_ARENA_GRANULE == 0 && addr + size > addr;
}

static int decode_resv(struct lup_rd *r, struct lup_ckpt_vmm *v)
{
        int rc = 0;
        v->resv = records(r, LUP_CKPT_MAX_VMM_RESV, RESV_REC, sizeof(*v->resv), &v->n_resv, &rc);
        for (uint32_t i = 0; rc == 0 && i < v->n_resv; i++) {
                lup_rd_u64(r, &v->resv[i].addr);
                lup_rd_u64(r, &v->resv[i].size);
                if (r->err || !range_ok(v->resv[i].addr, v->resv[i].size) || v->resv[i].size > LUP_ARENA_SIZE)
                        rc = -EBADMSG;
        }
        return rc;
}

static int decode_allocs(struct lup_rd *r, uint32_t n_devices, struct lup_ckpt_vmm *v)
{
        int rc = 0;
        v->allocs = records(r, LUP_CKPT_MAX_VMM_ALLOCS, ALLOC_REC, sizeof(*v->allocs), &v->n_allocs, &rc);
        for (uint32_t i = 0; rc == 0 && i < v->n_allocs; i++) {
                struct lup_ckpt_vmm_alloc *a = &v->allocs[i];
                lup_rd_u64(r, &a->id);
                lup_rd_u64(r, &a->size);
                lup_rd_u64(r, &a->home);
                lup_rd_i32(r, &a->prop.type);
                lup_rd_i32(r, &a->prop.loctype);
                lup_rd_i32(r, &a->prop.locid);
                lup_rd_u32(r, &a->prop.htypes);
                lup_rd_u8(r, &a->prop.compression);
                lup_rd_u8(r, &a->prop.rdma);
                lup_rd_u16(r, &a->prop.usage);
                lup_rd_u32(r, &a->refs);
                if (r->err || !a->id || !range_ok(a->home, a->size) || a->size % LUP_ARENA_GRANULE ||
                    a->size > LUP_ARENA_SIZE || a->prop.locid < 0 || a->prop.locid >= (int32_t)n_devices)
                        rc = -EBADMSG;
        }
        return rc;
}

static int decode_maps(struct lup_rd *r, uint32_t n_devices, struct lup_ckpt_vmm *v)
{
        uint32_t devs = n_devices >= 32 ? ~0u : (1u << n_devices) - 1;
        int rc = 0;
        v->maps = records(r, LUP_CKPT_MAX_VMM_MAPS, MAP_REC, sizeof(*v->maps), &v->n_maps, &rc);
        for (uint32_t i = 0; rc == 0 && i < v->n_maps; i++) {
                struct lup_ckpt_vmm_map *m = &v->maps[i];
                lup_rd_u64(r, &m->addr);
                lup_rd_u64(r, &m->size);
                lup_rd_u64(r, &m->offset);
                lup_rd_u64(r, &m->alloc);
                lup_rd_u32(r, &m->present);
                lup_rd_u32(r, &m->prot);
                if (r->err || !range_ok(m->addr, m->size) || m->size % LUP_ARENA_GRANULE ||
                    m->offset % LUP_ARENA_GRANULE || m->offset + m->size < m->offset || (m->present & ~devs))
                        rc = -EBADMSG;
                for (uint32_t d = 0; rc == 0 && d < 16; d++) {
                        uint32_t p = (m->prot >> (2 * d)) & 3;
                        if (p == 2 || (p && !(m->present & (1u << d))))
                                rc = -EBADMSG;
                }
        }
        return rc;
}

int lup_ckpt_vmm_decode(struct lup_rd *r, uint32_t n_devices, struct lup_ckpt_vmm *v, const char **ret_why)
{
        memset(v, 0, sizeof(*v));
        int rc = decode_resv(r, v);
        if (rc == 0)
                rc = decode_allocs(r, n_devices, v);
        if (rc == 0)
                rc = decode_maps(r, n_devices, v);
        if (rc < 0)
                *ret_why = rc == -ENOMEM ? "out of memory" : "malformed virtual memory record";
        return rc;
}
