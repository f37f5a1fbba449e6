/* SPDX-License-Identifier: MIT */
/*
 * Who a client is (issue 15, docs/security.md): its tenant, from a bearer
 * token, a client certificate or its uid, and the policy that decides who
 * may come in without credentials. And the session key that namespaces a
 * tenant's session names.
 *
 * The token file holds "TENANT SHA256HEX" lines, the hash of each token
 * and never the token. A presented token is hashed once and compared with
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
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "frame.h"
#include "log.h"
#include "supervisor/internal.h"

#define AUTH_MAX_TOKENS 65536

static bool tenant_valid(const char *t, size_t n)
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

static int hex_decode(const char *h, uint8_t *out, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                unsigned v;
                if (sscanf(h + 2 * i, "%2x", &v) != 1)
                        return -1;
                out[i] = (uint8_t)v;
        }
        return h[2 * n] == 0 ? 0 : -1;
}

static void sha256(const void *p, size_t n, uint8_t out[32])
{
        unsigned len = 32;
        if (EVP_Digest(p, n, out, &len, EVP_sha256(), NULL) != 1)
                memset(out, 0, 32); /* cannot happen with the default provider; matches nothing real */
}

int sup_auth_load(struct sup *s)
{
        struct sup_auth *a = &s->auth;
        char line[512];
        unsigned lineno = 0;
        FILE *f;

        if (!s->cfg->auth_tokens[0])
                return 0;
        f = fopen(s->cfg->auth_tokens, "re");
        if (!f) {
                lup_err("--auth-tokens %s: %s", s->cfg->auth_tokens, strerror(errno));
                return -errno;
        }
        while (fgets(line, sizeof(line), f)) {
                char tenant[LUPD_MAX_TENANT + 2], hex[80];
                lineno++;
                char *p = line + strspn(line, " \t");
                if (*p == '#' || *p == '\n' || *p == 0)
                        continue;
                if (sscanf(p, "%65s %79s", tenant, hex) != 2 || !tenant_valid(tenant, strlen(tenant)) ||
                    strlen(hex) != 64) {
                        lup_err("--auth-tokens %s line %u: expected \"TENANT SHA256HEX\" (a tenant of 1 to %d of "
                                "A-Z a-z 0-9 . _ - @, and 64 hex digits)",
                                s->cfg->auth_tokens, lineno, LUPD_MAX_TENANT);
                        goto fail;
                }
                if (a->n >= AUTH_MAX_TOKENS) {
                        lup_err("--auth-tokens %s: more than %d tokens", s->cfg->auth_tokens, AUTH_MAX_TOKENS);
                        goto fail;
                }
                if (a->n == a->cap) {
                        size_t cap = a->cap ? 2 * a->cap : 16;
                        struct sup_token *t = realloc(a->t, cap * sizeof(*t));
                        if (!t)
                                goto fail;
                        a->t = t;
                        a->cap = cap;
                }
                struct sup_token *t = &a->t[a->n];
                if (hex_decode(hex, t->hash, 32) < 0) {
                        lup_err("--auth-tokens %s line %u: the hash is not 64 hex digits", s->cfg->auth_tokens, lineno);
                        goto fail;
                }
                snprintf(t->tenant, sizeof(t->tenant), "%s", tenant);
                a->n++;
        }
        fclose(f);
        if (a->n == 0) {
                lup_err("--auth-tokens %s: no tokens in the file", s->cfg->auth_tokens);
                return -EINVAL;
        }
        lup_info("authentication: %zu bearer token(s) from %s", a->n, s->cfg->auth_tokens);
        return 0;
fail:
        fclose(f);
        return -EINVAL;
}

void sup_auth_free(struct sup *s)
{
        if (s->auth.t)
                OPENSSL_cleanse(s->auth.t, s->auth.n * sizeof(*s->auth.t));
        free(s->auth.t);
        s->auth.t = NULL;
        s->auth.n = s->auth.cap = 0;
}

/* The tenant whose token this is, or NULL. Every line is compared. */
static const char *token_tenant(const struct sup *s, const uint8_t *token, size_t n)
{
        uint8_t h[32];
        const char *found = NULL;

        sha256(token, n, h);
        for (size_t i = 0; i < s->auth.n; i++)
                if (CRYPTO_memcmp(h, s->auth.t[i].hash, 32) == 0)
                        found = s->auth.t[i].tenant;
        OPENSSL_cleanse(h, sizeof(h));
        return found;
}

bool sup_addr_is_loopback(const struct sockaddr_storage *ss)
{
        if (ss->ss_family == AF_INET)
                return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
        if (ss->ss_family == AF_INET6) {
                const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
                if (IN6_IS_ADDR_LOOPBACK(a))
                        return true;
                if (IN6_IS_ADDR_V4MAPPED(a))
                        return a->s6_addr[12] == 127;
        }
        return false;
}

