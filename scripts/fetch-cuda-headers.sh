#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The CUDA 13.0 driver API headers (cuda.h, cudaTypedefs.h and the headers
# they include) from NVIDIA's nvidia-cuda-runtime wheel on PyPI, for
# machines without the CUDA toolkit. Only the headers are unpacked, into
# .deps/cuda-include, after the wheel's SHA-256 is checked against the
# pinned one. Prints the include directory. A toolkit that is installed wins
# (scripts/install-deps.sh decides; this script only fetches).
#
# NVML needs no header, so nvml.h is not fetched: libnvidia-ml.so.1's shim
# is generated from abi/nvml_api.spec and declares its own types
# (common/nvml_types.h); docs/running.md, "Headers".
set -eu
cd "$(dirname "$0")/.."
PKG=nvidia-cuda-runtime
VER=13.0.96
WHEEL=nvidia_cuda_runtime-13.0.96-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl
SHA256=7f82250d7782aa23b6cfe765ecc7db554bd3c2870c43f3d1821f1d18aebf0548
DEST=.deps/cuda-include
if [ -f "$DEST/cuda.h" ] && [ -f "$DEST/.from-$PKG-$VER" ]; then
        echo "$PWD/$DEST"
        exit 0
fi
mkdir -p .deps/wheels
if [ ! -f ".deps/wheels/$WHEEL" ]; then
        echo "fetching the CUDA $VER headers from PyPI ($PKG $VER)..." >&2
        # The x86_64 wheel on every host: only its headers are used, and they
        # are the same for every architecture.
        python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_17_x86_64 \
                --python-version 3.8 "$PKG==$VER" -d .deps/wheels >&2 ||
                { echo "error: pip could not download $PKG==$VER (is PyPI reachable?)" >&2; exit 1; }
fi
got=$(sha256sum ".deps/wheels/$WHEEL" | cut -d' ' -f1)
if [ "$got" != "$SHA256" ]; then
        echo "error: .deps/wheels/$WHEEL has SHA-256 $got, not the pinned $SHA256; removed" >&2
        rm -f ".deps/wheels/$WHEEL"
        exit 1
fi
rm -rf "$DEST.tmp"
mkdir -p "$DEST.tmp"
python3 - ".deps/wheels/$WHEEL" "$DEST.tmp" <<'PY'
import os, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
prefix = 'nvidia/cu13/include/'
n = 0
for name in z.namelist():
    rel = name[len(prefix):]
    if not name.startswith(prefix) or not rel.endswith(('.h', '.hpp')) or '..' in rel.split('/'):
        continue
    out = os.path.join(sys.argv[2], rel)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, 'wb') as f:
        f.write(z.read(name))
    n += 1
if not os.path.exists(os.path.join(sys.argv[2], 'cuda.h')) or not os.path.exists(os.path.join(sys.argv[2], 'cudaTypedefs.h')):
    sys.exit('error: the wheel holds no cuda.h or cudaTypedefs.h')
print(f'{n} headers unpacked', file=sys.stderr)
PY
touch "$DEST.tmp/.from-$PKG-$VER"
rm -rf "$DEST"
mv "$DEST.tmp" "$DEST"
echo "$PWD/$DEST"
