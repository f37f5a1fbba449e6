#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 18 on the real GPU: lupinectl info (local and --server), monitor,
# diag, log and bench against a lupined on the real driver, each compared
# with what the local driver or nvidia-smi says in the same job; then the
# health watch: a verified workload runs on host A, A's thermal limit is
# set below the GPU's temperature, A drains the session to a durable
# checkpoint, host B (sharing the checkpoint store) restores it, and the
# workload ends with the same output as on the local driver.
#
#   tests/gpu/ops.sh BUILD_DIR
set -u
cd "$(dirname "$0")/../.."
BUILD=${1:?usage: ops.sh BUILD_DIR}
OUTDIR=$(mktemp -d /tmp/lupine-ops.XXXXXX)
CTL=$BUILD/cli/lupinectl

. tests/gpu/compare_lib.sh
pa=$((20000 + RANDOM % 20000))
pb=$((pa + 1))
pm=$((pa + 2))
ck=$OUTDIR/ck
FAST=(--health-interval 500 --health-retries 2)

start_host() { # label port [args...]; sets the pid in ${label}_pid
        local label=$1 port=$2
        shift 2
        env -u LD_LIBRARY_PATH "$BUILD/daemon/lupined" --backend "${LUPINE_OPS_BACKEND:-cuda}" --listen "127.0.0.1:$port" \
                --listen "unix:$OUTDIR/$label.sock" --checkpoint-dir "$ck" --session-ttl 300 "${FAST[@]}" "$@" \
                >"$OUTDIR/$label.log" 2>&1 &
        eval "${label}_pid=$!"
        for _ in $(seq 100); do [ -S "$OUTDIR/$label.sock" ] && return 0; sleep 0.1; done
        echo "lupined $label did not start"
        cat "$OUTDIR/$label.log"
        return 1
}
wait_log() { # file regex [seconds]
        for _ in $(seq $((${3:-30} * 10))); do grep -Eq "$2" "$1" && return 0; sleep 0.1; done
        return 1
}
json_get() { # python expression over j, the JSON on stdin
        python3 -c "import json,sys; j=json.load(sys.stdin); print($1)"
}

# --metrics needs libmicrohttpd, which not every GPU host has
metrics=()
if ldconfig -p | grep -q libmicrohttpd; then metrics=(--metrics "127.0.0.1:$pm"); else echo "     no libmicrohttpd here: the metrics are not checked"; fi
start_host a "$pa" "${metrics[@]}" --log-file "$OUTDIR/a.logfile" ||
        { echo "lupine ops: FAILED, lupined did not start"; exit 1; }

# ---- info: lupinectl's view of the GPU against nvidia-smi's (the local NVML)
smi=$(nvidia-smi --query-gpu=name,uuid,memory.total --format=csv,noheader,nounits -i 0)
"$CTL" -s "$OUTDIR/a.sock" --json info >"$OUTDIR/info.json" 2>"$OUTDIR/info.err"
GPU3='", ".join([j["gpus"][0]["name"], j["gpus"][0]["uuid"], str(j["gpus"][0]["memory_total"] >> 20)])'
mine=$(json_get "$GPU3" <"$OUTDIR/info.json")
if [ -n "$smi" ] && [ "$mine" = "$smi" ]; then ok "info: name, UUID, memory as nvidia-smi ($smi)"; else bad "info: '$mine' vs nvidia-smi '$smi'" "$OUTDIR/info.err"; fi
"$CTL" -s "$OUTDIR/a.sock" info | head -n 20
remote=$("$CTL" --server "127.0.0.1:$pa" --json info 2>"$OUTDIR/rinfo.err" |
        json_get "$GPU3")
if [ "$remote" = "$smi" ]; then ok "info --server (a client's view): as nvidia-smi"; else bad "info --server: '$remote'" "$OUTDIR/rinfo.err"; fi

