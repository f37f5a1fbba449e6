#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""e2e: lupined under a stand-in service manager (sdharness.py).

Usage: test_systemd_notify.py PATH/TO/lupined PATH/TO/lupinectl

Checks, on the sim backend:
  activation  sockets handed over through LISTEN_FDS are served (UNIX and
              TCP, a real HELLO on each, lupinectl status on the UNIX one)
              and --listen is ignored; READY=1 comes from the daemon's pid
              with a STATUS= line; WATCHDOG=1 every half WATCHDOG_USEC, and
              the pings stop while the loop is stopped (SIGSTOP) and resume
              after; SIGTERM sends STOPPING=1; the sockets survive the stop
              (a client that connects while lupined is down waits in the
              backlog and is served after the restart).
  fdstore     fds in the fd store (one sent by FDSTORE=1 on the notify
              socket, one put there directly) and a UDP socket come back
              through LISTEN_FDS; nobody claims them, so lupined closes them
              and sends FDSTOREREMOVE=1 for each, and the store ends empty;
              a datagram with fds but no FDSTORE=1 does not store them.
  drain       with --checkpoint-dir: SIGTERM with a session sends
              STOPPING=1, STATUS=draining and EXTEND_TIMEOUT_USEC=; the
              restart sends EXTEND_TIMEOUT_USEC= and STATUS=restoring
              before READY=1, which comes only once restore has finished.
  badenv      LISTEN_PID of another process: LISTEN_FDS is ignored and
              --listen serves; a LISTEN_FDS that is not a number: a clear
              error and exit 1.

