/* SPDX-License-Identifier: MIT */
/*
 * The directory provider's internals, shared by provider_dir.c (open,
 * loads, listing, removal), dir_save.c (the save path), dir_refer.c (a
 * save's references to older epochs), dir_io.c (io_uring writes and
 * fsyncs) and the helpers below them: dir_error.c (the error text),
 * dir_names.c (names and their mapping to paths), dir_commit.c (the
 * COMMITTED marker), dir_walk.c (directories and tree walks) and
 * dir_fault.c (fault injection). Nothing here is public: the daemon sees
 * only provider_dir.h.
 *
 * On-disk layout (docs/providers.md has the full story):
 *
 *   ROOT/<sdir>/<epoch: 16 lowercase hex digits>/COMMITTED   the marker, written last
 *   ROOT/<sdir>/<epoch>/<object name>                        one file per object;
 *                                                           '/' makes subdirectories
 *   ROOT/<sdir>/.tmp-<epoch>-<pid>-<random>/                 a save in progress, or an
 *                                                           old epoch being deleted
 *   ROOT/.tmp-rm-<pid>-<random>/                             a session being removed
 *   ROOT/.leases/<sdir>, <sdir>@lock, .tmp-lease-*           session leases (dir_lease.c)
 *
 * An object written with save_write_at (the daemon's device memory, from
 * several lanes at once) is striped: ROOT/.../<epoch>/<name>@<k> for k in
 * 0..DIR_STRIPES-1 holds the object's DIR_STRIPE_UNIT-byte units k,
 * k + DIR_STRIPES, k + 2 * DIR_STRIPES, ... back to back. One file per
 * object would make the lanes queue on its inode lock ('@' is never part of
 * an object name, so a stripe file cannot alias another object). An object
 * smaller than DIR_STRIPES units has only as many stripe files as units.
 *
 * <sdir> is the session name, except that a name beginning with '.' gets a
 * '%' in front ('%' is never part of a session name, so the mapping is
 * one-to-one and ".", ".." or ".tmp-x" can never alias our own entries).
 *
 * Kept epochs (ABI version 5, save_refer): a session directory holds its
 * newest epoch and the older epochs that the newest one's save referred
 * to, side by side, each a complete <epoch> directory as above. Nothing
 * on disk records the references: the commit of epoch N deletes every
 * older epoch but the ones its save named (drop_older in dir_save.c), so
 * what is left is exactly N and its bases. A kept epoch loads by its exact
 * number; epoch 0, list and save_begin's "is it newer" see the newest.
 */
#ifndef LUP_CKPT_DIR_INTERNAL_H
#define LUP_CKPT_DIR_INTERNAL_H

#include <dirent.h>
#include <inttypes.h>
#include <liburing.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include "lupine/checkpoint_provider.h"

/* ---- limits (each one has a test at its boundary or a reason not to) */
#define DIR_MAX_OPEN_FILES  96u                 /* object fds held open per save (> the daemon's 64 lanes) */
#define DIR_MAX_OBJECTS     262144u             /* objects per save (untested at the bound:
                                                   262144 files take too long for a unit test) */
#define DIR_MAX_EPOCHS_SCAN 65536u              /* epoch directories considered per session */
#define DIR_QD              8u                  /* writes in flight per save_write */
#define DIR_FSYNC_BATCH     32u                 /* fsyncs in flight at commit */
#define DIR_RING_ENTRIES    64u                 /* >= DIR_QD and DIR_FSYNC_BATCH */
#define DIR_CHUNK           (1u << 20)          /* one write SQE covers at most this */
#define DIR_READ_MAX        (1u << 30)          /* bytes one load_read returns at most */
#define DIR_LOAD_FDS        80u                 /* object fds cached per load (> the daemon's 64 lanes) */
#define DIR_MAX_DEPTH       130                 /* directory nesting walked (255-byte names) */
#define DIR_TMP_STALE_SEC   600                 /* a .tmp-* untouched this long is garbage */
#define DIR_MARKER_NAME     "COMMITTED"
#define DIR_MARKER_MAX      512u
#define DIR_MARKER_MAGIC    "LUPCKPT1"
#define DIR_MARKER_VERSION  1u
#define DIR_ERR_MAX         512u
#define DIR_SESSION_MAX     128u                /* the header's name rules */
#define DIR_OBJECT_MAX      255u
#define DIR_SDIR_MAX        (DIR_SESSION_MAX + 1) /* a '%' in front, see above */
#define DIR_STRIPES         16u                 /* files a positionally written object is striped over */
#define DIR_STRIPE_UNIT     (4ull << 20)        /* bytes per stripe before the next file */
#define DIR_TMP_PREFIX      ".tmp-"
#define DIR_QUARANTINE             ".quarantine" /* damaged epochs, moved aside (dir_quarantine.c) */
#define DIR_QUARANTINE_MIN_AGE_SEC 60            /* ... at list, only if unchanged this long (shared filesystems) */
#define DIR_EPOCH_HEX       16
#define DIR_LEASE_DIR              ".leases" /* session leases (dir_lease.c) */
#define DIR_LEASE_MAGIC            "LUPLEAS1"
#define DIR_LEASE_VERSION          1u
#define DIR_LEASE_MAX              256u /* bytes of an encoded lease record */
#define DIR_LEASE_LOCK_WAIT_MS     5000 /* a lease lock not had by then: -EAGAIN */

