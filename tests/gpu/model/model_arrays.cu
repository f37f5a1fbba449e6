/* SPDX-License-Identifier: MIT */
/*
 * Issue 14, items 1 and 2: CUDA arrays (2D, 3D, layered, cubemap, mipmapped)
 * made with the runtime API, filled with cudaMemcpy2DToArray/cudaMemcpy3D,
 * texture objects sampled by kernels (point and linear filtering,
 * normalized coordinates, mipmap levels), surface writes read back with
 * cudaMemcpy2DFromArray, and the driver's answers to bad input (absurd
 * sizes, formats, channel counts, copies past an array, descriptors and
 * planes, a texture on a destroyed array). Prints checksums, the object
 * values (kernels take them by value: they must be the same through
 * lupine and after a restore) and error codes; tests/gpu/model.sh
 * compares them with the local driver's. At the midpoint every array and
 * object is alive with data; after it the same objects are sampled again.
 */
#include "model_util.h"

enum { W2 = 64, H2 = 48, W3 = 32, H3 = 16, D3 = 8, WL = 16, LAYERS = 4, WC = 8, WM = 64, LEVELS = 4 };
enum { NS = 256 }; /* samples per texture */

__global__ void sample2d(cudaTextureObject_t t, float *out, int n, float sx, float sy, int norm)
{
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i >= n)
                return;
        float x = (i % 16) * sx + 0.37f, y = (i / 16) * sy + 0.61f;
        if (norm)
                x /= W2, y /= H2;
        out[i] = tex2D<float>(t, x, y);
}

__global__ void sample3d(cudaTextureObject_t t, float *out, int n)
{
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n)
                out[i] = tex3D<float>(t, (i % 8) * 3.9f + 0.2f, (i / 8 % 8) * 1.9f + 0.3f, (i / 64) * 1.7f + 0.5f);
}

__global__ void sample_layered(cudaTextureObject_t t, float *out, int n)
{
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n)
                out[i] = tex2DLayered<float>(t, (i % 16) * 0.9f + 0.25f, (i / 16 % 16) * 0.8f + 0.5f, i % LAYERS);
}

__global__ void sample_layered1d(cudaTextureObject_t t, float *out, int n)
{
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n)
                out[i] = tex1DLayered<float>(t, (i % 32) * 1.7f + 0.3f, i % LAYERS);
}

__global__ void sample_cube(cudaTextureObject_t t, float *out, int n)
{
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i >= n)
                return;
        float a = i * 0.0245f, b = i * 0.0131f;
        out[i] = texCubemap<float>(t, cosf(a) * cosf(b), sinf(a) * cosf(b), sinf(b) - 0.3f);
}

__global__ void sample_lod(cudaTextureObject_t t, float *out, int n)
{
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n)
                out[i] = tex2DLod<float>(t, (i % 16) / 16.0f + 0.01f, (i / 16 % 16) / 16.0f + 0.02f, (i % 7) * 0.5f);
}

__global__ void surf_write(cudaSurfaceObject_t s, int w, int h, float k)
{
        int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
        if (x < w && y < h)
                surf2Dwrite(k * x + y * 0.5f, s, x * (int)sizeof(float), y);
}

static float *host_pattern(size_t n, unsigned seed)
{
        float *v = (float *)malloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++)
                v[i] = (float)((i * 2654435761u + seed) % 1000) / 100.0f;
        return v;
}

static cudaTextureObject_t texture(cudaArray_t a, cudaTextureFilterMode f, int norm)
{
        cudaResourceDesc r = {};
        r.resType = cudaResourceTypeArray;
        r.res.array.array = a;
        cudaTextureDesc t = {};
        t.addressMode[0] = t.addressMode[1] = t.addressMode[2] = cudaAddressModeClamp;
        t.filterMode = f;
        t.readMode = cudaReadModeElementType;
        t.normalizedCoords = norm;
        cudaTextureObject_t o;
        RT_CHECK(cudaCreateTextureObject(&o, &r, &t, NULL));
        return o;
}

