/* SPDX-License-Identifier: MIT */
/*
 * Copies between two servers' memory (LUPINE_SERVER=A,B): cuMemcpyDtoD,
 * cuMemcpyPeer, cuMemcpy and their Async forms, when source and
 * destination are on different servers. The bytes go from the source's
 * daemon to the destination's (lupine/wire.h, "Copies between servers");
 * the client sends two small calls:
 *   PEER_EXPECT to the destination's session: a ticket for the copy;
 *   PEER_PUSH to the source's, with the ticket and where the destination
 *   is: answered once the bytes are in place.
 * An Async copy is complete when it returns (both daemons first finish the
 * work in flight on their contexts, so stream order holds, more strictly
 * than asked). When the destination's session could not take the copy (it
 * restarted, drained, was resuming) both steps are sent again, within the
 * reconnect timeout.
 *
 * One such copy at a time in a process: each is one call on each side, run
 * on the worker's only thread, so two copies in opposite directions at once
 * would each hold one worker while waiting for the other.
 */
#include "conn.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "peer_codec.h"

static pthread_mutex_t copy_lock = PTHREAD_MUTEX_INITIALIZER;

/* Daemons reach each other over TCP only (a client must not make its
 * daemon write to another program's UNIX socket). */
static CUresult over_unix(const char *what, const char *endpoint)
{
        static atomic_bool said;
        if (!atomic_exchange(&said, true))
                lup_err("%s between servers: the destination is %s, a UNIX socket; copies between servers go "
                        "daemon to daemon over TCP: name that server as HOST:PORT in LUPINE_SERVER",
                        what, endpoint);
        return CUDA_ERROR_NOT_SUPPORTED;
}

static void nap_ms(unsigned ms)
{
        struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
}

/* One attempt: CUDA_SUCCESS with *done (the copy's result in *ret) or not
 * (*why: try again); another CUresult ends the copy with it. */
static CUresult attempt(struct lupc_conn *cd, uint64_t dst, uint64_t src, size_t n, const char *what, bool *done,
                        CUresult *ret, char *why, size_t whycap)
{
        struct lup_peer_push pp = { .src = src, .size = n, .dst = dst };
        uint8_t req[LUP_PEER_PUSH_MAX], rep[LUP_PEER_PUSH_REPLY_MAX];
        size_t len = 0;
        const char *bad;

        lup_peer_expect_encode(req, &(struct lup_peer_expect){ .dst = dst, .size = n });
        lupc_route_ptr(dst);
        CUresult r =
                lupc_call(LUP_OP_PEER_EXPECT, LUPC_SYNC | LUPC_CTX, req, LUP_PEER_EXPECT_SIZE, rep, sizeof(rep), &len);
        if (r != CUDA_SUCCESS)
                return r;
        if (lup_peer_ticket_decode(rep, len, &pp.t, &bad) < 0)
                return lupc_protocol_error("PEER_EXPECT");
        /* where the destination is now: that call may have reconnected it */
        lupc_conn_endpoint(cd, pp.endpoint, sizeof(pp.endpoint));
        if (strncmp(pp.endpoint, "unix:", 5) == 0)
                return over_unix(what, pp.endpoint);
        len = lup_peer_push_encode(req, sizeof(req), &pp);
        explicit_bzero(&pp, sizeof(pp));
        if (!len)
                return CUDA_ERROR_INVALID_VALUE;
        lupc_route_ptr(src);
        r = lupc_call(LUP_OP_PEER_PUSH, LUPC_SYNC | LUPC_CTX, req, len, rep, sizeof(rep), &len);
        explicit_bzero(req, sizeof(req));
        if (r != CUDA_SUCCESS)
                return r;
        struct lup_peer_result res;
        if (lup_peer_result_decode(rep, len, &res, &bad) < 0)
                return lupc_protocol_error("PEER_PUSH");
        *done = res.outcome == LUP_PEER_DONE;
        *ret = (CUresult)res.status;
        snprintf(why, whycap, "%s", res.msg);
        return CUDA_SUCCESS;
}

CUresult lupc_wait_across(uint64_t ev, const char *what)
{
        if (lup_trace_level() >= 1)
                lup_tracef("%s: the event is on another server: synchronized there first", what);
        return cuEventSynchronize((CUevent)(uintptr_t)ev);
}

CUresult lupc_copy_across(uint64_t dst, uint64_t src, size_t n, const char *what)
{
        if (n == 0)
                return CUDA_SUCCESS;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        struct lupc_conn *cd = &lupc_conns[lupc_mem_position(dst)];
        unsigned wait_s = cd->reconnect_s > 30 ? cd->reconnect_s : 30, nap = 50;
        uint64_t deadline = lup_now_ns() + (uint64_t)wait_s * 1000000000ull;
        CUresult r, result = CUDA_SUCCESS;
        char why[LUP_PEER_MSG_MAX + 1] = "";
        bool done = false;
        pthread_mutex_lock(&copy_lock);
        for (;;) {
                r = attempt(cd, dst, src, n, what, &done, &result, why, sizeof(why));
                if (r != CUDA_SUCCESS || done || lup_now_ns() > deadline)
                        break;
                lup_debug("%s between servers: %s; trying again", what, why);
                nap_ms(nap);
                nap = nap < 2000 ? nap * 2 : 2000;
        }
        pthread_mutex_unlock(&copy_lock);
        if (r != CUDA_SUCCESS)
                return r;
        if (!done) {
                lup_err("%s between servers: the destination's server did not take the copy within %u s: %s", what,
                        wait_s, why);
                return CUDA_ERROR_DEVICE_UNAVAILABLE;
        }
        if (result != CUDA_SUCCESS && why[0])
                lup_err("%s between servers failed: %s", what, why);
        return result;
}
