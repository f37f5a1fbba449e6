/* SPDX-License-Identifier: MIT */
/*
 * The directory provider's session leases (ABI version 4,
 * LUPINE_CKPT_CAP_LEASES; the design is in docs/providers.md, "Leases").
 *
 * Layout, in a directory of its own that listing, loading, quarantine and
 * the reaping of session directories never walk (its name begins with '.',
 * which no session directory does):
 *
 *   ROOT/.leases/<sdir>          the lease record (dir_lease_encode), only
 *                                ever replaced whole, by rename(2)
 *   ROOT/.leases/<sdir>@lock     an empty file, never deleted: its fcntl lock
 *                                makes each read-modify-write one atomic step
 *   ROOT/.leases/.tmp-lease-*    a record being written (reaped at open when stale)
 *
 * ('@' is never part of a session name, so "<sdir>@lock" cannot be another
 * session's record.)
 *
 * Every operation: lock <sdir>@lock with an open-file-description lock
 * (F_OFD_SETLK, F_WRLCK; per open file, so two instances in one process
 * exclude each other too), read the record, decide, and if it changes
 * write a new record to a unique temp file, fsync it, rename(2) it over
 * the record, fsync the directory, unlock. A fenced commit (dir_save.c)
 * takes the same lock around its check and its rename. The kernel drops
 * the lock when the process dies (on NFS: when the server's lock lease
 * of the dead client expires), so there is never a stale lock to break.
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include "dir_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "buf.h"

#define LEASE_LOCK_SUFFIX "@lock"

int64_t dir_now_unix_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_us(long us)
{
        struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000 };

        nanosleep(&ts, NULL);
}

/* ---- the record */

int dir_lease_encode(const struct lupine_ckpt_lease *l, uint8_t *buf, size_t cap)
{
        struct lup_wr w = lup_wr_init(buf, cap < DIR_LEASE_MAX ? cap : DIR_LEASE_MAX);

        lup_wr_bytes(&w, DIR_LEASE_MAGIC, 8);
        lup_wr_u32(&w, DIR_LEASE_VERSION);
        lup_wr_u64(&w, l->token);
        lup_wr_u64(&w, (uint64_t)l->expires_unix_ms);
        lup_wr_str16(&w, l->owner, strnlen(l->owner, LUPINE_CKPT_OWNER_MAX));
        if (w.err)
                return w.err;
        lup_wr_u32(&w, dir_crc32c(0, buf, w.len));
        if (w.err)
                return w.err;
        return (int)w.len;
}

int dir_lease_decode(const uint8_t *buf, size_t len, struct lupine_ckpt_lease *ret)
{
        struct lupine_ckpt_lease l = { 0 };
        const uint8_t *magic;
        const char *owner;
        size_t owner_len, n;
        uint32_t version;
        uint64_t expires;
        struct lup_rd r;

        if (len < 4 || len > DIR_LEASE_MAX)
                return -EBADMSG;
        if (dir_crc32c(0, buf, len - 4) != lup_le32(buf + len - 4))
                return -EBADMSG;
        r = lup_rd_init(buf, len - 4);
        lup_rd_bytes(&r, 8, &magic);
        lup_rd_u32(&r, &version);
        lup_rd_u64(&r, &l.token);
        lup_rd_u64(&r, &expires);
        lup_rd_str16(&r, LUPINE_CKPT_OWNER_MAX, &owner, &owner_len);
        if (lup_rd_finish(&r) < 0)
                return -EBADMSG;
        if (memcmp(magic, DIR_LEASE_MAGIC, 8) != 0 || version != DIR_LEASE_VERSION)
                return -EBADMSG;
        memcpy(l.owner, owner, owner_len);
        l.owner[owner_len] = '\0';
        /* free ("") or a valid owner; a held lease has a token */
        if (owner_len > 0 && (!dir_session_valid(l.owner, &n) || n != owner_len || l.token == 0))
                return -EBADMSG;
        l.expires_unix_ms = (int64_t)expires;
        *ret = l;
        return 0;
}

/* ---- the lock */

/* Opens (creating) ROOT/.leases and locks <sdir>@lock in it. On success
 * *ret_dfd is the directory and *ret_lock_fd the locked file; closing the
 * lock fd unlocks. */
