/* SPDX-License-Identifier: MIT */
/*
 * Supervisor internals shared by its files, lowest layer first. Each file
 * calls only files listed before it, never one after, so the files call
 * down and never back up (scripts/callgraph.py daemon/supervisor prints
 * the graph and fails on a cycle):
 *   supervisor/sd_fds.c      fds inherited through LISTEN_FDS (supervisor/sd_fds.h);
 *   supervisor/session_registry.c  sessions by name, slot and pid (its own header);
 *   supervisor/arena_check.c which arena slots are usable (finding 5 of issue 15);
 *   supervisor/base.c        clock, SQEs, cancellation, log limit, STATUS= lines;
 *   supervisor/conn_slots.c  pending-connection slots: taking, closing, the recv;
 *   supervisor/fdstore.c     the hot checkpoint's fds: the fd store, kept fds, hot restore;
 *   supervisor/listen.c      listening sockets and accepts, and READY=1;
 *   supervisor/ctl_io.c      the control sockets' I/O: arming the recv, ATTACH out;
 *   supervisor/workers.c     starting and killing workers;
 *   supervisor/drain.c       drain on SIGTERM: the flags, DRAIN, deadlines, verdicts;
 *   supervisor/upgrade.c     the re-exec upgrade (a drain that keeps connections);
 *   supervisor/admin.c       ADMIN requests (lupinectl) instead of HELLO;
 *   supervisor/nvml.c        NVML requests (libnvidia-ml.so.1) instead of HELLO, with
 *                            their values from supervisor/nvml_host.c or nvml_sim.c;
 *   supervisor/health.c      the GPU health watch: NVML checks, heartbeats, alarms, drains;
 *   supervisor/conn.c        pending connections: reading and judging HELLO;
 *   supervisor/restore.c     restore at start: provider listing, restore workers;
 *   supervisor/ctl.c         the control channel: READY, ATTACHED, DETACHED, DRAINED,
 *                            CHECKPOINTED, HOT_MEM and HANDBACK in (daemon/ctl.h);
 *                            reaping workers;
 *   supervisor/supervisor.c  the loop, the ring, signals, shutdown: the top.
 * Nothing outside daemon/supervisor*.c includes this.
 */
#ifndef LUPD_SUPERVISOR_INT_H
#define LUPD_SUPERVISOR_INT_H

#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "lupine/nvml_wire.h"
#include "lupine/wire.h"
#include "net.h"
#include "supervisor/session_registry.h"
#include "supervisor/supervisor.h"
#include "auth_tokens.h"
#include "tls.h"

struct lupd_op_count; /* daemon/op_stats.h */


struct lup_hello;

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
 *          (EV_CONN_RECV) or session registry entry (EV_CTL_RECV; not
 *          the arena slot); zero for the singletons.
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
        /* Inherited (socket activation, re-exec): ep points at inh_ep,
         * built from getsockname(). Such a socket is shut down and its
         * path removed at exit only if owned, i.e. it is one of our
         * --listen endpoints (a re-exec passed it on); systemd's sockets
         * belong to systemd. */
        bool inherited;
        bool owned;             /* ours to shut down and unlink at exit */
        struct lup_endpoint inh_ep;
        bool armed;             /* an accept is in flight */
        bool armed_multishot;   /* ... and it is a multishot one */
        bool paused;            /* accept failed for want of resources; the tick re-arms */
        bool tls;               /* a TCP listener while --tls-cert is set: connections speak TLS */
};

