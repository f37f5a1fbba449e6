/* SPDX-License-Identifier: MIT */
/*
 * The session's handle table (client-minted ids -> real driver handles) and
 * uploaded blobs (module images arrive in chunks before the call that uses
 * them). A malformed id or blob is a protocol violation; an id that names
 * nothing (any more) is answered with CUDA's own error.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"
#include "log.h"
#include "worker_session.h"

struct blob {
        uint64_t total, received;
        uint8_t *data;
};

void lupw_handles_init(struct lupw_session *s)
{
        lup_u64map_init(&s->handles, LUP_MAX_HANDLES);
        lup_u64map_init(&s->blobs, 64);
}

void lupw_prov_free(struct lupw_prov *p)
{
        free(p->name);
        free(p->image);
        memset(p, 0, sizeof(*p));
}

static void free_handle(uint64_t key, uint64_t val, void *ud)
{
        struct lupw_handle_ent *e = (struct lupw_handle_ent *)(uintptr_t)val;
        lupw_prov_free(&e->prov);
        free(e->params);
        free(e);
}

static void free_blob(uint64_t key, uint64_t val, void *ud)
{
        struct blob *b = (struct blob *)(uintptr_t)val;
        free(b->data);
        free(b);
}

void lupw_handles_free(struct lupw_session *s)
{
        lupw_prov_free(&s->prov);
        free(s->settings);
        s->settings = NULL;
        s->n_settings = s->cap_settings = 0;
        lup_u64map_each(&s->handles, free_handle, NULL);
        lup_u64map_free(&s->handles);
        lup_u64map_each(&s->blobs, free_blob, NULL);
        lup_u64map_free(&s->blobs);
}

struct lupw_handle_ent *lupw_handle_ent(struct lupw_session *s, int kind, uint64_t id)
{
        uint64_t v;
        if (!lup_u64map_get(&s->handles, id, &v))
                return NULL;
        struct lupw_handle_ent *e = (struct lupw_handle_ent *)(uintptr_t)v;
        return e->kind == kind ? e : NULL;
}

CUresult lupw_handle(struct lupw_session *s, int kind, uint64_t id, void **ret)
{
        struct lupw_handle_ent *e = lupw_handle_ent(s, kind, id);
        if (!e)
                return CUDA_ERROR_INVALID_HANDLE;
        *ret = e->real;
        s->cur_parent = id; /* creators record what they were made from */
        return CUDA_SUCCESS;
}

int lupw_handle_fresh(struct lupw_session *s, uint64_t id)
{
        if (id < LUP_FIRST_HANDLE_ID || (id - LUP_FIRST_HANDLE_ID) % 16 || lup_u64map_get(&s->handles, id, NULL)) {
                lupw_set_why(s, "malformed or reused handle id");
                return -EBADMSG;
        }
        return 0;
}

CUresult lupw_handle_put(struct lupw_session *s, int kind, uint64_t id, void *real)
{
        struct lupw_handle_ent *e = calloc(1, sizeof(*e));
        if (!e)
                return CUDA_ERROR_OUT_OF_MEMORY;
        e->kind = kind;
        e->real = real;
        e->ctx = s->bound_id;
        if (lup_u64map_put(&s->handles, id, (uint64_t)(uintptr_t)e) < 0) {
                free(e);
                lupw_prov_free(&s->prov);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        /* the creating handler left how it made the handle in s->prov */
        e->prov = s->prov;
        memset(&s->prov, 0, sizeof(s->prov));
        return CUDA_SUCCESS;
}

void lupw_handle_del(struct lupw_session *s, uint64_t id)
{
        uint64_t v;
        if (lup_u64map_del(&s->handles, id, &v))
                free_handle(id, v, NULL);
}

/* ---- blobs */

int lupw_op_blob(struct lupw_session *s, const struct lup_hdr *h, const uint8_t *p)
{
        struct lup_rd r = lup_rd_init(p, h->len);
        uint64_t id, total, off, v;
        lup_rd_u64(&r, &id);
        lup_rd_u64(&r, &total);
        lup_rd_u64(&r, &off);
        size_t n = lup_rd_left(&r);
        if (r.err || id == 0 || n == 0 || total == 0 || total > LUP_MAX_BLOB || (h->flags & LUP_F_SYNC)) {
                lupw_set_why(s, "malformed BLOB frame");
                return -EBADMSG;
        }
        struct blob *b;
        if (!lup_u64map_get(&s->blobs, id, &v)) {
                if (off != 0 || s->blob_bytes + total > LUP_MAX_BLOB_BYTES) {
                        lupw_set_why(s, off ? "BLOB chunk for an unknown blob" : "too many bytes uploaded at once");
                        return -EBADMSG;
                }
                b = calloc(1, sizeof(*b));
                if (b)
                        b->data = malloc(total);
                if (!b || !b->data || lup_u64map_put(&s->blobs, id, (uint64_t)(uintptr_t)b) < 0) {
                        if (b)
                                free(b->data);
                        free(b);
                        lupw_set_why(s, "cannot hold the uploaded blob (memory or blob count limit)");
                        return -EBADMSG;
                }
                b->total = total;
                s->blob_bytes += total;
        } else {
                b = (struct blob *)(uintptr_t)v;
        }
        if (off != b->received || total != b->total || n > b->total - b->received) {
                lupw_set_why(s, "BLOB chunk out of order or past the end");
                return -EBADMSG;
        }
        memcpy(b->data + off, p + r.off, n);
        b->received += n;
        return 0;
}

int lupw_blob_take(struct lupw_session *s, uint64_t id, const void **ret, size_t *ret_len)
{
        uint64_t v;
        if (!lup_u64map_get(&s->blobs, id, &v)) {
                lupw_set_why(s, "call names a blob that was never uploaded");
                return -EBADMSG;
        }
        struct blob *b = (struct blob *)(uintptr_t)v;
        if (b->received != b->total) {
                lupw_set_why(s, "call names an incomplete blob");
                return -EBADMSG;
        }
        *ret = b->data;
        *ret_len = (size_t)b->total;
        s->cur_blob_len = (size_t)b->total;
        return 0;
}

void lupw_blob_release(struct lupw_session *s, uint64_t id)
{
        uint64_t v;
        if (lup_u64map_del(&s->blobs, id, &v)) {
                struct blob *b = (struct blob *)(uintptr_t)v;
                s->blob_bytes -= b->total;
                free_blob(id, v, NULL);
        }
}

CUresult lupw_check_image(const void *p, size_t n)
{
        int kind;
        const uint8_t *start;
        size_t size;
        if (lup_image_measure(p, n, &kind, &start, &size) < 0 || size != n || start != p)
                return CUDA_ERROR_INVALID_IMAGE;
        return CUDA_SUCCESS;
}
