/* SPDX-License-Identifier: MIT */
/*
 * lupined entry point: the command line, process-wide set-up, then either
 * the supervisor (the default) or a per-session worker (--worker, which
 * only the supervisor passes).
 *
 * Exit status: 0 clean shutdown (or a drain that checkpointed every
 * session), 1 runtime failure (or a drain that lost a session), 2 bad
 * arguments.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "opts.h"
#include "frame.h"
#include "log.h"
#include "net.h"
#include "journal.h"
#include "supervisor/supervisor.h"
#include "worker/worker.h"

#define EXIT_USAGE 2

/* Hidden test knobs stay out of --help: --hello-timeout-ms=N (1..600000)
 * shortens the HELLO deadline so the e2e tests run fast,
 * --no-multishot-accept exercises the one-shot accept path of kernels
 * before 5.19, and --check-arena prints how many arena slots this process
 * could use and exits (0 if all of them). */
enum {
        OPT_LOG_LEVEL = 0x100,
        OPT_LOG_TARGET,
        OPT_LOG_FILE,
        OPT_METRICS,
        OPT_INSECURE,
        OPT_WORKER,
        OPT_CTL_FD,
        OPT_HELLO_TIMEOUT,
        OPT_NO_MULTISHOT,
        OPT_CHECKPOINT_DIR,
        OPT_CHECKPOINT_PROVIDER,
        OPT_CHECKPOINT_CONFIG,
        OPT_DRAIN_TIMEOUT,
        OPT_SESSION_TTL,
        OPT_RESTORE,
        OPT_CHECKPOINT_MODE,
        OPT_CHECKPOINT_LANES,
        OPT_CHECKPOINT_VERIFY,
        OPT_HOT,
        OPT_DETACH_GRACE,
        OPT_MAX_PENDING,
        OPT_MAX_PENDING_PER_PEER,
        OPT_UPLOAD_CAP_SESSION,
        OPT_UPLOAD_CAP_TOTAL,
        OPT_UPLOAD_ACCT_FD,
        OPT_CHECK_ARENA,
        OPT_TLS_CERT,
        OPT_TLS_KEY,
        OPT_TLS_CLIENT_CA,
        OPT_PEER_TLS_CA,
        OPT_AUTH_TOKENS,
        OPT_MAX_SESSIONS_TENANT,
        OPT_MAX_DETACHED_TENANT,
};

static const struct option long_options[] = {
        { "listen", required_argument, NULL, 'l' },
        { "backend", required_argument, NULL, 'b' },
        { "max-sessions", required_argument, NULL, 'm' },
        { "log-level", required_argument, NULL, OPT_LOG_LEVEL },
        { "log-target", required_argument, NULL, OPT_LOG_TARGET },
        { "log-file", required_argument, NULL, OPT_LOG_FILE },
        { "metrics", required_argument, NULL, OPT_METRICS },
        { "insecure", no_argument, NULL, OPT_INSECURE },
        { "checkpoint-dir", required_argument, NULL, OPT_CHECKPOINT_DIR },
        { "checkpoint-provider", required_argument, NULL, OPT_CHECKPOINT_PROVIDER },
        { "checkpoint-config", required_argument, NULL, OPT_CHECKPOINT_CONFIG },
        { "drain-timeout", required_argument, NULL, OPT_DRAIN_TIMEOUT },
        { "session-ttl", required_argument, NULL, OPT_SESSION_TTL },
        { "restore", required_argument, NULL, OPT_RESTORE },
        { "checkpoint-mode", required_argument, NULL, OPT_CHECKPOINT_MODE },
        { "checkpoint-lanes", required_argument, NULL, OPT_CHECKPOINT_LANES },
        { "checkpoint-verify", no_argument, NULL, OPT_CHECKPOINT_VERIFY },
        { "hot", no_argument, NULL, OPT_HOT },
        { "detach-grace", required_argument, NULL, OPT_DETACH_GRACE },
        { "max-pending", required_argument, NULL, OPT_MAX_PENDING },
        { "max-pending-per-peer", required_argument, NULL, OPT_MAX_PENDING_PER_PEER },
        { "upload-cap-session", required_argument, NULL, OPT_UPLOAD_CAP_SESSION },
        { "upload-cap-total", required_argument, NULL, OPT_UPLOAD_CAP_TOTAL },
        { "upload-acct-fd", required_argument, NULL, OPT_UPLOAD_ACCT_FD },
        { "check-arena", no_argument, NULL, OPT_CHECK_ARENA },
        { "tls-cert", required_argument, NULL, OPT_TLS_CERT },
        { "tls-key", required_argument, NULL, OPT_TLS_KEY },
        { "tls-client-ca", required_argument, NULL, OPT_TLS_CLIENT_CA },
        { "peer-tls-ca", required_argument, NULL, OPT_PEER_TLS_CA },
        { "auth-tokens", required_argument, NULL, OPT_AUTH_TOKENS },
        { "max-sessions-per-tenant", required_argument, NULL, OPT_MAX_SESSIONS_TENANT },
        { "max-detached-per-tenant", required_argument, NULL, OPT_MAX_DETACHED_TENANT },
        LUPD_HEALTH_LONG_OPTIONS,
        LUPD_FLEET_LONG_OPTIONS,
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { "worker", no_argument, NULL, OPT_WORKER },
        { "ctl-fd", required_argument, NULL, OPT_CTL_FD },
        { "hello-timeout-ms", required_argument, NULL, OPT_HELLO_TIMEOUT },
        { "no-multishot-accept", no_argument, NULL, OPT_NO_MULTISHOT },
        { NULL, 0, NULL, 0 },
};

