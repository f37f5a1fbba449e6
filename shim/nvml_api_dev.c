/* SPDX-License-Identifier: MIT */
/*
 * libnvidia-ml.so.1: a device's values from the snapshot (memory,
 * utilization, temperature, power, clocks, fan, P-state, throttle reasons,
 * ECC, retired and remapped pages, modes, PCIe, media engines, the
 * inforom check, processes). Each returns
 * what the host's NVML returned for that value: a value the host does not
 * support is NVML_ERROR_NOT_SUPPORTED here too.
 */
#include <string.h>

#include "nvml_shim.h"

/* The number behind key, or the error. */
static nvmlReturn_t num(nvmlDevice_t device, unsigned key, unsigned long long *ret)
{
        struct lup_nvml_val v;
        nvmlReturn_t r = lupn_dev_value(device, key, &v);

        if (r == NVML_SUCCESS)
                *ret = v.num;
        return r;
}

/* A one-number query into an unsigned int. */
static nvmlReturn_t num_u32(nvmlDevice_t device, unsigned key, unsigned int *out)
{
        unsigned long long v;

        if (!out)
                return NVML_ERROR_INVALID_ARGUMENT;
        nvmlReturn_t r = num(device, key, &v);
        if (r == NVML_SUCCESS)
                *out = (unsigned int)v;
        return r;
}

#define U32_QUERY(fn, key)                                                \
        LUPN_API nvmlReturn_t fn(nvmlDevice_t device, unsigned int *out); \
        LUPN_API nvmlReturn_t fn(nvmlDevice_t device, unsigned int *out)  \
        {                                                                 \
                return num_u32(device, key, out);                         \
        }

/* The NVML enums are int-sized: these take an enum pointer as unsigned. */
U32_QUERY(nvmlDeviceGetMinorNumber, LUP_NVML_K_MINOR)
U32_QUERY(nvmlDeviceGetPowerUsage, LUP_NVML_K_POWER)
U32_QUERY(nvmlDeviceGetPowerManagementLimit, LUP_NVML_K_POWER_LIMIT)
U32_QUERY(nvmlDeviceGetPowerManagementDefaultLimit, LUP_NVML_K_POWER_DEFAULT_LIMIT)
U32_QUERY(nvmlDeviceGetEnforcedPowerLimit, LUP_NVML_K_POWER_ENFORCED)
U32_QUERY(nvmlDeviceGetFanSpeed, LUP_NVML_K_FAN)
U32_QUERY(nvmlDeviceGetNumFans, LUP_NVML_K_NUM_FANS)
U32_QUERY(nvmlDeviceGetPerformanceState, LUP_NVML_K_PSTATE)
U32_QUERY(nvmlDeviceGetPowerState, LUP_NVML_K_PSTATE)
U32_QUERY(nvmlDeviceGetComputeMode, LUP_NVML_K_COMPUTE_MODE)
U32_QUERY(nvmlDeviceGetPersistenceMode, LUP_NVML_K_PERSISTENCE)
U32_QUERY(nvmlDeviceGetCurrPcieLinkGeneration, LUP_NVML_K_PCIE_GEN)
U32_QUERY(nvmlDeviceGetCurrPcieLinkWidth, LUP_NVML_K_PCIE_WIDTH)
U32_QUERY(nvmlDeviceGetMaxPcieLinkGeneration, LUP_NVML_K_PCIE_MAX_GEN)
U32_QUERY(nvmlDeviceGetMaxPcieLinkWidth, LUP_NVML_K_PCIE_MAX_WIDTH)
U32_QUERY(nvmlDeviceGetDisplayMode, LUP_NVML_K_DISPLAY_MODE)
U32_QUERY(nvmlDeviceGetDisplayActive, LUP_NVML_K_DISPLAY_ACTIVE)
U32_QUERY(nvmlDeviceGetArchitecture, LUP_NVML_K_ARCH)
U32_QUERY(nvmlDeviceGetBrand, LUP_NVML_K_BRAND)
U32_QUERY(nvmlDeviceGetMaxMigDeviceCount, LUP_NVML_K_MIG_MAX_DEVICES)
U32_QUERY(nvmlDeviceGetVirtualizationMode, LUP_NVML_K_VIRT_MODE)

