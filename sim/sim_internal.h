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
 *
 * Streams (sim_queue.c) add a second lock, the queue mutex, which guards
 * every queue, its operations and counters, and every event's state. The
 * order is rwlock, then queue mutex; nobody holding the queue mutex takes
 * the rwlock, and nobody waits (for a queue to drain, for room in one)
 * while holding the rwlock, because the stream threads need it shared to
 * run their work.
 */
#ifndef LUPINE_SIM_INTERNAL_H
#define LUPINE_SIM_INTERNAL_H

/* Declares the versioned *and* the legacy prototypes, exactly as the real
 * driver is built, so that the compiler checks every exported signature. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <pthread.h>
#include <time.h>
#include <stdatomic.h>
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
#define SIM_MAX_MODULES         4096           /* modules and libraries, together */
#define SIM_MAX_FUNCTIONS       (1u << 20)
#define SIM_MAX_EVENTS          65536
#define SIM_MAX_QUEUE_OPS       65536          /* in flight per stream; submit waits past it */
#define SIM_MAX_IMAGE_BYTES     (256u << 20)   /* PTX text, fatbin or file */
#define SIM_MAX_JIT_OPTIONS     64
#define SIM_MAX_PARAM_BYTES     32764          /* kernel parameters, as on sm_70+ */
#define SIM_MAX_GLOBAL_BYTES    (256u << 20)   /* one module-scope variable */

/* What the sim reports for every kernel (an H100 compiling a small one). */
#define SIM_FUNC_MAX_THREADS    1024
#define SIM_FUNC_NUM_REGS       32
#define SIM_SMEM_PER_BLOCK      (48 * 1024)    /* without opting in */
#define SIM_SMEM_PER_BLOCK_OPTIN (227 * 1024)
#define SIM_SMEM_PER_SM         (228 * 1024)
#define SIM_SMEM_RESERVED       1024           /* per block, by the driver */
#define SIM_THREADS_PER_SM      2048
#define SIM_BLOCKS_PER_SM       32
#define SIM_REGS_PER_SM         65536
#define SIM_SM_COUNT            132
#define SIM_PRIORITY_GREATEST   (-5)
#define SIM_PRIORITY_LEAST      0

/* Handles are tagged counters, not pointers: a stale handle never aliases
 * a new object (until 2^40 objects later) and is never dereferenced. */
#define SIM_ID_BITS     44
#define SIM_TAG(t)      ((uint64_t)(t) << SIM_ID_BITS)
#define SIM_TAG_MASK    SIM_TAG(0xfff)
#define SIM_ID_MASK     (SIM_TAG(1) - 1)
#define SIM_TAG_CTX     SIM_TAG(0x5c1)
#define SIM_TAG_STREAM  SIM_TAG(0x5c2)
#define SIM_TAG_VMM     SIM_TAG(0x5c3)
#define SIM_TAG_MODULE  SIM_TAG(0x5c4)
#define SIM_TAG_FUNC    SIM_TAG(0x5c5)
#define SIM_TAG_KERNEL  SIM_TAG(0x5c6)
#define SIM_TAG_LIBRARY SIM_TAG(0x5c7)
#define SIM_TAG_EVENT   SIM_TAG(0x5c8)

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
        /* A kernel fault (CUDA_ERROR_ILLEGAL_ADDRESS): once set, every
         * call in the context returns it, until the context is destroyed
         * or (primary) reset. Set by stream threads under the lock shared. */
        atomic_int sticky;
        /* cuCtxSetLimit / cuCtxSetCacheConfig; set with the lock exclusive */
        size_t limits[CU_LIMIT_MAX];
        bool limits_set;        /* else the defaults apply */
        int cache_config;
        /* device printf output not yet flushed (sim_printf.c); guarded
         * by drv->printf_mu */
        char *printf_buf;
        size_t printf_len, printf_cap;
};

/* One physical VMM allocation: a sealed memfd, from cuMemCreate or an
 * import. It lives while a handle reference or a mapping holds it. */
struct sim_vmm_alloc {
        uint64_t id;
        int fd;
        size_t size;
        int dev;
        CUmemAllocationProp prop;
        bool imported;          /* from cuMemImportFromShareableHandle: not exportable */
        unsigned handle_refs;   /* create/import/retain minus release */
        unsigned map_count;
};

enum sim_range_kind {
        SIM_RANGE_ALLOC,        /* cuMemAlloc */
        SIM_RANGE_MAPPING,      /* cuMemMap onto a reservation */
        SIM_RANGE_GLOBAL,       /* a module's __device__/__constant__ variable */
        SIM_RANGE_HOST_ALLOC,   /* cuMemAllocHost/cuMemHostAlloc: pinned, mapped */
        SIM_RANGE_HOST_REGISTERED, /* cuMemHostRegister: the caller's memory */
        SIM_RANGE_MANAGED,         /* cuMemAllocManaged (sim_managed.c) */
};

