#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""e2e: lupined socket-activated by systemd's own tool, systemd-socket-activate.

Usage: test_systemd_activate.py PATH/TO/lupined TESTS_BUILD_DIR SHIM_DIR PATH/TO/lupinectl

systemd-socket-activate binds a UNIX socket and a TCP port, names them
(--fdname=unix:tcp) and execs lupined with LISTEN_FDS, the way
lupined.socket does. lupined is given a --listen endpoint too, which it must
ignore. The tool starts lupined at the first connection: a real CUDA
program (e2e_basic, through the shim) over the TCP socket, which waits in
the backlog meanwhile. Then e2e_basic runs over the UNIX socket, lupinectl asks for status over the
UNIX one, and SIGTERM ends lupined with exit 0, leaving the UNIX socket
path (systemd's, not lupined's) where it was.

Exit 0 on pass, 1 on failure, 77 when systemd-socket-activate is missing.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as w  # noqa: E402

check = w.Checks()


def main():
    if len(sys.argv) != 5:
        print(__doc__)
        return 2
    lupined, tests_dir, shim, lupinectl = (os.path.abspath(a) for a in sys.argv[1:])
    tool = shutil.which('systemd-socket-activate')
    if not tool:
        print('SKIP: systemd-socket-activate is not installed (apt-get install systemd)')
        return 77
    tmp = tempfile.mkdtemp(prefix='lupine-sa-')
    unix_path = os.path.join(tmp, 'lupined.sock')
    ignored = os.path.join(tmp, 'ignored.sock')
    port = w.free_port()
    log_path = os.path.join(tmp, 'lupined.log')
    env = dict(os.environ)
    env.pop('LISTEN_FDS', None)
    env.pop('NOTIFY_SOCKET', None)
    env.pop('LUPINE_CHECKPOINT_LIBRARY', None)
    keep = ['-E', 'LUPINE_SIM_LIBRARY'] if 'LUPINE_SIM_LIBRARY' in env else []
    with open(log_path, 'wb') as log:
        proc = subprocess.Popen([tool, '-l', unix_path, '-l', f'127.0.0.1:{port}', '--fdname=unix:tcp'] + keep +
                                [lupined, '--backend', 'sim', '--listen', f'unix:{ignored}'],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)

    def text():
        with open(log_path, 'rb') as f:
            return f.read().decode('utf-8', 'replace')

    try:
        # The tool starts lupined at the first connection, which waits in
        # the backlog meanwhile: the first client is the activation.
        deadline = time.monotonic() + 30
        while 'as 4' not in text() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        check('systemd-socket-activate listens', 'as 4' in text() and 'ready: backend' not in text(), text())
        cenv = dict(env)
        cenv['LD_LIBRARY_PATH'] = shim + (':' + env['LD_LIBRARY_PATH'] if env.get('LD_LIBRARY_PATH') else '')
        for server, what in ((f'127.0.0.1:{port}', 'TCP'), (f'unix:{unix_path}', 'UNIX')):
            cenv['LUPINE_SERVER'] = server
            cenv['LUPINE_SESSION'] = f'sa-{what}'
            r = subprocess.run([os.path.join(tests_dir, 'e2e_basic')], env=cenv, capture_output=True, text=True,
                               timeout=120)
            check(f'e2e_basic through the shim over the activated {what} socket',
                  r.returncode == 0 and 'e2e_basic: OK' in r.stdout, (r.stdout + r.stderr)[-1500:])
            if what == 'TCP':
                log = text()
                check('lupined was started by the first connection', 'ready: backend' in log, log[-2000:])
                check('both sockets are adopted, by name',
                      f'listening on unix:{unix_path} (inherited fd 3, name unix)' in log and
                      f'listening on 127.0.0.1:{port} (inherited fd 4, name tcp)' in log, log[-2000:])
                check('--listen is ignored', '--listen is ignored' in log and not os.path.exists(ignored))
        r = subprocess.run([lupinectl, '--socket', unix_path, '--json', 'status'], capture_output=True, text=True,
                           timeout=20)
        check('lupinectl status over the activated UNIX socket', r.returncode == 0 and r.stdout.strip().startswith('{'),
              r.stdout + r.stderr)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = 'killed'
    check('SIGTERM: exit 0', rc == 0, f'exit {rc}\n{text()[-1500:]}')
    check("systemd's UNIX socket path is left alone", os.path.exists(unix_path))
    if check.failed:
        print(f'FAILED: {", ".join(check.failed)}; logs kept in {tmp}')
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    print('PASS')
    return 0


if __name__ == '__main__':
    sys.exit(main())
