#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 16 on a real GPU: the real nvidia-smi, locally and through lupine's
# libnvidia-ml.so.1 (LD_LIBRARY_PATH at the shim's directory), in the same
# job; pynvml with the local NVML off the library path; PyTorch's NVML calls.
#
#   tests/gpu/nvml.sh BUILD_DIR
#
# The GPU, UUID and memory total must agree with the local run, the name
# carries lupine's marker " (lupine)", and every --query-gpu field is
# filled. Logs end up in $OUT/nvml-logs.tgz (or /tmp). One "ok"/"FAIL"
# line per check and a summary line "lupine nvml: ...".
set -u
cd "$(dirname "$0")/../.."
BUILD=${1:?usage: nvml.sh BUILD_DIR}
OUTDIR=$(mktemp -d /tmp/lupine-nvml.XXXXXX)

. tests/gpu/compare_lib.sh
start_lupined || { echo "lupine nvml: FAILED, lupined did not start"; exit 1; }
shim_dir="$PWD/$BUILD/shim"
remote=(env LD_LIBRARY_PATH="$shim_dir" LUPINE_SERVER="unix:$sock")
query=name,uuid,memory.total,memory.used,utilization.gpu,temperature.gpu,power.draw,clocks.sm

# each nvidia-smi form, locally and through lupine
run_both() { # name, nvidia-smi args...
        local name=$1
        shift
        timeout 120 nvidia-smi "$@" >"$OUTDIR/$name.local" 2>&1
        echo $? >"$OUTDIR/$name.local.rc"
        timeout 120 "${remote[@]}" nvidia-smi "$@" >"$OUTDIR/$name.remote" 2>&1
        echo $? >"$OUTDIR/$name.remote.rc"
        if [ "$(cat "$OUTDIR/$name.remote.rc")" = 0 ]; then ok "nvidia-smi $* through lupine"; else
                bad "nvidia-smi $* through lupine (rc $(cat "$OUTDIR/$name.remote.rc"))" "$OUTDIR/$name.remote"; fi
}
run_both plain
run_both list -L
run_both query -q
run_both csv --query-gpu=$query --format=csv,noheader,nounits
run_both dmon dmon -c 3

# the same GPUs: -L lines equal once the marker is taken off, and the marker is there
if grep -q ' (lupine)' "$OUTDIR/list.remote" &&
        diff <(grep '^GPU ' "$OUTDIR/list.local") <(grep '^GPU ' "$OUTDIR/list.remote" | sed 's/ (lupine)//') \
                >"$OUTDIR/list.diff"; then
        ok "nvidia-smi -L: the same GPUs and UUIDs, marked (lupine)"
else
        bad "nvidia-smi -L differs from local" "$OUTDIR/list.diff"
fi
# temperature and power are the GPU's own, not zeros: within 15 C and
# within a factor of 3 of the local reading taken a moment before
if awk -F, 'NR==FNR{lt=$6; lp=$7; next} {rt=$6; rp=$7}
        END{d=rt-lt; if (d<0) d=-d; exit !(lt>0 && d<=15 && lp>0 && rp>=lp/3 && rp<=lp*3)}' \
        "$OUTDIR/csv.local" "$OUTDIR/csv.remote"; then
        ok "--query-gpu: temperature and power through lupine agree with local"
else
        bad "--query-gpu: temperature or power through lupine differ from local" "$OUTDIR/csv.remote"
fi
# name, uuid and memory.total agree; every field is filled
if diff <(cut -d, -f1-3 "$OUTDIR/csv.local") <(cut -d, -f1-3 "$OUTDIR/csv.remote" | sed 's/ (lupine)//') \
        >"$OUTDIR/csv.diff"; then
        ok "--query-gpu: name, uuid, memory.total agree with local"
else
        bad "--query-gpu: name, uuid or memory.total differ from local" "$OUTDIR/csv.diff"
fi
if [ -s "$OUTDIR/csv.remote" ] && ! grep -qi 'N/A\|Not Supported\|Unknown Error' "$OUTDIR/csv.remote"; then
        ok "--query-gpu: every field filled through lupine ($(head -n 1 "$OUTDIR/csv.remote"))"
else
        bad "--query-gpu: a field is not filled through lupine" "$OUTDIR/csv.remote"
fi
if [ "$(grep -cv '^#' "$OUTDIR/dmon.remote")" -ge 3 ]; then ok "dmon -c 3: 3 samples through lupine"; else
        bad "dmon -c 3: fewer than 3 samples through lupine" "$OUTDIR/dmon.remote"; fi
if grep -q 'Product Name' "$OUTDIR/query.remote"; then ok "nvidia-smi -q: a full report through lupine"; else
        bad "nvidia-smi -q: no report through lupine" "$OUTDIR/query.remote"; fi
grep -h "not supported by lupine" "$OUTDIR"/*.remote | sed 's/.*: \(nvml[A-Za-z0-9_]*\) is not.*/\1/' | sort |
        uniq -c | sort -rn >"$OUTDIR/unsupported.txt"
