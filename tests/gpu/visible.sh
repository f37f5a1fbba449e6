#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CUDA_VISIBLE_DEVICES on a real GPU: e2e_visible (and rt_visible, the CUDA
# runtime, when it was built) under each list below, on the local driver
# and through lupine's libcuda.so.1; the outputs must be the same (cuInit's
# answer, the count, each device's UUID and PCI bus id, the per-device
# checks) but for the name's " (lupine)" marker.
#
#   tests/gpu/visible.sh [BUILD_DIR]
#
# The host has one GPU, so the lists are about which entries the driver
# takes: indices, UUIDs and prefixes, the forms it tolerates, where a list
# ends, duplicates. One "ok"/"FAIL" line per list and program, and the
# summary line "lupine visible: PASS n/n" (or FAIL).
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${1:-build}
OUTDIR=$(mktemp -d /tmp/lupine-visible.XXXXXX)

[ -x "$BUILD/tests/e2e_visible" ] || { echo "lupine visible: FAILED, no $BUILD/tests/e2e_visible (build first)"; exit 1; }
. tests/gpu/compare_lib.sh
start_lupined || { echo "lupine visible: FAILED, lupined did not start"; exit 1; }

U=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -n 1)
H=${U#GPU-}
lists=(UNSET "" 0 1 -1 0,1 1,0 0,0 "0, 0" " 0" "0 " +0 0abc ,0 0, 0,,1 0,bogus bogus,0 0,bogus,0
        "$U" "${U:0:12}" "${U:0:5}" GPU- GPU "$H" "gpu-$H" "GPU-${H^^}" "GPU-${H//-/}" "MIG-$H" "${U}0" "${U}x"
        "${U:0:9}x" "$U,0" "0,$U" "$U,$U" " $U" "$U ,0" "${U:0:12},1")

progs=("$BUILD/tests/e2e_visible")
[ -x "$BUILD/tests/rt_visible" ] && progs+=("$BUILD/tests/rt_visible")
n=0
for v in "${lists[@]}"; do
        n=$((n + 1))
        for p in "${progs[@]}"; do
                name=$(basename "$p")
                setenv=(env CUDA_VISIBLE_DEVICES="$v")
                [ "$v" = UNSET ] && setenv=(env -u CUDA_VISIBLE_DEVICES)
                f="$OUTDIR/$name.$n"
                timeout 120 "${setenv[@]}" "${local_env[@]}" "$p" >"$f.local" 2>"$f.local.err"
                echo "rc $?" >>"$f.local"
                timeout 120 "${setenv[@]}" "${remote_env[@]}" "$p" >"$f.remote" 2>"$f.remote.err"
                echo "rc $?" >>"$f.remote"
                if diff "$f.local" <(sed 's/ (lupine)//' "$f.remote") >"$f.diff"; then
                        ok "$name, CUDA_VISIBLE_DEVICES=[$v]: as the driver ($(head -n 2 "$f.local" | tr '\n' ' '))"
                else
                        cat "$f.local.err" "$f.remote.err" >>"$f.diff"
                        bad "$name, CUDA_VISIBLE_DEVICES=[$v]: differs from the driver" "$f.diff"
                fi
        done
done

stop_lupined
tar czf "${OUT:-/tmp}/visible-logs.tgz" -C "$OUTDIR" . && echo "logs: ${OUT:-/tmp}/visible-logs.tgz"
summary visible
