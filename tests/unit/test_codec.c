/* SPDX-License-Identifier: MIT */
/* Bounded reader/writer, frame header and HELLO codec. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "buf.h"
#include "frame.h"

static void reader_bounds(void **state)
{
        uint8_t b[11] = { 1, 2, 0, 3, 0, 0, 0, 4, 0, 0, 0 };
        struct lup_rd r = lup_rd_init(b, sizeof(b));
        uint8_t u8;
        uint16_t u16;
        uint32_t u32;
        uint64_t u64 = 99;

        assert_int_equal(lup_rd_u8(&r, &u8), 0);
        assert_int_equal(u8, 1);
        assert_int_equal(lup_rd_u16(&r, &u16), 0);
        assert_int_equal(u16, 2);
        assert_int_equal(lup_rd_u32(&r, &u32), 0);
        assert_int_equal(u32, 3);
        /* 4 bytes left: a u64 does not fit, output is zeroed, error latches */
        assert_int_equal(lup_rd_u64(&r, &u64), -EBADMSG);
        assert_int_equal(u64, 0);
        assert_int_equal(lup_rd_u8(&r, &u8), -EBADMSG);
        assert_int_equal(u8, 0);
        assert_int_equal(lup_rd_finish(&r), -EBADMSG);
}

static void reader_trailing_bytes(void **state)
{
        uint8_t b[5] = { 0 };
        struct lup_rd r = lup_rd_init(b, sizeof(b));
        uint32_t v;
        assert_int_equal(lup_rd_u32(&r, &v), 0);
        assert_int_equal(lup_rd_finish(&r), -EBADMSG);
        uint8_t x;
        lup_rd_u8(&r, &x);
        assert_int_equal(lup_rd_finish(&r), 0);
}

static void reader_huge_length(void **state)
{
        uint8_t b[8] = { 0 };
        struct lup_rd r = lup_rd_init(b, sizeof(b));
        const uint8_t *p = (const uint8_t *)1;
        assert_int_equal(lup_rd_bytes(&r, SIZE_MAX, &p), -EBADMSG);
        assert_null(p);
}

static void str16_rules(void **state)
{
        uint8_t b[64];
        struct lup_wr w = lup_wr_init(b, sizeof(b));
        lup_wr_str16(&w, "abc", 3);
        struct lup_rd r = lup_rd_init(b, w.len);
        const char *s;
        size_t n;
        assert_int_equal(lup_rd_str16(&r, 16, &s, &n), 0);
        assert_int_equal(n, 3);
        assert_memory_equal(s, "abc", 3);
        /* longer than the caller's maximum */
        r = lup_rd_init(b, w.len);
        assert_int_equal(lup_rd_str16(&r, 2, &s, &n), -EBADMSG);
        /* embedded NUL */
        w = lup_wr_init(b, sizeof(b));
        lup_wr_str16(&w, "a\0c", 3);
        r = lup_rd_init(b, w.len);
        assert_int_equal(lup_rd_str16(&r, 16, &s, &n), -EBADMSG);
        /* length prefix beyond the buffer */
        b[0] = 200;
        b[1] = 0;
        r = lup_rd_init(b, 10);
        assert_int_equal(lup_rd_str16(&r, 255, &s, &n), -EBADMSG);
}

static void writer_overflow(void **state)
{
        uint8_t b[6];
        struct lup_wr w = lup_wr_init(b, sizeof(b));
        lup_wr_u32(&w, 1);
        assert_int_equal(w.err, 0);
        lup_wr_u32(&w, 2);
        assert_int_equal(w.err, -ENOBUFS);
        assert_int_equal(w.len, 4);
        lup_wr_u8(&w, 3); /* nothing more after an overflow */
        assert_int_equal(w.len, 4);
}

