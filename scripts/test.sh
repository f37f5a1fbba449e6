#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The test command: dependencies, build, the format check on changed C
# lines, every test (unit, e2e on the simulated GPU). This is what CI runs.
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
scripts/check-format.sh
meson test -C build --print-errorlogs "$@"
# Issue 20: a machine without the toolkit builds with the wheel's headers
# (skipped when tests are named, as for a quick local run).
[ $# -gt 0 ] || tests/install/wheel_headers.sh
# The Debian packages: built, lintian-clean, installed, lupined and the
# example run from them, purged without leftovers (needs root).
[ $# -gt 0 ] || tests/install/deb.sh
