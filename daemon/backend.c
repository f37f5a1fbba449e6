/* SPDX-License-Identifier: MIT */
#define LUP_LOG_CAT LUP_LOGC_GPU
#include "backend.h"

#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* Stands in for a driver function the library lacks. Called through
 * pointers of other types, which is harmless on the SysV x86-64 ABI for a
 * function that reads no arguments. */
static CUresult missing_function(void)
{
        return CUDA_ERROR_NOT_SUPPORTED;
}

/* What the worker cannot serve any session without. */
static const char *const essential[] = {
        "cuInit", "cuDeviceGetCount", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent",
        "cuMemAddressReserve", "cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemUnmap", "cuMemRelease",
};

static int load_table(void *dl, struct lupw_backend *fn, const char *path)
{
        char missing[512] = "";
        size_t n_missing = 0;

        for (size_t i = 0; i < lupw_n_backend_syms; i++) {
                const char *name = lupw_backend_syms[i].name;
                void *sym = dlsym(dl, name);
                if (!sym) {
                        for (size_t e = 0; e < sizeof(essential) / sizeof(essential[0]); e++) {
                                if (strcmp(essential[e], name) == 0) {
                                        lup_err("%s lacks %s; it is too old or not a CUDA driver", path, name);
                                        return -ENOENT;
                                }
                        }
                        size_t used = strlen(missing);
                        if (used + strlen(name) + 3 < sizeof(missing))
                                snprintf(missing + used, sizeof(missing) - used, "%s%s", used ? ", " : "", name);
                        n_missing++;
                        sym = (void *)missing_function;
                }
                memcpy((char *)fn + lupw_backend_syms[i].offset, &sym, sizeof(sym));
        }
        if (n_missing)
                lup_info("%s lacks %zu driver function(s), which answer CUDA_ERROR_NOT_SUPPORTED: %s", path,
                         n_missing, missing);
        return 0;
}

static int try_open(const char *path, int kind, struct lupw_backend_handle *b, bool quiet)
{
        void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!dl) {
                if (!quiet)
                        lup_err("cannot load %s: %s", path, dlerror());
                return -ENOENT;
        }
        /* lupine's own shim must never serve as the daemon's driver (an
         * LD_LIBRARY_PATH meant for clients would otherwise loop us back). */
        if (dlsym(dl, "lupine_shim_version")) {
                lup_err("%s is lupine's client shim, not a CUDA driver; remove the shim from lupined's LD_LIBRARY_PATH", path);
                dlclose(dl);
                return -ELOOP;
        }
        int rc = load_table(dl, &b->fn, path);
        if (rc < 0) {
                dlclose(dl);
                return rc;
        }
        b->dl = dl;
        b->kind = kind;
        snprintf(b->path, sizeof(b->path), "%s", path);
        return 0;
}

static int init_and_count(struct lupw_backend_handle *b, int *ret_count)
{
        CUresult r = b->fn.cuInit(0);
        if (r != CUDA_SUCCESS)
                return -(int)r;
        int n = 0;
        r = b->fn.cuDeviceGetCount(&n);
        if (r != CUDA_SUCCESS)
                return -(int)r;
        *ret_count = n;
        return 0;
}

static int open_sim(const struct lupd_config *cfg, struct lupw_backend_handle *b)
{
        char dir[4096], cand[4200];
        const char *env = getenv("LUPINE_SIM_LIBRARY");

        if (env && *env)
                return try_open(env, LUP_BACKEND_SIM, b, false);
        snprintf(dir, sizeof(dir), "%s", cfg->self_exe);
        char *d = dirname(dir);
        /* build tree: build/daemon/lupined -> build/sim/; installed: bin/ -> lib/lupine/ */
        const char *rel[] = { "../sim/libcuda-sim.so", "../lib/lupine/libcuda-sim.so",
                              "../lib/x86_64-linux-gnu/lupine/libcuda-sim.so", "../lib64/lupine/libcuda-sim.so" };
        for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
                snprintf(cand, sizeof(cand), "%s/%s", d, rel[i]);
                if (try_open(cand, LUP_BACKEND_SIM, b, true) == 0)
                        return 0;
        }
        /* where meson install put it, for a lupined moved elsewhere */
        if (try_open(LUPINE_PKGLIBDIR "/libcuda-sim.so", LUP_BACKEND_SIM, b, true) == 0)
                return 0;
        if (try_open("libcuda-sim.so", LUP_BACKEND_SIM, b, true) == 0)
                return 0;
        lup_err("cannot find libcuda-sim.so (looked next to %s, in " LUPINE_PKGLIBDIR
                " and on the library path; set LUPINE_SIM_LIBRARY)",
                cfg->self_exe);
        return -ENOENT;
}

int backend_open(const struct lupd_config *cfg, struct lupw_backend_handle *ret)
{
        struct lupw_backend_handle b = { 0 };
        int n = 0, rc;

        if (cfg->backend != LUPD_BACKEND_SIM) {
                rc = try_open("libcuda.so.1", LUP_BACKEND_CUDA, &b, cfg->backend == LUPD_BACKEND_AUTO);
                if (rc == 0) {
                        rc = init_and_count(&b, &n);
                        if (rc == 0 && n > 0) {
                                lup_info("backend: CUDA driver %s, %d device(s)", b.path, n);
                                *ret = b;
                                return 0;
                        }
                        dlclose(b.dl);
                        memset(&b, 0, sizeof(b));
                }
                if (cfg->backend == LUPD_BACKEND_CUDA) {
                        lup_err("backend cuda: no usable GPU (driver missing, cuInit failed or no device)");
                        return -ENODEV;
                }
                lup_info("backend auto: no usable GPU found, using the simulated driver");
        }
        rc = open_sim(cfg, &b);
        if (rc < 0)
                return rc;
        rc = init_and_count(&b, &n);
        if (rc < 0 || n <= 0) {
                lup_err("simulated driver %s failed to initialise (CUresult %d)", b.path, -rc);
                dlclose(b.dl);
                return -ENODEV;
        }
        lup_info("backend: SIMULATED GPU driver %s, %d device(s)", b.path, n);
        *ret = b;
        return 0;
}

void backend_close(struct lupw_backend_handle *b)
{
        if (b->dl)
                dlclose(b->dl);
        b->dl = NULL;
}
