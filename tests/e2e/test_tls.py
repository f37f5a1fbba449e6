#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""e2e: TLS 1.3, bearer tokens, tenants and the listener policy (issue 15;
docs/security.md, docs/tls.md).

Usage: test_tls.py LUPINED LUPINECTL PROGS_DIR SHIM_DIR [CASE...]

Certificates are made at test time with the openssl command
(tests/e2e/tls_certs.py). Raw-wire cases speak the TLS hand-off themselves
(tests/e2e/lupwire_tls.py); shim cases run real programs through
libcuda.so.1 with LUPINE_SERVER=tls://.
  handoff        HELLO over TLS gets HANDOFF, the second TLS session with
                 the worker gets the HELLO reply, a PING answers; a wrong
                 ticket is refused by the worker (logged);
  plaintext      a plaintext client on a TLS port is refused with a message
                 it can show, and the log says why; a TLS client on a plain
                 port is logged as such;
  policy         a network listener without TLS, or with TLS and no
                 authentication, refuses to start; --insecure starts;
                 loopback starts with neither;
  tokens         a valid token is admitted, an invalid one refused; tenants
                 cannot resume, probe or claim each other's names; a name
                 beginning with '.' is refused; --max-sessions-per-tenant;
  mtls           --tls-client-ca: no certificate or one of another CA fails
                 the handshake; alice's certificate is tenant alice; a token
                 of another tenant with it is refused;
  shim           through the shim: e2e_basic over TLS with a token; an
                 untrusted, expired or wrong-host certificate is refused
                 with a clear error; mutual TLS; NVML over TLS;
  nvml           NVML requests over TLS carry the token: a tenant sees only its
                 own sessions' processes; a wrong token is refused; e2e_nvml
                 through libnvidia-ml.so.1 over TLS;
  restarts       e2e_restart over TLS with a token through 10 durable
                 restarts, then an upgrade (lupinectl upgrade).

