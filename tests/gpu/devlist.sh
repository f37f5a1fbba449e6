#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 17, items 1 and 2, on the real GPU: two lupined on the one H200 as
# two servers of one device list (LUPINE_SERVER=A,B):
#   1. tests/e2e/test_devlist.py with --backend cuda: the program on the
#      local driver first (one device), then through both servers: the
#      device list and names, work on both, B restarted under it, the
#      copies between the servers checked against the local driver's bytes
#      and counted daemon to daemon (not through the client), a copy tried
#      again across B's restart, refused peer HELLOs,
#      CUDA_VISIBLE_DEVICES, NVML, and 'A|B' failover;
#   2. PyTorch (tests/gpu/torch_devlist.py): tensors moved between the two
#      servers' devices, against the local driver's results;
#   3. the speed of a 1 GiB copy between the servers, daemon to daemon,
#      against the same bytes through the client, and the local driver's
#      device-to-device copy (tests/bench/peer_bench.c), with ratios.
#
#   tests/gpu/devlist.sh BUILD_DIR
set -u
cd "$(dirname "$0")/../.."
BUILD=${1:?usage: devlist.sh BUILD_DIR}
OUTDIR=$(mktemp -d /tmp/lupine-devlist.XXXXXX)

. tests/gpu/compare_lib.sh

export LUPINE_DEVLIST_BACKEND=cuda LUPINE_DEVLIST_LOCAL_LIBDIR="$real_dir"
if env -u LD_LIBRARY_PATH python3 tests/e2e/test_devlist.py "$BUILD/daemon/lupined" "$BUILD/cli/lupinectl" \
        "$BUILD/tests" "$BUILD/shim" tests/kernels >"$OUTDIR/devlist.out" 2>&1; then
        ok "test_devlist.py on the H200: $(grep -c '^ok' "$OUTDIR/devlist.out") checks"
else
        bad "test_devlist.py on the H200" "$OUTDIR/devlist.out"
fi
grep -E '^(ok|FAIL) ' "$OUTDIR/devlist.out" | sed 's/^/    /'

# ---- PyTorch across the two servers: against the local driver (one GPU)
pt_local=$OUTDIR/torch.local
pt_remote=$OUTDIR/torch.lupine
start_pair() { # sets pa, pb; the two lupined of the next checks
        pa=$((20000 + RANDOM % 20000))
        pb=$((pa + 1))
        for p in $pa $pb; do
                env -u LD_LIBRARY_PATH "$BUILD/daemon/lupined" --backend cuda --listen "127.0.0.1:$p" \
                        --listen "unix:$OUTDIR/$p.sock" --health-policy off >"$OUTDIR/lupined-$p.log" 2>&1 &
        done
        for p in $pa $pb; do
                for _ in $(seq 100); do [ -S "$OUTDIR/$p.sock" ] && break; sleep 0.1; done
        done
}
stop_pair() {
        kill -TERM $(jobs -p) 2>/dev/null
        wait
}
start_pair
env LD_LIBRARY_PATH="$real_dir:$libdirs" python3 tests/gpu/torch_devlist.py >"$pt_local" 2>"$pt_local.err" ||
        bad "torch_devlist.py on the local driver" "$pt_local.err"
env LD_LIBRARY_PATH="$PWD/$BUILD/shim:$libdirs" LUPINE_SERVER="127.0.0.1:$pa,127.0.0.1:$pb" LUPINE_SESSION=torch-dl \
        python3 tests/gpu/torch_devlist.py >"$pt_remote" 2>"$pt_remote.err" ||
        bad "torch_devlist.py on two lupined" "$pt_remote.err"
if grep -q 'torch_devlist: done' "$pt_remote" && cmp -s "$pt_local" "$pt_remote" &&
        grep -q "devices 2" "$pt_remote.err" && grep -q "peer access 0 -> 1 False" "$pt_remote.err" &&
        [ "$(grep -c 'peer copy of' "$OUTDIR/lupined-$pa.log" "$OUTDIR/lupined-$pb.log" | awk -F: '{s+=$2} END {print s}')" -gt 0 ]; then
        ok "PyTorch on two servers: tensors moved between them daemon to daemon, equal to the local driver's"
else
        bad "PyTorch on two servers against local" "$pt_remote.err"
        diff "$pt_local" "$pt_remote" | head -n 20
fi
stop_pair

# ---- the speed of copies between the servers
rm -f "$OUTDIR"/*.sock
start_pair
env LD_LIBRARY_PATH="$real_dir" "$BUILD/tests/bench/peer_bench" 1024 >"$OUTDIR/peer.local" 2>&1 ||
        bad "peer_bench on the local driver" "$OUTDIR/peer.local"
env LD_LIBRARY_PATH="$PWD/$BUILD/shim" LUPINE_SERVER="127.0.0.1:$pa,127.0.0.1:$pb" LUPINE_SESSION=peer-bench \
        "$BUILD/tests/bench/peer_bench" 1024 >"$OUTDIR/peer.lupine" 2>&1 ||
        bad "peer_bench between two lupined" "$OUTDIR/peer.lupine"
stop_pair
gbs() { awk -v w="$2" '$1 == "peer" && $2 == w {print $3}' "$1"; }
ld=$(gbs "$OUTDIR/peer.local" direct)
rd=$(gbs "$OUTDIR/peer.lupine" direct)
rc=$(gbs "$OUTDIR/peer.lupine" client)
if [ -n "$ld" ] && [ -n "$rd" ] && [ -n "$rc" ]; then
        ok "peer_bench: 1 GiB checked both ways"
        awk -v ld="$ld" -v rd="$rd" -v rc="$rc" 'BEGIN {
                printf "| 1 GiB copy | GB/s | vs local |\n|---|---|---|\n"
                printf "| local driver, device to device (one GPU) | %.2f | 1 |\n", ld
                printf "| lupine, between two servers, daemon to daemon | %.2f | %.4f |\n", rd, rd / ld
                printf "| lupine, the same bytes through the client | %.2f | %.4f |\n", rc, rc / ld
                printf "daemon to daemon vs through the client: %.2fx\n", rd / rc }'
fi

summary devlist
