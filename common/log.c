/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char log_prefix[64] = "lupine";
static int log_max = LUP_LOG_INFO;
static lup_log_sink_fn log_sink;
static void *log_sink_data;

int lup_trace_lvl;
static FILE *trace_file;
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;

void lup_log_setup(const char *prefix, int max_level)
{
        snprintf(log_prefix, sizeof(log_prefix), "%s", prefix);
        log_max = max_level;
}

void lup_log_set_sink(lup_log_sink_fn fn, void *userdata)
{
        log_sink = fn;
        log_sink_data = userdata;
}

int lup_log_max_level(void)
{
        return log_max;
}

void lup_vlogf(int level, const char *fmt, va_list ap)
{
        char msg[1024];
        int saved = errno;

        if (level > log_max)
                return;
        vsnprintf(msg, sizeof(msg), fmt, ap);
        if (log_sink) {
                log_sink(level, msg, log_sink_data);
        } else {
                /* one write() per line so concurrent processes do not interleave */
                char line[1200];
                int n = snprintf(line, sizeof(line), "%s[%d]: %s\n", log_prefix, (int)getpid(), msg);
                if (n > (int)sizeof(line) - 1)
                        n = (int)sizeof(line) - 1;
                if (write(STDERR_FILENO, line, (size_t)n) < 0) {
                        /* nowhere left to report it */
                }
        }
        errno = saved;
}

void lup_logf(int level, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        lup_vlogf(level, fmt, ap);
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
