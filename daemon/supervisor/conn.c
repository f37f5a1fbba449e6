/* SPDX-License-Identifier: MIT */
/*
 * Pending connections: from accept until the first frame is read and
 * judged. That frame is a HELLO (the connection then leaves for a worker)
 * or, on a UNIX-socket listener from root or the daemon's own user, an
 * ADMIN request (answered by supervisor/admin.c). Anything else is closed
 * with one log line saying why (and, when its frame header was valid, a
 * refusal the client can show its user). The slots themselves (taking a
 * connection, the recv into it, closing it) are supervisor/conn_slots.c.
 *
 * Each connection is read in two steps through the ring: the 40-byte
 * header into a fixed buffer, then exactly hdr.len payload bytes into a
 * buffer allocated for them once the header has passed its checks
 * (LUPD_HELLO_MAX_PAYLOAD at most). The whole HELLO must arrive before one
 * deadline, not one per recv, so a peer trickling a byte at a time gains
 * nothing; the supervisor's tick enforces it.
 */
#include <cuda.h> /* CUresult values for refusals only; the supervisor never loads CUDA */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "log.h"
#include "supervisor/internal.h"

static bool token_is_zero(const uint8_t token[static LUP_TOKEN_SIZE])
{
        uint8_t any = 0;

        for (unsigned i = 0; i < LUP_TOKEN_SIZE; i++)
                any |= token[i];
        return any == 0;
}

/*
 * The first frame is complete: validate the HELLO, then route it.
 *
 *   name registered, token zero      refused "session NAME is busy": a zero
 *                                    token asks for a new session, and
 *                                    this name is taken;
 *   name registered, token non-zero  LUPD_CTL_ATTACH to its worker, which
 *                                    checks the token and answers the
 *                                    client itself (refused "busy" while
 *                                    the worker has not reported READY or
 *                                    has too many resumes in flight);
 *   name unknown, token non-zero     refused with CUDA_ERROR_DEVICE_UNAVAILABLE
 *                                    "session NAME no longer exists", so the
 *                                    client stops retrying;
 *   name unknown, token zero         a new session.
 */
static void conn_hello(struct sup *s, int idx)
{
        struct conn *c = &s->conns[idx];
        struct lup_hello hello;
        const char *why = NULL;
        int r, entry;

        r = lup_hello_decode(c->payload, c->hdr.len, &hello, &why);
        if (r < 0) {
                sup_conn_close(s, idx, CUDA_ERROR_INVALID_VALUE, "%s", why ? why : "malformed HELLO");
                return;
        }
        entry = lupd_registry_find_name(&s->reg, hello.name);
        if (entry >= 0) {
                const struct lupd_session *se = &s->reg.s[entry];
                if (token_is_zero(hello.token) || !se->ready) {
                        sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE, "session %s is busy", hello.name);
                        return;
                }
                r = sup_session_attach(s, entry, c->fd, &c->hdr, c->payload, c->peer);
                if (r == -EBUSY) {
                        sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE,
                                       "session %s is busy (resumes already in progress)", hello.name);
                        return;
                }
                if (r < 0) {
                        sup_conn_close(s, idx, CUDA_ERROR_OPERATING_SYSTEM,
                                       "cannot hand the connection to session %s: %s", hello.name, strerror(-r));
                        return;
                }
                sup_conn_drop(s, idx); /* the worker holds the connection now */
                return;
        }
        if (!token_is_zero(hello.token)) {
                sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE, "session %s no longer exists", hello.name);
                return;
        }
        entry = lupd_registry_claim(&s->reg, hello.name);
        if (entry == -EBUSY) {
                sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE, "session %s is busy", hello.name);
                return;
        }
        if (entry == -ENOSPC) {
                sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE, "server full");
                return;
        }
        if (entry < 0) {
                sup_conn_close(s, idx, CUDA_ERROR_INVALID_VALUE, "invalid session name");
                return;
        }
        r = sup_session_start(s, entry, c->fd, &c->hdr, c->payload, c->peer);
        if (r < 0) {
                sup_conn_close(s, idx, CUDA_ERROR_OPERATING_SYSTEM, "cannot start a worker for session %s: %s",
                               hello.name, strerror(-r));
                return;
        }
        /* The worker holds the connection now; drop our copy quietly. */
        sup_conn_drop(s, idx);
}

