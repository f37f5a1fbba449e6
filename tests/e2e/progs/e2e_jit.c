/* SPDX-License-Identifier: MIT */
/*
 * JIT linking and JIT options through the driver API (docs/jit.md):
 *   - two PTX inputs linked (jit_a's kernel calls a function and reads a
 *     variable that jit_b defines), one added from memory and one from a
 *     file, with info and error logs, wall time and compiler options; the
 *     cubin loaded, its kernel run, its data checked, its variable set;
 *   - a log buffer smaller than the log: cut, NUL-terminated;
 *   - bad input: garbage as PTX, cubin and fatbin, a bad type, NULL and
 *     empty data, a missing file, unresolved externs, bad handles; the
 *     state still links after a refused input;
 *   - cuModuleLoadDataEx and cuLibraryLoadData with JIT options and logs,
 *     also for PTX that does not compile.
 * It runs unchanged on the real driver; checks of what only the simulator
 * writes in its logs are made on the simulator only.
 *
 * usage: e2e_jit DIR          (DIR holds kernels.ptx, jit_a.ptx, jit_b.ptx)
 *        e2e_jit DIR hold     builds a linked module (its variable changed),
 *                             a module and a library loaded with JIT
 *                             options and a link
 *                             state with one input added, prints "ready:",
 *                             waits for a line on stdin (the daemon restarts
 *                             meanwhile), then checks and uses them all
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e_util.h"

#define N   4096
#define LOG 4096

static const char *dir;
static int on_sim;

struct logs {
        char info[LOG], error[LOG];
        CUjit_option opt[8];
        void *val[8];
        unsigned n;
};

/* Info and error logs of LOG bytes, the wall time, verbose, -O3. */
static void logs_init(struct logs *l, unsigned info_cap)
{
        memset(l, 0, sizeof(*l));
        CUjit_option o[] = { CU_JIT_INFO_LOG_BUFFER,    CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                             CU_JIT_ERROR_LOG_BUFFER,   CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                             CU_JIT_WALL_TIME,          CU_JIT_LOG_VERBOSE,
                             CU_JIT_OPTIMIZATION_LEVEL, CU_JIT_TARGET_FROM_CUCONTEXT };
        void *v[] = { l->info,
                      (void *)(uintptr_t)info_cap,
                      l->error,
                      (void *)(uintptr_t)LOG,
                      NULL,
                      (void *)(uintptr_t)1,
                      (void *)(uintptr_t)3,
                      NULL };
        memcpy(l->opt, o, sizeof(o));
        memcpy(l->val, v, sizeof(v));
        l->n = 8;
}

static size_t info_size(const struct logs *l)
{
        return (size_t)(uintptr_t)l->val[1];
}

static size_t error_size(const struct logs *l)
{
        return (size_t)(uintptr_t)l->val[3];
}

static float wall(const struct logs *l)
{
        float f;
        memcpy(&f, &l->val[4], sizeof(f));
        return f;
}

static uint8_t *file(const char *name, size_t *n)
{
        return e2e_read_file(dir, name, n);
}

static void path_of(char *buf, size_t cap, const char *name)
{
        snprintf(buf, cap, "%s/%s", dir, name);
}

/* jit_a from memory, jit_b from its file: a module of the linked cubin. */
static CUlinkState link_two(struct logs *l, CUmodule *ret_mod, void **ret_cubin, size_t *ret_size)
{
        CUlinkState st;
        size_t n;
        char path[4096];
        uint8_t *a = file("jit_a.ptx", &n);
        CK(cuLinkCreate(l->n, l->opt, l->val, &st));
        CK(cuLinkAddData(st, CU_JIT_INPUT_PTX, a, n + 1, "jit_a.ptx", 0, NULL, NULL));
        free(a);
        path_of(path, sizeof(path), "jit_b.ptx");
        CUjit_option io[] = { CU_JIT_OPTIMIZATION_LEVEL };
        void *iv[] = { (void *)(uintptr_t)2 };
        CK(cuLinkAddFile(st, CU_JIT_INPUT_PTX, path, 1, io, iv));
        CK(cuLinkComplete(st, ret_cubin, ret_size));
        EXPECT(*ret_cubin != NULL && *ret_size > 0);
        CK(cuModuleLoadData(ret_mod, *ret_cubin));
        return st;
}

/* Whether out holds jit_axpb's answer for in[i] = 3i. */
static void check_axpb(CUdeviceptr out, unsigned bias)
{
        static uint32_t h[N];
        CK(cuMemcpyDtoH(h, out, sizeof(h)));
        for (uint32_t i = 0; i < N; i++)
                EXPECT(h[i] == 2u * (i * 3u) + bias);
}

