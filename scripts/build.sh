#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Configures (once) and builds lupine into ./build.
set -eu
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
        meson setup build -Dtoolkit_include="${CUDA_INCLUDE:-/usr/local/cuda/include}"
fi
ninja -C build
