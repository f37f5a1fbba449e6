/* SPDX-License-Identifier: MIT */
/*
 * The worker process (lupined --worker): set up, start a new session from
 * the supervisor's ASSIGN or restore one from its checkpoint (--restore),
 * serve it (worker/loop.c), and release everything it held.
 */
#define LUP_LOG_CAT LUP_LOGC_SESSION
#include "worker/worker.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth_tokens.h"
#include "ctl.h"
#include "log.h"
#include "net.h"
#include "worker/graphs.h"
#include "worker/privs.h"
#include "worker/session.h"

#define OUT_CAP (256u * 1024u) /* the reply batch (s->out) */

static int start_new(struct lupw_session *s)
{
        uint8_t msg[LUPD_CTL_MAX_MSG];
        int fds[1] = { -1 }, nfds = 0;
        struct lup_hdr req;
        struct lup_hello hello;
        struct lup_tls *tls = NULL;
        uint8_t ticket[LUP_TICKET_SIZE];
        bool via_tls = false;
        uint32_t slot;
        const char *why = "no message";

        int n = lup_recv_fds(s->ctl_fd, msg, sizeof(msg), fds, 1, &nfds);
        if (n <= 0 || nfds != 1 ||
            lupw_parse_assign(msg, (size_t)n, LUPD_CTL_ASSIGN, &slot, &req, &hello, &via_tls, ticket, &why) < 0) {
                lup_err("worker: bad assignment from the supervisor: %s", n <= 0 ? "channel closed" : why);
                for (int i = 0; i < nfds; i++)
                        close(fds[i]);
                return -EBADMSG;
        }
        snprintf(s->name, sizeof(s->name), "%s", hello.name);
        lupd_log_context_key(s->name);
        if (via_tls) {
                tls = lupw_tls_accept(s, fds[0], &req, ticket);
                if (!tls) {
                        close(fds[0]);
                        return -EPROTO;
                }
        }
        lupw_tx_set_fd(s, fds[0], tls, NULL);
        s->slot = slot & ~LUPD_ASSIGN_ANY_SLOT;
        s->slot_any = (slot & LUPD_ASSIGN_ANY_SLOT) != 0;
        int rc = lupw_setup_session(s, &req, &hello);
        if (rc < 0 || !s->mem.reserved)
                return -EIO;
        return 0;
}

/* LUPINE_SPIN_US: how long a worker polls for the next frame before
 * sleeping, in ns (default 50 us; 0 turns polling off) */
static uint64_t spin_from_env(void)
{
        const char *spin = getenv("LUPINE_SPIN_US");
        long spin_us = spin && *spin ? strtol(spin, NULL, 10) : 50;
        return spin_us > 0 && spin_us < 100000 ? (uint64_t)spin_us * 1000 : 0;
}

/* What the session holds on the driver, and the driver itself. */
static void release_session(struct lupw_session *s)
{
        lupw_beat_stop();
        lupw_lease_end(s); /* before the provider closes */
        lupw_hot_free(s);
        lupw_ckpt_close(s);
        lupw_copy_free(s);
        if (s->rx.pinned)
                s->be.fn.cuMemFreeHost(s->rx.buf);
        if (s->copy.staging_pinned)
                s->be.fn.cuMemFreeHost(s->copy.staging);
        if (s->copy.staging2)
                s->be.fn.cuMemFreeHost(s->copy.staging2);
        if (s->rx.pinned)
                s->rx.buf = NULL;
        if (s->copy.staging_pinned)
                s->copy.staging = NULL;
        lupw_vmm_release(s);
        lupw_release_all(s);
        backend_close(&s->be);
}

