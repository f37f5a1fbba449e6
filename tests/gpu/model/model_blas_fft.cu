/* SPDX-License-Identifier: MIT */
/*
 * Issue 14, items 6 and 7 and the cuFFT test: batched cuBLAS GEMM with
 * arrays of device pointers (cublasSgemmBatched), the strided batched
 * form, cuFFT 1D and 2D complex transforms, and the profiler's start and
 * stop. Prints checksums of every result; tests/gpu/model.sh compares them
 * with the local driver's.
 */
// link: -lcublas -lcufft
#include <cublas_v2.h>
#include <cuda_profiler_api.h>
#include <cufft.h>

#include "model_util.h"

#define BLAS_CHECK(x)                                                                                        \
        do {                                                                                                 \
                cublasStatus_t s_ = (x);                                                                     \
                if (s_ != CUBLAS_STATUS_SUCCESS) {                                                           \
                        printf("FAIL %s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, #x, (int)s_);       \
                        exit(1);                                                                             \
                }                                                                                            \
        } while (0)
#define FFT_CHECK(x)                                                                                         \
        do {                                                                                                 \
                cufftResult s_ = (x);                                                                        \
                if (s_ != CUFFT_SUCCESS) {                                                                   \
                        printf("FAIL %s:%d: %s: cuFFT result %d\n", __FILE__, __LINE__, #x, (int)s_);        \
                        exit(1);                                                                             \
                }                                                                                            \
        } while (0)

enum { N = 64, BATCH = 8, FFT1 = 4096, FFT2X = 128, FFT2Y = 96 };

static void fill(float *v, size_t n, unsigned seed)
{
        for (size_t i = 0; i < n; i++)
                v[i] = (float)((i * 2654435761u + seed) % 1000) / 500.0f - 1.0f;
}

/* C[b] = A[b] * B[b] for BATCH matrices through pointer arrays in device memory */
static void gemm_batched(cublasHandle_t h, float *dA, float *dB, float *dC, const char *when)
{
        float *pa[BATCH], *pb[BATCH], *pc[BATCH], **dpa, **dpb, **dpc;
        const float one = 1.0f, zero = 0.0f;
        static float c[BATCH * N * N];

        for (int b = 0; b < BATCH; b++) {
                pa[b] = dA + (size_t)b * N * N;
                pb[b] = dB + (size_t)b * N * N;
                pc[b] = dC + (size_t)b * N * N;
        }
        RT_CHECK(cudaMalloc(&dpa, sizeof(pa)));
        RT_CHECK(cudaMalloc(&dpb, sizeof(pb)));
        RT_CHECK(cudaMalloc(&dpc, sizeof(pc)));
        RT_CHECK(cudaMemcpy(dpa, pa, sizeof(pa), cudaMemcpyHostToDevice));
        RT_CHECK(cudaMemcpy(dpb, pb, sizeof(pb), cudaMemcpyHostToDevice));
        RT_CHECK(cudaMemcpy(dpc, pc, sizeof(pc), cudaMemcpyHostToDevice));
        BLAS_CHECK(cublasSgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, (const float **)dpa, N,
                                      (const float **)dpb, N, &zero, dpc, N, BATCH));
        RT_CHECK(cudaMemcpy(c, dC, sizeof(c), cudaMemcpyDeviceToHost));
        printf("sgemm batched (%s): %.3f\n", when, model_sum(c, BATCH * N * N));
        RT_CHECK(cudaFree(dpa));
        RT_CHECK(cudaFree(dpb));
        RT_CHECK(cudaFree(dpc));
}

static void gemm_strided(cublasHandle_t h, float *dA, float *dB, float *dC)
{
        const float one = 1.0f, half = 0.5f;
        static float c[BATCH * N * N];

        BLAS_CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, N, N, N, &one, dA, N, N * N, dB, N,
                                             N * N, &half, dC, N, N * N, BATCH));
        RT_CHECK(cudaMemcpy(c, dC, sizeof(c), cudaMemcpyDeviceToHost));
        printf("sgemm strided batched: %.3f\n", model_sum(c, BATCH * N * N));
}

static void fft_1d(cufftComplex *d, cufftHandle plan, const char *when)
{
        static cufftComplex h[FFT1];
        FFT_CHECK(cufftExecC2C(plan, d, d, CUFFT_FORWARD));
        RT_CHECK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
        printf("fft 1d (%s): %.2f\n", when, model_sum((const float *)h, 2 * FFT1));
}

static void fft_2d(cufftComplex *d, cufftHandle plan, const char *when)
{
        static cufftComplex h[FFT2X * FFT2Y];
        FFT_CHECK(cufftExecC2C(plan, d, d, CUFFT_FORWARD));
        RT_CHECK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
        printf("fft 2d (%s): %.2f\n", when, model_sum((const float *)h, 2 * FFT2X * FFT2Y));
}

int main(int argc, char **argv)
{
        static float a[BATCH * N * N], b[BATCH * N * N], sig1[2 * FFT1], sig2[2 * FFT2X * FFT2Y];
        float *dA, *dB, *dC;
        cufftComplex *d1, *d2;
        cublasHandle_t h;
        cufftHandle p1, p2;

        RT_CHECK(cudaProfilerStart());
        fill(a, BATCH * N * N, 1);
        fill(b, BATCH * N * N, 2);
        fill(sig1, 2 * FFT1, 3);
        fill(sig2, 2 * FFT2X * FFT2Y, 4);
        RT_CHECK(cudaMalloc(&dA, sizeof(a)));
        RT_CHECK(cudaMalloc(&dB, sizeof(b)));
        RT_CHECK(cudaMalloc(&dC, sizeof(a)));
        RT_CHECK(cudaMalloc(&d1, sizeof(sig1)));
        RT_CHECK(cudaMalloc(&d2, sizeof(sig2)));
        RT_CHECK(cudaMemcpy(dA, a, sizeof(a), cudaMemcpyHostToDevice));
        RT_CHECK(cudaMemcpy(dB, b, sizeof(b), cudaMemcpyHostToDevice));
        RT_CHECK(cudaMemcpy(d1, sig1, sizeof(sig1), cudaMemcpyHostToDevice));
        RT_CHECK(cudaMemcpy(d2, sig2, sizeof(sig2), cudaMemcpyHostToDevice));
        BLAS_CHECK(cublasCreate(&h));
        FFT_CHECK(cufftPlan1d(&p1, FFT1, CUFFT_C2C, 1));
        FFT_CHECK(cufftPlan2d(&p2, FFT2X, FFT2Y, CUFFT_C2C));

        gemm_batched(h, dA, dB, dC, "before");
        gemm_strided(h, dA, dB, dC);
        fft_1d(d1, p1, "before");
        fft_2d(d2, p2, "before");
        RT_CHECK(cudaDeviceSynchronize());
        model_hold(argc, argv, "cuBLAS handle, cuFFT plans and their data live");
        /* the same handle and plans after the restart, on the data from before it */
        gemm_batched(h, dA, dB, dC, "after");
        fft_1d(d1, p1, "after");
        fft_2d(d2, p2, "after");

        FFT_CHECK(cufftDestroy(p1));
        FFT_CHECK(cufftDestroy(p2));
        BLAS_CHECK(cublasDestroy(h));
        RT_CHECK(cudaProfilerStop());
        printf("done\n");
        return 0;
}