static int lease_lock(struct lupine_ckpt_instance *inst, const char *sdir, int *ret_dfd, int *ret_lock_fd)
{
        char lname[DIR_SDIR_MAX + sizeof(LEASE_LOCK_SUFFIX)];
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
        long waited_us = 0, step_us = 50;
        int dfd, fd, r;

        if (mkdirat(inst->root_fd, DIR_LEASE_DIR, 0700) == 0) {
                r = dir_fsync_plain(inst->root_fd);
                if (r < 0)
                        return dir_fail(inst, r, "fsync of %s after creating %s", inst->root, DIR_LEASE_DIR);
        } else if (errno != EEXIST) {
                return dir_fail(inst, -errno, "creating %s/%s", inst->root, DIR_LEASE_DIR);
        }
        dfd = dir_open_dir_at(inst->root_fd, DIR_LEASE_DIR);
        if (dfd < 0)
                return dir_fail(inst, dfd, "opening %s/%s", inst->root, DIR_LEASE_DIR);
        snprintf(lname, sizeof(lname), "%s" LEASE_LOCK_SUFFIX, sdir);
        fd = openat(dfd, lname, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
                r = dir_fail(inst, -errno, "opening %s/%s/%s", inst->root, DIR_LEASE_DIR, lname);
                close(dfd);
                return r;
        }
        /* Polled rather than F_OFD_SETLKW: a bound on the wait (a store
         * that hangs must not hang the daemon). */
        while (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
                r = -errno;
                if ((r != -EAGAIN && r != -EACCES && r != -EINTR) || waited_us >= DIR_LEASE_LOCK_WAIT_MS * 1000L) {
                        if (r == -EACCES)
                                r = -EAGAIN;
                        dir_fail(inst, r,
                                 "locking %s/%s/%s (the filesystem must support fcntl locks; on NFS "
                                 "not mounted with nolock)",
                                 inst->root, DIR_LEASE_DIR, lname);
                        close(fd);
                        close(dfd);
                        return r;
                }
                sleep_us(step_us);
                waited_us += step_us;
                if (step_us < 2000)
                        step_us *= 2;
        }
        *ret_dfd = dfd;
        *ret_lock_fd = fd;
        return 0;
}

/* ---- reading and writing the record, with the lock held */

static int lease_load(struct lupine_ckpt_instance *inst, int dfd, const char *sdir, struct lupine_ckpt_lease *ret)
{
        uint8_t buf[DIR_LEASE_MAX + 1];
        ssize_t n;
        int fd, r;

        fd = openat(dfd, sdir, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                if (errno != ENOENT)
                        return dir_fail(inst, -errno, "opening the lease record %s/%s/%s", inst->root, DIR_LEASE_DIR,
                                        sdir);
                *ret = (struct lupine_ckpt_lease){ 0 }; /* never claimed */
                return 0;
        }
        do
                n = pread(fd, buf, sizeof(buf), 0);
        while (n < 0 && errno == EINTR);
        r = n < 0 ? -errno : dir_lease_decode(buf, (size_t)n, ret);
        close(fd);
        if (r < 0)
                /* never guess a token: a damaged record needs a person */
                return dir_fail(inst, r, "the lease record %s/%s/%s is unreadable or damaged", inst->root,
                                DIR_LEASE_DIR, sdir);
        return 0;
}

