/* SPDX-License-Identifier: MIT */
/*
 * libcuda-sim: the corners of graphs and capture that are the sim's own
 * answers (where the driver's documentation leaves the result open) and
 * its robustness: stale and foreign handles, objects destroyed while in
 * use, launches from several threads. The driver-API behaviour shared with
 * the real driver is in tests/e2e/progs/e2e_graphs_sim.c.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#define assert_cu(call) assert_int_equal((call), CUDA_SUCCESS)
#define N               256

static CUcontext ctx;
static CUmodule mod;
static CUfunction f_fill, f_spin;

static int group_setup(void **state)
{
        (void)state;
        setenv("LUPINE_SIM_MEM_MB", "1024", 1);
        if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
            cuCtxSetCurrent(ctx) != CUDA_SUCCESS || cuModuleLoad(&mod, KERNELS_PTX) != CUDA_SUCCESS ||
            cuModuleGetFunction(&f_fill, mod, "fill_u32") != CUDA_SUCCESS ||
            cuModuleGetFunction(&f_spin, mod, "spin_ns") != CUDA_SUCCESS)
                return -1;
        return 0;
}

static int group_teardown(void **state)
{
        (void)state;
        cuModuleUnload(mod);
        cuCtxSetCurrent(NULL);
        return cuDevicePrimaryCtxRelease_v2(0) == CUDA_SUCCESS ? 0 : -1;
}

static CUgraphNode add_fill(CUgraph g, const CUgraphNode *deps, size_t n, CUdeviceptr *p, unsigned *v)
{
        static int cnt = N;
        void *args[] = { p, v, &cnt };
        CUDA_KERNEL_NODE_PARAMS k = { .func = f_fill,
                                      .gridDimX = 1,
                                      .gridDimY = 1,
                                      .gridDimZ = 1,
                                      .blockDimX = 32,
                                      .blockDimY = 1,
                                      .blockDimZ = 1,
                                      .kernelParams = args };
        CUgraphNode node;

        assert_cu(cuGraphAddKernelNode_v2(&node, g, deps, n, &k));
        return node;
}

static size_t count_nodes(CUgraph g)
{
        size_t n = 0;

        assert_cu(cuGraphGetNodes(g, NULL, &n));
        return n;
}

static void spin(CUstream s, unsigned long long ns)
{
        void *args[] = { &ns };

        assert_cu(cuLaunchKernel(f_spin, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
}

static void test_stale_handles(void **state)
{
        CUgraph g, bogus = (CUgraph)(uintptr_t)0x5c9000000000123ULL;
        CUgraphNode n, bogus_node = (CUgraphNode)(uintptr_t)0x12345;
        CUgraphExec x;
        CUgraphNodeType t;
        size_t cnt;

        (void)state;
        assert_int_equal(cuGraphDestroy(bogus), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuGraphGetNodes(bogus, NULL, &cnt), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuGraphNodeGetType(bogus_node, &t), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuGraphExecDestroy((CUgraphExec)bogus), CUDA_ERROR_INVALID_VALUE);
        /* A graph handle is not a node handle, nor an exec handle. */
        assert_cu(cuGraphCreate(&g, 0));
        assert_int_equal(cuGraphNodeGetType((CUgraphNode)g, &t), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuGraphLaunch((CUgraphExec)g, NULL), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuGraphAddEmptyNode(&n, g, NULL, 0));
        assert_int_equal(cuGraphAddEmptyNode(&n, g, &bogus_node, 1), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuGraphAddEmptyNode(&n, g, NULL, 1), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuGraphInstantiateWithFlags(&x, g, 0));
        assert_int_equal(cuGraphInstantiateWithFlags(&x, g, 1ULL << 40), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuGraphDestroy(g));
        /* The exec outlives its graph; launching it still works. */
        assert_cu(cuGraphLaunch(x, NULL));
        assert_cu(cuStreamSynchronize(NULL));
        assert_cu(cuGraphExecDestroy(x));
        assert_int_equal(cuGraphExecDestroy(x), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuGraphNodeGetType(n, &t), CUDA_ERROR_INVALID_VALUE);
}

