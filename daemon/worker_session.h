/* SPDX-License-Identifier: MIT */
/* State of one session inside its worker process. */
#ifndef LUPD_WORKER_SESSION_H
#define LUPD_WORKER_SESSION_H

#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>

#include "arena.h"
#include "backend.h"
#include "config.h"
#include "lupine/wire.h"

struct lupw_ctx_slot {
        uint64_t id;            /* the client's id */
        CUcontext real;
        int device;
};

struct lupw_chunk {
        uint64_t addr;
        uint64_t size;
        CUmemGenericAllocationHandle handle;
};

struct lupw_session {
        const struct lupd_config *cfg;
        struct lupw_backend_handle be;
        int ctl_fd;
        int fd;                                 /* the client connection */
        char name[LUP_MAX_NAME + 1];
        uint32_t slot;
        int n_devices;

        struct arena arena;
        bool arena_reserved;
        struct lupw_chunk *chunks;              /* mapped physical chunks */
        size_t n_chunks, cap_chunks;

        CUcontext primary[LUP_MAX_DEVICES];     /* retained by the worker itself */
        bool client_primary[LUP_MAX_DEVICES];   /* the client holds a retain */
        struct lupw_ctx_slot ctxs[LUP_MAX_CONTEXTS];
        int n_ctxs;
        uint64_t bound_id;                      /* context id current on this thread */
        int bound_device;

        uint64_t last_seq;                      /* last executed */
        CUresult latched;                       /* first failure of an async call */
        const char *why;                        /* reason for closing the connection */

        uint8_t *in;
        size_t in_len, in_cap;
        uint8_t *out;
        size_t out_len, out_cap;
        uint8_t *staging;                       /* device->host bounce buffer */

        struct io_uring ring;
        bool ring_ok;
        bool stop;
};

/* worker_ops.c */
void lupw_release_all(struct lupw_session *s);
extern const struct arena_ops lupw_arena_ops;

#endif
