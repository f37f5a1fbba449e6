/* SPDX-License-Identifier: MIT */
#include "journal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#define SD_JOURNAL_SUPPRESS_LOCATION 1 /* the sink's own location would be on every entry */
#include <systemd/sd-journal.h>
#include <unistd.h>

#include "config.h"
#include "log.h"

static bool active;

bool lupd_journal_is_stderr(void)
{
        const char *v = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;
        char end;

        if (!v || sscanf(v, "%llu:%llu%c", &dev, &ino, &end) != 2)
                return false;
        if (fstat(STDERR_FILENO, &st) < 0)
                return false;
        return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

bool lupd_journal_active(void)
{
        return active;
}

/* "KEY=value" into buf at *at, as the next iovec; skipped when value is NULL. */
static void field(struct iovec *iov, int *n, char *buf, size_t cap, size_t *at, const char *key, const char *value)
{
        if (!value || *at >= cap)
                return;
        int k = snprintf(buf + *at, cap - *at, "%s=%s", key, value);
        if (k < 0)
                return;
        if ((size_t)k >= cap - *at)
                k = (int)(cap - *at - 1);
        iov[*n].iov_base = buf + *at;
        iov[*n].iov_len = (size_t)k;
        (*n)++;
        *at += (size_t)k + 1;
}

/* One entry; on failure (no journald), the line goes to stderr instead. */
static void journal_sink(int cat, int level, const struct lup_log_fields *f, const char *msg, void *userdata)
{
        char buf[2048], prio[2] = { (char)('0' + (level & 7)), 0 }, err[24];
        struct iovec iov[8];
        size_t at = 0;
        int n = 0;

        (void)userdata;
        snprintf(err, sizeof(err), "%ld", f->cuda_error);
        field(iov, &n, buf, sizeof(buf), &at, "MESSAGE", msg);
        field(iov, &n, buf, sizeof(buf), &at, "PRIORITY", prio);
        field(iov, &n, buf, sizeof(buf), &at, "SYSLOG_IDENTIFIER", lup_log_prefix());
        field(iov, &n, buf, sizeof(buf), &at, "LUPINE_CATEGORY", lup_log_cat_name(cat));
        field(iov, &n, buf, sizeof(buf), &at, "SESSION", f->session);
        field(iov, &n, buf, sizeof(buf), &at, "TENANT", f->tenant);
        field(iov, &n, buf, sizeof(buf), &at, "OP", f->op);
        field(iov, &n, buf, sizeof(buf), &at, "CUDA_ERROR", f->cuda_error >= 0 ? err : NULL);
        if (sd_journal_sendv(iov, n) < 0)
                lup_log_write_stderr(level, msg);
}

void lupd_journal_setup(int target)
{
        if (target == LUPD_LOG_TARGET_STDERR)
                return;
        if (target == LUPD_LOG_TARGET_AUTO && !lupd_journal_is_stderr())
                return;
        active = true;
        lup_log_set_sink(journal_sink, NULL);
}
