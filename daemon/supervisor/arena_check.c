/* SPDX-License-Identifier: MIT */
/*
 * Which arena slots this host can use (issue 15, finding 5). A slot's
 * range (lup_arena_slot_base, abi/lupine/wire.h) must be free in the
 * worker that reserves it; workers are this binary, exec'd, so a range
 * that this process already has something mapped in is likely taken in
 * theirs too (an unusual layout: another ASLR setting, a huge heap, a
 * preloaded library). At start every slot's range is reserved once with
 * MAP_FIXED_NOREPLACE and released; a slot that fails is logged with the
 * mapping in its way and never handed out. A worker still checks its own
 * reservation (worker/hello.c) and refuses the session if it lost a race.
 */
#define LUP_LOG_CAT LUP_LOGC_SESSION
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "log.h"
#include "supervisor/internal.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/* The first line of /proc/self/maps that overlaps [lo, hi), into out. */
static void overlapping_mapping(uint64_t lo, uint64_t hi, char *out, size_t cap)
{
        char line[512];
        FILE *f = fopen("/proc/self/maps", "re");

        snprintf(out, cap, "an unknown mapping");
        if (!f)
                return;
        while (fgets(line, sizeof(line), f)) {
                uint64_t a, b;
                if (sscanf(line, "%" SCNx64 "-%" SCNx64, &a, &b) == 2 && a < hi && b > lo) {
                        line[strcspn(line, "\n")] = 0;
                        snprintf(out, cap, "%s", line);
                        break;
                }
        }
        fclose(f);
}

static bool slot_usable(uint32_t slot, char *why, size_t cap)
{
        uint64_t want = lup_arena_slot_base(slot);
        void *p = mmap((void *)(uintptr_t)want, LUP_ARENA_SIZE, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);

        if (p == (void *)(uintptr_t)want) {
                munmap(p, LUP_ARENA_SIZE);
                return true;
        }
        if (p != MAP_FAILED) /* a kernel without MAP_FIXED_NOREPLACE took it as a hint */
                munmap(p, LUP_ARENA_SIZE);
        if (p == MAP_FAILED && errno != EEXIST) {
                snprintf(why, cap, "it cannot be reserved: %s", strerror(errno));
                return false;
        }
        overlapping_mapping(want, want + LUP_ARENA_SIZE, why, cap);
        return false;
}

int sup_arena_check(struct sup *s)
{
        int usable = 0;
        char why[600];

        s->reg.unusable = 0;
        for (uint32_t n = 0; n < LUP_ARENA_SLOTS; n++) {
                if (slot_usable(n, why, sizeof(why))) {
                        usable++;
                        continue;
                }
                s->reg.unusable |= 1ull << n;
                lup_warn("arena slot %u [0x%" PRIx64 ", 0x%" PRIx64 ") overlaps a mapping of this process (%s); "
                         "no session gets it",
                         n, (uint64_t)lup_arena_slot_base(n), (uint64_t)(lup_arena_slot_base(n) + LUP_ARENA_SIZE), why);
        }
        if (usable < s->reg.max_sessions)
                lup_warn("arena: %d of %u slots usable, fewer than --max-sessions %d", usable, LUP_ARENA_SLOTS,
                         s->reg.max_sessions);
        else
                lup_info("arena: %d of %u slots usable", usable, LUP_ARENA_SLOTS);
        return usable;
}
