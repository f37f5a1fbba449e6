/* SPDX-License-Identifier: MIT */
/*
 * A minimal lupine checkpoint provider, as documentation by example
 * (docs/providers.md walks through it).
 *
 * It keeps every checkpoint in memory, per instance: nothing survives the
 * process, so it is useful for tests and as a skeleton, not for real
 * checkpoints. What it does show is everything the ABI asks of a provider:
 *
 *  - the one exported symbol, lupine_checkpoint_provider_v1(), returning a
 *    static table stamped with LUPINE_CHECKPOINT_ABI_VERSION and its size;
 *  - saves that stay invisible until commit, and a commit that replaces the
 *    older epoch in one step (here: one pointer swap; on a real store: one
 *    rename, one conditional PUT, one manifest write, ...);
 *  - a failed or aborted save leaving the older epoch untouched;
 *  - a limit on what a caller can grow, failing with -ENOSPC;
 *  - errors as negative errno values, described through last_error;
 *  - no global state: everything hangs off the instance, which the daemon
 *    uses from one thread at a time, so no locks are needed.
 *
 * It includes nothing of lupine but the public header: a provider builds
 * against abi/lupine/checkpoint_provider.h alone.
 *
 * Build: cc -shared -fPIC -fvisibility=hidden -I abi example_provider.c
 *        -Wl,--version-script=provider.map -o libexample.so
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lupine/checkpoint_provider.h"

#define EXPORT __attribute__((visibility("default")))

#define MAX_SAVE_BYTES (1ull << 30) /* per save by default; more fails with -ENOSPC */

struct object {
        char *name;
        unsigned char *data;
        size_t len, cap;
        struct object *next;
};

/* One checkpoint: a save in progress, or a committed epoch. Loads hold a
 * reference, so a commit or remove never frees what a load is reading. */
struct checkpoint {
        char session[129];
        uint64_t epoch;
        uint64_t bytes;
        struct object *objects;
        unsigned refs;
        struct checkpoint *next; /* in the instance's committed list */
};

struct lupine_ckpt_instance {
        struct checkpoint *committed; /* the newest epoch of each session */
        unsigned long long max_save;  /* bytes one save may hold */
        char err[256];
};

struct lupine_ckpt_save {
        struct lupine_ckpt_instance *inst;
        struct checkpoint *ckpt;
};

struct lupine_ckpt_load {
        struct lupine_ckpt_instance *inst;
        struct checkpoint *ckpt;
};

static int fail(struct lupine_ckpt_instance *inst, int err, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(inst->err, sizeof(inst->err), fmt, ap);
        va_end(ap);
        return err;
}

