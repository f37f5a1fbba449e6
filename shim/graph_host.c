/* SPDX-License-Identifier: MIT */
/*
 * Graph host nodes in the shim.
 *
 * A host node's function runs in the client, as host callbacks do
 * (shim/api_stream.c). In the worker it is a real host node of the driver
 * whose function is a no-op and whose userData is a token minted here;
 * the table below keeps token -> {fn, userData} (client memory: it
 * outlives every daemon restart as it is). The same pair always gets the
 * same token, so setting a node's parameters again and again does not
 * grow the table.
 *
 * An exec whose graph has host nodes is split by the worker into segments
 * (daemon/worker/graph_host.c says how); the plan comes back at
 * instantiation. The exported cuGraphInstantiateWithFlags, cuGraphLaunch
 * and cuGraphExecDestroy are shim/api_graph_mem.c's, which call the
 * lupc_host_* functions here. cuGraphLaunch of such an exec launches segment 0
 * (fire-and-forget), and if host nodes follow it, waits for the stream and
 * calls each function in the calling thread; then segment 1, and so on.
 * An exec without host nodes launches as before, at no extra cost. The
 * difference from CUDA: the enqueuing thread waits for the work before
 * each host node and runs the function itself (docs/status.md). Launched
 * into a capturing stream, such an exec is captured as its segments (child
 * graph nodes) and its host nodes, in plan order.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "graph_host.h"
#include "log.h"
#include "shim_gen.h"
#include "u64map.h"

#define EXPORT __attribute__((visibility("default")))
#define ID(h)  ((uint64_t)(uintptr_t)(h))

#define MAX_TOKENS (1u << 24)


struct host_fn {
        CUhostFn fn;
        void *ud;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct host_fn *fns; /* token t is fns[t - 1] */
static uint32_t n_fns, cap_fns;
static struct lup_u64map by_pair = { .limit = MAX_TOKENS };
static struct lup_u64map plans = { .limit = LUP_MAX_HANDLES }; /* exec id -> struct plan */
static atomic_int n_plans;                                     /* 0: no launch looks anything up */

struct plan {
        uint32_t n;
        uint64_t w[]; /* the worker's words (daemon/worker/graph_host.c) */
};

static uint64_t pair_key(CUhostFn fn, void *ud)
{
        uint64_t k = ID(fn) * 0x9e3779b97f4a7c15ull ^ ID(ud);
        return k == UINT64_MAX ? 1 : k | 1;
}

/* The token of {fn, ud} (0: out of memory). */
static uint64_t token_of(CUhostFn fn, void *ud)
{
        uint64_t key = pair_key(fn, ud), t = 0;
        pthread_mutex_lock(&lock);
        if (lup_u64map_get(&by_pair, key, &t) && fns[t - 1].fn == fn && fns[t - 1].ud == ud)
                goto out;
        t = 0;
        if (n_fns == cap_fns) {
                uint32_t ncap = cap_fns ? cap_fns * 2 : 64;
                struct host_fn *n = ncap <= MAX_TOKENS ? realloc(fns, ncap * sizeof(*n)) : NULL;
                if (!n)
                        goto out;
                fns = n;
                cap_fns = ncap;
        }
        fns[n_fns++] = (struct host_fn){ .fn = fn, .ud = ud };
        t = n_fns;
        (void)lup_u64map_put(&by_pair, key, t); /* a collision: a new token, not shared */
out:
        pthread_mutex_unlock(&lock);
        return t;
}

static bool token_get(uint64_t t, struct host_fn *ret)
{
        bool ok;
        pthread_mutex_lock(&lock);
        ok = t && t <= n_fns;
        if (ok)
                *ret = fns[t - 1];
        pthread_mutex_unlock(&lock);
        return ok;
}

static bool any_tokens(void)
{
        pthread_mutex_lock(&lock);
        bool any = n_fns != 0;
        pthread_mutex_unlock(&lock);
        return any;
}

/* ---- plans */

static void plan_put(uint64_t exec, struct plan *p)
{
        uint64_t old = 0;
        pthread_mutex_lock(&lock);
        bool had = lup_u64map_del(&plans, exec, &old);
        if (p && lup_u64map_put(&plans, exec, (uint64_t)(uintptr_t)p) < 0) {
                free(p);
                p = NULL;
        }
        atomic_fetch_add(&n_plans, (p ? 1 : 0) - (had ? 1 : 0));
        pthread_mutex_unlock(&lock);
        free((void *)(uintptr_t)old);
}

