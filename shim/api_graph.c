/* SPDX-License-Identifier: MIT */
/*
 * Stream capture and graphs in the shim.
 *
 * The worker really captures: lupStreamBeginCapture calls the driver's
 * cuStreamBeginCapture on the real stream, so what is forwarded to that
 * stream afterwards is captured by the driver, with the driver's errors.
 * The graph being captured gets its client id at the beginning, so
 * cuStreamGetCaptureInfo can name it.
 *
 * Capture state is answered here while no capture that this process began
 * is open (the common case, and what PyTorch asks most): every stream is
 * then not capturing. While one is open, the answer comes from the worker,
 * which asks the driver: streams that joined a capture through an event
 * wait, and captures the driver invalidated (a synchronisation during a
 * global capture, say), are then exactly what the driver says.
 *
 * What the shim does itself and the driver could not capture: host<->device
 * copies (their bytes travel through the worker's staging buffers, which
 * are reused) and host functions. On a capturing stream they are refused
 * with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, a log line, and the capture
 * is invalidated in the worker, as the driver does with an illegal call:
 * cuStreamEndCapture then answers CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.
 *
 * The calling thread's capture mode (cuThreadExchangeStreamCaptureMode) is
 * kept per thread here and sent to the worker when it changes; the worker
 * runs all of a session's calls on one thread, so a mode set by one client
 * thread applies to the calls of the others too (docs/status.md).
 */
#include <stdatomic.h>
#include <string.h>

#include "client.h"
#include "gmem.h"
#include "log.h"
#include "shim_gen.h"

#define EXPORT __attribute__((visibility("default")))

#undef cuStreamBeginCapture
#undef cuStreamEndCapture
#undef cuStreamGetCaptureInfo
#undef cuStreamUpdateCaptureDependencies
#undef cuStreamBeginCaptureToGraph
#undef cuGraphInstantiate
#undef cuGraphInstantiateWithParams

/* captures this process began and has not ended */
static atomic_int open_captures;
static pthread_mutex_t mode_lock = PTHREAD_MUTEX_INITIALIZER;
static int sent_mode = CU_STREAM_CAPTURE_MODE_GLOBAL; /* the worker thread's mode */
static __thread int thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
static __thread bool thread_mode_set;

static bool mode_ok(int mode)
{
        return mode == CU_STREAM_CAPTURE_MODE_GLOBAL || mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL ||
               mode == CU_STREAM_CAPTURE_MODE_RELAXED;
}

/* Makes the worker's thread mode this thread's before a call that cares. */
static CUresult sync_mode(void)
{
        int want = thread_mode_set ? thread_mode : CU_STREAM_CAPTURE_MODE_GLOBAL;
        CUresult r = CUDA_SUCCESS;
        pthread_mutex_lock(&mode_lock);
        if (want != sent_mode && (r = lupc_send_lupCaptureMode(want)) == CUDA_SUCCESS)
                sent_mode = want;
        pthread_mutex_unlock(&mode_lock);
        return r;
}

static CUresult begin_capture(CUstream s, int mode, int per_thread)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!mode_ok(mode))
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = sync_mode();
        if (r != CUDA_SUCCESS)
                return r;
        CUgraph g;
        r = lupc_send_lupStreamBeginCapture(&g, (CUstream)(uintptr_t)lupc_stream_id(s, per_thread), mode);
        if (r == CUDA_SUCCESS) {
                lupc_note_handle((uint64_t)(uintptr_t)g, LUPC_H_GRAPH);
                atomic_fetch_add(&open_captures, 1);
        }
        return r;
}

EXPORT CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
        return begin_capture(hStream, (int)mode, 0);
}

/* The CUDA 10.0 form: a global capture. */
EXPORT CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream);
EXPORT CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream)
{
        return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, 0);
}

EXPORT CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream hStream);
EXPORT CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream hStream)
{
        return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, 1);
}

