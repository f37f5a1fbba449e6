/* SPDX-License-Identifier: MIT */
/*
 * Driver state, cuInit and the environment that shapes the simulated
 * machine:
 *   LUPINE_SIM_DEVICES  number of devices, 1..16 (default 1)
 *   LUPINE_SIM_MEM_MB   memory per device in MiB (default 16384)
 * Both are read once, by the first cuInit. A bad value falls back to the
 * default with one line on stderr: the only output this library makes.
 *
 * The state is a single instance because the driver API has no handle to
 * hang it on; it is reached only through sim_driver_get() at the exported
 * entry points, which pass it down explicitly.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <cudaProfiler.h>

#include "sim_internal.h"

static struct sim_driver the_driver;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static atomic_bool initialized;
static CUresult init_result = CUDA_ERROR_NOT_INITIALIZED;

/* Parses a whole decimal string into [min, max]; -EINVAL otherwise. */
static int parse_ull(const char *s, unsigned long long min, unsigned long long max,
                     unsigned long long *ret)
{
        unsigned long long v;
        char *end;

        if (!s || *s < '0' || *s > '9')
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0 || *end != '\0' || v < min || v > max)
                return -EINVAL;
        *ret = v;
        return 0;
}

static unsigned long long env_or_default(const char *name, unsigned long long min,
                                         unsigned long long max, unsigned long long def)
{
        const char *s = getenv(name);
        unsigned long long v;

        if (!s)
                return def;
        if (parse_ull(s, min, max, &v) < 0) {
                fprintf(stderr, "lupine-sim: ignoring %s='%.32s' (want %llu..%llu), using %llu\n",
                        name, s, min, max, def);
                return def;
        }
        return v;
}

/* Writers first: a stream of copies must not starve a free. */
static int lock_init(struct sim_driver *drv)
{
        pthread_rwlockattr_t attr;
        int e;

        if (pthread_rwlockattr_init(&attr) != 0)
                return -ENOMEM;
        pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
        e = pthread_rwlock_init(&drv->lock, &attr);
        pthread_rwlockattr_destroy(&attr);
        return -e;
}

/* In a child of fork(), whose copy of the lock was taken by the parent's
 * thread in the fork handler: glibc cannot unlock a writer's lock from
 * another thread id, so it is made anew. */
void sim_lock_reinit_after_fork(struct sim_driver *drv)
{
        (void)lock_init(drv);
}

static void driver_init(void)
{
        struct sim_driver *drv = &the_driver;
        unsigned long long ndev, mem_mb;

        ndev = env_or_default("LUPINE_SIM_DEVICES", 1, SIM_MAX_DEVICES, SIM_DEFAULT_DEVICES);
        mem_mb = env_or_default("LUPINE_SIM_MEM_MB", 1, SIM_MAX_MEM_MB, SIM_DEFAULT_MEM_MB);

        if (lock_init(drv) != 0)
                return;

        drv->next_id = 1;
        drv->next_buffer_id = 1;
        drv->contexts.max = SIM_MAX_CONTEXTS;
        drv->streams.max = SIM_MAX_STREAMS;
        drv->vmm_allocs.max = SIM_MAX_VMM_ALLOCS;
        drv->ranges.max = SIM_MAX_RANGES;
        drv->reservations.max = SIM_MAX_RESERVATIONS;
        drv->events.max = SIM_MAX_EVENTS;
        drv->modules.max = SIM_MAX_MODULES;
        drv->libraries.max = SIM_MAX_MODULES;
        drv->functions.max = SIM_MAX_FUNCTIONS;
        if (pthread_mutex_init(&drv->q_mu, NULL) != 0 ||
            pthread_cond_init(&drv->q_progress, NULL) != 0 ||
            pthread_mutex_init(&drv->printf_mu, NULL) != 0)
                return;
        sim_queue_atfork(drv);

        drv->device_count = (int)ndev;
        for (int i = 0; i < drv->device_count; i++) {
                struct sim_device *d = &drv->devices[i];

                d->ordinal = i;
                d->mem_total = (size_t)(mem_mb << 20);
                d->primary = (struct sim_ctx){
                        .id = sim_next_id(drv),
                        .dev = i,
                        .primary = true,
                };
        }
        init_result = CUDA_SUCCESS;
        atomic_store_explicit(&initialized, true, memory_order_release);
}

