/* SPDX-License-Identifier: MIT */
#define LUP_LOG_CAT LUP_LOGC_SESSION
#include "arena.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "lupine/wire.h"

#define SLAB_MAX_BLOCKS (LUP_ARENA_GRANULE / ARENA_SMALL_MIN)

struct arena_slab {
        uint64_t addr;
        uint32_t block;         /* block size (a power of two) */
        uint32_t nblocks, used;
        int device;
        uint64_t bits[SLAB_MAX_BLOCKS / 64];
};

int arena_init(struct arena *a, uint64_t base, uint64_t size, uint64_t granule,
               const struct arena_ops *ops, void *ud)
{
        memset(a, 0, sizeof(*a));
        if (!granule || base % granule || size % granule || !size)
                return -EINVAL;
        a->base = base;
        a->size = size;
        a->granule = granule;
        a->ops = ops;
        a->ud = ud;
        if (lup_array_grow((void **)&a->free_va, &a->cap_free, 1, sizeof(*a->free_va)) < 0)
                return -ENOMEM;
        a->free_va[0] = (struct arena_range){ base, size };
        a->n_free = 1;
        return 0;
}

void arena_destroy(struct arena *a)
{
        for (size_t i = 0; i < a->n_allocs; i++)
                if (a->allocs[i].chunk)
                        a->ops->unmap(a->ud, a->allocs[i].addr, a->allocs[i].chunk);
        for (size_t i = 0; i < a->n_slabs; i++) {
                a->ops->unmap(a->ud, a->slabs[i]->addr, a->granule);
                free(a->slabs[i]);
        }
        free(a->free_va);
        free(a->allocs);
        free(a->slabs);
        memset(a, 0, sizeof(*a));
}

/* first fit over the sorted free list */
static int va_take(struct arena *a, uint64_t size, uint64_t *ret)
{
        for (size_t i = 0; i < a->n_free; i++) {
                struct arena_range *r = &a->free_va[i];
                if (r->size < size)
                        continue;
                *ret = r->addr;
                r->addr += size;
                r->size -= size;
                if (r->size == 0) {
                        memmove(r, r + 1, (a->n_free - i - 1) * sizeof(*r));
                        a->n_free--;
                }
                return 0;
        }
        return -ENOMEM;
}

static int va_give(struct arena *a, uint64_t addr, uint64_t size)
{
        size_t i = 0;
        while (i < a->n_free && a->free_va[i].addr < addr)
                i++;
        bool merge_prev = i > 0 && a->free_va[i - 1].addr + a->free_va[i - 1].size == addr;
        bool merge_next = i < a->n_free && addr + size == a->free_va[i].addr;
        if (merge_prev && merge_next) {
                a->free_va[i - 1].size += size + a->free_va[i].size;
                memmove(&a->free_va[i], &a->free_va[i + 1], (a->n_free - i - 1) * sizeof(*a->free_va));
                a->n_free--;
        } else if (merge_prev) {
                a->free_va[i - 1].size += size;
        } else if (merge_next) {
                a->free_va[i].addr = addr;
                a->free_va[i].size += size;
        } else {
                if (lup_array_grow((void **)&a->free_va, &a->cap_free, a->n_free + 1, sizeof(*a->free_va)) < 0)
                        return -ENOMEM; /* the range leaks from the arena; the session still works */
                memmove(&a->free_va[i + 1], &a->free_va[i], (a->n_free - i) * sizeof(*a->free_va));
                a->free_va[i] = (struct arena_range){ addr, size };
                a->n_free++;
        }
        return 0;
}

/* index of the last allocation with addr <= p, or -1 */
static long alloc_floor(const struct arena *a, uint64_t p)
{
        size_t lo = 0, hi = a->n_allocs;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (a->allocs[mid].addr <= p)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return (long)lo - 1;
}