Standard library only. Exit 0 on pass, 1 on failure (naming the case).
"""
import array
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as w  # noqa: E402
from sdharness import ServiceManager  # noqa: E402

check = w.Checks()
# Pings every 0.5 s; a gap of a whole interval is what systemd would act on.
WATCHDOG_USEC = 1000000


def base_env():
    env = dict(os.environ)
    env.pop('LUPINE_CHECKPOINT_LIBRARY', None)
    env.pop('LD_LIBRARY_PATH', None)
    return env


def hello(addr, name):
    try:
        s, h, _ = w.handshake(addr, name)
        return s
    except (OSError, RuntimeError) as e:
        print(f'  HELLO to {addr}: {e}')
        return None


def goodbye(s):
    try:
        s.sendall(w.frame(w.OP_GOODBYE, flags=w.F_SYNC))
        w.wait_closed(s, 5)
    except OSError:
        pass
    s.close()


def case_activation(lupined, lupinectl, tmp):
    unix_path = os.path.join(tmp, 'act.sock')
    ignored = os.path.join(tmp, 'ignored.sock')
    port = w.free_port()
    argv = [lupined, '--backend', 'sim', '--listen', f'unix:{ignored}', '--hello-timeout-ms', '5000']
    with ServiceManager(argv, tmp, env=base_env(), watchdog_usec=WATCHDOG_USEC,
                        log_path=os.path.join(tmp, 'activation.log')) as m:
        m.add_listener('unix', unix_path, 'unix')
        m.add_listener('tcp', ('127.0.0.1', port), 'tcp')
        proc = m.start()
        ready = m.wait_for('READY', '1', timeout=30)
        check('activation: READY=1', ready is not None, m.log()[-2000:])
        if not ready:
            return
        check('activation: READY=1 comes from the daemon (LISTEN_PID and the exec wrapper agree)',
              ready.pid == proc.pid, f'from pid {ready.pid}, daemon {proc.pid}')
        st = m.wait_for('STATUS', timeout=5)
        check('activation: a STATUS= line says it serves', st is not None and 'serving' in st.get('STATUS'),
              repr(st))
        log = m.log()
        check('activation: the inherited sockets are named in the log',
              'name unix' in log and 'name tcp' in log and f'127.0.0.1:{port}' in log, log[-2000:])
        check('activation: --listen is ignored, and says so',
              '--listen is ignored' in log and not os.path.exists(ignored), log[-2000:])
        for addr, what in ((unix_path, 'UNIX'), (('127.0.0.1', port), 'TCP')):
            s = hello(addr, f'sd-act-{what}')
            check(f'activation: a client is served on the activated {what} socket', s is not None)
            if s:
                goodbye(s)
        r = subprocess.run([lupinectl, '--socket', unix_path, 'status'], capture_output=True, text=True,
                           timeout=20)
        check('activation: lupinectl status over the activated UNIX socket', r.returncode == 0 and
              'session' in r.stdout, r.stdout + r.stderr)

        # The watchdog: pings at half the interval, from the event loop.
        t0 = time.monotonic()
        time.sleep(3)
        pings = [n.time for n in m.notifications('WATCHDOG') if n.time >= t0 and n.get('WATCHDOG') == '1']
        gaps = [b - a for a, b in zip(pings, pings[1:])]
        check('watchdog: WATCHDOG=1 about every half interval',
              len(pings) >= 4 and gaps and max(gaps) < WATCHDOG_USEC / 1e6,
              f'{len(pings)} pings in 3 s, largest gap {max(gaps) if gaps else None}')
        check('watchdog: not overdue while the loop runs', not m.watchdog_overdue())
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(2 * WATCHDOG_USEC / 1e6)
        overdue = m.watchdog_overdue()
        os.kill(proc.pid, signal.SIGCONT)
        check('watchdog: a stopped loop stops the pings (systemd would act)', overdue)
        t1 = time.monotonic()
        again = m.wait_for('WATCHDOG', '1', timeout=10, after=t1)
        check('watchdog: pings resume when the loop runs again', again is not None)

        t2 = time.monotonic()
        rc = m.stop()
        stopping = m.wait_for('STOPPING', '1', timeout=1, after=t2)
        check('stop: STOPPING=1 on SIGTERM', stopping is not None)
        check('stop: exit status 0', rc == 0, f'exit {rc}\n{m.log()[-1500:]}')
        check('stop: the activated UNIX socket is not removed', os.path.exists(unix_path))

        # A client arriving while lupined is down waits in the backlog.
        waiting = w.connect(('127.0.0.1', port))
        waiting.sendall(w.frame(w.OP_HELLO, w.hello_payload('sd-backlog'), flags=w.F_SYNC))
        t3 = time.monotonic()
        m.restart_with_stored_fds()
        check('restart: READY=1 again', m.wait_for('READY', '1', timeout=30, after=t3) is not None)
        try:
            waiting.settimeout(15)
            h, _ = w.read_frame(waiting)
            ok = h['op'] == w.OP_HELLO and h['status'] == 0
        except OSError as e:
            ok, h = False, e
        check('restart: the client that queued while lupined was down is served', ok, repr(h))
        goodbye(waiting)
        check('restart: exit status 0', m.stop() == 0, m.log()[-1500:])


def send_notify(path, text, fds=()):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', fds).tobytes())] if fds else []
    s.sendmsg([text.encode()], anc, 0, path)
    s.close()


def readable_eof(fd, timeout):
    r, _, _ = select.select([fd], [], [], timeout)
    return bool(r) and os.read(fd, 1) == b''


def case_fdstore(lupined, tmp):
    unix_path = os.path.join(tmp, 'store.sock')
    argv = [lupined, '--backend', 'sim', '--hello-timeout-ms', '5000']
    with ServiceManager(argv, tmp, env=base_env(), log_path=os.path.join(tmp, 'fdstore.log')) as m:
        m.add_listener('unix', unix_path, 'unix')
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind(('127.0.0.1', 0))
        m.add_fd(os.dup(udp.fileno()), 'udp')
        udp.close()
        # What the hot checkpoint will do: FDSTORE=1 with a name.
        r1, w1 = os.pipe()
        send_notify(m.notify_path, 'FDSTORE=1\nFDNAME=hot-sess-a-0', [w1])
        os.close(w1)
        # fds without FDSTORE=1 are not kept.
        r2, w2 = os.pipe()
        send_notify(m.notify_path, 'STATUS=just passing an fd', [w2])
        os.close(w2)
        deadline = time.monotonic() + 5
        while len(m.notifications()) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        r3, w3 = os.pipe()
        m.store_fd(w3, 'stale-sess-b-0')
        os.close(w3)
        names = [n for n, _ in m.stored_fds]
        check('fdstore: FDSTORE=1 + FDNAME= is stored, a bare fd is not',
              names == ['hot-sess-a-0', 'stale-sess-b-0'], repr(names))
        check('fdstore: an fd sent without FDSTORE=1 is closed by the manager', readable_eof(r2, 2))

        m.start()
        ready = m.wait_for('READY', '1', timeout=30)
        check('fdstore: READY=1', ready is not None, m.log()[-2000:])
        msgs = m.notifications()
        removes = [n for n in msgs if n.get('FDSTOREREMOVE') == '1']
        check('fdstore: FDSTOREREMOVE=1 for every unclaimed fd, before READY=1',
              {n.get('FDNAME') for n in removes} == {'hot-sess-a-0', 'stale-sess-b-0', 'udp'} and
              len(removes) == 3 and all(msgs.index(n) < msgs.index(ready) for n in removes), repr(msgs))
        check('fdstore: the store is empty', m.stored_fds == [], repr(m.stored_fds))
        check('fdstore: lupined closed its copies (the pipes see EOF)', readable_eof(r1, 5) and readable_eof(r3, 5))
        log = m.log()
        check('fdstore: one log line per released fd',
              all(log.count(f'inherited fd {n}: nobody claimed it') == 1
                  for n in ('hot-sess-a-0', 'stale-sess-b-0', 'udp')), log[-2000:])
        check('fdstore: the UDP socket is not taken for a listener', '1 listening socket(s) and 3 other fd(s)' in log,
              log[-2000:])
        s = hello(unix_path, 'sd-store')
        check('fdstore: serves on the UNIX socket', s is not None)
        if s:
            goodbye(s)
        check('fdstore: exit status 0', m.stop() == 0, m.log()[-1500:])
        for fd in (r1, r2, r3):
            os.close(fd)


def case_drain(lupined, tmp):
    port = w.free_port()
    ckdir = os.path.join(tmp, 'ck')
    argv = [lupined, '--backend', 'sim', '--checkpoint-dir', ckdir, '--drain-timeout', '30', '--hello-timeout-ms',
            '5000']
    with ServiceManager(argv, tmp, env=base_env(), watchdog_usec=2000000,
                        log_path=os.path.join(tmp, 'drain.log')) as m:
        m.add_listener('tcp', ('127.0.0.1', port), 'tcp')
        m.start()
        check('drain: READY=1 (nothing to restore)', m.wait_for('READY', '1', timeout=30) is not None,
              m.log()[-2000:])
        s = hello(('127.0.0.1', port), 'sd-drain')
        check('drain: a session', s is not None)
        t0 = time.monotonic()
        m.proc.send_signal(signal.SIGTERM)
        stopping = m.wait_for('STOPPING', '1', timeout=10, after=t0)
        check('drain: STOPPING=1', stopping is not None)
        check('drain: STATUS=draining', m.wait_for('STATUS', timeout=10, after=t0) is not None and
              any('draining' in n.get('STATUS') for n in m.notifications('STATUS') if n.time >= t0))
        check('drain: EXTEND_TIMEOUT_USEC=', m.wait_for('EXTEND_TIMEOUT_USEC', timeout=10, after=t0) is not None)
        rc = m.stop(timeout=60)
        check('drain: exit 0, the session checkpointed', rc == 0 and 'drain finished: 1 of 1' in m.log(),
              f'exit {rc}\n{m.log()[-2000:]}')
        if s:
            s.close()

        t1 = time.monotonic()
        m.restart_with_stored_fds()
        ready = m.wait_for('READY', '1', timeout=30, after=t1)
        check('restore: READY=1', ready is not None, m.log()[-2000:])
        after = [n for n in m.notifications() if n.time >= t1]
        keys = [k for n in after for k in n.fields]
        i_ready = keys.index('READY') if 'READY' in keys else -1
        i_ext = keys.index('EXTEND_TIMEOUT_USEC') if 'EXTEND_TIMEOUT_USEC' in keys else -1
        restoring = [i for i, n in enumerate(after) if 'restoring' in n.get('STATUS', '')]
        check('restore: EXTEND_TIMEOUT_USEC= before READY=1', 0 <= i_ext < i_ready, repr(after))
        check('restore: STATUS=restoring before READY=1', restoring and
              after.index(ready) > restoring[0], repr(after))
        log = m.log()
        check('restore: READY=1 only after the restore finished',
              'restore finished: 1 of 1' in log, log[-2000:])
        m.stop(signal.SIGKILL, timeout=10)


def case_badenv(lupined, tmp):
    sock = os.path.join(tmp, 'bad.sock')
    env = base_env()
    env.update(LISTEN_PID='1', LISTEN_FDS='1', LISTEN_FDNAMES='x')
    log_path = os.path.join(tmp, 'badenv.log')
    with open(log_path, 'wb') as log:
        p = subprocess.Popen([lupined, '--backend', 'sim', '--listen', f'unix:{sock}'], env=env,
                             stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while not os.path.exists(sock) and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.05)
    s = hello(sock, 'sd-bad') if os.path.exists(sock) else None
    check('badenv: LISTEN_FDS for another pid is ignored; --listen serves', s is not None,
          open(log_path).read()[-1500:])
    if s:
        goodbye(s)
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=20)

    env.update(LISTEN_PID=None)
    env.pop('LISTEN_PID')
    r = subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'sdharness.py'),
                        '--exec', '', '--', lupined, '--backend', 'sim', '--listen', f'unix:{sock}'],
                       env=dict(env, LISTEN_FDS='two'), capture_output=True, text=True, timeout=20)
    check('badenv: a LISTEN_FDS that is not a number is refused clearly',
          r.returncode == 1 and 'LISTEN_FDS' in r.stderr, f'exit {r.returncode}: {r.stderr[-800:]}')


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    lupined, lupinectl = (os.path.abspath(a) for a in sys.argv[1:])
    tmp = tempfile.mkdtemp(prefix='lupine-sd-')
    try:
        case_activation(lupined, lupinectl, tmp)
        case_fdstore(lupined, tmp)
        case_drain(lupined, tmp)
        case_badenv(lupined, tmp)
    finally:
        if check.failed:
            print(f'logs kept in {tmp}')
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if check.failed:
        print('FAILED: ' + ', '.join(check.failed))
        return 1
    print('PASS')
    return 0


if __name__ == '__main__':
    sys.exit(main())
