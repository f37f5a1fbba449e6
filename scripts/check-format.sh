#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checks that every line of C changed since .clang-format last changed
# follows it. Older code keeps its hand alignment (tables, trailing
# comments) until someone edits it; what is edited is formatted.
#
#   scripts/check-format.sh          check; exit 1 and show the diff if not
#   scripts/check-format.sh --fix    reformat those lines in the work tree
#
# Generated files (the piece-hash PTX) and test kernels are left alone.
set -eu
cd "$(dirname "$0")/.."
command -v git-clang-format >/dev/null || { echo "check-format: git-clang-format not found: apt-get install clang-format" >&2; exit 1; }
base=$(git log -1 --format=%H -- .clang-format)
if [ -z "$base" ]; then
        echo "check-format: .clang-format is not committed; nothing to compare with" >&2
        exit 1
fi
base=$(git rev-parse "$base~1" 2>/dev/null || echo "$base")
paths=(':(glob)**/*.c' ':(glob)**/*.h' ':!daemon/worker/gpu/*' ':!tests/kernels/*')
if [ "${1:-}" = --fix ]; then
        git clang-format --style=file --force "$base" -- "${paths[@]}" || true
        exit 0
fi
out=$(git clang-format --style=file --diff "$base" -- "${paths[@]}" 2>&1) || true
case "$out" in
"" | "no modified files to format" | "clang-format did not modify any files")
        echo "check-format: C lines changed since $(git rev-parse --short "$base") follow .clang-format"
        exit 0
        ;;
esac
echo "$out"
echo "check-format: the lines above do not follow .clang-format; scripts/check-format.sh --fix reformats them" >&2
exit 1
