/* SPDX-License-Identifier: MIT */
/* Kinds and owning contexts of the handles this process minted. */
#include <pthread.h>

#include "client.h"
#include "u64map.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct lup_u64map handles = { .limit = LUP_MAX_HANDLES };

void lupc_note_handle(uint64_t id, int kind)
{
        uint64_t ctx = lupc_ctx_current();
        pthread_mutex_lock(&lock);
        /* a full table only loses cuStreamGetCtx answers; the call succeeded */
        (void)lup_u64map_put(&handles, id, (ctx << 8) | (uint64_t)kind);
        pthread_mutex_unlock(&lock);
}

void lupc_forget_handle(uint64_t id)
{
        pthread_mutex_lock(&lock);
        lup_u64map_del(&handles, id, NULL);
        pthread_mutex_unlock(&lock);
}

int lupc_handle_kind(uint64_t id, uint64_t *ret_ctx)
{
        uint64_t v = 0;
        pthread_mutex_lock(&lock);
        bool found = lup_u64map_get(&handles, id, &v);
        pthread_mutex_unlock(&lock);
        if (!found)
                return 0;
        if (ret_ctx)
                *ret_ctx = v >> 8;
        return (int)(v & 0xff);
}
