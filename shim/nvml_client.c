/* SPDX-License-Identifier: MIT */
/*
 * libnvidia-ml.so.1's link to lupined: nvmlInit and nvmlShutdown, the
 * snapshot of the server's GPUs and how fresh it is kept.
 *
 * Each snapshot is one light connection (abi/lupine/nvml_wire.h): connect
 * to the first endpoint of LUPINE_SERVER that answers, send one NVML
 * request, read one reply, close. No session, no worker, no slot. A
 * snapshot serves every call for LUPINE_NVML_CACHE_MS (default and at most
 * 1000 ms: a watch loop sees values at most a second old), then the next
 * call fetches a new one. When lupined cannot be reached (a restart), the
 * fetch is retried for LUPINE_NVML_WAIT_MS (default 10000); after that the
 * call fails with NVML_ERROR_GPU_IS_LOST (NVML_ERROR_DRIVER_NOT_LOADED in
 * nvmlInit) and the next call tries again.
 *
 * A tls:// endpoint is one TLS session (the supervisor answers NVML itself:
 * no hand-off), set up by LUPINE_TLS_CA / _CERT / _KEY as libcuda's, and
 * the request carries LUPINE_TOKEN. The exchange itself is
 * common/nvml_fetch.c, which lupinectl --server uses too.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "env.h"
#include "frame.h"
#include "log.h"
#include "net.h"
#include "nvml_shim.h"
#include "nvml_fetch.h"
#include "transport.h"

#define LUPN_DEFAULT_SERVER  "127.0.0.1:14833" /* as libcuda.so.1's */
#define LUPN_IO_TIMEOUT_MS   5000
#define LUPN_DEFAULT_WAIT_MS 10000u
#define LUPN_MAX_CACHE_MS    1000u

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned init_count;            /* nvmlInit calls not yet shut down */
static struct lup_nvml_snapshot *snap; /* the newest good snapshot, or NULL */
static uint64_t snap_at_ms;            /* CLOCK_MONOTONIC ms it was fetched */
static unsigned cache_ms = LUPN_MAX_CACHE_MS, wait_ms = LUPN_DEFAULT_WAIT_MS;
static struct lupn_device handles[LUP_MAX_DEVICES];
static struct lupt_config tcfg; /* read at the first nvmlInit */
static int tcfg_rc = 1;         /* 1: not read yet; else lupt_config_load's result */
static char last_err[400];      /* why the last fetch failed, for the one warning */

/* Marks the library as lupine's (lupined refuses to load it as the host's
 * NVML: it would ask itself). */
LUPN_API const char lupine_nvml_shim_version[] = "lupine 0.1";

static uint64_t now_ms(void)
{
        return lup_now_ns() / 1000000u;
}

int lupn_unsupported(const char *name, atomic_bool *logged)
{
        if (!atomic_exchange(logged, true))
                lup_warn("%s is not supported by lupine's NVML: returning NVML_ERROR_NOT_SUPPORTED", name);
        return NVML_ERROR_NOT_SUPPORTED;
}

/* Makes snap fresh; called with lock held. 0, or -errno when lupined
 * could not be reached within wait_ms (snap is then left as it was). */
static unsigned long long (*context_generation)(void); /* lupine's libcuda.so.1's, if loaded */
static unsigned long long snap_generation;

