#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the runtime-API test programs with nvcc, both ways nvcc links the
# runtime: statically (its default) and with -cudart shared.
#   tests/gpu/rt/build.sh OUT_DIR
set -eu
out=${1:?usage: build.sh OUT_DIR}
here=$(dirname "$0")
mkdir -p "$out"
arch=(-gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90)
for link in static shared; do
        flags=()
        [ $link = shared ] && flags=(-cudart shared)
        nvcc -O2 -no-compress "${arch[@]}" "${flags[@]}" -o "$out/rt_init_$link" "$here/../../rt/rt_init.cu"
        nvcc -O2 "${arch[@]}" "${flags[@]}" -o "$out/rt_full_$link" "$here/rt_full.cu" -lcublas -lcudnn
        nvcc -O2 "${arch[@]}" "${flags[@]}" -o "$out/rt_families_$link" "$here/rt_families.cu" -lcuda
done
echo "built in $out"
