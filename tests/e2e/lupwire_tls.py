# SPDX-License-Identifier: MIT
"""lupine's TLS connection protocol for raw-wire tests (abi/lupine/wire.h,
"TLS"; docs/tls.md): a first TLS session with the supervisor, HELLO, the
HANDOFF answer with its ticket, then a second TLS session on the same
socket with the worker, which is sent the ticket.

TLS runs over memory BIOs (ssl.SSLObject), so that the first session can
be dropped without a closure alert and the socket reused for the second,
and so that no byte is read from the socket beyond what a session needs.
"""
import socket
import ssl
import struct

import lupwire as w

OP_HANDOFF = 7
HELLO_AUTH = 0x4


class Tls:
    """One TLS session over an already connected socket."""

    def __init__(self, sock, ctx, host):
        self.sock = sock
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.inc, self.out, server_hostname=host)

    def _flush(self):
        data = self.out.read()
        if data:
            self.sock.sendall(data)

    def _fill(self):
        # one TLS record at most: never read past what this session needs
        hdr = w.recv_exact(self.sock, 5)
        n = struct.unpack(">H", hdr[3:5])[0]
        self.inc.write(hdr + w.recv_exact(self.sock, n))

    def handshake(self):
        while True:
            try:
                self.obj.do_handshake()
                self._flush()
                return
            except ssl.SSLWantReadError:
                self._flush()
                self._fill()

    def sendall(self, data):
        self.obj.write(data)
        self._flush()

    def recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            try:
                chunk = self.obj.read(n - len(buf))
                if not chunk:
                    raise ConnectionError("the TLS stream ended")
                buf += chunk
            except ssl.SSLWantReadError:
                self._flush()
                self._fill()
        return buf

    def read_frame(self):
        h = self.recv_exact(w.HDR.size)
        length, op, flags, lane, status, seq, ctx, _ = w.HDR.unpack(h)
        payload = self.recv_exact(length) if length else b""
        return dict(len=length, op=op, flags=flags, lane=lane, status=status, seq=seq, ctx=ctx), payload


def client_ctx(ca, cert=None, key=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_verify_locations(ca)
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


def hello_payload(name, token=bytes(16), last_seq=0, auth=None):
    nb = name.encode()
    flags = HELLO_AUTH if auth else 0
    p = (struct.pack("<IIII", w.MAGIC, w.VERSION, 13000, flags) + struct.pack("<H", len(nb)) + nb + token +
         struct.pack("<Q", last_seq))
    if auth:
        a = auth.encode()
        p += struct.pack("<H", len(a)) + a
    return p


def connect(port, ctx, name, token=bytes(16), auth=None, last_seq=0, ticket_fn=None, host="localhost"):
    """A full TLS connection: returns (Tls of the worker session or of the
    supervisor's if refused, reply header, reply payload, socket).
    ticket_fn(ticket) may change the ticket sent (a test of a wrong one)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=15)
    t = Tls(s, ctx, host)
    t.handshake()
    t.sendall(w.frame(w.OP_HELLO, hello_payload(name, token, last_seq, auth), flags=w.F_SYNC, lane=0, seq=0))
    h, p = t.read_frame()
    if h["op"] != OP_HANDOFF:
        return t, h, p, s
    ticket = ticket_fn(p) if ticket_fn else p
    t2 = Tls(s, ctx, host)  # the first session is dropped without a closure alert
    t2.handshake()
    t2.sendall(w.frame(OP_HANDOFF, ticket, flags=w.F_SYNC, lane=0, seq=0))
    h, p = t2.read_frame()
    return t2, h, p, s


def refusal_text(p):
    if len(p) < 2:
        return ""
    n = struct.unpack_from("<H", p)[0]
    return p[2:2 + n].decode("utf-8", "replace")
