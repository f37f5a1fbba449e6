/* SPDX-License-Identifier: MIT */
/*
 * Checkpoint and restore lanes (worker/lanes.h has the model).
 *
 * Units are numbered across all spans in order: span 0's units first, then
 * span 1's, ... which is also the order a single thread would write them.
 * Lane L runs units L, L + K, L + 2K, ...; its two buffers alternate, so
 * unit L + (j+1)K is copied while unit L + jK is hashed and stored.
 *
 * The first failure wins: it is recorded under the job's lock, every lane
 * sees `failed` and stops at its next step, waiting lanes are woken, and
 * each lane drains its own stream before its thread ends, so nothing
 * writes into a pinned buffer after the call returns.
 */
#define LUP_LOG_CAT LUP_LOGC_NET
#include "worker/lanes.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "ctl.h"
#include "hash.h"
#include "log.h"
#include "provider_load.h"
#include "worker/piece_hash.h"
#include "worker/session.h"

struct lupw_lane {
        CUstream stream;
        CUevent done[2];
        uint8_t *buf[2];
        bool pinned[2];
};

struct lupw_lanes {
        unsigned n;
        struct lupw_lane lane[];
};

struct job {
        struct lupw_session *s;
        const struct lupw_backend *be;
        const struct lupine_checkpoint_provider *p;
        struct lupine_ckpt_save *save;
        struct lupine_ckpt_load *ld;
        bool concurrent;          /* the provider may be called from several lanes at once */
        bool direct;              /* saves go straight into the provider's pinned region */
        unsigned max_lanes;       /* automatic lane count's cap for this job, 0 for none */
        struct lupw_mem_span *spans;
        uint64_t *first_unit;     /* n_spans + 1 entries: span i has units [first_unit[i], first_unit[i + 1]) */
        size_t n_spans;
        uint64_t n_units;
        unsigned k;

        pthread_mutex_t mu;
        pthread_cond_t turn;
        uint64_t next_write;      /* save without concurrency: the unit whose write is due */
        atomic_bool failed;
        atomic_uint_fast64_t done_bytes; /* progress: bytes of units finished */
        atomic_uint lanes_left;          /* lane threads still running */
        uint64_t total_bytes;
        int phase; /* LUPD_WORK_*, for the progress reports */
        int rc;
        char why[256];
};

struct lane_arg {
        struct job *job;
        unsigned idx;
        pthread_t thread;
        bool started;
};

/* --checkpoint-lanes, else a valid LUPINE_CHECKPOINT_LANES, else 0. */
static long lanes_asked(const struct lupw_session *s)
{
        long v = s->cfg ? s->cfg->checkpoint_lanes : 0;
        if (v <= 0) {
                const char *e = getenv("LUPINE_CHECKPOINT_LANES");
                char *end;
                if (e && *e) {
                        v = strtol(e, &end, 10);
                        if (*end || v < 1 || v > LUPD_CKPT_LANES_MAX)
                                v = 0; /* a bad value means automatic, as unset does */
                }
        }
        return v > 0 ? v : 0;
}

unsigned lupw_lanes_wanted(const struct lupw_session *s)
{
        long v = lanes_asked(s);
        if (v <= 0) {
                long cpus = sysconf(_SC_NPROCESSORS_ONLN);
                v = cpus;
                if (v > (long)LUPW_LANES_DEFAULT_MAX)
                        v = LUPW_LANES_DEFAULT_MAX;
        }
        if (v < 1)
                v = 1;
        if (v > LUPD_CKPT_LANES_MAX)
                v = LUPD_CKPT_LANES_MAX;
        return (unsigned)v;
}

/* The lanes a job asks for: the configured count, or the automatic one
 * capped at `cap` (0: no cap). */
static unsigned lanes_for(const struct lupw_session *s, unsigned cap)
{
        unsigned want = lupw_lanes_wanted(s);
        if (cap && want > cap && lanes_asked(s) == 0)
                want = cap;
        return want;
}

static void lane_release(const struct lupw_backend *be, struct lupw_lane *l)
{
        for (int j = 0; j < 2; j++) {
                if (l->done[j])
                        be->cuEventDestroy_v2(l->done[j]);
                if (l->pinned[j])
                        be->cuMemFreeHost(l->buf[j]);
                else
                        free(l->buf[j]);
        }
        if (l->stream)
                be->cuStreamDestroy_v2(l->stream);
        memset(l, 0, sizeof(*l));
}

