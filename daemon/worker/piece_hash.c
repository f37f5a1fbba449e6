/* SPDX-License-Identifier: MIT */
/* Piece hashes on the GPU (worker/piece_hash.h has the model). */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include "worker/piece_hash.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "worker/gpu/piece_hash_ptx.h"
#include "log.h"
#include "worker/lanes.h"
#include "worker/session.h"

#define KERNEL_NAME "lupine_piece_hash"
#define BLOCK_THREADS 128u /* 32 pieces per block */

enum { UNTRIED = 0, READY = 1, UNUSABLE = -1 };

struct lupw_piece_hash {
        struct {
                int state;
                CUmodule mod;
                CUfunction fn;
                CUstream stream;
        } dev[LUP_MAX_DEVICES];
};

static bool gpu_hash_allowed(void)
{
        const char *e = getenv("LUPINE_CHECKPOINT_GPU_HASH");
        return !(e && strcmp(e, "0") == 0);
}

static void dev_release(struct lupw_session *s, int d)
{
        struct lupw_piece_hash *ph = s->ckpt.piece_hash;
        const struct lupw_backend *be = &s->be.fn;
        if (ph->dev[d].stream)
                be->cuStreamDestroy_v2(ph->dev[d].stream);
        if (ph->dev[d].mod)
                be->cuModuleUnload(ph->dev[d].mod);
        ph->dev[d].stream = NULL;
        ph->dev[d].mod = NULL;
        ph->dev[d].fn = NULL;
}

/* Whether device d can hash; loads the kernel there the first time. */
static bool dev_ready(struct lupw_session *s, int d)
{
        if (d < 0 || d >= s->n_devices || d >= (int)LUP_MAX_DEVICES || !s->ctx.primary[d])
                return false;
        if (!s->ckpt.piece_hash && !(s->ckpt.piece_hash = calloc(1, sizeof(*s->ckpt.piece_hash))))
                return false;
        struct lupw_piece_hash *ph = s->ckpt.piece_hash;
        if (ph->dev[d].state != UNTRIED)
                return ph->dev[d].state == READY;
        const struct lupw_backend *be = &s->be.fn;
        double t0 = lup_now_s();
        const char *step = "binding the device's context";
        CUresult r = be->cuCtxSetCurrent(s->ctx.primary[d]);
        s->ctx.bound_id = 0; /* the next call binds again */
        if (r == CUDA_SUCCESS) {
                step = "loading the kernel";
                r = be->cuModuleLoadData(&ph->dev[d].mod, lupw_piece_hash_ptx);
        }
        if (r == CUDA_SUCCESS) {
                step = "finding the kernel";
                r = be->cuModuleGetFunction(&ph->dev[d].fn, ph->dev[d].mod, KERNEL_NAME);
        }
        if (r == CUDA_SUCCESS) {
                step = "creating its stream";
                r = be->cuStreamCreate(&ph->dev[d].stream, CU_STREAM_NON_BLOCKING);
        }
        if (r != CUDA_SUCCESS) {
                lup_info("session %s: checkpoint memory of GPU %d is hashed on the CPU: %s failed (CUresult %d)",
                         s->name, d, step, (int)r);
                dev_release(s, d);
                ph->dev[d].state = UNUSABLE;
                return false;
        }
        lup_info("session %s: checkpoint memory of GPU %d is hashed on the GPU (kernel ready in %.3f s)", s->name, d,
                 lup_now_s() - t0);
        ph->dev[d].state = READY;
        return true;
}

void lupw_piece_hash_plan(struct lupw_session *s, struct lupw_mem_span *spans, size_t n)
{
        bool allowed = gpu_hash_allowed();
        if (!allowed && !s->ckpt.said_gpu_hash_off) {
                lup_info("session %s: checkpoint memory is hashed on the CPU (LUPINE_CHECKPOINT_GPU_HASH=0)", s->name);
                s->ckpt.said_gpu_hash_off = true;
        }
        for (size_t i = 0; i < n; i++)
                spans[i].on_gpu = allowed && spans[i].size % 8 == 0 && spans[i].addr % 8 == 0 &&
                                  dev_ready(s, spans[i].device);
}

static uint64_t pieces_of(const struct lupw_mem_span *sp)
{
        return lup_ckpt_pieces(sp->size);
}

/* Hashes every piece of the on_gpu spans: one launch per device over a
 * table of (address, length) pairs, grouped by device. pin holds `total`
 * results followed by the table (2 * total u64s); first[i] is where span
 * i's results begin. Waits for every launch. */
