/* SPDX-License-Identifier: MIT */
/* The shim's connection: endpoint selection, HELLO, framed calls. */
#include "client.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "frame.h"
#include "image.h"
#include "log.h"
#include "net.h"
#include "ops.h"

#define LUPC_DEFAULT_SERVER "127.0.0.1:14833"
#define LUPC_MAX_ENDPOINTS 8

/* One thread waiting for a reply. */
struct lupc_waiter {
        uint64_t seq;
        uint8_t *rep;
        size_t cap;
        size_t len;
        CUresult status;
        bool done;
        struct lupc_waiter *next;
};

/* A destination for asynchronous device->host data (DATA frames). */
struct lupc_landing {
        uint64_t token;
        uint8_t *dst;
        uint64_t size;
        uint64_t received;
        struct lupc_landing *next;
};

struct lupc_conn {
        int fd;
        pthread_mutex_t send_lock;
        uint64_t next_seq;              /* under send_lock */
        pthread_mutex_t recv_lock;      /* waiters, reader role, dead */
        pthread_cond_t recv_cond;
        struct lupc_waiter *waiters;
        struct lupc_landing *landings;  /* async DtoH copies in flight */
        bool reader_busy;
        bool dead;
        uint32_t driver_version;
        int backend;
        uint8_t token[LUP_TOKEN_SIZE];  /* proves the session is ours on resume */
};

