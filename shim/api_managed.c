/* SPDX-License-Identifier: MIT */
/*
 * Managed (unified) memory: cuMemAllocManaged and the calls around it.
 *
 * lupine's managed memory is a mapped range made at allocation
 * (docs/managed.md): pages of this process, at the address the program
 * gets, with a mirror on the GPU host at the same address that
 * api_mapped.c keeps in step. The device is reported without concurrent
 * managed access (lupc_managed_device_attr), so, as CUDA specifies for
 * such devices, host and GPU see each other's writes at synchronisation
 * points: api_mapped.c pushes the host's changes before every call and
 * pulls the GPU's after every synchronous one. Managed ranges are left out
 * of its background poller: the program may not touch them while the GPU
 * works.
 *
 * Advice, prefetches and stream attachment move nothing (the data has one
 * home on each side); they are checked as the driver checks them and
 * remembered per page, so that cuMemRangeGetAttribute(s) answers what the
 * driver would. This state lives only here: the program's process outlives
 * every restart of the daemon, so it needs no checkpoint.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client.h"
#include "rangemap.h"
#include "shim_gen.h"

#define EXPORT __attribute__((visibility("default")))

/* cuda.h maps these names to their newest ABI; the old ABIs are exported too. */
#undef cuMemAdvise
#undef cuMemPrefetchAsync
#undef cuStreamAttachMemAsync
CUresult CUDAAPI cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device);
CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream);

#define MAX_MANAGED (1u << 16) /* managed allocations per process */

/* What one page was told; a location is a CUmemLocationType (0: none) and an id. */
struct page_adv {
        uint8_t read_mostly, pref_type, last_type, pad;
        int32_t pref_id, last_id;
        uint32_t accessed_by; /* bit d: device d; bit 31: the host */
};

struct managed {
        uint64_t base, size;
        uint64_t ctx;
        int device;
        unsigned int attach;  /* CUmemAttach_flags */
        struct page_adv *adv; /* one per page, made at the first advice or prefetch */
};

static pthread_mutex_t mglock = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint n_managed;      /* allocations: copies and pointer queries look only when there are any */
static struct lup_rangemap ranges; /* a = index in slots */
static struct managed *slots[MAX_MANAGED];

static uint64_t page_size(void)
{
        long p = sysconf(_SC_PAGESIZE);
        return p > 0 ? (uint64_t)p : 4096;
}

/* mglock held */
static struct managed *find_locked(uint64_t p)
{
        struct lup_range r;
        return lup_rangemap_find(&ranges, p, &r) ? slots[r.a] : NULL;
}

bool lupc_managed_find(uint64_t p, struct lupc_managed_info *ret)
{
        if (atomic_load_explicit(&n_managed, memory_order_relaxed) == 0)
                return false;
        pthread_mutex_lock(&mglock);
        struct managed *m = find_locked(p);
        if (m && ret)
                *ret = (struct lupc_managed_info){
                        .base = m->base, .size = m->size, .ctx = m->ctx, .device = m->device
                };
        pthread_mutex_unlock(&mglock);
        return m != NULL;
}

bool lupc_managed_device_attr(CUdevice_attribute a, int *ret)
{
        switch (a) {
        case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
                *ret = 1;
                return true;
        /* the contract: host and GPU meet at synchronisation points only */
        case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
        case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS:
        case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES:
        case CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST:
        case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED:
        case CU_DEVICE_ATTRIBUTE_ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED:
                *ret = 0;
                return true;
        default:
                return false;
        }
}

/* ---- allocation */

/* mglock held */
static struct managed *slot_remove_locked(uint64_t base)
{
        struct lup_range r;
        if (lup_rangemap_remove(&ranges, base, &r) < 0)
                return NULL;
        struct managed *m = slots[r.a];
        slots[r.a] = NULL;
        atomic_fetch_sub(&n_managed, 1);
        return m;
}

