/* SPDX-License-Identifier: MIT */
/*
 * What the nvcc-built programs of tests/gpu/model.sh (issue 14: arrays,
 * textures, surfaces, JIT linking, mapped and managed memory, batched
 * cuBLAS, cuFFT) share. Each program prints what it computed, so that its
 * output on the local driver and through lupine can be compared line by
 * line, and ends with "done".
 *
 * With "hold" as its last argument a program stops once at its midpoint,
 * with every object it tests alive and holding data: it prints "ready:"
 * and waits for a line on stdin, while tests/gpu/model_restart.py drains
 * and restarts (or upgrades) lupined. The rest of its output must be what
 * it would have been without the restart.
 */
#ifndef LUPINE_MODEL_UTIL_H
#define LUPINE_MODEL_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime.h>

#define RT_CHECK(x)                                                                                     \
        do {                                                                                            \
                cudaError_t e_ = (x);                                                                   \
                if (e_ != cudaSuccess) {                                                                \
                        printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
                        exit(1);                                                                        \
                }                                                                                       \
        } while (0)

#define CU_CHECK(x)                                                                 \
        do {                                                                        \
                CUresult r_ = (x);                                                  \
                if (r_ != CUDA_SUCCESS) {                                           \
                        const char *n_ = "?";                                       \
                        cuGetErrorName(r_, &n_);                                    \
                        printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #x, n_); \
                        exit(1);                                                    \
                }                                                                   \
        } while (0)

/* The midpoint: with "hold", wait there for the restart. */
static inline void model_hold(int argc, char **argv, const char *what)
{
        if (argc < 2 || strcmp(argv[argc - 1], "hold") != 0)
                return;
        char line[64];
        printf("ready: %s\n", what);
        fflush(stdout);
        if (!fgets(line, sizeof(line), stdin))
                exit(2);
}

/* A checksum of n floats, printed instead of every value. */
static inline double model_sum(const float *v, size_t n)
{
        double s = 0;
        for (size_t i = 0; i < n; i++)
                s += (double)v[i] * (double)((i % 7) + 1);
        return s;
}

#endif
