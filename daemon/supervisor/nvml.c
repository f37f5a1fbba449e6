/* SPDX-License-Identifier: MIT */
/*
 * NVML requests: the light connection kind of libnvidia-ml.so.1's shim
 * (abi/lupine/nvml_wire.h, docs/nvml.md). Its first frame is an NVML
 * request instead of HELLO; the supervisor answers it itself with a
 * snapshot of the server's GPUs and closes the connection. No worker is
 * started and no session slot is taken; a malformed request is closed with
 * a logged reason, like a malformed HELLO.
 *
 * Snapshots are cached for at most LUPD_NVML_CACHE_MS, so a watch loop or
 * `nvidia-smi dmon` on many clients costs the host one NVML sweep a second.
 * The processes listed are lupine's sessions' workers only: the host's
 * other processes are never shown. Without tenants (issue 15), every
 * client sees every session's worker.
 */
#define LUP_LOG_CAT LUP_LOGC_NVML
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "buf.h"
#include "frame.h"
#include "log.h"
#include "supervisor/internal.h"
#include "supervisor/nvml_values.h"

#define LUPD_NVML_CACHE_MS 1000u

static struct lup_nvml_snapshot *cache;
static uint64_t cache_at_ms;
static bool cache_valid;

int sup_nvml_check_header(struct sup *s, int idx)
{
        struct conn *c = &s->conns[idx];

        if ((c->hdr.flags & LUP_F_SYNC) == 0 || (c->hdr.flags & (LUP_F_REPLY | LUP_F_MORE)) != 0) {
                sup_conn_close(s, idx, 2 /* NVML_ERROR_INVALID_ARGUMENT */,
                               "NVML request must be a synchronous request (flags 0x%x)", (unsigned)c->hdr.flags);
                return -EBADMSG;
        }
        if (c->hdr.len < LUP_NVML_REQ_SIZE || c->hdr.len > LUP_NVML_REQ_MAX) {
                sup_conn_close(s, idx, 2, "NVML request has %u payload bytes, not %u to %u", (unsigned)c->hdr.len,
                               LUP_NVML_REQ_SIZE, LUP_NVML_REQ_MAX);
                return -EBADMSG;
        }
        return 0;
}

/* The workers of the live sessions whose key begins with the tenant part
 * prefix (lupd_tenant_prefix): the tenant's own. */
static int session_pids(const struct sup *s, const char *prefix, pid_t *pids)
{
        size_t pl = strlen(prefix);
        int n = 0;

        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++) {
                const struct lupd_session *se = &s->reg.s[i];
                if (se->state != LUPD_SESSION_LIVE || se->pid <= 0 || se->reaped)
                        continue;
                if (!lupd_key_in_tenant(se->name, prefix, pl))
                        continue;
                pids[n++] = se->pid;
        }
        return n;
}

/* A fresh enough snapshot in cache for the tenant whose keys begin with
 * prefix: 0, or -errno with *why. The cache holds one tenant's view; a
 * watch loop asks as the same tenant every time. */
static int nvml_snapshot(struct sup *s, const char *prefix, const char **why)
{
        static char cache_prefix[LUPD_TENANT_PREFIX_MAX];
        static pid_t cache_pids[LUP_ARENA_SLOTS];
        static int cache_n;
        pid_t pids[LUP_ARENA_SLOTS];
        uint64_t now = sup_now_ms();
        int n = session_pids(s, prefix, pids);

        /* a session that began or ended is seen at once, not up to a
         * second later (a context made within a session still is: the
         * host's NVML lists its worker only from then on) */
        bool same_sessions = n == cache_n && memcmp(pids, cache_pids, sizeof(pid_t) * (size_t)n) == 0;
        if (cache_valid && same_sessions && now - cache_at_ms < LUPD_NVML_CACHE_MS &&
            strcmp(prefix, cache_prefix) == 0) {
                /* the process lists are asked anew every time: a session's
                 * context made since the snapshot must show (PyTorch asks
                 * right after its first allocation) */
                if (cache->backend == LUP_BACKEND_CUDA)
                        lupd_nvml_host_procs(cache, pids, n);
                return 0;
        }
        memcpy(cache_pids, pids, sizeof(pid_t) * (size_t)n);
        cache_n = n;
        snprintf(cache_prefix, sizeof(cache_prefix), "%s", prefix);
        if (!cache && !(cache = malloc(sizeof(*cache)))) {
                *why = "out of memory";
                return -ENOMEM;
        }
        bool sim = s->cfg->backend == LUPD_BACKEND_SIM;
        if (!sim) {
                int r = lupd_nvml_host_open(why);
                if (r < 0 && s->cfg->backend == LUPD_BACKEND_CUDA)
                        return r;
                sim = r < 0; /* auto: the workers fall back to the sim too */
        }
        if (sim)
                lupd_nvml_sim_fill(cache, pids, n);
        else if (lupd_nvml_host_fill(cache, pids, n) < 0) {
                *why = "the host's NVML cannot count its devices";
                cache_valid = false;
                return -EIO;
        }
        cache_valid = true;
        cache_at_ms = now;
        return 0;
}

