/* SPDX-License-Identifier: MIT */
/*
 * lupine's NVML connection kind (issue 16): libnvidia-ml.so.1's shim asks
 * the supervisor for a snapshot of the server's GPUs as NVML sees them.
 *
 * The connection is light: its first and only request is an NVML frame
 * (instead of HELLO); the supervisor answers it itself, starts no worker,
 * takes no session slot, and closes the connection after its one reply.
 *
 * NVML request (op LUP_OP_NVML, LUP_F_SYNC, seq 0):
 *   u32 magic (LUP_NVML_MAGIC), u32 version (LUP_NVML_VERSION),
 *   u32 what (LUP_NVML_SNAPSHOT), u32 flags (0 or LUP_NVML_REQ_AUTH),
 *   then, with LUP_NVML_REQ_AUTH: u16 len, a bearer token (1..LUP_MAX_AUTH
 *   bytes), as in HELLO. The tenant it names (or the client certificate's,
 *   or the UNIX peer's) decides which processes the reply lists: only
 *   those of its own sessions.
 * NVML reply (LUP_F_REPLY; status 0 = the payload below, or an nvmlReturn_t
 * with payload u16 msg_len, msg):
 *   u32 magic, u32 version, u32 backend (LUP_BACKEND_*), u32 n_devices
 *   (<= LUP_MAX_DEVICES), u64 taken_ms (CLOCK_REALTIME ms of the sample),
 *   u32 n_sys, n_sys x entry (system values),
 *   n_devices x (u32 n, n x entry, u32 n_procs (<= LUP_NVML_MAX_PROCS),
 *                n_procs x (u32 pid, u64 used_bytes))
 * entry: u16 key (LUP_NVML_K_*), u16 len (<= LUP_NVML_MAX_STR), u32 ret
 *   (the nvmlReturn_t the host's NVML gave), then len value bytes: a number
 *   is 8 bytes (u64), a string is its bytes without the NUL.
 * Each key appears at most once per list; unknown keys are an error.
 */
#ifndef LUPINE_NVML_WIRE_H
#define LUPINE_NVML_WIRE_H

#define LUP_OP_NVML 6 /* a control op id: first frame instead of HELLO */

#define LUP_NVML_MAGIC     0x4c4e5631u /* "LNV1" */
#define LUP_NVML_VERSION   2u          /* 2: inforom and media engine keys */
#define LUP_NVML_SNAPSHOT  1u
#define LUP_NVML_REQ_SIZE  16u /* without a token */
#define LUP_NVML_REQ_AUTH  0x1u
#define LUP_NVML_REQ_MAX   (LUP_NVML_REQ_SIZE + 2u + 256u) /* with a token of LUP_MAX_AUTH bytes */
#define LUP_NVML_MAX_STR   96u
#define LUP_NVML_MAX_PROCS 64u

