/* SPDX-License-Identifier: MIT */
#include "log.h"
#include "log_line.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char log_prefix[64] = "lupine";
static int cat_max[LUP_LOGC_COUNT] = { LUP_LOG_INFO, LUP_LOG_INFO, LUP_LOG_INFO, LUP_LOG_INFO,
                                       LUP_LOG_INFO, LUP_LOG_INFO, LUP_LOG_INFO, LUP_LOG_INFO };
static lup_log_sink_fn log_sink;
static void *log_sink_data;
static char ctx_session[128], ctx_tenant[64];
static int log_file_fd = -1;

int lup_trace_lvl;
static FILE *trace_file;
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const cat_names[LUP_LOGC_COUNT] = { "core", "net", "session", "checkpoint",
                                                       "gpu",  "tls", "nvml",    "admin" };

static const struct {
        const char *name;
        int level;
} level_names[] = {
        { "err", LUP_LOG_ERR },      { "error", LUP_LOG_ERR }, { "warning", LUP_LOG_WARNING },
        { "warn", LUP_LOG_WARNING }, { "info", LUP_LOG_INFO }, { "debug", LUP_LOG_DEBUG },
};

void lup_log_setup(const char *prefix, int max_level)
{
        snprintf(log_prefix, sizeof(log_prefix), "%s", prefix);
        for (int c = 0; c < LUP_LOGC_COUNT; c++)
                cat_max[c] = max_level;
}

const char *lup_log_prefix(void)
{
        return log_prefix;
}

const char *lup_log_cat_name(int cat)
{
        return cat >= 0 && cat < LUP_LOGC_COUNT ? cat_names[cat] : "core";
}

const char *lup_log_level_name(int level)
{
        switch (level) {
        case LUP_LOG_ERR:
                return "error";
        case LUP_LOG_WARNING:
                return "warning";
        case LUP_LOG_INFO:
                return "info";
        default:
                return "debug";
        }
}

static int level_of(const char *s, size_t n)
{
        for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
                if (strlen(level_names[i].name) == n && strncmp(s, level_names[i].name, n) == 0)
                        return level_names[i].level;
        return -1;
}

static int cat_of(const char *s, size_t n)
{
        for (int c = 0; c < LUP_LOGC_COUNT; c++)
                if (strlen(cat_names[c]) == n && strncmp(s, cat_names[c], n) == 0)
                        return c;
        return -1;
}

int lup_log_set_levels(const char *spec, char *why, size_t why_len)
{
        int next[LUP_LOGC_COUNT];
        const char *p = spec;

        memcpy(next, cat_max, sizeof(next));
        if (!spec || !*spec) {
                snprintf(why, why_len, "empty");
                return -EINVAL;
        }
        while (*p) {
                size_t n = strcspn(p, ",");
                const char *eq = memchr(p, '=', n);
                if (!eq) { /* a bare level: every category */
                        int l = level_of(p, n);
                        if (l < 0) {
                                snprintf(why, why_len, "'%.*s' is not a level (err, warning, info, debug)", (int)n, p);
                                return -EINVAL;
                        }
                        for (int c = 0; c < LUP_LOGC_COUNT; c++)
                                next[c] = l;
                } else {
                        int c = cat_of(p, (size_t)(eq - p));
                        int l = level_of(eq + 1, n - (size_t)(eq - p) - 1);
                        if (c < 0) {
                                snprintf(why, why_len,
                                         "'%.*s' is not a category (core, net, session, checkpoint, gpu, tls, "
                                         "nvml, admin)",
                                         (int)(eq - p), p);
                                return -EINVAL;
                        }
                        if (l < 0) {
                                snprintf(why, why_len, "'%.*s' is not a level (err, warning, info, debug)",
                                         (int)(n - (size_t)(eq - p) - 1), eq + 1);
                                return -EINVAL;
                        }
                        next[c] = l;
                }
                p += n;
                if (*p == ',' && *++p == '\0') {
                        snprintf(why, why_len, "ends with a comma");
                        return -EINVAL;
                }
        }
        memcpy(cat_max, next, sizeof(next));
        return 0;
}

void lup_log_levels_spec(char *out, size_t len)
{
        /* the core category's level for all, then each one that differs */
        size_t at = (size_t)snprintf(out, len, "%s", lup_log_level_name(cat_max[LUP_LOGC_CORE]));
        for (int c = 1; c < LUP_LOGC_COUNT && at < len; c++)
                if (cat_max[c] != cat_max[LUP_LOGC_CORE])
                        at += (size_t)snprintf(out + at, len - at, ",%s=%s", cat_names[c],
                                               lup_log_level_name(cat_max[c]));
}

void lup_log_set_sink(lup_log_sink_fn fn, void *userdata)
{
        log_sink = fn;
        log_sink_data = userdata;
}

