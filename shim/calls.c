/* SPDX-License-Identifier: MIT */
/*
 * Calls: what the API functions send through the connection (client.c).
 * lupc_call() is one framed call, synchronous or not; the copies and the
 * image upload cut bulk data into LUP_BULK_CHUNK frames, each taking the
 * send lock on its own, so another thread's small call is never stuck behind
 * a large copy. Asynchronous device->host data lands through a landing that
 * the reader fills (client.c, read_data_frame).
 */
#include "conn.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "ctl_codec.h"
#include "image.h"
#include "log.h"
#include "ops.h"

static CUresult call_prologue(unsigned flags, uint64_t *ret_ctx, struct lupc_conn **ret_c)
{
        *ret_c = lupc_route();
        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        *ret_ctx = lupc_route_ctx(*ret_c);
        if ((flags & LUPC_CTX) && *ret_ctx == 0)
                return CUDA_ERROR_INVALID_CONTEXT;
        return CUDA_SUCCESS;
}

CUresult lupc_call(uint16_t op, unsigned flags, const void *args, size_t argslen, void *rep, size_t repcap,
                   size_t *ret_replen)
{
        uint64_t ctx;
        struct lupc_conn *c;
        CUresult r = call_prologue(flags, &ctx, &c);
        if (r != CUDA_SUCCESS)
                return r;
        if (lup_trace_level() >= 1)
                lup_tracef("%s %s", lup_op_name(op) ? lup_op_name(op) : "?", (flags & LUPC_SYNC) ? "sync" : "async");
        bool mapped = atomic_load_explicit(&lupc_mapped_n, memory_order_relaxed) != 0;
        if (mapped)
                lupc_mapped_before(flags, op); /* api_mapped.c */
        if (!(flags & LUPC_SYNC))
                return lupc_send_frame(c, op, 0, ctx, args, argslen, NULL, 0, NULL, 0);

        struct lupc_waiter w = { .rep = rep, .cap = rep ? repcap : 0 };
        r = lupc_send_frame(c, op, LUP_F_SYNC, ctx, args, argslen, NULL, 0, &w, 0);
        if (r != CUDA_SUCCESS) {
                if (mapped)
                        lupc_mapped_after();
                return r;
        }
        lupc_wait_reply(c, &w);
        if (mapped)
                lupc_mapped_after();
        if (ret_replen)
                *ret_replen = w.len;
        if (w.status != CUDA_SUCCESS && lup_trace_level() >= 1)
                lup_tracef("%s -> error %d", lup_op_name(op) ? lup_op_name(op) : "?", (int)w.status);
        return w.status;
}

CUresult lupc_copy_htod(uint64_t dst, const void *src, size_t n, uint64_t stream)
{
        uint64_t ctx;
        struct lupc_conn *c;
        lupc_route_ptr(dst); /* the server that holds the device memory */
        CUresult r = call_prologue(LUPC_CTX, &ctx, &c);
        if (r != CUDA_SUCCESS)
                return r;
        if (lup_trace_level() >= 1)
                lup_tracef("cuMemcpyHtoD %zu bytes", n);
        /* One frame per chunk, each taking the send lock on its own, so other
         * threads' small calls are never stuck behind a large copy. */
        for (size_t off = 0; off < n;) {
                size_t k = n - off < LUP_BULK_CHUNK ? n - off : LUP_BULK_CHUNK;
                uint8_t a[LUP_HTOD_HDR_SIZE];
                lup_htod_encode(a, dst + off, stream);
                r = lupc_send_frame(c, LUP_OP_MEMCPY_HTOD, 0, ctx, a, sizeof(a), (const uint8_t *)src + off, k, NULL,
                                    0);
                if (r != CUDA_SUCCESS)
                        return r;
                off += k;
        }
        return CUDA_SUCCESS;
}

