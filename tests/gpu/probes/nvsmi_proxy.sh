#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Probe for issue 16: nvidia-smi's private NVML table calls, with their
# arguments and what each slot wrote, on the real library and on lupine's
# (nvsmi_proxy.c in front of either). Prints the calls of `dmon -c 1`
# briefly and leaves the full logs in $OUT/nvsmi-proxy.tgz.
#   tests/gpu/probes/nvsmi_proxy.sh BUILD_DIR [nvidia-smi args...]
set -u
cd "$(dirname "$0")/../../.." || exit 1
BUILD=${1:?usage: nvsmi_proxy.sh BUILD_DIR [ARGS...]}
shift
[ $# -gt 0 ] || set -- dmon -c 1
OUTDIR=$(mktemp -d /tmp/lupine-nvsmiproxy.XXXXXX)
. tests/gpu/compare_lib.sh
gcc -shared -fPIC -O1 -o "$OUTDIR/proxy.so" tests/gpu/probes/nvsmi_proxy.c -ldl || exit 1
start_lupined || exit 1
for where in local lupine; do
        log=$OUTDIR/$where.log
        if [ $where = local ]; then
                env LD_PRELOAD="$OUTDIR/proxy.so" NVSMI_PROXY_LOG="$log" timeout 60 nvidia-smi "$@" >"$OUTDIR/$where.out" 2>&1
        else
                env LD_PRELOAD="$OUTDIR/proxy.so" NVSMI_PROXY_LOG="$log" LD_LIBRARY_PATH="$PWD/$BUILD/shim" \
                        LUPINE_SERVER="unix:$sock" timeout 60 nvidia-smi "$@" >"$OUTDIR/$where.out" 2>&1
        fi
        echo "$where nvidia-smi $*: rc $?"
        sed 's/^/    out: /' "$OUTDIR/$where.out" | head -n 6
        # each call: the slot, its arguments, its result and what it wrote (first 48 bytes of each)
        awk '/^slot /{print "  " $0} /^  -> /{print "    " $0} /^    out /{print "  " substr($0, 1, 120)}' "$log" | head -n 80
done
stop_lupined
tar -C "$OUTDIR" -czf "${OUT:-/tmp}/nvsmi-proxy.tgz" local.log lupine.log local.out lupine.out 2>/dev/null
rm -rf "$OUTDIR"
