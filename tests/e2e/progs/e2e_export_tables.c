/* SPDX-License-Identifier: MIT */
/*
 * The private export tables, used the way the CUDA runtime uses them:
 * fetched before cuInit, the integrity answer recomputed by the caller
 * from what it can see (on the main thread and on a second one),
 * context-local storage, the context checks, the hook buffers, TOOLS_TLS,
 * the context id of Relay8, module loading through the CUDART table, the
 * module-function listing of cuFFT's TOOLS_MODULE table, and
 * the driver's answer to ids it does not know.
 *
 * Runs through lupine (sim or GPU) and, on the GPU machine, straight on
 * the real driver, which is how the expectations here were checked.
 *
 * usage: e2e_export_tables DIR   (DIR holds kernels.fatbin)
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "integrity.h"

static const char *dir;

static CUuuid id_of(const char *hex)
{
        CUuuid u;
        for (int i = 0; i < 16; i++) {
                unsigned v;
                sscanf(hex + 2 * i, "%2x", &v);
                u.bytes[i] = (char)v;
        }
        return u;
}

static void *const *table(const char *hex)
{
        const void *t = (const void *)1;
        CUuuid u = id_of(hex);
        CK(cuGetExportTable(&t, &u));
        EXPECT(t != NULL);
        return t;
}

#define CUDART "6bd5fb6c5bf4e74a8987d93912fd9df9"
#define HOOKS "a094798c2e742e7493f20800200c0a66"
#define TLS "42d85a8123f6cb478298f6e78a3aecdc"
#define CLS "c693336e1121df11a8c368f355d89593"
#define CHECKS "263e88607cd2614392f6bbd5006dfa7e"
#define INTEGRITY "d4082055bde6704b8d34ba123c66e1f2"
#define RELAY8 "21318c60971432488ca641ff7324c8f2"
#define TOOLS_MODULE "6e163fbeb958444d835ce182aff1991e" /* cuFFT's */

typedef CUresult (*integrity_fn)(uint32_t, uint64_t, uint64_t *);

/* What the runtime does: ask, then recompute and compare. */
static void check_integrity(void)
{
        void *const *cudart = table(CUDART), *const *integ = table(INTEGRITY);
        integrity_fn f = (integrity_fn)integ[1];
        struct lupc_integrity_device devs[LUPC_INTEGRITY_MAX_DEVICES];
        struct lupc_integrity_input in = { .devices = devs };
        uint64_t got[2], want[2];
        int drv, n;

        CK(cuDriverGetVersion(&drv));
        CK(cuDeviceGetCount(&n));
        EXPECT(n >= 1 && n <= LUPC_INTEGRITY_MAX_DEVICES);
        for (int d = 0; d < n; d++) {
                CUuuid u;
                CK(cuDeviceGetUuid_v2(&u, d));
                memcpy(devs[d].uuid, u.bytes, 16);
                CK(cuDeviceGetAttribute(&devs[d].pci_domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, d));
                CK(cuDeviceGetAttribute(&devs[d].pci_bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d));
                CK(cuDeviceGetAttribute(&devs[d].pci_device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, d));
        }
        in.n_devices = (size_t)n;
        in.driver_version = (uint32_t)drv;
        in.pid = (uint32_t)getpid();
        in.thread = (uint32_t)(uintptr_t)pthread_self();
        in.cudart_table = (uint64_t)(uintptr_t)cudart;
        in.integrity_table = (uint64_t)(uintptr_t)integ;
        in.integrity_fn = (uint64_t)(uintptr_t)f;

        uint64_t now = (uint64_t)time(NULL);
        /* a 13.0 runtime asks with 13000, 13001, 13002; the 13.1 copies
         * inside cuBLAS with 13010..13012 */
        for (uint32_t v = 13000; v <= 13012; v++) {
                CK(f(v, now, got));
                EXPECT(lupc_integrity_answer(v, now, &in, (uint8_t *)want) == 0);
                if (memcmp(got, want, 16) != 0) {
                        fprintf(stderr, "integrity answer for version %u differs from the recomputed one\n", v);
                        exit(1);
                }
        }
}

