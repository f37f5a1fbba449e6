/* SPDX-License-Identifier: MIT */
/*
 * Mapped host memory (cuMemHostAlloc, cuMemHostRegister, used as device
 * memory): a mirror of each client range in pinned memory of this host,
 * registered with the driver as mapped (DEVICEMAP), so kernels, memsets
 * and copies reach it while the CPU here can read and write it at any time.
 *
 * Where it can, the worker places the mirror at the client's own address
 * (mmap MAP_FIXED_NOREPLACE, then the driver's device pointer of
 * registered memory is its host pointer: UVA), so a pointer stored in
 * device memory means the same on both sides. Where that address is taken
 * here, the mirror goes elsewhere and the client's range is entered in the
 * translation table (s->obj.xlate, as moved module globals are), which
 * every device pointer in a call and every 8-byte kernel parameter goes
 * through. The worker's range checks (worker/checks.c) accept a mirror's
 * client range like an allocation.
 *
 * The contents: LUP_OP_MAPPED_PUSH writes the bytes the host changed into
 * the mirror at once (not in stream order: a host write to mapped memory is
 * immediate on a local GPU too); LUP_OP_MAPPED_PULL answers the bytes that
 * differ from the shadow, what the client was last known to hold, and
 * makes them the shadow. Both sides only ever send the bytes that changed
 * on their side, so neither overwrites the other's writes to other bytes.
 * docs/mapped.md has the whole contract.
 */
#define LUP_LOG_CAT LUP_LOGC_GPU
#include "worker/mapped.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "buf.h"
#include "ckpt_mapped.h"
#include "log.h"
#include "provider_load.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define USER_TOP       (1ull << 47) /* x86-64 user space; also below arm64's */
#define SPAN_HDR       12u          /* u64 offset, u32 length */
#define PULL_HDR       8u           /* u64 next */
#define PULL_REPLY_CAP (LUP_BULK_CHUNK)

static struct lupw_mirror *mirror_at(const struct lupw_session *s, uint64_t va)
{
        struct lup_range r;
        if (!s->mapped.ranges.n || !lup_rangemap_find(&s->mapped.ranges, va, &r) || r.base != va)
                return NULL;
        return (struct lupw_mirror *)(uintptr_t)r.a;
}

static bool overlaps(const struct lupw_session *s, uint64_t va, uint64_t size)
{
        for (size_t i = 0; i < s->mapped.ranges.n; i++) {
                const struct lup_range *r = &s->mapped.ranges.r[i];
                if (va < r->base + r->size && r->base < va + size)
                        return true;
        }
        return false;
}

static bool in_arena(const struct lupw_session *s, uint64_t va, uint64_t size)
{
        const struct arena *a = &s->mem.arena;
        return a->size && va < a->base + a->size && a->base < va + size;
}

/* Pages for [va, va + size) at the same address if it is free here.
 * LUPINE_TEST_MAPPED_ELSEWHERE=1 (tests) always places them elsewhere, to
 * exercise the translated case. */
