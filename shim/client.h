/* SPDX-License-Identifier: MIT */
/*
 * The shim's connection to lupined and the client-side shadow state.
 *
 * Threading: any application thread may call. Frames are written under
 * one send lock (so all of a process's frames share one ordered stream and
 * an async op issued before a sync op always runs before it). Replies are
 * read by whichever waiting thread currently holds the reader role (leader/
 * follower), so a single-threaded caller reads its own reply with no thread
 * hand-off.
 */
#ifndef LUPC_CLIENT_H
#define LUPC_CLIENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cuda.h>

#include "lupine/wire.h"
#include "visible.h"

enum {
        LUPC_ASYNC = 0,
        LUPC_SYNC = 1 << 0,  /* wait for the reply */
        LUPC_CTX = 1 << 1,   /* needs a current context; sent in the header */
};

struct lupc_device {
        char name[LUP_MAX_DEV_NAME + 16];
        CUuuid uuid;
        uint64_t total_mem;
        uint32_t n_attr;
        int32_t attr[LUP_MAX_ATTRS];
        uint32_t attr_res[LUP_MAX_ATTRS];
};

/* ---- which server a call goes to (route.c): the next call of this
 * thread goes to the server of device dev, or of device pointer p (one
 * server: nothing) */
void lupc_route_dev(int dev);
void lupc_route_ptr(uint64_t p);
/* ... or of the context handle h was made in (streams, events, modules, ...) */
void lupc_route_handle(uint64_t h);
/* Whether two handles (a stream id as on the wire, an event, ...; 0 and
 * the default streams are the current context's) are on one server. */
bool lupc_same_server_handles(uint64_t a, uint64_t b);
/* A stream of one server made to wait for event ev of another (what: the
 * call): ev is synchronized on its own server now, which orders
 * everything after it in the stream, as the wait would have. */
CUresult lupc_wait_across(uint64_t ev, const char *what);
/* Runs fn(arg) once for every server of LUPINE_SERVER, each run's calls
 * routed to that server and minting the same handle ids (context-
 * independent objects: libraries and their kernels); stops at the first
 * failure. With one server: fn(arg). */
CUresult lupc_each_server(CUresult (*fn)(void *arg), void *arg);
/* handles.c: 1 records the ids minted from now on, 2 hands out the recorded
 * ones again, 0 ends it (lupc_each_server) */
void lupc_mint_mode(int mode);
/* Whether device pointers a and b are on one server (always, with one;
 * a module global is the current context's server's). */
bool lupc_same_server(uint64_t a, uint64_t b);
/* shim/peer_copy.c: n bytes from src to dst, which are on two servers,
 * daemon to daemon; complete when it returns (what: the API call, for
 * messages). */
CUresult lupc_copy_across(uint64_t dst, uint64_t src, size_t n, const char *what);


/* ---- connection (client.c) */

/* Connects and says HELLO once per process; later calls return the first
 * outcome. CUDA_SUCCESS or CUDA_ERROR_NO_DEVICE / _OPERATING_SYSTEM. */
CUresult lupc_init(void);
bool lupc_initialized(void);

/* Sends one call. For LUPC_SYNC, waits and copies up to repcap reply bytes
 * into rep (*ret_replen gets the size). Returns the call's CUresult. */
CUresult lupc_call(uint16_t op, unsigned flags, const void *args, size_t argslen,
                   void *rep, size_t repcap, size_t *ret_replen);
/* Bulk host->device copy: chunked, fire-and-forget. */
CUresult lupc_copy_htod(uint64_t dst, const void *src, size_t n, uint64_t stream);
/* Device->host copy: the reply data lands directly in dst. */
CUresult lupc_copy_dtoh(void *dst, uint64_t src, size_t n, uint64_t stream);
/* Asynchronous device->host copy: the data lands in dst before the
 * synchronisation point that makes it visible (the worker guarantees it is
 * sent before the answer to any later synchronous call). */
CUresult lupc_copy_dtoh_async(void *dst, uint64_t src, size_t n, uint64_t stream);
/* Uploads a module image (size found from its headers) as a blob for the
 * next call that takes it. CUDA_ERROR_INVALID_IMAGE if it is not one. */
CUresult lupc_upload_image(const void *image, uint64_t *ret_blob);
/* Uploads n bytes (at most LUP_MAX_BLOB) as a blob, for an op that names it. */
CUresult lupc_upload_blob(const void *data, size_t n, uint64_t *ret_blob);
/* A fresh id for a client-minted handle (streams, events, modules, ...). */
uint64_t lupc_mint_handle(void);
/* Whether id is one lupc_mint_handle gave out (alive or not). */
bool lupc_handle_was_minted(uint64_t id);

