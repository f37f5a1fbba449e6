/* SPDX-License-Identifier: MIT */
/* State of one session inside its worker process. */
#ifndef LUPD_WORKER_SESSION_H
#define LUPD_WORKER_SESSION_H

#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>

#include "arena.h"
#include "backend.h"
#include "ckpt_codec.h"
#include "config.h"
#include "lupine/checkpoint_provider.h"
#include "ctl_codec.h"
#include "cuarray.h"
#include "frame.h"
#include "tls.h"
#include "lupine/wire.h"
#include "op_stats.h"
#include "peer_codec.h"
#include "rangemap.h"
#include "u64map.h"
#include "worker/lease.h"
#include "worker/tx.h"

/* How a handle was made, so a restore can make it again. */
struct lupw_prov {
        uint64_t parent; /* module/library/kernel it came from, or 0 */
        char *name;      /* function, kernel name */
        uint8_t *image;  /* module or library image */
        size_t image_len;
        uint32_t flags;   /* stream/event flags */
        int32_t priority; /* stream priority */
};

/* one entry of the handle table */
struct lupw_handle_ent {
        int kind;     /* LUPW_H_* */
        void *real;   /* the driver's handle */
        uint64_t ctx; /* the context id it was made in */
        struct lupw_prov prov;
        /* functions: parameter layout, fetched from the driver on first launch */
        bool have_params;
        uint32_t n_params;
        uint32_t param_bytes;
        uint32_t *params; /* n_params x (offset, size) */
        /* events: recorded (ever), and after a restore the time of the
         * record as measured before the checkpoint (worker/handles.c) */
        bool recorded;
        bool have_when;
        double when_ms; /* relative to a reference event of the same context */
};

/* A setting the client made that a restore must make again. */
enum lupw_setting_kind {
        LUPW_SET_CTX_LIMIT = 1,   /* holder: context id; key: CUlimit */
        LUPW_SET_CTX_CACHE = 2,   /* holder: context id */
        LUPW_SET_FUNC_ATTR = 3,   /* holder: function id; key: CUfunction_attribute */
        LUPW_SET_FUNC_CACHE = 4,  /* holder: function id */
        LUPW_SET_KERNEL_ATTR = 5, /* holder: kernel id; key: attribute; device */
};
struct lupw_setting {
        uint64_t holder;
        uint32_t kind, key;
        int32_t device;
        int64_t value;
};
#define LUPW_MAX_SETTINGS 65536

/* an async device->host copy waiting to be sent (worker/copy.c) */
struct lupw_pending_dtoh {
        uint64_t token;
        uint64_t size;
        size_t ring_off; /* where it lands in the staging ring */
        CUevent done;
        CUresult status;
};
#define LUPW_MAX_PENDING 256

struct lupw_ctx_slot {
        uint64_t id; /* the client's id */
        CUcontext real;
        int device;
        unsigned int flags;
};

/* How a chunk's memory came to this worker; it decides how a hot
 * checkpoint exports it (worker/hot.c: lupw_hot_export). */
enum lupw_chunk_origin {
        LUPW_CHUNK_CREATED,  /* cuMemCreate, POSIX fd requested: exportable */
        LUPW_CHUNK_IMPORTED, /* cuMemImportFromShareableHandle: not exportable
                                 * again on the real driver; fd is kept instead */
};

struct lupw_chunk {
        uint64_t addr;
        uint64_t size;
        CUmemGenericAllocationHandle handle;
        enum lupw_chunk_origin origin;
        int fd;     /* IMPORTED: the fd it came from (owned), else -1 */
        int device; /* the GPU whose memory it is */
};

/* The session's device memory: the arena (arena.c places allocations) and
 * the physical chunks behind it (worker/arena_map.c). */
struct lupw_memory {
        struct arena arena;
        bool reserved;             /* the arena's range is reserved in the driver */
        struct lupw_chunk *chunks; /* mapped physical chunks */
        size_t n_chunks, cap_chunks;
};

/* The client's virtual memory management (worker/vmm.c): reservations in
 * the arena, physical allocations and mappings. Each physical allocation
 * stays mapped at a home range of the arena that only the worker uses, a
 * chunk of s->mem.chunks: checkpoints save it and hot restarts export it
 * like any chunk, mapped or not by the client. */
struct lupw_vmm_alloc {
        uint64_t id; /* the client's handle */
        uint64_t size;
        uint64_t home; /* [home, home + size) */
        CUmemGenericAllocationHandle real;
        struct lup_ckpt_vmm_prop prop; /* as the client asked */
        uint32_t refs;                 /* handle references: create + retains - releases */
        uint32_t maps;                 /* client mappings of it */
};
struct lupw_vmm_map {
        uint64_t addr, size, offset, alloc;
        uint32_t present, prot; /* access per device: as struct lup_ckpt_vmm_map */
};
struct lupw_vmm {
        struct lup_ckpt_vmm_resv *resv; /* size as the client gave it */
        size_t n_resv, cap_resv;
        struct lupw_vmm_alloc *allocs;
        size_t n_allocs, cap_allocs;
        struct lup_u64map ids;     /* handle id -> index in allocs */
        struct lupw_vmm_map *maps; /* sorted by addr, never overlapping */
        size_t n_maps, cap_maps;
};

