#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""systemd-analyze verify on lupine's units, as built.

Usage: test_units.py BUILT_SERVICE SOURCE_SYSTEMD_DIR LUPINED

The units are copied into a temporary directory with ExecStart= pointing at
the lupined just built (verify insists that the binary exists), then
verified three ways: the units alone, with the example drop-in as shipped,
and with every commented-out setting of the drop-in switched on. Any
warning fails the test: systemd only warns about a misspelt key or a key in
the wrong section, and then ignores it. A deliberate typo checks that such
warnings are seen at all. As root, the sysusers.d and tmpfiles.d snippets
are applied to a scratch root directory too. Exit 77 (skipped) only when
systemd-analyze is missing.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile


def fail(msg):
    print('FAIL: ' + msg)
    sys.exit(1)


def verify(d, units):
    r = subprocess.run(['systemd-analyze', 'verify', '--man=no'] + units, cwd=d,
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, SYSTEMD_LOG_COLOR='0', SYSTEMD_PAGER=''))
    return r.returncode, (r.stdout + r.stderr).strip()


def must_verify(d, units, what):
    rc, out = verify(d, units)
    if rc != 0 or out:
        fail('%s: systemd-analyze verify says (exit %d):\n%s' % (what, rc, out))
    print('ok: %s: systemd-analyze verify is clean' % what)


def directives(text):
    """key -> list of values, ignoring comments and sections."""
    d = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in '#;[' or '=' not in line:
            continue
        k, v = line.split('=', 1)
        d.setdefault(k.strip(), []).append(v.strip())
    return d


def check_policy(service, sockets):
    """The choices issue 5 depends on, so an edit cannot drop them quietly."""
    s = directives(service)
    want = {'Type': 'notify', 'NotifyAccess': 'all', 'KillMode': 'mixed'}
    for k, v in want.items():
        if s.get(k) != [v]:
            fail('lupined.service: %s=%s expected, found %s' % (k, v, s.get(k)))
    for k in ('WatchdogSec', 'TimeoutStopSec', 'ExecReload', 'FileDescriptorStoreMax', 'StateDirectory',
              'CacheDirectory'):
        if k not in s:
            fail('lupined.service: %s= is missing' % k)
    if int(s['FileDescriptorStoreMax'][0]) < 4096:
        fail('lupined.service: FileDescriptorStoreMax= is too small for one fd per memory chunk per session')
    if 'HUP' not in s['ExecReload'][0]:
        fail('lupined.service: ExecReload= must send SIGHUP (the re-exec upgrade)')
    if any(v.lower() in ('yes', 'true', '1') for v in s.get('PrivateDevices', [])):
        fail('lupined.service: PrivateDevices= would hide the GPUs')
    if not any('nvidia' in v for v in s.get('DeviceAllow', [])):
        fail('lupined.service: DeviceAllow= does not let the GPU devices through')
    names = set()
    for name, text in sockets.items():
        k = directives(text)
        if 'ListenStream' not in k or len(k.get('FileDescriptorName', [])) != 1:
            fail('%s: needs ListenStream= and one FileDescriptorName=' % name)
        fdname = k['FileDescriptorName'][0]
        if ':' in fdname or not re.fullmatch(r'[\x20-\x7e]{1,255}', fdname):
            fail('%s: FileDescriptorName=%s is not a valid fd name' % (name, fdname))
        names.add(fdname)
        if k.get('Service') != ['lupined.service']:
            fail('%s: Service=lupined.service expected' % name)
    if len(names) != len(sockets):
        fail('the socket units must name their fds differently: %s' % sorted(names))
    listens = [v for t in sockets.values() for v in directives(t)['ListenStream']]
    # loopback by default: a network listener needs TLS and auth (docs/security.md)
    if '127.0.0.1:14833' not in listens or not any(v.startswith('/') for v in listens):
        fail('the sockets must be TCP 127.0.0.1:14833 and a UNIX socket, found %s' % listens)
    print('ok: the units say what the daemon relies on')


