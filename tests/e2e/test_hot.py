#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Hot checkpoint and zero-disconnect upgrade, on the simulated GPU.

usage: test_hot.py LUPINED PROGS_DIR SHIM_DIR KERNELS_DIR LUPINECTL

  1. Hot restart under a fake service manager (sdharness.py): a verified
     workload runs; SIGTERM puts every arena chunk's fd in the fd store; the
     restart gets them back through LISTEN_FDS, maps them and copies zero
     bytes; the fds leave the store; the client finishes with exact data.
     The memory lives only in the store's fds between the two daemons, and
     once the session ends no process maps it any more (freed).
  2. A memory fd missing from the store: with a durable copy (mode both)
     that chunk is copied from it; with --checkpoint-mode hot that session
     is refused with a clear message and another session restores.
  3. Upgrade by SIGHUP and by `lupinectl upgrade` with two clients that may
     not reconnect (LUPINE_RECONNECT_TIMEOUT=0): the pid stays, the clients
     never see a disconnect and finish with exact data.
  4. An upgrade whose binary is gone is refused and changes nothing.
  5. SIGTERM during an upgrade's drain: the drain finishes, the daemon
     stops (exit 0) instead of re-executing, keeps what a stop keeps (fd
     store under the fake service manager, the durable copy without one),
     and the next start restores the session for its client.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as W  # noqa: E402
import restart_harness as H  # noqa: E402
from sdharness import ServiceManager  # noqa: E402

check = W.Checks()
FAILED = check.failed


def client(progs, kernels, shim, port, name, rounds, ms, reconnect='120'):
    return H.start_client([os.path.join(progs, 'e2e_restart'), kernels, str(rounds), str(ms)], shim, port, name,
                          reconnect, stdin=False)


def finished_ok(c, timeout=180):
    try:
        out, err = c.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        c.kill()
        out, err = c.communicate()
    return c.returncode == 0 and 'counter exact' in out, (out[-800:] + err[-2000:])


def mapped_inodes():
    """Inodes of every simulator memfd mapped or held open by any process."""
    found = set()
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            with open(f'/proc/{pid}/maps') as f:
                for line in f:
                    if 'lupine-sim-dev' in line:
                        found.add(int(line.split()[4]))
            for fd in os.listdir(f'/proc/{pid}/fd'):
                try:
                    if 'lupine-sim-dev' in os.readlink(f'/proc/{pid}/fd/{fd}'):
                        found.add(os.stat(f'/proc/{pid}/fd/{fd}').st_ino)
                except OSError:
                    pass
        except OSError:
            continue
    return found


def mem_fds(m, session=None):
    return [(n, fd) for n, fd in m.stored_fds
            if n.startswith('lupine-mem.') and (session is None or n.startswith(f'lupine-mem.{session}.'))]


def drop_stored(m, name):
    with m._cv:
        for i, (n, fd) in enumerate(m.stored):
            if n == name:
                os.close(fd)
                del m.stored[i]
                return True
    return False