/* Contexts (worker/checks.c binds them, worker/ops.c creates them). */
struct lupw_contexts {
        CUcontext primary[LUP_MAX_DEVICES];   /* retained by the worker itself */
        bool client_primary[LUP_MAX_DEVICES]; /* the client holds a retain */
        struct lupw_ctx_slot slots[LUP_MAX_CONTEXTS];
        int n_slots;
        uint64_t bound_id; /* context id current on this thread */
        int bound_device;
};

/* Every other object the client named, and what a restore needs to make
 * them again (worker/handles.c, worker/ops.c). */
struct lupw_objects {
        struct lup_u64map handles;     /* id -> struct lupw_handle_ent * */
        struct lupw_prov prov;         /* provenance for the next lupw_handle_put */
        struct lupw_setting *settings; /* what a restore must set again */
        size_t n_settings, cap_settings;
        struct lup_u64map blobs; /* id -> upload in progress */
        uint64_t blob_bytes;
        struct lup_rangemap globals; /* module globals the client asked for (client addresses) */
        struct lup_rangemap xlate;   /* after a restore: old global address -> new (a) */
        struct lup_u64map jit;       /* id -> link state or load answers (worker/link.c) */
};

/* Stream captures and graphs (worker/graphs.c, worker/graphs_ckpt.c). */
struct lupw_capture {
        CUstream real;   /* the origin stream */
        uint64_t stream; /* its client id */
        uint64_t graph;  /* the client id of the graph it builds (0: not looked up yet) */
        CUgraph g;       /* the driver's graph being captured */
        uint64_t cid;    /* the driver's capture id */
        uint64_t ctx;    /* the context it began in */
        bool poisoned;   /* the shim refused a call on it: it ends invalidated */
        bool lost;       /* a drain ended it: reported invalidated */
        bool to_graph;   /* into the client's own graph (cuStreamBeginCaptureToGraph) */
};
/* A graph exec: it is an exec of the worker's own clone of the client's
 * graph (src), whose nodes a checkpoint saves; nodes: the client's node
 * id -> the clone's node (what cuGraphExec*SetParams name). */
struct lupw_exec {
        CUgraph src;
        struct lup_u64map nodes;
        /* with host nodes (worker/graph_host.c): per level of the plan, the
         * exec of its segment (NULL: none) and the segment's graph; plan:
         * the words the shim reads (n_segs and n_plan 0: no host nodes) */
        uint32_t n_segs, n_plan;
        CUgraphExec *segs;
        CUgraph *seg_graphs;
        uint64_t *plan;
};
#define LUPW_MAX_CAPTURES    64
#define LUPW_GRAPH_CAPTURING 1u /* a graph entry's prov.flags: still being captured */
struct lupw_graphs {
        struct lupw_capture caps[LUPW_MAX_CAPTURES];
        int n_caps;
        struct lup_u64map exec_src; /* real CUgraphExec -> its struct lupw_exec */
        struct lup_u64map node_ids; /* real CUgraphNode -> its id (worker/graph_nodes.c) */
        uint64_t next_node_id;      /* the next id the worker gives a driver-made node */
};

/* Mapped host memory: one mirror per client range (worker/mapped.c). */
struct lupw_mirror {
        uint64_t va, size; /* the client's range */
        uint32_t flags;    /* as the client gave them */
        uint8_t *map;      /* the pages mapped here: [map, map + map_len) */
        size_t map_len;
        uint8_t *host;   /* the range's first byte in them */
        uint8_t *shadow; /* what the client was last known to hold (size bytes) */
        uint64_t dptr;   /* the device's address of host[0] */
};
#define LUPW_MAX_MIRRORS      4096u
#define LUPW_MAX_MAPPED_BYTES (16ull << 30)
struct lupw_mapped {
        struct lup_rangemap ranges; /* client range -> a: its struct lupw_mirror * */
        uint64_t bytes;             /* all mirrors' sizes */
};

/* CUDA arrays, mipmapped arrays (ids the shim minted) and texture and
 * surface objects (the driver's values) (worker/arrays.c, texobj.c). */
