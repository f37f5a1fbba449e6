/* SPDX-License-Identifier: MIT */
/*
 * store_claim DIR FIRST COUNT OWNER TTL_S: claims the arena-slot leases
 * FIRST .. FIRST+COUNT-1 in the directory store DIR for OWNER, for TTL_S
 * seconds, as another host of the fleet would (tests/e2e/test_fleet_slots.py).
 * Prints "claimed N" and exits 0 when every claim succeeded.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lupine/wire.h"
#include "provider_dir.h"
#include "worker/slot_lease.h"

int main(int argc, char **argv)
{
        if (argc != 6) {
                fprintf(stderr, "usage: %s DIR FIRST COUNT OWNER TTL_S\n", argv[0]);
                return 2;
        }
        const struct lupine_checkpoint_provider *p = lupine_dir_provider();
        struct lupine_ckpt_instance *inst = NULL;
        unsigned first = (unsigned)strtoul(argv[2], NULL, 10), count = (unsigned)strtoul(argv[3], NULL, 10);
        uint32_t ttl_ms = (uint32_t)strtoul(argv[5], NULL, 10) * 1000u;
        int rc = p->open(argv[1], &inst);
        if (rc < 0) {
                fprintf(stderr, "store_claim: cannot open %s: %s\n", argv[1], strerror(-rc));
                return 1;
        }
        unsigned n = 0;
        for (unsigned slot = first; slot < first + count && slot < LUP_ARENA_SLOTS; slot++) {
                char key[LUPW_SLOT_KEY_MAX];
                struct lupine_ckpt_lease got;
                lupw_slot_key(slot, key);
                memset(&got, 0, sizeof(got));
                rc = p->lease_claim(inst, key, argv[4], ttl_ms, &got);
                if (rc < 0) {
                        fprintf(stderr, "store_claim: %s: %s (%s)\n", key, strerror(-rc), p->last_error(inst));
                        break;
                }
                n++;
        }
        p->close(inst);
        printf("claimed %u\n", n);
        return n == count ? 0 : 1;
}
