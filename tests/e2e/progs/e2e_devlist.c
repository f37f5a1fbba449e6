/* SPDX-License-Identifier: MIT */
/*
 * e2e_devlist KERNELS_DIR ROUNDS [MS]: work on every device of the list,
 * for LUPINE_SERVER naming several servers (tests/e2e/test_devlist.py).
 * Prints the devices, then per round, on each device: a buffer written,
 * a kernel counting on the device, a fill kernel on the device's stream,
 * everything read back and checked; at the end each device's counter
 * must equal the rounds ("counters exact"). The devices' allocations must
 * lie in distinct arena slots (1 TiB apart at least). Then copies between
 * the first device and the last, every byte checked (copies()).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

#define MAXDEV 8

static unsigned long long checksum(const unsigned char *p, size_t n)
{
        unsigned long long h = 1469598103934665603ull; /* FNV-1a */
        for (size_t i = 0; i < n; i++)
                h = (h ^ p[i]) * 1099511628211ull;
        return h;
}

/* With E2E_DEVLIST_HOLD_MS, says `what` and waits, so that a test can read
 * the daemons' counters at that point. */
static void hold(const char *what)
{
        const char *e = getenv("E2E_DEVLIST_HOLD_MS");
        int ms = e ? atoi(e) : 0;
        if (ms <= 0)
                return;
        printf("hold %s\n", what);
        fflush(stdout);
        struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
}

/*
 * A library belongs to no context: loaded once, its kernel runs on every
 * device of the list, launched as a kernel and through cuKernelGetFunction.
 * Then the library and a module are unloaded, their kernels and functions
 * with them.
 */
static void library_kernels(CUcontext *ctx, int n, const char *path)
{
        const int m = 4096;
        unsigned got[4096];
        CUlibrary lib;
        CUkernel k;
        CK(cuLibraryLoadFromFile(&lib, path, NULL, NULL, 0, NULL, NULL, 0));
        CK(cuLibraryGetKernel(&k, lib, "fill_u32"));
        for (int d = 0; d < n; d++) {
                CUdeviceptr buf;
                CUfunction f;
                CK(cuCtxSetCurrent(ctx[d]));
                CK(cuMemAlloc(&buf, m * 4));
                for (int way = 0; way < 2; way++) {
                        unsigned v = 0xAB00u + (unsigned)(16 * d + way);
                        int mm = m;
                        void *pf[] = { &buf, &v, &mm };
                        if (way == 0)
                                f = (CUfunction)k;
                        else
                                CK(cuKernelGetFunction(&f, k));
                        CK(cuLaunchKernel(f, m / 256, 1, 1, 256, 1, 1, 0, 0, pf, NULL));
                        CK(cuMemcpyDtoH(got, buf, m * 4));
                        for (int i = 0; i < m; i++)
                                EXPECT(got[i] == v);
                }
                CK(cuMemFree(buf));
        }
        CK(cuLibraryUnload(lib));
        /* a module unloaded with its function: neither may hold up a later
         * restore (test_devlist.py's retry case restores after this) */
        CUmodule mod;
        CUfunction mf;
        CK(cuCtxSetCurrent(ctx[n - 1]));
        CK(cuModuleLoad(&mod, path));
        CK(cuModuleGetFunction(&mf, mod, "fill_u32"));
        CK(cuModuleUnload(mod));
        printf("library kernels on every device: checked\n");
        fflush(stdout);
}

/*
 * Peer queries: a device with itself is the driver's to answer (printed,
 * for the comparison with the local run); devices of two servers are not
 * peers, in every P2P attribute.
 */
static void peers(int n)
{
        int can = -1, v = -1;
        printf("cuDeviceCanAccessPeer(0, 0): %d\n", (int)cuDeviceCanAccessPeer(&can, 0, 0));
        printf("cuDeviceGetP2PAttribute(ACCESS_SUPPORTED, 0, 0): %d\n",
               (int)cuDeviceGetP2PAttribute(&v, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 0));
        if (n < 2)
                return;
        CK(cuDeviceCanAccessPeer(&can, 0, n - 1));
        EXPECT(can == 0);
        for (int a = CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK; a <= CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED;
             a++) {
                v = -1;
                CK(cuDeviceGetP2PAttribute(&v, (CUdevice_P2PAttribute)a, n - 1, 0));
                EXPECT(v == 0);
        }
        EXPECT_ERR(cuDeviceCanAccessPeer(&can, 0, n), CUDA_ERROR_INVALID_DEVICE);
        printf("devices of two servers: not peers\n");
        fflush(stdout);
}

/*
 * Copies between the first device and the last: between two servers'
 * memory when the list has several (daemon to daemon, issue 17 item 2),
 * on one device otherwise (the local driver's run, to compare with).
 * Prints one line whose checksum the two runs share.
 */
