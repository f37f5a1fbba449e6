/* SPDX-License-Identifier: MIT */
/*
 * Stream capture's state, shared by sim_capture.c (the capture itself:
 * begin, the work hooks, end) and sim_capture_info.c (the queries and
 * dependency updates). All of it is guarded by the graph mutex.
 */
#ifndef LUPINE_SIM_CAPTURE_H
#define LUPINE_SIM_CAPTURE_H

#include "sim_graph.h"

struct cap_member {
        struct sim_queue *q;
        struct sim_gnode **deps; /* the stream's dependency set */
        size_t n, cap;
        CUgraphNode *hdeps; /* what GetCaptureInfo hands out */
        CUgraphEdgeData *edges;
};

struct sim_capture {
        struct sim_capture *next;
        uint64_t id;
        struct sim_graph *g;
        bool to_graph; /* cuStreamBeginCaptureToGraph: g is the caller's */
        bool invalid;
        CUstreamCaptureMode mode;
        pthread_t thread;
        struct sim_queue *origin;
        struct cap_member *m;
        size_t nm, mcap;
};

/* An event last recorded in a capture, and the dependency set then. */
struct cap_event {
        CUevent h;
        struct sim_capture *c;
        struct sim_gnode **deps;
        size_t n;
};

/* Every capture going on. */
extern struct sim_capture *sim_captures;

/* The capture q takes part in, and q's part, or NULL. */
struct cap_member *sim_cap_member_of(struct sim_queue *q, struct sim_capture **ret_c);
/* Whether q orders itself with the legacy stream. */
bool sim_cap_blocking(const struct sim_queue *q);
/* Adds to m's set the nodes of deps[0..n) it does not have. */
CUresult sim_cap_deps_union(struct cap_member *m, struct sim_gnode *const *deps, size_t n);
/* The queue of stream h with a reference; the rwlock not held. */
CUresult sim_cap_stream_queue(CUstream h, struct sim_driver **ret_drv, struct sim_queue **ret_q);

#endif