/* Power management is "enabled" wherever a power limit can be read. */
LUPN_API nvmlReturn_t nvmlDeviceGetPowerManagementMode(nvmlDevice_t device, unsigned int *mode);
LUPN_API nvmlReturn_t nvmlDeviceGetPowerManagementMode(nvmlDevice_t device, unsigned int *mode)
{
        unsigned int limit;
        nvmlReturn_t r = num_u32(device, LUP_NVML_K_POWER_LIMIT, &limit);

        if (r == NVML_SUCCESS)
                *mode = 1; /* NVML_FEATURE_ENABLED */
        return r;
}

LUPN_API nvmlReturn_t nvmlDeviceGetFanSpeed_v2(nvmlDevice_t device, unsigned int fan, unsigned int *speed);
LUPN_API nvmlReturn_t nvmlDeviceGetFanSpeed_v2(nvmlDevice_t device, unsigned int fan, unsigned int *speed)
{
        unsigned int n;
        nvmlReturn_t r = num_u32(device, LUP_NVML_K_NUM_FANS, &n);

        if (r != NVML_SUCCESS)
                return r;
        if (fan >= n)
                return NVML_ERROR_INVALID_ARGUMENT;
        return num_u32(device, LUP_NVML_K_FAN, speed);
}

LUPN_API nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *energy);
LUPN_API nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *energy)
{
        if (!energy)
                return NVML_ERROR_INVALID_ARGUMENT;
        return num(device, LUP_NVML_K_ENERGY, energy);
}

LUPN_API nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long *reasons);
LUPN_API nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long *reasons)
{
        if (!reasons)
                return NVML_ERROR_INVALID_ARGUMENT;
        return num(device, LUP_NVML_K_THROTTLE, reasons);
}

LUPN_API nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long *reasons);
LUPN_API nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long *reasons)
{
        return nvmlDeviceGetCurrentClocksEventReasons(device, reasons);
}

/* ---- memory */

static nvmlReturn_t memory(nvmlDevice_t device, unsigned long long v[4])
{
        static const unsigned keys[] = { LUP_NVML_K_MEM_TOTAL, LUP_NVML_K_MEM_FREE, LUP_NVML_K_MEM_USED,
                                         LUP_NVML_K_MEM_RESERVED };
        for (unsigned i = 0; i < 4; i++) {
                nvmlReturn_t r = num(device, keys[i], &v[i]);
                if (r != NVML_SUCCESS && i < 3)
                        return r;
                if (r != NVML_SUCCESS)
                        v[i] = 0;
        }
        return NVML_SUCCESS;
}

LUPN_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *mem);
LUPN_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *mem)
{
        unsigned long long v[4];

        if (!mem)
                return NVML_ERROR_INVALID_ARGUMENT;
        nvmlReturn_t r = memory(device, v);
        if (r != NVML_SUCCESS)
                return r;
        /* v1 counts the reserved memory as used, as the real one does */
        mem->total = v[0];
        mem->free = v[1];
        mem->used = v[2] + v[3];
        return NVML_SUCCESS;
}

LUPN_API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *mem);
LUPN_API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *mem)
{
        unsigned long long v[4];

        if (!mem)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (mem->version != NVML_STRUCT_VERSION(sizeof(nvmlMemory_v2_t), 2))
                return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        nvmlReturn_t r = memory(device, v);
        if (r != NVML_SUCCESS)
                return r;
        mem->total = v[0];
        mem->free = v[1];
        mem->used = v[2];
        mem->reserved = v[3];
        return NVML_SUCCESS;
}

LUPN_API nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t *bar1);
LUPN_API nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t *bar1)
{
        unsigned long long total, used;

        if (!bar1)
                return NVML_ERROR_INVALID_ARGUMENT;
        nvmlReturn_t r = num(device, LUP_NVML_K_BAR1_TOTAL, &total);
        if (r == NVML_SUCCESS)
                r = num(device, LUP_NVML_K_BAR1_USED, &used);
        if (r != NVML_SUCCESS)
                return r;
        bar1->bar1Total = total;
        bar1->bar1Used = used;
        bar1->bar1Free = total > used ? total - used : 0;
        return NVML_SUCCESS;
}

LUPN_API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *util);
LUPN_API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *util)
{
        unsigned int gpu, mem;

        if (!util)
                return NVML_ERROR_INVALID_ARGUMENT;
        nvmlReturn_t r = num_u32(device, LUP_NVML_K_UTIL_GPU, &gpu);
        if (r == NVML_SUCCESS)
                r = num_u32(device, LUP_NVML_K_UTIL_MEM, &mem);
        if (r == NVML_SUCCESS) {
                util->gpu = gpu;
                util->memory = mem;
        }
        return r;
}

/* ---- temperature, power limits, clocks */