struct sim_page_adv;

/* A range of device addresses that may be read or written. */
struct sim_range {
        enum sim_range_kind kind;
        uintptr_t start;
        size_t size;            /* what the caller asked for; checked on access */
        size_t map_size;        /* what is mmap()ed and charged */
        int dev;
        uint64_t buffer_id;
        unsigned access;        /* CU_MEM_ACCESS_FLAGS_PROT_* */
        unsigned host_flags;    /* CU_MEMHOSTALLOC_* / CU_MEMHOSTREGISTER_* */
        CUcontext ctx;          /* owner of an ALLOC, GLOBAL or HOST_* range */
        struct sim_vmm_alloc *backing;  /* SIM_RANGE_MAPPING */
        struct sim_page_adv *adv;       /* SIM_RANGE_MANAGED: advice per page, made on first use */
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
        struct sim_svec streams;        /* id -> sim_queue (created streams) */
        struct sim_svec events;         /* id -> sim_event */
        struct sim_svec modules;        /* id -> sim_module */
        struct sim_svec libraries;      /* id -> sim_library */
        struct sim_svec functions;      /* id -> sim_func */
        struct sim_svec vmm_allocs;     /* id -> sim_vmm_alloc */
        struct sim_svec ranges;         /* start -> sim_range */
        struct sim_svec reservations;   /* start -> sim_reservation */
        uint64_t next_id;               /* shared by all handle kinds */
        uint64_t next_buffer_id;

        /* Queues, guarded by q_mu (see the locking note above). */
        pthread_mutex_t q_mu;
        pthread_cond_t q_progress;      /* an op completed or an event fired */
        struct sim_queue *queues;       /* every queue alive, list by next_all */

        /* Every context's printf FIFO (sim_printf.c). Taken after the
         * rwlock, never with q_mu. */
        pthread_mutex_t printf_mu;
};

/* ---- sim_driver.c ---- */
/* The driver once cuInit succeeded, else NULL. Exported functions call it
 * first and return CUDA_ERROR_NOT_INITIALIZED on NULL. */
struct sim_driver *sim_driver_get(void);
void sim_rdlock(struct sim_driver *drv);
void sim_wrlock(struct sim_driver *drv);
void sim_unlock(struct sim_driver *drv);
uint64_t sim_next_id(struct sim_driver *drv);
void sim_lock_reinit_after_fork(struct sim_driver *drv);
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

/* ---- handle tables (sim_driver.c) ----
 * A table maps ids to objects; the handle a caller holds is tag|id. Lock
 * held, exclusive for register and take. */

/* Enters obj in table under a new id, written to *ret_id on success.
 * -ENOSPC past the table's limit, -ENOMEM; *ret_id untouched then. */
int sim_handle_register(struct sim_driver *drv, struct sim_svec *table, void *obj, uint64_t *ret_id);
/* The object behind handle, or NULL when handle does not carry tag or
 * names nothing in table. */
void *sim_handle_get(const struct sim_svec *table, uint64_t handle, uint64_t tag);
/* The same, and removes it from table: the handle is dead from now on. */
void *sim_handle_take(struct sim_svec *table, uint64_t handle, uint64_t tag);

/* ---- sim_ctx.c ---- */
/* The live context behind a handle: a created context or an active
 * primary one. NULL when the handle is unknown, destroyed or inactive. */
struct sim_ctx *sim_ctx_lookup(struct sim_driver *drv, CUcontext h);
/* The calling thread's current context, checked against the registry.
 * CUDA_ERROR_INVALID_CONTEXT when there is none, CUDA_ERROR_CONTEXT_IS_DESTROYED
 * when it was destroyed on another thread. Lock held (shared is enough). */
CUresult sim_ctx_current(struct sim_driver *drv, struct sim_ctx **ret_ctx, CUcontext *ret_handle);
/* Whether work may run in context h: CUDA_ERROR_CONTEXT_IS_DESTROYED when
 * h is no live context, else its sticky error; CUDA_SUCCESS (and the
 * context in *ret_ctx, when given) if it has none. Lock held (shared is
 * enough). */
CUresult sim_ctx_status(struct sim_driver *drv, CUcontext h, struct sim_ctx **ret_ctx);
CUcontext sim_ctx_handle(const struct sim_ctx *c);
/* The context's value of limit: what cuCtxSetLimit set, else the default.
 * Lock held (shared is enough). */
size_t sim_ctx_limit(const struct sim_ctx *c, CUlimit limit);