struct conn {
        int fd;                 /* -1: slot free */
        bool recv_busy;         /* a recv into this slot is in flight */
        bool closing;           /* dropped; fd is closed when that recv completes */
        bool have_hdr;          /* hdr is decoded; now reading the payload */
        bool parked;            /* a whole HELLO that waits for the restore to end */
        int adopt_entry;        /* parked for the adoption of this registry entry (supervisor/adopt.c); -1 */
        bool rejudge;           /* ... which succeeded: judge the HELLO again (sup_conn_rejudge) */
        bool unix_listener;     /* accepted on a UNIX socket (ADMIN is allowed there) */
        bool loopback;          /* a TCP peer on a loopback address */
        uint32_t peer_uid;      /* UNIX socket: the peer's uid (SO_PEERCRED) */
        struct lup_tls *tls;    /* TLS listener: the first TLS session (supervisor/conn.c) */
        bool tls_done;          /* ... its handshake is complete */
        bool tls_peeked;        /* ... the first bytes were looked at (a plaintext client?) */
        uint64_t deadline;      /* CLOCK_MONOTONIC ms by which HELLO must be complete */
        uint64_t accept_no;     /* order of acceptance: the lowest is the oldest */
        uint8_t peer_key[17];   /* family byte + address (IPv4/IPv6), or + uid (UNIX) */
        size_t got;             /* bytes of the current part (header, then payload) */
        struct lup_hdr hdr;
        uint8_t hdr_buf[LUP_HDR_SIZE];
        uint8_t *payload;       /* hdr.len bytes, allocated once the header is valid */
        char peer[160];
};

/* Adoption on demand (supervisor/adopt.c) */
#define SUP_ADOPT_MAX         8     /* adoptions under way at once */
#define SUP_ADOPT_VERDICTS    32    /* verdicts remembered */
#define SUP_ADOPT_GONE_MS     10000 /* how long "not in the store" is remembered */
#define SUP_ADOPT_REMEMBER_MS 2000  /* ... and other verdicts (a lease may expire, a slot free up) */

struct sup_adopt_verdict {
        char key[LUP_MAX_NAME + 1]; /* "" unused */
        int32_t status;             /* READY's, or -EADDRINUSE, -ECHILD */
        char why[200];
        uint64_t until_ms;
};

/* lupinectl migrate (supervisor/migrate.c; the verdict from drain.c) */
#define SUP_MIGRATIONS 16
enum sup_migration_state {
        SUP_MIGRATION_RUNNING = 1,
        SUP_MIGRATION_DONE,
        SUP_MIGRATION_FAILED
};

struct sup_migration {
        char name[LUP_MAX_NAME + 1]; /* "" unused */
        char target[LUP_GOODBYE_TO_MAX + 1];
        int state; /* enum sup_migration_state */
        uint64_t started_ms, ms, bytes;
        uint64_t precopied, paused_bytes, paused_us; /* from DRAINED */
        char why[200];
};

/* What a DRAINED says the checkpoint wrote (daemon/ctl.h). */
struct sup_drained {
        uint64_t precopied, paused_written, paused_us;
};

struct log_limit {
        uint64_t window_start;
        unsigned lines;
        unsigned suppressed;
};

/* An fd the supervisor keeps for the re-exec of an upgrade. */
struct sup_held {
        int fd;
        char name[256]; /* its LISTEN_FDNAMES name (supervisor/fdstore.c) */
};

/* The health watch's view of one GPU (supervisor/health.c). */
struct sup_gpu_health {
        bool alarm;
        int bad, good;     /* failed and passed checks in a row */
        char why[160];     /* the failing check (while in alarm: the one that raised it) */
        uint64_t since_ms; /* the alarm was raised then */
        uint64_t alarms;   /* raised since the start */
        bool ecc_seen;     /* ecc_base holds the first uncorrectable count seen */
        uint64_t ecc_base;
        uint32_t xid;          /* the last alarming Xid ... */
        uint64_t xid_until_ms; /* ... which counts until then */
        bool said_no_store;    /* "no checkpoint provider" was logged for this alarm */
};

/* Session names the watch drained: their clients hear "moved", not "gone". */
#define SUP_HEALTH_MOVED_MAX 64u

struct sup_health {
        struct sup_gpu_health gpu[LUP_MAX_DEVICES];
        unsigned n_gpus; /* GPUs seen so far (a lost one stays counted) */
        uint64_t next_check_ms;
        uint64_t drained;      /* sessions drained by the watch */
        uint64_t hung_workers; /* workers found not answering */
        char moved[SUP_HEALTH_MOVED_MAX][LUP_MAX_NAME + 1];
        unsigned n_moved, moved_next;
};