static int record(struct arena *a, const struct arena_alloc *rec)
{
        if (lup_array_grow((void **)&a->allocs, &a->cap_allocs, a->n_allocs + 1, sizeof(*a->allocs)) < 0)
                return -ENOMEM;
        size_t at = (size_t)(alloc_floor(a, rec->addr) + 1);
        memmove(&a->allocs[at + 1], &a->allocs[at], (a->n_allocs - at) * sizeof(*a->allocs));
        a->allocs[at] = *rec;
        a->n_allocs++;
        return 0;
}

static uint32_t class_of(uint64_t size)
{
        uint32_t c = ARENA_SMALL_MIN;
        while (c < size)
                c <<= 1;
        return c;
}

static int slab_take(struct arena_slab *s, uint64_t *ret)
{
        for (uint32_t w = 0; w < (s->nblocks + 63) / 64; w++) {
                if (s->bits[w] == ~0ull)
                        continue;
                uint32_t b = (uint32_t)__builtin_ctzll(~s->bits[w]);
                uint32_t idx = w * 64 + b;
                if (idx >= s->nblocks)
                        break;
                s->bits[w] |= 1ull << b;
                s->used++;
                *ret = s->addr + (uint64_t)idx * s->block;
                return 0;
        }
        return -ENOSPC;
}

static int alloc_small(struct arena *a, uint64_t size, int device, uint64_t *ret_addr, struct arena_slab **ret_slab)
{
        uint32_t block = class_of(size);
        for (size_t i = 0; i < a->n_slabs; i++) {
                struct arena_slab *s = a->slabs[i];
                if (s->block == block && s->device == device && s->used < s->nblocks && slab_take(s, ret_addr) == 0) {
                        *ret_slab = s;
                        return 0;
                }
        }
        if (lup_array_grow((void **)&a->slabs, &a->cap_slabs, a->n_slabs + 1, sizeof(*a->slabs)) < 0)
                return -ENOMEM;
        struct arena_slab *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        uint64_t addr;
        if (va_take(a, a->granule, &addr) < 0) {
                free(s);
                return -ENOMEM;
        }
        int rc = a->ops->map(a->ud, addr, a->granule, device);
        if (rc != 0) {
                va_give(a, addr, a->granule);
                free(s);
                return rc;
        }
        a->mapped_bytes += a->granule;
        s->addr = addr;
        s->block = block;
        s->nblocks = (uint32_t)(a->granule / block);
        s->device = device;
        a->slabs[a->n_slabs++] = s;
        slab_take(s, ret_addr);
        *ret_slab = s;
        return 0;
}

static void slab_drop(struct arena *a, struct arena_slab *s)
{
        for (size_t i = 0; i < a->n_slabs; i++) {
                if (a->slabs[i] == s) {
                        a->slabs[i] = a->slabs[--a->n_slabs];
                        break;
                }
        }
        a->ops->unmap(a->ud, s->addr, a->granule);
        a->mapped_bytes -= a->granule;
        va_give(a, s->addr, a->granule);
        free(s);
}

int arena_alloc(struct arena *a, uint64_t size, int device, uint64_t owner, uint64_t *ret_addr)
{
        struct arena_alloc rec = { .size = size, .device = device, .owner = owner };
        int rc;

        if (size == 0)
                return -EINVAL;
        if (a->n_allocs >= LUP_MAX_ALLOCS || size > a->size)
                return -ENOMEM;
        if (size <= ARENA_SMALL_MAX) {
                rc = alloc_small(a, size, device, &rec.addr, &rec.slab);
                if (rc != 0)
                        return rc;
        } else {
                rec.chunk = (size + a->granule - 1) / a->granule * a->granule;
                if (va_take(a, rec.chunk, &rec.addr) < 0)
                        return -ENOMEM;
                rc = a->ops->map(a->ud, rec.addr, rec.chunk, device);
                if (rc != 0) {
                        va_give(a, rec.addr, rec.chunk);
                        return rc;
                }
                a->mapped_bytes += rec.chunk;
        }
        if (record(a, &rec) < 0) {
                /* undo: the caller sees out of memory and nothing stays mapped */
                if (rec.slab) {
                        uint64_t idx = (rec.addr - rec.slab->addr) / rec.slab->block;
                        rec.slab->bits[idx / 64] &= ~(1ull << (idx % 64));
                        if (--rec.slab->used == 0)
                                slab_drop(a, rec.slab);
                } else {
                        a->ops->unmap(a->ud, rec.addr, rec.chunk);
                        a->mapped_bytes -= rec.chunk;
                        va_give(a, rec.addr, rec.chunk);
                }
                return -ENOMEM;
        }
        *ret_addr = rec.addr;
        return 0;
}

