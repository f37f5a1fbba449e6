/* SPDX-License-Identifier: MIT */
/*
 * A C program against the NVML API through lupine's libnvidia-ml.so.1
 * (tests/e2e/test_nvml.py runs it). It declares the NVML prototypes it
 * uses itself, as a program built against nvml.h would see them.
 *
 *   e2e_nvml query N   every answered family on N devices, and what the
 *                      stubs and bad arguments return
 *   e2e_nvml cuda      the same device list as libcuda.so.1: names, UUIDs
 *   e2e_nvml internal  the private table nvidia-smi asks for
 *                      (nvmlInternalGetExportTable): the slots it calls
 *   e2e_nvml list      each device's index, UUID and PCI bus id
 *   e2e_nvml wait      query, print "ready", wait for a line on stdin,
 *                      query again (lupined restarted meanwhile): exit 0
 *   e2e_nvml lost      as wait, but lupined is gone: the call must fail
 *                      cleanly with NVML_ERROR_GPU_IS_LOST
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml_types.h"

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t r);
nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int n);
nvmlReturn_t nvmlSystemGetNVMLVersion(char *v, unsigned int n);
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d);
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *d);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus, nvmlDevice_t *d);
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *i);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *s, unsigned int n);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *s, unsigned int n);
nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t d, char *s, unsigned int n);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p);
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned int *m);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m);
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u);
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *t);
nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t d, int type, unsigned int *t);
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *p);
nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t d, unsigned int *lo, unsigned int *hi);
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *p);
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int *c);
nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t d, int type, unsigned int *c);
nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t d, unsigned int *f);
nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t d, int *p);
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long *r);
nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t d, int *cur, int *pend);
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int e, int c, unsigned long long *n);
nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t d, int cause, unsigned int *n, unsigned long long *a);
nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned int *c, unsigned int *u, unsigned int *p,
                                       unsigned int *f);
nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t d, int *m);
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *cur, unsigned int *pend);
nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, int *m);
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_t *p);
nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t d, nvmlTemperature_v1_t *t);
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int n, nvmlFieldValue_t *v);
nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t d, unsigned int *is_mig);
nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t d, unsigned int *n, unsigned int *clocks);
nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t d, unsigned int *gen);
nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t d, unsigned int *util, unsigned int *period);
nvmlReturn_t nvmlDeviceGetOfaUtilization(nvmlDevice_t d, unsigned int *util, unsigned int *period);
nvmlReturn_t nvmlDeviceValidateInforom(nvmlDevice_t d);
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned int *n);
nvmlReturn_t nvmlDeviceGetVirtualizationMode(nvmlDevice_t d, unsigned int *mode);
nvmlReturn_t nvmlEventSetCreate(void **set);
nvmlReturn_t nvmlEventSetFree(void *set);
nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t d, unsigned long long *types);
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types, void *set);
nvmlReturn_t nvmlEventSetWait_v2(void *set, void *data, unsigned int timeout_ms);
/* not in nvml.h: the private entry point nvidia-smi calls */
nvmlReturn_t nvmlInternalGetExportTable(const void **table, const void *id);

