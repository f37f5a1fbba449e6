/* SPDX-License-Identifier: MIT */
/*
 * The built-in directory provider: the callbacks of
 * abi/lupine/checkpoint_provider.h over a directory tree (layout in
 * dir_internal.h, the why in docs/providers.md). This file: open and
 * close (with the reaping of leftovers), loads, listing, removal, and the
 * table; the save path is dir_save.c (and dir_refer.c).
 *
 * Kept epochs (version 5) need nothing here: load_begin opens any exact
 * epoch that checks out, list reports the newest, and remove moves the
 * whole session directory away, kept epochs and all.
 *
 * Loads accept an epoch only if its marker's checksum, session, epoch,
 * object count and byte total all match the tree, so an epoch that a crash
 * interrupted is never taken for a checkpoint.
 *
 * Below the root, all paths are relative to directory fds (openat and
 * friends), so no path is ever built from strings longer than one name;
 * every fd is O_CLOEXEC.
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include "provider_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dir_internal.h"

/* ---- open, close, cleanup of leftovers */

static void reap_if_stale(int parent_fd, const char *name, int64_t now)
{
        int64_t newest;

        if (dir_tree_newest_mtime(parent_fd, name, &newest) < 0)
                return;
        if (now - newest > DIR_TMP_STALE_SEC)
                (void)dir_rmtree_at(parent_fd, name);
}

static void reap_tmp_in(int dfd, int64_t now)
{
        struct dirent *de;
        DIR *d;

        if (dir_list_open(dfd, &d) < 0)
                return;
        while ((de = readdir(d)))
                if (strncmp(de->d_name, DIR_TMP_PREFIX, strlen(DIR_TMP_PREFIX)) == 0)
                        reap_if_stale(dirfd(d), de->d_name, now);
        closedir(d);
}

/* Best effort: leftovers of crashed saves and interrupted deletes. The rule
 * is age only (nothing below the temp dir modified for DIR_TMP_STALE_SEC),
 * because the pid in the name means nothing on a filesystem shared between
 * hosts: a live save elsewhere must not lose its files. */
static void reap_leftovers(struct lupine_ckpt_instance *inst)
{
        int64_t now = dir_now_unix();
        struct dirent *de;
        DIR *d;

        if (dir_list_open(inst->root_fd, &d) < 0)
                return;
        while ((de = readdir(d))) {
                char session[DIR_SESSION_MAX + 1];
                if (strncmp(de->d_name, DIR_TMP_PREFIX, strlen(DIR_TMP_PREFIX)) == 0) {
                        reap_if_stale(dirfd(d), de->d_name, now);
                } else if (dir_sdir_to_session(de->d_name, session)) {
                        int sfd = dir_open_dir_at(dirfd(d), de->d_name);
                        if (sfd >= 0) {
                                reap_tmp_in(sfd, now);
                                close(sfd);
                        }
                }
        }
        closedir(d);
        /* lease records being written when their writer died */
        int lfd = dir_open_dir_at(inst->root_fd, DIR_LEASE_DIR);
        if (lfd >= 0) {
                reap_tmp_in(lfd, now);
                close(lfd);
        }
}

static void dir_close(struct lupine_ckpt_instance *inst)
{
        if (!inst)
                return;
        if (inst->have_ring)
                io_uring_queue_exit(&inst->ring);
        inst->root_fd = safe_close(inst->root_fd);
        free(inst->root);
        free(inst);
}

static int dir_open(const char *config, struct lupine_ckpt_instance **ret)
{
        struct lupine_ckpt_instance *inst;
        const char *root = config;
        struct dir_faults faults;
        int r;

        if (!ret)
                return -EINVAL;
        if (!root || !*root)
                root = getenv("LUPINE_CHECKPOINT_CONFIG");
        if (!root || !*root)
                root = LUPINE_DIR_DEFAULT_ROOT;
        /* A bad fault spec is a broken test, not something to ignore. */
        r = dir_faults_parse(getenv(LUPINE_DIR_PROVIDER_FAIL_ENV), &faults);
        if (r < 0)
                return r;
        r = dir_mkdir_p(root);
        if (r < 0)
                return r;
        inst = calloc(1, sizeof(*inst));
        if (!inst)
                return -ENOMEM;
        inst->faults = faults;
        inst->root = strdup(root);
        inst->root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (!inst->root || inst->root_fd < 0) {
                r = inst->root ? -errno : -ENOMEM;
                dir_close(inst);
                return r;
        }
        /* io_uring can be missing (old kernel) or blocked (seccomp,
         * io_uring_disabled): the same ordering works with pwrite/fsync. */
        if (!faults.armed[DIR_FAULT_NO_URING])
                inst->have_ring = io_uring_queue_init(DIR_RING_ENTRIES, &inst->ring, 0) == 0;
        reap_leftovers(inst);
        *ret = inst;
        return 0;
}

