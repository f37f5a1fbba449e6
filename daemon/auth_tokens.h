/* SPDX-License-Identifier: MIT */
/*
 * Bearer tokens and tenant namespaces, without I/O (daemon/auth_tokens.c):
 * what supervisor/auth.c decides with, and what tests/fuzz/fuzz_auth.c
 * fuzzes.
 */
#ifndef LUPD_AUTH_TOKENS_H
#define LUPD_AUTH_TOKENS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

#define LUPD_MAX_TENANT      64    /* tenant name bytes */
#define LUPD_MAX_TOKENS      65536 /* lines of --auth-tokens */
#define LUPD_TOKENS_MAX_FILE (16u << 20)

/* One line of --auth-tokens. */
struct lupd_token {
        char tenant[LUPD_MAX_TENANT + 1];
        uint8_t hash[32]; /* SHA-256 of the token */
};

struct lupd_tokens {
        struct lupd_token *t;
        size_t n, cap;
};

/* 1..LUPD_MAX_TENANT of A-Z a-z 0-9 . _ - @ */
bool lupd_tenant_valid(const char *t, size_t n);
/* Parses the text of a token file ("TENANT SHA256HEX" lines, '#'
 * comments, blank lines) into *t: 0, or -EINVAL / -ENOMEM with the line
 * and reason in err. At least one token. */
int lupd_tokens_parse(struct lupd_tokens *t, const char *text, size_t n, char *err, size_t errcap);
void lupd_tokens_free(struct lupd_tokens *t);
/* The tenant whose token this is, or NULL; every line is compared in
 * constant time. */
const char *lupd_tokens_tenant(const struct lupd_tokens *t, const uint8_t *token, size_t n);
/* The key a tenant's session is registered and checkpointed under: name
 * itself for the anonymous tenant (""), ".t<16 hex>.name" otherwise.
 * 0, or -EINVAL / -ENAMETOOLONG with *why. */
int lupd_session_key(const char *tenant, const char *name, char *out, size_t cap, const char **why);
/* The length of the tenant part of a key (0: the anonymous tenant):
 * ".t", 16 hex digits, ".". */
static inline size_t lupd_key_tenant_len(const char *key)
{
        return key[0] == '.' && key[1] == 't' && strlen(key) > 19 && key[18] == '.' ? 19 : 0;
}
/* The tenant part every key of tenant begins with: "" for the anonymous
 * tenant, ".t<16 hex>." otherwise (LUPD_TENANT_PREFIX_MAX bytes with the
 * NUL). 0, or -EINVAL for a tenant name that is too long. */
#define LUPD_TENANT_PREFIX_MAX 20
int lupd_tenant_prefix(const char *tenant, char out[LUPD_TENANT_PREFIX_MAX]);
/* Whether key belongs to the tenant whose prefix (lupd_tenant_prefix, or
 * the first lupd_key_tenant_len bytes of one of its keys) this is. */
bool lupd_key_in_tenant(const char *key, const char *prefix, size_t prefix_len);
/* Every later log line of this process carries the session of key (the
 * client's name) and its tenant ("t<16 hex>", none for the anonymous one)
 * as journal fields: for a worker, which serves that one session. */
/* The tenant's id in key ("t<16 hex>", without the dots) into out; ""
 * for the anonymous tenant. Returns the tenant part's length in key. */
static inline size_t lupd_key_tenant_id(const char *key, char out[LUPD_TENANT_PREFIX_MAX])
{
        size_t tl = lupd_key_tenant_len(key);
        snprintf(out, LUPD_TENANT_PREFIX_MAX, "%.*s", tl ? (int)tl - 2 : 0, key + (tl ? 1 : 0));
        return tl;
}

static inline void lupd_log_context_key(const char *key)
{
        char tenant[LUPD_TENANT_PREFIX_MAX];
        size_t tl = lupd_key_tenant_id(key, tenant);
        lup_log_set_context(key + tl, tl ? tenant : NULL);
}

#endif