static int failures;
#define NV(call)                                                                                                   \
        do {                                                                                                       \
                nvmlReturn_t r_ = (call);                                                                          \
                if (r_ != NVML_SUCCESS) {                                                                          \
                        fprintf(stderr, "%s:%d: %s: %d %s\n", __FILE__, __LINE__, #call, r_, nvmlErrorString(r_)); \
                        failures++;                                                                                \
                }                                                                                                  \
        } while (0)
#define WANT(cond)                                                                                     \
        do {                                                                                           \
                if (!(cond)) {                                                                         \
                        fprintf(stderr, "%s:%d: expectation failed: %s\n", __FILE__, __LINE__, #cond); \
                        failures++;                                                                    \
                }                                                                                      \
        } while (0)

static void query_device(unsigned i)
{
        nvmlDevice_t d = NULL, d2 = NULL;
        char name[96], uuid[96], serial[64], small[4];
        nvmlPciInfo_t pci;
        nvmlMemory_t m;
        nvmlMemory_v2_t m2 = { .version = NVML_STRUCT_VERSION(sizeof(nvmlMemory_v2_t), 2) };
        nvmlUtilization_t u;
        unsigned v, lo, hi, idx;
        int a, b;
        unsigned long long ull;

        NV(nvmlDeviceGetHandleByIndex_v2(i, &d));
        NV(nvmlDeviceGetName(d, name, sizeof(name)));
        WANT(nvmlDeviceGetName(d, small, sizeof(small)) == NVML_ERROR_INSUFFICIENT_SIZE);
        NV(nvmlDeviceGetUUID(d, uuid, sizeof(uuid)));
        WANT(strncmp(uuid, "GPU-", 4) == 0 && strlen(uuid) == 40);
        NV(nvmlDeviceGetHandleByUUID(uuid, &d2));
        WANT(d2 == d);
        NV(nvmlDeviceGetSerial(d, serial, sizeof(serial)));
        NV(nvmlDeviceGetPciInfo_v3(d, &pci));
        NV(nvmlDeviceGetHandleByPciBusId_v2(pci.busIdLegacy, &d2));
        WANT(d2 == d);
        NV(nvmlDeviceGetIndex(d, &idx));
        WANT(idx == i);
        NV(nvmlDeviceGetMinorNumber(d, &v));
        NV(nvmlDeviceGetMemoryInfo(d, &m));
        WANT(m.total > 0 && m.free + m.used == m.total);
        NV(nvmlDeviceGetMemoryInfo_v2(d, &m2));
        WANT(m2.total == m.total);
        NV(nvmlDeviceGetUtilizationRates(d, &u));
        WANT(u.gpu <= 100 && u.memory <= 100);
        NV(nvmlDeviceGetTemperature(d, 0, &v));
        WANT(v > 0 && v < 120);
        for (int t = 0; t < 4; t++)
                NV(nvmlDeviceGetTemperatureThreshold(d, t, &v));
        NV(nvmlDeviceGetPowerUsage(d, &v));
        WANT(v > 0);
        NV(nvmlDeviceGetPowerManagementLimitConstraints(d, &lo, &hi));
        WANT(lo <= hi);
        NV(nvmlDeviceGetEnforcedPowerLimit(d, &v));
        for (int c = 0; c < 4; c++) {
                NV(nvmlDeviceGetClockInfo(d, c, &v));
                NV(nvmlDeviceGetMaxClockInfo(d, c, &hi));
                WANT(v <= hi);
        }
        WANT(nvmlDeviceGetClockInfo(d, 9, &v) == NVML_ERROR_INVALID_ARGUMENT);
        NV(nvmlDeviceGetFanSpeed(d, &v));
        NV(nvmlDeviceGetPerformanceState(d, &a));
        NV(nvmlDeviceGetCurrentClocksEventReasons(d, &ull));
        NV(nvmlDeviceGetEccMode(d, &a, &b));
        int ecc = a;
        NV(nvmlDeviceGetTotalEccErrors(d, 1, 0, &ull));
        v = 0;
        NV(nvmlDeviceGetRetiredPages(d, 1, &v, NULL));
        NV(nvmlDeviceGetRemappedRows(d, &v, &lo, &hi, &idx));
        NV(nvmlDeviceGetComputeMode(d, &a));
        NV(nvmlDeviceGetMigMode(d, &lo, &hi));
        NV(nvmlDeviceGetPersistenceMode(d, &a));
        NV(nvmlDeviceGetCudaComputeCapability(d, &a, &b));
        WANT(a >= 1);
        v = 0;
        nvmlReturn_t r = nvmlDeviceGetComputeRunningProcesses_v3(d, &v, NULL);
        WANT(r == NVML_SUCCESS || r == NVML_ERROR_INSUFFICIENT_SIZE);
        nvmlTemperature_v1_t tv = { .version = NVML_STRUCT_VERSION(sizeof(tv), 1) };
        NV(nvmlDeviceGetTemperatureV(d, &tv));
        WANT(tv.temperature > 0);
        tv.version = 7;
        WANT(nvmlDeviceGetTemperatureV(d, &tv) == NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
        nvmlFieldValue_t fv[3] = { { .fieldId = NVML_FI_DEV_POWER_INSTANT },
                                   { .fieldId = NVML_FI_DEV_ECC_CURRENT },
                                   { .fieldId = 82 /* memory temperature: not answered */ } };
        NV(nvmlDeviceGetFieldValues(d, 3, fv));
        WANT(fv[0].nvmlReturn == NVML_SUCCESS && fv[0].value.uiVal > 0);
        WANT(fv[1].nvmlReturn == NVML_SUCCESS && fv[1].value.uiVal == (unsigned)ecc);
        WANT(fv[2].nvmlReturn == NVML_ERROR_NOT_SUPPORTED);
        NV(nvmlDeviceIsMigDeviceHandle(d, &v));
        WANT(v == 0);
        /* the media engines and the inforom check (nvidia-smi's dmon and plain view) */
        unsigned util = 1, period = 0;
        NV(nvmlDeviceGetEncoderUtilization(d, &util, &period));
        WANT(util == 0 && period > 0);
        NV(nvmlDeviceGetOfaUtilization(d, &util, &period));
        NV(nvmlDeviceValidateInforom(d));
        unsigned mig_max = 0, virt = 9;
        NV(nvmlDeviceGetMaxMigDeviceCount(d, &mig_max));
        NV(nvmlDeviceGetVirtualizationMode(d, &virt));
        WANT(mig_max == 7 && virt == 0);
        /* a stub: not supported, whatever its arguments */
        WANT(nvmlDeviceGetSupportedMemoryClocks(d, &v, NULL) == NVML_ERROR_NOT_SUPPORTED);
        printf("device %u: %s %s %s mem %llu temp ok\n", i, name, uuid, pci.busId, m.total);
}

static int query(unsigned want)
{
        char s[96];
        unsigned n = 0;
        int cv = 0;
        nvmlDevice_t d;

        NV(nvmlSystemGetDriverVersion(s, sizeof(s)));
        NV(nvmlSystemGetNVMLVersion(s, sizeof(s)));
        NV(nvmlSystemGetCudaDriverVersion_v2(&cv));
        WANT(cv >= 12000);
        NV(nvmlDeviceGetCount_v2(&n));
        WANT(want == 0 || n == want);
        for (unsigned i = 0; i < n; i++)
                query_device(i);
        WANT(nvmlDeviceGetHandleByIndex_v2(n, &d) == NVML_ERROR_INVALID_ARGUMENT);
        /* events: sets work, no event type is supported, a wait times out */
        void *set = NULL;
        unsigned long long types = 1;
        unsigned char data[64];
        NV(nvmlEventSetCreate(&set));
        if (n) {
                NV(nvmlDeviceGetHandleByIndex_v2(0, &d));
                NV(nvmlDeviceGetSupportedEventTypes(d, &types));
                WANT(types == 0);
                NV(nvmlDeviceRegisterEvents(d, 0, set));
                WANT(nvmlDeviceRegisterEvents(d, 8, set) == NVML_ERROR_NOT_SUPPORTED);
        }
        WANT(nvmlEventSetWait_v2(set, data, 20) == NVML_ERROR_TIMEOUT);
        NV(nvmlEventSetFree(set));
        WANT(nvmlDeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-000000000000", &d) == NVML_ERROR_NOT_FOUND);
        WANT(nvmlDeviceGetTemperature((nvmlDevice_t)&s, 0, &n) == NVML_ERROR_INVALID_ARGUMENT);
        return failures;
}

/* libcuda.so.1 and libnvidia-ml.so.1 list the same devices, in the same order. */
static int same_as_cuda(void)
{
        int n = 0;
        unsigned nn = 0;

        if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&n) != CUDA_SUCCESS) {
                fprintf(stderr, "cuInit failed\n");
                return 1;
        }
        NV(nvmlDeviceGetCount_v2(&nn));
        WANT((unsigned)n == nn);
        for (int i = 0; i < n && (unsigned)i < nn; i++) {
                CUuuid cu;
                char cname[256], nname[96], nuuid[96], want[64];
                nvmlDevice_t d;
                cuDeviceGetUuid_v2(&cu, i);
                cuDeviceGetName(cname, sizeof(cname), i);
                NV(nvmlDeviceGetHandleByIndex_v2((unsigned)i, &d));
                NV(nvmlDeviceGetName(d, nname, sizeof(nname)));
                NV(nvmlDeviceGetUUID(d, nuuid, sizeof(nuuid)));
                const unsigned char *u = (const unsigned char *)cu.bytes;
                snprintf(want, sizeof(want), "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                         u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
                         u[15]);
                WANT(strcmp(want, nuuid) == 0);
                WANT(strcmp(cname, nname) == 0);
                printf("device %d: cuda '%s' nvml '%s' %s\n", i, cname, nname, nuuid);
        }
        return failures;
}

/* nvidia-smi's table: its size, the device handles of slot 81, the
 * process list of slot 213 (entries of 4128 bytes), slot 230's PCIe
 * generation, slot 249's "not supported", slot 72's 1 (dmon needs it), a
 * zeroed count elsewhere. */
static int internal(void)
{
        static const unsigned char id[16] = { 0xc4, 0xfe, 0x3e, 0x6c, 0xc9, 0x8f, 0x6c, 0x4e,
                                              0xa3, 0x27, 0xee, 0x69, 0x6e, 0x12, 0xf7, 0xc4 };
        typedef nvmlReturn_t (*slot_fn)(void *, void *, void *, void *);
        const void *table = NULL, *other = NULL;
        unsigned char wrong[16] = { 1 };
        unsigned n = 0;

        WANT(nvmlInternalGetExportTable(&other, wrong) == NVML_ERROR_NOT_SUPPORTED);
        NV(nvmlInternalGetExportTable(&table, id));
        const uintptr_t *t = table;
        WANT(t && t[0] > 648 && t[0] % sizeof(uintptr_t) == 0);
        for (size_t i = 1; t && i < t[0] / sizeof(uintptr_t); i++)
                WANT(t[i] != 0);
        NV(nvmlDeviceGetCount_v2(&n));
        for (unsigned i = 0; t && i < n; i++) {
                nvmlDevice_t want, got = NULL;
                NV(nvmlDeviceGetHandleByIndex_v2(i, &want));
                NV(((slot_fn)t[81])((void *)(uintptr_t)i, &got, (void *)0x22, NULL));
                WANT(got == want);
                unsigned cap = 250, pub = 0;
                unsigned char *entries = calloc(cap, 4128);
                nvmlProcessInfo_t pi[64];
                unsigned pn = 64;
                NV(((slot_fn)t[213])(got, &cap, entries, NULL));
                NV(nvmlDeviceGetComputeRunningProcesses_v3(got, &pn, pi));
                pub = pn;
                WANT(cap == pub);
                for (unsigned k = 0; k < cap && k < pn; k++) {
                        unsigned pid;
                        memcpy(&pid, entries + (size_t)k * 4128, 4);
                        WANT(pid == pi[k].pid);
                        WANT(entries[(size_t)k * 4128 + 32] != 0); /* a name */
                }
                free(entries);
                unsigned gen = 0, want_gen = 0, count = 77;
                WANT(((slot_fn)t[230])(got, &gen, NULL, NULL) == nvmlDeviceGetMaxPcieLinkGeneration(got, &want_gen));
                WANT(gen == want_gen);
                WANT(((slot_fn)t[249])(got, &gen, NULL, NULL) == NVML_ERROR_NOT_SUPPORTED);
                NV(((slot_fn)t[100])(got, &count, NULL, NULL));
                WANT(count == 0);
                NV(((slot_fn)t[72])(got, &count, got, (void *)1));
                WANT(count == 1);
                printf("device %u: internal slots ok, %u processes\n", i, pub);
        }
        return failures;
}

/* Every device NVML lists: "nvml I UUID PCI-BUS-ID" (CUDA_VISIBLE_DEVICES
 * changes nothing here, as with the real library). */
static int list(void)
{
        unsigned n = 0;
        NV(nvmlDeviceGetCount_v2(&n));
        for (unsigned i = 0; i < n; i++) {
                nvmlDevice_t d;
                nvmlPciInfo_t pci;
                char uuid[96];
                NV(nvmlDeviceGetHandleByIndex_v2(i, &d));
                NV(nvmlDeviceGetUUID(d, uuid, sizeof(uuid)));
                NV(nvmlDeviceGetPciInfo_v3(d, &pci));
                printf("nvml %u %s %s\n", i, uuid, pci.busId);
        }
        return failures;
}

/* PyTorch's order: NVML's device count first (a snapshot), then a CUDA
 * context, then at once the process list, which must show this session's
 * worker although the snapshot is younger than a second. */
static int fresh_procs(void)
{
        unsigned nn = 0, before = 64, after = 64;
        nvmlProcessInfo_t pi[64];
        nvmlDevice_t d;
        CUcontext c;

        NV(nvmlDeviceGetCount_v2(&nn));
        NV(nvmlDeviceGetHandleByIndex_v2(0, &d));
        NV(nvmlDeviceGetComputeRunningProcesses_v3(d, &before, pi));
        if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&c, 0) != CUDA_SUCCESS ||
            cuCtxSetCurrent(c) != CUDA_SUCCESS) {
                fprintf(stderr, "cuInit failed\n");
                return 1;
        }
        CUdeviceptr p;
        WANT(cuMemAlloc(&p, 1 << 20) == CUDA_SUCCESS);
        NV(nvmlDeviceGetComputeRunningProcesses_v3(d, &after, pi));
        printf("processes before the context %u, after %u\n", before, after);
        WANT(after == before + 1);
        return failures;
}

