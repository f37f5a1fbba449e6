/* SPDX-License-Identifier: MIT */
/*
 * Prints, one "key = value" line each, what the driver answers to the
 * queries that lupine answers on the client or forwards without checking
 * the value: every device attribute, context settings and ids, function and
 * kernel attributes (also after a kernel's attribute was set through a
 * function handle, as the runtime does), occupancy, the NULL library,
 * pointer attributes of plain host memory, tensor-map encoding (results, and
 * whether equal inputs give equal maps). Run it on the local driver and
 * through lupine and diff the two outputs (tests/gpu/runtime.sh does): a
 * library that fails only through lupine usually trips over one of these.
 *
 * usage: e2e_answers KERNELS_DIR
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

static void show(const char *key, CUresult r, long long v)
{
        if (r == CUDA_SUCCESS)
                printf("%s = %lld\n", key, v);
        else
                printf("%s = error %d\n", key, (int)r);
}

/* The call runs before its output is read (argument order is unspecified). */
#define SHOW(key, call, val)                                   \
        do {                                                   \
                CUresult r_ = (call);                          \
                show((key), r_, (long long)(val));             \
        } while (0)

static void device_answers(int dev)
{
        char key[96], name[256];
        CUuuid u;
        size_t total = 0;
        int v = 0;

        CK(cuDeviceGetName(name, sizeof(name), dev));
        char *mark = strstr(name, " (lupine)");
        if (mark)
                *mark = 0; /* the one intended difference */
        printf("device %d name = %s\n", dev, name);
        CK(cuDeviceGetUuid_v2(&u, dev));
        printf("device %d uuid =", dev);
        for (int i = 0; i < 16; i++)
                printf(" %02x", (unsigned char)u.bytes[i]);
        printf("\n");
        CUresult r = cuDeviceTotalMem(&total, dev);
        snprintf(key, sizeof(key), "device %d total memory", dev);
        show(key, r, (long long)total);
        for (int a = 1; a < CU_DEVICE_ATTRIBUTE_MAX; a++) {
                v = 0;
                r = cuDeviceGetAttribute(&v, (CUdevice_attribute)a, dev);
                snprintf(key, sizeof(key), "device %d attribute %d", dev, a);
                /* the other intended difference: lupine's pools cannot be
                 * exported to another process (docs/status.md), so it
                 * reports no shareable handle types for them */
                if (a == CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES && r == CUDA_SUCCESS) {
                        printf("%s = (not compared: pool export)\n", key);
                        continue;
                }
                /* and managed memory's contract (docs/managed.md): host and
                 * GPU meet at synchronisation points only */
                if (a == CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS ||
                    a == CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS ||
                    a == CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES ||
                    a == CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST ||
                    a == CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED ||
                    a == CU_DEVICE_ATTRIBUTE_ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED) {
                        printf("%s = (not compared: managed memory's contract)\n", key);
                        continue;
                }
                show(key, r, v);
        }
}

static void context_answers(CUcontext ctx)
{
        unsigned int api = 0, flags = 0;
        unsigned long long id = 0;
        int least = 0, greatest = 0;
        CUfunc_cache cache;
        CUdevice dev = -1;
        char key[64];

        SHOW("context api version", cuCtxGetApiVersion(ctx, &api), api);
        SHOW("context id is nonzero", cuCtxGetId(ctx, &id), id != 0);
        SHOW("context flags", cuCtxGetFlags(&flags), flags);
        SHOW("context device (v2, NULL)", cuCtxGetDevice_v2(&dev, NULL), dev);
        SHOW("stream priority least", cuCtxGetStreamPriorityRange(&least, &greatest), least);
        show("stream priority greatest", CUDA_SUCCESS, greatest);
        SHOW("cache config", cuCtxGetCacheConfig(&cache), cache);
        for (int l = 0; l < CU_LIMIT_MAX; l++) {
                size_t v = 0;
                snprintf(key, sizeof(key), "limit %d", l);
                SHOW(key, cuCtxGetLimit(&v, (CUlimit)l), (long long)v);
        }
        CUmoduleLoadingMode mode;
        SHOW("module loading mode", cuModuleGetLoadingMode(&mode), mode);
}

