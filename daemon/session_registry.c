/* SPDX-License-Identifier: MIT */
#include "session_registry.h"

#include <errno.h>
#include <string.h>

_Static_assert(LUPD_MAX_SESSIONS <= LUP_ARENA_SLOTS, "every session needs its own arena slot");

void lupd_registry_init(struct lupd_registry *reg, int max_sessions)
{
        memset(reg, 0, sizeof(*reg));
        for (unsigned i = 0; i < LUP_ARENA_SLOTS; i++)
                reg->s[i].ctl_fd = -1;
        if (max_sessions < 1)
                max_sessions = 1;
        if (max_sessions > LUPD_MAX_SESSIONS)
                max_sessions = LUPD_MAX_SESSIONS;
        reg->max_sessions = max_sessions;
}

int lupd_registry_claim(struct lupd_registry *reg, const char *name)
{
        int free_slot = -1;
        size_t n = strnlen(name, LUP_MAX_NAME + 1);

        if (n == 0 || n > LUP_MAX_NAME)
                return -EINVAL;
        /* The name check comes first: a client retrying a busy session
         * should hear "busy", not "full", whatever the load. */
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++) {
                const struct lupd_session *se = &reg->s[i];
                if (se->state == LUPD_SESSION_LIVE && strcmp(se->name, name) == 0)
                        return -EBUSY;
                if (se->state == LUPD_SESSION_FREE && free_slot < 0)
                        free_slot = i;
        }
        if (reg->n_used >= reg->max_sessions || free_slot < 0)
                return -ENOSPC;

        struct lupd_session *se = &reg->s[free_slot];
        memset(se, 0, sizeof(*se));
        se->state = LUPD_SESSION_LIVE;
        se->ctl_fd = -1;
        memcpy(se->name, name, n + 1);
        reg->n_used++;
        return free_slot;
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

void lupd_registry_retire(struct lupd_registry *reg, int slot)
{
        if (slot < 0 || slot >= (int)LUP_ARENA_SLOTS || reg->s[slot].state != LUPD_SESSION_LIVE)
                return;
        reg->s[slot].state = LUPD_SESSION_DRAINING;
}

void lupd_registry_release(struct lupd_registry *reg, int slot)
{
        if (slot < 0 || slot >= (int)LUP_ARENA_SLOTS || reg->s[slot].state == LUPD_SESSION_FREE)
                return;
        memset(&reg->s[slot], 0, sizeof(reg->s[slot]));
        reg->s[slot].ctl_fd = -1;
        reg->n_used--;
}

int lupd_registry_live(const struct lupd_registry *reg)
{
        int n = 0;
        for (int i = 0; i < (int)LUP_ARENA_SLOTS; i++)
                n += reg->s[i].state == LUPD_SESSION_LIVE;
        return n;
}
