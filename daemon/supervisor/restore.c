/* SPDX-License-Identifier: MIT */
/*
 * Restore at start: with a checkpoint provider configured, the supervisor
 * lists the committed sessions and starts one `--restore=NAME` worker per
 * session before it accepts anyone.
 *
 * The supervisor opens the provider only for the listing and closes it
 * (and unloads a provider library) right after: the bytes are the
 * workers' business, and third-party code should spend as little time in
 * the supervisor as possible.
 *
 * Accepts stay off until every restore worker has reported READY (or is
 * gone): a restoring session learns its arena slot from its checkpoint,
 * and a new session must not take that slot first. Clients connecting
 * meanwhile wait in the listen backlog. A restore worker that has not
 * reported within --drain-timeout is killed (its checkpoint stays where
 * it is, for the next start). READY=1 goes to systemd only after that.
 *
 * A provider that cannot be loaded, opened or listed stops the daemon
 * (exit 1): serving without the sessions it was configured to keep would
 * silently lose them at the next drain.
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>

#include "frame.h"
#include "log.h"
#include "provider_load.h"
#include "supervisor/sd_fds.h"
#include "supervisor/internal.h"

struct restore_item {
        char name[LUP_MAX_NAME + 1];
        uint64_t epoch;
};

struct restore_list {
        struct restore_item *items;
        size_t n, cap;
        size_t skipped_bad;     /* names that are not session names */
        size_t skipped_over;    /* beyond LUPD_RESTORE_LIST_MAX */
        int err;                /* -ENOMEM */
};

/* The provider's list() callback. Trusts nothing it is given. */
static int collect(const struct lupine_ckpt_info *info, void *userdata)
{
        struct restore_list *l = userdata;
        size_t n = strnlen(info->session, sizeof(info->session));

        if (n >= sizeof(info->session) || !lup_session_name_valid(info->session, n)) {
                l->skipped_bad++;
                return 0;
        }
        if (l->n >= LUPD_RESTORE_LIST_MAX) {
                l->skipped_over++;
                return 0;
        }
        if (l->n == l->cap) {
                size_t cap = l->cap ? l->cap * 2 : 16;
                struct restore_item *p = realloc(l->items, cap * sizeof(*p));
                if (!p) {
                        l->err = -ENOMEM;
                        return -ENOMEM;
                }
                l->items = p;
                l->cap = cap;
        }
        memcpy(l->items[l->n].name, info->session, n);
        l->items[l->n].name[n] = 0;
        l->items[l->n].epoch = info->epoch;
        l->n++;
        return 0;
}

static int item_cmp(const void *a, const void *b)
{
        return strcmp(((const struct restore_item *)a)->name, ((const struct restore_item *)b)->name);
}

/* Loads, opens, lists, closes, unloads. Returns 0 with *l filled, or
 * -errno after logging why. */
static int provider_list(const struct lupd_config *cfg, struct restore_list *l, bool *ret_leases, char *ret_desc,
                         size_t desc_cap)
{
        const struct lupine_checkpoint_provider *p;
        struct lupine_ckpt_instance *inst = NULL;
        const char *path = cfg->checkpoint_provider[0] ? cfg->checkpoint_provider : NULL;
        const char *config = cfg->checkpoint_dir[0]      ? cfg->checkpoint_dir
                             : cfg->checkpoint_config[0] ? cfg->checkpoint_config
                                                         : NULL;
        void *dl = NULL;
        char err[512];
        int r;

        r = lupine_provider_load(path, &p, &dl, err, sizeof(err));
        if (r < 0) {
                lup_err("cannot load the checkpoint provider: %s", err[0] ? err : sup_errno_text(r));
                return r;
        }
        snprintf(ret_desc, desc_cap, "%s (%s)", p->name, config ? config : "its default configuration");
        /* leases, hence arena slots agreed in the store (worker/slot_lease.c) */
        *ret_leases = lupine_provider_has_leases(p);
        r = p->open(config, &inst);
        if (r < 0 || !inst) {
                lup_err("cannot open the checkpoint provider %s: %s", ret_desc, sup_errno_text(r < 0 ? r : -EIO));
                goto out_unload;
        }
        r = p->list(inst, collect, l);
        if (r < 0 || l->err < 0) {
                const char *why = p->last_error(inst);
                lup_err("cannot list the checkpoints in %s: %s", ret_desc,
                        why && why[0] ? why : sup_errno_text(l->err < 0 ? l->err : r));
                r = r < 0 ? r : l->err;
        } else {
                r = 0;
        }
        p->close(inst);
out_unload:
        lupine_provider_unload(dl);
        return r;
}

