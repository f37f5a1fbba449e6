/* SPDX-License-Identifier: MIT */
/*
 * The host's real NVML for the supervisor (supervisor/nvml_values.h).
 * libnvidia-ml.so.1 is opened with dlopen the first time an NVML client
 * asks; its functions are looked up by name, one at a time, and a missing
 * one only makes its values NVML_ERROR_FUNCTION_NOT_FOUND. NVML makes no
 * CUDA context: the supervisor still never initialises CUDA.
 */
#define LUP_LOG_CAT LUP_LOGC_NVML
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "nvml_types.h"
#include "supervisor/nvml_values.h"

#define HOST_RETRY_MS 60000u

static void *lib;
static uint64_t failed_at_ms;

typedef nvmlReturn_t (*fn_void)(void);
typedef nvmlReturn_t (*fn_u32p)(nvmlDevice_t, unsigned int *);
typedef nvmlReturn_t (*fn_u32p2)(nvmlDevice_t, unsigned int *, unsigned int *);
typedef nvmlReturn_t (*fn_u64p)(nvmlDevice_t, unsigned long long *);
typedef nvmlReturn_t (*fn_arg_u32p)(nvmlDevice_t, int, unsigned int *);
typedef nvmlReturn_t (*fn_str)(nvmlDevice_t, char *, unsigned int);

static void *sym(const char *name)
{
        return lib ? dlsym(lib, name) : NULL;
}

int lupd_nvml_host_open(const char **why)
{
        uint64_t now = lup_now_ns() / 1000000u;

        if (lib)
                return 0;
        if (failed_at_ms && now - failed_at_ms < HOST_RETRY_MS) {
                *why = "the host's NVML failed to load or initialise (tried again a minute after)";
                return -ENOENT;
        }
        lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
                failed_at_ms = now;
                lup_warn("NVML: cannot load libnvidia-ml.so.1: %s", dlerror());
                *why = "the host has no libnvidia-ml.so.1";
                return -ENOENT;
        }
        if (dlsym(lib, "lupine_nvml_shim_version")) {
                lup_err("NVML: the libnvidia-ml.so.1 found is lupine's client library, not the host's; remove "
                        "lupine's shim from lupined's LD_LIBRARY_PATH");
                dlclose(lib);
                lib = NULL;
                failed_at_ms = now;
                *why = "the libnvidia-ml.so.1 lupined found is lupine's own client library";
                return -ELOOP;
        }
        fn_void init = (fn_void)sym("nvmlInit_v2");
        nvmlReturn_t r = init ? init() : NVML_ERROR_FUNCTION_NOT_FOUND;
        if (r != NVML_SUCCESS) {
                lup_warn("NVML: nvmlInit_v2 on the host failed (%d)", r);
                dlclose(lib);
                lib = NULL;
                failed_at_ms = now;
                *why = "the host's nvmlInit_v2 failed";
                return -EIO;
        }
        lup_info("NVML: using the host's libnvidia-ml.so.1 for NVML clients");
        return 0;
}

static struct lup_nvml_val *dv(struct lup_nvml_dev *d, unsigned k)
{
        return lup_nvml_devval(d, k);
}

static void put(struct lup_nvml_val *v, nvmlReturn_t r, uint64_t num)
{
        if (r == NVML_SUCCESS)
                lup_nvml_set_num(v, num);
        else
                lup_nvml_set_ret(v, (uint32_t)r);
}

static void one_u32(struct lup_nvml_dev *d, nvmlDevice_t h, unsigned k, const char *name)
{
        fn_u32p f = (fn_u32p)sym(name);
        unsigned int v = 0;
        /* the call first: in put(..., f(h, &v), v) C may read v before the call */
        nvmlReturn_t r = f ? f(h, &v) : NVML_ERROR_FUNCTION_NOT_FOUND;

        put(dv(d, k), r, v);
}

static void two_u32(struct lup_nvml_dev *d, nvmlDevice_t h, unsigned k1, unsigned k2, const char *name)
{
        fn_u32p2 f = (fn_u32p2)sym(name);
        unsigned int a = 0, b = 0;
        nvmlReturn_t r = f ? f(h, &a, &b) : NVML_ERROR_FUNCTION_NOT_FOUND;

        put(dv(d, k1), r, a);
        put(dv(d, k2), r, b);
}

