/* SPDX-License-Identifier: MIT */
/*
 * The directory provider's save path: save_begin, save_write, save_commit,
 * save_abort, and the per-save object table they share (save_refer is
 * dir_refer.c).
 *
 * Crash safety comes from ordering alone:
 *   objects fsynced -> their directories fsynced -> COMMITTED written and
 *   fsynced -> temp dir fsynced -> rename(temp, epoch) -> session dir
 *   fsynced -> only then older epochs deleted.
 * An epoch directory exists under its final name only after everything in
 * it is durable (docs/providers.md has the table of crash points).
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dir_internal.h"

#define OBJ_NONE UINT32_MAX

/* ---- saving: the object table */

static uint32_t name_hash(const char *s)
{
        uint32_t h = 2166136261u; /* FNV-1a */
        while (*s)
                h = (h ^ (uint8_t)*s++) * 16777619u;
        return h;
}

static uint32_t find_object(const struct lupine_ckpt_save *save, const char *name)
{
        uint32_t i = save->buckets[name_hash(name) & (save->n_buckets - 1)];
        while (i != OBJ_NONE && strcmp(save->objs[i].name, name) != 0)
                i = save->objs[i].next;
        return i;
}

static int rehash(struct lupine_ckpt_save *save, size_t n_buckets)
{
        uint32_t *b = malloc(n_buckets * sizeof(*b));

        if (!b)
                return -ENOMEM;
        for (size_t i = 0; i < n_buckets; i++)
                b[i] = OBJ_NONE;
        for (size_t i = 0; i < save->n_objs; i++) {
                uint32_t h = name_hash(save->objs[i].name) & (uint32_t)(n_buckets - 1);
                save->objs[i].next = b[h];
                b[h] = (uint32_t)i;
        }
        free(save->buckets);
        save->buckets = b;
        save->n_buckets = n_buckets;
        return 0;
}

static void close_object(struct lupine_ckpt_save *save, size_t slot)
{
        struct dir_object *o = &save->objs[save->open_idx[slot]];

        o->fd = safe_close(o->fd);
        save->open_idx[slot] = save->open_idx[--save->n_open];
}

/* Keeps at most DIR_MAX_OPEN_FILES object fds: closes the least recently
 * written one that no save_write_at is writing through when a new one is
 * needed. There always is one: at most 64 lanes write at once. */
static void make_room(struct lupine_ckpt_save *save)
{
        size_t oldest = SIZE_MAX;

        if (save->n_open < DIR_MAX_OPEN_FILES)
                return;
        for (size_t s = 0; s < save->n_open; s++) {
                const struct dir_object *o = &save->objs[save->open_idx[s]];
                if (!o->users && (oldest == SIZE_MAX || o->last_use < save->objs[save->open_idx[oldest]].last_use))
                        oldest = s;
        }
        if (oldest != SIZE_MAX)
                close_object(save, oldest);
}

static void close_all_objects(struct lupine_ckpt_save *save)
{
        while (save->n_open)
                close_object(save, save->n_open - 1);
}

static int remember_subdir(struct lupine_ckpt_save *save, const char *path)
{
        if (save->n_subdirs == save->cap_subdirs) {
                size_t ncap = save->cap_subdirs ? save->cap_subdirs * 2 : 8;
                char **n = realloc(save->subdirs, ncap * sizeof(*n));
                if (!n)
                        return -ENOMEM;
                save->subdirs = n;
                save->cap_subdirs = ncap;
        }
        save->subdirs[save->n_subdirs] = strdup(path);
        if (!save->subdirs[save->n_subdirs])
                return -ENOMEM;
        save->n_subdirs++;
        return 0;
}

/* Creates the directories above `name` in the temp dir. */
static int make_parents(struct lupine_ckpt_save *save, const char *name)
{
        char path[DIR_OBJECT_MAX + 1];

        for (const char *p = strchr(name, '/'); p; p = strchr(p + 1, '/')) {
                size_t len = (size_t)(p - name);
                memcpy(path, name, len);
                path[len] = '\0';
                if (mkdirat(save->tmp_fd, path, 0700) == 0) {
                        int r = remember_subdir(save, path);
                        if (r < 0)
                                return r;
                } else if (errno != EEXIST) {
                        return -errno;
                }
        }
        return 0;
}

