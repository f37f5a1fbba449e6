/* SPDX-License-Identifier: MIT */
/* The arena sub-allocator, with a fake physical side that records mappings
 * and can be told to fail. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "arena.h"
#include "lupine/wire.h"

#define BASE 0x200000000000ull
#define GRAN (2ull << 20)

struct fake {
        uint64_t mapped;        /* bytes currently mapped */
        uint64_t limit;         /* map fails with 2 (out of memory) beyond this */
        int maps, unmaps;
};

static int fake_map(void *ud, uint64_t addr, uint64_t size, int device)
{
        struct fake *f = ud;
        assert_int_equal(addr % GRAN, 0);
        assert_int_equal(size % GRAN, 0);
        if (f->mapped + size > f->limit)
                return 2;
        f->mapped += size;
        f->maps++;
        return 0;
}

static void fake_unmap(void *ud, uint64_t addr, uint64_t size)
{
        struct fake *f = ud;
        f->mapped -= size;
        f->unmaps++;
}

static const struct arena_ops ops = { fake_map, fake_unmap };

static void big_alloc_free_and_reuse(void **state)
{
        struct fake f = { .limit = 1ull << 40 };
        struct arena a;
        uint64_t p1, p2, p3;
        assert_int_equal(arena_init(&a, BASE, 1ull << 30, GRAN, &ops, &f), 0);
        assert_int_equal(arena_alloc(&a, 3 << 20, 0, 1, &p1), 0);
        assert_int_equal(p1, BASE);
        assert_int_equal(f.mapped, 4 << 20); /* rounded up to the granule */
        assert_int_equal(arena_alloc(&a, 5 << 20, 0, 1, &p2), 0);
        assert_int_equal(p2, BASE + (4 << 20));
        assert_int_equal(arena_free(&a, p1), 0);
        assert_int_equal(f.mapped, 6 << 20);
        /* first fit reuses the hole */
        assert_int_equal(arena_alloc(&a, 2 << 20, 0, 1, &p3), 0);
        assert_int_equal(p3, BASE);
        assert_ptr_equal(arena_find(&a, p2 + 123)->addr, p2);
        assert_null(arena_find(&a, p2 + (5 << 20))); /* past the requested size */
        assert_int_equal(arena_free(&a, p2 + 1), -ENOENT);
        arena_destroy(&a);
        assert_int_equal(f.mapped, 0);
}

static void small_allocs_share_slabs(void **state)
{
        struct fake f = { .limit = 1ull << 40 };
        struct arena a;
        uint64_t p[100];
        assert_int_equal(arena_init(&a, BASE, 1ull << 30, GRAN, &ops, &f), 0);
        for (int i = 0; i < 100; i++) {
                assert_int_equal(arena_alloc(&a, 1000, 0, 1, &p[i]), 0);
                assert_int_equal(p[i] % 256, 0);
                for (int j = 0; j < i; j++)
                        assert_true(p[i] >= p[j] + 1024 || p[j] >= p[i] + 1024); /* no overlap */
        }
        assert_int_equal(f.maps, 1); /* 100 KiB of 1 KiB blocks fit in one slab */
        /* a different size class or device gets its own slab */
        uint64_t q, r;
        assert_int_equal(arena_alloc(&a, 300, 0, 1, &q), 0);
        assert_int_equal(arena_alloc(&a, 1000, 1, 1, &r), 0);
        assert_int_equal(f.maps, 3);
        for (int i = 0; i < 100; i++)
                assert_int_equal(arena_free(&a, p[i]), 0);
        assert_int_equal(f.unmaps, 1); /* the empty slab goes back */
        assert_int_equal(arena_free(&a, p[0]), -ENOENT); /* double free */
        arena_destroy(&a);
        assert_int_equal(f.mapped, 0);
}

static void boundary_sizes(void **state)
{
        struct fake f = { .limit = 1ull << 40 };
        struct arena a;
        uint64_t p, q;
        assert_int_equal(arena_init(&a, BASE, 1ull << 30, GRAN, &ops, &f), 0);
        assert_int_equal(arena_alloc(&a, 0, 0, 1, &p), -EINVAL);
        assert_int_equal(arena_alloc(&a, ARENA_SMALL_MAX, 0, 1, &p), 0);     /* biggest slab class */
        assert_int_equal(arena_alloc(&a, ARENA_SMALL_MAX + 1, 0, 1, &q), 0); /* smallest chunk */
        assert_int_equal(arena_find(&a, q)->chunk, GRAN);
        assert_int_equal(arena_alloc(&a, 2ull << 30, 0, 1, &p), -ENOMEM);    /* larger than the arena */
        arena_destroy(&a);
}

