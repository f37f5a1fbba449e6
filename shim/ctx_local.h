/* SPDX-License-Identifier: MIT */
/*
 * Client-side per-context state that never goes to the server:
 *   - context-local storage, the (context, key) -> value store the CUDA
 *     runtime keeps its per-context state in (export table c693336e...);
 *   - unique context ids (cuCtxGetId), which a primary context gets anew
 *     after every reset, like the driver's.
 */
#ifndef LUPC_CTX_LOCAL_H
#define LUPC_CTX_LOCAL_H

#include <stdint.h>

#include <cuda.h>

typedef void (*lupc_cls_dtor)(CUcontext ctx, void *key, void *value);

CUresult lupc_cls_put(CUcontext ctx, void *key, void *value, lupc_cls_dtor dtor);
CUresult lupc_cls_delete(CUcontext ctx, void *key);
CUresult lupc_cls_get(void **value, CUcontext ctx, void *key);

/* A context is gone (destroyed, or a primary context reset): run the
 * destructors of its stored values and forget its id. */
void lupc_ctx_local_gone(uint64_t ctx);

/* The context's process-unique id; 0 with CUDA_ERROR_INVALID_CONTEXT for an
 * unknown one. ctx 0 means the calling thread's current context. */
CUresult lupc_ctx_uid(uint64_t ctx, uint64_t *ret);

#endif
