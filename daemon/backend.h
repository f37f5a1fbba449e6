/* SPDX-License-Identifier: MIT */
/* The worker's driver: the host's libcuda.so.1 or libcuda-sim.so, loaded
 * with dlopen into a table of function pointers (struct lupw_backend). */
#ifndef LUPD_BACKEND_H
#define LUPD_BACKEND_H

#include "config.h"
#include "worker_gen.h"

struct lupw_backend_handle {
        struct lupw_backend fn;
        void *dl;
        int kind;               /* LUP_BACKEND_CUDA or LUP_BACKEND_SIM */
        char path[512];
};

/* Loads and initialises (cuInit) the backend chosen by cfg->backend: auto
 * takes the real driver when it initialises and reports a device, else the
 * simulator. Returns 0 or -errno; logs what it chose and why. */
int backend_open(const struct lupd_config *cfg, struct lupw_backend_handle *ret);
void backend_close(struct lupw_backend_handle *b);

#endif
