/* SPDX-License-Identifier: MIT */
/*
 * A long, verified, multithreaded workload for the reconnect tests: the
 * connection to lupined is cut under it many times (tests/e2e/fault_proxy.py)
 * and it must end with exactly the data a run without cuts produces.
 *
 * Each thread owns two streams and, every round:
 *   - uploads two random vectors of a random length (many 1 MiB frames),
 *     adds them with vec_add_f32 on stream 1 and reads the sum back with an
 *     asynchronous device->host copy, checked element by element;
 *   - fills a buffer with fill_u32 on stream 2, overwrites part of it with an
 *     asynchronous memset, reads it back synchronously and checks it;
 *   - adds the round's increment to an accumulator that lives on the device
 *     for the whole run (vec_add_f32 acc = acc + inc), and checks it against
 *     the host's model: a launch lost or run twice leaves it off;
 *   - frees and reallocates buffers.
 * The final line gives counts and a checksum of every result read back; it
 * depends only on the seeds, so a run through cuts must print the same one
 * as a run without.
 *
 * usage: e2e_resume KERNELS_DIR ROUNDS [THREADS]
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

#define MAX_THREADS 8
#define ACC_N 4096

static CUcontext ctx;
static CUfunction vec_add, fill;
static int rounds;

struct result {
        uint64_t checksum;
        uint64_t launches;
        uint64_t bytes;
        int failed;
};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
        const uint8_t *b = p;
        for (size_t i = 0; i < n; i++)
                h = (h ^ b[i]) * 1099511628211ull;
        return h;
}

static uint32_t next_rand(uint32_t *x)
{
        *x ^= *x << 13;
        *x ^= *x >> 17;
        *x ^= *x << 5;
        return *x;
}

#define FAIL(res, ...) do { \
        fprintf(stderr, __VA_ARGS__); \
        (res)->failed = 1; \
        return; \
} while (0)

static void launch(CUfunction f, int n, CUstream s, void **params, struct result *res)
{
        unsigned grid = (unsigned)((n + 255) / 256);
        if (grid > 64)
                grid = 64;
        CK(cuLaunchKernel(f, grid, 1, 1, 256, 1, 1, 0, s, params, NULL));
        res->launches++;
}

static void run_thread(unsigned t, struct result *res)
{
        uint32_t x = 0x1234567u + t * 7919u;
        CUstream s1, s2;
        CUdeviceptr acc, inc;
        float *hacc = calloc(ACC_N, sizeof(float)), *hinc = malloc(ACC_N * sizeof(float));
        float *got = malloc(ACC_N * sizeof(float));
        EXPECT(hacc && hinc && got);

        CK(cuCtxSetCurrent(ctx));
        CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
        CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
        CK(cuMemAlloc(&acc, ACC_N * sizeof(float)));
        CK(cuMemAlloc(&inc, ACC_N * sizeof(float)));
        CK(cuMemsetD32(acc, 0, ACC_N));
        res->checksum = 14695981039346656037ull;

        for (int r = 0; r < rounds; r++) {
                /* vectors: a + b on stream 1, back asynchronously */
                int n = 1024 + (int)(next_rand(&x) % (400u * 1024u));
                size_t nb = (size_t)n * sizeof(float);
                float *a = malloc(nb), *b = malloc(nb), *c = malloc(nb);
                EXPECT(a && b && c);
                for (int i = 0; i < n; i++) {
                        a[i] = (float)(next_rand(&x) % 100000);
                        b[i] = (float)(next_rand(&x) % 100000);
                }
                CUdeviceptr da, db, dc;
                CK(cuMemAlloc(&da, nb));
                CK(cuMemAlloc(&db, nb));
                CK(cuMemAlloc(&dc, nb));
                CK(cuMemcpyHtoD(da, a, nb));
                CK(cuMemcpyHtoDAsync(db, b, nb, s1));
                void *pv[] = { &da, &db, &dc, &n };
                launch(vec_add, n, s1, pv, res);
                memset(c, 0xee, nb);
                CK(cuMemcpyDtoHAsync(c, dc, nb, s1));

                /* a fill and a memset on stream 2, back synchronously */
                int m = 1 + (int)(next_rand(&x) % (64u * 1024u));
                unsigned v = next_rand(&x);
                unsigned *f = malloc((size_t)m * 4);
                EXPECT(f);
                CUdeviceptr df;
                CK(cuMemAlloc(&df, (size_t)m * 4));
                void *pf[] = { &df, &v, &m };
                launch(fill, m, s2, pf, res);
                int off = (int)(next_rand(&x) % (unsigned)m), cnt = (int)(next_rand(&x) % (unsigned)(m - off + 1));
                unsigned mv = 0xab000000u | (unsigned)r;
                CK(cuMemsetD32Async(df + (CUdeviceptr)off * 4, mv, (size_t)cnt, s2));
                CK(cuStreamSynchronize(s2));
                CK(cuMemcpyDtoH(f, df, (size_t)m * 4));

                /* the accumulator: exactly-once, or it is off */
                for (int i = 0; i < ACC_N; i++) {
                        hinc[i] = (float)((i % 13) + (r % 7) + t);
                        hacc[i] += hinc[i];
                }
                CK(cuMemcpyHtoD(inc, hinc, ACC_N * sizeof(float)));
                int an = ACC_N;
                void *pa[] = { &acc, &inc, &acc, &an };
                launch(vec_add, ACC_N, 0, pa, res);

                CK(cuStreamSynchronize(s1));
                for (int i = 0; i < n; i++)
                        if (c[i] != a[i] + b[i])
                                FAIL(res, "thread %u round %d: sum[%d] = %g, expected %g\n", t, r, i, (double)c[i],
                                     (double)(a[i] + b[i]));
                for (int i = 0; i < m; i++) {
                        unsigned want = i >= off && i < off + cnt ? mv : v;
                        if (f[i] != want)
                                FAIL(res, "thread %u round %d: fill[%d] = 0x%x, expected 0x%x\n", t, r, i, f[i], want);
                }
                CK(cuMemcpyDtoH(got, acc, ACC_N * sizeof(float)));
                for (int i = 0; i < ACC_N; i++)
                        if (got[i] != hacc[i])
                                FAIL(res, "thread %u round %d: accumulator[%d] = %g, expected %g: a call was lost or ran twice\n",
                                     t, r, i, (double)got[i], (double)hacc[i]);

                res->checksum = fnv(res->checksum, c, nb);
                res->checksum = fnv(res->checksum, f, (size_t)m * 4);
                res->checksum = fnv(res->checksum, got, ACC_N * sizeof(float));
                res->bytes += 3 * nb + (size_t)m * 4 + 2 * ACC_N * sizeof(float);
                CK(cuMemFree(da));
                CK(cuMemFree(db));
                CK(cuMemFree(dc));
                CK(cuMemFree(df));
                free(a);
                free(b);
                free(c);
                free(f);
        }
        CK(cuMemFree(acc));
        CK(cuMemFree(inc));
        CK(cuStreamDestroy(s1));
        CK(cuStreamDestroy(s2));
        free(hacc);
        free(hinc);
        free(got);
}

