# SPDX-License-Identifier: MIT
"""What the restart tests share: a client through the shim, a line read
with a timeout, a daemon started and stopped, a log waited on, and the
three restarts (durable, hot under the fake service manager, upgrade by
SIGHUP twice) of a program's hold mode, which says 'ready:' once its
objects are built, waits for 'go' on stdin and then checks them.

Used by test_vmm_restart.py, test_mapped.py, test_pools_restart.py and
test_hot.py."""
import os
import re
import signal
import subprocess
import threading
import time

import lupwire as W
from sdharness import ServiceManager

HOT_RESTORE = (r'{}: hot restore: (\d+) of (\d+) chunk\(s\) \(([\d.]+) GiB\) mapped from their fds, '
               r'(\d+) bytes copied')
SERVING_AGAIN = "serving its client's connection again at seq"


def client_env(shim, port, session, reconnect='120'):
    """The environment of a client of 127.0.0.1:port through the shim."""
    env = dict(os.environ)
    env['LUPINE_SERVER'] = f'127.0.0.1:{port}'
    env['LUPINE_SESSION'] = session
    env['LUPINE_RECONNECT_TIMEOUT'] = reconnect
    env['LD_LIBRARY_PATH'] = shim + (':' + env['LD_LIBRARY_PATH'] if env.get('LD_LIBRARY_PATH') else '')
    return env


def start_client(argv, shim, port, session, reconnect='120', stdin=True, stderr=subprocess.PIPE):
    return subprocess.Popen(argv, env=client_env(shim, port, session, reconnect),
                            stdin=subprocess.PIPE if stdin else None, stdout=subprocess.PIPE, stderr=stderr,
                            text=True)


def read_line(f, timeout):
    """A line of f, or None after timeout seconds."""
    got = []
    t = threading.Thread(target=lambda: got.append(f.readline()), daemon=True)
    t.start()
    t.join(timeout)
    return got[0] if got else None


def kill_client(c):
    if c is not None and c.poll() is None:
        c.kill()
        c.communicate()


def daemon_env():
    """The environment of a daemon started without a service manager."""
    env = dict(os.environ)
    for k in ('LD_LIBRARY_PATH', 'NOTIFY_SOCKET', 'LISTEN_FDS', 'LISTEN_FDNAMES', 'LISTEN_PID'):
        env.pop(k, None)
    return env


def daemon_argv(lupined, port, ck, mode=None):
    argv = [lupined, '--backend', 'sim', '--listen', f'127.0.0.1:{port}', '--checkpoint-dir', ck]
    if mode:
        argv += ['--checkpoint-mode', mode]
    return argv + ['--session-ttl', '120', '--drain-timeout', '30']


def stop_daemon(d, timeout=60):
    """SIGTERM, then a kill if it has not exited within timeout: its exit
    status, or 'killed'."""
    d.send_signal(signal.SIGTERM)
    try:
        return d.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        d.kill()
        return 'killed'


def read_text(path):
    with open(path, errors='replace') as f:
        return f.read()


