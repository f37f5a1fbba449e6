/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the authentication path of the handshake: the
 * --auth-tokens parser and the token lookup (daemon/auth_tokens.c), the
 * bearer token in a HELLO (common/frame.c) and in an NVML request
 * (common/nvml_codec.c), and the tenant's session keys, in the order the
 * supervisor runs them (supervisor/auth.c, conn.c, nvml.c).
 *
 * Input: u16 L (little-endian), then L bytes of token-file text (fewer if
 * the input ends first), then the rest R. R is decoded as a HELLO payload
 * and, the same bytes, as an NVML request. Seeds: make_corpus.py.
 *
 * Each run:
 *   1. parses the text into table A;
 *   2. decodes R as a HELLO; with a bearer token, looks it up in A, then in
 *      table B: the text with one more line, "NAME HASH", NAME being the
 *      HELLO's session name (at most 64 bytes of it) and HASH the token's
 *      SHA-256, so that the lookup has a hit to find whatever the text;
 *   3. makes the session key of the name for the anonymous tenant and for
 *      the tenant found, and takes its tenant part;
 *   4. decodes R as an NVML request; with a token, looks it up in A and
 *      makes the tenant's key prefix as supervisor/nvml.c does.
 *
 * It checks what the supervisor relies on:
 *   - a parsed table has 1..LUPD_MAX_TOKENS entries, each with a valid,
 *     NUL-terminated tenant; a refused text leaves the table empty and says
 *     why;
 *   - a lookup returns NULL or the tenant of an entry whose hash is the
 *     token's SHA-256 (the last such line), never a near miss, and NULL when
 *     no line has it;
 *   - a key fits LUP_MAX_NAME; it begins with ".t" exactly when the tenant
 *     is not anonymous (then it is ".t<16 hex>.NAME", its tenant part is 19
 *     bytes and depends only on the tenant); the anonymous tenant's key is
 *     the name itself and never begins with '.'; a name beginning with '.'
 *     is refused for every tenant; the key needs exactly strlen + 1 bytes;
 *   - a HELLO or NVML token is 1..LUP_MAX_AUTH bytes, inside the input.
 */
/* the checks are the point of a fuzz target: keep assert() in every build type */
#undef NDEBUG
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "auth_tokens.h"
#include "frame.h"
#include "nvml_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void sha256(const void *p, size_t n, uint8_t out[32])
{
        unsigned len = 32;
        assert(EVP_Digest(p, n, out, &len, EVP_sha256(), NULL) == 1 && len == 32);
}

