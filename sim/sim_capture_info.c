/* SPDX-License-Identifier: MIT */
/*
 * Stream capture's queries: cuStreamIsCapturing, cuStreamGetCaptureInfo
 * (and its _v2, _v3) and cuStreamUpdateCaptureDependencies (and _v2).
 */
#include <stdlib.h>
#include <string.h>

#include "sim_capture.h"

/* The capture of stream h, for the queries: the status; for the legacy
 * stream while a blocking stream captures, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT.
 * Graph mutex held on success (the caller unlocks). */
static CUresult query(CUstream h, struct sim_driver **ret_drv, CUstreamCaptureStatus *status,
                      struct sim_capture **ret_c, struct cap_member **ret_m)
{
        struct sim_driver *drv;
        struct sim_queue *q;
        CUresult r = sim_cap_stream_queue(h, &drv, &q);

        if (r != CUDA_SUCCESS)
                return r;
        sim_graph_lock();
        *ret_c = NULL;
        *ret_m = sim_cap_member_of(q, ret_c);
        if (!*ret_m && q->legacy) {
                for (struct sim_capture *c = sim_captures; c && r == CUDA_SUCCESS; c = c->next)
                        for (size_t i = 0; i < c->nm; i++)
                                if (c->m[i].q->ctx == q->ctx && sim_cap_blocking(c->m[i].q))
                                        r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
        }
        sim_queue_put(drv, q);
        if (r != CUDA_SUCCESS) {
                sim_graph_unlock();
                return r;
        }
        *status = !*ret_m             ? CU_STREAM_CAPTURE_STATUS_NONE
                  : (*ret_c)->invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                      : CU_STREAM_CAPTURE_STATUS_ACTIVE;
        *ret_drv = drv;
        return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
        struct sim_driver *drv;
        struct sim_capture *c;
        struct cap_member *m;
        CUresult r;

        if (!captureStatus)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = query(hStream, &drv, captureStatus, &c, &m);
        if (r == CUDA_SUCCESS)
                sim_graph_unlock();
        return r;
}

/* Fills m's handle and edge arrays from its set. */
static CUresult member_handles(struct cap_member *m)
{
        CUgraphNode *h = realloc(m->hdeps, (m->n ? m->n : 1) * sizeof(*h));
        CUgraphEdgeData *e;

        if (!h)
                return CUDA_ERROR_OUT_OF_MEMORY;
        m->hdeps = h;
        e = realloc(m->edges, (m->n ? m->n : 1) * sizeof(*e));
        if (!e)
                return CUDA_ERROR_OUT_OF_MEMORY;
        m->edges = e;
        for (size_t i = 0; i < m->n; i++) {
                h[i] = sim_node_handle(m->deps[i]);
                memset(&e[i], 0, sizeof(e[i]));
        }
        return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                           cuuint64_t *id_out, CUgraph *graph_out, const CUgraphNode **dependencies_out,
                                           const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
        struct sim_driver *drv;
        struct sim_capture *c;
        struct cap_member *m;
        CUresult r;

        if (!captureStatus_out || (edgeData_out && !dependencies_out))
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        r = query(hStream, &drv, captureStatus_out, &c, &m);
        if (r != CUDA_SUCCESS)
                return r;
        /* The rest is defined only while the capture is active; empty
         * otherwise. */
        if (id_out)
                *id_out = 0;
        if (graph_out)
                *graph_out = NULL;
        if (dependencies_out)
                *dependencies_out = NULL;
        if (edgeData_out)
                *edgeData_out = NULL;
        if (numDependencies_out)
                *numDependencies_out = 0;
        if (m && !c->invalid && (dependencies_out || edgeData_out))
                r = member_handles(m);
        if (r == CUDA_SUCCESS && m) {
                if (id_out)
                        *id_out = c->id;
                if (!c->invalid) {
                        if (graph_out)
                                *graph_out = sim_graph_handle(c->g);
                        if (dependencies_out)
                                *dependencies_out = m->n ? m->hdeps : NULL;
                        if (edgeData_out)
                                *edgeData_out = m->n ? m->edges : NULL;
                        if (numDependencies_out)
                                *numDependencies_out = m->n;
                }
        }
        sim_graph_unlock();
        return r;
}

SIM_API CUresult cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                           cuuint64_t *id_out, CUgraph *graph_out, const CUgraphNode **dependencies_out,
                                           size_t *numDependencies_out)
{
        return cuStreamGetCaptureInfo_v3(hStream, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
                                         numDependencies_out);
}

SIM_API CUresult cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out)
{
        return cuStreamGetCaptureInfo_v3(hStream, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

SIM_API CUresult cuStreamUpdateCaptureDependencies_v2(CUstream hStream, CUgraphNode *dependencies,
                                                      const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                                      unsigned int flags)
{
        struct sim_driver *drv;
        CUstreamCaptureStatus st;
        struct sim_gnode **v = NULL;
        struct sim_capture *c;
        struct cap_member *m;
        CUresult r;

        if (flags > CU_STREAM_SET_CAPTURE_DEPENDENCIES || (numDependencies && !dependencies) ||
            numDependencies > SIM_MAX_NODE_DEPS)
                return sim_driver_get() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
        for (size_t i = 0; dependencyData && i < numDependencies; i++)
                if (dependencyData[i].from_port || dependencyData[i].to_port || dependencyData[i].type)
                        return CUDA_ERROR_INVALID_VALUE;
        r = query(hStream, &drv, &st, &c, &m);
        if (r != CUDA_SUCCESS)
                return r;
        if (!m)
                r = CUDA_ERROR_ILLEGAL_STATE;
        else if (c->invalid)
                r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        else if (!(v = calloc(numDependencies ? numDependencies : 1, sizeof(*v))))
                r = CUDA_ERROR_OUT_OF_MEMORY;
        for (size_t i = 0; r == CUDA_SUCCESS && i < numDependencies; i++) {
                v[i] = sim_node_lookup(dependencies[i]);
                if (!v[i] || v[i]->graph != c->g)
                        r = CUDA_ERROR_INVALID_VALUE;
        }
        if (r == CUDA_SUCCESS && flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES)
                m->n = 0;
        if (r == CUDA_SUCCESS)
                r = sim_cap_deps_union(m, v, numDependencies);
        sim_graph_unlock();
        free(v);
        return r;
}

SIM_API CUresult cuStreamUpdateCaptureDependencies(CUstream hStream, CUgraphNode *dependencies, size_t numDependencies,
                                                   unsigned int flags)
{
        return cuStreamUpdateCaptureDependencies_v2(hStream, dependencies, NULL, numDependencies, flags);
}
