#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Unmodified CUDA runtime programs, PyTorch and CuPy through lupine on a real
# GPU, each run first on the local driver and then through lupined in the
# same job, with the outputs compared.
#
#   tests/gpu/runtime.sh BUILD_DIR RT_DIR [GPT_STEPS]
#
# RT_DIR holds the nvcc-built programs (rt_init_static, rt_init_shared,
# rt_full_static, rt_full_shared; see tests/gpu/rt/build.sh). The logs end
# up in $OUT/runtime-logs.tgz (or /tmp). Prints one "ok"/"FAIL" line per check and a summary line.
set -u
cd "$(dirname "$0")/../.."
BUILD=${1:?usage: runtime.sh BUILD_DIR RT_DIR [GPT_STEPS]}
RT=${2:?usage: runtime.sh BUILD_DIR RT_DIR [GPT_STEPS]}
STEPS=${3:-120}
OUTDIR=$(mktemp -d /tmp/lupine-runtime.XXXXXX)

. tests/gpu/compare_lib.sh
start_lupined || { echo "lupine runtime: FAILED, lupined did not start"; exit 1; }

step_exec() { # name cmd...: must succeed
        local name=$1
        shift
        if "$@" >"$OUTDIR/$name.out" 2>&1; then ok "$name"; else bad "$name" "$OUTDIR/$name.out"; fi
}
step_exec "export tables on the real driver (baseline)" "${local_env[@]}" "$BUILD/tests/e2e_export_tables" tests/kernels
step_exec "export tables through lupine" "${remote_env[@]}" "$BUILD/tests/e2e_export_tables" tests/kernels

# what lupine answers locally or forwards unchecked, diffed against the driver
compare driver_answers "$BUILD/tests/e2e_answers" tests/kernels
for p in rt_init_static rt_init_shared rt_full_static rt_full_shared; do
        [ -x "$RT/$p" ] && compare "$p" "$RT/$p"
done
grep -q "device says hello" "$OUTDIR/rt_full_static.remote.out" 2>/dev/null && echo "     (device printf reached the client's stdout)"
python3 -c 'import torch' 2>/dev/null && compare torch_check python3 tests/gpu/torch_check.py
python3 -c 'import cupy' 2>/dev/null && compare cupy_check python3 tests/gpu/cupy_check.py
if python3 -c 'import torch' 2>/dev/null; then
        compare gpt_train python3 tests/gpu/gpt_train.py "$STEPS"
        l=$(grep -o '[0-9.]* ms/step' "$OUTDIR/gpt_train.local.out" | cut -d' ' -f1)
        r=$(grep -o '[0-9.]* ms/step' "$OUTDIR/gpt_train.remote.out" | cut -d' ' -f1)
        [ -n "$l" ] && [ -n "$r" ] && echo "gpt_train: local $l ms/step, lupine $r ms/step, ratio $(python3 -c "print(f'{$r / $l:.3f}')")x"
        grep -h "weights" "$OUTDIR"/gpt_train.*.out
fi

stop_lupined
# every log in one file, for $OUT on the GPU machine
tar czf "${OUT:-/tmp}/runtime-logs.tgz" -C "$OUTDIR" . && echo "logs: ${OUT:-/tmp}/runtime-logs.tgz"
summary runtime
