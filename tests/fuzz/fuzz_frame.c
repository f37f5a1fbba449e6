/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the frame codecs in common/frame.c: the first
 * LUP_HDR_SIZE bytes go to lup_hdr_decode(), the rest to lup_hello_decode().
 *
 * Beyond "no crash", it checks what the decoders promise their callers:
 *   - a header is accepted only within the limits (len, flags, lane, op,
 *     reserved bytes), and re-encodes to exactly the bytes it came from;
 *     a refused one is zeroed and has a reason;
 *   - a HELLO is accepted only with the right magic and version and a valid,
 *     NUL-terminated name, and re-encodes to exactly its input; a refused one
 *     leaves the output untouched and has a reason.
 */
/* the checks are the point of a fuzz target: keep assert() in every build type */
#undef NDEBUG
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_hdr(const uint8_t *in)
{
        static const struct lup_hdr zero;
        struct lup_hdr h;
        const char *why = "unset";

        memset(&h, 0xa5, sizeof(h));
        int rc = lup_hdr_decode(in, &h, &why);
        assert(rc == 0 || rc == -EBADMSG);
        if (rc < 0) {
                assert(why != NULL);
                assert(memcmp(&h, &zero, sizeof(h)) == 0);
                return;
        }
        assert(why == NULL);
        assert(h.len <= LUP_MAX_PAYLOAD);
        assert(h.lane < LUP_MAX_LANES);
        assert((h.flags & ~LUP_F_KNOWN) == 0);
        assert(h.op != 0);

        uint8_t again[LUP_HDR_SIZE];
        lup_hdr_encode(again, &h);
        assert(memcmp(again, in, LUP_HDR_SIZE) == 0);
}

static void check_hello(const uint8_t *p, size_t n)
{
        struct lup_hello h, untouched;
        const char *why = "unset";

        memset(&h, 0xa5, sizeof(h));
        untouched = h;
        int rc = lup_hello_decode(p, n, &h, &why);
        assert(rc == 0 || rc == -EBADMSG || rc == -EPROTO);
        if (rc < 0) {
                assert(why != NULL);
                assert(memcmp(&h, &untouched, sizeof(h)) == 0);
                return;
        }
        assert(why == NULL);
        assert(h.proto_version == LUP_PROTO_VERSION);
        size_t name_len = strnlen(h.name, sizeof(h.name));
        assert(name_len < sizeof(h.name)); /* NUL-terminated inside the array */
        assert(lup_session_name_valid(h.name, name_len));

        /* A HELLO has one encoding: what was accepted re-encodes to the input.
         * (Room for every optional field: the fixed part is 46 bytes, then
         * the name, 4 + 8 bytes, and a token with its u16 length.) */
        uint8_t again[64 + LUP_MAX_NAME + 2 + LUP_MAX_AUTH];
        size_t again_len = 0;
        assert(lup_hello_encode(again, sizeof(again), &h, &again_len) == 0);
        assert(again_len == n);
        assert(memcmp(again, p, n) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < LUP_HDR_SIZE)
                return 0;
        check_hdr(data);
        check_hello(data + LUP_HDR_SIZE, size - LUP_HDR_SIZE);
        return 0;
}
