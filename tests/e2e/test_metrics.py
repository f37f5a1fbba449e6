#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""e2e: lupined --metrics, scraped by the real Prometheus server (issue 18).

Usage: test_metrics.py LUPINED TESTS_DIR SHIM_DIR

A client (e2e_bigsession) fills 1 GiB on the simulator and waits. Checks:
- /metrics answers in the Prometheus text format: every sample line is
  NAME{LABELS} VALUE under its family's HELP and TYPE lines;
- lupine_up, the sessions by state, the session's memory (1 GiB), calls
  and bytes, and the simulated GPU's temperature, power and memory;
- other paths are 404, other methods 405, and garbage sent to the port
  leaves the endpoint serving;
- Debian's prometheus scrapes it every second and its query API answers
  lupine_session_memory_bytes{session="met"} with 1 GiB, the target "up";
- calls, bytes and latency histograms by op: exact counts of the
  client's calls while it runs and after it ends;
- the worker of the waiting client uses no CPU;
- a bad --metrics address stops the daemon with a clear error.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as w  # noqa: E402

check = w.Checks()
GIB = 1 << 30
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (-?[0-9.e+]+|NaN|[+-]Inf)$')


def get(url, method='GET'):
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers.get('Content-Type', ''), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, '', e.read().decode(errors='replace')
    except OSError as e:
        return None, '', str(e)


def parse(text):
    """{(name, labels): value} and the problems found."""
    samples, problems, typed, seen, last = {}, [], set(), set(), None
    for line in text.splitlines():
        if line.startswith('# HELP ') or line.startswith('# TYPE '):
            parts = line.split(' ', 3)
            if line.startswith('# TYPE '):
                typed.add(parts[2])
            continue
        m = SAMPLE.match(line)
        if not m:
            problems.append(line)
            continue
        name = m.group(1)
        base = re.sub(r'_(bucket|sum|count)$', '', name)
        if name not in typed and base not in typed:
            problems.append(f'no TYPE before {line}')
        if name not in typed and base in typed:
            name = base
        if name != last and name in seen:
            problems.append(f'{name} in two groups: {line}')
        seen.add(name)
        last = name
        samples[(m.group(1), m.group(2) or '')] = float(m.group(3))
    return samples, problems


def value(samples, name, **labels):
    for (n, l), v in samples.items():
        if n == name and all(f'{k}="{x}"' in l for k, x in labels.items()):
            return v
    return None


def prometheus_check(tmp, port):
    prom = shutil.which('prometheus')
    check('prometheus is installed (scripts/install-deps.sh installs it)', prom is not None)
    if not prom:
        return
    web = w.free_port()
    cfg = os.path.join(tmp, 'prometheus.yml')
    with open(cfg, 'w') as f:
        f.write('global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n'
                'scrape_configs:\n  - job_name: lupined\n    static_configs:\n'
                f'      - targets: ["127.0.0.1:{port}"]\n')
    log = open(os.path.join(tmp, 'prometheus.log'), 'w')
    p = subprocess.Popen([prom, f'--config.file={cfg}', f'--storage.tsdb.path={os.path.join(tmp, "tsdb")}',
                          f'--web.listen-address=127.0.0.1:{web}'], stdout=log, stderr=subprocess.STDOUT)
    try:
        query = urllib.parse.quote('lupine_session_memory_bytes{session="met"}')
        got = None
        deadline = time.time() + 60
        while time.time() < deadline and got is None:
            time.sleep(1)
            code, _, body = get(f'http://127.0.0.1:{web}/api/v1/query?query={query}')
            if code == 200:
                res = json.loads(body)['data']['result']
                if res:
                    got = float(res[0]['value'][1])
        check('prometheus: its query API answers the session\'s memory, 1 GiB', got is not None and got >= GIB,
              str(got))
        query = urllib.parse.quote('histogram_quantile(0.5, lupine_call_duration_seconds_bucket{op="MEMCPY_HTOD"})')
        code, _, body = get(f'http://127.0.0.1:{web}/api/v1/query?query={query}')
        res = json.loads(body)['data']['result'] if code == 200 else []
        check('prometheus: histogram_quantile over the MEMCPY_HTOD latency histogram answers',
              bool(res) and float(res[0]['value'][1]) > 0, body[:300])
        code, _, body = get(f'http://127.0.0.1:{web}/api/v1/targets')
        ok = code == 200 and any(t.get('health') == 'up' for t in json.loads(body)['data']['activeTargets'])
        check('prometheus: the lupined target is up', ok, body[:500])
    finally:
        p.terminate()
        p.wait(timeout=30)
        log.close()