/* ---- sim_printf.c: device printf ---- */
/* Appends n bytes of a kernel's printf output to the FIFO of context ctx,
 * as a kernel writes into the device's buffer. false when they do not fit
 * in CU_LIMIT_PRINTF_FIFO_SIZE (they are dropped) or ctx is gone. Lock
 * held (shared is enough). */
bool sim_printf_append(struct sim_driver *drv, CUcontext ctx, const char *s, size_t n);
/* Writes what the FIFO of ctx holds to stdout and empties it: what the
 * driver does at a synchronisation point. Takes the lock shared. */
void sim_printf_flush(struct sim_driver *drv, CUcontext ctx);
/* Forgets the FIFO of c unwritten. Lock held. */
void sim_printf_release(struct sim_driver *drv, struct sim_ctx *c);

/* ---- sim_array.c ---- */
/* One end of a copy inside array h: the box's first byte, the array's
 * pitch and slice stride. CUDA_ERROR_INVALID_HANDLE for no live array,
 * CUDA_ERROR_INVALID_VALUE for a box past its extent. Takes the lock. */
CUresult sim_array_end(CUarray h, size_t x, size_t y, size_t z, size_t width, size_t height, size_t depth,
                       uintptr_t *ret_base, size_t *ret_pitch, size_t *ret_slice);

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
/* The range containing addr, or NULL (also for an address past
 * UINTPTR_MAX). */
struct sim_range *sim_range_find(struct sim_driver *drv, CUdeviceptr addr);
/* Whether any range has a byte in [start, start+size). size > 0, and the
 * span does not wrap. */
bool sim_range_overlaps(struct sim_driver *drv, uintptr_t start, size_t size);
/* Frees every cuMemAlloc block owned by ctx (context destroy/reset). */
void sim_mem_free_ctx_allocs(struct sim_driver *drv, CUcontext ctx);

/* Allocates and maps size bytes of zeroed memory as a range of kind
 * (ALLOC, GLOBAL or HOST_ALLOC) for ctx on dev, charged to the device when
 * it is device memory. Lock held exclusive. */
CUresult sim_range_create(struct sim_driver *drv, enum sim_range_kind kind, CUcontext ctx, int dev,
                          size_t size, struct sim_range **ret);
/* Unregisters and frees one range made by sim_range_create. Lock held
 * exclusive. */
void sim_range_destroy(struct sim_driver *drv, struct sim_range *r);

/* What cuMemAlloc and cuMemHostAlloc share: a new range of kind (ALLOC or
 * HOST_ALLOC) of size bytes with host_flags, owned by the current context
 * and on its device; its address in *ret_start. Takes the lock. */
CUresult sim_mem_alloc_current(struct sim_driver *drv, enum sim_range_kind kind, size_t size,
                               unsigned host_flags, uintptr_t *ret_start);
/* What cuMemFree, cuMemFreeHost and cuMemHostUnregister share: with a
 * current context, frees the range of kind that starts exactly at addr;
 * not_found when there is none. Takes the lock. */
CUresult sim_mem_free_current(struct sim_driver *drv, CUdeviceptr addr, enum sim_range_kind kind,
                              CUresult not_found);

/* ---- sim_queue.c: the stream engine ---- */

/* A stream, or the legacy stream of a context: a FIFO of ops run in order
 * by a thread of its own, started on first use. Every field after the
 * constant ones is guarded by drv->q_mu. The queue lives while its owner
 * (the handle registry or, for legacy, its context), its thread, or an op
 * that waits on it holds a reference. */
struct sim_queue {
        struct sim_queue *next_all;
        struct sim_driver *drv;
        uint64_t id;            /* the handle's id; 0 for a legacy queue */
        CUcontext ctx;
        unsigned flags;         /* CU_STREAM_NON_BLOCKING */
        int priority;
        bool legacy;
        bool stop;              /* destroyed: drains, then its thread exits */
        bool thread_running;
        unsigned refs;
        struct sim_op *head, *tail;
        size_t queued;
        uint64_t submitted, completed;
        pthread_cond_t work;
};

/* An op waits until q has completed seq ops. */
struct sim_dep {
        struct sim_queue *q;
        uint64_t seq;
};

/* State after the id and flags is guarded by drv->q_mu. A record bumps
 * record_gen at submission and sets done_gen to it when it runs; waits
 * and queries compare the two. */
struct sim_event {
        uint64_t id;
        CUcontext ctx;
        unsigned flags;
        unsigned refs;          /* the registry and each op that names it */
        uint64_t record_gen;
        uint64_t done_gen;
        struct timespec done_at;        /* CLOCK_MONOTONIC */
};

/* One unit of work on a queue. exec runs on the queue's thread; with
 * needs_lock it runs under the rwlock shared, after the context has been
 * found live and without a sticky error. arg is free()d after. */
