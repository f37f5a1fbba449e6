/* SPDX-License-Identifier: MIT */
/*
 * Broken checkpoint providers, one per -DBAD_* flag, that the loader must
 * refuse (tests/unit/test_provider_example.c). Test-only.
 *   BAD_ABI       abi_version 99 (newer than this daemon speaks)
 *   BAD_SIZE      struct_size smaller than version 1's table
 *   BAD_NULL      a NULL callback (remove)
 *   BAD_NULLNAME  name NULL
 *   BAD_NOSYM     no lupine_checkpoint_provider_v1 at all
 *   BAD_NULLTABLE the entry point returns NULL
 *   BAD_V1        not broken: an old provider, abi_version 1 and a table
 *                 that ends at remove, which must still load (caps 0)
 *   BAD_DIRECT    claims direct writes (version 3) without the callbacks
 *   BAD_V2        not broken: abi_version 2 and a table that ends at
 *                 save_write_at, which must still load; of its caps only
 *                 the version-2 bits count
 *   BAD_V3        not broken: abi_version 3 and a table that ends at
 *                 save_direct_done, which must still load; the LEASES bit
 *                 it sets is version 4's and must be ignored
 *   BAD_LEASES    claims leases (version 4) without the callbacks
 *   BAD_V4SIZE    abi_version 4 with a version-3 struct_size
 */
#include <errno.h>
#include <stddef.h>

#include "lupine/checkpoint_provider.h"

#define EXPORT __attribute__((visibility("default")))

static int b_open(const char *config, struct lupine_ckpt_instance **ret) { return -ENOSYS; }
static void b_close(struct lupine_ckpt_instance *inst) { }
static const char *b_last_error(struct lupine_ckpt_instance *inst) { return "broken on purpose"; }
static int b_save_begin(struct lupine_ckpt_instance *inst, const char *session, uint64_t epoch,
                        struct lupine_ckpt_save **ret) { return -ENOSYS; }
static int b_save_write(struct lupine_ckpt_save *save, const char *name, const void *data, size_t len) { return -ENOSYS; }
static int b_save_commit(struct lupine_ckpt_save *save) { return -ENOSYS; }
static void b_save_abort(struct lupine_ckpt_save *save) { }
static int b_load_begin(struct lupine_ckpt_instance *inst, const char *session, uint64_t epoch,
                        struct lupine_ckpt_load **ret, uint64_t *ret_epoch) { return -ENOSYS; }
static int b_load_size(struct lupine_ckpt_load *load, const char *name, uint64_t *ret_size) { return -ENOSYS; }
static int64_t b_load_read(struct lupine_ckpt_load *load, const char *name, uint64_t offset, void *buf,
                           size_t len) { return -ENOSYS; }
static void b_load_end(struct lupine_ckpt_load *load) { }
static int b_list(struct lupine_ckpt_instance *inst,
                  int (*fn)(const struct lupine_ckpt_info *info, void *userdata), void *userdata) { return -ENOSYS; }
__attribute__((unused)) static int b_save_write_at(struct lupine_ckpt_save *save, const char *name, uint64_t offset,
                                                  const void *data, size_t len) { return -ENOSYS; }
__attribute__((unused)) static int b_remove(struct lupine_ckpt_instance *inst, const char *session) { return -ENOSYS; }

static const struct lupine_checkpoint_provider bad = {
#ifdef BAD_ABI
        .abi_version = 99,
#elif defined(BAD_V1)
        .abi_version = 1,
#elif defined(BAD_V2)
        .abi_version = 2,
#elif defined(BAD_V3)
        .abi_version = 3,
#elif defined(BAD_V4SIZE)
        .abi_version = 4,
#else
        .abi_version = LUPINE_CHECKPOINT_ABI_VERSION,
#endif
#ifdef BAD_SIZE
        .struct_size = 16,
#elif defined(BAD_V1)
        .struct_size = offsetof(struct lupine_checkpoint_provider, caps),
#elif defined(BAD_V2)
        .struct_size = offsetof(struct lupine_checkpoint_provider, direct_region),
#elif defined(BAD_V3) || defined(BAD_V4SIZE)
        .struct_size = offsetof(struct lupine_checkpoint_provider, lease_claim),
#else
        .struct_size = sizeof(struct lupine_checkpoint_provider),
#endif
#ifdef BAD_NULLNAME
        .name = NULL,
#else
        .name = "bad",
#endif
        .open = b_open,
        .close = b_close,
        .last_error = b_last_error,
        .save_begin = b_save_begin,
        .save_write = b_save_write,
        .save_commit = b_save_commit,
        .save_abort = b_save_abort,
        .load_begin = b_load_begin,
        .load_size = b_load_size,
        .load_read = b_load_read,
        .load_end = b_load_end,
        .list = b_list,
#ifdef BAD_NULL
        .remove = NULL,
#else
        .remove = b_remove,
#endif
#ifdef BAD_DIRECT
        .caps = LUPINE_CKPT_CAP_CONCURRENT_WRITE | LUPINE_CKPT_CAP_DIRECT_WRITE,
        .save_write_at = b_save_write_at,
#endif
#ifdef BAD_V3
        .caps = LUPINE_CKPT_CAP_CONCURRENT_WRITE | LUPINE_CKPT_CAP_LEASES,
        .save_write_at = b_save_write_at,
#endif
#ifdef BAD_V2
        .caps = LUPINE_CKPT_CAP_CONCURRENT_READ | LUPINE_CKPT_CAP_DIRECT_WRITE | LUPINE_CKPT_CAP_LEASES,
#endif
#ifdef BAD_LEASES
        .caps = LUPINE_CKPT_CAP_LEASES,
#endif
};

/* Keeps the table referenced when BAD_NOSYM leaves no entry point. */
EXPORT const struct lupine_checkpoint_provider *bad_provider_table(void);
EXPORT const struct lupine_checkpoint_provider *bad_provider_table(void)
{
        return &bad;
}

#ifndef BAD_NOSYM
EXPORT const struct lupine_checkpoint_provider *lupine_checkpoint_provider_v1(void);
EXPORT const struct lupine_checkpoint_provider *lupine_checkpoint_provider_v1(void)
{
#ifdef BAD_NULLTABLE
        return NULL;
#else
        return &bad;
#endif
}
#endif