/* Exec and graph destroyed while a launch waits behind slow work: the
 * launch still runs everything with the parameters it was given. */
static void test_destroy_while_pending(void **state)
{
        CUstream s;
        CUdeviceptr d;
        unsigned v = 0xabcd, h[N];
        CUgraph g;
        CUgraphExec x;

        (void)state;
        assert_cu(cuStreamCreate(&s, 0));
        assert_cu(cuMemAlloc_v2(&d, N * 4));
        assert_cu(cuMemsetD32_v2(d, 0, N));
        assert_cu(cuGraphCreate(&g, 0));
        add_fill(g, NULL, 0, &d, &v);
        assert_cu(cuGraphInstantiateWithFlags(&x, g, 0));
        spin(s, 50ULL * 1000 * 1000);
        assert_cu(cuGraphLaunch(x, s));
        assert_cu(cuGraphExecDestroy(x));
        assert_cu(cuGraphDestroy(g));
        assert_cu(cuStreamSynchronize(s));
        assert_cu(cuMemcpyDtoH_v2(h, d, sizeof(h)));
        for (int i = 0; i < N; i++)
                assert_int_equal(h[i], 0xabcd);
        assert_cu(cuMemFree_v2(d));
        assert_cu(cuStreamDestroy_v2(s));
}

/* While a capture adds to a graph, the graph and its nodes cannot be
 * destroyed (the driver permits every other operation on it). */