static void physical_oom_is_reported_and_undone(void **state)
{
        struct fake f = { .limit = 8 << 20 };
        struct arena a;
        uint64_t p, q;
        assert_int_equal(arena_init(&a, BASE, 1ull << 30, GRAN, &ops, &f), 0);
        assert_int_equal(arena_alloc(&a, 6 << 20, 0, 1, &p), 0);
        assert_int_equal(arena_alloc(&a, 4 << 20, 0, 1, &q), 2); /* CUDA_ERROR_OUT_OF_MEMORY from map */
        assert_int_equal(a.n_allocs, 1);
        assert_int_equal(arena_free(&a, p), 0);
        assert_int_equal(arena_alloc(&a, 8 << 20, 0, 1, &q), 0);   /* the VA came back, coalesced */
        assert_int_equal(q, BASE);
        arena_destroy(&a);
}

static void address_space_exhaustion(void **state)
{
        struct fake f = { .limit = 1ull << 40 };
        struct arena a;
        uint64_t p;
        int n = 0;
        assert_int_equal(arena_init(&a, BASE, 16 << 20, GRAN, &ops, &f), 0);
        while (arena_alloc(&a, 3 << 20, 0, 1, &p) == 0)
                n++;
        assert_int_equal(n, 4); /* 4 x 4 MiB chunks fill 16 MiB */
        assert_int_equal(arena_alloc(&a, 3 << 20, 0, 1, &p), -ENOMEM);
        arena_destroy(&a);
}

static void free_by_owner(void **state)
{
        struct fake f = { .limit = 1ull << 40 };
        struct arena a;
        uint64_t p;
        assert_int_equal(arena_init(&a, BASE, 1ull << 30, GRAN, &ops, &f), 0);
        for (int i = 0; i < 10; i++)
                assert_int_equal(arena_alloc(&a, (i % 2) ? 4096 : (3 << 20), 0, (uint64_t)(i % 3), &p), 0);
        assert_int_equal(arena_free_owner(&a, 1), 3);
        assert_int_equal(a.n_allocs, 7);
        for (size_t i = 0; i < a.n_allocs; i++)
                assert_int_not_equal(a.allocs[i].owner, 1);
        assert_int_equal(arena_free_owner(&a, 0), 4);
        assert_int_equal(arena_free_owner(&a, 2), 3);
        assert_int_equal(f.mapped, 0);
        arena_destroy(&a);
}

static void contains(void **state)
{
        struct fake f = { .limit = 1ull << 40 };
        struct arena a;
        assert_int_equal(arena_init(&a, BASE, LUP_ARENA_SIZE, GRAN, &ops, &f), 0);
        assert_true(arena_contains(&a, BASE));
        assert_true(arena_contains(&a, BASE + LUP_ARENA_SIZE - 1));
        assert_false(arena_contains(&a, BASE + LUP_ARENA_SIZE));
        assert_false(arena_contains(&a, BASE - 1));
        assert_false(arena_contains(&a, 0));
        arena_destroy(&a);
        assert_int_equal(arena_init(&a, BASE + 1, 1 << 30, GRAN, &ops, &f), -EINVAL);
}

/* VMM reservations: carved out of the free VA, never mapped through ops,
 * never handed to arena_alloc; hints and alignment as the driver takes them. */
