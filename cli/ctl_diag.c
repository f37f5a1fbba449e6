/* SPDX-License-Identifier: MIT */
/*
 * lupinectl diag: lupined's own checks (ADMIN DIAG: the GPUs, the driver,
 * the checkpoint store, the TLS certificate, io_uring, arena slots, the fd
 * store), one line each with what to do about a warning or a failure.
 * When the daemon does not answer, what lupinectl can check on this host
 * by itself: the driver loads, the kernel has io_uring. Exit status 1 when
 * a check failed.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <json-c/json.h>

#include "cli/lupinectl.h"
#include "lupine/wire.h"

static int line(const struct ctl_opts *o, const char *result, const char *check, const char *detail, const char *fix)
{
        const char *c = !o->color                     ? ""
                        : strcmp(result, "pass") == 0 ? "\033[32m"
                        : strcmp(result, "warn") == 0 ? "\033[33m"
                                                      : "\033[31m";
        char word[8];

        snprintf(word, sizeof(word), "%s", result);
        for (char *p = word; *p; p++)
                *p = (char)(*p - 'a' + 'A');
        printf("%s%-4s%s  %s: %s\n", c, word, o->color ? "\033[0m" : "", check, detail);
        if (fix && strcmp(result, "pass") != 0)
                printf("      fix: %s\n", fix);
        return strcmp(result, "fail") == 0;
}

/* The daemon is not there: what this host says by itself. */
static int local_checks(const struct ctl_opts *o)
{
        int failed = line(o, "fail", "the daemon answers", o->socket,
                          "start it (systemctl start lupined), or name its socket with --socket");
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (h) {
                dlclose(h);
                line(o, "pass", "the driver loads", "libcuda.so.1", NULL);
        } else {
                line(o, "warn", "the driver loads", dlerror(),
                     "install the NVIDIA driver, or run lupined --backend sim");
        }
        /* io_uring_setup with no entries: EINVAL if the kernel has it, ENOSYS if not */
        long r = syscall(425, 0, NULL);
        if (r < 0 && errno == ENOSYS)
                failed |= line(o, "fail", "io_uring", "the kernel has no io_uring", "Linux 5.10 or later");
        else if (r < 0 && errno == EPERM)
                failed |= line(o, "fail", "io_uring", "not permitted (sysctl kernel.io_uring_disabled?)",
                               "sysctl kernel.io_uring_disabled=0, or allow it in the container's seccomp profile");
        else
                line(o, "pass", "io_uring", "the kernel has it", NULL);
        (void)failed; /* the daemon is down: that alone fails */
        return 1;
}

int ctl_diag(const struct ctl_opts *o)
{
        struct json_object *top, *arr;
        uint32_t status;
        char *text;
        int failed = 0;

        if (ctl_call(o, LUP_ADMIN_DIAG, NULL, &status, &text) < 0)
                return local_checks(o);
        if (status != 0) {
                fprintf(stderr, "lupinectl: lupined refused diag: %s\n", text);
                free(text);
                return 1;
        }
        top = json_tokener_parse(text);
        if (o->json)
                printf("%s\n", text);
        free(text);
        if (!top || !json_object_object_get_ex(top, "checks", &arr) || !json_object_is_type(arr, json_type_array)) {
                fprintf(stderr, "lupinectl: cannot read lupined's diag reply\n");
                json_object_put(top);
                return 1;
        }
        for (size_t i = 0; i < json_object_array_length(arr); i++) {
                struct json_object *c = json_object_array_get_idx(arr, i), *v;
                const char *f[4] = { "check", "result", "detail", "fix" }, *val[4] = { "?", "fail", "", NULL };
                for (int k = 0; k < 4; k++)
                        if (json_object_object_get_ex(c, f[k], &v) && json_object_is_type(v, json_type_string))
                                val[k] = json_object_get_string(v);
                if (o->json)
                        failed |= strcmp(val[1], "fail") == 0;
                else
                        failed |= line(o, val[1], val[0], val[2], val[3]);
        }
        json_object_put(top);
        return failed ? 1 : 0;
}