static const char *dir_last_error(struct lupine_ckpt_instance *inst)
{
        return inst ? inst->err : "";
}

/* ---- loading */

static int dir_load_begin(struct lupine_ckpt_instance *inst, const char *session, uint64_t epoch,
                          struct lupine_ckpt_load **ret, uint64_t *ret_epoch)
{
        char sdir[DIR_SDIR_MAX + 1];
        struct lupine_ckpt_load *load;
        struct dir_marker m;
        int sfd, efd = -1, r;

        dir_clear_error(inst);
        if (!ret)
                return -EINVAL;
        if (dir_session_to_sdir(session, sdir) < 0)
                return dir_fail(inst, -EINVAL, "invalid session name");
        sfd = dir_open_dir_at(inst->root_fd, sdir);
        if (sfd < 0)
                return dir_fail(inst, sfd == -ENOTDIR ? -ENOENT : sfd, "no checkpoint of session %s", session);
        if (epoch == 0) {
                r = dir_newest_committed(sfd, session, &epoch, &m, &efd);
                if (r < 0)
                        r = dir_fail(inst, r, "no committed checkpoint of session %s", session);
        } else {
                char ename[DIR_EPOCH_HEX + 1];
                dir_epoch_name(epoch, ename);
                efd = dir_open_dir_at(sfd, ename);
                r = efd < 0 ? (efd == -ENOTDIR ? -ENOENT : efd) : dir_epoch_verify(efd, session, epoch, &m);
                if (r < 0)
                        r = dir_fail(inst, r, "session %s epoch %" PRIu64 " %s", session, epoch,
                                     r == -ENOENT ? "is not committed" : "does not check out");
        }
        close(sfd);
        if (r < 0) {
                safe_close(efd);
                return r;
        }
        load = calloc(1, sizeof(*load));
        if (!load) {
                close(efd);
                return dir_fail(inst, -ENOMEM, "load_begin");
        }
        load->inst = inst;
        load->epoch_fd = efd;
        load->epoch = epoch;
        pthread_mutex_init(&load->mu, NULL);
        for (size_t i = 0; i < DIR_LOAD_FDS; i++)
                load->cache[i].fd = -1;
        *ret = load;
        if (ret_epoch)
                *ret_epoch = epoch;
        return 0;
}

/* The cached fd of file `fname` (an object, or one stripe of one),
 * opening it (and evicting the least recently used entry that no read is
 * using) on a miss. Called with load->mu held. -ENOENT quietly when the
 * file is not there; other failures are described. */
static int load_file(struct lupine_ckpt_load *load, const char *fname, struct dir_load_fd **ret)
{
        struct dir_load_fd *c, *victim = NULL;
        struct stat st;
        int fd;

        for (size_t i = 0; i < DIR_LOAD_FDS; i++) {
                c = &load->cache[i];
                if (c->fd >= 0 && strcmp(c->name, fname) == 0) {
                        c->last_use = ++load->tick;
                        *ret = c;
                        return 0;
                }
                if (c->users)
                        continue;
                if (!victim || c->fd < 0 || (victim->fd >= 0 && c->last_use < victim->last_use))
                        victim = c;
        }
        if (!victim) /* more concurrent readers than cache slots: the daemon never gets here */
                return dir_fail(load->inst, -EMFILE, "more than %u files read at once", DIR_LOAD_FDS);
        fd = openat(load->epoch_fd, fname, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT || errno == ENOTDIR || errno == ELOOP ? -ENOENT
                                                                             : dir_fail(load->inst, -errno, "%s", fname);
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                close(fd);
                return dir_fail(load->inst, -ENOENT, "object file %s is not a file", fname);
        }
        victim->fd = safe_close(victim->fd);
        snprintf(victim->name, sizeof(victim->name), "%s", fname);
        victim->fd = fd;
        victim->size = (uint64_t)st.st_size;
        victim->last_use = ++load->tick;
        *ret = victim;
        return 0;
}

/* Which layout `name` has: striped (see dir_internal.h) or plain, one file.
 * Stripe 0 is looked for first: while the lanes read a striped object it
 * is in the fd cache, so the common case costs no system call. Called with
 * load->mu held. */
static int object_layout(struct lupine_ckpt_load *load, const char *name, bool *ret_striped)
{
        char fname[DIR_OBJECT_MAX + 8];
        struct dir_load_fd *c;
        int r;

        if (!dir_object_name_valid(name))
                return dir_fail(load->inst, -EINVAL, "invalid object name");
        if (dir_stripe_name_fits(name)) {
                dir_stripe_name(name, 0, fname);
                r = load_file(load, fname, &c);
                if (r != -ENOENT) {
                        *ret_striped = true;
                        return r;
                }
        }
        *ret_striped = false;
        r = load_file(load, name, &c);
        return r == -ENOENT ? dir_fail(load->inst, r, "object %s", name) : r;
}