/* Why the supervisor is stopping, if it is. */
enum sup_stop {
        SUP_RUNNING = 0,
        SUP_SHUTDOWN,   /* no checkpoint provider: SHUTDOWN, workers just exit */
        SUP_DRAIN,      /* checkpoint every session, then exit */
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
        bool stopping;          /* stop != SUP_RUNNING */
        enum sup_stop stop;
        bool killed;            /* stragglers got SIGKILL */
        uint64_t stop_deadline; /* SIGKILL the workers left at this time */
        uint64_t kill_deadline; /* give up waiting for them at this time */
        struct log_limit conn_log;
        /* sessions that outlive the process (a checkpoint provider is set) */
        bool checkpoints;       /* lupd_have_checkpoints(cfg) */
        uint32_t backend_seen;  /* LUP_BACKEND_* a worker last reported running on; 0: none yet */
        bool restoring;         /* restore workers have not all reported */
        bool serving;           /* accepts were armed and READY=1 sent */
        uint64_t restore_deadline;
        uint64_t next_extend;   /* next EXTEND_TIMEOUT_USEC to systemd */
        uint64_t watchdog_ms;   /* WATCHDOG=1 this often (half of WatchdogSec=); 0: off */
        uint64_t next_watchdog; /* the next WATCHDOG=1 is due then */
        int n_restore_listed;   /* committed sessions the provider listed */
        int n_restore_started;  /* restore workers started */
        int n_restored;         /* ... that reported READY 0 */
        int n_drain;            /* sessions told to drain */
        int n_checkpointed;     /* ... that reported DRAINED 0 */
        int n_lost;             /* ... whose state is gone */
        int n_kept;             /* ... that failed, but their older checkpoint stands */
        int n_ended;            /* ... that ended by themselves meanwhile */
        int n_own_error;        /* ... that ended by their own sticky CUDA error (not checkpointed) */
        /* hot checkpoint and upgrade (supervisor/fdstore.c, supervisor/upgrade.c) */
        bool drain_admin_over;    /* the drain's workers are gone: no more accepts (sup_listener_drain_admin) */
        uint64_t drain_status_ms; /* CLOCK_MONOTONIC ms of the last STATUS answered while draining */
        uint64_t drain_over_ms;   /* ... when the drain's workers were first seen gone */
        bool upgrade;           /* this drain ends in a re-exec, not an exit */
        bool upgrade_stop;      /* ... unless SIGTERM/SIGINT came meanwhile: then an exit */
        uint32_t upgrade_flags; /* LUPD_DRAIN_* the upgrade's drain sent first */
        uint32_t drain_flags;   /* LUPD_DRAIN_* this drain sends */
        struct sup_held *held;  /* fds for the re-exec: memory, connections */
        size_t n_held, cap_held;
        /* limits hit since the start (docs/security.md, lupinectl status) */
        struct {
                uint64_t detach_grace;    /* sessions ended by --detach-grace */
                uint64_t pending_total;   /* pending connections evicted: --max-pending */
                uint64_t pending_peer;    /* ... --max-pending-per-peer */
                uint64_t tenant_sessions; /* new sessions refused: --max-sessions-per-tenant */
                uint64_t tenant_detached; /* ... --max-detached-per-tenant */
        } hits;
        uint64_t accept_no; /* connections accepted so far */
        /* uploaded-but-unused bytes per arena slot (daemon/upload_acct.h) */
        int upload_acct_fd; /* -1: none (the total cap is not enforced) */
        struct lupd_upload_acct *upload_acct;
        /* TLS and authentication (supervisor/auth.c, docs/security.md) */
        struct lup_tls_ctx *tls_ctx; /* --tls-cert: the first handshake's context */
        struct lupd_tokens auth;     /* --auth-tokens */
        struct sup_health health;    /* supervisor/health.c */
        struct {                     /* supervisor/adopt.c */
                struct sup_adopt_verdict verdict[SUP_ADOPT_VERDICTS];
                unsigned next;
                int in_flight;
                uint64_t started, adopted; /* since the start, for the metrics */
        } adopt;
        struct { /* supervisor/migrate.c */
                struct sup_migration rec[SUP_MIGRATIONS];
                unsigned next;
                uint64_t started, done, bytes, ms; /* since the start, for the metrics */
                uint64_t precopied, paused_bytes, paused_us;
        } migrate;
        /* since this process started, for the metrics (supervisor/metrics.c) */
        struct {
                uint64_t drains, upgrades;
                uint64_t checkpoints, checkpoint_bytes, checkpoint_ms; /* drains' and operators' checkpoints */
                uint64_t restores, restore_bytes, restore_ms;
                uint64_t periodic; /* --checkpoint-interval's checkpoints committed */
        } totals;
        struct lupd_op_count *ops; /* by op, summed over workers' OP_STATS (LUPD_OP_IDS; NULL: none yet) */
};

