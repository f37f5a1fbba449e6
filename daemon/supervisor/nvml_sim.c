/* SPDX-License-Identifier: MIT */
/* Simulated NVML values for --backend sim (supervisor/nvml_values.h). */
#define LUP_LOG_CAT LUP_LOGC_NVML
#include <cuda.h> /* CUDA_VERSION only */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../sim/sim_uuid.h"
#include "clock.h"
#include "supervisor/nvml_values.h"

#define SIM_NVML_MAX_MB (16ull << 20) /* as libcuda-sim.so's limits */

static unsigned long long env_ull(const char *name, unsigned long long lo, unsigned long long hi,
                                  unsigned long long def)
{
        const char *s = getenv(name);
        char *end;

        if (!s || !*s)
                return def;
        unsigned long long v = strtoull(s, &end, 10);
        return *end || v < lo || v > hi ? def : v;
}

/* utime + stime of pid, in clock ticks; 0 if it is gone. */
static unsigned long long cpu_ticks(pid_t pid)
{
        char path[64], buf[1024];
        unsigned long long ut = 0, st = 0;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "re");
        if (!f)
                return 0;
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = 0;
        const char *p = strrchr(buf, ')'); /* the name may hold spaces */
        if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
                return 0;
        return ut + st;
}

/* The workers' busy share of the time since the last call, in percent.
 * Each worker counts with the CPU time it used since then: a worker new
 * since the last call with all of its own (sessions come and go between
 * samples; comparing sums across them would hide the work). */
static unsigned sim_util(const pid_t *pids, int n, uint64_t now_ms)
{
        enum {
                KEEP = 64
        };
        static pid_t last_pid[KEEP];
        static unsigned long long last_ticks[KEEP];
        static int last_n;
        static uint64_t last_ms;
        static unsigned last_util;
        pid_t cur_pid[KEEP];
        unsigned long long cur_ticks[KEEP], busy = 0;
        int m = n < KEEP ? n : KEEP;

        for (int i = 0; i < m; i++) {
                cur_pid[i] = pids[i];
                cur_ticks[i] = cpu_ticks(pids[i]);
                unsigned long long before = 0;
                for (int j = 0; j < last_n; j++)
                        if (last_pid[j] == pids[i] && last_ticks[j] <= cur_ticks[i])
                                before = last_ticks[j];
                busy += cur_ticks[i] - before;
        }
        if (last_ms && now_ms > last_ms) {
                double u = 100.0 * (double)busy * 1000.0 / (double)sysconf(_SC_CLK_TCK) / (double)(now_ms - last_ms);
                last_util = u > 100.0 ? 100u : (unsigned)u;
        }
        memcpy(last_pid, cur_pid, sizeof(pid_t) * (size_t)m);
        memcpy(last_ticks, cur_ticks, sizeof(cur_ticks[0]) * (size_t)m);
        last_n = m;
        last_ms = now_ms;
        return last_util;
}

static void set(struct lup_nvml_dev *d, unsigned k, uint64_t v)
{
        lup_nvml_set_num(lup_nvml_devval(d, k), v);
}

