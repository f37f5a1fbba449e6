#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checkpoint throughput of lupine's own path, without a disk: the example
# provider keeps every byte in the worker's memory. (It cannot restore in
# another process, so only the save is measured.)
#   tests/gpu/ckpt_ram.sh BUILD_DIR GIB
set -u
BUILD=${1:-build}
GIB=${2:-4}
tmp=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
prov=$(ls "$BUILD"/tests/providers/liblupine-example-provider.so* 2>/dev/null | head -n 1)
env -u LD_LIBRARY_PATH "$BUILD/daemon/lupined" --backend "${LUPINE_TEST_BACKEND:-cuda}" --listen "127.0.0.1:$port" \
        --checkpoint-provider "$prov" --checkpoint-config $((GIB * 1024 + 256)) --drain-timeout 600 2> "$tmp/log" &
d=$!
sleep 1
LUPINE_SERVER="127.0.0.1:$port" LUPINE_SESSION=ram LD_LIBRARY_PATH="$BUILD/shim" LUPINE_RECONNECT_TIMEOUT=0 \
        "$BUILD/tests/e2e_bigsession" "$GIB" "$tmp/never" > "$tmp/out" 2>&1 &
c=$!
for _ in $(seq 600); do grep -q filled "$tmp/out" && break; sleep 0.1; done
kill -TERM $d
wait $d
kill $c 2>/dev/null
grep -E "checkpoint epoch 1:" "$tmp/log" || { echo "no checkpoint line"; tail -20 "$tmp/log"; }
rm -rf "$tmp"
