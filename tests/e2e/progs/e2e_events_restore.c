/* SPDX-License-Identifier: MIT */
/*
 * Events across a checkpoint and restore (tests/e2e/test_restart.py).
 *
 * Records three timing events around two kernels of known length, and one
 * event without timing; a fifth event is never recorded. It measures the
 * elapsed times, prints "recorded", and waits for a line on stdin, while
 * the test stops the daemon (SIGTERM: checkpoint) and starts it again
 * (restore). Its next call resumes the session, and then:
 *   - every recorded event queries and synchronises as complete;
 *   - the never-recorded one answers cuEventQuery as it did before (the
 *     driver's answer for an event never recorded: CUDA_SUCCESS) and
 *     cannot be timed (CUDA_ERROR_INVALID_HANDLE);
 *   - cuEventElapsedTime between two events recorded before the
 *     checkpoint is the time measured then, not the time the session was
 *     down;
 *   - the events work as ever: a stream waits on one, one is recorded
 *     again and timed against a restored one.
 * It also launches printf_hello (round 9, 2 threads) just before it prints
 * "recorded", and does not synchronise: the drain's synchronisation flushes
 * the output, which must reach stdout before the "restored" line.
 *
 * usage: e2e_events_restore KERNELS_DIR
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

static void spin(CUfunction f, CUstream st, unsigned long long ns)
{
        void *p[] = { &ns };
        CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, st, p, NULL));
}

/* The same time to float precision: the restore keeps each event's time
 * relative to one reference event, so a difference may be rounded twice. */
static int same_time(float a, float b)
{
        return fabsf(a - b) <= 1e-3f + 1e-5f * fabsf(a);
}

int main(int argc, char **argv)
{
        char path[4096], line[64];
        CUcontext ctx;
        CUmodule m;
        CUfunction f, hello;
        CUstream st;
        CUevent e0, e1, e2, notime, never;
        float ms01, ms12, ms02, ms;

        if (argc < 2)
                return 2;
        snprintf(path, sizeof(path), "%s/kernels.ptx", argv[1]);
        CK(cuInit(0));
        CK(cuDevicePrimaryCtxRetain(&ctx, 0));
        CK(cuCtxSetCurrent(ctx));
        CK(cuModuleLoad(&m, path));
        CK(cuModuleGetFunction(&f, m, "spin_ns"));
        CK(cuModuleGetFunction(&hello, m, "printf_hello"));
        CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
        CK(cuEventCreate(&e0, 0));
        CK(cuEventCreate(&e1, 0));
        CK(cuEventCreate(&e2, CU_EVENT_BLOCKING_SYNC));
        CK(cuEventCreate(&notime, CU_EVENT_DISABLE_TIMING));
        CK(cuEventCreate(&never, 0));

        CK(cuEventRecord(e0, st));
        spin(f, st, 60000000ull);       /* 60 ms */
        CK(cuEventRecord(e1, st));
        spin(f, st, 30000000ull);       /* 30 ms */
        CK(cuEventRecord(e2, st));
        CK(cuEventRecord(notime, st));
        CK(cuEventSynchronize(notime));
        CK(cuEventElapsedTime(&ms01, e0, e1));
        CK(cuEventElapsedTime(&ms12, e1, e2));
        CK(cuEventElapsedTime(&ms02, e0, e2));
        EXPECT(ms01 >= 55.0f && ms12 >= 25.0f);
        CUresult never_query = cuEventQuery(never);
        EXPECT_ERR(never_query, CUDA_SUCCESS);  /* what drivers since CUDA 11 answer */
        EXPECT_ERR(cuEventElapsedTime(&ms, e0, never), CUDA_ERROR_INVALID_HANDLE);
        int round = 9;
        void *hp[] = { &round };
        CK(cuLaunchKernel(hello, 1, 1, 1, 2, 1, 1, 0, NULL, hp, NULL));
        /* A synchronous call that is no printf flush point: once it returns,
         * the worker has the launch, so the drain that follows "recorded" is
         * what flushes its output. (Without it, a launch still on its way
         * when the drain begins runs in the restored worker, after the
         * events this program synchronises next: its output would come
         * after "restored", as CUDA allows.) */
        size_t free_b, total_b;
        CK(cuMemGetInfo(&free_b, &total_b));
        printf("recorded: e0-e1 %.6f ms, e1-e2 %.6f ms, e0-e2 %.6f ms; never recorded queries as %d\n", ms01, ms12,
               ms02, (int)never_query);
        fflush(stdout);

        /* the daemon is stopped and started again meanwhile */
        if (!fgets(line, sizeof(line), stdin))
                return 2;

        EXPECT_ERR(cuEventQuery(e0), CUDA_SUCCESS);
        EXPECT_ERR(cuEventQuery(e1), CUDA_SUCCESS);
        EXPECT_ERR(cuEventQuery(e2), CUDA_SUCCESS);
        EXPECT_ERR(cuEventQuery(notime), CUDA_SUCCESS);
        EXPECT_ERR(cuEventQuery(never), never_query);
        EXPECT_ERR(cuEventSynchronize(e0), CUDA_SUCCESS);
        EXPECT_ERR(cuEventSynchronize(e2), CUDA_SUCCESS);
        EXPECT_ERR(cuEventSynchronize(notime), CUDA_SUCCESS);
        EXPECT_ERR(cuEventSynchronize(never), CUDA_SUCCESS);       /* waits for nothing */

        float a01 = -1, a12 = -1, a02 = -1;
        EXPECT_ERR(cuEventElapsedTime(&a01, e0, e1), CUDA_SUCCESS);
        EXPECT_ERR(cuEventElapsedTime(&a12, e1, e2), CUDA_SUCCESS);
        EXPECT_ERR(cuEventElapsedTime(&a02, e0, e2), CUDA_SUCCESS);
        printf("restored: e0-e1 %.6f ms, e1-e2 %.6f ms, e0-e2 %.6f ms\n", a01, a12, a02);
        if (!same_time(a01, ms01) || !same_time(a12, ms12) || !same_time(a02, ms02)) {
                fprintf(stderr, "elapsed times changed across the restore\n");
                e2e_failures++;
        }
        EXPECT_ERR(cuEventElapsedTime(&ms, e0, never), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_ERR(cuEventElapsedTime(&ms, e0, notime), CUDA_ERROR_INVALID_HANDLE);

        /* still ordinary events: waited on, recorded again, timed */
        CK(cuStreamWaitEvent(st, e2, 0));
        spin(f, st, 20000000ull);       /* 20 ms */
        CK(cuEventRecord(never, st));
        CK(cuEventSynchronize(never));
        EXPECT_ERR(cuEventQuery(never), CUDA_SUCCESS);
        EXPECT_ERR(cuEventElapsedTime(&ms, e2, never), CUDA_SUCCESS);
        EXPECT(ms >= 15.0f);
        CK(cuEventRecord(e0, st));
        spin(f, st, 20000000ull);
        CK(cuEventRecord(e1, st));
        CK(cuEventSynchronize(e1));
        EXPECT_ERR(cuEventElapsedTime(&ms, e0, e1), CUDA_SUCCESS);
        EXPECT(ms >= 15.0f && ms < 5000.0f);

        CK(cuEventDestroy(e0));
        CK(cuEventDestroy(e1));
        CK(cuEventDestroy(e2));
        CK(cuEventDestroy(notime));
        CK(cuEventDestroy(never));
        CK(cuStreamDestroy(st));
        if (e2e_failures)
                return 1;
        printf("e2e_events_restore: OK\n");
        return 0;
}
