/* SPDX-License-Identifier: MIT */
/*
 * libcuda-sim: module images, PTX parsing, kernel twins, launches,
 * libraries and occupancy. The kernels are tests/kernels/kernels.cu,
 * loaded as the committed PTX (KERNELS_PTX), fatbin and cubin. Expected
 * results are computed here the way the GPU computes them; the same
 * kernels were checked bit for bit against an H200.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#define assert_cu(call) assert_int_equal((call), CUDA_SUCCESS)

static char *ptx_text;
static size_t ptx_len;

static char *slurp(const char *path, size_t *ret_len)
{
        FILE *f = fopen(path, "rb");
        char *buf;
        long n;

        if (!f)
                return NULL;
        fseek(f, 0, SEEK_END);
        n = ftell(f);
        fseek(f, 0, SEEK_SET);
        buf = malloc((size_t)n + 1);
        if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
                free(buf);
                buf = NULL;
        }
        fclose(f);
        if (buf) {
                buf[n] = '\0';
                *ret_len = (size_t)n;
        }
        return buf;
}

static uint32_t rng_state = 0x9e3779b9;

static uint32_t rnd(void)
{
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 17;
        rng_state ^= rng_state << 5;
        return rng_state;
}

static int group_setup(void **state)
{
        CUcontext ctx;

        setenv("LUPINE_SIM_MEM_MB", "1024", 1);
        ptx_text = slurp(KERNELS_PTX, &ptx_len);
        if (!ptx_text || cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
            cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
                return -1;
        *state = ctx;
        return 0;
}

static int group_teardown(void **state)
{
        (void)state;
        free(ptx_text);
        cuCtxSetCurrent(NULL);
        return cuDevicePrimaryCtxRelease_v2(0) == CUDA_SUCCESS ? 0 : -1;
}

static CUmodule load_kernels(void)
{
        CUmodule m = NULL;

        assert_cu(cuModuleLoadData(&m, ptx_text));
        return m;
}

static CUfunction fn(CUmodule m, const char *name)
{
        CUfunction f = NULL;

        assert_cu(cuModuleGetFunction(&f, m, name));
        return f;
}

/* ---- PTX: every kernel's parameter layout ---- */

struct expect_param { size_t offset, size; };

static const struct {
        const char *name;
        unsigned n;
        struct expect_param p[4];
        int static_smem;
} layouts[] = {
        { "empty_kernel", 0, { { 0 } }, 0 },
        { "vec_add_f32", 4, { { 0, 8 }, { 8, 8 }, { 16, 8 }, { 24, 4 } }, 0 },
        { "saxpy_f32", 4, { { 0, 4 }, { 8, 8 }, { 16, 8 }, { 24, 4 } }, 0 },
        { "reduce_sum_u32", 3, { { 0, 8 }, { 8, 8 }, { 16, 4 } }, 8192 },
        { "matmul_tiled_i32", 4, { { 0, 8 }, { 8, 8 }, { 16, 8 }, { 24, 4 } }, 2048 },
        { "fill_u32", 3, { { 0, 8 }, { 8, 4 }, { 12, 4 } }, 0 },
        { "add_global_u32", 2, { { 0, 8 }, { 8, 4 } }, 0 },
        { "spin_ns", 1, { { 0, 8 } }, 0 },
        { "oob_write_u32", 1, { { 0, 8 } }, 0 },
        /* the struct is a .b8 [32] with .align 8 */
        { "struct_param", 2, { { 0, 32 }, { 32, 8 } }, 0 },
        /* its printf arguments live in .local memory, not .shared */
        { "printf_hello", 1, { { 0, 4 } }, 0 },
};

static void test_ptx_layouts(void **state)
{
        CUmodule m = load_kernels();
        CUfunction fs[16];
        unsigned count;
        const char *name;
        size_t off, size;
        int v;

        (void)state;
        assert_cu(cuModuleGetFunctionCount(&count, m));
        assert_int_equal(count, sizeof(layouts) / sizeof(layouts[0]));
        assert_cu(cuModuleEnumerateFunctions(fs, count, m));
        for (size_t k = 0; k < sizeof(layouts) / sizeof(layouts[0]); k++) {
                CUfunction f = fn(m, layouts[k].name);

                assert_cu(cuFuncGetName(&name, f));
                assert_string_equal(name, layouts[k].name);
                for (unsigned i = 0; i < layouts[k].n; i++) {
                        assert_cu(cuFuncGetParamInfo(f, i, &off, &size));
                        assert_int_equal(off, layouts[k].p[i].offset);
                        assert_int_equal(size, layouts[k].p[i].size);
                }
                if (layouts[k].n)       /* the size is optional */
                        assert_cu(cuFuncGetParamInfo(f, 0, &off, NULL));
                assert_int_equal(cuFuncGetParamInfo(f, layouts[k].n, &off, &size), CUDA_ERROR_INVALID_VALUE);
                assert_cu(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f));
                assert_int_equal(v, layouts[k].static_smem);
                assert_cu(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
                assert_int_equal(v, 1024);
                assert_cu(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
                assert_int_equal(v, 32);
                assert_cu(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_PTX_VERSION, f));
                assert_int_equal(v, 90);
                assert_cu(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_BINARY_VERSION, f));
                assert_int_equal(v, 90);
                assert_cu(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
                assert_int_equal(v, 48 * 1024 - layouts[k].static_smem);
        }
        assert_int_equal(cuModuleGetFunction(&fs[0], m, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
        assert_int_equal(cuModuleGetFunction(NULL, m, "fill_u32"), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuModuleUnload(m));
        assert_int_equal(cuModuleGetFunction(&fs[0], m, "fill_u32"), CUDA_ERROR_INVALID_HANDLE);
        assert_int_equal(cuModuleUnload(m), CUDA_ERROR_INVALID_HANDLE);
        assert_int_equal(cuFuncGetName(&name, fs[0]), CUDA_ERROR_INVALID_HANDLE);
}

static void test_func_attributes(void **state)
{
        CUmodule m = load_kernels();
        CUfunction fv = fn(m, "vec_add_f32"), fr = fn(m, "reduce_sum_u32");
        CUmodule owner;
        int v;

        (void)state;
        assert_cu(cuFuncSetAttribute(fv, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 227 * 1024));
        assert_int_equal(cuFuncSetAttribute(fv, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 227 * 1024 + 1),
                         CUDA_ERROR_INVALID_VALUE);
        /* static shared memory counts against the opt-in limit */
        assert_int_equal(cuFuncSetAttribute(fr, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 227 * 1024),
                         CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuFuncSetAttribute(fv, CU_FUNC_ATTRIBUTE_NUM_REGS, 3), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuFuncSetAttribute(fv, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 50));
        assert_cu(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, fv));
        assert_int_equal(v, 50);
        assert_int_equal(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX, fv), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuFuncGetAttribute(NULL, CU_FUNC_ATTRIBUTE_NUM_REGS, fv), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuFuncSetCacheConfig(fv, CU_FUNC_CACHE_PREFER_SHARED));
        assert_int_equal(cuFuncSetCacheConfig(fv, (CUfunc_cache)7), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuFuncGetModule(&owner, fv));
        assert_ptr_equal(owner, m);
        assert_int_equal(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, (CUfunction)(uintptr_t)0x77),
                         CUDA_ERROR_INVALID_HANDLE);
        assert_cu(cuModuleUnload(m));
}

