#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""e2e: lupinectl from a client's side (issue 18): `--server URL info` and
`bench`, against sim daemons.

Usage: test_lupinectl_remote.py PATH/TO/lupined PATH/TO/lupinectl SHIM_DIR

Checks: `--server HOST:PORT info` prints the GPUs a client sees (the NVML
snapshot over TCP) in the table of `info` and, with --json, INFO's keys
plus "server"; an unreachable server is exit 1 with the reason; --server
with another command is bad usage. `bench` through the build's
libcuda.so.1 (LUPINE_LIBCUDA): the table's five rows and, with --json, its
keys, every number positive (the values are not judged: the simulator is
no GPU); progress on stderr; an unreachable server and a missing shim are
exit 1. Over TLS with a token (tls_certs.py): info and bench with the
client's LUPINE_TLS_CA and LUPINE_TOKEN; a wrong token is refused, exit 1.

Standard library only. Exit 0 on pass, 1 on failure (naming the case).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as w  # noqa: E402
import tls_certs  # noqa: E402
from test_lupinectl import Daemon  # noqa: E402

check = w.Checks()
TOKEN = "remote-test-token-0123456789"
BENCH_KEYS = ["server", "library", "device", "calls", "latency_p50_us", "latency_p99_us", "latency_mean_us",
              "launches", "launches_per_s", "copy_mib", "htod_gb_s", "dtoh_gb_s"]


def ctl(exe, *args, env=None, timeout=120):
    e = dict(os.environ)
    for k in ("LUPINE_ADMIN_SOCKET", "LUPINE_SERVER", "LUPINE_TOKEN", "LUPINE_TOKEN_FILE", "LUPINE_TLS_CA",
              "LUPINE_TLS_CERT", "LUPINE_TLS_KEY"):
        e.pop(k, None)
    e.update(env or {})
    return subprocess.run([exe] + list(args), capture_output=True, text=True, timeout=timeout, env=e)


def check_bench(ctlexe, server, env, label):
    r = ctl(ctlexe, "--json", "bench", "--server", server, "-n", "200", "--size", "4", env=env)
    try:
        js = json.loads(r.stdout)
    except ValueError:
        js = {}
    check(f"bench --json ({label}): the keys, every number positive", r.returncode == 0 and
          list(js) == BENCH_KEYS and js["server"] == server and js["calls"] == 200 and js["launches"] == 2000 and
          js["copy_mib"] == 4 and "(sim)" in js["device"] and
          all(js[k] > 0 for k in BENCH_KEYS[3:]) and js["latency_p99_us"] >= js["latency_p50_us"],
          r.stdout + r.stderr)
    check(f"bench ({label}): progress on stderr", "call latency, 200 synchronous calls" in r.stderr and
          "launch throughput, 2000 empty kernels" in r.stderr and "copy bandwidth, 4 MiB" in r.stderr, r.stderr)
    return r


