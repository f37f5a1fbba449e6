/* SPDX-License-Identifier: MIT */
/*
 * A stand-in for the host's libnvidia-ml.so.1, for tests/e2e/test_nvml.py:
 * lupined's supervisor loads it as the host's NVML (the GPU-host path,
 * supervisor/nvml_host.c), which CI otherwise never runs. One device with
 * fixed, distinct values; functions it lacks are "not found" there.
 */
#include <string.h>

#define EXPORT __attribute__((visibility("default"))) /* the project builds with hidden symbols */

typedef int nvml_ret;
typedef void *nvml_dev;

#define DEV ((nvml_dev)0x1000)

static nvml_ret check(nvml_dev d)
{
        return d == DEV ? 0 : 2; /* NVML_ERROR_INVALID_ARGUMENT */
}

EXPORT nvml_ret nvmlInit_v2(void);
nvml_ret nvmlInit_v2(void)
{
        return 0;
}

EXPORT nvml_ret nvmlDeviceGetCount_v2(unsigned *n);
nvml_ret nvmlDeviceGetCount_v2(unsigned *n)
{
        *n = 1;
        return 0;
}

EXPORT nvml_ret nvmlDeviceGetHandleByIndex_v2(unsigned i, nvml_dev *d);
nvml_ret nvmlDeviceGetHandleByIndex_v2(unsigned i, nvml_dev *d)
{
        *d = DEV;
        return i == 0 ? 0 : 2;
}

EXPORT nvml_ret nvmlDeviceGetName(nvml_dev d, char *s, unsigned n);
nvml_ret nvmlDeviceGetName(nvml_dev d, char *s, unsigned n)
{
        if (n < 16)
                return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
        strcpy(s, "Fake Host GPU");
        return check(d);
}

EXPORT nvml_ret nvmlDeviceGetUUID(nvml_dev d, char *s, unsigned n);
nvml_ret nvmlDeviceGetUUID(nvml_dev d, char *s, unsigned n)
{
        if (n < 41)
                return 7;
        strcpy(s, "GPU-0badcafe-1111-2222-3333-444455556666");
        return check(d);
}

/* one-number queries: each its own value, so a mix-up shows */
#define U32(fn, value)                                 \
        EXPORT nvml_ret fn(nvml_dev d, unsigned *out); \
        nvml_ret fn(nvml_dev d, unsigned *out)         \
        {                                              \
                *out = (value);                        \
                return check(d);                       \
        }

U32(nvmlDeviceGetPowerUsage, 123456)
U32(nvmlDeviceGetMinorNumber, 7)
U32(nvmlDeviceGetFanSpeed, 33)
U32(nvmlDeviceGetPersistenceMode, 1)
U32(nvmlDeviceGetCurrPcieLinkGeneration, 5)

EXPORT nvml_ret nvmlDeviceGetTemperature(nvml_dev d, int sensor, unsigned *t);
nvml_ret nvmlDeviceGetTemperature(nvml_dev d, int sensor, unsigned *t)
{
        *t = 42 + (unsigned)sensor;
        return check(d);
}

EXPORT nvml_ret nvmlDeviceGetClockInfo(nvml_dev d, int type, unsigned *c);
nvml_ret nvmlDeviceGetClockInfo(nvml_dev d, int type, unsigned *c)
{
        *c = 1000 + (unsigned)type;
        return check(d);
}

EXPORT nvml_ret nvmlDeviceGetTotalEnergyConsumption(nvml_dev d, unsigned long long *e);
nvml_ret nvmlDeviceGetTotalEnergyConsumption(nvml_dev d, unsigned long long *e)
{
        *e = 9876543210ull;
        return check(d);
}

EXPORT nvml_ret nvmlDeviceGetEncoderUtilization(nvml_dev d, unsigned *u, unsigned *period);
nvml_ret nvmlDeviceGetEncoderUtilization(nvml_dev d, unsigned *u, unsigned *period)
{
        *u = 12;
        *period = 167000;
        return check(d);
}
