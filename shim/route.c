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
#include <stdio.h>

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

/* A call that names its server (a device, a device pointer, a handle)
 * says so just before it is sent; lupc_route takes it, and with it the
 * context that owns the memory or handle named (0: none known). */
static __thread int route_next = -1, route_force = -1;
static __thread uint64_t route_owner, routed_owner;

void lupc_route_dev(int dev)
{
        if (lupc_n_servers > 1)
                route_next = lupc_dev_position(dev);
}

/* The position of context ctx's device, or -1 (none, unknown). */
static int ctx_position(uint64_t ctx)
{
        struct lupc_ctx_info info;
        return ctx && lupc_ctx_lookup(ctx, &info) ? lupc_dev_position(info.device) : -1;
}

/* Where a call that names nothing goes: the current context's server. */
static int current_position(void)
{
        int pos = ctx_position(lupc_ctx_current());
        return pos < 0 ? 0 : pos;
}

/* The position of the context handle h was made in (*ret_ctx), or -1.
 * Libraries and their kernels belong to no context: they are on every
 * server (lupc_each_server), and a call naming one goes where the current
 * context is (a kernel's function, a global, a launch). */
static int handle_owner(uint64_t h, uint64_t *ret_ctx)
{
        int kind = h ? lupc_handle_kind(h, ret_ctx) : 0;
        return kind && kind != LUPC_H_LIBRARY && kind != LUPC_H_KERNEL ? ctx_position(*ret_ctx) : -1;
}

void lupc_route_handle(uint64_t h)
{
        uint64_t ctx = 0;
        int pos = lupc_n_servers > 1 ? handle_owner(h, &ctx) : -1;
        if (pos >= 0) {
                route_next = pos;
                route_owner = ctx;
        }
}

/* Only the arenas tell: module globals lie outside them, where two
 * servers' drivers may well have put theirs at one address. */
int lupc_ptr_position(uint64_t p)
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
        if (lupc_n_servers <= 1)
                return;
        int pos = lupc_ptr_position(p);
        struct lupc_alloc_info a;
        if (pos >= 0)
                route_next = pos;
        if (pos >= 0 && lupc_shadow_find(p, &a))
                route_owner = a.ctx;
}

int lupc_mem_position(uint64_t p)
{
        int pos = lupc_ptr_position(p);
        return pos < 0 ? current_position() : pos;
}

bool lupc_same_server(uint64_t a, uint64_t b)
{
        return lupc_n_servers <= 1 || lupc_mem_position(a) == lupc_mem_position(b);
}

void lupc_conn_set_endpoint(struct lupc_conn *c, const char *text)
{
        pthread_mutex_lock(&c->recv_lock);
        snprintf(c->endpoint, sizeof(c->endpoint), "%s", text);
        pthread_mutex_unlock(&c->recv_lock);
}

void lupc_conn_endpoint(struct lupc_conn *c, char *out, size_t cap)
{
        pthread_mutex_lock(&c->recv_lock);
        snprintf(out, cap, "%s", c->endpoint);
        pthread_mutex_unlock(&c->recv_lock);
}

/* A handle's server; the current context's for the default streams,
 * unknown handles and libraries. */
static int handle_position(uint64_t h)
{
        uint64_t ctx = 0;
        int pos = handle_owner(h, &ctx);
        return pos < 0 ? current_position() : pos;
}

bool lupc_same_server_handles(uint64_t a, uint64_t b)
{
        return lupc_n_servers <= 1 || handle_position(a) == handle_position(b);
}

uint64_t lupc_route_ctx(const struct lupc_conn *c)
{
        uint64_t cur = lupc_ctx_current();
        if (lupc_n_servers <= 1 || ctx_position(cur) == (int)c->pos)
                return cur;
        return routed_owner && ctx_position(routed_owner) == (int)c->pos ? routed_owner : cur;
}

struct lupc_conn *lupc_route(void)
{
        int p = route_force >= 0 ? route_force : route_next;
        route_next = -1;
        routed_owner = route_owner;
        route_owner = 0;
        if (p < 0 && lupc_n_servers > 1)
                p = current_position();
        if (p < 0 || (unsigned)p >= lupc_n_servers)
                p = 0;
        lupc_visible_pos = p;
        return &lupc_conns[p];
}

CUresult lupc_each_server(CUresult (*fn)(void *arg), void *arg)
{
        if (lupc_n_servers <= 1)
                return fn(arg);
        CUresult r = CUDA_SUCCESS;
        lupc_mint_mode(1);
        for (unsigned p = 0; p < lupc_n_servers && r == CUDA_SUCCESS; p++) {
                if (p)
                        lupc_mint_mode(2);
                route_force = (int)p;
                r = fn(arg);
        }
        route_force = -1;
        lupc_mint_mode(0);
        return r;
}

int lupc_route_position(void)
{
        return lupc_visible_pos;
}