/* ---- fault injection (LUPINE_DIR_PROVIDER_FAIL, a test facility) */
enum dir_fault_point {
        DIR_FAULT_CREATE,       /* the Nth object file created in a save */
        DIR_FAULT_WRITE,        /* the Nth object write completion in a save */
        DIR_FAULT_SHORT,        /* the Nth object write completion is reported short */
        DIR_FAULT_FSYNC,        /* the Nth fsync (file or directory) of a commit */
        DIR_FAULT_MARKER,       /* writing the COMMITTED marker */
        DIR_FAULT_RENAME,       /* renaming the temp dir to its epoch name */
        DIR_FAULT_CRASH_MARKER, /* "crash" (stop, leave disk as is) before the marker */
        DIR_FAULT_CRASH_RENAME, /* ... after the marker, before the rename */
        DIR_FAULT_CRASH_CLEANUP,/* ... after the rename, before old epochs go */
        DIR_FAULT_NO_URING,     /* pretend io_uring is unavailable: pwrite/fsync */
        DIR_FAULT_FLIP,         /* the Nth load_read of a load flips a bit of what it returns */
        DIR_FAULT_LEASE,        /* the Nth lease record write of an instance: its rename fails */
        DIR_FAULT_COUNT
};

struct dir_faults {
        bool armed[DIR_FAULT_COUNT];
        uint32_t nth[DIR_FAULT_COUNT];  /* 1-based; 0 = every time */
        int err[DIR_FAULT_COUNT];       /* positive errno to inject */
};

/* Per-save counters the Nth-occurrence rules look at. */
struct dir_fault_counts {
        uint32_t n[DIR_FAULT_COUNT];
};

/* ---- the instance, a save, a load */
struct lupine_ckpt_instance {
        int root_fd;
        char *root;             /* for messages */
        struct io_uring ring;
        bool have_ring;         /* false: io_uring unavailable, pwrite/fsync instead */
        bool ring_broken;       /* a submit failed; never touch the ring again */
        struct dir_faults faults;
        struct dir_fault_counts lease_counts; /* DIR_FAULT_LEASE counts per instance */
        char err[DIR_ERR_MAX];
};

struct dir_object {
        char *name;
        uint64_t size;          /* appended: where the next write goes; positional: the end of the furthest write */
        uint64_t written;       /* positional: bytes written (== size at commit, or there is a hole) */
        int fd;                 /* -1 while closed (over DIR_MAX_OPEN_FILES) */
        uint32_t users;         /* save_write_at calls writing through fd now: it is not closed meanwhile */
        bool positional;        /* written with save_write_at */
        uint64_t last_use;
        uint32_t next;          /* hash chain, UINT32_MAX ends it */
};

struct lupine_ckpt_save {
        struct lupine_ckpt_instance *inst;
        char session[DIR_SESSION_MAX + 1];
        uint64_t epoch;
        int session_fd;
        int tmp_fd;             /* -1 once the temp dir is gone (after a failure) */
        char tmp_name[64];
        struct dir_object *objs;
        size_t n_objs, cap_objs;
        uint32_t *buckets;      /* n_buckets heads, a power of two */
        size_t n_buckets;
        uint32_t open_idx[DIR_MAX_OPEN_FILES]; /* objects with an fd */
        size_t n_open;
        uint64_t tick;
        char **subdirs;         /* directories we created, to fsync at commit */
        size_t n_subdirs, cap_subdirs;
        uint64_t total_bytes;
        bool fenced; /* save_fence: commit only while this owner and token hold the lease */
        char fence_owner[LUPINE_CKPT_OWNER_MAX + 1];
        uint64_t fence_token;
        uint64_t refs[LUPINE_CKPT_MAX_REFS]; /* save_refer: older epochs this commit keeps */
        size_t n_refs;
        pthread_mutex_t mu;     /* everything above and err, while save_write_at calls overlap */
        int err;                /* latched: the first failure; the save is dead */
        bool crashed;           /* a crash-before-* fault stopped the commit */
        struct dir_fault_counts counts;
};

