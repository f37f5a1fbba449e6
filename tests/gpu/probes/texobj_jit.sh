#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Two questions for the real driver (issue 14), each locally and through
# lupined: which calls move texture object values (texobj_values.c), and
# whether model_jit's info log at cuLinkAddData depends on the JIT cache.
#   tests/gpu/probes/texobj_jit.sh BUILD PROBE_BIN
set -u
cd "$(dirname "$0")/../../.." || exit 1
BUILD=$1 PROBE=$2
T=$(mktemp -d)
sock=$T/l.sock
env -u LD_LIBRARY_PATH "$BUILD/daemon/lupined" --backend cuda --listen "unix:$sock" --log-level info,core=debug >"$T/d.log" 2>&1 &
dpid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
R=(env LD_LIBRARY_PATH="$PWD/$BUILD/shim" LUPINE_SERVER="unix:$sock")
echo "## texobj local"; "$PROBE" tests/kernels/kernels.cubin tests/kernels/kernels.ptx
echo "## texobj lupine"; "${R[@]}" "$PROBE" tests/kernels/kernels.cubin tests/kernels/kernels.ptx
J=$BUILD/model/model_jit
echo "## jit local (cache as it is)"; "$J" | head -3
echo "## jit local again"; "$J" | head -3
echo "## jit local CUDA_CACHE_DISABLE=1"; CUDA_CACHE_DISABLE=1 "$J" | head -3
echo "## jit lupine"; "${R[@]}" "$J" | head -3
kill -TERM $dpid; wait $dpid
echo "## daemon log (link lines)"; grep -a "link\|texture" "$T/d.log" | head -20
echo "## lupined with CUDA_CACHE_DISABLE=1"
env -u LD_LIBRARY_PATH CUDA_CACHE_DISABLE=1 "$BUILD/daemon/lupined" --backend cuda --listen "unix:$sock" >"$T/d2.log" 2>&1 &
dpid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
"${R[@]}" "$J" | head -3
kill -TERM $dpid; wait $dpid
