/* SPDX-License-Identifier: MIT */
/*
 * lupinectl: the operator's command line for a running lupined, over its
 * UNIX socket: status and sessions, the host's GPUs, settings, drain and
 * upgrade. Each command is one ADMIN request (docs/protocol.md).
 *
 * Exit status: 0 done, 1 failure (cannot connect, refused, bad reply),
 * 2 bad usage.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/lupinectl.h"
#include "lupine/wire.h"

#define DEFAULT_SOCKET "/run/lupine/lupined.sock"

static void usage(FILE *f)
{
        fprintf(f, "Usage: lupinectl [OPTIONS] COMMAND [ARGS]\n"
                   "\n"
                   "Talks to a running lupined over its UNIX socket (info --server and bench: to\n"
                   "any lupined, as a client does).\n"
                   "\n"
                   "Commands:\n"
                   "  status                 the daemon (backend, state) and one line per session:\n"
                   "                         name, arena slot, state, worker pid, tenant, client,\n"
                   "                         memory, calls/s, bytes/s, last checkpoint, progress\n"
                   "  sessions list          the same\n"
                   "  sessions show NAME     one session, a field a line\n"
                   "  sessions kill NAME [--delete]\n"
                   "                         end a session now; its checkpoint is kept (a restart\n"
                   "                         restores it) or, with --delete, deleted\n"
                   "  sessions checkpoint NAME\n"
                   "                         a durable checkpoint of one session now, while it runs\n"
                   "                         (its client sees a pause at most); waits for it, showing\n"
                   "                         progress; exit 1 when it failed (--json: the session's\n"
                   "                         object at the end)\n"
                   "  info                   the host's GPUs (with --server, a remote host's, fetched\n"
                   "                         as a client does): name, UUID, memory, clocks, power,\n"
                   "                         temperature, ECC, MIG and persistence modes\n"
                   "  monitor [-i MS] [-n COUNT]\n"
                   "                         a live view of the GPUs (temperature, power,\n"
                   "                         utilization, memory) and sessions (state, memory,\n"
                   "                         calls/s, bytes/s), redrawn every MS (default 1000)\n"
                   "                         until q, Ctrl-C or COUNT refreshes\n"
                   "  diag                   checks, each pass, warn or fail with what to do: the\n"
                   "                         driver, the GPUs (ECC, pending retirements,\n"
                   "                         persistence), the checkpoint store (writable, space),\n"
                   "                         the TLS certificate's expiry, io_uring, arena slots,\n"
                   "                         the fd store; exit 1 when one failed\n"
                   "  log [-n N] [--level L] [--session S] [-f] [--file PATH] [--journal-dir DIR]\n"
                   "                         the daemon's log: the last N entries (default 50) of\n"
                   "                         level L or more severe (err, warning, info, debug, 0-7)\n"
                   "                         and of session S, then with -f new ones until Ctrl-C;\n"
                   "                         from the journal when lupined logs there, else from its\n"
                   "                         --log-file (lupined says which), or from PATH or the\n"
                   "                         journal files in DIR\n"
                   "  bench [--server URL | --local] [-n N] [--size MiB]\n"
                   "                         what a client gets, through lupine's libcuda.so.1\n"
                   "                         ($LUPINE_LIBCUDA, else the installed one): call latency\n"
                   "                         (p50, p99 of N synchronous calls, default 1000), empty\n"
                   "                         kernel launches/s (10 x N), HtoD and DtoH copy GB/s of a\n"
                   "                         MiB buffer (default 64). URL as $LUPINE_SERVER (the\n"
                   "                         default), with the client's LUPINE_TLS_*, LUPINE_TOKEN;\n"
                   "                         --local: the same on this host's own driver, the\n"
                   "                         baseline to compare with\n"
                   "  config show            the settings that can change while lupined runs\n"
                   "  config set KEY VALUE   change one (log_level, drain_timeout_s, limits, ...)\n"
                   "  drain                  checkpoint every session, then the daemon exits (as on\n"
                   "                         SIGTERM); refused when lupined has no checkpoint provider.\n"
                   "                         Waits until lupined has exited (a progress bar on a\n"
                   "                         terminal), then says how many sessions were checkpointed\n"
                   "                         and lost; exit 1 when one was lost\n"
                   "  migrate NAME --to HOST:PORT\n"
                   "                         move a session to the lupined at HOST:PORT, which shares\n"
                   "                         this host's checkpoint store: a durable checkpoint (a\n"
                   "                         progress bar on a terminal), then its client reconnects\n"
                   "                         there and that host restores it (docs/fleet.md); says\n"
                   "                         the bytes and the pause; exit 1 when it failed\n"
                   "  upgrade                zero-disconnect upgrade (as systemctl reload / SIGHUP):\n"
                   "                         every session is drained and checkpointed with its memory\n"
                   "                         kept on the GPU and its client connection open, then\n"
                   "                         lupined re-executes the binary now on disk, which\n"
                   "                         restores them; clients see a pause. Refused (nothing\n"
                   "                         changes) without a checkpoint provider or when the\n"
                   "                         binary cannot be executed\n"
                   "\n"
                   "Options:\n"
                   "  -s, --socket PATH  lupined's UNIX socket (default: $LUPINE_ADMIN_SOCKET, or\n"
                   "                     " DEFAULT_SOCKET ")\n"
                   "  -j, --json         print lupined's JSON (status, sessions, info, config); log:\n"
                   "                     one JSON object an entry\n"
                   "  -d, --device N     info: only GPU N\n"
                   "      --server URL   info, bench: a lupined's GPUs as a client sees them, over\n"
                   "                     TCP or TLS (HOST:PORT, tls://HOST:PORT, unix:PATH), with\n"
                   "                     the client's credentials (LUPINE_TLS_CA, _CERT, _KEY,\n"
                   "                     LUPINE_TOKEN or LUPINE_TOKEN_FILE; docs/running.md)\n"
                   "      --no-color     no colors (they are used only on a terminal)\n"
                   "  -v, --verbose      say what is sent and received, on stderr\n"
                   "  -V, --version      show the version\n"
                   "  -h, --help         show this help\n"
                   "\n"
                   "Only root or the daemon's own user may ask. Exit status: 0 done, 1 failed,\n"
                   "2 bad usage.\n");
}

static int parse_device(const char *s, int *ret)
{
        char *end;
        long v = strtol(s, &end, 10);
        if (!*s || *end || v < 0 || v >= LUP_MAX_DEVICES)
                return -1;
        *ret = (int)v;
        return 0;
}

static int run(struct ctl_opts *o, int argc, char **argv)
{
        const char *cmd = argv[0];

        if (o->server && strcmp(cmd, "info") != 0 && strcmp(cmd, "bench") != 0) {
                fprintf(stderr, "lupinectl: --server applies to info and bench only (the other commands ask the "
                                "local lupined over its UNIX socket)\n");
                return 2;
        }

        if (strcmp(cmd, "status") == 0 && argc == 1)
                return ctl_status(o);
        if (strcmp(cmd, "sessions") == 0)
                return ctl_sessions(o, argc - 1, argv + 1);
        if (strcmp(cmd, "info") == 0 && argc == 1)
                return ctl_info(o);
        if (strcmp(cmd, "config") == 0)
                return ctl_config(o, argc - 1, argv + 1);
        if (strcmp(cmd, "diag") == 0 && argc == 1)
                return ctl_diag(o);
        if (strcmp(cmd, "monitor") == 0)
                return ctl_monitor(o, argc - 1, argv + 1);
        if (strcmp(cmd, "log") == 0)
                return ctl_log(o, argc, argv);
        if (strcmp(cmd, "bench") == 0)
                return ctl_bench(o, argc, argv);
        if (strcmp(cmd, "migrate") == 0)
                return ctl_migrate(o, argc, argv);
        if (strcmp(cmd, "drain") == 0 && argc == 1)
                return ctl_drain(o);
        if (strcmp(cmd, "upgrade") == 0 && argc == 1)
                return ctl_simple(o, LUP_ADMIN_UPGRADE, "upgrade");
        if (!strcmp(cmd, "status") || !strcmp(cmd, "info") || !strcmp(cmd, "drain") || !strcmp(cmd, "upgrade") ||
            !strcmp(cmd, "diag"))
                fprintf(stderr, "lupinectl: %s takes no arguments\nTry 'lupinectl --help'.\n", cmd);
        else
                fprintf(stderr,
                        "lupinectl: unknown command '%s' (status, sessions, info, monitor, diag, log, bench, config, drain or upgrade)\n"
                        "Try 'lupinectl --help'.\n",
                        cmd);
        return 2;
}

int main(int argc, char **argv)
{
        enum {
                OPT_NO_COLOR = 0x100,
                OPT_SERVER,
        };
        static const struct option opts[] = {
                { "socket", required_argument, NULL, 's' },
                { "json", no_argument, NULL, 'j' },
                { "device", required_argument, NULL, 'd' },
                { "no-color", no_argument, NULL, OPT_NO_COLOR },
                { "verbose", no_argument, NULL, 'v' },
                { "version", no_argument, NULL, 'V' },
                { "help", no_argument, NULL, 'h' },
                { "server", required_argument, NULL, OPT_SERVER },
                {},
        };
        struct ctl_opts o = { .socket = getenv("LUPINE_ADMIN_SOCKET"),
                              .device = -1,
                              .color = isatty(STDOUT_FILENO) && !getenv("NO_COLOR") };
        int c;

        if (!o.socket || !*o.socket)
                o.socket = DEFAULT_SOCKET;
        /* "+": options end at the command, so "sessions kill X --delete" keeps its flag */
        while ((c = getopt_long(argc, argv, "+s:jd:vVh", opts, NULL)) != -1) {
                switch (c) {
                case 's':
                        o.socket = optarg;
                        break;
                case 'j':
                        o.json = true;
                        break;
                case 'd':
                        if (parse_device(optarg, &o.device) < 0) {
                                fprintf(stderr, "lupinectl: --device %s: expected a GPU index from 0 to %d\n", optarg,
                                        LUP_MAX_DEVICES - 1);
                                return 2;
                        }
                        break;
                case OPT_NO_COLOR:
                        o.color = false;
                        break;
                case OPT_SERVER:
                        if (!*optarg) {
                                fprintf(stderr, "lupinectl: --server: empty\n");
                                return 2;
                        }
                        o.server = optarg;
                        break;
                case 'v':
                        o.verbose = true;
                        break;
                case 'V':
                        printf("lupinectl %s\n", LUPINE_VERSION);
                        return 0;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        fprintf(stderr, "Try 'lupinectl --help'.\n");
                        return 2;
                }
        }
        if (optind == argc) {
                fprintf(stderr,
                        "lupinectl: no command given (status, sessions, info, monitor, diag, log, bench, config, drain or upgrade)\n"
                        "Try 'lupinectl --help'.\n");
                return 2;
        }
        if (!*o.socket) {
                fprintf(stderr, "lupinectl: --socket: empty path\n");
                return 2;
        }
        return run(&o, argc - optind, argv + optind);
}
