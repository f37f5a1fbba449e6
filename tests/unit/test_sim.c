/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for libcuda-sim, linked directly against it.
 *
 * cuInit reads the environment once per process, so the tests run in two
 * groups: the first runs before cuInit (and forks children to try other
 * environments), the second initialises with LUPINE_SIM_MEM_MB=64 so that
 * running out of memory is cheap to provoke.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

/* For the versioned prototypes (cuCtxCreate_v2 and friends) that the public
 * header only reaches through macros. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#define MiB (1024ULL * 1024)
#define TEST_MEM_MB 64
#define GRAN (2 * MiB)
#define VMM_HINT 0x300000000000ULL
#define VMM_RESERVE (1ULL << 40)

#define assert_cu(call) assert_int_equal((call), CUDA_SUCCESS)

static void fill_pattern(unsigned char *p, size_t n, unsigned seed)
{
        for (size_t i = 0; i < n; i++)
                p[i] = (unsigned char)((i * 131 + seed * 7 + (i >> 9)) & 0xff);
}

/* ------------------------------------------------------------------ */
/* group 1: before cuInit                                              */
/* ------------------------------------------------------------------ */

static void test_before_init(void **state)
{
        CUdeviceptr p;
        CUcontext ctx;
        int n, v;
        const char *s;

        (void)state;
        assert_int_equal(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
        assert_int_equal(cuMemAlloc_v2(&p, 16), CUDA_ERROR_NOT_INITIALIZED);
        assert_int_equal(cuCtxGetCurrent(&ctx), CUDA_ERROR_NOT_INITIALIZED);
        assert_int_equal(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_ERROR_NOT_INITIALIZED);
        assert_int_equal(cuMemAddressReserve(&p, GRAN, 0, 0, 0), CUDA_ERROR_NOT_INITIALIZED);
        assert_int_equal(cuMemcpyHtoD_v2(0, &n, 4), CUDA_ERROR_NOT_INITIALIZED);
        /* These answer before cuInit in the real driver too. */
        assert_cu(cuDriverGetVersion(&v));
        assert_int_equal(v, CUDA_VERSION);
        assert_int_equal(v, 13000);
        assert_cu(cuGetErrorName(CUDA_ERROR_NOT_INITIALIZED, &s));
        assert_string_equal(s, "CUDA_ERROR_NOT_INITIALIZED");
        assert_int_equal(cuInit(1), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
}

/* Child of a fork made before cuInit: returns 0 when all checks hold. */
static int child_devices(void)
{
        char name[128], name0[128];
        CUuuid u[4];
        size_t total;
        int n;

        if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&n) != CUDA_SUCCESS || n != 4)
                return 1;
        for (int i = 0; i < n; i++) {
                if (cuDeviceGetName(name, sizeof(name), i) != CUDA_SUCCESS || !strstr(name, "(sim)"))
                        return 2;
                if (i == 0)
                        memcpy(name0, name, sizeof(name));
                else if (strcmp(name, name0) == 0)
                        return 3;
                if (cuDeviceGetUuid_v2(&u[i], i) != CUDA_SUCCESS)
                        return 4;
                for (int j = 0; j < i; j++)
                        if (memcmp(&u[i], &u[j], sizeof(u[i])) == 0)
                                return 5;
                if (cuDeviceTotalMem_v2(&total, i) != CUDA_SUCCESS || total != 128 * MiB)
                        return 6;
        }
        if (cuDeviceGetName(name, sizeof(name), 4) != CUDA_ERROR_INVALID_DEVICE)
                return 7;
        return 0;
}

/* Runs fn in a child with the environment set; its stderr goes to err. */
static int run_child(int (*fn)(void), const char *devices, const char *mem_mb,
                     char *err, size_t err_len)
{
        int pipefd[2], status;
        ssize_t n, got = 0;
        pid_t pid;

        if (pipe(pipefd) < 0)
                return -1;
        pid = fork();
        if (pid < 0)
                return -1;
        if (pid == 0) {
                dup2(pipefd[1], STDERR_FILENO);
                close(pipefd[0]);
                close(pipefd[1]);
                setenv("LUPINE_SIM_DEVICES", devices, 1);
                setenv("LUPINE_SIM_MEM_MB", mem_mb, 1);
                _exit(fn());
        }
        close(pipefd[1]);
        while (got < (ssize_t)err_len - 1 &&
               (n = read(pipefd[0], err + got, err_len - 1 - (size_t)got)) > 0)
                got += n;
        err[got] = '\0';
        close(pipefd[0]);
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
                return -1;
        return WEXITSTATUS(status);
}

static void test_env_devices(void **state)
{
        char err[512];

        (void)state;
        assert_int_equal(run_child(child_devices, "4", "128", err, sizeof(err)), 0);
        assert_string_equal(err, "");
}

static int child_bad_env(void)
{
        size_t total;
        int n;

        if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&n) != CUDA_SUCCESS || n != 1)
                return 1;
        if (cuDeviceTotalMem_v2(&total, 0) != CUDA_SUCCESS || total != 16384 * MiB)
                return 2;
        return 0;
}

static void test_env_bad_values(void **state)
{
        char err[512];
        char *nl;

        (void)state;
        /* Out of range and garbage both fall back, one line each. */
        assert_int_equal(run_child(child_bad_env, "17", "lots", err, sizeof(err)), 0);
        nl = strchr(err, '\n');
        assert_non_null(nl);
        assert_non_null(strstr(err, "LUPINE_SIM_DEVICES"));
        assert_non_null(strstr(nl + 1, "LUPINE_SIM_MEM_MB"));
        assert_non_null(strchr(nl + 1, '\n'));
        assert_null(strchr(strchr(nl + 1, '\n') + 1, '\n'));
}

/* ------------------------------------------------------------------ */
/* group 2: initialised, one device of TEST_MEM_MB                     */
/* ------------------------------------------------------------------ */

static int group_init(void **state)
{
        (void)state;
        unsetenv("LUPINE_SIM_DEVICES");
        setenv("LUPINE_SIM_MEM_MB", "64", 1);
        return cuInit(0) == CUDA_SUCCESS && cuInit(0) == CUDA_SUCCESS ? 0 : -1;
}

