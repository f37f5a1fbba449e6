/* SPDX-License-Identifier: MIT */
#include "unsupported.h"

#include <stdatomic.h>

#include "log.h"

int lupc_unsupported(const char *name, int *once)
{
        if (!__atomic_exchange_n(once, 1, __ATOMIC_RELAXED))
                lup_warn("%s is not supported by lupine yet (returning CUDA_ERROR_NOT_SUPPORTED)", name);
        return 801; /* CUDA_ERROR_NOT_SUPPORTED */
}

static _Atomic unsigned long long context_generation;

/* Bumped when this process's session starts and whenever it makes a
 * context: lupine's libnvidia-ml.so.1 (shim/nvml_client.c) then asks for
 * the process lists anew, since the GPU host's NVML shows a context's
 * process from its creation on. Looked up with dlsym, so that the NVML
 * library works without this one. */
void lupc_context_made(void)
{
        atomic_fetch_add(&context_generation, 1);
}

__attribute__((visibility("default"))) unsigned long long lupine_context_generation(void);
__attribute__((visibility("default"))) unsigned long long lupine_context_generation(void)
{
        return atomic_load(&context_generation);
}

/* Marks this library as lupine's shim: lupined refuses to use it as its driver. */
__attribute__((visibility("default"))) const char lupine_shim_version[] = "lupine 0.1";
