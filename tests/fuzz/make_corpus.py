#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the seed inputs of the fuzz targets into tests/fuzz/corpus/.

    python3 tests/fuzz/make_corpus.py

Standard library only. The outputs are committed; run this again after the
wire format, the spec (abi/cuda_api.spec) or the fake session in
fuzz_worker_ops.c changes. Files this script did not write (reproducers
found by a fuzzer) are left alone.

fuzz_frame input: a 40-byte frame header, then a HELLO payload.
fuzz_image input: a module image (PTX, fatbin, ELF) as uploaded by a client.
fuzz_worker_ops input: u16 op index (op id - 256; bit 15 = start with a
latched error), u64 context id, then the op's arguments as the shim encodes
them, one seed per op with arguments that pass the checks against the fake
session of fuzz_worker_ops.c, and some that do not. Reproducers of known, unfixed bugs
go to corpus/known-bugs/<target>/ (see fuzz_known_bugs.h).

fuzz_nvml input: an NVML reply payload (abi/lupine/nvml_wire.h), or a
16-byte NVML request.

fuzz_visible input: a device count byte, that many 16-byte UUIDs, then a
CUDA_VISIBLE_DEVICES list (see fuzz_visible.c).

fuzz_auth input: u16 L, L bytes of --auth-tokens text, then a HELLO
payload, which is also decoded as an NVML request (see fuzz_auth.c).

fuzz_tls_server input: a mode byte (mod 3), then for 0 and 1 what a client
sends on a TLS port, for 2 the worker's HANDOFF check (see
fuzz_tls_server.c). The ClientHellos made here with Python's ssl (memory
BIOs) hold random bytes: they are written only when absent, so that a run
changes nothing. Whole recorded handshakes (rec-*.bin) are written by the
harness itself, LUP_FUZZ_TLS_RECORD (see fuzz_tls_server.c).

fuzz_dir_records input: a byte (even: a COMMITTED marker, odd: a lease
record), then the record as checkpoint/dir_commit.c or dir_lease.c writes it.

