/* SPDX-License-Identifier: MIT */
/*
 * The example provider's session leases (ABI version 4): a table in memory
 * shared with every process forked after open, standing in for a store
 * that several hosts share (example_lease.c).
 */
#ifndef LUP_EXAMPLE_LEASE_H
#define LUP_EXAMPLE_LEASE_H

#include <stdint.h>

#include "lupine/checkpoint_provider.h"

#define EX_LEASE_SLOTS 256 /* sessions with a lease record; more: -ENOSPC */

struct ex_leases;

/* NULL when out of memory. ex_leases_free accepts NULL. */
struct ex_leases *ex_leases_new(void);
void ex_leases_free(struct ex_leases *t);

/* The callbacks' semantics (abi/lupine/checkpoint_provider.h), on valid
 * names and ttl (the caller checks them): 0 or -EBUSY, -ESTALE, -ENOSPC,
 * -EOVERFLOW. */
int ex_leases_claim(struct ex_leases *t, const char *session, const char *owner, uint32_t ttl_ms,
                    struct lupine_ckpt_lease *ret);
int ex_leases_renew(struct ex_leases *t, const char *session, const char *owner, uint64_t token, uint32_t ttl_ms,
                    struct lupine_ckpt_lease *ret);
int ex_leases_release(struct ex_leases *t, const char *session, const char *owner, uint64_t token);
void ex_leases_read(struct ex_leases *t, const char *session, struct lupine_ckpt_lease *ret);

/* Locks the table and checks that (owner, token) holds the session's
 * lease: 0 with the table locked (ex_leases_unlock after the commit's
 * atomic step), or -ESTALE with it unlocked. */
int ex_leases_hold(struct ex_leases *t, const char *session, const char *owner, uint64_t token);
void ex_leases_unlock(struct ex_leases *t);

#endif
