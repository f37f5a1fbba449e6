#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# lupine on a real GPU: one command, one summary line per part and one
# for the whole run.
#
#   tests/gpu/run.sh [BUILD_DIR] [PART...]
#
# PARTs (default: all, in this order; each fits one 10-minute device call):
#   core      the e2e scenarios on the real driver and through lupine, the
#             restart test with real kernels, big sessions, checkpoint speed
#   runtime   unmodified runtime programs, PyTorch and CuPy against local,
#             a 64 GiB hot restart, GPT through 5 upgrades
#   families  issue 13's families (graphs, pools, VMM) and the frameworks
#             that use them, against local (tests/gpu/families.sh)
#   tls       issue 15: e2e programs, PyTorch and GPT over TLS with a token,
#             against local (tests/gpu/tls.sh)
#   bench     the benchmarks, local driver against lupine (plaintext and TLS)
#   visible   issue 16: CUDA_VISIBLE_DEVICES lists, local driver against
#             lupine (tests/gpu/visible.sh)
#   model     issue 14: arrays, textures, JIT linking, mapped and managed
#             memory, batched cuBLAS, cuFFT, against local, and again across
#             a durable restart and an upgrade (tests/gpu/model.sh)
#   ops       issue 18: lupinectl info, monitor, diag, log and bench against
#             nvidia-smi and the local driver; a thermal limit below the
#             temperature drains a session that a second lupined restores
#             (tests/gpu/ops.sh)
#   fleet     issue 17: two lupined on the one GPU as two hosts on one
#             checkpoint store: adoption after a SIGKILL with periodic
#             checkpoints, a twin refused, a 4 GiB session adopted after a
#             drain (tests/gpu/fleet.sh)
#   devlist   issue 17: two lupined on the one GPU as two servers of one
#             device list: the e2e test against local, copies between the
#             servers daemon to daemon, their speed (tests/gpu/devlist.sh)
#   migrate   issue 17's benchmarks: lupinectl migrate of 1, 4 and 16 GiB
#             sessions rewriting 1% and 10% of their memory, with pre-copy
#             and without, and incremental against full checkpoints
#             (tests/gpu/migrate_bench.py)
#   nvml      issue 16: the real nvidia-smi (plain, -L, -q, --query-gpu, dmon),
#             pynvml and PyTorch's NVML calls, locally and through lupine's
#             libnvidia-ml.so.1 (tests/gpu/nvml.sh)
#
# Uses BUILD_DIR (default: build) when it holds a lupined; otherwise builds
# with meson there (which needs liburing, libsystemd and cmocka headers).
# Starts lupined on the real driver, runs the e2e scenarios through the
# shim, and runs the same client programs directly on the real driver as the
# baseline that lupine's answers are compared with.
set -u
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
shift 2>/dev/null || true
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(core runtime families model ops fleet devlist migrate nvml visible tls bench)
LOG=${OUT:-/tmp}/gpu-run.log
: > "$LOG"
pass=0
fail=0
failed=()

step() { # name, command...
        local name=$1
        shift
        echo "=== $name" | tee -a "$LOG"
        if "$@" >>"$LOG" 2>&1; then
                pass=$((pass + 1))
                echo "ok   $name" | tee -a "$LOG"
        else
                fail=$((fail + 1))
                failed+=("$name")
                echo "FAIL $name" | tee -a "$LOG"
                tail -n 40 "$LOG" | sed 's/^/    /'
        fi
}

if [ ! -x "$BUILD/daemon/lupined" ]; then
        echo "no $BUILD/daemon/lupined: building" | tee -a "$LOG"
        meson setup "$BUILD" >>"$LOG" 2>&1 && ninja -C "$BUILD" >>"$LOG" 2>&1 || {
                echo "lupine gpu: FAILED to build (see $LOG)"
                exit 1
        }
fi

gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
[ -n "$gpu" ] || { echo "lupine gpu: SKIPPED (no GPU: nvidia-smi found none)"; exit 77; }
echo "GPU: $gpu" | tee -a "$LOG"
missing=$(ldd "$BUILD/daemon/lupined" "$BUILD/shim/libcuda.so.1" | grep 'not found' || true)
[ -z "$missing" ] || { echo "lupine gpu: FAILED, missing libraries: $missing"; exit 1; }

# Each part counts its own steps and prints one summary line.
part_start() { part_pass=$pass; part_fail=$fail; }
part_end() { # name
        local p=$((pass - part_pass)) f=$((fail - part_fail))
        if [ $f -eq 0 ]; then echo "lupine gpu $1: PASS $p/$((p + f))"; else echo "lupine gpu $1: FAIL $f of $((p + f))"; fi | tee -a "$LOG"
}