struct lupw_array {
        uint64_t id;
        uint64_t ctx;    /* the context id it was made in */
        uint64_t parent; /* a level of a mipmapped array: that array's id */
        uint32_t level;  /* ... and which level */
        uint32_t levels; /* a mipmapped array: how many; 0: an array */
        struct lup_array_desc d;
        struct lup_array_shape shape;
        void *real; /* CUarray or CUmipmappedArray */
        bool dead;  /* destroyed by the client, kept while a live object names it */
};
struct lupw_texobj {
        uint64_t value, ctx;
        bool surface, has_view;
        uint8_t res[144], tex[104], view[112]; /* as the client sent them (its array ids) */
};
#define LUPW_MAX_TEXOBJS 65536u /* LUP_CKPT_MAX_TEXOBJS */
struct lupw_arrays {
        struct lup_u64map ids;    /* id -> struct lupw_array * */
        struct lupw_texobj *objs; /* live objects, in creation order */
        size_t n_objs, cap_objs;
};

/* What the call being executed named, for the creators that remember it. */
struct lupw_current_call {
        uint64_t parent;                  /* the handle the current call named last */
        size_t blob_len;                  /* the image the current call uploaded */
        struct lupw_handle_ent *event[2]; /* the events the current call named, in order */
};

/* The receive buffer: frames are read into it whole (worker/loop.c) and
 * executed from it in place (worker/dispatch.c). */
struct lupw_rx {
        uint8_t *buf;
        size_t off, len, cap; /* unprocessed bytes are [off, len) */
        bool pinned;          /* allocated with cuMemAllocHost */
        uint64_t spin_ns;     /* busy-poll budget before sleeping */
};

/* Synchronous copies' staging (worker/copy.c). */
struct lupw_copy {
        uint8_t *staging;    /* device->host bounce buffer */
        uint8_t *staging2;   /* second bounce buffer: copy one chunk while sending another */
        bool staging_pinned; /* allocated with cuMemAllocHost */
        CUevent chunk_done[2];
        CUevent htod_done; /* host->device chunks copied from the receive buffer */
        bool htod_pending;
        CUstream htod_stream;
};

/* Asynchronous device->host copies waiting to be sent (worker/copy.c). */
struct lupw_dtoh {
        uint8_t *ring; /* pinned staging ring */
        size_t ring_size, head, tail;
        struct lupw_pending_dtoh pending[LUPW_MAX_PENDING];
        unsigned n_pending, first;
};

/* The batch of replies written once the frames at hand are executed
 * (worker/tx.c). */
struct lupw_out {
        uint8_t *buf;
        size_t len, cap;
};

/* The event loop (worker/loop.c). */
struct lupw_loop {
        struct io_uring ring;
        bool ring_ok;
        bool stop;
        int exit_status;
        uint64_t conn_gen; /* bumped whenever the connection is replaced */
        bool recv_armed, ctl_armed, ttl_armed, stats_armed, ckpt_armed, lease_armed;
        struct __kernel_timespec stats_ts;
        struct __kernel_timespec ckpt_ts; /* a waiting CHECKPOINT looks again then */
        bool stale_recv;                  /* a dropped connection's recv has not completed yet (drop_connection) */
        struct __kernel_timespec ttl;
        uint64_t detached_since;
};

/* What the worker reports to the supervisor (worker/stats.c, LUPD_CTL_STATS). */
struct lupw_stats {
        _Atomic uint64_t bytes_out; /* sent to the client (lupw_send, any thread) */
        uint64_t bytes_in;          /* received from it */
        uint64_t sent_ns;           /* when the last report went */
        uint64_t sent_calls, sent_in, sent_out, sent_epoch, sent_peer;
        uint64_t ckpt_unix_ms; /* wall clock of the last committed checkpoint */
        /* a checkpoint's or restore's progress */
        int phase; /* LUPD_WORK_* */
        uint64_t phase_start_ns, logged_ns;
        unsigned logged_tenth; /* the last tenth of the bytes logged */
        /* by op since the last LUPD_CTL_OP_STATS that got through
         * (daemon/op_stats.h); main thread only; NULL: not counted */
        struct lupd_op_count *ops;
        bool ops_counted; /* a call was counted since */
};

/* Checkpoints and drains (worker/ckpt.c, restore.c, hot.c, lanes.c). */
/* What the last committed checkpoint wrote: a migration reports it. */
struct lupw_ckpt_last {
        uint64_t precopied;      /* memory bytes its pre-copy wrote while the session ran */
        uint64_t paused_written; /* memory bytes it wrote with the session quiesced */
        uint64_t paused_us;      /* how long that took */
};