/* A copy of the exec's plan (NULL: it has none). */
static struct plan *plan_copy(uint64_t exec)
{
        uint64_t v;
        struct plan *c = NULL;
        pthread_mutex_lock(&lock);
        if (lup_u64map_get(&plans, exec, &v)) {
                const struct plan *p = (const struct plan *)(uintptr_t)v;
                if ((c = malloc(sizeof(*c) + p->n * sizeof(c->w[0]))))
                        memcpy(c, p, sizeof(*c) + p->n * sizeof(c->w[0]));
        }
        pthread_mutex_unlock(&lock);
        return c;
}

/* Reads the exec's plan of n words from the worker. */
static CUresult plan_fetch(uint64_t exec, uint32_t n)
{
        if (!n) {
                plan_put(exec, NULL);
                return CUDA_SUCCESS;
        }
        struct plan *p = malloc(sizeof(*p) + (size_t)n * sizeof(p->w[0]));
        if (!p)
                return CUDA_ERROR_OUT_OF_MEMORY;
        p->n = n;
        for (uint32_t off = 0; off < n; off += LUP_GRAPH_LIST_PAGE) {
                uint64_t total, v[LUP_GRAPH_LIST_PAGE];
                CUresult r = lupc_send_lupGraphHostPlan((CUgraphExec)(uintptr_t)exec, off, &total, &v[0], &v[1], &v[2],
                                                        &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11],
                                                        &v[12], &v[13], &v[14], &v[15]);
                if (r == CUDA_SUCCESS && total != n)
                        r = CUDA_ERROR_UNKNOWN;
                if (r != CUDA_SUCCESS) {
                        free(p);
                        return r;
                }
                for (uint32_t i = 0; i < LUP_GRAPH_LIST_PAGE && off + i < n; i++)
                        p->w[off + i] = v[i];
        }
        plan_put(exec, p);
        return CUDA_SUCCESS;
}

CUresult lupc_host_plan_refresh(uint64_t exec)
{
        uint64_t total, v[LUP_GRAPH_LIST_PAGE];
        if (!any_tokens()) /* no host node was ever made: no exec has one */
                return CUDA_SUCCESS;
        CUresult r = lupc_send_lupGraphHostPlan((CUgraphExec)(uintptr_t)exec, 0, &total, &v[0], &v[1], &v[2], &v[3],
                                                &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11], &v[12],
                                                &v[13], &v[14], &v[15]);
        return r == CUDA_SUCCESS ? plan_fetch(exec, (uint32_t)total) : r;
}

/* The new token of host node `node` in exec's plan. */
static void plan_set_token(uint64_t exec, uint64_t node, uint64_t token)
{
        uint64_t v;
        pthread_mutex_lock(&lock);
        if (lup_u64map_get(&plans, exec, &v)) {
                struct plan *p = (struct plan *)(uintptr_t)v;
                for (uint32_t at = 0; at < p->n; at += 1 + 2 * (uint32_t)(p->w[at] >> 1))
                        for (uint32_t k = 0; k < p->w[at] >> 1 && at + 2 + 2 * k < p->n; k++)
                                if (p->w[at + 1 + 2 * k] == node)
                                        p->w[at + 2 + 2 * k] = token;
        }
        pthread_mutex_unlock(&lock);
}

/* ---- instantiate, launch, destroy */

CUresult lupc_host_exec_destroy(CUgraphExec e)
{
        CUresult r = lupc_send_cuGraphExecDestroy(e);
        if (r == CUDA_SUCCESS && atomic_load(&n_plans))
                plan_put(ID(e), NULL);
        return r;
}

CUresult lupc_host_instantiate(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
        unsigned int n = 0;
        CUresult r = lupc_send_lupGraphInstantiate(phGraphExec, hGraph, flags, &n);
        if (r == CUDA_SUCCESS && n && (r = plan_fetch(ID(*phGraphExec), n)) != CUDA_SUCCESS) {
                (void)lupc_host_exec_destroy(*phGraphExec);
                *phGraphExec = NULL;
        }
        return r;
}

/* Into a capturing stream, each segment's launch is captured (a child
 * graph node) and each host node captured again with its token, in plan
 * order; otherwise the host functions run here between the segments. */
