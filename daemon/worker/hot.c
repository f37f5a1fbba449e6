/* SPDX-License-Identifier: MIT */
/*
 * The hot checkpoint, worker side (docs/sessions.md, "Hot checkpoint and
 * zero-disconnect upgrade"; the control messages are in daemon/ctl.h).
 *
 * At drain: every arena chunk goes to the supervisor as a POSIX fd
 * (LUPD_CTL_HOT_MEM, at most LUPD_CTL_MAX_FDS per message). Arena memory
 * comes from exactly two places (worker/arena_map.c: arena_map), and each has
 * its own way out:
 *   - created here by cuMemCreate with CU_MEM_HANDLE_TYPE_POSIX_FILE_
 *     DESCRIPTOR in requestedHandleTypes (new sessions, chunks a restore
 *     copies from the durable checkpoint): cuMemExportToShareableHandle on
 *     the handle the worker holds from creation to unmap;
 *   - imported from an fd by a hot restore: the real driver refuses to
 *     export such a handle again (CUDA_ERROR_INVALID_VALUE, driver 580 on
 *     an H200, the second upgrade in a row), so the worker keeps the fd it
 *     imported and hands out a dup of it, which names the same memory.
 * No path releases a handle while its chunk stays mapped, so none needs
 * cuMemRetainAllocationHandle.
 * For an upgrade the client connection goes back too (LUPD_CTL_HANDBACK),
 * with the part of a frame the worker had already read in a sealed memfd.
 *
 * At restore (--hot): the supervisor's LUPD_CTL_HOT_MAP messages give fds
 * by chunk address; arena_map imports one instead of creating memory, maps
 * it at the same address, and restore_chunk copies nothing for it. A chunk
 * without an fd comes from the durable copy if the checkpoint has one;
 * otherwise the session is refused. LUPD_CTL_CONN hands over a connection
 * that the restored session serves at once.
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "ckpt_codec.h"
#include "ctl.h"
#include "frame.h"
#include "log.h"
#include "net.h"
#include "worker/session.h"

struct lupw_hot_ent {
        uint64_t addr;
        int fd;                 /* -1 once imported or closed */
        bool imported;
};

struct lupw_hot {
        struct lupw_hot_ent *v;
        size_t n, cap;
        uint64_t epoch;         /* of the checkpoint the fds belong to */
        bool active;            /* arena_map may import (during the restore) */
        int conn_fd;            /* LUPD_CTL_CONN, or -1 */
        uint8_t *input;         /* bytes of a frame read in part before the upgrade */
        uint32_t input_len;
        uint64_t imported_bytes;
        size_t imported_chunks;
};

/* Many chunks mean many fds: let this process hold as many as it may. */
void lupw_raise_nofile(void)
{
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void)setrlimit(RLIMIT_NOFILE, &rl);
        }
}

static int safe_close_fd(int fd)
{
        if (fd >= 0)
                close(fd);
        return -1;
}

static void close_all(int *fds, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (fds[i] >= 0)
                        close(fds[i]);
}

/* ---- drain */

static const char *origin_name(enum lupw_chunk_origin o)
{
        return o == LUPW_CHUNK_IMPORTED ? "imported from a memory fd by a hot restore"
                                        : "created by cuMemCreate with a POSIX fd handle type";
}

/* One chunk's fd: a dup of the fd an imported chunk came from, or the
 * driver's export of a created one. -errno, logged. */
