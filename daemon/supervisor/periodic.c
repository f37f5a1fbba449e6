/* SPDX-License-Identifier: MIT */
/*
 * --checkpoint-interval (issue 17, docs/fleet.md): a durable checkpoint of
 * each session that ran calls since its last one, every interval, while
 * it goes on. It is the checkpoint `lupinectl sessions checkpoint NAME`
 * takes (LUPD_CTL_CHECKPOINT, worker/ckpt_now.c), asked for by the tick.
 *
 * One session at a time on the host, so that the store and the GPU copy
 * engines serve one checkpoint and the sessions' pauses do not add up; a
 * session that waits its turn is simply a little late. An idle session
 * (no call since its last checkpoint) is not checkpointed again. A failed
 * one is tried again an interval later.
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include <errno.h>
#include <string.h>

#include "ctl.h"
#include "log.h"
#include "supervisor/internal.h"

static bool due(const struct sup *s, const struct lupd_session *se, uint64_t now)
{
        uint64_t every = (uint64_t)s->cfg->fleet.checkpoint_interval_s * 1000u;

        return se->state == LUPD_SESSION_LIVE && se->ready && !se->ckpt_running && !se->drain_sent &&
               !se->shutdown_sent && (se->phase == LUPD_PHASE_SERVING || se->phase == LUPD_PHASE_DETACHED) &&
               se->stats.have && se->stats.calls != se->periodic_calls && now >= se->periodic_last_ms + every;
}

void sup_periodic_tick(struct sup *s, uint64_t now)
{
        int pick = -1;

        if (s->cfg->fleet.checkpoint_interval_s <= 0 || !s->checkpoints || s->stopping)
                return;
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++) {
                const struct lupd_session *se = &s->reg.s[i];
                if (se->state == LUPD_SESSION_LIVE && se->ckpt_running)
                        return; /* one at a time */
                if (se->state == LUPD_SESSION_LIVE && se->periodic_last_ms == 0) {
                        /* first seen: its interval starts now */
                        s->reg.s[i].periodic_last_ms = now;
                        continue;
                }
                if (due(s, se, now) && (pick < 0 || se->periodic_last_ms < s->reg.s[pick].periodic_last_ms))
                        pick = i;
        }
        if (pick < 0)
                return;
        struct lupd_session *se = &s->reg.s[pick];
        int r = sup_worker_send(s, pick, LUPD_CTL_CHECKPOINT);
        if (r < 0) {
                lup_warn("session %s: periodic checkpoint not asked for: %s", se->name, strerror(-r));
                se->periodic_last_ms = now;
                return;
        }
        se->ckpt_running = true;
        se->ckpt_periodic = true;
        se->ckpt_started_ms = now;
        se->periodic_calls = se->stats.calls;
        lup_debug("session %s: periodic checkpoint (last epoch %llu, %llu calls)", se->name,
                  (unsigned long long)se->stats.epoch, (unsigned long long)se->stats.calls);
}

void sup_periodic_done(struct sup *s, int idx, int32_t status)
{
        struct lupd_session *se = &s->reg.s[idx];

        se->periodic_last_ms = sup_now_ms(); /* the next one an interval after this one ended */
        if (!se->ckpt_periodic)
                return;
        se->ckpt_periodic = false;
        if (status == 0)
                s->totals.periodic++;
}