static bool name_conflict(int err)
{
        /* "a" after "a/b" or "a/b" after "a": one name is the other's directory */
        return err == -EEXIST || err == -ENOTDIR || err == -EISDIR;
}

static int add_object(struct lupine_ckpt_save *save, const char *name, uint32_t *ret)
{
        struct dir_object *o;
        int fd, r, e;

        if (save->n_objs >= DIR_MAX_OBJECTS)
                return -E2BIG;
        if (save->n_objs == save->cap_objs) {
                size_t ncap = save->cap_objs ? save->cap_objs * 2 : 64;
                struct dir_object *n = realloc(save->objs, ncap * sizeof(*n));
                if (!n)
                        return -ENOMEM;
                save->objs = n;
                save->cap_objs = ncap;
        }
        if (save->n_objs + 1 > save->n_buckets && (r = rehash(save, save->n_buckets * 2)) < 0)
                return r;
        r = make_parents(save, name);
        if (r < 0)
                return r;
        e = dir_fault_hit(&save->inst->faults, &save->counts, DIR_FAULT_CREATE);
        if (e)
                return -e;
        make_room(save);
        fd = openat(save->tmp_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        o = &save->objs[save->n_objs];
        *o = (struct dir_object){ .name = strdup(name), .fd = fd, .last_use = ++save->tick };
        if (!o->name) {
                close(fd);
                (void)unlinkat(save->tmp_fd, name, 0);
                return -ENOMEM;
        }
        uint32_t h = name_hash(name) & (uint32_t)(save->n_buckets - 1);
        o->next = save->buckets[h];
        save->buckets[h] = (uint32_t)save->n_objs;
        save->open_idx[save->n_open++] = (uint32_t)save->n_objs;
        *ret = (uint32_t)save->n_objs++;
        return 0;
}

/* add_object, with the refusals that do not spoil the save described:
 * *ret_io says whether a failure was I/O (the caller latches it) instead. */
static int create_object(struct lupine_ckpt_save *save, const char *name, uint32_t *ret, bool *ret_io)
{
        int r = add_object(save, name, ret);

        *ret_io = false;
        if (name_conflict(r))
                return dir_fail(save->inst, -EINVAL, "object name %s collides with another object's path", name);
        if (r == -E2BIG)
                return dir_fail(save->inst, r, "more than %u objects in one save", DIR_MAX_OBJECTS);
        *ret_io = r < 0;
        return r;
}

/* The object's fd, reopened if it was closed to stay under the limit. It
 * is written at its tracked size, so reopening needs no O_APPEND. */
static int object_fd(struct lupine_ckpt_save *save, uint32_t i)
{
        struct dir_object *o = &save->objs[i];

        o->last_use = ++save->tick;
        if (o->fd >= 0)
                return o->fd;
        make_room(save);
        o->fd = openat(save->tmp_fd, o->name, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
        if (o->fd < 0)
                return -errno;
        save->open_idx[save->n_open++] = i;
        return o->fd;
}

/* ---- saving */

static void free_save(struct lupine_ckpt_save *save)
{
        if (!save)
                return;
        close_all_objects(save);
        for (size_t i = 0; i < save->n_objs; i++)
                free(save->objs[i].name);
        for (size_t i = 0; i < save->n_subdirs; i++)
                free(save->subdirs[i]);
        free(save->objs);
        free(save->buckets);
        free(save->subdirs);
        save->tmp_fd = safe_close(save->tmp_fd);
        save->session_fd = safe_close(save->session_fd);
        pthread_mutex_destroy(&save->mu);
        free(save);
}

static void drop_tmp(struct lupine_ckpt_save *save)
{
        close_all_objects(save);
        if (save->tmp_fd >= 0) {
                save->tmp_fd = safe_close(save->tmp_fd);
                (void)dir_rmtree_at(save->session_fd, save->tmp_name);
        }
}

/* An I/O failure kills the save: the error latches, and the temp dir goes
 * at once (on ENOSPC, the space is what the next save needs). */
static int save_fail(struct lupine_ckpt_save *save, int err, const char *what)
{
        dir_fail(save->inst, err, "checkpoint %s epoch %" PRIu64 ": %s", save->session, save->epoch, what);
        save->err = err;
        drop_tmp(save);
        return err;
}

int dir_save_begin(struct lupine_ckpt_instance *inst, const char *session, uint64_t epoch,
                          struct lupine_ckpt_save **ret)
{
        char sdir[DIR_SDIR_MAX + 1], ename[DIR_EPOCH_HEX + 1];
        struct lupine_ckpt_save *save;
        uint64_t newest;
        struct stat st;
        int r;

        dir_clear_error(inst);
        if (!ret)
                return -EINVAL;
        if (dir_session_to_sdir(session, sdir) < 0)
                return dir_fail(inst, -EINVAL, "invalid session name");
        if (epoch == 0)
                return dir_fail(inst, -EINVAL, "epoch 0 is reserved (it means 'newest' to load_begin)");
        if (mkdirat(inst->root_fd, sdir, 0700) == 0) {
                r = dir_fsync_plain(inst->root_fd);
                if (r < 0)
                        return dir_fail(inst, r, "fsync of %s", inst->root);
        } else if (errno != EEXIST) {
                return dir_fail(inst, -errno, "creating %s/%s", inst->root, sdir);
        }
        save = calloc(1, sizeof(*save));
        if (!save)
                return dir_fail(inst, -ENOMEM, "save_begin");
        save->inst = inst;
        save->epoch = epoch;
        save->tmp_fd = -1;
        pthread_mutex_init(&save->mu, NULL);
        snprintf(save->session, sizeof(save->session), "%s", session);
        save->session_fd = dir_open_dir_at(inst->root_fd, sdir);
        if (save->session_fd < 0) {
                r = dir_fail(inst, save->session_fd, "opening %s/%s", inst->root, sdir);
                goto out_free;
        }
        /* Epochs only grow: an older or equal one would be shadowed by (or
         * collide with) what is already committed. */
        r = dir_newest_committed(save->session_fd, session, &newest, NULL, NULL);
        if (r == 0 && newest >= epoch) {
                r = dir_fail(inst, -EEXIST, "session %s already has epoch %" PRIu64 " committed; epoch %" PRIu64
                             " is not newer", session, newest, epoch);
                goto out_free;
        }
        if (r < 0 && r != -ENOENT) {
                r = dir_fail(inst, r, "reading the epochs of session %s", session);
                goto out_free;
        }
        dir_epoch_name(epoch, ename);
        /* A damaged epoch by this name (e.g. of an earlier session called
         * the same) goes to the quarantine first; only what is left blocks. */
        (void)dir_quarantine_epoch(inst, save->session_fd, sdir, session, epoch, 0);
        if (fstatat(save->session_fd, ename, &st, AT_SYMLINK_NOFOLLOW) == 0) {
                r = dir_fail(inst, -EEXIST, "%s/%s/%s exists but is not a complete checkpoint; remove it by hand",
                             inst->root, sdir, ename);
                goto out_free;
        }
        r = dir_tmp_name(save->tmp_name, sizeof(save->tmp_name), ename);
        if (r < 0)
                goto out_free;
        if (mkdirat(save->session_fd, save->tmp_name, 0700) < 0) {
                r = dir_fail(inst, -errno, "creating %s/%s/%s", inst->root, sdir, save->tmp_name);
                goto out_free;
        }
        save->tmp_fd = dir_open_dir_at(save->session_fd, save->tmp_name);
        if (save->tmp_fd < 0) {
                r = dir_fail(inst, save->tmp_fd, "opening %s/%s/%s", inst->root, sdir, save->tmp_name);
                (void)unlinkat(save->session_fd, save->tmp_name, AT_REMOVEDIR);
                goto out_free;
        }
        r = rehash(save, 64);
        if (r < 0) {
                drop_tmp(save);
                r = dir_fail(inst, r, "save_begin");
                goto out_free;
        }
        *ret = save;
        return 0;
out_free:
        free_save(save);
        return r;
}

int dir_save_write(struct lupine_ckpt_save *save, const char *name, const void *data, size_t len)
{
        struct lupine_ckpt_instance *inst;
        uint32_t i;
        int fd, r;

        if (!save)
                return -EINVAL;
        inst = save->inst;
        dir_clear_error(inst);
        if (save->err)
                return dir_fail(inst, save->err, "checkpoint %s epoch %" PRIu64 " failed earlier", save->session,
                                save->epoch);
        if (!dir_object_name_valid(name))
                return dir_fail(inst, -EINVAL, "invalid object name");
        if (len && !data)
                return dir_fail(inst, -EINVAL, "object %s: NULL data", name);
        i = find_object(save, name);
        if (i == OBJ_NONE) {
                char s0[DIR_OBJECT_MAX + 8];
                if (dir_stripe_name_fits(name)) {
                        dir_stripe_name(name, 0, s0);
                        if (find_object(save, s0) != OBJ_NONE)
                                return dir_fail(inst, -EINVAL, "object %s: save_write after save_write_at", name);
                }
                bool io;
                r = create_object(save, name, &i, &io);
                if (r < 0)
                        return io ? save_fail(save, r, "creating an object file") : r;
        }
        if (save->objs[i].positional)
                return dir_fail(inst, -EINVAL, "object %s: save_write after save_write_at", name);
        if (len > UINT64_MAX - save->objs[i].size)
                return dir_fail(inst, -EFBIG, "object %s would pass 2^64 bytes", name);
        fd = object_fd(save, i);
        if (fd < 0)
                return save_fail(save, fd, "reopening an object file");
        /* Completes before returning: `data` is the caller's only during
         * this call, and we neither copy it nor touch it afterwards. */
        r = dir_io_write(save, fd, data, len, save->objs[i].size, true);
        if (r < 0) {
                char what[DIR_OBJECT_MAX + 64];
                snprintf(what, sizeof(what), "writing object %s at offset %" PRIu64, name, save->objs[i].size);
                return save_fail(save, r, what);
        }
        save->objs[i].size += len;
        save->total_bytes += len;
        return 0;
}

/* Looks up the stripe file `name` of object `base`, creating it, and pins
 * its fd for one positional write. Called with save->mu held. 0 or -errno
 * (described). */
static int write_at_begin(struct lupine_ckpt_save *save, const char *base, const char *name, uint64_t offset,
                          size_t len, uint32_t *ret_i, int *ret_fd)
{
        struct lupine_ckpt_instance *inst = save->inst;
        uint32_t i;
        int r;

        if (save->err)
                return dir_fail(inst, save->err, "checkpoint %s epoch %" PRIu64 " failed earlier", save->session,
                                save->epoch);
        i = find_object(save, name);
        if (i == OBJ_NONE) {
                if (find_object(save, base) != OBJ_NONE)
                        return dir_fail(inst, -EINVAL, "object %s: save_write_at after save_write", base);
                bool io;
                r = create_object(save, name, &i, &io);
                if (r < 0 && io)
                        return save->err = dir_fail(inst, r, "checkpoint %s: creating object %s", save->session,
                                                    name);
                if (r < 0)
                        return r;
                save->objs[i].positional = true;
        }
        struct dir_object *o = &save->objs[i];
        if (!o->positional)
                return dir_fail(inst, -EINVAL, "object %s: save_write_at after save_write", name);
        if (offset > UINT64_MAX - len || o->written > UINT64_MAX - len)
                return dir_fail(inst, -EFBIG, "object %s would pass 2^64 bytes", name);
        int fd = object_fd(save, i);
        if (fd < 0)
                return save->err = dir_fail(inst, fd, "checkpoint %s: reopening object %s", save->session, name);
        o->users++;
        *ret_i = i;
        *ret_fd = fd;
        return 0;
}

/* One piece of a positional write, all inside one stripe file: written
 * with pwrite(2) outside the lock. */
static int write_stripe_piece(struct lupine_ckpt_save *save, const char *name, const char *fname, uint64_t offset,
                              const uint8_t *b, size_t len)
{
        uint32_t i = 0;
        int fd = -1, r;

        pthread_mutex_lock(&save->mu);
        r = write_at_begin(save, name, fname, offset, len, &i, &fd);
        pthread_mutex_unlock(&save->mu);
        if (r < 0)
                return r;
        r = dir_io_pwrite(save, fd, b, len, offset);
        pthread_mutex_lock(&save->mu);
        struct dir_object *o = &save->objs[i];
        o->users--;
        if (r < 0) {
                if (!save->err)
                        save->err = r;
                r = dir_fail(save->inst, r, "checkpoint %s epoch %" PRIu64 ": writing object %s (%s, %zu bytes at offset %"
                             PRIu64 ")", save->session, save->epoch, name, fname, len, offset);
        } else {
                o->written += len;
                if (offset + len > o->size)
                        o->size = offset + len;
                save->total_bytes += len;
        }
        pthread_mutex_unlock(&save->mu);
        return r;
}

/*
 * Positional writes from several threads at once. Writers of one file
 * serialise in the kernel (the inode lock), so an object is striped over
 * DIR_STRIPES files (dir_stripe_locate): the lanes' consecutive units land
 * in different files. The object table, the fd cache, the fault counters
 * and the error buffer change only under save->mu. A failure latches
 * save->err but leaves the temp dir alone (other threads may be writing
 * into it): the daemon aborts the save after a failed write, and the abort
 * removes it.
 */
int dir_save_write_at(struct lupine_ckpt_save *save, const char *name, uint64_t offset, const void *data,
                      size_t len)
{
        char fname[DIR_OBJECT_MAX + 8];
        int r = 0;

        if (!save)
                return -EINVAL;
        if (!dir_object_name_valid(name) || (len && !data) || !dir_stripe_name_fits(name) ||
            offset > UINT64_MAX - len) {
                pthread_mutex_lock(&save->mu);
                r = dir_fail(save->inst, -EINVAL, "save_write_at: %s",
                             len && !data                     ? "NULL data"
                             : !dir_object_name_valid(name)   ? "invalid object name"
                             : !dir_stripe_name_fits(name)    ? "object name too long to stripe"
                                                              : "offset past 2^64");
                pthread_mutex_unlock(&save->mu);
                return r;
        }
        const uint8_t *b = data;
        for (size_t done = 0; done < len && r == 0;) {
                unsigned stripe;
                uint64_t at;
                size_t n = dir_stripe_locate(offset + done, len - done, &stripe, &at);
                dir_stripe_name(name, stripe, fname);
                r = write_stripe_piece(save, name, fname, at, b + done, n);
                done += n;
        }
        return r;
}

/* Positionally written objects must be whole: as many bytes written as the
 * furthest write reached (the daemon never overlaps its writes). */
static int check_positional(struct lupine_ckpt_save *save)
{
        for (size_t i = 0; i < save->n_objs; i++) {
                const struct dir_object *o = &save->objs[i];
                if (o->positional && o->written != o->size) {
                        char what[DIR_OBJECT_MAX + 96];
                        snprintf(what, sizeof(what), "object %s has holes (%" PRIu64 " of %" PRIu64 " bytes written)",
                                 o->name, o->written, o->size);
                        return save_fail(save, -EINVAL, what);
                }
        }
        return 0;
}

/* fsyncs every object file, DIR_FSYNC_BATCH at a time, then closes them. */
static int sync_objects(struct lupine_ckpt_save *save)
{
        int fds[DIR_FSYNC_BATCH];
        bool opened[DIR_FSYNC_BATCH];
        size_t idx[DIR_FSYNC_BATCH];

        for (size_t i = 0; i < save->n_objs;) {
                size_t n = 0, failed = 0;
                int r = 0;
                for (; i < save->n_objs && n < DIR_FSYNC_BATCH; i++, n++) {
                        struct dir_object *o = &save->objs[i];
                        opened[n] = o->fd < 0;
                        idx[n] = i;
                        fds[n] = o->fd >= 0 ? o->fd : openat(save->tmp_fd, o->name, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
                        if (fds[n] < 0) {
                                r = -errno;
                                failed = n;
                                break;
                        }
                }
                if (r == 0)
                        r = dir_io_fsync(save, fds, n, &failed);
                for (size_t k = 0; k < n; k++)
                        if (opened[k])
                                close(fds[k]);
                if (r < 0) {
                        char what[DIR_OBJECT_MAX + 32];
                        snprintf(what, sizeof(what), "fsync of object %s", save->objs[idx[failed]].name);
                        return save_fail(save, r, what);
                }
        }
        close_all_objects(save);
        return 0;
}

int dir_save_sync(struct lupine_ckpt_save *save)
{
        int r = dir_save_usable(save);
        return r < 0 ? r : sync_objects(save); /* the commit's own fsyncs then find little left */
}

/* fsyncs the directories we created, then the temp dir itself. */
static int sync_dirs(struct lupine_ckpt_save *save)
{
        int fds[DIR_FSYNC_BATCH];

        for (size_t i = 0; i <= save->n_subdirs;) {
                size_t n = 0, failed = 0;
                int r = 0;
                for (; i <= save->n_subdirs && n < DIR_FSYNC_BATCH; i++, n++) {
                        fds[n] = i < save->n_subdirs ? dir_open_dir_at(save->tmp_fd, save->subdirs[i]) : save->tmp_fd;
                        if (fds[n] < 0) {
                                r = fds[n];
                                break;
                        }
                }
                if (r == 0)
                        r = dir_io_fsync(save, fds, n, &failed);
                for (size_t k = 0; k < n; k++)
                        if (fds[k] >= 0 && fds[k] != save->tmp_fd)
                                close(fds[k]);
                if (r < 0)
                        return save_fail(save, r, "fsync of a directory");
        }
        return 0;
}

static int write_marker(struct lupine_ckpt_save *save)
{
        struct dir_marker m = { .epoch = save->epoch, .objects = save->n_objs, .bytes = save->total_bytes,
                                .committed_unix = dir_now_unix() };
        uint8_t buf[DIR_MARKER_MAX];
        int fd, len, r, e;

        snprintf(m.session, sizeof(m.session), "%s", save->session);
        len = dir_marker_encode(&m, buf, sizeof(buf));
        if (len < 0)
                return save_fail(save, len, "encoding the COMMITTED marker");
        e = dir_fault_hit(&save->inst->faults, &save->counts, DIR_FAULT_MARKER);
        if (e)
                return save_fail(save, -e, "writing the COMMITTED marker");
        fd = openat(save->tmp_fd, DIR_MARKER_NAME, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return save_fail(save, -errno, "creating the COMMITTED marker");
        r = dir_io_write(save, fd, buf, (size_t)len, 0, false);
        if (r == 0)
                r = dir_io_fsync(save, &fd, 1, NULL);
        close(fd);
        if (r < 0)
                return save_fail(save, r, "writing the COMMITTED marker");
        r = dir_io_fsync(save, &save->tmp_fd, 1, NULL);
        if (r < 0)
                return save_fail(save, r, "fsync of the temp dir after the marker");
        return 0;
}

static int rename_noreplace(int dfd, const char *from, const char *to)
{
        if (renameat2(dfd, from, dfd, to, RENAME_NOREPLACE) == 0)
                return 0;
        if (errno != EINVAL && errno != ENOSYS)
                return -errno;
        /* NFS and a few others lack RENAME_NOREPLACE; save_begin checked
         * that `to` did not exist, and a directory cannot replace a
         * non-empty one. */
        return renameat(dfd, from, dfd, to) < 0 ? -errno : 0;
}

/* Deletes the session's epochs older than `epoch`, except the ones the
 * save refers to (save_refer, dir_refer.c), which stay as they are:
 * renamed to a temp name first (one atomic step out of sight), then
 * removed. Failures leave garbage that a later open reaps, never a
 * half-deleted epoch in view. */
static void drop_older(struct lupine_ckpt_save *save)
{
        struct dirent *de;
        DIR *d;

        if (dir_list_open(save->session_fd, &d) < 0)
                return;
        while ((de = readdir(d))) {
                char tmp[64];
                uint64_t e;
                if (!dir_epoch_parse(de->d_name, &e) || e >= save->epoch || dir_save_refers(save, e))
                        continue;
                if (dir_tmp_name(tmp, sizeof(tmp), "old") < 0 || renameat(dirfd(d), de->d_name, dirfd(d), tmp) < 0)
                        continue;
                (void)dir_rmtree_at(dirfd(d), tmp);
        }
        closedir(d);
}

static bool crash_here(struct lupine_ckpt_save *save, enum dir_fault_point point)
{
        /* test facility: stop as a killed process would, leaving the disk
         * exactly as it is at this step */
        save->crashed = dir_fault_hit(&save->inst->faults, &save->counts, point) != 0;
        return save->crashed;
}

static int commit(struct lupine_ckpt_save *save)
{
        char ename[DIR_EPOCH_HEX + 1];
        int r, e;

        r = check_positional(save);
        if (r < 0)
                return r;
        r = sync_objects(save);
        if (r < 0)
                return r;
        r = sync_dirs(save);
        if (r < 0)
                return r;
        if (crash_here(save, DIR_FAULT_CRASH_MARKER))
                return dir_fail(save->inst, -ECANCELED, "simulated crash before the marker");
        r = write_marker(save);
        if (r < 0)
                return r;
        if (crash_here(save, DIR_FAULT_CRASH_RENAME))
                return dir_fail(save->inst, -ECANCELED, "simulated crash before the rename");
        dir_epoch_name(save->epoch, ename);
        /* fenced: the lease check and the rename are one step against a
         * claim, which waits for the lock until the rename is durable */
        int lease_fd = -1;
        if (save->fenced) {
                r = dir_lease_hold(save->inst, save->session, save->fence_owner, save->fence_token, &lease_fd);
                if (r < 0) {
                        save->err = r; /* keeps the lease's message */
                        drop_tmp(save);
                        return r;
                }
        }
        e = dir_fault_hit(&save->inst->faults, &save->counts, DIR_FAULT_RENAME);
        r = e ? -e : rename_noreplace(save->session_fd, save->tmp_name, ename);
        if (r < 0) {
                char what[128];
                lease_fd = safe_close(lease_fd);
                snprintf(what, sizeof(what), "renaming %s to %s", save->tmp_name, ename);
                return save_fail(save, r == -ENOTEMPTY ? -EEXIST : r, what);
        }
        save->tmp_fd = safe_close(save->tmp_fd); /* it is the epoch now */
        r = dir_io_fsync(save, &save->session_fd, 1, NULL);
        lease_fd = safe_close(lease_fd);
        if (r < 0)
                /* Visible, maybe not durable: keep the older epochs. */
                return dir_fail(save->inst, r, "checkpoint %s epoch %" PRIu64 ": fsync of the session directory "
                                "after the rename (the new epoch is visible; older epochs are kept)",
                                save->session, save->epoch);
        if (crash_here(save, DIR_FAULT_CRASH_CLEANUP))
                return dir_fail(save->inst, -ECANCELED, "simulated crash before deleting older epochs");
        drop_older(save);
        return 0;
}

int dir_save_commit(struct lupine_ckpt_save *save)
{
        int r;

        if (!save)
                return -EINVAL;
        dir_clear_error(save->inst);
        if (save->err) {
                r = dir_fail(save->inst, save->err, "checkpoint %s epoch %" PRIu64 " failed earlier", save->session,
                             save->epoch);
        } else {
                r = commit(save);
                /* a simulated crash leaves the temp dir for the next open */
                if (save->crashed)
                        save->tmp_fd = safe_close(save->tmp_fd);
        }
        drop_tmp(save);
        free_save(save);
        return r;
}

int dir_save_fence(struct lupine_ckpt_save *save, const char *owner, uint64_t token)
{
        size_t n;
        int r;

        if (!save)
                return -EINVAL;
        dir_clear_error(save->inst);
        if (!owner || !dir_session_valid(owner, &n) || token == 0 || save->fenced)
                return dir_fail(save->inst, -EINVAL, "save_fence: invalid owner, token 0, or fenced already");
        r = dir_lease_check(save->inst, save->session, owner, token);
        if (r < 0)
                return r;
        save->fenced = true;
        memcpy(save->fence_owner, owner, n + 1);
        save->fence_token = token;
        return 0;
}

void dir_save_abort(struct lupine_ckpt_save *save)
{
        if (!save)
                return;
        drop_tmp(save);
        free_save(save);
}