struct lupw_ckpt_state {
        const struct lupine_checkpoint_provider *ops;
        struct lupine_ckpt_instance *inst;
        void *dl;
        uint64_t epoch; /* of the last committed checkpoint */
        bool drained;   /* a checkpoint was committed */
        bool draining;  /* a drain began: never delete checkpoints now */
        bool keep;      /* the session ends, its checkpoint stays (kill keep, supervisor gone) */
        char migrate_to[LUP_GOODBYE_TO_MAX + 1]; /* the drain's GOODBYE sends the client there ("": no) */
        uint32_t drain_flags;                    /* LUPD_DRAIN_* of a DRAIN not yet carried out */
        bool drain_wanted;                       /* ... set by the control message, run by the loop */
        bool now_wanted;                         /* a CHECKPOINT not yet carried out (worker/ckpt_now.c) */
        uint64_t now_since_ns;                   /* ... asked for then */
        bool now_said_wait;                      /* ... and the log said why it waits */
        uint32_t mem;                            /* restoring: CKPT_MEM_* of the checkpoint */
        struct lupw_hot *hot;                    /* hot restore state (worker/hot.c), or NULL */
        struct lupw_lanes *lanes;                /* checkpoint/restore copy lanes (worker/lanes.c), or NULL */
        struct lupw_piece_hash *piece_hash;      /* the GPU hash kernel (worker/piece_hash.c), or NULL */
        struct lupw_ckpt_base *base;             /* the last durable commit, piece by piece (worker/ckpt_base.c) */
        struct lupw_precopy *precopy;            /* a migration's pre-copy (worker/precopy.c), or NULL */
        struct lupw_ckpt_last last;              /* what the last commit wrote, for DRAINED */
        bool said_gpu_hash_off;                  /* LUPINE_CHECKPOINT_GPU_HASH=0 was logged */
        struct {                                 /* the provider's direct-write region (worker/lanes.c) */
                int state;                       /* 0 not asked yet, 1 pinned, -1 none or not pinnable */
                void *base;
                size_t len;
        } direct;
};

/* Copies between servers (worker/peer.c): the tickets this session gave
 * its client for copies into its memory (PEER_EXPECT), and the bytes moved
 * daemon to daemon. */
#define LUPW_PEER_TICKETS 8
struct lupw_peer_expect {
        uint8_t ticket[LUP_TICKET_SIZE];
        uint64_t dst, size, ctx;
        uint64_t deadline_ns; /* 0: a free entry */
};
struct lupt_config;
struct lupw_peer {
        struct lupw_peer_expect exp[LUPW_PEER_TICKETS];
        uint64_t bytes_in, bytes_out;
        struct lupt_config *tls; /* copies to tls:// servers: made at first use (worker/peer.c) */
        uint8_t *stage[2];       /* staging, LUP_PEER_CHUNK bytes each: made at first use */
};

/* One session: who it is and where its client is, the call stream's
 * state, and one part per concern. */
struct lupw_session {
        const struct lupd_config *cfg;
        struct lupw_backend_handle be;
        int ctl_fd;                  /* the control channel to the supervisor */
        int fd;                      /* the client connection */
        struct lup_tls *tls;         /* its TLS session (worker/tls_conn.c), or NULL: changed with fd */
        struct lup_tls_ctx *tls_ctx; /* --tls-cert: the second handshake's context, made at first use */
        char name[LUP_MAX_NAME + 1];
        uint8_t token[LUP_TOKEN_SIZE]; /* the session's resume token */
        uint32_t slot;
        bool slot_any; /* ASSIGN let it choose from slot on (LUPD_ASSIGN_ANY_SLOT) */
        int n_devices;

        uint64_t last_seq; /* last executed */
        CUresult latched;  /* first failure of an async call */
        const char *why;   /* reason for closing the connection */

        struct lupw_memory mem;
        struct lupw_stats stats;
        struct lupw_vmm vmm;
        struct lupw_contexts ctx;
        struct lupw_objects obj;
        struct lupw_graphs graphs;
        struct lupw_mapped mapped;
        struct lupw_arrays arrays;
        struct lupw_current_call cur;
        struct lupw_rx rx;
        struct lupw_copy copy;
        struct lupw_dtoh dtoh;
        struct lupw_out out;
        struct lupw_tx tx; /* the write side: reply log, heartbeats (worker/tx.c) */
        struct lupw_loop loop;
        struct lupw_ckpt_state ckpt;
        struct lupw_lease lease; /* worker/lease.c */
        struct lupw_peer peer;   /* copies between servers (worker/peer.c) */
};

/*
 * Control ops (below 256; the files that implement them describe them).
 * worker/dispatch.c runs them and the generated ops through one sequence:
 *   1. the frame's LUP_F_SYNC must be one the op takes (else why_flag);
 *   2. check() decodes and validates the payload: -EBADMSG closes the
 *      connection, and the latched error stays for the next call;
 *   3. a sync op takes the latched async error: it is the answer, and the
 *      op is not executed;
 *   4. the error check() found before the context was needed, if any;
 *   5. the frame's context is bound (need_ctx);
 *   6. run() executes the op, unless the status is an error by now;
 *   7. an async op's status is latched (also when run() failed: the
 *      session outlives the connection); a sync op is answered with the
 *      status and, on success, the `out` payload, unless run() returned
 *      LUPW_ANSWERED (it sent the answer itself: DTOH's data chunks).
 */
