/* SPDX-License-Identifier: MIT */
#include "log_line.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const prio_names[8][2] = {
        { "emerg", NULL },     { "alert", NULL },  { "crit", NULL }, { "error", "err" },
        { "warning", "warn" }, { "notice", NULL }, { "info", NULL }, { "debug", NULL },
};

int lup_log_level_parse(const char *s, size_t n)
{
        if (n == 1 && s[0] >= '0' && s[0] <= '7')
                return s[0] - '0';
        for (int p = 0; p < 8; p++)
                for (int k = 0; k < 2; k++)
                        if (prio_names[p][k] && strlen(prio_names[p][k]) == n && memcmp(s, prio_names[p][k], n) == 0)
                                return p;
        return -1;
}

/* Appends s to out at *at (never past cap - 2: room for "\n\0"). */
static void put(char *out, size_t cap, size_t *at, const char *s, size_t n)
{
        if (*at + 2 >= cap)
                return;
        if (n > cap - 2 - *at)
                n = cap - 2 - *at;
        memcpy(out + *at, s, n);
        *at += n;
}

/* " key=value", the value escaped; nothing when value is NULL or "". */
static void put_field(char *out, size_t cap, size_t *at, const char *key, const char *value)
{
        static const char hex[] = "0123456789abcdef";

        if (!value || !*value)
                return;
        put(out, cap, at, " ", 1);
        put(out, cap, at, key, strlen(key));
        put(out, cap, at, "=", 1);
        for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
                if (*p <= ' ' || *p == '\\' || *p == 0x7f) {
                        char e[4] = { '\\', 'x', hex[*p >> 4], hex[*p & 15] };
                        put(out, cap, at, e, 4);
                } else {
                        put(out, cap, at, (const char *)p, 1);
                }
        }
}

