/* SPDX-License-Identifier: MIT */
/*
 * Stream capture and CUDA graphs, with every result checked exactly. Runs
 * through lupine (sim or GPU) and, on the GPU machine, straight on the real
 * driver as a baseline: what is asserted is the driver's documented
 * behaviour, except where marked `through_lupine`.
 *
 * usage: e2e_graphs DIR             the checks
 *        e2e_graphs DIR restart     builds graphs, prints "ready", then for
 *                                   each line read from stdin relaunches
 *                                   them and checks ("again N" per line)
 */
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "e2e_util.h"

static const char *dir;
static int on_sim, through_lupine;
static CUcontext ctx;
static CUmodule mod;
static CUfunction f_saxpy, f_fill;

#define N 4099

static unsigned fbits(float f)
{
        unsigned u;
        memcpy(&u, &f, 4);
        return u;
}

static void saxpy(float a, CUdeviceptr x, CUdeviceptr y, CUstream s)
{
        int n = N;
        void *p[] = { &a, &x, &y, &n };
        CK(cuLaunchKernel(f_saxpy, 8, 1, 1, 128, 1, 1, 0, s, p, NULL));
}

static void fill(CUdeviceptr d, unsigned v, int n, CUstream s)
{
        void *p[] = { &d, &v, &n };
        CK(cuLaunchKernel(f_fill, 1, 1, 1, 64, 1, 1, 0, s, p, NULL));
}

static void expect_all(CUdeviceptr d, float want, const char *what)
{
        static float h[N];
        CK(cuMemcpyDtoH(h, d, sizeof(h)));
        for (int i = 0; i < N; i++)
                if (h[i] != want) {
                        fprintf(stderr, "%s[%d] = %g, expected %g\n", what, i, h[i], want);
                        exit(1);
                }
}

/* The fork/join graph: x = 2 (memset, s1); fork to s2: y = 1 (memset),
 * y = 3x + y = 7 (kernel); join: z = y (DtoD copy, s1), z = x + z = 9,
 * acc = x + acc (grows by 2 per launch); g_table[0..3] = 77 (a kernel
 * whose pointer parameter is a module global). */
struct bufs {
        CUdeviceptr x, y, z, acc, table;
};

