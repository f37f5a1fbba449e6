/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>

#include "env.h"
#include "log.h"

unsigned lup_env_uint(const char *name, unsigned def, unsigned max)
{
        const char *v = getenv(name);
        char *end;

        if (!v || !*v)
                return def;
        errno = 0;
        unsigned long x = strtoul(v, &end, 10);
        if (errno || *end || v[0] == '-' || x > max) {
                lup_warn("%s=%s is not a whole number from 0 to %u; using %u", name, v, max, def);
                return def;
        }
        return (unsigned)x;
}
