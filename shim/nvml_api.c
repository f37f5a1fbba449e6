/* SPDX-License-Identifier: MIT */
/*
 * libnvidia-ml.so.1: error strings, system values, device handles and the
 * device's identity (name, UUID, serial, PCI, minor number, index).
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "nvml_shim.h"

LUPN_API const char *nvmlErrorString(nvmlReturn_t result);
LUPN_API const char *nvmlErrorString(nvmlReturn_t result)
{
        static const char *const text[] = {
                [NVML_SUCCESS] = "Success",
                [NVML_ERROR_UNINITIALIZED] = "Uninitialized",
                [NVML_ERROR_INVALID_ARGUMENT] = "Invalid Argument",
                [NVML_ERROR_NOT_SUPPORTED] = "Not Supported",
                [NVML_ERROR_NO_PERMISSION] = "Insufficient Permissions",
                [NVML_ERROR_ALREADY_INITIALIZED] = "Already Initialized",
                [NVML_ERROR_NOT_FOUND] = "Not Found",
                [NVML_ERROR_INSUFFICIENT_SIZE] = "Insufficient Size",
                [NVML_ERROR_INSUFFICIENT_POWER] = "Insufficient External Power",
                [NVML_ERROR_DRIVER_NOT_LOADED] = "Driver Not Loaded",
                [NVML_ERROR_TIMEOUT] = "Timeout",
                [NVML_ERROR_IRQ_ISSUE] = "Interrupt Request Issue",
                [NVML_ERROR_LIBRARY_NOT_FOUND] = "NVML Shared Library Not Found",
                [NVML_ERROR_FUNCTION_NOT_FOUND] = "Function Not Found",
                [NVML_ERROR_CORRUPTED_INFOROM] = "Corrupted infoROM",
                [NVML_ERROR_GPU_IS_LOST] = "GPU is lost",
                [NVML_ERROR_RESET_REQUIRED] = "GPU requires restart",
                [NVML_ERROR_OPERATING_SYSTEM] = "The operating system has blocked the request.",
                [NVML_ERROR_LIB_RM_VERSION_MISMATCH] = "RM has detected an NVML/RM version mismatch.",
                [NVML_ERROR_IN_USE] = "In use by another client",
                [NVML_ERROR_MEMORY] = "Insufficient Memory",
                [NVML_ERROR_NO_DATA] = "No data",
                [NVML_ERROR_VGPU_ECC_NOT_SUPPORTED] = "Not supported with ECC enabled",
                [NVML_ERROR_INSUFFICIENT_RESOURCES] = "Insufficient resources",
                [NVML_ERROR_FREQ_NOT_SUPPORTED] = "Frequency not supported",
                [NVML_ERROR_ARGUMENT_VERSION_MISMATCH] = "Argument version mismatch",
                [NVML_ERROR_DEPRECATED] = "Deprecated",
                [NVML_ERROR_NOT_READY] = "Not ready",
                [NVML_ERROR_GPU_NOT_FOUND] = "GPU not found",
                [NVML_ERROR_INVALID_STATE] = "Invalid state",
        };
        if (result >= 0 && (size_t)result < sizeof(text) / sizeof(text[0]) && text[result])
                return text[result];
        return "Unknown Error";
}

/* Copies a string value into (buf, len) as NVML does: the whole string and
 * its NUL, or NVML_ERROR_INSUFFICIENT_SIZE. */
static nvmlReturn_t put_str(const char *s, char *buf, unsigned int len)
{
        size_t n = strlen(s);

        if (!buf)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (n + 1 > len)
                return NVML_ERROR_INSUFFICIENT_SIZE;
        memcpy(buf, s, n + 1);
        return NVML_SUCCESS;
}

static nvmlReturn_t sys_str(unsigned key, char *buf, unsigned int len)
{
        struct lup_nvml_val v;
        nvmlReturn_t r = lupn_sys_value(key, &v);

        return r != NVML_SUCCESS ? r : put_str(v.str, buf, len);
}

LUPN_API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length);
LUPN_API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
        return sys_str(LUP_NVML_K_DRIVER_VERSION, version, length);
}

LUPN_API nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length);
LUPN_API nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
        return sys_str(LUP_NVML_K_NVML_VERSION, version, length);
}

LUPN_API nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion);
LUPN_API nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
        struct lup_nvml_val v;

        if (!cudaDriverVersion)
                return NVML_ERROR_INVALID_ARGUMENT;
        nvmlReturn_t r = lupn_sys_value(LUP_NVML_K_CUDA_VERSION, &v);
        if (r == NVML_SUCCESS)
                *cudaDriverVersion = (int)v.num;
        return r;
}

LUPN_API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion);
LUPN_API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
        return nvmlSystemGetCudaDriverVersion(cudaDriverVersion);
}

/* ---- handles */

LUPN_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount);
LUPN_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
        if (!deviceCount)
                return NVML_ERROR_INVALID_ARGUMENT;
        return lupn_count(deviceCount);
}

LUPN_API nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount);
LUPN_API nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount)
{
        return nvmlDeviceGetCount_v2(deviceCount);
}

LUPN_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
LUPN_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
        unsigned n;

        if (!device)
                return NVML_ERROR_INVALID_ARGUMENT;
        nvmlReturn_t r = lupn_count(&n);
        if (r != NVML_SUCCESS)
                return r;
        if (index >= n)
                return NVML_ERROR_INVALID_ARGUMENT;
        *device = lupn_handle(index);
        return NVML_SUCCESS;
}

LUPN_API nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device);
LUPN_API nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
        return nvmlDeviceGetHandleByIndex_v2(index, device);
}