# ---- monitor: two refreshes in a pseudo-terminal
python3 - "$CTL" "$OUTDIR/a.sock" >"$OUTDIR/monitor.out" 2>&1 <<'PY'
import os, pty, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], [sys.argv[1], '-s', sys.argv[2], 'monitor', '-i', '500', '-n', '2'])
out = b''
deadline = time.time() + 20
while time.time() < deadline:
    try:
        b = os.read(fd, 65536)
    except OSError:
        break
    if not b:
        break
    out += b
_, st = os.waitpid(pid, 0)
sys.stdout.write(out.decode('utf-8', 'replace'))
sys.exit(os.waitstatus_to_exitcode(st))
PY
mrc=$?
if [ $mrc -eq 0 ] && [ "$(grep -c 'temp C' "$OUTDIR/monitor.out")" -ge 2 ] && grep -q $'\e\[H' "$OUTDIR/monitor.out"; then
        ok "monitor: two refreshes in a terminal, redrawn in place"
else
        bad "monitor (rc $mrc)" "$OUTDIR/monitor.out"
fi

# ---- diag: the driver and the GPU pass on a healthy host
"$CTL" -s "$OUTDIR/a.sock" diag >"$OUTDIR/diag.out" 2>&1
"$CTL" -s "$OUTDIR/a.sock" --json diag >"$OUTDIR/diag.json" 2>/dev/null
sed 's/^/     /' "$OUTDIR/diag.out"
if json_get 'all(c["result"] == "pass" for c in j["checks"] if c["check"] in ("the daemon answers", "the driver loads", "GPU 0"))' <"$OUTDIR/diag.json" | grep -q True; then
        ok "diag: the daemon, the driver and GPU 0 pass"
else
        bad "diag" "$OUTDIR/diag.out"
fi

# ---- bench: the local driver, then lupine, same job
"$CTL" --json bench --local -n 2000 --size 256 >"$OUTDIR/bench.local.json" 2>"$OUTDIR/bench.local.err"
lrc=$?
"$CTL" --json bench --server "127.0.0.1:$pa" -n 2000 --size 256 >"$OUTDIR/bench.lupine.json" 2>"$OUTDIR/bench.lupine.err"
brc=$?
"$CTL" bench --server "127.0.0.1:$pa" -n 500 --size 64 2>/dev/null | sed 's/^/     /'
if [ $lrc -eq 0 ] && [ $brc -eq 0 ]; then
        ok "bench: local driver and lupine"
        python3 - "$OUTDIR/bench.local.json" "$OUTDIR/bench.lupine.json" <<'PY'
import json, sys
l, r = (json.load(open(p)) for p in sys.argv[1:3])
def flat(d, pre=''):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from flat(v, pre + k + '.')
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            yield pre + k, v
lf, rf = dict(flat(l)), dict(flat(r))
print('     bench (lupinectl bench, 256 MiB copies):  measure  local  lupine  lupine/local')
for k in lf:
    if k in rf and lf[k]:
        print(f'     {k:28s} {lf[k]:12.2f} {rf[k]:12.2f} {rf[k] / lf[k]:8.3f}x')
PY
else
        bad "bench (local rc $lrc, lupine rc $brc)" "$OUTDIR/bench.lupine.err"
fi

# ---- the health watch: a thermal limit below the temperature drains the
# session, and host B restores it
rounds=400
env LD_LIBRARY_PATH="$real_dir:$libdirs" "$BUILD/tests/e2e_restart" tests/kernels $rounds 20 >"$OUTDIR/work.local.out" 2>&1 ||
        bad "e2e_restart on the local driver" "$OUTDIR/work.local.out"
env LD_LIBRARY_PATH="$PWD/$BUILD/shim:$libdirs" LUPINE_SERVER="127.0.0.1:$pa|127.0.0.1:$pb" LUPINE_SESSION=ops-job \
        LUPINE_RECONNECT_TIMEOUT=240 "$BUILD/tests/e2e_restart" tests/kernels $rounds 20 >"$OUTDIR/work.remote.out" 2>"$OUTDIR/work.remote.err" &
