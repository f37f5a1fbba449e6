/* SPDX-License-Identifier: MIT */
/*
 * The supervisor's session table: session name -> worker process, and the
 * arena slot each session owns.
 *
 * The slot index is the arena slot (LUP_ARENA_BASE + slot * LUP_ARENA_SIZE),
 * so the table has exactly LUP_ARENA_SLOTS entries and a session's index
 * never changes while it lives. Slots are handed out lowest first so that a
 * restarted daemon with the same session mix tends to give the same
 * addresses again.
 *
 * A slot goes FREE -> LIVE (claimed; the worker is being started or runs)
 * -> DRAINING (the worker was reaped, but an I/O operation that names the
 * slot is still in flight in the ring) -> FREE. Only LIVE sessions own their
 * name; a DRAINING slot still counts against the session limit until the
 * ring has let go of it.
 *
 * This is plain data with no I/O; the supervisor owns the fds and the ring.
 */
#ifndef LUPD_SESSION_REGISTRY_H
#define LUPD_SESSION_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "lupine/wire.h"

enum lupd_session_state {
        LUPD_SESSION_FREE = 0,
        LUPD_SESSION_LIVE,
        LUPD_SESSION_DRAINING,
};

/* The worker's control messages are tiny; anything bigger is a protocol
 * violation, detected with MSG_TRUNC. */
#define LUPD_CTL_RECV_BUF 64u

struct lupd_session {
        enum lupd_session_state state;
        char name[LUP_MAX_NAME + 1];
        pid_t pid;                      /* 0 until the worker is forked */
        int ctl_fd;                     /* supervisor end of the control pair, or -1 */
        bool ctl_busy;                  /* a recv on ctl_fd is in flight in the ring */
        bool ctl_eof;                   /* the worker closed its end */
        bool ready;                     /* LUPD_CTL_READY arrived */
        bool shutdown_sent;
        uint8_t ctl_buf[LUPD_CTL_RECV_BUF];
};

struct lupd_registry {
        struct lupd_session s[LUP_ARENA_SLOTS];
        int max_sessions;               /* 1..LUPD_MAX_SESSIONS */
        int n_used;                     /* slots not FREE */
};

/* Sets every slot FREE (ctl_fd = -1) and the session limit. */
void lupd_registry_init(struct lupd_registry *reg, int max_sessions);

/* Claims the lowest free slot for a new session called `name` (a valid
 * session name, NUL-terminated). Returns the slot index, -EBUSY if a LIVE
 * session already has that name, or -ENOSPC if max_sessions slots are in
 * use. The claimed slot is LIVE with pid 0 and ctl_fd -1. */
int lupd_registry_claim(struct lupd_registry *reg, const char *name);

/* The LIVE slot whose worker is `pid`, or -ESRCH. */
int lupd_registry_find_pid(const struct lupd_registry *reg, pid_t pid);

/* LIVE -> DRAINING: the name becomes free at once, the slot does not. */
void lupd_registry_retire(struct lupd_registry *reg, int slot);

/* Any state -> FREE. The caller has closed ctl_fd. */
void lupd_registry_release(struct lupd_registry *reg, int slot);

/* Number of LIVE sessions (workers not yet reaped). */
int lupd_registry_live(const struct lupd_registry *reg);

#endif
