/* SPDX-License-Identifier: MIT */
/*
 * lupinectl info (the host's GPUs, from lupined's NVML snapshot; with
 * --server, a remote lupined's, fetched as a client does) and config
 * (show, set KEY VALUE: what lupined can change while it runs).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>

#include "admin.h"
#include "cli/lupinectl.h"
#include "lupine/wire.h"
#include "nvml_fetch.h"

#define REMOTE_TIMEOUT_MS 10000 /* connect, TLS handshake, each read and write */

static struct json_object *parse(const char *text, const char *what)
{
        struct json_object *top = json_tokener_parse(text);
        if (!top || !json_object_is_type(top, json_type_object)) {
                fprintf(stderr, "lupinectl: cannot read lupined's %s reply (try --json)\n", what);
                json_object_put(top);
                return NULL;
        }
        return top;
}

/* A key of obj as text: "-" when absent or null. */
static const char *str(struct json_object *obj, const char *key)
{
        struct json_object *v;
        if (!json_object_object_get_ex(obj, key, &v) || !v)
                return "-";
        return json_object_get_string(v);
}

long long ctl_json_int(struct json_object *obj, const char *key, bool *ok)
{
        struct json_object *v;
        bool have = json_object_object_get_ex(obj, key, &v) && v && json_object_is_type(v, json_type_int);
        if (ok)
                *ok = have;
        return have ? (long long)json_object_get_int64(v) : -1;
}

static const char *mode(struct json_object *g, const char *key)
{
        bool ok;
        long long v = ctl_json_int(g, key, &ok);
        return !ok ? "n/a" : v ? "on" : "off";
}

static void print_gpu(struct json_object *g)
{
        char total[32], used[32];
        bool ok_t, ok_u, ok;
        long long t = ctl_json_int(g, "memory_total", &ok_t), u = ctl_json_int(g, "memory_used", &ok_u);

        ctl_human_bytes((double)t, total, sizeof(total));
        ctl_human_bytes((double)u, used, sizeof(used));
        printf("GPU %s: %s\n", str(g, "index"), str(g, "name"));
        printf("  uuid          %s\n  pci           %s\n", str(g, "uuid"), str(g, "pci_bus_id"));
        printf("  memory        %s used of %s\n", ok_u ? used : "-", ok_t ? total : "-");
        long long ma = ctl_json_int(g, "compute_capability_major", &ok);
        if (ok) {
                bool ok2;
                long long mi = ctl_json_int(g, "compute_capability_minor", &ok2);
                printf("  compute       %lld.%lld\n", ma, mi);
        }
        printf("  clocks        SM %s MHz (max %s), memory %s MHz (max %s)\n", str(g, "clock_sm_mhz"),
               str(g, "max_clock_sm_mhz"), str(g, "clock_mem_mhz"), str(g, "max_clock_mem_mhz"));
        long long p = ctl_json_int(g, "power_mw", &ok), pl;
        bool okl;
        pl = ctl_json_int(g, "power_limit_mw", &okl);
        if (ok && okl)
                printf("  power         %.1f W of %.1f W\n", (double)p / 1000.0, (double)pl / 1000.0);
        printf("  temperature   %s C (slowdown at %s C)\n", str(g, "temperature_c"), str(g, "temperature_slowdown_c"));
        printf("  utilization   %s %%\n", str(g, "utilization_gpu"));
        printf("  ECC           %s (uncorrected, volatile: %s)\n", mode(g, "ecc_mode"),
               str(g, "ecc_uncorrected_volatile"));
        printf("  MIG           %s\n  persistence   %s\n", mode(g, "mig_mode"), mode(g, "persistence_mode"));
}

/* --server: the snapshot a client gets (the NVML connection kind, with
 * the client's TLS settings and token: docs/running.md), as INFO's JSON
 * text with "server" added. 0, or -1 after saying why. */