static int export_chunk(struct lupw_session *s, const struct lupw_chunk *c, int *ret_fd)
{
        const struct lupw_backend *be = &s->be.fn;
        const char *ename = NULL;
        CUresult r;
        int fd = -1;

        if (c->origin == LUPW_CHUNK_IMPORTED) {
                fd = c->fd >= 0 ? fcntl(c->fd, F_DUPFD_CLOEXEC, 0) : -1;
                if (fd < 0) {
                        int e = c->fd >= 0 ? errno : EBADF;
                        lup_err("session %s: hot checkpoint: the chunk at 0x%" PRIx64 " (%" PRIu64 " bytes, %s): "
                                "fcntl(F_DUPFD_CLOEXEC) of the fd it was imported from failed: %s%s",
                                s->name, c->addr, c->size, origin_name(c->origin), strerror(e),
                                e == EMFILE ? " (RLIMIT_NOFILE)" : "");
                        return -e;
                }
                *ret_fd = fd;
                return 0;
        }
        r = be->cuMemExportToShareableHandle(&fd, c->handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
        if (r == CUDA_SUCCESS && fd >= 0) {
                *ret_fd = fd;
                return 0;
        }
        if (be->cuGetErrorName(r, &ename) != CUDA_SUCCESS)
                ename = NULL;
        lup_err("session %s: hot checkpoint: the chunk at 0x%" PRIx64 " (%" PRIu64 " bytes, %s): "
                "cuMemExportToShareableHandle(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) failed: CUresult %d (%s)%s",
                s->name, c->addr, c->size, origin_name(c->origin), (int)r, ename ? ename : "?",
                r == CUDA_SUCCESS ? ", yet gave no fd"
                : r == CUDA_ERROR_OUT_OF_MEMORY ? ": out of file descriptors? (RLIMIT_NOFILE)" : "");
        return -EIO;
}

int lupw_hot_export(struct lupw_session *s, int **ret_fds)
{
        int *fds;

        lupw_raise_nofile();
        fds = malloc((s->mem.n_chunks ? s->mem.n_chunks : 1) * sizeof(*fds));
        if (!fds)
                return -ENOMEM;
        for (size_t i = 0; i < s->mem.n_chunks; i++) {
                int rc = export_chunk(s, &s->mem.chunks[i], &fds[i]);

                if (rc < 0) {
                        close_all(fds, i);
                        free(fds);
                        return rc;
                }
        }
        *ret_fds = fds;
        return (int)s->mem.n_chunks;
}

int lupw_hot_send(struct lupw_session *s, int *fds, uint64_t epoch)
{
        uint8_t msg[LUPD_CTL_HOT_MEM_FIXED + LUPD_CTL_MAX_FDS * LUPD_CTL_HOT_MEM_REC];
        int rc = 0;

        for (size_t first = 0; first < s->mem.n_chunks; first += LUPD_CTL_MAX_FDS) {
                size_t n = s->mem.n_chunks - first < LUPD_CTL_MAX_FDS ? s->mem.n_chunks - first : LUPD_CTL_MAX_FDS;
                struct lup_wr w = lup_wr_init(msg, sizeof(msg));

                lup_wr_u32(&w, LUPD_CTL_HOT_MEM);
                lup_wr_u32(&w, (uint32_t)n);
                lup_wr_u64(&w, epoch);
                for (size_t i = first; i < first + n; i++) {
                        lup_wr_u64(&w, s->mem.chunks[i].addr);
                        lup_wr_u64(&w, s->mem.chunks[i].size);
                }
                rc = w.err ? w.err : lup_send_fds(s->ctl_fd, msg, w.len, fds + first, (int)n);
                if (rc < 0) {
                        lup_err("session %s: hot checkpoint: cannot hand memory fds to the supervisor: %s", s->name,
                                strerror(-rc));
                        break;
                }
        }
        /* What went out is referenced by the socket now; our copies go. */
        close_all(fds, s->mem.n_chunks);
        return rc;
}

/* A sealed memfd holding [p, p + n). */
static int input_memfd(const uint8_t *p, size_t n)
{
        int fd = memfd_create("lupine-input", MFD_CLOEXEC | MFD_ALLOW_SEALING);

        if (fd < 0)
                return -errno;
        for (size_t off = 0; off < n;) {
                ssize_t k = write(fd, p + off, n - off);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        close(fd);
                        return -EIO;
                }
                off += (size_t)k;
        }
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
                int e = -errno;
                close(fd);
                return e;
        }
        return fd;
}

