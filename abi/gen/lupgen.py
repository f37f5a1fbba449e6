#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""lupine code generator: reads abi/cuda_api.spec (the single source of truth
for forwarded driver functions) plus the toolkit's symbol list and
cudaTypedefs.h, and writes the client stubs, the per-thread stream variants
of the shim's hand-written functions, the worker's decoders and dispatch
table, the backend table, the cuGetProcAddress tables and the shim's version
script. Python 3 standard library only.

usage: lupgen.py SPEC SYMBOLS CUDATYPEDEFS OUTDIR
"""
import os
import re
import sys

# wire type -> (C type in the prototype, writer/reader, C decode type)
TYPES = {
    'int':    ('int',           'i32', 'int32_t'),
    'uint':   ('unsigned int',  'u32', 'uint32_t'),
    'u8':     ('unsigned char', 'u8',  'uint8_t'),
    'u16':    ('unsigned short', 'u16', 'uint16_t'),
    'u32':    ('unsigned int',  'u32', 'uint32_t'),
    'u64':    ('uint64_t',      'u64', 'uint64_t'),
    'ull':    ('unsigned long long', 'u64', 'uint64_t'),
    'size_t': ('size_t',        'u64', 'uint64_t'),
    'float':  ('float',         'f32', 'float'),
    'device': ('CUdevice',      'i32', 'int32_t'),
    'devptr': ('CUdeviceptr',   'u64', 'uint64_t'),
    'ctx':    ('CUcontext',     'u64', 'uint64_t'),
    'stream': ('CUstream',      'u64', 'uint64_t'),
    # client-minted handles: 64-bit ids the worker maps to real handles
    'module':   ('CUmodule',   'u64', 'uint64_t'),
    'function': ('CUfunction', 'u64', 'uint64_t'),
    'library':  ('CUlibrary',  'u64', 'uint64_t'),
    'kernel':   ('CUkernel',   'u64', 'uint64_t'),
    'event':    ('CUevent',    'u64', 'uint64_t'),
    'graph':     ('CUgraph',     'u64', 'uint64_t'),
    'graphexec': ('CUgraphExec', 'u64', 'uint64_t'),
    'graphnode': ('CUgraphNode', 'u64', 'uint64_t'),
    # variable-length inputs
    'str':    ('const char *',  'str', None),   # NUL-terminated, at most LUP_MAX_STR bytes
    'image':  ('const void *',  'u64', 'uint64_t'),  # a module image, uploaded as a blob first
}
HANDLE_KINDS = ['module', 'function', 'library', 'kernel', 'stream', 'event', 'graph', 'graphexec', 'graphnode']
WIDTH = {'i32': 4, 'u32': 4, 'f32': 4, 'u8': 1, 'u16': 2, 'u64': 8, 'str': 2 + 4096}
MAX_BYTES_PARAM = 256
FLAGS = {'ctx', 'client=custom', 'worker=custom', 'perthread', 'internal'}
DIRS = ('in', 'out', 'new', 'del')


class SpecError(Exception):
    pass


class Param:
    """dir:type[=CTYPE]:name[:range=EXPR[:pitch=NAME:rows=NAME]]

    in   a value (or an existing handle) sent to the worker
    out  a value the worker returns (sync ops only)
    new  a handle the shim mints; the worker maps it to the real one it creates
    del  an existing handle the call destroys; the worker forgets it on success
    """

    def __init__(self, text, lineno):
        parts = text.split(':')
        if len(parts) < 3 or parts[0] not in DIRS:
            raise SpecError(f'line {lineno}: bad parameter {text!r}')
        self.dir, tspec, self.name = parts[0], parts[1], parts[2]
        self.type, _, override = tspec.partition('=')
        # bytesN: N raw bytes through a pointer (in: const void *, out: void *)
        m = re.fullmatch(r'bytes([0-9]+)', self.type)
        self.nbytes = int(m.group(1)) if m else 0
        if m and not (0 < self.nbytes <= MAX_BYTES_PARAM and self.dir in ('in', 'out')):
            raise SpecError(f'line {lineno}: bytesN needs 0 < N <= {MAX_BYTES_PARAM}, in or out: {text!r}')
        if self.type not in TYPES and not self.nbytes:
            raise SpecError(f'line {lineno}: bad parameter {text!r}')
        if not re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', self.name):
            raise SpecError(f'line {lineno}: bad parameter name {self.name!r}')
        if self.nbytes:
            self.ctype, self.wire, self.dtype = ('const void *' if self.dir == 'in' else 'void'), 'bytes', None
        else:
            self.ctype, self.wire, self.dtype = TYPES[self.type]
        if override:
            if self.type not in ('int', 'uint') or not re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', override):
                raise SpecError(f'line {lineno}: a C type override is only for int/uint enums: {text!r}')
            self.ctype = override
        self.handle = self.type in HANDLE_KINDS
        if self.dir in ('new', 'del') and not self.handle:
            raise SpecError(f'line {lineno}: {self.dir}: needs a handle type: {text!r}')
        if self.dir == 'out' and self.type in ('str', 'image'):
            raise SpecError(f'line {lineno}: {self.type} cannot be an output')
        self.range = None
        self.rows = None  # (pitch, rows): the range is rows of it, pitch bytes apart
        self.loc = None   # the parameter holding this location id's CUmemLocationType
        opts = {}
        for extra in parts[3:]:
            m = re.fullmatch(r'loc=([A-Za-z_][A-Za-z0-9_]*)', extra)
            if m and self.type == 'int' and self.dir in ('in', 'out') and self.loc is None:
                self.loc = m.group(1)
                continue
            m = re.fullmatch(r'(range|pitch|rows)=([A-Za-z_][A-Za-z0-9_]*)(?:\*([0-9]+))?', extra)
            if not m or self.type != 'devptr' or self.dir != 'in' or m.group(1) in opts or \
                    (m.group(3) and m.group(1) != 'range'):
                raise SpecError(f'line {lineno}: bad parameter option {extra!r}')
            opts[m.group(1)] = (m.group(2), int(m.group(3) or 1))
        if 'range' in opts:
            self.range = opts['range']
        if 'pitch' in opts or 'rows' in opts:
            if not ('range' in opts and 'pitch' in opts and 'rows' in opts):
                raise SpecError(f'line {lineno}: pitch= and rows= go together, with range=: {text!r}')
            self.rows = (opts['pitch'][0], opts['rows'][0])

    @property
    def width(self):
        return self.nbytes or WIDTH[self.wire]

    @property
    def sent(self):
        return self.dir in ('in', 'new', 'del')

    @property
    def pointer(self):
        return self.dir in ('out', 'new')


class Func:
    def __init__(self, opid, name, mode, flags, params, lineno):
        self.opid, self.name, self.mode, self.flags, self.params = opid, name, mode, flags, params
        self.lineno = lineno
        self.sync = mode == 'sync'
        self.client_custom = 'client=custom' in flags
        self.worker_custom = 'worker=custom' in flags
        self.internal = 'internal' in flags
        self.need_ctx = 'ctx' in flags
        self.perthread = 'perthread' in flags
        self.ins = [p for p in params if p.sent]
        self.outs = [p for p in params if p.dir == 'out']
        names = [p.name for p in params]
        if len(set(names)) != len(names):
            raise SpecError(f'line {lineno}: duplicate parameter names in {name}')
        if self.outs and not self.sync:
            raise SpecError(f'line {lineno}: {name}: async ops cannot have outputs')
        for p in params:
            for ref in ([p.range[0]] if p.range else []) + list(p.rows or ()):
                if ref not in names:
                    raise SpecError(f'line {lineno}: {name}: range refers to unknown {ref}')
            # a location id's type comes in the same direction, before it
            if p.loc and not any(q.name == p.loc and q.type == 'int' and q.dir == p.dir
                                 for q in params[:params.index(p)]):
                raise SpecError(f'line {lineno}: {name}: loc={p.loc} must name an earlier int {p.dir} parameter')
        if self.internal and not (self.worker_custom and name.startswith('lup')):
            raise SpecError(f'line {lineno}: internal ops must be lup* and worker=custom')

    def args_size(self):
        return sum(p.width for p in self.ins)

    def reply_size(self):
        return sum(p.width for p in self.outs)


def parse_spec(path, symbols):
    funcs, local, backend, seen_ids, seen_names = [], [], [], set(), set()
    with open(path) as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.split('#', 1)[0].strip()
            if not line:
                continue
            words = line.split()
            if words[0] == 'local':
                local.append(parse_local(words, lineno, symbols))
                continue
            if words[0] == 'backend':
                if len(words) != 2:
                    raise SpecError(f'line {lineno}: expected "backend NAME"')
                if words[1] not in symbols:
                    raise SpecError(f'line {lineno}: {words[1]} is not a driver symbol')
                backend.append(words[1])
                continue
            if len(words) < 3 or not words[0].isdigit():
                raise SpecError(f'line {lineno}: cannot parse {line!r}')
            opid, name, mode = int(words[0]), words[1], words[2]
            if not 256 <= opid <= 65535 or opid in seen_ids:
                raise SpecError(f'line {lineno}: op id {opid} out of range or reused')
            if mode not in ('sync', 'async'):
                raise SpecError(f'line {lineno}: mode must be sync or async')
            flags = set(w for w in words[3:] if ':' not in w)
            bad = flags - FLAGS
            if bad:
                raise SpecError(f'line {lineno}: unknown flags {sorted(bad)}')
            params = [Param(w, lineno) for w in words[3:] if ':' in w]
            fn = Func(opid, name, mode, flags, params, lineno)
            if not fn.internal and name not in symbols:
                raise SpecError(f'line {lineno}: {name} is not a driver symbol')
            seen_ids.add(opid)
            funcs.append(fn)
    implemented = []
    for fn in funcs:
        if fn.internal:
            continue
        implemented.append(fn.name)
        # client=custom perthread: the shim hand-writes NAME_ptsz as well
        if fn.perthread:
            implemented.append(perthread_name(fn.name, symbols))
    for lf in local:
        implemented.append(lf.name)
        if lf.perthread:
            implemented.append(lf.pt_name)
    dups = set(n for n in implemented if implemented.count(n) > 1)
    if dups:
        raise SpecError(f'implemented twice: {sorted(dups)}')
    for n in implemented:
        seen_names.add(n)
    return funcs, local, backend, implemented


class Local:
    """local NAME [perthread[=IMPL[:stream]]]: NAME is hand-written in shim/.

    perthread               also export NAME_ptds/_ptsz, generated: it calls NAME
                            with each CUstream argument s as lupc_stream_id(s, 1)
    perthread=IMPL          ... it calls the shim's IMPL(args..., 1), whose last
                            parameter is `int per_thread`
    perthread=IMPL:stream   ... it calls IMPL(args..., lupc_stream_id(NULL, 1)),
                            whose last parameter is `uint64_t stream`, the wire id
                            of the stream to use (for functions without one)
    """

    def __init__(self, name, lineno, impl=None, kind=None, pt_name=None):
        self.name, self.lineno, self.impl, self.kind, self.pt_name = name, lineno, impl, kind, pt_name

    @property
    def perthread(self):
        return self.pt_name is not None


def parse_local(words, lineno, symbols):
    if len(words) not in (2, 3):
        raise SpecError(f'line {lineno}: expected "local NAME [perthread[=IMPL[:stream]]]"')
    name = words[1]
    if name not in symbols:
        raise SpecError(f'line {lineno}: {name} is not a driver symbol')
    if len(words) == 2:
        return Local(name, lineno)
    m = re.fullmatch(r'perthread(?:=([A-Za-z_][A-Za-z0-9_]*)(:stream)?)?', words[2])
    if not m:
        raise SpecError(f'line {lineno}: bad local flag {words[2]!r}')
    impl = m.group(1)
    kind = None if not impl else 'stream' if m.group(2) else 'per_thread'
    try:
        pt = perthread_name(name, symbols)
    except SpecError as e:
        raise SpecError(f'line {lineno}: {e}') from None
    return Local(name, lineno, impl, kind, pt)


def perthread_name(name, symbols):
    for suffix in ('_ptds', '_ptsz'):
        if name + suffix in symbols:
            return name + suffix
    raise SpecError(f'{name}: no _ptds/_ptsz variant among the driver symbols')


def c_params(fn):
    out = []
    for p in fn.params:
        out.append(f'{p.ctype} *{p.name}' if p.pointer else f'{p.ctype} {p.name}')
    return ', '.join(out) if out else 'void'


def to_wire(p, per_thread_expr='0'):
    if p.type == 'stream' and p.dir == 'in':
        return f'lupc_stream_id({p.name}, {per_thread_expr})'
    if p.type == 'ctx':  # a primary context's id is its server's (shim/visible.h)
        return f'lupc_ctx_to_wire((uint64_t)(uintptr_t){p.name})'
    if p.handle:
        return f'(uint64_t)(uintptr_t){p.name}'
    # CUDA_VISIBLE_DEVICES: the client's device ordinals become the server's (shim/visible.h)
    if p.type == 'device':
        return f'(int32_t)lupc_dev_to_server({p.name})'
    if p.loc:
        return f'(int32_t)lupc_loc_to_server((int){p.loc}, {p.name})'
    if p.wire == 'i32':
        return f'(int32_t){p.name}'
    return f'({p.dtype}){p.name}'


HEADER = '/* Generated by abi/gen/lupgen.py from abi/cuda_api.spec. Do not edit. */\n'


def gen_ops_h(funcs):
    o = [HEADER, '#ifndef LUPINE_OPS_H\n#define LUPINE_OPS_H\n\n#include <stddef.h>\n\nenum lup_gen_op {\n']
    for fn in funcs:
        o.append(f'\tLUP_OPC_{fn.name} = {fn.opid},\n')
    o.append('};\n\n/* Name of an op id (control or generated), or NULL. */\nconst char *lup_op_name(unsigned op);\n\n#endif\n')
    return ''.join(o)


def gen_ops_c(funcs):
    o = [HEADER, '#include "ops.h"\n#include "lupine/wire.h"\n\nconst char *lup_op_name(unsigned op)\n{\n\tswitch (op) {\n']
    # the hand-written control ops of lupine/wire.h
    for name in ('HELLO', 'GOODBYE', 'PING', 'MEMCPY_HTOD', 'MEMCPY_DTOH', 'LAUNCH', 'FUNC_INFO', 'BLOB',
                 'DTOH_ASYNC', 'GRAPH_KERNEL', 'GRAPH_KERNEL_GET', 'MAPPED_PUSH', 'MAPPED_PULL'):
        o.append(f'\tcase LUP_OP_{name}: return "{name}";\n')
    for fn in funcs:
        o.append(f'\tcase {fn.opid}: return "{fn.name}";\n')
    o.append('\tdefault: return NULL;\n\t}\n}\n')
    return ''.join(o)


def gen_client_body(fn, pt_expr, validate=True):
    """Body of a client function that marshals fn; pt_expr is the per-thread
    flag. Hand-written callers (validate=False) check arguments themselves."""
    checks = validate and any(p.type == 'devptr' for p in fn.ins)
    uploads = any(p.type == 'image' for p in fn.ins)
    dels_or_news = any(p.dir in ('new', 'del') for p in fn.params)
    b = ['\tCUresult r_;\n'] if checks or fn.outs or uploads or fn.sync or dels_or_news else []
    if validate:
        b.append('\tif (!lupc_initialized())\n\t\treturn CUDA_ERROR_NOT_INITIALIZED;\n')
    b.append(f'\tuint8_t args_[{fn.args_size()}];\n' if fn.ins else '\tuint8_t args_[1] = { 0 };\n')
    b.append('\tstruct lup_wr w_ = lup_wr_init(args_, sizeof(args_));\n')
    for p in fn.params:
        if p.pointer or p.type == 'str' or (p.type == 'image') or p.nbytes:
            b.append(f'\tif (!{p.name})\n\t\treturn CUDA_ERROR_INVALID_VALUE;\n')
    for p in (fn.ins if validate else []):
        if p.rows:
            cnt, mul = p.range
            pitch, rows = p.rows
            b.append(f'\tif ((r_ = lupc_check_range2d((uint64_t){p.name}, (uint64_t){cnt}, {mul}, (uint64_t){pitch}, '
                     f'(uint64_t){rows})) != CUDA_SUCCESS)\n\t\treturn r_;\n')
        elif p.range:
            cnt, mul = p.range
            b.append(f'\tif ((r_ = lupc_check_range((uint64_t){p.name}, (uint64_t){cnt}, {mul})) != CUDA_SUCCESS)\n\t\treturn r_;\n')
        elif p.type == 'devptr':
            b.append(f'\tif ((r_ = lupc_check_devptr((uint64_t){p.name})) != CUDA_SUCCESS)\n\t\treturn r_;\n')
    for p in fn.ins:
        if p.type == 'str':
            b.append(f'\tsize_t {p.name}_len_ = strnlen({p.name}, LUP_MAX_STR + 1);\n'
                     f'\tif ({p.name}_len_ > LUP_MAX_STR)\n\t\treturn CUDA_ERROR_INVALID_VALUE;\n')
        elif p.dir == 'new':
            b.append(f'\tuint64_t {p.name}_id_ = lupc_mint_handle();\n')
    for p in fn.ins:
        if p.type == 'image':
            b.append(f'\tuint64_t {p.name}_blob_ = 0;\n'
                     f'\tif ((r_ = lupc_upload_image({p.name}, &{p.name}_blob_)) != CUDA_SUCCESS)\n\t\treturn r_;\n')
    for p in fn.ins:
        if p.type == 'str':
            b.append(f'\tlup_wr_str16(&w_, {p.name}, {p.name}_len_);\n')
        elif p.type == 'image':
            b.append(f'\tlup_wr_u64(&w_, {p.name}_blob_);\n')
        elif p.dir == 'new':
            b.append(f'\tlup_wr_u64(&w_, {p.name}_id_);\n')
        elif p.nbytes:
            b.append(f'\tlup_wr_bytes(&w_, {p.name}, {p.nbytes});\n')
        else:
            b.append(f'\tlup_wr_{p.wire}(&w_, {to_wire(p, pt_expr)});\n')
    flags = ('LUPC_SYNC' if fn.sync else 'LUPC_ASYNC') + (' | LUPC_CTX' if fn.need_ctx else '')
    # several servers (shim/route.c): a call that names a device or a device
    # pointer goes to its server; any other, to the current context's
    ptrs = [p for p in fn.ins if p.dir == 'in' and p.type == 'devptr' and not p.pointer]
    if len(ptrs) >= 2:  # two servers' memory: daemon to daemon (shim/peer_copy.c)
        size = ptrs[0].range[0]
        b.append(f'\tif (!lupc_same_server((uint64_t){ptrs[0].name}, (uint64_t){ptrs[1].name}))\n'
                 f'\t\treturn lupc_copy_across((uint64_t){ptrs[0].name}, (uint64_t){ptrs[1].name}, '
                 f'(size_t){size}, "{fn.name}");\n')
    # a stream of one server waiting for an event of another: the event is
    # waited for here, on its own server, before the call returns
    st = next((p for p in fn.ins if p.dir == 'in' and p.type == 'stream' and not p.pointer), None)
    ev = next((p for p in fn.ins if p.dir == 'in' and p.type == 'event' and not p.pointer), None)
    if st and ev and not fn.client_custom and not fn.sync:
        b.append(f'\tif (!lupc_same_server_handles(lupc_stream_id({st.name}, per_thread_), '
                 f'(uint64_t)(uintptr_t){ev.name}))\n'
                 f'\t\treturn lupc_wait_across((uint64_t)(uintptr_t){ev.name}, "{fn.name}");\n')
    route = next((p for p in fn.ins if p.dir == 'in' and p.type == 'device' and not p.pointer), None)
    if route:
        b.append(f'\tlupc_route_dev({route.name});\n')
    elif ptrs:
        b.append(f'\tlupc_route_ptr((uint64_t){ptrs[0].name});\n')
    else:  # a handle: the server of the context it was made in
        route = next((p for p in fn.params if p.dir in ('in', 'del') and p.handle and not p.pointer), None)
        if route:
            b.append(f'\tlupc_route_handle((uint64_t)(uintptr_t){route.name});\n')
    news = [p for p in fn.params if p.dir == 'new']
    dels = [p for p in fn.params if p.dir == 'del']
    if fn.outs or news or dels or fn.sync:
        if fn.outs:
            b.append(f'\tuint8_t rep_[{fn.reply_size()}];\n\tsize_t replen_ = 0;\n')
            b.append(f'\tr_ = lupc_call(LUP_OPC_{fn.name}, {flags}, args_, w_.len, rep_, sizeof(rep_), &replen_);\n')
        else:
            b.append(f'\tr_ = lupc_call(LUP_OPC_{fn.name}, {flags}, args_, w_.len, NULL, 0, NULL);\n')
        b.append('\tif (r_ != CUDA_SUCCESS)\n\t\treturn r_;\n')
        if fn.outs:
            b.append('\tstruct lup_rd rd_ = lup_rd_init(rep_, replen_);\n')
            for i, p in enumerate(fn.outs):
                if p.nbytes:
                    b.append(f'\tuint8_t o{i}_[{p.nbytes}];\n\tlup_rd_copy(&rd_, o{i}_, {p.nbytes});\n')
                else:
                    b.append(f'\t{p.dtype} o{i}_;\n\tlup_rd_{p.wire}(&rd_, &o{i}_);\n')
            b.append(f'\tif (lup_rd_finish(&rd_) < 0)\n\t\treturn lupc_protocol_error("{fn.name}");\n')
            onum = {p.name: i for i, p in enumerate(fn.outs)}
            for i, p in enumerate(fn.outs):
                if p.nbytes:
                    b.append(f'\tmemcpy({p.name}, o{i}_, {p.nbytes});\n')
                elif p.type == 'ctx':
                    b.append(f'\t*{p.name} = ({p.ctype})(uintptr_t)lupc_ctx_from_wire(o{i}_);\n')
                elif p.handle:
                    b.append(f'\t*{p.name} = ({p.ctype})(uintptr_t)o{i}_;\n')
                elif p.type == 'device':
                    # -1: a device this process cannot see (the caller decides)
                    b.append(f'\t*{p.name} = ({p.ctype})lupc_dev_from_server(o{i}_);\n')
                elif p.loc:
                    b.append(f'\t*{p.name} = ({p.ctype})lupc_loc_from_server((int)o{onum[p.loc]}_, o{i}_);\n')
                else:
                    b.append(f'\t*{p.name} = ({p.ctype})o{i}_;\n')
        for p in news:
            b.append(f'\tlupc_note_handle({p.name}_id_, LUPC_H_{p.type.upper()});\n')
            b.append(f'\t*{p.name} = ({p.ctype})(uintptr_t){p.name}_id_;\n')
        for p in fn.params:
            if p.dir == 'del':
                b.append(f'\tlupc_forget_handle((uint64_t)(uintptr_t){p.name});\n')
        b.append('\treturn CUDA_SUCCESS;\n')
    else:
        b.append(f'\treturn lupc_call(LUP_OPC_{fn.name}, {flags}, args_, w_.len, NULL, 0, NULL);\n')
    if not fn.ins:
        b.insert(len(b) - 1, '\t(void)w_;\n')
    return ''.join(b)


def gen_shim(funcs, symbols, extra_h=''):
    o = [HEADER, '#include <stdint.h>\n#include <string.h>\n#include <cuda.h>\n#include <cudaProfiler.h>\n\n#include "buf.h"\n#include "ops.h"\n'
         '#include "shim_gen.h"\n#include "client.h"\n\n#define EXPORT __attribute__((visibility("default")))\n\n']
    h = [HEADER, '#ifndef LUPINE_SHIM_GEN_H\n#define LUPINE_SHIM_GEN_H\n\n#include <cuda.h>\n#include <cudaProfiler.h>\n#include <stdint.h>\n\n']
    for fn in funcs:
        if fn.internal or fn.client_custom:
            # marshalling helper for a hand-written or internal function
            h.append(f'CUresult lupc_send_{fn.name}({c_params(fn)});\n')
            o.append(f'CUresult lupc_send_{fn.name}({c_params(fn)})\n{{\n{gen_client_body(fn, "0", validate=False)}}}\n\n')
            continue
        if fn.perthread:
            pt = perthread_name(fn.name, symbols)
            o.append(f'static CUresult gen_{fn.name}({c_params(fn)}, int per_thread_)\n{{\n{gen_client_body(fn, "per_thread_")}}}\n\n')
            call = ', '.join([p.name for p in fn.params] + ['%s'])
            o.append(f'EXPORT CUresult CUDAAPI {fn.name}({c_params(fn)})\n{{\n\treturn gen_{fn.name}({call % "0"});\n}}\n\n')
            o.append(f'EXPORT CUresult CUDAAPI {pt}({c_params(fn)});\n')
            o.append(f'EXPORT CUresult CUDAAPI {pt}({c_params(fn)})\n{{\n\treturn gen_{fn.name}({call % "1"});\n}}\n\n')
        else:
            o.append(f'EXPORT CUresult CUDAAPI {fn.name}({c_params(fn)})\n{{\n{gen_client_body(fn, "0")}}}\n\n')
    h.append(extra_h)
    h.append('\n#endif\n')
    return ''.join(o), ''.join(h)


def gen_stubs(symbols, implemented):
    impl = set(implemented)
    o = [HEADER, '/* Every driver symbol lupine does not implement yet: each one logs its\n'
         ' * name once and returns CUDA_ERROR_NOT_SUPPORTED. No cuda.h here: the\n'
         ' * stubs take no arguments, which is safe for any caller under the SysV ABI. */\n'
         '#include "unsupported.h"\n\n#define EXPORT __attribute__((visibility("default")))\n\n']
    for s in symbols:
        if s in impl:
            continue
        o.append(f'EXPORT int {s}(void);\nEXPORT int {s}(void)\n{{\n\tstatic int once;\n'
                 f'\treturn lupc_unsupported("{s}", &once);\n}}\n\n')
    return ''.join(o)


def parse_typedefs(path):
    """base name -> {'default': [versions], 'pt': [versions]} from PFN typedefs."""
    out = {}
    rx = re.compile(r'typedef\s+CUresult\s+\(CUDAAPI\s+\*PFN_(cu\w+?)_v(\d+)(_pt(?:ds|sz))?\)')
    with open(path) as f:
        for line in f:
            m = rx.search(line)
            if not m:
                continue
            base, ver, pt = m.group(1), int(m.group(2)), m.group(3)
            e = out.setdefault(base, {'default': set(), 'pt': set()})
            e['pt' if pt else 'default'].add(ver)
    return out


def version_table(symbols, typedefs):
    """Rows (base, min_version, symbol, per_thread_symbol_or_None)."""
    symset = set(symbols)
    rows = []
    for base in sorted(typedefs):
        vers = sorted(typedefs[base]['default'])
        cands = [base] if base in symset else []
        k = 2
        while f'{base}_v{k}' in symset:
            cands.append(f'{base}_v{k}')
            k += 1
        if not cands or not vers:
            continue
        if len(vers) > len(cands):
            vers = vers[-len(cands):]      # the oldest ABIs are not exported any more
        elif len(cands) > len(vers):
            cands = cands[-len(vers):]
        for v, sym in zip(vers, cands):
            pt = None
            for suf in ('_ptds', '_ptsz'):
                if sym + suf in symset:
                    pt = sym + suf
            rows.append((base, v, sym, pt))
    return rows


def gen_symtab(symbols, typedefs):
    o = [HEADER, '/* Symbol and version tables for cuGetProcAddress. No cuda.h here: every\n'
         ' * symbol is declared as a plain function only to take its address. */\n'
         '#include <stddef.h>\n\n#include "symtab.h"\n\n']
    for s in symbols:
        o.append(f'extern void {s}(void);\n')
    o.append('\nconst struct lupc_sym lupc_symbols[] = {\n')
    for s in sorted(symbols):
        o.append(f'\t{{ "{s}", (void *){s} }},\n')
    o.append('};\nconst size_t lupc_n_symbols = sizeof(lupc_symbols) / sizeof(lupc_symbols[0]);\n\n')
    o.append('const struct lupc_symver lupc_symvers[] = {\n')
    for base, v, sym, pt in version_table(symbols, typedefs):
        pts = f'"{pt}"' if pt else 'NULL'
        o.append(f'\t{{ "{base}", {v}, "{sym}", {pts} }},\n')
    o.append('};\nconst size_t lupc_n_symvers = sizeof(lupc_symvers) / sizeof(lupc_symvers[0]);\n')
    return ''.join(o)


def split_params(params):
    """A C parameter list split at its top-level commas."""
    parts, depth, cur = [], 0, ''
    for ch in params:
        if ch == ',' and depth == 0:
            parts.append(cur.strip())
            cur = ''
            continue
        depth += ch == '('
        depth -= ch == ')'
        cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def parse_prototypes(path):
    """'PFN_cuX_vN[_ptds|_ptsz]' -> (parameter text, [argument names]) from cudaTypedefs.h."""
    with open(path) as f:
        text = f.read()
    # the old ABIs' typedefs are only there for the driver's own build
    text = re.sub(r'#if defined\(__CUDA_API_VERSION_INTERNAL\).*?#endif', '', text, flags=re.S)
    out = {}
    rx = re.compile(r'typedef\s+CUresult\s+\(CUDAAPI\s+\*(PFN_cu\w+)\)\s*\(([^;]*)\)\s*;', re.S)
    for m in rx.finditer(text):
        params = ' '.join(m.group(2).split())
        parts = split_params(params)
        if parts == ['void'] or not parts:
            out[m.group(1)] = ('void', [])
            continue
        names = []
        for p in parts:
            fm = re.search(r'\(\s*(?:\w+\s+)?\*\s*(\w+)\s*\)', p)
            nm = fm.group(1) if fm else re.search(r'(\w+)\s*(?:\[[^\]]*\]\s*)*$', p).group(1)
            names.append(nm)
        if len(set(names)) != len(names):
            continue
        out[m.group(1)] = (params, names)
    return out


def gen_trace(symbols, typedefs, protos):
    """shim_trace.c: for LUPINE_TRACE=3, a wrapper per versioned symbol that
    cuGetProcAddress hands out instead, logging every call and its result."""
    o = [HEADER, '/* Tracing wrappers for cuGetProcAddress (LUPINE_TRACE=3): each calls the\n'
         ' * shim\'s own function and logs the call with its CUresult. */\n'
         '#include <cudaTypedefs.h>\n\n#include "symtab.h"\n\n'
         'void lupc_trace_result(const char *name, CUresult r);\n\n']
    rows = []
    for base, v, sym, pt in version_table(symbols, typedefs):
        for target, pfn in ((sym, f'PFN_{base}_v{v}'), (pt, None)):
            if not target:
                continue
            if pfn is None:
                pfn = f'PFN_{base}_v{v}' + target[len(sym):]
            if pfn not in protos or target in [r[0] for r in rows]:
                continue
            rows.append((target, pfn))
    for target, pfn in rows:
        params, names = protos[pfn]
        o.append(f'extern char lupc_tt_{target}[] __asm__("{target}");\n'
                 f'static CUresult tr_{target}({params})\n{{\n'
                 f'\tCUresult r = (({pfn})(void *)lupc_tt_{target})({", ".join(names)});\n'
                 f'\tlupc_trace_result("{target}", r);\n\treturn r;\n}}\n\n')
    o.append('const struct lupc_sym lupc_trace_symbols[] = {\n')
    for target, _ in sorted(rows):
        o.append(f'\t{{ "{target}", (void *)tr_{target} }},\n')
    o.append('};\nconst size_t lupc_n_trace_symbols = sizeof(lupc_trace_symbols) / sizeof(lupc_trace_symbols[0]);\n')
    return ''.join(o)


def gen_perthread(local, symbols, typedefs, protos):
    """shim_perthread.c: the _ptds/_ptsz variant of every hand-written function
    with a perthread flag, and (for shim_gen.h) the prototypes of the IMPLs
    those call, so that the compiler holds the hand-written ones to the spec.
    The parameter lists come from cudaTypedefs.h: a variant takes exactly
    the arguments of its base function."""
    pfn_of = {sym: f'PFN_{base}_v{v}' for base, v, sym, _ in version_table(symbols, typedefs)}
    c = [HEADER, '/* The per-thread default stream variants of the shim\'s hand-written\n'
         ' * functions (the perthread flags of the spec\'s local lines). In them stream\n'
         ' * 0 means the calling thread\'s stream, CU_STREAM_PER_THREAD. */\n'
         '#include <stdint.h>\n#include <cuda.h>\n\n#include "client.h"\n#include "shim_gen.h"\n\n'
         '#define EXPORT __attribute__((visibility("default")))\n\n']
    h = []
    for lf in local:
        if not lf.perthread:
            continue
        where = f'line {lf.lineno}: {lf.name}'
        pfn = pfn_of.get(lf.name)
        if pfn not in protos:
            raise SpecError(f'{where}: no prototype in cudaTypedefs.h')
        params, names = protos[pfn]
        streams = [n for part, n in zip(split_params(params), names)
                   if re.fullmatch(r'CUstream\s+\w+', part)]
        if lf.impl is None:
            if not streams:
                raise SpecError(f'{where}: perthread without =IMPL needs a CUstream parameter')
            args = [f'(CUstream)(uintptr_t)lupc_stream_id({n}, 1)' if n in streams else n for n in names]
            # the base name may be a macro in cuda.h (cuStreamGetCaptureInfo is _v3 there)
            c.append(f'#undef {lf.name}\nCUresult CUDAAPI {lf.name}({params});\n')
            call = f'{lf.name}({", ".join(args)})'
        elif lf.kind == 'stream':
            if streams:
                raise SpecError(f'{where}: perthread=IMPL:stream is for functions without a CUstream parameter')
            proto = f'CUresult {lf.impl}({params}, uint64_t stream);\n'
            call = f'{lf.impl}({", ".join(names + ["lupc_stream_id(NULL, 1)"])})'
        else:
            proto = f'CUresult {lf.impl}({params}, int per_thread);\n'
            call = f'{lf.impl}({", ".join(names + ["1"])})'
        if lf.impl is not None and proto not in h:
            h.append(proto)   # one impl may serve several functions
        c.append(f'EXPORT CUresult CUDAAPI {lf.pt_name}({params});\n'
                 f'EXPORT CUresult CUDAAPI {lf.pt_name}({params})\n{{\n\treturn {call};\n}}\n\n')
    if h:
        h.insert(0, '\n/* The shim\'s implementations that the generated per-thread variants call\n'
                 ' * (perthread=IMPL in the spec). */\n')
    return ''.join(c), ''.join(h)


def gen_version_script(symbols):
    # lupine_shim_version marks the library as the shim (lupined refuses to load it)
    body = ''.join(f'\t\t{s};\n' for s in list(symbols) + ['lupine_shim_version', 'lupine_context_generation'])
    return '/* Generated by abi/gen/lupgen.py. */\n{\n\tglobal:\n' + body + '\tlocal:\n\t\t*;\n};\n'


def gen_worker(funcs, backend):
    """worker_gen.h: backend table + custom handler prototypes; worker_gen.c: decoders + dispatch."""
    be_names = []
    for fn in funcs:
        if not fn.worker_custom and fn.name not in be_names:
            be_names.append(fn.name)
    for n in backend:
        if n not in be_names:
            be_names.append(n)
    h = [HEADER, '#ifndef LUPINE_WORKER_GEN_H\n#define LUPINE_WORKER_GEN_H\n\n#include <stdbool.h>\n'
         '#include <stdint.h>\n#include <cuda.h>\n#include <cudaProfiler.h>\n\n#include "buf.h"\n#include "lupine/wire.h"\n\n'
         'struct lupw_session;\n\n'
         '/* older ABIs the worker uses that cuda.h no longer declares */\n'
         'CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);\n\n'
         '/* The driver functions the worker calls, loaded with dlsym(). */\nstruct lupw_backend {\n']
    for n in be_names:
        h.append(f'\t__typeof__({n}) *{n};\n')
    h.append('};\n\nstruct lupw_backend_sym {\n\tconst char *name;\n\tsize_t offset;\n};\n'
             'extern const struct lupw_backend_sym lupw_backend_syms[];\nextern const size_t lupw_n_backend_syms;\n\n')
    h.append('/* A handler decodes and validates its arguments (returning -EBADMSG for a\n * malformed or hostile frame), then, if *ret_status is still CUDA_SUCCESS on\n * entry (no latched error), binds the context `ctx` when the op needs one and\n * executes the call. */\ntypedef int (*lupw_handler_fn)(struct lupw_session *s, uint64_t ctx, struct lup_rd *rd, struct lup_wr *out, CUresult *ret_status);\n'
             'struct lupw_op {\n\tconst char *name;\n\tlupw_handler_fn fn;\n\tbool sync;\n\tbool need_ctx;\n};\n'
             '/* Indexed by op id - 256; fn == NULL for ids not in the spec. */\n'
             'extern const struct lupw_op lupw_ops[];\nextern const size_t lupw_n_ops;\n\n'
             '/* Hand-written handlers (worker=custom in the spec). */\n')
    for fn in funcs:
        if fn.worker_custom:
            ps = ['struct lupw_session *s']
            for p in fn.params:
                t = 'const char *' if p.type == 'str' else p.ctype
                ps.append(f'{t} *{p.name}' if p.pointer else f'{t} {p.name}')
            h.append(f'CUresult lupw_{fn.name}({", ".join(ps)});\n')
    h.append('\n/* handle kinds in the worker\'s handle table */\nenum lupw_handle_kind {\n')
    for i, k in enumerate(HANDLE_KINDS, 1):
        h.append(f'\tLUPW_H_{k.upper()} = {i},\n')
    h.append('};\n')
    h.append('\n/* Helpers the generated decoders call (daemon/worker/checks.c). */\n'
             'int lupw_check_devptr(struct lupw_session *s, uint64_t p);\n'
             'CUresult lupw_check_range(struct lupw_session *s, uint64_t p, uint64_t count, uint64_t mul);\n'
             'CUresult lupw_check_range2d(struct lupw_session *s, uint64_t p, uint64_t count, uint64_t mul,\n'
             '                            uint64_t pitch, uint64_t rows);\n'
             'CUresult lupw_stream(struct lupw_session *s, uint64_t id, CUstream *ret);\n'
             'CUresult lupw_device(struct lupw_session *s, int32_t ordinal, CUdevice *ret);\n'
             'CUresult lupw_ctx(struct lupw_session *s, uint64_t id, CUcontext *ret);\n'
             '/* an existing handle of `kind`, else CUDA_ERROR_INVALID_HANDLE */\n'
             'CUresult lupw_handle(struct lupw_session *s, int kind, uint64_t id, void **ret);\n'
             '/* -EBADMSG (and a reason) unless id is a well-formed id not in use */\n'
             'int lupw_handle_fresh(struct lupw_session *s, uint64_t id);\n'
             'CUresult lupw_handle_put(struct lupw_session *s, int kind, uint64_t id, void *real);\n'
             'void lupw_handle_del(struct lupw_session *s, uint64_t id);\n'
             '/* takes an uploaded blob; -EBADMSG if there is none complete under that id */\n'
             'int lupw_blob_take(struct lupw_session *s, uint64_t id, const void **ret, size_t *ret_len);\n'
             'void lupw_blob_release(struct lupw_session *s, uint64_t id);\n'
             '/* CUDA_ERROR_INVALID_IMAGE unless the blob is one well-formed module image */\n'
             'CUresult lupw_check_image(const void *p, size_t n);\n'
             'const struct lupw_backend *lupw_be(struct lupw_session *s);\n'
             'CUresult lupw_bind_ctx(struct lupw_session *s, uint64_t id);\n'
             'uint64_t lupw_xlate(const struct lupw_session *s, uint64_t p);\n'
             'void lupw_set_why(struct lupw_session *s, const char *why);\n\n#endif\n')

    c = [HEADER, '#include <stddef.h>\n#include <errno.h>\n#include <string.h>\n\n#include "worker_gen.h"\n#include "ops.h"\n\n']
    c.append('const struct lupw_backend_sym lupw_backend_syms[] = {\n')
    for n in be_names:
        c.append(f'\t{{ "{n}", offsetof(struct lupw_backend, {n}) }},\n')
    c.append('};\nconst size_t lupw_n_backend_syms = sizeof(lupw_backend_syms) / sizeof(lupw_backend_syms[0]);\n\n')
    for fn in funcs:
        c.append(f'static int h_{fn.name}(struct lupw_session *s, uint64_t ctx, struct lup_rd *rd, struct lup_wr *out, CUresult *ret_status)\n{{\n')
        c.append('\tCUresult st_ = *ret_status;\n')
        idx = {p.name: i for i, p in enumerate(fn.ins)}
        for i, p in enumerate(fn.ins):
            if p.type == 'str':
                c.append(f'\tconst char *a{i}_p_;\n\tsize_t a{i}_n_;\n\tlup_rd_str16(rd, LUP_MAX_STR, &a{i}_p_, &a{i}_n_);\n')
            elif p.nbytes:
                c.append(f'\tconst uint8_t *a{i}_ = NULL;\n\tlup_rd_bytes(rd, {p.nbytes}, &a{i}_);\n')
            else:
                c.append(f'\t{p.dtype} a{i}_;\n\tlup_rd_{p.wire}(rd, &a{i}_);\n')
        c.append(f'\tif (lup_rd_finish(rd) < 0) {{\n\t\tlupw_set_why(s, "malformed arguments for {fn.name}");\n\t\treturn -EBADMSG;\n\t}}\n')
        # protocol-level validation first: a hostile frame closes the connection
        for p in fn.ins:
            i = idx[p.name]
            if p.type == 'devptr':
                c.append(f'\tif (lupw_check_devptr(s, a{i}_) < 0)\n\t\treturn -EBADMSG;\n')
            elif p.dir == 'new':
                c.append(f'\tif (lupw_handle_fresh(s, a{i}_) < 0)\n\t\treturn -EBADMSG;\n')
            elif p.type == 'str':
                c.append(f'\tchar a{i}_s_[LUP_MAX_STR + 1];\n\tmemcpy(a{i}_s_, a{i}_p_, a{i}_n_);\n\ta{i}_s_[a{i}_n_] = 0;\n')
        images = [p for p in fn.ins if p.type == 'image']
        for p in images:
            i = idx[p.name]
            c.append(f'\tconst void *img{i}_ = NULL;\n\tsize_t img{i}_n_ = 0;\n'
                     f'\tif (lupw_blob_take(s, a{i}_, &img{i}_, &img{i}_n_) < 0)\n\t\treturn -EBADMSG;\n'
                     f'\tif (st_ == CUDA_SUCCESS)\n\t\tst_ = lupw_check_image(img{i}_, img{i}_n_);\n')
        if fn.need_ctx:
            c.append('\tif (st_ == CUDA_SUCCESS)\n\t\tst_ = lupw_bind_ctx(s, ctx);\n')
        else:
            c.append('\t(void)ctx;\n')
        for p in fn.ins:
            i = idx[p.name]
            if p.rows:
                cnt, mul = p.range
                pitch, rows = p.rows
                c.append(f'\tif (st_ == CUDA_SUCCESS)\n\t\tst_ = lupw_check_range2d(s, a{i}_, a{idx[cnt]}_, {mul}, '
                         f'a{idx[pitch]}_, a{idx[rows]}_);\n')
            elif p.range:
                cnt, mul = p.range
                c.append(f'\tif (st_ == CUDA_SUCCESS)\n\t\tst_ = lupw_check_range(s, a{i}_, a{idx[cnt]}_, {mul});\n')
            if p.dir == 'new':
                c.append(f'\t{p.ctype} v{i}_ = NULL;\n')
            elif p.type == 'stream' and p.dir == 'in':
                # the default streams are valid here, but never destroyable
                c.append(f'\tCUstream v{i}_ = NULL;\n\tif (st_ == CUDA_SUCCESS)\n\t\tst_ = lupw_stream(s, a{i}_, &v{i}_);\n')
            elif p.handle:
                c.append(f'\tvoid *h{i}_ = NULL;\n\tif (st_ == CUDA_SUCCESS)\n\t\tst_ = lupw_handle(s, LUPW_H_{p.type.upper()}, a{i}_, &h{i}_);\n'
                         f'\t{p.ctype} v{i}_ = ({p.ctype})h{i}_;\n')
            elif p.type == 'device':
                c.append(f'\tCUdevice v{i}_ = 0;\n\tif (st_ == CUDA_SUCCESS)\n\t\tst_ = lupw_device(s, a{i}_, &v{i}_);\n')
            elif p.type == 'ctx':
                c.append(f'\tCUcontext v{i}_ = NULL;\n\tif (st_ == CUDA_SUCCESS)\n\t\tst_ = lupw_ctx(s, a{i}_, &v{i}_);\n')
        outs = {p.name: j for j, p in enumerate(fn.outs)}
        for p in fn.outs:
            if p.nbytes:
                c.append(f'\tuint8_t o{outs[p.name]}_[{p.nbytes}] = {{ 0 }};\n')
                continue
            init = 'NULL' if p.handle else '0'
            c.append(f'\t{p.ctype} o{outs[p.name]}_ = {init};\n')
        call = []
        for p in fn.params:
            if p.dir == 'out':
                call.append(f'o{outs[p.name]}_' if p.nbytes else f'&o{outs[p.name]}_')
                continue
            i = idx[p.name]
            if p.dir == 'new':
                call.append(f'&v{i}_')
            elif p.type == 'str':
                call.append(f'a{i}_s_')
            elif p.type == 'image':
                call.append(f'img{i}_')
            elif p.handle or p.type in ('device', 'ctx'):
                call.append(f'v{i}_')
            else:
                call.append(f'({p.ctype})a{i}_')
        if fn.worker_custom:
            target = f'lupw_{fn.name}(s' + ''.join(', ' + a for a in call) + ')'
        else:
            target = f'lupw_be(s)->{fn.name}(' + ', '.join(call) + ')'
        # checked as the client knows them; used where they are now (a
        # restore may have moved module globals)
        for p in fn.ins:
            if p.type == 'devptr':
                c.append(f'\ta{idx[p.name]}_ = lupw_xlate(s, a{idx[p.name]}_);\n')
        c.append(f'\tif (st_ == CUDA_SUCCESS)\n\t\tst_ = {target};\n')
        for p in images:
            c.append(f'\tlupw_blob_release(s, a{idx[p.name]}_);\n')
        for p in fn.ins:
            i = idx[p.name]
            if p.dir == 'new':
                c.append(f'\tif (st_ == CUDA_SUCCESS)\n\t\tst_ = lupw_handle_put(s, LUPW_H_{p.type.upper()}, a{i}_, (void *)v{i}_);\n')
            elif p.dir == 'del':
                c.append(f'\tif (st_ == CUDA_SUCCESS)\n\t\tlupw_handle_del(s, a{i}_);\n')
        if fn.outs:
            c.append('\tif (st_ == CUDA_SUCCESS) {\n')
            for p in fn.outs:
                j = outs[p.name]
                if p.nbytes:
                    c.append(f'\t\tlup_wr_bytes(out, o{j}_, {p.nbytes});\n')
                    continue
                conv = f'(uint64_t)(uintptr_t)o{j}_' if p.handle or p.type == 'ctx' else f'({p.dtype})o{j}_'
                c.append(f'\t\tlup_wr_{p.wire}(out, {conv});\n')
            c.append('\t}\n')
        c.append('\t*ret_status = st_;\n\treturn 0;\n}\n\n')
    maxid = max(fn.opid for fn in funcs)
    c.append(f'const struct lupw_op lupw_ops[{maxid - 255}] = {{\n')
    for fn in funcs:
        c.append(f'\t[{fn.opid - 256}] = {{ "{fn.name}", h_{fn.name}, {str(fn.sync).lower()}, {str(fn.need_ctx).lower()} }},\n')
    c.append(f'}};\nconst size_t lupw_n_ops = {maxid - 255};\n')
    return ''.join(h), ''.join(c)


def gen_errors(cuda_h):
    """CUresult code -> name table from cuda.h's cudaError_enum."""
    with open(cuda_h) as f:
        text = f.read()
    m = re.search(r'typedef enum cudaError_enum \{(.*?)\} CUresult;', text, re.S)
    if not m:
        raise SpecError('cudaError_enum not found in cuda.h')
    body = re.sub(r'/\*.*?\*/', '', m.group(1), flags=re.S)
    rows = re.findall(r'(CUDA_(?:SUCCESS|ERROR_\w+))\s*=\s*(\d+)', body)
    o = [HEADER, '#include "errors.h"\n\nconst struct lupc_errname lupc_errnames[] = {\n']
    for name, code in sorted(rows, key=lambda r: int(r[1])):
        o.append(f'\t{{ {code}, "{name}" }},\n')
    o.append('};\nconst size_t lupc_n_errnames = sizeof(lupc_errnames) / sizeof(lupc_errnames[0]);\n')
    return ''.join(o)


