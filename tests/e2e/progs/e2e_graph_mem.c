/* SPDX-License-Identifier: MIT */
/*
 * Graph memory: memory alloc and free nodes, explicit and captured from
 * cuMemAllocAsync / cuMemFreeAsync, with every result checked exactly.
 * Runs through lupine (sim or GPU) and, on the GPU machine, straight on
 * the real driver as a baseline: only the driver's documented behaviour
 * is asserted.
 *
 * usage: e2e_graph_mem DIR            the checks
 *        e2e_graph_mem DIR restart    builds the graphs, prints "ready",
 *                                     then for each line read from stdin
 *                                     relaunches them and checks them
 *                                     ("again N" per line)
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "e2e_util.h"

static const char *dir;
static CUcontext ctx;
static CUmodule mod;
static CUfunction f_fill;

#define N 4099

static void expect_u32(CUdeviceptr d, unsigned want, const char *what)
{
        static unsigned h[N];
        CK(cuMemcpyDtoH(h, d, sizeof(h)));
        for (int i = 0; i < N; i++)
                if (h[i] != want) {
                        fprintf(stderr, "%s[%d] = %u, expected %u\n", what, i, h[i], want);
                        exit(1);
                }
}

static CUDA_MEM_ALLOC_NODE_PARAMS alloc_params(size_t bytes)
{
        CUDA_MEM_ALLOC_NODE_PARAMS p;
        memset(&p, 0, sizeof(p));
        p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        p.poolProps.location.id = 0;
        p.bytesize = bytes;
        return p;
}

/* The kernel node fill_u32(*d, *v, *n). */
static CUgraphNode add_fill(CUgraph g, const CUgraphNode *deps, size_t n, CUdeviceptr *d, unsigned *v, int *cnt)
{
        void *p[] = { d, v, cnt };
        CUDA_KERNEL_NODE_PARAMS k;
        CUgraphNode node;
        memset(&k, 0, sizeof(k));
        k.func = f_fill;
        k.gridDimX = 1, k.gridDimY = 1, k.gridDimZ = 1;
        k.blockDimX = 64, k.blockDimY = 1, k.blockDimZ = 1;
        k.kernelParams = p;
        CK(cuGraphAddKernelNode(&node, g, deps, n, &k));
        return node;
}

static CUgraphNode add_copy(CUgraph g, CUgraphNode dep, CUdeviceptr dst, CUdeviceptr src, size_t bytes)
{
        CUDA_MEMCPY3D c;
        CUgraphNode node;
        memset(&c, 0, sizeof(c));
        c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        c.srcDevice = src;
        c.dstDevice = dst;
        c.WidthInBytes = bytes;
        c.Height = c.Depth = 1;
        CK(cuGraphAddMemcpyNode(&node, g, &dep, 1, &c, ctx));
        return node;
}

static CUgraphNodeType type_of(CUgraphNode n)
{
        CUgraphNodeType t;
        CK(cuGraphNodeGetType(n, &t));
        return t;
}

/* alloc -> fill(value) -> copy to out -> free */
struct explicit_graph {
        CUgraph g;
        CUgraphNode an, k, cp, fn;
        CUdeviceptr p, out;
        unsigned v;
        int cnt;
};

static void build_explicit(struct explicit_graph *x, CUdeviceptr out, unsigned v)
{
        CUDA_MEM_ALLOC_NODE_PARAMS ap = alloc_params(N * 4);
        x->out = out;
        x->v = v;
        x->cnt = N;
        CK(cuGraphCreate(&x->g, 0));
        CK(cuGraphAddMemAllocNode(&x->an, x->g, NULL, 0, &ap));
        x->p = ap.dptr;
        EXPECT(x->p != 0);
        x->k = add_fill(x->g, &x->an, 1, &x->p, &x->v, &x->cnt);
        x->cp = add_copy(x->g, x->k, out, x->p, N * 4);
        CK(cuGraphAddMemFreeNode(&x->fn, x->g, &x->cp, 1, x->p));
}