static void one_u64(struct lup_nvml_dev *d, nvmlDevice_t h, unsigned k, const char *name)
{
        fn_u64p f = (fn_u64p)sym(name);
        unsigned long long v = 0;
        nvmlReturn_t r = f ? f(h, &v) : NVML_ERROR_FUNCTION_NOT_FOUND;

        put(dv(d, k), r, v);
}

static void arg_u32(struct lup_nvml_dev *d, nvmlDevice_t h, unsigned k, const char *name, int arg)
{
        fn_arg_u32p f = (fn_arg_u32p)sym(name);
        unsigned int v = 0;
        nvmlReturn_t r = f ? f(h, arg, &v) : NVML_ERROR_FUNCTION_NOT_FOUND;

        put(dv(d, k), r, v);
}

static void one_str(struct lup_nvml_dev *d, nvmlDevice_t h, unsigned k, const char *name)
{
        fn_str f = (fn_str)sym(name);
        char buf[LUP_NVML_MAX_STR + 1] = { 0 };
        nvmlReturn_t r = f ? f(h, buf, sizeof(buf)) : NVML_ERROR_FUNCTION_NOT_FOUND;

        if (r == NVML_SUCCESS)
                lup_nvml_set_str(dv(d, k), buf);
        else
                lup_nvml_set_ret(dv(d, k), (uint32_t)r);
}

static void host_memory(struct lup_nvml_dev *d, nvmlDevice_t h)
{
        typedef nvmlReturn_t (*fn_mem2)(nvmlDevice_t, nvmlMemory_v2_t *);
        typedef nvmlReturn_t (*fn_mem)(nvmlDevice_t, nvmlMemory_t *);
        typedef nvmlReturn_t (*fn_bar1)(nvmlDevice_t, nvmlBAR1Memory_t *);
        fn_mem2 f2 = (fn_mem2)sym("nvmlDeviceGetMemoryInfo_v2");
        nvmlMemory_v2_t m2 = { .version = NVML_STRUCT_VERSION(sizeof(nvmlMemory_v2_t), 2) };
        nvmlReturn_t r = f2 ? f2(h, &m2) : NVML_ERROR_FUNCTION_NOT_FOUND;

        if (r != NVML_SUCCESS) {
                fn_mem f1 = (fn_mem)sym("nvmlDeviceGetMemoryInfo");
                nvmlMemory_t m = { 0 };
                r = f1 ? f1(h, &m) : NVML_ERROR_FUNCTION_NOT_FOUND;
                m2.total = m.total;
                m2.free = m.free;
                m2.used = m.used;
                m2.reserved = 0;
        }
        put(dv(d, LUP_NVML_K_MEM_TOTAL), r, m2.total);
        put(dv(d, LUP_NVML_K_MEM_FREE), r, m2.free);
        put(dv(d, LUP_NVML_K_MEM_USED), r, m2.used);
        put(dv(d, LUP_NVML_K_MEM_RESERVED), r, m2.reserved);
        fn_bar1 fb = (fn_bar1)sym("nvmlDeviceGetBAR1MemoryInfo");
        nvmlBAR1Memory_t b = { 0 };
        r = fb ? fb(h, &b) : NVML_ERROR_FUNCTION_NOT_FOUND;
        put(dv(d, LUP_NVML_K_BAR1_TOTAL), r, b.bar1Total);
        put(dv(d, LUP_NVML_K_BAR1_USED), r, b.bar1Used);
}

static void host_pci_util(struct lup_nvml_dev *d, nvmlDevice_t h)
{
        typedef nvmlReturn_t (*fn_pci)(nvmlDevice_t, nvmlPciInfo_t *);
        typedef nvmlReturn_t (*fn_util)(nvmlDevice_t, nvmlUtilization_t *);
        fn_pci fp = (fn_pci)sym("nvmlDeviceGetPciInfo_v3");
        nvmlPciInfo_t p = { 0 };
        nvmlReturn_t r = fp ? fp(h, &p) : NVML_ERROR_FUNCTION_NOT_FOUND;

        if (r == NVML_SUCCESS) {
                p.busId[sizeof(p.busId) - 1] = 0;
                lup_nvml_set_str(dv(d, LUP_NVML_K_PCI_BUS_ID), p.busId);
        } else
                lup_nvml_set_ret(dv(d, LUP_NVML_K_PCI_BUS_ID), (uint32_t)r);
        put(dv(d, LUP_NVML_K_PCI_DOMAIN), r, p.domain);
        put(dv(d, LUP_NVML_K_PCI_BUS), r, p.bus);
        put(dv(d, LUP_NVML_K_PCI_DEVICE), r, p.device);
        put(dv(d, LUP_NVML_K_PCI_DEVICE_ID), r, p.pciDeviceId);
        put(dv(d, LUP_NVML_K_PCI_SUBSYS_ID), r, p.pciSubSystemId);
        fn_util fu = (fn_util)sym("nvmlDeviceGetUtilizationRates");
        nvmlUtilization_t u = { 0 };
        r = fu ? fu(h, &u) : NVML_ERROR_FUNCTION_NOT_FOUND;
        put(dv(d, LUP_NVML_K_UTIL_GPU), r, u.gpu);
        put(dv(d, LUP_NVML_K_UTIL_MEM), r, u.memory);
}