/* Most tests run with the primary context of device 0 current. */
static int with_primary(void **state)
{
        CUcontext ctx;

        if (cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
                return -1;
        *state = ctx;
        return 0;
}

static int without_primary(void **state)
{
        (void)state;
        if (cuCtxSetCurrent(NULL) != CUDA_SUCCESS)
                return -1;
        return cuDevicePrimaryCtxRelease_v2(0) == CUDA_SUCCESS ? 0 : -1;
}

static void test_devices(void **state)
{
        char name[128], bus[32];
        CUuuid u1, u2;
        CUdevice dev;
        size_t total;
        int n;

        (void)state;
        assert_cu(cuDeviceGetCount(&n));
        assert_int_equal(n, 1);
        assert_int_equal(cuDeviceGetCount(NULL), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuDeviceGet(&dev, 0));
        assert_int_equal(dev, 0);
        assert_int_equal(cuDeviceGet(&dev, 1), CUDA_ERROR_INVALID_DEVICE);
        assert_int_equal(cuDeviceGet(&dev, -1), CUDA_ERROR_INVALID_DEVICE);
        assert_int_equal(cuDeviceGet(NULL, 0), CUDA_ERROR_INVALID_VALUE);

        assert_cu(cuDeviceGetName(name, sizeof(name), 0));
        assert_non_null(strstr(name, "(sim)"));
        assert_non_null(strstr(name, "simulated"));
        assert_cu(cuDeviceGetName(name, 8, 0));
        assert_int_equal(strlen(name), 7);
        assert_int_equal(cuDeviceGetName(name, 0, 0), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuDeviceGetName(NULL, 8, 0), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuDeviceGetName(name, 8, 3), CUDA_ERROR_INVALID_DEVICE);

        assert_cu(cuDeviceGetUuid_v2(&u1, 0));
        assert_cu(cuDeviceGetUuid(&u2, 0));
        assert_memory_equal(&u1, &u2, sizeof(u1));
        assert_int_equal(cuDeviceGetUuid_v2(NULL, 0), CUDA_ERROR_INVALID_VALUE);

        assert_cu(cuDeviceTotalMem_v2(&total, 0));
        assert_int_equal(total, TEST_MEM_MB * MiB);
        assert_cu(cuDeviceGetPCIBusId(bus, sizeof(bus), 0));
        assert_string_equal(bus, "0000:18:00.0");
}

static void test_attributes(void **state)
{
        static const struct { CUdevice_attribute a; int v; } expect[] = {
                { CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9 },
                { CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0 },
                { CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132 },
                { CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32 },
                { CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024 },
                { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647 },
                { CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 228 * 1024 },
                { CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 48 * 1024 },
                { CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 227 * 1024 },
                { CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, 65536 },
                { CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1 },
                { CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1 },
                { CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 1 },
                { CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 1 },
                { CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0x18 },
        };
        int v;

        (void)state;
        for (int a = 1; a < CU_DEVICE_ATTRIBUTE_MAX; a++) {
                v = -12345;
                if (cuDeviceGetAttribute(&v, (CUdevice_attribute)a, 0) != CUDA_SUCCESS)
                        fail_msg("attribute %d has no answer", a);
        }
        for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++) {
                assert_cu(cuDeviceGetAttribute(&v, expect[i].a, 0));
                assert_int_equal(v, expect[i].v);
        }
        assert_int_equal(cuDeviceGetAttribute(&v, (CUdevice_attribute)0, 0), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuDeviceGetAttribute(&v, (CUdevice_attribute)100000, 0), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuDeviceGetAttribute(NULL, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 1), CUDA_ERROR_INVALID_DEVICE);
}

static void test_primary_ctx(void **state)
{
        CUcontext a, b, cur;
        unsigned flags, version;
        int active;
        CUdeviceptr p;

        (void)state;
        assert_cu(cuDevicePrimaryCtxGetState(0, &flags, &active));
        assert_int_equal(active, 0);
        assert_int_equal(cuDevicePrimaryCtxGetState(0, NULL, &active), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuDevicePrimaryCtxGetState(5, &flags, &active), CUDA_ERROR_INVALID_DEVICE);

        assert_cu(cuDevicePrimaryCtxSetFlags_v2(0, CU_CTX_SCHED_BLOCKING_SYNC));
        assert_int_equal(cuDevicePrimaryCtxSetFlags_v2(0, 0x1000), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuDevicePrimaryCtxSetFlags_v2(0, CU_CTX_SCHED_SPIN | CU_CTX_SCHED_YIELD),
                         CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuDevicePrimaryCtxRetain(&a, 0));
        assert_non_null(a);
        assert_cu(cuDevicePrimaryCtxRetain(&b, 0));
        assert_ptr_equal(a, b);
        assert_cu(cuDevicePrimaryCtxGetState(0, &flags, &active));
        assert_int_equal(active, 1);
        assert_int_equal(flags, CU_CTX_SCHED_BLOCKING_SYNC);

        /* Retain does not make it current. */
        assert_cu(cuCtxGetCurrent(&cur));
        assert_null(cur);
        assert_cu(cuCtxSetCurrent(a));
        assert_cu(cuCtxGetFlags(&flags));
        assert_int_equal(flags, CU_CTX_SCHED_BLOCKING_SYNC);
        assert_cu(cuCtxGetApiVersion(a, &version));
        assert_cu(cuMemAlloc_v2(&p, 4096));

        assert_cu(cuDevicePrimaryCtxRelease_v2(0));
        assert_cu(cuDevicePrimaryCtxGetState(0, &flags, &active));
        assert_int_equal(active, 1);
        /* The last release frees its memory and leaves the handle dead. */
        assert_cu(cuDevicePrimaryCtxRelease(0));
        assert_cu(cuDevicePrimaryCtxGetState(0, &flags, &active));
        assert_int_equal(active, 0);
        assert_int_equal(cuDevicePrimaryCtxRelease_v2(0), CUDA_ERROR_INVALID_CONTEXT);
        assert_int_equal(cuCtxSynchronize(), CUDA_ERROR_CONTEXT_IS_DESTROYED);
        assert_int_equal(cuCtxGetApiVersion(a, &version), CUDA_ERROR_INVALID_CONTEXT);
        assert_int_equal(cuCtxPushCurrent_v2(a), CUDA_ERROR_INVALID_CONTEXT);
        assert_cu(cuCtxSetCurrent(NULL));

        /* Same handle next time; reset deactivates it. */
        assert_cu(cuDevicePrimaryCtxRetain(&b, 0));
        assert_ptr_equal(a, b);
        assert_cu(cuCtxPushCurrent_v2(b));
        assert_int_equal(cuMemFree_v2(p), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuDevicePrimaryCtxReset_v2(0));
        assert_cu(cuDevicePrimaryCtxGetState(0, &flags, &active));
        assert_int_equal(active, 0);
        assert_int_equal(cuCtxSynchronize(), CUDA_ERROR_CONTEXT_IS_DESTROYED);
        assert_cu(cuCtxPopCurrent_v2(&cur));
        assert_ptr_equal(cur, b);
        assert_cu(cuDevicePrimaryCtxSetFlags(0, 0));
        assert_cu(cuDevicePrimaryCtxReset(0));
}