static int write_all(int fd, const uint8_t *p, size_t len)
{
        while (len > 0) {
                ssize_t n = write(fd, p, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : -EIO;
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

static int lease_store(struct lupine_ckpt_instance *inst, int dfd, const char *sdir, const struct lupine_ckpt_lease *l)
{
        uint8_t buf[DIR_LEASE_MAX];
        char tmp[64];
        struct stat mine, now;
        int fd, len, r;

        len = dir_lease_encode(l, buf, sizeof(buf));
        if (len < 0)
                return dir_fail(inst, len, "encoding a lease record");
        r = dir_tmp_name(tmp, sizeof(tmp), "lease");
        if (r < 0)
                return dir_fail(inst, r, "a lease temp name");
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return dir_fail(inst, -errno, "creating %s/%s/%s", inst->root, DIR_LEASE_DIR, tmp);
        r = write_all(fd, buf, (size_t)len);
        if (r == 0 && fsync(fd) < 0)
                r = -errno;
        if (r == 0 && fstat(fd, &mine) < 0)
                r = -errno;
        close(fd);
        if (r < 0)
                goto out_unlink;
        int e = dir_fault_hit(&inst->faults, &inst->lease_counts, DIR_FAULT_LEASE);
        if (e || renameat(dfd, tmp, dfd, sdir) < 0) {
                r = e ? -e : -errno;
                /* NFS: a retransmitted RENAME whose first reply was lost
                 * fails with ENOENT although it happened; the record is
                 * then our file */
                if (r != -ENOENT || fstatat(dfd, sdir, &now, AT_SYMLINK_NOFOLLOW) < 0 || now.st_ino != mine.st_ino ||
                    now.st_dev != mine.st_dev)
                        goto out_unlink;
        }
        r = dir_fsync_plain(dfd);
        if (r < 0)
                return dir_fail(inst, r, "fsync of %s/%s after writing the lease of %s", inst->root, DIR_LEASE_DIR,
                                sdir);
        return 0;
out_unlink:
        (void)unlinkat(dfd, tmp, 0);
        return dir_fail(inst, r, "writing the lease record %s/%s/%s", inst->root, DIR_LEASE_DIR, sdir);
}

/* ---- the callbacks */

static int check_args(struct lupine_ckpt_instance *inst, const char *session, const char *owner, uint32_t ttl_ms,
                      bool want_ttl, char sdir[static DIR_SDIR_MAX + 1])
{
        size_t n;

        dir_clear_error(inst);
        if (dir_session_to_sdir(session, sdir) < 0)
                return dir_fail(inst, -EINVAL, "invalid session name");
        if (owner && !dir_session_valid(owner, &n))
                return dir_fail(inst, -EINVAL, "invalid lease owner (the session-name rule applies)");
        if (want_ttl && (ttl_ms == 0 || ttl_ms > LUPINE_CKPT_LEASE_TTL_MAX_MS))
                return dir_fail(inst, -EINVAL, "lease ttl %" PRIu32 " ms is outside 1..%u", ttl_ms,
                                LUPINE_CKPT_LEASE_TTL_MAX_MS);
        return 0;
}

static bool holds(const struct lupine_ckpt_lease *l, const char *owner, uint64_t token)
{
        return l->owner[0] && l->token == token && strcmp(l->owner, owner) == 0;
}

/* The start of every lease change: checked arguments, the session's lease
 * locked (*dfd, *lfd: close both to unlock) and read into *cur. On failure
 * nothing stays locked or open. */
static int lease_begin(struct lupine_ckpt_instance *inst, const char *session, const char *owner, uint32_t ttl_ms,
                       bool with_ttl, char sdir[static DIR_SDIR_MAX + 1], int *dfd, int *lfd,
                       struct lupine_ckpt_lease *cur)
{
        int r = check_args(inst, session, owner, ttl_ms, with_ttl, sdir);
        if (r < 0)
                return r;
        r = lease_lock(inst, sdir, dfd, lfd);
        if (r < 0)
                return r;
        r = lease_load(inst, *dfd, sdir, cur);
        if (r < 0) {
                close(*lfd);
                close(*dfd);
        }
        return r;
}

int dir_lease_claim(struct lupine_ckpt_instance *inst, const char *session, const char *owner, uint32_t ttl_ms,
                    struct lupine_ckpt_lease *ret)
{
        char sdir[DIR_SDIR_MAX + 1];
        struct lupine_ckpt_lease cur, next;
        int dfd, lfd, r;

        if (!ret)
                return -EINVAL;
        r = lease_begin(inst, session, owner, ttl_ms, true, sdir, &dfd, &lfd, &cur);
        if (r < 0)
                return r;
        int64_t now = dir_now_unix_ms();
        if (cur.owner[0] && strcmp(cur.owner, owner) != 0 && cur.expires_unix_ms > now) {
                *ret = cur;
                r = dir_fail(inst, -EBUSY, "session %s is leased to %s until %" PRId64 " (token %" PRIu64 ")", session,
                             cur.owner, cur.expires_unix_ms, cur.token);
                goto out_unlock;
        }
        if (cur.token == UINT64_MAX) {
                r = dir_fail(inst, -EOVERFLOW, "session %s has used up its lease tokens", session);
                goto out_unlock;
        }
        next = (struct lupine_ckpt_lease){ .token = cur.token + 1, .expires_unix_ms = now + ttl_ms };
        snprintf(next.owner, sizeof(next.owner), "%s", owner);
        r = lease_store(inst, dfd, sdir, &next);
        if (r == 0)
                *ret = next;
out_unlock:
        close(lfd);
        close(dfd);
        return r;
}

int dir_lease_renew(struct lupine_ckpt_instance *inst, const char *session, const char *owner, uint64_t token,
                    uint32_t ttl_ms, struct lupine_ckpt_lease *ret)
{
        char sdir[DIR_SDIR_MAX + 1];
        struct lupine_ckpt_lease cur;
        int dfd, lfd, r;

        if (!ret)
                return -EINVAL;
        r = lease_begin(inst, session, owner, ttl_ms, true, sdir, &dfd, &lfd, &cur);
        if (r < 0)
                return r;
        if (!holds(&cur, owner, token)) {
                *ret = cur;
                r = dir_fail(inst, -ESTALE, "the lease of session %s is no longer %s's token %" PRIu64, session, owner,
                             token);
                goto out_unlock;
        }
        cur.expires_unix_ms = dir_now_unix_ms() + ttl_ms;
        r = lease_store(inst, dfd, sdir, &cur);
        if (r == 0)
                *ret = cur;
out_unlock:
        close(lfd);
        close(dfd);
        return r;
}

int dir_lease_release(struct lupine_ckpt_instance *inst, const char *session, const char *owner, uint64_t token)
{
        char sdir[DIR_SDIR_MAX + 1];
        struct lupine_ckpt_lease cur;
        int dfd, lfd, r;

        r = lease_begin(inst, session, owner, 0, false, sdir, &dfd, &lfd, &cur);
        if (r < 0)
                return r;
        if (!cur.owner[0] && cur.token == token && token != 0)
                goto out_unlock; /* released already, and nobody claimed since */
        if (!holds(&cur, owner, token)) {
                r = dir_fail(inst, -ESTALE, "the lease of session %s is no longer %s's token %" PRIu64, session, owner,
                             token);
                goto out_unlock;
        }
        cur.owner[0] = '\0';
        cur.expires_unix_ms = 0;
        r = lease_store(inst, dfd, sdir, &cur);
out_unlock:
        close(lfd);
        close(dfd);
        return r;
}

int dir_lease_read(struct lupine_ckpt_instance *inst, const char *session, struct lupine_ckpt_lease *ret)
{
        char sdir[DIR_SDIR_MAX + 1];
        int dfd, r;

        r = check_args(inst, session, NULL, 0, false, sdir);
        if (r < 0 || !ret)
                return r < 0 ? r : -EINVAL;
        /* no lock: a record is only ever replaced whole, by rename, and a
         * read creates nothing */
        dfd = dir_open_dir_at(inst->root_fd, DIR_LEASE_DIR);
        if (dfd == -ENOENT) {
                *ret = (struct lupine_ckpt_lease){ 0 };
                return 0;
        }
        if (dfd < 0)
                return dir_fail(inst, dfd, "opening %s/%s", inst->root, DIR_LEASE_DIR);
        r = lease_load(inst, dfd, sdir, ret);
        close(dfd);
        return r;
}

int dir_lease_hold(struct lupine_ckpt_instance *inst, const char *session, const char *owner, uint64_t token,
                   int *ret_lock_fd)
{
        char sdir[DIR_SDIR_MAX + 1];
        struct lupine_ckpt_lease cur;
        int dfd, lfd, r;

        if (dir_session_to_sdir(session, sdir) < 0)
                return dir_fail(inst, -EINVAL, "invalid session name");
        r = lease_lock(inst, sdir, &dfd, &lfd);
        if (r < 0)
                return r;
        r = lease_load(inst, dfd, sdir, &cur);
        close(dfd);
        if (r == 0 && !holds(&cur, owner, token))
                r = dir_fail(inst, -ESTALE,
                             "session %s: the lease passed from %s's token %" PRIu64 " to %s%s "
                             "token %" PRIu64,
                             session, owner, token, cur.owner[0] ? cur.owner : "nobody", cur.owner[0] ? "'s" : ",",
                             cur.token);
        if (r < 0) {
                close(lfd);
                return r;
        }
        *ret_lock_fd = lfd;
        return 0;
}

int dir_lease_check(struct lupine_ckpt_instance *inst, const char *session, const char *owner, uint64_t token)
{
        int lfd, r;

        r = dir_lease_hold(inst, session, owner, token, &lfd);
        if (r == 0)
                close(lfd);
        return r;
}
