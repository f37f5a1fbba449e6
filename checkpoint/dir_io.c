/* SPDX-License-Identifier: MIT */
/*
 * Object writes and fsyncs for the directory provider, through the
 * instance's io_uring (or pwrite/fsync where io_uring is unavailable, e.g.
 * under a seccomp profile that blocks it).
 *
 * Each call submits its own requests and reaps all of their completions
 * before it returns, so:
 *  - the caller's buffer is never copied and never touched after return
 *    (the ABI says it is only valid during save_write);
 *  - a completion is never seen by a call other than the one that queued
 *    it, and user_data holds nothing but the request's slot index
 *    (0..DIR_QD-1 for writes, 0..DIR_FSYNC_BATCH-1 for fsyncs).
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include "dir_internal.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

static bool use_ring(const struct lupine_ckpt_instance *inst)
{
        return inst->have_ring && !inst->ring_broken;
}

/* Applies the object-write faults to a completion result. The counters
 * are the save's: under its lock, as save_write_at calls overlap. */
static int write_result(struct lupine_ckpt_save *save, bool object, int res)
{
        int e;

        if (!object || res <= 0)
                return res;
        pthread_mutex_lock(&save->mu);
        e = dir_fault_hit(&save->inst->faults, &save->counts, DIR_FAULT_WRITE);
        /* the whole write landed; claiming half of it makes us rewrite the
         * rest at the right offset, which is exactly a short write's path */
        if (e)
                res = -e;
        else if (dir_fault_hit(&save->inst->faults, &save->counts, DIR_FAULT_SHORT) && res > 1)
                res /= 2;
        pthread_mutex_unlock(&save->mu);
        return res;
}

static int write_sync(struct lupine_ckpt_save *save, int fd, const uint8_t *data, size_t len, uint64_t offset,
                      bool object)
{
        size_t done = 0;

        while (done < len) {
                size_t n = len - done < DIR_CHUNK ? len - done : DIR_CHUNK;
                ssize_t w = pwrite(fd, data + done, n, (off_t)(offset + done));
                int res = w < 0 ? -errno : (int)w;
                if (res == -EINTR || res == -EAGAIN)
                        continue;
                res = write_result(save, object, res);
                if (res < 0)
                        return res;
                if (res == 0)
                        return -EIO; /* no progress on a regular file: give up, loudly */
                done += (size_t)res;
        }
        return 0;
}

struct wslot {
        size_t off;     /* into data */
        size_t len;
        size_t done;
        bool busy;
};

static int queue_write(struct io_uring *ring, unsigned slot, int fd, const uint8_t *data, uint64_t offset,
                       const struct wslot *s)
{
        struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

        if (!sqe)
                return -EBUSY;
        io_uring_prep_write(sqe, fd, data + s->off + s->done, (unsigned)(s->len - s->done),
                            offset + s->off + s->done);
        io_uring_sqe_set_data64(sqe, slot);
        return 0;
}

/* Submits what is queued. On failure the queued SQEs stay in the SQ ring
 * (they cannot be taken back): the caller reaps what is in flight and
 * retries, and if nothing is in flight it marks the ring broken so that
 * they are never submitted later. */
static int submit(struct lupine_ckpt_instance *inst, unsigned *unsubmitted)
{
        int r;

        if (*unsubmitted == 0)
                return 0;
        r = io_uring_submit(&inst->ring);
        if (r < 0)
                return r;
        *unsubmitted -= (unsigned)r < *unsubmitted ? (unsigned)r : *unsubmitted;
        return 0;
}

/* What to do after submit() failed with r: 0 = reap and go on (err may be
 * set), < 0 = return that now (nothing of ours is in the kernel). */
static int submit_failed(struct lupine_ckpt_instance *inst, int r, unsigned inflight, unsigned unsubmitted,
                         int *err)
{
        if (inflight == unsubmitted) {
                inst->ring_broken = true;
                return *err ? *err : r;
        }
        if (r != -EINTR && r != -EAGAIN && r != -EBUSY && !*err)
                *err = r;
        return 0;
}

static int wait_cqe(struct io_uring *ring, struct io_uring_cqe **ret)
{
        int r;

        do
                r = io_uring_wait_cqe(ring, ret);
        while (r == -EINTR);
        return r;
}