static void sim_identity(struct lup_nvml_dev *d, int i, unsigned long long mem)
{
        unsigned char u[16];
        char s[LUP_NVML_MAX_STR];

        snprintf(s, sizeof(s), "lupine simulated GPU #%d (sim)", i); /* as cuDeviceGetName */
        lup_nvml_set_str(lup_nvml_devval(d, LUP_NVML_K_NAME), s);
        lup_sim_uuid(i, u);
        snprintf(s, sizeof(s), "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                 u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
        lup_nvml_set_str(lup_nvml_devval(d, LUP_NVML_K_UUID), s);
        snprintf(s, sizeof(s), "LUPSIM%07d", i);
        lup_nvml_set_str(lup_nvml_devval(d, LUP_NVML_K_SERIAL), s);
        snprintf(s, sizeof(s), "00000000:%02X:00.0", lup_sim_pci_bus(i));
        lup_nvml_set_str(lup_nvml_devval(d, LUP_NVML_K_PCI_BUS_ID), s);
        lup_nvml_set_str(lup_nvml_devval(d, LUP_NVML_K_VBIOS), "96.00.00.00.00-sim");
        set(d, LUP_NVML_K_PCI_DOMAIN, 0);
        set(d, LUP_NVML_K_PCI_BUS, (uint64_t)lup_sim_pci_bus(i));
        set(d, LUP_NVML_K_PCI_DEVICE, 0);
        set(d, LUP_NVML_K_PCI_DEVICE_ID, 0x10de); /* NVIDIA's vendor id, device id 0 */
        set(d, LUP_NVML_K_PCI_SUBSYS_ID, 0);
        set(d, LUP_NVML_K_MINOR, (uint64_t)i);
        /* what the sim's kernels allocate is not known here: nothing is counted as used */
        set(d, LUP_NVML_K_MEM_TOTAL, mem);
        set(d, LUP_NVML_K_MEM_USED, 0);
        set(d, LUP_NVML_K_MEM_FREE, mem);
        set(d, LUP_NVML_K_MEM_RESERVED, 0);
        set(d, LUP_NVML_K_BAR1_TOTAL, 256ull << 20);
        set(d, LUP_NVML_K_BAR1_USED, 2ull << 20);
        set(d, LUP_NVML_K_CC_MAJOR, 9);
        set(d, LUP_NVML_K_CC_MINOR, 0);
        set(d, LUP_NVML_K_ARCH, 9);   /* NVML_DEVICE_ARCH_HOPPER, as CC 9.0 */
        set(d, LUP_NVML_K_BRAND, 14); /* NVML_BRAND_NVIDIA */
        set(d, LUP_NVML_K_INFOROM_VALID, 0);
        set(d, LUP_NVML_K_MIG_MAX_DEVICES, 7); /* as an H100 or H200 */
        set(d, LUP_NVML_K_VIRT_MODE, 0);       /* NVML_GPU_VIRTUALIZATION_MODE_NONE */
        for (unsigned e = 0; e < 4; e++) {     /* no media work in the simulator */
                set(d, LUP_NVML_K_ENC_UTIL + 2 * e, 0);
                set(d, LUP_NVML_K_ENC_PERIOD + 2 * e, 167000);
        }
}

/* The values that follow the work: util in percent. */
static void sim_state(struct lup_nvml_dev *d, unsigned util, uint64_t energy_mj)
{
        static const struct {
                unsigned k;
                uint64_t v;
        } fixed[] = {
                { LUP_NVML_K_TEMP_SHUTDOWN, 92 },
                { LUP_NVML_K_TEMP_SLOWDOWN, 89 },
                { LUP_NVML_K_TEMP_MEM_MAX, 95 },
                { LUP_NVML_K_TEMP_GPU_MAX, 87 },
                { LUP_NVML_K_POWER_LIMIT, 700000 },
                { LUP_NVML_K_POWER_DEFAULT_LIMIT, 700000 },
                { LUP_NVML_K_POWER_MIN_LIMIT, 200000 },
                { LUP_NVML_K_POWER_MAX_LIMIT, 700000 },
                { LUP_NVML_K_POWER_ENFORCED, 700000 },
                { LUP_NVML_K_CLK_MEM, 2619 },
                { LUP_NVML_K_MAXCLK_GRAPHICS, 1980 },
                { LUP_NVML_K_MAXCLK_SM, 1980 },
                { LUP_NVML_K_MAXCLK_MEM, 2619 },
                { LUP_NVML_K_MAXCLK_VIDEO, 1980 },
                { LUP_NVML_K_NUM_FANS, 1 },
                { LUP_NVML_K_ECC_CURRENT, 1 },
                { LUP_NVML_K_ECC_PENDING, 1 },
                { LUP_NVML_K_ECC_CORR_VOLATILE, 0 },
                { LUP_NVML_K_ECC_UNCORR_VOLATILE, 0 },
                { LUP_NVML_K_ECC_CORR_AGGREGATE, 0 },
                { LUP_NVML_K_ECC_UNCORR_AGGREGATE, 0 },
                { LUP_NVML_K_RETIRED_SBE, 0 },
                { LUP_NVML_K_RETIRED_DBE, 0 },
                { LUP_NVML_K_RETIRED_PENDING, 0 },
                { LUP_NVML_K_REMAP_CORR, 0 },
                { LUP_NVML_K_REMAP_UNCORR, 0 },
                { LUP_NVML_K_REMAP_PENDING, 0 },
                { LUP_NVML_K_REMAP_FAILURE, 0 },
                { LUP_NVML_K_COMPUTE_MODE, 0 },
                { LUP_NVML_K_MIG_CURRENT, 0 },
                { LUP_NVML_K_MIG_PENDING, 0 },
                { LUP_NVML_K_PERSISTENCE, 1 },
                { LUP_NVML_K_PCIE_GEN, 5 },
                { LUP_NVML_K_PCIE_WIDTH, 16 },
                { LUP_NVML_K_PCIE_MAX_GEN, 5 },
                { LUP_NVML_K_PCIE_MAX_WIDTH, 16 },
                { LUP_NVML_K_DISPLAY_MODE, 0 },
                { LUP_NVML_K_DISPLAY_ACTIVE, 0 },
        };
        for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
                set(d, fixed[i].k, fixed[i].v);
        set(d, LUP_NVML_K_UTIL_GPU, util);
        set(d, LUP_NVML_K_UTIL_MEM, util / 2);
        set(d, LUP_NVML_K_TEMP_GPU, 30 + util * 45 / 100);
        set(d, LUP_NVML_K_POWER, 70000 + util * 6300);
        set(d, LUP_NVML_K_ENERGY, energy_mj);
        set(d, LUP_NVML_K_CLK_GRAPHICS, util ? 1980 : 345);
        set(d, LUP_NVML_K_CLK_SM, util ? 1980 : 345);
        set(d, LUP_NVML_K_CLK_VIDEO, util ? 1545 : 765);
        set(d, LUP_NVML_K_FAN, 30 + util * 60 / 100);
        set(d, LUP_NVML_K_PSTATE, util ? 0 : 8);
        set(d, LUP_NVML_K_THROTTLE, util ? 0 : 1); /* nvmlClocksEventReasonGpuIdle */
}

void lupd_nvml_sim_fill(struct lup_nvml_snapshot *s, const pid_t *pids, int n)
{
        static uint64_t energy_mj[LUP_MAX_DEVICES], last_ms;
        uint64_t now = lup_now_ns() / 1000000u;
        unsigned ndev = (unsigned)env_ull("LUPINE_SIM_DEVICES", 1, LUP_MAX_DEVICES, 1);
        unsigned long long mem = env_ull("LUPINE_SIM_MEM_MB", 1, SIM_NVML_MAX_MB, 16384) << 20;
        unsigned util = sim_util(pids, n, now);

        memset(s, 0, sizeof(*s));
        s->backend = LUP_BACKEND_SIM;
        s->n_devices = ndev;
        s->taken_ms = (uint64_t)time(NULL) * 1000u;
        lup_nvml_set_str(lup_nvml_sys(s, LUP_NVML_K_DRIVER_VERSION), "580.00.sim");
        lup_nvml_set_str(lup_nvml_sys(s, LUP_NVML_K_NVML_VERSION), "13.580.00.sim");
        lup_nvml_set_num(lup_nvml_sys(s, LUP_NVML_K_CUDA_VERSION), CUDA_VERSION);
        for (unsigned i = 0; i < ndev; i++) {
                struct lup_nvml_dev *d = &s->dev[i];
                unsigned u = i == 0 ? util : 0;
                if (last_ms && now > last_ms)
                        energy_mj[i] += (70000 + u * 6300) * (now - last_ms) / 1000;
                sim_identity(d, (int)i, mem);
                sim_state(d, u, energy_mj[i]);
        }
        last_ms = now;
        for (int i = 0; i < n && i < (int)LUP_NVML_MAX_PROCS && ndev; i++) {
                s->dev[0].procs[i].pid = (uint32_t)pids[i];
                s->dev[0].procs[i].used = ~0ull; /* NVML_VALUE_NOT_AVAILABLE */
                s->dev[0].n_procs++;
        }
        lupd_nvml_sim_faults(s);
}
