// SPDX-License-Identifier: MIT
//
// lup_hash64 (common/hash.c) of many pieces of device memory at once, on
// the GPU, so checkpoint lanes need not hash on the CPU: a save hashes the
// memory before it leaves the device, a restore checks it after it has
// arrived.
//
// lup_hash64 runs four independent accumulators over the 8-byte words of a
// piece (accumulator k takes words k, k+4, k+8, ...). Here four adjacent
// threads each run one accumulator, so a group of four reads 32 contiguous
// bytes per step; the four results are combined with shuffles, and the
// group's first thread folds in the tail bytes and the length, exactly as
// the CPU does. The answer is bit-identical to lup_hash64(piece, len, 0).
//
// Each accumulator is one long dependent chain, so a thread loads the next
// BATCH words while it folds in the current ones: memory latency then hides
// behind the multiplies instead of adding to them. One launch covers every
// piece of a checkpoint on its device (a table of addresses and lengths),
// however many chunks they come from.
//
// Built to PTX by scripts/gen-piece-hash.sh (the PTX is committed as
// piece_hash_ptx.h, so building lupine needs no CUDA toolkit).

typedef unsigned long long u64;

#define BATCH 16

static __device__ __forceinline__ u64 mix(u64 h)
{
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 33;
        h *= 0xc4ceb9fe1a85ec53ull;
        h ^= h >> 33;
        return h;
}

static __device__ __forceinline__ u64 step(u64 l, u64 w)
{
        l = (l ^ w) * 0x9e3779b97f4a7c15ull;
        return (l << 31) | (l >> 33);
}

// table: 2 * pieces u64s, piece p at table[2p] (8-byte aligned) with
// table[2p + 1] bytes; out: one u64 per piece. Launch with 4 * pieces
// threads, in blocks of a multiple of 32.
extern "C" __global__ void lupine_piece_hash(const u64 *table, u64 pieces, u64 *out)
{
        u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
        u64 p = t >> 2;
        unsigned k = (unsigned)(t & 3);
        bool live = p < pieces;
        const unsigned char *base = live ? (const unsigned char *)table[2 * p] : 0;
        u64 n = live ? table[2 * p + 1] : 0;
        const u64 *w = (const u64 *)base + k;
        u64 blocks = n / 32;
        // lup_hash64's starting values, seed 0 (selects, not an array: an
        // indexed array would live in local memory)
        u64 l = k == 0 ? 0x9e3779b97f4a7c15ull : k == 1 ? 0x632be59bd9b4e019ull
              : k == 2 ? 0x85ebca77c2b2ae63ull : 0ull - 0x27d4eb2f165667c5ull;
        u64 i = 0;
        if (blocks >= BATCH) {
                u64 cur[BATCH];
#pragma unroll
                for (int j = 0; j < BATCH; j++)
                        cur[j] = __ldg(w + 4 * j);
                for (i = BATCH; i + BATCH <= blocks; i += BATCH) {
                        u64 next[BATCH];
#pragma unroll
                        for (int j = 0; j < BATCH; j++)
                                next[j] = __ldg(w + 4 * (i + j));
#pragma unroll
                        for (int j = 0; j < BATCH; j++)
                                l = step(l, cur[j]);
#pragma unroll
                        for (int j = 0; j < BATCH; j++)
                                cur[j] = next[j];
                }
#pragma unroll
                for (int j = 0; j < BATCH; j++)
                        l = step(l, cur[j]);
        }
        for (; i < blocks; i++)
                l = step(l, __ldg(w + 4 * i));
        u64 h = mix(l + k);
        // all 32 threads of the warp take part, live or not
        h ^= __shfl_xor_sync(0xffffffffu, h, 1);
        h ^= __shfl_xor_sync(0xffffffffu, h, 2);
        if (!live || k != 0)
                return;
        for (u64 b = blocks * 32; b < n; b++)
                h = (h ^ base[b]) * 0x100000001b3ull;
        out[p] = mix(h ^ n);
}