/* load_size and load_read may overlap (LUPINE_CKPT_CAP_CONCURRENT_READ):
 * the fd cache changes under load->mu, and a read pins the fd it reads
 * through (users) so that no other thread closes it during the pread(2),
 * which runs unlocked. Errors are described under the lock too; a success
 * leaves the error buffer alone (another thread's failure may be in it). */
static int dir_load_size(struct lupine_ckpt_load *load, const char *name, uint64_t *ret_size)
{
        char fname[DIR_OBJECT_MAX + 8];
        struct dir_load_fd *c;
        uint64_t size = 0;
        bool striped;
        int r;

        if (!load || !ret_size)
                return -EINVAL;
        pthread_mutex_lock(&load->mu);
        r = object_layout(load, name, &striped);
        /* a striped object is its stripes back to back: as many as it has */
        for (unsigned k = 0; r == 0 && k < (striped ? DIR_STRIPES : 1); k++) {
                if (striped)
                        dir_stripe_name(name, k, fname);
                int rf = load_file(load, striped ? fname : name, &c);
                if (rf == -ENOENT && k > 0)
                        break; /* past the last stripe */
                if (rf == -ENOENT)
                        rf = dir_fail(load->inst, -EIO, "object %s lost a file while being read", name);
                if (rf < 0)
                        r = rf;
                else
                        size += c->size;
        }
        if (r == 0)
                *ret_size = size;
        pthread_mutex_unlock(&load->mu);
        return r;
}

/* Reads up to len bytes at `at` of the file c (pinned by the caller):
 * the count, short at the file's end, or -errno. */
static int64_t read_pinned(const struct dir_load_fd *c, uint64_t at, uint8_t *buf, size_t len)
{
        size_t got = 0;

        while (got < len) {
                ssize_t n = pread(c->fd, buf + got, len - got, (off_t)(at + got));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break; /* shorter than when we opened it: tampering; report what is there */
                got += (size_t)n;
        }
        return (int64_t)got;
}

static int64_t dir_load_read(struct lupine_ckpt_load *load, const char *name, uint64_t offset, void *buf, size_t len)
{
        char fname[DIR_OBJECT_MAX + 8];
        struct dir_load_fd *c;
        size_t got = 0;
        bool striped = false;
        int r;

        if (!load)
                return -EINVAL;
        pthread_mutex_lock(&load->mu);
        r = len && !buf ? dir_fail(load->inst, -EINVAL, "load_read: NULL buffer") : object_layout(load, name, &striped);
        pthread_mutex_unlock(&load->mu);
        if (r < 0)
                return r;
        if (offset > (uint64_t)INT64_MAX - DIR_READ_MAX)
                return 0; /* past the end of any file */
        if (len > DIR_READ_MAX)
                len = DIR_READ_MAX;
        /* piece by piece (one per stripe unit when striped) until len bytes
         * or the object's end: the first short piece */
        while (got < len) {
                unsigned stripe = 0;
                uint64_t at = offset + got;
                size_t want = len - got;
                if (striped) {
                        want = dir_stripe_locate(offset + got, want, &stripe, &at);
                        dir_stripe_name(name, stripe, fname);
                }
                pthread_mutex_lock(&load->mu);
                r = load_file(load, striped ? fname : name, &c);
                if (r == 0)
                        c->users++;
                else if (r == -ENOENT && !striped)
                        r = dir_fail(load->inst, -EIO, "object %s lost a file while being read", name);
                pthread_mutex_unlock(&load->mu);
                if (r == -ENOENT)
                        break; /* a stripe past the object's last unit: its end */
                if (r < 0)
                        return r;
                int64_t n = read_pinned(c, at, (uint8_t *)buf + got, want);
                pthread_mutex_lock(&load->mu);
                c->users--;
                if (n < 0)
                        dir_fail(load->inst, (int)n, "reading object %s at %" PRIu64, name, offset + got);
                pthread_mutex_unlock(&load->mu);
                if (n < 0)
                        return n;
                got += (size_t)n;
                if ((size_t)n < want)
                        break;
        }
        if (got > 0) {
                pthread_mutex_lock(&load->mu);
                bool flip = dir_fault_hit(&load->inst->faults, &load->counts, DIR_FAULT_FLIP) != 0;
                pthread_mutex_unlock(&load->mu);
                if (flip)
                        ((uint8_t *)buf)[got / 2] ^= 0x10;
        }
        return (int64_t)got;
}

static void dir_load_end(struct lupine_ckpt_load *load)
{
        if (!load)
                return;
        for (size_t i = 0; i < DIR_LOAD_FDS; i++)
                load->cache[i].fd = safe_close(load->cache[i].fd);
        load->epoch_fd = safe_close(load->epoch_fd);
        pthread_mutex_destroy(&load->mu);
        free(load);
}

