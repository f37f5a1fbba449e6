/* SPDX-License-Identifier: MIT */
/*
 * Finding a checkpoint provider: the built-in directory provider, or a
 * shared library that exports LUPINE_CHECKPOINT_SYMBOL.
 */
#ifndef LUP_CKPT_PROVIDER_LOAD_H
#define LUP_CKPT_PROVIDER_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lupine/checkpoint_provider.h"

/*
 * path_or_null NULL: *ret = the built-in directory provider and
 * *ret_dlhandle = NULL.
 *
 * Otherwise dlopen()s the library (RTLD_NOW | RTLD_LOCAL), calls its
 * LUPINE_CHECKPOINT_SYMBOL and checks the table before anyone uses it:
 * abi_version between LUPINE_CHECKPOINT_ABI_VERSION_MIN and
 * LUPINE_CHECKPOINT_ABI_VERSION, struct_size at least that version's size,
 * `name` and every version-1 callback non-NULL, save_write_at non-NULL if
 * caps claim concurrent writes, and the three direct-write callbacks
 * non-NULL, with concurrent writes claimed too, if caps claim direct
 * writes, and the five lease callbacks (version 4) non-NULL if caps claim
 * leases. The table must stay valid until
 * lupine_provider_unload(*ret_dlhandle).
 *
 * Returns 0, or -ELIBACC (cannot load), -ELIBBAD (no entry point, or a
 * table this daemon must not use), -EINVAL (bad arguments); err (errlen
 * bytes, may be 0) says what went wrong in one line, "" on success. The
 * outputs are untouched on failure, and nothing stays loaded.
 */
int lupine_provider_load(const char *path_or_null, const struct lupine_checkpoint_provider **ret,
                         void **ret_dlhandle, char *err, size_t errlen);

/* The LUPINE_CKPT_CAP_* bits this daemon may use: caps of a version-2 (or
 * newer) table, known bits only, each only from the version that defines
 * it (LEASES from 4); 0 for a version-1 table or NULL. No LEASES: the
 * provider has no leases, and the daemon runs single-host. */
uint64_t lupine_provider_caps(const struct lupine_checkpoint_provider *p);

/* Whether p has leases: LUPINE_CKPT_CAP_LEASES and every lease callback
 * (lupine_provider_load refuses a table that claims one without the
 * other). The worker's leases, and the arena slots agreed in the store
 * (daemon/worker/slot_lease.c), both rest on it. */
bool lupine_provider_has_leases(const struct lupine_checkpoint_provider *p);

/* p->save_sync(save) where the table has it (version 5, not NULL), else
 * 0: the commit then does all the flushing, as before. */
int lupine_provider_save_sync(const struct lupine_checkpoint_provider *p, struct lupine_ckpt_save *save);

/* Reads len bytes of object `name` at `offset` through p->load_read, in
 * as many calls as it takes (each asking for at most 64 MiB). Returns the
 * bytes read, fewer than len only where the object ends, or the provider's
 * -errno. */
int64_t lupine_provider_read_full(const struct lupine_checkpoint_provider *p, struct lupine_ckpt_load *ld,
                                  const char *name, uint64_t offset, void *buf, size_t len);

/* Reads the whole object `name`, whose size must lie in [min, max], into a
 * new buffer (*ret, *ret_len; the caller frees it). Returns 0, -ENOENT
 * when the checkpoint has no such object, -EBADMSG when its size is out of
 * bounds (*ret_len is then that size, for the message), -ENOMEM, -EIO when
 * it is shorter than its size said, or the provider's -errno. */
int lupine_provider_read_object(const struct lupine_checkpoint_provider *p, struct lupine_ckpt_load *ld,
                                const char *name, uint64_t min, uint64_t max, uint8_t **ret, uint64_t *ret_len);

/* dlclose()s what lupine_provider_load returned; NULL is fine. Call it
 * only after the provider's instances are closed. */
void lupine_provider_unload(void *dlhandle);

#endif
