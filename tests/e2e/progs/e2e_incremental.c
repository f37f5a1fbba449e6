/* SPDX-License-Identifier: MIT */
/*
 * A session whose memory changes by a known fraction between commands, for
 * incremental checkpoints and pre-copied migrations (tests/e2e/
 * test_incremental.py, tests/gpu/incremental.sh). It fills MIB MiB of device
 * memory, 1 MiB piece by piece, each piece with a pattern of its index and
 * a seed (0 at first); it keeps only the seeds, so it fits any size. Then it
 * reads commands from stdin, one per line, and answers each with one line:
 *
 *   dirty PERMILLE SEED [SHIFT]
 *                        rewrites PERMILLE/1000 of the pieces, evenly spread
 *                        and shifted by SHIFT pieces, with seed SEED
 *                                           -> "dirtied N pieces"
 *   check                reads every piece back and compares -> "check ok"
 *                        (or "check bad piece I" and exit 1)
 *   sync                 cuCtxSynchronize -> "synced"
 *   realloc              frees the last allocation, allocates it again and
 *                        writes its pieces again -> "reallocated"
 *   quit                 exits 0
 *
 * usage: e2e_incremental MIB
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define PIECE     (1ull << 20)
#define PER_ALLOC 1024ull /* MiB per cuMemAlloc */

static uint64_t n_pieces;
static CUdeviceptr *allocs;
static uint32_t *seeds;
static uint32_t *buf;

static CUdeviceptr piece_addr(uint64_t i)
{
        return allocs[i / PER_ALLOC] + (i % PER_ALLOC) * PIECE;
}

static void pattern(uint64_t i, uint32_t seed)
{
        uint32_t x = (uint32_t)(i * 0x9e3779b1u) ^ (seed * 0x85ebca6bu);
        for (uint64_t w = 0; w < PIECE / 4; w++)
                buf[w] = x ^ (uint32_t)(w * 2654435761u);
}

static void write_piece(uint64_t i, uint32_t seed)
{
        pattern(i, seed);
        CK(cuMemcpyHtoD(piece_addr(i), buf, PIECE));
        seeds[i] = seed;
}

static int check_all(void)
{
        uint32_t *got = malloc(PIECE);
        EXPECT(got != NULL);
        for (uint64_t i = 0; i < n_pieces; i++) {
                CK(cuMemcpyDtoH(got, piece_addr(i), PIECE));
                pattern(i, seeds[i]);
                if (memcmp(got, buf, PIECE) != 0) {
                        printf("check bad piece %llu\n", (unsigned long long)i);
                        free(got);
                        return 1;
                }
        }
        free(got);
        printf("check ok\n");
        return 0;
}

int main(int argc, char **argv)
{
        if (argc < 2)
                return 2;
        uint64_t mib = strtoull(argv[1], NULL, 10);
        EXPECT(mib > 0);
        n_pieces = mib;
        CUcontext ctx;
        CK(cuInit(0));
        CK(cuDevicePrimaryCtxRetain(&ctx, 0));
        CK(cuCtxSetCurrent(ctx));
        uint64_t n_allocs = (mib + PER_ALLOC - 1) / PER_ALLOC;
        allocs = calloc(n_allocs, sizeof(*allocs));
        seeds = calloc(n_pieces, sizeof(*seeds));
        buf = malloc(PIECE);
        EXPECT(allocs && seeds && buf);
        for (uint64_t a = 0; a < n_allocs; a++) {
                uint64_t left = mib - a * PER_ALLOC;
                CK(cuMemAlloc(&allocs[a], (left < PER_ALLOC ? left : PER_ALLOC) * PIECE));
        }
        for (uint64_t i = 0; i < n_pieces; i++)
                write_piece(i, 0);
        CK(cuCtxSynchronize());
        printf("ready %llu MiB\n", (unsigned long long)mib);
        fflush(stdout);
        char line[128];
        while (fgets(line, sizeof(line), stdin)) {
                unsigned permille, seed, shift = 0;
                if (sscanf(line, "dirty %u %u %u", &permille, &seed, &shift) >= 2) {
                        uint64_t n = n_pieces * permille / 1000, done = 0;
                        for (uint64_t k = 0; k < n; k++, done++)
                                write_piece((k * n_pieces / n + shift) % n_pieces, seed);
                        CK(cuCtxSynchronize());
                        printf("dirtied %llu pieces\n", (unsigned long long)done);
                } else if (strncmp(line, "check", 5) == 0) {
                        if (check_all() != 0)
                                return 1;
                } else if (strncmp(line, "realloc", 7) == 0) {
                        uint64_t a = n_allocs - 1, first = a * PER_ALLOC;
                        uint64_t count = n_pieces - first;
                        CK(cuMemFree(allocs[a]));
                        CK(cuMemAlloc(&allocs[a], count * PIECE));
                        for (uint64_t i = first; i < n_pieces; i++)
                                write_piece(i, seeds[i]);
                        CK(cuCtxSynchronize());
                        printf("reallocated\n");
                } else if (strncmp(line, "sync", 4) == 0) {
                        CK(cuCtxSynchronize());
                        printf("synced\n");
                } else if (strncmp(line, "quit", 4) == 0) {
                        return 0;
                } else {
                        printf("unknown command\n");
                }
                fflush(stdout);
        }
        return 0;
}
