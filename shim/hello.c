/* SPDX-License-Identifier: MIT */
/*
 * Starting the connection: configuration from the environment, the endpoint
 * list, the HELLO exchange and the device snapshot it brings, the session
 * name, and the one-time initialisation behind cuInit.
 */
#include <errno.h>
#include <stdatomic.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "conn.h"
#include "ctl_codec.h"
#include "image.h"
#include "env.h"
#include "unsupported.h"
#include "log.h"
#include "server_list.h"

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static CUresult init_result = CUDA_ERROR_NOT_INITIALIZED;
static atomic_bool init_done;

bool lupc_initialized(void)
{
        return atomic_load_explicit(&init_done, memory_order_acquire) && init_result == CUDA_SUCCESS;
}

/* ---- HELLO and the device snapshot */

/* Decodes an accepting HELLO reply (the same at init and on resume) into
 * *ret, whose devs the caller installs or frees. -EBADMSG or -ENOMEM. */
static int decode_hello_reply(const uint8_t *p, size_t n, bool resend, struct hello_reply *ret)
{
        struct lup_hello_reply h;
        const char *why;

        /* room for the largest snapshot, once per connection */
        struct lup_hello_dev *room = calloc(LUP_MAX_DEVICES, sizeof(*room));
        if (!room)
                return -ENOMEM;
        int rc = lup_hello_reply_decode(p, n, resend, &h, room, &why);
        struct lupc_device *devs = rc < 0 ? NULL : calloc(h.n_devices ? h.n_devices : 1, sizeof(*devs));
        if (rc == 0 && !devs)
                rc = -ENOMEM;
        if (rc < 0) {
                free(room);
                return rc;
        }
        for (uint32_t i = 0; i < h.n_devices; i++) {
                const struct lup_hello_dev *d = &room[i];
                memcpy(devs[i].uuid.bytes, d->uuid, sizeof(d->uuid));
                devs[i].total_mem = d->total_mem;
                devs[i].n_attr = d->n_attr;
                memcpy(devs[i].attr, d->attr, d->n_attr * sizeof(d->attr[0]));
                memcpy(devs[i].attr_res, d->attr_res, d->n_attr * sizeof(d->attr_res[0]));
                /* A real remote GPU is marked as such; the simulated one already says "(sim)". */
                snprintf(devs[i].name, sizeof(devs[i].name), "%s%s", d->name,
                         h.backend == LUP_BACKEND_CUDA ? " (lupine)" : "");
        }
        free(room);
        ret->resend_from = h.resend_from;
        ret->tx_end = h.tx_end;
        ret->driver_version = h.driver_version;
        ret->backend = h.backend;
        memcpy(ret->token, h.token, sizeof(h.token));
        ret->arena_base = h.arena_base;
        ret->arena_size = h.arena_size;
        ret->last_executed = h.last_executed;
        ret->devs = devs;
        ret->ndev = h.n_devices;
        return 0;
}

struct lupt_config lupc_tcfg;

/* Says HELLO (seq 0, never replayed: it is not a call) as session c->name
 * with c->token (and the bearer token) on l, connected to ep, and reads
 * the answer (through the hand-off to the worker on a TLS connection).
 * Returns 0 when an answer came (ret->status says whether it accepted),
 * -EPROTO for a malformed one, or another -errno when the connection failed
 * first (-EAGAIN: timed out); ret->why says more where TLS can. */
int lupc_hello_exchange(struct lupc_conn *c, struct lupt_link *l, const struct lup_endpoint *ep, uint64_t last_seen,
                        struct hello_reply *ret)
{
        uint8_t buf[LUP_HDR_SIZE + 512];
        struct lup_hello hello = { .proto_version = LUP_PROTO_VERSION, .cuda_version = CUDA_VERSION,
                                   .last_seq_seen = last_seen };
        /* heartbeats, and the count of the reply stream for resends */
        if (c->hb_ms) {
                hello.flags |= LUP_HELLO_HEARTBEAT;
                hello.heartbeat_ms = c->hb_ms;
        }
        if (c->replay_on) {
                hello.flags |= LUP_HELLO_RESEND;
                hello.rx_bytes = atomic_load_explicit(&c->rx_bytes, memory_order_relaxed);
        }
        if (c->avoid_slots) { /* the slots of this client's other servers */
                hello.flags |= LUP_HELLO_AVOID_SLOTS;
                hello.avoid_slots = c->avoid_slots;
        }
        if (lupc_tcfg.token_len) {
                hello.flags |= LUP_HELLO_AUTH;
                hello.auth_len = lupc_tcfg.token_len;
                memcpy(hello.auth, lupc_tcfg.token, lupc_tcfg.token_len);
        }
        size_t hlen;

