/* SPDX-License-Identifier: MIT */
/*
 * One line of lupined's log file (--log-file), written by the daemon and
 * read back by `lupinectl log`: one codec for both ends.
 *
 *   TIME PREFIX[PID]: LEVEL: MESSAGE | category=CAT[ session=S][ tenant=T][ op=O][ cuda_error=N]
 *
 * TIME is UTC, "2026-03-01T12:00:00.123456Z". What follows it up to " | "
 * is the text lupined writes on stderr ("lupined[42]: info: ready"). The
 * fields come last, in that order, each only when the message has it (the
 * journal's LUPINE_CATEGORY, SESSION, TENANT, OP, CUDA_ERROR). A field
 * value's bytes up to the space, a backslash and DEL are written \xHH, so a
 * value never holds a space; a newline in a message is written as a space.
 * A reader takes the last " | category=" of a line as the start of the
 * fields, so a message that happens to hold the same text stays whole.
 */
#ifndef LUP_LOG_LINE_H
#define LUP_LOG_LINE_H

#include <stddef.h>
#include <stdint.h>

#include "log.h"

#define LUP_LOG_LINE_MAX 4096 /* the longest line written; longer ones are cut */

/* A line read back (or a journal entry, in lupinectl). Strings are
 * NUL-terminated, "" when absent; cuda_error -1 when absent. */
struct lup_log_line {
        uint64_t usec; /* CLOCK_REALTIME microseconds */
        int level;     /* syslog priority, 0..7 */
        int pid;       /* 0: not known */
        char ident[32];
        char category[16];
        char session[129];
        char tenant[129];
        char op[64];
        long cuda_error;
        char msg[1100];
};

/* The line for one message (level and category as words, the fields
 * already merged with the process context), newline included, into out
 * (cap >= 64): its length. */
size_t lup_log_line_format(char *out, size_t cap, uint64_t usec, const char *ident, int pid, const char *level,
                           const char *category, const struct lup_log_fields *f, const char *msg);
/* Parses one line (without its newline, n bytes) into *ret (fully
 * overwritten): 0, or -EINVAL when it is not a line of this format (*ret
 * then holds nothing useful). */
int lup_log_line_parse(const char *line, size_t n, struct lup_log_line *ret);

/* A level word or digit as --log-level and syslog say it: "err"/"error",
 * "warning"/"warn", "notice", "info", "debug", "emerg", "alert", "crit",
 * or "0".."7". The priority, or -1. */
int lup_log_level_parse(const char *s, size_t n);

#endif