static void host_ecc_pages(struct lup_nvml_dev *d, nvmlDevice_t h)
{
        typedef nvmlReturn_t (*fn_ecc)(nvmlDevice_t, int, int, unsigned long long *);
        typedef nvmlReturn_t (*fn_ret)(nvmlDevice_t, int, unsigned int *, unsigned long long *);
        typedef nvmlReturn_t (*fn_remap)(nvmlDevice_t, unsigned int *, unsigned int *, unsigned int *, unsigned int *);
        static const unsigned ecc_keys[2][2] = {
                { LUP_NVML_K_ECC_CORR_VOLATILE, LUP_NVML_K_ECC_CORR_AGGREGATE },
                { LUP_NVML_K_ECC_UNCORR_VOLATILE, LUP_NVML_K_ECC_UNCORR_AGGREGATE },
        };
        fn_ecc fe = (fn_ecc)sym("nvmlDeviceGetTotalEccErrors");
        for (int e = 0; e < 2; e++)
                for (int c = 0; c < 2; c++) {
                        unsigned long long v = 0;
                        nvmlReturn_t r = fe ? fe(h, e, c, &v) : NVML_ERROR_FUNCTION_NOT_FOUND;
                        put(dv(d, ecc_keys[e][c]), r, v);
                }
        fn_ret fr = (fn_ret)sym("nvmlDeviceGetRetiredPages");
        for (int cause = 0; cause < 2; cause++) {
                unsigned int n = 0;
                nvmlReturn_t r = fr ? fr(h, cause, &n, NULL) : NVML_ERROR_FUNCTION_NOT_FOUND;
                if (r == NVML_ERROR_INSUFFICIENT_SIZE)
                        r = NVML_SUCCESS; /* n is the count */
                put(dv(d, cause ? LUP_NVML_K_RETIRED_DBE : LUP_NVML_K_RETIRED_SBE), r, n);
        }
        one_u32(d, h, LUP_NVML_K_RETIRED_PENDING, "nvmlDeviceGetRetiredPagesPendingStatus");
        fn_remap fm = (fn_remap)sym("nvmlDeviceGetRemappedRows");
        unsigned int a = 0, b = 0, c = 0, f = 0;
        nvmlReturn_t r = fm ? fm(h, &a, &b, &c, &f) : NVML_ERROR_FUNCTION_NOT_FOUND;
        put(dv(d, LUP_NVML_K_REMAP_CORR), r, a);
        put(dv(d, LUP_NVML_K_REMAP_UNCORR), r, b);
        put(dv(d, LUP_NVML_K_REMAP_PENDING), r, c);
        put(dv(d, LUP_NVML_K_REMAP_FAILURE), r, f);
}

/* The running compute processes that are lupine's sessions' workers. */
static void host_procs(struct lup_nvml_dev *d, nvmlDevice_t h, const pid_t *pids, int n)
{
        typedef nvmlReturn_t (*fn_procs)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *);
        fn_procs f = (fn_procs)sym("nvmlDeviceGetComputeRunningProcesses_v3");
        nvmlProcessInfo_t all[256];
        unsigned int cnt = 256;

        d->n_procs = 0;
        if (!f || f(h, &cnt, all) != NVML_SUCCESS)
                return;
        for (unsigned i = 0; i < cnt && i < 256 && d->n_procs < LUP_NVML_MAX_PROCS; i++)
                for (int j = 0; j < n; j++)
                        if ((pid_t)all[i].pid == pids[j]) {
                                d->procs[d->n_procs].pid = all[i].pid;
                                d->procs[d->n_procs].used = all[i].usedGpuMemory;
                                d->n_procs++;
                                break;
                        }
}

/* The inforom check, the media engines' utilization, the MIG and
 * virtualization modes (nvidia-smi's plain view and dmon ask for them). */
