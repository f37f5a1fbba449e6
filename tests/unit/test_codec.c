/* SPDX-License-Identifier: MIT */
/* Bounded reader/writer, frame header, HELLO and the control payload codecs. */
#include <errno.h>
#include <setjmp.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "buf.h"
#include "ctl_codec.h"
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
        b[4] = (uint8_t)LUP_PROTO_VERSION;

        /* the optional fields, in flag order: the avoid mask last */
        h.flags = LUP_HELLO_HEARTBEAT | LUP_HELLO_AVOID_SLOTS;
        h.heartbeat_ms = 500;
        h.avoid_slots = 0x8000000000000005ull;
        assert_int_equal(lup_hello_encode(b, sizeof(b), &h, &n), 0);
        assert_int_equal(lup_hello_decode(b, n, &o, &why), 0);
        assert_int_equal(o.heartbeat_ms, 500);
        assert_true(o.avoid_slots == 0x8000000000000005ull);
        assert_int_equal(lup_hello_decode(b, n - 1, &o, &why), -EBADMSG);
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

/* ---- control payloads
 *
 * Each legacy_* function is the hand-written encoder the codec replaced,
 * kept verbatim (shim/api_launch.c, shim/client.c, daemon/worker/hello.c,
 * daemon/worker/launch.c before the codecs): the codec must produce the
 * same bytes, so clients and daemons of either side keep talking. */

static void fill(void *p, size_t n, uint8_t seed)
{
        uint8_t *b = p;
        for (size_t i = 0; i < n; i++)
                b[i] = (uint8_t)(seed + i * 7);
}

static size_t legacy_hello_reply(uint8_t *buf, size_t cap, const struct lup_hello_reply *r)
{
        struct lup_wr w = lup_wr_init(buf, cap);
        lup_wr_u32(&w, LUP_PROTO_MAGIC);
        lup_wr_u32(&w, LUP_PROTO_VERSION);
        lup_wr_u32(&w, r->driver_version);
        lup_wr_u32(&w, r->backend);
        lup_wr_bytes(&w, r->token, LUP_TOKEN_SIZE);
        lup_wr_u64(&w, r->arena_base);
        lup_wr_u64(&w, LUP_ARENA_SIZE);
        lup_wr_u64(&w, r->last_executed);
        lup_wr_u32(&w, r->n_devices);
        for (uint32_t d = 0; d < r->n_devices; d++) {
                const struct lup_hello_dev *dev = &r->devs[d];
                lup_wr_str16(&w, dev->name, strnlen(dev->name, LUP_MAX_DEV_NAME - 1));
                lup_wr_bytes(&w, dev->uuid, 16);
                lup_wr_u64(&w, dev->total_mem);
                lup_wr_u32(&w, dev->n_attr);
                for (uint32_t a = 0; a < dev->n_attr; a++) {
                        lup_wr_i32(&w, dev->attr[a]);
                        lup_wr_u32(&w, dev->attr_res[a]);
                }
        }
        if (r->resend) {
                lup_wr_u64(&w, r->resend_from);
                lup_wr_u64(&w, r->tx_end);
        }
        assert_int_equal(w.err, 0);
        return w.len;
}

static struct lup_hello_dev test_devs[LUP_MAX_DEVICES], got_devs[LUP_MAX_DEVICES];

static struct lup_hello_reply sample_hello_reply(uint32_t n_devices, bool resend)
{
        struct lup_hello_reply r = {
                .driver_version = 13000,
                .backend = LUP_BACKEND_CUDA,
                .arena_base = LUP_ARENA_BASE + 3 * LUP_ARENA_SIZE,
                .arena_size = LUP_ARENA_SIZE,
                .last_executed = 77,
                .n_devices = n_devices,
                .devs = test_devs,
                .resend = resend,
                .resend_from = 1000,
                .tx_end = 5000,
        };
        memset(test_devs, 0, sizeof(test_devs));
        fill(r.token, sizeof(r.token), 3);
        for (uint32_t d = 0; d < n_devices; d++) {
                snprintf(test_devs[d].name, sizeof(test_devs[d].name), "NVIDIA H200 #%u", d);
                fill(test_devs[d].uuid, 16, (uint8_t)d);
                test_devs[d].total_mem = (140ull << 30) + d;
                test_devs[d].n_attr = d == 1 ? 0 : LUP_MAX_ATTRS - d;
                for (uint32_t a = 0; a < test_devs[d].n_attr; a++) {
                        test_devs[d].attr[a] = (int32_t)(a * 1000 - 5);
                        test_devs[d].attr_res[a] = a % 5 == 0 ? 1 : 0;
                }
        }
        return r;
}