/* The --help text, laid out as it prints; its %d fields, in order, are
 * filled in by print_usage(). */
/* clang-format off */
static const char usage_text[] =
"Usage: lupined [OPTIONS]\n"
"\n"
"The lupine GPU-host daemon: serves this host's GPUs to CUDA programs on\n"
"other machines. The main process (the supervisor) accepts connections and\n"
"starts one worker process per session; only workers touch CUDA.\n"
"\n"
"Options:\n"
"  -l, --listen ENDPOINT   Listen on ENDPOINT. Repeat the option to listen on\n"
"                          several (at most %d). ENDPOINT is HOST:PORT,\n"
"                          [IPV6]:PORT or unix:PATH. Default: 127.0.0.1:%d.\n"
"                          A TCP listener on an address other than loopback\n"
"                          needs TLS and authentication (below), or --insecure.\n"
"  -b, --backend KIND      The CUDA driver workers use: auto (the default: the\n"
"                          host's libcuda.so.1 if a GPU is found, otherwise the\n"
"                          simulator), cuda (the host's libcuda.so.1) or sim\n"
"                          (libcuda-sim.so, a simulated GPU).\n"
"  -m, --max-sessions N    Serve at most N sessions at once, 1..%d (default %d).\n"
"                          Further clients are refused with \"server full\".\n"
"      --log-level SPEC    err, warning, info (the default) or debug, for every\n"
"                          category, and CATEGORY=LEVEL for one, comma-separated:\n"
"                          'info,net=debug,checkpoint=warning'. Categories: core,\n"
"                          net, session, checkpoint, gpu, tls, nvml, admin.\n"
"      --log-target WHERE  auto (the default: the journal's native protocol, with\n"
"                          fields SESSION, TENANT, OP, CUDA_ERROR, when systemd's\n"
"                          journal is stderr; stderr otherwise), journal or stderr\n"
"                          (one line per message: 'lupined[PID]: LEVEL: text').\n"
"      --log-file PATH     Also append every line to PATH (created if missing),\n"
"                          with the time and the fields: what `lupinectl log`\n"
"                          reads when there is no journal. No rotation of its\n"
"                          own: use logrotate's copytruncate, or restart.\n"
"      --metrics HOST:PORT Serve Prometheus metrics at http://HOST:PORT/metrics\n"
"                          (sessions, calls, bytes, memory, checkpoints, GPU\n"
"                          temperature, power, utilization; no authentication:\n"
"                          bind it to loopback or a management network). Needs\n"
"                          libmicrohttpd12.\n"
"      --insecure          Serve unauthenticated (and, without TLS, unencrypted)\n"
"                          clients on listeners reachable from the network. The\n"
"                          log says so at start and on every such connection.\n"
"  -h, --help              Show this help and exit.\n"
"  -V, --version           Show the version and exit.\n"
"\n"
"Sessions that survive restarts (give a checkpoint provider to turn them on):\n"
"      --checkpoint-dir DIR\n"
"                          Checkpoint sessions into DIR with the built-in\n"
"                          directory provider (created if missing; a shared\n"
"                          filesystem lets sessions move between hosts). Short\n"
"                          for --checkpoint-config DIR without a provider.\n"
"      --checkpoint-provider PATH\n"
"                          Checkpoint sessions through the provider library\n"
"                          PATH (docs/providers.md). Default:\n"
"                          $LUPINE_CHECKPOINT_LIBRARY.\n"
"      --checkpoint-config STRING\n"
"                          Passed to the provider when it opens: for the\n"
"                          directory provider, the directory.\n"
"      --drain-timeout SECONDS\n"
"                          How long a session's worker gets to checkpoint it\n"
"                          when draining, and to restore it at start, before it\n"
"                          is killed, 1..%d (default %d). A session whose\n"
"                          checkpoint does not finish in time is lost.\n"
"      --session-ttl SECONDS\n"
"                          How long a session without its client (disconnected,\n"
"                          or restored and not yet resumed) is kept before it\n"
"                          ends, 1..%d (30 days; default %d).\n"
"      --checkpoint-mode MODE\n"
"                          What a drain keeps of the sessions' device memory:\n"
"                          hot (it stays on the GPU; its fds go to systemd's fd\n"
"                          store, or across the re-exec of an upgrade), durable\n"
"                          (a copy through the provider) or both. Default: both\n"
"                          under systemd (NOTIFY_SOCKET) and for an upgrade,\n"
"                          durable otherwise. Without a fd store a SIGTERM drain\n"
"                          always writes the durable copy.\n"
"      --checkpoint-lanes N\n"
"                          Threads that move a session's memory to and from\n"
"                          the provider at once, each with its own stream and\n"
"                          pinned buffers, 1..%d. Default: LUPINE_CHECKPOINT_LANES,\n"
"                          else min(16, online CPUs), at least 1.\n"
"      --checkpoint-verify\n"
"                          After each checkpoint commits, read its memory back\n"
"                          through the provider and check every piece against\n"
"                          the hash taken on the GPU; a mismatch fails the\n"
"                          checkpoint loudly. Costs a full read of the memory.\n"
"                          Default: LUPINE_CHECKPOINT_VERIFY=1 turns it on.\n"
"\n"
"Limits against clients that would exhaust the daemon (docs/security.md; each\n"
"is shown by `lupinectl status` and logged with \"limit hit\" when reached):\n"
"      --detach-grace SECONDS\n"
"                          How long a session that was never checkpointed is\n"
"                          kept once its client is gone without GOODBYE, instead\n"
"                          of --session-ttl, 0..%d (default %d; 0: the TTL).\n"
"      --max-pending N     Connections that have not finished HELLO, in total,\n"
"                          1..%d (default %d). A newcomer is never turned away\n"
"                          for want of room: the oldest pending connection of\n"
"                          the peer holding the most is closed instead.\n"
"      --max-pending-per-peer N\n"
"                          The same for one peer address (on a UNIX socket: one\n"
"                          uid), 0..%d (default %d; 0: no per-peer limit); its\n"
"                          oldest pending connection makes room.\n"
"      --upload-cap-session MIB\n"
"                          Module images a session has uploaded and no call has\n"
"                          used yet, 0..%d MiB (default %d; 0: the protocol's\n"
"                          2 GiB). An upload past it is dropped and the call\n"
"                          naming it fails with CUDA_ERROR_OUT_OF_MEMORY.\n"
"      --upload-cap-total MIB\n"
"                          The same over all sessions, 0..%d MiB (default %d;\n"
"                          0: off).\n"
"\n"
"TLS and authentication (docs/security.md):\n"
"      --tls-cert FILE     Serve TLS 1.3 on every TCP listener, with this PEM\n"
"                          certificate chain (needs --tls-key). Clients use\n"
"                          LUPINE_SERVER=tls://HOST:PORT.\n"
"      --tls-key FILE      The certificate's private key (PEM).\n"
"      --tls-client-ca FILE\n"
"                          Mutual TLS: clients must present a certificate this\n"
"                          CA file signed; its subject CN is the client's tenant.\n"
"      --peer-tls-ca FILE  Copies between servers to a tls:// lupined check its\n"
"                          certificate against these CAs (default: the system's\n"
"                          trust store); this lupined's --tls-cert, if any, is\n"
"                          its client certificate there.\n"
"      --auth-tokens FILE  Bearer tokens: one \"TENANT SHA256HEX\" a line, the\n"
"                          SHA-256 of a token in hex (printf %%s TOKEN | sha256sum),\n"
"                          never the token. Clients set LUPINE_TOKEN. Accepted\n"
"                          over TLS, loopback and the UNIX socket only.\n"
"      --max-sessions-per-tenant N\n"
"                          Sessions one tenant may hold, 0..%d (default %d; 0:\n"
"                          off).\n"
"      --max-detached-per-tenant N\n"
"                          New sessions are refused to a tenant that has N\n"
"                          sessions without a client, 0..%d (default %d; 0: off).\n";
static const char usage_tail[] =
"\n"
"Internal options (the supervisor passes them to the workers it starts;\n"
"not for use by hand):\n"
"      --worker            Run as a per-session worker process.\n"
"      --ctl-fd=N          The worker's control socket (required with --worker).\n"
"      --upload-acct-fd=N  The supervisor's upload accounting (daemon/upload_acct.h).\n"
"      --restore=SESSION   Restore SESSION from its newest checkpoint and wait\n"
"                          for its client (needs a checkpoint provider).\n"
"\n"
"Environment:\n"
"  LUPINE_CHECKPOINT_LIBRARY  The checkpoint provider library, when neither\n"
"                   --checkpoint-provider nor --checkpoint-dir is given.\n"
"  LUPINE_CHECKPOINT_CONFIG   The provider's configuration when\n"
"                   --checkpoint-config is not given.\n"
"  LUPINE_CHECKPOINT_LANES    Checkpoint and restore lanes when\n"
"                   --checkpoint-lanes is not given.\n"
"  LUPINE_CHECKPOINT_VERIFY   1: as --checkpoint-verify.\n"
"  LUPINE_CHECKPOINT_GPU_HASH 0: hash checkpoint memory on the CPU (in the\n"
"                   lanes) instead of on the GPU.\n"
"  LUPINE_TRACE     Call tracing in the workers: 0 (off), 1 (calls), 2 (also\n"
"                   frames), 3 (also every driver call a client's libraries\n"
"                   make, for clients); to stderr, or PATH (level 1) or N:PATH\n"
"                   to append to a file.\n"
"  NOTIFY_SOCKET    Set by systemd for Type=notify services: lupined sends\n"
"                   READY=1 once it serves (after restoring sessions),\n"
"                   STATUS= lines, STOPPING=1 when it shuts down or drains,\n"
"                   and EXTEND_TIMEOUT_USEC while it restores or drains.\n"
"  WATCHDOG_USEC, WATCHDOG_PID\n"
"                   Set by systemd for WatchdogSec=: lupined sends\n"
"                   WATCHDOG=1 from its event loop every half interval.\n"
"  LISTEN_FDS, LISTEN_FDNAMES, LISTEN_PID\n"
"                   Set by systemd's socket activation (lupined.socket), its\n"
"                   fd store, or lupined re-executing itself. Inherited\n"
"                   listening sockets are served instead of the --listen\n"
"                   endpoints, which are then ignored. Other inherited fds\n"
"                   that restore does not claim are closed (and removed\n"
"                   from systemd's fd store) once restore is done.\n"
"  JOURNAL_STREAM   Set by systemd when stderr is connected to the journal.\n"
"                   lupined then writes native journal entries, with\n"
"                   PRIORITY, SESSION, TENANT, OP and CUDA_ERROR fields\n"
"                   (--log-target says otherwise).\n"
"\n"
"Signals: SIGTERM or SIGINT stop the daemon. With a checkpoint provider they\n"
"drain it: no new sessions are admitted (new clients wait in the listen\n"
"backlog), every session is checkpointed and its client told to reconnect,\n"
"then lupined exits; the next start restores the sessions. A second signal\n"
"does not cut a drain short; --drain-timeout does. Without a provider,\n"
"workers say goodbye to their clients and get %d s to exit before SIGKILL.\n"
"SIGHUP (systemctl reload) upgrades without disconnecting anyone: every\n"
"session is drained and checkpointed (hot), its client connection kept, and\n"
"lupined re-executes the binary now on disk, which restores the sessions and\n"
"serves the same connections (needs a checkpoint provider; `lupinectl\n"
"upgrade` does the same).\n"
"\n"
"Exit status: 0 after a clean shutdown or a drain that checkpointed every\n"
"session; 1 on a runtime error or when a drain lost a session (the log names\n"
"it: \"session NAME LOST: ...\"); 2 on bad arguments.\n";
/* clang-format on */
static void print_usage(FILE *f)
{
        fprintf(f, usage_text, LUPD_MAX_LISTEN, LUPD_DEFAULT_PORT, LUPD_MAX_SESSIONS, LUPD_MAX_SESSIONS,
                LUPD_DRAIN_TIMEOUT_MAX_S, LUPD_DRAIN_TIMEOUT_DEFAULT_S, LUPD_SESSION_TTL_MAX_S,
                LUPD_SESSION_TTL_DEFAULT_S, LUPD_CKPT_LANES_MAX, LUPD_SESSION_TTL_MAX_S, LUPD_DETACH_GRACE_DEFAULT_S,
                LUPD_PENDING_LIMIT_MAX, LUPD_PENDING_DEFAULT, LUPD_PENDING_LIMIT_MAX, LUPD_PENDING_PER_PEER_DEFAULT,
                LUPD_UPLOAD_CAP_SESSION_MAX_MIB, LUPD_UPLOAD_CAP_SESSION_DEFAULT_MIB, LUPD_UPLOAD_CAP_TOTAL_MAX_MIB,
                LUPD_UPLOAD_CAP_TOTAL_DEFAULT_MIB, LUPD_MAX_SESSIONS, LUPD_SESSIONS_PER_TENANT_DEFAULT,
                LUPD_MAX_SESSIONS, LUPD_DETACHED_PER_TENANT_DEFAULT);
        lupd_health_usage(f);
        lupd_fleet_usage(f);
        fprintf(f, usage_tail, LUPD_SHUTDOWN_GRACE_MS / 1000);
}

