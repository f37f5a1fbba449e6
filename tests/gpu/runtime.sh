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
pass=0
fail=0
failed=()
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); failed+=("$1"); echo "FAIL $1"; [ -n "${2:-}" ] && tail -n 25 "$2" | sed 's/^/    /'; }

# Libraries the programs need (cuBLAS, cuDNN): the toolkit's, or the ones
# that came with the PyTorch wheel.
libdirs=$(python3 - <<'PY'
import glob, os, site
dirs = []
for base in site.getsitepackages() + ['/usr/local/cuda/lib64', '/usr/local/cuda/lib']:
    for pat in ('nvidia/*/lib', 'nvidia/cu13/lib', '.'):
        for d in glob.glob(os.path.join(base, pat)):
            if glob.glob(os.path.join(d, 'libcublas.so.*')) or glob.glob(os.path.join(d, 'libcudnn.so.*')) or glob.glob(os.path.join(d, 'libcudart.so.*')):
                dirs.append(os.path.abspath(d))
print(':'.join(dict.fromkeys(dirs)))
PY
)
echo "libraries from: $libdirs"

# the local baseline runs on the real driver, found the way the loader finds it
real_dir=$(dirname "$(ldconfig -p | awk '/libcuda.so.1 /{print $NF; exit}')")
sock=$OUTDIR/lupined.sock
env -u LD_LIBRARY_PATH "$BUILD/daemon/lupined" --backend cuda --listen "unix:$sock" --log-level info \
        >"$OUTDIR/lupined.log" 2>&1 &
dpid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { echo "lupine runtime: FAILED, lupined did not start"; cat "$OUTDIR/lupined.log"; exit 1; }
remote_env=(env LD_LIBRARY_PATH="$PWD/$BUILD/shim:$libdirs" LUPINE_SERVER="unix:$sock")
local_env=(env LD_LIBRARY_PATH="$real_dir:$libdirs")

# Device printf lines of one launch come out in the order the blocks ran,
# which CUDA leaves open (a run of rt_full_static once saw block 1 first).
# Each run of consecutive device lines is sorted; where they sit among the
# host lines is still compared exactly.
normalize() {
        grep -v 'ms/step' | sed 's/ (lupine)//' |
                awk '/^device says /{run[n++]=$0; next}
                     {flush(); print} END{flush()}
                     function flush(  i, j, t){ for (i = 1; i < n; i++) for (j = i; j > 0 && run[j-1] > run[j]; j--) { t = run[j]; run[j] = run[j-1]; run[j-1] = t }
                                               for (i = 0; i < n; i++) print run[i]; n = 0 }'
}

# name prog args...: local, then remote; outputs must match except the device name
compare() {
        local name=$1
        shift
        timeout 300 "${local_env[@]}" "$@" >"$OUTDIR/$name.local.out" 2>"$OUTDIR/$name.local.err"
        local lrc=$?
        local t0=$(date +%s.%N)
        timeout 300 "${remote_env[@]}" "$@" >"$OUTDIR/$name.remote.out" 2>"$OUTDIR/$name.remote.err"
        local rrc=$?
        local t1=$(date +%s.%N)
        grep -h "not supported by lupine\|not implemented\|unknown table id" "$OUTDIR/$name.remote.err" | sort -u | sed 's/^/    lupine: /'
        if [ $lrc -ne 0 ]; then
                bad "$name (fails on the local driver too, rc $lrc)" "$OUTDIR/$name.local.err"
        elif [ $rrc -ne 0 ]; then
                bad "$name through lupine (rc $rrc)" "$OUTDIR/$name.remote.err"
        elif ! diff <(normalize <"$OUTDIR/$name.local.out") <(normalize <"$OUTDIR/$name.remote.out") \
                    >"$OUTDIR/$name.diff"; then
                bad "$name: output through lupine differs from local" "$OUTDIR/$name.diff"
        else
                ok "$name ($(python3 -c "print(f'{$t1 - $t0:.1f}')") s through lupine)"
        fi
}

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

kill -TERM $dpid 2>/dev/null
wait $dpid 2>/dev/null
# every log in one file, for $OUT on the GPU machine
tar czf "${OUT:-/tmp}/runtime-logs.tgz" -C "$OUTDIR" . && echo "logs: ${OUT:-/tmp}/runtime-logs.tgz"
if [ "$fail" -eq 0 ]; then
        echo "lupine runtime: PASS $pass/$((pass + fail))"
else
        echo "lupine runtime: FAIL $fail of $((pass + fail)) (${failed[*]})"
fi
[ "$fail" -eq 0 ]
