/* SPDX-License-Identifier: MIT */
/*
 * ADMIN frames and the STATUS JSON (admin.h). json-c builds and parses the
 * JSON; nothing here logs, the callers say what went wrong.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>

#include "admin.h"
#include "admin_health.h"
#include "buf.h"
#include "frame.h"

/* Deeper than a STATUS reply ever is (object, sessions array, session), so
 * that a newer daemon may nest a little; a bound on the parser's stack. */
#define STATUS_MAX_DEPTH 8

void lup_admin_request_encode(uint8_t out[static LUP_ADMIN_REQUEST_SIZE], uint16_t cmd)
{
        struct lup_hdr h = { .op = LUP_OP_ADMIN, .flags = LUP_F_SYNC, .len = LUP_ADMIN_REQUEST_LEN };

        lup_hdr_encode(out, &h);
        lup_put16(out + LUP_HDR_SIZE, cmd);
}

int lup_admin_request_check(const struct lup_hdr *h, char why[static LUP_ADMIN_WHY_SIZE])
{
        if ((h->flags & LUP_F_SYNC) == 0 || (h->flags & (LUP_F_REPLY | LUP_F_MORE)) != 0) {
                snprintf(why, LUP_ADMIN_WHY_SIZE, "ADMIN must be a synchronous request (flags 0x%x)",
                         (unsigned)h->flags);
                return -EBADMSG;
        }
        if (h->len != LUP_ADMIN_REQUEST_LEN && (h->len < 4 || h->len > 4 + LUP_ADMIN_MAX_ARG)) {
                snprintf(why, LUP_ADMIN_WHY_SIZE, "ADMIN payload must be %u bytes, or 4 to %u, not %u",
                         LUP_ADMIN_REQUEST_LEN, 4 + LUP_ADMIN_MAX_ARG, (unsigned)h->len);
                return -EBADMSG;
        }
        return 0;
}

size_t lup_admin_request_encode_arg(uint8_t out[static LUP_ADMIN_REQUEST_MAX], uint16_t cmd, const char *arg, size_t n)
{
        if (n > LUP_ADMIN_MAX_ARG)
                n = LUP_ADMIN_MAX_ARG;
        struct lup_hdr h = { .op = LUP_OP_ADMIN, .flags = LUP_F_SYNC, .len = (uint32_t)(4 + n) };

        lup_hdr_encode(out, &h);
        lup_put16(out + LUP_HDR_SIZE, cmd);
        lup_put16(out + LUP_HDR_SIZE + 2, (uint16_t)n);
        memcpy(out + LUP_HDR_SIZE + 4, arg, n);
        return LUP_HDR_SIZE + 4 + n;
}

int lup_admin_request_decode_arg(const uint8_t *p, size_t n, uint16_t *ret_cmd, char *arg, size_t cap)
{
        struct lup_rd rd = lup_rd_init(p, n);
        uint16_t cmd, len = 0;

        lup_rd_u16(&rd, &cmd);
        if (n > 2)
                lup_rd_u16(&rd, &len);
        if (rd.err || (n > 2 && (size_t)len != n - 4) || (size_t)len >= cap || memchr(p + 4, 0, len))
                return -EBADMSG;
        memcpy(arg, p + 4, len);
        arg[len] = 0;
        *ret_cmd = cmd;
        return 0;
}

int lup_admin_request_decode(const uint8_t *p, size_t n, uint16_t *ret_cmd)
{
        struct lup_rd rd = lup_rd_init(p, n);
        uint16_t cmd;

        lup_rd_u16(&rd, &cmd);
        if (lup_rd_finish(&rd) < 0)
                return -EBADMSG;
        *ret_cmd = cmd;
        return 0;
}