static void hello_reply_roundtrip(void **state)
{
        static uint8_t a[1 << 16], b[1 << 16];
        for (int resend = 0; resend < 2; resend++) {
                struct lup_hello_reply r = sample_hello_reply(3, resend), o;
                struct lup_wr w = lup_wr_init(b, sizeof(b));
                const char *why;
                assert_int_equal(lup_hello_reply_encode(&w, &r), 0);
                size_t n = legacy_hello_reply(a, sizeof(a), &r);
                assert_int_equal(w.len, n);
                assert_memory_equal(a, b, n);

                assert_int_equal(lup_hello_reply_decode(b, n, resend, &o, got_devs, &why), 0);
                assert_null(why);
                assert_ptr_equal(o.devs, got_devs);
                assert_int_equal(o.n_devices, 3);
                assert_int_equal(o.driver_version, 13000);
                assert_int_equal(o.backend, LUP_BACKEND_CUDA);
                assert_memory_equal(o.token, r.token, LUP_TOKEN_SIZE);
                assert_int_equal(o.arena_base, r.arena_base);
                assert_int_equal(o.last_executed, 77);
                assert_int_equal(o.resend_from, resend ? 1000 : 0);
                assert_int_equal(o.tx_end, resend ? 5000 : 0);
                for (int d = 0; d < 3; d++) {
                        assert_string_equal(got_devs[d].name, test_devs[d].name);
                        assert_memory_equal(got_devs[d].uuid, test_devs[d].uuid, 16);
                        assert_int_equal(got_devs[d].total_mem, test_devs[d].total_mem);
                        assert_int_equal(got_devs[d].n_attr, test_devs[d].n_attr);
                        assert_memory_equal(got_devs[d].attr, test_devs[d].attr, test_devs[d].n_attr * 4);
                        assert_memory_equal(got_devs[d].attr_res, test_devs[d].attr_res, test_devs[d].n_attr * 4);
                }
                /* truncated, trailing bytes, the other resend setting */
                for (size_t k = 0; k < n; k += 7)
                        assert_int_equal(lup_hello_reply_decode(b, k, resend, &o, got_devs, &why), -EBADMSG);
                assert_int_equal(lup_hello_reply_decode(b, n - 1, resend, &o, got_devs, &why), -EBADMSG);
                assert_int_equal(lup_hello_reply_decode(b, n + 1, resend, &o, got_devs, &why), -EBADMSG);
                assert_int_equal(lup_hello_reply_decode(b, n, !resend, &o, got_devs, &why), -EBADMSG);
        }
}

static void hello_reply_limits(void **state)
{
        static uint8_t b[1 << 17];
        struct lup_hello_reply r = sample_hello_reply(LUP_MAX_DEVICES, true), o = { 0 };
        struct lup_wr w = lup_wr_init(b, sizeof(b));
        const char *why;
        assert_int_equal(lup_hello_reply_encode(&w, &r), 0);
        size_t n = w.len;
        assert_int_equal(lup_hello_reply_decode(b, n, true, &o, got_devs, &why), 0);
        assert_int_equal(o.n_devices, LUP_MAX_DEVICES);

        /* one device too many, on either side */
        r.n_devices = LUP_MAX_DEVICES + 1;
        w = lup_wr_init(b, sizeof(b));
        assert_int_equal(lup_hello_reply_encode(&w, &r), -EINVAL);
        r.n_devices = LUP_MAX_DEVICES;
        w = lup_wr_init(b, sizeof(b));
        lup_hello_reply_encode(&w, &r);
        lup_put32(b + 56, LUP_MAX_DEVICES + 1); /* the device count follows 14 u32s worth of header */
        o.n_devices = 99;
        assert_int_equal(lup_hello_reply_decode(b, n, true, &o, got_devs, &why), -EBADMSG);
        assert_int_equal(o.n_devices, 99); /* untouched on failure */
        lup_put32(b + 56, LUP_MAX_DEVICES);

        /* an attribute count past the limit */
        test_devs[0].n_attr = LUP_MAX_ATTRS + 1;
        w = lup_wr_init(b, sizeof(b));
        assert_int_equal(lup_hello_reply_encode(&w, &r), -EINVAL);
        test_devs[0].n_attr = LUP_MAX_ATTRS;
        w = lup_wr_init(b, sizeof(b));
        assert_int_equal(lup_hello_reply_encode(&w, &r), 0);
        size_t name_len = strlen(test_devs[0].name);
        lup_put32(b + 60 + 2 + name_len + 16 + 8, LUP_MAX_ATTRS + 1);
        assert_int_equal(lup_hello_reply_decode(b, w.len, true, &o, got_devs, &why), -EBADMSG);

        /* a device name of the longest length, then one byte more */
        memset(test_devs[0].name, 'x', LUP_MAX_DEV_NAME);
        test_devs[0].name[LUP_MAX_DEV_NAME] = 0;
        w = lup_wr_init(b, sizeof(b));
        assert_int_equal(lup_hello_reply_encode(&w, &r), 0);
        assert_int_equal(lup_hello_reply_decode(b, w.len, true, &o, got_devs, &why), 0);
        assert_int_equal(strlen(got_devs[0].name), LUP_MAX_DEV_NAME);
        lup_put16(b + 60, LUP_MAX_DEV_NAME + 1);
        assert_int_equal(lup_hello_reply_decode(b, w.len, true, &o, got_devs, &why), -EBADMSG);

        /* a buffer too small for the snapshot */
        w = lup_wr_init(b, 100);
        assert_int_equal(lup_hello_reply_encode(&w, &r), -ENOBUFS);
}

