#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Stream-ordered pools across restarts, on the simulated GPU.

usage: test_pools_restart.py LUPINED PROGS_DIR SHIM_DIR KERNELS_DIR
(also run by test_restart.py)

e2e_pools in its restart mode holds live allocations from a created pool
and from the default pool, with data and non-default attributes, and a free
still pending. Between its rounds the daemon goes through:
  1. a durable restart (SIGTERM, start again on the checkpoint directory);
  2. an upgrade (SIGHUP: a re-exec, memory handed on as fds);
  3. a hot restart under the fake service manager (SIGTERM puts the memory
     fds in the fd store, the next start maps them, zero bytes copied).
After each the client checks its data and the pools' attributes, and
allocates and frees again in both pools; the pools' chunks are ordinary
arena allocations, their bookkeeping lives in the client.
"""
import os
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as W  # noqa: E402
import restart_harness as H  # noqa: E402
from sdharness import ServiceManager  # noqa: E402

check = W.Checks()
FAILED = check.failed


def plain_daemon(lupined, port, ck, log_path):
    log = open(log_path, 'a')
    d = subprocess.Popen(H.daemon_argv(lupined, port, ck), stdout=log, stderr=subprocess.STDOUT,
                         env=H.daemon_env())
    log.close()
    if not W.wait_port(port, d, 20):
        raise RuntimeError('lupined did not start')
    return d


def pools_across_restarts(lupined, progs, shim, kernels, tmp):
    port = W.free_port()
    ck = os.path.join(tmp, 'ck-pools')
    log_path = os.path.join(tmp, 'pools.log')
    d = plain_daemon(lupined, port, ck, log_path)
    m = None
    err_path = os.path.join(tmp, 'pools-client.err')
    err_f = open(err_path, 'w')
    c = H.start_client([os.path.join(progs, 'e2e_pools'), kernels, 'restart'], shim, port, 'pools', stderr=err_f)
    err_f.close()

    def client_err():
        with open(err_path, errors='replace') as f:
            return f.read()[-3000:]

    def round_ok(n, what):
        c.stdin.write('go\n')
        c.stdin.flush()
        line = H.read_line(c.stdout, 90)
        check(f'pools: after {what}, data intact, attributes kept, allocations and frees go on',
              line is not None and line.strip() == f'round {n} ok', repr(line) + '\n' + client_err())

    try:
        line = H.read_line(c.stdout, 60)
        check('pools: live pool allocations with data before the restarts', line is not None and line.strip() == 'ready',
              repr(line) + '\n' + client_err())
        if line is None or line.strip() != 'ready':
            return
        # 1. durable
        check('pools: the drain exits 0', H.stop_daemon(d) == 0)
        d = plain_daemon(lupined, port, ck, log_path)
        round_ok(1, 'a durable restart')
        ok, text = H.wait_text(log_path, r'pools: restored checkpoint epoch')
        check('pools: the session was checkpointed and restored', ok, text[-2000:])
        # 2. upgrade
        d.send_signal(signal.SIGHUP)
        ok, text = H.wait_text(log_path, r"serving its client's connection again")
        check('pools: the upgrade carried the session over', ok, text[-2000:])
        round_ok(2, 'an upgrade')
        ok, text = H.wait_text(log_path, r'pools: hot restore: (\d+) of \1 chunk\(s\) .* 0 bytes copied')
        check('pools: the upgrade mapped the memory from fds, zero bytes copied', ok, text[-2000:])
        # 3. hot, under the fake service manager (the first start restores the durable copy)
        check('pools: the drain before the hot restarts exits 0', H.stop_daemon(d) == 0)
        d = None
        m = ServiceManager(H.daemon_argv(lupined, port, ck), tmp, log_path=os.path.join(tmp, 'pools-hot.log'))
        m.start()
        check('pools: the daemon starts under the fake service manager', m.wait_for('READY', '1') is not None,
              m.log()[-2000:])
        round_ok(3, 'a durable restart into the service manager')
        check('pools: the hot drain exits 0', m.stop() == 0, m.log()[-2000:])
        m.restart_with_stored_fds()
        check('pools: the hot restart maps every chunk from its fd and copies zero bytes', H.hot_restored(m, 'pools'),
              m.log()[-3000:])
        round_ok(4, 'a hot restart')
        c.stdin.close()
        c.wait(timeout=120)
        out = c.stdout.read()
        check('pools: the client finishes: everything freed and trimmed',
              c.returncode == 0 and 'e2e_pools restart: OK (4 rounds)' in out, out[-1500:] + client_err())
    finally:
        if c.poll() is None:
            c.kill()
            c.wait()
        if d is not None:
            H.stop_daemon(d)
        if m is not None:
            m.stop()
            m.close()
    if FAILED:
        for p in (log_path, os.path.join(tmp, 'pools-hot.log')):
            if os.path.exists(p):
                with open(p, errors='replace') as f:
                    print(f'---- {os.path.basename(p)} (tail) ----\n' + f.read()[-4000:])


def main():
    if len(sys.argv) < 5:
        print(__doc__)
        return 2
    lupined, progs, shim, kernels = sys.argv[1:5]
    with tempfile.TemporaryDirectory(prefix='lupine-pools-') as tmp:
        try:
            pools_across_restarts(lupined, progs, os.path.abspath(shim), kernels, tmp)
        except Exception as e:  # a harness failure is a test failure
            check('harness', False, repr(e))
    print(f'pools restart: {"FAILED: " + ", ".join(FAILED) if FAILED else "all passed"}')
    return 1 if FAILED else 0


if __name__ == '__main__':
    sys.exit(main())
