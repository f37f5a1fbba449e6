/* SPDX-License-Identifier: MIT */
/*
 * The directory provider's error text: one message per instance, which the
 * daemon reads through the provider's last_error callback.
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include "dir_internal.h"

#include <stdio.h>
#include <string.h>

int dir_fail(struct lupine_ckpt_instance *inst, int err, const char *fmt, ...)
{
        va_list ap;
        int n;

        if (!inst)
                return err;
        va_start(ap, fmt);
        n = vsnprintf(inst->err, sizeof(inst->err), fmt, ap);
        va_end(ap);
        if (err < 0 && n >= 0 && (size_t)n < sizeof(inst->err)) {
                char eb[128];
                /* GNU strerror_r: returns the text, thread-safe */
                const char *es = strerror_r(-err, eb, sizeof(eb));
                snprintf(inst->err + n, sizeof(inst->err) - (size_t)n, ": %s", es);
        }
        return err;
}

void dir_clear_error(struct lupine_ckpt_instance *inst)
{
        inst->err[0] = '\0';
}
