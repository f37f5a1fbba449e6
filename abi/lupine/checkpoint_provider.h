/* SPDX-License-Identifier: MIT */
/*
 * lupine checkpoint-provider ABI, version 5 (versions 1 to 4 still load).
 *
 * A provider decides WHERE checkpoint bytes go (a directory, an object
 * store, ...); lupined decides WHAT the state is. A provider is a shared
 * library exporting
 *
 *     const struct lupine_checkpoint_provider *lupine_checkpoint_provider_v1(void);
 *
 * and is loaded from --checkpoint-provider PATH or LUPINE_CHECKPOINT_LIBRARY.
 * The daemon checks abi_version and struct_size before using any callback;
 * a newer daemon accepts an older, smaller struct and never calls past its
 * end.
 *
 * Versions. abi_version says which fields the table has; struct_size must
 * cover them:
 *   1  everything up to and including `remove`;
 *   2  adds `caps` and `save_write_at` after `remove` (optional concurrency;
 *      a version-2 provider that leaves caps 0 behaves as version 1);
 *   3  adds `direct_region`, `save_direct_get` and `save_direct_done` after
 *      `save_write_at` (optional direct writes, LUPINE_CKPT_CAP_DIRECT_WRITE);
 *   4  adds `lease_claim`, `lease_renew`, `lease_release`, `lease_read` and
 *      `save_fence` after `save_direct_done` (optional session leases,
 *      LUPINE_CKPT_CAP_LEASES; see "Leases" below and docs/providers.md);
 *   5  adds `save_refer` and `save_sync` after `save_fence` (optional
 *      incremental checkpoints, LUPINE_CKPT_CAP_REFER, see "References"
 *      below; and an early flush of a long save).
 * This lupined loads versions LUPINE_CHECKPOINT_ABI_VERSION_MIN to
 * LUPINE_CHECKPOINT_ABI_VERSION. A lupined older than version N refuses
 * abi_version N; a provider that must also load there stamps the older
 * version and is then used as such (its newer fields are never read).
 *
 * Model. A checkpoint is identified by (session, epoch). A save streams
 * named objects in pieces and then commits atomically: after commit, a load
 * of that (session, epoch) sees every object in full; before commit (or
 * after abort, or after a crash at any point) the previous committed epoch
 * of the session is untouched and stays loadable. Loads, listings and
 * deletes work on committed checkpoints only.
 *
 * Threading. The daemon calls a provider instance from one thread at a
 * time (the calls may come from different threads, one after the other),
 * except where a capability bit in `caps` allows more:
 *   LUPINE_CKPT_CAP_CONCURRENT_WRITE  save_write_at may run on several
 *      threads at once for one save (see there);
 *   LUPINE_CKPT_CAP_CONCURRENT_READ   load_size and load_read may run on
 *      several threads at once for one load, and (version 5) for the
 *      loads of one instance that one restore holds open at once (the
 *      newest epoch and the ones it refers to);
 *   LUPINE_CKPT_CAP_DIRECT_WRITE  (version 3, needs CONCURRENT_WRITE)
 *      save_direct_get and save_direct_done may run on several threads at
 *      once, together with save_write_at, for one save.
 * No other callback ever overlaps another. (Lease callbacks of
 * different instances, processes and hosts do run at once against one
 * store; that is what they are for.) Different sessions may use
 * different instances (open is per process; workers are separate
 * processes). While calls overlap, last_error describes one of the
 * failures, and a provider need not clear it on success.
 *
 * Errors. Every callback returns 0 or a negative errno value (-EIO, -ENOSPC,
 * -ENOENT, ...), and may describe the failure in the instance's error
 * buffer (lupine_checkpoint_provider.last_error). Callbacks never exit or
 * abort the process.
 *
 * Names. Session names are 1..128 bytes of [A-Za-z0-9._-]. Object names are
 * 1..255 bytes of [A-Za-z0-9._-/] without "..", chosen by the daemon (for
 * example "manifest", "mem/000001"). Providers may rely on both rules.
 */
#ifndef LUPINE_CHECKPOINT_PROVIDER_H
#define LUPINE_CHECKPOINT_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LUPINE_CHECKPOINT_ABI_VERSION     5u
#define LUPINE_CHECKPOINT_ABI_VERSION_MIN 1u /* the oldest this header's daemon loads */

