/* SPDX-License-Identifier: MIT */
/*
 * What slot 7 of the TOOLS_MODULE export table (6e163fbe...) does on the
 * real driver: cuFFT calls it after each cuModuleLoadData with (context,
 * module, a function of its own, a pointer) and then launches functions it
 * never asked cuModuleGetFunction for. This probe calls it with a callback
 * that prints what it is given, returning 0 and then 1, and prints what the
 * slot returns. Run on the GPU host against the real driver.
 *
 *   probe KERNELS_DIR
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int calls, ret_value;

static uintptr_t cb(uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t d, uintptr_t e, uintptr_t f)
{
        const char *name = NULL;
        CUresult r = cuFuncGetName(&name, (CUfunction)a);
        printf("  cb(%#lx, %#lx, %#lx, %#lx, %#lx, %#lx): arg0 as a function: %d %s\n", (unsigned long)a,
               (unsigned long)b, (unsigned long)c, (unsigned long)d, (unsigned long)e, (unsigned long)f, (int)r,
               r == CUDA_SUCCESS && name ? name : "-");
        calls++;
        return (uintptr_t)ret_value;
}

int main(int argc, char **argv)
{
        char path[4096];
        CUcontext ctx;
        CUmodule m;
        const void *t = NULL;
        CUuuid id = { { 0x6e, 0x16, 0x3f, (char)0xbe, (char)0xb9, 0x58, 0x44, 0x4d, (char)0x83, 0x5c, (char)0xe1,
                        (char)0x82, (char)0xaf, (char)0xf1, (char)0x99, 0x1e } };

        if (argc < 2)
                return 2;
        snprintf(path, sizeof(path), "%s/kernels.fatbin", argv[1]);
        if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx) || cuModuleLoad(&m, path))
                return 1;
        if (cuGetExportTable(&t, &id) != CUDA_SUCCESS || !t)
                return 1;
        const uintptr_t *tbl = t;
        printf("table size %lu\n", (unsigned long)tbl[0]);
        typedef uintptr_t (*slot_fn)(uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t);
        slot_fn s7 = (slot_fn)tbl[7];
        for (ret_value = 0; ret_value <= 1; ret_value++) {
                uintptr_t user[4] = { 0x1111, 0x2222, 0, 0 };
                calls = 0;
                uintptr_t r = s7((uintptr_t)ctx, (uintptr_t)m, (uintptr_t)cb, (uintptr_t)user, 0, 0);
                printf("callback returning %d: slot 7 returned %#lx after %d calls; user %#lx %#lx %#lx %#lx\n",
                       ret_value, (unsigned long)r, calls, (unsigned long)user[0], (unsigned long)user[1],
                       (unsigned long)user[2], (unsigned long)user[3]);
        }
        /* and with the module argument only, as a query */
        uintptr_t out[4] = { 0 };
        uintptr_t r = s7((uintptr_t)ctx, (uintptr_t)m, 0, (uintptr_t)out, 0, 0);
        printf("no callback: %#lx; out %#lx %#lx\n", (unsigned long)r, (unsigned long)out[0], (unsigned long)out[1]);
        CUfunction f;
        if (cuModuleGetFunction(&f, m, "fill_u32") == CUDA_SUCCESS)
                printf("cuModuleGetFunction(fill_u32) = %p\n", (void *)f);
        return 0;
}