static void check_explicit_nodes(const struct explicit_graph *x)
{
        CUDA_MEM_ALLOC_NODE_PARAMS got;
        CUdeviceptr fp = 0;
        EXPECT(type_of(x->an) == CU_GRAPH_NODE_TYPE_MEM_ALLOC);
        EXPECT(type_of(x->fn) == CU_GRAPH_NODE_TYPE_MEM_FREE);
        EXPECT(type_of(x->k) == CU_GRAPH_NODE_TYPE_KERNEL);
        CK(cuGraphMemAllocNodeGetParams(x->an, &got));
        EXPECT(got.dptr == x->p && got.bytesize == N * 4);
        EXPECT(got.poolProps.allocType == CU_MEM_ALLOCATION_TYPE_PINNED);
        EXPECT(got.poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE && got.poolProps.location.id == 0);
        CK(cuGraphMemFreeNodeGetParams(x->fn, &fp));
        EXPECT(fp == x->p);
        EXPECT_ERR(cuGraphMemAllocNodeGetParams(x->k, &got), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuGraphMemFreeNodeGetParams(x->an, &fp), CUDA_ERROR_INVALID_VALUE);
        size_t n = 0;
        CK(cuGraphGetNodes(x->g, NULL, &n));
        EXPECT(n == 4);
        CUgraphNode roots[4];
        n = 4;
        CK(cuGraphGetRootNodes(x->g, roots, &n));
        EXPECT(n == 1 && roots[0] == x->an);
        CUgraphNode deps[4];
        n = 4;
        CK(cuGraphNodeGetDependencies(x->fn, deps, NULL, &n));
        EXPECT(n == 1 && deps[0] == x->cp);
}

static void launch_explicit(CUgraphExec e, const struct explicit_graph *x, CUstream s)
{
        CK(cuMemsetD32Async(x->out, 0, N, s));
        CK(cuGraphLaunch(e, s));
        CK(cuStreamSynchronize(s));
        expect_u32(x->out, x->v, "explicit graph's copy of its graph memory");
}

static void test_explicit(void)
{
        struct explicit_graph x;
        CUdeviceptr out, plain;
        CUgraphExec e, e2;
        CUgraph c;
        CUgraphNode fn;
        CUstream s;
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CK(cuMemAlloc(&out, N * 4));
        CK(cuMemAlloc(&plain, 4096));
        build_explicit(&x, out, 0xabcd);
        check_explicit_nodes(&x);
        /* free nodes: only this graph's allocations, each once */
        EXPECT_ERR(cuGraphAddMemFreeNode(&fn, x.g, NULL, 0, x.p), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuGraphAddMemFreeNode(&fn, x.g, NULL, 0, x.p + 4), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuGraphAddMemFreeNode(&fn, x.g, NULL, 0, plain), CUDA_ERROR_INVALID_VALUE);
        /* such a graph loses no node and no edge, and cannot be cloned */
        EXPECT_ERR(cuGraphClone(&c, x.g), CUDA_ERROR_NOT_SUPPORTED);
        EXPECT_ERR(cuGraphDestroyNode(x.an), CUDA_ERROR_NOT_SUPPORTED);
        EXPECT_ERR(cuGraphDestroyNode(x.k), CUDA_ERROR_NOT_SUPPORTED);
        EXPECT_ERR(cuGraphRemoveDependencies(x.g, &x.k, &x.cp, NULL, 1), CUDA_ERROR_NOT_SUPPORTED);
        {
                CUgraph parent;
                CUgraphNode child;
                CK(cuGraphCreate(&parent, 0));
                EXPECT_ERR(cuGraphAddChildGraphNode(&child, parent, NULL, 0, x.g), CUDA_ERROR_NOT_SUPPORTED);
                CK(cuGraphDestroy(parent));
        }
        CK(cuGraphInstantiateWithFlags(&e, x.g, 0));
        EXPECT_ERR(cuGraphInstantiateWithFlags(&e2, x.g, 0), CUDA_ERROR_NOT_SUPPORTED); /* one at a time */
        for (int i = 0; i < 3; i++) /* freed in the graph: relaunches are fine */
                launch_explicit(e, &x, s);
        CK(cuGraphExecDestroy(e));
        CK(cuGraphInstantiateWithFlags(&e, x.g, 0));
        launch_explicit(e, &x, s);
        CK(cuGraphDestroy(x.g)); /* the exec keeps the graph's memory */
        launch_explicit(e, &x, s);
        launch_explicit(e, &x, s);
        CK(cuGraphExecDestroy(e));
        CK(cuMemFree(out));
        CK(cuMemFree(plain));
        CK(cuStreamDestroy(s));
}

