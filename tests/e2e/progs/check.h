/* SPDX-License-Identifier: MIT */
/* Tiny assertion helpers for the e2e client programs (plain driver API). */
#ifndef E2E_CHECK_H
#define E2E_CHECK_H

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

/* the CUDA 3.2 ABI of cuCtxCreate, which cuda.h 13 no longer declares */
CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);

#define CK(call) do { \
        CUresult r_ = (call); \
        if (r_ != CUDA_SUCCESS) { \
                const char *n_ = NULL; \
                cuGetErrorName(r_, &n_); \
                fprintf(stderr, "%s:%d: %s failed: %d %s\n", __FILE__, __LINE__, #call, (int)r_, n_ ? n_ : "?"); \
                exit(1); \
        } \
} while (0)

/* An error code that differs from the expectation is recorded, not fatal,
 * so one run against the real driver lists every difference at once. */
static int e2e_failures;
#define EXPECT_ERR(call, want) do { \
        CUresult r_ = (call); \
        if (r_ != (want)) { \
                fprintf(stderr, "%s:%d: %s returned %d, expected %d\n", __FILE__, __LINE__, #call, (int)r_, (int)(want)); \
                e2e_failures++; \
        } \
} while (0)

#define EXPECT(cond) do { \
        if (!(cond)) { \
                fprintf(stderr, "%s:%d: expectation failed: %s\n", __FILE__, __LINE__, #cond); \
                exit(1); \
        } \
} while (0)

#endif
