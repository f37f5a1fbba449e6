/* SPDX-License-Identifier: MIT */
/* The handle ids this process mints, and their kinds and owning contexts. */
#include <pthread.h>
#include <stdatomic.h>

#include "client.h"
#include "u64map.h"

static atomic_uint_fast64_t next_handle = LUP_FIRST_HANDLE_ID;

/* lupc_each_server (route.c): the first server's call records the ids it
 * mints, each other server's call is given the same ones in the same
 * order, so that one handle names one object on every server. */
static __thread struct {
        int mode; /* 0 off, 1 record, 2 replay */
        unsigned n, at;
        uint64_t ids[8];
} mint;

uint64_t lupc_mint_handle(void)
{
        if (mint.mode == 2 && mint.at < mint.n)
                return mint.ids[mint.at++];
        uint64_t id = atomic_fetch_add(&next_handle, 16);
        if (mint.mode == 1 && mint.n < sizeof(mint.ids) / sizeof(mint.ids[0]))
                mint.ids[mint.n++] = id;
        return id;
}

void lupc_mint_mode(int mode)
{
        mint.mode = mode;
        mint.at = 0;
        if (mode == 1)
                mint.n = 0;
}

bool lupc_handle_was_minted(uint64_t id)
{
        return id >= LUP_FIRST_HANDLE_ID && id < atomic_load(&next_handle) && (id - LUP_FIRST_HANDLE_ID) % 16 == 0;
}

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