/* An allocation the graph does not free: usable after the launch, freed
 * by the stream (then the graph may run again), or AUTO_FREE_ON_LAUNCH. */
static void test_unfreed(void)
{
        CUDA_MEM_ALLOC_NODE_PARAMS ap = alloc_params(N * 4);
        CUgraph g;
        CUgraphNode an;
        CUgraphExec e;
        CUstream s;
        unsigned v = 0x1234;
        int cnt = N;
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CK(cuGraphCreate(&g, 0));
        CK(cuGraphAddMemAllocNode(&an, g, NULL, 0, &ap));
        CUdeviceptr p = ap.dptr;
        add_fill(g, &an, 1, &p, &v, &cnt);
        CK(cuGraphInstantiateWithFlags(&e, g, 0));
        CK(cuGraphLaunch(e, s));
        CK(cuStreamSynchronize(s));
        expect_u32(p, 0x1234, "graph memory after the launch");
        EXPECT_ERR(cuGraphLaunch(e, s), CUDA_ERROR_INVALID_VALUE); /* not freed yet */
        CK(cuMemsetD32Async(p, 7, N, s));                          /* still the caller's */
        CK(cuStreamSynchronize(s));
        expect_u32(p, 7, "graph memory written by the stream");
        CK(cuMemFreeAsync(p, s));
        CK(cuGraphLaunch(e, s));
        CK(cuStreamSynchronize(s));
        expect_u32(p, 0x1234, "graph memory after a relaunch");
        CK(cuStreamSynchronize(s));
        CK(cuMemFree(p));
        CK(cuGraphExecDestroy(e));
        CK(cuGraphInstantiateWithFlags(&e, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
        for (int i = 0; i < 3; i++)
                CK(cuGraphLaunch(e, s));
        CK(cuStreamSynchronize(s));
        expect_u32(p, 0x1234, "graph memory, auto-freed on launch");
        CK(cuMemFreeAsync(p, s));
        CK(cuStreamSynchronize(s));
        CK(cuGraphExecDestroy(e));
        CK(cuGraphDestroy(g));
        CK(cuStreamDestroy(s));
}

/* Captured: alloc -> fill -> copy to out -> free (from the current pool
 * or from the default pool by name), and an allocation that leaves the
 * graph (kept = its address). */
struct captured {
        CUgraph g;
        CUdeviceptr out, kept;
        unsigned v;
};

static void capture_graph(struct captured *c, CUstream s, CUdeviceptr out, unsigned v, int from_pool)
{
        CUdeviceptr p;
        CUmemoryPool pool;
        int cnt = N;
        c->out = out;
        c->v = v;
        CK(cuDeviceGetDefaultMemPool(&pool, 0));
        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        if (from_pool)
                CK(cuMemAllocFromPoolAsync(&p, N * 4, pool, s));
        else
                CK(cuMemAllocAsync(&p, N * 4, s));
        EXPECT(p != 0);
        void *kp[] = { &p, &c->v, &cnt };
        CK(cuLaunchKernel(f_fill, 1, 1, 1, 64, 1, 1, 0, s, kp, NULL));
        CK(cuMemcpyDtoDAsync(out, p, N * 4, s));
        CK(cuMemFreeAsync(p, s));
        CK(cuMemAllocAsync(&c->kept, 256 * 4, s));
        int kcnt = 256;
        void *kp2[] = { &c->kept, &c->v, &kcnt };
        CK(cuLaunchKernel(f_fill, 1, 1, 1, 64, 1, 1, 0, s, kp2, NULL));
        CK(cuStreamEndCapture(s, &c->g));
        /* alloc, kernel, copy, free, alloc, kernel: a chain */
        size_t n = 0;
        CK(cuGraphGetNodes(c->g, NULL, &n));
        EXPECT(n == 6);
        CUgraphNode nodes[6], roots[6];
        CK(cuGraphGetNodes(c->g, nodes, &n));
        int allocs = 0, frees = 0;
        for (size_t i = 0; i < n; i++) {
                CUgraphNodeType t = type_of(nodes[i]);
                if (t == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
                        CUDA_MEM_ALLOC_NODE_PARAMS ap;
                        CK(cuGraphMemAllocNodeGetParams(nodes[i], &ap));
                        EXPECT((ap.dptr == p && ap.bytesize == N * 4) || (ap.dptr == c->kept && ap.bytesize == 1024));
                        EXPECT(ap.poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE);
                        allocs++;
                } else if (t == CU_GRAPH_NODE_TYPE_MEM_FREE) {
                        CUdeviceptr fp;
                        CK(cuGraphMemFreeNodeGetParams(nodes[i], &fp));
                        EXPECT(fp == p);
                        frees++;
                }
        }
        EXPECT(allocs == 2 && frees == 1);
        n = 6;
        CK(cuGraphGetRootNodes(c->g, roots, &n));
        EXPECT(n == 1 && type_of(roots[0]) == CU_GRAPH_NODE_TYPE_MEM_ALLOC);
}

static void launch_captured(CUgraphExec e, const struct captured *c, CUstream s)
{
        CK(cuMemsetD32Async(c->out, 0, N, s));
        CK(cuGraphLaunch(e, s));
        CK(cuStreamSynchronize(s));
        expect_u32(c->out, c->v, "captured graph's copy of its graph memory");
        unsigned h[256];
        CK(cuMemcpyDtoH(h, c->kept, sizeof(h)));
        for (int i = 0; i < 256; i++)
                EXPECT(h[i] == c->v);
        CK(cuMemFreeAsync(c->kept, s)); /* the allocation that left the graph */
        CK(cuStreamSynchronize(s));
}

static void test_captured(void)
{
        CUstream s;
        CUdeviceptr out;
        CUgraphExec e;
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CK(cuMemAlloc(&out, N * 4));
        for (int from_pool = 0; from_pool < 2; from_pool++) {
                struct captured c;
                capture_graph(&c, s, out, 0x5a5a + from_pool, from_pool);
                CK(cuGraphInstantiateWithFlags(&e, c.g, 0));
                for (int i = 0; i < 3; i++)
                        launch_captured(e, &c, s);
                CK(cuGraphLaunch(e, s));
                EXPECT_ERR(cuGraphLaunch(e, s), CUDA_ERROR_INVALID_VALUE); /* kept is not freed */
                CK(cuMemFree(c.kept));
                CK(cuGraphExecDestroy(e));
                CK(cuGraphDestroy(c.g));
        }
        CK(cuMemFree(out));
        CK(cuStreamDestroy(s));
}

/* cuGraphAddNode's generic form of both nodes */
static void test_generic(void)
{
        CUgraph g;
        CUgraphNode an, k, fn;
        CUgraphNodeParams np;
        CUgraphExec e;
        CUstream s;
        unsigned v = 0x600d;
        int cnt = N;
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CK(cuGraphCreate(&g, 0));
        memset(&np, 0, sizeof(np));
        np.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
        np.alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        np.alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        np.alloc.bytesize = N * 4;
        CK(cuGraphAddNode(&an, g, NULL, NULL, 0, &np));
        CUdeviceptr p = np.alloc.dptr;
        EXPECT(p != 0 && type_of(an) == CU_GRAPH_NODE_TYPE_MEM_ALLOC);
        k = add_fill(g, &an, 1, &p, &v, &cnt);
        memset(&np, 0, sizeof(np));
        np.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
        np.free.dptr = p + 8;
        EXPECT_ERR(cuGraphAddNode(&fn, g, &k, NULL, 1, &np), CUDA_ERROR_INVALID_VALUE);
        np.free.dptr = p;
        CK(cuGraphAddNode(&fn, g, &k, NULL, 1, &np));
        EXPECT(type_of(fn) == CU_GRAPH_NODE_TYPE_MEM_FREE);
        CK(cuGraphInstantiateWithFlags(&e, g, 0));
        CK(cuGraphLaunch(e, s));
        CK(cuGraphLaunch(e, s));
        CK(cuStreamSynchronize(s));
        CK(cuGraphExecDestroy(e));
        CK(cuGraphDestroy(g));
        CK(cuStreamDestroy(s));
}

/* A capture that fails takes its allocations with it. */
static void test_capture_invalidated(void)
{
        CUstream s;
        CUgraph g = NULL;
        CUdeviceptr p;
        cuuint64_t before = 0, after = 1;
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &before));
        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        CK(cuMemAllocAsync(&p, N * 4, s));
        EXPECT_ERR(cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        EXPECT_ERR(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        EXPECT(g == NULL);
        CK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &after));
        EXPECT(after == before);
        CK(cuStreamDestroy(s));
}

