/* SPDX-License-Identifier: MIT */
/*
 * What a worker tells its supervisor about its session (LUPD_CTL_STATS,
 * daemon/ctl.h), for `lupinectl status`, the metrics and sd_notify's
 * STATUS, and the progress lines of long checkpoints and restores.
 *
 * Reports are paced: at most one a second while the session works (none
 * while it is idle: nothing changes then), and at most two a second while
 * a checkpoint or restore moves. A report is one small datagram on the
 * control socket; the supervisor reads them whenever they come. The
 * calls, bytes and latency by op (daemon/op_stats.h) go with each report.
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "clock.h"
#include "ctl.h"
#include "log.h"
#include "net.h"
#include "worker/session.h"

#define REPORT_EVERY_NS   1000000000ull /* while serving */
#define PROGRESS_EVERY_NS 500000000ull  /* while checkpointing or restoring */
#define LOG_EVERY_NS      2000000000ull

static uint64_t memory_held(const struct lupw_session *s)
{
        uint64_t b = 0;
        for (size_t i = 0; i < s->mem.n_chunks; i++)
                b += s->mem.chunks[i].size;
        return b;
}

void lupw_op_count(struct lupw_session *s, uint16_t op, uint64_t bytes_in, uint64_t ns)
{
        struct lupw_stats *st = &s->stats;

        if (!st->ops) { /* the first call: a failed allocation only means no counts */
                st->ops = calloc(LUPD_OP_IDS, sizeof(*st->ops));
                if (!st->ops)
                        return;
        }
        if (op >= LUPD_OP_IDS)
                return;
        struct lupd_op_count *c = &st->ops[op];
        c->calls++;
        c->bytes_in += bytes_in;
        c->ns += ns;
        c->bucket[lupd_op_bucket(ns)]++;
        st->ops_counted = true;
}

/* Ships the op table, as many messages as it takes, and clears what got
 * through; what a full socket refused goes with the next report. */
static void send_op_stats(struct lupw_session *s, int flags)
{
        static uint8_t b[LUPD_OP_STATS_FIXED + LUPD_OP_STATS_MAX_RECS * LUPD_OP_STATS_REC];
        struct lupw_stats *st = &s->stats;
        unsigned from = 0, start;
        size_t len;

        if (!st->ops || !st->ops_counted || s->ctl_fd < 0)
                return;
        for (;;) {
                start = from;
                if (!(len = lupd_op_stats_encode(b, sizeof(b), st->ops, &from)))
                        break;
                if (send(s->ctl_fd, b, len, flags | MSG_NOSIGNAL) < 0)
                        return;
                memset(&st->ops[start], 0, (from - start) * sizeof(st->ops[0]));
        }
        st->ops_counted = false;
}

void lupw_op_stats_flush(struct lupw_session *s)
{
        send_op_stats(s, MSG_DONTWAIT); /* never wait on a supervisor that does not read */
}

