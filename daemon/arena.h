/* SPDX-License-Identifier: MIT */
/*
 * The session's device-address arena: a fixed VA range (reserved by the
 * worker, and by the client at the same address) in which every allocation
 * is placed. Large requests get their own granule-aligned chunks; small ones
 * (<= ARENA_SMALL_MAX) are carved from 2 MiB slabs by power-of-two class.
 *
 * This module is pure bookkeeping: the physical side (cuMemCreate/cuMemMap,
 * later export for hot restart) is done through the ops callbacks, so it is
 * unit-tested without a driver.
 */
#ifndef LUPD_ARENA_H
#define LUPD_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ARENA_SMALL_MIN 256u
#define ARENA_SMALL_MAX (1u << 20)

struct arena_ops {
        /* Back [addr, addr+size) with device memory of `device`.
         * Returns 0 or a positive CUresult (e.g. 2 = out of memory). */
        int (*map)(void *ud, uint64_t addr, uint64_t size, int device);
        void (*unmap)(void *ud, uint64_t addr, uint64_t size);
};

struct arena_slab;

struct arena_alloc {
        uint64_t addr;
        uint64_t size;          /* as requested */
        uint64_t chunk;         /* bytes of VA this allocation owns (0 for slab blocks) */
        int device;
        uint64_t owner;         /* the context id that allocated it */
        struct arena_slab *slab;
};

struct arena_range {
        uint64_t addr;
        uint64_t size;
};

struct arena {
        uint64_t base, size, granule;
        const struct arena_ops *ops;
        void *ud;
        struct arena_range *free_va;   /* sorted, coalesced */
        size_t n_free, cap_free;
        struct arena_alloc *allocs;    /* sorted by addr */
        size_t n_allocs, cap_allocs;
        struct arena_slab **slabs;
        size_t n_slabs, cap_slabs;
        uint64_t mapped_bytes;
};

int arena_init(struct arena *a, uint64_t base, uint64_t size, uint64_t granule,
               const struct arena_ops *ops, void *ud);
/* Unmaps everything still mapped and frees the bookkeeping. */
void arena_destroy(struct arena *a);

/* Returns 0, -ENOMEM (address space or bookkeeping exhausted, or
 * LUP_MAX_ALLOCS reached), -EINVAL (size 0), or a positive CUresult from map. */
int arena_alloc(struct arena *a, uint64_t size, int device, uint64_t owner, uint64_t *ret_addr);
/* Frees every allocation owned by `owner`; returns how many. */
size_t arena_free_owner(struct arena *a, uint64_t owner);
/* -ENOENT unless addr is the start of a live allocation. */
int arena_free(struct arena *a, uint64_t addr);
/* The live allocation containing p, or NULL. */
const struct arena_alloc *arena_find(const struct arena *a, uint64_t p);
bool arena_contains(const struct arena *a, uint64_t p);

/* ---- restoring an arena from a checkpoint: the same layout again */
/* A slab of `block`-byte blocks at addr (mapped through ops->map). */
int arena_import_slab(struct arena *a, uint64_t addr, uint32_t block, int device);
/* An allocation at addr: its own chunk when chunk != 0, else a block of the
 * slab that holds addr (imported first). 0, -ENOMEM, -EINVAL or a CUresult. */
int arena_import_alloc(struct arena *a, uint64_t addr, uint64_t size, uint64_t chunk, int device, uint64_t owner);
/* What a checkpoint must record to rebuild this arena. */
size_t arena_slab_count(const struct arena *a);
void arena_slab_info(const struct arena *a, size_t i, uint64_t *ret_addr, uint32_t *ret_block, int *ret_device);

/* ---- bare VA (the client's VMM reservations, the worker's home ranges of
 * its physical allocations): taken out of the free list, so no allocation
 * lands there, and never mapped through ops. */
/* size: a multiple of the granule; align: 0 (the granule) or a power of
 * two (raised to the granule); hint: used when [hint, hint + size) is free
 * and aligned, else the first fit. 0, -EINVAL (bad size or alignment) or
 * -ENOMEM (no free range that large). */
int arena_va_reserve(struct arena *a, uint64_t size, uint64_t align, uint64_t hint, uint64_t *ret_addr);
/* Exactly [addr, addr + size) (a restore): 0 or -EINVAL when not all free. */
int arena_va_reserve_at(struct arena *a, uint64_t addr, uint64_t size);
/* Gives a range that arena_va_reserve*() took back: 0, or -EINVAL when it
 * is not granular, outside the arena or overlaps free VA. */
int arena_va_release(struct arena *a, uint64_t addr, uint64_t size);

#endif