LUPN_API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int *temp);
LUPN_API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int *temp)
{
        if (sensor != NVML_TEMPERATURE_GPU)
                return NVML_ERROR_INVALID_ARGUMENT;
        return num_u32(device, LUP_NVML_K_TEMP_GPU, temp);
}

LUPN_API nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device, int type, unsigned int *temp);
LUPN_API nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device, int type, unsigned int *temp)
{
        static const unsigned keys[] = {
                [NVML_TEMPERATURE_THRESHOLD_SHUTDOWN] = LUP_NVML_K_TEMP_SHUTDOWN,
                [NVML_TEMPERATURE_THRESHOLD_SLOWDOWN] = LUP_NVML_K_TEMP_SLOWDOWN,
                [NVML_TEMPERATURE_THRESHOLD_MEM_MAX] = LUP_NVML_K_TEMP_MEM_MAX,
                [NVML_TEMPERATURE_THRESHOLD_GPU_MAX] = LUP_NVML_K_TEMP_GPU_MAX,
        };
        if (type < 0)
                return NVML_ERROR_INVALID_ARGUMENT;
        if ((unsigned)type >= sizeof(keys) / sizeof(keys[0]))
                return NVML_ERROR_NOT_SUPPORTED; /* the acoustic and margin thresholds */
        return num_u32(device, keys[type], temp);
}

LUPN_API nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device, unsigned int *minLimit,
                                                                   unsigned int *maxLimit);
LUPN_API nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device, unsigned int *minLimit,
                                                                   unsigned int *maxLimit)
{
        unsigned int lo, hi;

        if (!minLimit || !maxLimit)
                return NVML_ERROR_INVALID_ARGUMENT;
        nvmlReturn_t r = num_u32(device, LUP_NVML_K_POWER_MIN_LIMIT, &lo);
        if (r == NVML_SUCCESS)
                r = num_u32(device, LUP_NVML_K_POWER_MAX_LIMIT, &hi);
        if (r == NVML_SUCCESS) {
                *minLimit = lo;
                *maxLimit = hi;
        }
        return r;
}

static nvmlReturn_t clock_of(nvmlDevice_t device, int type, unsigned first, unsigned int *clock)
{
        if (type < 0 || type >= NVML_CLOCK_COUNT)
                return NVML_ERROR_INVALID_ARGUMENT;
        return num_u32(device, first + (unsigned)type, clock);
}

LUPN_API nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int *clock);
LUPN_API nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int *clock)
{
        return clock_of(device, type, LUP_NVML_K_CLK_GRAPHICS, clock);
}

LUPN_API nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, int type, unsigned int *clock);
LUPN_API nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, int type, unsigned int *clock)
{
        return clock_of(device, type, LUP_NVML_K_MAXCLK_GRAPHICS, clock);
}

/* Only the current clocks; the application and boost targets are not forwarded. */
LUPN_API nvmlReturn_t nvmlDeviceGetClock(nvmlDevice_t device, int clockType, int clockId, unsigned int *clockMHz);
LUPN_API nvmlReturn_t nvmlDeviceGetClock(nvmlDevice_t device, int clockType, int clockId, unsigned int *clockMHz)
{
        if (clockId != NVML_CLOCK_ID_CURRENT)
                return NVML_ERROR_NOT_SUPPORTED;
        return clock_of(device, clockType, LUP_NVML_K_CLK_GRAPHICS, clockMHz);
}

/* ---- ECC, retired and remapped pages, modes */

static nvmlReturn_t two_u32(nvmlDevice_t device, unsigned k1, unsigned k2, unsigned int *a, unsigned int *b)
{
        unsigned int x, y;

        if (!a || !b)
                return NVML_ERROR_INVALID_ARGUMENT;
        nvmlReturn_t r = num_u32(device, k1, &x);
        if (r == NVML_SUCCESS)
                r = num_u32(device, k2, &y);
        if (r == NVML_SUCCESS) {
                *a = x;
                *b = y;
        }
        return r;
}

/* The media engines (encoder, decoder, JPEG, optical flow): percent and
 * the sampling period. nvidia-smi dmon asks for all four. */
#define MEDIA_QUERY(fn, key)                                                                     \
        LUPN_API nvmlReturn_t fn(nvmlDevice_t device, unsigned int *util, unsigned int *period); \
        LUPN_API nvmlReturn_t fn(nvmlDevice_t device, unsigned int *util, unsigned int *period)  \
        {                                                                                        \
                return two_u32(device, key, key + 1, util, period);                              \
        }

