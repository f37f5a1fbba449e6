/* SPDX-License-Identifier: MIT */
/* Arena slots agreed across a fleet through the checkpoint store
 * (worker/slot_lease.c, docs/fleet.md). */
#ifndef LUPW_SLOT_LEASE_H
#define LUPW_SLOT_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lupine/checkpoint_provider.h"

struct lupw_session;

#define LUPW_SLOT_KEY_MAX 24

/* The store name of slot's lease: ".arena-slot-NN". */
static inline void lupw_slot_key(uint32_t slot, char out[LUPW_SLOT_KEY_MAX])
{
        snprintf(out, LUPW_SLOT_KEY_MAX, ".arena-slot-%02u", (unsigned)slot);
}
/* Slots are agreed through the store: the session holds its lease (so the
 * provider has leases, lupine_provider_has_leases; the supervisor chose
 * LUPD_ASSIGN_ANY_SLOT by the same test). */
bool lupw_slot_fleet(const struct lupw_session *s);
/* A new session: reserves the first slot from hint on, not in avoid (the
 * client's HELLO), that is free in the fleet and in this process, and
 * claims it. 0, -EADDRINUSE (none free) or -errno (the store cannot say),
 * with the client's message in err. */
int lupw_slot_take_new(struct lupw_session *s, uint32_t hint, uint64_t avoid, char *err, size_t cap);
/* A restore: claims slot (already reserved here). 0, -EADDRINUSE (another
 * session holds it; logged with its name) or -errno, with err. */
int lupw_slot_take(struct lupw_session *s, uint32_t slot, char *err, size_t cap);
/* worker/lease.c renews the slot with the session's lease (a slot claimed
 * since by another host for this session, in a migration, or taken over,
 * is not renewed again) and, at the end, releases it if the session ended
 * for good (lease.slot_release), else leaves it held by its checkpoint. */

#endif
