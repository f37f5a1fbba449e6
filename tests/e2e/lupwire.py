# SPDX-License-Identifier: MIT
"""Minimal lupine wire codec for tests (mirrors abi/lupine/wire.h)."""
import socket
import struct
import time

MAGIC = 0x4C555031
VERSION = 1
HDR = struct.Struct('<IHHIIQQQ')   # len op flags lane status seq ctx reserved
F_SYNC, F_REPLY, F_MORE = 1, 2, 4
OP_HELLO, OP_GOODBYE, OP_PING, OP_HTOD, OP_DTOH = 1, 2, 3, 16, 17


def frame(op, payload=b'', flags=0, lane=0, seq=0, ctx=0, length=None, status=0):
    n = len(payload) if length is None else length
    return HDR.pack(n, op, flags, lane, status, seq, ctx, 0) + payload


def hello_payload(name, magic=MAGIC, version=VERSION, cuda=13000):
    nb = name.encode()
    return struct.pack('<IIII', magic, version, cuda, 0) + struct.pack('<H', len(nb)) + nb + bytes(16) + struct.pack('<Q', 0)


def recv_exact(sock, n):
    buf = b''
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError('closed')
        buf += chunk
    return buf


def read_frame(sock):
    h = recv_exact(sock, HDR.size)
    length, op, flags, lane, status, seq, ctx, _ = HDR.unpack(h)
    payload = recv_exact(sock, length) if length else b''
    return dict(len=length, op=op, flags=flags, lane=lane, status=status, seq=seq, ctx=ctx), payload


def connect(addr):
    if isinstance(addr, str):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(15)
    s.connect(addr)
    return s


def handshake(addr, name):
    """Connects and completes HELLO; returns (socket, reply header, arena base)."""
    s = connect(addr)
    s.sendall(frame(OP_HELLO, hello_payload(name), flags=F_SYNC))
    h, p = read_frame(s)
    if h['status'] != 0:
        raise RuntimeError(f'HELLO refused: status {h["status"]}')
    arena_base = struct.unpack_from('<Q', p, 32)[0]
    return s, h, arena_base


def wait_closed(sock, timeout=10):
    """True if the peer closes the connection (EOF or reset) within timeout."""
    sock.settimeout(timeout)
    try:
        while True:
            d = sock.recv(65536)
            if not d:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


# ---- shared by the e2e drivers

class Checks:
    """Named pass/fail lines, collected: one per test driver."""

    def __init__(self):
        self.failed = []

    def __call__(self, name, cond, detail=''):
        print(f'{"ok  " if cond else "FAIL"} {name}' + (f': {detail}' if detail and not cond else ''), flush=True)
        if not cond:
            self.failed.append(name)


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, proc=None, timeout=20):
    """Whether 127.0.0.1:port accepts a connection within timeout seconds;
    False at once if proc (a Popen) exits first."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(('127.0.0.1', port), timeout=1).close()
            return True
        except OSError:
            if proc is not None and proc.poll() is not None:
                return False
            time.sleep(0.05)
    return False
