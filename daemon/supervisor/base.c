/* SPDX-License-Identifier: MIT */
/*
 * The bottom of the supervisor: what every other supervisor file may call,
 * and which calls none of them. The clock, SQEs and cancellation on the
 * one ring, the rate limit on connection log lines, and the lines for
 * systemd (STATUS=, EXTEND_TIMEOUT_USEC=). The loop that owns the ring is
 * supervisor/supervisor.c, at the top.
 */
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>

#include "clock.h"
#include "ctl.h"
#include "log.h"
#include "supervisor/internal.h"

/* Refusals and drops are logged one line each, but a flood of hostile
 * connections must not become a flood of log lines. */
#define CONN_LOG_BURST     1000u
#define CONN_LOG_WINDOW_MS 10000u

uint64_t sup_now_ms(void)
{
        return lup_now_ns() / 1000000u;
}

struct io_uring_sqe *sup_sqe(struct sup *s)
{
        struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);

        if (!sqe) {
                (void)io_uring_submit(&s->ring);
                sqe = io_uring_get_sqe(&s->ring);
        }
        return sqe;
}

void sup_cancel_op(struct sup *s, uint64_t ud, int fd)
{
        struct io_uring_sqe *sqe = sup_sqe(s);

        if (!sqe) {
                (void)shutdown(fd, SHUT_RDWR);
                return;
        }
        io_uring_prep_cancel64(sqe, ud, 0);
        io_uring_sqe_set_data64(sqe, ud_make(EV_IGNORE, 0));
}

bool sup_conn_log_allow(struct sup *s)
{
        struct log_limit *l = &s->conn_log;
        uint64_t now = sup_now_ms();

        if (now - l->window_start >= CONN_LOG_WINDOW_MS) {
                if (l->suppressed)
                        lup_warn("%u further connection messages were suppressed", l->suppressed);
                l->window_start = now;
                l->lines = 0;
                l->suppressed = 0;
        }
        if (l->lines < CONN_LOG_BURST) {
                l->lines++;
                return true;
        }
        l->suppressed++;
        return false;
}

/* ", 42% of 12.0 GiB" for the checkpoints or restores that report progress. */
static void progress_text(const struct lupd_registry *reg, char *out, size_t cap)
{
        uint64_t done = 0, total = 0;

        out[0] = 0;
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++) {
                const struct lupd_session_stats *st = &reg->s[i].stats;
                if (reg->s[i].state == LUPD_SESSION_LIVE && st->phase != LUPD_WORK_NONE) {
                        done += st->done;
                        total += st->total;
                }
        }
        if (total)
                snprintf(out, cap, ", %u%% of %.1f GiB", (unsigned)(done * 100 / total), (double)total / 1073741824.0);
}

void sup_count_work(struct sup *s, const struct lupd_session *se, bool restore)
{
        /* the bytes the last progress report named, else the memory held */
        uint64_t bytes = se->stats.total ? se->stats.total : se->stats.mem;
        uint64_t ms = se->work_started_ms ? sup_now_ms() - se->work_started_ms : 0;

        if (restore) {
                s->totals.restores++;
                s->totals.restore_bytes += bytes;
                s->totals.restore_ms += ms;
        } else {
                s->totals.checkpoints++;
                s->totals.checkpoint_bytes += bytes;
                s->totals.checkpoint_ms += ms;
        }
}

void sup_status_update(struct sup *s)
{
        const struct lupd_registry *reg = &s->reg;
        char progress[64];

        progress_text(reg, progress, sizeof(progress));
        if (s->stop == SUP_DRAIN) {
                int left = 0;
                for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++)
                        left += reg->s[i].state != LUPD_SESSION_FREE && reg->s[i].drain_sent && !reg->s[i].drain_done;
                sd_notifyf(0, "STATUS=draining %d sessions (%d checkpointed, %d lost)%s", left, s->n_checkpointed,
                           s->n_lost, progress);
        } else if (s->stopping) {
                sd_notifyf(0, "STATUS=shutting down, %d worker(s) left", lupd_registry_live(reg));
        } else if (s->restoring) {
                int left = 0;
                for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++)
                        left += reg->s[i].state != LUPD_SESSION_FREE && reg->s[i].restore && !reg->s[i].ready;
                sd_notifyf(0, "STATUS=restoring %d sessions%s", left, progress);
        } else {
                int live = lupd_registry_live(reg) - lupd_registry_count_phase(reg, LUPD_PHASE_FAILED);
                char why[200], health[256] = "";
                if (!sup_health_admitting(s, why, sizeof(why)))
                        snprintf(health, sizeof(health), "; NOT ADMITTING: %s", why);
                sd_notifyf(0, "STATUS=serving %d sessions (%d detached, %d restored and waiting for their client)%s",
                           live, lupd_registry_count_phase(reg, LUPD_PHASE_DETACHED),
                           lupd_registry_count_phase(reg, LUPD_PHASE_WAITING), health);
        }
}

void sup_notify_extend(struct sup *s, uint64_t now)
{
        if (now < s->next_extend)
                return;
        s->next_extend = now + LUPD_EXTEND_INTERVAL_MS;
        sd_notifyf(0, "EXTEND_TIMEOUT_USEC=%llu", (unsigned long long)LUPD_EXTEND_USEC);
}