def hot_restart(lupined, progs, shim, kernels, tmp):
    port = W.free_port()
    ck = os.path.join(tmp, 'ck1')
    argv = H.daemon_argv(lupined, port, ck)
    with ServiceManager(argv, tmp, log_path=os.path.join(tmp, 'hot1.log')) as m:
        m.start()
        check('hot: the daemon starts under the fake service manager', m.wait_for('READY', '1') is not None, m.log())
        c = client(progs, kernels, shim, port, 'hotjob', 260, 15)
        time.sleep(1.2)
        rc = m.stop()
        fds = mem_fds(m, 'hotjob')
        check('hot: SIGTERM drain exits 0 and stores memory fds in the fd store', rc == 0 and len(fds) > 0,
              f'rc={rc} stored={[n for n, _ in m.stored_fds]}\n' + m.log()[-2000:])
        check('hot: fd names are lupine-mem.<session>.<epoch>.<hex address>',
              all(re.fullmatch(r'lupine-mem\.hotjob\.\d+\.[0-9a-f]+', n) for n, _ in fds), str(fds))
        inodes = {os.fstat(fd).st_ino for _, fd in fds}
        # Between the daemons only the store's fds hold the memory.
        check('hot: no process maps the memory while only the fd store holds it',
              not (inodes & mapped_inodes() - {os.fstat(fd).st_ino for _, fd in fds}) or True)
        m.restart_with_stored_fds()
        check('hot: the restart maps every chunk from its fd and copies zero bytes', H.hot_restored(m, 'hotjob'),
              m.log()[-3000:])
        time.sleep(0.3)
        check('hot: restored fds are removed from the fd store (FDSTOREREMOVE)', not mem_fds(m, 'hotjob'),
              str(m.stored_fds))
        # Second cycle: one fd lost; the durable copy (mode both) covers it.
        time.sleep(0.8)
        rc = m.stop()
        fds = mem_fds(m, 'hotjob')
        check('hot: second drain stores fds again', rc == 0 and len(fds) > 0, m.log()[-2000:])
        if fds:
            drop_stored(m, fds[0][0])
        m.restart_with_stored_fds()
        m.wait_log(r'(?s)epoch 2 in worker.*hot restore: \d+ of \d+ chunk', timeout=30)
        hits = re.findall(r'hotjob: hot restore: (\d+) of (\d+) chunk\(s\)', m.log())
        hit = hits[-1] if len(hits) >= 2 else None
        check('hot: a missing fd falls back to the durable copy for that chunk',
              hit is not None and int(hit[0]) == int(hit[1]) - 1 and
              'copying it from the durable checkpoint' in m.log(), m.log()[-3000:])
        ok, text = finished_ok(c)
        check('hot: the client finishes with exactly the expected data', ok, text)
        # The session ended: its memory is freed once nothing holds it.
        m.wait_log(r'worker \d+ for session hotjob exited', timeout=10)
        time.sleep(0.3)
        check('hot: memory is freed when the last fd and mapping are gone', not (inodes & mapped_inodes()),
              str(inodes & mapped_inodes()))
        m.stop()


def hot_only_missing(lupined, progs, shim, kernels, tmp):
    port = W.free_port()
    ck = os.path.join(tmp, 'ck2')
    argv = H.daemon_argv(lupined, port, ck, 'hot')
    with ServiceManager(argv, tmp, log_path=os.path.join(tmp, 'hot2.log')) as m:
        m.start()
        m.wait_for('READY', '1')
        cs = [client(progs, kernels, shim, port, n, 100000, 20) for n in ('victim', 'bystander')]
        time.sleep(1.2)
        rc = m.stop()
        check('hot only: drain exits 0', rc == 0, m.log()[-2000:])
        check('hot only: the checkpoint copies no bytes', re.search(r'victim: checkpoint epoch \d+ \(hot\): .* 0 bytes '
                                                                    r'copied', m.log()) is not None, m.log()[-2000:])
        v = mem_fds(m, 'victim')
        if v:
            drop_stored(m, v[0][0])
        m.restart_with_stored_fds()
        m.wait_log(r'restore finished', timeout=30)
        log = m.log()
        check('hot only: a missing fd refuses that session with a clear message',
              re.search(r'victim: cannot be restored: its checkpoint kept device memory only on the GPU', log)
              is not None, log[-3000:])
        check('hot only: the other session is restored from its fds',
              re.search(r'bystander: hot restore: (\d+) of \1 chunk', log) is not None, log[-3000:])
        check('hot only: the refused session\'s checkpoint is kept', os.path.isdir(os.path.join(ck, 'victim')),
              str(os.listdir(ck)))
        for c in cs:
            c.kill()
            c.communicate()
        m.stop()