        ret->why[0] = 0;
        memcpy(hello.name, c->name, sizeof(hello.name));
        memcpy(hello.token, c->token, sizeof(hello.token));
        int rc = lup_hello_encode(buf + LUP_HDR_SIZE, sizeof(buf) - LUP_HDR_SIZE, &hello, &hlen);
        explicit_bzero(hello.auth, sizeof(hello.auth));
        if (rc < 0)
                return -EINVAL;
        struct lup_hdr h = { .len = (uint32_t)hlen, .op = LUP_OP_HELLO, .flags = LUP_F_SYNC, .lane = lupc_my_lane() };
        lup_hdr_encode(buf, &h);

        struct lup_hdr rh;
        uint8_t *rep;
        rc = lupt_hello(&lupc_tcfg, ep, l, buf, LUP_HDR_SIZE + hlen, LUPC_HANDSHAKE_TIMEOUT_MS, &rh, &rep, ret->why,
                        sizeof(ret->why));
        explicit_bzero(buf, sizeof(buf));
        if (rc < 0)
                return rc;
        if (rh.status != 0) {
                const char *msg;
                size_t ml;
                lup_refusal_decode(rep, rh.len, 1024, &msg, &ml);
                ret->status = rh.status;
                snprintf(ret->msg, sizeof(ret->msg), "%.*s", (int)ml, msg);
        } else {
                ret->status = 0;
                rc = decode_hello_reply(rep, rh.len, (hello.flags & LUP_HELLO_RESEND) != 0, ret) < 0 ? -EPROTO : 0;
        }
        free(rep);
        return rc;
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

/* Calls fn for each endpoint of LUPINE_SERVER, in order, until one returns
 * >= 0, and returns that; otherwise the last failure. *tried lists what was
 * tried, for messages. */

static atomic_bool warned_parse;

int lupc_for_each_endpoint(const struct lupc_conn *c, endpoint_fn fn, void *userdata, char *tried, size_t tried_cap)
{
        const char *env = getenv("LUPINE_SERVER");
        struct lup_server_list list;
        char why[160];
        int rc = -ENOENT;

        tried[0] = 0;
        if (lup_server_list_parse(env && *env ? env : LUPC_DEFAULT_SERVER, &list, why, sizeof(why)) < 0) {
                if (!atomic_exchange(&warned_parse, true))
                        lup_err("LUPINE_SERVER: %s", why);
                return -EINVAL;
        }
        /* the failover alternatives of c's server, in order (common/server_list.h) */
        unsigned pos = c->pos < list.n_positions ? c->pos : 0;
        for (unsigned i = list.first[pos]; i < list.first[pos + 1]; i++) {
                const char *tok = list.endpoint[i];
                struct lup_endpoint ep;
                if (lup_endpoint_parse(tok, &ep) < 0) {
                        /* said once per process: reconnects walk the list again */
                        if (!atomic_exchange(&warned_parse, true))
                                lup_err("LUPINE_SERVER: '%s' is not an endpoint (HOST:PORT, [IPv6]:PORT, "
                                        "tls://HOST:PORT or unix:PATH; a name must resolve)",
                                        tok);
                        rc = rc == -ENOENT ? -EINVAL : rc;
                        continue;
                }
                size_t used = strlen(tried);
                snprintf(tried + used, tried_cap - used, "%s%s", used ? ", " : "", tok);
                rc = fn(&ep, userdata);
                if (rc >= 0)
                        return rc;
        }
        return rc;
}

#define EP_TEXT 128 /* struct lup_endpoint's text */

/* The first endpoint that answers, at init. */
struct first_link {
        struct lupt_link link;
        struct lup_endpoint ep;
        char err[400];
};

static int connect_endpoint(const struct lup_endpoint *ep, void *userdata)
{
        struct first_link *f = userdata;
        int fd = lupt_connect(&lupc_tcfg, ep, LUPC_HANDSHAKE_TIMEOUT_MS, &f->link, f->err, sizeof(f->err));
        size_t n = strlen(ep->text);
        if (fd >= 0)
                f->ep = *ep;
        else if (strncmp(f->err, ep->text, n) == 0 && strncmp(f->err + n, ": ", 2) == 0)
                memmove(f->err, f->err + n + 2, strlen(f->err + n + 2) + 1); /* the line names the endpoints */
        return fd;
}

/* Exit and fork with a TLS connection (hello.c's do_init installs these).
 * The goodbye goes from an atexit handler, which runs before OpenSSL's own
 * (registered earlier, or never: transport.c), not from the destructor. A
 * fork child shares the parent's TLS stream, and one record from it would
 * break the parent's: it drops the connection without a byte and its calls
 * fail (its copy of the TLS state is left alone: another thread of the
 * parent may have been inside it). */
static void tls_goodbye(void)
{
        lupc_say_goodbye();
}

static void tls_fork_child(void)
{
        for (unsigned p = 0; p < lupc_n_servers; p++) {
                struct lupc_conn *c = &lupc_conns[p];
                if (!c->link.tls)
                        continue;
                if (c->link.fd >= 0)
                        close(c->link.fd);
                c->link = (struct lupt_link){ .fd = -1 };
                c->reconnect_s = 0;
                atomic_store_explicit(&c->state, CONN_DEAD, memory_order_release);
        }
}

static int read_config(unsigned n_servers)
{
        struct lupc_conn *c = &lupc_conns[0]; /* the first server (conn.h); the others copy it */
        const char *spin = getenv("LUPINE_SPIN_US");
        if (spin && *spin) {
                long us = strtol(spin, NULL, 10);
                lupc_spin_ns = us > 0 && us < 100000 ? (uint64_t)us * 1000 : 0;
        }
        c->reconnect_s = lup_env_uint("LUPINE_RECONNECT_TIMEOUT", LUPC_DEFAULT_RECONNECT_S, LUPC_MAX_RECONNECT_S);
        unsigned mb = lup_env_uint("LUPINE_REPLAY_MAX_MB", REPLAY_DEFAULT_MAX_MB, LUPC_MAX_REPLAY_MB);
        if (mb < LUPC_MIN_REPLAY_MB) {
                lup_warn("LUPINE_REPLAY_MAX_MB=%u is below the smallest useful bound; using %u", mb, LUPC_MIN_REPLAY_MB);
                mb = LUPC_MIN_REPLAY_MB;
        }
        /* Without reconnecting nothing is ever resent: keep no copies. */
        if (c->reconnect_s)
                c->replay_on = replay_init(&c->replay, (size_t)mb << 20, 0) == 0;
        c->hb_ms = lup_env_uint("LUPINE_HEARTBEAT_MS", LUPC_DEFAULT_HEARTBEAT_MS, LUP_MAX_HEARTBEAT_MS);
        if (c->hb_ms && c->hb_ms < LUP_MIN_HEARTBEAT_MS)
                c->hb_ms = LUP_MIN_HEARTBEAT_MS;
        c->hb_timeout_ms =
                lup_env_uint("LUPINE_HEARTBEAT_TIMEOUT_MS", LUPC_DEFAULT_HEARTBEAT_TIMEOUT_MS, UINT32_MAX / 2);
        if (c->hb_ms && c->hb_timeout_ms < 2 * c->hb_ms) {
                lup_warn("LUPINE_HEARTBEAT_TIMEOUT_MS=%u is less than twice LUPINE_HEARTBEAT_MS=%u; using %u",
                         c->hb_timeout_ms, c->hb_ms, 2 * c->hb_ms);
                c->hb_timeout_ms = 2 * c->hb_ms;
        }
        c->ack_interval = ((size_t)mb << 20) / 4 < LUPC_ACK_INTERVAL ? ((size_t)mb << 20) / 4 : LUPC_ACK_INTERVAL;
        for (unsigned p = 1; p < n_servers; p++) {
                struct lupc_conn *o = &lupc_conns[p];
                o->pos = p;
                o->reconnect_s = c->reconnect_s;
                o->hb_ms = c->hb_ms;
                o->hb_timeout_ms = c->hb_timeout_ms;
                o->ack_interval = c->ack_interval;
                if (o->reconnect_s)
                        o->replay_on = replay_init(&o->replay, (size_t)mb << 20, 0) == 0;
        }

        /* TLS and the bearer token (docs/running.md, "Clients") */
        const char *servers = getenv("LUPINE_SERVER");
        char err[600];
        int rc = lupt_config_load(&lupc_tcfg, servers && *servers ? servers : LUPC_DEFAULT_SERVER,
                                  LUPT_CFG_TOKEN | LUPT_CFG_HANDOFF, err, sizeof(err));
        if (rc < 0)
                lup_err("cannot connect to lupined: %s", err);
        return rc;
}

/* Ends a session that will make no call (seq 1: the first frame after
 * HELLO), so its worker goes at once, and closes the link. */
static void goodbye_first(struct lupt_link *l)
{
        lupt_send_goodbye(l, 1);
        lupt_close(l, true);
}

/* The servers' devices, as CUDA_VISIBLE_DEVICES selects them from the
 * list of all of them (visible.c): false when none is left (the sessions
 * are ended, init_result set). */
static bool install_devices(struct hello_reply *rep, const char *visible, unsigned n)
{
        int nv = lupc_set_devices(rep->devs, (int)rep->ndev, visible);
        rep->devs = NULL;
        /* unset: the server's list as it is (a worker always has a device;
         * the tests' fake servers have none) */
        if (nv > 0 || (nv == 0 && !visible)) {
                if (visible)
                        lup_debug("CUDA_VISIBLE_DEVICES=%s: %d of the server's %u devices", visible, nv, rep->ndev);
                return true;
        }
        if (nv == 0 && rep->ndev == 0)
                lup_warn("CUDA_VISIBLE_DEVICES=%s: the server has no device", visible);
        else if (nv == 0)
                lup_warn("CUDA_VISIBLE_DEVICES=%s names none of the server's %u devices (indices 0-%u or their "
                         "UUIDs): no device",
                         visible, rep->ndev, rep->ndev - 1);
        else if (nv == -EINVAL)
                lup_warn(
                        "CUDA_VISIBLE_DEVICES=%s names a device twice: CUDA_ERROR_INVALID_DEVICE, as the driver answers",
                        visible);
        for (unsigned p = 0; p < n; p++)
                goodbye_first(&lupc_conns[p].link);
        init_result = nv == 0         ? CUDA_ERROR_NO_DEVICE
                      : nv == -EINVAL ? CUDA_ERROR_INVALID_DEVICE
                                      : CUDA_ERROR_OUT_OF_MEMORY;
        return false;
}

/* Reserves the session's arena in this process too, so that no host
 * pointer can alias a device pointer. The address is fixed; anything else
 * is refused. */
static bool reserve_arena(uint64_t base, uint64_t size)
{
        void *p = mmap((void *)(uintptr_t)base, size, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == MAP_FAILED || p != (void *)(uintptr_t)base) {
                if (p != MAP_FAILED)
                        munmap(p, size);
                lup_err("cannot reserve the device address range 0x%llx-0x%llx in this process (%s); refusing to run "
                        "with moved pointers",
                        (unsigned long long)base, (unsigned long long)(base + size), strerror(errno));
                return false;
        }
        return true;
}

/* Position c->pos's server: the first of its alternatives that answers,
 * HELLO, its arena. true with the connection up and rep's devices to be
 * installed; false with init_result set (logged; the link closed). */
static bool connect_server(struct lupc_conn *c, struct hello_reply *rep, char *where, size_t where_cap)
{
        char tried[1100];
        static struct first_link links[LUPC_MAX_SERVERS];
        struct first_link *f = &links[c->pos];

        int fd = lupc_for_each_endpoint(c, connect_endpoint, f, tried, sizeof(tried));
        if (fd < 0) {
                if (tried[0]) /* else nothing was tried: the line above said why */
                        lup_err("cannot reach lupined at %s: %s", tried, f->err[0] ? f->err : strerror(-fd));
                init_result = CUDA_ERROR_NO_DEVICE;
                return false;
        }
        int rc = lupc_hello_exchange(c, &f->link, &f->ep, 0, rep);
        if (rc < 0 && rep->why[0])
                lup_err("cannot connect to lupined: %s", rep->why);
        else if (rc == -EPROTO)
                lup_err("lupined at %s sent a malformed HELLO reply (protocol version mismatch?)", tried);
        else if (rc < 0)
                lup_err("lupined at %s closed the connection during the handshake", tried);
        if (rc < 0) {
                lupt_close(&f->link, false);
                init_result = CUDA_ERROR_NO_DEVICE;
                return false;
        }
        if (rep->status != 0) {
                lup_err("lupined at %s refused the session: %s", tried, rep->msg);
                lupt_close(&f->link, true);
                init_result =
                        rep->status == CUDA_ERROR_DEVICE_UNAVAILABLE ? CUDA_ERROR_NO_DEVICE : (CUresult)rep->status;
                return false;
        }
        if (!reserve_arena(rep->arena_base, rep->arena_size)) {
                lupt_close(&f->link, true);
                init_result = CUDA_ERROR_OPERATING_SYSTEM;
                return false;
        }
        memcpy(c->token, rep->token, sizeof(c->token));
        c->driver_version = rep->driver_version;
        c->backend = (int)rep->backend;
        c->arena_base = rep->arena_base;
        c->arena_size = rep->arena_size;
        lupt_set_timeout(&f->link, (int)c->hb_ms); /* reads and writes notice silence (client.c) */
        atomic_store_explicit(&c->last_rx_ns, lup_now_ns(), memory_order_relaxed);
        c->link = f->link;
        lupc_conn_set_endpoint(c, f->ep.text);
        snprintf(where, where_cap, "%s", f->ep.text);
        lup_debug("connected to %s as session %s", tried, c->name);
        return true;
}

/* One device list of every server's devices, position 0's first; with
 * several servers each name says its server. Two servers may show the same
 * GPU (two lupined on one host): its UUID is made distinct for the later
 * position, so that CUDA_VISIBLE_DEVICES and the runtime tell them apart. */
static bool merge_devices(struct hello_reply *reps, unsigned n, char (*where)[EP_TEXT], struct hello_reply *out)
{
        int counts[LUPC_MAX_SERVERS];
        uint32_t total = 0;
        for (unsigned p = 0; p < n; p++)
                total += reps[p].ndev;
        if (total > LUP_MAX_DEVICES) {
                lup_err("the servers of LUPINE_SERVER have %u devices in all; at most %u are supported", total,
                        LUP_MAX_DEVICES);
                return false;
        }
        struct lupc_device *all = calloc(total ? total : 1, sizeof(*all));
        if (!all)
                return false;
        uint32_t k = 0;
        for (unsigned p = 0; p < n; p++) {
                counts[p] = (int)reps[p].ndev;
                for (uint32_t i = 0; i < reps[p].ndev; i++, k++) {
                        all[k] = reps[p].devs[i];
                        if (n > 1) {
                                size_t len = strlen(all[k].name);
                                snprintf(all[k].name + len, sizeof(all[k].name) - len, " on %s", where[p]);
                        }
                        for (uint32_t j = 0; j < k; j++)
                                if (!memcmp(all[j].uuid.bytes, all[k].uuid.bytes, sizeof(all[k].uuid.bytes)))
                                        all[k].uuid.bytes[15] ^= (uint8_t)(0x10u * p + 1u);
                }
                free(reps[p].devs);
                reps[p].devs = NULL;
        }
        lupc_visible_positions(counts, (int)n);
        out->devs = all;
        out->ndev = total;
        return true;
}

static void do_init(void)
{
        char where[LUPC_MAX_SERVERS][EP_TEXT];
        struct hello_reply reps[LUPC_MAX_SERVERS];
        struct lup_server_list list;
        char why[160];

        lup_log_setup("lupine", LUP_LOG_INFO);
        /* CUDA_VISIBLE_DEVICES="" (or "-1", ...) hides every device: like
         * the driver, cuInit says so, and no server is asked */
        const char *visible = getenv("CUDA_VISIBLE_DEVICES");
        if (lupc_visible_none(visible)) {
                lup_debug("CUDA_VISIBLE_DEVICES=%s names no device: not connecting", visible);
                init_result = CUDA_ERROR_NO_DEVICE;
                return;
        }
        const char *env = getenv("LUPINE_SERVER");
        if (lup_server_list_parse(env && *env ? env : LUPC_DEFAULT_SERVER, &list, why, sizeof(why)) < 0) {
                lup_err("LUPINE_SERVER: %s", why);
                init_result = CUDA_ERROR_NO_DEVICE;
                return;
        }
        unsigned n = list.n_positions;
        if (read_config(n) < 0) {
                init_result = CUDA_ERROR_NO_DEVICE;
                return;
        }
        memset(reps, 0, sizeof(reps));
        make_session_name(lupc_conns[0].name, sizeof(lupc_conns[0].name));
        for (unsigned p = 0; p < n; p++) {
                struct lupc_conn *c = &lupc_conns[p];
                /* one session per server, each its own name: servers that
                 * share a checkpoint store must not see one name twice */
                if (p > 0 && snprintf(c->name, sizeof(c->name), "%s.p%u", lupc_conns[0].name, p) > (int)LUP_MAX_NAME) {
                        lup_err("LUPINE_SESSION=%s is too long to name a session on each of %u servers (at most %u "
                                "bytes)",
                                lupc_conns[0].name, n, LUP_MAX_NAME - 3);
                        init_result = CUDA_ERROR_INVALID_VALUE;
                }
                for (unsigned q = 0; q < p; q++) {
                        int slot = lup_arena_slot_of(lupc_conns[q].arena_base);
                        if (slot >= 0)
                                c->avoid_slots |= 1ull << slot;
                }
                if (init_result == CUDA_ERROR_INVALID_VALUE ||
                    !connect_server(c, &reps[p], where[p], sizeof(where[p]))) {
                        for (unsigned q = 0; q < p; q++)
                                goodbye_first(&lupc_conns[q].link);
                        for (unsigned q = 0; q <= p; q++)
                                free(reps[q].devs);
                        return;
                }
        }
        struct hello_reply merged = { 0 };
        if (!merge_devices(reps, n, where, &merged)) {
                for (unsigned q = 0; q < n; q++) {
                        goodbye_first(&lupc_conns[q].link);
                        free(reps[q].devs);
                }
                init_result = CUDA_ERROR_OUT_OF_MEMORY;
                return;
        }
        if (!install_devices(&merged, visible, n))
                return;
        lupc_set_arena(lupc_conns[0].arena_base, lupc_conns[0].arena_size);
        for (unsigned p = 1; p < n; p++)
                lupc_add_arena(lupc_conns[p].arena_base, lupc_conns[p].arena_size);
        lupc_n_servers = n;
        if (lupc_tcfg.first) {
                (void)atexit(tls_goodbye);
                (void)pthread_atfork(NULL, NULL, tls_fork_child);
        }
        init_result = CUDA_SUCCESS;
        lupc_context_made(); /* the session's worker is a process of the GPU host now */
        if (n > 1)
                lup_info("one device list of %u servers: %u devices", n, merged.ndev);
}

CUresult lupc_init(void)
{
        pthread_once(&init_once, do_init);
        atomic_store_explicit(&init_done, true, memory_order_release);
        return init_result;
}