fuzz_ckpt_codec's seeds are not made here: they are real checkpoint objects
that a running lupined wrote, copied by ckpt_corpus.py.
"""
import hashlib
import os
import re
import ssl
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, '..', '..'))
SPEC = os.path.join(ROOT, 'abi', 'cuda_api.spec')
OUT = os.path.join(HERE, 'corpus')

# ---- abi/lupine/wire.h
LUP_PROTO_MAGIC = 0x4c555031
LUP_PROTO_VERSION = 1
LUP_OP_HELLO, LUP_OP_GOODBYE, LUP_OP_PING = 1, 2, 3
LUP_OP_HANDOFF = 7
LUP_HELLO_HEARTBEAT, LUP_HELLO_RESEND, LUP_HELLO_AUTH = 1, 2, 4
LUP_OP_ALIVE, LUP_OP_DATA, LUP_OP_OUTPUT = 5, 22, 23   # server -> client only
LUP_F_SYNC, LUP_F_REPLY, LUP_F_MORE = 1, 2, 4
LUP_MAX_PAYLOAD = (1 << 20) + 4096
LUP_MAX_NAME = 128
LUP_MAX_LANES = 4096
LUP_ARENA_BASE = 0x200000000000
LUP_FIRST_HANDLE_ID = 0x1000000

# ---- the fake session in fuzz_worker_ops.c
PRIMARY0 = 0x10000             # device 0's primary context, current
CTX1 = 0x100000                # a context the client created on device 1
FZ_A = LUP_ARENA_BASE          # 4 KiB, primary 0
FZ_B = LUP_ARENA_BASE + (2 << 20)  # 3 MiB, primary 0
FZ_C = LUP_ARENA_BASE + (6 << 20)  # 256 B, CTX1
FZ_D = LUP_ARENA_BASE + (8 << 20)  # 1 MiB, CTX1
BIND_CTX1 = 0x4000            # the fake session leaves CTX1 bound instead of PRIMARY0
LATCHED = 0x8000
FZ_STREAM = LUP_FIRST_HANDLE_ID        # a live stream
FZ_EVENT = LUP_FIRST_HANDLE_ID + 16    # a live event
FRESH_ID = LUP_FIRST_HANDLE_ID + 0x100  # free for a new handle
UNKNOWN_ID = LUP_FIRST_HANDLE_ID + 0x200  # well-formed, names nothing


def hdr(length, op, flags=0, lane=0, status=0, seq=1, ctx=0, reserved=0):
    return struct.pack('<IHHIIQQQ', length, op, flags, lane, status, seq, ctx, reserved)


def hello_payload(name=b'job-1', magic=LUP_PROTO_MAGIC, version=LUP_PROTO_VERSION, cuda=12040,
                  flags=0, token=bytes(16), last_seq=0, heartbeat_ms=None, rx_bytes=None, auth=None):
    if heartbeat_ms is not None:
        flags |= LUP_HELLO_HEARTBEAT
    if rx_bytes is not None:
        flags |= LUP_HELLO_RESEND
    if auth is not None:
        flags |= LUP_HELLO_AUTH
    out = (struct.pack('<IIII', magic, version, cuda, flags) + struct.pack('<H', len(name)) + name +
           token + struct.pack('<Q', last_seq))
    if heartbeat_ms is not None:
        out += struct.pack('<I', heartbeat_ms)
    if rx_bytes is not None:
        out += struct.pack('<Q', rx_bytes)
    if auth is not None:
        out += struct.pack('<H', len(auth)) + auth
    return out


def frame_seeds():
    def hello_frame(payload, **kw):
        return hdr(len(payload), LUP_OP_HELLO, LUP_F_SYNC, **kw) + payload

    return {
        'hello.bin': hello_frame(hello_payload()),
        'hello-resume.bin': hello_frame(hello_payload(name=b'train.rank_0', token=bytes(range(1, 17)),
                                                      last_seq=41)),
        'hello-name-max.bin': hello_frame(hello_payload(name=b'a' * LUP_MAX_NAME)),
        'hello-name-too-long.bin': hello_frame(hello_payload(name=b'a' * (LUP_MAX_NAME + 1))),
        'hello-name-bad-char.bin': hello_frame(hello_payload(name=b'a/b')),
        'hello-name-empty.bin': hello_frame(hello_payload(name=b'')),
        'hello-bad-magic.bin': hello_frame(hello_payload(magic=0x4c555030)),
        'hello-bad-version.bin': hello_frame(hello_payload(version=2)),
        'hello-trailing.bin': hello_frame(hello_payload() + b'\0'),
        'hello-auth.bin': hello_frame(hello_payload(auth=b'tenant-secret')),
        'hello-auth-max.bin': hello_frame(hello_payload(auth=bytes(range(256)))),
        'hello-auth-empty.bin': hello_frame(hello_payload(auth=b'')),
        'hello-all-flags.bin': hello_frame(hello_payload(heartbeat_ms=20, rx_bytes=1 << 40, auth=b'x')),
        'hello-heartbeat-low.bin': hello_frame(hello_payload(heartbeat_ms=19)),
        'hello-short.bin': hello_frame(hello_payload()[:-1]),
        'ping.bin': hdr(0, LUP_OP_PING, LUP_F_SYNC, lane=7, seq=2),
        'goodbye.bin': hdr(0, LUP_OP_GOODBYE),
        'reply-more.bin': hdr(16, 0x100, LUP_F_REPLY | LUP_F_MORE, lane=LUP_MAX_LANES - 1, seq=9, ctx=8),
        'hdr-max-payload.bin': hdr(LUP_MAX_PAYLOAD, 0x110, LUP_F_SYNC),
        'hdr-too-long.bin': hdr(LUP_MAX_PAYLOAD + 1, 0x110),
        'hdr-bad-lane.bin': hdr(0, LUP_OP_PING, lane=LUP_MAX_LANES),
        'hdr-bad-flags.bin': hdr(0, LUP_OP_PING, flags=8),
        'hdr-reserved.bin': hdr(0, LUP_OP_PING, reserved=1),
        'hdr-op-zero.bin': hdr(0, 0),
        # server -> client frames, well-formed and as a client might forge them
        'alive.bin': hdr(0, LUP_OP_ALIVE, seq=5, ctx=4),
        'alive-with-payload.bin': hdr(8, LUP_OP_ALIVE, LUP_F_SYNC, seq=1) + bytes(8),
        'output.bin': hdr(18, LUP_OP_OUTPUT, ctx=3) + b'device says hello\n',
        'output-flags-status.bin': hdr(6, LUP_OP_OUTPUT, LUP_F_REPLY, status=700, seq=1) + b'hello\n',
        'data.bin': hdr(20, LUP_OP_DATA, ctx=2) + struct.pack('<QQ', 1, 0) + b'abcd',
    }


# ---- common/image.h

FATBIN_MAGIC = 0xba55ed50
FATBINC_MAGIC = 0x466243b1


def elf64(sections, phnum=0):
    """An ELF64 header, then `sections` as (type, offset, size) section headers."""
    shoff = 64
    eh = bytearray(64)
    eh[0:4] = b'\x7fELF'
    eh[4], eh[5], eh[6] = 2, 1, 1  # ELFCLASS64, little-endian, version
    struct.pack_into('<HHI', eh, 16, 2, 190, 1)  # ET_EXEC, EM_CUDA
    struct.pack_into('<QQ', eh, 32, 0, shoff if sections else 0)  # phoff, shoff
    struct.pack_into('<HHHHHH', eh, 52, 64, 56, phnum, 64, len(sections), 0)
    body = b''
    for typ, off, size in sections:
        body += struct.pack('<IIQQQQIIQQ', 0, typ, 0, 0, off, size, 0, 0, 1, 0)
    image = bytes(eh) + body
    end = max([len(image)] + [off + size for typ, off, size in sections if typ != 8])
    return image + bytes(end - len(image))


def image_seeds():
    ptx = b'//\n// Generated by hand\n//\n\n.version 8.0\n.target sm_90\n.address_size 64\n\0'
    fatbin_body = bytes(range(48))
    fatbin = struct.pack('<IHHQ', FATBIN_MAGIC, 1, 16, len(fatbin_body)) + fatbin_body
    return {
        'ptx.bin': ptx,
        'ptx-blank-directive.bin': b'  \t\r\n.version 7.8\n\0trailing',
        'ptx-block-comment.bin': b'/* x */\n.entry k()\n{\n ret;\n}\n\0',
        'ptx-no-nul.bin': ptx[:-1],
        'fatbin.bin': fatbin,
        'fatbin-trailing.bin': fatbin + b'\0' * 8,
        'fatbin-short.bin': fatbin[:-1],
        'fatbin-hsize-small.bin': struct.pack('<IHHQ', FATBIN_MAGIC, 1, 8, 0) + bytes(8),
        'fatbinc-wrapper.bin': struct.pack('<IIQQ', FATBINC_MAGIC, 1, 0x7f0000001000, 0),
        'elf-no-sections.bin': elf64([]),
        'elf-sections.bin': elf64([(0, 0, 0), (1, 200, 40), (8, 4096, 1 << 20), (3, 240, 16)]),
        'elf-section-past-end.bin': elf64([(1, 200, 40)])[:-1],
        'elf-bad-shentsize.bin': elf64([(1, 200, 40)])[:58] + b'\x20\x00' + elf64([(1, 200, 40)])[60:],
        'elf32.bin': b'\x7fELF\x01\x01' + bytes(58),
    }


# ---- abi/cuda_api.spec, as abi/gen/lupgen.py reads it (only what is needed here)

WIRE = {  # type -> struct format of its wire encoding
    'int': 'i', 'uint': 'I', 'u8': 'B', 'u16': 'H', 'u32': 'I', 'u64': 'Q', 'ull': 'Q',
    'size_t': 'Q', 'device': 'i', 'devptr': 'Q', 'ctx': 'Q', 'stream': 'Q', 'module': 'Q',
    'function': 'Q', 'library': 'Q', 'kernel': 'Q', 'event': 'Q', 'image': 'Q', 'float': 'f',
    'graph': 'Q', 'graphexec': 'Q', 'graphnode': 'Q',
}


def parse_spec():
    ops = []
    with open(SPEC) as f:
        for raw in f:
            words = raw.split('#', 1)[0].split()
            if not words or not words[0].isdigit():
                continue
            opid, name, mode = int(words[0]), words[1], words[2]
            params = []
            for w in words[3:]:
                parts = w.split(':')
                if len(parts) < 3:
                    continue  # a flag
                d, t, pname = parts[0], parts[1].split('=')[0], parts[2]
                rng = None
                for extra in parts[3:]:
                    m = re.fullmatch(r'range=(\w+)(?:\*(\d+))?', extra)
                    if m:
                        rng = (m.group(1), int(m.group(2) or 1))
                params.append((d, t, pname, rng))
            ops.append((opid, name, mode, params))
    return ops


def encode_args(params, values):
    """The payload the shim sends: every in/new/del parameter, in order."""
    out = b''
    for d, t, pname, _ in params:
        if d == 'out':
            continue
        v = values[pname]
        if t == 'str':
            b = v.encode()
            out += struct.pack('<H', len(b)) + b
        elif re.fullmatch(r'bytes[0-9]+', t):
            out += v  # bytesN: N raw bytes
        else:
            out += struct.pack('<' + WIRE[t], v)
    return out


def default_value(d, t, pname, params):
    if t == 'devptr':
        return FZ_B
    if t == 'device':
        return 0
    if t == 'ctx':
        return PRIMARY0
    if d == 'new':
        return FRESH_ID
    if t == 'stream':
        return FZ_STREAM
    if t == 'event':
        return FZ_EVENT
    if t in ('module', 'function', 'library', 'kernel'):
        return UNKNOWN_ID
    if t == 'image':
        return 1  # a blob id; the fake session has uploaded none
    if t == 'str':
        return 'kernel'
    if re.fullmatch(r'bytes[0-9]+', t):
        return bytes(int(t[5:]))
    if t in ('graph', 'graphexec', 'graphnode'):
        return UNKNOWN_ID
    if t == 'float':
        return 0.0
    # a count a range refers to: small, so the range fits
    if any(r and r[0] == pname for _, _, _, r in params):
        return 64
    return 0


# Per-op overrides: name -> list of (seed suffix, ctx, {param: value}[, sel flags]).
OVERRIDES = {
    'cuMemAlloc_v2': [('small', PRIMARY0, {'bytesize': 100}), ('big', CTX1, {'bytesize': 5 << 20}),
                      ('zero', PRIMARY0, {'bytesize': 0}), ('huge', PRIMARY0, {'bytesize': 1 << 40})],
    'cuMemFree_v2': [('a', PRIMARY0, {'dptr': FZ_A}), ('d', CTX1, {'dptr': FZ_D}),
                     ('inner', PRIMARY0, {'dptr': FZ_B + 16}), ('outside', PRIMARY0, {'dptr': 0x1000})],
    'cuMemsetD8_v2': [('a', PRIMARY0, {'dstDevice': FZ_A, 'uc': 0xab, 'N': 4096}),
                      ('a-over', PRIMARY0, {'dstDevice': FZ_A, 'uc': 1, 'N': 4097}),
                      ('c-ctx1', CTX1, {'dstDevice': FZ_C, 'uc': 1, 'N': 256})],
    'cuMemsetD16_v2': [('b-end', PRIMARY0, {'dstDevice': FZ_B + (3 << 20) - 8, 'us': 7, 'N': 4}),
                       ('b-over', PRIMARY0, {'dstDevice': FZ_B + (3 << 20) - 8, 'us': 7, 'N': 5})],
    'cuMemsetD32_v2': [('d', CTX1, {'dstDevice': FZ_D, 'ui': 0xdeadbeef, 'N': 1 << 18}),
                       ('overflow', PRIMARY0, {'dstDevice': FZ_A, 'ui': 0, 'N': 1 << 62})],
    'cuMemsetD8Async': [('legacy', PRIMARY0, {'dstDevice': FZ_A, 'uc': 2, 'N': 16, 'hStream': 1})],
    'cuMemsetD16Async': [('perthread', PRIMARY0, {'dstDevice': FZ_A, 'us': 2, 'N': 16, 'hStream': 2})],
    'cuMemsetD32Async': [('badstream', PRIMARY0, {'dstDevice': FZ_A, 'ui': 2, 'N': 16, 'hStream': 3})],
    'cuMemcpyDtoD_v2': [('b-to-d', PRIMARY0, {'dstDevice': FZ_D, 'srcDevice': FZ_B, 'ByteCount': 1 << 20}),
                        ('c-over', PRIMARY0, {'dstDevice': FZ_C, 'srcDevice': FZ_A, 'ByteCount': 257})],
    'cuMemcpyDtoDAsync_v2': [('a-to-c', CTX1, {'dstDevice': FZ_C, 'srcDevice': FZ_A, 'ByteCount': 256,
                                               'hStream': 0})],
    'cuCtxSynchronize': [('primary', PRIMARY0, {}), ('ctx1', CTX1, {}), ('none', 0, {}),
                         ('primary1', PRIMARY0 + 0x100, {}), ('ctx1-bound', CTX1, {}, BIND_CTX1),
                         ('primary-from-ctx1', PRIMARY0, {}, BIND_CTX1)],
    'cuMemGetInfo_v2': [('primary', PRIMARY0, {}), ('unknown', 0x123456, {})],
    'lupCtxCreate': [('dev1', 0, {'id': CTX1 + 1, 'flags': 0, 'dev': 1}),
                     ('dup', 0, {'id': CTX1, 'flags': 0, 'dev': 0}),
                     ('low-id', 0, {'id': PRIMARY0, 'flags': 0, 'dev': 0}),
                     ('bad-dev', 0, {'id': CTX1 + 2, 'flags': 0, 'dev': 2})],
    'lupCtxDestroy': [('ctx1', 0, {'id': CTX1}), ('unknown', 0, {'id': CTX1 + 1}),
                      ('ctx1-bound', 0, {'id': CTX1}, BIND_CTX1)],
    'lupPrimaryCtxRetain': [('dev1', 0, {'dev': 1}), ('dev0', 0, {'dev': 0}), ('neg', 0, {'dev': -1})],
    'lupPrimaryCtxRelease': [('dev0', 0, {'dev': 0}), ('dev1', 0, {'dev': 1}),
                             ('dev0-ctx1-bound', 0, {'dev': 0}, BIND_CTX1)],
    'lupPrimaryCtxSetFlags': [('dev0', 0, {'dev': 0, 'flags': 4})],
    'lupPrimaryCtxReset': [('dev0', 0, {'dev': 0}), ('dev1', 0, {'dev': 1})],
    # arrays (daemon/worker/arrays.c): the fake session has none
    'lupArrayCreate': [('2d', PRIMARY0, {'width': 16, 'height': 16, 'format': 0x20, 'channels': 1}),
                       ('mipmap', PRIMARY0, {'width': 16, 'height': 16, 'format': 0x01, 'channels': 4, 'levels': 3}),
                       ('cube', PRIMARY0, {'width': 8, 'height': 8, 'depth': 6, 'format': 0x20, 'channels': 1,
                                           'flags': 4}),
                       ('absurd', PRIMARY0, {'width': 1 << 40, 'format': 0x20, 'channels': 1}),
                       ('sparse', PRIMARY0, {'width': 16, 'format': 0x20, 'channels': 1, 'flags': 0x40})],
    'lupArrayCopy': [('to-none', PRIMARY0, {'box': struct.pack('<IIQQQQQQ', 1, 0, FZ_A, 0, 0, 0, 64, 1) +
                                            struct.pack('<IIQQQQQQ', 2, 0, FRESH_ID, 0, 0, 0, 0, 0) +
                                            struct.pack('<QQQ', 64, 1, 1)}),
                     ('bad-kind', PRIMARY0, {'box': struct.pack('<I', 7) + bytes(135)})],
}


def worker_seeds(ops):
    seeds = {}

    def add(fname, opid, ctx, payload, flags=0):
        seeds[fname] = struct.pack('<HQ', (opid - 256) | flags, ctx) + payload

    for opid, name, mode, params in ops:
        base = {p[2]: default_value(p[0], p[1], p[2], params) for p in params}
        cases = OVERRIDES.get(name, [('ok', PRIMARY0, {})])
        for suffix, ctx, vals, *flags in cases:
            v = dict(base)
            v.update(vals)
            add(f'{name}-{suffix}.bin', opid, ctx, encode_args(params, v), *flags)
        v = dict(base)
        v.update(cases[0][2])
        args = encode_args(params, v)
        if mode == 'sync':
            add(f'{name}-latched.bin', opid, cases[0][1], args, LATCHED)
        if args:
            add(f'{name}-short.bin', opid, cases[0][1], args[:-1])
    return seeds


def ctl_seeds():
    """Control ops (sel 0x2000 | op id, 0x100 = LUP_F_SYNC): the copies,
    launches, FUNC_INFO and BLOB, as shim/client.c and shim/api_launch.c
    encode them."""
    CTL, SYNC = 0x2000, 0x100
    FZ_FUNC = LUP_FIRST_HANDLE_ID + 48
    seeds = {}

    def add(fname, op, payload, flags=0, ctx=PRIMARY0):
        seeds['ctl-' + fname] = struct.pack('<HQ', CTL | op | flags, ctx) + payload

    def launch(func=FZ_FUNC, flags=0, attrs=(), params=struct.pack('<QQQ', FZ_A, FZ_B, 7)):
        a = b''.join(struct.pack('<I', i) + v.ljust(64, b'\0') for i, v in attrs)
        return (struct.pack('<Q6IIQII', func, 4, 1, 1, 32, 1, 1, 0, 0, flags, len(attrs)) + a +
                struct.pack('<I', len(params)) + params)

    add('htod-async.bin', 16, struct.pack('<QQ', FZ_A, 0) + b'x' * 64)
    add('htod-sync.bin', 16, struct.pack('<QQ', FZ_B + 100, FZ_STREAM) + b'y' * 300, SYNC)
    add('htod-latched.bin', 16, struct.pack('<QQ', FZ_A, 0) + b'x' * 8, SYNC | LATCHED)
    add('htod-over.bin', 16, struct.pack('<QQ', FZ_A + 4090, 0) + b'x' * 64)
    add('htod-ctx1.bin', 16, struct.pack('<QQ', FZ_C, 0) + b'x' * 256, ctx=CTX1)
    add('htod-empty.bin', 16, struct.pack('<QQ', FZ_A, 0))
    add('dtoh.bin', 17, struct.pack('<QQQ', FZ_B, 3 << 20, 0), SYNC)
    add('dtoh-latched.bin', 17, struct.pack('<QQQ', FZ_A, 16, 0), SYNC | LATCHED)
    add('dtoh-nosync.bin', 17, struct.pack('<QQQ', FZ_A, 16, 0))
    add('dtoh-zero.bin', 17, struct.pack('<QQQ', FZ_A, 0, 0), SYNC)
    add('dtoh-async.bin', 21, struct.pack('<QQQQ', FZ_D, 1 << 20, 1, LUP_FIRST_HANDLE_ID + 0x100), ctx=CTX1)
    add('dtoh-async-badstream.bin', 21, struct.pack('<QQQQ', FZ_A, 64, 99, LUP_FIRST_HANDLE_ID + 0x100))
    add('dtoh-async-token0.bin', 21, struct.pack('<QQQQ', FZ_A, 64, 0, 0))
    add('launch.bin', 18, launch())
    add('launch-coop.bin', 18, launch(flags=1, attrs=((8, struct.pack('<i', 1)),)))
    add('launch-badattr.bin', 18, launch(attrs=((99, b''),)))
    add('launch-latched.bin', 18, launch(), SYNC | LATCHED)
    add('launch-params.bin', 18, launch(params=b'\0' * 16))
    add('launch-nofunc.bin', 18, launch(func=LUP_FIRST_HANDLE_ID + 0x200))
    add('func-info.bin', 19, struct.pack('<Q', FZ_FUNC), SYNC)
    add('func-info-latched.bin', 19, struct.pack('<Q', FZ_FUNC), SYNC | LATCHED)
    add('func-info-nosync.bin', 19, struct.pack('<Q', FZ_FUNC))
    add('func-info-unknown.bin', 19, struct.pack('<Q', FZ_STREAM), SYNC)
    # mapped host memory (daemon/worker/mapped.c): the fake session has no mirror
    add('mapped-push.bin', 36, struct.pack('<QQI', 0x7e0000000000, 0, 3) + b'abc')
    add('mapped-push-sync.bin', 36, struct.pack('<Q', 0x7e0000000000), SYNC)
    add('mapped-pull.bin', 37, struct.pack('<QQ', 0x7e0000000000, 0), SYNC)
    add('mapped-pull-latched.bin', 37, struct.pack('<QQ', 0x7e0000000000, 0), SYNC | LATCHED)
    add('blob.bin', 20, struct.pack('<QQQ', LUP_FIRST_HANDLE_ID + 0x100, 8, 0) + b'12345678')
    add('blob-part.bin', 20, struct.pack('<QQQ', LUP_FIRST_HANDLE_ID + 0x100, 16, 0) + b'12345678')
    add('blob-offset.bin', 20, struct.pack('<QQQ', LUP_FIRST_HANDLE_ID + 0x100, 16, 8) + b'12345678')
    return seeds


def worker_known_bugs(ops):
    """Reproducers of bugs not fixed yet (see known_bug() in fuzz_worker_ops.c)."""
    ids = {name: opid for opid, name, _, _ in ops}
    seeds = {}
    if 'lupCtxDestroy' in ids:
        # PRIMARY0 bound; destroying CTX1 leaves no context current
        seeds['ctx-binding-destroy-other.bin'] = (struct.pack('<HQ', ids['lupCtxDestroy'] - 256, 0) +
                                                  struct.pack('<Q', CTX1))
    if 'lupPrimaryCtxReset' in ids:
        # CTX1 bound; resetting device 0 makes its primary context current
        seeds['ctx-binding-reset-other.bin'] = (struct.pack('<HQ', (ids['lupPrimaryCtxReset'] - 256) | BIND_CTX1, 0) +
                                                struct.pack('<i', 0))
    return seeds


# ---- abi/lupine/nvml_wire.h
NVML_MAGIC, NVML_VERSION = 0x4c4e5631, 2
NVML_K_DRIVER_VERSION, NVML_K_CUDA_VERSION, NVML_K_NAME, NVML_K_UUID, NVML_K_MEM_TOTAL = 1, 3, 32, 33, 42


def nvml_entry(key, value=None, ret=0):
    if ret:
        return struct.pack('<HHI', key, 0, ret)
    if isinstance(value, bytes):
        return struct.pack('<HHI', key, len(value), 0) + value
    return struct.pack('<HHIQ', key, 8, 0, value)


def nvml_snapshot(devs, procs=()):
    sys_ = [nvml_entry(NVML_K_DRIVER_VERSION, b'580.00.sim'), nvml_entry(NVML_K_CUDA_VERSION, 13000)]
    out = struct.pack('<IIIIQ', NVML_MAGIC, NVML_VERSION, 2, len(devs), 1764640000000)
    out += struct.pack('<I', len(sys_)) + b''.join(sys_)
    for i, d in enumerate(devs):
        out += struct.pack('<I', len(d)) + b''.join(d)
        p = procs if i == 0 else ()
        out += struct.pack('<I', len(p)) + b''.join(struct.pack('<IQ', pid, used) for pid, used in p)
    return out


def nvml_seeds():
    dev = [nvml_entry(NVML_K_NAME, b'lupine simulated GPU #0 (sim)'),
           nvml_entry(NVML_K_UUID, b'GPU-e8b269b5-8127-4972-9501-af17cb89cf1b'),
           nvml_entry(NVML_K_MEM_TOTAL, 16 << 30), nvml_entry(NVML_K_MEM_TOTAL + 1, ret=3)]
    return {
        'request.bin': struct.pack('<IIII', NVML_MAGIC, NVML_VERSION, 1, 0),
        'empty.bin': nvml_snapshot([]),
        'one-device.bin': nvml_snapshot([dev], [(4242, 1 << 20)]),
        'two-devices.bin': nvml_snapshot([dev, dev[:2]]),
    }


# ---- daemon/auth_tokens.h: "TENANT SHA256HEX" lines

def token_line(tenant, token, upper=False):
    h = hashlib.sha256(token).hexdigest()
    return tenant + b' ' + (h.upper() if upper else h).encode()


TOKENS = b'\n'.join([b'# tenants of this GPU host', b'',
                      token_line(b'alice', b'alice-secret'),
                      b'  ' + token_line(b'bob@example.org', b'bob-token') + b'  ',
                      b'\t' + token_line(b'ci_runner-2', b'c' * 256, upper=True)]) + b'\n'


def auth_input(text, rest):
    return struct.pack('<H', len(text)) + text + rest


def nvml_request(auth=None):
    if auth is None:
        return struct.pack('<IIII', NVML_MAGIC, NVML_VERSION, 1, 0)
    return struct.pack('<IIIIH', NVML_MAGIC, NVML_VERSION, 1, 1, len(auth)) + auth


def auth_seeds():
    h = hello_payload
    dup = token_line(b'first', b'same') + b'\n' + token_line(b'second', b'same') + b'\n'
    return {
        'hello-alice.bin': auth_input(TOKENS, h(name=b'train-1', auth=b'alice-secret')),
        'hello-bob-resume.bin': auth_input(TOKENS, h(name=b'bob.job', token=bytes(range(1, 17)), last_seq=9,
                                                     heartbeat_ms=1000, rx_bytes=4096, auth=b'bob-token')),
        'hello-token-max.bin': auth_input(TOKENS, h(auth=b'c' * 256)),
        'hello-token-unknown.bin': auth_input(TOKENS, h(auth=b'not-a-token')),
        'hello-token-empty.bin': auth_input(TOKENS, h(auth=b'')),
        'hello-token-too-long.bin': auth_input(TOKENS, h(auth=b'c' * 257)),
        'hello-anonymous.bin': auth_input(TOKENS, h()),
        'hello-name-109.bin': auth_input(TOKENS, h(name=b'n' * 109, auth=b'alice-secret')),
        'hello-name-110.bin': auth_input(TOKENS, h(name=b'n' * 110, auth=b'alice-secret')),
        'hello-name-max.bin': auth_input(TOKENS, h(name=b'm' * LUP_MAX_NAME)),
        'hello-name-dot.bin': auth_input(TOKENS, h(name=b'.t0123456789abcdef.job', auth=b'alice-secret')),
        'hello-dup-hash.bin': auth_input(dup, h(auth=b'same')),
        'nvml-alice.bin': auth_input(TOKENS, nvml_request(b'alice-secret')),
        'nvml-anonymous.bin': auth_input(TOKENS, nvml_request()),
        'nvml-token-short.bin': auth_input(TOKENS, nvml_request(b'alice-secret')[:-1]),
        'tokens-crlf.bin': auth_input(TOKENS.replace(b'\n', b'\r\n'), h(auth=b'alice-secret')),
        'tokens-no-newline.bin': auth_input(token_line(b'alice', b'alice-secret'), h(auth=b'alice-secret')),
        'tokens-comments-only.bin': auth_input(b'# nothing\n\n   \n', h(auth=b'x')),
        'tokens-bad-hex.bin': auth_input(b'alice ' + b'g' * 64 + b'\n', h(auth=b'x')),
        'tokens-short-hash.bin': auth_input(b'alice ' + b'a' * 63 + b'\n', h(auth=b'x')),
        'tokens-bad-tenant.bin': auth_input(token_line(b'al/ice', b'x') + b'\n', h(auth=b'x')),
        'tokens-tenant-64.bin': auth_input(token_line(b't' * 64, b'x') + b'\n', h(auth=b'x')),
        'tokens-tenant-65.bin': auth_input(token_line(b't' * 65, b'x') + b'\n', h(auth=b'x')),
        'tokens-extra-field.bin': auth_input(token_line(b'alice', b'x') + b' more\n', h(auth=b'x')),
        'tokens-nul.bin': auth_input(b'alice\0' + token_line(b'', b'x') + b'\n', h(auth=b'x')),
    }


# ---- the TLS port and the worker's HANDOFF (fuzz_tls_server.c)

def client_hello(min_v=ssl.TLSVersion.TLSv1_3, max_v=ssl.TLSVersion.TLSv1_3, sni='gpu1.example', alpn=None):
    """The first flight of a Python (OpenSSL) client: its ClientHello."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version, ctx.maximum_version = min_v, max_v
    if alpn:
        ctx.set_alpn_protocols(alpn)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_side=False, server_hostname=sni)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def split_record(rec, at):
    """One handshake record as two records (the message in two fragments)."""
    typ, ver, n = struct.unpack('>BHH', rec[:5])
    body = rec[5:5 + n]
    a, b = body[:at], body[at:]
    return struct.pack('>BHH', typ, ver, len(a)) + a + struct.pack('>BHH', typ, ver, len(b)) + b