int sup_restore_start(struct sup *s)
{
        struct restore_list l = { 0 };
        char desc[sizeof(s->cfg->checkpoint_dir) + 64];
        int r;

        sup_raise_nofile(); /* hot restores pass an fd per memory chunk */
        bool leases = false;
        r = provider_list(s->cfg, &l, &leases, desc, sizeof(desc));
        if (r < 0)
                goto out_free;
        s->reg.fleet_slots = leases;
        if (leases)
                lup_info("arena slots: agreed with the other hosts of %s (its leases)", desc);
        if (l.skipped_bad)
                lup_warn("%s listed %zu checkpoint(s) whose session name is not valid; ignoring them", desc,
                         l.skipped_bad);
        if (l.skipped_over)
                lup_warn("%s holds more than %d sessions; %zu are not considered", desc, LUPD_RESTORE_LIST_MAX,
                         l.skipped_over);
        /* Sorted, so that duplicates are neighbours and the restore order
         * (hence who gets in under --max-sessions) does not depend on the
         * provider's listing order. */
        if (l.n > 1)
                qsort(l.items, l.n, sizeof(l.items[0]), item_cmp);
        lup_info("checkpoints in %s: %zu session(s) to restore", desc, l.n);

        for (size_t i = 0; i < l.n; i++) {
                const struct restore_item *it = &l.items[i];
                int idx;

                if (i > 0 && strcmp(it->name, l.items[i - 1].name) == 0)
                        continue;
                s->n_restore_listed++;
                idx = lupd_registry_claim_restore(&s->reg, it->name);
                if (idx == -ENOSPC) {
                        lup_warn("session %s not restored: --max-sessions %d reached (its checkpoint is kept)",
                                 it->name, s->reg.max_sessions);
                        continue;
                }
                if (idx < 0) {
                        lup_warn("session %s not restored: %s", it->name, sup_errno_text(idx));
                        continue;
                }
                s->reg.s[idx].restore_epoch = it->epoch;
                r = sup_session_restore(s, idx);
                if (r < 0) {
                        lup_err("session %s could not be restored: cannot start a worker: %s", it->name,
                                sup_errno_text(r));
                        continue;
                }
                s->n_restore_started++;
                lup_info("session %s: restoring checkpoint epoch %llu in worker %d", it->name,
                         (unsigned long long)it->epoch, (int)s->reg.s[idx].pid);
        }
        r = 0;
        if (s->n_restore_started > 0) {
                uint64_t now = sup_now_ms();
                s->restoring = true;
                s->restore_deadline = now + (uint64_t)s->cfg->drain_timeout_s * 1000u;
                s->next_extend = 0;
                sup_notify_extend(s, now);
                sup_status_update(s);
        }
out_free:
        free(l.items);
        return r;
}