int arena_free(struct arena *a, uint64_t addr)
{
        long i = alloc_floor(a, addr);
        if (i < 0 || a->allocs[i].addr != addr)
                return -ENOENT;
        struct arena_alloc rec = a->allocs[i];
        memmove(&a->allocs[i], &a->allocs[i + 1], (a->n_allocs - (size_t)i - 1) * sizeof(*a->allocs));
        a->n_allocs--;
        if (rec.slab) {
                struct arena_slab *s = rec.slab;
                uint64_t idx = (addr - s->addr) / s->block;
                s->bits[idx / 64] &= ~(1ull << (idx % 64));
                if (--s->used == 0)
                        slab_drop(a, s);
        } else {
                a->ops->unmap(a->ud, rec.addr, rec.chunk);
                a->mapped_bytes -= rec.chunk;
                va_give(a, rec.addr, rec.chunk);
        }
        return 0;
}

const struct arena_alloc *arena_find(const struct arena *a, uint64_t p)
{
        long i = alloc_floor(a, p);
        if (i < 0 || p - a->allocs[i].addr >= a->allocs[i].size)
                return NULL;
        return &a->allocs[i];
}

bool arena_contains(const struct arena *a, uint64_t p)
{
        return p >= a->base && p - a->base < a->size;
}

size_t arena_free_owner(struct arena *a, uint64_t owner)
{
        size_t n = 0;
        for (size_t i = a->n_allocs; i-- > 0;) {
                if (i < a->n_allocs && a->allocs[i].owner == owner) {
                        arena_free(a, a->allocs[i].addr);
                        n++;
                }
        }
        return n;
}

/* Takes exactly [addr, addr + size) out of the free list. */
static int va_take_exact(struct arena *a, uint64_t addr, uint64_t size)
{
        for (size_t i = 0; i < a->n_free; i++) {
                struct arena_range *r = &a->free_va[i];
                if (addr < r->addr || addr - r->addr > r->size || size > r->size - (addr - r->addr))
                        continue;
                uint64_t head = addr - r->addr, tail = r->size - head - size;
                if (head && tail) {
                        if (lup_array_grow((void **)&a->free_va, &a->cap_free, a->n_free + 1, sizeof(*a->free_va)) < 0)
                                return -ENOMEM;
                        r = &a->free_va[i];
                        memmove(r + 2, r + 1, (a->n_free - i - 1) * sizeof(*r));
                        r[1] = (struct arena_range){ addr + size, tail };
                        r->size = head;
                        a->n_free++;
                } else if (head) {
                        r->size = head;
                } else if (tail) {
                        r->addr = addr + size;
                        r->size = tail;
                } else {
                        memmove(r, r + 1, (a->n_free - i - 1) * sizeof(*r));
                        a->n_free--;
                }
                return 0;
        }
        return -EINVAL; /* not free: overlapping or outside the arena */
}

int arena_import_slab(struct arena *a, uint64_t addr, uint32_t block, int device)
{
        if (block < ARENA_SMALL_MIN || block > ARENA_SMALL_MAX || (block & (block - 1)) || addr % a->granule)
                return -EINVAL;
        if (lup_array_grow((void **)&a->slabs, &a->cap_slabs, a->n_slabs + 1, sizeof(*a->slabs)) < 0)
                return -ENOMEM;
        struct arena_slab *sl = calloc(1, sizeof(*sl));
        if (!sl)
                return -ENOMEM;
        int rc = va_take_exact(a, addr, a->granule);
        if (rc < 0) {
                free(sl);
                return rc;
        }
        rc = a->ops->map(a->ud, addr, a->granule, device);
        if (rc != 0) {
                va_give(a, addr, a->granule);
                free(sl);
                return rc;
        }
        a->mapped_bytes += a->granule;
        sl->addr = addr;
        sl->block = block;
        sl->nblocks = (uint32_t)(a->granule / block);
        sl->device = device;
        a->slabs[a->n_slabs++] = sl;
        return 0;
}