static int slot_add(struct managed *m)
{
        static unsigned next;
        for (unsigned k = 0; k < MAX_MANAGED; k++) {
                unsigned i = (next + k) % MAX_MANAGED;
                if (slots[i])
                        continue;
                struct lup_range r = { .base = m->base, .size = m->size, .a = i };
                int rc = lup_rangemap_add(&ranges, &r);
                if (rc < 0)
                        return rc;
                slots[i] = m;
                next = i + 1;
                atomic_fetch_add(&n_managed, 1);
                return 0;
        }
        return -ENOSPC;
}

EXPORT CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
        struct lupc_ctx_info info;

        if (!dptr || bytesize == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        uint64_t ctx = lupc_ctx_current();
        if (!ctx || !lupc_ctx_lookup(ctx, &info))
                return CUDA_ERROR_INVALID_CONTEXT;
        if (bytesize > LUP_MAX_COPY)
                return CUDA_ERROR_OUT_OF_MEMORY;
        /* its own pages: a mirror never shares a page with another range */
        uint64_t len = (bytesize + page_size() - 1) & ~(page_size() - 1);
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        struct managed *m = calloc(1, sizeof(*m));
        if (p == MAP_FAILED || !m) {
                if (p != MAP_FAILED)
                        munmap(p, len);
                free(m);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        *m = (struct managed){
                .base = (uint64_t)(uintptr_t)p, .size = bytesize, .ctx = ctx, .device = info.device, .attach = flags
        };
        pthread_mutex_lock(&mglock);
        int rc = slot_add(m);
        pthread_mutex_unlock(&mglock);
        CUresult r = rc < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
        if (r == CUDA_SUCCESS && lupc_host_track(m->base, bytesize, 0, LUPC_HOST_MANAGED) < 0)
                r = CUDA_ERROR_OUT_OF_MEMORY;
        else if (r == CUDA_SUCCESS &&
                 (r = lupc_mapped_managed(m->base, bytesize, flags == CU_MEM_ATTACH_GLOBAL)) != CUDA_SUCCESS) {
                lupc_mapped_forget(m->base);
                lupc_host_untrack(m->base, LUPC_HOST_MANAGED);
        }
        if (r != CUDA_SUCCESS) {
                pthread_mutex_lock(&mglock);
                if (rc == 0)
                        slot_remove_locked(m->base);
                pthread_mutex_unlock(&mglock);
                munmap(p, len);
                free(m);
                return r;
        }
        *dptr = m->base;
        return CUDA_SUCCESS;
}

CUresult lupc_managed_free(uint64_t p)
{
        pthread_mutex_lock(&mglock);
        struct managed *m = find_locked(p);
        if (m && m->base == p)
                slot_remove_locked(p);
        pthread_mutex_unlock(&mglock);
        if (!m)
                return LUPC_NOT_MANAGED;
        if (m->base != p)
                return CUDA_ERROR_INVALID_VALUE; /* the driver frees only from the start */
        /* the mirror goes first: the worker waits for the GPU's work on it */
        lupc_mapped_forget(m->base);
        lupc_host_untrack(m->base, LUPC_HOST_MANAGED);
        munmap((void *)(uintptr_t)m->base, (m->size + page_size() - 1) & ~(page_size() - 1));
        free(m->adv);
        free(m);
        return CUDA_SUCCESS;
}

void lupc_managed_drop_ctx(uint64_t ctx)
{
        size_t n = 0;
        uint64_t *bases = NULL;
        pthread_mutex_lock(&mglock);
        for (size_t i = 0; i < ranges.n; i++)
                n += slots[ranges.r[i].a]->ctx == ctx;
        bases = n ? calloc(n, sizeof(*bases)) : NULL;
        for (size_t i = 0, k = 0; bases && i < ranges.n; i++)
                if (slots[ranges.r[i].a]->ctx == ctx)
                        bases[k++] = ranges.r[i].base;
        pthread_mutex_unlock(&mglock);
        for (size_t i = 0; bases && i < n; i++)
                (void)lupc_managed_free(bases[i]);
        free(bases);
}

/* The driver's booleans are 4 bytes wide (api_mem.c). */
static void put_bool(void *data, bool v)
{
        *(unsigned int *)data = v;
}

CUresult lupc_managed_pointer_attr(void *data, CUpointer_attribute attribute, uint64_t ptr,
                                   const struct lupc_managed_info *mi)
{
        switch (attribute) {
        case CU_POINTER_ATTRIBUTE_CONTEXT:
                *(CUcontext *)data = (CUcontext)(uintptr_t)mi->ctx;
                return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: /* the driver's answer for managed memory */
                *(unsigned int *)data = CU_MEMORYTYPE_DEVICE;
                return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: /* one address on both sides */
                *(CUdeviceptr *)data = ptr;
                return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_HOST_POINTER:
                *(void **)data = (void *)(uintptr_t)ptr;
                return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        case CU_POINTER_ATTRIBUTE_MAPPED:
                put_bool(data, true);
                return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
                put_bool(data, false);
                return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_BUFFER_ID:
                *(unsigned long long *)data = mi->base;
                return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
                *(int *)data = mi->device;
                return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
                *(CUdeviceptr *)data = mi->base;
                return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
                *(size_t *)data = (size_t)mi->size;
                return CUDA_SUCCESS;
        default:
                return CUDA_ERROR_NOT_SUPPORTED;
        }
}

/* ---- locations, advice and prefetches */

/* A location as the driver checks it: devices this program can see, or
 * the host (a NUMA node of it). */
static CUresult location_check(const CUmemLocation *loc, bool numa_ok)
{
        switch (loc->type) {
        case CU_MEM_LOCATION_TYPE_DEVICE:
                return lupc_device(loc->id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
        case CU_MEM_LOCATION_TYPE_HOST:
                return CUDA_SUCCESS;
        case CU_MEM_LOCATION_TYPE_HOST_NUMA:
        case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
                return numa_ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
        default:
                return CUDA_ERROR_INVALID_VALUE;
        }
}

static CUmemLocation legacy_location(CUdevice d)
{
        return d == CU_DEVICE_CPU ? (CUmemLocation){ .type = CU_MEM_LOCATION_TYPE_HOST }
                                  : (CUmemLocation){ .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = d };
}

/* The pages of [p, p + n), rounded out to whole pages, inside one managed
 * allocation (mglock held); its advice table made if it has none. */
static CUresult pages_locked(uint64_t p, size_t n, struct managed **ret_m, uint64_t *ret_first, uint64_t *ret_end)
{
        struct managed *m = find_locked(p);
        if (!m || n == 0 || n > m->size - (p - m->base))
                return CUDA_ERROR_INVALID_VALUE;
        uint64_t pg = page_size(), pages = (m->size + pg - 1) / pg;
        if (!m->adv && !(m->adv = calloc(pages, sizeof(*m->adv))))
                return CUDA_ERROR_OUT_OF_MEMORY;
        *ret_m = m;
        *ret_first = (p - m->base) / pg;
        *ret_end = (p - m->base + n + pg - 1) / pg;
        return CUDA_SUCCESS;
}

static void advise_page(struct page_adv *a, CUmem_advise advice, const CUmemLocation *loc)
{
        uint32_t bit = loc->type != CU_MEM_LOCATION_TYPE_DEVICE ? 1u << 31 : loc->id < 31 ? 1u << loc->id : 0;
        switch (advice) {
        case CU_MEM_ADVISE_SET_READ_MOSTLY:
        case CU_MEM_ADVISE_UNSET_READ_MOSTLY:
                a->read_mostly = advice == CU_MEM_ADVISE_SET_READ_MOSTLY;
                break;
        case CU_MEM_ADVISE_SET_PREFERRED_LOCATION:
                a->pref_type = (uint8_t)loc->type;
                a->pref_id = loc->type == CU_MEM_LOCATION_TYPE_DEVICE || loc->type == CU_MEM_LOCATION_TYPE_HOST_NUMA
                                     ? loc->id
                                     : 0;
                break;
        case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
                a->pref_type = 0;
                break;
        case CU_MEM_ADVISE_SET_ACCESSED_BY:
                a->accessed_by |= bit;
                break;
        default:
                a->accessed_by &= ~bit;
                break;
        }
}

EXPORT CUresult CUDAAPI cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUmemLocation location)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (advice < CU_MEM_ADVISE_SET_READ_MOSTLY || advice > CU_MEM_ADVISE_UNSET_ACCESSED_BY)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = CUDA_SUCCESS;
        /* the location matters only to the advice that names one */
        if (advice == CU_MEM_ADVISE_SET_PREFERRED_LOCATION)
                r = location_check(&location, true);
        else if (advice == CU_MEM_ADVISE_SET_ACCESSED_BY || advice == CU_MEM_ADVISE_UNSET_ACCESSED_BY)
                r = location_check(&location, false);
        if (r != CUDA_SUCCESS)
                return r;
        struct managed *m;
        uint64_t first, end;
        pthread_mutex_lock(&mglock);
        r = pages_locked(devPtr, count, &m, &first, &end);
        for (uint64_t i = first; r == CUDA_SUCCESS && i < end; i++)
                advise_page(&m->adv[i], advice, &location);
        pthread_mutex_unlock(&mglock);
        return r;
}

