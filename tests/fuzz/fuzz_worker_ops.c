/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the worker's generated op handlers (lupw_ops[], from
 * abi/gen/lupgen.py) and the hand-written code they call in
 * daemon/worker/ops.c, against a fake session and a fake driver.
 *
 * Input layout (little-endian):
 *   u16 sel   bits 0..13: below 0x2000, an index into lupw_ops (modulo
 *             lupw_n_ops; an index without a handler is skipped), so
 *             index = op id - 256; from 0x2000, a control op (copies,
 *             launches, FUNC_INFO, BLOB: bits 0..7 the op id, bit 8 the
 *             frame's LUP_F_SYNC, an id without a control op skipped),
 *             run through lupw_run_op() as handle_frame() runs it;
 *             bit 14: the session's bound context is 0x100000, not 0x10000;
 *             bit 15: for a sync op, start with a latched async error,
 *             which the handler must report without executing the call
 *   u64 ctx   the context id from the frame header
 *   ...       the argument payload
 *
 * The session looks like one just after its HELLO (see lupw_setup_session()
 * in daemon/worker/hello.c), on two devices, after the client did this:
 *   retained the primary context of device 0 (id 0x10000) and, in it,
 *     allocated FZ_A (4 KiB, a slab block) and FZ_B (3 MiB, own chunk);
 *   created context 0x100000 on device 1 and, in it, allocated
 *     FZ_C (256 bytes) and FZ_D (1 MiB);
 *   made 0x10000 current again (or left 0x100000 current: bit 14);
 *   created stream FZ_STREAM and event FZ_EVENT, loaded module FZ_MODULE
 *   and took function FZ_FUNC from it (handle ids; the fake driver gives
 *   every function three 8-byte parameters).
 * tests/fuzz/make_corpus.py writes seeds that use these addresses.
 *
 * The fake driver (the stubs below) keeps just enough state to check the
 * worker's use of it: live contexts, primary-context retains, the current
 * context, memory handles and mappings, live streams, events, modules,
 * libraries, kernels and functions, and that every device access lies in
 * one live allocation (or a module global). The checks after each input:
 *   - the handler returns 0 or -EBADMSG, and -EBADMSG comes with a reason;
 *   - async ops write no reply; a successful sync op's reply fits the 256
 *     bytes the worker gives it (daemon/worker/dispatch.c, lupw_run_op());
 *     a control op's reply is one whole REPLY frame for its request;
 *   - a latched error is returned as is and the call is not executed;
 *   - the context the session believes is bound is the driver's current one
 *     (the worker skips cuCtxSetCurrent when a call names the bound context);
 *   - the session's bookkeeping matches the driver's (contexts, chunks,
 *     mapped bytes);
 *   - after lupw_release_all() nothing is left: no context, retain, handle
 *     or mapping in the driver, and (under ASan) no heap block.
 */
/* the checks are the point of a fuzz target: keep assert() in every build type */
#undef NDEBUG
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "frame.h"
#include "fuzz_known_bugs.h"
#include "fuzz_worker_driver.h"
#include "lupine/wire.h"
#include "worker_gen.h"
#include "worker/graphs.h"
#include "worker/session.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_PRIMARY0 0x10000ull
#define FZ_CTX1 0x100000ull
#define FZ_A (LUP_ARENA_BASE)                      /* 4 KiB, device 0, owner 0x10000 */
#define FZ_B (LUP_ARENA_BASE + (2ull << 20))       /* 3 MiB, device 0, owner 0x10000 */
#define FZ_C (LUP_ARENA_BASE + (6ull << 20))       /* 256 B, device 1, owner 0x100000 */
#define FZ_D (LUP_ARENA_BASE + (8ull << 20))       /* 1 MiB, device 1, owner 0x100000 */
#define FZ_STREAM LUP_FIRST_HANDLE_ID
#define FZ_EVENT (LUP_FIRST_HANDLE_ID + 16)
#define FZ_MODULE        (LUP_FIRST_HANDLE_ID + 32)
#define FZ_FUNC          (LUP_FIRST_HANDLE_ID + 48)
#define FZ_LATCHED CUDA_ERROR_LAUNCH_FAILED
#define FZ_SEL_INDEX 0x3fffu
#define FZ_SEL_BIND_CTX1 0x4000u
#define FZ_SEL_LATCHED 0x8000u
#define FZ_SEL_CTL       0x2000u
#define FZ_SEL_CTL_SYNC  0x100u

/*
 * Known bugs (see fuzz_known_bugs.h):
 *   ctx-binding: lupw_lupCtxDestroy() of a context other than the bound one,
 *     and lupw_lupPrimaryCtxReset() of a device whose primary context is not
 *     the bound one, leave the driver's current context different from the
 *     one s->ctx.bound_id names.
 */

/* ---- the fake session */

static void must(bool ok, const char *what)
{
        if (!ok) {
                fprintf(stderr, "fuzz_worker_ops: setup: %s failed\n", what);
                abort();
        }
}

static void alloc_at(struct lupw_session *s, size_t size, uint64_t want)
{
        CUdeviceptr p = 0;
        must(lupw_cuMemAlloc_v2(s, &p, size) == CUDA_SUCCESS, "cuMemAlloc");
        /* the seeds in the corpus use these addresses */
        must(p == want, "placing an allocation where the corpus expects it");
}

static void handle_at(struct lupw_session *s, int kind, uint64_t id, void *real)
{
        must(real != NULL, "creating a handle");
        must(lupw_handle_fresh(s, id) == 0 && lupw_handle_put(s, kind, id, real) == CUDA_SUCCESS, "lupw_handle_put");
}

/* As worker_main() and lupw_setup_session() (daemon/worker/loop.c, hello.c), with a
 * connection to /dev/null. */
static void session_setup(struct lupw_session *s, bool bind_ctx1)
{
        memset(&drv, 0, sizeof(drv));
        drv.s = s;
        memset(s, 0, sizeof(*s));
        s->ctl_fd = -1;
        s->fd = -1;
        strcpy(s->name, "fuzz");
        lupw_handles_init(s);
        lupw_graphs_init(s);
        s->n_devices = FZ_DEVICES;
        fill_backend(&s->be.fn);
        s->be.dl = s; /* any non-NULL value: lupw_release_all() tears down only a loaded backend */
        s->be.kind = LUP_BACKEND_SIM;

        /* what lupw_setup_session() in daemon/worker/hello.c does after HELLO */
        must(s->be.fn.cuDevicePrimaryCtxRetain(&s->ctx.primary[0], 0) == CUDA_SUCCESS, "primary retain");
        must(s->be.fn.cuCtxSetCurrent(s->ctx.primary[0]) == CUDA_SUCCESS, "set current");
        must(arena_init(&s->mem.arena, LUP_ARENA_BASE, LUP_ARENA_SIZE, LUP_ARENA_GRANULE, &lupw_arena_ops, s) == 0,
             "arena_init");
        s->mem.reserved = true;

        /* what a client did before the fuzzed call */
        must(lupw_lupPrimaryCtxRetain(s, 0) == CUDA_SUCCESS, "lupPrimaryCtxRetain");
        must(lupw_bind_ctx(s, FZ_PRIMARY0) == CUDA_SUCCESS, "bind primary");
        alloc_at(s, 4096, FZ_A);
        alloc_at(s, 3u << 20, FZ_B);
        must(lupw_lupCtxCreate(s, FZ_CTX1, 0, 1) == CUDA_SUCCESS, "lupCtxCreate");
        must(lupw_bind_ctx(s, FZ_CTX1) == CUDA_SUCCESS, "bind ctx");
        alloc_at(s, 256, FZ_C);
        alloc_at(s, 1u << 20, FZ_D);
        if (!bind_ctx1)
                must(lupw_bind_ctx(s, FZ_PRIMARY0) == CUDA_SUCCESS, "bind primary again");
        CUstream st = NULL;
        CUevent ev = NULL;
        s->be.fn.cuStreamCreate(&st, 0);
        s->be.fn.cuEventCreate(&ev, 0);
        handle_at(s, LUPW_H_STREAM, FZ_STREAM, st);
        handle_at(s, LUPW_H_EVENT, FZ_EVENT, ev);
        CUmodule mod = NULL;
        CUfunction fn = NULL;
        s->be.fn.cuModuleLoadData(&mod, "image");
        s->be.fn.cuModuleGetFunction(&fn, mod, "kernel");
        handle_at(s, LUPW_H_MODULE, FZ_MODULE, mod);
        handle_at(s, LUPW_H_FUNCTION, FZ_FUNC, fn);
}

/* The session's view and the driver's agree. */
static void check_consistent(struct lupw_session *s)
{
        assert(s->ctx.n_slots >= 0 && s->ctx.n_slots <= (int)LUP_MAX_CONTEXTS);
        assert(drv.n_ctx_live == (unsigned)s->ctx.n_slots);
        for (int i = 0; i < s->ctx.n_slots; i++)
                assert(ctx_usable(s->ctx.slots[i].real));
        for (int d = 0; d < FZ_DEVICES; d++)
                assert(drv.primary_refs[d] == (s->ctx.primary[d] ? 1u : 0u));

        assert(drv.handles_live == s->mem.n_chunks);
        assert(drv.maps_live == s->mem.n_chunks);
        assert(drv.mapped_bytes == s->mem.arena.mapped_bytes);

        /* The worker skips cuCtxSetCurrent when the requested context is the
         * bound one, so the bound one must really be current. */
        static int skip_binding = -1;
        if (skip_binding < 0)
                skip_binding = fuzz_known_bug("ctx-binding");
        if (s->ctx.bound_id != 0 && !skip_binding) {
                CUcontext real = NULL;
                assert(lupw_ctx(s, s->ctx.bound_id, &real) == CUDA_SUCCESS);
                if (drv.current != real) {
                        fprintf(stderr,
                                "fuzz_worker_ops: the session's bound context 0x%llx is not the "
                                "driver's current context\n",
                                (unsigned long long)s->ctx.bound_id);
                        abort();
                }
        }
}

static void session_teardown(struct lupw_session *s)
{
        lupw_copy_free(s);
        lupw_release_all(s);
        lupw_graphs_free(s);
        lupw_handles_free(s);
        lup_rangemap_free(&s->obj.globals);
        assert(drv.n_ctx_live == 0);
        for (int d = 0; d < FZ_DEVICES; d++)
                assert(drv.primary_refs[d] == 0);
        assert(drv.handles_live == 0);
        assert(drv.maps_live == 0 && drv.mapped_bytes == 0);
        assert(s->mem.chunks == NULL);
}

/* static: struct lupw_session is large (256 context slots, io_uring state) */
static struct lupw_session sess;

/* A control op, through the same lupw_run_op() as handle_frame(): what it
 * answered is in the session's batch buffer (DTOH's data chunks and DATA
 * frames go straight to the connection, /dev/null). */
static void fuzz_ctl_op(uint16_t sel, uint64_t ctx, const uint8_t *p, size_t n)
{
        static uint8_t out[LUP_HDR_SIZE + LUPW_FUNC_INFO_REPLY_MAX], staging[LUP_BULK_CHUNK];
        static int null_fd = -1;
        const uint16_t op = sel & 0xff;
        const bool sync = (sel & FZ_SEL_CTL_SYNC) != 0, latched = sync && (sel & FZ_SEL_LATCHED);

        if (!lupw_ctl_op(op) || n > LUP_MAX_PAYLOAD)
                return;
        if (null_fd < 0 && (null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0)
                abort();
        struct lupw_session *s = &sess;
        session_setup(s, sel & FZ_SEL_BIND_CTX1);
        s->fd = null_fd;
        s->out.buf = out;
        s->out.cap = sizeof(out);
        s->copy.staging = staging;
        s->latched = latched ? FZ_LATCHED : CUDA_SUCCESS;
        struct lup_hdr h = { .len = (uint32_t)n, .op = op, .flags = sync ? LUP_F_SYNC : 0, .seq = 1, .ctx = ctx };
        const unsigned long calls_before = drv.calls;

        int rc = lupw_run_op(s, &h, p);

        assert(rc == 0 || rc == -EBADMSG);
        if (rc < 0)
                assert(s->why != NULL);
        else if (!sync)
                assert(s->out.len == 0);
        if (rc == 0 && s->out.len) {
                struct lup_hdr rh;
                const char *why;
                assert(lup_hdr_decode(s->out.buf, &rh, &why) == 0);
                assert(rh.op == op && rh.seq == 1 && rh.flags == LUP_F_REPLY);
                assert(LUP_HDR_SIZE + rh.len == s->out.len);
        }
        if (latched && rc == 0 && lupw_ctl_op(op)->keeps_latched) {
                /* MAPPED_PULL: the error stays for the program's next call */
                assert(s->latched == FZ_LATCHED);
        } else if (latched && rc == 0) {
                /* answered with the latched error, not executed */
                assert(s->latched == CUDA_SUCCESS && drv.calls == calls_before);
                assert(s->out.len == LUP_HDR_SIZE && lup_le32(s->out.buf + 12) == FZ_LATCHED);
        }
        check_consistent(s);
        s->fd = -1;
        s->out.buf = s->copy.staging = NULL;
        session_teardown(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 10)
                return 0;
        uint16_t sel = lup_le16(data);
        uint64_t ctx = lup_le64(data + 2);
        if ((sel & FZ_SEL_INDEX) >= FZ_SEL_CTL) {
                fuzz_ctl_op(sel, ctx, data + 10, size - 10);
                return 0;
        }
        const struct lupw_op *op = &lupw_ops[(sel & FZ_SEL_INDEX) % lupw_n_ops];
        if (!op->fn)
                return 0;

        struct lupw_session *s = &sess;
        session_setup(s, sel & FZ_SEL_BIND_CTX1);

        /* As lupw_run_op() in daemon/worker/dispatch.c: a sync op may carry a latched
         * async failure; an async op always starts from CUDA_SUCCESS. */
        const CUresult start = (op->sync && (sel & FZ_SEL_LATCHED)) ? FZ_LATCHED : CUDA_SUCCESS;
        CUresult status = start;
        uint8_t outbuf[256];
        struct lup_wr out = lup_wr_init(outbuf, sizeof(outbuf));
        struct lup_rd rd = lup_rd_init(data + 10, size - 10);
        const unsigned long calls_before = drv.calls;
        const size_t allocs_before = s->mem.arena.n_allocs;

        int rc = op->fn(s, ctx, &rd, &out, &status);

        assert(rc == 0 || rc == -EBADMSG);
        assert(out.len <= out.cap);
        if (rc < 0) {
                assert(s->why != NULL); /* the worker closes the connection with this reason */
        } else if (!op->sync) {
                assert(out.len == 0); /* async ops have no reply */
        } else if (status == CUDA_SUCCESS) {
                assert(out.err == 0); /* else the worker drops the session: "reply overflow" */
        }
        if (start != CUDA_SUCCESS) {
                /* validated, but not executed */
                if (rc == 0)
                        assert(status == start);
                assert(out.len == 0);
                assert(drv.calls == calls_before);
                assert(s->mem.arena.n_allocs == allocs_before);
        }
        check_consistent(s);
        session_teardown(s);
        return 0;
}
