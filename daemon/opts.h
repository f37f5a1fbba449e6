/* SPDX-License-Identifier: MIT */
/* What lupined's option parsers share (main.c, health_opts.c). */
#ifndef LUPD_OPTS_H
#define LUPD_OPTS_H

/* "lupined: WHAT\nTry 'lupined --help' ..." on stderr; -EINVAL. */
int lupd_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A whole decimal number in [min, max] into *ret: 0, or -EINVAL. */
int lupd_parse_int(const char *s, long min, long max, int *ret);

#endif
