/* SPDX-License-Identifier: MIT */
/*
 * A small pool of threads that seal and open TLS records side by side
 * (common/tls_par.h). One AES-GCM stream runs at about the speed of one
 * loopback TCP copy, so a single thread that copies and decrypts halves
 * the throughput of a bulk copy; records are independent once each has its
 * sequence number, so a batch of them is split over a few lanes.
 *
 * The pool is per process and made on first use. Helpers spin for a short
 * while after a batch (bulk copies send batch after batch), then sleep. A
 * batch that finds the pool busy (another connection of the process) runs
 * on the caller alone. After fork() the child has no helpers: it starts
 * afresh.
 */
#define LUP_LOG_CAT LUP_LOGC_TLS
#include "tls_par.h"

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define SPIN_NS 200000 /* how long a helper looks for the next batch before it sleeps */

static struct {
        pthread_mutex_t busy; /* held by the caller of a batch */
        pthread_mutex_t lock; /* for the condition variable */
        pthread_cond_t wake;
        /* Odd while the caller sets a batch up, even (and new) once it is
         * ready. A helper works only on the batch whose even value it saw,
         * and counts itself in active meanwhile; the caller sets the next
         * batch up only once active is 0, so no helper ever sees half of
         * one. */
        atomic_uint_fast64_t gen;
        atomic_int active;
        /* the batch */
        void (*fn)(void *, int, int);
        void *arg;
        int n;
        atomic_int next, left;
        int lanes; /* 1 + helpers */
        bool started;
} pool = { .busy = PTHREAD_MUTEX_INITIALIZER, .lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER };

static uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void work(int slot)
{
        int i;
        while ((i = atomic_fetch_add(&pool.next, 1)) < pool.n) {
                pool.fn(pool.arg, i, slot);
                atomic_fetch_sub(&pool.left, 1);
        }
}

static void *helper(void *arg)
{
        int slot = (int)(intptr_t)arg;
        uint64_t seen = atomic_load(&pool.gen);

        for (;;) {
                uint64_t until = now_ns() + SPIN_NS, g;
                while (((g = atomic_load(&pool.gen)) == seen || (g & 1)) && now_ns() < until)
                        sched_yield();
                if (g == seen || (g & 1)) {
                        pthread_mutex_lock(&pool.lock);
                        while ((g = atomic_load(&pool.gen)) == seen || (g & 1))
                                pthread_cond_wait(&pool.wake, &pool.lock);
                        pthread_mutex_unlock(&pool.lock);
                }
                seen = g;
                atomic_fetch_add(&pool.active, 1);
                if (atomic_load(&pool.gen) == g) /* else the next batch is being set up: not this one */
                        work(slot);
                atomic_fetch_sub(&pool.active, 1);
        }
        return NULL;
}

static int default_lanes(void)
{
        const char *e = getenv("LUPINE_TLS_THREADS");
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        long n = e && *e ? strtol(e, NULL, 10) : cpus / 4;

        if (n < 1)
                n = 1;
        return n > LUP_PAR_MAX_LANES ? LUP_PAR_MAX_LANES : (int)n;
}

static void after_fork_child(void)
{
        pthread_mutex_init(&pool.busy, NULL);
        pthread_mutex_init(&pool.lock, NULL);
        pthread_cond_init(&pool.wake, NULL);
        pool.started = false; /* the helpers stayed in the parent */
        pool.lanes = 0;
}

static void start(void)
{
        static bool atfork;
        pthread_attr_t a;
        int want = default_lanes();

        if (!atfork) {
                atfork = pthread_atfork(NULL, NULL, after_fork_child) == 0;
        }
        pool.lanes = 1;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        for (int s = 1; s < want; s++) {
                pthread_t t;
                if (pthread_create(&t, &a, helper, (void *)(intptr_t)s) != 0)
                        break;
                pool.lanes++;
        }
        pthread_attr_destroy(&a);
        pool.started = true;
}

int lup_par_lanes(void)
{
        return pool.started ? pool.lanes : default_lanes(); /* before the pool exists: what it will have */
}

void lup_par_run(int n, void (*fn)(void *arg, int i, int slot), void *arg)
{
        bool shared = n > 1 && pthread_mutex_trylock(&pool.busy) == 0;

        if (shared && !pool.started)
                start();
        if (shared && pool.lanes == 1) {
                pthread_mutex_unlock(&pool.busy);
                shared = false;
        }
        if (!shared) { /* on the caller alone */
                for (int i = 0; i < n; i++)
                        fn(arg, i, 0);
                return;
        }
        atomic_fetch_add(&pool.gen, 1); /* odd: setting up */
        while (atomic_load(&pool.active) > 0)
                ; /* a helper leaving the last batch */
        pool.fn = fn;
        pool.arg = arg;
        pool.n = n;
        atomic_store(&pool.left, n);
        atomic_store(&pool.next, 0);
        pthread_mutex_lock(&pool.lock);
        atomic_fetch_add(&pool.gen, 1); /* even: go */
        pthread_cond_broadcast(&pool.wake);
        pthread_mutex_unlock(&pool.lock);
        work(0);
        while (atomic_load(&pool.left) > 0)
                ; /* the last records are being sealed or opened: microseconds */
        pthread_mutex_unlock(&pool.busy);
}
