/* SPDX-License-Identifier: MIT */
#include "rangemap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* index of the last range with base <= p, or -1 */
static long floor_index(const struct lup_rangemap *m, uint64_t p)
{
        size_t lo = 0, hi = m->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (m->r[mid].base <= p)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return (long)lo - 1;
}

int lup_rangemap_add(struct lup_rangemap *m, const struct lup_range *range)
{
        uint64_t end;
        if (range->size == 0 || __builtin_add_overflow(range->base, range->size, &end))
                return -EINVAL;
        long i = floor_index(m, range->base);
        if ((i >= 0 && range->base - m->r[i].base < m->r[i].size) ||
            ((size_t)(i + 1) < m->n && m->r[i + 1].base < end))
                return -EEXIST;
        if (m->n == m->cap) {
                size_t ncap = m->cap ? m->cap * 2 : 64;
                struct lup_range *nr = realloc(m->r, ncap * sizeof(*nr));
                if (!nr)
                        return -ENOMEM;
                m->r = nr;
                m->cap = ncap;
        }
        size_t at = (size_t)(i + 1);
        memmove(&m->r[at + 1], &m->r[at], (m->n - at) * sizeof(*m->r));
        m->r[at] = *range;
        m->n++;
        return 0;
}

int lup_rangemap_remove(struct lup_rangemap *m, uint64_t base, struct lup_range *ret)
{
        long i = floor_index(m, base);
        if (i < 0 || m->r[i].base != base)
                return -ENOENT;
        if (ret)
                *ret = m->r[i];
        memmove(&m->r[i], &m->r[i + 1], (m->n - (size_t)i - 1) * sizeof(*m->r));
        m->n--;
        return 0;
}

bool lup_rangemap_find(const struct lup_rangemap *m, uint64_t p, struct lup_range *ret)
{
        long i = floor_index(m, p);
        if (i < 0 || p - m->r[i].base >= m->r[i].size)
                return false;
        if (ret)
                *ret = m->r[i];
        return true;
}

void lup_rangemap_filter(struct lup_rangemap *m, bool (*keep)(const struct lup_range *r, void *ud), void *ud)
{
        size_t j = 0;
        for (size_t i = 0; i < m->n; i++)
                if (keep(&m->r[i], ud))
                        m->r[j++] = m->r[i];
        m->n = j;
}

void lup_rangemap_free(struct lup_rangemap *m)
{
        free(m->r);
        memset(m, 0, sizeof(*m));
}
