/* SPDX-License-Identifier: MIT */
/*
 * The supervisor's session table: session name -> worker process, and the
 * arena slot each session owns.
 *
 * An entry's index (what the ring's user_data names) is not its arena slot:
 * a worker restoring a checkpoint learns its slot from the checkpoint and
 * reports it only with READY, so an entry may exist before its slot is
 * known (slot -1). New sessions get the lowest free arena slot at once, so
 * that a restarted daemon with the same session mix tends to give the same
 * addresses again; except with fleet_slots (a checkpoint store with
 * leases), where the worker agrees on its slot with the other hosts of the
 * store (worker/slot_lease.c): the entry then has only a hint (slot_hint,
 * the lowest slot free here) until READY names the slot. The table has LUP_ARENA_SLOTS entries, at least
 * max_sessions.
 *
 * An entry goes FREE -> LIVE (claimed; the worker is being started or runs)
 * -> RETIRED (the worker was reaped, but its control socket is still being
 * read to the end or an I/O operation that names the entry is still in
 * flight in the ring) -> FREE. LIVE entries own their name and arena slot,
 * except in phase FAILED (the worker reported that it cannot serve and is
 * on its way out: its name and slot are free again at once). A RETIRED
 * entry still counts against the session limit until the ring has let go
 * of it.
 *
 * While LIVE, the phase says what the session is doing (for routing HELLOs,
 * STATUS= lines and logs); drain progress is kept apart from it because a
 * worker may be told to drain in any phase.
 *
 * This is plain data with no I/O; the supervisor owns the fds and the ring.
 */
#ifndef LUPD_SESSION_REGISTRY_H
#define LUPD_SESSION_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "config.h"
#include "lupine/wire.h"

enum lupd_session_state {
        LUPD_SESSION_FREE = 0,
        LUPD_SESSION_LIVE,
        LUPD_SESSION_RETIRED,
};

enum lupd_session_phase {
        LUPD_PHASE_STARTING = 0, /* worker started for a new client; no READY yet */
        LUPD_PHASE_RESTORING,    /* worker restoring a checkpoint; no READY yet */
        LUPD_PHASE_SERVING,      /* a client is attached */
        LUPD_PHASE_DETACHED,     /* the client went away; the worker waits (TTL) */
        LUPD_PHASE_WAITING,      /* restored, waiting for its client (TTL) */
        LUPD_PHASE_FAILED,       /* READY with an error, or given up on: exiting */
};

/* Resume requests (ATTACH) in flight to one worker at once; a client
 * hammering a session beyond that is told it is busy. */
#define LUPD_MAX_ATTACH_PENDING 4
/* The worker's control messages are tiny, except LUPD_CTL_HOT_MEM (up to
 * 253 records of 16 bytes); anything bigger is a protocol violation,
 * detected with MSG_TRUNC. */
#define LUPD_CTL_RECV_BUF       4096u /* daemon/op_stats.h sizes its messages to it */
/* fds one control message may carry (daemon/ctl.h: LUPD_CTL_MAX_FDS) */
#define LUPD_CTL_RECV_FDS 253u

/* What a session's worker last reported (LUPD_CTL_STATS), and the rates
 * since the report before. */
struct lupd_session_stats {
        bool have;
        uint32_t phase;   /* LUPD_WORK_* */
        uint32_t backend; /* LUP_BACKEND_*: the driver the worker runs on */
        uint64_t calls, bytes_in, bytes_out, mem, epoch, ckpt_unix_ms, done, total;
        uint64_t peer_in, peer_out; /* copies between servers (0 from a worker of before) */
        uint64_t at_ms;             /* CLOCK_MONOTONIC ms it arrived */
        double calls_per_s, bytes_per_s;
};

