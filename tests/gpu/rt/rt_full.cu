// SPDX-License-Identifier: MIT
// An ordinary nvcc-built CUDA runtime program, run unmodified on the local
// driver and through lupine: vector add, cudaMemcpyAsync with streams and
// events, cudaMallocHost, __device__ globals through cudaMemcpyToSymbol /
// FromSymbol, device printf (whose lines must come out in order with the
// host's), a cuBLAS SGEMM and a cuDNN convolution, each checked against the
// CPU. Ends with "rt_full: OK".
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
        std::fprintf(stderr, "%s:%d: %s: %d %s\n", __FILE__, __LINE__, #call, (int)e_, cudaGetErrorString(e_)); \
        std::exit(1); } } while (0)
#define CB(call) do { cublasStatus_t e_ = (call); if (e_ != CUBLAS_STATUS_SUCCESS) { \
        std::fprintf(stderr, "%s:%d: %s: cuBLAS %d\n", __FILE__, __LINE__, #call, (int)e_); std::exit(1); } } while (0)
#define CD(call) do { cudnnStatus_t e_ = (call); if (e_ != CUDNN_STATUS_SUCCESS) { \
        std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudnnGetErrorString(e_)); std::exit(1); } } while (0)
#define EXPECT(c) do { if (!(c)) { std::fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #c); std::exit(1); } } while (0)

__device__ int counter;
__device__ float scale_by[4];

__global__ void vadd(const float *a, const float *b, float *c, int n)
{
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n)
                c[i] = a[i] + b[i] * scale_by[i % 4];
}

__global__ void bump(int times)
{
        for (int i = 0; i < times; i++)
                atomicAdd(&counter, 1);
}

__global__ void hello(int round)
{
        printf("device says hello from block %d thread %d round %d\n", blockIdx.x, threadIdx.x, round);
}

static void vector_and_symbols()
{
        const int n = 1 << 20;
        float s[4] = { 1.0f, 2.0f, 0.5f, -1.0f };
        CK(cudaMemcpyToSymbol(scale_by, s, sizeof(s)));
        float *ha, *hb, *hc;
        CK(cudaMallocHost(&ha, n * sizeof(float)));
        CK(cudaMallocHost(&hb, n * sizeof(float)));
        CK(cudaMallocHost(&hc, n * sizeof(float)));
        for (int i = 0; i < n; i++) { ha[i] = (float)i; hb[i] = (float)(n - i); }
        float *da, *db, *dc;
        CK(cudaMalloc(&da, n * sizeof(float)));
        CK(cudaMalloc(&db, n * sizeof(float)));
        CK(cudaMalloc(&dc, n * sizeof(float)));
        cudaStream_t st[2];
        cudaEvent_t start, stop, copied;
        CK(cudaStreamCreate(&st[0]));
        CK(cudaStreamCreateWithFlags(&st[1], cudaStreamNonBlocking));
        CK(cudaEventCreate(&start));
        CK(cudaEventCreate(&stop));
        CK(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
        CK(cudaEventRecord(start, st[0]));
        CK(cudaMemcpyAsync(da, ha, n * sizeof(float), cudaMemcpyHostToDevice, st[0]));
        CK(cudaMemcpyAsync(db, hb, n * sizeof(float), cudaMemcpyHostToDevice, st[1]));
        CK(cudaEventRecord(copied, st[1]));
        CK(cudaStreamWaitEvent(st[0], copied, 0));
        vadd<<<(n + 255) / 256, 256, 0, st[0]>>>(da, db, dc, n);
        CK(cudaGetLastError());
        CK(cudaMemcpyAsync(hc, dc, n * sizeof(float), cudaMemcpyDeviceToHost, st[0]));
        CK(cudaEventRecord(stop, st[0]));
        CK(cudaEventSynchronize(stop));
        float ms = -1;
        CK(cudaEventElapsedTime(&ms, start, stop));
        EXPECT(ms >= 0);
        for (int i = 0; i < n; i++)
                EXPECT(hc[i] == ha[i] + hb[i] * s[i % 4]);

        int zero = 0, got = -1;
        CK(cudaMemcpyToSymbol(counter, &zero, sizeof(zero)));
        bump<<<64, 128>>>(3);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpyFromSymbol(&got, counter, sizeof(got)));
        EXPECT(got == 64 * 128 * 3);
        void *addr = nullptr;
        size_t sz = 0;
        CK(cudaGetSymbolAddress(&addr, counter));
        CK(cudaGetSymbolSize(&sz, counter));
        EXPECT(addr && sz == sizeof(int));

        for (int i = 0; i < 2; i++) { CK(cudaStreamDestroy(st[i])); }
        CK(cudaEventDestroy(start)); CK(cudaEventDestroy(stop)); CK(cudaEventDestroy(copied));
        CK(cudaFree(da)); CK(cudaFree(db)); CK(cudaFree(dc));
        CK(cudaFreeHost(ha)); CK(cudaFreeHost(hb)); CK(cudaFreeHost(hc));
        std::printf("vector, streams, events, pinned memory, symbols: ok\n");
}