struct thread_arg {
        CUcontext ctx;
        pthread_barrier_t *pushed, *destroyed;
        CUresult before, after;
};

static void *ctx_thread(void *p)
{
        struct thread_arg *t = p;

        cuCtxPushCurrent_v2(t->ctx);
        t->before = cuCtxSynchronize();
        pthread_barrier_wait(t->pushed);
        pthread_barrier_wait(t->destroyed);
        t->after = cuCtxSynchronize();
        return NULL;
}

static void test_ctx_stack(void **state)
{
        CUcontext a, b, cur;
        CUdevice dev;
        unsigned flags, version;
        pthread_barrier_t pushed, destroyed;
        struct thread_arg t;
        pthread_t th;

        (void)state;
        assert_cu(cuCtxGetCurrent(&cur));
        assert_null(cur);
        assert_int_equal(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
        assert_int_equal(cuCtxGetDevice(&dev), CUDA_ERROR_INVALID_CONTEXT);
        assert_int_equal(cuCtxPopCurrent_v2(&cur), CUDA_ERROR_INVALID_CONTEXT);
        assert_int_equal(cuCtxCreate_v2(NULL, 0, 0), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuCtxCreate_v2(&a, 0, 7), CUDA_ERROR_INVALID_DEVICE);
        assert_int_equal(cuCtxCreate_v2(&a, 0xf000, 0), CUDA_ERROR_INVALID_VALUE);

        /* Create pushes. */
        assert_cu(cuCtxCreate_v2(&a, CU_CTX_SCHED_YIELD, 0));
        assert_cu(cuCtxGetCurrent(&cur));
        assert_ptr_equal(cur, a);
        assert_cu(cuCtxGetDevice(&dev));
        assert_int_equal(dev, 0);
        assert_cu(cuCtxGetFlags(&flags));
        assert_int_equal(flags, CU_CTX_SCHED_YIELD);
        assert_cu(cuCtxGetApiVersion(NULL, &version));
        assert_int_equal(version, 3020);
        assert_cu(cuCtxSynchronize());

        assert_cu(cuCtxCreate_v4(&b, NULL, 0, 0));
        assert_cu(cuCtxGetCurrent(&cur));
        assert_ptr_equal(cur, b);
        assert_cu(cuCtxPopCurrent_v2(&cur));
        assert_ptr_equal(cur, b);
        assert_cu(cuCtxGetCurrent(&cur));
        assert_ptr_equal(cur, a);
        assert_cu(cuCtxPushCurrent_v2(b));
        /* Destroying the current context pops it. */
        assert_cu(cuCtxDestroy_v2(b));
        assert_cu(cuCtxGetCurrent(&cur));
        assert_ptr_equal(cur, a);
        assert_int_equal(cuCtxDestroy_v2(b), CUDA_ERROR_INVALID_CONTEXT);
        assert_int_equal(cuCtxPushCurrent_v2(b), CUDA_ERROR_INVALID_CONTEXT);
        assert_int_equal(cuCtxSetCurrent(b), CUDA_ERROR_INVALID_CONTEXT);
        assert_int_equal(cuCtxGetApiVersion(b, &version), CUDA_ERROR_INVALID_CONTEXT);
        assert_int_equal(cuCtxPushCurrent_v2((CUcontext)(uintptr_t)0xdeadbeef), CUDA_ERROR_INVALID_CONTEXT);
        assert_int_equal(cuCtxDestroy_v2(NULL), CUDA_ERROR_INVALID_CONTEXT);

        /* A context destroyed on one thread is detected on another. */
        pthread_barrier_init(&pushed, NULL, 2);
        pthread_barrier_init(&destroyed, NULL, 2);
        t = (struct thread_arg){ .ctx = a, .pushed = &pushed, .destroyed = &destroyed };
        assert_int_equal(pthread_create(&th, NULL, ctx_thread, &t), 0);
        pthread_barrier_wait(&pushed);
        assert_cu(cuCtxDestroy_v2(a));
        pthread_barrier_wait(&destroyed);
        pthread_join(th, NULL);
        assert_int_equal(t.before, CUDA_SUCCESS);
        assert_int_equal(t.after, CUDA_ERROR_CONTEXT_IS_DESTROYED);
        pthread_barrier_destroy(&pushed);
        pthread_barrier_destroy(&destroyed);

        assert_cu(cuCtxGetCurrent(&cur));
        assert_null(cur);
        /* SetCurrent(NULL) on an empty stack is a no-op. */
        assert_cu(cuCtxSetCurrent(NULL));
}

static void test_copy_roundtrip(void **state)
{
        const size_t n = 1 * MiB + 3;
        unsigned char *src = malloc(n), *dst = malloc(n);
        CUdeviceptr a, b, base;
        CUstream s;
        size_t size;

        assert_non_null(src);
        assert_non_null(dst);
        fill_pattern(src, n, 1);
        assert_cu(cuMemAlloc_v2(&a, n));
        assert_cu(cuMemAlloc_v2(&b, n));
        assert_int_equal(a % 256, 0);
        assert_int_equal(b % 256, 0);

        assert_cu(cuMemcpyHtoD_v2(a, src, n));
        assert_cu(cuMemcpyDtoD_v2(b, a, n));
        memset(dst, 0, n);
        assert_cu(cuMemcpyDtoH_v2(dst, b, n));
        assert_memory_equal(src, dst, n);

        /* Async copies on a blocking stream, then the legacy stream: the
         * legacy stream waits for the blocking one. */
        assert_cu(cuStreamCreate(&s, 0));
        fill_pattern(src, n, 2);
        assert_cu(cuMemcpyHtoDAsync_v2(a, src, n, s));
        assert_cu(cuMemcpyDtoDAsync_v2(b, a, n, CU_STREAM_LEGACY));
        memset(dst, 0, n);
        assert_cu(cuMemcpyDtoHAsync_v2(dst, b, n, CU_STREAM_PER_THREAD));
        assert_cu(cuCtxSynchronize());
        assert_cu(cuStreamQuery(s));
        assert_cu(cuStreamQuery(NULL));
        assert_memory_equal(src, dst, n);
        assert_cu(cuMemcpyDtoHAsync_v2(dst, b, 16, NULL));
        assert_int_equal(cuMemcpyHtoDAsync_v2(a, src, 16, (CUstream)(uintptr_t)0x1234),
                         CUDA_ERROR_INVALID_HANDLE);
        assert_int_equal(cuStreamCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuStreamCreate(&s, 0x80), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuStreamDestroy_v2(s));
        assert_int_equal(cuStreamDestroy_v2(s), CUDA_ERROR_INVALID_HANDLE);
        assert_int_equal(cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
        assert_int_equal(cuMemsetD8Async(a, 0, 16, s), CUDA_ERROR_INVALID_HANDLE);

        /* Overlapping device-to-device copies behave like memmove. */
        assert_cu(cuMemcpyDtoD_v2(a + 1, a, 4096));
        assert_cu(cuMemcpyDtoH_v2(dst, a, 4097));
        assert_int_equal(dst[0], src[0]);
        assert_memory_equal(dst + 1, src, 4096);

        /* Address range and pointer attributes from an interior pointer. */
        assert_cu(cuMemGetAddressRange_v2(&base, &size, a + 100));
        assert_int_equal(base, a);
        assert_int_equal(size, n);
        assert_cu(cuMemGetAddressRange_v2(NULL, &size, a));
        assert_int_equal(cuMemGetAddressRange_v2(&base, &size, 0x1000), CUDA_ERROR_NOT_FOUND);
        {
                CUcontext ctx = NULL;
                unsigned type = 0, managed = 9, mapped = 0;
                CUdeviceptr dp = 0, start = 0;
                unsigned long long id1 = 0, id2 = 0;
                size_t rsize = 0;
                int ord = -1;

                assert_cu(cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, a + 5));
                assert_ptr_equal(ctx, *state);
                assert_cu(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a + 5));
                assert_int_equal(type, CU_MEMORYTYPE_DEVICE);
                assert_cu(cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, a + 5));
                assert_int_equal(dp, a + 5);
                assert_cu(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, a + 5));
                assert_int_equal(ord, 0);
                assert_cu(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, a + 5));
                assert_int_equal(start, a);
                assert_cu(cuPointerGetAttribute(&rsize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, a + 5));
                assert_int_equal(rsize, n);
                assert_cu(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, a));
                assert_int_equal(managed, 0);
                assert_cu(cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, a));
                assert_int_equal(mapped, 1);
                assert_cu(cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, a));
                assert_cu(cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, b));
                assert_int_not_equal(id1, id2);
                assert_int_equal(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                                       (CUdeviceptr)(uintptr_t)src),
                                 CUDA_ERROR_INVALID_VALUE);
                assert_int_equal(cuPointerGetAttribute(NULL, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a),
                                 CUDA_ERROR_INVALID_VALUE);
                assert_int_equal(cuPointerGetAttribute(&type, (CUpointer_attribute)999, a),
                                 CUDA_ERROR_INVALID_VALUE);
        }

        assert_cu(cuMemFree_v2(a));
        assert_cu(cuMemFree_v2(b));
        free(src);
        free(dst);
}

