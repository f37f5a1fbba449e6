/* SPDX-License-Identifier: MIT */
/*
 * lupinectl log from the journal (sd-journal): the entries lupined and its
 * workers wrote natively (daemon/journal.c: SYSLOG_IDENTIFIER lupined or
 * lupined-worker, PRIORITY, LUPINE_CATEGORY, SESSION, TENANT, OP,
 * CUDA_ERROR), filtered by journal matches, the last N, then with -f the
 * new ones as they come (sd_journal_wait) until Ctrl-C.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <systemd/sd-journal.h>

#include "cli/ctl_log.h"

/* Field key of the current entry into dst (cap bytes, "" when absent). */
static void get_field(sd_journal *j, const char *key, char *dst, size_t cap)
{
        const void *d;
        size_t len, klen = strlen(key);

        dst[0] = 0;
        if (sd_journal_get_data(j, key, &d, &len) < 0 || len <= klen || ((const char *)d)[klen] != '=')
                return;
        len -= klen + 1;
        if (len >= cap)
                len = cap - 1;
        memcpy(dst, (const char *)d + klen + 1, len);
        dst[len] = 0;
}

static void read_entry(sd_journal *j, struct lup_log_line *e)
{
        char num[24], *end;

        memset(e, 0, sizeof(*e));
        (void)sd_journal_get_realtime_usec(j, &e->usec);
        get_field(j, "MESSAGE", e->msg, sizeof(e->msg));
        get_field(j, "SYSLOG_IDENTIFIER", e->ident, sizeof(e->ident));
        get_field(j, "LUPINE_CATEGORY", e->category, sizeof(e->category));
        get_field(j, "SESSION", e->session, sizeof(e->session));
        get_field(j, "TENANT", e->tenant, sizeof(e->tenant));
        get_field(j, "OP", e->op, sizeof(e->op));
        get_field(j, "PRIORITY", num, sizeof(num));
        e->level = num[0] >= '0' && num[0] <= '7' && !num[1] ? num[0] - '0' : 6;
        get_field(j, "_PID", num, sizeof(num));
        e->pid = (int)strtol(num, NULL, 10);
        get_field(j, "CUDA_ERROR", num, sizeof(num));
        e->cuda_error = num[0] ? strtol(num, &end, 10) : -1;
        if (num[0] && (*end || e->cuda_error < 0))
                e->cuda_error = -1;
}

/* Opens the journal with lupined's matches and the filters as matches:
 * 0, or -errno after saying why (unless quiet). */
static int open_matched(const struct ctl_log_args *a, sd_journal **ret, bool quiet)
{
        sd_journal *j;
        char m[200];
        int r;

        r = a->journal_dir ? sd_journal_open_directory(&j, a->journal_dir, 0)
                           : sd_journal_open(&j, SD_JOURNAL_LOCAL_ONLY);
        if (r < 0) {
                if (!quiet)
                        fprintf(stderr, "lupinectl: cannot open the journal%s%s: %s\n", a->journal_dir ? " in " : "",
                                a->journal_dir ? a->journal_dir : "", strerror(-r));
                return r;
        }
        /* the same field twice is an OR; different fields an AND */
        r = sd_journal_add_match(j, "SYSLOG_IDENTIFIER=lupined", 0);
        if (r >= 0)
                r = sd_journal_add_match(j, "SYSLOG_IDENTIFIER=lupined-worker", 0);
        for (int p = 0; p <= a->max_level && a->max_level < 7 && r >= 0; p++) {
                snprintf(m, sizeof(m), "PRIORITY=%d", p);
                r = sd_journal_add_match(j, m, 0);
        }
        if (a->session && r >= 0) {
                snprintf(m, sizeof(m), "SESSION=%s", a->session);
                r = sd_journal_add_match(j, m, 0);
        }
        if (r < 0) {
                if (!quiet)
                        fprintf(stderr, "lupinectl: journal match: %s\n", strerror(-r));
                sd_journal_close(j);
                return r;
        }
        *ret = j;
        return 0;
}

bool ctl_log_journal_has_entries(const struct ctl_log_args *a)
{
        sd_journal *j;
        bool any;

        if (open_matched(a, &j, true) < 0)
                return false;
        any = sd_journal_seek_tail(j) >= 0 && sd_journal_previous(j) > 0;
        sd_journal_close(j);
        return any;
}

static void show(sd_journal *j, const struct ctl_log_args *a, long *shown)
{
        struct lup_log_line e;

        read_entry(j, &e);
        if (!ctl_log_match(a, &e)) /* the matches did it; a PRIORITY absent is "info" */
                return;
        ctl_log_print(stdout, a, &e);
        (*shown)++;
}

int ctl_log_journal(const struct ctl_log_args *a)
{
        sd_journal *j;
        long shown = 0;
        int r;

        if (open_matched(a, &j, false) < 0)
                return 1;
        r = sd_journal_seek_tail(j);
        if (r >= 0 && a->lines > 0) {
                /* onto the Nth entry from the end (or the first, if fewer) */
                r = sd_journal_previous_skip(j, (uint64_t)a->lines);
                if (r > 0) {
                        do
                                show(j, a, &shown);
                        while ((r = sd_journal_next(j)) > 0);
                }
        } else if (r >= 0) {
                r = sd_journal_previous(j); /* onto the last: -f shows only what follows */
        }
        fflush(stdout);
        while (r >= 0 && a->follow) {
                r = sd_journal_next(j);
                if (r > 0) {
                        show(j, a, &shown);
                        continue;
                }
                fflush(stdout);
                if (r == 0)
                        r = sd_journal_wait(j, (uint64_t)-1);
        }
        sd_journal_close(j);
        if (r < 0) {
                fprintf(stderr, "lupinectl: reading the journal: %s\n", strerror(-r));
                return 1;
        }
        if (shown == 0 && a->lines > 0 && geteuid() != 0 && !a->journal_dir)
                fprintf(stderr, "lupinectl: no entries of lupined in the journal you may read (are you in the "
                                "systemd-journal or adm group?)\n");
        return 0;
}