/* ---- twins: every kernel's exact result ---- */

static CUdeviceptr dalloc(size_t n)
{
        CUdeviceptr p;

        assert_cu(cuMemAlloc_v2(&p, n));
        return p;
}

static void launch(CUfunction f, unsigned gx, unsigned gy, unsigned bx, unsigned by, void **args)
{
        assert_cu(cuLaunchKernel(f, gx, gy, 1, bx, by, 1, 0, NULL, args, NULL));
}

static float bits_f(uint32_t b)
{
        float f;

        memcpy(&f, &b, 4);
        return f;
}

static void test_twins_float(void **state)
{
        CUmodule m = load_kernels();
        int n = 100003;
        size_t bytes = (size_t)n * 4;
        float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes), alpha = 1.7182817f;
        CUdeviceptr da = dalloc(bytes), db = dalloc(bytes), dc = dalloc(bytes);
        void *vargs[] = { &da, &db, &dc, &n }, *sargs[] = { &alpha, &da, &db, &n };

        (void)state;
        for (int i = 0; i < n; i++) {
                a[i] = bits_f(rnd() & 0xbfffffff);
                b[i] = bits_f(rnd() & 0xbfffffff);
        }
        for (int i = 0; i < 64; i++)
                a[i] = bits_f(rnd() & 0x807fffff);      /* denormals survive: no FTZ */
        assert_cu(cuMemcpyHtoD_v2(da, a, bytes));
        assert_cu(cuMemcpyHtoD_v2(db, b, bytes));

        launch(fn(m, "vec_add_f32"), 7, 2, 96, 1, vargs);
        assert_cu(cuCtxSynchronize());
        assert_cu(cuMemcpyDtoH_v2(c, dc, bytes));
        for (int i = 0; i < n; i++) {
                volatile float want = a[i] + b[i];

                assert_int_equal(memcmp(&c[i], (const void *)&want, 4), 0);
        }

        launch(fn(m, "saxpy_f32"), 33, 1, 128, 2, sargs);
        assert_cu(cuMemcpyDtoH_v2(c, db, bytes));       /* after the legacy stream */
        for (int i = 0; i < n; i++) {
                float want = fmaf(alpha, a[i], b[i]);

                assert_int_equal(memcmp(&c[i], &want, 4), 0);
        }
        free(a);
        free(b);
        free(c);
        assert_cu(cuMemFree_v2(da));
        assert_cu(cuMemFree_v2(db));
        assert_cu(cuMemFree_v2(dc));
        assert_cu(cuModuleUnload(m));
}

static void test_twins_integer(void **state)
{
        CUmodule m = load_kernels();
        int n = 100003, mn = 45;
        size_t bytes = (size_t)n * 4;
        uint32_t *in = malloc(bytes), *out = malloc(bytes), v = 0xdeadbeef;
        int32_t *A = malloc(bytes), *B = malloc(bytes), *C = malloc(bytes);
        unsigned long long sum = 5, got;
        CUdeviceptr din = dalloc(bytes), dout = dalloc(8), dA = dalloc(bytes), dB = dalloc(bytes),
                    dC = dalloc(bytes);
        void *rargs[] = { &din, &dout, &n }, *margs[] = { &dA, &dB, &dC, &mn }, *fargs[] = { &dC, &v, &n };
        unsigned shapes[][4] = { { 2, 3, 16, 16 }, { 1, 1, 7, 3 }, { 9, 1, 1, 1 } };

        (void)state;
        for (int i = 0; i < n; i++) {
                in[i] = rnd();
                A[i] = (int32_t)rnd();
                B[i] = (int32_t)rnd();
        }
        assert_cu(cuMemcpyHtoD_v2(din, in, bytes));
        assert_cu(cuMemcpyHtoD_v2(dout, &sum, 8));
        launch(fn(m, "reduce_sum_u32"), 13, 1, 100, 1, rargs);
        for (int i = 0; i < n; i++)
                sum += in[i];
        assert_cu(cuMemcpyDtoH_v2(&got, dout, 8));
        assert_int_equal(got, sum);

        assert_cu(cuMemcpyHtoD_v2(dA, A, bytes));
        assert_cu(cuMemcpyHtoD_v2(dB, B, bytes));
        for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
                assert_cu(cuMemsetD8_v2(dC, 0, bytes));
                launch(fn(m, "matmul_tiled_i32"), shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], margs);
                assert_cu(cuMemcpyDtoH_v2(C, dC, (size_t)mn * mn * 4));
                for (int r = 0; r < mn; r++)
                        for (int c = 0; c < mn; c++) {
                                uint32_t acc = 0;

                                for (int j = 0; j < mn; j++)
                                        acc += (uint32_t)A[r * mn + j] * (uint32_t)B[j * mn + c];
                                assert_int_equal((uint32_t)C[r * mn + c], acc);
                        }
        }

        launch(fn(m, "fill_u32"), 3, 1, 64, 1, fargs);
        assert_cu(cuMemcpyDtoH_v2(out, dC, bytes));
        for (int i = 0; i < n; i++)
                assert_int_equal(out[i], v);

        free(in);
        free(out);
        free(A);
        free(B);
        free(C);
        assert_cu(cuModuleUnload(m));
        assert_cu(cuMemFree_v2(din));
        assert_cu(cuMemFree_v2(dout));
        assert_cu(cuMemFree_v2(dA));
        assert_cu(cuMemFree_v2(dB));
        assert_cu(cuMemFree_v2(dC));
}

