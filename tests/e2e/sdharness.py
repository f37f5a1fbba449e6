# SPDX-License-Identifier: MIT
"""A stand-in for systemd's service manager, for tests of lupined.

It does, for one service, what systemd does for a Type=notify service with
NotifyAccess=all, WatchdogSec=, FileDescriptorStoreMax= and socket
activation:

  - it binds a NOTIFY_SOCKET (AF_UNIX, SOCK_DGRAM, SO_PASSCRED) and records
    every datagram from any process: its fields, the sender's pid from
    SCM_CREDENTIALS, and the fds from SCM_RIGHTS;
  - FDSTORE=1 puts the fds into its fd store under FDNAME= (default
    "stored"), up to fdstore_max; FDSTOREREMOVE=1 with FDNAME= drops them;
    fds sent without FDSTORE=1 are closed, as systemd does;
  - it holds listening sockets like a .socket unit (add_listener());
  - start() runs the daemon with NOTIFY_SOCKET, WATCHDOG_USEC/WATCHDOG_PID
    when a watchdog is set, and LISTEN_FDS/LISTEN_FDNAMES/LISTEN_PID
    carrying the listening sockets, then the stored fds, in that order, at
    3, 4, ... like systemd. A small exec wrapper (this file, run as a
    program) moves the fds into place, sets LISTEN_PID (and WATCHDOG_PID) to
    its own pid and execve()s the daemon, so the pid matches;
  - restart_with_stored_fds() starts it again once it has exited, passing
    the fd store back. Like systemd, the store keeps its fds across the
    restart: they are dup()ed into the new process.

What it does not do: kill a service whose watchdog runs out (it only
reports it: watchdog_overdue()), or drop stored fds that report POLLHUP.

Use:
    with ServiceManager([lupined, '--backend', 'sim'], tmpdir,
                        watchdog_usec=200000) as m:
        m.add_listener('unix', path)
        m.start()
        m.wait_for('READY', '1')
        ...
        m.stop()
        m.restart_with_stored_fds()

Standard library only.
"""
import array
import fcntl
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

SCM_MAX_FD = 253
FDNAME_RX = re.compile(r'[\x20-\x39\x3b-\x7e]{1,255}')  # printable ASCII, no ':'


def fdname_valid(name):
    return bool(FDNAME_RX.fullmatch(name))


class Notification:
    """One datagram on the NOTIFY_SOCKET."""

    def __init__(self, when, pid, text, fds):
        self.time = when            # time.monotonic() on arrival
        self.pid = pid              # sender, from SCM_CREDENTIALS (0 if none)
        self.text = text
        self.fds = fds              # the fd numbers as received (may be closed since)
        self.fields = {}
        for line in text.split('\n'):
            if '=' in line:
                k, v = line.split('=', 1)
                self.fields[k] = v

    def get(self, key, default=None):
        return self.fields.get(key, default)

    def __repr__(self):
        return f'<notify pid={self.pid} {self.text!r} fds={len(self.fds)}>'


