# SPDX-License-Identifier: MIT
"""Managed memory through lupined on the simulator:

  e2e_managed        (on the simulator itself, then through lupined: the
                     outputs must be equal) a managed vector add with host access between kernels,
                     copies with managed ends, stream attachment, pointer
                     and range attributes, advice and prefetches, the device
                     attributes of the contract, bad input (the program runs
                     unchanged on the real driver); once more with every
                     mirror placed away from the client's address
                     (translated pointers);
  durable, hot, upgrade
                     e2e_managed's hold mode keeps managed memory with data
                     from both sides, and host writes no call has carried
                     yet, while the daemon restarts (SIGTERM and a new
                     daemon; SIGTERM under a fake service manager with the
                     fd store; SIGHUP twice), then checks the data at the
                     same addresses and uses it.

usage: test_managed.py LUPINED PROGS_DIR SHIM_DIR KERNELS_DIR"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as W  # noqa: E402
from restart_harness import Hold, stop_daemon  # noqa: E402

check = W.Checks()


def local(progs, kernels):
    """e2e_managed on the simulator itself (what a local driver prints):
    lupine's output must be the same."""
    env = dict(os.environ)
    env.pop('LD_LIBRARY_PATH', None)
    r = subprocess.run([os.path.join(progs, 'e2e_managed_sim'), kernels], env=env, capture_output=True, text=True,
                       timeout=120)
    check('managed: e2e_managed on the simulator itself', r.returncode == 0 and 'e2e_managed: OK' in r.stdout,
          r.stdout[-2000:] + r.stderr[-2000:])
    return r.stdout


def plain(lupined, progs, shim, kernels, tmp, elsewhere=False, want=None):
    port = W.free_port()
    log = open(os.path.join(tmp, 'managed-plain.log'), 'a')
    env = dict(os.environ)
    env.pop('LD_LIBRARY_PATH', None)
    what = ' (mirrors away from the client addresses)' if elsewhere else ''
    if elsewhere:
        env['LUPINE_TEST_MAPPED_ELSEWHERE'] = '1'
    d = subprocess.Popen([lupined, '--backend', 'sim', '--listen', f'127.0.0.1:{port}'],
                         stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        check('managed: the daemon starts', W.wait_port(port, d))
        cenv = dict(os.environ)
        cenv['LUPINE_SERVER'] = f'127.0.0.1:{port}'
        cenv['LD_LIBRARY_PATH'] = shim
        try:
            r = subprocess.run([os.path.join(progs, 'e2e_managed'), kernels], env=cenv, capture_output=True,
                               text=True, timeout=120)
            out, err, rc = r.stdout, r.stderr, r.returncode
        except subprocess.TimeoutExpired as e:
            out, err, rc = str(e.stdout), str(e.stderr), -1
        print(out, end='')
        check(f'managed: vector add with host access between kernels, copies, attachment, attributes, advice, '
              f'prefetch, bad input (e2e_managed){what}', rc == 0 and 'e2e_managed: OK' in out,
              out[-2000:] + err[-3000:])
        if want is not None:
            check(f'managed: the same output as on the simulator itself{what}', out == want,
                  f'local:\n{want}\nlupine:\n{out}')
        check(f'managed: the device reports no concurrent managed access{what}',
              'concurrent managed access 0, pageable 0, direct from host 0' in err, err[-2000:])
        if elsewhere:
            with open(log.name) as f:
                text = f.read()
            check('managed: the worker said its mirrors are elsewhere, pointers translated',
                  'pointers to it are translated' in text, text[-2000:])
    finally:
        stop_daemon(d)
        log.close()


def _hold(progs, shim, kernels):
    return Hold(check, progs, kernels, shim, 'e2e_managed', 'managed', 'mng',
                'managed memory with data from host and GPU built',
                'managed memory at the same addresses with both sides\' writes and the late host writes; kernels, '
                'copies, attributes and advice work after', 'e2e_managed hold: OK')


def _none_translated(what, tail):
    return lambda text: check(f'managed ({what}): every mirror made again at the client\'s own address (none '
                              f'translated)', 'pointers to it are translated' not in text, text[-tail:])


def durable(lupined, progs, shim, kernels, tmp):
    _hold(progs, shim, kernels).durable(lupined, tmp, after=_none_translated('durable', 3000))


def hot(lupined, progs, shim, kernels, tmp):
    def drained(m, rc):
        check('managed (hot): the drain exits 0', rc == 0, m.log()[-2000:])

    _hold(progs, shim, kernels).hot(lupined, tmp, drained, after=_none_translated('hot', 2000))


def upgrade(lupined, progs, shim, kernels, tmp):
    _hold(progs, shim, kernels).upgrade(lupined, tmp, after=_none_translated('upgrade', 2000))


def main():
    if len(sys.argv) < 5:
        print(__doc__)
        return 2
    lupined, progs, shim, kernels = sys.argv[1:5]
    shim = os.path.abspath(shim)
    with tempfile.TemporaryDirectory(prefix='lupine-managed-') as tmp:
        try:
            want = local(progs, kernels)
            plain(lupined, progs, shim, kernels, tmp, want=want)
            plain(lupined, progs, shim, kernels, tmp, elsewhere=True, want=want)
            durable(lupined, progs, shim, kernels, tmp)
            hot(lupined, progs, shim, kernels, tmp)
            upgrade(lupined, progs, shim, kernels, tmp)
        except Exception as e:  # a harness failure is a test failure, with the logs
            check('harness', False, repr(e))
        if check.failed:
            for f in ('managed-plain.log', 'managed-durable.log', 'managed-hot.log', 'managed-upgrade.log'):
                p = os.path.join(tmp, f)
                if os.path.exists(p):
                    print(f'---- {f} (tail) ----')
                    with open(p) as fh:
                        print(fh.read()[-5000:])
    print(f'managed: {"FAILED: " + ", ".join(check.failed) if check.failed else "all passed"}')
    return 1 if check.failed else 0


if __name__ == '__main__':
    sys.exit(main())
