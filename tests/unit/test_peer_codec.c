/* SPDX-License-Identifier: MIT */
/* Copies between servers: the PEER_EXPECT / PEER_PUSH payloads
 * (common/peer_codec.h) and the peer HELLO (common/frame.h). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "frame.h"
#include "peer_codec.h"

static void expect_codec(void **state)
{
        (void)state;
        uint8_t b[LUP_PEER_EXPECT_SIZE + 1] = { 0 };
        struct lup_peer_expect o;
        const char *why;
        lup_peer_expect_encode(b, &(struct lup_peer_expect){ .dst = 0x200000001000ull, .size = 12345 });
        assert_int_equal(lup_peer_expect_decode(b, LUP_PEER_EXPECT_SIZE, &o, &why), 0);
        assert_true(o.dst == 0x200000001000ull && o.size == 12345);
        assert_int_equal(lup_peer_expect_decode(b, LUP_PEER_EXPECT_SIZE - 1, &o, &why), -EBADMSG);
        assert_int_equal(lup_peer_expect_decode(b, LUP_PEER_EXPECT_SIZE + 1, &o, &why), -EBADMSG);
        /* size 0 and above LUP_MAX_COPY are refused */
        lup_peer_expect_encode(b, &(struct lup_peer_expect){ .dst = 1, .size = 0 });
        assert_int_equal(lup_peer_expect_decode(b, LUP_PEER_EXPECT_SIZE, &o, &why), -EBADMSG);
        lup_peer_expect_encode(b, &(struct lup_peer_expect){ .dst = 1, .size = LUP_MAX_COPY + 1 });
        assert_int_equal(lup_peer_expect_decode(b, LUP_PEER_EXPECT_SIZE, &o, &why), -EBADMSG);
        assert_string_equal(why, "malformed PEER_EXPECT");
}

static void push_codec(void **state)
{
        (void)state;
        struct lup_peer_push p = { .src = 0x210000000000ull, .size = 1u << 20, .dst = 0x200000000000ull }, o;
        uint8_t b[LUP_PEER_PUSH_MAX];
        const char *why;
        memset(p.t.ticket, 0xab, LUP_TICKET_SIZE);
        strcpy(p.t.key, ".t0123456789abcdef.job.p1");
        strcpy(p.endpoint, "tls://gpu-b.example:14833");
        size_t n = lup_peer_push_encode(b, sizeof(b), &p);
        assert_true(n > 0);
        assert_int_equal(lup_peer_push_decode(b, n, &o, &why), 0);
        assert_memory_equal(&o, &p, sizeof(o));
        for (size_t k = 0; k < n; k++) /* every truncation */
                assert_int_equal(lup_peer_push_decode(b, k, &o, &why), -EBADMSG);
        /* a key that is not a session name, an empty endpoint */
        strcpy(p.t.key, "job/../x");
        n = lup_peer_push_encode(b, sizeof(b), &p);
        assert_int_equal(lup_peer_push_decode(b, n, &o, &why), -EBADMSG);
        strcpy(p.t.key, "job");
        p.endpoint[0] = 0;
        n = lup_peer_push_encode(b, sizeof(b), &p);
        assert_int_equal(lup_peer_push_decode(b, n, &o, &why), -EBADMSG);
        assert_string_equal(why, "malformed PEER_PUSH");
        /* the ticket reply alone */
        struct lup_peer_ticket t = { 0 }, to;
        strcpy(t.key, "job");
        n = lup_peer_ticket_encode(b, sizeof(b), &t);
        assert_int_equal(n, LUP_TICKET_SIZE + 2 + 3);
        assert_int_equal(lup_peer_ticket_decode(b, n, &to, &why), 0);
        assert_string_equal(to.key, "job");
        assert_int_equal(lup_peer_ticket_decode(b, n + 1, &to, &why), -EBADMSG);
        assert_int_equal(lup_peer_ticket_encode(b, LUP_TICKET_SIZE, &t), 0); /* does not fit */
}

static void result_codec(void **state)
{
        (void)state;
        struct lup_peer_result r = { .outcome = LUP_PEER_RETRY, .status = 0 }, o;
        uint8_t b[LUP_PEER_PUSH_REPLY_MAX];
        const char *why;
        strcpy(r.msg, "gpu-b:14833 refused the copy: unknown or expired peer-copy ticket");
        size_t n = lup_peer_result_encode(b, sizeof(b), &r);
        assert_int_equal(lup_peer_result_decode(b, n, &o, &why), 0);
        assert_int_equal(o.outcome, LUP_PEER_RETRY);
        assert_string_equal(o.msg, r.msg);
        r.outcome = 2; /* no such outcome */
        n = lup_peer_result_encode(b, sizeof(b), &r);
        assert_int_equal(lup_peer_result_decode(b, n, &o, &why), -EBADMSG);
}

static void peer_hello(void **state)
{
        (void)state;
        struct lup_hello h = { .proto_version = LUP_PROTO_VERSION, .flags = LUP_HELLO_PEER }, o;
        uint8_t b[512];
        size_t n;
        const char *why;
        strcpy(h.name, ".t0123456789abcdef.job");
        memset(h.peer_ticket, 0x5a, LUP_TICKET_SIZE);
        assert_int_equal(lup_hello_encode(b, sizeof(b), &h, &n), 0);
        assert_int_equal(lup_hello_decode(b, n, &o, &why), 0);
        assert_memory_equal(o.peer_ticket, h.peer_ticket, LUP_TICKET_SIZE);
        assert_int_equal(lup_hello_decode(b, n - 1, &o, &why), -EBADMSG);
        /* a peer HELLO with any other flag is refused */
        h.flags = LUP_HELLO_PEER | LUP_HELLO_HEARTBEAT;
        h.heartbeat_ms = 1000;
        assert_int_equal(lup_hello_encode(b, sizeof(b), &h, &n), 0);
        assert_int_equal(lup_hello_decode(b, n, &o, &why), -EBADMSG);
        assert_string_equal(why, "a peer HELLO carries no other flag");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(expect_codec),
                cmocka_unit_test(push_codec),
                cmocka_unit_test(result_codec),
                cmocka_unit_test(peer_hello),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
