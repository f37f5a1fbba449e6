/* SPDX-License-Identifier: MIT */
/*
 * The shim's stream-ordered allocator (shim/pool.c, shim/pool_attr.c) on
 * its own: the calls it makes to the server are fakes here that count what
 * would go over the wire (chunk allocations and frees, event records,
 * stream waits), so each test says exactly when the network is used.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "client.h"
#include "pool.h"
#include "shim_gen.h"

#define CTX LUP_PRIMARY_CTX_ID(0)
#define S1  0x2000000ull
#define S2  0x2000010ull
#define MIB (1ull << 20)

static struct {
        uint64_t next_addr;
        int allocs, frees, records, waits, syncs, events;
        uint64_t freed_bytes, last_wait_stream, last_record_stream;
        int live_shadow;
        CUresult alloc_result;
} fk;

static uint64_t next_id = 0x9000000;

/* ---- fakes of what pool.c and pool_attr.c call */

CUresult lupc_send_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
        if (fk.alloc_result != CUDA_SUCCESS)
                return fk.alloc_result;
        fk.allocs++;
        *dptr = fk.next_addr;
        fk.next_addr += bytesize;
        return CUDA_SUCCESS;
}

CUresult lupc_send_cuMemFree_v2(CUdeviceptr dptr)
{
        (void)dptr;
        fk.frees++;
        return CUDA_SUCCESS;
}

CUresult lupc_send_cuEventRecord(CUevent e, CUstream s)
{
        (void)e;
        fk.records++;
        fk.last_record_stream = (uint64_t)(uintptr_t)s;
        return CUDA_SUCCESS;
}

CUresult lupc_send_cuStreamSynchronize(CUstream s)
{
        (void)s;
        fk.syncs++;
        return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventCreate(CUevent *e, unsigned int flags)
{
        (void)flags;
        fk.events++;
        *e = (CUevent)(uintptr_t)(next_id += 16);
        return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags)
{
        (void)e, (void)flags;
        fk.waits++;
        fk.last_wait_stream = (uint64_t)(uintptr_t)s;
        return CUDA_SUCCESS;
}

bool lupc_in_arena(uint64_t p)
{
        return p != 0;
}

CUresult lupc_protocol_error(const char *what)
{
        (void)what;
        return CUDA_ERROR_UNKNOWN;
}

static uint64_t stack[8];
static int depth = 1;

uint64_t lupc_ctx_current(void)
{
        return depth ? stack[depth - 1] : 0;
}

int lupc_ctx_push(uint64_t id)
{
        stack[depth++] = id;
        return 0;
}

uint64_t lupc_ctx_pop(void)
{
        return stack[--depth];
}

bool lupc_ctx_lookup(uint64_t id, struct lupc_ctx_info *ret)
{
        if (id != CTX)
                return false;
        *ret = (struct lupc_ctx_info){ .id = id, .device = 0, .primary = true };
        return true;
}

int lupc_handle_kind(uint64_t id, uint64_t *ret_ctx)
{
        if (id != S1 && id != S2)
                return 0;
        if (ret_ctx)
                *ret_ctx = CTX;
        return LUPC_H_STREAM;
}

uint64_t lupc_mint_handle(void)
{
        return next_id += 16;
}

int lupc_device_count(void)
{
        return 1;
}

/* one device, numbered alike on both sides (shim/visible.c) */
uint64_t lupc_primary_ctx_id(int dev)
{
        return LUP_PRIMARY_CTX_ID(dev);
}

int lupc_primary_ctx_dev(uint64_t id)
{
        return lup_primary_ctx_device(id) == 0 ? 0 : -1;
}

int lupc_shadow_add(uint64_t base, uint64_t size, uint64_t ctx, int device)
{
        (void)base, (void)size, (void)ctx, (void)device;
        fk.live_shadow++;
        return 0;
}

int lupc_shadow_remove(uint64_t base, struct lupc_alloc_info *ret)
{
        (void)base, (void)ret;
        fk.live_shadow--;
        return 0;
}

/* ---- helpers */

static const struct lupc_pool_stream st1 = { .id = S1, .ctx = CTX }, st2 = { .id = S2, .ctx = CTX };

static int setup(void **state)
{
        (void)state;
        /* what earlier tests left pending (destroyed pools) goes now */
        lupc_pool_synced_ctx(CTX, ~0ull);
        uint64_t addr = fk.next_addr ? fk.next_addr : 0x7f0000000000ull; /* live addresses stay unique */
        memset(&fk, 0, sizeof(fk));
        fk.next_addr = addr;
        stack[0] = CTX;
        depth = 1;
        return 0;
}

static uint64_t new_pool(size_t max)
{
        CUmemPoolProps props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
                                 .maxSize = max };
        uint64_t id = 0;
        assert_int_equal(lupc_pool_create(&props, &id), 0);
        return id;
}

