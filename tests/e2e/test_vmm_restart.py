# SPDX-License-Identifier: MIT
"""A client's virtual memory across the three kinds of restart (run by
test_restart.py): e2e_vmm's hold mode builds a reservation with mappings
and data (one allocation mapped twice) and one unmapped physical allocation
with data, waits while the daemon goes through

  durable  SIGTERM, then a new daemon on the same checkpoint directory;
  hot      SIGTERM under a fake service manager, the memory fds kept in its
           fd store, the new daemon maps them (zero bytes copied);
  upgrade  SIGHUP, twice: a re-exec with the fds kept (the second hands on
           memory the first imported), the client never disconnected,

then checks the data at the same addresses under the same handle ids, and
that unmap, remap and new allocations work.
"""
import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as W  # noqa: E402
from sdharness import ServiceManager  # noqa: E402


def _client(progs, kernels, shim, port, name, reconnect='120'):
    env = dict(os.environ)
    env['LUPINE_SERVER'] = f'127.0.0.1:{port}'
    env['LUPINE_SESSION'] = name
    env['LUPINE_RECONNECT_TIMEOUT'] = reconnect
    env['LD_LIBRARY_PATH'] = shim + (':' + env['LD_LIBRARY_PATH'] if env.get('LD_LIBRARY_PATH') else '')
    return subprocess.Popen([os.path.join(progs, 'e2e_vmm'), kernels, 'hold'], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _read_line(f, timeout):
    got = []
    t = threading.Thread(target=lambda: got.append(f.readline()), daemon=True)
    t.start()
    t.join(timeout)
    return got[0] if got else None


def _finish(c, check, what):
    """Lets the client go on and collects its verdict."""
    try:
        c.stdin.write('go\n')
        c.stdin.flush()
        out, err = c.communicate(timeout=120)
    except (subprocess.TimeoutExpired, BrokenPipeError):
        c.kill()
        out, err = c.communicate()
    check(f'vmm ({what}): data at the same addresses under the same handles; unmap, remap, new allocations work',
          c.returncode == 0 and 'e2e_vmm hold: OK' in out, out[-1500:] + err[-3000:])


def _ready(c, check, what):
    line = _read_line(c.stdout, 60)
    while line and not line.startswith('ready:'):  # what e2e_vmm says first
        line = _read_line(c.stdout, 60)
    check(f'vmm ({what}): reservation, mappings and an unmapped allocation with data built',
          line is not None and line.startswith('ready:'), repr(line))
    return line is not None


def durable(lupined, progs, shim, kernels, tmp, check):
    port = W.free_port()
    ck = os.path.join(tmp, 'vmm-durable')
    log = open(os.path.join(tmp, 'vmm-durable.log'), 'a')
    env = dict(os.environ)
    env.pop('LD_LIBRARY_PATH', None)
    env.pop('NOTIFY_SOCKET', None)
    argv = [lupined, '--backend', 'sim', '--listen', f'127.0.0.1:{port}', '--checkpoint-dir', ck,
            '--checkpoint-mode', 'durable', '--session-ttl', '120', '--drain-timeout', '30']
    d = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    c = None
    try:
        check('vmm (durable): the daemon starts', W.wait_port(port, d))
        c = _client(progs, kernels, shim, port, 'vmmdur')
        if _ready(c, check, 'durable'):
            d.send_signal(signal.SIGTERM)
            check('vmm (durable): the drain exits 0', d.wait(timeout=60) == 0)
            d = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
            check('vmm (durable): the new daemon starts', W.wait_port(port, d))
            _finish(c, check, 'durable')
        with open(log.name) as f:
            text = f.read()
        check('vmm (durable): restored from the durable checkpoint, memory copied',
              re.search(r'vmmdur: restored checkpoint epoch \d+', text) is not None and
              'vmmdur: hot restore' not in text, text[-3000:])
    finally:
        if c and c.poll() is None:
            c.kill()
            c.communicate()
        d.send_signal(signal.SIGTERM)
        try:
            d.wait(timeout=60)
        except subprocess.TimeoutExpired:
            d.kill()
        log.close()


def hot(lupined, progs, shim, kernels, tmp, check):
    port = W.free_port()
    ck = os.path.join(tmp, 'vmm-hot')
    argv = [lupined, '--backend', 'sim', '--listen', f'127.0.0.1:{port}', '--checkpoint-dir', ck,
            '--checkpoint-mode', 'hot', '--session-ttl', '120', '--drain-timeout', '30']
    with ServiceManager(argv, tmp, log_path=os.path.join(tmp, 'vmm-hot.log')) as m:
        m.start()
        check('vmm (hot): the daemon starts', m.wait_for('READY', '1') is not None, m.log())
        c = _client(progs, kernels, shim, port, 'vmmhot')
        try:
            if _ready(c, check, 'hot'):
                rc = m.stop()
                fds = [n for n, _ in m.stored_fds if n.startswith('lupine-mem.vmmhot.')]
                check('vmm (hot): the drain stores the memory fds, one per physical allocation (three)',
                      rc == 0 and len(fds) >= 3, f'rc={rc} {fds}\n' + m.log()[-2000:])
                m.restart_with_stored_fds()
                hit = m.wait_log(r'vmmhot: hot restore: (\d+) of (\d+) chunk\(s\) \(([\d.]+) GiB\) mapped from '
                                 r'their fds, (\d+) bytes copied', timeout=30)
                check('vmm (hot): every chunk mapped from its fd, zero bytes copied',
                      hit is not None and hit.group(1) == hit.group(2) and hit.group(4) == '0', m.log()[-3000:])
                _finish(c, check, 'hot')
        finally:
            if c.poll() is None:
                c.kill()
                c.communicate()
            m.stop()


def upgrade(lupined, progs, shim, kernels, tmp, check):
    port = W.free_port()
    ck = os.path.join(tmp, 'vmm-up')
    log_path = os.path.join(tmp, 'vmm-upgrade.log')
    log = open(log_path, 'a')
    env = dict(os.environ)
    env.pop('LD_LIBRARY_PATH', None)
    env.pop('NOTIFY_SOCKET', None)
    d = subprocess.Popen([lupined, '--backend', 'sim', '--listen', f'127.0.0.1:{port}', '--checkpoint-dir', ck,
                          '--session-ttl', '120', '--drain-timeout', '30'],
                         stdout=log, stderr=subprocess.STDOUT, env=env)
    c = None
    try:
        check('vmm (upgrade): the daemon starts', W.wait_port(port, d))
        c = _client(progs, kernels, shim, port, 'vmmup', reconnect='0')
        if _ready(c, check, 'upgrade'):
            # twice: the second upgrade hands on memory the first one imported
            for n in (1, 2):
                d.send_signal(signal.SIGHUP)
                deadline = time.time() + 30
                while time.time() < deadline:
                    with open(log_path) as f:
                        if f.read().count("vmmup: serving its client's connection again at seq") >= n:
                            break
                    time.sleep(0.1)
                with open(log_path) as f:
                    text = f.read()
                check(f'vmm (upgrade {n}): the session is carried over, memory from fds, zero bytes copied',
                      len(re.findall(r'vmmup: hot restore: (\d+) of \1 chunk\(s\) .* 0 bytes copied', text)) >= n,
                      text[-3000:])
            _finish(c, check, 'upgrade')
    finally:
        if c and c.poll() is None:
            c.kill()
            c.communicate()
        d.send_signal(signal.SIGTERM)
        try:
            d.wait(timeout=60)
        except subprocess.TimeoutExpired:
            d.kill()
        log.close()


def run(lupined, progs, shim, kernels, tmp, check):
    durable(lupined, progs, shim, kernels, tmp, check)
    hot(lupined, progs, shim, kernels, tmp, check)
    upgrade(lupined, progs, shim, kernels, tmp, check)