union lupw_ctl_args {
        struct lup_htod htod;
        struct lup_dtoh dtoh; /* MEMCPY_DTOH and DTOH_ASYNC */
        struct lup_launch launch;
        uint64_t func; /* FUNC_INFO */
        struct lup_blob blob;
        struct lup_peer_expect peer_expect;
        struct lup_peer_push peer_push;
        const uint8_t *payload; /* generated ops: their handler decodes it */
};
/* the largest reply payload of any op: FUNC_INFO's */
#define LUPW_FUNC_INFO_REPLY_MAX (8 + 8 * (size_t)LUP_MAX_PARAMS + 8 * (size_t)CU_FUNC_ATTRIBUTE_MAX)
enum lupw_sync_rule {
        LUPW_ASYNC_ONLY,
        LUPW_SYNC_ONLY,
        LUPW_SYNC_EITHER
};
#define LUPW_ANSWERED 1
struct lupw_ctl_op {
        const char *name; /* what a latched failure was */
        enum lupw_sync_rule sync;
        const char *why_flag; /* a frame whose LUP_F_SYNC breaks the rule */
        bool need_ctx;
        size_t reply_cap;   /* the largest `out` payload */
        bool keeps_latched; /* a sync op the program never sees (MAPPED_PULL): step 3 is skipped */
        int (*check)(struct lupw_session *s, const struct lup_hdr *h, const uint8_t *p, union lupw_ctl_args *ret,
                     CUresult *ret_early);
        int (*run)(struct lupw_session *s, const struct lup_hdr *h, const union lupw_ctl_args *a, struct lup_wr *out,
                   CUresult *status);
};
/* worker/dispatch.c: the control op with id op, or NULL. */
const struct lupw_ctl_op *lupw_ctl_op(uint16_t op);
/* worker/dispatch.c: runs request h (payload p) through the sequence above:
 * a control op's or, for op >= 256, a generated one's (lupw_ops[]).
 * 0 or -errno (s->why says why). */
int lupw_run_op(struct lupw_session *s, const struct lup_hdr *h, const uint8_t *p);
/* Serves the session until it ends (worker/loop.c); < 0 on a ring failure. */
int lupw_serve(struct lupw_session *s);

/* worker/handles.c */
void lupw_handles_init(struct lupw_session *s);
void lupw_handles_free(struct lupw_session *s);
struct lupw_handle_ent *lupw_handle_ent(struct lupw_session *s, int kind, uint64_t id);
/* A function, or a library kernel standing in for one: the CUDA runtime
 * passes CUkernels wherever functions go (launches, occupancy, attributes)
 * and the driver accepts them. Gives the entry named (a kernel's entry for
 * a kernel; it holds the parameter layout, which does not depend on the
 * context) and the function to call in the bound context. */
CUresult lupw_function(struct lupw_session *s, uint64_t id, struct lupw_handle_ent **ret_e, CUfunction *ret_fn);
extern const struct lupw_ctl_op lupw_ctl_blob;
/* worker/peer.c: copies between servers */
extern const struct lupw_ctl_op lupw_ctl_peer_expect, lupw_ctl_peer_push;
/* A peer connection from the supervisor (LUPD_CTL_PEER, its fd): the
 * copy's bytes are taken into this session's memory, and fd is closed. */
void lupw_peer_serve(struct lupw_session *s, const uint8_t *msg, size_t n, int fd);
void lupw_prov_free(struct lupw_prov *p);
/* worker/link.c: frees every link state and unread JIT answer (the driver's
 * states end with the process: it may be closed already) */
void lupw_jit_free(struct lupw_session *s);
/* Events' recorded state in a checkpoint (object "events"): 0 or -errno;
 * loading after the handles were re-created records them again. */
int lupw_events_save(struct lupw_session *s, struct lupine_ckpt_save *save);
int lupw_events_load(struct lupw_session *s, struct lupine_ckpt_load *ld, char *why, size_t whylen);

/* worker/launch.c */
extern const struct lupw_ctl_op lupw_ctl_launch, lupw_ctl_func_info;
/* Fetches (once) and caches function fn's parameter layout in e. */
CUresult lupw_param_layout(struct lupw_session *s, struct lupw_handle_ent *e, CUfunction fn);

/* worker/copy.c */
extern const struct lupw_ctl_op lupw_ctl_htod, lupw_ctl_dtoh, lupw_ctl_dtoh_async;
/* Sends every finished async copy; with wait, first waits for all of them
 * (before any reply that is a synchronisation point). */
int lupw_flush_pending(struct lupw_session *s, bool wait);
void lupw_copy_free(struct lupw_session *s);
/* Before a context goes: the copies' events, made lazily in whatever
 * context was current, are destroyed (after every copy finished and was
 * sent) and made again at their next use. */
