/* SPDX-License-Identifier: MIT */
/*
 * Issue 14, item 5: managed memory through the runtime API. A
 * cudaMallocManaged vector add with the host reading and writing the same
 * pointers between kernels, copies with managed ends, cudaMemPrefetchAsync,
 * cudaMemAdvise, cudaMemRangeGetAttribute(s), cudaStreamAttachMemAsync,
 * cudaPointerGetAttributes and cuMemGetAddressRange, and the error codes of
 * bad input (printed as numbers: the local driver's are the truth).
 *
 * The local H200 reports concurrent managed access 1 and lupine 0
 * (docs/managed.md): those attributes go to stderr only; stdout holds what
 * both must agree on.
 */
#include "model_util.h"

enum { N = 1 << 20 };

__global__ void vec_add(const float *a, const float *b, float *c, int n)
{
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
                c[i] = a[i] + b[i];
}

__global__ void scale(float *p, float f, int n)
{
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
                p[i] *= f;
}

static cudaMemLocation dev_loc(int d)
{
        cudaMemLocation l;
        memset(&l, 0, sizeof(l));
        l.type = cudaMemLocationTypeDevice;
        l.id = d;
        return l;
}

static cudaMemLocation host_loc(void)
{
        cudaMemLocation l;
        memset(&l, 0, sizeof(l));
        l.type = cudaMemLocationTypeHost;
        return l;
}

static int range_int(cudaMemRangeAttribute a, const void *p, size_t n)
{
        int v = 12345;
        cudaError_t e = cudaMemRangeGetAttribute(&v, 4, a, p, n);
        return e == cudaSuccess ? v : -1000 - (int)e;
}

static void device_attributes(void)
{
        int managed, conc, pageable, direct, host_tables;
        RT_CHECK(cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, 0));
        RT_CHECK(cudaDeviceGetAttribute(&conc, cudaDevAttrConcurrentManagedAccess, 0));
        RT_CHECK(cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, 0));
        RT_CHECK(cudaDeviceGetAttribute(&direct, cudaDevAttrDirectManagedMemAccessFromHost, 0));
        RT_CHECK(cudaDeviceGetAttribute(&host_tables, cudaDevAttrPageableMemoryAccessUsesHostPageTables, 0));
        fprintf(stderr, "model_managed: concurrent managed access %d, pageable %d, direct from host %d, host page "
                        "tables %d\n",
                conc, pageable, direct, host_tables);
        printf("managed memory supported: %d\n", managed);
}

/* the host writes, a kernel reads; the host changes inputs; a kernel writes an input, the host reads it */
static void vector_add(float *a, float *b, float *c, const char *when)
{
        vec_add<<<256, 256>>>(a, b, c, N);
        RT_CHECK(cudaDeviceSynchronize());
        printf("%s: add 1: %.3f\n", when, model_sum(c, N));
        for (int i = 0; i < N; i += 5)
                a[i] = -a[i];
        vec_add<<<256, 256>>>(a, b, c, N);
        RT_CHECK(cudaDeviceSynchronize());
        printf("%s: add 2 (host changed a): %.3f\n", when, model_sum(c, N));
        scale<<<256, 256>>>(b, 0.5f, N);
        RT_CHECK(cudaDeviceSynchronize());
        printf("%s: scaled b read by the host: %.3f\n", when, model_sum(b, N));
        vec_add<<<256, 256>>>(a, b, c, N);
        RT_CHECK(cudaDeviceSynchronize());
        printf("%s: add 3 (kernel changed b): %.3f\n", when, model_sum(c, N));
}

static void copies(float *a, float *c, const char *when)
{
        float *d, *h = (float *)malloc(N * 4);
        RT_CHECK(cudaMalloc(&d, N * 4));
        RT_CHECK(cudaMemcpy(d, a, N * 4, cudaMemcpyDefault));
        scale<<<256, 256>>>(d, 3.0f, N);
        RT_CHECK(cudaMemcpy(c, d, N * 4, cudaMemcpyDeviceToHost));
        printf("%s: copies through device memory: %.3f\n", when, model_sum(c, N));
        RT_CHECK(cudaMemcpy(h, c, N * 4, cudaMemcpyDefault));
        printf("%s: copy to malloc memory: %.3f\n", when, model_sum(h, N));
        RT_CHECK(cudaFree(d));
        free(h);
}

