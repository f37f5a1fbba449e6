#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""One run of a tests/gpu/model program through its own lupined on the real
driver, with a restart at the program's midpoint (issue 14: every object
survives a drain and a restore, or an upgrade).

    model_restart.py BUILD durable|upgrade PROG [ARGS...]

The client environment (LD_LIBRARY_PATH with the shim first) is the
caller's. PROG gets "hold" as its last argument: it prints "ready:" at its
midpoint and waits; then lupined is drained with SIGTERM and started again
on the same checkpoint directory (durable), or re-executed with SIGHUP
(upgrade), and the program goes on. Prints the program's output without
the "ready:" line, so that it can be compared with the local run; exits
with the program's status, or 3 when the daemon did not restore the
session (the reason on stderr)."""
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time


def wait_for(path, needle, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        with open(path, errors='replace') as f:
            text = f.read()
        if needle in text:
            return True
        time.sleep(0.1)
    return False


def read_until_ready(c, out, timeout):
    """Copies the client's lines into out until its "ready:" line."""
    got = threading.Event()

    def reader():
        for line in c.stdout:
            if line.startswith('ready:'):
                got.set()
                return
            out.append(line)
    t = threading.Thread(target=reader, daemon=True)
    t.start()
    got.wait(timeout)
    return got.is_set()


def main():
    build, mode, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
    tmp = tempfile.mkdtemp(prefix='lupine-model-')
    sock = os.path.join(tmp, 'lupined.sock')
    logp = os.path.join(tmp, 'lupined.log')
    denv = {k: v for k, v in os.environ.items() if k not in ('LD_LIBRARY_PATH', 'LUPINE_SERVER')}
    dargv = [os.path.join(build, 'daemon', 'lupined'), '--backend', 'cuda', '--listen', f'unix:{sock}',
             '--checkpoint-dir', os.path.join(tmp, 'ck'), '--drain-timeout', '120']
    log = open(logp, 'a')

    def daemon():
        d = subprocess.Popen(dargv, stdout=log, stderr=subprocess.STDOUT, env=denv)
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        return d
    d = daemon()
    session = f'model{os.getpid()}'
    cenv = dict(os.environ, LUPINE_SERVER=f'unix:{sock}', LUPINE_SESSION=session, LUPINE_RECONNECT_TIMEOUT='120')
    c = subprocess.Popen(argv + ['hold'], env=cenv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    out, problem = [], None
    if not read_until_ready(c, out, 240):
        problem = 'the program never reached its midpoint'
    elif mode == 'durable':
        os.unlink(sock)
        d.send_signal(signal.SIGTERM)
        if d.wait(timeout=180) != 0:
            problem = 'the drain did not exit 0'
        d = daemon()  # the session is restored when its client reconnects: checked below
    else:
        d.send_signal(signal.SIGHUP)
        if not wait_for(logp, f'{session}: serving', 120):
            problem = 'the upgraded daemon did not serve the session again'
    try:
        c.stdin.write('go\n')
        c.stdin.flush()
    except BrokenPipeError:
        pass
    rest, _ = c.communicate(timeout=300)
    sys.stdout.write(''.join(out) + rest)
    if not problem and mode == 'durable' and not wait_for(logp, f'{session}: restored checkpoint epoch', 10):
        problem = 'no durable restore of the session in the log'
    d.send_signal(signal.SIGTERM)
    try:
        d.wait(timeout=120)
    except subprocess.TimeoutExpired:
        d.kill()
    log.close()
    if os.environ.get('OUT'):
        with open(logp, errors='replace') as f, \
                open(os.path.join(os.environ['OUT'], 'model-restart.log'), 'a') as o:
            o.write(f'==== {mode} {" ".join(argv)}\n' + f.read())
    if problem:
        sys.stderr.write(f'model_restart: {problem}\n')
        with open(logp, errors='replace') as f:
            sys.stderr.write(f.read()[-3000:])
        sys.exit(3)
    sys.exit(c.returncode)


if __name__ == '__main__':
    main()
