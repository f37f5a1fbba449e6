/* SPDX-License-Identifier: MIT */
/*
 * Virtual memory management: reservations, physical allocations, mappings,
 * access and POSIX-fd sharing.
 *
 *   reservation  an anonymous PROT_NONE, MAP_NORESERVE region
 *   allocation   a memfd of the allocation's size, sealed against growing
 *                and shrinking so that no fd holder can make a mapping
 *                SIGBUS; charged to its device while it lives
 *   mapping      the memfd mmap()ed MAP_SHARED|MAP_FIXED over part of a
 *                reservation, PROT_NONE until cuMemSetAccess
 *   export       a dup of the memfd; import dups the fd it is given. As
 *                on the real driver, only an allocation cuMemCreate made
 *                with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR requested
 *                exports (a retained handle is the same allocation); one
 *                made without it, or imported, answers INVALID_VALUE (the
 *                importer passes on the fd it has instead)
 *
 * An allocation lives while a handle reference (create, import, retain,
 * minus release) or a mapping holds it. Its bytes live while any fd or
 * mapping anywhere references the memfd, which is what lets a process
 * export, die, and have its successor import the same memory.
 *
 * Each allocation holds one fd: a process making thousands of them needs
 * RLIMIT_NOFILE raised, and gets CUDA_ERROR_OUT_OF_MEMORY until it does.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim_internal.h"

#define MEMFD_PREFIX "lupine-sim-dev"

static const unsigned long long G = SIM_GRANULARITY;

static uint64_t vmm_handle(const struct sim_vmm_alloc *a)
{
        return SIM_TAG_VMM | a->id;
}

/* A live handle: one with an outstanding reference. Lock held. */
static struct sim_vmm_alloc *vmm_lookup(struct sim_driver *drv, CUmemGenericAllocationHandle h)
{
        struct sim_vmm_alloc *a = sim_handle_get(&drv->vmm_allocs, h, SIM_TAG_VMM);

        return a && a->handle_refs > 0 ? a : NULL;
}

/* Frees the allocation once neither handles nor mappings hold it. Lock
 * held exclusive. */
static void vmm_alloc_put(struct sim_driver *drv, struct sim_vmm_alloc *a)
{
        if (a->handle_refs > 0 || a->map_count > 0)
                return;
        (void)sim_svec_remove(&drv->vmm_allocs, a->id);
        sim_mem_refund(&drv->devices[a->dev], a->size);
        close(a->fd);
        free(a);
}

static bool granular(unsigned long long v)
{
        return v % G == 0;
}

static CUresult handle_type_check(unsigned long long types)
{
        const unsigned long long foreign = CU_MEM_HANDLE_TYPE_WIN32 |
                CU_MEM_HANDLE_TYPE_WIN32_KMT | CU_MEM_HANDLE_TYPE_FABRIC;

        if (types & foreign)
                return CUDA_ERROR_NOT_SUPPORTED;
        if (types & ~(unsigned long long)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
                return CUDA_ERROR_INVALID_VALUE;
        return CUDA_SUCCESS;
}

static CUresult prop_check(struct sim_driver *drv, const CUmemAllocationProp *prop)
{
        if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
                return CUDA_ERROR_INVALID_VALUE;
        switch (prop->location.type) {
        case CU_MEM_LOCATION_TYPE_DEVICE:
                break;
        case CU_MEM_LOCATION_TYPE_HOST:
        case CU_MEM_LOCATION_TYPE_HOST_NUMA:
                return CUDA_ERROR_NOT_SUPPORTED;        /* the attributes say so */
        default:
                return CUDA_ERROR_INVALID_VALUE;
        }
        if (!sim_device_at(drv, prop->location.id))
                return CUDA_ERROR_INVALID_DEVICE;
        if (prop->allocFlags.compressionType != CU_MEM_ALLOCATION_COMP_NONE ||
            prop->allocFlags.usage != 0)
                return CUDA_ERROR_NOT_SUPPORTED;
        return handle_type_check((unsigned long long)prop->requestedHandleTypes);
}

/* Puts a PROT_NONE reservation back over [start, start+size). */
static int rereserve(uintptr_t start, size_t size)
{
        void *p = mmap((void *)start, size, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);

        return p == MAP_FAILED ? -errno : 0;
}

/* Whether [ptr, ptr+size) is exactly tiled by whole mappings: no hole, no
 * partial mapping, no cuMemAlloc block. Lock held. */
static CUresult check_tiling(struct sim_driver *drv, CUdeviceptr ptr, size_t size)
{
        uintptr_t cur = (uintptr_t)ptr, end;

        if (size == 0 || !granular(ptr) || !granular(size) || ptr > UINTPTR_MAX ||
            size > UINTPTR_MAX - (uintptr_t)ptr)
                return CUDA_ERROR_INVALID_VALUE;
        end = (uintptr_t)ptr + size;
        while (cur < end) {
                struct sim_range *r = sim_svec_get(&drv->ranges, cur);

                if (!r || r->kind != SIM_RANGE_MAPPING || r->size > end - cur)
                        return CUDA_ERROR_INVALID_VALUE;
                cur += r->size;
        }
        return CUDA_SUCCESS;
}

SIM_API CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                               CUmemAllocationGranularity_flags option)
{
        struct sim_driver *drv = sim_driver_get();
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!granularity)
                return CUDA_ERROR_INVALID_VALUE;
        if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
            option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
                return CUDA_ERROR_INVALID_VALUE;
        r = prop_check(drv, prop);
        if (r != CUDA_SUCCESS)
                return r;
        *granularity = (size_t)G;
        return CUDA_SUCCESS;
}