static void test_memset(void **state)
{
        const size_t n = 64 * 1024;
        uint8_t *h8 = malloc(n);
        CUdeviceptr d;

        (void)state;
        assert_non_null(h8);
        assert_cu(cuMemAlloc_v2(&d, n));

        assert_cu(cuMemsetD8_v2(d, 0xab, n));
        assert_cu(cuMemcpyDtoH_v2(h8, d, n));
        for (size_t i = 0; i < n; i++)
                if (h8[i] != 0xab)
                        fail_msg("D8 byte %zu is %#x", i, h8[i]);

        assert_cu(cuMemsetD16_v2(d + 2, 0xbeef, n / 2 - 1));
        assert_cu(cuMemcpyDtoH_v2(h8, d, n));
        assert_int_equal(h8[0], 0xab);
        assert_int_equal(h8[1], 0xab);
        for (size_t i = 1; i < n / 2; i++) {
                uint16_t v;

                memcpy(&v, h8 + 2 * i, 2);
                if (v != 0xbeef)
                        fail_msg("D16 element %zu is %#x", i, v);
        }

        assert_cu(cuMemsetD32Async(d, 0xdeadbeef, n / 4, NULL));
        assert_cu(cuMemcpyDtoH_v2(h8, d, n));
        for (size_t i = 0; i < n / 4; i++) {
                uint32_t v;

                memcpy(&v, h8 + 4 * i, 4);
                if (v != 0xdeadbeef)
                        fail_msg("D32 element %zu is %#x", i, v);
        }
        assert_cu(cuMemsetD32_v2(d, 0x01020304, 1));
        assert_cu(cuMemsetD16Async(d + n - 2, 0x0506, 1, CU_STREAM_LEGACY));
        assert_cu(cuMemsetD8Async(d + n - 3, 0x07, 1, NULL));
        assert_cu(cuMemcpyDtoH_v2(h8, d, n));
        assert_int_equal(h8[0], 0x04);
        assert_int_equal(h8[3], 0x01);
        assert_int_equal(h8[n - 3], 0x07);
        assert_int_equal(h8[n - 2], 0x06);
        assert_int_equal(h8[n - 1], 0x05);

        /* Alignment, bounds, overflow. */
        assert_int_equal(cuMemsetD16_v2(d + 1, 0, 1), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemsetD32_v2(d + 2, 0, 1), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemsetD32_v2(d, 0, n / 4 + 1), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemsetD16_v2(d, 0, n / 2 + 1), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemsetD8_v2(d, 0, n + 1), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemsetD32_v2(d, 0, SIZE_MAX / 2), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemsetD8_v2(0x10, 0, 1), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemsetD8_v2(d, 0, 0));

        assert_cu(cuMemFree_v2(d));
        assert_int_equal(cuMemsetD8_v2(d, 0, 1), CUDA_ERROR_INVALID_VALUE);
        free(h8);
}