/* Up to 8 dependencies a call; the rest are added by lupCaptureDeps. */
static CUresult more_deps(uint64_t s, const CUgraphNode *deps, size_t n, size_t from)
{
        CUresult r = CUDA_SUCCESS;
        for (size_t at = from; r == CUDA_SUCCESS && at < n; at += 8) {
                uint64_t d[8] = { 0 };
                size_t k = n - at < 8 ? n - at : 8;
                for (size_t i = 0; i < k; i++)
                        d[i] = (uint64_t)(uintptr_t)deps[at + i];
                r = lupc_send_lupCaptureDeps((CUstream)(uintptr_t)s, CU_STREAM_ADD_CAPTURE_DEPENDENCIES, (unsigned)k,
                                             d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]);
        }
        return r;
}

static bool default_edge_data(const CUgraphEdgeData *e, size_t n)
{
        static const CUgraphEdgeData zero;
        for (size_t i = 0; e && i < n; i++)
                if (memcmp(&e[i], &zero, sizeof(zero)))
                        return false;
        return true;
}

static CUresult begin_to_graph(CUstream st, CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *edges, size_t n,
                               int mode)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!g || !mode_ok(mode) || (n && !deps))
                return CUDA_ERROR_INVALID_VALUE;
        if (!default_edge_data(edges, n))
                return CUDA_ERROR_NOT_SUPPORTED; /* programmatic edges are not forwarded yet */
        CUresult r = sync_mode();
        if (r != CUDA_SUCCESS)
                return r;
        uint64_t s = (uint64_t)(uintptr_t)st, d[8] = { 0 };
        size_t k = n < 8 ? n : 8;
        for (size_t i = 0; i < k; i++)
                d[i] = (uint64_t)(uintptr_t)deps[i];
        r = lupc_send_lupStreamBeginCaptureToGraph(g, st, mode, (unsigned)k, d[0], d[1], d[2], d[3], d[4], d[5], d[6],
                                                   d[7]);
        if (r != CUDA_SUCCESS)
                return r;
        atomic_fetch_add(&open_captures, 1);
        return more_deps(s, deps, n, k);
}

EXPORT CUresult CUDAAPI cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
                                                    const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                                    CUstreamCaptureMode mode)
{
        return begin_to_graph((CUstream)(uintptr_t)lupc_stream_id(hStream, 0), hGraph, dependencies, dependencyData,
                              numDependencies, (int)mode);
}

static CUresult query(uint64_t s, CUstreamCaptureStatus *ret_status, uint64_t *ret_id, uint64_t *ret_graph,
                      uint64_t *ret_ndeps);

static CUresult update_deps(CUstream st, CUgraphNode *deps, const CUgraphEdgeData *edges, size_t n, unsigned int flags)
{
        uint64_t id, graph, ndeps;
        CUstreamCaptureStatus status;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        /* a stream that is not capturing comes first: driver 580 answers
         * ILLEGAL_STATE before it looks at the flags */
        CUresult q = query(lupc_stream_id(st, 0), &status, &id, &graph, &ndeps);
        if (q != CUDA_SUCCESS)
                return q;
        if (status == CU_STREAM_CAPTURE_STATUS_NONE)
                return CUDA_ERROR_ILLEGAL_STATE;
        if ((n && !deps) || flags > CU_STREAM_SET_CAPTURE_DEPENDENCIES)
                return CUDA_ERROR_INVALID_VALUE;
        if (!default_edge_data(edges, n))
                return CUDA_ERROR_NOT_SUPPORTED;
        uint64_t s = lupc_stream_id(st, 0), d[8] = { 0 };
        size_t k = n < 8 ? n : 8;
        for (size_t i = 0; i < k; i++)
                d[i] = (uint64_t)(uintptr_t)deps[i];
        /* the first call sets or adds, the others add */
        CUresult r = lupc_send_lupCaptureDeps((CUstream)(uintptr_t)s, flags, (unsigned)k, d[0], d[1], d[2], d[3], d[4],
                                              d[5], d[6], d[7]);
        return r == CUDA_SUCCESS ? more_deps(s, deps, n, k) : r;
}