/* An aligned PROT_NONE region anywhere: over-map, then trim both ends. */
static void *reserve_anywhere(size_t size, size_t align)
{
        size_t total = size + align;
        uintptr_t p, aligned;
        void *m;

        m = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED)
                return NULL;
        p = (uintptr_t)m;
        aligned = (p + align - 1) & ~(uintptr_t)(align - 1);
        if (aligned > p)
                munmap(m, aligned - p);
        if (p + total > aligned + size)
                munmap((void *)(aligned + size), p + total - (aligned + size));
        return (void *)aligned;
}

/* Exactly at addr, or NULL. MAP_FIXED_NOREPLACE never clobbers an existing
 * mapping; kernels before 4.17 treat it as a plain hint, hence the check. */
static void *reserve_at(uintptr_t addr, size_t size)
{
        void *m = mmap((void *)addr, size, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);

        if (m == MAP_FAILED)
                return NULL;
        if ((uintptr_t)m != addr) {
                munmap(m, size);
                return NULL;
        }
        return m;
}

SIM_API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                     CUdeviceptr addr, unsigned long long flags)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_reservation *res;
        void *m = NULL;
        int r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!ptr || size == 0 || !granular(size) || !granular(addr) || flags != 0)
                return CUDA_ERROR_INVALID_VALUE;
        if (alignment & (alignment - 1))
                return CUDA_ERROR_INVALID_VALUE;
        if (alignment < G)
                alignment = (size_t)G;
        if (size > SIZE_MAX - alignment || addr > UINTPTR_MAX - size)
                return CUDA_ERROR_OUT_OF_MEMORY;

        res = calloc(1, sizeof(*res));
        if (!res)
                return CUDA_ERROR_OUT_OF_MEMORY;
        /* The address is a hint, as in the driver: the caller checks. */
        if (addr != 0 && addr % alignment == 0)
                m = reserve_at((uintptr_t)addr, size);
        if (!m)
                m = reserve_anywhere(size, alignment);
        if (!m) {
                free(res);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        res->start = (uintptr_t)m;
        res->size = size;

        sim_wrlock(drv);
        r = sim_svec_insert(&drv->reservations, res->start, res);
        sim_unlock(drv);
        if (r < 0) {
                munmap(m, size);
                free(res);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        *ptr = (CUdeviceptr)res->start;
        return CUDA_SUCCESS;
}

SIM_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_reservation *res;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (ptr > UINTPTR_MAX || size == 0)
                return CUDA_ERROR_INVALID_VALUE;
        sim_wrlock(drv);
        res = sim_svec_get(&drv->reservations, ptr);
        if (!res || res->size != size)
                goto out_invalid;
        /* Still mapped: refuse rather than leak the mappings' references;
         * a test double should flag the missing cuMemUnmap. */
        if (sim_range_overlaps(drv, res->start, res->size))
                goto out_invalid;
        (void)sim_svec_remove(&drv->reservations, res->start);
        sim_unlock(drv);
        munmap((void *)res->start, res->size);
        free(res);
        return CUDA_SUCCESS;

out_invalid:
        sim_unlock(drv);
        return CUDA_ERROR_INVALID_VALUE;
}

