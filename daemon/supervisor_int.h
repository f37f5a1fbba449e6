/* SPDX-License-Identifier: MIT */
/*
 * Supervisor internals shared by its three files:
 *   supervisor.c         the loop, the ring, listeners, signals, shutdown;
 *   supervisor_conn.c    pending connections: reading and judging HELLO;
 *   supervisor_worker.c  starting, watching and reaping workers.
 * Nothing outside daemon/supervisor*.c includes this.
 */
#ifndef LUPD_SUPERVISOR_INT_H
#define LUPD_SUPERVISOR_INT_H

#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#include "config.h"
#include "lupine/wire.h"
#include "net.h"
#include "session_registry.h"
#include "supervisor.h"

/*
 * user_data layout (64 bits), built by ud_make() and taken apart by
 * ud_kind() and ud_index():
 *
 *   63        56 55                     32 31                          0
 *  +------------+-------------------------+-----------------------------+
 *  |    kind    |     reserved, zero      |            index            |
 *  +------------+-------------------------+-----------------------------+
 *
 *   kind   enum ev_kind: which handler gets the completion.
 *   index  listener index (EV_ACCEPT), pending-connection slot
 *          (EV_CONN_RECV) or session/arena slot (EV_CTL_RECV); zero for
 *          the singletons.
 *
 * An index is not reused while an operation naming it is in flight
 * (listener->armed, conn->recv_busy, session->ctl_busy), so a completion
 * always belongs to the object now at its index.
 */
enum ev_kind {
        EV_IGNORE = 0,  /* cancellation requests; their own CQEs carry nothing */
        EV_ACCEPT,
        EV_CONN_RECV,
        EV_CTL_RECV,
        EV_SIGNAL,      /* POLLIN on the signalfd */
        EV_TICK,
};

static inline uint64_t ud_make(enum ev_kind kind, uint32_t index)
{
        return ((uint64_t)kind << 56) | index;
}

static inline enum ev_kind ud_kind(uint64_t ud)
{
        return (enum ev_kind)(ud >> 56);
}

static inline uint32_t ud_index(uint64_t ud)
{
        return (uint32_t)ud;
}

struct listener {
        int fd;                 /* -1 once closed */
        const struct lup_endpoint *ep;
        bool armed;             /* an accept is in flight */
        bool armed_multishot;   /* ... and it is a multishot one */
        bool paused;            /* accept failed for want of resources; the tick re-arms */
};

struct conn {
        int fd;                 /* -1: slot free */
        bool recv_busy;         /* a recv into this slot is in flight */
        bool closing;           /* dropped; fd is closed when that recv completes */
        bool have_hdr;          /* hdr is decoded; now reading the payload */
        uint64_t deadline;      /* CLOCK_MONOTONIC ms by which HELLO must be complete */
        size_t got;             /* bytes of the current part (header, then payload) */
        struct lup_hdr hdr;
        uint8_t hdr_buf[LUP_HDR_SIZE];
        uint8_t *payload;       /* hdr.len bytes, allocated once the header is valid */
        char peer[160];
};

struct log_limit {
        uint64_t window_start;
        unsigned lines;
        unsigned suppressed;
};

struct sup {
        struct io_uring ring;
        struct lupd_config *cfg;
        struct listener listeners[LUPD_MAX_LISTEN];
        int n_listeners;
        struct conn conns[LUPD_MAX_PENDING];
        int n_conns;            /* slots in use, closing ones included */
        struct lupd_registry reg;
        int sigfd;
        bool sig_busy;          /* a poll on sigfd is in flight */
        bool multishot;         /* accept with IORING_ACCEPT_MULTISHOT */
        struct __kernel_timespec tick_ts;
        unsigned tick_ms;
        bool tick_busy;
        bool stopping;
        bool killed;            /* stragglers got SIGKILL */
        uint64_t stop_deadline; /* SIGKILL the workers left at this time */
        uint64_t kill_deadline; /* give up waiting for them at this time */
        struct log_limit conn_log;
};

static inline int safe_close(int fd)
{
        if (fd >= 0)
                close(fd);
        return -1;
}

/* ---- supervisor.c */

/* CLOCK_MONOTONIC in milliseconds. */
uint64_t sup_now_ms(void);
/* An SQE, submitting what is queued if the SQ is full. NULL only if the
 * kernel will not take more right now (callers treat it like ENOMEM). */
struct io_uring_sqe *sup_sqe(struct sup *s);
/* Cancels the in-flight op `ud` on socket `fd`; if no SQE is to be had,
 * shuts the socket down instead, which completes the op just as well.
 * Every caller is about to close that socket anyway. */
void sup_cancel_op(struct sup *s, uint64_t ud, int fd);
/* Whether one more connection-related log line fits the rate limit. */
bool sup_conn_log_allow(struct sup *s);

/* ---- supervisor_conn.c */

/* Takes a freshly accepted connection from listener l (or closes it when
 * LUPD_MAX_PENDING are waiting) and starts reading its HELLO. */
void sup_conn_new(struct sup *s, const struct listener *l, int fd);
/* Completion of the recv into pending-connection slot idx. */
void sup_conn_on_recv(struct sup *s, int idx, int res);
/* Logs one line saying why, sends a HELLO refusal when refuse_status != 0
 * and the header was valid, and drops the connection. */
void sup_conn_close(struct sup *s, int idx, uint32_t refuse_status, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

/* ---- supervisor_worker.c */

/* Starts the worker for the freshly claimed registry slot and hands it the
 * connection with its HELLO (header hdr, payload of hdr->len bytes).
 * Returns 0 (the slot is LIVE until the reaper frees it) or -errno (the
 * slot is released and no worker was started). */
int sup_session_start(struct sup *s, int slot, int client_fd, const struct lup_hdr *hdr, const uint8_t *payload,
                      const char *peer);
/* Completion of the recv on the control socket of session slot. */
void sup_ctl_on_recv(struct sup *s, int slot, int res);
/* waitpid() every worker that has exited, log how, free its session. */
void sup_reap_workers(struct sup *s);
/* LUPD_CTL_SHUTDOWN to every live worker; returns how many were told. */
int sup_workers_shutdown(struct sup *s);
/* SIGKILL every live worker, saying which. */
void sup_workers_kill(struct sup *s);

#endif