static void copies(CUcontext *ctx, CUfunction *fill, CUstream *st, int n)
{
        const size_t big = (8u << 20) + 12345, m = 1u << 16;
        unsigned char *host = malloc(big), *got = malloc(big);
        CUdeviceptr a, b, c, fb;
        unsigned long long sum = 0;
        EXPECT(host && got);
        for (size_t i = 0; i < big; i++)
                host[i] = (unsigned char)(i * 131 + (i >> 13));
        CK(cuCtxSetCurrent(ctx[0]));
        CK(cuMemAlloc(&a, big));
        CK(cuMemAlloc(&c, m * 4));
        CK(cuMemcpyHtoD(a, host, big));
        CK(cuCtxSetCurrent(ctx[n - 1]));
        CK(cuMemAlloc(&b, big));
        CK(cuMemAlloc(&fb, m * 4));
        CK(cuMemsetD8(b, 0, big));
        CK(cuCtxSynchronize());
        /* the first device's context is current and the destination is the
         * last device's memory */
        CK(cuCtxSetCurrent(ctx[0]));
        hold("before-copy");
        CK(cuMemcpyDtoD(b, a, big));
        hold("after-copy");
        CK(cuCtxSetCurrent(ctx[n - 1]));
        CK(cuMemcpyDtoH(got, b, big));
        EXPECT(memcmp(got, host, big) == 0);
        sum ^= checksum(got, big);
        /* the other way, from a kernel's output still running on its stream */
        unsigned v = 0xC0FFEEu;
        int mm = (int)m;
        void *pf[] = { &fb, &v, &mm };
        CK(cuLaunchKernel(fill[n - 1], (unsigned)(m / 256), 1, 1, 256, 1, 1, 0, st[n - 1], pf, NULL));
        CK(cuMemcpyPeerAsync(c, ctx[0], fb, ctx[n - 1], m * 4, st[n - 1]));
        CK(cuStreamSynchronize(st[n - 1]));
        CK(cuCtxSetCurrent(ctx[0]));
        CK(cuMemcpyDtoH(got, c, m * 4));
        for (size_t i = 0; i < m; i++)
                EXPECT(((unsigned *)got)[i] == v);
        sum ^= checksum(got, m * 4);
        /* the last device's stream waits for an event of the first's (two
         * servers: the event is waited for on its own server) */
        CUevent ev;
        CK(cuCtxSetCurrent(ctx[0]));
        CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
        CK(cuEventRecord(ev, st[0]));
        CK(cuCtxSetCurrent(ctx[n - 1]));
        CK(cuStreamWaitEvent(st[n - 1], ev, 0));
        CK(cuStreamSynchronize(st[n - 1]));
        CK(cuEventDestroy(ev));
        /* cuMemcpy, unified addressing: part of b back into a, at an odd offset */
        CK(cuMemcpy(a + 3, b + 1000001, 777777));
        CK(cuMemcpyDtoH(got, a, 1 << 20));
        EXPECT(memcmp(got + 3, host + 1000001, 777777) == 0 && memcmp(got, host, 3) == 0);
        sum ^= checksum(got, 1 << 20);
        /* cuMemcpyPeer, synchronous */
        CK(cuMemcpyPeer(b + 5, ctx[n - 1], a, ctx[0], 4096));
        CK(cuCtxSetCurrent(ctx[n - 1]));
        CK(cuMemcpyDtoH(got, b, 8192));
        for (size_t i = 0; i < 8192; i++) { /* b was host; a's first 4096 bytes went to b + 5 */
                size_t j = i - 5;
                unsigned char want = i < 5 || i >= 4101 ? host[i] : j < 3 ? host[j] : host[1000001 + j - 3];
                if (got[i] != want) {
                        EXPECT(got[i] == want);
                        break;
                }
        }
        sum ^= checksum(got, 8192);
        CK(cuMemFree(b));
        CK(cuMemFree(fb));
        CK(cuCtxSetCurrent(ctx[0]));
        CK(cuMemFree(a));
        CK(cuMemFree(c));
        printf("copies between the first and the last device: %zu bytes checked, checksum %016llx\n",
               big + m * 4 + 777777 + 4096, sum);
        fflush(stdout);
        free(host);
        free(got);
}