class ServiceManager:
    """See the module's docstring."""

    def __init__(self, argv, tmpdir, env=None, watchdog_usec=None, fdstore_max=16384, log_path=None):
        self.argv = list(argv)
        self.tmpdir = tmpdir
        self.env = dict(os.environ if env is None else env)
        for k in ('NOTIFY_SOCKET', 'LISTEN_FDS', 'LISTEN_FDNAMES', 'LISTEN_PID', 'WATCHDOG_USEC', 'WATCHDOG_PID'):
            self.env.pop(k, None)
        self.watchdog_usec = watchdog_usec
        self.fdstore_max = fdstore_max
        self.log_path = log_path or os.path.join(tmpdir, 'service.log')
        self.listeners = []         # [(socket, name)], passed first on every start
        self.stored = []            # [(name, fd)]: the fd store, in the order stored
        self.notify_path = os.path.join(tmpdir, 'notify-%d.sock' % os.getpid())
        self.proc = None
        self.starts = 0
        self._started_at = 0.0
        self._msgs = []
        self._cv = threading.Condition()
        self._closing = False
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        if os.path.exists(self.notify_path):
            os.unlink(self.notify_path)
        self._sock.bind(self.notify_path)
        self._sock.settimeout(0.2)
        self._thread = threading.Thread(target=self._receive, daemon=True)
        self._thread.start()

    # ---- the notify socket

    def _receive(self):
        anc = socket.CMSG_SPACE(SCM_MAX_FD * 4) + socket.CMSG_SPACE(struct.calcsize('iII'))
        while not self._closing:
            try:
                data, ancdata, _flags, _addr = self._sock.recvmsg(65536, anc)
            except socket.timeout:
                continue
            except OSError:
                if self._closing:
                    return
                raise
            pid, fds = 0, []
            for level, typ, cdata in ancdata:
                if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                    a = array.array('i')
                    a.frombytes(cdata[:len(cdata) - len(cdata) % a.itemsize])
                    fds.extend(a)
                elif level == socket.SOL_SOCKET and typ == socket.SCM_CREDENTIALS:
                    pid = struct.unpack_from('iII', cdata)[0]
            n = Notification(time.monotonic(), pid, data.decode('utf-8', 'replace'), fds)
            with self._cv:
                self._apply(n)
                self._msgs.append(n)
                self._cv.notify_all()

    def _apply(self, n):
        """What systemd does with the fields that act on the fd store."""
        name = n.get('FDNAME', 'stored')
        if n.get('FDSTOREREMOVE') == '1' and fdname_valid(name):
            keep = []
            for nm, fd in self.stored:
                if nm == name:
                    os.close(fd)
                else:
                    keep.append((nm, fd))
            self.stored = keep
        if not n.fds:
            return
        if n.get('FDSTORE') != '1' or not fdname_valid(name):
            for fd in n.fds:
                os.close(fd)
            return
        for fd in n.fds:
            if len(self.stored) >= self.fdstore_max:
                os.close(fd)
                continue
            os.set_inheritable(fd, False)
            self.stored.append((name, fd))

    def notifications(self, key=None):
        """Every notification so far (those carrying key, if given)."""
        with self._cv:
            msgs = list(self._msgs)
        return [m for m in msgs if key is None or key in m.fields]

    def wait_for(self, key, value=None, timeout=15.0, after=0.0):
        """The first notification since `after` (a time.monotonic() value)
        with key (= value, if given); None if none came within timeout."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                for m in self._msgs:
                    if m.time >= after and key in m.fields and (value is None or m.fields[key] == value):
                        return m
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cv.wait(left)

    @property
    def stored_fds(self):
        """The fd store: [(name, fd)], in the order stored. The fds are the
        manager's; dup() one to keep it beyond a FDSTOREREMOVE."""
        with self._cv:
            return list(self.stored)

    def store_fd(self, fd, name):
        """Puts a dup of fd into the store, as if the service had sent it."""
        if not fdname_valid(name):
            raise ValueError(f'invalid fd name {name!r}')
        with self._cv:
            self.stored.append((name, os.dup(fd)))

    def last_watchdog(self):
        m = self.notifications('WATCHDOG')
        return m[-1].time if m else None

    def watchdog_overdue(self):
        """Would systemd act now? True when WatchdogSec= is set and no
        WATCHDOG=1 came within the last WATCHDOG_USEC since start."""
        if not self.watchdog_usec or not self.proc:
            return False
        last = max(self.last_watchdog() or 0.0, self._started_at)
        return time.monotonic() - last > self.watchdog_usec / 1e6

    # ---- listening sockets, like a .socket unit

    def add_listener(self, kind, address, name):
        """kind 'unix' (address: path) or 'tcp' (address: (host, port));
        returns the listening socket, held here until close()."""
        if not fdname_valid(name):
            raise ValueError(f'invalid fd name {name!r}')
        if kind == 'unix':
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            if os.path.exists(address):
                os.unlink(address)
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(address)
        s.listen(128)
        self.listeners.append((s, name))
        return s

    def add_fd(self, fd, name):
        """An arbitrary fd passed among the sockets on every start (a
        test's way to hand over what systemd would never: a UDP socket)."""
        self.listeners.append((fd, name))

    # ---- the service

    def start(self, extra_env=None, pass_store=True):
        """Starts the service with the listeners and (pass_store) the fd
        store. Returns the Popen."""
        if self.proc and self.proc.poll() is None:
            raise RuntimeError('the service is running')
        fds, names = [], []
        for s, name in self.listeners:
            fds.append(s if isinstance(s, int) else s.fileno())
            names.append(name)
        if pass_store:
            for name, fd in self.stored_fds:
                fds.append(fd)
                names.append(name)
        env = dict(self.env)
        env.update(extra_env or {})
        env['NOTIFY_SOCKET'] = self.notify_path
        if self.watchdog_usec:
            env['WATCHDOG_USEC'] = str(self.watchdog_usec)
        if fds:
            env['LISTEN_FDS'] = str(len(fds))
            env['LISTEN_FDNAMES'] = ':'.join(names)
        log = open(self.log_path, 'ab')
        cmd = [sys.executable, os.path.abspath(__file__), '--exec', ','.join(map(str, fds)), '--'] + self.argv
        self._started_at = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, pass_fds=fds)
        log.close()
        self.starts += 1
        return self.proc

    def restart_with_stored_fds(self, extra_env=None):
        """Starts the service again after it exited, with the fd store."""
        if self.proc and self.proc.poll() is None:
            raise RuntimeError('the service is still running; stop() it first')
        return self.start(extra_env=extra_env, pass_store=True)

    def stop(self, sig=signal.SIGTERM, timeout=60.0):
        """Sends sig and waits; returns the exit status, or 'killed' after
        SIGKILL when the timeout ran out."""
        if not self.proc:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return 'killed'

    def log(self):
        try:
            with open(self.log_path, 'rb') as f:
                return f.read().decode('utf-8', 'replace')
        except FileNotFoundError:
            return ''

    def wait_log(self, pattern, timeout=15.0):
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = rx.search(self.log())
            if m:
                return m
            time.sleep(0.05)
        return rx.search(self.log())

    def close(self):
        if self.proc and self.proc.poll() is None:
            self.stop(signal.SIGKILL, timeout=10)
        self._closing = True
        self._thread.join(timeout=2)
        self._sock.close()
        for _name, fd in self.stored:
            os.close(fd)
        self.stored = []
        for s, _name in self.listeners:
            if isinstance(s, int):
                os.close(s)
            else:
                s.close()
        self.listeners = []
        if os.path.exists(self.notify_path):
            os.unlink(self.notify_path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _exec_wrapper(args):
    """python3 sdharness.py --exec FD,FD,... -- PROGRAM ARGS...: moves the
    fds to 3, 4, ... (without FD_CLOEXEC), sets LISTEN_PID (and WATCHDOG_PID
    when WATCHDOG_USEC is set) to this pid, and execs PROGRAM."""
    if len(args) < 4 or args[0] != '--exec' or args[2] != '--':
        sys.stderr.write('usage: sdharness.py --exec FD,FD,... -- PROGRAM [ARGS...]\n')
        return 2
    src = [int(x) for x in args[1].split(',') if x]
    # Out of the way first, so that moving one does not overwrite another,
    # and no original stays open in the program under its old number.
    top = 3 + len(src) + 64
    tmp = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, top) for fd in src]
    for fd in set(src):
        os.close(fd)
    for i, fd in enumerate(tmp):
        os.dup2(fd, 3 + i, inheritable=True)
        os.close(fd)
    env = dict(os.environ)
    if src or 'LISTEN_FDS' in env:
        env['LISTEN_PID'] = str(os.getpid())
    if env.get('WATCHDOG_USEC'):
        env['WATCHDOG_PID'] = str(os.getpid())
    os.execve(args[3], args[3:], env)
    return 127


if __name__ == '__main__':
    sys.exit(_exec_wrapper(sys.argv[1:]))