static bool is_hex(char c)
{
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* A parse result: rc, the table, the error text. */
static void check_table(int rc, const struct lupd_tokens *t, const char *err)
{
        assert(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
        if (rc < 0) {
                assert(err[0] != 0);
                assert(t->t == NULL && t->n == 0 && t->cap == 0);
                return;
        }
        assert(t->n >= 1 && t->n <= LUPD_MAX_TOKENS && t->n <= t->cap);
        for (size_t i = 0; i < t->n; i++) {
                const char *ten = t->t[i].tenant;
                size_t len = strnlen(ten, sizeof(t->t[i].tenant));
                assert(len < sizeof(t->t[i].tenant));
                assert(lupd_tenant_valid(ten, len));
        }
}

/* Looks token up in t and checks the answer against every line. */
static const char *lookup(const struct lupd_tokens *t, const uint8_t *tok, size_t n)
{
        uint8_t h[32];
        const char *found = lupd_tokens_tenant(t, tok, n);
        size_t last = SIZE_MAX;

        sha256(tok, n, h);
        for (size_t i = 0; i < t->n; i++)
                if (memcmp(t->t[i].hash, h, 32) == 0)
                        last = i;
        if (last == SIZE_MAX)
                assert(found == NULL);
        else
                assert(found == t->t[last].tenant);
        return found;
}

static void check_key(const char *tenant, const char *name)
{
        char key[LUP_MAX_NAME + 1], small[LUP_MAX_NAME + 1], other[LUP_MAX_NAME + 1];
        const char *why = "unset";
        int rc = lupd_session_key(tenant, name, key, sizeof(key), &why);

        assert(rc == 0 || rc == -EINVAL || rc == -ENAMETOOLONG);
        if (name[0] == '.') {
                assert(rc == -EINVAL && why != NULL);
                return;
        }
        if (rc < 0) {
                /* only a tenant's key can outgrow LUP_MAX_NAME: the name fits it */
                assert(rc == -ENAMETOOLONG && tenant[0] && why != NULL);
                assert(19 + strlen(name) > LUP_MAX_NAME);
                return;
        }
        assert(why == NULL);
        size_t len = strlen(key);
        assert(len <= LUP_MAX_NAME);
        size_t tl = lupd_key_tenant_len(key);
        if (!tenant[0]) {
                assert(strcmp(key, name) == 0);
                assert(key[0] != '.' && tl == 0);
        } else {
                assert(key[0] == '.' && key[1] == 't' && key[18] == '.' && tl == 19);
                for (int i = 2; i < 18; i++)
                        assert(is_hex(key[i]));
                assert(strcmp(key + 19, name) == 0);
                /* the tenant part depends on the tenant only */
                assert(lupd_session_key(tenant, "x", other, sizeof(other), &why) == 0);
                assert(lupd_key_tenant_len(other) == 19 && memcmp(other, key, 19) == 0);
        }
        /* exactly strlen + 1 bytes: one fewer is refused, NUL-terminated */
        assert(lupd_session_key(tenant, name, small, len + 1, &why) == 0 && strcmp(small, key) == 0);
        memset(small, 0x5a, sizeof(small));
        assert(lupd_session_key(tenant, name, small, len, &why) == -ENAMETOOLONG);
        assert(memchr(small, 0, len) != NULL);
}

/* Table B: the text, then "TENANT HEX(SHA-256(tok))": the lookup must
 * find that line (the last one with its hash). */
static void check_appended(const struct lupd_tokens *a, const char *text, size_t n, const char *tenant,
                           const uint8_t *tok, size_t tok_n)
{
        static char buf[65536 + 256];
        static const char hexd[] = "0123456789abcdef";
        struct lupd_tokens b = { 0 };
        char err[256] = "";
        uint8_t h[32];
        size_t at;

        if (n > sizeof(buf) - 256)
                return;
        memcpy(buf, text, n);
        at = n;
        at += (size_t)snprintf(buf + at, sizeof(buf) - at, "\n%s ", tenant);
        sha256(tok, tok_n, h);
        for (int i = 0; i < 32; i++) {
                buf[at++] = hexd[h[i] >> 4];
                buf[at++] = hexd[h[i] & 15];
        }
        buf[at++] = '\n';
        int rc = lupd_tokens_parse(&b, buf, at, err, sizeof(err));
        check_table(rc, &b, err);
        /* a good text stays good with one good line more (its last line,
         * if it had no newline, gets ours) */
        if (a->n)
                assert(rc == 0 && b.n == a->n + 1);
        if (rc == 0) {
                const char *found = lookup(&b, tok, tok_n);
                assert(found == b.t[b.n - 1].tenant && strcmp(found, tenant) == 0);
                check_key(found, "x");
        }
        lupd_tokens_free(&b);
}

static void check_hello(const struct lupd_tokens *a, const char *text, size_t text_n, const uint8_t *p, size_t n)
{
        struct lup_hello h;
        const char *why = NULL;

        if (lup_hello_decode(p, n, &h, &why) < 0) {
                assert(why != NULL);
                return;
        }
        check_key("", h.name);
        if (!(h.flags & LUP_HELLO_AUTH)) {
                assert(h.auth_len == 0);
                return;
        }
        assert(h.auth_len >= 1 && h.auth_len <= LUP_MAX_AUTH);
        const char *tenant = lookup(a, h.auth, h.auth_len);
        if (tenant)
                check_key(tenant, h.name);

        /* a tenant named like the session (its first 64 bytes: a name's
         * bytes are all valid in a tenant) */
        char ten[LUPD_MAX_TENANT + 1];
        size_t tn = strnlen(h.name, LUPD_MAX_TENANT);
        memcpy(ten, h.name, tn);
        ten[tn] = 0;
        assert(lupd_tenant_valid(ten, strlen(ten)));
        check_key(ten, h.name);
        check_appended(a, text, text_n, ten, h.auth, h.auth_len);
}

static void check_nvml(const struct lupd_tokens *a, const uint8_t *p, size_t n)
{
        const uint8_t *auth = (const uint8_t *)"unset";
        size_t auth_len = 99;
        const char *why = NULL;
        char key[LUP_MAX_NAME + 1];

        int rc = lup_nvml_req_decode_auth(p, n, &auth, &auth_len, &why);
        assert(rc == 0 || rc == -EBADMSG);
        if (rc < 0) {
                assert(why != NULL && auth == NULL && auth_len == 0);
                return;
        }
        if (!auth) {
                assert(auth_len == 0 && n == LUP_NVML_REQ_SIZE);
                return;
        }
        assert(auth_len >= 1 && auth_len <= LUP_MAX_AUTH);
        assert(auth == p + LUP_NVML_REQ_SIZE + 2 && n == LUP_NVML_REQ_SIZE + 2 + auth_len);
        const char *tenant = lookup(a, auth, auth_len);
        /* supervisor/nvml.c: the tenant's key prefix */
        assert(lupd_session_key(tenant ? tenant : "", "x", key, sizeof(key), &why) == 0);
        key[lupd_key_tenant_len(key)] = 0;
        assert(strlen(key) == (tenant ? 19u : 0u));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct lupd_tokens a = { 0 };
        char err[256] = "";

        if (size < 2)
                return 0;
        size_t text_n = (size_t)data[0] | (size_t)data[1] << 8;
        if (text_n > size - 2)
                text_n = size - 2;
        const char *text = (const char *)data + 2;
        const uint8_t *rest = data + 2 + text_n;
        size_t rest_n = size - 2 - text_n;

        check_table(lupd_tokens_parse(&a, text, text_n, err, sizeof(err)), &a, err);
        check_hello(&a, text, text_n, rest, rest_n);
        check_nvml(&a, rest, rest_n);
        lupd_tokens_free(&a);

        /* the tenant part of any string (what nvml.c and auth.c take of a
         * registered key) */
        char s[LUP_MAX_NAME + 1];
        size_t sn = rest_n < LUP_MAX_NAME ? rest_n : LUP_MAX_NAME;
        memcpy(s, rest, sn);
        s[sn] = 0;
        size_t tl = lupd_key_tenant_len(s);
        assert(tl == 0 || (tl == 19 && s[0] == '.' && s[1] == 't' && s[18] == '.' && strlen(s) > 19));
        return 0;
}
