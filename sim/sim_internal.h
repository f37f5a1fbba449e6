/* SPDX-License-Identifier: MIT */
/*
 * libcuda-sim: a simulated CUDA driver for machines without a GPU.
 *
 * Host memory stands in for device memory: a device pointer is the host
 * address of an mmap()ed region of this process, so copies are memcpy()
 * after the range has been checked against the live allocations. The
 * library is a test double for the hardware only; it never depends on the
 * rest of lupine.
 *
 * Error convention: the sim's internal error enum is CUresult itself, since
 * every failure maps one-to-one onto a driver code. Helpers that wrap a
 * system call return -errno, as elsewhere in lupine, and the exported
 * function converts.
 *
 * Locking: one process-wide rwlock guards every registry. Copies and
 * queries hold it shared for the whole operation, so a concurrent free or
 * unmap cannot pull memory out from under a memcpy(); everything that adds
 * or removes an object holds it exclusive. No function takes the lock
 * twice, and exported functions never call each other with it held.
 */
#ifndef LUPINE_SIM_INTERNAL_H
#define LUPINE_SIM_INTERNAL_H

/* Declares the versioned *and* the legacy prototypes, exactly as the real
 * driver is built, so that the compiler checks every exported signature. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_API __attribute__((visibility("default")))

/* ---- limits: every resource a caller can grow has one ---- */
#define SIM_MAX_DEVICES         16
#define SIM_DEFAULT_DEVICES     1
#define SIM_DEFAULT_MEM_MB      16384ULL
#define SIM_MAX_MEM_MB          (16ULL << 20)  /* 16 TiB per device */
#define SIM_MAX_CONTEXTS        1024           /* created with cuCtxCreate */
#define SIM_MAX_CTX_STACK       64             /* per thread */
#define SIM_MAX_STREAMS         4096
#define SIM_MAX_RANGES          (1u << 20)     /* cuMemAlloc blocks + VMM mappings */
#define SIM_MAX_RESERVATIONS    4096
#define SIM_MAX_VMM_ALLOCS      65536
#define SIM_GRANULARITY         (2ULL << 20)   /* VMM minimum and recommended */
#define SIM_NAME_MAX            64

/* Handles are tagged counters, not pointers: a stale handle never aliases
 * a new object (until 2^40 objects later) and is never dereferenced. */
#define SIM_ID_BITS     44
#define SIM_TAG(t)      ((uint64_t)(t) << SIM_ID_BITS)
#define SIM_TAG_MASK    SIM_TAG(0xfff)
#define SIM_ID_MASK     (SIM_TAG(1) - 1)
#define SIM_TAG_CTX     SIM_TAG(0x5c1)
#define SIM_TAG_STREAM  SIM_TAG(0x5c2)
#define SIM_TAG_VMM     SIM_TAG(0x5c3)

/* ---- sorted vector of (key, obj): handle tables and address maps ---- */
struct sim_svec_entry {
        uint64_t key;
        void *obj;
};

struct sim_svec {
        struct sim_svec_entry *items;
        size_t n;
        size_t cap;
        size_t max;     /* hard limit on n */
};

/* Inserts keeping the order by key. -EEXIST for a duplicate key, -ENOSPC
 * past max, -ENOMEM when growing fails. */
int sim_svec_insert(struct sim_svec *v, uint64_t key, void *obj);
/* Index of the last entry whose key is <= key, or -1. */
long sim_svec_find_le(const struct sim_svec *v, uint64_t key);
/* The object stored under exactly key, or NULL. */
void *sim_svec_get(const struct sim_svec *v, uint64_t key);
void sim_svec_remove_at(struct sim_svec *v, size_t idx);
/* Removes the entry with exactly key; -ENOENT when absent. */
int sim_svec_remove(struct sim_svec *v, uint64_t key);

/* ---- objects ---- */
struct sim_ctx {
        uint64_t id;
        int dev;
        unsigned flags;
        bool primary;
        /* primary contexts only */
        bool active;
        unsigned refcount;
};

struct sim_stream {
        uint64_t id;
        CUcontext ctx;
        unsigned flags;
};

/* One physical VMM allocation: a sealed memfd, from cuMemCreate or an
 * import. It lives while a handle reference or a mapping holds it. */
struct sim_vmm_alloc {
        uint64_t id;
        int fd;
        size_t size;
        int dev;
        CUmemAllocationProp prop;
        unsigned handle_refs;   /* create/import/retain minus release */
        unsigned map_count;
};

enum sim_range_kind {
        SIM_RANGE_ALLOC,        /* cuMemAlloc */
        SIM_RANGE_MAPPING,      /* cuMemMap onto a reservation */
};

