#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""PyTorch GPT training with its step captured in a CUDA graph, through 2
SIGTERM restarts (durable checkpoints) and 2 upgrades of lupined (issue 13),
on the real GPU.

usage: gpt_graph_restarts.py BUILD_DIR [STEPS]     (default 120)

1. tests/gpu/gpt_train.py STEPS --graph on the local driver: the reference
   digest of the final weights.
2. The same through lupined. At four marks spread over the run: two
   restarts (SIGTERM: the daemon drains and checkpoints to its directory
   and exits; a new daemon restores from it; the client reconnects and
   replays the same graph exec), then two upgrades (SIGHUP: re-exec with
   the client connected).
3. PASS when the daemon restarted twice and upgraded twice, the client
   finished, and its final weights are bitwise identical to the local run.
With $OUT set, lupined's logs are copied to $OUT/gpt_graph_restarts.log.
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gpt_upgrades import SHA_RE, finish, torch_libdirs, wait_for  # noqa: E402


def start_daemon(build, sock, ckdir, log, env):
    d = subprocess.Popen([f'{build}/daemon/lupined', '--backend', 'cuda', '--listen', f'unix:{sock}',
                          '--checkpoint-dir', ckdir, '--drain-timeout', '300'], stdout=log,
                         stderr=subprocess.STDOUT, env=env)
    for _ in range(300):
        if os.path.exists(sock):
            break
        time.sleep(0.1)
    return d


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    build = os.path.abspath(sys.argv[1])
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 120
    train = os.path.join(HERE, 'gpt_train.py')
    local_env = {k: v for k, v in os.environ.items() if k != 'LD_LIBRARY_PATH'}
    print(f'gpt_graph_restarts: local run of {steps} steps with a CUDA graph', flush=True)
    local = subprocess.run([sys.executable, train, str(steps), '--graph'], env=local_env, capture_output=True,
                           text=True, timeout=900)
    ref = SHA_RE.search(local.stdout)
    if local.returncode != 0 or not ref:
        print('gpt_graph_restarts: FAIL (the local run failed)\n', local.stderr[-2000:])
        return 1

    events = ['restart', 'restart', 'upgrade', 'upgrade']
    with tempfile.TemporaryDirectory(prefix='lupine-gpt-graph-') as tmp:
        sock = os.path.join(tmp, 'lupined.sock')
        ckdir = os.path.join(tmp, 'ck')
        logp = os.path.join(tmp, 'lupined.log')
        log = open(logp, 'a')
        d = start_daemon(build, sock, ckdir, log, local_env)
        env = dict(os.environ, LUPINE_SERVER=f'unix:{sock}', LUPINE_SESSION='gpt-graph',
                   LUPINE_RECONNECT_TIMEOUT='300',
                   LD_LIBRARY_PATH=':'.join([os.path.join(build, 'shim')] + torch_libdirs()))
        c = subprocess.Popen([sys.executable, '-u', train, str(steps), '--graph'], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        marks = [steps * (i + 1) // (len(events) + 1) for i in range(len(events))]
        done, restarts, upgrades, out_lines, problems = 0, 0, 0, [], []
        try:
            for line in c.stdout:
                out_lines.append(line)
                m = re.match(r'step (\d+) ', line)
                if not m or done >= len(events) or int(m.group(1)) < marks[done]:
                    continue
                t0 = time.time()
                with open(logp, errors='replace') as f:
                    finished = f.read().count('restore finished')
                if events[done] == 'restart':
                    d.send_signal(signal.SIGTERM)
                    rc = d.wait(timeout=300)
                    if rc != 0:
                        problems.append(f'the drain before restart {restarts + 1} exited {rc}')
                        break
                    d = start_daemon(build, sock, ckdir, log, local_env)
                    restarts += 1
                else:
                    d.send_signal(signal.SIGHUP)
                    upgrades += 1
                if not wait_for(logp, 'restore finished', finished + 1, 300):
                    problems.append(f'{events[done]} {done + 1}: no "restore finished" within 300 s')
                    break
                print(f'gpt_graph_restarts: {events[done]} at step {m.group(1)}: {time.time() - t0:.3f} s to '
                      f'restore finished', flush=True)
                done += 1
            c.wait(timeout=900)
        finally:
            err = finish(c, d, log, logp, 'gpt_graph_restarts')
        text = open(logp, errors='replace').read()
        got = SHA_RE.search(''.join(out_lines))
        same = bool(got) and got.group(1) == ref.group(1)
        print(f'gpt_graph_restarts: {restarts} restarts, {upgrades} upgrades (wanted 2 and 2), client rc '
              f'{c.returncode}, weights {"bitwise identical to" if same else "DIFFERENT from"} the local run')
        ok = restarts == 2 and upgrades == 2 and c.returncode == 0 and same and not problems
        if not ok:
            print('\n'.join(problems), text[-3000:], err[-2000:])
        print('gpt_graph_restarts:', 'PASS' if ok else 'FAIL')
        return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
