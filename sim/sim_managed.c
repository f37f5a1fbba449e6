/* SPDX-License-Identifier: MIT */
/*
 * Managed memory: cuMemAllocManaged (a range of the sim's own pages, as
 * device memory is: host and "device" share it), advice, prefetches and
 * stream attachment. The sim reports concurrent managed access, as an H200
 * does, so everything the driver accepts on such a device is accepted;
 * nothing moves, and what each page was told is remembered for
 * cuMemRangeGetAttribute(s), which answers as the driver documents.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim_internal.h"

#undef cuMemAdvise
#undef cuMemPrefetchAsync
#undef cuStreamAttachMemAsync
CUresult CUDAAPI cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device);
CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream);

/* A location is a CUmemLocationType (0: none) and an id. */
struct sim_page_adv {
        unsigned char read_mostly, pref_type, last_type;
        int pref_id, last_id;
        unsigned accessed_by; /* bit d: device d; bit 31: the host */
};

static size_t page(void)
{
        long p = sysconf(_SC_PAGESIZE);
        return p > 0 ? (size_t)p : 4096;
}

SIM_API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
        struct sim_driver *drv = sim_driver_get();
        uintptr_t start;
        CUresult res;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!dptr || bytesize == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
                return CUDA_ERROR_INVALID_VALUE;
        res = sim_mem_alloc_current(drv, SIM_RANGE_MANAGED, bytesize, flags, &start);
        if (res == CUDA_SUCCESS)
                *dptr = (CUdeviceptr)start;
        return res;
}

/* The pages of [p, p + n) rounded out, in one managed range (lock held
 * exclusive); the range's advice table made if it has none. */
static CUresult managed_pages(struct sim_driver *drv, CUdeviceptr p, size_t n, struct sim_range **ret_r,
                              size_t *ret_first, size_t *ret_end)
{
        struct sim_range *r = sim_range_find(drv, p);
        size_t pg = page();

        if (!r || r->kind != SIM_RANGE_MANAGED || n == 0 || n > r->size - ((uintptr_t)p - r->start))
                return CUDA_ERROR_INVALID_VALUE;
        if (!r->adv && !(r->adv = calloc(r->map_size / pg, sizeof(*r->adv))))
                return CUDA_ERROR_OUT_OF_MEMORY;
        *ret_r = r;
        *ret_first = ((uintptr_t)p - r->start) / pg;
        *ret_end = ((uintptr_t)p - r->start + n + pg - 1) / pg;
        return CUDA_SUCCESS;
}

static CUresult check_location(struct sim_driver *drv, const CUmemLocation *l, bool numa_ok)
{
        switch (l->type) {
        case CU_MEM_LOCATION_TYPE_DEVICE:
                return l->id >= 0 && l->id < drv->device_count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
        case CU_MEM_LOCATION_TYPE_HOST:
                return CUDA_SUCCESS;
        case CU_MEM_LOCATION_TYPE_HOST_NUMA:
        case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
                return numa_ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
        default:
                return CUDA_ERROR_INVALID_VALUE;
        }
}

static CUmemLocation legacy(CUdevice d)
{
        return d == CU_DEVICE_CPU ? (CUmemLocation){ .type = CU_MEM_LOCATION_TYPE_HOST }
                                  : (CUmemLocation){ .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = d };
}

static void advise(struct sim_page_adv *a, CUmem_advise advice, const CUmemLocation *l)
{
        unsigned bit = l->type != CU_MEM_LOCATION_TYPE_DEVICE ? 1u << 31 : l->id < 31 ? 1u << l->id : 0;

        switch (advice) {
        case CU_MEM_ADVISE_SET_READ_MOSTLY:
        case CU_MEM_ADVISE_UNSET_READ_MOSTLY:
                a->read_mostly = advice == CU_MEM_ADVISE_SET_READ_MOSTLY;
                break;
        case CU_MEM_ADVISE_SET_PREFERRED_LOCATION:
                a->pref_type = (unsigned char)l->type;
                a->pref_id =
                        l->type == CU_MEM_LOCATION_TYPE_DEVICE || l->type == CU_MEM_LOCATION_TYPE_HOST_NUMA ? l->id : 0;
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

SIM_API CUresult cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUmemLocation location)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_range *r;
        size_t first, end;
        CUresult res = CUDA_SUCCESS;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (advice < CU_MEM_ADVISE_SET_READ_MOSTLY || advice > CU_MEM_ADVISE_UNSET_ACCESSED_BY)
                return CUDA_ERROR_INVALID_VALUE;
        if (advice == CU_MEM_ADVISE_SET_PREFERRED_LOCATION)
                res = check_location(drv, &location, true);
        else if (advice == CU_MEM_ADVISE_SET_ACCESSED_BY || advice == CU_MEM_ADVISE_UNSET_ACCESSED_BY)
                res = check_location(drv, &location, false);
        if (res != CUDA_SUCCESS)
                return res;
        sim_wrlock(drv);
        res = managed_pages(drv, devPtr, count, &r, &first, &end);
        for (size_t i = first; res == CUDA_SUCCESS && i < end; i++)
                advise(&r->adv[i], advice, &location);
        sim_unlock(drv);
        return res;
}

SIM_API CUresult cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device)
{
        return cuMemAdvise_v2(devPtr, count, advice, legacy(device));
}