/* Graph memory given back while another stream captures (relaxed mode:
 * driver 580 refuses cuGraphExecDestroy during a global capture with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED): the capture is not disturbed. */
static void test_destroy_during_capture(void)
{
        struct explicit_graph x;
        CUdeviceptr out, p;
        CUgraphExec e;
        CUgraph g;
        CUstream s, s2;
        cuuint64_t held = 0, after = 0;
        int cnt = 64;
        unsigned v = 3;
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
        CK(cuMemAlloc(&out, N * 4));
        CK(cuMemAlloc(&p, 256));
        build_explicit(&x, out, 41);
        CK(cuGraphInstantiateWithFlags(&e, x.g, 0));
        launch_explicit(e, &x, s);
        CK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &held));
        CK(cuStreamBeginCapture(s2, CU_STREAM_CAPTURE_MODE_RELAXED));
        void *kp[] = { &p, &v, &cnt };
        CK(cuLaunchKernel(f_fill, 1, 1, 1, 64, 1, 1, 0, s2, kp, NULL));
        CK(cuGraphExecDestroy(e));
        CK(cuGraphDestroy(x.g));
        CK(cuStreamEndCapture(s2, &g));
        CK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &after));
        EXPECT(after <= held);
        CK(cuGraphDestroy(g));
        CK(cuMemFree(out));
        CK(cuMemFree(p));
        CK(cuStreamDestroy(s));
        CK(cuStreamDestroy(s2));
}

