/* SPDX-License-Identifier: MIT */
/*
 * Supervisor <-> worker control channel: an AF_UNIX SOCK_SEQPACKET pair
 * created by the supervisor; the worker gets its end as fd 3
 * (`lupined --worker --ctl-fd=3 ...`). Messages are little-endian, encoded
 * with common/buf.h; each message is one datagram.
 *
 *   LUPD_CTL_ASSIGN (supervisor -> worker), with the client connection fd
 *   attached (SCM_RIGHTS, exactly one fd):
 *       u32 type, u32 slot (arena slot, < LUP_ARENA_SLOTS, or'ed with
 *       LUPD_ASSIGN_ANY_SLOT), u64 hello_seq, u32 hello_lane,
 *       u32 hello_len, hello payload bytes
 *       [, u32 LUPD_CTL_TLS, ticket[LUP_TICKET_SIZE]]
 *     With LUPD_ASSIGN_ANY_SLOT (a checkpoint store with leases), slot is
 *     only where to start looking: the worker takes the first slot that no
 *     session of the fleet sharing the store holds (worker/slot_lease.c)
 *     and names it in READY.
 *     A new session. The HELLO payload was already decoded and validated by
 *     the supervisor; the worker decodes it again (it trusts nothing) and
 *     answers the client itself. Its name is the session key (the tenant's
 *     namespace, supervisor/auth.c), and it carries no bearer token.
 *     With the TLS trailer, the connection is a TLS one the supervisor
 *     handed off (lupine/wire.h, "TLS"): the worker runs the second
 *     handshake, reads HANDOFF with this ticket, then answers the HELLO.
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
 *   LUPD_CTL_LOG_LEVELS (supervisor -> worker): u32 type, then the new
 *     --log-level spec (no NUL; lupinectl config set log_level ...).
 *   LUPD_CTL_SHUTDOWN (supervisor -> worker): u32 type [, u32 flags
 *     (LUPD_SHUTDOWN_FORGET)]
 *     The worker says GOODBYE to its client and exits 0 (no checkpoint).
 *   LUPD_CTL_DRAIN (supervisor -> worker): u32 type [, u32 flags]
 *     Drain: stop reading frames, finish the ones already received,
 *     synchronise, send GOODBYE ("going away, executed up to N"),
 *     checkpoint through the provider, report LUPD_CTL_DRAINED, exit.
 *     flags (LUPD_DRAIN_*; a 4-byte DRAIN means LUPD_DRAIN_DURABLE):
 *       DURABLE   the memory contents go through the provider (mem/...);
 *       HOT       every arena chunk is exported as a POSIX fd and sent
 *                 back with LUPD_CTL_HOT_MEM (the manifest says which);
 *       HANDBACK  no GOODBYE: the client connection goes back to the
 *                 supervisor with LUPD_CTL_HANDBACK (zero-disconnect
 *                 upgrade). At least one of DURABLE and HOT is set.
 *   LUPD_CTL_HOT_MEM (worker -> supervisor), after DRAIN with HOT, once the
 *     checkpoint is committed and before DRAINED; n fds attached
 *     (SCM_RIGHTS), one per record, in order:
 *       u32 type, u32 n (1..LUPD_CTL_MAX_FDS), u64 epoch,
 *       n x { u64 chunk address, u64 chunk size }
 *     As many messages as it takes (at most LUPD_CTL_MAX_FDS fds each:
 *     the kernel's SCM_MAX_FD).
 *   LUPD_CTL_HANDBACK (worker -> supervisor), after DRAIN with HANDBACK,
 *     after the HOT_MEM messages and before DRAINED:
 *       u32 type, u32 input bytes, u64 epoch, u64 last executed seq
 *     with the client connection attached, and when input bytes > 0 a
 *     sealed memfd holding them second: a frame the worker had read in
 *     part when it stopped. The rest is still in the socket.
 *   LUPD_CTL_DRAINED (worker -> supervisor): u32 type, i32 status
 *     (0: checkpoint committed; -ENOTRECOVERABLE: not checkpointed because
 *     the session's CUDA context has a sticky error of its own, and older
 *     checkpoints stay; other < 0: -errno, the session is lost; the worker
 *     logged why), then (LUPD_CTL_DRAINED_LEN bytes in all; an older
 *     worker's 8 are read as zeros) u64 memory bytes a pre-copy wrote
 *     while the session ran, u64 memory bytes written while it was
 *     paused, u64 microseconds that paused checkpoint took.
 *   LUPD_CTL_STATS (worker -> supervisor), at any time, at most about once
 *     a second while the session works, and on progress of a checkpoint or
 *     restore: u32 type, u32 phase (LUPD_WORK_*: 0 none, 1 checkpoint,
 *     2 restore), u32 the driver it runs on (LUP_BACKEND_CUDA or _SIM:
 *     what --backend auto chose), u32 0, u64 calls executed, u64 bytes received, u64 bytes sent,
 *     u64 device memory held, u64 epoch of the last committed checkpoint
 *     (0: none), u64 its wall-clock time (ms since the epoch; 0: none),
 *     u64 bytes of the phase done, u64 bytes of the phase in all,
 *     u64 bytes copies between servers brought in, u64 bytes they sent
 *     daemon to daemon (LUPD_CTL_STATS_LEN bytes; an older worker's
 *     LUPD_CTL_STATS_LEN_V1 lack the last two). lupinectl status and the metrics show it.
 *   LUPD_CTL_CHECKPOINT (supervisor -> worker): u32 type
 *     A durable checkpoint now, and the session goes on (lupinectl
 *     sessions checkpoint; worker/ckpt_now.c says what it waits for and
 *     why the result is consistent). Between two calls, once no stream
 *     capture and no module upload is open (at most
 *     LUPD_CKPT_NOW_WAIT_MS), the worker finishes what it accepted,
 *     synchronises, puts every answer in the reply log and saves through
 *     the provider as a drain does, but sends no GOODBYE and keeps
 *     serving. At most one at a time (the supervisor sees to it).
 *   LUPD_CTL_CHECKPOINTED (worker -> supervisor), once per CHECKPOINT:
 *       u32 type, i32 status, u64 epoch  (LUPD_CTL_CHECKPOINTED_LEN bytes)
 *     0: committed, epoch is the new checkpoint's; < 0: -errno, not
 *     checkpointed (older checkpoints stay; epoch is the last committed):
 *     -EBUSY a capture or upload stayed open, -ENOTRECOVERABLE the
 *     context has a sticky error of its own, -ECANCELED a DRAIN came
 *     first (it checkpoints anyway), other: the save failed (logged).
 *   LUPD_CTL_OP_STATS (worker -> supervisor), with STATS, before DRAINED
 *     and at the session's end: calls, bytes and latency by op since the
 *     last one (layout and meaning: daemon/op_stats.h).
 *
 * A restore worker started with --hot first reads, before it touches the
 * driver (supervisor -> worker, sent right after the fork):
 *   LUPD_CTL_HOT_MAP: u32 type, u32 n (1..LUPD_CTL_MAX_FDS), u64 epoch,
 *       n x u64 chunk address, with n memory fds attached in that order;
 *       any number of these;
 *   LUPD_CTL_CONN (optional): u32 type, u32 input bytes, u64 epoch, with
 *       the client connection (and the input memfd) attached, as in
 *       HANDBACK: the worker serves it as soon as the session is restored,
 *       without a HELLO (the client never knew it was gone);
 *   LUPD_CTL_HOT_END: u32 type, u32 memory fds sent in all, u64 epoch.
 * It imports the fds whose address and epoch match its manifest, maps them
 * where they were, and copies no bytes; a chunk without an fd comes from
 * the durable copy if the checkpoint has one, otherwise the session is
 * refused (READY < 0) and the worker exits.
 *
 * Worker command line (built by the supervisor):
 *   lupined --worker --ctl-fd=3 --backend=KIND --log-level=N
 *           [--checkpoint-dir=DIR | --checkpoint-provider=PATH [--checkpoint-config=STR]]
 *           [--session-ttl=SECONDS] [--checkpoint-lanes=N] [--checkpoint-verify]
 *           [--restore=SESSION [--hot]]
 * With --restore the worker loads SESSION's newest committed checkpoint,
 * reports READY (with the slot from the checkpoint) and waits for ATTACH
 * (or, given a connection with LUPD_CTL_CONN, serves it at once).
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
        LUPD_CTL_HOT_MEM = 9,
        LUPD_CTL_HANDBACK = 10,
        LUPD_CTL_HOT_MAP = 11,
        LUPD_CTL_CONN = 12,
        LUPD_CTL_HOT_END = 13,
        LUPD_CTL_STATS = 14,
        LUPD_CTL_LOG_LEVELS = 15,
        LUPD_CTL_HEARTBEAT = 16,
        LUPD_CTL_CHECKPOINT = 17,
        LUPD_CTL_CHECKPOINTED = 18,
        LUPD_CTL_OP_STATS = 19,   /* calls, bytes and latency by op: daemon/op_stats.h */
        LUPD_CTL_MIGRATE_TO = 20, /* supervisor -> worker, before a DRAIN: u32 type, then 1..LUP_GOODBYE_TO_MAX
                                   * bytes: the endpoint the drain's GOODBYE names (lupinectl migrate) */
        LUPD_CTL_PEER = 21,       /* supervisor -> worker: a peer connection (LUP_HELLO_PEER), the layout and
                                   * fd of ATTACH (slot 0); the worker checks the ticket, takes the copy's
                                   * bytes and closes it (worker/peer.c) */
};