struct sim_op {
        struct sim_op *next;
        CUresult (*exec)(struct sim_driver *drv, void *arg);
        void *arg;
        bool needs_lock;
        /* instead of exec: */
        struct sim_event *record;       /* mark this event's generation done */
        struct sim_event *wait;         /* wait for this event's generation */
        uint64_t gen;
        CUhostFn host_fn;               /* cuLaunchHostFunc */
        CUstreamCallback callback;      /* cuStreamAddCallback */
        CUstream stream_handle;         /* passed to callback */
        void *user_data;
        /* set by the engine */
        struct sim_dep *deps;
        unsigned ndeps;
};

/* A new op for exec(arg); NULL when out of memory (arg is then freed). */
struct sim_op *sim_op_new(CUresult (*exec)(struct sim_driver *, void *), void *arg, bool needs_lock);
void sim_op_free(struct sim_op *op);

/* The queue behind a stream handle, with a reference the caller passes to
 * sim_queue_submit or drops with sim_queue_put. NULL, CU_STREAM_LEGACY and
 * CU_STREAM_PER_THREAD are the legacy stream of ctx (made on first use).
 * CUDA_ERROR_INVALID_HANDLE for an unknown stream. Lock held (shared). */
CUresult sim_queue_get(struct sim_driver *drv, CUstream h, CUcontext ctx, struct sim_queue **ret);
/* A new stream queue with one (the owner's) reference. q_mu not held. */
struct sim_queue *sim_queue_create(struct sim_driver *drv, CUcontext ctx, unsigned flags, int priority);
/* Destroys q from its owner's side: no more submissions; what is queued
 * still runs. Drops the owner's reference. q_mu not held. */
void sim_queue_stop(struct sim_driver *drv, struct sim_queue *q);
void sim_queue_stop_ctx_legacy(struct sim_driver *drv, CUcontext ctx);
void sim_queue_put(struct sim_driver *drv, struct sim_queue *q);
/* Appends op (taking it and the queue reference); waits for room past
 * SIM_MAX_QUEUE_OPS. No lock held. */
CUresult sim_queue_submit(struct sim_driver *drv, struct sim_queue *q, struct sim_op *op);
/* The same for a new op that runs exec(arg) (see sim_op_new); when that
 * op cannot be had, arg is freed and the queue reference dropped. */
CUresult sim_queue_submit_exec(struct sim_driver *drv, struct sim_queue *q,
                               CUresult (*exec)(struct sim_driver *, void *), void *arg, bool needs_lock);
/* Waits until q has run everything submitted; for a legacy queue, also
 * every blocking stream of its context. No lock held. */
void sim_queue_wait_idle(struct sim_driver *drv, struct sim_queue *q);
/* Whether q (as above) has work pending. */
bool sim_queue_busy(struct sim_driver *drv, struct sim_queue *q);
CUcontext sim_queue_ctx(const struct sim_queue *q);
/* Waits until the legacy stream of ctx and its blocking streams are idle:
 * what a synchronous copy does first. No lock held. */
void sim_ctx_wait_legacy(struct sim_driver *drv, CUcontext ctx);
/* Waits until every queue of ctx is idle. No lock held. */
void sim_ctx_wait_all(struct sim_driver *drv, CUcontext ctx);
/* Drops a reference to an event; frees it at zero. q_mu held. */
void sim_event_put_locked(struct sim_event *e);
/* pthread_atfork handlers, so that a child can use the driver. */
void sim_queue_atfork(struct sim_driver *drv);

/* ---- sim_stream.c ---- */
/* For a call that submits to stream h: the context the work runs in (the
 * current one for the legacy stream, the stream's own otherwise), which
 * must be live and without a sticky error, and, when ret_q is given, a
 * reference to the queue. Lock held (shared). */
CUresult sim_stream_enter(struct sim_driver *drv, CUstream h, CUcontext *ret_ctx, struct sim_queue **ret_q);
/* Drops the context's streams and legacy queue (their pending work still
 * runs, and finds the context gone). Lock held exclusive. */
void sim_stream_destroy_ctx_streams(struct sim_driver *drv, CUcontext ctx);
struct sim_queue *sim_stream_lookup(struct sim_driver *drv, CUstream h);

/* ---- sim_event.c ---- */
void sim_event_destroy_ctx_events(struct sim_driver *drv, CUcontext ctx);

/* ---- sim_module.c ---- */
void sim_module_unload_ctx(struct sim_driver *drv, CUcontext ctx);

/* ---- sim_ctx.c ---- */
/* Called before a context's resources go: waits for its queues (no lock
 * held). */
void sim_ctx_quiesce(struct sim_driver *drv, CUcontext ctx);
/* Marks the context behind handle as faulted, if it is still live. Lock
 * held (shared is enough). */
void sim_ctx_set_sticky(struct sim_driver *drv, CUcontext h, CUresult err);

#endif