void lup_log_set_file(int fd)
{
        log_file_fd = fd;
}

/* One write() per line: O_APPEND makes it land whole at the end, whoever
 * (supervisor or worker) writes at the same time. */
static void write_file_line(int cat, int level, const struct lup_log_fields *f, const char *msg)
{
        char line[LUP_LOG_LINE_MAX];
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        size_t n = lup_log_line_format(line, sizeof(line),
                                       (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u, log_prefix,
                                       (int)getpid(), lup_log_level_name(level), lup_log_cat_name(cat), f, msg);
        if (write(log_file_fd, line, n) < 0) {
                /* the file is full or gone: stderr or the journal still has it */
        }
}

void lup_log_set_context(const char *session, const char *tenant)
{
        snprintf(ctx_session, sizeof(ctx_session), "%s", session ? session : "");
        snprintf(ctx_tenant, sizeof(ctx_tenant), "%s", tenant ? tenant : "");
}

int lup_log_max_level(void)
{
        int m = 0;
        for (int c = 0; c < LUP_LOGC_COUNT; c++)
                if (cat_max[c] > m)
                        m = cat_max[c];
        return m;
}

int lup_log_cat_level(int cat)
{
        return cat >= 0 && cat < LUP_LOGC_COUNT ? cat_max[cat] : cat_max[LUP_LOGC_CORE];
}

/* one write() per line so concurrent processes do not interleave */
void lup_log_write_stderr(int level, const char *msg)
{
        char line[1200];
        int n = snprintf(line, sizeof(line), "%s[%d]: %s: %s\n", log_prefix, (int)getpid(), lup_log_level_name(level),
                         msg);
        if (n > (int)sizeof(line) - 1) {
                n = (int)sizeof(line) - 1;
                line[n - 1] = '\n';
        }
        if (write(STDERR_FILENO, line, (size_t)n) < 0) {
                /* nowhere left to report it */
        }
}

void lup_vclogf(int cat, int level, const struct lup_log_fields *f, const char *fmt, va_list ap)
{
        char msg[1024];
        int saved = errno;

        if (level > lup_log_cat_level(cat))
                return;
        vsnprintf(msg, sizeof(msg), fmt, ap);
        struct lup_log_fields all = f ? *f : (struct lup_log_fields){ .cuda_error = -1 };
        if (!all.session && ctx_session[0])
                all.session = ctx_session;
        if (!all.tenant && ctx_tenant[0])
                all.tenant = ctx_tenant;
        if (log_sink)
                log_sink(cat, level, &all, msg, log_sink_data);
        else
                lup_log_write_stderr(level, msg);
        if (log_file_fd >= 0)
                write_file_line(cat, level, &all, msg);
        errno = saved;
}

void lup_clogf(int cat, int level, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        lup_vclogf(cat, level, NULL, fmt, ap);
        va_end(ap);
}

void lup_flogf(int cat, int level, const struct lup_log_fields *f, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        lup_vclogf(cat, level, f, fmt, ap);
        va_end(ap);
}

void lup_vlogf(int level, const char *fmt, va_list ap)
{
        lup_vclogf(LUP_LOGC_CORE, level, NULL, fmt, ap);
}

void lup_logf(int level, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        lup_vclogf(LUP_LOGC_CORE, level, NULL, fmt, ap);
        va_end(ap);
}

void lup_trace_setup_from_env(void)
{
        const char *v = getenv("LUPINE_TRACE");

        if (!v || !*v || strcmp(v, "0") == 0)
                return;
        /* "1".."3": a level, to stderr; "N:PATH": level N to PATH; "PATH": level 1 to PATH */
        int level = 1;
        if (v[0] >= '1' && v[0] <= '3' && (v[1] == '\0' || v[1] == ':')) {
                level = v[0] - '0';
                if (v[1] == '\0') {
                        lup_trace_lvl = level;
                        return;
                }
                v += 2;
        }
        int fd = open(v, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0) {
                lup_warn("LUPINE_TRACE: cannot open %s: %s; tracing to stderr", v, strerror(errno));
        } else {
                trace_file = fdopen(fd, "a");
                if (!trace_file)
                        close(fd);
        }
        lup_trace_lvl = level;
}

void lup_tracef(const char *fmt, ...)
{
        struct timespec ts;
        va_list ap;
        FILE *f;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        pthread_mutex_lock(&trace_lock);
        f = trace_file ? trace_file : stderr;
        fprintf(f, "[%s %d %ld.%06ld] ", log_prefix, (int)getpid(), (long)ts.tv_sec, ts.tv_nsec / 1000);
        va_start(ap, fmt);
        vfprintf(f, fmt, ap);
        va_end(ap);
        fputc('\n', f);
        fflush(f);
        pthread_mutex_unlock(&trace_lock);
}