int worker_main(const struct lupd_config *cfg)
{
        struct lupw_session *s = calloc(1, sizeof(*s));
        int rc;

        if (!s)
                return 1;
        s->cfg = cfg;
        s->ctl_fd = cfg->ctl_fd;
        s->fd = -1;
        s->lease.efd = -1; /* no lease until lupw_lease_claim (worker/lease.c) */
        s->loop.exit_status = 0;
        s->rx.cap = 8u << 20; /* several frames: see lupw_process_input's compaction */
        s->out.cap = OUT_CAP;
        s->rx.buf = malloc(s->rx.cap);
        s->out.buf = malloc(s->out.cap);
        s->copy.staging = malloc(LUP_BULK_CHUNK);
        lupw_tx_init(s);
        s->rx.spin_ns = spin_from_env();
        if (!s->rx.buf || !s->out.buf || !s->copy.staging)
                goto out_free;
        lupw_handles_init(s);
        lupw_graphs_init(s);
        rc = io_uring_queue_init(16, &s->loop.ring, 0);
        if (rc < 0) {
                lup_err("worker: io_uring_queue_init failed: %s (io_uring is required)", strerror(-rc));
                lupw_ctl_send(s, LUPD_CTL_READY, rc, 0, true);
                goto out_free;
        }
        s->loop.ring_ok = true;
        /* Before anything a client or checkpoint can reach: the backend,
         * the connection, the fds of a hot restore. The ring is made
         * first: with kernel.io_uring_disabled=1 only CAP_SYS_ADMIN or
         * kernel.io_uring_group may create one, and it holds no
         * privilege (its requests run with the submitter's credentials). */
        /* The certificate and key are read before the privileges go, as
         * a service reads its key files before it drops root. */
        if (cfg->tls_cert[0] && lupw_tls_ctx_load(s) < 0) {
                lupw_ctl_send(s, LUPD_CTL_READY, -EINVAL, 0, true);
                s->loop.exit_status = 1;
                goto out_free;
        }
        rc = lupw_drop_privileges();
        if (rc < 0) {
                lupw_ctl_send(s, LUPD_CTL_READY, rc, 0, true);
                s->loop.exit_status = 1;
                goto out_free;
        }
        (void)lupw_beat_start(s->ctl_fd, cfg->health.interval_ms); /* a restore of many GiB beats too */

        if (cfg->restore[0]) {
                snprintf(s->name, sizeof(s->name), "%s", cfg->restore);
                lupd_log_context_key(s->name);
                /* a hot restore's fds (and connection) come first */
                rc = cfg->hot ? lupw_hot_receive(s) : 0;
                if (rc == 0)
                        rc = lupw_restore(s, cfg->restore);
                if (rc == 0)
                        rc = lupw_hot_adopt_conn(s);
                if (rc < 0) {
                        s->lease.release_at_end = true; /* claimed, nothing ran: free for any host */
                        lupw_ctl_send(s, LUPD_CTL_READY, rc, 0, true);
                        s->loop.exit_status = 1;
                        goto out_release;
                }
                lupw_ctl_send(s, LUPD_CTL_READY, 0, s->slot, true);
                lupw_stats_report_now(s); /* the supervisor learns the epoch it was restored from */
                if (rc == 0)
                        lup_info("session %s: restored in arena slot %u at seq %llu; waiting %d s for its client",
                                 s->name, s->slot, (unsigned long long)s->last_seq, cfg->session_ttl_s);
        } else {
                if (start_new(s) < 0) {
                        lupw_ctl_send(s, LUPD_CTL_READY, -EIO, 0, true);
                        s->loop.exit_status = 1;
                        goto out_release;
                }
                lupw_ctl_send(s, LUPD_CTL_READY, 0, s->slot, true);
                lup_info("session %s: serving in arena slot %u", s->name, s->slot);
        }
        int served = lupw_serve(s);
        lupw_op_stats_flush(s);
        if (served < 0)
                s->loop.exit_status = 1;
        else if (!s->ckpt.draining && !s->ckpt.keep)
                lupw_forget_checkpoint(s); /* the session ended: an old checkpoint must not come back */

out_release:
        release_session(s);
out_free:;
        int status = s->loop.exit_status;
        lupw_tx_free(s);
        free(s->stats.ops);
        if (s->loop.ring_ok)
                io_uring_queue_exit(&s->loop.ring);
        lup_tls_free(s->tls, true);
        lupw_tls_free(s);
        if (s->fd >= 0)
                close(s->fd);
        free(s->rx.buf);
        free(s->out.buf);
        free(s->copy.staging);
        lupw_graphs_free(s);
        lupw_handles_free(s);
        lupw_jit_free(s);
        lup_rangemap_free(&s->obj.globals);
        free(s);
        return status;
}