static void test_copy_out_of_range(void **state)
{
        unsigned char buf[8192];
        CUdeviceptr a, b;

        (void)state;
        assert_cu(cuMemAlloc_v2(&a, 4096));
        assert_cu(cuMemAlloc_v2(&b, 4096));

        assert_int_equal(cuMemcpyHtoD_v2(a, buf, 4097), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemcpyHtoD_v2(a + 4095, buf, 2), CUDA_ERROR_INVALID_VALUE);
        if (b != a + 4096)      /* mmap may place them back to back */
                assert_int_equal(cuMemcpyHtoD_v2(a + 4096, buf, 1), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemcpyHtoD_v2(a - 1, buf, 2), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemcpyDtoH_v2(buf, a, 4097), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemcpyDtoH_v2(buf, 0x1000, 1), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemcpyDtoH_v2(buf, 0, 1), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemcpyDtoH_v2(buf, ~0ULL, 1), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemcpyHtoD_v2(a, buf, SIZE_MAX), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemcpyDtoD_v2(b, a, 4097), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemcpyDtoD_v2(a + 1, b, 4096), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemcpyDtoDAsync_v2(a, (CUdeviceptr)(uintptr_t)buf, 16, NULL),
                         CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemcpyHtoD_v2(a, NULL, 16), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemcpyDtoH_v2(NULL, a, 16), CUDA_ERROR_INVALID_VALUE);
        /* The edges themselves are fine. */
        assert_cu(cuMemcpyHtoD_v2(a + 4095, buf, 1));
        assert_cu(cuMemcpyDtoH_v2(buf, a, 4096));

        assert_cu(cuMemFree_v2(a));
        assert_int_equal(cuMemcpyDtoH_v2(buf, a, 1), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemFree_v2(b));

        /* Without a context nothing is copied. */
        assert_cu(cuCtxSetCurrent(NULL));
        assert_int_equal(cuMemcpyHtoD_v2(a, buf, 1), CUDA_ERROR_INVALID_CONTEXT);
        assert_int_equal(cuMemAlloc_v2(&a, 16), CUDA_ERROR_INVALID_CONTEXT);
        assert_cu(cuCtxSetCurrent(*state));
}

