/* SPDX-License-Identifier: MIT */
/*
 * The directory provider's helpers: error text, name rules and their
 * mapping to paths, the COMMITTED marker, tree walks, fault injection.
 * No I/O on object data here; that is dir_io.c.
 */
#include "dir_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include "buf.h"

int dir_fail(struct lupine_ckpt_instance *inst, int err, const char *fmt, ...)
{
        va_list ap;
        int n;

        if (!inst)
                return err;
        va_start(ap, fmt);
        n = vsnprintf(inst->err, sizeof(inst->err), fmt, ap);
        va_end(ap);
        if (err < 0 && n >= 0 && (size_t)n < sizeof(inst->err)) {
                char eb[128];
                /* GNU strerror_r: returns the text, thread-safe */
                const char *es = strerror_r(-err, eb, sizeof(eb));
                snprintf(inst->err + n, sizeof(inst->err) - (size_t)n, ": %s", es);
        }
        return err;
}

/* ---- small shared helpers */

void dir_clear_error(struct lupine_ckpt_instance *inst)
{
        inst->err[0] = '\0';
}

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

/* ---- names */

static bool name_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
               c == '_' || c == '-';
}

static bool session_valid(const char *s, size_t *ret_len)
{
        size_t n = strnlen(s, DIR_SESSION_MAX + 1);

        if (n == 0 || n > DIR_SESSION_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!name_char(s[i]))
                        return false;
        *ret_len = n;
        return true;
}

int dir_session_to_sdir(const char *session, char sdir[static DIR_SDIR_MAX + 1])
{
        size_t n, o = 0;

        if (!session || !session_valid(session, &n))
                return -EINVAL;
        /* ".", ".." and ".tmp-*" are valid session names: keep them clear of
         * the directory's own entries with a character names never hold. */
        if (session[0] == '.')
                sdir[o++] = '%';
        memcpy(sdir + o, session, n);
        sdir[o + n] = '\0';
        return 0;
}

bool dir_sdir_to_session(const char *sdir, char session[static DIR_SESSION_MAX + 1])
{
        const char *s = sdir;
        size_t n;

        if (s[0] == '%') {
                s++;
                if (s[0] != '.')
                        return false;
        } else if (s[0] == '.') {
                return false;
        }
        if (!session_valid(s, &n) || s[n] != '\0')
                return false;
        memcpy(session, s, n + 1);
        return true;
}

bool dir_object_name_valid(const char *name)
{
        size_t n;
        const char *comp;

        if (!name)
                return false;
        n = strnlen(name, DIR_OBJECT_MAX + 1);
        if (n == 0 || n > DIR_OBJECT_MAX)
                return false;
        if (strstr(name, ".."))
                return false;
        if (strcmp(name, DIR_MARKER_NAME) == 0)
                return false;
        comp = name;
        for (size_t i = 0; i <= n; i++) {
                char c = name[i];
                if (c == '/' || c == '\0') {
                        size_t len = (size_t)(name + i - comp);
                        /* no empty component (leading, trailing or doubled '/') and
                         * no ".": each name maps to exactly one file */
                        if (len == 0 || (len == 1 && comp[0] == '.'))
                                return false;
                        comp = name + i + 1;
                        continue;
                }
                if (!name_char(c))
                        return false;
        }
        return true;
}

size_t dir_stripe_locate(uint64_t offset, size_t len, unsigned *ret_stripe, uint64_t *ret_at)
{
        uint64_t unit = offset / DIR_STRIPE_UNIT, in_unit = offset % DIR_STRIPE_UNIT;

        *ret_stripe = (unsigned)(unit % DIR_STRIPES);
        *ret_at = unit / DIR_STRIPES * DIR_STRIPE_UNIT + in_unit;
        return len < DIR_STRIPE_UNIT - in_unit ? len : (size_t)(DIR_STRIPE_UNIT - in_unit);
}

void dir_stripe_name(const char *name, unsigned stripe, char *out)
{
        snprintf(out, DIR_OBJECT_MAX + 8, "%s@%u", name, stripe);
}

bool dir_stripe_name_fits(const char *name)
{
        const char *last = strrchr(name, '/');
        last = last ? last + 1 : name;
        return strlen(last) + 4 <= DIR_OBJECT_MAX; /* "@15" and room to spare */
}

void dir_epoch_name(uint64_t epoch, char out[static DIR_EPOCH_HEX + 1])
{
        snprintf(out, DIR_EPOCH_HEX + 1, "%016" PRIx64, epoch);
}

bool dir_epoch_parse(const char *name, uint64_t *ret)
{
        uint64_t v = 0;

        for (int i = 0; i < DIR_EPOCH_HEX; i++) {
                char c = name[i];
                unsigned d;
                if (c >= '0' && c <= '9')
                        d = (unsigned)(c - '0');
                else if (c >= 'a' && c <= 'f')
                        d = (unsigned)(c - 'a' + 10);
                else
                        return false;
                v = (v << 4) | d;
        }
        if (name[DIR_EPOCH_HEX] != '\0' || v == 0)
                return false;
        *ret = v;
        return true;
}

