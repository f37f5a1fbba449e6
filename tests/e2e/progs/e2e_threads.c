/* SPDX-License-Identifier: MIT */
/* Several threads of one process share the session: each allocates, copies
 * and verifies its own data, concurrently, many times. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "check.h"

#define THREADS 4
#define ROUNDS 40

static CUcontext primary;

static void *worker(void *arg)
{
        unsigned id = (unsigned)(uintptr_t)arg;
        uint32_t x = id * 7919u + 17;
        CK(cuCtxSetCurrent(primary));
        for (int round = 0; round < ROUNDS; round++) {
                x ^= x << 13; x ^= x >> 17; x ^= x << 5;
                size_t n = 1 + x % (3u << 20);
                uint8_t *src = malloc(n), *dst = malloc(n);
                EXPECT(src && dst);
                for (size_t i = 0; i < n; i++)
                        src[i] = (uint8_t)(i * 31 + id + round);
                CUdeviceptr d;
                CK(cuMemAlloc(&d, n));
                CK(cuMemcpyHtoD(d, src, n));
                if (n > 64) {
                        CK(cuMemsetD8(d + 10, (unsigned char)id, 50));
                        memset(src + 10, (int)id, 50);
                }
                CK(cuMemcpyDtoH(dst, d, n));
                if (memcmp(src, dst, n) != 0) {
                        fprintf(stderr, "thread %u round %d: data mismatch (%zu bytes)\n", id, round, n);
                        exit(1);
                }
                CK(cuMemFree(d));
                free(src);
                free(dst);
        }
        return NULL;
}

int main(void)
{
        pthread_t t[THREADS];
        CK(cuInit(0));
        CK(cuDevicePrimaryCtxRetain(&primary, 0));
        for (int i = 0; i < THREADS; i++)
                EXPECT(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i) == 0);
        for (int i = 0; i < THREADS; i++)
                pthread_join(t[i], NULL);
        CK(cuCtxSetCurrent(primary));
        CK(cuCtxSynchronize());
        CK(cuDevicePrimaryCtxRelease(0));
        printf("e2e_threads: OK\n");
        return e2e_failures ? 1 : 0;
}