struct all {
        cudaArray_t a2, a3, al, ac, surf_arr, a1l; /* a1l: 1D layered */
        cudaMipmappedArray_t mip;
        cudaTextureObject_t t2p, t2l, t3, tl, tc, tm, t1l;
        cudaSurfaceObject_t so;
        float *dout;
};

static void print_samples(const char *what, float *dout)
{
        static float h[NS];
        RT_CHECK(cudaDeviceSynchronize());
        RT_CHECK(cudaMemcpy(h, dout, sizeof(h), cudaMemcpyDeviceToHost));
        printf("%s: %.6f (first %.6f, last %.6f)\n", what, model_sum(h, NS), h[0], h[NS - 1]);
}

static void sample_all(struct all *s, const char *when)
{
        char what[96];
        sample2d<<<1, NS>>>(s->t2p, s->dout, NS, 3.0f, 2.9f, 0);
        snprintf(what, sizeof(what), "%s 2D point", when);
        print_samples(what, s->dout);
        sample2d<<<1, NS>>>(s->t2l, s->dout, NS, 3.1f, 2.7f, 1);
        snprintf(what, sizeof(what), "%s 2D linear normalized", when);
        print_samples(what, s->dout);
        sample3d<<<1, NS>>>(s->t3, s->dout, NS);
        snprintf(what, sizeof(what), "%s 3D linear", when);
        print_samples(what, s->dout);
        sample_layered<<<1, NS>>>(s->tl, s->dout, NS);
        snprintf(what, sizeof(what), "%s layered linear", when);
        print_samples(what, s->dout);
        sample_layered1d<<<1, NS>>>(s->t1l, s->dout, NS);
        snprintf(what, sizeof(what), "%s 1D layered linear", when);
        print_samples(what, s->dout);
        sample_cube<<<1, NS>>>(s->tc, s->dout, NS);
        snprintf(what, sizeof(what), "%s cubemap linear", when);
        print_samples(what, s->dout);
        sample_lod<<<1, NS>>>(s->tm, s->dout, NS);
        snprintf(what, sizeof(what), "%s mipmapped lod", when);
        print_samples(what, s->dout);
}

static void surface_round(struct all *s, float k, const char *when)
{
        static float h[W2 * H2];
        surf_write<<<dim3(1, H2), W2>>>(s->so, W2, H2, k);
        RT_CHECK(cudaDeviceSynchronize());
        RT_CHECK(cudaMemcpy2DFromArray(h, W2 * sizeof(float), s->surf_arr, 0, 0, W2 * sizeof(float), H2,
                                       cudaMemcpyDeviceToHost));
        printf("%s surface write: %.6f\n", when, model_sum(h, W2 * H2));
}

