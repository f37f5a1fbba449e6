/* SPDX-License-Identifier: MIT */
/*
 * The GPU health watch's settings (docs/health.md): what the supervisor
 * watches through NVML, how often, and what it does on an alarm. Parsed by
 * daemon/health_opts.c; the watch itself is daemon/supervisor/health.c.
 */
#ifndef LUPD_HEALTH_CFG_H
#define LUPD_HEALTH_CFG_H

#include <stdint.h>
#include <stdio.h>

/* --health-policy */
enum lupd_health_policy {
        LUPD_HEALTH_DRAIN = 0, /* the default: stop admitting, drain the GPU's sessions, admit again later */
        LUPD_HEALTH_REPORT,    /* log, status, metrics and STATUS= only */
        LUPD_HEALTH_OFF,       /* no watch at all (the workers still send heartbeats) */
};

#define LUPD_HEALTH_MAX_XIDS            32
#define LUPD_THERMAL_LIMIT_DEFAULT_C    90
#define LUPD_HEALTH_INTERVAL_DEFAULT_MS 1000
#define LUPD_HEALTH_TIMEOUT_DEFAULT_MS  5000
#define LUPD_HEALTH_RETRIES_DEFAULT     3
#define LUPD_HEALTH_XID_HOLD_DEFAULT_S  60

struct lupd_health_cfg {
        int policy;          /* enum lupd_health_policy */
        int thermal_limit_c; /* --thermal-limit: alarm at this GPU temperature or above; 0: not watched */
        int interval_ms;     /* --health-interval: NVML poll and worker heartbeat period */
        int timeout_ms;      /* --health-timeout: a heartbeat older than this is missed */
        int retries;         /* --health-retries: bad checks in a row before acting (and good ones to clear) */
        int xid_hold_s;      /* --health-xid-hold: an Xid alarm lasts this long after the last such event */
        uint32_t xids[LUPD_HEALTH_MAX_XIDS]; /* --health-xids: the Xid codes that raise an alarm */
        int n_xids;
};

/* Option codes of the health options, beyond main.c's own. */
enum {
        LUPD_OPT_HEALTH_POLICY = 0x300,
        LUPD_OPT_THERMAL_LIMIT,
        LUPD_OPT_HEALTH_INTERVAL,
        LUPD_OPT_HEALTH_TIMEOUT,
        LUPD_OPT_HEALTH_RETRIES,
        LUPD_OPT_HEALTH_XIDS,
        LUPD_OPT_HEALTH_XID_HOLD,
};

/* getopt_long entries for the options above, for main.c's table. */
#define LUPD_HEALTH_LONG_OPTIONS                                                          \
        { "health-policy", required_argument, NULL, LUPD_OPT_HEALTH_POLICY },             \
                { "thermal-limit", required_argument, NULL, LUPD_OPT_THERMAL_LIMIT },     \
                { "health-interval", required_argument, NULL, LUPD_OPT_HEALTH_INTERVAL }, \
                { "health-timeout", required_argument, NULL, LUPD_OPT_HEALTH_TIMEOUT },   \
                { "health-retries", required_argument, NULL, LUPD_OPT_HEALTH_RETRIES },   \
                { "health-xids", required_argument, NULL, LUPD_OPT_HEALTH_XIDS },         \
        {                                                                                 \
                "health-xid-hold", required_argument, NULL, LUPD_OPT_HEALTH_XID_HOLD      \
        }

/* The defaults above, and the default Xid list. */
void lupd_health_defaults(struct lupd_health_cfg *h);
/* One health option: 1 when c is one and was taken, 0 when it is not
 * one, -EINVAL after printing what is wrong. */
int lupd_health_parse_option(int c, const char *arg, struct lupd_health_cfg *h);
/* The --help part about the health watch. */
void lupd_health_usage(FILE *f);
/* "drain", "report", "off" */
const char *lupd_health_policy_name(int policy);
/* "48,61,..." into out[cap] */
void lupd_health_xids_text(const struct lupd_health_cfg *h, char *out, size_t cap);

#endif
