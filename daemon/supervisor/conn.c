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
#define LUP_LOG_CAT LUP_LOGC_NET
#include <cuda.h> /* CUresult values for refusals only; the supervisor never loads CUDA */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <openssl/crypto.h>

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
 * An admitted HELLO on a TLS connection: the HANDOFF frame with a fresh
 * ticket, the last thing the supervisor sends on the first TLS session
 * (docs/tls.md). 0, or -errno.
 */
static int conn_handoff(struct conn *c, uint8_t ticket[static LUP_TICKET_SIZE])
{
        uint8_t frame[LUP_HDR_SIZE + LUP_TICKET_SIZE];
        struct lup_hdr h = { .len = LUP_TICKET_SIZE,
                             .op = LUP_OP_HANDOFF,
                             .flags = LUP_F_REPLY,
                             .lane = c->hdr.lane,
                             .seq = c->hdr.seq };

        if (getrandom(ticket, LUP_TICKET_SIZE, 0) != (ssize_t)LUP_TICKET_SIZE)
                return -EIO;
        lup_hdr_encode(frame, &h);
        memcpy(frame + LUP_HDR_SIZE, ticket, LUP_TICKET_SIZE);
        return lup_tls_write_full(c->tls, frame, sizeof(frame));
}

/*
 * The HELLO the worker gets: the session's key for its name (the tenant's
 * namespace) and no bearer token (the worker needs none, and a secret
 * should live in as few processes as it can).
 */
static int conn_forward_hello(const struct lup_hello *in, const char *key, uint8_t *out, size_t cap,
                              struct lup_hdr *hdr)
{
        struct lup_hello h = *in;
        size_t len;

        snprintf(h.name, sizeof(h.name), "%s", key);
        h.flags &= ~LUP_HELLO_AUTH;
        h.auth_len = 0;
        memset(h.auth, 0, sizeof(h.auth));
        if (lup_hello_encode(out, cap, &h, &len) < 0)
                return -EINVAL;
        hdr->len = (uint32_t)len;
        return 0;
}

/* Hands connection idx, admitted for registry entry `entry`, to its
 * worker: a new session's (start) or an existing one's (attach). */
static void conn_route(struct sup *s, int idx, int entry, bool start, const struct lup_hdr *hdr, const uint8_t *fwd,
                       const char *name)
{
        struct conn *c = &s->conns[idx];
        uint8_t ticket[LUP_TICKET_SIZE];
        const uint8_t *tk = NULL;
        int r;

        if (c->tls) {
                r = conn_handoff(c, ticket);
                if (r < 0) {
                        if (start)
                                lupd_registry_release(&s->reg, entry);
                        sup_conn_close(s, idx, 0, "cannot send the TLS hand-off: %s", strerror(-r));
                        return;
                }
                tk = ticket;
        }
        r = start ? sup_session_start(s, entry, c->fd, hdr, fwd, tk, c->peer)
                  : sup_session_attach(s, entry, c->fd, hdr, fwd, tk, c->peer);
        explicit_bzero(ticket, sizeof(ticket));
        if (r == -EBUSY) {
                sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE,
                               "session %s is busy (resumes already in progress)", name);
                return;
        }
        if (r < 0) {
                sup_conn_close(s, idx, CUDA_ERROR_OPERATING_SYSTEM, "cannot %s session %s: %s",
                               start ? "start a worker for" : "hand the connection to", name, strerror(-r));
                return;
        }
        sup_conn_drop(s, idx); /* the worker holds the connection now */
}

/*
 * The first frame is complete: validate the HELLO, find the client's
 * tenant (supervisor/auth.c) and the session key, then route it. Names
 * live in the tenant's namespace, so a name another tenant holds is, to
 * this client, a name that does not exist (issue 15, finding 4).
 *
 *   key registered, token zero      refused "session NAME is busy": a zero
 *                                   token asks for a new session, and
 *                                   this name is taken;
 *   key registered, token non-zero  LUPD_CTL_ATTACH to its worker, which
 *                                   checks the token and answers the
 *                                   client itself (refused "busy" while
 *                                   the worker has not reported READY or
 *                                   has too many resumes in flight);
 *   key unknown, token non-zero,    restored from the store for it, the
 *   a checkpoint store              HELLO waiting (supervisor/adopt.c), or
 *                                   refused with the verdict: another host
 *                                   holds it, or it no longer exists;
 *   key unknown, token non-zero     refused with CUDA_ERROR_DEVICE_UNAVAILABLE
 *                                   "session NAME no longer exists", so the
 *                                   client stops retrying;
 *   key unknown, token non-zero,    refused as moved (not "no longer exists"),
 *   drained by the health watch     so the client tries its other servers;
 *   key unknown, token zero         a new session, within the tenant's caps,
 *                                   unless the health watch stops admitting.
 */
