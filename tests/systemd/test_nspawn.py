#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Integration: lupine's units under a real systemd, booted in systemd-nspawn.

Usage: test_nspawn.py BUILD_ROOT BUILT_SERVICE SOURCE_SYSTEMD_DIR

The container is the host's own /usr (bound read-only) with a scratch
root around it: a copy of /etc, and lupine's build tree bound read-only at
/opt/lupine. No image is downloaded or built, so it boots in about a
second. lupine's units go in with ExecStart= pointing at the built lupined,
the sysusers.d and tmpfiles.d snippets in /etc, and a drop-in that picks
the simulated GPU and a 2 s watchdog. Only the two sockets are enabled.
A oneshot unit inside then checks, as root:

  - both sockets listen and lupined is not running yet;
  - the first client (e2e_basic through the shim, on the UNIX socket)
    starts lupined, sandboxed, as user lupine, and is served;
  - STATUS= reaches systemd (StatusText), and WATCHDOG=1 keeps coming
    (WatchdogTimestamp moves);
  - lupinectl status answers on /run/lupine/lupined.sock;
  - systemctl reload leaves the service active under the same main pid;
  - systemctl stop ends it with Result=success while the sockets stay;
  - the next client, on TCP 14833, starts it again;
  - lupinectl log reads lupined's entries back from the journal (sd-journal),
    with --session, --json and --level.

It writes ok/FAIL lines and lupined's journal to a bound directory and
powers the container off. Exit 77 (skipped, saying why) when not root, or
when systemd-nspawn, unshare or a container cannot be had (an unprivileged
CI container); docs/operations.md says what that means.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import uuid

INSIDE = r'''#!/bin/sh
# Runs inside the container as lupine-ci.service.
set -u
out=/out/result
: > $out
fail=0
check() {
        name=$1; shift
        if "$@" >> /out/detail 2>&1; then echo "ok   $name" >> $out; else echo "FAIL $name" >> $out; fail=1; fi
}
client() {
        env LD_LIBRARY_PATH=/opt/lupine/shim LUPINE_SERVER=$1 LUPINE_SESSION=$2 LUPINE_RECONNECT_TIMEOUT=0 \
                timeout 120 /opt/lupine/tests/e2e_basic
}
prop() { systemctl show -p "$1" --value lupined.service; }

check "lupined.socket listens" systemctl is-active lupined.socket
check "lupined-local.socket listens" systemctl is-active lupined-local.socket
check "lupined is not running before the first client" sh -c '! systemctl is-active lupined.service'
check "the first client (UNIX socket) starts lupined and is served" client unix:/run/lupine/lupined.sock nspawn-1
check "lupined.service is active" systemctl is-active lupined.service
pid=$(prop MainPID)
check "lupined runs as user lupine" sh -c "[ \"\$(ps -o user= -p $pid)\" = lupine ]"
check "STATUS= reaches systemd" sh -c 'systemctl show -p StatusText --value lupined.service | grep serving'
check "WATCHDOG=1 keeps coming" sh -c 'a=$(systemctl show -p WatchdogTimestampMonotonic --value lupined.service);
        sleep 2.5; b=$(systemctl show -p WatchdogTimestampMonotonic --value lupined.service);
        echo "watchdog $a -> $b"; [ "$b" != 0 ] && [ "$a" != "$b" ]'
check "lupinectl status on /run/lupine/lupined.sock" /opt/lupine/cli/lupinectl status
check "systemctl reload keeps the service and its main pid" sh -c "systemctl reload lupined.service &&
        for i in \$(seq 60); do systemctl is-active lupined.service && break; sleep 0.5; done &&
        [ \"\$(systemctl show -p MainPID --value lupined.service)\" = $pid ]"
check "systemctl stop ends lupined cleanly" sh -c 'systemctl stop lupined.service &&
        [ "$(systemctl show -p Result --value lupined.service)" = success ]'
check "the sockets stay when lupined stops" systemctl is-active lupined.socket lupined-local.socket
check "the next client (TCP 14833) starts lupined again" client 127.0.0.1:14833 nspawn-2
ctl=/opt/lupine/cli/lupinectl
check "lupinectl log reads lupined's journal entries" sh -c "$ctl log -n 300 > /out/ctllog 2>&1; cat /out/ctllog;
        grep -q 'session nspawn-2' /out/ctllog"
check "lupinectl log --session keeps that session's entries" sh -c "$ctl log -n 300 --session nspawn-1 > /out/ctllog1 2>&1;
        cat /out/ctllog1; grep -q nspawn-1 /out/ctllog1 && ! grep -q nspawn-2 /out/ctllog1"
check "lupinectl --json log: one JSON object a line" sh -c "$ctl --json log -n 20 | python3 -c 'import json, sys
rows = [json.loads(l) for l in sys.stdin]
assert rows and all(isinstance(r, dict) for r in rows), rows'"
check "lupinectl log --level err: no entry above err" sh -c "$ctl log -n 300 --level err > /out/ctllog_err 2>&1;
        cat /out/ctllog_err; ! grep -Eq ' (info|debug|warning): ' /out/ctllog_err"
journalctl -u lupined.service -u lupined.socket -u lupined-local.socket --no-pager > /out/journal 2>&1
systemctl status lupined.service --no-pager >> /out/detail 2>&1
[ $fail = 0 ] && echo PASS >> $out
systemctl poweroff --no-block
'''

CI_UNIT = '''[Unit]
Description=lupine integration checks
After=multi-user.target sockets.target
[Service]
Type=oneshot
ExecStart=/bin/sh /etc/lupine-ci.sh
StandardOutput=journal+console
[Install]
WantedBy=multi-user.target
'''

