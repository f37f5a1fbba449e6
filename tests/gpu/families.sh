#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 13's families on a real GPU (graphs, stream-ordered pools, VMM, and
# what unmodified frameworks call with them): each program runs on the local
# driver first, then through lupined in the same job, and the outputs are
# compared line by line.
#
#   tests/gpu/families.sh BUILD_DIR RT_DIR
#
# RT_DIR holds the nvcc-built programs (tests/gpu/rt/build.sh). The logs end
# up in $OUT/families-logs.tgz (or /tmp). One "ok"/"FAIL" line per check and
# a summary line "lupine families: ...".
set -u
cd "$(dirname "$0")/../.."
BUILD=${1:?usage: families.sh BUILD_DIR RT_DIR}
RT=${2:?usage: families.sh BUILD_DIR RT_DIR}
OUTDIR=$(mktemp -d /tmp/lupine-families.XXXXXX)

. tests/gpu/compare_lib.sh
start_lupined || { echo "lupine families: FAILED, lupined did not start"; exit 1; }

# driver-API programs of each family (tests/e2e/progs), then nvcc-built ones
for p in e2e_graphs e2e_graph_mem e2e_graph_generic e2e_pools e2e_vmm e2e_mapped; do
        if [ -x "$BUILD/tests/$p" ]; then compare "$p" "$BUILD/tests/$p" tests/kernels; else bad "$p (not built)"; fi
done
for p in rt_families_static rt_families_shared; do
        if [ -x "$RT/$p" ]; then compare "$p" "$RT/$p"; else bad "$p (not built: nvcc?)"; fi
done

if python3 -c 'import torch' 2>/dev/null; then
        compare torch_graph python3 tests/gpu/torch_graphs.py graph
        compare torch_compile python3 tests/gpu/torch_graphs.py compile
        PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True compare torch_expandable python3 tests/gpu/torch_graphs.py alloc
        PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync compare torch_mallocasync python3 tests/gpu/torch_graphs.py alloc
        # torch.cuda.graph over the cudaMallocAsync allocator: captured graph memory nodes
        PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync compare torch_graph_mallocasync python3 tests/gpu/torch_graphs.py graph
        # the GPT step in a CUDA graph through 2 durable restarts and 2 upgrades (its own lupined)
        if python3 tests/gpu/gpt_graph_restarts.py "$BUILD" 120 >"$OUTDIR/gpt_graph_restarts.out" 2>&1; then
                ok "GPT step in a CUDA graph through 2 restarts and 2 upgrades, weights bitwise equal to local"
        else
                bad "GPT step in a CUDA graph through 2 restarts and 2 upgrades" "$OUTDIR/gpt_graph_restarts.out"
        fi
        grep -h "gpt_graph_restarts: [0-9]* restarts" "$OUTDIR/gpt_graph_restarts.out"
fi
python3 -c 'import jax' 2>/dev/null && compare jax python3 tests/gpu/jax_check.py
if python3 -c 'import cupy' 2>/dev/null; then
        for part in async_pool fft linalg sparse random; do
                compare "cupy_$part" python3 tests/gpu/cupy_more.py "$part"
        done
fi

stop_lupined
tar czf "${OUT:-/tmp}/families-logs.tgz" -C "$OUTDIR" . && echo "logs: ${OUT:-/tmp}/families-logs.tgz"
summary families
