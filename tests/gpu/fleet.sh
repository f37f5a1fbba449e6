#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 17 on the real GPU: two lupined on the one H200, acting as two hosts
# (--host-id gpuA, gpuB) on one checkpoint store, each with periodic
# checkpoints (--checkpoint-interval 2):
#   1. a verified workload (e2e_restart, exactly-once counter) holds on A
#      after a periodic checkpoint; A is SIGKILLed (supervisor and worker);
#      once A's lease expires, B adopts the session for its client, and
#      the output equals the local driver's;
#   2. a new session of a name that runs on B is refused at A, naming B;
#   3. a 4 GiB session on B drains for good (SIGTERM) while A runs: A
#      adopts it on demand, the client verifies every byte, and its first
#      call after the drain (the failover pause) is reported;
#   4. lupinectl migrate moves a 16 GiB session from A to B (the client
#      knows only A), reporting the bytes and the pause; every byte checks;
#   5. PyTorch GPT training is migrated A -> B -> A mid-run; its final
#      weights are bitwise equal to the local run's (tests/gpu/gpt_migrate.py).
#
#   tests/gpu/fleet.sh BUILD_DIR
set -u
cd "$(dirname "$0")/../.."
BUILD=${1:?usage: fleet.sh BUILD_DIR}
OUTDIR=$(mktemp -d /tmp/lupine-fleet.XXXXXX)

. tests/gpu/compare_lib.sh
pa=$((20000 + RANDOM % 20000))
pb=$((pa + 1))
ck=$OUTDIR/ck

start_host() { # label port host-id; sets ${label}_pid
        local label=$1 port=$2 id=$3
        env -u LD_LIBRARY_PATH "$BUILD/daemon/lupined" --backend "${LUPINE_FLEET_BACKEND:-cuda}" \
                --listen "127.0.0.1:$port" --listen "unix:$OUTDIR/$label.sock" --checkpoint-dir "$ck" \
                --host-id "$id" --lease-ttl 7 --checkpoint-interval 2 --session-ttl 300 --health-policy off \
                >>"$OUTDIR/$label.log" 2>&1 &
        eval "${label}_pid=$!"
        for _ in $(seq 100); do [ -S "$OUTDIR/$label.sock" ] && return 0; sleep 0.1; done
        echo "lupined $label did not start"
        tail -n 20 "$OUTDIR/$label.log"
        return 1
}
wait_log() { # file regex [seconds]
        for _ in $(seq $((${3:-30} * 10))); do grep -Eq "$2" "$1" && return 0; sleep 0.1; done
        return 1
}
count() { grep -Ec "$2" "$1"; }
client_env=(env LD_LIBRARY_PATH="$PWD/$BUILD/shim:$libdirs" LUPINE_RECONNECT_TIMEOUT=240 LUPINE_HEARTBEAT_MS=2000)
worker_of() { # log session: the pid of the session's worker
        grep -Eo "lupined-worker\[[0-9]+\]: info: session $2: (serving|restored)" "$1" | tail -n 1 | grep -Eo '[0-9]+' | head -n 1
}

start_host a "$pa" gpuA || { echo "lupine fleet: FAILED, lupined did not start"; exit 1; }
start_host b "$pb" gpuB || { echo "lupine fleet: FAILED, lupined did not start"; exit 1; }

# ---- 1. SIGKILL of A after a periodic checkpoint; B adopts
rounds=120
hold=30
echo go | env LD_LIBRARY_PATH="$real_dir:$libdirs" "$BUILD/tests/e2e_restart" tests/kernels $rounds 20 $hold \
        >"$OUTDIR/work.local.out" 2>&1 || bad "e2e_restart on the local driver" "$OUTDIR/work.local.out"
mkfifo "$OUTDIR/go"
"${client_env[@]}" LUPINE_SERVER="127.0.0.1:$pa|127.0.0.1:$pb" LUPINE_SESSION=fleet-job \
        "$BUILD/tests/e2e_restart" tests/kernels $rounds 20 $hold <"$OUTDIR/go" >"$OUTDIR/work.remote.out" \
        2>"$OUTDIR/work.remote.err" &