static struct lupc_conn conn = {
        .fd = -1,
        .send_lock = PTHREAD_MUTEX_INITIALIZER,
        .recv_lock = PTHREAD_MUTEX_INITIALIZER,
        .recv_cond = PTHREAD_COND_INITIALIZER,
        .next_seq = 1,
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static CUresult init_result = CUDA_ERROR_NOT_INITIALIZED;
static atomic_bool init_done;
static atomic_uint next_lane;
static __thread uint32_t my_lane_plus1;
static atomic_uint_fast64_t next_handle = LUP_FIRST_HANDLE_ID;

uint64_t lupc_mint_handle(void)
{
        return atomic_fetch_add(&next_handle, 16);
}

static uint32_t my_lane(void)
{
        if (!my_lane_plus1)
                my_lane_plus1 = (atomic_fetch_add(&next_lane, 1) % LUP_MAX_LANES) + 1;
        return my_lane_plus1 - 1;
}

bool lupc_initialized(void)
{
        return atomic_load_explicit(&init_done, memory_order_acquire) && init_result == CUDA_SUCCESS;
}

uint32_t lupc_driver_version(void)
{
        return conn.driver_version;
}

int lupc_backend_kind(void)
{
        return conn.backend;
}

CUresult lupc_protocol_error(const char *what)
{
        static atomic_int once;
        if (!atomic_exchange(&once, 1))
                lup_err("protocol error: malformed reply to %s (server and client versions differ?)", what);
        return CUDA_ERROR_UNKNOWN;
}

static void drop_landing_locked(struct lupc_landing *l);

/* Marks the connection lost: every waiter completes with DEVICE_UNAVAILABLE. */
static void conn_fail_locked(const char *why)
{
        if (!conn.dead) {
                conn.dead = true;
                lup_err("connection to lupined lost (%s); CUDA calls now fail with CUDA_ERROR_DEVICE_UNAVAILABLE", why);
        }
        while (conn.landings)
                drop_landing_locked(conn.landings);
        for (struct lupc_waiter *w = conn.waiters; w; w = w->next) {
                if (!w->done) {
                        w->done = true;
                        w->status = CUDA_ERROR_DEVICE_UNAVAILABLE;
                }
        }
        pthread_cond_broadcast(&conn.recv_cond);
}

static struct lupc_waiter *find_waiter_locked(uint64_t seq)
{
        for (struct lupc_waiter *w = conn.waiters; w; w = w->next)
                if (w->seq == seq)
                        return w;
        return NULL;
}

static void unlink_waiter_locked(struct lupc_waiter *me)
{
        for (struct lupc_waiter **pp = &conn.waiters; *pp; pp = &(*pp)->next) {
                if (*pp == me) {
                        *pp = me->next;
                        return;
                }
        }
}

static struct lupc_landing *find_landing_locked(uint64_t token)
{
        for (struct lupc_landing *l = conn.landings; l; l = l->next)
                if (l->token == token)
                        return l;
        return NULL;
}

static void drop_landing_locked(struct lupc_landing *l)
{
        for (struct lupc_landing **pp = &conn.landings; *pp; pp = &(*pp)->next) {
                if (*pp == l) {
                        *pp = l->next;
                        free(l);
                        return;
                }
        }
}

/* Asynchronous device->host data: straight into the caller's buffer. */
static int read_data_frame(const struct lup_hdr *h, const char **why)
{
        uint8_t b[16];
        if (h->len < sizeof(b)) {
                *why = "short DATA frame";
                return -EBADMSG;
        }
        int rc = lup_read_full(conn.fd, b, sizeof(b));
        if (rc < 0) {
                *why = "server closed the connection";
                return rc;
        }
        uint64_t token = lup_le64(b), off = lup_le64(b + 8), n = h->len - sizeof(b);
        pthread_mutex_lock(&conn.recv_lock);
        struct lupc_landing *l = find_landing_locked(token);
        pthread_mutex_unlock(&conn.recv_lock);
        /* only the reader touches landings' progress; the list itself is locked */
        if (!l || off != l->received || n > l->size - l->received) {
                *why = "DATA frame for an unknown copy or past its end";
                return -EBADMSG;
        }
        rc = lup_read_full(conn.fd, l->dst + off, n);
        if (rc < 0) {
                *why = "server closed the connection";
                return rc;
        }
        l->received += n;
        if (h->status != 0 || l->received == l->size) {
                /* a failed copy is reported by the next synchronous call (the
                 * worker latched it), as CUDA reports asynchronous errors */
                pthread_mutex_lock(&conn.recv_lock);
                drop_landing_locked(l);
                pthread_mutex_unlock(&conn.recv_lock);
        }
        return 0;
}

static uint64_t spin_ns = 50000; /* LUPINE_SPIN_US, read at init */

static uint64_t mono_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Reads a frame header, polling for a short while first: a reply usually
 * comes within tens of microseconds, and sleeping costs a wake-up. */
static int read_header(uint8_t *hb)
{
        size_t got = 0;
        if (spin_ns) {
                uint64_t deadline = mono_ns() + spin_ns;
                while (got < LUP_HDR_SIZE) {
                        ssize_t k = recv(conn.fd, hb + got, LUP_HDR_SIZE - got, MSG_DONTWAIT);
                        if (k > 0) {
                                got += (size_t)k;
                                continue;
                        }
                        if (k == 0)
                                return -ECONNRESET;
                        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                                return -errno;
                        if (mono_ns() >= deadline)
                                break;
                }
        }
        return got == LUP_HDR_SIZE ? 0 : lup_read_full(conn.fd, hb + got, LUP_HDR_SIZE - got);
}

/* Reads one frame with the reader role held (recv_lock NOT held).
 * Returns 0 or -errno; on protocol errors sets *why. */
static int read_one_frame(const char **why)
{
        uint8_t hb[LUP_HDR_SIZE];
        struct lup_hdr h;
        int rc = read_header(hb);
        if (rc < 0) {
                *why = rc == -ECONNRESET ? "server closed the connection" : strerror(-rc);
                return rc;
        }
        if (lup_hdr_decode(hb, &h, why) < 0)
                return -EBADMSG;
        if (h.op == LUP_OP_GOODBYE) {
                *why = "server is going away";
                return -ECONNRESET;
        }
        if (h.op == LUP_OP_DATA)
                return read_data_frame(&h, why);
        if (!(h.flags & LUP_F_REPLY)) {
                *why = "unexpected request frame from server";
                return -EBADMSG;
        }
        pthread_mutex_lock(&conn.recv_lock);
        struct lupc_waiter *w = find_waiter_locked(h.seq);
        pthread_mutex_unlock(&conn.recv_lock);
        if (!w || w->done) {
                *why = "reply for a call nobody waits for";
                return -EBADMSG;
        }
        /* The waiter cannot go away: it only leaves once done, and only the
         * reader (us) completes waiters. */
        if (h.len > w->cap - w->len) {
                *why = "reply larger than the caller's buffer";
                return -EBADMSG;
        }
        rc = lup_read_full(conn.fd, w->rep + w->len, h.len);
        if (rc < 0) {
                *why = rc == -ECONNRESET ? "server closed the connection" : strerror(-rc);
                return rc;
        }
        pthread_mutex_lock(&conn.recv_lock);
        w->len += h.len;
        if (!(h.flags & LUP_F_MORE) || h.status != 0) {
                w->status = (CUresult)h.status;
                w->done = true;
                pthread_cond_broadcast(&conn.recv_cond);
        }
        pthread_mutex_unlock(&conn.recv_lock);
        return 0;
}

/* Waits until w is done, taking the reader role whenever it is free. */
static void wait_reply(struct lupc_waiter *w)
{
        pthread_mutex_lock(&conn.recv_lock);
        while (!w->done) {
                if (conn.dead) {
                        w->done = true;
                        w->status = CUDA_ERROR_DEVICE_UNAVAILABLE;
                        break;
                }
                if (conn.reader_busy) {
                        pthread_cond_wait(&conn.recv_cond, &conn.recv_lock);
                        continue;
                }
                conn.reader_busy = true;
                pthread_mutex_unlock(&conn.recv_lock);
                const char *why = NULL;
                int rc = read_one_frame(&why);
                pthread_mutex_lock(&conn.recv_lock);
                conn.reader_busy = false;
                if (rc < 0)
                        conn_fail_locked(why ? why : "read error");
                pthread_cond_broadcast(&conn.recv_cond);
        }
        unlink_waiter_locked(w);
        pthread_mutex_unlock(&conn.recv_lock);
}

/* Writes one frame (header + up to two payload pieces) under the send lock.
 * A registered waiter gets the frame's seq before the frame leaves. */
static CUresult send_frame(uint16_t op, uint16_t flags, uint64_t ctx, const void *a, size_t alen,
                           const void *b, size_t blen, struct lupc_waiter *w)
{
        uint8_t hb[LUP_HDR_SIZE];
        struct iovec iov[3] = {
                { hb, sizeof(hb) }, { (void *)a, alen }, { (void *)b, blen },
        };
        struct lup_hdr h = { .len = (uint32_t)(alen + blen), .op = op, .flags = flags,
                             .lane = my_lane(), .ctx = ctx };
        int rc;

        pthread_mutex_lock(&conn.send_lock);
        if (conn.dead) {
                pthread_mutex_unlock(&conn.send_lock);
                return CUDA_ERROR_DEVICE_UNAVAILABLE;
        }
        h.seq = conn.next_seq++;
        if (w) {
                pthread_mutex_lock(&conn.recv_lock);
                w->seq = h.seq;
                w->next = conn.waiters;
                conn.waiters = w;
                pthread_mutex_unlock(&conn.recv_lock);
        }
        lup_hdr_encode(hb, &h);
        rc = lup_writev_full(conn.fd, iov, blen ? 3 : (alen ? 2 : 1));
        pthread_mutex_unlock(&conn.send_lock);
        if (rc < 0) {
                pthread_mutex_lock(&conn.recv_lock);
                conn_fail_locked(strerror(-rc));
                pthread_mutex_unlock(&conn.recv_lock);
                return CUDA_ERROR_DEVICE_UNAVAILABLE;
        }
        if (lup_trace_level() >= 2)
                lup_tracef("send %s seq=%llu lane=%u len=%u", lup_op_name(op) ? lup_op_name(op) : "?",
                           (unsigned long long)h.seq, h.lane, h.len);
        return CUDA_SUCCESS;
}

static CUresult call_prologue(unsigned flags, uint64_t *ret_ctx)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        *ret_ctx = lupc_ctx_current();
        if ((flags & LUPC_CTX) && *ret_ctx == 0)
                return CUDA_ERROR_INVALID_CONTEXT;
        return CUDA_SUCCESS;
}