static int launch_all(struct lupw_session *s, struct lupw_mem_span *spans, size_t n, uint64_t *pin, uint64_t total,
                      uint64_t *first, char *why, size_t whylen)
{
        const struct lupw_backend *be = &s->be.fn;
        struct lupw_piece_hash *ph = s->ckpt.piece_hash;
        uint64_t *out = pin, *table = pin + total;
        bool used[LUP_MAX_DEVICES] = { false };
        uint64_t at = 0;
        CUresult r = CUDA_SUCCESS;
        for (int d = 0; d < (int)LUP_MAX_DEVICES && r == CUDA_SUCCESS; d++) {
                uint64_t start = at;
                for (size_t i = 0; i < n; i++) {
                        const struct lupw_mem_span *sp = &spans[i];
                        if (!sp->on_gpu || sp->device != d)
                                continue;
                        first[i] = at;
                        for (uint64_t off = 0; off < sp->size; off += LUP_CKPT_PIECE, at++) {
                                table[2 * at] = sp->addr + off;
                                table[2 * at + 1] = sp->size - off < LUP_CKPT_PIECE ? sp->size - off : LUP_CKPT_PIECE;
                        }
                }
                if (at == start)
                        continue;
                uint64_t pieces = at - start;
                uint64_t tab = (uint64_t)(uintptr_t)(table + 2 * start), dst = (uint64_t)(uintptr_t)(out + start);
                void *params[] = { &tab, &pieces, &dst };
                uint64_t blocks = (pieces * 4 + BLOCK_THREADS - 1) / BLOCK_THREADS;
                r = be->cuCtxSetCurrent(s->ctx.primary[d]);
                if (r == CUDA_SUCCESS)
                        r = be->cuLaunchKernel(ph->dev[d].fn, (unsigned)blocks, 1, 1, BLOCK_THREADS, 1, 1, 0,
                                               ph->dev[d].stream, params, NULL);
                used[d] = true;
        }
        CUresult first_err = r;
        for (int d = 0; d < (int)LUP_MAX_DEVICES; d++) {
                if (!used[d])
                        continue;
                r = be->cuCtxSetCurrent(s->ctx.primary[d]);
                if (r == CUDA_SUCCESS)
                        r = be->cuStreamSynchronize(ph->dev[d].stream);
                if (first_err == CUDA_SUCCESS)
                        first_err = r;
        }
        s->ctx.bound_id = 0;
        if (first_err != CUDA_SUCCESS) {
                snprintf(why, whylen, "the GPU hash kernel failed (CUresult %d)", (int)first_err);
                return -EIO;
        }
        return 0;
}

int lupw_piece_hash_run(struct lupw_session *s, struct lupw_mem_span *spans, size_t n, bool check, char *why,
                        size_t whylen)
{
        const struct lupw_backend *be = &s->be.fn;
        uint64_t total = 0;
        int ctx_dev = -1;
        for (size_t i = 0; i < n; i++)
                if (spans[i].on_gpu) {
                        total += pieces_of(&spans[i]);
                        if (ctx_dev < 0)
                                ctx_dev = spans[i].device;
                }
        if (total == 0)
                return 0;
        uint64_t *first = malloc(n * sizeof(*first));
        if (!first) {
                snprintf(why, whylen, "out of memory");
                return -ENOMEM;
        }
        /* pinned host memory for the results and the table: under unified
         * addressing the kernel reads and writes it directly, from any
         * device */
        void *pin = NULL;
        CUresult r = be->cuCtxSetCurrent(s->ctx.primary[ctx_dev]);
        if (r == CUDA_SUCCESS)
                r = be->cuMemAllocHost_v2(&pin, total * 3 * sizeof(uint64_t));
        s->ctx.bound_id = 0;
        if (r != CUDA_SUCCESS) {
                free(first);
                snprintf(why, whylen, "cannot allocate %" PRIu64 " bytes of pinned memory for hashes (CUresult %d)",
                         total * 24, (int)r);
                return -ENOMEM;
        }
        uint64_t *out = pin;
        double t0 = lup_now_s();
        int rc = launch_all(s, spans, n, out, total, first, why, whylen);
        if (rc == 0)
                lup_info("session %s: the GPU %s %.2f GiB in %.3f s", s->name, check ? "checked" : "hashed",
                         (double)total * LUP_CKPT_PIECE / 1073741824.0, lup_now_s() - t0);
        for (size_t i = 0; i < n && rc == 0; i++) {
                const struct lupw_mem_span *sp = &spans[i];
                if (!sp->on_gpu)
                        continue;
                uint64_t pieces = pieces_of(sp);
                const uint64_t *got = out + first[i];
                if (!check) {
                        memcpy(sp->hashes, got, pieces * sizeof(uint64_t));
                        continue;
                }
                for (uint64_t p = 0; p < pieces; p++)
                        if (got[p] != sp->hashes[p]) {
                                snprintf(why, whylen, "memory at 0x%" PRIx64 " does not match its checksum",
                                         sp->addr + p * LUP_CKPT_PIECE);
                                rc = -EBADMSG;
                                break;
                        }
        }
        be->cuMemFreeHost(pin);
        free(first);
        return rc;
}

int lupw_piece_hash_all(struct lupw_session *s, struct lupw_mem_span *spans, size_t n, char *why, size_t whylen)
{
        lupw_piece_hash_plan(s, spans, n);
        int rc = lupw_piece_hash_run(s, spans, n, false, why, whylen);
        for (size_t i = 0; i < n && rc == 0; i++)
                if (!spans[i].on_gpu) {
                        snprintf(why, whylen, "the GPU cannot hash the memory at 0x%" PRIx64, spans[i].addr);
                        rc = -ENOTSUP;
                }
        return rc;
}

bool lupw_piece_hash_ready(const struct lupw_session *s, int device)
{
        return s->ckpt.piece_hash && device >= 0 && device < (int)LUP_MAX_DEVICES &&
               s->ckpt.piece_hash->dev[device].state == READY;
}

void lupw_piece_hash_prepare(struct lupw_session *s)
{
        if (gpu_hash_allowed())
                (void)dev_ready(s, 0);
}

void lupw_piece_hash_free(struct lupw_session *s)
{
        if (!s->ckpt.piece_hash)
                return;
        for (int d = 0; d < (int)LUP_MAX_DEVICES; d++)
                if (s->ckpt.piece_hash->dev[d].state == READY && s->ctx.primary[d]) {
                        s->be.fn.cuCtxSetCurrent(s->ctx.primary[d]);
                        dev_release(s, d);
                }
        s->ctx.bound_id = 0;
        free(s->ckpt.piece_hash);
        s->ckpt.piece_hash = NULL;
}