def check_snippets(src):
    if os.geteuid() != 0:
        print('note: not root, so the sysusers.d and tmpfiles.d snippets are not applied')
        return
    for tool in ('systemd-sysusers', 'systemd-tmpfiles'):
        if not shutil.which(tool):
            print('note: %s is missing; its snippet is not applied' % tool)
            return
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(root + '/etc')
        for f in ('passwd', 'group', 'shadow', 'gshadow'):
            open(os.path.join(root, 'etc', f), 'w').close()
        r = subprocess.run(['systemd-sysusers', '--root=' + root, os.path.join(src, 'lupine.sysusers.conf')],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            fail('systemd-sysusers: %s' % r.stderr)
        passwd = open(root + '/etc/passwd').read()
        group = open(root + '/etc/group').read()
        if not re.search(r'^lupine:', passwd, re.M):
            fail('sysusers did not create user lupine:\n' + passwd)
        if not re.search(r'^video:[^:]*:[^:]*:.*\blupine\b', group, re.M):
            fail('sysusers did not put lupine into group video:\n' + group)
        r = subprocess.run(['systemd-tmpfiles', '--root=' + root, '--create',
                            os.path.join(src, 'lupine.tmpfiles.conf')],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            fail('systemd-tmpfiles: %s' % r.stderr)
        st = os.stat(root + '/var/lib/lupine/checkpoints')
        uid = int(re.search(r'^lupine:[^:]*:(\d+):', passwd, re.M).group(1))
        if st.st_uid != uid or st.st_mode & 0o077:
            fail('/var/lib/lupine/checkpoints: owner %d mode %o' % (st.st_uid, st.st_mode & 0o777))
        if not os.path.isdir(root + '/run/lupine'):
            fail('tmpfiles did not create /run/lupine')
    print('ok: sysusers.d and tmpfiles.d snippets apply to a scratch root')


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    service_in, src, lupined = sys.argv[1:]
    src = os.path.abspath(src)
    if not shutil.which('systemd-analyze'):
        print('SKIP: systemd-analyze is not installed (apt-get install systemd)')
        return 77
    lupined = os.path.abspath(lupined)
    service = open(service_in).read()
    m = re.search(r'^ExecStart=(\S+)', service, re.M)
    if not m or not m.group(1).endswith('/lupined'):
        fail('lupined.service: no ExecStart=.../lupined')
    installed = m.group(1)
    sockets = {n: open(os.path.join(src, n)).read() for n in ('lupined.socket', 'lupined-local.socket')}
    check_policy(service, sockets)
    units = ['lupined.socket', 'lupined-local.socket', 'lupined.service']
    with tempfile.TemporaryDirectory() as d:
        open(os.path.join(d, 'lupined.service'), 'w').write(service.replace(installed, lupined))
        for n, text in sockets.items():
            open(os.path.join(d, n), 'w').write(text)
        must_verify(d, units, 'the units')

        dropin = open(os.path.join(src, 'lupined.service.d', 'example.conf')).read()
        os.makedirs(os.path.join(d, 'lupined.service.d'))
        conf = os.path.join(d, 'lupined.service.d', 'example.conf')
        open(conf, 'w').write(dropin)
        must_verify(d, ['./lupined.service'], 'the example drop-in as shipped')
        every = re.sub(r'^#([A-Za-z]+=)', r'\1', dropin, flags=re.M)
        # the example names the packaged /usr/sbin/lupined, whatever this build's prefix
        every = re.sub(r'^ExecStart=\S*/lupined ', 'ExecStart=' + lupined + ' ', every, flags=re.M)
        open(conf, 'w').write(every)
        must_verify(d, ['./lupined.service'], 'the example drop-in with every setting on')

        open(conf, 'w').write('[Service]\nWatchdogSecs=5s\n')
        rc, out = verify(d, ['./lupined.service'])
        if 'WatchdogSecs' not in out:
            fail('a misspelt key went unreported by systemd-analyze verify (exit %d): %r' % (rc, out))
        print('ok: a misspelt key is reported')
    check_snippets(src)
    print('PASS')
    return 0


if __name__ == '__main__':
    sys.exit(main())
