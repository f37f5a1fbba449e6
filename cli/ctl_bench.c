/* SPDX-License-Identifier: MIT */
/*
 * lupinectl bench [--server URL] [-n N] [--size MiB]: what a client of a
 * lupined gets, measured from the client's side through lupine's own
 * libcuda.so.1 (the shim, loaded with dlopen), as a CUDA program would:
 *
 * - call latency: N cuCtxSynchronize (a synchronous call the shim always
 *   sends to the server and waits for), each timed; median and p99;
 * - launch throughput: 10 x N launches of an empty kernel (PTX, loaded
 *   with cuModuleLoadData), then one cuCtxSynchronize;
 * - copy bandwidth: cuMemcpyHtoD and cuMemcpyDtoH of a --size MiB buffer
 *   (default 64), three times each, the median.
 *
 * The shim is LUPINE_LIBCUDA, else ../shim/libcuda.so.1 next to this
 * binary when it runs from a build tree, else the installed one
 * (LUPINE_PKGLIBDIR). --server sets LUPINE_SERVER for it; the rest of the
 * client's settings (LUPINE_TLS_CA, LUPINE_TOKEN, ...) are the shim's, as
 * for any program (docs/running.md).
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <json-c/json.h>

#include "cli/lupinectl.h"

#define DEFAULT_N      1000
#define MAX_N          1000000
#define DEFAULT_MIB    64
#define MAX_MIB        16384
#define LAUNCHES_PER_N 10
#define COPY_ROUNDS    3
#define CUDA_NO_DEVICE 100

/* The driver API types, as far as bench uses them (cuda.h's ABI). */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;

struct cu {
        CUresult (*init)(unsigned);
        CUresult (*device_get)(CUdevice *, int);
        CUresult (*device_get_name)(char *, int, CUdevice);
        CUresult (*ctx_create)(CUcontext *, unsigned, CUdevice);
        CUresult (*ctx_destroy)(CUcontext);
        CUresult (*ctx_sync)(void);
        CUresult (*module_load_data)(CUmodule *, const void *);
        CUresult (*module_get_function)(CUfunction *, CUmodule, const char *);
        CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                           void **, void **);
        CUresult (*mem_alloc)(CUdeviceptr *, size_t);
        CUresult (*mem_free)(CUdeviceptr);
        CUresult (*htod)(CUdeviceptr, const void *, size_t);
        CUresult (*dtoh)(void *, CUdeviceptr, size_t);
        CUresult (*error_name)(CUresult, const char **);
};

/* An empty kernel for any GPU since sm_50 (the driver JITs it) and for the
 * simulator, which runs a kernel named empty* as a no-op (sim/sim_launch.c). */
static const char empty_ptx[] = ".version 7.0\n"
                                ".target sm_50\n"
                                ".address_size 64\n"
                                "\n"
                                ".visible .entry empty_bench()\n"
                                "{\n"
                                "\tret;\n"
                                "}\n";

struct results {
        double p50_us, p99_us, mean_us;
        long calls, launches;
        double launches_per_s;
        double htod_gbps, dtoh_gbps;
};

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

/* Says which call failed, with CUDA's name for the error; returns -1. */
static int cu_fail(const struct cu *cu, const char *call, CUresult r)
{
        const char *name = NULL;
        if (cu->error_name)
                cu->error_name(r, &name);
        fprintf(stderr, "lupinectl: bench: %s failed: %s (%d)\n", call, name ? name : "CUDA error", r);
        return -1;
}

/* The shim's path into buf: 0, or -1 after saying why. */
static int find_shim(char *buf, size_t cap)
{
        const char *env = getenv("LUPINE_LIBCUDA");
        char self[PATH_MAX];
        ssize_t n;

        if (env && *env) {
                snprintf(buf, cap, "%s", env);
                return 0;
        }
        n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n > 0) {
                self[n] = 0;
                char *slash = strrchr(self, '/');
                if (slash) {
                        *slash = 0;
                        snprintf(buf, cap, "%s/../shim/libcuda.so.1", self);
                        if (access(buf, R_OK) == 0) {
                                char real[PATH_MAX];
                                if (realpath(buf, real) && strlen(real) < cap)
                                        memcpy(buf, real, strlen(real) + 1);
                                return 0;
                        }
                }
        }
        snprintf(buf, cap, "%s/libcuda.so.1", LUPINE_PKGLIBDIR);
        if (access(buf, R_OK) == 0)
                return 0;
        fprintf(stderr,
                "lupinectl: bench: lupine's libcuda.so.1 is not at %s (is lupine-client installed?); name it "
                "with LUPINE_LIBCUDA=PATH\n",
                buf);
        return -1;
}

