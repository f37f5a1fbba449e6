/* SPDX-License-Identifier: MIT */
/*
 * The lupined supervisor: the daemon's main process. It listens, reads each
 * connection's HELLO, keeps the session registry, starts one worker process
 * per session (fork + exec of cfg->self_exe --worker) and hands it the
 * client connection over the control channel of daemon/ctl.h. It never
 * initialises CUDA.
 */
#ifndef LUPD_SUPERVISOR_H
#define LUPD_SUPERVISOR_H

#include "config.h"
#include "log.h"

#ifndef LUPINE_VERSION
#define LUPINE_VERSION "unknown" /* meson passes the project version */
#endif

/* Slots for pre-HELLO connections. At most --max-pending of them (up to
 * LUPD_PENDING_LIMIT_MAX) are open at once; the rest is room for those
 * evicted but whose cancelled recv has not completed yet, so that an
 * eviction frees room for the newcomer at once (supervisor/conn_slots.c). */
#define LUPD_MAX_PENDING                    512
#define LUPD_PENDING_LIMIT_MAX              (LUPD_MAX_PENDING / 2)
#define LUPD_PENDING_DEFAULT                256
#define LUPD_PENDING_PER_PEER_DEFAULT       32
/* --upload-cap-session, --upload-cap-total (MiB): uploaded-but-unused
 * module images (worker/uploads.c). The session cap cannot exceed the
 * protocol's LUP_MAX_BLOB_BYTES (2 GiB). */
#define LUPD_UPLOAD_CAP_SESSION_DEFAULT_MIB 1024
#define LUPD_UPLOAD_CAP_SESSION_MAX_MIB     2048
#define LUPD_UPLOAD_CAP_TOTAL_DEFAULT_MIB   8192
#define LUPD_UPLOAD_CAP_TOTAL_MAX_MIB       (1 << 30)
/* --max-sessions-per-tenant, --max-detached-per-tenant: half the host, and
 * a quarter of it without a client, for any one tenant. */
#define LUPD_SESSIONS_PER_TENANT_DEFAULT    32
#define LUPD_DETACHED_PER_TENANT_DEFAULT    16
/* How long a worker waits for its client's second TLS handshake and the
 * HANDOFF frame (docs/tls.md). */
#define LUPD_TLS_HANDOFF_TIMEOUT_MS         5000
/* The largest HELLO payload the supervisor reads. A HELLO is about 170
 * bytes today; the slack leaves room for auth fields without letting 256
 * pending peers pin LUP_MAX_PAYLOAD (1 MiB) each. */
#define LUPD_HELLO_MAX_PAYLOAD 4096u
/* How long workers get to leave after LUPD_CTL_SHUTDOWN before SIGKILL. */
#define LUPD_SHUTDOWN_GRACE_MS 10000
/* After SIGKILL, how long to wait for the kernel to hand the corpses back
 * before exiting anyway (a worker stuck in uninterruptible sleep). */
#define LUPD_KILL_GRACE_MS 5000
/* After a drain, how long the daemon waits for the next STATUS of someone
 * who follows it (lupinectl drain), so that it sees the final verdicts. */
#define LUPD_DRAIN_WATCH_MS                 1000

/* --drain-timeout: how long workers get to checkpoint (and, at start, to
 * restore) before SIGKILL. */
#define LUPD_DRAIN_TIMEOUT_DEFAULT_S 60
#define LUPD_DRAIN_TIMEOUT_MAX_S 86400
/* --session-ttl: how long a session without a client is kept. */
#define LUPD_SESSION_TTL_DEFAULT_S 3600
#define LUPD_SESSION_TTL_MAX_S (30 * 86400)
#define LUPD_DETACH_GRACE_DEFAULT_S  60
/* While draining or restoring, systemd hears EXTEND_TIMEOUT_USEC of
 * LUPD_EXTEND_USEC every LUPD_EXTEND_INTERVAL_MS, so TimeoutStopSec= and
 * TimeoutStartSec= need not guess how long checkpoints take; the drain
 * deadline is what bounds it. */
#define LUPD_EXTEND_INTERVAL_MS 5000
#define LUPD_EXTEND_USEC 10000000ull
/* Committed sessions the supervisor takes from a provider's listing; more
 * are logged and left alone. */
#define LUPD_RESTORE_LIST_MAX 4096

/*
 * Runs the supervisor until SIGINT or SIGTERM. cfg->listen[0..n_listen) and
 * cfg->self_exe must be set; cfg->hello_timeout_ms <= 0 means
 * LUPD_HELLO_TIMEOUT_MS. With a checkpoint provider configured
 * (lupd_have_checkpoints), it first restores the committed sessions, and
 * SIGINT/SIGTERM drain (checkpoint) every session instead of ending it.
 *
 * Returns the process exit status: 0 after a clean shutdown or a drain in
 * which every session was checkpointed; 1 when a session was lost in the
 * drain, when the daemon cannot start (no usable io_uring, a listener that
 * cannot bind, a checkpoint provider that cannot be loaded or listed) or
 * its event loop fails. It logs the reason itself.
 */
int supervisor_main(struct lupd_config *cfg);

/* Whether sessions are checkpointed on drain and restored at start. */
static inline bool lupd_have_checkpoints(const struct lupd_config *cfg)
{
        return cfg->checkpoint_dir[0] != 0 || cfg->checkpoint_provider[0] != 0;
}

/* Names as they appear on the command line, shared by the parser in main.c
 * and the worker command line the supervisor builds. */
static inline const char *lupd_backend_name(enum lupd_backend_choice b)
{
        switch (b) {
        case LUPD_BACKEND_CUDA: return "cuda";
        case LUPD_BACKEND_SIM: return "sim";
        case LUPD_BACKEND_AUTO: break;
        }
        return "auto";
}


#endif
