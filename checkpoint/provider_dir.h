/* SPDX-License-Identifier: MIT */
/*
 * The built-in directory checkpoint provider (docs/providers.md).
 *
 * Config: a directory path, created with mode 0700 (and its missing
 * parents) if absent. NULL means LUPINE_CHECKPOINT_CONFIG, or
 * LUPINE_DIR_DEFAULT_ROOT when that is unset too. Writes go through
 * io_uring; a commit fsyncs every object, writes a checksummed COMMITTED
 * marker last and renames the save's temporary directory into place, so a
 * crash at any point leaves the previous epoch or the new one, whole.
 *
 * LUPINE_DIR_PROVIDER_FAIL (read at open) injects faults for tests; see
 * docs/providers.md. Unset, it costs one branch per I/O completion.
 */
#ifndef LUP_CKPT_PROVIDER_DIR_H
#define LUP_CKPT_PROVIDER_DIR_H

#include "lupine/checkpoint_provider.h"

#define LUPINE_DIR_DEFAULT_ROOT "/var/lib/lupine/checkpoints"
#define LUPINE_DIR_PROVIDER_FAIL_ENV "LUPINE_DIR_PROVIDER_FAIL"

/* The provider's table; static, never NULL. */
const struct lupine_checkpoint_provider *lupine_dir_provider(void);

/* For an instance of the directory provider: moves the session's epoch
 * into ROOT/.quarantine/ whole, logging `why` (what the caller found wrong
 * with its contents, e.g. a manifest that does not decode), so that the
 * name is usable again (checkpoint/dir_quarantine.c). 0 or -errno. */
int lupine_dir_quarantine(struct lupine_ckpt_instance *inst, const char *session, uint64_t epoch, const char *why);

#endif
