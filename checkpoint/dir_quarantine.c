/* SPDX-License-Identifier: MIT */
/*
 * Damaged checkpoints out of the way (issue 15, finding 6; docs/security.md).
 * An epoch directory appears under its final name only once its COMMITTED
 * marker is written (dir_save.c), so one whose marker or tree does not
 * check out was damaged afterwards: a truncated manifest or memory object,
 * a flipped byte in the marker, a file lost. Left where it is, it blocks
 * its name: the next save of a new session by that name wants the same
 * epoch directory. So it is moved, whole, into ROOT/.quarantine/ for an
 * operator to look at, with one log line naming the session and the
 * reason. Epochs that cannot be read for other reasons (EIO, EMFILE) are
 * left alone: they may be fine.
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include "dir_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"
#include "provider_dir.h"

/* Moves ROOT/<sdir>/<ename> to ROOT/.quarantine/<sdir>.<ename>.<unix time>[.<n>]. */
static int quarantine_one(struct lupine_ckpt_instance *inst, int session_fd, const char *sdir, const char *session,
                          const char *ename, const char *why)
{
        char dest[DIR_SDIR_MAX + DIR_EPOCH_HEX + 48];
        int qfd, r = 0;

        if (mkdirat(inst->root_fd, DIR_QUARANTINE, 0700) < 0 && errno != EEXIST)
                r = -errno;
        qfd = r < 0 ? r : dir_open_dir_at(inst->root_fd, DIR_QUARANTINE);
        if (qfd < 0) {
                lup_err("checkpoint of session %s epoch %s is damaged (%s) but cannot be moved aside: %s/%s: %s",
                        session, ename, why, inst->root, DIR_QUARANTINE, strerror(-qfd));
                return qfd;
        }
        for (int n = 0; n < 100; n++) {
                int k = n ? snprintf(dest, sizeof(dest), "%s.%s.%" PRId64 ".%d", sdir, ename, dir_now_unix(), n)
                          : snprintf(dest, sizeof(dest), "%s.%s.%" PRId64, sdir, ename, dir_now_unix());
                if (k < 0 || (size_t)k >= sizeof(dest)) {
                        r = -ENAMETOOLONG;
                        break;
                }
                r = renameat(session_fd, ename, qfd, dest) < 0 ? -errno : 0;
                if (r != -EEXIST && r != -ENOTEMPTY)
                        break;
        }
        if (r == 0) {
                (void)dir_fsync_plain(qfd);
                (void)dir_fsync_plain(session_fd);
                lup_warn("checkpoint of session %s epoch %s is damaged: %s; moved to %s/%s/%s (the name is usable "
                         "again)",
                         session, ename, why, inst->root, DIR_QUARANTINE, dest);
        } else {
                lup_err("checkpoint of session %s epoch %s is damaged (%s) but cannot be moved aside to %s/%s: %s",
                        session, ename, why, inst->root, DIR_QUARANTINE, strerror(-r));
        }
        close(qfd);
        return r;
}

int dir_quarantine_epoch(struct lupine_ckpt_instance *inst, int session_fd, const char *sdir, const char *session,
                         uint64_t epoch, int64_t min_age_s)
{
        char ename[DIR_EPOCH_HEX + 1], why[256] = "";
        struct dir_marker m;
        int efd, r;

        dir_epoch_name(epoch, ename);
        efd = dir_open_dir_at(session_fd, ename);
        if (efd == -ENOTDIR) {
                snprintf(why, sizeof(why), "not a directory");
                r = -EBADMSG;
        } else if (efd < 0) {
                return efd;
        } else {
                r = dir_epoch_check(efd, session, epoch, &m, why, sizeof(why));
                close(efd);
        }
        if (r == 0)
                return 0; /* complete: nothing to do */
        if (r != -EBADMSG && r != -ENOENT)
                return r; /* unreadable now; maybe fine later */
        /* On a filesystem shared between hosts, an epoch another host just
         * committed may show up here before all of it does: only an epoch
         * left alone for a while is judged at start. */
        int64_t mt;
        if (min_age_s > 0 && dir_tree_newest_mtime(session_fd, ename, &mt) == 0 && dir_now_unix() - mt < min_age_s) {
                lup_warn("checkpoint of session %s epoch %s looks damaged (%s) but changed %lld s ago; left in place "
                         "for now (it may still be arriving on a shared filesystem)",
                         session, ename, why, (long long)(dir_now_unix() - mt));
                return -EAGAIN;
        }
        r = quarantine_one(inst, session_fd, sdir, session, ename, why);
        return r < 0 ? r : 1;
}

int lupine_dir_quarantine(struct lupine_ckpt_instance *inst, const char *session, uint64_t epoch, const char *why)
{
        char sdir[DIR_SDIR_MAX + 1], ename[DIR_EPOCH_HEX + 1];
        int sfd, r;

        if (dir_session_to_sdir(session, sdir) < 0 || epoch == 0)
                return -EINVAL;
        sfd = dir_open_dir_at(inst->root_fd, sdir);
        if (sfd < 0)
                return sfd;
        dir_epoch_name(epoch, ename);
        r = quarantine_one(inst, sfd, sdir, session, ename, why);
        close(sfd);
        return r;
}

int dir_quarantine_damaged(struct lupine_ckpt_instance *inst, int session_fd, const char *sdir, const char *session)
{
        struct dirent *de;
        unsigned seen = 0;
        int moved = 0;
        DIR *d;

        if (dir_list_open(session_fd, &d) < 0)
                return 0;
        while ((de = readdir(d)) && seen < DIR_MAX_EPOCHS_SCAN) {
                uint64_t e;
                if (!dir_epoch_parse(de->d_name, &e))
                        continue;
                seen++;
                moved += dir_quarantine_epoch(inst, session_fd, sdir, session, e, DIR_QUARANTINE_MIN_AGE_SEC) > 0;
        }
        closedir(d);
        return moved;
}
