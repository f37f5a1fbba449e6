/* SPDX-License-Identifier: MIT */
/*
 * What `lupinectl log` prints for one entry, whether it came from the
 * journal or from lupined's --log-file: a line of text, or a JSON object.
 */
#include <string.h>
#include <time.h>
#include <json-c/json.h>

#include "cli/ctl_log.h"

const char *ctl_log_level_word(int level)
{
        static const char *const words[8] = { "emerg", "alert", "crit", "error", "warning", "notice", "info", "debug" };
        return level >= 0 && level < 8 ? words[level] : "-";
}

bool ctl_log_match(const struct ctl_log_args *a, const struct lup_log_line *e)
{
        if (e->level < 0)
                return a->max_level >= 7 && !a->session;
        if (e->level > a->max_level)
                return false;
        return !a->session || strcmp(e->session, a->session) == 0;
}

static void print_json(FILE *out, const struct lup_log_line *e)
{
        struct json_object *o = json_object_new_object();
        char when[40];

        if (e->level >= 0) {
                time_t t = (time_t)(e->usec / 1000000u);
                struct tm tm;
                size_t k = gmtime_r(&t, &tm) ? strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm) : 0;
                snprintf(when + k, sizeof(when) - k, ".%06uZ", (unsigned)(e->usec % 1000000u));
                json_object_object_add(o, "time", json_object_new_string(when));
                json_object_object_add(o, "timestamp_us", json_object_new_int64((int64_t)e->usec));
                json_object_object_add(o, "level", json_object_new_string(ctl_log_level_word(e->level)));
                json_object_object_add(o, "priority", json_object_new_int(e->level));
                if (e->ident[0])
                        json_object_object_add(o, "identifier", json_object_new_string(e->ident));
                if (e->pid > 0)
                        json_object_object_add(o, "pid", json_object_new_int(e->pid));
                if (e->category[0])
                        json_object_object_add(o, "category", json_object_new_string(e->category));
        }
        json_object_object_add(o, "message", json_object_new_string(e->msg));
        if (e->session[0])
                json_object_object_add(o, "session", json_object_new_string(e->session));
        if (e->tenant[0])
                json_object_object_add(o, "tenant", json_object_new_string(e->tenant));
        if (e->op[0])
                json_object_object_add(o, "op", json_object_new_string(e->op));
        if (e->cuda_error >= 0)
                json_object_object_add(o, "cuda_error", json_object_new_int64(e->cuda_error));
        fprintf(out, "%s\n",
                json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
}

void ctl_log_print(FILE *out, const struct ctl_log_args *a, const struct lup_log_line *e)
{
        if (a->json) {
                print_json(out, e);
                return;
        }
        if (e->level < 0) { /* not lupined's format: as it is */
                fprintf(out, "%s\n", e->msg);
                return;
        }
        time_t t = (time_t)(e->usec / 1000000u);
        struct tm tm;
        char when[40] = "-";
        if (localtime_r(&t, &tm)) {
                size_t k = strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
                snprintf(when + k, sizeof(when) - k, ".%03u", (unsigned)(e->usec % 1000000u / 1000u));
        }
        const char *c = !a->color ? "" : e->level <= 3 ? "\033[31m" : e->level == 4 ? "\033[33m" : "";
        fprintf(out, "%s %s%-7s%s %-10s %s", when, c, ctl_log_level_word(e->level), *c ? "\033[0m" : "",
                e->category[0] ? e->category : "-", e->msg);
        /* the fields, two spaces after the message */
        const char *sep = "  ";
        if (e->session[0]) {
                fprintf(out, "%ssession=%s", sep, e->session);
                sep = " ";
        }
        if (e->tenant[0]) {
                fprintf(out, "%stenant=%s", sep, e->tenant);
                sep = " ";
        }
        if (e->op[0]) {
                fprintf(out, "%sop=%s", sep, e->op);
                sep = " ";
        }
        if (e->cuda_error >= 0)
                fprintf(out, "%scuda_error=%ld", sep, e->cuda_error);
        fputc('\n', out);
}
