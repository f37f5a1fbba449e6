/* SPDX-License-Identifier: MIT */
/*
 * Kernel twins: host implementations of the kernels in
 * tests/kernels/kernels.cu, looked up by PTX entry name.
 *
 * A twin computes the whole grid's result at once; every kernel it stands
 * for is written grid-stride, so the launch shape never changes the
 * answer. Results are bit-identical to the GPU's: integer arithmetic
 * wraps (done in unsigned types here), float adds are single IEEE adds,
 * saxpy is one fused multiply-add (fmaf, as __fmaf_rn), and this file is
 * built with -ffp-contract=off so that the compiler fuses nothing else.
 *
 * Every device range is checked before the first write, so a twin that
 * fails leaves memory as it found it; a range that is not mapped is
 * CUDA_ERROR_ILLEGAL_ADDRESS, which the stream engine makes sticky.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/hash.h"
#include "sim_module.h"

static CUresult mem(const struct sim_twin_args *a, CUdeviceptr p, size_t size,
                    enum sim_access_need need, void **ret)
{
        if (size > 0 && sim_check_device_range(a->drv, p, size, need) != CUDA_SUCCESS)
                return CUDA_ERROR_ILLEGAL_ADDRESS;
        *ret = (void *)(uintptr_t)p;
        return CUDA_SUCCESS;
}

static void param(const struct sim_twin_args *a, unsigned i, void *dst, size_t size)
{
        memcpy(dst, a->params + a->offsets[i], size);
}

static CUdeviceptr param_ptr(const struct sim_twin_args *a, unsigned i)
{
        uint64_t v;

        param(a, i, &v, sizeof(v));
        return (CUdeviceptr)v;
}

static int param_int(const struct sim_twin_args *a, unsigned i)
{
        int32_t v;

        param(a, i, &v, sizeof(v));
        return v;
}

/* Bytes for n elements of size, 0 for n <= 0 (the kernel touches none). */
static size_t span(int n, size_t size)
{
        return n > 0 ? (size_t)n * size : 0;
}

static CUresult twin_empty(const struct sim_twin_args *a)
{
        (void)a;
        return CUDA_SUCCESS;
}

static CUresult twin_vec_add_f32(const struct sim_twin_args *a)
{
        int n = param_int(a, 3);
        size_t bytes = span(n, sizeof(float));
        float *x, *y, *z;
        CUresult r;

        if ((r = mem(a, param_ptr(a, 0), bytes, SIM_NEED_READ, (void **)&x)) != CUDA_SUCCESS ||
            (r = mem(a, param_ptr(a, 1), bytes, SIM_NEED_READ, (void **)&y)) != CUDA_SUCCESS ||
            (r = mem(a, param_ptr(a, 2), bytes, SIM_NEED_WRITE, (void **)&z)) != CUDA_SUCCESS)
                return r;
        for (int i = 0; i < n; i++)
                z[i] = x[i] + y[i];
        return CUDA_SUCCESS;
}

static CUresult twin_saxpy_f32(const struct sim_twin_args *a)
{
        int n = param_int(a, 3);
        size_t bytes = span(n, sizeof(float));
        float alpha, *x, *y;
        CUresult r;

        param(a, 0, &alpha, sizeof(alpha));
        if ((r = mem(a, param_ptr(a, 1), bytes, SIM_NEED_READ, (void **)&x)) != CUDA_SUCCESS ||
            (r = mem(a, param_ptr(a, 2), bytes, SIM_NEED_READ | SIM_NEED_WRITE, (void **)&y)) != CUDA_SUCCESS)
                return r;
        for (int i = 0; i < n; i++)
                y[i] = fmaf(alpha, x[i], y[i]);
        return CUDA_SUCCESS;
}

/* Every block adds its partial sum to *out, even an empty one. */
static CUresult twin_reduce_sum_u32(const struct sim_twin_args *a)
{
        int n = param_int(a, 2);
        unsigned long long *out, sum = 0;
        uint32_t *in;
        CUresult r;

        if ((r = mem(a, param_ptr(a, 0), span(n, 4), SIM_NEED_READ, (void **)&in)) != CUDA_SUCCESS ||
            (r = mem(a, param_ptr(a, 1), 8, SIM_NEED_READ | SIM_NEED_WRITE, (void **)&out)) != CUDA_SUCCESS)
                return r;
        for (int i = 0; i < n; i++)
                sum += in[i];
        *out += sum;
        return CUDA_SUCCESS;
}