int lupw_handback(struct lupw_session *s, uint64_t epoch)
{
        uint8_t msg[LUPD_CTL_HANDBACK_LEN];
        size_t pending = s->rx.len - s->rx.off;
        int fds[2] = { s->fd, -1 };
        int rc;

        if (s->fd < 0)
                return -ENOTCONN;
        rc = lupw_flush_out(s);
        if (rc < 0)
                return rc;
        if (pending) {
                fds[1] = input_memfd(s->rx.buf + s->rx.off, pending);
                if (fds[1] < 0)
                        return fds[1];
        }
        lup_put32(msg, LUPD_CTL_HANDBACK);
        lup_put32(msg + 4, (uint32_t)pending);
        lup_put64(msg + 8, epoch);
        lup_put64(msg + 16, s->last_seq);
        rc = lup_send_fds(s->ctl_fd, msg, sizeof(msg), fds, pending ? 2 : 1);
        if (fds[1] >= 0)
                close(fds[1]);
        if (rc < 0)
                return rc;
        /* The supervisor holds the connection now: close our copy without
         * shutting it down, which would end it for everyone. */
        close(s->fd);
        s->fd = -1;
        s->rx.off = s->rx.len = 0;
        lup_info("session %s: connection handed back to the supervisor at seq %llu (%zu bytes of a frame in part)",
                 s->name, (unsigned long long)s->last_seq, pending);
        return 0;
}

/* ---- restore */

static int hot_get(struct lupw_session *s)
{
        if (s->ckpt.hot)
                return 0;
        s->ckpt.hot = calloc(1, sizeof(*s->ckpt.hot));
        if (!s->ckpt.hot)
                return -ENOMEM;
        s->ckpt.hot->conn_fd = -1;
        return 0;
}

static int add_ent(struct lupw_hot *h, uint64_t addr, int fd)
{
        if (h->n == h->cap) {
                size_t cap = h->cap ? h->cap * 2 : 64;
                struct lupw_hot_ent *v = realloc(h->v, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                h->v = v;
                h->cap = cap;
        }
        for (size_t i = 0; i < h->n; i++)
                if (h->v[i].addr == addr)
                        return -EEXIST;
        h->v[h->n++] = (struct lupw_hot_ent){ .addr = addr, .fd = fd };
        return 0;
}

static int read_input(struct lupw_hot *h, int fd, uint32_t len)
{
        struct stat st;

        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != len || len > LUP_MAX_PAYLOAD + LUP_HDR_SIZE)
                return -EBADMSG;
        h->input = malloc(len);
        if (!h->input)
                return -ENOMEM;
        for (uint32_t off = 0; off < len;) {
                ssize_t k = pread(fd, h->input + off, len - off, off);
                if (k <= 0)
                        return -EIO;
                off += (uint32_t)k;
        }
        h->input_len = len;
        return 0;
}

static int hot_message(struct lupw_session *s, const uint8_t *msg, size_t n, int *fds, int nfds, bool *ret_end)
{
        struct lupw_hot *h = s->ckpt.hot;
        struct lup_rd r = lup_rd_init(msg, n);
        uint32_t type = 0, count = 0;
        uint64_t epoch = 0;
        int rc;

        lup_rd_u32(&r, &type);
        lup_rd_u32(&r, &count);
        lup_rd_u64(&r, &epoch);
        if (r.err)
                return -EBADMSG;
        if (h->epoch && epoch != h->epoch)
                return -EBADMSG;
        h->epoch = epoch;
        switch (type) {
        case LUPD_CTL_HOT_MAP:
                if (count == 0 || count > LUPD_CTL_MAX_FDS || (int)count != nfds ||
                    n != LUPD_CTL_HOT_MAP_FIXED + (size_t)count * 8)
                        return -EBADMSG;
                for (uint32_t i = 0; i < count; i++) {
                        uint64_t addr;
                        lup_rd_u64(&r, &addr);
                        rc = add_ent(h, addr, fds[i]);
                        if (rc < 0)
                                return rc;
                        fds[i] = -1; /* ours now */
                }
                return 0;
        case LUPD_CTL_CONN:
                if (n != LUPD_CTL_CONN_LEN || h->conn_fd >= 0 || nfds != (count ? 2 : 1))
                        return -EBADMSG;
                if (count) {
                        rc = read_input(h, fds[1], count);
                        if (rc < 0)
                                return rc;
                }
                h->conn_fd = fds[0];
                fds[0] = -1;
                return 0;
        case LUPD_CTL_HOT_END:
                if (n != LUPD_CTL_HOT_END_LEN || nfds != 0 || count != h->n)
                        return -EBADMSG;
                *ret_end = true;
                return 0;
        default:
                return -EBADMSG;
        }
}