static void test_attributes(void)
{
        struct explicit_graph x;
        CUdeviceptr out;
        CUgraphExec e;
        CUstream s;
        cuuint64_t v = 0, zero = 0, one = 1;
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CK(cuMemAlloc(&out, N * 4));
        build_explicit(&x, out, 99);
        CK(cuGraphInstantiateWithFlags(&e, x.g, 0));
        launch_explicit(e, &x, s);
        CK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &v));
        EXPECT(v >= N * 4);
        CK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH, &v));
        EXPECT(v >= N * 4);
        CK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &v));
        CK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &v));
        CK(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &zero));
        CK(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH, &zero));
        EXPECT_ERR(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &one), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &zero),
                   CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, NULL), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuDeviceGetGraphMemAttribute(99, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &v), CUDA_ERROR_INVALID_DEVICE);
        EXPECT_ERR(cuDeviceGraphMemTrim(99), CUDA_ERROR_INVALID_DEVICE);
        CK(cuDeviceGraphMemTrim(0));
        CK(cuGraphExecDestroy(e));
        CK(cuGraphDestroy(x.g));
        CK(cuMemFree(out));
        CK(cuStreamDestroy(s));
}

static void test_bad(void)
{
        CUgraph g;
        CUgraphNode n;
        CUDA_MEM_ALLOC_NODE_PARAMS ap = alloc_params(0);
        CK(cuGraphCreate(&g, 0));
        EXPECT_ERR(cuGraphAddMemAllocNode(&n, g, NULL, 0, &ap), CUDA_ERROR_INVALID_VALUE); /* no bytes */
        ap = alloc_params(1ull << 50);
        EXPECT_ERR(cuGraphAddMemAllocNode(&n, g, NULL, 0, &ap), CUDA_ERROR_OUT_OF_MEMORY);
        ap = alloc_params(4096);
        ap.poolProps.location.id = 99;
        EXPECT_ERR(cuGraphAddMemAllocNode(&n, g, NULL, 0, &ap), CUDA_ERROR_INVALID_VALUE);
        ap = alloc_params(4096);
        ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_INVALID;
        EXPECT_ERR(cuGraphAddMemAllocNode(&n, g, NULL, 0, &ap), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuGraphAddMemAllocNode(&n, g, NULL, 0, NULL), CUDA_ERROR_INVALID_VALUE);
        EXPECT_ERR(cuGraphAddMemFreeNode(&n, g, NULL, 0, 0x1000), CUDA_ERROR_INVALID_VALUE);
        { /* a dependency of another graph: no node, and nothing kept */
                CUgraph g2;
                CUgraphNode other;
                cuuint64_t before = 0, after = 1;
                CK(cuGraphCreate(&g2, 0));
                CK(cuGraphAddEmptyNode(&other, g2, NULL, 0));
                CK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &before));
                ap = alloc_params(4096);
                EXPECT_ERR(cuGraphAddMemAllocNode(&n, g, &other, 1, &ap), CUDA_ERROR_INVALID_VALUE);
                CK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &after));
                EXPECT(after == before);
                CK(cuGraphDestroy(g2));
        }
        size_t count = 1;
        CK(cuGraphGetNodes(g, NULL, &count));
        EXPECT(count == 0); /* nothing was added */
        CK(cuGraphDestroy(g));
}

