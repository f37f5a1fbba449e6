/* SPDX-License-Identifier: MIT */
#include "u64map.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define TOMB UINT64_MAX

static size_t slot_of(uint64_t key, size_t cap)
{
        key ^= key >> 33;
        key *= 0xff51afd7ed558ccdull;
        key ^= key >> 33;
        return (size_t)key & (cap - 1);
}

void lup_u64map_init(struct lup_u64map *m, size_t limit)
{
        memset(m, 0, sizeof(*m));
        m->limit = limit;
}

void lup_u64map_free(struct lup_u64map *m)
{
        free(m->keys);
        free(m->vals);
        memset(m, 0, sizeof(*m));
}

static int rehash(struct lup_u64map *m, size_t ncap)
{
        uint64_t *nk = calloc(ncap, sizeof(*nk)), *nv = calloc(ncap, sizeof(*nv));
        if (!nk || !nv) {
                free(nk);
                free(nv);
                return -ENOMEM;
        }
        for (size_t i = 0; i < m->cap; i++) {
                uint64_t k = m->keys[i];
                if (k == 0 || k == TOMB)
                        continue;
                size_t j = slot_of(k, ncap);
                while (nk[j])
                        j = (j + 1) & (ncap - 1);
                nk[j] = k;
                nv[j] = m->vals[i];
        }
        free(m->keys);
        free(m->vals);
        m->keys = nk;
        m->vals = nv;
        m->cap = ncap;
        m->filled = m->used;
        return 0;
}

static long find(const struct lup_u64map *m, uint64_t key)
{
        if (!m->cap)
                return -1;
        size_t j = slot_of(key, m->cap);
        for (size_t n = 0; n < m->cap; n++) {
                uint64_t k = m->keys[j];
                if (k == 0)
                        return -1;
                if (k == key)
                        return (long)j;
                j = (j + 1) & (m->cap - 1);
        }
        return -1;
}

int lup_u64map_put(struct lup_u64map *m, uint64_t key, uint64_t val)
{
        if (key == 0 || key == TOMB)
                return -EINVAL;
        long at = find(m, key);
        if (at >= 0) {
                m->vals[at] = val;
                return 0;
        }
        if (m->used >= m->limit)
                return -ENOSPC;
        if ((m->filled + 1) * 4 > m->cap * 3) {
                size_t ncap = m->cap ? m->cap : 16;
                while ((m->used + 1) * 2 > ncap)
                        ncap *= 2;
                /* same size when tombstones filled it: churn must not grow it */
                int rc = rehash(m, ncap);
                if (rc < 0)
                        return rc;
        }
        size_t j = slot_of(key, m->cap);
        while (m->keys[j] != 0 && m->keys[j] != TOMB)
                j = (j + 1) & (m->cap - 1);
        if (m->keys[j] == 0)
                m->filled++;
        m->keys[j] = key;
        m->vals[j] = val;
        m->used++;
        return 0;
}

bool lup_u64map_get(const struct lup_u64map *m, uint64_t key, uint64_t *ret)
{
        long at = (key == 0 || key == TOMB) ? -1 : find(m, key);
        if (at < 0)
                return false;
        if (ret)
                *ret = m->vals[at];
        return true;
}

bool lup_u64map_del(struct lup_u64map *m, uint64_t key, uint64_t *ret)
{
        long at = (key == 0 || key == TOMB) ? -1 : find(m, key);
        if (at < 0)
                return false;
        if (ret)
                *ret = m->vals[at];
        m->keys[at] = TOMB;
        m->used--;
        return true;
}

void lup_u64map_each(const struct lup_u64map *m, void (*fn)(uint64_t key, uint64_t val, void *ud), void *ud)
{
        for (size_t i = 0; i < m->cap; i++)
                if (m->keys[i] != 0 && m->keys[i] != TOMB)
                        fn(m->keys[i], m->vals[i], ud);
}
