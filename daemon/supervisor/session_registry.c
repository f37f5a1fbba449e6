/* SPDX-License-Identifier: MIT */
#define LUP_LOG_CAT LUP_LOGC_SESSION
#include "supervisor/session_registry.h"

#include <errno.h>
#include <string.h>

_Static_assert(LUPD_MAX_SESSIONS <= LUP_ARENA_SLOTS, "every session needs its own arena slot");

void lupd_registry_init(struct lupd_registry *reg, int max_sessions)
{
        memset(reg, 0, sizeof(*reg));
        for (unsigned i = 0; i < LUP_ARENA_SLOTS; i++) {
                reg->s[i].ctl_fd = -1;
                reg->s[i].slot = -1;
        }
        if (max_sessions < 1)
                max_sessions = 1;
        if (max_sessions > LUPD_MAX_SESSIONS)
                max_sessions = LUPD_MAX_SESSIONS;
        reg->max_sessions = max_sessions;
}

/* Registered: owns its name and its arena slot. */
static bool registered(const struct lupd_session *se)
{
        return se->state == LUPD_SESSION_LIVE && se->phase != LUPD_PHASE_FAILED;
}

static int slot_holder(const struct lupd_registry *reg, int slot)
{
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++)
                if (registered(&reg->s[i]) && reg->s[i].slot == slot)
                        return i;
        return -1;
}

static int claim(struct lupd_registry *reg, const char *name, bool want_slot, uint64_t avoid)
{
        int free_idx = -1, slot = -1;
        size_t n = strnlen(name, LUP_MAX_NAME + 1);

        if (n == 0 || n > LUP_MAX_NAME)
                return -EINVAL;
        /* The name check comes first: a client retrying a busy session
         * should hear "busy", not "full", whatever the load. */
        if (lupd_registry_find_name(reg, name) >= 0)
                return -EBUSY;
        for (int i = 0; i < (int)LUP_ARENA_SLOTS && free_idx < 0; i++)
                if (reg->s[i].state == LUPD_SESSION_FREE)
                        free_idx = i;
        if (reg->n_used >= reg->max_sessions || free_idx < 0)
                return -ENOSPC;
        if (want_slot) {
                for (int i = 0; i < (int)LUP_ARENA_SLOTS && slot < 0; i++)
                        if (!((reg->unusable | avoid) >> i & 1) && slot_holder(reg, i) < 0)
                                slot = i;
                if (slot < 0)
                        return -ENOSPC; /* every usable slot is held */
        }

        struct lupd_session *se = &reg->s[free_idx];
        memset(se, 0, sizeof(*se));
        se->state = LUPD_SESSION_LIVE;
        se->phase = want_slot ? LUPD_PHASE_STARTING : LUPD_PHASE_RESTORING;
        se->restore = !want_slot;
        se->slot = want_slot && !reg->fleet_slots ? slot : -1;
        se->slot_hint = slot;
        se->ctl_fd = -1;
        memcpy(se->name, name, n + 1);
        reg->n_used++;
        return free_idx;
}

int lupd_registry_claim(struct lupd_registry *reg, const char *name, uint64_t avoid)
{
        return claim(reg, name, true, avoid);
}

int lupd_registry_claim_restore(struct lupd_registry *reg, const char *name)
{
        return claim(reg, name, false, 0);
}

int lupd_registry_set_slot(struct lupd_registry *reg, int idx, int slot, int *ret_holder)
{
        int holder;

        if (idx < 0 || idx >= (int)LUP_ARENA_SLOTS || slot < 0 || slot >= (int)LUP_ARENA_SLOTS)
                return -ERANGE;
        holder = slot_holder(reg, slot);
        if (holder >= 0 && holder != idx) {
                if (ret_holder)
                        *ret_holder = holder;
                return -EADDRINUSE;
        }
        reg->s[idx].slot = slot;
        return 0;
}

int lupd_registry_find_name(const struct lupd_registry *reg, const char *name)
{
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++)
                if (registered(&reg->s[i]) && strcmp(reg->s[i].name, name) == 0)
                        return i;
        return -ENOENT;
}

int lupd_registry_find_pid(const struct lupd_registry *reg, pid_t pid)
{
        if (pid <= 0)
                return -ESRCH;
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++)
                if (reg->s[i].state == LUPD_SESSION_LIVE && reg->s[i].pid == pid)
                        return i;
        return -ESRCH;
}

void lupd_registry_retire(struct lupd_registry *reg, int idx)
{
        if (idx < 0 || idx >= (int)LUP_ARENA_SLOTS || reg->s[idx].state != LUPD_SESSION_LIVE)
                return;
        reg->s[idx].state = LUPD_SESSION_RETIRED;
}

void lupd_registry_release(struct lupd_registry *reg, int idx)
{
        if (idx < 0 || idx >= (int)LUP_ARENA_SLOTS || reg->s[idx].state == LUPD_SESSION_FREE)
                return;
        memset(&reg->s[idx], 0, sizeof(reg->s[idx]));
        reg->s[idx].ctl_fd = -1;
        reg->s[idx].slot = -1;
        reg->n_used--;
}

int lupd_registry_live(const struct lupd_registry *reg)
{
        int n = 0;
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++)
                n += reg->s[i].state == LUPD_SESSION_LIVE;
        return n;
}

int lupd_registry_retired(const struct lupd_registry *reg)
{
        int n = 0;
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++)
                n += reg->s[i].state == LUPD_SESSION_RETIRED;
        return n;
}

int lupd_registry_count_phase(const struct lupd_registry *reg, enum lupd_session_phase phase)
{
        int n = 0;
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++)
                n += reg->s[i].state == LUPD_SESSION_LIVE && reg->s[i].phase == phase;
        return n;
}

const char *lupd_phase_name(enum lupd_session_phase phase)
{
        switch (phase) {
        case LUPD_PHASE_STARTING: return "starting";
        case LUPD_PHASE_RESTORING: return "restoring";
        case LUPD_PHASE_SERVING: return "serving";
        case LUPD_PHASE_DETACHED: return "detached";
        case LUPD_PHASE_WAITING: return "restored, waiting for its client";
        case LUPD_PHASE_FAILED: return "failed";
        }
        return "unknown";
}
