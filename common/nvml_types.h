/* SPDX-License-Identifier: MIT */
/*
 * The part of NVML's ABI (driver 580, NVML API version 13) that lupine's
 * libnvidia-ml.so.1 answers: return codes, enums and structures, written
 * from NVIDIA's NVML reference (docs.nvidia.com/deploy/nvml-api). The
 * layouts are the ABI: fields, order and sizes must match the real ones.
 */
#ifndef LUPN_NVML_TYPES_H
#define LUPN_NVML_TYPES_H

#include <stdint.h>

typedef int nvmlReturn_t;
enum {
        NVML_SUCCESS = 0,
        NVML_ERROR_UNINITIALIZED = 1,
        NVML_ERROR_INVALID_ARGUMENT = 2,
        NVML_ERROR_NOT_SUPPORTED = 3,
        NVML_ERROR_NO_PERMISSION = 4,
        NVML_ERROR_ALREADY_INITIALIZED = 5,
        NVML_ERROR_NOT_FOUND = 6,
        NVML_ERROR_INSUFFICIENT_SIZE = 7,
        NVML_ERROR_INSUFFICIENT_POWER = 8,
        NVML_ERROR_DRIVER_NOT_LOADED = 9,
        NVML_ERROR_TIMEOUT = 10,
        NVML_ERROR_IRQ_ISSUE = 11,
        NVML_ERROR_LIBRARY_NOT_FOUND = 12,
        NVML_ERROR_FUNCTION_NOT_FOUND = 13,
        NVML_ERROR_CORRUPTED_INFOROM = 14,
        NVML_ERROR_GPU_IS_LOST = 15,
        NVML_ERROR_RESET_REQUIRED = 16,
        NVML_ERROR_OPERATING_SYSTEM = 17,
        NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
        NVML_ERROR_IN_USE = 19,
        NVML_ERROR_MEMORY = 20,
        NVML_ERROR_NO_DATA = 21,
        NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
        NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
        NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
        NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
        NVML_ERROR_DEPRECATED = 26,
        NVML_ERROR_NOT_READY = 27,
        NVML_ERROR_GPU_NOT_FOUND = 28,
        NVML_ERROR_INVALID_STATE = 29,
        NVML_ERROR_UNKNOWN = 999,
};

#define NVML_VALUE_NOT_AVAILABLE              0xffffffffffffffffull
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE    32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
/* versioned structures carry (size | version << 24) in their first field */
#define NVML_STRUCT_VERSION(size, ver)        ((unsigned int)(size) | ((unsigned int)(ver) << 24u))

typedef struct lupn_device *nvmlDevice_t; /* opaque: the shim's own, or the host NVML's */

typedef struct {
        char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
        unsigned int domain;
        unsigned int bus;
        unsigned int device;
        unsigned int pciDeviceId;
        unsigned int pciSubSystemId;
        char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

typedef struct {
        unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
        unsigned int version;
        unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

typedef struct {
        unsigned long long bar1Total, bar1Free, bar1Used;
} nvmlBAR1Memory_t;

typedef struct {
        unsigned int gpu, memory;
} nvmlUtilization_t;

typedef struct {
        unsigned int pid;
        unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct {
        unsigned int pid;
        unsigned long long usedGpuMemory;
        unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t; /* _v2 and _v3 share this layout */

typedef struct {
        unsigned int version; /* NVML_STRUCT_VERSION(sizeof, 1) */
        int sensorType;       /* nvmlTemperatureSensors_t */
        int temperature;
} nvmlTemperature_v1_t;

/* nvmlValueType_t, nvmlValue_t, nvmlFieldValue_t */
enum {
        NVML_VALUE_TYPE_UNSIGNED_INT = 1,
        NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3
};
typedef union {
        double dVal;
        int siVal;
        unsigned int uiVal;
        unsigned long ulVal;
        unsigned long long ullVal;
        signed long long sllVal;
        unsigned short usVal;
} nvmlValue_t;
typedef struct {
        unsigned int fieldId;
        unsigned int scopeId;
        long long timestamp; /* microseconds since 1970 */
        long long latencyUsec;
        int valueType;
        nvmlReturn_t nvmlReturn;
        nvmlValue_t value;
} nvmlFieldValue_t;
/* the field ids lupine answers */
enum {
        NVML_FI_DEV_ECC_CURRENT = 1,
        NVML_FI_DEV_ECC_PENDING = 2,
        NVML_FI_DEV_POWER_AVERAGE = 185,
        NVML_FI_DEV_POWER_INSTANT = 186,
        NVML_FI_DEV_POWER_MIN_LIMIT = 187,
        NVML_FI_DEV_POWER_MAX_LIMIT = 188,
        NVML_FI_DEV_POWER_DEFAULT_LIMIT = 189,
        NVML_FI_DEV_POWER_CURRENT_LIMIT = 190,
};

/* nvmlTemperatureThresholds_t */
enum {
        NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0,
        NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1,
        NVML_TEMPERATURE_THRESHOLD_MEM_MAX = 2,
        NVML_TEMPERATURE_THRESHOLD_GPU_MAX = 3,
};
enum {
        NVML_TEMPERATURE_GPU = 0
};
/* nvmlClockType_t and nvmlClockId_t */
enum {
        NVML_CLOCK_GRAPHICS = 0,
        NVML_CLOCK_SM = 1,
        NVML_CLOCK_MEM = 2,
        NVML_CLOCK_VIDEO = 3,
        NVML_CLOCK_COUNT
};
enum {
        NVML_CLOCK_ID_CURRENT = 0
};
/* nvmlMemoryErrorType_t, nvmlEccCounterType_t */
enum {
        NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
        NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
};
enum {
        NVML_VOLATILE_ECC = 0,
        NVML_AGGREGATE_ECC = 1
};
/* nvmlPageRetirementCause_t */
enum {
        NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
        NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
};
/* nvmlDeviceGetPciInfo_v3 is the current one; the older ones differ only in
 * how busId is filled, which lupine does the same way. */

#endif
