/* SPDX-License-Identifier: MIT */
#include "hash.h"

#include <string.h>

static uint64_t mix(uint64_t h)
{
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 33;
        h *= 0xc4ceb9fe1a85ec53ull;
        h ^= h >> 33;
        return h;
}

/* Four independent lanes of 8-byte words, so the loop is not one long
 * multiply chain; the tail and the length are folded in at the end. */
uint64_t lup_hash64(const void *p, size_t n, uint64_t seed)
{
        const uint8_t *b = p;
        uint64_t l[4] = { seed ^ 0x9e3779b97f4a7c15ull, seed + 0x632be59bd9b4e019ull, seed ^ 0x85ebca77c2b2ae63ull,
                          seed - 0x27d4eb2f165667c5ull };
        size_t i = 0;
        for (; i + 32 <= n; i += 32) {
                for (int k = 0; k < 4; k++) {
                        uint64_t w;
                        memcpy(&w, b + i + 8 * k, 8);
                        l[k] = (l[k] ^ w) * 0x9e3779b97f4a7c15ull;
                        l[k] = (l[k] << 31) | (l[k] >> 33);
                }
        }
        uint64_t h = mix(l[0]) ^ mix(l[1] + 1) ^ mix(l[2] + 2) ^ mix(l[3] + 3);
        for (; i < n; i++)
                h = (h ^ b[i]) * 0x100000001b3ull;
        return mix(h ^ (uint64_t)n);
}