static void *integrity_thread(void *arg)
{
        (void)arg;
        check_integrity();
        return NULL;
}

static int dtor_calls;
static void *dtor_value;

static void cls_dtor(CUcontext ctx, void *key, void *value)
{
        (void)ctx;
        (void)key;
        dtor_calls++;
        dtor_value = value;
}

typedef CUresult (*cls_put_fn)(CUcontext, void *, void *, void (*)(CUcontext, void *, void *));
typedef CUresult (*cls_del_fn)(CUcontext, void *);
typedef CUresult (*cls_get_fn)(void **, CUcontext, void *);

static void check_cls(CUcontext primary)
{
        void *const *t = table(CLS);
        cls_put_fn put = (cls_put_fn)t[0];
        cls_del_fn del = (cls_del_fn)t[1];
        cls_get_fn get = (cls_get_fn)t[2];
        static int key_a, key_b;
        void *v;

        EXPECT(t[3] == NULL); /* three functions and a NULL: no size word */
        CK(cuCtxSetCurrent(primary));
        /* NULL means the current context */
        CK(put(NULL, &key_a, (void *)0x1234, cls_dtor));
        v = NULL;
        CK(get(&v, primary, &key_a));
        EXPECT(v == (void *)0x1234);
        /* a key already there is refused and keeps its value */
        EXPECT_ERR(put(primary, &key_a, (void *)0x5678, cls_dtor), CUDA_ERROR_INVALID_HANDLE);
        CK(get(&v, NULL, &key_a));
        EXPECT(v == (void *)0x1234);
        /* a missing key: INVALID_HANDLE, output untouched */
        v = (void *)0x99;
        EXPECT_ERR(get(&v, NULL, &key_b), CUDA_ERROR_INVALID_HANDLE);
        EXPECT(v == (void *)0x99);
        CK(del(NULL, &key_a));
        EXPECT_ERR(del(NULL, &key_a), CUDA_ERROR_INVALID_HANDLE);
        EXPECT(dtor_calls == 0); /* delete does not run the destructor */
}

typedef CUresult (*ctx_type_fn)(CUcontext, uint32_t *, CUcontext *);
typedef int (*int_fn)(void);
typedef void (*buf_fn)(uint32_t **, size_t *);
typedef CUresult (*ctx_id_fn)(CUcontext, uint64_t *);
typedef CUresult (*ctx_set_fn)(CUcontext);
typedef CUresult (*ctx_get_fn)(CUcontext *);
typedef CUresult (*primary_fn)(CUcontext *, CUdevice);
typedef CUresult (*load_fn)(CUmodule *, const void *);

