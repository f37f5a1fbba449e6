/* SPDX-License-Identifier: MIT */
/*
 * TEMPORARY placeholder for the per-session worker, so that lupined links
 * while daemon/worker*.c is being written. The lead replaces this file (and
 * its entry in lupd_worker_sources) with the real worker.
 */
#include "worker.h"

#include "log.h"

int worker_main(const struct lupd_config *cfg)
{
        (void)cfg;
        lup_err("worker not built: this lupined was linked with daemon/worker_stub.c");
        return 1;
}
