/* SPDX-License-Identifier: MIT */
/*
 * A session that holds a lot of device memory, for the checkpoint/restore
 * measurements: fills GIB GiB with a pattern that differs per word, says
 * "filled", waits until GO_FILE exists (the daemon is restarted meanwhile),
 * then reads everything back and checks every byte.
 *
 * usage: e2e_bigsession GIB GO_FILE
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define GIB (1ull << 30)
#define PIECE (64ull << 20)

static void expect_piece(uint32_t *buf, uint64_t chunk, uint64_t off)
{
        for (uint64_t w = 0; w < PIECE / 4; w++) {
                uint32_t want = (uint32_t)(chunk * 0x9e3779b1u) ^ (uint32_t)((off / 4 + w) * 2654435761u);
                if (buf[w] != want) {
                        fprintf(stderr, "chunk %llu offset %llu: 0x%08x, expected 0x%08x\n", (unsigned long long)chunk,
                                (unsigned long long)(off + w * 4), buf[w], want);
                        exit(1);
                }
        }
}

int main(int argc, char **argv)
{
        if (argc < 3)
                return 2;
        int gib = atoi(argv[1]);
        CUcontext ctx;
        CK(cuInit(0));
        CK(cuDevicePrimaryCtxRetain(&ctx, 0));
        CK(cuCtxSetCurrent(ctx));
        CUdeviceptr *chunks = calloc((size_t)gib, sizeof(*chunks));
        uint32_t *buf = malloc(PIECE);
        EXPECT(chunks && buf);
        for (int c = 0; c < gib; c++) {
                CK(cuMemAlloc(&chunks[c], GIB));
                for (uint64_t off = 0; off < GIB; off += PIECE) {
                        for (uint64_t w = 0; w < PIECE / 4; w++)
                                buf[w] = (uint32_t)(c * 0x9e3779b1u) ^ (uint32_t)((off / 4 + w) * 2654435761u);
                        CK(cuMemcpyHtoD(chunks[c] + off, buf, PIECE));
                }
        }
        CK(cuCtxSynchronize());
        printf("filled %d GiB\n", gib);
        fflush(stdout);
        for (int i = 0; i < 12000 && access(argv[2], F_OK) != 0; i++) {
                struct timespec ts = { 0, 50000000L };
                nanosleep(&ts, NULL);
        }
        /* the first call after the go signal reconnects if the server
         * restarted meanwhile: its time is the client's part of a pause */
        struct timespec t0, t1;
        size_t free_b, total_b;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        CK(cuMemGetInfo(&free_b, &total_b));
        clock_gettime(CLOCK_MONOTONIC, &t1);
        printf("first call %.3f s\n", (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
        fflush(stdout);
        for (int c = 0; c < gib; c++)
                for (uint64_t off = 0; off < GIB; off += PIECE) {
                        CK(cuMemcpyDtoH(buf, chunks[c] + off, PIECE));
                        expect_piece(buf, (uint64_t)c, off);
                }
        printf("verified %d GiB\n", gib);
        return e2e_failures ? 1 : 0;
}