static uint8_t *map_pages(uint64_t va, uint64_t size, size_t *ret_len, uint64_t *ret_off)
{
        static int elsewhere = -1;
        if (elsewhere < 0) {
                const char *e = getenv("LUPINE_TEST_MAPPED_ELSEWHERE");
                elsewhere = e && *e == '1';
        }
        uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
        uint64_t base = va & ~(pg - 1), end = (va + size + pg - 1) & ~(pg - 1);
        size_t len = (size_t)(end - base);
        void *p = elsewhere ? MAP_FAILED
                            : mmap((void *)(uintptr_t)base, len, PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (p != MAP_FAILED && (uint64_t)(uintptr_t)p != base) {
                munmap(p, len); /* a kernel without MAP_FIXED_NOREPLACE treats it as a hint */
                p = MAP_FAILED;
        }
        if (p == MAP_FAILED)
                p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
                return NULL;
        *ret_len = len;
        *ret_off = va - base;
        return p;
}

static void mirror_free(struct lupw_session *s, struct lupw_mirror *m, bool registered)
{
        if (registered)
                (void)s->be.fn.cuMemHostUnregister(m->map);
        munmap(m->map, m->map_len);
        if (m->shadow)
                munmap(m->shadow, (size_t)m->size);
        free(m);
}

/* A context to register in when the call names none (a restore). */
static void bind_any(struct lupw_session *s)
{
        CUcontext c = s->ctx.primary[0] ? s->ctx.primary[0] : s->ctx.n_slots ? s->ctx.slots[0].real : NULL;
        if (c) {
                (void)s->be.fn.cuCtxSetCurrent(c);
                s->ctx.bound_id = 0; /* the next call binds again */
        }
}

static CUresult make_mirror(struct lupw_session *s, uint64_t va, uint64_t size, uint32_t flags,
                            struct lupw_mirror **ret)
{
        if (size == 0 || va == 0 || va >= USER_TOP || size > USER_TOP - va || in_arena(s, va, size))
                return CUDA_ERROR_INVALID_VALUE;
        if (s->mapped.ranges.n >= LUPW_MAX_MIRRORS || size > LUPW_MAX_MAPPED_BYTES - s->mapped.bytes)
                return CUDA_ERROR_OUT_OF_MEMORY;
        if (overlaps(s, va, size))
                return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        struct lupw_mirror *m = calloc(1, sizeof(*m));
        uint64_t off = 0;
        if (!m || !(m->map = map_pages(va, size, &m->map_len, &off))) {
                free(m);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        void *sh = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        m->shadow = sh == MAP_FAILED ? NULL : sh;
        m->va = va;
        m->size = size;
        m->flags = flags;
        m->host = m->map + off;
        if (!m->shadow) {
                mirror_free(s, m, false);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        CUresult r = s->be.fn.cuMemHostRegister_v2(m->map, m->map_len,
                                                   CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
        if (r != CUDA_SUCCESS) {
                mirror_free(s, m, false);
                return r;
        }
        CUdeviceptr d = 0;
        r = s->be.fn.cuMemHostGetDevicePointer_v2(&d, m->map, 0);
        m->dptr = (uint64_t)d + off;
        struct lup_range rr = { .base = va, .size = size, .a = (uint64_t)(uintptr_t)m };
        struct lup_range x = { .base = va, .size = size, .a = m->dptr };
        if (r == CUDA_SUCCESS && lup_rangemap_add(&s->mapped.ranges, &rr) < 0)
                r = CUDA_ERROR_OUT_OF_MEMORY;
        else if (r == CUDA_SUCCESS && m->dptr != va && lup_rangemap_add(&s->obj.xlate, &x) < 0) {
                lup_rangemap_remove(&s->mapped.ranges, va, NULL);
                r = CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (r != CUDA_SUCCESS) {
                mirror_free(s, m, true);
                return r;
        }
        s->mapped.bytes += size;
        if (m->dptr != va)
                lup_info("session %s: mapped range %#" PRIx64 " (%" PRIu64 " bytes): that address is taken here; "
                         "the mirror's device address is %#" PRIx64 ", pointers to it are translated",
                         s->name, va, size, m->dptr);
        *ret = m;
        return CUDA_SUCCESS;
}

CUresult lupw_lupHostMapCreate(struct lupw_session *s, uint64_t va, uint64_t size, unsigned int flags)
{
        struct lupw_mirror *m;
        return make_mirror(s, va, size, flags, &m);
}

CUresult lupw_lupHostMapDestroy(struct lupw_session *s, uint64_t va)
{
        struct lupw_mirror *m = mirror_at(s, va);
        if (!m)
                return CUDA_ERROR_INVALID_VALUE;
        /* the GPU may still be using it: as cuMemFreeHost, wait for the work */
        bind_any(s);
        (void)s->be.fn.cuCtxSynchronize();
        lup_rangemap_remove(&s->mapped.ranges, va, NULL);
        if (m->dptr != va)
                lup_rangemap_remove(&s->obj.xlate, va, NULL);
        s->mapped.bytes -= m->size;
        mirror_free(s, m, true);
        return CUDA_SUCCESS;
}

void lupw_mapped_release(struct lupw_session *s)
{
        for (size_t i = 0; i < s->mapped.ranges.n; i++) {
                struct lupw_mirror *m = (struct lupw_mirror *)(uintptr_t)s->mapped.ranges.r[i].a;
                if (m->dptr != m->va)
                        lup_rangemap_remove(&s->obj.xlate, m->va, NULL);
                mirror_free(s, m, true);
        }
        lup_rangemap_free(&s->mapped.ranges);
        s->mapped.bytes = 0;
}

/* ---- contents */

/* Checks a PUSH payload: an exact mirror address, then spans inside it. */
static int push_check(struct lupw_session *s, const struct lup_hdr *h, const uint8_t *p, union lupw_ctl_args *ret,
                      CUresult *ret_early)
{
        struct lup_rd r = lup_rd_init(p, h->len);
        uint64_t va = 0, off;
        uint32_t n;
        const uint8_t *data;
        lup_rd_u64(&r, &va);
        struct lupw_mirror *m = r.err ? NULL : mirror_at(s, va);
        if (!m && !r.err) {
                *ret_early = CUDA_ERROR_INVALID_VALUE; /* freed meanwhile: a race in the program */
                ret->payload = p;
                return 0;
        }
        bool bad = false;
        while (!r.err && !bad && lup_rd_left(&r) > 0) {
                lup_rd_u64(&r, &off);
                lup_rd_u32(&r, &n);
                lup_rd_bytes(&r, n, &data);
                bad = n == 0 || off > m->size || n > m->size - off;
        }
        if (r.err || bad || lup_rd_left(&r) != 0) {
                lupw_set_why(s, "malformed MAPPED_PUSH");
                return -EBADMSG;
        }
        ret->payload = p;
        return 0;
}

static int push_run(struct lupw_session *s, const struct lup_hdr *h, const union lupw_ctl_args *a, struct lup_wr *out,
                    CUresult *status)
{
        (void)out;
        if (*status != CUDA_SUCCESS)
                return 0;
        struct lup_rd r = lup_rd_init(a->payload, h->len);
        uint64_t va, off;
        uint32_t n;
        const uint8_t *data;
        lup_rd_u64(&r, &va);
        struct lupw_mirror *m = mirror_at(s, va);
        while (m && lup_rd_left(&r) > 0) {
                lup_rd_u64(&r, &off);
                lup_rd_u32(&r, &n);
                lup_rd_bytes(&r, n, &data);
                memcpy(m->host + off, data, n);
                memcpy(m->shadow + off, data, n);
        }
        return 0;
}

const struct lupw_ctl_op lupw_ctl_mapped_push = {
        .name = "mapped memory (host writes)",
        .sync = LUPW_ASYNC_ONLY,
        .why_flag = "MAPPED_PUSH must be asynchronous",
        .check = push_check,
        .run = push_run,
};

struct pull_args {
        struct lupw_mirror *m;
        uint64_t from;
};

static int pull_check(struct lupw_session *s, const struct lup_hdr *h, const uint8_t *p, union lupw_ctl_args *ret,
                      CUresult *ret_early)
{
        struct lup_rd r = lup_rd_init(p, h->len);
        uint64_t va = 0, from = 0;
        lup_rd_u64(&r, &va);
        lup_rd_u64(&r, &from);
        if (lup_rd_finish(&r) < 0) {
                lupw_set_why(s, "malformed MAPPED_PULL");
                return -EBADMSG;
        }
        struct lupw_mirror *m = mirror_at(s, va);
        if (!m || from > m->size)
                *ret_early = CUDA_ERROR_INVALID_VALUE;
        ret->payload = p;
        return 0;
}

/* Where the run of changed bytes from i ends, at most cap bytes on. In
 * managed memory (LUP_HOSTMAP_MANAGED) a run goes on across fewer unchanged
 * bytes than a span header: under its contract the program does not write
 * a managed range while the GPU may, so the client holds the shadow's
 * value there, and values that change in some of their bytes go in a few
 * long spans instead of many short ones. */
static uint64_t run_end(const struct lupw_mirror *m, uint64_t i, uint64_t cap)
{
        uint64_t j = i, end = m->size - i > cap ? i + cap : m->size;
        for (;;) {
                while (j < end && m->host[j] != m->shadow[j])
                        j++;
                if (!(m->flags & LUP_HOSTMAP_MANAGED))
                        return j;
                uint64_t g = j;
                while (g < end && g - j < SPAN_HDR && m->host[g] == m->shadow[g])
                        g++;
                if (g >= end || g - j >= SPAN_HDR)
                        return j;
                j = g;
        }
}

/* Appends the runs of bytes where host and shadow differ, from *at on, to
 * w (each copied once, so the shadow gets exactly what is sent), while
 * room is left; *at is where it stopped. */
static void diff_spans(struct lupw_mirror *m, uint64_t *at, struct lup_wr *w)
{
        const uint64_t blk = 64;
        uint64_t i = *at;
        while (i < m->size) {
                uint64_t k = m->size - i < blk ? m->size - i : blk;
                if (memcmp(m->host + i, m->shadow + i, k) == 0) {
                        i += k;
                        continue;
                }
                uint64_t end = i + k;
                while (i < end && m->host[i] == m->shadow[i])
                        i++;
                size_t room = w->cap - w->len;
                if (room <= SPAN_HDR)
                        break;
                uint64_t j = run_end(m, i, room - SPAN_HDR), n = j - i; /* host[i] differs: n > 0 */
                lup_wr_u64(w, i);
                lup_wr_u32(w, (uint32_t)n);
                uint8_t *dst = w->p + w->len;
                memcpy(dst, m->host + i, n);
                memcpy(m->shadow + i, dst, n);
                w->len += n;
                i += n;
        }
        *at = i;
}

static uint8_t pull_reply[PULL_REPLY_CAP];

static int pull_run(struct lupw_session *s, const struct lup_hdr *h, const union lupw_ctl_args *a, struct lup_wr *out,
                    CUresult *status)
{
        (void)out;
        if (*status != CUDA_SUCCESS)
                return 0;
        struct lup_rd r = lup_rd_init(a->payload, h->len);
        uint64_t va, from;
        lup_rd_u64(&r, &va);
        lup_rd_u64(&r, &from);
        struct lupw_mirror *m = mirror_at(s, va);
        struct lup_wr w = lup_wr_init(pull_reply, sizeof(pull_reply));
        w.len = PULL_HDR;
        diff_spans(m, &from, &w);
        lup_put64(pull_reply, from);
        return lupw_reply(s, h, 0, CUDA_SUCCESS, pull_reply, w.len) < 0 ? -EIO : LUPW_ANSWERED;
}

const struct lupw_ctl_op lupw_ctl_mapped_pull = {
        .name = "mapped memory (device writes)",
        .sync = LUPW_SYNC_ONLY,
        .why_flag = "MAPPED_PULL must be synchronous",
        .keeps_latched = true, /* the shim's own exchange: the program's next call gets the error */
        .check = pull_check,
        .run = pull_run,
};

/* ---- checkpoint and restore */

static void object_name(char *buf, size_t n, uint64_t va)
{
        snprintf(buf, n, "mapmem/%016" PRIx64, va);
}

int lupw_mapped_save(struct lupw_session *s, struct lupine_ckpt_save *save)
{
        uint32_t n = (uint32_t)s->mapped.ranges.n;
        struct lup_ckpt_mapped *v = calloc(n ? n : 1, sizeof(*v));
        uint8_t *obj = NULL;
        size_t len = 0;
        int rc = v ? 0 : -ENOMEM;
        for (uint32_t i = 0; rc == 0 && i < n; i++) {
                const struct lupw_mirror *m = (const struct lupw_mirror *)(uintptr_t)s->mapped.ranges.r[i].a;
                char name[40];
                v[i] = (struct lup_ckpt_mapped){ .va = m->va, .size = m->size, .flags = m->flags };
                object_name(name, sizeof(name), m->va);
                rc = s->ckpt.ops->save_write(save, name, m->host, (size_t)m->size);
                if (rc == 0)
                        rc = s->ckpt.ops->save_write(save, name, m->shadow, (size_t)m->size);
        }
        if (rc == 0)
                rc = lup_ckpt_mapped_encode(v, n, &obj, &len);
        if (rc == 0)
                rc = s->ckpt.ops->save_write(save, "mapped", obj, len);
        free(obj);
        free(v);
        return rc;
}

static int load_one(struct lupw_session *s, struct lupine_ckpt_load *ld, const struct lup_ckpt_mapped *rec, char *why,
                    size_t whylen)
{
        char name[40];
        uint8_t *obj;
        uint64_t got;
        struct lupw_mirror *m;
        object_name(name, sizeof(name), rec->va);
        int rc = lupine_provider_read_object(s->ckpt.ops, ld, name, 2 * rec->size, 2 * rec->size, &obj, &got);
        if (rc < 0) {
                snprintf(why, whylen, "reading object %s failed: %s", name, strerror(-rc));
                return rc;
        }
        CUresult r = make_mirror(s, rec->va, rec->size, rec->flags, &m);
        if (r != CUDA_SUCCESS) {
                free(obj);
                snprintf(why, whylen, "mapped range %#" PRIx64 " cannot be made again (CUDA error %d)", rec->va,
                         (int)r);
                return -EIO;
        }
        memcpy(m->host, obj, (size_t)rec->size);
        memcpy(m->shadow, obj + rec->size, (size_t)rec->size);
        free(obj);
        return 0;
}

int lupw_mapped_load(struct lupw_session *s, struct lupine_ckpt_load *ld, char *why, size_t whylen)
{
        const struct lup_sealed *kind = &lup_ckpt_mapped_kind;
        struct lup_ckpt_mapped *v = NULL;
        uint32_t n = 0;
        const char *w;
        uint8_t *obj;
        uint64_t size;
        int rc = lupine_provider_read_object(s->ckpt.ops, ld, "mapped", kind->min_len, kind->max_len, &obj, &size);
        if (rc == -ENOENT)
                return 0; /* an older checkpoint: no mapped memory */
        if (rc < 0) {
                snprintf(why, whylen, "reading object mapped failed: %s", strerror(-rc));
                return rc;
        }
        rc = lup_ckpt_mapped_decode(obj, (size_t)size, &v, &n, &w);
        free(obj);
        if (rc < 0) {
                snprintf(why, whylen, "%s", w);
                return rc;
        }
        if (n)
                bind_any(s);
        for (uint32_t i = 0; rc == 0 && i < n; i++)
                rc = load_one(s, ld, &v[i], why, whylen);
        free(v);
        return rc;
}