def test_plain(exe, ctlexe, shim, tmp):
    d = Daemon(exe, tmp, "remote", [])
    env = {"LUPINE_LIBCUDA": os.path.join(shim, "libcuda.so.1")}
    try:
        if not d.wait_log(r"lupined \S+ ready"):
            check("daemon starts", False, d.log())
            return
        server = f"127.0.0.1:{d.port}"
        local = ctl(ctlexe, "-s", d.sock, "info")
        r = ctl(ctlexe, "--server", server, "info")
        check("--server HOST:PORT info: the GPUs, as info prints them", r.returncode == 0 and
              r.stdout.startswith(f"lupined at {server}, backend sim; driver ") and
              r.stdout.splitlines()[1:3] == local.stdout.splitlines()[1:3] and
              re.search(r"^  memory +\d+ (B|KiB|MiB|GiB) used of 16\.00 GiB$", r.stdout, re.M),
              r.stdout + r.stderr + local.stdout)
        lj = json.loads(ctl(ctlexe, "-s", d.sock, "--json", "info").stdout)
        r = ctl(ctlexe, "--server", server, "--json", "info")
        js = json.loads(r.stdout) if r.returncode == 0 else {}
        check("--server info --json: INFO's keys and \"server\"", list(js) == list(lj) + ["server"] and
              js["server"] == server and js["version"] is None and js["backend"] == "sim" and
              list(js["gpus"][0]) == list(lj["gpus"][0]) and js["gpus"][0]["uuid"] == lj["gpus"][0]["uuid"],
              r.stdout + r.stderr)
        r = ctl(ctlexe, "--server", server, "-d", "0", "--json", "info")
        check("--server -d 0 --json info: that GPU", r.returncode == 0 and json.loads(r.stdout)["index"] == 0,
              r.stdout + r.stderr)
        r = ctl(ctlexe, "--server", "127.0.0.1:1", "info")
        check("--server of nothing: exit 1, said", r.returncode == 1 and
              "cannot get the GPUs of 127.0.0.1:1: Connection refused" in r.stderr, r.stderr)
        r = ctl(ctlexe, "--server", server, "status")
        check("--server with status: bad usage", r.returncode == 2 and "info and bench only" in r.stderr, r.stderr)

        r = check_bench(ctlexe, server, env, "TCP")
        r = ctl(ctlexe, "bench", "-n", "50", "--size", "1", env=dict(env, LUPINE_SERVER=f"unix:{d.sock}"))
        rows = r.stdout.splitlines()
        check("bench (LUPINE_SERVER, UNIX socket): the table", r.returncode == 0 and len(rows) == 7 and
              rows[0].startswith(f"lupine bench against unix:{d.sock}, GPU 0: ") and rows[1].split() ==
              ["measure", "value", "unit"] and
              [re.match(r"^(.{18}) +([\d.]+)  (\S+)", x).group(1).strip() for x in rows[2:]] ==
              ["call latency p50", "call latency p99", "launch throughput", "copy HtoD", "copy DtoH"],
              r.stdout + r.stderr)
        r = ctl(ctlexe, "bench", "--server", "127.0.0.1:1", "-n", "10", env=env)
        check("bench against nothing: exit 1, said", r.returncode == 1 and
              "cannot reach lupined at 127.0.0.1:1" in r.stderr, r.stderr)
        r = ctl(ctlexe, "bench", "--server", server, env={"LUPINE_LIBCUDA": os.path.join(tmp, "none.so")})
        check("bench with no shim there: exit 1, said", r.returncode == 1 and "cannot load" in r.stderr, r.stderr)
        shimdir = os.path.dirname(env.get("LUPINE_LIBCUDA", "")) or os.path.join(os.path.dirname(ctlexe), "..", "shim")
        r = ctl(ctlexe, "bench", "--local", "-n", "10", env=dict(env, LD_LIBRARY_PATH=shimdir))
        check("bench --local finding lupine's libcuda.so.1: refused, said", r.returncode == 1 and
              "not the host's driver" in r.stderr, r.stderr)
        for bad in (["-n", "0"], ["--size", "x"], ["extra"], ["--local", "--server", server]):
            r = ctl(ctlexe, "bench", *bad, env=env)
            check(f"bench {' '.join(bad)}: bad usage", r.returncode == 2, r.stderr)
    finally:
        d.close()


def test_tls(exe, ctlexe, shim, tmp):
    certs = tls_certs.make_certs(os.path.join(tmp, "certs"))
    tokens = os.path.join(tmp, "tokens")
    with open(tokens, "w") as f:
        f.write(tls_certs.token_line("alice", TOKEN))
    d = Daemon(exe, tmp, "remote-tls", ["--tls-cert", certs["server"], "--tls-key", certs["server_key"],
                                        "--auth-tokens", tokens])
    env = {"LUPINE_LIBCUDA": os.path.join(shim, "libcuda.so.1"), "LUPINE_TLS_CA": certs["ca"],
           "LUPINE_TOKEN": TOKEN}
    try:
        if not d.wait_log(r"lupined \S+ ready"):
            check("TLS daemon starts", False, d.log())
            return
        server = f"tls://127.0.0.1:{d.port}"
        r = ctl(ctlexe, "--server", server, "info", env=env)
        check("--server tls:// info with the CA and a token", r.returncode == 0 and
              f"lupined at {server}, backend sim" in r.stdout and "GPU 0: lupine simulated GPU #0 (sim)" in r.stdout,
              r.stdout + r.stderr)
        r = ctl(ctlexe, "--server", server, "info", env=dict(env, LUPINE_TOKEN="wrong-token"))
        check("--server tls:// info with a wrong token: refused, exit 1", r.returncode == 1 and
              "refused the NVML request" in r.stderr, r.stderr)
        r = ctl(ctlexe, "--server", server, "info", env={"LUPINE_TOKEN": TOKEN})
        check("--server tls:// info without the CA: the certificate is not trusted, exit 1", r.returncode == 1 and
              "TLS" in r.stderr, r.stderr)
        check_bench(ctlexe, server, env, "TLS, token")
    finally:
        d.close()


def main():
    if len(sys.argv) != 4:
        print("usage: test_lupinectl_remote.py LUPINED LUPINECTL SHIM_DIR", file=sys.stderr)
        return 2
    exe, ctlexe, shim = (os.path.abspath(a) for a in sys.argv[1:])
    tmp = tempfile.mkdtemp(prefix="lupinectl-remote-")
    try:
        test_plain(exe, ctlexe, shim, tmp)
        test_tls(exe, ctlexe, shim, tmp)
    finally:
        if check.failed:
            print(f"logs kept in {tmp}", flush=True)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if check.failed:
        print("FAILED: " + ", ".join(check.failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
