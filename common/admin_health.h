/* SPDX-License-Identifier: MIT */
/* STATUS's "health" object (admin.h: struct lup_admin_health), for admin.c. */
#ifndef LUP_ADMIN_HEALTH_H
#define LUP_ADMIN_HEALTH_H

#include <json-c/json.h>

#include "admin.h"

/* admin.c's JSON helpers, shared with admin_health.c. Adds v under key
 * (v NULL, or a failure: -ENOMEM, v released). */
int lup_admin_json_add(struct json_object *obj, const char *key, struct json_object *v);
/* A string (into out[cap]) or integer member: absent leaves *out; the
 * wrong type, a string too long or holding a NUL is -EBADMSG. */
int lup_admin_json_str(struct json_object *obj, const char *key, char *out, size_t cap);
int lup_admin_json_i64(struct json_object *obj, const char *key, int64_t *out);

/* Adds "health" to top when h->present: 0 or -ENOMEM. */
int lup_admin_health_encode(struct json_object *top, const struct lup_admin_health *h);
/* Reads "health" from top into *h (left zeroed when absent): 0, or
 * -EBADMSG with a static reason. */
int lup_admin_health_decode(struct json_object *top, struct lup_admin_health *h, const char **ret_why);

#endif
