#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Probe for issue 16: what plain nvidia-smi and dmon ask lupine's NVML that
# it does not answer (LUPINE_NVML_DEBUG=1: internal slots and field ids),
# with their exit status.   tests/gpu/probes/nvsmi_debug.sh BUILD_DIR
set -u
cd "$(dirname "$0")/../../.." || exit 1
BUILD=${1:?usage: nvsmi_debug.sh BUILD_DIR}
OUTDIR=$(mktemp -d /tmp/lupine-nvsmidbg.XXXXXX)
. tests/gpu/compare_lib.sh
start_lupined || exit 1
for form in "" "dmon -c 1"; do
        env LUPINE_NVML_DEBUG=1 LD_LIBRARY_PATH="$PWD/$BUILD/shim" LUPINE_SERVER="unix:$sock" \
                timeout 60 nvidia-smi $form >"$OUTDIR/out" 2>"$OUTDIR/err"
        echo "nvidia-smi $form: rc $?"
        grep -v "^lupine NVML: nvidia-smi's internal slot" "$OUTDIR/err" | sed 's/^lupine-nvml\[[0-9]*\]: //' |
                sort | uniq -c | sort -rn | head -n 40 | sed 's/^/    /'
        echo "    internal slots: $(grep -o "internal slot [0-9]*" "$OUTDIR/err" | awk '{print $3}' | sort -n | uniq -c |
                awk '{printf "%s(%s) ", $2, $1}')"
        tail -n 3 "$OUTDIR/out" | sed 's/^/    out: /'
done
stop_lupined
