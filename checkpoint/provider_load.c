/* SPDX-License-Identifier: MIT */
/*
 * Loading a checkpoint provider library and checking its table before the
 * daemon calls anything in it (provider_load.h).
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include "provider_load.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "provider_dir.h"

/* The version-1 table ends with `remove`; a newer provider's table may be
 * longer, and this daemon never looks past that end. */
#define V1_SIZE (offsetof(struct lupine_checkpoint_provider, remove) + sizeof(((struct lupine_checkpoint_provider *)0)->remove))
/* Version 2 adds caps and save_write_at. */
#define V2_SIZE                                                                                                        \
        (offsetof(struct lupine_checkpoint_provider, save_write_at) +                                                  \
         sizeof(((struct lupine_checkpoint_provider *)0)->save_write_at))

/* Version 3 adds direct_region, save_direct_get and save_direct_done. */
#define V3_SIZE                                                                                                        \
        (offsetof(struct lupine_checkpoint_provider, save_direct_done) +                                               \
         sizeof(((struct lupine_checkpoint_provider *)0)->save_direct_done))

/* Version 4 adds lease_claim, lease_renew, lease_release, lease_read and
 * save_fence. */
#define V4_SIZE                                                    \
        (offsetof(struct lupine_checkpoint_provider, save_fence) + \
         sizeof(((struct lupine_checkpoint_provider *)0)->save_fence))

/* Version 5 adds save_refer and save_sync. */
#define V5_SIZE                                                   \
        (offsetof(struct lupine_checkpoint_provider, save_sync) + \
         sizeof(((struct lupine_checkpoint_provider *)0)->save_sync))

#define READ_FULL_MAX (64u << 20) /* bytes asked of one load_read by lupine_provider_read_full */

static int fail(char *err, size_t errlen, int r, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int r, const char *fmt, ...)
{
        va_list ap;

        if (err && errlen) {
                va_start(ap, fmt);
                vsnprintf(err, errlen, fmt, ap);
                va_end(ap);
        }
        return r;
}

/* The first NULL callback of a table at least V1_SIZE long, or NULL. */
static const char *missing_callback(const struct lupine_checkpoint_provider *p)
{
#define CB(f) { p->f != NULL, #f }
        const struct {
                bool set;
                const char *name;
        } cbs[] = {
                CB(open),        CB(close),      CB(last_error), CB(save_begin), CB(save_write),
                CB(save_commit), CB(save_abort), CB(load_begin), CB(load_size),  CB(load_read),
                CB(load_end),    CB(list),       CB(remove),
        };
#undef CB
        for (size_t i = 0; i < sizeof(cbs) / sizeof(cbs[0]); i++)
                if (!cbs[i].set)
                        return cbs[i].name;
        return NULL;
}

int lupine_provider_load(const char *path_or_null, const struct lupine_checkpoint_provider **ret,
                         void **ret_dlhandle, char *err, size_t errlen)
{
        const struct lupine_checkpoint_provider *p;
        lupine_checkpoint_provider_fn entry;
        void *h, *sym;
        int r;

        if (err && errlen)
                err[0] = '\0';
        if (!ret || !ret_dlhandle)
                return fail(err, errlen, -EINVAL, "lupine_provider_load: NULL output");
        if (!path_or_null) {
                *ret = lupine_dir_provider();
                *ret_dlhandle = NULL;
                return 0;
        }
        h = dlopen(path_or_null, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
                const char *why = dlerror();
                return fail(err, errlen, -ELIBACC, "checkpoint provider %s: cannot load: %s", path_or_null,
                            why ? why : "unknown dlopen error");
        }
        (void)dlerror();
        sym = dlsym(h, LUPINE_CHECKPOINT_SYMBOL);
        if (!sym) {
                r = fail(err, errlen, -ELIBBAD, "checkpoint provider %s does not export %s()", path_or_null,
                         LUPINE_CHECKPOINT_SYMBOL);
                goto out_close;
        }
        /* POSIX: a dlsym() result converts to a function pointer. */
        *(void **)&entry = sym;
        p = entry();
        if (!p) {
                r = fail(err, errlen, -ELIBBAD, "checkpoint provider %s: %s() returned NULL", path_or_null,
                         LUPINE_CHECKPOINT_SYMBOL);
                goto out_close;
        }
        if (p->abi_version < LUPINE_CHECKPOINT_ABI_VERSION_MIN || p->abi_version > LUPINE_CHECKPOINT_ABI_VERSION) {
                r = fail(err, errlen, -ELIBBAD,
                         "checkpoint provider %s speaks ABI version %u; this lupined speaks %u to %u", path_or_null,
                         p->abi_version, LUPINE_CHECKPOINT_ABI_VERSION_MIN, LUPINE_CHECKPOINT_ABI_VERSION);
                goto out_close;
        }
        size_t need = p->abi_version >= 5   ? V5_SIZE
                      : p->abi_version >= 4 ? V4_SIZE
                      : p->abi_version >= 3 ? V3_SIZE
                      : p->abi_version >= 2 ? V2_SIZE
                                            : V1_SIZE;
        if (p->struct_size < need) {
                r = fail(err, errlen, -ELIBBAD,
                         "checkpoint provider %s: struct_size %u is smaller than version %u's %zu bytes", path_or_null,
                         p->struct_size, p->abi_version, need);
                goto out_close;
        }
        if (lupine_provider_caps(p) & LUPINE_CKPT_CAP_CONCURRENT_WRITE && !p->save_write_at) {
                r = fail(err, errlen, -ELIBBAD,
                         "checkpoint provider %s (%s) claims concurrent writes but has no save_write_at", path_or_null,
                         p->name ? p->name : "?");
                goto out_close;
        }
        if (lupine_provider_caps(p) & LUPINE_CKPT_CAP_DIRECT_WRITE &&
            (!(lupine_provider_caps(p) & LUPINE_CKPT_CAP_CONCURRENT_WRITE) || !p->direct_region ||
             !p->save_direct_get || !p->save_direct_done)) {
                r = fail(err, errlen, -ELIBBAD,
                         "checkpoint provider %s (%s) claims direct writes but lacks concurrent writes or a "
                         "direct-write callback", path_or_null, p->name ? p->name : "?");
                goto out_close;
        }
        if (lupine_provider_caps(p) & LUPINE_CKPT_CAP_LEASES && !lupine_provider_has_leases(p)) {
                r = fail(err, errlen, -ELIBBAD, "checkpoint provider %s (%s) claims leases but lacks a lease callback",
                         path_or_null, p->name ? p->name : "?");
                goto out_close;
        }
        if (lupine_provider_caps(p) & LUPINE_CKPT_CAP_REFER && !p->save_refer) {
                r = fail(err, errlen, -ELIBBAD, "checkpoint provider %s (%s) claims references but has no save_refer",
                         path_or_null, p->name ? p->name : "?");
                goto out_close;
        }
        if (!p->name) {
                r = fail(err, errlen, -ELIBBAD, "checkpoint provider %s: name is NULL", path_or_null);
                goto out_close;
        }
        const char *missing = missing_callback(p);
        if (missing) {
                r = fail(err, errlen, -ELIBBAD, "checkpoint provider %s (%s): callback %s is NULL", path_or_null,
                         p->name, missing);
                goto out_close;
        }
        *ret = p;
        *ret_dlhandle = h;
        return 0;
out_close:
        dlclose(h);
        return r;
}