def histogram_ok(samples, op):
    """The op's histogram is cumulative, ends at +Inf with its count, and
    its count is its calls."""
    buckets = sorted((float(re.search(r'le="([^"]+)"', l).group(1).replace('+Inf', 'inf')), v)
                     for (n, l), v in samples.items()
                     if n == 'lupine_call_duration_seconds_bucket' and f'op="{op}"' in l)
    count = value(samples, 'lupine_call_duration_seconds_count', op=op)
    total = value(samples, 'lupine_call_duration_seconds_sum', op=op)
    calls = value(samples, 'lupine_calls_total', op=op)
    mono = all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:]))
    return (len(buckets) == 13 and buckets[-1][0] == float('inf') and mono and buckets[-1][1] == count == calls and
            total is not None and total > 0), f'{op}: {buckets} count {count} sum {total} calls {calls}'


def op_checks_filled(samples):
    """After the fill: one cuMemAlloc, one cuCtxSynchronize, 1 GiB of
    MEMCPY_HTOD requests, each with its latency histogram."""
    check('/metrics by op: one cuMemAlloc_v2, one cuCtxSynchronize',
          value(samples, 'lupine_calls_total', op='cuMemAlloc_v2') == 1 and
          value(samples, 'lupine_calls_total', op='cuCtxSynchronize') == 1,
          str([k for k in samples if k[0] == 'lupine_calls_total']))
    check('/metrics by op: 1 GiB in MEMCPY_HTOD requests',
          (value(samples, 'lupine_call_bytes_total', op='MEMCPY_HTOD', direction='in') or 0) >= GIB)
    for op in ('cuMemAlloc_v2', 'cuCtxSynchronize', 'MEMCPY_HTOD'):
        ok, why = histogram_ok(samples, op)
        check(f'/metrics by op: the latency histogram of {op}', ok, why)


def op_checks_ended(samples, problems):
    """After the client's end: its last calls were counted too."""
    check('/metrics after the session: still the text format', not problems, str(problems[:5]))
    check('/metrics by op: the read-back counted at the session\'s end (cuMemGetInfo_v2 once, 1 GiB out of '
          'MEMCPY_DTOH, 16 calls)',
          value(samples, 'lupine_calls_total', op='cuMemGetInfo_v2') == 1 and
          value(samples, 'lupine_calls_total', op='MEMCPY_DTOH') == 16 and
          (value(samples, 'lupine_call_bytes_total', op='MEMCPY_DTOH', direction='out') or 0) >= GIB,
          str({k: v for k, v in samples.items() if 'MEMCPY_DTOH' in k[1] or 'GetInfo' in k[1]}))
    ok, why = histogram_ok(samples, 'MEMCPY_DTOH')
    check('/metrics by op: the latency histogram of MEMCPY_DTOH', ok, why)
    check('/metrics by op: 1 GiB of MEMCPY_HTOD frames, no more',
          value(samples, 'lupine_calls_total', op='MEMCPY_HTOD') is not None and
          (value(samples, 'lupine_call_bytes_total', op='MEMCPY_HTOD', direction='in') or 0) < GIB + (1 << 20),
          str(value(samples, 'lupine_calls_total', op='MEMCPY_HTOD')))


