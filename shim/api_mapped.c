/* SPDX-License-Identifier: MIT */
/*
 * Mapped (zero-copy) host memory: pinned memory the GPU reads and writes.
 *
 * Under unified addressing every pinned range is also a device address. A
 * range becomes "mapped" the first time it is used as one: a memset, copy
 * or kernel parameter that names it, cuMemHostGetDevicePointer, or the
 * device-pointer attribute. The worker then keeps a mirror of it on the GPU
 * host (worker/mapped.c), at the same address where it can, and this file
 * keeps both in step:
 *   - before every call sent to the worker, the bytes the program changed
 *     since they were last exchanged are pushed (each range is compared
 *     with its shadow: what was last exchanged);
 *   - after every synchronous call (synchronisations, queries, sync copies
 *     and anything else that waits for an answer), the bytes the GPU
 *     changed are pulled back;
 *   - while work may be in flight, a background thread does both every
 *     LUPINE_MAPPED_POLL_US microseconds (default 200), so a kernel that
 *     spins on a host-set flag, or a host thread that polls a flag the
 *     kernel sets, sees it within about one interval plus a round trip.
 * A program that never uses pinned memory as device memory pays one atomic
 * load per call. docs/mapped.md has the contract and its cost.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "client.h"
#include "env.h"
#include "log.h"
#include "ops.h"
#include "shim_gen.h"

#define SPAN_HDR   12u
#define FRAME_CAP  (LUP_BULK_CHUNK)
#define MAX_MIRROR 4096u

struct mirror {
        uint64_t base, size;
        uint8_t *shadow; /* what the worker's mirror was last known to hold */
        bool read_only;  /* registered READ_ONLY: never pulled (the GPU may not write it) */
        bool managed;    /* cuMemAllocManaged (api_managed.c): not the poller's */
        bool global;     /* managed, attached globally: not written by the host while kernels run */
};

static pthread_mutex_t mlock = PTHREAD_MUTEX_INITIALIZER; /* mirrors, frame, the exchanges */
static struct mirror mirrors[MAX_MIRROR];
static size_t n_mirrors;
static size_t n_polled; /* mirrors the poller exchanges: all but managed ones */
static uint8_t *frame;  /* FRAME_CAP + 16 bytes: pushes and pull answers */

atomic_uint lupc_mapped_n;     /* mirrors: the hot path's only cost */
static atomic_ulong async_seq; /* asynchronous calls sent while mirrors exist */
static atomic_ulong idle_seq;  /* async_seq when a context synchronisation began */
static atomic_int sync_calls;  /* the program's synchronous calls under way */
/* A kernel was launched and no synchronous call has returned since: on a
 * device without concurrent managed access the program may not touch
 * globally attached managed memory until it synchronises, even once the
 * kernel is done, so there is nothing of it to push. */
static atomic_bool kernels_out;
static __thread int in_mapped; /* this thread is exchanging: no hooks */
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static bool poller_started, poller_asleep;

static struct mirror *find_mirror(uint64_t p)
{
        for (size_t i = 0; i < n_mirrors; i++)
                if (p - mirrors[i].base < mirrors[i].size)
                        return &mirrors[i];
        return NULL;
}

/* ---- exchanges (mlock held) */

static CUresult send_push(uint64_t base, size_t len)
{
        lup_put64(frame, base);
        return lupc_call(LUP_OP_MAPPED_PUSH, LUPC_ASYNC, frame, len, NULL, 0, NULL);
}

/* Where the run of changed bytes from i ends (a frame's worth on). In
 * managed memory a run goes on across fewer unchanged bytes than a span
 * header (they are sent again): under its contract nothing else writes a
 * managed range while the program does, so an unchanged byte's mirror
 * holds the same value, and values that change in some of their bytes
 * (floats, counters) go in a few long spans instead of many short ones. */
static uint64_t run_end(const struct mirror *m, const uint8_t *mem, uint64_t i)
{
        uint64_t j = i, end = m->size - i > FRAME_CAP ? i + FRAME_CAP : m->size; /* one frame's worth at most */
        for (;;) {
                while (j < end && mem[j] != m->shadow[j])
                        j++;
                if (!m->managed)
                        return j;
                uint64_t g = j;
                while (g < end && g - j < SPAN_HDR && mem[g] == m->shadow[g])
                        g++;
                if (g >= end || g - j >= SPAN_HDR)
                        return j;
                j = g;
        }
}

/* The runs of bytes where the program's memory and the shadow differ, in
 * frames of at most FRAME_CAP bytes; each byte is read once, and what is
 * sent becomes the shadow. */
