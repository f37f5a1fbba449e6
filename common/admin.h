/* SPDX-License-Identifier: MIT */
/*
 * ADMIN, one codec for both ends: lupinectl writes the request and reads the
 * reply, the supervisor (daemon/supervisor/admin.c) the other way round.
 * The frames are in abi/lupine/wire.h ("ADMIN"); the STATUS reply's text is
 * a JSON object, written and read here with json-c, so that every string in
 * it is escaped and every one read back is checked.
 *
 * This is its own static library (lupadmin), not part of lupcommon: the shim
 * links lupcommon and has no use for json-c.
 */
#ifndef LUP_ADMIN_H
#define LUP_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lupine/wire.h"

/* The request payload: one u16 (LUP_ADMIN_*), and for the commands that
 * take one, an argument: u16 n, then n bytes of text (no NUL). */
#define LUP_ADMIN_REQUEST_LEN  2u
#define LUP_ADMIN_REQUEST_SIZE (LUP_HDR_SIZE + LUP_ADMIN_REQUEST_LEN)
#define LUP_ADMIN_MAX_ARG      1024u
#define LUP_ADMIN_REQUEST_MAX  (LUP_HDR_SIZE + 4u + LUP_ADMIN_MAX_ARG)
/* Room for lup_admin_request_check's reason. */
#define LUP_ADMIN_WHY_SIZE     96u

/* The whole request frame for `cmd`: a synchronous ADMIN header, seq 0. */
void lup_admin_request_encode(uint8_t out[static LUP_ADMIN_REQUEST_SIZE], uint16_t cmd);
/* The same with an argument of n bytes (n <= LUP_ADMIN_MAX_ARG) into
 * out[LUP_ADMIN_REQUEST_MAX]; the frame's length. */
size_t lup_admin_request_encode_arg(uint8_t out[static LUP_ADMIN_REQUEST_MAX], uint16_t cmd, const char *arg, size_t n);
/* The checks a request's header must pass before a payload byte is read:
 * synchronous, not a reply, LUP_ADMIN_REQUEST_LEN bytes or 4 to 4 +
 * LUP_ADMIN_MAX_ARG. Returns 0, or -EBADMSG with the reason (naming the
 * value found) in why. */
int lup_admin_request_check(const struct lup_hdr *h, char why[static LUP_ADMIN_WHY_SIZE]);
/* The payload: *ret_cmd, or -EBADMSG. The command is not judged here. */
int lup_admin_request_decode(const uint8_t *p, size_t n, uint16_t *ret_cmd);
/* The command and its argument, copied NUL-terminated into arg[cap] ("" when
 * there is none). -EBADMSG for a length that does not match, a NUL inside,
 * or an argument longer than cap - 1. */
int lup_admin_request_decode_arg(const uint8_t *p, size_t n, uint16_t *ret_cmd, char *arg, size_t cap);

/* Bytes of a reply frame carrying n bytes of text. */
#define LUP_ADMIN_REPLY_SIZE(n) (LUP_HDR_SIZE + 2u + (size_t)(n))
/* A reply to `req` (its lane and seq) with `status` and text[0..n) into
 * out[cap]: *ret_len bytes. -EMSGSIZE when n > LUP_ADMIN_MAX_TEXT or the
 * frame does not fit in cap. */
int lup_admin_reply_encode(uint8_t *out, size_t cap, const struct lup_hdr *req, uint32_t status, const char *text,
                           size_t n, size_t *ret_len);
/* Whether a decoded header is an ADMIN reply whose payload can be at most
 * one text: 0 or -EBADMSG. */
int lup_admin_reply_check(const struct lup_hdr *h);
/* A reply's payload: the text (not NUL-terminated; it points into p), or
 * -EBADMSG. */
int lup_admin_reply_decode(const uint8_t *p, size_t n, const char **ret_text, size_t *ret_len);

/* ---- STATUS */

#define LUP_ADMIN_MAX_WORD 32u /* version, backend and state strings, NUL included */