static void host_media(struct lup_nvml_dev *d, nvmlDevice_t h)
{
        typedef nvmlReturn_t (*fn_dev)(nvmlDevice_t);
        static const char *const names[4] = { "nvmlDeviceGetEncoderUtilization", "nvmlDeviceGetDecoderUtilization",
                                              "nvmlDeviceGetJpgUtilization", "nvmlDeviceGetOfaUtilization" };
        fn_dev v = (fn_dev)sym("nvmlDeviceValidateInforom");

        put(dv(d, LUP_NVML_K_INFOROM_VALID), v ? v(h) : NVML_ERROR_FUNCTION_NOT_FOUND, 0);
        for (unsigned i = 0; i < 4; i++)
                two_u32(d, h, LUP_NVML_K_ENC_UTIL + 2 * i, LUP_NVML_K_ENC_PERIOD + 2 * i, names[i]);
        one_u32(d, h, LUP_NVML_K_MIG_MAX_DEVICES, "nvmlDeviceGetMaxMigDeviceCount");
        one_u32(d, h, LUP_NVML_K_VIRT_MODE, "nvmlDeviceGetVirtualizationMode");
}

static void host_device(struct lup_nvml_dev *d, nvmlDevice_t h, const pid_t *pids, int n)
{
        static const char *const clk[2] = { "nvmlDeviceGetClockInfo", "nvmlDeviceGetMaxClockInfo" };
        static const unsigned thr[4] = { LUP_NVML_K_TEMP_SHUTDOWN, LUP_NVML_K_TEMP_SLOWDOWN, LUP_NVML_K_TEMP_MEM_MAX,
                                         LUP_NVML_K_TEMP_GPU_MAX };

        one_str(d, h, LUP_NVML_K_NAME, "nvmlDeviceGetName");
        one_str(d, h, LUP_NVML_K_UUID, "nvmlDeviceGetUUID");
        one_str(d, h, LUP_NVML_K_SERIAL, "nvmlDeviceGetSerial");
        one_str(d, h, LUP_NVML_K_VBIOS, "nvmlDeviceGetVbiosVersion");
        host_pci_util(d, h);
        host_memory(d, h);
        host_ecc_pages(d, h);
        host_procs(d, h, pids, n);
        one_u32(d, h, LUP_NVML_K_MINOR, "nvmlDeviceGetMinorNumber");
        arg_u32(d, h, LUP_NVML_K_TEMP_GPU, "nvmlDeviceGetTemperature", 0);
        for (int t = 0; t < 4; t++)
                arg_u32(d, h, thr[t], "nvmlDeviceGetTemperatureThreshold", t);
        one_u32(d, h, LUP_NVML_K_POWER, "nvmlDeviceGetPowerUsage");
        one_u32(d, h, LUP_NVML_K_POWER_LIMIT, "nvmlDeviceGetPowerManagementLimit");
        one_u32(d, h, LUP_NVML_K_POWER_DEFAULT_LIMIT, "nvmlDeviceGetPowerManagementDefaultLimit");
        two_u32(d, h, LUP_NVML_K_POWER_MIN_LIMIT, LUP_NVML_K_POWER_MAX_LIMIT,
                "nvmlDeviceGetPowerManagementLimitConstraints");
        one_u32(d, h, LUP_NVML_K_POWER_ENFORCED, "nvmlDeviceGetEnforcedPowerLimit");
        one_u64(d, h, LUP_NVML_K_ENERGY, "nvmlDeviceGetTotalEnergyConsumption");
        for (int m = 0; m < 2; m++)
                for (int c = 0; c < 4; c++)
                        arg_u32(d, h, (m ? LUP_NVML_K_MAXCLK_GRAPHICS : LUP_NVML_K_CLK_GRAPHICS) + (unsigned)c, clk[m],
                                c);
        one_u32(d, h, LUP_NVML_K_FAN, "nvmlDeviceGetFanSpeed");
        one_u32(d, h, LUP_NVML_K_NUM_FANS, "nvmlDeviceGetNumFans");
        one_u32(d, h, LUP_NVML_K_PSTATE, "nvmlDeviceGetPerformanceState");
        one_u64(d, h, LUP_NVML_K_THROTTLE, "nvmlDeviceGetCurrentClocksEventReasons");
        two_u32(d, h, LUP_NVML_K_ECC_CURRENT, LUP_NVML_K_ECC_PENDING, "nvmlDeviceGetEccMode");
        two_u32(d, h, LUP_NVML_K_MIG_CURRENT, LUP_NVML_K_MIG_PENDING, "nvmlDeviceGetMigMode");
        two_u32(d, h, LUP_NVML_K_CC_MAJOR, LUP_NVML_K_CC_MINOR, "nvmlDeviceGetCudaComputeCapability");
        one_u32(d, h, LUP_NVML_K_COMPUTE_MODE, "nvmlDeviceGetComputeMode");
        one_u32(d, h, LUP_NVML_K_PERSISTENCE, "nvmlDeviceGetPersistenceMode");
        one_u32(d, h, LUP_NVML_K_PCIE_GEN, "nvmlDeviceGetCurrPcieLinkGeneration");
        one_u32(d, h, LUP_NVML_K_PCIE_WIDTH, "nvmlDeviceGetCurrPcieLinkWidth");
        one_u32(d, h, LUP_NVML_K_PCIE_MAX_GEN, "nvmlDeviceGetMaxPcieLinkGeneration");
        one_u32(d, h, LUP_NVML_K_PCIE_MAX_WIDTH, "nvmlDeviceGetMaxPcieLinkWidth");
        one_u32(d, h, LUP_NVML_K_DISPLAY_MODE, "nvmlDeviceGetDisplayMode");
        one_u32(d, h, LUP_NVML_K_DISPLAY_ACTIVE, "nvmlDeviceGetDisplayActive");
        one_u32(d, h, LUP_NVML_K_ARCH, "nvmlDeviceGetArchitecture");
        one_u32(d, h, LUP_NVML_K_BRAND, "nvmlDeviceGetBrand");
        host_media(d, h);
}

