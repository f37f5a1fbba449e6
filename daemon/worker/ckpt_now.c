/* SPDX-License-Identifier: MIT */
/*
 * A durable checkpoint while the session goes on (LUPD_CTL_CHECKPOINT,
 * `lupinectl sessions checkpoint NAME`), and the quiescing that it shares
 * with a drain's checkpoint (worker/loop.c).
 *
 * What a drain's checkpoint relies on, and how this one gets the same:
 *
 *   - No call is half executed. A drain runs from the loop between two
 *     batches of frames; so does this. Every frame in the receive buffer
 *     is either executed (its seq <= last_seq) or not started; one read
 *     in part stays there and runs after the checkpoint.
 *   - The device is still. Host->device copies still reading the receive
 *     buffer are waited for, async device->host copies are finished and
 *     their DATA sent, and every context is synchronised, so the memory
 *     saved is the memory after exactly the calls up to last_seq. An async
 *     error that synchronisation reveals is latched, as a drain does: the
 *     client's next synchronous call gets it, as it would have anyway. A
 *     sticky error of the session's own is not checkpointed
 *     (-ENOTRECOVERABLE); the session goes on, broken as it was.
 *   - The reply log matches last_seq. Every answer of an executed call,
 *     and device printf output that synchronisation flushed, is written to
 *     the client and into the reply log before the save, so the log's end
 *     is the reply stream after exactly those calls. A restore from this
 *     checkpoint resends from the log what the client says it did not get.
 *   - Nothing lives only in this process. A drain may cut a module upload
 *     (BLOB chunks) or a stream capture in two; the drain ends the capture
 *     (the client sees it invalidated) and loses the upload, and the
 *     session is gone anyway. Here the session goes on, so ending the
 *     client's capture is not ours to do, and an upload is not in the
 *     checkpoint: the checkpoint waits until neither is open, checking
 *     after every batch of frames and every LUPW_CKPT_NOW_POLL_MS, and
 *     gives up with -EBUSY after LUPD_CKPT_NOW_WAIT_MS.
 *   - The client said GOODBYE? A drain says it and then exits; this says
 *     nothing and keeps the connection. A client waiting for an answer
 *     meanwhile gets ALIVE frames from the heartbeat thread (the main
 *     thread is busy), so it sees a pause, no error; one sending frames
 *     blocks once the socket buffer is full, and carries on after.
 *
 * What a restore from such a checkpoint gives the client (docs/sessions.md,
 * "A checkpoint while the session runs"): the client's replay buffer holds
 * every frame the server has not acknowledged as executed, and every frame
 * from the server carries last_seq. A client that saw nothing executed
 * past the checkpoint's last_seq resends everything after it, and the
 * session continues exactly once from the checkpoint. One that saw more
 * has dropped frames the restored session never ran, and cannot be made
 * whole: its resume is refused with "stale checkpoint" (worker/loop.c,
 * attach), and its calls fail with CUDA_ERROR_DEVICE_UNAVAILABLE, never
 * running on the older state.
 */
#define LUP_LOG_CAT LUP_LOGC_CHECKPOINT
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "clock.h"
#include "ctl.h"
#include "log.h"
#include "net.h"
#include "worker/session.h"

bool lupw_sticky_error(CUresult r)
{
        switch (r) {
        case CUDA_ERROR_ILLEGAL_ADDRESS:
        case CUDA_ERROR_HARDWARE_STACK_ERROR:
        case CUDA_ERROR_ILLEGAL_INSTRUCTION:
        case CUDA_ERROR_MISALIGNED_ADDRESS:
        case CUDA_ERROR_INVALID_ADDRESS_SPACE:
        case CUDA_ERROR_INVALID_PC:
        case CUDA_ERROR_LAUNCH_FAILED:
                return true;
        default:
                return false;
        }
}

int lupw_quiesce(struct lupw_session *s, CUresult *ret_sync)
{
        lupw_htod_wait(s);
        int rc = lupw_flush_pending(s, true);
        CUresult r = lupw_sync_all(s);
        if (r != CUDA_SUCCESS)
                lupw_latch(s, r, "synchronisation before a checkpoint");
        /* Device printf output that synchronisation wrote goes out now and
         * into the reply log, which the checkpoint keeps. */
        int orc = lupw_output_forward(s);
        if (orc == 0)
                orc = lupw_flush_out(s);
        *ret_sync = r;
        return rc < 0 ? rc : orc;
}

