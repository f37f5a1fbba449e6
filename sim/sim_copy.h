/* SPDX-License-Identifier: MIT */
/*
 * Copies and sets, shared by sim_copy.c (linear, peer, unified, memset)
 * and sim_copy2d.c (2D and 3D descriptors).
 *
 * Every copy is a box: depth slices of height rows of width bytes, at a
 * pitch between rows and a slice stride between slices, on each side. A
 * linear copy is a box of one row. Each side is host memory, device memory
 * or either (unified addressing: decided by whether the address lies in a
 * device range). Each side's whole span is checked before a byte moves.
 */
#ifndef LUPINE_SIM_COPY_H
#define LUPINE_SIM_COPY_H

#include "sim_internal.h"

enum sim_side { SIM_SIDE_HOST, SIM_SIDE_DEVICE, SIM_SIDE_ANY };

struct sim_box_end {
        uintptr_t base;         /* the first byte copied */
        enum sim_side side;
        size_t pitch;           /* bytes from one row to the next */
        size_t slice;           /* bytes from one slice to the next */
};

struct sim_copy {
        struct sim_box_end dst, src;
        size_t width, height, depth;
};

/* Runs c synchronously: after the legacy stream's work, on the calling
 * thread (stream NULL), or queues it on stream (async). Checks both spans
 * first: CUDA_ERROR_INVALID_VALUE for one that is not mapped. A copy of
 * zero bytes only checks the context and stream. */
CUresult sim_copy_submit(const struct sim_copy *c, bool async, CUstream stream);

#endif
