/* SPDX-License-Identifier: MIT */
/*
 * The worker's heartbeat to its supervisor (LUPD_CTL_HEARTBEAT, daemon/ctl.h)
 * for the health watch (supervisor/health.c, docs/health.md).
 *
 * A thread of its own sends it, so that a long synchronisation or a
 * checkpoint of many GiB on the main thread is not taken for a hang: what
 * the watch catches is a process that no longer runs at all (stopped,
 * stuck in the kernel, out of memory and thrashing). Each beat says which
 * GPUs the session uses, so that an alarm on one GPU drains the sessions
 * on that GPU only. The main thread keeps that mask up to date before each
 * sleep (lupw_beat_devices); the thread only reads it.
 */
#define LUP_LOG_CAT LUP_LOGC_SESSION
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "buf.h"
#include "ctl.h"
#include "log.h"
#include "worker/session.h"

static struct {
        pthread_t thread;
        bool on;
        int fd;
        unsigned interval_ms;
        atomic_uint devices;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool stop;
} beat = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void beat_send(void)
{
        uint8_t b[LUPD_CTL_HEARTBEAT_LEN];

        lup_put32(b, LUPD_CTL_HEARTBEAT);
        lup_put32(b + 4, atomic_load_explicit(&beat.devices, memory_order_relaxed));
        /* never blocks: a supervisor that does not read is not this thread's problem */
        (void)send(beat.fd, b, sizeof(b), MSG_DONTWAIT | MSG_NOSIGNAL);
}

static void *beat_main(void *arg)
{
        struct timespec ts;

        (void)arg;
        pthread_mutex_lock(&beat.lock);
        while (!beat.stop) {
                beat_send();
                clock_gettime(CLOCK_MONOTONIC, &ts);
                ts.tv_sec += (time_t)(beat.interval_ms / 1000u);
                ts.tv_nsec += (long)(beat.interval_ms % 1000u) * 1000000L;
                if (ts.tv_nsec >= 1000000000L) {
                        ts.tv_sec++;
                        ts.tv_nsec -= 1000000000L;
                }
                while (!beat.stop && pthread_cond_timedwait(&beat.cond, &beat.lock, &ts) != ETIMEDOUT)
                        ;
        }
        pthread_mutex_unlock(&beat.lock);
        return NULL;
}

int lupw_beat_start(int ctl_fd, int interval_ms)
{
        pthread_condattr_t ca;
        sigset_t all, old;
        int rc;

        if (ctl_fd < 0 || interval_ms <= 0 || beat.on)
                return 0;
        beat.fd = ctl_fd;
        beat.interval_ms = (unsigned)interval_ms;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&beat.cond, &ca);
        pthread_condattr_destroy(&ca);
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old); /* signals stay with the main thread */
        rc = pthread_create(&beat.thread, NULL, beat_main, NULL);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (rc != 0) {
                lup_warn("no heartbeat thread for the supervisor (%s): its health watch will take this worker for "
                         "hung",
                         strerror(rc));
                return -rc;
        }
        beat.on = true;
        return 0;
}

void lupw_beat_stop(void)
{
        if (!beat.on)
                return;
        pthread_mutex_lock(&beat.lock);
        beat.stop = true;
        pthread_cond_signal(&beat.cond);
        pthread_mutex_unlock(&beat.lock);
        pthread_join(beat.thread, NULL);
        beat.on = false;
}

void lupw_beat_devices(const struct lupw_session *s)
{
        uint32_t m = 0;

        for (int d = 0; d < (int)LUP_MAX_DEVICES && d < 32; d++)
                if (s->ctx.client_primary[d])
                        m |= 1u << d;
        for (int i = 0; i < s->ctx.n_slots; i++)
                if (s->ctx.slots[i].id && s->ctx.slots[i].device >= 0 && s->ctx.slots[i].device < 32)
                        m |= 1u << s->ctx.slots[i].device;
        atomic_store_explicit(&beat.devices, m, memory_order_relaxed);
}
