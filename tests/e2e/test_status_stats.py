#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""e2e: what `lupinectl status` says about a working session, and the
progress of a long checkpoint and restore (issue 18).

Usage: test_status_stats.py LUPINED LUPINECTL TESTS_DIR SHIM_DIR

A client (e2e_bigsession) fills 1 GiB of device memory on the simulator and
waits. Checks:
- `lupinectl --json status`: the session's calls, bytes received, memory
  held and client address are what it did; it was never checkpointed; the
  backend of `--backend auto` is named ("auto (sim)");
- the text form shows the same in its columns;
- `lupinectl drain` checkpoints it: the log has the checkpoint's closing
  line (GiB, seconds, GB/s); a new daemon restores it: the restore's line,
  and the status then names the checkpoint epoch;
- the client verifies every byte after the restart.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as w  # noqa: E402

check = w.Checks()
GIB = 1 << 30


def status(ctl, sock):
    r = subprocess.run([ctl, '--socket', sock, '--json', 'status'], capture_output=True, text=True, timeout=30)
    try:
        return json.loads(r.stdout)
    except ValueError:
        return None


def session(js, name):
    for s in (js or {}).get('sessions', []):
        if s['name'] == name:
            return s
    return None


def wait_for(pred, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    return None


def main():
    lupined, ctl, tests, shim = sys.argv[1:5]
    with tempfile.TemporaryDirectory(prefix='lupine-stats-') as tmp:
        sock = os.path.join(tmp, 'd.sock')
        log_path = os.path.join(tmp, 'd.log')
        log = open(log_path, 'a')
        # auto chooses the simulator where no driver loads (CI); the shim
        # must not be on the daemon's library path
        env = {k: v for k, v in os.environ.items()
               if k not in ('NOTIFY_SOCKET', 'LISTEN_FDS', 'JOURNAL_STREAM', 'LD_LIBRARY_PATH')}
        argv = [lupined, '--backend', 'auto', '--listen', f'unix:{sock}', '--checkpoint-dir',
                os.path.join(tmp, 'ck'), '--log-target', 'stderr']
        d = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        check('the daemon starts', wait_for(lambda: os.path.exists(sock), 20) is not None)
        go = os.path.join(tmp, 'go')
        cenv = dict(os.environ, LUPINE_SERVER=f'unix:{sock}', LUPINE_SESSION='big', LUPINE_RECONNECT_TIMEOUT='120',
                    LD_LIBRARY_PATH=shim)
        c = subprocess.Popen([os.path.join(tests, 'e2e_bigsession'), '1', go], env=cenv, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        line = c.stdout.readline()
        check('the client filled 1 GiB', line.startswith('filled 1 GiB'), line)
        # the worker reports at most once a second, and once more when it goes idle
        s = wait_for(lambda: (lambda x: x if x and x.get('memory', 0) >= GIB and x.get('bytes_in', 0) >= GIB
                                         else None)(session(status(ctl, sock), 'big')), 10)
        js = status(ctl, sock)
        check('status: the session holds 1 GiB and received 1 GiB', s is not None, json.dumps(js))
        if s:
            check('status: calls counted (at least the 16 copies and the allocation)', s['calls'] >= 17, str(s))
            check('status: the client\'s address', s['client'].startswith('unix:'), str(s))
            check('status: never checkpointed', s['checkpoint_epoch'] == 0 and s['checkpoint_age_s'] == -1, str(s))
            check('status: the anonymous tenant', s['tenant'] == '', str(s))
        check('status: --backend auto names what it chose', js and js['backend'] == 'auto (sim)',
              js and js['backend'])
        r = subprocess.run([ctl, '--socket', sock, 'status'], capture_output=True, text=True, timeout=30)
        check('status (text): the session\'s line has its memory and calls/s',
              re.search(r'^big +slot \d+ +serving +pid \d+  tenant -  client unix:.*  memory 1\.00 GiB  \d+ calls/s'
                        r'  .*never checkpointed$', r.stdout, re.M) is not None, r.stdout)
        r = subprocess.run([ctl, '--socket', sock, 'drain'], capture_output=True, text=True, timeout=120)
        check('drain accepted', r.returncode == 0, r.stdout + r.stderr)
        check('the drain exits 0', d.wait(timeout=120) == 0)
        with open(log_path) as f:
            text = f.read()
        check('the checkpoint says how much, how long and how fast',
              re.search(r'session big: checkpoint: 1\.00 GiB in [\d.]+ s \([\d.]+ GB/s\)', text) is not None,
              text[-2000:])
        d = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        check('the new daemon starts', wait_for(lambda: os.path.exists(sock), 30) is not None)
        # the UNIX socket answers status while the session is being restored
        states = []
        deadline = time.time() + 30
        while time.time() < deadline:
            x = session(status(ctl, sock), 'big')
            states.append(x['state'] if x else None)
            if x and x['state'] != 'restoring':
                break
        check('status answers while the session is restored', 'restoring' in states, str(states[:5]))
        s = wait_for(lambda: (lambda x: x if x and x.get('checkpoint_epoch', 0) >= 1 else None)(
            session(status(ctl, sock), 'big')), 30)
        check('status after the restore: the checkpoint epoch', s is not None, json.dumps(status(ctl, sock)))
        open(go, 'w').close()
        out, err = c.communicate(timeout=120)
        check('the client verified 1 GiB after the restart', c.returncode == 0 and 'verified 1 GiB' in out,
              out[-500:] + err[-1500:])
        d.send_signal(signal.SIGTERM)
        d.wait(timeout=60)
        log.close()
        with open(log_path) as f:
            text = f.read()
        check('the restore says how much, how long and how fast',
              re.search(r'session big: restore: 1\.00 GiB in [\d.]+ s \([\d.]+ GB/s\)', text) is not None,
              text[-2000:])
    sys.exit(1 if check.failed else 0)


if __name__ == '__main__':
    main()