static void va_reservations(void **state)
{
        struct fake f = { .limit = 1ull << 40 };
        struct arena a;
        uint64_t r1, r2, r3, p;
        assert_int_equal(arena_init(&a, BASE, 1ull << 30, GRAN, &ops, &f), 0);
        assert_int_equal(arena_alloc(&a, 4 << 20, 0, 1, &p), 0);
        assert_int_equal(arena_va_reserve(&a, 8 << 20, 0, 0, &r1), 0);
        assert_int_equal(r1, BASE + (4 << 20));
        assert_int_equal(f.maps, 1); /* bare VA: nothing mapped */
        /* a free hint is used */
        assert_int_equal(arena_va_reserve(&a, 2 << 20, 0, BASE + (64 << 20), &r2), 0);
        assert_int_equal(r2, BASE + (64 << 20));
        /* a hint that is taken, or outside the arena, gives any address */
        assert_int_equal(arena_va_reserve(&a, 2 << 20, 0, r1, &r3), 0);
        assert_true(r3 != r1 && arena_contains(&a, r3));
        assert_int_equal(arena_va_release(&a, r3, 2 << 20), 0);
        assert_int_equal(arena_va_reserve(&a, 2 << 20, 0, 0x1000000000ull, &r3), 0);
        assert_true(arena_contains(&a, r3));
        assert_int_equal(arena_va_release(&a, r3, 2 << 20), 0);
        /* alignment: a power of two, at least the granule */
        assert_int_equal(arena_va_reserve(&a, 2 << 20, 3 << 20, 0, &r3), -EINVAL);
        assert_int_equal(arena_va_reserve(&a, 2 << 20, 32 << 20, 0, &r3), 0);
        assert_int_equal(r3 % (32 << 20), 0);
        assert_int_equal(arena_va_release(&a, r3, 2 << 20), 0);
        /* a hint that is not aligned as asked is not used */
        assert_int_equal(arena_va_reserve(&a, 2 << 20, 32 << 20, BASE + (66 << 20), &r3), 0);
        assert_int_equal(r3 % (32 << 20), 0);
        assert_int_equal(arena_va_release(&a, r3, 2 << 20), 0);
        assert_int_equal(arena_va_reserve(&a, 3 << 20, 0, 0, &r3), -EINVAL);
        assert_int_equal(arena_va_reserve(&a, 0, 0, 0, &r3), -EINVAL);
        assert_int_equal(arena_va_reserve(&a, 2ull << 30, 0, 0, &r3), -ENOMEM);
        /* allocations go around reservations */
        for (int i = 0; i < 8; i++) {
                uint64_t q;
                assert_int_equal(arena_alloc(&a, 2 << 20, 0, 1, &q), 0);
                assert_true(q + (2 << 20) <= r1 || q >= r1 + (8 << 20));
                assert_true(q + (2 << 20) <= r2 || q >= r2 + (2 << 20));
        }
        /* release: only what is taken, only whole granules inside the arena */
        assert_int_equal(arena_va_release(&a, r1, 3 << 20), -EINVAL);
        assert_int_equal(arena_va_release(&a, BASE + (512 << 20), 2 << 20), -EINVAL); /* free already */
        assert_int_equal(arena_va_release(&a, BASE - GRAN, GRAN), -EINVAL);
        assert_int_equal(arena_va_release(&a, r1, 8 << 20), 0);
        assert_int_equal(arena_va_release(&a, r1, 8 << 20), -EINVAL); /* twice */
        /* exactly there again (a restore), and not over a taken range */
        assert_int_equal(arena_va_reserve_at(&a, r1, 8 << 20), 0);
        assert_int_equal(arena_va_reserve_at(&a, r1, 2 << 20), -EINVAL);
        assert_int_equal(arena_va_reserve_at(&a, p, 2 << 20), -EINVAL);
        arena_destroy(&a);
}

/* The sizing docs/status.md states: a 1 TiB arena holds the home ranges
 * of all of an H200's memory (141 GiB) and five of PyTorch's expandable
 * segment reservations (1.125 x 141 GiB each; one per pool, small and
 * large, per stream that allocates), not a sixth. */
static void va_sizing(void **state)
{
        struct fake f = { .limit = 1ull << 40 };
        struct arena a;
        uint64_t seg = (141ull << 30) / 8 * 9 / GRAN * GRAN, r;
        assert_int_equal(arena_init(&a, BASE, LUP_ARENA_SIZE, GRAN, &ops, &f), 0);
        assert_int_equal(arena_va_reserve(&a, 141ull << 30, 0, 0, &r), 0); /* homes: all of the GPU */
        for (int i = 0; i < 5; i++)
                assert_int_equal(arena_va_reserve(&a, seg, 0, 0, &r), 0);
        assert_int_equal(arena_va_reserve(&a, seg, 0, 0, &r), -ENOMEM);
        arena_destroy(&a);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(big_alloc_free_and_reuse),
                cmocka_unit_test(small_allocs_share_slabs),
                cmocka_unit_test(boundary_sizes),
                cmocka_unit_test(physical_oom_is_reported_and_undone),
                cmocka_unit_test(address_space_exhaustion),
                cmocka_unit_test(free_by_owner),
                cmocka_unit_test(contains),
                cmocka_unit_test(va_reservations),
                cmocka_unit_test(va_sizing),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