static int refresh_locked(bool procs)
{
        uint64_t start = now_ms();

        if (!context_generation) {
                /* libcudart and PyTorch load libcuda.so.1 RTLD_LOCAL: ask for it by name */
                void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
                *(void **)&context_generation = dlsym(h ? h : RTLD_DEFAULT, "lupine_context_generation");
                if (h)
                        dlclose(h); /* NOLOAD took a reference; the library stays */
        }
        unsigned long long gen = context_generation ? context_generation() : 0;
        if (snap && start - snap_at_ms < cache_ms && (!procs || gen == snap_generation))
                return 0;
        struct lup_nvml_snapshot *fresh = malloc(sizeof(*fresh));
        if (!fresh)
                return -ENOMEM;
        for (;;) {
                const char *env = getenv("LUPINE_SERVER");
                int rc = lup_nvml_fetch(&tcfg, env && *env ? env : LUPN_DEFAULT_SERVER, LUPN_IO_TIMEOUT_MS, fresh,
                                        last_err, sizeof(last_err));
                if (rc == 0)
                        break;
                if (now_ms() - start >= wait_ms) {
                        lup_warn("cannot reach lupined for NVML: %s", last_err[0] ? last_err : strerror(-rc));
                        free(fresh);
                        return rc;
                }
                struct timespec ts = { .tv_nsec = 100 * 1000 * 1000 };
                nanosleep(&ts, NULL);
        }
        free(snap);
        snap = fresh;
        snap_at_ms = now_ms();
        snap_generation = gen;
        return 0;
}

static nvmlReturn_t nvml_init(void)
{
        nvmlReturn_t ret = NVML_SUCCESS;

        pthread_mutex_lock(&lock);
        if (init_count == 0) {
                lup_log_setup("lupine-nvml", LUP_LOG_WARNING);
                cache_ms = lup_env_uint("LUPINE_NVML_CACHE_MS", LUPN_MAX_CACHE_MS, LUPN_MAX_CACHE_MS);
                wait_ms = lup_env_uint("LUPINE_NVML_WAIT_MS", LUPN_DEFAULT_WAIT_MS, 3600u * 1000u);
                for (unsigned i = 0; i < LUP_MAX_DEVICES; i++)
                        handles[i].index = i;
                if (tcfg_rc == 1) {
                        const char *servers = getenv("LUPINE_SERVER");
                        char err[600];
                        tcfg_rc = lupt_config_load(&tcfg, servers && *servers ? servers : LUPN_DEFAULT_SERVER,
                                                   LUPT_CFG_TOKEN, err, sizeof(err));
                        if (tcfg_rc < 0)
                                lup_err("cannot connect to lupined for NVML: %s", err);
                }
                if (tcfg_rc < 0 || refresh_locked(false) < 0)
                        ret = NVML_ERROR_DRIVER_NOT_LOADED;
        }
        if (ret == NVML_SUCCESS)
                init_count++;
        pthread_mutex_unlock(&lock);
        return ret;
}

LUPN_API nvmlReturn_t nvmlInit_v2(void);
LUPN_API nvmlReturn_t nvmlInit_v2(void)
{
        return nvml_init();
}

LUPN_API nvmlReturn_t nvmlInit(void);
LUPN_API nvmlReturn_t nvmlInit(void)
{
        return nvml_init();
}

/* flags (NVML_INIT_FLAG_NO_GPUS, NVML_INIT_FLAG_NO_ATTACH) change nothing here */
LUPN_API nvmlReturn_t nvmlInitWithFlags(unsigned int flags);
LUPN_API nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
        return nvml_init();
}

LUPN_API nvmlReturn_t nvmlShutdown(void);
LUPN_API nvmlReturn_t nvmlShutdown(void)
{
        nvmlReturn_t ret = NVML_SUCCESS;

        pthread_mutex_lock(&lock);
        if (init_count == 0)
                ret = NVML_ERROR_UNINITIALIZED;
        else if (--init_count == 0) {
                free(snap);
                snap = NULL;
        }
        pthread_mutex_unlock(&lock);
        return ret;
}

nvmlReturn_t lupn_check_init(void)
{
        pthread_mutex_lock(&lock);
        nvmlReturn_t ret = init_count ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
        pthread_mutex_unlock(&lock);
        return ret;
}

/* Takes the lock with a fresh snapshot, or returns the error (unlocked). */
/* The lock, with a snapshot at most cache_ms old; for the process lists
 * (procs), also none older than this process's last session or context. */
static nvmlReturn_t enter_fresh(bool procs)
{
        pthread_mutex_lock(&lock);
        if (init_count == 0) {
                pthread_mutex_unlock(&lock);
                return NVML_ERROR_UNINITIALIZED;
        }
        if (refresh_locked(procs) < 0) {
                pthread_mutex_unlock(&lock);
                return NVML_ERROR_GPU_IS_LOST;
        }
        return NVML_SUCCESS;
}

