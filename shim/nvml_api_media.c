/* SPDX-License-Identifier: MIT */
/*
 * libnvidia-ml.so.1: the inforom check and the media engines' utilization
 * (encoder, decoder, JPEG, optical flow), from the snapshot. nvidia-smi's
 * plain view ends with the inforom check, and `nvidia-smi dmon` refuses
 * to start without the four utilizations.
 */
#include "nvml_shim.h"

static nvmlReturn_t pair(nvmlDevice_t device, unsigned key, unsigned int *util, unsigned int *period)
{
        struct lup_nvml_val a, b;
        nvmlReturn_t r;

        if (!util || !period)
                return NVML_ERROR_INVALID_ARGUMENT;
        if ((r = lupn_dev_value(device, key, &a)) != NVML_SUCCESS ||
            (r = lupn_dev_value(device, key + 1, &b)) != NVML_SUCCESS)
                return r;
        *util = (unsigned int)a.num;
        *period = (unsigned int)b.num;
        return NVML_SUCCESS;
}

#define MEDIA_QUERY(fn, key)                                                                     \
        LUPN_API nvmlReturn_t fn(nvmlDevice_t device, unsigned int *util, unsigned int *period); \
        LUPN_API nvmlReturn_t fn(nvmlDevice_t device, unsigned int *util, unsigned int *period)  \
        {                                                                                        \
                return pair(device, key, util, period);                                          \
        }

MEDIA_QUERY(nvmlDeviceGetEncoderUtilization, LUP_NVML_K_ENC_UTIL)
MEDIA_QUERY(nvmlDeviceGetDecoderUtilization, LUP_NVML_K_DEC_UTIL)
MEDIA_QUERY(nvmlDeviceGetJpgUtilization, LUP_NVML_K_JPG_UTIL)
MEDIA_QUERY(nvmlDeviceGetOfaUtilization, LUP_NVML_K_OFA_UTIL)

/* The host's answer: NVML_SUCCESS when the inforom checks out. */
LUPN_API nvmlReturn_t nvmlDeviceValidateInforom(nvmlDevice_t device);
LUPN_API nvmlReturn_t nvmlDeviceValidateInforom(nvmlDevice_t device)
{
        struct lup_nvml_val v;
        return lupn_dev_value(device, LUP_NVML_K_INFOROM_VALID, &v);
}