EXPORT CUresult CUDAAPI cuStreamUpdateCaptureDependencies_v2(CUstream hStream, CUgraphNode *dependencies,
                                                             const CUgraphEdgeData *dependencyData,
                                                             size_t numDependencies, unsigned int flags)
{
        return update_deps(hStream, dependencies, dependencyData, numDependencies, flags);
}

EXPORT CUresult CUDAAPI cuStreamUpdateCaptureDependencies(CUstream hStream, CUgraphNode *dependencies,
                                                          size_t numDependencies, unsigned int flags);
EXPORT CUresult CUDAAPI cuStreamUpdateCaptureDependencies(CUstream hStream, CUgraphNode *dependencies,
                                                          size_t numDependencies, unsigned int flags)
{
        return update_deps(hStream, dependencies, NULL, numDependencies, flags);
}

/* What the worker says of stream s (wire id); CUDA_SUCCESS with NONE when
 * no capture is open. */
static CUresult query(uint64_t s, CUstreamCaptureStatus *status, uint64_t *id, uint64_t *graph, uint64_t *ndeps)
{
        int st = CU_STREAM_CAPTURE_STATUS_NONE;
        *id = *graph = *ndeps = 0;
        if (atomic_load(&open_captures) > 0) {
                CUresult r = lupc_send_lupStreamCaptureQuery((CUstream)(uintptr_t)s, &st, id, graph, ndeps);
                if (r != CUDA_SUCCESS)
                        return r;
        }
        *status = (CUstreamCaptureStatus)st;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        uint64_t s = lupc_stream_id(hStream, 0), id, graph, ndeps;
        CUstreamCaptureStatus st;
        CUresult r = query(s, &st, &id, &graph, &ndeps);
        if (r != CUDA_SUCCESS)
                return r;
        /* not capturing comes first: driver 580 answers ILLEGAL_STATE even
         * for a NULL phGraph */
        if (st == CU_STREAM_CAPTURE_STATUS_NONE)
                return CUDA_ERROR_ILLEGAL_STATE;
        if (!phGraph)
                return CUDA_ERROR_INVALID_VALUE;
        r = lupc_send_lupStreamEndCapture((CUstream)(uintptr_t)s, graph);
        /* the worker ended the capture unless it refused before trying
         * (UNMATCHED: not the stream that began it) */
        if (r != CUDA_ERROR_STREAM_CAPTURE_UNMATCHED && r != CUDA_ERROR_ILLEGAL_STATE)
                atomic_fetch_sub(&open_captures, 1);
        *phGraph = r == CUDA_SUCCESS ? (CUgraph)(uintptr_t)graph : NULL;
        if (r != CUDA_SUCCESS && r != CUDA_ERROR_STREAM_CAPTURE_UNMATCHED && r != CUDA_ERROR_ILLEGAL_STATE)
                lupc_gmem_capture_failed(graph); /* no graph: what it allocated goes */
        lupc_gmem_capture_ended(atomic_load(&open_captures));
        return r;
}

EXPORT CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
        uint64_t id, graph, ndeps;
        if (!captureStatus)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        return query(lupc_stream_id(hStream, 0), captureStatus, &id, &graph, &ndeps);
}

static CUresult capture_info(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id_out, CUgraph *graph_out,
                             const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *n)
{
        uint64_t id, graph, ndeps;
        CUstreamCaptureStatus st;
        if (!status)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        CUresult r = query(lupc_stream_id(s, 0), &st, &id, &graph, &ndeps);
        if (r != CUDA_SUCCESS)
                return r;
        *status = st;
        if (st != CU_STREAM_CAPTURE_STATUS_ACTIVE)
                return CUDA_SUCCESS; /* the other outputs are only defined while capturing */
        if (deps || edges) {         /* the dependency nodes, by id (api_graph_nodes.c) */
                r = lupc_capture_deps(lupc_stream_id(s, 0), deps, edges, &ndeps);
                if (r != CUDA_SUCCESS)
                        return r;
        }
        if (id_out)
                *id_out = id;
        if (graph_out)
                *graph_out = (CUgraph)(uintptr_t)graph;
        if (n)
                *n = (size_t)ndeps;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                  cuuint64_t *id_out, CUgraph *graph_out,
                                                  const CUgraphNode **dependencies_out,
                                                  const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
        return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                            numDependencies_out);
}

