# SPDX-License-Identifier: MIT
# Sourced by tests/gpu/runtime.sh and tests/gpu/families.sh: the libraries
# the programs need, a lupined on the real driver, and `compare NAME PROG...`
# (the program on the local driver, then through lupine; the outputs must
# match except for the device name). The caller sets BUILD and OUTDIR.
# ok/bad count the checks; `summary NAME` prints the part's line
# "lupine NAME: PASS n/n" (or FAIL, naming the failed checks) and is the
# script's exit status.

pass=0
fail=0
failed=()
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { # what, [log whose tail shows why]
        fail=$((fail + 1))
        failed+=("$1")
        echo "FAIL $1"
        [ -n "${2:-}" ] && tail -n 25 "$2" | sed 's/^/    /'
        return 0
}
summary() {
        if [ "$fail" -eq 0 ]; then
                echo "lupine $1: PASS $pass/$((pass + fail))"
        else
                echo "lupine $1: FAIL $fail of $((pass + fail)) (${failed[*]})"
        fi
        [ "$fail" -eq 0 ]
}

# Libraries the programs need (cuBLAS, cuDNN, cuFFT, ...): the toolkit's, or
# the ones that came with the Python wheels.
libdirs=$(python3 - <<'PY'
import glob, os, site
dirs = []
for base in site.getsitepackages() + ['/usr/local/cuda/lib64', '/usr/local/cuda/lib']:
    for pat in ('nvidia/*/lib', 'nvidia/cu13/lib', '.'):
        for d in glob.glob(os.path.join(base, pat)):
            if glob.glob(os.path.join(d, 'libcublas.so.*')) or glob.glob(os.path.join(d, 'libcudnn.so.*')) or glob.glob(os.path.join(d, 'libcudart.so.*')):
                dirs.append(os.path.abspath(d))
print(':'.join(dict.fromkeys(dirs)))
PY
)
echo "libraries from: $libdirs"

# the local baseline runs on the real driver, found the way the loader finds it
real_dir=$(dirname "$(ldconfig -p | awk '/libcuda.so.1 /{print $NF; exit}')")

# start_lupined: a lupined on the real driver at $OUTDIR/lupined.sock; sets dpid
start_lupined() {
        sock=$OUTDIR/lupined.sock
        env -u LD_LIBRARY_PATH "$BUILD/daemon/lupined" --backend cuda --listen "unix:$sock" --log-level info \
                >"$OUTDIR/lupined.log" 2>&1 &
        dpid=$!
        for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
        [ -S "$sock" ] || { echo "lupined did not start"; cat "$OUTDIR/lupined.log"; return 1; }
        remote_env=(env LD_LIBRARY_PATH="$PWD/$BUILD/shim:$libdirs" LUPINE_SERVER="unix:$sock")
        local_env=(env LD_LIBRARY_PATH="$real_dir:$libdirs")
}

stop_lupined() {
        kill -TERM "$dpid" 2>/dev/null
        wait "$dpid" 2>/dev/null
}

# Device printf lines of one launch come out in the order the blocks ran,
# which CUDA leaves open (a run of rt_full_static once saw block 1 first).
# Each run of consecutive device lines is sorted; where they sit among the
# host lines is still compared exactly.
normalize() {
        grep -v 'ms/step' | sed 's/ (lupine)//' |
                awk '/^device says /{run[n++]=$0; next}
                     {flush(); print} END{flush()}
                     function flush(  i, j, t){ for (i = 1; i < n; i++) for (j = i; j > 0 && run[j-1] > run[j]; j--) { t = run[j]; run[j] = run[j-1]; run[j-1] = t }
                                               for (i = 0; i < n; i++) print run[i]; n = 0 }'
}

# name prog args...: local, then remote; outputs must match except the device name
compare() {
        local name=$1
        shift
        timeout 300 "${local_env[@]}" "$@" >"$OUTDIR/$name.local.out" 2>"$OUTDIR/$name.local.err"
        local lrc=$?
        local t0=$(date +%s.%N)
        timeout 300 "${remote_env[@]}" "$@" >"$OUTDIR/$name.remote.out" 2>"$OUTDIR/$name.remote.err"
        local rrc=$?
        local t1=$(date +%s.%N)
        grep -h "not supported by lupine\|not implemented\|unknown table id" "$OUTDIR/$name.remote.err" | sort -u | sed 's/^/    lupine: /'
        if [ $lrc -ne 0 ]; then
                bad "$name (fails on the local driver too, rc $lrc)" "$OUTDIR/$name.local.err"
        elif [ $rrc -ne 0 ]; then
                bad "$name through lupine (rc $rrc)" "$OUTDIR/$name.remote.err"
        elif ! diff <(normalize <"$OUTDIR/$name.local.out") <(normalize <"$OUTDIR/$name.remote.out") \
                    >"$OUTDIR/$name.diff"; then
                bad "$name: output through lupine differs from local" "$OUTDIR/$name.diff"
        else
                ok "$name ($(python3 -c "print(f'{$t1 - $t0:.1f}')") s through lupine)"
        fi
}