static void check_small_tables(CUcontext primary)
{
        void *const *checks = table(CHECKS), *const *hooks = table(HOOKS), *const *tls = table(TLS),
                    *const *relay8 = table(RELAY8), *const *cudart = table(CUDART),
                    *const *module = table(TOOLS_MODULE);
        unsigned long long id;
        uint64_t rid = 77;

        /* size words as driver 580 has them */
        EXPECT((uintptr_t)cudart[0] == 104 && (uintptr_t)hooks[0] == 56 && (uintptr_t)tls[0] == 24 &&
               (uintptr_t)checks[0] == 120 && (uintptr_t)relay8[0] == 744 && (uintptr_t)module[0] == 792);
        EXPECT(cudart[10] == NULL && relay8[91] == NULL);

        /* CUDART slot 2: the primary context, the same handle as the public API's */
        CUcontext p2 = NULL;
        CK(((primary_fn)cudart[2])(&p2, 0));
        EXPECT(p2 == primary);

        /* context checks: type 0 for a primary context, third argument untouched */
        uint32_t type = 9;
        CUcontext sentinel = (CUcontext)0x5e5e;
        CK(((ctx_type_fn)checks[2])(primary, &type, &sentinel));
        EXPECT(type == 0 && sentinel == (CUcontext)0x5e5e);
        EXPECT(((int_fn)checks[3])() == 0);

        /* hook buffers: zeroed uint32 arrays of 1024 and 14 entries */
        uint32_t *buf = NULL;
        size_t count = 0;
        ((buf_fn)hooks[2])(&buf, &count);
        EXPECT(buf && count == 1024);
        for (size_t i = 0; i < count; i++)
                EXPECT(buf[i] == 0);
        ((buf_fn)hooks[6])(&buf, &count);
        EXPECT(buf && count == 14);

        /* context ids: Relay8 slot 4 and hooks slot 4 agree with cuCtxGetId; NULL gives 0 */
        CK(cuCtxGetId(primary, &id));
        CK(((ctx_id_fn)relay8[4])(primary, &rid));
        EXPECT(rid == id);
        CK(((ctx_id_fn)hooks[4])(primary, &rid));
        EXPECT(rid == id);
        CK(((ctx_id_fn)relay8[4])(NULL, &rid));
        EXPECT(rid == 0);

        /* TOOLS_TLS: set and get the current context */
        CUcontext cur = (CUcontext)1;
        CK(((ctx_set_fn)tls[1])(NULL));
        CK(((ctx_get_fn)tls[2])(&cur));
        EXPECT(cur == NULL);
        CK(((ctx_set_fn)tls[1])(primary));
        CK(((ctx_get_fn)tls[2])(&cur));
        EXPECT(cur == primary);
}

/* CUDART slot 1: a module from a fat binary wrapper, as old runtimes register them. */
static void check_wrapper_load(void)
{
        void *const *cudart = table(CUDART);
        char path[4096];
        snprintf(path, sizeof(path), "%s/kernels.fatbin", dir);
        FILE *f = fopen(path, "rb");
        EXPECT(f != NULL);
        static unsigned char fatbin[1 << 20] __attribute__((aligned(8)));
        size_t n = fread(fatbin, 1, sizeof(fatbin), f);
        fclose(f);
        EXPECT(n > 0 && n < sizeof(fatbin));
        struct {
                uint32_t magic, version;
                const void *data;
                void *filename;
        } wrapper = { 0x466243b1u, 1, fatbin, NULL };
        CUmodule m = NULL;
        CUfunction fn;
        CK(((load_fn)cudart[1])(&m, &wrapper));
        CK(cuModuleGetFunction(&fn, m, "vec_add_f32"));
        CK(cuModuleUnload(m));
}

/* TOOLS_MODULE slot 7, as cuFFT uses it: the module's functions, each
 * handed to a callback with its name, and their count as the result; the
 * same list as cuModuleEnumerateFunctions, and each one launchable. */
struct fn_list {
        int n;
        CUfunction f[64];
        char name[64][64];
};

static void collect(void *user, CUfunction f, const char *name)
{
        struct fn_list *l = user;
        if (l->n < 64) {
                l->f[l->n] = f;
                snprintf(l->name[l->n], sizeof(l->name[0]), "%s", name ? name : "");
        }
        l->n++;
}