/* A string option into a fixed buffer: neither empty nor cut short. */
static int copy_arg(char *dst, size_t cap, const char *value, const char *what)
{
        size_t n = strlen(value);

        if (n == 0)
                return lupd_usage_error("%s: must not be empty", what);
        if (n >= cap)
                return lupd_usage_error("%s: too long (at most %zu bytes)", what, cap - 1);
        memcpy(dst, value, n + 1);
        return 0;
}

/* Relative checkpoint directories are taken from the directory lupined was
 * started in, once, so that every worker and every log line agrees on them. */
static int make_absolute(char *path, size_t cap, const char *what)
{
        char cwd[4096];
        size_t n, m;

        if (path[0] == '/')
                return 0;
        if (!getcwd(cwd, sizeof(cwd)))
                return lupd_usage_error("%s %s: cannot resolve a relative path: %s", what, path, strerror(errno));
        n = strlen(cwd);
        m = strlen(path);
        if (n + 1 + m >= cap)
                return lupd_usage_error("%s %s: too long once made absolute", what, path);
        memmove(path + n + 1, path, m + 1);
        memcpy(path, cwd, n);
        path[n] = '/';
        return 0;
}

/* The checkpoint options, after all are parsed: exclusions, the
 * environment default, and what --checkpoint-config alone means. */