/* The first device whose string value of key `key` matches s (eq decides). */
static nvmlReturn_t find_by(unsigned key, const char *s, bool (*eq)(const char *, const char *), nvmlDevice_t *device)
{
        unsigned n;

        if (!s || !device)
                return NVML_ERROR_INVALID_ARGUMENT;
        nvmlReturn_t r = lupn_count(&n);
        if (r != NVML_SUCCESS)
                return r;
        for (unsigned i = 0; i < n; i++) {
                struct lup_nvml_val v;
                if (lupn_dev_value(lupn_handle(i), key, &v) == NVML_SUCCESS && eq(v.str, s)) {
                        *device = lupn_handle(i);
                        return NVML_SUCCESS;
                }
        }
        return NVML_ERROR_NOT_FOUND;
}

static bool str_eq(const char *a, const char *b)
{
        return strcmp(a, b) == 0;
}

/* PCI bus ids compare by value: "0000:18:00.0" names "00000000:18:00.0". */
static bool bus_id_eq(const char *a, const char *b)
{
        unsigned d1, b1, s1, f1 = 0, d2, b2, s2, f2 = 0;

        if (sscanf(a, "%x:%x:%x.%x", &d1, &b1, &s1, &f1) < 3 || sscanf(b, "%x:%x:%x.%x", &d2, &b2, &s2, &f2) < 3)
                return strcasecmp(a, b) == 0;
        return d1 == d2 && b1 == b2 && s1 == s2 && f1 == f2;
}

LUPN_API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device);
LUPN_API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
        return find_by(LUP_NVML_K_UUID, uuid, str_eq, device);
}

LUPN_API nvmlReturn_t nvmlDeviceGetHandleBySerial(const char *serial, nvmlDevice_t *device);
LUPN_API nvmlReturn_t nvmlDeviceGetHandleBySerial(const char *serial, nvmlDevice_t *device)
{
        return find_by(LUP_NVML_K_SERIAL, serial, str_eq, device);
}

LUPN_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device);
LUPN_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
        return find_by(LUP_NVML_K_PCI_BUS_ID, pciBusId, bus_id_eq, device);
}

LUPN_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device);
LUPN_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device)
{
        return nvmlDeviceGetHandleByPciBusId_v2(pciBusId, device);
}

LUPN_API nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index);
LUPN_API nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
        struct lup_nvml_val v;

        if (!index)
                return NVML_ERROR_INVALID_ARGUMENT;
        nvmlReturn_t r = lupn_dev_value(device, LUP_NVML_K_UUID, &v); /* checks the handle */
        if (r == NVML_ERROR_INVALID_ARGUMENT || r == NVML_ERROR_UNINITIALIZED || r == NVML_ERROR_GPU_IS_LOST)
                return r;
        *index = device->index;
        return NVML_SUCCESS;
}

/* ---- identity */

static nvmlReturn_t dev_str(nvmlDevice_t device, unsigned key, char *buf, unsigned int len)
{
        struct lup_nvml_val v;
        nvmlReturn_t r = lupn_dev_value(device, key, &v);

        return r != NVML_SUCCESS ? r : put_str(v.str, buf, len);
}

/* The name as libcuda.so.1 shows it: a real remote GPU is marked
 * " (lupine)" (with several servers, common/nvml_fetch.c put it before
 * the server's name); the simulated one already says "(sim)". */
LUPN_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);
LUPN_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
        struct lup_nvml_val v;
        char full[LUP_NVML_MAX_STR + 16];
        nvmlReturn_t r = lupn_dev_value(device, LUP_NVML_K_NAME, &v);

        if (r != NVML_SUCCESS)
                return r;
        bool mark = lupn_backend() == LUP_BACKEND_CUDA && !strstr(v.str, " (lupine)");
        snprintf(full, sizeof(full), "%s%s", v.str, mark ? " (lupine)" : "");
        return put_str(full, name, length);
}

LUPN_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
LUPN_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
        return dev_str(device, LUP_NVML_K_UUID, uuid, length);
}

LUPN_API nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length);
LUPN_API nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length)
{
        return dev_str(device, LUP_NVML_K_SERIAL, serial, length);
}

LUPN_API nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char *version, unsigned int length);
LUPN_API nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char *version, unsigned int length)
{
        return dev_str(device, LUP_NVML_K_VBIOS, version, length);
}

static nvmlReturn_t pci_info(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
        static const unsigned keys[] = { LUP_NVML_K_PCI_DOMAIN, LUP_NVML_K_PCI_BUS, LUP_NVML_K_PCI_DEVICE,
                                         LUP_NVML_K_PCI_DEVICE_ID, LUP_NVML_K_PCI_SUBSYS_ID };
        unsigned vals[5];
        struct lup_nvml_val v;

        if (!pci)
                return NVML_ERROR_INVALID_ARGUMENT;
        for (unsigned i = 0; i < 5; i++) {
                nvmlReturn_t r = lupn_dev_value(device, keys[i], &v);
                if (r != NVML_SUCCESS)
                        return r;
                vals[i] = (unsigned)v.num;
        }
        memset(pci, 0, sizeof(*pci));
        pci->domain = vals[0];
        pci->bus = vals[1];
        pci->device = vals[2];
        pci->pciDeviceId = vals[3];
        pci->pciSubSystemId = vals[4];
        snprintf(pci->busId, sizeof(pci->busId), "%08X:%02X:%02X.0", vals[0], vals[1] & 0xff, vals[2] & 0xff);
        snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.0", vals[0] & 0xffff, vals[1] & 0xff,
                 vals[2] & 0xff);
        return NVML_SUCCESS;
}

LUPN_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci);
LUPN_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
        return pci_info(device, pci);
}

LUPN_API nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci);
LUPN_API nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
        return pci_info(device, pci);
}

LUPN_API nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci);
LUPN_API nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
        return pci_info(device, pci);
}
