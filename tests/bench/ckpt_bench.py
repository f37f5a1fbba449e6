#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checkpoint and restore throughput per lane count (--checkpoint-lanes).

For each K: start lupined with K lanes, fill a session of GIB GiB
(e2e_bigsession), SIGTERM (the drain checkpoints it), start lupined again
(it restores the session), let the client read back and verify every byte,
and print the GB/s of the save and of the restore from the worker's own log
lines (memory only: driver start and modules are not in them).

Providers:
  dir      the built-in directory provider in --dir (default /dev/shm: RAM,
           no disk); save and restore are measured. A save into tmpfs
           includes the kernel's page allocation for every byte.
  example  the example provider with its memory reserved when the session
           starts (config "MIB,reserve"): host memory with nothing else in
           the way, which isolates lupine's own path. The GPU copies
           straight into that memory (provider ABI version 3, direct
           writes). It keeps bytes in the worker process, so it cannot
           restore in another one: the save is measured, then read back
           and checked piece by piece (--checkpoint-verify, not timed).

Hashes (--hash): gpu is the default path (the GPU hashes the memory,
worker_piece_hash.c); cpu sets LUPINE_CHECKPOINT_GPU_HASH=0, the lanes hash.

On the simulator (--backend sim) "device" copies are CPU memcpy on the
same cores, so the figures show how the path scales with lanes, not GPU
figures.

usage: ckpt_bench.py [--build DIR] [--backend sim|cuda] [--gib 1,4,16]
                     [--lanes auto,1,2,4] [--provider dir,example] [--hash gpu,cpu]
                     [--dir PATH] [--repeat N]