static void host_system(struct lup_nvml_snapshot *s)
{
        typedef nvmlReturn_t (*fn_sstr)(char *, unsigned int);
        typedef nvmlReturn_t (*fn_int)(int *);
        static const struct {
                unsigned k;
                const char *name;
        } strs[] = { { LUP_NVML_K_DRIVER_VERSION, "nvmlSystemGetDriverVersion" },
                     { LUP_NVML_K_NVML_VERSION, "nvmlSystemGetNVMLVersion" } };
        for (int i = 0; i < 2; i++) {
                fn_sstr f = (fn_sstr)sym(strs[i].name);
                char buf[LUP_NVML_MAX_STR + 1] = { 0 };
                nvmlReturn_t r = f ? f(buf, sizeof(buf)) : NVML_ERROR_FUNCTION_NOT_FOUND;
                if (r == NVML_SUCCESS)
                        lup_nvml_set_str(lup_nvml_sys(s, strs[i].k), buf);
                else
                        lup_nvml_set_ret(lup_nvml_sys(s, strs[i].k), (uint32_t)r);
        }
        fn_int fc = (fn_int)sym("nvmlSystemGetCudaDriverVersion_v2");
        int v = 0;
        nvmlReturn_t r = fc ? fc(&v) : NVML_ERROR_FUNCTION_NOT_FOUND;
        if (r == NVML_SUCCESS)
                lup_nvml_set_num(lup_nvml_sys(s, LUP_NVML_K_CUDA_VERSION), (uint64_t)v);
        else
                lup_nvml_set_ret(lup_nvml_sys(s, LUP_NVML_K_CUDA_VERSION), (uint32_t)r);
}

void lupd_nvml_host_procs(struct lup_nvml_snapshot *s, const pid_t *pids, int n)
{
        typedef nvmlReturn_t (*fn_handle)(unsigned int, nvmlDevice_t *);
        fn_handle fh = (fn_handle)sym("nvmlDeviceGetHandleByIndex_v2");

        for (unsigned i = 0; fh && i < s->n_devices; i++) {
                nvmlDevice_t h = NULL;
                if (fh(i, &h) == NVML_SUCCESS)
                        host_procs(&s->dev[i], h, pids, n);
        }
}