static void function_answers(const char *dir)
{
        char path[4096], key[96];
        snprintf(path, sizeof(path), "%s/kernels.fatbin", dir);
        FILE *f = fopen(path, "rb");
        EXPECT(f != NULL);
        static unsigned char img[1 << 20];
        size_t n = fread(img, 1, sizeof(img), f);
        fclose(f);
        EXPECT(n > 0 && n < sizeof(img));

        CUlibrary lib;
        CUkernel k;
        CUfunction fn;
        CK(cuLibraryLoadData(&lib, img, NULL, NULL, 0, NULL, NULL, 0));
        CK(cuLibraryGetKernel(&k, lib, "vec_add_f32"));
        CK(cuKernelGetFunction(&fn, k));
        for (int a = 0; a < CU_FUNC_ATTRIBUTE_MAX; a++) {
                int v = 0;
                snprintf(key, sizeof(key), "function attribute %d", a);
                SHOW(key, cuFuncGetAttribute(&v, (CUfunction_attribute)a, fn), v);
                v = 0;
                snprintf(key, sizeof(key), "kernel attribute %d", a);
                SHOW(key, cuKernelGetAttribute(&v, (CUfunction_attribute)a, k, 0), v);
        }
        /* the runtime sets a kernel's attribute through the kernel handle
         * used as a function, then reads it back either way */
        SHOW("set max dynamic shared memory through the kernel as a function",
             cuFuncSetAttribute((CUfunction)k, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536), 0);
        int v = 0;
        SHOW("max dynamic shared memory, kernel handle",
             cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k, 0), v);
        v = 0;
        SHOW("max dynamic shared memory, kernel as a function",
             cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (CUfunction)k), v);
        v = 0;
        SHOW("occupancy, 256 threads", cuOccupancyMaxActiveBlocksPerMultiprocessor(&v, fn, 256, 0), v);
        v = 0;
        SHOW("occupancy, kernel as a function",
             cuOccupancyMaxActiveBlocksPerMultiprocessor(&v, (CUfunction)k, 256, 0), v);

        /* cuBLASLt passes library options without a values array */
        static const struct {
                const char *key;
                CUlibraryOption opt;
                bool values;
        } lib_opts[] = {
                { "library option binary-is-preserved, no values", CU_LIBRARY_BINARY_IS_PRESERVED, false },
                { "library option binary-is-preserved, values", CU_LIBRARY_BINARY_IS_PRESERVED, true },
                { "library option out of range", CU_LIBRARY_NUM_OPTIONS, true },
        };
        for (size_t i = 0; i < sizeof(lib_opts) / sizeof(lib_opts[0]); i++) {
                CUlibraryOption opt = lib_opts[i].opt;
                void *val = NULL;
                CUlibrary l2;
                CUresult r = cuLibraryLoadData(&l2, img, NULL, NULL, 0, &opt, lib_opts[i].values ? &val : NULL, 1);
                SHOW(lib_opts[i].key, r, 0);
                if (r == CUDA_SUCCESS)
                        CK(cuLibraryUnload(l2));
        }

        CUkernel none;
        SHOW("kernel lookup in the NULL library", cuLibraryGetKernel(&none, NULL, "vec_add_f32"), 0);
        SHOW("missing kernel lookup", cuLibraryGetKernel(&none, lib, "no_such_kernel"), 0);
        CK(cuLibraryUnload(lib));
}

static void pointer_answers(void)
{
        static int host_var;
        CUpointer_attribute attrs[] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                        CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_CONTEXT };
        unsigned int type = 99;
        int ordinal = 99;
        unsigned int managed = 99; /* the driver writes 4 bytes */
        CUcontext c = (CUcontext)1;
        void *data[] = { &type, &ordinal, &managed, &c };
        CUresult r = cuPointerGetAttributes(4, attrs, data, (CUdeviceptr)(uintptr_t)&host_var);
        show("host pointer: memory type", r, type);
        show("host pointer: device ordinal", r, ordinal);
        show("host pointer: managed", r, managed);
        show("host pointer: context is NULL", r, c == NULL);
}

/* A float tensor of 64 x 32, tiles of 16 x 8. */
static CUresult encode(CUtensorMap *m, CUdeviceptr p, cuuint32_t rank, cuuint64_t stride, cuuint32_t box0)
{
        cuuint64_t dims[5] = { 64, 32, 1, 1, 1 }, strides[4] = { stride, stride * 32, stride * 32, stride * 32 };
        cuuint32_t box[5] = { box0, 8, 1, 1, 1 }, es[5] = { 1, 1, 1, 1, 1 };
        return cuTensorMapEncodeTiled(m, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, rank, (void *)(uintptr_t)p, dims, strides,
                                      box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                      CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

static void tensormap_answers(void)
{
        CUdeviceptr p;
        CUtensorMap a, b, c;

        CK(cuMemAlloc(&p, 1 << 20));
        CUresult r = encode(&a, p, 2, 256, 16);
        show("tensor map: encode", r, 0);
        SHOW("tensor map: same inputs, same map", encode(&b, p, 2, 256, 16), !memcmp(&a, &b, sizeof(a)));
        c = a;
        SHOW("tensor map: replaced address differs", cuTensorMapReplaceAddress(&c, (void *)(uintptr_t)(p + 4096)),
             memcmp(&a, &c, sizeof(a)) != 0);
        SHOW("tensor map: address not 16-byte aligned", encode(&b, p + 4, 2, 256, 16), 0);
        SHOW("tensor map: rank 6", encode(&b, p, 6, 256, 16), 0);
        SHOW("tensor map: box of 300", encode(&b, p, 2, 256, 300), 0);
        SHOW("tensor map: stride not a multiple of 16", encode(&b, p, 2, 260, 16), 0);
        CK(cuMemFree(p));
}

int main(int argc, char **argv)
{
        CUcontext ctx;
        int n = 0, drv = 0;

        if (argc != 2) {
                fprintf(stderr, "usage: %s KERNELS_DIR\n", argv[0]);
                return 2;
        }
        /* a driver that crashes on a probe still leaves every line before it */
        setvbuf(stdout, NULL, _IOLBF, 0);
        CK(cuInit(0));
        CK(cuDriverGetVersion(&drv));
        printf("driver version = %d\n", drv);
        CK(cuDeviceGetCount(&n));
        printf("devices = %d\n", n);
        for (int d = 0; d < n; d++)
                device_answers(d);
        CK(cuDevicePrimaryCtxRetain(&ctx, 0));
        CK(cuCtxSetCurrent(ctx));
        context_answers(ctx);
        function_answers(argv[1]);
        pointer_answers();
        tensormap_answers();
        CK(cuDevicePrimaryCtxRelease(0));
        printf("e2e_answers: OK\n");
        return e2e_failures ? 1 : 0;
}
