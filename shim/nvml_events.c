/* SPDX-License-Identifier: MIT */
/*
 * NVML events. lupine forwards none: a device supports no event types, so
 * registering for any fails with NVML_ERROR_NOT_SUPPORTED and a wait ends
 * with NVML_ERROR_TIMEOUT after its timeout, as on a GPU that never raises
 * one. Event sets themselves work: nvidia-smi creates one before it prints
 * anything, and stops with "Internal NVML error" when it cannot.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "nvml_shim.h"

struct lupn_event_set {
        unsigned magic;
};

#define EVENT_SET_MAGIC 0x6e657673u

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index);

static bool is_set(const void *p)
{
        return p && ((const struct lupn_event_set *)p)->magic == EVENT_SET_MAGIC;
}

static nvmlReturn_t check_device(nvmlDevice_t device)
{
        unsigned i;
        return nvmlDeviceGetIndex(device, &i);
}

LUPN_API nvmlReturn_t nvmlEventSetCreate(void **set);
LUPN_API nvmlReturn_t nvmlEventSetCreate(void **set)
{
        nvmlReturn_t r = lupn_check_init();

        if (r != NVML_SUCCESS)
                return r;
        if (!set)
                return NVML_ERROR_INVALID_ARGUMENT;
        struct lupn_event_set *s = calloc(1, sizeof(*s));
        if (!s)
                return NVML_ERROR_MEMORY;
        s->magic = EVENT_SET_MAGIC;
        *set = s;
        return NVML_SUCCESS;
}

LUPN_API nvmlReturn_t nvmlEventSetFree(void *set);
LUPN_API nvmlReturn_t nvmlEventSetFree(void *set)
{
        if (!is_set(set))
                return NVML_ERROR_INVALID_ARGUMENT;
        ((struct lupn_event_set *)set)->magic = 0;
        free(set);
        return NVML_SUCCESS;
}

LUPN_API nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *types);
LUPN_API nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *types)
{
        nvmlReturn_t r = check_device(device);

        if (r != NVML_SUCCESS)
                return r;
        if (!types)
                return NVML_ERROR_INVALID_ARGUMENT;
        *types = 0;
        return NVML_SUCCESS;
}

LUPN_API nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types, void *set);
LUPN_API nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types, void *set)
{
        nvmlReturn_t r = check_device(device);

        if (r != NVML_SUCCESS)
                return r;
        if (!is_set(set))
                return NVML_ERROR_INVALID_ARGUMENT;
        return types ? NVML_ERROR_NOT_SUPPORTED : NVML_SUCCESS;
}

static nvmlReturn_t wait_for_none(void *set, void *data, unsigned int timeout_ms)
{
        if (!is_set(set) || !data)
                return NVML_ERROR_INVALID_ARGUMENT;
        struct timespec ts = { .tv_sec = timeout_ms / 1000, .tv_nsec = (long)(timeout_ms % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
        return NVML_ERROR_TIMEOUT;
}

LUPN_API nvmlReturn_t nvmlEventSetWait_v2(void *set, void *data, unsigned int timeout_ms);
LUPN_API nvmlReturn_t nvmlEventSetWait_v2(void *set, void *data, unsigned int timeout_ms)
{
        return wait_for_none(set, data, timeout_ms);
}

LUPN_API nvmlReturn_t nvmlEventSetWait(void *set, void *data, unsigned int timeout_ms);
LUPN_API nvmlReturn_t nvmlEventSetWait(void *set, void *data, unsigned int timeout_ms)
{
        return wait_for_none(set, data, timeout_ms);
}