struct sp {
        int a;
        double b;
        int c[3];
};

static void test_struct_param_and_extra(void **state)
{
        CUmodule m = load_kernels();
        CUfunction f = fn(m, "struct_param");
        struct sp s = { -7, 12345.75, { 1, -2, 100 } };
        CUdeviceptr dout = dalloc(8);
        unsigned char buf[40];
        size_t size = sizeof(buf);
        void *args[] = { &s, &dout };
        void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                          CU_LAUNCH_PARAM_END };
        void *extra_nosize[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_END };
        void *extra_bad[] = { (void *)(uintptr_t)0x77, buf, CU_LAUNCH_PARAM_END };
        long long out;

        (void)state;
        launch(f, 2, 1, 32, 1, args);
        assert_cu(cuMemcpyDtoH_v2(&out, dout, 8));
        assert_int_equal(out, 12437);   /* what an H200 writes */

        s.a = 1000;
        memcpy(buf, &s, 32);
        memcpy(buf + 32, &dout, 8);
        assert_cu(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra));
        assert_cu(cuMemcpyDtoH_v2(&out, dout, 8));
        assert_int_equal(out, (long long)(1000 + 12345.75 + 1 - 2 + 100));
        size = 48;
        assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra), CUDA_ERROR_INVALID_VALUE);
        size = 36;
        assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra_nosize), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra_bad), CUDA_ERROR_INVALID_VALUE);
        size = 40;
        assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, extra), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemFree_v2(dout));
        assert_cu(cuModuleUnload(m));
}

static void test_module_globals(void **state)
{
        CUmodule m = load_kernels();
        CUdeviceptr g, t, dp = dalloc(64 * 4);
        uint32_t bias, p[64];
        int32_t table[4];
        size_t size;
        int n = 64;
        void *args[] = { &dp, &n };

        (void)state;
        assert_cu(cuModuleGetGlobal_v2(&g, &size, m, "g_bias"));
        assert_int_equal(size, 4);
        assert_cu(cuMemcpyDtoH_v2(&bias, g, 4));
        assert_int_equal(bias, 7);
        assert_cu(cuModuleGetGlobal_v2(&t, NULL, m, "g_table"));
        assert_cu(cuModuleGetGlobal_v2(NULL, &size, m, "g_table"));
        assert_int_equal(size, 16);
        assert_cu(cuMemcpyDtoH_v2(table, t, 16));
        assert_int_equal(table[0], 1);
        assert_int_equal(table[1], -2);
        assert_int_equal(table[2], 3);
        assert_int_equal(table[3], 40000);
        assert_int_equal(cuModuleGetGlobal_v2(&g, &size, m, "g_nothing"), CUDA_ERROR_NOT_FOUND);
        assert_int_equal(cuModuleGetGlobal_v2(&g, &size, m, NULL), CUDA_ERROR_INVALID_VALUE);

        /* The kernel reads the variable as it is when it runs. */
        assert_cu(cuMemsetD32_v2(dp, 10, 64));
        launch(fn(m, "add_global_u32"), 5, 1, 33, 1, args);
        assert_cu(cuMemcpyDtoH_v2(p, dp, sizeof(p)));
        for (int i = 0; i < 64; i++)
                assert_int_equal(p[i], 17);
        bias = 1000;
        assert_cu(cuMemcpyHtoD_v2(g, &bias, 4));
        launch(fn(m, "add_global_u32"), 1, 1, 7, 1, args);
        assert_cu(cuMemcpyDtoH_v2(p, dp, sizeof(p)));
        for (int i = 0; i < 64; i++)
                assert_int_equal(p[i], 1017);
        /* Each module has its own copy. */
        {
                CUmodule m2 = load_kernels();
                CUdeviceptr g2;

                assert_cu(cuModuleGetGlobal_v2(&g2, NULL, m2, "g_bias"));
                assert_true(g2 != g);
                assert_cu(cuMemcpyDtoH_v2(&bias, g2, 4));
                assert_int_equal(bias, 7);
                assert_cu(cuModuleUnload(m2));
        }
        /* Variables are device memory, but not cuMemFree's. */
        assert_int_equal(cuMemFree_v2(g), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuModuleUnload(m));
        assert_int_equal(cuMemcpyDtoH_v2(&bias, g, 4), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemFree_v2(dp));
}

/* ---- launch validation ---- */

