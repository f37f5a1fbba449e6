/* SPDX-License-Identifier: MIT */
/*
 * Fault injection for the directory provider (LUPINE_DIR_PROVIDER_FAIL, a
 * test facility; docs/providers.md lists the rules): the parser, run once
 * when an instance opens, and the per-occurrence check the save and load
 * paths call at each point a fault may be injected.
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include "dir_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const struct {
        const char *name;
        enum dir_fault_point point;
        int default_err;
} fault_names[] = {
        { "create", DIR_FAULT_CREATE, ENOSPC },
        { "write", DIR_FAULT_WRITE, ENOSPC },
        { "short", DIR_FAULT_SHORT, 0 },
        { "fsync", DIR_FAULT_FSYNC, EIO },
        { "marker", DIR_FAULT_MARKER, ENOSPC },
        { "commit-rename", DIR_FAULT_RENAME, EIO },
        { "crash-before-marker", DIR_FAULT_CRASH_MARKER, ECANCELED },
        { "crash-before-rename", DIR_FAULT_CRASH_RENAME, ECANCELED },
        { "crash-before-cleanup", DIR_FAULT_CRASH_CLEANUP, ECANCELED },
        { "no-uring", DIR_FAULT_NO_URING, 0 },
        { "flip", DIR_FAULT_FLIP, 0 },
        { "lease", DIR_FAULT_LEASE, EIO },
};

static const struct {
        const char *name;
        int err;
} fault_errnos[] = {
        { "ENOSPC", ENOSPC }, { "EIO", EIO },     { "EDQUOT", EDQUOT }, { "EROFS", EROFS },
        { "EFBIG", EFBIG },   { "EINTR", EINTR }, { "EAGAIN", EAGAIN },
};

static int parse_fault_rule(const char *rule, size_t len, struct dir_faults *f)
{
        char buf[64], *fields[3] = { NULL, NULL, NULL }, *save = NULL;
        size_t nf = 0, i;

        if (len == 0 || len >= sizeof(buf))
                return -EINVAL;
        memcpy(buf, rule, len);
        buf[len] = '\0';
        for (char *t = strtok_r(buf, ":", &save); t; t = strtok_r(NULL, ":", &save)) {
                if (nf == 3)
                        return -EINVAL;
                fields[nf++] = t;
        }
        if (nf == 0)
                return -EINVAL;
        for (i = 0; i < sizeof(fault_names) / sizeof(fault_names[0]); i++)
                if (strcmp(fields[0], fault_names[i].name) == 0)
                        break;
        if (i == sizeof(fault_names) / sizeof(fault_names[0]))
                return -EINVAL;
        enum dir_fault_point p = fault_names[i].point;
        f->armed[p] = true;
        f->nth[p] = 0;
        f->err[p] = fault_names[i].default_err;
        if (nf >= 2) {
                char *end;
                errno = 0;
                unsigned long v = strtoul(fields[1], &end, 10);
                if (errno || *end || end == fields[1] || v == 0 || v > UINT32_MAX)
                        return -EINVAL;
                f->nth[p] = (uint32_t)v;
        }
        if (nf == 3) {
                size_t k;
                if (f->err[p] == 0)
                        return -EINVAL; /* "short", "no-uring" and "flip" take no errno */
                for (k = 0; k < sizeof(fault_errnos) / sizeof(fault_errnos[0]); k++)
                        if (strcmp(fields[2], fault_errnos[k].name) == 0)
                                break;
                if (k == sizeof(fault_errnos) / sizeof(fault_errnos[0]))
                        return -EINVAL;
                f->err[p] = fault_errnos[k].err;
        }
        return 0;
}

int dir_faults_parse(const char *spec, struct dir_faults *ret)
{
        struct dir_faults f = { 0 };

        if (spec) {
                const char *p = spec;
                while (*p) {
                        size_t len = strcspn(p, ",");
                        int r = parse_fault_rule(p, len, &f);
                        if (r < 0)
                                return r;
                        p += len;
                        if (*p == ',')
                                p++;
                }
        }
        *ret = f;
        return 0;
}

int dir_fault_hit(const struct dir_faults *f, struct dir_fault_counts *c, enum dir_fault_point point)
{
        if (!f->armed[point])
                return 0;
        c->n[point]++;
        if (f->nth[point] != 0 && c->n[point] != f->nth[point])
                return 0;
        return f->err[point] ? f->err[point] : 1;
}
