/* SPDX-License-Identifier: MIT */
/* STATUS's "health" object (admin.h: struct lup_admin_health), for admin.c. */
#ifndef LUP_ADMIN_HEALTH_H
#define LUP_ADMIN_HEALTH_H

#include <json-c/json.h>

#include "admin.h"

/* Adds "health" to top when h->present: 0 or -ENOMEM. */
int lup_admin_health_encode(struct json_object *top, const struct lup_admin_health *h);
/* Reads "health" from top into *h (left zeroed when absent): 0, or
 * -EBADMSG with a static reason. */
int lup_admin_health_decode(struct json_object *top, struct lup_admin_health *h, const char **ret_why);

#endif
