#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Migration and incremental-checkpoint benchmark on the real GPU (issue 17).

Two lupined on the one GPU, acting as two hosts on one checkpoint store
(a directory on the machine's disk). For 1, 4 and 16 GiB sessions
(tests/e2e/progs/e2e_incremental.c: 1 MiB pieces of a checkable pattern),
with a client that rewrites 1% or 10% of its pieces, round after round,
until the move is over:

  pre-copy   lupinectl migrate with pre-copy (the default): the memory is
             written while the session runs, the pause writes what changed;
  no pre-copy  the same on daemons with LUPINE_MIGRATE_PRECOPY=0 and
             LUPINE_CHECKPOINT_INCREMENTAL=0: the pause writes everything
             (what lupine did before).

Each case: the program first runs on the local driver (the same commands,
every piece checked), then through lupine; the client's longest call
during the move (its stall: the pause, the reconnect and the restore on
the target) is timed, and every piece is checked on the target. Then, on the target, 1% more changes and a checkpoint is
taken: with incremental checkpoints it writes 1%, without it writes all;
the effective rate (memory / time) of both is printed.

One line per case, a table and ratios at the end, and one summary line:
"lupine migrate bench: PASS n/n".

usage: migrate_bench.py BUILD_DIR [SIZES_GIB]
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'e2e'))
from restart_harness import read_line  # noqa: E402

BUILD = sys.argv[1] if len(sys.argv) > 1 else 'build'
SIZES = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else '1,4,16').split(',')]
DIRTY = (10, 100)  # permille
BACKEND = os.environ.get('LUPINE_BENCH_BACKEND', 'cuda')  # sim: a dry run of the script here
passed, failed = 0, []


def check(name, cond, detail=''):
    global passed
    print(f'{"ok  " if cond else "FAIL"} {name}' + (f': {detail[-1500:]}' if detail and not cond else ''), flush=True)
    if cond:
        passed += 1
    else:
        failed.append(name)