static void hello_reply_checks(void **state)
{
        uint8_t b[4096];
        struct lup_hello_reply r = sample_hello_reply(1, true), o;
        const char *why;
        struct lup_wr w;
#define ENC() (w = lup_wr_init(b, sizeof(b)), assert_int_equal(lup_hello_reply_encode(&w, &r), 0), w.len)
        size_t n = ENC();
        assert_int_equal(lup_hello_reply_decode(b, n, true, &o, got_devs, &why), 0);
        /* magic, version */
        b[0] ^= 1;
        assert_int_equal(lup_hello_reply_decode(b, n, true, &o, got_devs, &why), -EBADMSG);
        b[0] ^= 1;
        b[4] = 2;
        assert_int_equal(lup_hello_reply_decode(b, n, true, &o, got_devs, &why), -EBADMSG);
        /* the arena: below the base, off a slot boundary, past the last slot, in the hole of the PIE
         * executables (wire.h), another size */
        uint64_t bases[] = { LUP_ARENA_BASE - LUP_ARENA_SIZE, LUP_ARENA_BASE + 4096,
                             lup_arena_slot_base(LUP_ARENA_SLOTS - 1) + LUP_ARENA_SIZE,
                             LUP_ARENA_BASE + (uint64_t)LUP_ARENA_HOLE_FIRST * LUP_ARENA_SIZE,
                             0x555555554000ull & ~(LUP_ARENA_SIZE - 1) };
        for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
                r.arena_base = bases[i];
                n = ENC();
                assert_int_equal(lup_hello_reply_decode(b, n, true, &o, got_devs, &why), -EBADMSG);
        }
        r.arena_base = lup_arena_slot_base(LUP_ARENA_SLOTS - 1);
        n = ENC();
        assert_int_equal(lup_hello_reply_decode(b, n, true, &o, got_devs, &why), 0);
        /* every slot lies outside the hole, below the libraries' area, and none overlaps another */
        for (uint32_t k = 0; k < LUP_ARENA_SLOTS; k++) {
                uint64_t a = lup_arena_slot_base(k);
                assert_true(a + LUP_ARENA_SIZE <= 0x550000000000ull || a >= 0x580000000000ull);
                assert_true(a + LUP_ARENA_SIZE <= 0x700000000000ull);
                assert_int_equal(lup_arena_slot_of(a), (int)k);
                if (k)
                        assert_true(a >= lup_arena_slot_base(k - 1) + LUP_ARENA_SIZE);
        }
        r.arena_size = LUP_ARENA_SIZE / 2;
        n = ENC();
        assert_int_equal(lup_hello_reply_decode(b, n, true, &o, got_devs, &why), -EBADMSG);
        r.arena_size = LUP_ARENA_SIZE;
        /* resending from past the end */
        r.resend_from = r.tx_end + 1;
        n = ENC();
        assert_int_equal(lup_hello_reply_decode(b, n, true, &o, got_devs, &why), -EBADMSG);
        r.resend_from = r.tx_end;
        n = ENC();
        assert_int_equal(lup_hello_reply_decode(b, n, true, &o, got_devs, &why), 0);
        /* a NUL inside a device name */
        size_t name_off = 60 + 2;
        b[name_off + 1] = 0;
        assert_int_equal(lup_hello_reply_decode(b, n, true, &o, got_devs, &why), -EBADMSG);
#undef ENC
}

