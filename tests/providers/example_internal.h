/* SPDX-License-Identifier: MIT */
/*
 * What the example provider's two files share: example_provider.c (the
 * checkpoints, saves, loads and the table) and example_lease.c (the lease
 * callbacks and the lease table behind them). Nothing here is exported:
 * the library's one public symbol is lupine_checkpoint_provider_v1().
 */
#ifndef LUP_EXAMPLE_INTERNAL_H
#define LUP_EXAMPLE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "example_lease.h"
#include "lupine/checkpoint_provider.h"

struct pool;   /* reserved memory (example_provider.c) */
struct object; /* one object's extents (example_provider.c) */

/* One checkpoint: a save in progress, or a committed epoch. Loads hold a
 * reference, so a commit or remove never frees what a load is reading.
 * So does a checkpoint on each of its bases (save_refer): the newest
 * epoch of a session keeps the ones it refers to, and only the newest
 * has bases (a commit drops the old newest's). */
struct checkpoint {
        struct pool *pool; /* where large extents' data came from, or NULL */
        char session[129];
        uint64_t epoch;
        uint64_t bytes;
        struct object *objects;
        unsigned refs;
        struct checkpoint *bases[LUPINE_CKPT_MAX_REFS]; /* the older epochs it refers to, as named */
        size_t n_bases;
        struct checkpoint *next; /* in the instance's committed list */
};

struct lupine_ckpt_instance {
        struct checkpoint *committed; /* the newest epoch of each session */
        struct pool *pool;            /* config "MIB,reserve", else NULL */
        struct ex_leases *leases;     /* shared with processes forked after open */
        unsigned long long max_save;  /* bytes one save may hold */
        pthread_mutex_t err_mu;       /* concurrent calls may fail at once */
        char err[256];
};

struct lupine_ckpt_save {
        struct lupine_ckpt_instance *inst;
        struct checkpoint *ckpt;
        pthread_mutex_t mu;    /* the object list and extent arrays, for save_write_at */
        size_t direct_pending; /* direct ranges handed out and not yet done */
        bool fenced;           /* save_fence: commit only while fence_owner's fence_token holds the lease */
        char fence_owner[LUPINE_CKPT_OWNER_MAX + 1];
        uint64_t fence_token;
};

/* Describes the failure for last_error and returns err. */
int ex_fail(struct lupine_ckpt_instance *inst, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The header's session-name rule (owners follow it too). */
bool ex_valid_session(const char *s);

/* ---- example_lease.c: the version-4 callbacks */

int ex_lease_claim(struct lupine_ckpt_instance *inst, const char *session, const char *owner, uint32_t ttl_ms,
                   struct lupine_ckpt_lease *ret);
int ex_lease_renew(struct lupine_ckpt_instance *inst, const char *session, const char *owner, uint64_t token,
                   uint32_t ttl_ms, struct lupine_ckpt_lease *ret);
int ex_lease_release(struct lupine_ckpt_instance *inst, const char *session, const char *owner, uint64_t token);
int ex_lease_read(struct lupine_ckpt_instance *inst, const char *session, struct lupine_ckpt_lease *ret);
int ex_save_fence(struct lupine_ckpt_save *save, const char *owner, uint64_t token);

#endif
