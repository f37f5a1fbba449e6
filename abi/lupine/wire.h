/* SPDX-License-Identifier: MIT */
/*
 * lupine wire protocol: frame header, control op ids, limits.
 *
 * This header is part of the stable public contract (see docs/protocol.md).
 * All integers on the wire are little-endian. A frame is a fixed 40-byte
 * header followed by `len` bytes of payload. Driver-API op ids (>= 256) are
 * generated from abi/cuda_api.spec into lupine/ops.h; the control ops below
 * are fixed here.
 */
#ifndef LUPINE_WIRE_H
#define LUPINE_WIRE_H

#include <stdint.h>

#define LUP_PROTO_MAGIC   0x4c555031u /* "LUP1" */
#define LUP_PROTO_VERSION 1u

/* Frame header, exactly 40 bytes on the wire (encoded field by field by
 * common/frame.c; the struct is the in-memory form, not a wire overlay). */
struct lup_hdr {
        uint32_t len;    /* payload bytes following the header */
        uint16_t op;     /* LUP_OP_* or a generated LUP_OPC_* id */
        uint16_t flags;  /* LUP_F_* */
        uint32_t lane;   /* client thread id; replies go to this lane */
        uint32_t status; /* replies: CUresult of the call; requests: 0 */
        uint64_t seq;    /* requests: per-session sequence number (1, 2, ...);
                          * replies: the seq being answered */
        uint64_t ctx;    /* requests: the caller's current context id (0 = none);
                          * replies: last sequence number executed */
};
#define LUP_HDR_SIZE 40u

/* flags */
#define LUP_F_SYNC  0x0001u /* the sender waits for a reply on this lane */
#define LUP_F_REPLY 0x0002u /* this frame answers a LUP_F_SYNC request */
#define LUP_F_MORE  0x0004u /* reply data continues in further frames */
#define LUP_F_KNOWN (LUP_F_SYNC | LUP_F_REPLY | LUP_F_MORE)

/* control ops (0..255) */
enum lup_ctl_op {
        LUP_OP_HELLO       = 1,  /* first frame of every connection */
        LUP_OP_GOODBYE = 2,      /* orderly close, or server going away; from the server it
                                  * may carry u16 n, n bytes: the endpoint the session
                                  * went to (lupinectl migrate), which the client tries
                                  * first when it reconnects (LUP_GOODBYE_TO_MAX bytes) */
        LUP_OP_PING        = 3,  /* heartbeat; sync */
        LUP_OP_ADMIN       = 4,  /* operator request, first frame instead of HELLO;
                                  * UNIX sockets only; see "ADMIN" below */
        LUP_OP_ALIVE       = 5,  /* server -> client only: "busy, alive" while a call
                                  * runs (see "Heartbeats" below); no payload */
        /* 6 is LUP_OP_NVML, first frame instead of HELLO: lupine/nvml_wire.h */
        LUP_OP_HANDOFF = 7,      /* TLS only: the supervisor's answer to a HELLO it
                                  * admitted, and the client's first frame on the
                                  * worker's TLS stream; see "TLS" below */
        LUP_OP_MEMCPY_HTOD = 16, /* u64 dst, u64 stream, bytes...   (one chunk) */
        LUP_OP_MEMCPY_DTOH = 17, /* u64 src, u64 size, u64 stream -> bytes (chunked reply) */
        LUP_OP_LAUNCH      = 18, /* see "LAUNCH payload" below; async */
        LUP_OP_FUNC_INFO   = 19, /* u64 function id -> see "FUNC_INFO reply"; sync */
        LUP_OP_BLOB        = 20, /* u64 blob id, u64 total, u64 offset, bytes; async */
        LUP_OP_DTOH_ASYNC  = 21, /* u64 src, u64 size, u64 stream, u64 token; async */
        LUP_OP_DATA        = 22, /* server -> client: u64 token, u64 offset, bytes;
                                  * status != 0 ends the token with that error */
        LUP_OP_OUTPUT      = 23, /* server -> client: bytes the GPU's printf wrote,
                                  * sent before the reply of the call that flushed
                                  * them; the client writes them to its stdout */
        LUP_OP_GRAPH_KERNEL = 32,     /* u64 node, u64 graph or exec, u32 mode (LUP_GRAPH_KERNEL_*),
                                   * then a LAUNCH payload (stream 0); sync (worker/graph_kernel.c) */
        LUP_OP_GRAPH_KERNEL_GET = 33, /* u64 node -> u64 function, u32 grid[3], block[3], shared
                                       * bytes, u32 n, n parameter bytes; sync */
        LUP_OP_MAPPED_PUSH = 36,      /* u64 va, then spans (u64 offset, u32 n, n bytes): the host's
                                  * changes to a mapped range; async (worker/mapped.c) */
        LUP_OP_MAPPED_PULL = 37,      /* u64 va, u64 from -> u64 next, then spans as above: the
                                  * GPU's changes from offset from on; sync */
        LUP_OP_PEER_EXPECT = 38,      /* on the destination's server: u64 dst, u64 size -> ticket[16],
                                       * u16 n, n bytes: the session's key; sync (worker/peer.c) */
        LUP_OP_PEER_PUSH = 39,        /* on the source's server: u64 src, u64 size, u64 dst, ticket[16],
                                       * u16 n, key, u16 m, endpoint -> u32 outcome (LUP_PEER_*),
                                       * u32 the destination's CUresult, u16 n, message; sync */
        LUP_OP_PEER_DATA = 40,        /* daemon -> daemon only, on a peer connection: u64 offset,
                                       * bytes; see "Copies between servers" below */
        LUP_OP_CTL_MAX     = 255,
};