/* A range of device addresses that may be read or written. */
struct sim_range {
        enum sim_range_kind kind;
        uintptr_t start;
        size_t size;            /* what the caller asked for; checked on access */
        size_t map_size;        /* what is mmap()ed and charged */
        int dev;
        uint64_t buffer_id;
        unsigned access;        /* CU_MEM_ACCESS_FLAGS_PROT_* */
        CUcontext ctx;          /* owner of a SIM_RANGE_ALLOC */
        struct sim_vmm_alloc *backing;  /* SIM_RANGE_MAPPING */
};

struct sim_reservation {
        uintptr_t start;
        size_t size;
};

struct sim_device {
        int ordinal;
        size_t mem_total;
        size_t mem_used;        /* live cuMemAlloc + VMM allocations */
        struct sim_ctx primary; /* its flags persist while inactive */
};

struct sim_driver {
        pthread_rwlock_t lock;
        int device_count;
        struct sim_device devices[SIM_MAX_DEVICES];
        struct sim_svec contexts;       /* id -> sim_ctx (created ones) */
        struct sim_svec streams;        /* id -> sim_stream */
        struct sim_svec vmm_allocs;     /* id -> sim_vmm_alloc */
        struct sim_svec ranges;         /* start -> sim_range */
        struct sim_svec reservations;   /* start -> sim_reservation */
        uint64_t next_id;               /* shared by all handle kinds */
        uint64_t next_buffer_id;
};

/* ---- sim_driver.c ---- */
/* The driver once cuInit succeeded, else NULL. Exported functions call it
 * first and return CUDA_ERROR_NOT_INITIALIZED on NULL. */
struct sim_driver *sim_driver_get(void);
void sim_rdlock(struct sim_driver *drv);
void sim_wrlock(struct sim_driver *drv);
void sim_unlock(struct sim_driver *drv);
uint64_t sim_next_id(struct sim_driver *drv);
/* NULL for an ordinal outside [0, device_count). */
struct sim_device *sim_device_at(struct sim_driver *drv, CUdevice dev);
/* Charges size bytes to the device, CUDA_ERROR_OUT_OF_MEMORY past its
 * limit; refund gives them back. Called with the lock held exclusive. */
CUresult sim_mem_charge(struct sim_device *d, size_t size);
void sim_mem_refund(struct sim_device *d, size_t size);

static inline uint64_t sim_handle_id(uint64_t handle, uint64_t tag)
{
        return (handle & SIM_TAG_MASK) == tag ? (handle & SIM_ID_MASK) : 0;
}

/* ---- sim_ctx.c ---- */
/* The live context behind a handle: a created context or an active
 * primary one. NULL when the handle is unknown, destroyed or inactive. */
struct sim_ctx *sim_ctx_lookup(struct sim_driver *drv, CUcontext h);
/* The calling thread's current context, checked against the registry.
 * CUDA_ERROR_INVALID_CONTEXT when there is none, CUDA_ERROR_CONTEXT_IS_DESTROYED
 * when it was destroyed on another thread. Lock held (shared is enough). */
CUresult sim_ctx_current(struct sim_driver *drv, struct sim_ctx **ret_ctx, CUcontext *ret_handle);
CUcontext sim_ctx_handle(const struct sim_ctx *c);

/* ---- sim_mem.c ---- */
/* Range checks used by every copy and set. Lock held. */
enum sim_access_need { SIM_NEED_READ = 1, SIM_NEED_WRITE = 2 };
/* [ptr, ptr+size) inside one allocation or one mapping with the access
 * needed, else CUDA_ERROR_INVALID_VALUE. */
CUresult sim_check_device_range(struct sim_driver *drv, CUdeviceptr ptr, size_t size,
                                enum sim_access_need need);
/* A host buffer may be anything the caller owns, except a part of a VA
 * reservation that is not mapped accessibly: that would fault here. */
CUresult sim_check_host_range(struct sim_driver *drv, const void *p, size_t size,
                              enum sim_access_need need);
/* The range containing addr, or NULL. */
struct sim_range *sim_range_find(struct sim_driver *drv, uintptr_t addr);
/* Frees every cuMemAlloc block owned by ctx (context destroy/reset). */
void sim_mem_free_ctx_allocs(struct sim_driver *drv, CUcontext ctx);

/* ---- sim_stream.c ---- */
/* 0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD or a live stream. Lock held. */
CUresult sim_stream_check(struct sim_driver *drv, CUstream s);
void sim_stream_destroy_ctx_streams(struct sim_driver *drv, CUcontext ctx);

#endif
