#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs lupine's build and test dependencies from Debian's packages.
# The CUDA toolkit headers (cuda.h, cudaTypedefs.h) are the one thing Debian
# does not ship in the version lupine targets (13.0): an installed toolkit
# is used ($CUDA_INCLUDE, else /usr/local/cuda/include), otherwise they come
# from NVIDIA's wheel on PyPI (scripts/fetch-cuda-headers.sh). The choice is
# written to .deps/cuda-include-dir for scripts/build.sh, and said.
# scripts/install-deps.sh [--deb]
set -eu
cd "$(dirname "$0")/.."
PKGS="build-essential clang-format meson ninja-build pkg-config python3 python3-pip liburing-dev libjson-c-dev libsystemd-dev libssl-dev openssl ca-certificates libcmocka-dev libmicrohttpd-dev prometheus systemd systemd-container"
# --deb: also what building and checking the Debian packages needs
# (tests/install/deb.sh; dpkg-dev comes with build-essential).
if [ "${1:-}" = --deb ]; then
        PKGS="$PKGS debhelper lintian"
fi
missing=""
for p in $PKGS; do
        dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
        SUDO=""
        [ "$(id -u)" -eq 0 ] || SUDO=sudo
        echo "installing:$missing"
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi
# pynvml, for the NVML test (tests/e2e/test_nvml.py): Debian's python3-pynvml
# where the release has it, else NVIDIA's nvidia-ml-py from PyPI.
if ! python3 -c 'import pynvml' 2>/dev/null; then
        SUDO=""
        [ "$(id -u)" -eq 0 ] || SUDO=sudo
        # apt-cache show succeeds for a name that is only referenced, so
        # the install itself decides (bookworm has no candidate).
        if ! DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-pynvml 2>/dev/null; then
                python3 -m pip install -q nvidia-ml-py 2>/dev/null ||
                        python3 -m pip install -q --break-system-packages nvidia-ml-py ||
                        echo "warning: pynvml not installed: the NVML test skips its pynvml part" >&2
        fi
fi
inc=${CUDA_INCLUDE:-/usr/local/cuda/include}
mkdir -p .deps
if [ -f "$inc/cuda.h" ] && [ -f "$inc/cudaTypedefs.h" ]; then
        echo "CUDA headers: the installed toolkit's, $inc"
else
        echo "CUDA headers: none at $inc; using NVIDIA's nvidia-cuda-runtime wheel from PyPI"
        inc=$(scripts/fetch-cuda-headers.sh) || {
                echo "error: no CUDA 13 headers. Install the CUDA toolkit (NVIDIA's apt repository:" >&2
                echo "       cuda-driver-dev-13-0 and cuda-cudart-dev-13-0), set CUDA_INCLUDE to a directory" >&2
                echo "       holding cuda.h and cudaTypedefs.h, or let pip reach PyPI." >&2
                exit 1
        }
        echo "CUDA headers: $inc (nvidia-cuda-runtime 13.0.96, SHA-256 checked)"
fi
echo "$inc" > .deps/cuda-include-dir