cpid=$!
exec 3>"$OUTDIR/go"
if wait_log "$OUTDIR/work.remote.out" "ready: round $hold" 120; then
        n0=$(count "$OUTDIR/a.log" "session fleet-job checkpointed \(periodic\)")
        for _ in $(seq 60); do [ "$(count "$OUTDIR/a.log" "session fleet-job checkpointed \(periodic\)")" -gt "$n0" ] && break; sleep 0.1; done
        if wait_log "$OUTDIR/a.log" "session fleet-job: lease claimed by host gpuA" 1 &&
                [ "$(count "$OUTDIR/a.log" "session fleet-job checkpointed \(periodic\)")" -gt "$n0" ]; then
                ok "A runs the session, holds its lease, and checkpointed it (periodic, 2 s) after its last call"
        else
                bad "A's lease or periodic checkpoints" "$OUTDIR/a.log"
        fi
        wpid=$(worker_of "$OUTDIR/a.log" fleet-job)
        kill -KILL "$a_pid" ${wpid:+"$wpid"} 2>/dev/null
        t0=$(date +%s.%N)
        echo go >&3
else
        bad "the workload did not reach its hold on A" "$OUTDIR/work.remote.err"
fi
exec 3>&-
if wait "$cpid" && diff -q "$OUTDIR/work.local.out" "$OUTDIR/work.remote.out" >/dev/null; then
        ok "after a SIGKILL of A, the workload ended on B with the local driver's output (counter exact)"
else
        bad "the workload across the SIGKILL" "$OUTDIR/work.remote.err"
        diff "$OUTDIR/work.local.out" "$OUTDIR/work.remote.out" | head -n 10
fi
t1=$(date +%s.%N)
if grep -q "session fleet-job: adopted from the checkpoint store" "$OUTDIR/b.log" &&
        grep -q "session fleet-job: lease claimed by host gpuB" "$OUTDIR/b.log"; then
        ok "B adopted it on demand once A's lease expired"
        awk -v a="$t0" -v b="$t1" 'BEGIN{printf "     from the go after the SIGKILL to the end: %.1f s (lease 7 s)\n", b - a}'
else
        bad "B did not adopt it" "$OUTDIR/b.log"
fi
wait_log "$OUTDIR/b.log" "session fleet-job: lease released" 30 && ok "B released the lease when the session ended" ||
        bad "B's lease release" "$OUTDIR/b.log"
# the same device addresses on B: the slot A agreed on with the store (worker/slot_lease.c)
sa=$(grep -Eo "session fleet-job: arena slot [0-9]+ .* is its own across the fleet" "$OUTDIR/a.log" | head -n 1 | awk '{print $5}')
sb=$(grep -Eo "session fleet-job restored into arena slot [0-9]+" "$OUTDIR/b.log" | head -n 1 | awk '{print $NF}')
if [ -n "$sa" ] && [ "$sa" = "$sb" ] && wait_log "$OUTDIR/b.log" "session fleet-job: arena slot $sa released in the fleet" 30; then
        ok "A took arena slot $sa in the store, B restored the session in it and gave it back at the end"
else
        bad "arena slot across hosts (A: '$sa', B: '$sb')" "$OUTDIR/b.log"
fi

# ---- 2 and 3: a 4 GiB session on B; a twin refused at A; B drains, A adopts
start_host a "$pa" gpuA || bad "A did not start again"
rm -f "$OUTDIR/go4"
"${client_env[@]}" LUPINE_SERVER="127.0.0.1:$pb|127.0.0.1:$pa" LUPINE_SESSION=big \
        "$BUILD/tests/e2e_bigsession" 4 "$OUTDIR/go4" >"$OUTDIR/big.out" 2>"$OUTDIR/big.err" &
bpid=$!
if wait_log "$OUTDIR/big.out" "filled 4 GiB" 180; then
        ok "a 4 GiB session runs on B"
        if "${client_env[@]}" LUPINE_SERVER="127.0.0.1:$pa" LUPINE_SESSION=big LUPINE_RECONNECT_TIMEOUT=5 \
                "$BUILD/tests/e2e_basic" >"$OUTDIR/twin.out" 2>&1; then
                bad "A started a second session named big" "$OUTDIR/twin.out"
        elif grep -q "session big runs on host gpuB" "$OUTDIR/twin.out"; then
                ok "A refuses a new session of that name, naming B"
        else
                bad "A's refusal of the twin" "$OUTDIR/twin.out"
        fi
        kill -TERM "$b_pid"
        wait "$b_pid" 2>/dev/null
        touch "$OUTDIR/go4"