EXPORT CUresult CUDAAPI cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device)
{
        return cuMemAdvise_v2(devPtr, count, advice, legacy_location(device));
}

/* The prefetch moves nothing: the GPU reads the mirror, the host its own
 * pages, and the next synchronisation brings each side the other's writes.
 * It is remembered for LAST_PREFETCH_LOCATION. */
EXPORT CUresult CUDAAPI cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                              unsigned int flags, CUstream hStream)
{
        (void)hStream;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (flags != 0)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_ctx_current())
                return CUDA_ERROR_INVALID_CONTEXT;
        CUresult r = location_check(&location, true);
        if (r != CUDA_SUCCESS)
                return r;
        struct managed *m;
        uint64_t first, end;
        pthread_mutex_lock(&mglock);
        r = pages_locked(devPtr, count, &m, &first, &end);
        for (uint64_t i = first; r == CUDA_SUCCESS && i < end; i++) {
                m->adv[i].last_type = (uint8_t)location.type;
                m->adv[i].last_id = location.type == CU_MEM_LOCATION_TYPE_DEVICE ? location.id : 0;
        }
        pthread_mutex_unlock(&mglock);
        return r;
}

EXPORT CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream)
{
        return cuMemPrefetchAsync_v2(devPtr, count, legacy_location(dstDevice), 0, hStream);
}