struct lup_admin_session {
        char name[LUP_MAX_NAME + 1];
        int slot;
        char state[LUP_ADMIN_MAX_WORD]; /* docs/protocol.md lists the words */
        int pid;
        /* What its worker last reported (sent only when has_stats) */
        bool has_stats;
        char tenant[LUP_ADMIN_MAX_WORD]; /* "t<16 hex>", "" for the anonymous tenant */
        char client[96];                 /* the client's address, "" while it has none */
        int64_t calls, bytes_in, bytes_out, memory;
        int64_t peer_bytes_in, peer_bytes_out; /* copies between servers, daemon to daemon */
        double calls_per_s, bytes_per_s;       /* over the last report interval (about 1 s) */
        int64_t checkpoint_epoch;              /* 0: never checkpointed */
        int64_t checkpoint_age_s;              /* -1: never */
        char progress[LUP_ADMIN_MAX_WORD];     /* "checkpoint", "restore", or "" for none */
        int64_t progress_done, progress_total; /* bytes */
        bool unresponsive;                     /* its worker misses heartbeats (the health watch) */
        /* Sent (last, as "last_checkpoint_error") once an operator asked
         * for a checkpoint of this session (lupinectl sessions checkpoint):
         * "" while one runs and after one succeeded, else why the last
         * one failed. */
        bool has_ckpt_result;
        char last_checkpoint_error[160];
};

/* A drain's counts (sent as "drain", last, only while draining): the
 * sessions told to drain and the verdicts so far (docs/sessions.md). */
struct lup_admin_drain {
        int sessions, checkpointed, lost, kept, ended, own_error;
};

/* One configured limit (docs/security.md): sent as "limits": {NAME: VALUE}
 * and "limit_hits": {NAME: HITS}, after "count", only when there are any. */
#define LUP_ADMIN_MAX_LIMITS 16u
struct lup_admin_limit {
        char name[LUP_ADMIN_MAX_WORD];
        int64_t value; /* 0: off */
        int64_t hits;  /* times it refused or ended something since the start */
};

/* The GPU health watch (docs/health.md): sent as "health" after the
 * limits. */
struct lup_admin_gpu_health {
        int index;
        char state[LUP_ADMIN_MAX_WORD]; /* ok, failing (not yet --health-retries times), alarm, unwatched */
        char why[160];                  /* the failing check; "" when ok */
        int64_t alarms;                 /* raised since the start */
};

struct lup_admin_health {
        bool present;                    /* the daemon sent "health" */
        char policy[LUP_ADMIN_MAX_WORD]; /* drain, report, off */
        bool admitting;                  /* new sessions are admitted */
        int64_t drained;                 /* sessions the watch drained */
        int n_gpus;
        struct lup_admin_gpu_health gpu[LUP_MAX_DEVICES];
};

struct lup_admin_status {
        char version[LUP_ADMIN_MAX_WORD];
        char backend[LUP_ADMIN_MAX_WORD];
        bool draining, stopping, checkpoints;
        int max_sessions;
        int n; /* sessions; sent as "count" too */
        struct lup_admin_session s[LUP_ARENA_SLOTS];
        int n_limits;
        struct lup_admin_limit limits[LUP_ADMIN_MAX_LIMITS];
        struct lup_admin_health health;
        bool has_drain; /* "drain" is sent (draining) */
        struct lup_admin_drain drain;
};

/* The STATUS JSON object for st, into a malloc'd NUL-terminated
 * *ret_text of *ret_len bytes (the caller frees it). Returns 0, -EINVAL
 * (st->n out of range) or -ENOMEM. */
int lup_admin_status_encode(const struct lup_admin_status *st, char **ret_text, size_t *ret_len);
/* One session's JSON object, as STATUS has it (lupinectl sessions show). */
int lup_admin_session_encode(const struct lup_admin_session *se, char **ret_text, size_t *ret_len);
/* Reads a STATUS reply of n bytes into *ret (zeroed first). Keys it does
 * not know are skipped and missing ones stay zero, so a daemon of another
 * version still reads. Anything but one JSON object (whitespace aside), a
 * known key of the wrong type, a string that does not fit its field or
 * holds a NUL, or more than LUP_ARENA_SLOTS sessions is -EBADMSG, with a
 * static reason in *ret_why. */
int lup_admin_status_decode(const char *text, size_t n, struct lup_admin_status *ret, const char **ret_why);

/* ---- INFO */
struct json_object;
struct lup_nvml_snapshot;
/* INFO's reply object from an NVML snapshot: version (lupined's, or null
 * when NULL), backend, driver_version, nvml_version, cuda_version, then
 * "gpus": one object per device (docs/protocol.md). NULL when out of
 * memory; the caller puts it. */
struct json_object *lup_admin_info_json(struct lup_nvml_snapshot *snap, const char *version);

#endif