SIM_API CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags,
                                       CUstream hStream)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_range *r;
        size_t first, end;
        CUresult res;

        (void)hStream;
        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (flags != 0)
                return CUDA_ERROR_INVALID_VALUE;
        res = check_location(drv, &location, true);
        if (res != CUDA_SUCCESS)
                return res;
        sim_wrlock(drv);
        res = sim_ctx_current(drv, NULL, NULL);
        if (res == CUDA_SUCCESS)
                res = managed_pages(drv, devPtr, count, &r, &first, &end);
        for (size_t i = first; res == CUDA_SUCCESS && i < end; i++) {
                r->adv[i].last_type = (unsigned char)location.type;
                r->adv[i].last_id = location.type == CU_MEM_LOCATION_TYPE_DEVICE ? location.id : 0;
        }
        sim_unlock(drv);
        return res;
}

SIM_API CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream)
{
        return cuMemPrefetchAsync_v2(devPtr, count, legacy(dstDevice), 0, hStream);
}

SIM_API CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream)
{
        return cuMemPrefetchAsync(devPtr, count, dstDevice, hStream);
}

SIM_API CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                            unsigned int flags, CUstream hStream)
{
        return cuMemPrefetchAsync_v2(devPtr, count, location, flags, hStream);
}

SIM_API CUresult cuStreamAttachMemAsync(CUstream hStream, CUdeviceptr dptr, size_t length, unsigned int flags)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_range *r;
        CUresult res = CUDA_SUCCESS;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST && flags != CU_MEM_ATTACH_SINGLE)
                return CUDA_ERROR_INVALID_VALUE;
        if (flags == CU_MEM_ATTACH_SINGLE && (hStream == NULL || hStream == CU_STREAM_LEGACY))
                return CUDA_ERROR_INVALID_VALUE;
        sim_wrlock(drv);
        r = sim_range_find(drv, dptr);
        if (!r || r->kind != SIM_RANGE_MANAGED || r->start != dptr || (length != 0 && length != r->size))
                res = CUDA_ERROR_INVALID_VALUE;
        else
                r->host_flags = flags;
        sim_unlock(drv);
        return res;
}

SIM_API CUresult cuStreamAttachMemAsync_ptsz(CUstream hStream, CUdeviceptr dptr, size_t length, unsigned int flags)
{
        return cuStreamAttachMemAsync(hStream, dptr, length, flags);
}

/* one location attribute: its type, id and the legacy device form */
static int loc_legacy(int type, int id)
{
        return type == CU_MEM_LOCATION_TYPE_DEVICE ? id : type ? CU_DEVICE_CPU : CU_DEVICE_INVALID;
}

static CUresult range_attr(const struct sim_range *r, size_t first, size_t end, CUmem_range_attribute attr, void *data,
                           size_t size)
{
        const struct sim_page_adv *a = r->adv, *f = &a[first];
        bool same_pref = true, same_last = true, rm = true;
        unsigned by = ~0u;
        int v;

        for (size_t i = first; i < end; i++) {
                same_pref = same_pref && a[i].pref_type == f->pref_type && a[i].pref_id == f->pref_id;
                same_last = same_last && a[i].last_type == f->last_type && a[i].last_id == f->last_id;
                rm = rm && a[i].read_mostly;
                by &= a[i].accessed_by;
        }
        int pt = same_pref ? f->pref_type : 0, lt = same_last ? f->last_type : 0;
        switch (attr) {
        case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY:
                v = rm;
                break;
        case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
                v = loc_legacy(pt, f->pref_id);
                break;
        case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
                v = loc_legacy(lt, f->last_id);
                break;
        case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE:
                v = pt ? pt : CU_MEM_LOCATION_TYPE_INVALID;
                break;
        case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID:
                v = pt == CU_MEM_LOCATION_TYPE_DEVICE || pt == CU_MEM_LOCATION_TYPE_HOST_NUMA ? f->pref_id
                                                                                              : CU_DEVICE_INVALID;
                break;
        case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE:
                v = lt ? lt : CU_MEM_LOCATION_TYPE_INVALID;
                break;
        case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID:
                v = lt == CU_MEM_LOCATION_TYPE_DEVICE ? f->last_id : CU_DEVICE_INVALID;
                break;
        case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: {
                int *out = data;
                size_t k = 0, n = size / 4;
                if (size == 0 || size % 4)
                        return CUDA_ERROR_INVALID_VALUE;
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

SIM_API CUresult cuMemRangeGetAttributes(void **data, size_t *dataSizes, CUmem_range_attribute *attributes,
                                         size_t numAttributes, CUdeviceptr devPtr, size_t count)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_range *r;
        size_t first, end;
        CUresult res;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!data || !dataSizes || !attributes || numAttributes == 0)
                return CUDA_ERROR_INVALID_VALUE;
        sim_wrlock(drv); /* the advice table may be made */
        res = managed_pages(drv, devPtr, count, &r, &first, &end);
        for (size_t i = 0; res == CUDA_SUCCESS && i < numAttributes; i++)
                res = data[i] ? range_attr(r, first, end, attributes[i], data[i], dataSizes[i])
                              : CUDA_ERROR_INVALID_VALUE;
        sim_unlock(drv);
        return res;
}

SIM_API CUresult cuMemRangeGetAttribute(void *data, size_t dataSize, CUmem_range_attribute attribute,
                                        CUdeviceptr devPtr, size_t count)
{
        return cuMemRangeGetAttributes(&data, &dataSize, &attribute, 1, devPtr, count);
}