static CUresult twin_matmul_tiled_i32(const struct sim_twin_args *a)
{
        int n = param_int(a, 3);
        uint32_t *A, *B, *C, *tmp;
        size_t nn, bytes;
        CUresult r;

        if (n <= 0)
                return CUDA_SUCCESS;
        nn = (size_t)n * (size_t)n;
        if (nn > SIZE_MAX / 4)
                return CUDA_ERROR_ILLEGAL_ADDRESS;
        bytes = nn * 4;
        if ((r = mem(a, param_ptr(a, 0), bytes, SIM_NEED_READ, (void **)&A)) != CUDA_SUCCESS ||
            (r = mem(a, param_ptr(a, 1), bytes, SIM_NEED_READ, (void **)&B)) != CUDA_SUCCESS ||
            (r = mem(a, param_ptr(a, 2), bytes, SIM_NEED_WRITE, (void **)&C)) != CUDA_SUCCESS)
                return r;
        tmp = malloc(bytes);
        if (!tmp)
                return CUDA_ERROR_OUT_OF_MEMORY;
        /* Sums wrap modulo 2^32 as the GPU's ints do; the order of the
         * terms cannot change the bits. */
        for (size_t row = 0; row < (size_t)n; row++)
                for (size_t col = 0; col < (size_t)n; col++) {
                        uint32_t s = 0;

                        for (size_t j = 0; j < (size_t)n; j++)
                                s += A[row * n + j] * B[j * n + col];
                        tmp[row * n + col] = s;
                }
        memcpy(C, tmp, bytes);
        free(tmp);
        return CUDA_SUCCESS;
}

static CUresult twin_fill_u32(const struct sim_twin_args *a)
{
        int n = param_int(a, 2);
        uint32_t v, *p;
        CUresult r;

        param(a, 1, &v, sizeof(v));
        if ((r = mem(a, param_ptr(a, 0), span(n, 4), SIM_NEED_WRITE, (void **)&p)) != CUDA_SUCCESS)
                return r;
        for (int i = 0; i < n; i++)
                p[i] = v;
        return CUDA_SUCCESS;
}

static CUresult twin_add_global_u32(const struct sim_twin_args *a)
{
        int n = param_int(a, 1);
        uint32_t *bias, *p;
        CUresult r;

        if (n <= 0)
                return CUDA_SUCCESS;
        if ((r = mem(a, a->global, 4, SIM_NEED_READ, (void **)&bias)) != CUDA_SUCCESS ||
            (r = mem(a, param_ptr(a, 0), span(n, 4), SIM_NEED_READ | SIM_NEED_WRITE, (void **)&p)) != CUDA_SUCCESS)
                return r;
        for (int i = 0; i < n; i++)
                p[i] += *bias;
        return CUDA_SUCCESS;
}

/* tests/kernels/jit_a.ptx linked with jit_b.ptx: out[i] = 2 * in[i] + jit_bias. */
static CUresult twin_jit_axpb(const struct sim_twin_args *a)
{
        int n = param_int(a, 2);
        uint32_t *bias, *out, *in;
        CUresult r;

        if (n <= 0)
                return CUDA_SUCCESS;
        if ((r = mem(a, a->global, 4, SIM_NEED_READ, (void **)&bias)) != CUDA_SUCCESS ||
            (r = mem(a, param_ptr(a, 1), span(n, 4), SIM_NEED_READ, (void **)&in)) != CUDA_SUCCESS ||
            (r = mem(a, param_ptr(a, 0), span(n, 4), SIM_NEED_WRITE, (void **)&out)) != CUDA_SUCCESS)
                return r;
        for (int i = 0; i < n; i++)
                out[i] = 2u * in[i] + *bias;
        return CUDA_SUCCESS;
}

/* tests/gpu/model/model_jit.cu's kernel loaded with JIT options: p[i] = v + i. */
static CUresult twin_jit_fill(const struct sim_twin_args *a)
{
        int n = param_int(a, 2);
        uint32_t v, *p;
        CUresult r;

        param(a, 1, &v, sizeof(v));
        if ((r = mem(a, param_ptr(a, 0), span(n, 4), SIM_NEED_WRITE, (void **)&p)) != CUDA_SUCCESS)
                return r;
        for (int i = 0; i < n; i++)
                p[i] = v + (uint32_t)i;
        return CUDA_SUCCESS;
}

/* Sleeps instead of spinning: same duration, no CPU burnt. */
static CUresult twin_spin_ns(const struct sim_twin_args *a)
{
        uint64_t ns;
        struct timespec ts;

        param(a, 0, &ns, sizeof(ns));
        ts.tv_sec = (time_t)(ns / 1000000000u);
        ts.tv_nsec = (long)(ns % 1000000000u);
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
        return CUDA_SUCCESS;
}

