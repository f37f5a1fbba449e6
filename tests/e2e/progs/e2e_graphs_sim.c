/* SPDX-License-Identifier: MIT */
/*
 * Stream capture and CUDA graphs, through the driver API only, so that the
 * same program runs against libcuda-sim (meson test sim-graph), through
 * the shim, and on a real GPU. Usage: e2e_graphs_sim KERNELS_PTX
 *
 * It captures work of every kind (kernels, cuLaunchKernelEx, memsets,
 * copies, host functions, event records and waits across streams), builds
 * graphs of every node kind by hand, launches each many times checking
 * the data, and checks the driver's answer to each illegal call. Error
 * codes that differ are listed all at once (EXPECT_ERR); a wrong value
 * stops the run (EXPECT).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "e2e_util.h"

#define N        1024
#define LAUNCHES 50

static CUcontext ctx;
static CUmodule mod;
static CUfunction f_fill, f_saxpy;

static uint32_t bits_of(float f)
{
        uint32_t b;

        memcpy(&b, &f, sizeof(b));
        return b;
}

static void load_module(const char *path)
{
        size_t n;
        uint8_t *buf = e2e_read_path(path, &n);

        CK(cuModuleLoadData(&mod, buf));
        free(buf);
        CK(cuModuleGetFunction(&f_fill, mod, "fill_u32"));
        CK(cuModuleGetFunction(&f_saxpy, mod, "saxpy_f32"));
}

static void fill(CUstream s, CUdeviceptr p, unsigned v, int n)
{
        void *args[] = { &p, &v, &n };

        CK(cuLaunchKernel(f_fill, 4, 1, 1, 128, 1, 1, 0, s, args, NULL));
}

static CUresult fill_r(CUstream s, CUdeviceptr p, unsigned v, int n)
{
        void *args[] = { &p, &v, &n };

        return cuLaunchKernel(f_fill, 4, 1, 1, 128, 1, 1, 0, s, args, NULL);
}

static void saxpy_ex(CUstream s, float a, CUdeviceptr x, CUdeviceptr y, int n)
{
        void *args[] = { &a, &x, &y, &n };
        CUlaunchConfig cfg = { .gridDimX = 4,
                               .gridDimY = 1,
                               .gridDimZ = 1,
                               .blockDimX = 128,
                               .blockDimY = 1,
                               .blockDimZ = 1,
                               .hStream = s };

        CK(cuLaunchKernelEx(&cfg, f_saxpy, args, NULL));
}

static size_t count_nodes(CUgraph g)
{
        size_t n = 0;

        CK(cuGraphGetNodes(g, NULL, &n));
        return n;
}

static size_t count_edges(CUgraph g)
{
        size_t n = 0;

        CK(cuGraphGetEdges(g, NULL, NULL, NULL, &n));
        return n;
}

static size_t count_roots(CUgraph g)
{
        size_t n = 0;

        CK(cuGraphGetRootNodes(g, NULL, &n));
        return n;
}

static CUstreamCaptureStatus capturing(CUstream s)
{
        CUstreamCaptureStatus st;

        CK(cuStreamIsCapturing(s, &st));
        return st;
}

static void check_u32(const uint32_t *p, uint32_t v, size_t n, const char *what)
{
        for (size_t i = 0; i < n; i++)
                if (p[i] != v) {
                        fprintf(stderr, "%s: [%zu] = 0x%x, expected 0x%x\n", what, i, p[i], v);
                        exit(1);
                }
}

static _Atomic int host_calls;

static void CUDA_CB count_host(void *arg)
{
        (void)arg;
        host_calls++;
}

/* ---- capture of one stream, every kind of work ---- */