int lup_admin_reply_encode(uint8_t *out, size_t cap, const struct lup_hdr *req, uint32_t status, const char *text,
                           size_t n, size_t *ret_len)
{
        struct lup_hdr h = {
                .op = LUP_OP_ADMIN,
                .flags = LUP_F_REPLY,
                .lane = req->lane,
                .status = status,
                .seq = req->seq,
        };
        struct lup_wr w;

        if (n > LUP_ADMIN_MAX_TEXT || cap < LUP_ADMIN_REPLY_SIZE(n))
                return -EMSGSIZE;
        w = lup_wr_init(out + LUP_HDR_SIZE, cap - LUP_HDR_SIZE);
        lup_wr_str16(&w, text, n);
        if (w.err)
                return w.err;
        h.len = (uint32_t)w.len;
        lup_hdr_encode(out, &h);
        *ret_len = LUP_HDR_SIZE + w.len;
        return 0;
}

int lup_admin_reply_check(const struct lup_hdr *h)
{
        if (h->op != LUP_OP_ADMIN || (h->flags & LUP_F_REPLY) == 0 || h->len > 2 + LUP_ADMIN_MAX_TEXT)
                return -EBADMSG;
        return 0;
}

int lup_admin_reply_decode(const uint8_t *p, size_t n, const char **ret_text, size_t *ret_len)
{
        struct lup_rd rd = lup_rd_init(p, n);
        const char *text;
        size_t len;

        lup_rd_str16(&rd, LUP_ADMIN_MAX_TEXT, &text, &len);
        if (lup_rd_finish(&rd) < 0)
                return -EBADMSG;
        *ret_text = text;
        *ret_len = len;
        return 0;
}

/* ---- STATUS: encoding */

/* Adds v under key; v == NULL (an allocation that failed) is -ENOMEM. On
 * failure v is released: the caller has nothing left to free but obj. */