struct lup_nvml_snapshot *sup_nvml_view(struct sup *s)
{
        const char *why = NULL;
        return nvml_snapshot(s, "", &why) == 0 ? cache : NULL;
}

void sup_nvml_run(struct sup *s, int idx)
{
        struct conn *c = &s->conns[idx];
        const char *why = NULL;
        size_t len;
        uint8_t *frame;
        int r;
        const uint8_t *auth;
        size_t auth_len;
        char tenant[LUPD_MAX_TENANT + 1], prefix[LUPD_TENANT_PREFIX_MAX];

        if (lup_nvml_req_decode_auth(c->payload, c->hdr.len, &auth, &auth_len, &why) < 0) {
                sup_conn_close(s, idx, 2, "%s", why);
                return;
        }
        if (sup_auth_tenant(s, idx, auth, auth_len, tenant, sizeof(tenant), &why) < 0) {
                sup_conn_close(s, idx, 4 /* NVML_ERROR_NO_PERMISSION */, "NVML: %s", why);
                return;
        }
        (void)lupd_tenant_prefix(tenant, prefix); /* a tenant from sup_auth_tenant is never too long */
        if (nvml_snapshot(s, prefix, &why) < 0) {
                sup_conn_close(s, idx, 9 /* NVML_ERROR_DRIVER_NOT_LOADED */, "NVML: %s", why);
                return;
        }
        frame = malloc(LUP_HDR_SIZE + LUP_NVML_MAX_REPLY);
        if (!frame) {
                sup_conn_close(s, idx, 20 /* NVML_ERROR_MEMORY */, "NVML: out of memory");
                return;
        }
        r = lup_nvml_encode(cache, frame + LUP_HDR_SIZE, LUP_NVML_MAX_REPLY, &len);
        if (r == 0) {
                struct lup_hdr h = { .len = (uint32_t)len,
                                     .op = LUP_OP_NVML,
                                     .flags = LUP_F_REPLY,
                                     .lane = c->hdr.lane,
                                     .seq = c->hdr.seq };
                lup_hdr_encode(frame, &h);
                /* Room for the whole reply in the fresh socket's send buffer,
                 * then a send that never blocks the loop. */
                int sndbuf = (int)(2 * (LUP_HDR_SIZE + len));
                (void)setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
                if (c->tls) { /* a TLS write gives up after 200 ms (supervisor/conn_slots.c) */
                        r = lup_tls_write_full(c->tls, frame, LUP_HDR_SIZE + len);
                } else {
                        ssize_t k = send(c->fd, frame, LUP_HDR_SIZE + len, MSG_DONTWAIT | MSG_NOSIGNAL);
                        r = k < 0 ? -errno : (size_t)k != LUP_HDR_SIZE + len ? -EAGAIN : 0;
                }
        }
        free(frame);
        if (r < 0) {
                sup_conn_close(s, idx, 0, "NVML: cannot send the snapshot: %s", strerror(-r));
                return;
        }
        lup_debug("NVML snapshot sent to %s", c->peer);
        sup_conn_drop(s, idx); /* answered: quietly, a watch loop asks every second */
}
