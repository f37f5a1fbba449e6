/* SPDX-License-Identifier: MIT */
#ifndef LUPC_UNSUPPORTED_H
#define LUPC_UNSUPPORTED_H
/* Logs "NAME is not supported by lupine yet" once per symbol and returns
 * CUDA_ERROR_NOT_SUPPORTED (801). No cuda.h: see shim_stubs.c. */
int lupc_unsupported(const char *name, int *once);
/* A session or a context was made in this process (lupine_context_generation). */
void lupc_context_made(void);

#endif