/* lupHostMapCreate's flags: the driver's CU_MEMHOSTREGISTER_* bits, and this
 * one: the range is managed memory (the shim's cuMemAllocManaged), whose
 * exchanges may resend unchanged bytes between changed ones (worker/mapped.c) */
#define LUP_HOSTMAP_MANAGED     (1u << 31)
/* the shim's own bit, kept with the mirror: managed memory attached to the
 * host (CU_MEM_ATTACH_HOST) at allocation; the worker ignores it */
#define LUP_HOSTMAP_ATTACH_HOST (1u << 30)

/* hard limits; every one of them is checked on receive */
#define LUP_MAX_PAYLOAD      ((1u << 20) + 4096u) /* biggest frame payload accepted */
#define LUP_BULK_CHUNK       (1u << 20)         /* bulk data is cut into chunks of this size */
#define LUP_MAX_NAME         128u               /* session name bytes */
#define LUP_MAX_DEVICES      16u
#define LUP_MAX_DEV_NAME     256u
#define LUP_MAX_LANES        4096u              /* client threads per connection */
#define LUP_MAX_COPY         (1ull << 40)       /* largest single copy / memset */
#define LUP_MAX_ALLOCS       (1u << 20)         /* live allocations per session */
#define LUP_MAX_CONTEXTS     256u               /* live contexts per session */
#define LUP_TOKEN_SIZE       16u
#define LUP_MAX_STR          4096u              /* names (kernels, globals) */
#define LUP_MAX_BLOB         (1ull << 30)       /* one uploaded image */
#define LUP_MAX_BLOB_BYTES   (2ull << 30)       /* uploads in flight per session */
#define LUP_MAX_HANDLES      (1u << 20)         /* live handles per session */
#define LUP_MAX_PARAM_BYTES  32764u             /* kernel parameter space (CUDA 12.1+) */
#define LUP_MAX_LAUNCH_ATTRS 16u
#define LUP_MAX_ASYNC_DTOH   (16ull << 20)      /* larger async DtoH copies run synchronously */
#define LUP_FIRST_HANDLE_ID  0x1000000ull       /* client-minted handle ids start here, step 16 */

/* Context ids. A device's primary context has a fixed id; contexts the
 * client creates get ids it mints from LUP_FIRST_CTX_ID, step LUP_CTX_ID_STEP. */
#define LUP_CTX_ID_STEP      0x100ull
#define LUP_PRIMARY_CTX_ID(dev) (0x10000ull + (uint64_t)(dev) * LUP_CTX_ID_STEP)
#define LUP_FIRST_CTX_ID     0x100000ull
/* The device whose primary context id is `id`, or -1. */
static inline int lup_primary_ctx_device(uint64_t id)
{
        if (id < LUP_PRIMARY_CTX_ID(0) || id >= LUP_PRIMARY_CTX_ID(LUP_MAX_DEVICES) ||
            (id - LUP_PRIMARY_CTX_ID(0)) % LUP_CTX_ID_STEP)
                return -1;
        return (int)((id - LUP_PRIMARY_CTX_ID(0)) / LUP_CTX_ID_STEP);
}