struct lupd_session {
        enum lupd_session_state state;
        enum lupd_session_phase phase;
        char name[LUP_MAX_NAME + 1];
        int slot;                       /* arena slot, or -1 while unknown (restoring, or fleet_slots) */
        int slot_hint;                  /* fleet_slots: where the worker starts looking (new sessions) */
        pid_t pid;                      /* 0 until the worker is forked */
        int ctl_fd;                     /* supervisor end of the control pair, or -1 */
        bool ctl_busy;                  /* a recv on ctl_fd is in flight in the ring */
        bool ctl_eof;                   /* the worker closed its end, or we stopped listening */
        bool ready;                     /* LUPD_CTL_READY arrived (with any status) */
        bool restore;                   /* started with --restore */
        bool adopt;                     /* ... on demand, for a client's HELLO (supervisor/adopt.c) */
        bool migrating;                 /* drained for lupinectl migrate (supervisor/migrate.c) */
        bool shutdown_sent;             /* LUPD_CTL_SHUTDOWN */
        bool drain_sent;                /* LUPD_CTL_DRAIN */
        bool drain_done;                /* LUPD_CTL_DRAINED arrived, or the verdict is in */
        bool was_pristine;              /* at DRAIN: restored and never touched since */
        bool reaped;                    /* waitpid() returned it: pid means nothing now */
        int wait_status;                /* from waitpid(), once reaped */
        int attach_pending;             /* ATTACHes sent, ATTACHED not yet back */
        char attach_peer[LUPD_MAX_ATTACH_PENDING][96]; /* FIFO, for the log */
        uint64_t restore_epoch;         /* restore: the checkpoint epoch the provider listed */
        uint32_t drain_flags;           /* LUPD_DRAIN_* sent with DRAIN */
        bool handback_got;              /* LUPD_CTL_HANDBACK arrived */
        bool hot_conn;                  /* restore worker was handed its client's connection */
        uint64_t hot_fds;               /* memory fds received (HOT_MEM) */
        uint64_t hot_bytes;             /* ... and the bytes they hold */
        /* limits (docs/security.md) */
        bool in_grace;                   /* DETACHED, never checkpointed: --detach-grace applies */
        uint64_t detached_ms;            /* CLOCK_MONOTONIC ms of the last DETACHED */
        char client[96];                 /* the client's address while it has one */
        struct lupd_session_stats stats; /* the worker's last LUPD_CTL_STATS */
        /* the health watch (supervisor/health.c) */
        uint64_t beat_ms;         /* CLOCK_MONOTONIC ms of the last heartbeat; 0: none yet */
        uint64_t watched_ms;      /* ... when the watch first saw this entry */
        uint32_t devices;         /* the GPUs it uses, from its last heartbeat (bit N: device N) */
        int beats_missed;         /* checks in a row that found the heartbeat late */
        bool unresponsive;        /* beats_missed reached --health-retries */
        bool health_drain;        /* drained by the health watch, the daemon going on */
        uint64_t drain_deadline;  /* ... killed if not done by then (CLOCK_MONOTONIC ms) */
        uint64_t work_started_ms; /* DRAIN sent, or the restore worker started (CLOCK_MONOTONIC ms) */
        /* a checkpoint the operator asked for (ADMIN CHECKPOINT) */
        bool ckpt_asked;           /* ever: STATUS then carries last_checkpoint_error */
        bool ckpt_running;         /* LUPD_CTL_CHECKPOINT sent, CHECKPOINTED not yet back */
        uint64_t ckpt_started_ms;  /* CLOCK_MONOTONIC ms it was sent */
        char ckpt_error[160];      /* why the last one failed; "" after success, or while one runs */
        bool ckpt_periodic;        /* ... the running one is --checkpoint-interval's (supervisor/periodic.c) */
        uint64_t periodic_last_ms; /* CLOCK_MONOTONIC ms the last checkpoint ended (0: not seen yet) */
        uint64_t periodic_calls;   /* the calls the worker had reported when the last periodic one began */
        uint8_t ctl_buf[LUPD_CTL_RECV_BUF];
        /* recvmsg state for the ring: fds arrive with HOT_MEM and HANDBACK */
        struct iovec ctl_iov;
        struct msghdr ctl_msg;
        union {
                char buf[CMSG_SPACE(sizeof(int) * LUPD_CTL_RECV_FDS)];
                struct cmsghdr align;
        } ctl_cmsg;
};

struct lupd_registry {
        struct lupd_session s[LUP_ARENA_SLOTS];
        int max_sessions;               /* 1..LUPD_MAX_SESSIONS */
        int n_used;                     /* entries not FREE */
        uint64_t unusable;              /* arena slots never handed out (supervisor/arena_check.c) */
        bool fleet_slots;               /* new sessions' workers choose their slot in the store */
};

/* Sets every entry FREE (ctl_fd = -1, slot = -1) and the session limit. */
void lupd_registry_init(struct lupd_registry *reg, int max_sessions);

/* Claims an entry for a new session called `name` (a valid session name,
 * NUL-terminated) together with the lowest free arena slot not in avoid
 * (bit n: slot n; the client's HELLO, LUP_HELLO_AVOID_SLOTS). Returns the
 * entry index, -EINVAL for a bad name, -EBUSY if a session of that name is
 * registered, or -ENOSPC if max_sessions entries are in use (or every
 * usable arena slot, see `unusable`). The entry is
 * LIVE, phase STARTING, pid 0, ctl_fd -1. With fleet_slots the slot is
 * only the entry's slot_hint (slot -1) until lupd_registry_set_slot. */
int lupd_registry_claim(struct lupd_registry *reg, const char *name, uint64_t avoid);

/* The same for a session being restored: no arena slot yet (slot -1),
 * phase RESTORING, restore set. */
int lupd_registry_claim_restore(struct lupd_registry *reg, const char *name);

/* Gives entry idx (restoring, or new with fleet_slots) the arena slot its
 * worker took (a checkpoint names it, or the fleet agreed on it). Returns
 * 0, -ERANGE if slot is not an arena slot, or -EADDRINUSE if another
 * registered session holds it (*ret_holder is then that entry). */
int lupd_registry_set_slot(struct lupd_registry *reg, int idx, int slot, int *ret_holder);

/* The registered (LIVE, not FAILED) entry called `name`, or -ENOENT. */
int lupd_registry_find_name(const struct lupd_registry *reg, const char *name);

/* The LIVE entry whose worker is `pid`, or -ESRCH. */
int lupd_registry_find_pid(const struct lupd_registry *reg, pid_t pid);

/* LIVE -> RETIRED: the name and slot become free at once, the entry does not. */
void lupd_registry_retire(struct lupd_registry *reg, int idx);

/* Any state -> FREE. The caller has closed ctl_fd. */
void lupd_registry_release(struct lupd_registry *reg, int idx);

/* Number of LIVE entries (workers not yet reaped). */
int lupd_registry_live(const struct lupd_registry *reg);
/* Number of RETIRED entries (reaped workers whose control socket is not read to the end yet). */
int lupd_registry_retired(const struct lupd_registry *reg);

/* Number of LIVE entries in `phase`. */
int lupd_registry_count_phase(const struct lupd_registry *reg, enum lupd_session_phase phase);

/* A word for the phase, for logs and STATUS= lines. */
const char *lupd_phase_name(enum lupd_session_phase phase);

#endif
