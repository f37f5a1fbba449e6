/* SPDX-License-Identifier: MIT */
/*
 * What the e2e driver-API programs share besides check.h: a kernels file
 * read whole, device 0 set up with kernels.ptx loaded, and the last line.
 * Static inline, so that each program is still one .c file that builds
 * against the real driver as well as through lupine.
 */
#ifndef E2E_UTIL_H
#define E2E_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* The file at path, whole and NUL-terminated; its size in *ret_n. */
static inline uint8_t *e2e_read_path(const char *path, size_t *ret_n)
{
        FILE *f = fopen(path, "rb");
        EXPECT(f != NULL);
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *b = calloc(1, (size_t)n + 1);
        EXPECT(b && fread(b, 1, (size_t)n, f) == (size_t)n);
        fclose(f);
        *ret_n = (size_t)n;
        return b;
}

/* The file name in the folder dir, as e2e_read_path. */
static inline uint8_t *e2e_read_file(const char *dir, const char *name, size_t *ret_n)
{
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        return e2e_read_path(path, ret_n);
}

/* Whether device 0, by its name, is the simulator; is lupine's (the
 * simulator, or a GPU through lupine). */
static inline int e2e_on_sim(const char *name)
{
        return strstr(name, "(sim)") != NULL;
}

static inline int e2e_through_lupine(const char *name)
{
        return e2e_on_sim(name) || strstr(name, "(lupine)") != NULL;
}

/* cuInit; device 0's name in name (256 bytes), printed as "PROG on NAME";
 * its primary context made current (*ctx); dir's kernels.ptx loaded (*mod). */
static inline void e2e_setup(const char *prog, char *name, CUcontext *ctx, const char *dir, CUmodule *mod)
{
        CK(cuInit(0));
        CK(cuDeviceGetName(name, 256, 0));
        printf("%s on %s\n", prog, name);
        CK(cuDevicePrimaryCtxRetain(ctx, 0));
        CK(cuCtxSetCurrent(*ctx));
        size_t n;
        uint8_t *ptx = e2e_read_file(dir, "kernels.ptx", &n);
        CK(cuModuleLoadData(mod, ptx));
        free(ptx);
}

/* The last line, "WHAT: N FAILURES" (1) when an EXPECT_ERR failed, else
 * "WHAT: OK" (0): the exit status. */
static inline int e2e_verdict(const char *what)
{
        if (e2e_failures) {
                printf("%s: %d FAILURES\n", what, e2e_failures);
                return 1;
        }
        printf("%s: OK\n", what);
        return 0;
}

#endif
