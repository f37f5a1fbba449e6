/* SPDX-License-Identifier: MIT */
/*
 * The client's virtual memory management (cuMemAddressReserve, cuMemCreate,
 * cuMemMap, cuMemSetAccess and the rest; abi/cuda_api.spec 440-450).
 *
 * Everything lives in the session's arena, so pointers are the same on
 * both sides:
 *   reservation  bare VA taken out of the arena's free list (arena.c), so
 *                no cuMemAlloc lands there; the worker's own reservation
 *                of the whole arena covers it in the driver;
 *   allocation   a real cuMemCreate (the POSIX fd handle type added, so a
 *                hot restart exports it) under the client's id, kept
 *                mapped at a home range of the arena that the client never
 *                sees: a chunk like any other, so checkpoints save its
 *                contents, mapped by the client or not, and hot restarts
 *                export it (worker/ckpt.c, hot.c);
 *   mapping      the real handle mapped at the client's address, inside
 *                one of its reservations, with the access it set.
 *
 * The driver cannot judge a client's range (the arena is all one
 * reservation to it), so every range is checked here first, with the
 * errors the driver gives its own callers: a map outside a reservation or
 * over a mapping, an unmap of part of a mapping, an access descriptor for
 * a device that does not exist.
 */
#define LUP_LOG_CAT LUP_LOGC_GPU
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "log.h"
#include "worker/session.h"

#define GRAN LUP_ARENA_GRANULE

static uint64_t round_gran(uint64_t n)
{
        return (n + GRAN - 1) / GRAN * GRAN;
}

static uint64_t page_size(void)
{
        long p = sysconf(_SC_PAGESIZE);
        return p > 0 ? (uint64_t)p : 4096;
}

/* The VMM calls need no context of the client's, but some drivers want
 * one current: device 0's primary (the worker's own) when none is bound,
 * as after a restore. The next call that names a context binds it. */
static void any_ctx(struct lupw_session *s)
{
        if (!s->ctx.bound_id && s->ctx.primary[0])
                s->be.fn.cuCtxSetCurrent(s->ctx.primary[0]);
}

/* ---- lookups */

static struct lupw_vmm_alloc *find_alloc(const struct lupw_session *s, uint64_t id)
{
        uint64_t i;
        if (!lup_u64map_get(&s->vmm.ids, id, &i) || i >= s->vmm.n_allocs)
                return NULL;
        return &s->vmm.allocs[i];
}

/* Records a new allocation (room in the array was made): 0 or -errno. */
static int alloc_add(struct lupw_session *s, const struct lupw_vmm_alloc *a)
{
        s->vmm.ids.limit = LUP_CKPT_MAX_VMM_ALLOCS;
        int rc = lup_u64map_put(&s->vmm.ids, a->id, s->vmm.n_allocs);
        if (rc == 0)
                s->vmm.allocs[s->vmm.n_allocs++] = *a;
        return rc;
}

/* a handle the client may still name: one reference at least */
static struct lupw_vmm_alloc *live_alloc(const struct lupw_session *s, uint64_t id)
{
        struct lupw_vmm_alloc *a = find_alloc(s, id);
        return a && a->refs > 0 ? a : NULL;
}

static struct lup_ckpt_vmm_resv *find_resv(const struct lupw_session *s, uint64_t p, uint64_t n)
{
        for (size_t i = 0; i < s->vmm.n_resv; i++) {
                struct lup_ckpt_vmm_resv *r = &s->vmm.resv[i];
                if (p >= r->addr && p - r->addr < r->size && n <= r->size - (p - r->addr))
                        return r;
        }
        return NULL;
}

static size_t map_index(const struct lupw_session *s, uint64_t p)
{
        return lupw_vmm_map_index(s, p);
}

static struct lupw_vmm_map *find_map(const struct lupw_session *s, uint64_t p)
{
        size_t i = map_index(s, p);
        if (i < s->vmm.n_maps && s->vmm.maps[i].addr <= p)
                return &s->vmm.maps[i];
        return NULL;
}

/* [p, p + n) is exactly whole mappings, one after the other: their first
 * index and count, or -1 */