int sup_auth_tenant(struct sup *s, int idx, const uint8_t *auth, size_t auth_len, char *tenant, size_t cap,
                    const char **why)
{
        struct conn *c = &s->conns[idx];
        char cn[LUPD_MAX_TENANT + 2];
        bool have_cn = false;

        *why = NULL;
        if (c->tls) {
                int r = lup_tls_peer_cn(c->tls, cn, sizeof(cn));
                if (r == -ENAMETOOLONG || (r == 0 && !tenant_valid(cn, strlen(cn)))) {
                        *why = "the client certificate's subject CN is not a valid tenant name (1 to 64 of "
                               "A-Z a-z 0-9 . _ - @)";
                        return -EACCES;
                }
                have_cn = r == 0;
        }
        if (auth && auth_len) {
                if (!c->tls && !c->unix_listener && !c->loopback) {
                        *why = "a bearer token is accepted only over TLS, loopback or the UNIX socket; use "
                               "tls:// in LUPINE_SERVER";
                        return -EACCES;
                }
                if (s->auth.n == 0) {
                        *why = "this server takes no bearer tokens (no --auth-tokens); unset LUPINE_TOKEN";
                        return -EACCES;
                }
                const char *t = token_tenant(s, auth, auth_len);
                if (!t) {
                        *why = "authentication failed: the bearer token is not valid";
                        return -EACCES;
                }
                if (have_cn && strcmp(cn, t) != 0) {
                        *why = "authentication failed: the client certificate and the bearer token name "
                               "different tenants";
                        return -EACCES;
                }
                snprintf(tenant, cap, "%s", t);
                return 0;
        }
        if (have_cn) {
                snprintf(tenant, cap, "%s", cn);
                return 0;
        }
        if (c->unix_listener) {
                /* The daemon's own user and root can read every checkpoint
                 * anyway: they are the anonymous tenant, as loopback is. */
                if (c->peer_uid == 0 || c->peer_uid == (uint32_t)geteuid())
                        tenant[0] = 0;
                else
                        snprintf(tenant, cap, "uid-%u", (unsigned)c->peer_uid);
                return 0;
        }
        if (c->loopback || s->cfg->insecure) {
                if (!c->loopback && sup_conn_log_allow(s))
                        lup_warn("INSECURE (--insecure): serving %s without authentication%s", c->peer,
                                 c->tls ? "" : " or encryption");
                tenant[0] = 0; /* the anonymous tenant */
                return 0;
        }
        *why = "authentication required: set LUPINE_TOKEN (a bearer token of this server's --auth-tokens)"
               " or use a client certificate";
        return -EACCES;
}

int sup_session_key(const char *tenant, const char *name, char *out, size_t cap, const char **why)
{
        uint8_t h[32];
        char pre[] = "lupine-tenant:";
        char buf[sizeof(pre) + LUPD_MAX_TENANT + 1];
        int n;

        if (name[0] == '.') {
                *why = "session names beginning with '.' are reserved";
                return -EINVAL;
        }
        if (!tenant[0]) {
                n = snprintf(out, cap, "%s", name);
                return n >= 0 && (size_t)n < cap ? 0 : -ENAMETOOLONG;
        }
        n = snprintf(buf, sizeof(buf), "%s%s", pre, tenant);
        sha256(buf, (size_t)n, h);
        n = snprintf(out, cap, ".t%02x%02x%02x%02x%02x%02x%02x%02x.%s", h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7],
                     name);
        if (n < 0 || (size_t)n >= cap || (size_t)n > LUP_MAX_NAME) {
                *why = "session name too long for a tenant's namespace (at most 109 bytes)";
                return -ENAMETOOLONG;
        }
        return 0;
}

size_t sup_key_tenant_len(const char *key)
{
        /* ".t" 16 hex "." */
        return key[0] == '.' && key[1] == 't' && strlen(key) > 19 && key[18] == '.' ? 19 : 0;
}

int sup_tenant_caps(struct sup *s, const char *key, char *why, size_t cap)
{
        size_t tl = sup_key_tenant_len(key);
        int n = 0, detached = 0;

        /* The anonymous tenant is everyone on loopback (and, with
         * --insecure, the network): one trust domain, bounded by
         * --max-sessions alone. */
        if (tl == 0)
                return 0;
        for (unsigned i = 0; i < LUP_ARENA_SLOTS; i++) {
                const struct lupd_session *se = &s->reg.s[i];
                if (se->state != LUPD_SESSION_LIVE || se->phase == LUPD_PHASE_FAILED)
                        continue;
                if (sup_key_tenant_len(se->name) != tl || strncmp(se->name, key, tl) != 0)
                        continue;
                n++;
                detached += se->phase == LUPD_PHASE_DETACHED || se->phase == LUPD_PHASE_WAITING;
        }
        if (s->cfg->max_sessions_per_tenant > 0 && n >= s->cfg->max_sessions_per_tenant) {
                s->hits.tenant_sessions++;
                snprintf(why, cap, "limit hit: this tenant has %d sessions (--max-sessions-per-tenant)", n);
                return -EUSERS;
        }
        if (s->cfg->max_detached_per_tenant > 0 && detached >= s->cfg->max_detached_per_tenant) {
                s->hits.tenant_detached++;
                snprintf(why, cap,
                         "limit hit: this tenant has %d sessions without a client (--max-detached-per-tenant); "
                         "resume or end one first",
                         detached);
                return -EUSERS;
        }
        return 0;
}