static void refusal_codec(void **state)
{
        uint8_t a[512], b[512];
        const char *msg = "the session is being restored elsewhere", *got;
        size_t n;
        /* as worker/hello.c wrote it: cut at 400 bytes */
        struct lup_wr w = lup_wr_init(b, sizeof(b)), lw = lup_wr_init(a, sizeof(a));
        lup_refusal_encode(&w, msg, 400);
        lup_wr_str16(&lw, msg, strnlen(msg, 400));
        assert_int_equal(w.len, lw.len);
        assert_memory_equal(a, b, w.len);
        lup_refusal_decode(b, w.len, 1024, &got, &n);
        assert_int_equal(n, strlen(msg));
        assert_memory_equal(got, msg, n);
        /* trailing bytes are ignored; cut short or too long reads as "" */
        lup_refusal_decode(b, w.len + 3, 1024, &got, &n);
        assert_int_equal(n, strlen(msg));
        lup_refusal_decode(b, w.len - 1, 1024, &got, &n);
        assert_int_equal(n, 0);
        assert_string_equal(got, "");
        lup_refusal_decode(b, w.len, 4, &got, &n);
        assert_int_equal(n, 0);
        static char longmsg[600];
        memset(longmsg, 'm', sizeof(longmsg) - 1);
        w = lup_wr_init(b, sizeof(b));
        lup_refusal_encode(&w, longmsg, 400);
        assert_int_equal(w.len, 402);
}

/* shim/api_launch.c before the codec */
static size_t legacy_launch(uint8_t *frame, size_t cap, const struct lup_launch *l, const uint8_t *params)
{
        struct lup_wr w = lup_wr_init(frame, cap);
        lup_wr_u64(&w, l->func);
        for (int i = 0; i < 3; i++)
                lup_wr_u32(&w, l->grid[i]);
        for (int i = 0; i < 3; i++)
                lup_wr_u32(&w, l->block[i]);
        lup_wr_u32(&w, l->shmem);
        lup_wr_u64(&w, l->stream);
        lup_wr_u32(&w, l->flags);
        lup_wr_u32(&w, l->n_attrs);
        for (unsigned int i = 0; i < l->n_attrs; i++) {
                lup_wr_u32(&w, l->attrs[i].id);
                lup_wr_bytes(&w, l->attrs[i].value, 64);
        }
        lup_wr_u32(&w, l->param_bytes);
        uint8_t *pb = lup_wr_reserve(&w, l->param_bytes);
        assert_non_null(pb);
        memcpy(pb, params, l->param_bytes);
        assert_int_equal(w.err, 0);
        assert_int_equal(w.len, 8 + 6 * 4 + 4 + 8 + 4 + 4 + (size_t)l->n_attrs * 68 + 4 + l->param_bytes);
        return w.len;
}

static struct lup_launch sample_launch(uint32_t n_attrs, uint32_t param_bytes)
{
        struct lup_launch l = { .func = LUP_FIRST_HANDLE_ID + 48,
                                .grid = { 1024, 2, 3 },
                                .block = { 256, 1, 1 },
                                .shmem = 49152,
                                .stream = LUP_FIRST_HANDLE_ID + 16,
                                .flags = LUP_LAUNCH_COOPERATIVE,
                                .n_attrs = n_attrs,
                                .param_bytes = param_bytes };
        for (uint32_t i = 0; i < n_attrs; i++) {
                l.attrs[i].id = i + 1;
                fill(l.attrs[i].value, LUP_LAUNCH_ATTR_VALUE, (uint8_t)(i * 3));
        }
        return l;
}

static void launch_roundtrip(void **state)
{
        static uint8_t a[LUP_LAUNCH_MAX_SIZE], b[LUP_LAUNCH_MAX_SIZE], params[LUP_MAX_PARAM_BYTES];
        const uint32_t shapes[][2] = { { 0, 0 }, { 0, 24 }, { 2, 8 }, { LUP_MAX_LAUNCH_ATTRS, LUP_MAX_PARAM_BYTES } };
        fill(params, sizeof(params), 11);
        for (size_t t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++) {
                struct lup_launch l = sample_launch(shapes[t][0], shapes[t][1]), o;
                struct lup_wr w = lup_wr_init(b, sizeof(b));
                uint8_t *pb = NULL;
                const char *why;
                assert_int_equal(lup_launch_encode(&w, &l, &pb), 0);
                assert_ptr_equal(pb, b + w.len - l.param_bytes);
                memcpy(pb, params, l.param_bytes);
                size_t n = legacy_launch(a, sizeof(a), &l, params);
                assert_int_equal(w.len, n);
                assert_memory_equal(a, b, n);

                assert_int_equal(lup_launch_decode(b, n, &o, &why), 0);
                assert_int_equal(o.func, l.func);
                assert_memory_equal(o.grid, l.grid, sizeof(l.grid));
                assert_memory_equal(o.block, l.block, sizeof(l.block));
                assert_int_equal(o.shmem, l.shmem);
                assert_int_equal(o.stream, l.stream);
                assert_int_equal(o.flags, l.flags);
                assert_int_equal(o.n_attrs, l.n_attrs);
                for (uint32_t i = 0; i < l.n_attrs; i++) {
                        assert_int_equal(o.attrs[i].id, l.attrs[i].id);
                        assert_memory_equal(o.attrs[i].value, l.attrs[i].value, LUP_LAUNCH_ATTR_VALUE);
                }
                assert_int_equal(o.param_bytes, l.param_bytes);
                assert_ptr_equal(o.params, pb); /* no copy of the parameters */
                for (size_t k = 0; k < n; k += (n > 4096 ? 97 : 1))
                        assert_int_equal(lup_launch_decode(b, k, &o, &why), -EBADMSG);
                assert_int_equal(lup_launch_decode(b, n - 1, &o, &why), -EBADMSG);
                assert_int_equal(lup_launch_decode(b, n + 1, &o, &why), -EBADMSG);
                assert_string_equal(why, "malformed LAUNCH frame");
        }
}