int dir_tmp_name(char *out, size_t cap, const char *tag)
{
        uint64_t rnd;
        int n;

        if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
                /* no entropy yet: uniqueness, not secrecy, is what we need */
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                rnd = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)(uintptr_t)out;
        }
        n = snprintf(out, cap, DIR_TMP_PREFIX "%s-%ld-%016" PRIx64, tag, (long)getpid(), rnd);
        if (n < 0 || (size_t)n >= cap)
                return -ENAMETOOLONG;
        return 0;
}

/* ---- the COMMITTED marker */

uint32_t dir_crc32c(uint32_t crc, const void *p, size_t n)
{
        /* bitwise CRC-32C (Castagnoli): the marker is a few hundred bytes */
        const uint8_t *b = p;

        crc = ~crc;
        while (n--) {
                crc ^= *b++;
                for (int k = 0; k < 8; k++)
                        crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
        }
        return ~crc;
}

int dir_marker_encode(const struct dir_marker *m, uint8_t *buf, size_t cap)
{
        struct lup_wr w = lup_wr_init(buf, cap < DIR_MARKER_MAX ? cap : DIR_MARKER_MAX);

        lup_wr_bytes(&w, DIR_MARKER_MAGIC, 8);
        lup_wr_u32(&w, DIR_MARKER_VERSION);
        lup_wr_u64(&w, m->epoch);
        lup_wr_u64(&w, m->objects);
        lup_wr_u64(&w, m->bytes);
        lup_wr_u64(&w, (uint64_t)m->committed_unix);
        lup_wr_str16(&w, m->session, strnlen(m->session, DIR_SESSION_MAX));
        if (w.err)
                return w.err;
        lup_wr_u32(&w, dir_crc32c(0, buf, w.len));
        if (w.err)
                return w.err;
        return (int)w.len;
}

int dir_marker_decode(const uint8_t *buf, size_t len, struct dir_marker *ret)
{
        struct dir_marker m = { 0 };
        struct lup_rd r;
        const uint8_t *magic;
        const char *session;
        size_t session_len, n;
        uint32_t version;
        uint64_t when;

        if (len < 4 || len > DIR_MARKER_MAX)
                return -EBADMSG;
        if (dir_crc32c(0, buf, len - 4) != lup_le32(buf + len - 4))
                return -EBADMSG;
        r = lup_rd_init(buf, len - 4);
        lup_rd_bytes(&r, 8, &magic);
        lup_rd_u32(&r, &version);
        lup_rd_u64(&r, &m.epoch);
        lup_rd_u64(&r, &m.objects);
        lup_rd_u64(&r, &m.bytes);
        lup_rd_u64(&r, &when);
        lup_rd_str16(&r, DIR_SESSION_MAX, &session, &session_len);
        if (lup_rd_finish(&r) < 0)
                return -EBADMSG;
        if (memcmp(magic, DIR_MARKER_MAGIC, 8) != 0 || version != DIR_MARKER_VERSION)
                return -EBADMSG;
        memcpy(m.session, session, session_len);
        m.session[session_len] = '\0';
        if (!session_valid(m.session, &n) || n != session_len)
                return -EBADMSG;
        m.committed_unix = (int64_t)when;
        *ret = m;
        return 0;
}

/* ---- tree walks */


struct tree_count {
        uint64_t files, bytes;
        int64_t newest_mtime;
        bool strict;    /* anything but files and directories is an error */
};

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

static int walk(int dfd, int depth, bool top, struct tree_count *tc)
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

