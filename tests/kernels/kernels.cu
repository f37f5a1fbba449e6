// SPDX-License-Identifier: MIT
//
// Test kernels for libcuda-sim and for the GPU runs. The simulator cannot
// execute PTX: it runs a host "twin" of each kernel, looked up by entry
// name (sim/sim_twins.c), and the twins must give bit-identical results to
// these kernels on a real GPU. Every kernel is extern "C" so its PTX entry
// name is the plain C name, and every loop is grid-stride so that any
// launch shape computes the whole result.
//
// Regenerate the committed outputs (nvcc runs without a GPU; the build
// never needs it). With CUDA 13.0 these give the committed bytes exactly:
//   nvcc -ptx -arch=sm_90 -o tests/kernels/kernels.ptx tests/kernels/kernels.cu
//   nvcc -fatbin -gencode arch=compute_90,code=compute_90 --compress-mode=none \
//        -o tests/kernels/kernels.fatbin tests/kernels/kernels.cu
//   nvcc -fatbin -gencode arch=compute_90,code=compute_90 \
//        -o tests/kernels/kernels_zstd.fatbin tests/kernels/kernels.cu
//   nvcc -cubin -arch=sm_90 -o tests/kernels/kernels.cubin tests/kernels/kernels.cu

#define TILE 16
#define MAX_BLOCK_THREADS 1024

// Read by add_global_u32; tests read and write it via cuModuleGetGlobal.
__device__ unsigned g_bias = 7;

// A small initialised array, so that the sim's parser sees an array
// initialiser in the PTX.
__device__ int g_table[4] = { 1, -2, 3, 40000 };

// The thread's index in the block, and in the whole grid, counting every
// dimension: a launch with gridDim.y > 1 must not do the work twice.
__device__ static __forceinline__ unsigned block_tid(void)
{
        return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

__device__ static __forceinline__ unsigned block_threads(void)
{
        return blockDim.x * blockDim.y * blockDim.z;
}

__device__ static __forceinline__ unsigned long long grid_tid(void)
{
        unsigned long long b = blockIdx.x + (unsigned long long)gridDim.x *
                               (blockIdx.y + (unsigned long long)gridDim.y * blockIdx.z);

        return b * block_threads() + block_tid();
}

__device__ static __forceinline__ unsigned long long grid_threads(void)
{
        return (unsigned long long)gridDim.x * gridDim.y * gridDim.z * block_threads();
}

extern "C" __global__ void empty_kernel(void)
{
}

extern "C" __global__ void vec_add_f32(const float *a, const float *b, float *c, int n)
{
        for (unsigned long long i = grid_tid(); i < (unsigned long long)max(n, 0); i += grid_threads())
                c[i] = a[i] + b[i];
}

extern "C" __global__ void saxpy_f32(float a, const float *x, float *y, int n)
{
        for (unsigned long long i = grid_tid(); i < (unsigned long long)max(n, 0); i += grid_threads())
                y[i] = __fmaf_rn(a, x[i], y[i]);
}

// Each block sums a grid-stride share into shared memory, reduces it
// there, and one thread adds the block's total to *out.
extern "C" __global__ void reduce_sum_u32(const unsigned *in, unsigned long long *out, int n)
{
        __shared__ unsigned long long partial[MAX_BLOCK_THREADS];
        unsigned tid = block_tid(), nt = block_threads();
        unsigned long long sum = 0;

        for (unsigned long long i = grid_tid(); i < (unsigned long long)max(n, 0); i += grid_threads())
                sum += in[i];
        partial[tid] = sum;
        __syncthreads();
        for (unsigned s = 1; s < nt; s *= 2) {
                if (tid % (2 * s) == 0 && tid + s < nt)
                        partial[tid] += partial[tid + s];
                __syncthreads();
        }
        if (tid == 0)
                atomicAdd(out, partial[0]);
}

// C = A * B for n x n row-major int matrices, through 16 x 16 tiles in
// shared memory. Blocks walk the output tiles grid-stride and threads
// walk a tile's elements block-stride, so any launch shape works; each
// element of C belongs to one thread, which accumulates into it tile by
// tile. Integer arithmetic wraps, so the result is exact on any device.
extern "C" __global__ void matmul_tiled_i32(const int *A, const int *B, int *C, int n)
{
        __shared__ int As[TILE][TILE];
        __shared__ int Bs[TILE][TILE];
        int tiles = (max(n, 0) + TILE - 1) / TILE;
        unsigned tid = block_tid(), nt = block_threads();
        unsigned long long nblocks = (unsigned long long)gridDim.x * gridDim.y * gridDim.z;
        unsigned long long bid = blockIdx.x + (unsigned long long)gridDim.x *
                                 (blockIdx.y + (unsigned long long)gridDim.y * blockIdx.z);

        for (unsigned long long tile = bid; tile < (unsigned long long)tiles * tiles; tile += nblocks) {
                int ty = (int)(tile / tiles), tx = (int)(tile % tiles);

                for (int t = 0; t < tiles; t++) {
                        for (unsigned k = tid; k < TILE * TILE; k += nt) {
                                int r = k / TILE, c = k % TILE;
                                int ar = ty * TILE + r, ac = t * TILE + c;
                                int br = t * TILE + r, bc = tx * TILE + c;

                                As[r][c] = ar < n && ac < n ? A[ar * n + ac] : 0;
                                Bs[r][c] = br < n && bc < n ? B[br * n + bc] : 0;
                        }
                        __syncthreads();
                        for (unsigned k = tid; k < TILE * TILE; k += nt) {
                                int r = k / TILE, c = k % TILE;
                                int row = ty * TILE + r, col = tx * TILE + c;
                                int s = 0;

                                for (int j = 0; j < TILE; j++)
                                        s += As[r][j] * Bs[j][c];
                                if (row < n && col < n)
                                        C[row * n + col] = t == 0 ? s : C[row * n + col] + s;
                        }
                        __syncthreads();
                }
        }
}

extern "C" __global__ void fill_u32(unsigned *p, unsigned v, int n)
{
        for (unsigned long long i = grid_tid(); i < (unsigned long long)max(n, 0); i += grid_threads())
                p[i] = v;
}

extern "C" __global__ void add_global_u32(unsigned *p, int n)
{
        for (unsigned long long i = grid_tid(); i < (unsigned long long)max(n, 0); i += grid_threads())
                p[i] += g_bias;
}

// Busy-waits for ns nanoseconds of %globaltimer, in every thread.
extern "C" __global__ void spin_ns(unsigned long long ns)
{
        unsigned long long start, now;

        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
        do {
                asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        } while (now - start < ns);
}

// Writes far past any allocation the tests make: an illegal address.
extern "C" __global__ void oob_write_u32(unsigned *p)
{
        if (grid_tid() == 0)
                p[1 << 30] = 1;
}

struct sp {
        int a;
        double b;
        int c[3];
};

// A parameter that is a struct, not a scalar: its PTX is a .b8 array
// with .align 8.
extern "C" __global__ void struct_param(struct sp s, long long *out)
{
        if (grid_tid() == 0)
                *out = (long long)(s.a + s.b + s.c[0] + s.c[1] + s.c[2]);
}

// Device printf: every thread prints one line. The driver keeps the output
// in a buffer on the device and writes it to the process's stdout at the
// next synchronisation point (cuCtxSynchronize, a stream or event
// synchronisation, a blocking copy), not when the kernel runs.
extern "C" __global__ void printf_hello(int round)
{
        printf("device says hello from block %d thread %d round %d\n", blockIdx.x, threadIdx.x, round);
}