CUresult lupc_call(uint16_t op, unsigned flags, const void *args, size_t argslen,
                   void *rep, size_t repcap, size_t *ret_replen)
{
        uint64_t ctx;
        CUresult r = call_prologue(flags, &ctx);
        if (r != CUDA_SUCCESS)
                return r;
        if (lup_trace_level() >= 1)
                lup_tracef("%s %s", lup_op_name(op) ? lup_op_name(op) : "?", (flags & LUPC_SYNC) ? "sync" : "async");
        if (!(flags & LUPC_SYNC))
                return send_frame(op, 0, ctx, args, argslen, NULL, 0, NULL);

        struct lupc_waiter w = { .rep = rep, .cap = rep ? repcap : 0 };
        r = send_frame(op, LUP_F_SYNC, ctx, args, argslen, NULL, 0, &w);
        if (r != CUDA_SUCCESS)
                return r;
        wait_reply(&w);
        if (ret_replen)
                *ret_replen = w.len;
        return w.status;
}

CUresult lupc_copy_htod(uint64_t dst, const void *src, size_t n, uint64_t stream)
{
        uint64_t ctx;
        CUresult r = call_prologue(LUPC_CTX, &ctx);
        if (r != CUDA_SUCCESS)
                return r;
        if (lup_trace_level() >= 1)
                lup_tracef("cuMemcpyHtoD %zu bytes", n);
        /* One frame per chunk, each taking the send lock on its own, so other
         * threads' small calls are never stuck behind a large copy. */
        for (size_t off = 0; off < n;) {
                size_t k = n - off < LUP_BULK_CHUNK ? n - off : LUP_BULK_CHUNK;
                uint8_t a[16];
                lup_put64(a, dst + off);
                lup_put64(a + 8, stream);
                r = send_frame(LUP_OP_MEMCPY_HTOD, 0, ctx, a, sizeof(a), (const uint8_t *)src + off, k, NULL);
                if (r != CUDA_SUCCESS)
                        return r;
                off += k;
        }
        return CUDA_SUCCESS;
}

