/* SPDX-License-Identifier: MIT */
/*
 * Pre-copy (worker/precopy.h has the model).
 *
 * The thread touches nothing of the session but what stays fixed while
 * it runs: the backend's function table, the primary contexts, the
 * provider and its save. Everything it produces (the hashes of what it
 * copied, its error) is read by the loop only after it has been joined.
 * The loop meanwhile makes no call of the provider on this instance
 * (checkpoints and drains wait for the thread), and the one thing of the
 * client's that could pull memory from under it, the release of an arena
 * chunk, stops it first (worker/arena_map.c).
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include "worker/precopy.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "ctl.h"
#include "hash.h"
#include "log.h"
#include "provider_load.h"
#include "worker/ckpt_base.h"
#include "worker/lanes.h"
#include "worker/piece_hash.h"
#include "worker/session.h"

struct lupw_precopy {
        struct lupw_session *s;
        pthread_t thread;
        bool started, joined;
        atomic_bool running, cancel;
        int rc;
        char why[256];
        struct lupw_mem_span *spans; /* every chunk when it began, with the hashes of what is in the store */
        uint64_t *hashes;
        size_t n_spans;
        struct lupw_incr_plan plan;
        struct lupw_precopy_result res;
        struct lupw_ckpt_base *record;
        double t0;
        atomic_uint_fast64_t done; /* bytes written so far, for the progress */
};

bool lupw_precopy_running(const struct lupw_session *s)
{
        return s->ckpt.precopy && atomic_load(&s->ckpt.precopy->running);
}

static void destroy(struct lupw_session *s)
{
        struct lupw_precopy *pc = s->ckpt.precopy;
        if (!pc)
                return;
        lupw_incr_plan_free(&pc->plan);
        lupw_base_destroy(pc->record);
        free(pc->spans);
        free(pc->hashes);
        free(pc);
        s->ckpt.precopy = NULL;
}

static void join(struct lupw_precopy *pc)
{
        if (pc->started && !pc->joined)
                pthread_join(pc->thread, NULL);
        pc->joined = true;
}

void lupw_precopy_cancel(struct lupw_session *s, const char *why)
{
        struct lupw_precopy *pc = s->ckpt.precopy;
        if (!pc)
                return;
        bool was_running = atomic_load(&pc->running);
        atomic_store(&pc->cancel, true);
        join(pc);
        if (pc->res.save)
                s->ckpt.ops->save_abort(pc->res.save);
        lup_info("session %s: pre-copy of epoch %" PRIu64 " given up%s: %s", s->name, pc->res.epoch,
                 was_running ? " while it ran" : "", why);
        destroy(s);
}

void lupw_precopy_done(struct lupw_session *s)
{
        if (s->ckpt.precopy)
                s->ckpt.precopy->res.save = NULL; /* committed or aborted by the checkpoint */
        destroy(s);
}

/* Copies one unit of a span into buf on the stream and waits. */
static int copy_unit(const struct lupw_backend *be, CUstream st, uint8_t *buf, const struct lupw_mem_span *w,
                     uint64_t off, size_t len)
{
        CUresult r = be->cuMemcpyDtoHAsync_v2(buf, w->addr + off, len, st);
        if (r == CUDA_SUCCESS)
                r = be->cuStreamSynchronize(st);
        return r == CUDA_SUCCESS ? 0 : -EIO;
}

/* LUPINE_PRECOPY_DELAY_MS, a test facility: a pause after every unit, so
 * that a test can change memory while a small pre-copy still runs. */
static long delay_ms(void)
{
        const char *e = getenv("LUPINE_PRECOPY_DELAY_MS");
        long v = e ? strtol(e, NULL, 10) : 0;
        return v > 0 && v <= 1000 ? v : 0;
}