size_t lup_log_line_format(char *out, size_t cap, uint64_t usec, const char *ident, int pid, const char *level,
                           const char *category, const struct lup_log_fields *f, const char *msg)
{
        time_t t = (time_t)(usec / 1000000u);
        struct tm tm;
        char head[128], err[24];
        size_t at = 0, start;

        if (!gmtime_r(&t, &tm))
                memset(&tm, 0, sizeof(tm));
        size_t k = strftime(head, sizeof(head), "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(head + k, sizeof(head) - k, ".%06uZ %s[%d]: %s: ", (unsigned)(usec % 1000000u), ident, pid, level);
        put(out, cap, &at, head, strlen(head));
        start = at;
        put(out, cap, &at, msg, strlen(msg));
        for (size_t i = start; i < at; i++)
                if (out[i] == '\n' || out[i] == '\r')
                        out[i] = ' ';
        put(out, cap, &at, " | category=", 12);
        put(out, cap, &at, category, strlen(category));
        if (f) {
                put_field(out, cap, &at, "session", f->session);
                put_field(out, cap, &at, "tenant", f->tenant);
                put_field(out, cap, &at, "op", f->op);
                if (f->cuda_error >= 0) {
                        snprintf(err, sizeof(err), "%ld", f->cuda_error);
                        put_field(out, cap, &at, "cuda_error", err);
                }
        }
        out[at++] = '\n';
        out[at] = 0;
        return at;
}

static int hexval(char c)
{
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The value p[0..n) unescaped into dst (cap bytes): 0, or -EINVAL. */
static int unescape(const char *p, size_t n, char *dst, size_t cap)
{
        size_t o = 0;

        for (size_t i = 0; i < n; i++) {
                char c = p[i];
                if (c == '\\') {
                        int hi, lo;
                        if (i + 3 >= n || p[i + 1] != 'x' || (hi = hexval(p[i + 2])) < 0 || (lo = hexval(p[i + 3])) < 0)
                                return -EINVAL;
                        c = (char)(hi << 4 | lo);
                        i += 3;
                }
                if (c == 0 || o + 1 >= cap)
                        return -EINVAL;
                dst[o++] = c;
        }
        dst[o] = 0;
        return 0;
}

/* "key=value key=value..." after " | " into *e. */
static int parse_fields(const char *p, const char *end, struct lup_log_line *e)
{
        while (p < end) {
                const char *sp = memchr(p, ' ', (size_t)(end - p)), *eq;
                const char *tok_end = sp ? sp : end;
                eq = memchr(p, '=', (size_t)(tok_end - p));
                if (!eq)
                        return -EINVAL;
                size_t kn = (size_t)(eq - p), vn = (size_t)(tok_end - eq - 1);
                const char *v = eq + 1;
                int r;
                if (kn == 8 && memcmp(p, "category", 8) == 0) {
                        r = unescape(v, vn, e->category, sizeof(e->category));
                } else if (kn == 7 && memcmp(p, "session", 7) == 0) {
                        r = unescape(v, vn, e->session, sizeof(e->session));
                } else if (kn == 6 && memcmp(p, "tenant", 6) == 0) {
                        r = unescape(v, vn, e->tenant, sizeof(e->tenant));
                } else if (kn == 2 && memcmp(p, "op", 2) == 0) {
                        r = unescape(v, vn, e->op, sizeof(e->op));
                } else if (kn == 10 && memcmp(p, "cuda_error", 10) == 0) {
                        char num[24], *nend;
                        r = unescape(v, vn, num, sizeof(num));
                        if (r == 0) {
                                errno = 0;
                                e->cuda_error = strtol(num, &nend, 10);
                                if (!num[0] || *nend || errno || e->cuda_error < 0)
                                        r = -EINVAL;
                        }
                } else {
                        r = 0; /* a field a later lupined writes: skipped */
                }
                if (r < 0)
                        return r;
                p = sp ? sp + 1 : end;
        }
        return 0;
}

/* "2026-03-01T12:00:00.123456Z" at p: microseconds since the epoch. */
static int parse_time(const char *p, size_t n, uint64_t *ret)
{
        struct tm tm = { 0 };
        unsigned us = 0;
        int used = 0;

        if (n < 27 || p[26] != 'Z' || p[19] != '.')
                return -EINVAL;
        char buf[28];
        memcpy(buf, p, 27);
        buf[27] = 0;
        if (sscanf(buf, "%4d-%2d-%2dT%2d:%2d:%2d.%6uZ%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                   &tm.tm_sec, &us, &used) != 7 ||
            used != 27)
                return -EINVAL;
        if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 ||
            tm.tm_sec > 60 || tm.tm_year < 1970)
                return -EINVAL;
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        time_t t = timegm(&tm);
        if (t == (time_t)-1 || t < 0)
                return -EINVAL;
        *ret = (uint64_t)t * 1000000u + us;
        return 0;
}

int lup_log_line_parse(const char *line, size_t n, struct lup_log_line *e)
{
        const char *end = line + n, *p, *q;
        static const char sep[] = " | category=";

        memset(e, 0, sizeof(*e));
        e->cuda_error = -1;
        if (memchr(line, 0, n) || parse_time(line, n, &e->usec) < 0 || n < 28 || line[27] != ' ')
                return -EINVAL;
        p = line + 28;
        q = memchr(p, '[', (size_t)(end - p));
        if (!q || q == p || (size_t)(q - p) >= sizeof(e->ident))
                return -EINVAL;
        memcpy(e->ident, p, (size_t)(q - p));
        char *num_end;
        long pid = strtol(q + 1, &num_end, 10);
        if (num_end == q + 1 || pid < 0 || pid > 1 << 30 || end - num_end < 3 || memcmp(num_end, "]: ", 3) != 0)
                return -EINVAL;
        e->pid = (int)pid;
        p = num_end + 3;
        q = memchr(p, ':', (size_t)(end - p));
        if (!q || end - q < 2 || q[1] != ' ' || (e->level = lup_log_level_parse(p, (size_t)(q - p))) < 0)
                return -EINVAL;
        p = q + 2;
        /* the last separator: a message may hold the same text */
        const char *fields = NULL;
        for (const char *s = p; (s = memmem(s, (size_t)(end - s), sep, sizeof(sep) - 1)); s++)
                fields = s;
        q = fields ? fields : end;
        size_t mn = (size_t)(q - p);
        if (mn >= sizeof(e->msg))
                mn = sizeof(e->msg) - 1;
        memcpy(e->msg, p, mn);
        e->msg[mn] = 0;
        if (fields && parse_fields(fields + 3, end, e) < 0)
                return -EINVAL;
        return 0;
}