/* LUPD_CTL_HEARTBEAT (worker -> supervisor), every --health-interval from
 * a thread of its own (worker/sup_beat.c), in any phase: u32 type, u32
 * the GPUs the session holds a context or memory on (bit N: device N).
 * The health watch (supervisor/health.c) counts a worker whose heartbeat
 * is older than --health-timeout as not answering. */
#define LUPD_CTL_HEARTBEAT_LEN 8u
#define LUPD_CTL_DRAINED_LEN   32u /* with the pre-copy and pause figures */

/* LUPD_CTL_CHECKPOINTED */
#define LUPD_CTL_CHECKPOINTED_LEN 16u
/* How long a CHECKPOINT waits for a stream capture or a module upload to
 * end before it gives up with -EBUSY. */
#define LUPD_CKPT_NOW_WAIT_MS     10000u

/* LUPD_CTL_SHUTDOWN's optional u32 flags */
#define LUPD_SHUTDOWN_FORGET 1u /* delete the session's checkpoint first (lupinectl sessions kill --delete) */

/* LUPD_CTL_STATS */
#define LUPD_CTL_STATS_LEN    96u
#define LUPD_CTL_STATS_LEN_V1 80u /* a worker of before the peer bytes */
enum lupd_work_phase {
        LUPD_WORK_NONE = 0,
        LUPD_WORK_CHECKPOINT = 1,
        LUPD_WORK_RESTORE = 2
};