static int check_checkpoint_args(struct lupd_config *cfg)
{
        const char *env = getenv("LUPINE_CHECKPOINT_LIBRARY");
        const char *provider_what = "--checkpoint-provider";
        int r;

        if (cfg->checkpoint_dir[0] && cfg->checkpoint_provider[0])
                return lupd_usage_error(
                        "--checkpoint-dir and --checkpoint-provider exclude each other (--checkpoint-dir "
                        "DIR means the built-in directory provider)");
        if (cfg->checkpoint_dir[0] && cfg->checkpoint_config[0])
                return lupd_usage_error("--checkpoint-dir and --checkpoint-config exclude each other (--checkpoint-dir "
                                        "DIR is short for --checkpoint-config DIR with the directory provider)");
        if (!cfg->checkpoint_dir[0] && !cfg->checkpoint_provider[0] && env && env[0]) {
                r = copy_arg(cfg->checkpoint_provider, sizeof(cfg->checkpoint_provider), env,
                             "LUPINE_CHECKPOINT_LIBRARY");
                if (r < 0)
                        return r;
                provider_what = "LUPINE_CHECKPOINT_LIBRARY";
        }
        /* No provider library: the built-in directory provider, whose
         * configuration is the directory. */
        if (cfg->checkpoint_config[0] && !cfg->checkpoint_provider[0]) {
                memcpy(cfg->checkpoint_dir, cfg->checkpoint_config, sizeof(cfg->checkpoint_dir));
                cfg->checkpoint_config[0] = 0;
        }
        if (cfg->checkpoint_dir[0]) {
                r = make_absolute(cfg->checkpoint_dir, sizeof(cfg->checkpoint_dir), "--checkpoint-dir");
                if (r < 0)
                        return r;
        }
        /* A bare name is looked up like any dlopen() name; a path must be
         * there now, rather than fail at the first drain. */
        if (strchr(cfg->checkpoint_provider, '/') && access(cfg->checkpoint_provider, R_OK) < 0)
                return lupd_usage_error("%s %s: %s", provider_what, cfg->checkpoint_provider, strerror(errno));
        if (cfg->restore[0] && !cfg->worker)
                return lupd_usage_error("--restore is only meaningful with --worker");
        if (cfg->restore[0] && !cfg->checkpoint_dir[0] && !cfg->checkpoint_provider[0])
                return lupd_usage_error("--restore=%s needs a checkpoint provider", cfg->restore);
        return 0;
}