def tls_random_seeds():
    ch = client_hello()
    return {
        'py-clienthello.bin': b'\0' + ch,
        'py-clienthello-mtls.bin': b'\1' + ch,
        'py-clienthello-tls12-alpn.bin': b'\0' + client_hello(ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3,
                                                              alpn=['lupine', 'h2']),
        'py-clienthello-tls12-only.bin': b'\0' + client_hello(ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2,
                                                              sni=None),
        'py-clienthello-split.bin': b'\0' + split_record(ch, 40),
        'py-clienthello-garbage.bin': b'\0' + ch + b'\x17\x03\x03\x00\x10' + bytes(16),
    }


def handoff(lane=3, seq=7, ticket=bytes(range(16)), hdr_bytes=None, got=None):
    if hdr_bytes is None:
        hdr_bytes = hdr(16, LUP_OP_HANDOFF, LUP_F_SYNC, lane=lane, seq=seq)
    return b'\2' + struct.pack('<IQ', lane, seq) + ticket + hdr_bytes + (ticket if got is None else got)


def tls_seeds():
    plain = hello_payload()
    return {
        'plaintext-hello.bin': b'\0' + hdr(len(plain), LUP_OP_HELLO, LUP_F_SYNC) + plain,
        'short.bin': b'\0' + b'\x16\x03\x01\x00',
        'empty.bin': b'\0',
        'record-not-hello.bin': b'\0' + b'\x16\x03\x03\x00\x04\x02\x00\x00\x00',
        'handoff.bin': handoff(),
        'handoff-wrong-ticket.bin': handoff(got=bytes(16)),
        'handoff-wrong-lane.bin': handoff(hdr_bytes=hdr(16, LUP_OP_HANDOFF, LUP_F_SYNC, lane=4, seq=7)),
        'handoff-wrong-seq.bin': handoff(hdr_bytes=hdr(16, LUP_OP_HANDOFF, LUP_F_SYNC, lane=3, seq=8)),
        'handoff-wrong-op.bin': handoff(hdr_bytes=hdr(16, LUP_OP_HELLO, LUP_F_SYNC, lane=3, seq=7)),
        'handoff-wrong-len.bin': handoff(hdr_bytes=hdr(17, LUP_OP_HANDOFF, LUP_F_SYNC, lane=3, seq=7)),
        'handoff-bad-hdr.bin': handoff(hdr_bytes=hdr(16, LUP_OP_HANDOFF, LUP_F_SYNC, lane=3, seq=7, reserved=1)),
        'handoff-short.bin': handoff()[:40],
    }