static uint64_t get64(uint64_t pool, CUmemPool_attribute a)
{
        cuuint64_t v = ~0ull;
        assert_int_equal(lupc_pool_get_attr(pool, a, &v), CUDA_SUCCESS);
        return v;
}

static uint64_t alloc(uint64_t pool, size_t n, const struct lupc_pool_stream *st)
{
        uint64_t p = 0;
        assert_int_equal(lupc_pool_alloc(pool, n, st, &p), CUDA_SUCCESS);
        return p;
}

/* ---- tests */

static void same_stream_reuse_costs_nothing(void **state)
{
        (void)state;
        uint64_t pool = new_pool(0);
        uint64_t a = alloc(pool, 1000, &st1);
        assert_int_equal(fk.allocs, 1);
        assert_int_equal(get64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 2 * MIB);
        assert_int_equal(get64(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 1024); /* 512-byte rounding */
        assert_int_equal(lupc_pool_of(a), pool);
        assert_int_equal(lupc_pool_free(a, &st1), CUDA_SUCCESS);
        uint64_t b = alloc(pool, 1000, &st1);
        assert_int_equal(a, b);
        assert_int_equal(fk.allocs, 1);
        assert_int_equal(fk.records + fk.waits, 0);
        assert_int_equal(lupc_pool_free(b, &st1), CUDA_SUCCESS);
        /* twice, or not the start of an allocation */
        assert_int_equal(lupc_pool_free(b, &st1), CUDA_ERROR_INVALID_VALUE);
        uint64_t c = alloc(pool, 4096, &st1);
        assert_int_equal(lupc_pool_free(c + 512, &st1), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(lupc_pool_free(c, &st1), CUDA_SUCCESS);
        assert_int_equal(fk.live_shadow, 0);
        assert_int_equal(lupc_pool_destroy(pool), 0);
}

static void cross_stream_reuse_inserts_an_ordering(void **state)
{
        (void)state;
        uint64_t pool = new_pool(0);
        cuuint64_t thr = 64 * MIB; /* keep chunks over the synchronisations */
        assert_int_equal(lupc_pool_set_attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr), CUDA_SUCCESS);
        uint64_t a = alloc(pool, 2 * MIB, &st1);
        assert_int_equal(lupc_pool_free(a, &st1), CUDA_SUCCESS);
        uint64_t b = alloc(pool, 2 * MIB, &st2);
        assert_int_equal(a, b);
        assert_int_equal(fk.allocs, 1);
        assert_int_equal(fk.events, 1);
        assert_int_equal(fk.records, 1);
        assert_int_equal(fk.last_record_stream, S1);
        assert_int_equal(fk.waits, 1);
        assert_int_equal(fk.last_wait_stream, S2);
        /* without internal dependencies: fresh memory instead */
        int off = 0;
        assert_int_equal(lupc_pool_set_attr(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, &off),
                         CUDA_SUCCESS);
        assert_int_equal(lupc_pool_free(b, &st2), CUDA_SUCCESS);
        uint64_t c = alloc(pool, 2 * MIB, &st1);
        assert_int_not_equal(c, b);
        assert_int_equal(fk.allocs, 2);
        assert_int_equal(fk.waits, 1);
        /* once the free is seen complete, opportunistic reuse needs no ordering */
        lupc_pool_synced_stream(&st2, lupc_pool_ticket());
        uint64_t d = alloc(pool, 2 * MIB, &st1);
        assert_int_equal(d, b);
        assert_int_equal(fk.waits, 1);
        lupc_pool_free(c, &st1);
        lupc_pool_free(d, &st1);
        assert_int_equal(lupc_pool_destroy(pool), 0);
}

static void untouched_memory_is_preferred(void **state)
{
        (void)state;
        uint64_t pool = new_pool(0);
        uint64_t a = alloc(pool, 512, &st1);
        lupc_pool_free(a, &st1);
        uint64_t b = alloc(pool, 512, &st2);
        assert_int_not_equal(a, b);
        assert_int_equal(fk.waits, 0);
        assert_int_equal(fk.allocs, 1);
        lupc_pool_free(b, &st2);
        assert_int_equal(lupc_pool_destroy(pool), 0);
}

static void release_threshold_at_synchronisations(void **state)
{
        (void)state;
        uint64_t pool = new_pool(0);
        uint64_t t0 = lupc_pool_ticket();
        uint64_t a = alloc(pool, 3 * MIB, &st1);
        assert_int_equal(get64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MIB);
        lupc_pool_free(a, &st1);
        /* a sync that began before the free, or of another stream, covers nothing */
        lupc_pool_synced_stream(&st1, t0);
        lupc_pool_synced_stream(&st2, lupc_pool_ticket());
        assert_int_equal(fk.frees, 0);
        lupc_pool_synced_stream(&st1, lupc_pool_ticket());
        assert_int_equal(fk.frees, 1);
        assert_int_equal(get64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
        assert_int_equal(get64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 4 * MIB);

        /* an event recorded after the free */
        a = alloc(pool, MIB, &st1);
        lupc_pool_free(a, &st1);
        lupc_pool_event_recorded(0x5550, &st1);
        lupc_pool_synced_event(0x5550);
        assert_int_equal(fk.frees, 2);

        /* a context synchronisation */
        a = alloc(pool, MIB, &st2);
        lupc_pool_free(a, &st2);
        lupc_pool_synced_ctx(CTX, lupc_pool_ticket());
        assert_int_equal(fk.frees, 3);

        /* a threshold keeps it; TrimTo keeps at least what it is told */
        cuuint64_t thr = 8 * MIB;
        assert_int_equal(lupc_pool_set_attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr), CUDA_SUCCESS);
        uint64_t x = alloc(pool, 2 * MIB, &st1), y = alloc(pool, 2 * MIB, &st1);
        lupc_pool_free(x, &st1);
        lupc_pool_free(y, &st1);
        lupc_pool_synced_stream(&st1, lupc_pool_ticket());
        assert_int_equal(fk.frees, 3);
        assert_int_equal(get64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MIB);
        assert_int_equal(lupc_pool_trim(pool, 3 * MIB), CUDA_SUCCESS);
        assert_int_equal(get64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MIB);
        assert_int_equal(lupc_pool_trim(pool, 2 * MIB), CUDA_SUCCESS);
        assert_int_equal(get64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 2 * MIB);
        assert_int_equal(lupc_pool_trim(pool, 0), CUDA_SUCCESS);
        assert_int_equal(get64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
        assert_int_equal(fk.frees, 5);
        assert_int_equal(lupc_pool_destroy(pool), 0);
}

static void neighbours_merge(void **state)
{
        (void)state;
        uint64_t pool = new_pool(0);
        uint64_t a = alloc(pool, 512, &st1), b = alloc(pool, 512, &st1), c = alloc(pool, 512, &st1);
        lupc_pool_free(b, &st1);
        lupc_pool_free(a, &st1);
        lupc_pool_free(c, &st1);
        /* the three are one block, pending on S1 */
        uint64_t d = alloc(pool, 1536, &st1);
        assert_int_equal(d, a);
        lupc_pool_free(d, &st1);
        /* once complete, one with the rest of the chunk */
        cuuint64_t thr = 64 * MIB;
        assert_int_equal(lupc_pool_set_attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr), CUDA_SUCCESS);
        lupc_pool_synced_stream(&st1, lupc_pool_ticket());
        d = alloc(pool, 2 * MIB, &st2);
        assert_int_equal(d, a);
        assert_int_equal(fk.allocs, 1);
        lupc_pool_free(d, &st2);
        assert_int_equal(lupc_pool_destroy(pool), 0);
}

static void destroyed_pool_lives_until_its_last_free(void **state)
{
        (void)state;
        uint64_t pool = new_pool(0);
        uint64_t a = alloc(pool, 4096, &st1);
        assert_int_equal(lupc_pool_destroy(pool), 0);
        assert_false(lupc_pool_lookup(pool, NULL));
        assert_int_equal(lupc_pool_destroy(pool), -EINVAL);
        assert_int_equal(fk.frees, 0);
        assert_int_equal(lupc_pool_of(a), pool);
        assert_int_equal(lupc_pool_free(a, &st1), CUDA_SUCCESS);
        assert_int_equal(fk.frees, 0); /* the free is still pending on S1 */
        lupc_pool_synced_stream(&st1, lupc_pool_ticket());
        assert_int_equal(fk.frees, 1);
        /* the default pool cannot be destroyed */
        uint64_t dp = lupc_pool_default(0);
        assert_int_not_equal(dp, 0);
        assert_int_equal(lupc_pool_destroy(dp), -EINVAL);
        assert_int_equal(lupc_pool_current(0), dp);
}

static void limits_and_failures(void **state)
{
        (void)state;
        /* a cap of 4 MiB holds 32 MiB, as driver 580 rounds it */
        uint64_t pool = new_pool(4 * MIB), p;
        uint64_t a = alloc(pool, 30 * MIB, &st1);
        assert_int_equal(lupc_pool_alloc(pool, 4 * MIB, &st1, &p), CUDA_ERROR_OUT_OF_MEMORY);
        assert_int_equal(lupc_pool_alloc(pool, 64 * MIB, &st1, &p), CUDA_ERROR_OUT_OF_MEMORY);
        assert_int_equal(fk.allocs, 1);
        /* the server refusing a chunk: its answer, nothing kept */
        uint64_t big = new_pool(0);
        fk.alloc_result = CUDA_ERROR_OUT_OF_MEMORY;
        assert_int_equal(lupc_pool_alloc(big, MIB, &st1, &p), CUDA_ERROR_OUT_OF_MEMORY);
        fk.alloc_result = CUDA_SUCCESS;
        assert_int_equal(get64(big, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
        assert_int_equal(lupc_pool_alloc(0x1234, MIB, &st1, &p), CUDA_ERROR_INVALID_VALUE);
        lupc_pool_free(a, &st1);
        assert_int_equal(lupc_pool_destroy(pool), 0);
        assert_int_equal(lupc_pool_destroy(big), 0);
}

static void context_gone_takes_the_chunks(void **state)
{
        (void)state;
        uint64_t pool = new_pool(0);
        uint64_t a = alloc(pool, 4096, &st1);
        (void)alloc(pool, 4 * MIB, &st1);
        lupc_pool_drop_ctx(CTX);
        assert_int_equal(fk.frees, 0); /* the context took the memory with it */
        assert_int_equal(fk.live_shadow, 0);
        assert_int_equal(get64(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
        assert_int_equal(get64(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
        assert_int_equal(lupc_pool_free(a, &st1), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(lupc_pool_destroy(pool), 0);
}

static void attributes(void **state)
{
        (void)state;
        uint64_t pool = new_pool(0);
        int v = -1, zero = 0;
        cuuint64_t one = 1, z = 0;
        assert_int_equal(lupc_pool_get_attr(pool, CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, &v), CUDA_SUCCESS);
        assert_int_equal(v, 1);
        assert_int_equal(lupc_pool_set_attr(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &zero), CUDA_SUCCESS);
        assert_int_equal(lupc_pool_get_attr(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &v), CUDA_SUCCESS);
        assert_int_equal(v, 0);
        uint64_t a = alloc(pool, MIB, &st1);
        lupc_pool_free(a, &st1);
        assert_int_equal(get64(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), MIB);
        assert_int_equal(lupc_pool_set_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &one), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(lupc_pool_set_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &z), CUDA_SUCCESS);
        assert_int_equal(get64(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 0);
        assert_int_equal(lupc_pool_set_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &z), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(lupc_pool_get_attr(pool, (CUmemPool_attribute)99, &z), CUDA_ERROR_INVALID_VALUE);
        CUmemAccessDesc d = { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 1 },
                              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
        assert_int_equal(lupc_pool_set_access(pool, &d, 1), CUDA_ERROR_INVALID_DEVICE); /* driver 580 */
        d.location.id = 0;
        d.flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
        assert_int_equal(lupc_pool_set_access(pool, &d, 1), CUDA_ERROR_INVALID_VALUE);
        CUmemAccess_flags f;
        assert_int_equal(lupc_pool_get_access(pool, 0, &f), CUDA_SUCCESS);
        assert_int_equal(f, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
        assert_int_equal(lupc_pool_destroy(pool), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup(same_stream_reuse_costs_nothing, setup),
                cmocka_unit_test_setup(cross_stream_reuse_inserts_an_ordering, setup),
                cmocka_unit_test_setup(untouched_memory_is_preferred, setup),
                cmocka_unit_test_setup(release_threshold_at_synchronisations, setup),
                cmocka_unit_test_setup(neighbours_merge, setup),
                cmocka_unit_test_setup(destroyed_pool_lives_until_its_last_free, setup),
                cmocka_unit_test_setup(limits_and_failures, setup),
                cmocka_unit_test_setup(context_gone_takes_the_chunks, setup),
                cmocka_unit_test_setup(attributes, setup),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