DROPIN = '''[Service]
Environment=LUPINED_OPTS=--backend=sim
Environment=LUPINE_SIM_LIBRARY=/opt/lupine/sim/libcuda-sim.so
WatchdogSec=2s
'''


def skip(why):
    print('SKIP: ' + why)
    sys.exit(77)


def nspawn_cmd(root, out, build, extra):
    # /run/systemd/nspawn must be a tmpfs (nspawn removes things there);
    # mount one in a private mount namespace, so the host is not touched.
    inner = ('mount -t tmpfs tmpfs /run/systemd/nspawn && exec systemd-nspawn -q --register=no --keep-unit '
             f'--private-network -D {root} --bind-ro=/usr --bind={out}:/out --bind-ro={build}:/opt/lupine ' + extra)
    return ['unshare', '--mount', '--propagation', 'private', 'sh', '-c', inner]


def make_root(root, service, src):
    for d in ('etc', 'var', 'run', 'tmp', 'root', 'proc', 'sys', 'dev', 'usr', 'opt/lupine', 'out'):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    for d in ('bin', 'sbin', 'lib', 'lib64', 'lib32', 'libx32'):
        if os.path.exists('/usr/' + d):
            os.symlink('usr/' + d, os.path.join(root, d))
    subprocess.run(['cp', '-a', '/etc/.', os.path.join(root, 'etc')], check=True)
    for f in ('machine-id', 'os-release'):
        p = os.path.join(root, 'etc', f)
        if os.path.lexists(p):
            os.unlink(p)
    shutil.copy('/usr/lib/os-release', os.path.join(root, 'etc', 'os-release'))
    # A machine id, so this is not a first boot: on a first boot systemd
    # applies the presets, which would enable lupined.service itself.
    open(os.path.join(root, 'etc', 'machine-id'), 'w').write(uuid.uuid4().hex + '\n')
    sysd = os.path.join(root, 'etc', 'systemd', 'system')
    # Whatever the host has of lupine (an installed copy, enabled units)
    # must not take part: only the units under test, only the sockets on.
    for dirpath, dirnames, filenames in os.walk(sysd):
        for n in dirnames + filenames:
            if n.startswith('lupine'):
                p = os.path.join(dirpath, n)
                if os.path.isdir(p) and not os.path.islink(p):
                    shutil.rmtree(p)
                else:
                    os.unlink(p)
    os.makedirs(os.path.join(sysd, 'sockets.target.wants'), exist_ok=True)
    os.makedirs(os.path.join(sysd, 'multi-user.target.wants'), exist_ok=True)
    os.makedirs(os.path.join(sysd, 'lupined.service.d'), exist_ok=True)
    text = open(service).read()
    exe = next(l for l in text.splitlines() if l.startswith('ExecStart=')).split('=', 1)[1].split()[0]
    open(os.path.join(sysd, 'lupined.service'), 'w').write(text.replace(exe, '/opt/lupine/daemon/lupined'))
    for u in ('lupined.socket', 'lupined-local.socket'):
        shutil.copy(os.path.join(src, u), os.path.join(sysd, u))
        os.symlink('/etc/systemd/system/' + u, os.path.join(sysd, 'sockets.target.wants', u))
    open(os.path.join(sysd, 'lupined.service.d', 'ci.conf'), 'w').write(DROPIN)
    open(os.path.join(sysd, 'lupine-ci.service'), 'w').write(CI_UNIT)
    os.symlink('/etc/systemd/system/lupine-ci.service', os.path.join(sysd, 'multi-user.target.wants',
                                                                      'lupine-ci.service'))
    open(os.path.join(root, 'etc', 'lupine-ci.sh'), 'w').write(INSIDE)
    for sub, name in (('sysusers.d', 'lupine.sysusers.conf'), ('tmpfiles.d', 'lupine.tmpfiles.conf')):
        os.makedirs(os.path.join(root, 'etc', sub), exist_ok=True)
        shutil.copy(os.path.join(src, name), os.path.join(root, 'etc', sub, 'lupine.conf'))


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    build, service, src = (os.path.abspath(a) for a in sys.argv[1:])
    if os.geteuid() != 0:
        skip('needs root to boot a container')
    for tool in ('systemd-nspawn', 'unshare'):
        if not shutil.which(tool):
            skip(f'{tool} is not installed (apt-get install systemd-container util-linux)')
    if not os.path.exists('/usr/lib/systemd/systemd') and not os.path.exists('/lib/systemd/systemd'):
        skip('systemd is not installed (apt-get install systemd)')
    os.makedirs('/run/systemd/nspawn', exist_ok=True)
    tmp = tempfile.mkdtemp(prefix='lupine-nspawn-')
    root, out = os.path.join(tmp, 'root'), os.path.join(tmp, 'out')
    os.makedirs(out)
    try:
        make_root(root, service, src)
        probe = subprocess.run(nspawn_cmd(root, out, build, '/bin/true'), capture_output=True, text=True,
                               timeout=60)
        if probe.returncode != 0:
            skip('cannot start a container here (an unprivileged CI container?): ' + probe.stderr.strip()[-400:])
        boot = subprocess.run(nspawn_cmd(root, out, build, '-b'), capture_output=True, text=True, timeout=240)
        result = open(os.path.join(out, 'result')).read() if os.path.exists(os.path.join(out, 'result')) else ''
        print(''.join(l + '\n' for l in result.splitlines() if l != 'PASS'), end='')
        if 'PASS' not in result.splitlines():
            for f in ('detail', 'journal'):
                p = os.path.join(out, f)
                if os.path.exists(p):
                    print(f'---- {f}\n' + open(p).read()[-6000:])
            print('---- boot (exit %d)\n%s' % (boot.returncode, (boot.stdout + boot.stderr)[-3000:]))
            print('FAIL')
            return 1
        print('PASS')
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
