/* SPDX-License-Identifier: MIT */
/*
 * The shim's connection, shared by client.c (frames on a live connection,
 * HELLO, init) and reconnect.c (getting the session back after a loss).
 * Internal to the shim; client.c's header comment describes the states,
 * the locks and exactly-once.
 */
#ifndef LUPC_CONN_H
#define LUPC_CONN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "client.h"
#include "frame.h"
#include "net.h"
#include "replay.h"
#include "transport.h"

#define LUPC_DEFAULT_SERVER       "127.0.0.1:14833"
#define LUPC_DEFAULT_RECONNECT_S 900u
#define LUPC_MAX_RECONNECT_S (30u * 24u * 3600u)
#define LUPC_MIN_REPLAY_MB 2u                 /* above one maximal frame */
#define LUPC_MAX_REPLAY_MB (64u * 1024u)
#define LUPC_BACKOFF_FIRST_MS 100u
#define LUPC_BACKOFF_CAP_MS 10000u
#define LUPC_HANDSHAKE_TIMEOUT_MS 10000      /* a reconnect HELLO must be answered within this */
#define LUPC_RESEND_STALL_MS 60000           /* a resend that moves no byte for this long fails */
#define LUPC_ACK_INTERVAL (4u << 20)         /* ask for an acknowledgement every this many bytes sent */
#define LUPC_DEFAULT_HEARTBEAT_MS 5000u      /* LUPINE_HEARTBEAT_MS: silence before a PING */
#define LUPC_DEFAULT_HEARTBEAT_TIMEOUT_MS 30000u /* LUPINE_HEARTBEAT_TIMEOUT_MS: silence before giving up on the connection */

/* One thread waiting for a reply. */
struct lupc_waiter {
        uint64_t seq;
        uint16_t op;
        uint8_t *rep;
        size_t cap;
        size_t len;
        CUresult status;
        bool done;
        struct lupc_waiter *next;
};

/* A destination for asynchronous device->host data (DATA frames). */
struct lupc_landing {
        uint64_t token;
        uint64_t seq;                   /* its DTOH_ASYNC frame; 0 until sent (set under send_lock) */
        uint8_t *dst;
        uint64_t size;
        uint64_t received;
        struct lupc_landing *next;
};

enum conn_state { CONN_UP = 0, CONN_RECONNECTING = 1, CONN_DEAD = 2 };

struct lupc_conn {
        struct lupt_link link; /* the socket (and its TLS state); written under both locks */
        uint64_t gen;          /* bumped with every new link; under both locks */
        pthread_mutex_t send_lock;
        _Atomic uint64_t next_seq;      /* written under send_lock */
        struct replay replay;           /* under send_lock */
        bool replay_on;                 /* set at init: reconnecting is enabled */
        pthread_mutex_t recv_lock;      /* waiters, landings, reader role, state */
        pthread_cond_t recv_cond;
        struct lupc_waiter *waiters;
        struct lupc_landing *landings;  /* async DtoH copies in flight */
        bool reader_busy;               /* the reader role (also held by lupc_reconnect()) */
        atomic_int state;               /* enum conn_state */
        _Atomic uint64_t acked;         /* the server executed everything up to here */
        uint64_t lost_at_ns;            /* under recv_lock */
        char lost_why[160];             /* under recv_lock */
        char goodbye_why[160];          /* written by the reader role only */
        char moved_to[LUP_GOODBYE_TO_MAX + 1]; /* a GOODBYE named this endpoint: tried first; under recv_lock */
        uint32_t driver_version;
        int backend;
        uint8_t token[LUP_TOKEN_SIZE];  /* proves the session is ours on resume */
        char name[LUP_MAX_NAME + 1];
        uint64_t arena_base, arena_size;
        char endpoint[128];             /* the server it is connected to (lup_endpoint's text); under recv_lock */
        unsigned pos;                   /* its LUPINE_SERVER position */
        uint64_t avoid_slots;           /* arena slots of the other positions (LUP_HELLO_AVOID_SLOTS) */
        unsigned reconnect_s;           /* LUPINE_RECONNECT_TIMEOUT; 0: never reconnect */
        unsigned resumes;               /* under send_lock */
        size_t since_ack_req;           /* bytes sent since the last ack request; under send_lock */
        size_t ack_interval;            /* LUPC_ACK_INTERVAL, or less for a small bound */
        struct lupc_waiter ack_req;     /* that request's PING: a waiter nobody sleeps on */
        bool ack_req_pending;           /* under recv_lock */
        /* heartbeats: while a thread waits for an answer (or cannot send)
         * and nothing arrives for hb_ms, a PING goes out; after
         * hb_timeout_ms of silence the connection counts as lost */
        unsigned hb_ms, hb_timeout_ms;  /* 0: off (TCP keepalive only) */
        _Atomic uint64_t last_rx_ns;    /* when a byte last arrived */
        /* the reply stream (wire.h): bytes of REPLY and DATA frames received
         * whole, over the session's life; written by the reader role */
        _Atomic uint64_t rx_bytes;
        uint64_t rx_reported;           /* the count the last ack PING carried; under send_lock */
};