/* A sealed memfd of size bytes named for its device; -errno on failure. */
static int memfd_for(int dev, size_t size)
{
        char name[SIM_NAME_MAX];
        int fd;

        snprintf(name, sizeof(name), MEMFD_PREFIX "%d", dev);
        fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        if (ftruncate(fd, (off_t)size) < 0 ||
            fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
                int e = -errno;

                close(fd);
                return e;
        }
        return fd;
}

/* Registers a new allocation around fd (which it takes) and charges its
 * device. On failure fd is closed. */
static CUresult vmm_alloc_add(struct sim_driver *drv, int fd, size_t size, const CUmemAllocationProp *prop,
                              bool imported, CUmemGenericAllocationHandle *ret)
{
        struct sim_vmm_alloc *a = calloc(1, sizeof(*a));
        CUresult r;

        if (!a) {
                close(fd);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        a->fd = fd;
        a->size = size;
        a->dev = prop->location.id;
        a->prop = *prop;
        a->imported = imported;
        a->handle_refs = 1;

        sim_wrlock(drv);
        r = sim_mem_charge(&drv->devices[a->dev], size);
        if (r != CUDA_SUCCESS)
                goto out_free;
        if (sim_handle_register(drv, &drv->vmm_allocs, a, &a->id) < 0) {
                sim_mem_refund(&drv->devices[a->dev], size);
                r = CUDA_ERROR_OUT_OF_MEMORY;
                goto out_free;
        }
        *ret = vmm_handle(a);
        sim_unlock(drv);
        return CUDA_SUCCESS;

out_free:
        sim_unlock(drv);
        close(fd);
        free(a);
        return r;
}

SIM_API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                             const CUmemAllocationProp *prop, unsigned long long flags)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_device *d;
        CUresult r;
        int fd;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!handle || size == 0 || !granular(size) || flags != 0)
                return CUDA_ERROR_INVALID_VALUE;
        r = prop_check(drv, prop);
        if (r != CUDA_SUCCESS)
                return r;
        /* Fail the obvious case before making a memfd; vmm_alloc_add
         * charges for real under the lock. */
        d = sim_device_at(drv, prop->location.id);
        if (size > d->mem_total)
                return CUDA_ERROR_OUT_OF_MEMORY;
        fd = memfd_for(d->ordinal, size);
        if (fd < 0)
                return CUDA_ERROR_OUT_OF_MEMORY;
        return vmm_alloc_add(drv, fd, size, prop, false, handle);
}

SIM_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_vmm_alloc *a;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_wrlock(drv);
        a = vmm_lookup(drv, handle);
        if (!a) {
                sim_unlock(drv);
                return CUDA_ERROR_INVALID_VALUE;
        }
        a->handle_refs--;
        vmm_alloc_put(drv, a);
        sim_unlock(drv);
        return CUDA_SUCCESS;
}