static void launch_limits(void **state)
{
        static uint8_t b[LUP_LAUNCH_MAX_SIZE + 64];
        struct lup_launch l = sample_launch(LUP_MAX_LAUNCH_ATTRS, 8), o;
        l.n_attrs = LUP_MAX_LAUNCH_ATTRS + 1;
        struct lup_wr w = lup_wr_init(b, sizeof(b));
        uint8_t *pb;
        const char *why;
        /* too many attributes or parameter bytes: refused before anything is written */
        assert_int_equal(lup_launch_encode(&w, &l, &pb), -EINVAL);
        assert_int_equal(w.len, 0);
        l = sample_launch(1, LUP_MAX_PARAM_BYTES + 1);
        assert_int_equal(lup_launch_encode(&w, &l, &pb), -EINVAL);
        /* the largest frame fits the shim's buffer exactly */
        l = sample_launch(LUP_MAX_LAUNCH_ATTRS, LUP_MAX_PARAM_BYTES);
        w = lup_wr_init(b, LUP_LAUNCH_MAX_SIZE);
        assert_int_equal(lup_launch_encode(&w, &l, &pb), 0);
        assert_int_equal(w.len, LUP_LAUNCH_MAX_SIZE);
        w = lup_wr_init(b, LUP_LAUNCH_MAX_SIZE - 1);
        assert_int_equal(lup_launch_encode(&w, &l, &pb), -ENOBUFS);

        /* decoding: 17 attributes, unknown flags, too many parameter bytes */
        l = sample_launch(2, 16);
        w = lup_wr_init(b, sizeof(b));
        assert_int_equal(lup_launch_encode(&w, &l, &pb), 0);
        memset(pb, 0, 16);
        size_t n = w.len;
        o.func = 5;
        lup_put32(b + 48, LUP_MAX_LAUNCH_ATTRS + 1);
        assert_int_equal(lup_launch_decode(b, n, &o, &why), -EBADMSG);
        assert_int_equal(o.func, 5); /* untouched on failure */
        lup_put32(b + 48, 2);
        lup_put32(b + 44, 2);
        assert_int_equal(lup_launch_decode(b, n, &o, &why), -EBADMSG);
        lup_put32(b + 44, LUP_LAUNCH_COOPERATIVE);
        assert_int_equal(lup_launch_decode(b, n, &o, &why), 0);
        /* a parameter length beyond the frame or the limit */
        lup_put32(b + 52 + 2 * 68, 17);
        assert_int_equal(lup_launch_decode(b, n, &o, &why), -EBADMSG);
        lup_put32(b + 52 + 2 * 68, UINT32_MAX);
        assert_int_equal(lup_launch_decode(b, n, &o, &why), -EBADMSG);
        l = sample_launch(0, LUP_MAX_PARAM_BYTES);
        w = lup_wr_init(b, sizeof(b));
        assert_int_equal(lup_launch_encode(&w, &l, &pb), 0);
        lup_wr_u32(&w, 0); /* four bytes more parameters than allowed */
        lup_put32(b + 52, LUP_MAX_PARAM_BYTES + 4);
        assert_int_equal(lup_launch_decode(b, w.len, &o, &why), -EBADMSG);
}

/* daemon/worker/launch.c before the codec */
static size_t legacy_func_info(uint8_t *buf, size_t cap, const struct lup_func_info *fi)
{
        struct lup_wr w = lup_wr_init(buf, cap);
        lup_wr_u32(&w, fi->n_params);
        for (uint32_t i = 0; i < fi->n_params; i++) {
                lup_wr_u32(&w, fi->params[2 * i]);
                lup_wr_u32(&w, fi->params[2 * i + 1]);
        }
        lup_wr_u32(&w, fi->n_attrs);
        for (uint32_t a = 0; a < fi->n_attrs; a++) {
                lup_wr_i32(&w, fi->attr[a]);
                lup_wr_u32(&w, fi->attr_res[a]);
        }
        assert_int_equal(w.err, 0);
        return w.len;
}