static void conn_hello(struct sup *s, int idx)
{
        struct conn *c = &s->conns[idx];
        struct lup_hello hello;
        struct lup_hdr fwd_hdr = c->hdr;
        uint8_t fwd[LUPD_HELLO_MAX_PAYLOAD];
        char tenant[LUPD_MAX_TENANT + 1], key[LUP_MAX_NAME + 1], why_buf[200];
        const char *why = NULL;
        int r, entry;

        r = lup_hello_decode(c->payload, c->hdr.len, &hello, &why);
        if (r < 0) {
                sup_conn_close(s, idx, CUDA_ERROR_INVALID_VALUE, "%s", why ? why : "malformed HELLO");
                return;
        }
        r = sup_auth_tenant(s, idx, (hello.flags & LUP_HELLO_AUTH) ? hello.auth : NULL, hello.auth_len, tenant,
                            sizeof(tenant), &why);
        OPENSSL_cleanse(hello.auth, sizeof(hello.auth));
        if (r < 0) {
                /* CUDA_ERROR_NOT_PERMITTED: the client stops retrying */
                sup_conn_close(s, idx, CUDA_ERROR_NOT_PERMITTED, "%s", why);
                return;
        }
        if (lupd_session_key(tenant, hello.name, key, sizeof(key), &why) < 0 ||
            conn_forward_hello(&hello, key, fwd, sizeof(fwd), &fwd_hdr) < 0) {
                sup_conn_close(s, idx, CUDA_ERROR_INVALID_VALUE, "%s", why ? why : "invalid session name");
                return;
        }
        entry = lupd_registry_find_name(&s->reg, key);
        if (entry >= 0) {
                const struct lupd_session *se = &s->reg.s[entry];
                if (token_is_zero(hello.token) || !se->ready) {
                        sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE, "session %s is busy", hello.name);
                        return;
                }
                conn_route(s, idx, entry, false, &fwd_hdr, fwd, hello.name);
                return;
        }
        bool admitting = sup_health_admitting(s, why_buf, sizeof(why_buf));
        if (!token_is_zero(hello.token) && sup_health_moved(s, key) && (!admitting || !s->checkpoints)) {
                /* not "no longer exists": the client goes on to its other servers */
                sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE,
                               "session %s was checkpointed and moved off this host by its GPU health watch; a "
                               "lupined sharing the checkpoint store can restore it",
                               hello.name);
                return;
        }
        /* A resuming client whose session is not here: it may be in the
         * store, drained or left by another host (supervisor/adopt.c). */
        if (!token_is_zero(hello.token) && s->checkpoints && admitting && sup_adopt_begin(s, idx, key, hello.name))
                return;
        if (!token_is_zero(hello.token) && s->checkpoints && !admitting) {
                sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE,
                               "session %s is not on this host, which admits no sessions now (%s); a lupined "
                               "sharing the checkpoint store can restore it",
                               hello.name, why_buf);
                return;
        }
        if (!token_is_zero(hello.token)) {
                sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE, "session %s no longer exists", hello.name);
                return;
        }
        if (!admitting) {
                sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE, "not admitting new sessions: %s", why_buf);
                return;
        }
        if (sup_tenant_caps(s, key, why_buf, sizeof(why_buf)) < 0) {
                sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE, "%s", why_buf);
                return;
        }
        entry = lupd_registry_claim(&s->reg, key, (hello.flags & LUP_HELLO_AVOID_SLOTS) ? hello.avoid_slots : 0);
        if (entry == -EBUSY) {
                sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE, "session %s is busy", hello.name);
                return;
        }
        if (entry == -ENOSPC && (hello.flags & LUP_HELLO_AVOID_SLOTS) && hello.avoid_slots) {
                sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE,
                               "server full: no arena slot is free here outside the %d the client holds for its "
                               "other servers",
                               __builtin_popcountll(hello.avoid_slots));
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
        sup_health_forget(s, key);
        if (tenant[0])
                lup_info("session %s of tenant %s: new, from %s", key, tenant, c->peer);
        conn_route(s, idx, entry, true, &fwd_hdr, fwd, hello.name);
}