echo "    NVML functions nvidia-smi called that lupine does not answer: $(wc -l <"$OUTDIR/unsupported.txt")" \
        "(list in nvml-logs.tgz: unsupported.txt): $(awk '{print $2}' "$OUTDIR/unsupported.txt" | head -n 12 | tr '\n' ' ')"

# pynvml: the remote GPU, from lupine's library and not the local one
if python3 -c 'import pynvml' 2>/dev/null; then
        cat >"$OUTDIR/pynvml_check.py" <<'PY'
import pynvml as N
N.nvmlInit()
maps = open('/proc/self/maps').read()
libs = sorted({ln.split()[-1] for ln in maps.splitlines() if 'libnvidia-ml' in ln})
print('LIBS', libs)
for i in range(N.nvmlDeviceGetCount()):
    h = N.nvmlDeviceGetHandleByIndex(i)
    m = N.nvmlDeviceGetMemoryInfo(h)
    print('DEV', i, N.nvmlDeviceGetName(h), N.nvmlDeviceGetUUID(h), m.total)
N.nvmlShutdown()
PY
        "${remote[@]}" python3 "$OUTDIR/pynvml_check.py" >"$OUTDIR/pynvml.out" 2>&1
        if grep -q "LIBS \['$shim_dir/libnvidia-ml.so.1'\]" "$OUTDIR/pynvml.out" &&
                grep -q '^DEV 0 .*(lupine)' "$OUTDIR/pynvml.out"; then
                ok "pynvml: the remote GPU through lupine's libnvidia-ml.so.1 only"
        else
                bad "pynvml through lupine" "$OUTDIR/pynvml.out"
        fi
else
        bad "pynvml is not installed (pip install nvidia-ml-py)"
fi

# PyTorch's NVML-based calls
if python3 -c 'import torch' 2>/dev/null; then
        cat >"$OUTDIR/torch_nvml.py" <<'PY'
import os, torch
print('COUNT', torch.cuda.device_count())
x = torch.ones(1 << 20, device='cuda')
torch.cuda.synchronize()
print('UTIL', torch.cuda.utilization())
print('PROCS', torch.cuda.list_gpu_processes().replace('\n', ' | '))
print('MYPID', os.getpid(), file=__import__('sys').stderr)
PY
        # the local run says whether this host's NVML shows processes at all
        # (in a container with its own pid namespace, NVML's pids are the
        # host's); through lupine the session's process must show exactly
        # when the local one does
        "${local_env[@]}" python3 "$OUTDIR/torch_nvml.py" >"$OUTDIR/torch.local.out" 2>"$OUTDIR/torch.local.err"
        "${remote[@]}" LD_LIBRARY_PATH="$shim_dir:$libdirs" python3 "$OUTDIR/torch_nvml.py" >"$OUTDIR/torch.out" 2>&1
        echo "    local:  $(grep '^PROCS' "$OUTDIR/torch.local.out") ($(grep MYPID "$OUTDIR/torch.local.err"))"
        echo "    lupine: $(grep '^PROCS' "$OUTDIR/torch.out") (worker pids: $(pgrep -f 'lupined.*worker' | tr '\n' ' '))"
        local_procs=no
        grep -q '^PROCS .*process .* uses' "$OUTDIR/torch.local.out" && local_procs=yes
        lupine_procs=no
        grep -q '^PROCS .*process .* uses' "$OUTDIR/torch.out" && lupine_procs=yes
        if grep -q '^COUNT [1-9]' "$OUTDIR/torch.out" && grep -q '^UTIL [0-9]' "$OUTDIR/torch.out" &&
                [ $local_procs = $lupine_procs ]; then
                ok "torch: device_count, utilization, list_gpu_processes through lupine (a process listed: $lupine_procs, as local)"
        else
                bad "torch's NVML calls through lupine (a process listed: local $local_procs, lupine $lupine_procs)" "$OUTDIR/torch.out"
        fi
        CUDA_VISIBLE_DEVICES=0 "${remote[@]}" LD_LIBRARY_PATH="$shim_dir:$libdirs" python3 -c \
                'import torch; print("VISIBLE", torch.cuda.device_count())' >"$OUTDIR/torch_visible.out" 2>&1
        if grep -q '^VISIBLE 1$' "$OUTDIR/torch_visible.out"; then
                ok "torch: CUDA_VISIBLE_DEVICES=0 shows one device"
        else
                bad "torch: CUDA_VISIBLE_DEVICES=0" "$OUTDIR/torch_visible.out"
        fi
fi

stop_lupined
cp "$OUTDIR/lupined.log" "$OUTDIR/lupined-nvml.log" 2>/dev/null
tar czf "${OUT:-/tmp}/nvml-logs.tgz" -C "$OUTDIR" . && echo "logs: ${OUT:-/tmp}/nvml-logs.tgz"
summary nvml