static void build(struct all *s)
{
        cudaChannelFormatDesc f = cudaCreateChannelDesc<float>();
        float *p2 = host_pattern(W2 * H2, 1);
        RT_CHECK(cudaMallocArray(&s->a2, &f, W2, H2));
        RT_CHECK(cudaMemcpy2DToArray(s->a2, 0, 0, p2, W2 * sizeof(float), W2 * sizeof(float), H2,
                                     cudaMemcpyHostToDevice));
        float *p3 = host_pattern(W3 * H3 * D3, 2);
        RT_CHECK(cudaMalloc3DArray(&s->a3, &f, make_cudaExtent(W3, H3, D3)));
        cudaMemcpy3DParms c = {};
        c.srcPtr = make_cudaPitchedPtr(p3, W3 * sizeof(float), W3, H3);
        c.dstArray = s->a3;
        c.extent = make_cudaExtent(W3, H3, D3);
        c.kind = cudaMemcpyHostToDevice;
        RT_CHECK(cudaMemcpy3D(&c));
        float *pl = host_pattern(WL * WL * LAYERS, 3);
        RT_CHECK(cudaMalloc3DArray(&s->al, &f, make_cudaExtent(WL, WL, LAYERS), cudaArrayLayered));
        c.srcPtr = make_cudaPitchedPtr(pl, WL * sizeof(float), WL, WL);
        c.dstArray = s->al;
        c.extent = make_cudaExtent(WL, WL, LAYERS);
        RT_CHECK(cudaMemcpy3D(&c));
        /* 1D layered: height 0, the layers are the depth */
        float *p1 = host_pattern(64 * LAYERS, 5);
        RT_CHECK(cudaMalloc3DArray(&s->a1l, &f, make_cudaExtent(64, 0, LAYERS), cudaArrayLayered));
        c.srcPtr = make_cudaPitchedPtr(p1, 64 * sizeof(float), 64, 1);
        c.dstArray = s->a1l;
        c.extent = make_cudaExtent(64, 1, LAYERS);
        RT_CHECK(cudaMemcpy3D(&c));
        free(p1);
        float *pc = host_pattern(WC * WC * 6, 4);
        RT_CHECK(cudaMalloc3DArray(&s->ac, &f, make_cudaExtent(WC, WC, 6), cudaArrayCubemap));
        c.srcPtr = make_cudaPitchedPtr(pc, WC * sizeof(float), WC, WC);
        c.dstArray = s->ac;
        c.extent = make_cudaExtent(WC, WC, 6);
        RT_CHECK(cudaMemcpy3D(&c));
        RT_CHECK(cudaMallocMipmappedArray(&s->mip, &f, make_cudaExtent(WM, WM, 0), LEVELS));
        for (unsigned l = 0; l < LEVELS; l++) {
                cudaArray_t lv;
                RT_CHECK(cudaGetMipmappedArrayLevel(&lv, s->mip, l));
                size_t w = WM >> l;
                float *pm = host_pattern(w * w, 10 + l);
                RT_CHECK(cudaMemcpy2DToArray(lv, 0, 0, pm, w * sizeof(float), w * sizeof(float), w,
                                             cudaMemcpyHostToDevice));
                free(pm);
        }
        RT_CHECK(cudaMallocArray(&s->surf_arr, &f, W2, H2, cudaArraySurfaceLoadStore));
        free(p2), free(p3), free(pl), free(pc);

        s->t2p = texture(s->a2, cudaFilterModePoint, 0);
        s->t2l = texture(s->a2, cudaFilterModeLinear, 1);
        s->t3 = texture(s->a3, cudaFilterModeLinear, 0);
        s->tl = texture(s->al, cudaFilterModeLinear, 0);
        s->tc = texture(s->ac, cudaFilterModeLinear, 1);
        s->t1l = texture(s->a1l, cudaFilterModeLinear, 0);
        cudaResourceDesc r = {};
        r.resType = cudaResourceTypeMipmappedArray;
        r.res.mipmap.mipmap = s->mip;
        cudaTextureDesc t = {};
        t.addressMode[0] = t.addressMode[1] = cudaAddressModeWrap;
        t.filterMode = cudaFilterModeLinear;
        t.mipmapFilterMode = cudaFilterModeLinear;
        t.normalizedCoords = 1;
        t.maxMipmapLevelClamp = LEVELS - 1;
        RT_CHECK(cudaCreateTextureObject(&s->tm, &r, &t, NULL));
        cudaResourceDesc rs = {};
        rs.resType = cudaResourceTypeArray;
        rs.res.array.array = s->surf_arr;
        RT_CHECK(cudaCreateSurfaceObject(&s->so, &rs));
        RT_CHECK(cudaMalloc(&s->dout, NS * sizeof(float)));
        /* The values are small ids the driver counts up per process; lupine's
         * worker starts further up (the H200 gave 1.. locally, 5.. through
         * lupine), so their order and spacing are printed, which must agree,
         * and the first value to stderr. */
        unsigned long long b = s->t2p;
        printf("object values, from the first: tex +%llu +%llu +%llu +%llu +%llu +%llu +%llu surf +%llu\n", s->t2p - b,
               s->t2l - b, s->t3 - b, s->tl - b, s->tc - b, s->tm - b, s->t1l - b, s->so - b);
        fprintf(stderr, "first texture object value: %llu\n", b);
}