static void func_info_roundtrip(void **state)
{
        static uint8_t a[1 << 16], b[1 << 16];
        static uint32_t params[2 * LUP_MAX_PARAMS];
        const uint32_t counts[] = { 0, 3, LUP_MAX_PARAMS };
        for (size_t t = 0; t < sizeof(counts) / sizeof(counts[0]); t++) {
                struct lup_func_info fi = { .n_params = counts[t], .params = params, .n_attrs = 16 }, o;
                uint32_t end = 0;
                for (uint32_t i = 0; i < fi.n_params; i++) {
                        params[2 * i] = i * 8;
                        params[2 * i + 1] = i % 2 && i * 8 + 8 <= LUP_MAX_PARAM_BYTES ? 8 : 4;
                        end = params[2 * i] + params[2 * i + 1];
                }
                for (uint32_t i = 0; i < fi.n_attrs; i++) {
                        fi.attr[i] = (int32_t)i - 3;
                        fi.attr_res[i] = i == 9 ? 1 : 0;
                }
                struct lup_wr w = lup_wr_init(b, sizeof(b));
                const char *why;
                assert_int_equal(lup_func_info_encode(&w, &fi), 0);
                size_t n = legacy_func_info(a, sizeof(a), &fi);
                assert_int_equal(w.len, n);
                assert_int_equal(n, lup_func_info_size(fi.n_params, fi.n_attrs));
                assert_memory_equal(a, b, n);

                assert_int_equal(lup_func_info_decode(b, n, &o, &why), 0);
                assert_int_equal(o.n_params, fi.n_params);
                assert_memory_equal(o.params, params, fi.n_params * 8);
                assert_int_equal(o.param_bytes, end);
                assert_int_equal(o.n_attrs, 16);
                assert_memory_equal(o.attr, fi.attr, 16 * 4);
                assert_memory_equal(o.attr_res, fi.attr_res, 16 * 4);
                free(o.params);
                for (size_t k = 0; k < n; k += (n > 4096 ? 61 : 1))
                        assert_int_equal(lup_func_info_decode(b, k, &o, &why), -EBADMSG);
                assert_int_equal(lup_func_info_decode(b, n - 1, &o, &why), -EBADMSG);
                assert_int_equal(lup_func_info_decode(b, n + 1, &o, &why), -EBADMSG);
        }
}

static void func_info_limits(void **state)
{
        static uint8_t b[1 << 17];
        uint32_t params[2] = { LUP_MAX_PARAM_BYTES - 8, 8 };
        struct lup_func_info fi = { .n_params = 1, .params = params, .n_attrs = LUP_FUNC_INFO_MAX_ATTRS + 1 }, o;
        struct lup_wr w = lup_wr_init(b, sizeof(b));
        const char *why;
        assert_int_equal(lup_func_info_encode(&w, &fi), -EINVAL);
        /* a parameter ending at the limit, then past it */
        fi.n_attrs = 2;
        w = lup_wr_init(b, sizeof(b));
        assert_int_equal(lup_func_info_encode(&w, &fi), 0);
        assert_int_equal(lup_func_info_decode(b, w.len, &o, &why), 0);
        assert_int_equal(o.param_bytes, LUP_MAX_PARAM_BYTES);
        free(o.params);
        params[1] = 9;
        w = lup_wr_init(b, sizeof(b));
        assert_int_equal(lup_func_info_encode(&w, &fi), 0);
        assert_int_equal(lup_func_info_decode(b, w.len, &o, &why), -EBADMSG);
        /* offset + size wrapping 32 bits */
        params[0] = UINT32_MAX;
        params[1] = 2;
        w = lup_wr_init(b, sizeof(b));
        assert_int_equal(lup_func_info_encode(&w, &fi), 0);
        assert_int_equal(lup_func_info_decode(b, w.len, &o, &why), -EBADMSG);
        /* a parameter count past the limit */
        w = lup_wr_init(b, sizeof(b));
        lup_wr_u32(&w, LUP_MAX_PARAMS + 1);
        for (uint32_t i = 0; i < LUP_MAX_PARAMS + 1; i++) {
                lup_wr_u32(&w, 0);
                lup_wr_u32(&w, 4);
        }
        lup_wr_u32(&w, 0);
        assert_int_equal(lup_func_info_decode(b, w.len, &o, &why), -EBADMSG);
        /* more attributes than a reader keeps: read, the rest dropped */
        w = lup_wr_init(b, sizeof(b));
        lup_wr_u32(&w, 0);
        lup_wr_u32(&w, LUP_FUNC_INFO_MAX_ATTRS + 5);
        for (uint32_t a = 0; a < LUP_FUNC_INFO_MAX_ATTRS + 5; a++) {
                lup_wr_i32(&w, (int32_t)a);
                lup_wr_u32(&w, 0);
        }
        assert_int_equal(lup_func_info_decode(b, w.len, &o, &why), 0);
        assert_int_equal(o.n_attrs, LUP_FUNC_INFO_MAX_ATTRS);
        assert_int_equal(o.attr[LUP_FUNC_INFO_MAX_ATTRS - 1], LUP_FUNC_INFO_MAX_ATTRS - 1);
        free(o.params);
        /* the request */
        uint8_t req[LUP_FUNC_INFO_REQ_SIZE + 1], legacy[8];
        uint64_t f = 0;
        lup_func_info_req_encode(req, 0x1000030);
        lup_put64(legacy, 0x1000030);
        assert_memory_equal(req, legacy, 8);
        assert_int_equal(lup_func_info_req_decode(req, 8, &f, &why), 0);
        assert_int_equal(f, 0x1000030);
        assert_int_equal(lup_func_info_req_decode(req, 7, &f, &why), -EBADMSG);
        assert_int_equal(lup_func_info_req_decode(req, 9, &f, &why), -EBADMSG);
        assert_string_equal(why, "malformed FUNC_INFO frame");
}