/* The CUDA 11.3 and 10.1 forms, which cuBLAS and older runtimes still ask for. */
EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                  cuuint64_t *id_out, CUgraph *graph_out,
                                                  const CUgraphNode **dependencies_out, size_t *numDependencies_out);
EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                  cuuint64_t *id_out, CUgraph *graph_out,
                                                  const CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
        return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, NULL, numDependencies_out);
}

EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                               cuuint64_t *id_out);
EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                               cuuint64_t *id_out)
{
        return capture_info(hStream, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

EXPORT CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
        /* any value is taken, as driver 580 takes it (a NULL mode crashes
         * the driver; lupine refuses it) */
        if (!mode)
                return CUDA_ERROR_INVALID_VALUE;
        int old = thread_mode_set ? thread_mode : CU_STREAM_CAPTURE_MODE_GLOBAL;
        thread_mode = (int)*mode;
        thread_mode_set = true;
        *mode = (CUstreamCaptureMode)old;
        /* the worker learns it before this thread's next call that cares
         * (capture begin, and every call while a capture is open) */
        return atomic_load(&open_captures) > 0 && lupc_initialized() ? sync_mode() : CUDA_SUCCESS;
}

int lupc_captures_open(void)
{
        return atomic_load(&open_captures);
}

CUresult lupc_capture_refuse(uint64_t stream, const char *what)
{
        uint64_t id, graph, ndeps;
        CUstreamCaptureStatus st;
        if (atomic_load(&open_captures) == 0)
                return CUDA_SUCCESS;
        CUresult r = query(stream, &st, &id, &graph, &ndeps);
        if (r != CUDA_SUCCESS)
                return r;
        if (st != CU_STREAM_CAPTURE_STATUS_ACTIVE)
                return CUDA_SUCCESS;
        lup_warn("%s on a capturing stream is not supported by lupine (its host memory cannot be part of "
                 "a graph in the worker): the capture is invalidated",
                 what);
        (void)lupc_send_lupStreamCaptureInvalidate((CUstream)(uintptr_t)stream);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/* ---- instantiation: every form ends in cuGraphInstantiateWithFlags */

static CUresult instantiate_old(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
                                size_t bufferSize)
{
        CUresult r = cuGraphInstantiateWithFlags(phGraphExec, hGraph, 0);
        if (phErrorNode)
                *phErrorNode = NULL;
        if (logBuffer && bufferSize)
                logBuffer[0] = 0;
        return r;
}

EXPORT CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                           char *logBuffer, size_t bufferSize);
EXPORT CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                           char *logBuffer, size_t bufferSize)
{
        return instantiate_old(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

EXPORT CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                              char *logBuffer, size_t bufferSize);
EXPORT CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                              char *logBuffer, size_t bufferSize)
{
        return instantiate_old(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

CUresult lupc_instantiate_params(CUgraphExec *phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *p,
                                 int per_thread)
{
        if (!p)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = cuGraphInstantiateWithFlags(phGraphExec, hGraph,
                                                 p->flags & ~(cuuint64_t)CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD);
        p->hErrNode_out = NULL;
        p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
        if (r == CUDA_SUCCESS && (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)) {
                CUstream s = p->hUploadStream;
                r = cuGraphUpload(*phGraphExec, per_thread && !s ? CU_STREAM_PER_THREAD : s);
        }
        return r;
}

EXPORT CUresult CUDAAPI cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                     CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
        return lupc_instantiate_params(phGraphExec, hGraph, instantiateParams, 0);
}
