/* SPDX-License-Identifier: MIT */
/* Stream capture and graphs in the worker (worker/graphs.c, graphs_ckpt.c). */
#ifndef LUPD_WORKER_GRAPHS_H
#define LUPD_WORKER_GRAPHS_H

#include "worker/session.h"

void lupw_graphs_init(struct lupw_session *s);
void lupw_graphs_free(struct lupw_session *s);
/* The capture whose origin is `real`, or whose driver id is cid. */
struct lupw_capture *lupw_capture_find(struct lupw_session *s, CUstream real, uint64_t cid);
/* A drain: ends every open capture (their partial graphs are dropped). */
void lupw_captures_abort(struct lupw_session *s);
/* An exec's private clone of its graph. */
CUresult lupw_exec_put_src(struct lupw_session *s, CUgraphExec exec, CUgraph src);
CUgraph lupw_exec_src(struct lupw_session *s, CUgraphExec exec);

#endif
