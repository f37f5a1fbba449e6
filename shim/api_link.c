/* SPDX-License-Identifier: MIT */
/*
 * JIT linking (cuLink*): the link state lives here, in the client.
 *
 * Every input is copied at cuLinkAddData (files are read at cuLinkAddFile)
 * and kept until cuLinkDestroy. Each one is also sent on at once
 * (lupJitAdd), so that the worker's driver compiles it when the driver
 * would, with its errors and logs then; the worker keeps the driver's
 * link state under this state's id. A restore loses that state (it is
 * not checkpointed): the worker answers CUDA_ERROR_NOT_FOUND, and the
 * shim sends every input again in one request, which rebuilds it. So a
 * drain or an upgrade between any two of these calls loses nothing.
 *
 * cuLinkComplete links there and fetches the cubin, which this state then
 * owns, as the driver's does, until cuLinkDestroy. A module loaded from it
 * is an ordinary module: its image is checkpointed like any other.
 *
 * The logs and the wall time accumulate over the state's life, as the
 * driver's do; after each call they are copied into the buffers the
 * caller named at cuLinkCreate, and the size options rewritten.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.h"
#include "jit.h"
#include "log.h"
#include "shim_gen.h"
#include "u64map.h"

#define EXPORT __attribute__((visibility("default")))

/* cuda.h maps these names to their _v2; the unversioned symbols (CUDA
 * 5.5's) take the same arguments and are exported below for programs that
 * look them up by name. */
#undef cuLinkCreate
#undef cuLinkAddData
#undef cuLinkAddFile
CUresult CUDAAPI cuLinkCreate(unsigned int numOptions, CUjit_option *options, void **optionValues,
                              CUlinkState *stateOut);
CUresult CUDAAPI cuLinkAddData(CUlinkState state, CUjitInputType type, void *data, size_t size, const char *name,
                               unsigned int numOptions, CUjit_option *options, void **optionValues);
CUresult CUDAAPI cuLinkAddFile(CUlinkState state, CUjitInputType type, const char *path, unsigned int numOptions,
                               CUjit_option *options, void **optionValues);

#define LUPC_MAX_LINKS 4096u /* live link states per process */

struct link_input {
        struct lup_jit_input in; /* name and data: copies owned here */
};

struct link {
        pthread_mutex_t lock; /* one call at a time on a state */
        uint64_t id;          /* the worker's name for it */
        struct lupc_jit_opts opts;
        struct lup_jit_opt wire[LUP_JIT_MAX_OPTS];
        uint32_t n_wire;
        struct link_input *inputs;
        uint32_t n_inputs, cap_inputs;
        uint32_t n_sent; /* inputs the worker's state holds, as far as we know */
        bool completed;  /* cuLinkComplete was called (whatever it answered) */
        uint8_t *cubin;  /* after cuLinkComplete */
        uint64_t cubin_size;
};

static pthread_mutex_t links_lock = PTHREAD_MUTEX_INITIALIZER;
static struct lup_u64map links = { .limit = LUPC_MAX_LINKS };

/* The live state behind h, locked; NULL if h is not one. */
static struct link *link_get(CUlinkState h)
{
        uint64_t v;
        pthread_mutex_lock(&links_lock);
        struct link *l = h && lup_u64map_get(&links, (uint64_t)(uintptr_t)h, &v) ? (struct link *)(uintptr_t)v : NULL;
        if (l)
                pthread_mutex_lock(&l->lock);
        pthread_mutex_unlock(&links_lock);
        return l;
}

static void link_free(struct link *l)
{
        if (!l)
                return;
        for (uint32_t i = 0; i < l->n_inputs; i++) {
                free((void *)l->inputs[i].in.name);
                free((void *)l->inputs[i].in.data);
        }
        free(l->inputs);
        free(l->cubin);
        pthread_mutex_destroy(&l->lock);
        free(l);
}

