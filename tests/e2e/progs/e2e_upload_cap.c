/* SPDX-License-Identifier: MIT */
/* The caps on uploaded-but-unused module images (docs/security.md, finding
 * 3), against lupined --upload-cap-session 1 --upload-cap-total 2 (MiB):
 *   1. a 1.5 MiB image is refused with CUDA_ERROR_OUT_OF_MEMORY, and the
 *      session goes on: a small image then loads and its kernel runs;
 *   2. "holders?" on stdout; once the test answers a line (other sessions
 *      now hold the whole total cap unused), a small image is refused too;
 *   3. "released?"; once answered (they are gone), it loads again.
 * usage: e2e_upload_cap */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static const char ptx_head[] = ".version 9.0\n.target sm_90\n.address_size 64\n\n";
static const char ptx_body[] = ".visible .entry empty_nop()\n{\n\tret;\n}\n";

/* A valid PTX module padded with comment lines to about `pad` bytes. */
static char *make_ptx(size_t pad)
{
        size_t line = 100, n = pad / line;
        char *p = malloc(sizeof(ptx_head) + n * line + sizeof(ptx_body) + 1), *q = p;

        if (!p)
                exit(2);
        memcpy(q, ptx_head, sizeof(ptx_head) - 1);
        q += sizeof(ptx_head) - 1;
        for (size_t i = 0; i < n; i++) {
                memset(q, 'x', line);
                q[0] = q[1] = '/';
                q[line - 1] = '\n';
                q += line;
        }
        memcpy(q, ptx_body, sizeof(ptx_body));
        return p;
}

static CUresult load_and_run(const char *img)
{
        CUmodule m;
        CUfunction f;
        CUresult r = cuModuleLoadData(&m, img);

        if (r != CUDA_SUCCESS)
                return r;
        CK(cuModuleGetFunction(&f, m, "empty_nop"));
        CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, 0, NULL, NULL));
        CK(cuCtxSynchronize());
        CK(cuModuleUnload(m));
        return CUDA_SUCCESS;
}

static void wait_line(const char *prompt)
{
        char buf[64];

        printf("%s\n", prompt);
        fflush(stdout);
        if (!fgets(buf, sizeof(buf), stdin))
                exit(2);
}

int main(void)
{
        CUcontext c;
        char *big = make_ptx(1536u << 10), *small = make_ptx(0);

        CK(cuInit(0));
        CK(cuDevicePrimaryCtxRetain(&c, 0));
        CK(cuCtxSetCurrent(c));
        EXPECT_ERR(load_and_run(big), CUDA_ERROR_OUT_OF_MEMORY);
        EXPECT_ERR(load_and_run(small), CUDA_SUCCESS);
        wait_line("holders?");
        EXPECT_ERR(load_and_run(small), CUDA_ERROR_OUT_OF_MEMORY);
        EXPECT_ERR(load_and_run(small), CUDA_ERROR_OUT_OF_MEMORY);
        wait_line("released?");
        EXPECT_ERR(load_and_run(small), CUDA_SUCCESS);
        free(big);
        free(small);
        if (e2e_failures)
                return 1;
        printf("e2e_upload_cap: OK\n");
        return 0;
}
