/* SPDX-License-Identifier: MIT */
/*
 * The COMMITTED marker: its codec (magic, version, counts, session, a
 * CRC-32C over the rest) and the check that an epoch directory holds what
 * its marker claims. A save writes the marker last (dir_save.c), so an
 * epoch whose marker and tree agree is complete.
 */
#include "dir_internal.h"

#include <errno.h>
#include <fcntl.h>
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

int dir_epoch_verify(int epoch_fd, const char *session, uint64_t epoch, struct dir_marker *ret)
{
        struct dir_tree_count tc = { .strict = true };
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
        r = dir_tree_count(fd, true, &tc);
        if (r < 0)
                return r;
        if (tc.files != m.objects || tc.bytes != m.bytes)
                return -EBADMSG;
        *ret = m;
        return 0;
}