static long tiling(const struct lupw_session *s, uint64_t p, uint64_t n, size_t *ret_count)
{
        if (n == 0 || p + n < p)
                return -1;
        size_t i = map_index(s, p), first = i;
        uint64_t at = p;
        while (at < p + n) {
                if (i >= s->vmm.n_maps || s->vmm.maps[i].addr != at || s->vmm.maps[i].size > p + n - at)
                        return -1;
                at += s->vmm.maps[i].size;
                i++;
        }
        *ret_count = i - first;
        return (long)first;
}

/* ---- reservations */

CUresult lupw_cuMemAddressReserve(struct lupw_session *s, CUdeviceptr *ptr, size_t size, size_t alignment,
                                  unsigned long long addr, unsigned long long flags)
{
        uint64_t pg = page_size(), at;
        if (size == 0 || size % pg || addr % pg || flags != 0 || (alignment & (alignment - 1)))
                return CUDA_ERROR_INVALID_VALUE;
        if (s->vmm.n_resv >= LUP_CKPT_MAX_VMM_RESV || size > LUP_ARENA_SIZE ||
            lup_array_grow((void **)&s->vmm.resv, &s->vmm.cap_resv, s->vmm.n_resv + 1, sizeof(*s->vmm.resv)) < 0)
                return CUDA_ERROR_OUT_OF_MEMORY;
        /* a hint outside the arena, or not on a granule, cannot be had: any address */
        uint64_t hint = arena_contains(&s->mem.arena, addr) && addr % GRAN == 0 ? addr : 0;
        int rc = arena_va_reserve(&s->mem.arena, round_gran(size), alignment, hint, &at);
        if (rc < 0)
                return rc == -EINVAL ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_OUT_OF_MEMORY;
        s->vmm.resv[s->vmm.n_resv++] = (struct lup_ckpt_vmm_resv){ .addr = at, .size = size };
        *ptr = at;
        return CUDA_SUCCESS;
}

CUresult lupw_cuMemAddressFree(struct lupw_session *s, unsigned long long ptr, size_t size)
{
        for (size_t i = 0; i < s->vmm.n_resv; i++) {
                struct lup_ckpt_vmm_resv *r = &s->vmm.resv[i];
                if (r->addr != ptr)
                        continue;
                /* the size must be the reservation's; mappings must go first */
                size_t im = map_index(s, r->addr);
                if (r->size != size || (im < s->vmm.n_maps && s->vmm.maps[im].addr < r->addr + r->size))
                        return CUDA_ERROR_INVALID_VALUE;
                arena_va_release(&s->mem.arena, r->addr, round_gran(r->size));
                *r = s->vmm.resv[--s->vmm.n_resv];
                return CUDA_SUCCESS;
        }
        return CUDA_ERROR_INVALID_VALUE;
}

/* ---- physical allocations */

static void real_prop(const struct lup_ckpt_vmm_prop *p, CUmemAllocationProp *ret)
{
        *ret = (CUmemAllocationProp){
                .type = (CUmemAllocationType)p->type,
                .requestedHandleTypes = (CUmemAllocationHandleType)p->htypes,
                .location = { .type = (CUmemLocationType)p->loctype, .id = p->locid },
                .allocFlags = { .compressionType = p->compression, .gpuDirectRDMACapable = p->rdma, .usage = p->usage },
        };
}

/* The props the driver would refuse, refused as it does (checked before
 * any VA is taken). */
static CUresult prop_check(const struct lupw_session *s, const struct lup_ckpt_vmm_prop *p)
{
        if (p->type != CU_MEM_ALLOCATION_TYPE_PINNED)
                return CUDA_ERROR_INVALID_VALUE;
        if (p->loctype == CU_MEM_LOCATION_TYPE_HOST || p->loctype == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
            p->loctype == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT)
                return CUDA_ERROR_NOT_SUPPORTED; /* host memory cannot be the client's: docs/status.md */
        if (p->loctype != CU_MEM_LOCATION_TYPE_DEVICE)
                return CUDA_ERROR_INVALID_VALUE;
        if (p->locid < 0 || p->locid >= s->n_devices)
                return CUDA_ERROR_INVALID_DEVICE;
        return CUDA_SUCCESS;
}

/* A new allocation's real side at home: created with the client's props
 * plus the POSIX fd type, or imported from its fd in a hot restore. */
