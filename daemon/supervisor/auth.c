/* SPDX-License-Identifier: MIT */
/*
 * Who a client is (issue 15, docs/security.md): its tenant, from a bearer
 * token, a client certificate or its uid, and the policy that decides who
 * may come in without credentials, and the per-tenant caps.
 * The tokens themselves and the session keys are daemon/auth_tokens.c.
 */
#define LUP_LOG_CAT LUP_LOGC_TLS
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "frame.h"
#include "log.h"
#include "supervisor/internal.h"

int sup_auth_load(struct sup *s)
{
        const char *path = s->cfg->auth_tokens;
        char err[256];
        char *text;
        size_t n = 0;
        FILE *f;
        int r;

        if (!path[0])
                return 0;
        f = fopen(path, "re");
        if (!f) {
                r = -errno;
                lup_err("--auth-tokens %s: %s", path, strerror(-r));
                return r;
        }
        text = malloc(LUPD_TOKENS_MAX_FILE + 1);
        if (text)
                n = fread(text, 1, LUPD_TOKENS_MAX_FILE + 1, f);
        fclose(f);
        if (!text || n > LUPD_TOKENS_MAX_FILE) {
                lup_err("--auth-tokens %s: %s", path, text ? "the file is over 16 MiB" : "out of memory");
                free(text);
                return -EINVAL;
        }
        r = lupd_tokens_parse(&s->auth, text, n, err, sizeof(err));
        OPENSSL_cleanse(text, n);
        free(text);
        if (r < 0) {
                lup_err("--auth-tokens %s: %s", path, err);
                return r;
        }
        lup_info("authentication: %zu bearer token(s) from %s", s->auth.n, path);
        return 0;
}

void sup_auth_free(struct sup *s)
{
        lupd_tokens_free(&s->auth);
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
                if (r == -ENAMETOOLONG || (r == 0 && !lupd_tenant_valid(cn, strlen(cn)))) {
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
                const char *t = lupd_tokens_tenant(&s->auth, auth, auth_len);
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

int sup_tenant_caps(struct sup *s, const char *key, char *why, size_t cap)
{
        size_t tl = lupd_key_tenant_len(key);
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
                if (!lupd_key_in_tenant(se->name, key, tl))
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