static void pointer_attributes(float *p, const char *when)
{
        cudaPointerAttributes at;
        RT_CHECK(cudaPointerGetAttributes(&at, p + 1000));
        printf("%s: pointer: type %d device %d devptr==p %d hostptr==p %d\n", when, (int)at.type, at.device,
               at.devicePointer == (void *)(p + 1000), at.hostPointer == (void *)(p + 1000));
        CUdeviceptr base = 0;
        size_t size = 0;
        unsigned int managed = 0, mapped = 0;
        CU_CHECK(cuMemGetAddressRange(&base, &size, (CUdeviceptr)(p + 1000)));
        CU_CHECK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, (CUdeviceptr)p));
        CUresult r = cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, (CUdeviceptr)p);
        printf("%s: range base==p %d size %zu is_managed %u mapped %d/%u\n", when, base == (CUdeviceptr)p, size,
               managed, (int)r, mapped);
}

static void advice(float *p, const char *when)
{
        const size_t pg = 4096, n = 64 * pg;
        RT_CHECK(cudaMemAdvise(p, 2 * pg, cudaMemAdviseSetReadMostly, dev_loc(0)));
        RT_CHECK(cudaMemAdvise(p, n / 2, cudaMemAdviseSetPreferredLocation, dev_loc(0)));
        RT_CHECK(cudaMemAdvise((char *)p + n / 2, n / 2, cudaMemAdviseSetPreferredLocation, host_loc()));
        RT_CHECK(cudaMemAdvise(p, n, cudaMemAdviseSetAccessedBy, dev_loc(0)));
        RT_CHECK(cudaMemPrefetchAsync(p, n, dev_loc(0), 0, 0));
        RT_CHECK(cudaMemPrefetchAsync((char *)p + n / 2, n / 2, host_loc(), 0, 0));
        RT_CHECK(cudaDeviceSynchronize());
        int by[3] = { 7, 7, 7 };
        cudaError_t e = cudaMemRangeGetAttribute(by, sizeof(by), cudaMemRangeAttributeAccessedBy, p, n);
        printf("%s: advice: read mostly %d/%d preferred %d/%d/%d accessed by %d [%d %d %d]\n", when,
               range_int(cudaMemRangeAttributeReadMostly, p, 2 * pg),
               range_int(cudaMemRangeAttributeReadMostly, p, 3 * pg),
               range_int(cudaMemRangeAttributePreferredLocation, p, n / 2),
               range_int(cudaMemRangeAttributePreferredLocation, (char *)p + n / 2, n / 2),
               range_int(cudaMemRangeAttributePreferredLocation, p, n), (int)e, by[0], by[1], by[2]);
        printf("%s: prefetch: last %d/%d/%d types %d/%d\n", when,
               range_int(cudaMemRangeAttributeLastPrefetchLocation, p, n / 2),
               range_int(cudaMemRangeAttributeLastPrefetchLocation, (char *)p + n / 2, n / 2),
               range_int(cudaMemRangeAttributeLastPrefetchLocation, p, n),
               range_int(cudaMemRangeAttributePreferredLocationType, p, n / 2),
               range_int(cudaMemRangeAttributeLastPrefetchLocationType, (char *)p + n / 2, n / 2));
}

static void attach(const char *when)
{
        float *m;
        cudaStream_t s;
        RT_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        RT_CHECK(cudaMallocManaged(&m, N * 4, cudaMemAttachHost));
        for (int i = 0; i < N; i++)
                m[i] = (float)(i % 100);
        RT_CHECK(cudaStreamAttachMemAsync(s, m, 0, cudaMemAttachSingle));
        scale<<<256, 256, 0, s>>>(m, 2.0f, N);
        RT_CHECK(cudaStreamSynchronize(s));
        printf("%s: attached to a stream: %.3f\n", when, model_sum(m, N));
        RT_CHECK(cudaFree(m));
        RT_CHECK(cudaStreamDestroy(s));
}