static const char unknown_ptx[] =
        "//\n.version 8.0\n.target sm_80\n.address_size 64\n"
        ".visible .entry mystery(.param .u64 p)\n{\n ret;\n}\n"
        ".visible .entry empty_with_params(.param .u32 a, .param .align 16 .b8 b[48])\n{\n ret;\n}\n";

static void test_launch_validation(void **state)
{
        CUmodule m = load_kernels(), u;
        CUfunction fv = fn(m, "vec_add_f32"), fe = fn(m, "empty_kernel"), fx, fep;
        CUdeviceptr d = dalloc(1024);
        int n = 16;
        void *args[] = { &d, &d, &d, &n }, *noargs[] = { &d, NULL, &d, &n };
        CUlaunchAttribute at = { .id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION };
        CUlaunchConfig cfg = { .gridDimX = 4, .gridDimY = 1, .gridDimZ = 1,
                               .blockDimX = 32, .blockDimY = 1, .blockDimZ = 1, .attrs = &at, .numAttrs = 1 };
        unsigned a32 = 5;
        unsigned char blob[48] = { 0 };
        void *epargs[] = { &a32, blob };

        (void)state;
        assert_int_equal(cuLaunchKernel(fv, 0, 1, 1, 1, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuLaunchKernel(fv, 1, 1, 1, 0, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuLaunchKernel(fv, 1, 1, 1, 1025, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuLaunchKernel(fv, 1, 1, 1, 1, 1, 65, 0, NULL, args, NULL), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuLaunchKernel(fv, 1, 1, 1, 64, 32, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuLaunchKernel(fv, 1, 65536, 1, 1, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuLaunchKernel(fv, 1, 1, 65536, 1, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuLaunchKernel(fv, 1, 1, 1, 32, 1, 1, 48 * 1024 + 1, NULL, args, NULL),
                         CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuLaunchKernel(fv, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuLaunchKernel(fv, 1, 1, 1, 32, 1, 1, 0, NULL, noargs, NULL), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuLaunchKernel((CUfunction)(uintptr_t)0x1234, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL),
                         CUDA_ERROR_INVALID_HANDLE);
        assert_int_equal(cuLaunchKernel(fv, 1, 1, 1, 1, 1, 1, 0, (CUstream)(uintptr_t)0x99, args, NULL),
                         CUDA_ERROR_INVALID_HANDLE);
        /* Limits are inclusive; opting in raises the shared memory one. */
        assert_cu(cuLaunchKernel(fv, 2147483647u, 65535, 1, 1, 1, 1, 0, NULL, (void *[]){ &d, &d, &d, &(int){ 0 } }, NULL));
        assert_cu(cuLaunchKernel(fv, 1, 1, 1, 16, 1, 64, 48 * 1024, NULL, args, NULL));
        assert_cu(cuFuncSetAttribute(fv, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100 * 1024));
        assert_cu(cuLaunchKernel(fv, 1, 1, 1, 32, 1, 1, 100 * 1024, NULL, args, NULL));
        assert_cu(cuLaunchKernel(fe, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
        assert_cu(cuLaunchCooperativeKernel(fe, 132, 1, 1, 1024, 1, 1, 0, NULL, NULL));
        assert_int_equal(cuLaunchCooperativeKernel(fe, 100000, 1, 1, 32, 1, 1, 0, NULL, NULL),
                         CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);

        /* cuLaunchKernelEx and its attributes */
        at.value.clusterDim.x = 3;
        at.value.clusterDim.y = at.value.clusterDim.z = 1;
        assert_int_equal(cuLaunchKernelEx(&cfg, fe, NULL, NULL), CUDA_ERROR_INVALID_CLUSTER_SIZE);
        at.value.clusterDim.x = 2;
        assert_cu(cuLaunchKernelEx(&cfg, fe, NULL, NULL));
        cfg.gridDimX = 16;
        at.value.clusterDim.x = 16;
        assert_int_equal(cuLaunchKernelEx(&cfg, fe, NULL, NULL), CUDA_ERROR_INVALID_CLUSTER_SIZE);
        at.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
        at.value.priority = -3;
        assert_cu(cuLaunchKernelEx(&cfg, fe, NULL, NULL));
        at.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
        at.value.cooperative = 1;
        cfg.gridDimX = 100000;
        assert_int_equal(cuLaunchKernelEx(&cfg, fe, NULL, NULL), CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
        at.id = (CUlaunchAttributeID)1000;
        assert_int_equal(cuLaunchKernelEx(&cfg, fe, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
        cfg.attrs = NULL;
        assert_int_equal(cuLaunchKernelEx(&cfg, fe, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
        cfg.numAttrs = 0;
        cfg.gridDimX = 1;
        assert_cu(cuLaunchKernelEx(&cfg, fv, args, NULL));
        assert_int_equal(cuLaunchKernelEx(NULL, fv, args, NULL), CUDA_ERROR_INVALID_VALUE);

        /* No twin: NOT_SUPPORTED, unless the name says it does nothing. */
        assert_cu(cuModuleLoadData(&u, unknown_ptx));
        assert_cu(cuModuleGetFunction(&fx, u, "mystery"));
        assert_int_equal(cuLaunchKernel(fx, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_NOT_SUPPORTED);
        assert_cu(cuModuleGetFunction(&fep, u, "empty_with_params"));
        {
                size_t off;

                assert_cu(cuFuncGetParamInfo(fep, 1, &off, NULL));
                assert_int_equal(off, 16);
        }
        assert_cu(cuLaunchKernel(fep, 1, 1, 1, 1, 1, 1, 0, NULL, epargs, NULL));
        assert_cu(cuCtxSynchronize());
        assert_cu(cuModuleUnload(u));
        assert_cu(cuModuleUnload(m));
        assert_cu(cuMemFree_v2(d));
}

/* ---- images ---- */

static void test_images(void **state)
{
        size_t fat_len, zfat_len, cubin_len;
        unsigned char *fat = (unsigned char *)slurp(KERNELS_FATBIN, &fat_len);
        unsigned char *zfat = (unsigned char *)slurp(KERNELS_FATBIN_ZSTD, &zfat_len);
        unsigned char *cubin = (unsigned char *)slurp(KERNELS_CUBIN, &cubin_len);
        struct { int magic; int version; const unsigned long long *data; void *filename; } wrap;
        char log[64] = "junk";
        CUjit_option opts[] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
        void *vals[] = { log, (void *)(uintptr_t)sizeof(log) };
        CUmodule m;
        CUfunction f;
        uint64_t fatsize;

        (void)state;
        assert_non_null(fat);
        assert_non_null(zfat);
        assert_non_null(cubin);
        /* A fatbin holding uncompressed PTX loads and runs. */
        assert_cu(cuModuleLoadData(&m, fat));
        assert_cu(cuModuleGetFunction(&f, m, "fill_u32"));
        assert_cu(cuModuleUnload(m));
        assert_cu(cuModuleLoadFatBinary(&m, fat));
        assert_cu(cuModuleUnload(m));
        wrap.magic = 0x466243b1;
        wrap.version = 1;
        wrap.data = (const unsigned long long *)fat;
        wrap.filename = NULL;
        assert_cu(cuModuleLoadData(&m, &wrap));
        assert_cu(cuModuleUnload(m));
        wrap.data = NULL;
        assert_int_equal(cuModuleLoadData(&m, &wrap), CUDA_ERROR_INVALID_IMAGE);
        /* compressed PTX and SASS: well formed, nothing the sim can run */
        assert_int_equal(cuModuleLoadData(&m, zfat), CUDA_ERROR_NO_BINARY_FOR_GPU);
        assert_int_equal(cuModuleLoadData(&m, cubin), CUDA_ERROR_NO_BINARY_FOR_GPU);
        assert_int_equal(cuModuleLoad(&m, KERNELS_CUBIN), CUDA_ERROR_NO_BINARY_FOR_GPU);
        cubin[18] = 3;  /* e_machine: x86, not CUDA */
        assert_int_equal(cuModuleLoadData(&m, cubin), CUDA_ERROR_INVALID_IMAGE);
        cubin[18] = 190;
        cubin[4] = 9;   /* EI_CLASS */
        assert_int_equal(cuModuleLoadData(&m, cubin), CUDA_ERROR_INVALID_IMAGE);

        /* fatbins whose sizes lie: every read stays inside what was claimed */
        memcpy(&fatsize, fat + 8, 8);
        for (uint64_t cut = 1; cut < fatsize; cut += 1 + cut / 3) {
                uint64_t claimed = cut;

                memcpy(fat + 8, &claimed, 8);
                assert_int_equal(cuModuleLoadData(&m, fat), CUDA_ERROR_INVALID_IMAGE);
        }
        memcpy(fat + 8, &fatsize, 8);
        fat[0x14] = 0xff;       /* entry header size */
        fat[0x15] = 0xff;
        assert_int_equal(cuModuleLoadData(&m, fat), CUDA_ERROR_INVALID_IMAGE);
        fat[6] = 0;     /* fatbin header size < 16 */
        assert_int_equal(cuModuleLoadData(&m, fat), CUDA_ERROR_INVALID_IMAGE);

        /* files */
        assert_cu(cuModuleLoad(&m, KERNELS_PTX));
        assert_cu(cuModuleUnload(m));
        assert_cu(cuModuleLoad(&m, KERNELS_FATBIN));
        assert_cu(cuModuleUnload(m));
        assert_int_equal(cuModuleLoad(&m, "/nonexistent/kernels.ptx"), CUDA_ERROR_FILE_NOT_FOUND);
        assert_int_equal(cuModuleLoad(&m, "/"), CUDA_ERROR_FILE_NOT_FOUND);

        /* options: validated; logs come back empty */
        assert_int_equal(cuModuleLoadDataEx(&m, ptx_text, 1, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuModuleLoadDataEx(&m, ptx_text, 1000, opts, vals), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuModuleLoadDataEx(&m, ptx_text, 2, opts, vals));
        assert_string_equal(log, "");
        assert_cu(cuModuleUnload(m));
        assert_int_equal(cuModuleLoadData(NULL, ptx_text), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuModuleLoadData(&m, NULL), CUDA_ERROR_INVALID_VALUE);
        free(fat);
        free(zfat);
        free(cubin);
}

/* PTX that is recognisably PTX but broken is INVALID_PTX, as an H200's
 * driver says; bytes that are no image at all are INVALID_IMAGE. */
static void test_images_fuzz(void **state)
{
        char *t = malloc(ptx_len + 1);
        CUmodule m;
        size_t ok = 0;

        (void)state;
        for (size_t len = 0; len <= ptx_len; len += 1 + (len % 7 == 0 ? 0 : 5)) {
                CUresult r;

                memcpy(t, ptx_text, len);
                t[len] = '\0';
                r = cuModuleLoadData(&m, t);
                if (r == CUDA_SUCCESS) {
                        size_t end = len;

                        /* Complete only where a statement or body ends,
                         * or in the header, before any declaration. */
                        for (;;) {
                                char *line;

                                while (end > 0 && (t[end - 1] == '\n' || t[end - 1] == ' ' || t[end - 1] == '\t'))
                                        end--;
                                t[end] = '\0';
                                line = strrchr(t, '\n');
                                line = line ? line + 1 : t;
                                while (*line == ' ' || *line == '\t')
                                        line++;
                                if (strncmp(line, "//", 2) != 0)
                                        break;
                                end = (size_t)(line - t);       /* drop a trailing comment */
                        }
                        assert_true(end > 0);
                        assert_true(t[end - 1] == '}' || t[end - 1] == ';' || !strstr(t, ".global"));
                        assert_cu(cuModuleUnload(m));
                        ok++;
                } else if (len < 2) {
                        assert_int_equal(r, CUDA_ERROR_INVALID_IMAGE);
                } else {
                        assert_int_equal(r, CUDA_ERROR_INVALID_PTX);
                }
        }
        assert_true(ok > 0);
        for (int i = 0; i < 2000; i++) {
                unsigned char junk[256];
                size_t n = 64 + rnd() % 192;
                CUresult r;

                for (size_t j = 0; j < n; j++)
                        junk[j] = (unsigned char)rnd();
                junk[n - 1] = '\0';
                r = cuModuleLoadData(&m, junk);
                assert_true(r == CUDA_ERROR_INVALID_IMAGE || r == CUDA_ERROR_INVALID_PTX);
        }
        /* mutations of the real thing never crash */
        for (int i = 0; i < 300; i++) {
                CUresult r;

                memcpy(t, ptx_text, ptx_len + 1);
                for (int k = 0; k < 4; k++)
                        t[rnd() % ptx_len] = (char)(rnd() % 127 + 1);
                r = cuModuleLoadData(&m, t);
                if (r == CUDA_SUCCESS)
                        assert_cu(cuModuleUnload(m));
                else
                        assert_true(r == CUDA_ERROR_INVALID_PTX || r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION ||
                                    r == CUDA_ERROR_INVALID_IMAGE);
        }
        /* version and target */
        memcpy(t, ptx_text, ptx_len + 1);
        memcpy(strstr(t, ".version 9.0"), ".version 9.9", 12);
        assert_int_equal(cuModuleLoadData(&m, t), CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
        memcpy(t, ptx_text, ptx_len + 1);
        memcpy(strstr(t, ".target sm_90"), ".target sm_99", 13);
        assert_int_equal(cuModuleLoadData(&m, t), CUDA_ERROR_INVALID_PTX);
        free(t);
}

/* ---- libraries ---- */

static void test_library(void **state)
{
        CUlibrary lib, lib2;
        CUkernel k, ks[16];
        CUfunction f;
        CUmodule m;
        CUdeviceptr g, d = dalloc(64 * 4);
        size_t size, off;
        const char *name;
        unsigned count, v = 42;
        int n = 64, attr;
        uint32_t out[64];
        void *args[] = { &d, &v, &n };

        (void)state;
        assert_int_equal(cuLibraryLoadData(&lib, ptx_text, NULL, NULL, 1, NULL, NULL, 0), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuLibraryLoadData(&lib, ptx_text, NULL, NULL, 0, NULL, NULL, 0));
        assert_cu(cuLibraryGetKernelCount(&count, lib));
        assert_int_equal(count, 11);
        assert_cu(cuLibraryEnumerateKernels(ks, count, lib));
        assert_cu(cuLibraryGetKernel(&k, lib, "fill_u32"));
        assert_int_equal(cuLibraryGetKernel(&k, lib, "nope"), CUDA_ERROR_NOT_FOUND);
        assert_cu(cuLibraryGetKernel(&k, lib, "fill_u32"));
        assert_cu(cuKernelGetName(&name, k));
        assert_string_equal(name, "fill_u32");
        assert_cu(cuKernelGetParamInfo(k, 2, &off, &size));
        assert_int_equal(off, 12);
        assert_int_equal(size, 4);
        assert_int_equal(cuKernelGetParamInfo(k, 3, &off, &size), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuKernelGetAttribute(&attr, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k, 0));
        assert_int_equal(attr, 1024);
        assert_int_equal(cuKernelGetAttribute(&attr, CU_FUNC_ATTRIBUTE_NUM_REGS, k, 7), CUDA_ERROR_INVALID_DEVICE);
        assert_cu(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536, k, 0));
        assert_cu(cuKernelGetAttribute(&attr, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k, 0));
        assert_int_equal(attr, 65536);
        assert_cu(cuKernelGetLibrary(&lib2, k));
        assert_ptr_equal(lib2, lib);

        /* Launch through the CUfunction, and through the CUkernel itself. */
        assert_cu(cuKernelGetFunction(&f, k));
        assert_cu(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
        assert_cu(cuMemcpyDtoH_v2(out, d, sizeof(out)));
        assert_int_equal(out[63], 42);
        v = 43;
        assert_cu(cuLaunchKernel((CUfunction)k, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
        assert_cu(cuMemcpyDtoH_v2(out, d, sizeof(out)));
        assert_int_equal(out[0], 43);

        assert_cu(cuLibraryGetGlobal(&g, &size, lib, "g_bias"));
        assert_int_equal(size, 4);
        assert_cu(cuMemcpyDtoH_v2(&v, g, 4));
        assert_int_equal(v, 7);
        assert_int_equal(cuLibraryGetGlobal(&g, &size, lib, "none"), CUDA_ERROR_NOT_FOUND);
        assert_cu(cuLibraryGetModule(&m, lib));
        assert_cu(cuModuleGetFunction(&f, m, "spin_ns"));
        assert_int_equal(cuModuleUnload(m), CUDA_ERROR_INVALID_HANDLE);

        assert_cu(cuLibraryLoadFromFile(&lib2, KERNELS_FATBIN, NULL, NULL, 0, NULL, NULL, 0));
        assert_cu(cuLibraryUnload(lib2));
        assert_int_equal(cuLibraryLoadFromFile(&lib2, KERNELS_CUBIN, NULL, NULL, 0, NULL, NULL, 0),
                         CUDA_ERROR_NO_BINARY_FOR_GPU);

        assert_cu(cuLibraryUnload(lib));
        assert_int_equal(cuLibraryUnload(lib), CUDA_ERROR_INVALID_HANDLE);
        assert_int_equal(cuKernelGetName(&name, k), CUDA_ERROR_INVALID_HANDLE);
        assert_int_equal(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL),
                         CUDA_ERROR_INVALID_HANDLE);
        assert_cu(cuMemFree_v2(d));
}

/* ---- occupancy: H100/H200 answers ---- */

static size_t smem_per_block(int block_size)
{
        return (size_t)block_size * 64;
}

static void test_occupancy(void **state)
{
        CUmodule m = load_kernels();
        CUfunction fv = fn(m, "vec_add_f32"), fr = fn(m, "reduce_sum_u32");
        static const int sizes[][2] = { { 1, 32 }, { 64, 32 }, { 100, 16 }, { 256, 8 }, { 1024, 2 }, { 1025, 0 } };
        int nb, grid, bs;
        size_t avail;

        (void)state;
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
                assert_cu(cuOccupancyMaxActiveBlocksPerMultiprocessor(&nb, fv, sizes[i][0], 0));
                assert_int_equal(nb, sizes[i][1]);
        }
        assert_int_equal(cuOccupancyMaxActiveBlocksPerMultiprocessor(&nb, fv, 0, 0), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&nb, fv, 256, 100000,
                                                                       CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE));
        assert_int_equal(nb, 2);
        assert_cu(cuOccupancyMaxPotentialBlockSize(&grid, &bs, fv, NULL, 0, 0));
        assert_int_equal(bs, 1024);
        assert_int_equal(grid, 2 * 132);
        assert_cu(cuOccupancyMaxPotentialBlockSize(&grid, &bs, fv, NULL, 0, 200));
        assert_int_equal(bs, 128);
        assert_int_equal(grid, 16 * 132);
        /* The callback decides: 64 B per thread caps residency. */
        assert_cu(cuOccupancyMaxPotentialBlockSizeWithFlags(&grid, &bs, fv, smem_per_block, 0, 0, 0));
        assert_true(bs > 0 && bs <= 1024);
        assert_int_equal(cuOccupancyMaxPotentialBlockSize(NULL, &bs, fv, NULL, 0, 0), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuOccupancyAvailableDynamicSMemPerBlock(&avail, fv, 2, 256));
        assert_int_equal(avail, 48 * 1024);     /* capped at the function's limit */
        assert_cu(cuFuncSetAttribute(fv, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 227 * 1024));
        assert_cu(cuOccupancyAvailableDynamicSMemPerBlock(&avail, fv, 2, 256));
        assert_int_equal(avail, 116736);        /* what an H200 says */
        assert_cu(cuOccupancyAvailableDynamicSMemPerBlock(&avail, fr, 1, 1024));
        assert_int_equal(avail, 40960);
        assert_int_equal(cuOccupancyAvailableDynamicSMemPerBlock(&avail, fv, 40, 256), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuModuleUnload(m));
}

/* ---- a kernel fault is sticky for its context, and only for it ---- */

static void test_sticky_illegal_address(void **state)
{
        CUcontext primary = *state, ctx;
        CUmodule m;
        CUfunction f;
        CUdeviceptr d, other;
        void *args[] = { &d };

        assert_cu(cuCtxCreate_v2(&ctx, 0, 0));
        assert_cu(cuModuleLoadData(&m, ptx_text));
        assert_cu(cuModuleGetFunction(&f, m, "oob_write_u32"));
        assert_cu(cuMemAlloc_v2(&d, 4));
        assert_cu(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        assert_int_equal(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
        assert_int_equal(cuMemAlloc_v2(&other, 4), CUDA_ERROR_ILLEGAL_ADDRESS);
        assert_int_equal(cuMemcpyHtoD_v2(d, &d, 4), CUDA_ERROR_ILLEGAL_ADDRESS);
        assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_ILLEGAL_ADDRESS);
        assert_int_equal(cuStreamSynchronize(NULL), CUDA_ERROR_ILLEGAL_ADDRESS);
        /* Other contexts carry on. */
        assert_cu(cuCtxPushCurrent_v2(primary));
        assert_cu(cuMemAlloc_v2(&other, 4));
        assert_cu(cuMemFree_v2(other));
        assert_cu(cuCtxPopCurrent_v2(NULL));
        /* Destroying the context clears it; a new one is healthy. */
        assert_cu(cuCtxDestroy_v2(ctx));
        assert_cu(cuCtxCreate_v2(&ctx, 0, 0));
        assert_cu(cuMemAlloc_v2(&other, 4));
        assert_cu(cuCtxDestroy_v2(ctx));
        assert_cu(cuCtxSetCurrent(primary));
}

/* ---- device printf: buffered per context, written at flush points ---- */

static int saved_stdout = -1;

/* fd 1 becomes a memfd until capture_end(). */
static void capture_begin(void)
{
        int fd = memfd_create("printf-capture", MFD_CLOEXEC);

        assert_true(fd >= 0);
        fflush(stdout);
        saved_stdout = dup(STDOUT_FILENO);
        assert_true(saved_stdout >= 0);
        assert_true(dup2(fd, STDOUT_FILENO) == STDOUT_FILENO);
        close(fd);
}

/* What was written to fd 1 since the last call (NUL-terminated, at most
 * cap - 1 bytes), and the capture starts over. */
static size_t capture_take(char *buf, size_t cap)
{
        off_t end = lseek(STDOUT_FILENO, 0, SEEK_CUR);
        ssize_t n = pread(STDOUT_FILENO, buf, end < (off_t)cap - 1 ? (size_t)end : cap - 1, 0);

        buf[n > 0 ? n : 0] = '\0';
        if (ftruncate(STDOUT_FILENO, 0) != 0 || lseek(STDOUT_FILENO, 0, SEEK_SET) != 0)
                buf[0] = '\0';
        return n > 0 ? (size_t)n : 0;
}

static void capture_end(void)
{
        dup2(saved_stdout, STDOUT_FILENO);
        close(saved_stdout);
        saved_stdout = -1;
}

/* The lines printf_hello prints for a grid x block launch, in the sim's
 * order (blocks, then threads, x fastest), as many as fit in cap. */
static void hello_lines(char *buf, size_t cap, unsigned grid, unsigned block, int round)
{
        size_t off = 0;

        buf[0] = '\0';
        for (unsigned b = 0; b < grid; b++)
                for (unsigned t = 0; t < block; t++) {
                        int n = snprintf(buf + off, cap - off, "device says hello from block %u thread %u round %d\n",
                                         b, t, round);

                        if (n < 0 || (size_t)n >= cap - off) {
                                buf[off] = '\0';
                                return;
                        }
                        off += (size_t)n;
                }
}

static void launch_hello(CUfunction f, unsigned grid, unsigned block, CUstream s, int round)
{
        void *args[] = { &round };

        assert_cu(cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, s, args, NULL));
}

static void test_printf(void **state)
{
        CUcontext primary = *state, ctx;
        static char got[5][8192], want[5][8192], fifo[8192];
        CUmodule m = load_kernels();
        CUfunction f = fn(m, "printf_hello");
        CUstream s;
        CUevent ev;
        CUdeviceptr d = dalloc(4);
        uint32_t h;
        size_t limit, nfifo, ndestroy;
        CUresult q;

        assert_cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        assert_cu(cuEventCreate(&ev, 0));
        capture_begin();
        /* a finished kernel has printed nothing yet */
        launch_hello(f, 2, 3, s, 1);
        while ((q = cuStreamQuery(s)) == CUDA_ERROR_NOT_READY)
                usleep(1000);
        capture_take(got[0], sizeof(got[0]));
        /* each flush point writes what was printed, in launch order */
        assert_cu(cuStreamSynchronize(s));
        capture_take(got[1], sizeof(got[1]));
        launch_hello(f, 1, 2, NULL, 2);
        launch_hello(f, 2, 1, NULL, 3);
        assert_cu(cuEventRecord(ev, NULL));
        assert_cu(cuEventSynchronize(ev));
        capture_take(got[2], sizeof(got[2]));
        launch_hello(f, 1, 4, NULL, 4);
        assert_cu(cuMemcpyDtoH_v2(&h, d, sizeof(h)));
        capture_take(got[3], sizeof(got[3]));
        launch_hello(f, 3, 2, s, 5);
        assert_cu(cuCtxSynchronize());
        capture_take(got[4], sizeof(got[4]));
        /* a small FIFO keeps whole lines, the first ones; destroying the
         * context writes what it holds */
        assert_cu(cuCtxCreate_v2(&ctx, 0, 0));
        assert_cu(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 1000));
        assert_cu(cuCtxGetLimit(&limit, CU_LIMIT_PRINTF_FIFO_SIZE));
        CUmodule m2 = load_kernels();
        launch_hello(fn(m2, "printf_hello"), 4, 256, NULL, 6);
        assert_cu(cuCtxSynchronize());
        nfifo = capture_take(fifo, sizeof(fifo));
        launch_hello(fn(m2, "printf_hello"), 1, 1, NULL, 7);
        assert_cu(cuCtxDestroy_v2(ctx));
        ndestroy = capture_take(got[0] + strlen(got[0]), sizeof(got[0]) - strlen(got[0]));
        capture_end();
        assert_cu(cuCtxSetCurrent(primary));

        assert_int_equal(q, CUDA_SUCCESS);
        hello_lines(want[1], sizeof(want[1]), 2, 3, 1);
        hello_lines(want[2], sizeof(want[2]), 1, 2, 2);
        hello_lines(want[2] + strlen(want[2]), sizeof(want[2]) - strlen(want[2]), 2, 1, 3);
        hello_lines(want[3], sizeof(want[3]), 1, 4, 4);
        hello_lines(want[4], sizeof(want[4]), 3, 2, 5);
        for (int i = 1; i < 5; i++)
                assert_string_equal(got[i], want[i]);
        assert_int_equal(limit, 1000);
        hello_lines(want[0], sizeof(want[0]), 4, 256, 6);
        assert_true(nfifo > 900 && nfifo <= 1000);
        assert_memory_equal(fifo, want[0], nfifo);
        assert_int_equal(fifo[nfifo - 1], '\n');
        hello_lines(want[0], sizeof(want[0]), 1, 1, 7);
        assert_int_equal(ndestroy, strlen(want[0]));
        assert_string_equal(got[0], want[0]);       /* nothing before the first flush */

        assert_cu(cuEventDestroy_v2(ev));
        assert_cu(cuStreamDestroy_v2(s));
        assert_cu(cuMemFree_v2(d));
        assert_cu(cuModuleUnload(m));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_ptx_layouts),
                cmocka_unit_test(test_func_attributes),
                cmocka_unit_test(test_twins_float),
                cmocka_unit_test(test_twins_integer),
                cmocka_unit_test(test_struct_param_and_extra),
                cmocka_unit_test(test_module_globals),
                cmocka_unit_test(test_launch_validation),
                cmocka_unit_test(test_images),
                cmocka_unit_test(test_images_fuzz),
                cmocka_unit_test(test_library),
                cmocka_unit_test(test_occupancy),
                cmocka_unit_test(test_sticky_illegal_address),
                cmocka_unit_test(test_printf),
        };
        CUmodule m;

        /* Before cuInit, as the driver: nothing loads. */
        if (cuModuleLoadData(&m, "//") != CUDA_ERROR_NOT_INITIALIZED ||
            cuLibraryLoadData(NULL, "//", NULL, NULL, 0, NULL, NULL, 0) != CUDA_ERROR_NOT_INITIALIZED) {
                fprintf(stderr, "module loading answered before cuInit\n");
                return 1;
        }
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
