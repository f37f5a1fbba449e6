/* SPDX-License-Identifier: MIT */
/* MD2, HMAC-MD2 and the export-table integrity answer, against known vectors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "integrity.h"
#include "md2.h"

static void hex(const uint8_t *b, size_t n, char *out)
{
        for (size_t i = 0; i < n; i++)
                sprintf(out + 2 * i, "%02x", b[i]);
}

static void assert_md2(const char *msg, const char *want)
{
        uint8_t d[16];
        char got[33];

        lup_md2(msg, strlen(msg), d);
        hex(d, 16, got);
        assert_string_equal(got, want);
}

/* RFC 1319 appendix A.5 */
static void md2_rfc_vectors(void **state)
{
        (void)state;
        assert_md2("", "8350e5a3e24c153df2275c9f80692773");
        assert_md2("a", "32ec01ec4a6dac72c0ab96fb34c0b5d1");
        assert_md2("abc", "da853b0d3f88d99b30283a69e6ded6bb");
        assert_md2("message digest", "ab4f496bfb2a530b219ff33031fe06b0");
        assert_md2("abcdefghijklmnopqrstuvwxyz", "4e8ddff3650292ab5a4108c3aa47940b");
        assert_md2("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
                   "da33def2a42df13975352846c30338cd");
        assert_md2("12345678901234567890123456789012345678901234567890123456789012345678901234567890",
                   "d5976f79d83d3a0dc9806c3c66f3efd8");
}

/* Feeding in odd pieces gives the same digest as one call. */
static void md2_streaming(void **state)
{
        (void)state;
        const char *msg = "12345678901234567890123456789012345678901234567890123456789012345678901234567890";
        uint8_t a[16], b[16];
        struct lup_md2 m;

        lup_md2(msg, strlen(msg), a);
        lup_md2_init(&m);
        for (size_t off = 0, step = 1; off < strlen(msg); off += step, step = step % 7 + 1) {
                size_t n = strlen(msg) - off < step ? strlen(msg) - off : step;
                lup_md2_update(&m, msg + off, n);
        }
        lup_md2_final(&m, b);
        assert_memory_equal(a, b, 16);
}

/* The inputs of the research note's vectors (section 3.3): a 12.8 runtime. */
static const struct lupc_integrity_device dev0 = {
        .uuid = { 0x9a, 0xfe, 0x2b, 0x8a, 0xac, 0x25, 0x2d, 0x38, 0xea, 0x37, 0xae, 0xc5, 0x6d, 0x71, 0x32, 0x5f },
        .pci_domain = 0, .pci_bus = 2, .pci_device = 0,
};

static void answer_with(size_t ndev, const char *want)
{
        struct lupc_integrity_device devs[2] = { dev0, dev0 };
        struct lupc_integrity_input in = {
                .driver_version = 12080,
                .pid = 0x2fa423,
                .thread = 0xf79c1000,
                .cudart_table = 0x7ffff6958240ull,
                .integrity_table = 0x7ffff6958220ull,
                .integrity_fn = 0x7ffff2aaf4a0ull,
                .devices = devs,
                .n_devices = ndev,
        };
        uint8_t out[16];
        char got[33];

        assert_int_equal(lupc_integrity_answer(12082, 0x682b9cee, &in, out), 0);
        hex(out, 16, got);
        assert_string_equal(got, want);
}

static void integrity_hmac_vectors(void **state)
{
        (void)state;
        answer_with(0, "0779ef5e4ffa2dd207527503d1907bfa");
        answer_with(1, "4448a171b026cef76c8c3e39051b02dd");
        answer_with(2, "dd64fdddfb8087d5b6b0f8d079a98a2c");
}

/* version % 10 == 0 and == 1 are fixed answers, whatever the inputs. */
static void integrity_fixed_answers(void **state)
{
        (void)state;
        struct lupc_integrity_input in = { .driver_version = 13000, .pid = 1 };
        uint8_t out[16];
        char got[33];

        assert_int_equal(lupc_integrity_answer(13000, 12345, &in, out), 0);
        hex(out, 16, got);
        assert_string_equal(got, "5c67cb031c184133e8d14c1faa83d38e");
        assert_int_equal(lupc_integrity_answer(13011, 1, &in, out), 0);
        hex(out, 16, got);
        assert_string_equal(got, "5c67cb031c184118e8d14c1faa83d38e");
        /* %10 == 2: anything but the fixed answers, and it depends on the thread */
        uint8_t a[16], b[16];
        assert_int_equal(lupc_integrity_answer(13002, 1, &in, a), 0);
        in.thread = 7;
        assert_int_equal(lupc_integrity_answer(13002, 1, &in, b), 0);
        assert_memory_not_equal(a, b, 16);
}

static void integrity_too_many_devices(void **state)
{
        (void)state;
        struct lupc_integrity_input in = { .n_devices = LUPC_INTEGRITY_MAX_DEVICES + 1 };
        uint8_t out[16];

        assert_int_equal(lupc_integrity_answer(13002, 1, &in, out), -1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(md2_rfc_vectors),
                cmocka_unit_test(md2_streaming),
                cmocka_unit_test(integrity_hmac_vectors),
                cmocka_unit_test(integrity_fixed_answers),
                cmocka_unit_test(integrity_too_many_devices),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
