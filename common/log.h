/* SPDX-License-Identifier: MIT */
/*
 * Logging for shim and daemon. One process-wide sink, configured once at
 * start-up by the program (the daemon may route it to journald). Messages
 * are single lines; the sink adds the prefix and the newline.
 *
 * Tracing (LUPINE_TRACE=0|1|2|3|PATH|N:PATH; 3 adds every driver call made
 * through cuGetProcAddress, with its result) is separate: lup_trace_level() tells
 * callers whether to format a trace line at all, so a disabled trace costs
 * one load and a branch on the hot path.
 */
#ifndef LUP_LOG_H
#define LUP_LOG_H

#include <stdarg.h>
#include <stdio.h>

enum lup_log_level { LUP_LOG_ERR = 3, LUP_LOG_WARNING = 4, LUP_LOG_INFO = 6, LUP_LOG_DEBUG = 7 };

/* A sink receives the finished message (no newline). */
typedef void (*lup_log_sink_fn)(int level, const char *msg, void *userdata);

void lup_log_setup(const char *prefix, int max_level);
void lup_log_set_sink(lup_log_sink_fn fn, void *userdata);
int lup_log_max_level(void);

void lup_logf(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void lup_vlogf(int level, const char *fmt, va_list ap);

#define lup_err(...)   lup_logf(LUP_LOG_ERR, __VA_ARGS__)
#define lup_warn(...)  lup_logf(LUP_LOG_WARNING, __VA_ARGS__)
#define lup_info(...)  lup_logf(LUP_LOG_INFO, __VA_ARGS__)
#define lup_debug(...) do { if (lup_log_max_level() >= LUP_LOG_DEBUG) lup_logf(LUP_LOG_DEBUG, __VA_ARGS__); } while (0)

/* Parses LUPINE_TRACE (0, 1, 2, or a path meaning level 1 into that file). */
void lup_trace_setup_from_env(void);
extern int lup_trace_lvl;
static inline int lup_trace_level(void) { return lup_trace_lvl; }
void lup_tracef(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