/* Runs jit_axpb (out = 2 * in + bias) into out (N words), checked. */
static void run_axpb_into(CUmodule mod, CUdeviceptr out, unsigned bias)
{
        CUfunction f;
        CUdeviceptr in;
        static uint32_t h[N];
        int n = N;
        CK(cuModuleGetFunction(&f, mod, "jit_axpb"));
        CK(cuMemAlloc(&in, N * 4));
        for (uint32_t i = 0; i < N; i++)
                h[i] = i * 3u;
        CK(cuMemcpyHtoD(in, h, sizeof(h)));
        CK(cuMemsetD32(out, 0xdeadbeefu, N));
        void *params[] = { &out, &in, &n };
        CK(cuLaunchKernel(f, N / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL));
        check_axpb(out, bias);
        CK(cuMemFree(in));
}

static void run_axpb(CUmodule mod, unsigned bias)
{
        CUdeviceptr out;
        CK(cuMemAlloc(&out, N * 4));
        run_axpb_into(mod, out, bias);
        CK(cuMemFree(out));
}

static void set_bias(CUmodule mod, unsigned v)
{
        CUdeviceptr g;
        size_t bytes;
        unsigned got = 0;
        CK(cuModuleGetGlobal(&g, &bytes, mod, "jit_bias"));
        EXPECT(bytes == 4);
        CK(cuMemcpyHtoD(g, &v, 4));
        CK(cuMemcpyDtoH(&got, g, 4));
        EXPECT(got == v);
}

/* fill_u32 of kernels.ptx, from module mod, checked. */
static void run_fill(CUmodule mod, unsigned v)
{
        CUfunction f;
        CUdeviceptr p;
        static uint32_t h[N];
        int n = N;
        CK(cuModuleGetFunction(&f, mod, "fill_u32"));
        CK(cuMemAlloc(&p, N * 4));
        void *params[] = { &p, &v, &n };
        CK(cuLaunchKernel(f, N / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL));
        CK(cuMemcpyDtoH(h, p, sizeof(h)));
        for (int i = 0; i < N; i++)
                EXPECT(h[i] == v);
        CK(cuMemFree(p));
}

static void test_link(void)
{
        struct logs l;
        CUmodule mod;
        void *cubin;
        size_t size, n, n2;
        logs_init(&l, LOG);
        CUlinkState st = link_two(&l, &mod, &cubin, &size);
        /* the logs: NUL-terminated within their buffers, sizes within them */
        EXPECT(memchr(l.info, 0, LOG) != NULL && memchr(l.error, 0, LOG) != NULL);
        EXPECT(l.error[0] == 0);
        EXPECT(wall(&l) >= 0.0f);
        if (on_sim) {
                EXPECT(strstr(l.info, "added jit_a.ptx") && strstr(l.info, "jit_b.ptx") && strstr(l.info, "linked 2"));
                EXPECT(info_size(&l) == strlen(l.info) + 1 && error_size(&l) == 0);
        }
        /* sizes and times differ between runs: only what is the same is printed */
        printf("linked: cubin %s, info log %s\n", size ? "not empty" : "empty", l.info[0] ? "written" : "empty");
        run_axpb(mod, 7);
        set_bias(mod, 10);
        run_axpb(mod, 10);
        /* a second module from the same cubin: its own variable */
        CUmodule again;
        CK(cuModuleLoadData(&again, cubin));
        run_axpb(again, 7);
        CK(cuModuleUnload(again));
        CK(cuModuleUnload(mod));
        CK(cuLinkDestroy(st));

        /* no options at all; then options that need no answer */
        {
                uint8_t *a = file("jit_a.ptx", &n), *b = file("jit_b.ptx", &n2);
                CK(cuLinkCreate(0, NULL, NULL, &st));
                CK(cuLinkAddData(st, CU_JIT_INPUT_PTX, a, n + 1, NULL, 0, NULL, NULL));
                CK(cuLinkAddData(st, CU_JIT_INPUT_PTX, b, n2 + 1, NULL, 0, NULL, NULL));
                CK(cuLinkComplete(st, &cubin, &size));
                CK(cuModuleLoadData(&mod, cubin));
                run_axpb(mod, 7);
                CK(cuModuleUnload(mod));
                CK(cuLinkDestroy(st));
                /* options that need no answer: their arrays may go after cuLinkCreate */
                CUjit_option *o = malloc(2 * sizeof(*o));
                void **v = malloc(2 * sizeof(*v));
                o[0] = CU_JIT_OPTIMIZATION_LEVEL, v[0] = (void *)(uintptr_t)1;
                o[1] = CU_JIT_GENERATE_LINE_INFO, v[1] = (void *)(uintptr_t)1;
                CK(cuLinkCreate(2, o, v, &st));
                memset(o, 0xff, 2 * sizeof(*o));
                memset(v, 0xff, 2 * sizeof(*v));
                free(o);
                free(v);
                CK(cuLinkAddData(st, CU_JIT_INPUT_PTX, a, n + 1, NULL, 0, NULL, NULL));
                CK(cuLinkAddData(st, CU_JIT_INPUT_PTX, b, n2 + 1, NULL, 0, NULL, NULL));
                CK(cuLinkComplete(st, &cubin, &size));
                CK(cuModuleLoadData(&mod, cubin));
                run_axpb(mod, 7);
                CK(cuModuleUnload(mod));
                CK(cuLinkDestroy(st));
                free(a);
                free(b);
        }

        /* a small info buffer: cut and terminated */
        logs_init(&l, 8);
        st = link_two(&l, &mod, &cubin, &size);
        EXPECT(memchr(l.info, 0, 8) != NULL);
        if (on_sim) /* the driver's size option after a cut log: model_jit prints it on the GPU */
                EXPECT(info_size(&l) == 8 && strlen(l.info) == 7 && strncmp(l.info, "sim: ad", 7) == 0);
        run_axpb(mod, 7);
        CK(cuModuleUnload(mod));
        CK(cuLinkDestroy(st));
}