int lupw_hot_receive(struct lupw_session *s)
{
        uint8_t msg[LUPD_CTL_HOT_MAP_FIXED + LUPD_CTL_MAX_FDS * 8];
        int fds[LUPD_CTL_MAX_FDS];
        bool end = false;
        int rc = hot_get(s);

        if (rc < 0)
                return rc;
        lupw_raise_nofile();
        while (!end) {
                int nfds = 0;
                int n = lup_recv_fds(s->ctl_fd, msg, sizeof(msg), fds, LUPD_CTL_MAX_FDS, &nfds);

                if (n <= 0) {
                        lup_err("session %s: hot restore: the supervisor closed the control channel", s->name);
                        return -EPIPE;
                }
                rc = hot_message(s, msg, (size_t)n, fds, nfds, &end);
                close_all(fds, (size_t)nfds);
                if (rc < 0) {
                        lup_err("session %s: hot restore: bad message from the supervisor (%s)", s->name,
                                strerror(-rc));
                        return rc;
                }
        }
        s->ckpt.hot->active = true;
        lup_info("session %s: hot restore: %zu memory fd(s) for checkpoint epoch %" PRIu64 "%s", s->name,
                 s->ckpt.hot->n, s->ckpt.hot->epoch, s->ckpt.hot->conn_fd >= 0 ? ", and its client connection" : "");
        return 0;
}

int lupw_hot_check_epoch(struct lupw_session *s, uint64_t epoch)
{
        struct lupw_hot *h = s->ckpt.hot;

        if (!h || h->n == 0 || h->epoch == epoch)
                return 0;
        /* fds of another checkpoint: useless (the supervisor matched them
         * by the provider's listing, which has moved on meanwhile) */
        lup_warn("session %s: hot restore: the memory fds are for epoch %" PRIu64 ", the checkpoint is epoch %" PRIu64
                 "; not using them",
                 s->name, h->epoch, epoch);
        for (size_t i = 0; i < h->n; i++)
                if (h->v[i].fd >= 0)
                        h->v[i].fd = safe_close_fd(h->v[i].fd);
        h->n = 0;
        return 0;
}

