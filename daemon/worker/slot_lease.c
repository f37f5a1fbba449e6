/* SPDX-License-Identifier: MIT */
/*
 * Arena slots across a fleet (issue 17, item 6; docs/fleet.md, "Device
 * addresses across hosts").
 *
 * A session's device addresses are its arena slot's (lup_arena_slot_base):
 * a restore or a migration must get the same slot on whichever host takes
 * the session. Hosts that share a checkpoint store with leases therefore
 * agree on slots through the store: slot n is a lease of its own, on the
 * reserved name ".arena-slot-NN" (client session names cannot begin with
 * '.'), whose owner is the session key. The session's worker claims it
 * right after the session's own lease, renews it with that lease, and
 * releases it only when the session ends and its checkpoint is deleted.
 *
 * A slot is held by session T while T's slot lease is unexpired, and also
 * after it expired for as long as T may come back: its own lease is still
 * held (within the skew), or the store holds a checkpoint of T (drained,
 * or periodically checkpointed on a host that died). Only a slot whose
 * holder can never come back is taken over, by an ordinary lease claim,
 * which is atomic against every other claim in the fleet.
 *
 * A new session takes the first slot, from the supervisor's hint on, that
 * is free in the store and whose range this worker can reserve. A
 * restored or migrated session claims the slot its checkpoint names; if
 * another session holds it (a checkpoint written before slots were
 * recorded, or a host that does not share this store), the restore is
 * refused with that reason instead of running at other addresses.
 */
#define LUP_LOG_CAT LUP_LOGC_SESSION
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "worker/session.h"
#include "worker/slot_lease.h"

#define CLAIM_TRIES 5 /* -EAGAIN: the store was busy */

static int64_t wall_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool lupw_slot_fleet(const struct lupw_session *s)
{
        return s->lease.on; /* held only where lupine_provider_has_leases (worker/lease.c) */
}

/* Whether session key, the owner of an expired slot lease, may still come
 * back: 1 yes, 0 never, -errno the store cannot say (then it may). */
static int holder_may_return(struct lupw_session *s, const char *key)
{
        const struct lupine_checkpoint_provider *p = s->ckpt.ops;
        struct lupine_ckpt_lease l;
        struct lupine_ckpt_load *ld = NULL;
        uint64_t epoch = 0;

        memset(&l, 0, sizeof(l));
        int rc = p->lease_read(s->ckpt.inst, key, &l);
        if (rc < 0)
                return rc;
        if (l.owner[0] && l.expires_unix_ms + (int64_t)LUPINE_CKPT_LEASE_SKEW_MS > wall_ms())
                return 1; /* a host runs it, or did a moment ago */
        rc = p->load_begin(s->ckpt.inst, key, 0, &ld, &epoch);
        if (rc == 0) {
                p->load_end(ld);
                return 1; /* checkpointed: a host may restore it */
        }
        return rc == -ENOENT ? 0 : rc;
}

/* One claim of slot for this session: 0 ours (token in *ret_token), -EBUSY
 * another session holds it (its key in holder), another -errno when the
 * store cannot decide. */
static int claim_slot(struct lupw_session *s, uint32_t slot, uint64_t *ret_token, char *holder, size_t cap)
{
        const struct lupine_checkpoint_provider *p = s->ckpt.ops;
        struct lupine_ckpt_lease got;
        char key[LUPW_SLOT_KEY_MAX];
        int rc = -EAGAIN;

        lupw_slot_key(slot, key);
        for (int i = 0; i < CLAIM_TRIES && rc == -EAGAIN; i++) {
                memset(&got, 0, sizeof(got));
                rc = p->lease_read(s->ckpt.inst, key, &got);
                if (rc < 0)
                        continue;
                if (got.owner[0] && strcmp(got.owner, s->name) != 0 && got.expires_unix_ms <= wall_ms()) {
                        /* expired, and another session's: that session may
                         * still need its addresses */
                        int back = holder_may_return(s, got.owner);
                        if (back != 0) {
                                snprintf(holder, cap, "%s", got.owner);
                                return back > 0 ? -EBUSY : back;
                        }
                }
                memset(&got, 0, sizeof(got));
                rc = p->lease_claim(s->ckpt.inst, key, s->name, s->lease.ttl_ms, &got);
        }
        if (rc == -EBUSY)
                snprintf(holder, cap, "%s", got.owner[0] ? got.owner : "another session");
        if (rc == 0)
                *ret_token = got.token;
        return rc;
}