static void device_printf()
{
        for (int round = 0; round < 2; round++) {
                std::printf("host before round %d\n", round);
                std::fflush(stdout);
                hello<<<2, 2>>>(round);
                CK(cudaDeviceSynchronize());
                std::printf("host after round %d\n", round);
                std::fflush(stdout);
        }
}

static void sgemm()
{
        const int m = 256, n = 192, k = 128;
        std::vector<float> A(m * k), B(k * n), C(m * n), ref(m * n, 0.0f);
        for (int i = 0; i < m * k; i++) A[i] = (float)((i * 7) % 13) - 6.0f;
        for (int i = 0; i < k * n; i++) B[i] = (float)((i * 5) % 11) - 5.0f;
        // column-major: C(m x n) = A(m x k) * B(k x n)
        for (int j = 0; j < n; j++)
                for (int p = 0; p < k; p++)
                        for (int i = 0; i < m; i++)
                                ref[i + j * m] += A[i + p * m] * B[p + j * k];
        float *dA, *dB, *dC;
        CK(cudaMalloc(&dA, A.size() * 4)); CK(cudaMalloc(&dB, B.size() * 4)); CK(cudaMalloc(&dC, C.size() * 4));
        CK(cudaMemcpy(dA, A.data(), A.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dB, B.data(), B.size() * 4, cudaMemcpyHostToDevice));
        cublasHandle_t h;
        CB(cublasCreate(&h));
        CB(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH));
        const float one = 1.0f, zero = 0.0f;
        CB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, dA, m, dB, k, &zero, dC, m));
        CK(cudaMemcpy(C.data(), dC, C.size() * 4, cudaMemcpyDeviceToHost));
        for (int i = 0; i < m * n; i++)
                EXPECT(C[i] == ref[i]); // small integers: exact in fp32
        CB(cublasDestroy(h));
        CK(cudaFree(dA)); CK(cudaFree(dB)); CK(cudaFree(dC));
        std::printf("cuBLAS SGEMM: ok\n");
}

static void conv()
{
        const int N = 2, C = 3, H = 16, W = 16, K = 4, R = 3, S = 3;
        std::vector<float> x(N * C * H * W), w(K * C * R * S), y(N * K * H * W), ref(N * K * H * W, 0.0f);
        for (size_t i = 0; i < x.size(); i++) x[i] = (float)((i * 3) % 7) - 3.0f;
        for (size_t i = 0; i < w.size(); i++) w[i] = (float)((i * 5) % 5) - 2.0f;
        for (int n = 0; n < N; n++) for (int k = 0; k < K; k++) for (int h = 0; h < H; h++) for (int q = 0; q < W; q++) {
                float acc = 0;
                for (int c = 0; c < C; c++) for (int r = 0; r < R; r++) for (int s = 0; s < S; s++) {
                        int ih = h + r - 1, iw = q + s - 1;
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                        acc += x[((n * C + c) * H + ih) * W + iw] * w[((k * C + c) * R + r) * S + s];
                }
                ref[((n * K + k) * H + h) * W + q] = acc;
        }
        cudnnHandle_t h;
        CD(cudnnCreate(&h));
        cudnnTensorDescriptor_t xd, yd;
        cudnnFilterDescriptor_t wd;
        cudnnConvolutionDescriptor_t cd;
        CD(cudnnCreateTensorDescriptor(&xd)); CD(cudnnCreateTensorDescriptor(&yd));
        CD(cudnnCreateFilterDescriptor(&wd)); CD(cudnnCreateConvolutionDescriptor(&cd));
        CD(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, C, H, W));
        CD(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, K, H, W));
        CD(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, K, C, R, S));
        CD(cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
        CD(cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH));
        float *dx, *dw, *dy;
        CK(cudaMalloc(&dx, x.size() * 4)); CK(cudaMalloc(&dw, w.size() * 4)); CK(cudaMalloc(&dy, y.size() * 4));
        CK(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dw, w.data(), w.size() * 4, cudaMemcpyHostToDevice));
        cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
        size_t ws = 0;
        CD(cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, algo, &ws));
        void *dws = nullptr;
        if (ws) CK(cudaMalloc(&dws, ws));
        const float one = 1.0f, zero = 0.0f;
        CD(cudnnConvolutionForward(h, &one, xd, dx, wd, dw, cd, algo, dws, ws, &zero, yd, dy));
        CK(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < y.size(); i++)
                EXPECT(std::fabs(y[i] - ref[i]) < 1e-3f);
        CD(cudnnDestroy(h));
        std::printf("cuDNN convolution: ok\n");
}

int main()
{
        cudaDeviceProp p;
        CK(cudaGetDeviceProperties(&p, 0));
        std::printf("device: %s\n", p.name);
        vector_and_symbols();
        device_printf();
        sgemm();
        conv();
        CK(cudaDeviceReset());
        std::printf("rt_full: OK\n");
        return 0;
}