int lupd_nvml_host_fill(struct lup_nvml_snapshot *s, const pid_t *pids, int n)
{
        typedef nvmlReturn_t (*fn_count)(unsigned int *);
        typedef nvmlReturn_t (*fn_handle)(unsigned int, nvmlDevice_t *);
        fn_count fc = (fn_count)sym("nvmlDeviceGetCount_v2");
        fn_handle fh = (fn_handle)sym("nvmlDeviceGetHandleByIndex_v2");
        unsigned int count = 0;

        if (!fc || !fh || fc(&count) != NVML_SUCCESS)
                return -EIO;
        memset(s, 0, sizeof(*s));
        s->backend = LUP_BACKEND_CUDA;
        s->n_devices = count < LUP_MAX_DEVICES ? count : LUP_MAX_DEVICES;
        s->taken_ms = (uint64_t)time(NULL) * 1000u;
        host_system(s);
        for (unsigned i = 0; i < s->n_devices; i++) {
                nvmlDevice_t h = NULL;
                nvmlReturn_t r = fh(i, &h);
                if (r != NVML_SUCCESS) {
                        for (unsigned k = LUP_NVML_K_NAME; k < LUP_NVML_K_DEV_LAST; k++)
                                lup_nvml_set_ret(dv(&s->dev[i], k), (uint32_t)r);
                        continue;
                }
                host_device(&s->dev[i], h, pids, n);
        }
        return 0;
}

/* ---- Xid events for the health watch */

/* nvmlEventData_t, as NVML's header has it */
struct host_event {
        nvmlDevice_t device;
        unsigned long long type, data;
        unsigned int gpu_instance, compute_instance;
};
#define XID_CRITICAL 0x8ull /* nvmlEventTypeXidCriticalError */

int lupd_nvml_host_xids(struct lupd_xid *out, int max)
{
        typedef nvmlReturn_t (*fn_create)(void **);
        typedef nvmlReturn_t (*fn_register)(nvmlDevice_t, unsigned long long, void *);
        typedef nvmlReturn_t (*fn_wait)(void *, struct host_event *, unsigned int);
        typedef nvmlReturn_t (*fn_count)(unsigned int *);
        typedef nvmlReturn_t (*fn_handle)(unsigned int, nvmlDevice_t *);
        typedef nvmlReturn_t (*fn_index)(nvmlDevice_t, unsigned int *);
        static void *set;
        static bool tried;
        static nvmlDevice_t handles[LUP_MAX_DEVICES];
        static unsigned n_handles;
        fn_wait wait = (fn_wait)sym("nvmlEventSetWait_v2");
        fn_index index = (fn_index)sym("nvmlDeviceGetIndex");
        int n = 0;

        if (!lib)
                return -ENOENT;
        if (!tried) {
                /* once: a GPU whose registration fails (no Xid events on it)
                 * is still watched through its other values */
                fn_create create = (fn_create)sym("nvmlEventSetCreate");
                fn_register reg = (fn_register)sym("nvmlDeviceRegisterEvents");
                fn_count fc = (fn_count)sym("nvmlDeviceGetCount_v2");
                fn_handle fh = (fn_handle)sym("nvmlDeviceGetHandleByIndex_v2");
                unsigned count = 0, ok = 0;
                tried = true;
                if (!create || !reg || !fc || !fh || !wait || create(&set) != NVML_SUCCESS ||
                    fc(&count) != NVML_SUCCESS) {
                        lup_warn("NVML: no event set on the host: Xid events are not watched");
                        set = NULL;
                        return -ENOTSUP;
                }
                for (unsigned i = 0; i < count && i < LUP_MAX_DEVICES; i++) {
                        nvmlDevice_t h = NULL;
                        nvmlReturn_t r = fh(i, &h);
                        if (r == NVML_SUCCESS)
                                r = reg(h, XID_CRITICAL, set);
                        if (r == NVML_SUCCESS)
                                ok++;
                        else
                                lup_warn("NVML: GPU %u takes no Xid event registration (%d): its Xids are not "
                                         "watched",
                                         i, r);
                        handles[i] = h;
                }
                n_handles = count < LUP_MAX_DEVICES ? count : LUP_MAX_DEVICES;
                lup_info("NVML: watching Xid events on %u of %u GPU(s)", ok, count);
        }
        if (!set)
                return -ENOTSUP;
        while (n < max) {
                struct host_event e = { 0 };
                if (wait(set, &e, 0) != NVML_SUCCESS)
                        break; /* NVML_ERROR_TIMEOUT: none waiting */
                if (!(e.type & XID_CRITICAL))
                        continue;
                unsigned idx = LUP_MAX_DEVICES;
                if (!index || index(e.device, &idx) != NVML_SUCCESS)
                        for (unsigned i = 0; i < n_handles; i++)
                                if (handles[i] == e.device)
                                        idx = i;
                out[n].device = idx < LUP_MAX_DEVICES ? (int)idx : -1;
                out[n].xid = (uint32_t)e.data;
                n++;
        }
        return n;
}
