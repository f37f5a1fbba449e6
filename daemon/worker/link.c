/* SPDX-License-Identifier: MIT */
/*
 * JIT linking and loads with JIT options (spec ops 630-635; shim/api_link.c
 * says who keeps what).
 *
 * An entry (struct jit_ent) under the client's id holds the driver's link
 * state while the client's lives, with the option arrays the driver writes
 * its answers into and the log buffers given to it in place of the
 * client's, which live in another process. A load with options leaves an
 * entry too, under its request's blob id, holding only the answers, until
 * the client has read them (lupJitRead) and dropped them (lupJitDrop).
 *
 * Entries are not checkpointed: after a restore every id is unknown, the
 * calls answer CUDA_ERROR_NOT_FOUND, and the shim sends a link's inputs
 * again. Modules and libraries loaded here are ordinary ones: their
 * checkpointed image is what the driver loaded, which for PTX with JIT
 * options is the cubin this file's link made of it (docs/jit.md), so that
 * a restore loads the same code without the options.
 *
 * Everything from the wire is checked before the driver sees it: the
 * request by lup_jit_decode(), every option by class (the driver gets no
 * pointer but the worker's own), log sizes against LUP_JIT_MAX_LOG.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"
#include "jit_codec.h"
#include "log.h"
#include "worker/session.h"
#include "worker_gen.h"

#define LUPW_MAX_JIT 1024u /* link states and unread load answers per session */
#define SCRATCH_LOG  4096u /* an input's own log buffers (the driver refuses them anyway) */

struct jit_ent {
        uint64_t id;
        CUlinkState st; /* a live link, or NULL */
        uint32_t n_inputs;
        unsigned n_opts;
        CUjit_option opts[LUP_JIT_MAX_OPTS];
        void *vals[LUP_JIT_MAX_OPTS]; /* the driver writes its answers here */
        char *info, *error;           /* the logs the driver writes */
        unsigned info_cap, error_cap;
        int at_info, at_error, at_wall, at_threads; /* their options' indexes, or -1 */
        const void *cubin;                          /* after cuLinkComplete: the driver's, while st lives */
        size_t cubin_size;
};

static struct lup_u64map *jit_map(struct lupw_session *s)
{
        if (!s->obj.jit.limit)
                lup_u64map_init(&s->obj.jit, LUPW_MAX_JIT);
        return &s->obj.jit;
}

static struct jit_ent *ent_get(struct lupw_session *s, uint64_t id)
{
        uint64_t v;
        return lup_u64map_get(jit_map(s), id, &v) ? (struct jit_ent *)(uintptr_t)v : NULL;
}

static void ent_free(struct lupw_session *s, struct jit_ent *e)
{
        if (!e)
                return;
        if (e->st)
                (void)s->be.fn.cuLinkDestroy(e->st);
        free(e->info);
        free(e->error);
        free(e);
}

/* At the session's end the driver may be gone already (loop.c closes it
 * first): its link states end with the process. */
static void drop_one(uint64_t key, uint64_t val, void *ud)
{
        struct jit_ent *e = (struct jit_ent *)(uintptr_t)val;
        (void)key;
        e->st = NULL;
        ent_free(ud, e);
}

void lupw_jit_free(struct lupw_session *s)
{
        if (!s->obj.jit.limit)
                return;
        lup_u64map_each(&s->obj.jit, drop_one, s);
        lup_u64map_free(&s->obj.jit);
}

static void ent_drop(struct lupw_session *s, uint64_t id)
{
        uint64_t v;
        if (lup_u64map_del(jit_map(s), id, &v))
                ent_free(s, (struct jit_ent *)(uintptr_t)v);
}

/* The size a log option asks for, capped at LUP_JIT_MAX_LOG. */
static unsigned log_cap(const struct lup_jit_opt *o, uint32_t n, uint32_t size_opt, unsigned max)
{
        for (uint32_t i = 0; i < n; i++)
                if (o[i].option == size_opt)
                        return o[i].value < max ? (unsigned)o[i].value : max;
        return 0;
}