/* Graphs that a restart must keep: the explicit one and a captured one,
 * relaunched after each line on stdin. */
static int restart_mode(void)
{
        CUstream s;
        CUdeviceptr out1, out2;
        struct explicit_graph x;
        struct captured c;
        CUgraphExec ex, ec;
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CK(cuMemAlloc(&out1, N * 4));
        CK(cuMemAlloc(&out2, N * 4));
        build_explicit(&x, out1, 0x7001);
        capture_graph(&c, s, out2, 0x7002, 0);
        CK(cuGraphInstantiateWithFlags(&ex, x.g, 0));
        CK(cuGraphInstantiateWithFlags(&ec, c.g, 0));
        launch_explicit(ex, &x, s);
        launch_captured(ec, &c, s);
        /* kept goes through each restart allocated, with its contents */
        CK(cuGraphLaunch(ec, s));
        CK(cuStreamSynchronize(s));
        /* a capture left open: the drain ends it, and its allocation goes */
        CUstream s2;
        CUdeviceptr open_p;
        cuuint64_t used_before = 0, used_open = 0, used_after = 0;
        CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
        CK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used_before));
        CK(cuStreamBeginCapture(s2, CU_STREAM_CAPTURE_MODE_RELAXED));
        CK(cuMemAllocAsync(&open_p, 1 << 20, s2));
        CK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used_open));
        EXPECT(used_open == used_before + (1 << 20));
        printf("ready\n");
        fflush(stdout);
        char line[64];
        unsigned h[256];
        for (int round = 1; fgets(line, sizeof(line), stdin); round++) {
                if (!strncmp(line, "end", 3))
                        break;
                CK(cuMemcpyDtoH(h, c.kept, sizeof(h)));
                for (int i = 0; i < 256; i++)
                        EXPECT(h[i] == c.v);
                EXPECT_ERR(cuGraphLaunch(ec, s), CUDA_ERROR_INVALID_VALUE); /* still not freed */
                CK(cuMemFree(c.kept));
                if (round == 1) {
                        CUgraph none = NULL;
                        EXPECT_ERR(cuStreamEndCapture(s2, &none), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
                        EXPECT(none == NULL);
                        CK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used_after));
                        EXPECT(used_after == used_before);
                        CK(cuStreamDestroy(s2));
                }
                check_explicit_nodes(&x);
                launch_explicit(ex, &x, s);
                launch_captured(ec, &c, s);
                CK(cuGraphLaunch(ec, s));
                CK(cuStreamSynchronize(s));
                expect_u32(c.out, c.v, "captured graph after a restart");
                printf("again %d\n", round);
                fflush(stdout);
        }
        CK(cuMemFree(c.kept));
        CK(cuGraphExecDestroy(ex));
        CK(cuGraphExecDestroy(ec));
        CK(cuGraphDestroy(x.g));
        CK(cuGraphDestroy(c.g));
        return e2e_verdict("e2e_graph_mem restart");
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                fprintf(stderr, "usage: %s KERNELS_DIR [restart]\n", argv[0]);
                return 2;
        }
        dir = argv[1];
        char name[256];
        e2e_setup("e2e_graph_mem", name, &ctx, dir, &mod);
        CK(cuModuleGetFunction(&f_fill, mod, "fill_u32"));
        if (argc > 2 && !strcmp(argv[2], "restart"))
                return restart_mode();
        test_explicit();
        test_unfreed();
        test_captured();
        test_generic();
        test_capture_invalidated();
        test_destroy_during_capture();
        test_attributes();
        test_bad();
        return e2e_verdict("e2e_graph_mem");
}
