#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs the driver-API benchmarks on the local driver and through lupine
# (TCP and UNIX socket, daemon on this host) in one job, plus the raw TCP
# ceiling, and prints one table with ratios.
#
#   tests/bench/run.sh [BUILD_DIR] [quick]
set -eu
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
QUICK=${2:-}
OUTDIR=${OUT:-$(mktemp -d)}
real_dir=$(dirname "$(ldconfig -p | awk '/libcuda.so.1 /{print $NF; exit}')")
backend=cuda
[ -n "$real_dir" ] && [ "$real_dir" != "." ] || backend=sim

"$BUILD/tests/bench/tcpbench" > "$OUTDIR/bench-tcp.jsonl"
if [ "$backend" = cuda ]; then
        LD_LIBRARY_PATH="$real_dir" "$BUILD/tests/bench/bench" tests/kernels $QUICK > "$OUTDIR/bench-local.jsonl"
        LD_LIBRARY_PATH="$real_dir" "$BUILD/tests/bench/mapped_bench" tests/kernels $QUICK >> "$OUTDIR/bench-local.jsonl"
fi
tmp=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
env -u LD_LIBRARY_PATH "$BUILD/daemon/lupined" --backend "$backend" --listen "127.0.0.1:$port" \
        --listen "unix:$tmp/s" 2> "$OUTDIR/bench-lupined.log" &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do [ -S "$tmp/s" ] && break; sleep 0.05; done
LUPINE_SERVER="127.0.0.1:$port" LD_LIBRARY_PATH="$BUILD/shim" "$BUILD/tests/bench/bench" tests/kernels $QUICK \
        > "$OUTDIR/bench-lupine-tcp.jsonl"
LUPINE_SERVER="127.0.0.1:$port" LD_LIBRARY_PATH="$BUILD/shim" "$BUILD/tests/bench/mapped_bench" tests/kernels $QUICK \
        >> "$OUTDIR/bench-lupine-tcp.jsonl"
LUPINE_SERVER="unix:$tmp/s" LD_LIBRARY_PATH="$BUILD/shim" "$BUILD/tests/bench/bench" tests/kernels $QUICK \
        > "$OUTDIR/bench-lupine-unix.jsonl"
LUPINE_SERVER="unix:$tmp/s" LD_LIBRARY_PATH="$BUILD/shim" "$BUILD/tests/bench/mapped_bench" tests/kernels $QUICK \
        >> "$OUTDIR/bench-lupine-unix.jsonl"
python3 tests/bench/report.py "$OUTDIR"
