/* SPDX-License-Identifier: MIT */
/* The health watch's command-line options (daemon/health_cfg.h). */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "health_cfg.h"
#include "opts.h"

/* The Xid codes that say the GPU, not the program, is in trouble:
 * double-bit ECC (48), the GPU's micro-controller halted (61, 62), a row
 * remap that could not be recorded (64), NVLink (74), fallen off the bus
 * (79), a high single-bit ECC rate (92), contained and uncontained ECC
 * errors (94, 95), the GSP firmware (119, 120), an unrecovered ECC error
 * (140). Programs' own faults (13, 31, 43, 45) are not in it: they end one
 * context, not the GPU. */
static const uint32_t default_xids[] = { 48, 61, 62, 64, 74, 79, 92, 94, 95, 119, 120, 140 };

void lupd_health_defaults(struct lupd_health_cfg *h)
{
        memset(h, 0, sizeof(*h));
        h->policy = LUPD_HEALTH_DRAIN;
        h->thermal_limit_c = LUPD_THERMAL_LIMIT_DEFAULT_C;
        h->interval_ms = LUPD_HEALTH_INTERVAL_DEFAULT_MS;
        h->timeout_ms = LUPD_HEALTH_TIMEOUT_DEFAULT_MS;
        h->retries = LUPD_HEALTH_RETRIES_DEFAULT;
        h->xid_hold_s = LUPD_HEALTH_XID_HOLD_DEFAULT_S;
        memcpy(h->xids, default_xids, sizeof(default_xids));
        h->n_xids = (int)(sizeof(default_xids) / sizeof(default_xids[0]));
}

const char *lupd_health_policy_name(int policy)
{
        switch (policy) {
        case LUPD_HEALTH_DRAIN:
                return "drain";
        case LUPD_HEALTH_REPORT:
                return "report";
        default:
                return "off";
        }
}

void lupd_health_xids_text(const struct lupd_health_cfg *h, char *out, size_t cap)
{
        size_t len = 0;

        out[0] = 0;
        for (int i = 0; i < h->n_xids && len < cap; i++) {
                int k = snprintf(out + len, cap - len, "%s%u", i ? "," : "", (unsigned)h->xids[i]);
                if (k < 0)
                        break;
                len += (size_t)k;
        }
        if (h->n_xids == 0)
                snprintf(out, cap, "none");
}

/* "48,79,95", or "none" for no Xid alarms at all */
static int parse_xids(const char *arg, struct lupd_health_cfg *h)
{
        const char *p = arg;
        int n = 0;

        if (strcmp(arg, "none") == 0) {
                h->n_xids = 0;
                return 0;
        }
        while (*p) {
                char *end;
                errno = 0;
                unsigned long v = strtoul(p, &end, 10);
                if (errno || end == p || v == 0 || v > 100000 || (*end && *end != ','))
                        return -EINVAL;
                if (n == LUPD_HEALTH_MAX_XIDS)
                        return -E2BIG;
                h->xids[n++] = (uint32_t)v;
                p = *end ? end + 1 : end;
                if (*end && !*p)
                        return -EINVAL; /* a trailing comma */
        }
        if (n == 0)
                return -EINVAL;
        h->n_xids = n;
        return 0;
}

int lupd_health_parse_option(int c, const char *arg, struct lupd_health_cfg *h)
{
        int r;

        switch (c) {
        case LUPD_OPT_HEALTH_POLICY:
                if (strcmp(arg, "drain") == 0)
                        h->policy = LUPD_HEALTH_DRAIN;
                else if (strcmp(arg, "report") == 0)
                        h->policy = LUPD_HEALTH_REPORT;
                else if (strcmp(arg, "off") == 0)
                        h->policy = LUPD_HEALTH_OFF;
                else
                        return lupd_usage_error("--health-policy %s: expected drain, report or off", arg);
                return 1;
        case LUPD_OPT_THERMAL_LIMIT:
                if (lupd_parse_int(arg, 0, 200, &h->thermal_limit_c) < 0)
                        return lupd_usage_error(
                                "--thermal-limit %s: expected degrees Celsius from 1 to 200, or 0 for none", arg);
                return 1;
        case LUPD_OPT_HEALTH_INTERVAL:
                if (lupd_parse_int(arg, 50, 60000, &h->interval_ms) < 0)
                        return lupd_usage_error("--health-interval %s: expected milliseconds from 50 to 60000", arg);
                return 1;
        case LUPD_OPT_HEALTH_TIMEOUT:
                if (lupd_parse_int(arg, 100, 600000, &h->timeout_ms) < 0)
                        return lupd_usage_error("--health-timeout %s: expected milliseconds from 100 to 600000", arg);
                return 1;
        case LUPD_OPT_HEALTH_RETRIES:
                if (lupd_parse_int(arg, 1, 100, &h->retries) < 0)
                        return lupd_usage_error("--health-retries %s: expected a number from 1 to 100", arg);
                return 1;
        case LUPD_OPT_HEALTH_XID_HOLD:
                if (lupd_parse_int(arg, 1, 86400, &h->xid_hold_s) < 0)
                        return lupd_usage_error("--health-xid-hold %s: expected seconds from 1 to 86400", arg);
                return 1;
        case LUPD_OPT_HEALTH_XIDS:
                r = parse_xids(arg, h);
                if (r == -E2BIG)
                        return lupd_usage_error("--health-xids %s: at most %d codes", arg, LUPD_HEALTH_MAX_XIDS);
                if (r < 0)
                        return lupd_usage_error(
                                "--health-xids %s: expected comma-separated Xid codes, e.g. 48,79,95, or none", arg);
                return 1;
        default:
                return 0;
        }
}

/* clang-format off */
void lupd_health_usage(FILE *f)
{
        struct lupd_health_cfg d;
        char xids[160];

        lupd_health_defaults(&d);
        lupd_health_xids_text(&d, xids, sizeof(xids));
        fprintf(f,
"\n"
"GPU health watch (docs/health.md). The supervisor polls the host's GPUs\n"
"through NVML and hears every worker's heartbeat; a check that fails\n"
"--health-retries times in a row raises an alarm for that GPU:\n"
"      --health-policy P   drain (the default): stop admitting sessions, drain\n"
"                          the GPU's sessions to durable checkpoints (another\n"
"                          host sharing the store can restore them), admit\n"
"                          again once the GPU passes its checks; report: log,\n"
"                          status, metrics and STATUS= only; off: no watch.\n"
"      --thermal-limit C   alarm at C degrees Celsius or above (default %d;\n"
"                          0: temperature not watched). Also watched: new\n"
"                          uncorrectable ECC errors, pending retired pages or\n"
"                          row remaps, a lost GPU, the Xid events below, and a\n"
"                          worker that stops answering its heartbeat.\n"
"      --health-interval MS  how often GPUs are polled and workers send a\n"
"                          heartbeat (default %d).\n"
"      --health-timeout MS a heartbeat older than this is missed (default %d).\n"
"      --health-retries N  failed checks in a row before an alarm, and passed\n"
"                          checks in a row before it clears (default %d).\n"
"      --health-xids LIST  the Xid codes that fail the check (none: no Xid\n"
"                          checks). Default:\n"
"                          %s\n"
"      --health-xid-hold S an Xid alarm lasts S seconds after the last such\n"
"                          event (default %d).\n",
                d.thermal_limit_c, d.interval_ms, d.timeout_ms, d.retries, xids, d.xid_hold_s);
}
/* clang-format on */