CUresult lupc_copy_dtoh(void *dst, uint64_t src, size_t n, uint64_t stream)
{
        uint64_t ctx;
        struct lupc_conn *c;
        lupc_route_ptr(src); /* the server that holds the device memory */
        CUresult r = call_prologue(LUPC_CTX, &ctx, &c);
        if (r != CUDA_SUCCESS)
                return r;
        if (lup_trace_level() >= 1)
                lup_tracef("cuMemcpyDtoH %zu bytes", n);
        bool mapped = atomic_load_explicit(&lupc_mapped_n, memory_order_relaxed) != 0;
        if (mapped)
                lupc_mapped_before(LUPC_SYNC, LUP_OP_MEMCPY_DTOH); /* api_mapped.c */
        uint8_t a[LUP_DTOH_SIZE];
        lup_dtoh_encode(a, &(struct lup_dtoh){ .src = src, .size = n, .stream = stream });
        struct lupc_waiter w = { .rep = dst, .cap = n };
        r = lupc_send_frame(c, LUP_OP_MEMCPY_DTOH, LUP_F_SYNC, ctx, a, sizeof(a), NULL, 0, &w, 0);
        if (r != CUDA_SUCCESS) {
                if (mapped)
                        lupc_mapped_after();
                return r;
        }
        lupc_wait_reply(c, &w);
        if (mapped)
                lupc_mapped_after(); /* a synchronisation point for mapped memory too */
        if (w.status == CUDA_SUCCESS && w.len != n)
                return lupc_protocol_error("cuMemcpyDtoH");
        return w.status;
}

CUresult lupc_copy_dtoh_async(void *dst, uint64_t src, size_t n, uint64_t stream)
{
        uint64_t ctx;
        struct lupc_conn *c;
        lupc_route_ptr(src); /* the server that holds the device memory */
        CUresult r = call_prologue(LUPC_CTX, &ctx, &c);
        if (r != CUDA_SUCCESS)
                return r;
        struct lupc_landing *l = calloc(1, sizeof(*l));
        if (!l)
                return CUDA_ERROR_OUT_OF_MEMORY;
        uint64_t token = lupc_mint_handle();
        l->token = token;
        l->dst = dst;
        l->size = n;
        pthread_mutex_lock(&c->recv_lock);
        l->next = c->landings;
        c->landings = l; /* from here on l belongs to the list: only token names it */
        pthread_mutex_unlock(&c->recv_lock);
        uint8_t a[LUP_DTOH_ASYNC_SIZE];
        lup_dtoh_async_encode(a, &(struct lup_dtoh){ .src = src, .size = n, .stream = stream, .token = token });
        if (lup_trace_level() >= 1)
                lup_tracef("cuMemcpyDtoHAsync %zu bytes", n);
        r = lupc_send_frame(c, LUP_OP_DTOH_ASYNC, 0, ctx, a, sizeof(a), NULL, 0, NULL, token);
        if (r != CUDA_SUCCESS) {
                pthread_mutex_lock(&c->recv_lock);
                l = lupc_find_landing_locked(c, token);
                if (l)
                        lupc_drop_landing_locked(c, l);
                pthread_mutex_unlock(&c->recv_lock);
        }
        return r;
}

CUresult lupc_upload_image(const void *image, uint64_t *ret_blob)
{
        int kind;
        const uint8_t *start;
        size_t n;

        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        /* the caller's own memory: its headers say how long it is */
        if (lup_image_measure(image, SIZE_MAX, &kind, &start, &n) < 0 || n > LUP_MAX_BLOB)
                return CUDA_ERROR_INVALID_IMAGE;
        return lupc_upload_blob(start, n, ret_blob);
}

CUresult lupc_upload_blob(const void *data, size_t n, uint64_t *ret_blob)
{
        const uint8_t *start = data;

        if (!lupc_initialized())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (n == 0 || n > LUP_MAX_BLOB)
                return CUDA_ERROR_INVALID_VALUE;
        uint64_t blob = lupc_mint_handle();
        struct lupc_conn *c = lupc_route();
        for (size_t off = 0; off < n;) {
                size_t k = n - off < LUP_BULK_CHUNK ? n - off : LUP_BULK_CHUNK;
                uint8_t a[LUP_BLOB_HDR_SIZE];
                lup_blob_encode(a, blob, n, off);
                CUresult r =
                        lupc_send_frame(c, LUP_OP_BLOB, 0, lupc_route_ctx(c), a, sizeof(a), start + off, k, NULL, 0);
                if (r != CUDA_SUCCESS)
                        return r;
                off += k;
        }
        *ret_blob = blob;
        return CUDA_SUCCESS;
}