uint64_t lupine_provider_caps(const struct lupine_checkpoint_provider *p)
{
        if (!p || p->abi_version < 2 || p->struct_size < V2_SIZE)
                return 0;
        uint64_t known = LUPINE_CKPT_CAP_CONCURRENT_WRITE | LUPINE_CKPT_CAP_CONCURRENT_READ;
        if (p->abi_version >= 3 && p->struct_size >= V3_SIZE)
                known |= LUPINE_CKPT_CAP_DIRECT_WRITE;
        if (p->abi_version >= 4 && p->struct_size >= V4_SIZE)
                known |= LUPINE_CKPT_CAP_LEASES;
        if (p->abi_version >= 5 && p->struct_size >= V5_SIZE)
                known |= LUPINE_CKPT_CAP_REFER;
        return p->caps & known;
}

bool lupine_provider_has_leases(const struct lupine_checkpoint_provider *p)
{
        return p && (lupine_provider_caps(p) & LUPINE_CKPT_CAP_LEASES) && p->lease_claim && p->lease_renew &&
               p->lease_release && p->lease_read && p->save_fence;
}

int lupine_provider_save_sync(const struct lupine_checkpoint_provider *p, struct lupine_ckpt_save *save)
{
        if (!p || p->abi_version < 5 || p->struct_size < V5_SIZE || !p->save_sync)
                return 0;
        return p->save_sync(save);
}

int64_t lupine_provider_read_full(const struct lupine_checkpoint_provider *p, struct lupine_ckpt_load *ld,
                                  const char *name, uint64_t offset, void *buf, size_t len)
{
        size_t got = 0;

        while (got < len) {
                size_t want = len - got < READ_FULL_MAX ? len - got : READ_FULL_MAX;
                int64_t k = p->load_read(ld, name, offset + got, (uint8_t *)buf + got, want);
                if (k < 0)
                        return k;
                if (k == 0)
                        break; /* the object's end */
                got += (size_t)k;
        }
        return (int64_t)got;
}

int lupine_provider_read_object(const struct lupine_checkpoint_provider *p, struct lupine_ckpt_load *ld,
                                const char *name, uint64_t min, uint64_t max, uint8_t **ret, uint64_t *ret_len)
{
        uint64_t size;

        if (p->load_size(ld, name, &size) < 0)
                return -ENOENT;
        if (size < min || size > max || size > SIZE_MAX) {
                *ret_len = size;
                return -EBADMSG;
        }
        uint8_t *buf = malloc(size ? (size_t)size : 1);
        if (!buf)
                return -ENOMEM;
        int64_t k = lupine_provider_read_full(p, ld, name, 0, buf, (size_t)size);
        if (k != (int64_t)size) {
                free(buf);
                return k < 0 ? (int)k : -EIO;
        }
        *ret = buf;
        *ret_len = size;
        return 0;
}

void lupine_provider_unload(void *dlhandle)
{
        if (dlhandle)
                dlclose(dlhandle);
}