static CUresult make_real(struct lupw_session *s, struct lupw_vmm_alloc *a)
{
        any_ctx(s);
        CUmemAllocationProp prop;
        real_prop(&a->prop, &prop);
        prop.requestedHandleTypes |= CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        int rc = lupw_map_chunk(s, a->home, a->size, &prop, &a->real);
        return rc ? (CUresult)rc : CUDA_SUCCESS;
}

CUresult lupw_lupMemCreate(struct lupw_session *s, uint64_t id, size_t size, int type, int loctype, int locid,
                           unsigned int htypes, unsigned char compression, unsigned char rdma, unsigned short usage,
                           unsigned long long flags)
{
        struct lupw_vmm_alloc a = {
                .id = id,
                .size = size,
                .refs = 1,
                .prop = { .type = type,
                          .loctype = loctype,
                          .locid = locid,
                          .htypes = htypes,
                          .compression = compression,
                          .rdma = rdma,
                          .usage = usage },
        };
        if (size == 0 || flags != 0)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = prop_check(s, &a.prop);
        if (r != CUDA_SUCCESS)
                return r;
        /* the driver's granularity is the arena's (checked at reserve: arena.c) */
        if (size % GRAN || size > LUP_ARENA_SIZE)
                return CUDA_ERROR_INVALID_VALUE;
        if (id == 0 || id == UINT64_MAX || find_alloc(s, id))
                return CUDA_ERROR_INVALID_VALUE; /* a broken client: ids are minted once */
        if (s->vmm.n_allocs >= LUP_CKPT_MAX_VMM_ALLOCS ||
            lup_array_grow((void **)&s->vmm.allocs, &s->vmm.cap_allocs, s->vmm.n_allocs + 1, sizeof(*s->vmm.allocs)) <
                    0)
                return CUDA_ERROR_OUT_OF_MEMORY;
        if (arena_va_reserve(&s->mem.arena, size, 0, 0, &a.home) < 0)
                return CUDA_ERROR_OUT_OF_MEMORY;
        r = make_real(s, &a);
        if (r == CUDA_SUCCESS && alloc_add(s, &a) < 0) {
                lupw_unmap_chunk(s, a.home, a.size);
                r = CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (r != CUDA_SUCCESS)
                arena_va_release(&s->mem.arena, a.home, size);
        else
                lup_debug("session %s: physical allocation %#llx, %zu bytes, location %d:%d", s->name,
                          (unsigned long long)id, size, loctype, locid);
        return r;
}

/* Frees an allocation that neither a handle nor a mapping holds. */
static void alloc_put(struct lupw_session *s, struct lupw_vmm_alloc *a)
{
        if (a->refs > 0 || a->maps > 0)
                return;
        any_ctx(s);
        lupw_unmap_chunk(s, a->home, a->size);
        arena_va_release(&s->mem.arena, a->home, a->size);
        size_t at = (size_t)(a - s->vmm.allocs), last = --s->vmm.n_allocs;
        lup_u64map_del(&s->vmm.ids, a->id, NULL);
        if (at != last) {
                *a = s->vmm.allocs[last];
                lup_u64map_put(&s->vmm.ids, a->id, at); /* replaces: cannot fail */
        }
}

CUresult lupw_cuMemRelease(struct lupw_session *s, unsigned long long handle)
{
        struct lupw_vmm_alloc *a = live_alloc(s, handle);
        if (!a)
                return CUDA_ERROR_INVALID_VALUE;
        a->refs--;
        alloc_put(s, a);
        return CUDA_SUCCESS;
}

CUresult lupw_lupMemRetain(struct lupw_session *s, unsigned long long *handle, uint64_t addr)
{
        struct lupw_vmm_map *m = find_map(s, addr);
        struct lupw_vmm_alloc *a = m ? find_alloc(s, m->alloc) : NULL;
        if (!a || a->refs == UINT32_MAX)
                return CUDA_ERROR_INVALID_VALUE;
        a->refs++;
        *handle = a->id;
        return CUDA_SUCCESS;
}

CUresult lupw_lupMemGetProps(struct lupw_session *s, int *type, int *loctype, int *locid, unsigned int *htypes,
                             unsigned char *compression, unsigned char *rdma, unsigned short *usage,
                             unsigned long long handle)
{
        struct lupw_vmm_alloc *a = live_alloc(s, handle);
        CUmemAllocationProp p;
        if (!a)
                return CUDA_ERROR_INVALID_VALUE;
        any_ctx(s);
        /* the driver says what it made (compression is only a request) ... */
        CUresult r = s->be.fn.cuMemGetAllocationPropertiesFromHandle(&p, a->real);
        if (r != CUDA_SUCCESS)
                return r;
        *type = (int)p.type;
        *loctype = (int)p.location.type;
        *locid = p.location.id;
        /* ... but the handle types are the client's: the fd type is lupine's */
        *htypes = a->prop.htypes;
        *compression = p.allocFlags.compressionType;
        *rdma = p.allocFlags.gpuDirectRDMACapable;
        *usage = p.allocFlags.usage;
        return CUDA_SUCCESS;
}

CUresult lupw_lupMemGetGranularity(struct lupw_session *s, size_t *granularity, int type, int loctype, int locid,
                                   unsigned int htypes, unsigned char compression, unsigned char rdma,
                                   unsigned short usage, int option)
{
        struct lup_ckpt_vmm_prop lp = { .type = type,
                                        .loctype = loctype,
                                        .locid = locid,
                                        .htypes = htypes,
                                        .compression = compression,
                                        .rdma = rdma,
                                        .usage = usage };
        CUmemAllocationProp p;
        /* driver 580 answers a granularity even for a device that does not
         * exist (CUDA_SUCCESS, on the H200): lupine gives device 0's, the
         * one value such a question can have on a one-granularity host */
        if (loctype == CU_MEM_LOCATION_TYPE_DEVICE && (locid < 0 || locid >= s->n_devices))
                lp.locid = 0;
        real_prop(&lp, &p);
        any_ctx(s);
        return s->be.fn.cuMemGetAllocationGranularity(granularity, &p, (CUmemAllocationGranularity_flags)option);
}

/* ---- mappings */

static CUresult map_real(struct lupw_session *s, const struct lupw_vmm_map *m, const struct lupw_vmm_alloc *a)
{
        any_ctx(s);
        return s->be.fn.cuMemMap(m->addr, m->size, m->offset, a->real, 0);
}

/* Gives the driver the access m records (none: nothing to set). */
static CUresult access_real(struct lupw_session *s, uint64_t addr, uint64_t size, uint32_t present, uint32_t prot)
{
        any_ctx(s);
        CUmemAccessDesc d[LUP_MAX_DEVICES];
        size_t n = 0;
        for (int dev = 0; dev < (int)LUP_MAX_DEVICES; dev++)
                if (present & (1u << dev))
                        d[n++] = (CUmemAccessDesc){
                                .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev },
                                .flags = (CUmemAccess_flags)((prot >> (2 * dev)) & 3),
                        };
        return n ? s->be.fn.cuMemSetAccess(addr, size, d, n) : CUDA_SUCCESS;
}

