/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the directory provider's two small records on disk: the
 * COMMITTED marker (dir_commit.c) and the lease record (dir_lease.c). On a
 * store that several hosts share, another host (or a damaged disk) wrote
 * them: hostile input. The first byte picks the record (even: marker, odd:
 * lease), the rest is the record. Beyond "no read past the input", it
 * checks what the provider relies on:
 *   - the result is 0 or -EBADMSG, and the output is untouched unless 0;
 *   - an accepted marker names a valid session; an accepted lease is free
 *     ("") or held by a valid owner with a non-zero token;
 *   - encoding what was decoded gives the input back byte for byte (so no
 *     two inputs decode alike, and nothing is ignored).
 */
/* the checks are the point of a fuzz target: keep assert() in every build type */
#undef NDEBUG
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "dir_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void marker(const uint8_t *data, size_t size)
{
        struct dir_marker m, junk;
        uint8_t buf[DIR_MARKER_MAX];
        size_t n;

        memset(&m, 0xa5, sizeof(m));
        junk = m;
        int rc = dir_marker_decode(data, size, &m);
        if (rc != 0) {
                assert(rc == -EBADMSG);
                assert(memcmp(&m, &junk, sizeof(m)) == 0);
                return;
        }
        assert(dir_session_valid(m.session, &n));
        int len = dir_marker_encode(&m, buf, sizeof(buf));
        assert(len > 0 && (size_t)len == size && memcmp(buf, data, size) == 0);
}

static void lease(const uint8_t *data, size_t size)
{
        struct lupine_ckpt_lease l, junk;
        uint8_t buf[DIR_LEASE_MAX];
        size_t n;

        memset(&l, 0xa5, sizeof(l));
        junk = l;
        int rc = dir_lease_decode(data, size, &l);
        if (rc != 0) {
                assert(rc == -EBADMSG);
                assert(memcmp(&l, &junk, sizeof(l)) == 0);
                return;
        }
        assert(l.owner[0] == '\0' || (dir_session_valid(l.owner, &n) && l.token != 0));
        int len = dir_lease_encode(&l, buf, sizeof(buf));
        assert(len > 0 && (size_t)len == size && memcmp(buf, data, size) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size == 0)
                return 0;
        if (data[0] & 1)
                lease(data + 1, size - 1);
        else
                marker(data + 1, size - 1);
        return 0;
}
