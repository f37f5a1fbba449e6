/* SPDX-License-Identifier: MIT */
/*
 * Logging for shim and daemon. One process-wide sink, configured once at
 * start-up by the program (the daemon routes it to journald when systemd
 * runs it: daemon/journal.c). Messages are single lines; the sink adds the
 * prefix and the newline.
 *
 * Every message has a category, and each category its own level
 * (`--log-level info,net=debug`). A file says which category its messages
 * are in by defining LUP_LOG_CAT before it includes anything:
 *
 *      #define LUP_LOG_CAT LUP_LOGC_NET
 *
 * A message may carry structured fields (session, tenant, op, CUDA error)
 * for the journal; a process that serves one session (a worker) sets its
 * session and tenant once with lup_log_set_context and every message it
 * logs carries them.
 *
 * Tracing (LUPINE_TRACE=0|1|2|3|PATH|N:PATH; 3 adds every driver call made
 * through cuGetProcAddress, with its result) is separate: lup_trace_level() tells
 * callers whether to format a trace line at all, so a disabled trace costs
 * one load and a branch on the hot path.
 */
#ifndef LUP_LOG_H
#define LUP_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

enum lup_log_level { LUP_LOG_ERR = 3, LUP_LOG_WARNING = 4, LUP_LOG_INFO = 6, LUP_LOG_DEBUG = 7 };

enum lup_log_cat {
        LUP_LOGC_CORE,       /* start-up, options, anything not below */
        LUP_LOGC_NET,        /* listeners, connections, frames, reconnects */
        LUP_LOGC_SESSION,    /* sessions: admission, workers, ends, restores */
        LUP_LOGC_CHECKPOINT, /* checkpoints, providers, drains, upgrades */
        LUP_LOGC_GPU,        /* the driver: calls, contexts, memory, failures */
        LUP_LOGC_TLS,        /* TLS, certificates, authentication */
        LUP_LOGC_NVML,       /* NVML snapshots */
        LUP_LOGC_ADMIN,      /* operator requests (lupinectl) */
        LUP_LOGC_COUNT
};

#ifndef LUP_LOG_CAT
#define LUP_LOG_CAT LUP_LOGC_CORE
#endif

/* The structured fields of one message; NULL (or cuda_error < 0): absent. */
struct lup_log_fields {
        const char *session, *tenant, *op;
        long cuda_error;
};

/* A sink receives the finished message (no newline) and its fields, the
 * process context merged in. */
typedef void (*lup_log_sink_fn)(int cat, int level, const struct lup_log_fields *f, const char *msg, void *userdata);

/* prefix: the program's name ("lupined"); max_level: every category's. */
void lup_log_setup(const char *prefix, int max_level);
/* Levels from a spec "LEVEL", "CAT=LEVEL,..." or "LEVEL,CAT=LEVEL,...":
 * a bare level sets every category, CAT=LEVEL one. 0, or -EINVAL with a
 * reason in why. Nothing changes on an error. */
int lup_log_set_levels(const char *spec, char *why, size_t why_len);
/* The spec that gives the current levels (for a worker's command line). */
void lup_log_levels_spec(char *out, size_t len);
const char *lup_log_prefix(void);
void lup_log_set_sink(lup_log_sink_fn fn, void *userdata);
/* The line "PREFIX[PID]: LEVEL: msg" on stderr (what happens without a sink). */
void lup_log_write_stderr(int level, const char *msg);
void lup_log_set_context(const char *session, const char *tenant);
/* Every message also goes, as one line of common/log_line.h's format, to
 * fd (opened O_APPEND by the program: lupined --log-file); -1: none. */
void lup_log_set_file(int fd);
int lup_log_max_level(void); /* the highest of any category */
int lup_log_cat_level(int cat);
const char *lup_log_cat_name(int cat);
const char *lup_log_level_name(int level);

void lup_clogf(int cat, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void lup_vclogf(int cat, int level, const struct lup_log_fields *f, const char *fmt, va_list ap);
void lup_flogf(int cat, int level, const struct lup_log_fields *f, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* The core category (kept for callers that name none). */
void lup_logf(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void lup_vlogf(int level, const char *fmt, va_list ap);

static inline int lup_log_enabled(int cat, int level)
{
        return level <= lup_log_cat_level(cat);
}

#define lup_err(...)  lup_clogf(LUP_LOG_CAT, LUP_LOG_ERR, __VA_ARGS__)
#define lup_warn(...) lup_clogf(LUP_LOG_CAT, LUP_LOG_WARNING, __VA_ARGS__)
#define lup_info(...) lup_clogf(LUP_LOG_CAT, LUP_LOG_INFO, __VA_ARGS__)
#define lup_debug(...)                                                      \
        do {                                                                \
                if (lup_log_enabled(LUP_LOG_CAT, LUP_LOG_DEBUG))            \
                        lup_clogf(LUP_LOG_CAT, LUP_LOG_DEBUG, __VA_ARGS__); \
        } while (0)

/* Parses LUPINE_TRACE (0, 1, 2, or a path meaning level 1 into that file). */
void lup_trace_setup_from_env(void);
extern int lup_trace_lvl;
static inline int lup_trace_level(void) { return lup_trace_lvl; }
void lup_tracef(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