/* The keys. Numbers unless marked (s). Fixed on the wire: append only. */
enum lup_nvml_key {
        /* system */
        LUP_NVML_K_DRIVER_VERSION = 1, /* (s) */
        LUP_NVML_K_NVML_VERSION,       /* (s) */
        LUP_NVML_K_CUDA_VERSION,       /* e.g. 13000 */
        LUP_NVML_K_SYS_LAST,
        /* per device */
        LUP_NVML_K_NAME = 32,  /* (s) as the host names it */
        LUP_NVML_K_UUID,       /* (s) "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
        LUP_NVML_K_SERIAL,     /* (s) */
        LUP_NVML_K_PCI_BUS_ID, /* (s) "00000000:18:00.0" */
        LUP_NVML_K_PCI_DOMAIN,
        LUP_NVML_K_PCI_BUS,
        LUP_NVML_K_PCI_DEVICE,
        LUP_NVML_K_PCI_DEVICE_ID,
        LUP_NVML_K_PCI_SUBSYS_ID,
        LUP_NVML_K_MINOR,
        LUP_NVML_K_MEM_TOTAL,
        LUP_NVML_K_MEM_USED,
        LUP_NVML_K_MEM_FREE,
        LUP_NVML_K_MEM_RESERVED,
        LUP_NVML_K_BAR1_TOTAL,
        LUP_NVML_K_BAR1_USED,
        LUP_NVML_K_UTIL_GPU,
        LUP_NVML_K_UTIL_MEM,
        LUP_NVML_K_TEMP_GPU,
        LUP_NVML_K_TEMP_SHUTDOWN, /* thresholds, NVML_TEMPERATURE_THRESHOLD_* */
        LUP_NVML_K_TEMP_SLOWDOWN,
        LUP_NVML_K_TEMP_MEM_MAX,
        LUP_NVML_K_TEMP_GPU_MAX,
        LUP_NVML_K_POWER, /* mW */
        LUP_NVML_K_POWER_LIMIT,
        LUP_NVML_K_POWER_DEFAULT_LIMIT,
        LUP_NVML_K_POWER_MIN_LIMIT,
        LUP_NVML_K_POWER_MAX_LIMIT,
        LUP_NVML_K_POWER_ENFORCED,
        LUP_NVML_K_ENERGY,       /* mJ since the driver loaded */
        LUP_NVML_K_CLK_GRAPHICS, /* MHz; then SM, MEM, VIDEO in nvmlClockType_t order */
        LUP_NVML_K_CLK_SM,
        LUP_NVML_K_CLK_MEM,
        LUP_NVML_K_CLK_VIDEO,
        LUP_NVML_K_MAXCLK_GRAPHICS,
        LUP_NVML_K_MAXCLK_SM,
        LUP_NVML_K_MAXCLK_MEM,
        LUP_NVML_K_MAXCLK_VIDEO,
        LUP_NVML_K_FAN, /* percent */
        LUP_NVML_K_NUM_FANS,
        LUP_NVML_K_PSTATE,
        LUP_NVML_K_THROTTLE, /* clocks event reasons, a mask */
        LUP_NVML_K_ECC_CURRENT,
        LUP_NVML_K_ECC_PENDING,
        LUP_NVML_K_ECC_CORR_VOLATILE,
        LUP_NVML_K_ECC_UNCORR_VOLATILE,
        LUP_NVML_K_ECC_CORR_AGGREGATE,
        LUP_NVML_K_ECC_UNCORR_AGGREGATE,
        LUP_NVML_K_RETIRED_SBE, /* page counts */
        LUP_NVML_K_RETIRED_DBE,
        LUP_NVML_K_RETIRED_PENDING,
        LUP_NVML_K_REMAP_CORR,
        LUP_NVML_K_REMAP_UNCORR,
        LUP_NVML_K_REMAP_PENDING,
        LUP_NVML_K_REMAP_FAILURE,
        LUP_NVML_K_COMPUTE_MODE,
        LUP_NVML_K_MIG_CURRENT,
        LUP_NVML_K_MIG_PENDING,
        LUP_NVML_K_PERSISTENCE,
        LUP_NVML_K_CC_MAJOR,
        LUP_NVML_K_CC_MINOR,
        LUP_NVML_K_PCIE_GEN,
        LUP_NVML_K_PCIE_WIDTH,
        LUP_NVML_K_PCIE_MAX_GEN,
        LUP_NVML_K_PCIE_MAX_WIDTH,
        LUP_NVML_K_DISPLAY_MODE,
        LUP_NVML_K_DISPLAY_ACTIVE,
        LUP_NVML_K_ARCH,
        LUP_NVML_K_BRAND,
        LUP_NVML_K_INFOROM_VALID, /* nvmlDeviceValidateInforom's answer (its result, value 0) */
        LUP_NVML_K_ENC_UTIL,      /* the media engines: percent, then the sampling period in us */
        LUP_NVML_K_ENC_PERIOD,
        LUP_NVML_K_DEC_UTIL,
        LUP_NVML_K_DEC_PERIOD,
        LUP_NVML_K_JPG_UTIL,
        LUP_NVML_K_JPG_PERIOD,
        LUP_NVML_K_OFA_UTIL,
        LUP_NVML_K_OFA_PERIOD,
        LUP_NVML_K_MIG_MAX_DEVICES, /* nvmlDeviceGetMaxMigDeviceCount */
        LUP_NVML_K_VIRT_MODE,       /* nvmlGpuVirtualizationMode_t */
        LUP_NVML_K_VBIOS,           /* (s) */
        LUP_NVML_K_DEV_LAST,
};
#define LUP_NVML_N_SYS (LUP_NVML_K_SYS_LAST - 1)
#define LUP_NVML_N_DEV (LUP_NVML_K_DEV_LAST - LUP_NVML_K_NAME)

static inline int lup_nvml_key_is_str(unsigned k)
{
        return k == LUP_NVML_K_DRIVER_VERSION || k == LUP_NVML_K_NVML_VERSION || k == LUP_NVML_K_NAME ||
               k == LUP_NVML_K_UUID || k == LUP_NVML_K_SERIAL || k == LUP_NVML_K_PCI_BUS_ID || k == LUP_NVML_K_VBIOS;
}

#endif
