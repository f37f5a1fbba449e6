#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main job: dependencies, build, then start lupined (on the real GPU if
# this machine has one, else on the simulated driver) and run an unmodified
# CUDA driver-API program through lupine's libcuda.so.1.
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
tmp=$(mktemp -d)
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$tmp"' EXIT
build/daemon/lupined --backend auto --listen "unix:$tmp/lupined.sock" 2>"$tmp/lupined.log" &
daemon=$!
for _ in $(seq 100); do [ -S "$tmp/lupined.sock" ] && break; sleep 0.05; done
echo "--- lupined is running (pid $daemon); its log:"
sed 's/^/    /' "$tmp/lupined.log"
echo "--- running examples/roundtrip through lupine (LUPINE_SERVER=unix:$tmp/lupined.sock)"
LUPINE_SERVER="unix:$tmp/lupined.sock" LD_LIBRARY_PATH="$PWD/build/shim" build/examples/roundtrip
