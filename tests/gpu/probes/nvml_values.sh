#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Probe: nvml_values.py with the host's libnvidia-ml.so.1, then through
# lupine's, side by side.   tests/gpu/probes/nvml_values.sh BUILD_DIR
set -u
cd "$(dirname "$0")/../../.." || exit 1
BUILD=${1:?usage: nvml_values.sh BUILD_DIR}
OUTDIR=$(mktemp -d /tmp/lupine-nvmlvals.XXXXXX)
. tests/gpu/compare_lib.sh
start_lupined || exit 1
python3 tests/gpu/probes/nvml_values.py >"$OUTDIR/local" 2>&1
env LD_LIBRARY_PATH="$PWD/$BUILD/shim" LUPINE_SERVER="unix:$sock" python3 tests/gpu/probes/nvml_values.py \
        >"$OUTDIR/lupine" 2>&1
stop_lupined
paste -d'|' "$OUTDIR/local" "$OUTDIR/lupine" | sed 's/|/   ||   lupine: /'
grep -i "nvml" "$OUTDIR/lupined.log" | head -n 5
