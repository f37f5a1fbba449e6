#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Graph host nodes: what the worker does with bad input on the wire.

A raw client (no shim) on lupined with the simulator sends the host node
ops with what a shim would never send, and checks the worker's answers:
a host node with token 0, a captured host function with token 0 and on a
stream that is not capturing, a segment that does not exist, the plan of
an exec that does not exist, a split exec launched as a whole, and an
exec host node set to token 0. The session must stay usable after each.

usage: test_graph_host_badinput.py LUPINED
"""
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lupwire as W  # noqa: E402

INVALID_VALUE, INVALID_HANDLE, ILLEGAL_STATE = 1, 400, 401
HOST = 3  # CU_GRAPH_NODE_TYPE_HOST
OP = dict(retain=283, graph_create=485, launch=489, add_node=492, node_set=501, instantiate=504, launch_seg=505,
          plan=506, host_capture=507, ctx_sync=280)
CTX = 0x10000  # LUP_PRIMARY_CTX_ID(0)
FIRST = 0x1000000  # LUP_FIRST_HANDLE_ID

check = W.Checks()


class Client:
    def __init__(self, addr):
        self.s, _, _ = W.handshake(addr, 'hostbad')
        self.seq = 0
        self.next_id = FIRST + 0x100 * 16

    def mint(self):
        self.next_id += 16
        return self.next_id

    def call(self, op, payload, sync=True, ctx=CTX):
        self.seq += 1
        self.s.sendall(W.frame(op, payload, flags=W.F_SYNC if sync else 0, seq=self.seq, ctx=ctx))
        if not sync:
            return None, b''
        h, p = W.read_frame(self.s)
        return h['status'], p


def u64(*v):
    return struct.pack('<%dQ' % len(v), *v)


def add_node(c, graph, kind, a=0):
    node = c.mint()
    st, _ = c.call(OP['add_node'], u64(node, graph) + struct.pack('<I', kind) + u64(a, 0, 0, 0, 0, 0))
    return st, node


def run(addr):
    c = Client(addr)
    st, _ = c.call(OP['retain'], struct.pack('<i', 0), ctx=0)
    check('the primary context is retained', st == 0, st)
    g = c.mint()
    c.call(OP['graph_create'], u64(g) + struct.pack('<I', 0), sync=False)
    st, _ = add_node(c, g, HOST, 0)
    check('a host node with token 0: CUDA_ERROR_INVALID_VALUE', st == INVALID_VALUE, st)
    st, host = add_node(c, g, HOST, 7)
    check('a host node with a token is added', st == 0, st)
    st, _ = c.call(OP['host_capture'], u64(0, 0))
    check('a captured host function with token 0: CUDA_ERROR_INVALID_VALUE', st == INVALID_VALUE, st)
    st, _ = c.call(OP['host_capture'], u64(0, 9))
    check('a captured host function on a stream not capturing: CUDA_ERROR_ILLEGAL_STATE', st == ILLEGAL_STATE, st)
    st, _ = c.call(OP['plan'], u64(FIRST + 0x7770 * 16) + struct.pack('<I', 0))
    check('the plan of an exec that does not exist: CUDA_ERROR_INVALID_HANDLE', st == INVALID_HANDLE, st)

    x = c.mint()
    st, p = c.call(OP['instantiate'], u64(x, g, 0))
    n = struct.unpack('<I', p[:4])[0] if st == 0 and len(p) >= 4 else None
    # one level: no segment (the graph is the host node alone), one host node
    check('an exec of a lone host node has a plan of 3 words', st == 0 and n == 3, (st, p))
    st, p = c.call(OP['plan'], u64(x) + struct.pack('<I', 0))
    words = struct.unpack('<17Q', p[:136]) if st == 0 and len(p) >= 136 else None
    check('its plan: no segment, one host node, its id and its token',
          words is not None and words[0] == 3 and words[1:4] == (2, host, 7), (st, words))
    st, p = c.call(OP['plan'], u64(x) + struct.pack('<I', 0xffffffff))
    words = struct.unpack('<17Q', p[:136]) if st == 0 and len(p) >= 136 else None
    check('a page past the plan is zeros', words is not None and words[0] == 3 and not any(words[1:]),
          (st, words))

    c.call(OP['launch_seg'], u64(x) + struct.pack('<I', 0) + u64(0), sync=False)
    st, _ = c.call(OP['ctx_sync'], b'')
    check('a segment that does not exist: CUDA_ERROR_INVALID_VALUE (latched)', st == INVALID_VALUE, st)
    c.call(OP['launch_seg'], u64(x) + struct.pack('<I', 1 << 31) + u64(0), sync=False)
    st, _ = c.call(OP['ctx_sync'], b'')
    check('a segment past the plan: CUDA_ERROR_INVALID_VALUE (latched)', st == INVALID_VALUE, st)
    c.call(OP['launch'], u64(x, 0), sync=False)
    st, _ = c.call(OP['ctx_sync'], b'')
    check('an exec with host nodes launched as a whole is refused (latched)', st == INVALID_VALUE, st)
    st, _ = c.call(OP['node_set'], u64(x, host) + struct.pack('<I', HOST) + u64(0, 0, 0, 0, 0, 0))
    check('an exec host node set to token 0: CUDA_ERROR_INVALID_VALUE', st == INVALID_VALUE, st)
    st, _ = c.call(OP['node_set'], u64(x, host) + struct.pack('<I', HOST) + u64(11, 0, 0, 0, 0, 0))
    check('an exec host node set to a token', st == 0, st)
    st, p = c.call(OP['plan'], u64(x) + struct.pack('<I', 0))
    words = struct.unpack('<17Q', p[:136]) if st == 0 and len(p) >= 136 else None
    check('the plan has the new token', words is not None and words[1:4] == (2, host, 11), (st, words))
    st, _ = c.call(OP['ctx_sync'], b'')
    check('the session is still usable', st == 0, st)
    c.s.close()


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    lupined = sys.argv[1]
    port = W.free_port()
    with tempfile.TemporaryDirectory(prefix='lupine-hostbad-') as tmp:
        log = open(os.path.join(tmp, 'd.log'), 'w')
        d = subprocess.Popen([lupined, '--backend', 'sim', '--listen', f'127.0.0.1:{port}', '--checkpoint-dir',
                              os.path.join(tmp, 'ck')], stdout=log, stderr=subprocess.STDOUT)
        try:
            check('the daemon starts', W.wait_port(port, d))
            run(('127.0.0.1', port))
        except Exception as e:  # a harness failure is a test failure
            check('harness', False, repr(e))
        finally:
            d.terminate()
            d.wait(timeout=30)
            log.close()
            with open(os.path.join(tmp, 'd.log')) as f:
                text = f.read()
            check('the worker logged the refused whole launch', 'launched one by one' in text, text[-2000:])
    print('graph host bad input: ' + ('all passed' if not check.failed else f'{len(check.failed)} FAILED'))
    return 1 if check.failed else 0


if __name__ == '__main__':
    sys.exit(main())
