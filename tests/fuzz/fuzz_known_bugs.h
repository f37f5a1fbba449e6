/* SPDX-License-Identifier: MIT */
/*
 * Known bugs in the fuzz targets' code under test.
 *
 * A check that fails on a bug not fixed yet is skipped when the bug's name is
 * in $LUP_FUZZ_KNOWN_BUGS (comma-separated), so that the rest of the target
 * keeps running: the meson test fuzz-<target> sets it, and a should_fail test
 * fuzz-<target>-known-bugs replays the reproducers in
 * corpus/known-bugs/fuzz_<target>/. Once the bug is fixed, that test
 * "unexpectedly passes": drop the name from tests/fuzz/meson.build and the
 * target, and move the reproducers into corpus/fuzz_<target>/.
 */
#ifndef LUP_FUZZ_KNOWN_BUGS_H
#define LUP_FUZZ_KNOWN_BUGS_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static inline bool fuzz_known_bug(const char *name)
{
        const char *list = getenv("LUP_FUZZ_KNOWN_BUGS");
        size_t n = strlen(name);
        for (const char *p = list; p && *p;) {
                size_t k = strcspn(p, ",");
                if (k == n && strncmp(p, name, n) == 0)
                        return true;
                p += k;
                if (*p == ',')
                        p++;
        }
        return false;
}

#endif