MEDIA_QUERY(nvmlDeviceGetEncoderUtilization, LUP_NVML_K_ENC_UTIL)
MEDIA_QUERY(nvmlDeviceGetDecoderUtilization, LUP_NVML_K_DEC_UTIL)
MEDIA_QUERY(nvmlDeviceGetJpgUtilization, LUP_NVML_K_JPG_UTIL)
MEDIA_QUERY(nvmlDeviceGetOfaUtilization, LUP_NVML_K_OFA_UTIL)

/* The host's answer: NVML_SUCCESS when the inforom checks out (nvidia-smi's
 * plain view ends with it). */
LUPN_API nvmlReturn_t nvmlDeviceValidateInforom(nvmlDevice_t device);
LUPN_API nvmlReturn_t nvmlDeviceValidateInforom(nvmlDevice_t device)
{
        struct lup_nvml_val v;
        return lupn_dev_value(device, LUP_NVML_K_INFOROM_VALID, &v);
}

LUPN_API nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending);
LUPN_API nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending)
{
        return two_u32(device, LUP_NVML_K_ECC_CURRENT, LUP_NVML_K_ECC_PENDING, current, pending);
}

LUPN_API nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending);
LUPN_API nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending)
{
        return two_u32(device, LUP_NVML_K_MIG_CURRENT, LUP_NVML_K_MIG_PENDING, current, pending);
}

LUPN_API nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor);
LUPN_API nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
        return two_u32(device, LUP_NVML_K_CC_MAJOR, LUP_NVML_K_CC_MINOR, (unsigned int *)major, (unsigned int *)minor);
}

LUPN_API nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int errorType, int counterType,
                                                  unsigned long long *eccCounts);
LUPN_API nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int errorType, int counterType,
                                                  unsigned long long *eccCounts)
{
        unsigned key;

        if (!eccCounts || errorType < 0 || errorType > 1 || counterType < 0 || counterType > 1)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (counterType == NVML_VOLATILE_ECC)
                key = errorType == NVML_MEMORY_ERROR_TYPE_CORRECTED ? LUP_NVML_K_ECC_CORR_VOLATILE
                                                                    : LUP_NVML_K_ECC_UNCORR_VOLATILE;
        else
                key = errorType == NVML_MEMORY_ERROR_TYPE_CORRECTED ? LUP_NVML_K_ECC_CORR_AGGREGATE
                                                                    : LUP_NVML_K_ECC_UNCORR_AGGREGATE;
        return num(device, key, eccCounts);
}

/* The count of retired pages of a cause; the addresses are not forwarded,
 * so a caller that asks for them (count > 0 with a buffer) gets none
 * unless there are none. */
static nvmlReturn_t retired(nvmlDevice_t device, int cause, unsigned int *count, void *addrs)
{
        unsigned int n;

        if (!count || cause < 0 || cause > 1)
                return NVML_ERROR_INVALID_ARGUMENT;
        nvmlReturn_t r = num_u32(device, cause == 0 ? LUP_NVML_K_RETIRED_SBE : LUP_NVML_K_RETIRED_DBE, &n);
        if (r != NVML_SUCCESS)
                return r;
        if (n == 0) {
                *count = 0;
                return NVML_SUCCESS;
        }
        if (*count < n) {
                *count = n;
                return NVML_ERROR_INSUFFICIENT_SIZE;
        }
        return NVML_ERROR_NOT_SUPPORTED;
}

LUPN_API nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, int cause, unsigned int *pageCount,
                                                unsigned long long *addresses);
LUPN_API nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, int cause, unsigned int *pageCount,
                                                unsigned long long *addresses)
{
        return retired(device, cause, pageCount, addresses);
}

LUPN_API nvmlReturn_t nvmlDeviceGetRetiredPages_v2(nvmlDevice_t device, int cause, unsigned int *pageCount,
                                                   unsigned long long *addresses, unsigned long long *timestamps);
LUPN_API nvmlReturn_t nvmlDeviceGetRetiredPages_v2(nvmlDevice_t device, int cause, unsigned int *pageCount,
                                                   unsigned long long *addresses, unsigned long long *timestamps)
{
        return retired(device, cause, pageCount, addresses);
}

LUPN_API nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, unsigned int *isPending);
LUPN_API nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, unsigned int *isPending)
{
        return num_u32(device, LUP_NVML_K_RETIRED_PENDING, isPending);
}