/* s->slot (reserved here) is the session's in the store now. */
static void slot_held(struct lupw_session *s, uint64_t token)
{
        struct lupw_lease *l = &s->lease;
        pthread_mutex_lock(&l->lock);
        l->slot_token = token;
        l->slot_on = true;
        l->slot_release = false;
        pthread_mutex_unlock(&l->lock);
        lup_info("session %s: arena slot %u [0x%" PRIx64 ", +1 TiB) is its own across the fleet (token %" PRIu64 ")",
                 s->name, (unsigned)s->slot, lup_arena_slot_base(s->slot), token);
}

int lupw_slot_take_new(struct lupw_session *s, uint32_t hint, uint64_t avoid, char *err, size_t cap)
{
        char holder[LUPINE_CKPT_OWNER_MAX + 1], why[200];
        unsigned busy = 0, unusable = 0, avoided = 0;
        uint64_t token = 0;

        for (uint32_t k = 0; k < LUP_ARENA_SLOTS; k++) {
                uint32_t slot = (hint + k) % LUP_ARENA_SLOTS;
                if (avoid >> slot & 1) {
                        avoided++; /* the client holds it for another server */
                        continue;
                }
                if (lupw_reserve_arena(s, slot, why, sizeof(why)) < 0) {
                        unusable++; /* this process has something there */
                        continue;
                }
                int rc = claim_slot(s, slot, &token, holder, sizeof(holder));
                if (rc == 0) {
                        slot_held(s, token);
                        return 0;
                }
                lupw_unreserve_arena(s);
                if (rc != -EBUSY) {
                        lup_err("session %s: cannot claim arena slot %u in the checkpoint store: %s (%s)", s->name,
                                (unsigned)slot, strerror(-rc), s->ckpt.ops->last_error(s->ckpt.inst));
                        snprintf(err, cap,
                                 "the checkpoint store cannot say which device address range (arena slot) no other "
                                 "host of the fleet uses; try again");
                        return rc;
                }
                lup_debug("session %s: arena slot %u is held by session %s in the fleet", s->name, (unsigned)slot,
                          holder);
                busy++;
        }
        lup_err("session %s: no arena slot free: %u of %u are held by sessions of the fleet sharing the checkpoint "
                "store (running, or checkpointed), %u cannot be reserved here, %u the client holds for its other "
                "servers",
                s->name, busy, LUP_ARENA_SLOTS, unusable, avoided);
        snprintf(err, cap,
                 "server full: all %u device address ranges (arena slots) are held by sessions of the fleet "
                 "sharing this server's checkpoint store, running or checkpointed (%u), cannot be reserved "
                 "here (%u), or are the client's for its other servers (%u)",
                 LUP_ARENA_SLOTS, busy, unusable, avoided);
        return -EADDRINUSE;
}

int lupw_slot_take(struct lupw_session *s, uint32_t slot, char *err, size_t cap)
{
        char holder[LUPINE_CKPT_OWNER_MAX + 1] = "";
        uint64_t token = 0;
        int rc = claim_slot(s, slot, &token, holder, sizeof(holder));

        if (rc == 0) {
                slot_held(s, token);
                return 0;
        }
        if (rc == -EBUSY) {
                /* the holder's name is for the log: clients never learn
                 * another session's name (docs/security.md) */
                lup_err("session %s: its device addresses are in arena slot %u [0x%" PRIx64
                        ", +1 TiB), which session %s holds in the fleet sharing the checkpoint store; not restoring "
                        "it at other addresses (the checkpoint is kept)",
                        s->name, (unsigned)slot, lup_arena_slot_base(slot), holder);
                snprintf(err, cap,
                         "its device addresses are in arena slot %u, which another session of the fleet holds "
                         "(its checkpoint predates slot records, or a host outside this store gave the slot out)",
                         (unsigned)slot);
                return -EADDRINUSE;
        }
        lup_err("session %s: cannot claim arena slot %u in the checkpoint store: %s (%s)", s->name, (unsigned)slot,
                strerror(-rc), s->ckpt.ops->last_error(s->ckpt.inst));
        snprintf(err, cap, "the checkpoint store cannot say whether arena slot %u is free in the fleet",
                 (unsigned)slot);
        return rc;
}