static CUresult push_one(struct mirror *m)
{
        const uint8_t *mem = (const uint8_t *)(uintptr_t)m->base;
        size_t len = 8;
        uint64_t i = 0;
        CUresult r = CUDA_SUCCESS;
        while (i < m->size && r == CUDA_SUCCESS) {
                uint64_t k = m->size - i < 64 ? m->size - i : 64;
                if (memcmp(mem + i, m->shadow + i, k) == 0) {
                        i += k;
                        continue;
                }
                uint64_t end = i + k;
                while (i < end && mem[i] == m->shadow[i])
                        i++;
                uint64_t j = run_end(m, mem, i);
                if (j == i)
                        continue;
                if (FRAME_CAP - len <= SPAN_HDR) {
                        r = send_push(m->base, len);
                        len = 8;
                }
                uint64_t n = j - i < FRAME_CAP - len - SPAN_HDR ? j - i : FRAME_CAP - len - SPAN_HDR;
                lup_put64(frame + len, i);
                lup_put32(frame + len + 8, (uint32_t)n);
                memcpy(frame + len + SPAN_HDR, mem + i, n);
                memcpy(m->shadow + i, frame + len + SPAN_HDR, n);
                len += SPAN_HDR + n;
                i += n;
        }
        if (r == CUDA_SUCCESS && len > 8)
                r = send_push(m->base, len);
        return r;
}

static CUresult pull_one(struct mirror *m)
{
        uint8_t *mem = (uint8_t *)(uintptr_t)m->base;
        uint64_t from = 0;
        while (from < m->size) {
                uint8_t req[16];
                size_t got = 0;
                lup_put64(req, m->base);
                lup_put64(req + 8, from);
                CUresult r = lupc_call(LUP_OP_MAPPED_PULL, LUPC_SYNC, req, sizeof(req), frame, FRAME_CAP + 16, &got);
                if (r != CUDA_SUCCESS)
                        return r;
                struct lup_rd rd = lup_rd_init(frame, got);
                uint64_t next = 0, off;
                uint32_t n;
                const uint8_t *data;
                lup_rd_u64(&rd, &next);
                while (!rd.err && lup_rd_left(&rd) > 0) {
                        lup_rd_u64(&rd, &off);
                        lup_rd_u32(&rd, &n);
                        lup_rd_bytes(&rd, n, &data);
                        if (rd.err || off > m->size || n > m->size - off)
                                return CUDA_ERROR_UNKNOWN;
                        memcpy(mem + off, data, n);
                        memcpy(m->shadow + off, data, n);
                }
                if (rd.err || next <= from || next > m->size)
                        return CUDA_ERROR_UNKNOWN;
                from = next;
        }
        return CUDA_SUCCESS;
}

/* false when an exchange failed (the session is gone, most likely: the
 * program's own calls report that); said once */
static bool exchange_locked(bool pull, bool polling)
{
        static bool said;
        bool ok = true, quiet = atomic_load(&kernels_out);
        in_mapped = 1;
        for (size_t i = 0; i < n_mirrors; i++) {
                /* the program may not touch managed memory while the GPU
                 * works: only calls exchange it, and none push what it may
                 * not have written */
                if ((polling && mirrors[i].managed) || (quiet && !pull && mirrors[i].global))
                        continue;
                CUresult r = push_one(&mirrors[i]);
                if (r == CUDA_SUCCESS && pull && !mirrors[i].read_only)
                        r = pull_one(&mirrors[i]);
                if (r != CUDA_SUCCESS && !said) {
                        said = true;
                        lup_warn("mapped memory at %#llx: exchange with the GPU host failed (error %d); "
                                 "further failures are not logged",
                                 (unsigned long long)mirrors[i].base, (int)r);
                }
                ok = ok && r == CUDA_SUCCESS;
        }
        in_mapped = 0;
        return ok;
}

/* ---- the poller */

static void *poller(void *arg)
{
        (void)arg;
        unsigned us = lup_env_uint("LUPINE_MAPPED_POLL_US", 200, 1000000);
        struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000 };
        pthread_mutex_lock(&mlock);
        for (;;) {
                while (n_polled == 0 || atomic_load(&async_seq) == atomic_load(&idle_seq)) {
                        poller_asleep = true;
                        pthread_cond_wait(&wake, &mlock);
                        poller_asleep = false;
                }
                /* While a call of the program waits in the worker, which runs
                 * one call at a time, a pull would wait behind it holding
                 * mlock and stall every other thread's calls: push only (the
                 * program's call pulls when it returns). */
                bool ok = exchange_locked(atomic_load(&sync_calls) == 0, true);
                pthread_mutex_unlock(&mlock);
                struct timespec slow = { 0, 100000000 }; /* after a failure: 100 ms */
                nanosleep(ok ? &ts : &slow, NULL);
                pthread_mutex_lock(&mlock);
        }
        return NULL;
}

/* ---- hooks (calls.c) */

void lupc_mapped_before(unsigned flags, uint16_t op)
{
        if (in_mapped)
                return;
        if (flags & LUPC_SYNC)
                atomic_fetch_add(&sync_calls, 1);
        pthread_mutex_lock(&mlock);
        exchange_locked(false, false);
        if (op == LUP_OP_LAUNCH || op == LUP_OPC_cuGraphLaunch)
                atomic_store(&kernels_out, true);
        if (!(flags & LUPC_SYNC)) {
                atomic_fetch_add(&async_seq, 1);
                if (poller_asleep)
                        pthread_cond_signal(&wake);
        } else if (op == LUP_OPC_cuCtxSynchronize) {
                /* once it returns, nothing sent before it is in flight */
                atomic_store(&idle_seq, atomic_load(&async_seq));
        }
        pthread_mutex_unlock(&mlock);
}

