/* SPDX-License-Identifier: MIT */
/*
 * STATUS's "health" object: the GPU health watch of docs/health.md.
 *
 *   "health": {"policy": "drain", "admitting": true, "drained": 0,
 *              "gpus": [{"index": 0, "state": "ok", "why": "", "alarms": 0}]}
 */
#include <errno.h>
#include <string.h>

#include "admin_health.h"

static int gpu_encode(struct json_object *arr, const struct lup_admin_gpu_health *g)
{
        struct json_object *o = json_object_new_object();
        int r;

        if (!o)
                return -ENOMEM;
        if ((r = lup_admin_json_add(o, "index", json_object_new_int(g->index))) < 0 ||
            (r = lup_admin_json_add(o, "state", json_object_new_string(g->state))) < 0 ||
            (r = lup_admin_json_add(o, "why", json_object_new_string(g->why))) < 0 ||
            (r = lup_admin_json_add(o, "alarms", json_object_new_int64(g->alarms))) < 0 ||
            json_object_array_add(arr, o) < 0) {
                json_object_put(o);
                return r < 0 ? r : -ENOMEM;
        }
        return 0;
}

int lup_admin_health_encode(struct json_object *top, const struct lup_admin_health *h)
{
        struct json_object *o, *arr;
        int r;

        if (!h->present)
                return 0;
        if ((r = lup_admin_json_add(top, "health", json_object_new_object())) < 0)
                return r;
        o = json_object_object_get(top, "health");
        if ((r = lup_admin_json_add(o, "policy", json_object_new_string(h->policy))) < 0 ||
            (r = lup_admin_json_add(o, "admitting", json_object_new_boolean(h->admitting))) < 0 ||
            (r = lup_admin_json_add(o, "drained", json_object_new_int64(h->drained))) < 0 ||
            (r = lup_admin_json_add(o, "gpus", json_object_new_array())) < 0)
                return r;
        arr = json_object_object_get(o, "gpus");
        for (int i = 0; i < h->n_gpus && i < (int)LUP_MAX_DEVICES; i++)
                if ((r = gpu_encode(arr, &h->gpu[i])) < 0)
                        return r;
        return 0;
}

int lup_admin_health_decode(struct json_object *top, struct lup_admin_health *h, const char **ret_why)
{
        struct json_object *o, *v, *arr;

        memset(h, 0, sizeof(*h));
        if (!json_object_object_get_ex(top, "health", &o))
                return 0;
        *ret_why = "a health field of the wrong type or size";
        if (!json_object_is_type(o, json_type_object) ||
            lup_admin_json_str(o, "policy", h->policy, sizeof(h->policy)) < 0 ||
            lup_admin_json_i64(o, "drained", &h->drained) < 0)
                return -EBADMSG;
        h->present = true;
        if (json_object_object_get_ex(o, "admitting", &v)) {
                if (!json_object_is_type(v, json_type_boolean))
                        return -EBADMSG;
                h->admitting = json_object_get_boolean(v);
        }
        if (!json_object_object_get_ex(o, "gpus", &arr))
                return 0;
        if (!json_object_is_type(arr, json_type_array) || json_object_array_length(arr) > LUP_MAX_DEVICES)
                return -EBADMSG;
        for (size_t i = 0; i < json_object_array_length(arr); i++) {
                struct json_object *g = json_object_array_get_idx(arr, i);
                struct lup_admin_gpu_health *out = &h->gpu[h->n_gpus];
                int64_t index = (int64_t)i;
                if (!json_object_is_type(g, json_type_object) || lup_admin_json_i64(g, "index", &index) < 0 ||
                    lup_admin_json_str(g, "state", out->state, sizeof(out->state)) < 0 ||
                    lup_admin_json_str(g, "why", out->why, sizeof(out->why)) < 0 ||
                    lup_admin_json_i64(g, "alarms", &out->alarms) < 0 || index < 0 || index >= (int64_t)LUP_MAX_DEVICES)
                        return -EBADMSG;
                out->index = (int)index;
                h->n_gpus++;
        }
        return 0;
}
