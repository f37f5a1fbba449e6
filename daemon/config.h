/* SPDX-License-Identifier: MIT */
/* lupined configuration, filled from the command line by main.c. */
#ifndef LUPD_CONFIG_H
#define LUPD_CONFIG_H

#include <stdbool.h>

#include "fleet_cfg.h"
#include "health_cfg.h"
#include "lupine/wire.h"
#include "net.h"

#define LUPD_MAX_LISTEN 16
#define LUPD_DEFAULT_PORT 14833
#define LUPD_MAX_SESSIONS 64            /* == LUP_ARENA_SLOTS */
#define LUPD_HELLO_TIMEOUT_MS 10000     /* a connection must send HELLO within this */
#define LUPD_CKPT_LANES_MAX 64          /* --checkpoint-lanes, LUPINE_CHECKPOINT_LANES */

enum lupd_backend_choice { LUPD_BACKEND_AUTO = 0, LUPD_BACKEND_CUDA, LUPD_BACKEND_SIM };

/* --checkpoint-mode: what a drain keeps of the sessions' device memory
 * (docs/sessions.md). AUTO: BOTH under a service manager (NOTIFY_SOCKET)
 * and for an upgrade, DURABLE otherwise. */
enum lupd_ckpt_mode { LUPD_CKPT_AUTO = 0, LUPD_CKPT_HOT, LUPD_CKPT_DURABLE, LUPD_CKPT_BOTH };

/* Where log lines go: the journal's native protocol when systemd's journal
 * is this process's stderr (AUTO) or always (JOURNAL), or stderr with
 * level words (STDERR). daemon/journal.c. */
enum lupd_log_target {
        LUPD_LOG_TARGET_AUTO = 0,
        LUPD_LOG_TARGET_JOURNAL,
        LUPD_LOG_TARGET_STDERR
};

struct lupd_config {
        struct lup_endpoint listen[LUPD_MAX_LISTEN];
        int n_listen;
        bool listen_explicit;           /* --listen was given (not just the default) */
        enum lupd_backend_choice backend;
        char log_levels[256]; /* --log-level: "info", "warning,net=debug" (common/log.h) */
        int log_target;       /* LUPD_LOG_TARGET_* */
        char log_file[4096];  /* --log-file: every line appended there too (absolute), "" for none */
        char metrics[128];    /* --metrics HOST:PORT, "" for none */
        int max_sessions;
        char self_exe[4096];            /* resolved /proc/self/exe, for spawning workers */
        bool insecure;                  /* --insecure: unauthenticated non-loopback access */
        /* TLS and authentication (issue 15, docs/security.md) */
        char tls_cert[4096];            /* --tls-cert: PEM chain; TCP listeners speak TLS */
        char tls_key[4096];             /* --tls-key */
        char tls_client_ca[4096];       /* --tls-client-ca: mutual TLS; the certificate's CN is the tenant */
        char peer_tls_ca[4096];         /* --peer-tls-ca: the CAs other lupined's certificates are checked
                                         * against, for copies between servers ("": the system's) */
        char auth_tokens[4096];         /* --auth-tokens: "TENANT SHA256HEX" lines */
        int max_sessions_per_tenant;    /* --max-sessions-per-tenant; 0: off */
        int max_detached_per_tenant;    /* --max-detached-per-tenant; 0: off */
        int hello_timeout_ms;           /* hidden --hello-timeout-ms; LUPD_HELLO_TIMEOUT_MS */
        bool no_multishot_accept;       /* hidden --no-multishot-accept: test the fallback */
        bool check_arena;               /* hidden --check-arena: print the usable arena slots, exit */
        /* sessions and checkpoints (issue 4) */
        char checkpoint_dir[4096];      /* --checkpoint-dir: the built-in directory provider */
        char checkpoint_provider[4096]; /* --checkpoint-provider / LUPINE_CHECKPOINT_LIBRARY */
        char checkpoint_config[4096];   /* --checkpoint-config: passed to the provider's open() */
        int drain_timeout_s;            /* --drain-timeout (default 60) */
        int session_ttl_s;              /* --session-ttl (default 3600) */
        /* limits against clients that exhaust the daemon (issue 15, docs/security.md) */
        int detach_grace_s;                  /* --detach-grace: never-checkpointed detached sessions; 0: off */
        int max_pending;                     /* --max-pending: connections before HELLO, in total */
        int max_pending_per_peer;            /* --max-pending-per-peer: ... from one address (UNIX: one uid) */
        int upload_cap_session_mib;          /* --upload-cap-session: unused BLOB bytes, one session; 0: off */
        int upload_cap_total_mib;            /* --upload-cap-total: ... all sessions; 0: off */
        int upload_acct_fd;                  /* worker: hidden --upload-acct-fd (daemon/upload_acct.h), or -1 */
        enum lupd_ckpt_mode checkpoint_mode; /* --checkpoint-mode (issue 5) */
        int checkpoint_lanes;           /* --checkpoint-lanes; 0: LUPINE_CHECKPOINT_LANES or automatic */
        bool checkpoint_verify;         /* --checkpoint-verify (or LUPINE_CHECKPOINT_VERIFY=1) */
        struct lupd_health_cfg health;  /* --health-*, --thermal-limit (docs/health.md) */
        struct lupd_fleet_cfg fleet;    /* --host-id, --lease-ttl (docs/fleet.md) */
        char **argv;                    /* the command line, for re-executing on upgrade */
        /* worker mode only */
        bool worker;
        int ctl_fd;
        char restore[LUP_MAX_NAME + 1]; /* --restore=SESSION */
        bool hot;                       /* --hot: hot-restore messages come first */
};

#endif