void lupc_mapped_after(void)
{
        if (in_mapped)
                return;
        atomic_fetch_sub(&sync_calls, 1);
        pthread_mutex_lock(&mlock);
        exchange_locked(true, false);
        /* it may have been a synchronisation (any synchronous call counts:
         * pushing again is always safe) */
        atomic_store(&kernels_out, false);
        pthread_mutex_unlock(&mlock);
}

/* ---- ranges becoming mapped, and going */

static CUresult activate(uint64_t base, uint64_t size, unsigned int flags, bool managed)
{
        if (n_mirrors >= MAX_MIRROR)
                return CUDA_ERROR_OUT_OF_MEMORY;
        if (!frame && !(frame = malloc(FRAME_CAP + 16)))
                return CUDA_ERROR_OUT_OF_MEMORY;
        uint8_t *shadow = calloc(1, size); /* the new mirror holds zeros */
        if (!shadow)
                return CUDA_ERROR_OUT_OF_MEMORY;
        in_mapped = 1;
        CUresult r = lupc_send_lupHostMapCreate(base, size, flags);
        in_mapped = 0;
        if (r != CUDA_SUCCESS) {
                free(shadow);
                return r;
        }
        mirrors[n_mirrors++] = (struct mirror){
                .base = base,
                .size = size,
                .shadow = shadow,
                .read_only = (flags & CU_MEMHOSTREGISTER_READ_ONLY) != 0,
                .managed = managed,
                .global = managed && !(flags & LUP_HOSTMAP_ATTACH_HOST),
        };
        n_polled += !managed;
        /* without mirrors no hook ran: what kernels_out says may be stale
         * (clearing it only means pushing, which is always safe) */
        if (n_mirrors == 1)
                atomic_store(&kernels_out, false);
        atomic_store(&lupc_mapped_n, (unsigned)n_mirrors);
        if (!poller_started) {
                pthread_t t;
                pthread_attr_t at;
                pthread_attr_init(&at);
                pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
                poller_started = pthread_create(&t, &at, poller, NULL) == 0;
                pthread_attr_destroy(&at);
        }
        in_mapped = 1;
        r = push_one(&mirrors[n_mirrors - 1]); /* its contents so far */
        in_mapped = 0;
        return r;
}

CUresult lupc_mapped_use(uint64_t p, uint64_t n)
{
        uint64_t base, size;
        unsigned int flags;
        if (!lupc_host_find(p, &base, &size, &flags) || n > size - (p - base))
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&mlock);
        CUresult r = find_mirror(base) ? CUDA_SUCCESS : activate(base, size, flags, false);
        pthread_mutex_unlock(&mlock);
        return r;
}

CUresult lupc_mapped_managed(uint64_t base, uint64_t size, bool global)
{
        pthread_mutex_lock(&mlock);
        CUresult r = find_mirror(base)
                             ? CUDA_ERROR_INVALID_VALUE
                             : activate(base, size, LUP_HOSTMAP_MANAGED | (global ? 0 : LUP_HOSTMAP_ATTACH_HOST), true);
        pthread_mutex_unlock(&mlock);
        return r;
}

void lupc_mapped_managed_attach(uint64_t base, bool global)
{
        pthread_mutex_lock(&mlock);
        struct mirror *m = find_mirror(base);
        if (m && m->managed)
                m->global = global;
        pthread_mutex_unlock(&mlock);
}

void lupc_mapped_scan(const uint8_t *params, size_t n)
{
        uint64_t lo = atomic_load_explicit(&lupc_host_lo, memory_order_relaxed);
        uint64_t hi = atomic_load_explicit(&lupc_host_hi, memory_order_relaxed);
        for (size_t off = 0; off + 8 <= n; off += 8) {
                uint64_t v;
                memcpy(&v, params + off, 8);
                uint64_t base, size;
                unsigned int flags;
                /* device pointers and small values never take the lock */
                if (v >= lo && v < hi && !lupc_in_arena(v) && lupc_host_find(v, &base, &size, &flags))
                        (void)lupc_mapped_use(v, 1); /* a failure shows as the kernel's fault */
        }
}

void lupc_mapped_forget(uint64_t base)
{
        if (!atomic_load(&lupc_mapped_n))
                return;
        pthread_mutex_lock(&mlock);
        struct mirror *m = find_mirror(base);
        if (m && m->base == base) {
                in_mapped = 1;
                (void)lupc_send_lupHostMapDestroy(base);
                in_mapped = 0;
                free(m->shadow);
                n_polled -= !m->managed;
                *m = mirrors[--n_mirrors];
                atomic_store(&lupc_mapped_n, (unsigned)n_mirrors);
        }
        pthread_mutex_unlock(&mlock);
}