static void test_oom(void **state)
{
        CUmemAllocationProp prop = {
                .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
        };
        CUmemGenericAllocationHandle h;
        CUdeviceptr a, b;
        size_t free_b, total;

        (void)state;
        assert_cu(cuMemGetInfo_v2(&free_b, &total));
        assert_int_equal(total, TEST_MEM_MB * MiB);
        assert_int_equal(free_b, total);
        assert_int_equal(cuMemGetInfo_v2(NULL, &total), CUDA_ERROR_INVALID_VALUE);

        assert_cu(cuMemAlloc_v2(&a, 48 * MiB));
        assert_cu(cuMemGetInfo_v2(&free_b, &total));
        assert_int_equal(free_b, 16 * MiB);
        assert_int_equal(cuMemAlloc_v2(&b, 32 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
        assert_int_equal(cuMemCreate(&h, 32 * MiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
        assert_cu(cuMemAlloc_v2(&b, 16 * MiB));
        assert_int_equal(cuMemAlloc_v2(&b, 1), CUDA_ERROR_OUT_OF_MEMORY);
        assert_cu(cuMemFree_v2(b));
        assert_cu(cuMemFree_v2(a));

        /* VMM allocations count against the same limit. */
        assert_cu(cuMemCreate(&h, 32 * MiB, &prop, 0));
        assert_int_equal(cuMemAlloc_v2(&a, 48 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
        assert_cu(cuMemRelease(h));
        assert_cu(cuMemAlloc_v2(&a, 64 * MiB));
        assert_int_equal(cuMemAlloc_v2(&b, 1), CUDA_ERROR_OUT_OF_MEMORY);
        assert_cu(cuMemFree_v2(a));
        assert_int_equal(cuMemAlloc_v2(&a, 64 * MiB + 1), CUDA_ERROR_OUT_OF_MEMORY);
        assert_int_equal(cuMemAlloc_v2(&a, 0), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemAlloc_v2(NULL, 16), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemGetInfo_v2(&free_b, &total));
        assert_int_equal(free_b, total);
}

static void test_free_bad_pointer(void **state)
{
        CUdeviceptr a;
        int on_stack;

        (void)state;
        assert_cu(cuMemFree_v2(0)); /* a no-op: cudaFree(0) and cuBLAS rely on it */
        assert_int_equal(cuMemFree_v2(0xdead0000), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemFree_v2((CUdeviceptr)(uintptr_t)&on_stack), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemAlloc_v2(&a, 8192));
        assert_int_equal(cuMemFree_v2(a + 256), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemFree_v2(a));
        assert_int_equal(cuMemFree_v2(a), CUDA_ERROR_INVALID_VALUE);
}

/* A mapping at an offset into an allocation shows the bytes from there; a
 * second view shares them; a range past the allocation's end is refused. */
static void test_vmm_offset(void **state)
{
        CUmemAllocationProp prop = {
                .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
        };
        CUmemAccessDesc access = {
                .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
                .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        CUmemGenericAllocationHandle h;
        CUdeviceptr va;
        uint8_t *src = malloc(4 * GRAN), *dst = malloc(GRAN);

        (void)state;
        assert_non_null(src);
        assert_non_null(dst);
        assert_cu(cuMemAddressReserve(&va, 16 * GRAN, 0, 0, 0));
        assert_cu(cuMemCreate(&h, 4 * GRAN, &prop, 0));
        assert_cu(cuMemMap(va, 4 * GRAN, 0, h, 0));
        assert_cu(cuMemMap(va + 8 * GRAN, GRAN, 2 * GRAN, h, 0));
        assert_int_equal(cuMemMap(va + 10 * GRAN, 2 * GRAN, 3 * GRAN, h, 0), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemMap(va + 10 * GRAN, GRAN, 4096, h, 0), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemSetAccess(va, 4 * GRAN, &access, 1));
        assert_cu(cuMemSetAccess(va + 8 * GRAN, GRAN, &access, 1));
        fill_pattern(src, 4 * GRAN, 9);
        assert_cu(cuMemcpyHtoD_v2(va, src, 4 * GRAN));
        assert_cu(cuMemcpyDtoH_v2(dst, va + 8 * GRAN, GRAN));
        assert_memory_equal(dst, src + 2 * GRAN, GRAN);
        assert_cu(cuMemsetD8_v2(va + 8 * GRAN, 0x6b, 16));
        assert_cu(cuMemcpyDtoH_v2(dst, va + 2 * GRAN, 16));
        for (int i = 0; i < 16; i++)
                assert_int_equal(dst[i], 0x6b);
        assert_cu(cuMemUnmap(va + 8 * GRAN, GRAN));
        assert_cu(cuMemUnmap(va, 4 * GRAN));
        assert_cu(cuMemRelease(h));
        assert_cu(cuMemAddressFree(va, 16 * GRAN));
        free(src);
        free(dst);
}

static void test_vmm_hot_restart(void **state)
{
        const size_t size = 4 * MiB;
        CUmemAllocationProp prop = {
                .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
        };
        CUmemAllocationProp plain = prop, got;
        CUmemAccessDesc access = {
                .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
                .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        CUmemGenericAllocationHandle h, h2, hp, hr;
        unsigned char *src = malloc(size), *dst = malloc(size);
        size_t gran, free_b, total;
        unsigned long long aflags;
        CUdeviceptr va, va2;
        int fd = -1, fd2;

        (void)state;
        assert_non_null(src);
        assert_non_null(dst);
        plain.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;

        assert_cu(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
        assert_int_equal(gran, GRAN);
        assert_cu(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
        assert_int_equal(gran, GRAN);

        /* The hint is honoured when the range is free. */
        assert_cu(cuMemAddressReserve(&va, VMM_RESERVE, 0, VMM_HINT, 0));
        assert_int_equal(va, VMM_HINT);
        /* Taken now: another reservation there lands elsewhere. */
        assert_cu(cuMemAddressReserve(&va2, GRAN, 0, VMM_HINT, 0));
        assert_int_not_equal(va2, VMM_HINT);
        assert_int_equal(va2 % GRAN, 0);
        assert_cu(cuMemAddressFree(va2, GRAN));
        assert_int_equal(cuMemAddressReserve(&va2, GRAN + 4096, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemAddressReserve(&va2, GRAN, 0, VMM_HINT + 4096, 0), CUDA_ERROR_INVALID_VALUE);

        assert_int_equal(cuMemCreate(&h, size + 4096, &prop, 0), CUDA_ERROR_INVALID_VALUE);
        prop.location.id = 3;
        assert_int_equal(cuMemCreate(&h, size, &prop, 0), CUDA_ERROR_INVALID_DEVICE);
        prop.location.id = 0;
        assert_cu(cuMemCreate(&h, size, &prop, 0));
        assert_cu(cuMemGetInfo_v2(&free_b, &total));
        assert_int_equal(total - free_b, size);

        /* Mapping: only inside a reservation, aligned, not twice. */
        assert_int_equal(cuMemMap(va + 4096, size, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemMap(va + VMM_RESERVE - GRAN, size, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemMap(0x200000, size, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemMap(va, size, 0, h, 0));
        assert_int_equal(cuMemMap(va + GRAN, GRAN, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
        /* No access until cuMemSetAccess: an error, not a fault. */
        assert_int_equal(cuMemcpyHtoD_v2(va, src, 16), CUDA_ERROR_INVALID_VALUE);
        access.flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
        assert_cu(cuMemSetAccess(va, size, &access, 1));
        assert_int_equal(cuMemcpyHtoD_v2(va, src, 16), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemcpyDtoH_v2(dst, va, 16));
        access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        assert_int_equal(cuMemSetAccess(va, size + GRAN, &access, 1), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemSetAccess(va, size, NULL, 1), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemSetAccess(va, size, &access, 1));
        assert_cu(cuMemGetAccess(&aflags, &access.location, va + 100));
        assert_int_equal(aflags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);

        fill_pattern(src, size, 3);
        assert_cu(cuMemcpyHtoD_v2(va, src, size));
        assert_int_equal(cuMemcpyHtoD_v2(va, src, size + 1), CUDA_ERROR_INVALID_VALUE);
        /* A VA inside the reservation but unmapped is neither device nor
         * host memory. */
        assert_int_equal(cuMemcpyHtoD_v2(va + size, src, 1), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemcpyDtoH_v2((void *)(uintptr_t)(va + size), va, 1), CUDA_ERROR_INVALID_VALUE);
        {
                CUdeviceptr start = 0;
                CUcontext ctx = (CUcontext)1;

                assert_cu(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, va + 7));
                assert_int_equal(start, va);
                assert_cu(cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, va));
                assert_null(ctx);
        }

        /* Retain gives the same handle with one more reference. */
        assert_cu(cuMemRetainAllocationHandle(&hr, (void *)(uintptr_t)(va + 123)));
        assert_int_equal(hr, h);
        assert_cu(cuMemRelease(hr));
        assert_cu(cuMemGetAllocationPropertiesFromHandle(&got, h));
        assert_int_equal(got.requestedHandleTypes, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        assert_int_equal(got.location.id, 0);

        /* Export, then tear everything down except the fd. */
        assert_int_equal(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_FABRIC, 0),
                         CUDA_ERROR_NOT_SUPPORTED);
        assert_int_equal(cuMemExportToShareableHandle(NULL, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                         CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
        assert_true(fd >= 0);
        assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        assert_int_equal(cuMemAddressFree(va, VMM_RESERVE), CUDA_ERROR_INVALID_VALUE);   /* mapped */
        assert_int_equal(cuMemUnmap(va, GRAN), CUDA_ERROR_INVALID_VALUE);               /* partial */
        assert_cu(cuMemUnmap(va, size));
        assert_int_equal(cuMemUnmap(va, size), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemcpyDtoH_v2(dst, va, 16), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemRelease(h));
        assert_int_equal(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuMemMap(va, size, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemGetInfo_v2(&free_b, &total));
        assert_int_equal(free_b, total);

        /* The "next process": import the fd and map it at the same VA. */
        assert_int_equal(cuMemImportFromShareableHandle(&h2, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_WIN32),
                         CUDA_ERROR_NOT_SUPPORTED);
        assert_cu(cuMemImportFromShareableHandle(&h2, (void *)(uintptr_t)fd,
                                                 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
        close(fd);      /* the allocation keeps its own reference */
        assert_cu(cuMemGetInfo_v2(&free_b, &total));
        assert_int_equal(total - free_b, size);
        assert_cu(cuMemGetAllocationPropertiesFromHandle(&got, h2));
        assert_int_equal(got.location.id, 0);
        /* An imported handle is not exported again, as on the real
         * driver: the importer passes on its fd instead. */
        assert_int_equal(cuMemExportToShareableHandle(&fd2, h2, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                         CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemMap(va, size, 0, h2, 0));
        assert_cu(cuMemSetAccess(va, size, &access, 1));
        memset(dst, 0, size);
        assert_cu(cuMemcpyDtoH_v2(dst, va, size));
        assert_memory_equal(src, dst, size);
        /* Not through a retained handle either: it is the same allocation. */
        assert_cu(cuMemRetainAllocationHandle(&hr, (void *)(uintptr_t)va));
        assert_int_equal(cuMemExportToShareableHandle(&fd2, hr, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                         CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemRelease(hr));

        /* Release while mapped: the memory stays until the unmap. */
        assert_cu(cuMemRelease(h2));
        assert_cu(cuMemcpyDtoH_v2(dst, va + size - 16, 16));
        assert_memory_equal(src + size - 16, dst, 16);
        assert_cu(cuMemGetInfo_v2(&free_b, &total));
        assert_int_equal(total - free_b, size);
        assert_cu(cuMemUnmap(va, size));
        assert_cu(cuMemGetInfo_v2(&free_b, &total));
        assert_int_equal(free_b, total);

        /* Not exportable unless asked for; foreign fds are refused. */
        assert_cu(cuMemCreate(&hp, GRAN, &plain, 0));
        assert_int_equal(cuMemExportToShareableHandle(&fd2, hp, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                         CUDA_ERROR_INVALID_VALUE);
        /* Two mappings side by side, unmapped in one call. */
        assert_cu(cuMemCreate(&h, GRAN, &prop, 0));
        assert_cu(cuMemMap(va, GRAN, 0, hp, 0));
        assert_cu(cuMemMap(va + GRAN, GRAN, 0, h, 0));
        assert_cu(cuMemSetAccess(va, 2 * GRAN, &access, 1));
        /* adjacent mappings are one range to copies, as on the device
         * (PyTorch's expandable segments span several) */
        assert_cu(cuMemcpyHtoD_v2(va + GRAN - 8, src, 16));
        assert_cu(cuMemcpyDtoH_v2(dst, va + GRAN - 8, 16));
        assert_memory_equal(src, dst, 16);
        assert_cu(cuMemsetD8_v2(va + GRAN, 0x5a, GRAN));
        assert_cu(cuMemUnmap(va, 2 * GRAN));
        assert_cu(cuMemRelease(hp));
        assert_cu(cuMemRelease(h));

        fd2 = open("/dev/null", O_RDONLY | O_CLOEXEC);
        assert_true(fd2 >= 0);
        assert_int_equal(cuMemImportFromShareableHandle(&h2, (void *)(uintptr_t)fd2,
                                                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                         CUDA_ERROR_INVALID_VALUE);
        close(fd2);
        assert_int_equal(cuMemImportFromShareableHandle(&h2, (void *)(uintptr_t)fd2,
                                                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                         CUDA_ERROR_INVALID_VALUE);

        assert_int_equal(cuMemAddressFree(va, GRAN), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemAddressFree(va, VMM_RESERVE));
        assert_int_equal(cuMemAddressFree(va, VMM_RESERVE), CUDA_ERROR_INVALID_VALUE);
        assert_cu(cuMemGetInfo_v2(&free_b, &total));
        assert_int_equal(free_b, total);
        free(src);
        free(dst);
}

static int send_fd(int sock, int fd)
{
        char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
        char byte = 'x';
        struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
        struct msghdr msg = {
                .msg_iov = &iov, .msg_iovlen = 1,
                .msg_control = cbuf, .msg_controllen = sizeof(cbuf),
        };
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
        return sendmsg(sock, &msg, 0) == 1 ? 0 : -1;
}

static int recv_fd(int sock)
{
        char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
        char byte;
        struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
        struct msghdr msg = {
                .msg_iov = &iov, .msg_iovlen = 1,
                .msg_control = cbuf, .msg_controllen = sizeof(cbuf),
        };
        struct cmsghdr *c;
        int fd;

        if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != 1)
                return -1;
        c = CMSG_FIRSTHDR(&msg);
        if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int)))
                return -1;
        memcpy(&fd, CMSG_DATA(c), sizeof(int));
        return fd;
}

/* The exported fd outlives the exporting process, which is what a hot
 * restart relies on: the child creates, writes, exports and dies; the
 * parent imports what it was sent and reads the bytes back. */
static void test_vmm_export_across_fork(void **state)
{
        CUmemAllocationProp prop = {
                .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
        };
        CUmemAccessDesc access = {
                .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
                .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        unsigned char want[256], got[256];
        CUmemGenericAllocationHandle h;
        size_t free_b, total;
        CUdeviceptr va;
        int sv[2], fd = -1, status;
        pid_t pid;

        (void)state;
        fill_pattern(want, sizeof(want), 9);
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                close(sv[0]);
                if (cuMemCreate(&h, GRAN, &prop, 0) != CUDA_SUCCESS ||
                    cuMemAddressReserve(&va, GRAN, 0, 0, 0) != CUDA_SUCCESS ||
                    cuMemMap(va, GRAN, 0, h, 0) != CUDA_SUCCESS ||
                    cuMemSetAccess(va, GRAN, &access, 1) != CUDA_SUCCESS ||
                    cuMemcpyHtoD_v2(va + 1000, want, sizeof(want)) != CUDA_SUCCESS ||
                    cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) != CUDA_SUCCESS)
                        _exit(1);
                _exit(send_fd(sv[1], fd) == 0 ? 0 : 2);
        }
        close(sv[1]);
        fd = recv_fd(sv[0]);
        close(sv[0]);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        assert_true(fd >= 0);

        assert_cu(cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)fd,
                                                 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
        close(fd);
        assert_cu(cuMemGetInfo_v2(&free_b, &total));
        assert_int_equal(total - free_b, GRAN);
        assert_cu(cuMemAddressReserve(&va, GRAN, 0, 0, 0));
        assert_cu(cuMemMap(va, GRAN, 0, h, 0));
        assert_cu(cuMemSetAccess(va, GRAN, &access, 1));
        assert_cu(cuMemcpyDtoH_v2(got, va + 1000, sizeof(got)));
        assert_memory_equal(want, got, sizeof(want));
        assert_cu(cuMemUnmap(va, GRAN));
        assert_cu(cuMemRelease(h));
        assert_cu(cuMemAddressFree(va, GRAN));
        assert_cu(cuMemGetInfo_v2(&free_b, &total));
        assert_int_equal(free_b, total);
}

#define STRESS_THREADS 8
#define STRESS_ROUNDS 200

static void *stress_thread(void *p)
{
        CUcontext ctx = p;
        unsigned char in[1024], out[1024];
        uintptr_t bad = 0;

        if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
                return (void *)1;
        for (int i = 0; i < STRESS_ROUNDS; i++) {
                CUdeviceptr d;

                fill_pattern(in, sizeof(in), (unsigned)i);
                if (cuMemAlloc_v2(&d, sizeof(in)) != CUDA_SUCCESS ||
                    cuMemcpyHtoD_v2(d, in, sizeof(in)) != CUDA_SUCCESS ||
                    cuMemcpyDtoH_v2(out, d, sizeof(out)) != CUDA_SUCCESS ||
                    memcmp(in, out, sizeof(in)) != 0 ||
                    cuMemFree_v2(d) != CUDA_SUCCESS)
                        bad++;
        }
        return (void *)bad;
}

static void test_threads(void **state)
{
        pthread_t th[STRESS_THREADS];
        size_t free_b, total;

        for (int i = 0; i < STRESS_THREADS; i++)
                assert_int_equal(pthread_create(&th[i], NULL, stress_thread, *state), 0);
        for (int i = 0; i < STRESS_THREADS; i++) {
                void *ret;

                pthread_join(th[i], &ret);
                assert_ptr_equal(ret, NULL);
        }
        assert_cu(cuMemGetInfo_v2(&free_b, &total));
        assert_int_equal(free_b, total);
}

static void test_errors(void **state)
{
        const char *s;
        int named = 0;

        (void)state;
        assert_cu(cuGetErrorName(CUDA_SUCCESS, &s));
        assert_string_equal(s, "CUDA_SUCCESS");
        assert_cu(cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &s));
        assert_string_equal(s, "CUDA_ERROR_INVALID_VALUE");
        assert_cu(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
        assert_string_equal(s, "CUDA_ERROR_OUT_OF_MEMORY");
        assert_cu(cuGetErrorName(CUDA_ERROR_UNKNOWN, &s));
        assert_string_equal(s, "CUDA_ERROR_UNKNOWN");
        assert_cu(cuGetErrorName(CUDA_ERROR_KEY_ROTATION, &s));
        assert_string_equal(s, "CUDA_ERROR_KEY_ROTATION");
        assert_cu(cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s));
        assert_string_equal(s, "invalid argument");
        assert_cu(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
        assert_string_equal(s, "out of memory");
        assert_cu(cuGetErrorString(CUDA_ERROR_INVALID_DEVICE, &s));
        assert_string_equal(s, "invalid device ordinal");
        assert_cu(cuGetErrorString(CUDA_ERROR_INVALID_CONTEXT, &s));
        assert_string_equal(s, "invalid device context");

        s = "x";
        assert_int_equal(cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
        assert_null(s);
        s = "x";
        assert_int_equal(cuGetErrorString((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
        assert_null(s);
        assert_int_equal(cuGetErrorName(CUDA_SUCCESS, NULL), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(cuGetErrorString(CUDA_SUCCESS, NULL), CUDA_ERROR_INVALID_VALUE);

        /* Every name has a string; cuda.h 13.0's enum has 101 codes. */
        for (int c = 0; c < 1000; c++) {
                const char *t;

                if (cuGetErrorName((CUresult)c, &s) != CUDA_SUCCESS)
                        continue;
                named++;
                assert_int_equal(strncmp(s, "CUDA_", 5), 0);
                assert_cu(cuGetErrorString((CUresult)c, &t));
                assert_true(strlen(t) > 0);
        }
        assert_int_equal(named, 101);
}

int main(void)
{
        const struct CMUnitTest before_init[] = {
                cmocka_unit_test(test_before_init),
                cmocka_unit_test(test_env_devices),
                cmocka_unit_test(test_env_bad_values),
        };
        const struct CMUnitTest initialised[] = {
                cmocka_unit_test(test_devices),
                cmocka_unit_test(test_attributes),
                cmocka_unit_test(test_primary_ctx),
                cmocka_unit_test(test_ctx_stack),
                cmocka_unit_test_setup_teardown(test_copy_roundtrip, with_primary, without_primary),
                cmocka_unit_test_setup_teardown(test_memset, with_primary, without_primary),
                cmocka_unit_test_setup_teardown(test_copy_out_of_range, with_primary, without_primary),
                cmocka_unit_test_setup_teardown(test_oom, with_primary, without_primary),
                cmocka_unit_test_setup_teardown(test_free_bad_pointer, with_primary, without_primary),
                cmocka_unit_test_setup_teardown(test_vmm_offset, with_primary, without_primary),
                cmocka_unit_test_setup_teardown(test_vmm_hot_restart, with_primary, without_primary),
                cmocka_unit_test_setup_teardown(test_vmm_export_across_fork, with_primary, without_primary),
                cmocka_unit_test_setup_teardown(test_threads, with_primary, without_primary),
                cmocka_unit_test(test_errors),
        };
        int failed;

        failed = cmocka_run_group_tests_name("sim before cuInit", before_init, NULL, NULL);
        failed += cmocka_run_group_tests_name("sim", initialised, group_init, NULL);
        return failed ? 1 : 0;
}
