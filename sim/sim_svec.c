/* SPDX-License-Identifier: MIT */
/*
 * A vector of (key, obj) kept sorted by key. It backs the handle tables
 * (keys are ids, handed out in increasing order, so inserts append) and
 * the address maps (keys are start addresses of non-overlapping ranges,
 * so "which range holds addr" is one binary search).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

/* First index whose key is > key. */
static size_t upper_bound(const struct sim_svec *v, uint64_t key)
{
        size_t lo = 0, hi = v->n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (v->items[mid].key <= key)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

int sim_svec_insert(struct sim_svec *v, uint64_t key, void *obj)
{
        size_t pos;

        if (v->n >= v->max)
                return -ENOSPC;
        pos = upper_bound(v, key);
        if (pos > 0 && v->items[pos - 1].key == key)
                return -EEXIST;
        if (v->n == v->cap) {
                size_t cap = v->cap ? v->cap * 2 : 16;
                struct sim_svec_entry *items;

                if (cap > v->max)
                        cap = v->max;
                items = realloc(v->items, cap * sizeof(*items));
                if (!items)
                        return -ENOMEM;
                v->items = items;
                v->cap = cap;
        }
        memmove(&v->items[pos + 1], &v->items[pos], (v->n - pos) * sizeof(v->items[0]));
        v->items[pos] = (struct sim_svec_entry){ .key = key, .obj = obj };
        v->n++;
        return 0;
}

long sim_svec_find_le(const struct sim_svec *v, uint64_t key)
{
        return (long)upper_bound(v, key) - 1;
}

void *sim_svec_get(const struct sim_svec *v, uint64_t key)
{
        long i = sim_svec_find_le(v, key);

        if (i < 0 || v->items[i].key != key)
                return NULL;
        return v->items[i].obj;
}

void sim_svec_remove_at(struct sim_svec *v, size_t idx)
{
        if (idx >= v->n)
                return;
        memmove(&v->items[idx], &v->items[idx + 1], (v->n - idx - 1) * sizeof(v->items[0]));
        v->n--;
}

int sim_svec_remove(struct sim_svec *v, uint64_t key)
{
        long i = sim_svec_find_le(v, key);

        if (i < 0 || v->items[i].key != key)
                return -ENOENT;
        sim_svec_remove_at(v, (size_t)i);
        return 0;
}