EXPORT CUresult CUDAAPI cuLinkCreate_v2(unsigned int numOptions, CUjit_option *options, void **optionValues,
                                        CUlinkState *stateOut)
{
        if (!stateOut)
                return CUDA_ERROR_INVALID_VALUE;
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (lupc_ctx_current() == 0)
                return CUDA_ERROR_INVALID_CONTEXT;
        struct link *l = calloc(1, sizeof(*l));
        if (!l)
                return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r = lupc_jit_opts(numOptions, options, optionValues, false, &l->opts, l->wire, &l->n_wire);
        if (r != CUDA_SUCCESS) {
                free(l);
                return r;
        }
        pthread_mutex_init(&l->lock, NULL);
        l->id = lupc_mint_handle();
        pthread_mutex_lock(&links_lock);
        int e = lup_u64map_put(&links, (uint64_t)(uintptr_t)l, (uint64_t)(uintptr_t)l);
        pthread_mutex_unlock(&links_lock);
        if (e < 0) {
                link_free(l);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        *stateOut = (CUlinkState)l;
        return CUDA_SUCCESS;
}

/* Sends inputs [first, n_inputs) with the state's options (lupJitAdd). */
static CUresult send_inputs(struct link *l, uint32_t first)
{
        if (first == 0 && l->n_sent > 0 && lup_trace_level() >= 1)
                lup_tracef("link state %llx: the server does not hold it (a restore): sending its %u inputs again",
                           (unsigned long long)l->id, l->n_inputs);
        struct lup_jit_req req = { .n_opts = l->n_wire, .first = first, .n_inputs = l->n_inputs - first };
        memcpy(req.opts, l->wire, sizeof(req.opts[0]) * l->n_wire);
        struct lup_jit_input *ins = calloc(req.n_inputs ? req.n_inputs : 1, sizeof(*ins));
        if (!ins)
                return CUDA_ERROR_OUT_OF_MEMORY;
        for (uint32_t i = 0; i < req.n_inputs; i++)
                ins[i] = l->inputs[first + i].in;
        req.inputs = ins;
        uint64_t blob;
        CUresult r = lupc_jit_upload(&req, &blob);
        free(ins);
        if (r != CUDA_SUCCESS)
                return r;
        return lupc_send_lupJitAdd(l->id, blob);
}

/* The newest input, sent; after a restore (the worker lost the state, or
 * the request's upload), everything again. On failure the input is
 * forgotten (the driver's state does not hold it either). */
static CUresult add_last(struct link *l)
{
        CUresult r = send_inputs(l, l->n_sent);
        if (r == CUDA_ERROR_NOT_FOUND)
                r = send_inputs(l, 0);
        if (r == CUDA_SUCCESS) {
                l->n_sent = l->n_inputs;
        } else {
                struct link_input *last = &l->inputs[--l->n_inputs];
                free((void *)last->in.name);
                free((void *)last->in.data);
        }
        CUresult a = lupc_jit_answer(l->id, &l->opts);
        if (a != CUDA_SUCCESS && a != CUDA_ERROR_NOT_FOUND && r == CUDA_SUCCESS)
                r = a;
        return r;
}

/* Takes a copy of the input (data: size bytes, its own) into l. */
static CUresult add_input(struct link *l, CUjitInputType type, uint8_t *data, size_t size, const char *name, unsigned n,
                          CUjit_option *options, void **values)
{
        struct link_input in = { .in = { .type = (uint32_t)type, .data = data, .size = size } };
        struct lupc_jit_opts ignored;
        /* after cuLinkComplete, even one that failed: as the H200's driver */
        CUresult r = l->completed ? CUDA_ERROR_INVALID_VALUE
                                  : lupc_jit_opts(n, options, values, true, &ignored, in.in.opts, &in.in.n_opts);
        if (r != CUDA_SUCCESS)
                goto out_free;
        if (name) {
                size_t k = strnlen(name, LUP_JIT_MAX_NAME + 1);
                if (k > LUP_JIT_MAX_NAME) {
                        r = CUDA_ERROR_INVALID_VALUE;
                        goto out_free;
                }
                if (!(in.in.name = strndup(name, k))) {
                        r = CUDA_ERROR_OUT_OF_MEMORY;
                        goto out_free;
                }
                in.in.name_len = k;
        }
        if (l->n_inputs >= LUP_JIT_MAX_INPUTS) {
                r = CUDA_ERROR_OUT_OF_MEMORY;
                goto out_free;
        }
        if (l->n_inputs == l->cap_inputs) {
                uint32_t cap = l->cap_inputs ? l->cap_inputs * 2 : 8;
                struct link_input *g = realloc(l->inputs, cap * sizeof(*g));
                if (!g) {
                        r = CUDA_ERROR_OUT_OF_MEMORY;
                        goto out_free;
                }
                l->inputs = g;
                l->cap_inputs = cap;
        }
        l->inputs[l->n_inputs++] = in;
        return add_last(l);

out_free:
        free((void *)in.in.name);
        free(data);
        return r;
}

EXPORT CUresult CUDAAPI cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data, size_t size,
                                         const char *name, unsigned int numOptions, CUjit_option *options,
                                         void **optionValues)
{
        if (!data || size == 0 || (unsigned)type >= LUP_JIT_NUM_INPUT_TYPES || size > LUP_MAX_BLOB)
                return state ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
        struct link *l = link_get(state);
        if (!l)
                return CUDA_ERROR_INVALID_HANDLE;
        CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
        uint8_t *copy = malloc(size);
        if (copy) {
                memcpy(copy, data, size);
                r = add_input(l, type, copy, size, name, numOptions, options, optionValues);
        }
        pthread_mutex_unlock(&l->lock);
        return r;
}