static void header_roundtrip_and_limits(void **state)
{
        uint8_t b[LUP_HDR_SIZE];
        struct lup_hdr h = { .len = 123, .op = 260, .flags = LUP_F_SYNC, .lane = 7, .status = 2,
                             .seq = 0x1122334455667788ull, .ctx = 0x10000 }, o;
        const char *why;
        lup_hdr_encode(b, &h);
        assert_int_equal(b[0], 123); /* little-endian length first */
        assert_int_equal(lup_hdr_decode(b, &o, &why), 0);
        assert_memory_equal(&h, &o, sizeof(h));

        h.len = LUP_MAX_PAYLOAD + 1;
        lup_hdr_encode(b, &h);
        assert_int_equal(lup_hdr_decode(b, &o, &why), -EBADMSG);
        assert_string_equal(why, "frame length exceeds the limit");
        h.len = LUP_MAX_PAYLOAD; /* the boundary itself is accepted */
        lup_hdr_encode(b, &h);
        assert_int_equal(lup_hdr_decode(b, &o, &why), 0);

        h.flags = 0x80;
        lup_hdr_encode(b, &h);
        assert_int_equal(lup_hdr_decode(b, &o, &why), -EBADMSG);
        h.flags = 0;
        h.lane = LUP_MAX_LANES;
        lup_hdr_encode(b, &h);
        assert_int_equal(lup_hdr_decode(b, &o, &why), -EBADMSG);
        h.lane = 0;
        h.op = 0;
        lup_hdr_encode(b, &h);
        assert_int_equal(lup_hdr_decode(b, &o, &why), -EBADMSG);
        h.op = 1;
        lup_hdr_encode(b, &h);
        b[39] = 1; /* reserved must be zero */
        assert_int_equal(lup_hdr_decode(b, &o, &why), -EBADMSG);
}

static void hello_roundtrip(void **state)
{
        struct lup_hello h = { .proto_version = LUP_PROTO_VERSION, .cuda_version = 13000, .last_seq_seen = 42 }, o;
        uint8_t b[512];
        size_t n;
        const char *why;
        strcpy(h.name, "train-job_01.a");
        memset(h.token, 0xaa, sizeof(h.token));
        assert_int_equal(lup_hello_encode(b, sizeof(b), &h, &n), 0);
        assert_int_equal(lup_hello_decode(b, n, &o, &why), 0);
        assert_string_equal(o.name, h.name);
        assert_int_equal(o.last_seq_seen, 42);
        assert_memory_equal(o.token, h.token, sizeof(h.token));

        /* every truncation is rejected */
        for (size_t k = 0; k < n; k++)
                assert_int_equal(lup_hello_decode(b, k, &o, &why), -EBADMSG);
        /* trailing garbage */
        assert_int_equal(lup_hello_decode(b, n + 1, &o, &why), -EBADMSG);
        /* wrong magic, wrong version */
        b[0] ^= 1;
        assert_int_equal(lup_hello_decode(b, n, &o, &why), -EPROTO);
        b[0] ^= 1;
        b[4] = 9;
        assert_int_equal(lup_hello_decode(b, n, &o, &why), -EPROTO);
        assert_string_equal(why, "unsupported protocol version");
}

static void session_names(void **state)
{
        char long_name[LUP_MAX_NAME + 2];
        memset(long_name, 'a', sizeof(long_name));
        assert_true(lup_session_name_valid("a", 1));
        assert_true(lup_session_name_valid(long_name, LUP_MAX_NAME));
        assert_false(lup_session_name_valid(long_name, LUP_MAX_NAME + 1));
        assert_false(lup_session_name_valid("", 0));
        assert_false(lup_session_name_valid("a/b", 3));
        assert_false(lup_session_name_valid("a b", 3));
        assert_false(lup_session_name_valid("..\n", 3));
        struct lup_hello h = { .proto_version = 1 };
        uint8_t b[512];
        size_t n;
        strcpy(h.name, "bad name");
        assert_int_equal(lup_hello_encode(b, sizeof(b), &h, &n), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(reader_bounds),
                cmocka_unit_test(reader_trailing_bytes),
                cmocka_unit_test(reader_huge_length),
                cmocka_unit_test(str16_rules),
                cmocka_unit_test(writer_overflow),
                cmocka_unit_test(header_roundtrip_and_limits),
                cmocka_unit_test(hello_roundtrip),
                cmocka_unit_test(session_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