Every combination runs; one line each.
"""
import argparse
import glob
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'e2e'))
import lupwire as W  # noqa: E402

SAVE_RE = re.compile(r'checkpoint epoch 1 \(durable\): ([\d.]+) GiB of device memory in .*?in ([\d.]+) s '
                     r'\(([\d.]+) GB/s(?: effective)?\) through (\S+), (\d+) lane')
PARTS_RE = re.compile(r'(region pinned for direct writes in [\d.]+ s|kernel ready in [\d.]+ s|'
                      r'the GPU (?:hashed|checked) [\d.]+ GiB in [\d.]+ s)')
RESTORE_RE = re.compile(r'restored checkpoint epoch 1 .*?([\d.]+) GiB in ([\d.]+) s \(([\d.]+) GB/s\)')


def start(a, prov, gib, hash_on, port, lanes, ckdir, log):
    env = dict(os.environ)
    env.pop('LD_LIBRARY_PATH', None)
    env['LUPINE_CHECKPOINT_GPU_HASH'] = '1' if hash_on == 'gpu' else '0'
    cmd = [f'{a.build}/daemon/lupined', '--backend', a.backend, '--listen', f'127.0.0.1:{port}',
           '--drain-timeout', '900'] + (['--checkpoint-lanes', str(lanes)] if lanes else [])
    env.pop('LUPINE_CHECKPOINT_LANES', None)
    if prov == 'dir':
        cmd += ['--checkpoint-dir', ckdir]
    else:
        prov = sorted(glob.glob(f'{a.build}/tests/providers/liblupine-example-provider.so*'))[0]
        # --checkpoint-verify reads the save back after it is timed: that
        # is how an in-process save is shown to hold every byte
        cmd += ['--checkpoint-provider', prov, '--checkpoint-config', f'{gib * 1024 + 256},reserve',
                '--checkpoint-verify']
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    if W.wait_port(port, p, 20):
        return p
    raise RuntimeError('lupined did not start')


def one(a, prov, gib, hash_on, lanes):
    """(save GB/s, restore GB/s or None, verified) for one lane count."""
    with tempfile.TemporaryDirectory(prefix='lupine-ckb-', dir=a.dir) as tmp:
        port = W.free_port()
        logp = os.path.join(tmp, 'log')
        log = open(logp, 'a')
        ckdir = os.path.join(tmp, 'ck')
        d = start(a, prov, gib, hash_on, port, lanes, ckdir, log)
        env = dict(os.environ)
        env.update(LUPINE_SERVER=f'127.0.0.1:{port}', LUPINE_SESSION=f'bench{gib}-{lanes}',
                   LD_LIBRARY_PATH=os.path.abspath(f'{a.build}/shim'), LUPINE_RECONNECT_TIMEOUT='900')
        go = os.path.join(tmp, 'go')
        c = subprocess.Popen([f'{a.build}/tests/e2e_bigsession', str(gib), go], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        line = c.stdout.readline()
        if 'filled' not in line:
            d.kill()
            raise RuntimeError(f'the client did not fill: {line} {c.stderr.read()[-800:]}')
        d.send_signal(signal.SIGTERM)
        d.wait(timeout=900)
        restore = None
        verified = None
        if prov == 'dir':
            d = start(a, prov, gib, hash_on, port, lanes, ckdir, log)
            t0 = time.time()
            while 'restore finished' not in open(logp).read() and time.time() - t0 < 900:
                time.sleep(0.02)
            open(go, 'w').close()
            out, _ = c.communicate(timeout=900)
            verified = c.returncode == 0 and f'verified {gib} GiB' in out
            d.send_signal(signal.SIGTERM)
            d.wait(timeout=900)
        else:
            c.kill()
            c.wait()
        log.close()
        text = open(logp).read()
        ck = SAVE_RE.search(text)
        if not ck:
            raise RuntimeError('no checkpoint line in the log:\n' + text[-2000:])
        if lanes and int(ck.group(5)) != lanes:
            raise RuntimeError(f'asked for {lanes} lanes, the worker used {ck.group(5)}')
        if prov == 'dir':
            rs = RESTORE_RE.search(text)
            if not rs:
                raise RuntimeError('no restore line in the log:\n' + text[-2000:])
            restore = float(rs.group(3))
        else:
            verified = 'every piece matches' in text
        parts = '; '.join(dict.fromkeys(PARTS_RE.findall(text)))
        return float(ck.group(3)), restore, verified, parts, int(ck.group(5))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--build', default='build')
    ap.add_argument('--backend', default='sim')
    ap.add_argument('--gib', default='1', help='session sizes in GiB, comma-separated')
    ap.add_argument('--lanes', default='1,2', help='lane counts, comma-separated; auto: the daemon\'s own choice')
    ap.add_argument('--provider', default='dir', help='dir, example, or both comma-separated')
    ap.add_argument('--hash', default='gpu', help='gpu, cpu, or both comma-separated')
    ap.add_argument('--dir', default='/dev/shm')
    ap.add_argument('--repeat', type=int, default=1, help='runs per combination; the best is printed')
    a = ap.parse_args()
    ks = [0 if x == 'auto' else int(x) for x in a.lanes.split(',')]
    sizes = [int(x) for x in a.gib.split(',')]
    provs = a.provider.split(',')
    hashes = a.hash.split(',')
    for p in provs:
        if p not in ('dir', 'example'):
            ap.error(f'unknown provider {p}')
    for h in hashes:
        if h not in ('gpu', 'cpu'):
            ap.error(f'unknown hash place {h}')
    print(f'# backend {a.backend}, directory provider in {a.dir}, {os.cpu_count()} CPUs')
    if a.backend == 'sim':
        print('# simulator: device copies are CPU memcpy on these cores; this shows scaling, not GPU figures')
    print(f'{"GiB":>4} {"provider":>8} {"hash":>4} {"lanes":>5} {"save GB/s":>10} {"restore GB/s":>13} {"verified":>9}')
    ok = True
    for gib in sizes:
        for prov in provs:
            for hash_on in hashes:
                for k in ks:
                    runs = [one(a, prov, gib, hash_on, k) for _ in range(a.repeat)]
                    save = max(r[0] for r in runs)
                    rest = max((r[1] for r in runs if r[1] is not None), default=None)
                    ver = all(r[2] for r in runs)
                    ok = ok and ver
                    used = f'{runs[-1][4]}' + ('' if k else '*')
                    print(f'{gib:>4} {prov:>8} {hash_on:>4} {used:>5} {save:>10.2f} '
                          f'{rest if rest is not None else "-":>13} {"yes" if ver else "NO":>9}', flush=True)
                    if runs[-1][3]:
                        print(f'#    {runs[-1][3]}', flush=True)
    if 0 in ks:
        print('# lanes*: the daemon chose the lane count itself')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
