#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""PyTorch GPT training migrated between two lupined (issue 17), on the real GPU.

usage: gpt_migrate.py BUILD_DIR [STEPS] [MOVES]     (default 120 2)

1. tests/gpu/gpt_train.py runs STEPS steps on the local driver: the
   reference digest of the final weights.
2. Two lupined on the one GPU act as two hosts (--host-id gpuA, gpuB) on
   one checkpoint directory. The training runs through A, its
   LUPINE_SERVER naming A only. MOVES times, at marks spread over the run,
   `lupinectl migrate` moves the session to the other host (A to B, B to
   A, ...): the client follows the GOODBYE's endpoint.
3. PASS when every move reported done, the client finished, and its final
   weights are bitwise identical to the local run's. Each move's bytes and
   pause are printed.
"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SHA_RE = re.compile(r'final weights sha256 ([0-9a-f]{64})')
sys.path.insert(0, HERE)
from gpt_upgrades import torch_libdirs  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    build = os.path.abspath(sys.argv[1])
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 120
    moves = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    train = os.path.join(HERE, 'gpt_train.py')
    ctl = os.path.join(build, 'cli', 'lupinectl')
    local_env = {k: v for k, v in os.environ.items() if k != 'LD_LIBRARY_PATH'}
    print(f'gpt_migrate: local run of {steps} steps', flush=True)
    local = subprocess.run([sys.executable, train, str(steps)], env=local_env, capture_output=True, text=True,
                           timeout=900)
    ref = SHA_RE.search(local.stdout)
    if local.returncode != 0 or not ref:
        print('gpt_migrate: FAIL (the local run failed)\n', local.stderr[-2000:])
        return 1
    with tempfile.TemporaryDirectory(prefix='lupine-gpt-mig-') as tmp:
        hosts = []
        for label in ('gpuA', 'gpuB'):
            port = free_port()
            sock = os.path.join(tmp, f'{label}.sock')
            logp = os.path.join(tmp, f'{label}.log')
            p = subprocess.Popen([f'{build}/daemon/lupined', '--backend', 'cuda', '--listen', f'127.0.0.1:{port}',
                                  '--listen', f'unix:{sock}', '--checkpoint-dir', os.path.join(tmp, 'ck'),
                                  '--host-id', label, '--drain-timeout', '300', '--health-policy', 'off'],
                                 stdout=open(logp, 'w'), stderr=subprocess.STDOUT, env=local_env)
            hosts.append(dict(label=label, port=port, sock=sock, log=logp, proc=p))
        for h in hosts:
            for _ in range(100):
                if os.path.exists(h['sock']):
                    break
                time.sleep(0.1)
        env = dict(os.environ, LUPINE_SERVER=f'127.0.0.1:{hosts[0]["port"]}', LUPINE_SESSION='gpt-migrate',
                   LUPINE_RECONNECT_TIMEOUT='300',
                   LD_LIBRARY_PATH=':'.join([os.path.join(build, 'shim')] + torch_libdirs()))
        c = subprocess.Popen([sys.executable, '-u', train, str(steps)], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        marks = [steps * (i + 1) // (moves + 1) for i in range(moves)]
        reports, out_lines, done = [], [], 0
        try:
            for line in c.stdout:
                out_lines.append(line)
                m = re.match(r'step (\d+) ', line)
                if not m or done >= moves or int(m.group(1)) < marks[done]:
                    continue
                src, dst = hosts[done % 2], hosts[(done + 1) % 2]
                r = subprocess.run([ctl, '--socket', src['sock'], '--json', 'migrate', 'gpt-migrate', '--to',
                                    f'127.0.0.1:{dst["port"]}'], capture_output=True, text=True, timeout=600)
                rep = json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else {}
                reports.append(rep)
                done += 1
                print(f'gpt_migrate: move {done} at step {m.group(1)}, {src["label"]} -> {dst["label"]}: '
                      f'{rep.get("state", "FAILED " + r.stderr.strip()[-300:])}, '
                      f'{rep.get("bytes", 0) / 2**20:.0f} MiB, pause on the source {rep.get("pause_s", 0):.3f} s',
                      flush=True)
            c.wait(timeout=900)
        finally:
            if c.poll() is None:
                c.kill()
            err = c.stderr.read()
            for h in hosts:
                h['proc'].terminate()
                h['proc'].wait(timeout=120)
        out = ''.join(out_lines)
        got = SHA_RE.search(out)
        same = bool(got) and got.group(1) == ref.group(1)
        adopted = [open(h['log'], errors='replace').read().count('session gpt-migrate: adopted from') for h in hosts]
        print(f'gpt_migrate: {done} moves (wanted {moves}), adoptions {adopted}, client rc {c.returncode}, weights '
              f'{"bitwise identical to" if same else "DIFFERENT from"} the local run')
        for name, o in (('local', local.stdout), ('lupine', out)):
            ms = re.search(r'([\d.]+) ms/step', o)
            print(f'gpt_migrate: {name} {ms.group(1) if ms else "?"} ms/step')
        ok = (done == moves and all(r.get('state') == 'done' for r in reports) and c.returncode == 0 and same and
              sum(adopted) == moves)
        if not ok:
            for h in hosts:
                print(f'--- {h["label"]}:\n' + open(h['log'], errors='replace').read()[-2500:])
            print(err[-2000:])
        print('gpt_migrate:', 'PASS' if ok else 'FAIL')
        return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