static CUresult launch_split(uint64_t exec, uint64_t stream, struct plan *p)
{
        bool capturing = false;
        CUresult r = lupc_capture_active(stream, &capturing);
        uint32_t level = 0;
        for (uint32_t at = 0; r == CUDA_SUCCESS && at < p->n; level++) {
                uint64_t hdr = p->w[at++], cnt = hdr >> 1;
                if (hdr & 1)
                        r = lupc_send_lupGraphLaunchSeg((CUgraphExec)(uintptr_t)exec, level,
                                                        (CUstream)(uintptr_t)stream);
                if (r == CUDA_SUCCESS && cnt && !capturing)
                        r = cuStreamSynchronize((CUstream)(uintptr_t)stream);
                for (uint64_t k = 0; r == CUDA_SUCCESS && k < cnt; k++, at += 2) {
                        struct host_fn h;
                        if (at + 1 >= p->n || !token_get(p->w[at + 1], &h))
                                r = CUDA_ERROR_INVALID_VALUE;
                        else if (capturing)
                                r = lupc_send_lupLaunchHostFuncCapture((CUstream)(uintptr_t)stream, p->w[at + 1]);
                        else
                                h.fn(h.ud);
                }
        }
        return r;
}

CUresult lupc_host_launch(CUgraphExec e, CUstream stream)
{
        struct plan *p = atomic_load(&n_plans) ? plan_copy(ID(e)) : NULL;
        if (!p)
                return lupc_send_cuGraphLaunch(e, stream);
        CUresult r = launch_split(ID(e), ID(stream), p);
        free(p);
        return r;
}

/* ---- nodes */

EXPORT CUresult CUDAAPI cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                           size_t numDependencies, const CUDA_HOST_NODE_PARAMS *nodeParams)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!nodeParams || !nodeParams->fn)
                return CUDA_ERROR_INVALID_VALUE;
        uint64_t t = token_of(nodeParams->fn, nodeParams->userData);
        const uint64_t v[6] = { t };
        if (!t)
                return CUDA_ERROR_OUT_OF_MEMORY;
        return lupc_graph_add(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_HOST, v);
}

EXPORT CUresult CUDAAPI cuGraphHostNodeGetParams(CUgraphNode hNode, CUDA_HOST_NODE_PARAMS *nodeParams)
{
        unsigned t = 0;
        uint64_t v[6];
        struct host_fn h;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!hNode || !nodeParams)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = lupc_send_lupGraphNodeGet(hNode, &t, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]);
        if (r == CUDA_ERROR_NOT_SUPPORTED || (r == CUDA_SUCCESS && t != CU_GRAPH_NODE_TYPE_HOST))
                r = CUDA_ERROR_INVALID_VALUE; /* not a host node */
        if (r == CUDA_SUCCESS && !token_get(v[0], &h))
                r = CUDA_ERROR_INVALID_VALUE;
        if (r == CUDA_SUCCESS)
                *nodeParams = (CUDA_HOST_NODE_PARAMS){ .fn = h.fn, .userData = h.ud };
        return r;
}

static CUresult set_host(uint64_t exec, CUgraphNode n, const CUDA_HOST_NODE_PARAMS *p)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!n || !p || !p->fn)
                return CUDA_ERROR_INVALID_VALUE;
        uint64_t t = token_of(p->fn, p->userData);
        if (!t)
                return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r = lupc_send_lupGraphNodeSet(exec, ID(n), CU_GRAPH_NODE_TYPE_HOST, t, 0, 0, 0, 0, 0);
        if (r == CUDA_SUCCESS && exec)
                plan_set_token(exec, ID(n), t);
        return r;
}

EXPORT CUresult CUDAAPI cuGraphHostNodeSetParams(CUgraphNode hNode, const CUDA_HOST_NODE_PARAMS *nodeParams)
{
        return set_host(0, hNode, nodeParams);
}

EXPORT CUresult CUDAAPI cuGraphExecHostNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                     const CUDA_HOST_NODE_PARAMS *nodeParams)
{
        return hGraphExec ? set_host(ID(hGraphExec), hNode, nodeParams) : CUDA_ERROR_INVALID_VALUE;
}

/* ---- captured host functions */

CUresult lupc_host_capture(uint64_t stream, CUhostFn fn, void *userData, bool *done)
{
        bool active = false;
        *done = false;
        CUresult r = lupc_capture_active(stream, &active);
        if (r != CUDA_SUCCESS || !active)
                return r;
        uint64_t t = token_of(fn, userData);
        if (!t)
                return CUDA_ERROR_OUT_OF_MEMORY;
        r = lupc_send_lupLaunchHostFuncCapture((CUstream)(uintptr_t)stream, t);
        if (r == CUDA_ERROR_ILLEGAL_STATE) /* the capture ended meanwhile */
                return CUDA_SUCCESS;
        *done = true;
        return r;
}
