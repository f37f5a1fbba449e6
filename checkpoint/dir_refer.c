/* SPDX-License-Identifier: MIT */
/*
 * The directory provider's references (ABI version 5, save_refer): an
 * incremental save names the older epochs of its session whose objects it
 * refers to, and its commit keeps those epoch directories where they are
 * instead of deleting them with the rest (drop_older in dir_save.c).
 *
 * A reference is checked when it is made: the epoch directory must exist
 * and its marker and tree must check out (dir_epoch_verify), the same test
 * a load applies, so the daemon never builds on an epoch that a load would
 * refuse. Nothing is written to disk: the references live in the save
 * until its commit, and what the commit leaves in the session directory
 * (the new epoch and its bases) is all there is to know afterwards.
 *
 * A refused reference is the daemon's cue to write that memory in full, so
 * it never spoils the save: save->err stays as it was.
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include <errno.h>
#include <inttypes.h>
#include <unistd.h>

#include "dir_internal.h"

/* Absent or damaged: either way, no committed epoch to refer to. */
static bool not_there(int err)
{
        return err == -ENOENT || err == -ENOTDIR || err == -ELOOP || err == -EBADMSG;
}

int dir_save_refer(struct lupine_ckpt_save *save, uint64_t epoch)
{
        char ename[DIR_EPOCH_HEX + 1];
        struct dir_marker m;
        int efd, r;

        r = dir_save_usable(save);
        if (r < 0)
                return r;
        if (epoch == 0 || epoch >= save->epoch)
                return dir_fail(save->inst, -EINVAL,
                                "save_refer: epoch %" PRIu64 " is not an older epoch than the save's %" PRIu64, epoch,
                                save->epoch);
        if (dir_save_refers(save, epoch))
                return 0;
        if (save->n_refs >= LUPINE_CKPT_MAX_REFS)
                return dir_fail(save->inst, -E2BIG, "checkpoint %s epoch %" PRIu64 " refers to %u epochs already",
                                save->session, save->epoch, LUPINE_CKPT_MAX_REFS);
        dir_epoch_name(epoch, ename);
        efd = dir_open_dir_at(save->session_fd, ename);
        r = efd < 0 ? efd : dir_epoch_verify(efd, save->session, epoch, &m);
        safe_close(efd);
        if (not_there(r))
                return dir_fail(save->inst, -ENOENT,
                                "session %s epoch %" PRIu64 " is no committed checkpoint to refer to", save->session,
                                epoch);
        if (r < 0)
                return dir_fail(save->inst, r, "session %s epoch %" PRIu64 ": checking it to refer to", save->session,
                                epoch);
        save->refs[save->n_refs++] = epoch;
        return 0;
}
