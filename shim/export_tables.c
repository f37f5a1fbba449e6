/* SPDX-License-Identifier: MIT */
/*
 * cuGetExportTable: the driver's private tables that every copy of the CUDA
 * runtime (libcudart, and the static copies inside cuBLAS, cuBLASLt, cuDNN)
 * asks for. The facts behind every slot are in
 * ../shared/research/export-tables.md; the slot numbers in the comments
 * below are the word indices of each table.
 *
 * Everything here is answered locally: the integrity answer hashes this
 * process's pid, thread and table addresses, so the server could not
 * compute it, and the rest is client-side state (context-local storage,
 * current context) or thin wrappers over the public API the shim already
 * forwards.
 *
 * The tables live at fixed addresses for the life of the process (the
 * integrity answer depends on them) and are filled once. Slots whose
 * meaning nobody knows get a stub that logs the table and slot once and
 * returns CUDA_ERROR_NOT_SUPPORTED: a NULL where the driver has a pointer
 * crashes callers.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "ctx_local.h"
#include "integrity.h"
#include "log.h"

#define EXPORT __attribute__((visibility("default")))

/* LUPINE_TRACE=3 also shows every export-table call with its arguments. */
#define ETRACE(...)                                                  \
        do {                                                         \
                if (lup_trace_level() >= 3)                          \
                        lup_tracef("export table " __VA_ARGS__);     \
        } while (0)

/* ---- stubs for slots of unknown meaning */

static CUresult unserved(const char *table, int slot, atomic_int *once)
{
        ETRACE("%s slot %d (not implemented)", table, slot);
        if (!atomic_exchange(once, 1))
                lup_warn("export table %s: slot %d was called but is not implemented; answering CUDA_ERROR_NOT_SUPPORTED",
                         table, slot);
        return CUDA_ERROR_NOT_SUPPORTED;
}

