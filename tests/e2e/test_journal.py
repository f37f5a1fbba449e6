#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""e2e: lupined's log as native journal entries, and its log levels (issue 18).

Usage: test_journal.py LUPINED LUPINECTL TESTS_DIR SHIM_DIR KERNELS_DIR

sd_journal_send writes to /run/systemd/journal/socket, a fixed path. The
test runs itself again in a private mount namespace (unshare, as root) with
a tmpfs on /run, and plays journald there: a datagram socket at that path,
whose entries it parses (the native protocol: KEY=value lines, or KEY, a
64-bit length and the value for values with newlines; big entries come as
a memfd). Outside that namespace nothing changes. Without root or unshare
the test is skipped (77).

Checks, with JOURNAL_STREAM naming lupined's stderr (what systemd sets):
- every line goes to the journal and none to stderr; PRIORITY,
  SYSLOG_IDENTIFIER (lupined, lupined-worker) and LUPINE_CATEGORY are set;
- a worker's entries carry SESSION (the client's name) and, for a client
  with a tenant's token, TENANT; the anonymous tenant has none;
- a kernel's illegal address is a warning with OP and CUDA_ERROR;
- `--log-level info,gpu=debug` logs a failed call at debug, and
  `lupinectl status` polls write nothing at info;
then with --log-target stderr: nothing in the journal, lines on stderr as
"lupined[PID]: LEVEL: text", and `--log-level warning,session=info` keeps
the session category's info lines and drops the others'.
"""
import array
import hashlib
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as w  # noqa: E402

JOURNAL = '/run/systemd/journal/socket'
TOKEN = 'journal-test-token-0123456789abcdef'
check = w.Checks()


def parse_entry(data):
    """One native-protocol datagram: {KEY: value}."""
    fields, i = {}, 0
    while i < len(data):
        nl = data.index(b'\n', i)
        line = data[i:nl]
        if b'=' in line:
            k, v = line.split(b'=', 1)
            fields[k.decode()] = v.decode(errors='replace')
            i = nl + 1
        else:  # KEY\n, le64 length, value, \n
            (n,) = struct.unpack('<Q', data[nl + 1:nl + 9])
            fields[line.decode()] = data[nl + 9:nl + 9 + n].decode(errors='replace')
            i = nl + 9 + n + 1
    return fields


class FakeJournal:
    def __init__(self):
        os.makedirs(os.path.dirname(JOURNAL), exist_ok=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(JOURNAL)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.entries = []
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        while True:
            fds = array.array('i')
            data, anc, _, _ = self.sock.recvmsg(1 << 20, socket.CMSG_SPACE(4 * fds.itemsize))
            for level, kind, cdata in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(cdata[:len(cdata) - len(cdata) % fds.itemsize])
            for fd in fds:  # a big entry: the whole datagram is in the memfd
                os.lseek(fd, 0, 0)
                data = b''
                while chunk := os.read(fd, 1 << 20):
                    data += chunk
                os.close(fd)
            try:
                self.entries.append(parse_entry(data))
            except (ValueError, struct.error):
                self.entries.append({'UNPARSED': repr(data[:200])})

    def find(self, **want):
        return [e for e in self.entries if all(e.get(k) == v for k, v in want.items())]


def start_daemon(lupined, tmp, label, args, journal_stream):
    port = w.free_port()
    err_path = os.path.join(tmp, f'{label}.stderr')
    err = open(err_path, 'w')
    env = {k: v for k, v in os.environ.items() if k not in ('NOTIFY_SOCKET', 'LISTEN_FDS', 'JOURNAL_STREAM')}
    if journal_stream:
        st = os.fstat(err.fileno())
        env['JOURNAL_STREAM'] = f'{st.st_dev}:{st.st_ino}'
    sock = os.path.join(tmp, f'{label}.sock')
    d = subprocess.Popen([lupined, '--backend', 'sim', '--listen', f'127.0.0.1:{port}', '--listen', f'unix:{sock}']
                         + args, stdout=err, stderr=err, env=env)
    ok = w.wait_port(port, d)
    return d, port, sock, err_path, ok


def client(tests, shim, kernels, prog, port, session, token=None):
    env = dict(os.environ, LUPINE_SERVER=f'127.0.0.1:{port}', LUPINE_SESSION=session,
               LD_LIBRARY_PATH=shim + (':' + os.environ['LD_LIBRARY_PATH'] if os.environ.get('LD_LIBRARY_PATH') else ''))
    env.pop('JOURNAL_STREAM', None)
    if token:
        env['LUPINE_TOKEN'] = token
    return subprocess.run([os.path.join(tests, prog), kernels], env=env, capture_output=True, text=True, timeout=120)


def stop(d):
    d.send_signal(signal.SIGTERM)
    try:
        return d.wait(timeout=30)
    except subprocess.TimeoutExpired:
        d.kill()
        return 'killed'


def journal_run(lupined, lupinectl, tests, shim, kernels, tmp, j):
    tokens = os.path.join(tmp, 'tokens')
    with open(tokens, 'w') as f:
        f.write(f'team-j {hashlib.sha256(TOKEN.encode()).hexdigest()}\n')
    d, port, sock, err_path, ok = start_daemon(lupined, tmp, 'journal', ['--log-level', 'info,gpu=debug'], True)
    check('journal: lupined starts with JOURNAL_STREAM naming its stderr', ok)
    r1 = client(tests, shim, kernels, 'e2e_sticky', port, 'jsticky')
    check('journal: e2e_sticky through lupine', r1.returncode == 0, r1.stdout[-500:] + r1.stderr[-1500:])
    for _ in range(2):
        subprocess.run([lupinectl, '--socket', sock, 'status'], capture_output=True, timeout=30)
    d.terminate()
    d.wait(timeout=30)
    # the same daemon setup with tokens, for a tenant's session
    d, port, sock, err_path2, ok = start_daemon(lupined, tmp, 'journal-t', ['--auth-tokens', tokens], True)
    r2 = client(tests, shim, kernels, 'e2e_basic', port, 'jtenant', TOKEN)
    check('journal: e2e_basic as tenant team-j', r2.returncode == 0, r2.stdout[-500:] + r2.stderr[-1500:])
    stop(d)
    time.sleep(0.3)
    with open(err_path) as f:
        err = f.read()
    with open(err_path2) as f:
        err += f.read()
    e = j.entries
    check('journal: entries arrived', len(e) > 5, str(len(e)))
    check('journal: nothing on stderr', err.strip() == '', err[-1500:])
    check('journal: every entry has MESSAGE, PRIORITY, SYSLOG_IDENTIFIER and LUPINE_CATEGORY',
          all({'MESSAGE', 'PRIORITY', 'SYSLOG_IDENTIFIER', 'LUPINE_CATEGORY'} <= set(x) for x in e),
          str([x for x in e if 'LUPINE_CATEGORY' not in x][:3]))
    ready = [x for x in e if 'ready: backend sim' in x.get('MESSAGE', '')]
    check('journal: "ready" from lupined at info (6), category core',
          bool(ready) and ready[0]['SYSLOG_IDENTIFIER'] == 'lupined' and ready[0]['PRIORITY'] == '6'
          and ready[0]['LUPINE_CATEGORY'] == 'core', str(ready[:1]))
    listening = [x for x in e if x.get('MESSAGE', '').startswith('listening on')]
    check('journal: "listening on" in category net', bool(listening) and listening[0]['LUPINE_CATEGORY'] == 'net',
          str(listening[:1]))
    worker = j.find(SYSLOG_IDENTIFIER='lupined-worker', SESSION='jsticky')
    check('journal: the worker\'s entries carry SESSION=jsticky and no TENANT',
          bool(worker) and all('TENANT' not in x for x in worker), str(worker[:2]))
    sticky = [x for x in worker if x.get('PRIORITY') == '4' and 'OP' in x and x.get('CUDA_ERROR') in ('700', '717')]
    check('journal: the illegal address is a warning with OP and CUDA_ERROR', bool(sticky),
          str([x for x in worker if x.get('PRIORITY') in ('3', '4')][:3]))
    debug = [x for x in worker if x.get('PRIORITY') == '7' and x.get('LUPINE_CATEGORY') == 'gpu']
    check('journal: gpu=debug logs failed calls at debug in category gpu', bool(debug),
          str(worker[:3]))
    tenant = j.find(SYSLOG_IDENTIFIER='lupined-worker', SESSION='jtenant')
    check('journal: a tenant\'s session carries TENANT=t<16 hex>',
          bool(tenant) and all(len(x.get('TENANT', '')) == 17 and x['TENANT'][0] == 't' for x in tenant),
          str(tenant[:2]))
    polls = [x for x in e if 'ADMIN STATUS' in x.get('MESSAGE', '')]
    check('journal: status polls write nothing at info', not polls, str(polls[:2]))


def stderr_run(lupined, tests, shim, kernels, tmp, j):
    before = len(j.entries)
    d, port, sock, err_path, ok = start_daemon(lupined, tmp, 'stderr',
                                               ['--log-target', 'stderr', '--log-level', 'warning,session=info'], True)
    check('stderr: lupined starts with --log-target stderr', ok)
    r = client(tests, shim, kernels, 'e2e_basic', port, 'jstderr')
    check('stderr: e2e_basic through lupine', r.returncode == 0, r.stderr[-1500:])
    stop(d)
    with open(err_path) as f:
        err = f.read()
    lines = [x for x in err.splitlines() if x]
    check('stderr: nothing in the journal', len(j.entries) == before, str(j.entries[before:before + 3]))
    check('stderr: every line is "lupined[PID]: LEVEL: text"',
          bool(lines) and all(__import__('re').match(r'^lupined(-worker)?\[\d+\]: (error|warning|info|debug): ', x)
                              for x in lines), '\n'.join(lines[:5]))
    check('stderr: warning,session=info keeps the session category\'s info lines',
          any('said goodbye' in x or 'session jstderr' in x for x in lines if ': info: ' in x), err[-1500:])
    check('stderr: ... and drops the others\' ("listening on", "ready")',
          not any('listening on' in x or 'ready: backend' in x for x in lines), err[-1500:])


def inner(argv):
    lupined, lupinectl, tests, shim, kernels = argv
    subprocess.run(['mount', '-t', 'tmpfs', 'tmpfs', '/run'], check=True)
    j = FakeJournal()
    with tempfile.TemporaryDirectory(prefix='lupine-journal-') as tmp:
        journal_run(lupined, lupinectl, tests, shim, kernels, tmp, j)
        stderr_run(lupined, tests, shim, kernels, tmp, j)
    return 1 if check.failed else 0


def main():
    if len(sys.argv) == 7 and sys.argv[1] == '--inner':
        sys.exit(inner(sys.argv[2:]))
    if len(sys.argv) != 6:
        print(__doc__)
        sys.exit(2)
    if os.geteuid() != 0:
        print('SKIP: needs root for a private mount namespace (unshare -m)')
        sys.exit(77)
    probe = subprocess.run(['unshare', '--mount', '--propagation', 'private', 'true'], capture_output=True)
    if probe.returncode != 0:
        print(f'SKIP: unshare --mount does not work here: {probe.stderr.decode().strip()}')
        sys.exit(77)
    r = subprocess.run(['unshare', '--mount', '--propagation', 'private', sys.executable, os.path.abspath(__file__),
                        '--inner'] + sys.argv[1:])
    sys.exit(r.returncode)


if __name__ == '__main__':
    main()