/* The VA arena: session slot n owns [lup_arena_slot_base(n), +LUP_ARENA_SIZE):
 * LUP_ARENA_BASE + n*LUP_ARENA_SIZE, except that the slots from
 * LUP_ARENA_HOLE_FIRST on sit LUP_ARENA_HOLE_SLOTS sizes higher. The hole,
 * [0x550000000000, 0x580000000000), is where x86-64 Linux puts a PIE
 * executable (2/3 of the 47-bit space, 0x555555554000, plus up to 1 TiB of
 * ASLR) and its heap after it: a slot there collided with the worker's and
 * the client's own program (issue 15, finding 5). All 64 slots end below
 * 0x630000000000, under the shared libraries' area at the top. */
#define LUP_ARENA_BASE       0x200000000000ull
#define LUP_ARENA_SIZE       (1ull << 40)
#define LUP_ARENA_SLOTS      64u
#define LUP_ARENA_GRANULE    (2ull << 20)
#define LUP_ARENA_HOLE_FIRST 53u
#define LUP_ARENA_HOLE_SLOTS 3u

static inline uint64_t lup_arena_slot_base(uint32_t slot)
{
        return LUP_ARENA_BASE +
               ((uint64_t)slot + (slot >= LUP_ARENA_HOLE_FIRST ? LUP_ARENA_HOLE_SLOTS : 0)) * LUP_ARENA_SIZE;
}

/* The slot whose range begins at base, or -1. */
static inline int lup_arena_slot_of(uint64_t base)
{
        for (uint32_t n = 0; n < LUP_ARENA_SLOTS; n++)
                if (lup_arena_slot_base(n) == base)
                        return (int)n;
        return -1;
}

/*
 * HELLO request payload:
 *   u32 magic, u32 proto_version, u32 cuda_version, u32 flags (LUP_HELLO_*),
 *   u16 name_len, name bytes (1..LUP_MAX_NAME, [A-Za-z0-9._-]),
 *   token[16] (all zero for a new session), u64 last_seq_seen,
 *   then, in this order, only if its flag is set:
 *     LUP_HELLO_HEARTBEAT: u32 heartbeat_ms (LUP_MIN_HEARTBEAT_MS..LUP_MAX_HEARTBEAT_MS)
 *     LUP_HELLO_RESEND:    u64 rx_bytes (reply-stream bytes the client received)
 *     LUP_HELLO_AUTH:      u16 len, a bearer token (1..LUP_MAX_AUTH bytes; the
 *                          daemon's --auth-tokens holds its SHA-256)
 *     LUP_HELLO_AVOID_SLOTS: u64 avoid: bit n set when arena slot n is taken
 *                          in the client's address space (by its sessions
 *                          on other servers); a new session gets another
 *                          slot, or is refused "server full". A resumed
 *                          session keeps its slot whatever the mask.
 *     LUP_HELLO_PEER:      ticket[16]: a daemon connecting for one copy
 *                          into session `name` (its key on that server, as
 *                          PEER_EXPECT answered it), token all zero, no
 *                          other flag; see "Copies between servers".
 *
 * HELLO reply payload (status = CUresult; 0 = accepted):
 *   u32 magic, u32 proto_version, u32 driver_version, u32 backend (LUP_BACKEND_*),
 *   token[16], u64 arena_base, u64 arena_size, u64 last_executed_seq,
 *   u32 device_count, then per device:
 *     u16 name_len, name, uuid[16], u64 total_mem,
 *     u32 n_attr, n_attr x (i32 value, u32 result)   (attribute ids 1..n_attr)
 *   then, only if the request set LUP_HELLO_RESEND:
 *     u64 resend_from, u64 tx_end: the server sends the reply-stream bytes
 *     [resend_from, tx_end) right after this reply. resend_from is the
 *     client's rx_bytes when the server still holds them, else tx_end
 *     (nothing is resent; what the client had not received is lost).
 * A refused HELLO carries status != 0 and payload u16 msg_len, msg (UTF-8).
 */
enum lup_backend_kind { LUP_BACKEND_CUDA = 1, LUP_BACKEND_SIM = 2 };

#define LUP_HELLO_HEARTBEAT 0x1u /* the client wants ALIVE frames while a call runs */
#define LUP_HELLO_RESEND    0x2u /* the client counts the reply stream; resend what it missed */
#define LUP_HELLO_AUTH        0x4u /* a bearer token follows (LUPINE_TOKEN) */
#define LUP_HELLO_AVOID_SLOTS 0x8u /* a mask of arena slots this session must not get follows */
#define LUP_HELLO_PEER        0x10u /* a daemon's peer connection for one copy: ticket[16] follows */
#define LUP_HELLO_KNOWN \
        (LUP_HELLO_HEARTBEAT | LUP_HELLO_RESEND | LUP_HELLO_AUTH | LUP_HELLO_AVOID_SLOTS | LUP_HELLO_PEER)
