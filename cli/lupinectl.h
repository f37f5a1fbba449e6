/* SPDX-License-Identifier: MIT */
/*
 * lupinectl's parts: the exchange (ctl_call.c), the status and session
 * commands (ctl_status.c), checkpoint and drain followed to their end
 * (ctl_ckpt.c), info and config (ctl_info.c), and main
 * (lupinectl.c), which parses the options and picks the command.
 */
#ifndef LUPINECTL_H
#define LUPINECTL_H

#include <stdbool.h>
#include <stdint.h>

struct ctl_opts {
        const char *socket; /* lupined's UNIX socket */
        bool json;          /* print lupined's JSON as it came */
        bool color;         /* words in color (a terminal, and no --no-color) */
        bool verbose;       /* say what is sent and received, on stderr */
        int device;         /* -d N: only GPU N (info); -1 for all */
        int timeout_ms;     /* how long to wait for an answer; 0: 30 s */
        bool quiet;         /* ctl_call says nothing of failures (a poll that expects them) */
        const char *server; /* --server URL: info (and bench) from a client's side, or NULL */
};

/* Sends ADMIN cmd (with arg, or none when NULL) and reads the reply:
 * *ret_status and the text, NUL-terminated, in a malloc'd *ret_text.
 * Returns 0, or -errno after printing why (unless o->quiet): the
 * connect's own error (-ENOENT, -ECONNREFUSED: no daemon there), -EAGAIN
 * when no answer came in time, another for a broken exchange. */
int ctl_call(const struct ctl_opts *o, uint16_t cmd, const char *arg, uint32_t *ret_status, char **ret_text);
/* ctl_call, then: a refusal is printed ("lupined refused to WHAT: ...")
 * and is -1; otherwise the text is the caller's to free. */
int ctl_call_ok(const struct ctl_opts *o, uint16_t cmd, const char *arg, const char *what, char **ret_text);

/* Each command's exit status: 0 done, 1 failed, 2 bad usage. */
int ctl_status(const struct ctl_opts *o);
int ctl_sessions(const struct ctl_opts *o, int argc, char **argv);
int ctl_info(const struct ctl_opts *o);
int ctl_config(const struct ctl_opts *o, int argc, char **argv);
int ctl_monitor(const struct ctl_opts *o, int argc, char **argv);
int ctl_diag(const struct ctl_opts *o);
int ctl_log(const struct ctl_opts *o, int argc, char **argv);
int ctl_bench(const struct ctl_opts *o, int argc, char **argv);
/* drain, upgrade: the daemon's one-line answer */
int ctl_simple(const struct ctl_opts *o, uint16_t cmd, const char *what);
/* sessions checkpoint NAME (ctl_ckpt.c) */
int ctl_checkpoint(const struct ctl_opts *o, const char *name);
/* drain, followed until lupined exits (ctl_ckpt.c) */
int ctl_drain(const struct ctl_opts *o);
/* migrate NAME --to TARGET (cli/ctl_migrate.c) */
int ctl_migrate(const struct ctl_opts *o, int argc, char **argv);

struct lup_admin_status;
/* STATUS, read: *ret_text (the JSON) and *ret_st, both the caller's to
 * free. 0, or -errno (as ctl_call; -EBADMSG for a reply that does not
 * read, said unless o->quiet). */
int ctl_fetch_status(const struct ctl_opts *o, char **ret_text, struct lup_admin_status **ret_st);

struct json_object;
/* An integer member of a JSON object: its value, or -1 with *ok false
 * (ok may be NULL) when it is absent, null or not an integer. */
long long ctl_json_int(struct json_object *obj, const char *key, bool *ok);

/* "1.25 GiB", "512 MiB", "0 B" */
void ctl_human_bytes(double b, char *out, size_t cap);

#endif
