/* SPDX-License-Identifier: MIT */
/*
 * Issue 14, item 3: JIT linking and JIT options on the real driver, and
 * through lupine (tests/gpu/model.sh compares the outputs line by line).
 *
 * Two PTX inputs (tests/kernels/jit_a.ptx and jit_b.ptx, embedded below:
 * jit_a's kernel calls a function and reads a variable jit_b defines) are
 * linked with cuLinkCreate and log buffers, the cubin is loaded and run,
 * and a kernel is loaded from PTX with cuModuleLoadDataEx and options. At
 * the midpoint (model_hold) a linked module with a changed variable, its
 * output, a module loaded with options and a link state with one of its
 * two inputs added are alive. Afterwards they are used again and the half
 * link completed; then the bad inputs: what the driver answers is printed
 * (error codes, whether a log was written, how the size options relate to
 * the logs), so that a difference from lupine shows.
 *
 * Log contents and wall times are not printed: they are not the same from
 * run to run. Printed instead: whether a log is empty, and whether its
 * size option reads 0, strlen, strlen + 1 or something else.
 */
#include "model_util.h"

static const char ptx_a[] =
        ".version 9.0\n"
        ".target sm_90\n"
        ".address_size 64\n"
        " // .globl jit_axpb\n"
        ".extern .func (.param .b32 func_retval0) jit_twice\n"
        "(\n"
        " .param .b32 jit_twice_param_0\n"
        ")\n"
        ";\n"
        ".extern .global .align 4 .u32 jit_bias;\n"
        ".visible .entry jit_axpb(\n"
        " .param .u64 jit_axpb_param_0,\n"
        " .param .u64 jit_axpb_param_1,\n"
        " .param .u32 jit_axpb_param_2\n"
        ")\n"
        "{\n"
        " .reg .pred %p<2>;\n"
        " .reg .b32 %r<10>;\n"
        " .reg .b64 %rd<8>;\n"
        " ld.param.u64 %rd1, [jit_axpb_param_0];\n"
        " ld.param.u64 %rd2, [jit_axpb_param_1];\n"
        " ld.param.u32 %r2, [jit_axpb_param_2];\n"
        " mov.u32 %r3, %ctaid.x;\n"
        " mov.u32 %r4, %ntid.x;\n"
        " mov.u32 %r5, %tid.x;\n"
        " mad.lo.s32 %r1, %r3, %r4, %r5;\n"
        " setp.ge.s32 %p1, %r1, %r2;\n"
        " @%p1 bra $L__BB0_2;\n"
        " cvta.to.global.u64 %rd3, %rd2;\n"
        " mul.wide.s32 %rd4, %r1, 4;\n"
        " add.s64 %rd5, %rd3, %rd4;\n"
        " ld.global.u32 %r6, [%rd5];\n"
        " { // callseq 0, 0\n"
        " .reg .b32 temp_param_reg;\n"
        " .param .b32 param0;\n"
        " st.param.b32 [param0+0], %r6;\n"
        " .param .b32 retval0;\n"
        " call.uni (retval0),\n"
        " jit_twice,\n"
        " (\n"
        " param0\n"
        " );\n"
        " ld.param.b32 %r7, [retval0+0];\n"
        " } // callseq 0\n"
        " ld.global.u32 %r8, [jit_bias];\n"
        " add.s32 %r9, %r8, %r7;\n"
        " cvta.to.global.u64 %rd6, %rd1;\n"
        " add.s64 %rd7, %rd6, %rd4;\n"
        " st.global.u32 [%rd7], %r9;\n"
        "$L__BB0_2:\n"
        " ret;\n"
        "}\n";

static const char ptx_b[] =
        ".version 9.0\n"
        ".target sm_90\n"
        ".address_size 64\n"
        " // .globl jit_twice\n"
        ".visible .global .align 4 .u32 jit_bias = 7;\n"
        ".visible .func (.param .b32 func_retval0) jit_twice(\n"
        " .param .b32 jit_twice_param_0\n"
        ")\n"
        "{\n"
        " .reg .b32 %r<3>;\n"
        " ld.param.u32 %r1, [jit_twice_param_0];\n"
        " shl.b32 %r2, %r1, 1;\n"
        " st.param.b32 [func_retval0+0], %r2;\n"
        " ret;\n"
        "}\n";