static CUgraph capture_forkjoin(const struct bufs *b, CUstream s1, CUstream s2, CUevent fork, CUevent join)
{
        CUstreamCaptureStatus st;
        cuuint64_t id1 = 0, id2 = 0;
        CUgraph g = NULL, g_info = NULL;
        CK(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
        CK(cuStreamIsCapturing(s1, &st));
        EXPECT(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
        CK(cuStreamIsCapturing(s2, &st));
        EXPECT(st == CU_STREAM_CAPTURE_STATUS_NONE);
        EXPECT_ERR(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE);
        CK(cuMemsetD32Async(b->x, fbits(2.0f), N, s1));
        CK(cuEventRecord(fork, s1));
        CK(cuStreamWaitEvent(s2, fork, 0));
        CK(cuStreamIsCapturing(s2, &st));
        EXPECT(st == CU_STREAM_CAPTURE_STATUS_ACTIVE); /* joined through the event */
        CK(cuStreamGetCaptureInfo(s1, &st, &id1, &g_info, NULL, NULL, NULL));
        CK(cuStreamGetCaptureInfo(s2, &st, &id2, NULL, NULL, NULL, NULL));
        EXPECT(id1 == id2 && g_info != NULL);
        CK(cuMemsetD32Async(b->y, fbits(1.0f), N, s2));
        saxpy(3.0f, b->x, b->y, s2);
        CK(cuEventRecord(join, s2));
        CK(cuStreamWaitEvent(s1, join, 0));
        CK(cuMemcpyDtoDAsync(b->z, b->y, N * 4, s1));
        saxpy(1.0f, b->x, b->z, s1);
        saxpy(1.0f, b->x, b->acc, s1);
        fill(b->table, 77, 4, s1);
        CK(cuStreamEndCapture(s1, &g));
        EXPECT(g == g_info);
        CK(cuStreamIsCapturing(s1, &st));
        EXPECT(st == CU_STREAM_CAPTURE_STATUS_NONE);
        CK(cuStreamIsCapturing(s2, &st));
        EXPECT(st == CU_STREAM_CAPTURE_STATUS_NONE);
        return g;
}

static void check_results(const struct bufs *b, int launches_total)
{
        expect_all(b->y, 7.0f, "y");
        expect_all(b->z, 9.0f, "z");
        expect_all(b->acc, 2.0f * (float)launches_total, "acc");
        unsigned t[4];
        CK(cuMemcpyDtoH(t, b->table, sizeof(t)));
        for (int i = 0; i < 4; i++)
                EXPECT(t[i] == 77);
}

static void setup(struct bufs *b)
{
        size_t sz;
        CK(cuMemAlloc(&b->x, N * 4));
        CK(cuMemAlloc(&b->y, N * 4));
        CK(cuMemAlloc(&b->z, N * 4));
        CK(cuMemAlloc(&b->acc, N * 4));
        CK(cuMemsetD32(b->acc, 0, N));
        CK(cuModuleGetGlobal(&b->table, &sz, mod, "g_table"));
        EXPECT(sz == 16);
}

static void test_capture(void)
{
        struct bufs b;
        CUstream s1, s2;
        CUevent fork, join;
        CUgraphExec e;
        setup(&b);
        CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
        CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
        CK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
        CK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
        CUgraph g = capture_forkjoin(&b, s1, s2, fork, join);
        /* the captured nodes, listed and read */
        CUgraphNode cn[16];
        size_t ncn = 16;
        int kernels = 0;
        CK(cuGraphGetNodes(g, cn, &ncn));
        EXPECT(ncn == 7); /* 2 memsets, 4 kernels, a copy (events only join streams) */
        for (size_t i = 0; i < ncn; i++) {
                CUgraphNodeType t;
                CUDA_KERNEL_NODE_PARAMS kp;
                CK(cuGraphNodeGetType(cn[i], &t));
                if (t != CU_GRAPH_NODE_TYPE_KERNEL)
                        continue;
                CK(cuGraphKernelNodeGetParams(cn[i], &kp));
                EXPECT(kp.func == f_saxpy || kp.func == f_fill);
                kernels++;
        }
        EXPECT(kernels == 4);
        CK(cuGraphInstantiateWithFlags(&e, g, 0));
        const int launches = 50;
        /* each launch is ordered behind the exec's previous one, whatever
         * the stream (cuGraphLaunch); the simulator does not order them
         * across streams yet, so there they all go to one stream */
        for (int i = 0; i < launches; i++)
                CK(cuGraphLaunch(e, i % 2 && !on_sim ? s1 : s2));
        CK(cuCtxSynchronize());
        check_results(&b, launches);

        /* a clone instantiates the same work; the exec outlives its graph */
        CUgraph c;
        CUgraphExec ec;
        CK(cuGraphClone(&c, g));
        CK(cuGraphDestroy(g));
        CK(cuGraphInstantiate(&ec, c, 0));
        CK(cuGraphUpload(ec, s1));
        CK(cuGraphLaunch(ec, s1));
        CK(cuGraphLaunch(e, s1));
        CK(cuStreamSynchronize(s1));
        check_results(&b, launches + 2);

        /* the instantiate forms that take parameters */
        CUDA_GRAPH_INSTANTIATE_PARAMS ip = { .flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD, .hUploadStream = s2 };
        CUgraphExec ep;
        CK(cuGraphInstantiateWithParams(&ep, c, &ip));
        EXPECT(ip.result_out == CUDA_GRAPH_INSTANTIATE_SUCCESS);
        CK(cuGraphLaunch(ep, s2));
        CK(cuStreamSynchronize(s2));
        check_results(&b, launches + 3);

        /* an empty graph launches and does nothing */
        CUgraph empty;
        CUgraphExec ee;
        CK(cuGraphCreate(&empty, 0));
        CK(cuGraphInstantiateWithFlags(&ee, empty, 0));
        CK(cuGraphLaunch(ee, s1));
        CK(cuStreamSynchronize(s1));

        CK(cuGraphExecDestroy(ee));
        CK(cuGraphDestroy(empty));
        CK(cuGraphExecDestroy(ep));
        CK(cuGraphExecDestroy(ec));
        CK(cuGraphExecDestroy(e));
        CK(cuGraphDestroy(c));
        CK(cuEventDestroy(fork));
        CK(cuEventDestroy(join));
        CK(cuStreamDestroy(s1));
        CK(cuStreamDestroy(s2));
        CK(cuMemFree(b.x));
        CK(cuMemFree(b.y));
        CK(cuMemFree(b.z));
        CK(cuMemFree(b.acc));
        printf("  capture: fork/join over two streams, %d launches, clone, upload, params\n", launches);
}

static void test_illegal(void)
{
        CUstream s;
        CUdeviceptr d;
        CUgraph g = (CUgraph)(uintptr_t)1;
        CUstreamCaptureStatus st;
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CK(cuMemAlloc(&d, 4096));

        /* not capturing */
        EXPECT_ERR(cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
        /* the legacy stream cannot be captured */
        EXPECT_ERR(cuStreamBeginCapture(0, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);

        /* a context synchronisation during a global capture is refused and
         * invalidates the capture */
        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        CK(cuMemsetD8Async(d, 1, 4096, s));
        EXPECT_ERR(cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        CK(cuStreamIsCapturing(s, &st));
        EXPECT(st == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
        g = (CUgraph)(uintptr_t)1;
        EXPECT_ERR(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        EXPECT(g == NULL);
        CK(cuStreamIsCapturing(s, &st));
        EXPECT(st == CU_STREAM_CAPTURE_STATUS_NONE);

        /* so is synchronising the capturing stream itself */
        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        EXPECT_ERR(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        EXPECT_ERR(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

        /* lupine cannot capture a copy from host memory: refused, and the
         * capture is invalidated */
        if (through_lupine) {
                static unsigned h[1024];
                CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
                EXPECT_ERR(cuMemcpyHtoDAsync(d, h, sizeof(h), s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
                CK(cuStreamIsCapturing(s, &st));
                EXPECT(st == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
                EXPECT_ERR(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        }

        /* ended on a stream that joined it: UNMATCHED; the origin's work
         * on the joined stream never joined back: the end fails */
        CUstream s2;
        CUevent ev;
        CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
        CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        CK(cuEventRecord(ev, s));
        CK(cuStreamWaitEvent(s2, ev, 0));
        CK(cuMemsetD8Async(d, 3, 4096, s2));
        EXPECT_ERR(cuStreamEndCapture(s2, &g), CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
        CUresult r = cuStreamEndCapture(s, &g);
        if (r != CUDA_ERROR_STREAM_CAPTURE_UNJOINED && r != CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
                fprintf(stderr, "ending the origin after an unmatched end: error %d\n", (int)r);
        EXPECT(r == CUDA_ERROR_STREAM_CAPTURE_UNJOINED || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        CK(cuStreamIsCapturing(s2, &st));
        EXPECT(st == CU_STREAM_CAPTURE_STATUS_NONE);
        CK(cuEventDestroy(ev));
        CK(cuStreamDestroy(s2));

        /* the thread's capture mode: exchanged, and given back */
        CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
        CK(cuThreadExchangeStreamCaptureMode(&m));
        EXPECT(m == CU_STREAM_CAPTURE_MODE_GLOBAL);
        m = CU_STREAM_CAPTURE_MODE_GLOBAL;
        CK(cuThreadExchangeStreamCaptureMode(&m));
        EXPECT(m == CU_STREAM_CAPTURE_MODE_RELAXED);

        /* a relaxed capture: work is captured, and the graph runs it */
        CUgraphExec e;
        CK(cuMemsetD8(d, 0, 4096));
        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
        CK(cuMemsetD8Async(d, 9, 4096, s));
        CK(cuStreamEndCapture(s, &g));
        unsigned char hb[4096];
        CK(cuMemcpyDtoH(hb, d, sizeof(hb)));
        EXPECT(hb[0] == 0 && hb[4095] == 0); /* captured, not run */
        CK(cuGraphInstantiateWithFlags(&e, g, 0));
        CK(cuGraphLaunch(e, s));
        CK(cuStreamSynchronize(s));
        CK(cuMemcpyDtoH(hb, d, sizeof(hb)));
        EXPECT(hb[0] == 9 && hb[4095] == 9);
        CK(cuGraphExecDestroy(e));
        CK(cuGraphDestroy(g));

        /* bad input */
        EXPECT_ERR(cuStreamEndCapture(s, NULL), CUDA_ERROR_ILLEGAL_STATE); /* not capturing: driver 580 */
        EXPECT_ERR(cuStreamIsCapturing(s, NULL), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuStreamBeginCapture(s, (CUstreamCaptureMode)77), CUDA_ERROR_INVALID_VALUE);
        /* driver 580 takes any mode value (and crashes on a NULL one, so
         * that is not tried) */
        m = (CUstreamCaptureMode)77;
        EXPECT_ERR(cuThreadExchangeStreamCaptureMode(&m), CUDA_SUCCESS);
        EXPECT(m == CU_STREAM_CAPTURE_MODE_GLOBAL);
        CK(cuThreadExchangeStreamCaptureMode(&m));
        EXPECT(m == (CUstreamCaptureMode)77);
        CK(cuMemFree(d));
        CK(cuStreamDestroy(s));
        printf("  illegal during capture: context and stream sync, host copies, modes, bad input\n");
}

/* The explicit API: a = v (memset), b = a (copy, after it), an empty node
 * and an event record after that; lists and types checked; launched. */
struct explicit_graph {
        CUgraph g;
        CUgraphNode set, copy, empty, rec;
};

static void build_explicit(struct explicit_graph *x, CUdeviceptr a, CUdeviceptr b, unsigned v, CUevent ev)
{
        CUDA_MEMSET_NODE_PARAMS ms = { .dst = a, .value = v, .elementSize = 4, .width = N, .height = 1 };
        CUDA_MEMCPY3D cp;
        memset(&cp, 0, sizeof(cp));
        cp.srcMemoryType = cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        cp.srcDevice = a;
        cp.dstDevice = b;
        cp.WidthInBytes = N * 4;
        cp.Height = cp.Depth = 1;
        CK(cuGraphCreate(&x->g, 0));
        CK(cuGraphAddMemsetNode(&x->set, x->g, NULL, 0, &ms, ctx));
        CK(cuGraphAddMemcpyNode(&x->copy, x->g, &x->set, 1, &cp, ctx));
        CK(cuGraphAddEmptyNode(&x->empty, x->g, &x->copy, 1));
        CK(cuGraphAddEventRecordNode(&x->rec, x->g, &x->empty, 1, ev));
}

static void check_explicit(const struct explicit_graph *x)
{
        CUgraphNode v[8], from[8], to[8];
        CUgraphNodeType t;
        size_t n = 0;
        CK(cuGraphGetNodes(x->g, NULL, &n));
        EXPECT(n == 4);
        n = 8;
        CK(cuGraphGetNodes(x->g, v, &n));
        EXPECT(n == 4 && v[4] == NULL);
        int seen = 0;
        for (size_t i = 0; i < n; i++)
                seen |= (v[i] == x->set) | (v[i] == x->copy) << 1 | (v[i] == x->empty) << 2 | (v[i] == x->rec) << 3;
        EXPECT(seen == 15);
        n = 8;
        CK(cuGraphGetRootNodes(x->g, v, &n));
        EXPECT(n == 1 && v[0] == x->set);
        n = 8;
        CK(cuGraphGetEdges(x->g, from, to, NULL, &n));
        EXPECT(n == 3);
        n = 8;
        CK(cuGraphNodeGetDependencies(x->copy, v, NULL, &n));
        EXPECT(n == 1 && v[0] == x->set);
        n = 8;
        CK(cuGraphNodeGetDependentNodes(x->copy, v, NULL, &n));
        EXPECT(n == 1 && v[0] == x->empty);
        CK(cuGraphNodeGetType(x->set, &t));
        EXPECT(t == CU_GRAPH_NODE_TYPE_MEMSET);
        CK(cuGraphNodeGetType(x->copy, &t));
        EXPECT(t == CU_GRAPH_NODE_TYPE_MEMCPY);
        CK(cuGraphNodeGetType(x->empty, &t));
        EXPECT(t == CU_GRAPH_NODE_TYPE_EMPTY);
        CK(cuGraphNodeGetType(x->rec, &t));
        EXPECT(t == CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}

static void run_explicit(const struct explicit_graph *x, CUdeviceptr b, unsigned v, CUstream s, CUevent ev)
{
        CUgraphExec e;
        unsigned h[N];
        CK(cuMemsetD32(b, 0, N));
        CK(cuGraphInstantiateWithFlags(&e, x->g, 0));
        CK(cuGraphLaunch(e, s));
        CK(cuEventSynchronize(ev));
        CK(cuStreamSynchronize(s));
        CK(cuMemcpyDtoH(h, b, sizeof(h)));
        for (int i = 0; i < N; i++)
                EXPECT(h[i] == v);
        CK(cuGraphExecDestroy(e));
}

static void test_explicit(void)
{
        struct explicit_graph x;
        CUdeviceptr a, b;
        CUstream s;
        CUevent ev;
        CK(cuMemAlloc(&a, N * 4));
        CK(cuMemAlloc(&b, N * 4));
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
        build_explicit(&x, a, b, 0xabcd1234u, ev);
        check_explicit(&x);
        run_explicit(&x, b, 0xabcd1234u, s, ev);

        /* a child graph: the explicit one inside a new graph, after a wait */
        CUgraph outer;
        CUgraphNode wait, child;
        CK(cuGraphCreate(&outer, 0));
        CK(cuGraphAddEventWaitNode(&wait, outer, NULL, 0, ev));
        CK(cuGraphAddChildGraphNode(&child, outer, &wait, 1, x.g));
        CUgraphNodeType t;
        CK(cuGraphNodeGetType(child, &t));
        EXPECT(t == CU_GRAPH_NODE_TYPE_GRAPH);
        CUgraphExec oe;
        CK(cuMemsetD32(b, 0, N));
        CK(cuGraphInstantiateWithFlags(&oe, outer, 0));
        CK(cuGraphLaunch(oe, s));
        CK(cuStreamSynchronize(s));
        unsigned h[N];
        CK(cuMemcpyDtoH(h, b, sizeof(h)));
        EXPECT(h[0] == 0xabcd1234u && h[N - 1] == 0xabcd1234u);
        CK(cuGraphExecDestroy(oe));

        /* the client's DOT file names every node */
        char dot[64];
        snprintf(dot, sizeof(dot), "/tmp/e2e_graphs_%d.dot", (int)getpid());
        CK(cuGraphDebugDotPrint(x.g, dot, 0));
        FILE *df = fopen(dot, "r");
        EXPECT(df != NULL);
        char text[8192];
        size_t tl = fread(text, 1, sizeof(text) - 1, df);
        text[tl] = 0;
        fclose(df);
        unlink(dot);
        EXPECT(strstr(text, "digraph") != NULL && strstr(text, "->") != NULL);
        EXPECT_ERR(cuGraphDebugDotPrint(x.g, NULL, 0), CUDA_ERROR_INVALID_VALUE);

        /* memset and copy parameters read and changed, in the graph and in an exec */
        CUDA_MEMSET_NODE_PARAMS got;
        CK(cuGraphMemsetNodeGetParams(x.set, &got));
        EXPECT(got.dst == a && got.value == 0xabcd1234u && got.elementSize == 4 && got.width == N && got.height == 1);
        CUDA_MEMCPY3D gc;
        CK(cuGraphMemcpyNodeGetParams(x.copy, &gc));
        EXPECT(gc.dstDevice + gc.dstXInBytes == b && gc.srcDevice + gc.srcXInBytes == a && gc.WidthInBytes == N * 4);
        EXPECT_ERR(cuGraphMemsetNodeGetParams(x.copy, &got), CUDA_ERROR_INVALID_VALUE);
        CUgraphExec pe;
        CK(cuGraphInstantiateWithFlags(&pe, x.g, 0));
        got.value = 77;
        CK(cuGraphExecMemsetNodeSetParams(pe, x.set, &got, ctx));
        CK(cuGraphLaunch(pe, s));
        CK(cuStreamSynchronize(s));
        CK(cuMemcpyDtoH(h, b, sizeof(h)));
        EXPECT(h[0] == 77 && h[N - 1] == 77);
        CK(cuGraphMemsetNodeGetParams(x.set, &got));
        EXPECT(got.value == 0xabcd1234u); /* the graph's own is as it was */
        got.value = 88;
        CK(cuGraphMemsetNodeSetParams(x.set, &got));
        CK(cuGraphMemsetNodeGetParams(x.set, &got));
        EXPECT(got.value == 88);
        got.value = 0xabcd1234u;
        CK(cuGraphMemsetNodeSetParams(x.set, &got));
        CK(cuGraphExecDestroy(pe));

        /* event nodes: their event read and changed */
        CUevent got_ev, ev2;
        CK(cuGraphEventRecordNodeGetEvent(x.rec, &got_ev));
        EXPECT(got_ev == ev);
        CK(cuGraphEventWaitNodeGetEvent(wait, &got_ev));
        EXPECT(got_ev == ev);
        CK(cuEventCreate(&ev2, CU_EVENT_DISABLE_TIMING));
        CK(cuGraphEventRecordNodeSetEvent(x.rec, ev2));
        CK(cuGraphEventRecordNodeGetEvent(x.rec, &got_ev));
        EXPECT(got_ev == ev2);
        CK(cuGraphInstantiateWithFlags(&pe, x.g, 0));
        CK(cuGraphExecEventRecordNodeSetEvent(pe, x.rec, ev));
        cuuint64_t fl = 1;
        CK(cuGraphExecGetFlags(pe, &fl));
        EXPECT(fl == 0);
        CK(cuGraphLaunch(pe, s));
        CK(cuEventSynchronize(ev));
        CK(cuStreamSynchronize(s));
        CK(cuGraphExecDestroy(pe));
        CK(cuGraphEventRecordNodeSetEvent(x.rec, ev));
        CK(cuEventDestroy(ev2));
        EXPECT_ERR(cuGraphEventRecordNodeGetEvent(x.set, &got_ev), CUDA_ERROR_INVALID_VALUE);

        /* dependencies removed and added again */
        CK(cuGraphRemoveDependencies(x.g, &x.set, &x.copy, NULL, 1));
        size_t n = 8;
        CUgraphNode v[8];
        CK(cuGraphGetRootNodes(x.g, v, &n));
        EXPECT(n == 2);
        CK(cuGraphAddDependencies(x.g, &x.set, &x.copy, NULL, 1));
        check_explicit(&x);

        /* bad input: a node of another graph, a cycle, a destroyed node */
        EXPECT_ERR(cuGraphAddDependencies(x.g, &wait, &x.set, NULL, 1), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuGraphAddEmptyNode(&v[0], x.g, &wait, 1), CUDA_ERROR_INVALID_VALUE);
        n = 8;
        CK(cuGraphGetNodes(x.g, v, &n));
        EXPECT(n == 4); /* the refused node is not left behind */
        CK(cuGraphAddDependencies(x.g, &x.rec, &x.set, NULL, 1));
        CUgraphExec ce;
        CUresult r = cuGraphInstantiateWithFlags(&ce, x.g, 0);
        EXPECT(r != CUDA_SUCCESS); /* a cycle */
        CK(cuGraphRemoveDependencies(x.g, &x.rec, &x.set, NULL, 1));
        CK(cuGraphDestroyNode(x.empty));
        n = 8;
        CK(cuGraphGetNodes(x.g, v, &n));
        EXPECT(n == 3);
        CK(cuGraphNodeGetDependencies(x.rec, v, NULL, &n));
        EXPECT(n == 0);
        EXPECT_ERR(cuGraphGetNodes(x.g, v, NULL), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuGraphAddMemsetNode(&v[0], x.g, NULL, 0, NULL, ctx), CUDA_ERROR_INVALID_VALUE);

        CK(cuGraphDestroy(outer));
        CK(cuGraphDestroy(x.g));
        CK(cuEventDestroy(ev));
        CK(cuStreamDestroy(s));
        CK(cuMemFree(a));
        CK(cuMemFree(b));
        printf("  explicit API: memset, memcpy, empty, event and child graph nodes, lists, edges, bad input\n");
}

/* A graph of one kernel node: fill_u32(d, v, N). */
static CUgraph kernel_graph(CUdeviceptr *d, unsigned *v, int *n, CUgraphNode *ret)
{
        CUgraph g;
        void *p[] = { d, v, n };
        CUDA_KERNEL_NODE_PARAMS kp = { .func = f_fill,
                                       .gridDimX = 4,
                                       .gridDimY = 1,
                                       .gridDimZ = 1,
                                       .blockDimX = 128,
                                       .blockDimY = 1,
                                       .blockDimZ = 1,
                                       .kernelParams = p };
        CK(cuGraphCreate(&g, 0));
        CK(cuGraphAddKernelNode(ret, g, NULL, 0, &kp));
        return g;
}

static void expect_u32(CUdeviceptr d, unsigned want)
{
        static unsigned h[N];
        CK(cuMemcpyDtoH(h, d, sizeof(h)));
        for (int i = 0; i < N; i++)
                if (h[i] != want) {
                        fprintf(stderr, "[%d] = %u, expected %u\n", i, h[i], want);
                        exit(1);
                }
}

static void set_fill(CUgraphExec e, CUgraphNode node, CUdeviceptr *d, unsigned *v, int *n)
{
        void *p[] = { d, v, n };
        CUDA_KERNEL_NODE_PARAMS kp = { .func = f_fill,
                                       .gridDimX = 4,
                                       .gridDimY = 1,
                                       .gridDimZ = 1,
                                       .blockDimX = 128,
                                       .blockDimY = 1,
                                       .blockDimZ = 1,
                                       .kernelParams = p };
        if (e)
                CK(cuGraphExecKernelNodeSetParams(e, node, &kp));
        else
                CK(cuGraphKernelNodeSetParams(node, &kp));
}

static void test_kernel_nodes(void)
{
        CUdeviceptr d;
        CUstream s;
        unsigned v = 11;
        int n = N;
        CUgraphNode node, node2;
        CUgraphExec e;
        CUgraphNodeType t;
        CK(cuMemAlloc(&d, N * 4));
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CUgraph g = kernel_graph(&d, &v, &n, &node);
        v = 999; /* the node took the value at the add */
        CK(cuGraphNodeGetType(node, &t));
        EXPECT(t == CU_GRAPH_NODE_TYPE_KERNEL);
        CK(cuGraphInstantiateWithFlags(&e, g, 0));
        CK(cuGraphLaunch(e, s));
        CK(cuStreamSynchronize(s));
        expect_u32(d, 11);
        /* the exec's copy changed, the graph's not */
        v = 22;
        set_fill(e, node, &d, &v, &n);
        CK(cuGraphLaunch(e, s));
        CK(cuStreamSynchronize(s));
        expect_u32(d, 22);
        /* the node's parameters read back: the values it holds, not the caller's */
        CUDA_KERNEL_NODE_PARAMS rk;
        CK(cuGraphKernelNodeGetParams(node, &rk));
        EXPECT(rk.gridDimX == 4 && rk.blockDimX == 128 && rk.kernelParams != NULL);
        EXPECT(*(CUdeviceptr *)rk.kernelParams[0] == d && *(unsigned *)rk.kernelParams[1] == 11 &&
               *(int *)rk.kernelParams[2] == N);
        /* the graph's node changed: a new exec sees it, the old keeps 22 */
        v = 33;
        set_fill(NULL, node, &d, &v, &n);
        CUgraphExec e2;
        CK(cuGraphInstantiateWithFlags(&e2, g, 0));
        CK(cuGraphLaunch(e2, s));
        CK(cuStreamSynchronize(s));
        expect_u32(d, 33);
        CK(cuGraphLaunch(e, s));
        CK(cuStreamSynchronize(s));
        expect_u32(d, 22);
        /* an exec updated from another graph of the same shape */
        v = 44;
        CUgraph g2 = kernel_graph(&d, &v, &n, &node2);
        CUgraphExecUpdateResultInfo info;
        CK(cuGraphExecUpdate(e, g2, &info));
        EXPECT(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS);
        CK(cuGraphLaunch(e, s));
        CK(cuStreamSynchronize(s));
        expect_u32(d, 44);
        /* one of another shape is refused, with the reason */
        CUgraphNode extra;
        CK(cuGraphAddEmptyNode(&extra, g2, &node2, 1));
        EXPECT_ERR(cuGraphExecUpdate(e, g2, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
        EXPECT(info.result == CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
        /* bad input */
        CUDA_KERNEL_NODE_PARAMS bad = { .func = f_fill,
                                        .gridDimX = 0,
                                        .gridDimY = 1,
                                        .gridDimZ = 1,
                                        .blockDimX = 1,
                                        .blockDimY = 1,
                                        .blockDimZ = 1 };
        EXPECT_ERR(cuGraphAddKernelNode(&extra, g, NULL, 0, &bad), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuGraphAddKernelNode(&extra, g, NULL, 0, NULL), CUDA_ERROR_INVALID_VALUE);
        CK(cuGraphExecDestroy(e));
        CK(cuGraphExecDestroy(e2));
        CK(cuGraphDestroy(g));
        CK(cuGraphDestroy(g2));
        /* the generic add: a kernel node after a memset node */
        CUgraphNodeParams np;
        memset(&np, 0, sizeof(np));
        np.type = CU_GRAPH_NODE_TYPE_MEMSET;
        np.memset.dst = d, np.memset.value = 1, np.memset.elementSize = 4, np.memset.width = N;
        np.memset.height = 1;
        CUgraphNode gm, gk;
        CK(cuGraphCreate(&g, 0));
        CK(cuGraphAddNode(&gm, g, NULL, NULL, 0, &np));
        v = 55;
        void *kp[] = { &d, &v, &n };
        memset(&np, 0, sizeof(np));
        np.type = CU_GRAPH_NODE_TYPE_KERNEL;
        np.kernel.func = f_fill, np.kernel.gridDimX = 4, np.kernel.gridDimY = 1, np.kernel.gridDimZ = 1;
        np.kernel.blockDimX = 128, np.kernel.blockDimY = 1, np.kernel.blockDimZ = 1, np.kernel.kernelParams = kp;
        CK(cuGraphAddNode(&gk, g, &gm, NULL, 1, &np));
        CK(cuGraphInstantiateWithFlags(&e, g, 0));
        CK(cuGraphLaunch(e, s));
        CK(cuStreamSynchronize(s));
        expect_u32(d, 55);
        CK(cuGraphExecDestroy(e));
        CK(cuGraphDestroy(g));
        CK(cuStreamDestroy(s));
        CK(cuMemFree(d));
        printf("  kernel nodes: add, set params in a graph and in an exec, exec update, the generic add\n");
}

/* Capture into an existing graph after one of its nodes, and a capture's
 * dependencies read and replaced. */
static void test_capture_deps(void)
{
        CUdeviceptr a, b, c;
        CUstream s;
        CUgraph g, got;
        CUgraphNode m, v[8];
        CUstreamCaptureStatus st;
        const CUgraphNode *deps;
        size_t n;
        CK(cuMemAlloc(&a, N * 4));
        CK(cuMemAlloc(&b, N * 4));
        CK(cuMemAlloc(&c, N * 4));
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CUDA_MEMSET_NODE_PARAMS ms = { .dst = a, .value = 3, .elementSize = 4, .width = N, .height = 1 };
        CK(cuGraphCreate(&g, 0));
        CK(cuGraphAddMemsetNode(&m, g, NULL, 0, &ms, ctx));
        CK(cuStreamBeginCaptureToGraph(s, g, &m, NULL, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
        CK(cuStreamGetCaptureInfo(s, &st, NULL, NULL, &deps, NULL, &n));
        EXPECT(st == CU_STREAM_CAPTURE_STATUS_ACTIVE && n == 1 && deps[0] == m);
        CK(cuMemcpyDtoDAsync(b, a, N * 4, s));
        CK(cuStreamEndCapture(s, &got));
        EXPECT(got == g);
        n = 8;
        CK(cuGraphGetNodes(g, v, &n));
        EXPECT(n == 2);
        n = 8;
        CK(cuGraphGetRootNodes(g, v, &n));
        EXPECT(n == 1 && v[0] == m);
        CUgraphExec e;
        CK(cuMemsetD32(b, 0, N));
        CK(cuGraphInstantiateWithFlags(&e, g, 0));
        CK(cuGraphLaunch(e, s));
        CK(cuStreamSynchronize(s));
        expect_u32(b, 3);
        CK(cuGraphExecDestroy(e));
        CK(cuGraphDestroy(g));

        /* the capture's dependencies: one node, then none (a second root) */
        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        CK(cuMemsetD32Async(a, 5, N, s));
        CK(cuStreamGetCaptureInfo(s, &st, NULL, &g, &deps, NULL, &n));
        EXPECT(n == 1);
        CUgraphNode first = deps[0];
        CK(cuMemsetD32Async(b, 6, N, s));
        CK(cuStreamUpdateCaptureDependencies(s, NULL, NULL, 0, CU_STREAM_SET_CAPTURE_DEPENDENCIES));
        CK(cuStreamGetCaptureInfo(s, &st, NULL, NULL, &deps, NULL, &n));
        EXPECT(n == 0);
        CK(cuMemsetD32Async(c, 7, N, s));
        CK(cuStreamUpdateCaptureDependencies(s, &first, NULL, 1, CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
        CK(cuStreamGetCaptureInfo(s, &st, NULL, NULL, &deps, NULL, &n));
        EXPECT(n == 2);
        CK(cuStreamEndCapture(s, &got));
        EXPECT(got == g);
        n = 8;
        CK(cuGraphGetRootNodes(g, v, &n));
        EXPECT(n == 2);
        CK(cuGraphInstantiateWithFlags(&e, g, 0));
        CK(cuGraphLaunch(e, s));
        CK(cuStreamSynchronize(s));
        expect_u32(a, 5);
        expect_u32(b, 6);
        expect_u32(c, 7);
        /* not capturing: ILLEGAL_STATE before the flags are looked at (driver 580) */
        EXPECT_ERR(cuStreamUpdateCaptureDependencies(s, NULL, NULL, 0, 7), CUDA_ERROR_ILLEGAL_STATE);
        CK(cuGraphExecDestroy(e));
        CK(cuGraphDestroy(g));
        CK(cuStreamDestroy(s));
        CK(cuMemFree(a));
        CK(cuMemFree(b));
        CK(cuMemFree(c));
        printf("  capture into a graph, capture dependencies read, set and added\n");
}

/* ---- host nodes: the functions run in graph order (through lupine: in
 * the client, where one may read device memory, which shows what the
 * device work before it left) */

struct host_log {
        int n;
        int seq[16];
        unsigned seen[16];
        CUdeviceptr watch[64]; /* per userData: what it reads (0: nothing) */
};
static struct host_log hl;

static void CUDA_CB host_rec(void *p)
{
        int id = (int)(intptr_t)p;
        if (hl.n >= 16)
                return;
        hl.seen[hl.n] = 0;
        if (through_lupine && id < 64 && hl.watch[id])
                CK(cuMemcpyDtoH(&hl.seen[hl.n], hl.watch[id], 4));
        hl.seq[hl.n++] = id;
}

static void expect_seq(int n, const int *ids, const unsigned *seen)
{
        if (hl.n != n) {
                fprintf(stderr, "host functions ran %d times, expected %d\n", hl.n, n);
                exit(1);
        }
        for (int i = 0; i < n; i++) {
                if (hl.seq[i] != ids[i]) {
                        fprintf(stderr, "host function %d was %d, expected %d\n", i, hl.seq[i], ids[i]);
                        exit(1);
                }
                if (through_lupine && seen && hl.seen[i] != seen[i]) {
                        fprintf(stderr, "host function %d saw %u, expected %u\n", i, hl.seen[i], seen[i]);
                        exit(1);
                }
        }
        hl.n = 0;
}

static CUDA_KERNEL_NODE_PARAMS fill_params(void **p)
{
        return (CUDA_KERNEL_NODE_PARAMS){ .func = f_fill,
                                          .gridDimX = 4,
                                          .gridDimY = 1,
                                          .gridDimZ = 1,
                                          .blockDimX = 128,
                                          .blockDimY = 1,
                                          .blockDimZ = 1,
                                          .kernelParams = p };
}

/* The diamond: a = 1 (memset), e = 3 (memset, a second root); H1 (reads
 * a); b = 5 (kernel) and c = a (copy), both after H1; H2 after both
 * (reads c); a = 9 (kernel) after H2. */
struct host_graph {
        CUgraph g;
        CUgraphNode ma, me, h1, kb, cc, h2, ka;
        CUdeviceptr a, b, c, e;
        unsigned vb, va;
        int n;
};

static void build_host_graph(struct host_graph *x)
{
        CK(cuMemAlloc(&x->a, N * 4));
        CK(cuMemAlloc(&x->b, N * 4));
        CK(cuMemAlloc(&x->c, N * 4));
        CK(cuMemAlloc(&x->e, N * 4));
        x->vb = 5, x->va = 9, x->n = N;
        CK(cuGraphCreate(&x->g, 0));
        CUDA_MEMSET_NODE_PARAMS ms = { .dst = x->a, .value = 1, .elementSize = 4, .width = N, .height = 1 };
        CK(cuGraphAddMemsetNode(&x->ma, x->g, NULL, 0, &ms, ctx));
        ms.dst = x->e, ms.value = 3;
        CK(cuGraphAddMemsetNode(&x->me, x->g, NULL, 0, &ms, ctx));
        CUDA_HOST_NODE_PARAMS hp = { .fn = host_rec, .userData = (void *)(intptr_t)1 };
        CK(cuGraphAddHostNode(&x->h1, x->g, &x->ma, 1, &hp));
        void *pb[] = { &x->b, &x->vb, &x->n };
        CUDA_KERNEL_NODE_PARAMS kp = fill_params(pb);
        CK(cuGraphAddKernelNode(&x->kb, x->g, &x->h1, 1, &kp));
        CUDA_MEMCPY3D cp;
        memset(&cp, 0, sizeof(cp));
        cp.srcMemoryType = cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        cp.srcDevice = x->a, cp.dstDevice = x->c, cp.WidthInBytes = N * 4, cp.Height = cp.Depth = 1;
        CK(cuGraphAddMemcpyNode(&x->cc, x->g, &x->h1, 1, &cp, ctx));
        CUgraphNode two[2] = { x->kb, x->cc };
        /* the generic form for the second host node */
        CUgraphNodeParams np;
        memset(&np, 0, sizeof(np));
        np.type = CU_GRAPH_NODE_TYPE_HOST;
        np.host.fn = host_rec;
        np.host.userData = (void *)(intptr_t)2;
        CK(cuGraphAddNode(&x->h2, x->g, two, NULL, 2, &np));
        void *pa[] = { &x->a, &x->va, &x->n };
        kp = fill_params(pa);
        CK(cuGraphAddKernelNode(&x->ka, x->g, &x->h2, 1, &kp));
        hl.watch[1] = hl.watch[11] = x->a;
        hl.watch[2] = hl.watch[22] = x->c;
}

/* One launch, checked: the host functions in order, what they saw, and
 * the data (c cleared first: H2 must see the copy). */
static void run_host_graph(const struct host_graph *x, CUgraphExec ge, CUstream s, int id1, int id2, unsigned vb,
                           unsigned ve)
{
        CK(cuMemsetD32(x->c, 0, N));
        CK(cuGraphLaunch(ge, s));
        CK(cuStreamSynchronize(s));
        const int ids[2] = { id1, id2 };
        const unsigned seen[2] = { 1, 1 };
        expect_seq(2, ids, seen);
        expect_u32(x->a, 9);
        expect_u32(x->b, vb);
        expect_u32(x->c, 1);
        expect_u32(x->e, ve);
}

static void test_host_captured(CUstream s)
{
        CUdeviceptr a, b;
        CUgraph g;
        CUgraphExec ge;
        CUgraphNode v[8];
        size_t n = 8;
        unsigned seven = 7, six = 6;
        int nn = N;
        CK(cuMemAlloc(&a, N * 4));
        CK(cuMemAlloc(&b, N * 4));
        hl.watch[7] = a;
        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        CK(cuMemsetD32Async(a, 4, N, s));
        CK(cuLaunchHostFunc(s, host_rec, (void *)(intptr_t)7));
        void *p[] = { &a, &seven, &nn };
        CK(cuLaunchKernel(f_fill, 4, 1, 1, 128, 1, 1, 0, s, p, NULL));
        fill(b, six, N, s);
        EXPECT_ERR(cuStreamAddCallback(s, (CUstreamCallback)(void *)host_rec, NULL, 0),
                   CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        EXPECT_ERR(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        EXPECT(hl.n == 0); /* nothing ran while capturing */

        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        CK(cuMemsetD32Async(a, 4, N, s));
        CK(cuLaunchHostFunc(s, host_rec, (void *)(intptr_t)7));
        CK(cuLaunchKernel(f_fill, 4, 1, 1, 128, 1, 1, 0, s, p, NULL));
        fill(b, six, N, s);
        CK(cuStreamEndCapture(s, &g));
        EXPECT(hl.n == 0);
        CK(cuGraphGetNodes(g, v, &n));
        EXPECT(n == 4);
        int hosts = 0;
        for (size_t i = 0; i < n; i++) {
                CUgraphNodeType t;
                CK(cuGraphNodeGetType(v[i], &t));
                if (t != CU_GRAPH_NODE_TYPE_HOST)
                        continue;
                CUDA_HOST_NODE_PARAMS hp;
                CK(cuGraphHostNodeGetParams(v[i], &hp));
                EXPECT(hp.fn == host_rec && hp.userData == (void *)(intptr_t)7);
                hosts++;
        }
        EXPECT(hosts == 1);
        CK(cuGraphInstantiateWithFlags(&ge, g, 0));
        for (int i = 0; i < 2; i++) {
                CK(cuMemsetD32(a, 0, N));
                CK(cuGraphLaunch(ge, s));
                CK(cuStreamSynchronize(s));
                const int ids[1] = { 7 };
                const unsigned seen[1] = { 4 };
                expect_seq(1, ids, seen);
                expect_u32(a, 7);
                expect_u32(b, 6);
        }
        CK(cuGraphExecDestroy(ge));
        CK(cuGraphDestroy(g));
        CK(cuMemFree(a));
        CK(cuMemFree(b));
}

/* The diamond as a child graph node (nested once more), between a memset
 * of e before it and a host node after it that reads a: the child's host
 * nodes run in its order, the last one after all of it. */
static CUgraph host_child_graph(const struct host_graph *x, CUgraph *inner)
{
        CUgraph outer;
        CUgraphNode m, cn, h;
        CK(cuGraphCreate(inner, 0));
        CK(cuGraphAddChildGraphNode(&cn, *inner, NULL, 0, x->g));
        CK(cuGraphCreate(&outer, 0));
        CUDA_MEMSET_NODE_PARAMS ms = { .dst = x->e, .value = 6, .elementSize = 4, .width = N, .height = 1 };
        CK(cuGraphAddMemsetNode(&m, outer, NULL, 0, &ms, ctx));
        CK(cuGraphAddChildGraphNode(&cn, outer, &m, 1, *inner));
        CUDA_HOST_NODE_PARAMS hp = { .fn = host_rec, .userData = (void *)(intptr_t)40 };
        CK(cuGraphAddHostNode(&h, outer, &cn, 1, &hp));
        hl.watch[40] = x->a;
        return outer;
}

static void run_host_child(const struct host_graph *x, CUgraphExec ce, CUstream s, int id1)
{
        CK(cuMemsetD32(x->c, 0, N));
        CK(cuGraphLaunch(ce, s));
        CK(cuStreamSynchronize(s));
        const int ids[3] = { id1, 2, 40 };
        const unsigned seen[3] = { 1, 1, 9 };
        expect_seq(3, ids, seen);
        expect_u32(x->a, 9);
        expect_u32(x->b, 5);
        expect_u32(x->c, 1);
        expect_u32(x->e, 3); /* the child's memset of e runs after the outer one */
}

static void test_host_child(const struct host_graph *x, CUstream s)
{
        CUgraph inner, outer = host_child_graph(x, &inner);
        CUgraphExec ce;
        CK(cuGraphInstantiateWithFlags(&ce, outer, 0));
        for (int i = 0; i < 2; i++)
                run_host_child(x, ce, s, 11);
        CK(cuGraphExecDestroy(ce));
        CK(cuGraphDestroy(outer));
        CK(cuGraphDestroy(inner));
}

/* A child graph node (without host nodes) before a host node: the exec's
 * child set with cuGraphExecChildGraphNodeSetParams reaches the split
 * exec. */
static void test_host_child_set(CUstream s)
{
        CUdeviceptr e;
        CUgraph g, c1, c2;
        CUgraphNode m, cn, h;
        CUgraphExec ge;
        CK(cuMemAlloc(&e, N * 4));
        hl.watch[50] = e;
        CUDA_MEMSET_NODE_PARAMS ms = { .dst = e, .value = 7, .elementSize = 4, .width = N, .height = 1 };
        CK(cuGraphCreate(&c1, 0));
        CK(cuGraphAddMemsetNode(&m, c1, NULL, 0, &ms, ctx));
        ms.value = 8;
        CK(cuGraphCreate(&c2, 0));
        CK(cuGraphAddMemsetNode(&m, c2, NULL, 0, &ms, ctx));
        CK(cuGraphCreate(&g, 0));
        CK(cuGraphAddChildGraphNode(&cn, g, NULL, 0, c1));
        CUDA_HOST_NODE_PARAMS hp = { .fn = host_rec, .userData = (void *)(intptr_t)50 };
        CK(cuGraphAddHostNode(&h, g, &cn, 1, &hp));
        CK(cuGraphInstantiateWithFlags(&ge, g, 0));
        const int ids[1] = { 50 };
        const unsigned seen7[1] = { 7 }, seen8[1] = { 8 };
        CK(cuGraphLaunch(ge, s));
        CK(cuStreamSynchronize(s));
        expect_seq(1, ids, seen7);
        CK(cuGraphExecChildGraphNodeSetParams(ge, cn, c2));
        CK(cuGraphLaunch(ge, s));
        CK(cuStreamSynchronize(s));
        expect_seq(1, ids, seen8);
        expect_u32(e, 8);
        CK(cuGraphExecDestroy(ge));
        CK(cuGraphDestroy(g));
        CK(cuGraphDestroy(c1));
        CK(cuGraphDestroy(c2));
        CK(cuMemFree(e));
}

/* Two host nodes as roots (their order between them is free), a kernel
 * after both, and a host node last that sees the kernel's result. */
static void test_host_roots(CUstream s)
{
        CUdeviceptr a;
        CUgraph g;
        CUgraphExec ge;
        CUgraphNode h[3], k;
        unsigned four = 4;
        int nn = N;
        CK(cuMemAlloc(&a, N * 4));
        hl.watch[33] = a;
        CK(cuGraphCreate(&g, 0));
        for (int i = 0; i < 2; i++) {
                CUDA_HOST_NODE_PARAMS hp = { .fn = host_rec, .userData = (void *)(intptr_t)(31 + i) };
                CK(cuGraphAddHostNode(&h[i], g, NULL, 0, &hp));
        }
        void *p[] = { &a, &four, &nn };
        CUDA_KERNEL_NODE_PARAMS kp = fill_params(p);
        CK(cuGraphAddKernelNode(&k, g, h, 2, &kp));
        CUDA_HOST_NODE_PARAMS hp = { .fn = host_rec, .userData = (void *)(intptr_t)33 };
        CK(cuGraphAddHostNode(&h[2], g, &k, 1, &hp));
        CK(cuGraphInstantiateWithFlags(&ge, g, 0));
        for (int i = 0; i < 2; i++) {
                CK(cuMemsetD32(a, 0, N));
                CK(cuGraphLaunch(ge, s));
                CK(cuStreamSynchronize(s));
                EXPECT(hl.n == 3);
                EXPECT((hl.seq[0] == 31 && hl.seq[1] == 32) || (hl.seq[0] == 32 && hl.seq[1] == 31));
                EXPECT(hl.seq[2] == 33);
                EXPECT(!through_lupine || hl.seen[2] == 4);
                hl.n = 0;
                expect_u32(a, 4);
        }
        CK(cuGraphExecDestroy(ge));
        CK(cuGraphDestroy(g));
        CK(cuMemFree(a));
}

static void test_host_nodes(void)
{
        struct host_graph x;
        CUstream s;
        CUgraphExec ge, ge2;
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        build_host_graph(&x);
        CUDA_HOST_NODE_PARAMS hp = { .fn = NULL, .userData = NULL };
        CUgraphNode bad;
        EXPECT_ERR(cuGraphAddHostNode(&bad, x.g, NULL, 0, &hp), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuGraphAddHostNode(&bad, x.g, NULL, 0, NULL), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuGraphHostNodeGetParams(x.kb, &hp), CUDA_ERROR_INVALID_VALUE);
        CK(cuGraphHostNodeGetParams(x.h2, &hp));
        EXPECT(hp.fn == host_rec && hp.userData == (void *)(intptr_t)2);
        CUgraphNodeType t;
        CK(cuGraphNodeGetType(x.h1, &t));
        EXPECT(t == CU_GRAPH_NODE_TYPE_HOST);
        CK(cuGraphInstantiateWithFlags(&ge, x.g, 0));
        for (int i = 0; i < 3; i++)
                run_host_graph(&x, ge, s, 1, 2, 5, 3);

        /* set in the graph: a new exec sees it, the old one does not */
        hp = (CUDA_HOST_NODE_PARAMS){ .fn = host_rec, .userData = (void *)(intptr_t)11 };
        CK(cuGraphHostNodeSetParams(x.h1, &hp));
        CK(cuGraphInstantiateWithFlags(&ge2, x.g, 0));
        run_host_graph(&x, ge2, s, 11, 2, 5, 3);
        run_host_graph(&x, ge, s, 1, 2, 5, 3);

        /* set in the exec: the graph keeps its own; and the other nodes'
         * exec set params (a kernel, a memset) reach a split exec */
        hp.userData = (void *)(intptr_t)22;
        CK(cuGraphExecHostNodeSetParams(ge, x.h2, &hp));
        unsigned v8 = 8;
        void *pb[] = { &x.b, &v8, &x.n };
        CUDA_KERNEL_NODE_PARAMS kp = fill_params(pb);
        CK(cuGraphExecKernelNodeSetParams(ge, x.kb, &kp));
        CUDA_MEMSET_NODE_PARAMS ms = { .dst = x.e, .value = 13, .elementSize = 4, .width = N, .height = 1 };
        CK(cuGraphExecMemsetNodeSetParams(ge, x.me, &ms, ctx));
        run_host_graph(&x, ge, s, 1, 22, 8, 13);
        CK(cuGraphHostNodeGetParams(x.h2, &hp));
        EXPECT(hp.userData == (void *)(intptr_t)2);
        EXPECT_ERR(cuGraphExecHostNodeSetParams(ge, x.kb, &hp), CUDA_ERROR_INVALID_VALUE);

        /* exec update: the exec takes the graph's parameters */
        CUgraphExecUpdateResultInfo info;
        CK(cuGraphExecUpdate(ge, x.g, &info));
        EXPECT(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS);
        run_host_graph(&x, ge, s, 11, 2, 5, 3);

        /* a node of a split exec turned off and on again (its segment's) */
        CK(cuGraphNodeSetEnabled(ge, x.kb, 0));
        CK(cuMemsetD32(x.b, 0, N));
        CK(cuMemsetD32(x.c, 0, N));
        CK(cuGraphLaunch(ge, s));
        CK(cuStreamSynchronize(s));
        const int ids_off[2] = { 11, 2 };
        expect_seq(2, ids_off, NULL);
        expect_u32(x.b, 0);
        expect_u32(x.c, 1);
        CK(cuGraphNodeSetEnabled(ge, x.kb, 1));
        run_host_graph(&x, ge, s, 11, 2, 5, 3);

        /* the exec launched into a capture: a graph that runs it */
        CUgraph cg;
        CUgraphExec cge;
        /* driver 580 refused this launch on the H200
         * (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and so did lupine's
         * segment launches there); the simulator captures it. The answers
         * are printed, so the GPU job compares them with the driver's. */
        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        CUresult lr = cuGraphLaunch(ge, s);
        cg = NULL;
        CUresult er = cuStreamEndCapture(s, &cg);
        printf("  a split exec launched into a capture: launch %d, end of the capture %d\n", (int)lr, (int)er);
        EXPECT(hl.n == 0);
        if (lr == CUDA_SUCCESS && er == CUDA_SUCCESS) {
                CK(cuGraphInstantiateWithFlags(&cge, cg, 0));
                run_host_graph(&x, cge, s, 11, 2, 5, 3);
                run_host_graph(&x, cge, s, 11, 2, 5, 3);
                CK(cuGraphExecDestroy(cge));
        }
        if (cg)
                CK(cuGraphDestroy(cg));
        EXPECT(hl.n == 0);
        test_host_child(&x, s);
        test_host_captured(s);
        test_host_roots(s);
        test_host_child_set(s);
        CK(cuGraphExecDestroy(ge));
        CK(cuGraphExecDestroy(ge2));
        CK(cuGraphDestroy(x.g));
        CK(cuStreamDestroy(s));
        CK(cuMemFree(x.a));
        CK(cuMemFree(x.b));
        CK(cuMemFree(x.c));
        CK(cuMemFree(x.e));
        printf("  host nodes: explicit and captured, in graph order, get/set params, exec set params, exec update\n");
}

/* The restart scenario: a captured graph instantiated (and launched), and
 * a second, never-instantiated clone; after each restart both are
 * launched again (the clone instantiated then) with exact results. */
static int restart_mode(void)
{
        struct bufs b;
        CUstream s1, s2;
        CUevent fork, join;
        CUgraphExec e;
        setup(&b);
        CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
        CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
        CK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
        CK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
        CUgraph g = capture_forkjoin(&b, s1, s2, fork, join), c;
        CK(cuGraphClone(&c, g));
        struct explicit_graph x;
        CUdeviceptr xa, xb;
        CUevent xev;
        CK(cuMemAlloc(&xa, N * 4));
        CK(cuMemAlloc(&xb, N * 4));
        CK(cuEventCreate(&xev, CU_EVENT_DISABLE_TIMING));
        build_explicit(&x, xa, xb, 5150u, xev);
        check_explicit(&x);
        /* a kernel node whose exec was given other parameters */
        CUdeviceptr kd;
        unsigned kv = 7;
        int kn = N;
        CUgraphNode knode;
        CUgraphExec ke;
        CK(cuMemAlloc(&kd, N * 4));
        CUgraph kg = kernel_graph(&kd, &kv, &kn, &knode);
        CK(cuGraphInstantiateWithFlags(&ke, kg, 0));
        kv = 8;
        set_fill(ke, knode, &kd, &kv, &kn);
        /* host nodes: an exec whose second host node was set in the exec
         * (and its kernel's parameters), and a captured host function */
        struct host_graph hg;
        CUgraphExec he, hc;
        build_host_graph(&hg);
        CK(cuGraphInstantiateWithFlags(&he, hg.g, 0));
        run_host_graph(&hg, he, s1, 1, 2, 5, 3);
        CUDA_HOST_NODE_PARAMS hp = { .fn = host_rec, .userData = (void *)(intptr_t)22 };
        CK(cuGraphExecHostNodeSetParams(he, hg.h2, &hp));
        unsigned hv8 = 8;
        void *hpb[] = { &hg.b, &hv8, &hg.n };
        CUDA_KERNEL_NODE_PARAMS hkp = fill_params(hpb);
        CK(cuGraphExecKernelNodeSetParams(he, hg.kb, &hkp));
        run_host_graph(&hg, he, s1, 1, 22, 8, 3);
        CUgraph hinner, houter = host_child_graph(&hg, &hinner), hcg;
        CUgraphExec hce;
        CK(cuGraphInstantiateWithFlags(&hce, houter, 0));
        run_host_child(&hg, hce, s1, 1);
        CUdeviceptr ha;
        CK(cuMemAlloc(&ha, N * 4));
        hl.watch[7] = ha;
        CK(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
        CK(cuMemsetD32Async(ha, 4, N, s1));
        CK(cuLaunchHostFunc(s1, host_rec, (void *)(intptr_t)7));
        fill(ha, 7, N, s1);
        CK(cuStreamEndCapture(s1, &hcg));
        CK(cuGraphInstantiateWithFlags(&hc, hcg, 0));
        CK(cuGraphInstantiateWithFlags(&e, g, 0));
        int total = 0;
        for (int i = 0; i < 3; i++, total++)
                CK(cuGraphLaunch(e, s1));
        CK(cuStreamSynchronize(s1));
        check_results(&b, total);
        printf("ready\n");
        fflush(stdout);
        char line[64];
        for (int round = 1; fgets(line, sizeof(line), stdin); round++) {
                if (!strncmp(line, "end", 3))
                        break;
                /* the restored graph writes the global again */
                CK(cuMemsetD32(b.table, 0, 4));
                CK(cuGraphLaunch(e, s1));
                total++;
                CUgraphExec ec;
                CK(cuGraphInstantiateWithFlags(&ec, c, 0));
                CK(cuGraphLaunch(ec, s1));
                total++;
                CK(cuStreamSynchronize(s1));
                check_results(&b, total);
                CK(cuGraphExecDestroy(ec));
                /* the explicit graph, its node ids and edges as they were */
                check_explicit(&x);
                run_explicit(&x, xb, 5150u, s1, xev);
                /* the exec keeps its own parameters, the graph its own */
                CK(cuMemsetD32(kd, 0, N));
                CK(cuGraphLaunch(ke, s1));
                CK(cuStreamSynchronize(s1));
                expect_u32(kd, 8u + (unsigned)round - 1);
                kv = 8u + (unsigned)round; /* and can be changed again after the restart */
                set_fill(ke, knode, &kd, &kv, &kn);
                CUgraphExec ke2;
                CK(cuGraphInstantiateWithFlags(&ke2, kg, 0));
                CK(cuGraphLaunch(ke2, s1));
                CK(cuStreamSynchronize(s1));
                expect_u32(kd, 7);
                CK(cuGraphExecDestroy(ke2));
                /* the host node execs as they were; a new exec of the graph */
                run_host_graph(&hg, he, s1, 1, 22, 8, 3);
                CUgraphExec he2;
                CK(cuGraphInstantiateWithFlags(&he2, hg.g, 0));
                run_host_graph(&hg, he2, s1, 1, 2, 5, 3);
                CK(cuGraphExecDestroy(he2));
                CK(cuMemsetD32(ha, 0, N));
                CK(cuGraphLaunch(hc, s1));
                CK(cuStreamSynchronize(s1));
                const int ids7[1] = { 7 };
                const unsigned seen4[1] = { 4 };
                expect_seq(1, ids7, seen4);
                expect_u32(ha, 7);
                run_host_child(&hg, hce, s1, 1); /* host nodes brought up from child graphs */
                printf("again %d\n", round);
                fflush(stdout);
        }
        CK(cuGraphExecDestroy(e));
        CK(cuGraphDestroy(g));
        CK(cuGraphDestroy(c));
        CK(cuGraphDestroy(x.g));
        CK(cuGraphExecDestroy(ke));
        CK(cuGraphDestroy(kg));
        CK(cuGraphExecDestroy(he));
        CK(cuGraphExecDestroy(hc));
        CK(cuGraphDestroy(hg.g));
        CK(cuGraphDestroy(hcg));
        CK(cuGraphExecDestroy(hce));
        CK(cuGraphDestroy(houter));
        CK(cuGraphDestroy(hinner));
        printf("e2e_graphs restart: OK\n");
        return 0;
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                fprintf(stderr, "usage: %s KERNELS_DIR [restart]\n", argv[0]);
                return 2;
        }
        dir = argv[1];
        char name[256];
        e2e_setup("e2e_graphs", name, &ctx, dir, &mod);
        on_sim = e2e_on_sim(name);
        through_lupine = e2e_through_lupine(name);
        CK(cuModuleGetFunction(&f_saxpy, mod, "saxpy_f32"));
        CK(cuModuleGetFunction(&f_fill, mod, "fill_u32"));
        if (argc > 2 && !strcmp(argv[2], "restart"))
                return restart_mode();
        test_capture();
        test_illegal();
        test_explicit();
        test_kernel_nodes();
        test_capture_deps();
        test_host_nodes();
        return e2e_verdict("e2e_graphs");
}