/* caps (version 2) */
#define LUPINE_CKPT_CAP_CONCURRENT_WRITE (1ull << 0)
#define LUPINE_CKPT_CAP_CONCURRENT_READ  (1ull << 1)
/* caps (version 3) */
#define LUPINE_CKPT_CAP_DIRECT_WRITE     (1ull << 2)
/* caps (version 4) */
#define LUPINE_CKPT_CAP_LEASES           (1ull << 3)
/* caps (version 5) */
#define LUPINE_CKPT_CAP_REFER            (1ull << 4)
#define LUPINE_CKPT_MAX_REFS             16u /* epochs one save may refer to */
#define LUPINE_CHECKPOINT_SYMBOL "lupine_checkpoint_provider_v1"

struct lupine_ckpt_instance;    /* opaque, the provider's */
struct lupine_ckpt_save;        /* one save in progress */
struct lupine_ckpt_load;        /* one committed checkpoint opened for reading */

/* Leases (version 4): owner names follow the session-name rule (1..128
 * bytes of [A-Za-z0-9._-]). */
#define LUPINE_CKPT_OWNER_MAX        128u
#define LUPINE_CKPT_LEASE_TTL_MAX_MS 600000u /* 10 minutes; a longer ttl_ms is -EINVAL */
#define LUPINE_CKPT_LEASE_SKEW_MS    2000u   /* the clock disagreement between hosts that leases tolerate */

/* A session's lease as the store holds it. */
struct lupine_ckpt_lease {
        char owner[LUPINE_CKPT_OWNER_MAX + 1]; /* the holder; "" when free (never claimed, or released) */
        uint64_t token;                        /* the fencing token of the last claim; 0: never claimed */
        int64_t expires_unix_ms;               /* the holder's wall clock at claim/renew + ttl_ms; 0 when free */
};

struct lupine_ckpt_info {
        char session[129];
        uint64_t epoch;
        uint64_t bytes;         /* total object bytes, if the provider knows (else 0) */
        int64_t committed_unix; /* seconds since the epoch, if known (else 0) */
};

struct lupine_checkpoint_provider {
        uint32_t abi_version;   /* LUPINE_CHECKPOINT_ABI_VERSION */
        uint32_t struct_size;   /* sizeof(struct lupine_checkpoint_provider) */
        const char *name;       /* "dir", "s3", ... for logs */

        /* config: provider-specific, e.g. a directory path or a URL; NULL
         * means the provider's default (LUPINE_CHECKPOINT_CONFIG if set). */
        int (*open)(const char *config, struct lupine_ckpt_instance **ret);
        void (*close)(struct lupine_ckpt_instance *inst);
        /* Last failure described in words, or "" (valid until the next call). */
        const char *(*last_error)(struct lupine_ckpt_instance *inst);

        /* ---- saving */
        int (*save_begin)(struct lupine_ckpt_instance *inst, const char *session, uint64_t epoch,
                          struct lupine_ckpt_save **ret);
        /* Appends to object `name` (created on first write). Objects of one
         * save may be written interleaved. */
        int (*save_write)(struct lupine_ckpt_save *save, const char *name, const void *data, size_t len);
        /* Makes the save durable and visible atomically, replacing older
         * epochs of the session only after it is durable. Frees `save`. */
        int (*save_commit)(struct lupine_ckpt_save *save);
        /* Discards the save; nothing of it stays visible. Frees `save`. */
        void (*save_abort)(struct lupine_ckpt_save *save);

        /* ---- loading */
        /* Opens the newest committed epoch of `session` (epoch == 0) or that
         * exact epoch. -ENOENT if there is none. */
        int (*load_begin)(struct lupine_ckpt_instance *inst, const char *session, uint64_t epoch,
                          struct lupine_ckpt_load **ret, uint64_t *ret_epoch);
        /* Size of object `name`, -ENOENT if absent. */
        int (*load_size)(struct lupine_ckpt_load *load, const char *name, uint64_t *ret_size);
        /* Reads up to len bytes of `name` at `offset`; returns the byte count
         * (0 at the end) or -errno. */
        int64_t (*load_read)(struct lupine_ckpt_load *load, const char *name, uint64_t offset, void *buf,
                             size_t len);
        void (*load_end)(struct lupine_ckpt_load *load);

