/* SPDX-License-Identifier: MIT */
/*
 * The shim's connections, one per server of LUPINE_SERVER (conn.h), and
 * which one a call goes to (docs/running.md, "Several servers"): the
 * server of the device, device pointer or handle the call names (the
 * generated stubs say which, just before the call), else that of the
 * current context's device.
 */
#include "conn.h"

#include <stdatomic.h>

#include "log.h"
#include "visible.h"

#define CONN_INIT                                                                                                     \
        {                                                                                                             \
                .link = { .fd = -1 }, .send_lock = PTHREAD_MUTEX_INITIALIZER, .recv_lock = PTHREAD_MUTEX_INITIALIZER, \
                .recv_cond = PTHREAD_COND_INITIALIZER, .next_seq = 1,                                                 \
        }
struct lupc_conn lupc_conns[LUPC_MAX_SERVERS] = { CONN_INIT, CONN_INIT, CONN_INIT, CONN_INIT,
                                                  CONN_INIT, CONN_INIT, CONN_INIT, CONN_INIT };
_Static_assert(LUPC_MAX_SERVERS == 8, "one CONN_INIT per server");

unsigned lupc_n_servers = 1;

/* A call that names its server (a device, a device pointer) says so just
 * before it is sent; lupc_route takes it. */
static __thread int route_next = -1;

void lupc_route_dev(int dev)
{
        if (lupc_n_servers > 1)
                route_next = lupc_dev_position(dev);
}

void lupc_route_handle(uint64_t h)
{
        struct lupc_ctx_info info;
        uint64_t ctx = 0;
        if (lupc_n_servers > 1 && h && lupc_handle_kind(h, &ctx) && ctx && lupc_ctx_lookup(ctx, &info))
                route_next = lupc_dev_position(info.device);
}

/* The position whose arena holds p, or -1. */
static int ptr_position(uint64_t p)
{
        for (unsigned i = 0; i < lupc_n_servers; i++) {
                const struct lupc_conn *c = &lupc_conns[i];
                if (p >= c->arena_base && p - c->arena_base < c->arena_size)
                        return (int)i;
        }
        return -1;
}

void lupc_route_ptr(uint64_t p)
{
        int pos = lupc_n_servers > 1 ? ptr_position(p) : -1;
        if (pos >= 0)
                route_next = pos;
}

bool lupc_same_server(uint64_t a, uint64_t b)
{
        return lupc_n_servers <= 1 || ptr_position(a) == ptr_position(b);
}

CUresult lupc_cross_server(const char *what)
{
        static atomic_bool said;
        if (!atomic_exchange(&said, true))
                lup_warn("%s between the memory of two servers of LUPINE_SERVER: not supported yet (copies between "
                         "servers go server to server, issue 17); CUDA_ERROR_NOT_SUPPORTED",
                         what);
        return CUDA_ERROR_NOT_SUPPORTED;
}

struct lupc_conn *lupc_route(void)
{
        int p = route_next;
        route_next = -1;
        if (p < 0 && lupc_n_servers > 1) {
                struct lupc_ctx_info info;
                uint64_t ctx = lupc_ctx_current();
                p = ctx && lupc_ctx_lookup(ctx, &info) ? lupc_dev_position(info.device) : 0;
        }
        if (p < 0 || (unsigned)p >= lupc_n_servers)
                p = 0;
        lupc_visible_pos = p;
        return &lupc_conns[p];
}

int lupc_route_position(void)
{
        return lupc_visible_pos;
}