/* The header is complete: judge it. Returns 0 to read the payload, or
 * -EBADMSG after closing the connection. */
static int conn_check_header(struct sup *s, int idx)
{
        struct conn *c = &s->conns[idx];
        const char *why;

        if (lup_hdr_decode(c->hdr_buf, &c->hdr, &why) < 0) {
                sup_conn_close(s, idx, 0, "%s", why);
                return -EBADMSG;
        }
        c->have_hdr = true;
        if (c->hdr.op == LUP_OP_ADMIN && sup_admin_check_header(s, idx) < 0)
                return -EBADMSG;
        if (c->hdr.op == LUP_OP_NVML && sup_nvml_check_header(s, idx) < 0)
                return -EBADMSG;
        if (c->hdr.op != LUP_OP_HELLO && c->hdr.op != LUP_OP_ADMIN && c->hdr.op != LUP_OP_NVML) {
                sup_conn_close(s, idx, CUDA_ERROR_INVALID_VALUE, "first frame is not HELLO (op %u)",
                               (unsigned)c->hdr.op);
                return -EBADMSG;
        }
        if ((c->hdr.flags & LUP_F_SYNC) == 0 || (c->hdr.flags & (LUP_F_REPLY | LUP_F_MORE)) != 0) {
                sup_conn_close(s, idx, CUDA_ERROR_INVALID_VALUE, "HELLO must be a synchronous request (flags 0x%x)",
                               (unsigned)c->hdr.flags);
                return -EBADMSG;
        }
        if (c->hdr.len > LUPD_HELLO_MAX_PAYLOAD) {
                sup_conn_close(s, idx, CUDA_ERROR_INVALID_VALUE, "HELLO payload exceeds the limit (%u > %u bytes)",
                               (unsigned)c->hdr.len, LUPD_HELLO_MAX_PAYLOAD);
                return -EBADMSG;
        }
        c->payload = malloc(c->hdr.len ? c->hdr.len : 1);
        if (!c->payload) {
                sup_conn_close(s, idx, CUDA_ERROR_OUT_OF_MEMORY, "out of memory");
                return -EBADMSG;
        }
        c->got = 0;
        return 0;
}

void sup_conn_on_recv(struct sup *s, int idx, int res)
{
        struct conn *c = &s->conns[idx];

        if (c->fd < 0)
                return;
        c->recv_busy = false;
        if (c->closing) {
                sup_conn_drop(s, idx);
                return;
        }
        if (res == -EINTR || res == -EAGAIN)
                goto rearm;
        if (res < 0) {
                sup_conn_close(s, idx, 0, "receive failed: %s", strerror(-res));
                return;
        }
        if (res == 0) {
                if (!c->have_hdr && c->got == 0)
                        sup_conn_close(s, idx, 0, "connection closed before HELLO");
                else
                        sup_conn_close(s, idx, 0, "connection closed in the middle of a frame");
                return;
        }
        c->got += (size_t)res;

        if (!c->have_hdr) {
                if (c->got < LUP_HDR_SIZE)
                        goto rearm;
                if (conn_check_header(s, idx) < 0)
                        return;
        }
        if (c->got < c->hdr.len)
                goto rearm;
        if (c->hdr.op == LUP_OP_ADMIN)
                sup_admin_run(s, idx);
        else if (c->hdr.op == LUP_OP_NVML)
                sup_nvml_run(s, idx);
        else
                conn_hello(s, idx);
        return;

rearm:
        if (sup_conn_arm_recv(s, idx) < 0)
                sup_conn_close(s, idx, 0, "submission queue full");
}