LUPN_API nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows, unsigned int *uncRows,
                                                unsigned int *isPending, unsigned int *failureOccurred);
LUPN_API nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows, unsigned int *uncRows,
                                                unsigned int *isPending, unsigned int *failureOccurred)
{
        unsigned int c, u;

        if (!isPending || !failureOccurred)
                return NVML_ERROR_INVALID_ARGUMENT;
        nvmlReturn_t r = two_u32(device, LUP_NVML_K_REMAP_CORR, LUP_NVML_K_REMAP_UNCORR, &c, &u);
        if (r == NVML_SUCCESS)
                r = two_u32(device, LUP_NVML_K_REMAP_PENDING, LUP_NVML_K_REMAP_FAILURE, isPending, failureOccurred);
        if (r == NVML_SUCCESS && corrRows && uncRows) {
                *corrRows = c;
                *uncRows = u;
        } else if (r == NVML_SUCCESS)
                r = NVML_ERROR_INVALID_ARGUMENT;
        return r;
}

/* ---- processes: the server's snapshot holds lupine's own sessions' only */

static nvmlReturn_t procs(nvmlDevice_t device, unsigned int *count, void *infos, size_t stride, bool v1)
{
        struct lup_nvml_proc p[LUP_NVML_MAX_PROCS];
        unsigned n;

        if (!count)
                return NVML_ERROR_INVALID_ARGUMENT;
        nvmlReturn_t r = lupn_dev_procs(device, p, LUP_NVML_MAX_PROCS, &n);
        if (r != NVML_SUCCESS)
                return r;
        if (*count < n || (n && !infos)) {
                *count = n;
                return NVML_ERROR_INSUFFICIENT_SIZE;
        }
        for (unsigned i = 0; i < n; i++) {
                char *at = (char *)infos + i * stride;
                if (v1) {
                        nvmlProcessInfo_v1_t e = { .pid = p[i].pid, .usedGpuMemory = p[i].used };
                        memcpy(at, &e, sizeof(e));
                } else {
                        nvmlProcessInfo_t e = { .pid = p[i].pid,
                                                .usedGpuMemory = p[i].used,
                                                .gpuInstanceId = 0xffffffffu,
                                                .computeInstanceId = 0xffffffffu };
                        memcpy(at, &e, sizeof(e));
                }
        }
        *count = n;
        return NVML_SUCCESS;
}

#define PROC_QUERY(fn, type, v1)                                                             \
        LUPN_API nvmlReturn_t fn(nvmlDevice_t device, unsigned int *infoCount, type *infos); \
        LUPN_API nvmlReturn_t fn(nvmlDevice_t device, unsigned int *infoCount, type *infos)  \
        {                                                                                    \
                return procs(device, infoCount, infos, sizeof(type), v1);                    \
        }

PROC_QUERY(nvmlDeviceGetComputeRunningProcesses, nvmlProcessInfo_v1_t, true)
PROC_QUERY(nvmlDeviceGetComputeRunningProcesses_v2, nvmlProcessInfo_t, false)
PROC_QUERY(nvmlDeviceGetComputeRunningProcesses_v3, nvmlProcessInfo_t, false)

/* lupine runs no graphics work: an empty list wherever the device is valid */
static nvmlReturn_t no_procs(nvmlDevice_t device, unsigned int *count)
{
        unsigned int minor;

        if (!count)
                return NVML_ERROR_INVALID_ARGUMENT;
        nvmlReturn_t r = num_u32(device, LUP_NVML_K_MINOR, &minor);
        if (r == NVML_ERROR_INVALID_ARGUMENT || r == NVML_ERROR_UNINITIALIZED || r == NVML_ERROR_GPU_IS_LOST)
                return r;
        *count = 0;
        return NVML_SUCCESS;
}

#define NO_PROC_QUERY(fn, type)                                                              \
        LUPN_API nvmlReturn_t fn(nvmlDevice_t device, unsigned int *infoCount, type *infos); \
        LUPN_API nvmlReturn_t fn(nvmlDevice_t device, unsigned int *infoCount, type *infos)  \
        {                                                                                    \
                return no_procs(device, infoCount);                                          \
        }

NO_PROC_QUERY(nvmlDeviceGetGraphicsRunningProcesses, nvmlProcessInfo_v1_t)
NO_PROC_QUERY(nvmlDeviceGetGraphicsRunningProcesses_v2, nvmlProcessInfo_t)
NO_PROC_QUERY(nvmlDeviceGetGraphicsRunningProcesses_v3, nvmlProcessInfo_t)
