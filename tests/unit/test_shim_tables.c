/* SPDX-License-Identifier: MIT */
/* The generator's output as the shim uses it: the symbol table, version
 * resolution in cuGetProcAddress, unsupported stubs, error names, and the
 * calls that must work (or fail cleanly) before any server is reached. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <cuda.h>

#include "symtab.h"

/* older ABIs that cuda.h no longer declares; only their addresses matter */
void cuCtxCreate_v2(void);
void cuCtxCreate_v3(void);

static void symbol_table_complete_and_sorted(void **state)
{
        assert_int_equal(lupc_n_symbols, 637); /* what CUDA 13.0's libcuda.so stub exports */
        for (size_t i = 1; i < lupc_n_symbols; i++)
                assert_true(strcmp(lupc_symbols[i - 1].name, lupc_symbols[i].name) < 0);
        for (size_t i = 0; i < lupc_n_symbols; i++)
                assert_non_null(lupc_symbols[i].fn);
}

static void *resolve(const char *name, int version, cuuint64_t flags, CUdriverProcAddressQueryResult *st)
{
        void *fn = NULL;
        CUresult r = cuGetProcAddress_v2(name, &fn, version, flags, st);
        return r == CUDA_SUCCESS ? fn : NULL;
}

static void proc_address_versions(void **state)
{
        CUdriverProcAddressQueryResult st;
        assert_ptr_equal(resolve("cuMemAlloc", 13000, 0, &st), (void *)cuMemAlloc_v2);
        assert_int_equal(st, CU_GET_PROC_ADDRESS_SUCCESS);
        assert_ptr_equal(resolve("cuCtxCreate", 12080, 0, &st), (void *)cuCtxCreate_v4);
        assert_ptr_equal(resolve("cuCtxCreate", 11040, 0, &st), (void *)cuCtxCreate_v3);
        assert_ptr_equal(resolve("cuCtxCreate", 3020, 0, &st), (void *)cuCtxCreate_v2);
        assert_ptr_equal(resolve("cuGetProcAddress", 13000, 0, &st), (void *)cuGetProcAddress_v2);
        /* older than the first version of the function */
        assert_null(resolve("cuGetProcAddress", 11000, 0, &st));
        assert_int_equal(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
        assert_null(resolve("cuDoesNotExist", 13000, 0, &st));
        assert_int_equal(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
        /* without a status pointer the miss is an error */
        void *f = (void *)1;
        assert_int_equal(cuGetProcAddress_v2("cuDoesNotExist", &f, 13000, 0, NULL), CUDA_ERROR_NOT_FOUND);
        assert_null(f);
        /* per-thread default stream variants */
        void *pt = resolve("cuMemcpyHtoD", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st);
        assert_non_null(pt);
        assert_ptr_not_equal(pt, (void *)cuMemcpyHtoD_v2);
        assert_ptr_equal(resolve("cuMemcpyHtoD", 13000, 0, &st), (void *)cuMemcpyHtoD_v2);
        void *fn = NULL;
        assert_int_equal(cuGetProcAddress_v2(NULL, &fn, 13000, 0, &st), CUDA_ERROR_INVALID_VALUE);
}

static void unsupported_stubs_answer(void **state)
{
        CUdriverProcAddressQueryResult st;
        CUresult (*fn)(void) = (CUresult(*)(void))resolve("cuGraphAddBatchMemOpNode", 13000, 0, &st);
        assert_non_null(fn);
        assert_int_equal(fn(), CUDA_ERROR_NOT_SUPPORTED);
        assert_int_equal(fn(), CUDA_ERROR_NOT_SUPPORTED); /* logs only once; still answers */
}

static void error_names(void **state)
{
        const char *s;
        assert_int_equal(cuGetErrorName(CUDA_SUCCESS, &s), CUDA_SUCCESS);
        assert_string_equal(s, "CUDA_SUCCESS");
        assert_int_equal(cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &s), CUDA_SUCCESS);
        assert_string_equal(s, "CUDA_ERROR_ILLEGAL_ADDRESS");
        assert_int_equal(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
        assert_string_equal(s, "out of memory");
        assert_int_equal(cuGetErrorName((CUresult)7777, &s), CUDA_ERROR_INVALID_VALUE);
        assert_null(s);
        assert_int_equal(cuGetErrorString(CUDA_ERROR_UNKNOWN, NULL), CUDA_ERROR_INVALID_VALUE);
}

static void before_init(void **state)
{
        int n, v = 0;
        CUdeviceptr p;
        assert_int_equal(cuDriverGetVersion(&v), CUDA_SUCCESS);
        assert_int_equal(v, CUDA_VERSION);
        assert_int_equal(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
        assert_int_equal(cuMemAlloc_v2(&p, 1), CUDA_ERROR_NOT_INITIALIZED);
        assert_int_equal(cuCtxSynchronize(), CUDA_ERROR_NOT_INITIALIZED);
        assert_int_equal(cuMemsetD8_v2(0, 0, 1), CUDA_ERROR_NOT_INITIALIZED);
        const void *tbl = (const void *)1;
        CUuuid id = { { 0 } };
        assert_int_equal(cuGetExportTable(&tbl, &id), CUDA_ERROR_INVALID_VALUE);
        assert_null(tbl);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(symbol_table_complete_and_sorted),
                cmocka_unit_test(proc_address_versions),
                cmocka_unit_test(unsupported_stubs_answer),
                cmocka_unit_test(error_names),
                cmocka_unit_test(before_init),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