CUresult lupc_copy_dtoh(void *dst, uint64_t src, size_t n, uint64_t stream)
{
        uint64_t ctx;
        CUresult r = call_prologue(LUPC_CTX, &ctx);
        if (r != CUDA_SUCCESS)
                return r;
        if (lup_trace_level() >= 1)
                lup_tracef("cuMemcpyDtoH %zu bytes", n);
        uint8_t a[24];
        lup_put64(a, src);
        lup_put64(a + 8, n);
        lup_put64(a + 16, stream);
        struct lupc_waiter w = { .rep = dst, .cap = n };
        r = send_frame(LUP_OP_MEMCPY_DTOH, LUP_F_SYNC, ctx, a, sizeof(a), NULL, 0, &w);
        if (r != CUDA_SUCCESS)
                return r;
        wait_reply(&w);
        if (w.status == CUDA_SUCCESS && w.len != n)
                return lupc_protocol_error("cuMemcpyDtoH");
        return w.status;
}

CUresult lupc_copy_dtoh_async(void *dst, uint64_t src, size_t n, uint64_t stream)
{
        uint64_t ctx;
        CUresult r = call_prologue(LUPC_CTX, &ctx);
        if (r != CUDA_SUCCESS)
                return r;
        struct lupc_landing *l = calloc(1, sizeof(*l));
        if (!l)
                return CUDA_ERROR_OUT_OF_MEMORY;
        l->token = lupc_mint_handle();
        l->dst = dst;
        l->size = n;
        pthread_mutex_lock(&conn.recv_lock);
        l->next = conn.landings;
        conn.landings = l;
        pthread_mutex_unlock(&conn.recv_lock);
        uint8_t a[32];
        lup_put64(a, src);
        lup_put64(a + 8, n);
        lup_put64(a + 16, stream);
        lup_put64(a + 24, l->token);
        if (lup_trace_level() >= 1)
                lup_tracef("cuMemcpyDtoHAsync %zu bytes", n);
        r = send_frame(LUP_OP_DTOH_ASYNC, 0, ctx, a, sizeof(a), NULL, 0, NULL);
        if (r != CUDA_SUCCESS) {
                pthread_mutex_lock(&conn.recv_lock);
                if (find_landing_locked(l->token) == l)
                        drop_landing_locked(l);
                pthread_mutex_unlock(&conn.recv_lock);
        }
        return r;
}

