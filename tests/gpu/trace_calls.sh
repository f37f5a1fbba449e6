#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Which driver calls does a workload make? Runs each workload on the local
# driver under lupine-cutrace and writes, per workload, the functions it
# called with their counts (NAME.calls), the export-table slots it called
# (NAME.tables), and the compressed full trace (NAME.trace.gz), into
# $TRACE_DIR (default /tmp/trace). Compare NAME.calls with the shim's stub list
# (the functions abi/cuda_api.spec does not name are stubs) to see what
# lupine still misses.
#
#   tests/gpu/trace_calls.sh BUILD_DIR [--remote] [WORKLOAD...]
#
# --remote: through lupine instead (a lupined on the real driver, the
# programs on the shim); NAME.failed then lists the calls that failed.
set -u
cd "$(dirname "$0")/../.."
BUILD=${1:?usage: trace_calls.sh BUILD_DIR [--remote] [WORKLOAD...]}
shift
remote=
if [ "${1:-}" = --remote ]; then
        remote=1
        shift
fi
DEST=${TRACE_DIR:-/tmp/trace}
mkdir -p "$DEST"
audit=$PWD/$BUILD/tools/liblupine-cutrace.so
[ -f "$audit" ] || { echo "no $audit"; exit 1; }
real_dir=$(dirname "$(ldconfig -p | awk '/libcuda.so.1 /{print $NF; exit}')")
libpath=$real_dir
if [ -n "$remote" ]; then
        OUTDIR=$DEST BUILD=$BUILD
        pass=0 fail=0
        ok() { :; }
        bad() { :; }
        . tests/gpu/compare_lib.sh
        start_lupined || exit 1
        trap stop_lupined EXIT
        export LUPINE_SERVER="unix:$sock"
        libpath=$PWD/$BUILD/shim:$libdirs
fi

declare -A W=(
        [torch_graph]="python3 tests/gpu/torch_graphs.py graph"
        [torch_compile]="python3 tests/gpu/torch_graphs.py compile"
        [torch_expandable]="env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 tests/gpu/torch_graphs.py alloc"
        [torch_mallocasync]="env PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync python3 tests/gpu/torch_graphs.py alloc"
        [jax]="python3 tests/gpu/jax_check.py"
        [cupy_pool]="python3 tests/gpu/cupy_more.py async_pool"
        [cupy_fft]="python3 tests/gpu/cupy_more.py fft"
        [cupy_linalg]="python3 tests/gpu/cupy_more.py linalg"
        [cupy_sparse]="python3 tests/gpu/cupy_more.py sparse"
        [cupy_random]="python3 tests/gpu/cupy_more.py random"
)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(torch_graph torch_compile torch_expandable torch_mallocasync jax cupy_pool cupy_fft cupy_linalg cupy_sparse cupy_random)
for n in "${names[@]}"; do
        t=/tmp/trace-$n.log
        rm -f "$t"
        start=$(date +%s)
        # shellcheck disable=SC2086
        timeout 300 env LD_LIBRARY_PATH="$libpath" LD_AUDIT="$audit" CUTRACE_FILE="$t" ${W[$n]} \
                >"$DEST/$n.out" 2>"$DEST/$n.err"
        rc=$?
        grep -a ' > ' "$t" | awk '$3 == ">" { sub(/\(.*/, "", $4); c[$4]++ } END { for (k in c) print c[k], k }' |
                sort -k2 >"$DEST/$n.calls"
        grep -o '> ET[0-9a-f]*\[[0-9]*\]' "$t" | sort | uniq -c >"$DEST/$n.tables"
        # the calls that answered an error: count, name, result
        grep -a ' < ' "$t" | awk '$5 == "=" && $6 != "0" && $6 != "0," { sub(/,$/, "", $6); c[$4 " " $6]++ }
                END { for (k in c) print c[k], k }' | sort -k2 >"$DEST/$n.failed"
        gzip -c "$t" >"$DEST/$n.trace.gz"
        echo "$n: rc $rc, $(wc -l <"$DEST/$n.calls") functions, $(wc -l <"$t") trace lines, $(($(date +%s) - start)) s"
        rm -f "$t"
done
