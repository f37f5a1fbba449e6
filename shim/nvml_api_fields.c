/* SPDX-License-Identifier: MIT */
/*
 * libnvidia-ml.so.1: the versioned-struct and field-value forms newer tools
 * (nvidia-smi 580, DCGM-style agents) read instead of the classic calls:
 * nvmlDeviceGetTemperatureV, nvmlDeviceGetFieldValues (the ECC mode and
 * power fields; every other field says NVML_ERROR_NOT_SUPPORTED in its own
 * entry), and nvmlDeviceIsMigDeviceHandle (lupine's handles are whole GPUs).
 */
#include <stdio.h>
#include <sys/time.h>

#include "nvml_shim.h"

LUPN_API nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_v1_t *temperature);
LUPN_API nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_v1_t *temperature)
{
        struct lup_nvml_val v;

        if (!temperature)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (temperature->version != NVML_STRUCT_VERSION(sizeof(nvmlTemperature_v1_t), 1))
                return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        if (temperature->sensorType != NVML_TEMPERATURE_GPU)
                return NVML_ERROR_INVALID_ARGUMENT;
        nvmlReturn_t r = lupn_dev_value(device, LUP_NVML_K_TEMP_GPU, &v);
        if (r == NVML_SUCCESS)
                temperature->temperature = (int)v.num;
        return r;
}

/* The snapshot key behind a field id, or 0. */
static unsigned field_key(unsigned id)
{
        switch (id) {
        case NVML_FI_DEV_ECC_CURRENT:
                return LUP_NVML_K_ECC_CURRENT;
        case NVML_FI_DEV_ECC_PENDING:
                return LUP_NVML_K_ECC_PENDING;
        case NVML_FI_DEV_POWER_AVERAGE: /* the host's reading is already a 1 s average */
        case NVML_FI_DEV_POWER_INSTANT:
                return LUP_NVML_K_POWER;
        case NVML_FI_DEV_POWER_MIN_LIMIT:
                return LUP_NVML_K_POWER_MIN_LIMIT;
        case NVML_FI_DEV_POWER_MAX_LIMIT:
                return LUP_NVML_K_POWER_MAX_LIMIT;
        case NVML_FI_DEV_POWER_DEFAULT_LIMIT:
                return LUP_NVML_K_POWER_DEFAULT_LIMIT;
        case NVML_FI_DEV_POWER_CURRENT_LIMIT:
                return LUP_NVML_K_POWER_ENFORCED;
        default:
                return 0;
        }
}

LUPN_API nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount, nvmlFieldValue_t *values);
LUPN_API nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount, nvmlFieldValue_t *values)
{
        struct lup_nvml_val v;
        struct timeval tv;

        if (valuesCount < 0 || (valuesCount > 0 && !values))
                return NVML_ERROR_INVALID_ARGUMENT;
        /* the handle first: a bad one fails the whole call */
        nvmlReturn_t r = lupn_dev_value(device, LUP_NVML_K_MINOR, &v);
        if (r == NVML_ERROR_INVALID_ARGUMENT || r == NVML_ERROR_UNINITIALIZED || r == NVML_ERROR_GPU_IS_LOST)
                return r;
        gettimeofday(&tv, NULL);
        for (int i = 0; i < valuesCount; i++) {
                nvmlFieldValue_t *f = &values[i];
                unsigned key = field_key(f->fieldId);
                f->timestamp = (long long)tv.tv_sec * 1000000 + tv.tv_usec;
                f->latencyUsec = 0;
                f->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
                f->nvmlReturn = key ? lupn_dev_value(device, key, &v) : NVML_ERROR_NOT_SUPPORTED;
                if (!key && lupn_debug())
                        fprintf(stderr, "lupine NVML: field %u is not answered\n", f->fieldId);
                f->value.ullVal = 0;
                if (f->nvmlReturn == NVML_SUCCESS)
                        f->value.uiVal = (unsigned int)v.num;
        }
        return NVML_SUCCESS;
}

LUPN_API nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice);
LUPN_API nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice)
{
        struct lup_nvml_val v;

        if (!isMigDevice)
                return NVML_ERROR_INVALID_ARGUMENT;
        nvmlReturn_t r = lupn_dev_value(device, LUP_NVML_K_MINOR, &v);
        if (r == NVML_ERROR_INVALID_ARGUMENT || r == NVML_ERROR_UNINITIALIZED || r == NVML_ERROR_GPU_IS_LOST)
                return r;
        *isMigDevice = 0;
        return NVML_SUCCESS;
}