CUresult lupc_upload_image(const void *image, uint64_t *ret_blob)
{
        int kind;
        const uint8_t *start;
        size_t n;

        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        /* the caller's own memory: its headers say how long it is */
        if (lup_image_measure(image, SIZE_MAX, &kind, &start, &n) < 0 || n > LUP_MAX_BLOB)
                return CUDA_ERROR_INVALID_IMAGE;
        uint64_t blob = lupc_mint_handle();
        for (size_t off = 0; off < n;) {
                size_t k = n - off < LUP_BULK_CHUNK ? n - off : LUP_BULK_CHUNK;
                uint8_t a[24];
                lup_put64(a, blob);
                lup_put64(a + 8, n);
                lup_put64(a + 16, off);
                CUresult r = send_frame(LUP_OP_BLOB, 0, lupc_ctx_current(), a, sizeof(a), start + off, k, NULL);
                if (r != CUDA_SUCCESS)
                        return r;
                off += k;
        }
        *ret_blob = blob;
        return CUDA_SUCCESS;
}

/* ---- HELLO and the device snapshot */

static int decode_hello_reply(const uint8_t *p, size_t n, uint64_t *ret_base, uint64_t *ret_size)
{
        struct lup_rd r = lup_rd_init(p, n);
        uint32_t magic, proto, drv, backend, ndev;
        uint8_t token[LUP_TOKEN_SIZE];
        uint64_t base, size, last;

        lup_rd_u32(&r, &magic);
        lup_rd_u32(&r, &proto);
        lup_rd_u32(&r, &drv);
        lup_rd_u32(&r, &backend);
        lup_rd_copy(&r, token, sizeof(token));
        memcpy(conn.token, token, sizeof(token));
        lup_rd_u64(&r, &base);
        lup_rd_u64(&r, &size);
        lup_rd_u64(&r, &last);
        lup_rd_u32(&r, &ndev);
        if (r.err || magic != LUP_PROTO_MAGIC || proto != LUP_PROTO_VERSION || ndev > LUP_MAX_DEVICES)
                return -EBADMSG;
        if (base < LUP_ARENA_BASE || size != LUP_ARENA_SIZE || (base - LUP_ARENA_BASE) % LUP_ARENA_SIZE ||
            (base - LUP_ARENA_BASE) / LUP_ARENA_SIZE >= LUP_ARENA_SLOTS)
                return -EBADMSG;

        struct lupc_device *devs = calloc(ndev ? ndev : 1, sizeof(*devs));
        if (!devs)
                return -ENOMEM;
        for (uint32_t i = 0; i < ndev; i++) {
                const char *name;
                size_t name_len;
                lup_rd_str16(&r, LUP_MAX_DEV_NAME, &name, &name_len);
                lup_rd_copy(&r, devs[i].uuid.bytes, 16);
                lup_rd_u64(&r, &devs[i].total_mem);
                lup_rd_u32(&r, &devs[i].n_attr);
                if (r.err || devs[i].n_attr > LUP_MAX_ATTRS) {
                        free(devs);
                        return -EBADMSG;
                }
                for (uint32_t a = 0; a < devs[i].n_attr; a++) {
                        lup_rd_i32(&r, &devs[i].attr[a]);
                        lup_rd_u32(&r, &devs[i].attr_res[a]);
                }
                if (r.err) {
                        free(devs);
                        return -EBADMSG;
                }
                /* A real remote GPU is marked as such; the simulated one already says "(sim)". */
                snprintf(devs[i].name, sizeof(devs[i].name), "%.*s%s", (int)name_len, name,
                         backend == LUP_BACKEND_CUDA ? " (lupine)" : "");
        }
        if (lup_rd_finish(&r) < 0) {
                free(devs);
                return -EBADMSG;
        }
        conn.driver_version = drv;
        conn.backend = (int)backend;
        lupc_set_devices(devs, (int)ndev);
        *ret_base = base;
        *ret_size = size;
        return 0;
}

