/* SPDX-License-Identifier: MIT */
/*
 * The fake driver of fuzz_worker_ops.c (fuzz_worker_driver.c): what it
 * keeps, so the harness can check the worker's bookkeeping against it.
 */
#ifndef FUZZ_WORKER_DRIVER_H
#define FUZZ_WORKER_DRIVER_H

#include <stdbool.h>
#include <stdint.h>

#include "lupine/wire.h"
#include "worker/session.h"

#define FZ_DEVICES   2
#define FAKE_CTXS    (LUP_MAX_CONTEXTS + 8)
#define FAKE_HANDLES 64 /* one input creates a few at most */

enum fake_kind {
        FK_NONE,
        FK_STREAM,
        FK_EVENT,
        FK_MODULE,
        FK_LIBRARY,
        FK_KERNEL,
        FK_FUNCTION
};

struct fake_driver {
        const struct lupw_session *s; /* for the device-range checks */
        unsigned long calls;          /* driver calls of any kind */
        bool ctx_live[FAKE_CTXS];
        unsigned n_ctx_live;
        unsigned primary_refs[LUP_MAX_DEVICES];
        CUcontext current;
        uint64_t next_handle;
        uint64_t handles_live;
        uint64_t maps_live;
        uint64_t mapped_bytes;
        enum fake_kind handle_kind[FAKE_HANDLES]; /* FK_NONE: free or destroyed */
};
extern struct fake_driver drv;

/* A context the driver still has (created and live, or a retained primary). */
bool ctx_usable(CUcontext c);
/* Every struct lupw_backend member: a stub of this fake driver. */
void fill_backend(struct lupw_backend *be);

#endif