struct dir_load_fd {
        char name[DIR_OBJECT_MAX + 1];
        int fd;
        uint64_t size;
        uint64_t last_use;
        uint32_t users;         /* load_read calls reading through fd now: it is not evicted meanwhile */
};

struct lupine_ckpt_load {
        struct lupine_ckpt_instance *inst;
        int epoch_fd;
        uint64_t epoch;
        pthread_mutex_t mu;     /* the cache and the error buffer, while reads overlap */
        uint64_t tick;
        struct dir_load_fd cache[DIR_LOAD_FDS];
        struct dir_fault_counts counts; /* under mu */
};

struct dir_marker {
        uint64_t epoch;
        uint64_t objects;
        uint64_t bytes;
        int64_t committed_unix;
        char session[DIR_SESSION_MAX + 1];
};

/* ---- dir_error.c */

/* Sets inst->err to "fmt...: strerror(-err)" (err < 0) or just fmt (err >= 0
 * is not an error and is not expected here) and returns err. */
int dir_fail(struct lupine_ckpt_instance *inst, int err, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
void dir_clear_error(struct lupine_ckpt_instance *inst);

/* ---- dir_names.c */

/* Session names: 1..128 bytes of [A-Za-z0-9._-] (lup_session_name_valid,
 * the wire's rule). dir_session_valid: whether the NUL-terminated s is one,
 * and its length. */
bool dir_session_valid(const char *s, size_t *ret_len);
/* Writes the directory name of a valid session (see the layout above) into
 * sdir[DIR_SDIR_MAX + 1]. -EINVAL otherwise. */
int dir_session_to_sdir(const char *session, char sdir[static DIR_SDIR_MAX + 1]);
/* The inverse, for listing: false if `sdir` is not a session directory. */
bool dir_sdir_to_session(const char *sdir, char session[static DIR_SESSION_MAX + 1]);

/* Object names: 1..255 bytes of [A-Za-z0-9._-/], no "..", no leading,
 * trailing or doubled '/', no "." component, not "COMMITTED". */
bool dir_object_name_valid(const char *name);

/* Striping (see the layout above). dir_stripe_locate: where the byte at
 * `offset` of a striped object lives (stripe file, offset in it), and how
 * many of the `len` bytes from there are contiguous in that file.
 * dir_stripe_name: "<name>@<k>" into out[DIR_OBJECT_MAX + 8].
 * dir_stripe_name_fits: whether the stripe names keep each path component
 * under NAME_MAX (the daemon's names always do). */
size_t dir_stripe_locate(uint64_t offset, size_t len, unsigned *ret_stripe, uint64_t *ret_at);
void dir_stripe_name(const char *name, unsigned stripe, char *out);
bool dir_stripe_name_fits(const char *name);

/* "%016" PRIx64 into out[17]; parse accepts exactly 16 lowercase hex digits
 * and a non-zero value. */
void dir_epoch_name(uint64_t epoch, char out[static DIR_EPOCH_HEX + 1]);
bool dir_epoch_parse(const char *name, uint64_t *ret);

/* ".tmp-<tag>-<pid>-<random hex>" into out; -ENAMETOOLONG if cap is short. */
int dir_tmp_name(char *out, size_t cap, const char *tag);

/* ---- dir_commit.c */

uint32_t dir_crc32c(uint32_t crc, const void *p, size_t n);

/* Encodes the marker into buf (at most DIR_MARKER_MAX); returns its length
 * or -ENOBUFS. */
int dir_marker_encode(const struct dir_marker *m, uint8_t *buf, size_t cap);
/* Decodes and checks magic, version, checksum and trailing bytes; -EBADMSG
 * if anything is off. *ret is untouched on failure. */
int dir_marker_decode(const uint8_t *buf, size_t len, struct dir_marker *ret);

/* Reads and decodes ROOT/.../<epoch>/COMMITTED, then checks that it names
 * this session and epoch and that the tree holds exactly the objects and
 * bytes it claims. 0 if the epoch is complete, else -ENOENT/-EBADMSG/-errno. */
int dir_epoch_verify(int epoch_fd, const char *session, uint64_t epoch, struct dir_marker *ret);
/* The same, saying what is wrong in why[why_cap] (optional) on failure. */
int dir_epoch_check(int epoch_fd, const char *session, uint64_t epoch, struct dir_marker *ret, char *why,
                    size_t why_cap);
/* The newest epoch of the session whose marker and tree check out;
 * -ENOENT if none. ret_marker and ret_fd (that epoch's directory) are
 * optional. */
int dir_newest_committed(int session_fd, const char *session, uint64_t *ret_epoch, struct dir_marker *ret_marker,
                         int *ret_fd);

/* ---- dir_quarantine.c */

/* If ROOT/<sdir>/<epoch> exists and is damaged (its marker or tree does
 * not check out), moves it to ROOT/.quarantine/ and logs why, naming the
 * session; with min_age_s > 0 only if nothing in it changed for that many
 * seconds (else -EAGAIN, logged). 1 if moved, 0 if it is complete, -errno
 * if it is absent (-ENOENT), cannot be read or moved. */
int dir_quarantine_epoch(struct lupine_ckpt_instance *inst, int session_fd, const char *sdir, const char *session,
                         uint64_t epoch, int64_t min_age_s);
/* The same for every epoch directory of the session, each unchanged for
 * DIR_QUARANTINE_MIN_AGE_SEC: how many were moved. */
int dir_quarantine_damaged(struct lupine_ckpt_instance *inst, int session_fd, const char *sdir, const char *session);

/* ---- dir_lease.c: session leases (ABI version 4) */

/* The lease record: magic, version, token, expiry, owner, CRC-32C.
 * Encode returns the length or -ENOBUFS; decode -EBADMSG if anything is
 * off (then *ret is untouched). */
int dir_lease_encode(const struct lupine_ckpt_lease *l, uint8_t *buf, size_t cap);
int dir_lease_decode(const uint8_t *buf, size_t len, struct lupine_ckpt_lease *ret);
int64_t dir_now_unix_ms(void);

/* The callbacks (abi/lupine/checkpoint_provider.h). */
int dir_lease_claim(struct lupine_ckpt_instance *inst, const char *session, const char *owner, uint32_t ttl_ms,
                    struct lupine_ckpt_lease *ret);
int dir_lease_renew(struct lupine_ckpt_instance *inst, const char *session, const char *owner, uint64_t token,
                    uint32_t ttl_ms, struct lupine_ckpt_lease *ret);
int dir_lease_release(struct lupine_ckpt_instance *inst, const char *session, const char *owner, uint64_t token);
int dir_lease_read(struct lupine_ckpt_instance *inst, const char *session, struct lupine_ckpt_lease *ret);

/* Locks the session's lease and checks that (owner, token) holds it:
 * 0 with the lock held in *ret_lock_fd (close it to unlock; a claim waits
 * meanwhile), -ESTALE if not, -errno. dir_lease_check: the same, unlocking
 * at once. */
int dir_lease_hold(struct lupine_ckpt_instance *inst, const char *session, const char *owner, uint64_t token,
                   int *ret_lock_fd);
int dir_lease_check(struct lupine_ckpt_instance *inst, const char *session, const char *owner, uint64_t token);

/* ---- dir_walk.c */

/* openat(O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC): the fd or -errno. */
int dir_open_dir_at(int dfd, const char *name);
/* A listing of the directory dfd, on its own descriptor (dfd stays usable
 * and open). 0 or -errno. */
int dir_list_open(int dfd, DIR **ret);
/* fsync(2) of a directory outside a save's io_uring: 0 or -errno. */
int dir_fsync_plain(int fd);
int64_t dir_now_unix(void);

/* What a tree walk found below a directory. */
struct dir_tree_count {
        uint64_t files, bytes;
        int64_t newest_mtime;
        bool strict; /* anything but files and directories is an error; so is an entry vanishing */
};

/* Adds the regular files under the directory dfd (consumed) and their bytes
 * to *tc, and raises tc->newest_mtime; with skip_marker, a COMMITTED right
 * under dfd is not counted. -ELOOP past DIR_MAX_DEPTH, -EBADMSG for
 * anything else in a strict walk, else 0 or -errno. */
int dir_tree_count(int dfd, bool skip_marker, struct dir_tree_count *tc);

/* Newest modification time of the tree at parent_fd/name (the directory
 * itself and everything below; a file's own mtime if it is not one). */
int dir_tree_newest_mtime(int parent_fd, const char *name, int64_t *ret);

/* Deletes `name` under parent_fd and everything below it. Missing entries
 * are not errors (another process may be deleting the same tree). */
int dir_rmtree_at(int parent_fd, const char *name);

/* mkdir -p with mode 0700 for missing components. */
int dir_mkdir_p(const char *path);

/* ---- dir_fault.c */

/* Parses LUPINE_DIR_PROVIDER_FAIL: comma-separated rules, see
 * docs/providers.md. NULL or "" arms nothing. -EINVAL on a bad rule. */
int dir_faults_parse(const char *spec, struct dir_faults *ret);
/* Counts one occurrence of `point` and returns the positive errno to
 * inject, or 0. */
int dir_fault_hit(const struct dir_faults *f, struct dir_fault_counts *c, enum dir_fault_point point);

/* ---- dir_save.c: the save callbacks */

int dir_save_begin(struct lupine_ckpt_instance *inst, const char *session, uint64_t epoch,
                   struct lupine_ckpt_save **ret);
int dir_save_write(struct lupine_ckpt_save *save, const char *name, const void *data, size_t len);
/* Thread-safe against itself (LUPINE_CKPT_CAP_CONCURRENT_WRITE): plain
 * pwrite(2) from the caller's thread, so several lanes write at once. */
int dir_save_write_at(struct lupine_ckpt_save *save, const char *name, uint64_t offset, const void *data,
                      size_t len);
int dir_save_commit(struct lupine_ckpt_save *save);
/* Version 5: fsyncs every object written so far (a pre-copy's, early). */
int dir_save_sync(struct lupine_ckpt_save *save);

/* The prologue of a callback on a save: clears the error, and refuses a
 * NULL save (-EINVAL) or one that failed earlier (its latched error). */
static inline int dir_save_usable(struct lupine_ckpt_save *save)
{
        if (!save)
                return -EINVAL;
        dir_clear_error(save->inst);
        if (save->err)
                return dir_fail(save->inst, save->err, "checkpoint %s epoch %" PRIu64 " failed earlier", save->session,
                                save->epoch);
        return 0;
}
void dir_save_abort(struct lupine_ckpt_save *save);
/* Version 4: a commit only while (owner, token) holds the session's lease. */
int dir_save_fence(struct lupine_ckpt_save *save, const char *owner, uint64_t token);

/* ---- dir_refer.c: version 5, references to older epochs */

/* save_refer: records committed epoch `epoch` of the save's session as one
 * its commit keeps, after checking that it exists and checks out. 0 (also
 * if named already), -EINVAL (0, or not older than the save), -E2BIG (past
 * LUPINE_CKPT_MAX_REFS), -ENOENT (absent or damaged), or the save's latched
 * error. A failure leaves the save as it was. */
int dir_save_refer(struct lupine_ckpt_save *save, uint64_t epoch);

/* Whether the save named `epoch` with save_refer. */
static inline bool dir_save_refers(const struct lupine_ckpt_save *save, uint64_t epoch)
{
        for (size_t i = 0; i < save->n_refs; i++)
                if (save->refs[i] == epoch)
                        return true;
        return false;
}

/* ---- dir_io.c */

/* Writes all of data at `offset` of fd: up to DIR_QD writes of DIR_CHUNK in
 * flight through io_uring, resubmitting short writes; returns only once the
 * kernel is done with `data`, so the caller's buffer is never copied and
 * never used after return. Object-write faults apply when `object` is set. */
int dir_io_write(struct lupine_ckpt_save *save, int fd, const void *data, size_t len, uint64_t offset,
                 bool object);
/* fsyncs n fds (n <= DIR_FSYNC_BATCH) in parallel; returns the first error
 * and, through ret_failed, which fd it came from. */
int dir_io_fsync(struct lupine_ckpt_save *save, const int *fds, size_t n, size_t *ret_failed);
/* An object write with plain pwrite(2) from the caller's thread, safe to
 * overlap with other calls of it (save_write_at): all of data at `offset`
 * of fd, in DIR_CHUNK pieces, short writes resumed, object-write faults
 * applied. 0 or -errno. */
int dir_io_pwrite(struct lupine_ckpt_save *save, int fd, const void *data, size_t len, uint64_t offset);

/* NULL-tolerant close: fd = safe_close(fd). Errors from close() carry no
 * news here: every file that matters was fsynced first. */
static inline int safe_close(int fd)
{
        if (fd >= 0)
                close(fd);
        return -1;
}

#endif
