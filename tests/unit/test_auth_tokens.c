/* SPDX-License-Identifier: MIT */
/* daemon/auth_tokens.c: the --auth-tokens parser, token lookup, session keys. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <stdio.h>

#include "auth_tokens.h"

/* printf %s alice-token | sha256sum; printf %s bob-token | sha256sum */
#define ALICE_HASH "1f9bd3b5c7b4e4f9b12c6a4e8b1d5f0f6cfb2be4b2e1bd26bb3d3ef6e0cb7a11"

static void parses_lines_and_comments(void **state)
{
        (void)state;
        const char text[] = "# tenants\n\n  alice " ALICE_HASH "  \r\nbob\t" ALICE_HASH "\n";
        struct lupd_tokens t = { 0 };
        char err[200];

        assert_int_equal(lupd_tokens_parse(&t, text, strlen(text), err, sizeof(err)), 0);
        assert_int_equal(t.n, 2);
        assert_string_equal(t.t[0].tenant, "alice");
        assert_string_equal(t.t[1].tenant, "bob");
        assert_int_equal(t.t[0].hash[0], 0x1f);
        lupd_tokens_free(&t);
}

static void refuses_bad_lines(void **state)
{
        (void)state;
        const char *bad[] = { "alice\n",
                              "alice 1234\n",
                              "al ice " ALICE_HASH "\n",
                              "alice " ALICE_HASH " extra\n",
                              "ali/ce " ALICE_HASH "\n",
                              "alice " ALICE_HASH "zz\n",
                              "# only a comment\n",
                              "" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct lupd_tokens t = { 0 };
                char err[200] = "";
                assert_int_equal(lupd_tokens_parse(&t, bad[i], strlen(bad[i]), err, sizeof(err)), -EINVAL);
                assert_true(err[0] != 0);
                assert_null(t.t);
        }
        char hex[80];
        memcpy(hex, ALICE_HASH, 65);
        hex[10] = 'g';
        char line[120];
        snprintf(line, sizeof(line), "alice %s\n", hex);
        struct lupd_tokens t = { 0 };
        char err[200];
        assert_int_equal(lupd_tokens_parse(&t, line, strlen(line), err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "hex"));
}

static void looks_tokens_up(void **state)
{
        (void)state;
        /* sha256("alice-token") */
        const char text[] = "alice 5d3ad4c0b7b4e0a0a7b4d6d4b5c85c0e33e7e8b1e3c2f7f5d1d1b8d1e9c0a6b2\n"
                            "bob " ALICE_HASH "\n";
        struct lupd_tokens t = { 0 };
        char err[200];

        assert_int_equal(lupd_tokens_parse(&t, text, strlen(text), err, sizeof(err)), 0);
        assert_null(lupd_tokens_tenant(&t, (const uint8_t *)"nope", 4));
        /* a hash is matched, not the token's text: set bob's hash to a known token's */
        static const uint8_t abc[32] = { 0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40,
                                         0xde, 0x5d, 0xae, 0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17,
                                         0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad };
        memcpy(t.t[1].hash, abc, 32); /* SHA-256("abc") */
        const char *who = lupd_tokens_tenant(&t, (const uint8_t *)"abc", 3);
        assert_non_null(who);
        assert_string_equal(who, "bob");
        lupd_tokens_free(&t);
}

static void session_keys(void **state)
{
        (void)state;
        char key[129], key2[129];
        const char *why;
        char name[129];

        assert_int_equal(lupd_session_key("", "job", key, sizeof(key), &why), 0);
        assert_string_equal(key, "job");
        assert_int_equal(lupd_key_tenant_len(key), 0);
        assert_int_equal(lupd_session_key("alice", "job", key, sizeof(key), &why), 0);
        assert_int_equal(strncmp(key, ".t", 2), 0);
        assert_int_equal(strlen(key), 19 + 3);
        assert_string_equal(key + 19, "job");
        assert_int_equal(lupd_key_tenant_len(key), 19);
        assert_int_equal(lupd_session_key("bob", "job", key2, sizeof(key2), &why), 0);
        assert_string_not_equal(key, key2);
        assert_int_equal(lupd_session_key("alice", ".hidden", key, sizeof(key), &why), -EINVAL);
        assert_non_null(strstr(why, "reserved"));
        assert_int_equal(lupd_session_key("", ".t0123456789abcdef.job", key, sizeof(key), &why), -EINVAL);
        memset(name, 'a', 109);
        name[109] = 0;
        assert_int_equal(lupd_session_key("alice", name, key, sizeof(key), &why), 0);
        name[109] = 'a';
        name[110] = 0;
        assert_int_equal(lupd_session_key("alice", name, key, sizeof(key), &why), -ENAMETOOLONG);
        assert_true(lupd_tenant_valid("alice@example.com", 17));
        assert_false(lupd_tenant_valid("", 0));
        assert_false(lupd_tenant_valid("a b", 3));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(parses_lines_and_comments),
                cmocka_unit_test(refuses_bad_lines),
                cmocka_unit_test(looks_tokens_up),
                cmocka_unit_test(session_keys),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