def visible_seeds():
    """fuzz_visible: n, n UUIDs, a CUDA_VISIBLE_DEVICES list."""
    uuids = [bytes.fromhex('ab12cd340001400280030000000000' + f'{i:02x}') for i in range(3)]
    uuids.append(bytes.fromhex('5ca809cabefd545c4837b5a7988224b1'))
    devs = bytes([4]) + b''.join(uuids)
    full = 'GPU-5ca809ca-befd-545c-4837-b5a7988224b1'
    lists = {'index.bin': '2', 'pair.bin': '3,1', 'uuid.bin': full, 'prefix.bin': 'GPU-5c',
             'ambiguous.bin': 'GPU-ab12', 'mixed.bin': full + ',0,1', 'ends.bin': '1,bogus,2',
             'twice.bin': '1,1', 'twice-uuid.bin': full + ',' + full, 'empty.bin': '', 'negative.bin': '-1',
             'blanks.bin': ' 3 ,+01,0x2', 'mig.bin': 'MIG-5ca8', 'nodash.bin': 'GPU-5CA809CABEFD545C48'}
    seeds = {name: devs + text.encode() for name, text in lists.items()}
    seeds['no-devices.bin'] = b'\0' + b'0,1'
    return seeds


def jit_request(opts=(), inputs=(), first=0):
    """common/jit_codec.h: opts (option, value), inputs (type, opts, name, data)."""
    def put_opts(o):
        return struct.pack('<I', len(o)) + b''.join(struct.pack('<IQ', k, v) for k, v in o)
    b = struct.pack('<I', 0x3154494a) + put_opts(opts) + struct.pack('<II', first, len(inputs))
    for t, o, name, data in inputs:
        b += struct.pack('<I', t) + put_opts(o) + struct.pack('<H', len(name)) + name
        b += struct.pack('<Q', len(data)) + data
    return b


