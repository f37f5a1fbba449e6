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

/* Marks this library as lupine's shim: lupined refuses to use it as its driver. */
__attribute__((visibility("default"))) const char lupine_shim_version[] = "lupine 0.1";