int dir_tree_newest_mtime(int parent_fd, const char *name, int64_t *ret)
{
        struct tree_count tc = { 0 };
        struct stat st;
        int fd, r;

        if (fstatat(parent_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        tc.newest_mtime = st.st_mtim.tv_sec;
        fd = dir_open_dir_at(parent_fd, name);
        if (fd < 0)
                return fd;
        r = walk(fd, 0, false, &tc);
        if (r < 0)
                return r;
        *ret = tc.newest_mtime;
        return 0;
}

int dir_epoch_verify(int epoch_fd, const char *session, uint64_t epoch, struct dir_marker *ret)
{
        struct tree_count tc = { .strict = true };
        struct dir_marker m;
        uint8_t buf[DIR_MARKER_MAX];
        struct stat st;
        size_t got = 0;
        int fd, r;

        fd = openat(epoch_fd, DIR_MARKER_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? -ENOENT : -errno;
        if (fstat(fd, &st) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        if (!S_ISREG(st.st_mode) || st.st_size < 4 || (uint64_t)st.st_size > DIR_MARKER_MAX) {
                close(fd);
                return -EBADMSG;
        }
        while (got < (size_t)st.st_size) {
                ssize_t n = pread(fd, buf + got, (size_t)st.st_size - got, (off_t)got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        r = n < 0 ? -errno : -EBADMSG;
                        close(fd);
                        return r;
                }
                got += (size_t)n;
        }
        close(fd);
        r = dir_marker_decode(buf, got, &m);
        if (r < 0)
                return r;
        if (m.epoch != epoch || strcmp(m.session, session) != 0)
                return -EBADMSG;
        fd = openat(epoch_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        r = walk(fd, 0, true, &tc);
        if (r < 0)
                return r;
        if (tc.files != m.objects || tc.bytes != m.bytes)
                return -EBADMSG;
        *ret = m;
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

/* ---- fault injection */

static const struct {
        const char *name;
        enum dir_fault_point point;
        int default_err;
} fault_names[] = {
        { "create", DIR_FAULT_CREATE, ENOSPC },
        { "write", DIR_FAULT_WRITE, ENOSPC },
        { "short", DIR_FAULT_SHORT, 0 },
        { "fsync", DIR_FAULT_FSYNC, EIO },
        { "marker", DIR_FAULT_MARKER, ENOSPC },
        { "commit-rename", DIR_FAULT_RENAME, EIO },
        { "crash-before-marker", DIR_FAULT_CRASH_MARKER, ECANCELED },
        { "crash-before-rename", DIR_FAULT_CRASH_RENAME, ECANCELED },
        { "crash-before-cleanup", DIR_FAULT_CRASH_CLEANUP, ECANCELED },
        { "no-uring", DIR_FAULT_NO_URING, 0 },
        { "flip", DIR_FAULT_FLIP, 0 },
};

static const struct {
        const char *name;
        int err;
} fault_errnos[] = {
        { "ENOSPC", ENOSPC }, { "EIO", EIO }, { "EDQUOT", EDQUOT }, { "EROFS", EROFS },
        { "EFBIG", EFBIG },   { "EINTR", EINTR }, { "EAGAIN", EAGAIN },
};

static int parse_fault_rule(const char *rule, size_t len, struct dir_faults *f)
{
        char buf[64], *fields[3] = { NULL, NULL, NULL }, *save = NULL;
        size_t nf = 0, i;

        if (len == 0 || len >= sizeof(buf))
                return -EINVAL;
        memcpy(buf, rule, len);
        buf[len] = '\0';
        for (char *t = strtok_r(buf, ":", &save); t; t = strtok_r(NULL, ":", &save)) {
                if (nf == 3)
                        return -EINVAL;
                fields[nf++] = t;
        }
        if (nf == 0)
                return -EINVAL;
        for (i = 0; i < sizeof(fault_names) / sizeof(fault_names[0]); i++)
                if (strcmp(fields[0], fault_names[i].name) == 0)
                        break;
        if (i == sizeof(fault_names) / sizeof(fault_names[0]))
                return -EINVAL;
        enum dir_fault_point p = fault_names[i].point;
        f->armed[p] = true;
        f->nth[p] = 0;
        f->err[p] = fault_names[i].default_err;
        if (nf >= 2) {
                char *end;
                errno = 0;
                unsigned long v = strtoul(fields[1], &end, 10);
                if (errno || *end || end == fields[1] || v == 0 || v > UINT32_MAX)
                        return -EINVAL;
                f->nth[p] = (uint32_t)v;
        }
        if (nf == 3) {
                size_t k;
                if (f->err[p] == 0)
                        return -EINVAL; /* "short", "no-uring" and "flip" take no errno */
                for (k = 0; k < sizeof(fault_errnos) / sizeof(fault_errnos[0]); k++)
                        if (strcmp(fields[2], fault_errnos[k].name) == 0)
                                break;
                if (k == sizeof(fault_errnos) / sizeof(fault_errnos[0]))
                        return -EINVAL;
                f->err[p] = fault_errnos[k].err;
        }
        return 0;
}

int dir_faults_parse(const char *spec, struct dir_faults *ret)
{
        struct dir_faults f = { 0 };

        if (spec) {
                const char *p = spec;
                while (*p) {
                        size_t len = strcspn(p, ",");
                        int r = parse_fault_rule(p, len, &f);
                        if (r < 0)
                                return r;
                        p += len;
                        if (*p == ',')
                                p++;
                }
        }
        *ret = f;
        return 0;
}

int dir_fault_hit(const struct dir_faults *f, struct dir_fault_counts *c, enum dir_fault_point point)
{
        if (!f->armed[point])
                return 0;
        c->n[point]++;
        if (f->nth[point] != 0 && c->n[point] != f->nth[point])
                return 0;
        return f->err[point] ? f->err[point] : 1;
}
