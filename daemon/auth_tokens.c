/* SPDX-License-Identifier: MIT */
/*
 * Bearer tokens and tenant namespaces (daemon/auth_tokens.h).
 *
 * The token file holds "TENANT SHA256HEX" lines: the hash of each token,
 * never the token. A presented token is hashed once and compared with
 * every line in constant time (CRYPTO_memcmp), so neither the time nor the
 * order of lines says which tenant was near.
 *
 * Session keys: the anonymous tenant (loopback or --insecure clients
 * without credentials) keeps its names as they are, so existing
 * checkpoints and clients carry on. Any other tenant's session NAME is
 * stored and registered as ".t<16 hex>.NAME", the hex being the first 8
 * bytes of SHA-256("lupine-tenant:" TENANT). Client names beginning with
 * '.' are refused, so no client can name another tenant's session.
 */
#define LUP_LOG_CAT LUP_LOGC_TLS
#include "auth_tokens.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "lupine/wire.h"

bool lupd_tenant_valid(const char *t, size_t n)
{
        if (n == 0 || n > LUPD_MAX_TENANT)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = t[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                      c == '_' || c == '-' || c == '@'))
                        return false;
        }
        return true;
}

static int hexval(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

static void sha256(const void *p, size_t n, uint8_t out[32])
{
        unsigned len = 32;
        if (EVP_Digest(p, n, out, &len, EVP_sha256(), NULL) != 1)
                memset(out, 0, 32); /* cannot happen with the default provider; matches no real token */
}

/* One line (no newline), at most LUPD_MAX_TENANT + 1 + 64 + blanks long. */
static int parse_line(struct lupd_tokens *t, const char *p, size_t n, unsigned lineno, char *err, size_t errcap)
{
        size_t i = 0, ts, tl, hs;

        while (i < n && (p[i] == ' ' || p[i] == '\t'))
                i++;
        if (i == n || p[i] == '#')
                return 0;
        ts = i;
        while (i < n && p[i] != ' ' && p[i] != '\t')
                i++;
        tl = i - ts;
        while (i < n && (p[i] == ' ' || p[i] == '\t'))
                i++;
        hs = i;
        while (i < n && p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
                i++;
        size_t hl = i - hs;
        while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r'))
                i++;
        if (!lupd_tenant_valid(p + ts, tl) || hl != 64 || i != n) {
                snprintf(err, errcap,
                         "line %u: expected \"TENANT SHA256HEX\" (a tenant of 1 to %d of A-Z a-z 0-9 . _ - @, "
                         "and 64 hex digits)",
                         lineno, LUPD_MAX_TENANT);
                return -EINVAL;
        }
        if (t->n >= LUPD_MAX_TOKENS) {
                snprintf(err, errcap, "more than %d tokens", LUPD_MAX_TOKENS);
                return -EINVAL;
        }
        if (t->n == t->cap) {
                size_t cap = t->cap ? 2 * t->cap : 16;
                struct lupd_token *nt = realloc(t->t, cap * sizeof(*nt));
                if (!nt) {
                        snprintf(err, errcap, "out of memory");
                        return -ENOMEM;
                }
                t->t = nt;
                t->cap = cap;
        }
        struct lupd_token *e = &t->t[t->n];
        for (size_t k = 0; k < 32; k++) {
                int hi = hexval(p[hs + 2 * k]), lo = hexval(p[hs + 2 * k + 1]);
                if (hi < 0 || lo < 0) {
                        snprintf(err, errcap, "line %u: the hash is not 64 hex digits", lineno);
                        return -EINVAL;
                }
                e->hash[k] = (uint8_t)(hi << 4 | lo);
        }
        memcpy(e->tenant, p + ts, tl);
        e->tenant[tl] = 0;
        t->n++;
        return 0;
}

int lupd_tokens_parse(struct lupd_tokens *t, const char *text, size_t n, char *err, size_t errcap)
{
        unsigned lineno = 0;
        size_t at = 0;

        while (at < n) {
                const char *nl = memchr(text + at, '\n', n - at);
                size_t len = nl ? (size_t)(nl - (text + at)) : n - at;
                int r = parse_line(t, text + at, len, ++lineno, err, errcap);
                if (r < 0) {
                        lupd_tokens_free(t);
                        return r;
                }
                at += len + (nl ? 1 : 0);
        }
        if (t->n == 0) {
                snprintf(err, errcap, "no tokens in the file");
                return -EINVAL;
        }
        return 0;
}

void lupd_tokens_free(struct lupd_tokens *t)
{
        if (t->t)
                OPENSSL_cleanse(t->t, t->n * sizeof(*t->t));
        free(t->t);
        t->t = NULL;
        t->n = t->cap = 0;
}

const char *lupd_tokens_tenant(const struct lupd_tokens *t, const uint8_t *token, size_t n)
{
        uint8_t h[32];
        const char *found = NULL;

        sha256(token, n, h);
        for (size_t i = 0; i < t->n; i++)
                if (CRYPTO_memcmp(h, t->t[i].hash, 32) == 0)
                        found = t->t[i].tenant;
        OPENSSL_cleanse(h, sizeof(h));
        return found;
}

int lupd_tenant_prefix(const char *tenant, char out[LUPD_TENANT_PREFIX_MAX])
{
        static const char pre[] = "lupine-tenant:";
        char buf[sizeof(pre) + LUPD_MAX_TENANT + 1];
        uint8_t h[32];
        int n;

        out[0] = 0;
        if (!tenant[0])
                return 0;
        if (strlen(tenant) > LUPD_MAX_TENANT)
                return -EINVAL;
        n = snprintf(buf, sizeof(buf), "%s%s", pre, tenant);
        sha256(buf, (size_t)n, h);
        snprintf(out, LUPD_TENANT_PREFIX_MAX, ".t%02x%02x%02x%02x%02x%02x%02x%02x.", h[0], h[1], h[2], h[3], h[4], h[5],
                 h[6], h[7]);
        return 0;
}

int lupd_session_key(const char *tenant, const char *name, char *out, size_t cap, const char **why)
{
        char prefix[LUPD_TENANT_PREFIX_MAX];
        int n;

        *why = NULL;
        if (name[0] == '.') {
                *why = "session names beginning with '.' are reserved";
                return -EINVAL;
        }
        if (lupd_tenant_prefix(tenant, prefix) < 0) {
                *why = "tenant name too long";
                return -EINVAL;
        }
        n = snprintf(out, cap, "%s%s", prefix, name);
        if (n >= 0 && (size_t)n < cap && (size_t)n <= LUP_MAX_NAME)
                return 0;
        *why = tenant[0] ? "session name too long for a tenant's namespace (at most 109 bytes)"
                         : "session name too long";
        return -ENAMETOOLONG;
}

bool lupd_key_in_tenant(const char *key, const char *prefix, size_t prefix_len)
{
        return lupd_key_tenant_len(key) == prefix_len && strncmp(key, prefix, prefix_len) == 0;
}