/* One connection (and session) per server of LUPINE_SERVER
 * (common/server_list.h); today only the first is used: lupc_route()
 * answers it for every call. */
#define LUPC_MAX_SERVERS 8
extern struct lupc_conn lupc_conns[LUPC_MAX_SERVERS];
extern unsigned lupc_n_servers; /* in use: 1, or one per LUPINE_SERVER position */
/* The connection a call of this thread goes to: the server named just
 * before (lupc_route_dev, lupc_route_ptr), else the one of the current
 * context's device, else the first. */
struct lupc_conn *lupc_route(void);
/* The context a call on c carries in its header: the current one, unless
 * it is of another server's device and the call named memory or a handle
 * of a context on c's server (lupc_route_ptr, lupc_route_handle): then
 * that context, which exists there. */
uint64_t lupc_route_ctx(const struct lupc_conn *c);
/* The position whose arena holds p, or -1 (not in any: a module global,
 * which the current context's server has). */
int lupc_ptr_position(uint64_t p);
/* The position of memory p: its arena's, else (a module global) the
 * current context's server's, as a call naming p is routed. */
int lupc_mem_position(uint64_t p);
/* Remembers where c is connected now (init, resume); and tells it. */
void lupc_conn_set_endpoint(struct lupc_conn *c, const char *text);
void lupc_conn_endpoint(struct lupc_conn *c, char *out, size_t cap);
/* The position the thread's last call went to. */
int lupc_route_position(void);
/* TLS and the bearer token, read at init (hello.c) */
extern struct lupt_config lupc_tcfg;
/* The orderly goodbye at exit (reconnect.c); sent once. */
void lupc_say_goodbye(void);

struct hello_reply {
        uint32_t status;                /* 0: accepted; else refused with msg */
        char msg[256];
        uint32_t driver_version;
        uint32_t backend;
        uint8_t token[LUP_TOKEN_SIZE];
        uint64_t arena_base, arena_size;
        uint64_t last_executed;
        struct lupc_device *devs;       /* ndev of them; the caller installs or frees them */
        uint32_t ndev;
        uint64_t resend_from, tx_end;   /* with LUP_HELLO_RESEND: stream bytes resent next */
        char why[400];                  /* a failure (rc < 0) TLS or the hand-off explains; else "" */
};

typedef int (*endpoint_fn)(const struct lup_endpoint *ep, void *userdata);

void lupc_conn_die_locked(struct lupc_conn *c, const char *fmt, ...);
/* Writes one frame (header, then up to two payload pieces) under the send
 * lock, after copying it into the replay buffer; a registered waiter (and
 * the landing with token `landing`, if not 0) gets its seq before it leaves.
 * While the connection is down it waits. CUDA_SUCCESS, or
 * CUDA_ERROR_DEVICE_UNAVAILABLE / _OUT_OF_MEMORY before anything was sent. */
CUresult lupc_send_frame(struct lupc_conn *c, uint16_t op, uint16_t flags, uint64_t ctx, const void *a, size_t alen,
                         const void *b, size_t blen, struct lupc_waiter *w, uint64_t landing);
/* Waits until w is done, taking the reader role whenever it is free. */
void lupc_wait_reply(struct lupc_conn *c, struct lupc_waiter *w);
struct lupc_landing *lupc_find_landing_locked(struct lupc_conn *c, uint64_t token);
enum conn_state lupc_conn_state(struct lupc_conn *c);
void lupc_drop_landing_locked(struct lupc_conn *c, struct lupc_landing *l);
int lupc_for_each_endpoint(const struct lupc_conn *c, endpoint_fn fn, void *userdata, char *tried, size_t tried_cap);
int lupc_hello_exchange(struct lupc_conn *c, struct lupt_link *l, const struct lup_endpoint *ep, uint64_t last_seen,
                        struct hello_reply *ret);
const char *lupc_op_name(unsigned op);
int lupc_read_one_frame(struct lupc_conn *c, const char **why);
/* A frame if one has begun to arrive, without waiting for one: 0, -EAGAIN
 * when none has, or -errno as lupc_read_one_frame. */
int lupc_read_frame_if_any(struct lupc_conn *c, const char **why);
void lupc_reconnect(struct lupc_conn *c);
/* A server's GOODBYE frame h (its header read, its payload not yet): notes
 * where a migrating session went (conn.moved_to, tried first by
 * lupc_reconnect) and the reason in conn.goodbye_why. Reader role. */
void lupc_goodbye_read(struct lupc_conn *c, const struct lup_hdr *h);
void lupc_unlink_waiter_locked(struct lupc_conn *c, struct lupc_waiter *me);

uint32_t lupc_my_lane(void);
extern uint64_t lupc_spin_ns;

#endif
