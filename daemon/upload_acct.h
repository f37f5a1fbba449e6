/* SPDX-License-Identifier: MIT */
/*
 * Upload accounting shared by the supervisor and its workers (issue 15,
 * finding 3; docs/security.md): the bytes each session holds in module
 * images uploaded with BLOB frames and not yet used by a call, one counter
 * per arena slot in a memfd the supervisor creates at start and hands every
 * worker as fd LUPD_UPLOAD_ACCT_FD (--upload-acct-fd). A worker adds to and
 * subtracts from its own slot's counter only; the global figure is the sum.
 * The supervisor zeroes a slot when its worker is reaped, so a worker that
 * dies holding uploads leaks nothing.
 *
 * Only lupine's own processes map it: a client never sees it. A worker
 * could misreport, but workers are the daemon's code, not the client's.
 */
#ifndef LUPD_UPLOAD_ACCT_H
#define LUPD_UPLOAD_ACCT_H

#include <stdatomic.h>
#include <stdint.h>

#include "lupine/wire.h"

#define LUPD_UPLOAD_ACCT_FD 4

struct lupd_upload_acct {
        _Atomic uint64_t slot[LUP_ARENA_SLOTS];
        _Atomic uint64_t refused_session; /* uploads refused by --upload-cap-session, all workers */
        _Atomic uint64_t refused_total;   /* ... by --upload-cap-total */
};

static inline uint64_t lupd_upload_acct_total(const struct lupd_upload_acct *a)
{
        uint64_t t = 0;

        for (unsigned i = 0; i < LUP_ARENA_SLOTS; i++)
                t += atomic_load_explicit(&a->slot[i], memory_order_relaxed);
        return t;
}

#endif