        /* ---- listing and deleting committed checkpoints */
        /* Calls fn once per session with its newest committed checkpoint.
         * fn returning non-zero stops the listing (that value is returned). */
        int (*list)(struct lupine_ckpt_instance *inst,
                    int (*fn)(const struct lupine_ckpt_info *info, void *userdata), void *userdata);
        /* Deletes every committed epoch of `session`; -ENOENT if none. */
        int (*remove)(struct lupine_ckpt_instance *inst, const char *session);

        /* ---- version 2: read only when abi_version >= 2 */
        uint64_t caps;          /* LUPINE_CKPT_CAP_*; unknown bits are ignored */
        /* Writes len bytes of object `name` at `offset` (created on first
         * write). Required with LUPINE_CKPT_CAP_CONCURRENT_WRITE, else may be
         * NULL. The daemon then calls it from several threads at once, for
         * the same or different objects, and promises: the ranges written
         * to one object never overlap and, by save_commit, cover [0, size)
         * without holes; an object is written either with save_write or
         * with save_write_at, never both; no other callback of the save
         * runs while any save_write_at does. `data` is the caller's only
         * during the call. After one call fails, the save will be aborted. */
        int (*save_write_at)(struct lupine_ckpt_save *save, const char *name, uint64_t offset, const void *data,
                             size_t len);

        /* ---- version 3: read only when abi_version >= 3 */
        /*
         * Direct writes (LUPINE_CKPT_CAP_DIRECT_WRITE): a provider that keeps
         * its bytes in memory of this process lets the daemon fill that
         * memory in place. For device memory the GPU then copies straight
         * into the provider's memory, and no CPU copies the bytes at all.
         *
         * direct_region: the memory every save_direct_get pointer lies in,
         * [*ret_base, *ret_base + *ret_len), fixed for the life of the
         * instance. The daemon asks once after open and may pin the region
         * for device copies (cuMemHostRegister) until it closes the
         * instance. -ENOTSUP: this instance has none (then no direct write
         * is ever asked of it). Called with no other callback running.
         */
        int (*direct_region)(struct lupine_ckpt_instance *inst, void **ret_base, size_t *ret_len);
        /*
         * The place for len bytes of object `name` at `offset`, as
         * save_write_at would have written them: the same promises about
         * ranges, objects and threads hold, and a range is written either
         * directly or with save_write_at, never both. The daemon writes the
         * bytes there after the call returns and then calls save_direct_done
         * for exactly that range, before save_commit; after an abort the
         * place is the provider's again. -ENOBUFS: no room right now, the
         * daemon writes this range with save_write_at instead; any other
         * error fails the save.
         */
        int (*save_direct_get)(struct lupine_ckpt_save *save, const char *name, uint64_t offset, size_t len,
                               void **ret_ptr);
        /* The bytes of a save_direct_get range are in place. */
        int (*save_direct_done)(struct lupine_ckpt_save *save, const char *name, uint64_t offset, size_t len);