static int add_listen(struct lupd_config *cfg, const char *s)
{
        int r;

        if (cfg->n_listen >= LUPD_MAX_LISTEN)
                return lupd_usage_error("--listen %s: at most %d endpoints", s, LUPD_MAX_LISTEN);
        r = lup_endpoint_parse(s, &cfg->listen[cfg->n_listen]);
        if (r == -EHOSTUNREACH)
                return lupd_usage_error("--listen %s: cannot resolve the host name", s);
        if (r < 0)
                return lupd_usage_error("--listen %s: expected HOST:PORT, [IPV6]:PORT or unix:PATH", s);
        cfg->n_listen++;
        return 0;
}

/* The options about sessions that survive restarts (the second part of
 * --help): 1 when c is one of them and was taken, 0 when it is not one of
 * them, or -EINVAL after printing what is wrong. */
static int parse_checkpoint_option(int c, const char *arg, struct lupd_config *cfg)
{
        int r;

        switch (c) {
        case OPT_CHECKPOINT_DIR:
                r = copy_arg(cfg->checkpoint_dir, sizeof(cfg->checkpoint_dir), arg, "--checkpoint-dir");
                if (r < 0)
                        return r;
                return 1;
        case OPT_CHECKPOINT_PROVIDER:
                r = copy_arg(cfg->checkpoint_provider, sizeof(cfg->checkpoint_provider), arg, "--checkpoint-provider");
                if (r < 0)
                        return r;
                return 1;
        case OPT_CHECKPOINT_CONFIG:
                r = copy_arg(cfg->checkpoint_config, sizeof(cfg->checkpoint_config), arg, "--checkpoint-config");
                if (r < 0)
                        return r;
                return 1;
        case OPT_DRAIN_TIMEOUT:
                if (lupd_parse_int(arg, 1, LUPD_DRAIN_TIMEOUT_MAX_S, &cfg->drain_timeout_s) < 0)
                        return lupd_usage_error("--drain-timeout %s: expected a number of seconds from 1 to %d", arg,
                                                LUPD_DRAIN_TIMEOUT_MAX_S);
                return 1;
        case OPT_SESSION_TTL:
                if (lupd_parse_int(arg, 1, LUPD_SESSION_TTL_MAX_S, &cfg->session_ttl_s) < 0)
                        return lupd_usage_error("--session-ttl %s: expected a number of seconds from 1 to %d "
                                                "(30 days)",
                                                arg, LUPD_SESSION_TTL_MAX_S);
                return 1;
        case OPT_CHECKPOINT_MODE:
                if (strcmp(arg, "hot") == 0)
                        cfg->checkpoint_mode = LUPD_CKPT_HOT;
                else if (strcmp(arg, "durable") == 0)
                        cfg->checkpoint_mode = LUPD_CKPT_DURABLE;
                else if (strcmp(arg, "both") == 0)
                        cfg->checkpoint_mode = LUPD_CKPT_BOTH;
                else
                        return lupd_usage_error("--checkpoint-mode %s: expected hot, durable or both", arg);
                return 1;
        case OPT_CHECKPOINT_LANES:
                if (lupd_parse_int(arg, 1, LUPD_CKPT_LANES_MAX, &cfg->checkpoint_lanes) < 0)
                        return lupd_usage_error("--checkpoint-lanes %s: expected a number from 1 to %d", arg,
                                                LUPD_CKPT_LANES_MAX);
                return 1;
        case OPT_CHECKPOINT_VERIFY:
                cfg->checkpoint_verify = true;
                return 1;
        case OPT_HOT:
                cfg->hot = true;
                return 1;
        case OPT_RESTORE:
                if (!lup_session_name_valid(arg, strlen(arg)))
                        return lupd_usage_error("--restore=%s: not a session name (1 to %u of A-Z a-z 0-9 . _ -)", arg,
                                                LUP_MAX_NAME);
                memcpy(cfg->restore, arg, strlen(arg) + 1);
                return 1;
        default:
                return 0;
        }
}

