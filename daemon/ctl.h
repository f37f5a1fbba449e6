/* SPDX-License-Identifier: MIT */
/*
 * Supervisor <-> worker control channel: an AF_UNIX SOCK_SEQPACKET pair
 * created by the supervisor; the worker gets its end as fd 3
 * (`lupined --worker --ctl-fd=3 ...`). Messages are little-endian, encoded
 * with common/buf.h; each message is one datagram.
 *
 *   LUPD_CTL_ASSIGN (supervisor -> worker), with the client connection fd
 *   attached (SCM_RIGHTS, exactly one fd):
 *       u32 type, u32 slot (arena slot, < LUP_ARENA_SLOTS),
 *       u64 hello_seq, u32 hello_lane, u32 hello_len, hello payload bytes
 *     A new session. The HELLO payload was already decoded and validated by
 *     the supervisor; the worker decodes it again (it trusts nothing) and
 *     answers the client itself.
 *   LUPD_CTL_ATTACH (supervisor -> worker), same layout and fd as ASSIGN
 *     (slot is ignored): a client asks to resume this worker's session (a
 *     HELLO naming it). The worker checks the resume token in the HELLO in
 *     constant time; on a match it drops any old connection, answers the
 *     HELLO (with the last executed sequence number) and serves the new
 *     connection; otherwise it refuses that client ("wrong resume token")
 *     and keeps the session as it was. It reports with LUPD_CTL_ATTACHED.
 *   LUPD_CTL_READY (worker -> supervisor): u32 type, i32 status, u32 slot
 *     0: the session is served (ASSIGN) or restored and waiting for its
 *     client (restore mode); slot is the arena slot it occupies.
 *     < 0: -errno; the worker then exits.
 *   LUPD_CTL_ATTACHED (worker -> supervisor): u32 type, i32 status
 *     (0 resumed, -EPERM wrong token, other -errno).
 *   LUPD_CTL_DETACHED (worker -> supervisor): u32 type, i32 status (0)
 *     The client connection was lost without a GOODBYE. The worker keeps the
 *     session for --session-ttl seconds, waiting for an ATTACH.
 *   LUPD_CTL_SHUTDOWN (supervisor -> worker): u32 type
 *     The worker says GOODBYE to its client and exits 0 (no checkpoint).
 *   LUPD_CTL_DRAIN (supervisor -> worker): u32 type
 *     Drain: stop reading frames, finish the ones already received,
 *     synchronise, send GOODBYE ("going away, executed up to N"),
 *     checkpoint through the provider, report LUPD_CTL_DRAINED, exit.
 *   LUPD_CTL_DRAINED (worker -> supervisor): u32 type, i32 status
 *     (0: checkpoint committed; < 0: -errno, the session is lost; the
 *     worker logged why).
 *
 * Worker command line (built by the supervisor):
 *   lupined --worker --ctl-fd=3 --backend=KIND --log-level=N
 *           [--checkpoint-dir=DIR | --checkpoint-provider=PATH [--checkpoint-config=STR]]
 *           [--session-ttl=SECONDS] [--restore=SESSION]
 * With --restore the worker loads SESSION's newest committed checkpoint,
 * reports READY (with the slot from the checkpoint) and waits for ATTACH.
 */
#ifndef LUPD_CTL_H
#define LUPD_CTL_H

enum lupd_ctl_type {
        LUPD_CTL_ASSIGN = 1,
        LUPD_CTL_READY = 2,
        LUPD_CTL_SHUTDOWN = 3,
        LUPD_CTL_ATTACH = 4,
        LUPD_CTL_ATTACHED = 5,
        LUPD_CTL_DETACHED = 6,
        LUPD_CTL_DRAIN = 7,
        LUPD_CTL_DRAINED = 8,
};

#define LUPD_CTL_MAX_MSG (64u * 1024u)

#endif
