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
        LD_LIBRARY_PATH="$real_dir" "$BUILD/tests/bench/managed_bench" tests/kernels $QUICK >> "$OUTDIR/bench-local.jsonl"
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
LUPINE_SERVER="127.0.0.1:$port" LD_LIBRARY_PATH="$BUILD/shim" "$BUILD/tests/bench/managed_bench" tests/kernels $QUICK \
        >> "$OUTDIR/bench-lupine-tcp.jsonl"
LUPINE_SERVER="unix:$tmp/s" LD_LIBRARY_PATH="$BUILD/shim" "$BUILD/tests/bench/bench" tests/kernels $QUICK \
        > "$OUTDIR/bench-lupine-unix.jsonl"
LUPINE_SERVER="unix:$tmp/s" LD_LIBRARY_PATH="$BUILD/shim" "$BUILD/tests/bench/mapped_bench" tests/kernels $QUICK \
        >> "$OUTDIR/bench-lupine-unix.jsonl"
LUPINE_SERVER="unix:$tmp/s" LD_LIBRARY_PATH="$BUILD/shim" "$BUILD/tests/bench/managed_bench" tests/kernels $QUICK \
        >> "$OUTDIR/bench-lupine-unix.jsonl"
# The same over TLS 1.3 with a bearer token (issue 15: HtoD/DtoH >= 0.8x of
# plaintext), against a second lupined with test certificates.
python3 -c "import sys; sys.path.insert(0, 'tests/e2e'); import tls_certs; tls_certs.make_certs('$tmp/certs')" &&
        python3 -c "import sys; sys.path.insert(0, 'tests/e2e'); import tls_certs
open('$tmp/tokens', 'w').write(tls_certs.token_line('bench', 'bench-token'))"
tport=$((port + 1))
env -u LD_LIBRARY_PATH "$BUILD/daemon/lupined" --backend "$backend" --listen "127.0.0.1:$tport" \
        --listen "unix:$tmp/t" --tls-cert "$tmp/certs/server.pem" --tls-key "$tmp/certs/server.key" \
        --auth-tokens "$tmp/tokens" 2> "$OUTDIR/bench-lupined-tls.log" &
tdaemon=$!
trap 'kill $daemon $tdaemon 2>/dev/null; wait $daemon $tdaemon 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do [ -S "$tmp/t" ] && break; sleep 0.05; done
LUPINE_SERVER="tls://127.0.0.1:$tport" LUPINE_TLS_CA="$tmp/certs/ca.pem" LUPINE_TOKEN=bench-token \
        LD_LIBRARY_PATH="$BUILD/shim" "$BUILD/tests/bench/bench" tests/kernels $QUICK > "$OUTDIR/bench-lupine-tls.jsonl"
grep -h "kernel TLS\|TLS in user space" "$OUTDIR/bench-lupined-tls.log" | head -n 1
python3 tests/bench/report.py "$OUTDIR"
