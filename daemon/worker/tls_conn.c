/* SPDX-License-Identifier: MIT */
/*
 * The worker's end of a TLS connection (lupine/wire.h, "TLS"; docs/tls.md).
 * The supervisor ran the first TLS session, authenticated the client and
 * routed its HELLO here with a one-use ticket. The client now starts a
 * second session on the same socket, with this worker, and proves with
 * the ticket that it is the client the supervisor admitted. After that the
 * session's frames go through OpenSSL (worker/tx.c, worker/loop.c), or
 * through the kernel where it offers kernel TLS.
 *
 * The handshake is synchronous, bounded by LUPD_TLS_HANDOFF_TIMEOUT_MS: a
 * new session's worker has nothing else to do yet, and a resume reaches a
 * running worker only after the supervisor has authenticated the client
 * as this session's tenant.
 */
#define LUP_LOG_CAT LUP_LOGC_TLS
#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>

#include "frame.h"
#include "log.h"
#include "supervisor/supervisor.h" /* LUPD_TLS_HANDOFF_TIMEOUT_MS */
#include "worker/session.h"

int lupw_tls_ctx_load(struct lupw_session *s)
{
        char err[512];

        if (s->tls_ctx)
                return 0;
        if (!s->cfg->tls_cert[0]) {
                lup_err("session %s: a TLS connection was handed over, but this worker has no --tls-cert", s->name);
                return -EINVAL;
        }
        if (lup_tls_server_ctx_new(s->cfg->tls_cert, s->cfg->tls_key, NULL,
                                   LUP_TLS_KTLS | LUP_TLS_READ_AHEAD | LUP_TLS_RECORDS, &s->tls_ctx, err,
                                   sizeof(err)) < 0) {
                lup_err("session %s: TLS: %s", s->name, err);
                return -EINVAL;
        }
        return 0;
}

/* Says once per worker who carries the records. */
static void log_ktls(struct lupw_session *s, struct lup_tls *t)
{
        static bool said;
        bool tx, rx;

        if (said)
                return;
        said = true;
        lup_tls_ktls(t, &tx, &rx);
        if (tx && rx)
                lup_info("session %s: TLS records go through kernel TLS", s->name);
        else
                lup_info("session %s: TLS in user space (no kernel TLS: no tls module?); the records are sealed by %s",
                         s->name, lup_tls_carrier(t));
}

int lupw_handoff_check(const uint8_t hb[LUP_HDR_SIZE], const uint8_t *got, const uint8_t ticket[LUP_TICKET_SIZE],
                       const struct lup_hdr *hello_req, const char **ret_why)
{
        struct lup_hdr h;
        const char *why = NULL;

        if (lup_hdr_decode(hb, &h, &why) < 0) {
                *ret_why = why;
                return -EBADMSG;
        }
        if (h.op != LUP_OP_HANDOFF || h.len != LUP_TICKET_SIZE || h.lane != hello_req->lane ||
            h.seq != hello_req->seq) {
                *ret_why = "wrong op, length, lane or seq";
                return -EBADMSG;
        }
        if (got && CRYPTO_memcmp(got, ticket, LUP_TICKET_SIZE) != 0) {
                *ret_why = "wrong HANDOFF ticket";
                return -EACCES;
        }
        *ret_why = NULL;
        return 0;
}

struct lup_tls *lupw_tls_accept(struct lupw_session *s, int fd, const struct lup_hdr *hello_req,
                                const uint8_t ticket[LUP_TICKET_SIZE])
{
        uint8_t hb[LUP_HDR_SIZE], got[LUP_TICKET_SIZE];
        const char *why = NULL;
        struct lup_tls *t;
        int rc;

        if (lupw_tls_ctx_load(s) < 0)
                return NULL;
        t = lup_tls_new(s->tls_ctx, fd, NULL);
        if (!t) {
                lup_err("session %s: cannot set up TLS for the connection", s->name);
                return NULL;
        }
        rc = lup_tls_handshake(t, LUPD_TLS_HANDOFF_TIMEOUT_MS);
        if (rc == 0)
                rc = lup_tls_read_full(t, hb, sizeof(hb), LUPD_TLS_HANDOFF_TIMEOUT_MS);
        if (rc < 0) {
                lup_warn("session %s: the client's second TLS handshake failed: %s", s->name,
                         rc == -ETIMEDOUT ? "timed out" : lup_tls_error(t));
                goto fail;
        }
        if (lupw_handoff_check(hb, NULL, ticket, hello_req, &why) < 0) {
                lup_warn("session %s: closing the connection: its first frame after the TLS hand-off is not "
                         "HANDOFF (%s)",
                         s->name, why);
                goto fail;
        }
        rc = lup_tls_read_full(t, got, sizeof(got), LUPD_TLS_HANDOFF_TIMEOUT_MS);
        if (rc < 0) {
                lup_warn("session %s: closing the connection: the HANDOFF ticket did not arrive", s->name);
                goto fail;
        }
        if (lupw_handoff_check(hb, got, ticket, hello_req, &why) < 0) {
                lup_warn("session %s: closing the connection: %s", s->name, why);
                goto fail;
        }
        lup_tls_set_write_timeout(t, s->tx.client_timeout_ms ? (int)s->tx.client_timeout_ms : -1);
        log_ktls(s, t);
        return t;
fail:
        lup_tls_free(t, true);
        return NULL;
}

void lupw_tls_free(struct lupw_session *s)
{
        lup_tls_ctx_free(s->tls_ctx);
        s->tls_ctx = NULL;
}