/* want_lupine: the library must be lupine's (a bench against a server),
 * or must not be (--local: the host's own driver, the baseline). */
static int load_shim(const char *path, struct cu *cu, bool want_lupine)
{
        static const struct {
                const char *name;
                size_t off;
        } syms[] = {
                { "cuInit", offsetof(struct cu, init) },
                { "cuDeviceGet", offsetof(struct cu, device_get) },
                { "cuDeviceGetName", offsetof(struct cu, device_get_name) },
                { "cuCtxCreate_v2", offsetof(struct cu, ctx_create) },
                { "cuCtxDestroy_v2", offsetof(struct cu, ctx_destroy) },
                { "cuCtxSynchronize", offsetof(struct cu, ctx_sync) },
                { "cuModuleLoadData", offsetof(struct cu, module_load_data) },
                { "cuModuleGetFunction", offsetof(struct cu, module_get_function) },
                { "cuLaunchKernel", offsetof(struct cu, launch) },
                { "cuMemAlloc_v2", offsetof(struct cu, mem_alloc) },
                { "cuMemFree_v2", offsetof(struct cu, mem_free) },
                { "cuMemcpyHtoD_v2", offsetof(struct cu, htod) },
                { "cuMemcpyDtoH_v2", offsetof(struct cu, dtoh) },
                { "cuGetErrorName", offsetof(struct cu, error_name) },
        };
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

        if (!h) {
                fprintf(stderr, "lupinectl: bench: cannot load %s: %s\n", path, dlerror());
                return -1;
        }
        /* the real driver would measure the local GPU, not a server */
        if (!dlsym(h, "lupine_context_generation") == want_lupine) {
                fprintf(stderr, "lupinectl: bench: %s is %s\n", path,
                        want_lupine ? "not lupine's libcuda.so.1"
                                    : "lupine's libcuda.so.1, not the host's driver (--local)");
                return -1;
        }
        for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
                void *f = dlsym(h, syms[i].name);
                if (!f) {
                        fprintf(stderr, "lupinectl: bench: %s has no %s\n", path, syms[i].name);
                        return -1;
                }
                memcpy((char *)cu + syms[i].off, &f, sizeof(f));
        }
        return 0; /* never closed: the shim's threads live until exit */
}

static int bench_latency(const struct cu *cu, long n, struct results *res)
{
        double *t = malloc((size_t)n * sizeof(*t)), sum = 0;
        CUresult r;

        if (!t) {
                fprintf(stderr, "lupinectl: out of memory\n");
                return -1;
        }
        fprintf(stderr, "lupinectl: bench: call latency, %ld synchronous calls (cuCtxSynchronize)\n", n);
        for (int i = 0; i < 10; i++)
                if ((r = cu->ctx_sync()) != 0)
                        goto fail;
        for (long i = 0; i < n; i++) {
                double t0 = now_s();
                if ((r = cu->ctx_sync()) != 0)
                        goto fail;
                t[i] = (now_s() - t0) * 1e6;
                sum += t[i];
        }
        qsort(t, (size_t)n, sizeof(*t), cmp_double);
        res->calls = n;
        res->p50_us = t[n / 2];
        res->p99_us = t[n * 99 / 100 < n ? n * 99 / 100 : n - 1];
        res->mean_us = sum / (double)n;
        free(t);
        return 0;
fail:
        free(t);
        return cu_fail(cu, "cuCtxSynchronize", r);
}

static int bench_launch(const struct cu *cu, long n, struct results *res)
{
        CUmodule mod;
        CUfunction f;
        CUresult r;

        if ((r = cu->module_load_data(&mod, empty_ptx)) != 0)
                return cu_fail(cu, "cuModuleLoadData (an empty kernel's PTX)", r);
        if ((r = cu->module_get_function(&f, mod, "empty_bench")) != 0)
                return cu_fail(cu, "cuModuleGetFunction", r);
        fprintf(stderr, "lupinectl: bench: launch throughput, %ld empty kernels\n", n);
        for (int i = 0; i < 100; i++)
                if ((r = cu->launch(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL)) != 0)
                        return cu_fail(cu, "cuLaunchKernel", r);
        if ((r = cu->ctx_sync()) != 0)
                return cu_fail(cu, "cuCtxSynchronize", r);
        double t0 = now_s();
        for (long i = 0; i < n; i++)
                if ((r = cu->launch(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL)) != 0)
                        return cu_fail(cu, "cuLaunchKernel", r);
        if ((r = cu->ctx_sync()) != 0) /* the launches' errors come back here */
                return cu_fail(cu, "cuCtxSynchronize after the launches", r);
        res->launches = n;
        res->launches_per_s = (double)n / (now_s() - t0);
        return 0;
}