def real_driver_dir():
    out = subprocess.run(['ldconfig', '-p'], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if 'libcuda.so.1 ' in line:
            return os.path.dirname(line.split('=>')[-1].strip())
    return '/usr/lib/x86_64-linux-gnu'


class Host:
    def __init__(self, tmp, label, ck, port, extra_env):
        self.label, self.port = label, port
        self.sock = os.path.join(tmp, f'{label}.sock')
        self.log_path = os.path.join(tmp, f'{label}.log')
        env = {k: v for k, v in os.environ.items() if k not in ('LD_LIBRARY_PATH', 'NOTIFY_SOCKET')}
        env.update(extra_env)
        self.proc = subprocess.Popen(
            [os.path.join(BUILD, 'daemon/lupined'), '--backend', BACKEND, '--listen', f'127.0.0.1:{port}', '--listen',
             f'unix:{self.sock}', '--checkpoint-dir', ck, '--host-id', label, '--session-ttl', '300',
             '--drain-timeout', '300', '--health-policy', 'off'],
            stdin=subprocess.DEVNULL, stdout=open(self.log_path, 'ab'), stderr=subprocess.STDOUT, env=env)
        for _ in range(200):
            if os.path.exists(self.sock):
                break
            time.sleep(0.05)

    def log(self):
        with open(self.log_path, 'rb') as f:
            return f.read().decode('utf-8', 'replace')

    def wait_log(self, pattern, timeout=60, after=0):
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = rx.search(self.log(), after)
            if m:
                return m
            time.sleep(0.02)
        return None

    def ctl(self, *args):
        return subprocess.run([os.path.join(BUILD, 'cli/lupinectl'), '-s', self.sock] + list(args),
                              capture_output=True, text=True, timeout=600)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Client:
    def __init__(self, env, mib):
        self.p = subprocess.Popen([os.path.join(BUILD, 'tests/e2e_incremental'), str(mib)], env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def line(self, timeout=600):
        return (read_line(self.p.stdout, timeout) or '').rstrip('\n')

    def say(self, cmd, timeout=600):
        self.p.stdin.write(cmd + '\n')
        self.p.stdin.flush()
        return self.line(timeout)

    def close(self):
        try:
            self.say('quit', 5)
        except OSError:
            pass
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
        return self.p.stderr.read()


def local_run(gib, permille):
    env = dict(os.environ, LD_LIBRARY_PATH=real_driver_dir())
    c = Client(env, gib * 1024)
    ok = c.line().startswith('ready') and c.say(f'dirty {permille} 7').startswith('dirtied') and \
        c.say('dirty 10 8 3').startswith('dirtied') and c.say('check') == 'check ok'
    c.close()
    return ok


def one_case(a, b, gib, permille, precopy):
    mode = 'pre-copy' if precopy else 'no pre-copy'
    name = f'{gib} GiB, {permille / 10:g}% changed, {mode}'
    session = f'mb{gib}x{permille}{"p" if precopy else "n"}'
    env = dict(os.environ, LUPINE_SERVER=f'127.0.0.1:{a.port}', LUPINE_SESSION=session,
               LUPINE_RECONNECT_TIMEOUT='300', LD_LIBRARY_PATH=os.path.join(BUILD, 'shim'))
    c = Client(env, gib * 1024)
    res = {}
    try:
        if not c.line().startswith('ready'):
            check(f'{name}: the session fills', False, c.p.stderr.read() if c.p.poll() is not None else '')
            return None
        mark = len(a.log())

        def go():
            r = a.ctl('--json', 'migrate', session, '--to', f'127.0.0.1:{b.port}')
            try:
                res['js'] = json.loads(r.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                res['js'] = {}
            res['text'] = r.stdout + r.stderr
        t = threading.Thread(target=go)
        t.start()
        if precopy:
            a.wait_log(rf'session {session}: pre-copy of epoch \d+ begun', 60, mark)
        # the session keeps rewriting its share of memory until the move is
        # over (without a pre-copy, the first rewrite waits for the move)
        calls, dirtied, seed = [], True, 7
        while True:
            t0 = time.monotonic()
            dirtied = dirtied and c.say(f'dirty {permille} {seed}').startswith('dirtied')
            calls.append(time.monotonic() - t0)
            seed += 1
            if not t.is_alive():
                break
        t.join(timeout=900)
        t0 = time.monotonic()
        synced = c.say('sync')
        first = time.monotonic() - t0
        stall = max(calls + [first])
        js = res.get('js', {})
        good = js.get('state') == 'done' and dirtied and synced == 'synced'
        checked = c.say('check') == 'check ok'
        check(f'{name}: moved to B, every piece reads back exact there', good and checked,
              res.get('text', '') + a.log()[-1500:] + b.log()[-1500:])
        # an incremental (or, without, full) checkpoint of 1% more on the target
        mark = len(b.log())
        c.say('dirty 10 8 3')
        r = b.ctl('sessions', 'checkpoint', session)
        m = b.wait_log(rf'session {session}: checkpoint epoch \d+ \(durable\): ([\d.]+) GiB .* (\d+) bytes copied, '
                       rf'in ([\d.]+) s', 60, mark)
        ck = (float(m.group(1)), int(m.group(2)), float(m.group(3))) if m else None
        check(f'{name}: a checkpoint of 1% more changes on the target', r.returncode == 0 and ck is not None,
              r.stdout + r.stderr + b.log()[-1500:])
        row = dict(gib=gib, permille=permille, precopy=precopy, pause=js.get('pause_s', 0.0),
                   paused=js.get('paused_bytes', 0), pre=js.get('precopy_bytes', 0), total=js.get('seconds', 0.0),
                   first=first, stall=stall, rounds=len(calls), ck=ck)
        print(f'{name}: moved {js.get("bytes", 0) / 2**30:.2f} GiB in {row["total"]:.2f} s; pre-copied '
              f'{row["pre"] / 2**30:.2f} GiB while it ran; pause {row["pause"]:.3f} s writing '
              f'{row["paused"] / 2**30:.3f} GiB; {len(calls)} rewrite(s) meanwhile; the client\'s longest call '
              f'{stall:.3f} s; checkpoint of 1% on B: '
              + (f'{ck[1] / 2**30:.3f} GiB written in {ck[2]:.3f} s ({ck[0] / ck[2]:.1f} GB/s effective)'
                 if ck and ck[2] > 0 else 'none'), flush=True)
        return row
    finally:
        c.close()


def main():
    tmp = tempfile.mkdtemp(prefix='lupine-migbench.')
    for gib in SIZES if BACKEND == 'cuda' else ():
        for permille in DIRTY:
            check(f'{gib} GiB, {permille / 10:g}% changed: the program on the local driver checks every piece',
                  local_run(gib, permille))
    rows = []
    port = 30000 + os.getpid() % 20000
    for precopy in (True, False):
        ck = os.path.join(tmp, f'ck-{"p" if precopy else "n"}')
        extra = {} if precopy else {'LUPINE_MIGRATE_PRECOPY': '0', 'LUPINE_CHECKPOINT_INCREMENTAL': '0'}
        a = Host(tmp, f'A{int(precopy)}', ck, port, extra)
        b = Host(tmp, f'B{int(precopy)}', ck, port + 1, extra)
        port += 2
        try:
            for gib in SIZES:
                for permille in DIRTY:
                    row = one_case(a, b, gib, permille, precopy)
                    if row:
                        rows.append(row)
        finally:
            a.stop()
            b.stop()
    print('\n| session | rewritten per round | pause with pre-copy | written in it | pause without | ratio | '
          'client\'s longest call with / without | 1% checkpoint incremental / full (effective GB/s) |')
    print('|---|---|---|---|---|---|---|---|')
    for gib in SIZES:
        for permille in DIRTY:
            p = next((r for r in rows if r['gib'] == gib and r['permille'] == permille and r['precopy']), None)
            n = next((r for r in rows if r['gib'] == gib and r['permille'] == permille and not r['precopy']), None)
            if not p or not n:
                continue
            eff = [r['ck'][0] / r['ck'][2] if r['ck'] and r['ck'][2] > 0 else 0 for r in (p, n)]
            print(f'| {gib} GiB | {permille / 10:g}% | {p["pause"]:.3f} s | {p["paused"] / 2**30:.3f} GiB | '
                  f'{n["pause"]:.3f} s | {p["pause"] / n["pause"] if n["pause"] else 0:.2f}x | '
                  f'{p["stall"]:.2f} / {n["stall"]:.2f} s | {eff[0]:.1f} / {eff[1]:.1f} '
                  f'({eff[0] / eff[1] if eff[1] else 0:.1f}x) |')
    print(f'logs in {tmp}')
    if failed:
        print(f'lupine migrate bench: FAIL {len(failed)} of {passed + len(failed)} ({", ".join(failed)})')
        return 1
    print(f'lupine migrate bench: PASS {passed}/{passed}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
