#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Configures (once) and builds lupine into ./build.
set -eu
cd "$(dirname "$0")/.."
# the CUDA headers scripts/install-deps.sh chose (the toolkit's, or the wheel's)
inc=$(cat .deps/cuda-include-dir 2>/dev/null || echo "${CUDA_INCLUDE:-/usr/local/cuda/include}")
if [ ! -f build/build.ninja ]; then
        meson setup build -Dtoolkit_include="$inc"
fi
ninja -C build
