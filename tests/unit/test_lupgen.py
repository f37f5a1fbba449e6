#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The generator rejects bad specs with a message naming the line, and its
version table maps base names to the right versioned symbols."""
import importlib.util
import os
import sys
import tempfile
import unittest

GEN = sys.argv.pop(1)
TYPEDEFS = sys.argv.pop(1)
spec = importlib.util.spec_from_file_location('lupgen', GEN)
lupgen = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lupgen)

SYMS = {'cuMemAlloc', 'cuMemAlloc_v2', 'cuMemsetD8_v2', 'cuMemsetD8_v2_ptds', 'cuMemsetD2D8_v2', 'cuCtxSynchronize'}


def parse(text):
    with tempfile.NamedTemporaryFile('w', suffix='.spec', delete=False) as f:
        f.write(text)
    try:
        return lupgen.parse_spec(f.name, SYMS)
    finally:
        os.unlink(f.name)


class SpecTests(unittest.TestCase):
    def bad(self, text, needle):
        with self.assertRaises(lupgen.SpecError) as cm:
            parse(text)
        self.assertIn(needle, str(cm.exception))

    def test_handles(self):
        funcs, _, _, _ = parse('256 cuCtxSynchronize async ctx new:stream:s in:uint:f\n'
                               '257 cuMemAlloc_v2 sync del:event:e in:str:name in:image:img out:int=CUenum:v\n')
        self.assertEqual([p.dir for p in funcs[0].params], ['new', 'in'])
        self.assertEqual(funcs[0].args_size(), 12)           # minted id + flags
        self.assertEqual(funcs[1].outs[0].ctype, 'CUenum')
        self.assertEqual(funcs[1].args_size(), 8 + 2 + 4096 + 8)

    def test_good(self):
        funcs, local, backend, impl = parse('256 cuMemsetD8_v2 async ctx perthread in:devptr:d:range=N in:u8:v in:size_t:N\n')
        self.assertEqual(impl, ['cuMemsetD8_v2', 'cuMemsetD8_v2_ptds'])
        self.assertEqual(funcs[0].args_size(), 17)
        funcs, _, _, _ = parse('256 cuMemsetD2D8_v2 async ctx in:devptr:d:range=W:pitch=P:rows=H in:size_t:P '
                               'in:u8:v in:size_t:W in:size_t:H\n')
        self.assertEqual((funcs[0].params[0].range, funcs[0].params[0].rows), (('W', 1), ('P', 'H')))
        funcs, _, _, _ = parse('256 lupRaw sync internal worker=custom out:bytes128:m in:bytes40:d in:int:x\n')
        self.assertEqual((funcs[0].args_size(), funcs[0].reply_size()), (44, 128))

    def test_rejects(self):
        self.bad('10 cuCtxSynchronize sync\n', 'out of range')
        self.bad('256 cuCtxSynchronize sync\n256 cuMemAlloc_v2 sync\n', 'reused')
        self.bad('256 cuNope sync\n', 'not a driver symbol')
        self.bad('256 cuCtxSynchronize maybe\n', 'mode')
        self.bad('256 cuCtxSynchronize sync frobnicate\n', 'unknown flags')
        self.bad('256 cuCtxSynchronize async out:int:x\n', 'async ops cannot have outputs')
        self.bad('256 cuCtxSynchronize sync in:double:x\n', 'bad parameter')
        self.bad('256 cuCtxSynchronize sync new:int:x\n', 'needs a handle type')
        self.bad('256 cuCtxSynchronize sync out:str:x\n', 'cannot be an output')
        self.bad('256 cuCtxSynchronize sync in:size_t=CUfoo:x\n', 'override')
        self.bad('256 cuCtxSynchronize sync in:devptr:p:range=Q\n', 'unknown Q')
        self.bad('256 cuCtxSynchronize sync in:devptr:p:pitch=p\n', 'go together')
        self.bad('256 cuCtxSynchronize sync in:bytes0:p\n', 'bytesN')
        self.bad('256 cuCtxSynchronize sync in:bytes300:p\n', 'bytesN')
        self.bad('256 cuCtxSynchronize sync new:bytes8:p\n', 'bytesN')
        self.bad('256 cuCtxSynchronize sync in:size_t:n in:devptr:p:range=n:pitch=n*2:rows=n\n', 'bad parameter option')
        self.bad('256 cuCtxSynchronize sync in:size_t:n in:devptr:p:range=n:pitch=n:rows=R\n', 'unknown R')
        self.bad('256 cuCtxSynchronize sync\nlocal cuCtxSynchronize\n', 'implemented twice')
        self.bad('256 lupThing sync internal\n', 'internal ops')
        self.bad('local cuMemsetD8_v2 perthread=f:sideways\n', 'bad local flag')
        self.bad('local cuMemAlloc_v2 perthread\n', 'no _ptds/_ptsz variant')
        self.bad('local cuMemsetD8_v2 perthread\nlocal cuMemsetD8_v2_ptds\n', 'implemented twice')

    def test_device_ordinals(self):
        """CUDA_VISIBLE_DEVICES: device ordinals and location ids of devices are
        translated in the generated stubs, both ways (shim/visible.h)."""
        funcs, _, _, _ = parse('256 lupA sync internal worker=custom in:device:dev in:int:lt in:int:id:loc=lt '
                               'out:device:got out:int:olt out:int:oid:loc=olt\n')
        body = lupgen.gen_client_body(funcs[0], '0', validate=False)
        self.assertIn('lup_wr_i32(&w_, (int32_t)lupc_dev_to_server(dev));', body)
        self.assertIn('lup_wr_i32(&w_, (int32_t)lupc_loc_to_server((int)lt, id));', body)
        self.assertIn('*got = (CUdevice)lupc_dev_from_server(o0_);', body)
        self.assertIn('*oid = (int)lupc_loc_from_server((int)o1_, o2_);', body)
        self.assertIn('lup_wr_i32(&w_, (int32_t)lt);', body)   # the type itself travels as it is
        self.bad('256 lupA sync internal worker=custom in:int:id:loc=lt in:int:lt\n', 'earlier int in parameter')
        self.bad('256 lupA sync internal worker=custom out:int:lt in:int:id:loc=lt\n', 'earlier int in parameter')
        self.bad('256 lupA sync internal worker=custom in:u32:lt in:u32:id:loc=lt\n', 'bad parameter option')
        self.bad('256 lupA sync internal worker=custom in:int:lt in:int:id:loc=lt:loc=lt\n', 'bad parameter option')

    def test_local_perthread(self):
        _, local, _, impl = parse('local cuMemsetD8_v2 perthread=memset_impl:stream\nlocal cuMemAlloc_v2\n')
        self.assertEqual(impl, ['cuMemsetD8_v2', 'cuMemsetD8_v2_ptds', 'cuMemAlloc_v2'])
        self.assertEqual((local[0].pt_name, local[0].impl, local[0].kind), ('cuMemsetD8_v2_ptds', 'memset_impl', 'stream'))
        self.assertFalse(local[1].perthread)


class VersionTableTests(unittest.TestCase):
    def test_real_typedefs(self):
        td = lupgen.parse_typedefs(TYPEDEFS)
        syms = ['cuCtxCreate', 'cuCtxCreate_v2', 'cuCtxCreate_v3', 'cuCtxCreate_v4',
                'cuMemcpyHtoD', 'cuMemcpyHtoD_v2', 'cuMemcpyHtoD_v2_ptds']
        rows = {(b, v): (s, pt) for b, v, s, pt in lupgen.version_table(syms, td)}
        self.assertEqual(rows[('cuCtxCreate', 12050)], ('cuCtxCreate_v4', None))
        self.assertEqual(rows[('cuCtxCreate', 3020)], ('cuCtxCreate_v2', None))
        self.assertEqual(rows[('cuMemcpyHtoD', 3020)], ('cuMemcpyHtoD_v2', 'cuMemcpyHtoD_v2_ptds'))


class PerThreadTests(unittest.TestCase):
    """The generated _ptds/_ptsz variants of hand-written functions, from the real cudaTypedefs.h."""
    SYMS = ['cuMemcpyHtoD_v2', 'cuMemcpyHtoD_v2_ptds', 'cuMemcpyHtoDAsync_v2', 'cuMemcpyHtoDAsync_v2_ptsz',
            'cuLaunchKernelEx', 'cuLaunchKernelEx_ptsz']

    def gen(self, lines):
        with tempfile.NamedTemporaryFile('w', suffix='.spec', delete=False) as f:
            f.write(lines)
        try:
            _, local, _, _ = lupgen.parse_spec(f.name, set(self.SYMS))
        finally:
            os.unlink(f.name)
        td = lupgen.parse_typedefs(TYPEDEFS)
        return lupgen.gen_perthread(local, self.SYMS, td, lupgen.parse_prototypes(TYPEDEFS))

    def test_calls(self):
        c, h = self.gen('local cuMemcpyHtoD_v2 perthread=htod:stream\nlocal cuMemcpyHtoDAsync_v2 perthread\n'
                        'local cuLaunchKernelEx perthread=launch_ex\n')
        self.assertIn('cuMemcpyHtoD_v2_ptds(CUdeviceptr_v2 dstDevice, const void *srcHost, size_t ByteCount)\n{\n'
                      '\treturn htod(dstDevice, srcHost, ByteCount, lupc_stream_id(NULL, 1));', c)
        self.assertIn('\treturn cuMemcpyHtoDAsync_v2(dstDevice, srcHost, ByteCount, '
                      '(CUstream)(uintptr_t)lupc_stream_id(hStream, 1));', c)
        self.assertIn('\treturn launch_ex(config, f, kernelParams, extra, 1);', c)
        self.assertIn('CUresult htod(CUdeviceptr_v2 dstDevice, const void *srcHost, size_t ByteCount, uint64_t stream);', h)
        self.assertIn('CUresult launch_ex(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra, '
                      'int per_thread);', h)

    def test_rejects(self):
        for line, needle in (('local cuMemcpyHtoD_v2 perthread\n', 'needs a CUstream parameter'),
                             ('local cuMemcpyHtoDAsync_v2 perthread=f:stream\n', 'without a CUstream parameter')):
            with self.assertRaises(lupgen.SpecError) as cm:
                self.gen(line)
            self.assertIn(needle, str(cm.exception))


if __name__ == '__main__':
    unittest.main()