else
        bad "the 4 GiB session did not fill" "$OUTDIR/big.err"
fi
if wait "$bpid" && grep -q "verified 4 GiB" "$OUTDIR/big.out"; then
        ok "B drained for good, A adopted the session, the client verified all 4 GiB"
        grep -h "first call" "$OUTDIR/big.out" | sed 's/^/     after the drain: /'
        grep -h "session big: restored checkpoint" "$OUTDIR/a.log" | sed 's/^.*: session/     A: session/' | head -n 1
else
        bad "the 4 GiB session across B's drain" "$OUTDIR/big.err"
fi
grep -q "session big: adopted from the checkpoint store" "$OUTDIR/a.log" && ok "A adopted it on demand (it was running)" ||
        bad "A did not adopt it" "$OUTDIR/a.log"

# ---- 4. lupinectl migrate: a 16 GiB session from A to B, the client knowing only A
start_host b "$pb" gpuB || bad "B did not start again"
rm -f "$OUTDIR/go16"
"${client_env[@]}" LUPINE_SERVER="127.0.0.1:$pa" LUPINE_SESSION=big16 \
        "$BUILD/tests/e2e_bigsession" 16 "$OUTDIR/go16" >"$OUTDIR/big16.out" 2>"$OUTDIR/big16.err" &
bpid=$!
if wait_log "$OUTDIR/big16.out" "filled 16 GiB" 300; then
        "$BUILD/cli/lupinectl" -s "$OUTDIR/a.sock" --json migrate big16 --to "127.0.0.1:$pb" >"$OUTDIR/mig16.json" 2>&1
        if python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(j['state'] != 'done')" "$OUTDIR/mig16.json"; then
                python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(f'     migrate 16 GiB: {j[\"bytes\"] / 2**30:.2f} GiB in {j[\"seconds\"]:.2f} s, {j[\"precopy_bytes\"] / 2**30:.2f} GiB pre-copied, pause on the source {j[\"pause_s\"]:.3f} s writing {j[\"paused_bytes\"] / 2**30:.3f} GiB')" "$OUTDIR/mig16.json"
                ok "lupinectl migrate: A checkpointed the 16 GiB session for B"
        else
                bad "lupinectl migrate of 16 GiB" "$OUTDIR/mig16.json"
        fi
        touch "$OUTDIR/go16"
else
        bad "the 16 GiB session did not fill" "$OUTDIR/big16.err"
fi
if wait "$bpid" && grep -q "verified 16 GiB" "$OUTDIR/big16.out" && grep -q "session big16: adopted from the checkpoint store" "$OUTDIR/b.log"; then
        ok "the client followed the GOODBYE to B, which restored it; all 16 GiB verified"
        grep -h "first call" "$OUTDIR/big16.out" | sed 's/^/     after the migration: /'
        grep -h "session big16: restored checkpoint" "$OUTDIR/b.log" | sed 's/^.*: session/     B: session/' | head -n 1
else
        bad "the 16 GiB session across the migration" "$OUTDIR/big16.err"
fi
kill -TERM "${a_pid:-}" "${b_pid:-}" 2>/dev/null
wait 2>/dev/null

# ---- 5. PyTorch GPT training migrated A -> B -> A mid-run, weights bitwise equal to local
if python3 tests/gpu/gpt_migrate.py "$BUILD" 120 2 >"$OUTDIR/gpt_migrate.out" 2>&1; then
        ok "GPT training migrated twice mid-run: final weights bitwise equal to local"
else
        bad "GPT training across migrations" "$OUTDIR/gpt_migrate.out"
fi
grep -h "^gpt_migrate: move\|ms/step" "$OUTDIR/gpt_migrate.out" | sed 's/^/     /'

tar czf "${OUT:-/tmp}/fleet-logs.tgz" -C "$OUTDIR" --exclude ck . && echo "logs: ${OUT:-/tmp}/fleet-logs.tgz"
summary fleet