static void test_capture_linear(void)
{
        CUstream s;
        CUdeviceptr x, y;
        uint32_t *h;
        CUgraph g;
        CUgraphExec ge;
        CUgraphNode nodes[8];
        CUgraphNodeType t;
        size_t n = 8;
        static const CUgraphNodeType want[] = { CU_GRAPH_NODE_TYPE_MEMSET, CU_GRAPH_NODE_TYPE_MEMSET,
                                                CU_GRAPH_NODE_TYPE_KERNEL, CU_GRAPH_NODE_TYPE_MEMCPY,
                                                CU_GRAPH_NODE_TYPE_HOST };

        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CK(cuMemAlloc(&x, N * 4));
        CK(cuMemAlloc(&y, N * 4));
        CK(cuMemAllocHost((void **)&h, N * 4));
        memset(h, 0, N * 4);
        host_calls = 0;

        EXPECT(capturing(s) == CU_STREAM_CAPTURE_STATUS_NONE);
        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        EXPECT(capturing(s) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
        CK(cuMemsetD32Async(x, bits_of(1.0f), N, s));
        CK(cuMemsetD32Async(y, bits_of(2.0f), N, s));
        saxpy_ex(s, 3.0f, x, y, N);
        CK(cuMemcpyDtoHAsync(h, y, N * 4, s));
        CK(cuLaunchHostFunc(s, count_host, NULL));
        CK(cuStreamEndCapture(s, &g));
        EXPECT(capturing(s) == CU_STREAM_CAPTURE_STATUS_NONE);
        /* Nothing ran while capturing. */
        usleep(20000);
        EXPECT(host_calls == 0);
        check_u32(h, 0, N, "before launch");

        CK(cuGraphGetNodes(g, nodes, &n));
        EXPECT(n == 5);
        for (size_t i = 0; i < n; i++) {
                CK(cuGraphNodeGetType(nodes[i], &t));
                EXPECT(t == want[i]);
        }
        EXPECT(count_edges(g) == 4 && count_roots(g) == 1);
        {
                CUDA_KERNEL_NODE_PARAMS kp;

                /* The captured launch's parameters, as copied then. */
                CK(cuGraphKernelNodeGetParams(nodes[2], &kp));
                EXPECT(kp.func == f_saxpy && kp.gridDimX == 4 && kp.blockDimX == 128);
                EXPECT(*(float *)kp.kernelParams[0] == 3.0f && *(CUdeviceptr *)kp.kernelParams[2] == y);
        }

        CK(cuGraphInstantiate(&ge, g, 0));
        for (int i = 1; i <= LAUNCHES; i++) {
                memset(h, 0, N * 4);
                CK(cuGraphLaunch(ge, s));
                CK(cuStreamSynchronize(s));
                EXPECT(host_calls == i);
                check_u32(h, bits_of(5.0f), N, "captured saxpy");
        }
        CK(cuGraphExecDestroy(ge));
        CK(cuGraphDestroy(g));
        CK(cuMemFreeHost(h));
        CK(cuMemFree(x));
        CK(cuMemFree(y));
        CK(cuStreamDestroy(s));
}

/* ---- fork and join across streams ---- */

static void test_capture_fork_join(void)
{
        CUstream s1, s2;
        CUevent fork, join;
        CUdeviceptr a, b;
        uint32_t *h;
        CUgraph g;
        CUgraphExec ge;

        CK(cuStreamCreate(&s1, 0));
        CK(cuStreamCreate(&s2, 0));
        CK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
        CK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
        CK(cuMemAlloc(&a, N * 4));
        CK(cuMemAlloc(&b, N * 4));
        CK(cuMemAllocHost((void **)&h, 2 * N * 4));

        CK(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
        CK(cuMemsetD32Async(a, 0, N, s1));
        CK(cuEventRecord(fork, s1));
        EXPECT_ERR(cuEventQuery(fork), CUDA_ERROR_CAPTURED_EVENT);
        CK(cuStreamWaitEvent(s2, fork, 0));
        EXPECT(capturing(s2) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
        fill(s2, b, 7, N);
        fill(s1, a, 9, N);
        CK(cuEventRecord(join, s2));
        CK(cuStreamWaitEvent(s1, join, 0));
        /* The forked stream may not end the capture. */
        EXPECT_ERR(cuStreamEndCapture(s2, &g), CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
        CK(cuMemcpyDtoHAsync(h, a, N * 4, s1));
        CK(cuMemcpyDtoHAsync(h + N, b, N * 4, s1));
        CK(cuStreamEndCapture(s1, &g));
        EXPECT(capturing(s2) == CU_STREAM_CAPTURE_STATUS_NONE);
        /* memset -> {fill b, fill a} -> copy a -> copy b */
        EXPECT(count_nodes(g) == 5 && count_roots(g) == 1 && count_edges(g) == 5);

        CK(cuGraphInstantiate(&ge, g, 0));
        for (int i = 0; i < LAUNCHES; i++) {
                memset(h, 0, 2 * N * 4);
                CK(cuGraphLaunch(ge, s1));
                CK(cuStreamSynchronize(s1));
                check_u32(h, 9, N, "fork/join a");
                check_u32(h + N, 7, N, "fork/join b");
        }
        CK(cuGraphExecDestroy(ge));
        CK(cuGraphDestroy(g));

        /* A fork never joined. */
        CK(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
        CK(cuEventRecord(fork, s1));
        CK(cuStreamWaitEvent(s2, fork, 0));
        fill(s2, b, 1, N);
        g = (CUgraph)1;
        EXPECT_ERR(cuStreamEndCapture(s1, &g), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
        EXPECT(g == NULL);
        EXPECT(capturing(s1) == CU_STREAM_CAPTURE_STATUS_NONE);
        EXPECT(capturing(s2) == CU_STREAM_CAPTURE_STATUS_NONE);
        /* The event's capture is over. */
        CK(cuEventRecord(fork, s1));
        CK(cuEventSynchronize(fork));

        CK(cuMemFreeHost(h));
        CK(cuMemFree(a));
        CK(cuMemFree(b));
        CK(cuEventDestroy(fork));
        CK(cuEventDestroy(join));
        CK(cuStreamDestroy(s1));
        CK(cuStreamDestroy(s2));
}

/* ---- illegal calls during a capture ---- */

/* Begins a global capture on s, runs bad (which must fail with want),
 * then checks the capture was invalidated and ends it. */
static void invalidated_by(CUstream s, CUresult got, CUresult want, const char *what)
{
        CUgraph g = (CUgraph)1;

        if (got != want) {
                fprintf(stderr, "%s returned %d, expected %d\n", what, (int)got, (int)want);
                e2e_failures++;
        }
        EXPECT(capturing(s) == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
        EXPECT_ERR(fill_r(s, 0, 0, 0), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        EXPECT_ERR(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        EXPECT(g == NULL);
        EXPECT(capturing(s) == CU_STREAM_CAPTURE_STATUS_NONE);
}

struct thread_call {
        CUresult (*fn)(void *);
        void *arg;
        CUstreamCaptureMode mode; /* the thread's, set first */
        CUresult r;
};

static void *thread_main(void *p)
{
        struct thread_call *c = p;
        CUstreamCaptureMode m = c->mode;

        CK(cuCtxSetCurrent(ctx));
        CK(cuThreadExchangeStreamCaptureMode(&m));
        c->r = c->fn(c->arg);
        return NULL;
}

static CUresult on_thread(CUresult (*fn)(void *), void *arg, CUstreamCaptureMode mode)
{
        struct thread_call c = { .fn = fn, .arg = arg, .mode = mode };
        pthread_t t;

        EXPECT(pthread_create(&t, NULL, thread_main, &c) == 0);
        pthread_join(t, NULL);
        return c.r;
}

static CUresult do_alloc(void *arg)
{
        CUdeviceptr p;
        CUresult r = cuMemAlloc(&p, 4096);

        (void)arg;
        if (r == CUDA_SUCCESS)
                CK(cuMemFree(p));
        return r;
}

static CUresult do_end(void *arg)
{
        CUgraph g;
        CUresult r = cuStreamEndCapture((CUstream)arg, &g);

        if (r == CUDA_SUCCESS)
                CK(cuGraphDestroy(g));
        return r;
}

static void test_capture_errors(void)
{
        CUstream s, nb, other;
        CUevent e;
        CUdeviceptr d;
        CUgraph g;
        uint32_t v;

        CK(cuStreamCreate(&s, 0));
        CK(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
        CK(cuStreamCreate(&other, 0));
        CK(cuEventCreate(&e, 0));
        CK(cuMemAlloc(&d, N * 4));

        EXPECT_ERR(cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        EXPECT_ERR(cuStreamBeginCapture(s, (CUstreamCaptureMode)7), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);

        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        EXPECT_ERR(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE);
        invalidated_by(s, cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuStreamSynchronize");

        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        invalidated_by(s, cuStreamQuery(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuStreamQuery");

        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        invalidated_by(s, cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuCtxSynchronize");

        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        invalidated_by(s, cuStreamSynchronize(NULL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "legacy sync");

        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        invalidated_by(s, cuMemcpyHtoD(d, &v, 4), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuMemcpyHtoD");

        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        invalidated_by(s, do_alloc(NULL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuMemAlloc (global)");

        /* Work on the legacy stream while a blocking stream captures. */
        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        {
                CUstreamCaptureStatus st;

                EXPECT_ERR(cuStreamIsCapturing(NULL, &st), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
        }
        invalidated_by(s, fill_r(NULL, d, 1, N), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "legacy launch");

        /* A non-blocking stream's capture leaves the legacy stream be. */
        CK(cuStreamBeginCapture(nb, CU_STREAM_CAPTURE_MODE_RELAXED));
        fill(NULL, d, 3, N);
        EXPECT(capturing(NULL) == CU_STREAM_CAPTURE_STATUS_NONE);
        CK(cuStreamEndCapture(nb, &g));
        CK(cuGraphDestroy(g));
        CK(cuStreamSynchronize(NULL));

        /* A callback cannot be captured; an event from outside needs
         * CU_EVENT_WAIT_EXTERNAL. */
        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        invalidated_by(s, cuStreamAddCallback(s, (CUstreamCallback)(void *)count_host, NULL, 0),
                       CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuStreamAddCallback");
        CK(cuEventRecord(e, other));
        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        invalidated_by(s, cuStreamWaitEvent(s, e, 0), CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "outside event");

        /* Relaxed: unsafe calls are allowed. */
        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
        EXPECT_ERR(do_alloc(NULL), CUDA_SUCCESS);
        EXPECT(capturing(s) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
        EXPECT_ERR(on_thread(do_end, s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
        EXPECT(capturing(s) == CU_STREAM_CAPTURE_STATUS_NONE);

        /* Thread-local: only this thread is held back. */
        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
        EXPECT_ERR(on_thread(do_alloc, NULL, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
        EXPECT_ERR(on_thread(do_end, s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
        EXPECT(capturing(s) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
        invalidated_by(s, do_alloc(NULL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuMemAlloc (thread-local)");

        /* Global: every thread in global mode is held back, one in
         * relaxed mode is not. */
        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        EXPECT_ERR(on_thread(do_alloc, NULL, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
        EXPECT(capturing(s) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
        EXPECT_ERR(on_thread(do_end, s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
        invalidated_by(s, on_thread(do_alloc, NULL, CU_STREAM_CAPTURE_MODE_GLOBAL),
                       CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuMemAlloc on another thread (global)");

        /* This thread's own mode decides for it. */
        {
                CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;

                CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
                CK(cuThreadExchangeStreamCaptureMode(&m));
                EXPECT(m == CU_STREAM_CAPTURE_MODE_GLOBAL);
                EXPECT_ERR(do_alloc(NULL), CUDA_SUCCESS);
                CK(cuThreadExchangeStreamCaptureMode(&m));
                EXPECT(m == CU_STREAM_CAPTURE_MODE_RELAXED);
                CK(cuStreamEndCapture(s, &g));
                CK(cuGraphDestroy(g));
                /* driver 580 takes any value */
                m = (CUstreamCaptureMode)9;
                EXPECT_ERR(cuThreadExchangeStreamCaptureMode(&m), CUDA_SUCCESS);
                CK(cuThreadExchangeStreamCaptureMode(&m));
                EXPECT(m == (CUstreamCaptureMode)9);
        }

        CK(cuMemFree(d));
        CK(cuEventDestroy(e));
        CK(cuStreamDestroy(s));
        CK(cuStreamDestroy(nb));
        CK(cuStreamDestroy(other));
}

/* ---- capture info, dependency updates, external events, graph launch ---- */

static void test_capture_info(void)
{
        CUstream s;
        CUevent ext;
        CUdeviceptr d;
        CUgraph g, got, inner;
        CUgraphExec ge, inner_exec;
        const CUgraphNode *deps;
        const CUgraphEdgeData *edges;
        CUstreamCaptureStatus st;
        cuuint64_t id, id2;
        CUgraphNode first, nodes[8];
        CUgraphNodeType t;
        size_t n;
        uint32_t h[N];

        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CK(cuEventCreate(&ext, 0));
        CK(cuMemAlloc(&d, N * 4));

        /* A graph to launch inside the capture. */
        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        fill(s, d, 0x55, N);
        CK(cuStreamEndCapture(s, &inner));
        CK(cuGraphInstantiate(&inner_exec, inner, 0));

        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        CK(cuStreamGetCaptureInfo(s, &st, &id, &got, &deps, &edges, &n));
        EXPECT(st == CU_STREAM_CAPTURE_STATUS_ACTIVE && n == 0);
        CK(cuMemsetD32Async(d, 1, N, s));
        CK(cuStreamGetCaptureInfo(s, &st, &id2, &got, &deps, &edges, &n));
        EXPECT(id2 == id && n == 1 && edges != NULL);
        first = deps[0];
        CK(cuGraphNodeGetType(first, &t));
        EXPECT(t == CU_GRAPH_NODE_TYPE_MEMSET);
        /* Drop the dependency: the next node is a second root. */
        CK(cuStreamUpdateCaptureDependencies(s, NULL, NULL, 0, CU_STREAM_SET_CAPTURE_DEPENDENCIES));
        CK(cuStreamGetCaptureInfo(s, &st, &id2, &got, &deps, &edges, &n));
        EXPECT(n == 0);
        CK(cuEventRecordWithFlags(ext, s, CU_EVENT_RECORD_EXTERNAL));
        CK(cuStreamUpdateCaptureDependencies(s, &first, NULL, 1, CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
        CK(cuStreamGetCaptureInfo(s, &st, &id2, &got, &deps, &edges, &n));
        EXPECT(n == 2);
        CK(cuStreamWaitEvent(s, ext, CU_EVENT_WAIT_EXTERNAL));
        CK(cuGraphLaunch(inner_exec, s));
        /* The capture's graph is the capture's until it ends. */
        EXPECT_ERR(cuGraphDestroy(got), CUDA_ERROR_ILLEGAL_STATE);
        CK(cuStreamEndCapture(s, &g));
        EXPECT(got == g);
        n = 8;
        CK(cuGraphGetNodes(g, nodes, &n));
        EXPECT(n == 4 && count_roots(g) == 2);
        CK(cuGraphNodeGetType(nodes[1], &t));
        EXPECT(t == CU_GRAPH_NODE_TYPE_EVENT_RECORD);
        CK(cuGraphNodeGetType(nodes[2], &t));
        EXPECT(t == CU_GRAPH_NODE_TYPE_WAIT_EVENT);
        CK(cuGraphNodeGetType(nodes[3], &t));
        EXPECT(t == CU_GRAPH_NODE_TYPE_GRAPH);
        EXPECT_ERR(cuStreamGetCaptureInfo(s, &st, &id2, NULL, NULL, NULL, NULL), CUDA_SUCCESS);
        EXPECT(st == CU_STREAM_CAPTURE_STATUS_NONE);

        CK(cuGraphInstantiate(&ge, g, 0));
        for (int i = 0; i < LAUNCHES; i++) {
                CK(cuGraphLaunch(ge, s));
                CK(cuEventSynchronize(ext)); /* the record node fires */
                CK(cuStreamSynchronize(s));
                CK(cuMemcpyDtoH(h, d, sizeof(h)));
                check_u32(h, 0x55, N, "captured graph launch");
        }
        CK(cuGraphExecDestroy(ge));
        CK(cuGraphDestroy(g));
        CK(cuGraphExecDestroy(inner_exec));
        CK(cuGraphDestroy(inner));
        CK(cuMemFree(d));
        CK(cuEventDestroy(ext));
        CK(cuStreamDestroy(s));
}

static void test_capture_to_graph(void)
{
        CUstream s;
        CUgraph g;
        CUgraphNode root;
        CUgraphExec ge;
        CUdeviceptr d;
        uint32_t h[N];

        CK(cuStreamCreate(&s, 0));
        CK(cuMemAlloc(&d, N * 4));
        CK(cuGraphCreate(&g, 0));
        CK(cuGraphAddEmptyNode(&root, g, NULL, 0));
        CK(cuStreamBeginCaptureToGraph(s, g, &root, NULL, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
        fill(s, d, 0xabc, N);
        {
                CUgraph out;

                CK(cuStreamEndCapture(s, &out));
                EXPECT(out == g);
        }
        EXPECT(count_nodes(g) == 2 && count_edges(g) == 1);
        CK(cuGraphInstantiate(&ge, g, 0));
        CK(cuGraphLaunch(ge, s));
        CK(cuStreamSynchronize(s));
        CK(cuMemcpyDtoH(h, d, sizeof(h)));
        check_u32(h, 0xabc, N, "capture to graph");
        CK(cuGraphExecDestroy(ge));
        CK(cuGraphDestroy(g));
        CK(cuMemFree(d));
        CK(cuStreamDestroy(s));
}

static void setup(const char *ptx)
{
        CUdevice dev;

        CK(cuInit(0));
        CK(cuDeviceGet(&dev, 0));
        CK(cuDevicePrimaryCtxRetain(&ctx, dev));
        CK(cuCtxSetCurrent(ctx));
        load_module(ptx);
}

/* ---- graphs built by hand: every node kind ---- */

static _Atomic int ext_flag, ordered_ok;

static void CUDA_CB slow_set_flag(void *arg)
{
        (void)arg;
        usleep(20000);
        ext_flag = 1;
}

static void CUDA_CB check_flag(void *arg)
{
        (void)arg;
        if (ext_flag)
                ordered_ok++;
}

static CUgraphNode add_fill(CUgraph g, const CUgraphNode *deps, size_t n, CUdeviceptr *p, unsigned *v, int *cnt)
{
        void *args[] = { p, v, cnt };
        CUDA_KERNEL_NODE_PARAMS k = { .func = f_fill,
                                      .gridDimX = 2,
                                      .gridDimY = 1,
                                      .gridDimZ = 1,
                                      .blockDimX = 64,
                                      .blockDimY = 1,
                                      .blockDimZ = 1,
                                      .kernelParams = args };
        CUgraphNode node;

        CK(cuGraphAddKernelNode(&node, g, deps, n, &k));
        return node;
}

static CUDA_MEMCPY3D dtoh(void *dst, CUdeviceptr src, size_t bytes)
{
        CUDA_MEMCPY3D c = { .srcMemoryType = CU_MEMORYTYPE_DEVICE,
                            .srcDevice = src,
                            .srcPitch = bytes,
                            .dstMemoryType = CU_MEMORYTYPE_HOST,
                            .dstHost = dst,
                            .dstPitch = bytes,
                            .WidthInBytes = bytes,
                            .Height = 1,
                            .Depth = 1 };

        return c;
}

static void test_manual_nodes(void)
{
        CUstream s, s2;
        CUevent rec, ext;
        CUdeviceptr d;
        uint32_t *h;
        unsigned v = 0x1234;
        int cnt = N;
        CUgraph g, child, g2;
        CUgraphExec ge;
        CUgraphNode ms, k, cp, host, er, ew, empty, cg, nodes[16], from[16], to[16];
        CUDA_MEMSET_NODE_PARAMS m = { .value = 0xee, .elementSize = 4, .width = N, .height = 1 };
        CUDA_HOST_NODE_PARAMS hp = { .fn = count_host };
        CUDA_KERNEL_NODE_PARAMS kp;
        CUDA_MEMSET_NODE_PARAMS mget;
        CUDA_HOST_NODE_PARAMS hget;
        CUDA_MEMCPY3D c;
        CUevent got_e;
        CUgraphNodeType t;
        size_t n;

        CK(cuStreamCreate(&s, 0));
        CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
        CK(cuEventCreate(&rec, 0));
        CK(cuEventCreate(&ext, CU_EVENT_DISABLE_TIMING));
        CK(cuMemAlloc(&d, N * 4));
        CK(cuMemAllocHost((void **)&h, N * 4));
        CK(cuGraphCreate(&g, 0));
        EXPECT_ERR(cuGraphCreate(&g2, 1), CUDA_ERROR_INVALID_VALUE);

        /* wait(ext) -> memset -> kernel -> copy -> host -> record; empty
         * and a child graph off the kernel. */
        CK(cuGraphAddEventWaitNode(&ew, g, NULL, 0, ext));
        m.dst = d;
        CK(cuGraphAddMemsetNode(&ms, g, &ew, 1, &m, ctx));
        k = add_fill(g, &ms, 1, &d, &v, &cnt);
        v = 0xdead; /* the node took its own copy */
        c = dtoh(h, d, N * 4);
        CK(cuGraphAddMemcpyNode(&cp, g, &k, 1, &c, ctx));
        CK(cuGraphAddHostNode(&host, g, &cp, 1, &hp));
        CK(cuGraphAddEventRecordNode(&er, g, &host, 1, rec));
        CK(cuGraphAddEmptyNode(&empty, g, &k, 1));
        CK(cuGraphCreate(&child, 0));
        {
                CUgraphNode cn;
                CUDA_HOST_NODE_PARAMS chk = { .fn = check_flag };

                CK(cuGraphAddHostNode(&cn, child, NULL, 0, &chk));
        }
        CK(cuGraphAddChildGraphNode(&cg, g, &empty, 1, child));
        CK(cuGraphDestroy(child)); /* the node has its own clone */

        /* Structure queries. */
        EXPECT(count_nodes(g) == 8 && count_roots(g) == 1 && count_edges(g) == 7);
        n = 16;
        CK(cuGraphGetEdges(g, from, to, NULL, &n));
        EXPECT(n == 7);
        n = 16;
        CK(cuGraphNodeGetDependentNodes(k, nodes, NULL, &n));
        EXPECT(n == 2 && nodes[0] == cp && nodes[1] == empty);
        n = 1;
        CK(cuGraphNodeGetDependencies(ms, nodes, NULL, &n));
        EXPECT(n == 1 && nodes[0] == ew);
        n = 4;
        CK(cuGraphGetRootNodes(g, nodes, &n));
        EXPECT(n == 1 && nodes[0] == ew && nodes[1] == NULL);
        CK(cuGraphNodeGetType(cg, &t));
        EXPECT(t == CU_GRAPH_NODE_TYPE_GRAPH);
        CK(cuGraphNodeGetType(ew, &t));
        EXPECT(t == CU_GRAPH_NODE_TYPE_WAIT_EVENT);
        CK(cuGraphNodeGetType(empty, &t));
        EXPECT(t == CU_GRAPH_NODE_TYPE_EMPTY);

        /* Parameters read back. */
        CK(cuGraphKernelNodeGetParams(k, &kp));
        EXPECT(kp.func == f_fill && kp.gridDimX == 2 && kp.blockDimX == 64);
        EXPECT(*(unsigned *)kp.kernelParams[1] == 0x1234 && *(int *)kp.kernelParams[2] == N);
        CK(cuGraphMemsetNodeGetParams(ms, &mget));
        EXPECT(mget.dst == d && mget.value == 0xee && mget.width == N && mget.elementSize == 4);
        CK(cuGraphHostNodeGetParams(host, &hget));
        EXPECT(hget.fn == count_host);
        CK(cuGraphEventRecordNodeGetEvent(er, &got_e));
        EXPECT(got_e == rec);
        CK(cuGraphEventWaitNodeGetEvent(ew, &got_e));
        EXPECT(got_e == ext);
        {
                CUDA_MEMCPY3D cget;
                CUgraph cgraph;

                CK(cuGraphMemcpyNodeGetParams(cp, &cget));
                EXPECT(cget.dstHost == h && cget.srcDevice == d && cget.WidthInBytes == N * 4);
                CK(cuGraphChildGraphNodeGetGraph(cg, &cgraph));
                EXPECT(count_nodes(cgraph) == 1);
                EXPECT_ERR(cuGraphDestroy(cgraph), CUDA_ERROR_INVALID_VALUE); /* the node owns it */
        }
        EXPECT_ERR(cuGraphKernelNodeGetParams(ms, &kp), CUDA_ERROR_INVALID_VALUE);

        CK(cuGraphDebugDotPrint(g, "/tmp/e2e_graphs_sim.dot", CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE));
        EXPECT(access("/tmp/e2e_graphs_sim.dot", R_OK) == 0);
        unlink("/tmp/e2e_graphs_sim.dot");

        /* Launch many times: the wait node holds everything until ext,
         * recorded on s2 after a slow host function, has fired. */
        CK(cuGraphInstantiate(&ge, g, 0));
        host_calls = 0;
        ordered_ok = 0;
        for (int i = 1; i <= LAUNCHES; i++) {
                memset(h, 0, N * 4);
                ext_flag = 0;
                CK(cuLaunchHostFunc(s2, slow_set_flag, NULL));
                CK(cuEventRecord(ext, s2));
                CK(cuGraphLaunch(ge, s));
                CK(cuEventSynchronize(rec));
                EXPECT(host_calls == i);
                check_u32(h, 0x1234, N, "manual graph");
                CK(cuStreamSynchronize(s));
                EXPECT(ordered_ok == i);
        }

        /* Changing the graph does not change the executable graph. */
        v = 0x777;
        {
                void *args[] = { &d, &v, &cnt };
                CUDA_KERNEL_NODE_PARAMS k2 = kp;

                k2.kernelParams = args;
                CK(cuGraphKernelNodeSetParams(k, &k2));
                CK(cuGraphLaunch(ge, s));
                CK(cuStreamSynchronize(s));
                check_u32(h, 0x1234, N, "exec unchanged by graph change");
                /* ... but its own setter does. */
                CK(cuGraphExecKernelNodeSetParams(ge, k, &k2));
                CK(cuGraphLaunch(ge, s));
                CK(cuStreamSynchronize(s));
                check_u32(h, 0x777, N, "exec kernel node set");
        }
        /* Disabled: the kernel does nothing; the memset's value shows. */
        {
                unsigned on = 9;

                CK(cuGraphNodeSetEnabled(ge, k, 0));
                CK(cuGraphNodeGetEnabled(ge, k, &on));
                EXPECT(on == 0);
                CK(cuGraphLaunch(ge, s));
                CK(cuStreamSynchronize(s));
                check_u32(h, 0xee, N, "disabled kernel");
                CK(cuGraphNodeSetEnabled(ge, k, 1));
                EXPECT_ERR(cuGraphNodeSetEnabled(ge, host, 0), CUDA_ERROR_INVALID_VALUE);
        }
        /* Exec setters of the other kinds. */
        m.value = 0x42;
        CK(cuGraphExecMemsetNodeSetParams(ge, ms, &m, ctx));
        CK(cuGraphNodeSetEnabled(ge, k, 0));
        CK(cuGraphLaunch(ge, s));
        CK(cuStreamSynchronize(s));
        check_u32(h, 0x42, N, "exec memset node set");
        CK(cuGraphNodeSetEnabled(ge, k, 1));
        CK(cuGraphExecEventRecordNodeSetEvent(ge, er, ext));
        CK(cuGraphExecEventWaitNodeSetEvent(ge, ew, rec));
        CK(cuGraphExecHostNodeSetParams(ge, host, &hp));
        {
                CUgraphNodeParams np = { .type = CU_GRAPH_NODE_TYPE_MEMSET };

                np.memset = (CUDA_MEMSET_NODE_PARAMS_v2){
                        .dst = d, .value = 0x99, .elementSize = 4, .width = N, .height = 1, .ctx = ctx
                };
                CK(cuGraphExecNodeSetParams(ge, ms, &np));
                np.type = CU_GRAPH_NODE_TYPE_HOST;
                EXPECT_ERR(cuGraphExecNodeSetParams(ge, ms, &np), CUDA_ERROR_INVALID_VALUE);
        }
        CK(cuGraphLaunch(ge, s));
        CK(cuStreamSynchronize(s));
        check_u32(h, 0x777, N, "after exec sets");
        CK(cuGraphExecDestroy(ge));

        /* Update from a graph of the same shape. */
        CK(cuGraphClone(&g2, g));
        {
                CUgraphNode ms2;
                CUgraphExecUpdateResultInfo info;
                CUgraphNode extra;

                CK(cuGraphNodeFindInClone(&ms2, ms, g2));
                m.value = 0x31;
                CK(cuGraphMemsetNodeSetParams(ms2, &m));
                CK(cuGraphInstantiate(&ge, g, 0));
                CK(cuGraphExecUpdate(ge, g2, &info));
                EXPECT(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS);
                CK(cuGraphNodeSetEnabled(ge, k, 0));
                CK(cuGraphLaunch(ge, s2)); /* ext is not recorded again: no wait */
                CK(cuStreamSynchronize(s2));
                check_u32(h, 0x31, N, "exec update");
                CK(cuGraphAddEmptyNode(&extra, g2, NULL, 0));
                EXPECT_ERR(cuGraphExecUpdate(ge, g2, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
                EXPECT(info.result == CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
                CK(cuGraphExecDestroy(ge));
        }

        /* Edges: add, duplicate, remove, absent, across graphs; a cycle. */
        EXPECT_ERR(cuGraphAddDependencies(g, &ms, &k, NULL, 1), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuGraphRemoveDependencies(g, &ms, &host, NULL, 1), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuGraphAddDependencies(g2, &ms, &k, NULL, 1), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuGraphAddEmptyNode(&empty, g2, &k, 1), CUDA_ERROR_INVALID_VALUE);
        CK(cuGraphAddDependencies(g, &er, &ew, NULL, 1)); /* closes a cycle */
        {
                CUDA_GRAPH_INSTANTIATE_PARAMS ip = { 0 };

                EXPECT_ERR(cuGraphInstantiateWithParams(&ge, g, &ip), CUDA_ERROR_INVALID_VALUE);
                EXPECT(ip.result_out == CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE);
        }
        CK(cuGraphRemoveDependencies(g, &er, &ew, NULL, 1));
        CK(cuGraphInstantiateWithFlags(&ge, g, CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD));
        CK(cuGraphUpload(ge, s));
        CK(cuGraphExecDestroy(ge));

        /* Destroying a node takes its edges. */
        CK(cuGraphDestroyNode(empty));
        EXPECT(count_nodes(g) == 7 && count_edges(g) == 5);
        EXPECT_ERR(cuGraphNodeGetType(empty, &t), CUDA_ERROR_INVALID_VALUE);

        CK(cuGraphDestroy(g2));
        CK(cuGraphDestroy(g));
        EXPECT_ERR(cuGraphDestroy(g), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuGraphNodeGetType(k, &t), CUDA_ERROR_INVALID_VALUE);
        CK(cuMemFreeHost(h));
        CK(cuMemFree(d));
        CK(cuEventDestroy(rec));
        CK(cuEventDestroy(ext));
        CK(cuStreamDestroy(s));
        CK(cuStreamDestroy(s2));
}

/* Memory alloc and free nodes: the address is known at once, the memory
 * is real for the nodes after the alloc node, and free nodes check it. */
static void test_mem_nodes(void)
{
        CUstream s;
        CUgraph g, c;
        CUgraphExec ge, ge2;
        CUgraphNode an, k, cp, fn;
        CUDA_MEM_ALLOC_NODE_PARAMS ap = {
                .poolProps = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                               .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } },
                .bytesize = N * 4,
        };
        CUDA_MEM_ALLOC_NODE_PARAMS aget;
        CUDA_MEMCPY3D cpy;
        CUdeviceptr fget, p;
        unsigned v = 0xfeed;
        int cnt = N;
        uint32_t *h;

        CK(cuStreamCreate(&s, 0));
        CK(cuMemAllocHost((void **)&h, N * 4));
        CK(cuGraphCreate(&g, 0));
        CK(cuGraphAddMemAllocNode(&an, g, NULL, 0, &ap));
        p = ap.dptr;
        EXPECT(p != 0);
        k = add_fill(g, &an, 1, &p, &v, &cnt);
        cpy = dtoh(h, p, N * 4);
        CK(cuGraphAddMemcpyNode(&cp, g, &k, 1, &cpy, ctx));
        EXPECT_ERR(cuGraphAddMemFreeNode(&fn, g, &cp, 1, p + 4), CUDA_ERROR_INVALID_VALUE);
        CK(cuGraphAddMemFreeNode(&fn, g, &cp, 1, p));
        EXPECT_ERR(cuGraphAddMemFreeNode(&fn, g, &cp, 1, p), CUDA_ERROR_INVALID_VALUE); /* freed once */
        CK(cuGraphMemAllocNodeGetParams(an, &aget));
        EXPECT(aget.dptr == p && aget.bytesize == N * 4);
        CK(cuGraphMemFreeNodeGetParams(fn, &fget));
        EXPECT(fget == p);
        EXPECT_ERR(cuGraphClone(&c, g), CUDA_ERROR_NOT_SUPPORTED);
        EXPECT_ERR(cuGraphDestroyNode(k), CUDA_ERROR_NOT_SUPPORTED);

        CK(cuGraphInstantiate(&ge, g, 0));
        EXPECT_ERR(cuGraphInstantiate(&ge2, g, 0), CUDA_ERROR_INVALID_VALUE);
        for (int i = 0; i < LAUNCHES; i++) {
                memset(h, 0, N * 4);
                CK(cuGraphLaunch(ge, s));
                CK(cuStreamSynchronize(s));
                check_u32(h, 0xfeed, N, "graph memory");
        }
        {
                cuuint64_t used = 0, zero = 0;

                CK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &used));
                EXPECT(used >= N * 4);
                CK(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &zero));
                EXPECT_ERR(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &zero),
                           CUDA_ERROR_INVALID_VALUE);
                EXPECT_ERR(cuDeviceGetGraphMemAttribute(99, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &used),
                           CUDA_ERROR_INVALID_DEVICE);
                CK(cuDeviceGraphMemTrim(0));
        }
        CK(cuGraphExecDestroy(ge));
        CK(cuGraphInstantiate(&ge, g, 0)); /* one at a time is fine */
        /* Both destroyed while the launch waits behind a slow host
         * function: the work still runs, on memory still there. */
        memset(h, 0, N * 4);
        CK(cuLaunchHostFunc(s, slow_set_flag, NULL));
        CK(cuGraphLaunch(ge, s));
        CK(cuGraphExecDestroy(ge));
        CK(cuGraphDestroy(g));
        CK(cuStreamSynchronize(s));
        check_u32(h, 0xfeed, N, "graph memory after destroy");
        CK(cuMemFreeHost(h));
        CK(cuStreamDestroy(s));
}

/* cuGraphAddNode with the generic parameters; bad parameters. */
static void test_generic_and_bad(void)
{
        CUgraph g;
        CUgraphNode a, b;
        CUgraphNodeParams np = { .type = CU_GRAPH_NODE_TYPE_EMPTY };
        CUdeviceptr d;
        CUDA_MEMSET_NODE_PARAMS m = { .value = 1, .elementSize = 3, .width = 4, .height = 1 };

        CK(cuMemAlloc(&d, 4096));
        CK(cuGraphCreate(&g, 0));
        CK(cuGraphAddNode(&a, g, NULL, NULL, 0, &np));
        CK(cuGraphAddNode(&b, g, &a, NULL, 1, &np));
        EXPECT_ERR(cuGraphAddNode(&b, g, (CUgraphNode[]){ a, a }, NULL, 2, &np), CUDA_ERROR_INVALID_VALUE);
        np.reserved0[0] = 1;
        EXPECT_ERR(cuGraphAddNode(&b, g, NULL, NULL, 0, &np), CUDA_ERROR_INVALID_VALUE);
        np.reserved0[0] = 0;
        np.type = CU_GRAPH_NODE_TYPE_HOST;
        EXPECT_ERR(cuGraphAddNode(&b, g, NULL, NULL, 0, &np), CUDA_ERROR_INVALID_VALUE); /* no fn */
        m.dst = d;
        EXPECT_ERR(cuGraphAddMemsetNode(&b, g, NULL, 0, &m, ctx), CUDA_ERROR_INVALID_VALUE);
        m.elementSize = 4;
        m.width = 2048; /* past the allocation */
        EXPECT_ERR(cuGraphAddMemsetNode(&b, g, NULL, 0, &m, ctx), CUDA_ERROR_INVALID_VALUE);
        {
                CUDA_KERNEL_NODE_PARAMS k = { .func = f_fill,
                                              .gridDimX = 0,
                                              .gridDimY = 1,
                                              .gridDimZ = 1,
                                              .blockDimX = 1,
                                              .blockDimY = 1,
                                              .blockDimZ = 1 };

                EXPECT_ERR(cuGraphAddKernelNode(&b, g, NULL, 0, &k), CUDA_ERROR_INVALID_VALUE);
        }
        EXPECT_ERR(cuGraphAddEventRecordNode(&b, g, NULL, 0, (CUevent)(uintptr_t)0x1234), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuGraphAddChildGraphNode(&b, g, NULL, 0, g), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuGraphLaunch((CUgraphExec)(uintptr_t)0x1234, NULL), CUDA_ERROR_INVALID_VALUE);
        EXPECT(count_nodes(g) == 2);
        CK(cuGraphDestroy(g));
        CK(cuMemFree(d));
}

static _Atomic int other_calls;

static void CUDA_CB count_other(void *arg)
{
        (void)arg;
        other_calls++;
}

static CUgraph fill_graph(CUdeviceptr *p, unsigned *v, int *cnt, size_t nodes)
{
        CUgraph g;
        CUgraphNode prev = NULL;

        CK(cuGraphCreate(&g, 0));
        for (size_t i = 0; i < nodes; i++)
                prev = add_fill(g, prev ? &prev : NULL, prev ? 1 : 0, p, v, cnt);
        return g;
}

/* The graph setters, and the executable graph's child and memcpy
 * setters. */
static void test_setters(void)
{
        CUstream s;
        CUevent e1, e2, got;
        CUdeviceptr d, d2;
        uint32_t *h;
        unsigned v = 5;
        int cnt = N;
        CUgraph g, child, same, other;
        CUgraphExec ge;
        CUgraphNode ms, cg, cp, hn, er, ew, deps[2];
        CUDA_MEMSET_NODE_PARAMS m = { .value = 1, .elementSize = 4, .width = N, .height = 1 };
        CUDA_HOST_NODE_PARAMS hp = { .fn = count_host }, hp2 = { .fn = count_other };
        CUDA_MEMCPY3D c;
        CUgraphNodeParams np = { .type = CU_GRAPH_NODE_TYPE_MEMSET };

        CK(cuStreamCreate(&s, 0));
        CK(cuEventCreate(&e1, 0));
        CK(cuEventCreate(&e2, 0));
        CK(cuMemAlloc(&d, N * 4));
        CK(cuMemAlloc(&d2, N * 4));
        CK(cuMemAllocHost((void **)&h, N * 4));
        CK(cuGraphCreate(&g, 0));
        m.dst = d;
        CK(cuGraphAddMemsetNode(&ms, g, NULL, 0, &m, ctx));
        child = fill_graph(&d2, &v, &cnt, 1);
        CK(cuGraphAddChildGraphNode(&cg, g, NULL, 0, child));
        deps[0] = ms;
        deps[1] = cg;
        c = dtoh(h, d, N * 4);
        CK(cuGraphAddMemcpyNode(&cp, g, deps, 2, &c, ctx));
        CK(cuGraphAddHostNode(&hn, g, &cp, 1, &hp));
        CK(cuGraphAddEventRecordNode(&er, g, &hn, 1, e1));
        CK(cuGraphAddEventWaitNode(&ew, g, NULL, 0, e1));

        /* Graph setters. */
        c = dtoh(h, d2, N * 4);
        CK(cuGraphMemcpyNodeSetParams(cp, &c));
        np.memset = (CUDA_MEMSET_NODE_PARAMS_v2){
                .dst = d, .value = 2, .elementSize = 4, .width = N, .height = 1, .ctx = ctx
        };
        CK(cuGraphNodeSetParams(ms, &np));
        np.type = CU_GRAPH_NODE_TYPE_HOST;
        EXPECT_ERR(cuGraphNodeSetParams(ms, &np), CUDA_ERROR_INVALID_VALUE);
        CK(cuGraphHostNodeSetParams(hn, &hp2));
        CK(cuGraphEventRecordNodeSetEvent(er, e2));
        CK(cuGraphEventRecordNodeGetEvent(er, &got));
        EXPECT(got == e2);
        CK(cuGraphEventWaitNodeSetEvent(ew, e2));
        CK(cuGraphEventWaitNodeGetEvent(ew, &got));
        EXPECT(got == e2);
        {
                CUDA_MEMSET_NODE_PARAMS mg;

                CK(cuGraphMemsetNodeGetParams(ms, &mg));
                EXPECT(mg.value == 2);
        }

        CK(cuGraphInstantiate(&ge, g, 0));
        other_calls = host_calls = 0;
        CK(cuGraphLaunch(ge, s));
        CK(cuStreamSynchronize(s));
        check_u32(h, 5, N, "memcpy node set to the child's buffer");
        EXPECT(other_calls == 1 && host_calls == 0);

        /* The child, swapped for one of the same shape; not another. */
        v = 8;
        same = fill_graph(&d2, &v, &cnt, 1);
        other = fill_graph(&d2, &v, &cnt, 2);
        EXPECT_ERR(cuGraphExecChildGraphNodeSetParams(ge, cg, other),
                   CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE); /* driver 580 */
        CK(cuGraphExecChildGraphNodeSetParams(ge, cg, same));
        CK(cuGraphLaunch(ge, s));
        CK(cuStreamSynchronize(s));
        check_u32(h, 8, N, "exec child graph set");
        c = dtoh(h, d, N * 4);
        CK(cuGraphExecMemcpyNodeSetParams(ge, cp, &c, ctx));
        CK(cuGraphLaunch(ge, s));
        CK(cuStreamSynchronize(s));
        check_u32(h, 2, N, "exec memcpy set");
        EXPECT(other_calls == 3);

        CK(cuGraphExecDestroy(ge));
        CK(cuGraphDestroy(same));
        CK(cuGraphDestroy(other));
        CK(cuGraphDestroy(child));
        CK(cuGraphDestroy(g));
        CK(cuMemFreeHost(h));
        CK(cuMemFree(d));
        CK(cuMemFree(d2));
        CK(cuEventDestroy(e1));
        CK(cuEventDestroy(e2));
        CK(cuStreamDestroy(s));
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                fprintf(stderr, "usage: %s KERNELS_PTX\n", argv[0]);
                return 2;
        }
        setup(argv[1]);
        test_capture_linear();
        test_capture_fork_join();
        test_capture_errors();
        test_capture_info();
        test_capture_to_graph();
        test_manual_nodes();
        test_mem_nodes();
        test_generic_and_bad();
        test_setters();
        CK(cuCtxSynchronize());
        if (e2e_failures) {
                fprintf(stderr, "e2e_graphs_sim: %d unexpected error codes\n", e2e_failures);
                return 1;
        }
        printf("e2e_graphs_sim: OK\n");
        return 0;
}