static CUresult twin_oob_write_u32(const struct sim_twin_args *a)
{
        CUdeviceptr p = param_ptr(a, 0);
        uint32_t *q;
        CUresult r;

        /* p[1 << 30], computed as the GPU does: 64-bit address arithmetic. */
        r = mem(a, p + ((CUdeviceptr)1 << 30) * 4, 4, SIM_NEED_WRITE, (void **)&q);
        if (r == CUDA_SUCCESS)
                *q = 1;
        return r;
}

/* cvt.rzi.s64.f64: truncation, NaN to 0, saturating at the ends. */
static int64_t f64_to_s64_rz(double d)
{
        if (d != d)
                return 0;
        if (d >= 9223372036854775807.0)
                return INT64_MAX;
        if (d <= -9223372036854775808.0)
                return INT64_MIN;
        return (int64_t)d;
}

static CUresult twin_struct_param(const struct sim_twin_args *a)
{
        struct { int32_t a; double b; int32_t c[3]; } s;
        int64_t *out;
        CUresult r;

        param(a, 0, &s, sizeof(s));
        if ((r = mem(a, param_ptr(a, 1), 8, SIM_NEED_WRITE, (void **)&out)) != CUDA_SUCCESS)
                return r;
        *out = f64_to_s64_rz((((s.a + s.b) + s.c[0]) + s.c[1]) + s.c[2]);
        return CUDA_SUCCESS;
}

/* Every thread prints one line into the context's printf FIFO, blocks and
 * threads in order (a GPU may interleave blocks differently); printing
 * stops when the FIFO is full, as no more would be kept. The output
 * reaches stdout at the next flush point (sim_printf.c). */
static CUresult twin_printf_hello(const struct sim_twin_args *a)
{
        unsigned long long blocks = (unsigned long long)a->grid[0] * a->grid[1] * a->grid[2];
        unsigned threads = a->block[0] * a->block[1] * a->block[2];
        int round = param_int(a, 0);
        char line[96];

        /* x varies fastest in both linear indices */
        for (unsigned long long b = 0; b < blocks; b++)
                for (unsigned t = 0; t < threads; t++) {
                        int n = snprintf(line, sizeof(line), "device says hello from block %d thread %d round %d\n",
                                         (int)(b % a->grid[0]), (int)(t % a->block[0]), round);

                        if (!sim_printf_append(a->drv, a->ctx, line, (size_t)n))
                                return CUDA_SUCCESS;
                }
        return CUDA_SUCCESS;
}

/* lupined's own kernel (daemon/worker/gpu/piece_hash.cu): lup_hash64 of every
 * piece a table names (address, length), so the daemon's GPU-hash path
 * runs on the sim too. It is the very function the kernel mirrors
 * (common/hash.c is built in). */
static CUresult twin_lupine_piece_hash(const struct sim_twin_args *a)
{
        uint64_t pieces;
        const uint64_t *table;
        uint64_t *out;
        CUresult r;

        param(a, 1, &pieces, sizeof(pieces));
        if (pieces > SIZE_MAX / 16)
                return CUDA_ERROR_ILLEGAL_ADDRESS;
        if ((r = mem(a, param_ptr(a, 0), pieces * 16, SIM_NEED_READ, (void **)&table)) != CUDA_SUCCESS ||
            (r = mem(a, param_ptr(a, 2), pieces * 8, SIM_NEED_WRITE, (void **)&out)) != CUDA_SUCCESS)
                return r;
        for (uint64_t p = 0; p < pieces; p++) {
                const uint8_t *base;
                if ((r = mem(a, table[2 * p], table[2 * p + 1], SIM_NEED_READ, (void **)&base)) != CUDA_SUCCESS)
                        return r;
        }
        for (uint64_t p = 0; p < pieces; p++)
                out[p] = lup_hash64((const void *)(uintptr_t)table[2 * p], (size_t)table[2 * p + 1], 0);
        return CUDA_SUCCESS;
}

/* ---- tests/kernels/mapped.cu: flags in mapped host memory. They poll
 * with short sleeps rather than spin, to leave the CPU to the host side. */

static uint64_t twin_now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void twin_nap(void)
{
        struct timespec ts = { 0, 20000 };
        nanosleep(&ts, NULL);
}