def worker_cpu_seconds(daemon_pid, secs):
    """CPU seconds the daemon's worker used over secs (None: no worker).
    A worker whose session waits should sleep in its ring; one that polled
    a wrong fd spun a whole CPU (stop 19)."""
    def ticks():
        for pid in os.listdir('/proc'):
            if not pid.isdigit():
                continue
            try:
                with open(f'/proc/{pid}/stat') as f:
                    fields = f.read().rsplit(')', 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == daemon_pid:  # ppid
                return int(fields[11]) + int(fields[12])  # utime + stime
        return None
    a = ticks()
    time.sleep(secs)
    b = ticks()
    hz = os.sysconf('SC_CLK_TCK')
    return None if a is None or b is None else (b - a) / hz


def main():
    lupined, tests, shim = sys.argv[1:4]
    with tempfile.TemporaryDirectory(prefix='lupine-metrics-') as tmp:
        sock = os.path.join(tmp, 'd.sock')
        port = w.free_port()
        env = {k: v for k, v in os.environ.items() if k not in ('NOTIFY_SOCKET', 'LISTEN_FDS', 'LD_LIBRARY_PATH')}
        log = open(os.path.join(tmp, 'd.log'), 'w')
        d = subprocess.Popen([lupined, '--backend', 'sim', '--listen', f'unix:{sock}', '--metrics',
                              f'127.0.0.1:{port}'], stdout=log, stderr=subprocess.STDOUT, env=env)
        c = None
        try:
            check('the daemon serves /metrics', w.wait_port(port, d))
            go = os.path.join(tmp, 'go')
            cenv = dict(os.environ, LUPINE_SERVER=f'unix:{sock}', LUPINE_SESSION='met', LD_LIBRARY_PATH=shim)
            c = subprocess.Popen([os.path.join(tests, 'e2e_bigsession'), '1', go], env=cenv, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            check('the client filled 1 GiB', c.stdout.readline().startswith('filled 1 GiB'))
            url = f'http://127.0.0.1:{port}/metrics'
            samples, problems, ctype = {}, [], ''
            deadline = time.time() + 15
            while time.time() < deadline:
                code, ctype, text = get(url)
                samples, problems = parse(text) if code == 200 else ({}, ['no answer'])
                if (value(samples, 'lupine_session_received_bytes_total', session='met') or 0) >= GIB:
                    break  # the worker's report after the fill
                time.sleep(0.5)
            check('/metrics: the text format, version 0.0.4', ctype.startswith('text/plain; version=0.0.4'), ctype)
            check('/metrics: every sample is NAME{LABELS} VALUE after its TYPE', not problems, str(problems[:5]))
            check('/metrics: lupine_up 1', value(samples, 'lupine_up') == 1)
            check('/metrics: one serving session', value(samples, 'lupine_sessions', state='serving') == 1)
            check('/metrics: the session holds 1 GiB',
                  (value(samples, 'lupine_session_memory_bytes', session='met') or 0) >= GIB)
            check('/metrics: its calls and received bytes',
                  (value(samples, 'lupine_session_calls_total', session='met') or 0) >= 17 and
                  (value(samples, 'lupine_session_received_bytes_total', session='met') or 0) >= GIB)
            check('/metrics: the GPU\'s temperature, power and memory',
                  value(samples, 'lupine_gpu_temperature_celsius', gpu='0') is not None and
                  value(samples, 'lupine_gpu_power_watts', gpu='0') is not None and
                  (value(samples, 'lupine_gpu_memory_total_bytes', gpu='0') or 0) > 0, str(list(samples)[:40]))
            code, _, _ = get(f'http://127.0.0.1:{port}/other')
            check('another path is 404', code == 404, str(code))
            code, _, _ = get(url, method='POST')
            check('another method is 405', code == 405, str(code))
            for junk in (b'\x00' * 4096, b'GET /' + b'a' * 100000 + b' HTTP/1.1\r\n\r\n', b'GARBAGE\r\n\r\n'):
                try:
                    with socket.create_connection(('127.0.0.1', port), timeout=5) as s:
                        s.sendall(junk)
                        s.recv(100)
                except OSError:
                    pass
            code, _, _ = get(url)
            check('garbage sent to the port leaves /metrics serving', code == 200 and d.poll() is None)
            op_checks_filled(samples)
            idle = worker_cpu_seconds(d.pid, 2.0)
            check('an idle worker (its client waiting) uses no CPU: under 5% over 2 s', idle is not None and
                  idle < 0.1, f'{idle} s of CPU in 2 s')
            prometheus_check(tmp, port)
            open(go, 'w').close()
            out, _ = c.communicate(timeout=120)
            check('the client verified its memory', c.returncode == 0 and 'verified 1 GiB' in out, out[-300:])
            # the worker's last counts come as the session ends
            deadline = time.time() + 15
            while time.time() < deadline:
                code, _, text = get(url)
                samples, problems = parse(text) if code == 200 else ({}, ['no answer'])
                if value(samples, 'lupine_calls_total', op='cuMemGetInfo_v2') is not None and \
                        (value(samples, 'lupine_call_bytes_total', op='MEMCPY_DTOH', direction='out') or 0) >= GIB:
                    break
                time.sleep(0.5)
            op_checks_ended(samples, problems)
        finally:
            if c and c.poll() is None:
                c.kill()
            d.terminate()
            d.wait(timeout=60)
            log.close()
        r = subprocess.run([lupined, '--backend', 'sim', '--listen', f'unix:{sock}', '--metrics', 'unix:/x'],
                           capture_output=True, text=True, timeout=30, env=env)
        check('--metrics unix:/x: refused, saying what it expects',
              r.returncode != 0 and 'expected HOST:PORT' in r.stderr, r.stderr[-500:])
    sys.exit(1 if check.failed else 0)


if __name__ == '__main__':
    main()