void lupw_copy_drop_events(struct lupw_session *s);
/* Waits for host->device copies still reading the receive buffer. */
void lupw_htod_wait(struct lupw_session *s);

/* worker/checks.c: a module global's address as the client knows it ->
 * where it is now (they differ after a restore reloaded the module) */
uint64_t lupw_xlate(const struct lupw_session *s, uint64_t p);
/* worker/checks.c: whether p lies in a module global the client asked for
 * (its range in *ret when ret is not NULL) */
bool lupw_find_global(const struct lupw_session *s, uint64_t p, struct lup_range *ret);
/* worker/checks.c: the client's context id -> its slot, or NULL */
struct lupw_ctx_slot *lupw_find_ctx(struct lupw_session *s, uint64_t id);

/* worker/ops.c: remembers a setting (replacing an older value of it) */
void lupw_remember(struct lupw_session *s, uint64_t holder, uint32_t kind, uint32_t key, int32_t device, int64_t value);

/* worker/ckpt.c */
/* Synchronises every context of the session. */
CUresult lupw_sync_all(struct lupw_session *s);
/* Saves the session through the configured provider: 0 or -errno (logged).
 * mem: LUP_CKPT_MEM_DURABLE (contents through the provider) and/or
 * LUP_CKPT_MEM_HOT (the manifest says the memory stays on the GPU, exported). */
int lupw_checkpoint(struct lupw_session *s, uint32_t mem);
/* Rebuilds the session from its newest committed checkpoint. */
int lupw_restore(struct lupw_session *s, const char *name);
/* Deletes the session's checkpoints (it ended or expired). */
void lupw_forget_checkpoint(struct lupw_session *s);
/* The provider's configuration string (--checkpoint-config or -dir), or
 * NULL. Inline: worker/ckpt.c and worker/lease.c both open the provider. */
static inline const char *lupw_ckpt_config(const struct lupw_session *s)
{
        const struct lupd_config *cfg = s->cfg;
        return cfg->checkpoint_config[0] ? cfg->checkpoint_config : cfg->checkpoint_dir[0] ? cfg->checkpoint_dir : NULL;
}
void lupw_ckpt_close(struct lupw_session *s);

/* worker/ckpt_now.c */
/* Errors a kernel of the session's own leaves in its context for good:
 * the context is unusable, and so is its memory ("sticky" errors). */
bool lupw_sticky_error(CUresult r);
/* What every checkpoint of a live session needs first: host->device
 * copies done, async device->host copies sent, every context synchronised
 * (its error latched, and in *ret_sync), device printf output and every
 * answer written to the client and the reply log. 0, or -errno when the
 * client stopped reading (what it missed is in the log when it resumes). */
int lupw_quiesce(struct lupw_session *s, CUresult *ret_sync);
/* LUPD_CTL_CHECKPOINT arrived: a checkpoint is wanted between two calls. */
void lupw_ckpt_now_request(struct lupw_session *s);
/* Called by the loop between batches of frames while one is wanted: makes
 * it once the session is quiet (no capture or upload open), or gives up
 * after LUPD_CKPT_NOW_WAIT_MS, reporting LUPD_CTL_CHECKPOINTED either way.
 * Returns true when it did either (the loop looks at its state again). */
bool lupw_ckpt_now_step(struct lupw_session *s);
/* A drain comes first: the wanted checkpoint is reported -ECANCELED. */
void lupw_ckpt_now_cancel(struct lupw_session *s, const char *why);
#define LUPW_CKPT_NOW_POLL_MS 100u /* how often a waiting checkpoint looks again while idle */
#define LUPW_PRECOPY_POLL_MS  5u   /* ... and a drain waiting for its pre-copy (worker/precopy.c) */
/* Loads and opens the configured provider once; -ENOTSUP when none is. */
int lupw_ckpt_open(struct lupw_session *s);

/* worker/hot.c: the hot checkpoint (memory fds, connection hand-back) */
/* Raises RLIMIT_NOFILE's soft limit to the hard one. */
void lupw_raise_nofile(void);
/* Exports every arena chunk as a POSIX fd (*ret_fds: n_chunks of them, in
 * s->mem.chunks order): a created chunk through cuMemExportToShareableHandle,
 * an imported one as a dup of the fd it was imported from. Returns
 * n_chunks or -errno (logged, naming the call and the chunk's origin; no
 * fd left open). */
int lupw_hot_export(struct lupw_session *s, int **ret_fds);
/* Sends the exported fds to the supervisor (LUPD_CTL_HOT_MEM batches) and
 * closes them all, sent or not. 0 or -errno (logged). */
int lupw_hot_send(struct lupw_session *s, int *fds, uint64_t epoch);
/* Hands the client connection (and the part of a frame read from it) back
 * to the supervisor, LUPD_CTL_HANDBACK; s->fd is -1 after success. */
