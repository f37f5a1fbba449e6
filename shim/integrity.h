/* SPDX-License-Identifier: MIT */
/*
 * The answer of the private integrity table's slot 1 (table d4082055...),
 * which every copy of the CUDA runtime calls three times at start and then
 * recomputes itself from what it can see. See
 * ../shared/research/export-tables.md section 3 for the facts; in short:
 *
 *   version % 10 == 0 or 1: two fixed 16-byte answers;
 *   otherwise: HMAC-MD2 with a fixed key over a 48-byte header
 *     (driver version, version, pid, thread, the two table addresses the
 *      caller was given, the slot-1 function address, the time argument)
 *   followed by one 28-byte record per device (UUID, PCI domain, bus,
 *   device), all little-endian.
 *
 * Pure arithmetic, so the unit tests run it without a shim.
 */
#ifndef LUPC_INTEGRITY_H
#define LUPC_INTEGRITY_H

#include <stddef.h>
#include <stdint.h>

struct lupc_integrity_device {
        uint8_t uuid[16];
        int32_t pci_domain, pci_bus, pci_device;
};

struct lupc_integrity_input {
        uint32_t driver_version;        /* what cuDriverGetVersion tells the caller */
        uint32_t pid;
        uint32_t thread;                /* low 32 bits of pthread_self() */
        uint64_t cudart_table;          /* addresses as handed to the caller */
        uint64_t integrity_table;
        uint64_t integrity_fn;          /* the slot-1 function pointer */
        const struct lupc_integrity_device *devices;
        size_t n_devices;
};

#define LUPC_INTEGRITY_MAX_DEVICES 64

/* Writes the 16 answer bytes. Returns 0, or -1 if n_devices is over the limit. */
int lupc_integrity_answer(uint32_t version, uint64_t unix_seconds, const struct lupc_integrity_input *in,
                          uint8_t out[16]);

#endif
