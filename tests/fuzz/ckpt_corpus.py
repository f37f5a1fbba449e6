#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Seeds for fuzz_ckpt_codec: REAL checkpoint objects, not made-up ones.

    python3 tests/fuzz/ckpt_corpus.py BUILD_DIR

Runs BUILD_DIR's lupined on the simulator with --checkpoint-dir, once per
--checkpoint-mode (durable; hot and both under the fake service manager of
tests/e2e/sdharness.py, whose fd store a hot checkpoint needs), with two
clients (e2e_restart: modules, globals, settings, streams;
e2e_events_restore: events), drains it with SIGTERM and copies the small
objects the drains wrote ("manifest", "events", "replies" up to 64 KiB)
into corpus/fuzz_ckpt_codec/ as <object>-<mode>-<session>.bin. Then it derives a version-1 manifest (the
format before the memory flags) from each durable one: what an older
lupined wrote for the same session, resealed.

The committed seeds were made by the lupined of the commit before the codec
(checkpoint/ckpt_codec.c) existed, so the unit test ckpt-codec also proves
the codec reads, and writes byte for byte, what the old writer wrote. Run
again only when the format changes; files this script did not write are
left alone. Standard library only.

graphs-durable-graphjob.bin is the object "graphs" of a durable drain of
an `e2e_graphs DIR restart` session (captured, cloned and explicit graphs,
an exec with changed kernel parameters), copied by hand from the
checkpoint directory; this script does not write it.
"""
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, '..', '..'))
OUT = os.path.join(HERE, 'corpus', 'fuzz_ckpt_codec')
sys.path.insert(0, os.path.join(ROOT, 'tests', 'e2e'))
import lupwire as W  # noqa: E402
from sdharness import ServiceManager  # noqa: E402

MANIFEST_MAGIC = 0x3154504b4350555
M64 = (1 << 64) - 1


def hash64(data, seed):
    """common/hash.c's lup_hash64, for resealing (on little-endian hosts, as the daemon runs)."""
    def mix(h):
        h ^= h >> 33
        h = (h * 0xff51afd7ed558ccd) & M64
        h ^= h >> 33
        h = (h * 0xc4ceb9fe1a85ec53) & M64
        h ^= h >> 33
        return h

    lanes = [seed ^ 0x9e3779b97f4a7c15, (seed + 0x632be59bd9b4e019) & M64, seed ^ 0x85ebca77c2b2ae63,
             (seed - 0x27d4eb2f165667c5) & M64]
    n, i = len(data), 0
    while i + 32 <= n:
        for k in range(4):
            x = ((lanes[k] ^ struct.unpack_from('<Q', data, i + 8 * k)[0]) * 0x9e3779b97f4a7c15) & M64
            lanes[k] = ((x << 31) | (x >> 33)) & M64
        i += 32
    h = mix(lanes[0]) ^ mix((lanes[1] + 1) & M64) ^ mix((lanes[2] + 2) & M64) ^ mix((lanes[3] + 3) & M64)
    while i < n:
        h = ((h ^ data[i]) * 0x100000001b3) & M64
        i += 1
    return mix(h ^ n)


def reseal(body, magic):
    return body + struct.pack('<Q', hash64(body, magic))


def to_version1(manifest):
    """A version-2 DURABLE manifest as version 1 wrote it: no memory flags."""
    magic, version, mem = struct.unpack_from('<QII', manifest)
    assert magic == MANIFEST_MAGIC and version == 2 and mem == 1
    assert hash64(manifest[:-8], magic) == struct.unpack_from('<Q', manifest, len(manifest) - 8)[0], \
        'hash64 here differs from common/hash.c'
    return reseal(struct.pack('<QI', magic, 1) + manifest[16:-8], magic)


def capture(build, mode, tmp):
    ckdir = os.path.join(tmp, mode)
    port = W.free_port()
    env = dict(os.environ)
    env.pop('LD_LIBRARY_PATH', None)
    env['LUPINE_SIM_LIBRARY'] = os.path.join(build, 'sim', 'libcuda-sim.so')
    argv = [os.path.join(build, 'daemon', 'lupined'), '--backend', 'sim', '--listen', f'127.0.0.1:{port}',
            '--session-ttl', '120', '--drain-timeout', '30', '--checkpoint-dir', ckdir, '--checkpoint-mode', mode]
    if mode == 'durable':
        log = open(os.path.join(tmp, mode + '.log'), 'w')
        d = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        if not W.wait_port(port, d, 20):
            raise RuntimeError('lupined did not start')
        stop = lambda: (d.send_signal(signal.SIGTERM), d.wait(60))[1]  # noqa: E731
    else:
        m = ServiceManager(argv, tmp, env=env, log_path=os.path.join(tmp, mode + '.log'))
        m.start()
        if m.wait_for('READY', '1') is None:
            raise RuntimeError('lupined did not start under the service manager')
        stop = m.stop
    kernels = os.path.join(ROOT, 'tests', 'kernels')
    progs = os.path.join(build, 'tests')
    clients = []
    for name, argv in (('restart-job', ['e2e_restart', kernels, '100000', '20']),
                       ('events', ['e2e_events_restore', kernels])):
        cenv = dict(os.environ, LUPINE_SERVER=f'127.0.0.1:{port}', LUPINE_SESSION=name,
                    LUPINE_RECONNECT_TIMEOUT='5', LD_LIBRARY_PATH=os.path.abspath(os.path.join(build, 'shim')))
        clients.append(subprocess.Popen([os.path.join(progs, argv[0])] + argv[1:], env=cenv, stdin=subprocess.PIPE,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    time.sleep(3)
    if stop() != 0:
        raise RuntimeError(f'the drain ({mode}) failed; see {os.path.join(tmp, mode + ".log")}')
    for c in clients:
        c.kill()
        c.wait()
    seeds = {}
    for session in sorted(os.listdir(ckdir)):
        for root, _, files in os.walk(os.path.join(ckdir, session)):
            for f in files:
                p = os.path.join(root, f)
                if f in ('manifest', 'events', 'replies') and os.path.getsize(p) <= 65536:
                    with open(p, 'rb') as fh:
                        seeds[f'{f}-{mode}-{session}.bin'] = fh.read()
    return seeds


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    build = os.path.abspath(sys.argv[1])
    os.makedirs(OUT, exist_ok=True)
    seeds = {}
    with tempfile.TemporaryDirectory(prefix='lupine-ckpt-corpus-') as tmp:
        for mode in ('durable', 'hot', 'both'):
            seeds.update(capture(build, mode, tmp))
    for name, data in sorted(seeds.items()):
        if name.startswith('manifest-durable-'):
            seeds['manifest-v1-' + name[len('manifest-durable-'):]] = to_version1(data)
    for name, data in sorted(seeds.items()):
        with open(os.path.join(OUT, name), 'wb') as f:
            f.write(data)
        print(f'{name}: {len(data)} bytes')
    return 0


if __name__ == '__main__':
    sys.exit(main())