static void test_bad_input(void)
{
        struct logs l;
        CUlinkState st;
        void *cubin = NULL;
        size_t size = 0, n;
        char path[4096];
        static const char garbage[] = "\x7f\x01\x02\x03 this is neither PTX, nor a cubin, nor a fatbin";
        static const char junk_ptx[] = "junk that is not PTX at all {";
        logs_init(&l, LOG);
        CK(cuLinkCreate(l.n, l.opt, l.val, &st));
        /* the H200's driver: INVALID_IMAGE, and the state links nothing afterwards */
        EXPECT_ERR(cuLinkAddData(st, CU_JIT_INPUT_PTX, (void *)junk_ptx, sizeof(junk_ptx), "junk", 0, NULL, NULL),
                   CUDA_ERROR_INVALID_IMAGE);
        EXPECT(l.error[0] != 0); /* the error log says what went wrong */
        printf("bad PTX: error log %s\n", l.error[0] ? "written" : "empty");
        EXPECT_ERR(cuLinkAddData(st, CU_JIT_INPUT_CUBIN, (void *)garbage, sizeof(garbage), "g", 0, NULL, NULL),
                   CUDA_ERROR_INVALID_IMAGE);
        EXPECT_ERR(cuLinkAddData(st, CU_JIT_INPUT_FATBINARY, (void *)garbage, sizeof(garbage), "g", 0, NULL, NULL),
                   CUDA_ERROR_INVALID_IMAGE);
        EXPECT_ERR(cuLinkAddData(st, (CUjitInputType)99, (void *)garbage, sizeof(garbage), "g", 0, NULL, NULL),
                   CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuLinkAddData(st, CU_JIT_INPUT_PTX, NULL, 10, "g", 0, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuLinkAddData(st, CU_JIT_INPUT_PTX, (void *)junk_ptx, 0, "g", 0, NULL, NULL),
                   CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuLinkAddFile(st, CU_JIT_INPUT_PTX, "/nonexistent/jit.ptx", 0, NULL, NULL),
                   CUDA_ERROR_FILE_NOT_FOUND);
        EXPECT_ERR(cuLinkComplete(st, NULL, &size), CUDA_ERROR_INVALID_VALUE);
        /* a refused input spoils the state, as on the H200's driver: a good one fails now */
        uint8_t *a = file("jit_a.ptx", &n);
        EXPECT_ERR(cuLinkAddData(st, CU_JIT_INPUT_PTX, a, n + 1, "jit_a.ptx", 0, NULL, NULL), CUDA_ERROR_INVALID_IMAGE);
        CK(cuLinkDestroy(st));
        /* a new state links: jit_a alone has unresolved externs */
        logs_init(&l, LOG);
        CK(cuLinkCreate(l.n, l.opt, l.val, &st));
        CK(cuLinkAddData(st, CU_JIT_INPUT_PTX, a, n + 1, "jit_a.ptx", 0, NULL, NULL));
        CUresult r = cuLinkComplete(st, &cubin, &size);
        EXPECT(r != CUDA_SUCCESS);
        printf("unresolved externs: cuLinkComplete -> %d\n", (int)r);
        if (on_sim)
                EXPECT(strstr(l.error, "undefined reference to 'jit_twice' in 'jit_a.ptx'") != NULL);
        /* after a complete, even one that failed, nothing more goes in (the H200's driver) */
        path_of(path, sizeof(path), "jit_b.ptx");
        EXPECT_ERR(cuLinkAddFile(st, CU_JIT_INPUT_PTX, path, 0, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
        CK(cuLinkDestroy(st));
        logs_init(&l, LOG);
        CK(cuLinkCreate(l.n, l.opt, l.val, &st));
        CK(cuLinkAddData(st, CU_JIT_INPUT_PTX, a, n + 1, "jit_a.ptx", 0, NULL, NULL));
        free(a);
        CK(cuLinkAddFile(st, CU_JIT_INPUT_PTX, path, 0, NULL, NULL));
        CK(cuLinkComplete(st, &cubin, &size));
        CUmodule mod;
        CK(cuModuleLoadData(&mod, cubin));
        run_axpb(mod, 7);
        CK(cuModuleUnload(mod));
        CK(cuLinkDestroy(st));

        /* jit_b twice: its names are defined twice */
        CK(cuLinkCreate(l.n, l.opt, l.val, &st));
        CK(cuLinkAddFile(st, CU_JIT_INPUT_PTX, path, 0, NULL, NULL));
        /* the H200's driver refuses the second at once (INVALID_SOURCE), the sim at complete */
        r = cuLinkAddFile(st, CU_JIT_INPUT_PTX, path, 0, NULL, NULL);
        EXPECT(r == CUDA_SUCCESS || r == CUDA_ERROR_INVALID_SOURCE);
        if (r == CUDA_SUCCESS)
                r = cuLinkComplete(st, &cubin, &size);
        EXPECT(r != CUDA_SUCCESS);
        printf("defined twice: cuLinkComplete -> %d\n", (int)r);
        CK(cuLinkDestroy(st));

        /* handles */
        EXPECT_ERR(cuLinkDestroy(NULL), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_ERR(cuLinkCreate(0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuLinkCreate(1, NULL, NULL, &st), CUDA_ERROR_INVALID_VALUE);
        CUjit_option bad[] = { (CUjit_option)1000 };
        void *badv[] = { NULL };
        EXPECT_ERR(cuLinkCreate(1, bad, badv, &st), CUDA_ERROR_INVALID_VALUE);
}

/* cuModuleLoadDataEx and cuLibraryLoadData with options and logs. */
static void test_load_options(void)
{
        struct logs l;
        CUmodule mod;
        size_t n;
        uint8_t *ptx = file("kernels.ptx", &n);
        logs_init(&l, LOG);
        CK(cuModuleLoadDataEx(&mod, ptx, l.n, l.opt, l.val));
        EXPECT(memchr(l.info, 0, LOG) != NULL && l.error[0] == 0);
        EXPECT(wall(&l) >= 0.0f);
        run_fill(mod, 0x1234u);
        CK(cuModuleUnload(mod));

        static const char broken[] = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry broken( {\n";
        logs_init(&l, LOG);
        EXPECT_ERR(cuModuleLoadDataEx(&mod, broken, l.n, l.opt, l.val), CUDA_ERROR_INVALID_PTX);
        EXPECT(l.error[0] != 0);
        EXPECT(memchr(l.error, 0, LOG) != NULL);
        if (on_sim)
                EXPECT(error_size(&l) == strlen(l.error) + 1);
        printf("bad PTX loaded with options: error log %s\n", l.error[0] ? "written" : "empty");

        CUlibrary lib;
        CUkernel k;
        logs_init(&l, LOG);
        CK(cuLibraryLoadData(&lib, ptx, l.opt, l.val, l.n, NULL, NULL, 0));
        EXPECT(l.error[0] == 0);
        CK(cuLibraryGetKernel(&k, lib, "fill_u32"));
        CUmodule lmod;
        CK(cuLibraryGetModule(&lmod, lib));
        run_fill(lmod, 0x5678u);
        CK(cuLibraryUnload(lib));
        if (on_sim) { /* an option with no wire form through lupine */
                CUjit_option o[] = { CU_JIT_GLOBAL_SYMBOL_COUNT };
                void *v[] = { (void *)(uintptr_t)0 };
                EXPECT_ERR(cuModuleLoadDataEx(&mod, ptx, 1, o, v), CUDA_ERROR_NOT_SUPPORTED);
        }
        free(ptx);
}

/* ---- hold: what must survive a restart */

struct held {
        struct logs l1, l2, l3, l4;
        CUlinkState done, half;
        CUmodule linked, loaded;
        CUlibrary lib;
        void *cubin;
        size_t size;
        uint8_t *copy;
        CUdeviceptr out; /* the linked kernel's answer, kept */
};

static void hold_build(struct held *h)
{
        size_t n;
        logs_init(&h->l1, LOG);
        h->done = link_two(&h->l1, &h->linked, &h->cubin, &h->size);
        h->copy = malloc(h->size);
        EXPECT(h->copy);
        memcpy(h->copy, h->cubin, h->size);
        run_axpb(h->linked, 7);
        set_bias(h->linked, 11);
        CK(cuMemAlloc(&h->out, N * 4));
        run_axpb_into(h->linked, h->out, 11);
        uint8_t *ptx = file("kernels.ptx", &n);
        logs_init(&h->l2, LOG);
        CK(cuModuleLoadDataEx(&h->loaded, ptx, h->l2.n, h->l2.opt, h->l2.val));
        run_fill(h->loaded, 0xabcdu);
        logs_init(&h->l4, LOG);
        CK(cuLibraryLoadData(&h->lib, ptx, h->l4.opt, h->l4.val, h->l4.n, NULL, NULL, 0));
        free(ptx);
        CUmodule lmod;
        CK(cuLibraryGetModule(&lmod, h->lib));
        run_fill(lmod, 0x1111u);
        /* half done: jit_a added, jit_b not yet */
        logs_init(&h->l3, LOG);
        CK(cuLinkCreate(h->l3.n, h->l3.opt, h->l3.val, &h->half));
        uint8_t *a = file("jit_a.ptx", &n);
        CK(cuLinkAddData(h->half, CU_JIT_INPUT_PTX, a, n + 1, "jit_a.ptx", 0, NULL, NULL));
        free(a);
}

static void hold_check(struct held *h)
{
        char path[4096];
        void *cubin;
        size_t size;
        CUmodule mod;
        /* the linked kernel's answer; the module and its changed variable;
         * the cubin still the state's */
        check_axpb(h->out, 11);
        run_axpb_into(h->linked, h->out, 11);
        CK(cuMemFree(h->out));
        EXPECT(memcmp(h->cubin, h->copy, h->size) == 0);
        run_fill(h->loaded, 0xbcdeu);
        CUmodule lmod;
        CUkernel k;
        CK(cuLibraryGetModule(&lmod, h->lib));
        run_fill(lmod, 0x2222u);
        CK(cuLibraryGetKernel(&k, h->lib, "fill_u32"));
        CK(cuLibraryUnload(h->lib));
        /* the half-done link goes on */
        path_of(path, sizeof(path), "jit_b.ptx");
        CK(cuLinkAddFile(h->half, CU_JIT_INPUT_PTX, path, 0, NULL, NULL));
        CK(cuLinkComplete(h->half, &cubin, &size));
        EXPECT(h->l3.error[0] == 0);
        if (on_sim)
                EXPECT(strstr(h->l3.info, "linked 2") != NULL);
        CK(cuModuleLoadData(&mod, cubin));
        run_axpb(mod, 7);
        CK(cuModuleUnload(mod));
        /* the completed state's cubin loads again */
        CK(cuModuleLoadData(&mod, h->cubin));
        run_axpb(mod, 7);
        CK(cuModuleUnload(mod));
        CK(cuLinkDestroy(h->half));
        CK(cuLinkDestroy(h->done));
        CK(cuModuleUnload(h->linked));
        CK(cuModuleUnload(h->loaded));
        free(h->copy);
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                fprintf(stderr, "usage: e2e_jit DIR [hold]\n");
                return 2;
        }
        dir = argv[1];
        char name[256];
        CUcontext ctx;
        CUmodule kmod;
        e2e_setup("e2e_jit", name, &ctx, dir, &kmod);
        on_sim = e2e_on_sim(name);
        if (argc > 2 && strcmp(argv[2], "hold") == 0) {
                static struct held h;
                char line[64];
                hold_build(&h);
                printf("ready: linked module, module and library loaded with JIT options, a link state half done\n");
                fflush(stdout);
                if (!fgets(line, sizeof(line), stdin))
                        return 1;
                hold_check(&h);
                return e2e_verdict("e2e_jit hold");
        }
        test_link();
        test_bad_input();
        test_load_options();
        return e2e_verdict("e2e_jit");
}
