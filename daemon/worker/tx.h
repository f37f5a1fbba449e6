/* SPDX-License-Identifier: MIT */
/*
 * What the worker sends its client (worker/tx.c): the reply stream and its
 * log, heartbeats, and the connection's write side.
 *
 * The reply stream is every REPLY and DATA frame after the HELLO reply,
 * counted in bytes over the session's life (abi/lupine/wire.h,
 * "Heartbeats and the reply stream"). Every stream frame is copied into the
 * reply log before it is written, so a frame whose write failed, or that
 * died in the network, is still there when the client resumes and says how
 * much it received; the log keeps the newest LUPINE_REPLY_CACHE_MB (default
 * 32) and forgets what the client acknowledges (PING payloads, HELLO).
 *
 * Threads: the main thread executes calls and writes; the heartbeat thread
 * writes an ALIVE frame now and then while the main thread is busy (a long
 * synchronisation, a drain). Whole frames are written under tx.lock, which
 * also guards s->fd changes, so the two never interleave inside a frame.
 */
#ifndef LUPD_WORKER_TX_H
#define LUPD_WORKER_TX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "frame.h"
#include "lupine/checkpoint_provider.h"

#define LUPW_REPLY_CACHE_MB 32u         /* LUPINE_REPLY_CACHE_MB: the reply log's bound */
#define LUPW_MAX_REPLY_CACHE_MB 4096u
#define LUPW_CLIENT_TIMEOUT_MS 60000u   /* LUPINE_CLIENT_TIMEOUT_MS: a write may stall this long */

struct lupw_session;
struct lup_tls;

struct lupw_tx {
        pthread_mutex_t lock;           /* whole frames on s->fd, and s->fd changes */
        pthread_cond_t cond;            /* wakes the heartbeat thread to stop */
        pthread_t thread;
        bool thread_on, stop;           /* under lock */
        uint32_t hb_ms;                 /* the client's heartbeat interval; 0: no ALIVE frames */
        bool resend;                    /* the client counts the reply stream: keep the log */
        bool broken;                    /* a write failed: log only, until the next connection */
        bool goodbye;                   /* GOODBYE was sent on this connection */
        bool log_unknown;               /* restored without a log: adopt the client's count */
        unsigned client_timeout_ms;
        _Atomic uint64_t busy_since_ns; /* the main thread is working (0: waiting for input) */
        _Atomic uint64_t last_tx_ns;    /* the last write to the client */
        _Atomic uint64_t running_seq;   /* the call being executed */
        /* the reply log: stream bytes [start, end); the newest `cap` at most */
        uint8_t *buf;
        size_t cap;
        uint64_t start, end;
};

/* Sets up tx (mutex, the configuration from the environment); nothing runs yet. */
void lupw_tx_init(struct lupw_session *s);
/* Starts the heartbeat thread. 0 or -errno (logged; the session runs without). */
int lupw_tx_start(struct lupw_session *s);
/* Stops the thread and frees the log. */
void lupw_tx_free(struct lupw_session *s);

/* Installs fd as the client connection (or -1), under the lock: socket
 * options (send timeout, TCP_USER_TIMEOUT), a fresh write side, and its
 * TLS session (NULL: plain). Returns the previous fd, which the caller
 * closes, and its TLS session in *ret_old_tls (if not NULL), which the
 * caller frees. */
int lupw_tx_set_fd(struct lupw_session *s, int fd, struct lup_tls *tls, struct lup_tls **ret_old_tls);

/* Writes one or more whole frames to the client. stream: they are part of
 * the reply stream (logged first, even if the write then fails). -EPIPE
 * once a write failed or timed out (the reason is set). */
int lupw_send(struct lupw_session *s, struct iovec *iov, int iovcnt, bool stream);
/* A frame outside the stream (HELLO reply, refusal, GOODBYE) to fd. */
int lupw_send_ctl(struct lupw_session *s, int fd, struct lup_tls *tls, const struct lup_hdr *h, const void *payload,
                  size_t len);

/* The main thread starts (busy) or stops working on input. */
void lupw_tx_busy(struct lupw_session *s, bool busy);

/* A PING's payload: the client received the stream up to rx. 0, or
 * -EBADMSG (reason set) for a count beyond what was sent. */
int lupw_tx_ack(struct lupw_session *s, uint64_t rx);
/* A HELLO (new or resumed): takes its heartbeat interval and stream count
 * and says which stream bytes will be resent: [*ret_from, *ret_end). */
void lupw_tx_hello(struct lupw_session *s, const struct lup_hello *h, uint64_t *ret_from, uint64_t *ret_end);
/* Writes the logged stream bytes [from, end) again (after the HELLO reply). */
int lupw_tx_resend(struct lupw_session *s, uint64_t from);
/* -EPIPE (with s->why set) once the connection broke while answers were
 * written to the log; 0 otherwise. */
int lupw_tx_failed(struct lupw_session *s);

/* The log in a checkpoint: object "replies" (magic, version, start, end,
 * bytes, hash). Saving: 0 or -errno. Loading: a missing object leaves the
 * log unknown (the first HELLO's count is adopted); a damaged one fails. */
int lupw_tx_save(struct lupw_session *s, struct lupine_ckpt_save *save);
int lupw_tx_load(struct lupw_session *s, struct lupine_ckpt_load *ld, char *why, size_t whylen);

#endif