#define LUP_MAX_AUTH 256u /* bearer token bytes */

/*
 * TLS (tls://HOST:PORT; docs/tls.md). Each connection has two TLS 1.3
 * sessions, one after the other on the same TCP stream:
 *   1. with the supervisor: the client sends HELLO; a refusal is answered
 *      as on a plain connection. An admitted HELLO is answered with a
 *      HANDOFF frame (flags LUP_F_REPLY, lane and seq of the HELLO,
 *      payload ticket[LUP_TICKET_SIZE], random, one use). The supervisor
 *      then stops using the stream without a TLS closure alert, and passes
 *      the socket, the HELLO and the ticket to the session's worker.
 *   2. with the worker: the client drops its first TLS state, starts a new
 *      handshake on the same socket, and sends HANDOFF (flags LUP_F_SYNC,
 *      the HELLO's lane and seq, payload: the ticket). The worker answers
 *      with the HELLO reply, and the session goes on as on a plain socket.
 * The ticket ties the second session to the first: only the client that
 * authenticated in the first can use the second.
 */
#define LUP_TICKET_SIZE 16u

/*
 * Copies between servers (LUPINE_SERVER=A,B; docs/running.md, "Several
 * servers"). A copy from device memory on server A to device memory on
 * server B goes from A's daemon to B's, never through the client:
 *   1. the client sends PEER_EXPECT to B's session (in that session's call
 *      order, so everything it sent B before has run). B checks dst/size,
 *      keeps a random ticket for them (one use, LUP_PEER_TICKET_S seconds)
 *      and answers ticket and its session key;
 *   2. the client sends PEER_PUSH to A's session: src, size, dst, ticket,
 *      key, and B's endpoint as the client reaches it. A's worker finishes
 *      the work its context has in flight, connects to B's lupined and
 *      sends a HELLO with LUP_HELLO_PEER (name: the key, the ticket).
 *      B's supervisor hands the connection to the worker of that key
 *      (never to a new session); the worker checks the ticket, finishes
 *      the work of its context in flight, and answers the HELLO (status 0,
 *      no payload) or refuses it;
 *   3. A sends the bytes as PEER_DATA frames (u64 offset, then at most
 *      LUP_BULK_CHUNK bytes; offsets in order, covering size exactly); B
 *      writes them to dst and, after the last, sends one reply frame (op
 *      PEER_DATA, flags LUP_F_REPLY, status: the CUresult of its writes);
 *   4. A answers PEER_PUSH: outcome LUP_PEER_DONE with B's CUresult, or
 *      LUP_PEER_RETRY (B's session was not there, its ticket unknown: B
 *      restarted, drained, or its client is resuming) with a message: the
 *      client sends both steps again; LUP_PEER_DONE with
 *      CUDA_ERROR_NOT_PERMITTED and a message when TLS to B failed (its
 *      certificate). A CUresult of A's own (reading src) is PEER_PUSH's
 *      status.
 * A peer connection carries no bearer token: the ticket, which only the
 * session's own client was given, is what admits it. To a tls:// server
 * it is a TLS connection like a client's, hand-off included; A checks B's
 * certificate against its --peer-tls-ca and presents its own --tls-cert.
 */
#define LUP_PEER_TICKET_S 60u /* a PEER_EXPECT ticket expires unused after this */
#define LUP_PEER_CHUNK \
        (4u << 20)           /* the daemons stage a copy this much at a time (frames of
                                      * LUP_BULK_CHUNK): a frame never spans two such pieces */
#define LUP_PEER_IO_MS 30000 /* a peer connection that moves no byte for this long fails */
enum lup_peer_outcome {
        LUP_PEER_DONE = 0,
        LUP_PEER_RETRY = 1
};
#define LUP_MIN_HEARTBEAT_MS 20u
#define LUP_MAX_HEARTBEAT_MS 3600000u

/*
 * Heartbeats and the reply stream.
 *
 * The reply stream is every REPLY and DATA frame the server sends after the
 * HELLO reply, counted in bytes over the session's life (not per
 * connection); ALIVE and GOODBYE frames are not part of it. The server keeps
 * the newest part of it (bounded) until the client acknowledges it, so that
 * answers lost with a connection are sent again on resume.
 *
 * PING payload: empty, or u64 rx_bytes: the reply-stream bytes the client
 * had received when it sent the PING (at most what the server has sent);
 * the server may forget everything before it.
 *
 * ALIVE (server -> client, no payload, seq = the call being executed, ctx =
 * the last call finished): sent only to a client whose HELLO asked for
 * heartbeats, every heartbeat_ms / 2 while one call keeps the server busy
 * and nothing else was sent, so a client can tell a long call from a dead
 * connection.
 */

