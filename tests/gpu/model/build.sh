#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds every tests/gpu/model/*.cu program with nvcc (issue 14's families).
# A program's extra link flags come from its "// link: ..." line.
#   tests/gpu/model/build.sh OUT_DIR
set -eu
out=${1:?usage: build.sh OUT_DIR}
here=$(dirname "$0")
mkdir -p "$out"
arch=(-gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90)
for src in "$here"/*.cu; do
        [ -e "$src" ] || continue
        name=$(basename "$src" .cu)
        read -r -a link <<<"$(sed -n 's|^// link: ||p' "$src" | head -n 1)"
        nvcc -O2 "${arch[@]}" -I"$here" -o "$out/$name" "$src" -lcuda ${link[@]+"${link[@]}"}
done
echo "built in $out"
