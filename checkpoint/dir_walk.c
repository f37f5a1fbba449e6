/* SPDX-License-Identifier: MIT */
/*
 * The directory provider's directory handling: opening and listing
 * directories, walking a tree to count it (dir_commit.c checks an epoch
 * with it) or to find its newest mtime, removing a tree, mkdir -p. Every
 * walk stops at DIR_MAX_DEPTH, so a hostile tree cannot exhaust the stack.
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include "dir_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int dir_open_dir_at(int dfd, const char *name)
{
        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

int dir_list_open(int dfd, DIR **ret)
{
        int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int r;

        if (fd < 0)
                return -errno;
        *ret = fdopendir(fd);
        if (!*ret) {
                r = -errno;
                close(fd);
                return r;
        }
        return 0;
}

/* Plain fsync of a directory outside a save (root, at session creation). */
int dir_fsync_plain(int fd)
{
        return fsync(fd) < 0 ? -errno : 0;
}

int64_t dir_now_unix(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec;
}

/* A listing of dfd (consumed) at nesting `depth` of a tree walk: -ELOOP
 * past DIR_MAX_DEPTH, else 0 or -errno. */
static int walk_open(int dfd, int depth, DIR **ret)
{
        int r;

        if (depth > DIR_MAX_DEPTH) {
                close(dfd);
                return -ELOOP;
        }
        *ret = fdopendir(dfd);
        if (!*ret) {
                r = -errno;
                close(dfd);
                return r;
        }
        return 0;
}

static int walk(int dfd, int depth, bool top, struct dir_tree_count *tc)
{
        DIR *d;
        struct dirent *de;
        int r = walk_open(dfd, depth, &d);

        if (r < 0)
                return r;
        errno = 0;
        while ((de = readdir(d))) {
                struct stat st;
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno == ENOENT && !tc->strict)
                                continue;
                        r = -errno;
                        break;
                }
                if (st.st_mtim.tv_sec > tc->newest_mtime)
                        tc->newest_mtime = st.st_mtim.tv_sec;
                if (S_ISDIR(st.st_mode)) {
                        int sub = dir_open_dir_at(dirfd(d), de->d_name);
                        if (sub == -ENOENT && !tc->strict)
                                continue;
                        if (sub < 0 || (r = walk(sub, depth + 1, false, tc)) < 0) {
                                r = sub < 0 ? sub : r;
                                break;
                        }
                } else if (S_ISREG(st.st_mode)) {
                        if (top && strcmp(de->d_name, DIR_MARKER_NAME) == 0)
                                continue;
                        tc->files++;
                        tc->bytes += (uint64_t)st.st_size;
                } else if (tc->strict) {
                        r = -EBADMSG;
                        break;
                }
                errno = 0;
        }
        if (!de && errno && r == 0)
                r = -errno;
        closedir(d);
        return r;
}

int dir_tree_count(int dfd, bool skip_marker, struct dir_tree_count *tc)
{
        return walk(dfd, 0, skip_marker, tc);
}

int dir_tree_newest_mtime(int parent_fd, const char *name, int64_t *ret)
{
        struct dir_tree_count tc = { 0 };
        struct stat st;
        int fd, r;

        if (fstatat(parent_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        tc.newest_mtime = st.st_mtim.tv_sec;
        if (!S_ISDIR(st.st_mode)) {
                *ret = tc.newest_mtime; /* a file (a lease record being written) is its own tree */
                return 0;
        }
        fd = dir_open_dir_at(parent_fd, name);
        if (fd < 0)
                return fd;
        r = walk(fd, 0, false, &tc);
        if (r < 0)
                return r;
        *ret = tc.newest_mtime;
        return 0;
}

/* Empties the directory dfd (consumed). */
static int rm_contents(int dfd, int depth)
{
        DIR *d;
        struct dirent *de;
        int r = walk_open(dfd, depth, &d);

        if (r < 0)
                return r;
        while ((de = readdir(d))) {
                bool is_dir = de->d_type == DT_DIR;
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (de->d_type == DT_UNKNOWN) {
                        struct stat st;
                        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                                continue;
                        is_dir = S_ISDIR(st.st_mode);
                }
                if (!is_dir) {
                        if (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT && r == 0)
                                r = -errno;
                        continue;
                }
                int sub = dir_open_dir_at(dirfd(d), de->d_name);
                if (sub == -ENOENT)
                        continue;
                if (sub < 0) {
                        r = r ? r : sub;
                        continue;
                }
                int rs = rm_contents(sub, depth + 1);
                if (rs < 0 && r == 0)
                        r = rs;
                if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
                        r = -errno;
        }
        closedir(d);
        return r;
}

int dir_rmtree_at(int parent_fd, const char *name)
{
        /* Entries removed while readdir() runs may make it miss others:
         * retry a few times when the final rmdir finds the directory not
         * empty. */
        for (int attempt = 0; attempt < 4; attempt++) {
                int fd = dir_open_dir_at(parent_fd, name), r;
                if (fd == -ENOENT)
                        return 0;
                if (fd == -ENOTDIR)
                        return unlinkat(parent_fd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
                if (fd < 0)
                        return fd;
                r = rm_contents(fd, 0);
                if (unlinkat(parent_fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
                        return 0;
                if (errno != ENOTEMPTY && errno != EEXIST)
                        return r < 0 ? r : -errno;
        }
        return -ENOTEMPTY;
}

int dir_mkdir_p(const char *path)
{
        char buf[PATH_MAX];
        size_t n = strnlen(path, sizeof(buf));

        if (n == 0)
                return -EINVAL;
        if (n >= sizeof(buf))
                return -ENAMETOOLONG;
        memcpy(buf, path, n + 1);
        for (size_t i = 1; i <= n; i++) {
                if (buf[i] != '/' && buf[i] != '\0')
                        continue;
                char saved = buf[i];
                buf[i] = '\0';
                if (mkdir(buf, 0700) < 0 && errno != EEXIST)
                        return -errno;
                buf[i] = saved;
        }
        return 0;
}
