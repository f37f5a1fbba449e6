/* SPDX-License-Identifier: MIT */
/*
 * A sorted set of non-overlapping address ranges, each with two 64-bit
 * payload words, looked up by any address inside a range (binary search).
 * The shim keeps device allocations and registered host memory in these.
 * Not thread-safe: callers lock.
 */
#ifndef LUP_RANGEMAP_H
#define LUP_RANGEMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct lup_range {
        uint64_t base;
        uint64_t size;
        uint64_t a, b;          /* the owner's payload */
};

struct lup_rangemap {
        struct lup_range *r;
        size_t n, cap;
};

/* The span of rows rows of count*mul bytes, pitch bytes apart, from the
 * first byte of the first row to the last of the last (0: nothing to
 * touch): what the shim and the worker check a 2-D range against. -1 when
 * it overflows, or when rows overlap (pitch below the row). */
static inline int lup_span2d(uint64_t count, uint64_t mul, uint64_t pitch, uint64_t rows, uint64_t *ret_span)
{
        uint64_t w, span;
        if (__builtin_mul_overflow(count, mul, &w))
                return -1;
        if (w == 0 || rows == 0) {
                *ret_span = 0;
                return 0;
        }
        if (rows > 1 && pitch < w)
                return -1;
        if (__builtin_mul_overflow(pitch, rows - 1, &span) || __builtin_add_overflow(span, w, &span))
                return -1;
        *ret_span = span;
        return 0;
}

/* -EEXIST if it overlaps a range already present, -EINVAL for size 0, -ENOMEM. */
int lup_rangemap_add(struct lup_rangemap *m, const struct lup_range *range);
/* Removes the range starting exactly at base; -ENOENT if there is none. */
int lup_rangemap_remove(struct lup_rangemap *m, uint64_t base, struct lup_range *ret);
/* The range containing p. */
bool lup_rangemap_find(const struct lup_rangemap *m, uint64_t p, struct lup_range *ret);
/* Removes every range for which keep() is false. */
void lup_rangemap_filter(struct lup_rangemap *m, bool (*keep)(const struct lup_range *r, void *ud), void *ud);
void lup_rangemap_free(struct lup_rangemap *m);

#endif
