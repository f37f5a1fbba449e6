/* SPDX-License-Identifier: MIT */
/*
 * Device printf.
 *
 * On a GPU, printf() in a kernel writes into a buffer on the device (one
 * per context, CU_LIMIT_PRINTF_FIFO_SIZE bytes), and the driver copies it
 * to the process's standard output only at certain points: the start of a
 * kernel launch, cuCtxSynchronize, cuStreamSynchronize,
 * cuEventSynchronize, a blocking copy, and context destruction. A program
 * (or lupined's worker, which forwards its stdout to the client) sees no
 * output while a kernel runs, and then all of it, in the order the
 * kernels ran.
 *
 * The sim does the same: a twin appends its formatted lines to the FIFO
 * of the context it runs in, and sim_printf_flush() writes the FIFO to
 * stdout. Lines that do not fit are dropped whole (the device's buffer
 * is circular and keeps the newest records instead; the sim keeps the
 * oldest, a difference no test depends on). The flush points the sim
 * has are the ones above; module load and unload and stream callbacks,
 * which the driver documents too, do not flush here.
 *
 * Locking: the FIFOs are guarded by drv->printf_mu, taken after the
 * registry lock. A flush holds printf_mu while it writes, so that two
 * flushes cannot reorder their output; it does not hold the registry
 * lock then, so a slow reader of stdout stalls printing kernels only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

bool sim_printf_append(struct sim_driver *drv, CUcontext ctx, const char *s, size_t n)
{
        struct sim_ctx *c = sim_ctx_lookup(drv, ctx);
        bool room = false;

        if (!c)
                return false;
        pthread_mutex_lock(&drv->printf_mu);
        size_t cap = sim_ctx_limit(c, CU_LIMIT_PRINTF_FIFO_SIZE);

        if (c->printf_len <= cap && n <= cap - c->printf_len) {
                if (c->printf_len + n > c->printf_cap) {
                        size_t ncap = c->printf_cap ? c->printf_cap : 4096;
                        char *grown;

                        while (ncap < c->printf_len + n)
                                ncap *= 2;
                        ncap = ncap < cap ? ncap : cap;
                        grown = realloc(c->printf_buf, ncap);
                        if (grown) {
                                c->printf_buf = grown;
                                c->printf_cap = ncap;
                        }
                }
                if (c->printf_len + n <= c->printf_cap) {
                        memcpy(c->printf_buf + c->printf_len, s, n);
                        c->printf_len += n;
                        room = true;
                }
        }
        pthread_mutex_unlock(&drv->printf_mu);
        return room;
}

void sim_printf_flush(struct sim_driver *drv, CUcontext ctx)
{
        struct sim_ctx *c;
        char *buf = NULL;
        size_t len = 0;

        sim_rdlock(drv);
        c = sim_ctx_lookup(drv, ctx);
        pthread_mutex_lock(&drv->printf_mu);
        if (c && c->printf_len) {
                buf = c->printf_buf;
                len = c->printf_len;
                c->printf_buf = NULL;
                c->printf_len = c->printf_cap = 0;
        }
        sim_unlock(drv);
        if (len) {
                /* Through stdio, so the program's own buffered output
                 * keeps its place before it. */
                fwrite(buf, 1, len, stdout);
                fflush(stdout);
        }
        pthread_mutex_unlock(&drv->printf_mu);
        free(buf);
}

void sim_printf_release(struct sim_driver *drv, struct sim_ctx *c)
{
        pthread_mutex_lock(&drv->printf_mu);
        free(c->printf_buf);
        c->printf_buf = NULL;
        c->printf_len = c->printf_cap = 0;
        pthread_mutex_unlock(&drv->printf_mu);
}