/* The limits (the third part of --help): 1 when c is one of them and was
 * taken, 0 when it is not, or -EINVAL after printing what is wrong. */
static int parse_limit_option(int c, const char *arg, struct lupd_config *cfg)
{
        switch (c) {
        case OPT_DETACH_GRACE:
                if (lupd_parse_int(arg, 0, LUPD_SESSION_TTL_MAX_S, &cfg->detach_grace_s) < 0)
                        return lupd_usage_error("--detach-grace %s: expected a number of seconds from 0 to %d", arg,
                                                LUPD_SESSION_TTL_MAX_S);
                return 1;
        case OPT_MAX_PENDING:
                if (lupd_parse_int(arg, 1, LUPD_PENDING_LIMIT_MAX, &cfg->max_pending) < 0)
                        return lupd_usage_error("--max-pending %s: expected a number from 1 to %d", arg,
                                                LUPD_PENDING_LIMIT_MAX);
                return 1;
        case OPT_MAX_PENDING_PER_PEER:
                if (lupd_parse_int(arg, 0, LUPD_PENDING_LIMIT_MAX, &cfg->max_pending_per_peer) < 0)
                        return lupd_usage_error("--max-pending-per-peer %s: expected a number from 0 to %d", arg,
                                                LUPD_PENDING_LIMIT_MAX);
                return 1;
        case OPT_UPLOAD_CAP_SESSION:
                if (lupd_parse_int(arg, 0, LUPD_UPLOAD_CAP_SESSION_MAX_MIB, &cfg->upload_cap_session_mib) < 0)
                        return lupd_usage_error("--upload-cap-session %s: expected a number of MiB from 0 to %d", arg,
                                                LUPD_UPLOAD_CAP_SESSION_MAX_MIB);
                return 1;
        case OPT_UPLOAD_CAP_TOTAL:
                if (lupd_parse_int(arg, 0, LUPD_UPLOAD_CAP_TOTAL_MAX_MIB, &cfg->upload_cap_total_mib) < 0)
                        return lupd_usage_error("--upload-cap-total %s: expected a number of MiB from 0 to %d", arg,
                                                LUPD_UPLOAD_CAP_TOTAL_MAX_MIB);
                return 1;
        case OPT_CHECK_ARENA:
                cfg->check_arena = true;
                return 1;
        case OPT_MAX_SESSIONS_TENANT:
        case OPT_MAX_DETACHED_TENANT:
                if (lupd_parse_int(arg, 0, LUPD_MAX_SESSIONS,
                                   c == OPT_MAX_SESSIONS_TENANT ? &cfg->max_sessions_per_tenant
                                                                : &cfg->max_detached_per_tenant) < 0)
                        return lupd_usage_error("--max-%s-per-tenant %s: expected a number from 0 to %d",
                                                c == OPT_MAX_SESSIONS_TENANT ? "sessions" : "detached", arg,
                                                LUPD_MAX_SESSIONS);
                return 1;
        case OPT_TLS_CERT:
        case OPT_TLS_KEY:
        case OPT_TLS_CLIENT_CA:
        case OPT_PEER_TLS_CA:
        case OPT_AUTH_TOKENS: {
                char *dst = c == OPT_TLS_CERT        ? cfg->tls_cert
                            : c == OPT_TLS_KEY       ? cfg->tls_key
                            : c == OPT_TLS_CLIENT_CA ? cfg->tls_client_ca
                            : c == OPT_PEER_TLS_CA   ? cfg->peer_tls_ca
                                                     : cfg->auth_tokens;
                if (!arg[0] || strlen(arg) >= sizeof(cfg->tls_cert))
                        return lupd_usage_error("%s: expected a file name", arg);
                memcpy(dst, arg, strlen(arg) + 1);
                return 1;
        }
        case OPT_UPLOAD_ACCT_FD:
                if (lupd_parse_int(arg, 0, INT_MAX, &cfg->upload_acct_fd) < 0)
                        return lupd_usage_error("--upload-acct-fd=%s: expected a file descriptor number", arg);
                return 1;
        default:
                return 0;
        }
}

