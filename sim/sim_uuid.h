/* SPDX-License-Identifier: MIT */
/*
 * The simulated devices' UUIDs, a fixed function of the ordinal. Header
 * only: libcuda-sim.so (cuDeviceGetUuid) and lupined's simulated NVML
 * (daemon/supervisor/nvml_sim.c) must give the same bytes, and the sim
 * links nothing of lupine's.
 */
#ifndef LUP_SIM_UUID_H
#define LUP_SIM_UUID_H

#include <stdint.h>

/* splitmix64: a fixed, well-mixed function of the ordinal, so that UUIDs
 * are stable across runs and distinct across devices. */
static inline uint64_t lup_sim_mix64(uint64_t x)
{
        x += 0x9e3779b97f4a7c15ULL;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
        return x ^ (x >> 31);
}

static inline void lup_sim_uuid(int ordinal, unsigned char out[16])
{
        uint64_t hi = lup_sim_mix64(0x6c7570696e65ULL ^ (uint64_t)ordinal); /* "lupine" */
        uint64_t lo = lup_sim_mix64(hi ^ (uint64_t)ordinal);

        for (int i = 0; i < 8; i++) {
                out[i] = (unsigned char)(hi >> (56 - 8 * i));
                out[8 + i] = (unsigned char)(lo >> (56 - 8 * i));
        }
        /* RFC 4122 version 4, variant 1, like the real driver's. */
        out[6] = (unsigned char)((out[6] & 0x0f) | 0x40);
        out[8] = (unsigned char)((out[8] & 0x3f) | 0x80);
}

/* The simulated devices' PCI bus numbers (CU_DEVICE_ATTRIBUTE_PCI_BUS_ID). */
static inline int lup_sim_pci_bus(int ordinal)
{
        return 0x18 + 0x0c * ordinal;
}

#endif
