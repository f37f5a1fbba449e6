/* SPDX-License-Identifier: MIT */
/*
 * The COMMITTED marker: its codec (magic, version, counts, session, a
 * CRC-32C over the rest) and the check that an epoch directory holds what
 * its marker claims, and the search for a session's newest such epoch. A
 * save writes the marker last (dir_save.c), so an epoch whose marker and
 * tree agree is complete.
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include "dir_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "buf.h"

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
        if (!dir_session_valid(m.session, &n) || n != session_len)
                return -EBADMSG;
        m.committed_unix = (int64_t)when;
        *ret = m;
        return 0;
}

#define WHY(...) (why ? (void)snprintf(why, why_cap, __VA_ARGS__) : (void)0)

int dir_epoch_check(int epoch_fd, const char *session, uint64_t epoch, struct dir_marker *ret, char *why,
                    size_t why_cap)
{
        struct dir_tree_count tc = { .strict = true };
        struct dir_marker m;
        uint8_t buf[DIR_MARKER_MAX];
        struct stat st;
        size_t got = 0;
        int fd, r;

        fd = openat(epoch_fd, DIR_MARKER_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                r = errno == ENOENT ? -ENOENT : -errno;
                WHY("no readable " DIR_MARKER_NAME " marker (%s)", strerror(-r));
                return r;
        }
        if (fstat(fd, &st) < 0) {
                r = -errno;
                close(fd);
                WHY("cannot stat the " DIR_MARKER_NAME " marker (%s)", strerror(-r));
                return r;
        }
        if (!S_ISREG(st.st_mode) || st.st_size < 4 || (uint64_t)st.st_size > DIR_MARKER_MAX) {
                close(fd);
                WHY("the " DIR_MARKER_NAME " marker is not a file of 4 to %u bytes", DIR_MARKER_MAX);
                return -EBADMSG;
        }
        while (got < (size_t)st.st_size) {
                ssize_t n = pread(fd, buf + got, (size_t)st.st_size - got, (off_t)got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        r = n < 0 ? -errno : -EBADMSG;
                        close(fd);
                        WHY("cannot read the " DIR_MARKER_NAME " marker (%s)", strerror(-r));
                        return r;
                }
                got += (size_t)n;
        }
        close(fd);
        r = dir_marker_decode(buf, got, &m);
        if (r < 0) {
                WHY("the " DIR_MARKER_NAME " marker is damaged (bad magic, version or checksum)");
                return r;
        }
        if (m.epoch != epoch || strcmp(m.session, session) != 0) {
                WHY("the " DIR_MARKER_NAME " marker names session %s epoch %llu", m.session,
                    (unsigned long long)m.epoch);
                return -EBADMSG;
        }
        fd = openat(epoch_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        r = dir_tree_count(fd, true, &tc);
        if (r < 0) {
                WHY("the objects cannot be counted (%s)", strerror(-r));
                return r;
        }
        if (tc.files != m.objects || tc.bytes != m.bytes) {
                WHY("%llu object file(s) of %llu bytes on disk where the marker says %llu of %llu (an object is "
                    "missing, extra or truncated)",
                    (unsigned long long)tc.files, (unsigned long long)tc.bytes, (unsigned long long)m.objects,
                    (unsigned long long)m.bytes);
                return -EBADMSG;
        }
        *ret = m;
        return 0;
}

int dir_epoch_verify(int epoch_fd, const char *session, uint64_t epoch, struct dir_marker *ret)
{
        return dir_epoch_check(epoch_fd, session, epoch, ret, NULL, 0);
}

/* ---- finding committed epochs */

static int cmp_desc(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? 1 : x > y ? -1 : 0;
}

/* The newest epoch of the session whose marker and tree check out.
 * -ENOENT if none. ret_fd (optional) gets that epoch's directory. */
int dir_newest_committed(int session_fd, const char *session, uint64_t *ret_epoch, struct dir_marker *ret_marker,
                         int *ret_fd)
{
        uint64_t *epochs = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        DIR *d;
        int r = dir_list_open(session_fd, &d);

        if (r < 0)
                return r;
        r = -ENOENT;
        while ((de = readdir(d))) {
                uint64_t e;
                if (!dir_epoch_parse(de->d_name, &e))
                        continue;
                if (n == cap) {
                        size_t ncap = cap ? cap * 2 : 16;
                        uint64_t *ne;
                        if (ncap > DIR_MAX_EPOCHS_SCAN) {
                                r = -E2BIG;
                                goto out;
                        }
                        ne = realloc(epochs, ncap * sizeof(*ne));
                        if (!ne) {
                                r = -ENOMEM;
                                goto out;
                        }
                        epochs = ne;
                        cap = ncap;
                }
                epochs[n++] = e;
        }
        if (n > 1)
                qsort(epochs, n, sizeof(*epochs), cmp_desc);
        r = -ENOENT;
        for (size_t i = 0; i < n; i++) {
                char name[DIR_EPOCH_HEX + 1];
                struct dir_marker m;
                int efd;
                dir_epoch_name(epochs[i], name);
                efd = dir_open_dir_at(session_fd, name);
                if (efd < 0)
                        continue;
                if (dir_epoch_verify(efd, session, epochs[i], &m) == 0) {
                        *ret_epoch = epochs[i];
                        if (ret_marker)
                                *ret_marker = m;
                        if (ret_fd)
                                *ret_fd = efd;
                        else
                                close(efd);
                        r = 0;
                        break;
                }
                close(efd);
        }
out:
        closedir(d);
        free(epochs);
        return r;
}
