/* SPDX-License-Identifier: MIT */
/* Tiny assertion helpers for the e2e client programs (plain driver API). */
#ifndef E2E_CHECK_H
#define E2E_CHECK_H

#include <cuda.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* the CUDA 3.2 ABI of cuCtxCreate, which cuda.h 13 no longer declares */
CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);

/* The line of the call in progress, for a crash inside the driver: a
 * SIGSEGV or SIGBUS handler says where (the real driver crashes on some
 * bad input that lupine refuses). */
static volatile int e2e_line;
static void e2e_on_crash(int sig)
{
        char b[96];
        int n = snprintf(b, sizeof(b), "e2e: signal %d in the call at line %d\n", sig, e2e_line);
        if (write(STDERR_FILENO, b, (size_t)n) < 0) {
        }
        signal(sig, SIG_DFL);
        raise(sig);
}
__attribute__((constructor)) static void e2e_crash_report(void)
{
        signal(SIGSEGV, e2e_on_crash);
        signal(SIGBUS, e2e_on_crash);
}

/* Calls the real driver may crash on (handles that are garbage or freed,
 * bad flags): lupine must answer them with an error, the driver need not,
 * so a run on the real driver (tests/gpu/model.sh) sets LUPINE_E2E_NO_UB=1. */
static inline int ub_probes(void)
{
        return getenv("LUPINE_E2E_NO_UB") == NULL;
}

#define CK(call)                                                                                         \
        do {                                                                                             \
                e2e_line = __LINE__;                                                                     \
                CUresult r_ = (call);                                                                    \
                if (r_ != CUDA_SUCCESS) {                                                                \
                        const char *n_ = NULL;                                                           \
                        cuGetErrorName(r_, &n_);                                                         \
                        fprintf(stderr, "%s:%d: %s failed: %d %s\n", __FILE__, __LINE__, #call, (int)r_, \
                                n_ ? n_ : "?");                                                          \
                        exit(1);                                                                         \
                }                                                                                        \
        } while (0)

/* An error code that differs from the expectation is recorded, not fatal,
 * so one run against the real driver lists every difference at once. */
static int e2e_failures;
#define EXPECT_ERR(call, want)                                                                                      \
        do {                                                                                                        \
                e2e_line = __LINE__;                                                                                \
                CUresult r_ = (call);                                                                               \
                if (r_ != (want)) {                                                                                 \
                        fprintf(stderr, "%s:%d: %s returned %d, expected %d\n", __FILE__, __LINE__, #call, (int)r_, \
                                (int)(want));                                                                       \
                        e2e_failures++;                                                                             \
                }                                                                                                   \
        } while (0)

#define EXPECT(cond) do { \
        if (!(cond)) { \
                fprintf(stderr, "%s:%d: expectation failed: %s\n", __FILE__, __LINE__, #cond); \
                exit(1); \
        } \
} while (0)

#endif
