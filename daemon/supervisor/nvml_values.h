/* SPDX-License-Identifier: MIT */
/*
 * Where the supervisor's NVML answers come from (issue 16, docs/nvml.md):
 * the host's real NVML, loaded lazily with dlopen (supervisor/nvml_host.c:
 * NVML makes no CUDA context, so the supervisor still never initialises
 * CUDA), or simulated values for --backend sim (supervisor/nvml_sim.c).
 * Both fill a whole snapshot; supervisor/nvml.c caches and serves it.
 */
#ifndef LUPD_NVML_VALUES_H
#define LUPD_NVML_VALUES_H

#include <stdint.h>
#include <sys/types.h>

#include "nvml_codec.h"

/* Loads libnvidia-ml.so.1 and runs nvmlInit_v2 the first time; 0, or
 * -errno with *why (the library or its init failed: then it is not tried
 * again for a minute). */
int lupd_nvml_host_open(const char **why);
/* A snapshot of every device from the host's NVML; the processes listed
 * are those of `pids` (n of them) only. 0 or -errno. */
int lupd_nvml_host_fill(struct lup_nvml_snapshot *s, const pid_t *pids, int n);
/* Only the process lists of s, anew (a context made a moment ago shows at
 * once; one NVML call per device). */
void lupd_nvml_host_procs(struct lup_nvml_snapshot *s, const pid_t *pids, int n);

/* Simulated values for the devices libcuda-sim.so shows (LUPINE_SIM_DEVICES,
 * LUPINE_SIM_MEM_MB, as the workers see them). `pids` are the sessions'
 * workers: their CPU time since the last call is the simulated GPU's work
 * (the sim runs kernels on the CPU), shown as utilization, power, clocks
 * and temperature of device 0, where they are listed as its processes. */
void lupd_nvml_sim_fill(struct lup_nvml_snapshot *s, const pid_t *pids, int n);

/* Xid events for the health watch (supervisor/health.c): what happened
 * since the last call, at most max of them; device -1 when NVML could not
 * say which GPU. Host: NVML's event set (registered on the first call);
 * -ENOENT before the host's NVML is open, -ENOTSUP without events. Sim:
 * the fault file (below). */
struct lupd_xid {
        int device;
        uint32_t xid;
};
int lupd_nvml_host_xids(struct lupd_xid *out, int max);
int lupd_nvml_sim_xids(struct lupd_xid *out, int max);

/* The simulator's faults, for testing the health watch: the file named by
 * LUPINE_SIM_FAULTS, read at every snapshot, holds lines "GPU KEY[=VALUE]"
 * (docs/health.md): temperature=C, ecc_uncorrected=N, retired_pending=N,
 * remapped_pending=N, lost, xid=CODE (each xid line is one event, taken
 * once). Applied to s after the simulated values. */
void lupd_nvml_sim_faults(struct lup_nvml_snapshot *s);

#endif