/* Writes the plan's spans into the save, hashing what it copied. */
static int copy_all(struct lupw_precopy *pc, CUstream st, uint8_t *buf)
{
        long delay = delay_ms();
        struct lupw_session *s = pc->s;
        const struct lupw_backend *be = &s->be.fn;
        const struct lupine_checkpoint_provider *p = s->ckpt.ops;
        for (size_t i = 0; i < pc->plan.n_write; i++) {
                const struct lupw_mem_span *w = &pc->plan.write[i];
                for (uint64_t off = 0; off < w->size; off += LUPW_LANE_UNIT) {
                        size_t len = w->size - off < LUPW_LANE_UNIT ? (size_t)(w->size - off) : LUPW_LANE_UNIT;
                        if (atomic_load_explicit(&pc->cancel, memory_order_relaxed))
                                return -ECANCELED;
                        if (copy_unit(be, st, buf, w, off, len) < 0) {
                                snprintf(pc->why, sizeof(pc->why), "reading device memory at 0x%" PRIx64 " failed",
                                         w->addr + off);
                                return -EIO;
                        }
                        for (size_t q = 0; q < len; q += LUP_CKPT_PIECE)
                                w->hashes[(off + q) / LUP_CKPT_PIECE] =
                                        lup_hash64(buf + q, len - q < LUP_CKPT_PIECE ? len - q : LUP_CKPT_PIECE, 0);
                        int rc = p->save_write_at(pc->res.save, w->name, w->obj_off + off, buf, len);
                        if (rc < 0) {
                                snprintf(pc->why, sizeof(pc->why), "writing %s failed: %s", w->name, strerror(-rc));
                                return rc;
                        }
                        pc->res.written += len;
                        atomic_store_explicit(&pc->done, pc->res.written, memory_order_relaxed);
                        if (delay) {
                                struct timespec ts = { .tv_sec = delay / 1000, .tv_nsec = (delay % 1000) * 1000000L };
                                nanosleep(&ts, NULL);
                        }
                }
        }
        return 0;
}

static void *precopy_thread(void *arg)
{
        struct lupw_precopy *pc = arg;
        struct lupw_session *s = pc->s;
        const struct lupw_backend *be = &s->be.fn;
        CUstream st = NULL;
        void *buf = NULL;
        /* one context for the copies: the spans are all on device 0 (lupw_precopy_start) */
        CUresult r = be->cuCtxSetCurrent(s->ctx.primary[0]);
        if (r == CUDA_SUCCESS)
                r = be->cuStreamCreate(&st, CU_STREAM_NON_BLOCKING);
        if (r == CUDA_SUCCESS)
                r = be->cuMemAllocHost_v2(&buf, LUPW_LANE_UNIT);
        if (r != CUDA_SUCCESS) {
                snprintf(pc->why, sizeof(pc->why), "cannot set up its stream and buffer (CUresult %d)", (int)r);
                pc->rc = -EIO;
        } else {
                pc->rc = copy_all(pc, st, buf);
        }
        /* durable now, while the session runs: the commit in the pause
         * then has little left to flush (ABI version 5, save_sync) */
        if (pc->rc == 0 && (pc->rc = lupine_provider_save_sync(s->ckpt.ops, pc->res.save)) < 0)
                snprintf(pc->why, sizeof(pc->why), "flushing what it wrote failed: %s",
                         s->ckpt.ops->last_error(s->ckpt.inst));
        if (buf)
                be->cuMemFreeHost(buf);
        if (st)
                be->cuStreamDestroy_v2(st);
        pc->res.seconds = lup_now_s() - pc->t0;
        atomic_store(&pc->running, false);
        return NULL;
}

/* Why this session cannot have a pre-copy now, or NULL. */
static const char *cannot(struct lupw_session *s)
{
        if (s->ckpt.precopy)
                return "one runs already";
        if (!s->ckpt.inst) /* opened when the session began (worker/hello.c) */
                return "no checkpoint provider";
        if (!(lupine_provider_caps(s->ckpt.ops) & LUPINE_CKPT_CAP_CONCURRENT_WRITE))
                return "the provider cannot be written from another thread";
        const char *e = getenv("LUPINE_MIGRATE_PRECOPY");
        if (e && strcmp(e, "0") == 0)
                return "LUPINE_MIGRATE_PRECOPY=0";
        for (size_t i = 0; i < s->mem.n_chunks; i++) {
                if (s->mem.chunks[i].device != 0)
                        return "memory on a second GPU";
                if (s->mem.chunks[i].size % LUP_CKPT_PIECE)
                        return "a chunk that is not whole pieces";
        }
        if (!lupw_piece_hash_ready(s, 0))
                return "the memory cannot be hashed on the GPU";
        return NULL;
}

/* The spans of every chunk now, hashed on the GPU (racy: only to choose
 * what to copy; the thread hashes what it copies). */
