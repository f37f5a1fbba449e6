/* SPDX-License-Identifier: MIT */
/* The session's lease in the checkpoint store (worker/lease.c, docs/fleet.md). */
#ifndef LUPW_LEASE_H
#define LUPW_LEASE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "lupine/checkpoint_provider.h"

struct lupw_session;

struct lupw_lease {
        bool on;                                /* the provider has leases, and this session holds one */
        uint64_t token;                         /* the fencing token of our claim */
        uint32_t ttl_ms;                        /* --lease-ttl */
        _Atomic uint64_t valid_until_ns;        /* CLOCK_MONOTONIC: no call runs after this unless renewed */
        atomic_bool lost;                       /* another host claimed it since: the session is not ours */
        bool held;                              /* main thread: input waits for a renewal (worker/loop.c) */
        bool release_at_end;                    /* the worker releases it as it exits (see lupw_lease_end) */
        int efd;                                /* eventfd the renewing thread writes after each try; -1 */
        char holder[LUPINE_CKPT_OWNER_MAX + 1]; /* -EBUSY or lost: the other host */
        int64_t holder_until_ms;                /* ... its lease's expiry (wall clock) */
        /* the renewing thread, with a provider instance of its own */
        struct lupine_ckpt_instance *inst;
        pthread_t thread;
        bool thread_on;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool stop;
        bool said_failing; /* a failed renewal was logged */
        /* the session's arena slot in the store (worker/slot_lease.c):
         * renewed with the lease; written under lock once the thread runs */
        bool slot_on;      /* we hold the slot's lease and renew it */
        bool slot_release; /* released at the end: the session and its checkpoint are gone */
        uint64_t slot_token;
};

/* Claims the session's lease for this host (--host-id), if the provider
 * has leases, and starts renewing it. 0 when held or when there are no
 * leases; -EBUSY when another host holds it (s->lease.holder says who;
 * logged); another -errno when the store could not decide (logged): the
 * session must not run then. */
int lupw_lease_claim(struct lupw_session *s);
/* The lease's state for running a call now: 0 held (or no leases),
 * -ETIME not renewed in time (calls wait), -ESTALE taken over. */
int lupw_lease_check(struct lupw_session *s);
/* Makes a save conditional on the lease (save_fence); 0 without leases. */
int lupw_lease_fence(struct lupw_session *s, struct lupine_ckpt_save *save);
/* A renewal now, on the caller's thread: true if the lease is still ours
 * (or there are none). For the steps that cannot be fenced: deleting the
 * session's checkpoint. */
bool lupw_lease_confirm(struct lupw_session *s);
/* Stops renewing; releases the lease when s->lease.release_at_end (and it
 * was not lost), else leaves it to expire or to this host's next worker.
 * Before the provider is closed. */
void lupw_lease_end(struct lupw_session *s);

#endif