part_core() {
        # The baseline: the test programs themselves, straight on the real driver.
        real_dir=$(dirname "$(ldconfig -p | awk '/libcuda.so.1 /{print $NF; exit}')")
        export -n LUPINE_SERVER 2>/dev/null || true
        step "baseline e2e_basic on the real driver" env LD_LIBRARY_PATH="$real_dir" "$BUILD/tests/e2e_basic"
        step "baseline e2e_threads on the real driver" env LD_LIBRARY_PATH="$real_dir" "$BUILD/tests/e2e_threads"
        step "baseline e2e_kernels on the real driver" env LD_LIBRARY_PATH="$real_dir" "$BUILD/tests/e2e_kernels" tests/kernels 100000
        step "baseline e2e_sticky on the real driver" env LD_LIBRARY_PATH="$real_dir" "$BUILD/tests/e2e_sticky" tests/kernels
        step "baseline e2e_export_tables on the real driver" env LD_LIBRARY_PATH="$real_dir" "$BUILD/tests/e2e_export_tables" tests/kernels
        # device printf: the driver itself puts each round's lines between the host lines around it
        step "baseline e2e_printf on the real driver (host and device lines in order)" sh -c \
                'env LD_LIBRARY_PATH="$1" "$2/tests/e2e_printf" tests/kernels | python3 -c "import sys; sys.path.insert(0, \"tests/e2e\"); import run_e2e; p = run_e2e.printf_order_problems(sys.stdin.read()); print(p or \"in order\"); sys.exit(1 if p else 0)"' \
                sh "$real_dir" "$BUILD"

        # Everything through lupine on the H200.
        step "e2e scenarios through lupined --backend cuda" \
                python3 tests/e2e/run_e2e.py "$BUILD/daemon/lupined" "$BUILD/tests" "$BUILD/shim" --backend cuda

        # Issue 4 on the real GPU: the restart test with real kernels (3 SIGTERM
        # restarts under a verified workload, then every fault case), and sessions
        # of 4 and 16 GiB checkpointed to this machine's disk and restored, every
        # byte verified. LUPINE_GPU_QUICK=1 skips them too.
        if [ -z "${LUPINE_GPU_QUICK:-}" ]; then
                step "restart test with real kernels (tests/e2e/test_restart.py, 3 restarts and the fault cases)" \
                        env LUPINE_TEST_BACKEND=cuda python3 tests/e2e/test_restart.py "$BUILD/daemon/lupined" "$BUILD/tests" \
                        "$BUILD/shim" tests/kernels 3
                step "1, 4 and 16 GiB sessions checkpointed to disk and restored (tests/gpu/bigsession.py)" \
                        python3 tests/gpu/bigsession.py "$BUILD" 1 4 16
                grep -h "GiB session: drain" "$LOG" | tail -n 3
                # checkpoint throughput to host memory (the example provider, direct
                # writes, every save read back and checked) and to /dev/shm with
                # the restore, 1, 4 and 16 GiB; fails if any byte does not match
                step "checkpoint and restore throughput, 1/4/16 GiB (tests/bench/ckpt_bench.py)" \
                        python3 tests/bench/ckpt_bench.py --build "$BUILD" --backend cuda --gib 1,4,16 \
                        --provider example,dir --hash gpu --lanes auto
                grep -h "^ *[0-9]* *\(example\|dir\) " "$LOG" | tail -n 6
        fi
}

part_runtime() {
        # Issue 5 and 6 on the real GPU: unmodified runtime programs, PyTorch and
        # CuPy against the local driver; a 64 GiB hot restart and upgrades under a
        # kernel loop; GPT training through 5 upgrades, bitwise identical weights.
        # LUPINE_GPU_QUICK=1 skips them.
        if [ -z "${LUPINE_GPU_QUICK:-}" ]; then
                rt_dir="$BUILD/rt"
                [ -x "$rt_dir/rt_full_shared" ] || tests/gpu/rt/build.sh "$rt_dir" >>"$LOG" 2>&1 || echo "(nvcc could not build $rt_dir)"
                step "runtime programs, PyTorch and CuPy: same output as local (tests/gpu/runtime.sh)" \
                        tests/gpu/runtime.sh "$BUILD" "$rt_dir" 120
                grep -h "gpt_train: local\|lupine runtime:" "$LOG" | tail -n 2
                step "hot restart of ${LUPINE_GPU_HOT_GIB:-64} GiB, and upgrades under a kernel loop (tests/gpu/hot_restart.py)" \
                        python3 tests/gpu/hot_restart.py "$BUILD" "${LUPINE_GPU_HOT_GIB:-64}"
                grep -h "GiB hot restart:\|upgrade under a kernel loop:" "$LOG" | tail -n 2
                if python3 -c 'import torch' 2>/dev/null; then
                        step "PyTorch GPT through 5 upgrades, weights bitwise identical to local (tests/gpu/gpt_upgrades.py)" \
                                python3 tests/gpu/gpt_upgrades.py "$BUILD" 120 5
                        grep -h "gpt_upgrades: [0-9]* re-execs\|upgrade pause" "$LOG" | tail -n 2
                fi
        fi
}