static void copy_headers(void **state)
{
        /* as shim/client.c and daemon/worker/copy.c built them */
        uint8_t a[32], b[64 + LUP_BULK_CHUNK];
        const char *why;

        lup_htod_encode(b, LUP_ARENA_BASE + 5, 2);
        lup_put64(a, LUP_ARENA_BASE + 5);
        lup_put64(a + 8, 2);
        assert_memory_equal(a, b, LUP_HTOD_HDR_SIZE);
        struct lup_htod ht = { 0 };
        assert_int_equal(lup_htod_decode(b, LUP_HTOD_HDR_SIZE + 3, &ht, &why), 0);
        assert_int_equal(ht.dst, LUP_ARENA_BASE + 5);
        assert_int_equal(ht.stream, 2);
        assert_ptr_equal(ht.data, b + LUP_HTOD_HDR_SIZE);
        assert_int_equal(ht.n, 3);
        assert_int_equal(lup_htod_decode(b, LUP_HTOD_HDR_SIZE + LUP_BULK_CHUNK, &ht, &why), 0);
        ht.dst = 9;
        for (size_t k = 0; k <= LUP_HTOD_HDR_SIZE; k++)
                assert_int_equal(lup_htod_decode(b, k, &ht, &why), -EBADMSG); /* no data is malformed too */
        assert_int_equal(lup_htod_decode(b, LUP_HTOD_HDR_SIZE + LUP_BULK_CHUNK + 1, &ht, &why), -EBADMSG);
        assert_string_equal(why, "malformed MEMCPY_HTOD frame");
        assert_int_equal(ht.dst, 9);

        struct lup_dtoh d = { .src = LUP_ARENA_BASE, .size = 4096, .stream = 7, .token = 0x1000040 }, o;
        lup_dtoh_encode(b, &d);
        lup_put64(a, d.src);
        lup_put64(a + 8, d.size);
        lup_put64(a + 16, d.stream);
        assert_memory_equal(a, b, LUP_DTOH_SIZE);
        assert_int_equal(lup_dtoh_decode(b, LUP_DTOH_SIZE, &o, &why), 0);
        assert_int_equal(o.src, d.src);
        assert_int_equal(o.size, d.size);
        assert_int_equal(o.stream, d.stream);
        assert_int_equal(o.token, 0);
        assert_int_equal(lup_dtoh_decode(b, LUP_DTOH_SIZE - 1, &o, &why), -EBADMSG);
        assert_int_equal(lup_dtoh_decode(b, LUP_DTOH_SIZE + 1, &o, &why), -EBADMSG);
        assert_string_equal(why, "malformed MEMCPY_DTOH frame");
        lup_put64(b + 8, 0);
        assert_int_equal(lup_dtoh_decode(b, LUP_DTOH_SIZE, &o, &why), -EBADMSG);
        assert_string_equal(why, "absurd MEMCPY_DTOH size");
        lup_put64(b + 8, LUP_MAX_COPY + 1);
        assert_int_equal(lup_dtoh_decode(b, LUP_DTOH_SIZE, &o, &why), -EBADMSG);
        lup_put64(b + 8, LUP_MAX_COPY);
        assert_int_equal(lup_dtoh_decode(b, LUP_DTOH_SIZE, &o, &why), 0);

        lup_dtoh_async_encode(b, &d);
        lup_put64(a + 24, d.token);
        assert_memory_equal(a, b, LUP_DTOH_ASYNC_SIZE);
        assert_int_equal(lup_dtoh_async_decode(b, LUP_DTOH_ASYNC_SIZE, &o, &why), 0);
        assert_int_equal(o.token, d.token);
        assert_int_equal(o.size, d.size);
        assert_int_equal(lup_dtoh_async_decode(b, LUP_DTOH_ASYNC_SIZE - 1, &o, &why), -EBADMSG);
        assert_int_equal(lup_dtoh_async_decode(b, LUP_DTOH_ASYNC_SIZE + 1, &o, &why), -EBADMSG);
        lup_put64(b + 24, 0);
        assert_int_equal(lup_dtoh_async_decode(b, LUP_DTOH_ASYNC_SIZE, &o, &why), -EBADMSG);
        lup_put64(b + 24, 1);
        lup_put64(b + 8, 0);
        assert_int_equal(lup_dtoh_async_decode(b, LUP_DTOH_ASYNC_SIZE, &o, &why), -EBADMSG);
        lup_put64(b + 8, LUP_MAX_COPY + 1);
        assert_int_equal(lup_dtoh_async_decode(b, LUP_DTOH_ASYNC_SIZE, &o, &why), -EBADMSG);
        assert_string_equal(why, "malformed DTOH_ASYNC frame");

        struct lup_data da;
        lup_data_encode(b, 0x1000040, 1u << 20);
        lup_put64(a, 0x1000040);
        lup_put64(a + 8, 1u << 20);
        assert_memory_equal(a, b, LUP_DATA_HDR_SIZE);
        assert_int_equal(lup_data_decode(b, LUP_DATA_HDR_SIZE + 100, &da, &why), 0);
        assert_int_equal(da.token, 0x1000040);
        assert_int_equal(da.offset, 1u << 20);
        assert_int_equal(da.n, 100);
        assert_int_equal(lup_data_decode(b, LUP_DATA_HDR_SIZE, &da, &why), 0); /* an error ends a token without data */
        assert_int_equal(da.n, 0);
        assert_true(lup_data_short(LUP_DATA_HDR_SIZE - 1));
        assert_false(lup_data_short(LUP_DATA_HDR_SIZE));
        assert_int_equal(lup_data_decode(b, LUP_DATA_HDR_SIZE - 1, &da, &why), -EBADMSG);
        assert_string_equal(why, "short DATA frame");
}

