#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 14's families on a real GPU: arrays, textures and surfaces, JIT
# linking, mapped and managed memory, batched cuBLAS, cuFFT. Each program
# (tests/gpu/model/*.cu, and the driver-API e2e programs of the same
# families) runs on the local driver first, then through lupined, then
# through lupined again across a durable restart and across an upgrade at
# its midpoint; every lupine output must equal the local one.
#
#   tests/gpu/model.sh BUILD_DIR MODEL_DIR
#
# MODEL_DIR holds the nvcc-built programs (tests/gpu/model/build.sh). Logs
# go to $OUT/model-logs.tgz (or /tmp). Summary line: "lupine model: ...".
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${1:?usage: model.sh BUILD_DIR MODEL_DIR}
MODEL=${2:?usage: model.sh BUILD_DIR MODEL_DIR}
OUTDIR=$(mktemp -d /tmp/lupine-model.XXXXXX)
. tests/gpu/compare_lib.sh
# The driver's JIT cache decides whether cuLinkAddData writes an info log
# (a cached PTX is not compiled again, locally as through lupine: learned
# on the H200 with tests/gpu/probes/texobj_jit.sh): no cache on either side,
# so that the local run and lupine's both compile
export CUDA_CACHE_DISABLE=1
start_lupined || { echo "lupine model: FAILED, lupined did not start"; exit 1; }

# name prog args...: the local output (compare's) against a run through a
# lupined restarted at the program's midpoint
across() {
        local mode=$1 name=$2
        shift 2
        timeout 600 "${remote_env[@]}" python3 tests/gpu/model_restart.py "$BUILD" "$mode" "$@" \
                >"$OUTDIR/$name.$mode.out" 2>"$OUTDIR/$name.$mode.err"
        local rc=$?
        if [ $rc -ne 0 ]; then
                bad "$name across a $mode restart (rc $rc)" "$OUTDIR/$name.$mode.err"
        elif ! diff <(normalize <"$OUTDIR/$name.local.out") <(normalize <"$OUTDIR/$name.$mode.out") \
                    >"$OUTDIR/$name.$mode.diff"; then
                bad "$name across a $mode restart: output differs from local" "$OUTDIR/$name.$mode.diff"
        else
                ok "$name across a $mode restart: same output as local"
        fi
}

checked=0
for prog in "$MODEL"/*; do
        [ -x "$prog" ] || continue
        name=$(basename "$prog")
        checked=$((checked + 1))
        compare "$name" "$prog"
        [ -s "$OUTDIR/$name.local.out" ] || continue
        across durable "$name" "$prog"
        across upgrade "$name" "$prog"
done
[ $checked -gt 0 ] || bad "no programs in $MODEL (tests/gpu/model/build.sh: nvcc?)"
# the driver-API programs of the same families (tests/e2e/progs; "hold" is
# the restart harness's midpoint, the same protocol)
for p in e2e_arrays e2e_jit e2e_managed; do
        [ -x "$BUILD/tests/$p" ] || continue
        export LUPINE_E2E_NO_UB=1 # what the real driver may crash on is left out (e2e_arrays.c)
        compare "$p" "$BUILD/tests/$p" tests/kernels
        # hold mode locally too (its midpoint line dropped), as the reference
        echo go | timeout 300 "${local_env[@]}" "$BUILD/tests/$p" tests/kernels hold 2>"$OUTDIR/$p-hold.local.err" |
                grep -v '^ready:' >"$OUTDIR/$p-hold.local.out"
        [ -s "$OUTDIR/$p-hold.local.out" ] || { bad "$p hold on the local driver" "$OUTDIR/$p-hold.local.err"; continue; }
        across durable "$p-hold" "$BUILD/tests/$p" tests/kernels
        across upgrade "$p-hold" "$BUILD/tests/$p" tests/kernels
done

stop_lupined
tar czf "${OUT:-/tmp}/model-logs.tgz" -C "$OUTDIR" . && echo "logs: ${OUT:-/tmp}/model-logs.tgz"
summary model