cpid=$!
wait_log "$OUTDIR/work.remote.out" "round 30 ok" 120 || bad "the workload did not start on A" "$OUTDIR/work.remote.err"
temp=$("$CTL" -s "$OUTDIR/a.sock" --json info | json_get 'j["gpus"][0]["temperature_c"]')
limit=$((temp > 3 ? temp - 3 : 1))
echo "     GPU temperature ${temp} C; thermal limit set to ${limit} C"
"$CTL" -s "$OUTDIR/a.sock" config set thermal_limit_c "$limit"
if wait_log "$OUTDIR/a.log" "GPU 0: health alarm: temperature [0-9]+ C reached --thermal-limit $limit C" 30 &&
        wait_log "$OUTDIR/a.log" "session ops-job checkpointed" 60; then
        ok "thermal limit below the temperature: alarm, session drained to a durable checkpoint"
else
        bad "no alarm or no drain on A" "$OUTDIR/a.log"
fi
"$CTL" -s "$OUTDIR/a.sock" status | sed 's/^/     /' | head -n 6
if "$CTL" -s "$OUTDIR/a.sock" --json status | json_get 'j["health"]["admitting"] is False and j["health"]["gpus"][0]["state"] == "alarm"' | grep -q True; then
        ok "status: not admitting, GPU 0 in alarm"
else
        bad "status during the alarm"
fi
if [ ${#metrics[@]} -eq 0 ]; then
        echo "     metrics: not checked (no libmicrohttpd on this host)"
elif python3 - "$pm" <<'PY'
import sys, time, urllib.request
for _ in range(50):  # the text is rebuilt every second
    m = urllib.request.urlopen(f'http://127.0.0.1:{sys.argv[1]}/metrics').read().decode()
    if 'lupine_gpu_healthy{gpu="0"} 0' in m and 'lupine_admitting 0' in m:
        sys.exit(0)
    time.sleep(0.2)
sys.exit(1)
PY
then
        ok "metrics: lupine_gpu_healthy 0, lupine_admitting 0"
else
        bad "metrics during the alarm"
fi
if "$CTL" -s "$OUTDIR/a.sock" log -n 20 --level err 2>&1 | grep -q "health alarm"; then
        ok "lupinectl log --level err shows the alarm (from --log-file)"
else
        bad "lupinectl log"
fi
start_host b "$pb" || bad "host B did not start"
if wait "$cpid" && diff -q "$OUTDIR/work.local.out" "$OUTDIR/work.remote.out" >/dev/null; then
        ok "the workload ended on B with the same output as on the local driver (counter exact)"
else
        bad "the workload through A then B" "$OUTDIR/work.remote.err"
        diff "$OUTDIR/work.local.out" "$OUTDIR/work.remote.out" | head -n 10
fi
grep -h "session ops-job restored\|resumed session ops-job" "$OUTDIR/b.log" "$OUTDIR/work.remote.err" | sed 's/^.*: /     /' | head -n 3
grep -q "session ops-job restored" "$OUTDIR/b.log" && ok "B restored the session" || bad "B did not restore it" "$OUTDIR/b.log"
"$CTL" -s "$OUTDIR/a.sock" config set thermal_limit_c 90
wait_log "$OUTDIR/a.log" "GPU 0 passes its health checks again" 30 && ok "A admits again once the limit is back" ||
        bad "A did not clear the alarm" "$OUTDIR/a.log"

kill -TERM "$a_pid" "${b_pid:-}" 2>/dev/null
wait 2>/dev/null
tar czf "${OUT:-/tmp}/ops-logs.tgz" -C "$OUTDIR" --exclude ck . && echo "logs: ${OUT:-/tmp}/ops-logs.tgz"
summary ops