/* array -> array and array -> host after the restart: the contents stayed */
static void readback(struct all *s, const char *when)
{
        static float h[W3 * H3 * D3];
        cudaMemcpy3DParms c = {};
        c.srcArray = s->a3;
        c.dstPtr = make_cudaPitchedPtr(h, W3 * sizeof(float), W3, H3);
        c.extent = make_cudaExtent(W3, H3, D3);
        c.kind = cudaMemcpyDeviceToHost;
        RT_CHECK(cudaMemcpy3D(&c));
        printf("%s 3D array contents: %.6f\n", when, model_sum(h, W3 * H3 * D3));
        c.srcArray = s->a1l; /* the 1D layered array, layer by layer as z */
        c.dstPtr = make_cudaPitchedPtr(h, 64 * sizeof(float), 64, 1);
        c.extent = make_cudaExtent(64, 1, LAYERS);
        RT_CHECK(cudaMemcpy3D(&c));
        printf("%s 1D layered contents: %.6f\n", when, model_sum(h, 64 * LAYERS));
        cudaChannelFormatDesc f = cudaCreateChannelDesc<float>();
        cudaArray_t copy;
        RT_CHECK(cudaMallocArray(&copy, &f, W2, H2));
        RT_CHECK(cudaMemcpy2DArrayToArray(copy, 0, 0, s->a2, 0, 0, W2 * sizeof(float), H2));
        RT_CHECK(cudaMemcpy2DFromArray(h, W2 * sizeof(float), copy, 0, 0, W2 * sizeof(float), H2,
                                       cudaMemcpyDeviceToHost));
        printf("%s 2D array via array copy: %.6f\n", when, model_sum(h, W2 * H2));
        RT_CHECK(cudaFreeArray(copy));
}

/* The driver's answers, which lupine must give too. */
static void bad_input(void)
{
        CUarray a;
        CUDA_ARRAY3D_DESCRIPTOR d = {};
        d.Width = 16, d.Height = 16, d.Format = CU_AD_FORMAT_FLOAT, d.NumChannels = 1;
        CUDA_ARRAY3D_DESCRIPTOR x = d;
        CUresult r0;
        x.Width = 1ull << 40;
        printf("absurd width: %d\n", (int)cuArray3DCreate(&a, &x));
        x = d, x.Width = 1 << 20, x.Height = 1 << 20;
        printf("absurd 2D: %d\n", (int)cuArray3DCreate(&a, &x));
        x = d, x.Format = (CUarray_format)0x77;
        printf("unknown format: %d\n", (int)cuArray3DCreate(&a, &x));
        x = d, x.NumChannels = 3;
        printf("3 channels: %d\n", (int)cuArray3DCreate(&a, &x));
        x = d, x.Flags = 0x10000;
        printf("unknown flag: %d\n", (int)cuArray3DCreate(&a, &x));
        x = d, x.Width = 16, x.Height = 16, x.Depth = 20000, x.Format = CU_AD_FORMAT_UNSIGNED_INT8;
        r0 = cuArray3DCreate(&a, &x);
        printf("3D within the alternate limits (16 x 16 x 20000): %d\n", (int)r0);
        if (r0 == CUDA_SUCCESS)
                CU_CHECK(cuArrayDestroy(a));
        x = d, x.Width = 9000, x.Height = 16, x.Depth = 20000;
        printf("3D past both limits (9000 x 16 x 20000): %d\n", (int)cuArray3DCreate(&a, &x));
        x = d, x.Flags = CUDA_ARRAY3D_CUBEMAP, x.Depth = 5;
        printf("cubemap of 5 faces: %d\n", (int)cuArray3DCreate(&a, &x));
        x = d, x.Depth = 4;
        CU_CHECK(cuArray3DCreate(&a, &x));
        CUDA_ARRAY_DESCRIPTOR d2;
        CUresult r = cuArrayGetDescriptor(&d2, a);
        printf("2D descriptor of a 3D array: %d (%zu x %zu)\n", (int)r, r ? (size_t)0 : d2.Width,
               r ? (size_t)0 : d2.Height);
        CUarray plane;
        printf("plane of a float array: %d\n", (int)cuArrayGetPlane(&plane, a, 0));
        CUDA_ARRAY_SPARSE_PROPERTIES sp;
        printf("sparse properties of a dense array: %d\n", (int)cuArrayGetSparseProperties(&sp, a));
        CUdevice dev;
        CU_CHECK(cuCtxGetDevice(&dev));
        CUDA_ARRAY_MEMORY_REQUIREMENTS mr;
        printf("memory requirements of a dense array: %d\n", (int)cuArrayGetMemoryRequirements(&mr, a, dev));
        static float h[64 * 64];
        CUDA_MEMCPY3D c = {};
        c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = h, c.srcPitch = 64, c.srcHeight = 16;
        c.dstMemoryType = CU_MEMORYTYPE_ARRAY, c.dstArray = a, c.WidthInBytes = 64, c.Height = 16, c.Depth = 5;
        printf("copy one slice past the array: %d\n", (int)cuMemcpy3D(&c));
        c.Depth = 4, c.dstXInBytes = 4;
        printf("copy one element past a row: %d\n", (int)cuMemcpy3D(&c));
        c.dstXInBytes = 0;
        printf("copy inside: %d\n", (int)cuMemcpy3D(&c));
        CUDA_RESOURCE_DESC rd = {};
        rd.resType = CU_RESOURCE_TYPE_ARRAY, rd.res.array.hArray = a;
        CUDA_TEXTURE_DESC td = {};
        CUtexObject t;
        CU_CHECK(cuTexObjectCreate(&t, &rd, &td, NULL));
        CUDA_RESOURCE_VIEW_DESC vd;
        printf("view of an object made without one: %d\n", (int)cuTexObjectGetResourceViewDesc(&vd, t));
        CU_CHECK(cuTexObjectDestroy(t));
        CU_CHECK(cuArrayDestroy(a));
        printf("destroy twice: %d\n", (int)cuArrayDestroy(a));
        CUmipmappedArray m;
        CU_CHECK(cuMipmappedArrayCreate(&m, &d, 3));
        CUarray lv;
        printf("level past the last: %d\n", (int)cuMipmappedArrayGetLevel(&lv, m, 3));
        CU_CHECK(cuMipmappedArrayGetLevel(&lv, m, 1));
        CUarray again;
        CU_CHECK(cuMipmappedArrayGetLevel(&again, m, 1));
        printf("the same level twice is the same array: %d\n", lv == again);
        CU_CHECK(cuArray3DGetDescriptor(&x, lv));
        printf("level 1 descriptor: %zu x %zu x %zu\n", (size_t)x.Width, (size_t)x.Height, (size_t)x.Depth);
        printf("zero levels: %d\n", (int)cuMipmappedArrayCreate(&m, &d, 0));
        /* Not asked: a texture on a destroyed array and destroying a level
         * on its own crash the H200's driver (a first run ended there with
         * SIGSEGV); lupine answers them with errors (e2e_arrays). */
}