static nvmlReturn_t enter(void)
{
        return enter_fresh(false);
}

nvmlReturn_t lupn_count(unsigned *ret)
{
        nvmlReturn_t r = enter();

        if (r != NVML_SUCCESS)
                return r;
        *ret = snap->n_devices;
        pthread_mutex_unlock(&lock);
        return NVML_SUCCESS;
}

unsigned lupn_backend(void)
{
        pthread_mutex_lock(&lock);
        unsigned b = snap ? snap->backend : 0;
        pthread_mutex_unlock(&lock);
        return b;
}

nvmlDevice_t lupn_handle(unsigned i)
{
        return i < LUP_MAX_DEVICES ? &handles[i] : NULL;
}

bool lupn_debug(void)
{
        static atomic_int on = -1;
        if (atomic_load(&on) < 0)
                atomic_store(&on, getenv("LUPINE_NVML_DEBUG") != NULL);
        return atomic_load(&on) > 0;
}

bool lupn_is_handle(const void *p)
{
        uintptr_t u = (uintptr_t)p, first = (uintptr_t)&handles[0];

        return u >= first && u < (uintptr_t)&handles[LUP_MAX_DEVICES] && (u - first) % sizeof(handles[0]) == 0;
}

/* The device behind a handle in the current snapshot (lock held), or NULL. */
static struct lup_nvml_dev *dev_of(nvmlDevice_t dev)
{
        uintptr_t p = (uintptr_t)dev, first = (uintptr_t)&handles[0];

        if (p < first || p >= (uintptr_t)&handles[LUP_MAX_DEVICES] || (p - first) % sizeof(handles[0]))
                return NULL;
        if (dev->index >= snap->n_devices)
                return NULL;
        return &snap->dev[dev->index];
}

nvmlReturn_t lupn_dev_value(nvmlDevice_t dev, unsigned key, struct lup_nvml_val *ret)
{
        nvmlReturn_t r = enter();

        if (r != NVML_SUCCESS)
                return r;
        struct lup_nvml_dev *d = dev_of(dev);
        struct lup_nvml_val *v = d ? lup_nvml_devval(d, key) : NULL;
        if (!v)
                r = NVML_ERROR_INVALID_ARGUMENT;
        else {
                *ret = *v;
                r = (nvmlReturn_t)v->ret;
        }
        pthread_mutex_unlock(&lock);
        return r;
}

nvmlReturn_t lupn_sys_value(unsigned key, struct lup_nvml_val *ret)
{
        nvmlReturn_t r = enter();

        if (r != NVML_SUCCESS)
                return r;
        struct lup_nvml_val *v = lup_nvml_sys(snap, key);
        if (!v)
                r = NVML_ERROR_INVALID_ARGUMENT;
        else {
                *ret = *v;
                r = (nvmlReturn_t)v->ret;
        }
        pthread_mutex_unlock(&lock);
        return r;
}

nvmlReturn_t lupn_dev_procs(nvmlDevice_t dev, struct lup_nvml_proc *out, unsigned cap, unsigned *n)
{
        /* Processes come and go with contexts, which this very process may
         * just have made (PyTorch lists them right after its first
         * allocation, with a snapshot from its device count a moment
         * before): they are asked anew when lupine's libcuda.so.1 here made
         * a session or context since the snapshot. */
        nvmlReturn_t r = enter_fresh(true);

        if (r != NVML_SUCCESS)
                return r;
        struct lup_nvml_dev *d = dev_of(dev);
        if (!d) {
                pthread_mutex_unlock(&lock);
                return NVML_ERROR_INVALID_ARGUMENT;
        }
        *n = d->n_procs;
        for (unsigned i = 0; i < d->n_procs && i < cap; i++)
                out[i] = d->procs[i];
        pthread_mutex_unlock(&lock);
        return NVML_SUCCESS;
}