static CUresult twin_wait_flag_u32(const struct sim_twin_args *a)
{
        volatile uint32_t *flag;
        uint32_t *out, v;
        uint64_t timeout;
        CUresult r;

        param(a, 2, &timeout, sizeof(timeout));
        if ((r = mem(a, param_ptr(a, 0), 4, SIM_NEED_READ, (void **)&flag)) != CUDA_SUCCESS ||
            (r = mem(a, param_ptr(a, 1), 4, SIM_NEED_WRITE, (void **)&out)) != CUDA_SUCCESS)
                return r;
        uint64_t start = twin_now_ns();
        while ((v = __atomic_load_n(flag, __ATOMIC_ACQUIRE)) == 0 && twin_now_ns() - start < timeout)
                twin_nap();
        __atomic_store_n(out, v ? v : 0xffffffffu, __ATOMIC_RELEASE);
        return CUDA_SUCCESS;
}

static CUresult twin_raise_wait_u32(const struct sim_twin_args *a)
{
        volatile uint32_t *flag, *ack;
        uint64_t timeout;
        CUresult r;

        param(a, 2, &timeout, sizeof(timeout));
        if ((r = mem(a, param_ptr(a, 0), 4, SIM_NEED_WRITE, (void **)&flag)) != CUDA_SUCCESS ||
            (r = mem(a, param_ptr(a, 1), 4, SIM_NEED_READ, (void **)&ack)) != CUDA_SUCCESS)
                return r;
        __atomic_store_n(flag, 1u, __ATOMIC_RELEASE);
        uint64_t start = twin_now_ns();
        while (__atomic_load_n(ack, __ATOMIC_ACQUIRE) == 0 && twin_now_ns() - start < timeout)
                twin_nap();
        __atomic_store_n(flag, __atomic_load_n(ack, __ATOMIC_ACQUIRE) ? 2u : 3u, __ATOMIC_RELEASE);
        return CUDA_SUCCESS;
}

static const struct sim_twin twins[] = {
        { "vec_add_f32", 4, { 8, 8, 8, 4 }, NULL, true, twin_vec_add_f32 },
        { "saxpy_f32", 4, { 4, 8, 8, 4 }, NULL, true, twin_saxpy_f32 },
        { "reduce_sum_u32", 3, { 8, 8, 4 }, NULL, true, twin_reduce_sum_u32 },
        { "matmul_tiled_i32", 4, { 8, 8, 8, 4 }, NULL, true, twin_matmul_tiled_i32 },
        { "fill_u32", 3, { 8, 4, 4 }, NULL, true, twin_fill_u32 },
        { "add_global_u32", 2, { 8, 4 }, "g_bias", true, twin_add_global_u32 },
        { "jit_axpb", 3, { 8, 8, 4 }, "jit_bias", true, twin_jit_axpb },
        { "jit_fill", 3, { 8, 4, 4 }, NULL, true, twin_jit_fill },
        { "spin_ns", 1, { 8 }, NULL, false, twin_spin_ns },
        { "oob_write_u32", 1, { 8 }, NULL, true, twin_oob_write_u32 },
        { "struct_param", 2, { 32, 8 }, NULL, true, twin_struct_param },
        /* under the lock: it finds its context's FIFO */
        { "printf_hello", 1, { 4 }, NULL, true, twin_printf_hello },
        { "lupine_piece_hash", 3, { 8, 8, 8 }, NULL, true, twin_lupine_piece_hash },
        { "wait_flag_u32", 3, { 8, 8, 8 }, NULL, true, twin_wait_flag_u32 },
        { "raise_wait_u32", 3, { 8, 8, 8 }, NULL, true, twin_raise_wait_u32 },
};

/* Any kernel named empty* runs as a no-op, whatever its parameters. */
static const struct sim_twin empty_twin = { "empty*", 0, { 0 }, NULL, false, twin_empty };

static bool signature_matches(const struct sim_twin *t, const struct sim_ptx_module *m,
                              const struct sim_ptx_entry *e)
{
        if (e->nparams != t->nparams)
                return false;
        for (unsigned i = 0; i < t->nparams; i++)
                if (e->params[i].size != t->param_sizes[i])
                        return false;
        if (t->global) {
                for (size_t i = 0; i < m->nglobals; i++)
                        if (strcmp(m->globals[i].name, t->global) == 0 && m->globals[i].size >= 4)
                                return true;
                return false;
        }
        return true;
}

const struct sim_twin *sim_twin_find(const struct sim_ptx_module *m, const struct sim_ptx_entry *e)
{
        for (size_t i = 0; i < sizeof(twins) / sizeof(twins[0]); i++)
                if (strcmp(twins[i].name, e->name) == 0)
                        return signature_matches(&twins[i], m, e) ? &twins[i] : NULL;
        return strncmp(e->name, "empty", 5) == 0 ? &empty_twin : NULL;
}
