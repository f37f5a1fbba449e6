#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""PyTorch GPT training through lupined upgrades (issue 5), on the real GPU.

usage: gpt_upgrades.py BUILD_DIR [STEPS] [UPGRADES]     (default 120 5)

1. tests/gpu/gpt_train.py runs STEPS steps on the local driver: the
   reference digest of the final weights.
2. The same training runs through lupined (--checkpoint-mode hot). Each time
   the client reports a step past the next mark (UPGRADES marks spread over
   the run), lupined gets SIGHUP: it drains, hot-checkpoints, re-executes
   itself and restores, with the client connected all along
   (LUPINE_RECONNECT_TIMEOUT=0: any disconnect fails the run). The next
   upgrade waits for the previous one's restore.
3. PASS when there were UPGRADES re-execs, the daemon pid never changed, the
   client finished, and its final weights are bitwise identical (sha256 of
   every tensor) to the local run. The pause of each upgrade (SIGHUP to
   "restore finished" in the log) is printed.
With $OUT set, lupined's log is copied to $OUT/gpt_upgrades.log.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SHA_RE = re.compile(r'final weights sha256 ([0-9a-f]{64})')


def torch_libdirs():
    """The cuBLAS/cuDNN that came with the PyTorch wheel, for the shim's side."""
    import glob
    import site
    dirs = []
    for base in site.getsitepackages():
        for d in glob.glob(os.path.join(base, 'nvidia', '*', 'lib')):
            dirs.append(d)
    return dirs


def wait_for(path, pattern, count, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        with open(path, errors='replace') as f:
            if f.read().count(pattern) >= count:
                return True
        time.sleep(0.02)
    return False


def finish(client, daemon, log, logp, name):
    """The end of a run: the client killed if it still runs, the daemon
    stopped (SIGTERM, then SIGKILL after 120 s), its log closed and copied
    to $OUT/NAME.log. Returns the client's stderr."""
    if client.poll() is None:
        client.kill()
    err = client.stderr.read()
    daemon.send_signal(signal.SIGTERM)
    try:
        daemon.wait(timeout=120)
    except subprocess.TimeoutExpired:
        daemon.kill()
    log.close()
    if os.environ.get('OUT'):
        shutil.copy(logp, os.path.join(os.environ['OUT'], f'{name}.log'))
    return err


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    build = os.path.abspath(sys.argv[1])
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 120
    upgrades = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    train = os.path.join(HERE, 'gpt_train.py')

    local_env = {k: v for k, v in os.environ.items() if k != 'LD_LIBRARY_PATH'}
    print(f'gpt_upgrades: local run of {steps} steps', flush=True)
    local = subprocess.run([sys.executable, train, str(steps)], env=local_env, capture_output=True, text=True,
                           timeout=900)
    ref = SHA_RE.search(local.stdout)
    if local.returncode != 0 or not ref:
        print('gpt_upgrades: FAIL (the local run failed)\n', local.stderr[-2000:])
        return 1

    with tempfile.TemporaryDirectory(prefix='lupine-gpt-up-') as tmp:
        sock = os.path.join(tmp, 'lupined.sock')
        logp = os.path.join(tmp, 'lupined.log')
        log = open(logp, 'w')
        d = subprocess.Popen([f'{build}/daemon/lupined', '--backend', 'cuda', '--listen', f'unix:{sock}',
                              '--checkpoint-dir', os.path.join(tmp, 'ck'), '--checkpoint-mode', 'hot',
                              '--drain-timeout', '300'], stdout=log, stderr=subprocess.STDOUT,
                             env=local_env)
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.1)
        pid = d.pid
        env = dict(os.environ, LUPINE_SERVER=f'unix:{sock}', LUPINE_SESSION='gpt-upgrades',
                   LUPINE_RECONNECT_TIMEOUT='0',
                   LD_LIBRARY_PATH=':'.join([os.path.join(build, 'shim')] + torch_libdirs()))
        c = subprocess.Popen([sys.executable, '-u', train, str(steps)], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        with open(logp, errors='replace') as f:
            base = f.read().count('restore finished')
        marks = [steps * (i + 1) // (upgrades + 1) for i in range(upgrades)]
        done = 0
        pauses = []
        out_lines = []
        pid_kept = True
        try:
            for line in c.stdout:
                out_lines.append(line)
                m = re.match(r'step (\d+) ', line)
                if not m or done >= upgrades or int(m.group(1)) < marks[done]:
                    continue
                t0 = time.time()
                d.send_signal(signal.SIGHUP)
                done += 1
                if not wait_for(logp, 'restore finished', base + done, 300):
                    print(f'gpt_upgrades: upgrade {done} did not finish within 300 s')
                    break
                pauses.append(time.time() - t0)
                pid_kept = pid_kept and d.poll() is None and d.pid == pid
                print(f'gpt_upgrades: upgrade {done} at step {m.group(1)}: {pauses[-1]:.3f} s from SIGHUP to '
                      f'restore finished', flush=True)
            c.wait(timeout=900)
        finally:
            err = finish(c, d, log, logp, 'gpt_upgrades')
        text = open(logp, errors='replace').read()
        out = ''.join(out_lines)
        got = SHA_RE.search(out)
        n = text.count('upgrade: re-executing')
        same = bool(got) and got.group(1) == ref.group(1)
        print(f'gpt_upgrades: {n} re-execs (wanted {upgrades}), pid unchanged: {pid_kept}, client rc '
              f'{c.returncode}, weights {"bitwise identical to" if same else "DIFFERENT from"} the local run')
        for name, o in (('local', local.stdout), ('lupine', out)):
            ms = re.search(r'([\d.]+) ms/step', o)
            print(f'gpt_upgrades: {name} {ms.group(1) if ms else "?"} ms/step; weights '
                  f'{SHA_RE.search(o).group(1)[:16] if SHA_RE.search(o) else "?"}')
        if pauses:
            print(f'gpt_upgrades: upgrade pause min {min(pauses):.3f} s, max {max(pauses):.3f} s')
        ok = n == upgrades and pid_kept and c.returncode == 0 and same
        if not ok:
            print(text[-3000:], err[-2000:])
        print('gpt_upgrades:', 'PASS' if ok else 'FAIL')
        return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