/* The header's name rules. A provider may rely on them; checking is cheap. */
static bool valid_session(const char *s)
{
        size_t n = s ? strnlen(s, 129) : 0;

        if (n == 0 || n > 128)
                return false;
        return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

static bool valid_object(const char *s)
{
        size_t n = s ? strnlen(s, 256) : 0;

        if (n == 0 || n > 255 || strstr(s, "..") || s[0] == '/')
                return false;
        return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/") == n;
}

static void checkpoint_unref(struct checkpoint *c)
{
        if (!c || --c->refs > 0)
                return;
        while (c->objects) {
                struct object *o = c->objects;
                c->objects = o->next;
                free(o->name);
                free(o->data);
                free(o);
        }
        free(c);
}

static struct checkpoint **find_committed(struct lupine_ckpt_instance *inst, const char *session)
{
        struct checkpoint **pp = &inst->committed;

        while (*pp && strcmp((*pp)->session, session) != 0)
                pp = &(*pp)->next;
        return pp;
}

static struct object *find_object(struct checkpoint *c, const char *name)
{
        for (struct object *o = c->objects; o; o = o->next)
                if (strcmp(o->name, name) == 0)
                        return o;
        return NULL;
}

/* ---- instance */

static int ex_open(const char *config, struct lupine_ckpt_instance **ret)
{
        /* memory needs no address; config may give the per-save limit in
         * MiB (the benchmarks use that to hold large sessions) */
        struct lupine_ckpt_instance *inst = calloc(1, sizeof(*inst));
        char *end;

        if (!inst)
                return -ENOMEM;
        inst->max_save = MAX_SAVE_BYTES;
        if (config && *config) {
                unsigned long long mib = strtoull(config, &end, 10);
                if (*end || mib == 0 || mib > (1ull << 24)) {
                        free(inst);
                        return -EINVAL;
                }
                inst->max_save = mib << 20;
        }
        *ret = inst;
        return 0;
}

static void ex_close(struct lupine_ckpt_instance *inst)
{
        if (!inst)
                return;
        while (inst->committed) {
                struct checkpoint *c = inst->committed;
                inst->committed = c->next;
                checkpoint_unref(c);
        }
        free(inst);
}

static const char *ex_last_error(struct lupine_ckpt_instance *inst)
{
        return inst->err;
}

/* ---- saving */

static int ex_save_begin(struct lupine_ckpt_instance *inst, const char *session, uint64_t epoch,
                         struct lupine_ckpt_save **ret)
{
        struct checkpoint *old;
        struct lupine_ckpt_save *save;

        inst->err[0] = '\0';
        if (!valid_session(session) || epoch == 0)
                return fail(inst, -EINVAL, "invalid session name or epoch 0");
        old = *find_committed(inst, session);
        if (old && old->epoch >= epoch)
                return fail(inst, -EEXIST, "session %s already has epoch %llu", session,
                            (unsigned long long)old->epoch);
        save = calloc(1, sizeof(*save));
        if (!save || !(save->ckpt = calloc(1, sizeof(*save->ckpt)))) {
                free(save);
                return fail(inst, -ENOMEM, "out of memory");
        }
        save->inst = inst;
        snprintf(save->ckpt->session, sizeof(save->ckpt->session), "%s", session);
        save->ckpt->epoch = epoch;
        save->ckpt->refs = 1;
        *ret = save;
        return 0;
}

static int ex_save_write(struct lupine_ckpt_save *save, const char *name, const void *data, size_t len)
{
        struct lupine_ckpt_instance *inst = save->inst;
        struct checkpoint *c = save->ckpt;
        struct object *o;

        inst->err[0] = '\0';
        if (!valid_object(name) || (len && !data))
                return fail(inst, -EINVAL, "invalid object name or NULL data");
        if (len > inst->max_save - c->bytes)
                return fail(inst, -ENOSPC, "a save holds at most %llu bytes", (unsigned long long)inst->max_save);
        o = find_object(c, name);
        if (!o) {
                o = calloc(1, sizeof(*o));
                if (!o || !(o->name = strdup(name))) {
                        free(o);
                        return fail(inst, -ENOMEM, "out of memory");
                }
                o->next = c->objects;
                c->objects = o;
        }
        if (o->len + len > o->cap) {
                size_t cap = o->cap ? o->cap : 4096;
                while (cap < o->len + len)
                        cap *= 2;
                unsigned char *n = realloc(o->data, cap);
                if (!n)
                        return fail(inst, -ENOMEM, "out of memory");
                o->data = n;
                o->cap = cap;
        }
        /* The caller's buffer is valid only during this call: copy it. */
        if (len)
                memcpy(o->data + o->len, data, len);
        o->len += len;
        c->bytes += len;
        return 0;
}

static int ex_save_commit(struct lupine_ckpt_save *save)
{
        struct lupine_ckpt_instance *inst = save->inst;
        struct checkpoint **pp = find_committed(inst, save->ckpt->session);
        struct checkpoint *old = *pp;

        inst->err[0] = '\0';
        /* The atomic step: the new epoch takes the old one's place. */
        save->ckpt->next = old ? old->next : inst->committed;
        if (old)
                *pp = save->ckpt;
        else
                inst->committed = save->ckpt;
        /* Only now that the new epoch is in place does the old one go. */
        checkpoint_unref(old);
        free(save);
        return 0;
}

static void ex_save_abort(struct lupine_ckpt_save *save)
{
        checkpoint_unref(save->ckpt);
        free(save);
}

/* ---- loading */

static int ex_load_begin(struct lupine_ckpt_instance *inst, const char *session, uint64_t epoch,
                         struct lupine_ckpt_load **ret, uint64_t *ret_epoch)
{
        struct checkpoint *c;
        struct lupine_ckpt_load *load;

        inst->err[0] = '\0';
        if (!valid_session(session))
                return fail(inst, -EINVAL, "invalid session name");
        c = *find_committed(inst, session);
        if (!c || (epoch != 0 && c->epoch != epoch))
                return fail(inst, -ENOENT, "no such checkpoint of session %s", session);
        load = calloc(1, sizeof(*load));
        if (!load)
                return fail(inst, -ENOMEM, "out of memory");
        load->inst = inst;
        load->ckpt = c;
        c->refs++;
        *ret = load;
        if (ret_epoch)
                *ret_epoch = c->epoch;
        return 0;
}

static int ex_load_size(struct lupine_ckpt_load *load, const char *name, uint64_t *ret_size)
{
        struct object *o;

        load->inst->err[0] = '\0';
        if (!valid_object(name))
                return fail(load->inst, -EINVAL, "invalid object name");
        o = find_object(load->ckpt, name);
        if (!o)
                return fail(load->inst, -ENOENT, "no object %s", name);
        *ret_size = o->len;
        return 0;
}

static int64_t ex_load_read(struct lupine_ckpt_load *load, const char *name, uint64_t offset, void *buf, size_t len)
{
        struct object *o;

        load->inst->err[0] = '\0';
        if (!valid_object(name))
                return fail(load->inst, -EINVAL, "invalid object name");
        o = find_object(load->ckpt, name);
        if (!o)
                return fail(load->inst, -ENOENT, "no object %s", name);
        if (offset >= o->len)
                return 0;
        if (len > o->len - offset)
                len = (size_t)(o->len - offset);
        if (len > INT64_MAX)
                len = INT64_MAX;
        memcpy(buf, o->data + offset, len);
        return (int64_t)len;
}

static void ex_load_end(struct lupine_ckpt_load *load)
{
        checkpoint_unref(load->ckpt);
        free(load);
}

/* ---- listing and deleting */

static int ex_list(struct lupine_ckpt_instance *inst, int (*fn)(const struct lupine_ckpt_info *info, void *userdata),
                   void *userdata)
{
        inst->err[0] = '\0';
        for (struct checkpoint *c = inst->committed, *next; c; c = next) {
                struct lupine_ckpt_info info = { .epoch = c->epoch, .bytes = c->bytes };
                next = c->next; /* fn may remove this session */
                snprintf(info.session, sizeof(info.session), "%s", c->session);
                int r = fn(&info, userdata);
                if (r != 0)
                        return r;
        }
        return 0;
}

static int ex_remove(struct lupine_ckpt_instance *inst, const char *session)
{
        struct checkpoint **pp, *c;

        inst->err[0] = '\0';
        if (!valid_session(session))
                return fail(inst, -EINVAL, "invalid session name");
        pp = find_committed(inst, session);
        c = *pp;
        if (!c)
                return fail(inst, -ENOENT, "no checkpoint of session %s", session);
        *pp = c->next;
        checkpoint_unref(c);
        return 0;
}

/* ---- the one exported symbol */

EXPORT const struct lupine_checkpoint_provider *lupine_checkpoint_provider_v1(void);

static const struct lupine_checkpoint_provider example_provider = {
        .abi_version = LUPINE_CHECKPOINT_ABI_VERSION,
        .struct_size = sizeof(struct lupine_checkpoint_provider),
        .name = "example-memory",
        .open = ex_open,
        .close = ex_close,
        .last_error = ex_last_error,
        .save_begin = ex_save_begin,
        .save_write = ex_save_write,
        .save_commit = ex_save_commit,
        .save_abort = ex_save_abort,
        .load_begin = ex_load_begin,
        .load_size = ex_load_size,
        .load_read = ex_load_read,
        .load_end = ex_load_end,
        .list = ex_list,
        .remove = ex_remove,
};

EXPORT const struct lupine_checkpoint_provider *lupine_checkpoint_provider_v1(void)
{
        return &example_provider;
}
