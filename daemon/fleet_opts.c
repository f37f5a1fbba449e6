/* SPDX-License-Identifier: MIT */
/* The fleet's command-line options (daemon/fleet_cfg.h). */
#include <errno.h>
#include <getopt.h>
#include <string.h>
#include <unistd.h>

#include "fleet_cfg.h"
#include "frame.h"
#include "opts.h"

void lupd_fleet_defaults(struct lupd_fleet_cfg *f)
{
        char host[256] = "";

        memset(f, 0, sizeof(*f));
        f->lease_ttl_s = LUPD_LEASE_TTL_DEFAULT_S;
        if (gethostname(host, sizeof(host) - 1) < 0 || !host[0])
                snprintf(host, sizeof(host), "localhost");
        size_t n = strnlen(host, LUPINE_CKPT_OWNER_MAX);
        for (size_t i = 0; i < n; i++) {
                char ch = host[i];
                bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                          ch == '.' || ch == '_' || ch == '-';
                f->host_id[i] = ok ? ch : '-';
        }
        f->host_id[n] = 0;
}

int lupd_fleet_parse_option(int c, const char *arg, struct lupd_fleet_cfg *f)
{
        size_t n;

        switch (c) {
        case LUPD_OPT_HOST_ID:
                n = strlen(arg);
                if (n == 0 || n > LUPINE_CKPT_OWNER_MAX || !lup_session_name_valid(arg, n))
                        return lupd_usage_error("--host-id %s: expected 1 to %u characters of A-Z a-z 0-9 . _ -", arg,
                                                LUPINE_CKPT_OWNER_MAX);
                memcpy(f->host_id, arg, n + 1);
                return 1;
        case LUPD_OPT_LEASE_TTL:
                if (lupd_parse_int(arg, LUPD_LEASE_TTL_MIN_S, LUPD_LEASE_TTL_MAX_S, &f->lease_ttl_s) < 0)
                        return lupd_usage_error("--lease-ttl %s: expected seconds from %d to %d", arg,
                                                LUPD_LEASE_TTL_MIN_S, LUPD_LEASE_TTL_MAX_S);
                return 1;
        case LUPD_OPT_CKPT_INTERVAL:
                if (lupd_parse_int(arg, 0, LUPD_CKPT_INTERVAL_MAX_S, &f->checkpoint_interval_s) < 0)
                        return lupd_usage_error(
                                "--checkpoint-interval %s: expected seconds from 1 to %d, or 0 for none", arg,
                                LUPD_CKPT_INTERVAL_MAX_S);
                return 1;
        default:
                return 0;
        }
}

/* clang-format off */
void lupd_fleet_usage(FILE *f)
{
        struct lupd_fleet_cfg d;

        lupd_fleet_defaults(&d);
        fprintf(f,
"\n"
"Hosts sharing one checkpoint store (docs/fleet.md). With a provider that\n"
"has leases (the directory provider has), a session runs on one host at a\n"
"time: its worker holds the session's lease in the store, renews it, and\n"
"fences its checkpoints with it. A client that resumes on a host that\n"
"does not run its session has that host restore it from the store.\n"
"      --host-id NAME      the name this host holds leases under (default:\n"
"                          the host name, here %s). Two daemons on one\n"
"                          machine that act as two hosts need two names.\n"
"      --lease-ttl S       a lease not renewed for S seconds may be taken over\n"
"                          (default %d, %d to %d). A worker renews it every\n"
"                          third of that, and runs no call once it is older\n"
"                          than S minus %u s, the clock skew leases allow.\n"
"      --checkpoint-interval S  a durable checkpoint of each session that ran\n"
"                          calls since its last one, every S seconds, one\n"
"                          session at a time, while it goes on (default 0:\n"
"                          none). A host that dies without a drain then loses\n"
"                          at most about S seconds; a client that saw calls\n"
"                          executed after the checkpoint gets one clear error\n"
"                          (\"stale checkpoint\") instead of older data.\n",
                d.host_id, d.lease_ttl_s, LUPD_LEASE_TTL_MIN_S, LUPD_LEASE_TTL_MAX_S,
                LUPINE_CKPT_LEASE_SKEW_MS / 1000u);
}
/* clang-format on */