static void report(struct lupw_session *s, uint64_t now, uint64_t done, uint64_t total)
{
        struct lupw_stats *st = &s->stats;
        uint8_t b[LUPD_CTL_STATS_LEN];
        uint64_t out = atomic_load_explicit(&st->bytes_out, memory_order_relaxed);
        uint64_t mem = memory_held(s); /* a walk of the chunks: only here, at most twice a second */

        lup_put32(b, LUPD_CTL_STATS);
        lup_put32(b + 4, (uint32_t)st->phase);
        lup_put32(b + 8, (uint32_t)s->be.kind);
        lup_put32(b + 12, 0);
        lup_put64(b + 16, s->last_seq);
        lup_put64(b + 24, st->bytes_in);
        lup_put64(b + 32, out);
        lup_put64(b + 40, mem);
        lup_put64(b + 48, s->ckpt.epoch);
        lup_put64(b + 56, st->ckpt_unix_ms);
        lup_put64(b + 64, done);
        lup_put64(b + 72, total);
        lup_put64(b + 80, s->peer.bytes_in);
        lup_put64(b + 88, s->peer.bytes_out);
        /* never block the session on its supervisor: a full socket drops this one */
        if (send(s->ctl_fd, b, sizeof(b), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
                return;
        send_op_stats(s, MSG_DONTWAIT);
        st->sent_ns = now;
        st->sent_calls = s->last_seq;
        st->sent_in = st->bytes_in;
        st->sent_out = out;
        st->sent_epoch = s->ckpt.epoch;
        st->sent_peer = s->peer.bytes_in + s->peer.bytes_out;
}

uint64_t lupw_stats_tick(struct lupw_session *s)
{
        struct lupw_stats *st = &s->stats;
        uint64_t now = lup_now_ns();

        if (s->ctl_fd < 0)
                return 0;
        /* Called before every sleep, so no walk of the chunks here: memory
         * held changes only through calls, which last_seq counts. */
        if (st->sent_calls == s->last_seq && st->sent_in == st->bytes_in &&
            st->sent_out == atomic_load_explicit(&st->bytes_out, memory_order_relaxed) &&
            st->sent_epoch == s->ckpt.epoch && st->sent_peer == s->peer.bytes_in + s->peer.bytes_out)
                return 0;
        if (now - st->sent_ns < REPORT_EVERY_NS)
                return REPORT_EVERY_NS - (now - st->sent_ns);
        report(s, now, 0, 0);
        return 0;
}

void lupw_stats_report_now(struct lupw_session *s)
{
        if (s->ctl_fd >= 0)
                report(s, lup_now_ns(), 0, 0);
}

void lupw_stats_committed(struct lupw_session *s)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        s->stats.ckpt_unix_ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
        s->stats.sent_ns = 0; /* say so at the next tick */
}

static const char *phase_word(int phase)
{
        return phase == LUPD_WORK_RESTORE ? "restore" : "checkpoint";
}

void lupw_progress(struct lupw_session *s, int phase, uint64_t done, uint64_t total)
{
        lupw_progress_named(s, phase, phase_word(phase), done, total);
}

void lupw_progress_named(struct lupw_session *s, int phase, const char *word, uint64_t done, uint64_t total)
{
        struct lupw_stats *st = &s->stats;
        uint64_t now = lup_now_ns();

        if (st->phase != phase) { /* a new phase begins */
                st->phase = phase;
                st->phase_start_ns = now;
                st->logged_ns = now;
                st->logged_tenth = 0;
        }
        double secs = (double)(now - st->phase_start_ns) / 1e9;
        double rate = secs > 0 ? (double)done / secs : 0; /* bytes/s */
        unsigned tenth = total ? (unsigned)(done * 10 / total) : 10;
        if (done >= total) {
                if (total >= (64ull << 20))
                        lup_info("session %s: %s: %.2f GiB in %.1f s (%.2f GB/s)", s->name, word,
                                 (double)total / 1073741824.0, secs, rate / 1e9);
                st->phase = LUPD_WORK_NONE;
                report(s, now, 0, 0);
                return;
        }
        /* a phase shorter than a second gets only its closing line */
        if (now - st->phase_start_ns >= 1000000000ull &&
            (tenth > st->logged_tenth || now - st->logged_ns >= LOG_EVERY_NS)) {
                double eta = rate > 0 ? (double)(total - done) / rate : 0;
                lup_info("session %s: %s: %u%%, %.2f of %.2f GiB, %.2f GB/s, about %.0f s left", s->name, word,
                         (unsigned)(done * 100 / total), (double)done / 1073741824.0, (double)total / 1073741824.0,
                         rate / 1e9, eta);
                st->logged_tenth = tenth;
                st->logged_ns = now;
        }
        if (now - st->sent_ns >= PROGRESS_EVERY_NS)
                report(s, now, done, total);
}
