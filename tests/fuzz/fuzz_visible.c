/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for lupc_visible_parse() and lupc_visible_none()
 * (shim/visible.c): CUDA_VISIBLE_DEVICES against the server's devices.
 *
 * Input: a byte n (taken mod LUP_MAX_DEVICES + 1), n 16-byte UUIDs, then
 * the list itself (up to its first NUL). It checks what the shim relies on:
 *   - the answer is -EINVAL or a count in 0..n;
 *   - the map names distinct devices, each below n;
 *   - unset means every device, in order;
 *   - a list lupc_visible_none() calls hopeless names no device, whatever
 *     the devices (the shim then answers without asking the server).
 */
/* the checks are the point of a fuzz target: keep assert() in every build type */
#undef NDEBUG
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "visible.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        uint8_t uuids[LUP_MAX_DEVICES][16];
        int map[LUP_MAX_DEVICES];

        if (size < 1)
                return 0;
        int n = data[0] % (int)(LUP_MAX_DEVICES + 1);
        if (size < 1 + 16 * (size_t)n)
                return 0;
        memcpy(uuids, data + 1, 16 * (size_t)n);
        size_t len = size - 1 - 16 * (size_t)n;
        char *spec = malloc(len + 1);
        assert(spec);
        memcpy(spec, data + 1 + 16 * (size_t)n, len);
        spec[len] = 0;

        int k = lupc_visible_parse(spec, (const uint8_t(*)[16])uuids, n, map);
        assert(k == -EINVAL || (k >= 0 && k <= n));
        for (int i = 0; i < k; i++) {
                assert(map[i] >= 0 && map[i] < n);
                for (int j = 0; j < i; j++)
                        assert(map[i] != map[j]);
        }
        if (lupc_visible_none(spec))
                assert(k == 0);
        assert(lupc_visible_parse(NULL, (const uint8_t(*)[16])uuids, n, map) == n);
        for (int i = 0; i < n; i++)
                assert(map[i] == i);
        free(spec);
        return 0;
}