#define STUB(t, n)                                                        \
        __attribute__((unused)) static CUresult stub_##t##_##n(void)     \
        {                                                                 \
                static atomic_int once;                                   \
                return unserved(#t, n, &once);                            \
        }
/* Ten stubs, slots p0..p9, and their addresses. */
#define STUB10(t, p)                                                                              \
        STUB(t, p##0) STUB(t, p##1) STUB(t, p##2) STUB(t, p##3) STUB(t, p##4) STUB(t, p##5)        \
        STUB(t, p##6) STUB(t, p##7) STUB(t, p##8) STUB(t, p##9)
#define PTR10(t, p)                                                                               \
        (void *)stub_##t##_##p##0, (void *)stub_##t##_##p##1, (void *)stub_##t##_##p##2,          \
        (void *)stub_##t##_##p##3, (void *)stub_##t##_##p##4, (void *)stub_##t##_##p##5,          \
        (void *)stub_##t##_##p##6, (void *)stub_##t##_##p##7, (void *)stub_##t##_##p##8,          \
        (void *)stub_##t##_##p##9

STUB10(cudart, )
STUB10(cudart, 1)
STUB10(hooks, )
STUB10(checks, )
STUB10(checks, 1)
STUB10(relay8, )
STUB10(relay8, 1)
STUB10(relay8, 2)
STUB10(relay8, 3)
STUB10(relay8, 4)
STUB10(relay8, 5)
STUB10(relay8, 6)
STUB10(relay8, 7)
STUB10(relay8, 8)
STUB10(relay8, 9)
STUB10(hopper, )
STUB10(hopper, 1)
STUB10(module, )
STUB10(module, 1)
STUB10(module, 2)
STUB10(module, 3)
STUB10(module, 4)
STUB10(module, 5)
STUB10(module, 6)
STUB10(module, 7)
STUB10(module, 8)
STUB10(module, 9)

/* ---- table words, as driver 580 (CUDA 13.0) has them */

#define CUDART_WORDS 13
#define HOOKS_WORDS 7
#define TLS_WORDS 3
#define CLS_WORDS 4     /* three functions and a NULL; no size word */
#define CHECKS_WORDS 15
#define INTEGRITY_WORDS 3
#define RELAY8_WORDS 93
#define HOPPER_WORDS 17
#define MODULE_WORDS    99 /* 792 bytes */

static void *cudart_tbl[CUDART_WORDS];
static void *hooks_tbl[HOOKS_WORDS];
static void *tls_tbl[TLS_WORDS];
static void *cls_tbl[CLS_WORDS];
static void *checks_tbl[CHECKS_WORDS];
static void *integrity_tbl[INTEGRITY_WORDS];
static void *relay8_tbl[RELAY8_WORDS];
static void *hopper_tbl[HOPPER_WORDS];
static void *module_tbl[MODULE_WORDS];

/* ---- CUDART_INTERFACE (6bd5fb6c...) */

#define FATBINC_MAGIC 0x466243b1u

struct fatbinc_wrapper {
        uint32_t magic;
        uint32_t version;
        const void *data;
        void *filename_or_prelinked;
};

/* 1: a module from a fat binary wrapper */
static CUresult cudart_load_wrapper(CUmodule *out, const struct fatbinc_wrapper *w)
{
        if (!out || !w || w->magic != FATBINC_MAGIC || !w->data)
                return CUDA_ERROR_INVALID_VALUE;
        return cuModuleLoadData(out, w);
}

/* 2: the device's primary context, without a reference (the runtime
 * retains it itself through the public API) */
static CUresult cudart_primary_ctx(CUcontext *out, CUdevice dev)
{
        ETRACE("CUDART primary context of device %d", (int)dev);
        if (!out)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!lupc_device(dev))
                return CUDA_ERROR_INVALID_DEVICE;
        *out = (CUcontext)(uintptr_t)lupc_primary_ctx_id(dev);
        return CUDA_SUCCESS;
}

/* 6: as 1, with three arguments of unknown meaning that must be empty */
static CUresult cudart_load_wrapper_ext(CUmodule *out, const struct fatbinc_wrapper *w, void *a3, void *a4,
                                        unsigned a5)
{
        if (a3 || a4 || a5)
                return CUDA_ERROR_NOT_SUPPORTED;
        return cudart_load_wrapper(out, w);
}

/* 7: unknown, returns nothing */
static void cudart_noop(size_t arg)
{
        (void)arg;
}

/* 8: a module from a raw fat binary; note the output comes second */
static CUresult cudart_load_image_ext(const void *image, CUmodule *out, void *a3, void *a4, unsigned a5)
{
        if (a3 || a4 || a5)
                return CUDA_ERROR_NOT_SUPPORTED;
        if (!out || !image)
                return CUDA_ERROR_INVALID_VALUE;
        return cuModuleLoadData(out, image);
}

/* 12: "load the compilers" (CUDA 13.1); nothing to load here */
static CUresult cudart_load_compilers(void)
{
        return CUDA_SUCCESS;
}

/* ---- TOOLS_RUNTIME_CALLBACK_HOOKS (a094798c...) */

static uint32_t hook_buf_a[1024];
static uint32_t hook_buf_b[14];

/* 2 and 6: zeroed uint32 arrays and their lengths in entries */
static void hooks_buf_a(uint32_t **buf, size_t *count)
{
        if (buf)
                *buf = hook_buf_a;
        if (count)
                *count = sizeof(hook_buf_a) / sizeof(hook_buf_a[0]);
}

static void hooks_buf_b(uint32_t **buf, size_t *count)
{
        if (buf)
                *buf = hook_buf_b;
        if (count)
                *count = sizeof(hook_buf_b) / sizeof(hook_buf_b[0]);
}

/* 4: the context's unique id, as cuCtxGetId */
static CUresult hooks_ctx_id(CUcontext ctx, uint64_t *id)
{
        if (!id)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = lupc_ctx_uid((uint64_t)(uintptr_t)ctx, id);
        ETRACE("HOOKS context id of %p -> %d, %llu", (void *)ctx, (int)r, (unsigned long long)*id);
        return r;
}

/* ---- TOOLS_TLS (42d85a81...): the calling thread's current context */

static CUresult tls_set_current(CUcontext ctx)
{
        CUresult r = cuCtxSetCurrent(ctx);
        ETRACE("TLS set current %p -> %d", (void *)ctx, (int)r);
        return r;
}

static CUresult tls_get_current(CUcontext *out)
{
        CUresult r = cuCtxGetCurrent(out);
        ETRACE("TLS get current -> %d, %p", (int)r, out ? (void *)*out : NULL);
        return r;
}

/* ---- CONTEXT_CHECKS (263e8860...) */

/* 2: the context's type. Type 0 for every context lupine makes; the third
 * argument is written only for type 1, so it is left alone (cuBLAS breaks
 * if it is overwritten). */
static CUresult checks_ctx_type(CUcontext ctx, uint32_t *type, CUcontext *out)
{
        uint64_t uid;

        (void)out;
        ETRACE("CHECKS context type of %p", (void *)ctx);
        if (!type)
                return CUDA_ERROR_INVALID_VALUE;
        if (ctx) {
                CUresult r = lupc_ctx_uid((uint64_t)(uintptr_t)ctx, &uid);
                if (r != CUDA_SUCCESS)
                        return r;
        }
        *type = 0;
        return CUDA_SUCCESS;
}

/* 3: unknown; 0 on driver 580 */
static int checks_zero(void)
{
        return 0;
}

/* ---- integrity (d4082055...) */

/* 2: unknown and never seen called */
static int integrity_slot2(void *arg)
{
        (void)arg;
        return 0;
}

/* The devices exactly as the public API shows them to the caller. */
static CUresult integrity_devices(struct lupc_integrity_device *devs, size_t *n)
{
        int count = 0;
        CUresult r = cuDeviceGetCount(&count);

        if (r != CUDA_SUCCESS)
                return r;
        if (count < 0 || count > LUPC_INTEGRITY_MAX_DEVICES)
                return CUDA_ERROR_UNKNOWN;
        for (int d = 0; d < count; d++) {
                CUuuid u;
                if ((r = cuDeviceGetUuid_v2(&u, d)) != CUDA_SUCCESS ||
                    (r = cuDeviceGetAttribute(&devs[d].pci_domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, d)) != CUDA_SUCCESS ||
                    (r = cuDeviceGetAttribute(&devs[d].pci_bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d)) != CUDA_SUCCESS ||
                    (r = cuDeviceGetAttribute(&devs[d].pci_device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, d)) != CUDA_SUCCESS)
                        return r;
                memcpy(devs[d].uuid, u.bytes, 16);
        }
        *n = (size_t)count;
        return CUDA_SUCCESS;
}

/* 1: the answer the runtime recomputes itself and compares */
static CUresult integrity_answer(uint32_t version, uint64_t unix_seconds, uint64_t out[2])
{
        struct lupc_integrity_device devs[LUPC_INTEGRITY_MAX_DEVICES];
        struct lupc_integrity_input in = { .devices = devs };
        uint8_t bytes[16];
        int drv = 0;
        CUresult r;

        if (!out)
                return CUDA_ERROR_INVALID_VALUE;
        if (version % 10 >= 2) {
                if ((r = cuDriverGetVersion(&drv)) != CUDA_SUCCESS ||
                    (r = integrity_devices(devs, &in.n_devices)) != CUDA_SUCCESS)
                        return r;
                in.driver_version = (uint32_t)drv;
                in.pid = (uint32_t)getpid();
                in.thread = (uint32_t)(uintptr_t)pthread_self();
                in.cudart_table = (uint64_t)(uintptr_t)cudart_tbl;
                in.integrity_table = (uint64_t)(uintptr_t)integrity_tbl;
                in.integrity_fn = (uint64_t)(uintptr_t)integrity_answer;
        }
        ETRACE("INTEGRITY version %u", version);
        if (lupc_integrity_answer(version, unix_seconds, &in, bytes) < 0)
                return CUDA_ERROR_UNKNOWN;
        memcpy(out, bytes, sizeof(bytes));
        return CUDA_SUCCESS;
}

/* ---- Relay8 (21318c60...), asked for by cuBLASLt */

/* 4: the context's unique id; 0 for NULL */
static CUresult relay8_ctx_id(CUcontext ctx, uint64_t *id)
{
        if (!id)
                return CUDA_ERROR_INVALID_VALUE;
        if (!ctx) {
                ETRACE("RELAY8 context id of NULL -> 0");
                *id = 0;
                return CUDA_SUCCESS;
        }
        CUresult r = lupc_ctx_uid((uint64_t)(uintptr_t)ctx, id);
        ETRACE("RELAY8 context id of %p -> %d, %llu", (void *)ctx, (int)r, (unsigned long long)*id);
        return r;
}

/* 51: a public stream to the handle slot 39 takes. lupine's streams are
 * their own handles; NULL is the legacy stream, or the per-thread one. */
static CUresult relay8_stream_handle(CUcontext ctx, CUstream s, CUstream *out, int per_thread)
{
        (void)ctx;
        ETRACE("RELAY8 stream handle of %p (per-thread %d)", (void *)s, per_thread);
        if (!out)
                return CUDA_ERROR_INVALID_VALUE;
        *out = s ? s : (per_thread ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY);
        return CUDA_SUCCESS;
}

/* 39: the id of a handle from slot 51 */
static CUresult relay8_stream_id(CUcontext ctx, CUstream s, unsigned long long *id)
{
        (void)ctx;
        ETRACE("RELAY8 stream id of %p", (void *)s);
        if (!id)
                return CUDA_ERROR_INVALID_VALUE;
        return cuStreamGetId(s, id);
}

/* ---- TOOLS_MODULE (6e163fbe...): the tools' view of modules and functions */

/* 7: the module's functions, in the driver's order: cb(user, function,
 * name) for each, and their count as the result (not a CUresult). cuFFT
 * calls it after each cuModuleLoadData and launches what it collects; it
 * never asks cuModuleGetFunction. Measured on driver 580
 * (tests/gpu/probes/tools_module_slot7.c): the callback's result is
 * ignored, and a NULL callback just counts. The context is the caller's. */
typedef void (*module_fn_cb)(void *user, CUfunction f, const char *name);

static size_t module_functions(CUcontext ctx, CUmodule mod, module_fn_cb cb, void *user)
{
        unsigned int n = 0;
        size_t done = 0;

        ETRACE("TOOLS_MODULE slot 7 (ctx %p, module %p)", (void *)ctx, (void *)mod);
        if (ctx && cuCtxPushCurrent(ctx) != CUDA_SUCCESS)
                return 0;
        if (cuModuleGetFunctionCount(&n, mod) == CUDA_SUCCESS) {
                for (; done < n; done++) {
                        CUfunction f;
                        const char *name;
                        if (cb && lupc_module_function(mod, (unsigned)done, &f, &name) != CUDA_SUCCESS)
                                break;
                        if (cb)
                                cb(user, f, name);
                }
        }
        if (ctx) {
                CUcontext popped;
                cuCtxPopCurrent(&popped);
        }
        return done;
}

/* ---- filling the tables, once */

static void fill_tables(void)
{
        static void *const cudart_stubs[] = { PTR10(cudart, ), PTR10(cudart, 1) };
        static void *const hooks_stubs[] = { PTR10(hooks, ) };
        static void *const checks_stubs[] = { PTR10(checks, ), PTR10(checks, 1) };
        static void *const hopper_stubs[] = { PTR10(hopper, ), PTR10(hopper, 1) };
        static void *const module_stubs[] = {
                PTR10(module, ),  PTR10(module, 1), PTR10(module, 2), PTR10(module, 3), PTR10(module, 4),
                PTR10(module, 5), PTR10(module, 6), PTR10(module, 7), PTR10(module, 8), PTR10(module, 9),
        };
        static void *const relay8_stubs[] = {
                PTR10(relay8, ),  PTR10(relay8, 1), PTR10(relay8, 2), PTR10(relay8, 3), PTR10(relay8, 4),
                PTR10(relay8, 5), PTR10(relay8, 6), PTR10(relay8, 7), PTR10(relay8, 8), PTR10(relay8, 9),
        };

        memcpy(cudart_tbl, cudart_stubs, sizeof(cudart_tbl));
        cudart_tbl[0] = (void *)(uintptr_t)sizeof(cudart_tbl);
        cudart_tbl[1] = (void *)cudart_load_wrapper;
        cudart_tbl[2] = (void *)cudart_primary_ctx;
        cudart_tbl[6] = (void *)cudart_load_wrapper_ext;
        cudart_tbl[7] = (void *)cudart_noop;
        cudart_tbl[8] = (void *)cudart_load_image_ext;
        cudart_tbl[10] = NULL; /* as in driver 580 */
        cudart_tbl[12] = (void *)cudart_load_compilers;

        memcpy(hooks_tbl, hooks_stubs, sizeof(hooks_tbl));
        hooks_tbl[0] = (void *)(uintptr_t)sizeof(hooks_tbl);
        hooks_tbl[2] = (void *)hooks_buf_a;
        hooks_tbl[4] = (void *)hooks_ctx_id;
        hooks_tbl[6] = (void *)hooks_buf_b;

        tls_tbl[0] = (void *)(uintptr_t)sizeof(tls_tbl);
        tls_tbl[1] = (void *)tls_set_current;
        tls_tbl[2] = (void *)tls_get_current;

        cls_tbl[0] = (void *)lupc_cls_put;
        cls_tbl[1] = (void *)lupc_cls_delete;
        cls_tbl[2] = (void *)lupc_cls_get;
        cls_tbl[3] = NULL;

        memcpy(checks_tbl, checks_stubs, sizeof(checks_tbl));
        checks_tbl[0] = (void *)(uintptr_t)sizeof(checks_tbl);
        checks_tbl[2] = (void *)checks_ctx_type;
        checks_tbl[3] = (void *)checks_zero;

        integrity_tbl[0] = (void *)(uintptr_t)sizeof(integrity_tbl);
        integrity_tbl[1] = (void *)integrity_answer;
        integrity_tbl[2] = (void *)integrity_slot2;

        memcpy(relay8_tbl, relay8_stubs, sizeof(relay8_tbl));
        relay8_tbl[0] = (void *)(uintptr_t)sizeof(relay8_tbl);
        relay8_tbl[4] = (void *)relay8_ctx_id;
        relay8_tbl[39] = (void *)relay8_stream_id;
        relay8_tbl[51] = (void *)relay8_stream_handle;
        relay8_tbl[91] = NULL; /* as in driver 580 */

        /* 1734dc26: cuBLASLt's fp16/bf16 GEMMs on Hopper call slots 4 and 13,
         * whose meaning nobody has published. Refusing the table crashes
         * cuBLASLt (it does not check); a table whose slots all answer
         * NOT_SUPPORTED lets it take its other path. */
        memcpy(hopper_tbl, hopper_stubs, sizeof(hopper_tbl));
        hopper_tbl[0] = (void *)(uintptr_t)sizeof(hopper_tbl);

        memcpy(module_tbl, module_stubs, sizeof(module_tbl));
        module_tbl[0] = (void *)(uintptr_t)sizeof(module_tbl);
        module_tbl[7] = (void *)module_functions;
}

/* ---- the lookup */

struct export_table {
        uint8_t id[16];
        const char *name;
        void **table;           /* NULL: refused, as the research note advises */
};

#define ID(a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p) { 0x##a, 0x##b, 0x##c, 0x##d, 0x##e, 0x##f, 0x##g, 0x##h, \
                                                            0x##i, 0x##j, 0x##k, 0x##l, 0x##m, 0x##n, 0x##o, 0x##p }

static const struct export_table tables[] = {
        { ID(6b, d5, fb, 6c, 5b, f4, e7, 4a, 89, 87, d9, 39, 12, fd, 9d, f9), "CUDART_INTERFACE", cudart_tbl },
        { ID(a0, 94, 79, 8c, 2e, 74, 2e, 74, 93, f2, 08, 00, 20, 0c, 0a, 66), "TOOLS_RUNTIME_CALLBACK_HOOKS",
          hooks_tbl },
        { ID(42, d8, 5a, 81, 23, f6, cb, 47, 82, 98, f6, e7, 8a, 3a, ec, dc), "TOOLS_TLS", tls_tbl },
        { ID(c6, 93, 33, 6e, 11, 21, df, 11, a8, c3, 68, f3, 55, d8, 95, 93), "CONTEXT_LOCAL_STORAGE", cls_tbl },
        { ID(26, 3e, 88, 60, 7c, d2, 61, 43, 92, f6, bb, d5, 00, 6d, fa, 7e), "CONTEXT_CHECKS", checks_tbl },
        { ID(d4, 08, 20, 55, bd, e6, 70, 4b, 8d, 34, ba, 12, 3c, 66, e1, f2), "INTEGRITY_CHECK", integrity_tbl },
        { ID(21, 31, 8c, 60, 97, 14, 32, 48, 8c, a6, 41, ff, 73, 24, c8, f2), "RELAY8", relay8_tbl },
        /* asked for by every runtime copy, never called: refusing is harmless */
        { ID(f8, cf, f9, 51, 21, 46, 8b, 4e, b9, e2, fb, 46, 9e, 7c, 0d, d9), "f8cff951 (unknown, CUDA 12.9+)", NULL },
        /* NVML's, not the runtime's */
        { ID(69, a2, 8e, 9f, 24, 49, 8b, 47, b0, 30, c5, da, 33, 0e, a4, e9), "69a28e9f (NVML)", NULL },
        /* cuFFT: slot 7 lists a module's functions (a refusal fails cuFFT) */
        { ID(6e, 16, 3f, be, b9, 58, 44, 4d, 83, 5c, e1, 82, af, f1, 99, 1e), "TOOLS_MODULE", module_tbl },
        /* cuBLASLt on Hopper, slots of unknown meaning: stubs */
        { ID(17, 34, dc, 26, 80, 0d, 47, 45, 87, 26, c0, f1, e7, dd, 8b, ca), "1734dc26 (cuBLASLt)", hopper_tbl },
};

#define N_TABLES (sizeof(tables) / sizeof(tables[0]))

static void id_text(const uint8_t *b, char *out)
{
        for (int i = 0; i < 16; i++)
                sprintf(out + 2 * i, "%02x", b[i]);
}

EXPORT CUresult CUDAAPI cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
        static pthread_once_t filled = PTHREAD_ONCE_INIT;
        static atomic_int refused_logged[N_TABLES];
        static atomic_int unknown_logged;
        char text[33];

        if (!ppExportTable || !pExportTableId)
                return CUDA_ERROR_INVALID_VALUE;
        *ppExportTable = NULL;
        pthread_once(&filled, fill_tables);

        const uint8_t *id = (const uint8_t *)pExportTableId->bytes;
        for (size_t i = 0; i < N_TABLES; i++) {
                if (memcmp(tables[i].id, id, 16) != 0)
                        continue;
                if (tables[i].table) {
                        *ppExportTable = tables[i].table;
                        return CUDA_SUCCESS;
                }
                if (!atomic_exchange(&refused_logged[i], 1))
                        lup_debug("cuGetExportTable: refusing table %s, as the driver would refuse an unknown id",
                                 tables[i].name);
                return CUDA_ERROR_INVALID_VALUE;
        }
        /* the driver's answer to an id it lacks; a few lines at most */
        if (atomic_fetch_add(&unknown_logged, 1) < 16) {
                id_text(id, text);
                lup_warn("cuGetExportTable: unknown table id %s; answering CUDA_ERROR_INVALID_VALUE", text);
        }
        return CUDA_ERROR_INVALID_VALUE;
}