EXPORT CUresult CUDAAPI cuStreamAttachMemAsync(CUstream hStream, CUdeviceptr dptr, size_t length, unsigned int flags)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST && flags != CU_MEM_ATTACH_SINGLE)
                return CUDA_ERROR_INVALID_VALUE;
        /* "illegal to attach singly to the NULL stream" */
        uint64_t sid = lupc_stream_id(hStream, 0);
        if (flags == CU_MEM_ATTACH_SINGLE && (sid == 0 || sid == (uint64_t)(uintptr_t)CU_STREAM_LEGACY))
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&mglock);
        struct managed *m = find_locked(dptr);
        CUresult r = CUDA_SUCCESS;
        /* managed memory: the whole allocation (length 0 or its size) */
        if (!m || m->base != dptr || (length != 0 && length != m->size))
                r = CUDA_ERROR_INVALID_VALUE;
        else
                m->attach = flags;
        pthread_mutex_unlock(&mglock);
        /* memory attached to the host or one stream may be written while
         * kernels run elsewhere: always pushed */
        if (r == CUDA_SUCCESS)
                lupc_mapped_managed_attach(dptr, flags == CU_MEM_ATTACH_GLOBAL);
        return r;
}

/* ---- range attributes */

/* One attribute over pages [first, end) of m (mglock held). */
static CUresult range_attr(const struct managed *m, uint64_t first, uint64_t end, CUmem_range_attribute attr,
                           void *data, size_t size)
{
        static const struct page_adv none;
        const struct page_adv *a = m->adv;
        bool same_pref = true, same_last = true, read_mostly = true;
        uint32_t by = UINT32_MAX;
        for (uint64_t i = first; i < end; i++) {
                const struct page_adv *p = a ? &a[i] : &none, *q = a ? &a[first] : &none;
                same_pref = same_pref && p->pref_type == q->pref_type && p->pref_id == q->pref_id;
                same_last = same_last && p->last_type == q->last_type && p->last_id == q->last_id;
                read_mostly = read_mostly && p->read_mostly;
                by &= p->accessed_by;
        }
        const struct page_adv *f = a ? &a[first] : &none;
        int pref_type = same_pref ? f->pref_type : 0, last_type = same_last ? f->last_type : 0;
        int pref_id = f->pref_id, last_id = f->last_id;
        /* the legacy attributes: a device, CU_DEVICE_CPU for any host location, else CU_DEVICE_INVALID */
        int pref_dev = pref_type == CU_MEM_LOCATION_TYPE_DEVICE ? pref_id
                       : pref_type                              ? CU_DEVICE_CPU
                                                                : CU_DEVICE_INVALID;
        int last_dev = last_type == CU_MEM_LOCATION_TYPE_DEVICE ? last_id
                       : last_type                              ? CU_DEVICE_CPU
                                                                : CU_DEVICE_INVALID;
        int v;
        switch (attr) {
        case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY:
                v = read_mostly;
                break;
        case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
                v = pref_dev;
                break;
        case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
                v = last_dev;
                break;
        case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE:
                v = pref_type ? pref_type : CU_MEM_LOCATION_TYPE_INVALID;
                break;
        case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID:
                v = pref_type == CU_MEM_LOCATION_TYPE_DEVICE || pref_type == CU_MEM_LOCATION_TYPE_HOST_NUMA
                            ? pref_id
                            : CU_DEVICE_INVALID;
                break;
        case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE:
                v = last_type ? last_type : CU_MEM_LOCATION_TYPE_INVALID;
                break;
        case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID:
                v = last_type == CU_MEM_LOCATION_TYPE_DEVICE ? last_id : CU_DEVICE_INVALID;
                break;
        case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: {
                if (size == 0 || size % 4)
                        return CUDA_ERROR_INVALID_VALUE;
                int *out = data;
                size_t k = 0, n = size / 4;
                for (int d = 0; d < 31 && k < n; d++)
                        if (by & (1u << d))
                                out[k++] = d;
                if ((by & (1u << 31)) && k < n)
                        out[k++] = CU_DEVICE_CPU;
                while (k < n)
                        out[k++] = CU_DEVICE_INVALID;
                return CUDA_SUCCESS;
        }
        default:
                return CUDA_ERROR_INVALID_VALUE;
        }
        if (size != 4)
                return CUDA_ERROR_INVALID_VALUE;
        memcpy(data, &v, 4);
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemRangeGetAttributes(void **data, size_t *dataSizes, CUmem_range_attribute *attributes,
                                                size_t numAttributes, CUdeviceptr devPtr, size_t count)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!data || !dataSizes || !attributes || numAttributes == 0)
                return CUDA_ERROR_INVALID_VALUE;
        struct managed *m;
        uint64_t first, end;
        pthread_mutex_lock(&mglock);
        CUresult r = pages_locked(devPtr, count, &m, &first, &end);
        for (size_t i = 0; r == CUDA_SUCCESS && i < numAttributes; i++)
                r = data[i] ? range_attr(m, first, end, attributes[i], data[i], dataSizes[i])
                            : CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_unlock(&mglock);
        return r;
}

EXPORT CUresult CUDAAPI cuMemRangeGetAttribute(void *data, size_t dataSize, CUmem_range_attribute attribute,
                                               CUdeviceptr devPtr, size_t count)
{
        return cuMemRangeGetAttributes(&data, &dataSize, &attribute, 1, devPtr, count);
}