SIM_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                          CUmemGenericAllocationHandle handle, unsigned long long flags)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_reservation *res;
        struct sim_vmm_alloc *a;
        struct sim_range *m;
        uintptr_t start = (uintptr_t)ptr;
        CUresult r = CUDA_ERROR_INVALID_VALUE;
        long i;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        /* The header says offset "currently must be zero", but drivers
         * since 11.x map at a granular offset into the allocation (the
         * bytes at offset appear at ptr); so does the sim. */
        if (size == 0 || !granular(size) || !granular(ptr) || !granular(offset) || flags != 0 || ptr > UINTPTR_MAX ||
            size > UINTPTR_MAX - start)
                return CUDA_ERROR_INVALID_VALUE;
        m = calloc(1, sizeof(*m));
        if (!m)
                return CUDA_ERROR_OUT_OF_MEMORY;

        sim_wrlock(drv);
        a = vmm_lookup(drv, handle);
        if (!a || offset > a->size || size > a->size - offset)
                goto out_free;
        i = sim_svec_find_le(&drv->reservations, start);
        if (i < 0)
                goto out_free;
        res = drv->reservations.items[i].obj;
        if (start - res->start >= res->size || size > res->size - (start - res->start))
                goto out_free;
        /* Only onto VA that is not mapped yet. */
        if (sim_range_overlaps(drv, start, size))
                goto out_free;
        *m = (struct sim_range){
                .kind = SIM_RANGE_MAPPING,
                .start = start,
                .size = size,
                .map_size = size,
                .dev = a->dev,
                .buffer_id = drv->next_buffer_id++,
                .access = CU_MEM_ACCESS_FLAGS_PROT_NONE,
                .backing = a,
        };
        if (sim_svec_insert(&drv->ranges, start, m) < 0) {
                r = CUDA_ERROR_OUT_OF_MEMORY;
                goto out_free;
        }
        /* No access until cuMemSetAccess, as on the device. */
        if (mmap((void *)start, size, PROT_NONE, MAP_SHARED | MAP_FIXED, a->fd, (off_t)offset) ==
            MAP_FAILED) {
                (void)sim_svec_remove(&drv->ranges, start);
                /* A failed MAP_FIXED may already have dropped the old pages. */
                (void)rereserve(start, size);
                r = CUDA_ERROR_OUT_OF_MEMORY;
                goto out_free;
        }
        a->map_count++;
        sim_unlock(drv);
        return CUDA_SUCCESS;

out_free:
        sim_unlock(drv);
        free(m);
        return r;
}

SIM_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
        struct sim_driver *drv = sim_driver_get();
        uintptr_t cur = (uintptr_t)ptr;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        sim_wrlock(drv);
        /* Whole mappings only; all are checked before any is changed. */
        r = check_tiling(drv, ptr, size);
        while (r == CUDA_SUCCESS && cur < (uintptr_t)ptr + size) {
                struct sim_range *m = sim_svec_get(&drv->ranges, cur);
                struct sim_vmm_alloc *a = m->backing;

                cur += m->size;
                /* Replacing the pages is atomic: the VA never becomes free
                 * for another mmap to take. */
                (void)rereserve(m->start, m->size);
                (void)sim_svec_remove(&drv->ranges, m->start);
                a->map_count--;
                vmm_alloc_put(drv, a);
                free(m);
        }
        sim_unlock(drv);
        return r;
}

static int prot_of(unsigned access)
{
        switch (access) {
        case CU_MEM_ACCESS_FLAGS_PROT_READ:
                return PROT_READ;
        case CU_MEM_ACCESS_FLAGS_PROT_READWRITE:
                return PROT_READ | PROT_WRITE;
        default:
                return PROT_NONE;
        }
}

SIM_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
        struct sim_driver *drv = sim_driver_get();
        unsigned access = CU_MEM_ACCESS_FLAGS_PROT_NONE;
        uintptr_t cur = (uintptr_t)ptr;
        CUresult r;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!desc || count == 0 || count > SIM_MAX_DEVICES)
                return CUDA_ERROR_INVALID_VALUE;
        for (size_t k = 0; k < count; k++) {
                if (desc[k].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
                        return CUDA_ERROR_INVALID_VALUE;
                if (!sim_device_at(drv, desc[k].location.id))
                        return CUDA_ERROR_INVALID_DEVICE;
                if (desc[k].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
                    desc[k].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
                    desc[k].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
                        return CUDA_ERROR_INVALID_VALUE;
                /* One host view serves every device: the widest grant wins. */
                access |= (unsigned)desc[k].flags;
        }
        sim_wrlock(drv);
        r = check_tiling(drv, ptr, size);
        while (r == CUDA_SUCCESS && cur < (uintptr_t)ptr + size) {
                struct sim_range *m = sim_svec_get(&drv->ranges, cur);

                if (mprotect((void *)m->start, m->size, prot_of(access)) < 0)
                        r = CUDA_ERROR_OUT_OF_MEMORY;
                else
                        m->access = access;
                cur += m->size;
        }
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_range *m;
        CUresult r = CUDA_SUCCESS;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE)
                return CUDA_ERROR_INVALID_VALUE;
        if (!sim_device_at(drv, location->id))
                return CUDA_ERROR_INVALID_DEVICE;
        sim_rdlock(drv);
        m = sim_range_find(drv, ptr);
        if (!m || m->kind != SIM_RANGE_MAPPING)
                r = CUDA_ERROR_INVALID_VALUE;
        else
                *flags = m->access;
        sim_unlock(drv);
        return r;
}