/* --log-level, --log-target, --log-file: 1 when c is one of them and was
 * taken, 0 when it is not, or -EINVAL after printing what is wrong. */
static int parse_log_option(int c, const char *arg, struct lupd_config *cfg)
{
        char why[160];

        switch (c) {
        case OPT_LOG_LEVEL:
                if (lup_log_set_levels(arg, why, sizeof(why)) < 0)
                        return lupd_usage_error("--log-level %s: %s", arg, why);
                if (copy_arg(cfg->log_levels, sizeof(cfg->log_levels), arg, "--log-level") < 0)
                        return -EINVAL;
                return 1;
        case OPT_LOG_TARGET:
                if (strcmp(arg, "auto") == 0)
                        cfg->log_target = LUPD_LOG_TARGET_AUTO;
                else if (strcmp(arg, "journal") == 0)
                        cfg->log_target = LUPD_LOG_TARGET_JOURNAL;
                else if (strcmp(arg, "stderr") == 0)
                        cfg->log_target = LUPD_LOG_TARGET_STDERR;
                else
                        return lupd_usage_error("--log-target %s: expected auto, journal or stderr", arg);
                return 1;
        case OPT_LOG_FILE:
                /* absolute: workers open it too, and lupinectl is told it */
                if (copy_arg(cfg->log_file, sizeof(cfg->log_file), arg, "--log-file") < 0 ||
                    make_absolute(cfg->log_file, sizeof(cfg->log_file), "--log-file") < 0)
                        return -EINVAL;
                return 1;
        default:
                return 0;
        }
}

/* --log-file: opened once per process (supervisor and each worker), for
 * appending; 0, or -errno after saying why. */
static int open_log_file(const struct lupd_config *cfg)
{
        if (!cfg->log_file[0])
                return 0;
        int fd = open(cfg->log_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0640);
        if (fd < 0) {
                int e = errno;
                lup_err("--log-file %s: cannot open it for appending: %s", cfg->log_file, strerror(e));
                return -e;
        }
        lup_log_set_file(fd);
        return 0;
}

/* Returns 0 to run, 1 to exit 0 at once (--help, --version), or -EINVAL
 * after printing what is wrong. */