/*
 * LAUNCH payload:
 *   u64 function id, u32 grid[3], u32 block[3], u32 shared bytes, u64 stream,
 *   u32 flags (LUP_LAUNCH_COOPERATIVE), u32 n_attrs (<= LUP_MAX_LAUNCH_ATTRS),
 *   n_attrs x (u32 CUlaunchAttributeID, u8 value[64]),
 *   u32 param_bytes (<= LUP_MAX_PARAM_BYTES), the parameters laid out at the
 *   offsets cuFuncGetParamInfo gives (as for CU_LAUNCH_PARAM_BUFFER_POINTER).
 *
 * FUNC_INFO reply:
 *   u32 n_params, n_params x (u32 offset, u32 size),
 *   u32 n_attrs, n_attrs x (i32 value, u32 CUresult)  (CUfunction_attribute 0..n-1)
 */
/*
 * ADMIN request (sync, seq 0, the first and only frame of its connection):
 *   u16 command (LUP_ADMIN_*)
 * ADMIN reply (LUP_F_REPLY; status 0 or an errno value such as EPERM):
 *   u16 text_len, text (UTF-8): STATUS: a JSON object; otherwise a message.
 * The server then closes the connection.
 */
enum lup_admin_cmd {
        LUP_ADMIN_STATUS = 1,
        LUP_ADMIN_DRAIN = 2,
        LUP_ADMIN_UPGRADE = 3,
        LUP_ADMIN_INFO = 4,        /* the host's GPUs, as JSON */
        LUP_ADMIN_KILL = 5,        /* argument "keep:NAME" or "delete:NAME" */
        LUP_ADMIN_CONFIG_SHOW = 6, /* what can change at run time, as JSON */
        LUP_ADMIN_CONFIG_SET = 7,  /* argument "KEY=VALUE" */
        LUP_ADMIN_DIAG = 8,        /* checks, as JSON (lupinectl diag) */
        LUP_ADMIN_CHECKPOINT = 9,  /* argument NAME: a durable checkpoint of that session now */
        LUP_ADMIN_MIGRATE = 10,    /* argument "NAME TARGET": move the session to the lupined at TARGET
                                    * (an endpoint, as in LUPINE_SERVER) through the shared store */
        LUP_ADMIN_MIGRATION = 11,  /* argument NAME: how its last migration went, one line:
                                    * "running DONE TOTAL", "done EPOCH BYTES MS TARGET" or
                                    * "failed WHY"; ENOENT when none is known */
};
#define LUP_ADMIN_MAX_TEXT 65535u /* what a u16 prefix can carry */
#define LUP_GOODBYE_TO_MAX 255u   /* a GOODBYE's endpoint */

#define LUP_LAUNCH_COOPERATIVE 1u
#define LUP_MAX_PARAMS 4096u

/* lupGraphList (abi/cuda_api.spec): what it lists, LUP_GRAPH_LIST_PAGE
 * node ids an answer (edges: from, to pairs), from `offset` on */
enum lup_graph_list {
        LUP_GRAPH_LIST_NODES = 0,      /* handle: a graph */
        LUP_GRAPH_LIST_ROOTS = 1,      /* handle: a graph */
        LUP_GRAPH_LIST_EDGES = 2,      /* handle: a graph */
        LUP_GRAPH_LIST_DEPS = 3,       /* handle: a node */
        LUP_GRAPH_LIST_DEPENDENTS = 4, /* handle: a node */
        LUP_GRAPH_LIST_CAPTURE = 5,    /* handle: a stream: its capture's dependencies */
};
#define LUP_GRAPH_LIST_PAGE 16u

/* LUP_OP_GRAPH_KERNEL's modes */
enum lup_graph_kernel_mode {
        LUP_GRAPH_KERNEL_ADD = 0,      /* a new kernel node `node` (an id the shim minted) in graph */
        LUP_GRAPH_KERNEL_SET = 1,      /* node's parameters (cuGraphKernelNodeSetParams) */
        LUP_GRAPH_KERNEL_EXEC_SET = 2, /* node's in exec (cuGraphExecKernelNodeSetParams) */
};
#define LUP_GRAPH_KERNEL_PREFIX 20u
#define LUP_MAX_ATTRS 256u

#endif