# Issue 13 on the real GPU: graphs, pools, VMM and the frameworks that use
# them, each against the local driver (LUPINE_GPU_QUICK=1 skips them too).
part_families() {
        if [ -z "${LUPINE_GPU_QUICK:-}" ]; then
                rt_dir="$BUILD/rt"
                [ -x "$rt_dir/rt_families_shared" ] || tests/gpu/rt/build.sh "$rt_dir" >>"$LOG" 2>&1 || echo "(nvcc could not build $rt_dir)"
                step "graphs, pools, VMM and frameworks: same output as local (tests/gpu/families.sh)" \
                        tests/gpu/families.sh "$BUILD" "$rt_dir"
                grep -h "lupine families:" "$LOG" | tail -n 1
        fi
}

part_model() {
        local model_dir="$BUILD/model"
        [ -d "$model_dir" ] || tests/gpu/model/build.sh "$model_dir" >>"$LOG" 2>&1 || echo "(nvcc could not build $model_dir)"
        step "arrays, textures, JIT, mapped and managed memory, cuBLAS, cuFFT: same output as local, also across restarts (tests/gpu/model.sh)" \
                tests/gpu/model.sh "$BUILD" "$model_dir"
        grep -h "lupine model:" "$LOG" | tail -n 1
}

# Issue 16: nvidia-smi, pynvml and PyTorch's NVML calls through lupine's
# libnvidia-ml.so.1, against the local NVML in the same job.
part_nvml() {
        step "nvidia-smi, pynvml, torch through lupine's NVML: same GPUs as local (tests/gpu/nvml.sh)" \
                tests/gpu/nvml.sh "$BUILD"
        grep -h "lupine nvml:" "$LOG" | tail -n 1
}

part_visible() {
        step "CUDA_VISIBLE_DEVICES lists: e2e_visible and rt_visible the same as local (tests/gpu/visible.sh)" \
                tests/gpu/visible.sh "$BUILD"
        grep -h "lupine visible:" "$LOG" | tail -n 1
}

part_tls() {
        step "e2e programs, PyTorch and GPT over TLS 1.3 with a token: same output as local (tests/gpu/tls.sh)" \
                tests/gpu/tls.sh "$BUILD"
        grep -h "lupine tls:\|gpt_train over TLS" "$LOG" | tail -n 2
}

part_ops() {
        step "lupinectl against the real GPU, and a thermal drain adopted by a second lupined (tests/gpu/ops.sh)" \
                tests/gpu/ops.sh "$BUILD"
        grep -h "lupine ops:" "$LOG" | tail -n 1
}

part_fleet() {
        step "two lupined as two hosts: leases, adoption after SIGKILL and after a drain (tests/gpu/fleet.sh)" \
                tests/gpu/fleet.sh "$BUILD"
        grep -h "lupine fleet:" "$LOG" | tail -n 1
}

part_devlist() {
        step "two lupined as two servers of one device list, copies between them (tests/gpu/devlist.sh)" \
                tests/gpu/devlist.sh "$BUILD"
        grep -h "^| \|daemon to daemon vs\|lupine devlist:" "$LOG" | tail -n 7
}

part_migrate() {
        step "migration pause with and without pre-copy, incremental checkpoints (tests/gpu/migrate_bench.py)" \
                python3 tests/gpu/migrate_bench.py "$BUILD"
        grep -h "^| \|lupine migrate bench:" "$LOG" | tail -n 9
}

part_bench() {
        if [ -z "${LUPINE_GPU_NO_BENCH:-}" ]; then
                echo "=== benchmarks (local driver vs lupine, same job)" | tee -a "$LOG"
                tests/bench/run.sh "$BUILD" ${LUPINE_GPU_QUICK_BENCH:+quick} 2>&1 | tee -a "$LOG" || echo "benchmarks failed (see $LOG)"
        fi
}

for part in "${parts[@]}"; do
        case $part in
        core | runtime | families | model | ops | fleet | devlist | migrate | nvml | visible | tls | bench) ;;
        *) echo "run.sh: unknown part '$part' (parts: core runtime families model ops fleet devlist migrate nvml visible tls bench)"; exit 2 ;;
        esac
done
for part in "${parts[@]}"; do
        part_start
        "part_$part"
        part_end "$part"
done

if [ "$fail" -eq 0 ]; then
        echo "lupine gpu: PASS $pass/$((pass + fail)) on $gpu"
else
        echo "lupine gpu: FAIL $fail of $((pass + fail)) (${failed[*]}) on $gpu; log: $LOG"
fi
[ "$fail" -eq 0 ]