/* A worker's -errno status in words (a value out of range: "unknown
 * error"). Inline: ctl.c, restore.c and adopt.c all report them. */
static inline const char *sup_errno_text(int32_t status)
{
        return status < 0 && status > -4096 ? strerror(-status) : "unknown error";
}

/* Whether listener l accepts while the daemon drains: a UNIX socket whose
 * backlog would die with this process anyway (ours, not systemd's, and no
 * upgrade passes it on), so that lupinectl drain can follow the drain with
 * STATUS. A HELLO there waits unanswered (supervisor/conn.c) and is closed
 * once the workers are gone (sup_done, supervisor/supervisor.c), as the
 * backlog would be. Inline: listen.c and conn_slots.c both ask. */
static inline bool sup_listener_drain_admin(const struct sup *s, const struct listener *l)
{
        return s->stop == SUP_DRAIN && !s->upgrade && !s->drain_admin_over && l->ep->family == AF_UNIX &&
               (!l->inherited || l->owned);
}

/* Whether the health watch admits new sessions: yes unless --health-policy
 * drain holds an alarm on a GPU; then why (when why != NULL). Plain data,
 * read by the files below supervisor/health.c too (base.c's STATUS=). */
static inline bool sup_health_admitting(const struct sup *s, char *why, size_t cap)
{
        if (s->cfg->health.policy != LUPD_HEALTH_DRAIN)
                return true;
        for (unsigned d = 0; d < s->health.n_gpus; d++) {
                const struct sup_gpu_health *g = &s->health.gpu[d];
                if (!g->alarm)
                        continue;
                if (why)
                        snprintf(why, cap, "GPU %u is unhealthy: %s", d, g->why);
                return false;
        }
        return true;
}

static inline int safe_close(int fd)
{
        if (fd >= 0)
                close(fd);
        return -1;
}

/* ---- supervisor/arena_check.c */

/* Reserves and releases every arena slot's range once, marking in
 * s->reg.unusable (and logging) those that overlap a mapping. Returns how
 * many are usable. */
int sup_arena_check(struct sup *s);

/* ---- supervisor/auth.c */

/* Reads --auth-tokens, if given: 0, or -errno (logged). */
int sup_auth_load(struct sup *s);
void sup_auth_free(struct sup *s);
/* Whether ss is a loopback address (127/8, ::1, ::ffff:127/104). */
bool sup_addr_is_loopback(const struct sockaddr_storage *ss);
/* The tenant of pending connection idx, which presented the bearer token
 * auth (NULL: none): from the token, its client certificate's CN, its uid
 * (UNIX socket), or "" (the anonymous tenant: loopback, or --insecure).
 * 0, or -EACCES with *why. */
int sup_auth_tenant(struct sup *s, int idx, const uint8_t *auth, size_t auth_len, char *tenant, size_t cap,
                    const char **why);
/* Whether the tenant of key may have one more session under
 * --max-sessions-per-tenant and --max-detached-per-tenant: 0, or -EUSERS
 * with the reason in why (logged as a limit hit). */
int sup_tenant_caps(struct sup *s, const char *key, char *why, size_t cap);

/* ---- supervisor/base.c */

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
/* A checkpoint (restore false) or restore of entry se is done: counted for
 * the metrics, with its bytes and the time since work_started_ms. */
void sup_count_work(struct sup *s, const struct lupd_session *se, bool restore);
/* Sends systemd a STATUS= line describing the sessions now. */
void sup_status_update(struct sup *s);
/* Every EXTEND_INTERVAL, tell systemd to wait a little longer. */
void sup_notify_extend(struct sup *s, uint64_t now);

/* ---- supervisor/listen.c */

/* Adopts the inherited listening sockets (lupd_sd_listen_*: socket
 * activation or a re-exec), ignoring cfg->listen then; otherwise binds
 * every cfg->listen endpoint. -errno (logged) if one cannot be. */
int sup_listeners_open(struct sup *s);
/* Arms an accept on listener li, unless one is armed, the daemon does not
 * serve yet (restoring) or any more (stopping), or the listener is closed. */