Standard library only. Exit 0 on pass, 1 on failure (naming the case).
"""
import json
import os
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as w  # noqa: E402
import lupwire_tls as wt  # noqa: E402
import test_supervisor_sessions as sv  # noqa: E402
import tls_certs  # noqa: E402

fail = sv.fail
CERTS = None
PROGS = SHIM = CTL = None
TOKENS = {"alice": "alice-secret-token-1", "bob": "bob-secret-token-2"}
CUDA_ERROR_NOT_PERMITTED = 800
CUDA_ERROR_DEVICE_UNAVAILABLE = 46


def ok(case, msg):
    print(f"ok   {case}: {msg}")


def tokens_file(tmp):
    path = os.path.join(tmp, "tokens")
    with open(path, "w") as f:
        f.write("# tenant sha256(token)\n")
        for t, tok in TOKENS.items():
            f.write(tls_certs.token_line(t, tok))
    return path


def tls_daemon(tmp, label, extra=(), cert="server"):
    """A lupined with TLS (the test certificate `cert`) and the tokens."""
    args = ["--tls-cert", CERTS[cert], "--tls-key", CERTS[cert + "_key"], "--auth-tokens", tokens_file(tmp)]
    d = sv.Daemon(LUPINED, tmp, label, args + list(extra))
    if not d.wait_ready():
        fail(label, "lupined did not become ready: " + d.log()[-2000:])
    return d


def ping(t, seq):
    t.sendall(w.frame(w.OP_PING, flags=w.F_SYNC, seq=seq))
    while True:
        h, _ = t.read_frame()
        if h["op"] == w.OP_PING and h["seq"] == seq:
            return h


def test_handoff(tmp):
    case = "handoff"
    d = tls_daemon(tmp, case)
    try:
        ctx = wt.client_ctx(CERTS["ca"])
        t, h, p, s = wt.connect(d.port, ctx, "job", auth=TOKENS["alice"])
        if h["op"] != w.OP_HELLO or h["status"] != 0:
            fail(case, f"HELLO over TLS: op {h['op']} status {h['status']} {wt.refusal_text(p)!r}")
            return
        ok(case, "HELLO over TLS: HANDOFF, second TLS session, HELLO reply")
        if ping(t, 1)["status"] != 0:
            fail(case, "PING over the worker's TLS session failed")
        else:
            ok(case, "PING answered over the worker's TLS session")
        token = p[16:32]
        s.close()
        # a resume over TLS reaches the running worker through the same hand-off
        t, h, p, s = wt.connect(d.port, ctx, "job", token=token, last_seq=1, auth=TOKENS["alice"])
        if h["op"] != w.OP_HELLO or h["status"] != 0:
            fail(case, f"resume over TLS refused: {wt.refusal_text(p)!r}")
        else:
            ok(case, "resume over TLS")
        s.close()
        try:
            t, h, p, s = wt.connect(d.port, ctx, "job2", auth=TOKENS["alice"], ticket_fn=lambda k: bytes(16))
            fail(case, f"a wrong HANDOFF ticket was answered: op {h['op']} status {h['status']}")
        except (ConnectionError, OSError):
            if d.wait_log(r"wrong HANDOFF ticket", 5):
                ok(case, "a wrong HANDOFF ticket: the worker closes the connection and says why")
            else:
                fail(case, "no log line about the wrong ticket")
    finally:
        d.stop()
        d.close()


def test_plaintext(tmp):
    case = "plaintext"
    d = tls_daemon(tmp, case)
    try:
        s = socket.create_connection(("127.0.0.1", d.port), timeout=10)
        s.sendall(w.frame(w.OP_HELLO, w.hello_payload("plain"), flags=w.F_SYNC))
        h, p = w.read_frame(s)
        msg = wt.refusal_text(p)
        if h["status"] == 0 or "TLS port" not in msg:
            fail(case, f"plaintext HELLO on a TLS port: status {h['status']} {msg!r}")
        else:
            ok(case, f"plaintext client on a TLS port refused: {msg!r}")
        if not d.wait_log(r"this is a TLS port and the client spoke plaintext", 5):
            fail(case, "the daemon did not log the plaintext client")
    finally:
        d.stop()
        d.close()
    d = sv.Daemon(LUPINED, tmp, case + "-plain", [])
    try:
        d.wait_ready()
        ctx = wt.client_ctx(CERTS["ca"])
        try:
            wt.connect(d.port, ctx, "x")
            fail(case, "a TLS handshake with a plaintext port succeeded")
        except (ConnectionError, OSError, ssl_error()):
            pass
        if d.wait_log(r"the client speaks TLS, and this port does not", 5):
            ok(case, "TLS client on a plaintext port: logged as such")
        else:
            fail(case, "no log line about the TLS client on a plain port")
    finally:
        d.stop()
        d.close()


def ssl_error():
    import ssl
    return ssl.SSLError


def start_fails(tmp, label, args, want):
    log = os.path.join(tmp, label + ".log")
    with open(log, "wb") as f:
        try:
            r = subprocess.run([LUPINED, "--backend", "sim"] + args, stdout=f, stderr=f, timeout=15)
            rc = r.returncode
        except subprocess.TimeoutExpired:
            rc = None
    text = open(log, "rb").read().decode("utf-8", "replace")
    return rc, want in text, text


def test_policy(tmp):
    case = "policy"
    port = sv.free_port()
    rc, said, text = start_fails(tmp, "policy-plain", ["--listen", f"0.0.0.0:{port}"], "refusing to listen on")
    if rc in (0, None) or not said:
        fail(case, f"a network listener without TLS started (exit {rc}): {text[-500:]}")
    else:
        ok(case, "a network listener without TLS refuses to start, saying why")
    rc, said, text = start_fails(tmp, "policy-noauth", ["--listen", f"0.0.0.0:{port}", "--tls-cert",
                                                        CERTS["server"], "--tls-key", CERTS["server_key"]],
                                 "has no authentication")
    if rc in (0, None) or not said:
        fail(case, f"a network TLS listener without authentication started (exit {rc}): {text[-500:]}")
    else:
        ok(case, "a network TLS listener without authentication refuses to start")
    d = sv.Daemon(LUPINED, tmp, "policy-insecure", ["--listen", f"0.0.0.0:{port}", "--insecure"])
    try:
        if d.wait_ready() and d.wait_log(r"INSECURE \(--insecure\): 0\.0\.0\.0:\d+ is reachable", 2):
            ok(case, "--insecure starts, and the log says so")
        else:
            fail(case, "--insecure did not start, or did not say so: " + d.log()[-800:])
    finally:
        d.stop()
        d.close()
    d = sv.Daemon(LUPINED, tmp, "policy-loopback", [])
    try:
        if d.wait_ready():
            ok(case, "loopback starts with neither TLS nor authentication")
        else:
            fail(case, "a loopback listener did not start")
    finally:
        d.stop()
        d.close()


def test_tokens(tmp):
    case = "tokens"
    d = tls_daemon(tmp, case, ["--max-sessions-per-tenant", "2"])
    ctx = wt.client_ctx(CERTS["ca"])
    socks = []
    try:
        t, h, p, s = wt.connect(d.port, ctx, "job", auth="not-a-token")
        if h["status"] != CUDA_ERROR_NOT_PERMITTED or "not valid" not in wt.refusal_text(p):
            fail(case, f"an invalid token: status {h['status']} {wt.refusal_text(p)!r}")
        else:
            ok(case, "an invalid token is refused (CUDA_ERROR_NOT_PERMITTED)")
        t, h, p, s = wt.connect(d.port, ctx, "job")
        if h["status"] == 0 or "authentication" not in wt.refusal_text(p):
            # loopback TLS without a token: anonymous is allowed on loopback
            pass
        socks.append(s)
        t, h, p, s = wt.connect(d.port, ctx, "job", auth=TOKENS["alice"])
        if h["status"] != 0:
            fail(case, f"alice's new session refused: {wt.refusal_text(p)!r}")
            return
        alice_token = p[16:32]
        socks.append(s)
        # bob: a resume of alice's name looks exactly like one of a name nobody has
        probes = []
        for name in ("job", "nobody-has-this"):
            t, h, p, s = wt.connect(d.port, ctx, name, token=alice_token, auth=TOKENS["bob"])
            probes.append((h["status"], wt.refusal_text(p).replace(name, "NAME")))
            s.close()
        if probes[0] != probes[1] or probes[0][0] == 0:
            fail(case, f"bob can tell alice's name from a free one: {probes}")
        else:
            ok(case, f"bob cannot resume or probe alice's session name: {probes[0]}")
        t, h, p, s = wt.connect(d.port, ctx, "job", auth=TOKENS["bob"])
        if h["status"] != 0:
            fail(case, f"bob could not start his own session named like alice's: {wt.refusal_text(p)!r}")
        else:
            ok(case, "bob's 'job' is his own session: names are per tenant")
        socks.append(s)
        t, h, p, s = wt.connect(d.port, ctx, ".t0123456789abcdef.job", auth=TOKENS["bob"])
        if h["status"] == 0 or "reserved" not in wt.refusal_text(p):
            fail(case, f"a name beginning with '.' was accepted: {wt.refusal_text(p)!r}")
        else:
            ok(case, "names beginning with '.' are reserved")
        t, h, p, s = wt.connect(d.port, ctx, "job-b", auth=TOKENS["alice"])
        socks.append(s)
        t, h, p, s = wt.connect(d.port, ctx, "job-c", auth=TOKENS["alice"])
        if h["status"] == 0 or "max-sessions-per-tenant" not in wt.refusal_text(p):
            fail(case, f"alice's third session with --max-sessions-per-tenant 2: {wt.refusal_text(p)!r}")
        else:
            ok(case, "--max-sessions-per-tenant 2: the third session is refused, saying why")
        if not d.wait_log(r"limit hit: this tenant has 2 sessions", 3):
            fail(case, "the per-tenant limit was not logged")
    finally:
        for s in socks:
            s.close()
        d.stop()
        d.close()


def test_mtls(tmp):
    case = "mtls"
    d = tls_daemon(tmp, case, ["--tls-client-ca", CERTS["ca"]])
    try:
        for label, ctx in (("no certificate", wt.client_ctx(CERTS["ca"])),
                           ("a certificate of another CA", wt.client_ctx(CERTS["ca"], CERTS["mallory"],
                                                                          CERTS["mallory_key"]))):
            try:
                t, h, p, s = wt.connect(d.port, ctx, "m")
                fail(case, f"{label}: admitted (status {h['status']})")
            except (ConnectionError, OSError, ssl_error()):
                ok(case, f"{label}: the handshake fails")
        if not d.wait_log(r"TLS handshake failed", 3):
            fail(case, "the failed handshakes were not logged")
        actx = wt.client_ctx(CERTS["ca"], CERTS["alice"], CERTS["alice_key"])
        t, h, p, s = wt.connect(d.port, actx, "m")
        if h["status"] != 0 or not d.wait_log(r"of tenant alice: new", 3):
            fail(case, f"alice's certificate: status {h['status']} {wt.refusal_text(p)!r}")
        else:
            ok(case, "alice's certificate: tenant alice")
        s.close()
        t, h, p, s = wt.connect(d.port, actx, "m2", auth=TOKENS["bob"])
        if h["status"] == 0 or "different tenants" not in wt.refusal_text(p):
            fail(case, f"alice's certificate with bob's token: {wt.refusal_text(p)!r}")
        else:
            ok(case, "alice's certificate with bob's token is refused")
        s.close()
    finally:
        d.stop()
        d.close()


def shim_env(port, name, ca=None, token=None, cert=None, host="127.0.0.1", extra=None):
    env = dict(os.environ)
    env["LUPINE_SERVER"] = f"tls://{host}:{port}"
    env["LUPINE_SESSION"] = name
    env["LUPINE_RECONNECT_TIMEOUT"] = "60"
    env["LUPINE_TLS_CA"] = ca or CERTS["ca"]
    for k in ("LUPINE_TOKEN", "LUPINE_TOKEN_FILE", "LUPINE_TLS_CERT", "LUPINE_TLS_KEY"):
        env.pop(k, None)
    if token:
        env["LUPINE_TOKEN"] = token
    if cert:
        env["LUPINE_TLS_CERT"], env["LUPINE_TLS_KEY"] = CERTS[cert], CERTS[cert + "_key"]
    env["LD_LIBRARY_PATH"] = SHIM + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env.update(extra or {})
    return env


def run_prog(name, env, *args, timeout=120):
    r = subprocess.run([os.path.join(PROGS, name)] + list(args), env=env, capture_output=True, text=True,
                       timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def test_shim(tmp):
    case = "shim"
    d = tls_daemon(tmp, case)
    try:
        rc, out, err = run_prog("e2e_basic", shim_env(d.port, "basic", token=TOKENS["alice"]))
        if rc != 0:
            fail(case, f"e2e_basic over TLS with a token: exit {rc}: {err[-1500:]}")
        else:
            ok(case, "e2e_basic over TLS with a token")
        if not d.wait_log(r"of tenant alice: new", 3):
            fail(case, "the session was not alice's")
        rc, out, err = run_prog("e2e_basic", shim_env(d.port, "basic2", token="wrong"), timeout=60)
        if rc == 0 or "not valid" not in err:
            fail(case, f"a wrong token through the shim: exit {rc}: {err[-800:]}")
        else:
            ok(case, "a wrong token through the shim: refused, saying why")
        rc, out, err = run_prog("e2e_basic", shim_env(d.port, "b3", token=TOKENS["alice"], host="localhost"))
        if rc != 0:
            fail(case, f"tls://localhost (DNS name): exit {rc}: {err[-800:]}")
        else:
            ok(case, "tls://localhost verifies the DNS name")
        rc, out, err = run_prog("e2e_basic", shim_env(d.port, "b4", ca=CERTS["other_ca"], token=TOKENS["alice"]),
                                timeout=60)
        if rc == 0 or "certificate" not in err:
            fail(case, f"a server certificate of an untrusted CA: exit {rc}: {err[-800:]}")
        else:
            ok(case, "a server certificate the client does not trust is refused")
        # plaintext shim on a TLS port: a clear error on the client side too
        env = shim_env(d.port, "b5")
        env["LUPINE_SERVER"] = f"127.0.0.1:{d.port}"
        rc, out, err = run_prog("e2e_basic", env, timeout=60)
        if rc == 0 or "TLS port" not in err:
            fail(case, f"a plaintext shim on a TLS port: exit {rc}: {err[-800:]}")
        else:
            ok(case, "a plaintext shim on a TLS port: the client says it is a TLS port")
    finally:
        d.stop()
        d.close()
    for cert, what in (("expired", "expired"), ("wronghost", "wrong host name"), ("untrusted", "self-signed")):
        d = tls_daemon(tmp, f"{case}-{cert}", cert=cert)
        try:
            rc, out, err = run_prog("e2e_basic", shim_env(d.port, "x", token=TOKENS["alice"]), timeout=60)
            if rc == 0 or "certificate" not in err:
                fail(case, f"a server certificate that is {what}: exit {rc}: {err[-800:]}")
            else:
                ok(case, f"a server certificate that is {what} is refused: "
                         f"{[ln for ln in err.splitlines() if 'certificate' in ln][:1]}")
        finally:
            d.stop()
            d.close()
    d = tls_daemon(tmp, case + "-mtls", ["--tls-client-ca", CERTS["ca"]])
    try:
        rc, out, err = run_prog("e2e_basic", shim_env(d.port, "m", cert="alice"))
        if rc != 0 or not d.wait_log(r"of tenant alice: new", 3):
            fail(case, f"mutual TLS through the shim: exit {rc}: {err[-800:]}")
        else:
            ok(case, "mutual TLS through the shim: tenant alice")
        rc, out, err = run_prog("e2e_basic", shim_env(d.port, "m2"), timeout=60)
        if rc == 0:
            fail(case, "no client certificate through the shim was admitted")
        else:
            ok(case, "no client certificate: refused")
    finally:
        d.stop()
        d.close()


def nvml_procs(port, ctx, token):
    """The processes per device an NVML request over TLS with token gets
    (abi/lupine/nvml_wire.h): a list of pid lists, or the refusal text."""
    s = socket.create_connection(("127.0.0.1", port), timeout=15)
    t = wt.Tls(s, ctx, "localhost")
    t.handshake()
    tok = token.encode()
    req = struct.pack("<IIII", 0x4c4e5631, 2, 1, 1) + struct.pack("<H", len(tok)) + tok  # NVML wire version 2 (abi/lupine/nvml_wire.h)
    t.sendall(w.frame(6, req, flags=w.F_SYNC))
    h, p = t.read_frame()
    s.close()
    if h["status"] != 0:
        return wt.refusal_text(p)
    off = 24
    n_dev = struct.unpack_from("<I", p, 12)[0]

    def skip_entries(off):
        n = struct.unpack_from("<I", p, off)[0]
        off += 4
        for _ in range(n):
            _, ln, _ = struct.unpack_from("<HHI", p, off)
            off += 8 + ln
        return off
    off = skip_entries(off)
    procs = []
    for _ in range(n_dev):
        off = skip_entries(off)
        np_ = struct.unpack_from("<I", p, off)[0]
        off += 4
        procs.append([struct.unpack_from("<IQ", p, off + 12 * i)[0] for i in range(np_)])
        off += 12 * np_
    return procs


def test_nvml(tmp):
    case = "nvml"
    d = tls_daemon(tmp, case)
    try:
        ctx = wt.client_ctx(CERTS["ca"])
        t, h, p, s = wt.connect(d.port, ctx, "gpu-job", auth=TOKENS["alice"])
        m = d.wait_log(r"session (\.t[0-9a-f]{16}\.gpu-job) \(slot \d+\) served by worker (\d+)", 5)
        pid = int(m.group(2)) if m else -1
        a, b = nvml_procs(d.port, ctx, TOKENS["alice"]), nvml_procs(d.port, ctx, TOKENS["bob"])
        if not isinstance(a, list) or [pid] not in a or any(b_ for b_ in b):
            fail(case, f"NVML processes: alice sees {a}, bob sees {b}, alice's worker is {pid}")
        else:
            ok(case, f"NVML over TLS: alice sees her worker {pid}, bob sees no process")
        r = nvml_procs(d.port, ctx, "wrong")
        if isinstance(r, list) or "not valid" not in r:
            fail(case, f"NVML with a wrong token: {r}")
        else:
            ok(case, "NVML with a wrong token is refused")
        s.close()
        rc, out, err = run_prog("e2e_nvml", shim_env(d.port, "n", token=TOKENS["bob"]), "query", "1")
        if rc != 0 or "PASSED" not in out:
            fail(case, f"e2e_nvml through the shim over TLS with a token: exit {rc}: {out[-600:]} {err[-800:]}")
        else:
            ok(case, "e2e_nvml through libnvidia-ml.so.1 over TLS with a token")
    finally:
        d.stop()
        d.close()


def presented_cert(port):
    """The DER certificate lupined presents on port now."""
    import ssl
    ctx = ssl.create_default_context(cafile=CERTS["ca"])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as t:
            return t.getpeercert(binary_form=True)


def test_restarts(tmp):
    """e2e_restart (a verified counter workload) over TLS with a token
    through 10 SIGTERM restarts, then two upgrades (SIGHUP); before the
    second, the certificate files are replaced by a renewed certificate,
    which the upgraded lupined must present without ending the session."""
    import shutil
    import ssl
    case = "restarts"
    ck = os.path.join(tmp, "ck-tls")
    port = sv.free_port()
    cert, key = os.path.join(tmp, "live.pem"), os.path.join(tmp, "live.key")
    shutil.copy(CERTS["server"], cert)
    shutil.copy(CERTS["server_key"], key)
    args = ["--listen", f"127.0.0.1:{port}", "--tls-cert", cert, "--tls-key", key,
            "--auth-tokens", tokens_file(tmp), "--checkpoint-dir", ck, "--session-ttl", "120",
            "--drain-timeout", "30"]
    log_path = os.path.join(tmp, "restarts.log")
    logf = open(log_path, "ab")
    env = dict(os.environ)
    for k in ("LD_LIBRARY_PATH", "NOTIFY_SOCKET", "LISTEN_FDS"):
        env.pop(k, None)

    def start():
        p = subprocess.Popen([LUPINED, "--backend", "sim"] + args, stdout=logf, stderr=logf, env=env)
        w.wait_port(port, p, 20)
        return p

    d = start()
    restarts = 10
    kernels = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels")
    client = subprocess.Popen([os.path.join(PROGS, "e2e_restart"), kernels, str(40 * restarts + 120), "15"],
                              env=shim_env(port, "tls-restart", token=TOKENS["bob"],
                                           extra={"LUPINE_RECONNECT_TIMEOUT": "120"}),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    import random
    rng = random.Random(20261202)
    clean = 0
    try:
        for _ in range(restarts):
            time.sleep(rng.uniform(0.3, 1.0))
            if client.poll() is not None:
                break
            d.send_signal(15)
            try:
                clean += d.wait(timeout=60) == 0
            except subprocess.TimeoutExpired:
                d.kill()
            d = start()
        renewed = None
        for i in range(2):
            time.sleep(0.8)
            if i == 1:  # the operator renews the certificate, then upgrades
                new_cert, new_key = tls_certs.renew_server(os.path.dirname(CERTS["ca"]), "renewed")
                shutil.copy(new_key, key + ".new")
                shutil.copy(new_cert, cert + ".new")
                os.replace(key + ".new", key)
                os.replace(cert + ".new", cert)
                renewed = ssl.PEM_cert_to_DER_cert(open(new_cert).read())
            if client.poll() is None:
                d.send_signal(1)  # SIGHUP: an upgrade (re-exec)
        out, err = client.communicate(timeout=600)
        presented = presented_cert(port)
    finally:
        if client.poll() is None:
            client.kill()
        d.send_signal(15)
        try:
            d.wait(timeout=60)
        except subprocess.TimeoutExpired:
            d.kill()
        logf.close()
    text = open(log_path, errors="replace").read()
    if clean != restarts:
        fail(case, f"{clean} of {restarts} drains over TLS exited 0")
    elif text.count("restored checkpoint epoch") < restarts:
        fail(case, "not every restart restored the session: " + text[-2000:])
    elif text.count("upgrade: re-executing") < 2:
        fail(case, "the two upgrades did not happen: " + text[-2000:])
    elif client.returncode != 0 or "counter exact" not in out:
        fail(case, f"the client over TLS: exit {client.returncode}: {out[-800:]} {err[-2000:]}")
    elif presented != renewed:
        fail(case, "after the upgrade lupined still presents the old certificate")
    else:
        ok(case, f"{restarts} SIGTERM restarts and 2 upgrades over TLS with a token: counter exact; "
                 "the renewed certificate is presented after the upgrade, the session went on")


def test_fleet(tmp):
    """Two TLS daemons as two hosts on one store (docs/fleet.md): the
    verified workload, its LUPINE_SERVER naming tls://A only, is migrated
    A -> B (the GOODBYE's tls:// endpoint), then B drains for good and A,
    running, adopts it back on demand; every step over TLS with a token."""
    case = "fleet"
    ck = os.path.join(tmp, "ck-fleet")
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "NOTIFY_SOCKET", "LISTEN_FDS")}
    hosts = []
    for label in ("tlsA", "tlsB"):
        port = sv.free_port()
        sock = os.path.join(tmp, f"{label}.sock")
        logp = os.path.join(tmp, f"{label}.log")
        p = subprocess.Popen([LUPINED, "--backend", "sim", "--listen", f"127.0.0.1:{port}", "--listen", f"unix:{sock}",
                              "--tls-cert", CERTS["server"], "--tls-key", CERTS["server_key"], "--auth-tokens",
                              tokens_file(tmp), "--checkpoint-dir", ck, "--host-id", label, "--session-ttl", "120",
                              "--drain-timeout", "30", "--health-policy", "off"],
                             stdout=open(logp, "ab"), stderr=subprocess.STDOUT, env=env)
        w.wait_port(port, p, 20)
        hosts.append(dict(port=port, sock=sock, log=logp, proc=p))
    a, b = hosts
    kernels = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels")
    client = subprocess.Popen([os.path.join(PROGS, "e2e_restart"), kernels, "600", "15"],
                              env=shim_env(a["port"], "tls-fleet", token=TOKENS["bob"],
                                           extra={"LUPINE_RECONNECT_TIMEOUT": "120"}),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)
        st = subprocess.run([CTL, "--socket", a["sock"], "--json", "status"], capture_output=True, text=True,
                            timeout=60)
        names = [x.get("name") for x in json.loads(st.stdout).get("sessions", [])] if st.returncode == 0 else []
        key = next((n for n in names if n and n.endswith("tls-fleet")), None)
        if not key:
            fail(case, f"the session is not on A: {st.stdout[-800:]} {st.stderr[-400:]}")
            return
        r = subprocess.run([CTL, "--socket", a["sock"], "migrate", key, "--to", f"tls://127.0.0.1:{b['port']}"],
                           capture_output=True, text=True, timeout=120)
        moved = r.returncode == 0
        deadline = time.time() + 60
        while time.time() < deadline and "adopted from the checkpoint store" not in open(b["log"]).read():
            time.sleep(0.1)
        on_b = "adopted from the checkpoint store" in open(b["log"]).read()
        time.sleep(1.0)
        b["proc"].send_signal(15)
        b["proc"].wait(timeout=60)
        deadline = time.time() + 60
        while time.time() < deadline and "adopted from the checkpoint store" not in open(a["log"]).read():
            time.sleep(0.1)
        back = "adopted from the checkpoint store" in open(a["log"]).read()
        out, err = client.communicate(timeout=300)
    finally:
        if client.poll() is None:
            client.kill()
        for h in hosts:
            if h["proc"].poll() is None:
                h["proc"].send_signal(15)
                h["proc"].wait(timeout=60)
    if not moved or not on_b:
        fail(case, f"the migration to tls://B: {r.stdout} {r.stderr} " + open(b["log"]).read()[-2000:])
    elif not back:
        fail(case, "A did not adopt it after B drained: " + open(a["log"]).read()[-2000:])
    elif client.returncode != 0 or "counter exact" not in out or f"moves to tls://127.0.0.1:{b['port']}" not in err:
        fail(case, f"the client over TLS: exit {client.returncode}: {out[-600:]} {err[-2000:]}")
    else:
        ok(case, "over TLS with a token: migrated A -> B by the GOODBYE's tls:// endpoint, then B drained for good "
                 "and A adopted it on demand; counter exact")


CASES = {
    "handoff": test_handoff,
    "plaintext": test_plaintext,
    "policy": test_policy,
    "tokens": test_tokens,
    "mtls": test_mtls,
    "shim": test_shim,
    "nvml": test_nvml,
    "restarts": test_restarts,
    "fleet": test_fleet,
}


def main():
    global LUPINED, CTL, PROGS, SHIM, CERTS
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 1
    LUPINED, CTL = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    PROGS, SHIM = (os.path.abspath(a) for a in sys.argv[3:5])
    names = sys.argv[5:] or list(CASES)

    def call(name, tmp):
        global CERTS
        if CERTS is None:
            CERTS = tls_certs.make_certs(os.path.join(tmp, "certs"))
        CASES[name](tmp)
    return sv.run_cases(names, "lupined-tls-", call)


if __name__ == "__main__":
    sys.exit(main())
