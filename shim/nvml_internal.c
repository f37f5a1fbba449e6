/* SPDX-License-Identifier: MIT */
/*
 * nvmlInternalGetExportTable: the private, undeclared entry point that
 * nvidia-smi (driver 535 and later) calls right after nvmlInit. Without it
 * nvidia-smi stops with "Mismatch in versions between nvidia-smi and NVML"
 * (seen on the H200 with lupine's library: tests/gpu/probes/
 * nvsmi_symbols.sh found it the only symbol nvidia-smi looked up and did
 * not get).
 *
 * nvidia-smi asks for one table, by a 16-byte id. Its first word is the
 * table's size in bytes; the rest are function pointers, each an internal
 * NVML call. What is known of the slots nvidia-smi 580 calls (NVIDIA's own
 * test double of NVML documents the same observations):
 *   72       (device, unsigned *out, device, 1): the real library writes 1
 *            for the H200, and `nvidia-smi dmon` refuses a device that
 *            answers 0 ("Not supported on the device(s)"); learned with
 *            tests/gpu/probes/nvsmi_proxy.sh, meaning unknown;
 *   81       the handle of device i: (unsigned i, nvmlDevice_t *out, ...);
 *   213-215  the running processes of a device: (device, unsigned *count,
 *            entries): *count holds the capacity on entry and must be set;
 *            an entry is 4128 bytes: u32 pid @0, u64 used memory @8, u32
 *            GPU and compute instance ids @16 and @20, u64 protected
 *            memory @24, then the process name inline, 4096 bytes, @32;
 *   230      the host's maximum PCIe link generation: (device, unsigned *);
 *   249      the sparse operation mode: (device, unsigned *).
 * Every other slot answers success, and zero in the count its second
 * argument points at when its first is a device: nvidia-smi gives up on a
 * view when a probe fails, and walks a list it finds uncleared.
 *
 * Each slot is its own function, so that a call says which slot it is.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml_shim.h"

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int *gen);

enum {
        N_SLOTS = 256,
        SLOT_DMON_DEVICE = 72,
        SLOT_HANDLE_BY_INDEX = 81,
        SLOT_PROCS_FIRST = 213,
        SLOT_PROCS_LAST = 215,
        SLOT_HOST_PCIE_MAX_GEN = 230,
        SLOT_SPARSE_MODE = 249,
        PROC_ENTRY = 4128,
        PROC_NAME_AT = 32,
        PROC_NAME_MAX = 4096,
};

/* c4fe3e6c-c98f-6c4e-a327-ee696e12f7c4, as the bytes nvidia-smi passes */
static const uint8_t smi_table_id[16] = { 0xc4, 0xfe, 0x3e, 0x6c, 0xc9, 0x8f, 0x6c, 0x4e,
                                          0xa3, 0x27, 0xee, 0x69, 0x6e, 0x12, 0xf7, 0xc4 };

static nvmlReturn_t procs(nvmlDevice_t dev, unsigned *count, uint8_t *entries)
{
        struct lup_nvml_proc p[LUP_NVML_MAX_PROCS];
        unsigned cap = *count, n = 0;
        nvmlReturn_t r = lupn_dev_procs(dev, p, LUP_NVML_MAX_PROCS, &n);

        if (r != NVML_SUCCESS) {
                *count = 0;
                return r;
        }
        if (n > cap)
                n = cap;
        for (unsigned i = 0; i < n; i++) {
                uint8_t *e = entries + (size_t)i * PROC_ENTRY;
                uint32_t none = 0xffffffffu; /* no GPU or compute instance: not MIG */
                memset(e, 0, PROC_ENTRY);    /* protected memory @24 stays 0 */
                memcpy(e, &p[i].pid, 4);
                memcpy(e + 8, &p[i].used, 8);
                memcpy(e + 16, &none, 4);
                memcpy(e + 20, &none, 4);
                /* the process on the GPU host that runs the session */
                snprintf((char *)e + PROC_NAME_AT, PROC_NAME_MAX, "lupined-worker (lupine session)");
        }
        *count = n;
        return NVML_SUCCESS;
}