int arena_import_alloc(struct arena *a, uint64_t addr, uint64_t size, uint64_t chunk, int device, uint64_t owner)
{
        struct arena_alloc rec = { .addr = addr, .size = size, .chunk = chunk, .device = device, .owner = owner };
        if (size == 0 || a->n_allocs >= LUP_MAX_ALLOCS || arena_find(a, addr))
                return -EINVAL;
        if (chunk) {
                if (chunk % a->granule || size > chunk)
                        return -EINVAL;
                int rc = va_take_exact(a, addr, chunk);
                if (rc < 0)
                        return rc;
                rc = a->ops->map(a->ud, addr, chunk, device);
                if (rc != 0) {
                        va_give(a, addr, chunk);
                        return rc;
                }
                a->mapped_bytes += chunk;
        } else {
                struct arena_slab *sl = NULL;
                for (size_t i = 0; i < a->n_slabs && !sl; i++)
                        if (addr - a->slabs[i]->addr < a->granule)
                                sl = a->slabs[i];
                if (!sl || (addr - sl->addr) % sl->block || size > sl->block)
                        return -EINVAL;
                uint64_t idx = (addr - sl->addr) / sl->block;
                if (sl->bits[idx / 64] & (1ull << (idx % 64)))
                        return -EINVAL;
                sl->bits[idx / 64] |= 1ull << (idx % 64);
                sl->used++;
                rec.slab = sl;
        }
        return record(a, &rec);
}

size_t arena_slab_count(const struct arena *a)
{
        return a->n_slabs;
}

void arena_slab_info(const struct arena *a, size_t i, uint64_t *ret_addr, uint32_t *ret_block, int *ret_device)
{
        *ret_addr = a->slabs[i]->addr;
        *ret_block = a->slabs[i]->block;
        *ret_device = a->slabs[i]->device;
}

/* ---- bare VA */

int arena_va_reserve_at(struct arena *a, uint64_t addr, uint64_t size)
{
        if (!size || size % a->granule || addr % a->granule || !arena_contains(a, addr) ||
            size > a->size - (addr - a->base))
                return -EINVAL;
        return va_take_exact(a, addr, size);
}

int arena_va_reserve(struct arena *a, uint64_t size, uint64_t align, uint64_t hint, uint64_t *ret_addr)
{
        if (!size || size % a->granule || (align & (align - 1)))
                return -EINVAL;
        if (align < a->granule)
                align = a->granule;
        if (hint && hint % align == 0 && arena_va_reserve_at(a, hint, size) == 0) {
                *ret_addr = hint;
                return 0;
        }
        for (size_t i = 0; i < a->n_free; i++) {
                const struct arena_range *r = &a->free_va[i];
                uint64_t start = (r->addr + align - 1) & ~(align - 1);
                if (start < r->addr || start - r->addr > r->size || size > r->size - (start - r->addr))
                        continue;
                int rc = va_take_exact(a, start, size);
                if (rc == 0)
                        *ret_addr = start;
                return rc == -EINVAL ? -ENOMEM : rc;
        }
        return -ENOMEM;
}

int arena_va_release(struct arena *a, uint64_t addr, uint64_t size)
{
        if (!size || size % a->granule || addr % a->granule || !arena_contains(a, addr) ||
            size > a->size - (addr - a->base))
                return -EINVAL;
        for (size_t i = 0; i < a->n_free; i++) {
                const struct arena_range *r = &a->free_va[i];
                if (r->addr < addr + size && addr < r->addr + r->size)
                        return -EINVAL;
        }
        return va_give(a, addr, size);
}