static int map_insert(struct lupw_session *s, const struct lupw_vmm_map *m)
{
        if (lup_array_grow((void **)&s->vmm.maps, &s->vmm.cap_maps, s->vmm.n_maps + 1, sizeof(*s->vmm.maps)) < 0)
                return -ENOMEM;
        size_t at = map_index(s, m->addr);
        memmove(&s->vmm.maps[at + 1], &s->vmm.maps[at], (s->vmm.n_maps - at) * sizeof(*m));
        s->vmm.maps[at] = *m;
        s->vmm.n_maps++;
        return 0;
}

/* The checks of a new mapping, in the driver's terms. */
static CUresult map_check(struct lupw_session *s, const struct lupw_vmm_map *m, struct lupw_vmm_alloc **ret)
{
        struct lupw_vmm_alloc *a = live_alloc(s, m->alloc);
        if (!a || m->size == 0 || m->addr % GRAN || m->size % GRAN || m->offset % GRAN)
                return CUDA_ERROR_INVALID_VALUE;
        /* Driver 580 maps whole allocations only ("offset: currently must be
         * zero"): any part of one, or an offset, is NOT_SUPPORTED, as it
         * answered on the H200 (tests/e2e/progs/e2e_vmm.c). */
        if (m->offset != 0 || m->size != a->size)
                return CUDA_ERROR_NOT_SUPPORTED;
        if (!find_resv(s, m->addr, m->size))
                return CUDA_ERROR_INVALID_VALUE; /* not inside one reservation of this session */
        size_t i = map_index(s, m->addr);
        if (i < s->vmm.n_maps && s->vmm.maps[i].addr < m->addr + m->size)
                return CUDA_ERROR_INVALID_VALUE; /* over a mapping */
        if (s->vmm.n_maps >= LUP_CKPT_MAX_VMM_MAPS)
                return CUDA_ERROR_OUT_OF_MEMORY;
        *ret = a;
        return CUDA_SUCCESS;
}