def jit_seeds():
    """fuzz_jit: JIT requests, good and bad."""
    ptx = b'.version 9.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\nret;\n}\n\0'
    logs = [(3, 0), (4, 4096), (5, 0), (6, 4096), (2, 0), (12, 1), (7, 3), (8, 0)]
    good = jit_request(logs, [(1, [], b'a.ptx', ptx), (1, [(7, 2)], b'b.ptx', ptx)])
    return {
        'empty.bin': jit_request(),
        'link.bin': good,
        'later.bin': jit_request(logs, [(1, [], b'', ptx)], first=3),
        'load.bin': jit_request([(7, 4)], [(0, [], b'', ptx)]),
        'bad-magic.bin': b'XXXX' + good[4:],
        'host-array-option.bin': jit_request([(17, 0x1000)]),
        'bad-type.bin': jit_request([], [(9, [], b'', b'x')]),
        'truncated.bin': good[:-3],
        'trailing.bin': good + b'\0',
        'nul-in-name.bin': jit_request([], [(1, [], b'a\0b', ptx)]),
    }


def tls_record_seeds():
    """fuzz_tls_record: operations on the peer's stream (see the harness):
    kind (0 sealed, 1 raw, 2 tampered, 3 close_notify), u16 length, bytes."""
    def op(kind, payload=b''):
        return bytes([kind]) + struct.pack('<H', len(payload)) + payload
    big = bytes(range(256)) * 70  # 17920 bytes: two records
    return {
        'one.bin': b'\0' + op(0, b'hello'),
        'several.bin': b'\1' + op(0, b'a' * 100) + op(0, b'b' * 16384) + op(0, big),
        'tampered.bin': b'\2' + op(0, b'before') + op(2, b'\x07' + b'x' * 40) + op(0, b'after'),
        'raw-header.bin': b'\3' + op(0, b'ok') + op(1, bytes([22, 3, 3, 0, 20]) + b'\0' * 20),
        'oversized.bin': b'\0' + op(1, bytes([23, 3, 3, 0x50, 0])),
        'close.bin': b'\1' + op(0, b'last words') + op(3) + op(0, b'ignored'),
        'partial.bin': b'\2' + op(0, b'whole') + op(1, bytes([23, 3])),
    }


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def with_crc(body):
    return body + struct.pack('<I', crc32c(body))


