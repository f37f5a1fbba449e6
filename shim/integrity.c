/* SPDX-License-Identifier: MIT */
/* The integrity table's answer; see integrity.h. */
#include <string.h>

#include "integrity.h"
#include "md2.h"

static const uint8_t hmac_key[16] = {
        0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52, 0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f,
};

/* The fixed answers for version % 10 == 0 and == 1; they differ in byte 7. */
static const uint8_t fixed_answer[16] = {
        0x5c, 0x67, 0xcb, 0x03, 0x1c, 0x18, 0x41, 0x33, 0xe8, 0xd1, 0x4c, 0x1f, 0xaa, 0x83, 0xd3, 0x8e,
};

#define HEADER_BYTES 48
#define DEVICE_BYTES 28

static void put_le32(uint8_t *p, uint32_t v)
{
        for (int i = 0; i < 4; i++)
                p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le64(uint8_t *p, uint64_t v)
{
        for (int i = 0; i < 8; i++)
                p[i] = (uint8_t)(v >> (8 * i));
}

int lupc_integrity_answer(uint32_t version, uint64_t unix_seconds, const struct lupc_integrity_input *in,
                          uint8_t out[16])
{
        uint8_t msg[HEADER_BYTES + DEVICE_BYTES * LUPC_INTEGRITY_MAX_DEVICES];

        if (version % 10 == 0 || version % 10 == 1) {
                memcpy(out, fixed_answer, 16);
                if (version % 10 == 1)
                        out[7] = 0x18;
                return 0;
        }
        if (in->n_devices > LUPC_INTEGRITY_MAX_DEVICES)
                return -1;

        put_le32(msg + 0, in->driver_version);
        put_le32(msg + 4, version);
        put_le32(msg + 8, in->pid);
        put_le32(msg + 12, in->thread);
        put_le64(msg + 16, in->cudart_table);
        put_le64(msg + 24, in->integrity_table);
        put_le64(msg + 32, in->integrity_fn);
        put_le64(msg + 40, unix_seconds);
        for (size_t i = 0; i < in->n_devices; i++) {
                uint8_t *d = msg + HEADER_BYTES + i * DEVICE_BYTES;
                memcpy(d, in->devices[i].uuid, 16);
                put_le32(d + 16, (uint32_t)in->devices[i].pci_domain);
                put_le32(d + 20, (uint32_t)in->devices[i].pci_bus);
                put_le32(d + 24, (uint32_t)in->devices[i].pci_device);
        }
        lup_hmac_md2(hmac_key, sizeof(hmac_key), msg, HEADER_BYTES + in->n_devices * DEVICE_BYTES, out);
        return 0;
}