void sup_listener_arm(struct sup *s, int li);
/* Completion of an accept on listener li. */
void sup_on_accept(struct sup *s, int li, int res, uint32_t cqe_flags);
/* Stops arming accepts and cancels those in flight, keeping the listening
 * sockets open so new clients wait in the backlog. */
void sup_listeners_pause(struct sup *s);
/* Stops accepting, closes the sockets and removes UNIX socket paths. */
void sup_listeners_close(struct sup *s);
/* Arms the listeners and tells systemd READY=1: the daemon serves. Called
 * once restores are done (at once when there are none); a no-op while
 * restoring, once stopping, or the second time. */
void sup_serving_begin(struct sup *s);

/* ---- supervisor/conn_slots.c */

/* Takes a freshly accepted connection from listener l (or closes it when
 * LUPD_MAX_PENDING are waiting) and starts reading its HELLO. */
void sup_conn_new(struct sup *s, const struct listener *l, int fd);
/* Arms the recv of the next part (header, then payload) of connection
 * idx's first frame. 0, or -EBUSY when no SQE is to be had. */
int sup_conn_arm_recv(struct sup *s, int idx);
/* Where the next bytes of connection c's first frame go, and how many. */
void sup_conn_dst(struct conn *c, uint8_t **ret_dst, size_t *ret_want);
/* Logs one line saying why, sends a HELLO refusal when refuse_status != 0
 * and the header was valid, and drops the connection. */