static int snapshot(struct lupw_precopy *pc)
{
        struct lupw_session *s = pc->s;
        char why[256] = "";
        if (lupw_chunk_spans(s, &pc->spans, &pc->hashes, &pc->n_spans) < 0)
                return -ENOMEM;
        size_t n = pc->n_spans;
        /* a span the GPU cannot hash makes the plan a full one below */
        int rc = lupw_piece_hash_all(s, pc->spans, n, why, sizeof(why));
        if (rc < 0 && rc != -ENOTSUP) {
                snprintf(pc->why, sizeof(pc->why), "%s", why);
                return -EIO;
        }
        const char *full = "";
        rc = lupw_incr_plan(s, pc->res.save, pc->res.epoch, pc->spans, n, &pc->plan, &full);
        if (rc == 0 && !pc->plan.incremental)
                rc = lupw_incr_plan_full(pc->spans, n, &pc->plan);
        return rc;
}

bool lupw_precopy_start(struct lupw_session *s)
{
        const char *no = cannot(s);
        if (no) {
                lup_info("session %s: no pre-copy (%s); the migration writes its checkpoint while it is paused",
                         s->name, no);
                return false;
        }
        struct lupw_precopy *pc = calloc(1, sizeof(*pc));
        if (!pc)
                return false;
        pc->s = s;
        pc->t0 = lup_now_s();
        pc->res.epoch = s->ckpt.epoch + 1;
        s->ckpt.precopy = pc;
        int rc = s->ckpt.ops->save_begin(s->ckpt.inst, s->name, pc->res.epoch, &pc->res.save);
        if (rc == 0 && (rc = lupw_lease_fence(s, pc->res.save)) < 0)
                snprintf(pc->why, sizeof(pc->why), "the save cannot be fenced with the session's lease");
        else if (rc < 0)
                snprintf(pc->why, sizeof(pc->why), "%s", s->ckpt.ops->last_error(s->ckpt.inst));
        if (rc == 0)
                rc = snapshot(pc);
        if (rc == 0) {
                atomic_store(&pc->running, true);
                int e = pthread_create(&pc->thread, NULL, precopy_thread, pc);
                pc->started = e == 0;
                if (e) {
                        atomic_store(&pc->running, false);
                        snprintf(pc->why, sizeof(pc->why), "cannot start its thread: %s", strerror(e));
                        rc = -e;
                }
        }
        if (rc < 0) {
                lupw_precopy_cancel(s, pc->why[0] ? pc->why : strerror(-rc));
                return false;
        }
        lup_info("session %s: pre-copy of epoch %" PRIu64 " begun: %.2f of %.2f GiB to write while the session runs%s",
                 s->name, pc->res.epoch, pc->plan.write_bytes / 1073741824.0, pc->plan.total_bytes / 1073741824.0,
                 pc->plan.n_bases ? ", the rest is in the store already" : "");
        return true;
}

void lupw_precopy_progress(struct lupw_session *s)
{
        struct lupw_precopy *pc = s->ckpt.precopy;
        if (pc && !pc->joined)
                lupw_progress_named(s, LUPD_WORK_CHECKPOINT, "pre-copy",
                                    atomic_load_explicit(&pc->done, memory_order_relaxed), pc->plan.write_bytes);
}

const struct lupw_precopy_result *lupw_precopy_result(struct lupw_session *s)
{
        struct lupw_precopy *pc = s->ckpt.precopy;
        if (!pc)
                return NULL;
        join(pc);
        if (pc->rc == 0) /* the closing progress line */
                lupw_progress_named(s, LUPD_WORK_CHECKPOINT, "pre-copy", pc->plan.write_bytes, pc->plan.write_bytes);
        if (pc->rc < 0) {
                char why[300];
                snprintf(why, sizeof(why), "%s", pc->why[0] ? pc->why : strerror(-pc->rc));
                lupw_precopy_cancel(s, why);
                return NULL;
        }
        if (!pc->record) {
                pc->record = lupw_base_of_plan(pc->res.epoch, pc->spans, pc->n_spans, &pc->plan);
                if (!pc->record) {
                        lupw_precopy_cancel(s, "out of memory");
                        return NULL;
                }
                pc->res.record = pc->record;
                lup_info("session %s: pre-copy of epoch %" PRIu64 ": %.2f GiB written in %.2f s while the session ran",
                         s->name, pc->res.epoch, pc->res.written / 1073741824.0, pc->res.seconds);
        }
        return &pc->res;
}