static int parse_args(int argc, char **argv, struct lupd_config *cfg)
{
        bool have_ctl_fd = false;
        int c, r;

        while ((c = getopt_long(argc, argv, "l:b:m:hV", long_options, NULL)) >= 0) {
                switch (c) {
                case 'l':
                        r = add_listen(cfg, optarg);
                        if (r < 0)
                                return r;
                        cfg->listen_explicit = true;
                        break;
                case 'b':
                        if (strcmp(optarg, "auto") == 0)
                                cfg->backend = LUPD_BACKEND_AUTO;
                        else if (strcmp(optarg, "cuda") == 0)
                                cfg->backend = LUPD_BACKEND_CUDA;
                        else if (strcmp(optarg, "sim") == 0)
                                cfg->backend = LUPD_BACKEND_SIM;
                        else
                                return lupd_usage_error("--backend %s: expected auto, cuda or sim", optarg);
                        break;
                case 'm':
                        if (lupd_parse_int(optarg, 1, LUPD_MAX_SESSIONS, &cfg->max_sessions) < 0)
                                return lupd_usage_error("--max-sessions %s: expected a number from 1 to %d", optarg,
                                                        LUPD_MAX_SESSIONS);
                        break;
                case OPT_METRICS:
                        if (copy_arg(cfg->metrics, sizeof(cfg->metrics), optarg, "--metrics") < 0)
                                return -EINVAL;
                        break;
                case OPT_INSECURE:
                        cfg->insecure = true;
                        break;
                case OPT_WORKER:
                        cfg->worker = true;
                        break;
                case OPT_CTL_FD:
                        if (lupd_parse_int(optarg, 0, INT_MAX, &cfg->ctl_fd) < 0)
                                return lupd_usage_error("--ctl-fd=%s: expected a file descriptor number", optarg);
                        have_ctl_fd = true;
                        break;
                case OPT_HELLO_TIMEOUT:
                        if (lupd_parse_int(optarg, 1, 600000, &cfg->hello_timeout_ms) < 0)
                                return lupd_usage_error("--hello-timeout-ms %s: expected 1 to 600000", optarg);
                        break;
                case OPT_NO_MULTISHOT:
                        cfg->no_multishot_accept = true;
                        break;
                default:
                        r = parse_checkpoint_option(c, optarg, cfg);
                        if (r == 0)
                                r = parse_limit_option(c, optarg, cfg);
                        if (r == 0)
                                r = parse_log_option(c, optarg, cfg);
                        if (r == 0)
                                r = lupd_health_parse_option(c, optarg, &cfg->health);
                        if (r == 0)
                                r = lupd_fleet_parse_option(c, optarg, &cfg->fleet);
                        if (r < 0)
                                return r;
                        if (r > 0)
                                break;
                        /* getopt_long has named the offending option */
                        fputs("Try 'lupined --help' for more information.\n", stderr);
                        return -EINVAL;
                case 'h':
                        print_usage(stdout);
                        return 1;
                case 'V':
                        printf("lupined %s\n", LUPINE_VERSION);
                        return 1;
                }
        }
        if (optind < argc)
                return lupd_usage_error("unexpected argument '%s'", argv[optind]);
        if (cfg->worker && !have_ctl_fd)
                return lupd_usage_error("--worker needs --ctl-fd=N");
        if (!cfg->worker && have_ctl_fd)
                return lupd_usage_error("--ctl-fd is only meaningful with --worker");
        if (cfg->worker && fcntl(cfg->ctl_fd, F_GETFD) < 0)
                return lupd_usage_error("--ctl-fd=%d: not an open file descriptor", cfg->ctl_fd);
        r = check_checkpoint_args(cfg);
        if (r < 0)
                return r;
        if (!cfg->tls_cert[0] != !cfg->tls_key[0])
                return lupd_usage_error("--tls-cert and --tls-key go together");
        if (cfg->tls_client_ca[0] && !cfg->tls_cert[0])
                return lupd_usage_error("--tls-client-ca needs --tls-cert and --tls-key");
        if (!cfg->worker && cfg->n_listen == 0) {
                char def[32];
                snprintf(def, sizeof(def), "127.0.0.1:%d", LUPD_DEFAULT_PORT);
                r = add_listen(cfg, def);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* A daemon started with fd 0, 1 or 2 closed would hand those numbers to
 * sockets, and the next log line would land in a client's stream. Opened
 * without O_CLOEXEC on purpose: workers inherit stdio. */
static void ensure_stdio(void)
{
        for (int fd = 0; fd < 3; fd++) {
                if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
                        continue;
                int n = open("/dev/null", O_RDWR);
                if (n >= 0 && n != fd) {
                        (void)dup2(n, fd);
                        close(n);
                }
        }
}

static int resolve_self_exe(struct lupd_config *cfg)
{
        ssize_t n = readlink("/proc/self/exe", cfg->self_exe, sizeof(cfg->self_exe) - 1);

        if (n < 0)
                return -errno;
        if ((size_t)n >= sizeof(cfg->self_exe) - 1)
                return -ENAMETOOLONG;
        cfg->self_exe[n] = 0;
        return 0;
}

int main(int argc, char **argv)
{
        struct lupd_config cfg = {
                .backend = LUPD_BACKEND_AUTO,
                .log_levels = "info",
                .max_sessions = LUPD_MAX_SESSIONS,
                .hello_timeout_ms = LUPD_HELLO_TIMEOUT_MS,
                .drain_timeout_s = LUPD_DRAIN_TIMEOUT_DEFAULT_S,
                .session_ttl_s = LUPD_SESSION_TTL_DEFAULT_S,
                .detach_grace_s = LUPD_DETACH_GRACE_DEFAULT_S,
                .max_pending = LUPD_PENDING_DEFAULT,
                .max_pending_per_peer = LUPD_PENDING_PER_PEER_DEFAULT,
                .upload_cap_session_mib = LUPD_UPLOAD_CAP_SESSION_DEFAULT_MIB,
                .upload_cap_total_mib = LUPD_UPLOAD_CAP_TOTAL_DEFAULT_MIB,
                .upload_acct_fd = -1,
                .ctl_fd = -1,
                .max_sessions_per_tenant = LUPD_SESSIONS_PER_TENANT_DEFAULT,
                .max_detached_per_tenant = LUPD_DETACHED_PER_TENANT_DEFAULT,
        };
        int r;

        ensure_stdio();
        lupd_health_defaults(&cfg.health);
        lupd_fleet_defaults(&cfg.fleet);
        cfg.argv = argv;
        r = parse_args(argc, argv, &cfg);
        if (r < 0)
                return EXIT_USAGE;
        if (r > 0)
                return 0;

        /* Peers vanish mid-write all the time; that is an -EPIPE to handle,
         * not a reason to die. */
        signal(SIGPIPE, SIG_IGN);
        lup_log_setup(cfg.worker ? "lupined-worker" : "lupined", LUP_LOG_INFO);
        lup_log_set_levels(cfg.log_levels, (char[160]){ 0 }, 160); /* checked by parse_args */
        lupd_journal_setup(cfg.log_target);
        if (open_log_file(&cfg) < 0)
                return 1;
        lup_trace_setup_from_env();

        r = resolve_self_exe(&cfg);
        if (cfg.worker)
                return worker_main(&cfg);
        if (r < 0) {
                lup_err("cannot resolve /proc/self/exe, needed to start workers: %s", strerror(-r));
                return 1;
        }
        if (cfg.insecure)
                lup_warn("INSECURE MODE (--insecure): clients without credentials are served on every listener, "
                         "also those reachable from the network; anyone who can reach them can use this host's "
                         "GPUs");
        return supervisor_main(&cfg);
}