int main(int argc, char **argv)
{
        if (argc < 3) {
                fprintf(stderr, "usage: %s KERNELS_DIR ROUNDS [MS]\n", argv[0]);
                return 2;
        }
        int rounds = atoi(argv[2]), pause_ms = argc > 3 ? atoi(argv[3]) : 0, n = 0;
        char path[4096], name[300];
        CUcontext ctx[MAXDEV];
        CUmodule mod[MAXDEV];
        CUfunction add[MAXDEV], fill[MAXDEV];
        CUstream st[MAXDEV];
        CUdeviceptr counter[MAXDEV];

        snprintf(path, sizeof(path), "%s/kernels.ptx", argv[1]);
        CK(cuInit(0));
        CK(cuDeviceGetCount(&n));
        EXPECT(n >= 1 && n <= MAXDEV);
        printf("devices %d\n", n);
        for (int d = 0; d < n; d++) {
                CUdevice dev;
                CK(cuDeviceGet(&dev, d));
                CK(cuDeviceGetName(name, sizeof(name), dev));
                printf("device %d: %s\n", d, name);
                CK(cuDevicePrimaryCtxRetain(&ctx[d], dev));
                CK(cuCtxSetCurrent(ctx[d]));
                CUdevice back = -1;
                CK(cuCtxGetDevice(&back));
                EXPECT(back == dev);
                CK(cuModuleLoad(&mod[d], path));
                CK(cuModuleGetFunction(&add[d], mod[d], "add_global_u32"));
                CK(cuModuleGetFunction(&fill[d], mod[d], "fill_u32"));
                CUdeviceptr g;
                size_t gs;
                unsigned one_bias = 1; /* add_global_u32 adds g_bias: one per round */
                CK(cuModuleGetGlobal(&g, &gs, mod[d], "g_bias"));
                EXPECT(gs == sizeof(one_bias));
                CK(cuMemcpyHtoD(g, &one_bias, sizeof(one_bias)));
                CK(cuStreamCreate(&st[d], CU_STREAM_NON_BLOCKING));
                CK(cuMemAlloc(&counter[d], 4));
                CK(cuMemsetD32(counter[d], 0, 1));
                for (int e = 0; e < d; e++)
                        EXPECT((counter[d] >> 40) != (counter[e] >> 40)); /* arena slots of their own */
        }
        fflush(stdout);
        const int m = 1 << 14;
        unsigned *host = malloc((size_t)m * 4), *got = malloc((size_t)m * 4);
        EXPECT(host && got);
        for (int r = 1; r <= rounds; r++) {
                for (int d = 0; d < n; d++) {
                        CK(cuCtxSetCurrent(ctx[d]));
                        CUdeviceptr buf, fb;
                        CK(cuMemAlloc(&buf, (size_t)m * 4));
                        CK(cuMemAlloc(&fb, (size_t)m * 4));
                        for (int i = 0; i < m; i++)
                                host[i] = (unsigned)(r * 7919 + d * 104729 + i);
                        CK(cuMemcpyHtoD(buf, host, (size_t)m * 4));
                        int one = 1;
                        void *pa[] = { &counter[d], &one };
                        CK(cuLaunchKernel(add[d], 1, 1, 1, 32, 1, 1, 0, 0, pa, NULL));
                        unsigned v = (unsigned)(r + 1000 * d);
                        int mm = m;
                        void *pf[] = { &fb, &v, &mm };
                        CK(cuLaunchKernel(fill[d], 16, 1, 1, 256, 1, 1, 0, st[d], pf, NULL));
                        CK(cuStreamSynchronize(st[d]));
                        CK(cuMemcpyDtoH(got, fb, (size_t)m * 4));
                        for (int i = 0; i < m; i++)
                                EXPECT(got[i] == v);
                        CK(cuMemcpyDtoH(got, buf, (size_t)m * 4));
                        EXPECT(memcmp(got, host, (size_t)m * 4) == 0);
                        CK(cuMemFree(buf));
                        CK(cuMemFree(fb));
                }
                printf("round %d ok\n", r);
                fflush(stdout);
                if (pause_ms) {
                        struct timespec ts = { pause_ms / 1000, (long)(pause_ms % 1000) * 1000000L };
                        nanosleep(&ts, NULL);
                }
        }
        peers(n);
        library_kernels(ctx, n, path);
        copies(ctx, fill, st, n);
        /* a handle goes to its own server whatever the current context:
         * device n-1's stream while device 0's context is current */
        CK(cuCtxSetCurrent(ctx[0]));
        CK(cuStreamSynchronize(st[n - 1]));
        CK(cuStreamQuery(st[n - 1]));
        for (int d = 0; d < n; d++) {
                unsigned c = 0;
                CK(cuCtxSetCurrent(ctx[d]));
                CK(cuMemcpyDtoH(&c, counter[d], 4));
                if (c != (unsigned)rounds) {
                        fprintf(stderr, "device %d: counter %u, expected %d: a call was lost or ran twice\n", d, c,
                                rounds);
                        return 1;
                }
                CK(cuDevicePrimaryCtxRelease(d));
        }
        printf("e2e_devlist: OK, %d devices, %d rounds, counters exact\n", n, rounds);
        return e2e_failures ? 1 : 0;
}