static const char ptx_fill[] =
        ".version 9.0\n"
        ".target sm_90\n"
        ".address_size 64\n"
        " // .globl jit_fill\n"
        ".visible .entry jit_fill(\n"
        " .param .u64 jit_fill_param_0,\n"
        " .param .u32 jit_fill_param_1,\n"
        " .param .u32 jit_fill_param_2\n"
        ")\n"
        "{\n"
        " .reg .pred %p<2>;\n"
        " .reg .b32 %r<8>;\n"
        " .reg .b64 %rd<5>;\n"
        " ld.param.u64 %rd1, [jit_fill_param_0];\n"
        " ld.param.u32 %r2, [jit_fill_param_1];\n"
        " ld.param.u32 %r3, [jit_fill_param_2];\n"
        " mov.u32 %r4, %ctaid.x;\n"
        " mov.u32 %r5, %ntid.x;\n"
        " mov.u32 %r6, %tid.x;\n"
        " mad.lo.s32 %r1, %r4, %r5, %r6;\n"
        " setp.ge.s32 %p1, %r1, %r3;\n"
        " @%p1 bra $L__BB0_2;\n"
        " cvta.to.global.u64 %rd2, %rd1;\n"
        " mul.wide.s32 %rd3, %r1, 4;\n"
        " add.s64 %rd4, %rd2, %rd3;\n"
        " add.s32 %r7, %r1, %r2;\n"
        " st.global.u32 [%rd4], %r7;\n"
        "$L__BB0_2:\n"
        " ret;\n"
        "}\n";

enum { N = 4096, LOG = 8192 };

struct logs {
        char info[LOG], error[LOG];
        CUjit_option opt[8];
        void *val[8];
};

static void logs_init(struct logs *l)
{
        CUjit_option o[8] = { CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
                              CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_WALL_TIME, CU_JIT_LOG_VERBOSE,
                              CU_JIT_OPTIMIZATION_LEVEL, CU_JIT_TARGET_FROM_CUCONTEXT };
        memset(l, 0, sizeof(*l));
        memset(l->info, 'x', LOG);
        memset(l->error, 'x', LOG);
        memcpy(l->opt, o, sizeof(o));
        l->val[0] = l->info;
        l->val[1] = (void *)(uintptr_t)LOG;
        l->val[2] = l->error;
        l->val[3] = (void *)(uintptr_t)LOG;
        l->val[5] = (void *)(uintptr_t)1;
        l->val[6] = (void *)(uintptr_t)3;
}

/* How a size option relates to its log. */
static const char *rel(const char *log, void *size)
{
        size_t n = (size_t)(uintptr_t)size;
        if (!memchr(log, 0, LOG))
                return "not terminated";
        size_t k = strlen(log);
        if (n == 0)
                return k ? "size 0, log not empty" : "size 0, empty";
        if (n == k)
                return "size strlen";
        if (n == k + 1)
                return "size strlen+1";
        return "size other";
}

static void show(const char *what, CUresult r, const struct logs *l)
{
        float wall;
        memcpy(&wall, &l->val[4], sizeof(wall));
        printf("%s: %d; info log %s (%s); error log %s (%s); wall time %s\n", what, (int)r,
               l->info[0] ? "written" : "empty", rel(l->info, l->val[1]), l->error[0] ? "written" : "empty",
               rel(l->error, l->val[3]), wall >= 0.0f ? "set" : "negative");
}

static unsigned long long sum_dev(CUdeviceptr p)
{
        static unsigned h[N];
        unsigned long long s = 0;
        CU_CHECK(cuMemcpyDtoH(h, p, sizeof(h)));
        for (int i = 0; i < N; i++)
                s += (unsigned long long)h[i] * (unsigned)(i % 7 + 1);
        return s;
}

/* out = 2 * in + bias, in[i] = 3i */
static void axpb(CUmodule m, CUdeviceptr out, CUdeviceptr in)
{
        CUfunction f;
        int n = N;
        void *params[] = { &out, &in, &n };
        CU_CHECK(cuModuleGetFunction(&f, m, "jit_axpb"));
        CU_CHECK(cuLaunchKernel(f, N / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL));
        CU_CHECK(cuCtxSynchronize());
}

static void fill(CUmodule m, CUdeviceptr p, unsigned v)
{
        CUfunction f;
        int n = N;
        void *params[] = { &p, &v, &n };
        CU_CHECK(cuModuleGetFunction(&f, m, "jit_fill"));
        CU_CHECK(cuLaunchKernel(f, N / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL));
        CU_CHECK(cuCtxSynchronize());
}

static unsigned bias(CUmodule m, int set, unsigned v)
{
        CUdeviceptr g;
        size_t bytes;
        unsigned got = 0;
        CU_CHECK(cuModuleGetGlobal(&g, &bytes, m, "jit_bias"));
        if (set)
                CU_CHECK(cuMemcpyHtoD(g, &v, 4));
        CU_CHECK(cuMemcpyDtoH(&got, g, 4));
        return got;
}

static CUresult add(CUlinkState st, CUjitInputType t, const void *p, size_t n, const char *name)
{
        return cuLinkAddData(st, t, (void *)p, n, name, 0, NULL, NULL);
}

