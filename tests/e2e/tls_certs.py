# SPDX-License-Identifier: MIT
"""Test certificates, made at test time with the openssl command.

make_certs(dir) returns a dict of PEM file paths:
  ca, ca_key            the test CA
  server, server_key    signed by ca, for DNS:localhost and IP:127.0.0.1
  wronghost             signed by ca, for DNS:elsewhere.example only
  expired               signed by ca, valid only in January 2020
  untrusted             self-signed, for localhost and 127.0.0.1 (no CA knows it)
  alice, alice_key      client certificates (CN=alice, CN=bob), signed by ca
  bob, bob_key
  other_ca              a CA nobody trusts, and a client certificate it signed:
  mallory, mallory_key  CN=mallory
All keys are EC P-256 (fast to make). Standard library only.
"""
import os
import subprocess


def _run(args, cwd):
    r = subprocess.run(["openssl"] + args, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("openssl %s failed: %s" % (" ".join(args), r.stderr.strip()))


def _key(d, name):
    _run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", name + ".key"], d)
    return os.path.join(d, name + ".key")


def _ca(d, name):
    _key(d, name)
    _run(["req", "-x509", "-new", "-key", name + ".key", "-subj", "/CN=lupine test " + name, "-days", "30",
          "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
          "-out", name + ".pem"], d)
    return os.path.join(d, name + ".pem")


def _signed(d, name, ca, cn, san=None, client=False, dates=None):
    """A certificate for cn signed by CA `ca` (its .pem and .key in d);
    dates=(start, end) as YYYYMMDDHHMMSSZ uses `openssl ca` to set them."""
    _key(d, name)
    _run(["req", "-new", "-key", name + ".key", "-subj", "/CN=" + cn, "-out", name + ".csr"], d)
    ext = os.path.join(d, name + ".ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\n")
        f.write("extendedKeyUsage=%s\n" % ("clientAuth" if client else "serverAuth"))
        if san:
            f.write("subjectAltName=%s\n" % san)
    if dates is None:
        _run(["x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key", "-CAcreateserial",
              "-days", "30", "-extfile", name + ".ext", "-out", name + ".pem"], d)
    else:
        # openssl 3.0's x509 cannot set past dates; `openssl ca` can.
        db = os.path.join(d, "ca-db")
        os.makedirs(os.path.join(db, "new"), exist_ok=True)
        open(os.path.join(db, "index.txt"), "w").close()
        with open(os.path.join(db, "serial"), "w") as f:
            f.write("1000\n")
        cnf = os.path.join(d, name + ".cnf")
        with open(cnf, "w") as f:
            f.write("[ca]\ndefault_ca=t\n[t]\ndir=%s\ndatabase=$dir/index.txt\nnew_certs_dir=$dir/new\n"
                    "serial=$dir/serial\ndefault_md=sha256\npolicy=p\nunique_subject=no\n"
                    "copy_extensions=none\n[p]\ncommonName=supplied\n" % db)
        _run(["ca", "-batch", "-config", cnf, "-cert", ca + ".pem", "-keyfile", ca + ".key", "-in", name + ".csr",
              "-startdate", dates[0], "-enddate", dates[1], "-extfile", name + ".ext", "-notext",
              "-out", name + ".pem"], d)
    return os.path.join(d, name + ".pem"), os.path.join(d, name + ".key")


def make_certs(d):
    os.makedirs(d, exist_ok=True)
    c = {}
    c["ca"] = _ca(d, "ca")
    c["ca_key"] = os.path.join(d, "ca.key")
    local = "DNS:localhost,IP:127.0.0.1"
    c["server"], c["server_key"] = _signed(d, "server", os.path.join(d, "ca"), "localhost", local)
    c["wronghost"], c["wronghost_key"] = _signed(d, "wronghost", os.path.join(d, "ca"), "elsewhere.example",
                                                 "DNS:elsewhere.example")
    c["expired"], c["expired_key"] = _signed(d, "expired", os.path.join(d, "ca"), "localhost", local,
                                             dates=("20200101000000Z", "20200131000000Z"))
    _key(d, "untrusted")
    _run(["req", "-x509", "-new", "-key", "untrusted.key", "-subj", "/CN=localhost", "-days", "30",
          "-addext", "subjectAltName=" + local, "-out", "untrusted.pem"], d)
    c["untrusted"], c["untrusted_key"] = os.path.join(d, "untrusted.pem"), os.path.join(d, "untrusted.key")
    for who in ("alice", "bob"):
        c[who], c[who + "_key"] = _signed(d, who, os.path.join(d, "ca"), who, client=True)
    c["other_ca"] = _ca(d, "other_ca")
    c["mallory"], c["mallory_key"] = _signed(d, "mallory", os.path.join(d, "other_ca"), "mallory", client=True)
    return c


def renew_server(d, name):
    """A new certificate for the server (localhost), signed by the same CA
    as make_certs(d)'s: what an operator installs when the old one is due."""
    return _signed(d, name, os.path.join(d, "ca"), "localhost", "DNS:localhost,IP:127.0.0.1")


def token_line(tenant, token):
    """A line of --auth-tokens: the tenant and the SHA-256 of its token."""
    import hashlib
    return "%s %s\n" % (tenant, hashlib.sha256(token.encode()).hexdigest())