int lupw_handback(struct lupw_session *s, uint64_t epoch);
/* --hot: reads HOT_MAP/CONN/HOT_END from the supervisor. 0 or -errno. */
int lupw_hot_receive(struct lupw_session *s);
/* The manifest's epoch is known: drops fds of another epoch. */
int lupw_hot_check_epoch(struct lupw_session *s, uint64_t epoch);
/* arena_map's question: 1 with *ret imported from the chunk's fd and
 * *ret_fd that fd (the caller owns it: the next hot checkpoint hands out
 * dups of it, since the driver does not export an imported handle again),
 * 0 to create the chunk as usual (no hot restore, or a durable copy to
 * fall back on), -errno to refuse the session (logged). */
int lupw_hot_import(struct lupw_session *s, uint64_t addr, uint64_t size, CUmemGenericAllocationHandle *ret,
                    int *ret_fd);
/* Undoes the accounting of an import whose mapping then failed. */
void lupw_hot_unimport(struct lupw_session *s, uint64_t addr, uint64_t size);
/* Whether the chunk at addr was imported (restore_chunk copies nothing). */
bool lupw_hot_imported(const struct lupw_session *s, uint64_t addr);
void lupw_hot_stats(const struct lupw_session *s, size_t *ret_chunks, uint64_t *ret_bytes);
/* After the restore: serve the connection LUPD_CTL_CONN gave, if any
 * (1), with the bytes of the frame read in part. 0 if none, -errno. */
int lupw_hot_adopt_conn(struct lupw_session *s);
/* The restore is over: closes fds nobody imported (with a warning). */
void lupw_hot_done(struct lupw_session *s);
void lupw_hot_free(struct lupw_session *s);

/* worker/hello.c */
int lupw_refuse(struct lupw_session *s, const struct lup_hdr *req, CUresult status, const char *msg);
/* The same, on connection fd (a client that is not the session's). */
int lupw_refuse_on(struct lupw_session *s, int fd, struct lup_tls *tls, const struct lup_hdr *req, CUresult status,
                   const char *msg);
/* Loads the driver, retains device 0's primary context, pins buffers.
 * NULL on success, else a reason (and *ret_status the CUresult to report). */
const char *lupw_open_device(struct lupw_session *s, CUresult *ret_status);
int lupw_reserve_arena(struct lupw_session *s, uint32_t slot, char *err, size_t errlen);
/* Frees the arena and its range again (nothing mapped in it yet, or at the end). */
void lupw_unreserve_arena(struct lupw_session *s);
/* The HELLO reply (outside the reply stream), then the stream bytes the
 * client missed (see worker/tx.h). */
int lupw_send_hello_reply(struct lupw_session *s, const struct lup_hdr *req, const struct lup_hello *hello);
int lupw_setup_session(struct lupw_session *s, const struct lup_hdr *req, const struct lup_hello *hello);
/* ASSIGN or ATTACH; *ret_tls says whether the TLS trailer came, with its
 * ticket in ret_ticket. */
int lupw_parse_assign(const uint8_t *msg, size_t n, uint32_t want_type, uint32_t *ret_slot, struct lup_hdr *ret_req,
                      struct lup_hello *ret_hello, bool *ret_tls, uint8_t ret_ticket[LUP_TICKET_SIZE],
                      const char **ret_why);

/* worker/tls_conn.c: the second TLS handshake on a connection the
 * supervisor handed off, and the client's HANDOFF frame with the ticket
 * (lupine/wire.h, "TLS"). Returns the TLS session, or NULL after logging
 * why (the caller closes fd). Bounded by LUPD_TLS_HANDOFF_TIMEOUT_MS. */
struct lup_tls *lupw_tls_accept(struct lupw_session *s, int fd, const struct lup_hdr *hello_req,
                                const uint8_t ticket[LUP_TICKET_SIZE]);
/* The client's first frame in that session (hb, LUP_HDR_SIZE bytes): 0 if
 * it is the HANDOFF for hello_req (op, length, lane and seq); with got (the
 * LUP_TICKET_SIZE bytes that follow it), also only if got is the ticket,
 * compared in constant time. -EBADMSG (the header) or -EACCES (the
 * ticket), with *ret_why. Pure: tests/fuzz/fuzz_tls_server.c fuzzes it. */
int lupw_handoff_check(const uint8_t hb[LUP_HDR_SIZE], const uint8_t *got, const uint8_t ticket[LUP_TICKET_SIZE],
                       const struct lup_hdr *hello_req, const char **ret_why);
void lupw_tls_free(struct lupw_session *s);
/* Makes the second handshake's context from --tls-cert and --tls-key, once:
 * 0, or -EINVAL (logged). */
int lupw_tls_ctx_load(struct lupw_session *s);
void lupw_ctl_send(struct lupw_session *s, uint32_t type, int32_t status, uint32_t slot, bool with_slot);

/* ---- worker/stats.c */