/* ---- listing and removing */

static int dir_list(struct lupine_ckpt_instance *inst, int (*fn)(const struct lupine_ckpt_info *info, void *userdata),
                    void *userdata)
{
        struct dirent *de;
        DIR *d;
        int fd, r = 0;

        dir_clear_error(inst);
        if (!fn)
                return -EINVAL;
        fd = openat(inst->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return dir_fail(inst, -errno, "opening %s", inst->root);
        d = fdopendir(fd);
        if (!d) {
                close(fd);
                return dir_fail(inst, -ENOMEM, "listing %s", inst->root);
        }
        while (r == 0 && (de = readdir(d))) {
                struct lupine_ckpt_info info = { 0 };
                struct dir_marker m = { 0 };
                uint64_t epoch = 0;
                int sfd;
                if (!dir_sdir_to_session(de->d_name, info.session))
                        continue;
                sfd = dir_open_dir_at(dirfd(d), de->d_name);
                if (sfd < 0)
                        continue; /* removed meanwhile, or not a directory */
                /* listing is what the daemon does at start: damaged epochs
                 * are logged and moved aside here, so their names are free */
                (void)dir_quarantine_damaged(inst, sfd, de->d_name, info.session);
                int nr = dir_newest_committed(sfd, info.session, &epoch, &m, NULL);
                close(sfd);
                if (nr < 0)
                        continue; /* no committed epoch (yet): not listed */
                info.epoch = epoch;
                info.bytes = m.bytes;
                info.committed_unix = m.committed_unix;
                r = fn(&info, userdata);
        }
        closedir(d);
        return r;
}

static int dir_remove(struct lupine_ckpt_instance *inst, const char *session)
{
        char sdir[DIR_SDIR_MAX + 1], tmp[64];
        uint64_t epoch;
        int sfd, r;

        dir_clear_error(inst);
        if (dir_session_to_sdir(session, sdir) < 0)
                return dir_fail(inst, -EINVAL, "invalid session name");
        sfd = dir_open_dir_at(inst->root_fd, sdir);
        if (sfd < 0)
                return dir_fail(inst, sfd == -ENOTDIR ? -ENOENT : sfd, "no checkpoint of session %s", session);
        r = dir_newest_committed(sfd, session, &epoch, NULL, NULL);
        close(sfd);
        if (r < 0)
                return dir_fail(inst, r, "no committed checkpoint of session %s", session);
        /* Out of sight in one atomic step, then deleted at leisure. */
        r = dir_tmp_name(tmp, sizeof(tmp), "rm");
        if (r < 0)
                return dir_fail(inst, r, "remove");
        if (renameat(inst->root_fd, sdir, inst->root_fd, tmp) < 0)
                return dir_fail(inst, -errno, "renaming %s/%s out of the way", inst->root, sdir);
        r = dir_fsync_plain(inst->root_fd);
        if (r < 0)
                return dir_fail(inst, r, "fsync of %s after removing session %s", inst->root, session);
        (void)dir_rmtree_at(inst->root_fd, tmp); /* what is left, a later open reaps */
        return 0;
}

static const struct lupine_checkpoint_provider dir_provider = {
        .abi_version = LUPINE_CHECKPOINT_ABI_VERSION,
        .struct_size = sizeof(struct lupine_checkpoint_provider),
        .name = "dir",
        .open = dir_open,
        .close = dir_close,
        .last_error = dir_last_error,
        .save_begin = dir_save_begin,
        .save_write = dir_save_write,
        .save_commit = dir_save_commit,
        .save_abort = dir_save_abort,
        .load_begin = dir_load_begin,
        .load_size = dir_load_size,
        .load_read = dir_load_read,
        .load_end = dir_load_end,
        .list = dir_list,
        .remove = dir_remove,
        /* version 2: lanes write (pwrite) and read (pread) in parallel;
         * save_write, used for everything else, goes through io_uring */
        .caps = LUPINE_CKPT_CAP_CONCURRENT_WRITE | LUPINE_CKPT_CAP_CONCURRENT_READ | LUPINE_CKPT_CAP_LEASES |
                LUPINE_CKPT_CAP_REFER,
        .save_write_at = dir_save_write_at,
        /* version 4: session leases (dir_lease.c) */
        .lease_claim = dir_lease_claim,
        .lease_renew = dir_lease_renew,
        .lease_release = dir_lease_release,
        .lease_read = dir_lease_read,
        .save_fence = dir_save_fence,
        /* version 5: a commit keeps the older epochs its save refers to
         * (dir_refer.c) */
        .save_refer = dir_save_refer,
        .save_sync = dir_save_sync,
};

const struct lupine_checkpoint_provider *lupine_dir_provider(void)
{
        return &dir_provider;
}