void lupw_lanes_free(struct lupw_session *s)
{
        if (!s->ckpt.lanes)
                return;
        for (unsigned i = 0; i < s->ckpt.lanes->n; i++)
                lane_release(&s->be.fn, &s->ckpt.lanes->lane[i]);
        free(s->ckpt.lanes);
        s->ckpt.lanes = NULL;
}

/* Makes sure the session has `want` lanes, made in device 0's primary
 * context. Pinned buffers fall back to ordinary memory (copies into it are
 * still correct, only slower); a lane whose stream or events cannot be
 * made ends the list there. Returns the lane count, at least 1, or -EIO. */
static int lanes_get(struct lupw_session *s, unsigned want)
{
        const struct lupw_backend *be = &s->be.fn;
        if (s->ckpt.lanes && s->ckpt.lanes->n == want)
                return (int)want;
        lupw_lanes_free(s);
        struct lupw_lanes *ls = calloc(1, sizeof(*ls) + want * sizeof(ls->lane[0]));
        if (!ls)
                return -ENOMEM;
        if (be->cuCtxSetCurrent(s->ctx.primary[0]) != CUDA_SUCCESS) {
                free(ls);
                return -EIO;
        }
        s->ctx.bound_id = 0; /* the next call binds again */
        for (unsigned i = 0; i < want; i++) {
                struct lupw_lane *l = &ls->lane[i];
                bool ok = be->cuStreamCreate(&l->stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS;
                for (int j = 0; j < 2 && ok; j++) {
                        void *pin = NULL;
                        ok = be->cuEventCreate(&l->done[j], CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS;
                        if (ok && be->cuMemAllocHost_v2(&pin, LUPW_LANE_UNIT) == CUDA_SUCCESS) {
                                l->buf[j] = pin;
                                l->pinned[j] = true;
                        } else if (ok) {
                                ok = (l->buf[j] = malloc(LUPW_LANE_UNIT)) != NULL;
                        }
                }
                if (!ok) {
                        lane_release(be, l);
                        break;
                }
                ls->n++;
        }
        if (ls->n == 0) {
                free(ls);
                return -EIO;
        }
        s->ckpt.lanes = ls;
        return (int)ls->n;
}

static int job_fail(struct job *job, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int job_fail(struct job *job, int rc, const char *fmt, ...)
{
        va_list ap;
        pthread_mutex_lock(&job->mu);
        if (job->rc == 0) {
                job->rc = rc;
                va_start(ap, fmt);
                vsnprintf(job->why, sizeof(job->why), fmt, ap);
                va_end(ap);
        }
        atomic_store(&job->failed, true);
        pthread_cond_broadcast(&job->turn);
        pthread_mutex_unlock(&job->mu);
        return rc;
}

static bool job_failed(struct job *job)
{
        return atomic_load_explicit(&job->failed, memory_order_relaxed);
}

/* Where unit u lies; *span is a hint that only moves forward. */
static void unit_where(const struct job *job, uint64_t u, size_t *span, uint64_t *ret_off, size_t *ret_len)
{
        while (u >= job->first_unit[*span + 1])
                (*span)++;
        const struct lupw_mem_span *sp = &job->spans[*span];
        uint64_t off = (u - job->first_unit[*span]) * LUPW_LANE_UNIT;
        *ret_off = off;
        *ret_len = sp->size - off < LUPW_LANE_UNIT ? (size_t)(sp->size - off) : LUPW_LANE_UNIT;
}

/* ---- direct writes (provider ABI version 3) */

/* Whether saves may have the GPU copy straight into the provider's
 * memory: it offers a region, and the region is pinned (once; it stays
 * pinned until lupw_lanes_direct_release). */
static bool direct_ready(struct lupw_session *s)
{
        if (s->ckpt.direct.state != 0)
                return s->ckpt.direct.state > 0;
        s->ckpt.direct.state = -1;
        if (!s->ckpt.inst || !(lupine_provider_caps(s->ckpt.ops) & LUPINE_CKPT_CAP_DIRECT_WRITE))
                return false;
        void *base = NULL;
        size_t len = 0;
        int rc = s->ckpt.ops->direct_region(s->ckpt.inst, &base, &len);
        if (rc < 0 || !base || len == 0) {
                if (rc != -ENOTSUP)
                        lup_warn("session %s: checkpoint provider %s offers no direct-write region: %s", s->name,
                                 s->ckpt.ops->name, rc < 0 ? strerror(-rc) : "an empty one");
                return false;
        }
        const struct lupw_backend *be = &s->be.fn;
        double t0 = lup_now_s();
        CUresult r = s->ctx.primary[0] ? be->cuCtxSetCurrent(s->ctx.primary[0]) : CUDA_ERROR_INVALID_CONTEXT;
        if (r == CUDA_SUCCESS)
                r = be->cuMemHostRegister_v2(base, len, CU_MEMHOSTREGISTER_PORTABLE);
        s->ctx.bound_id = 0;
        if (r != CUDA_SUCCESS) {
                lup_warn("session %s: cannot pin the checkpoint provider's %.2f GiB region (CUresult %d); saves copy "
                         "through the lanes' buffers", s->name, len / 1073741824.0, (int)r);
                return false;
        }
        lup_info("session %s: checkpoint provider %s: %.2f GiB region pinned for direct writes in %.3f s", s->name,
                 s->ckpt.ops->name, len / 1073741824.0, lup_now_s() - t0);
        s->ckpt.direct.base = base;
        s->ckpt.direct.len = len;
        s->ckpt.direct.state = 1;
        return true;
}

void lupw_lanes_prepare(struct lupw_session *s)
{
        lupw_piece_hash_prepare(s);
        /* With direct writes the lanes are few and small, so they are made
         * now too (streams, events, pinned buffers cost milliseconds);
         * otherwise they wait for the first save, which may never come,
         * rather than hold 8 MiB of pinned memory per lane all along. */
        if (direct_ready(s) && lupw_piece_hash_ready(s, 0))
                (void)lanes_get(s, lanes_for(s, LUPW_LANES_DIRECT_MAX));
}

void lupw_lanes_direct_release(struct lupw_session *s)
{
        if (s->ckpt.direct.state > 0) {
                if (s->ctx.primary[0] && s->be.fn.cuCtxSetCurrent(s->ctx.primary[0]) == CUDA_SUCCESS)
                        s->be.fn.cuMemHostUnregister(s->ckpt.direct.base);
                s->ctx.bound_id = 0;
        }
        s->ckpt.direct.state = 0;
        s->ckpt.direct.base = NULL;
        s->ckpt.direct.len = 0;
}

/* ---- saving */

static int save_store(struct job *job, uint64_t u, const struct lupw_mem_span *sp, uint64_t off, const uint8_t *b,
                      size_t len)
{
        const struct lupine_checkpoint_provider *p = job->p;
        int r;
        if (job->concurrent) {
                r = p->save_write_at(job->save, sp->name, sp->obj_off + off, b, len);
        } else {
                /* wait for our turn: unit u - 1 is written */
                pthread_mutex_lock(&job->mu);
                while (job->next_write != u && !job_failed(job))
                        pthread_cond_wait(&job->turn, &job->mu);
                pthread_mutex_unlock(&job->mu);
                if (job_failed(job))
                        return -ECANCELED;
                r = p->save_write(job->save, sp->name, b, len);
                if (r == 0) {
                        pthread_mutex_lock(&job->mu);
                        job->next_write = u + 1;
                        pthread_cond_broadcast(&job->turn);
                        pthread_mutex_unlock(&job->mu);
                }
        }
        if (r < 0)
                return job_fail(job, r, "writing %s at offset %" PRIu64 " failed: %s (%s)", sp->name, sp->obj_off + off,
                                strerror(-r), p->last_error(job->s->ckpt.inst));
        return 0;
}

/* Where the unit's bytes go and how they get to the provider. */
struct unit_dst {
        uint8_t *p;
        bool direct; /* p is the provider's: save_direct_done, not a write */
};

/* Starts the copy of [off, off + len) of sp into lane buffer j, or straight
 * into the provider's memory when it has room there. */
static int save_issue(struct job *job, struct lupw_lane *l, int j, const struct lupw_mem_span *sp, uint64_t off,
                      size_t len, struct unit_dst *dst)
{
        const struct lupw_backend *be = job->be;
        const struct lupw_session *s = job->s;
        *dst = (struct unit_dst){ .p = l->buf[j] };
        if (job->direct) {
                void *p = NULL;
                int rc = job->p->save_direct_get(job->save, sp->name, sp->obj_off + off, len, &p);
                if (rc == 0) {
                        uintptr_t lo = (uintptr_t)s->ckpt.direct.base, at = (uintptr_t)p;
                        if (at < lo || at - lo > s->ckpt.direct.len || len > s->ckpt.direct.len - (at - lo))
                                return job_fail(job, -EPROTO, "the provider's place for %s at offset %" PRIu64
                                                " lies outside its region", sp->name, off);
                        *dst = (struct unit_dst){ .p = p, .direct = true };
                } else if (rc != -ENOBUFS) {
                        return job_fail(job, rc,
                                        "the provider refused a direct write of %s at offset %" PRIu64 ": %s (%s)",
                                        sp->name, off, strerror(-rc), job->p->last_error(s->ckpt.inst));
                }
        }
        CUresult r = be->cuMemcpyDtoHAsync_v2(dst->p, sp->addr + off, len, l->stream);
        if (r == CUDA_SUCCESS)
                r = be->cuEventRecord(l->done[j], l->stream);
        if (r != CUDA_SUCCESS)
                return job_fail(job, -EIO, "reading device memory at 0x%" PRIx64 " failed (CUresult %d)",
                                sp->addr + off, (int)r);
        return 0;
}

/* Hands a copied unit to the provider. */
static int save_finish(struct job *job, uint64_t u, const struct lupw_mem_span *sp, uint64_t off, size_t len,
                       const struct unit_dst *dst)
{
        if (!dst->direct)
                return save_store(job, u, sp, off, dst->p, len);
        int rc = job->p->save_direct_done(job->save, sp->name, sp->obj_off + off, len);
        if (rc < 0)
                return job_fail(job, rc,
                                "the provider refused the end of a direct write of %s at offset %" PRIu64 ": %s (%s)",
                                sp->name, off, strerror(-rc), job->p->last_error(job->s->ckpt.inst));
        return 0;
}

static void *save_lane(void *arg)
{
        struct lane_arg *a = arg;
        struct job *job = a->job;
        const struct lupw_backend *be = job->be;
        struct lupw_lane *l = &job->s->ckpt.lanes->lane[a->idx];
        size_t span = 0, nspan = 0;
        uint64_t off, noff;
        size_t len, nlen;
        struct unit_dst dst[2];

        if (be->cuCtxSetCurrent(job->s->ctx.primary[0]) != CUDA_SUCCESS) {
                job_fail(job, -EIO, "a checkpoint lane cannot bind the device's context");
                return NULL;
        }
        uint64_t u = a->idx;
        if (u < job->n_units) {
                unit_where(job, u, &span, &off, &len);
                save_issue(job, l, 0, &job->spans[span], off, len, &dst[0]);
        }
        for (unsigned j = 0; u < job->n_units && !job_failed(job); j ^= 1, u += job->k) {
                uint64_t nu = u + job->k;
                unit_where(job, u, &span, &off, &len);
                if (nu < job->n_units) { /* queue the next unit into the other buffer */
                        nspan = span;
                        unit_where(job, nu, &nspan, &noff, &nlen);
                        if (save_issue(job, l, j ^ 1, &job->spans[nspan], noff, nlen, &dst[j ^ 1]) < 0)
                                break;
                }
                const struct lupw_mem_span *sp = &job->spans[span];
                CUresult r = be->cuEventSynchronize(l->done[j]);
                if (r != CUDA_SUCCESS) {
                        job_fail(job, -EIO, "reading device memory at 0x%" PRIx64 " failed (CUresult %d)",
                                 sp->addr + off, (int)r);
                        break;
                }
                for (size_t p = 0; p < len && !sp->on_gpu; p += LUP_CKPT_PIECE) {
                        size_t k = len - p < LUP_CKPT_PIECE ? len - p : LUP_CKPT_PIECE;
                        sp->hashes[(off + p) / LUP_CKPT_PIECE] = lup_hash64(dst[j].p + p, k, 0);
                }
                if (save_finish(job, u, sp, off, len, &dst[j]) < 0)
                        break;
                atomic_fetch_add_explicit(&job->done_bytes, len, memory_order_relaxed);
        }
        be->cuStreamSynchronize(l->stream); /* nothing may still write into the buffers */
        atomic_fetch_sub(&job->lanes_left, 1);
        return NULL;
}

/* ---- restoring */

static int restore_fetch(struct job *job, const struct lupw_mem_span *sp, uint64_t off, uint8_t *b, size_t len)
{
        if (!job->concurrent)
                pthread_mutex_lock(&job->mu); /* one provider call at a time */
        int64_t n = lupine_provider_read_full(job->p, sp->ld ? sp->ld : job->ld, sp->name, sp->obj_off + off, b, len);
        if (!job->concurrent)
                pthread_mutex_unlock(&job->mu);
        if (n != (int64_t)len)
                return job_fail(job, n < 0 ? (int)n : -EIO, "reading %s failed", sp->name);
        return 0;
}

static void *restore_lane(void *arg)
{
        struct lane_arg *a = arg;
        struct job *job = a->job;
        const struct lupw_backend *be = job->be;
        struct lupw_lane *l = &job->s->ckpt.lanes->lane[a->idx];
        size_t span = 0;
        uint64_t off;
        size_t len;

        if (be->cuCtxSetCurrent(job->s->ctx.primary[0]) != CUDA_SUCCESS) {
                job_fail(job, -EIO, "a restore lane cannot bind the device's context");
                return NULL;
        }
        unsigned j = 0;
        for (uint64_t u = a->idx, step = 0; u < job->n_units && !job_failed(job); u += job->k, step++, j ^= 1) {
                unit_where(job, u, &span, &off, &len);
                const struct lupw_mem_span *sp = &job->spans[span];
                /* the copy out of this buffer, two steps ago, must be done */
                if (step >= 2 && be->cuEventSynchronize(l->done[j]) != CUDA_SUCCESS) {
                        job_fail(job, -EIO, "writing device memory failed (before 0x%" PRIx64 ")", sp->addr + off);
                        break;
                }
                if (restore_fetch(job, sp, off, l->buf[j], len) < 0)
                        break;
                bool bad = false;
                for (size_t p = 0; p < len && !bad && !sp->on_gpu; p += LUP_CKPT_PIECE) {
                        size_t k = len - p < LUP_CKPT_PIECE ? len - p : LUP_CKPT_PIECE;
                        if (lup_hash64(l->buf[j] + p, k, 0) != sp->hashes[(off + p) / LUP_CKPT_PIECE]) {
                                job_fail(job, -EBADMSG, "memory at 0x%" PRIx64 " does not match its checksum",
                                         sp->addr + off + p);
                                bad = true;
                        }
                }
                if (bad)
                        break;
                CUresult r = be->cuMemcpyHtoDAsync_v2(sp->addr + off, l->buf[j], len, l->stream);
                if (r == CUDA_SUCCESS)
                        r = be->cuEventRecord(l->done[j], l->stream);
                if (r != CUDA_SUCCESS) {
                        job_fail(job, -EIO, "writing device memory at 0x%" PRIx64 " failed (CUresult %d)",
                                 sp->addr + off, (int)r);
                        break;
                }
                atomic_fetch_add_explicit(&job->done_bytes, len, memory_order_relaxed);
        }
        /* the data must be in place, and the buffers free */
        CUresult r = be->cuStreamSynchronize(l->stream);
        if (r != CUDA_SUCCESS)
                job_fail(job, -EIO, "writing device memory failed (CUresult %d)", (int)r);
        atomic_fetch_sub(&job->lanes_left, 1);
        return NULL;
}

/* ---- running a job */

static int run(struct lupw_session *s, struct job *job, void *(*lane_fn)(void *), char *why, size_t whylen)
{
        int rc = 0;
        job->s = s;
        job->be = &s->be.fn;
        job->p = s->ckpt.ops;
        job->first_unit = calloc(job->n_spans + 1, sizeof(*job->first_unit));
        if (!job->first_unit) {
                snprintf(why, whylen, "out of memory");
                return -ENOMEM;
        }
        for (size_t i = 0; i < job->n_spans; i++) {
                job->first_unit[i + 1] =
                        job->first_unit[i] + (job->spans[i].size + LUPW_LANE_UNIT - 1) / LUPW_LANE_UNIT;
                job->total_bytes += job->spans[i].size;
        }
        job->n_units = job->first_unit[job->n_spans];
        if (job->n_units == 0) {
                free(job->first_unit);
                return 0;
        }
        unsigned want = lanes_for(s, job->max_lanes);
        if (want > job->n_units)
                want = (unsigned)job->n_units;
        int k = lanes_get(s, want);
        if (k < 0) {
                free(job->first_unit);
                snprintf(why, whylen, "cannot set up the copy lanes (streams, events or buffers)");
                return k;
        }
        job->k = (unsigned)k;
        pthread_mutex_init(&job->mu, NULL);
        pthread_cond_init(&job->turn, NULL);
        struct lane_arg *args = calloc(job->k, sizeof(*args));
        if (!args) {
                rc = -ENOMEM;
                snprintf(why, whylen, "out of memory");
                goto out;
        }
        lupw_progress(s, job->phase, 0, job->total_bytes);
        for (unsigned i = 0; i < job->k; i++) {
                args[i] = (struct lane_arg){ .job = job, .idx = i };
                atomic_fetch_add(&job->lanes_left, 1);
                int e = pthread_create(&args[i].thread, NULL, lane_fn, &args[i]);
                if (e) {
                        atomic_fetch_sub(&job->lanes_left, 1);
                        job_fail(job, -e, "cannot start a lane thread: %s", strerror(e));
                        break;
                }
                args[i].started = true;
        }
        /* progress while the lanes work (worker/stats.c paces the reports) */
        while (atomic_load(&job->lanes_left) > 0) {
                struct timespec ts = { .tv_nsec = 100 * 1000 * 1000 };
                nanosleep(&ts, NULL);
                lupw_progress(s, job->phase, atomic_load_explicit(&job->done_bytes, memory_order_relaxed),
                              job->total_bytes);
        }
        lupw_progress(s, job->phase, atomic_load(&job->done_bytes), job->total_bytes);
        for (unsigned i = 0; i < job->k; i++)
                if (args[i].started)
                        pthread_join(args[i].thread, NULL);
        rc = job->rc;
        if (rc < 0)
                snprintf(why, whylen, "%s", job->why);
out:
        free(args);
        pthread_cond_destroy(&job->turn);
        pthread_mutex_destroy(&job->mu);
        free(job->first_unit);
        /* the lanes bound device 0's context in their own threads; this
         * thread's binding is unchanged, but say so to the next call */
        s->ctx.bound_id = 0;
        return rc;
}

int lupw_lanes_save(struct lupw_session *s, struct lupine_ckpt_save *save, struct lupw_mem_span *spans, size_t n,
                    bool hashed, char *why, size_t whylen)
{
        struct job job = { .save = save, .spans = spans, .n_spans = n, .phase = LUPD_WORK_CHECKPOINT };
        job.concurrent = (lupine_provider_caps(s->ckpt.ops) & LUPINE_CKPT_CAP_CONCURRENT_WRITE) != 0;
        job.direct = job.concurrent && direct_ready(s);
        /* the memory does not change during a save: hash it where it is */
        if (!hashed) {
                lupw_piece_hash_plan(s, spans, n);
                if (lupw_piece_hash_run(s, spans, n, false, why, whylen) < 0) {
                        lup_warn("session %s: checkpoint: %s; the lanes hash on the CPU instead", s->name, why);
                        for (size_t i = 0; i < n; i++)
                                spans[i].on_gpu = false;
                }
        }
        /* Lanes exist to spread CPU work. With direct writes and the GPU
         * hashing, a lane only queues device copies and waits, and more of
         * them at once than this made the H200's saves slower, not faster
         * (docs/benchmarks.md). An explicit lane count still wins. */
        bool all_on_gpu = true;
        for (size_t i = 0; i < n; i++)
                all_on_gpu = all_on_gpu && spans[i].on_gpu;
        if (job.direct && all_on_gpu)
                job.max_lanes = LUPW_LANES_DIRECT_MAX;
        return run(s, &job, save_lane, why, whylen);
}

unsigned lupw_lanes_used(const struct lupw_session *s)
{
        return s->ckpt.lanes ? s->ckpt.lanes->n : 0;
}

int lupw_lanes_restore(struct lupw_session *s, struct lupine_ckpt_load *ld, struct lupw_mem_span *spans, size_t n,
                       char *why, size_t whylen)
{
        struct job job = { .ld = ld, .spans = spans, .n_spans = n, .phase = LUPD_WORK_RESTORE };
        job.concurrent = (lupine_provider_caps(s->ckpt.ops) & LUPINE_CKPT_CAP_CONCURRENT_READ) != 0;
        /* spans the GPU can hash are checked once they are in place */
        lupw_piece_hash_plan(s, spans, n);
        int rc = run(s, &job, restore_lane, why, whylen);
        return rc < 0 ? rc : lupw_piece_hash_run(s, spans, n, true, why, whylen);
}
