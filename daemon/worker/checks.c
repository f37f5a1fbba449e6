/* SPDX-License-Identifier: MIT */
/*
 * The checks the generated decoders call on every argument that names
 * something (device pointers, ranges, devices, contexts; streams are
 * handles, resolved in handles.c), and context binding: every call runs in
 * the context the client named, made current only when it changes.
 */
#define LUP_LOG_CAT LUP_LOGC_GPU
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "worker/session.h"

const struct lupw_backend *lupw_be(struct lupw_session *s)
{
        return &s->be.fn;
}

void lupw_set_why(struct lupw_session *s, const char *why)
{
        if (!s->why)
                s->why = why;
}

/* ---- checks used by the generated decoders */

/* Module globals the client asked for: real driver addresses outside the
 * arena that the client may copy to and from. */
bool lupw_find_global(const struct lupw_session *s, uint64_t p, struct lup_range *ret)
{
        return lup_rangemap_find(&s->obj.globals, p, ret);
}

uint64_t lupw_xlate(const struct lupw_session *s, uint64_t p)
{
        struct lup_range r;
        if (s->obj.xlate.n && lup_rangemap_find(&s->obj.xlate, p, &r))
                return r.a + (p - r.base);
        return p;
}

int lupw_check_devptr(struct lupw_session *s, uint64_t p)
{
        if (lupw_find_global(s, p, NULL))
                return 0;
        if (s->mapped.ranges.n && lup_rangemap_find(&s->mapped.ranges, p, NULL))
                return 0; /* mapped host memory's mirror (worker/mapped.c) */
        /* The shim checks every pointer against its own shadow first, so a
         * pointer outside the arena can only come from a broken or hostile
         * client: that is a protocol violation, not a CUDA error. */
        if (!arena_contains(&s->mem.arena, p)) {
                lupw_set_why(s, "device pointer outside the session's arena");
                return -EBADMSG;
        }
        return 0;
}

/* The client's VMM mappings (worker/vmm.c keeps them; the lookups are here
 * so that range checks need nothing of vmm.c). */
size_t lupw_vmm_map_index(const struct lupw_session *s, uint64_t p)
{
        size_t lo = 0, hi = s->vmm.n_maps;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                const struct lupw_vmm_map *m = &s->vmm.maps[mid];
                if (m->addr + m->size <= p)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

bool lupw_vmm_covers(const struct lupw_session *s, uint64_t p, uint64_t n)
{
        size_t i = lupw_vmm_map_index(s, p);
        uint64_t at = p;
        if (p + n < p)
                return false;
        while (i < s->vmm.n_maps && s->vmm.maps[i].addr <= at) {
                at = s->vmm.maps[i].addr + s->vmm.maps[i].size;
                if (at >= p + n)
                        return true;
                i++;
        }
        return false;
}

CUresult lupw_check_range(struct lupw_session *s, uint64_t p, uint64_t count, uint64_t mul)
{
        uint64_t n;
        if (__builtin_mul_overflow(count, mul, &n) || n > LUP_MAX_COPY)
                return CUDA_ERROR_INVALID_VALUE;
        if (n == 0)
                return CUDA_SUCCESS;
        const struct arena_alloc *a = arena_find(&s->mem.arena, p);
        if (a)
                return n > a->size - (p - a->addr) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
        if (s->vmm.n_maps && lupw_vmm_covers(s, p, n)) /* the client's own mappings (worker/vmm.c) */
                return CUDA_SUCCESS;
        struct lup_range g;
        if (s->mapped.ranges.n && lup_rangemap_find(&s->mapped.ranges, p, &g)) /* worker/mapped.c */
                return n > g.size - (p - g.base) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
        if (!lupw_find_global(s, p, &g) || n > g.size - (p - g.base))
                return CUDA_ERROR_INVALID_VALUE;
        return CUDA_SUCCESS;
}

/* A 2-D range (lup_span2d): the span from the first byte of its first row
 * to the last of its last, as the shim checked it. */
CUresult lupw_check_range2d(struct lupw_session *s, uint64_t p, uint64_t count, uint64_t mul, uint64_t pitch,
                            uint64_t rows)
{
        uint64_t span;
        if (lup_span2d(count, mul, pitch, rows, &span) < 0)
                return CUDA_ERROR_INVALID_VALUE;
        return span ? lupw_check_range(s, p, span, 1) : CUDA_SUCCESS;
}

CUresult lupw_device(struct lupw_session *s, int32_t ordinal, CUdevice *ret)
{
        if (ordinal < 0 || ordinal >= s->n_devices)
                return CUDA_ERROR_INVALID_DEVICE;
        *ret = ordinal;
        return CUDA_SUCCESS;
}

struct lupw_ctx_slot *lupw_find_ctx(struct lupw_session *s, uint64_t id)
{
        for (int i = 0; i < s->ctx.n_slots; i++)
                if (s->ctx.slots[i].id == id)
                        return &s->ctx.slots[i];
        return NULL;
}

static CUresult resolve_ctx(struct lupw_session *s, uint64_t id, CUcontext *ret, int *ret_dev)
{
        int dev = lup_primary_ctx_device(id);
        if (dev >= 0) {
                if (dev >= s->n_devices || !s->ctx.client_primary[dev])
                        return CUDA_ERROR_INVALID_CONTEXT;
                *ret = s->ctx.primary[dev];
                *ret_dev = dev;
                return CUDA_SUCCESS;
        }
        struct lupw_ctx_slot *c = lupw_find_ctx(s, id);
        if (!c)
                return CUDA_ERROR_INVALID_CONTEXT;
        *ret = c->real;
        *ret_dev = c->device;
        return CUDA_SUCCESS;
}

CUresult lupw_ctx(struct lupw_session *s, uint64_t id, CUcontext *ret)
{
        int dev;
        return resolve_ctx(s, id, ret, &dev);
}

CUresult lupw_bind_ctx(struct lupw_session *s, uint64_t id)
{
        CUcontext real;
        int dev;

        if (id == s->ctx.bound_id && id != 0)
                return CUDA_SUCCESS;
        CUresult r = resolve_ctx(s, id, &real, &dev);
        if (r != CUDA_SUCCESS)
                return r;
        r = s->be.fn.cuCtxSetCurrent(real);
        if (r != CUDA_SUCCESS)
                return r;
        s->ctx.bound_id = id;
        s->ctx.bound_device = dev;
        return CUDA_SUCCESS;
}