struct arg {
        unsigned t;
        struct result res;
};

static void *thread_main(void *p)
{
        struct arg *a = p;
        run_thread(a->t, &a->res);
        return NULL;
}

int main(int argc, char **argv)
{
        if (argc < 3) {
                fprintf(stderr, "usage: %s KERNELS_DIR ROUNDS [THREADS]\n", argv[0]);
                return 2;
        }
        rounds = atoi(argv[2]);
        int threads = argc > 3 ? atoi(argv[3]) : 3;
        if (rounds < 1 || threads < 1 || threads > MAX_THREADS) {
                fprintf(stderr, "bad ROUNDS or THREADS (1..%d)\n", MAX_THREADS);
                return 2;
        }
        char path[4096];
        CUmodule mod;
        snprintf(path, sizeof(path), "%s/kernels.ptx", argv[1]);
        CK(cuInit(0));
        CK(cuDevicePrimaryCtxRetain(&ctx, 0));
        CK(cuCtxSetCurrent(ctx));
        CK(cuModuleLoad(&mod, path));
        CK(cuModuleGetFunction(&vec_add, mod, "vec_add_f32"));
        CK(cuModuleGetFunction(&fill, mod, "fill_u32"));

        pthread_t th[MAX_THREADS];
        struct arg args[MAX_THREADS];
        for (int i = 0; i < threads; i++) {
                args[i] = (struct arg){ .t = (unsigned)i };
                EXPECT(pthread_create(&th[i], NULL, thread_main, &args[i]) == 0);
        }
        uint64_t checksum = 0, launches = 0, bytes = 0;
        int failed = 0;
        for (int i = 0; i < threads; i++) {
                pthread_join(th[i], NULL);
                checksum = checksum * 31 + args[i].res.checksum; /* in thread order: deterministic */
                launches += args[i].res.launches;
                bytes += args[i].res.bytes;
                failed |= args[i].res.failed;
        }
        CK(cuCtxSynchronize());
        CK(cuModuleUnload(mod));
        CK(cuDevicePrimaryCtxRelease(0));
        if (failed || e2e_failures) {
                printf("e2e_resume: FAILED\n");
                return 1;
        }
        printf("e2e_resume: OK threads=%d rounds=%d launches=%llu bytes=%llu checksum=%016llx\n", threads, rounds,
               (unsigned long long)launches, (unsigned long long)bytes, (unsigned long long)checksum);
        return 0;
}