static double median3(double v[static COPY_ROUNDS])
{
        qsort(v, COPY_ROUNDS, sizeof(*v), cmp_double);
        return v[COPY_ROUNDS / 2];
}

static int bench_copy(const struct cu *cu, long mib, struct results *res)
{
        size_t bytes = (size_t)mib << 20;
        double up[COPY_ROUNDS], down[COPY_ROUNDS];
        unsigned char *host = malloc(bytes);
        CUdeviceptr d;
        CUresult r;
        int rc = -1;

        if (!host) {
                fprintf(stderr, "lupinectl: bench: cannot allocate %ld MiB of host memory\n", mib);
                return -1;
        }
        for (size_t i = 0; i < bytes; i += 4096)
                host[i] = (unsigned char)i; /* touched: no page faults inside the timing */
        if ((r = cu->mem_alloc(&d, bytes)) != 0) {
                cu_fail(cu, "cuMemAlloc", r);
                goto out;
        }
        fprintf(stderr, "lupinectl: bench: copy bandwidth, %ld MiB each way, %d times\n", mib, COPY_ROUNDS);
        for (int i = 0; i < COPY_ROUNDS; i++) {
                double t0 = now_s();
                if ((r = cu->htod(d, host, bytes)) != 0) {
                        cu_fail(cu, "cuMemcpyHtoD", r);
                        goto out_free;
                }
                double t1 = now_s();
                if ((r = cu->dtoh(host, d, bytes)) != 0) {
                        cu_fail(cu, "cuMemcpyDtoH", r);
                        goto out_free;
                }
                up[i] = (double)bytes / (t1 - t0) / 1e9;
                down[i] = (double)bytes / (now_s() - t1) / 1e9;
        }
        res->htod_gbps = median3(up);
        res->dtoh_gbps = median3(down);
        rc = 0;
out_free:
        cu->mem_free(d);
out:
        free(host);
        return rc;
}