def wait_count(path, needle, n, timeout=30):
    """Waits until the file at path has needle n times; its text then."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if read_text(path).count(needle) >= n:
            break
        time.sleep(0.1)
    return read_text(path)


def wait_text(path, pattern, count=1, timeout=30):
    """Waits until the file at path matches pattern count times: (whether
    it did, its text)."""
    rx = re.compile(pattern)
    deadline = time.time() + timeout
    text = ''
    while time.time() < deadline:
        text = read_text(path)
        if len(rx.findall(text)) >= count:
            return True, text
        time.sleep(0.1)
    return False, text


def hot_restored(m, session, timeout=30):
    """Whether the service manager's daemon logged a hot restore of every
    chunk of session from its fd, zero bytes copied."""
    hit = m.wait_log(HOT_RESTORE.format(session), timeout=timeout)
    return hit is not None and hit.group(1) == hit.group(2) and hit.group(4) == '0'


class Hold:
    """A program's hold mode run across the three restarts.

    tag: the checks' prefix and the files' ('vmm'); prefix: the sessions'
    ('vmm' gives vmmdur, vmmhot, vmmup); built: what the 'ready' check says;
    verdict: what the final check says; ok: the program's last line."""

    def __init__(self, check, progs, kernels, shim, prog, tag, prefix, built, verdict, ok):
        self.check, self.progs, self.kernels, self.shim = check, progs, kernels, shim
        self.prog, self.tag, self.prefix = prog, tag, prefix
        self.built, self.verdict, self.ok = built, verdict, ok

    def client(self, port, session, reconnect='120'):
        return start_client([os.path.join(self.progs, self.prog), self.kernels, 'hold'], self.shim, port, session,
                            reconnect)

    def ready(self, c, what):
        line = read_line(c.stdout, 60)
        while line and not line.startswith('ready:'):  # what the program says first
            line = read_line(c.stdout, 60)
        self.check(f'{self.tag} ({what}): {self.built}', line is not None and line.startswith('ready:'), repr(line))
        return line is not None

    def finish(self, c, what):
        """Lets the client go on and collects its verdict."""
        try:
            c.stdin.write('go\n')
            c.stdin.flush()
            out, err = c.communicate(timeout=120)
        except (subprocess.TimeoutExpired, BrokenPipeError):
            c.kill()
            out, err = c.communicate()
        self.check(f'{self.tag} ({what}): {self.verdict}', c.returncode == 0 and self.ok in out,
                   out[-1500:] + err[-3000:])

    def durable(self, lupined, tmp, after=None):
        """SIGTERM, then a new daemon on the same checkpoint directory;
        after(text): more checks on the daemons' log."""
        check, session = self.check, self.prefix + 'dur'
        port = W.free_port()
        log = open(os.path.join(tmp, f'{self.tag}-durable.log'), 'a')
        env = daemon_env()
        argv = daemon_argv(lupined, port, os.path.join(tmp, f'{self.tag}-durable'), 'durable')
        d = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        c = None
        try:
            check(f'{self.tag} (durable): the daemon starts', W.wait_port(port, d))
            c = self.client(port, session)
            if self.ready(c, 'durable'):
                d.send_signal(signal.SIGTERM)
                check(f'{self.tag} (durable): the drain exits 0', d.wait(timeout=60) == 0)
                d = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
                check(f'{self.tag} (durable): the new daemon starts', W.wait_port(port, d))
                self.finish(c, 'durable')
            text = read_text(log.name)
            check(f'{self.tag} (durable): restored from the durable checkpoint, memory copied',
                  re.search(rf'{session}: restored checkpoint epoch \d+', text) is not None and
                  f'{session}: hot restore' not in text, text[-3000:])
            if after:
                after(text)
        finally:
            kill_client(c)
            stop_daemon(d)
            log.close()

    def hot(self, lupined, tmp, drained, after=None):
        """SIGTERM under the fake service manager, the memory fds kept in
        its fd store; drained(m, rc): the checks of the drain; after(text):
        more checks on the log once the client has finished."""
        check, session = self.check, self.prefix + 'hot'
        port = W.free_port()
        argv = daemon_argv(lupined, port, os.path.join(tmp, f'{self.tag}-hot'), 'hot')
        with ServiceManager(argv, tmp, log_path=os.path.join(tmp, f'{self.tag}-hot.log')) as m:
            m.start()
            check(f'{self.tag} (hot): the daemon starts', m.wait_for('READY', '1') is not None, m.log())
            c = self.client(port, session)
            try:
                if self.ready(c, 'hot'):
                    drained(m, m.stop())
                    m.restart_with_stored_fds()
                    check(f'{self.tag} (hot): every chunk mapped from its fd, zero bytes copied',
                          hot_restored(m, session), m.log()[-3000:])
                    self.finish(c, 'hot')
                    if after:
                        after(m.log())
            finally:
                kill_client(c)
                m.stop()

    def upgrade(self, lupined, tmp, after=None):
        """SIGHUP twice (the second hands on memory the first imported), a
        client that may not reconnect; after(text): more checks on the log
        once the client has finished."""
        check, session = self.check, self.prefix + 'up'
        port = W.free_port()
        log_path = os.path.join(tmp, f'{self.tag}-upgrade.log')
        log = open(log_path, 'a')
        d = subprocess.Popen(daemon_argv(lupined, port, os.path.join(tmp, f'{self.tag}-up')), stdout=log,
                             stderr=subprocess.STDOUT, env=daemon_env())
        c = None
        try:
            check(f'{self.tag} (upgrade): the daemon starts', W.wait_port(port, d))
            c = self.client(port, session, reconnect='0')
            if self.ready(c, 'upgrade'):
                for n in (1, 2):
                    d.send_signal(signal.SIGHUP)
                    text = wait_count(log_path, f'{session}: {SERVING_AGAIN}', n)
                    check(f'{self.tag} (upgrade {n}): the session is carried over, memory from fds, zero bytes copied',
                          len(re.findall(rf'{session}: hot restore: (\d+) of \1 chunk\(s\) .* 0 bytes copied',
                                         text)) >= n, text[-3000:])
                self.finish(c, 'upgrade')
                if after:
                    after(read_text(log_path))
        finally:
            kill_client(c)
            stop_daemon(d)
            log.close()
