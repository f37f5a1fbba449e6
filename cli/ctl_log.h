/* SPDX-License-Identifier: MIT */
/*
 * lupinectl log's parts: the command and the log file (ctl_log.c), the
 * journal (ctl_log_journal.c), and what both print (ctl_log_fmt.c).
 */
#ifndef CTL_LOG_H
#define CTL_LOG_H

#include <stdbool.h>
#include <stdio.h>

#include "log_line.h"

struct ctl_log_args {
        long lines;              /* -n: the last N entries (0: none, only new ones with -f) */
        int max_level;           /* --level: priority 0..7; 7 keeps all */
        const char *session;     /* --session, or NULL */
        bool follow;             /* -f */
        bool json;               /* one JSON object per line */
        bool color;              /* level words in color */
        const char *file;        /* --file, or the daemon's --log-file */
        const char *journal_dir; /* --journal-dir: journal files there, not the system's */
};

/* Whether e passes --level and --session. A line that is not of
 * lupined's format (level < 0) passes only when nothing filters. */
bool ctl_log_match(const struct ctl_log_args *a, const struct lup_log_line *e);
/* e as one line of text (time, level, category, message, the fields
 * present) or of JSON, newline included. */
void ctl_log_print(FILE *out, const struct ctl_log_args *a, const struct lup_log_line *e);
/* The priority's word: "error", "warning", "info", ... */
const char *ctl_log_level_word(int level);

/* Prints lupined's journal entries: 0, or 1 after saying why. */
int ctl_log_journal(const struct ctl_log_args *a);
/* Whether the journal has any entry of lupined (to fall back on it when
 * the daemon does not answer). */
bool ctl_log_journal_has_entries(const struct ctl_log_args *a);

#endif