void sup_conn_close(struct sup *s, int idx, uint32_t refuse_status, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* The same for a connection that did what it came for (a status poll):
 * logged at debug only, so that polls do not fill the log. */
void sup_conn_done(struct sup *s, int idx, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The HELLOs that arrived on UNIX sockets while sessions were restored,
 * handled now that the daemon serves. */
void sup_conn_unpark(struct sup *s);
/* Judges again the HELLOs whose adoption succeeded (c->rejudge). */
void sup_conn_rejudge(struct sup *s);

/* supervisor/adopt.c: a resuming client's session is not here; restore it
 * from the store for it (the HELLO waits), or refuse it with the verdict
 * of a recent try. True when the connection is dealt with. */
bool sup_adopt_begin(struct sup *s, int idx, const char *key, const char *name);
/* The adoption worker of entry idx reported (status 0: restored, waiting
 * for its client; the caller then calls sup_conn_rejudge) or is gone
 * (status < 0, why says what). */
void sup_adopt_done(struct sup *s, int idx, int32_t status, const char *why);
/* A verdict about key no longer holds (the session is here now). */
void sup_adopt_forget(struct sup *s, const char *key);
/* Kills an adoption worker that has not reported within --drain-timeout. */
void sup_adopt_tick(struct sup *s, uint64_t now);

/* supervisor/migrate.c: ADMIN MIGRATE ("NAME TARGET") and MIGRATION (NAME). */
void sup_admin_migrate(struct sup *s, int idx, const char *arg);
void sup_admin_migration(struct sup *s, int idx, const char *name);

/* supervisor/periodic.c: --checkpoint-interval asks for the next checkpoint
 * that is due; _done takes a CHECKPOINTED verdict (any checkpoint). */
void sup_periodic_tick(struct sup *s, uint64_t now);
void sup_periodic_done(struct sup *s, int idx, int32_t status);
/* Frees slot idx, or, while a recv still targets its buffer, cancels that
 * recv and lets sup_conn_on_recv() finish the job. Logs nothing: a
 * connection handed to a worker goes this way too. */
void sup_conn_drop(struct sup *s, int idx);

/* ---- supervisor/health.c */

struct lup_admin_health;
/* Whether the watch runs (--health-policy is not off). */
bool sup_health_enabled(const struct sup *s);
/* Worker idx's heartbeat, with the GPUs it uses. */
void sup_health_on_beat(struct sup *s, int idx, uint32_t devices);
/* Every tick: checks the GPUs and heartbeats when one is due, raises and
 * clears alarms, drains. */
void sup_health_tick(struct sup *s, uint64_t now);
/* Whether session key `name` was drained off this host by the watch. */
bool sup_health_moved(const struct sup *s, const char *name);
/* A new session of that name began here: it is no longer "moved". */
void sup_health_forget(struct sup *s, const char *name);
/* The watch's state for STATUS. */
void sup_health_report(const struct sup *s, struct lup_admin_health *out);

/* ---- supervisor/conn.c */

/* Completion of the recv into pending-connection slot idx: reads on, or
 * judges the complete first frame (HELLO, or ADMIN) and routes it. */
void sup_conn_on_recv(struct sup *s, int idx, int res);

/* ---- supervisor/admin.c */

/* The header of first frame of pending connection idx is ADMIN: returns 0
 * if this peer may send it and the header is well-formed, else closes the
 * connection (logged, refused) and returns -errno. */
int sup_admin_check_header(struct sup *s, int idx);
/* The ADMIN payload of connection idx is complete: validates it, answers
 * and closes the connection (and begins a drain when asked to). */
void sup_admin_run(struct sup *s, int idx);
/* ---- supervisor/nvml.c */
/* The header of an NVML request is complete: 0 to read its payload, or
 * -EBADMSG after closing the connection. */
int sup_nvml_check_header(struct sup *s, int idx);
/* The whole NVML request is in: answer it (a snapshot) and close. */
void sup_nvml_run(struct sup *s, int idx);

/* ---- supervisor/workers.c */

/* Starts the worker for the freshly claimed registry entry idx and hands
 * it the connection with its HELLO (header hdr, payload of hdr->len
 * bytes), and for a TLS connection the HANDOFF ticket (else NULL). Returns 0 (the entry is LIVE until the reaper frees it) or
 * -errno (the entry is released and no worker was started). */
int sup_session_start(struct sup *s, int idx, int client_fd, const struct lup_hdr *hdr, const uint8_t *payload,
                      const uint8_t *ticket, const char *peer);
/* Starts a `--restore=NAME` worker for the freshly claimed restore entry
 * idx (no client). Returns 0 or -errno (entry released). */
int sup_session_restore(struct sup *s, int idx);
/* LUPD_CTL_SHUTDOWN to every live worker; returns how many were told. */
int sup_workers_shutdown(struct sup *s);
/* The upload accounting memfd workers get as LUPD_UPLOAD_ACCT_FD: 0, or
 * -errno (logged; --upload-cap-total is then not enforced). */
int sup_upload_acct_open(struct sup *s);
/* SIGKILL every live worker, saying which. */
void sup_workers_kill(struct sup *s);
/* SIGKILL one worker, unless it was reaped already (its pid may be
 * someone else's by now). */
void sup_worker_kill(struct sup *s, int idx);
/* A bare u32 control message (SHUTDOWN, DRAIN) to worker idx, without
 * blocking. Returns 0 or -errno. */
int sup_worker_send(struct sup *s, int idx, uint32_t type);
/* A whole control message of len bytes (never waits). */
int sup_worker_send_msg(struct sup *s, int idx, const void *msg, size_t len);
/* The same with a u32 after the type (SHUTDOWN's flags). */
int sup_worker_send_arg(struct sup *s, int idx, uint32_t type, uint32_t arg);
/* cfg->log_levels to every live worker (LUPD_CTL_LOG_LEVELS); how many got it. */
int sup_workers_log_levels(struct sup *s);
/* "exited with status 3", "killed by signal 9" for a wait status. */
void sup_describe_wait(int st, char *out, size_t cap);

/* ---- supervisor/ctl_io.c */

/* Points the session's receive buffers (ctl_msg, ctl_iov, ctl_cmsg) at
 * its ctl_buf, ready for one datagram and its fds. */
void sup_ctl_msg_reset(struct lupd_session *se);
/* Starts (or continues) reading worker idx's control socket. */
void sup_ctl_arm(struct sup *s, int idx);
/* LUPD_CTL_ASSIGN and LUPD_CTL_ATTACH (daemon/ctl.h): u32 type, u32 slot,
 * u64 seq, u32 lane, u32 len, the HELLO, and with a ticket the TLS
 * trailer; into out, SUP_CTL_HELLO_MSG_MAX bytes. 0 or -errno. */
#define SUP_CTL_HELLO_MSG_MAX (24u + LUPD_HELLO_MAX_PAYLOAD + LUPD_CTL_TLS_TRAILER)
int sup_ctl_hello_msg(uint8_t *out, uint32_t type, uint32_t slot, const struct lup_hdr *hdr, const uint8_t *payload,
                      const uint8_t *ticket, size_t *ret_len);
/* Hands a client's connection, asking to resume registered session idx,
 * to its worker (LUPD_CTL_ATTACH). Returns 0, -EBUSY when
 * LUPD_MAX_ATTACH_PENDING resumes are in flight already, or -errno. */
int sup_session_attach(struct sup *s, int idx, int client_fd, const struct lup_hdr *hdr, const uint8_t *payload,
                       const uint8_t *ticket, const char *peer);
/* A peer connection (LUP_HELLO_PEER) for worker idx: LUPD_CTL_PEER with the
 * fd (and the TLS hand-off's ticket, or NULL). 0, -EBUSY (its control
 * socket is full) or -errno. */
int sup_session_peer(struct sup *s, int idx, int peer_fd, const struct lup_hdr *hdr, const uint8_t *payload,
                     const uint8_t *ticket, const char *peer);

/* ---- supervisor/ctl.c */

/* Completion of the recv on the control socket of entry idx. */
void sup_ctl_on_recv(struct sup *s, int idx, int res);
/* The worker of entry idx was reaped: read what is left on its control
 * socket (unless a recv is still in flight; its completion comes back
 * here), settle its accounts, and free the entry. */
void sup_ctl_finish(struct sup *s, int idx);
/* waitpid() every worker that has exited, log how, and retire its entry;
 * the entry is freed by sup_ctl_finish() once its control socket is read
 * to the end. */
void sup_reap_workers(struct sup *s);

/* ---- supervisor/drain.c */

/* SIGTERM/SIGINT with a provider: stop admitting, DRAIN every worker. */
void sup_drain_begin(struct sup *s, const char *why);
/* The tick while draining: EXTEND_TIMEOUT_USEC, the drain deadline. */
void sup_drain_tick(struct sup *s, uint64_t now);
/* Worker idx alone checkpoints (durable) and exits, the daemon going on
 * (the health watch; why is logged). 0, or -EALREADY when it cannot be
 * drained (failed, already draining). */
int sup_drain_session(struct sup *s, int idx, const char *why);
/* A drain of worker idx (one session's, or the daemon's) passed
 * --drain-timeout: its verdict, and SIGKILL. */
void sup_drain_session_expire(struct sup *s, int idx);
/* Worker idx reported LUPD_CTL_DRAINED with status. */
void sup_drain_on_drained(struct sup *s, int idx, int32_t status, const struct sup_drained *fig);
/* Worker idx, told to drain, is gone without DRAINED (wait_status from
 * waitpid): its session ended by itself (exit 0) or is lost. */
void sup_drain_on_gone(struct sup *s, int idx, int wait_status);
/* What a drain asks of the workers (LUPD_DRAIN_*), from --checkpoint-mode,
 * whether it is an upgrade and whether a service manager's fd store is
 * there. sup_drain_flags: for the drain now beginning (s->upgrade). */
uint32_t sup_drain_flags_for(struct sup *s, bool upgrade);
uint32_t sup_drain_flags(struct sup *s);
/* "hot", "durable" or "hot and durable", for log lines. */
const char *sup_drain_mode_name(uint32_t flags);
/* LUPD_CTL_DRAIN with flags to worker idx, without blocking; remembers the
 * flags in the entry. 0 or -errno. */
int sup_worker_send_drain(struct sup *s, int idx, uint32_t flags);

/* ---- supervisor/fdstore.c */

/* Whether a service manager's fd store is there (NOTIFY_SOCKET is set). */
bool sup_have_fd_store(void);
/* RLIMIT_NOFILE's soft limit up to the hard one: sessions can have
 * thousands of memory chunks, each an fd at drain and restore. */
void sup_raise_nofile(void);
/* One fd into the service manager's fd store, under its own name (FDPOLL=0).
 * 0, -ENOENT without NOTIFY_SOCKET, or -errno. The fd stays ours. */
int sup_fdstore_push(const char *name, int fd);
/* Worker idx sent n memory fds (records: u64 addr, u64 size each): to the
 * fd store, or kept for the re-exec. Takes the fds (closes or keeps). */
void sup_hot_on_mem(struct sup *s, int idx, uint64_t epoch, const uint8_t *recs, int *fds, int n);
/* Worker idx handed its connection back (and input_fd, or -1). Takes them. */
void sup_hot_on_handback(struct sup *s, int idx, uint64_t epoch, uint64_t seq, uint32_t input_len, int conn_fd,
                         int input_fd);
/* Closes the kept fds. */
void sup_hot_free(struct sup *s);
/* Whether inherited fds belong to session name's checkpoint epoch. */
bool sup_hot_restore_wanted(const char *name, uint64_t epoch);
/* Right after forking restore worker idx (--hot): sends it its fds
 * (LUPD_CTL_HOT_MAP, CONN, HOT_END) and removes them from the fd store.
 * 0 or -errno (logged). */
int sup_hot_restore_send(struct sup *s, int idx, uint64_t epoch);

/* ---- supervisor/upgrade.c */

/* SIGHUP, `lupinectl upgrade`: checks the upgrade can be made, then drains
 * for it. 0, or -errno with err[] saying why (nothing was changed). */
int sup_upgrade_begin(struct sup *s, const char *why, char *err, size_t errcap);
/* The upgrade's drain is done: re-executes. Returns only on failure, with
 * the exit status (logged). */
int sup_upgrade_exec(struct sup *s);
/* SIGTERM or SIGINT while the upgrade drains: the drain finishes and the
 * daemon then stops instead of re-executing. Workers not yet done are
 * told the flags a stop uses (GOODBYE, no hand-back; the durable copy
 * where there is no fd store). */
void sup_upgrade_cancel(struct sup *s, const char *why);
/* The cancelled upgrade's drain is done: what a stop keeps, it keeps (the
 * memory fds go to the fd store under a service manager; the connections
 * close and their clients reconnect to the next start). Returns the exit
 * status: 0, or 1 when a session was lost. */
int sup_upgrade_stop(struct sup *s);

/* ---- supervisor/restore.c */

/* Loads the provider, lists committed sessions and starts a restore
 * worker for each (up to max_sessions). Returns 0 (s->restoring tells
 * whether any worker is still to report) or -errno after logging why the
 * daemon cannot start. */
int sup_restore_start(struct sup *s);
/* Restore worker idx reported READY (status, slot). */
void sup_restore_on_ready(struct sup *s, int idx, int32_t status, uint32_t slot);
/* Restore worker idx is gone without READY. */
void sup_restore_on_gone(struct sup *s, int idx, const char *why);
/* The tick while restoring: EXTEND_TIMEOUT_USEC and the restore deadline. */
void sup_restore_tick(struct sup *s, uint64_t now);
/* Begins serving once no restore worker is left to report. */
void sup_restore_progress(struct sup *s);

/* ---- supervisor/admin.c */

/* The word STATUS and the metrics use for a phase (docs/protocol.md). */
const char *sup_admin_state_name(enum lupd_session_phase phase);
/* A successful ADMIN reply with text[0..n) on connection c. 0 or -errno. */
int sup_admin_reply(const struct conn *c, const char *text, size_t n);

/* ---- supervisor/admin_ops.c */

/* INFO, KILL, CHECKPOINT, CONFIG_SHOW, CONFIG_SET, DIAG on connection idx; false for a
 * command that is not one of them. */
bool sup_admin_ops_run(struct sup *s, int idx, uint16_t cmd, const char *arg);

/* ---- supervisor/diag.c */

/* ADMIN DIAG: the checks of lupinectl diag, as JSON, on connection idx. */
void sup_admin_diag(struct sup *s, int idx);

/* ---- supervisor/metrics.c (--metrics) */

/* Loads libmicrohttpd and listens at cfg->metrics (nothing without it).
 * 0, or -errno after logging why. */
int sup_metrics_start(struct sup *s);
void sup_metrics_stop(void);
bool sup_metrics_enabled(void);
/* Writes the exposition anew if a second has passed (or force). */
void sup_metrics_update(struct sup *s, uint64_t now, bool force);

/* ---- supervisor/nvml.c */

/* The GPUs as NVML sees them now (cached for a second), for the metrics;
 * NULL when NVML cannot say. */
struct lup_nvml_snapshot *sup_nvml_view(struct sup *s);

#endif