def dir_marker(epoch, objects, nbytes, when, session):
    s = session.encode()
    return with_crc(b'LUPCKPT1' + struct.pack('<IQQQQH', 1, epoch, objects, nbytes, when, len(s)) + s)


def dir_lease(token, expires, owner):
    o = owner.encode()
    return with_crc(b'LUPLEAS1' + struct.pack('<IQQH', 1, token, expires, len(o)) + o)


def dir_records_seeds():
    return {
        'marker.bin': b'\0' + dir_marker(1, 3, 70999, 1700000000, 'job-1'),
        'marker-dot.bin': b'\0' + dir_marker(0x1122334455667788, 0, 0, 0, '.tmp-x'),
        'lease-held.bin': b'\1' + dir_lease(7, 1700000000123, 'host-a.1234'),
        'lease-free.bin': b'\1' + dir_lease(9, 0, ''),
        'lease-long.bin': b'\1' + dir_lease(2**64 - 1, 2**63 - 1, 'h' * 128),
    }


def write_dir(target, seeds):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    for fname, data in sorted(seeds.items()):
        with open(os.path.join(d, fname), 'wb') as f:
            f.write(data)
    print(f'{d}: {len(seeds)} seeds')


def write_absent(target, seeds):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    n = 0
    for fname, data in sorted(seeds.items()):
        path = os.path.join(d, fname)
        if not os.path.exists(path):
            with open(path, 'wb') as f:
                f.write(data)
            n += 1
    print(f'{d}: {n} random seeds written, {len(seeds) - n} kept')


def main():
    if len(sys.argv) != 1:
        sys.exit(__doc__)
    write_dir('fuzz_auth', auth_seeds())
    write_dir('fuzz_tls_server', tls_seeds())
    write_absent('fuzz_tls_server', tls_random_seeds())
    write_dir('fuzz_frame', frame_seeds())
    write_dir('fuzz_image', image_seeds())
    write_dir('fuzz_jit', jit_seeds())
    write_dir('fuzz_nvml', nvml_seeds())
    write_dir('fuzz_visible', visible_seeds())
    write_dir('fuzz_tls_record', tls_record_seeds())
    write_dir('fuzz_dir_records', dir_records_seeds())
    # image-short-ptx: "//" and its NUL, then a byte more
    write_dir(os.path.join('known-bugs', 'fuzz_image'), {'short-ptx.bin': b'//\0\0'})
    ops = parse_spec()
    write_dir('fuzz_worker_ops', {**worker_seeds(ops), **ctl_seeds()})
    write_dir(os.path.join('known-bugs', 'fuzz_worker_ops'), worker_known_bugs(ops))


if __name__ == '__main__':
    main()