int main(int argc, char **argv)
{
        const char *mode = argc > 1 ? argv[1] : "query";
        char line[16];

        nvmlReturn_t r = nvmlInit_v2();
        if (r != NVML_SUCCESS) {
                fprintf(stderr, "nvmlInit_v2: %d %s\n", r, nvmlErrorString(r));
                return 2;
        }
        if (!strcmp(mode, "query"))
                query(argc > 2 ? (unsigned)atoi(argv[2]) : 0);
        else if (!strcmp(mode, "cuda"))
                same_as_cuda();
        else if (!strcmp(mode, "internal"))
                internal();
        else if (!strcmp(mode, "fresh"))
                fresh_procs();
        else if (!strcmp(mode, "list"))
                list();
        else if (!strcmp(mode, "wait") || !strcmp(mode, "lost")) {
                query(0);
                printf("ready\n");
                fflush(stdout);
                if (!fgets(line, sizeof(line), stdin))
                        return 3;
                unsigned n;
                r = nvmlDeviceGetCount_v2(&n);
                if (!strcmp(mode, "wait")) {
                        WANT(r == NVML_SUCCESS);
                        if (r == NVML_SUCCESS)
                                query(n);
                } else
                        WANT(r == NVML_ERROR_GPU_IS_LOST);
                printf("after: %d %s\n", r, nvmlErrorString(r));
        }
        WANT(nvmlShutdown() == NVML_SUCCESS);
        WANT(nvmlShutdown() == NVML_ERROR_UNINITIALIZED);
        printf("%s\n", failures ? "FAILED" : "PASSED");
        return failures ? 1 : 0;
}
