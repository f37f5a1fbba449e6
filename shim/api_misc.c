/* SPDX-License-Identifier: MIT */
/* Error names and strings, cuGetProcAddress. All local (cuGetExportTable: export_tables.c). */
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "errors.h"
#include "log.h"
#include "symtab.h"
#include "unsupported.h"

#define EXPORT __attribute__((visibility("default")))

static const struct lupc_errname *find_err(CUresult e)
{
        size_t lo = 0, hi = lupc_n_errnames;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (lupc_errnames[mid].code == (int)e)
                        return &lupc_errnames[mid];
                if (lupc_errnames[mid].code < (int)e)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return NULL;
}

EXPORT CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr)
{
        if (!pStr)
                return CUDA_ERROR_INVALID_VALUE;
        const struct lupc_errname *e = find_err(error);
        *pStr = e ? e->name : NULL;
        return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The texts the driver itself uses for the errors programs meet most. */
static const struct {
        CUresult code;
        const char *text;
} err_texts[] = {
        { CUDA_SUCCESS, "no error" },
        { CUDA_ERROR_INVALID_VALUE, "invalid argument" },
        { CUDA_ERROR_OUT_OF_MEMORY, "out of memory" },
        { CUDA_ERROR_NOT_INITIALIZED, "initialization error" },
        { CUDA_ERROR_DEINITIALIZED, "driver shutting down" },
        { CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected" },
        { CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal" },
        { CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid" },
        { CUDA_ERROR_INVALID_CONTEXT, "invalid device context" },
        { CUDA_ERROR_NOT_FOUND, "named symbol not found" },
        { CUDA_ERROR_NOT_READY, "device not ready" },
        { CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered" },
        { CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure" },
        { CUDA_ERROR_INVALID_HANDLE, "invalid resource handle" },
        { CUDA_ERROR_NOT_SUPPORTED, "operation not supported" },
        { CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA-capable device(s) is/are busy or unavailable" },
        { CUDA_ERROR_OPERATING_SYSTEM, "OS call failed or operation not supported on this OS" },
        { CUDA_ERROR_UNKNOWN, "unknown error" },
};

EXPORT CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr)
{
        if (!pStr)
                return CUDA_ERROR_INVALID_VALUE;
        for (size_t i = 0; i < sizeof(err_texts) / sizeof(err_texts[0]); i++) {
                if (err_texts[i].code == error) {
                        *pStr = err_texts[i].text;
                        return CUDA_SUCCESS;
                }
        }
        /* every other known code: its name is its description */
        const struct lupc_errname *e = find_err(error);
        *pStr = e ? e->name : NULL;
        return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The runtime resolves its driver entry points before cuInit: tracing is
 * set up when the library is loaded (and only here, for the shim). */
__attribute__((constructor)) static void trace_at_load(void)
{
        lup_trace_setup_from_env();
}

static void *find_in(const struct lupc_sym *tab, size_t n, const char *name)
{
        size_t lo = 0, hi = n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = strcmp(tab[mid].name, name);
                if (c == 0)
                        return tab[mid].fn;
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return NULL;
}

static void *find_symbol(const char *name)
{
        void *fn;

        /* LUPINE_TRACE=3 traces every call made through the addresses the
         * runtime and the libraries get here (nearly all of theirs) */
        if (lup_trace_level() >= 3 && (fn = find_in(lupc_trace_symbols, lupc_n_trace_symbols, name)))
                return fn;
        return find_in(lupc_symbols, lupc_n_symbols, name);
}

void lupc_trace_result(const char *name, CUresult r);
void lupc_trace_result(const char *name, CUresult r)
{
        const char *err = NULL;

        if (r != CUDA_SUCCESS)
                cuGetErrorName(r, &err);
        lup_tracef("call %s -> %s", name, r == CUDA_SUCCESS ? "ok" : err ? err : "?");
}

/*
 * Resolution follows the driver: the newest ABI of `symbol` introduced at or
 * before cudaVersion; the per-thread-stream variant when asked for one.
 */
static CUresult proc_address(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status)
{
        const struct lupc_symver *best = NULL;
        bool known = false;

        if (!symbol || !pfn)
                return CUDA_ERROR_INVALID_VALUE;
        *pfn = NULL;
        for (size_t i = 0; i < lupc_n_symvers; i++) {
                const struct lupc_symver *v = &lupc_symvers[i];
                if (strcmp(v->base, symbol) != 0)
                        continue;
                known = true;
                if (v->version <= cudaVersion && (!best || v->version > best->version))
                        best = v;
        }
        /* Like the driver: with a status to fill in, a miss is a successful
         * query whose status says why; without one, it is NOT_FOUND. */
        const char *name = symbol;
        if (known) {
                if (!best) {
                        if (lup_trace_level() >= 2)
                                lup_tracef("cuGetProcAddress(%s, version %d): newer than asked for", symbol,
                                           cudaVersion);
                        if (status)
                                *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
                        return status ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
                }
                name = best->sym;
                if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && best->per_thread_sym)
                        name = best->per_thread_sym;
        }
        void *fn = find_symbol(name);
        if (!fn) {
                if (lup_trace_level() >= 2)
                        lup_tracef("cuGetProcAddress(%s, version %d): %s", symbol, cudaVersion,
                                   known ? "no such symbol in this library" : "unknown symbol");
                if (status)
                        *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
                return status ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
        }
        *pfn = fn;
        if (status)
                *status = CU_GET_PROC_ADDRESS_SUCCESS;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                            CUdriverProcAddressQueryResult *symbolStatus)
{
        return proc_address(symbol, pfn, cudaVersion, flags, symbolStatus);
}

#undef cuGetProcAddress
EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
        return proc_address(symbol, pfn, cudaVersion, flags, NULL);
}

/* Deprecated: every driver since CUDA 12.0 answers this, whatever the
 * arguments (cudaProfiler.h is not included: its declaration is marked
 * deprecated). */
EXPORT CUresult CUDAAPI cuProfilerInitialize(const char *configFile, const char *outputFile, int outputMode);
EXPORT CUresult CUDAAPI cuProfilerInitialize(const char *configFile, const char *outputFile, int outputMode)
{
        (void)configFile, (void)outputFile, (void)outputMode;
        return CUDA_ERROR_NOT_SUPPORTED;
}
