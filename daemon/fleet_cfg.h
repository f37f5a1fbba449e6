/* SPDX-License-Identifier: MIT */
/*
 * Settings for hosts that share one checkpoint store (docs/fleet.md):
 * the name this host holds session leases under, and how long a lease
 * lasts without renewal. Parsed by daemon/fleet_opts.c; the leases are
 * taken by the workers (worker/lease.c), adoption is supervisor/adopt.c.
 */
#ifndef LUPD_FLEET_CFG_H
#define LUPD_FLEET_CFG_H

#include <stdio.h>

#include "lupine/checkpoint_provider.h"

#define LUPD_LEASE_TTL_DEFAULT_S 15
/* a lease must outlast three renewals and the clock skew it tolerates */
#define LUPD_LEASE_TTL_MIN_S     7
#define LUPD_LEASE_TTL_MAX_S     (LUPINE_CKPT_LEASE_TTL_MAX_MS / 1000)

struct lupd_fleet_cfg {
        char host_id[LUPINE_CKPT_OWNER_MAX + 1]; /* --host-id, or the host name made valid */
        int lease_ttl_s;                         /* --lease-ttl */
        int checkpoint_interval_s;               /* --checkpoint-interval; 0: no periodic checkpoints */
};

#define LUPD_CKPT_INTERVAL_MAX_S 86400

enum {
        LUPD_OPT_HOST_ID = 0x340,
        LUPD_OPT_LEASE_TTL,
        LUPD_OPT_CKPT_INTERVAL,
};

#define LUPD_FLEET_LONG_OPTIONS                                                        \
        { "host-id", required_argument, NULL, LUPD_OPT_HOST_ID },                      \
                { "lease-ttl", required_argument, NULL, LUPD_OPT_LEASE_TTL },          \
        {                                                                              \
                "checkpoint-interval", required_argument, NULL, LUPD_OPT_CKPT_INTERVAL \
        }

/* The defaults: the host name (each byte outside [A-Za-z0-9._-] made
 * '-'), LUPD_LEASE_TTL_DEFAULT_S. */
void lupd_fleet_defaults(struct lupd_fleet_cfg *f);
/* 1 when c is a fleet option and was taken, 0 when it is not one,
 * -EINVAL after printing what is wrong. */
int lupd_fleet_parse_option(int c, const char *arg, struct lupd_fleet_cfg *f);
/* The --help part about fleets. */
void lupd_fleet_usage(FILE *f);

#endif