void sup_restore_on_ready(struct sup *s, int idx, int32_t status, uint32_t slot)
{
        struct lupd_session *se = &s->reg.s[idx];
        int holder = -1, r;
        char why[200];

        if (status < 0) {
                /* The worker logged the details and exits by itself. */
                se->phase = LUPD_PHASE_FAILED;
                if (status == -EADDRINUSE) /* worker/slot_lease.c */
                        snprintf(why, sizeof(why),
                                 "its device addresses (its arena slot) are held by another session of the fleet; "
                                 "this host's log says which");
                else
                        snprintf(why, sizeof(why), "%s", sup_errno_text(status));
                if (status == -EBUSY)
                        lup_info("session %s not restored: another host sharing the store holds its lease", se->name);
                else if (!se->adopt || status != -ENOENT)
                        lup_warn("session %s could not be restored: %s", se->name, why);
                goto out;
        }
        r = lupd_registry_set_slot(&s->reg, idx, slot < LUP_ARENA_SLOTS ? (int)slot : -1, &holder);
        if (r == -EADDRINUSE) {
                lup_err("session %s could not be restored: its arena slot %u is taken by session %s; killing "
                        "worker %d (the checkpoint is kept)",
                        se->name, (unsigned)slot, s->reg.s[holder].name, (int)se->pid);
        } else if (r < 0) {
                lup_err("session %s could not be restored: worker %d reported arena slot %u, which does not "
                        "exist; killing it (the checkpoint is kept)",
                        se->name, (int)se->pid, (unsigned)slot);
        }
        if (r < 0) {
                se->phase = LUPD_PHASE_FAILED;
                se->ctl_eof = true;
                sup_worker_kill(s, idx);
                status = -EADDRINUSE;
                if (holder >= 0)
                        snprintf(why, sizeof(why),
                                 "its arena slot %u is taken by another session here (issue 17: "
                                 "arenas across hosts)",
                                 (unsigned)slot);
                else
                        snprintf(why, sizeof(why), "its checkpoint names arena slot %u, which does not exist",
                                 (unsigned)slot);
                goto out;
        }
        if (se->phase == LUPD_PHASE_RESTORING)
                se->phase = se->hot_conn ? LUPD_PHASE_SERVING : LUPD_PHASE_WAITING;
        s->n_restored++;
        sup_count_work(s, se, true);
        lup_info("session %s restored into arena slot %d by worker %d; %s", se->name, se->slot, (int)se->pid,
                 se->hot_conn ? "serving its client's connection again" : "waiting for its client");
        why[0] = 0;
out:
        sup_adopt_done(s, idx, status, why);
        sup_conn_rejudge(s); /* a client waiting for this adoption attaches now */
        sup_restore_progress(s);
}

void sup_restore_on_gone(struct sup *s, int idx, const char *why)
{
        struct lupd_session *se = &s->reg.s[idx];

        lup_warn("session %s could not be restored: its worker %d %s before reporting (the checkpoint is kept)",
                 se->name, (int)se->pid, why);
        char text[200];
        snprintf(text, sizeof(text), "its restore worker %s before reporting", why);
        sup_adopt_done(s, idx, -ECHILD, text);
}

static int restores_left(const struct sup *s)
{
        int n = 0;

        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++) {
                const struct lupd_session *se = &s->reg.s[i];
                n += se->state != LUPD_SESSION_FREE && se->restore && !se->ready;
        }
        return n;
}

void sup_restore_progress(struct sup *s)
{
        if (!s->restoring)
                return;
        if (restores_left(s) > 0) {
                sup_status_update(s);
                return;
        }
        s->restoring = false;
        lup_info("restore finished: %d of %d session(s) restored", s->n_restored, s->n_restore_listed);
        lupd_sd_fds_release_unclaimed();
        sup_serving_begin(s);
        sup_conn_unpark(s); /* HELLOs that came during the restore */
}

void sup_restore_tick(struct sup *s, uint64_t now)
{
        if (!s->restoring || s->stopping)
                return;
        sup_notify_extend(s, now);
        if (now < s->restore_deadline)
                return;
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++) {
                struct lupd_session *se = &s->reg.s[i];

                if (se->state != LUPD_SESSION_LIVE || !se->restore || se->ready)
                        continue;
                lup_err("session %s could not be restored: worker %d did not report within %d s "
                        "(--drain-timeout); killing it (the checkpoint is kept)",
                        se->name, (int)se->pid, s->cfg->drain_timeout_s);
                /* Given up on: it no longer holds up accepting. */
                se->ready = true;
                se->phase = LUPD_PHASE_FAILED;
                se->ctl_eof = true;
                sup_worker_kill(s, i);
        }
        sup_restore_progress(s);
}
