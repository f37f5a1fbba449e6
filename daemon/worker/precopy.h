/* SPDX-License-Identifier: MIT */
/*
 * Pre-copy: a migration's memory written to the store while the session
 * goes on (issue 17, item 4; docs/fleet.md, "Migration").
 *
 * `lupinectl migrate` sends the worker MIGRATE_TO and then a durable
 * DRAIN. With a provider that refers (ABI version 5) and writes
 * concurrently, MIGRATE_TO first begins the save of the next epoch and
 * starts a thread that copies the session's memory into it while the loop
 * serves calls as before: the pieces that differ from the last committed
 * checkpoint (by a GPU hash taken at the start; all of them without a
 * base), each hashed on the CPU from the bytes it copied, so the record
 * is exact whatever the GPU did meanwhile. The DRAIN waits for the thread
 * (the session still runs). Then the drain's checkpoint, with the session
 * quiesced, hashes all memory on the GPU and writes into the same save
 * only the pieces whose hash differs from the record, after what the
 * pre-copy wrote (worker/ckpt_base.c, lupw_incr_plan_final), and commits
 * it: the pause is the pieces changed during the pre-copy, not the whole
 * memory.
 *
 * The pre-copy is given up (its save aborted; the drain then writes an
 * ordinary incremental or full checkpoint) when the client frees device
 * memory while it runs (the chunk it reads could be unmapped), when the
 * session ends or takes a hot checkpoint, or when a copy or a write
 * fails. A checkpoint-now that comes meanwhile waits for it, and then
 * commits the pre-copied save itself.
 */
#ifndef LUPD_WORKER_PRECOPY_H
#define LUPD_WORKER_PRECOPY_H

#include <stdbool.h>
#include <stdint.h>

struct lupw_session;
struct lupw_precopy;
struct lupine_ckpt_save;
struct lupw_ckpt_base;

/* Begins a pre-copy; false (logged, nothing begun) when this provider or
 * session cannot have one. */
bool lupw_precopy_start(struct lupw_session *s);

/* Whether a pre-copy's thread still runs. */
bool lupw_precopy_running(const struct lupw_session *s);

/* Reports a running pre-copy's progress (the loop calls it while it
 * waits): STATS and, paced, a log line, as a checkpoint does. */
void lupw_precopy_progress(struct lupw_session *s);

/* Stops a pre-copy, running or finished, and throws it away. */
void lupw_precopy_cancel(struct lupw_session *s, const char *why);

/* A finished pre-copy, for the checkpoint that completes it: its save
 * (fenced already), epoch and record (lupw_incr_plan_final's `pre`), and
 * the bytes it wrote. The session owns them until lupw_precopy_done. NULL
 * when there is none (it failed: logged, and thrown away). */
struct lupw_precopy_result {
        struct lupine_ckpt_save *save;
        uint64_t epoch;
        const struct lupw_ckpt_base *record;
        uint64_t written;
        double seconds;
};
const struct lupw_precopy_result *lupw_precopy_result(struct lupw_session *s);

/* The checkpoint committed or aborted the save: frees the rest. */
void lupw_precopy_done(struct lupw_session *s);

#endif
