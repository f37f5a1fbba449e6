#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Probe for issue 16 (nvidia-smi refuses lupine's libnvidia-ml.so.1 with
# "Mismatch in versions"): which NVML symbols nvidia-smi looks up, in order,
# with the real library and with lupine's, and which of them lupine's does
# not define. Uses the dynamic loader's own trace (LD_DEBUG), so it needs
# no ltrace. Writes $OUT/nvsmi-*.txt and prints a short digest.
#
#   tests/gpu/probes/nvsmi_symbols.sh BUILD_DIR
set -u
cd "$(dirname "$0")/../../.."
BUILD=${1:?usage: nvsmi_symbols.sh BUILD_DIR}
OUTDIR=${OUT:-/tmp}/nvsmi
mkdir -p "$OUTDIR"
. tests/gpu/compare_lib.sh
start_lupined || exit 1
looked_up() { # LD_DEBUG output -> nvml* symbol names looked up, first time each, in order
        grep -o 'symbol=nvml[A-Za-z0-9_]*' "$1" | cut -d= -f2 | awk '!seen[$0]++'
}
for form in "-L" "" "-q"; do
        tag=${form:-plain}
        tag=${tag#-}
        LD_DEBUG=symbols,bindings LD_DEBUG_OUTPUT="$OUTDIR/local-$tag" timeout 60 nvidia-smi $form \
                >"$OUTDIR/nvsmi-local-$tag.out" 2>&1
        echo "local nvidia-smi $form: rc $?"
        LD_DEBUG=symbols,bindings LD_DEBUG_OUTPUT="$OUTDIR/remote-$tag" timeout 60 \
                env LD_LIBRARY_PATH="$PWD/$BUILD/shim" LUPINE_SERVER="unix:$sock" nvidia-smi $form \
                >"$OUTDIR/nvsmi-remote-$tag.out" 2>&1
        echo "lupine nvidia-smi $form: rc $?: $(head -c 200 "$OUTDIR/nvsmi-remote-$tag.out" | tr '\n' ' ')"
        cat "$OUTDIR"/local-"$tag".* >"$OUTDIR/ld-local-$tag.txt" 2>/dev/null
        cat "$OUTDIR"/remote-"$tag".* >"$OUTDIR/ld-remote-$tag.txt" 2>/dev/null
        rm -f "$OUTDIR"/local-"$tag".* "$OUTDIR"/remote-"$tag".*
        looked_up "$OUTDIR/ld-local-$tag.txt" >"$OUTDIR/nvsmi-syms-local-$tag.txt"
        looked_up "$OUTDIR/ld-remote-$tag.txt" >"$OUTDIR/nvsmi-syms-remote-$tag.txt"
        echo "  symbols looked up: local $(wc -l <"$OUTDIR/nvsmi-syms-local-$tag.txt"), lupine $(wc -l <"$OUTDIR/nvsmi-syms-remote-$tag.txt")"
        echo "  lupine's run, last 8 looked up: $(tail -n 8 "$OUTDIR/nvsmi-syms-remote-$tag.txt" | tr '\n' ' ')"
        missing=$(for s in $(cat "$OUTDIR/nvsmi-syms-remote-$tag.txt"); do
                nm -D --defined-only "$BUILD/shim/libnvidia-ml.so.1" | grep -qw "$s" || echo "$s"; done | tr '\n' ' ')
        echo "  looked up but not in lupine's library: ${missing:-none}"
done
stop_lupined
echo "nvidia-smi strings naming internal NVML entry points:"
strings "$(command -v nvidia-smi)" | grep -i 'nvmlInternal\|GetExportTable' | head -n 10 | sed 's/^/  /'
echo "real libnvidia-ml: $(ldconfig -p | awk '/libnvidia-ml.so.1 /{print $NF; exit}')"
tar -C "$OUTDIR/.." -czf "${OUT:-/tmp}/nvsmi-probe.tgz" nvsmi 2>/dev/null && rm -rf "$OUTDIR"
