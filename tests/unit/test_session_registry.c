/* SPDX-License-Identifier: MIT */
/* The supervisor's session table: arena slots (daemon/supervisor/session_registry.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "supervisor/session_registry.h"

static struct lupd_registry reg;

static void lowest_free_slot(void **state)
{
        (void)state;
        lupd_registry_init(&reg, 8);
        int a = lupd_registry_claim(&reg, "a", 0), b = lupd_registry_claim(&reg, "b", 0);
        assert_true(a >= 0 && b >= 0);
        assert_int_equal(reg.s[a].slot, 0);
        assert_int_equal(reg.s[b].slot, 1);
        assert_int_equal(lupd_registry_claim(&reg, "a", 0), -EBUSY);
        /* the client holds slots 2 and 3 for its other servers */
        int c = lupd_registry_claim(&reg, "c", 0xcull);
        assert_int_equal(reg.s[c].slot, 4);
        /* nothing left outside the mask */
        assert_int_equal(lupd_registry_claim(&reg, "d", ~0ull), -ENOSPC);
        /* an unusable slot is skipped too */
        reg.unusable = 1ull << 2;
        int d = lupd_registry_claim(&reg, "d", 0);
        assert_int_equal(reg.s[d].slot, 3);
}

static void fleet_slots_wait_for_ready(void **state)
{
        (void)state;
        int holder = -1;
        lupd_registry_init(&reg, 8);
        reg.fleet_slots = true;
        int a = lupd_registry_claim(&reg, "a", 0);
        /* only a hint until the worker names the slot it took in the store */
        assert_int_equal(reg.s[a].slot, -1);
        assert_int_equal(reg.s[a].slot_hint, 0);
        int b = lupd_registry_claim(&reg, "b", 1);
        assert_int_equal(reg.s[b].slot_hint, 1);
        assert_int_equal(lupd_registry_set_slot(&reg, a, 5, &holder), 0);
        assert_int_equal(reg.s[a].slot, 5);
        /* the next hint skips what is known to be held here */
        int c = lupd_registry_claim(&reg, "c", 0);
        assert_int_equal(reg.s[c].slot_hint, 0);
        assert_int_equal(lupd_registry_set_slot(&reg, c, 5, &holder), -EADDRINUSE);
        assert_int_equal(holder, a);
        assert_int_equal(lupd_registry_set_slot(&reg, c, (int)LUP_ARENA_SLOTS, &holder), -ERANGE);
        /* a restore has no hint of its own */
        int r = lupd_registry_claim_restore(&reg, "r");
        assert_int_equal(reg.s[r].slot, -1);
        assert_true(reg.s[r].restore);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(lowest_free_slot),
                cmocka_unit_test(fleet_slots_wait_for_ready),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
