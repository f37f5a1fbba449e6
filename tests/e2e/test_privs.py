#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""e2e: what a worker holds (docs/security.md, "Privileges").

usage: test_privs.py LUPINED PROGS_DIR SHIM_DIR KERNELS_DIR

For every worker of a running lupined (the supervisor's children), and
every thread of it, checks:
  - /proc/PID/task/TID/status: CapEff, CapPrm, CapInh and CapAmb are 0,
    NoNewPrivs is 1, CapBnd is 0 when the supervisor held CAP_SETPCAP
    (without it no process can shrink its bounding set, and no_new_privs
    makes the set moot: then it must be the supervisor's, untouched);
  - /proc/PID/fd: no listening socket (the supervisor's, or systemd's
    LISTEN_FDS); exactly one client connection (TCP from the daemon's
    port, or UNIX on its socket), and it is the one whose other end a
    client program holds (the TCP ports, or `ss -x` for the UNIX peer); the
    control socket at fd 3 (an unnamed SEQPACKET pair) and no other socket
    but the supervisor's own stdio; the upload-accounting memfd at fd 4;
    no socket or memfd of another worker, and none the supervisor holds
    but that memfd and stdio.

Three cases:
  plain     lupined with a TCP and a UNIX listener, three sessions of
            `e2e_vmm hold` (two TCP, one UNIX); then an upgrade (SIGHUP, as
            `lupinectl upgrade` and `systemctl reload` do), which hands
            every connection and memory fd through the supervisor to new
            workers; checked again, then the clients finish;
  fdstore   under the fake service manager (sdharness.py), the listeners
            passed as LISTEN_FDS; three sessions of e2e_restart; a hot
            restart: SIGTERM puts the memory fds in the fd store, the new
            daemon gets them all, each restore worker must get its own
            session's alone; checked once the clients have resumed;
  ambient   (only as root, with setpriv) lupined as nobody with ambient
            capabilities, as a unit's AmbientCapabilities= grants them: the
            workers keep none, the bounding set stays (no CAP_SETPCAP).

As non-root the capability sets are empty anyway; no_new_privs and every
fd check still mean something. Standard library only. Exit 0 on pass, 1
on failure (naming the check).
"""
import os
import pwd
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
CAP_SETPCAP = 8
CAP_NET_BIND_SERVICE = 10
CAP_FIELDS = ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb')
UNIX_LISTENING = 0x10000  # __SO_ACCEPTCON in /proc/net/unix's Flags
TCP_LISTEN, TCP_ESTABLISHED = 0x0A, 0x01


def note(msg):
    print(f'note {msg}', flush=True)


# ---- what /proc says

def status_of(path):
    """The fields of a /proc status file that matter here."""
    out = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.partition(':')
            if k in CAP_FIELDS:
                out[k] = int(v.strip(), 16)
            elif k == 'NoNewPrivs':
                out[k] = int(v.strip())
            elif k == 'Uid':
                out[k] = int(v.split()[1])  # the effective uid
    return out


def tcp_table():
    """inode -> (local port, remote port, state) over /proc/net/tcp{,6}."""
    out = {}
    for name in ('tcp', 'tcp6'):
        try:
            with open(f'/proc/net/{name}') as f:
                next(f)
                for line in f:
                    p = line.split()
                    out[int(p[9])] = (int(p[1].rsplit(':', 1)[1], 16), int(p[2].rsplit(':', 1)[1], 16),
                                      int(p[3], 16))
        except OSError:
            pass
    return out


def unix_table():
    """inode -> (flags, type, path or '') from /proc/net/unix."""
    out = {}
    with open('/proc/net/unix') as f:
        next(f)
        for line in f:
            p = line.split()
            out[int(p[6])] = (int(p[3], 16), int(p[4], 16), p[7] if len(p) > 7 else '')
    return out


def unix_peers():
    """inode -> peer inode of every UNIX socket (`ss -x`), or None
    without ss."""
    ss = shutil.which('ss')
    if not ss:
        return None
    r = subprocess.run([ss, '-xaH'], capture_output=True, text=True, timeout=20)
    out = {}
    for line in r.stdout.splitlines():
        p = line.split()
        if len(p) >= 8 and p[5].isdigit() and p[7].isdigit():
            out[int(p[5])] = int(p[7])
    return out


def fds_of(pid):
    """fd -> (link text, (st_dev, st_ino) or None)."""
    out = {}
    base = f'/proc/{pid}/fd'
    for fd in os.listdir(base):
        try:
            link = os.readlink(f'{base}/{fd}')
            st = os.stat(f'{base}/{fd}')
            out[int(fd)] = (link, (st.st_dev, st.st_ino))
        except OSError:
            continue  # closed meanwhile
    return out


def sock_ino(link):
    m = re.fullmatch(r'socket:\[(\d+)\]', link)
    return int(m.group(1)) if m else None


def is_memfd(link):
    return link.startswith('/memfd:')


def children(pid):
    out = []
    try:
        for tid in os.listdir(f'/proc/{pid}/task'):
            with open(f'/proc/{pid}/task/{tid}/children') as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def restored_name(pid):
    try:
        with open(f'/proc/{pid}/cmdline', 'rb') as f:
            args = f.read().decode(errors='replace').split('\0')
    except OSError:
        return None
    for a in args:
        if a.startswith('--restore='):
            return a[len('--restore='):]
    return None


# ---- the audit

class Daemon:
    """What the audit needs to know of a running lupined."""

    def __init__(self, pid, port, unix_path):
        self.pid, self.port, self.unix_path = pid, port, unix_path


def client_sockets(clients):
    """session -> set of socket inodes its client program holds."""
    out = {}
    for name, proc in clients.items():
        out[name] = {sock_ino(link) for link, _ in fds_of(proc.pid).values() if sock_ino(link) is not None}
    return out


def check_caps(case, sup, w):
    """One check per worker over all its threads."""
    sst = status_of(f'/proc/{sup}/status')
    # What the worker started with: root's execve gives it the bounding
    # set; anyone else's, the ambient set.
    start = sst['CapBnd'] if sst['Uid'] == 0 else sst['CapAmb']
    may_bnd = bool(start >> CAP_SETPCAP & 1)
    bad, n = [], 0
    for tid in os.listdir(f'/proc/{w}/task'):
        try:
            st = status_of(f'/proc/{w}/task/{tid}/status')
        except OSError:
            continue  # ended meanwhile
        n += 1
        want_bnd = 0 if may_bnd else sst['CapBnd']
        if any(st[k] for k in ('CapEff', 'CapPrm', 'CapInh', 'CapAmb')) or st.get('NoNewPrivs') != 1 or \
                st['CapBnd'] != want_bnd:
            bad.append((tid, {k: hex(v) for k, v in st.items()}))
    bnd = 'CapBnd 0' if may_bnd else "CapBnd the supervisor's (it had no CAP_SETPCAP to shrink it)"
    check(f'{case}: worker {w}: its {n} thread(s) have CapEff, CapPrm, CapInh, CapAmb 0, {bnd}, NoNewPrivs 1',
          n > 0 and not bad, str(bad))


def classify(d, wfds, sup_fds, tcp, unix):
    """Sorts one worker's fds: (client socket inodes, other sockets, every
    socket inode, memfd identities, problems)."""
    sup_ids = {ident for _, ident in sup_fds.values()}
    client, other, socks, memfds, problems = [], [], set(), set(), []
    for fd, (link, ident) in sorted(wfds.items()):
        stdio = fd <= 2 and fd in sup_fds and sup_fds[fd][1] == ident  # the supervisor's own stdio
        ino = sock_ino(link)
        if ino is not None:
            socks.add(ino)
            if ino in tcp and tcp[ino][2] == TCP_LISTEN or ino in unix and unix[ino][0] & UNIX_LISTENING:
                problems.append(f'fd {fd} is a listening socket ({link})')
            if fd == 3:
                if not (ino in unix and unix[ino][1] == 5 and not unix[ino][2]):
                    problems.append(f'fd 3 is not an unnamed SEQPACKET socket: {unix.get(ino)}')
            elif ino in tcp and tcp[ino][2] == TCP_ESTABLISHED and tcp[ino][0] == d.port:
                client.append(ino)
            elif ino in unix and d.unix_path and unix[ino][2] == d.unix_path:
                client.append(ino)
            elif not stdio:
                other.append((fd, link, tcp.get(ino) or unix.get(ino) or 'not TCP or UNIX'))
            if not stdio and ident in sup_ids:
                problems.append(f'fd {fd} ({link}) is a socket the supervisor holds')
        elif is_memfd(link):
            if fd == 4:
                if 'lupined-uploads' not in link or ident not in sup_ids:
                    problems.append(f'fd 4 is not the supervisor\'s upload-accounting memfd: {link}')
            else:
                memfds.add(ident)
                if ident in sup_ids:
                    problems.append(f'fd {fd} ({link}) is a memfd the supervisor holds')
    if 3 not in wfds or sock_ino(wfds[3][0]) is None:
        problems.append(f'fd 3 is not its control socket: {wfds.get(3)}')
    if 4 not in wfds:
        problems.append('no fd 4 (the upload-accounting memfd)')
    return client, other, socks, memfds, problems


def audit(case, d, clients, expect):
    """Every check above on the workers of d; clients: session -> the
    Popen of its client program (it must still run)."""
    workers = children(d.pid)
    check(f'{case}: {expect} workers', len(workers) == expect, str(workers))
    check(f'{case}: every client still runs (the audit needs its connection)',
          all(p.poll() is None for p in clients.values()), str({n: p.poll() for n, p in clients.items()}))
    tcp, unix, peers = tcp_table(), unix_table(), unix_peers()
    sup_fds = fds_of(d.pid)
    csocks = client_sockets(clients)
    holders, owners = {}, {}
    for w in workers:
        try:
            wfds = fds_of(w)
            check_caps(case, d.pid, w)
        except OSError as e:
            check(f'{case}: worker {w} can be read', False, str(e))
            continue
        client, other, socks, memfds, problems = classify(d, wfds, sup_fds, tcp, unix)
        where = f'{case}: worker {w}'
        check(f'{where}: no listening socket, fd 3 its control socket, fd 4 the upload memfd, nothing else the '
              f'supervisor holds', not problems, '; '.join(problems))
        check(f'{where}: exactly one client connection', len(client) == 1, f'{client}; fds {sorted(wfds.items())}')
        check(f'{where}: no socket but its control socket, its client and stdio', not other, str(other))
        for ident in [('sock', i) for i in socks] + [('mem', m) for m in memfds]:
            holders.setdefault(ident, []).append(w)
        if len(client) != 1:
            continue
        cl = client[0]
        # Whose connection: the client program holding its other end.
        if cl in tcp:
            rport = tcp[cl][1]
            mine = [n for n, inos in csocks.items()
                    if any(i in tcp and tcp[i][0] == rport and tcp[i][1] == d.port for i in inos)]
        elif peers is not None:
            mine = [n for n, inos in csocks.items() if peers.get(cl) in inos]
        else:
            note(f'{where}: no ss: its UNIX client is not matched to a program')
            continue
        rn = restored_name(w)
        check(f'{where}: its connection is the other end of one client program\'s' +
              (f', session {rn}\'s' if rn else ''), len(mine) == 1 and (rn is None or mine == [rn]),
              f'{mine} (restored: {rn})')
        if len(mine) == 1:
            owners.setdefault(mine[0], []).append(w)
    shared = {k: v for k, v in holders.items() if len(v) > 1}
    check(f'{case}: no socket or memfd is held by two workers', not shared, str(shared))
    check(f'{case}: every client is served by exactly one worker',
          sorted(owners) == sorted(clients) and all(len(v) == 1 for v in owners.values()), str(owners))


# ---- the cases

def vmm_client(progs, kernels, shim, server, name):
    env = H.client_env(shim, 0, name)
    env['LUPINE_SERVER'] = server
    return subprocess.Popen([os.path.join(progs, 'e2e_vmm'), kernels, 'hold'], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_ready(case, c):
    line = H.read_line(c.stdout, 60)
    while line and not line.startswith('ready'):
        line = H.read_line(c.stdout, 60)
    check(f'{case}: client {os.path.basename(c.args[0])} is ready', bool(line), repr(line))
    return bool(line)


def finish(case, name, c):
    try:
        c.stdin.write('go\n')
        c.stdin.flush()
        out, err = c.communicate(timeout=120)
    except (subprocess.TimeoutExpired, BrokenPipeError):
        c.kill()
        out, err = c.communicate()
    check(f'{case}: client {name} finishes OK', c.returncode == 0 and 'hold: OK' in out, out[-800:] + err[-2000:])


def plain(lupined, progs, shim, kernels, tmp, case='plain', wrap=(), upgrade=True):
    """A TCP and a UNIX listener, vmm sessions, an upgrade. wrap: a
    command line lupined runs under (setpriv)."""
    port = W.free_port()
    sock = os.path.join(tmp, f'{case}.sock')
    log_path = os.path.join(tmp, f'{case}.log')
    log = open(log_path, 'a')
    argv = list(wrap) + [lupined, '--backend', 'sim', '--listen', f'127.0.0.1:{port}', '--listen', f'unix:{sock}',
                         '--checkpoint-dir', os.path.join(tmp, f'{case}-ck'), '--session-ttl', '120',
                         '--drain-timeout', '30']
    d = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=H.daemon_env())
    clients = {}
    try:
        up = W.wait_port(port, d)
        check(f'{case}: the daemon starts', up, H.read_text(log_path)[-2000:])
        if not up:
            return
        for i, server in enumerate([f'127.0.0.1:{port}', f'127.0.0.1:{port}', f'unix:{sock}']):
            clients[f'{case}{i}'] = vmm_client(progs, kernels, shim, server, f'{case}{i}')
        if not all([wait_ready(case, c) for c in clients.values()]):
            return
        dd = Daemon(d.pid, port, sock)
        audit(case, dd, clients, 3)
        if upgrade:
            d.send_signal(signal.SIGHUP)
            text = H.wait_count(log_path, H.SERVING_AGAIN, 3, timeout=60)
            check(f'{case} (upgrade): every session is carried over', text.count(H.SERVING_AGAIN) >= 3, text[-3000:])
            time.sleep(0.3)  # the old workers' exits
            audit(f'{case} (upgrade)', dd, clients, 3)
        for name, c in clients.items():
            finish(case, name, c)
    finally:
        for c in clients.values():
            H.kill_client(c)
        H.stop_daemon(d)
        log.close()


def restart_client(progs, kernels, shim, port, name):
    return H.start_client([os.path.join(progs, 'e2e_restart'), kernels, '3000', '15'], shim, port, name, stdin=False)


def wait_rounds(case, c, n=1):
    """Waits for n 'round N ok' lines of an e2e_restart client."""
    for _ in range(n):
        line = H.read_line(c.stdout, 60)
        while line and not line.startswith('round '):
            line = H.read_line(c.stdout, 60)
        if not line:
            check(f'{case}: client {c.pid} makes progress', False, repr(line))
            return False
    return True


def fdstore(lupined, progs, shim, kernels, tmp):
    case = 'fdstore'
    port = W.free_port()
    sock = os.path.join(tmp, 'fdstore.sock')
    argv = [lupined, '--backend', 'sim', '--checkpoint-dir', os.path.join(tmp, 'fdstore-ck'), '--checkpoint-mode',
            'hot', '--session-ttl', '120', '--drain-timeout', '30']
    with ServiceManager(argv, tmp, log_path=os.path.join(tmp, 'fdstore.log')) as m:
        m.add_listener('tcp', ('127.0.0.1', port), 'tcp')
        m.add_listener('unix', sock, 'unix')
        m.start()
        clients = {}
        try:
            up = m.wait_for('READY', '1') is not None
            check(f'{case}: the daemon starts', up, m.log()[-2000:])
            if not up:
                return
            clients = {f'{case}{i}': restart_client(progs, kernels, shim, port, f'{case}{i}') for i in range(2)}
            env = H.client_env(shim, 0, f'{case}2')
            env['LUPINE_SERVER'] = f'unix:{sock}'
            clients[f'{case}2'] = subprocess.Popen(
                [os.path.join(progs, 'e2e_restart'), kernels, '3000', '15'], env=env, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True)
            if not all([wait_rounds(case, c) for c in clients.values()]):
                return
            audit(case, Daemon(m.proc.pid, port, sock), clients, 3)
            rc = m.stop()
            check(f'{case}: the hot drain exits 0 and stores memory fds',
                  rc == 0 and any(n.startswith('lupine-mem.') for n, _ in m.stored_fds), f'rc={rc}')
            m.restart_with_stored_fds()
            for name in clients:
                check(f'{case}: {name} restored from its fds', H.hot_restored(m, name, timeout=60), m.log()[-3000:])
                check(f'{case}: {name} resumed', m.wait_log(rf'session {name}: client resumed', timeout=60)
                      is not None, m.log()[-3000:])
            if not all([wait_rounds(case, c, 2) for c in clients.values()]):
                return
            audit(f'{case} (hot restart)', Daemon(m.proc.pid, port, sock), clients, 3)
        finally:
            for c in clients.values():
                H.kill_client(c)
            m.stop()


def ambient(lupined, progs, shim, kernels, tmp):
    """lupined as nobody with an ambient capability."""
    case = 'ambient'
    setpriv = shutil.which('setpriv')
    if os.geteuid() != 0 or not setpriv:
        note(f'{case}: skipped (needs root and setpriv)')
        return
    try:
        nobody = pwd.getpwnam('nobody')
    except KeyError:
        note(f'{case}: skipped (no user nobody)')
        return
    sub = os.path.join(tmp, 'ambient')
    os.mkdir(sub)
    os.chown(sub, nobody.pw_uid, nobody.pw_gid)
    os.chmod(tmp, 0o755)
    wrap = [setpriv, f'--reuid={nobody.pw_uid}', f'--regid={nobody.pw_gid}', '--clear-groups',
            '--inh-caps=+net_bind_service', '--ambient-caps=+net_bind_service', '--']
    r = subprocess.run(wrap + ['grep', '^CapEff', '/proc/self/status'], capture_output=True, text=True, timeout=10)
    got = r.stdout.split()
    if r.returncode != 0 or len(got) < 2 or not int(got[1], 16) >> CAP_NET_BIND_SERVICE & 1:
        note(f'{case}: skipped (setpriv cannot grant an ambient capability here: {r.stdout.strip()} '
             f'{r.stderr.strip()})')
        return
    # The supervisor has it: its workers must not.
    plain(lupined, progs, shim, kernels, sub, case=case, wrap=wrap, upgrade=True)


def main():
    if len(sys.argv) != 5:
        sys.stderr.write(__doc__)
        return 2
    lupined, progs, shim, kernels = (os.path.abspath(a) for a in sys.argv[1:])
    tmp = tempfile.mkdtemp(prefix='lupine-privs-')
    try:
        plain(lupined, progs, shim, kernels, tmp)
        fdstore(lupined, progs, shim, kernels, tmp)
        ambient(lupined, progs, shim, kernels, tmp)
    finally:
        if check.failed:
            print(f'logs kept in {tmp}', flush=True)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if check.failed:
        print(f'{len(check.failed)} check(s) failed: ' + '; '.join(check.failed[:20]))
        return 1
    print('all privilege checks passed')
    return 0


if __name__ == '__main__':
    sys.exit(main())
