#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The test command: dependencies, build, every test (unit, e2e on the
# simulated GPU). This is what CI runs.
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
meson test -C build --print-errorlogs "$@"
