#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checkpoint and restore of sessions holding 1, 4 and 16 GiB (by default)
on the real GPU, through the directory provider on this machine's disk. The
data is verified after every restore; the throughput comes from the
worker's own log lines. usage: bigsession.py BUILD_DIR [GIB ...]"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'e2e'))
import lupwire as W  # noqa: E402


def start(build, port, ckdir, log):
    env = dict(os.environ)
    env.pop('LD_LIBRARY_PATH', None)
    p = subprocess.Popen([f'{build}/daemon/lupined', '--backend', os.environ.get('LUPINE_TEST_BACKEND', 'cuda'),
                          '--listen', f'127.0.0.1:{port}', '--checkpoint-dir', ckdir, '--drain-timeout', '600'],
                         stdout=log, stderr=subprocess.STDOUT, env=env)
    if W.wait_port(port, p, 20):
        return p
    raise RuntimeError('lupined did not start')


def main():
    build = sys.argv[1]
    sizes = [int(x) for x in sys.argv[2:]] or [1, 4, 16]
    ok = True
    for gib in sizes:
        with tempfile.TemporaryDirectory(prefix='lupine-big-', dir=os.environ.get('LUPINE_CKPT_TMP', '/tmp')) as tmp:
            port = W.free_port()
            logp = os.path.join(tmp, 'log')
            log = open(logp, 'a')
            d = start(build, port, os.path.join(tmp, 'ck'), log)
            env = dict(os.environ)
            env.update(LUPINE_SERVER=f'127.0.0.1:{port}', LUPINE_SESSION=f'big{gib}',
                       LD_LIBRARY_PATH=os.path.abspath(f'{build}/shim'), LUPINE_RECONNECT_TIMEOUT='600')
            go = os.path.join(tmp, 'go')
            c = subprocess.Popen([f'{build}/tests/e2e_bigsession', str(gib), go], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            line = c.stdout.readline()
            if 'filled' not in line:
                print(f'{gib} GiB: client did not fill: {line} {c.stderr.read()[-800:]}')
                ok = False
                d.kill()
                continue
            t0 = time.time()
            d.send_signal(signal.SIGTERM)
            rc = d.wait(timeout=900)
            t_drain = time.time() - t0
            t1 = time.time()
            d = start(build, port, os.path.join(tmp, 'ck'), log)
            while 'restore finished' not in open(logp).read() and time.time() - t1 < 900:
                time.sleep(0.02)
            t_restore = time.time() - t1
            open(go, 'w').close()
            out, err = c.communicate(timeout=900)
            d.send_signal(signal.SIGTERM)
            d.wait(timeout=900)
            log.close()
            text = open(logp).read()
            ck = re.search(r'checkpoint epoch 1 \(durable\): ([\d.]+) GiB of device memory in .*?in ([\d.]+) s \(([\d.]+) GB/s(?: effective)?\)', text)
            rs = re.search(r'restored checkpoint epoch 1 .*?driver start ([\d.]+) s, ([\d.]+) GiB in ([\d.]+) s \(([\d.]+) GB/s(?: effective)?\)', text)
            good = rc == 0 and c.returncode == 0 and f'verified {gib} GiB' in out and ck and rs
            ok = ok and bool(good)
            print(f'{gib} GiB session: drain+checkpoint {t_drain:.1f} s (memory {ck.group(3) if ck else "?"} GB/s), '
                  f'restart+restore {t_restore:.1f} s (driver start {rs.group(1) if rs else "?"} s, memory '
                  f'{rs.group(4) if rs else "?"} GB/s), data verified: {"yes" if good else "NO"}')
            if not good:
                print(text[-3000:], err[-1500:])
    print('bigsession:', 'PASS' if ok else 'FAIL')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
