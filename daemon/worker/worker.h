/* SPDX-License-Identifier: MIT */
/* The per-session worker process (lupined --worker). */
#ifndef LUPD_WORKER_H
#define LUPD_WORKER_H

#include "config.h"

/* Runs the worker until its client leaves or it is told to shut down.
 * Returns the process exit status. */
int worker_main(const struct lupd_config *cfg);

#endif