static void send_checkpointed(struct lupw_session *s, int32_t status)
{
        uint8_t b[LUPD_CTL_CHECKPOINTED_LEN];

        lup_put32(b, LUPD_CTL_CHECKPOINTED);
        lup_put32(b + 4, (uint32_t)status);
        lup_put64(b + 8, s->ckpt.epoch);
        if (lup_send_fds(s->ctl_fd, b, sizeof(b), NULL, 0) < 0)
                lup_warn("session %s: cannot report the checkpoint to the supervisor", s->name);
}

void lupw_ckpt_now_request(struct lupw_session *s)
{
        if (s->ckpt.now_wanted) {
                lup_warn("session %s: a second CHECKPOINT while one waits; one checkpoint is made", s->name);
                return;
        }
        s->ckpt.now_wanted = true;
        s->ckpt.now_since_ns = lup_now_ns();
        s->ckpt.now_said_wait = false;
}

void lupw_ckpt_now_cancel(struct lupw_session *s, const char *why)
{
        if (!s->ckpt.now_wanted)
                return;
        s->ckpt.now_wanted = false;
        lup_info("session %s: the checkpoint asked for is not made separately: %s", s->name, why);
        send_checkpointed(s, -ECANCELED);
}

/* What keeps a checkpoint from being consistent with a session that goes
 * on, or NULL when nothing does (see the top of the file). */
static const char *not_quiet(const struct lupw_session *s)
{
        if (s->graphs.n_caps > 0)
                return "a stream capture is open";
        if (s->obj.blobs.used > 0)
                return "a module upload is in progress";
        return NULL;
}

static void run(struct lupw_session *s)
{
        double t0 = lup_now_s();
        uint64_t seq = s->last_seq, before = s->ckpt.epoch;
        CUresult r;
        int status;

        lup_info("session %s: checkpoint at the operator's request at seq %llu; the session goes on after it", s->name,
                 (unsigned long long)seq);
        (void)lupw_quiesce(s, &r); /* a client that stopped reading finds its answers in the log */
        if (lupw_sticky_error(r)) {
                const char *en = NULL;
                if (s->be.fn.cuGetErrorName)
                        (void)s->be.fn.cuGetErrorName(r, &en);
                lup_warn("session %s: not checkpointed: its CUDA context has the sticky error %d (%s) of its own; "
                         "its previous checkpoint (epoch %llu) stays",
                         s->name, (int)r, en ? en : "?", (unsigned long long)before);
                status = -ENOTRECOVERABLE;
        } else {
                status = lupw_checkpoint(s, LUP_CKPT_MEM_DURABLE);
        }
        if (status == 0)
                lup_info("session %s: checkpoint epoch %llu committed at seq %llu in %.3f s; serving on", s->name,
                         (unsigned long long)s->ckpt.epoch, (unsigned long long)seq, lup_now_s() - t0);
        else if (status != -ENOTRECOVERABLE)
                lup_warn("session %s: the checkpoint asked for failed (%s); its previous checkpoint (epoch %llu) "
                         "stays, and the session goes on",
                         s->name, strerror(-status), (unsigned long long)before);
        send_checkpointed(s, status);
}

bool lupw_ckpt_now_step(struct lupw_session *s)
{
        const char *why = not_quiet(s);

        if (!s->ckpt.now_wanted)
                return false;
        if (!why) {
                s->ckpt.now_wanted = false;
                run(s);
                return true;
        }
        uint64_t waited_ms = (lup_now_ns() - s->ckpt.now_since_ns) / 1000000u;
        if (waited_ms >= LUPD_CKPT_NOW_WAIT_MS) {
                s->ckpt.now_wanted = false;
                lup_warn("session %s: not checkpointed: %s and stayed open for %u s; try again later", s->name, why,
                         LUPD_CKPT_NOW_WAIT_MS / 1000u);
                send_checkpointed(s, -EBUSY);
                return true;
        }
        if (!s->ckpt.now_said_wait) {
                s->ckpt.now_said_wait = true;
                lup_info("session %s: the checkpoint waits: %s (at most %u s)", s->name, why,
                         LUPD_CKPT_NOW_WAIT_MS / 1000u);
        }
        return false;
}