/* A report to the supervisor when a second has passed since the last and
 * something changed (the loop calls it before it sleeps). Returns the ns
 * until a report of what changed is due, or 0 when nothing waits: the
 * loop then wakes for it, so an idle session's last numbers are told. */
uint64_t lupw_stats_tick(struct lupw_session *s);
/* worker/sup_beat.c: the heartbeat thread (LUPD_CTL_HEARTBEAT every
 * interval_ms on ctl_fd; 0 or -errno, logged), its end, and the GPUs the
 * session uses, noted by the main thread for the next beat. */
int lupw_beat_start(int ctl_fd, int interval_ms);
void lupw_beat_stop(void);
void lupw_beat_devices(const struct lupw_session *s);
/* Progress of a checkpoint or restore (phase LUPD_WORK_*): a log line at
 * every tenth of the bytes or every 2 s, a report at most twice a second;
 * done == total ends the phase with a line of the rate. */
void lupw_progress(struct lupw_session *s, int phase, uint64_t done, uint64_t total);
/* The same, the log lines naming it `word` (a pre-copy is a checkpoint's
 * phase to the supervisor, "pre-copy" in the log). */
void lupw_progress_named(struct lupw_session *s, int phase, const char *word, uint64_t done, uint64_t total);
/* A checkpoint was committed now: the next report says so at once. */
void lupw_stats_committed(struct lupw_session *s);
/* A STATS report now, unpaced (after a restore: the epoch it restored). */
void lupw_stats_report_now(struct lupw_session *s);
/* One call of op (worker/dispatch.c): its request's payload bytes and the
 * nanoseconds it took. */
void lupw_op_count(struct lupw_session *s, uint16_t op, uint64_t bytes_in, uint64_t ns);
/* Bytes of op's answers sent to the client (replies, reply chunks, DATA). */
static inline void lupw_op_bytes_out(struct lupw_session *s, uint16_t op, uint64_t n)
{
        if (s->stats.ops && op < LUPD_OP_IDS)
                s->stats.ops[op].bytes_out += n;
}
/* Sends what the op table holds now (before DRAINED, at the end). */
void lupw_op_stats_flush(struct lupw_session *s);

/* worker/dispatch.c: executes every complete frame received: 0, -EPIPE when the client
 * stopped reading (it may resume), or another -errno for a protocol
 * violation (s->why says which). */
int lupw_process_input(struct lupw_session *s);

/* worker/tx.c: replies, batched in s->out */
int lupw_reply(struct lupw_session *s, const struct lup_hdr *req, uint16_t flags, CUresult status, const void *payload,
               size_t len);
int lupw_flush_out(struct lupw_session *s);
/* Device printf (worker/tx.c): the worker's stdout becomes a memfd
 * before the driver loads; lupw_reply() sends what the driver wrote there
 * as OUTPUT frames ahead of the reply. */
void lupw_output_init(void);
int lupw_output_forward(struct lupw_session *s);
void lupw_latch(struct lupw_session *s, CUresult r, const char *what);
CUresult lupw_take_latched(struct lupw_session *s);

/* worker/arena_map.c */
void lupw_release_all(struct lupw_session *s);
extern const struct arena_ops lupw_arena_ops;
/* Creates (or, in a hot restore, imports) a chunk of prop's device at
 * [addr, addr + size) of the arena, mapped read-write for that device,
 * and adds it to s->mem.chunks; *ret (if not NULL) its handle. 0 or a
 * positive CUresult. The POSIX fd handle type must be in prop. */
int lupw_map_chunk(struct lupw_session *s, uint64_t addr, uint64_t size, const CUmemAllocationProp *prop,
                   CUmemGenericAllocationHandle *ret);
/* Unmaps and releases the chunk at addr. */
void lupw_unmap_chunk(struct lupw_session *s, uint64_t addr, uint64_t size);

/* worker/checks.c: the index of the first client mapping that ends after
 * p, and whether [p, p + n) lies in client mappings that follow each other */
size_t lupw_vmm_map_index(const struct lupw_session *s, uint64_t p);
bool lupw_vmm_covers(const struct lupw_session *s, uint64_t p, uint64_t n);

/* worker/vmm.c */
/* The records a checkpoint keeps (arrays allocated: lup_ckpt_vmm_free). 0 or -ENOMEM. */
int lupw_vmm_describe(const struct lupw_session *s, struct lup_ckpt_vmm *ret);
/* Rebuilds them after restore_arena and before the memory is copied back:
 * reservations, allocations at their homes (imported from fds in a hot
 * restore), mappings with their access. 0, or -errno with why. */
int lupw_vmm_restore(struct lupw_session *s, const struct lup_ckpt_vmm *v, char *why, size_t whylen);
/* Unmaps and releases all of it (the session ends). */
void lupw_vmm_release(struct lupw_session *s);

#endif