/* A whole file, as cuLinkAddFile reads it. */
static CUresult slurp(const char *path, uint8_t **ret, size_t *ret_size)
{
        struct stat st;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return CUDA_ERROR_FILE_NOT_FOUND;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 || (uint64_t)st.st_size > LUP_MAX_BLOB) {
                close(fd);
                return CUDA_ERROR_INVALID_VALUE;
        }
        uint8_t *buf = malloc((size_t)st.st_size);
        size_t got = 0;
        while (buf && got < (size_t)st.st_size) {
                ssize_t k = read(fd, buf + got, (size_t)st.st_size - got);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                got += (size_t)k;
        }
        close(fd);
        if (!buf)
                return CUDA_ERROR_OUT_OF_MEMORY;
        if (got != (size_t)st.st_size) {
                free(buf);
                return CUDA_ERROR_FILE_NOT_FOUND;
        }
        *ret = buf;
        *ret_size = got;
        return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char *path,
                                         unsigned int numOptions, CUjit_option *options, void **optionValues)
{
        if (!path || (unsigned)type >= LUP_JIT_NUM_INPUT_TYPES)
                return state ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
        struct link *l = link_get(state);
        if (!l)
                return CUDA_ERROR_INVALID_HANDLE;
        uint8_t *data;
        size_t size;
        CUresult r = slurp(path, &data, &size);
        if (r == CUDA_SUCCESS)
                r = add_input(l, type, data, size, path, numOptions, options, optionValues);
        pthread_mutex_unlock(&l->lock);
        return r;
}

/* lupJitComplete, then the cubin; a restore in between makes the worker
 * forget the state: then everything is sent again and linked again. */
static CUresult complete(struct link *l)
{
        if (l->completed)
                return CUDA_ERROR_INVALID_HANDLE; /* completed already: the H200's driver answers so */
        l->completed = true;
        CUresult r = CUDA_ERROR_NOT_FOUND;
        for (int attempt = 0; attempt < 3 && r == CUDA_ERROR_NOT_FOUND; attempt++) {
                if (attempt > 0 && (r = send_inputs(l, 0)) != CUDA_SUCCESS)
                        break;
                l->n_sent = l->n_inputs;
                uint64_t size = 0;
                r = lupc_send_lupJitComplete(&size, l->id, l->n_inputs);
                if (r != CUDA_SUCCESS)
                        continue;
                if (size == 0 || size > LUP_MAX_BLOB)
                        return lupc_protocol_error("lupJitComplete");
                uint8_t *cubin = malloc((size_t)size);
                if (!cubin)
                        return CUDA_ERROR_OUT_OF_MEMORY;
                if ((r = lupc_jit_read(l->id, LUP_JIT_READ_CUBIN, cubin, size)) != CUDA_SUCCESS) {
                        free(cubin);
                        continue;
                }
                free(l->cubin);
                l->cubin = cubin;
                l->cubin_size = size;
        }
        return r;
}

EXPORT CUresult CUDAAPI cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
        if (!cubinOut || !sizeOut)
                return state ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
        struct link *l = link_get(state);
        if (!l)
                return CUDA_ERROR_INVALID_HANDLE;
        CUresult r = complete(l);
        CUresult a = lupc_jit_answer(l->id, &l->opts);
        if (r == CUDA_SUCCESS && a != CUDA_SUCCESS && a != CUDA_ERROR_NOT_FOUND)
                r = a;
        if (r == CUDA_SUCCESS) {
                *cubinOut = l->cubin;
                *sizeOut = (size_t)l->cubin_size;
        }
        pthread_mutex_unlock(&l->lock);
        return r;
}

EXPORT CUresult CUDAAPI cuLinkDestroy(CUlinkState state)
{
        struct link *l = NULL;
        uint64_t v;
        pthread_mutex_lock(&links_lock);
        if (state && lup_u64map_del(&links, (uint64_t)(uintptr_t)state, &v))
                l = (struct link *)(uintptr_t)v;
        pthread_mutex_unlock(&links_lock);
        if (!l)
                return CUDA_ERROR_INVALID_HANDLE;
        /* a caller still inside a call on it holds the lock: wait for it */
        pthread_mutex_lock(&l->lock);
        pthread_mutex_unlock(&l->lock);
        CUresult r = lupc_send_lupJitDrop(l->id);
        link_free(l);
        return r == CUDA_ERROR_DEVICE_UNAVAILABLE ? r : CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuLinkCreate(unsigned int numOptions, CUjit_option *options, void **optionValues,
                                     CUlinkState *stateOut)
{
        return cuLinkCreate_v2(numOptions, options, optionValues, stateOut);
}

EXPORT CUresult CUDAAPI cuLinkAddData(CUlinkState state, CUjitInputType type, void *data, size_t size, const char *name,
                                      unsigned int numOptions, CUjit_option *options, void **optionValues)
{
        return cuLinkAddData_v2(state, type, data, size, name, numOptions, options, optionValues);
}

EXPORT CUresult CUDAAPI cuLinkAddFile(CUlinkState state, CUjitInputType type, const char *path, unsigned int numOptions,
                                      CUjit_option *options, void **optionValues)
{
        return cuLinkAddFile_v2(state, type, path, numOptions, options, optionValues);
}