static int remote_info(const struct ctl_opts *o, char **ret_text)
{
        struct lup_nvml_snapshot *snap = malloc(sizeof(*snap));
        struct lupt_config tcfg = { 0 };
        struct json_object *top = NULL;
        char why[600];
        int r = -1;

        if (!snap) {
                fprintf(stderr, "lupinectl: out of memory\n");
                return -1;
        }
        if (lupt_config_load(&tcfg, o->server, LUPT_CFG_TOKEN, why, sizeof(why)) < 0) {
                fprintf(stderr, "lupinectl: %s\n", why);
                goto out;
        }
        if (o->verbose)
                fprintf(stderr, "lupinectl: NVML snapshot from %s%s\n", o->server,
                        tcfg.token_len ? ", with a token" : "");
        r = lup_nvml_fetch(&tcfg, o->server, REMOTE_TIMEOUT_MS, snap, why, sizeof(why));
        if (r < 0) {
                fprintf(stderr, "lupinectl: cannot get the GPUs of %s: %s\n", o->server, why[0] ? why : strerror(-r));
                r = -1;
                goto out;
        }
        top = lup_admin_info_json(snap, NULL);
        if (top)
                json_object_object_add(top, "server", json_object_new_string(o->server));
        *ret_text = top ? strdup(json_object_to_json_string_ext(top, JSON_C_TO_STRING_PLAIN |
                                                                             JSON_C_TO_STRING_NOSLASHESCAPE))
                        : NULL;
        r = *ret_text ? 0 : -1;
        if (r < 0)
                fprintf(stderr, "lupinectl: out of memory\n");
out:
        json_object_put(top);
        lupt_config_free(&tcfg);
        free(snap);
        return r;
}

int ctl_info(const struct ctl_opts *o)
{
        struct json_object *top, *gpus;
        char *text;
        int shown = 0;

        if (o->server ? remote_info(o, &text) < 0
                      : ctl_call_ok(o, LUP_ADMIN_INFO, NULL, "describe its GPUs", &text) < 0)
                return 1;
        if (o->json && o->device < 0) {
                printf("%s\n", text);
                free(text);
                return 0;
        }
        top = parse(text, "INFO");
        free(text);
        if (!top)
                return 1;
        if (!o->json && o->server)
                printf("lupined at %s, backend %s; driver %s, NVML %s, CUDA %s\n", o->server, str(top, "backend"),
                       str(top, "driver_version"), str(top, "nvml_version"), str(top, "cuda_version"));
        else if (!o->json)
                printf("lupined %s, backend %s; driver %s, NVML %s, CUDA %s\n", str(top, "version"),
                       str(top, "backend"), str(top, "driver_version"), str(top, "nvml_version"),
                       str(top, "cuda_version"));
        if (json_object_object_get_ex(top, "gpus", &gpus) && json_object_is_type(gpus, json_type_array)) {
                for (size_t i = 0; i < json_object_array_length(gpus); i++) {
                        struct json_object *g = json_object_array_get_idx(gpus, i);
                        if (o->device >= 0 && (size_t)o->device != i)
                                continue;
                        if (o->json)
                                printf("%s\n", json_object_to_json_string_ext(g, JSON_C_TO_STRING_PLAIN));
                        else
                                print_gpu(g);
                        shown++;
                }
        }
        json_object_put(top);
        if (o->device >= 0 && !shown) {
                fprintf(stderr, "lupinectl: no GPU %d on this host\n", o->device);
                return 1;
        }
        return 0;
}

int ctl_config(const struct ctl_opts *o, int argc, char **argv)
{
        char *text;

        if (argc >= 1 && strcmp(argv[0], "show") == 0 && argc == 1) {
                struct json_object *top;
                if (ctl_call_ok(o, LUP_ADMIN_CONFIG_SHOW, NULL, "show its settings", &text) < 0)
                        return 1;
                if (o->json) {
                        printf("%s\n", text);
                        free(text);
                        return 0;
                }
                top = parse(text, "CONFIG_SHOW");
                free(text);
                if (!top)
                        return 1;
                json_object_object_foreach(top, key, val)
                        printf("%-26s %s\n", key, val ? json_object_get_string(val) : "-");
                json_object_put(top);
                return 0;
        }
        if (argc == 3 && strcmp(argv[0], "set") == 0) {
                char arg[1025];
                if ((size_t)snprintf(arg, sizeof(arg), "%s=%s", argv[1], argv[2]) >= sizeof(arg)) {
                        fprintf(stderr, "lupinectl: config set: too long\n");
                        return 2;
                }
                if (ctl_call_ok(o, LUP_ADMIN_CONFIG_SET, arg, "change the setting", &text) < 0)
                        return 1;
                printf("%s\n", text);
                free(text);
                return 0;
        }
        fprintf(stderr, "lupinectl: config: expected 'show' or 'set KEY VALUE'\nTry 'lupinectl --help'.\n");
        return 2;
}
