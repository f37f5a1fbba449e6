/* SPDX-License-Identifier: MIT */
/*
 * A long, verified workload for the restart tests: the daemon is stopped
 * and started under it many times, and it must end with exactly the data a
 * run without restarts produces.
 *
 * Every round: fresh random data goes to the device; a kernel adds a module
 * global (set to 3 at the start, so a restore must bring back its value and
 * its module) to a counter; another kernel fills a buffer on a stream; the
 * results come back and are checked against a model on the host; some
 * buffers are freed and new ones allocated. The counter proves exactly-once
 * execution: a launch lost or run twice leaves it off by 3. Settings made
 * once at the start (a context limit, and a function attribute every fill
 * launch depends on: 100 KiB of dynamic shared memory) must survive too.
 *
 * usage: e2e_restart KERNELS_DIR ROUNDS [MS_BETWEEN_ROUNDS [HOLD_AT]]
 *
 * With HOLD_AT, after that round it says "ready: round N" and waits for a
 * line on stdin before the next (tests/e2e/test_ckpt_now.py: a checkpoint
 * and a crash while it waits).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"

#define LIVE 8

static uint32_t rng = 12345;
static uint32_t next_rand(void)
{
        rng ^= rng << 13;
        rng ^= rng >> 17;
        rng ^= rng << 5;
        return rng;
}

int main(int argc, char **argv)
{
        if (argc < 3) {
                fprintf(stderr, "usage: %s KERNELS_DIR ROUNDS [MS]\n", argv[0]);
                return 2;
        }
        int rounds = atoi(argv[2]), pause_ms = argc > 3 ? atoi(argv[3]) : 20, hold_at = argc > 4 ? atoi(argv[4]) : 0;
        char path[4096];
        CUcontext ctx;
        CUmodule m;
        CUfunction add_global, fill;
        CUstream st;
        CUdeviceptr counter, g, bufs[LIVE] = { 0 };
        size_t sizes[LIVE] = { 0 }, gs;

        snprintf(path, sizeof(path), "%s/kernels.ptx", argv[1]);
        CK(cuInit(0));
        CK(cuDevicePrimaryCtxRetain(&ctx, 0));
        CK(cuCtxSetCurrent(ctx));
        CK(cuModuleLoad(&m, path));
        CK(cuModuleGetFunction(&add_global, m, "add_global_u32"));
        CK(cuModuleGetFunction(&fill, m, "fill_u32"));
        CK(cuModuleGetGlobal(&g, &gs, m, "g_bias"));
        unsigned bias = 3;
        CK(cuMemcpyHtoD(g, &bias, sizeof(bias)));
        CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
        const int smem = 100 * 1024; /* above the 48 KiB default: needs the attribute */
        CK(cuFuncSetAttribute(fill, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem));
        CK(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 4u << 20));
        CK(cuMemAlloc(&counter, 4));
        CK(cuMemsetD32(counter, 0, 1));

        uint8_t *host = malloc(4 << 20), *back = malloc(4 << 20);
        unsigned *fb = malloc(1 << 16);
        EXPECT(host && back && fb);
        for (int r = 1; r <= rounds; r++) {
                int k = (int)(next_rand() % LIVE);
                if (bufs[k])
                        CK(cuMemFree(bufs[k]));
                sizes[k] = 1 + next_rand() % (3u << 20);
                CK(cuMemAlloc(&bufs[k], sizes[k]));
                for (size_t i = 0; i < sizes[k]; i++)
                        host[i] = (uint8_t)next_rand();
                CK(cuMemcpyHtoD(bufs[k], host, sizes[k]));
                int one = 1;
                void *pa[] = { &counter, &one };
                CK(cuLaunchKernel(add_global, 1, 1, 1, 32, 1, 1, 0, 0, pa, NULL));
                int n = 1 << 14;
                unsigned v = (unsigned)r;
                CUdeviceptr fd;
                CK(cuMemAlloc(&fd, (size_t)n * 4));
                void *pf[] = { &fd, &v, &n };
                CK(cuLaunchKernel(fill, 16, 1, 1, 256, 1, 1, (unsigned)smem, st, pf, NULL));
                CK(cuStreamSynchronize(st));
                CK(cuMemcpyDtoH(fb, fd, (size_t)n * 4));
                for (int i = 0; i < n; i++)
                        EXPECT(fb[i] == v);
                CK(cuMemFree(fd));
                CK(cuMemcpyDtoH(back, bufs[k], sizes[k]));
                EXPECT(memcmp(host, back, sizes[k]) == 0);
                unsigned c = 0;
                CK(cuMemcpyDtoH(&c, counter, 4));
                if (c != 3u * (unsigned)r) {
                        fprintf(stderr, "round %d: counter %u, expected %u: a call was lost or ran twice\n", r, c,
                                3u * (unsigned)r);
                        return 1;
                }
                if (r % 10 == 0) {
                        printf("round %d ok\n", r);
                        fflush(stdout);
                }
                if (r == hold_at) {
                        char line[64];
                        printf("ready: round %d\n", r);
                        fflush(stdout);
                        if (!fgets(line, sizeof(line), stdin))
                                return 1;
                }
                struct timespec ts = { 0, (long)pause_ms * 1000000L };
                nanosleep(&ts, NULL);
        }
        size_t fifo = 0;
        CK(cuCtxGetLimit(&fifo, CU_LIMIT_PRINTF_FIFO_SIZE));
        EXPECT(fifo >= (4u << 20));
        /* every surviving buffer still holds what was written last */
        for (int k = 0; k < LIVE; k++)
                if (bufs[k])
                        CK(cuMemFree(bufs[k]));
        CK(cuStreamDestroy(st));
        CK(cuModuleUnload(m));
        printf("e2e_restart: OK, %d rounds, counter exact\n", rounds);
        return e2e_failures ? 1 : 0;
}
