/* SPDX-License-Identifier: MIT */
/*
 * lupine's libnvidia-ml.so.1: shared by its files.
 *   shim/nvml_client.c   init/shutdown, the snapshot from lupined and its
 *                        1-second cache, the once-only log of stubs;
 *   shim/nvml_api.c      system functions, handles, identity;
 *   shim/nvml_api_dev.c  the device's values (memory, power, clocks, ...);
 *   shim/nvml_api_fields.c  the versioned-struct and field-value forms;
 *   shim/nvml_internal.c the private table nvidia-smi asks for;
 *   nvml_stubs.c         generated (abi/gen/nvmlgen.py): the rest.
 */
#ifndef LUPN_SHIM_H
#define LUPN_SHIM_H

#include <stdatomic.h>
#include <stdbool.h>

#include "nvml_codec.h"
#include "nvml_types.h"

#define LUPN_API __attribute__((visibility("default")))

struct lupn_device {
        unsigned index;
};

/* Logs "NAME is not supported by lupine" once per function; returns
 * NVML_ERROR_NOT_SUPPORTED. */
int lupn_unsupported(const char *name, atomic_bool *logged);

/* NVML_SUCCESS when initialised (nvmlInit* and not shut down). */
nvmlReturn_t lupn_check_init(void);
/* The device count of the current snapshot (refreshing a stale one). */
nvmlReturn_t lupn_count(unsigned *ret);
/* The handle of device i, or NULL. */
nvmlDevice_t lupn_handle(unsigned i);
/* LUPINE_NVML_DEBUG is set: say more on stderr (internal slots, fields). */
bool lupn_debug(void);
/* Whether p is one of the handles lupn_handle gives (of any index). */
bool lupn_is_handle(const void *p);
/* Copies device dev's value of key into *ret; returns the host's result for
 * it (NVML_SUCCESS or its error), NVML_ERROR_INVALID_ARGUMENT for a bad
 * handle, NVML_ERROR_GPU_IS_LOST when lupined cannot be reached. */
nvmlReturn_t lupn_dev_value(nvmlDevice_t dev, unsigned key, struct lup_nvml_val *ret);
nvmlReturn_t lupn_sys_value(unsigned key, struct lup_nvml_val *ret);
/* The processes of device dev: up to cap into out, the count in *n. */
nvmlReturn_t lupn_dev_procs(nvmlDevice_t dev, struct lup_nvml_proc *out, unsigned cap, unsigned *n);
/* The backend of the current snapshot (LUP_BACKEND_*). */
unsigned lupn_backend(void);

#endif