static void make_session_name(char *out, size_t cap)
{
        const char *env = getenv("LUPINE_SESSION");
        if (env && *env) {
                if (lup_session_name_valid(env, strlen(env))) {
                        snprintf(out, cap, "%s", env);
                        return;
                }
                lup_warn("LUPINE_SESSION=%s is not a valid session name ([A-Za-z0-9._-], at most %u bytes); using a random one",
                         env, LUP_MAX_NAME);
        }
        uint8_t rnd[8] = { 0 };
        FILE *f = fopen("/dev/urandom", "re");
        if (f) {
                if (fread(rnd, 1, sizeof(rnd), f) != sizeof(rnd))
                        memset(rnd, 0, sizeof(rnd));
                fclose(f);
        }
        snprintf(out, cap, "anon-%d-%02x%02x%02x%02x%02x%02x%02x%02x", (int)getpid(), rnd[0], rnd[1], rnd[2],
                 rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
}

static int connect_any(char *tried, size_t tried_cap)
{
        const char *env = getenv("LUPINE_SERVER");
        char list[1024];
        int fd = -ENOENT;

        snprintf(list, sizeof(list), "%s", env && *env ? env : LUPC_DEFAULT_SERVER);
        tried[0] = 0;
        char *save = NULL;
        int n = 0;
        for (char *tok = strtok_r(list, ",", &save); tok && n < LUPC_MAX_ENDPOINTS; tok = strtok_r(NULL, ",", &save), n++) {
                struct lup_endpoint ep;
                size_t used = strlen(tried);
                snprintf(tried + used, tried_cap - used, "%s%s", used ? ", " : "", tok);
                int rc = lup_endpoint_parse(tok, &ep);
                if (rc < 0) {
                        lup_warn("LUPINE_SERVER: cannot parse endpoint '%s'", tok);
                        continue;
                }
                fd = lup_connect(&ep);
                if (fd >= 0)
                        return fd;
        }
        return fd;
}

static void do_init(void)
{
        char tried[1100];
        uint8_t buf[LUP_HDR_SIZE + 512];
        struct lup_hello hello = { .proto_version = LUP_PROTO_VERSION, .cuda_version = CUDA_VERSION };
        size_t hlen;
        uint64_t base = 0, size = 0;

        lup_log_setup("lupine", LUP_LOG_INFO);
        lup_trace_setup_from_env();
        const char *spin = getenv("LUPINE_SPIN_US");
        if (spin && *spin) {
                long us = strtol(spin, NULL, 10);
                spin_ns = us > 0 && us < 100000 ? (uint64_t)us * 1000 : 0;
        }

        int fd = connect_any(tried, sizeof(tried));
        if (fd < 0) {
                lup_err("cannot reach lupined at %s: %s", tried, strerror(-fd));
                init_result = CUDA_ERROR_NO_DEVICE;
                return;
        }
        conn.fd = fd;
        make_session_name(hello.name, sizeof(hello.name));
        if (lup_hello_encode(buf + LUP_HDR_SIZE, sizeof(buf) - LUP_HDR_SIZE, &hello, &hlen) < 0)
                goto out_close;

        /* HELLO is sequence 0: it is not a call and is never replayed. */
        struct lup_hdr h = { .len = (uint32_t)hlen, .op = LUP_OP_HELLO, .flags = LUP_F_SYNC, .lane = my_lane() };
        lup_hdr_encode(buf, &h);
        if (lup_write_full(fd, buf, LUP_HDR_SIZE + hlen) < 0)
                goto out_lost;

        uint8_t hb[LUP_HDR_SIZE];
        struct lup_hdr rh;
        const char *why;
        if (lup_read_full(fd, hb, sizeof(hb)) < 0 || lup_hdr_decode(hb, &rh, &why) < 0 ||
            rh.op != LUP_OP_HELLO || !(rh.flags & LUP_F_REPLY))
                goto out_lost;
        uint8_t *rep = malloc(rh.len ? rh.len : 1);
        if (!rep || lup_read_full(fd, rep, rh.len) < 0) {
                free(rep);
                goto out_lost;
        }
        if (rh.status != 0) {
                struct lup_rd r = lup_rd_init(rep, rh.len);
                const char *msg = "";
                size_t ml = 0;
                lup_rd_str16(&r, 1024, &msg, &ml);
                lup_err("lupined at %s refused the session: %.*s", tried, (int)ml, msg ? msg : "");
                free(rep);
                close(fd);
                conn.fd = -1;
                init_result = rh.status == CUDA_ERROR_DEVICE_UNAVAILABLE ? CUDA_ERROR_NO_DEVICE : (CUresult)rh.status;
                return;
        }
        int rc = decode_hello_reply(rep, rh.len, &base, &size);
        free(rep);
        if (rc < 0)
                goto out_proto;

        /* Reserve the session's arena here too, so no host pointer can alias a
         * device pointer. The address is fixed; anything else is refused. */
        void *p = mmap((void *)(uintptr_t)base, size, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == MAP_FAILED || p != (void *)(uintptr_t)base) {
                if (p != MAP_FAILED)
                        munmap(p, size);
                lup_err("cannot reserve the device address range 0x%llx-0x%llx in this process (%s); refusing to run with moved pointers",
                        (unsigned long long)base, (unsigned long long)(base + size), strerror(errno));
                close(fd);
                conn.fd = -1;
                init_result = CUDA_ERROR_OPERATING_SYSTEM;
                return;
        }
        lupc_set_arena(base, size);
        init_result = CUDA_SUCCESS;
        lup_debug("connected to %s as session %s", tried, hello.name);
        return;

out_proto:
        lup_err("lupined at %s sent a malformed HELLO reply (protocol version mismatch?)", tried);
        goto out_close;
out_lost:
        lup_err("lupined at %s closed the connection during the handshake", tried);
out_close:
        close(fd);
        conn.fd = -1;
        init_result = CUDA_ERROR_NO_DEVICE;
}

CUresult lupc_init(void)
{
        pthread_once(&init_once, do_init);
        atomic_store_explicit(&init_done, true, memory_order_release);
        return init_result;
}

/* An orderly goodbye when the process exits, so the worker ends the session
 * at once instead of treating the closed socket as a network failure. Never
 * blocks: if another thread holds the send lock, the socket simply closes. */
__attribute__((destructor)) static void say_goodbye(void)
{
        if (conn.fd < 0 || conn.dead || pthread_mutex_trylock(&conn.send_lock) != 0)
                return;
        uint8_t hb[LUP_HDR_SIZE];
        struct lup_hdr h = { .op = LUP_OP_GOODBYE, .seq = conn.next_seq++ };
        lup_hdr_encode(hb, &h);
        (void)send(conn.fd, hb, sizeof(hb), MSG_NOSIGNAL | MSG_DONTWAIT);
        pthread_mutex_unlock(&conn.send_lock);
}
