/* SPDX-License-Identifier: MIT */
/*
 * A small open-addressing hash map from non-zero 64-bit keys to 64-bit
 * values (handle ids -> entries, cache keys -> answers). Not thread-safe:
 * callers lock. Grows by doubling up to a caller-given entry limit.
 */
#ifndef LUP_U64MAP_H
#define LUP_U64MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct lup_u64map {
        uint64_t *keys;         /* 0 = empty, UINT64_MAX = deleted */
        uint64_t *vals;
        size_t cap;             /* power of two */
        size_t used;            /* live entries */
        size_t filled;          /* live + deleted */
        size_t limit;           /* most live entries allowed */
};

void lup_u64map_init(struct lup_u64map *m, size_t limit);
void lup_u64map_free(struct lup_u64map *m);
/* Inserts or replaces. -EINVAL for key 0 or UINT64_MAX, -ENOSPC at the limit, -ENOMEM. */
int lup_u64map_put(struct lup_u64map *m, uint64_t key, uint64_t val);
bool lup_u64map_get(const struct lup_u64map *m, uint64_t key, uint64_t *ret);
bool lup_u64map_del(struct lup_u64map *m, uint64_t key, uint64_t *ret);
/* Calls fn for each live entry; fn may not modify the map. */
void lup_u64map_each(const struct lup_u64map *m, void (*fn)(uint64_t key, uint64_t val, void *ud), void *ud);

#endif