        /* ---- version 4: read only when abi_version >= 4 */
        /*
         * Leases (LUPINE_CKPT_CAP_LEASES): several daemons ("hosts") share
         * one store, and a session must run on at most one of them at a
         * time. The store keeps one lease per session: (owner, token,
         * expiry). Every callback below is one atomic read-modify-write of
         * that lease against every other process on every host using the
         * store: of two claims racing for a free lease, exactly one wins.
         *
         * The token is a fencing token: each successful claim sets it to
         * one more than the session's last token, so tokens are strictly
         * increasing per session and never reused, also across release
         * and across `remove` (lease records outlive checkpoints). Only a
         * claim changes the token; renew and release keep it.
         *
         * Time. expires_unix_ms is the claimer's or renewer's wall clock
         * plus ttl_ms; a claimer takes an unexpired lease from nobody but
         * its own owner, and judges expiry by its own wall clock. Clocks
         * of hosts disagree, so the HOLDER keeps the margin: it must treat
         * its lease as lost at (its monotonic clock just before the call)
         * + ttl_ms - LUPINE_CKPT_LEASE_SKEW_MS, and renew well before (at
         * a third of ttl_ms, say); ttl_ms should therefore be several
         * times LUPINE_CKPT_LEASE_SKEW_MS. Clocks further apart than that
         * can let two hosts run a session at once for a while, but never
         * let a stale host commit: a fenced save (save_fence) checks the
         * token, not the time.
         *
         * Errors: -EINVAL for a bad name, owner or ttl_ms (0 or over
         * LUPINE_CKPT_LEASE_TTL_MAX_MS); -EAGAIN when the store stayed
         * busy too long to decide (try again); -EIO and friends from the
         * store. *ret is written only where said.
         *
         * lease_claim: takes the lease of `session` for `owner` for ttl_ms
         * if it is free, expired, or held by `owner` already (a restarted
         * holder claims again; its older token is fenced off). On success
         * the token is bumped and *ret is the new lease. -EBUSY when
         * another owner holds an unexpired lease: *ret is that lease.
         */
        int (*lease_claim)(struct lupine_ckpt_instance *inst, const char *session, const char *owner, uint32_t ttl_ms,
                           struct lupine_ckpt_lease *ret);
        /* lease_renew: sets the expiry to now + ttl_ms if (owner, token)
         * still holds the lease, expired or not (nobody took it over); *ret
         * is the renewed lease. -ESTALE otherwise (taken over, released or
         * never ours); *ret is then the lease as it is. */
        int (*lease_renew)(struct lupine_ckpt_instance *inst, const char *session, const char *owner, uint64_t token,
                           uint32_t ttl_ms, struct lupine_ckpt_lease *ret);
        /* lease_release: frees the lease if (owner, token) holds it,
         * keeping the token. 0 also if it is already free with this very
         * token (a repeated release); -ESTALE if another claim came since,
         * which the old holder may ignore: it is not its lease any more. */
        int (*lease_release)(struct lupine_ckpt_instance *inst, const char *session, const char *owner, uint64_t token);
        /* lease_read: the lease as it is, without changing it (for
         * listings and tests). A session never claimed reads as free with
         * token 0. */
        int (*lease_read)(struct lupine_ckpt_instance *inst, const char *session, struct lupine_ckpt_lease *ret);
        /* save_fence: makes the save conditional on (owner, token) holding
         * the session's lease. save_commit then makes the save visible
         * only if, at the moment it does, the lease still carries this
         * owner and token (expired or not: the token is the fence); else
         * it fails with -ESTALE, discards the save and leaves the
         * committed checkpoints untouched. The check and the visibility
         * step are one atomic step against lease_claim. Called once, after
         * save_begin and before any write; -ESTALE right away if (owner,
         * token) does not hold the lease now. A save without a fence
         * commits as before. */
        int (*save_fence)(struct lupine_ckpt_save *save, const char *owner, uint64_t token);

        /* ---- version 5: read only when abi_version >= 5 */
        /*
         * References (LUPINE_CKPT_CAP_REFER): an incremental checkpoint
         * writes only the memory that changed and refers, for the rest,
         * to the objects of older committed epochs of the same session
         * (its "bases"). The daemon names each base of a save once, with
         * save_refer, after save_begin and before save_commit; the
         * provider then keeps those epochs as they are for as long as the
         * new epoch is kept:
         *   - save_commit removes the session's older epochs except the
         *     ones this save refers to (it no longer removes all of them);
         *     an older epoch that only an earlier epoch referred to goes
         *     with it, because the daemon names every epoch a save needs,
         *     not only the last one (references are never chained);
         *   - load_begin with that exact epoch opens a kept epoch as it
         *     opens the newest (epoch 0 still means the newest);
         *   - list reports the newest epoch only, and remove deletes the
         *     kept epochs with the others.
         * A save that names no base behaves as before. At most
         * LUPINE_CKPT_MAX_REFS bases per save (-E2BIG past that).
         *
         * save_refer: 0 if committed epoch `epoch` of the save's session
         * exists, is older than the save's epoch, and is now kept with
         * it; -ENOENT if there is no such committed epoch (removed, never
         * committed, or damaged: the daemon then writes everything);
         * -EINVAL for epoch 0 or one not older than the save's. Naming a
         * base twice is 0.
         */
        int (*save_refer)(struct lupine_ckpt_save *save, uint64_t epoch);
        /*
         * save_sync (may be NULL): makes the bytes written to the save so
         * far durable now, so that save_commit has less to do then. A
         * migration's pre-copy (docs/fleet.md) calls it once its writes
         * are done, while the session still runs, and the commit comes
         * later, with the session paused. Nothing becomes visible; the
         * save stays open for more writes. Never called while another
         * callback of the save runs. 0 or -errno (the save then fails).
         */
        int (*save_sync)(struct lupine_ckpt_save *save);
};

typedef const struct lupine_checkpoint_provider *(*lupine_checkpoint_provider_fn)(void);

#ifdef __cplusplus
}
#endif

#endif