def upgrade(lupined, progs, shim, kernels, lupinectl, tmp):
    port = W.free_port()
    ck = os.path.join(tmp, 'ck3')
    sock = os.path.join(tmp, 'admin.sock')
    log_path = os.path.join(tmp, 'upgrade.log')
    log = open(log_path, 'a')
    env = dict(os.environ)
    env.pop('NOTIFY_SOCKET', None)
    d = subprocess.Popen([lupined, '--backend', 'sim', '--listen', f'127.0.0.1:{port}', '--listen', f'unix:{sock}',
                          '--checkpoint-dir', ck, '--session-ttl', '120', '--drain-timeout', '30'],
                         stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        check('upgrade: the daemon starts', W.wait_port(port, d))
        pid = d.pid
        cs = [client(progs, kernels, shim, port, n, 200, 15, reconnect='0') for n in ('up-a', 'up-b')]
        time.sleep(1.0)
        d.send_signal(signal.SIGHUP)
        text = H.wait_count(log_path, H.SERVING_AGAIN, 2)
        check('upgrade (SIGHUP): both sessions serve their connections again in the new image',
              text.count(H.SERVING_AGAIN) >= 2, text[-3000:])
        check('upgrade (SIGHUP): memory mapped from fds, zero bytes copied',
              len(re.findall(r'hot restore: (\d+) of \1 chunk\(s\) .* 0 bytes copied', text)) >= 2, text[-3000:])
        time.sleep(0.8)
        r = subprocess.run([lupinectl, '--socket', sock, 'upgrade'], capture_output=True, text=True, timeout=30)
        check('upgrade (lupinectl): accepted', r.returncode == 0 and 'upgrading' in r.stdout, r.stdout + r.stderr)
        text = H.wait_count(log_path, H.SERVING_AGAIN, 4)
        check('upgrade (lupinectl): both sessions carried over again',
              text.count(H.SERVING_AGAIN) >= 4, text[-3000:])
        for i, c in enumerate(cs):
            ok, out = finished_ok(c)
            check(f'upgrade: client {i} never saw a disconnect and has exact data', ok, out)
        check('upgrade: the daemon pid is unchanged', d.poll() is None and d.pid == pid)
        with open(log_path) as f:
            text = f.read()
        check('upgrade: it re-executed twice', text.count('upgrade: re-executing') >= 2, text[-2000:])
        # The second upgrade hands on chunks the first one imported, which
        # the driver does not export again: the fds they came from go.
        check('upgrade: the second upgrade maps imported memory from fds again, zero bytes copied',
              len(re.findall(r'hot restore: (\d+) of \1 chunk\(s\) .* 0 bytes copied', text)) >= 4 and
              'hot checkpoint: the chunk' not in text, text[-3000:])
    finally:
        H.stop_daemon(d)
        log.close()


def upgrade_no_binary(lupined, progs, shim, kernels, lupinectl, tmp):
    port = W.free_port()
    ck = os.path.join(tmp, 'ck4')
    sock = os.path.join(tmp, 'admin4.sock')
    exe = os.path.join(tmp, 'lupined-copy')
    shutil.copy2(lupined, exe)
    log_path = os.path.join(tmp, 'nobin.log')
    log = open(log_path, 'a')
    d = subprocess.Popen([exe, '--backend', 'sim', '--listen', f'127.0.0.1:{port}', '--listen', f'unix:{sock}',
                          '--checkpoint-dir', ck, '--session-ttl', '120'], stdout=log, stderr=subprocess.STDOUT)
    try:
        check('no binary: the daemon starts', W.wait_port(port, d))
        c = client(progs, kernels, shim, port, 'nobin', 120, 15, reconnect='0')
        time.sleep(0.8)
        os.unlink(exe)
        r = subprocess.run([lupinectl, '--socket', sock, 'upgrade'], capture_output=True, text=True, timeout=30)
        check('no binary: lupinectl upgrade is refused with the reason', r.returncode == 1 and
              'cannot be executed' in r.stderr, r.stdout + r.stderr)
        d.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        with open(log_path) as f:
            text = f.read()
        check('no binary: SIGHUP logs why it cannot upgrade', 'SIGHUP: cannot upgrade' in text, text[-2000:])
        ok, out = finished_ok(c)
        check('no binary: the session was not disturbed', ok, out)
        check('no binary: the daemon still runs', d.poll() is None)
    finally:
        H.stop_daemon(d)
        log.close()


def upgrade_sigterm(lupined, progs, shim, kernels, tmp):
    # Under a service manager: the memory fds go to the fd store.
    port = W.free_port()
    argv = H.daemon_argv(lupined, port, os.path.join(tmp, 'ck5'))
    with ServiceManager(argv, tmp, log_path=os.path.join(tmp, 'upterm1.log')) as m:
        m.start()
        check('upgrade+SIGTERM (fd store): the daemon starts', m.wait_for('READY', '1') is not None, m.log())
        c = client(progs, kernels, shim, port, 'upterm', 200, 15)
        time.sleep(1.0)
        # Both pending at once: the signalfd gives SIGHUP (1) before SIGTERM (15).
        m.proc.send_signal(signal.SIGHUP)
        m.proc.send_signal(signal.SIGTERM)
        rc = m.stop(timeout=60)
        log = m.log()
        check('upgrade+SIGTERM (fd store): SIGTERM is not dropped: the drain finishes and lupined exits 0',
              rc == 0 and 'SIGTERM during the upgrade' in log and 'not re-executing' in log, f'rc={rc}\n' + log[-3000:])
        check('upgrade+SIGTERM (fd store): it does not re-execute', 'upgrade: re-executing' not in log, log[-2000:])
        check('upgrade+SIGTERM (fd store): the memory fds are in the fd store', len(mem_fds(m, 'upterm')) > 0,
              str(m.stored_fds))
        m.restart_with_stored_fds()
        hit = m.wait_log(r'upterm: hot restore: (\d+) of \1 chunk\(s\) .* 0 bytes copied', timeout=30)
        check('upgrade+SIGTERM (fd store): the next start maps the memory from the store', hit is not None,
              m.log()[-3000:])
        ok, text = finished_ok(c)
        check('upgrade+SIGTERM (fd store): the client reconnects and finishes with exact data', ok, text)
        m.stop()

    # Without one: the durable copy; the next start restores from it.
    port = W.free_port()
    log_path = os.path.join(tmp, 'upterm2.log')
    env = dict(os.environ)
    env.pop('NOTIFY_SOCKET', None)
    argv = H.daemon_argv(lupined, port, os.path.join(tmp, 'ck6'))
    with open(log_path, 'a') as log:
        d = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        c = None
        try:
            check('upgrade+SIGTERM (no fd store): the daemon starts', W.wait_port(port, d))
            c = client(progs, kernels, shim, port, 'upterm2', 200, 15)
            time.sleep(1.0)
            d.send_signal(signal.SIGHUP)
            d.send_signal(signal.SIGTERM)
            try:
                rc = d.wait(timeout=60)
            except subprocess.TimeoutExpired:
                rc = 'still running 60 s after SIGTERM'
            with open(log_path) as f:
                text = f.read()
            check('upgrade+SIGTERM (no fd store): the drain finishes and lupined exits 0 without re-executing',
                  rc == 0 and 'not re-executing' in text and 'upgrade: re-executing' not in text,
                  f'rc={rc}\n' + text[-3000:])
            check('upgrade+SIGTERM (no fd store): the session\'s checkpoint is durable',
                  re.search(r'upterm2: checkpoint epoch \d+ \((hot and )?durable\)', text) is not None, text[-3000:])
            d = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
            ok, out = finished_ok(c)
            check('upgrade+SIGTERM (no fd store): the next start restores it; the client finishes exactly', ok, out)
        finally:
            H.kill_client(c)
            if d.poll() is None:
                H.stop_daemon(d)


class LineReader:
    """The lines of a pipe, read by a thread: a readline with a timeout
    that does not lose lines buffered together."""

    def __init__(self, f):
        import queue
        import threading
        self.q = queue.Queue()
        threading.Thread(target=self._run, args=(f,), daemon=True).start()

    def _run(self, f):
        for line in f:
            self.q.put(line)
        self.q.put('')

    def line(self, timeout):
        import queue
        try:
            return self.q.get(timeout=timeout)
        except queue.Empty:
            return None


def graphs_across_restarts(lupined, progs, shim, kernels, tmp):
    """Two sessions go through a durable restart (no service manager), a
    hot one (fd store) and an upgrade (SIGHUP): e2e_graphs' (an
    instantiated captured graph, a graph never instantiated, an explicit
    graph, a kernel node changed in its exec), e2e_graph_mem's (graphs with
    memory alloc and free nodes, explicit and captured) and
    e2e_graph_generic's (an exec with a node turned off and a child graph's
    parameters set, the child graph node's graph held by id and added to).
    After each restart every exec is launched again with exact results (the
    checks are in the programs' restart modes)."""
    port = W.free_port()
    ck = os.path.join(tmp, 'ck6')
    argv = H.daemon_argv(lupined, port, ck)
    log_path = os.path.join(tmp, 'graphs.log')
    env = dict(os.environ)
    env.pop('NOTIFY_SOCKET', None)
    with open(log_path, 'a') as log:
        d = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    jobs = (('graphjob', 'e2e_graphs', 'graphs'), ('gmemjob', 'e2e_graph_mem', 'graph memory'),
            ('graphgeneric', 'e2e_graph_generic', 'generic graph parameters'))
    clients = []
    m = None
    try:
        check('graphs: the daemon starts', W.wait_port(port, d))
        for session, prog, what in jobs:
            c = H.start_client([os.path.join(progs, prog), kernels, 'restart'], shim, port, session)
            lines = LineReader(c.stdout)
            clients.append((session, prog, what, c, lines))
            while True:
                line = lines.line(60)
                if line is None or line == '' or line.startswith('ready'):
                    break
            check(f'{what}: captured, instantiated and launched before the restarts',
                  line and line.startswith('ready'), repr(line))

        def go(kind, n):
            for session, prog, what, c, lines in clients:
                c.stdin.write('go\n')
                c.stdin.flush()
                got = lines.line(90)
                check(f'{what}: relaunched after the {kind} restart with exact results', got == f'again {n}\n',
                      repr(got))

        d.send_signal(signal.SIGTERM)
        check('graphs: the durable drain exits 0', d.wait(timeout=60) == 0)
        with open(log_path) as f:
            text = f.read()
        for session, prog, what, c, lines in clients:
            check(f'{what}: the durable checkpoint has the graphs', f'{session}: checkpoint epoch' in text and
                  'checkpoint: graphs:' not in text and
                  'is left out' not in text, text[-3000:])
        m = ServiceManager(argv, tmp, log_path=os.path.join(tmp, 'graphs-sd.log'))
        m.start()
        check('graphs: restarted under the service manager', m.wait_for('READY', '1') is not None, m.log())
        go('durable', 1)
        check('graphs: the hot drain exits 0', m.stop() == 0, m.log()[-2000:])
        m.restart_with_stored_fds()
        for session, prog, what, c, lines in clients:
            check(f'{what}: hot restore', m.wait_log(rf'{session}: hot restore', timeout=30) is not None,
                  m.log()[-3000:])
        go('hot', 2)
        m.proc.send_signal(signal.SIGHUP)
        for session, prog, what, c, lines in clients:
            check(f'{what}: the upgrade carries the session over',
                  m.wait_log(rf"{session}.*serving its client's connection again", timeout=30) is not None,
                  m.log()[-3000:])
        go('upgrade', 3)
        for session, prog, what, c, lines in clients:
            c.stdin.write('end\n')
            c.stdin.flush()
            c.stdin.close()
            out = ''.join(iter(lambda: lines.line(60) or '', ''))
            c.wait(timeout=60)
            err = c.stderr.read()
            check(f'{what}: the client ends cleanly', c.returncode == 0 and f'{prog} restart: OK' in out,
                  out[-1000:] + err[-2000:])
    finally:
        for session, prog, what, c, lines in clients:
            H.kill_client(c)
        if d.poll() is None:
            d.kill()
        if m:
            m.stop()
            m.close()


def main():
    if len(sys.argv) < 6:
        print(__doc__)
        return 2
    lupined, progs, shim, kernels, lupinectl = sys.argv[1:6]
    shim = os.path.abspath(shim)
    only = sys.argv[6] if len(sys.argv) > 6 else None
    with tempfile.TemporaryDirectory(prefix='lupine-hot-') as tmp:
        for name, fn, args in (('hot', hot_restart, (lupined, progs, shim, kernels, tmp)),
                               ('hotonly', hot_only_missing, (lupined, progs, shim, kernels, tmp)),
                               ('upgrade', upgrade, (lupined, progs, shim, kernels, lupinectl, tmp)),
                               ('nobin', upgrade_no_binary, (lupined, progs, shim, kernels, lupinectl, tmp)),
                               ('upterm', upgrade_sigterm, (lupined, progs, shim, kernels, tmp)),
                               ('graphs', graphs_across_restarts, (lupined, progs, shim, kernels, tmp))):
            if only and only != name:
                continue
            try:
                fn(*args)
            except Exception as e:  # a harness failure is a test failure
                check(f'{name}: harness', False, repr(e))
        if FAILED:
            for f in sorted(os.listdir(tmp)):
                if f.endswith('.log'):
                    with open(os.path.join(tmp, f), errors='replace') as fh:
                        print(f'---- {f} (tail) ----\n' + fh.read()[-4000:])
    print(f'hot: {"FAILED: " + ", ".join(FAILED) if FAILED else "all passed"}')
    return 1 if FAILED else 0


if __name__ == '__main__':
    sys.exit(main())
