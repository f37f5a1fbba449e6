/* SPDX-License-Identifier: MIT */
/* Mapped host memory's mirrors (worker/mapped.c). */
#ifndef LUPD_WORKER_MAPPED_H
#define LUPD_WORKER_MAPPED_H

#include "worker/session.h"

extern const struct lupw_ctl_op lupw_ctl_mapped_push;
extern const struct lupw_ctl_op lupw_ctl_mapped_pull;
/* Every mirror goes (worker/arena_map.c, lupw_release_all). */
void lupw_mapped_release(struct lupw_session *s);
/* The "mapped" object and each mirror's bytes: 0 or the provider's -errno. */
int lupw_mapped_save(struct lupw_session *s, struct lupine_ckpt_save *save);
/* Makes the checkpoint's mirrors again (none in an older one): 0 or -errno
 * with why. */
int lupw_mapped_load(struct lupw_session *s, struct lupine_ckpt_load *ld, char *why, size_t whylen);

#endif