def write_if_changed(path, text):
    try:
        with open(path) as f:
            if f.read() == text:
                return
    except FileNotFoundError:
        pass
    with open(path + '.tmp', 'w') as f:
        f.write(text)
    os.replace(path + '.tmp', path)


def main(argv):
    if len(argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    spec, symfile, typedefs_h, outdir = argv[1:]
    with open(symfile) as f:
        symbols = [l.strip() for l in f if l.strip() and not l.startswith('#')]
    try:
        funcs, local, backend, implemented = parse_spec(spec, set(symbols))
    except SpecError as e:
        print(f'{spec}: {e}', file=sys.stderr)
        return 1
    try:
        typedefs = parse_typedefs(typedefs_h)
        protos = parse_prototypes(typedefs_h)
        errors_c = gen_errors(os.path.join(os.path.dirname(typedefs_h), 'cuda.h'))
    except (OSError, SpecError) as e:
        print(f'lupgen: {e}', file=sys.stderr)
        return 1
    try:
        perthread_c, perthread_h = gen_perthread(local, symbols, typedefs, protos)
    except SpecError as e:
        print(f'{spec}: {e}', file=sys.stderr)
        return 1
    shim_c, shim_h = gen_shim(funcs, set(symbols), perthread_h)
    worker_h, worker_c = gen_worker(funcs, backend)
    outputs = {
        'ops.h': gen_ops_h(funcs),
        'ops.c': gen_ops_c(funcs),
        'shim_gen.c': shim_c,
        'shim_gen.h': shim_h,
        'shim_stubs.c': gen_stubs(symbols, implemented),
        'shim_symtab.c': gen_symtab(symbols, typedefs),
        'libcuda.sym': gen_version_script(symbols),
        'worker_gen.h': worker_h,
        'worker_gen.c': worker_c,
        'shim_errors.c': errors_c,
        'shim_trace.c': gen_trace(symbols, typedefs, protos),
        'shim_perthread.c': perthread_c,
    }
    for name, text in outputs.items():
        write_if_changed(os.path.join(outdir, name), text)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