int lupw_hot_import(struct lupw_session *s, uint64_t addr, uint64_t size, CUmemGenericAllocationHandle *ret,
                    int *ret_fd)
{
        struct lupw_hot *h = s->ckpt.hot;
        struct lupw_hot_ent *e = NULL;
        struct stat st;
        CUresult r;

        if (s->ckpt.mem == 0)
                return 0; /* not restoring: plain allocation */
        for (size_t i = 0; h && h->active && i < h->n && !e; i++)
                if (h->v[i].addr == addr && h->v[i].fd >= 0)
                        e = &h->v[i];
        if (!e) {
                if (s->ckpt.mem & LUP_CKPT_MEM_DURABLE) {
                        if (!h)
                                return 0; /* a durable restore */
                        lup_warn("session %s: hot restore: no fd for the chunk at 0x%" PRIx64
                                 "; copying it from the durable checkpoint",
                                 s->name, addr);
                        return 0;
                }
                lup_err("session %s: cannot be restored: its checkpoint kept device memory only on the GPU "
                        "(--checkpoint-mode hot), and the fd for the chunk at 0x%" PRIx64 " (%" PRIu64
                        " bytes) is missing (the fd store lost it, or the GPU was reset)",
                        s->name, addr, size);
                return -ENOENT;
        }
        /* The real driver's fds say nothing of their size; the simulator's
         * memfds do, and a mismatch there is caught here. */
        if (fstat(e->fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size != size) {
                lup_err("session %s: hot restore: the fd for the chunk at 0x%" PRIx64 " holds %lld bytes, the "
                        "checkpoint says %" PRIu64,
                        s->name, addr, (long long)st.st_size, size);
                e->fd = safe_close_fd(e->fd);
                return (s->ckpt.mem & LUP_CKPT_MEM_DURABLE) ? 0 : -EBADMSG;
        }
        r = s->be.fn.cuMemImportFromShareableHandle(ret, (void *)(uintptr_t)e->fd,
                                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        if (r != CUDA_SUCCESS) {
                e->fd = safe_close_fd(e->fd);
                lup_err("session %s: hot restore: importing the chunk at 0x%" PRIx64 " failed (CUresult %d)%s", s->name,
                        addr, (int)r,
                        (s->ckpt.mem & LUP_CKPT_MEM_DURABLE) ? "; copying it from the durable checkpoint" : "");
                return (s->ckpt.mem & LUP_CKPT_MEM_DURABLE) ? 0 : -EIO;
        }
        /* The handle holds the memory; the fd goes with the chunk, for the
         * next hot checkpoint (lupw_hot_export). */
        *ret_fd = e->fd;
        e->fd = -1;
        e->imported = true;
        h->imported_bytes += size;
        h->imported_chunks++;
        return 1;
}

void lupw_hot_unimport(struct lupw_session *s, uint64_t addr, uint64_t size)
{
        struct lupw_hot *h = s->ckpt.hot;

        for (size_t i = 0; h && i < h->n; i++) {
                if (h->v[i].addr == addr && h->v[i].imported) {
                        h->v[i].imported = false;
                        h->imported_bytes -= size;
                        h->imported_chunks--;
                }
        }
}

bool lupw_hot_imported(const struct lupw_session *s, uint64_t addr)
{
        const struct lupw_hot *h = s->ckpt.hot;

        for (size_t i = 0; h && i < h->n; i++)
                if (h->v[i].addr == addr)
                        return h->v[i].imported;
        return false;
}

void lupw_hot_stats(const struct lupw_session *s, size_t *ret_chunks, uint64_t *ret_bytes)
{
        *ret_chunks = s->ckpt.hot ? s->ckpt.hot->imported_chunks : 0;
        *ret_bytes = s->ckpt.hot ? s->ckpt.hot->imported_bytes : 0;
}

int lupw_hot_adopt_conn(struct lupw_session *s)
{
        struct lupw_hot *h = s->ckpt.hot;

        if (!h || h->conn_fd < 0)
                return 0;
        if (h->input_len > s->rx.cap) {
                lup_err("session %s: the handed-over connection has %u bytes pending, more than fit", s->name,
                        h->input_len);
                return -EMSGSIZE;
        }
        s->fd = h->conn_fd;
        h->conn_fd = -1;
        (void)lup_set_blocking(s->fd);
        memcpy(s->rx.buf, h->input, h->input_len);
        s->rx.off = 0;
        s->rx.len = h->input_len;
        lup_info("session %s: serving its client's connection again at seq %llu, without a reconnect", s->name,
                 (unsigned long long)s->last_seq);
        return 1;
}

void lupw_hot_done(struct lupw_session *s)
{
        struct lupw_hot *h = s->ckpt.hot;
        size_t unused = 0;

        if (!h)
                return;
        for (size_t i = 0; i < h->n; i++) {
                if (h->v[i].fd >= 0) {
                        unused++;
                        h->v[i].fd = safe_close_fd(h->v[i].fd);
                }
        }
        if (unused)
                lup_warn("session %s: hot restore: %zu memory fd(s) matched no chunk of the checkpoint; closed", s->name,
                         unused);
        h->active = false;
}

void lupw_hot_free(struct lupw_session *s)
{
        struct lupw_hot *h = s->ckpt.hot;

        if (!h)
                return;
        lupw_hot_done(s);
        if (h->conn_fd >= 0)
                close(h->conn_fd);
        free(h->input);
        free(h->v);
        free(h);
        s->ckpt.hot = NULL;
}