/*
 * A peer HELLO (LUP_HELLO_PEER): another lupined with one copy for the
 * session whose key it names (lupine/wire.h, "Copies between servers").
 * It needs no bearer token: the worker admits it by the ticket it gave
 * its own client. It never starts a session, and it is refused at once
 * (the copy is tried again) while this daemon drains or restores.
 */
static void conn_peer(struct sup *s, int idx, const struct lup_hello *hello)
{
        struct conn *c = &s->conns[idx];
        int entry = lupd_registry_find_name(&s->reg, hello->name);
        uint8_t ticket[LUP_TICKET_SIZE];

        if (s->stopping || !s->serving) {
                sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE,
                               "peer copy for session %s: this lupined is %s; try again", hello->name,
                               s->stopping ? "draining" : "restoring its sessions");
                return;
        }
        if (entry < 0 || !s->reg.s[entry].ready) {
                sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE, "peer copy: session %s is not served here",
                               hello->name);
                return;
        }
        /* over TLS it goes on to the worker's TLS session, as a client's does */
        int r = c->tls ? conn_handoff(c, ticket) : 0;
        if (r == 0)
                r = sup_session_peer(s, entry, c->fd, &c->hdr, c->payload, c->tls ? ticket : NULL, c->peer);
        explicit_bzero(ticket, sizeof(ticket));
        if (r < 0) {
                sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE, "peer copy for session %s: %s", hello->name,
                               r == -EBUSY ? "its worker is busy" : strerror(-r));
                return;
        }
        sup_conn_drop(s, idx); /* the worker holds the connection now */
}

/* Whether the complete HELLO of connection idx is a peer's; then it is
 * dealt with (conn_peer). */
static bool conn_took_peer(struct sup *s, int idx)
{
        struct conn *c = &s->conns[idx];
        struct lup_hello hello;
        const char *why;

        if (lup_hello_decode(c->payload, c->hdr.len, &hello, &why) < 0 || !(hello.flags & LUP_HELLO_PEER))
                return false; /* a malformed HELLO is refused by conn_hello, with its reason */
        conn_peer(s, idx, &hello);
        return true;
}

/* The header is complete: judge it. Returns 0 to read the payload, or
 * -EBADMSG after closing the connection. */