static void print_results(const struct ctl_opts *o, const char *server, const char *lib, const char *dev, long mib,
                          const struct results *res)
{
        if (o->json) {
                struct json_object *j = json_object_new_object();
                json_object_object_add(j, "server", json_object_new_string(server));
                json_object_object_add(j, "library", json_object_new_string(lib));
                json_object_object_add(j, "device", json_object_new_string(dev));
                json_object_object_add(j, "calls", json_object_new_int64(res->calls));
                json_object_object_add(j, "latency_p50_us", json_object_new_double(res->p50_us));
                json_object_object_add(j, "latency_p99_us", json_object_new_double(res->p99_us));
                json_object_object_add(j, "latency_mean_us", json_object_new_double(res->mean_us));
                json_object_object_add(j, "launches", json_object_new_int64(res->launches));
                json_object_object_add(j, "launches_per_s", json_object_new_double(res->launches_per_s));
                json_object_object_add(j, "copy_mib", json_object_new_int64(mib));
                json_object_object_add(j, "htod_gb_s", json_object_new_double(res->htod_gbps));
                json_object_object_add(j, "dtoh_gb_s", json_object_new_double(res->dtoh_gbps));
                printf("%s\n",
                       json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
                json_object_put(j);
                return;
        }
        printf("lupine bench against %s, GPU 0: %s\n", server, dev);
        printf("%-18s %12s  %s\n", "measure", "value", "unit");
        printf("%-18s %12.1f  us (cuCtxSynchronize, %ld calls)\n", "call latency p50", res->p50_us, res->calls);
        printf("%-18s %12.1f  us\n", "call latency p99", res->p99_us);
        printf("%-18s %12.0f  launches/s (%ld empty kernels)\n", "launch throughput", res->launches_per_s,
               res->launches);
        printf("%-18s %12.2f  GB/s (%ld MiB)\n", "copy HtoD", res->htod_gbps, mib);
        printf("%-18s %12.2f  GB/s (%ld MiB)\n", "copy DtoH", res->dtoh_gbps, mib);
}

static int parse_long(const char *s, long lo, long hi, long *ret)
{
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (!*s || *end || errno || v < lo || v > hi)
                return -1;
        *ret = v;
        return 0;
}

/* The options: 0, or 2 (bad usage) after saying why. */
static int parse_bench_args(int argc, char **argv, const char **server, long *n, long *mib, bool *local)
{
        enum {
                OPT_SERVER = 0x100,
                OPT_SIZE,
                OPT_LOCAL
        };
        static const struct option opts[] = {
                { "server", required_argument, NULL, OPT_SERVER },
                { "local", no_argument, NULL, OPT_LOCAL },
                { "size", required_argument, NULL, OPT_SIZE },
                { "calls", required_argument, NULL, 'n' },
                {},
        };
        int c;

        optind = 1;
        while ((c = getopt_long(argc, argv, "+n:", opts, NULL)) != -1) {
                switch (c) {
                case OPT_SERVER:
                        *server = optarg;
                        break;
                case OPT_LOCAL:
                        *local = true;
                        break;
                case 'n':
                        if (parse_long(optarg, 1, MAX_N, n) < 0) {
                                fprintf(stderr, "lupinectl: bench -n %s: expected 1 to %d calls\n", optarg, MAX_N);
                                return 2;
                        }
                        break;
                case OPT_SIZE:
                        if (parse_long(optarg, 1, MAX_MIB, mib) < 0) {
                                fprintf(stderr, "lupinectl: bench --size %s: expected 1 to %d MiB\n", optarg, MAX_MIB);
                                return 2;
                        }
                        break;
                default:
                        fprintf(stderr, "Try 'lupinectl --help'.\n");
                        return 2;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "lupinectl: bench: unexpected argument '%s'\nTry 'lupinectl --help'.\n", argv[optind]);
                return 2;
        }
        if (*server && !**server) {
                fprintf(stderr, "lupinectl: bench --server: empty\n");
                return 2;
        }
        if (*local && *server) {
                fprintf(stderr, "lupinectl: bench: --local measures this host's own driver; it takes no --server\n");
                return 2;
        }
        return 0;
}

int ctl_bench(const struct ctl_opts *o, int argc, char **argv)
{
        const char *server = o->server;
        long n = DEFAULT_N, mib = DEFAULT_MIB;
        struct results res = { 0 };
        bool local = false;
        char lib[PATH_MAX + 32], dev[256] = "?";
        struct cu cu = { 0 };
        CUcontext ctx;
        CUdevice d;
        CUresult r;

        if ((r = parse_bench_args(argc, argv, &server, &n, &mib, &local)) != 0)
                return r;
        if (server)
                setenv("LUPINE_SERVER", server, 1);
        if (local) { /* the baseline: the driver the loader finds, as a local program gets it */
                server = "the local driver";
                snprintf(lib, sizeof(lib), "libcuda.so.1");
                if (load_shim(lib, &cu, false) < 0)
                        return 1;
        } else {
                server = getenv("LUPINE_SERVER") && *getenv("LUPINE_SERVER") ? getenv("LUPINE_SERVER")
                                                                             : "127.0.0.1:14833";
                if (find_shim(lib, sizeof(lib)) < 0 || load_shim(lib, &cu, true) < 0)
                        return 1;
        }
        fprintf(stderr, "lupinectl: bench: connecting to %s through %s\n", server, lib);
        r = cu.init(0);
        if (r == CUDA_NO_DEVICE) {
                fprintf(stderr,
                        "lupinectl: bench: cannot reach lupined at %s (cuInit: no device; the line above "
                        "says why)\n",
                        server);
                return 1;
        }
        if (r != 0 || (r = cu.device_get(&d, 0)) != 0) {
                cu_fail(&cu, "cuInit or cuDeviceGet", r);
                return 1;
        }
        cu.device_get_name(dev, sizeof(dev), d);
        if ((r = cu.ctx_create(&ctx, 0, d)) != 0) {
                cu_fail(&cu, "cuCtxCreate", r);
                return 1;
        }
        if (bench_latency(&cu, n, &res) < 0 || bench_launch(&cu, n * LAUNCHES_PER_N, &res) < 0 ||
            bench_copy(&cu, mib, &res) < 0)
                return 1;
        cu.ctx_destroy(ctx);
        print_results(o, server, lib, dev, mib, &res);
        return 0;
}
