/* SPDX-License-Identifier: MIT */
/* What lupined's option parsers share (opts.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "opts.h"

int lupd_usage_error(const char *fmt, ...)
{
        va_list ap;

        fputs("lupined: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputs("\nTry 'lupined --help' for more information.\n", stderr);
        return -EINVAL;
}

int lupd_parse_int(const char *s, long min, long max, int *ret)
{
        char *end;
        long v;

        errno = 0;
        v = strtol(s, &end, 10);
        if (errno || end == s || *end || v < min || v > max)
                return -EINVAL;
        *ret = (int)v;
        return 0;
}