/* A reply that did not decode: logs once and returns CUDA_ERROR_UNKNOWN. */
CUresult lupc_protocol_error(const char *what);

uint32_t lupc_driver_version(void);
int lupc_backend_kind(void);

/* The connection as the reconnect machinery sees it (for tests and
 * diagnostics). state: 0 up, 1 reconnecting, 2 session lost. */
struct lupc_conn_stats {
        int state;
        uint64_t sent;           /* the last sequence number sent */
        uint64_t acked;          /* the server executed every call up to here */
        size_t replay_bytes;     /* frame bytes kept for resending */
        size_t replay_frames;
        size_t replay_max;       /* the bound (LUPINE_REPLAY_MAX_MB); 0 when no copies are kept */
        unsigned resumes;        /* successful reconnects */
};
void lupc_conn_stats(struct lupc_conn_stats *ret);

/* ---- shadow state (shadow.c) */

/* The devices this process sees (CUDA_VISIBLE_DEVICES), by client ordinal. */
int lupc_device_count(void);
const struct lupc_device *lupc_device(int ordinal); /* NULL if out of range */
/* Installs the server's snapshot of n devices (taking devs) as the list
 * `visible` (CUDA_VISIBLE_DEVICES, NULL: unset) selects, and the ordinal
 * tables (visible.h). Returns the number visible, -EINVAL when the list
 * names a device twice the same way, or -ENOMEM. Once, at init. */
int lupc_set_devices(struct lupc_device *devs, int n, const char *visible);

void lupc_set_arena(uint64_t base, uint64_t size);
/* Another server's arena (LUPINE_SERVER with several). */
void lupc_add_arena(uint64_t base, uint64_t size);
bool lupc_in_arena(uint64_t p);
/* Device range checks against the allocation shadow (CUDA_ERROR_INVALID_VALUE). */
CUresult lupc_check_devptr(uint64_t p);
CUresult lupc_check_range(uint64_t p, uint64_t count, uint64_t mul);
/* The index-th function of a module, in the driver's order (api_module_enum.c). */
CUresult lupc_module_function(CUmodule mod, unsigned int index, CUfunction *ret_fn, const char **ret_name);
CUresult lupc_check_range2d(uint64_t p, uint64_t count, uint64_t mul, uint64_t pitch, uint64_t rows);

struct lupc_alloc_info {
        uint64_t base;
        uint64_t size;
        uint64_t ctx;
        int device;
        bool vmm; /* a cuMemMap mapping: ranges may run on into the next one */
};
int lupc_shadow_add(uint64_t base, uint64_t size, uint64_t ctx, int device);
int lupc_shadow_remove(uint64_t base, struct lupc_alloc_info *ret);
/* a cuMemMap mapping (api_vmm.c): no context owns it */
int lupc_shadow_add_vmm(uint64_t base, uint64_t size, int device);
bool lupc_shadow_find(uint64_t p, struct lupc_alloc_info *ret);
/* forgets every allocation of a destroyed or reset context */
void lupc_shadow_drop_ctx(uint64_t ctx);

/* registered or cuMemAllocHost'ed host memory (api_hostmem.c) */
bool lupc_host_find(uint64_t p, uint64_t *ret_base, uint64_t *ret_size, unsigned int *ret_flags);
/* what kind of host range (lupc_host_track's kind) */
enum {
        LUPC_HOST_REGISTERED = 0,
        LUPC_HOST_ALLOCATED = 1,
        LUPC_HOST_MANAGED = 2
};
/* api_managed.c's ranges are host ranges too (mirrored, in kernel parameter
 * scans); -EEXIST, -ENOMEM */
int lupc_host_track(uint64_t base, uint64_t size, unsigned int flags, int kind);
int lupc_host_untrack(uint64_t base, int kind);
extern _Atomic unsigned int lupc_host_n;            /* pinned ranges */
extern _Atomic uint64_t lupc_host_lo, lupc_host_hi; /* they all lie in [lo, hi) */

/* ---- mapped host memory (api_mapped.c) */
extern _Atomic unsigned int lupc_mapped_n; /* ranges mirrored on the GPU host */
/* [p, p + n) lies in one pinned range: it gets its mirror if it has none.
 * CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE (not pinned memory) or the error
 * making the mirror gave. */