CUresult lupw_lupMemMap(struct lupw_session *s, int *device, unsigned long long ptr, size_t size, size_t offset,
                        unsigned long long handle, unsigned long long flags)
{
        struct lupw_vmm_map m = { .addr = ptr, .size = size, .offset = offset, .alloc = handle };
        struct lupw_vmm_alloc *a;
        if (flags != 0)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = map_check(s, &m, &a);
        if (r != CUDA_SUCCESS)
                return r;
        r = map_real(s, &m, a);
        if (r != CUDA_SUCCESS)
                return r;
        if (map_insert(s, &m) < 0) {
                s->be.fn.cuMemUnmap(ptr, size);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        a->maps++;
        *device = a->prop.locid;
        return CUDA_SUCCESS;
}

CUresult lupw_cuMemUnmap(struct lupw_session *s, unsigned long long ptr, size_t size)
{
        CUresult fail = CUDA_SUCCESS;
        size_t n;
        /* nothing mapped in a range of a reservation: done (driver 580 says
         * CUDA_SUCCESS) */
        size_t at = map_index(s, ptr);
        if (size && ptr + size > ptr && find_resv(s, ptr, size) &&
            (at >= s->vmm.n_maps || s->vmm.maps[at].addr >= ptr + size))
                return CUDA_SUCCESS;
        long first = tiling(s, ptr, size, &n);
        if (first < 0)
                return CUDA_ERROR_INVALID_VALUE; /* not whole mappings */
        any_ctx(s);
        for (size_t k = 0; k < n && fail == CUDA_SUCCESS; k++) {
                const struct lupw_vmm_map *m = &s->vmm.maps[first + (long)k];
                fail = s->be.fn.cuMemUnmap(m->addr, m->size);
                if (fail != CUDA_SUCCESS) {
                        lup_warn("session %s: cuMemUnmap of 0x%llx failed (%d)", s->name, (unsigned long long)m->addr,
                                 (int)fail);
                        n = k; /* the ones before are gone: forget them */
                }
        }
        for (size_t k = 0; k < n; k++) {
                struct lupw_vmm_alloc *a = find_alloc(s, s->vmm.maps[first].alloc);
                memmove(&s->vmm.maps[first], &s->vmm.maps[first + 1],
                        (s->vmm.n_maps - (size_t)first - 1) * sizeof(*s->vmm.maps));
                s->vmm.n_maps--;
                if (a) {
                        a->maps--;
                        alloc_put(s, a);
                }
        }
        return fail;
}

/* present: bit d for each device named; prot: 2 bits per device */
CUresult lupw_lupMemSetAccess(struct lupw_session *s, unsigned long long ptr, size_t size, unsigned int present,
                              unsigned int prot)
{
        size_t n;
        if (present == 0)
                return CUDA_ERROR_INVALID_VALUE;
        /* a device that does not exist: INVALID_VALUE, as driver 580 says */
        if (present >> LUP_MAX_DEVICES)
                return CUDA_ERROR_INVALID_VALUE;
        for (int d = 0; d < (int)LUP_MAX_DEVICES; d++) {
                uint32_t p = (prot >> (2 * d)) & 3;
                if (((present >> d) & 1) && d >= s->n_devices)
                        return CUDA_ERROR_INVALID_VALUE;
                if (p == 2 || (p && !((present >> d) & 1)))
                        return CUDA_ERROR_INVALID_VALUE;
        }
        long first = tiling(s, ptr, size, &n);
        if (first < 0)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = access_real(s, ptr, size, present, prot);
        if (r != CUDA_SUCCESS)
                return r;
        for (size_t k = 0; k < n; k++) {
                struct lupw_vmm_map *m = &s->vmm.maps[first + (long)k];
                for (int d = 0; d < (int)LUP_MAX_DEVICES; d++) {
                        if (!((present >> d) & 1))
                                continue;
                        m->present |= 1u << d;
                        m->prot = (m->prot & ~(3u << (2 * d))) | (prot & (3u << (2 * d)));
                }
        }
        return CUDA_SUCCESS;
}

CUresult lupw_lupMemGetAccess(struct lupw_session *s, unsigned long long *flags, int loctype, int locid,
                              unsigned long long ptr)
{
        if (loctype != CU_MEM_LOCATION_TYPE_DEVICE)
                return CUDA_ERROR_INVALID_VALUE;
        if (locid < 0 || locid >= s->n_devices)
                return CUDA_ERROR_INVALID_DEVICE;
        const struct lupw_vmm_map *m = find_map(s, ptr);
        if (!m)
                return CUDA_ERROR_INVALID_VALUE;
        *flags = (m->prot >> (2 * locid)) & 3;
        return CUDA_SUCCESS;
}

/* ---- checkpoint, restore, teardown */

int lupw_vmm_describe(const struct lupw_session *s, struct lup_ckpt_vmm *ret)
{
        const struct lupw_vmm *v = &s->vmm;
        struct lup_ckpt_vmm o = { .n_resv = (uint32_t)v->n_resv,
                                  .n_allocs = (uint32_t)v->n_allocs,
                                  .n_maps = (uint32_t)v->n_maps };
        o.resv = calloc(v->n_resv ? v->n_resv : 1, sizeof(*o.resv));
        o.allocs = calloc(v->n_allocs ? v->n_allocs : 1, sizeof(*o.allocs));
        o.maps = calloc(v->n_maps ? v->n_maps : 1, sizeof(*o.maps));
        if (!o.resv || !o.allocs || !o.maps) {
                lup_ckpt_vmm_free(&o);
                return -ENOMEM;
        }
        memcpy(o.resv, v->resv, v->n_resv * sizeof(*o.resv));
        for (size_t i = 0; i < v->n_allocs; i++) {
                const struct lupw_vmm_alloc *a = &v->allocs[i];
                o.allocs[i] = (struct lup_ckpt_vmm_alloc){
                        .id = a->id, .size = a->size, .home = a->home, .prop = a->prop, .refs = a->refs
                };
        }
        for (size_t i = 0; i < v->n_maps; i++) {
                const struct lupw_vmm_map *m = &v->maps[i];
                o.maps[i] = (struct lup_ckpt_vmm_map){ .addr = m->addr,
                                                       .size = m->size,
                                                       .offset = m->offset,
                                                       .alloc = m->alloc,
                                                       .present = m->present,
                                                       .prot = m->prot };
        }
        *ret = o;
        return 0;
}

static int restore_resv(struct lupw_session *s, const struct lup_ckpt_vmm *v, char *why, size_t whylen)
{
        if (v->n_resv && lup_array_grow((void **)&s->vmm.resv, &s->vmm.cap_resv, v->n_resv, sizeof(*s->vmm.resv)) < 0)
                return -ENOMEM;
        for (uint32_t i = 0; i < v->n_resv; i++) {
                const struct lup_ckpt_vmm_resv *r = &v->resv[i];
                if (arena_va_reserve_at(&s->mem.arena, r->addr, round_gran(r->size)) < 0) {
                        snprintf(why, whylen, "the reservation at 0x%" PRIx64 " is not free in the arena", r->addr);
                        return -EBADMSG;
                }
                s->vmm.resv[s->vmm.n_resv++] = *r;
        }
        return 0;
}

static int restore_allocs(struct lupw_session *s, const struct lup_ckpt_vmm *v, char *why, size_t whylen)
{
        if (v->n_allocs &&
            lup_array_grow((void **)&s->vmm.allocs, &s->vmm.cap_allocs, v->n_allocs, sizeof(*s->vmm.allocs)) < 0)
                return -ENOMEM;
        for (uint32_t i = 0; i < v->n_allocs; i++) {
                const struct lup_ckpt_vmm_alloc *c = &v->allocs[i];
                struct lupw_vmm_alloc a = {
                        .id = c->id, .size = c->size, .home = c->home, .prop = c->prop, .refs = c->refs
                };
                if (find_alloc(s, c->id) || prop_check(s, &c->prop) != CUDA_SUCCESS ||
                    arena_va_reserve_at(&s->mem.arena, c->home, c->size) < 0) {
                        snprintf(why, whylen,
                                 "the physical allocation %" PRIx64 " at 0x%" PRIx64
                                 " is repeated, impossible here or not free in the arena",
                                 c->id, c->home);
                        return -EBADMSG;
                }
                CUresult r = make_real(s, &a);
                if (r != CUDA_SUCCESS) {
                        arena_va_release(&s->mem.arena, c->home, c->size);
                        snprintf(why, whylen, "re-creating physical allocation %" PRIx64 " failed (CUresult %d)", c->id,
                                 (int)r);
                        return -EIO;
                }
                if (alloc_add(s, &a) < 0) {
                        lupw_unmap_chunk(s, a.home, a.size);
                        arena_va_release(&s->mem.arena, c->home, c->size);
                        return -ENOMEM;
                }
        }
        return 0;
}

static int restore_maps(struct lupw_session *s, const struct lup_ckpt_vmm *v, char *why, size_t whylen)
{
        for (uint32_t i = 0; i < v->n_maps; i++) {
                const struct lup_ckpt_vmm_map *c = &v->maps[i];
                struct lupw_vmm_map m = { .addr = c->addr,
                                          .size = c->size,
                                          .offset = c->offset,
                                          .alloc = c->alloc,
                                          .present = c->present,
                                          .prot = c->prot };
                struct lupw_vmm_alloc *a = find_alloc(s, c->alloc);
                /* a mapping may hold an allocation whose handles were all released */
                uint32_t refs = a ? a->refs : 0;
                if (a)
                        a->refs = 1;
                CUresult r = a ? map_check(s, &m, &a) : CUDA_ERROR_INVALID_VALUE;
                if (a)
                        a->refs = refs;
                if (r != CUDA_SUCCESS) {
                        snprintf(why, whylen, "the mapping at 0x%" PRIx64 " is impossible (CUresult %d)", c->addr,
                                 (int)r);
                        return -EBADMSG;
                }
                r = map_real(s, &m, a);
                if (r == CUDA_SUCCESS && (r = access_real(s, m.addr, m.size, m.present, m.prot)) != CUDA_SUCCESS)
                        s->be.fn.cuMemUnmap(m.addr, m.size);
                if (r != CUDA_SUCCESS) {
                        snprintf(why, whylen, "mapping 0x%" PRIx64 " again failed (CUresult %d)", c->addr, (int)r);
                        return -EIO;
                }
                if (map_insert(s, &m) < 0) {
                        s->be.fn.cuMemUnmap(m.addr, m.size);
                        return -ENOMEM;
                }
                a->maps++;
        }
        /* an allocation nothing holds was never saved */
        for (size_t i = 0; i < s->vmm.n_allocs; i++)
                if (s->vmm.allocs[i].refs == 0 && s->vmm.allocs[i].maps == 0) {
                        snprintf(why, whylen, "physical allocation %" PRIx64 " is held by nothing",
                                 s->vmm.allocs[i].id);
                        return -EBADMSG;
                }
        return 0;
}

int lupw_vmm_restore(struct lupw_session *s, const struct lup_ckpt_vmm *v, char *why, size_t whylen)
{
        int rc = restore_resv(s, v, why, whylen);
        if (rc == 0)
                rc = restore_allocs(s, v, why, whylen);
        if (rc == 0)
                rc = restore_maps(s, v, why, whylen);
        if (rc == -ENOMEM)
                snprintf(why, whylen, "out of memory");
        return rc;
}

void lupw_vmm_release(struct lupw_session *s)
{
        if (s->be.dl) {
                any_ctx(s);
                for (size_t i = 0; i < s->vmm.n_maps; i++)
                        s->be.fn.cuMemUnmap(s->vmm.maps[i].addr, s->vmm.maps[i].size);
                for (size_t i = 0; i < s->vmm.n_allocs; i++)
                        lupw_unmap_chunk(s, s->vmm.allocs[i].home, s->vmm.allocs[i].size);
        }
        free(s->vmm.resv);
        free(s->vmm.allocs);
        free(s->vmm.maps);
        lup_u64map_free(&s->vmm.ids);
        memset(&s->vmm, 0, sizeof(s->vmm));
}