static void blob_header(void **state)
{
        uint8_t a[24], b[64];
        struct lup_blob o;
        const char *why;

        lup_blob_encode(b, 0x1000050, 3 << 20, 1 << 20);
        lup_put64(a, 0x1000050);
        lup_put64(a + 8, 3 << 20);
        lup_put64(a + 16, 1 << 20);
        assert_memory_equal(a, b, LUP_BLOB_HDR_SIZE);
        assert_int_equal(lup_blob_decode(b, 40, &o, &why), 0);
        assert_int_equal(o.id, 0x1000050);
        assert_int_equal(o.total, 3 << 20);
        assert_int_equal(o.offset, 1 << 20);
        assert_ptr_equal(o.data, b + LUP_BLOB_HDR_SIZE);
        assert_int_equal(o.n, 16);
        for (size_t k = 0; k <= LUP_BLOB_HDR_SIZE; k++)
                assert_int_equal(lup_blob_decode(b, k, &o, &why), -EBADMSG);
        /* id 0, total 0, total past the limit; the limit itself is accepted */
        lup_put64(b, 0);
        assert_int_equal(lup_blob_decode(b, 40, &o, &why), -EBADMSG);
        lup_put64(b, 16);
        lup_put64(b + 8, 0);
        assert_int_equal(lup_blob_decode(b, 40, &o, &why), -EBADMSG);
        lup_put64(b + 8, LUP_MAX_BLOB + 1);
        assert_int_equal(lup_blob_decode(b, 40, &o, &why), -EBADMSG);
        assert_string_equal(why, "malformed BLOB frame");
        lup_put64(b + 8, LUP_MAX_BLOB);
        assert_int_equal(lup_blob_decode(b, 40, &o, &why), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(reader_bounds),         cmocka_unit_test(reader_trailing_bytes),
                cmocka_unit_test(reader_huge_length),    cmocka_unit_test(str16_rules),
                cmocka_unit_test(writer_overflow),       cmocka_unit_test(header_roundtrip_and_limits),
                cmocka_unit_test(hello_roundtrip),       cmocka_unit_test(session_names),
                cmocka_unit_test(hello_reply_roundtrip), cmocka_unit_test(hello_reply_limits),
                cmocka_unit_test(hello_reply_checks),    cmocka_unit_test(refusal_codec),
                cmocka_unit_test(launch_roundtrip),      cmocka_unit_test(launch_limits),
                cmocka_unit_test(func_info_roundtrip),   cmocka_unit_test(func_info_limits),
                cmocka_unit_test(copy_headers),          cmocka_unit_test(blob_header),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