static void check_module_functions(CUcontext primary)
{
        typedef size_t (*iterate_fn)(CUcontext, CUmodule, void (*)(void *, CUfunction, const char *), void *);
        iterate_fn iterate = (iterate_fn)table(TOOLS_MODULE)[7];
        char path[4096];
        CUmodule m;
        unsigned int n = 0;
        static struct fn_list l;

        snprintf(path, sizeof(path), "%s/kernels.fatbin", dir);
        CK(cuModuleLoad(&m, path));
        CK(cuModuleGetFunctionCount(&n, m));
        EXPECT(n > 1 && n <= 64);
        EXPECT(iterate(primary, m, collect, &l) == n && l.n == (int)n);
        EXPECT(iterate(primary, m, NULL, NULL) == n);
        CUfunction all[64];
        CK(cuModuleEnumerateFunctions(all, n, m));
        CUfunction fewer[64];
        EXPECT_ERR(cuModuleEnumerateFunctions(fewer, n - 1, m), CUDA_SUCCESS); /* the first n - 1: driver 580 */
        for (unsigned int i = 0; i + 1 < n; i++) {
                const char *a = NULL, *b = NULL;
                CK(cuFuncGetName(&a, all[i]));
                CK(cuFuncGetName(&b, fewer[i]));
                EXPECT(a && b && !strcmp(a, b));
        }
        int found = -1;
        for (int i = 0; i < l.n && i < 64; i++) {
                const char *name = NULL;
                CK(cuFuncGetName(&name, all[i]));
                EXPECT(name && !strcmp(name, l.name[i]));
                if (!strcmp(l.name[i], "fill_u32"))
                        found = i;
        }
        EXPECT(found >= 0);
        if (found >= 0) { /* fill_u32(out, value, n), launched through the listed handle */
                CUdeviceptr d;
                unsigned int v = 0x5eed, host[64];
                int count = 64;
                CK(cuMemAlloc(&d, sizeof(host)));
                void *args[] = { &d, &v, &count };
                CK(cuLaunchKernel(l.f[found], 1, 1, 1, 64, 1, 1, 0, NULL, args, NULL));
                CK(cuMemcpyDtoH(host, d, sizeof(host)));
                EXPECT(host[0] == 0x5eed && host[63] == 0x5eed);
                CK(cuMemFree(d));
        }
        CK(cuModuleUnload(m));
}

static void check_unknown_ids(void)
{
        const void *t = (const void *)1;
        CUuuid u = id_of("00112233445566778899aabbccddeeff");
        EXPECT_ERR(cuGetExportTable(&t, &u), CUDA_ERROR_INVALID_VALUE);
        EXPECT(t == NULL);
        EXPECT_ERR(cuGetExportTable(NULL, &u), CUDA_ERROR_INVALID_VALUE);
}

int main(int argc, char **argv)
{
        CUcontext primary;
        pthread_t th;

        if (argc != 2) {
                fprintf(stderr, "usage: %s KERNELS_DIR\n", argv[0]);
                return 2;
        }
        dir = argv[1];
        /* the runtime fetches its tables before cuInit */
        table(CUDART);
        table(INTEGRITY);
        CK(cuInit(0));
        check_unknown_ids();
        check_integrity();
        EXPECT(pthread_create(&th, NULL, integrity_thread, NULL) == 0);
        pthread_join(th, NULL);

        CK(cuDevicePrimaryCtxRetain(&primary, 0));
        check_small_tables(primary);
        check_cls(primary);
        check_wrapper_load();
        check_module_functions(primary);
        /* the runtime's cudaFree(0) arrives as cuMemFree(0): a no-op */
        EXPECT_ERR(cuMemFree(0), CUDA_SUCCESS);

        /* a destructor registered on the primary context runs when it is reset */
        static int key_c;
        void *const *cls = table(CLS);
        CK(((cls_put_fn)cls[0])(primary, &key_c, (void *)0xabc, cls_dtor));
        unsigned long long id_before, id_after;
        CK(cuCtxGetId(primary, &id_before));
        CK(cuDevicePrimaryCtxReset(0));
        EXPECT(dtor_calls == 1 && dtor_value == (void *)0xabc);
        CK(cuDevicePrimaryCtxRetain(&primary, 0));
        CK(cuCtxSetCurrent(primary));
        CK(cuCtxGetId(primary, &id_after));
        EXPECT(id_after != id_before); /* a reset primary context is a new context */
        CK(cuDevicePrimaryCtxRelease(0));

        if (e2e_failures) {
                fprintf(stderr, "e2e_export_tables: %d expectation(s) failed\n", e2e_failures);
                return 1;
        }
        printf("e2e_export_tables: OK\n");
        return 0;
}
