#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 15 on the real GPU: the e2e programs, PyTorch and GPT training
# through lupined over TLS 1.3 with a bearer token (TCP on loopback, test
# certificates made here), each run first on the local driver with the
# outputs compared, as tests/gpu/runtime.sh does for the plain socket.
#
#   tests/gpu/tls.sh BUILD_DIR [GPT_STEPS]
set -u
cd "$(dirname "$0")/../.."
BUILD=${1:?usage: tls.sh BUILD_DIR [GPT_STEPS]}
STEPS=${2:-60}
OUTDIR=$(mktemp -d /tmp/lupine-tls.XXXXXX)

. tests/gpu/compare_lib.sh
python3 -c "import sys; sys.path.insert(0, 'tests/e2e'); import tls_certs
tls_certs.make_certs('$OUTDIR/certs')
open('$OUTDIR/tokens', 'w').write(tls_certs.token_line('gpu-tenant', 'gpu-token'))" ||
        { echo "lupine tls: FAILED, no test certificates"; exit 1; }
port=$((20000 + RANDOM % 20000))
env -u LD_LIBRARY_PATH "$BUILD/daemon/lupined" --backend cuda --listen "127.0.0.1:$port" --listen "unix:$OUTDIR/s" \
        --tls-cert "$OUTDIR/certs/server.pem" --tls-key "$OUTDIR/certs/server.key" --auth-tokens "$OUTDIR/tokens" \
        >"$OUTDIR/lupined.log" 2>&1 &
dpid=$!
for _ in $(seq 100); do [ -S "$OUTDIR/s" ] && break; sleep 0.1; done
[ -S "$OUTDIR/s" ] || { echo "lupine tls: FAILED, lupined did not start"; cat "$OUTDIR/lupined.log"; exit 1; }
remote_env=(env LD_LIBRARY_PATH="$PWD/$BUILD/shim:$libdirs" LUPINE_SERVER="tls://127.0.0.1:$port"
        LUPINE_TLS_CA="$OUTDIR/certs/ca.pem" LUPINE_TOKEN=gpu-token)
local_env=(env LD_LIBRARY_PATH="$real_dir:$libdirs")

compare e2e_basic "$BUILD/tests/e2e_basic"
compare e2e_threads "$BUILD/tests/e2e_threads"
# e2e_kernels checks itself and prints timings, which differ run to run:
# both runs must pass
if "${local_env[@]}" "$BUILD/tests/e2e_kernels" tests/kernels 100000 >"$OUTDIR/e2e_kernels.local.out" 2>&1 &&
        "${remote_env[@]}" "$BUILD/tests/e2e_kernels" tests/kernels 100000 >"$OUTDIR/e2e_kernels.remote.out" 2>&1; then
        ok "e2e_kernels (local and over TLS)"
        grep -h "launches/s" "$OUTDIR"/e2e_kernels.*.out | sed 's/^ */     /'
else
        bad "e2e_kernels over TLS" "$OUTDIR/e2e_kernels.remote.out"
fi
compare driver_answers "$BUILD/tests/e2e_answers" tests/kernels
compare e2e_graphs "$BUILD/tests/e2e_graphs" tests/kernels
if python3 -c 'import torch' 2>/dev/null; then
        compare torch_check python3 tests/gpu/torch_check.py
        compare gpt_train python3 tests/gpu/gpt_train.py "$STEPS"
        l=$(grep -o '[0-9.]* ms/step' "$OUTDIR/gpt_train.local.out" | cut -d' ' -f1)
        r=$(grep -o '[0-9.]* ms/step' "$OUTDIR/gpt_train.remote.out" | cut -d' ' -f1)
        [ -n "$l" ] && [ -n "$r" ] && echo "gpt_train over TLS: local $l ms/step, lupine $r ms/step, ratio $(python3 -c "print(f'{$r / $l:.3f}')")x"
fi
if grep -q "of tenant gpu-tenant: new" "$OUTDIR/lupined.log"; then
        ok "the sessions were the token's tenant's"
else
        bad "no session of tenant gpu-tenant in the log" "$OUTDIR/lupined.log"
fi
grep -h "kernel TLS\|TLS in user space" "$OUTDIR/lupined.log" | head -n 1 | sed 's/^.*: session [^:]*: /     /'
kill -TERM "$dpid" 2>/dev/null
wait "$dpid" 2>/dev/null
tar czf "${OUT:-/tmp}/tls-logs.tgz" -C "$OUTDIR" --exclude certs . && echo "logs: ${OUT:-/tmp}/tls-logs.tgz"
summary tls