static void bad_input(void)
{
        void *p = NULL;
        float *d;
        RT_CHECK(cudaMalloc(&d, 1 << 16));
        int e1 = (int)cudaMallocManaged(&p, 0, cudaMemAttachGlobal);
        cudaGetLastError();
        int e2 = (int)cudaMallocManaged(&p, 4096, 0);
        cudaGetLastError();
        int e3 = (int)cudaMallocManaged(&p, 4096, cudaMemAttachSingle);
        cudaGetLastError();
        int e4 = (int)cudaMemAdvise(d, 4096, cudaMemAdviseSetReadMostly, dev_loc(0));
        cudaGetLastError();
        int e5 = (int)cudaMemPrefetchAsync(d, 4096, dev_loc(0), 0, 0);
        cudaGetLastError();
        int v;
        int e6 = (int)cudaMemRangeGetAttribute(&v, 4, cudaMemRangeAttributeReadMostly, d, 4096);
        cudaGetLastError();
        float *m;
        RT_CHECK(cudaMallocManaged(&m, 8192));
        int e7 = (int)cudaMemAdvise(m, 4096, (cudaMemoryAdvise)99, dev_loc(0));
        cudaGetLastError();
        int e8 = (int)cudaMemPrefetchAsync(m, 4096, dev_loc(99), 0, 0);
        cudaGetLastError();
        int e9 = (int)cudaMemRangeGetAttribute(&v, 8, cudaMemRangeAttributeReadMostly, m, 4096);
        cudaGetLastError();
        int e10 = (int)cudaStreamAttachMemAsync(0, m, 0, cudaMemAttachSingle);
        cudaGetLastError();
        int e11 = (int)cudaStreamAttachMemAsync(0, m, 4096, cudaMemAttachGlobal);
        cudaGetLastError();
        int e12 = (int)cuMemFree((CUdeviceptr)m + 4096);
        unsigned int fl = 0;
        int e13 = (int)cuMemHostGetFlags(&fl, m);
        CUdeviceptr hp;
        int e14 = (int)cuMemHostGetDevicePointer(&hp, m, 0);
        int e15 = (int)cuMemHostUnregister(m);
        int e16 = (int)cuMemHostRegister(m, 4096, 0);
        if (e16 == CUDA_SUCCESS)
                cuMemHostUnregister(m);
        int e17 = (int)cuMemFreeHost(m);
        RT_CHECK(cudaFree(m));
        RT_CHECK(cudaFree(d));
        RT_CHECK(cudaDeviceSynchronize());
        printf("bad input: alloc size 0 %d, flags 0 %d, flags single %d; on device memory: advise %d prefetch %d "
               "range %d\n",
               e1, e2, e3, e4, e5, e6);
        printf("bad input: advice 99 %d, prefetch to device 99 %d, range size 8 %d, attach single to null %d, "
               "attach part %d, free inside %d, host flags %d\n",
               e7, e8, e9, e10, e11, e12, e13);
        printf("bad input: on managed memory: host device pointer %d, unregister %d, register %d, free host %d\n", e14,
               e15, e16, e17);
}

int main(int argc, char **argv)
{
        float *a, *b, *c, *p;
        RT_CHECK(cudaSetDevice(0));
        device_attributes();
        RT_CHECK(cudaMallocManaged(&a, N * 4));
        RT_CHECK(cudaMallocManaged(&b, N * 4));
        RT_CHECK(cudaMallocManaged(&c, N * 4, cudaMemAttachGlobal));
        RT_CHECK(cudaMallocManaged(&p, 64 * 4096));
        for (int i = 0; i < N; i++)
                a[i] = (float)(i % 1000) * 0.25f, b[i] = (float)(i % 77);
        vector_add(a, b, c, "before");
        copies(a, c, "before");
        pointer_attributes(a, "before");
        advice(p, "before");
        attach("before");
        bad_input();
        /* the midpoint: every managed buffer alive with data, and host writes no call has carried yet */
        for (int i = 0; i < N; i += 3)
                b[i] += 1.0f;
        model_hold(argc, argv, "managed a, b, c and p with data");
        vec_add<<<256, 256>>>(a, b, c, N);
        RT_CHECK(cudaDeviceSynchronize());
        printf("after: add with the host's last writes: %.3f\n", model_sum(c, N));
        printf("after: advice kept: read mostly %d preferred %d last prefetch %d\n",
               range_int(cudaMemRangeAttributeReadMostly, p, 2 * 4096),
               range_int(cudaMemRangeAttributePreferredLocation, p, 32 * 4096),
               range_int(cudaMemRangeAttributeLastPrefetchLocation, p, 32 * 4096));
        vector_add(a, b, c, "after");
        copies(a, c, "after");
        pointer_attributes(a, "after");
        RT_CHECK(cudaFree(a));
        RT_CHECK(cudaFree(b));
        RT_CHECK(cudaFree(c));
        RT_CHECK(cudaFree(p));
        printf("done\n");
        return 0;
}