enum lupd_drain_flags {
        LUPD_DRAIN_DURABLE = 1u << 0,
        LUPD_DRAIN_HOT = 1u << 1,
        LUPD_DRAIN_HANDBACK = 1u << 2,
};

/* ASSIGN's slot: the worker chooses, starting at the slot given */
#define LUPD_ASSIGN_ANY_SLOT 0x80000000u

/* The optional trailer of ASSIGN and ATTACH: u32 LUPD_CTL_TLS, ticket */
#define LUPD_CTL_TLS         0x534c5454u /* "TTLS" */
#define LUPD_CTL_TLS_TRAILER (4u + 16u)

/* fds in one control message: the kernel's SCM_MAX_FD */
#define LUPD_CTL_MAX_FDS 253u
/* LUPD_CTL_HOT_MEM: fixed part, then one record per fd */
#define LUPD_CTL_HOT_MEM_FIXED 16u
#define LUPD_CTL_HOT_MEM_REC 16u
/* LUPD_CTL_HOT_MAP */
#define LUPD_CTL_HOT_MAP_FIXED 16u
/* LUPD_CTL_HANDBACK */
#define LUPD_CTL_HANDBACK_LEN 24u
/* LUPD_CTL_CONN, LUPD_CTL_HOT_END */
#define LUPD_CTL_CONN_LEN 16u
#define LUPD_CTL_HOT_END_LEN 16u

#define LUPD_CTL_MAX_MSG (64u * 1024u)

#endif