/* A new entry with the request's options as the driver will get them. */
static CUresult ent_new(struct lupw_session *s, uint64_t id, const struct lup_jit_req *q, struct jit_ent **ret)
{
        struct jit_ent *e = calloc(1, sizeof(*e));
        if (!e)
                return CUDA_ERROR_OUT_OF_MEMORY;
        e->id = id;
        e->at_info = e->at_error = e->at_wall = e->at_threads = -1;
        e->info_cap = log_cap(q->opts, q->n_opts, LUP_JIT_INFO_LOG_BUFFER_SIZE_BYTES, LUP_JIT_MAX_LOG);
        e->error_cap = log_cap(q->opts, q->n_opts, LUP_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, LUP_JIT_MAX_LOG);
        e->info = calloc(1, e->info_cap + 1);
        e->error = calloc(1, e->error_cap + 1);
        if (!e->info || !e->error) {
                ent_free(s, e);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        for (uint32_t i = 0; i < q->n_opts; i++) {
                uint32_t o = q->opts[i].option;
                void *v = (void *)(uintptr_t)q->opts[i].value;
                switch (o) {
                case LUP_JIT_INFO_LOG_BUFFER:
                        v = e->info;
                        break;
                case LUP_JIT_ERROR_LOG_BUFFER:
                        v = e->error;
                        break;
                case LUP_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
                        v = (void *)(uintptr_t)e->info_cap;
                        e->at_info = (int)i;
                        break;
                case LUP_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
                        v = (void *)(uintptr_t)e->error_cap;
                        e->at_error = (int)i;
                        break;
                case LUP_JIT_WALL_TIME:
                        v = NULL;
                        e->at_wall = (int)i;
                        break;
                case LUP_JIT_THREADS_PER_BLOCK:
                        e->at_threads = (int)i;
                        break;
                default:
                        break;
                }
                e->opts[i] = (CUjit_option)o;
                e->vals[i] = v;
        }
        e->n_opts = q->n_opts;
        if (lup_u64map_put(jit_map(s), id, (uint64_t)(uintptr_t)e) < 0) {
                ent_free(s, e);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        *ret = e;
        return CUDA_SUCCESS;
}

/* Decodes the request in blob id into *q (its inputs: the caller frees);
 * the blob stays the caller's to release. A blob this worker never got
 * (a restore came between its upload and this call) is NOT_FOUND: the
 * shim uploads it again. */
static CUresult take_request(struct lupw_session *s, uint64_t blob, struct lup_jit_req *q)
{
        const void *p;
        size_t n;
        const char *why = NULL;
        if (lupw_blob_take(s, blob, &p, &n) < 0)
                return CUDA_ERROR_NOT_FOUND;
        if (n == 0)
                return CUDA_ERROR_OUT_OF_MEMORY; /* an upload over its cap */
        int e = lup_jit_decode(p, n, q, &why);
        if (e == -ENOMEM)
                return CUDA_ERROR_OUT_OF_MEMORY;
        if (e < 0) {
                lup_warn("session %s: %s", s->name, why);
                return CUDA_ERROR_INVALID_VALUE;
        }
        return CUDA_SUCCESS;
}

/* cuLinkAddData for one input, with its own options; its log buffers
 * (which the driver refuses for an input) are scratch. */
static CUresult add_one(struct lupw_session *s, struct jit_ent *e, const struct lup_jit_input *in)
{
        CUjit_option opts[LUP_JIT_MAX_OPTS];
        void *vals[LUP_JIT_MAX_OPTS];
        static char scratch[2][SCRATCH_LOG];
        char name[LUP_JIT_MAX_NAME + 1];

        for (uint32_t i = 0; i < in->n_opts; i++) {
                uint32_t o = in->opts[i].option;
                uint64_t v = in->opts[i].value;
                opts[i] = (CUjit_option)o;
                vals[i] = (void *)(uintptr_t)v;
                if (o == LUP_JIT_INFO_LOG_BUFFER || o == LUP_JIT_ERROR_LOG_BUFFER)
                        vals[i] = scratch[o == LUP_JIT_ERROR_LOG_BUFFER];
                else if (o == LUP_JIT_INFO_LOG_BUFFER_SIZE_BYTES || o == LUP_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
                        vals[i] = (void *)(uintptr_t)(v < SCRATCH_LOG ? v : SCRATCH_LOG);
        }
        memcpy(name, in->name ? in->name : "", in->name_len);
        name[in->name_len] = 0;
        /* PTX is read up to its NUL: give it one whatever the client sent */
        uint8_t *data = malloc((size_t)in->size + 1);
        if (!data)
                return CUDA_ERROR_OUT_OF_MEMORY;
        memcpy(data, in->data, (size_t)in->size);
        data[in->size] = 0;
        CUresult r = s->be.fn.cuLinkAddData_v2(e->st, (CUjitInputType)in->type, data, (size_t)in->size,
                                               in->name_len ? name : NULL, in->n_opts, in->n_opts ? opts : NULL,
                                               in->n_opts ? vals : NULL);
        free(data);
        return r;
}

/* How much of a log the driver filled, as far as this entry holds it. */
static uint32_t filled(const struct jit_ent *e, int at, unsigned cap)
{
        if (at < 0)
                return 0;
        uint64_t v = (uint64_t)(uintptr_t)e->vals[at];
        return (uint32_t)(v < cap ? v : cap);
}

CUresult lupw_lupJitAdd(struct lupw_session *s, uint64_t id, uint64_t blob)
{
        struct lup_jit_req q = { 0 };
        CUresult r = take_request(s, blob, &q);
        if (r != CUDA_SUCCESS) {
                lupw_blob_release(s, blob);
                return r;
        }
        struct jit_ent *e = ent_get(s, id);
        /* the client sends everything again; not when the state holds no
         * input yet (every add so far was refused): the driver's state must
         * stay as those refusals left it, as locally */
        if (q.first == 0 && e && e->n_inputs > 0) {
                ent_drop(s, id);
                e = NULL;
        }
        if (!e && q.first != 0) {
                r = CUDA_ERROR_NOT_FOUND; /* a restore forgot it: the shim sends everything */
                goto out;
        }
        if (e && (e->n_inputs != q.first || !e->st || e->cubin)) {
                r = CUDA_ERROR_NOT_FOUND;
                goto out;
        }
        if (!e) {
                if ((r = ent_new(s, id, &q, &e)) != CUDA_SUCCESS)
                        goto out;
                if ((r = s->be.fn.cuLinkCreate_v2(e->n_opts, e->n_opts ? e->opts : NULL, e->n_opts ? e->vals : NULL,
                                                  &e->st)) != CUDA_SUCCESS) {
                        e->st = NULL;
                        goto out; /* the entry keeps the answers for lupJitRead */
                }
        }
        for (uint32_t i = 0; i < q.n_inputs && r == CUDA_SUCCESS; i++)
                if ((r = add_one(s, e, &q.inputs[i])) == CUDA_SUCCESS)
                        e->n_inputs++;
        lup_debug("session %s: link %#" PRIx64
                  ": %u input(s), CUDA error %d; info log %zu bytes (size %u), error log %zu bytes (size %u)",
                  s->name, id, e->n_inputs, (int)r, strlen(e->info), filled(e, e->at_info, UINT32_MAX),
                  strlen(e->error), filled(e, e->at_error, UINT32_MAX));
out:
        lupw_blob_release(s, blob); /* q's inputs point into it */
        free(q.inputs);
        return r;
}

CUresult lupw_lupJitComplete(struct lupw_session *s, uint64_t *size, uint64_t id, unsigned int count)
{
        struct jit_ent *e = ent_get(s, id);
        if (!e || !e->st || e->n_inputs != count)
                return CUDA_ERROR_NOT_FOUND;
        void *cubin = NULL;
        size_t n = 0;
        CUresult r = s->be.fn.cuLinkComplete(e->st, &cubin, &n);
        if (r != CUDA_SUCCESS)
                return r;
        if (!cubin || n == 0 || n > LUP_MAX_BLOB)
                return CUDA_ERROR_INVALID_IMAGE;
        e->cubin = cubin;
        e->cubin_size = n;
        *size = n;
        return CUDA_SUCCESS;
}

CUresult lupw_lupJitRead(struct lupw_session *s, unsigned int *len, void *chunk, uint64_t id, unsigned int what,
                         uint64_t offset)
{
        struct jit_ent *e = ent_get(s, id);
        if (!e)
                return CUDA_ERROR_NOT_FOUND;
        uint8_t info[16];
        const uint8_t *src;
        uint64_t n;
        switch (what) {
        case LUP_JIT_READ_CUBIN:
                if (!e->cubin)
                        return CUDA_ERROR_NOT_FOUND;
                src = e->cubin, n = e->cubin_size;
                break;
        case LUP_JIT_READ_INFO_LOG:
                src = (const uint8_t *)e->info, n = filled(e, e->at_info, e->info_cap);
                break;
        case LUP_JIT_READ_ERROR_LOG:
                src = (const uint8_t *)e->error, n = filled(e, e->at_error, e->error_cap);
                break;
        case LUP_JIT_READ_INFO: {
                float wall = 0;
                if (e->at_wall >= 0)
                        memcpy(&wall, &e->vals[e->at_wall], sizeof(wall));
                memcpy(info, &wall, sizeof(wall));
                /* the size options as the driver wrote them; the logs hold at most their caps */
                lup_put32(info + 4, filled(e, e->at_info, UINT32_MAX));
                lup_put32(info + 8, filled(e, e->at_error, UINT32_MAX));
                lup_put32(info + 12, e->at_threads >= 0 ? (uint32_t)(uintptr_t)e->vals[e->at_threads] : 0);
                src = info, n = sizeof(info);
                break;
        }
        default:
                return CUDA_ERROR_INVALID_VALUE;
        }
        if (offset >= n)
                return CUDA_ERROR_INVALID_VALUE;
        uint64_t k = n - offset < LUP_JIT_CHUNK ? n - offset : LUP_JIT_CHUNK;
        memcpy(chunk, src + offset, (size_t)k);
        *len = (unsigned)k;
        return CUDA_SUCCESS;
}

CUresult lupw_lupJitDrop(struct lupw_session *s, uint64_t id)
{
        ent_drop(s, id);
        return CUDA_SUCCESS;
}

/* ---- loads with JIT options */

/* PTX with options becomes a cubin here, with the options, so that the
 * checkpointed image is the code the client got (see the top). */
static CUresult jit_ptx(struct lupw_session *s, struct jit_ent *e, const struct lup_jit_input *in)
{
        CUresult r =
                s->be.fn.cuLinkCreate_v2(e->n_opts, e->n_opts ? e->opts : NULL, e->n_opts ? e->vals : NULL, &e->st);
        if (r != CUDA_SUCCESS) {
                e->st = NULL;
                return r;
        }
        struct lup_jit_input ptx = *in;
        ptx.type = CU_JIT_INPUT_PTX;
        ptx.n_opts = 0;
        ptx.name_len = 0;
        if ((r = add_one(s, e, &ptx)) != CUDA_SUCCESS)
                return r;
        void *cubin = NULL;
        size_t n = 0;
        if ((r = s->be.fn.cuLinkComplete(e->st, &cubin, &n)) != CUDA_SUCCESS)
                return r;
        if (!cubin || n == 0 || n > LUP_MAX_BLOB)
                return CUDA_ERROR_INVALID_IMAGE;
        e->cubin = cubin;
        e->cubin_size = n;
        return CUDA_SUCCESS;
}

/* Forgets a link that failed and the answers it wrote, so that the
 * driver's loader answers afresh: PTX the linker refused is given to it,
 * which says why in its own words (or loads it: then the PTX is the image
 * a restore loads, without the options). */
static void ent_unlink(struct lupw_session *s, struct jit_ent *e)
{
        if (e->st)
                (void)s->be.fn.cuLinkDestroy(e->st);
        e->st = NULL;
        e->cubin = NULL;
        memset(e->info, 0, e->info_cap + 1);
        memset(e->error, 0, e->error_cap + 1);
        if (e->at_info >= 0)
                e->vals[e->at_info] = (void *)(uintptr_t)e->info_cap;
        if (e->at_error >= 0)
                e->vals[e->at_error] = (void *)(uintptr_t)e->error_cap;
        if (e->at_wall >= 0)
                e->vals[e->at_wall] = NULL;
}

/* Keeps the image a restore loads (as ops.c's creators do). */
static CUresult keep_image(struct lupw_session *s, const void *image, size_t n)
{
        lupw_prov_free(&s->obj.prov);
        if (!(s->obj.prov.image = malloc(n)))
                return CUDA_ERROR_OUT_OF_MEMORY;
        memcpy(s->obj.prov.image, image, n);
        s->obj.prov.image_len = n;
        return CUDA_SUCCESS;
}

static CUresult load_jit(struct lupw_session *s, void *ret_handle, bool library, uint64_t blob)
{
        struct lup_jit_req q = { 0 };
        struct jit_ent *e = NULL;
        int kind;
        const uint8_t *start;
        size_t size;

        lupw_prov_free(&s->obj.prov);
        CUresult r = take_request(s, blob, &q);
        if (r == CUDA_SUCCESS && q.n_inputs != 1)
                r = CUDA_ERROR_INVALID_VALUE;
        if (r == CUDA_SUCCESS)
                r = lupw_check_image(q.inputs[0].data, (size_t)q.inputs[0].size);
        if (r == CUDA_SUCCESS && ent_get(s, blob))
                r = CUDA_ERROR_INVALID_VALUE;
        if (r == CUDA_SUCCESS)
                r = ent_new(s, blob, &q, &e);
        if (r != CUDA_SUCCESS)
                goto out;
        const void *image = q.inputs[0].data;
        size_t image_len = (size_t)q.inputs[0].size;
        (void)lup_image_measure(image, image_len, &kind, &start, &size);
        bool linked = false;
        if (kind == LUP_IMAGE_PTX) {
                linked = jit_ptx(s, e, &q.inputs[0]) == CUDA_SUCCESS;
                if (!linked)
                        ent_unlink(s, e); /* the loader below answers for what the linker refused */
        }
        if (linked) {
                image = e->cubin;
                image_len = e->cubin_size;
                r = library ? s->be.fn.cuLibraryLoadData(ret_handle, image, NULL, NULL, 0, NULL, NULL, 0)
                            : s->be.fn.cuModuleLoadData(ret_handle, image);
        } else if (library) {
                r = s->be.fn.cuLibraryLoadData(ret_handle, image, e->n_opts ? e->opts : NULL,
                                               e->n_opts ? e->vals : NULL, e->n_opts, NULL, NULL, 0);
        } else {
                r = s->be.fn.cuModuleLoadDataEx(ret_handle, image, e->n_opts, e->n_opts ? e->opts : NULL,
                                                e->n_opts ? e->vals : NULL);
        }
        if (r == CUDA_SUCCESS)
                r = keep_image(s, image, image_len);
out:
        if (e && e->st) { /* the answers stay; the link is done */
                (void)s->be.fn.cuLinkDestroy(e->st);
                e->st = NULL;
                e->cubin = NULL;
        }
        lupw_blob_release(s, blob);
        free(q.inputs);
        return r;
}

CUresult lupw_lupModuleLoadJit(struct lupw_session *s, CUmodule *module, uint64_t blob)
{
        return load_jit(s, module, false, blob);
}

CUresult lupw_lupLibraryLoadJit(struct lupw_session *s, CUlibrary *library, uint64_t blob)
{
        return load_jit(s, library, true, blob);
}