struct sim_driver *sim_driver_get(void)
{
        return atomic_load_explicit(&initialized, memory_order_acquire) ? &the_driver : NULL;
}

void sim_rdlock(struct sim_driver *drv)
{
        pthread_rwlock_rdlock(&drv->lock);
}

void sim_wrlock(struct sim_driver *drv)
{
        pthread_rwlock_wrlock(&drv->lock);
}

void sim_unlock(struct sim_driver *drv)
{
        pthread_rwlock_unlock(&drv->lock);
}

/* Callers hold the lock exclusive, except driver_init which runs once. */
uint64_t sim_next_id(struct sim_driver *drv)
{
        uint64_t id = drv->next_id++;

        /* 2^44 handles in one process is not a case worth a branch in every
         * caller; wrapping keeps ids nonzero. */
        if (drv->next_id > SIM_ID_MASK)
                drv->next_id = 1;
        return id;
}

int sim_handle_register(struct sim_driver *drv, struct sim_svec *table, void *obj, uint64_t *ret_id)
{
        uint64_t id = sim_next_id(drv);
        int r = sim_svec_insert(table, id, obj);

        if (r < 0)
                return r;
        *ret_id = id;
        return 0;
}

void *sim_handle_get(const struct sim_svec *table, uint64_t handle, uint64_t tag)
{
        uint64_t id = sim_handle_id(handle, tag);

        return id ? sim_svec_get(table, id) : NULL;
}

void *sim_handle_take(struct sim_svec *table, uint64_t handle, uint64_t tag)
{
        void *obj = sim_handle_get(table, handle, tag);

        if (obj)
                (void)sim_svec_remove(table, sim_handle_id(handle, tag));
        return obj;
}

struct sim_device *sim_device_at(struct sim_driver *drv, CUdevice dev)
{
        if (dev < 0 || dev >= drv->device_count)
                return NULL;
        return &drv->devices[dev];
}

CUresult sim_mem_charge(struct sim_device *d, size_t size)
{
        if (size > d->mem_total - d->mem_used)
                return CUDA_ERROR_OUT_OF_MEMORY;
        d->mem_used += size;
        return CUDA_SUCCESS;
}

void sim_mem_refund(struct sim_device *d, size_t size)
{
        d->mem_used = size > d->mem_used ? 0 : d->mem_used - size;
}

SIM_API CUresult cuInit(unsigned int Flags)
{
        if (Flags != 0)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_once(&init_once, driver_init);
        return init_result;
}

/* Like the real driver, this one answers before cuInit. */
SIM_API CUresult cuDriverGetVersion(int *driverVersion)
{
        if (!driverVersion)
                return CUDA_ERROR_INVALID_VALUE;
        *driverVersion = CUDA_VERSION;
        return CUDA_SUCCESS;
}

/* Profiler control: there is no profiler to start, and none to report
 * that, so start and stop succeed once the driver is up (the real
 * driver's answer without a profiler attached). cuProfilerInitialize is
 * CUDA_ERROR_NOT_SUPPORTED on every driver since 12.0. */
SIM_API CUresult cuProfilerStart(void)
{
        return sim_driver_get() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

SIM_API CUresult cuProfilerStop(void)
{
        return sim_driver_get() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

SIM_API CUresult cuProfilerInitialize(const char *configFile, const char *outputFile, CUoutput_mode outputMode)
{
        (void)configFile, (void)outputFile, (void)outputMode;
        return CUDA_ERROR_NOT_SUPPORTED;
}