CUresult lupc_mapped_use(uint64_t p, uint64_t n);
/* Kernel parameters: every 8-byte word that points into pinned memory. */
void lupc_mapped_scan(const uint8_t *params, size_t n);
/* The range at base goes away (freed, unregistered): its mirror too. */
void lupc_mapped_forget(uint64_t base);
/* A managed range's mirror, made at allocation; the poller leaves it alone.
 * global: attached globally (not to the host or one stream), so not pushed
 * between a kernel launch and the next synchronous call. */
CUresult lupc_mapped_managed(uint64_t base, uint64_t size, bool global);
void lupc_mapped_managed_attach(uint64_t base, bool global);

/* ---- managed memory (api_managed.c) */
struct lupc_managed_info {
        uint64_t base, size, ctx;
        int device;
};
#define LUPC_NOT_MANAGED ((CUresult)-1)
bool lupc_managed_find(uint64_t p, struct lupc_managed_info *ret);
/* cuMemFree's part: LUPC_NOT_MANAGED when p is not managed memory */
CUresult lupc_managed_free(uint64_t p);
/* a destroyed or reset context's managed memory goes with it */
void lupc_managed_drop_ctx(uint64_t ctx);
CUresult lupc_managed_pointer_attr(void *data, CUpointer_attribute attribute, uint64_t ptr,
                                   const struct lupc_managed_info *mi);
/* the device attributes the managed contract fixes (true: answered) */
bool lupc_managed_device_attr(CUdevice_attribute a, int *ret);
/* calls.c, while lupc_mapped_n: before each call (the host's changes go
 * first) and after each synchronous one (the device's come back). */
void lupc_mapped_before(unsigned flags, uint16_t op);
void lupc_mapped_after(void);

/* contexts: ids are minted here; primary context ids are fixed per device */
struct lupc_ctx_info {
        uint64_t id;
        int device;
        unsigned flags;
        bool primary;
};
uint64_t lupc_ctx_current(void);           /* 0 when none */
void lupc_ctx_set_current(uint64_t id);    /* replaces the top of this thread's stack */
int lupc_ctx_push(uint64_t id);            /* -ENOSPC past the stack limit */
uint64_t lupc_ctx_pop(void);
bool lupc_ctx_lookup(uint64_t id, struct lupc_ctx_info *ret);
/* A handle that names a context: a live created one, or the primary context
 * of a device whether or not it is retained (the runtime makes a primary
 * context current before it retains it). */
bool lupc_ctx_known(uint64_t id);
uint64_t lupc_ctx_mint(int device, unsigned flags);
void lupc_ctx_forget(uint64_t id);
/* True for any id this process ever minted, live or destroyed. */
bool lupc_ctx_was_minted(uint64_t id);
/* primary context bookkeeping: returns the retain count after the change */
int lupc_primary_retain(int dev);
int lupc_primary_release(int dev);          /* -EINVAL if not retained */
void lupc_primary_state(int dev, unsigned *flags, int *active);
void lupc_primary_set_flags(int dev, unsigned flags);
void lupc_primary_reset(int dev);

/* client-minted handles: what kind each is and the context it was made in */
enum lupc_handle_kind {
        LUPC_H_MODULE = 1, LUPC_H_FUNCTION, LUPC_H_LIBRARY, LUPC_H_KERNEL, LUPC_H_STREAM, LUPC_H_EVENT,
        LUPC_H_GRAPH,
        LUPC_H_GRAPHEXEC,
        LUPC_H_GRAPHNODE,
};
void lupc_note_handle(uint64_t id, int kind);
void lupc_forget_handle(uint64_t id);
/* 0 if unknown; else the kind, with the creating context in *ret_ctx */
int lupc_handle_kind(uint64_t id, uint64_t *ret_ctx);

/* api_graph.c: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (logged, and the
 * capture invalidated in the worker) when stream (a wire id) is capturing
 * and `what`, which the shim carries out itself, cannot be captured;
 * CUDA_SUCCESS otherwise. */
CUresult lupc_capture_refuse(uint64_t stream, const char *what);

/* api_graph_nodes.c: the dependency nodes of stream's capture (ids, in a
 * per-thread buffer valid until the next call; edge data all default). */
CUresult lupc_capture_deps(uint64_t stream, const CUgraphNode **ret_deps, const CUgraphEdgeData **ret_edges,
                           size_t *ret_n);

/* streams: 0, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD travel as themselves */
uint64_t lupc_stream_id(CUstream s, int per_thread_variant);

#endif