static int conn_check_header(struct sup *s, int idx)
{
        struct conn *c = &s->conns[idx];
        const char *why;

        if (lup_hdr_decode(c->hdr_buf, &c->hdr, &why) < 0) {
                if (lup_tls_looks_like_hello(c->hdr_buf, LUP_HDR_SIZE))
                        why = "the client speaks TLS, and this port does not (lupined has no --tls-cert, or "
                              "this is its UNIX socket)";
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

/* c->got grew: judges what is complete. Returns 1 to read on, 0 when the
 * connection is dealt with (judged and routed, or closed). */
static int conn_take(struct sup *s, int idx)
{
        struct conn *c = &s->conns[idx];

        if (!c->have_hdr) {
                if (c->got < LUP_HDR_SIZE)
                        return 1;
                if (conn_check_header(s, idx) < 0)
                        return 0;
        }
        if (c->got < c->hdr.len)
                return 1;
        if (c->hdr.op == LUP_OP_ADMIN)
                sup_admin_run(s, idx);
        else if (c->hdr.op == LUP_OP_NVML)
                sup_nvml_run(s, idx);
        else if (conn_took_peer(s, idx))
                ;
        else if (s->stopping)
                c->parked = true; /* a drain answers ADMIN (lupinectl drain's progress) and nothing else:
                                   * the HELLO waits, and its connection closes when the daemon exits */
        else if (!s->serving)
                c->parked = true; /* a session may be the one being restored: after the restore */
        else
                conn_hello(s, idx);
        return 0;
}

void sup_conn_rejudge(struct sup *s)
{
        if (s->stopping)
                return; /* they wait with the other HELLOs, closed at the exit */
        for (int i = 0; i < LUPD_MAX_PENDING; i++) {
                struct conn *c = &s->conns[i];
                if (c->fd < 0 || c->closing || !c->rejudge)
                        continue;
                c->rejudge = false;
                c->parked = false;
                c->deadline = sup_now_ms() + (uint64_t)s->cfg->hello_timeout_ms;
                conn_hello(s, i);
        }
}

void sup_conn_unpark(struct sup *s)
{
        for (int i = 0; i < LUPD_MAX_PENDING; i++) {
                struct conn *c = &s->conns[i];
                if (c->fd < 0 || c->closing || !c->parked || c->adopt_entry >= 0 || c->rejudge)
                        continue;
                c->parked = false;
                c->deadline = sup_now_ms() + (uint64_t)s->cfg->hello_timeout_ms;
                conn_hello(s, i);
        }
}

/* Before the TLS handshake: a plaintext lupine client on a TLS port gets a
 * refusal it can read and show. Returns 0 to go on, -EBADMSG after
 * closing. */
static int conn_tls_peek(struct sup *s, int idx)
{
        struct conn *c = &s->conns[idx];
        uint8_t b[LUP_HDR_SIZE];
        const char *why;
        ssize_t n = recv(c->fd, b, sizeof(b), MSG_PEEK | MSG_DONTWAIT);

        if (n <= 0)
                return 0; /* nothing yet: OpenSSL will say */
        /* Once only: after the handshake's first read, later bytes are
         * the middle of a ClientHello. */
        c->tls_peeked = true;
        if (n < 6)
                return 0; /* too little to tell: OpenSSL will */
        if (lup_tls_looks_like_hello(b, (size_t)n))
                return 0;
        lup_tls_free(c->tls, false);
        c->tls = NULL;
        if (n == LUP_HDR_SIZE && lup_hdr_decode(b, &c->hdr, &why) == 0) {
                c->have_hdr = true; /* for the refusal's lane and seq */
                sup_conn_close(s, idx, CUDA_ERROR_DEVICE_UNAVAILABLE,
                               "this is a TLS port and the client spoke plaintext: use tls://HOST:PORT in "
                               "LUPINE_SERVER");
        } else {
                sup_conn_close(s, idx, 0, "this is a TLS port and the client sent no TLS ClientHello");
        }
        return -EBADMSG;
}

/* A TLS connection's socket is ready (res: the poll result): the
 * handshake goes on, or OpenSSL gives what it has decrypted. */
static void conn_tls_ready(struct sup *s, int idx, int res)
{
        struct conn *c = &s->conns[idx];

        if (res < 0 && res != -EINTR && res != -EAGAIN) {
                sup_conn_close(s, idx, 0, "poll failed: %s", strerror(-res));
                return;
        }
        if (!c->tls_done) {
                if (!c->tls_peeked && conn_tls_peek(s, idx) < 0)
                        return;
                int r = lup_tls_handshake_step(c->tls);
                if (r == -EAGAIN)
                        goto rearm;
                if (r < 0) {
                        sup_conn_close(s, idx, 0, "TLS handshake failed: %s", lup_tls_error(c->tls));
                        return;
                }
                c->tls_done = true;
        }
        for (;;) {
                uint8_t *dst;
                size_t want;
                sup_conn_dst(c, &dst, &want);
                ssize_t k = lup_tls_recv_nb(c->tls, dst, want);
                if (k == -EAGAIN)
                        goto rearm;
                if (k == 0) {
                        sup_conn_close(s, idx, 0, "connection closed before its HELLO was complete");
                        return;
                }
                if (k < 0) {
                        sup_conn_close(s, idx, 0, "TLS receive failed: %s", lup_tls_error(c->tls));
                        return;
                }
                c->got += (size_t)k;
                if (conn_take(s, idx) == 0)
                        return;
        }
rearm:
        if (sup_conn_arm_recv(s, idx) < 0)
                sup_conn_close(s, idx, 0, "submission queue full");
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
        if (c->tls) {
                conn_tls_ready(s, idx, res);
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
        if (conn_take(s, idx) == 0)
                return;
rearm:
        if (sup_conn_arm_recv(s, idx) < 0)
                sup_conn_close(s, idx, 0, "submission queue full");
}