static int write_ring(struct lupine_ckpt_save *save, int fd, const uint8_t *data, size_t len, uint64_t offset,
                      bool object)
{
        struct lupine_ckpt_instance *inst = save->inst;
        struct io_uring *ring = &inst->ring;
        struct wslot slots[DIR_QD];
        unsigned inflight = 0, unsubmitted = 0;
        size_t next = 0;
        int err = 0;

        memset(slots, 0, sizeof(slots));
        for (;;) {
                for (unsigned i = 0; i < DIR_QD && !err && next < len; i++) {
                        if (slots[i].busy)
                                continue;
                        size_t n = len - next < DIR_CHUNK ? len - next : DIR_CHUNK;
                        slots[i] = (struct wslot){ .off = next, .len = n, .busy = true };
                        if (queue_write(ring, i, fd, data, offset, &slots[i]) < 0) {
                                slots[i].busy = false;
                                err = -EBUSY;
                                break;
                        }
                        next += n;
                        inflight++;
                        unsubmitted++;
                }
                if (inflight == 0)
                        break;
                int r = submit(inst, &unsubmitted);
                if (r < 0 && (r = submit_failed(inst, r, inflight, unsubmitted, &err)) < 0)
                        return r;
                struct io_uring_cqe *cqe;
                r = wait_cqe(ring, &cqe);
                if (r < 0) {
                        /* cannot reap, so cannot tell when the kernel is done
                         * with `data`: stop using the ring; the in-flight
                         * writes finish on their own */
                        inst->ring_broken = true;
                        return r;
                }
                unsigned i = (unsigned)io_uring_cqe_get_data64(cqe);
                int res = cqe->res;
                io_uring_cqe_seen(ring, cqe);
                inflight--;
                if (i >= DIR_QD || !slots[i].busy) {
                        err = err ? err : -EIO; /* not ours: cannot happen */
                        continue;
                }
                if (res == -EINTR || res == -EAGAIN) {
                        res = 0; /* retry the same range */
                } else {
                        res = write_result(save, object, res);
                        if (res <= 0) {
                                err = err ? err : (res < 0 ? res : -EIO);
                                slots[i].busy = false;
                                continue;
                        }
                }
                slots[i].done += (size_t)res;
                if (slots[i].done < slots[i].len && !err) {
                        /* short write: the rest of this slot goes again */
                        if (queue_write(ring, i, fd, data, offset, &slots[i]) == 0) {
                                inflight++;
                                unsubmitted++;
                                continue;
                        }
                        err = -EBUSY;
                }
                slots[i].busy = false;
        }
        return err;
}

int dir_io_write(struct lupine_ckpt_save *save, int fd, const void *data, size_t len, uint64_t offset,
                 bool object)
{
        if (len == 0)
                return 0;
        if (use_ring(save->inst))
                return write_ring(save, fd, data, len, offset, object);
        return write_sync(save, fd, data, len, offset, object);
}

int dir_io_pwrite(struct lupine_ckpt_save *save, int fd, const void *data, size_t len, uint64_t offset)
{
        return write_sync(save, fd, data, len, offset, true);
}

static int fsync_result(struct lupine_ckpt_save *save, int res)
{
        int e = dir_fault_hit(&save->inst->faults, &save->counts, DIR_FAULT_FSYNC);

        if (res == 0 && e)
                return -e;
        return res;
}

int dir_io_fsync(struct lupine_ckpt_save *save, const int *fds, size_t n, size_t *ret_failed)
{
        struct lupine_ckpt_instance *inst = save->inst;
        unsigned inflight = 0, unsubmitted = 0;
        size_t failed = 0;
        int err = 0;

        if (n > DIR_FSYNC_BATCH)
                return -EINVAL;
        if (!use_ring(inst)) {
                for (size_t i = 0; i < n; i++) {
                        int res = fsync(fds[i]) < 0 ? -errno : 0;
                        res = fsync_result(save, res);
                        if (res < 0 && !err) {
                                err = res;
                                failed = i;
                        }
                }
                goto out;
        }
        for (size_t i = 0; i < n; i++) {
                struct io_uring_sqe *sqe = io_uring_get_sqe(&inst->ring);
                if (!sqe) {
                        err = -EBUSY;
                        failed = i;
                        break;
                }
                io_uring_prep_fsync(sqe, fds[i], 0);
                io_uring_sqe_set_data64(sqe, i);
                inflight++;
                unsubmitted++;
        }
        while (inflight) {
                struct io_uring_cqe *cqe;
                int r = submit(inst, &unsubmitted);
                if (r < 0 && (r = submit_failed(inst, r, inflight, unsubmitted, &err)) < 0)
                        return r;
                r = wait_cqe(&inst->ring, &cqe);
                if (r < 0) {
                        inst->ring_broken = true;
                        return r;
                }
                size_t i = (size_t)io_uring_cqe_get_data64(cqe);
                int res = cqe->res;
                io_uring_cqe_seen(&inst->ring, cqe);
                inflight--;
                res = fsync_result(save, res);
                if (res < 0 && !err) {
                        err = res;
                        failed = i < n ? i : 0;
                }
        }
out:
        if (err && ret_failed)
                *ret_failed = failed;
        return err;
}