static void test_capture_graph_changes(void **state)
{
        CUstream s;
        CUgraph g, cg, child;
        CUgraphNode n;
        const CUgraphNode *deps;
        CUstreamCaptureStatus st;
        cuuint64_t id;
        size_t nd;

        (void)state;
        assert_cu(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        assert_cu(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
        assert_cu(cuStreamGetCaptureInfo_v2(s, &st, &id, &cg, &deps, &nd));
        assert_int_equal(cuGraphDestroy(cg), CUDA_ERROR_ILLEGAL_STATE);
        assert_cu(cuGraphCreate(&g, 0));
        assert_int_equal(cuGraphAddChildGraphNode(&n, g, NULL, 0, cg), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuGraphDestroy(g));
        assert_cu(cuMemsetD8Async(0, 0, 0, s)); /* an empty memset is still a node */
        assert_cu(cuStreamGetCaptureInfo_v2(s, &st, &id, &cg, &deps, &nd));
        assert_int_equal(nd, 1);
        n = deps[0];
        assert_int_equal(cuGraphDestroyNode(n), CUDA_ERROR_ILLEGAL_STATE);
        assert_cu(cuGraphAddEmptyNode(&n, cg, NULL, 0)); /* adding is fine */
        assert_cu(cuStreamGetCaptureInfo_v2(s, &st, &id, &cg, &deps, &nd));
        assert_int_equal(nd, 1);
        assert_cu(cuStreamEndCapture(s, &g));
        assert_int_equal(count_nodes(g), 2);
        assert_cu(cuGraphDestroyNode(n)); /* and, once it ended, removal too */
        assert_cu(cuGraphDestroy(g));

        /* No capture into a child graph. */
        assert_cu(cuGraphCreate(&g, 0));
        assert_cu(cuGraphCreate(&child, 0));
        assert_cu(cuGraphAddChildGraphNode(&n, g, NULL, 0, child));
        assert_cu(cuGraphChildGraphNodeGetGraph(n, &child));
        assert_int_equal(cuStreamBeginCaptureToGraph(s, child, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL),
                         CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuGraphDestroy(g));
        assert_cu(cuStreamDestroy_v2(s));
}

struct launcher {
        CUgraphExec x;
        CUstream s;
};

static void *launch_many(void *arg)
{
        struct launcher *l = arg;

        if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
                return (void *)1;
        for (int i = 0; i < 200; i++)
                if (cuGraphLaunch(l->x, l->s) != CUDA_SUCCESS)
                        return (void *)1;
        return cuStreamSynchronize(l->s) == CUDA_SUCCESS ? NULL : (void *)1;
}

/* One exec launched from four threads on four streams at once. */
static void test_threads(void **state)
{
        struct launcher l[4];
        pthread_t t[4];
        CUdeviceptr d[1];
        unsigned v = 5, h[N];
        CUgraph g;
        CUgraphNode a, b;
        CUgraphExec x;

        (void)state;
        assert_cu(cuMemAlloc_v2(&d[0], N * 4));
        assert_cu(cuGraphCreate(&g, 0));
        a = add_fill(g, NULL, 0, &d[0], &v);
        v = 6;
        b = add_fill(g, &a, 1, &d[0], &v);
        (void)b;
        assert_cu(cuGraphInstantiateWithFlags(&x, g, 0));
        for (int i = 0; i < 4; i++) {
                l[i].x = x;
                assert_cu(cuStreamCreate(&l[i].s, CU_STREAM_NON_BLOCKING));
                assert_int_equal(pthread_create(&t[i], NULL, launch_many, &l[i]), 0);
        }
        for (int i = 0; i < 4; i++) {
                void *ret;

                pthread_join(t[i], &ret);
                assert_null(ret);
                assert_cu(cuStreamDestroy_v2(l[i].s));
        }
        assert_cu(cuMemcpyDtoH_v2(h, d[0], sizeof(h)));
        for (int i = 0; i < N; i++)
                assert_int_equal(h[i], 6);
        assert_cu(cuGraphExecDestroy(x));
        assert_cu(cuGraphDestroy(g));
        assert_cu(cuMemFree_v2(d[0]));
}

/* A launch is ordered with the legacy stream like any work of a blocking
 * stream: a spin before it on the legacy stream holds it. */
static void test_stream_order(void **state)
{
        CUstream s;
        CUdeviceptr d;
        unsigned v = 9, h[N];
        CUgraph g;
        CUgraphExec x;

        (void)state;
        assert_cu(cuStreamCreate(&s, 0));
        assert_cu(cuMemAlloc_v2(&d, N * 4));
        assert_cu(cuGraphCreate(&g, 0));
        add_fill(g, NULL, 0, &d, &v);
        assert_cu(cuGraphInstantiateWithFlags(&x, g, 0));
        spin(NULL, 30ULL * 1000 * 1000);
        assert_cu(cuMemsetD32Async(d, 1, N, NULL));
        assert_cu(cuGraphLaunch(x, s)); /* after the legacy work */
        assert_cu(cuStreamSynchronize(s));
        assert_cu(cuMemcpyDtoH_v2(h, d, sizeof(h)));
        for (int i = 0; i < N; i++)
                assert_int_equal(h[i], 9);
        assert_cu(cuGraphExecDestroy(x));
        assert_cu(cuGraphDestroy(g));
        assert_cu(cuMemFree_v2(d));
        assert_cu(cuStreamDestroy_v2(s));
}

static _Atomic int big_calls, big_next, big_bad;

/* Chain node i must run right after node i + 1 (the chain's dependency
 * order), whatever ran between them. */
static void CUDA_CB big_host(void *arg)
{
        int i = (int)(intptr_t)arg;

        if (i != big_next)
                big_bad++;
        big_next = i - 1;
        big_calls++;
}

/* 20,000 nodes, half a chain built backwards (so that creation order is
 * no topological order), half roots: instantiation sorts in n log n, and
 * a launch runs every node after its dependencies. */
static void test_big_graph(void **state)
{
        enum {
                HALF = 10000
        };
        CUgraphNode *chain = calloc(HALF, sizeof(*chain)), n;
        CUDA_HOST_NODE_PARAMS hp = { .fn = big_host };
        struct timespec t0, t1;
        CUgraphExec x;
        CUgraph g;

        (void)state;
        assert_non_null(chain);
        assert_cu(cuGraphCreate(&g, 0));
        for (int i = 0; i < HALF; i++) {
                hp.userData = (void *)(intptr_t)i;
                assert_cu(cuGraphAddHostNode(&chain[i], g, NULL, 0, &hp));
                if (i > 0)
                        assert_cu(cuGraphAddDependencies_v2(g, &chain[i], &chain[i - 1], NULL, 1));
                assert_cu(cuGraphAddEmptyNode(&n, g, NULL, 0));
        }
        clock_gettime(CLOCK_MONOTONIC, &t0);
        assert_cu(cuGraphInstantiateWithFlags(&x, g, 0));
        clock_gettime(CLOCK_MONOTONIC, &t1);
        assert_true((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 2000);
        big_calls = big_bad = 0;
        big_next = HALF - 1;
        assert_cu(cuGraphLaunch(x, NULL));
        assert_cu(cuStreamSynchronize(NULL));
        assert_int_equal(big_calls, HALF);
        assert_int_equal(big_bad, 0);
        assert_cu(cuGraphExecDestroy(x));
        assert_cu(cuGraphDestroy(g));
        free(chain);
}

/* cuGraphExecUpdate pairs nodes by creation order and compares each
 * node's dependencies as a set. */
static void test_update_dep_order(void **state)
{
        CUgraph g1, g2;
        CUgraphNode a[3], b[3];
        CUgraphExec x;
        CUgraphExecUpdateResultInfo info;

        (void)state;
        assert_cu(cuGraphCreate(&g1, 0));
        assert_cu(cuGraphCreate(&g2, 0));
        for (int i = 0; i < 2; i++) {
                assert_cu(cuGraphAddEmptyNode(&a[i], g1, NULL, 0));
                assert_cu(cuGraphAddEmptyNode(&b[i], g2, NULL, 0));
        }
        assert_cu(cuGraphAddEmptyNode(&a[2], g1, a, 2));
        assert_cu(cuGraphAddEmptyNode(&b[2], g2, NULL, 0));
        assert_cu(cuGraphAddDependencies_v2(g2, &b[1], &b[2], NULL, 1));
        assert_cu(cuGraphAddDependencies_v2(g2, &b[0], &b[2], NULL, 1));
        assert_cu(cuGraphInstantiateWithFlags(&x, g1, 0));
        assert_cu(cuGraphExecUpdate_v2(x, g2, &info));
        assert_int_equal(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
        assert_cu(cuGraphRemoveDependencies_v2(g2, &b[0], &b[2], NULL, 1));
        assert_cu(cuGraphAddDependencies_v2(g2, &b[0], &b[1], NULL, 1));
        assert_int_equal(cuGraphExecUpdate_v2(x, g2, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
        assert_int_equal(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
        assert_cu(cuGraphExecDestroy(x));
        assert_cu(cuGraphDestroy(g1));
        assert_cu(cuGraphDestroy(g2));
}

/* The pre-11.4 instantiate: the node on a cycle, and a log. */
static void test_instantiate_log(void **state)
{
        CUgraph g;
        CUgraphNode a, b, err = NULL;
        CUgraphExec x;
        char log[64] = "x";

        (void)state;
        assert_cu(cuGraphCreate(&g, 0));
        assert_cu(cuGraphAddEmptyNode(&a, g, NULL, 0));
        assert_cu(cuGraphAddEmptyNode(&b, g, &a, 1));
        assert_cu(cuGraphAddDependencies_v2(g, &b, &a, NULL, 1));
        assert_int_equal(cuGraphInstantiate_v2(&x, g, &err, log, sizeof(log)), CUDA_ERROR_INVALID_VALUE);
        assert_true(err == a || err == b);
        assert_string_equal(log, "graph has a cycle");
        assert_cu(cuGraphRemoveDependencies_v2(g, &b, &a, NULL, 1));
        assert_cu(cuGraphInstantiate_v2(&x, g, &err, log, sizeof(log)));
        assert_string_equal(log, "");
        assert_cu(cuGraphExecDestroy(x));
        assert_cu(cuGraphDestroy(g));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_stale_handles),
                cmocka_unit_test(test_destroy_while_pending),
                cmocka_unit_test(test_capture_graph_changes),
                cmocka_unit_test(test_threads),
                cmocka_unit_test(test_stream_order),
                cmocka_unit_test(test_instantiate_log),
                cmocka_unit_test(test_big_graph),
                cmocka_unit_test(test_update_dep_order),
        };

        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