int main(int argc, char **argv)
{
        struct all s;
        RT_CHECK(cudaSetDevice(0));
        RT_CHECK(cudaFree(0));
        build(&s);
        sample_all(&s, "before");
        surface_round(&s, 1.5f, "before");
        readback(&s, "before");
        model_hold(argc, argv, "arrays, mipmapped array, textures and a surface with data");
        sample_all(&s, "after");
        surface_round(&s, -0.75f, "after");
        readback(&s, "after");
        RT_CHECK(cudaDestroyTextureObject(s.t2p));
        RT_CHECK(cudaDestroyTextureObject(s.t2l));
        RT_CHECK(cudaDestroyTextureObject(s.t3));
        RT_CHECK(cudaDestroyTextureObject(s.tl));
        RT_CHECK(cudaDestroyTextureObject(s.tc));
        RT_CHECK(cudaDestroyTextureObject(s.tm));
        RT_CHECK(cudaDestroyTextureObject(s.t1l));
        RT_CHECK(cudaDestroySurfaceObject(s.so));
        RT_CHECK(cudaFreeArray(s.a2));
        RT_CHECK(cudaFreeArray(s.a3));
        RT_CHECK(cudaFreeArray(s.al));
        RT_CHECK(cudaFreeArray(s.ac));
        RT_CHECK(cudaFreeArray(s.surf_arr));
        RT_CHECK(cudaFreeArray(s.a1l));
        RT_CHECK(cudaFreeMipmappedArray(s.mip));
        RT_CHECK(cudaFree(s.dout));
        bad_input();
        printf("done\n");
        return 0;
}