SIM_API CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                              CUmemAllocationHandleType handleType,
                                              unsigned long long flags)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_vmm_alloc *a;
        CUresult r = CUDA_SUCCESS;
        int fd;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!shareableHandle || flags != 0)
                return CUDA_ERROR_INVALID_VALUE;
        if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
                r = handle_type_check((unsigned long long)handleType);
                return r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_VALUE;
        }
        sim_rdlock(drv);
        a = vmm_lookup(drv, handle);
        if (!a) {
                r = CUDA_ERROR_INVALID_VALUE;
        } else if (!(a->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) ||
                   a->imported) {
                /* Exportable only if asked for at cuMemCreate, and not
                 * again by an importer (driver 580: INVALID_VALUE). */
                r = CUDA_ERROR_INVALID_VALUE;
        } else {
                fd = fcntl(a->fd, F_DUPFD_CLOEXEC, 0);
                if (fd < 0)
                        r = CUDA_ERROR_OUT_OF_MEMORY;   /* out of fds */
                else
                        *(int *)shareableHandle = fd;
        }
        sim_unlock(drv);
        return r;
}

/* The device a memfd of ours was created for, from its name
 * ("/memfd:lupine-sim-dev3 (deleted)"). -ENOENT when /proc cannot say. */
static int memfd_device(int fd)
{
        char path[64], target[128];
        ssize_t n;
        int dev;

        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        n = readlink(path, target, sizeof(target) - 1);
        if (n < 0)
                return -ENOENT;
        target[n] = '\0';
        if (sscanf(target, "/memfd:" MEMFD_PREFIX "%d", &dev) != 1 || dev < 0)
                return -ENOENT;
        return dev;
}

SIM_API CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                                CUmemAllocationHandleType shHandleType)
{
        struct sim_driver *drv = sim_driver_get();
        uintptr_t raw = (uintptr_t)osHandle;
        CUmemAllocationProp prop = {
                .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
        };
        struct stat st;
        int fd, seals, dev;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!handle)
                return CUDA_ERROR_INVALID_VALUE;
        if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
                CUresult r = handle_type_check((unsigned long long)shHandleType);

                return r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_VALUE;
        }
        if (raw > INT32_MAX)
                return CUDA_ERROR_INVALID_VALUE;
        fd = (int)raw;

        /* Only our sealed memfds: anything else could shrink under a
         * mapping, or was never device memory. */
        seals = fcntl(fd, F_GET_SEALS);
        if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
                return CUDA_ERROR_INVALID_VALUE;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
            !granular((unsigned long long)st.st_size))
                return CUDA_ERROR_INVALID_VALUE;
        dev = memfd_device(fd);
        if (dev >= 0 && !sim_device_at(drv, dev))
                return CUDA_ERROR_INVALID_DEVICE;
        prop.location.id = dev >= 0 ? dev : 0;

        /* The caller keeps its fd; the allocation holds its own. */
        fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
        if (fd < 0)
                return CUDA_ERROR_OUT_OF_MEMORY;
        return vmm_alloc_add(drv, fd, (size_t)st.st_size, &prop, true, handle);
}

SIM_API CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                        CUmemGenericAllocationHandle handle)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_vmm_alloc *a;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!prop)
                return CUDA_ERROR_INVALID_VALUE;
        sim_rdlock(drv);
        a = vmm_lookup(drv, handle);
        if (a)
                *prop = a->prop;
        sim_unlock(drv);
        return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
        struct sim_driver *drv = sim_driver_get();
        struct sim_range *m;

        if (!drv)
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!handle)
                return CUDA_ERROR_INVALID_VALUE;
        sim_wrlock(drv);
        m = sim_range_find(drv, (uintptr_t)addr);
        if (!m || m->kind != SIM_RANGE_MAPPING) {
                sim_unlock(drv);
                return CUDA_ERROR_INVALID_VALUE;
        }
        /* Same handle value as at creation, one more reference to release. */
        m->backing->handle_refs++;
        *handle = vmm_handle(m->backing);
        sim_unlock(drv);
        return CUDA_SUCCESS;
}
