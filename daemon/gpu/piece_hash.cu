// SPDX-License-Identifier: MIT
//
// lup_hash64 (common/hash.c) of every PIECE of a device range, on the GPU,
// so checkpoint lanes need not hash on the CPU: a save hashes the memory
// before it leaves the device, a restore checks it after it has arrived.
//
// lup_hash64 runs four independent accumulators over the 8-byte words of a
// piece (accumulator k takes words k, k+4, k+8, ...). Here four adjacent
// threads each run one accumulator, so a group of four reads 32 contiguous
// bytes per step; the groups' results are combined with shuffles, and the
// group's first thread folds in the tail bytes and the length, exactly as
// the CPU does. The answer is bit-identical to lup_hash64(piece, len, 0).
//
// Built to PTX by scripts/gen-piece-hash.sh (the PTX is committed as
// piece_hash_ptx.h, so building lupine needs no CUDA toolkit).

typedef unsigned long long u64;

static __device__ __forceinline__ u64 mix(u64 h)
{
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 33;
        h *= 0xc4ceb9fe1a85ec53ull;
        h ^= h >> 33;
        return h;
}

// base: the range (8-byte aligned); size: its bytes; piece: PIECE; out:
// one u64 per piece, (size + piece - 1) / piece of them. Launch with
// 4 * pieces threads, in blocks of a multiple of 32.
extern "C" __global__ void lupine_piece_hash(const unsigned char *base, u64 size, u64 piece, u64 *out)
{
        u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
        u64 p = t >> 2;
        unsigned k = (unsigned)(t & 3);
        u64 pieces = (size + piece - 1) / piece;
        bool live = p < pieces;
        u64 start = live ? p * piece : 0;
        u64 n = live ? (size - start < piece ? size - start : piece) : 0;
        const u64 *w = (const u64 *)(base + start) + k;
        u64 blocks = n / 32;
        // lup_hash64's starting values, seed 0 (selects, not an array: an
        // indexed array would live in local memory)
        u64 l = k == 0 ? 0x9e3779b97f4a7c15ull : k == 1 ? 0x632be59bd9b4e019ull
              : k == 2 ? 0x85ebca77c2b2ae63ull : 0ull - 0x27d4eb2f165667c5ull;
#pragma unroll 8
        for (u64 i = 0; i < blocks; i++) {
                l = (l ^ __ldg(w + 4 * i)) * 0x9e3779b97f4a7c15ull;
                l = (l << 31) | (l >> 33);
        }
        u64 h = mix(l + k);
        // all 32 threads of the warp take part, live or not
        h ^= __shfl_xor_sync(0xffffffffu, h, 1);
        h ^= __shfl_xor_sync(0xffffffffu, h, 2);
        if (!live || k != 0)
                return;
        for (u64 i = blocks * 32; i < n; i++)
                h = (h ^ base[start + i]) * 0x100000001b3ull;
        out[p] = mix(h ^ n);
}