static void bad_inputs(void)
{
        static const char garbage[] = "\x7f\x01\x02\x03 neither PTX, nor a cubin, nor a fatbin";
        static const char junk[] = "junk that is not PTX at all {";
        static const char broken[] = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry broken( {\n";
        static struct logs l;
        CUlinkState st;
        void *cubin, *again;
        size_t size, size2;
        CUresult r;

        logs_init(&l);
        CU_CHECK(cuLinkCreate(8, l.opt, l.val, &st));
        show("bad: junk as PTX", add(st, CU_JIT_INPUT_PTX, junk, sizeof(junk), "junk"), &l);
        printf("bad: junk as cubin: %d\n", (int)add(st, CU_JIT_INPUT_CUBIN, garbage, sizeof(garbage), "g"));
        printf("bad: junk as fatbin: %d\n", (int)add(st, CU_JIT_INPUT_FATBINARY, garbage, sizeof(garbage), "g"));
        printf("bad: junk as object: %d\n", (int)add(st, CU_JIT_INPUT_OBJECT, garbage, sizeof(garbage), "g"));
        printf("bad: junk as library: %d\n", (int)add(st, CU_JIT_INPUT_LIBRARY, garbage, sizeof(garbage), "g"));
        printf("bad: input type 99: %d\n", (int)add(st, (CUjitInputType)99, garbage, sizeof(garbage), "g"));
        printf("bad: empty input: %d\n", (int)add(st, CU_JIT_INPUT_PTX, junk, 0, "g"));
        printf("bad: missing file: %d\n", (int)cuLinkAddFile(st, CU_JIT_INPUT_PTX, "/nonexistent.ptx", 0, NULL, NULL));
        r = add(st, CU_JIT_INPUT_PTX, ptx_a, sizeof(ptx_a), "jit_a.ptx");
        printf("bad: after those, jit_a: %d\n", (int)r);
        logs_init(&l);
        CUlinkState st2;
        CU_CHECK(cuLinkCreate(8, l.opt, l.val, &st2));
        CU_CHECK(add(st2, CU_JIT_INPUT_PTX, ptx_a, sizeof(ptx_a), "jit_a.ptx"));
        r = cuLinkComplete(st2, &cubin, &size);
        show("bad: jit_a alone, complete", r, &l);
        printf("bad: its error log names jit_twice: %s\n", strstr(l.error, "jit_twice") ? "yes" : "no");
        CU_CHECK(cuLinkDestroy(st2));
        CU_CHECK(cuLinkDestroy(st));

        logs_init(&l);
        CU_CHECK(cuLinkCreate(8, l.opt, l.val, &st));
        CU_CHECK(add(st, CU_JIT_INPUT_PTX, ptx_b, sizeof(ptx_b), "b1"));
        r = add(st, CU_JIT_INPUT_PTX, ptx_b, sizeof(ptx_b), "b2");
        printf("bad: jit_b twice, second add: %d\n", (int)r);
        if (r == CUDA_SUCCESS)
                show("bad: jit_b twice, complete", cuLinkComplete(st, &cubin, &size), &l);
        CU_CHECK(cuLinkDestroy(st));

        /* completing twice, adding after completing */
        logs_init(&l);
        CU_CHECK(cuLinkCreate(8, l.opt, l.val, &st));
        CU_CHECK(add(st, CU_JIT_INPUT_PTX, ptx_a, sizeof(ptx_a), "jit_a.ptx"));
        CU_CHECK(add(st, CU_JIT_INPUT_PTX, ptx_b, sizeof(ptx_b), "jit_b.ptx"));
        CU_CHECK(cuLinkComplete(st, &cubin, &size));
        r = cuLinkComplete(st, &again, &size2);
        printf("second complete: %d, same cubin: %s\n", (int)r,
               r == CUDA_SUCCESS && again == cubin && size2 == size ? "yes" : "no");
        printf("add after complete: %d\n", (int)add(st, CU_JIT_INPUT_PTX, ptx_b, sizeof(ptx_b), "late"));
        CU_CHECK(cuLinkDestroy(st));

        CUmodule m;
        logs_init(&l);
        show("bad: broken PTX, cuModuleLoadDataEx", cuModuleLoadDataEx(&m, broken, 8, l.opt, l.val), &l);
        printf("bad: cuLinkCreate(0, NULL, NULL, NULL): %d\n", (int)cuLinkCreate(0, NULL, NULL, NULL));
        CUjit_option bogus[1] = { (CUjit_option)1000 };
        void *bogusv[1] = { NULL };
        printf("bad: an unknown option: %d\n", (int)cuLinkCreate(1, bogus, bogusv, &st));
}

int main(int argc, char **argv)
{
        static struct logs l1, l2, l3;
        CUcontext ctx;
        CUlinkState done, half;
        CUmodule linked, loaded, m;
        CUdeviceptr in, out, buf, tmp;
        void *cubin;
        size_t size;
        static unsigned h[N];

        CU_CHECK(cuInit(0));
        CU_CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
        CU_CHECK(cuCtxSetCurrent(ctx));
        CU_CHECK(cuMemAlloc(&in, N * 4));
        CU_CHECK(cuMemAlloc(&out, N * 4));
        CU_CHECK(cuMemAlloc(&buf, N * 4));
        CU_CHECK(cuMemAlloc(&tmp, N * 4));
        for (int i = 0; i < N; i++)
                h[i] = 3u * (unsigned)i;
        CU_CHECK(cuMemcpyHtoD(in, h, sizeof(h)));

        /* link jit_a and jit_b */
        logs_init(&l1);
        CU_CHECK(cuLinkCreate(8, l1.opt, l1.val, &done));
        show("link: add jit_a", add(done, CU_JIT_INPUT_PTX, ptx_a, sizeof(ptx_a), "jit_a.ptx"), &l1);
        CUjit_option io[1] = { CU_JIT_OPTIMIZATION_LEVEL };
        void *iv[1] = { (void *)(uintptr_t)2 };
        show("link: add jit_b (-O2)", cuLinkAddData(done, CU_JIT_INPUT_PTX, (void *)ptx_b, sizeof(ptx_b), "jit_b.ptx",
                                                    1, io, iv), &l1);
        CUresult r = cuLinkComplete(done, &cubin, &size);
        show("link: complete", r, &l1);
        CU_CHECK(r);
        printf("link: cubin %s, ELF: %s\n", size > 0 ? "not empty" : "empty",
               size >= 4 && memcmp(cubin, "\x7f" "ELF", 4) == 0 ? "yes" : "no");
        CU_CHECK(cuModuleLoadData(&linked, cubin));
        printf("linked: jit_bias %u\n", bias(linked, 0, 0));
        axpb(linked, out, in);
        printf("linked: axpb sum %llu\n", sum_dev(out));
        printf("linked: jit_bias set to %u\n", bias(linked, 1, 11));
        axpb(linked, out, in);
        printf("linked: axpb sum %llu\n", sum_dev(out));

        /* a module from PTX with options */
        logs_init(&l2);
        r = cuModuleLoadDataEx(&loaded, ptx_fill, 8, l2.opt, l2.val);
        show("cuModuleLoadDataEx with options", r, &l2);
        CU_CHECK(r);
        fill(loaded, buf, 1000);
        printf("loaded: fill sum %llu\n", sum_dev(buf));

        /* a link half done */
        logs_init(&l3);
        CU_CHECK(cuLinkCreate(8, l3.opt, l3.val, &half));
        show("half: add jit_a", add(half, CU_JIT_INPUT_PTX, ptx_a, sizeof(ptx_a), "jit_a.ptx"), &l3);

        model_hold(argc, argv, "a linked module and its output, a module loaded with JIT options, a half-done link");

        printf("after: axpb output sum %llu, fill output sum %llu\n", sum_dev(out), sum_dev(buf));
        printf("after: jit_bias %u\n", bias(linked, 0, 0));
        axpb(linked, tmp, in);
        printf("after: axpb sum %llu\n", sum_dev(tmp));
        fill(loaded, tmp, 2000);
        printf("after: fill sum %llu\n", sum_dev(tmp));
        show("half: add jit_b", add(half, CU_JIT_INPUT_PTX, ptx_b, sizeof(ptx_b), "jit_b.ptx"), &l3);
        void *cubin2;
        size_t size2;
        r = cuLinkComplete(half, &cubin2, &size2);
        show("half: complete", r, &l3);
        CU_CHECK(r);
        CU_CHECK(cuModuleLoadData(&m, cubin2));
        axpb(m, tmp, in);
        printf("half: axpb sum %llu (jit_bias %u)\n", sum_dev(tmp), bias(m, 0, 0));
        CU_CHECK(cuModuleUnload(m));
        CU_CHECK(cuModuleLoadData(&m, cubin));
        axpb(m, tmp, in);
        printf("done's cubin again: axpb sum %llu\n", sum_dev(tmp));
        CU_CHECK(cuModuleUnload(m));
        CU_CHECK(cuLinkDestroy(half));
        CU_CHECK(cuLinkDestroy(done));
        CU_CHECK(cuModuleUnload(linked));
        CU_CHECK(cuModuleUnload(loaded));

        bad_inputs();
        printf("done\n");
        return 0;
}