int lup_admin_json_add(struct json_object *obj, const char *key, struct json_object *v)
{
        if (!v)
                return -ENOMEM;
        if (json_object_object_add(obj, key, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

/* What a session's worker reported: after the four keys of old. */
static int stats_encode(struct json_object *o, const struct lup_admin_session *se)
{
        struct json_object *p;
        int r;

        if ((r = lup_admin_json_add(o, "tenant", json_object_new_string(se->tenant))) < 0 ||
            (r = lup_admin_json_add(o, "client", json_object_new_string(se->client))) < 0 ||
            (r = lup_admin_json_add(o, "calls", json_object_new_int64(se->calls))) < 0 ||
            (r = lup_admin_json_add(o, "calls_per_s", json_object_new_double(se->calls_per_s))) < 0 ||
            (r = lup_admin_json_add(o, "bytes_in", json_object_new_int64(se->bytes_in))) < 0 ||
            (r = lup_admin_json_add(o, "bytes_out", json_object_new_int64(se->bytes_out))) < 0 ||
            (r = lup_admin_json_add(o, "bytes_per_s", json_object_new_double(se->bytes_per_s))) < 0 ||
            (r = lup_admin_json_add(o, "memory", json_object_new_int64(se->memory))) < 0 ||
            (r = lup_admin_json_add(o, "checkpoint_epoch", json_object_new_int64(se->checkpoint_epoch))) < 0 ||
            (r = lup_admin_json_add(o, "checkpoint_age_s", json_object_new_int64(se->checkpoint_age_s))) < 0)
                return r;
        /* after the keys of old, and only for a session that made copies between servers */
        if ((se->peer_bytes_in || se->peer_bytes_out) &&
            ((r = lup_admin_json_add(o, "peer_bytes_in", json_object_new_int64(se->peer_bytes_in))) < 0 ||
             (r = lup_admin_json_add(o, "peer_bytes_out", json_object_new_int64(se->peer_bytes_out))) < 0))
                return r;
        if (!se->progress[0])
                return 0;
        if ((r = lup_admin_json_add(o, "progress", json_object_new_object())) < 0)
                return r;
        p = json_object_object_get(o, "progress");
        if ((r = lup_admin_json_add(p, "phase", json_object_new_string(se->progress))) < 0 ||
            (r = lup_admin_json_add(p, "done", json_object_new_int64(se->progress_done))) < 0 ||
            (r = lup_admin_json_add(p, "total", json_object_new_int64(se->progress_total))) < 0)
                return r;
        return 0;
}

static int session_encode(struct json_object *arr, const struct lup_admin_session *se)
{
        struct json_object *o = json_object_new_object();
        int r;

        if (!o)
                return -ENOMEM;
        if ((r = lup_admin_json_add(o, "name", json_object_new_string(se->name))) < 0 ||
            (r = lup_admin_json_add(o, "slot", json_object_new_int(se->slot))) < 0 ||
            (r = lup_admin_json_add(o, "state", json_object_new_string(se->state))) < 0 ||
            (r = lup_admin_json_add(o, "pid", json_object_new_int(se->pid))) < 0)
                goto out_put;
        if (se->has_stats && (r = stats_encode(o, se)) < 0)
                goto out_put;
        /* only when true: the keys lupined has always sent stay as they were */
        if (se->unresponsive && (r = lup_admin_json_add(o, "unresponsive", json_object_new_boolean(true))) < 0)
                goto out_put;
        if (se->has_ckpt_result &&
            (r = lup_admin_json_add(o, "last_checkpoint_error", json_object_new_string(se->last_checkpoint_error))) < 0)
                goto out_put;
        if (json_object_array_add(arr, o) < 0) {
                r = -ENOMEM;
                goto out_put;
        }
        return 0;
out_put:
        json_object_put(o);
        return r;
}

/* "limits" and "limit_hits", when st has any. */
static int limits_encode(struct json_object *top, const struct lup_admin_status *st)
{
        struct json_object *lim, *hits;
        int r;

        if (st->n_limits <= 0)
                return 0;
        if ((r = lup_admin_json_add(top, "limits", json_object_new_object())) < 0 ||
            (r = lup_admin_json_add(top, "limit_hits", json_object_new_object())) < 0)
                return r;
        lim = json_object_object_get(top, "limits");
        hits = json_object_object_get(top, "limit_hits");
        for (int i = 0; i < st->n_limits && i < (int)LUP_ADMIN_MAX_LIMITS; i++) {
                const struct lup_admin_limit *l = &st->limits[i];
                if ((r = lup_admin_json_add(lim, l->name, json_object_new_int64(l->value))) < 0 ||
                    (r = lup_admin_json_add(hits, l->name, json_object_new_int64(l->hits))) < 0)
                        return r;
        }
        return 0;
}

/* "drain", while draining. */
static int drain_encode(struct json_object *top, const struct lup_admin_status *st)
{
        const struct lup_admin_drain *d = &st->drain;
        struct json_object *o;
        int r;

        if (!st->has_drain)
                return 0;
        if ((r = lup_admin_json_add(top, "drain", json_object_new_object())) < 0)
                return r;
        o = json_object_object_get(top, "drain");
        if ((r = lup_admin_json_add(o, "sessions", json_object_new_int(d->sessions))) < 0 ||
            (r = lup_admin_json_add(o, "checkpointed", json_object_new_int(d->checkpointed))) < 0 ||
            (r = lup_admin_json_add(o, "lost", json_object_new_int(d->lost))) < 0 ||
            (r = lup_admin_json_add(o, "kept", json_object_new_int(d->kept))) < 0 ||
            (r = lup_admin_json_add(o, "ended", json_object_new_int(d->ended))) < 0 ||
            (r = lup_admin_json_add(o, "own_error", json_object_new_int(d->own_error))) < 0)
                return r;
        return 0;
}

int lup_admin_status_encode(const struct lup_admin_status *st, char **ret_text, size_t *ret_len)
{
        struct json_object *top, *arr;
        const char *s;
        size_t len;
        char *out;
        int r;

        if (st->n < 0 || st->n > (int)LUP_ARENA_SLOTS)
                return -EINVAL;
        top = json_object_new_object();
        if (!top)
                return -ENOMEM;
        /* The keys in the order lupined has always sent them. */
        if ((r = lup_admin_json_add(top, "version", json_object_new_string(st->version))) < 0 ||
            (r = lup_admin_json_add(top, "backend", json_object_new_string(st->backend))) < 0 ||
            (r = lup_admin_json_add(top, "draining", json_object_new_boolean(st->draining))) < 0 ||
            (r = lup_admin_json_add(top, "stopping", json_object_new_boolean(st->stopping))) < 0 ||
            (r = lup_admin_json_add(top, "checkpoints", json_object_new_boolean(st->checkpoints))) < 0 ||
            (r = lup_admin_json_add(top, "max_sessions", json_object_new_int(st->max_sessions))) < 0 ||
            (r = lup_admin_json_add(top, "sessions", json_object_new_array())) < 0)
                goto out_put;
        arr = json_object_object_get(top, "sessions");
        for (int i = 0; i < st->n; i++)
                if ((r = session_encode(arr, &st->s[i])) < 0)
                        goto out_put;
        if ((r = lup_admin_json_add(top, "count", json_object_new_int(st->n))) < 0)
                goto out_put;
        if ((r = limits_encode(top, st)) < 0 || (r = lup_admin_health_encode(top, &st->health)) < 0)
                goto out_put;
        if ((r = drain_encode(top, st)) < 0)
                goto out_put;
        /* No "\/": nothing reads the text as HTML. */
        s = json_object_to_json_string_length(top, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
        out = s ? strndup(s, len) : NULL;
        if (!out) {
                r = -ENOMEM;
                goto out_put;
        }
        json_object_put(top);
        *ret_text = out;
        *ret_len = len;
        return 0;
out_put:
        json_object_put(top);
        return r;
}

int lup_admin_session_encode(const struct lup_admin_session *se, char **ret_text, size_t *ret_len)
{
        struct json_object *arr = json_object_new_array();
        const char *s;
        size_t len;
        int r;

        if (!arr)
                return -ENOMEM;
        r = session_encode(arr, se);
        s = r == 0 ? json_object_to_json_string_length(json_object_array_get_idx(arr, 0),
                                                       JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len)
                   : NULL;
        *ret_text = s ? strndup(s, len) : NULL;
        *ret_len = len;
        json_object_put(arr);
        return *ret_text ? 0 : -ENOMEM;
}

/* ---- STATUS: decoding */

/* The value under key if there is one; -EBADMSG if it is not of `type`. */
static int get_typed(struct json_object *obj, const char *key, enum json_type type, struct json_object **ret)
{
        struct json_object *v;

        *ret = NULL;
        if (!json_object_object_get_ex(obj, key, &v))
                return 0;
        if (!json_object_is_type(v, type))
                return -EBADMSG;
        *ret = v;
        return 0;
}

int lup_admin_json_str(struct json_object *obj, const char *key, char *out, size_t cap)
{
        struct json_object *v;
        size_t len;

        if (get_typed(obj, key, json_type_string, &v) < 0)
                return -EBADMSG;
        if (!v)
                return 0;
        len = (size_t)json_object_get_string_len(v);
        if (len >= cap || memchr(json_object_get_string(v), 0, len))
                return -EBADMSG;
        memcpy(out, json_object_get_string(v), len);
        out[len] = 0;
        return 0;
}

static int get_int(struct json_object *obj, const char *key, int *out)
{
        struct json_object *v;
        int64_t x;

        if (get_typed(obj, key, json_type_int, &v) < 0)
                return -EBADMSG;
        if (!v)
                return 0;
        x = json_object_get_int64(v); /* clamped to the int64 range */
        if (x < INT_MIN || x > INT_MAX)
                return -EBADMSG;
        *out = (int)x;
        return 0;
}

int lup_admin_json_i64(struct json_object *obj, const char *key, int64_t *out)
{
        struct json_object *v;

        if (get_typed(obj, key, json_type_int, &v) < 0)
                return -EBADMSG;
        if (v)
                *out = json_object_get_int64(v);
        return 0;
}

/* A number: json-c reads 3.0 as a double and 3 as an int; both are fine. */
static int get_double(struct json_object *obj, const char *key, double *out)
{
        struct json_object *v;

        if (!json_object_object_get_ex(obj, key, &v))
                return 0;
        if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
                return -EBADMSG;
        *out = json_object_get_double(v);
        return 0;
}

/* A session's reported numbers, when it has them ("calls" says so). */
static int stats_read(struct json_object *o, struct lup_admin_session *se)
{
        struct json_object *p;

        if (!json_object_object_get_ex(o, "calls", NULL))
                return 0;
        se->has_stats = true;
        se->checkpoint_age_s = -1;
        if (lup_admin_json_str(o, "tenant", se->tenant, sizeof(se->tenant)) < 0 ||
            lup_admin_json_str(o, "client", se->client, sizeof(se->client)) < 0 ||
            lup_admin_json_i64(o, "calls", &se->calls) < 0 || get_double(o, "calls_per_s", &se->calls_per_s) < 0 ||
            lup_admin_json_i64(o, "bytes_in", &se->bytes_in) < 0 ||
            lup_admin_json_i64(o, "bytes_out", &se->bytes_out) < 0 ||
            lup_admin_json_i64(o, "peer_bytes_in", &se->peer_bytes_in) < 0 ||
            lup_admin_json_i64(o, "peer_bytes_out", &se->peer_bytes_out) < 0 ||
            get_double(o, "bytes_per_s", &se->bytes_per_s) < 0 || lup_admin_json_i64(o, "memory", &se->memory) < 0 ||
            lup_admin_json_i64(o, "checkpoint_epoch", &se->checkpoint_epoch) < 0 ||
            lup_admin_json_i64(o, "checkpoint_age_s", &se->checkpoint_age_s) < 0 ||
            get_typed(o, "progress", json_type_object, &p) < 0)
                return -EBADMSG;
        if (p && (lup_admin_json_str(p, "phase", se->progress, sizeof(se->progress)) < 0 ||
                  lup_admin_json_i64(p, "done", &se->progress_done) < 0 ||
                  lup_admin_json_i64(p, "total", &se->progress_total) < 0))
                return -EBADMSG;
        return 0;
}

/* "last_checkpoint_error", when there is one. */
static int ckpt_result_read(struct json_object *o, struct lup_admin_session *se)
{
        if (!json_object_object_get_ex(o, "last_checkpoint_error", NULL))
                return 0;
        se->has_ckpt_result = true;
        return lup_admin_json_str(o, "last_checkpoint_error", se->last_checkpoint_error,
                                  sizeof(se->last_checkpoint_error));
}

static int get_bool(struct json_object *obj, const char *key, bool *out)
{
        struct json_object *v;

        if (get_typed(obj, key, json_type_boolean, &v) < 0)
                return -EBADMSG;
        if (v)
                *out = json_object_get_boolean(v);
        return 0;
}

/* "limits" (and the hits under the same names in "limit_hits"). */
static int limits_read(struct json_object *top, struct lup_admin_status *st, const char **ret_why)
{
        struct json_object *lim, *hits, *h;

        if (get_typed(top, "limits", json_type_object, &lim) < 0 ||
            get_typed(top, "limit_hits", json_type_object, &hits) < 0) {
                *ret_why = "limits of the wrong type";
                return -EBADMSG;
        }
        if (!lim)
                return 0;
        json_object_object_foreach(lim, key, val)
        {
                struct lup_admin_limit *l = &st->limits[st->n_limits];

                if (st->n_limits >= (int)LUP_ADMIN_MAX_LIMITS || strlen(key) >= sizeof(l->name) ||
                    !json_object_is_type(val, json_type_int)) {
                        *ret_why = "a limit of the wrong type or size, or too many";
                        return -EBADMSG;
                }
                memcpy(l->name, key, strlen(key) + 1);
                l->value = json_object_get_int64(val);
                if (hits && json_object_object_get_ex(hits, key, &h) && json_object_is_type(h, json_type_int))
                        l->hits = json_object_get_int64(h);
                st->n_limits++;
        }
        return 0;
}

/* "drain", when the daemon drains. */
static int drain_read(struct json_object *top, struct lup_admin_status *st)
{
        struct lup_admin_drain *d = &st->drain;
        struct json_object *o;

        if (get_typed(top, "drain", json_type_object, &o) < 0)
                return -EBADMSG;
        if (!o)
                return 0;
        st->has_drain = true;
        if (get_int(o, "sessions", &d->sessions) < 0 || get_int(o, "checkpointed", &d->checkpointed) < 0 ||
            get_int(o, "lost", &d->lost) < 0 || get_int(o, "kept", &d->kept) < 0 ||
            get_int(o, "ended", &d->ended) < 0 || get_int(o, "own_error", &d->own_error) < 0)
                return -EBADMSG;
        return 0;
}

static int status_read(struct json_object *top, struct lup_admin_status *st, const char **ret_why)
{
        struct json_object *arr;
        int count = 0;

        if (!json_object_is_type(top, json_type_object)) {
                *ret_why = "not a JSON object";
                return -EBADMSG;
        }
        if (lup_admin_json_str(top, "version", st->version, sizeof(st->version)) < 0 ||
            lup_admin_json_str(top, "backend", st->backend, sizeof(st->backend)) < 0 ||
            get_bool(top, "draining", &st->draining) < 0 || get_bool(top, "stopping", &st->stopping) < 0 ||
            get_bool(top, "checkpoints", &st->checkpoints) < 0 || get_int(top, "max_sessions", &st->max_sessions) < 0 ||
            get_int(top, "count", &count) < 0 || get_typed(top, "sessions", json_type_array, &arr) < 0) {
                *ret_why = "a daemon field of the wrong type or size";
                return -EBADMSG;
        }
        if (limits_read(top, st, ret_why) < 0 || lup_admin_health_decode(top, &st->health, ret_why) < 0)
                return -EBADMSG;
        if (drain_read(top, st) < 0) {
                *ret_why = "a drain count of the wrong type or size";
                return -EBADMSG;
        }
        if (!arr)
                return 0;
        if (json_object_array_length(arr) > LUP_ARENA_SLOTS) {
                *ret_why = "more sessions than arena slots";
                return -EBADMSG;
        }
        for (size_t i = 0; i < json_object_array_length(arr); i++) {
                struct json_object *o = json_object_array_get_idx(arr, i);
                struct lup_admin_session *se = &st->s[st->n];

                if (!json_object_is_type(o, json_type_object) ||
                    lup_admin_json_str(o, "name", se->name, sizeof(se->name)) < 0 ||
                    get_int(o, "slot", &se->slot) < 0 ||
                    lup_admin_json_str(o, "state", se->state, sizeof(se->state)) < 0 ||
                    get_int(o, "pid", &se->pid) < 0 || stats_read(o, se) < 0 || ckpt_result_read(o, se) < 0 ||
                    get_bool(o, "unresponsive", &se->unresponsive) < 0) {
                        *ret_why = "a session field of the wrong type or size";
                        return -EBADMSG;
                }
                st->n++;
        }
        return 0;
}

int lup_admin_status_decode(const char *text, size_t n, struct lup_admin_status *ret, const char **ret_why)
{
        struct lup_admin_status *st = NULL;
        struct json_tokener *tok;
        struct json_object *top = NULL;
        size_t end;
        int r = -EBADMSG;

        if (n > LUP_ADMIN_MAX_TEXT) {
                *ret_why = "longer than an ADMIN reply can be";
                return -EBADMSG;
        }
        tok = json_tokener_new_ex(STATUS_MAX_DEPTH);
        st = calloc(1, sizeof(*st));
        if (!tok || !st) {
                *ret_why = "out of memory";
                r = -ENOMEM;
                goto out_free;
        }
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        top = json_tokener_parse_ex(tok, text, (int)n);
        if (!top || json_tokener_get_error(tok) != json_tokener_success) {
                *ret_why = "not valid JSON";
                goto out_free;
        }
        for (end = json_tokener_get_parse_end(tok); end < n; end++)
                if (!strchr(" \t\r\n", text[end]) || !text[end]) {
                        *ret_why = "trailing bytes after the JSON object";
                        goto out_free;
                }
        r = status_read(top, st, ret_why);
        if (r == 0)
                *ret = *st;
out_free:
        json_object_put(top);
        if (tok)
                json_tokener_free(tok);
        free(st);
        return r;
}
