/* SPDX-License-Identifier: MIT */
/*
 * The shim's connections, one per server of LUPINE_SERVER (conn.h), and
 * which one a call goes to. Today every call goes to the first: the
 * device list across servers (issue 17, item 1; docs/next-steps.md) routes
 * here by the call's context, device, pointer or handle.
 */
#include "conn.h"
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

void lupc_route_ptr(uint64_t p)
{
        if (lupc_n_servers <= 1)
                return;
        for (unsigned i = 0; i < lupc_n_servers; i++) {
                const struct lupc_conn *c = &lupc_conns[i];
                if (p >= c->arena_base && p - c->arena_base < c->arena_size) {
                        route_next = (int)i;
                        return;
                }
        }
}

void lupc_route_handle(uint64_t h)
{
        struct lupc_ctx_info info;
        uint64_t ctx = 0;
        if (lupc_n_servers > 1 && h && lupc_handle_kind(h, &ctx) && ctx && lupc_ctx_lookup(ctx, &info))
                route_next = lupc_dev_position(info.device);
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