static nvmlReturn_t slot_call(unsigned slot, void *a0, void *a1, void *a2, void *a3)
{
        nvmlReturn_t r = lupn_check_init();

        (void)a3;
        if (lupn_debug())
                fprintf(stderr, "lupine NVML: nvidia-smi's internal slot %u (%p, %p, %p)\n", slot, a0, a1, a2);
        if (r != NVML_SUCCESS)
                return r;
        if (slot == SLOT_HANDLE_BY_INDEX && (uintptr_t)a0 < LUP_MAX_DEVICES && a1)
                return nvmlDeviceGetHandleByIndex_v2((unsigned)(uintptr_t)a0, a1);
        if (!lupn_is_handle(a0) || !a1)
                return NVML_SUCCESS;
        if (slot >= SLOT_PROCS_FIRST && slot <= SLOT_PROCS_LAST && a2 && *(unsigned *)a1 >= 1 &&
            *(unsigned *)a1 <= 65536)
                return procs(a0, a1, a2);
        if (slot == SLOT_HOST_PCIE_MAX_GEN)
                return nvmlDeviceGetMaxPcieLinkGeneration(a0, a1);
        if (slot == SLOT_SPARSE_MODE)
                return NVML_ERROR_NOT_SUPPORTED; /* shown as N/A */
        if (slot == SLOT_DMON_DEVICE) {
                *(unsigned *)a1 = 1;
                return NVML_SUCCESS;
        }
        *(unsigned *)a1 = 0;
        return NVML_SUCCESS;
}

/* One slot function per line of the table. */
/* clang-format off */
#define SLOT_FN(h, l) \
        static nvmlReturn_t slot_##h##_##l(void *a0, void *a1, void *a2, void *a3) \
        { \
                return slot_call(16 * (h) + (l), a0, a1, a2, a3); \
        }
#define SLOT_PTR(h, l) [16 * (h) + (l)] = (uintptr_t)slot_##h##_##l,
#define SIXTEEN(M, h) \
        M(h, 0) M(h, 1) M(h, 2) M(h, 3) M(h, 4) M(h, 5) M(h, 6) M(h, 7) \
        M(h, 8) M(h, 9) M(h, 10) M(h, 11) M(h, 12) M(h, 13) M(h, 14) M(h, 15)
#define ALL_SLOTS(M) \
        SIXTEEN(M, 0) SIXTEEN(M, 1) SIXTEEN(M, 2) SIXTEEN(M, 3) \
        SIXTEEN(M, 4) SIXTEEN(M, 5) SIXTEEN(M, 6) SIXTEEN(M, 7) \
        SIXTEEN(M, 8) SIXTEEN(M, 9) SIXTEEN(M, 10) SIXTEEN(M, 11) \
        SIXTEEN(M, 12) SIXTEEN(M, 13) SIXTEEN(M, 14) SIXTEEN(M, 15)
/* clang-format on */

ALL_SLOTS(SLOT_FN)

/* Word 0: the size in bytes; slot 0 is that word, so its function is unused. */
static uintptr_t smi_table[N_SLOTS] = { ALL_SLOTS(SLOT_PTR) };

LUPN_API nvmlReturn_t nvmlInternalGetExportTable(const void **table, const void *id);
LUPN_API nvmlReturn_t nvmlInternalGetExportTable(const void **table, const void *id)
{
        static atomic_bool logged;

        if (!table || !id)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (memcmp(id, smi_table_id, sizeof(smi_table_id)) != 0) {
                const uint8_t *u = id;
                if (!atomic_exchange(&logged, true))
                        fprintf(stderr,
                                "lupine NVML: internal table %02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x "
                                "is not supported by lupine\n",
                                u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                                u[14], u[15]);
                return NVML_ERROR_NOT_SUPPORTED;
        }
        smi_table[0] = sizeof(smi_table);
        *table = smi_table;
        return NVML_SUCCESS;
}
