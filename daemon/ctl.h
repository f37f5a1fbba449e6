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
 *     The HELLO payload was already decoded and validated by the supervisor;
 *     the worker decodes it again (it trusts nothing) and answers the client
 *     itself.
 *   LUPD_CTL_READY (worker -> supervisor): u32 type, i32 status
 *     (0: session serving; < 0: -errno, the worker then exits)
 *   LUPD_CTL_SHUTDOWN (supervisor -> worker): u32 type
 *     The worker says GOODBYE to its client and exits 0.
 */
#ifndef LUPD_CTL_H
#define LUPD_CTL_H

enum lupd_ctl_type {
        LUPD_CTL_ASSIGN = 1,
        LUPD_CTL_READY = 2,
        LUPD_CTL_SHUTDOWN = 3,
};

#define LUPD_CTL_MAX_MSG (64u * 1024u)

#endif
