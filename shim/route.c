/* SPDX-License-Identifier: MIT */
/*
 * The shim's connections, one per server of LUPINE_SERVER (conn.h), and
 * which one a call goes to. Today every call goes to the first: the
 * device list across servers (issue 17, item 1; docs/next-steps.md) routes
 * here by the call's context, device, pointer or handle.
 */
#include "conn.h"

#define CONN_INIT                                                                                                     \
        {                                                                                                             \
                .link = { .fd = -1 }, .send_lock = PTHREAD_MUTEX_INITIALIZER, .recv_lock = PTHREAD_MUTEX_INITIALIZER, \
                .recv_cond = PTHREAD_COND_INITIALIZER, .next_seq = 1,                                                 \
        }
struct lupc_conn lupc_conns[LUPC_MAX_SERVERS] = { CONN_INIT, CONN_INIT, CONN_INIT, CONN_INIT,
                                                  CONN_INIT, CONN_INIT, CONN_INIT, CONN_INIT };
_Static_assert(LUPC_MAX_SERVERS == 8, "one CONN_INIT per server");

struct lupc_conn *lupc_route(void)
{
        return &lupc_conns[0];
}
